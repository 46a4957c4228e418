/* References of the elementwise ops: unary (ids 1..42), binary (43..64),
 * where. Each element is computed in double (floating compute dtypes) or
 * exactly with two's complement wrap (integer compute dtypes), from the
 * inputs converted to the compute dtype as docs/semantics.md prescribes.
 */
#include <math.h>
#include <string.h>

#include "ref.h"

static int is_fp8(uint32_t d) { return d == BP_DTYPE_F8E4M3FN || d == BP_DTYPE_F8E5M2; }

/* Rounds to the "opmath" precision a compute dtype's kernels use: f32 for
 * f16/bf16/f32 (PyTorch's opmath), double for f64. */
static double opmath(double x, uint32_t cd) {
  return cd == BP_DTYPE_F64 ? x : (double)(float)x;
}

static int64_t wrap_u(uint64_t v, uint32_t cd) { return bpc_wrap_int((int64_t)v, cd); }

static int nonzero(bpc_num_t v, uint32_t cd) {
  return bpc_dtype_is_float(cd) ? (v.f != 0.0 || isnan(v.f)) : v.i != 0;
}

/* ---- unary ------------------------------------------------------------------ */
static double clamp_f(double x, int has_lo, double lo, int has_hi, double hi) {
  if ((has_lo && isnan(lo)) || (has_hi && isnan(hi)) || isnan(x)) return NAN;
  if (has_lo && x < lo) x = lo;
  if (has_hi && x > hi) x = hi;
  return x;
}

static int64_t clamp_i(int64_t x, int has_lo, int64_t lo, int has_hi, int64_t hi) {
  if (has_lo && x < lo) x = lo;
  if (has_hi && x > hi) x = hi;
  return x;
}

