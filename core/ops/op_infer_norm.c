/* backplane core: inference rules of the normalizations (batch_norm,
 * group_norm and its backward, layer_norm and its backward) and of the fused
 * cross_entropy and add_layer_norm. Shapes, dtypes and error cases follow PyTorch's CPU
 * kernels (aten/src/ATen/native/{Normalization,group_norm,layer_norm,
 * LossNLL}.cpp).
 *
 * Parameter dtypes (weight, bias, running stats) follow PyTorch's "mixed
 * type" rule: they equal the input's dtype, or are all f32 when the input
 * is f16/bf16. The saved statistics (mean, rstd, save_mean, save_invstd)
 * then take the parameters' dtype (f32), else the input's.
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "ops/ops_internal.h"

static bp_status_t bp__norm_float_input(bp__infer_t* x, uint32_t i) {
  if (!bp__dtype_is_float(x->in[i].dtype)) {
    char n[64];
    return bp__infer_fail(x, "input '%s' has dtype %s; a floating dtype is required",
                          bp__op_input_name(x->op, x->num_inputs, i, n),
                          bp_dtype_name(x->in[i].dtype));
  }
  return BP_OK;
}

/* Checks the dtypes of the present parameters in `mask` against input `in`
 * (PyTorch's is_mixed_type / check_mixed_data_type) and returns the dtype
 * of the saved statistics in *out_stat. */
static bp_status_t bp__norm_param_dtypes(bp__infer_t* x, uint32_t in, uint32_t mask,
                                         uint32_t* out_stat) {
  uint32_t d = x->in[in].dtype;
  int half = d == BP_DTYPE_F16 || d == BP_DTYPE_BF16;
  int mixed = 0;
  for (uint32_t i = 0; i < x->num_inputs && i < 32; ++i) {
    if ((mask & (1u << i)) && bp__in_present(x, i) && half && x->in[i].dtype == BP_DTYPE_F32) {
      mixed = 1;
    }
  }
  uint32_t want = mixed ? BP_DTYPE_F32 : d;
  for (uint32_t i = 0; i < x->num_inputs && i < 32; ++i) {
    if (!(mask & (1u << i)) || !bp__in_present(x, i) || x->in[i].dtype == want) continue;
    char n[64];
    return bp__infer_fail(x, "input '%s' has dtype %s; expected %s (the input's dtype%s)",
                          bp__op_input_name(x->op, x->num_inputs, i, n),
                          bp_dtype_name(x->in[i].dtype), bp_dtype_name(want),
                          half ? ", or f32 for every parameter" : "");
  }
  *out_stat = want;
  return BP_OK;
}

/* Present input i must be 1-d of `len` elements. */
static bp_status_t bp__norm_vector(bp__infer_t* x, uint32_t i, int64_t len, const char* what) {
  if (!bp__in_present(x, i)) return BP_OK;
  const bp_tensor_desc_t* p = &x->in[i];
  if (p->rank != 1 || p->sizes[0] != len) {
    char n[64], s[192];
    return bp__infer_fail(x, "input '%s' has shape %s; expected [%lld] (%s)",
                          bp__op_input_name(x->op, x->num_inputs, i, n),
                          bp__shape_str(p->rank, p->sizes, s, sizeof(s)), (long long)len, what);
  }
  return BP_OK;
}

/* Present input i must have exactly the shape of input j. */
static bp_status_t bp__norm_same_shape(bp__infer_t* x, uint32_t i, uint32_t j) {
  const bp_tensor_desc_t *a = &x->in[i], *b = &x->in[j];
  if (bp__shape_equal(a->rank, a->sizes, b->rank, b->sizes)) return BP_OK;
  char n0[64], n1[64], s0[192], s1[192];
  return bp__infer_fail(x, "input '%s' has shape %s; expected the shape of '%s', %s",
                        bp__op_input_name(x->op, x->num_inputs, i, n0),
                        bp__shape_str(a->rank, a->sizes, s0, sizeof(s0)),
                        bp__op_input_name(x->op, x->num_inputs, j, n1),
                        bp__shape_str(b->rank, b->sizes, s1, sizeof(s1)));
}

static int64_t bp__norm_numel(const bp_tensor_desc_t* t) {
  int64_t n = 1;
  for (uint32_t k = 0; k < t->rank; ++k) n *= t->sizes[k];
  return n;
}

/* A gradient output: `rank`/`sizes` when output_mask has `bit`, else [0]
 * (PyTorch returns an undefined tensor there). */
