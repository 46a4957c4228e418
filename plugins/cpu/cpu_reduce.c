/* backplane CPU plugin: reductions (sum, mean, prod, amax, amin, any, argmax,
 * argmin) and softmax / log_softmax.
 *
 * Reductions accumulate in one of two domains: double for floating inputs
 * or outputs (f32/f16/bf16 sums are accurate without pairwise tricks), int64
 * for integers and bool (wrapping like PyTorch). The input is viewed as kept
 * dims x reduced dims; work is split over outputs when there are enough,
 * else over the reduced range of each output with ordered partials.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cpu_kernels.h"

#if defined(__SSE__)
#include <xmmintrin.h>
#endif

/* The softmax kernels' 64-byte vectors never cross a call (every helper
 * taking or returning one is always inlined), so GCC's note that passing
 * them without AVX-512 changes the ABI does not apply to this file. */
#pragma GCC diagnostic ignored "-Wpsabi"

#define RED_GRAIN 32768
#define RED_MAX_SPLIT 64

enum { DOM_F64 = 0, DOM_I64 = 1 };

typedef struct acc {
  double f;
  int64_t i;
  int64_t idx;
  int nan;
} acc_t;

typedef struct red_job {
  uint32_t op;
  int dom;
  bp_nd_layout_t K; /* kept dims: operand 0 = output, 1 = input */
  bp_nd_layout_t R; /* reduced dims: operand 0 = input */
  int64_t nk, nr;
  const unsigned char* in;
  uint32_t in_dtype, in_es;
  unsigned char* out;
  uint32_t out_dtype, out_es;
  int fast_f32; /* f32 input, sum/mean/amax/amin: the vector paths apply */
  /* split mode */
  int64_t koff, chunk;
  acc_t part[RED_MAX_SPLIT];
} red_job_t;

static acc_t acc_init(uint32_t op, int dom) {
  acc_t a = {0, 0, -1, 0};
  switch (op) {
    case BP_OP_prod: a.f = 1; a.i = 1; break;
    case BP_OP_amax: a.f = -INFINITY; a.i = INT64_MIN; break;
    case BP_OP_amin: a.f = INFINITY; a.i = INT64_MAX; break;
    default: break;
  }
  (void)dom;
  return a;
}

/* Folds n values (domain type) at linear positions pos.. into a. */
static void acc_block_f64(uint32_t op, acc_t* a, const double* restrict v, int64_t n, int64_t pos) {
  switch (op) {
    case BP_OP_sum:
    case BP_OP_mean: {
      double s0 = 0, s1 = 0, s2 = 0, s3 = 0;
      int64_t i = 0;
      for (; i + 4 <= n; i += 4) {
        s0 += v[i];
        s1 += v[i + 1];
        s2 += v[i + 2];
        s3 += v[i + 3];
      }
      for (; i < n; i++) s0 += v[i];
      a->f += (s0 + s1) + (s2 + s3);
      break;
    }
    case BP_OP_prod: for (int64_t i = 0; i < n; i++) a->f *= v[i]; break;
    case BP_OP_amax:
      for (int64_t i = 0; i < n; i++) {
        if (isnan(v[i])) a->nan = 1;
        else if (v[i] > a->f) a->f = v[i];
      }
      break;
    case BP_OP_amin:
      for (int64_t i = 0; i < n; i++) {
        if (isnan(v[i])) a->nan = 1;
        else if (v[i] < a->f) a->f = v[i];
      }
      break;
    case BP_OP_any: for (int64_t i = 0; i < n; i++) a->i |= v[i] != 0; break;
    case BP_OP_argmax:
    case BP_OP_argmin: {
      int mx = op == BP_OP_argmax;
      for (int64_t i = 0; i < n; i++) {
        if (a->nan) break; /* the first NaN wins */
        double x = v[i];
        if (a->idx < 0 || isnan(x) || (mx ? x > a->f : x < a->f)) {
          a->f = x;
          a->idx = pos + i;
          if (isnan(x)) a->nan = 1;
        }
      }
      break;
    }
    default: break;
  }
}

static void acc_block_i64(uint32_t op, acc_t* a, const int64_t* restrict v, int64_t n, int64_t pos) {
  switch (op) {
    case BP_OP_sum: {
      int64_t s = 0;
      for (int64_t i = 0; i < n; i++) s += v[i];
      a->i += s;
      break;
    }
    case BP_OP_prod: for (int64_t i = 0; i < n; i++) a->i *= v[i]; break;
    case BP_OP_amax: for (int64_t i = 0; i < n; i++) a->i = v[i] > a->i ? v[i] : a->i; break;
    case BP_OP_amin: for (int64_t i = 0; i < n; i++) a->i = v[i] < a->i ? v[i] : a->i; break;
    case BP_OP_any: for (int64_t i = 0; i < n; i++) a->i |= v[i] != 0; break;
    case BP_OP_argmax:
    case BP_OP_argmin: {
      int mx = op == BP_OP_argmax;
      for (int64_t i = 0; i < n; i++)
        if (a->idx < 0 || (mx ? v[i] > a->i : v[i] < a->i)) {
          a->i = v[i];
          a->idx = pos + i;
        }
      break;
    }
    default: break;
  }
}

/* a = a (earlier positions) combined with b (later positions). */
static void acc_combine(uint32_t op, int dom, acc_t* a, const acc_t* b) {
  switch (op) {
    case BP_OP_sum: case BP_OP_mean: a->f += b->f; a->i += b->i; break;
    case BP_OP_prod: a->f *= b->f; a->i *= b->i; break;
    case BP_OP_amax:
      a->nan |= b->nan;
      if (b->f > a->f) a->f = b->f;
      if (b->i > a->i) a->i = b->i;
      break;
    case BP_OP_amin:
      a->nan |= b->nan;
      if (b->f < a->f) a->f = b->f;
      if (b->i < a->i) a->i = b->i;
      break;
    case BP_OP_any: a->i |= b->i; break;
    case BP_OP_argmax:
    case BP_OP_argmin: {
      if (b->idx < 0 || a->nan) break;
      int mx = op == BP_OP_argmax;
      int better = a->idx < 0 || b->nan ||
                   (dom == DOM_F64 ? (mx ? b->f > a->f : b->f < a->f) : (mx ? b->i > a->i : b->i < a->i));
      if (better) *a = *b;
      break;
    }
    default: break;
  }
}

