/* Pass: regions through the plugins' exec tables, after placement and the
 * fused-op rewrites (fuse.c).
 *
 * Per device: its live nodes are offered to its plugin as one GRAPH region
 * (bp_device_claim_region). Each group the plugin answers with two or more
 * nodes becomes a candidate region once the compiler checked it is convex
 * (no path leaves it and comes back; a group that is not is dropped, its
 * nodes run alone). Candidates are compiled (bp_region_compile) as an
 * elementwise program, a matmul epilogue or a graph region
 * (region_desc.c); a refusal is recorded with its reason and splits the
 * region into its first and second half (in node order; both halves of a
 * convex set in topological order are convex), each tried again, down to
 * single nodes, which run eagerly. A plugin without an exec table answers
 * one group per node and refuses every region: every node stays eager.
 *
 * Where the claim left elementwise nodes alone (in no group of two or
 * more: a refused group's nodes are not offered again) but the plugin declares
 * elementwise programs (bp_device_query_fusion: a plugin without
 * region_claim, such as the Vulkan one), the compiler forms convex chains
 * of them itself and offers each as a program.
 *
 * Before the claims, reduction prologues (reduce_prologue.c): where the
 * device declares them, an elementwise chain read only by a reduction is
 * compiled with it as one region; its nodes are then not offered again.
 *
 * Then the run order: regions and the other nodes, topologically (each
 * unit after the producers of what it reads, ties by the smallest node
 * index), so a region's nodes run together even when an unrelated node
 * sits between them in index order.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../graph_exec.h"

void bpg_regions_free(bp_graph_exec_t* x) {
  for (uint32_t i = 0; i < x->num_cregions; ++i) {
    bp_region_release(x->regions[i].region);
    free(x->regions[i].nodes);
    free(x->regions[i].args);
  }
  free(x->regions);
  free(x->node_region);
  free(x->order);
  x->regions = NULL;
  x->node_region = NULL;
  x->order = NULL;
  x->num_cregions = x->num_order = x->num_refusals = 0;
}

/* 1 when `nodes` (ascending, count n) is convex in g: no node outside it
 * that depends on a member feeds a member. */
int bpg_nodes_convex(const bp_graph_t* g, const uint32_t* nodes, uint32_t n, uint8_t* mark) {
  if (n < 2) return 1;
  uint32_t lo = nodes[0], hi = nodes[n - 1];
  /* mark: 1 member, 2 outside but downstream of a member. */
  for (uint32_t k = 0; k < n; ++k) mark[nodes[k]] = 1;
  int ok = 1;
  for (uint32_t m = lo; m <= hi && ok; ++m) {
    const bpg_node_t* node = &g->nodes[m];
    if (node->dead) continue;
    int from_member = 0, from_tainted = 0;
    for (uint32_t i = 0; i < node->num_in; ++i) {
      uint32_t v = node->in[i];
      if (v == BP_GRAPH_NO_VALUE || g->values[v].kind != BP_GRAPH_VALUE_NODE) continue;
      uint32_t p = g->values[v].producer;
      if (p < lo || p > hi) continue;
      from_member |= mark[p] == 1;
      from_tainted |= mark[p] == 2;
    }
    if (mark[m] == 1) ok = !from_tainted;
    else if (from_member || from_tainted) mark[m] = 2;
  }
  for (uint32_t m = lo; m <= hi; ++m) mark[m] = 0;
  return ok;
}

bp_status_t bpg_region_compile(bp_graph_exec_t* x, bpg_region_t* r, bp_support_t* refusal) {
  bpg_rdesc_t* d = NULL;
  bp_status_t st = bpg_region_desc_build(x, r, 0, &d);
  if (st == BP_UNIMPLEMENTED) { /* the program is over the compiler's limits: the plugin's builder may fit it */
    st = bpg_region_desc_build(x, r, BP_REGION_GRAPH, &d);
  }
  if (st != BP_OK) return st;
  memset(refusal, 0, sizeof(*refusal));
  refusal->struct_size = sizeof(*refusal);
  st = bp_region_compile(x->devs[r->dev].device, bpg_region_desc(d), refusal, &r->region);
  bpg_region_desc_free(d);
  if (st != BP_OK) return st;
  bp_region_info_t info;
  memset(&info, 0, sizeof(info));
  info.struct_size = sizeof(info);
  st = bp_region_get_info(r->region, &info);
  if (st != BP_OK) return st;
  r->workspace_bytes = info.workspace_bytes;
  r->num_aliases = 0;
  for (uint32_t a = 0; a < info.num_aliases && r->num_aliases < 8; ++a) {
    const bp_region_alias_t* al =
        (const bp_region_alias_t*)(const void*)((const char*)info.aliases + (size_t)a * info.alias_stride);
    if (al->output < r->num_inputs || al->output >= r->num_inputs + r->num_outputs || al->input >= r->num_inputs) continue;
    r->alias_out[r->num_aliases] = al->output;
    r->alias_in[r->num_aliases] = al->input;
    r->num_aliases++;
  }
  r->est_ns = info.time_ns;
  if (r->est_ns <= 0) {
    for (uint32_t k = 0; k < r->num_nodes; ++k) r->est_ns += bpg_node_cost(x, r->nodes[k], r->dev);
  }
  return BP_OK;
}

