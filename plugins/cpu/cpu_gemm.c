/* backplane CPU plugin: mm, bmm, addmm.
 *
 * f32 / f64 go to cblas_sgemm / cblas_dgemm when OpenBLAS is available
 * (transposed views are passed as transposes, other layouts are packed),
 * large f32 products to oneDNN's sgemm in a build with it
 * (cpu_gemm_dnnl.h);
 * f16 / bf16 convert to f32 and use the f32 path; integers, and f32 / f64
 * without BLAS, use the packed, register-tiled blocked GEMM below (parallel
 * over the pool). addmm writes beta * self first and then accumulates
 * alpha * A @ B into the output (beta = 0 ignores self).
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cpu_gemm_dnnl.h"
#include "cpu_kernels.h"

#ifdef BP_CPU_HAVE_CBLAS
#include <cblas.h>
#endif

/* A 2-d view: element (r, c) at base + (r * rs + c * cs) * es. */
typedef struct mat {
  unsigned char* base;
  int64_t rows, cols, rs, cs;
  uint32_t dtype;
} mat_t;

static mat_t mat_of(const bp_tensor_desc_t* d, int64_t batch, int batched) {
  mat_t m;
  int o = batched ? 1 : 0;
  m.dtype = d->dtype;
  m.rows = d->sizes[o];
  m.cols = d->sizes[o + 1];
  m.rs = d->strides[o];
  m.cs = d->strides[o + 1];
  m.base = cpu_desc_ptr(d) + (batched ? batch * d->strides[0] * (int64_t)bp_dtype_size(d->dtype) : 0);
  /* Strides of size-1 dims are irrelevant: pick ones that let BLAS read
   * the view in place. */
  if (m.cols <= 1) m.cs = (m.rs == 1 && m.rows > 1) ? m.rows : 1;
  if (m.rows <= 1) m.rs = m.cs == 1 ? (m.cols > 1 ? m.cols : 1) : 1;
  return m;
}

/* Copies m (cast) into a dense row-major buffer of dtype `dtype`. */
static bp_status_t pack(const mat_t* m, void* dst, uint32_t dtype) {
  bp_tensor_desc_t sd, dd;
  struct bpp_buffer_s sh, dh;
  int64_t sizes[2] = {m->rows, m->cols}, strides[2] = {m->rs, m->cs};
  cpu_desc_host(&sd, &sh, m->base, m->dtype, 2, sizes, strides);
  cpu_desc_host(&dd, &dh, dst, dtype, 2, sizes, NULL);
  return cpu_cast_copy(&dd, &sd);
}

/* Writes src (broadcast to m's shape, cast) into m. */
static bp_status_t fill_from(const mat_t* m, const bp_tensor_desc_t* src) {
  bp_tensor_desc_t dd;
  struct bpp_buffer_s dh;
  int64_t sizes[2] = {m->rows, m->cols}, strides[2] = {m->rs, m->cs};
  cpu_desc_host(&dd, &dh, m->base, m->dtype, 2, sizes, strides);
  return cpu_cast_copy(&dd, src);
}

/* ---- blocked GEMM (the GotoBLAS / BLIS structure) -------------------------
 * C = alpha * A @ B, added to C when `add` (C's old contents are never read
 * otherwise), for strided views A [n x k], B [k x m], C [n x m]. Loops,
 * outermost first:
 *   jc: NC columns of C;  pc: KC steps of the k dimension;
 *     pack B[pc.., jc..] into NR-column panels (KC x NR, row p contiguous) and
 *     A[.., pc..] into MR-row panels (KC x MR, column p contiguous), both zero
 *     padded to whole panels, in parallel over panels;
 *     in parallel over equal shares of (MC-row block, NR panel) items: for
 *     each MR panel of the block, one MR x NR micro-kernel call over KC.
 * Packing reads any strides (transposed views included) and converts the
 * storage type to the accumulator type, so operands are never copied first.
 * The micro-kernel keeps the MR x NR tile in vector registers (GCC vector
 * extensions, two vectors per row): per k step two vector loads of B and MR
 * broadcasts of A. On x86-64 AVX2+FMA and AVX-512 variants are chosen at run
 * time; other targets use the portable one. Full tiles of a C with unit column
 * stride and the accumulator's own type are written in place; edge tiles,
 * strided C and narrow integers go through a tile buffer.
 * Integers accumulate with wrap-around in int32 (i8, u8, i16, i32) or int64
 * (i64): the low bits, all that the stored result keeps, equal those of an
 * exact sum. */
