/* backplane Vulkan plugin: op launches, support answers, fusion caps.
 *
 * Elementwise ops (the UNARY_EW, BINARY_EW, COMPARE and TERNARY_EW families)
 * and the copy-like ops become elementwise programs (vk_ew.c); the other families
 * live in vk_kernels.c. query_support answers from the same tables the
 * launches use, so "supported" holds exactly for what runs.
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "vk_ops_internal.h"

/* Ops by kernel family (ops.def). */
static int is_ew_op(uint32_t op) { return bp_op_is_elementwise(op); }
static int is_copy_op(uint32_t op) {
  uint32_t f = bp_op_family(op);
  return f == BP_OP_FAMILY_COPY || f == BP_OP_FAMILY_SHAPE || f == BP_OP_FAMILY_CREATION;
}
/* Binary ops and comparisons: `self` or `other` may be the attrs' scalar. */
static int takes_scalar_operand(uint32_t op) {
  uint32_t f = bp_op_family(op);
  return f == BP_OP_FAMILY_BINARY_EW || f == BP_OP_FAMILY_COMPARE;
}

/* Ops computed with GLSL float builtins or the double-precision helpers:
 * not available for integer registers. */
static int float_only(uint32_t op) {
  switch (op) {
    case BP_OP_acos: case BP_OP_acosh: case BP_OP_asin: case BP_OP_asinh: case BP_OP_atan:
    case BP_OP_atanh: case BP_OP_cos: case BP_OP_cosh: case BP_OP_erf: case BP_OP_exp:
    case BP_OP_expm1: case BP_OP_log: case BP_OP_log10: case BP_OP_log1p: case BP_OP_log2:
    case BP_OP_reciprocal: case BP_OP_rsqrt: case BP_OP_sigmoid: case BP_OP_sin: case BP_OP_sinh:
    case BP_OP_sqrt: case BP_OP_tan: case BP_OP_tanh: case BP_OP_elu: case BP_OP_gelu:
    case BP_OP_leaky_relu: case BP_OP_silu: case BP_OP_atan2: case BP_OP_hardswish:
    case BP_OP_hardsigmoid: case BP_OP_softplus: case BP_OP_mish: case BP_OP_lerp:
      return 1;
    default:
      return 0;
  }
}
/* f64 registers lack these (the double-precision helpers are not accurate
 * to f64's own tolerance for them). */
static int f32_only(uint32_t op, const void* attrs) {
  switch (op) {
    case BP_OP_sin: case BP_OP_cos: case BP_OP_tan: case BP_OP_asin: case BP_OP_acos:
    case BP_OP_atan: case BP_OP_atan2: case BP_OP_erf: case BP_OP_pow: case BP_OP_log1p:
    case BP_OP_asinh: case BP_OP_atanh: case BP_OP_fmod: case BP_OP_remainder: case BP_OP_softplus:
      return 1;
    case BP_OP_div:
      return attrs && ((const bp_binary_attrs_t*)attrs)->rounding_mode == BP_ROUNDING_FLOOR;
    case BP_OP_gelu:
      return !attrs || ((const bp_gelu_attrs_t*)attrs)->approximate != BP_GELU_TANH;
    default:
      return 0;
  }
}
static int int_only(uint32_t op) {
  return op == BP_OP_bitwise_not || op == BP_OP_bitwise_and || op == BP_OP_bitwise_or ||
         op == BP_OP_bitwise_xor;
}

static int dtype_ok(struct bpp_device_s* d, uint32_t dt) {
  return dt < BP_DTYPE_SLOTS && (d->props.dtype_mask & BP_DTYPE_BIT(dt));
}

/* The compute dtype of an elementwise call (the core sets it; fall back to
 * the first present input, then the output). */
static uint32_t ew_cdt(const bp_op_call_t* call) {
  uint32_t cd = call->compute_dtype;
  if (bp_dtype_is_valid(cd) && cd != BP_DTYPE_C64 && !bp_dtype_is_fp8(cd)) return cd;
  for (uint32_t i = 0; i < call->num_inputs; i++)
    if (call->inputs[i]->dtype != BP_DTYPE_INVALID) return call->inputs[i]->dtype;
  return call->outputs[0]->dtype;
}

