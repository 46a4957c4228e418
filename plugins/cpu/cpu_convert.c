/* backplane CPU plugin: conversions between storage dtypes and kernel types.
 *
 * One loader and one storer per kernel type, each a switch over the storage
 * dtypes; every case is generated from the same two lists below. */
#include "cpu_kernels.h"

/* X(KT, KT C type, DTYPE, storage C type, decode to a C value, encode) */
#define CPU_DEC_PLAIN(v) (v)
#define CPU_ENC_F16(v) _Generic((v), float: bp_f32_to_f16, default: bp_f64_to_f16)(v)
#define CPU_ENC_BF16(v) _Generic((v), float: bp_f32_to_bf16, default: bp_f64_to_bf16)(v)
#define CPU_STORAGE(X, K, KT)                                                     \
  X(K, KT, F32, float, CPU_DEC_PLAIN, (float))                                    \
  X(K, KT, F64, double, CPU_DEC_PLAIN, (double))                                  \
  X(K, KT, F16, uint16_t, bp_f16_to_f32, CPU_ENC_F16)                             \
  X(K, KT, BF16, uint16_t, bp_bf16_to_f32, CPU_ENC_BF16)                          \
  X(K, KT, I8, int8_t, CPU_DEC_PLAIN, (int8_t))                                   \
  X(K, KT, U8, uint8_t, CPU_DEC_PLAIN, (uint8_t))                                 \
  X(K, KT, I16, int16_t, CPU_DEC_PLAIN, (int16_t))                                \
  X(K, KT, I32, int32_t, CPU_DEC_PLAIN, (int32_t))                                \
  X(K, KT, I64, int64_t, CPU_DEC_PLAIN, (int64_t))                                \
  X(K, KT, BOOL, uint8_t, CPU_DEC_PLAIN, CPU_TO_BOOL)                             \
  X(K, KT, F8E4M3FN, uint8_t, bp_f8e4m3fn_to_f32, bp_f64_to_f8e4m3fn)                   \
  X(K, KT, F8E5M2, uint8_t, bp_f8e5m2_to_f32, bp_f64_to_f8e5m2)

#define CPU_TO_BOOL(v) ((uint8_t)((v) != 0))
/* Value -> kernel type: bool normalizes to 0/1 (NaN is true). */
#define CPU_KCAST_F32(v) ((float)(v))
#define CPU_KCAST_F64(v) ((double)(v))
#define CPU_KCAST_I8(v) ((int8_t)(v))
#define CPU_KCAST_U8(v) ((uint8_t)(v))
#define CPU_KCAST_I16(v) ((int16_t)(v))
#define CPU_KCAST_I32(v) ((int32_t)(v))
#define CPU_KCAST_I64(v) ((int64_t)(v))
#define CPU_KCAST_BOOL(v) CPU_TO_BOOL(v)

#define CPU__LOAD_CASE(K, KT, D, ST, DEC, ENC)                                   \
  case BP_DTYPE_##D: {                                                           \
    const ST* s = (const ST*)src;                                                \
    if (stride == 1)                                                             \
      for (int64_t i = 0; i < n; i++) d[i] = CPU_KCAST_##K(DEC(s[i]));           \
    else                                                                         \
      for (int64_t i = 0; i < n; i++) d[i] = CPU_KCAST_##K(DEC(s[i * stride]));  \
    break;                                                                       \
  }
#define CPU__STORE_CASE(K, KT, D, ST, DEC, ENC)                                  \
  case BP_DTYPE_##D: {                                                           \
    ST* d = (ST*)dst;                                                            \
    if (stride == 1)                                                             \
      for (int64_t i = 0; i < n; i++) d[i] = ENC(s[i]);                          \
    else                                                                         \
      for (int64_t i = 0; i < n; i++) d[i * stride] = ENC(s[i]);                 \
    break;                                                                       \
  }
/* f16 <-> f32 through the F16C instructions where the CPU has them
 * (vcvtph2ps / vcvtps2ph, round to nearest even: the same results as
 * bp_f16_to_f32 / bp_f32_to_f16, NaN payloads aside). */
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>
__attribute__((target("avx,f16c"))) static void f16_to_f32_f16c(float* d, const uint16_t* s,
                                                               int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    _mm256_storeu_ps(d + i, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i*)(s + i))));
  for (; i < n; i++) d[i] = bp_f16_to_f32(s[i]);
}
__attribute__((target("avx,f16c"))) static void f32_to_f16_f16c(uint16_t* d, const float* s,
                                                               int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    _mm_storeu_si128((__m128i*)(d + i),
                     _mm256_cvtps_ph(_mm256_loadu_ps(s + i), _MM_FROUND_TO_NEAREST_INT));
  for (; i < n; i++) d[i] = bp_f32_to_f16(s[i]);
}
static int cpu_has_f16c(void) { return __builtin_cpu_supports("avx") && __builtin_cpu_supports("f16c"); }
#define CPU_F16C 1
#else
#define CPU_F16C 0
#endif

/* Vector fast paths of the dense f16 <-> f32 conversions; 0 when none
 * applies (the generic loops run). */
