/* backplane CPU plugin: region_claim, the graph-level capability answer.
 *
 * Nodes are visited in topological order. A supported elementwise node
 * joins the group of a producer when that group is an elementwise chain
 * or a matmul epilogue (a matmul anchor and the elementwise nodes after
 * it); a supported mm / addmm / linear starts an epilogue group; every
 * other supported node (patterns, reductions, ...) is its own group.
 * A node joins a group only when no other producer of it depends on that
 * group (so every group stays convex). Unsupported nodes get 0 and the
 * support query's reason. Pure; thread-safe.
 */
#include <stdlib.h>
#include <string.h>

#include "cpu_region.h"

#define NONE_ID UINT32_MAX

enum { G_OTHER = 0, G_EW = 1, G_EPILOGUE = 2 };

/* 1 when the plugin's kernel runs `node`; else 0 with `out` saying why. */
static int node_answer(bpp_device_t device, const bp_region_desc_t* g, const bp_region_node_t* node,
                       bp_support_t* out) {
  bp_support_t sup = {.struct_size = sizeof sup};
  if (cpu_region_node_support(device, g, node, &sup) != BP_OK)
    bp_kit_support_answer(&sup, BP_SUPPORT_OP, "cpu: support query for %s failed", cpu_op_name(node->op_id));
  if (sup.supported) return 1;
  bp_kit_copy_out(out, &sup, sizeof sup);
  return 0;
}

bp_status_t cpu_region_claim(bpp_device_t device, const bp_region_desc_t* g, uint32_t* groups,
                             bp_support_t* const* reasons) {
  if (!device || !g || !groups || !reasons)
    return cpu_error(BP_INVALID_ARGUMENT, "cpu: region_claim: NULL argument");
  uint32_t nn = g->num_nodes, ng = 0;
  uint32_t* producer = malloc(sizeof(uint32_t) * (g->num_values ? g->num_values : 1));
  uint8_t* gkind = calloc(nn + 1, 1);
  uint32_t words = (nn + 64) / 64;
  /* anc[n]: bit set of the groups node n depends on (its own included). */
  uint64_t* anc = calloc((size_t)nn * words + 1, sizeof(uint64_t));
  if (!producer || !gkind || !anc) {
    free(producer);
    free(gkind);
    free(anc);
    return cpu_error(BP_RESOURCE_EXHAUSTED, "cpu: region_claim: out of memory for %u nodes", nn);
  }
  for (uint32_t v = 0; v < g->num_values; v++) producer[v] = NONE_ID;
  for (uint32_t n = 0; n < nn; n++) {
    const bp_region_node_t* node = g->nodes[n];
    uint64_t* an = anc + (size_t)n * words;
    for (uint32_t i = 0; i < node->num_inputs; i++) {
      uint32_t v = node->inputs[i];
      if (v == NONE_ID || producer[v] == NONE_ID) continue;
      const uint64_t* ap = anc + (size_t)producer[v] * words;
      for (uint32_t w = 0; w < words; w++) an[w] |= ap[w];
    }
    for (uint32_t k = 0; k < node->num_outputs; k++) producer[node->outputs[k]] = n;
    groups[n] = 0;
    if (!node_answer(device, g, node, reasons[n])) continue;
    uint32_t join = 0;
    if (cpu_region_node_fusable(node)) {
      for (uint32_t i = 0; i < node->num_inputs && !join; i++) {
        uint32_t v = node->inputs[i];
        if (v == NONE_ID || producer[v] == NONE_ID || producer[v] == n) continue;
        uint32_t cand = groups[producer[v]];
        if (cand == 0 || gkind[cand] == G_OTHER) continue;
        /* Convex: no other producer outside cand may depend on cand. */
        int ok = 1;
        for (uint32_t j = 0; j < node->num_inputs && ok; j++) {
          uint32_t u = node->inputs[j];
          if (u == NONE_ID || producer[u] == NONE_ID || producer[u] == n) continue;
          uint32_t p = producer[u];
          if (groups[p] == cand) continue;
          ok = !(anc[(size_t)p * words + cand / 64] & (UINT64_C(1) << (cand % 64)));
        }
        if (ok) join = cand;
      }
    }
    if (!join) {
      join = ++ng;
      uint32_t op = node->op_id;
      gkind[join] = cpu_region_node_fusable(node) ? G_EW
                    : (op == BP_OP_mm || op == BP_OP_addmm || op == BP_OP_linear) ? G_EPILOGUE
                                                                                     : G_OTHER;
    }
    groups[n] = join;
    an[join / 64] |= UINT64_C(1) << (join % 64);
  }
  free(producer);
  free(gkind);
  free(anc);
  return BP_OK;
}
