#version 460
// backplane Vulkan plugin: quantize and dequantize (docs/semantics.md,
// "Quantization") for integer codes (i8, u8, i4, u4) and fp4 e2m1; 4-bit
// codes two per byte, element 2j in the low nibble. Dense operands. One
// invocation per output byte (quantize of 4-bit codes: two elements) or
// per element. x / scale is computed in f32.
//
// Metadata: 0-1 x (quantize) / codes (dequantize), 2-3 scale, 4-5 zero
// point, 6-7 out; 8 numel (logical), 9 last dim, 10 mode (0 tensor,
// 1 channel, 2 block), 11 axis is last, 12 sizes[axis], 13 product of the
// dims between axis and last, 14 block size, 15 blocks along axis,
// 16 qdtype, 17 unused, 18 float dtype (x or out), 19 scale dtype,
// 20 zero-point dtype (0: none), 21 direction (0 quantize, 1 dequantize).
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"
layout(local_size_x = 256) in;

#define Q_I8 5u
#define Q_U8 6u
#define Q_E2M1 23u
#define Q_I4 24u
#define Q_U4 25u

uint scale_index(uint i) {
  uint last = M(9u), mode = M(10u);
  if (mode == 0u) return 0u;
  uint r = i / last, j = i % last, bs = M(14u), nb = M(15u);
  if (M(11u) != 0u) return mode == 1u ? j : r * nb + j / bs;
  uint inner = M(13u), nax = M(12u);
  uint a = (r / inner) % nax;
  if (mode == 1u) return a;
  uint o = r / (inner * nax);
  return (o * nb + a / bs) * inner * last + (r % inner) * last + j;
}

float e2m1_value(uint c) {
  const float mag[8] = float[8](0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0);
  return (c & 8u) != 0u ? -mag[c & 7u] : mag[c & 7u];
}

// Nearest e2m1 code, ties to even, saturating; NaN gives +0.
uint e2m1_code(float v) {
  if (isnan(v)) return 0u;
  float a = min(abs(v), 6.0);
  uint best = 0u;
  float bd = a;
  for (uint c = 1u; c < 8u; c++) {
    float d = abs(e2m1_value(c) - a);
    if (d < bd || (d == bd && (c & 1u) == 0u)) { best = c; bd = d; }
  }
  return (v < 0.0 && best != 0u) ? (best | 8u) : (v < 0.0 ? 8u : best);
}

float zero_point(uint s) {
  uint zt = M(20u);
  return zt == 0u ? 0.0 : float(load_i32(M64(4u), int64_t(s), zt));
}

uint encode(uint q, float t, float zp) {
  if (q == Q_E2M1) return e2m1_code(t);
  int lo = q == Q_I8 ? -128 : (q == Q_I4 ? -8 : 0);
  int hi = q == Q_I8 ? 127 : (q == Q_U8 ? 255 : (q == Q_I4 ? 7 : 15));
  float r = isnan(t) ? zp : roundEven(t) + zp;
  int c = int(clamp(r, float(lo), float(hi)));
  return uint(c) & (q == Q_I8 || q == Q_U8 ? 255u : 15u);
}

float decode(uint q, uint c) {
  if (q == Q_I8) return float(int(c << 24) >> 24);
  if (q == Q_I4) return float(int(c << 28) >> 28);
  if (q == Q_E2M1) return e2m1_value(c);
  return float(c);
}

uint quantize_one(uint q, uint i) {
  uint s = scale_index(i);
  float t = load_f32(M64(0u), int64_t(i), M(18u)) / load_f32(M64(2u), int64_t(s), M(19u));
  return encode(q, t, q == Q_E2M1 ? 0.0 : zero_point(s));
}

void main() {
  uint numel = M(8u), q = M(16u);
  bool four = q == Q_I4 || q == Q_U4 || q == Q_E2M1;
  uint stride_n = gl_NumWorkGroups.x * 256u;
  if (M(21u) == 0u) {
    uint items = four ? numel / 2u : numel;
    for (uint p = gl_GlobalInvocationID.x; p < items; p += stride_n) {
      uint code = four ? (quantize_one(q, 2u * p) | (quantize_one(q, 2u * p + 1u) << 4u))
                       : quantize_one(q, p);
      RU8(M64(6u) + uint64_t(p)).v = uint8_t(code);
    }
  } else {
    for (uint i = gl_GlobalInvocationID.x; i < numel; i += stride_n) {
      uint b = uint(RU8(M64(0u) + uint64_t(four ? i / 2u : i)).v);
      uint c = four ? ((b >> (4u * (i & 1u))) & 15u) : b;
      uint s = scale_index(i);
      float v = (decode(q, c) - zero_point(s)) * load_f32(M64(2u), int64_t(s), M(19u));
      store_f32(M64(6u), int64_t(i), M(18u), v);
    }
  }
}
