/* backplane core: making and destroying communicators.
 *
 * bp_comm_init_all starts one thread per rank (comm_create is collective
 * and blocks until every rank has called it) over an in-process bootstrap.
 * The device's plugin makes the rank when it has a comm table; otherwise
 * the core's host engine does and every call is staged through host
 * memory (comm_staged.c).
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "comm/comm_internal.h"

static uint64_t timeout_of(const bp_comm_options_t* o) {
  return (o && o->struct_size >= BP_COMM_OPTIONS_V1_SIZE) ? o->timeout_ns : 0;
}
static uint32_t flags_of(const bp_comm_options_t* o) {
  return (o && o->struct_size >= BP_COMM_OPTIONS_V1_SIZE) ? o->flags : 0;
}

static bp_comm_t* comm_alloc(bp_device_t* device) {
  bp_comm_t* c = calloc(1, sizeof(*c));
  if (!c) return NULL;
  if (pthread_mutex_init(&c->mu, NULL) != 0) {
    free(c);
    return NULL;
  }
  pthread_cond_init(&c->idle, NULL);
  c->device = device;
  return c;
}

static void comm_free(bp_comm_t* c) {
  pthread_cond_destroy(&c->idle);
  pthread_mutex_destroy(&c->mu);
  free(c);
}

/* Asks `plugin`'s comm table for a rank on `device`; the thread's message
 * is set on failure. */
static bp_status_t plugin_rank(bp_plugin_t* plugin, bpp_device_t device, const bp_bootstrap_t* bs,
                               uint64_t timeout_ns, bpp_comm_t* out) {
  bp_comm_create_info_t info = {.struct_size = sizeof(info), .timeout_ns = timeout_ns,
                                .bootstrap = bs};
  bp_status_t st = BP__NOTE_CALL(plugin, "comm_create", NULL,
                                 plugin->comm.comm_create(device, &info, out));
  return st == BP_OK ? st : bp__plugin_error(plugin, st, "comm_create");
}

/* Rank and size from the plugin (after a split or a launcher's world). */
static bp_status_t plugin_info(bp_plugin_t* plugin, bpp_comm_t comm, int32_t* rank,
                               int32_t* size) {
  if (!plugin->comm.comm_info)
    return bp__error(BP_UNIMPLEMENTED, "plugin %s lacks comm_info", plugin->name);
  bp_status_t st = BP__NOTE_CALL(plugin, "comm_info", NULL,
                                 plugin->comm.comm_info(comm, rank, size));
  return st == BP_OK ? st : bp__plugin_error(plugin, st, "comm_info");
}

/* A rank through another plugin's communicator (an engine that reaches
 * host memory: BPP_COMM_HOST_POINTERS), tried in load order. Every rank
 * walks the same list and each attempt fails or succeeds on all ranks
 * together (comm_create is collective), so they agree on the engine.
 * own_refusal ("" if none): why the device's own plugin made no rank. */
static bp_status_t bridge_rank(bp_comm_t* c, const bp_bootstrap_t* bs, uint64_t timeout_ns,
                               const char* own_refusal) {
  bp_context_t* ctx = c->device->plugin->context;
  bp_status_t st = BP_UNIMPLEMENTED;
  char tried[512] = "";
  size_t len = (size_t)snprintf(tried, sizeof(tried), "%s", own_refusal);
  for (uint32_t i = 0; i < ctx->plugin_count; ++i) {
    bp_plugin_t* p = ctx->plugins[i];
    if (p == c->device->plugin || !p->has_comm || !(p->comm.flags & BPP_COMM_HOST_POINTERS) ||
        p->device_count == 0 || !p->devices[0] || !p->comm.comm_create)
      continue;
    st = plugin_rank(p, p->devices[0]->handle, bs, timeout_ns, &c->bridge);
    if (st == BP_OK && !bs) st = plugin_info(p, c->bridge, &c->rank, &c->size);
    if (st == BP_OK) {
      c->bridge_plugin = p;
      c->tier = BP_COMM_TIER_HOST_STAGED;
      c->link = BP_LINK_NETWORK; /* another process, possibly machine */
      return BP_OK;
    }
    if (c->bridge) {
      BP__NOTE_CALL_VOID(p, "comm_destroy", p->comm.comm_destroy(c->bridge));
      c->bridge = NULL;
    }
    len += (size_t)snprintf(tried + len, len < sizeof(tried) ? sizeof(tried) - len : 0, "%s%s: %s",
                            len ? "; " : "", p->name, bp_status_message());
  }
  return bp__error(st, "no plugin offers collectives across these ranks (%s)",
                   len ? tried : "load one that does: the mpi plugin under mpirun");
}