static inline int fast_load(int kt, void* dst, const unsigned char* src, int64_t stride, int64_t n,
                            uint32_t dtype) {
#if CPU_F16C
  if (kt == CPU_KT_F32 && dtype == BP_DTYPE_F16 && stride == 1 && cpu_has_f16c()) {
    f16_to_f32_f16c((float*)dst, (const uint16_t*)src, n);
    return 1;
  }
#endif
  (void)kt, (void)dst, (void)src, (void)stride, (void)n, (void)dtype;
  return 0;
}
static inline int fast_store(int kt, unsigned char* dst, int64_t stride, const void* src, int64_t n,
                             uint32_t dtype) {
#if CPU_F16C
  if (kt == CPU_KT_F32 && dtype == BP_DTYPE_F16 && stride == 1 && cpu_has_f16c()) {
    f32_to_f16_f16c((uint16_t*)dst, (const float*)src, n);
    return 1;
  }
#endif
  (void)kt, (void)dst, (void)src, (void)stride, (void)n, (void)dtype;
  return 0;
}

#define CPU__LOADER(K, KT, D)                                                              \
  static void load_##K(void* dst, const unsigned char* src, int64_t stride, int64_t n,     \
                       uint32_t src_dtype) {                                               \
    KT* restrict d = (KT*)dst;                                                             \
    if (fast_load(CPU_KT_##K, dst, src, stride, n, src_dtype)) return;                     \
    switch (src_dtype) {                                                                   \
      CPU_STORAGE(CPU__LOAD_CASE, K, KT)                                                   \
      default: break; /* rejected before any kernel runs */                                \
    }                                                                                      \
  }                                                                                        \
  static void store_##K(unsigned char* dst, int64_t stride, const void* src, int64_t n,    \
                        uint32_t dst_dtype) {                                              \
    const KT* restrict s = (const KT*)src;                                                 \
    if (fast_store(CPU_KT_##K, dst, stride, src, n, dst_dtype)) return;                    \
    switch (dst_dtype) {                                                                   \
      CPU_STORAGE(CPU__STORE_CASE, K, KT)                                                  \
      default: break;                                                                      \
    }                                                                                      \
  }
CPU_KTYPES(CPU__LOADER)

const cpu_load_fn cpu_load[CPU_KT_COUNT] = {
#define CPU__LOAD_ENTRY(K, T, D) [CPU_KT_##K] = load_##K,
    CPU_KTYPES(CPU__LOAD_ENTRY)
};
const cpu_store_fn cpu_store[CPU_KT_COUNT] = {
#define CPU__STORE_ENTRY(K, T, D) [CPU_KT_##K] = store_##K,
    CPU_KTYPES(CPU__STORE_ENTRY)
};
const uint32_t cpu_kt_dtype[CPU_KT_COUNT] = {
#define CPU__KT_DT(K, T, D) [CPU_KT_##K] = D,
    CPU_KTYPES(CPU__KT_DT)
};
const uint32_t cpu_kt_size[CPU_KT_COUNT] = {
#define CPU__KT_SZ(K, T, D) [CPU_KT_##K] = sizeof(T),
    CPU_KTYPES(CPU__KT_SZ)
};

int cpu_dtype_has_kernels(uint32_t dtype) {
  switch (dtype) {
#define CPU__HAS(K, KT, D, ST, DEC, ENC) case BP_DTYPE_##D:
    CPU_STORAGE(CPU__HAS, , )
#undef CPU__HAS
    case BP_DTYPE_C64: /* the fft ops and data movement */
      return 1;
    default:
      return 0;
  }
}

int cpu_kt_natural(uint32_t dtype) {
  switch (dtype) {
#define CPU__KT_NAT(K, T, D) case D: return CPU_KT_##K;
    CPU_KTYPES(CPU__KT_NAT)
    default: return CPU_KT_F32; /* f16, bf16, fp8 */
  }
}

void cpu_scalar_to_kt(const bp_scalar_t* s, int kt, void* out) {
  switch (kt) {
#define CPU__SC(K, T, D)                                                        \
  case CPU_KT_##K: {                                                            \
    T v = s->kind == BP_SCALAR_FLOAT ? CPU_KCAST_##K(s->v.f)                    \
                                     : CPU_KCAST_##K(cpu_scalar_i64(s, 0));     \
    memcpy(out, &v, sizeof v);                                                  \
    break;                                                                      \
  }
    CPU_KTYPES(CPU__SC)
    default: break;
  }
}

bp_status_t cpu_broadcast_strides(const bp_tensor_desc_t* in, uint32_t rank, const int64_t* sizes,
                                  int64_t* out, const char* what) {
  if (in->rank > rank)
    return cpu_error(BP_INVALID_ARGUMENT, "cpu: %s has rank %u, more than the output's %u", what,
                     in->rank, rank);
  uint32_t lead = rank - in->rank;
  for (uint32_t d = 0; d < rank; d++) {
    if (d < lead) {
      out[d] = 0;
      continue;
    }
    int64_t s = in->sizes[d - lead];
    if (s == sizes[d]) out[d] = sizes[d] == 1 ? 0 : in->strides[d - lead];
    else if (s == 1) out[d] = 0;
    else
      return cpu_error(BP_INVALID_ARGUMENT,
                       "cpu: %s size %lld in dim %u does not broadcast to %lld", what,
                       (long long)s, d - lead, (long long)sizes[d]);
  }
  return BP_OK;
}
