/* backplane CPU plugin: x86 kernels of the quantized matmuls (cpu_qmm.h),
 * compiled for AVX-512 with target attributes and chosen at run time.
 *
 * int8 GEMM (VNNI): b is packed into panels of 32 columns, four k per
 * 32-bit lane (the vpdpbusd layout); a into u8 rows (i8 + 128) padded to a
 * multiple of 4 in k and 8 in m. An 8 x 32 register tile accumulates
 * sum a' * b with vpdpbusd; the stored result subtracts
 * (128 + a_zp or a_zp) * colsum(b). Tasks are blocks of 64 rows of a
 * (kept in L2) over every panel.
 * 4-bit GEMV: w rows of 64-byte chunks (128 codes); each 32-bit lane of a
 * chunk holds 8 consecutive codes, so x is permuted per 128 elements into
 * 8 vectors (lane d of vector j = x[8d + j]); a code becomes a float by
 * vpermps over a 16-entry table indexed by its nibble (the low 4 bits of
 * a lane shifted by 4j). Groups of a multiple of 128 (GPTQ / AWQ's 128,
 * a chunk inside one group): the table holds the group's dequantized
 * weights (code - z) * s, so the scale and zero point cost one table per
 * row and group and nothing per element (one shift, one vpermps, one FMA
 * per 16 codes). Groups of 32 or 64: the table holds the codes, scales apply
 * per lane, zero points through per-group sums of x. Four rows of w share
 * the x loads, one from each quarter of w (w4_row_stride); blocks run in
 * parallel on the pool, each row's stream prefetched 2 KiB ahead and the
 * next block's scales with the current ones. 8-bit codes widen 16 at a
 * time (vpmovsxbd / vpmovzxbd) against x as given.
 * The int8-activation path (BP_QUANTIZE_INT8_ACTIVATIONS) quantizes x once
 * per call in AVX-512 (vpermt2b puts each chunk's even codes before its odd
 * ones) and dots the nibbles by vpdpbusd; with groups of a multiple of 128
 * the group scale applies once per group and row.
 */
#include <float.h>
#include <math.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "cpu_qmm.h"

int cpu_qmm_wq_fits(int bits, int64_t k, int64_t g, uint32_t s_dtype, uint32_t z_dtype) {
  int sf = s_dtype == BP_DTYPE_F32 || s_dtype == BP_DTYPE_F16 || s_dtype == BP_DTYPE_BF16;
  int zf = z_dtype == BP_DTYPE_INVALID || z_dtype == s_dtype || z_dtype == BP_DTYPE_I8 ||
           z_dtype == BP_DTYPE_U8;
  if (!sf || !zf || g <= 0 || k % g != 0) return 0;
  if (bits == 8) return g % 16 == 0;
  return (g == 32 || g == 64 || g % 128 == 0) && k % 128 == 0;
}

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>

#define QMM_TARGET __attribute__((target("avx512f,avx512bw,avx512vl,avx512vnni,f16c")))
/* the activation quantizer of the int8 path (vpermt2b) */
#define QMM_TARGET_VBMI __attribute__((target("avx512f,avx512bw,avx512vl,avx512vnni,avx512vbmi,f16c")))

/* Both honour the BP_CPU_ISA cap (base and avx2: the portable paths). */
int cpu_qmm_vnni_available(void) {
  __builtin_cpu_init();
  return cpu_isa_cap() >= 2 && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
         __builtin_cpu_supports("avx512vnni");
}
int cpu_qmm_avx512_available(void) {
  __builtin_cpu_init();
  return cpu_isa_cap() >= 2 && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
         __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("f16c");
}

/* ---- int8 GEMM -------------------------------------------------------------------- */

enum { S8_MR = 8, S8_NR = 32, S8_MC = 64 };

/* 64-byte aligned memory; C11 aligned_alloc wants a size that is a
 * multiple of the alignment. */
static void* alloc64(size_t bytes) { return aligned_alloc(64, (bytes + 63) / 64 * 64); }

typedef struct s8_job {
  const uint8_t* a;
  int a_u8;
  const int8_t* bp; /* packed panels: [panel][kq][32][4] */
  const int32_t* colsum;
  int32_t zc; /* 128 + a_zp (i8 a) or a_zp (u8 a) */
  int64_t m, n, k, kp, kq, panels;
  int32_t* c;
  _Atomic int failed;
} s8_job_t;

QMM_TARGET static void s8_pack_b(void* ctx, int64_t begin, int64_t end) {
  s8_job_t* j = ctx;
  const int8_t* b = (const int8_t*)j->a; /* set by the caller for this pass */
  int8_t* bp = (int8_t*)j->bp;
  for (int64_t p = begin; p < end; p++) {
    int8_t* dst = bp + p * j->kq * 128;
    for (int64_t kk = 0; kk < j->kp; kk++) {
      for (int64_t col = 0; col < S8_NR; col++) {
        int64_t nn = p * S8_NR + col;
        dst[((kk >> 2) * S8_NR + col) * 4 + (kk & 3)] = kk < j->k && nn < j->n ? b[kk * j->n + nn] : 0;
      }
    }
  }
}