/* 4-lane f32 vectors (GCC/Clang vector extensions: one SSE register on
 * baseline x86-64, one NEON register on arm64). */
typedef float v4f __attribute__((vector_size(16)));
typedef int32_t v4i __attribute__((vector_size(16)));
typedef uint32_t v4u __attribute__((vector_size(16)));
static inline v4f v4_load(const float* p) {
  v4f v;
  memcpy(&v, p, sizeof v);
  return v;
}
static inline void v4_store(float* p, v4f v) { memcpy(p, &v, sizeof v); }
static inline v4i v4_load_i(const int32_t* p) {
  v4i v;
  memcpy(&v, p, sizeof v);
  return v;
}
static inline void v4_store_i(int32_t* p, v4i v) { memcpy(p, &v, sizeof v); }
static inline v4f v4_set1(float x) { return (v4f){x, x, x, x}; }
/* m ? a : b per lane (m lanes are all ones or all zeros). */
static inline v4f v4_blend(v4i m, v4f a, v4f b) { return (v4f)((m & (v4i)a) | (~m & (v4i)b)); }
static inline float v4_hext(v4f v, int mx) {
  float m = v[0];
  for (int k = 1; k < 4; k++) m = (mx ? v[k] > m : v[k] < m) ? v[k] : m;
  return m;
}
static inline int v4_any(v4i m) { return (m[0] | m[1] | m[2] | m[3]) != 0; }
/* a > b ? a : b and a < b ? a : b per lane (b when either is NaN: callers
 * track NaN apart). One maxps / minps on x86. */
static inline v4f v4_max(v4f a, v4f b) {
#if defined(__SSE__)
  return (v4f)_mm_max_ps((__m128)a, (__m128)b);
#else
  return v4_blend(a > b, a, b);
#endif
}
static inline v4f v4_min(v4f a, v4f b) {
#if defined(__SSE__)
  return (v4f)_mm_min_ps((__m128)a, (__m128)b);
#else
  return v4_blend(a < b, a, b);
#endif
}
static inline double v4_hsum(v4f v) { return ((double)v[0] + v[1]) + ((double)v[2] + v[3]); }

/* Folds n contiguous f32 values into a (sum, mean, amax, amin). Sums run in
 * 16 f32 lanes over chunks of 1024 values (error within 64 u of the chunk's
 * magnitude), the chunks add up in double; extremes are exact, with NaN
 * recorded apart. */
#define RED_CHUNK 1024
/* Long rows are read as RED_STREAMS interleaved streams (quarters of the
 * row, in lockstep): one core then keeps several independent runs of
 * cache-line fills in flight, which roughly doubles what one stream reads. */
#define RED_STREAMS 4
#define RED_STREAMS_MIN 8192
static void acc_row_f32(uint32_t op, acc_t* a, const float* restrict x, int64_t n);

/* Folds q floats (a multiple of 16) of each of RED_STREAMS streams s[k]
 * into accs[k], all streams in lockstep (accs may repeat). */
static void acc_streams_f32(uint32_t op, acc_t* const* accs, const float* const* s, int64_t q) {
  if (op == BP_OP_sum || op == BP_OP_mean) {
    double total[RED_STREAMS] = {0};
    const int64_t step = RED_CHUNK / RED_STREAMS; /* per stream and chunk */
    for (int64_t b = 0; b < q; b += step) {
      int64_t e = b + step < q ? b + step : q;
      v4f l[RED_STREAMS][2];
      for (int k = 0; k < RED_STREAMS; k++) l[k][0] = l[k][1] = v4_set1(0);
      for (int64_t i = b; i < e; i += 16)
        for (int k = 0; k < RED_STREAMS; k++) {
          l[k][0] += v4_load(s[k] + i) + v4_load(s[k] + i + 4);
          l[k][1] += v4_load(s[k] + i + 8) + v4_load(s[k] + i + 12);
        }
      for (int k = 0; k < RED_STREAMS; k++) total[k] += v4_hsum(l[k][0]) + v4_hsum(l[k][1]);
    }
    for (int k = 0; k < RED_STREAMS; k++) accs[k]->f += total[k];
    return;
  }
  int mx = op == BP_OP_amax;
  v4f m[RED_STREAMS][2];
  v4i nan[RED_STREAMS];
  for (int k = 0; k < RED_STREAMS; k++) {
    m[k][0] = m[k][1] = v4_set1(mx ? -INFINITY : INFINITY);
    nan[k] = (v4i){0, 0, 0, 0};
  }
  for (int64_t i = 0; i < q; i += 8)
    for (int k = 0; k < RED_STREAMS; k++) {
      v4f v0 = v4_load(s[k] + i), v1 = v4_load(s[k] + i + 4);
      nan[k] |= (v0 != v0) | (v1 != v1);
      m[k][0] = mx ? v4_max(v0, m[k][0]) : v4_min(v0, m[k][0]);
      m[k][1] = mx ? v4_max(v1, m[k][1]) : v4_min(v1, m[k][1]);
    }
  for (int k = 0; k < RED_STREAMS; k++) {
    acc_t* a = accs[k];
    a->nan |= v4_any(nan[k]);
    for (int h = 0; h < 2; h++) {
      float v = v4_hext(m[k][h], mx);
      if (mx ? v > a->f : v < a->f) a->f = v;
    }
  }
}