void bpg_region_refused(bp_graph_exec_t* x, uint32_t dev, const uint32_t* nodes, uint32_t n, bp_status_t st,
                        const bp_support_t* why) {
  if (x->num_refusals >= BPG_MAX_REFUSALS) return;
  bpg_refusal_t* f = &x->refusals[x->num_refusals++];
  f->dev = dev;
  f->first = nodes[0];
  f->num_nodes = n;
  f->reason = st == BP_UNIMPLEMENTED ? why->reason : BP_SUPPORT_OP;
  const char* m = st == BP_UNIMPLEMENTED && why->message[0] ? why->message : bp_status_message();
  size_t len = strnlen(m, sizeof(f->message) - 1);
  memcpy(f->message, m, len);
  f->message[len] = '\0';
}

bp_status_t bpg_region_keep(bp_graph_exec_t* x, bpg_region_t* r) {
  bpg_region_t* p = realloc(x->regions, sizeof(bpg_region_t) * (x->num_cregions + 1));
  if (p == NULL) {
    bp_region_release(r->region);
    free(r->nodes);
    free(r->args);
    return bpg_error(BP_RESOURCE_EXHAUSTED, "regions: out of memory");
  }
  x->regions = p;
  for (uint32_t k = 0; k < r->num_nodes; ++k) x->node_region[r->nodes[k]] = x->num_cregions;
  x->regions[x->num_cregions++] = *r;
  return BP_OK;
}

/* Compiles nodes[0..n) on dev as one region, splitting on refusal. */
static bp_status_t bpg_try_region(bp_graph_exec_t* x, uint32_t dev, const uint32_t* nodes, uint32_t n) {
  if (n < 2) return BP_OK;
  bpg_region_t r;
  memset(&r, 0, sizeof(r));
  r.dev = dev;
  r.num_nodes = n;
  r.nodes = malloc(sizeof(uint32_t) * n);
  if (r.nodes == NULL) return bpg_error(BP_RESOURCE_EXHAUSTED, "regions: out of memory");
  memcpy(r.nodes, nodes, sizeof(uint32_t) * n);
  bp_support_t why;
  bp_status_t st = bpg_region_compile(x, &r, &why);
  if (st == BP_OK) return bpg_region_keep(x, &r);
  free(r.nodes);
  free(r.args);
  if (st == BP_RESOURCE_EXHAUSTED) return st;
  /* Refused (or a region the plugin's checks do not take): split. */
  bpg_region_refused(x, dev, nodes, n, st, &why);
  uint32_t half = n / 2;
  st = bpg_try_region(x, dev, nodes, half);
  if (st == BP_OK) st = bpg_try_region(x, dev, nodes + half, n - half);
  return st;
}

bp_status_t bpg_claim_nodes(const bp_graph_exec_t* x, uint32_t dev, const uint32_t* nodes, uint32_t n, uint32_t* groups,
                            bp_support_t* const* reasons) {
  bpg_region_t all;
  memset(&all, 0, sizeof(all));
  all.dev = dev;
  all.num_nodes = n;
  all.nodes = (uint32_t*)nodes;
  bpg_rdesc_t* d = NULL;
  bp_status_t st = bpg_region_desc_build(x, &all, BP_REGION_GRAPH, &d);
  free(all.args);
  if (st != BP_OK) return st;
  st = bp_device_claim_region(x->devs[dev].device, bpg_region_desc(d), groups, reasons);
  bpg_region_desc_free(d);
  return st;
}

/* The device's live nodes offered as one GRAPH region; groups per node. A
 * claim that cannot be described (nothing leaves the nodes) or answered
 * leaves every node alone. */
static bp_status_t bpg_claim_device(bp_graph_exec_t* x, uint32_t dev, const uint32_t* nodes, uint32_t n,
                                    uint32_t* groups) {
  bp_status_t st = bpg_claim_nodes(x, dev, nodes, n, groups, NULL);
  if (st == BP_RESOURCE_EXHAUSTED) return st;
  if (st != BP_OK) {
    for (uint32_t k = 0; k < n; ++k) groups[k] = 0;
  }
  return BP_OK;
}

