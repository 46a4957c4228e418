/* Exact decode/encode of every backplane dtype to and from double.
 *
 * The suite's own implementation, independent of any plugin: one generic
 * binary-float encoder (round to nearest even) parameterised by exponent and
 * mantissa width serves f16, bf16 and both fp8 formats.
 */
#include <math.h>
#include <string.h>

#include "conform.h"

/* One small-float format. */
typedef struct fmt {
  int ebits, mbits;
  int fn; /* OCP "fn" encoding: no inf; all-ones exponent holds normals, only
             mantissa all-ones is NaN (e4m3fn) */
  uint32_t qnan; /* canonical quiet NaN (without sign) */
} fmt_t;

static const fmt_t kF16 = {5, 10, 0, 0x7E00u};
static const fmt_t kBF16 = {8, 7, 0, 0x7FC0u};
static const fmt_t kE4M3 = {4, 3, 1, 0x7Fu};
static const fmt_t kE5M2 = {5, 2, 0, 0x7Eu};

static int fmt_bias(const fmt_t* f) { return (1 << (f->ebits - 1)) - 1; }
/* Largest unbiased exponent of a finite normal. */
static int fmt_emax(const fmt_t* f) {
  return f->fn ? (1 << f->ebits) - 1 - fmt_bias(f) : (1 << f->ebits) - 2 - fmt_bias(f);
}

static double fmt_decode(const fmt_t* f, uint32_t bits) {
  uint32_t sign = (bits >> (f->ebits + f->mbits)) & 1u;
  uint32_t e = (bits >> f->mbits) & ((1u << f->ebits) - 1u);
  uint32_t m = bits & ((1u << f->mbits) - 1u);
  uint32_t eall = (1u << f->ebits) - 1u;
  double v;
  if (f->fn && e == eall && m == (1u << f->mbits) - 1u) {
    v = NAN;
  } else if (!f->fn && e == eall) {
    v = m ? NAN : INFINITY;
  } else if (e == 0) {
    v = ldexp((double)m, 1 - fmt_bias(f) - f->mbits);
  } else {
    v = ldexp((double)(m | (1u << f->mbits)), (int)e - fmt_bias(f) - f->mbits);
  }
  return sign ? -v : v;
}

static uint32_t fmt_encode(const fmt_t* f, double x) {
  uint32_t sign_bit = 1u << (f->ebits + f->mbits);
  uint32_t sign = signbit(x) ? sign_bit : 0u;
  uint32_t overflow = f->fn ? (sign | f->qnan) : (sign | (((1u << f->ebits) - 1u) << f->mbits));
  if (isnan(x)) return sign | f->qnan;
  double a = fabs(x);
  if (isinf(a)) return overflow;
  if (a == 0.0) return sign;
  int emin = 1 - fmt_bias(f);
  int e;
  (void)frexp(a, &e);
  e -= 1; /* a = s * 2^e, s in [1, 2) */
  if (e < emin) {
    /* Subnormal: integer multiple of 2^(emin - mbits); a carry into the
     * implicit bit yields the smallest normal, which the bit layout encodes
     * naturally. */
    double q = nearbyint(ldexp(a, f->mbits - emin));
    return sign | (uint32_t)q;
  }
  double q = nearbyint(ldexp(a, f->mbits - e)); /* in [2^mbits, 2^(mbits+1)] */
  if (q >= ldexp(1.0, f->mbits + 1)) {
    q = ldexp(q, -1);
    e += 1;
  }
  uint32_t mant = (uint32_t)q - (1u << f->mbits);
  int emax = fmt_emax(f);
  if (e > emax) return overflow;
  if (f->fn && e == emax && mant == (1u << f->mbits) - 1u) return overflow;
  return sign | ((uint32_t)(e + fmt_bias(f)) << f->mbits) | mant;
}