static int ew_supported(struct bpp_device_s* d, const bp_op_call_t* call, char* msg, size_t cap) {
  uint32_t op = call->op_id;
  uint32_t cd = ew_cdt(call);
  for (uint32_t k = 0; k < call->num_inputs + call->num_outputs; k++) {
    const bp_tensor_desc_t* t = k < call->num_inputs ? call->inputs[k] : call->outputs[k - call->num_inputs];
    if (t->dtype == BP_DTYPE_INVALID) continue;
    if (!dtype_ok(d, t->dtype)) {
      bp_plugin_format(msg, cap, 0, "%s is not supported on this device", bp_dtype_name(t->dtype));
      return BP_SUPPORT_DTYPE;
    }
  }
  if (!dtype_ok(d, cd)) {
    bp_plugin_format(msg, cap, 0, "compute dtype %s is not supported", bp_dtype_name(cd));
    return BP_SUPPORT_DTYPE;
  }
  int fl = bp_dtype_is_float(cd);
  if (float_only(op) && !fl) {
    bp_plugin_format(msg, cap, 0, "needs a floating compute dtype, got %s", bp_dtype_name(cd));
    return BP_SUPPORT_DTYPE;
  }
  if (int_only(op) && fl) {
    bp_plugin_format(msg, cap, 0, "needs an integer compute dtype, got %s", bp_dtype_name(cd));
    return BP_SUPPORT_DTYPE;
  }
  if (cd == BP_DTYPE_F64 && f32_only(op, call->attrs)) {
    bp_plugin_format(msg, cap, 0, "f64 has no accurate GLSL implementation of this function");
    return BP_SUPPORT_DTYPE;
  }
  if (op == BP_OP_sin || op == BP_OP_cos || op == BP_OP_tan) {
    /* The argument reduction is exact for |x| < 2^32: inputs whose dtype
     * bounds them (f16, integers up to 32 bits) only. */
    for (uint32_t k = 0; k < call->num_inputs; k++) {
      uint32_t dt = call->inputs[k]->dtype;
      if (dt == BP_DTYPE_F32 || dt == BP_DTYPE_BF16 || dt == BP_DTYPE_F64 || dt == BP_DTYPE_I64) {
        bp_plugin_format(msg, cap, 0, "%s inputs may exceed the |x| < 2^32 range of the argument reduction",
                         bp_dtype_name(dt));
        return BP_SUPPORT_DTYPE;
      }
    }
  }
  if (op == BP_OP_addcmul && !fl && call->attrs &&
      ((const bp_binary_attrs_t*)call->attrs)->alpha.kind == BP_SCALAR_FLOAT) {
    bp_plugin_format(msg, cap, 0, "floating value with an integer result");
    return BP_SUPPORT_ATTRIBUTE;
  }
  return 0;
}