/* A long row as RED_STREAMS quarter streams, then its tail. */
static void acc_row_f32_streams(uint32_t op, acc_t* a, const float* restrict x, int64_t n) {
  const int64_t q = n / RED_STREAMS / 16 * 16; /* floats per stream */
  const float* s[RED_STREAMS];
  acc_t* accs[RED_STREAMS];
  for (int k = 0; k < RED_STREAMS; k++) {
    s[k] = x + k * q;
    accs[k] = a;
  }
  acc_streams_f32(op, accs, s, q);
  acc_row_f32(op, a, x + RED_STREAMS * q, n - RED_STREAMS * q);
}

void cpu_reduce_row_f32(uint32_t op, const float* x, int64_t n, double* acc, int* nan) {
  acc_t a = {.f = *acc, .nan = *nan};
  acc_row_f32(op, &a, x, n);
  *acc = a.f;
  *nan = a.nan;
}

static void acc_row_f32(uint32_t op, acc_t* a, const float* restrict x, int64_t n) {
  if (n >= RED_STREAMS_MIN) {
    acc_row_f32_streams(op, a, x, n);
    return;
  }
  int64_t i = 0;
  if (op == BP_OP_sum || op == BP_OP_mean) {
    double total = 0;
    for (int64_t b = 0; b < n; b += RED_CHUNK) {
      int64_t e = b + RED_CHUNK < n ? b + RED_CHUNK : n;
      v4f l0 = v4_set1(0), l1 = l0, l2 = l0, l3 = l0;
      for (i = b; i + 16 <= e; i += 16) {
        l0 += v4_load(x + i);
        l1 += v4_load(x + i + 4);
        l2 += v4_load(x + i + 8);
        l3 += v4_load(x + i + 12);
      }
      float t = 0;
      for (; i < e; i++) t += x[i];
      total += (double)t + (v4_hsum(l0) + v4_hsum(l1)) + (v4_hsum(l2) + v4_hsum(l3));
    }
    a->f += total;
    return;
  }
  int mx = op == BP_OP_amax;
  v4f m0 = v4_set1(mx ? -INFINITY : INFINITY), m1 = m0, m2 = m0, m3 = m0;
  v4i nan = {0, 0, 0, 0};
#define RED_EXT_STEP(m, v) m = mx ? v4_max(v, m) : v4_min(v, m)
  for (; i + 16 <= n; i += 16) {
    v4f v0 = v4_load(x + i), v1 = v4_load(x + i + 4), v2 = v4_load(x + i + 8), v3 = v4_load(x + i + 12);
    nan |= (v0 != v0) | (v1 != v1) | (v2 != v2) | (v3 != v3);
    RED_EXT_STEP(m0, v0);
    RED_EXT_STEP(m1, v1);
    RED_EXT_STEP(m2, v2);
    RED_EXT_STEP(m3, v3);
  }
  RED_EXT_STEP(m0, m1);
  RED_EXT_STEP(m2, m3);
  RED_EXT_STEP(m0, m2);
#undef RED_EXT_STEP
  float m = v4_hext(m0, mx);
  int any_nan = v4_any(nan);
  for (; i < n; i++) {
    any_nan |= x[i] != x[i];
    m = mx ? (x[i] > m ? x[i] : m) : (x[i] < m ? x[i] : m);
  }
  a->nan |= any_nan;
  if (mx ? m > a->f : m < a->f) a->f = m;
}

/* Reduces linear positions [rb, re) of the reduced space for the output
 * whose kept offset (input elements) is koff. */
static acc_t reduce_range(const red_job_t* j, int64_t koff, int64_t rb, int64_t re) {
  acc_t a = acc_init(j->op, j->dom);
  bp_nd_cursor_t c;
  bp_nd_cursor_init(&c, &j->R, rb);
  _Alignas(64) unsigned char buf[CPU_BLOCK * 8];
  int kt = j->dom == DOM_F64 ? CPU_KT_F64 : CPU_KT_I64;
  const int last = j->R.ndim - 1;
  for (int64_t pos = rb; pos < re;) {
    int64_t n = bp_nd_row_left(&c, &j->R);
    if (n > re - pos) n = re - pos;
    int64_t s = j->R.strides[0][last];
    const unsigned char* row = j->in + (koff + c.off[0]) * (int64_t)j->in_es;
    if (j->fast_f32 && s == 1) {
      acc_row_f32(j->op, &a, (const float*)row, n);
      bp_nd_cursor_advance(&c, &j->R, n);
      pos += n;
      continue;
    }
    for (int64_t o = 0; o < n; o += CPU_BLOCK) {
      int64_t cnt = n - o < CPU_BLOCK ? n - o : CPU_BLOCK;
      const void* v;
      if (s == 1 && j->in_dtype == cpu_kt_dtype[kt]) {
        v = row + o * (int64_t)j->in_es;
      } else {
        cpu_load[kt](buf, row + o * s * (int64_t)j->in_es, s, cnt, j->in_dtype);
        v = buf;
      }
      if (j->dom == DOM_F64) acc_block_f64(j->op, &a, v, cnt, pos + o);
      else acc_block_i64(j->op, &a, v, cnt, pos + o);
    }
    bp_nd_cursor_advance(&c, &j->R, n);
    pos += n;
  }
  return a;
}

static void store_result(const red_job_t* j, int64_t out_off, const acc_t* a) {
  unsigned char* dst = j->out + out_off * (int64_t)j->out_es;
  switch (j->op) {
    case BP_OP_argmax:
    case BP_OP_argmin:
      cpu_store[CPU_KT_I64](dst, 1, &a->idx, 1, j->out_dtype);
      return;
    case BP_OP_mean: {
      double m = a->f / (double)j->nr; /* empty: 0/0 = NaN */
      cpu_store[CPU_KT_F64](dst, 1, &m, 1, j->out_dtype);
      return;
    }
    default:
      if (j->dom == DOM_F64 && j->op != BP_OP_any) {
        double v = a->nan ? NAN : a->f;
        cpu_store[CPU_KT_F64](dst, 1, &v, 1, j->out_dtype);
      } else {
        cpu_store[CPU_KT_I64](dst, 1, &a->i, 1, j->out_dtype);
      }
  }
}

