#version 460
// backplane Vulkan plugin: the generic elementwise-program kernel.
//
// One invocation per output element runs a register bytecode
// (bp_ew_program_t): loads of broadcast inputs, constants, elementwise ops
// by op id, casts and stores. Built once per register type (CT_F32, CT_F64,
// CT_I32, CT_I64 defines). Programs of up to 6 instructions, the operand
// dtypes, the compute dtype and the layout arrive as specialization
// constants, so single ops compile to straight-line code; longer programs
// are interpreted from the metadata.
//
// Metadata words: 0 ninstr, 1 nin, 2 nout, 3 nconst, 4 rank, 5 numel,
// 8..15 sizes, 16 + 20*k operand k (inputs then outputs): address (2),
// dtype, pad, strides as int64 (16); 176 + 4*i instruction i: opcode,
// dst|a<<8|b<<16|c<<24, aux, pad; 304 + 2*j constant j (raw 64 bits of CT's
// 64-bit form: double for floating CT, int64 for integer CT).
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"
#include "ops_ids.glsl"

#ifdef EW_VEC
// The contiguous variant: every operand dense with the same shape, bound as
// a storage buffer through push descriptors (binding k = operand k), each
// invocation runs the program on a chunk of EW_VE consecutive elements
// loaded and stored with 64-bit vector accesses. CPU implementations
// vectorise these across invocations; per-element address arithmetic
// would become gathers.
#define EW_VE 8
#define EW_WG 64
layout(local_size_x = EW_WG) in;
#else
layout(local_size_x = 256) in;
#endif

layout(constant_id = 0) const uint SC_NINSTR = 0;
layout(constant_id = 1) const uint SC_CONTIG = 0;
layout(constant_id = 2) const uint SC_CDT = 1;
layout(constant_id = 3) const uint SC_RANK = 0;
layout(constant_id = 4) const uint SC_DT0 = 0;
layout(constant_id = 5) const uint SC_DT1 = 0;
layout(constant_id = 6) const uint SC_DT2 = 0;
layout(constant_id = 7) const uint SC_DT3 = 0;
layout(constant_id = 8) const uint SC_DT4 = 0;
layout(constant_id = 9) const uint SC_DT5 = 0;
layout(constant_id = 10) const uint SC_DT6 = 0;
layout(constant_id = 11) const uint SC_DT7 = 0;
layout(constant_id = 12) const uint SC_OP0 = 0;
layout(constant_id = 13) const uint SC_AR0 = 0;
layout(constant_id = 14) const uint SC_AX0 = 0;
layout(constant_id = 16) const uint SC_OP1 = 0;
layout(constant_id = 17) const uint SC_AR1 = 0;
layout(constant_id = 18) const uint SC_AX1 = 0;
layout(constant_id = 20) const uint SC_OP2 = 0;
layout(constant_id = 21) const uint SC_AR2 = 0;
layout(constant_id = 22) const uint SC_AX2 = 0;
layout(constant_id = 24) const uint SC_OP3 = 0;
layout(constant_id = 25) const uint SC_AR3 = 0;
layout(constant_id = 26) const uint SC_AX3 = 0;
layout(constant_id = 28) const uint SC_OP4 = 0;
layout(constant_id = 29) const uint SC_AR4 = 0;
layout(constant_id = 30) const uint SC_AX4 = 0;
layout(constant_id = 32) const uint SC_OP5 = 0;
layout(constant_id = 33) const uint SC_AR5 = 0;
layout(constant_id = 34) const uint SC_AX5 = 0;

#define MAX_OPS 8
#define MAX_REGS 16
#define OPC_LOAD_INPUT 0x1000u
#define OPC_LOAD_CONST 0x1001u
#define OPC_STORE 0x1002u
#define OPC_CAST 0x1003u
#define OPC_INDEX 0x2000u   /* r[dst] = linear element index */
#define OPC_ELU 0x2001u     /* r = x > 0 ? x*b : expm1(x*c)*const[aux]*b */
#define OPC_SOFTPLUS 0x2002u /* beta b, threshold c */
#define OPC_LEAKY 0x2003u   /* slope b */
#define OPC_BNOT 0x2004u    /* logical not on a bool register (bitwise_not of bool) */
#define OPC_LERP 0x2005u    /* x + z*(y-x), two-sided */

#if defined(CT_F32)
#define CT float
#define IS_FLOAT 1
#define CT_LOAD load_f32
#define CT_OF f32_of
#define CT_BITS bits_of_f32
#define CT_STORE store_f32
#elif defined(CT_F64)
#define CT double
#define IS_FLOAT 1
#define CT_LOAD load_f64
#define CT_OF f64_of
#define CT_BITS bits_of_f64
#define CT_STORE store_f64
#elif defined(CT_I32)
#define CT int
#define CT_LOAD load_i32
#define CT_OF i32_of
#define CT_BITS bits_of_i32
#define CT_STORE store_i32
#else
#define CT int64_t
#define CT_LOAD load_i64
#define CT_OF i64_of
#define CT_BITS bits_of_i64
#define CT_STORE store_i64
#endif

