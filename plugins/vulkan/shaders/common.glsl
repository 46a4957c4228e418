// backplane Vulkan plugin: declarations shared by every shader.
//
// Operands are reached through buffer device addresses. Each dispatch gets
// a push-constant block {meta address, n, pad}; `meta` points at words the
// host wrote into the batch's upload arena (layouts in the C launchers).
#extension GL_EXT_buffer_reference : require
#extension GL_EXT_shader_explicit_arithmetic_types : require
#extension GL_EXT_control_flow_attributes : require
// texelFetch on textureBuffer (uniform texel buffers without a sampler: no
// OpTypeSampledImage of Dim Buffer, which SPIR-V 1.6 deprecates).
#extension GL_EXT_samplerless_texture_functions : require

layout(push_constant) uniform PC {
  uint64_t meta;
  uint n;
  uint pad;
} pc;

layout(buffer_reference, std430, buffer_reference_align = 4) readonly buffer MetaRef { uint w[]; };
layout(buffer_reference, std430, buffer_reference_align = 1) buffer RU8 { uint8_t v; };
layout(buffer_reference, std430, buffer_reference_align = 1) buffer RI8 { int8_t v; };
layout(buffer_reference, std430, buffer_reference_align = 2) buffer RU16 { uint16_t v; };
layout(buffer_reference, std430, buffer_reference_align = 2) buffer RI16 { int16_t v; };
layout(buffer_reference, std430, buffer_reference_align = 4) buffer RI32 { int v; };
layout(buffer_reference, std430, buffer_reference_align = 4) buffer RF32 { float v; };
layout(buffer_reference, std430, buffer_reference_align = 8) buffer RI64 { int64_t v; };
layout(buffer_reference, std430, buffer_reference_align = 8) buffer RF64 { double v; };

uint M(uint i) { return MetaRef(pc.meta).w[i]; }
uint64_t M64(uint i) { return packUint2x32(uvec2(M(i), M(i + 1u))); }
int64_t MI64(uint i) { return int64_t(M64(i)); }
double MF64(uint i) { return packDouble2x32(uvec2(M(i), M(i + 1u))); }
float MF32(uint i) { return uintBitsToFloat(M(i)); }

// dtype ids (enum bp_dtype)
#define DT_F32 1u
#define DT_F16 2u
#define DT_BF16 3u
#define DT_F64 4u
#define DT_I8 5u
#define DT_U8 6u
#define DT_I16 7u
#define DT_I32 8u
#define DT_I64 9u
#define DT_BOOL 10u

uint dt_size(uint dt) {
  switch (dt) {
    case DT_F64: case DT_I64: return 8u;
    case DT_F32: case DT_I32: return 4u;
    case DT_F16: case DT_BF16: case DT_I16: return 2u;
    default: return 1u;
  }
}

uint64_t elem_addr(uint64_t base, int64_t i, uint esz) { return base + uint64_t(i * int64_t(esz)); }

// Round to nearest even f32 -> f16 bits (equivalent to vcvtps2ph), exact for
// subnormal halves without relying on float arithmetic (FTZ-safe).
uint f32_to_f16(float f) {
  uint x = floatBitsToUint(f);
  uint sign = (x >> 16) & 0x8000u;
  x &= 0x7fffffffu;
  if (x >= 0x7f800000u) return sign | 0x7c00u | (x > 0x7f800000u ? 0x200u : 0u);
  if (x >= 0x477ff000u) return sign | 0x7c00u;
  if (x < 0x38800000u) {
    uint e = x >> 23;
    if (e < 102u) return sign; // below half of the smallest subnormal
    uint m = (x & 0x7fffffu) | 0x800000u;
    uint shift = 126u - e;
    uint q = m >> shift;
    uint rem = m & ((1u << shift) - 1u);
    uint halfway = 1u << (shift - 1u);
    if (rem > halfway || (rem == halfway && (q & 1u) != 0u)) q++;
    return sign | q;
  }
  x += 0xc8000fffu + ((x >> 13) & 1u);
  return sign | (x >> 13);
}

