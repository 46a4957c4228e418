/* Pass: dead code elimination. A node whose outputs reach no graph output
 * is marked dead (walking backwards, so whole dead chains go at once).
 * Nodes of the RANDOM family are kept only when used, like any other: ops
 * have no side effects visible outside their outputs.
 */
#include <stdlib.h>

#include "../graph_internal.h"

bp_status_t bpg_pass_dce(bp_graph_t* g, uint32_t* out_removed) {
  uint32_t* uses = NULL;
  bp_status_t st = bpg_use_counts(g, &uses);
  if (st != BP_OK) return st;
  uint32_t removed = 0;
  for (uint32_t n = g->num_nodes; n-- > 0;) {
    bpg_node_t* node = &g->nodes[n];
    if (node->dead) continue;
    int used = 0;
    for (uint32_t k = 0; k < node->num_out; ++k) used |= uses[node->out[k]] != 0;
    if (used) continue;
    node->dead = 1;
    removed++;
    for (uint32_t i = 0; i < node->num_in; ++i) {
      if (node->in[i] != BP_GRAPH_NO_VALUE) uses[node->in[i]]--;
    }
  }
  free(uses);
  if (out_removed) *out_removed = removed;
  return BP_OK;
}
