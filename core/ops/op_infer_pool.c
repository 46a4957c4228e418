/* backplane core: inference rules of pooling, adaptive pooling, their
 * backward ops, grid_sampler_2d and 2-d upsampling. Shapes, dtypes and error
 * cases follow PyTorch's CPU operators (docs/semantics.md, "Pooling and
 * sampling").
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "ops/ops_internal.h"

static const char* const k_axis[BP_MAX_SPATIAL] = {"d", "h", "w"};

/* Name of spatial dim i of s ("h", "w" for 2-d; "d", "h", "w" for 3-d). */
static const char* bp__axis(uint32_t s, uint32_t i) { return k_axis[BP_MAX_SPATIAL - s + i]; }

/* floor(a / b) for b > 0 (PyTorch div_rtn). */
static int64_t bp__div_floor(int64_t a, int64_t b) {
  int64_t q = a / b;
  return (a % b != 0 && a < 0) ? q - 1 : q;
}

/* Input rank s+1 (unbatched) or s+2 (batched) with every dim but the batch
 * non-empty. */
static bp_status_t bp__spatial_input(bp__infer_t* x, uint32_t i, uint32_t s) {
  const bp_tensor_desc_t* t = &x->in[i];
  char n[64], sh[192];
  if (t->rank != s + 1 && t->rank != s + 2) {
    return bp__infer_fail(x, "input '%s' must have rank %u or %u for %u spatial dims, got shape %s",
                          bp__op_input_name(x->op, x->num_inputs, i, n), s + 1, s + 2, s,
                          bp__shape_str(t->rank, t->sizes, sh, sizeof(sh)));
  }
  for (uint32_t d = t->rank - s - 1; d < t->rank; ++d) {
    if (t->sizes[d] == 0) {
      return bp__infer_fail(x,
                            "input '%s' of shape %s: expected non-zero sizes in every dim but the "
                            "batch dim",
                            bp__op_input_name(x->op, x->num_inputs, i, n),
                            bp__shape_str(t->rank, t->sizes, sh, sizeof(sh)));
    }
  }
  return BP_OK;
}

static bp_status_t bp__float_dtype(bp__infer_t* x, uint32_t i, int allow_i64, int allow_ints) {
  uint32_t d = x->in[i].dtype;
  if (bp__dtype_is_float(d) || (allow_i64 && d == BP_DTYPE_I64) ||
      (allow_ints && bp__dtype_is_int(d))) {
    return BP_OK;
  }
  char n[64];
  return bp__infer_fail(x, "input '%s' has dtype %s; expected %s",
                        bp__op_input_name(x->op, x->num_inputs, i, n), bp_dtype_name(d),
                        allow_ints  ? "a floating or integer dtype (not bool)"
                        : allow_i64 ? "a floating dtype or i64"
                                    : "a floating dtype");
}

/* Inputs i and j share one dtype (no promotion). */
static bp_status_t bp__same_dtype2(bp__infer_t* x, uint32_t i, uint32_t j) {
  if (x->in[i].dtype == x->in[j].dtype) return BP_OK;
  char n0[64], n1[64];
  return bp__infer_fail(x, "input '%s' has dtype %s but input '%s' has %s (no promotion)",
                        bp__op_input_name(x->op, x->num_inputs, i, n0),
                        bp_dtype_name(x->in[i].dtype),
                        bp__op_input_name(x->op, x->num_inputs, j, n1),
                        bp_dtype_name(x->in[j].dtype));
}

/* Output shape of avg_pool / max_pool over input 0 (or `self` of a backward
 * op, input `i`). is_max: dilation allowed, spatial dims 2 or 3. */