QMM_TARGET static inline void s8_tile(const uint8_t* ap, int64_t kp, const int8_t* bp, int64_t kq,
                                      int32_t* out /* [8][32] */) {
  __m512i c00 = _mm512_setzero_si512(), c01 = c00, c10 = c00, c11 = c00, c20 = c00, c21 = c00,
          c30 = c00, c31 = c00, c40 = c00, c41 = c00, c50 = c00, c51 = c00, c60 = c00, c61 = c00,
          c70 = c00, c71 = c00;
  for (int64_t q = 0; q < kq; q++) {
    __m512i b0 = _mm512_load_si512((const void*)(bp + q * 128));
    __m512i b1 = _mm512_load_si512((const void*)(bp + q * 128 + 64));
    const uint8_t* a = ap + q * 4;
#define S8_ROW(i)                                                  \
  {                                                                \
    int32_t w;                                                     \
    memcpy(&w, a + (i) * kp, 4);                                   \
    __m512i av = _mm512_set1_epi32(w);                             \
    c##i##0 = _mm512_dpbusd_epi32(c##i##0, av, b0);                \
    c##i##1 = _mm512_dpbusd_epi32(c##i##1, av, b1);                \
  }
    S8_ROW(0) S8_ROW(1) S8_ROW(2) S8_ROW(3) S8_ROW(4) S8_ROW(5) S8_ROW(6) S8_ROW(7)
#undef S8_ROW
  }
#define S8_OUT(i)                                        \
  _mm512_storeu_si512((void*)(out + (i) * 32), c##i##0); \
  _mm512_storeu_si512((void*)(out + (i) * 32 + 16), c##i##1);
  S8_OUT(0) S8_OUT(1) S8_OUT(2) S8_OUT(3) S8_OUT(4) S8_OUT(5) S8_OUT(6) S8_OUT(7)
#undef S8_OUT
}

QMM_TARGET static void s8_rows(void* ctx, int64_t begin, int64_t end) {
  s8_job_t* j = ctx;
  for (int64_t blk = begin; blk < end; blk++) {
    int64_t m0 = blk * S8_MC, m1 = m0 + S8_MC < j->m ? m0 + S8_MC : j->m;
    int64_t rows = (m1 - m0 + S8_MR - 1) / S8_MR * S8_MR;
    uint8_t* ap = alloc64((size_t)(rows * j->kp));
    if (!ap) { atomic_store(&j->failed, 1); return; }
    for (int64_t r = 0; r < rows; r++) {
      uint8_t* d = ap + r * j->kp;
      if (m0 + r >= m1) { memset(d, 0, (size_t)j->kp); continue; }
      const uint8_t* s = j->a + (m0 + r) * j->k;
      if (j->a_u8) memcpy(d, s, (size_t)j->k);
      else
        for (int64_t t = 0; t < j->k; t++) d[t] = (uint8_t)(s[t] ^ 0x80u); /* i8 + 128 */
      memset(d + j->k, 0, (size_t)(j->kp - j->k));
    }
    _Alignas(64) int32_t tile[S8_MR * S8_NR];
    for (int64_t p = 0; p < j->panels; p++) {
      const int8_t* bp = j->bp + p * j->kq * 128;
      int64_t n0 = p * S8_NR, nw = j->n - n0 < S8_NR ? j->n - n0 : S8_NR;
      for (int64_t r0 = 0; r0 < rows; r0 += S8_MR) {
        s8_tile(ap + r0 * j->kp, j->kp, bp, j->kq, tile);
        for (int64_t i = 0; i < S8_MR && m0 + r0 + i < m1; i++) {
          int32_t* crow = j->c + (m0 + r0 + i) * j->n + n0;
          for (int64_t col = 0; col < nw; col++)
            crow[col] = (int32_t)((uint32_t)tile[i * S8_NR + col] -
                                  (uint32_t)j->zc * (uint32_t)j->colsum[n0 + col]);
        }
      }
    }
    free(ap);
  }
}

bp_status_t cpu_qmm_s8_gemm_vnni(const uint8_t* a, int a_u8, int32_t a_zp, const int8_t* b,
                                 int64_t m, int64_t n, int64_t k, int32_t* c) {
  s8_job_t j;
  memset(&j, 0, sizeof j);
  j.m = m, j.n = n, j.k = k;
  j.kp = (k + 3) / 4 * 4;
  j.kq = j.kp / 4;
  j.panels = (n + S8_NR - 1) / S8_NR;
  int8_t* bp = alloc64((size_t)(j.panels * j.kq * 128));
  int32_t* colsum = calloc((size_t)(n > 0 ? n : 1), sizeof(int32_t));
  if (!bp || !colsum) {
    free(bp), free(colsum);
    return cpu_error(BP_RESOURCE_EXHAUSTED, "cpu: scaled_mm: no memory to pack b (%lld x %lld)",
                     (long long)k, (long long)n);
  }
  for (int64_t t = 0; t < k; t++)
    for (int64_t col = 0; col < n; col++) colsum[col] += b[t * n + col];
  j.a = (const uint8_t*)b; /* the packing pass reads b */
  j.bp = bp;
  cpu_parallel_for(j.panels, 4, s8_pack_b, &j);
  j.a = a;
  j.a_u8 = a_u8;
  j.colsum = colsum;
  j.zc = a_u8 ? a_zp : a_zp + 128;
  j.c = c;
  cpu_parallel_for((m + S8_MC - 1) / S8_MC, 1, s8_rows, &j);
  free(bp), free(colsum);
  if (atomic_load(&j.failed)) return cpu_error(BP_RESOURCE_EXHAUSTED, "cpu: scaled_mm: out of memory");
  return BP_OK;
}

/* ---- int4 weight-only GEMV -------------------------------------------------------- */

typedef struct w4_job {
  const uint8_t* w;
  const float* xp;   /* [m][k] permuted per 128: chunk c, vector j, lane d = x[128c + 8d + j] */
  const float* xsum; /* [m][groups] */
  /* int8 activations (cpu_qmm_wq_gemv_q8): x quantized per block of 32 */
  const int8_t* xq;    /* [m][k] per chunk of 128: the 64 even elements, then the 64 odd ones */
  const int32_t* xoff; /* [m][k / 8]: -8 * the sum of each lane's 8 codes (signed w), or NULL */
  const float* xd;     /* [m][k / 32]: the blocks' scales */
  const void* s;     /* [n][groups] of s_dtype */
  const void* z;     /* [n][groups] of z_dtype, or NULL */
  uint32_t s_dtype, z_dtype;
  const double* bias;
  int64_t m, n, k, g, groups;
  int w_signed, bits;
  int ztab; /* the dot products include the zero points (w4t_dot_*): no zero-point term */
  int64_t rs; /* rows between a 4-row block's rows: 1, or n / 4 (w4_rows) */
  float* y;
} w4_job_t;

/* Up to 16 consecutive scales from index i as floats (the rest 0). */
QMM_TARGET static inline __m512 w4_scales16(const void* s, uint32_t dt, int64_t i, int count) {
  __mmask16 mk = (__mmask16)((1u << count) - 1u);
  if (dt == BP_DTYPE_F32) return _mm512_maskz_loadu_ps(mk, (const float*)s + i);
  __m256i h = _mm256_maskz_loadu_epi16(mk, (const uint16_t*)s + i);
  if (dt == BP_DTYPE_F16) return _mm512_cvtph_ps(h);
  return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16)); /* bf16 */
}