uint16_t bpc_f16_from_f64(double x) { return (uint16_t)fmt_encode(&kF16, x); }
double bpc_f16_to_f64(uint16_t bits) { return fmt_decode(&kF16, bits); }
uint16_t bpc_bf16_from_f64(double x) { return (uint16_t)fmt_encode(&kBF16, x); }
double bpc_bf16_to_f64(uint16_t bits) { return fmt_decode(&kBF16, bits); }
uint8_t bpc_f8e4m3_from_f64(double x) { return (uint8_t)fmt_encode(&kE4M3, x); }
double bpc_f8e4m3_to_f64(uint8_t bits) { return fmt_decode(&kE4M3, bits); }
uint8_t bpc_f8e5m2_from_f64(double x) { return (uint8_t)fmt_encode(&kE5M2, x); }
double bpc_f8e5m2_to_f64(uint8_t bits) { return fmt_decode(&kE5M2, bits); }

/* ---- dtype facts --------------------------------------------------------- */
/* Names and sizes are the core's own, from dtypes.def (they are facts of
 * the ABI, not of any plugin); the references stay independent of plugins. */
const char* bpc_dtype_name(uint32_t dtype) { return bp_dtype_name(dtype); }

size_t bpc_dtype_size(uint32_t dtype) { return bp_dtype_size(dtype); }

/* The floating dtypes the suite decodes exactly: f16 bf16 f32 f64 and the
 * two fp8 formats with casts. */
int bpc_dtype_is_float(uint32_t d) {
  return bp_dtype_category(d) == BP_DTYPE_CATEGORY_FLOAT || d == BP_DTYPE_F8E4M3FN ||
         d == BP_DTYPE_F8E5M2;
}

int bpc_dtype_is_int(uint32_t d) {
  return d == BP_DTYPE_I8 || d == BP_DTYPE_U8 || d == BP_DTYPE_I16 || d == BP_DTYPE_I32 ||
         d == BP_DTYPE_I64;
}

int bpc_float_mant_bits(uint32_t d) {
  switch (d) {
    case BP_DTYPE_F32: return 23;
    case BP_DTYPE_F64: return 52;
    case BP_DTYPE_F16: return kF16.mbits;
    case BP_DTYPE_BF16: return kBF16.mbits;
    case BP_DTYPE_F8E4M3FN: return kE4M3.mbits;
    case BP_DTYPE_F8E5M2: return kE5M2.mbits;
    default: return 0;
  }
}

int bpc_float_min_exp(uint32_t d) {
  switch (d) {
    case BP_DTYPE_F32: return -126;
    case BP_DTYPE_F64: return -1022;
    case BP_DTYPE_F16: return 1 - fmt_bias(&kF16);
    case BP_DTYPE_BF16: return 1 - fmt_bias(&kBF16);
    case BP_DTYPE_F8E4M3FN: return 1 - fmt_bias(&kE4M3);
    case BP_DTYPE_F8E5M2: return 1 - fmt_bias(&kE5M2);
    default: return 0;
  }
}

double bpc_float_max(uint32_t d) {
  switch (d) {
    case BP_DTYPE_F32: return 3.4028234663852886e38;
    case BP_DTYPE_F64: return 1.7976931348623157e308;
    case BP_DTYPE_F16: return 65504.0;
    case BP_DTYPE_BF16: return 3.3895313892515355e38;
    case BP_DTYPE_F8E4M3FN: return 448.0;
    case BP_DTYPE_F8E5M2: return 57344.0;
    default: return 0.0;
  }
}

double bpc_round_to_dtype(double x, uint32_t dtype) {
  switch (dtype) {
    case BP_DTYPE_F32: return (double)(float)x; /* C conversion: nearest even */
    case BP_DTYPE_F16: return bpc_f16_to_f64(bpc_f16_from_f64(x));
    case BP_DTYPE_BF16: return bpc_bf16_to_f64(bpc_bf16_from_f64(x));
    case BP_DTYPE_F8E4M3FN: return bpc_f8e4m3_to_f64(bpc_f8e4m3_from_f64(x));
    case BP_DTYPE_F8E5M2: return bpc_f8e5m2_to_f64(bpc_f8e5m2_from_f64(x));
    default: return x;
  }
}

