/* backplane CPU plugin: the norm kernel family -- batch_norm, group_norm
 * (+ backward), layer_norm (+ backward), rms_norm, the fused residual adds
 * add_layer_norm / add_rms_norm, and cross_entropy.
 *
 * Operands may have any strides and offsets: a row (the elements that share
 * one statistic, or one row of a statistic's elements) is gathered into a
 * dense staging buffer in the compute type, computed, and scattered back.
 * layer_norm and rms_norm compute in f32 (f64 for f64 inputs) with
 * vectorisable multi-accumulator loops, parallel over rows. Their add_
 * forms read a row of input and residual once, write residual_out = input +
 * residual (rounded to the dtype) and normalize that row from the staging
 * buffer: one pass over memory where add then norm take two. Dense f32
 * rows take AVX-512 loops where the CPU has them (bitwise the portable
 * results), with non-temporal stores from 2M elements. The other ops
 * compute in f64, parallel over statistics. Equivalent to PyTorch's CPU
 * kernels (batch_norm_cpu, GroupNormKernelImpl, LayerNormKernelImpl,
 * cross_entropy), computed without intermediate roundings to the input
 * dtype.
 *
 * Threading: runs on a stream worker; cpu_parallel_for spreads rows over the
 * pool. Inputs are never written (batch_norm's running statistics
 * included).
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cpu_kernels.h"

/* Rows per parallel task: about this many elements. */
#define NORM_GRAIN 16384

/* ---- strided gather / scatter ------------------------------------------------ */
/* A sub-tensor shape shared by up to BP_ND_MAX_OPS operands: the dims of
 * `l` (collapsed), operand k's strides in l->strides[k]. */
static void gather(int kt, void* dst, const bp_tensor_desc_t* d, int64_t base,
                   const bp_nd_layout_t* l, int k, int64_t n) {
  const unsigned char* p = cpu_desc_ptr(d);
  size_t es = bp_dtype_size(d->dtype), ks = cpu_kt_size[kt];
  bp_nd_cursor_t c;
  bp_nd_cursor_init(&c, l, 0);
  for (int64_t i = 0; i < n;) {
    int64_t run = bp_nd_row_left(&c, l);
    if (run > n - i) run = n - i;
    cpu_load[kt]((unsigned char*)dst + (size_t)i * ks, p + (base + c.off[k]) * (int64_t)es,
                 l->strides[k][l->ndim - 1], run, d->dtype);
    bp_nd_cursor_advance(&c, l, run);
    i += run;
  }
}

static void scatter(int kt, const bp_tensor_desc_t* d, int64_t base, const bp_nd_layout_t* l, int k,
                    const void* src, int64_t n) {
  unsigned char* p = cpu_desc_ptr(d);
  size_t es = bp_dtype_size(d->dtype), ks = cpu_kt_size[kt];
  bp_nd_cursor_t c;
  bp_nd_cursor_init(&c, l, 0);
  for (int64_t i = 0; i < n;) {
    int64_t run = bp_nd_row_left(&c, l);
    if (run > n - i) run = n - i;
    cpu_store[kt](p + (base + c.off[k]) * (int64_t)es, l->strides[k][l->ndim - 1],
                  (const unsigned char*)src + (size_t)i * ks, run, d->dtype);
    bp_nd_cursor_advance(&c, l, run);
    i += run;
  }
}

void cpu_sub_layout(bp_nd_layout_t* l, const bp_tensor_desc_t* const* ds, int nops,
                       const int64_t* sizes, uint32_t from, uint32_t to) {
  memset(l, 0, sizeof *l);
  l->nops = nops;
  for (uint32_t d = from; d < to; d++) {
    l->sizes[l->ndim] = sizes[d];
    for (int k = 0; k < nops; k++) l->strides[k][l->ndim] = ds[k] ? ds[k]->strides[d] : 0;
    l->ndim++;
  }
  bp_nd_collapse(l);
}

static int64_t numel_range(const int64_t* s, uint32_t from, uint32_t to) {
  int64_t n = 1;
  for (uint32_t d = from; d < to; d++) n *= s[d];
  return n;
}

/* A whole tensor into a new dense buffer of kt (NULL when out of memory);
 * an absent tensor gives `n` copies of `fill`. */
static void* load_all(int kt, const bp_tensor_desc_t* d, int64_t n, double fill) {
  size_t ks = cpu_kt_size[kt];
  void* buf = malloc((size_t)(n > 0 ? n : 1) * ks);
  if (!buf) return NULL;
  if (!d || d->dtype == BP_DTYPE_INVALID) {
    for (int64_t i = 0; i < n; i++) {
      if (kt == CPU_KT_F64) ((double*)buf)[i] = fill;
      else ((float*)buf)[i] = (float)fill;
    }
    return buf;
  }
  if (n > 0) {
    bp_nd_layout_t l;
    const bp_tensor_desc_t* ds[1] = {d};
    cpu_sub_layout(&l, ds, 1, d->sizes, 0, d->rank);
    gather(kt, buf, d, 0, &l, 0, n);
  }
  return buf;
}

static const bp_tensor_desc_t* opt_in(const bp_op_call_t* call, uint32_t i) {
  if (i >= call->num_inputs || call->inputs[i]->dtype == BP_DTYPE_INVALID) return NULL;
  return call->inputs[i];
}

/* ---- row kernels (layer_norm, rms_norm) ---------------------------------------- */
/* 16 independent partial sums: the compiler vectorises them without
 * reassociating (no -ffast-math). */