uint sc_dt(uint k) {
  switch (k) {
    case 0: return SC_DT0; case 1: return SC_DT1; case 2: return SC_DT2; case 3: return SC_DT3;
    case 4: return SC_DT4; case 5: return SC_DT5; case 6: return SC_DT6; default: return SC_DT7;
  }
}
CT konst(uint j) {
#ifdef IS_FLOAT
  return CT(MF64(304u + 2u * j));
#else
  return CT(MI64(304u + 2u * j));
#endif
}

// Wraps an integer register to the compute dtype's width (PyTorch integer
// arithmetic wraps in the operands' dtype).
CT wrapc(CT v) {
#ifdef IS_FLOAT
  return v;
#else
  switch (SC_CDT) {
    case DT_U8: return v & CT(255);
    case DT_I8: return CT(int8_t(v));
    case DT_I16: return CT(int16_t(v));
    case DT_BOOL: return v != CT(0) ? CT(1) : CT(0);
    case DT_I32: return CT(int(v));
  }
  return v;
#endif
}

// Rounds a register through dtype dt (BP_EW_CAST).
CT round_through(CT v, uint dt) {
#ifdef IS_FLOAT
  switch (dt) {
    case DT_F32: return CT(float(v));
    case DT_F16: return CT(f16_to_f32(f32_to_f16(float(v))));
    case DT_BF16: return CT(uintBitsToFloat(f32_to_bf16(float(v)) << 16));
    case DT_F64: return v;
    case DT_BOOL: return (v != CT(0) || isnan(v)) ? CT(1) : CT(0);
    case DT_I8: return CT(int8_t(int64_t(v)));
    case DT_U8: return CT(uint8_t(int64_t(v)));
    case DT_I16: return CT(int16_t(int64_t(v)));
    case DT_I32: return CT(int(int64_t(v)));
    case DT_I64: return CT(int64_t(v));
  }
  return v;
#else
  switch (dt) {
    case DT_BOOL: return v != CT(0) ? CT(1) : CT(0);
    case DT_I8: return CT(int8_t(v));
    case DT_U8: return CT(uint8_t(v));
    case DT_I16: return CT(int16_t(v));
    case DT_I32: return CT(int(v));
    case DT_F32: return CT(float(v));
    case DT_F64: return CT(double(v));
  }
  return v;
#endif
}

#ifdef IS_FLOAT
bool nz(CT v) { return v != CT(0) || isnan(v); }
CT fmax_nan(CT a, CT b) { return (a < b || isnan(b)) ? b : a; } // clamp's NaN-propagating bound
CT fmin_nan(CT a, CT b) { return (a > b || isnan(b)) ? b : a; }
#ifdef CT_F32
bool signBit(CT v) { return (floatBitsToUint(v) >> 31) != 0u; }
#else
bool signBit(CT v) { return (unpackDouble2x32(v).y >> 31) != 0u; }
#endif
// C fmod for finite x and nonzero y, exact: subtracts y scaled to x's
// binade until below y (each step exact). Subnormal f32 results are built
// from bits so that flush-to-zero arithmetic does not lose them.
CT fmod_exact(CT x, CT y) {
  double ax = abs(double(x)), ay = abs(double(y));
  if (isinf(ay)) return x;
  int ey;
  frexp(ay, ey);
  for (int i = 0; i < 2200 && ax >= ay; i++) {
    int ex;
    frexp(ax, ex);
    double t = ldexp(ay, ex - ey);
    if (t > ax || isinf(t)) t = ldexp(ay, ex - ey - 1);
    ax -= t;
  }
#ifdef CT_F32
  CT mf = ax < 1.1754943508222875e-38lf ? uintBitsToFloat(uint(ax * 7.1362384635297994e44lf)) : CT(ax); // * 2^149
#else
  CT mf = CT(ax);
#endif
  return signBit(x) ? -mf : mf;
}

// Floating math evaluated in double (accurate exp/log/trig from
// common.glsl) and rounded once.
double exp_f(CT x) { return exp_d(double(x)); }
CT sinh_f(CT x) {
  double d = double(x);
  if (abs(d) > 20.0lf) { double e = exp_d(abs(d)) * 0.5lf; return CT(d < 0.0lf ? -e : e); }
  double u = expm1_d(abs(d));
  double r = 0.5lf * (u + u / (u + 1.0lf));
  return CT(d < 0.0lf ? -r : r);
}
CT tanh_f(CT x) {
  double d = double(x);
  if (abs(d) > 20.0lf) return CT(sign(d));
  double u = expm1_d(2.0lf * abs(d));
  double r = u / (u + 2.0lf);
  return CT(d < 0.0lf ? -r : r);
}
double erf_d(double x) {
  double a = abs(x);
  double r;
  if (a < 2.0lf) {
    // Maclaurin series, 2/sqrt(pi) * sum (-1)^n x^(2n+1) / (n! (2n+1))
    double x2 = a * a, term = a, sum = a;
    for (int n = 1; n < 48; n++) {
      term *= -x2 / double(n);
      sum += term / double(2 * n + 1);
    }
    r = sum * 1.12837916709551257390lf;
  } else if (a > 6.0lf) {
    r = 1.0lf;
  } else {
    // erfc by its continued fraction (Lentz)
    double f = a, C = a, D = 0.0lf;
    for (int k = 1; k < 80; k++) {
      double an = double(k) * 0.5lf;
      D = a + an * D;
      C = a + an / C;
      D = 1.0lf / D;
      f *= C * D;
    }
    r = 1.0lf - exp_d(-a * a) / (f * 1.77245385090551602730lf);
  }
  return x < 0.0lf ? -r : r;
}

