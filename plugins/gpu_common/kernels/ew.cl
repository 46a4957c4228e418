/* backplane GPU kernels: the elementwise-program interpreter.
 *
 * One work-item per output element (grid-stride loop) runs a register
 * bytecode (bp_ew_program_t, packed into bp_gpu_ew_args_t): loads of
 * broadcast, strided inputs converted to the compute type, constants,
 * elementwise ops by op id, casts and stores converted to each output's
 * dtype. Every elementwise op, cast, copy, fill and fused program runs here.
 *
 * Variants (kernels.def): CT_F32 (f32, f16, bf16 computed in f32), CT_F64,
 * CT_I64 (every integer dtype and bool, wrapped to the compute dtype's
 * width after each op, as PyTorch's integer arithmetic wraps).
 * Entry point: bp_ew_<ct>(op0 .. op7, args).
 */
#if defined(CT_F32)
#define CT float
#define IS_FLOAT 1
#define EW_NAME bp_ew_f32
#elif defined(CT_F64)
#define CT double
#define IS_FLOAT 1
#define EW_NAME bp_ew_f64
#else
#define CT bp_i64
#define EW_NAME bp_ew_i64
#endif

#define OPC_LOAD_INPUT 0x1000u
#define OPC_LOAD_CONST 0x1001u
#define OPC_STORE 0x1002u
#define OPC_CAST 0x1003u

#ifdef IS_FLOAT
#if defined(CT_F64)
#define MT double
#else
#define MT BP_MATH_T
#endif

BP_INLINE CT ct_load(BP_GLOBAL bp_u8* base, bp_i64 off, bp_u32 dt) {
  switch (dt) {
    case DT_F32: return (CT)BP_ELEM(float, base, off, 0);
    case DT_I64: return (CT)BP_ELEM(bp_i64, base, off, 0);
  }
  return (CT)bp_load_f(base, off, 0, dt);
}
BP_INLINE void ct_store(BP_GLOBAL bp_u8* base, bp_i64 off, bp_u32 dt, CT v) {
  if (dt == DT_F32) {
    BP_ELEM(float, base, off, 0) = (float)v;
    return;
  }
  bp_store_f(base, off, 0, dt, (BP_ACC_F)v);
}
BP_INLINE CT konst(BP_GLOBAL const bp_gpu_ew_args_t* a, bp_u32 j) {
  return (CT)BP_AS_F64(a->consts[j]);
}
BP_INLINE CT wrapc(CT v, bp_u32 cdt) { return v; }

BP_INLINE int nz(CT v) { return v != (CT)0 || isnan(v); }
/* clamp's bounds propagate NaN */
BP_INLINE CT fmax_nan(CT a, CT b) { return (a < b || isnan(b)) ? b : a; }
BP_INLINE CT fmin_nan(CT a, CT b) { return (a > b || isnan(b)) ? b : a; }

/* Rounds a register through dtype dt (BP_EW_CAST). */
BP_INLINE CT round_through(CT v, bp_u32 dt) {
  switch (dt) {
    case DT_F32: return (CT)(float)v;
    case DT_F16: return (CT)bp_round_f16((float)v);
    case DT_BF16: return (CT)bp_bf16_to_f32(bp_f32_to_bf16((float)v));
    case DT_F64: return v;
    case DT_BOOL: return nz(v) ? (CT)1 : (CT)0;
    case DT_I8: return (CT)(bp_i8)(bp_i64)v;
    case DT_U8: return (CT)(bp_u8)(bp_i64)v;
    case DT_I16: return (CT)(bp_i16)(bp_i64)v;
    case DT_I32: return (CT)(bp_i32)(bp_i64)v;
    case DT_I64: return (CT)(bp_i64)v;
  }
  return v;
}

/* Python-style floor division: the floor of the exact quotient. */
BP_INLINE CT div_floor(CT x, CT y) {
  if (y == (CT)0) return x / y;
  CT m = fmod(x, y);
  CT dv = (x - m) / y;
  if (m != (CT)0 && ((y < (CT)0) != (m < (CT)0))) dv -= (CT)1;
  if (dv == (CT)0) return copysign((CT)0, x / y);
  CT fl = floor(dv);
  if (dv - fl > (CT)0.5) fl += (CT)1;
  return fl;
}

BP_INLINE CT pow_f(CT x, CT y) {
  MT b = (MT)x, e = (MT)y;
  return (CT)pow(b, e);
}