static bpc_num_t unary_fn(const bpc_case_t* c, const bpc_num_t* a, uint32_t cd) {
  bpc_num_t r = {0.0, 0, 0.0};
  double x = a[0].f;
  int64_t i = a[0].i;
  int fl = bpc_dtype_is_float(cd);
  switch (c->op_id) {
    case BP_OP_abs: if (fl) r.f = fabs(x); else r.i = wrap_u(i < 0 ? 0u - (uint64_t)i : (uint64_t)i, cd); break;
    case BP_OP_acos: r.f = acos(x); break;
    case BP_OP_acosh: r.f = acosh(x); break;
    case BP_OP_asin: r.f = asin(x); break;
    case BP_OP_asinh: r.f = asinh(x); break;
    case BP_OP_atan: r.f = atan(x); break;
    case BP_OP_atanh: r.f = atanh(x); break;
    case BP_OP_ceil: if (fl) r.f = ceil(x); else r.i = i; break;
    case BP_OP_cos: r.f = cos(x); break;
    case BP_OP_cosh: r.f = cosh(x); break;
    case BP_OP_erf: r.f = erf(x); break;
    case BP_OP_exp: r.f = exp(x); break;
    case BP_OP_expm1: r.f = expm1(x); break;
    case BP_OP_floor: if (fl) r.f = floor(x); else r.i = i; break;
    case BP_OP_log: r.f = log(x); break;
    case BP_OP_log10: r.f = log10(x); break;
    case BP_OP_log1p: r.f = log1p(x); break;
    case BP_OP_log2: r.f = log2(x); break;
    case BP_OP_neg: if (fl) r.f = -x; else r.i = wrap_u(0u - (uint64_t)i, cd); break;
    case BP_OP_reciprocal: r.f = 1.0 / x; break;
    case BP_OP_relu: if (fl) r.f = isnan(x) ? x : (x > 0.0 ? x : 0.0); else r.i = i > 0 ? i : 0; break;
    case BP_OP_round: if (fl) r.f = nearbyint(x); else r.i = i; break; /* half to even */
    case BP_OP_rsqrt: r.f = 1.0 / sqrt(x); break;
    case BP_OP_sigmoid: r.f = 1.0 / (1.0 + exp(-x)); break;
    case BP_OP_sign:
      if (fl) r.f = x > 0.0 ? 1.0 : x < 0.0 ? -1.0 : 0.0; /* NaN -> 0, -0 -> +0 */
      else r.i = (i > 0) - (i < 0);
      break;
    case BP_OP_sin: r.f = sin(x); break;
    case BP_OP_sinh: r.f = sinh(x); break;
    case BP_OP_sqrt: r.f = sqrt(x); break;
    case BP_OP_tan: r.f = tan(x); break;
    case BP_OP_tanh: r.f = tanh(x); break;
    case BP_OP_trunc: if (fl) r.f = trunc(x); else r.i = i; break;
    case BP_OP_bitwise_not: r.i = cd == BP_DTYPE_BOOL ? !i : bpc_wrap_int(~i, cd); break;
    case BP_OP_logical_not: r.i = !nonzero(a[0], cd); break;
    case BP_OP_isinf: r.i = fl && isinf(x); break;
    case BP_OP_isnan: r.i = fl && isnan(x); break;
    case BP_OP_clamp: {
      const bp_clamp_attrs_t* at = &c->attrs.clamp;
      uint32_t dlo, dhi;
      bpc_num_t lo = bpc_scalar_value(&at->min, &dlo), hi = bpc_scalar_value(&at->max, &dhi);
      int hlo = dlo != BP_DTYPE_INVALID, hhi = dhi != BP_DTYPE_INVALID;
      if (hlo) lo = bpc_convert(lo, dlo, cd);
      if (hhi) hi = bpc_convert(hi, dhi, cd);
      if (fl) r.f = clamp_f(x, hlo, lo.f, hhi, hi.f);
      else r.i = clamp_i(i, hlo, lo.i, hhi, hi.i);
      break;
    }
    case BP_OP_clamp_tensor: {
      int hlo = c->in[1].dtype != BP_DTYPE_INVALID, hhi = c->in[2].dtype != BP_DTYPE_INVALID;
      if (fl) r.f = clamp_f(x, hlo, a[1].f, hhi, a[2].f);
      else r.i = clamp_i(i, hlo, a[1].i, hhi, a[2].i);
      break;
    }
    case BP_OP_elu: {
      /* x > 0: scale * x; else scale * alpha * (exp(x * input_scale) - 1).
       * The exp(...) - 1 form has an absolute error near |scale*alpha| * u. */
      const bp_elu_attrs_t* at = &c->attrs.elu;
      if (x > 0.0 || isnan(x)) {
        r.f = at->scale * x;
      } else {
        r.f = at->scale * at->alpha * expm1(x * at->input_scale);
        r.mag = fabs(at->scale * at->alpha);
      }
      break;
    }
    case BP_OP_gelu:
      if (c->attrs.gelu.approximate == BP_GELU_TANH) {
        double k = sqrt(2.0 / M_PI);
        r.f = 0.5 * x * (1.0 + tanh(k * (x + 0.044715 * x * x * x)));
      } else {
        r.f = x * 0.5 * (1.0 + erf(x * M_SQRT1_2));
      }
      r.mag = fabs(x); /* 0.5*x*(1+erf) cancels for negative x */
      break;
    case BP_OP_hardtanh: {
      double lo = bpc_round_to_dtype(c->attrs.hardtanh.min_val, cd);
      double hi = bpc_round_to_dtype(c->attrs.hardtanh.max_val, cd);
      r.f = clamp_f(x, 1, lo, 1, hi);
      break;
    }
    case BP_OP_leaky_relu:
      r.f = (x > 0.0 || isnan(x)) ? x : x * c->attrs.leaky_relu.negative_slope;
      break;
    case BP_OP_silu: r.f = x / (1.0 + exp(-x)); break;
    case BP_OP_hardsigmoid:
      r.f = isnan(x) ? x : fmin(fmax(x + 3.0, 0.0), 6.0) / 6.0;
      r.mag = (fabs(x) + 3.0) / 6.0; /* x + 3 rounds in the compute dtype */
      break;
    case BP_OP_hardswish:
      r.f = isnan(x) ? x : x * fmin(fmax(x + 3.0, 0.0), 6.0) / 6.0;
      /* PyTorch forms x * min(...) before dividing by 6, in opmath (f32 for
       * every dtype but f64): that product may overflow to inf. */
      if (isfinite(x) && fabs(6.0 * r.f) > bpc_float_max(cd == BP_DTYPE_F64 ? cd : BP_DTYPE_F32))
        r.f = copysign(INFINITY, x);
      r.mag = fabs(x) * (fabs(x) + 3.0) / 6.0; /* x + 3 rounds in the compute dtype */
      break;
    case BP_OP_softplus: {
      /* PyTorch: x itself above the threshold (a discontinuity of at most
       * log1p(exp(-threshold)) that the reference keeps exactly). */
      const bp_softplus_attrs_t* at = &c->attrs.softplus;
      double xb = x * at->beta;
      r.f = xb > at->threshold ? x : log1p(exp(xb)) / at->beta;
      break;
    }
    case BP_OP_mish: r.f = x * tanh(log1p(exp(x))); r.mag = fabs(x); break;
    default: break;
  }
  if (!fl) r.f = (double)r.i;
  return r;
}

