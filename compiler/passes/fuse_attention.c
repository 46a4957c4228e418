/* Fusion pattern: decomposed attention into scaled_dot_product_attention.
 *
 *   kt = permute(k) {dims=[0, 2, 1]}      (the key's transpose, a view)
 *   s  = bmm(q, kt)
 *   s2 = mul(s, scale) | div(s, d)        (a scalar; optional: scale 1)
 *   s3 = add(s2, mask)                    (optional additive mask)
 *   p  = softmax(s3) {dim=-1}
 *   o  = bmm(p, v)
 * becomes o = scaled_dot_product_attention(q, k, v, mask) {scale}; a mask
 * that is a constant 0 / -inf lower triangle becomes is_causal=1 (no mask
 * operand). The rank-4 form [batch, heads, seq, dim] is that pattern with
 * views around the bmms: q, k and v viewed from [B, H, ., .] to
 * [B*H, ., .], the scores optionally viewed back to [B, H, L, S] for the
 * scale, mask and softmax (then the probabilities viewed to [B*H, L, S]),
 * and o viewed to [B, H, L, Dv]; the fused node then takes the 4-d q, k, v
 * (and mask) and writes the 4-d output, and the views go. A mask added to
 * 3-d scores must be [L, S] or [1, L, S] there. Every intermediate must have that one reader, every node must
 * be on o's device, and the device must say yes to the fused node;
 * otherwise nothing changes. Numbers: the fused kernel's online softmax
 * agrees with the decomposed one within the conformance tolerances (not
 * bit for bit).
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "../graph_exec.h"

/* The live node writing v on device d when v's only reader is that one use. */
static bpg_node_t* bpg_single(bp_graph_exec_t* x, const uint32_t* uses, uint32_t v, uint32_t d, uint32_t op) {
  const bpg_value_t* val = &x->g->values[v];
  if (val->kind != BP_GRAPH_VALUE_NODE || uses[v] != 1 || val->out_index != 0) return NULL;
  bpg_node_t* p = &x->g->nodes[val->producer];
  if (p->dead || p->op != op || x->node_dev[val->producer] != d) return NULL;
  return p;
}

/* A scalar multiplier of the scores: mul by c gives c, div by c gives 1/c. */
static int bpg_scalar_factor(const bpg_node_t* n, double* out) {
  const bp_binary_attrs_t* a = n->attrs;
  if (a == NULL || a->flags != BP_BINARY_OTHER_IS_SCALAR || n->num_in != 2 || a->rounding_mode != 0) return 0;
  double c = a->scalar.kind == BP_SCALAR_FLOAT ? a->scalar.v.f
             : a->scalar.kind == BP_SCALAR_INT ? (double)a->scalar.v.i
                                               : NAN;
  if (!isfinite(c) || c == 0.0) return 0;
  *out = n->op == BP_OP_mul ? c : 1.0 / c;
  return 1;
}

/* 1 when v is a constant f32 [.., L, S] of 0 on and below the diagonal and
 * -inf above it (a causal mask), leading dims 1. */
static int bpg_causal_const(const bp_graph_t* g, uint32_t v) {
  const bpg_value_t* m = &g->values[v];
  if (m->kind != BP_GRAPH_VALUE_CONSTANT || m->dtype != BP_DTYPE_F32 || m->rank < 2 || m->cst == NULL ||
      m->cst->kind != BPG_CONST_VALUES) {
    return 0;
  }
  for (uint32_t d = 0; d + 2 < m->rank; ++d) {
    if (m->dims[d] != 1) return 0;
  }
  int64_t L = m->dims[m->rank - 2], S = m->dims[m->rank - 1];
  if ((uint64_t)(L * S) * 4 != m->cst->size) return 0;
  const float* p = m->cst->data;
  for (int64_t i = 0; i < L; ++i) {
    for (int64_t j = 0; j < S; ++j) {
      float want = j <= i ? 0.0f : -INFINITY;
      if (p[i * S + j] != want) return 0;
    }
  }
  return 1;
}