static bp_status_t bp__norm_grad_out(bp__infer_t* x, uint32_t k, uint32_t mask, uint32_t dtype,
                                     uint32_t rank, const int64_t* sizes) {
  static const int64_t zero[1] = {0};
  if (mask & (1u << k)) return bp__infer_set_out(x, k, dtype, rank, sizes);
  return bp__infer_set_out(x, k, dtype, 1, zero);
}

/* _native_batch_norm_legit (running stats given), .no_stats (absent) and
 * _native_batch_norm_legit_no_training (attrs.training = 0). out like input
 * [N, C, *]; save_mean and save_invstd are [C] when training, [0] in eval. */
bp_status_t bp__infer_batch_norm(bp__infer_t* x) {
  const bp_batch_norm_attrs_t* a = x->attrs;
  const bp_tensor_desc_t* in = &x->in[0];
  bp_status_t st = bp__norm_float_input(x, 0);
  if (st != BP_OK) return st;
  if (in->rank < 2) {
    char s[192];
    return bp__infer_fail(x, "input 'input' has shape %s; expected [N, C, *] (rank >= 2)",
                          bp__shape_str(in->rank, in->sizes, s, sizeof(s)));
  }
  int has_rm = bp__in_present(x, 3), has_rv = bp__in_present(x, 4);
  if (has_rm != has_rv) {
    return bp__infer_fail(x, "running_mean and running_var must both be given or both be absent");
  }
  if (!a->training && !has_rm) {
    return bp__infer_fail(x, "attrs.training = 0 needs running_mean and running_var");
  }
  if (!(a->eps >= 0.0) || !isfinite(a->eps) || !isfinite(a->momentum)) {
    return bp__infer_fail(x, "attrs.eps = %g and attrs.momentum = %g must be finite, eps >= 0",
                          a->eps, a->momentum);
  }
  int64_t c = in->sizes[1];
  for (uint32_t i = 1; i <= 4 && st == BP_OK; ++i) st = bp__norm_vector(x, i, c, "the channels");
  uint32_t stat = BP_DTYPE_INVALID;
  if (st == BP_OK) st = bp__norm_param_dtypes(x, 0, 0x1e, &stat);
  if (st != BP_OK) return st;
  int64_t ssz[1] = {a->training ? c : 0};
  x->compute_dtype = in->dtype;
  st = bp__infer_set_out(x, 0, in->dtype, in->rank, in->sizes);
  if (st == BP_OK) st = bp__infer_set_out(x, 1, stat, 1, ssz);
  if (st == BP_OK) st = bp__infer_set_out(x, 2, stat, 1, ssz);
  return st;
}

/* The N, C, HxW and group attributes against an [N, C, *] input. */
static bp_status_t bp__group_norm_dims(bp__infer_t* x, uint32_t i) {
  const bp_group_norm_attrs_t* a = x->attrs;
  const bp_tensor_desc_t* in = &x->in[i];
  char n[64], s[192];
  if (in->rank < 2) {
    return bp__infer_fail(x, "input '%s' has shape %s; expected [N, C, *] (rank >= 2)",
                          bp__op_input_name(x->op, x->num_inputs, i, n),
                          bp__shape_str(in->rank, in->sizes, s, sizeof(s)));
  }
  int64_t hxw = 1;
  for (uint32_t k = 2; k < in->rank; ++k) hxw *= in->sizes[k];
  if (a->n != in->sizes[0] || a->c != in->sizes[1] || a->hxw != hxw) {
    return bp__infer_fail(x, "attrs N = %lld, C = %lld, HxW = %lld do not match input shape %s",
                          (long long)a->n, (long long)a->c, (long long)a->hxw,
                          bp__shape_str(in->rank, in->sizes, s, sizeof(s)));
  }
  if (a->group <= 0 || a->c % a->group != 0) {
    return bp__infer_fail(x, "attrs.group = %lld must be positive and divide C = %lld",
                          (long long)a->group, (long long)a->c);
  }
  if (!(a->eps >= 0.0) || !isfinite(a->eps)) {
    return bp__infer_fail(x, "attrs.eps = %g must be finite and >= 0", a->eps);
  }
  return BP_OK;
}