#if defined(__x86_64__) && defined(__GNUC__)
#define CPU_GEMM_X86 1
#else
#define CPU_GEMM_X86 0
#endif
#define GEMM_KC 256
#define GEMM_MC_PANELS 20 /* MC = 20 * MR rows */
#define GEMM_NC 4096
#define GEMM_MAX_TILE 384 /* MR * NR elements, the largest variant (12 x 32 f32) */
#define GEMM_ALIGN 64

/* Micro-kernel variants: X(isa, attribute, vector bytes, MR). NR is two
 * vectors: 2 * bytes / sizeof(element). */
#define CPU_GEMM_ISA_GENERIC(X, ...) X(generic, , 16, 6, __VA_ARGS__)
#if CPU_GEMM_X86
#define CPU_GEMM_ISAS(X, ...)                                                  \
  CPU_GEMM_ISA_GENERIC(X, __VA_ARGS__)                                         \
  X(avx2, __attribute__((target("avx2,fma"))), 32, 6, __VA_ARGS__)             \
  X(avx512, __attribute__((target("avx512f,fma"))), 64, 12, __VA_ARGS__)
#else
#define CPU_GEMM_ISAS(X, ...) CPU_GEMM_ISA_GENERIC(X, __VA_ARGS__)
#endif

/* Accumulator types: X(name, C type, is float). */
#define CPU_GEMM_ACC_TYPES(X) \
  X(f32, float, 1) X(f64, double, 1) X(i32, int32_t, 0) X(i64, int64_t, 0)
/* Storage types: X(suffix, element type, accumulator name, accumulator type, dtype). */
#define CPU_GEMM_TYPES(X)                                                                     \
  X(f32, float, f32, float, BP_DTYPE_F32) X(f64, double, f64, double, BP_DTYPE_F64)            \
  X(i8, int8_t, i32, int32_t, BP_DTYPE_I8) X(u8, uint8_t, i32, int32_t, BP_DTYPE_U8)            \
  X(i16, int16_t, i32, int32_t, BP_DTYPE_I16) X(i32, int32_t, i32, int32_t, BP_DTYPE_I32)       \
  X(i64, int64_t, i64, int64_t, BP_DTYPE_I64)

/* Index of the widest variant this CPU runs (position in CPU_GEMM_ISAS). */
static int gemm_isa(void) {
#if CPU_GEMM_X86
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("fma")) return 2;
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) return 1;
#endif
  return 0;
}

/* c[r * ldc + j] = alpha * sum_p a[p * MR + r] * b[p * NR + j] (+ c[..] when add)
 * for the full MR x NR tile; a and b are packed panels, b 64-byte aligned. */
#define CPU__UKR(ISA, ATTR, VB, MR, AN, ACC, ISF)                                            \
  typedef ACC gemm_v_##AN##_##ISA __attribute__((vector_size(VB)));                         \
  ATTR static void gemm_ukr_##AN##_##ISA(int64_t kc, const ACC* restrict a,                 \
                                         const ACC* restrict b, ACC* restrict c, int64_t ldc, \
                                         ACC alpha, int add) {                              \
    typedef gemm_v_##AN##_##ISA v_t;                                                        \
    enum { L = VB / sizeof(ACC) };                                                          \
    v_t c0[MR], c1[MR];                                                                     \
    _Pragma("GCC unroll 16") for (int r = 0; r < MR; r++) c0[r] = c1[r] = (v_t){0};         \
    for (int64_t p = 0; p < kc; p++, a += MR, b += 2 * L) {                                 \
      v_t b0, b1;                                                                           \
      __builtin_memcpy(&b0, b, VB);                                                         \
      __builtin_memcpy(&b1, b + L, VB);                                                     \
      _Pragma("GCC unroll 16") for (int r = 0; r < MR; r++) {                               \
        c0[r] += a[r] * b0;                                                                 \
        c1[r] += a[r] * b1;                                                                 \
      }                                                                                     \
    }                                                                                       \
    _Pragma("GCC unroll 16") for (int r = 0; r < MR; r++) {                                 \
      ACC* cr = c + r * ldc;                                                                \
      v_t o0 = alpha * c0[r], o1 = alpha * c1[r];                                           \
      if (add) {                                                                            \
        v_t t0, t1;                                                                         \
        __builtin_memcpy(&t0, cr, VB);                                                      \
        __builtin_memcpy(&t1, cr + L, VB);                                                  \
        o0 += t0;                                                                           \
        o1 += t1;                                                                           \
      }                                                                                     \
      __builtin_memcpy(cr, &o0, VB);                                                        \
      __builtin_memcpy(cr + L, &o1, VB);                                                    \
    }                                                                                       \
  }