bp_status_t bpc_ref_unary(const bpc_case_t* c, const bpc_host_tensor_t* in, bpc_ref_result_t* res) {
  const bpc_op_entry_t* op = bpc_op_entry(c->op_id);
  uint32_t d = in[0].dtype;
  if (is_fp8(d) || d == BP_DTYPE_C64) return bpc_ref_reject(res, "%s: no arithmetic on %s", op->name, bpc_dtype_name(d));
  const char* rule = op->rule;
  uint32_t cd = d, out = d, rd = d;
  if (strcmp(rule, "unary_float") == 0) {
    cd = out = rd = bpc_dtype_is_float(d) ? d : BP_DTYPE_F32;
  } else if (strcmp(rule, "unary_bool") == 0) {
    out = rd = BP_DTYPE_BOOL;
  } else if (strcmp(rule, "unary_bitwise") == 0) {
    if (bpc_dtype_is_float(d)) return bpc_ref_reject(res, "%s: integers and bool only", op->name);
  } else if (strcmp(rule, "unary_clamp") == 0) {
    bpc_result_type_t rt;
    bpc_result_type_init(&rt);
    bpc_result_type_add_tensor(&rt, &in[0]);
    uint32_t dl, dh;
    (void)bpc_scalar_value(&c->attrs.clamp.min, &dl);
    (void)bpc_scalar_value(&c->attrs.clamp.max, &dh);
    if (dl == BP_DTYPE_INVALID && dh == BP_DTYPE_INVALID) return bpc_ref_reject(res, "clamp: no bound");
    bpc_result_type_add(&rt, dl, BPC_GROUP_WRAPPED);
    bpc_result_type_add(&rt, dh, BPC_GROUP_WRAPPED);
    cd = out = rd = bpc_result_type_get(&rt);
    if (cd == BP_DTYPE_BOOL) return bpc_ref_reject(res, "clamp is not defined for bool");
  } else { /* unary_same */
    if (d == BP_DTYPE_BOOL) return bpc_ref_reject(res, "%s is not defined for bool here", op->name);
    if (c->op_id == BP_OP_hardtanh && !bpc_dtype_is_float(d)) {
      return bpc_ref_reject(res, "hardtanh: floating inputs only in the suite");
    }
  }
  bpc_ew_operand_t ops[1] = {{&in[0], {0.0, 0, 0.0}, 0}};
  return bpc_ref_elementwise(c, ops, 1, cd, rd, out, unary_fn, res);
}