float f16_to_f32(uint h) {
  uint sign = (h & 0x8000u) << 16;
  uint e = (h >> 10) & 0x1fu, m = h & 0x3ffu;
  if (e == 0x1fu) return uintBitsToFloat(sign | 0x7f800000u | (m << 13));
  if (e == 0u) {
    if (m == 0u) return uintBitsToFloat(sign);
    // normalize: value = m * 2^-24
    int sh = 0;
    while ((m & 0x400u) == 0u) { m <<= 1; sh++; }
    m &= 0x3ffu;
    return uintBitsToFloat(sign | (uint(113 - sh) << 23) | (m << 13));
  }
  return uintBitsToFloat(sign | ((e + 112u) << 23) | (m << 13));
}

uint f32_to_bf16(float f) {
  uint x = floatBitsToUint(f);
  if ((x & 0x7fffffffu) > 0x7f800000u) return (x >> 16) | 0x40u;
  x += 0x7fffu + ((x >> 16) & 1u);
  return x >> 16;
}

// ---- loads and stores ------------------------------------------------------
// Every element access goes through its raw bits (zero-extended to 64 bits)
// and one conversion table per register type, so the address-based loads
// below and the descriptor-based chunk loads of the contiguous elementwise
// kernel share the conversions.
uint64_t raw_load(uint64_t base, int64_t i, uint dt) {
  switch (dt_size(dt)) {
    case 1u: return uint64_t(RU8(elem_addr(base, i, 1u)).v);
    case 2u: return uint64_t(RU16(elem_addr(base, i, 2u)).v);
    case 4u: return uint64_t(uint(RI32(elem_addr(base, i, 4u)).v));
  }
  return uint64_t(RI64(elem_addr(base, i, 8u)).v);
}

void raw_store(uint64_t base, int64_t i, uint dt, uint64_t b) {
  switch (dt_size(dt)) {
    case 1u: RU8(elem_addr(base, i, 1u)).v = uint8_t(b & 255ul); return;
    case 2u: RU16(elem_addr(base, i, 2u)).v = uint16_t(b & 65535ul); return;
    case 4u: RI32(elem_addr(base, i, 4u)).v = int(uint(b & 4294967295ul)); return;
  }
  RI64(elem_addr(base, i, 8u)).v = int64_t(b);
}

int bits_i8(uint64_t b) { return int(uint(b) << 24) >> 24; }
int bits_i16(uint64_t b) { return int(uint(b) << 16) >> 16; }
uint bits_u8(uint64_t b) { return uint(b) & 255u; }
float bits_f32(uint64_t b) { return uintBitsToFloat(uint(b)); }
float bits_f16(uint64_t b) { return f16_to_f32(uint(b) & 65535u); }
float bits_bf16(uint64_t b) { return uintBitsToFloat((uint(b) & 65535u) << 16); }
double bits_f64(uint64_t b) { return packDouble2x32(unpackUint2x32(b)); }
uint64_t f64_bits(double v) { return packUint2x32(unpackDouble2x32(v)); }

// Raw bits of dtype dt -> register value.
double f64_of(uint64_t b, uint dt) {
  switch (dt) {
    case DT_F32: return double(bits_f32(b));
    case DT_F16: return double(bits_f16(b));
    case DT_BF16: return double(bits_bf16(b));
    case DT_F64: return bits_f64(b);
    case DT_I8: return double(bits_i8(b));
    case DT_U8: case DT_BOOL: return double(bits_u8(b));
    case DT_I16: return double(bits_i16(b));
    case DT_I32: return double(int(uint(b)));
    case DT_I64: return double(int64_t(b));
  }
  return 0.0;
}

int64_t i64_of(uint64_t b, uint dt) {
  switch (dt) {
    case DT_F32: return int64_t(bits_f32(b));
    case DT_F64: return int64_t(bits_f64(b));
    case DT_F16: return int64_t(bits_f16(b));
    case DT_BF16: return int64_t(bits_bf16(b));
    case DT_I8: return int64_t(bits_i8(b));
    case DT_U8: case DT_BOOL: return int64_t(bits_u8(b));
    case DT_I16: return int64_t(bits_i16(b));
    case DT_I32: return int64_t(int(uint(b)));
    case DT_I64: return int64_t(b);
  }
  return 0l;
}

