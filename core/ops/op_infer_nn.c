/* backplane core: inference rules of matmul, linear, normalization,
 * attention, embedding and dropout.
 */
#include <stdio.h>
#include <string.h>

#include "ops/ops_internal.h"

/* Matmul operands share one dtype (no promotion, as PyTorch). */
static bp_status_t bp__same_dtype(bp__infer_t* x, uint32_t mask, int float_only) {
  char n0[64], n1[64];
  uint32_t first = UINT32_MAX;
  for (uint32_t i = 0; i < x->num_inputs && i < 32; ++i) {
    if (!(mask & (1u << i)) || !bp__in_present(x, i)) continue;
    if (first == UINT32_MAX) {
      first = i;
      uint32_t d = x->in[i].dtype;
      if (d == BP_DTYPE_BOOL) return bp__infer_fail(x, "not defined for bool operands");
      if (float_only && !bp__dtype_is_float(d)) {
        return bp__infer_fail(x, "input '%s' has dtype %s; a floating dtype is required",
                              bp__op_input_name(x->op, x->num_inputs, i, n0), bp_dtype_name(d));
      }
      continue;
    }
    if (x->in[i].dtype != x->in[first].dtype) {
      return bp__infer_fail(x, "input '%s' has dtype %s but input '%s' has %s (no promotion)",
                            bp__op_input_name(x->op, x->num_inputs, i, n0),
                            bp_dtype_name(x->in[i].dtype),
                            bp__op_input_name(x->op, x->num_inputs, first, n1),
                            bp_dtype_name(x->in[first].dtype));
    }
  }
  return BP_OK;
}

static bp_status_t bp__expect_rank(bp__infer_t* x, uint32_t i, uint32_t rank) {
  if (x->in[i].rank != rank) {
    char n[64], s[192];
    return bp__infer_fail(x, "input '%s' must have rank %u, got shape %s",
                          bp__op_input_name(x->op, x->num_inputs, i, n), rank,
                          bp__shape_str(x->in[i].rank, x->in[i].sizes, s, sizeof(s)));
  }
  return BP_OK;
}

static bp_status_t bp__mm_mismatch(bp__infer_t* x, uint32_t a, uint32_t b) {
  char n0[64], n1[64], s0[192], s1[192];
  return bp__infer_fail(x, "shapes %s ('%s') and %s ('%s') cannot be multiplied",
                        bp__shape_str(x->in[a].rank, x->in[a].sizes, s0, sizeof(s0)),
                        bp__op_input_name(x->op, x->num_inputs, a, n0),
                        bp__shape_str(x->in[b].rank, x->in[b].sizes, s1, sizeof(s1)),
                        bp__op_input_name(x->op, x->num_inputs, b, n1));
}

/* [n,k] x [k,m] from inputs a and b. */
static bp_status_t bp__mm_shape(bp__infer_t* x, uint32_t a, uint32_t b, int64_t* out_sizes) {
  bp_status_t st = bp__expect_rank(x, a, 2);
  if (st == BP_OK) st = bp__expect_rank(x, b, 2);
  if (st != BP_OK) return st;
  if (x->in[a].sizes[1] != x->in[b].sizes[0]) return bp__mm_mismatch(x, a, b);
  out_sizes[0] = x->in[a].sizes[0];
  out_sizes[1] = x->in[b].sizes[1];
  return BP_OK;
}

bp_status_t bp__infer_mm(bp__infer_t* x) {
  int64_t sizes[2];
  bp_status_t st = bp__same_dtype(x, 0x3, 0);
  if (st == BP_OK) st = bp__mm_shape(x, 0, 1, sizes);
  if (st != BP_OK) return st;
  x->compute_dtype = x->in[0].dtype;
  return bp__infer_set_out(x, 0, x->in[0].dtype, 2, sizes);
}

bp_status_t bp__infer_bmm(bp__infer_t* x) {
  bp_status_t st = bp__same_dtype(x, 0x3, 0);
  if (st == BP_OK) st = bp__expect_rank(x, 0, 3);
  if (st == BP_OK) st = bp__expect_rank(x, 1, 3);
  if (st != BP_OK) return st;
  const int64_t* a = x->in[0].sizes;
  const int64_t* b = x->in[1].sizes;
  if (a[0] != b[0] || a[2] != b[1]) return bp__mm_mismatch(x, 0, 1);
  int64_t sizes[3] = {a[0], a[1], b[2]};
  x->compute_dtype = x->in[0].dtype;
  return bp__infer_set_out(x, 0, x->in[0].dtype, 3, sizes);
}