static bp_status_t bp__pool_shape(bp__infer_t* x, uint32_t i, int is_max, uint32_t want_s,
                                  uint32_t* out_rank, int64_t* out_sizes) {
  const bp_pool_attrs_t* a = x->attrs;
  uint32_t s = a->spatial_dims;
  if (want_s ? s != want_s : (s < (is_max ? 2u : 1u) || s > 3)) {
    if (want_s) return bp__infer_fail(x, "attrs.spatial_dims = %u; this op takes %u", s, want_s);
    return bp__infer_fail(x, "attrs.spatial_dims = %u must be %s", s, is_max ? "2 or 3" : "1, 2 or 3");
  }
  bp_status_t st = bp__spatial_input(x, i, s);
  if (st != BP_OK) return st;
  const bp_tensor_desc_t* t = &x->in[i];
  *out_rank = t->rank;
  memcpy(out_sizes, t->sizes, sizeof(int64_t) * t->rank);
  for (uint32_t k = 0; k < s; ++k) {
    const char* ax = bp__axis(s, k);
    int64_t kernel = a->kernel[k], stride = a->stride[k]; /* resolved by the core */
    int64_t pad = a->padding[k], dil = a->dilation[k];
    if (kernel <= 0 || kernel > INT32_MAX) {
      return bp__infer_fail(x, "attrs.kernel[%u] (%s) = %lld must be in 1..2^31-1", k, ax,
                            (long long)kernel);
    }
    if (stride <= 0 || stride > INT32_MAX) {
      return bp__infer_fail(x, "attrs.stride[%u] (%s) = %lld must be in 1..2^31-1", k, ax,
                            (long long)a->stride[k]);
    }
    if (dil <= 0 || dil > INT32_MAX || (!is_max && dil != 1)) {
      return bp__infer_fail(x, "attrs.dilation[%u] (%s) = %lld must be %s", k, ax, (long long)dil,
                            is_max ? "in 1..2^31-1" : "1 (avg_pool has no dilation)");
    }
    if (pad < 0 || pad > kernel / 2) {
      return bp__infer_fail(x,
                            "attrs.padding[%u] (%s) = %lld must be in 0..kernel/2 = %lld (pad "
                            "should be at most half of the kernel size)",
                            k, ax, (long long)pad, (long long)(kernel / 2));
    }
    int64_t in = t->sizes[t->rank - s + k];
    int64_t span = dil * (kernel - 1) + 1;
    int64_t num = in + 2 * pad - span + (a->ceil_mode ? stride - 1 : 0);
    int64_t out = bp__div_floor(num, stride) + 1;
    /* ceil_mode: the last window must start inside the input or the left
     * padding. */
    if (a->ceil_mode && (out - 1) * stride >= in + pad) --out;
    if (out < 1) {
      return bp__infer_fail(x,
                            "input size %lld with kernel %lld, stride %lld, padding %lld, dilation "
                            "%lld gives output size %lld in dim %s: output size is too small",
                            (long long)in, (long long)kernel, (long long)stride, (long long)pad,
                            (long long)dil, (long long)out, ax);
    }
    out_sizes[t->rank - s + k] = out;
  }
  if (!is_max && a->has_divisor_override &&
      (a->divisor_override > INT32_MAX || a->divisor_override < INT32_MIN)) {
    return bp__infer_fail(x, "attrs.divisor_override = %lld is out of the int32 range",
                          (long long)a->divisor_override);
  }
  return BP_OK;
}

/* Input `i` has exactly the shape `sizes`. */
static bp_status_t bp__expect_shape(bp__infer_t* x, uint32_t i, uint32_t rank,
                                    const int64_t* sizes, const char* what) {
  const bp_tensor_desc_t* t = &x->in[i];
  if (bp__shape_equal(t->rank, t->sizes, rank, sizes)) return BP_OK;
  char n[64], s0[192], s1[192];
  return bp__infer_fail(x, "input '%s' has shape %s; expected %s %s",
                        bp__op_input_name(x->op, x->num_inputs, i, n),
                        bp__shape_str(t->rank, t->sizes, s0, sizeof(s0)), what,
                        bp__shape_str(rank, sizes, s1, sizeof(s1)));
}

/* avg_pool1d/2d/3d(self) -> out. */
bp_status_t bp__infer_pool(bp__infer_t* x) {
  uint32_t rank;
  int64_t sizes[BP_MAX_RANK];
  bp_status_t st = bp__float_dtype(x, 0, 1, 0);
  if (st == BP_OK) st = bp__pool_shape(x, 0, 0, 0, &rank, sizes);
  if (st != BP_OK) return st;
  x->compute_dtype = x->in[0].dtype;
  return bp__infer_set_out(x, 0, x->in[0].dtype, rank, sizes);
}

/* max_pool2d/3d_with_indices(self) -> (out, indices i64). */
bp_status_t bp__infer_pool_with_indices(bp__infer_t* x) {
  uint32_t rank;
  int64_t sizes[BP_MAX_RANK];
  bp_status_t st = bp__float_dtype(x, 0, 1, 1);
  if (st == BP_OK) st = bp__pool_shape(x, 0, 1, 0, &rank, sizes);
  if (st == BP_OK) st = bp__infer_set_out(x, 0, x->in[0].dtype, rank, sizes);
  if (st != BP_OK) return st;
  x->compute_dtype = x->in[0].dtype;
  return bp__infer_set_out(x, 1, BP_DTYPE_I64, rank, sizes);
}

/* avg_pool2d_backward(grad_output, self) -> grad_input like self;
 * grad_output has the forward output's shape. */