/* Up to 4 (count) consecutive scales from index i as floats (the rest 0). */
QMM_TARGET static inline __m128 w4_scales(const void* s, uint32_t dt, int64_t i, int count) {
  return _mm512_castps512_ps128(w4_scales16(s, dt, i, count));
}

/* Up to 16 consecutive zero points from index i as floats (the rest 0):
 * of the scales' dtype, or int8 / uint8. */
QMM_TARGET static inline __m512 w4_zeros16(const void* z, uint32_t dt, uint32_t s_dt, int64_t i, int count) {
  if (dt == s_dt) return w4_scales16(z, dt, i, count);
  __m128i b = _mm_maskz_loadu_epi8((__mmask16)((1u << count) - 1u), (const int8_t*)z + i);
  return _mm512_cvtepi32_ps(dt == BP_DTYPE_I8 ? _mm512_cvtepi8_epi32(b) : _mm512_cvtepu8_epi32(b));
}

static inline double w4_elem(const void* p, uint32_t dt, int64_t i) {
  switch (dt) {
    case BP_DTYPE_F32: return ((const float*)p)[i];
    case BP_DTYPE_F16: return bp_f16_to_f32(((const uint16_t*)p)[i]);
    case BP_DTYPE_BF16: return bp_bf16_to_f32(((const uint16_t*)p)[i]);
    case BP_DTYPE_I8: return ((const int8_t*)p)[i];
    default: return ((const uint8_t*)p)[i]; /* u8 */
  }
}

/* The scale of each 32-bit lane of a 128-code chunk of row `row` (lane d
 * holds codes 8d .. 8d + 7), from group g0 on. */
QMM_TARGET static inline __m512 w4_lane_scales(const w4_job_t* j, int64_t row, int64_t g0, int ng,
                                               __m512i gidx) {
  __m128 s4 = w4_scales(j->s, j->s_dtype, row * j->groups + g0, ng);
  return ng == 1 ? _mm512_broadcastss_ps(s4) : _mm512_permutexvar_ps(gidx, _mm512_castps128_ps512(s4));
}

/* The loops over a kernel's R rows, unrolled: left to GCC they stay
 * rolled, with the accumulators and row pointers in memory, which cost a
 * third of the in-cache speed. */
#define W4_EACH_ROW(r, R) _Pragma("GCC unroll 8") for (int r = 0; r < (R); r++)

/* What a 4-bit dot over R rows of w starting at row0 sets up: the lanes'
 * group index (gidx) and groups per chunk (ng), the rows, the totals. */
#define W4_SETUP(R)                                                                             \
  const int64_t lpg = j->g / 8; /* 32-bit lanes per group: 4, 8, 16 or more */                  \
  const __m512i gidx = _mm512_srli_epi32(                                                       \
      _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15), lpg == 4 ? 2 : 3); \
  const int ng = lpg >= 16 ? 1 : (int)(16 / lpg);                                               \
  const uint8_t* wr[R];                                                                         \
  __m512 tot[R];                                                                                \
  W4_EACH_ROW(r, R) {                                                                 \
    wr[r] = j->w + W4_ROW(r) * (j->k / 2);                                                     \
    tot[r] = _mm512_setzero_ps();                                                               \
  }

/* Row r of the block at row0, and that row in the next block. */
#define W4_ROW(r) (row0 + (int64_t)(r) * j->rs)
#define W4_NEXT(r) (W4_ROW(r) + (j->rs > 1 ? 1 : 4))

/* Prefetches 2 KiB ahead of chunk c in each row's stream (a prefetch past
 * the end never faults): with a block's rows in the quarters of w a quarter
 * is read front to back, so 2 KiB ahead is the same row (long rows) or the
 * next block's (rows of 2 KiB and less), the distance that keeps enough
 * reads in flight from memory: at [32768, 32768] 2 KiB measured 60-66 GB/s
 * against 47-53 for the next row's chunk (16 KiB ahead), 46-60 for 0.5, 1.5,
 * 3 and 4 KiB, and 38-40 with no prefetch. Non-temporal: the weights are
 * read once per call, and the hint measured faster than T0 from memory and
 * no slower in cache. */
#define W4_PREFETCH_AHEAD 2048
#define W4_PREFETCH(r, c) _mm_prefetch((const char*)(wr[r] + (c) * 64 + W4_PREFETCH_AHEAD), _MM_HINT_NTA)

/* Prefetches the scales (and zero points) from group g0 on of row `row`,
 * the same place in the next block's rows: a decode row's scales are a
 * cache line or a few, and left to the demand load each block stalled on
 * them (a sixth of the 4-bit kernel's time from memory). */
#define W4_PREFETCH_SCALES(row, g0)                                                              \
  do {                                                                                           \
    int64_t at_ = (row) * j->groups + (g0);                                                       \
    _mm_prefetch((const char*)j->s + at_ * (int64_t)bp_dtype_size(j->s_dtype), _MM_HINT_T0);      \
    if (j->z) _mm_prefetch((const char*)j->z + at_ * (int64_t)bp_dtype_size(j->z_dtype), _MM_HINT_T0); \
  } while (0)

/* The 16 values of a 4-bit code (signed: two's complement nibbles). */
#define W4_CODES(sgn)                                                            \
  ((sgn) ? _mm512_setr_ps(0, 1, 2, 3, 4, 5, 6, 7, -8, -7, -6, -5, -4, -3, -2, -1) \
         : _mm512_setr_ps(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15))

/* Chunk c of row r's codes, held in a register: left to GCC, each of the
 * chunk's seven shifts re-reads it from memory (a load folded into the
 * shift), and the extra loads cost 6% of the f32 kernel's in-cache speed
 * (54.2 -> 57.5 Gcodes/s on one core). The empty asm makes the value
 * opaque, so the shifts take it from the register. */