double bpc_round_i64_to_dtype(int64_t v, uint32_t dtype) {
  uint64_t u = v < 0 ? (uint64_t)0 - (uint64_t)v : (uint64_t)v;
  int keep = (dtype == BP_DTYPE_F64 ? 52 : bpc_float_mant_bits(dtype)) + 1;
  int nbits = 0;
  for (uint64_t t = u; t; t >>= 1) nbits++;
  double mag;
  if (nbits <= keep) {
    mag = (double)u; /* exact: <= 53 bits */
  } else {
    int drop = nbits - keep;
    uint64_t q = u >> drop;
    uint64_t rem = u & ((UINT64_C(1) << drop) - 1u);
    uint64_t half = UINT64_C(1) << (drop - 1);
    if (rem > half || (rem == half && (q & 1u))) q++;
    mag = ldexp((double)q, drop);
  }
  return bpc_round_to_dtype(v < 0 ? -mag : mag, dtype); /* range (overflow) only */
}

int64_t bpc_wrap_int(int64_t v, uint32_t dtype) {
  switch (dtype) {
    case BP_DTYPE_I8: return (int8_t)(uint8_t)(uint64_t)v;
    case BP_DTYPE_U8: return (uint8_t)(uint64_t)v;
    case BP_DTYPE_I16: return (int16_t)(uint16_t)(uint64_t)v;
    case BP_DTYPE_I32: return (int32_t)(uint32_t)(uint64_t)v;
    case BP_DTYPE_BOOL: return v != 0;
    default: return v;
  }
}

bpc_num_t bpc_load(uint32_t dtype, const void* base, int64_t index) {
  bpc_num_t v = {0.0, 0, 0.0};
  const uint8_t* p = (const uint8_t*)base + (size_t)index * bpc_dtype_size(dtype);
  switch (dtype) {
    case BP_DTYPE_F32: { float x; memcpy(&x, p, 4); v.f = x; break; }
    case BP_DTYPE_F64: memcpy(&v.f, p, 8); break;
    case BP_DTYPE_F16: { uint16_t b; memcpy(&b, p, 2); v.f = bpc_f16_to_f64(b); break; }
    case BP_DTYPE_BF16: { uint16_t b; memcpy(&b, p, 2); v.f = bpc_bf16_to_f64(b); break; }
    case BP_DTYPE_F8E4M3FN: v.f = bpc_f8e4m3_to_f64(*p); break;
    case BP_DTYPE_F8E5M2: v.f = bpc_f8e5m2_to_f64(*p); break;
    case BP_DTYPE_I8: v.i = (int8_t)*p; break;
    case BP_DTYPE_U8: v.i = *p; break;
    case BP_DTYPE_BOOL: v.i = *p; break;
    case BP_DTYPE_I16: { int16_t x; memcpy(&x, p, 2); v.i = x; break; }
    case BP_DTYPE_I32: { int32_t x; memcpy(&x, p, 4); v.i = x; break; }
    case BP_DTYPE_I64: memcpy(&v.i, p, 8); break;
    default: break;
  }
  if (!bpc_dtype_is_float(dtype)) v.f = (double)v.i;
  return v;
}

bpc_num_t bpc_convert(bpc_num_t v, uint32_t from, uint32_t to) {
  bpc_num_t r = {0.0, 0, v.mag};
  int ff = bpc_dtype_is_float(from);
  if (bpc_dtype_is_float(to)) {
    r.f = ff ? bpc_round_to_dtype(v.f, to) : bpc_round_i64_to_dtype(v.i, to);
  } else if (to == BP_DTYPE_BOOL) {
    r.i = ff ? (v.f != 0.0 || isnan(v.f)) : (v.i != 0);
  } else if (ff) {
    /* Truncation toward zero; out of range and NaN are undefined by the
     * semantics (never generated); map them to 0 rather than invoke UB. */
    double t = trunc(v.f);
    int64_t i = (t >= -9223372036854775808.0 && t < 9223372036854775808.0) ? (int64_t)t : 0;
    r.i = bpc_wrap_int(i, to);
  } else {
    r.i = bpc_wrap_int(v.i, to);
  }
  if (!bpc_dtype_is_float(to)) r.f = (double)r.i;
  return r;
}