/* native_group_norm: out like input; mean and rstd [N, group]. */
bp_status_t bp__infer_group_norm(bp__infer_t* x) {
  const bp_group_norm_attrs_t* a = x->attrs;
  const bp_tensor_desc_t* in = &x->in[0];
  uint32_t stat = BP_DTYPE_INVALID;
  bp_status_t st = bp__norm_float_input(x, 0);
  if (st == BP_OK) st = bp__group_norm_dims(x, 0);
  if (st == BP_OK) st = bp__norm_vector(x, 1, a->c, "the channels");
  if (st == BP_OK) st = bp__norm_vector(x, 2, a->c, "the channels");
  if (st == BP_OK) st = bp__norm_param_dtypes(x, 0, 0x6, &stat);
  if (st != BP_OK) return st;
  int64_t ssz[2] = {a->n, a->group};
  x->compute_dtype = in->dtype;
  st = bp__infer_set_out(x, 0, in->dtype, in->rank, in->sizes);
  if (st == BP_OK) st = bp__infer_set_out(x, 1, stat, 2, ssz);
  if (st == BP_OK) st = bp__infer_set_out(x, 2, stat, 2, ssz);
  return st;
}

/* native_group_norm_backward(grad_out, input, mean, rstd, weight):
 * grad_input like input, grad_weight and grad_bias [C]; an output whose
 * output_mask bit is clear is [0]. */
bp_status_t bp__infer_group_norm_backward(bp__infer_t* x) {
  const bp_group_norm_attrs_t* a = x->attrs;
  const bp_tensor_desc_t* in = &x->in[1];
  uint32_t stat = BP_DTYPE_INVALID;
  if (a->output_mask > 7) {
    return bp__infer_fail(x, "attrs.output_mask = %u has bits other than 0..2", a->output_mask);
  }
  bp_status_t st = bp__norm_float_input(x, 1);
  if (st == BP_OK) st = bp__group_norm_dims(x, 1);
  if (st == BP_OK) st = bp__norm_same_shape(x, 0, 1);
  if (st == BP_OK && x->in[0].dtype != in->dtype) {
    st = bp__infer_fail(x, "input 'grad_out' has dtype %s; expected %s (the input's)",
                        bp_dtype_name(x->in[0].dtype), bp_dtype_name(in->dtype));
  }
  if (st == BP_OK) st = bp__norm_vector(x, 4, a->c, "the channels");
  if (st == BP_OK) st = bp__norm_param_dtypes(x, 1, 0x10, &stat);
  if (st != BP_OK) return st;
  for (uint32_t i = 2; i <= 3; ++i) {
    const bp_tensor_desc_t* m = &x->in[i];
    if (bp__norm_numel(m) != a->n * a->group || m->dtype != stat) {
      char n[64], s[192];
      return bp__infer_fail(x, "input '%s' is %s %s; expected %s with N * group = %lld elements",
                            bp__op_input_name(x->op, x->num_inputs, i, n),
                            bp_dtype_name(m->dtype), bp__shape_str(m->rank, m->sizes, s, sizeof(s)),
                            bp_dtype_name(stat), (long long)(a->n * a->group));
    }
  }
  uint32_t wd = bp__in_present(x, 4) ? x->in[4].dtype : in->dtype;
  int64_t csz[1] = {a->c};
  x->compute_dtype = in->dtype;
  st = bp__norm_grad_out(x, 0, a->output_mask, in->dtype, in->rank, in->sizes);
  if (st == BP_OK) st = bp__norm_grad_out(x, 1, a->output_mask, wd, 1, csz);
  if (st == BP_OK) st = bp__norm_grad_out(x, 2, a->output_mask, wd, 1, csz);
  return st;
}

/* normalized_rank/normalized_shape against input i; weight/bias inputs in
 * `mask` must have the normalized shape. normalized_shape entries of 0 take
 * the input's size (the default attrs normalize the last dim). */