QMM_TARGET static inline __m512i w4_load_pinned(const uint8_t* p) {
  __m512i v = _mm512_loadu_si512((const void*)p);
  __asm__("" : "+v"(v));
  return v;
}
#define W4_LOAD(r, c) w4_load_pinned(wr[r] + (c) * 64)

/* acc0/acc1[r] += the 128 codes v[r] of a chunk, through table TBL(r),
 * times the chunk's permuted x (xc). */
#define W4_CHUNK(R, TBL)                                                                 \
  for (int q = 0; q < 8; q += 2) {                                                       \
    __m512 x0 = _mm512_loadu_ps(xc + q * 16), x1 = _mm512_loadu_ps(xc + q * 16 + 16);     \
    W4_EACH_ROW(r, R) {                                                        \
      __m512 f0 = _mm512_permutexvar_ps(_mm512_srli_epi32(v[r], 4 * q), TBL(r));         \
      __m512 f1 = _mm512_permutexvar_ps(_mm512_srli_epi32(v[r], 4 * q + 4), TBL(r));     \
      acc0[r] = _mm512_fmadd_ps(f0, x0, acc0[r]);                                        \
      acc1[r] = _mm512_fmadd_ps(f1, x1, acc1[r]);                                        \
    }                                                                                    \
  }
#define W4_SHARED_TBL(r) tbl
#define W4_ROW_TBL(r) tbl[r]

/* Dot products of one permuted x row with R rows of w (codes times their
 * group scales; the zero-point term is the caller's). */
#define W4_ROWS(R)                                                                              \
  QMM_TARGET static void w4_dot_##R(const w4_job_t* j, int64_t row0, int64_t mm, float* dot) {  \
    const float* xp = j->xp + mm * j->k;                                                         \
    const __m512 tbl = W4_CODES(j->w_signed);                                                    \
    W4_SETUP(R)                                                                                  \
    for (int64_t c = 0; c < j->k / 128; c++) {                                                   \
      const float* xc = xp + c * 128;                                                            \
      __m512 acc0[R], acc1[R];                                                                   \
      __m512i v[R];                                                                              \
      W4_EACH_ROW(r, R) {                                                              \
        v[r] = W4_LOAD(r, c);                                                                    \
        W4_PREFETCH(r, c);                                                                       \
        acc0[r] = _mm512_setzero_ps();                                                           \
        acc1[r] = _mm512_setzero_ps();                                                           \
      }                                                                                          \
      W4_CHUNK(R, W4_SHARED_TBL)                                                                 \
      int64_t g0 = c * 128 / j->g;                                                               \
      if (c % 4 == 0) W4_EACH_ROW(r, R) W4_PREFETCH_SCALES(W4_NEXT(r), g0);                    \
      W4_EACH_ROW(r, R) {                                                              \
        __m512 sv = w4_lane_scales(j, W4_ROW(r), g0, ng, gidx);                                    \
        tot[r] = _mm512_fmadd_ps(_mm512_add_ps(acc0[r], acc1[r]), sv, tot[r]);                   \
      }                                                                                          \
    }                                                                                            \
    W4_EACH_ROW(r, R) dot[r] = _mm512_reduce_add_ps(tot[r]);                           \
  }
W4_ROWS(4)
W4_ROWS(1)

/* The same dot for groups of a multiple of 128 codes (a chunk never spans
 * two groups): per row and group a 16-entry table holds the dequantized
 * weights (code - z) * s of the 16 codes, so vpermps turns a nibble into
 * its weight and the scale and zero point cost nothing per element: per
 * 16 codes one shift, one vpermps and one FMA, accumulated over the whole
 * row (two accumulators per row). The result includes the zero points. */
#define W4T_ROWS(R)                                                                              \
  QMM_TARGET static void w4t_dot_##R(const w4_job_t* j, int64_t row0, int64_t mm, float* dot) {  \
    const float* xp = j->xp + mm * j->k;                                                          \
    const __m512 codes = W4_CODES(j->w_signed);                                                   \
    const int64_t cpg = j->g / 128; /* chunks per group */                                        \
    const uint8_t* wr[R];                                                                         \
    __m512 acc0[R], acc1[R];                                                                      \
    W4_EACH_ROW(r, R) {                                                                 \
      wr[r] = j->w + W4_ROW(r) * (j->k / 2);                                                     \
      acc0[r] = _mm512_setzero_ps();                                                              \
      acc1[r] = _mm512_setzero_ps();                                                              \
    }                                                                                             \
    float sc[R][16], zc[R][16];                                                                   \
    for (int64_t gi = 0; gi < j->groups; gi++) {                                                  \
      const int64_t gl = gi % 16;                                                                 \
      if (gl == 0) { /* the scales and zero points of the next 16 groups, converted at once */   \
        const int ng = j->groups - gi < 16 ? (int)(j->groups - gi) : 16;                          \
        W4_EACH_ROW(r, R) {                                                             \
          W4_PREFETCH_SCALES(W4_NEXT(r), gi);                                                   \
          int64_t at = W4_ROW(r) * j->groups + gi;                                               \
          _mm512_storeu_ps(sc[r], w4_scales16(j->s, j->s_dtype, at, ng));                         \
          _mm512_storeu_ps(zc[r], j->z ? w4_zeros16(j->z, j->z_dtype, j->s_dtype, at, ng)         \
                                       : _mm512_setzero_ps());                                    \
        }                                                                                         \
      }                                                                                           \
      __m512 tbl[R]; /* without zero points one multiply: 2% of the in-cache speed */            \
      W4_EACH_ROW(r, R)                                                                 \
        tbl[r] = _mm512_mul_ps(j->z ? _mm512_sub_ps(codes, _mm512_set1_ps(zc[r][gl])) : codes,     \
                               _mm512_set1_ps(sc[r][gl]));                                        \
      for (int64_t c = gi * cpg; c < (gi + 1) * cpg; c++) {                                       \
        const float* xc = xp + c * 128;                                                           \
        __m512i v[R];                                                                             \
        W4_EACH_ROW(r, R) {                                                             \
          v[r] = W4_LOAD(r, c);                                                                   \
          W4_PREFETCH(r, c);                                                                      \
        }                                                                                         \
        W4_CHUNK(R, W4_ROW_TBL)                                                                   \
      }                                                                                           \
    }                                                                                             \
    W4_EACH_ROW(r, R) dot[r] = _mm512_reduce_add_ps(_mm512_add_ps(acc0[r], acc1[r]));  \
  }