bp_status_t bpc_ref_clamp_tensor(const bpc_case_t* c, const bpc_host_tensor_t* in,
                                 bpc_ref_result_t* res) {
  bpc_result_type_t rt;
  bpc_result_type_init(&rt);
  for (int k = 0; k < 3; k++) {
    if (is_fp8(in[k].dtype)) return bpc_ref_reject(res, "clamp: no fp8 arithmetic");
    bpc_result_type_add_tensor(&rt, &in[k]);
  }
  uint32_t cd = bpc_result_type_get(&rt);
  if (cd == BP_DTYPE_BOOL) return bpc_ref_reject(res, "clamp is not defined for bool");
  if (in[1].dtype == BP_DTYPE_INVALID && in[2].dtype == BP_DTYPE_INVALID) {
    return bpc_ref_reject(res, "clamp: no bound");
  }
  bpc_ew_operand_t ops[3] = {{&in[0], {0.0, 0, 0.0}, 0}, {&in[1], {0.0, 0, 0.0}, 0},
                             {&in[2], {0.0, 0, 0.0}, 0}};
  return bpc_ref_elementwise(c, ops, 3, cd, cd, cd, unary_fn, res);
}

/* ---- binary ---------------------------------------------------------------- */
/* PyTorch's div_floor_floating, each step rounded to the opmath precision. */
static double div_floor_float(double a, double b, uint32_t cd) {
  if (b == 0.0) return a / b;
  double mod = fmod(a, b); /* exact */
  double div = opmath(opmath(a - mod, cd) / b, cd);
  if (mod != 0.0 && (b < 0.0) != (mod < 0.0)) div = opmath(div - 1.0, cd);
  double fd;
  if (div != 0.0) {
    fd = floor(div);
    if (opmath(div - fd, cd) > 0.5) fd = opmath(fd + 1.0, cd);
  } else {
    fd = copysign(0.0, a / b);
  }
  return fd;
}

static int64_t ipow(int64_t base, int64_t e, uint32_t cd) {
  if (e < 0) return 0; /* undefined by the semantics; never generated */
  uint64_t r = 1, b = (uint64_t)base;
  while (e) {
    if (e & 1) r *= b;
    b *= b;
    e >>= 1;
  }
  return wrap_u(r, cd);
}

