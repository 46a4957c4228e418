/* backplane core: inference rules of scaled_dot_product_attention, linear,
 * rotary_embedding, cdist and pdist (docs/semantics.md, "Attention, linear
 * and distances"). Shapes and errors follow PyTorch.
 */
#include <stdio.h>
#include <string.h>

#include "ops/ops_internal.h"

/* Every present input whose bit is in `mask` has input 0's dtype, which is
 * floating (float_only) or any non-bool real dtype. */
static bp_status_t att_same_dtype(bp__infer_t* x, uint32_t mask, int float_only) {
  char n0[64], n1[64];
  uint32_t d = x->in[0].dtype;
  if (d == BP_DTYPE_BOOL || bp__dtype_is_complex(d) || (float_only && !bp__dtype_is_float(d))) {
    return bp__infer_fail(x, "input '%s' has dtype %s; %s dtype is required",
                          bp__op_input_name(x->op, x->num_inputs, 0, n0), bp_dtype_name(d),
                          float_only ? "a floating" : "a real, non-bool");
  }
  for (uint32_t i = 1; i < x->num_inputs && i < 32; ++i) {
    if (!(mask & (1u << i)) || !bp__in_present(x, i) || x->in[i].dtype == d) continue;
    return bp__infer_fail(x, "input '%s' has dtype %s but input '%s' has %s (no promotion)",
                          bp__op_input_name(x->op, x->num_inputs, i, n0),
                          bp_dtype_name(x->in[i].dtype),
                          bp__op_input_name(x->op, x->num_inputs, 0, n1), bp_dtype_name(d));
  }
  return BP_OK;
}

static bp_status_t att_min_rank(bp__infer_t* x, uint32_t i, uint32_t rank) {
  if (x->in[i].rank >= rank) return BP_OK;
  char n[64], s[192];
  return bp__infer_fail(x, "input '%s' must have rank >= %u, got shape %s",
                        bp__op_input_name(x->op, x->num_inputs, i, n), rank,
                        bp__shape_str(x->in[i].rank, x->in[i].sizes, s, sizeof(s)));
}

/* Input i broadcasts to rank r / sizes (right-aligned; size 1 expands). */
static bp_status_t att_broadcasts_to(bp__infer_t* x, uint32_t i, uint32_t r,
                                     const int64_t* sizes) {
  const bp_tensor_desc_t* t = &x->in[i];
  int ok = t->rank <= r;
  for (uint32_t k = 0; ok && k < t->rank; ++k) {
    int64_t s = t->sizes[t->rank - 1 - k];
    ok = s == 1 || s == sizes[r - 1 - k];
  }
  if (ok) return BP_OK;
  char n[64], s0[192], s1[192];
  return bp__infer_fail(x, "input '%s' of shape %s does not broadcast to %s",
                        bp__op_input_name(x->op, x->num_inputs, i, n),
                        bp__shape_str(t->rank, t->sizes, s0, sizeof(s0)),
                        bp__shape_str(r, sizes, s1, sizeof(s1)));
}

/* Broadcasts the leading (batch) dims of inputs in `mask`: every dim but
 * the last `tail` ones. With gqa, dim -(tail+1) of inputs other than input 0
 * may also divide input 0's (grouped-query heads, repeated). */