float f32_of(uint64_t b, uint dt) {
  switch (dt) {
    case DT_F32: return bits_f32(b);
    case DT_F16: return bits_f16(b);
    case DT_BF16: return bits_bf16(b);
    case DT_I8: return float(bits_i8(b));
    case DT_U8: case DT_BOOL: return float(bits_u8(b));
    case DT_I16: return float(bits_i16(b));
    case DT_I32: return float(int(uint(b)));
  }
  return float(f64_of(b, dt));
}

int i32_of(uint64_t b, uint dt) {
  switch (dt) {
    case DT_I8: return bits_i8(b);
    case DT_U8: case DT_BOOL: return int(bits_u8(b));
    case DT_I16: return bits_i16(b);
    case DT_I32: return int(uint(b));
    case DT_F32: return int(bits_f32(b));
  }
  return int(i64_of(b, dt));
}

// Register value -> raw bits of dtype dt (the stores truncate to its size;
// integer narrowing wraps).
uint64_t bits_of_f32(float v, uint dt) {
  switch (dt) {
    case DT_F32: return uint64_t(floatBitsToUint(v));
    case DT_F16: return uint64_t(f32_to_f16(v));
    case DT_BF16: return uint64_t(f32_to_bf16(v));
    case DT_F64: return f64_bits(double(v));
    case DT_BOOL: return (v != 0.0 || isnan(v)) ? 1ul : 0ul;
    case DT_I8: case DT_U8: case DT_I16: case DT_I32: case DT_I64: return uint64_t(int64_t(v));
  }
  return 0ul;
}

uint64_t bits_of_f64(double v, uint dt) {
  switch (dt) {
    case DT_F64: return f64_bits(v);
    case DT_BOOL: return (v != 0.0 || isnan(v)) ? 1ul : 0ul;
    case DT_I8: case DT_U8: case DT_I16: case DT_I32: case DT_I64: return uint64_t(int64_t(v));
  }
  return bits_of_f32(float(v), dt);
}

uint64_t bits_of_i64(int64_t v, uint dt) {
  switch (dt) {
    case DT_BOOL: return v != 0l ? 1ul : 0ul;
    case DT_I8: case DT_U8: case DT_I16: case DT_I32: case DT_I64: return uint64_t(v);
    case DT_F64: return f64_bits(double(v));
  }
  return bits_of_f32(float(v), dt);
}

uint64_t bits_of_i32(int v, uint dt) {
  switch (dt) {
    case DT_BOOL: return v != 0 ? 1ul : 0ul;
    case DT_I8: case DT_U8: case DT_I16: case DT_I32: return uint64_t(int64_t(v));
  }
  return bits_of_i64(int64_t(v), dt);
}

double load_f64(uint64_t base, int64_t i, uint dt) { return f64_of(raw_load(base, i, dt), dt); }
int64_t load_i64(uint64_t base, int64_t i, uint dt) { return i64_of(raw_load(base, i, dt), dt); }
float load_f32(uint64_t base, int64_t i, uint dt) { return f32_of(raw_load(base, i, dt), dt); }
int load_i32(uint64_t base, int64_t i, uint dt) { return i32_of(raw_load(base, i, dt), dt); }
void store_f32(uint64_t base, int64_t i, uint dt, float v) { raw_store(base, i, dt, bits_of_f32(v, dt)); }
void store_f64(uint64_t base, int64_t i, uint dt, double v) { raw_store(base, i, dt, bits_of_f64(v, dt)); }
void store_i64(uint64_t base, int64_t i, uint dt, int64_t v) { raw_store(base, i, dt, bits_of_i64(v, dt)); }
void store_i32(uint64_t base, int64_t i, uint dt, int v) { raw_store(base, i, dt, bits_of_i32(v, dt)); }

// ---- accurate double-precision exp and log (GLSL has none for double) -----
const double LN2_HI = 6.93147180369123816490e-01lf;
const double LN2_LO = 1.90821492927058770002e-10lf;

