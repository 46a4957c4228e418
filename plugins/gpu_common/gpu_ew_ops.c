/* backplane gpu_common: elementwise and copy-like ops as programs.
 *
 * Every op of the UNARY_EW, BINARY_EW, COMPARE and TERNARY_EW families,
 * and the COPY, SHAPE and CREATION ops, becomes a short elementwise
 * program (gpu_ew.c) run by the interpreter kernel; so do the graph
 * compiler's fused programs (bp_gpu_ew_program_run). Support answers use
 * the same rules as the lowering.
 */
#include <math.h>
#include <pthread.h>
#include <string.h>

#include "bp_gpu_ops.h"
#include "bp_kit.h"

/* Binary ops and comparisons: `self` or `other` may be the attrs' scalar. */
static int takes_scalar_operand(uint32_t op) {
  uint32_t f = bp_op_family(op);
  return f == BP_OP_FAMILY_BINARY_EW || f == BP_OP_FAMILY_COMPARE;
}

/* Ops computed with floating builtins: no integer registers. */
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
static int int_only(uint32_t op) {
  return op == BP_OP_bitwise_not || op == BP_OP_bitwise_and || op == BP_OP_bitwise_or ||
         op == BP_OP_bitwise_xor;
}

static int dtype_ok(const bp_gpu_device_caps_t* c, uint32_t dt) {
  return dt < 64 && (c->dtype_mask & BP_DTYPE_BIT(dt));
}

int bp__gpu_dtypes_ok(const bp_gpu_device_caps_t* caps, const bp_op_call_t* call, char* msg, size_t cap) {
  for (uint32_t k = 0; k < call->num_inputs + call->num_outputs; k++) {
    const bp_tensor_desc_t* t = k < call->num_inputs ? call->inputs[k] : call->outputs[k - call->num_inputs];
    if (!t || t->dtype == BP_DTYPE_INVALID) continue;
    if (!dtype_ok(caps, t->dtype)) {
      bp_plugin_format(msg, cap, 0, "%s is not supported on this device", bp_dtype_name(t->dtype));
      return 0;
    }
  }
  return 1;
}

/* The compute dtype of an elementwise call (the core sets it; else the
 * first present input, then the output). */
static uint32_t ew_cdt(const bp_op_call_t* call) {
  uint32_t cd = call->compute_dtype;
  if (bp_dtype_is_valid(cd) && cd != BP_DTYPE_C64 && !bp_dtype_is_fp8(cd)) return cd;
  for (uint32_t i = 0; i < call->num_inputs; i++)
    if (call->inputs[i]->dtype != BP_DTYPE_INVALID) return call->inputs[i]->dtype;
  return call->outputs[0]->dtype;
}