/* `self` (input i) must broadcast to `sizes` (rank r): not the other way. */
static bp_status_t bp__broadcasts_to(bp__infer_t* x, uint32_t i, uint32_t r,
                                     const int64_t* sizes) {
  const bp_tensor_desc_t* t = &x->in[i];
  int ok = t->rank <= r;
  for (uint32_t k = 0; ok && k < t->rank; ++k) {
    int64_t s = t->sizes[t->rank - 1 - k];
    ok = s == 1 || s == sizes[r - 1 - k];
  }
  if (!ok) {
    char n[64], s0[192], s1[192];
    return bp__infer_fail(x, "input '%s' of shape %s does not broadcast to %s",
                          bp__op_input_name(x->op, x->num_inputs, i, n),
                          bp__shape_str(t->rank, t->sizes, s0, sizeof(s0)),
                          bp__shape_str(r, sizes, s1, sizeof(s1)));
  }
  return BP_OK;
}

bp_status_t bp__infer_addmm(bp__infer_t* x) {
  int64_t sizes[2];
  bp_status_t st = bp__same_dtype(x, 0x7, 0);
  if (st == BP_OK) st = bp__mm_shape(x, 1, 2, sizes);
  if (st == BP_OK) st = bp__broadcasts_to(x, 0, 2, sizes);
  if (st != BP_OK) return st;
  x->compute_dtype = x->in[0].dtype;
  return bp__infer_set_out(x, 0, x->in[0].dtype, 2, sizes);
}

/* linear(input [..., in], weight [out, in], bias [out]) -> [..., out]. */
bp_status_t bp__infer_linear(bp__infer_t* x) {
  bp_status_t st = bp__same_dtype(x, 0x7, 0);
  if (st == BP_OK) st = bp__expect_rank(x, 1, 2);
  if (st != BP_OK) return st;
  const bp_tensor_desc_t* in = &x->in[0];
  if (in->rank < 1 || in->sizes[in->rank - 1] != x->in[1].sizes[1]) {
    return bp__mm_mismatch(x, 0, 1);
  }
  int64_t sizes[BP_MAX_RANK];
  memcpy(sizes, in->sizes, sizeof(int64_t) * in->rank);
  sizes[in->rank - 1] = x->in[1].sizes[0];
  if (bp__in_present(x, 2)) {
    st = bp__broadcasts_to(x, 2, in->rank, sizes);
    if (st != BP_OK) return st;
  }
  x->compute_dtype = in->dtype;
  return bp__infer_set_out(x, 0, in->dtype, in->rank, sizes);
}

/* ---- normalization ------------------------------------------------------------- */

bp_status_t bp__infer_softmax(bp__infer_t* x) {
  const bp_softmax_attrs_t* a = x->attrs;
  const bp_tensor_desc_t* in = &x->in[0];
  uint32_t dim;
  bp_status_t st = bp__infer_wrap_dim(x, a->dim, in->rank, "attrs.dim", &dim);
  if (st != BP_OK) return st;
  if (!bp__dtype_is_float(in->dtype)) {
    return bp__infer_fail(x, "input 'self' has dtype %s; a floating dtype is required",
                          bp_dtype_name(in->dtype));
  }
  uint32_t out = in->dtype;
  if (a->half_to_float) {
    if (in->dtype != BP_DTYPE_F16 && in->dtype != BP_DTYPE_BF16) {
      return bp__infer_fail(x, "attrs.half_to_float needs an f16 or bf16 input, got %s",
                            bp_dtype_name(in->dtype));
    }
    out = BP_DTYPE_F32;
  }
  x->compute_dtype = out;
  return bp__infer_set_out(x, 0, out, in->rank, in->sizes);
}

/* Checks the trailing `nrank` dims of input 0 against optional weight/bias
 * inputs (mask) whose shape must equal those dims. */
