/* backplane core: inference rules of fft_r2c and fft_c2r (aten._fft_r2c and
 * aten._fft_c2r; docs/semantics.md, "FFT"). f32 is the only real dtype and
 * c64 the only complex one (aten pairs f32 with c64).
 */
#include <stdio.h>
#include <string.h>

#include "ops/ops_internal.h"

/* Wraps attrs.dims against `rank` into out_dims; rejects an empty list,
 * repeated dims and transformed dims of size 0 (the last listed dim's size
 * is checked by the caller). */
static bp_status_t fft_dims(bp__infer_t* x, uint32_t* out_dims, uint32_t* out_n) {
  const bp_fft_attrs_t* a = x->attrs;
  const bp_tensor_desc_t* in = &x->in[0];
  if (a->num_dims == 0) return bp__infer_fail(x, "attrs.num_dims must be at least 1");
  if (a->num_dims > in->rank) {
    return bp__infer_fail(x, "attrs.num_dims = %u exceeds the input's rank %u", a->num_dims,
                          in->rank);
  }
  for (uint32_t i = 0; i < a->num_dims; ++i) {
    char what[32];
    snprintf(what, sizeof(what), "attrs.dims[%u]", i);
    bp_status_t st = bp__infer_wrap_dim(x, a->dims[i], in->rank, what, &out_dims[i]);
    if (st != BP_OK) return st;
    for (uint32_t j = 0; j < i; ++j) {
      if (out_dims[j] == out_dims[i]) {
        return bp__infer_fail(x, "attrs.dims repeats dim %u", out_dims[i]);
      }
    }
    if (i + 1 < a->num_dims && in->sizes[out_dims[i]] < 1) {
      return bp__infer_fail(x, "invalid number of data points (%lld) in dim %u",
                            (long long)in->sizes[out_dims[i]], out_dims[i]);
    }
  }
  *out_n = a->num_dims;
  return BP_OK;
}

/* f32 [..] -> c64: the forward DFT over attrs.dims; with onesided the last
 * listed dim keeps n / 2 + 1 frequencies. */
bp_status_t bp__infer_fft_r2c(bp__infer_t* x) {
  const bp_fft_attrs_t* a = x->attrs;
  const bp_tensor_desc_t* in = &x->in[0];
  if (in->dtype != BP_DTYPE_F32) {
    return bp__infer_fail(x, "input 'self' has dtype %s; fft_r2c takes f32 (its output is c64)",
                          bp_dtype_name(in->dtype));
  }
  if (in->rank == 0) return bp__infer_fail(x, "input 'self' must have rank >= 1");
  uint32_t dims[BP_MAX_RANK], nd = 0;
  bp_status_t st = fft_dims(x, dims, &nd);
  if (st != BP_OK) return st;
  uint32_t last = dims[nd - 1];
  if (in->sizes[last] < 1) {
    return bp__infer_fail(x, "invalid number of data points (%lld) in dim %u",
                          (long long)in->sizes[last], last);
  }
  int64_t sizes[BP_MAX_RANK];
  memcpy(sizes, in->sizes, sizeof(int64_t) * in->rank);
  if (a->onesided) sizes[last] = sizes[last] / 2 + 1;
  x->compute_dtype = BP_DTYPE_C64;
  return bp__infer_set_out(x, 0, BP_DTYPE_C64, in->rank, sizes);
}

/* c64 [..] -> f32: the inverse DFT of a Hermitian signal over attrs.dims;
 * the last listed dim holds the first last_dim_size / 2 + 1 frequencies
 * (more are ignored) and becomes last_dim_size long. */
bp_status_t bp__infer_fft_c2r(bp__infer_t* x) {
  const bp_fft_attrs_t* a = x->attrs;
  const bp_tensor_desc_t* in = &x->in[0];
  if (in->dtype != BP_DTYPE_C64) {
    return bp__infer_fail(x, "input 'self' has dtype %s; fft_c2r takes c64 (its output is f32)",
                          bp_dtype_name(in->dtype));
  }
  if (in->rank == 0) return bp__infer_fail(x, "input 'self' must have rank >= 1");
  uint32_t dims[BP_MAX_RANK], nd = 0;
  bp_status_t st = fft_dims(x, dims, &nd);
  if (st != BP_OK) return st;
  uint32_t last = dims[nd - 1];
  if (a->last_dim_size < 1) {
    return bp__infer_fail(x, "attrs.last_dim_size = %lld must be at least 1",
                          (long long)a->last_dim_size);
  }
  if (in->sizes[last] < a->last_dim_size / 2 + 1) {
    return bp__infer_fail(x, "dim %u of 'self' has %lld frequencies; last_dim_size %lld needs %lld",
                          last, (long long)in->sizes[last], (long long)a->last_dim_size,
                          (long long)(a->last_dim_size / 2 + 1));
  }
  int64_t sizes[BP_MAX_RANK];
  memcpy(sizes, in->sizes, sizeof(int64_t) * in->rank);
  sizes[last] = a->last_dim_size;
  x->compute_dtype = BP_DTYPE_F32;
  return bp__infer_set_out(x, 0, BP_DTYPE_F32, in->rank, sizes);
}