int bp__gpu_ew_supported(const bp_gpu_device_caps_t* caps, const bp_op_call_t* call, char* msg, size_t cap) {
  uint32_t op = call->op_id;
  uint32_t cd = ew_cdt(call);
  if (!bp__gpu_dtypes_ok(caps, call, msg, cap)) return BP_SUPPORT_DTYPE;
  if (!dtype_ok(caps, cd)) {
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
  if (op == BP_OP_addcmul && !fl && call->attrs &&
      ((const bp_binary_attrs_t*)call->attrs)->alpha.kind == BP_SCALAR_FLOAT) {
    bp_plugin_format(msg, cap, 0, "floating value with an integer result");
    return BP_SUPPORT_ATTRIBUTE;
  }
  if (call->num_inputs > 3) {
    bp_plugin_format(msg, cap, 0, "%u inputs", call->num_inputs);
    return BP_SUPPORT_ATTRIBUTE;
  }
  return 0;
}

/* Integer limits of a compute dtype (clamp bounds saturate to them). */
static void int_limits(uint32_t cd, int64_t* mn, int64_t* mx) {
  switch (cd) {
    case BP_DTYPE_U8: *mn = 0; *mx = UINT8_MAX; return;
    case BP_DTYPE_BOOL: *mn = 0; *mx = 1; return;
    case BP_DTYPE_I8: *mn = INT8_MIN; *mx = INT8_MAX; return;
    case BP_DTYPE_I16: *mn = INT16_MIN; *mx = INT16_MAX; return;
    case BP_DTYPE_I32: *mn = INT32_MIN; *mx = INT32_MAX; return;
    default: *mn = INT64_MIN; *mx = INT64_MAX; return;
  }
}
static int64_t scalar_int(const bp_scalar_t* s, int64_t dflt) {
  if (s->kind == BP_SCALAR_NONE) return dflt;
  if (s->kind == BP_SCALAR_FLOAT) return (int64_t)s->v.f;
  if (s->kind == BP_SCALAR_BOOL) return s->v.b != 0;
  return s->v.i;
}
static int64_t sat(int64_t v, int64_t mn, int64_t mx) { return v < mn ? mn : v > mx ? mx : v; }

static int alpha_is_one(const bp_scalar_t* s) {
  return s->kind == BP_SCALAR_NONE || (s->kind == BP_SCALAR_INT && s->v.i == 1) ||
         (s->kind == BP_SCALAR_FLOAT && s->v.f == 1.0) || (s->kind == BP_SCALAR_BOOL && s->v.b == 1);
}

bp_status_t bp__gpu_ew_run(const bp_gpu_device_caps_t* caps, const bp_op_call_t* call,
                           bp_gpu_launch_fn launch, void* ctx) {
  uint32_t op = call->op_id;
  uint32_t cd = ew_cdt(call);
  int fl = bp_dtype_is_float(cd);
  bp_gpu_ew_t p;
  bp_gpu_ew_init(&p, cd);
  uint8_t r[3] = {0, 0, 0};
  const bp_binary_attrs_t* ba = NULL;
  if (takes_scalar_operand(op) || op == BP_OP_addcmul || op == BP_OP_lerp) ba = call->attrs;
  uint32_t flags = ba ? ba->flags : 0;
  uint32_t nin = call->num_inputs > 3 ? 3 : call->num_inputs;
  for (uint32_t k = 0; k < nin; k++) {
    const bp_tensor_desc_t* t = call->inputs[k];
    int scalar_here = takes_scalar_operand(op) && ((k == 0 && (flags & BP_BINARY_SELF_IS_SCALAR)) ||
                                                   (k == 1 && (flags & BP_BINARY_OTHER_IS_SCALAR)));
    if (scalar_here) {
      r[k] = bp_gpu_ew_load_const(&p, bp_gpu_ew_const_scalar(&p, &ba->scalar, 0));
    } else if (t->dtype == BP_DTYPE_INVALID) {
      if (op == BP_OP_clamp_tensor && k > 0) {
        int64_t mn, mx;
        int_limits(cd, &mn, &mx);
        r[k] = bp_gpu_ew_load_const(&p, fl ? bp_gpu_ew_const_f(&p, k == 1 ? -INFINITY : INFINITY)
                                           : bp_gpu_ew_const_i(&p, k == 1 ? mn : mx));
      } else if (op == BP_OP_lerp && k == 2) {
        r[k] = bp_gpu_ew_load_const(&p, bp_gpu_ew_const_scalar(&p, ba ? &ba->alpha : NULL, 1.0));
      } else {
        return BP_KIT_ERROR(BP_INVALID_ARGUMENT, "elementwise op %s: input %u is absent", bp_kit_op_name(op), k);
      }
    } else {
      r[k] = bp_gpu_ew_load_input(&p, bp_gpu_ew_input(&p, t));
    }
  }
  uint8_t res;
  switch (op) {
    case BP_OP_clamp: {
      const bp_clamp_attrs_t* a = call->attrs;
      uint8_t lo, hi;
      if (fl) {
        lo = bp_gpu_ew_const_scalar(&p, &a->min, -INFINITY);
        hi = bp_gpu_ew_const_scalar(&p, &a->max, INFINITY);
      } else {
        /* Bounds outside the compute dtype's range clamp to its limits. */
        int64_t mn, mx;
        int_limits(cd, &mn, &mx);
        lo = bp_gpu_ew_const_i(&p, sat(scalar_int(&a->min, INT64_MIN), mn, mx));
        hi = bp_gpu_ew_const_i(&p, sat(scalar_int(&a->max, INT64_MAX), mn, mx));
      }
      res = bp_gpu_ew_op(&p, BP_OP_clamp, r[0], bp_gpu_ew_load_const(&p, lo), bp_gpu_ew_load_const(&p, hi), 0);
      break;
    }
    case BP_OP_hardtanh: {
      const bp_hardtanh_attrs_t* a = call->attrs;
      uint8_t lo = fl ? bp_gpu_ew_const_f(&p, a->min_val) : bp_gpu_ew_const_i(&p, (int64_t)a->min_val);
      uint8_t hi = fl ? bp_gpu_ew_const_f(&p, a->max_val) : bp_gpu_ew_const_i(&p, (int64_t)a->max_val);
      res = bp_gpu_ew_op(&p, BP_OP_clamp, r[0], bp_gpu_ew_load_const(&p, lo), bp_gpu_ew_load_const(&p, hi), 0);
      break;
    }
    case BP_OP_elu: {
      const bp_elu_attrs_t* a = call->attrs;
      uint8_t ks = bp_gpu_ew_load_const(&p, bp_gpu_ew_const_f(&p, a->scale));
      uint8_t ki = bp_gpu_ew_load_const(&p, bp_gpu_ew_const_f(&p, a->input_scale));
      uint8_t ka = bp_gpu_ew_const_f(&p, a->alpha);
      res = bp_gpu_ew_op(&p, BP_GPU_EW_ELU, r[0], ks, ki, ka);
      break;
    }
    case BP_OP_leaky_relu: {
      double slope = ((const bp_leaky_relu_attrs_t*)call->attrs)->negative_slope;
      res = bp_gpu_ew_op(&p, BP_GPU_EW_LEAKY, r[0], bp_gpu_ew_load_const(&p, bp_gpu_ew_const_f(&p, slope)), 0, 0);
      break;
    }
    case BP_OP_softplus: {
      const bp_softplus_attrs_t* a = call->attrs;
      res = bp_gpu_ew_op(&p, BP_GPU_EW_SOFTPLUS, r[0], bp_gpu_ew_load_const(&p, bp_gpu_ew_const_f(&p, a->beta)),
                         bp_gpu_ew_load_const(&p, bp_gpu_ew_const_f(&p, a->threshold)), 0);
      break;
    }
    case BP_OP_gelu:
      res = bp_gpu_ew_op(&p, BP_OP_gelu, r[0], 0, 0, call->attrs ? ((const bp_gelu_attrs_t*)call->attrs)->approximate : 0);
      break;
    case BP_OP_bitwise_not:
      res = bp_gpu_ew_op(&p, cd == BP_DTYPE_BOOL ? BP_GPU_EW_BNOT : BP_OP_bitwise_not, r[0], 0, 0, 0);
      break;
    case BP_OP_add:
    case BP_OP_sub: {
      uint8_t y = r[1];
      if (ba && !alpha_is_one(&ba->alpha))
        y = bp_gpu_ew_op(&p, BP_OP_mul, bp_gpu_ew_load_const(&p, bp_gpu_ew_const_scalar(&p, &ba->alpha, 1.0)), r[1], 0, 0);
      res = bp_gpu_ew_op(&p, op, r[0], y, 0, 0);
      break;
    }
    case BP_OP_div:
      res = bp_gpu_ew_op(&p, BP_OP_div, r[0], r[1], 0, ba ? ba->rounding_mode : 0);
      break;
    case BP_OP_addcmul: {
      uint8_t v = bp_gpu_ew_load_const(&p, bp_gpu_ew_const_scalar(&p, ba ? &ba->alpha : NULL, 1.0));
      uint8_t t = bp_gpu_ew_op(&p, BP_OP_mul, v, r[1], 0, 0);
      t = bp_gpu_ew_op(&p, BP_OP_mul, t, r[2], 0, 0);
      res = bp_gpu_ew_op(&p, BP_OP_add, r[0], t, 0, 0);
      break;
    }
    case BP_OP_lerp:
      res = bp_gpu_ew_op(&p, BP_GPU_EW_LERP, r[0], r[1], r[2], 0);
      break;
    case BP_OP_pow: { /* PyTorch's product forms of exponents -2 and 3 */
      int pf = bp_pow_product_form(call);
      uint8_t sq = pf ? bp_gpu_ew_op(&p, BP_OP_mul, r[0], r[0], 0, 0) : 0;
      res = pf == 3    ? bp_gpu_ew_op(&p, BP_OP_mul, sq, r[0], 0, 0)
            : pf == -2 ? bp_gpu_ew_op(&p, BP_OP_reciprocal, sq, 0, 0, 0)
                       : bp_gpu_ew_op(&p, op, r[0], r[1], 0, 0);
      break;
    }
    default:
      res = bp_gpu_ew_op(&p, op, r[0], r[1], r[2], 0);
      break;
  }
  bp_gpu_ew_store(&p, bp_gpu_ew_output(&p, call->outputs[0]), res);
  return bp_gpu_ew_launch(caps, &p, launch, ctx);
}

/* ---- copy-like ops ------------------------------------------------------ */
/* repeat: dst = the output split into (repeat, size) dim pairs (pairs with
 * a repeat of 1 stay one dim), src = the input with stride 0 on the repeat
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

/* Fills `out` with a scalar. */
static bp_status_t fill_scalar(const bp_gpu_device_caps_t* caps, const bp_tensor_desc_t* out,
                               const bp_scalar_t* v, bp_gpu_launch_fn launch, void* ctx) {
  bp_gpu_ew_t p;
  bp_gpu_ew_init(&p, v->kind == BP_SCALAR_FLOAT ? BP_DTYPE_F64 : BP_DTYPE_I64);
  uint8_t k = bp_gpu_ew_const_scalar(&p, v, 0);
  bp_gpu_ew_store(&p, bp_gpu_ew_output(&p, out), bp_gpu_ew_load_const(&p, k));
  return bp_gpu_ew_launch(caps, &p, launch, ctx);
}

bp_status_t bp__gpu_copy_run(const bp_gpu_device_caps_t* caps, const bp_op_call_t* call,
                             bp_gpu_launch_fn launch, void* ctx) {
  const bp_tensor_desc_t* out = call->outputs[0];
  switch (call->op_id) {
    case BP_OP_to_copy:
    case BP_OP_clone:
      return bp_gpu_ew_copy(caps, out, call->inputs[0], launch, ctx);
    case BP_OP_copy:
      return bp_gpu_ew_copy(caps, out, call->inputs[1], launch, ctx);
    case BP_OP_fill:
      return fill_scalar(caps, out, &((const bp_fill_attrs_t*)call->attrs)->value, launch, ctx);
    case BP_OP_arange: {
      const bp_arange_attrs_t* a = call->attrs;
      int exact_int = !bp_dtype_is_float(out->dtype) && a->start.kind != BP_SCALAR_FLOAT &&
                      a->step.kind != BP_SCALAR_FLOAT;
      bp_gpu_ew_t p;
      bp_gpu_ew_init(&p, exact_int ? BP_DTYPE_I64 : BP_DTYPE_F64);
      uint8_t idx = bp_gpu_ew_op(&p, BP_GPU_EW_INDEX, 0, 0, 0, 0);
      uint8_t step = bp_gpu_ew_load_const(&p, bp_gpu_ew_const_scalar(&p, &a->step, 1));
      uint8_t start = bp_gpu_ew_load_const(&p, bp_gpu_ew_const_scalar(&p, &a->start, 0));
      uint8_t v = bp_gpu_ew_op(&p, BP_OP_mul, idx, step, 0, 0);
      v = bp_gpu_ew_op(&p, BP_OP_add, start, v, 0, 0);
      bp_gpu_ew_store(&p, bp_gpu_ew_output(&p, out), v);
      return bp_gpu_ew_launch(caps, &p, launch, ctx);
    }
    case BP_OP_cat: {
      const bp_dim_attrs_t* a = call->attrs;
      int64_t dim = a->dim < 0 ? a->dim + (int64_t)out->rank : a->dim;
      if (out->rank == 0 || dim < 0 || dim >= (int64_t)out->rank)
        return BP_KIT_ERROR(BP_INVALID_ARGUMENT, "cat: dim %d out of range for rank %u", a->dim, out->rank);
      int64_t at = 0;
      for (uint32_t i = call->list_begin; i < call->list_begin + call->list_count; i++) {
        const bp_tensor_desc_t* in = call->inputs[i];
        if (in->rank == 1 && in->sizes[0] == 0 && out->rank != 1) continue;
        if (in->rank != out->rank)
          return BP_KIT_ERROR(BP_INVALID_ARGUMENT, "cat: input %u has rank %u, output %u", i, in->rank, out->rank);
        if (at + in->sizes[dim] > out->sizes[dim])
          return BP_KIT_ERROR(BP_INVALID_ARGUMENT, "cat: inputs exceed the output's size in dim %lld", (long long)dim);
        bp_tensor_desc_t piece = *out;
        piece.sizes[dim] = in->sizes[dim];
        piece.byte_offset = out->byte_offset + (uint64_t)(at * out->strides[dim] * (int64_t)bp_dtype_size(out->dtype));
        at += in->sizes[dim];
        if (in->sizes[dim] == 0) continue;
        bp_status_t st = bp_gpu_ew_copy(caps, &piece, in, launch, ctx);
        if (st) return st;
      }
      return BP_OK;
    }
    case BP_OP_flip: {
      /* A view with the flipped dims' strides negated, copied densely. */
      const bp_dims_attrs_t* a = call->attrs;
      bp_tensor_desc_t v = *call->inputs[0];
      uint32_t flipped = 0;
      int64_t wrap = v.rank ? (int64_t)v.rank : 1; /* a 0-d tensor takes dims 0 and -1 */
      for (uint32_t i = 0; i < a->num_dims && i < BP_MAX_RANK; i++) {
        int64_t d = a->dims[i] < 0 ? a->dims[i] + wrap : a->dims[i];
        if (d < 0 || d >= wrap)
          return BP_KIT_ERROR(BP_INVALID_ARGUMENT, "flip: dim %lld out of range", (long long)a->dims[i]);
        flipped |= 1u << d;
      }
      for (uint32_t d = 0; d < v.rank; d++)
        if ((flipped & (1u << d)) && v.sizes[d] > 1) {
          v.byte_offset += (uint64_t)((v.sizes[d] - 1) * v.strides[d] * (int64_t)bp_dtype_size(v.dtype));
          v.strides[d] = -v.strides[d];
        }
      return bp_gpu_ew_copy(caps, out, &v, launch, ctx);
    }
    case BP_OP_repeat: {
      bp_tensor_desc_t dst, src;
      if (repeat_views(call, &dst, &src))
        return BP_KIT_ERROR(BP_UNIMPLEMENTED, "repeat: more than %d dims after splitting", BP_MAX_RANK);
      return bp_gpu_ew_copy(caps, &dst, &src, launch, ctx);
    }
    case BP_OP_pad: {
      const bp_pad_attrs_t* a = call->attrs;
      const bp_tensor_desc_t* in = call->inputs[0];
      bp_status_t st = fill_scalar(caps, out, &a->value, launch, ctx);
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
      return bp_gpu_ew_copy(caps, &dv, &sv, launch, ctx);
    }
    default:
      return BP_KIT_ERROR(BP_UNIMPLEMENTED, "op %s is not a copy", bp_kit_op_name(call->op_id));
  }
}

int bp__gpu_copy_supported(const bp_gpu_device_caps_t* caps, const bp_op_call_t* call, char* msg, size_t cap) {
  if (!bp__gpu_dtypes_ok(caps, call, msg, cap)) return BP_SUPPORT_DTYPE;
  const void* attrs = call->attrs;
  switch (call->op_id) {
    case BP_OP_pad:
      if (attrs && ((const bp_pad_attrs_t*)attrs)->mode != BP_PAD_CONSTANT) {
        bp_plugin_format(msg, cap, 0, "only constant padding (reflect, replicate, circular are not implemented)");
        return BP_SUPPORT_ATTRIBUTE;
      }
      if (attrs && ((const bp_pad_attrs_t*)attrs)->num_pads / 2 > call->inputs[0]->rank) {
        bp_plugin_format(msg, cap, 0, "more pad pairs than dims");
        return BP_SUPPORT_ATTRIBUTE;
      }
      break;
    case BP_OP_repeat:
      if (attrs) {
        bp_tensor_desc_t dv, sv;
        if (call->inputs[0]->rank > BP_MAX_RANK || repeat_views(call, &dv, &sv)) {
          bp_plugin_format(msg, cap, 0, "needs more than %d dims once split into (repeat, size) pairs", BP_MAX_RANK);
          return BP_SUPPORT_RANK;
        }
      }
      break;
    case BP_OP_arange:
      if (call->outputs[0]->dtype == BP_DTYPE_BOOL) {
        bp_plugin_format(msg, cap, 0, "bool output");
        return BP_SUPPORT_DTYPE;
      }
      break;
    default:
      break;
  }
  return 0;
}

/* ---- fused programs ------------------------------------------------------ */
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

#define BP_GPU_EW_MAX_INPUTS 6
#define BP_GPU_OPCODE_WORDS ((BP_OP_COUNT + 63u) / 64u)
static uint64_t k_opcode_mask[BP_GPU_OPCODE_WORDS];
static pthread_once_t k_opcode_once = PTHREAD_ONCE_INIT;
static void opcode_mask_init(void) {
  for (uint32_t op = 1; op < BP_OP_COUNT; op++)
    if (fusable(op)) k_opcode_mask[op / 64] |= 1ull << (op % 64);
}

bp_status_t bp_gpu_fusion_caps(const bp_gpu_device_caps_t* caps, bp_fusion_caps_t* out) {
  pthread_once(&k_opcode_once, opcode_mask_init);
  bp_fusion_caps_t c;
  memset(&c, 0, sizeof c);
  c.struct_size = sizeof c;
  c.ew_max_inputs = BP_GPU_EW_MAX_INPUTS;
  c.ew_max_outputs = BP_GPU_EW_MAX_OPERANDS - BP_GPU_EW_MAX_INPUTS;
  c.ew_max_instrs = BP_GPU_EW_MAX_INSTR;
  c.ew_max_registers = BP_GPU_EW_MAX_REGS;
  c.ew_dtype_mask = caps->dtype_mask;
  c.ew_opcode_words = BP_GPU_OPCODE_WORDS;
  c.ew_opcode_mask = k_opcode_mask;
  c.pattern_stride = sizeof(bp_fused_pattern_t);
  bp_kit_copy_out(out, &c, sizeof c);
  return BP_OK;
}

bp_status_t bp_gpu_ew_program_run(const bp_gpu_device_caps_t* caps, const bp_ew_program_t* prog,
                                  uint32_t num_inputs, const bp_tensor_desc_t* const* inputs,
                                  uint32_t num_outputs, const bp_tensor_desc_t* const* outputs,
                                  bp_gpu_launch_fn launch, void* ctx) {
  if (!prog || (num_inputs && !inputs) || !outputs || num_outputs == 0)
    return BP_KIT_ERROR(BP_INVALID_ARGUMENT, "launch_ew_program: NULL argument");
  if (prog->struct_size < BP_EW_PROGRAM_V1_SIZE)
    return BP_KIT_ERROR(BP_INVALID_ARGUMENT, "launch_ew_program: struct_size %u too small", prog->struct_size);
  if (prog->num_instrs && prog->instr_stride < BP_EW_INSTR_V1_SIZE)
    return BP_KIT_ERROR(BP_INVALID_ARGUMENT, "launch_ew_program: instr_stride %u < %u", prog->instr_stride,
                        BP_EW_INSTR_V1_SIZE);
  for (uint32_t k = 0; k < num_inputs; k++)
    if (!inputs[k]) return BP_KIT_ERROR(BP_INVALID_ARGUMENT, "launch_ew_program: input %u is NULL", k);
  for (uint32_t k = 0; k < num_outputs; k++)
    if (!outputs[k]) return BP_KIT_ERROR(BP_INVALID_ARGUMENT, "launch_ew_program: output %u is NULL", k);
  if (num_inputs != prog->num_inputs || num_outputs != prog->num_outputs || num_inputs > BP_GPU_EW_MAX_INPUTS ||
      num_outputs > BP_GPU_EW_MAX_OPERANDS - BP_GPU_EW_MAX_INPUTS || prog->num_instrs > BP_GPU_EW_MAX_INSTR ||
      prog->num_registers > BP_GPU_EW_MAX_REGS || prog->num_constants > BP_GPU_EW_MAX_CONST ||
      (prog->num_instrs && !prog->instrs) || (prog->num_constants && !prog->constants))
    return BP_KIT_ERROR(BP_INVALID_ARGUMENT,
                        "launch_ew_program: %u inputs, %u outputs, %u instructions, %u registers, %u constants "
                        "exceed the limits (%d, %d, %d, %d, %d) or disagree with the operands",
                        prog->num_inputs, prog->num_outputs, prog->num_instrs, prog->num_registers,
                        prog->num_constants, BP_GPU_EW_MAX_INPUTS, BP_GPU_EW_MAX_OPERANDS - BP_GPU_EW_MAX_INPUTS,
                        BP_GPU_EW_MAX_INSTR, BP_GPU_EW_MAX_REGS, BP_GPU_EW_MAX_CONST);
  if (!dtype_ok(caps, prog->compute_dtype))
    return BP_KIT_ERROR(BP_UNIMPLEMENTED, "launch_ew_program: compute dtype %s", bp_dtype_name(prog->compute_dtype));
  bp_gpu_ew_t p;
  bp_gpu_ew_init(&p, prog->compute_dtype);
  for (uint32_t k = 0; k < num_inputs; k++) bp_gpu_ew_input(&p, inputs[k]);
  for (uint32_t k = 0; k < num_outputs; k++) bp_gpu_ew_output(&p, outputs[k]);
  int fl = bp_dtype_is_float(prog->compute_dtype);
  for (uint32_t j = 0; j < prog->num_constants; j++) {
    const bp_scalar_t* c = &prog->constants[j];
    if (fl) bp_gpu_ew_const_f(&p, bp_kit_scalar_f64(c, 0));
    else bp_gpu_ew_const_i(&p, scalar_int(c, 0));
  }
  for (uint32_t i = 0; i < prog->num_instrs; i++) {
    const bp_ew_instr_t* in = BP_EW_INSTR_AT(prog, i);
    uint32_t o = in->opcode;
    int bad = in->dst >= prog->num_registers;
    switch (o) {
      case BP_EW_LOAD_INPUT: bad |= in->a >= num_inputs; break;
      case BP_EW_LOAD_CONST: bad |= in->a >= prog->num_constants; break;
      case BP_EW_STORE: bad = in->a >= num_outputs || in->b >= prog->num_registers; break;
      case BP_EW_CAST: bad |= in->a >= prog->num_registers || !dtype_ok(caps, in->aux); break;
      default:
        if (o >= BP_OP_COUNT || !fusable(o))
          return BP_KIT_ERROR(BP_UNIMPLEMENTED, "launch_ew_program: instruction %u: opcode 0x%x is not fusable here", i, o);
        if ((float_only(o) && !fl) || (int_only(o) && fl))
          return BP_KIT_ERROR(BP_UNIMPLEMENTED, "launch_ew_program: instruction %u: op %s in %s", i, bp_kit_op_name(o),
                              bp_dtype_name(prog->compute_dtype));
        bad |= in->a >= prog->num_registers || in->b >= prog->num_registers || in->c >= prog->num_registers;
        if (o == BP_OP_bitwise_not && prog->compute_dtype == BP_DTYPE_BOOL) o = BP_GPU_EW_BNOT;
        break;
    }
    if (bad)
      return BP_KIT_ERROR(BP_INVALID_ARGUMENT, "launch_ew_program: instruction %u has an operand out of range", i);
    bp_gpu_ew_emit(&p, o, in->dst, in->a, in->b, in->c, in->aux);
  }
  p.nregs = prog->num_registers;
  return bp_gpu_ew_launch(caps, &p, launch, ctx);
}