BP_INLINE CT apply(bp_u32 op, CT x, CT y, CT z, bp_u32 aux, BP_GLOBAL const bp_gpu_ew_args_t* A) {
  switch (op) {
    case OP_abs: return fabs(x);
    case OP_ceil: return ceil(x);
    case OP_floor: return floor(x);
    case OP_neg: return -x;
    case OP_relu: return x < (CT)0 ? (CT)0 : x;
    case OP_round: return rint(x);
    case OP_sign: return (CT)((x > (CT)0 ? 1 : 0) - (x < (CT)0 ? 1 : 0));
    case OP_trunc: return trunc(x);
    case OP_reciprocal: return (CT)1 / x;
    case OP_sqrt: return sqrt(x);
    case OP_logical_not: return nz(x) ? (CT)0 : (CT)1;
    case OP_isinf: return isinf(x) ? (CT)1 : (CT)0;
    case OP_isnan: return isnan(x) ? (CT)1 : (CT)0;
    case OP_clamp: case OP_hardtanh: case OP_clamp_tensor: return fmin_nan(fmax_nan(x, y), z);
    case OP_add: return x + y;
    case OP_sub: return x - y;
    case OP_mul: return x * y;
    case OP_div:
      if (aux == 1u) return trunc(x / y);
      if (aux == 2u) return div_floor(x, y);
      return x / y;
    case OP_fmod: return fmod(x, y);
    case OP_remainder: {
      if (y == (CT)0 || isinf(x) || isnan(x) || isnan(y)) return (CT)NAN;
      CT m = fmod(x, y);
      if (m != (CT)0 && ((y < (CT)0) != (m < (CT)0))) m += y;
      return m;
    }
    case OP_maximum: return isnan(x) ? x : (isnan(y) ? y : (x > y ? x : y));
    case OP_minimum: return isnan(x) ? x : (isnan(y) ? y : (x < y ? x : y));
    case OP_logical_and: return (nz(x) && nz(y)) ? (CT)1 : (CT)0;
    case OP_logical_or: return (nz(x) || nz(y)) ? (CT)1 : (CT)0;
    case OP_logical_xor: return (nz(x) != nz(y)) ? (CT)1 : (CT)0;
    case OP_eq: return x == y ? (CT)1 : (CT)0;
    case OP_ne: return x != y ? (CT)1 : (CT)0;
    case OP_lt: return x < y ? (CT)1 : (CT)0;
    case OP_le: return x <= y ? (CT)1 : (CT)0;
    case OP_gt: return x > y ? (CT)1 : (CT)0;
    case OP_ge: return x >= y ? (CT)1 : (CT)0;
    case OP_where: return nz(x) ? y : z;
    case BP_GPU_EW_LEAKY: return x > (CT)0 ? x : x * y;
    case BP_GPU_EW_LERP: return fabs(z) < (CT)0.5 ? x + z * (y - x) : y - (y - x) * ((CT)1 - z);
    /* Transcendental functions in MT (double where the device has it),
     * rounded once. */
    case OP_exp: return (CT)exp((MT)x);
    case OP_expm1: return (CT)expm1((MT)x);
    case OP_log: return (CT)log((MT)x);
    case OP_log2: return (CT)log2((MT)x);
    case OP_log10: return (CT)log10((MT)x);
    case OP_log1p: return (CT)log1p((MT)x);
    case OP_sigmoid: return (CT)((MT)1 / ((MT)1 + exp(-(MT)x)));
    case OP_silu: return (CT)((MT)x / ((MT)1 + exp(-(MT)x)));
    case OP_sinh: return (CT)sinh((MT)x);
    case OP_cosh: return (CT)cosh((MT)x);
    case OP_tanh: return (CT)tanh((MT)x);
    case OP_rsqrt: return (CT)rsqrt((MT)x);
    case OP_erf: return (CT)erf((MT)x);
    case OP_asinh: return (CT)asinh((MT)x);
    case OP_acosh: return (CT)acosh((MT)x);
    case OP_atanh: return (CT)atanh((MT)x);
    case OP_sin: return (CT)sin((MT)x);
    case OP_cos: return (CT)cos((MT)x);
    case OP_tan: return (CT)tan((MT)x);
    case OP_asin: return (CT)asin((MT)x);
    case OP_acos: return (CT)acos((MT)x);
    case OP_atan: return (CT)atan((MT)x);
    case OP_atan2: return (CT)atan2((MT)x, (MT)y);
    case OP_pow: return pow_f(x, y);
    case OP_gelu: {
      MT d = (MT)x;
      if (aux == 1u) {
        MT inner = (MT)0.79788456080286535588 * (d + (MT)0.044715 * d * d * d);
        return (CT)((MT)0.5 * d * ((MT)1 + tanh(inner)));
      }
      return (CT)((MT)0.5 * d * ((MT)1 + erf(d * (MT)0.70710678118654752440)));
    }
    case OP_hardsigmoid: return fmin_nan(fmax_nan(x + (CT)3, (CT)0), (CT)6) / (CT)6;
    case OP_hardswish: return x * fmin_nan(fmax_nan(x + (CT)3, (CT)0), (CT)6) / (CT)6;
    case OP_mish: {
      MT d = (MT)x;
      MT sp = d > (MT)20 ? d : log1p(exp(d));
      return (CT)(d * tanh(sp));
    }
    case BP_GPU_EW_ELU: {
      MT d = (MT)x;
      if (d > (MT)0) return (CT)(d * (MT)y);
      return (CT)(expm1(d * (MT)z) * (MT)konst(A, aux) * (MT)y);
    }
    case BP_GPU_EW_SOFTPLUS: {
      MT d = (MT)x * (MT)y;
      if (d > (MT)z) return x;
      return (CT)(log1p(exp(d)) / (MT)y);
    }
  }
  return (CT)NAN;
}