#define NORM_LANES 16
#define CPU__NORM_ROWS(T, SFX)                                                        \
  static T sum_##SFX(const T* restrict x, int64_t n) {                                \
    T acc[NORM_LANES] = {0};                                                          \
    int64_t i = 0;                                                                    \
    for (; i + NORM_LANES <= n; i += NORM_LANES)                                      \
      for (int k = 0; k < NORM_LANES; k++) acc[k] += x[i + k];                        \
    for (; i < n; i++) acc[0] += x[i];                                                \
    T s = 0;                                                                          \
    for (int k = 0; k < NORM_LANES; k++) s += acc[k];                                 \
    return s;                                                                         \
  }                                                                                   \
  /* sum (x - m)^2 */                                                                 \
  static T sqdev_##SFX(const T* restrict x, int64_t n, T m) {                         \
    T acc[NORM_LANES] = {0};                                                          \
    int64_t i = 0;                                                                    \
    for (; i + NORM_LANES <= n; i += NORM_LANES)                                      \
      for (int k = 0; k < NORM_LANES; k++) {                                          \
        T d = x[i + k] - m;                                                           \
        acc[k] += d * d;                                                              \
      }                                                                               \
    for (; i < n; i++) acc[0] += (x[i] - m) * (x[i] - m);                             \
    T s = 0;                                                                          \
    for (int k = 0; k < NORM_LANES; k++) s += acc[k];                                 \
    return s;                                                                         \
  }                                                                                   \
  /* layer_norm of one row x into y (y may be x): stats into st[0] (mean),         \
   * st[1] (rstd). */                                                                 \
  static void layer_row_##SFX(const T* x, T* y, int64_t n, const T* restrict w,       \
                              const T* restrict b, double eps, T* st) {               \
    T m = sum_##SFX(x, n) / (T)n;                                                     \
    T r = (T)(1.0 / sqrt((double)(sqdev_##SFX(x, n, m) / (T)n) + eps));               \
    for (int64_t i = 0; i < n; i++) y[i] = (x[i] - m) * r * w[i] + b[i];              \
    st[0] = m;                                                                        \
    st[1] = r;                                                                        \
  }                                                                                   \
  static void rms_row_##SFX(const T* x, T* y, int64_t n, const T* restrict w,         \
                            double eps) {                                             \
    T r = (T)(1.0 / sqrt((double)(sqdev_##SFX(x, n, 0) / (T)n) + eps));               \
    for (int64_t i = 0; i < n; i++) y[i] = x[i] * r * w[i];                           \
  }                                                                                   \
  /* z = x + r (z may be x or r) */                                                   \
  static void add_row_##SFX(const T* x, const T* r, T* z, int64_t n) {                \
    for (int64_t i = 0; i < n; i++) z[i] = x[i] + r[i];                               \
  }
CPU__NORM_ROWS(float, f32)
CPU__NORM_ROWS(double, f64)

/* Large f32 outputs: the final pass y = (x - m) * r * w (+ b) with
 * non-temporal stores, so that writing the output does not first read it
 * into the cache (the same arithmetic as layer_row_f32 / rms_row_f32).
 * Meanwhile it prefetches the next row's inputs, pf0 and pf1 (n elements
 * each; x itself when there is nothing to fetch), so that memory keeps
 * streaming while this row is finished from the cache. */
#if defined(__x86_64__) && defined(__SSE2__)
#include <immintrin.h>
#define NORM_HAVE_STREAM 1
static void stream_row_f32(const float* x, float* y, int64_t n, float m, float r, const float* w,
                           const float* b, const float* pf0, const float* pf1) {
  int64_t i = 0;
  for (; i < n && ((uintptr_t)(y + i) & 15u) != 0; i++) {
    y[i] = b ? (x[i] - m) * r * w[i] + b[i] : x[i] * r * w[i];
  }
  __m128 vm = _mm_set1_ps(m), vr = _mm_set1_ps(r);
  if (b) {
    for (; i + 4 <= n; i += 4) {
      _mm_prefetch((const char*)(pf0 + i), _MM_HINT_T0);
      _mm_prefetch((const char*)(pf1 + i), _MM_HINT_T0);
      __m128 v = _mm_mul_ps(_mm_mul_ps(_mm_sub_ps(_mm_loadu_ps(x + i), vm), vr), _mm_loadu_ps(w + i));
      _mm_stream_ps(y + i, _mm_add_ps(v, _mm_loadu_ps(b + i)));
    }
  } else {
    for (; i + 4 <= n; i += 4) {
      _mm_prefetch((const char*)(pf0 + i), _MM_HINT_T0);
      _mm_prefetch((const char*)(pf1 + i), _MM_HINT_T0);
      _mm_stream_ps(y + i, _mm_mul_ps(_mm_mul_ps(_mm_loadu_ps(x + i), vr), _mm_loadu_ps(w + i)));
    }
  }
  for (; i < n; i++) y[i] = b ? (x[i] - m) * r * w[i] + b[i] : x[i] * r * w[i];
}
/* z = x + r into the staging row z and, with non-temporal stores, into y
 * (residual_out of a large add_ op): one loop, so that the row's loads and
 * its streamed stores overlap. */
static void stream_add_f32(float* y, float* z, const float* x, const float* r, int64_t n) {
  int64_t i = 0;
  for (; i < n && ((uintptr_t)(y + i) & 15u) != 0; i++) y[i] = z[i] = x[i] + r[i];
  for (; i + 4 <= n; i += 4) {
    __m128 v = _mm_add_ps(_mm_loadu_ps(x + i), _mm_loadu_ps(r + i));
    _mm_storeu_ps(z + i, v);
    _mm_stream_ps(y + i, v);
  }
  for (; i < n; i++) y[i] = z[i] = x[i] + r[i];
}

/* The same two loops in AVX-512 (chosen at run time: a quarter of the
 * instructions, and every non-temporal store a whole cache line), same
 * arithmetic in the same order, so results are bitwise those above. Two
 * variants each: SFX nt stores y non-temporally (large outputs), st with
 * plain stores (outputs that stay in the cache). */
/* no FMA contraction: the portable loops above have none */
#define NORM_AVX512 __attribute__((target("avx512f"), optimize("fp-contract=off")))
#define NORM_AVX512_ROWS(SFX, STORE)                                                                     \
  NORM_AVX512 static void row_f32_avx512_##SFX(const float* x, float* y, int64_t n, float m, float r,    \
                                               const float* w, const float* b, const float* pf0,        \
                                               const float* pf1) {                                      \
    int64_t i = 0;                                                                                       \
    for (; i < n && ((uintptr_t)(y + i) & 63u) != 0; i++) {                                             \
      y[i] = b ? (x[i] - m) * r * w[i] + b[i] : x[i] * r * w[i];                                         \
    }                                                                                                    \
    __m512 vm = _mm512_set1_ps(m), vr = _mm512_set1_ps(r);                                               \
    for (; i + 16 <= n; i += 16) {                                                                       \
      _mm_prefetch((const char*)(pf0 + i), _MM_HINT_T0);                                                 \
      _mm_prefetch((const char*)(pf1 + i), _MM_HINT_T0);                                                 \
      __m512 v;                                                                                          \
      if (b) {                                                                                           \
        v = _mm512_mul_ps(_mm512_mul_ps(_mm512_sub_ps(_mm512_loadu_ps(x + i), vm), vr),                  \
                          _mm512_loadu_ps(w + i));                                                       \
        v = _mm512_add_ps(v, _mm512_loadu_ps(b + i));                                                    \
      } else {                                                                                           \
        v = _mm512_mul_ps(_mm512_mul_ps(_mm512_loadu_ps(x + i), vr), _mm512_loadu_ps(w + i));            \
      }                                                                                                  \
      STORE(y + i, v);                                                                                   \
    }                                                                                                    \
    for (; i < n; i++) y[i] = b ? (x[i] - m) * r * w[i] + b[i] : x[i] * r * w[i];                        \
  }                                                                                                      \
  /* y = z = x + r, returning sum z^2 in the order of sqdev_f32(z, n, 0)                                \
   * (lane k of 16 sums the elements i = k mod 16 of the whole blocks, the                              \
   * tail goes to lane 0, then lanes 0..15 in turn): the add and rms_norm's                             \
   * statistic in one pass over the row. nt: y 64-byte aligned. */                                      \
  NORM_AVX512 static float add_sq_f32_avx512_##SFX(float* y, float* z, const float* x, const float* r,   \
                                                   int64_t n) {                                         \
    __m512 acc = _mm512_setzero_ps();                                                                    \
    int64_t i = 0;                                                                                       \
    for (; i + 16 <= n; i += 16) {                                                                       \
      __m512 v = _mm512_add_ps(_mm512_loadu_ps(x + i), _mm512_loadu_ps(r + i));                          \
      _mm512_storeu_ps(z + i, v);                                                                        \
      STORE(y + i, v);                                                                                   \
      acc = _mm512_add_ps(acc, _mm512_mul_ps(v, v));                                                     \
    }                                                                                                    \
    float lanes[16];                                                                                     \
    _mm512_storeu_ps(lanes, acc);                                                                        \
    for (; i < n; i++) {                                                                                 \
      y[i] = z[i] = x[i] + r[i];                                                                         \
      lanes[0] += z[i] * z[i];                                                                           \
    }                                                                                                    \
    float sum = 0.0f;                                                                                    \
    for (int k = 0; k < 16; k++) sum += lanes[k];                                                        \
    return sum;                                                                                          \
  }
NORM_AVX512_ROWS(nt, _mm512_stream_ps)
NORM_AVX512_ROWS(st, _mm512_storeu_ps)
static int norm_avx512(void) {
  __builtin_cpu_init();
  return cpu_isa_cap() >= 2 && __builtin_cpu_supports("avx512f");
}
#else
#define NORM_HAVE_STREAM 0
#endif

typedef struct row_job {
  const bp_op_call_t* call;
  int kt, rms;
  int add;            /* add_ forms: inputs 0 input, 1 residual; outputs 0 out, 1 residual_out */
  int stats;          /* layer_norm: saved mean and rstd */
  int direct;         /* input and output rows (residual ones too) dense in the compute type */
  int stream;         /* direct f32 rows of a large output: non-temporal stores */
  int avx512;         /* direct f32 rows: the AVX-512 loops (with stream: their nt forms) */
  int64_t n;          /* elements per row */
  bp_nd_layout_t R;   /* rows: 0 out, 1 in, 2 mean or residual, 3 rstd or residual_out */
  bp_nd_layout_t I;   /* inside a row: 0 out, 1 in (add_: 2 residual, 3 residual_out) */
  const void *w, *b;  /* dense kt parameters */
  double eps;
  _Atomic int failed;
} row_job_t;

/* add_ forms: buf = input row + residual row (buf2 stages a strided or
 * converted residual), written to residual_out; then buf holds the values
 * residual_out stores (rounded to its dtype), which the norm reads. The
 * AVX-512 streaming path of add_rms_norm also sums their squares into *ss
 * (left NAN otherwise). */
static void add_residual(const row_job_t* j, const bp_nd_cursor_t* c, void* buf, void* buf2, float* ss) {
  const bp_op_call_t* call = j->call;
  const bp_tensor_desc_t *in = call->inputs[0], *res = call->inputs[1], *ro = call->outputs[1];
  size_t ks = cpu_kt_size[j->kt];
  const void *x = buf, *r = buf2;
  if (j->direct) {
    x = cpu_desc_ptr(in) + c->off[1] * (int64_t)ks;
    r = cpu_desc_ptr(res) + c->off[2] * (int64_t)ks;
  } else {
    gather(j->kt, buf, in, c->off[1], &j->I, 1, j->n);
    gather(j->kt, buf2, res, c->off[2], &j->I, 2, j->n);
  }
  unsigned char* zp = cpu_desc_ptr(ro) + c->off[3] * (int64_t)ks;
#if NORM_HAVE_STREAM
  if (j->avx512 && j->rms && (!j->stream || ((uintptr_t)zp & 63u) == 0)) {
    *ss = (j->stream ? add_sq_f32_avx512_nt : add_sq_f32_avx512_st)((float*)zp, buf, x, r, j->n);
    return;
  }
  if (j->stream) {
    stream_add_f32((float*)zp, buf, x, r, j->n);
    return;
  }
#endif
  if (j->kt == CPU_KT_F64) add_row_f64(x, r, buf, j->n);
  else add_row_f32(x, r, buf, j->n);
  if (j->direct) {
    memcpy(zp, buf, (size_t)j->n * ks);
    return;
  }
  scatter(j->kt, ro, c->off[3], &j->I, 3, buf, j->n);
  if (ro->dtype != cpu_kt_dtype[j->kt]) gather(j->kt, buf, ro, c->off[3], &j->I, 3, j->n);
}

static void rows_run(void* ctx, int64_t begin, int64_t end) {
  row_job_t* j = ctx;
  const bp_op_call_t* call = j->call;
  void* buf = malloc((size_t)(j->n > 0 ? j->n : 1) * cpu_kt_size[j->kt] * (j->add ? 2 : 1));
  if (!buf) {
    atomic_store(&j->failed, 1);
    return;
  }
  bp_nd_cursor_t c;
  bp_nd_cursor_init(&c, &j->R, begin);
  const bp_tensor_desc_t *in = call->inputs[0], *out = call->outputs[0];
  size_t ks = cpu_kt_size[j->kt];
  for (int64_t r = begin; r < end; r++) {
    /* rows already dense in the compute type are read and written in place */
    void *x = buf, *y = buf;
    if (j->direct) y = cpu_desc_ptr(out) + c.off[0] * (int64_t)ks;
    float ss = NAN; /* sum of squares from add_residual, when it computed it */
    if (j->add) {
      add_residual(j, &c, buf, (unsigned char*)buf + (size_t)j->n * ks, &ss);
    } else if (j->direct) {
      x = cpu_desc_ptr(in) + c.off[1] * (int64_t)ks;
    } else {
      gather(j->kt, buf, in, c.off[1], &j->I, 1, j->n);
    }
    unsigned char st[16];
#if NORM_HAVE_STREAM
    if (j->stream || j->avx512) {
      float* stf = (float*)st;
      const float* xf = x;
      if (j->rms) {
        stf[0] = 0.0f;
        if (isnan(ss)) ss = sqdev_f32(xf, j->n, 0);
        stf[1] = (float)(1.0 / sqrt((double)(ss / (float)j->n) + j->eps));
      } else {
        stf[0] = sum_f32(xf, j->n) / (float)j->n;
        stf[1] = (float)(1.0 / sqrt((double)(sqdev_f32(xf, j->n, stf[0]) / (float)j->n) + j->eps));
      }
      /* the next row's input (and residual), when this task has one */
      const float *pf0 = xf, *pf1 = xf;
      if (r + 1 < end) {
        bp_nd_cursor_t nc = c;
        bp_nd_cursor_advance(&nc, &j->R, 1);
        pf0 = (const float*)cpu_desc_ptr(in) + nc.off[1];
        pf1 = j->add ? (const float*)cpu_desc_ptr(call->inputs[1]) + nc.off[2] : pf0;
      }
      (!j->avx512 ? stream_row_f32 : j->stream ? row_f32_avx512_nt : row_f32_avx512_st)(
          xf, y, j->n, stf[0], stf[1], j->w, j->rms ? NULL : j->b, pf0, pf1);
    } else
#endif
    if (j->kt == CPU_KT_F64) {
      if (j->rms) rms_row_f64(x, y, j->n, j->w, j->eps);
      else layer_row_f64(x, y, j->n, j->w, j->b, j->eps, (double*)st);
    } else {
      if (j->rms) rms_row_f32(x, y, j->n, j->w, j->eps);
      else layer_row_f32(x, y, j->n, j->w, j->b, j->eps, (float*)st);
    }
    if (!j->direct) scatter(j->kt, out, c.off[0], &j->I, 0, buf, j->n);
    if (j->stats) {
      const bp_tensor_desc_t *m = call->outputs[1], *rs = call->outputs[2];
      cpu_store[j->kt](cpu_desc_ptr(m) + c.off[2] * (int64_t)bp_dtype_size(m->dtype), 1, st, 1, m->dtype);
      cpu_store[j->kt](cpu_desc_ptr(rs) + c.off[3] * (int64_t)bp_dtype_size(rs->dtype), 1, st + ks, 1,
                       rs->dtype);
    }
    bp_nd_cursor_advance(&c, &j->R, 1);
  }
#if NORM_HAVE_STREAM
  if (j->stream) _mm_sfence(); /* the streamed stores are visible before the task ends */
#endif
  free(buf);
}

static bp_status_t exec_rows(const bp_op_call_t* call) {
  const bp_tensor_desc_t* in = call->inputs[0];
  int rms = call->op_id == BP_OP_rms_norm || call->op_id == BP_OP_add_rms_norm;
  int add = call->op_id == BP_OP_add_rms_norm || call->op_id == BP_OP_add_layer_norm;
  uint32_t nr = rms ? ((const bp_rms_norm_attrs_t*)call->attrs)->normalized_rank
                    : ((const bp_layer_norm_attrs_t*)call->attrs)->normalized_rank;
  if (nr == 0 || nr > in->rank) {
    return cpu_error(BP_INVALID_ARGUMENT, "cpu: %s: normalized rank %u for an input of rank %u",
                     cpu_op_name(call->op_id), nr, in->rank);
  }
  uint32_t lead = in->rank - nr;
  row_job_t j;
  memset(&j, 0, sizeof j);
  j.call = call;
  j.rms = rms;
  j.add = add;
  j.stats = call->op_id == BP_OP_layer_norm;
  j.kt = in->dtype == BP_DTYPE_F64 ? CPU_KT_F64 : CPU_KT_F32;
  j.n = numel_range(in->sizes, lead, in->rank);
  int64_t rows = numel_range(in->sizes, 0, lead);
  if (rms) {
    double e = ((const bp_rms_norm_attrs_t*)call->attrs)->eps;
    j.eps = e != 0.0 ? e : cpu_dtype_eps(in->dtype);
  } else {
    j.eps = ((const bp_layer_norm_attrs_t*)call->attrs)->eps;
  }
  if (rows == 0) return BP_OK;
  const bp_tensor_desc_t* rd[4] = {call->outputs[0], in, NULL, NULL};
  if (j.stats) rd[2] = call->outputs[1], rd[3] = call->outputs[2];
  if (add) rd[2] = call->inputs[1], rd[3] = call->outputs[1];
  int nops = add ? 4 : 2;
  cpu_sub_layout(&j.R, rd, 4, in->sizes, 0, lead);
  cpu_sub_layout(&j.I, rd, nops, in->sizes, lead, in->rank);
  j.direct = j.I.ndim == 1;
  for (int k = 0; k < nops; k++) {
    j.direct = j.direct && rd[k]->dtype == cpu_kt_dtype[j.kt] && j.I.strides[k][0] == 1;
  }
  /* past a few MiB the output will not stay in cache anyway */
  j.stream = NORM_HAVE_STREAM && j.direct && j.kt == CPU_KT_F32 && rows * j.n >= ((int64_t)1 << 21);
#if NORM_HAVE_STREAM
  j.avx512 = j.direct && j.kt == CPU_KT_F32 && norm_avx512();
#endif
  uint32_t wi = add ? 2 : 1; /* weight, then bias */
  void* w = load_all(j.kt, opt_in(call, wi), j.n, 1.0);
  void* b = load_all(j.kt, rms ? NULL : opt_in(call, wi + 1), j.n, 0.0);
  bp_status_t st = BP_OK;
  if (!w || !b) {
    st = cpu_error(BP_RESOURCE_EXHAUSTED, "cpu: %s: no memory for parameters", cpu_op_name(call->op_id));
    goto cleanup;
  }
  j.w = w;
  j.b = b;
  /* empty rows (n = 0) still get their statistics: mean 0/0 = NaN */
  int64_t grain = j.n > 0 ? NORM_GRAIN / j.n : NORM_GRAIN;
  cpu_parallel_for(rows, grain < 1 ? 1 : grain, rows_run, &j);
  if (atomic_load(&j.failed)) {
    st = cpu_error(BP_RESOURCE_EXHAUSTED, "cpu: %s: no memory for a row of %lld elements",
                   cpu_op_name(call->op_id), (long long)j.n);
  }
cleanup:
  free(w);
  free(b);
  return st;
}

/* ---- statistics over (sample, channel) pairs: batch_norm, group_norm ------------ */
/* A statistic covers `pairs` (n, c) slices of the spatial dims: batch_norm's
 * statistic c covers (n, c) for every n; group_norm's (n, g) covers (n, c)
 * for the channels of group g. Computed in f64. */
typedef struct grp_job {
  const bp_op_call_t* call;
  int batch;             /* 1: batch_norm, 0: group_norm */
  int backward;          /* group_norm_backward */
  int train;             /* batch_norm: batch statistics */
  int64_t N, C, G, S;    /* samples, channels, groups (group_norm), spatial size */
  int64_t pairs;         /* pairs per statistic */
  bp_nd_layout_t L;      /* spatial dims: 0 out/dx, 1 in (x), 2 dy */
  const double *w, *b, *rm, *rv; /* dense parameters (rm/rv: eval) */
  const double *mean, *rstd;     /* backward: the given statistics */
  double *pair_dw, *pair_db;     /* backward: per (n, c) sums */
  double eps;
  const bp_tensor_desc_t *x, *y, *dy, *smean, *srstd;
  _Atomic int failed;
} grp_job_t;

static void pair_of(const grp_job_t* j, int64_t stat, int64_t k, int64_t* n, int64_t* c) {
  if (j->batch) {
    *n = k;
    *c = stat;
  } else {
    *n = stat / j->G;
    *c = (stat % j->G) * (j->C / j->G) + k;
  }
}

static int64_t pair_base(const bp_tensor_desc_t* d, int64_t n, int64_t c) {
  return n * d->strides[0] + c * d->strides[1];
}

static void grp_run(void* ctx, int64_t begin, int64_t end) {
  grp_job_t* j = ctx;
  int64_t len = j->pairs * j->S;
  double* x = malloc((size_t)(len > 0 ? len : 1) * sizeof(double));
  double* g = j->backward ? malloc((size_t)(len > 0 ? len : 1) * sizeof(double)) : NULL;
  if (!x || (j->backward && !g)) {
    atomic_store(&j->failed, 1);
    goto cleanup;
  }
  for (int64_t s = begin; s < end; s++) {
    int64_t n, c;
    for (int64_t k = 0; k < j->pairs; k++) {
      pair_of(j, s, k, &n, &c);
      gather(CPU_KT_F64, x + k * j->S, j->x, pair_base(j->x, n, c), &j->L, 1, j->S);
      if (g) gather(CPU_KT_F64, g + k * j->S, j->dy, pair_base(j->dy, n, c), &j->L, 2, j->S);
    }
    double mean, rstd;
    if (j->backward) {
      mean = j->mean[s];
      rstd = j->rstd[s];
    } else if (j->batch && !j->train) {
      mean = j->rm[s];
      rstd = 1.0 / sqrt(j->rv[s] + j->eps);
    } else {
      double sum = 0.0, sq = 0.0;
      for (int64_t i = 0; i < len; i++) sum += x[i];
      mean = sum / (double)len;
      for (int64_t i = 0; i < len; i++) sq += (x[i] - mean) * (x[i] - mean);
      rstd = 1.0 / sqrt(sq / (double)len + j->eps);
      int64_t so = j->batch ? s * j->smean->strides[0] : (s / j->G) * j->smean->strides[0] + (s % j->G) * j->smean->strides[1];
      int64_t ro = j->batch ? s * j->srstd->strides[0] : (s / j->G) * j->srstd->strides[0] + (s % j->G) * j->srstd->strides[1];
      cpu_store[CPU_KT_F64](cpu_desc_ptr(j->smean) + so * (int64_t)bp_dtype_size(j->smean->dtype), 1, &mean, 1, j->smean->dtype);
      cpu_store[CPU_KT_F64](cpu_desc_ptr(j->srstd) + ro * (int64_t)bp_dtype_size(j->srstd->dtype), 1, &rstd, 1, j->srstd->dtype);
    }
    if (j->backward) {
      /* dx = rstd * (dyw - mean(dyw) - xhat * mean(dyw * xhat)) */
      double s1 = 0.0, s2 = 0.0;
      for (int64_t k = 0; k < j->pairs; k++) {
        pair_of(j, s, k, &n, &c);
        double dw = 0.0, db = 0.0;
        for (int64_t i = 0; i < j->S; i++) {
          double xh = (x[k * j->S + i] - mean) * rstd, gy = g[k * j->S + i];
          s1 += gy * j->w[c];
          s2 += gy * j->w[c] * xh;
          dw += gy * xh;
          db += gy;
        }
        j->pair_dw[n * j->C + c] = dw;
        j->pair_db[n * j->C + c] = db;
      }
      s1 /= (double)len;
      s2 /= (double)len;
      if (j->y) {
        for (int64_t k = 0; k < j->pairs; k++) {
          pair_of(j, s, k, &n, &c);
          double* xr = x + k * j->S;
          for (int64_t i = 0; i < j->S; i++) {
            double xh = (xr[i] - mean) * rstd;
            xr[i] = rstd * (g[k * j->S + i] * j->w[c] - s1 - xh * s2);
          }
          scatter(CPU_KT_F64, j->y, pair_base(j->y, n, c), &j->L, 0, xr, j->S);
        }
      }
      continue;
    }
    for (int64_t k = 0; k < j->pairs; k++) {
      pair_of(j, s, k, &n, &c);
      double* xr = x + k * j->S;
      double a = rstd * j->w[c], bb = j->b[c] - mean * a;
      for (int64_t i = 0; i < j->S; i++) xr[i] = xr[i] * a + bb;
      scatter(CPU_KT_F64, j->y, pair_base(j->y, n, c), &j->L, 0, xr, j->S);
    }
  }
cleanup:
  free(x);
  free(g);
}

static bp_status_t exec_grouped(const bp_op_call_t* call) {
  uint32_t op = call->op_id;
  grp_job_t j;
  memset(&j, 0, sizeof j);
  j.call = call;
  j.batch = op == BP_OP_batch_norm;
  j.backward = op == BP_OP_group_norm_backward;
  const bp_tensor_desc_t* x = call->inputs[j.backward ? 1 : 0];
  j.x = x;
  j.N = x->sizes[0];
  j.C = x->sizes[1];
  j.S = numel_range(x->sizes, 2, x->rank);
  uint32_t mask = 7;
  int64_t nstat;
  if (j.batch) {
    const bp_batch_norm_attrs_t* a = call->attrs;
    j.train = a->training != 0;
    j.eps = a->eps;
    j.pairs = j.N;
    nstat = j.C;
  } else {
    const bp_group_norm_attrs_t* a = call->attrs;
    j.G = a->group;
    j.eps = a->eps;
    if (j.G <= 0 || j.C % j.G != 0) {
      return cpu_error(BP_INVALID_ARGUMENT, "cpu: %s: group %lld does not divide C = %lld",
                       cpu_op_name(op), (long long)j.G, (long long)j.C);
    }
    j.pairs = j.C / j.G;
    nstat = j.N * j.G;
    if (j.backward) mask = a->output_mask;
  }
  j.y = (mask & 1u) ? call->outputs[0] : NULL;
  j.dy = j.backward ? call->inputs[0] : x;
  j.smean = call->outputs[1];
  j.srstd = call->outputs[2];
  const bp_tensor_desc_t* ld[3] = {j.y ? j.y : x, x, j.dy};
  cpu_sub_layout(&j.L, ld, 3, x->sizes, 2, x->rank);
  bp_status_t st = BP_OK;
  double *w = NULL, *b = NULL, *rm = NULL, *rv = NULL, *mean = NULL, *rstd = NULL;
  double *pdw = NULL, *pdb = NULL, *red = NULL;
  w = load_all(CPU_KT_F64, opt_in(call, j.backward ? 4 : 1), j.C, 1.0);
  b = load_all(CPU_KT_F64, j.backward ? NULL : opt_in(call, 2), j.C, 0.0);
  if (!w || !b) goto oom;
  if (j.batch && !j.train) {
    rm = load_all(CPU_KT_F64, opt_in(call, 3), j.C, 0.0);
    rv = load_all(CPU_KT_F64, opt_in(call, 4), j.C, 1.0);
    if (!rm || !rv) goto oom;
  }
  if (j.backward) {
    mean = load_all(CPU_KT_F64, call->inputs[2], nstat, 0.0);
    rstd = load_all(CPU_KT_F64, call->inputs[3], nstat, 0.0);
    size_t np = (size_t)(j.N * j.C > 0 ? j.N * j.C : 1);
    pdw = calloc(np, sizeof(double));
    pdb = calloc(np, sizeof(double));
    red = calloc((size_t)(j.C > 0 ? j.C : 1), sizeof(double));
    if (!mean || !rstd || !pdw || !pdb || !red) goto oom;
  }
  j.w = w, j.b = b, j.rm = rm, j.rv = rv, j.mean = mean, j.rstd = rstd;
  j.pair_dw = pdw, j.pair_db = pdb;
  if (nstat > 0 && j.pairs * j.S > 0) {
    int64_t grain = NORM_GRAIN / (j.pairs * j.S);
    cpu_parallel_for(nstat, grain < 1 ? 1 : grain, grp_run, &j);
    if (atomic_load(&j.failed)) goto oom;
  }
  if (j.backward) { /* dw[c] = sum_n pair_dw[n, c], db likewise */
    for (int k = 1; k <= 2; k++) {
      if (!(mask & (1u << k))) continue;
      const double* src = k == 1 ? pdw : pdb;
      for (int64_t c = 0; c < j.C; c++) {
        double s = 0.0;
        for (int64_t n = 0; n < j.N; n++) s += src[n * j.C + c];
        red[c] = s;
      }
      const bp_tensor_desc_t* o = call->outputs[k];
      bp_nd_layout_t l;
      const bp_tensor_desc_t* od[1] = {o};
      cpu_sub_layout(&l, od, 1, o->sizes, 0, o->rank);
      if (j.C > 0) scatter(CPU_KT_F64, o, 0, &l, 0, red, j.C);
    }
  }
  goto cleanup;
oom:
  st = cpu_error(BP_RESOURCE_EXHAUSTED, "cpu: %s: out of host memory", cpu_op_name(op));
cleanup:
  free(w), free(b), free(rm), free(rv), free(mean), free(rstd), free(pdw), free(pdb), free(red);
  return st;
}

/* ---- layer_norm_backward -------------------------------------------------------- */
typedef struct lnb_job {
  const bp_op_call_t* call;
  int64_t n;
  uint32_t mask;
  bp_nd_layout_t R; /* rows: 0 dx, 1 x, 2 dy */
  bp_nd_layout_t I; /* inside a row: 0 dx, 1 x, 2 dy */
  const double *w, *mean, *rstd;
  double *dw, *db; /* per row-chunk partials: [chunks][n] */
  int64_t chunk, rows;
  _Atomic int failed;
} lnb_job_t;

static void lnb_run(void* ctx, int64_t begin, int64_t end) {
  lnb_job_t* j = ctx;
  const bp_op_call_t* call = j->call;
  double* x = malloc((size_t)j->n * 2 * sizeof(double));
  if (!x) {
    atomic_store(&j->failed, 1);
    return;
  }
  double* g = x + j->n;
  bp_nd_cursor_t c;
  bp_nd_cursor_init(&c, &j->R, begin);
  for (int64_t r = begin; r < end; r++) {
    gather(CPU_KT_F64, x, call->inputs[1], c.off[1], &j->I, 1, j->n);
    gather(CPU_KT_F64, g, call->inputs[0], c.off[2], &j->I, 2, j->n);
    double mu = j->mean[r], rs = j->rstd[r], s1 = 0.0, s2 = 0.0;
    double* dw = j->dw + (r / j->chunk) * j->n;
    double* db = j->db + (r / j->chunk) * j->n;
    for (int64_t i = 0; i < j->n; i++) {
      double xh = (x[i] - mu) * rs;
      s1 += g[i] * j->w[i];
      s2 += g[i] * j->w[i] * xh;
      dw[i] += g[i] * xh;
      db[i] += g[i];
    }
    s1 /= (double)j->n;
    s2 /= (double)j->n;
    if (j->mask & 1u) {
      for (int64_t i = 0; i < j->n; i++) x[i] = rs * (g[i] * j->w[i] - s1 - (x[i] - mu) * rs * s2);
      scatter(CPU_KT_F64, call->outputs[0], c.off[0], &j->I, 0, x, j->n);
    }
    bp_nd_cursor_advance(&c, &j->R, 1);
  }
  free(x);
}

/* Tasks take whole chunks of rows, so each partial row of dw/db has one
 * writer. */
static void lnb_chunks(void* ctx, int64_t begin, int64_t end) {
  lnb_job_t* j = ctx;
  int64_t e = end * j->chunk;
  lnb_run(ctx, begin * j->chunk, e < j->rows ? e : j->rows);
}

static bp_status_t exec_layer_norm_backward(const bp_op_call_t* call) {
  const bp_layer_norm_attrs_t* a = call->attrs;
  const bp_tensor_desc_t* x = call->inputs[1];
  uint32_t nr = a->normalized_rank;
  if (nr == 0 || nr > x->rank) {
    return cpu_error(BP_INVALID_ARGUMENT, "cpu: layer_norm_backward: normalized rank %u for rank %u",
                     nr, x->rank);
  }
  uint32_t lead = x->rank - nr;
  lnb_job_t j;
  memset(&j, 0, sizeof j);
  j.call = call;
  j.mask = a->output_mask;
  j.n = numel_range(x->sizes, lead, x->rank);
  int64_t rows = numel_range(x->sizes, 0, lead);
  const bp_tensor_desc_t* dx = (j.mask & 1u) ? call->outputs[0] : x;
  const bp_tensor_desc_t* rd[3] = {dx, x, call->inputs[0]};
  cpu_sub_layout(&j.R, rd, 3, x->sizes, 0, lead);
  cpu_sub_layout(&j.I, rd, 3, x->sizes, lead, x->rank);
  int64_t grain = j.n > 0 ? NORM_GRAIN / j.n : 1;
  j.chunk = grain < 1 ? 1 : grain;
  int64_t chunks = rows > 0 ? (rows + j.chunk - 1) / j.chunk : 0;
  bp_status_t st = BP_OK;
  double* w = load_all(CPU_KT_F64, opt_in(call, 4), j.n, 1.0);
  double* mean = load_all(CPU_KT_F64, call->inputs[2], rows, 0.0);
  double* rstd = load_all(CPU_KT_F64, call->inputs[3], rows, 0.0);
  /* at least one partial row: with no rows dw and db are zeros */
  size_t part = (size_t)((chunks > 0 ? chunks : 1) * (j.n > 0 ? j.n : 1));
  double* pdw = calloc(part, sizeof(double));
  double* pdb = calloc(part, sizeof(double));
  if (!w || !mean || !rstd || !pdw || !pdb) goto oom;
  j.w = w, j.mean = mean, j.rstd = rstd, j.dw = pdw, j.db = pdb;
  j.rows = rows;
  if (rows > 0 && j.n > 0) {
    cpu_parallel_for(chunks, 1, lnb_chunks, &j);
    if (atomic_load(&j.failed)) goto oom;
  }
  for (int k = 1; k <= 2; k++) { /* dw[i] = sum over chunks, db likewise */
    const bp_tensor_desc_t* o = call->outputs[k];
    if (!(j.mask & (1u << k)) || j.n == 0) continue;
    double* acc = k == 1 ? pdw : pdb;
    for (int64_t q = 1; q < chunks; q++) {
      for (int64_t i = 0; i < j.n; i++) acc[i] += acc[q * j.n + i];
    }
    bp_nd_layout_t l;
    const bp_tensor_desc_t* od[1] = {o};
    cpu_sub_layout(&l, od, 1, o->sizes, 0, o->rank);
    scatter(CPU_KT_F64, o, 0, &l, 0, acc, j.n);
  }
  goto cleanup;
oom:
  st = cpu_error(BP_RESOURCE_EXHAUSTED, "cpu: layer_norm_backward: out of host memory");
cleanup:
  free(w), free(mean), free(rstd), free(pdw), free(pdb);
  return st;
}

/* ---- cross_entropy ------------------------------------------------------------------ */
/* Per position (every index but the class dim): loss = (1 - ls) * -w[t] *
 * logp[t] + ls / C * -sum_c w[c] * logp[c], logp = x - logsumexp(x), 0 for
 * ignored targets; mean divides by the sum of w[t] over the kept positions
 * (PyTorch's nll_loss and cross_entropy_loss_label_smoothing). */
typedef struct ce_job {
  const bp_op_call_t* call;
  int64_t C, cstride;
  bp_nd_layout_t P; /* positions: 0 out (none), 1 logits, 2 target */
  const double* w;
  double ls;
  int64_t ignore;
  double *loss, *wt; /* per position */
  _Atomic int failed;
  _Atomic int64_t bad_target;
} ce_job_t;

static void ce_run(void* ctx, int64_t begin, int64_t end) {
  ce_job_t* j = ctx;
  const bp_op_call_t* call = j->call;
  const bp_tensor_desc_t *x = call->inputs[0], *t = call->inputs[1];
  double* buf = malloc((size_t)j->C * sizeof(double));
  if (!buf) {
    atomic_store(&j->failed, 1);
    return;
  }
  const unsigned char* xp = cpu_desc_ptr(x);
  const int64_t* tp = (const int64_t*)cpu_desc_ptr(t);
  size_t xes = bp_dtype_size(x->dtype);
  bp_nd_cursor_t c;
  bp_nd_cursor_init(&c, &j->P, begin);
  for (int64_t p = begin; p < end; p++) {
    int64_t tg = tp[c.off[2]];
    double loss = 0.0, wt = 0.0;
    if (tg != j->ignore) {
      if (tg < 0 || tg >= j->C) {
        atomic_store(&j->bad_target, tg);
        atomic_store(&j->failed, 2);
        break;
      }
      cpu_load[CPU_KT_F64](buf, xp + c.off[1] * (int64_t)xes, j->cstride, j->C, x->dtype);
      double mx = -INFINITY;
      int nan = 0;
      for (int64_t k = 0; k < j->C; k++) {
        if (buf[k] != buf[k]) nan = 1;
        else if (buf[k] > mx) mx = buf[k];
      }
      double se = 0.0;
      for (int64_t k = 0; k < j->C; k++) se += exp(buf[k] - mx);
      double lse = mx + log(se);
      wt = j->w[tg];
      loss = -(1.0 - j->ls) * wt * (buf[tg] - lse);
      if (j->ls > 0.0) {
        double sm = 0.0;
        for (int64_t k = 0; k < j->C; k++) sm -= j->w[k] * (buf[k] - lse);
        loss += j->ls / (double)j->C * sm;
      }
      if (nan) loss = NAN;
    }
    j->loss[p] = loss;
    j->wt[p] = wt;
    bp_nd_cursor_advance(&c, &j->P, 1);
  }
  free(buf);
}

static bp_status_t exec_cross_entropy(const bp_op_call_t* call) {
  const bp_cross_entropy_attrs_t* a = call->attrs;
  const bp_tensor_desc_t *x = call->inputs[0], *out = call->outputs[0];
  uint32_t cdim = x->rank == 1 ? 0 : 1;
  ce_job_t j;
  memset(&j, 0, sizeof j);
  j.call = call;
  j.C = x->sizes[cdim];
  j.cstride = x->strides[cdim];
  j.ls = a->label_smoothing;
  j.ignore = a->ignore_index;
  /* positions: the logits' dims without the class dim; the target's and a
   * `none` output's dims are the same sizes */
  int64_t psz[BP_MAX_RANK];
  bp_tensor_desc_t xs = *x;
  uint32_t pr = 0;
  for (uint32_t d = 0; d < x->rank; d++) {
    if (d == cdim) continue;
    psz[pr] = x->sizes[d];
    xs.strides[pr] = x->strides[d];
    pr++;
  }
  int none = a->reduction == BP_LOSS_NONE;
  const bp_tensor_desc_t* pd[3] = {none ? out : NULL, &xs, call->inputs[1]};
  cpu_sub_layout(&j.P, pd, 3, psz, 0, pr);
  int64_t npos = numel_range(psz, 0, pr);
  bp_status_t st = BP_OK;
  double* w = load_all(CPU_KT_F64, opt_in(call, 2), j.C, 1.0);
  double* loss = malloc((size_t)(npos > 0 ? npos : 1) * 2 * sizeof(double));
  if (!w || !loss) {
    st = cpu_error(BP_RESOURCE_EXHAUSTED, "cpu: cross_entropy: out of host memory");
    goto cleanup;
  }
  j.w = w, j.loss = loss, j.wt = loss + npos;
  if (npos > 0) {
    int64_t grain = j.C > 0 ? NORM_GRAIN / j.C : NORM_GRAIN;
    cpu_parallel_for(npos, grain < 1 ? 1 : grain, ce_run, &j);
  }
  int failed = atomic_load(&j.failed);
  if (failed == 2) {
    st = cpu_error(BP_INVALID_ARGUMENT, "cpu: cross_entropy: target %lld is out of bounds [0, %lld)",
                   (long long)atomic_load(&j.bad_target), (long long)j.C);
    goto cleanup;
  }
  if (failed) {
    st = cpu_error(BP_RESOURCE_EXHAUSTED, "cpu: cross_entropy: out of host memory");
    goto cleanup;
  }
  if (none) {
    if (npos > 0) scatter(CPU_KT_F64, out, 0, &j.P, 0, loss, npos);
  } else {
    double tot = 0.0, wsum = 0.0;
    for (int64_t p = 0; p < npos; p++) tot += loss[p], wsum += j.wt[p];
    double r = a->reduction == BP_LOSS_MEAN ? tot / wsum : tot;
    cpu_store[CPU_KT_F64](cpu_desc_ptr(out), 1, &r, 1, out->dtype);
  }
cleanup:
  free(w);
  free(loss);
  return st;
}

static int supported_norm(const bp_op_call_t* call, char* msg, size_t cap) {
  (void)call, (void)msg, (void)cap;
  return BP_SUPPORT_OK;
}

static bp_status_t exec_norm(const bp_op_call_t* call) {
  switch (call->op_id) {
    case BP_OP_layer_norm:
    case BP_OP_rms_norm:
    case BP_OP_add_layer_norm:
    case BP_OP_add_rms_norm: return exec_rows(call);
    case BP_OP_batch_norm:
    case BP_OP_group_norm:
    case BP_OP_group_norm_backward: return exec_grouped(call);
    case BP_OP_layer_norm_backward: return exec_layer_norm_backward(call);
    case BP_OP_cross_entropy: return exec_cross_entropy(call);
    default: break;
  }
  return cpu_error(BP_UNIMPLEMENTED, "cpu: op %s has no CPU kernel", cpu_op_name(call->op_id));
}

const cpu_family_t cpu_family_norm = {
    "norm",
    CPU_FAMILY_OPS(BP_OP_batch_norm, BP_OP_group_norm, BP_OP_group_norm_backward,
                   BP_OP_layer_norm, BP_OP_layer_norm_backward, BP_OP_rms_norm,
                   BP_OP_cross_entropy, BP_OP_add_rms_norm, BP_OP_add_layer_norm),
    exec_norm, supported_norm, 0};