/* ---- elementwise op -> program ---------------------------------------- */
static bp_status_t launch_ew_op(bpp_stream_t s, const bp_op_call_t* call) {
  uint32_t op = call->op_id;
  uint32_t cd = ew_cdt(call);
  int fl = bp_dtype_is_float(cd);
  vk_ew_t p;
  vk_ew_init(&p, cd);
  uint8_t r[3] = {0, 0, 0};
  const bp_binary_attrs_t* ba = NULL;
  int binary = takes_scalar_operand(op) || op == BP_OP_addcmul || op == BP_OP_lerp;
  if (binary) ba = call->attrs;
  uint32_t flags = ba ? ba->flags : 0;
  uint32_t nin = call->num_inputs > 3 ? 3 : call->num_inputs;
  for (uint32_t k = 0; k < nin; k++) {
    const bp_tensor_desc_t* t = call->inputs[k];
    int scalar_here = takes_scalar_operand(op) &&
                      ((k == 0 && (flags & BP_BINARY_SELF_IS_SCALAR)) || (k == 1 && (flags & BP_BINARY_OTHER_IS_SCALAR)));
    if (scalar_here) {
      r[k] = vk_ew_load_const(&p, vk_ew_const_scalar(&p, &ba->scalar, 0));
    } else if (t->dtype == BP_DTYPE_INVALID) {
      if (op == BP_OP_clamp_tensor && k > 0) {
        double inf = k == 1 ? -INFINITY : INFINITY;
        int64_t lim = k == 1 ? INT64_MIN : INT64_MAX; /* saturated to the compute dtype below */
        switch (cd) {
          case BP_DTYPE_U8: lim = k == 1 ? 0 : UINT8_MAX; break;
          case BP_DTYPE_BOOL: lim = k == 1 ? 0 : 1; break;
          case BP_DTYPE_I8: lim = k == 1 ? INT8_MIN : INT8_MAX; break;
          case BP_DTYPE_I16: lim = k == 1 ? INT16_MIN : INT16_MAX; break;
          case BP_DTYPE_I32: lim = k == 1 ? INT32_MIN : INT32_MAX; break;
          default: break;
        }
        r[k] = vk_ew_load_const(&p, fl ? vk_ew_const_f(&p, inf) : vk_ew_const_i(&p, lim));
      } else if (op == BP_OP_lerp && k == 2) {
        r[k] = vk_ew_load_const(&p, vk_ew_const_scalar(&p, ba ? &ba->alpha : NULL, 1.0));
      } else {
        return vk_error(BP_INVALID_ARGUMENT, "vulkan: elementwise op %u: input %u is absent", op, k);
      }
    } else {
      r[k] = vk_ew_load_input(&p, vk_ew_input(&p, t));
    }
  }
  uint8_t res;
  switch (op) {
    case BP_OP_clamp: {
      const bp_clamp_attrs_t* a = call->attrs;
      uint8_t lo, hi;
      if (fl) {
        lo = vk_ew_const_scalar(&p, &a->min, -INFINITY);
        hi = vk_ew_const_scalar(&p, &a->max, INFINITY);
      } else {
        lo = a->min.kind == BP_SCALAR_NONE ? vk_ew_const_i(&p, INT64_MIN)
             : vk_ew_const_i(&p, a->min.kind == BP_SCALAR_FLOAT ? (int64_t)a->min.v.f : a->min.v.i);
        hi = a->max.kind == BP_SCALAR_NONE ? vk_ew_const_i(&p, INT64_MAX)
             : vk_ew_const_i(&p, a->max.kind == BP_SCALAR_FLOAT ? (int64_t)a->max.v.f : a->max.v.i);
        /* Bounds outside the compute dtype's range clamp to its limits. */
        if (cd != BP_DTYPE_I64) {
          int64_t mn = cd == BP_DTYPE_U8 || cd == BP_DTYPE_BOOL ? 0 : cd == BP_DTYPE_I8 ? INT8_MIN : cd == BP_DTYPE_I16 ? INT16_MIN : INT32_MIN;
          int64_t mx = cd == BP_DTYPE_U8 ? UINT8_MAX : cd == BP_DTYPE_BOOL ? 1 : cd == BP_DTYPE_I8 ? INT8_MAX : cd == BP_DTYPE_I16 ? INT16_MAX : INT32_MAX;
          int64_t l = a->min.kind == BP_SCALAR_NONE ? INT64_MIN : a->min.kind == BP_SCALAR_FLOAT ? (int64_t)a->min.v.f : a->min.v.i;
          int64_t h = a->max.kind == BP_SCALAR_NONE ? INT64_MAX : a->max.kind == BP_SCALAR_FLOAT ? (int64_t)a->max.v.f : a->max.v.i;
          p.consts[lo].i = l < mn ? mn : l > mx ? mx : l;
          p.consts[hi].i = h < mn ? mn : h > mx ? mx : h;
        }
      }
      res = vk_ew_op(&p, BP_OP_clamp, r[0], vk_ew_load_const(&p, lo), vk_ew_load_const(&p, hi), 0);
      break;
    }
    case BP_OP_hardtanh: {
      const bp_hardtanh_attrs_t* a = call->attrs;
      uint8_t lo = fl ? vk_ew_const_f(&p, a->min_val) : vk_ew_const_i(&p, (int64_t)a->min_val);
      uint8_t hi = fl ? vk_ew_const_f(&p, a->max_val) : vk_ew_const_i(&p, (int64_t)a->max_val);
      res = vk_ew_op(&p, BP_OP_clamp, r[0], vk_ew_load_const(&p, lo), vk_ew_load_const(&p, hi), 0);
      break;
    }
    case BP_OP_elu: {
      const bp_elu_attrs_t* a = call->attrs;
      uint8_t ks = vk_ew_load_const(&p, vk_ew_const_f(&p, a->scale));
      uint8_t ki = vk_ew_load_const(&p, vk_ew_const_f(&p, a->input_scale));
      uint8_t ka = vk_ew_const_f(&p, a->alpha);
      res = vk_ew_op(&p, VK_EW_ELU, r[0], ks, ki, ka);
      break;
    }
    case BP_OP_leaky_relu:
      res = vk_ew_op(&p, VK_EW_LEAKY, r[0],
                     vk_ew_load_const(&p, vk_ew_const_f(&p, ((const bp_leaky_relu_attrs_t*)call->attrs)->negative_slope)), 0, 0);
      break;
    case BP_OP_softplus: {
      const bp_softplus_attrs_t* a = call->attrs;
      res = vk_ew_op(&p, VK_EW_SOFTPLUS, r[0], vk_ew_load_const(&p, vk_ew_const_f(&p, a->beta)),
                     vk_ew_load_const(&p, vk_ew_const_f(&p, a->threshold)), 0);
      break;
    }
    case BP_OP_gelu:
      res = vk_ew_op(&p, BP_OP_gelu, r[0], 0, 0, call->attrs ? ((const bp_gelu_attrs_t*)call->attrs)->approximate : 0);
      break;
    case BP_OP_bitwise_not:
      res = vk_ew_op(&p, cd == BP_DTYPE_BOOL ? VK_EW_BNOT : BP_OP_bitwise_not, r[0], 0, 0, 0);
      break;
    case BP_OP_add:
    case BP_OP_sub: {
      uint8_t y = r[1];
      if (ba && ba->alpha.kind != BP_SCALAR_NONE &&
          !((ba->alpha.kind == BP_SCALAR_INT && ba->alpha.v.i == 1) ||
            (ba->alpha.kind == BP_SCALAR_FLOAT && ba->alpha.v.f == 1.0) ||
            (ba->alpha.kind == BP_SCALAR_BOOL && ba->alpha.v.b == 1)))
        y = vk_ew_op(&p, BP_OP_mul, vk_ew_load_const(&p, vk_ew_const_scalar(&p, &ba->alpha, 1.0)), r[1], 0, 0);
      res = vk_ew_op(&p, op, r[0], y, 0, 0);
      break;
    }
    case BP_OP_div:
      res = vk_ew_op(&p, BP_OP_div, r[0], r[1], 0, ba ? ba->rounding_mode : 0);
      break;
    case BP_OP_addcmul: {
      uint8_t v = vk_ew_load_const(&p, vk_ew_const_scalar(&p, ba ? &ba->alpha : NULL, 1.0));
      uint8_t t = vk_ew_op(&p, BP_OP_mul, v, r[1], 0, 0);
      t = vk_ew_op(&p, BP_OP_mul, t, r[2], 0, 0);
      res = vk_ew_op(&p, BP_OP_add, r[0], t, 0, 0);
      break;
    }
    case BP_OP_lerp:
      res = vk_ew_op(&p, VK_EW_LERP, r[0], r[1], r[2], 0);
      break;
    case BP_OP_pow: { /* PyTorch's product forms of exponents -2 and 3 */
      int pf = bp_pow_product_form(call);
      uint8_t sq = pf ? vk_ew_op(&p, BP_OP_mul, r[0], r[0], 0, 0) : 0;
      res = pf == 3    ? vk_ew_op(&p, BP_OP_mul, sq, r[0], 0, 0)
            : pf == -2 ? vk_ew_op(&p, BP_OP_reciprocal, sq, 0, 0, 0)
                       : vk_ew_op(&p, op, r[0], r[1], 0, 0);
      break;
    }
    default:
      res = vk_ew_op(&p, op, r[0], r[1], r[2], 0);
      break;
  }
  vk_ew_store(&p, vk_ew_output(&p, call->outputs[0]), res);
  return vk_ew_launch(s, &p);
}