CT apply(uint op, CT x, CT y, CT z, uint aux) {
  switch (op) {
    case OP_abs: return abs(x);
    case OP_ceil: return ceil(x);
    case OP_floor: return floor(x);
    case OP_neg: return -x;
    case OP_relu: return x < CT(0) ? CT(0) : x;
    case OP_round: return roundEven(x);
    case OP_sign: return CT((x > CT(0) ? 1 : 0) - (x < CT(0) ? 1 : 0));
    case OP_trunc: return trunc(x);
    case OP_reciprocal: return CT(1) / x;
    case OP_sqrt: return sqrt(x);
    case OP_logical_not: return nz(x) ? CT(0) : CT(1);
    case OP_isinf: return isinf(x) ? CT(1) : CT(0);
    case OP_isnan: return isnan(x) ? CT(1) : CT(0);
    case OP_clamp: case OP_hardtanh: return fmin_nan(fmax_nan(x, y), z);
    case OP_clamp_tensor: return fmin_nan(fmax_nan(x, y), z);
    case OP_add: return x + y;
    case OP_sub: return x - y;
    case OP_mul: return x * y;
    case OP_div:
      if (aux == 1u) return trunc(x / y);
#ifndef EW_VEC // floor division and fmod stay on the generic kernel (compile time)
      if (aux == 2u) {
        if (y == CT(0)) return x / y;
        CT m = fmod_exact(x, y);
        CT dv = (x - m) / y;
        if (m != CT(0) && ((y < CT(0)) != (m < CT(0)))) dv -= CT(1);
        if (dv == CT(0)) return signBit(x / y) ? -CT(0) : CT(0);
        CT fl = floor(dv);
        if (dv - fl > CT(0.5)) fl += CT(1);
        return fl;
      }
#endif
      return x / y;
#ifndef EW_VEC
    case OP_fmod: case OP_remainder: {
      if (y == CT(0) || isinf(x) || isnan(x) || isnan(y)) return CT(0) / CT(0);
      CT mf = fmod_exact(x, y);
      if (op == OP_fmod) return mf;
      if (mf != CT(0) && ((y < CT(0)) != (mf < CT(0)))) mf += y;
      return mf;
    }
#endif
    case OP_maximum: return isnan(x) ? x : (isnan(y) ? y : (x > y ? x : y));
    case OP_minimum: return isnan(x) ? x : (isnan(y) ? y : (x < y ? x : y));
    case OP_logical_and: return (nz(x) && nz(y)) ? CT(1) : CT(0);
    case OP_logical_or: return (nz(x) || nz(y)) ? CT(1) : CT(0);
    case OP_logical_xor: return (nz(x) != nz(y)) ? CT(1) : CT(0);
    case OP_eq: return x == y ? CT(1) : CT(0);
    case OP_ne: return (x != y || isnan(x) || isnan(y)) ? CT(1) : CT(0);
    case OP_lt: return x < y ? CT(1) : CT(0);
    case OP_le: return x <= y ? CT(1) : CT(0);
    case OP_gt: return x > y ? CT(1) : CT(0);
    case OP_ge: return x >= y ? CT(1) : CT(0);
    case OP_where: return nz(x) ? y : z;
    case OPC_LEAKY: return x > CT(0) ? x : x * y;
    case OPC_LERP: return abs(z) < CT(0.5) ? x + z * (y - x) : y - (y - x) * (CT(1) - z);
#ifndef EW_VEC // math evaluated in double: the generic kernel only (compile time)
    case OP_exp: return CT(exp_f(x));
    case OP_expm1: return CT(expm1_d(double(x)));
    case OP_log: return CT(log_d(double(x)));
    case OP_log2: return CT(log_d(double(x)) * 1.44269504088896340736lf);
    case OP_log10: return CT(log_d(double(x)) * 0.43429448190325182765lf);
    case OP_log1p: return CT(log1p_d(double(x)));
    case OP_sigmoid: return CT(1.0lf / (1.0lf + exp_d(-double(x))));
    case OP_silu: return CT(double(x) / (1.0lf + exp_d(-double(x))));
    case OP_sinh: return sinh_f(x);
    case OP_cosh: { double e = exp_d(abs(double(x))); return CT(0.5lf * e + 0.5lf / e); }
    case OP_tanh: return tanh_f(x);
    case OP_rsqrt: return CT(1.0lf / sqrt(double(x)));
    case OP_erf: return CT(erf_d(double(x)));
    case OP_asinh: {
      double d = abs(double(x));
      double r = d > 1e10lf ? log_d(d) + 0.69314718055994530942lf : log1p_d(d + d * d / (1.0lf + sqrt(1.0lf + d * d)));
      return isnan(x) ? x : CT(x < CT(0) ? -r : r);
    }
    case OP_acosh: {
      double d = double(x);
      if (d < 1.0lf || isnan(d)) return CT(0) / CT(0);
      return CT(d > 1e10lf ? log_d(d) + 0.69314718055994530942lf : log1p_d((d - 1.0lf) + sqrt((d - 1.0lf) * (d + 1.0lf))));
    }
    case OP_atanh: {
      double d = double(x);
      if (abs(d) > 1.0lf || isnan(d)) return CT(0) / CT(0);
      return CT(0.5lf * log1p_d(2.0lf * d / (1.0lf - d)));
    }
    case OP_gelu:
      if (aux == 1u) {
        double d = double(x);
        double inner = 0.79788456080286535588lf * (d + 0.044715lf * d * d * d);
        double t = abs(inner) > 20.0lf ? sign(inner) : expm1_d(2.0lf * inner) / (expm1_d(2.0lf * inner) + 2.0lf);
        return CT(0.5lf * d * (1.0lf + t));
      }
      return CT(0.5lf * double(x) * (1.0lf + erf_d(double(x) * 0.70710678118654752440lf)));
    case OP_pow: {
      double b = double(x), e = double(y);
      if (e == 0.0lf || b == 1.0lf) return CT(1);
      if (isnan(b) || isnan(e)) return CT(0) / CT(0);
      bool odd_int = trunc(e) == e && abs(e) < 9007199254740992.0lf && mod(e, 2.0lf) != 0.0lf;
      if (b == 0.0lf) {
        if (e < 0.0lf) return (odd_int && signBit(x)) ? CT(-1.0 / 0.0) : CT(1.0 / 0.0);
        return (odd_int && signBit(x)) ? -CT(0) : CT(0);
      }
      if (isinf(e)) {
        double ab = abs(b);
        if (ab == 1.0lf) return CT(1);
        return ((ab > 1.0lf) == (e > 0.0lf)) ? CT(1.0 / 0.0) : CT(0);
      }
      if (isinf(b)) {
        bool neg = b < 0.0lf && odd_int;
        CT r = e > 0.0lf ? CT(1.0 / 0.0) : CT(0);
        return neg ? -r : r;
      }
      if (b < 0.0lf && trunc(e) != e) return CT(0) / CT(0);
      double r = exp_d(e * log_d(abs(b)));
      return CT((b < 0.0lf && odd_int) ? -r : r);
    }
    case OP_sin: return CT(sin_d(double(x)));
    case OP_cos: return CT(cos_d(double(x)));
    case OP_tan: return CT(sin_d(double(x)) / cos_d(double(x)));
    case OP_atan: return CT(atan_d(double(x)));
    case OP_atan2: return CT(atan2_d(double(x), double(y)));
    case OP_asin: {
      double d = double(x);
      if (abs(d) > 1.0lf || isnan(d)) return CT(0) / CT(0);
      if (abs(d) == 1.0lf) return CT(d * 1.57079632679489661923lf);
      return CT(atan_d(d / sqrt((1.0lf - d) * (1.0lf + d))));
    }
    case OP_acos: {
      double d = double(x);
      if (abs(d) > 1.0lf || isnan(d)) return CT(0) / CT(0);
      return CT(2.0lf * atan_d(sqrt((1.0lf - d) / (1.0lf + d))));
    }
    case OP_hardsigmoid: return fmin_nan(fmax_nan(x + CT(3), CT(0)), CT(6)) / CT(6);
    case OP_hardswish: return x * fmin_nan(fmax_nan(x + CT(3), CT(0)), CT(6)) / CT(6);
    case OP_mish: {
      double d = double(x);
      double sp = d > 20.0lf ? d : log1p_d(exp_d(d));
      double t = sp > 20.0lf ? 1.0lf : expm1_d(2.0lf * sp) / (expm1_d(2.0lf * sp) + 2.0lf);
      return CT(d * t);
    }
    case OPC_ELU: {
      double d = double(x);
      if (d > 0.0lf) return CT(d * double(y));
      return CT(expm1_d(d * double(z)) * double(konst(aux)) * double(y));
    }
    case OPC_SOFTPLUS: {
      double d = double(x) * double(y);
      if (d > double(z)) return x;
      return CT(log1p_d(exp_d(d)) / double(y));
    }
#endif
  }
  return CT(0) / CT(0);
}
#else
// ---- integer registers ----------------------------------------------------
bool nz(CT v) { return v != CT(0); }
CT idiv_trunc(CT a, CT b) {
  if (b == CT(0)) return CT(0);
  if (b == CT(-1)) return -a;
  return a / b;
}
CT idiv_floor(CT a, CT b) {
  if (b == CT(0)) return CT(0);
  if (b == CT(-1)) return -a;
  CT q = a / b;
  if (a - q * b != CT(0) && ((a < CT(0)) != (b < CT(0)))) q -= CT(1);
  return q;
}
CT ipow(CT base, CT e) {
  if (e < CT(0)) return base == CT(1) ? CT(1) : (base == CT(-1) ? (((e & CT(1)) != CT(0)) ? CT(-1) : CT(1)) : CT(0));
  CT r = CT(1);
  for (int k = 0; k < 64 && e != CT(0); k++) {
    if ((e & CT(1)) != CT(0)) r *= base;
    base *= base;
    e >>= CT(1);
  }
  return r;
}