/* Per accumulator type: the micro-kernels and the block sizes of the variant
 * this CPU runs. */
#define CPU__GEMM_CFG_ENTRY(ISA, ATTR, VB, MR, AN, ACC, ISF) \
  {MR, 2 * (int)(VB / sizeof(ACC)), gemm_ukr_##AN##_##ISA},
#define CPU__GEMM_ACC(AN, ACC, ISF)                                                         \
  typedef void (*gemm_ukr_##AN##_fn)(int64_t kc, const ACC* restrict a, const ACC* restrict b, \
                                     ACC* restrict c, int64_t ldc, ACC alpha, int add);     \
  typedef struct gemm_cfg_##AN {                                                            \
    int mr, nr;                                                                             \
    gemm_ukr_##AN##_fn ukr;                                                                 \
  } gemm_cfg_##AN##_t;                                                                      \
  CPU_GEMM_ISAS(CPU__UKR, AN, ACC, ISF)                                                     \
  static gemm_cfg_##AN##_t gemm_cfg_##AN(void) {                                            \
    static const gemm_cfg_##AN##_t cfgs[] = {CPU_GEMM_ISAS(CPU__GEMM_CFG_ENTRY, AN, ACC, ISF)}; \
    return cfgs[gemm_isa()];                                                                \
  }
CPU_GEMM_ACC_TYPES(CPU__GEMM_ACC)

static inline int64_t gemm_min(int64_t a, int64_t b) { return a < b ? a : b; }
static inline int64_t gemm_ceil(int64_t a, int64_t b) { return (a + b - 1) / b; }

/* One product C (+)= alpha * A @ B of storage type T; the job is shared
 * read-only by the pool threads during each parallel pass, which write
 * disjoint panels / blocks of ap, bp and C. */