static void red_outputs(void* ctx, int64_t b, int64_t e) {
  const red_job_t* j = ctx;
  bp_nd_cursor_t c;
  bp_nd_cursor_init(&c, &j->K, b);
  /* Contiguous f32 rows shorter than RED_STREAMS_MIN: RED_STREAMS rows at
   * once, each its own read stream. */
  int rows4 = j->fast_f32 && j->R.ndim == 1 && j->R.strides[0][0] == 1 && j->nr >= 16 &&
              j->nr < RED_STREAMS_MIN;
  while (rows4 && e - b >= RED_STREAMS) {
    acc_t acc[RED_STREAMS];
    acc_t* accs[RED_STREAMS];
    const float* s[RED_STREAMS];
    int64_t out_off[RED_STREAMS];
    for (int k = 0; k < RED_STREAMS; k++) {
      acc[k] = acc_init(j->op, j->dom);
      accs[k] = &acc[k];
      s[k] = (const float*)(j->in + c.off[1] * (int64_t)j->in_es);
      out_off[k] = c.off[0];
      bp_nd_cursor_advance(&c, &j->K, 1);
    }
    int64_t q = j->nr / 16 * 16;
    acc_streams_f32(j->op, accs, s, q);
    for (int k = 0; k < RED_STREAMS; k++) {
      acc_row_f32(j->op, &acc[k], s[k] + q, j->nr - q);
      store_result(j, out_off[k], &acc[k]);
    }
    b += RED_STREAMS;
  }
  for (int64_t k = b; k < e; k++) {
    acc_t a = reduce_range(j, c.off[1], 0, j->nr);
    store_result(j, c.off[0], &a);
    bp_nd_cursor_advance(&c, &j->K, 1);
  }
}

static void red_split(void* ctx, int64_t b, int64_t e) {
  red_job_t* j = ctx;
  for (int64_t ci = b; ci < e; ci++) {
    int64_t rb = ci * j->chunk, re = rb + j->chunk < j->nr ? rb + j->chunk : j->nr;
    j->part[ci] = reduce_range(j, j->koff, rb, re);
  }
}

/* ---- columns: reducing an outer dim of contiguous f32 rows ------------------ */
/* The input is [nr, nk] with the nk outputs contiguous (stride 1) and rows
 * rstride apart. Tasks are (column block, row chunk) pairs: each folds its
 * rows into a block of per-column accumulators with vector loads, writing
 * partials that a second pass combines in row-chunk order. */
/* Columns per block: 8 KB of each row read contiguously, 16 KB of double
 * accumulators kept in cache; wide rows are split in row chunks first, so
 * each task streams long contiguous runs. */
#define COL_BLOCK 2048
#define COL_RUN 64

typedef struct col_job {
  const red_job_t* j;
  int64_t rstride, ostride;
  int64_t ncb, nrc, rows_per; /* column blocks, row chunks, rows per chunk */
  double* part;               /* [nrc][nk]: sums, or extremes */
  uint8_t* nan;               /* [nrc][nk]: extremes only */
} col_job_t;

static void col_tasks(void* ctx, int64_t b, int64_t e) {
  const col_job_t* cj = ctx;
  const red_job_t* j = cj->j;
  const float* in = (const float*)j->in;
  int is_sum = j->op == BP_OP_sum || j->op == BP_OP_mean, mx = j->op == BP_OP_amax;
  for (int64_t t = b; t < e; t++) {
    int64_t cb = t % cj->ncb, rc = t / cj->ncb;
    int64_t c0 = cb * COL_BLOCK, w = j->nk - c0 < COL_BLOCK ? j->nk - c0 : COL_BLOCK;
    int64_t r0 = rc * cj->rows_per, r1 = r0 + cj->rows_per < j->nr ? r0 + cj->rows_per : j->nr;
    double* out = cj->part + rc * j->nk + c0;
    if (is_sum) {
      /* f32 lanes over runs of COL_RUN rows (error within COL_RUN u of the
       * run's magnitude), the runs added up in double. */
      double acc[COL_BLOCK];
      float run[COL_BLOCK];
      for (int64_t c = 0; c < w; c++) acc[c] = 0;
      for (int64_t rr = r0; rr < r1; rr += COL_RUN) {
        int64_t re = rr + COL_RUN < r1 ? rr + COL_RUN : r1;
        for (int64_t c = 0; c < w; c++) run[c] = 0;
        int64_t r = rr;
        for (; r + 4 <= re; r += 4) { /* four rows at once: four read streams */
          const float* restrict x0 = in + r * cj->rstride + c0;
          const float* restrict x1 = x0 + cj->rstride;
          const float* restrict x2 = x1 + cj->rstride;
          const float* restrict x3 = x2 + cj->rstride;
          for (int64_t c = 0; c < w; c++) run[c] += (x0[c] + x1[c]) + (x2[c] + x3[c]);
        }
        for (; r < re; r++) {
          const float* restrict x = in + r * cj->rstride + c0;
          for (int64_t c = 0; c < w; c++) run[c] += x[c];
        }
        for (int64_t c = 0; c < w; c++) acc[c] += (double)run[c];
      }
      memcpy(out, acc, (size_t)w * sizeof *acc);
    } else {
      float m[COL_BLOCK];
      int32_t nan[COL_BLOCK];
      for (int64_t c = 0; c < w; c++) {
        m[c] = mx ? -INFINITY : INFINITY;
        nan[c] = 0;
      }
      /* Four rows at once (four read streams) in 4-lane vectors; NaN is
       * tracked apart, so maxps/minps semantics for NaN do not matter. */
      int64_t r = r0;
      for (; r < r1; r += 4) {
        int64_t nr = r1 - r < 4 ? r1 - r : 4;
        const float* restrict x[4];
        for (int k = 0; k < 4; k++) x[k] = in + (r + (k < nr ? k : 0)) * cj->rstride + c0;
        int64_t c = 0;
        for (; c + 4 <= w; c += 4) {
          v4f acc = v4_load(m + c);
          v4i nn = v4_load_i(nan + c);
          for (int k = 0; k < 4; k++) {
            v4f v = v4_load(x[k] + c);
            nn |= v != v;
            acc = mx ? v4_max(v, acc) : v4_min(v, acc);
          }
          v4_store(m + c, acc);
          v4_store_i(nan + c, nn);
        }
        for (; c < w; c++)
          for (int k = 0; k < 4; k++) {
            float v = x[k][c];
            nan[c] |= v != v ? -1 : 0;
            m[c] = mx ? (v > m[c] ? v : m[c]) : (v < m[c] ? v : m[c]);
          }
      }
      uint8_t* nn = cj->nan + rc * j->nk + c0;
      for (int64_t c = 0; c < w; c++) {
        out[c] = m[c];
        nn[c] = (uint8_t)nan[c];
      }
    }
  }
}

