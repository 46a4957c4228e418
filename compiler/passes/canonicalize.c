/* Pass: canonicalization, on the front's graph before CSE.
 *
 * Rewrites that keep every value's dtype, shape and numbers exactly:
 *  - identity copies go: clone(x), and _to_copy(x) to x's own dtype, are x
 *    (the graph's values are immutable; an executable hands the caller a
 *    fresh tensor for an output that is an input);
 *  - multiplication by the scalar 1 of the same dtype is x (x * 1 is
 *    exact; x + 0 is not removed: -0 + 0 is +0);
 *  - commutative ops (add and mul without alpha, maximum, minimum, eq, ne,
 *    the bitwise and logical and / or / xor) take their two operands in
 *    value order, so add(a, b) and add(b, a) meet in CSE.
 * View and layout rewrites (chains of views, identity views, contiguous of
 * dense values, a transpose into a GEMM) are in canonicalize_views.c.
 * A removed node is marked dead; its uses move to its input.
 */
#include <stdlib.h>
#include <string.h>

#include "../graph_internal.h"

static int bpg_alpha_one(const bp_scalar_t* a) {
  return a->kind == BP_SCALAR_NONE || (a->kind == BP_SCALAR_INT && a->v.i == 1) ||
         (a->kind == BP_SCALAR_FLOAT && a->v.f == 1.0);
}

static int bpg_commutative(const bpg_node_t* n) {
  switch (n->op) {
    case BP_OP_add: case BP_OP_mul: case BP_OP_maximum: case BP_OP_minimum: case BP_OP_eq: case BP_OP_ne:
    case BP_OP_bitwise_and: case BP_OP_bitwise_or: case BP_OP_bitwise_xor:
    case BP_OP_logical_and: case BP_OP_logical_or: case BP_OP_logical_xor:
      break;
    default:
      return 0;
  }
  if (n->num_in != 2 || n->num_out != 1 || n->in[0] == BP_GRAPH_NO_VALUE || n->in[1] == BP_GRAPH_NO_VALUE) return 0;
  const bp_binary_attrs_t* a = n->attrs;
  return a == NULL || (a->flags == 0 && bpg_alpha_one(&a->alpha) && a->rounding_mode == 0);
}

/* The input a node passes through unchanged, or BP_GRAPH_NO_VALUE. */
static uint32_t bpg_identity_of(const bp_graph_t* g, const bpg_node_t* n) {
  if (n->num_out != 1 || n->num_in < 1 || n->in[0] == BP_GRAPH_NO_VALUE) return BP_GRAPH_NO_VALUE;
  const bpg_value_t* in = &g->values[n->in[0]];
  const bpg_value_t* out = &g->values[n->out[0]];
  if (in->dtype != out->dtype || in->rank != out->rank || memcmp(in->dims, out->dims, sizeof(int64_t) * in->rank) != 0) {
    return BP_GRAPH_NO_VALUE;
  }
  if (n->op == BP_OP_clone && n->num_in == 1 && bpg_value_dense(in)) return n->in[0];
  if (n->op == BP_OP_to_copy && n->num_in == 1) {
    const bp_cast_attrs_t* c = n->attrs;
    return c == NULL || c->dtype == in->dtype || c->dtype == BP_DTYPE_INVALID ? n->in[0] : BP_GRAPH_NO_VALUE;
  }
  if (n->op == BP_OP_mul && n->num_in == 2 && n->in[1] == BP_GRAPH_NO_VALUE && n->attrs != NULL) {
    const bp_binary_attrs_t* a = n->attrs;
    if (a->flags != BP_BINARY_OTHER_IS_SCALAR) return BP_GRAPH_NO_VALUE;
    int one = (a->scalar.kind == BP_SCALAR_INT && a->scalar.v.i == 1) ||
              (a->scalar.kind == BP_SCALAR_FLOAT && a->scalar.v.f == 1.0);
    return one ? n->in[0] : BP_GRAPH_NO_VALUE;
  }
  return BP_GRAPH_NO_VALUE;
}

bp_status_t bpg_pass_canonicalize(bp_graph_t* g, uint32_t* out_changed) {
  uint32_t changed = 0;
  bp_status_t st = bpg_canon_views(g, &changed);
  if (st != BP_OK) return st;
  for (uint32_t n = 0; n < g->num_nodes; ++n) {
    bpg_node_t* node = &g->nodes[n];
    if (node->dead) continue;
    uint32_t same = bpg_identity_of(g, node);
    if (same != BP_GRAPH_NO_VALUE) {
      bpg_replace_uses(g, node->out[0], same);
      node->dead = 1;
      changed++;
      continue;
    }
    if (bpg_commutative(node) && node->in[0] > node->in[1]) {
      uint32_t t = node->in[0];
      node->in[0] = node->in[1];
      node->in[1] = t;
      changed++;
    }
  }
  if (out_changed) *out_changed = changed;
  return BP_OK;
}