/* ---- copy-like ops ----------------------------------------------------- */
/* repeat: dst = the output split into (repeat, size) dim pairs (pairs with a
 * repeat of 1 stay one dim), src = the input with stride 0 on the repeat
 * dims. Nonzero when that needs more than BP_MAX_RANK dims. */
static int repeat_views(const bp_op_call_t* call, bp_tensor_desc_t* dst, bp_tensor_desc_t* src) {
  const bp_dims_attrs_t* a = call->attrs;
  const bp_tensor_desc_t* in = call->inputs[0];
  const bp_tensor_desc_t* out = call->outputs[0];
  *dst = *out;
  *src = *in;
  uint32_t r = a->num_dims, lead = r > in->rank ? r - in->rank : 0, n = 0;
  for (uint32_t k = 0; k < r && k < BP_MAX_RANK; k++) {
    int64_t s_in = k < lead ? 1 : in->sizes[k - lead];
    int64_t st_in = k < lead ? 0 : in->strides[k - lead];
    int64_t rep = a->dims[k];
    if (rep != 1 && s_in != 1) {
      if (n + 2 > BP_MAX_RANK) return 1;
      dst->sizes[n] = rep;
      dst->strides[n] = s_in * out->strides[k];
      src->sizes[n] = 1;
      src->strides[n] = 0;
      n++;
    } else if (n + 1 > BP_MAX_RANK) {
      return 1;
    }
    dst->sizes[n] = rep != 1 && s_in != 1 ? s_in : out->sizes[k];
    dst->strides[n] = out->strides[k];
    src->sizes[n] = rep != 1 && s_in == 1 ? 1 : s_in;
    src->strides[n] = st_in;
    n++;
  }
  dst->rank = src->rank = n;
  return 0;
}

