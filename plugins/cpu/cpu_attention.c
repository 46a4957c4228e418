/* backplane CPU plugin: the attention kernel family (scaled dot-product
 * attention here; linear, rotary_embedding, cdist and pdist in
 * cpu_attention_linear.c).
 *
 * scaled_dot_product_attention is the flash-attention formulation: per
 * (batch, block of BQ queries) work item, keys and values are visited in
 * blocks of BK; each block's scores come from one GEMM (cpu_gemm), the rows
 * keep a running maximum m and sum l (online softmax: when the maximum
 * grows, earlier sums and accumulators are rescaled by exp(m_old - m_new)),
 * and a second GEMM accumulates P @ V. Memory per item is O(BQ * (E + Ev +
 * BK)) whatever the sequence lengths. Items run in parallel on the pool;
 * the block GEMMs stay below OpenBLAS's threading threshold (m * n * k <=
 * 2^18), so each runs on its item's thread. f16 / bf16 compute in f32
 * (rounded once on store); f64 in f64.
 */
#include <math.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cpu_attention.h"

#define ATT_BQ 64
#define ATT_GEMM_SINGLE_THREAD (INT64_C(1) << 18) /* OpenBLAS: m * n * k at most this */
#define ATT_TILE_MIN_L 32 /* queries from which the AVX-512 tile runs */
#define ATT_TILE_BK 64    /* keys per block on the tile */

/* ---- row maximum and exp over a row, vectorized for f32 --------------------
 * exp(t) = 2^n * p(r), n = round(t / ln 2), r = t - n ln 2 (two-constant
 * Cody-Waite reduction), p the Cephes minimax polynomial (about 1 ulp).
 * Arguments here are x - max <= 0 (or NaN): t < -87 gives 0 (no subnormal
 * results), NaN stays NaN. GCC vector extensions; one variant per ISA
 * (X(isa, attribute, vector bytes)), chosen at run time as in cpu_gemm.c
 * (BP_CPU_ISA caps it). */
#if defined(__x86_64__) && defined(__GNUC__)
#define ATT_ISAS(X)                                      \
  X(sse, , 16) X(avx2, __attribute__((target("avx2,fma"))), 32) \
  X(avx512, __attribute__((target("avx512f,avx512dq,fma"))), 64)
#else
#define ATT_ISAS(X) X(sse, , 16)
#endif