/* After the device's own plugin was asked for the launcher's world (a
 * NULL bootstrap, which the mpi plugin answers under mpirun): its rank and
 * size on success; on failure UNIMPLEMENTED with the reason in `refusal`,
 * so that another plugin's communicator is tried (a plugin whose ranks
 * need a bootstrap, as the cpu plugin's, refuses NULL on every rank
 * alike). */
static bp_status_t launcher_world(bp_plugin_t* plugin, bp_comm_t* c, bp_status_t st,
                                  char* refusal, size_t cap) {
  if (st == BP_OK) st = plugin_info(plugin, c->native, &c->rank, &c->size);
  if (st == BP_OK) {
    c->link = BP_LINK_NETWORK; /* other processes, possibly machines */
    return BP_OK;
  }
  snprintf(refusal, cap, "%s: %s", plugin->name, bp_status_message());
  if (c->native) {
    BP__NOTE_CALL_VOID(plugin, "comm_destroy", plugin->comm.comm_destroy(c->native));
    c->native = NULL;
  }
  return BP_UNIMPLEMENTED;
}

/* Makes one rank; on failure the thread's message is set. bs NULL: the
 * launcher's world. */
static bp_status_t make_rank(bp_device_t* device, const bp_bootstrap_t* bs, uint64_t timeout_ns,
                             uint32_t flags, bp_comm_t** out) {
  static const char fn[] = "bp_comm_create";
  bp_plugin_t* plugin = device->plugin;
  bp_comm_t* c = comm_alloc(device);
  if (!c) return bp__error(BP_RESOURCE_EXHAUSTED, "%s: out of memory", fn);
  c->rank = bs ? bs->rank : -1;
  c->size = bs ? bs->nranks : 0;
  c->link = BP_LINK_HOST; /* peers unknown: bp_comm_init_all refines it */
  bp_status_t st = BP_UNIMPLEMENTED;
  char own_refusal[256] = "";
  if (plugin->has_comm && plugin->comm.comm_create) {
    c->tier = plugin->comm.tier;
    st = plugin_rank(plugin, device->handle, bs, timeout_ns, &c->native);
    if (!bs) st = launcher_world(plugin, c, st, own_refusal, sizeof(own_refusal));
  } else if (bs && !(flags & BP_COMM_PREFER_PLUGIN_ENGINE)) {
    c->tier = BP_COMM_TIER_HOST_STAGED;
    bp_kit_comm_error_t e;
    st = bp_kit_comm_create(bs, timeout_ns, &c->engine, &e);
    if (st != BP_OK) st = bp__error(st, "%s: %s (host-staged for %s)", fn, e.text, device->name);
  }
  /* Ranks in several processes (UNIMPLEMENTED on every rank alike), or
   * the launcher's world: another plugin's communicator. */
  if (st == BP_UNIMPLEMENTED) st = bridge_rank(c, bs, timeout_ns, own_refusal);
  if (st != BP_OK) {
    comm_free(c);
    return st;
  }
  *out = c;
  return BP_OK;
}

bp_status_t bp_comm_create(bp_device_t* device, const bp_bootstrap_t* bootstrap,
                           const bp_comm_options_t* options, bp_comm_t** out_comm) {
  static const char fn[] = "bp_comm_create";
  bp__clear_error();
  BP__REQUIRE_ARG(fn, out_comm);
  *out_comm = NULL;
  BP__REQUIRE_ARG(fn, device);
  if (bootstrap && (bootstrap->struct_size < BP_BOOTSTRAP_V1_SIZE || !bootstrap->allgather ||
                    !bootstrap->broadcast))
    return bp__error(BP_INVALID_ARGUMENT, "%s: the bootstrap is incomplete", fn);
  if (bootstrap &&
      (bootstrap->nranks < 1 || bootstrap->rank < 0 || bootstrap->rank >= bootstrap->nranks))
    return bp__error(BP_INVALID_ARGUMENT, "%s: rank %d of %d is out of range", fn,
                     bootstrap->rank, bootstrap->nranks);
  if (flags_of(options) & ~(uint32_t)BP_COMM_PREFER_PLUGIN_ENGINE)
    return bp__error(BP_INVALID_ARGUMENT, "%s: unknown option flags 0x%x", fn,
                     flags_of(options));
  return make_rank(device, bootstrap, timeout_of(options), flags_of(options), out_comm);
}

typedef struct rank_job {
  bp_device_t* device;
  const bp_bootstrap_t* bootstrap;
  uint64_t timeout_ns;
  uint32_t flags;
  bp_comm_t* comm;
  bp_status_t status;
  char message[512];
} rank_job_t;

static void* rank_main(void* arg) {
  rank_job_t* j = arg;
  j->status = make_rank(j->device, j->bootstrap, j->timeout_ns, j->flags, &j->comm);
  if (j->status != BP_OK) snprintf(j->message, sizeof(j->message), "%s", bp_status_message());
  return NULL;
}