static bp_status_t att_batch_dims(bp__infer_t* x, uint32_t mask, uint32_t tail, int gqa,
                                  uint32_t* out_rank, int64_t* out_sizes) {
  uint32_t r = 0;
  for (uint32_t i = 0; i < x->num_inputs && i < 32; ++i) {
    if ((mask & (1u << i)) && x->in[i].rank - tail > r) r = x->in[i].rank - tail;
  }
  for (uint32_t k = 0; k < r; ++k) {
    int64_t s = 1;
    int set = 0;
    for (uint32_t i = 0; i < x->num_inputs && i < 32; ++i) {
      if (!(mask & (1u << i))) continue;
      uint32_t bi = x->in[i].rank - tail; /* batch rank of input i */
      if (k + bi < r) continue;
      int64_t v = x->in[i].sizes[k + bi - r];
      int heads = gqa && k + 1 == r && i != 0;
      if (heads) continue; /* checked against query below */
      if (v == 1) continue;
      if (set && v != s) {
        char n[64], sq[192];
        return bp__infer_fail(x, "batch dim %u (from the left of the broadcast batch shape) is %lld "
                                 "in one operand and %lld in another (shape of '%s': %s)",
                              k, (long long)s, (long long)v,
                              bp__op_input_name(x->op, x->num_inputs, i, n),
                              bp__shape_str(x->in[i].rank, x->in[i].sizes, sq, sizeof(sq)));
      }
      s = v;
      set = 1;
    }
    out_sizes[k] = s;
  }
  if (gqa && r > 0) {
    int64_t hq = out_sizes[r - 1];
    for (uint32_t i = 1; i < x->num_inputs && i < 32; ++i) {
      if (!(mask & (1u << i))) continue;
      int64_t h = x->in[i].sizes[x->in[i].rank - tail - 1];
      if (h == hq || h == 1 || (h > 0 && hq % h == 0)) continue;
      char n[64];
      return bp__infer_fail(x, "enable_gqa: query has %lld heads, not a multiple of the %lld heads "
                               "of '%s'",
                            (long long)hq, (long long)h,
                            bp__op_input_name(x->op, x->num_inputs, i, n));
    }
  }
  *out_rank = r;
  return BP_OK;
}

/* ---- scaled_dot_product_attention ------------------------------------------ */

/* q [..., L, E], k [..., S, E], v [..., S, Ev] (batch dims broadcast; with
 * enable_gqa the head dim -3 of k and v divides q's), mask broadcastable to
 * [..., L, S] -> out [..., L, Ev]. */
bp_status_t bp__infer_sdpa(bp__infer_t* x) {
  const bp_sdpa_attrs_t* a = x->attrs;
  bp_status_t st = att_same_dtype(x, 0x7, 1);
  for (uint32_t i = 0; i < 3 && st == BP_OK; ++i) st = att_min_rank(x, i, a->enable_gqa ? 3 : 2);
  if (st != BP_OK) return st;
  const bp_tensor_desc_t *q = &x->in[0], *k = &x->in[1], *v = &x->in[2];
  int64_t L = q->sizes[q->rank - 2], E = q->sizes[q->rank - 1];
  int64_t S = k->sizes[k->rank - 2];
  if (k->sizes[k->rank - 1] != E) {
    return bp__infer_fail(x, "query has head dim %lld but key has %lld", (long long)E,
                          (long long)k->sizes[k->rank - 1]);
  }
  if (v->sizes[v->rank - 2] != S) {
    return bp__infer_fail(x, "key has %lld positions but value has %lld", (long long)S,
                          (long long)v->sizes[v->rank - 2]);
  }
  if (a->is_causal && bp__in_present(x, 3)) {
    return bp__infer_fail(x, "an explicit attn_mask must not be given with attrs.is_causal");
  }
  if (a->scale != a->scale) return bp__infer_fail(x, "attrs.scale is NaN");
  int64_t sizes[BP_MAX_RANK];
  uint32_t br = 0;
  st = att_batch_dims(x, 0x7, 2, a->enable_gqa != 0, &br, sizes);
  if (st != BP_OK) return st;
  if (br + 2 > BP_MAX_RANK) return bp__infer_fail(x, "output rank exceeds %d", BP_MAX_RANK);
  if (bp__in_present(x, 3)) {
    const bp_tensor_desc_t* m = &x->in[3];
    if (m->dtype != BP_DTYPE_BOOL && m->dtype != q->dtype) {
      return bp__infer_fail(x, "input 'attn_mask' has dtype %s; expected bool or %s",
                            bp_dtype_name(m->dtype), bp_dtype_name(q->dtype));
    }
    int64_t scores[BP_MAX_RANK];
    memcpy(scores, sizes, sizeof(int64_t) * br);
    scores[br] = L;
    scores[br + 1] = S;
    st = att_broadcasts_to(x, 3, br + 2, scores);
    if (st != BP_OK) return st;
  }
  sizes[br] = L;
  sizes[br + 1] = v->sizes[v->rank - 1];
  x->compute_dtype = q->dtype == BP_DTYPE_F64 ? BP_DTYPE_F64 : BP_DTYPE_F32;
  return bp__infer_set_out(x, 0, q->dtype, br + 2, sizes);
}