#define ATT_ROW_FNS(ISA, ATTR, VB)                                                             \
  typedef float att_vf_##ISA __attribute__((vector_size(VB)));                                 \
  typedef int32_t att_vi_##ISA __attribute__((vector_size(VB)));                               \
  enum { ATT_LANES_##ISA = VB / 4 };                                                           \
  ATTR static inline __attribute__((always_inline)) att_vf_##ISA att_exp_##ISA(att_vf_##ISA t) { \
    const att_vf_##ISA lo = (att_vf_##ISA){0} - 87.0f;                                         \
    att_vi_##ISA under = t < lo;                                                               \
    t = (att_vf_##ISA)(((att_vi_##ISA)t & ~under) | ((att_vi_##ISA)lo & under));               \
    const float magic = 12582912.0f; /* 1.5 * 2^23: adding it rounds to an integer */         \
    att_vf_##ISA fn = (t * 1.44269504088896341f + magic) - magic;                              \
    att_vf_##ISA r = t - fn * 0.693359375f - fn * -2.12194440e-4f;                              \
    att_vf_##ISA p = 1.9875691500e-4f * r + 1.3981999507e-3f;                                  \
    p = p * r + 8.3334519073e-3f;                                                              \
    p = p * r + 4.1665795894e-2f;                                                              \
    p = p * r + 1.6666665459e-1f;                                                              \
    p = p * r + 5.0000001201e-1f;                                                              \
    p = p * (r * r) + r + 1.0f;                                                                \
    att_vi_##ISA n = __builtin_convertvector(fn, att_vi_##ISA);                                \
    att_vf_##ISA res = p * (att_vf_##ISA)((n + 127) << 23);                                    \
    return (att_vf_##ISA)((att_vi_##ISA)res & ~under);                                         \
  }                                                                                            \
  /* max(init, x[0..n)); NaN when any x is NaN. */                                             \
  ATTR static float att_rowmax_##ISA(const float* x, int64_t n, float init) {                  \
    att_vf_##ISA m = (att_vf_##ISA){0} + init;                                                 \
    att_vi_##ISA nan = {0};                                                                    \
    int64_t c = 0;                                                                             \
    for (; c + ATT_LANES_##ISA <= n; c += ATT_LANES_##ISA) {                                   \
      att_vf_##ISA v;                                                                          \
      memcpy(&v, x + c, sizeof v);                                                             \
      att_vi_##ISA gt = v > m;                                                                 \
      m = (att_vf_##ISA)(((att_vi_##ISA)v & gt) | ((att_vi_##ISA)m & ~gt));                    \
      nan |= v != v;                                                                           \
    }                                                                                          \
    float mx = init;                                                                           \
    int any_nan = 0;                                                                           \
    for (int k = 0; k < ATT_LANES_##ISA; k++) {                                                \
      mx = m[k] > mx ? m[k] : mx;                                                              \
      any_nan |= nan[k] != 0;                                                                  \
    }                                                                                          \
    for (; c < n; c++) {                                                                       \
      mx = x[c] > mx ? x[c] : mx;                                                              \
      any_nan |= x[c] != x[c];                                                                 \
    }                                                                                          \
    return any_nan || init != init ? NAN : mx;                                                 \
  }                                                                                            \
  /* x[c] = exp(x[c] - mx) for c < n; returns their sum. */                                    \
  ATTR static float att_exprow_##ISA(float* x, int64_t n, float mx) {                          \
    att_vf_##ISA acc = {0};                                                                    \
    int64_t c = 0;                                                                             \
    for (; c + ATT_LANES_##ISA <= n; c += ATT_LANES_##ISA) {                                   \
      att_vf_##ISA v;                                                                          \
      memcpy(&v, x + c, sizeof v);                                                             \
      v = att_exp_##ISA(v - mx);                                                               \
      memcpy(x + c, &v, sizeof v);                                                             \
      acc += v;                                                                                \
    }                                                                                          \
    float s = 0.0f;                                                                            \
    for (int k = 0; k < ATT_LANES_##ISA; k++) s += acc[k];                                     \
    if (c < n) {                                                                               \
      float tail[ATT_LANES_##ISA];                                                             \
      att_vf_##ISA v;                                                                          \
      for (int64_t k = 0; k < ATT_LANES_##ISA; k++) tail[k] = c + k < n ? x[c + k] - mx : -INFINITY; \
      memcpy(&v, tail, sizeof v);                                                              \
      v = att_exp_##ISA(v);                                                                    \
      for (int64_t k = c; k < n; k++) {                                                        \
        x[k] = v[k - c];                                                                       \
        s += v[k - c];                                                                         \
      }                                                                                        \
    }                                                                                          \
    return s;                                                                                  \
  }
ATT_ISAS(ATT_ROW_FNS)

typedef struct att_row_ops {
  float (*rowmax)(const float* x, int64_t n, float init);
  float (*exprow)(float* x, int64_t n, float mx);
} att_row_ops_t;

/* The widest variant this CPU runs. */
static att_row_ops_t att_row_ops(void) {
#define ATT_ROW_OPS_ENTRY(ISA, ATTR, VB) {att_rowmax_##ISA, att_exprow_##ISA},
  static const att_row_ops_t ops[] = {ATT_ISAS(ATT_ROW_OPS_ENTRY)};
#undef ATT_ROW_OPS_ENTRY
#if defined(__x86_64__) && defined(__GNUC__)
  __builtin_cpu_init();
  int isa = cpu_isa_cap();
  if (isa >= 2 && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512dq")) return ops[2];
  if (isa >= 1 && __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) return ops[1];
#endif
  return ops[0];
}

static double att_rowmax_f64(const double* x, int64_t n, double init) {
  double mx = init;
  for (int64_t c = 0; c < n; c++) mx = x[c] > mx || x[c] != x[c] ? x[c] : mx;
  return mx;
}

static double att_exp_row_f64(double* x, int64_t n, double mx) {
  double s = 0.0;
  for (int64_t c = 0; c < n; c++) {
    x[c] = exp(x[c] - mx);
    s += x[c];
  }
  return s;
}

/* ---- scaled_dot_product_attention --------------------------------------- */
typedef struct sdpa_job {
  const bp_tensor_desc_t *q, *k, *v, *m, *o;
  att_batch_t batch;
  int gdim; /* batch dim of grouped heads, -1: none */
  int64_t L, S, E, Ev, bq, bk, nqb;
  double scale;
  int causal;
  int64_t m_ls, m_ss; /* mask strides along L and S (0: broadcast) */
  att_row_ops_t ops; /* f32 row kernels for this CPU */
  _Atomic int failed;
  bp_status_t status; /* written by the first failing item */
} sdpa_job_t;

/* Row kernels by compute type (f32: the job's ISA variant). */
static inline float att_rowmax_f32j(const sdpa_job_t* j, const float* x, int64_t n, float init) {
  return j->ops.rowmax(x, n, init);
}
static inline float att_exprow_f32j(const sdpa_job_t* j, float* x, int64_t n, float mx) {
  return j->ops.exprow(x, n, mx);
}
static inline double att_rowmax_f64j(const sdpa_job_t* j, const double* x, int64_t n, double init) {
  (void)j;
  return att_rowmax_f64(x, n, init);
}
static inline double att_exprow_f64j(const sdpa_job_t* j, double* x, int64_t n, double mx) {
  (void)j;
  return att_exp_row_f64(x, n, mx);
}

static void sdpa_fail(sdpa_job_t* j, bp_status_t st) {
  int expected = 0;
  if (atomic_compare_exchange_strong(&j->failed, &expected, 1)) j->status = st;
}

/* Where batch entry b of each operand starts, and its element sizes. */
typedef struct att_item {
  unsigned char *q, *k, *v, *o, *m; /* m: NULL without a mask */
  size_t qes, kes, ves, oes, mes;
} att_item_t;

static void att_item_at(const sdpa_job_t* j, int64_t b, att_item_t* it) {
  it->q = att_at(j->q, att_batch_offset(j->q, 2, &j->batch, b, -1));
  it->k = att_at(j->k, att_batch_offset(j->k, 2, &j->batch, b, j->gdim));
  it->v = att_at(j->v, att_batch_offset(j->v, 2, &j->batch, b, j->gdim));
  it->o = att_at(j->o, att_batch_offset(j->o, 2, &j->batch, b, -1));
  it->m = j->m ? att_at(j->m, att_batch_offset(j->m, 2, &j->batch, b, -1)) : NULL;
  it->qes = bp_dtype_size(j->q->dtype);
  it->kes = bp_dtype_size(j->k->dtype);
  it->ves = bp_dtype_size(j->v->dtype);
  it->oes = bp_dtype_size(j->o->dtype);
  it->mes = j->m ? bp_dtype_size(j->m->dtype) : 0;
}

/* Rows j0 .. j0 + w of a key or value operand t (n wide, batch entry at
 * base, es bytes an element) in compute type kt: read in place when t is of
 * that type with unit column stride (*rs: its row stride), else converted
 * into `tile` (*rs = n). */
static const void* att_rows(const bp_tensor_desc_t* t, const unsigned char* base, size_t es, int kt, int64_t j0,
                            int64_t w, int64_t n, void* tile, int64_t* rs) {
  uint32_t r = t->rank;
  if (t->dtype == cpu_kt_dtype[kt] && t->strides[r - 1] == 1) {
    *rs = t->strides[r - 2];
    return base + j0 * *rs * (int64_t)es;
  }
  for (int64_t c = 0; c < w; c++)
    cpu_load[kt]((unsigned char*)tile + (size_t)(c * n) * cpu_kt_size[kt], base + (j0 + c) * t->strides[r - 2] * (int64_t)es,
                 t->strides[r - 1], n, t->dtype);
  *rs = n;
  return tile;
}

/* Masked keys take no part (docs/semantics.md): a weight of exactly 0 times
 * an inf or NaN value would still give NaN. A block whose values are all
 * finite (nearly always) takes the fast products; otherwise its masked
 * weights are marked -0.0 (exp never gives -0.0) and its P @ V skips them.
 * One pair of helpers per compute type T. */
#define ATT_GUARD_FNS(SFX, T, UT, EXP)                                                          \
  /* Nonzero when rows 0..w of v (n wide, row stride rs) are all finite (an \
   * integer test of the exponent bits, so that it vectorizes). */                              \
  static int att_finite_##SFX(const T* v, int64_t rs, int64_t w, int64_t n) {                 \
    UT bad = 0;                                                                                 \
    for (int64_t c = 0; c < w; c++) {                                                           \
      const UT* row = (const UT*)(const void*)(v + c * rs);                                     \
      for (int64_t d = 0; d < n; d++) bad |= (UT)((row[d] & (EXP)) == (EXP));                  \
    }                                                                                           \
    return bad == 0;                                                                            \
  }                                                                                             \
  /* acc[r][.] += sum over unmarked weights p[r][c] of p[r][c] * v[c][.]. */                   \
  static void att_pv_guarded_##SFX(const T* p, int64_t p_rs, int64_t h, int64_t w, const T* v, \
                                   int64_t v_rs, int64_t n, T* acc) {                           \
    for (int64_t r = 0; r < h; r++)                                                             \
      for (int64_t c = 0; c < w; c++) {                                                         \
        T pc = p[r * p_rs + c];                                                                 \
        if (pc == 0 && signbit(pc)) continue;                                                   \
        for (int64_t d = 0; d < n; d++) acc[r * n + d] += pc * v[c * v_rs + d];                 \
      }                                                                                         \
  }
ATT_GUARD_FNS(f32, float, uint32_t, UINT32_C(0x7F800000))
ATT_GUARD_FNS(f64, double, uint64_t, UINT64_C(0x7FF0000000000000))

/* One compute type T (dtype DT, kernel type KT): the items [ub, ue). */
#define ATT_SDPA_KERNEL(SFX, T, KT, DT)                                                         \
  static void sdpa_items_##SFX(void* ctx, int64_t ub, int64_t ue) {                             \
    sdpa_job_t* j = ctx;                                                                        \
    const int64_t bq = j->bq, bk = j->bk, E = j->E, Ev = j->Ev, L = j->L, S = j->S;             \
    const bp_tensor_desc_t *q = j->q, *k = j->k, *v = j->v, *m = j->m, *o = j->o;               \
    const int64_t qr = q->rank, orr = o->rank;                                                  \
    size_t count = (size_t)(bq * E + bk * E + bk * Ev + bq * bk + bq * Ev + 2 * bq + bk);       \
    T* mem = malloc(sizeof(T) * (count ? count : 1));                                           \
    if (!mem) {                                                                                 \
      sdpa_fail(j, cpu_error(BP_RESOURCE_EXHAUSTED,                                             \
                             "cpu: scaled_dot_product_attention: cannot allocate %zu bytes",    \
                             sizeof(T) * count));                                               \
      return;                                                                                   \
    }                                                                                           \
    T *Qt = mem, *Kt = Qt + bq * E, *Vt = Kt + bk * E, *St = Vt + bk * Ev;                      \
    T *Acc = St + bq * bk, *mrow = Acc + bq * Ev, *lrow = mrow + bq, *tmp = lrow + bq;          \
    for (int64_t u = ub; u < ue && !atomic_load(&j->failed); u++) {                             \
      int64_t b = u / j->nqb, i0 = (u % j->nqb) * bq, h = L - i0 < bq ? L - i0 : bq;            \
      att_item_t it;                                                                            \
      att_item_at(j, b, &it);                                                                   \
      unsigned char *qp = it.q, *kp = it.k, *vp = it.v, *op = it.o, *mp = it.m;                 \
      const size_t qes = it.qes, kes = it.kes, ves = it.ves, oes = it.oes, mes = it.mes;        \
      for (int64_t r = 0; r < h; r++)                                                           \
        cpu_load[KT](Qt + r * E, qp + (i0 + r) * q->strides[qr - 2] * (int64_t)qes,             \
                     q->strides[qr - 1], E, q->dtype);                                          \
      for (int64_t r = 0; r < h; r++) {                                                         \
        mrow[r] = -INFINITY;                                                                    \
        lrow[r] = 0;                                                                            \
      }                                                                                         \
      memset(Acc, 0, sizeof(T) * (size_t)(h * Ev));                                             \
      int64_t jend = j->causal && i0 + h < S ? i0 + h : S;                                      \
      for (int64_t j0 = 0; j0 < jend; j0 += bk) {                                               \
        int64_t w = jend - j0 < bk ? jend - j0 : bk;                                            \
        int64_t k_rs, v_rs;                                                                     \
        const T* Kb = att_rows(k, kp, kes, KT, j0, w, E, Kt, &k_rs);                            \
        const T* Vb = att_rows(v, vp, ves, KT, j0, w, Ev, Vt, &v_rs);                           \
        const int guard = !att_finite_##SFX(Vb, v_rs, w, Ev);                                   \
        bp_status_t st = cpu_gemm(DT, h, w, E, j->scale, Qt, E, 1, Kb, 1, k_rs, 0, St, bk, 1);  \
        if (st != BP_OK) {                                                                      \
          sdpa_fail(j, st);                                                                     \
          break;                                                                                \
        }                                                                                       \
        for (int64_t r = 0; r < h; r++) {                                                       \
          T* row = St + r * bk;                                                                 \
          int64_t i = i0 + r;                                                                   \
          if (j->causal)                                                                        \
            for (int64_t c = i + 1 - j0 > 0 ? i + 1 - j0 : 0; c < w; c++) row[c] = -INFINITY;   \
          if (m && m->dtype == BP_DTYPE_BOOL) {                                                 \
            const unsigned char* mr = mp + (i * j->m_ls + j0 * j->m_ss) * (int64_t)mes;         \
            for (int64_t c = 0; c < w; c++)                                                     \
              if (!mr[c * j->m_ss]) row[c] = -INFINITY;                                         \
          } else if (m) {                                                                       \
            cpu_load[KT](tmp, mp + (i * j->m_ls + j0 * j->m_ss) * (int64_t)mes, j->m_ss, w,     \
                         m->dtype);                                                             \
            for (int64_t c = 0; c < w; c++) row[c] += tmp[c];                                   \
          }                                                                                     \
          /* NaN propagates into the maximum (and so into the whole row) */                   \
          T mx = att_rowmax_##SFX##j(j, row, w, mrow[r]);                                             \
          if (mx == -INFINITY) { /* every score so far masked: no weight yet */                \
            for (int64_t c = 0; c < w; c++) row[c] = guard ? (T)-0.0 : 0;                       \
            continue;                                                                           \
          }                                                                                     \
          for (int64_t c = 0; guard && c < w; c++) tmp[c] = row[c] == -INFINITY;                \
          T corr = (T)exp(mrow[r] - mx);                                                        \
          lrow[r] = lrow[r] * corr + att_exprow_##SFX##j(j, row, w, mx);                             \
          for (int64_t c = 0; guard && c < w; c++)                                              \
            if (tmp[c] != 0) row[c] = (T)-0.0;                                                  \
          if (corr != 1)                                                                        \
            for (int64_t c = 0; c < Ev; c++) Acc[r * Ev + c] *= corr;                           \
          mrow[r] = mx;                                                                         \
        }                                                                                       \
        if (guard) {                                                                            \
          att_pv_guarded_##SFX(St, bk, h, w, Vb, v_rs, Ev, Acc);                                \
          continue;                                                                             \
        }                                                                                       \
        st = cpu_gemm(DT, h, Ev, w, 1.0, St, bk, 1, Vb, v_rs, 1, 1, Acc, Ev, 1);                \
        if (st != BP_OK) {                                                                      \
          sdpa_fail(j, st);                                                                     \
          break;                                                                                \
        }                                                                                       \
      }                                                                                         \
      for (int64_t r = 0; r < h; r++) {                                                         \
        T* row = Acc + r * Ev;                                                                  \
        T l = lrow[r];                                                                          \
        /* l == 0: a fully masked row gives zeros (PyTorch's _safe_softmax). */                 \
        for (int64_t c = 0; c < Ev; c++) row[c] = l == 0 ? (T)0 : row[c] / l;                   \
        cpu_store[KT](op + (i0 + r) * o->strides[orr - 2] * (int64_t)oes, o->strides[orr - 1],  \
                      row, Ev, o->dtype);                                                       \
      }                                                                                         \
    }                                                                                           \
    free(mem);                                                                                  \
  }
ATT_SDPA_KERNEL(f32, float, CPU_KT_F32, BP_DTYPE_F32)
ATT_SDPA_KERNEL(f64, double, CPU_KT_F64, BP_DTYPE_F64)

/* f32, f16 and bf16 on the AVX-512 tile (cpu_attention_tile.c): the items
 * [ub, ue) of ATT_TILE_Q queries each; the masks apply here, to the
 * transposed scores. Same results as the GEMM path within rounding: the
 * scale multiplies q (not q k^T) and the exp is cpu_vmath's. */
static void sdpa_items_tile(void* ctx, int64_t ub, int64_t ue) {
  sdpa_job_t* j = ctx;
  enum { Q = ATT_TILE_Q };
  const int64_t bk = j->bk, E = j->E, Ev = j->Ev, L = j->L, S = j->S;
  const bp_tensor_desc_t *q = j->q, *k = j->k, *v = j->v, *m = j->m, *o = j->o;
  int64_t row = E > Ev ? E : Ev;
  if (bk > row) row = bk;
  /* qt, st, acct, m, l, corr: whole vectors of Q lanes, so 64-byte aligned */
  size_t count = (size_t)(Q * E + Q * bk + Q * Ev + 3 * Q + row + bk * E + bk * Ev);
  float* mem = aligned_alloc(64, (sizeof(float) * count + 63) / 64 * 64);
  if (!mem) {
    sdpa_fail(j, cpu_error(BP_RESOURCE_EXHAUSTED, "cpu: scaled_dot_product_attention: cannot allocate %zu bytes",
                           sizeof(float) * count));
    return;
  }
  float *qt = mem, *st = qt + Q * E, *acct = st + Q * bk, *mrow = acct + Q * Ev, *lrow = mrow + Q;
  float *corr = lrow + Q, *tmp = corr + Q, *kt = tmp + row, *vt = kt + bk * E;
  const float *krows[ATT_TILE_BK], *vrows[ATT_TILE_BK]; /* the block's key and value rows */
  const float scale = (float)j->scale;
  for (int64_t u = ub; u < ue && !atomic_load(&j->failed); u++) {
    int64_t b = u / j->nqb, i0 = (u % j->nqb) * Q, h = L - i0 < Q ? L - i0 : Q;
    att_item_t it;
    att_item_at(j, b, &it);
    for (int64_t r = 0; r < Q; r++) {
      if (r < h)
        cpu_load[CPU_KT_F32](tmp, it.q + (i0 + r) * q->strides[q->rank - 2] * (int64_t)it.qes,
                             q->strides[q->rank - 1], E, q->dtype);
      for (int64_t e = 0; e < E; e++) qt[e * Q + r] = r < h ? tmp[e] * scale : 0.0f;
      mrow[r] = -INFINITY;
      lrow[r] = 0.0f;
    }
    memset(acct, 0, sizeof(float) * (size_t)(Q * Ev));
    int64_t jend = j->causal && i0 + h < S ? i0 + h : S;
    for (int64_t j0 = 0; j0 < jend; j0 += bk) {
      int64_t w = jend - j0 < bk ? jend - j0 : bk, k_rs = k->strides[k->rank - 2], v_rs = v->strides[v->rank - 2];
      att_rows_f32(k, it.k + j0 * k_rs * (int64_t)it.kes, k_rs, w, E, kt, krows);
      att_rows_f32(v, it.v + j0 * v_rs * (int64_t)it.ves, v_rs, w, Ev, vt, vrows);
      cpu_att_tile_scores(qt, E, krows, w, st);
      /* causal: query i0 + r sees keys up to i0 + r */
      for (int64_t c = j->causal ? 0 : w; c < w; c++)
        for (int64_t r = 0; r < Q && i0 + r < j0 + c; r++) st[c * Q + r] = -INFINITY;
      for (int64_t r = 0; m && r < h; r++) {
        const unsigned char* mr = it.m + ((i0 + r) * j->m_ls + j0 * j->m_ss) * (int64_t)it.mes;
        if (m->dtype == BP_DTYPE_BOOL) {
          for (int64_t c = 0; c < w; c++)
            if (!mr[c * j->m_ss]) st[c * Q + r] = -INFINITY;
        } else {
          cpu_load[CPU_KT_F32](tmp, mr, j->m_ss, w, m->dtype);
          for (int64_t c = 0; c < w; c++) st[c * Q + r] += tmp[c];
        }
      }
      int guard = !cpu_att_tile_finite(vrows, w, Ev); /* masked keys skipped (ATT_GUARD_FNS) */
      cpu_att_tile_softmax(st, w, mrow, lrow, corr, guard);
      cpu_att_tile_pv(st, w, vrows, Ev, acct, corr, guard);
    }
    for (int64_t r = 0; r < h; r++) {
      /* l == 0: a fully masked row gives zeros (PyTorch's _safe_softmax). */
      for (int64_t d = 0; d < Ev; d++) tmp[d] = lrow[r] == 0 ? 0.0f : acct[d * Q + r] / lrow[r];
      cpu_store[CPU_KT_F32](it.o + (i0 + r) * o->strides[o->rank - 2] * (int64_t)it.oes, o->strides[o->rank - 1],
                            tmp, Ev, o->dtype);
    }
  }
  free(mem);
}

static int att_is_float(uint32_t d) {
  return d == BP_DTYPE_F32 || d == BP_DTYPE_F64 || d == BP_DTYPE_F16 || d == BP_DTYPE_BF16;
}

static bp_status_t sdpa_exec(const bp_op_call_t* call) {
  const bp_sdpa_attrs_t* a = call->attrs;
  sdpa_job_t j;
  memset(&j, 0, sizeof j);
  j.q = call->inputs[0];
  j.k = call->inputs[1];
  j.v = call->inputs[2];
  j.m = call->num_inputs > 3 && call->inputs[3]->dtype != BP_DTYPE_INVALID ? call->inputs[3] : NULL;
  j.o = call->outputs[0];
  const bp_tensor_desc_t *q = j.q, *k = j.k, *v = j.v, *m = j.m, *o = j.o;
  if (!a) return cpu_error(BP_INVALID_ARGUMENT, "cpu: scaled_dot_product_attention: no attrs");
  if (q->rank < 2 || k->rank < 2 || v->rank < 2 || o->rank < 2)
    return cpu_error(BP_INVALID_ARGUMENT, "cpu: scaled_dot_product_attention: operands need rank >= 2");
  att_batch_of(o, 2, &j.batch);
  j.gdim = a->enable_gqa && j.batch.rank > 0 ? (int)j.batch.rank - 1 : -1;
  j.L = q->sizes[q->rank - 2];
  j.E = q->sizes[q->rank - 1];
  j.S = k->sizes[k->rank - 2];
  j.Ev = v->sizes[v->rank - 1];
  int shapes_ok = k->sizes[k->rank - 1] == j.E && v->sizes[v->rank - 2] == j.S &&
                  o->sizes[o->rank - 2] == j.L && o->sizes[o->rank - 1] == j.Ev &&
                  att_batch_fits(q, 2, &j.batch, -1) && att_batch_fits(k, 2, &j.batch, j.gdim) &&
                  att_batch_fits(v, 2, &j.batch, j.gdim);
  if (m) {
    uint32_t mr = m->rank;
    int64_t ml = mr >= 2 ? m->sizes[mr - 2] : 1, ms = mr >= 1 ? m->sizes[mr - 1] : 1;
    shapes_ok = shapes_ok && (ml == 1 || ml == j.L) && (ms == 1 || ms == j.S) &&
                (mr <= 2 || att_batch_fits(m, 2, &j.batch, -1));
    j.m_ls = ml == 1 ? 0 : m->strides[mr - 2];
    j.m_ss = ms == 1 ? 0 : m->strides[mr - 1];
  }
  if (!shapes_ok)
    return cpu_error(BP_INVALID_ARGUMENT, "cpu: scaled_dot_product_attention: operand shapes do not match");
  if (!att_is_float(q->dtype) || k->dtype != q->dtype || v->dtype != q->dtype ||
      o->dtype != q->dtype || (m && m->dtype != BP_DTYPE_BOOL && m->dtype != q->dtype))
    return cpu_error(BP_INVALID_ARGUMENT, "cpu: scaled_dot_product_attention: dtypes do not match");
  if (a->is_causal && m)
    return cpu_error(BP_INVALID_ARGUMENT,
                     "cpu: scaled_dot_product_attention: attn_mask given with is_causal");
  j.causal = a->is_causal != 0;
  j.scale = a->scale != 0 ? a->scale : 1.0 / sqrt((double)j.E);
  if (j.batch.count == 0 || j.L == 0 || j.Ev == 0) return BP_OK;
  /* Blocks: BQ queries x BK keys with BQ * BK * max(E, Ev) under the
   * single-thread GEMM size; wide heads shrink BQ before BK drops below 16. */
  int64_t wide = j.E > j.Ev ? j.E : j.Ev;
  if (wide < 1) wide = 1;
  j.bq = j.L < ATT_BQ ? j.L : ATT_BQ;
  j.bk = ATT_GEMM_SINGLE_THREAD / (j.bq * wide);
  if (j.bk > 256) j.bk = 256;
  if (j.bk < 16) {
    j.bk = 16;
    j.bq = ATT_GEMM_SINGLE_THREAD / (16 * wide);
    if (j.bq < 1) j.bq = 1;
    if (j.bq > j.L) j.bq = j.L;
  }
  if (j.S > 0 && j.bk > j.S) j.bk = j.S;
  if (j.bk < 1) j.bk = 1;
  j.nqb = (j.L + j.bq - 1) / j.bq;
  j.ops = att_row_ops();
  /* Whole query blocks in f32 compute on the AVX-512 tile; short query runs
   * (decode) would leave most of its lanes empty. */
  if (q->dtype != BP_DTYPE_F64 && j.L >= ATT_TILE_MIN_L && cpu_att_tile_available()) {
    j.bq = ATT_TILE_Q;
    j.bk = j.S > 0 && j.S < ATT_TILE_BK ? j.S : ATT_TILE_BK;
    j.nqb = (j.L + j.bq - 1) / j.bq;
    cpu_parallel_for(j.batch.count * j.nqb, 1, sdpa_items_tile, &j);
    return atomic_load(&j.failed) ? j.status : BP_OK;
  }
  int64_t items = j.batch.count * j.nqb;
  if (q->dtype == BP_DTYPE_F64)
    cpu_parallel_for(items, 1, sdpa_items_f64, &j);
  else
    cpu_parallel_for(items, 1, sdpa_items_f32, &j);
  return atomic_load(&j.failed) ? j.status : BP_OK;
}

/* ---- the family ------------------------------------------------------------- */
static bp_status_t exec_attention(const bp_op_call_t* call) {
  switch (call->op_id) {
    case BP_OP_scaled_dot_product_attention: return sdpa_exec(call);
    case BP_OP_linear: return cpu_att_linear(call);
    case BP_OP_rotary_embedding: return cpu_att_rotary(call);
    case BP_OP_cdist: return cpu_att_cdist(call);
    case BP_OP_pdist: return cpu_att_pdist(call);
    default:
      return cpu_error(BP_UNIMPLEMENTED, "cpu: op %s is not in the attention family",
                       cpu_op_name(call->op_id));
  }
}

static int supported_attention(const bp_op_call_t* call, char* msg, size_t cap) {
  uint32_t op = call->op_id;
  uint32_t d = call->num_inputs ? call->inputs[0]->dtype : BP_DTYPE_INVALID;
  uint32_t o = call->outputs[0]->dtype;
  const char* why = NULL;
  for (uint32_t i = 0; i < call->num_inputs && !why; i++) {
    uint32_t di = call->inputs[i]->dtype;
    if (di == BP_DTYPE_INVALID) continue;
    int mask = op == BP_OP_scaled_dot_product_attention && i == 3;
    if (di != d && !(mask && di == BP_DTYPE_BOOL)) why = "operands of different dtypes";
  }
  if (!why && o != d) why = "the output's dtype differs from the inputs'";
  if (!why) {
    if (op == BP_OP_linear) {
      const bp_linear_attrs_t* a = call->attrs;
      if (d == BP_DTYPE_BOOL || d == BP_DTYPE_C64 || bp_dtype_is_fp8(d))
        why = "bool, c64 and fp8 are not supported";
      else if (!att_is_float(d) && a && a->activation != BP_ACTIVATION_NONE &&
               a->activation != BP_ACTIVATION_RELU)
        why = "integer dtypes take the activations none and relu only";
    } else if (!att_is_float(d)) {
      why = "floating dtypes (f32, f64, f16, bf16) only";
    }
  }
  if (!why) return 0;
  snprintf(msg, cap, "%s (%s)", why, bp_dtype_name(d) ? bp_dtype_name(d) : "?");
  return BP_SUPPORT_DTYPE;
}

const cpu_family_t cpu_family_attention = {
    "attention",
    CPU_FAMILY_OPS(BP_OP_scaled_dot_product_attention, BP_OP_linear, BP_OP_rotary_embedding,
                   BP_OP_cdist, BP_OP_pdist),
    exec_attention, supported_attention, 0};