double exp_d(double x) {
  if (isnan(x)) return x;
  if (x > 709.78lf) return 1.0lf / 0.0lf;
  if (x < -745.2lf) return 0.0lf;
  double k = floor(x * 1.44269504088896338700lf + 0.5lf);
  double r = (x - k * LN2_HI) - k * LN2_LO;
  // Taylor to degree 13 on |r| <= 0.347: error < 1e-17
  double p = 1.0lf / 6227020800.0lf;
  p = p * r + 1.0lf / 479001600.0lf;
  p = p * r + 1.0lf / 39916800.0lf;
  p = p * r + 1.0lf / 3628800.0lf;
  p = p * r + 1.0lf / 362880.0lf;
  p = p * r + 1.0lf / 40320.0lf;
  p = p * r + 1.0lf / 5040.0lf;
  p = p * r + 1.0lf / 720.0lf;
  p = p * r + 1.0lf / 120.0lf;
  p = p * r + 1.0lf / 24.0lf;
  p = p * r + 1.0lf / 6.0lf;
  p = p * r + 0.5lf;
  p = p * r + 1.0lf;
  p = p * r + 1.0lf;
  int ki = int(k);
  if (ki > 1000) return p * ldexp(1.0lf, 1000) * ldexp(1.0lf, ki - 1000);
  if (ki < -1000) return p * ldexp(1.0lf, -1000) * ldexp(1.0lf, ki + 1000);
  return p * ldexp(1.0lf, ki);
}

// exp(x) - 1 without cancellation near 0.
double expm1_d(double x) {
  if (abs(x) < 0.5lf) {
    // Horner on sum_{k=1..18} x^k / k!: no cancellation near 0.
    double t = 1.0lf / 6402373705728000.0lf; // 1/18!
    for (int k = 17; k >= 1; k--) {
      double f = 1.0lf;
      for (int j = 2; j <= k; j++) f *= double(j);
      t = t * x + 1.0lf / f;
    }
    return t * x;
  }
  return exp_d(x) - 1.0lf;
}

double log_d(double x) {
  if (isnan(x) || x < 0.0lf) return 0.0lf / 0.0lf;
  if (x == 0.0lf) return -1.0lf / 0.0lf;
  if (isinf(x)) return x;
  int e;
  int sub = 0;
  if (x < 2.2250738585072014e-308lf) { x *= 18014398509481984.0lf; sub = 54; } // 2^54: frexp needs normals
  double m = frexp(x, e); // m in [0.5, 1)
  e -= sub;
  if (m < 0.70710678118654752440lf) { m *= 2.0lf; e -= 1; }
  double s = (m - 1.0lf) / (m + 1.0lf);
  double s2 = s * s;
  double p = 1.0lf / 23.0lf;
  p = p * s2 + 1.0lf / 21.0lf;
  p = p * s2 + 1.0lf / 19.0lf;
  p = p * s2 + 1.0lf / 17.0lf;
  p = p * s2 + 1.0lf / 15.0lf;
  p = p * s2 + 1.0lf / 13.0lf;
  p = p * s2 + 1.0lf / 11.0lf;
  p = p * s2 + 1.0lf / 9.0lf;
  p = p * s2 + 1.0lf / 7.0lf;
  p = p * s2 + 1.0lf / 5.0lf;
  p = p * s2 + 1.0lf / 3.0lf;
  p = p * s2 + 1.0lf;
  double lm = 2.0lf * s * p;
  double de = double(e);
  return de * LN2_HI + (de * LN2_LO + lm);
}

double log1p_d(double x) {
  double u = 1.0lf + x;
  if (u == 1.0lf) return x;
  if (isinf(u) || isnan(u)) return log_d(u);
  return log_d(u) * (x / (u - 1.0lf));
}

// log1p without the rounding of 1 + x (the u - 1 correction).
double log1p_acc(double x) {
  double u = 1.0lf + x;
  if (u == 1.0lf) return x;
  if (isinf(u)) return u;
  return log_d(u) * (x / (u - 1.0lf));
}