static bpc_num_t binary_fn(const bpc_case_t* c, const bpc_num_t* v, uint32_t cd) {
  bpc_num_t r = {0.0, 0, 0.0};
  double a = v[0].f, b = v[1].f;
  int64_t ia = v[0].i, ib = v[1].i;
  uint64_t ua = (uint64_t)ia, ub = (uint64_t)ib;
  int fl = bpc_dtype_is_float(cd), bl = cd == BP_DTYPE_BOOL;
  const bp_binary_attrs_t* at = &c->attrs.binary;
  uint32_t alpha_dtype;
  bpc_num_t alpha = bpc_scalar_value(&at->alpha, &alpha_dtype);
  double af = alpha_dtype == BP_DTYPE_INVALID ? 1.0 : alpha.f;
  uint64_t ai = alpha_dtype == BP_DTYPE_INVALID ? 1u : (uint64_t)alpha.i;
  int result_bool = 0;
  switch (c->op_id) {
    case BP_OP_add:
      if (fl) r.f = a + af * b;
      else if (bl) r.i = ia || ib;
      else r.i = wrap_u(ua + ai * ub, cd);
      break;
    case BP_OP_sub:
      if (fl) r.f = a - af * b;
      else r.i = wrap_u(ua - ai * ub, cd);
      break;
    case BP_OP_mul:
      if (fl) r.f = a * b;
      else if (bl) r.i = ia && ib;
      else r.i = wrap_u(ua * ub, cd);
      break;
    case BP_OP_div:
      if (at->rounding_mode == BP_ROUNDING_TRUNC) {
        if (fl) r.f = trunc(opmath(a / b, cd));
        else r.i = ib == 0 ? 0 : bpc_wrap_int(ia / ib, cd);
      } else if (at->rounding_mode == BP_ROUNDING_FLOOR) {
        if (fl) {
          r.f = div_floor_float(a, b, cd);
        } else if (ib != 0) {
          int64_t q = ia / ib;
          if ((ia % ib != 0) && ((ia < 0) != (ib < 0))) q--;
          r.i = bpc_wrap_int(q, cd);
        }
      } else {
        r.f = a / b;
      }
      break;
    case BP_OP_atan2: r.f = atan2(a, b); break;
    case BP_OP_fmod:
      if (fl) r.f = fmod(a, b);
      else r.i = ib == 0 ? 0 : ia % ib;
      break;
    case BP_OP_remainder:
      if (fl) {
        double m = fmod(a, b);
        if (m != 0.0 && (b < 0.0) != (m < 0.0)) m += b;
        r.f = m;
      } else if (ib != 0) {
        int64_t m = ia % ib;
        if (m != 0 && ((m < 0) != (ib < 0))) m += ib;
        r.i = m;
      }
      break;
    case BP_OP_pow:
      /* pow.Tensor_Scalar in PyTorch's CPU kernel, f32/f64/bf16 (not f16):
       * 0.5 and -0.5 are sqrt and rsqrt (they differ from IEEE pow at -0.0
       * and -inf); -2 is 1 / (x * x) with x * x in the compute precision
       * (f32 for bf16 too: one range), so 1e20^-2 is 0 in f32. */
      if (fl && c->has_attrs && at->flags == BP_BINARY_OTHER_IS_SCALAR && cd != BP_DTYPE_F16 &&
          (b == 0.5 || b == -0.5))
        r.f = b > 0 ? sqrt(a) : 1.0 / sqrt(a);
      else if (fl && c->has_attrs && at->flags == BP_BINARY_OTHER_IS_SCALAR && cd != BP_DTYPE_F16 &&
               b == -2.0)
        r.f = 1.0 / (cd == BP_DTYPE_F64 ? a * a : (double)(float)(a * a));
      else if (fl) r.f = pow(a, b);
      else r.i = ipow(ia, ib, cd);
      break;
    case BP_OP_maximum:
      if (fl) r.f = (isnan(a) || isnan(b)) ? NAN : (a > b ? a : b);
      else r.i = ia > ib ? ia : ib;
      break;
    case BP_OP_minimum:
      if (fl) r.f = (isnan(a) || isnan(b)) ? NAN : (a < b ? a : b);
      else r.i = ia < ib ? ia : ib;
      break;
    case BP_OP_bitwise_and: r.i = ia & ib; break;
    case BP_OP_bitwise_or: r.i = ia | ib; break;
    case BP_OP_bitwise_xor: r.i = ia ^ ib; break;
    case BP_OP_logical_and: result_bool = 1; r.i = nonzero(v[0], cd) && nonzero(v[1], cd); break;
    case BP_OP_logical_or: result_bool = 1; r.i = nonzero(v[0], cd) || nonzero(v[1], cd); break;
    case BP_OP_logical_xor: result_bool = 1; r.i = nonzero(v[0], cd) != nonzero(v[1], cd); break;
    case BP_OP_eq: result_bool = 1; r.i = fl ? a == b : ia == ib; break;
    case BP_OP_ne: result_bool = 1; r.i = fl ? a != b : ia != ib; break;
    case BP_OP_lt: result_bool = 1; r.i = fl ? a < b : ia < ib; break;
    case BP_OP_le: result_bool = 1; r.i = fl ? a <= b : ia <= ib; break;
    case BP_OP_gt: result_bool = 1; r.i = fl ? a > b : ia > ib; break;
    case BP_OP_ge: result_bool = 1; r.i = fl ? a >= b : ia >= ib; break;
    default: break;
  }
  if (!fl || result_bool) r.f = (double)r.i;
  return r;
}

static int alpha_is_float(const bp_binary_attrs_t* at) { return at->alpha.kind == BP_SCALAR_FLOAT; }

static bpc_num_t where_fn(const bpc_case_t* c, const bpc_num_t* v, uint32_t cd) {
  (void)c;
  return nonzero(v[0], cd) ? v[1] : v[2];
}