static void col_combine(void* ctx, int64_t b, int64_t e) {
  const col_job_t* cj = ctx;
  const red_job_t* j = cj->j;
  for (int64_t c = b; c < e; c++) {
    acc_t a = acc_init(j->op, j->dom);
    for (int64_t rc = 0; rc < cj->nrc; rc++) {
      double v = cj->part[rc * j->nk + c];
      if (j->op == BP_OP_sum || j->op == BP_OP_mean) {
        a.f += v;
      } else {
        a.nan |= cj->nan[rc * j->nk + c];
        if (j->op == BP_OP_amax ? v > a.f : v < a.f) a.f = v;
      }
    }
    store_result(j, c * cj->ostride, &a);
  }
}

/* 1 when done; 0 when the partials cannot be allocated (the caller falls
 * back to the general path). */
static int reduce_columns_f32(const red_job_t* j) {
  col_job_t cj;
  memset(&cj, 0, sizeof cj);
  cj.j = j;
  cj.rstride = j->R.strides[0][0];
  cj.ostride = j->K.strides[0][0];
  cj.ncb = (j->nk + COL_BLOCK - 1) / COL_BLOCK;
  int64_t want = 4 * (int64_t)cpu_pool_threads();
  cj.nrc = (want + cj.ncb - 1) / cj.ncb;
  if (cj.nrc > j->nr / 32) cj.nrc = j->nr / 32; /* at least 32 rows per chunk */
  if (cj.nrc < 1) cj.nrc = 1;
  cj.rows_per = (j->nr + cj.nrc - 1) / cj.nrc;
  cj.nrc = (j->nr + cj.rows_per - 1) / cj.rows_per;
  cj.part = malloc((size_t)(cj.nrc * j->nk) * sizeof *cj.part);
  int is_sum = j->op == BP_OP_sum || j->op == BP_OP_mean;
  if (!is_sum) cj.nan = malloc((size_t)(cj.nrc * j->nk));
  if (!cj.part || (!is_sum && !cj.nan)) {
    free(cj.part);
    free(cj.nan);
    return 0;
  }
  int64_t tasks = cj.ncb * cj.nrc;
  if (tasks * COL_BLOCK * cj.rows_per < RED_GRAIN) col_tasks(&cj, 0, tasks);
  else cpu_parallel_for(tasks, 1, col_tasks, &cj);
  int64_t grain = RED_GRAIN / cj.nrc;
  cpu_parallel_for(j->nk, grain < 1 ? 1 : grain, col_combine, &cj);
  free(cj.part);
  free(cj.nan);
  return 1;
}