W4T_ROWS(4)
W4T_ROWS(1)

/* 8-bit codes: 16 consecutive codes per vector against x as given; one
 * scale per group of a multiple of 16. */
#define W8_ROWS(R)                                                                             \
  QMM_TARGET static void w8_dot_##R(const w4_job_t* j, int64_t row0, int64_t mm, float* dot) { \
    const float* x = j->xp + mm * j->k;                                                         \
    const int8_t* wr[R];                                                                        \
    __m512 tot[R];                                                                              \
    W4_EACH_ROW(r, R) {                                                               \
      wr[r] = (const int8_t*)j->w + W4_ROW(r) * j->k;                                          \
      tot[r] = _mm512_setzero_ps();                                                             \
    }                                                                                           \
    for (int64_t gi = 0; gi < j->groups; gi++) {                                                \
      __m512 acc[R];                                                                            \
      W4_EACH_ROW(r, R) {                                                             \
        acc[r] = _mm512_setzero_ps();                                                           \
        if (gi % 16 == 0) W4_PREFETCH_SCALES(W4_NEXT(r), gi);                                  \
      }                                                                                         \
      for (int64_t c = gi * j->g; c < (gi + 1) * j->g; c += 16) {                               \
        __m512 xv = _mm512_loadu_ps(x + c);                                                     \
        W4_EACH_ROW(r, R) {                                                           \
          __m128i b = _mm_loadu_si128((const __m128i*)(const void*)(wr[r] + c));                \
          __m512i v = j->w_signed ? _mm512_cvtepi8_epi32(b) : _mm512_cvtepu8_epi32(b);           \
          acc[r] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(v), xv, acc[r]);                           \
        }                                                                                       \
      }                                                                                         \
      W4_EACH_ROW(r, R)                                                               \
        tot[r] = _mm512_fmadd_ps(                                                               \
            acc[r], _mm512_set1_ps((float)w4_elem(j->s, j->s_dtype, W4_ROW(r) * j->groups + gi)), \
            tot[r]);                                                                            \
    }                                                                                           \
    W4_EACH_ROW(r, R) dot[r] = _mm512_reduce_add_ps(tot[r]);                          \
  }
W8_ROWS(4)
W8_ROWS(1)

/* The lane sums of one 64-byte chunk of w (at wc) against the chunk's x
 * codes (xe: even elements, xodd: odd ones), starting from a0. */
QMM_TARGET static inline __m512i q4q8_lanes(const uint8_t* wc, __m512i flip, __m512i a0, __m512i xe,
                                            __m512i xodd) {
  const __m512i low4 = _mm512_set1_epi8(0x0F);
  __m512i v = _mm512_loadu_si512((const void*)wc);
  /* (v ^ flip) & 0x0F in one vpternlogd (imm 0x28: (A ^ B) & C) */
  __m512i lo = _mm512_ternarylogic_epi32(v, flip, low4, 0x28);
  __m512i hi = _mm512_ternarylogic_epi32(_mm512_srli_epi16(v, 4), flip, low4, 0x28);
  return _mm512_dpbusd_epi32(_mm512_dpbusd_epi32(a0, lo, xe), hi, xodd);
}

/* The x side of chunk c: its even and odd codes, the lanes' start values
 * (xoff) and each lane's x block scale. */
#define Q4Q8_XCHUNK(c)                                                                           \
  const __m512i xe = _mm512_load_si512((const void*)(xq + (c) * 128));                           \
  const __m512i xodd = _mm512_load_si512((const void*)(xq + (c) * 128 + 64));                    \
  const __m512i a0 = xo ? _mm512_loadu_si512((const void*)(xo + (c) * 16)) : _mm512_setzero_si512(); \
  const __m512 dx = _mm512_permutexvar_ps(bidx, _mm512_castps128_ps512(_mm_loadu_ps(xd + (c) * 4)));

/* 4-bit codes against int8 activations (llama.cpp's Q4 x Q8 dot): a 64-byte
 * chunk of w holds 128 codes; its low nibbles are the chunk's even
 * elements, its high nibbles the odd ones, each 64 bytes against 64 int8
 * codes of x by vpdpbusd (u8 x s8, four products per 32-bit lane). Lane d
 * then sums elements 8d .. 8d + 7 of the chunk: one x block (32 elements)
 * spans 4 lanes, one group of w 4, 8 or 16 (or the whole chunk), so the
 * integer lane sums convert to f32 once per chunk times (w scale * x
 * scale) per lane. Signed codes are made unsigned by flipping bit 3 of
 * each nibble (c + 8); the lanes start at -8 * their x sum (xoff). */
#define Q4Q8_ROWS(R)                                                                            \
  QMM_TARGET static void q4q8_dot_##R(const w4_job_t* j, int64_t row0, int64_t mm, float* dot) { \
    const __m512i iota = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15); \
    const __m512i bidx = _mm512_srli_epi32(iota, 2); /* lane -> x block of the chunk */           \
    const __m512i flip = _mm512_set1_epi8(j->w_signed ? (char)0x88 : 0);                          \
    const int8_t* xq = j->xq + mm * j->k;                                                        \
    const int32_t* xo = j->xoff ? j->xoff + mm * (j->k / 8) : NULL;                              \
    const float* xd = j->xd + mm * (j->k / 32);                                                  \
    W4_SETUP(R)                                                                                  \
    for (int64_t c = 0; c < j->k / 128; c++) {                                                   \
      Q4Q8_XCHUNK(c)                                                                             \
      int64_t g0 = c * 128 / j->g;                                                               \
      W4_EACH_ROW(r, R) {                                                              \
        if (c % 4 == 0) W4_PREFETCH_SCALES(W4_NEXT(r), g0);                                    \
        W4_PREFETCH(r, c);                                                                       \
        __m512i acc = q4q8_lanes(wr[r] + c * 64, flip, a0, xe, xodd);                     \
        __m512 sv = w4_lane_scales(j, W4_ROW(r), g0, ng, gidx);                                    \
        tot[r] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(acc), _mm512_mul_ps(sv, dx), tot[r]);        \
      }                                                                                          \
    }                                                                                            \
    W4_EACH_ROW(r, R) dot[r] = _mm512_reduce_add_ps(tot[r]);                           \
  }
