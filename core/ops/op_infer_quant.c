/* backplane core: inference rules of the quantization family (QUANT):
 * quantize, dequantize, quantize_dynamic, scaled_mm, weight_only_mm.
 *
 * The layout rules (ops.h, bp_quantize_attrs_t; docs/semantics.md,
 * "Quantization"): 8-bit quantized tensors have the element dtype; 4-bit
 * ones are u8 with two elements per byte along the last dim (its logical
 * size is twice the stored one). The scale's shape picks per tensor, per
 * channel or per block.
 */
#include <stdio.h>
#include <string.h>

#include "ops/ops_internal.h"

/* ---- helpers -------------------------------------------------------------------- */

static int quant_is_4bit(uint32_t q) {
  return q == BP_DTYPE_I4 || q == BP_DTYPE_U4 || q == BP_DTYPE_F4E2M1FN;
}
static int quant_is_int(uint32_t q) {
  return q == BP_DTYPE_I8 || q == BP_DTYPE_U8 || q == BP_DTYPE_I4 || q == BP_DTYPE_U4;
}
static int quant_is_scale_float(uint32_t d) {
  return d == BP_DTYPE_F32 || d == BP_DTYPE_F16 || d == BP_DTYPE_BF16 || d == BP_DTYPE_F64;
}

static bp_status_t quant_check_qdtype(const bp__infer_t* x, uint32_t q, int int_only) {
  int ok = quant_is_int(q) ||
           (!int_only && (q == BP_DTYPE_F8E4M3FN || q == BP_DTYPE_F8E5M2 || q == BP_DTYPE_F4E2M1FN));
  if (!ok) {
    char b[32];
    return bp__infer_fail(x,
                          "attrs.qdtype %s is not a quantized element dtype (%s)",
                          bp__dtype_str(q, b),
                          int_only ? "i8, u8, i4, u4"
                                   : "i8, u8, i4, u4, float8_e4m3fn, float8_e5m2, float4_e2m1fn");
  }
  return BP_OK;
}

/* The dtype and sizes of the quantized side holding `logical` elements. */
static bp_status_t quant_stored_shape(const bp__infer_t* x, uint32_t q, uint32_t rank,
                                      const int64_t* logical, uint32_t* out_dtype,
                                      int64_t* out_sizes) {
  memcpy(out_sizes, logical, sizeof(int64_t) * rank);
  *out_dtype = q;
  if (!quant_is_4bit(q)) return BP_OK;
  if (rank == 0 || logical[rank - 1] % 2 != 0) {
    char s[192];
    return bp__infer_fail(x,
                          "%s elements are stored two per byte along the last dim, which must "
                          "be even; the shape is %s",
                          bp_dtype_name(q), bp__shape_str(rank, logical, s, sizeof s));
  }
  out_sizes[rank - 1] = logical[rank - 1] / 2;
  *out_dtype = BP_DTYPE_U8;
  return BP_OK;
}

static int64_t ceil_div(int64_t a, int64_t b) { return a / b + (a % b != 0); }

/* Checks input `si` (a scale or zero point) against the data's logical
 * shape: one element, [sizes[axis]] (block_size 0), or the data's rank
 * with ceil(sizes[axis] / block_size) along axis. */
static bp_status_t quant_check_scale_shape(const bp__infer_t* x, uint32_t si, uint32_t rank,
                                           const int64_t* sizes, const bp_quantize_attrs_t* a) {
  const bp_tensor_desc_t* s = &x->in[si];
  char nb[64], s0[192], s1[192];
  const char* name = bp__op_input_name(x->op, x->num_inputs, si, nb);
  int64_t n = 1;
  for (uint32_t d = 0; d < s->rank; d++) n *= s->sizes[d];
  if (a->block_size < 0) return bp__infer_fail(x, "attrs.block_size = %lld is negative", (long long)a->block_size);
  if (n == 1 && a->block_size == 0) return BP_OK; /* per tensor */
  uint32_t axis;
  bp_status_t st = bp__infer_wrap_dim(x, a->axis, rank, "attrs.axis", &axis);
  if (st != BP_OK) return st;
  if (a->block_size == 0) {
    if (s->rank == 1 && s->sizes[0] == sizes[axis]) return BP_OK; /* per channel */
    return bp__infer_fail(x,
                          "input '%s' has shape %s; with attrs.block_size 0 it must have one "
                          "element (per tensor) or [%lld] (per channel along axis %u of %s)",
                          name, bp__shape_str(s->rank, s->sizes, s0, sizeof s0),
                          (long long)sizes[axis], axis, bp__shape_str(rank, sizes, s1, sizeof s1));
  }
  int64_t want[BP_MAX_RANK];
  memcpy(want, sizes, sizeof(int64_t) * rank);
  want[axis] = ceil_div(sizes[axis], a->block_size);
  if (!bp__shape_equal(s->rank, s->sizes, rank, want)) {
    return bp__infer_fail(x,
                          "input '%s' has shape %s; blocks of %lld along axis %u of %s need %s",
                          name, bp__shape_str(s->rank, s->sizes, s0, sizeof s0),
                          (long long)a->block_size, axis, bp__shape_str(rank, sizes, nb, sizeof nb),
                          bp__shape_str(rank, want, s1, sizeof s1));
  }
  return BP_OK;
}