bp_status_t cpu_exec_reduce(const bp_op_call_t* call) {
  uint32_t op = call->op_id;
  const bp_tensor_desc_t* in = call->inputs[0];
  const bp_tensor_desc_t* out = call->outputs[0];
  const bp_reduce_attrs_t* a = call->attrs;
  if (bp_dtype_is_fp8(in->dtype) || bp_dtype_is_fp8(out->dtype) || in->dtype == BP_DTYPE_C64)
    return cpu_error(BP_UNIMPLEMENTED, "cpu: %s: %s input is not supported", cpu_op_name(op),
                     bp_dtype_name(in->dtype));
  uint32_t mask = 0;
  if ((a->flags & BP_REDUCE_ALL_DIMS) || a->num_dims == 0) {
    mask = (1u << in->rank) - 1;
  } else {
    if (a->num_dims < 0 || a->num_dims > BP_MAX_RANK)
      return cpu_error(BP_INVALID_ARGUMENT, "cpu: %s: num_dims %d", cpu_op_name(op), a->num_dims);
    for (int k = 0; k < a->num_dims; k++) {
      int64_t d = a->dims[k] < 0 ? a->dims[k] + (int64_t)in->rank : a->dims[k];
      if (in->rank == 0 && (d == 0 || d == -1)) continue; /* 0-d: dim 0 / -1 is the scalar */
      if (d < 0 || d >= (int64_t)in->rank || (mask & (1u << d)))
        return cpu_error(BP_INVALID_ARGUMENT, "cpu: %s: dim %d invalid or repeated for rank %u",
                         cpu_op_name(op), a->dims[k], in->rank);
      mask |= 1u << d;
    }
  }
  int keep = (a->flags & BP_REDUCE_KEEPDIM) != 0;
  uint32_t nred = (uint32_t)__builtin_popcount(mask);
  uint32_t want_rank = keep ? in->rank : in->rank - nred;
  if (out->rank != want_rank)
    return cpu_error(BP_INVALID_ARGUMENT, "cpu: %s: output rank %u, expected %u", cpu_op_name(op),
                     out->rank, want_rank);
  red_job_t* j = calloc(1, sizeof *j);
  if (!j) return cpu_error(BP_RESOURCE_EXHAUSTED, "cpu: %s: out of memory", cpu_op_name(op));
  j->op = op;
  int in_float = bp_dtype_is_float(in->dtype);
  if (op == BP_OP_sum || op == BP_OP_prod) j->dom = bp_dtype_is_float(out->dtype) ? DOM_F64 : DOM_I64;
  else if (op == BP_OP_mean) j->dom = DOM_F64;
  else j->dom = in_float ? DOM_F64 : DOM_I64;
  j->in = cpu_desc_ptr(in);
  j->in_dtype = in->dtype;
  j->in_es = bp_dtype_size(in->dtype);
  j->out = cpu_desc_ptr(out);
  j->out_dtype = out->dtype;
  j->out_es = bp_dtype_size(out->dtype);
  j->K.nops = 2;
  j->R.nops = 1;
  j->nk = j->nr = 1;
  bp_status_t st = BP_OK;
  uint32_t od = 0;
  for (uint32_t d = 0; d < in->rank; d++) {
    if (mask & (1u << d)) {
      j->R.sizes[j->R.ndim] = in->sizes[d];
      j->R.strides[0][j->R.ndim] = in->strides[d];
      j->R.ndim++;
      j->nr *= in->sizes[d];
      if (keep) od++;
    } else {
      if (out->sizes[od] != in->sizes[d]) {
        st = cpu_error(BP_INVALID_ARGUMENT, "cpu: %s: output size %lld in dim %u, input %lld",
                       cpu_op_name(op), (long long)out->sizes[od], od, (long long)in->sizes[d]);
        goto cleanup;
      }
      j->K.sizes[j->K.ndim] = in->sizes[d];
      j->K.strides[0][j->K.ndim] = out->strides[od];
      j->K.strides[1][j->K.ndim] = in->strides[d];
      j->K.ndim++;
      j->nk *= in->sizes[d];
      od++;
    }
  }
  if (j->nk == 0) goto cleanup;
  if (j->nr == 0 && op != BP_OP_sum && op != BP_OP_mean && op != BP_OP_prod && op != BP_OP_any) {
    st = cpu_error(BP_INVALID_ARGUMENT, "cpu: %s: cannot reduce an empty dimension", cpu_op_name(op));
    goto cleanup;
  }
  bp_nd_collapse(&j->K);
  bp_nd_collapse(&j->R);
  if (j->nr == 0) j->R.sizes[0] = 0; /* keep the reduced space empty */
  j->fast_f32 = in->dtype == BP_DTYPE_F32 && out->dtype == BP_DTYPE_F32 && j->dom == DOM_F64 &&
                (op == BP_OP_sum || op == BP_OP_mean || op == BP_OP_amax || op == BP_OP_amin);
  if (j->fast_f32 && j->nr > 0 && j->K.ndim == 1 && j->R.ndim == 1 && j->K.strides[1][0] == 1 &&
      j->nk > 1 && reduce_columns_f32(j))
    goto cleanup;
  uint32_t threads = cpu_pool_threads();
  if (j->nk >= 2 * (int64_t)threads || j->nr < 2 * RED_GRAIN) {
    int64_t grain = j->nr > 0 ? RED_GRAIN / j->nr : RED_GRAIN;
    if (grain < 1) grain = 1;
    if (j->nk * (j->nr > 0 ? j->nr : 1) < RED_GRAIN) red_outputs(j, 0, j->nk);
    else cpu_parallel_for(j->nk, grain, red_outputs, j);
  } else {
    int64_t nchunks = (j->nr + RED_GRAIN - 1) / RED_GRAIN;
    if (nchunks > RED_MAX_SPLIT) nchunks = RED_MAX_SPLIT;
    j->chunk = (j->nr + nchunks - 1) / nchunks;
    nchunks = (j->nr + j->chunk - 1) / j->chunk;
    bp_nd_cursor_t c;
    bp_nd_cursor_init(&c, &j->K, 0);
    for (int64_t k = 0; k < j->nk; k++) {
      j->koff = c.off[1];
      cpu_parallel_for(nchunks, 1, red_split, j);
      acc_t acc = j->part[0];
      for (int64_t ci = 1; ci < nchunks; ci++) acc_combine(op, j->dom, &acc, &j->part[ci]);
      store_result(j, c.off[0], &acc);
      bp_nd_cursor_advance(&c, &j->K, 1);
    }
  }
cleanup:
  free(j);
  return st;
}

/* ---- softmax ----------------------------------------------------------- */
typedef struct sm_job {
  bp_nd_layout_t L; /* rows: operand 0 = output, 1 = input */
  int64_t len, in_stride, out_stride;
  const unsigned char* in;
  unsigned char* out;
  uint32_t in_dtype, out_dtype, in_es, out_es;
  int kt, log;
  _Atomic int failed;
} sm_job_t;

#define CPU__SOFTMAX_ROW(T, SFX)                                                \
  static void softmax_row_##SFX(T* restrict x, int64_t n, int log_out) {        \
    T mx = -INFINITY;                                                           \
    int nan = 0;                                                                \
    for (int64_t i = 0; i < n; i++) {                                           \
      if (x[i] != x[i]) nan = 1;                                                \
      mx = x[i] > mx ? x[i] : mx;                                               \
    }                                                                           \
    if (nan) mx = (T)NAN;                                                       \
    double sum = 0;                                                             \
    if (log_out) {                                                              \
      for (int64_t i = 0; i < n; i++) sum += (double)SFX##_exp(x[i] - mx);      \
      T ls = (T)log(sum);                                                       \
      for (int64_t i = 0; i < n; i++) x[i] = x[i] - mx - ls;                    \
    } else {                                                                    \
      for (int64_t i = 0; i < n; i++) {                                         \
        x[i] = SFX##_exp(x[i] - mx);                                            \
        sum += (double)x[i];                                                    \
      }                                                                         \
      T inv = (T)(1.0 / sum);                                                   \
      for (int64_t i = 0; i < n; i++) x[i] *= inv;                              \
    }                                                                           \
  }