static bp_status_t launch_copy_op(bpp_stream_t s, const bp_op_call_t* call) {
  const bp_tensor_desc_t* out = call->outputs[0];
  switch (call->op_id) {
    case BP_OP_to_copy:
    case BP_OP_clone:
      return vk_ew_copy(s, out, call->inputs[0]);
    case BP_OP_copy:
      return vk_ew_copy(s, out, call->inputs[1]);
    case BP_OP_fill: {
      const bp_fill_attrs_t* a = call->attrs;
      uint32_t cd = a->value.kind == BP_SCALAR_FLOAT ? BP_DTYPE_F64 : BP_DTYPE_I64;
      vk_ew_t p;
      vk_ew_init(&p, cd);
      uint8_t k = vk_ew_const_scalar(&p, &a->value, 0);
      vk_ew_store(&p, vk_ew_output(&p, out), vk_ew_load_const(&p, k));
      return vk_ew_launch(s, &p);
    }
    case BP_OP_arange: {
      const bp_arange_attrs_t* a = call->attrs;
      int exact_int = !bp_dtype_is_float(out->dtype) && a->start.kind != BP_SCALAR_FLOAT &&
                      a->step.kind != BP_SCALAR_FLOAT;
      vk_ew_t p;
      vk_ew_init(&p, exact_int ? BP_DTYPE_I64 : BP_DTYPE_F64);
      uint8_t idx = vk_ew_op(&p, VK_EW_INDEX, 0, 0, 0, 0);
      uint8_t step = vk_ew_load_const(&p, vk_ew_const_scalar(&p, &a->step, 1));
      uint8_t start = vk_ew_load_const(&p, vk_ew_const_scalar(&p, &a->start, 0));
      uint8_t v = vk_ew_op(&p, BP_OP_mul, idx, step, 0, 0);
      v = vk_ew_op(&p, BP_OP_add, start, v, 0, 0);
      vk_ew_store(&p, vk_ew_output(&p, out), v);
      return vk_ew_launch(s, &p);
    }
    case BP_OP_cat: {
      const bp_dim_attrs_t* a = call->attrs;
      int64_t dim = a->dim < 0 ? a->dim + (int64_t)out->rank : a->dim;
      if (out->rank == 0 || dim < 0 || dim >= (int64_t)out->rank)
        return vk_error(BP_INVALID_ARGUMENT, "vulkan: cat: dim %d out of range for rank %u", a->dim, out->rank);
      int64_t at = 0;
      for (uint32_t i = call->list_begin; i < call->list_begin + call->list_count; i++) {
        const bp_tensor_desc_t* in = call->inputs[i];
        if (in->rank == 1 && in->sizes[0] == 0 && out->rank != 1) continue;
        if (in->rank != out->rank)
          return vk_error(BP_INVALID_ARGUMENT, "vulkan: cat: input %u has rank %u, output %u", i, in->rank, out->rank);
        if (at + in->sizes[dim] > out->sizes[dim])
          return vk_error(BP_INVALID_ARGUMENT, "vulkan: cat: inputs exceed the output's size in dim %lld", (long long)dim);
        bp_tensor_desc_t piece = *out;
        piece.sizes[dim] = in->sizes[dim];
        piece.byte_offset = out->byte_offset + (uint64_t)(at * out->strides[dim] * (int64_t)bp_dtype_size(out->dtype));
        at += in->sizes[dim];
        if (in->sizes[dim] == 0) continue;
        bp_status_t st = vk_ew_copy(s, &piece, in);
        if (st) return st;
      }
      return BP_OK;
    }
    case BP_OP_flip: {
      /* A view with the flipped dims' strides negated, copied densely. */
      const bp_dims_attrs_t* a = call->attrs;
      bp_tensor_desc_t v = *call->inputs[0];
      uint32_t flipped = 0;
      /* A 0-d tensor takes dims 0 and -1, as one of one element (a copy). */
      int64_t wrap = v.rank ? (int64_t)v.rank : 1;
      for (uint32_t i = 0; i < a->num_dims && i < BP_MAX_RANK; i++) {
        int64_t d = a->dims[i] < 0 ? a->dims[i] + wrap : a->dims[i];
        if (d < 0 || d >= wrap) return vk_error(BP_INVALID_ARGUMENT, "vulkan: flip: dim %lld out of range", (long long)a->dims[i]);
        flipped |= 1u << d;
      }
      for (uint32_t d = 0; d < v.rank; d++)
        if ((flipped & (1u << d)) && v.sizes[d] > 1) {
          v.byte_offset += (uint64_t)((v.sizes[d] - 1) * v.strides[d] * (int64_t)bp_dtype_size(v.dtype));
          v.strides[d] = -v.strides[d];
        }
      return vk_ew_copy(s, out, &v);
    }
    case BP_OP_repeat: {
      /* out viewed as (repeat, size) pairs; the input broadcasts over the
       * repeat dims. */
      bp_tensor_desc_t dst, src;
      int reason = repeat_views(call, &dst, &src);
      if (reason) return vk_error(BP_UNIMPLEMENTED, "vulkan: repeat: more than %d dims after splitting", BP_MAX_RANK);
      return vk_ew_copy(s, &dst, &src);
    }
    case BP_OP_pad: {
      const bp_pad_attrs_t* a = call->attrs;
      const bp_tensor_desc_t* in = call->inputs[0];
      vk_ew_t p;
      vk_ew_init(&p, a->value.kind == BP_SCALAR_FLOAT ? BP_DTYPE_F64 : BP_DTYPE_I64);
      vk_ew_store(&p, vk_ew_output(&p, out), vk_ew_load_const(&p, vk_ew_const_scalar(&p, &a->value, 0)));
      bp_status_t st = vk_ew_launch(s, &p);
      if (st) return st;
      bp_tensor_desc_t dv = *out, sv = *in;
      uint32_t es = bp_dtype_size(out->dtype);
      for (uint32_t k = 0; k < a->num_pads / 2 && k < in->rank; k++) {
        uint32_t d = in->rank - 1 - k;
        int64_t before = a->pads[2 * k], after = a->pads[2 * k + 1];
        int64_t n = in->sizes[d] - (before < 0 ? -before : 0) - (after < 0 ? -after : 0);
        if (n <= 0) return BP_OK; /* everything cropped: only the fill */
        if (before >= 0) dv.byte_offset += (uint64_t)(before * out->strides[d] * (int64_t)es);
        else sv.byte_offset += (uint64_t)(-before * in->strides[d] * (int64_t)es);
        dv.sizes[d] = sv.sizes[d] = n;
      }
      return vk_ew_copy(s, &dv, &sv);
    }
    default:
      return vk_error(BP_UNIMPLEMENTED, "vulkan: op %u is not a copy", call->op_id);
  }
}

