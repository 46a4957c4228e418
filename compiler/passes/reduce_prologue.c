/* Pass: reduction prologues, the first thing regions.c does per device.
 *
 * An elementwise chain whose only reader is a reduction (sum(x*x),
 * mean((a-b)^2), amax(abs(x))) becomes one GRAPH region: the chain's nodes
 * in topological order, then the reduction. A device that declares
 * reduction prologues (bp_fusion_caps_t.reduction_prologues has
 * BP_EPILOGUE_EW_PROGRAM; include/backplane/region.h) runs such a region
 * without storing the chain's result: the reduction folds it as the
 * program makes it.
 *
 * The chain grows backwards from the reduction's input: a node joins when
 * it is an elementwise op a program holds (one compute dtype), on the same
 * device, not yet in a region, and every reader of its value is already in
 * the chain (nothing outside reads it, it is no graph output). So only the
 * reduction's value leaves the region, which is convex by construction
 * (checked again all the same). A refusal is recorded with its reason and
 * splits the region into the chain, which the claims then take like any
 * other elementwise nodes, and the reduction, which runs alone.
 */
#include <stdlib.h>
#include <string.h>

#include "../graph_exec.h"

/* The reductions a declared prologue covers. */
static int bpg_prologue_reduction(const bpg_node_t* node) {
  uint32_t op = node->op;
  return (op == BP_OP_sum || op == BP_OP_mean || op == BP_OP_amax || op == BP_OP_amin) && node->num_in == 1 &&
         node->num_out == 1;
}

int bpg_region_is_prologue(const bp_graph_t* g, const bpg_region_t* r) {
  if (r->kind != BP_REGION_GRAPH || r->num_nodes < 2 || !bpg_prologue_reduction(&g->nodes[r->nodes[r->num_nodes - 1]]))
    return 0;
  for (uint32_t k = 0; k + 1 < r->num_nodes; ++k) {
    uint32_t dt = 0;
    if (!bpg_region_ew_node(g, r->nodes[k], &dt)) return 0;
  }
  return 1;
}

/* A node the chain may take (its readers checked by the caller). */
static int bpg_chain_node(const bp_graph_exec_t* x, uint32_t dev, uint32_t m, uint32_t* dt) {
  const bp_graph_t* g = x->g;
  if (g->nodes[m].dead || x->node_dev[m] != dev || x->node_region[m] != UINT32_MAX || !bpg_region_candidate(g, m))
    return 0;
  uint32_t t = *dt;
  if (!bpg_region_ew_node(g, m, &t)) return 0;
  *dt = t;
  return 1;
}

/* Marks in `in` the chain feeding reduction n (n included); its size. */
static uint32_t bpg_chain_of(const bp_graph_exec_t* x, uint32_t dev, uint32_t n, const uint32_t* uses, uint32_t* reads,
                             uint8_t* in) {
  const bp_graph_t* g = x->g;
  uint32_t lo = n, count = 1, dt = 0;
  in[n] = 1;
  for (uint32_t m = n + 1; m-- > lo;) {
    const bpg_node_t* node = &g->nodes[m];
    if (m != n) {
      int all_inside = node->num_out == 1 && uses[node->out[0]] > 0 && uses[node->out[0]] == reads[node->out[0]];
      if (!all_inside || !bpg_chain_node(x, dev, m, &dt)) continue;
      in[m] = 1;
      count++;
    }
    for (uint32_t i = 0; i < node->num_in; ++i) {
      uint32_t v = node->in[i];
      if (v == BP_GRAPH_NO_VALUE) continue;
      reads[v]++;
      uint32_t p = g->values[v].producer;
      if (g->values[v].kind == BP_GRAPH_VALUE_NODE && p < lo) lo = p;
    }
  }
  /* reads back to zero for the next reduction */
  for (uint32_t m = lo; m <= n; ++m) {
    if (!in[m]) continue;
    for (uint32_t i = 0; i < g->nodes[m].num_in; ++i) {
      if (g->nodes[m].in[i] != BP_GRAPH_NO_VALUE) reads[g->nodes[m].in[i]] = 0;
    }
  }
  return count;
}

bp_status_t bpg_reduction_prologues(bp_graph_exec_t* x, uint32_t dev, uint8_t* mark) {
  bp_fusion_caps_t caps;
  memset(&caps, 0, sizeof(caps));
  caps.struct_size = sizeof(caps);
  if (bp_device_query_fusion(x->devs[dev].device, &caps) != BP_OK ||
      !(caps.reduction_prologues & BP_EPILOGUE_EW_PROGRAM)) {
    return BP_OK;
  }
  bp_graph_t* g = x->g;
  uint32_t nn = g->num_nodes;
  uint32_t* uses = NULL;
  bp_status_t st = bpg_use_counts(g, &uses);
  if (st != BP_OK) return st;
  uint32_t* reads = calloc(g->num_values + 1, sizeof(uint32_t));
  uint8_t* in = calloc(nn + 1, 1);
  if (reads == NULL || in == NULL) st = bpg_error(BP_RESOURCE_EXHAUSTED, "regions: out of memory");
  for (uint32_t n = 0; n < nn && st == BP_OK; ++n) {
    const bpg_node_t* node = &g->nodes[n];
    if (node->dead || x->node_dev[n] != dev || x->node_region[n] != UINT32_MAX || !bpg_region_candidate(g, n) ||
        !bpg_prologue_reduction(node)) {
      continue;
    }
    uint32_t count = bpg_chain_of(x, dev, n, uses, reads, in);
    bpg_region_t r;
    memset(&r, 0, sizeof(r));
    r.dev = dev;
    r.nodes = count > 1 ? malloc(sizeof(uint32_t) * count) : NULL;
    for (uint32_t m = 0; m <= n; ++m) {
      if (in[m] && r.nodes != NULL) r.nodes[r.num_nodes++] = m;
      in[m] = 0;
    }
    if (count < 2) continue;
    if (r.nodes == NULL) {
      st = bpg_error(BP_RESOURCE_EXHAUSTED, "regions: out of memory");
      break;
    }
    if (!bpg_nodes_convex(g, r.nodes, r.num_nodes, mark)) { /* cannot happen: only the reduction's value leaves */
      free(r.nodes);
      continue;
    }
    bp_support_t why = {.struct_size = sizeof(why)};
    st = bpg_region_compile(x, &r, &why);
    if (st == BP_OK) {
      st = bpg_region_keep(x, &r);
      continue;
    }
    if (st != BP_RESOURCE_EXHAUSTED) bpg_region_refused(x, dev, r.nodes, r.num_nodes, st, &why);
    bp_region_release(r.region);
    free(r.nodes);
    free(r.args);
    if (st != BP_RESOURCE_EXHAUSTED) st = BP_OK; /* split: the chain and the reduction go to the claims */
  }
  free(uses);
  free(reads);
  free(in);
  return st;
}
