/* backplane plugin kit: the small floating formats (f16, bf16 from f64;
 * fp8, fp6, fp4 and e8m0 both ways), round to nearest even. Compiled into
 * the kit and into the core, which reduces them in host-staged collectives.
 */
#include <math.h>

#include "bp_plugin_common.h"

float bp_f8e4m3fn_to_f32(uint8_t v) {
  uint32_t exp = (v >> 3) & 0xfu, man = v & 7u;
  float mag;
  if (exp == 0xf && man == 7) return NAN;
  if (exp == 0) mag = (float)man * 0x1p-9f;
  else mag = ldexpf((float)(8u + man), (int)exp - 10);
  return (v & 0x80u) ? -mag : mag;
}

/* Rounds |v| to a binary format with `mbits` stored mantissa bits and
 * exponent bias `bias`; returns the unsigned code (exponent << mbits | man)
 * or UINT32_MAX when the rounded value exceeds exponent `emax`. */
static uint32_t encode_small(double a, int mbits, int bias, int emax) {
  if (a == 0.0) return 0;
  int e;
  (void)frexp(a, &e);
  e -= 1; /* a = m * 2^e, m in [1, 2) */
  int emin = 1 - bias;
  if (e < emin) e = emin;
  double n = ldexp(a, mbits - e); /* exact: scaling by a power of two */
  double r = nearbyint(n);       /* ties to even in the default mode */
  double top = ldexp(1.0, mbits + 1);
  if (r >= top) {
    e++;
    r = ldexp(1.0, mbits);
  }
  if (e > emax) return UINT32_MAX;
  uint32_t q = (uint32_t)r;
  if (q < (1u << mbits)) return q; /* subnormal (e == emin) */
  return ((uint32_t)(e + bias) << mbits) | (q - (1u << mbits));
}

uint16_t bp_f64_to_f16(double v) {
  uint16_t sign = signbit(v) ? 0x8000u : 0;
  if (isnan(v)) return (uint16_t)(sign | 0x7e00u);
  uint32_t c = isinf(v) ? UINT32_MAX : encode_small(fabs(v), 10, 15, 15);
  return (uint16_t)(sign | (c == UINT32_MAX ? 0x7c00u : c));
}

uint16_t bp_f64_to_bf16(double v) {
  uint16_t sign = signbit(v) ? 0x8000u : 0;
  if (isnan(v)) return (uint16_t)(sign | 0x7fc0u);
  uint32_t c = isinf(v) ? UINT32_MAX : encode_small(fabs(v), 7, 127, 127);
  return (uint16_t)(sign | (c == UINT32_MAX ? 0x7f80u : c));
}

uint8_t bp_f64_to_f8e4m3fn(double v) {
  uint8_t sign = signbit(v) ? 0x80u : 0;
  if (isnan(v) || isinf(v)) return (uint8_t)(sign | 0x7fu);
  uint32_t c = encode_small(fabs(v), 3, 7, 8);
  if (c == UINT32_MAX || c == 0x7fu) return (uint8_t)(sign | 0x7fu); /* 0x7f is NaN */
  return (uint8_t)(sign | c);
}

uint8_t bp_f64_to_f8e5m2(double v) {
  uint8_t sign = signbit(v) ? 0x80u : 0;
  if (isnan(v)) return (uint8_t)(sign | 0x7eu);
  uint32_t c = isinf(v) ? UINT32_MAX : encode_small(fabs(v), 2, 15, 15);
  return (uint8_t)(sign | (c == UINT32_MAX ? 0x7cu : c));
}

/* ---- small float formats by dtype -------------------------------------- */
enum small_kind {
  SMALL_IEEE, /* all-ones exponent: inf (mantissa 0) or NaN */
  SMALL_FN,   /* no inf; all-ones exponent and mantissa is NaN */
  SMALL_FNUZ, /* no inf, no -0; the -0 pattern is the one NaN */
  SMALL_SAT,  /* no inf, no NaN: every pattern is finite (fp6, fp4) */
  SMALL_E8M0  /* unsigned powers of two, all-ones is NaN */
};
typedef struct small_fmt {
  uint8_t ebits, mbits, bias, kind;
} small_fmt_t;