CT apply(uint op, CT x, CT y, CT z, uint aux) {
  switch (op) {
    case OP_abs: return x < CT(0) ? -x : x;
    case OP_ceil: case OP_floor: case OP_round: case OP_trunc: return x;
    case OP_neg: return -x;
    case OP_relu: return x < CT(0) ? CT(0) : x;
    case OP_sign: return CT((x > CT(0) ? 1 : 0) - (x < CT(0) ? 1 : 0));
    case OP_bitwise_not: return SC_CDT == DT_BOOL ? (x != CT(0) ? CT(0) : CT(1)) : ~x;
    case OPC_BNOT: return x != CT(0) ? CT(0) : CT(1);
    case OP_logical_not: return x == CT(0) ? CT(1) : CT(0);
    case OP_isinf: case OP_isnan: return CT(0);
    case OP_clamp: case OP_hardtanh: case OP_clamp_tensor: return min(max(x, y), z);
    case OP_add: return x + y;
    case OP_sub: return x - y;
    case OP_mul: return x * y;
    case OP_div: return aux == 2u ? idiv_floor(x, y) : idiv_trunc(x, y);
    case OP_fmod: return (y == CT(0) || y == CT(-1)) ? CT(0) : x - y * (x / y);
    case OP_remainder: {
      if (y == CT(0) || y == CT(-1)) return CT(0);
      CT r = x - y * (x / y);
      if (r != CT(0) && ((r < CT(0)) != (y < CT(0)))) r += y;
      return r;
    }
    case OP_pow: return ipow(x, y);
    case OP_maximum: return max(x, y);
    case OP_minimum: return min(x, y);
    case OP_bitwise_and: return x & y;
    case OP_bitwise_or: return x | y;
    case OP_bitwise_xor: return x ^ y;
    case OP_logical_and: return (nz(x) && nz(y)) ? CT(1) : CT(0);
    case OP_logical_or: return (nz(x) || nz(y)) ? CT(1) : CT(0);
    case OP_logical_xor: return (nz(x) != nz(y)) ? CT(1) : CT(0);
    case OP_eq: return x == y ? CT(1) : CT(0);
    case OP_ne: return x != y ? CT(1) : CT(0);
    case OP_lt: return x < y ? CT(1) : CT(0);
    case OP_le: return x <= y ? CT(1) : CT(0);
    case OP_gt: return x > y ? CT(1) : CT(0);
    case OP_ge: return x >= y ? CT(1) : CT(0);
    case OP_where: return nz(x) ? y : z;
    case OPC_LEAKY: return x > CT(0) ? x : x * y;
  }
  return CT(0);
}
#endif