Q4Q8_ROWS(4)
Q4Q8_ROWS(1)

/* The same for groups of a multiple of 128 codes: the group's scale is one
 * number for whole chunks, so it joins the x blocks' scales (one multiply
 * per chunk and row) and a chunk costs one FMA. The scales of 16 groups of
 * each row are converted at once, ahead of their chunks: done per group,
 * that scalar work cost more than the chunk's dot products with g = 128. */
#define Q4Q8G_ROWS(R)                                                                           \
  QMM_TARGET static void q4q8g_dot_##R(const w4_job_t* j, int64_t row0, int64_t mm, float* dot) { \
    const __m512i bidx = _mm512_srli_epi32(                                                      \
        _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15), 2);             \
    const __m512i flip = _mm512_set1_epi8(j->w_signed ? (char)0x88 : 0);                          \
    const int8_t* xq = j->xq + mm * j->k;                                                        \
    const int32_t* xo = j->xoff ? j->xoff + mm * (j->k / 8) : NULL;                              \
    const float* xd = j->xd + mm * (j->k / 32);                                                  \
    const int64_t cpg = j->g / 128;                                                              \
    const uint8_t* wr[R];                                                                        \
    __m512 tot[R];                                                                               \
    W4_EACH_ROW(r, R) {                                                                \
      wr[r] = j->w + W4_ROW(r) * (j->k / 2);                                                    \
      tot[r] = _mm512_setzero_ps();                                                              \
    }                                                                                            \
    for (int64_t g0 = 0; g0 < j->groups; g0 += 16) {                                             \
      const int ng = j->groups - g0 < 16 ? (int)(j->groups - g0) : 16;                           \
      float sc[R][16];                                                                           \
      W4_EACH_ROW(r, R) W4_PREFETCH_SCALES(W4_NEXT(r), g0);                                    \
      W4_EACH_ROW(r, R)                                                                \
        _mm512_storeu_ps(sc[r], w4_scales16(j->s, j->s_dtype, W4_ROW(r) * j->groups + g0, ng)); \
      for (int gl = 0; gl < ng; gl++)                                                            \
        for (int64_t c = (g0 + gl) * cpg; c < (g0 + gl + 1) * cpg; c++) {                        \
          Q4Q8_XCHUNK(c)                                                                         \
          W4_EACH_ROW(r, R) {                                                          \
            W4_PREFETCH(r, c);                                                                   \
            __m512i acc = q4q8_lanes(wr[r] + c * 64, flip, a0, xe, xodd);                 \
            tot[r] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(acc), _mm512_mul_ps(dx, _mm512_set1_ps(sc[r][gl])), \
                                     tot[r]);                                                    \
          }                                                                                      \
        }                                                                                        \
    }                                                                                            \
    W4_EACH_ROW(r, R) dot[r] = _mm512_reduce_add_ps(tot[r]);                           \
  }
Q4Q8G_ROWS(4)
Q4Q8G_ROWS(1)

typedef void (*wq_dot_fn)(const w4_job_t* j, int64_t row0, int64_t mm, float* dot);

/* The rows of a 4-row block: one from each quarter of w (rows b, b + n/4,
 * b + n/2, b + 3n/4), so that a thread walking its blocks reads four
 * sequential streams a quarter of the weights apart instead of one: from
 * memory that kept more reads in flight (64 layers of 4096 x 4096: 0.28 ->
 * 0.19 ms per call with int8 activations, 0.31 -> 0.25 ms with f32 ones;
 * no change in cache). Adjacent rows (1) when n is not a multiple of 4 or
 * is small. */
static int64_t w4_row_stride(int64_t n) { return n % 4 == 0 && n >= 64 ? n / 4 : 1; }

QMM_TARGET static void w4_rows(void* ctx, int64_t begin, int64_t end) {
  const w4_job_t* j = ctx;
  /* groups of a multiple of 128 codes: the per-group kernels */
  int whole = j->g % 128 == 0;
  wq_dot_fn dot4 = j->bits == 8 ? w8_dot_4
                   : j->xq      ? (whole ? q4q8g_dot_4 : q4q8_dot_4)
                                : (j->ztab ? w4t_dot_4 : w4_dot_4);
  wq_dot_fn dot1 = j->bits == 8 ? w8_dot_1
                   : j->xq      ? (whole ? q4q8g_dot_1 : q4q8_dot_1)
                                : (j->ztab ? w4t_dot_1 : w4_dot_1);
  for (int64_t blk = begin; blk < end; blk++) {
    /* block blk: rows blk + q * rs (quarters, rs = n / 4), or 4 adjacent rows */
    int64_t n0 = j->rs > 1 ? blk : blk * 4, rows = j->rs > 1 || j->n - n0 >= 4 ? 4 : j->n - n0;
    for (int64_t mm = 0; mm < j->m; mm++) {
      float dot[4];
      if (rows == 4) dot4(j, n0, mm, dot);
      else
        for (int64_t r = 0; r < rows; r++) dot1(j, n0 + r, mm, dot + r);
      for (int64_t r = 0; r < rows; r++) {
        int64_t row = n0 + r * j->rs;
        double zterm = 0.0;
        if (j->z && !j->ztab) {
          int64_t base = row * j->groups;
          const float* xs = j->xsum + mm * j->groups;
          for (int64_t gi = 0; gi < j->groups; gi++)
            zterm += w4_elem(j->s, j->s_dtype, base + gi) * w4_elem(j->z, j->z_dtype, base + gi) * xs[gi];
        }
        j->y[mm * j->n + row] = (float)((double)dot[r] - zterm + (j->bias ? j->bias[row] : 0.0));
      }
    }
  }
}