/* A node a declared elementwise program of the device can hold. */
static int bpg_caps_take(const bp_graph_t* g, uint32_t n, const bp_fusion_caps_t* caps) {
  uint32_t dt = 0;
  uint32_t op = g->nodes[n].op;
  if (!bpg_region_ew_node(g, n, &dt) || !(caps->ew_dtype_mask & BP_DTYPE_BIT(dt))) return 0;
  return caps->ew_opcode_mask != NULL && op / 64 < caps->ew_opcode_words &&
         (caps->ew_opcode_mask[op / 64] >> (op % 64) & 1);
}

/* Chains the compiler forms where the plugin declares elementwise programs
 * (bp_device_query_fusion) but its claim left the nodes alone (a plugin
 * without region_claim gets one group per node): each candidate node joins
 * the chain of a producer when the chain stays convex; chains of two or
 * more nodes are compiled as programs (a refusal splits them). */
static bp_status_t bpg_chains(bp_graph_exec_t* x, uint32_t dev, const uint32_t* nodes, uint32_t n, uint32_t* members,
                              uint8_t* mark, const uint8_t* claimed) {
  bp_fusion_caps_t caps;
  memset(&caps, 0, sizeof(caps));
  caps.struct_size = sizeof(caps);
  if (bp_device_query_fusion(x->devs[dev].device, &caps) != BP_OK || caps.ew_max_instrs == 0) return BP_OK;
  const bp_graph_t* g = x->g;
  uint32_t nn = g->num_nodes;
  uint32_t* chain = malloc(sizeof(uint32_t) * (nn + 1)); /* per node: the chain's first node */
  uint32_t* next = malloc(sizeof(uint32_t) * (nn + 1));  /* per node: the chain's next node */
  uint32_t* last = malloc(sizeof(uint32_t) * (nn + 1));  /* per first node: the chain's last node */
  if (chain == NULL || next == NULL || last == NULL) {
    free(chain);
    free(next);
    free(last);
    return bpg_error(BP_RESOURCE_EXHAUSTED, "regions: out of memory");
  }
  memset(chain, 0xFF, sizeof(uint32_t) * (nn + 1));
  memset(next, 0xFF, sizeof(uint32_t) * (nn + 1));
  for (uint32_t i = 0; i < n; ++i) {
    uint32_t k = nodes[i];
    if (x->node_region[k] != UINT32_MAX || claimed[k] || !bpg_caps_take(g, k, &caps)) continue;
    chain[k] = k;
    last[k] = k;
    const bpg_node_t* node = &g->nodes[k];
    for (uint32_t j = 0; j < node->num_in; ++j) {
      uint32_t v = node->in[j];
      if (v == BP_GRAPH_NO_VALUE || g->values[v].kind != BP_GRAPH_VALUE_NODE) continue;
      uint32_t p = g->values[v].producer;
      if (p >= nn || chain[p] == UINT32_MAX || chain[p] == k) continue;
      uint32_t head = chain[p], m = 0;
      for (uint32_t c = head; c != UINT32_MAX; c = next[c]) members[m++] = c;
      members[m++] = k;
      if (!bpg_nodes_convex(g, members, m, mark)) continue;
      chain[k] = head;
      next[last[head]] = k;
      last[head] = k;
      break;
    }
  }
  bp_status_t st = BP_OK;
  for (uint32_t i = 0; i < n && st == BP_OK; ++i) {
    uint32_t k = nodes[i];
    if (chain[k] != k || next[k] == UINT32_MAX) continue;
    uint32_t m = 0;
    for (uint32_t c = k; c != UINT32_MAX; c = next[c]) members[m++] = c;
    st = bpg_try_region(x, dev, members, m);
  }
  free(chain);
  free(next);
  free(last);
  return st;
}