static bp_status_t bp__norm_params(bp__infer_t* x, uint32_t nrank, uint32_t mask) {
  const bp_tensor_desc_t* in = &x->in[0];
  for (uint32_t i = 1; i < x->num_inputs && i < 32; ++i) {
    if (!(mask & (1u << i)) || !bp__in_present(x, i)) continue;
    const bp_tensor_desc_t* p = &x->in[i];
    char n[64];
    if (!bp__shape_equal(p->rank, p->sizes, nrank, in->sizes + in->rank - nrank)) {
      char s0[192], s1[192];
      return bp__infer_fail(x, "input '%s' has shape %s; expected the normalized shape %s",
                            bp__op_input_name(x->op, x->num_inputs, i, n),
                            bp__shape_str(p->rank, p->sizes, s0, sizeof(s0)),
                            bp__shape_str(nrank, in->sizes + in->rank - nrank, s1, sizeof(s1)));
    }
    if (p->dtype != in->dtype && !bp__dtype_is_float(p->dtype)) {
      return bp__infer_fail(x, "input '%s' has dtype %s; expected a floating dtype",
                            bp__op_input_name(x->op, x->num_inputs, i, n), bp_dtype_name(p->dtype));
    }
  }
  return BP_OK;
}

/* native_layer_norm: out like input; mean and rstd keep the leading dims and
 * have size 1 in the normalized ones. normalized_shape entries of 0 take the
 * input's size (the default attrs normalize the last dim). */
bp_status_t bp__infer_layer_norm(bp__infer_t* x) {
  const bp_layer_norm_attrs_t* a = x->attrs;
  const bp_tensor_desc_t* in = &x->in[0];
  if (!bp__dtype_is_float(in->dtype)) {
    return bp__infer_fail(x, "input 'input' has dtype %s; a floating dtype is required",
                          bp_dtype_name(in->dtype));
  }
  uint32_t nr = a->normalized_rank;
  if (nr == 0 || nr > in->rank) {
    return bp__infer_fail(x, "attrs.normalized_rank = %u must be in 1..%u (the input's rank)", nr,
                          in->rank);
  }
  for (uint32_t k = 0; k < nr; ++k) {
    int64_t want = a->normalized_shape[k];
    int64_t have = in->sizes[in->rank - nr + k];
    if (want != 0 && want != have) {
      char s[192];
      return bp__infer_fail(x, "attrs.normalized_shape[%u] = %lld does not match input shape %s",
                            k, (long long)want, bp__shape_str(in->rank, in->sizes, s, sizeof(s)));
    }
  }
  bp_status_t st = bp__norm_params(x, nr, 0x6);
  if (st != BP_OK) return st;
  int64_t stat[BP_MAX_RANK];
  memcpy(stat, in->sizes, sizeof(int64_t) * in->rank);
  for (uint32_t k = in->rank - nr; k < in->rank; ++k) stat[k] = 1;
  x->compute_dtype = in->dtype;
  st = bp__infer_set_out(x, 0, in->dtype, in->rank, in->sizes);
  if (st == BP_OK) st = bp__infer_set_out(x, 1, in->dtype, in->rank, stat);
  if (st == BP_OK) st = bp__infer_set_out(x, 2, in->dtype, in->rank, stat);
  return st;
}

bp_status_t bp__infer_rms_norm(bp__infer_t* x) {
  const bp_rms_norm_attrs_t* a = x->attrs;
  const bp_tensor_desc_t* in = &x->in[0];
  if (!bp__dtype_is_float(in->dtype)) {
    return bp__infer_fail(x, "input 'input' has dtype %s; a floating dtype is required",
                          bp_dtype_name(in->dtype));
  }
  if (a->normalized_rank == 0 || a->normalized_rank > in->rank) {
    return bp__infer_fail(x, "attrs.normalized_rank = %u must be in 1..%u (the input's rank)",
                          a->normalized_rank, in->rank);
  }
  bp_status_t st = bp__norm_params(x, a->normalized_rank, 0x2);
  if (st != BP_OK) return st;
  x->compute_dtype = in->dtype;
  return bp__infer_set_out(x, 0, in->dtype, in->rank, in->sizes);
}

/* ---- attention, embedding, dropout ------------------------------------------------ */

/* scaled_dot_product_attention(q [..., Hq, L, E], k [..., Hk, S, E],
 * v [..., Hk, S, Ev], mask broadcastable to [..., Hq, L, S]) -> [..., Hq, L, Ev]. */
