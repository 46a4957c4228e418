/* Pass: common subexpression elimination. Two live nodes with the same op,
 * the same inputs and equal attributes compute the same values (ops are
 * pure; RANDOM-family ops too, since their attributes carry the seed and
 * offset); the later one's outputs are replaced by the earlier one's and
 * it is marked dead. Hashing keeps it linear in the node count.
 */
#include <stdlib.h>
#include <string.h>

#include "../graph_internal.h"

static uint64_t bpg_node_hash(const bpg_node_t* n) {
  uint64_t h = 1469598103934665603ull ^ n->op;
  for (uint32_t i = 0; i < n->num_in; ++i) h = (h ^ n->in[i]) * 1099511628211ull;
  if (n->attrs != NULL) {
    const unsigned char* p = n->attrs;
    for (uint32_t i = 0; i < n->attrs_size; ++i) h = (h ^ p[i]) * 1099511628211ull;
  }
  return h;
}

static int bpg_same(const bpg_node_t* a, const bpg_node_t* b) {
  return a->op == b->op && a->num_in == b->num_in && a->num_out == b->num_out &&
         memcmp(a->in, b->in, sizeof(uint32_t) * a->num_in) == 0 && bpg_attrs_equal(a, b);
}

bp_status_t bpg_pass_cse(bp_graph_t* g, uint32_t* out_merged) {
  uint32_t cap = 16;
  while (cap < 2 * g->num_nodes) cap *= 2;
  uint32_t* table = malloc(sizeof(uint32_t) * cap);
  if (table == NULL) return bpg_error(BP_RESOURCE_EXHAUSTED, "cse: out of memory");
  memset(table, 0xFF, sizeof(uint32_t) * cap);
  uint32_t merged = 0;
  for (uint32_t n = 0; n < g->num_nodes; ++n) {
    bpg_node_t* node = &g->nodes[n];
    if (node->dead) continue;
    uint32_t slot = (uint32_t)bpg_node_hash(node) & (cap - 1);
    for (;;) {
      uint32_t m = table[slot];
      if (m == UINT32_MAX) {
        table[slot] = n;
        break;
      }
      if (bpg_same(&g->nodes[m], node)) {
        /* Earlier inputs were already rewritten, so equal inputs mean equal values. */
        for (uint32_t k = 0; k < node->num_out; ++k) bpg_replace_uses(g, node->out[k], g->nodes[m].out[k]);
        node->dead = 1;
        merged++;
        break;
      }
      slot = (slot + 1) & (cap - 1);
    }
  }
  free(table);
  if (out_merged) *out_merged = merged;
  return BP_OK;
}