/* Run order: units (a region or a node) after their producers. */
static bp_status_t bpg_order(bp_graph_exec_t* x) {
  const bp_graph_t* g = x->g;
  uint32_t nn = g->num_nodes;
  x->order = malloc(sizeof(uint32_t) * (nn + 1));
  uint8_t* done = calloc(nn + 1, 1);
  uint32_t* stack = malloc(sizeof(uint32_t) * (2 * (size_t)nn + 2));
  if (x->order == NULL || done == NULL || stack == NULL) {
    free(done);
    free(stack);
    return bpg_error(BP_RESOURCE_EXHAUSTED, "regions: out of memory");
  }
  x->num_order = 0;
  /* Iterative DFS over units: a unit is emitted once every producer of
   * every node of it is. A unit is named by its smallest node. */
  for (uint32_t root = 0; root < nn; ++root) {
    if (g->nodes[root].dead || done[root]) continue;
    uint32_t sp = 0;
    stack[sp++] = root;
    while (sp > 0) {
      uint32_t u = stack[sp - 1];
      if (done[u]) {
        sp--;
        continue;
      }
      uint32_t r = x->node_region[u];
      uint32_t cnt = r == UINT32_MAX ? 1 : x->regions[r].num_nodes;
      const uint32_t* members = r == UINT32_MAX ? &u : x->regions[r].nodes;
      int pushed = 0;
      for (uint32_t k = 0; k < cnt && !pushed; ++k) {
        const bpg_node_t* node = &g->nodes[members[k]];
        for (uint32_t i = 0; i < node->num_in; ++i) {
          uint32_t v = node->in[i];
          if (v == BP_GRAPH_NO_VALUE || g->values[v].kind != BP_GRAPH_VALUE_NODE) continue;
          uint32_t p = g->values[v].producer;
          if (p >= nn || done[p]) continue;
          if (r != UINT32_MAX && x->node_region[p] == r) continue;
          uint32_t pr = x->node_region[p];
          stack[sp++] = pr == UINT32_MAX ? p : x->regions[pr].nodes[0];
          pushed = 1;
          break;
        }
      }
      if (pushed) {
        if (sp > 2 * (size_t)nn + 1) break; /* cannot happen for convex regions */
        continue;
      }
      for (uint32_t k = 0; k < cnt; ++k) {
        done[members[k]] = 1;
        x->order[x->num_order++] = members[k];
      }
      sp--;
    }
  }
  free(done);
  free(stack);
  uint32_t live = 0;
  for (uint32_t n = 0; n < nn; ++n) live += !g->nodes[n].dead;
  if (x->num_order != live) return bpg_error(BP_INTERNAL, "regions: the run order covers %u of %u nodes", x->num_order, live);
  return BP_OK;
}

/* Regions take ops over dense values: a view node runs in the core, and a
 * node that reads a strided view runs alone (bp_op_run packs what the
 * plugin cannot take strided). */
int bpg_region_candidate(const bp_graph_t* g, uint32_t n) {
  const bpg_node_t* node = &g->nodes[n];
  if (node->dead || bpg_is_view(node->op)) return 0;
  for (uint32_t i = 0; i < node->num_in; ++i) {
    if (node->in[i] != BP_GRAPH_NO_VALUE && !bpg_value_dense(&g->values[node->in[i]])) return 0;
  }
  return 1;
}

bp_status_t bpg_pass_regions(bp_graph_exec_t* x) {
  bp_graph_t* g = x->g;
  uint32_t nn = g->num_nodes;
  bpg_regions_free(x);
  x->node_region = malloc(sizeof(uint32_t) * (nn + 1));
  uint32_t* nodes = malloc(sizeof(uint32_t) * (nn + 1));
  uint32_t* groups = malloc(sizeof(uint32_t) * (nn + 1));
  uint32_t* members = malloc(sizeof(uint32_t) * (nn + 1));
  uint8_t* mark = calloc(nn + 1, 1);
  uint8_t* claimed = calloc(nn + 1, 1); /* in a group of two or more the plugin claimed (tried already) */
  bp_status_t st = BP_OK;
  if (x->node_region == NULL || nodes == NULL || groups == NULL || members == NULL || mark == NULL || claimed == NULL) {
    st = bpg_error(BP_RESOURCE_EXHAUSTED, "regions: out of memory");
    goto done;
  }
  memset(x->node_region, 0xFF, sizeof(uint32_t) * (nn + 1));
  for (uint32_t d = 0; d < x->num_devs && st == BP_OK; ++d) {
    st = bpg_reduction_prologues(x, d, mark);
    uint32_t n = 0;
    for (uint32_t k = 0; k < nn; ++k) {
      if (bpg_region_candidate(g, k) && x->node_dev[k] == d && x->node_region[k] == UINT32_MAX) nodes[n++] = k;
    }
    if (n < 2) continue;
    st = bpg_claim_device(x, d, nodes, n, groups);
    for (uint32_t i = 0; i < n && st == BP_OK; ++i) {
      uint32_t grp = groups[i];
      if (grp == 0) continue;
      uint32_t m = 0;
      for (uint32_t j = i; j < n; ++j) {
        if (groups[j] == grp) {
          members[m++] = nodes[j];
          groups[j] = 0; /* taken */
        }
      }
      if (m < 2) continue;
      for (uint32_t j = 0; j < m; ++j) claimed[members[j]] = 1;
      if (!bpg_nodes_convex(g, members, m, mark)) {
        bp_support_t why = {.struct_size = sizeof(why), .reason = BP_SUPPORT_OP};
        snprintf(why.message, sizeof(why.message), "the claimed group is not convex: its nodes run alone");
        bpg_region_refused(x, d, members, m, BP_UNIMPLEMENTED, &why);
        continue;
      }
      st = bpg_try_region(x, d, members, m);
    }
    if (st == BP_OK) st = bpg_chains(x, d, nodes, n, members, mark, claimed);
  }
  if (st == BP_OK) st = bpg_order(x);
done:
  free(nodes);
  free(groups);
  free(members);
  free(mark);
  free(claimed);
  return st;
}