#define CPU__GEMM(SFX, T, AN, ACC, D)                                                        \
  typedef struct gemm_job_##SFX {                                                            \
    const mat_t *a, *b, *c;                                                                  \
    gemm_cfg_##AN##_t cfg;                                                                   \
    ACC alpha;                                                                               \
    int add;                                                                                 \
    ACC *ap, *bp;              /* packed A (all rows) and B (nc columns) for this step */    \
    int64_t jc, nc, pc, kc;    /* current column block and k step */                        \
    int64_t nbp, nap;          /* B and A panels */                                          \
    int64_t mc, items, parts;  /* rows per block; (row block, B panel) pairs; their shares */ \
  } gemm_job_##SFX##_t;                                                                      \
  static void gemm_pack_##SFX(void* ctx, int64_t ub, int64_t ue) {                           \
    const gemm_job_##SFX##_t* g = ctx;                                                       \
    const int mr = g->cfg.mr, nr = g->cfg.nr;                                                \
    const int64_t kc = g->kc;                                                                \
    for (int64_t u = ub; u < ue; u++) {                                                      \
      if (u < g->nbp) { /* B panel: dst[p * nr + j] = B[pc + p, j0 + j] */                   \
        const mat_t* b = g->b;                                                               \
        int64_t j0 = g->jc + u * nr, w = gemm_min(nr, g->jc + g->nc - j0);                   \
        ACC* dst = g->bp + u * kc * nr;                                                      \
        const T* src = (const T*)b->base + g->pc * b->rs + j0 * b->cs;                       \
        for (int64_t p = 0; p < kc; p++, dst += nr, src += b->rs) {                          \
          int64_t j = 0;                                                                     \
          if (b->cs == 1)                                                                    \
            for (; j < w; j++) dst[j] = (ACC)src[j];                                         \
          else                                                                               \
            for (; j < w; j++) dst[j] = (ACC)src[j * b->cs];                                 \
          for (; j < nr; j++) dst[j] = 0;                                                    \
        }                                                                                    \
      } else { /* A panel: dst[p * mr + r] = A[i0 + r, pc + p] */                            \
        const mat_t* a = g->a;                                                               \
        int64_t i0 = (u - g->nbp) * mr, h = gemm_min(mr, a->rows - i0);                      \
        ACC* dst = g->ap + (u - g->nbp) * kc * mr;                                           \
        const T* src = (const T*)a->base + i0 * a->rs + g->pc * a->cs;                       \
        if (h < mr)                                                                          \
          for (int64_t e = 0; e < kc * mr; e++) dst[e] = 0;                                  \
        for (int64_t r = 0; r < h; r++) {                                                    \
          const T* s = src + r * a->rs;                                                      \
          if (a->cs == 1)                                                                    \
            for (int64_t p = 0; p < kc; p++) dst[p * mr + r] = (ACC)s[p];                    \
          else                                                                               \
            for (int64_t p = 0; p < kc; p++) dst[p * mr + r] = (ACC)s[p * a->cs];            \
        }                                                                                    \
      }                                                                                      \
    }                                                                                        \
  }                                                                                          \
  static void gemm_blocks_##SFX(void* ctx, int64_t ub, int64_t ue) {                         \
    const gemm_job_##SFX##_t* g = ctx;                                                       \
    const mat_t* c = g->c;                                                                   \
    const int mr = g->cfg.mr, nr = g->cfg.nr;                                                \
    const int direct = sizeof(T) == sizeof(ACC) && c->cs == 1;                               \
    ACC tile[GEMM_MAX_TILE] __attribute__((aligned(GEMM_ALIGN)));                            \
    for (int64_t u = ub; u < ue; u++) {                                                      \
      /* Share u: items [it_lo, it_hi), item = row block * nbp + B panel. */                  \
      int64_t it_lo = g->items * u / g->parts, it_hi = g->items * (u + 1) / g->parts;        \
      for (int64_t it = it_lo; it < it_hi; it++) {                                           \
        int64_t i_lo = it / g->nbp * g->mc, i_hi = gemm_min(c->rows, i_lo + g->mc);          \
        int64_t jp = it % g->nbp;                                                            \
        int64_t j = g->jc + jp * nr, w = gemm_min(nr, g->jc + g->nc - j);                    \
        const ACC* bpan = g->bp + jp * g->kc * nr;                                           \
        for (int64_t i = i_lo; i < i_hi; i += mr) {                                          \
          int64_t h = gemm_min(mr, c->rows - i);                                             \
          const ACC* apan = g->ap + (i / mr) * g->kc * mr;                                   \
          T* cp = (T*)c->base + i * c->rs + j * c->cs;                                       \
          if (direct && h == mr && w == nr) {                                                \
            g->cfg.ukr(g->kc, apan, bpan, (ACC*)(void*)cp, c->rs, g->alpha, g->add);         \
            continue;                                                                        \
          }                                                                                  \
          g->cfg.ukr(g->kc, apan, bpan, tile, nr, g->alpha, 0);                              \
          for (int64_t r = 0; r < h; r++) {                                                  \
            T* cr = cp + r * c->rs;                                                          \
            const ACC* tr = tile + r * nr;                                                   \
            for (int64_t jj = 0; jj < w; jj++)                                               \
              cr[jj * c->cs] = g->add ? (T)(tr[jj] + (ACC)cr[jj * c->cs]) : (T)tr[jj];       \
          }                                                                                  \
        }                                                                                    \
      }                                                                                      \
    }                                                                                        \
  }                                                                                          \
  static bp_status_t gemm_blocked_##SFX(const mat_t* a, const mat_t* b, const mat_t* c,      \
                                        ACC alpha, int add) {                                \
    bp_status_t st = BP_OK;                                                                  \
    int64_t n = a->rows, k = a->cols, m = b->cols;                                           \
    gemm_job_##SFX##_t g = {.a = a, .b = b, .c = c, .cfg = gemm_cfg_##AN(), .alpha = alpha,  \
                            .add = add};                                                     \
    const int64_t mr = g.cfg.mr, nr = g.cfg.nr, threads = cpu_pool_threads();               \
    int64_t kc_max = gemm_min(GEMM_KC, k), nc_max = gemm_min(GEMM_NC, gemm_ceil(m, nr) * nr); \
    size_t ap_bytes = (size_t)(gemm_ceil(n, mr) * mr * kc_max) * sizeof(ACC);                \
    size_t bp_bytes = (size_t)(gemm_ceil(nc_max, nr) * nr * kc_max) * sizeof(ACC);           \
    g.ap = aligned_alloc(GEMM_ALIGN, (ap_bytes + GEMM_ALIGN - 1) / GEMM_ALIGN * GEMM_ALIGN); \
    g.bp = aligned_alloc(GEMM_ALIGN, (bp_bytes + GEMM_ALIGN - 1) / GEMM_ALIGN * GEMM_ALIGN); \
    if (!g.ap || !g.bp) {                                                                    \
      st = cpu_error(BP_RESOURCE_EXHAUSTED,                                                  \
                     "cpu: matmul: cannot allocate %zu bytes of packing buffers",            \
                     ap_bytes + bp_bytes);                                                   \
      goto cleanup;                                                                          \
    }                                                                                        \
    g.nap = gemm_ceil(n, mr);                                                                \
    g.mc = gemm_min(GEMM_MC_PANELS * mr, g.nap * mr);                                        \
    int64_t blocks = gemm_ceil(n, g.mc);                                                     \
    for (g.jc = 0; g.jc < m; g.jc += GEMM_NC) {                                              \
      g.nc = gemm_min(GEMM_NC, m - g.jc);                                                    \
      g.nbp = gemm_ceil(g.nc, nr);                                                           \
      /* Four equal shares per thread (the pool hands them out dynamically). */            \
      g.items = blocks * g.nbp;                                                              \
      g.parts = gemm_min(g.items, 4 * threads);                                              \
      g.add = add; /* later k steps of this column block add to the first */                 \
      for (g.pc = 0; g.pc < k; g.pc += GEMM_KC) {                                            \
        g.kc = gemm_min(GEMM_KC, k - g.pc);                                                  \
        int64_t packed = (g.nbp * nr + g.nap * mr) * g.kc;                                   \
        cpu_parallel_for(g.nbp + g.nap, packed < 65536 ? g.nbp + g.nap : 1, gemm_pack_##SFX, \
                         &g);                                                                \
        cpu_parallel_for(g.parts, n * g.nc * g.kc < (1 << 18) ? g.parts : 1,                 \
                         gemm_blocks_##SFX, &g);                                             \
        g.add = 1;                                                                           \
      }                                                                                      \
    }                                                                                        \
  cleanup:                                                                                   \
    free(g.ap);                                                                              \
    free(g.bp);                                                                              \
    return st;                                                                               \
  }
