/* backplane core: inference rules of matmul, normalization, embedding and
 * dropout (attention and linear: op_infer_attention.c).
 */
#include <math.h>
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

/* rms_norm of input 0 with the optional weight in `weight_mask`; output 0
 * like the input. */
static bp_status_t bp__rms_norm_rule(bp__infer_t* x, uint32_t weight_mask) {
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
  if (!(a->eps >= 0.0) || !isfinite(a->eps)) {
    return bp__infer_fail(x, "attrs.eps = %g must be finite and >= 0 (0: the dtype's epsilon)",
                          a->eps);
  }
  bp_status_t st = bp__norm_params(x, a->normalized_rank, weight_mask);
  if (st != BP_OK) return st;
  x->compute_dtype = in->dtype;
  return bp__infer_set_out(x, 0, in->dtype, in->rank, in->sizes);
}

bp_status_t bp__infer_rms_norm(bp__infer_t* x) { return bp__rms_norm_rule(x, 0x2); }

/* add_rms_norm(input, residual, weight?): residual_out = input + residual
 * (same dtype and shape, no broadcasting), out = rms_norm(residual_out). */
bp_status_t bp__infer_add_rms_norm(bp__infer_t* x) {
  bp_status_t st = bp__rms_norm_rule(x, 0x4);
  if (st == BP_OK) st = bp__infer_like_input(x, 1, 0);
  if (st != BP_OK) return st;
  return bp__infer_set_out(x, 1, x->in[0].dtype, x->in[0].rank, x->in[0].sizes);
}

/* ---- embedding, dropout ------------------------------------------------ */

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