bp_status_t bp__infer_pool_backward(bp__infer_t* x) {
  uint32_t rank;
  int64_t sizes[BP_MAX_RANK];
  bp_status_t st = bp__float_dtype(x, 1, 1, 0);
  if (st == BP_OK) st = bp__same_dtype2(x, 0, 1);
  if (st == BP_OK) st = bp__pool_shape(x, 1, 0, 2, &rank, sizes);
  if (st == BP_OK) st = bp__expect_shape(x, 0, rank, sizes, "the forward output's shape");
  if (st != BP_OK) return st;
  x->compute_dtype = x->in[1].dtype;
  return bp__infer_set_out(x, 0, x->in[1].dtype, x->in[1].rank, x->in[1].sizes);
}

/* max_pool2d_with_indices_backward(grad_output, self, indices) -> grad_input
 * like self. */
bp_status_t bp__infer_max_pool_backward(bp__infer_t* x) {
  uint32_t rank;
  int64_t sizes[BP_MAX_RANK];
  bp_status_t st = bp__float_dtype(x, 1, 0, 0);
  if (st == BP_OK) st = bp__same_dtype2(x, 0, 1);
  if (st == BP_OK) st = bp__pool_shape(x, 1, 1, 2, &rank, sizes);
  if (st == BP_OK) st = bp__expect_shape(x, 0, rank, sizes, "the forward output's shape");
  if (st == BP_OK) st = bp__expect_shape(x, 2, rank, sizes, "the forward output's shape");
  if (st != BP_OK) return st;
  if (x->in[2].dtype != BP_DTYPE_I64) {
    return bp__infer_fail(x, "input 'indices' has dtype %s; expected i64",
                          bp_dtype_name(x->in[2].dtype));
  }
  x->compute_dtype = x->in[1].dtype;
  return bp__infer_set_out(x, 0, x->in[1].dtype, x->in[1].rank, x->in[1].sizes);
}

/* adaptive_avg_pool1d / _adaptive_avg_pool2d / _adaptive_avg_pool3d. */
bp_status_t bp__infer_adaptive_pool(bp__infer_t* x) {
  const bp_adaptive_pool_attrs_t* a = x->attrs;
  uint32_t s = a->spatial_dims;
  if (s < 1 || s > 3) return bp__infer_fail(x, "attrs.spatial_dims = %u must be 1, 2 or 3", s);
  bp_status_t st = bp__float_dtype(x, 0, 0, 0);
  if (st == BP_OK) st = bp__spatial_input(x, 0, s);
  if (st != BP_OK) return st;
  const bp_tensor_desc_t* t = &x->in[0];
  int64_t sizes[BP_MAX_RANK];
  memcpy(sizes, t->sizes, sizeof(int64_t) * t->rank);
  for (uint32_t k = 0; k < s; ++k) {
    if (a->output_size[k] < 0) {
      return bp__infer_fail(x, "attrs.output_size[%u] (%s) = %lld must be >= 0", k, bp__axis(s, k),
                            (long long)a->output_size[k]);
    }
    sizes[t->rank - s + k] = a->output_size[k];
  }
  x->compute_dtype = t->dtype;
  return bp__infer_set_out(x, 0, t->dtype, t->rank, sizes);
}

/* _adaptive_avg_pool2d_backward(grad_output, self): grad_output has self's
 * leading dims and non-empty output sizes in the last two. */
bp_status_t bp__infer_adaptive_pool_backward(bp__infer_t* x) {
  bp_status_t st = bp__float_dtype(x, 1, 0, 0);
  if (st == BP_OK) st = bp__same_dtype2(x, 0, 1);
  if (st == BP_OK) st = bp__spatial_input(x, 1, 2);
  if (st != BP_OK) return st;
  const bp_tensor_desc_t *g = &x->in[0], *t = &x->in[1];
  int ok = g->rank == t->rank && g->sizes[g->rank - 1] > 0 && g->sizes[g->rank - 2] > 0;
  for (uint32_t d = 0; ok && d + 2 < t->rank; ++d) ok = g->sizes[d] == t->sizes[d];
  if (!ok) {
    char s0[192], s1[192];
    return bp__infer_fail(x,
                          "input 'grad_output' has shape %s; expected self's leading dims (self "
                          "is %s) and non-zero output sizes in the last two",
                          bp__shape_str(g->rank, g->sizes, s0, sizeof(s0)),
                          bp__shape_str(t->rank, t->sizes, s1, sizeof(s1)));
  }
  x->compute_dtype = t->dtype;
  return bp__infer_set_out(x, 0, t->dtype, t->rank, t->sizes);
}