CPU_GEMM_TYPES(CPU__GEMM)

/* C (+)= alpha * A @ B through the blocked kernel for f32, f64 and integer
 * views of one dtype. */
static bp_status_t gemm_blocked(const mat_t* A, const mat_t* B, const mat_t* C,
                                const bp_scalar_t* alpha, int add) {
  double af = cpu_scalar_f64(alpha, 1);
  int64_t ai = cpu_scalar_i64(alpha, 1);
  switch (C->dtype) {
#define CPU__GEMM_CASE(SFX, T, AN, ACC, D) \
  case D: return gemm_blocked_##SFX(A, B, C, bp_dtype_is_float(D) ? (ACC)af : (ACC)ai, add);
    CPU_GEMM_TYPES(CPU__GEMM_CASE)
#undef CPU__GEMM_CASE
    default:
      return cpu_error(BP_UNIMPLEMENTED, "cpu: matmul: %s is not supported",
                       bp_dtype_name(C->dtype));
  }
}

#ifdef BP_CPU_HAVE_CBLAS
/* Order and transposition that let BLAS read m in place, or 0. */
static int blas_layout(const mat_t* m, int col_major, int* trans, int* ld) {
  int64_t r = m->rows > 1 ? m->rows : 1, c = m->cols > 1 ? m->cols : 1;
  int64_t rs = m->rs, cs = m->cs;
  if (col_major) { /* a column-major view of m is the row-major view of m^T */
    int64_t t = rs; rs = cs; cs = t;
    t = r; r = c; c = t;
  }
  if (cs == 1 && rs >= c && rs <= INT32_MAX) { *trans = 0; *ld = (int)rs; return 1; }
  if (rs == 1 && cs >= r && cs <= INT32_MAX) { *trans = 1; *ld = (int)cs; return 1; }
  return 0;
}