/* The value a `view` node on device d reshapes into v (v's one use being
 * the pattern's), when it has rank `rank`; BP_GRAPH_NO_VALUE otherwise.
 * *out_view: that node. */
static uint32_t bpg_unview(bp_graph_exec_t* x, const uint32_t* uses, uint32_t v, uint32_t d, uint32_t rank,
                           bpg_node_t** out_view) {
  const bpg_value_t* val = &x->g->values[v];
  *out_view = NULL;
  if (val->kind != BP_GRAPH_VALUE_NODE || uses[v] != 1) return BP_GRAPH_NO_VALUE;
  bpg_node_t* p = &x->g->nodes[val->producer];
  if (p->dead || p->op != BP_GRAPH_VIEW_OP(BP_VIEW_view) || x->node_dev[val->producer] != d || p->num_in != 1 ||
      x->g->values[p->in[0]].rank != rank) {
    return BP_GRAPH_NO_VALUE;
  }
  *out_view = p;
  return p->in[0];
}

/* 1 when 3-d value v3 is the 4-d value v4 with its first two dims merged
 * (B and H concrete). */
static int bpg_heads_merged(const bp_graph_t* g, uint32_t v3, uint32_t v4) {
  const bpg_value_t *a = &g->values[v3], *b = &g->values[v4];
  return a->rank == 3 && b->rank == 4 && b->dims[0] > 0 && b->dims[1] > 0 && a->dims[0] == b->dims[0] * b->dims[1] &&
         a->dims[1] == b->dims[2] && a->dims[2] == b->dims[3];
}

/* The rank-4 form around the bmms (see the top): the 4-d q, k, v and output
 * with the views that go, or 0 when the views are not all there. */
typedef struct bpg_attn4 {
  uint32_t q, k, v, out;
  bpg_node_t* views[6]; /* q, k, v, output, scores, probabilities (NULL: absent) */
} bpg_attn4_t;

static int bpg_attention4(bp_graph_exec_t* x, const uint32_t* uses, uint32_t n, const bpg_node_t* qk,
                          const bpg_node_t* kt, bpg_attn4_t* a) {
  const bp_graph_t* g = x->g;
  const bpg_node_t* o = &g->nodes[n];
  uint32_t d = x->node_dev[n];
  a->q = bpg_unview(x, uses, qk->in[0], d, 4, &a->views[0]);
  a->k = bpg_unview(x, uses, kt->in[0], d, 4, &a->views[1]);
  a->v = bpg_unview(x, uses, o->in[1], d, 4, &a->views[2]);
  uint32_t m = bpg_fuse_sole_reader(g, uses, o->out[0], n + 1);
  if (a->q == BP_GRAPH_NO_VALUE || a->k == BP_GRAPH_NO_VALUE || a->v == BP_GRAPH_NO_VALUE || m == UINT32_MAX ||
      g->nodes[m].op != BP_GRAPH_VIEW_OP(BP_VIEW_view) || x->node_dev[m] != d || g->nodes[m].num_out != 1) {
    return 0;
  }
  a->views[3] = &g->nodes[m];
  a->out = g->nodes[m].out[0];
  const bpg_value_t *q = &g->values[a->q], *k = &g->values[a->k], *v = &g->values[a->v];
  if (!bpg_heads_merged(g, qk->in[0], a->q) || !bpg_heads_merged(g, kt->in[0], a->k) ||
      !bpg_heads_merged(g, o->in[1], a->v) || !bpg_heads_merged(g, o->out[0], a->out) || k->dims[0] != q->dims[0] ||
      k->dims[1] != q->dims[1] || v->dims[0] != q->dims[0] || v->dims[1] != q->dims[1]) {
    return 0;
  }
  /* The 4-d scores and probabilities, when viewed, keep [B, H, L, S]. */
  for (int i = 4; i < 6; ++i) {
    if (a->views[i] != NULL && !bpg_heads_merged(g, i == 4 ? a->views[i]->in[0] : a->views[i]->out[0],
                                                 i == 4 ? a->views[i]->out[0] : a->views[i]->in[0])) {
      return 0;
    }
  }
  return 1;
}