static int copy_supported(struct bpp_device_s* d, const bp_op_call_t* call, char* msg, size_t cap) {
  for (uint32_t k = 0; k < call->num_inputs + call->num_outputs; k++) {
    const bp_tensor_desc_t* t = k < call->num_inputs ? call->inputs[k] : call->outputs[k - call->num_inputs];
    if (t->dtype == BP_DTYPE_INVALID) continue;
    if (!dtype_ok(d, t->dtype)) {
      bp_plugin_format(msg, cap, 0, "%s is not supported on this device", bp_dtype_name(t->dtype));
      return BP_SUPPORT_DTYPE;
    }
  }
  if (call->op_id == BP_OP_pad && call->attrs && ((const bp_pad_attrs_t*)call->attrs)->mode != BP_PAD_CONSTANT) {
    bp_plugin_format(msg, cap, 0, "only constant padding (reflect, replicate, circular are not implemented)");
    return BP_SUPPORT_ATTRIBUTE;
  }
  if (call->op_id == BP_OP_pad && call->attrs && ((const bp_pad_attrs_t*)call->attrs)->num_pads / 2 > call->inputs[0]->rank) {
    bp_plugin_format(msg, cap, 0, "more pad pairs than dims");
    return BP_SUPPORT_ATTRIBUTE;
  }
  if (call->op_id == BP_OP_repeat && call->attrs) {
    bp_tensor_desc_t dv, sv;
    if (call->inputs[0]->rank > BP_MAX_RANK || repeat_views(call, &dv, &sv)) {
      bp_plugin_format(msg, cap, 0, "needs more than %d dims once split into (repeat, size) pairs", BP_MAX_RANK);
      return BP_SUPPORT_RANK;
    }
  }
  if (call->op_id == BP_OP_arange && call->outputs[0]->dtype == BP_DTYPE_BOOL) {
    bp_plugin_format(msg, cap, 0, "bool output");
    return BP_SUPPORT_DTYPE;
  }
  return 0;
}

/* ---- dispatch ------------------------------------------------------------ */
int vk_op_implemented(uint32_t op) {
  return op > 0 && op < BP_OP_COUNT && (is_ew_op(op) || is_copy_op(op) || vk_kernels_implemented(op));
}

bp_status_t vk_launch_op(bpp_stream_t s, const bp_op_call_t* call) {
  if (!s || !call) return vk_error(BP_INVALID_ARGUMENT, "vulkan: launch: NULL argument");
  if (call->struct_size < BP_OP_CALL_V1_SIZE || !call->outputs || call->num_outputs < 1 ||
      (call->num_inputs && !call->inputs) || call->list_begin > call->num_inputs ||
      call->list_count > call->num_inputs - call->list_begin)
    return vk_error(BP_INVALID_ARGUMENT, "vulkan: launch: malformed op call");
  uint32_t op = call->op_id;
  char msg[200];
  msg[0] = 0;
  int reason;
  if (is_ew_op(op)) reason = ew_supported(s->dev, call, msg, sizeof msg);
  else if (is_copy_op(op)) reason = copy_supported(s->dev, call, msg, sizeof msg);
  else if (vk_kernels_implemented(op)) reason = vk_kernels_supported(s->dev, call, msg, sizeof msg);
  else return vk_error(BP_UNIMPLEMENTED, "vulkan: op %u has no Vulkan kernel", op);
  if (reason) return vk_error(BP_UNIMPLEMENTED, "vulkan: op %u: %s", op, msg);
  for (uint32_t k = 0; k < call->num_inputs + call->num_outputs; k++) {
    const bp_tensor_desc_t* t = k < call->num_inputs ? call->inputs[k] : call->outputs[k - call->num_inputs];
    if (t->dtype == BP_DTYPE_INVALID) continue;
    bp_status_t st = vk_check_desc(t, k < call->num_inputs ? "input" : "output");
    if (st) return st;
    BP_PLUGIN_DEBUG_CHECK(((struct bpp_buffer_s*)t->buffer)->dev == s->dev
                              ? BP_OK
                              : vk_error(BP_INVALID_ARGUMENT, "vulkan: op %u: an operand lives on another device", op));
  }
  if (is_ew_op(op)) return launch_ew_op(s, call);
  if (is_copy_op(op)) return launch_copy_op(s, call);
  switch (op) {
    case BP_OP_sum: case BP_OP_mean: case BP_OP_prod: case BP_OP_amax: case BP_OP_amin:
    case BP_OP_any: case BP_OP_argmax: case BP_OP_argmin:
    case BP_OP_logsumexp: case BP_OP_max_dim: case BP_OP_min_dim:
      return vk_launch_reduce(s, call);
    case BP_OP_softmax: case BP_OP_log_softmax: case BP_OP_layer_norm: case BP_OP_rms_norm:
    case BP_OP_add_layer_norm: case BP_OP_add_rms_norm:
      return vk_launch_norm(s, call);
    case BP_OP_swiglu: case BP_OP_geglu:
      return vk_launch_glu(s, call);
    case BP_OP_mm: case BP_OP_bmm: case BP_OP_addmm:
      return vk_launch_matmul(s, call);
    case BP_OP_gather: case BP_OP_index_select: case BP_OP_embedding:
      return vk_launch_index(s, call);
    case BP_OP_quantize: case BP_OP_dequantize:
      return vk_launch_quant(s, call);
    case BP_OP_sample:
      return vk_launch_sample(s, call);
    default:
      return vk_launch_conv_pool(s, call);
  }
}

/* ---- capabilities ---------------------------------------------------------- */
#define answer bp_kit_support_answer