/* C = alpha * A @ B + beta * C for f32/f64 views, in place when BLAS can
 * address every operand, else through packed copies. */
static bp_status_t blas_gemm(const mat_t* A, const mat_t* B, const mat_t* C, double alpha,
                             double beta) {
  bp_status_t st = BP_OK;
  int f64 = C->dtype == BP_DTYPE_F64;
  size_t es = f64 ? 8 : 4;
  void *pa = NULL, *pb = NULL, *pc = NULL;
  int ta = 0, tb = 0, lda = 1, ldb = 1, tc = 0, ldc = 1, col = 0;
  if (!blas_layout(C, 0, &tc, &ldc) || tc) {
    col = 1;
    if (!blas_layout(C, 1, &tc, &ldc) || tc) col = -1; /* C needs a temporary */
  }
  int order_col = col == 1;
  mat_t a = *A, b = *B, c = *C;
  if (col == -1) {
    pc = malloc((size_t)(C->rows * C->cols) * es);
    if (!pc) goto oom;
    if (beta != 0 && (st = pack(C, pc, C->dtype))) goto cleanup;
    c.base = pc; c.rs = C->cols; c.cs = 1;
    ldc = (int)(C->cols > 1 ? C->cols : 1);
  }
  if (!blas_layout(&a, order_col, &ta, &lda)) {
    if (!(pa = malloc((size_t)(A->rows * A->cols) * es))) goto oom;
    if ((st = pack(A, pa, A->dtype))) goto cleanup;
    a.base = pa; a.rs = A->cols > 1 ? A->cols : 1; a.cs = 1;
    blas_layout(&a, order_col, &ta, &lda);
  }
  if (!blas_layout(&b, order_col, &tb, &ldb)) {
    if (!(pb = malloc((size_t)(B->rows * B->cols) * es))) goto oom;
    if ((st = pack(B, pb, B->dtype))) goto cleanup;
    b.base = pb; b.rs = B->cols > 1 ? B->cols : 1; b.cs = 1;
    blas_layout(&b, order_col, &tb, &ldb);
  }
  {
    enum CBLAS_ORDER o = order_col ? CblasColMajor : CblasRowMajor;
    enum CBLAS_TRANSPOSE xa = ta ? CblasTrans : CblasNoTrans, xb = tb ? CblasTrans : CblasNoTrans;
    int n = (int)A->rows, m = (int)B->cols, k = (int)A->cols;
    int done = f64 ? 0
                   : cpu_sgemm_dnnl(order_col, ta, tb, n, m, k, (float)alpha, (const float*)a.base, lda,
                                    (const float*)b.base, ldb, (float)beta, (float*)c.base, ldc);
    if (done < 0) {
      st = cpu_error(BP_RESOURCE_EXHAUSTED, "cpu: matmul: oneDNN's sgemm ran out of memory");
      goto cleanup;
    }
    if (f64)
      cblas_dgemm(o, xa, xb, n, m, k, alpha, (const double*)a.base, lda, (const double*)b.base, ldb,
                  beta, (double*)c.base, ldc);
    else if (!done)
      cblas_sgemm(o, xa, xb, n, m, k, (float)alpha, (const float*)a.base, lda, (const float*)b.base,
                  ldb, (float)beta, (float*)c.base, ldc);
  }
  if (pc) {
    bp_tensor_desc_t sd;
    struct bpp_buffer_s sh;
    int64_t sizes[2] = {C->rows, C->cols};
    cpu_desc_host(&sd, &sh, pc, C->dtype, 2, sizes, NULL);
    st = fill_from(C, &sd);
  }
  goto cleanup;
oom:
  st = cpu_error(BP_RESOURCE_EXHAUSTED, "cpu: matmul: cannot allocate packing buffers");
cleanup:
  free(pa);
  free(pb);
  free(pc);
  return st;
}
#endif