static bp_status_t bp__layer_norm_shape(bp__infer_t* x, uint32_t i, uint32_t mask) {
  const bp_layer_norm_attrs_t* a = x->attrs;
  const bp_tensor_desc_t* in = &x->in[i];
  uint32_t nr = a->normalized_rank;
  char s[192], s1[192], n[64];
  if (nr == 0 || nr > in->rank) {
    return bp__infer_fail(x, "attrs.normalized_rank = %u must be in 1..%u (the input's rank)", nr,
                          in->rank);
  }
  for (uint32_t k = 0; k < nr; ++k) {
    int64_t want = a->normalized_shape[k];
    int64_t have = in->sizes[in->rank - nr + k];
    if (want != 0 && want != have) {
      return bp__infer_fail(x, "attrs.normalized_shape[%u] = %lld does not match input shape %s",
                            k, (long long)want, bp__shape_str(in->rank, in->sizes, s, sizeof(s)));
    }
  }
  if (!(a->eps >= 0.0) || !isfinite(a->eps)) {
    return bp__infer_fail(x, "attrs.eps = %g must be finite and >= 0", a->eps);
  }
  const int64_t* norm = in->sizes + in->rank - nr;
  for (uint32_t p = 0; p < x->num_inputs && p < 32; ++p) {
    if (!(mask & (1u << p)) || !bp__in_present(x, p)) continue;
    const bp_tensor_desc_t* t = &x->in[p];
    if (!bp__shape_equal(t->rank, t->sizes, nr, norm)) {
      return bp__infer_fail(x, "input '%s' has shape %s; expected the normalized shape %s",
                            bp__op_input_name(x->op, x->num_inputs, p, n),
                            bp__shape_str(t->rank, t->sizes, s, sizeof(s)),
                            bp__shape_str(nr, norm, s1, sizeof(s1)));
    }
  }
  return BP_OK;
}

/* native_layer_norm: out like input; mean and rstd keep the leading dims and
 * have size 1 in the normalized ones. */
bp_status_t bp__infer_layer_norm(bp__infer_t* x) {
  const bp_layer_norm_attrs_t* a = x->attrs;
  const bp_tensor_desc_t* in = &x->in[0];
  uint32_t stat = BP_DTYPE_INVALID;
  bp_status_t st = bp__norm_float_input(x, 0);
  if (st == BP_OK) st = bp__layer_norm_shape(x, 0, 0x6);
  if (st == BP_OK) st = bp__norm_param_dtypes(x, 0, 0x6, &stat);
  if (st != BP_OK) return st;
  int64_t ssz[BP_MAX_RANK];
  memcpy(ssz, in->sizes, sizeof(int64_t) * in->rank);
  for (uint32_t k = in->rank - a->normalized_rank; k < in->rank; ++k) ssz[k] = 1;
  x->compute_dtype = in->dtype;
  st = bp__infer_set_out(x, 0, in->dtype, in->rank, in->sizes);
  if (st == BP_OK) st = bp__infer_set_out(x, 1, stat, in->rank, ssz);
  if (st == BP_OK) st = bp__infer_set_out(x, 2, stat, in->rank, ssz);
  return st;
}

/* add_layer_norm(input, residual, weight?, bias?): residual_out = input +
 * residual (same dtype and shape, no broadcasting), out =
 * layer_norm(residual_out); no saved statistics. */
bp_status_t bp__infer_add_layer_norm(bp__infer_t* x) {
  const bp_tensor_desc_t* in = &x->in[0];
  uint32_t stat = BP_DTYPE_INVALID;
  bp_status_t st = bp__norm_float_input(x, 0);
  if (st == BP_OK) st = bp__infer_like_input(x, 1, 0);
  if (st == BP_OK) st = bp__layer_norm_shape(x, 0, 0xC);
  if (st == BP_OK) st = bp__norm_param_dtypes(x, 0, 0xC, &stat);
  if (st != BP_OK) return st;
  x->compute_dtype = in->dtype;
  st = bp__infer_set_out(x, 0, in->dtype, in->rank, in->sizes);
  if (st == BP_OK) st = bp__infer_set_out(x, 1, in->dtype, in->rank, in->sizes);
  return st;
}

/* native_layer_norm_backward(grad_out, input, mean, rstd, weight, bias):
 * grad_input like input, grad_weight and grad_bias of the normalized shape
 * (dtype of weight / bias when given, else the input's); an output whose
 * output_mask bit is clear is [0]. mean and rstd hold one value per row
 * (any shape with that many elements, e.g. layer_norm's [..., 1]). */