/* Scale (input 1) and optional zero point (input 2) of quantize and
 * dequantize, against the logical shape. */
static bp_status_t quant_check_params(const bp__infer_t* x, uint32_t rank, const int64_t* sizes,
                                      const bp_quantize_attrs_t* a) {
  const bp_tensor_desc_t* s = &x->in[1];
  if (!quant_is_scale_float(s->dtype) && s->dtype != BP_DTYPE_F8E8M0FNU) {
    return bp__infer_fail(x, "input 'scale' has dtype %s; f32, f16, bf16, f64 or float8_e8m0fnu",
                          bp_dtype_name(s->dtype));
  }
  bp_status_t st = quant_check_scale_shape(x, 1, rank, sizes, a);
  if (st != BP_OK || !bp__in_present(x, 2)) return st;
  const bp_tensor_desc_t* z = &x->in[2];
  if (!quant_is_int(a->qdtype)) {
    return bp__infer_fail(x, "a zero point needs an integer attrs.qdtype; %s has none (ONNX: zero "
                          "points of float8 must be 0)", bp_dtype_name(a->qdtype));
  }
  uint32_t want = (a->qdtype == BP_DTYPE_U8 || a->qdtype == BP_DTYPE_U4) ? BP_DTYPE_U8 : BP_DTYPE_I8;
  if (z->dtype != want) {
    return bp__infer_fail(x, "input 'zero_point' has dtype %s; %s needs %s (one per byte)",
                          bp_dtype_name(z->dtype), bp_dtype_name(a->qdtype), bp_dtype_name(want));
  }
  if (!bp__shape_equal(z->rank, z->sizes, s->rank, s->sizes)) {
    char s0[192], s1[192];
    return bp__infer_fail(x, "input 'zero_point' has shape %s; expected the scale's %s",
                          bp__shape_str(z->rank, z->sizes, s0, sizeof s0),
                          bp__shape_str(s->rank, s->sizes, s1, sizeof s1));
  }
  return BP_OK;
}

/* `allowed`: the flags the op takes (BP_QUANTIZE_NO_SATURATE everywhere, as
 * in ABI 1.2; BP_QUANTIZE_INT8_ACTIVATIONS for weight_only_mm). */
static bp_status_t quant_check_flags(const bp__infer_t* x, const bp_quantize_attrs_t* a, uint32_t allowed) {
  allowed |= BP_QUANTIZE_NO_SATURATE;
  if (a->flags & ~allowed) {
    return bp__infer_fail(x, "attrs.flags = 0x%x has unknown bits 0x%x", a->flags, a->flags & ~allowed);
  }
  return BP_OK;
}

/* attrs.activation: an epilogue of weight_only_mm only (ABI 1.4), 0 elsewhere. */
static bp_status_t quant_check_activation(const bp__infer_t* x, const bp_quantize_attrs_t* a, int takes_it) {
  if (!takes_it && a->activation != BP_ACTIVATION_NONE) {
    return bp__infer_fail(x, "attrs.activation = %u: only weight_only_mm takes an activation; set it to 0",
                          a->activation);
  }
  if (a->activation > BP_ACTIVATION_TANH) {
    return bp__infer_fail(x, "attrs.activation = %u is not an enum bp_activation value", a->activation);
  }
  return BP_OK;
}

