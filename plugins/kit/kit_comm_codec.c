/* backplane plugin kit: the f32 kernels of the block codec of collective
 * payloads (kit_comm_quant.c builds encode and decode on them).
 *
 * One source for every ISA: the element loops below are written once as
 * always-inline functions on plain arrays, without branches (selects are
 * masks), so that GCC vectorizes them; each ISA variant (X(isa, target
 * attribute) of CODEC_ISAS) is a set of thin wrappers carrying the target
 * attribute, into which the loops are inlined and vectorized for that
 * ISA. The variant is chosen at run time (the widest the CPU runs, or
 * BACKPLANE_COMM_CODEC_ISA=generic|avx2|avx512, or
 * bp_kit_comm_codec_force for tests), once per process.
 *
 * Every variant gives the same bits: the same operations in the same
 * order, no fused multiply-add (the file is compiled with
 * -ffp-contract=off, and no variant enables FMA), and round-to-nearest
 * arithmetic as the tricks below assume (the default floating-point
 * environment; flush-to-zero would break the e4m3fn subnormals).
 *
 * int8 codes: trunc(|y| + 0.5) with the sign of y, y = x * inv and |y|
 * clamped to 127 (ties away from zero). e4m3fn codes: |y| clamped to 448 and
 * rounded to nearest even on f32's bits: normal values keep 3 mantissa
 * bits (add 0x7ffff plus the lowest kept bit, shift by 20, rebias the
 * exponent from 127 to 7); below 2^-6 the code is |y| x 2^9 rounded to
 * an integer by adding 2^23. Decoding e4m3fn puts the 7 code bits at
 * bit 20 of an f32 and multiplies by 2^120, which rebiases normal values
 * and turns f32 subnormals into e4m3fn's exactly; 0x7f and 0xff are NaN. */
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "bp_kit_comm.h"
#include "bp_plugin_common.h"
#include "kit_comm_codec.h"

#define CODEC_INLINE static inline __attribute__((always_inline))

CODEC_INLINE float codec_bits_f32(uint32_t b) {
  float f;
  memcpy(&f, &b, sizeof f);
  return f;
}
CODEC_INLINE uint32_t codec_f32_bits(float f) {
  uint32_t b;
  memcpy(&b, &f, sizeof b);
  return b;
}

/* The largest |x| as bits (integer order on |x| is float order; Inf is
 * 0x7f800000 and every NaN is above it). */
CODEC_INLINE uint32_t codec_absmax_bits(const float* restrict x, uint64_t m) {
  uint32_t top = 0;
  for (uint64_t i = 0; i < m; ++i) {
    const uint32_t a = codec_f32_bits(x[i]) & 0x7fffffffu;
    top = a > top ? a : top;
  }
  return top;
}

CODEC_INLINE void codec_encode_i8(const float* restrict x, uint64_t m, float inv,
                                  int8_t* restrict c) {
  for (uint64_t i = 0; i < m; ++i) {
    const uint32_t b = codec_f32_bits(x[i] * inv);
    uint32_t a = b & 0x7fffffffu;
    a = a < 0x42fe0000u ? a : 0x42fe0000u; /* |y| clamped to 127 */
    const int32_t q = (int32_t)(codec_bits_f32(a) + 0.5f), neg = -(int32_t)(b >> 31);
    c[i] = (int8_t)((q ^ neg) - neg);
  }
}

CODEC_INLINE void codec_encode_e4m3(const float* restrict x, uint64_t m, float inv,
                                    int8_t* restrict c) {
  for (uint64_t i = 0; i < m; ++i) {
    const uint32_t b = codec_f32_bits(x[i] * inv);
    const uint32_t sign = (b >> 24) & 0x80u;
    uint32_t a = b & 0x7fffffffu;
    a = a < 0x43e00000u ? a : 0x43e00000u; /* 448, the largest finite code */
    const uint32_t normal = ((a + 0x7ffffu + ((a >> 20) & 1u)) >> 20) - (120u << 3);
    const uint32_t sub = codec_f32_bits(codec_bits_f32(a) * 512.0f + 8388608.0f) - 0x4b000000u;
    const uint32_t is_normal = 0u - (uint32_t)(a >= 0x3c800000u); /* |y| >= 2^-6 */
    c[i] = (int8_t)(uint8_t)(sign | (normal & is_normal) | (sub & ~is_normal));
  }
}

CODEC_INLINE float codec_e4m3_value(uint8_t v) {
  const uint32_t a = v & 0x7fu;
  const uint32_t bits = codec_f32_bits(codec_bits_f32(((uint32_t)(v & 0x80u) << 24) | (a << 20)) *
                                       0x1p120f);
  const uint32_t nan = 0u - (uint32_t)(a == 0x7fu);
  return codec_bits_f32((bits & ~nan) | (0x7fc00000u & nan));
}