/* ---- linear ------------------------------------------------------------------ */

/* linear(input [..., in], weight [out, in], bias broadcastable to [..., out])
 * -> [..., out], then the activation epilogue. Integer dtypes take the
 * activations NONE and RELU only. */
bp_status_t bp__infer_linear(bp__infer_t* x) {
  const bp_linear_attrs_t* a = x->attrs;
  bp_status_t st = att_same_dtype(x, 0x7, 0);
  if (st == BP_OK) st = att_min_rank(x, 0, 1);
  if (st != BP_OK) return st;
  const bp_tensor_desc_t *in = &x->in[0], *w = &x->in[1];
  char s0[192], s1[192];
  if (w->rank != 2) {
    return bp__infer_fail(x, "input 'weight' must have rank 2, got shape %s",
                          bp__shape_str(w->rank, w->sizes, s0, sizeof(s0)));
  }
  if (in->sizes[in->rank - 1] != w->sizes[1]) {
    return bp__infer_fail(x, "shapes %s ('input') and %s ('weight') cannot be multiplied "
                             "(input @ weight^T)",
                          bp__shape_str(in->rank, in->sizes, s0, sizeof(s0)),
                          bp__shape_str(w->rank, w->sizes, s1, sizeof(s1)));
  }
  if (!bp__dtype_is_float(in->dtype) && a->activation != BP_ACTIVATION_NONE &&
      a->activation != BP_ACTIVATION_RELU) {
    return bp__infer_fail(x, "attrs.activation = %u needs a floating dtype, got %s", a->activation,
                          bp_dtype_name(in->dtype));
  }
  int64_t sizes[BP_MAX_RANK];
  memcpy(sizes, in->sizes, sizeof(int64_t) * in->rank);
  sizes[in->rank - 1] = w->sizes[0];
  if (bp__in_present(x, 2)) {
    st = att_broadcasts_to(x, 2, in->rank, sizes);
    if (st != BP_OK) return st;
  }
  x->compute_dtype = in->dtype;
  return bp__infer_set_out(x, 0, in->dtype, in->rank, sizes);
}

/* ---- rotary_embedding ---------------------------------------------------------- */

/* input [..., S, D] (D even); cos and sin of one shape whose last dim is D/2
 * (half tables) or D (full tables) and whose other dims broadcast to
 * input's; all one floating dtype. Output like input. */
bp_status_t bp__infer_rotary(bp__infer_t* x) {
  bp_status_t st = att_same_dtype(x, 0x7, 1);
  if (st == BP_OK) st = att_min_rank(x, 0, 1);
  for (uint32_t i = 1; i < 3 && st == BP_OK; ++i) st = att_min_rank(x, i, 1);
  if (st != BP_OK) return st;
  const bp_tensor_desc_t *in = &x->in[0], *c = &x->in[1], *s = &x->in[2];
  char s0[192], s1[192];
  int64_t D = in->sizes[in->rank - 1];
  if (D % 2 != 0) return bp__infer_fail(x, "the last dim of 'input' (%lld) must be even", (long long)D);
  if (!bp__shape_equal(c->rank, c->sizes, s->rank, s->sizes)) {
    return bp__infer_fail(x, "'cos' has shape %s but 'sin' has %s",
                          bp__shape_str(c->rank, c->sizes, s0, sizeof(s0)),
                          bp__shape_str(s->rank, s->sizes, s1, sizeof(s1)));
  }
  int64_t t = c->sizes[c->rank - 1];
  if (t != D && t != D / 2) {
    return bp__infer_fail(x, "the last dim of 'cos' is %lld; expected %lld (half tables) or %lld "
                             "(full tables)",
                          (long long)t, (long long)(D / 2), (long long)D);
  }
  int64_t want[BP_MAX_RANK];
  memcpy(want, in->sizes, sizeof(int64_t) * in->rank);
  want[in->rank - 1] = t;
  st = att_broadcasts_to(x, 1, in->rank, want);
  if (st != BP_OK) return st;
  x->compute_dtype = in->dtype == BP_DTYPE_F64 ? BP_DTYPE_F64 : BP_DTYPE_F32;
  return bp__infer_set_out(x, 0, in->dtype, in->rank, in->sizes);
}