static bp_status_t quant_check_float_input(const bp__infer_t* x, uint32_t i) {
  if (!quant_is_scale_float(x->in[i].dtype)) {
    char nb[64];
    return bp__infer_fail(x, "input '%s' has dtype %s; a floating dtype (f32, f16, bf16, f64) is "
                          "required", bp__op_input_name(x->op, x->num_inputs, i, nb),
                          bp_dtype_name(x->in[i].dtype));
  }
  return BP_OK;
}

#define QUANT_TRY(e)                \
  do {                              \
    bp_status_t st_ = (e);          \
    if (st_ != BP_OK) return st_;   \
  } while (0)

/* ---- quantize / dequantize / quantize_dynamic ------------------------------------ */

bp_status_t bp__infer_quantize(bp__infer_t* x) {
  const bp_quantize_attrs_t* a = x->attrs;
  const bp_tensor_desc_t* in = &x->in[0];
  QUANT_TRY(quant_check_qdtype(x, a->qdtype, 0));
  QUANT_TRY(quant_check_flags(x, a, 0));
  QUANT_TRY(quant_check_activation(x, a, 0));
  if (a->dtype != BP_DTYPE_INVALID) return bp__infer_fail(x, "attrs.dtype is unused by quantize; set it to 0");
  QUANT_TRY(quant_check_float_input(x, 0));
  QUANT_TRY(quant_check_params(x, in->rank, in->sizes, a));
  uint32_t dt;
  int64_t sizes[BP_MAX_RANK];
  QUANT_TRY(quant_stored_shape(x, a->qdtype, in->rank, in->sizes, &dt, sizes));
  x->compute_dtype = BP_DTYPE_F32;
  return bp__infer_set_out(x, 0, dt, in->rank, sizes);
}

bp_status_t bp__infer_dequantize(bp__infer_t* x) {
  const bp_quantize_attrs_t* a = x->attrs;
  const bp_tensor_desc_t* in = &x->in[0];
  QUANT_TRY(quant_check_qdtype(x, a->qdtype, 0));
  QUANT_TRY(quant_check_flags(x, a, 0));
  QUANT_TRY(quant_check_activation(x, a, 0));
  int64_t sizes[BP_MAX_RANK];
  memcpy(sizes, in->sizes, sizeof(int64_t) * in->rank);
  uint32_t want = quant_is_4bit(a->qdtype) ? BP_DTYPE_U8 : a->qdtype;
  if (in->dtype != want) {
    return bp__infer_fail(x, "input 'self' has dtype %s; attrs.qdtype %s is stored as %s", bp_dtype_name(in->dtype),
                          bp_dtype_name(a->qdtype), bp_dtype_name(want));
  }
  if (quant_is_4bit(a->qdtype)) {
    if (in->rank == 0) return bp__infer_fail(x, "input 'self' is 0-d; packed %s needs a last dim", bp_dtype_name(a->qdtype));
    if (sizes[in->rank - 1] > INT64_MAX / 2) return bp__infer_fail(x, "input 'self': the logical last dim overflows");
    sizes[in->rank - 1] *= 2;
  }
  QUANT_TRY(quant_check_params(x, in->rank, sizes, a));
  uint32_t od = a->dtype;
  if (od == BP_DTYPE_INVALID) od = x->in[1].dtype == BP_DTYPE_F8E8M0FNU ? BP_DTYPE_F32 : x->in[1].dtype;
  if (!quant_is_scale_float(od)) {
    return bp__infer_fail(x, "attrs.dtype %s is not a floating output dtype (f32, f16, bf16, f64)",
                          bp_dtype_name(od));
  }
  x->compute_dtype = BP_DTYPE_F32;
  return bp__infer_set_out(x, 0, od, in->rank, sizes);
}