#else /* integer registers (int64, wrapped to the compute dtype) */

BP_INLINE CT ct_load(BP_GLOBAL bp_u8* base, bp_i64 off, bp_u32 dt) { return bp_load_i(base, off, 0, dt); }
BP_INLINE void ct_store(BP_GLOBAL bp_u8* base, bp_i64 off, bp_u32 dt, CT v) { bp_store_i(base, off, 0, dt, v); }
BP_INLINE CT konst(BP_GLOBAL const bp_gpu_ew_args_t* a, bp_u32 j) { return a->consts[j]; }

BP_INLINE CT wrapc(CT v, bp_u32 cdt) {
  switch (cdt) {
    case DT_U8: return v & 255;
    case DT_I8: return (CT)(bp_i8)v;
    case DT_I16: return (CT)(bp_i16)v;
    case DT_BOOL: return v != 0 ? 1 : 0;
    case DT_I32: return (CT)(bp_i32)v;
  }
  return v;
}
BP_INLINE CT round_through(CT v, bp_u32 dt) {
  switch (dt) {
    case DT_BOOL: return v != 0 ? 1 : 0;
    case DT_I8: return (CT)(bp_i8)v;
    case DT_U8: return (CT)(bp_u8)v;
    case DT_I16: return (CT)(bp_i16)v;
    case DT_I32: return (CT)(bp_i32)v;
  }
  return v;
}
BP_INLINE int nz(CT v) { return v != 0; }
/* Division by zero gives 0 (PyTorch raises; the value is unspecified). */
BP_INLINE CT idiv_trunc(CT a, CT b) {
  if (b == 0) return 0;
  if (b == -1) return (CT)(0ul - (bp_u64)a);
  return a / b;
}
BP_INLINE CT idiv_floor(CT a, CT b) {
  if (b == 0) return 0;
  if (b == -1) return (CT)(0ul - (bp_u64)a);
  CT q = a / b;
  if (a - q * b != 0 && ((a < 0) != (b < 0))) q -= 1;
  return q;
}
BP_INLINE CT ipow(CT base, CT e) {
  if (e < 0) return base == 1 ? 1 : (base == -1 ? ((e & 1) ? -1 : 1) : 0);
  bp_u64 r = 1, b = (bp_u64)base;
  for (int k = 0; k < 64 && e != 0; k++) {
    if (e & 1) r *= b;
    b *= b;
    e >>= 1;
  }
  return (CT)r;
}