bp_status_t bp__infer_sdpa(bp__infer_t* x) {
  const bp_sdpa_attrs_t* a = x->attrs;
  bp_status_t st = bp__same_dtype(x, 0x7, 1);
  if (st != BP_OK) return st;
  const bp_tensor_desc_t *q = &x->in[0], *k = &x->in[1], *v = &x->in[2];
  uint32_t r = q->rank;
  if (r < 2 || k->rank != r || v->rank != r) {
    return bp__infer_fail(x, "query, key and value must have the same rank >= 2 (got %u, %u, %u)",
                          q->rank, k->rank, v->rank);
  }
  if (q->sizes[r - 1] != k->sizes[r - 1] || k->sizes[r - 2] != v->sizes[r - 2]) {
    return bp__infer_fail(x, "query/key head dims (%lld, %lld) or key/value lengths (%lld, %lld) "
                             "differ",
                          (long long)q->sizes[r - 1], (long long)k->sizes[r - 1],
                          (long long)k->sizes[r - 2], (long long)v->sizes[r - 2]);
  }
  for (uint32_t d = 0; d + 2 < r; ++d) {
    int64_t qs = q->sizes[d], ks = k->sizes[d];
    int gqa_dim = a->enable_gqa && d + 3 == r;
    int ok = ks == v->sizes[d] && (qs == ks || (gqa_dim && ks > 0 && qs % ks == 0));
    if (!ok) {
      return bp__infer_fail(x, "batch/head dim %u differs: query %lld, key %lld, value %lld%s", d,
                            (long long)qs, (long long)ks, (long long)v->sizes[d],
                            d + 3 == r && !a->enable_gqa ? " (set attrs.enable_gqa for GQA)" : "");
    }
  }
  int64_t sizes[BP_MAX_RANK];
  memcpy(sizes, q->sizes, sizeof(int64_t) * r);
  sizes[r - 1] = v->sizes[r - 1];
  if (bp__in_present(x, 3)) {
    const bp_tensor_desc_t* m = &x->in[3];
    if (m->dtype != BP_DTYPE_BOOL && m->dtype != q->dtype) {
      return bp__infer_fail(x, "input 'attn_mask' has dtype %s; expected bool or %s",
                            bp_dtype_name(m->dtype), bp_dtype_name(q->dtype));
    }
    int64_t scores[BP_MAX_RANK];
    memcpy(scores, q->sizes, sizeof(int64_t) * r);
    scores[r - 1] = k->sizes[r - 2];
    st = bp__broadcasts_to(x, 3, r, scores);
    if (st != BP_OK) return st;
  }
  x->compute_dtype = q->dtype;
  return bp__infer_set_out(x, 0, q->dtype, r, sizes);
}

bp_status_t bp__infer_embedding(bp__infer_t* x) {
  const bp_tensor_desc_t *w = &x->in[0], *idx = &x->in[1];
  bp_status_t st = bp__expect_rank(x, 0, 2);
  if (st != BP_OK) return st;
  if (idx->dtype != BP_DTYPE_I32 && idx->dtype != BP_DTYPE_I64) {
    return bp__infer_fail(x, "input 'indices' has dtype %s; expected i32 or i64",
                          bp_dtype_name(idx->dtype));
  }
  if (idx->rank + 1 > BP_MAX_RANK) {
    return bp__infer_fail(x, "input 'indices' has rank %u; the output would exceed rank %d",
                          idx->rank, BP_MAX_RANK);
  }
  int64_t sizes[BP_MAX_RANK];
  memcpy(sizes, idx->sizes, sizeof(int64_t) * idx->rank);
  sizes[idx->rank] = w->sizes[1];
  x->compute_dtype = w->dtype;
  return bp__infer_set_out(x, 0, w->dtype, idx->rank + 1, sizes);
}

bp_status_t bp__infer_dropout(bp__infer_t* x) {
  const bp_tensor_desc_t* in = &x->in[0];
  if (!bp__dtype_is_float(in->dtype)) {
    return bp__infer_fail(x, "input 'input' has dtype %s; a floating dtype is required",
                          bp_dtype_name(in->dtype));
  }
  x->compute_dtype = in->dtype;
  bp_status_t st = bp__infer_set_out(x, 0, in->dtype, in->rank, in->sizes);
  if (st != BP_OK) return st;
  return bp__infer_set_out(x, 1, BP_DTYPE_BOOL, in->rank, in->sizes);
}