/* x's sums per group (the zero-point term), in double. */
static void group_sums(const float* x, int64_t m, int64_t k, int64_t g, float* xsum) {
  int64_t groups = k / g;
  for (int64_t mm = 0; mm < m; mm++)
    for (int64_t gi = 0; gi < groups; gi++) {
      double acc = 0.0;
      for (int64_t t = 0; t < g; t++) acc += x[mm * k + gi * g + t];
      xsum[mm * groups + gi] = (float)acc;
    }
}

bp_status_t cpu_qmm_wq_gemv_avx512(const uint8_t* w, int bits, int w_signed, const float* x,
                                   int64_t m, int64_t n, int64_t k, int64_t g, const void* s,
                                   uint32_t s_dtype, const void* z, uint32_t z_dtype,
                                   const double* bias, float* y) {
  if (!cpu_qmm_wq_fits(bits, k, g, s_dtype, z_dtype))
    return cpu_error(BP_UNIMPLEMENTED, "cpu: weight_only_mm: shape or dtypes outside the AVX-512 path");
  w4_job_t j;
  memset(&j, 0, sizeof j);
  j.groups = k / g;
  float* xp = malloc((size_t)(m * k) * sizeof(float));
  float* xsum = malloc((size_t)(m * j.groups) * sizeof(float));
  if (!xp || !xsum) {
    free(xp), free(xsum);
    return cpu_error(BP_RESOURCE_EXHAUSTED, "cpu: weight_only_mm: out of memory");
  }
  for (int64_t mm = 0; mm < m; mm++) {
    const float* xr = x + mm * k;
    float* pr = xp + mm * k;
    if (bits == 8) memcpy(pr, xr, sizeof(float) * (size_t)k); /* 8-bit codes: x as given */
    else
      for (int64_t c = 0; c < k / 128; c++)
        for (int jv = 0; jv < 8; jv++)
          for (int d = 0; d < 16; d++) pr[c * 128 + jv * 16 + d] = xr[c * 128 + 8 * d + jv];
  }
  j.ztab = bits == 4 && g % 128 == 0; /* the table kernels (w4t_dot_*) */
  if (z && !j.ztab) group_sums(x, m, k, g, xsum);
  j.w = w, j.xp = xp, j.xsum = xsum, j.s = s, j.z = z, j.s_dtype = s_dtype, j.z_dtype = z_dtype;
  j.bias = bias, j.m = m, j.n = n, j.k = k, j.g = g, j.w_signed = w_signed, j.bits = bits, j.y = y;
  j.rs = w4_row_stride(n);
  cpu_parallel_for((n + 3) / 4, 8, w4_rows, &j);
  free(xp), free(xsum);
  return BP_OK;
}

/* One row of x as int8 codes per block of 32 (scale amax / 127, codes
 * round-to-nearest-even: vcvtps2dq under the default rounding mode, as
 * nearbyintf), in the chunk layout of w4_job_t.xq, with the lanes' offsets
 * for signed weights and the blocks' sums of the quantized values (bsum,
 * for the zero-point term). 0 when the row holds a NaN or an infinity (the
 * caller then takes the f32 path, which propagates them). k is a multiple
 * of 128 (cpu_qmm_wq_fits). */
QMM_TARGET_VBMI static int q8_row(const float* x, int64_t k, int w_signed, int8_t* xq, int32_t* xoff,
                             float* xd, double* bsum) {
  const __m512 big = _mm512_set1_ps(FLT_MAX);
  const __m512i lim = _mm512_set1_epi32(127), nlim = _mm512_set1_epi32(-127);
  /* byte i of the chunk's 128 codes: evens (0, 2, ..., 126) then odds */
  _Alignas(64) uint8_t ev[64], od[64];
  for (int i = 0; i < 64; i++) ev[i] = (uint8_t)(2 * i), od[i] = (uint8_t)(2 * i + 1);
  const __m512i iev = _mm512_load_si512((const void*)ev), iod = _mm512_load_si512((const void*)od);
  for (int64_t c = 0; c < k / 128; c++) {
    __m128i b8[8];
    for (int blk = 0; blk < 4; blk++) {
      const float* xb = x + c * 128 + blk * 32;
      __m512 v0 = _mm512_loadu_ps(xb), v1 = _mm512_loadu_ps(xb + 16);
      __m512 a0 = _mm512_abs_ps(v0), a1 = _mm512_abs_ps(v1);
      /* false for NaN too */
      if ((__mmask16)(_mm512_cmp_ps_mask(a0, big, _CMP_LE_OQ) & _mm512_cmp_ps_mask(a1, big, _CMP_LE_OQ)) !=
          (__mmask16)0xFFFF)
        return 0;
      float amax = _mm512_reduce_max_ps(_mm512_max_ps(a0, a1));
      float d = amax / 127.0f, inv = amax > 0.0f ? 127.0f / amax : 0.0f;
      __m512 vi = _mm512_set1_ps(inv);
      __m512i q0 = _mm512_cvtps_epi32(_mm512_mul_ps(v0, vi));
      __m512i q1 = _mm512_cvtps_epi32(_mm512_mul_ps(v1, vi));
      q0 = _mm512_max_epi32(_mm512_min_epi32(q0, lim), nlim);
      q1 = _mm512_max_epi32(_mm512_min_epi32(q1, lim), nlim);
      int64_t b = c * 4 + blk;
      xd[b] = d;
      bsum[b] = (double)_mm512_reduce_add_epi32(_mm512_add_epi32(q0, q1)) * d;
      if (w_signed) { /* -8 * the sum of each 8 consecutive codes (a lane of w) */
        _Alignas(64) int32_t t[32];
        _mm512_store_si512((void*)t, q0);
        _mm512_store_si512((void*)(t + 16), q1);
        for (int l = 0; l < 4; l++) {
          int32_t sum = 0;
          for (int e = 0; e < 8; e++) sum += t[l * 8 + e];
          xoff[b * 4 + l] = -8 * sum;
        }
      }
      b8[blk * 2] = _mm512_cvtepi32_epi8(q0);
      b8[blk * 2 + 1] = _mm512_cvtepi32_epi8(q1);
    }
    __m512i lo = _mm512_inserti32x4(_mm512_castsi128_si512(b8[0]), b8[1], 1);
    lo = _mm512_inserti32x4(_mm512_inserti32x4(lo, b8[2], 2), b8[3], 3);
    __m512i hi = _mm512_inserti32x4(_mm512_castsi128_si512(b8[4]), b8[5], 1);
    hi = _mm512_inserti32x4(_mm512_inserti32x4(hi, b8[6], 2), b8[7], 3);
    _mm512_store_si512((void*)(xq + c * 128), _mm512_permutex2var_epi8(lo, iev, hi));
    _mm512_store_si512((void*)(xq + c * 128 + 64), _mm512_permutex2var_epi8(lo, iod, hi));
  }
  return 1;
}

