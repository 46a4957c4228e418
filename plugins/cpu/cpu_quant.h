/* backplane CPU plugin: element codecs of the quantization family
 * (cpu_quant.c, cpu_qmm.c). docs/semantics.md, "Quantization".
 *
 * A quantized element is a code: an 8-bit value of i8, u8, float8_e4m3fn
 * or float8_e5m2, or a 4-bit one (i4, u4, float4_e2m1fn) of which two
 * share a byte, element 2j in the low nibble. All helpers are pure.
 */
#ifndef BP_CPU_QUANT_H_
#define BP_CPU_QUANT_H_

#include <math.h>
#include <stdint.h>

#include "cpu_internal.h"

static inline int cpu_q_is_4bit(uint32_t q) {
  return q == BP_DTYPE_I4 || q == BP_DTYPE_U4 || q == BP_DTYPE_F4E2M1FN;
}
static inline int cpu_q_is_int(uint32_t q) {
  return q == BP_DTYPE_I8 || q == BP_DTYPE_U8 || q == BP_DTYPE_I4 || q == BP_DTYPE_U4;
}
/* Integer code range. */
static inline void cpu_q_range(uint32_t q, int* lo, int* hi) {
  switch (q) {
    case BP_DTYPE_I8: *lo = -128, *hi = 127; break;
    case BP_DTYPE_U8: *lo = 0, *hi = 255; break;
    case BP_DTYPE_I4: *lo = -8, *hi = 7; break;
    default: *lo = 0, *hi = 15; break; /* U4 */
  }
}
/* Largest finite magnitude of a float code dtype (the saturation bound). */
static inline double cpu_q_float_max(uint32_t q) {
  return q == BP_DTYPE_F8E4M3FN ? 448.0 : q == BP_DTYPE_F8E5M2 ? 57344.0 : 6.0;
}

/* The code of element i of a stored row (4-bit: nibble i). */
static inline uint32_t cpu_q_get(const uint8_t* row, int64_t i, int four) {
  return four ? (uint32_t)(row[i >> 1] >> ((i & 1) * 4)) & 0xFu : row[i];
}

/* Value of a code (without scale or zero point). */
static inline double cpu_q_decode(uint32_t q, uint32_t code) {
  switch (q) {
    case BP_DTYPE_I8: return (double)(int8_t)code;
    case BP_DTYPE_U8: case BP_DTYPE_U4: return (double)code;
    case BP_DTYPE_I4: return (double)((int)(code ^ 8u) - 8);
    default: return bp_small_float_to_f64(q, code);
  }
}

/* Code of v = x / scale (before the zero point): integers round half to
 * even, add zp and clamp (NaN gives zp); float codes round to nearest even
 * and, with `saturate`, clamp +-inf and overflow to +-max (ONNX saturate=1;
 * float4 always saturates, NaN gives +0). */
static inline uint32_t cpu_q_encode(uint32_t q, double v, int zp, int saturate) {
  if (cpu_q_is_int(q)) {
    int lo, hi;
    cpu_q_range(q, &lo, &hi);
    double r = isnan(v) ? (double)zp : nearbyint(v) + zp;
    int c = r < lo ? lo : r > hi ? hi : (int)r;
    return (uint32_t)c & (q == BP_DTYPE_I4 || q == BP_DTYPE_U4 ? 0xFu : 0xFFu);
  }
  if ((saturate || q == BP_DTYPE_F4E2M1FN) && !isnan(v)) {
    double m = cpu_q_float_max(q);
    v = v > m ? m : v < -m ? -m : v;
  }
  return bp_f64_to_small_float(q, v);
}

#endif /* BP_CPU_QUANT_H_ */