bp_status_t bpc_ref_binary(const bpc_case_t* c, const bpc_host_tensor_t* in, bpc_ref_result_t* res) {
  const bpc_op_entry_t* op = bpc_op_entry(c->op_id);
  const bp_binary_attrs_t* at = &c->attrs.binary;
  bpc_ew_operand_t ops[2];
  memset(ops, 0, sizeof ops);
  bpc_result_type_t rt;
  bpc_result_type_init(&rt);
  for (int k = 0; k < 2; k++) {
    uint32_t flag = k == 0 ? BP_BINARY_SELF_IS_SCALAR : BP_BINARY_OTHER_IS_SCALAR;
    if (c->has_attrs && (at->flags & flag)) {
      ops[k].scalar = bpc_scalar_value(&at->scalar, &ops[k].scalar_dtype);
      if (ops[k].scalar_dtype == BP_DTYPE_INVALID) return bpc_ref_reject(res, "scalar operand missing");
      bpc_result_type_add(&rt, ops[k].scalar_dtype, BPC_GROUP_WRAPPED);
    } else {
      if (in[k].dtype == BP_DTYPE_INVALID) return bpc_ref_reject(res, "operand %d missing", k);
      if (is_fp8(in[k].dtype) || in[k].dtype == BP_DTYPE_C64) {
        return bpc_ref_reject(res, "%s: no arithmetic on %s", op->name, bpc_dtype_name(in[k].dtype));
      }
      ops[k].t = &in[k];
      bpc_result_type_add_tensor(&rt, &in[k]);
    }
  }
  if (!ops[0].t && !ops[1].t) return bpc_ref_reject(res, "both operands are scalars");
  uint32_t cd = bpc_result_type_get(&rt);
  uint32_t out = cd, rd = cd;
  const char* rule = op->rule;
  uint32_t mode = c->has_attrs ? at->rounding_mode : BP_ROUNDING_NONE;
  if (strcmp(rule, "binary_arith") == 0) {
    /* PyTorch refuses subtraction with any bool operand, even promoted. */
    for (int k = 0; k < 2; k++) {
      uint32_t dk = ops[k].t ? ops[k].t->dtype : ops[k].scalar_dtype;
      if (c->op_id == BP_OP_sub && dk == BP_DTYPE_BOOL) return bpc_ref_reject(res, "sub with a bool operand");
    }
    if (cd == BP_DTYPE_BOOL && c->op_id != BP_OP_add && c->op_id != BP_OP_mul) {
      return bpc_ref_reject(res, "%s on bool is not in the suite", op->name);
    }
  } else if (strcmp(rule, "binary_div") == 0 || strcmp(rule, "binary_float") == 0) {
    if (mode == BP_ROUNDING_NONE && !bpc_dtype_is_float(cd)) cd = out = rd = BP_DTYPE_F32;
    if (mode != BP_ROUNDING_NONE && cd == BP_DTYPE_BOOL) return bpc_ref_reject(res, "div on bool");
  } else if (strcmp(rule, "binary_compare") == 0 || strcmp(rule, "binary_bool") == 0) {
    out = rd = BP_DTYPE_BOOL;
  } else if (strcmp(rule, "binary_bitwise") == 0) {
    if (bpc_dtype_is_float(cd)) return bpc_ref_reject(res, "%s: integers and bool only", op->name);
  }
  if (!bpc_dtype_is_float(cd) && alpha_is_float(at)) {
    return bpc_ref_reject(res, "floating alpha with an integer result");
  }
  return bpc_ref_elementwise(c, ops, 2, cd, rd, out, binary_fn, res);
}

bp_status_t bpc_ref_where(const bpc_case_t* c, const bpc_host_tensor_t* in, bpc_ref_result_t* res) {
  if (in[0].dtype != BP_DTYPE_BOOL && in[0].dtype != BP_DTYPE_U8) {
    return bpc_ref_reject(res, "where: condition must be bool (or u8)");
  }
  bpc_result_type_t rt;
  bpc_result_type_init(&rt);
  bpc_result_type_add_tensor(&rt, &in[1]);
  bpc_result_type_add_tensor(&rt, &in[2]);
  uint32_t cd = bpc_result_type_get(&rt);
  if (cd == BP_DTYPE_INVALID) return bpc_ref_reject(res, "where: dtypes do not promote");
  bpc_ew_operand_t ops[3] = {{&in[0], {0.0, 0, 0.0}, 0}, {&in[1], {0.0, 0, 0.0}, 0},
                             {&in[2], {0.0, 0, 0.0}, 0}};
  return bpc_ref_elementwise(c, ops, 3, cd, cd, cd, where_fn, res);
}