// ---- trigonometry in double for arguments |x| < 2^32 ----------------------
// Cody-Waite reduction by pi/2 in five 21-bit pieces (k * piece is exact for
// k < 2^32), then Taylor series on |r| <= pi/4.
double sin_poly(double r) {
  double r2 = r * r;
  double p = -1.0lf / 121645100408832000.0lf;       // -1/19!
  p = p * r2 + 1.0lf / 355687428096000.0lf;         // 1/17!
  p = p * r2 - 1.0lf / 1307674368000.0lf;           // -1/15!
  p = p * r2 + 1.0lf / 6227020800.0lf;              // 1/13!
  p = p * r2 - 1.0lf / 39916800.0lf;
  p = p * r2 + 1.0lf / 362880.0lf;
  p = p * r2 - 1.0lf / 5040.0lf;
  p = p * r2 + 1.0lf / 120.0lf;
  p = p * r2 - 1.0lf / 6.0lf;
  return r + r * r2 * p;
}
double cos_poly(double r) {
  double r2 = r * r;
  double p = 1.0lf / 6402373705728000.0lf;          // 1/18!
  p = p * r2 - 1.0lf / 20922789888000.0lf;          // -1/16!
  p = p * r2 + 1.0lf / 87178291200.0lf;             // 1/14!
  p = p * r2 - 1.0lf / 479001600.0lf;
  p = p * r2 + 1.0lf / 3628800.0lf;
  p = p * r2 - 1.0lf / 40320.0lf;
  p = p * r2 + 1.0lf / 720.0lf;
  p = p * r2 - 1.0lf / 24.0lf;
  p = p * r2 + 0.5lf;
  return 1.0lf - r2 * p;
}
// r in [-pi/4, pi/4] and the quadrant k mod 4.
double reduce_pio2(double x, out int q) {
  double k = roundEven(x * 0.63661977236758134308lf);
  double r = x - k * 1.570796012878418lf;
  r -= k * 3.139164164167596e-07lf;
  r -= k * 6.22337468017542e-14lf;
  r -= k * -2.5082791584901525e-20lf;
  r -= k * 3.521561362568105e-27lf;
  q = int(int64_t(k) & 3l);
  return r;
}
double sin_d(double x) {
  if (isnan(x) || isinf(x)) return 0.0lf / 0.0lf;
  int q;
  double r = reduce_pio2(x, q);
  double v = (q & 1) == 0 ? sin_poly(r) : cos_poly(r);
  return (q & 2) == 0 ? v : -v;
}
double cos_d(double x) {
  if (isnan(x) || isinf(x)) return 0.0lf / 0.0lf;
  int q;
  double r = reduce_pio2(x, q);
  double v = (q & 1) == 0 ? cos_poly(r) : sin_poly(r);
  return (q == 1 || q == 2) ? -v : v;
}

// atan on [0, inf) by reduction to |t| <= tan(pi/12).
double atan_d(double x) {
  if (isnan(x)) return x;
  double a = abs(x);
  bool inv = a > 1.0lf;
  if (inv) a = 1.0lf / a;
  bool shift = a > 0.26794919243112270lf; // tan(pi/12)
  if (shift) a = (a * 1.73205080756887729353lf - 1.0lf) / (a + 1.73205080756887729353lf);
  double a2 = a * a;
  double p = 0.0lf;
  for (int k = 21; k >= 1; k--) p = p * a2 + ((k & 1) == 1 ? 1.0lf : -1.0lf) / double(2 * k + 1);
  double r = a - a * a2 * p;
  // series: a - a^3/3 + a^5/5 ... with p = 1/3 - a2/5 + ...
  if (shift) r += 0.52359877559829887308lf; // pi/6
  if (inv) r = 1.57079632679489661923lf - r;
  return x < 0.0lf ? -r : r;
}
double atan2_d(double y, double x) {
  if (isnan(x) || isnan(y)) return 0.0lf / 0.0lf;
  const double PI = 3.14159265358979323846lf;
  bool ys = (unpackDouble2x32(y).y >> 31) != 0u, xs = (unpackDouble2x32(x).y >> 31) != 0u;
  if (y == 0.0lf) {
    if (xs) return ys ? -PI : PI;
    return y;
  }
  if (isinf(x)) {
    if (isinf(y)) return (ys ? -1.0lf : 1.0lf) * (xs ? 0.75lf * PI : 0.25lf * PI);
    return xs ? (ys ? -PI : PI) : (ys ? -0.0lf : 0.0lf);
  }
  if (isinf(y) || x == 0.0lf) return ys ? -0.5lf * PI : 0.5lf * PI;
  double r = atan_d(abs(y / x));
  if (abs(y) < abs(x) * 1e-300lf) r = abs(y) / abs(x);
  if (xs) r = PI - r;
  return ys ? -r : r;
}