/* ---- cdist, pdist -------------------------------------------------------------- */

static bp_status_t att_check_p(bp__infer_t* x, double p) {
  if (p >= 0.0) return BP_OK; /* rejects NaN too */
  return bp__infer_fail(x, "attrs.p = %g; only non-negative p values are supported", p);
}

/* _cdist_forward(x1 [..., P, M], x2 [..., R, M]) -> [..., P, R]; batch dims
 * broadcast; compute_mode 0 (mm for p = 2 when P or R > 25), 1 (always mm
 * for p = 2), 2 (never). */
bp_status_t bp__infer_cdist(bp__infer_t* x) {
  const bp_cdist_attrs_t* a = x->attrs;
  bp_status_t st = att_same_dtype(x, 0x3, 1);
  if (st == BP_OK) st = att_min_rank(x, 0, 2);
  if (st == BP_OK) st = att_min_rank(x, 1, 2);
  if (st == BP_OK) st = att_check_p(x, a->p);
  if (st != BP_OK) return st;
  if (a->compute_mode < 0 || a->compute_mode > 2) {
    return bp__infer_fail(x, "attrs.compute_mode = %d; expected 0, 1 or 2", a->compute_mode);
  }
  const bp_tensor_desc_t *x1 = &x->in[0], *x2 = &x->in[1];
  if (x1->sizes[x1->rank - 1] != x2->sizes[x2->rank - 1]) {
    return bp__infer_fail(x, "x1 and x2 must have the same number of columns (%lld vs %lld)",
                          (long long)x1->sizes[x1->rank - 1], (long long)x2->sizes[x2->rank - 1]);
  }
  int64_t sizes[BP_MAX_RANK];
  uint32_t br = 0;
  st = att_batch_dims(x, 0x3, 2, 0, &br, sizes);
  if (st != BP_OK) return st;
  sizes[br] = x1->sizes[x1->rank - 2];
  sizes[br + 1] = x2->sizes[x2->rank - 2];
  x->compute_dtype = x1->dtype == BP_DTYPE_F64 ? BP_DTYPE_F64 : BP_DTYPE_F32;
  return bp__infer_set_out(x, 0, x1->dtype, br + 2, sizes);
}

/* _pdist_forward(self [N, M]) -> [N * (N - 1) / 2]: the upper triangle of
 * the distance matrix, row-major. */
bp_status_t bp__infer_pdist(bp__infer_t* x) {
  const bp_cdist_attrs_t* a = x->attrs;
  bp_status_t st = att_same_dtype(x, 0x1, 1);
  if (st == BP_OK) st = att_check_p(x, a->p);
  if (st != BP_OK) return st;
  const bp_tensor_desc_t* in = &x->in[0];
  if (in->rank != 2) {
    char s[192];
    return bp__infer_fail(x, "input 'self' must have rank 2, got shape %s",
                          bp__shape_str(in->rank, in->sizes, s, sizeof(s)));
  }
  int64_t n = in->sizes[0], pairs = 0;
  if (n > 1 && __builtin_mul_overflow(n, n - 1, &pairs)) {
    return bp__infer_fail(x, "%lld rows give more pairs than int64 holds", (long long)n);
  }
  pairs /= 2;
  x->compute_dtype = in->dtype == BP_DTYPE_F64 ? BP_DTYPE_F64 : BP_DTYPE_F32;
  return bp__infer_set_out(x, 0, in->dtype, 1, &pairs);
}