#define f64_exp exp
CPU__SOFTMAX_ROW(double, f64)

/* softmax of f32 rows in 16-lane vectors (GCC vector extensions): one
 * 512-bit register with AVX-512, two 256-bit ones with AVX2, four SSE
 * registers on baseline x86-64; the same source is compiled for each and
 * chosen at run time. */
typedef float v16f __attribute__((vector_size(64)));
typedef int32_t v16i __attribute__((vector_size(64)));
typedef uint32_t v16u __attribute__((vector_size(64)));
#define SM_INLINE static inline __attribute__((always_inline))

SM_INLINE v16f v16_load(const float* p) {
  v16f v;
  memcpy(&v, p, sizeof v);
  return v;
}
SM_INLINE void v16_store(float* p, v16f v) { memcpy(p, &v, sizeof v); }
SM_INLINE v16f v16_blend(v16i m, v16f a, v16f b) { return (v16f)((m & (v16i)a) | (~m & (v16i)b)); }

/* expf for x <= 0 (softmax's x - max): Cephes' degree-7 polynomial on
 * r = x - n ln2 (|r| <= ln2/2), scaled by 2^n as two normal powers so that
 * subnormal results round once. exp(-inf) = 0, NaN stays NaN; within 2 ulp
 * elsewhere. n is read from the bits of a rounded float, so no lane ever
 * converts NaN to an integer. */
SM_INLINE v16f sm_exp16(v16f x) {
  const v16f lo = (v16f){0} - 104.0f;
  x = v16_blend(x < lo, lo, x);
  const float shifter = 12582912.0f; /* 1.5 * 2^23: adding it rounds to an integer */
  v16f t = x * 1.44269504088896341f + shifter;
  v16f n = t - shifter;
  v16f r = x - n * 0.693359375f;
  r = r - n * -2.12194440e-4f;
  v16f p = r * 1.9875691500e-4f + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  p = p * r * r + r + 1.0f;
  v16i k = (v16i)t - (v16i)((v16f){0} + shifter); /* n as an integer, -150..129 */
  v16i k1 = k >> 1, k2 = k - k1;
  v16u b1 = (v16u)(k1 + 127) << 23, b2 = (v16u)(k2 + 127) << 23;
  return p * (v16f)b1 * (v16f)b2;
}

/* One row: the max (reading the row from memory; the next row is
 * prefetched meanwhile), exp and sum (f32 lanes per chunk, chunks in
 * double) over the cache-resident row, then the scaling pass. y may alias
 * x; `next` (NULL: none) is the row after this one. */
#define SM_DEFINE_ROW(NAME, ATTR)                                                  \
  ATTR static void NAME(const float* x, float* y, int64_t n, int log_out,          \
                        const float* next) {                                       \
    v16f m0 = (v16f){0} - INFINITY, m1 = m0;                                       \
    v16i nanm = (v16i){0};                                                         \
    int64_t i = 0;                                                                 \
    for (; i + 32 <= n; i += 32) {                                                 \
      v16f v0 = v16_load(x + i), v1 = v16_load(x + i + 16);                        \
      nanm |= (v0 != v0) | (v1 != v1);                                             \
      m0 = v16_blend(v0 > m0, v0, m0);                                             \
      m1 = v16_blend(v1 > m1, v1, m1);                                             \
    }                                                                              \
    m0 = v16_blend(m1 > m0, m1, m0);                                               \
    float mx = -INFINITY;                                                          \
    int nan = 0;                                                                   \
    for (int k = 0; k < 16; k++) {                                                 \
      nan |= nanm[k] != 0;                                                         \
      mx = m0[k] > mx ? m0[k] : mx;                                                \
    }                                                                              \
    for (; i < n; i++) {                                                           \
      nan |= x[i] != x[i];                                                         \
      mx = x[i] > mx ? x[i] : mx;                                                  \
    }                                                                              \
    if (nan) {                                                                     \
      for (i = 0; i < n; i++) y[i] = NAN;                                          \
      return;                                                                      \
    }                                                                              \
    double sum = 0;                                                                \
    for (int64_t b = 0; b < n; b += RED_CHUNK) {                                   \
      int64_t e = b + RED_CHUNK < n ? b + RED_CHUNK : n;                           \
      v16f l0 = (v16f){0}, l1 = l0;                                                \
      for (i = b; i + 32 <= e; i += 32) {                                          \
        if (next) {                                                                \
          __builtin_prefetch(next + i);                                            \
          __builtin_prefetch(next + i + 16);                                       \
        }                                                                          \
        v16f v0 = sm_exp16(v16_load(x + i) - mx), v1 = sm_exp16(v16_load(x + i + 16) - mx); \
        if (!log_out) {                                                            \
          v16_store(y + i, v0);                                                    \
          v16_store(y + i + 16, v1);                                               \
        }                                                                          \
        l0 += v0;                                                                  \
        l1 += v1;                                                                  \
      }                                                                            \
      l0 += l1;                                                                    \
      float t = 0;                                                                 \
      for (int k = 0; k < 16; k++) t += l0[k];                                     \
      for (; i < e; i++) {                                                         \
        float v = sm_exp16((v16f){0} + (x[i] - mx))[0];                            \
        if (!log_out) y[i] = v;                                                    \
        t += v;                                                                    \
      }                                                                            \
      sum += (double)t;                                                            \
    }                                                                              \
    if (log_out) {                                                                 \
      float ls = (float)log(sum);                                                  \
      for (i = 0; i + 16 <= n; i += 16) v16_store(y + i, v16_load(x + i) - mx - ls); \
      for (; i < n; i++) y[i] = x[i] - mx - ls;                                    \
    } else {                                                                       \
      float inv = (float)(1.0 / sum);                                              \
      for (i = 0; i + 16 <= n; i += 16) v16_store(y + i, v16_load(y + i) * inv);   \
      for (; i < n; i++) y[i] *= inv;                                              \
    }                                                                              \
  }