/* out[i] = decode(c[i]) * sc; or, accumulating, out[i] += it. */
CODEC_INLINE void codec_decode_i8(const int8_t* restrict c, uint64_t m, float sc,
                                  float* restrict out, int accumulate) {
  if (accumulate)
    for (uint64_t i = 0; i < m; ++i) out[i] += (float)c[i] * sc;
  else
    for (uint64_t i = 0; i < m; ++i) out[i] = (float)c[i] * sc;
}

CODEC_INLINE void codec_decode_e4m3(const int8_t* restrict c, uint64_t m, float sc,
                                    float* restrict out, int accumulate) {
  const uint8_t* u = (const uint8_t*)c;
  if (accumulate)
    for (uint64_t i = 0; i < m; ++i) out[i] += codec_e4m3_value(u[i]) * sc;
  else
    for (uint64_t i = 0; i < m; ++i) out[i] = codec_e4m3_value(u[i]) * sc;
}

#if (defined(__x86_64__) || defined(__i386__)) && defined(__GNUC__)
#define CODEC_ISAS(X)                                            \
  X(generic, )                                                   \
  X(avx2, __attribute__((target("avx2"))))                       \
  X(avx512, __attribute__((target("avx512f,avx512bw,avx512vl"))))
#else
#define CODEC_ISAS(X) X(generic, )
#endif

#define CODEC_VARIANT(ISA, ATTR)                                                           \
  ATTR static uint32_t codec_absmax_##ISA(const float* x, uint64_t m) {                    \
    return codec_absmax_bits(x, m);                                                        \
  }                                                                                        \
  ATTR static void codec_encode_##ISA(uint32_t comp, const float* x, uint64_t m, float inv, \
                                      int8_t* c) {                                         \
    if (comp == BP_DTYPE_I8) codec_encode_i8(x, m, inv, c);                                \
    else codec_encode_e4m3(x, m, inv, c);                                                  \
  }                                                                                        \
  ATTR static void codec_decode_##ISA(uint32_t comp, const int8_t* c, uint64_t m, float sc, \
                                      float* out, int accumulate) {                        \
    if (comp == BP_DTYPE_I8) codec_decode_i8(c, m, sc, out, accumulate);                   \
    else codec_decode_e4m3(c, m, sc, out, accumulate);                                     \
  }
CODEC_ISAS(CODEC_VARIANT)

static const bp_kit_codec_kernels_t k_variants[] = {
#define CODEC_ENTRY(ISA, ATTR) {#ISA, codec_absmax_##ISA, codec_encode_##ISA, codec_decode_##ISA},
    CODEC_ISAS(CODEC_ENTRY)
#undef CODEC_ENTRY
};
enum { CODEC_NVARIANTS = sizeof k_variants / sizeof k_variants[0] };

static int codec_runs(const char* name) {
  if (!strcmp(name, "generic")) return 1;
#if (defined(__x86_64__) || defined(__i386__)) && defined(__GNUC__)
  __builtin_cpu_init();
  if (!strcmp(name, "avx2")) return __builtin_cpu_supports("avx2");
  if (!strcmp(name, "avx512"))
    return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
           __builtin_cpu_supports("avx512vl");
#endif
  return 0;
}

/* Index of the variant in use; -1 until chosen. Chosen by the first caller
 * (threads racing to choose all compute the same value) or set by
 * bp_kit_comm_codec_force; relaxed atomics, since nothing else is published
 * through it. */
static _Atomic int g_variant = -1;

static int codec_choose(void) {
  const char* want = getenv("BACKPLANE_COMM_CODEC_ISA");
  for (int i = CODEC_NVARIANTS - 1; i >= 0; --i)
    if (codec_runs(k_variants[i].name) && (!want || !*want || !strcmp(want, k_variants[i].name)))
      return i;
  return 0; /* an unknown or unavailable name: the portable variant */
}

const bp_kit_codec_kernels_t* bp_kit_comm_codec(void) {
  int v = atomic_load_explicit(&g_variant, memory_order_relaxed);
  if (v < 0) {
    v = codec_choose();
    atomic_store_explicit(&g_variant, v, memory_order_relaxed);
  }
  return &k_variants[v];
}

int bp_kit_comm_codec_force(const char* name) {
  if (!name) {
    atomic_store_explicit(&g_variant, -1, memory_order_relaxed);
    return 1;
  }
  for (int i = 0; i < CODEC_NVARIANTS; ++i)
    if (!strcmp(name, k_variants[i].name)) {
      if (!codec_runs(name)) return 0;
      atomic_store_explicit(&g_variant, i, memory_order_relaxed);
      return 1;
    }
  return 0;
}