bp_status_t bp_comm_init_all(bp_device_t* const* devices, uint32_t count,
                             const bp_comm_options_t* options, bp_comm_t** out_comms) {
  static const char fn[] = "bp_comm_init_all";
  bp__clear_error();
  BP__REQUIRE_ARG(fn, devices);
  BP__REQUIRE_ARG(fn, out_comms);
  if (count == 0 || count > 4096)
    return bp__error(BP_INVALID_ARGUMENT, "%s: %u ranks (1 to 4096)", fn, count);
  if (flags_of(options) & ~(uint32_t)BP_COMM_PREFER_PLUGIN_ENGINE)
    return bp__error(BP_INVALID_ARGUMENT, "%s: unknown option flags 0x%x", fn,
                     flags_of(options));
  for (uint32_t r = 0; r < count; ++r) {
    out_comms[r] = NULL;
    if (!devices[r]) return bp__error(BP_INVALID_ARGUMENT, "%s: devices[%u] is NULL", fn, r);
    if (devices[r]->plugin != devices[0]->plugin)
      return bp__error(BP_INVALID_ARGUMENT, "%s: devices[%u] (%s) is not of plugin %s like "
                       "devices[0]", fn, r, devices[r]->name, devices[0]->plugin->name);
  }
  bp_bootstrap_t* bs = calloc(count, sizeof(*bs));
  rank_job_t* jobs = calloc(count, sizeof(*jobs));
  pthread_t* threads = calloc(count, sizeof(*threads));
  void* shared = NULL;
  bp_status_t st = (!bs || !jobs || !threads) ? BP_RESOURCE_EXHAUSTED
                   : bp_kit_local_bootstrap_create((int32_t)count, bs, &shared);
  if (st != BP_OK) {
    free(bs), free(jobs), free(threads);
    return bp__error(st, "%s: out of memory for %u ranks", fn, count);
  }
  uint32_t started = 0;
  for (uint32_t r = 0; r < count; ++r) {
    jobs[r] = (rank_job_t){.device = devices[r], .bootstrap = &bs[r],
                           .timeout_ns = timeout_of(options), .flags = flags_of(options)};
    if (r == 0) continue; /* rank 0 runs on this thread */
    if (pthread_create(&threads[r], NULL, rank_main, &jobs[r]) != 0) break;
    started = r;
  }
  if (started + 1 < count) {
    /* Threads that did start wait for the missing ranks until the
     * bootstrap times out; make the missing ranks here, one by one, is
     * impossible (they block), so fail them through the timeout. */
    jobs[0].status = BP_RESOURCE_EXHAUSTED;
    snprintf(jobs[0].message, sizeof(jobs[0].message), "%s: could not start a thread per rank",
             fn);
  } else {
    rank_main(&jobs[0]);
  }
  for (uint32_t r = 1; r <= started; ++r) pthread_join(threads[r], NULL);
  bp_kit_local_bootstrap_destroy(shared);
  st = BP_OK;
  uint32_t bad = 0;
  for (uint32_t r = 0; r < count; ++r)
    if (jobs[r].status != BP_OK && st == BP_OK) {
      st = jobs[r].status;
      bad = r;
    }
  if (st != BP_OK) {
    for (uint32_t r = 0; r < count; ++r) bp_comm_destroy(jobs[r].comm);
    char msg[512];
    snprintf(msg, sizeof(msg), "%s", jobs[bad].message);
    free(bs), free(jobs), free(threads);
    return bp__error(st, "%s: rank %u: %s", fn, bad, msg);
  }
  /* The slowest link between any two of the ranks' devices. */
  uint32_t link = BP_LINK_SAME_DEVICE;
  for (uint32_t a = 0; a < count; ++a)
    for (uint32_t b = a + 1; b < count; ++b) {
      const uint32_t t = bp_device_link_tier(devices[a], devices[b]);
      if (t > link) link = t;
    }
  for (uint32_t r = 0; r < count; ++r) {
    out_comms[r] = jobs[r].comm;
    if (!out_comms[r]->bridge) out_comms[r]->link = link;
  }
  free(bs), free(jobs), free(threads);
  return BP_OK;
}