void bpc_store(uint32_t dtype, void* base, int64_t index, bpc_num_t v, uint32_t from_dtype) {
  uint8_t* p = (uint8_t*)base + (size_t)index * bpc_dtype_size(dtype);
  bpc_num_t c = bpc_convert(v, from_dtype, dtype);
  switch (dtype) {
    case BP_DTYPE_F32: { float x = (float)c.f; memcpy(p, &x, 4); break; }
    case BP_DTYPE_F64: memcpy(p, &c.f, 8); break;
    case BP_DTYPE_F16: { uint16_t b = bpc_f16_from_f64(c.f); memcpy(p, &b, 2); break; }
    case BP_DTYPE_BF16: { uint16_t b = bpc_bf16_from_f64(c.f); memcpy(p, &b, 2); break; }
    case BP_DTYPE_F8E4M3FN: *p = bpc_f8e4m3_from_f64(c.f); break;
    case BP_DTYPE_F8E5M2: *p = bpc_f8e5m2_from_f64(c.f); break;
    case BP_DTYPE_I8: case BP_DTYPE_U8: case BP_DTYPE_BOOL: *p = (uint8_t)c.i; break;
    case BP_DTYPE_I16: { int16_t x = (int16_t)c.i; memcpy(p, &x, 2); break; }
    case BP_DTYPE_I32: { int32_t x = (int32_t)c.i; memcpy(p, &x, 4); break; }
    case BP_DTYPE_I64: memcpy(p, &c.i, 8); break;
    default: break;
  }
}

bpc_num_t bpc_scalar_value(const bp_scalar_t* s, uint32_t* out_dtype) {
  bpc_num_t v = {0.0, 0, 0.0};
  switch (s ? s->kind : BP_SCALAR_NONE) {
    case BP_SCALAR_FLOAT: v.f = s->v.f; *out_dtype = BP_DTYPE_F64; break;
    case BP_SCALAR_INT: v.i = s->v.i; v.f = (double)v.i; *out_dtype = BP_DTYPE_I64; break;
    case BP_SCALAR_BOOL: v.i = s->v.b != 0; v.f = (double)v.i; *out_dtype = BP_DTYPE_BOOL; break;
    default: *out_dtype = BP_DTYPE_INVALID; break;
  }
  return v;
}

/* ---- PRNG and hashing ---------------------------------------------------- */
void bpc_rng_seed(bpc_rng_t* rng, uint64_t seed) { rng->state = seed; }

uint64_t bpc_rng_next(bpc_rng_t* rng) {
  uint64_t z = (rng->state += UINT64_C(0x9E3779B97F4A7C15));
  z = (z ^ (z >> 30)) * UINT64_C(0xBF58476D1CE4E5B9);
  z = (z ^ (z >> 27)) * UINT64_C(0x94D049BB133111EB);
  return z ^ (z >> 31);
}

double bpc_rng_uniform(bpc_rng_t* rng, double lo, double hi) {
  double u = (double)(bpc_rng_next(rng) >> 11) * 0x1.0p-53;
  return lo + (hi - lo) * u;
}

int64_t bpc_rng_int(bpc_rng_t* rng, int64_t lo, int64_t hi) {
  uint64_t span = (uint64_t)hi - (uint64_t)lo; /* hi - lo, may be 2^64 - 1 */
  uint64_t r = bpc_rng_next(rng);
  if (span != UINT64_MAX) r %= span + 1u;
  return (int64_t)((uint64_t)lo + r);
}

uint64_t bpc_hash_string(const char* s) { return bpc_checksum(s, strlen(s)); }

uint64_t bpc_checksum(const void* data, uint64_t size) {
  const uint8_t* p = (const uint8_t*)data;
  uint64_t h = UINT64_C(0xcbf29ce484222325);
  for (uint64_t k = 0; k < size; k++) {
    h ^= p[k];
    h *= UINT64_C(0x100000001b3);
  }
  return h;
}