/* One matrix product into C, with C already holding beta * self when
 * has_beta (else C's contents are ignored). */
static bp_status_t mm_one(const mat_t* A, const mat_t* B, const mat_t* C, const bp_scalar_t* alpha,
                          int has_beta) {
  bp_status_t st = BP_OK;
  int64_t n = A->rows, k = A->cols, m = B->cols;
  if (n == 0 || m == 0) return BP_OK;
  if (k == 0) { /* empty sum: C = beta * self (already there) or 0 */
    if (has_beta) return BP_OK;
    bp_tensor_desc_t zd;
    struct bpp_buffer_s zh;
    int64_t zero = 0;
    int64_t sz[1] = {1};
    cpu_desc_host(&zd, &zh, &zero, BP_DTYPE_I64, 0, sz, NULL);
    return fill_from(C, &zd);
  }
  if (n > INT32_MAX || m > INT32_MAX || k > INT32_MAX)
    return cpu_error(BP_INVALID_ARGUMENT, "cpu: matmul: dimension over 2^31");
#ifdef BP_CPU_HAVE_CBLAS
  if (C->dtype == BP_DTYPE_F32 || C->dtype == BP_DTYPE_F64)
    return blas_gemm(A, B, C, cpu_scalar_f64(alpha, 1), has_beta ? 1.0 : 0.0);
#endif
  if (C->dtype != BP_DTYPE_F16 && C->dtype != BP_DTYPE_BF16)
    return gemm_blocked(A, B, C, alpha, has_beta);
  /* f16 / bf16 compute in f32 on dense copies. */
  void* pa = malloc((size_t)(n * k) * sizeof(float));
  void* pb = malloc((size_t)(k * m) * sizeof(float));
  void* pc = malloc((size_t)(n * m) * sizeof(float));
  if (!pa || !pb || !pc) {
    st = cpu_error(BP_RESOURCE_EXHAUSTED, "cpu: matmul: cannot allocate %lld bytes of f32 copies",
                   (long long)((n * k + k * m + n * m) * (int64_t)sizeof(float)));
    goto cleanup;
  }
  if ((st = pack(A, pa, BP_DTYPE_F32)) || (st = pack(B, pb, BP_DTYPE_F32))) goto cleanup;
  if (has_beta && (st = pack(C, pc, BP_DTYPE_F32))) goto cleanup;
  {
    mat_t a = {pa, n, k, k, 1, BP_DTYPE_F32}, b = {pb, k, m, m, 1, BP_DTYPE_F32};
    mat_t c = {pc, n, m, m, 1, BP_DTYPE_F32};
#ifdef BP_CPU_HAVE_CBLAS
    st = blas_gemm(&a, &b, &c, cpu_scalar_f64(alpha, 1), has_beta ? 1.0 : 0.0);
#else
    st = gemm_blocked(&a, &b, &c, alpha, has_beta);
#endif
    if (st) goto cleanup;
  }
  {
    bp_tensor_desc_t sd;
    struct bpp_buffer_s sh;
    int64_t sizes[2] = {n, m};
    cpu_desc_host(&sd, &sh, pc, BP_DTYPE_F32, 2, sizes, NULL);
    st = fill_from(C, &sd);
  }
cleanup:
  free(pa);
  free(pb);
  free(pc);
  return st;
}