bp_status_t bp_comm_split(bp_comm_t* comm, int32_t color, int32_t key, bp_comm_t** out_comm) {
  static const char fn[] = "bp_comm_split";
  bp__clear_error();
  BP__REQUIRE_ARG(fn, out_comm);
  *out_comm = NULL;
  BP__REQUIRE_ARG(fn, comm);
  bp_comm_t* c = comm_alloc(comm->device);
  if (!c) return bp__error(BP_RESOURCE_EXHAUSTED, "%s: out of memory", fn);
  c->tier = comm->tier;
  c->link = comm->link; /* a subset of the ranks: no slower */
  bp_status_t st;
  bp_plugin_t* plugin = comm->native ? comm->device->plugin : comm->bridge_plugin;
  bpp_comm_t parent = comm->native ? comm->native : comm->bridge;
  if (parent) {
    bpp_comm_t child = NULL;
    bp_comm_create_info_t info = {.struct_size = sizeof(info)};
    st = plugin->comm.comm_split
             ? BP__NOTE_CALL(plugin, "comm_split", NULL,
                             plugin->comm.comm_split(parent, color, key, &info, &child))
             : bp__error(BP_UNIMPLEMENTED, "%s: plugin %s cannot split", fn, plugin->name);
    if (st != BP_OK && plugin->comm.comm_split) st = bp__plugin_error(plugin, st, "comm_split");
    if (st == BP_OK && child) {
      st = plugin_info(plugin, child, &c->rank, &c->size);
      if (st != BP_OK) {
        BP__NOTE_CALL_VOID(plugin, "comm_destroy", plugin->comm.comm_destroy(child));
        child = NULL;
      }
    }
    if (comm->native)
      c->native = child;
    else {
      c->bridge = child;
      c->bridge_plugin = plugin;
    }
  } else {
    bp_kit_comm_error_t e;
    st = bp_kit_comm_split(comm->engine, color, key, 0, &c->engine, &e);
    if (st != BP_OK) st = bp__error(st, "%s: %s", fn, e.text);
  }
  if (st != BP_OK || (!c->native && !c->engine && !c->bridge)) {
    comm_free(c);
    return st;
  }
  if (c->engine) {
    c->rank = bp_kit_comm_rank(c->engine);
    c->size = bp_kit_comm_size(c->engine);
  }
  *out_comm = c;
  return BP_OK;
}

void bp_comm_destroy(bp_comm_t* comm) {
  if (!comm) return;
  pthread_mutex_lock(&comm->mu);
  while (comm->queued) pthread_cond_wait(&comm->idle, &comm->mu);
  pthread_mutex_unlock(&comm->mu);
  bp__comm_staged_collect(comm);
  bp__comm_staged_free_pool(comm);
  if (comm->native) {
    bp_plugin_t* plugin = comm->device->plugin;
    BP__NOTE_CALL_VOID(plugin, "comm_destroy", plugin->comm.comm_destroy(comm->native));
  }
  if (comm->bridge) {
    bp_plugin_t* plugin = comm->bridge_plugin;
    BP__NOTE_CALL_VOID(plugin, "comm_destroy", plugin->comm.comm_destroy(comm->bridge));
  }
  bp_kit_comm_destroy(comm->engine);
  comm_free(comm);
}

bp_status_t bp_comm_abort(bp_comm_t* comm) {
  bp__clear_error();
  BP__REQUIRE_ARG("bp_comm_abort", comm);
  if (comm->engine) {
    bp_kit_comm_abort(comm->engine);
    return BP_OK;
  }
  bp_plugin_t* plugin = comm->native ? comm->device->plugin : comm->bridge_plugin;
  bpp_comm_t pc = comm->native ? comm->native : comm->bridge;
  if (!plugin->comm.comm_abort)
    return bp__error(BP_UNIMPLEMENTED, "bp_comm_abort: plugin %s cannot abort", plugin->name);
  bp_status_t st = BP__NOTE_CALL(plugin, "comm_abort", NULL, plugin->comm.comm_abort(pc));
  return st == BP_OK ? st : bp__plugin_error(plugin, st, "comm_abort");
}

bp_status_t bp_comm_get_async_error(bp_comm_t* comm) {
  bp__clear_error();
  BP__REQUIRE_ARG("bp_comm_get_async_error", comm);
  if (comm->engine) {
    bp_kit_comm_error_t e;
    bp_status_t st = bp_kit_comm_status(comm->engine, &e);
    return st == BP_OK ? st : bp__error(st, "%s", e.text);
  }
  bp_plugin_t* plugin = comm->native ? comm->device->plugin : comm->bridge_plugin;
  bpp_comm_t pc = comm->native ? comm->native : comm->bridge;
  if (!plugin->comm.comm_get_async_error) return BP_OK;
  bp_status_t st = BP__NOTE_CALL(plugin, "comm_get_async_error", NULL,
                                 plugin->comm.comm_get_async_error(pc));
  return st == BP_OK ? st : bp__plugin_error(plugin, st, "comm_get_async_error");
}

int32_t bp_comm_rank(const bp_comm_t* comm) { return comm ? comm->rank : -1; }
int32_t bp_comm_size(const bp_comm_t* comm) { return comm ? comm->size : 0; }
bp_device_t* bp_comm_device(const bp_comm_t* comm) { return comm ? comm->device : NULL; }
uint32_t bp_comm_tier(const bp_comm_t* comm) { return comm ? comm->tier : 0; }