bp_status_t vk_query_support(bpp_device_t d, const bp_op_call_t* call, bp_support_t* out) {
  if (!d || !call || !out) return vk_error(BP_INVALID_ARGUMENT, "vulkan: query_support: NULL argument");
  if (call->struct_size < BP_OP_CALL_V1_SIZE)
    return vk_error(BP_INVALID_ARGUMENT, "vulkan: query_support: op call struct_size %u < %u", call->struct_size,
                    BP_OP_CALL_V1_SIZE);
  uint32_t op = call->op_id;
  if (bp_op_family(op) == BP_OP_FAMILY_INVALID) return answer(out, BP_SUPPORT_OP, "op id %u is unknown", op);
  if (!vk_op_implemented(op)) return answer(out, BP_SUPPORT_OP, "op %u has no Vulkan kernel", op);
  if (call->num_outputs < 1 || !call->outputs || (call->num_inputs && !call->inputs))
    return vk_error(BP_INVALID_ARGUMENT, "vulkan: query_support: op %u: missing operands", op);
  for (uint32_t k = 0; k < call->num_inputs + call->num_outputs; k++) {
    const bp_tensor_desc_t* t = k < call->num_inputs ? call->inputs[k] : call->outputs[k - call->num_inputs];
    if (t->dtype == BP_DTYPE_INVALID) continue;
    if (!bp_dtype_is_valid(t->dtype))
      return vk_error(BP_INVALID_ARGUMENT, "vulkan: query_support: op %u: unknown dtype %u", op, t->dtype);
    if (t->rank > BP_MAX_RANK) return answer(out, BP_SUPPORT_RANK, "rank %u > %d", t->rank, BP_MAX_RANK);
  }
  char msg[200];
  msg[0] = 0;
  int reason;
  if (is_ew_op(op)) reason = ew_supported(d, call, msg, sizeof msg);
  else if (is_copy_op(op)) reason = copy_supported(d, call, msg, sizeof msg);
  else reason = vk_kernels_supported(d, call, msg, sizeof msg);
  if (reason) return answer(out, (uint32_t)reason, "vulkan: op %u: %s", op, msg);
  bp_status_t st = answer(out, BP_SUPPORT_OK, "%s", "");
  if (bp_op_family(op) == BP_OP_FAMILY_QUANT) out->requires_contiguous = 1; /* dense kernels */
  return st;
}

/* Opcodes usable in fused programs: ops whose parameters travel in
 * registers or aux (clamp bounds in b, c; gelu's approximation and div's
 * rounding mode in aux). */
static int fusable(uint32_t op) {
  switch (op) {
    case BP_OP_elu: case BP_OP_hardtanh: case BP_OP_leaky_relu: /* parameters in attrs */
    case BP_OP_softplus: case BP_OP_addcmul: case BP_OP_lerp:
      return 0;
    default:
      return bp_op_is_elementwise(op);
  }
}

/* Op ids usable in elementwise programs, bit per id; filled once. */
#define VK_EW_OPCODE_WORDS ((BP_OP_COUNT + 63u) / 64u)
static uint64_t k_ew_opcode_mask[VK_EW_OPCODE_WORDS];
static pthread_once_t k_ew_opcode_once = PTHREAD_ONCE_INIT;
static void ew_opcode_mask_init(void) {
  for (uint32_t op = 1; op < BP_OP_COUNT; op++)
    if (fusable(op)) k_ew_opcode_mask[op / 64] |= 1ull << (op % 64);
}

bp_status_t vk_query_fusion(bpp_device_t d, bp_fusion_caps_t* out) {
  if (!d || !out) return vk_error(BP_INVALID_ARGUMENT, "vulkan: query_fusion: NULL argument");
  pthread_once(&k_ew_opcode_once, ew_opcode_mask_init);
  bp_fusion_caps_t c;
  memset(&c, 0, sizeof c);
  c.struct_size = sizeof c;
  c.ew_max_inputs = VK_EW_MAX_INPUTS;
  c.ew_max_outputs = VK_EW_MAX_OPERANDS - VK_EW_MAX_INPUTS;
  c.ew_max_instrs = VK_EW_MAX_INSTR;
  c.ew_max_registers = VK_EW_MAX_REGS;
  c.ew_dtype_mask = d->props.dtype_mask;
  c.ew_opcode_words = VK_EW_OPCODE_WORDS;
  c.ew_opcode_mask = k_ew_opcode_mask;
  c.pattern_stride = sizeof(bp_fused_pattern_t);
  bp_kit_copy_out(out, &c, sizeof c);
  return BP_OK;
}