BP_INLINE CT apply(bp_u32 op, CT x, CT y, CT z, bp_u32 aux, BP_GLOBAL const bp_gpu_ew_args_t* A) {
  switch (op) {
    case OP_abs: return x < 0 ? (CT)(0ul - (bp_u64)x) : x;
    case OP_ceil: case OP_floor: case OP_round: case OP_trunc: return x;
    case OP_neg: return (CT)(0ul - (bp_u64)x);
    case OP_relu: return x < 0 ? 0 : x;
    case OP_sign: return (x > 0 ? 1 : 0) - (x < 0 ? 1 : 0);
    case OP_bitwise_not: return A->cdt == DT_BOOL ? (x != 0 ? 0 : 1) : ~x;
    case BP_GPU_EW_BNOT: return x != 0 ? 0 : 1;
    case OP_logical_not: return x == 0 ? 1 : 0;
    case OP_isinf: case OP_isnan: return 0;
    case OP_clamp: case OP_hardtanh: case OP_clamp_tensor: return min(max(x, y), z);
    case OP_add: return (CT)((bp_u64)x + (bp_u64)y);
    case OP_sub: return (CT)((bp_u64)x - (bp_u64)y);
    case OP_mul: return (CT)((bp_u64)x * (bp_u64)y);
    case OP_div: return aux == 2u ? idiv_floor(x, y) : idiv_trunc(x, y);
    case OP_fmod: return (y == 0 || y == -1) ? 0 : x - y * (x / y);
    case OP_remainder: {
      if (y == 0 || y == -1) return 0;
      CT r = x - y * (x / y);
      if (r != 0 && ((r < 0) != (y < 0))) r += y;
      return r;
    }
    case OP_pow: return ipow(x, y);
    case OP_maximum: return max(x, y);
    case OP_minimum: return min(x, y);
    case OP_bitwise_and: return x & y;
    case OP_bitwise_or: return x | y;
    case OP_bitwise_xor: return x ^ y;
    case OP_logical_and: return (nz(x) && nz(y)) ? 1 : 0;
    case OP_logical_or: return (nz(x) || nz(y)) ? 1 : 0;
    case OP_logical_xor: return (nz(x) != nz(y)) ? 1 : 0;
    case OP_eq: return x == y ? 1 : 0;
    case OP_ne: return x != y ? 1 : 0;
    case OP_lt: return x < y ? 1 : 0;
    case OP_le: return x <= y ? 1 : 0;
    case OP_gt: return x > y ? 1 : 0;
    case OP_ge: return x >= y ? 1 : 0;
    case OP_where: return nz(x) ? y : z;
    case BP_GPU_EW_LEAKY: return x > 0 ? x : x * y;
  }
  return 0;
}
#endif

/* Generated kernels (gpu_ew_gen.c) call the helpers above and define
 * BP_EW_GENERATED to leave the interpreter out. */
#ifndef BP_EW_GENERATED
BP_KERNEL void EW_NAME(BP_GLOBAL bp_u8* o0, BP_GLOBAL bp_u8* o1, BP_GLOBAL bp_u8* o2,
                       BP_GLOBAL bp_u8* o3, BP_GLOBAL bp_u8* o4, BP_GLOBAL bp_u8* o5,
                       BP_GLOBAL bp_u8* o6, BP_GLOBAL bp_u8* o7,
                       BP_GLOBAL const bp_gpu_ew_args_t* A) {
  BP_GLOBAL bp_u8* ops[BP_GPU_EW_MAX_OPERANDS] = {o0, o1, o2, o3, o4, o5, o6, o7};
  CT r[BP_GPU_EW_MAX_REGS];
  bp_i64 off[BP_GPU_EW_MAX_OPERANDS];
  const bp_u32 nin = A->nin, nops = A->nin + A->nout, ninstr = A->ninstr, cdt = A->cdt;
  const bp_i64 numel = A->numel;
  for (bp_u32 k = 0; k < BP_GPU_EW_MAX_REGS; k++) r[k] = (CT)0;
  for (bp_i64 i = BP_GLOBAL_ID(0); i < numel; i += BP_GLOBAL_SIZE(0)) {
    /* Byte offsets of element i in every operand. */
    if (A->contiguous) {
      for (bp_u32 k = 0; k < nops; k++) off[k] = A->byte_offset[k] + i * dt_size(A->dtypes[k]);
    } else {
      for (bp_u32 k = 0; k < nops; k++) off[k] = 0;
      bp_i64 rem = i;
      for (int d = (int)A->rank - 1; d >= 0; d--) {
        bp_i64 c = rem % A->sizes[d];
        rem /= A->sizes[d];
        for (bp_u32 k = 0; k < nops; k++) off[k] += c * A->strides[k][d];
      }
      for (bp_u32 k = 0; k < nops; k++) off[k] = A->byte_offset[k] + off[k] * dt_size(A->dtypes[k]);
    }
    for (bp_u32 j = 0; j < ninstr; j++) {
      const bp_u32 opc = A->instrs[j][0], args = A->instrs[j][1], aux = A->instrs[j][2];
      const bp_u32 dst = args & 255u, a = (args >> 8) & 255u, b = (args >> 16) & 255u, c = args >> 24;
      switch (opc) {
        case OPC_LOAD_INPUT: r[dst] = ct_load(ops[a], off[a], A->dtypes[a]); break;
        case OPC_LOAD_CONST: r[dst] = konst(A, a); break;
        case OPC_STORE: ct_store(ops[nin + a], off[nin + a], A->dtypes[nin + a], r[b]); break;
        case OPC_CAST: r[dst] = round_through(r[a], aux); break;
        case BP_GPU_EW_INDEX: r[dst] = (CT)i; break;
        default: r[dst] = wrapc(apply(opc, r[a], r[b], r[c], aux, A), cdt); break;
      }
    }
  }
}
#endif /* BP_EW_GENERATED */