bp_status_t cpu_qmm_wq_gemv_q8(const uint8_t* w, int w_signed, const float* x, int64_t m, int64_t n,
                               int64_t k, int64_t g, const void* s, uint32_t s_dtype, const void* z,
                               uint32_t z_dtype, const double* bias, float* y) {
  __builtin_cpu_init();
  if (!cpu_qmm_vnni_available() || !__builtin_cpu_supports("avx512vbmi") ||
      !cpu_qmm_wq_fits(4, k, g, s_dtype, z_dtype))
    return cpu_qmm_wq_gemv_avx512(w, 4, w_signed, x, m, n, k, g, s, s_dtype, z, z_dtype, bias, y);
  w4_job_t j;
  memset(&j, 0, sizeof j);
  j.groups = k / g;
  int8_t* xq = alloc64((size_t)(m * k));
  int32_t* xoff = w_signed ? malloc(sizeof(int32_t) * (size_t)(m * k / 8)) : NULL;
  float* xd = malloc(sizeof(float) * (size_t)(m * k / 32));
  float* xsum = z ? malloc(sizeof(float) * (size_t)(m * j.groups)) : NULL;
  if (!xq || (w_signed && !xoff) || !xd || (z && !xsum)) {
    free(xq), free(xoff), free(xd), free(xsum);
    return cpu_error(BP_RESOURCE_EXHAUSTED, "cpu: weight_only_mm: out of memory");
  }
  double* bsum = malloc(sizeof(double) * (size_t)(k / 32));
  int finite = bsum != NULL;
  for (int64_t mm = 0; mm < m && finite; mm++) {
    finite = q8_row(x + mm * k, k, w_signed, xq + mm * k, xoff ? xoff + mm * (k / 8) : NULL,
                    xd + mm * (k / 32), bsum);
    for (int64_t gi = 0; z && finite && gi < j.groups; gi++) { /* the zero-point term's sums */
      double acc = 0.0;
      for (int64_t b = gi * g / 32; b < (gi + 1) * g / 32; b++) acc += bsum[b];
      xsum[mm * j.groups + gi] = (float)acc;
    }
  }
  if (!finite) {
    int oom = bsum == NULL;
    free(xq), free(xoff), free(xd), free(xsum), free(bsum);
    if (oom) return cpu_error(BP_RESOURCE_EXHAUSTED, "cpu: weight_only_mm: out of memory");
    return cpu_qmm_wq_gemv_avx512(w, 4, w_signed, x, m, n, k, g, s, s_dtype, z, z_dtype, bias, y);
  }
  free(bsum);
  j.w = w, j.xq = xq, j.xoff = xoff, j.xd = xd, j.xsum = xsum, j.s = s, j.z = z;
  j.s_dtype = s_dtype, j.z_dtype = z_dtype, j.bias = bias, j.m = m, j.n = n, j.k = k, j.g = g;
  j.w_signed = w_signed, j.bits = 4, j.y = y;
  j.rs = w4_row_stride(n);
  cpu_parallel_for((n + 3) / 4, 8, w4_rows, &j);
  free(xq), free(xoff), free(xd), free(xsum);
  return BP_OK;
}

#else /* not x86-64 GCC/Clang: the portable paths only */

int cpu_qmm_vnni_available(void) { return 0; }
int cpu_qmm_avx512_available(void) { return 0; }

bp_status_t cpu_qmm_s8_gemm_vnni(const uint8_t* a, int a_u8, int32_t a_zp, const int8_t* b,
                                 int64_t m, int64_t n, int64_t k, int32_t* c) {
  (void)a, (void)a_u8, (void)a_zp, (void)b, (void)m, (void)n, (void)k, (void)c;
  return cpu_error(BP_UNIMPLEMENTED, "cpu: scaled_mm: no VNNI kernel on this build");
}

bp_status_t cpu_qmm_wq_gemv_avx512(const uint8_t* w, int bits, int w_signed, const float* x,
                                   int64_t m, int64_t n, int64_t k, int64_t g, const void* s,
                                   uint32_t s_dtype, const void* z, uint32_t z_dtype,
                                   const double* bias, float* y) {
  (void)w, (void)bits, (void)w_signed, (void)x, (void)m, (void)n, (void)k, (void)g, (void)s, (void)s_dtype,
      (void)z, (void)z_dtype, (void)bias, (void)y;
  return cpu_error(BP_UNIMPLEMENTED, "cpu: weight_only_mm: no AVX-512 kernel on this build");
}

bp_status_t cpu_qmm_wq_gemv_q8(const uint8_t* w, int w_signed, const float* x, int64_t m, int64_t n,
                               int64_t k, int64_t g, const void* s, uint32_t s_dtype, const void* z,
                               uint32_t z_dtype, const double* bias, float* y) {
  return cpu_qmm_wq_gemv_avx512(w, 4, w_signed, x, m, n, k, g, s, s_dtype, z, z_dtype, bias, y);
}
#endif