bp_status_t cpu_gemm(uint32_t dtype, int64_t m, int64_t n, int64_t k, double alpha, const void* a,
                     int64_t a_rs, int64_t a_cs, const void* b, int64_t b_rs, int64_t b_cs,
                     int accumulate, void* c, int64_t c_rs, int64_t c_cs) {
  if (m < 0 || n < 0 || k < 0)
    return cpu_error(BP_INVALID_ARGUMENT, "cpu: gemm: negative size %lldx%lldx%lld", (long long)m,
                     (long long)n, (long long)k);
  mat_t A = {(unsigned char*)a, m, k, a_rs, a_cs, dtype};
  mat_t B = {(unsigned char*)b, k, n, b_rs, b_cs, dtype};
  mat_t C = {(unsigned char*)c, m, n, c_rs, c_cs, dtype};
  bp_scalar_t al = {.kind = BP_SCALAR_FLOAT, .v.f = alpha};
  return mm_one(&A, &B, &C, &al, accumulate != 0);
}

bp_status_t cpu_exec_matmul(const bp_op_call_t* call) {
  uint32_t op = call->op_id;
  const char* name = cpu_op_name(op);
  const bp_tensor_desc_t* out = call->outputs[0];
  const bp_tensor_desc_t* a = call->inputs[op == BP_OP_addmm ? 1 : 0];
  const bp_tensor_desc_t* b = call->inputs[op == BP_OP_addmm ? 2 : 1];
  int batched = op == BP_OP_bmm;
  uint32_t r = batched ? 3 : 2;
  if (a->rank != r || b->rank != r || out->rank != r)
    return cpu_error(BP_INVALID_ARGUMENT, "cpu: %s: ranks %u, %u -> %u, expected %u", name, a->rank,
                     b->rank, out->rank, r);
  if (a->dtype != out->dtype || b->dtype != out->dtype ||
      (op == BP_OP_addmm && call->inputs[0]->dtype != out->dtype))
    return cpu_error(BP_INVALID_ARGUMENT, "cpu: %s: operands must share one dtype", name);
  if (out->dtype == BP_DTYPE_BOOL || bp_dtype_is_fp8(out->dtype) || out->dtype == BP_DTYPE_C64)
    return cpu_error(BP_UNIMPLEMENTED, "cpu: %s: %s is not supported", name, bp_dtype_name(out->dtype));
  int o = batched ? 1 : 0;
  if ((batched && (a->sizes[0] != b->sizes[0] || a->sizes[0] != out->sizes[0])) ||
      a->sizes[o + 1] != b->sizes[o] || out->sizes[o] != a->sizes[o] || out->sizes[o + 1] != b->sizes[o + 1])
    return cpu_error(BP_INVALID_ARGUMENT, "cpu: %s: shapes do not match", name);
  bp_scalar_t alpha = {.kind = BP_SCALAR_INT, .v.i = 1};
  int has_beta = 0;
  if (op == BP_OP_addmm) {
    const bp_addmm_attrs_t* at = call->attrs;
    if (at->alpha.kind != BP_SCALAR_NONE) alpha = at->alpha;
    double beta = cpu_scalar_f64(&at->beta, 1.0);
    if (beta != 0) {
      /* out = beta * self (broadcast), computed through the elementwise path. */
      mat_t c = mat_of(out, 0, 0);
      bp_status_t st = fill_from(&c, call->inputs[0]);
      if (st) return st;
      if (beta != 1) {
        bp_binary_attrs_t ma = {.struct_size = sizeof ma, .flags = BP_BINARY_OTHER_IS_SCALAR,
                                .scalar = at->beta};
        bp_tensor_desc_t absent = *out;
        absent.dtype = BP_DTYPE_INVALID;
        absent.buffer = NULL;
        const bp_tensor_desc_t* ins[2] = {out, &absent};
        bp_op_call_t mc = {.struct_size = sizeof mc, .op_id = BP_OP_mul, .num_inputs = 2,
                           .num_outputs = 1, .compute_dtype = out->dtype, .inputs = ins,
                           .outputs = &out, .attrs = &ma};
        if ((st = cpu_exec_elementwise(&mc))) return st;
      }
      has_beta = 1;
    }
  }
  int64_t nb = batched ? out->sizes[0] : 1;
  for (int64_t i = 0; i < nb; i++) {
    mat_t A = mat_of(a, i, batched), B = mat_of(b, i, batched), C = mat_of(out, i, batched);
    bp_status_t st = mm_one(&A, &B, &C, &alpha, has_beta);
    if (st) return st;
  }
  return BP_OK;
}