bp_status_t bp__infer_quantize_dynamic(bp__infer_t* x) {
  const bp_quantize_attrs_t* a = x->attrs;
  const bp_tensor_desc_t* in = &x->in[0];
  QUANT_TRY(quant_check_qdtype(x, a->qdtype, 0));
  QUANT_TRY(quant_check_flags(x, a, 0));
  QUANT_TRY(quant_check_activation(x, a, 0));
  QUANT_TRY(quant_check_float_input(x, 0));
  if (in->rank == 0) return bp__infer_fail(x, "input 'self' is 0-d; scales run over its last dim");
  uint32_t axis;
  QUANT_TRY(bp__infer_wrap_dim(x, a->axis, in->rank, "attrs.axis", &axis));
  if (axis != in->rank - 1) {
    return bp__infer_fail(x, "attrs.axis = %d; dynamic scales run along the last dim only", a->axis);
  }
  if (a->block_size < 0) return bp__infer_fail(x, "attrs.block_size = %lld is negative", (long long)a->block_size);
  if (a->qdtype == BP_DTYPE_U8 || a->qdtype == BP_DTYPE_U4) {
    return bp__infer_fail(x, "dynamic scales are symmetric (amax / qmax); attrs.qdtype %s is "
                          "unsigned", bp_dtype_name(a->qdtype));
  }
  uint32_t sd = a->dtype == BP_DTYPE_INVALID ? BP_DTYPE_F32 : a->dtype;
  if (sd != BP_DTYPE_F32 && sd != BP_DTYPE_F16 && sd != BP_DTYPE_BF16 && sd != BP_DTYPE_F8E8M0FNU) {
    return bp__infer_fail(x, "attrs.dtype %s is not a scale dtype (f32, f16, bf16, float8_e8m0fnu)",
                          bp_dtype_name(sd));
  }
  if (sd == BP_DTYPE_F8E8M0FNU && quant_is_int(a->qdtype)) {
    return bp__infer_fail(x, "float8_e8m0fnu (MX) scales need a float attrs.qdtype, not %s",
                          bp_dtype_name(a->qdtype));
  }
  uint32_t dt;
  int64_t sizes[BP_MAX_RANK];
  QUANT_TRY(quant_stored_shape(x, a->qdtype, in->rank, in->sizes, &dt, sizes));
  x->compute_dtype = BP_DTYPE_F32;
  QUANT_TRY(bp__infer_set_out(x, 0, dt, in->rank, sizes));
  int64_t ss[BP_MAX_RANK];
  memcpy(ss, in->sizes, sizeof(int64_t) * in->rank);
  int64_t k = in->sizes[in->rank - 1];
  ss[in->rank - 1] = a->block_size == 0 ? 1 : ceil_div(k, a->block_size);
  return bp__infer_set_out(x, 1, sd, in->rank, ss);
}

/* ---- quantized matmuls ------------------------------------------------------------ */

/* A scale of scaled_mm: absent, one element, or n elements as [n] or the
 * given 2-D form ([n, 1] for a's rows, [1, n] for b's columns). */
static bp_status_t mm_check_scale(const bp__infer_t* x, uint32_t i, int64_t n, int rows) {
  if (!bp__in_present(x, i)) return BP_OK;
  const bp_tensor_desc_t* s = &x->in[i];
  char nb[64], s0[192];
  const char* name = bp__op_input_name(x->op, x->num_inputs, i, nb);
  if (s->dtype != BP_DTYPE_F32) {
    return bp__infer_fail(x, "input '%s' has dtype %s; scales are f32", name, bp_dtype_name(s->dtype));
  }
  int64_t numel = 1;
  for (uint32_t d = 0; d < s->rank; d++) numel *= s->sizes[d];
  if (numel == 1 && s->rank <= 2) return BP_OK;
  int ok = (s->rank == 1 && s->sizes[0] == n) ||
           (s->rank == 2 && s->sizes[rows ? 0 : 1] == n && s->sizes[rows ? 1 : 0] == 1);
  if (!ok) {
    return bp__infer_fail(x, "input '%s' has shape %s; expected one element, [%lld] or %s", name,
                          bp__shape_str(s->rank, s->sizes, s0, sizeof s0), (long long)n,
                          rows ? "[rows, 1]" : "[1, columns]");
  }
  return BP_OK;
}

static bp_status_t mm_check_bias(const bp__infer_t* x, uint32_t i, int64_t n) {
  if (!bp__in_present(x, i)) return BP_OK;
  const bp_tensor_desc_t* b = &x->in[i];
  char s0[192];
  QUANT_TRY(quant_check_float_input(x, i));
  if (b->rank != 1 || b->sizes[0] != n) {
    return bp__infer_fail(x, "input 'bias' has shape %s; expected [%lld]",
                          bp__shape_str(b->rank, b->sizes, s0, sizeof s0), (long long)n);
  }
  return BP_OK;
}