bp_status_t bp__infer_layer_norm_backward(bp__infer_t* x) {
  const bp_layer_norm_attrs_t* a = x->attrs;
  const bp_tensor_desc_t* in = &x->in[1];
  uint32_t stat = BP_DTYPE_INVALID;
  if (a->output_mask > 7) {
    return bp__infer_fail(x, "attrs.output_mask = %u has bits other than 0..2", a->output_mask);
  }
  bp_status_t st = bp__norm_float_input(x, 1);
  if (st == BP_OK) st = bp__layer_norm_shape(x, 1, 0x30);
  if (st == BP_OK) st = bp__norm_same_shape(x, 0, 1);
  if (st == BP_OK && x->in[0].dtype != in->dtype) {
    st = bp__infer_fail(x, "input 'grad_out' has dtype %s; expected %s (the input's)",
                        bp_dtype_name(x->in[0].dtype), bp_dtype_name(in->dtype));
  }
  if (st == BP_OK) st = bp__norm_param_dtypes(x, 1, 0x30, &stat);
  if (st != BP_OK) return st;
  uint32_t nr = a->normalized_rank;
  int64_t rows = 1;
  for (uint32_t k = 0; k + nr < in->rank; ++k) rows *= in->sizes[k];
  for (uint32_t i = 2; i <= 3; ++i) {
    const bp_tensor_desc_t* m = &x->in[i];
    if (bp__norm_numel(m) != rows || m->dtype != stat) {
      char n[64], s[192];
      return bp__infer_fail(x, "input '%s' is %s %s; expected %s with one element per row (%lld)",
                            bp__op_input_name(x->op, x->num_inputs, i, n),
                            bp_dtype_name(m->dtype), bp__shape_str(m->rank, m->sizes, s, sizeof(s)),
                            bp_dtype_name(stat), (long long)rows);
    }
  }
  const int64_t* norm = in->sizes + in->rank - nr;
  uint32_t wd = bp__in_present(x, 4) ? x->in[4].dtype : in->dtype;
  uint32_t bd = bp__in_present(x, 5) ? x->in[5].dtype : in->dtype;
  x->compute_dtype = in->dtype;
  st = bp__norm_grad_out(x, 0, a->output_mask, in->dtype, in->rank, in->sizes);
  if (st == BP_OK) st = bp__norm_grad_out(x, 1, a->output_mask, wd, nr, norm);
  if (st == BP_OK) st = bp__norm_grad_out(x, 2, a->output_mask, bd, nr, norm);
  return st;
}

/* cross_entropy(logits [N, C, d1...] or [C], target [N, d1...] or [] (i64
 * class indices), weight [C]): reduction none gives the target's shape,
 * mean and sum a 0-d result, in the logits' dtype. */
bp_status_t bp__infer_cross_entropy(bp__infer_t* x) {
  const bp_cross_entropy_attrs_t* a = x->attrs;
  const bp_tensor_desc_t *in = &x->in[0], *t = &x->in[1];
  bp_status_t st = bp__norm_float_input(x, 0);
  if (st != BP_OK) return st;
  char s0[192], s1[192], s2[192];
  if (in->rank < 1) return bp__infer_fail(x, "input 'logits' must have rank >= 1 (got 0-d)");
  if (t->dtype != BP_DTYPE_I64) {
    return bp__infer_fail(x, "input 'target' has dtype %s; expected i64 class indices",
                          bp_dtype_name(t->dtype));
  }
  int64_t tsz[BP_MAX_RANK];
  uint32_t tr = in->rank - 1;
  uint32_t cdim = in->rank == 1 ? 0 : 1;
  for (uint32_t k = 0, j = 0; k < in->rank; ++k) {
    if (k != cdim) tsz[j++] = in->sizes[k];
  }
  if (!bp__shape_equal(t->rank, t->sizes, tr, tsz)) {
    return bp__infer_fail(x, "input 'target' has shape %s; expected %s for logits %s",
                          bp__shape_str(t->rank, t->sizes, s0, sizeof(s0)),
                          bp__shape_str(tr, tsz, s1, sizeof(s1)),
                          bp__shape_str(in->rank, in->sizes, s2, sizeof(s2)));
  }
  st = bp__norm_vector(x, 2, in->sizes[cdim], "the classes");
  if (st == BP_OK && bp__in_present(x, 2) && x->in[2].dtype != in->dtype) {
    st = bp__infer_fail(x, "input 'weight' has dtype %s; expected %s (the logits')",
                        bp_dtype_name(x->in[2].dtype), bp_dtype_name(in->dtype));
  }
  if (st != BP_OK) return st;
  if (!(a->label_smoothing >= 0.0 && a->label_smoothing <= 1.0)) {
    return bp__infer_fail(x, "attrs.label_smoothing = %g must be in [0, 1]", a->label_smoothing);
  }
  x->compute_dtype = in->dtype;
  if (a->reduction == BP_LOSS_NONE) return bp__infer_set_out(x, 0, in->dtype, tr, tsz);
  return bp__infer_set_out(x, 0, in->dtype, 0, tsz);
}