/* grid_sampler_2d(input [N, C, H, W], grid [N, Ho, Wo, 2]) -> [N, C, Ho, Wo]. */
bp_status_t bp__infer_grid_sampler_2d(bp__infer_t* x) {
  const bp_tensor_desc_t *in = &x->in[0], *grid = &x->in[1];
  bp_status_t st = bp__float_dtype(x, 0, 0, 0);
  if (st == BP_OK) st = bp__same_dtype2(x, 1, 0);
  if (st != BP_OK) return st;
  char s0[192], s1[192];
  if (in->rank != 4 || grid->rank != 4) {
    return bp__infer_fail(x, "input (%s) and grid (%s) must both have rank 4",
                          bp__shape_str(in->rank, in->sizes, s0, sizeof(s0)),
                          bp__shape_str(grid->rank, grid->sizes, s1, sizeof(s1)));
  }
  if (grid->sizes[3] != 2 || grid->sizes[0] != in->sizes[0]) {
    return bp__infer_fail(x,
                          "grid of shape %s must be [N, H_out, W_out, 2] with input's batch size "
                          "(input is %s)",
                          bp__shape_str(grid->rank, grid->sizes, s1, sizeof(s1)),
                          bp__shape_str(in->rank, in->sizes, s0, sizeof(s0)));
  }
  if (in->sizes[2] == 0 || in->sizes[3] == 0) {
    return bp__infer_fail(x, "input of shape %s has empty spatial dims",
                          bp__shape_str(in->rank, in->sizes, s0, sizeof(s0)));
  }
  int64_t sizes[4] = {in->sizes[0], in->sizes[1], grid->sizes[1], grid->sizes[2]};
  x->compute_dtype = in->dtype;
  return bp__infer_set_out(x, 0, in->dtype, 4, sizes);
}

/* upsample_bilinear2d.vec / upsample_nearest2d.vec (and the overloads with
 * an output size and optional scales: both given; flags say which). */
bp_status_t bp__infer_upsample2d(bp__infer_t* x) {
  const bp_upsample_attrs_t* a = x->attrs;
  const bp_tensor_desc_t* in = &x->in[0];
  int nearest = x->op->id == BP_OP_upsample_nearest2d;
  uint32_t d = in->dtype;
  if (!bp__dtype_is_float(d) && !(nearest && d == BP_DTYPE_U8)) {
    return bp__infer_fail(x, "input 'input' has dtype %s; expected a floating dtype%s",
                          bp_dtype_name(d), nearest ? " or u8" : "");
  }
  if (nearest && a->align_corners) {
    return bp__infer_fail(x, "attrs.align_corners must be 0 (nearest has no align_corners)");
  }
  char s0[192];
  if (in->rank != 4 || in->sizes[1] == 0 || in->sizes[2] == 0 || in->sizes[3] == 0) {
    return bp__infer_fail(x, "input must be a 4-d [N, C, H, W] tensor with non-zero C, H, W, got %s",
                          bp__shape_str(in->rank, in->sizes, s0, sizeof(s0)));
  }
  int64_t sizes[4] = {in->sizes[0], in->sizes[1], 0, 0};
  if (!a->has_output_size && !a->has_scale) {
    return bp__infer_fail(x, "give attrs.output_size (has_output_size) or attrs.scale "
                             "(has_scale)");
  }
  for (uint32_t k = 0; k < 2; ++k) {
    double sc = a->scale[k];
    if (a->has_scale && (!(sc > 0.0) || isinf(sc))) {
      return bp__infer_fail(x, "attrs.scale[%u] = %g must be finite and > 0", k, sc);
    }
    if (a->has_output_size) {
      if (a->output_size[k] <= 0) {
        return bp__infer_fail(x, "attrs.output_size[%u] = %lld must be > 0", k,
                              (long long)a->output_size[k]);
      }
      sizes[2 + k] = a->output_size[k];
    } else {
      double o = (double)in->sizes[2 + k] * sc;
      if (!(o < 0x1p62)) return bp__infer_fail(x, "attrs.scale[%u] = %g overflows the output size", k, sc);
      sizes[2 + k] = (int64_t)o; /* truncation, as PyTorch's compute_output_size */
      if (sizes[2 + k] <= 0) {
        return bp__infer_fail(x, "input size %lld times attrs.scale[%u] = %g gives an empty output",
                              (long long)in->sizes[2 + k], k, sc);
      }
    }
  }
  x->compute_dtype = d;
  return bp__infer_set_out(x, 0, d, 4, sizes);
}