static int is_int8(uint32_t d) { return d == BP_DTYPE_I8 || d == BP_DTYPE_U8; }
static int is_fp8(uint32_t d) { return d == BP_DTYPE_F8E4M3FN || d == BP_DTYPE_F8E5M2; }

bp_status_t bp__infer_scaled_mm(bp__infer_t* x) {
  const bp_scaled_mm_attrs_t* a = x->attrs;
  const bp_tensor_desc_t *A = &x->in[0], *B = &x->in[1];
  char s0[192], s1[192];
  if (A->rank != 2 || B->rank != 2 || A->sizes[1] != B->sizes[0]) {
    return bp__infer_fail(x, "inputs 'a' %s and 'b' %s must be [m, k] and [k, n]",
                          bp__shape_str(A->rank, A->sizes, s0, sizeof s0),
                          bp__shape_str(B->rank, B->sizes, s1, sizeof s1));
  }
  int integer = is_int8(A->dtype) && is_int8(B->dtype);
  if (!integer && !(is_fp8(A->dtype) && is_fp8(B->dtype))) {
    return bp__infer_fail(x, "inputs 'a' (%s) and 'b' (%s) must both be i8/u8 or both fp8 "
                          "(float8_e4m3fn, float8_e5m2)", bp_dtype_name(A->dtype), bp_dtype_name(B->dtype));
  }
  int64_t m = A->sizes[0], n = B->sizes[1];
  QUANT_TRY(mm_check_scale(x, 2, m, 1));
  QUANT_TRY(mm_check_scale(x, 3, n, 0));
  QUANT_TRY(mm_check_bias(x, 4, n));
  if (a->activation > BP_ACTIVATION_TANH) {
    return bp__infer_fail(x, "attrs.activation = %u is not an enum bp_activation value", a->activation);
  }
  if (!integer && (a->a_zero_point != 0 || a->b_zero_point != 0)) {
    return bp__infer_fail(x, "zero points are for integer inputs; fp8 has none");
  }
  if (integer) {
    int32_t lo[2] = {A->dtype == BP_DTYPE_U8 ? 0 : -128, B->dtype == BP_DTYPE_U8 ? 0 : -128};
    int32_t zp[2] = {a->a_zero_point, a->b_zero_point};
    for (int k = 0; k < 2; k++) {
      if (zp[k] < lo[k] || zp[k] > lo[k] + 255) {
        return bp__infer_fail(x, "attrs.%s_zero_point = %d is outside %s's range", k ? "b" : "a",
                              zp[k], bp_dtype_name(k ? B->dtype : A->dtype));
      }
    }
  }
  int epilogue = bp__in_present(x, 2) || bp__in_present(x, 3) || bp__in_present(x, 4) ||
                 a->activation != BP_ACTIVATION_NONE;
  uint32_t od = a->out_dtype;
  if (od == BP_DTYPE_INVALID) od = integer && !epilogue ? BP_DTYPE_I32 : BP_DTYPE_F32;
  if (od == BP_DTYPE_I32) {
    if (!integer || epilogue) {
      return bp__infer_fail(x, "an i32 output is the exact integer product: integer inputs "
                            "without scales, bias or activation");
    }
  } else if (od != BP_DTYPE_F32 && od != BP_DTYPE_BF16 && od != BP_DTYPE_F16) {
    return bp__infer_fail(x, "attrs.out_dtype %s is not i32, f32, bf16 or f16", bp_dtype_name(od));
  }
  x->compute_dtype = integer ? BP_DTYPE_I32 : BP_DTYPE_F32;
  int64_t sizes[2] = {m, n};
  return bp__infer_set_out(x, 0, od, 2, sizes);
}

