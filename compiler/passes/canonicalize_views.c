/* Pass: view and layout canonicalization (part of canonicalize, on the
 * front's graph). Rewrites that keep every value's shape and numbers:
 *  - chains fold: permute(permute(x)) is one permute (the dims composed);
 *    view(view(x)) is one view of x when x is dense (a dense tensor views
 *    as any shape of its size); squeeze(unsqueeze(x, d), d) is x;
 *  - identity views go: a view whose output has its input's shape, strides
 *    and start (permute in order, view to the same shape, full slices,
 *    expand to the same sizes, squeeze of a dim that is not 1);
 *  - contiguous of a dense value goes;
 *  - contiguous of a transpose of the last two dims (permute or a chain
 *    folded into one) whose readers are all GEMM operands (mm, bmm,
 *    linear's input and weight) goes: the GEMM reads the transposed view
 *    (the CPU plugin passes it to BLAS as a transpose, without a copy).
 * Removed nodes are marked dead (dce drops the views left unread).
 */
#include <stdlib.h>
#include <string.h>

#include "../graph_internal.h"

static const bpg_node_t* bpg_producer(const bp_graph_t* g, uint32_t v) {
  const bpg_value_t* val = &g->values[v];
  if (val->kind != BP_GRAPH_VALUE_NODE || g->nodes[val->producer].dead) return NULL;
  return &g->nodes[val->producer];
}

static int64_t bpg_wrap(int64_t d, int64_t rank) { return d < 0 ? d + rank : d; }

/* Folds n's view into its producer's when both are views of one kind that
 * compose; 1 when n changed. */
static int bpg_fold_chain(bp_graph_t* g, bpg_node_t* n) {
  const bpg_node_t* p = bpg_producer(g, n->in[0]);
  if (p == NULL || p->op != n->op) return 0;
  bp_graph_view_params_t* np = n->attrs;
  const bp_graph_view_params_t* pp = p->attrs;
  if (n->op == BP_GRAPH_VIEW_OP(BP_VIEW_permute)) {
    int64_t rank = np->rank;
    int64_t dims[BP_MAX_RANK];
    for (int64_t i = 0; i < rank; ++i) {
      int64_t k = bpg_wrap(np->sizes[i], rank);
      if (k < 0 || k >= rank || (uint32_t)rank != pp->rank) return 0;
      dims[i] = bpg_wrap(pp->sizes[k], rank);
    }
    memcpy(np->sizes, dims, sizeof(int64_t) * (size_t)rank);
    n->in[0] = p->in[0];
    return 1;
  }
  if (n->op == BP_GRAPH_VIEW_OP(BP_VIEW_view) && bpg_value_dense(&g->values[p->in[0]])) {
    n->in[0] = p->in[0];
    return 1;
  }
  return 0;
}

/* The value n passes through unchanged, or BP_GRAPH_NO_VALUE. */
static uint32_t bpg_view_identity(const bp_graph_t* g, const bpg_node_t* n) {
  const bpg_value_t* in = &g->values[n->in[0]];
  if (n->op == BP_GRAPH_VIEW_OP(BP_GRAPH_VIEW_CONTIGUOUS)) return bpg_value_dense(in) ? n->in[0] : BP_GRAPH_NO_VALUE;
  const bp_graph_view_params_t* np = n->attrs;
  const bpg_node_t* p = bpg_producer(g, n->in[0]);
  if (n->op == BP_GRAPH_VIEW_OP(BP_VIEW_squeeze) && p != NULL && p->op == BP_GRAPH_VIEW_OP(BP_VIEW_unsqueeze)) {
    const bp_graph_view_params_t* pp = p->attrs;
    int64_t r = (int64_t)g->values[p->in[0]].rank + 1;
    if (bpg_wrap(np->dim, r) == bpg_wrap(pp->dim, r)) return p->in[0];
  }
  bp_tensor_desc_t di, dout;
  bpg_value_desc(g, in, NULL, &di);
  memset(&dout, 0, sizeof(dout));
  dout.struct_size = sizeof(dout);
  if (bpg_view_infer(n->op, n->attrs, &di, &dout) != BP_OK) return BP_GRAPH_NO_VALUE;
  if (dout.rank != di.rank || dout.byte_offset != di.byte_offset ||
      memcmp(dout.sizes, di.sizes, sizeof(int64_t) * di.rank) != 0 ||
      memcmp(dout.strides, di.strides, sizeof(int64_t) * di.rank) != 0) {
    return BP_GRAPH_NO_VALUE;
  }
  return n->in[0];
}

/* 1 when value t is a permute of its input that swaps the last two dims only. */
static int bpg_last_two_transpose(const bp_graph_t* g, uint32_t t) {
  const bpg_node_t* p = bpg_producer(g, t);
  if (p == NULL || p->op != BP_GRAPH_VIEW_OP(BP_VIEW_permute)) return 0;
  const bp_graph_view_params_t* pp = p->attrs;
  int64_t r = pp->rank;
  if (r < 2) return 0;
  for (int64_t i = 0; i < r; ++i) {
    int64_t want = i == r - 1 ? r - 2 : i == r - 2 ? r - 1 : i;
    if (bpg_wrap(pp->sizes[i], r) != want) return 0;
  }
  return bpg_value_dense(&g->values[p->in[0]]);
}

/* 1 when every reader of v reads it as a GEMM operand (and no graph output is v). */
static int bpg_only_gemm_reads(const bp_graph_t* g, uint32_t v) {
  for (uint32_t i = 0; i < g->num_outputs; ++i) {
    if (g->outputs[i] == v) return 0;
  }
  for (uint32_t m = 0; m < g->num_nodes; ++m) {
    const bpg_node_t* r = &g->nodes[m];
    if (r->dead) continue;
    for (uint32_t i = 0; i < r->num_in; ++i) {
      if (r->in[i] != v) continue;
      int gemm = r->op == BP_OP_mm || r->op == BP_OP_bmm || (r->op == BP_OP_linear && i < 2);
      if (!gemm) return 0;
    }
  }
  return 1;
}

bp_status_t bpg_canon_views(bp_graph_t* g, uint32_t* changed) {
  for (uint32_t k = 0; k < g->num_nodes; ++k) {
    bpg_node_t* n = &g->nodes[k];
    if (n->dead || !bpg_is_view(n->op) || n->attrs == NULL) continue;
    if (bpg_is_alias_view(n->op) && bpg_fold_chain(g, n)) ++*changed;
    uint32_t same = bpg_view_identity(g, n);
    if (same == BP_GRAPH_NO_VALUE && n->op == BP_GRAPH_VIEW_OP(BP_GRAPH_VIEW_CONTIGUOUS) &&
        bpg_last_two_transpose(g, n->in[0]) && bpg_only_gemm_reads(g, n->out[0])) {
      same = n->in[0];
    }
    if (same == BP_GRAPH_NO_VALUE) continue;
    bpg_replace_uses(g, n->out[0], same);
    n->dead = 1;
    ++*changed;
  }
  return BP_OK;
}