static const small_fmt_t* small_fmt(uint32_t dtype) {
  static const small_fmt_t e4m3fn = {4, 3, 7, SMALL_FN}, e5m2 = {5, 2, 15, SMALL_IEEE},
                           e4m3fnuz = {4, 3, 8, SMALL_FNUZ}, e5m2fnuz = {5, 2, 16, SMALL_FNUZ},
                           e8m0 = {8, 0, 127, SMALL_E8M0}, e2m3 = {2, 3, 1, SMALL_SAT},
                           e3m2 = {3, 2, 3, SMALL_SAT}, e2m1 = {2, 1, 1, SMALL_SAT};
  switch (dtype) {
    case BP_DTYPE_F8E4M3FN: return &e4m3fn;
    case BP_DTYPE_F8E5M2: return &e5m2;
    case BP_DTYPE_F8E4M3FNUZ: return &e4m3fnuz;
    case BP_DTYPE_F8E5M2FNUZ: return &e5m2fnuz;
    case BP_DTYPE_F8E8M0FNU: return &e8m0;
    case BP_DTYPE_F6E2M3FN: return &e2m3;
    case BP_DTYPE_F6E3M2FN: return &e3m2;
    case BP_DTYPE_F4E2M1FN: return &e2m1;
    default: return NULL;
  }
}

int bp_dtype_is_small_float(uint32_t dtype) { return small_fmt(dtype) != NULL; }

double bp_small_float_to_f64(uint32_t dtype, uint32_t code) {
  const small_fmt_t* f = small_fmt(dtype);
  if (!f) return NAN;
  uint32_t width = f->ebits + f->mbits; /* bits below the sign */
  uint32_t eall = (1u << f->ebits) - 1u, mall = (1u << f->mbits) - 1u;
  if (f->kind == SMALL_E8M0) return (code & 0xffu) == 0xffu ? NAN : ldexp(1.0, (int)(code & 0xffu) - 127);
  code &= (2u << width) - 1u;
  uint32_t sign = code >> width, e = (code >> f->mbits) & eall, m = code & mall;
  if (f->kind == SMALL_FNUZ && code == 1u << width) return NAN;
  if (f->kind == SMALL_FN && e == eall && m == mall) return sign ? -NAN : NAN;
  if (f->kind == SMALL_IEEE && e == eall) return m ? (sign ? -NAN : NAN) : (sign ? -INFINITY : INFINITY);
  double mag = e == 0 ? ldexp((double)m, 1 - f->bias - f->mbits)
                      : ldexp((double)(m | (1u << f->mbits)), (int)e - f->bias - f->mbits);
  return sign ? -mag : mag;
}

static uint32_t e8m0_encode(double v) {
  if (isnan(v) || isinf(v) || v < 0.0) return 0xffu;
  int e;
  double m = frexp(v, &e) * 2.0; /* v = m * 2^(e-1), m in [1, 2); v == 0 gives e == 0 */
  if (v == 0.0 || e - 1 < -127) return 0x00u;
  e -= 1;
  if (nearbyint(m) >= 2.0) e++; /* m >= 1.5: the upper power (1.5 ties to the even 2) */
  return e > 127 ? 0xffu : (uint32_t)(e + 127);
}

uint32_t bp_f64_to_small_float(uint32_t dtype, double v) {
  const small_fmt_t* f = small_fmt(dtype);
  if (!f) return 0;
  if (f->kind == SMALL_E8M0) return e8m0_encode(v);
  uint32_t width = f->ebits + f->mbits;
  uint32_t sign = signbit(v) ? 1u << width : 0u;
  uint32_t all = (1u << width) - 1u; /* largest magnitude pattern */
  int emax = (int)((1u << f->ebits) - 1u) - f->bias;
  uint32_t c, inf;
  switch (f->kind) {
    case SMALL_IEEE:
      inf = all & ~((1u << f->mbits) - 1u); /* all-ones exponent, mantissa 0 */
      if (isnan(v)) return sign | inf | (1u << (f->mbits - 1)); /* quiet NaN (e5m2: 0x7e) */
      c = isinf(v) ? UINT32_MAX : encode_small(fabs(v), f->mbits, f->bias, emax - 1);
      return sign | (c == UINT32_MAX ? inf : c);
    case SMALL_FN:
      if (isnan(v) || isinf(v)) return sign | all;
      c = encode_small(fabs(v), f->mbits, f->bias, emax);
      return sign | (c == UINT32_MAX ? all : c); /* `all` is the NaN pattern */
    case SMALL_FNUZ:
      if (isnan(v) || isinf(v)) return 1u << width;
      c = encode_small(fabs(v), f->mbits, f->bias, emax);
      if (c == UINT32_MAX) return 1u << width;
      return c == 0 ? 0u : (sign | c);
    default: /* SMALL_SAT */
      if (isnan(v)) return 0;
      c = isinf(v) ? UINT32_MAX : encode_small(fabs(v), f->mbits, f->bias, emax);
      return sign | (c == UINT32_MAX ? all : c);
  }
}