bp_status_t bp__infer_weight_only_mm(bp__infer_t* x) {
  const bp_quantize_attrs_t* a = x->attrs;
  const bp_tensor_desc_t *X = &x->in[0], *W = &x->in[1];
  char s0[192], s1[192];
  QUANT_TRY(quant_check_qdtype(x, a->qdtype, 1));
  QUANT_TRY(quant_check_flags(x, a, BP_QUANTIZE_INT8_ACTIVATIONS));
  QUANT_TRY(quant_check_activation(x, a, 1));
  if (a->dtype != BP_DTYPE_INVALID) return bp__infer_fail(x, "attrs.dtype is unused by weight_only_mm; set it to 0");
  if (!(X->dtype == BP_DTYPE_F32 || X->dtype == BP_DTYPE_F16 || X->dtype == BP_DTYPE_BF16)) {
    return bp__infer_fail(x, "input 'self' has dtype %s; f32, f16 or bf16", bp_dtype_name(X->dtype));
  }
  if (X->rank < 1 || W->rank != 2) {
    return bp__infer_fail(x, "input 'self' %s must be [..., k] and 'weight' %s [n, k] (two "
                          "per byte for 4-bit: [n, k / 2])",
                          bp__shape_str(X->rank, X->sizes, s0, sizeof s0),
                          bp__shape_str(W->rank, W->sizes, s1, sizeof s1));
  }
  int64_t logical[2] = {W->sizes[0], W->sizes[1]};
  uint32_t want = quant_is_4bit(a->qdtype) ? BP_DTYPE_U8 : a->qdtype;
  if (quant_is_4bit(a->qdtype)) logical[1] *= 2;
  if (W->dtype != want) {
    return bp__infer_fail(x, "input 'weight' has dtype %s; attrs.qdtype %s is stored as %s",
                          bp_dtype_name(W->dtype), bp_dtype_name(a->qdtype), bp_dtype_name(want));
  }
  int64_t k = X->sizes[X->rank - 1], n = logical[0];
  if (logical[1] != k) {
    return bp__infer_fail(x, "input 'weight' %s holds [%lld, %lld] %s; 'self' %s has k = %lld",
                          bp__shape_str(W->rank, W->sizes, s0, sizeof s0), (long long)n,
                          (long long)logical[1], bp_dtype_name(a->qdtype),
                          bp__shape_str(X->rank, X->sizes, s1, sizeof s1), (long long)k);
  }
  const bp_tensor_desc_t* s = &x->in[2];
  if (!(s->dtype == BP_DTYPE_F32 || s->dtype == BP_DTYPE_F16 || s->dtype == BP_DTYPE_BF16)) {
    return bp__infer_fail(x, "input 'scale' has dtype %s; f32, f16 or bf16", bp_dtype_name(s->dtype));
  }
  if (a->block_size < 0) return bp__infer_fail(x, "attrs.block_size = %lld is negative", (long long)a->block_size);
  int64_t g = a->block_size == 0 ? k : a->block_size;
  int64_t want_s[2] = {n, g == 0 ? 1 : ceil_div(k, g)};
  int ok = bp__shape_equal(s->rank, s->sizes, 2, want_s) ||
           (a->block_size == 0 && s->rank == 1 && s->sizes[0] == n);
  if (!ok) {
    return bp__infer_fail(x, "input 'scale' has shape %s; groups of %lld along k = %lld need %s",
                          bp__shape_str(s->rank, s->sizes, s0, sizeof s0), (long long)g, (long long)k,
                          bp__shape_str(2, want_s, s1, sizeof s1));
  }
  if (bp__in_present(x, 3)) {
    const bp_tensor_desc_t* z = &x->in[3];
    if (z->dtype != s->dtype && z->dtype != BP_DTYPE_I8 && z->dtype != BP_DTYPE_U8) {
      return bp__infer_fail(x, "input 'zero_point' has dtype %s; the scale's (%s), i8 or u8",
                            bp_dtype_name(z->dtype), bp_dtype_name(s->dtype));
    }
    if (!bp__shape_equal(z->rank, z->sizes, s->rank, s->sizes)) {
      return bp__infer_fail(x, "input 'zero_point' has shape %s; expected the scale's %s",
                            bp__shape_str(z->rank, z->sizes, s0, sizeof s0),
                            bp__shape_str(s->rank, s->sizes, s1, sizeof s1));
    }
  }
  QUANT_TRY(mm_check_bias(x, 4, n));
  int64_t sizes[BP_MAX_RANK];
  memcpy(sizes, X->sizes, sizeof(int64_t) * X->rank);
  sizes[X->rank - 1] = n;
  x->compute_dtype = BP_DTYPE_F32;
  return bp__infer_set_out(x, 0, X->dtype, X->rank, sizes);
}
