#version 460
// backplane Vulkan plugin: a row's layer result quantized to i8 or fp8
// codes with a scale per group of the row (docs/semantics.md, "Fused
// quantization" and "Group quantization"): rms_norm_quant,
// add_rms_norm_quant, swiglu_quant (one group: the row; a static scale, or
// a dynamic one clamped to scale_ub), per_token_group_quant,
// rms_norm_group_quant, swiglu_group_quant (groups of G; amax floored at
// eps, UE8M0 scales, row- or column-major scale layout).
//
// One workgroup of 64 lanes per row of dense operands. The layer's result
// y is computed in double and never stored: each pass recomputes it from
// the input (add: z = input + residual rounded to the input dtype, the
// value residual_out stores). Groups of at least 64 elements are reduced by
// the whole workgroup; smaller groups are owned by one lane each. Codes are
// those of y / scale (in double), rounded to nearest even.
//
// Metadata: 0-1 input, 2-3 residual, 4-5 weight, 6-7 codes, 8-9
// residual_out, 10-11 scales (f32), 12-13 static scale (f32); 14 rows,
// 15 input row length n, 16 output row length m, 17 group size G, 18 flags
// (1 weight, 2 residual add, 4 column-major scales, 8 UE8M0 scales,
// 16 saturate, 32 static scale), 19 weight dtype; 20-21 norm eps, 22-23
// amax floor, 24-25 scale_ub (0: none), 26-27 qmax (all double); 28 groups
// per row (1 for an empty row: its scale is that of amax 0).
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"
layout(local_size_x = 64) in;
layout(constant_id = 0) const uint SC_LAYER = 0; // 0 identity, 1 rms_norm, 2 silu(gate) * up
layout(constant_id = 1) const uint SC_IN_DT = 1;
layout(constant_id = 2) const uint SC_Q = 5;     // i8, float8_e4m3fn or float8_e5m2

#include "wg_reduce.glsl"

#define Q_I8 5u
#define Q_E5M2 13u

// z: element j of the row at `base` (elements), residual added when asked.
double z_of(int64_t base, uint j) {
  double x = load_f64(M64(0u), base + int64_t(j), SC_IN_DT);
  if ((M(18u) & 2u) == 0u) return x;
  double r = load_f64(M64(2u), base + int64_t(j), SC_IN_DT);
  return f64_of(bits_of_f64(x + r, SC_IN_DT), SC_IN_DT); // rounded as stored
}

// y: element j of the layer's result (rstd: the row's 1 / rms).
double y_of(int64_t base, uint j, double rstd) {
  if (SC_LAYER == 2u) {
    double g = z_of(base, j);
    return g / (1.0lf + exp_d(-g)) * z_of(base, j + M(16u));
  }
  double z = z_of(base, j);
  if (SC_LAYER == 0u) return z;
  double y = z * rstd;
  if ((M(18u) & 1u) != 0u) y *= load_f64(M64(4u), int64_t(j), M(19u));
  return y;
}

// NaN-winning max of a and |v|.
double amax_step(double a, double v) {
  double m = abs(v);
  return (isnan(a) || (!isnan(m) && m <= a)) ? a : m;
}

// 2^k for k in [-1022, 1023].
double pow2_d(int k) { return packDouble2x32(uvec2(0u, uint(k + 1023) << 20)); }

// The scale of a group whose amax is `amax` (NaN when the group holds NaN).
float group_scale(double amax) {
  if ((M(18u) & 32u) != 0u) return uintBitsToFloat(RI32(M64(12u)).v);
  if (isnan(amax)) return uintBitsToFloat(0x7FC00000u);
  double a = max(amax, MF64(22u)), ub = MF64(24u);
  if (ub > 0.0lf && a > ub) a = ub;
  float s = float(a / MF64(26u));
  if ((M(18u) & 8u) != 0u && s > 0.0 && !isinf(s)) { // UE8M0: the power of two at or above
    uvec2 w = unpackDouble2x32(double(s)); // a normal double even for subnormal s
    int e = int(w.y >> 20) - 1023;
    s = float(pow2_d(w.x != 0u || (w.y & 0xFFFFFu) != 0u ? e + 1 : e));
  }
  return s;
}