bp_status_t vk_launch_ew_program(bpp_stream_t s, const bp_ew_program_t* prog, uint32_t num_inputs,
                                 const bp_tensor_desc_t* const* inputs, uint32_t num_outputs,
                                 const bp_tensor_desc_t* const* outputs) {
  if (!s || !prog || (num_inputs && !inputs) || !outputs || num_outputs == 0)
    return vk_error(BP_INVALID_ARGUMENT, "vulkan: launch_ew_program: NULL argument");
  if (prog->struct_size < BP_EW_PROGRAM_V1_SIZE)
    return vk_error(BP_INVALID_ARGUMENT, "vulkan: launch_ew_program: struct_size %u too small", prog->struct_size);
  if (prog->num_instrs && prog->instr_stride < BP_EW_INSTR_V1_SIZE)
    return vk_error(BP_INVALID_ARGUMENT, "vulkan: launch_ew_program: instr_stride %u < %u", prog->instr_stride,
                    BP_EW_INSTR_V1_SIZE);
  for (uint32_t k = 0; k < num_inputs; k++)
    if (!inputs[k]) return vk_error(BP_INVALID_ARGUMENT, "vulkan: launch_ew_program: input %u is NULL", k);
  for (uint32_t k = 0; k < num_outputs; k++)
    if (!outputs[k]) return vk_error(BP_INVALID_ARGUMENT, "vulkan: launch_ew_program: output %u is NULL", k);
  if (num_inputs != prog->num_inputs || num_outputs != prog->num_outputs || num_inputs > VK_EW_MAX_INPUTS ||
      num_outputs > VK_EW_MAX_OPERANDS - VK_EW_MAX_INPUTS || prog->num_instrs > VK_EW_MAX_INSTR ||
      prog->num_registers > VK_EW_MAX_REGS || prog->num_constants > VK_EW_MAX_CONST ||
      (prog->num_instrs && !prog->instrs) || (prog->num_constants && !prog->constants))
    return vk_error(BP_INVALID_ARGUMENT,
                    "vulkan: launch_ew_program: %u inputs, %u outputs, %u instructions, %u registers, %u constants "
                    "exceed the limits (%d, %d, %d, %d, %d) or disagree with the operands",
                    prog->num_inputs, prog->num_outputs, prog->num_instrs, prog->num_registers, prog->num_constants,
                    VK_EW_MAX_INPUTS, VK_EW_MAX_OPERANDS - VK_EW_MAX_INPUTS, VK_EW_MAX_INSTR, VK_EW_MAX_REGS,
                    VK_EW_MAX_CONST);
  if (!dtype_ok(s->dev, prog->compute_dtype))
    return vk_error(BP_UNIMPLEMENTED, "vulkan: launch_ew_program: compute dtype %s", bp_dtype_name(prog->compute_dtype));
  vk_ew_t p;
  vk_ew_init(&p, prog->compute_dtype);
  for (uint32_t k = 0; k < num_inputs; k++) vk_ew_input(&p, inputs[k]);
  for (uint32_t k = 0; k < num_outputs; k++) vk_ew_output(&p, outputs[k]);
  int fl = bp_dtype_is_float(prog->compute_dtype);
  for (uint32_t j = 0; j < prog->num_constants; j++) {
    const bp_scalar_t* c = &prog->constants[j];
    if (fl) vk_ew_const_f(&p, c->kind == BP_SCALAR_FLOAT ? c->v.f : c->kind == BP_SCALAR_BOOL ? (double)c->v.b : (double)c->v.i);
    else vk_ew_const_i(&p, c->kind == BP_SCALAR_FLOAT ? (int64_t)c->v.f : c->kind == BP_SCALAR_BOOL ? (int64_t)c->v.b : c->v.i);
  }
  for (uint32_t i = 0; i < prog->num_instrs; i++) {
    const bp_ew_instr_t* in = BP_EW_INSTR_AT(prog, i);
    uint32_t o = in->opcode;
    int bad = in->dst >= prog->num_registers;
    switch (o) {
      case BP_EW_LOAD_INPUT: bad |= in->a >= num_inputs; break;
      case BP_EW_LOAD_CONST: bad |= in->a >= prog->num_constants; break;
      case BP_EW_STORE: bad = in->a >= num_outputs || in->b >= prog->num_registers; break;
      case BP_EW_CAST: bad |= in->a >= prog->num_registers || !dtype_ok(s->dev, in->aux); break;
      default:
        if (o >= BP_OP_COUNT || !fusable(o))
          return vk_error(BP_UNIMPLEMENTED, "vulkan: launch_ew_program: instruction %u: opcode 0x%x is not fusable here", i, o);
        if ((float_only(o) && !fl) || (int_only(o) && fl) ||
            (prog->compute_dtype == BP_DTYPE_F64 && (f32_only(o, NULL) || (o == BP_OP_div && in->aux == BP_ROUNDING_FLOOR))))
          return vk_error(BP_UNIMPLEMENTED, "vulkan: launch_ew_program: instruction %u: op %u in %s", i, o,
                          bp_dtype_name(prog->compute_dtype));
        bad |= in->a >= prog->num_registers || in->b >= prog->num_registers || in->c >= prog->num_registers;
        if (o == BP_OP_bitwise_not && prog->compute_dtype == BP_DTYPE_BOOL) o = VK_EW_BNOT;
        break;
    }
    if (bad) return vk_error(BP_INVALID_ARGUMENT, "vulkan: launch_ew_program: instruction %u has an operand out of range", i);
    vk_ew_emit(&p, o, in->dst, in->a, in->b, in->c, in->aux);
  }
  p.nregs = prog->num_registers;
  return vk_ew_launch(s, &p);
}