/* 1 when value kt is a permute swapping the last two dims of a rank-3 value; *k its input. */
static bpg_node_t* bpg_key_transpose(bp_graph_exec_t* x, uint32_t kt, uint32_t d) {
  const bpg_value_t* val = &x->g->values[kt];
  if (val->kind != BP_GRAPH_VALUE_NODE) return NULL;
  bpg_node_t* p = &x->g->nodes[val->producer];
  const bp_graph_view_params_t* pp = p->attrs;
  if (p->dead || p->op != BP_GRAPH_VIEW_OP(BP_VIEW_permute) || x->node_dev[val->producer] != d || pp == NULL ||
      pp->rank != 3) {
    return NULL;
  }
  static const int64_t want[3] = {0, 2, 1};
  for (uint32_t i = 0; i < 3; ++i) {
    if ((pp->sizes[i] < 0 ? pp->sizes[i] + 3 : pp->sizes[i]) != want[i]) return NULL;
  }
  return p;
}

bp_status_t bpg_fuse_attention(bp_graph_exec_t* x, uint32_t n, const uint32_t* uses, int* done) {
  bp_graph_t* g = x->g;
  bpg_node_t* o = &g->nodes[n];
  uint32_t d = x->node_dev[n];
  *done = 0;
  if (o->num_in != 2) return BP_OK;
  bpg_attn4_t a4;
  memset(&a4, 0, sizeof(a4));
  bpg_node_t* sm = bpg_single(x, uses, o->in[0], d, BP_OP_softmax);
  if (sm == NULL) { /* rank 4: the probabilities viewed to 3-d */
    uint32_t p4 = bpg_unview(x, uses, o->in[0], d, 4, &a4.views[5]);
    if (p4 != BP_GRAPH_NO_VALUE) sm = bpg_single(x, uses, p4, d, BP_OP_softmax);
  }
  const bp_softmax_attrs_t* sa = sm ? sm->attrs : NULL;
  int last_dim = sm ? (int)g->values[sm->out[0]].rank - 1 : -1;
  if (sm == NULL || sa == NULL || sa->half_to_float != 0 || (sa->dim != -1 && sa->dim != last_dim)) return BP_OK;
  uint32_t s = sm->in[0], mask = BP_GRAPH_NO_VALUE;
  bpg_node_t* add = bpg_single(x, uses, s, d, BP_OP_add);
  const bp_binary_attrs_t* aa = add ? add->attrs : NULL;
  if (add != NULL && (aa == NULL || aa->flags == 0) && add->num_in == 2 &&
      (aa == NULL || aa->alpha.kind == BP_SCALAR_NONE)) {
    /* Operands are in value order (canonicalize): the scores are the one a scale or bmm wrote. */
    int first = bpg_single(x, uses, add->in[0], d, BP_OP_mul) || bpg_single(x, uses, add->in[0], d, BP_OP_div) ||
                bpg_single(x, uses, add->in[0], d, BP_OP_bmm);
    s = add->in[first ? 0 : 1];
    mask = add->in[first ? 1 : 0];
  } else {
    add = NULL;
  }
  double scale = 1.0;
  bpg_node_t* sc = bpg_single(x, uses, s, d, BP_OP_mul);
  if (sc == NULL) sc = bpg_single(x, uses, s, d, BP_OP_div);
  if (sc != NULL) {
    if (!bpg_scalar_factor(sc, &scale)) return BP_OK;
    s = sc->in[0];
  }
  bpg_node_t* qk = bpg_single(x, uses, s, d, BP_OP_bmm);
  if (qk == NULL) { /* rank 4: the scores viewed back to 4-d */
    uint32_t s3 = bpg_unview(x, uses, s, d, 3, &a4.views[4]);
    if (s3 != BP_GRAPH_NO_VALUE) qk = bpg_single(x, uses, s3, d, BP_OP_bmm);
  }
  if (qk == NULL || qk->num_in != 2) return BP_OK;
  bpg_node_t* kt = bpg_key_transpose(x, qk->in[1], d);
  if (kt == NULL || mask == qk->in[0] || mask == kt->in[0] || mask == o->in[1]) return BP_OK;
  int four = bpg_attention4(x, uses, n, qk, kt, &a4);
  if (!four && (a4.views[4] != NULL || a4.views[5] != NULL)) return BP_OK;
  if (four && a4.views[4] == NULL && mask != BP_GRAPH_NO_VALUE) { /* a mask of the 3-d scores: [L, S] or [1, L, S] */
    const bpg_value_t* mv = &g->values[mask];
    if (mv->rank > 3 || (mv->rank == 3 && mv->dims[0] != 1)) return BP_OK;
  }
  /* Try it: the bmm becomes the fused node, asked of the device. */
  uint32_t* blk = malloc(sizeof(uint32_t) * 5);
  bp_sdpa_attrs_t* at = calloc(1, sizeof(*at));
  if (blk == NULL || at == NULL) {
    free(blk);
    free(at);
    return bpg_error(BP_RESOURCE_EXHAUSTED, "fuse: out of memory");
  }
  at->struct_size = sizeof(*at);
  at->scale = scale;
  if (mask != BP_GRAPH_NO_VALUE && bpg_causal_const(g, mask)) {
    at->is_causal = 1;
    mask = BP_GRAPH_NO_VALUE;
  }
  uint32_t o3 = o->out[0]; /* the 3-d output, orphaned by the rank-4 form */
  blk[0] = four ? a4.q : qk->in[0];
  blk[1] = four ? a4.k : kt->in[0];
  blk[2] = four ? a4.v : o->in[1];
  blk[3] = mask;
  blk[4] = four ? a4.out : o->out[0];
  uint32_t* old_in = o->in;
  uint32_t* old_out = o->out;
  void* old_attrs = o->attrs;
  uint32_t old_nin = o->num_in, old_asize = o->attrs_size;
  o->op = BP_OP_scaled_dot_product_attention;
  o->in = blk;
  o->num_in = 4;
  o->out = blk + 4;
  o->attrs = at;
  o->attrs_size = sizeof(*at);
  int ok = 0;
  bp_status_t st = bpg_fuse_supported(x, n, &ok);
  if (st != BP_OK || !ok) {
    o->op = BP_OP_bmm;
    o->in = old_in;
    o->out = old_out;
    o->num_in = old_nin;
    o->attrs = old_attrs;
    o->attrs_size = old_asize;
    free(blk);
    free(at);
    return st;
  }
  free(old_in);
  free(old_attrs);
  uint32_t first = (uint32_t)(qk - g->nodes);
  qk->dead = 1;
  sm->dead = 1;
  if (sc != NULL) sc->dead = 1;
  if (add != NULL) add->dead = 1;
  if (uses[qk->in[1]] == 1) kt->dead = 1; /* the transpose only fed the scores */
  if (four) { /* the fused node writes the 4-d output; the views go (k's with its transpose) */
    for (int i = 0; i < 6; ++i) {
      if (a4.views[i] != NULL && (i != 1 || kt->dead)) a4.views[i]->dead = 1;
    }
    g->values[a4.out].producer = n;
    g->values[a4.out].out_index = 0;
    g->values[o3].producer = UINT32_MAX; /* orphaned: no node writes it now */
    g->values[o3].dtype = BP_DTYPE_INVALID;
  }
  bpg_fuse_note(x, "pattern", first, BP_OP_bmm, n, BP_OP_softmax, at->is_causal ? "scaled_dot_product_attention {is_causal=1}"
                                                                               : "scaled_dot_product_attention");
  *done = 1;
  return BP_OK;
}