// Two register files: `q` for specialized programs (every index a constant
// after specialization and unrolling, so it lives in registers) and `r` for
// interpreted ones (dynamic indices).
CT r[MAX_REGS];
CT q[MAX_REGS];
int64_t off[MAX_OPS];
uint64_t g_addr[MAX_OPS];
uint g_dt[MAX_OPS];

uint op_dtype(uint k) {
  uint s = sc_dt(k);
  return s != 0u ? s : M(16u + 20u * k + 2u);
}

// Operand offsets: the element index itself for contiguous layouts.
int64_t offset_of(uint k, uint lin) { return SC_CONTIG != 0u ? int64_t(lin) : off[k]; }

#define EXEC_BODY(REG, ADDR, DT)                                                        \
  uint dst = args & 255u, a = (args >> 8) & 255u, b = (args >> 16) & 255u, c = args >> 24; \
  switch (opc) {                                                                        \
    case OPC_LOAD_INPUT: REG[dst] = CT_LOAD(ADDR(a), offset_of(a, lin), DT(a)); return;  \
    case OPC_LOAD_CONST: REG[dst] = konst(a); return;                                   \
    case OPC_STORE: CT_STORE(ADDR(nin + a), offset_of(nin + a, lin), DT(nin + a), REG[b]); return; \
    case OPC_CAST: REG[dst] = round_through(REG[a], aux); return;                       \
    case OPC_INDEX: REG[dst] = CT(lin); return;                                         \
  }                                                                                     \
  REG[dst] = wrapc(apply(opc, REG[a], REG[b], REG[c], aux));

uint64_t dyn_addr(uint k) { return g_addr[k]; }
uint dyn_dt(uint k) { return g_dt[k]; }
uint64_t spec_addr(uint k) { return M64(16u + 20u * k); }

void exec_dyn(uint opc, uint args, uint aux, uint nin, uint lin) { EXEC_BODY(r, dyn_addr, dyn_dt) }
void exec_spec(uint opc, uint args, uint aux, uint nin, uint lin) { EXEC_BODY(q, spec_addr, sc_dt) }

#ifdef EW_VEC
// ---- the contiguous chunked kernel -----------------------------------------
// Aliased views of each binding: 64-bit words (1-byte dtypes: 8 elements),
// pairs (2-byte: 8 elements), quads (4-byte: 8; 8-byte: 4), 32-bit quads
// (the stores of 2-, 4- and 8-byte dtypes) and scalar views for the tail.
// Inputs of 2 bytes and more are read as 16-byte texels of a uniform texel
// buffer (binding 8 + k) when SC_TEXEL is set: CPU implementations turn a
// texel fetch into vector loads, a storage-buffer read into a per-lane loop.
#define EW_VIEWS(k)                                                                     \
  layout(set = 0, binding = k, std430) buffer W1_##k { uint64_t v[]; } w1_##k;          \
  layout(set = 0, binding = k, std430) buffer W2_##k { u64vec2 v[]; } w2_##k;           \
  layout(set = 0, binding = k, std430) buffer W4_##k { u64vec4 v[]; } w4_##k;           \
  layout(set = 0, binding = k, std430) buffer Q4_##k { uvec4 v[]; } q4_##k;             \
  layout(set = 0, binding = k, std430) buffer S1_##k { uint8_t v[]; } s1_##k;           \
  layout(set = 0, binding = k, std430) buffer S2_##k { uint16_t v[]; } s2_##k;          \
  layout(set = 0, binding = k, std430) buffer S4_##k { uint v[]; } s4_##k;              \
  layout(set = 0, binding = 8 + k) uniform utextureBuffer t_##k;
