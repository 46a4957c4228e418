/* backplane core: groups of collective calls (bp_comm_group_begin/end).
 *
 * Thread-local. Native calls go to their plugin at once, inside that
 * plugin's own group, which the core opens the first time the group meets
 * the plugin and closes at the outermost bp_comm_group_end. Host-staged
 * calls are kept here and queued at the end, one engine group per
 * (communicator, stream).
 */
#include <stdlib.h>

#include "comm/comm_internal.h"

#define MAX_PLUGINS 32

typedef struct staged_item {
  bp_kit_group_key_t key; /* comm, stream */
  bp__comm_call_t call;
} staged_item_t;

static _Thread_local struct {
  uint32_t depth;
  uint32_t num_plugins;
  bp_plugin_t* plugins[MAX_PLUGINS];
  uint32_t n, cap;
  staged_item_t* items;
} t_group;

int bp__comm_group_open(void) { return t_group.depth > 0; }

bp_status_t bp__comm_group_join_plugin(bp_plugin_t* plugin) {
  if (t_group.depth == 0) return BP_OK;
  for (uint32_t i = 0; i < t_group.num_plugins; ++i)
    if (t_group.plugins[i] == plugin) return BP_OK;
  if (t_group.num_plugins == MAX_PLUGINS)
    return bp__error(BP_RESOURCE_EXHAUSTED, "bp_comm_group: more than %d plugins in one group",
                     MAX_PLUGINS);
  if (!plugin->comm.group_begin || !plugin->comm.group_end)
    return bp__error(BP_UNIMPLEMENTED, "bp_comm_group: plugin %s has no groups", plugin->name);
  bp_status_t st = BP__NOTE_CALL(plugin, "group_begin", NULL, plugin->comm.group_begin());
  if (st != BP_OK) return bp__plugin_error(plugin, st, "group_begin");
  t_group.plugins[t_group.num_plugins++] = plugin;
  return BP_OK;
}

bp_status_t bp__comm_group_add_staged(bp_comm_t* comm, bp_stream_t* stream,
                                      const bp__comm_call_t* call) {
  if (call->kit.kind == BP_KIT_COLL_ALL_TO_ALLV)
    return bp__error(BP_UNIMPLEMENTED, "bp_comm_all_to_allv: not inside a group on the "
                     "host-staged path");
  if (t_group.n == t_group.cap) {
    uint32_t cap = t_group.cap ? t_group.cap * 2 : 16;
    staged_item_t* items = realloc(t_group.items, sizeof(*items) * cap);
    if (!items) return bp__error(BP_RESOURCE_EXHAUSTED, "bp_comm_group: out of memory");
    t_group.items = items;
    t_group.cap = cap;
  }
  /* The tensors are retained by the queued job later; until group end the
   * application keeps them alive (as for every enqueued call's operands). */
  t_group.items[t_group.n++] = (staged_item_t){{comm, stream}, *call};
  return BP_OK;
}

static bp_status_t issue_bucket(void* user, const uint32_t* idx, uint32_t k) {
  const staged_item_t* items = user;
  bp__comm_call_t* calls = malloc(sizeof(*calls) * k);
  if (!calls) return bp__error(BP_RESOURCE_EXHAUSTED, "bp_comm_group_end: out of memory");
  for (uint32_t i = 0; i < k; ++i) calls[i] = items[idx[i]].call;
  const staged_item_t* head = &items[idx[0]];
  bp_status_t st = bp__comm_staged_enqueue((bp_comm_t*)head->key.comm,
                                           (bp_stream_t*)head->key.stream, calls, k);
  free(calls);
  return st;
}

bp_status_t bp_comm_group_begin(void) {
  bp__clear_error();
  t_group.depth++;
  return BP_OK;
}

bp_status_t bp_comm_group_end(void) {
  bp__clear_error();
  if (t_group.depth == 0)
    return bp__error(BP_FAILED_PRECONDITION, "bp_comm_group_end: no group is open");
  if (--t_group.depth) return BP_OK;
  /* Host-staged calls, one engine group per (communicator, stream). */
  bp_status_t first = bp_kit_group_for_each(t_group.items, t_group.n, sizeof(staged_item_t),
                                            issue_bucket, t_group.items);
  if (first == BP_RESOURCE_EXHAUSTED && !bp_status_message()[0])
    first = bp__error(first, "bp_comm_group_end: out of memory");
  free(t_group.items);
  t_group.items = NULL;
  t_group.n = t_group.cap = 0;
  /* Native plugins' groups, in the order they joined. */
  for (uint32_t i = 0; i < t_group.num_plugins; ++i) {
    bp_plugin_t* plugin = t_group.plugins[i];
    bp_status_t st = BP__NOTE_CALL(plugin, "group_end", NULL, plugin->comm.group_end());
    if (st != BP_OK && first == BP_OK) first = bp__plugin_error(plugin, st, "group_end");
  }
  t_group.num_plugins = 0;
  return first;
}