// fp8 code of t (e4m3fn: bias 7, 3 mantissa bits, max 448, overflow NaN;
// e5m2: bias 15, 2 bits, max 57344, overflow inf), ties to even;
// `sat` clamps to +-max first.
uint fp8_code(double t, bool sat) {
  bool e5 = SC_Q == Q_E5M2;
  uint mb = e5 ? 2u : 3u, maxcode = e5 ? 0x7Bu : 0x7Eu, over = e5 ? 0x7Cu : 0x7Fu;
  int bias = e5 ? 15 : 7;
  double mx = e5 ? 57344.0lf : 448.0lf;
  if (isnan(t)) return 0x7Fu;
  uint sign = (unpackDouble2x32(t).y >> 31) << 7;
  double a = abs(t);
  if (sat) a = min(a, mx);
  if (a >= 2.0lf * mx) return over | sign;
  uint code;
  if (a < pow2_d(1 - bias)) { // subnormal steps of 2^(1 - bias - mb)
    code = uint(roundEven(a * pow2_d(bias - 1 + int(mb))));
  } else {
    uvec2 w = unpackDouble2x32(a);
    int e = int(w.y >> 20) - 1023;
    double f = packDouble2x32(uvec2(w.x, (w.y & 0xFFFFFu) | 0x3FF00000u)); // [1, 2)
    uint q = uint(roundEven((f - 1.0lf) * double(1u << mb)));
    if (q == (1u << mb)) { e++; q = 0u; }
    code = (uint(e + bias) << mb) | q;
  }
  return (code > maxcode ? over : code) | sign;
}

uint code_of(double y, float s, bool sat) {
  if (s == 0.0) return 0u;
  double t = y / double(s);
  if (SC_Q != Q_I8) return fp8_code(t, sat);
  if (isnan(t)) return 0u;
  return uint(int(clamp(roundEven(t), -128.0lf, 127.0lf))) & 255u;
}

// Scale of group g of the row into the scales, row- or column-major.
void store_scale(uint row, uint g, float s) {
  uint rows = M(14u), groups = M(28u);
  uint i = (M(18u) & 4u) != 0u ? g * rows + row : row * groups + g;
  RF32(M64(10u) + uint64_t(i) * 4ul).v = s;
}

void main() {
  uint rows = M(14u), n = M(15u), m = M(16u), G = M(17u), flags = M(18u);
  uint lane = gl_LocalInvocationID.x;
  bool sat = (flags & 16u) != 0u;
  for (uint row = gl_WorkGroupID.x; row < rows; row += gl_NumWorkGroups.x) {
    int64_t base = int64_t(row) * int64_t(n);
    uint64_t codes = M64(6u) + uint64_t(row) * uint64_t(m);
    if ((flags & 2u) != 0u)
      for (uint j = lane; j < n; j += 64u) store_f64(M64(8u), base + int64_t(j), SC_IN_DT, z_of(base, j));
    double rstd = 0.0lf;
    if (SC_LAYER == 1u) {
      double q = 0.0lf;
      for (uint j = lane; j < n; j += 64u) {
        double z = z_of(base, j);
        q += z * z;
      }
      rstd = 1.0lf / sqrt(reduce_sum(q) / double(n) + MF64(20u));
    }
    if (m == 0u) {
      if (lane == 0u) store_scale(row, 0u, group_scale(0.0lf));
    } else if (G >= 64u) {
      for (uint g0 = 0u; g0 < m; g0 += G) {
        double a = 0.0lf;
        for (uint j = g0 + lane; j < g0 + G; j += 64u) a = amax_step(a, y_of(base, j, rstd));
        float s = group_scale(reduce_max(a));
        if (lane == 0u) store_scale(row, g0 / G, s);
        for (uint j = g0 + lane; j < g0 + G; j += 64u)
          RU8(codes + uint64_t(j)).v = uint8_t(code_of(y_of(base, j, rstd), s, sat));
      }
    } else {
      for (uint g0 = lane * G; g0 < m; g0 += 64u * G) {
        double a = 0.0lf;
        for (uint j = g0; j < g0 + G; j++) a = amax_step(a, y_of(base, j, rstd));
        float s = group_scale(a);
        store_scale(row, g0 / G, s);
        for (uint j = g0; j < g0 + G; j++) RU8(codes + uint64_t(j)).v = uint8_t(code_of(y_of(base, j, rstd), s, sat));
      }
    }
    barrier();
  }
}