SM_DEFINE_ROW(softmax_f32_base, )
#if defined(__x86_64__) && defined(__GNUC__)
SM_DEFINE_ROW(softmax_f32_avx2, __attribute__((target("avx2,fma"))))
SM_DEFINE_ROW(softmax_f32_avx512, __attribute__((target("avx512f,avx2,fma"))))
typedef void (*sm_row_fn)(const float*, float*, int64_t, int, const float*);
static void softmax_f32(const float* x, float* y, int64_t n, int log_out, const float* next) {
  static _Atomic(sm_row_fn) best; /* every thread computes the same answer */
  sm_row_fn fn = atomic_load_explicit(&best, memory_order_relaxed);
  if (!fn) {
    fn = __builtin_cpu_supports("avx512f")                                     ? softmax_f32_avx512
         : __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") ? softmax_f32_avx2
                                                                            : softmax_f32_base;
    atomic_store_explicit(&best, fn, memory_order_relaxed);
  }
  fn(x, y, n, log_out, next);
}
#else
#define softmax_f32 softmax_f32_base
#endif

void cpu_log_softmax_row_f32(const float* x, float* y, int64_t n) { softmax_f32(x, y, n, 1, NULL); }

static void sm_rows(void* ctx, int64_t b, int64_t e) {
  sm_job_t* j = ctx;
  void* buf = malloc((size_t)j->len * 8);
  if (!buf) {
    atomic_store(&j->failed, 1);
    return;
  }
  bp_nd_cursor_t c;
  bp_nd_cursor_init(&c, &j->L, b);
  int direct = j->in_dtype == BP_DTYPE_F32 && j->out_dtype == BP_DTYPE_F32 && j->in_stride == 1 &&
               j->out_stride == 1;
  for (int64_t r = b; r < e; r++) {
    if (direct) { /* f32 rows in place: no staging copies */
      const float* row = (const float*)(j->in + c.off[1] * 4);
      float* dst = (float*)(j->out + c.off[0] * 4);
      bp_nd_cursor_advance(&c, &j->L, 1);
      const float* next = r + 1 < e ? (const float*)(j->in + c.off[1] * 4) : NULL;
      softmax_f32(row, dst, j->len, j->log, next);
      continue;
    }
    cpu_load[j->kt](buf, j->in + c.off[1] * (int64_t)j->in_es, j->in_stride, j->len, j->in_dtype);
    if (j->kt == CPU_KT_F32) softmax_f32(buf, buf, j->len, j->log, NULL);
    else softmax_row_f64(buf, j->len, j->log);
    cpu_store[j->kt](j->out + c.off[0] * (int64_t)j->out_es, j->out_stride, buf, j->len, j->out_dtype);
    bp_nd_cursor_advance(&c, &j->L, 1);
  }
  free(buf);
}

bp_status_t cpu_exec_softmax(const bp_op_call_t* call) {
  const bp_tensor_desc_t* in = call->inputs[0];
  const bp_tensor_desc_t* out = call->outputs[0];
  const bp_softmax_attrs_t* a = call->attrs;
  const char* name = cpu_op_name(call->op_id);
  if (!bp_dtype_is_float(in->dtype) || !bp_dtype_is_float(out->dtype))
    return cpu_error(BP_UNIMPLEMENTED, "cpu: %s: %s -> %s: floating dtypes only", name,
                     bp_dtype_name(in->dtype), bp_dtype_name(out->dtype));
  if (in->rank != out->rank)
    return cpu_error(BP_INVALID_ARGUMENT, "cpu: %s: input rank %u != output rank %u", name, in->rank, out->rank);
  uint32_t rank = in->rank ? in->rank : 1;
  int64_t dim = a->dim < 0 ? a->dim + (int64_t)rank : a->dim;
  if (dim < 0 || dim >= (int64_t)rank)
    return cpu_error(BP_INVALID_ARGUMENT, "cpu: %s: dim %d out of range for rank %u", name, a->dim, in->rank);
  sm_job_t j;
  memset(&j, 0, sizeof j);
  j.in = cpu_desc_ptr(in);
  j.out = cpu_desc_ptr(out);
  j.in_dtype = in->dtype;
  j.out_dtype = out->dtype;
  j.in_es = bp_dtype_size(in->dtype);
  j.out_es = bp_dtype_size(out->dtype);
  j.kt = in->dtype == BP_DTYPE_F64 || out->dtype == BP_DTYPE_F64 ? CPU_KT_F64 : CPU_KT_F32;
  j.log = call->op_id == BP_OP_log_softmax;
  j.L.nops = 2;
  int64_t rows = 1;
  if (in->rank == 0) {
    j.len = 1;
  } else {
    for (uint32_t d = 0; d < in->rank; d++) {
      if (in->sizes[d] != out->sizes[d])
        return cpu_error(BP_INVALID_ARGUMENT, "cpu: %s: output size %lld != input %lld in dim %u", name,
                         (long long)out->sizes[d], (long long)in->sizes[d], d);
      if ((int64_t)d == dim) {
        j.len = in->sizes[d];
        j.in_stride = in->strides[d];
        j.out_stride = out->strides[d];
        continue;
      }
      j.L.sizes[j.L.ndim] = in->sizes[d];
      j.L.strides[0][j.L.ndim] = out->strides[d];
      j.L.strides[1][j.L.ndim] = in->strides[d];
      j.L.ndim++;
      rows *= in->sizes[d];
    }
  }
  if (rows == 0 || j.len == 0) return BP_OK;
  bp_nd_collapse(&j.L);
  int64_t grain = RED_GRAIN / j.len;
  if (grain < 1) grain = 1;
  cpu_parallel_for(rows, grain, sm_rows, &j);
  if (atomic_load(&j.failed))
    return cpu_error(BP_RESOURCE_EXHAUSTED, "cpu: %s: cannot allocate a row buffer of %lld elements", name,
                     (long long)j.len);
  return BP_OK;
}