EW_VIEWS(0) EW_VIEWS(1) EW_VIEWS(2) EW_VIEWS(3) EW_VIEWS(4) EW_VIEWS(5) EW_VIEWS(6) EW_VIEWS(7)
layout(constant_id = 38) const uint SC_TEXEL = 0;

#define EW_SWITCH8(STMT) \
  switch (k) { case 0: STMT(0) case 1: STMT(1) case 2: STMT(2) case 3: STMT(3) \
               case 4: STMT(4) case 5: STMT(5) case 6: STMT(6) default: STMT(7) }
#define LD_W1(n) return w1_##n.v[i];
#define LD_W2(n) return w2_##n.v[i];
#define LD_W4(n) return w4_##n.v[i];
#define LD_T(n) return texelFetch(t_##n, int(i));
#define LD_S(n) switch (sz) { case 1u: return uint64_t(s1_##n.v[i]); case 2u: return uint64_t(s2_##n.v[i]); \
                              case 4u: return uint64_t(s4_##n.v[i]); } return w1_##n.v[i];
#define ST_W1(n) w1_##n.v[i] = x; return;
#define ST_Q4(n) q4_##n.v[i] = x; return;
#define ST_S(n) switch (sz) { case 1u: s1_##n.v[i] = uint8_t(x & 255ul); return; \
                              case 2u: s2_##n.v[i] = uint16_t(x & 65535ul); return; \
                              case 4u: s4_##n.v[i] = uint(x & 4294967295ul); return; } w1_##n.v[i] = x; return;
uint64_t ld_w1(uint k, uint i) { EW_SWITCH8(LD_W1) }
u64vec2 ld_w2(uint k, uint i) { EW_SWITCH8(LD_W2) }
u64vec4 ld_w4(uint k, uint i) { EW_SWITCH8(LD_W4) }
uvec4 ld_t(uint k, uint i) { EW_SWITCH8(LD_T) }
uint64_t ld_s(uint k, uint i, uint sz) { EW_SWITCH8(LD_S) }
void st_w1(uint k, uint i, uint64_t x) { EW_SWITCH8(ST_W1) }
void st_q4(uint k, uint i, uvec4 x) { EW_SWITCH8(ST_Q4) }
void st_s(uint k, uint i, uint sz, uint64_t x) { EW_SWITCH8(ST_S) }

// Raw bits of the chunk's elements per operand (constant indices only, so
// they stay in registers).
uint64_t raw[MAX_OPS][EW_VE];
CT kpre[6];

uint64_t lo16(uint w) { return uint64_t(w & 65535u); }
uint64_t hi16(uint w) { return uint64_t(w >> 16); }
uint64_t w64(uint lo, uint hi) { return packUint2x32(uvec2(lo, hi)); }

void load_chunk(uint k, uint c) {
  uint sz = dt_size(sc_dt(k));
  if (SC_TEXEL != 0u && sz == 4u) {
    uvec4 a = ld_t(k, 2u * c), b = ld_t(k, 2u * c + 1u);
    raw[k][0] = a.x; raw[k][1] = a.y; raw[k][2] = a.z; raw[k][3] = a.w;
    raw[k][4] = b.x; raw[k][5] = b.y; raw[k][6] = b.z; raw[k][7] = b.w;
  } else if (SC_TEXEL != 0u && sz == 8u) {
    uvec4 a = ld_t(k, 4u * c), b = ld_t(k, 4u * c + 1u), e = ld_t(k, 4u * c + 2u), f = ld_t(k, 4u * c + 3u);
    raw[k][0] = w64(a.x, a.y); raw[k][1] = w64(a.z, a.w); raw[k][2] = w64(b.x, b.y); raw[k][3] = w64(b.z, b.w);
    raw[k][4] = w64(e.x, e.y); raw[k][5] = w64(e.z, e.w); raw[k][6] = w64(f.x, f.y); raw[k][7] = w64(f.z, f.w);
  } else if (SC_TEXEL != 0u && sz == 2u) {
    uvec4 a = ld_t(k, c);
    raw[k][0] = lo16(a.x); raw[k][1] = hi16(a.x); raw[k][2] = lo16(a.y); raw[k][3] = hi16(a.y);
    raw[k][4] = lo16(a.z); raw[k][5] = hi16(a.z); raw[k][6] = lo16(a.w); raw[k][7] = hi16(a.w);
  } else if (sz == 4u) {
    u64vec4 w = ld_w4(k, c);
    raw[k][0] = w.x & 4294967295ul; raw[k][1] = w.x >> 32;
    raw[k][2] = w.y & 4294967295ul; raw[k][3] = w.y >> 32;
    raw[k][4] = w.z & 4294967295ul; raw[k][5] = w.z >> 32;
    raw[k][6] = w.w & 4294967295ul; raw[k][7] = w.w >> 32;
  } else if (sz == 8u) {
    u64vec4 a = ld_w4(k, 2u * c), b = ld_w4(k, 2u * c + 1u);
    raw[k][0] = a.x; raw[k][1] = a.y; raw[k][2] = a.z; raw[k][3] = a.w;
    raw[k][4] = b.x; raw[k][5] = b.y; raw[k][6] = b.z; raw[k][7] = b.w;
  } else if (sz == 2u) {
    u64vec2 w = ld_w2(k, c);
    raw[k][0] = w.x & 65535ul; raw[k][1] = (w.x >> 16) & 65535ul;
    raw[k][2] = (w.x >> 32) & 65535ul; raw[k][3] = w.x >> 48;
    raw[k][4] = w.y & 65535ul; raw[k][5] = (w.y >> 16) & 65535ul;
    raw[k][6] = (w.y >> 32) & 65535ul; raw[k][7] = w.y >> 48;
  } else {
    uint64_t w = ld_w1(k, c);
    raw[k][0] = w & 255ul; raw[k][1] = (w >> 8) & 255ul; raw[k][2] = (w >> 16) & 255ul;
    raw[k][3] = (w >> 24) & 255ul; raw[k][4] = (w >> 32) & 255ul; raw[k][5] = (w >> 40) & 255ul;
    raw[k][6] = (w >> 48) & 255ul; raw[k][7] = w >> 56;
  }
}

// Stores go out as 32-bit quads: per-lane stores of 32-bit components cost
// CPU implementations less than 64-bit ones.
uint u32(uint64_t x) { return uint(x & 4294967295ul); }
uint hi32(uint64_t x) { return uint(x >> 32); }
uint p16(uint64_t a, uint64_t b) { return uint(a & 65535ul) | (uint(b & 65535ul) << 16); }

void store_chunk(uint k, uint c) {
  uint sz = dt_size(sc_dt(k));
  if (sz == 4u) {
    st_q4(k, 2u * c, uvec4(u32(raw[k][0]), u32(raw[k][1]), u32(raw[k][2]), u32(raw[k][3])));
    st_q4(k, 2u * c + 1u, uvec4(u32(raw[k][4]), u32(raw[k][5]), u32(raw[k][6]), u32(raw[k][7])));
  } else if (sz == 8u) {
    st_q4(k, 4u * c, uvec4(u32(raw[k][0]), hi32(raw[k][0]), u32(raw[k][1]), hi32(raw[k][1])));
    st_q4(k, 4u * c + 1u, uvec4(u32(raw[k][2]), hi32(raw[k][2]), u32(raw[k][3]), hi32(raw[k][3])));
    st_q4(k, 4u * c + 2u, uvec4(u32(raw[k][4]), hi32(raw[k][4]), u32(raw[k][5]), hi32(raw[k][5])));
    st_q4(k, 4u * c + 3u, uvec4(u32(raw[k][6]), hi32(raw[k][6]), u32(raw[k][7]), hi32(raw[k][7])));
  } else if (sz == 2u) {
    st_q4(k, c, uvec4(p16(raw[k][0], raw[k][1]), p16(raw[k][2], raw[k][3]), p16(raw[k][4], raw[k][5]),
                      p16(raw[k][6], raw[k][7])));
  } else {
    const uint64_t m = 255ul;
    st_w1(k, c, (raw[k][0] & m) | ((raw[k][1] & m) << 8) | ((raw[k][2] & m) << 16) | ((raw[k][3] & m) << 24) |
                ((raw[k][4] & m) << 32) | ((raw[k][5] & m) << 40) | ((raw[k][6] & m) << 48) | (raw[k][7] << 56));
  }
}

// One instruction (index ii of the specialized program) on chunk element j.
void exec_vec(uint ii, uint opc, uint args, uint aux, uint nin, uint lin, uint j) {
  uint dst = args & 255u, a = (args >> 8) & 255u, b = (args >> 16) & 255u, c = args >> 24;
  switch (opc) {
    case OPC_LOAD_INPUT: q[dst] = CT_OF(raw[a][j], sc_dt(a)); return;
    case OPC_LOAD_CONST: q[dst] = kpre[ii]; return;
    case OPC_STORE: raw[nin + a][j] = CT_BITS(q[b], sc_dt(nin + a)); return;
    case OPC_CAST: q[dst] = round_through(q[a], aux); return;
    case OPC_INDEX: q[dst] = CT(lin); return;
  }
  q[dst] = wrapc(apply(opc, q[a], q[b], q[c], aux));
}

void run_elem(uint nin, uint lin, uint j) {
  if (SC_NINSTR > 0u) exec_vec(0u, SC_OP0, SC_AR0, SC_AX0, nin, lin, j);
  if (SC_NINSTR > 1u) exec_vec(1u, SC_OP1, SC_AR1, SC_AX1, nin, lin, j);
  if (SC_NINSTR > 2u) exec_vec(2u, SC_OP2, SC_AR2, SC_AX2, nin, lin, j);
  if (SC_NINSTR > 3u) exec_vec(3u, SC_OP3, SC_AR3, SC_AX3, nin, lin, j);
  if (SC_NINSTR > 4u) exec_vec(4u, SC_OP4, SC_AR4, SC_AX4, nin, lin, j);
  if (SC_NINSTR > 5u) exec_vec(5u, SC_OP5, SC_AR5, SC_AX5, nin, lin, j);
}

void preload_const(uint ii, uint opc, uint args) {
  if (opc == OPC_LOAD_CONST) kpre[ii] = konst((args >> 8) & 255u);
}

// The operand counts arrive as specialization constants 36 and 37 (the
// launcher sets them), so the chunk loops below unroll to constants.
layout(constant_id = 36) const uint SC_NIN = 0;
layout(constant_id = 37) const uint SC_NOUT = 0;

// Written out per operand (not loops) so that every index is a constant.
#define EW_EACH_OP(F) F(0u) F(1u) F(2u) F(3u) F(4u) F(5u) F(6u) F(7u)
#define LOAD_CHUNK(k) if (k < nin) load_chunk(k, c);
#define STORE_CHUNK(k) if (k >= nin && k < nops) store_chunk(k, c);
#define LOAD_ONE(k) if (k < nin) raw[k][0] = ld_s(k, i, dt_size(sc_dt(k)));
#define STORE_ONE(k) if (k >= nin && k < nops) st_s(k, i, dt_size(sc_dt(k)), raw[k][0]);

void main() {
  uint numel = pc.n;
  uint nin = SC_NIN, nops = SC_NIN + SC_NOUT;
  uint nchunks = numel / uint(EW_VE);
  // Chunk index from a 2-d grid (x up to 65535 groups, rows of x groups in
  // y): one chunk per invocation, no loop.
  uint c = (gl_WorkGroupID.y * gl_NumWorkGroups.x + gl_WorkGroupID.x) * uint(EW_WG) + gl_LocalInvocationID.x;
  if (SC_NINSTR > 0u) preload_const(0u, SC_OP0, SC_AR0);
  if (SC_NINSTR > 1u) preload_const(1u, SC_OP1, SC_AR1);
  if (SC_NINSTR > 2u) preload_const(2u, SC_OP2, SC_AR2);
  if (SC_NINSTR > 3u) preload_const(3u, SC_OP3, SC_AR3);
  if (SC_NINSTR > 4u) preload_const(4u, SC_OP4, SC_AR4);
  if (SC_NINSTR > 5u) preload_const(5u, SC_OP5, SC_AR5);
  if (c < nchunks) {
    EW_EACH_OP(LOAD_CHUNK)
    uint lin = c * uint(EW_VE);
    run_elem(nin, lin, 0u); run_elem(nin, lin + 1u, 1u); run_elem(nin, lin + 2u, 2u); run_elem(nin, lin + 3u, 3u);
    run_elem(nin, lin + 4u, 4u); run_elem(nin, lin + 5u, 5u); run_elem(nin, lin + 6u, 6u); run_elem(nin, lin + 7u, 7u);
    EW_EACH_OP(STORE_CHUNK)
  }
  // The tail (numel % EW_VE elements), one by one, by the first invocation.
  if (c == 0u) {
    for (uint i = nchunks * uint(EW_VE); i < numel; i++) {
      EW_EACH_OP(LOAD_ONE)
      run_elem(nin, i, 0u);
      EW_EACH_OP(STORE_ONE)
    }
  }
}
#endif

#ifndef EW_VEC
void main() {
  uint numel = M(5u);
  uint nin = M(1u), nops = M(1u) + M(2u);
  uint rank = SC_RANK != 0u ? SC_RANK : M(4u);
  uint stride_n = gl_NumWorkGroups.x * 256u;
  if (SC_NINSTR == 0u) {
    for (uint k = 0u; k < nops; k++) {
      g_addr[k] = M64(16u + 20u * k);
      g_dt[k] = op_dtype(k);
    }
  }
  for (uint i = gl_GlobalInvocationID.x; i < numel; i += stride_n) {
    if (SC_CONTIG == 0u) {
      for (uint k = 0u; k < nops; k++) off[k] = 0l;
      uint rem = i;
      for (int d = int(rank) - 1; d >= 0; d--) {
        uint sz = M(8u + uint(d));
        uint idx = rem % sz;
        rem /= sz;
        for (uint k = 0u; k < nops; k++) off[k] += int64_t(idx) * MI64(16u + 20u * k + 4u + 2u * uint(d));
      }
    }
    if (SC_NINSTR != 0u) {
      // Written out (not a loop) so that every opcode is a constant.
      if (SC_NINSTR > 0u) exec_spec(SC_OP0, SC_AR0, SC_AX0, nin, i);
      if (SC_NINSTR > 1u) exec_spec(SC_OP1, SC_AR1, SC_AX1, nin, i);
      if (SC_NINSTR > 2u) exec_spec(SC_OP2, SC_AR2, SC_AX2, nin, i);
      if (SC_NINSTR > 3u) exec_spec(SC_OP3, SC_AR3, SC_AX3, nin, i);
      if (SC_NINSTR > 4u) exec_spec(SC_OP4, SC_AR4, SC_AX4, nin, i);
      if (SC_NINSTR > 5u) exec_spec(SC_OP5, SC_AR5, SC_AX5, nin, i);
    } else {
      uint ninstr = M(0u);
      for (uint k = 0u; k < ninstr; k++)
        exec_dyn(M(176u + 4u * k), M(177u + 4u * k), M(178u + 4u * k), nin, i);
    }
  }
}
#endif
