/* backplane CPU plugin: the conv kernel family -- convolution,
 * convolution_backward and col2im (1-d, 2-d and 3-d; groups; transposed).
 *
 * Everything is GEMM plus two data movers, per image and per group:
 *   im2col  the "big" image [C, big...] -> columns [C * kk, small]
 *   col2im  columns [C * kk, small] -> the big image, summing overlaps
 * where "big" is the side the kernel slides over (the input of a convolution,
 * the output of a transposed one or of col2im) and "small" the positions of
 * the kernel (the other side). With W [O, Cg * kk] per group:
 *   convolution              Y = W @ im2col(X)            (1x1, stride 1, no
 *                                                           padding: Y = W @ X)
 *   transposed convolution   Y = col2im(W^T @ X)
 *   grad_input               col2im(W^T @ dY)  /  transposed: W @ im2col(dY)
 *   grad_weight              dY @ im2col(X)^T  /  transposed: X @ im2col(dY)^T
 *   grad_bias                sum of dY over batch and space
 * (equivalent to PyTorch's slow_conv2d / slow_conv_transpose2d on CPU; the
 * forward convolution batches its columns for cache and GEMM shape, see
 * conv_forward_gemm). GEMMs go through cpu_gemm (OpenBLAS when built with
 * it). A build with oneDNN runs f32 forward convolutions through it instead
 * (cpu_conv_dnnl.c). f32 computes in
 * f32, f64 in f64, f16 and bf16 in f32 on converted copies (opmath). Operands
 * of the compute dtype are read and written in place with any strides; a
 * GEMM operand whose spatial dims do not flatten to one stride is copied
 * dense first.
 *
 * convolution_backward computes only the outputs that attrs.output_mask
 * requests (the others are [0] and never written).
 *
 * Threading: runs on a stream worker; im2col, col2im and fills split over the
 * pool, GEMMs over BLAS's threads. No state outside the call.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cpu_conv_dnnl.h"
#include "cpu_kernels.h"

enum { CONV_SP = 3 }; /* spatial dims, padded (leading dims of size 1) */
/* Bytes of columns extracted per GEMM in a forward convolution (about a
 * core's L2), and the fewest columns (output positions) per GEMM, below
 * which a GEMM is too thin to run at full speed. */
#define CONV_CHUNK_BYTES ((int64_t)2 << 20)
#define CONV_CHUNK_MIN_COLS 1024

/* One sliding-window geometry; dims before the real ones have size 1. */
typedef struct conv_geom {
  int64_t big[CONV_SP], small[CONV_SP], k[CONV_SP], s[CONV_SP], p[CONV_SP], d[CONV_SP];
  int64_t kk;             /* kernel positions */
  int64_t big_n, small_n; /* positions on each side */
} conv_geom_t;

/* A tensor [N?, C, spatial...] in the compute type: element (n, c, x) at
 * base + (n * sn + c * sc + sum x_i * ss_i) elements. */
typedef struct conv_view {
  unsigned char* base;
  int64_t sn, sc;
  int64_t ss[CONV_SP];
  int64_t sl;  /* stride of the flattened spatial index; -1: does not flatten */
  void* owned; /* a dense copy this view owns, or NULL */
} conv_view_t;

static inline int64_t conv_ceil_div(int64_t a, int64_t b) { /* b > 0 */
  int64_t q = a / b;
  return (a % b != 0 && a > 0) ? q + 1 : q;
}
static inline int64_t conv_clamp(int64_t v, int64_t lo, int64_t hi) {
  return v < lo ? lo : v > hi ? hi : v;
}

/* Range [lo, hi) of small positions q whose big position q * s - p + k * d
 * lies in [0, big). */
static inline void conv_valid(const conv_geom_t* g, int i, int64_t kpos, int64_t* lo, int64_t* hi) {
  int64_t off = g->p[i] - kpos * g->d[i];
  *lo = conv_clamp(conv_ceil_div(off, g->s[i]), 0, g->small[i]);
  *hi = conv_clamp(conv_ceil_div(g->big[i] + off, g->s[i]), *lo, g->small[i]);
}

/* ---- data movers, per compute type ------------------------------------- */
#define CONV_TYPES(X) X(f32, float, BP_DTYPE_F32) X(f64, double, BP_DTYPE_F64)

typedef struct conv_mover {
  const conv_geom_t* g;
  const conv_view_t* img; /* the big image (one batch element) */
  unsigned char* img_base;
  unsigned char* col; /* columns: im2col writes rows ld apart; col2im reads [rows, small_n] */
  int64_t channels;
  const void* values; /* fill: per-channel values (NULL: zeros) */
  const int64_t* ext; /* fill: the image's padded spatial sizes */
  int64_t t0, t1;     /* im2col: the rows (q0, q1) = t of the small side to
                         extract, (t1 - t0) * small[2] entries per col row */
  int64_t ld;         /* im2col: elements between col rows */
} conv_mover_t;

/* im2col: rows [rb, re) of col (row = c * kk + kernel position), for the
 * small positions of rows [t0, t1).
 * col2im: channels [rb, re) of the image += their col rows.
 * fill: channels [rb, re) of the image = values[c] (or 0). */
#define CONV__MOVERS(SFX, T, D)                                                                  \
  static void conv_im2col_##SFX(void* ctx, int64_t rb, int64_t re) {                             \
    const conv_mover_t* m = ctx;                                                                 \
    const conv_geom_t* g = m->g;                                                                 \
    const conv_view_t* v = m->img;                                                               \
    for (int64_t r = rb; r < re; r++) {                                                          \
      int64_t c = r / g->kk, kp = r % g->kk;                                                     \
      int64_t k2 = kp % g->k[2], k1 = (kp / g->k[2]) % g->k[1], k0 = kp / (g->k[2] * g->k[1]);   \
      T* dst = (T*)m->col + r * m->ld;                                                           \
      const T* src = (const T*)m->img_base + c * v->sc;                                          \
      int64_t lo0, hi0, lo1, hi1, lo2, hi2;                                                      \
      conv_valid(g, 0, k0, &lo0, &hi0);                                                          \
      conv_valid(g, 1, k1, &lo1, &hi1);                                                          \
      conv_valid(g, 2, k2, &lo2, &hi2);                                                          \
      int64_t s2 = g->s[2] * v->ss[2];                                                           \
      for (int64_t t = m->t0; t < m->t1; t++) {                                                  \
        int64_t q0 = t / g->small[1], q1 = t % g->small[1];                                      \
        T* d1 = dst + (t - m->t0) * g->small[2];                                                 \
        if (q0 < lo0 || q0 >= hi0 || q1 < lo1 || q1 >= hi1 || lo2 == hi2) {                      \
          memset(d1, 0, (size_t)g->small[2] * sizeof(T));                                        \
          continue;                                                                              \
        }                                                                                        \
        for (int64_t q2 = 0; q2 < lo2; q2++) d1[q2] = 0;                                         \
        for (int64_t q2 = hi2; q2 < g->small[2]; q2++) d1[q2] = 0;                               \
        const T* s1 = src + (q0 * g->s[0] - g->p[0] + k0 * g->d[0]) * v->ss[0] +                 \
                      (q1 * g->s[1] - g->p[1] + k1 * g->d[1]) * v->ss[1] +                       \
                      (lo2 * g->s[2] - g->p[2] + k2 * g->d[2]) * v->ss[2];                       \
        if (s2 == 1)                                                                             \
          memcpy(d1 + lo2, s1, (size_t)(hi2 - lo2) * sizeof(T));                                 \
        else                                                                                     \
          for (int64_t q2 = lo2; q2 < hi2; q2++) d1[q2] = s1[(q2 - lo2) * s2];                   \
      }                                                                                          \
    }                                                                                            \
  }                                                                                              \
  static void conv_col2im_##SFX(void* ctx, int64_t cb, int64_t ce) {                             \
    const conv_mover_t* m = ctx;                                                                 \
    const conv_geom_t* g = m->g;                                                                 \
    const conv_view_t* v = m->img;                                                               \
    for (int64_t c = cb; c < ce; c++) {                                                          \
      T* img = (T*)m->img_base + c * v->sc;                                                      \
      for (int64_t kp = 0; kp < g->kk; kp++) {                                                   \
        int64_t k2 = kp % g->k[2], k1 = (kp / g->k[2]) % g->k[1], k0 = kp / (g->k[2] * g->k[1]); \
        const T* src = (const T*)m->col + (c * g->kk + kp) * g->small_n;                         \
        int64_t lo0, hi0, lo1, hi1, lo2, hi2;                                                    \
        conv_valid(g, 0, k0, &lo0, &hi0);                                                        \
        conv_valid(g, 1, k1, &lo1, &hi1);                                                        \
        conv_valid(g, 2, k2, &lo2, &hi2);                                                        \
        int64_t s2 = g->s[2] * v->ss[2];                                                         \
        for (int64_t q0 = lo0; q0 < hi0; q0++) {                                                 \
          T* d0 = img + (q0 * g->s[0] - g->p[0] + k0 * g->d[0]) * v->ss[0];                      \
          for (int64_t q1 = lo1; q1 < hi1; q1++) {                                               \
            T* d1 = d0 + (q1 * g->s[1] - g->p[1] + k1 * g->d[1]) * v->ss[1] +                    \
                    (lo2 * g->s[2] - g->p[2] + k2 * g->d[2]) * v->ss[2];                         \
            const T* s1 = src + (q0 * g->small[1] + q1) * g->small[2];                           \
            for (int64_t q2 = lo2; q2 < hi2; q2++) d1[(q2 - lo2) * s2] += s1[q2];                \
          }                                                                                      \
        }                                                                                        \
      }                                                                                          \
    }                                                                                            \
  }                                                                                              \
  static void conv_fill_##SFX(void* ctx, int64_t cb, int64_t ce) {                               \
    const conv_mover_t* m = ctx;                                                                 \
    const conv_view_t* v = m->img;                                                               \
    for (int64_t c = cb; c < ce; c++) {                                                          \
      T val = m->values ? ((const T*)m->values)[c] : (T)0;                                       \
      T* img = (T*)m->img_base + c * v->sc;                                                      \
      for (int64_t i0 = 0; i0 < m->ext[0]; i0++)                                                 \
        for (int64_t i1 = 0; i1 < m->ext[1]; i1++) {                                             \
          T* row = img + i0 * v->ss[0] + i1 * v->ss[1];                                          \
          for (int64_t i2 = 0; i2 < m->ext[2]; i2++) row[i2 * v->ss[2]] = val;                   \
        }                                                                                        \
    }                                                                                            \
  }
CONV_TYPES(CONV__MOVERS)

typedef struct conv_kernels {
  uint32_t dtype; /* compute dtype */
  size_t es;
  cpu_range_fn im2col, col2im, fill;
} conv_kernels_t;

static const conv_kernels_t* conv_kernels_for(uint32_t storage_dtype) {
  static const conv_kernels_t k[] = {
#define CONV__KENTRY(SFX, T, D) \
  {D, sizeof(T), conv_im2col_##SFX, conv_col2im_##SFX, conv_fill_##SFX},
      CONV_TYPES(CONV__KENTRY)
#undef CONV__KENTRY
  };
  return storage_dtype == BP_DTYPE_F64 ? &k[1] : &k[0];
}

/* Grain of the movers: about 32K elements per task. */
static int64_t conv_grain(int64_t per_item) {
  int64_t gr = per_item > 0 ? 32768 / per_item : 1;
  return gr < 1 ? 1 : gr;
}

/* Columns of image n for the small-side rows [t0, t1) (t = q0 * small[1] +
 * q1): col is [channels * kk, (t1 - t0) * small[2]] with row stride ld. */
static void conv_im2col_rows(const conv_kernels_t* K, const conv_geom_t* g, const conv_view_t* img,
                             int64_t n, int64_t channels, void* col, int64_t t0, int64_t t1,
                             int64_t ld) {
  conv_mover_t m = {
      g, img, img->base + n * img->sn * (int64_t)K->es, col, channels, NULL, NULL, t0, t1, ld};
  int64_t rows = channels * g->kk;
  cpu_parallel_for(rows, conv_grain((t1 - t0) * g->small[2]), K->im2col, &m);
}

static void conv_im2col(const conv_kernels_t* K, const conv_geom_t* g, const conv_view_t* img,
                        int64_t n, int64_t channels, void* col) {
  conv_im2col_rows(K, g, img, n, channels, col, 0, g->small[0] * g->small[1], g->small_n);
}

static void conv_col2im(const conv_kernels_t* K, const conv_geom_t* g, const conv_view_t* img,
                        int64_t n, int64_t channels, const void* col) {
  conv_mover_t m = {g,
                    img,
                    img->base + n * img->sn * (int64_t)K->es,
                    (unsigned char*)col,
                    channels,
                    NULL,
                    NULL,
                    0,
                    0,
                    0};
  cpu_parallel_for(channels, conv_grain(g->kk * g->small_n), K->col2im, &m);
}

/* Image n's channels = values[c] (NULL: 0) over spatial sizes ext (padded). */
static void conv_fill(const conv_kernels_t* K, const conv_geom_t* g, const conv_view_t* img,
                      int64_t n, int64_t channels, const void* values, const int64_t* ext) {
  conv_mover_t m = {
      g, img, img->base + n * img->sn * (int64_t)K->es, NULL, channels, values, ext, 0, 0, 0};
  cpu_parallel_for(channels, conv_grain(ext[0] * ext[1] * ext[2]), K->fill, &m);
}

/* ---- views --------------------------------------------------------------- */
/* Stride of dims [first, rank) flattened into one index, or -1 when they do
 * not flatten (size-1 dims ignored; 1 when every dim has size 1). */
static int64_t conv_flat_stride(const bp_tensor_desc_t* d, uint32_t first) {
  int found = 0;
  int64_t st = 1, next = 0;
  for (uint32_t i = d->rank; i-- > first;) {
    if (d->sizes[i] == 1) continue;
    if (!found) {
      st = d->strides[i];
      found = 1;
    } else if (d->strides[i] != next) {
      return -1;
    }
    next = d->strides[i] * d->sizes[i];
  }
  return st;
}

static void conv_view_free(conv_view_t* v) {
  free(v->owned);
  v->owned = NULL;
}

static bp_status_t conv_oom(const char* what, int64_t bytes) {
  return cpu_error(BP_RESOURCE_EXHAUSTED, "cpu: conv: cannot allocate %lld bytes for %s",
                   (long long)bytes, what);
}

/* A dense row-major buffer in the compute dtype holding `d` converted
 * (NULL d: uninitialised, of d's shape). *out is malloc'd; *dense describes
 * it and points at *holder. */
static bp_status_t conv_dense(const bp_tensor_desc_t* d, const conv_kernels_t* K, int copy,
                              const char* what, void** out, bp_tensor_desc_t* dense,
                              struct bpp_buffer_s* holder) {
  int64_t n = bp_desc_numel(d);
  *out = malloc((size_t)(n > 0 ? n : 1) * K->es);
  if (!*out) return conv_oom(what, n * (int64_t)K->es);
  cpu_desc_host(dense, holder, *out, K->dtype, d->rank, d->sizes, NULL);
  bp_status_t st = copy ? cpu_cast_copy(dense, d) : BP_OK;
  if (st) {
    free(*out);
    *out = NULL;
  }
  return st;
}

/* v over `d` at `base` ([N, C, spatial...] when batched, else [C,
 * spatial...]). */
static void conv_view_set(conv_view_t* v, unsigned char* base, const bp_tensor_desc_t* d,
                          int batched) {
  uint32_t first = batched ? 2 : 1, nsp = d->rank - first;
  v->base = base;
  v->sn = batched ? d->strides[0] : 0;
  v->sc = d->strides[first - 1];
  for (uint32_t i = 0; i < CONV_SP; i++) /* padded dims counted from the last */
    v->ss[CONV_SP - 1 - i] = i < nsp ? d->strides[d->rank - 1 - i] : 0;
  v->sl = conv_flat_stride(d, first);
}

/* A view of input `d` in the compute dtype: in place when d already has
 * that dtype (and its spatial dims flatten, if `flat`), else a dense
 * converted copy. */
static bp_status_t conv_view_in(const bp_tensor_desc_t* d, const conv_kernels_t* K, int batched,
                                int flat, conv_view_t* v) {
  memset(v, 0, sizeof *v);
  if (d->dtype == K->dtype && (!flat || conv_flat_stride(d, batched ? 2 : 1) >= 0)) {
    conv_view_set(v, cpu_desc_ptr(d), d, batched);
    return BP_OK;
  }
  bp_tensor_desc_t dense;
  struct bpp_buffer_s holder;
  bp_status_t st = conv_dense(d, K, 1, "an input copy", &v->owned, &dense, &holder);
  if (st == BP_OK) conv_view_set(v, v->owned, &dense, batched);
  return st;
}

/* An output view: in place when `d` has the compute dtype (and flattens, if
 * `flat`), else a dense buffer that conv_view_out_finish stores into d. */
static bp_status_t conv_view_out(const bp_tensor_desc_t* d, const conv_kernels_t* K, int batched,
                                 int flat, conv_view_t* v) {
  memset(v, 0, sizeof *v);
  if (d->dtype == K->dtype && (!flat || conv_flat_stride(d, batched ? 2 : 1) >= 0)) {
    conv_view_set(v, cpu_desc_ptr(d), d, batched);
    return BP_OK;
  }
  bp_tensor_desc_t dense;
  struct bpp_buffer_s holder;
  bp_status_t st = conv_dense(d, K, 0, "an output buffer", &v->owned, &dense, &holder);
  if (st == BP_OK) conv_view_set(v, v->owned, &dense, batched);
  return st;
}

static bp_status_t conv_view_out_finish(const bp_tensor_desc_t* d, const conv_kernels_t* K,
                                        conv_view_t* v) {
  if (!v->owned) return BP_OK;
  bp_tensor_desc_t dense;
  struct bpp_buffer_s holder;
  cpu_desc_host(&dense, &holder, v->owned, K->dtype, d->rank, d->sizes, NULL);
  return cpu_cast_copy(d, &dense);
}

/* A weight-shaped tensor [A, B, k...] as a matrix [A, B * kk] in the
 * compute dtype: row stride v->sn, column stride v->sl. In place when it has
 * that dtype and dims 1.. flatten, else a dense buffer: converted from w
 * when `copy` (an input), else stored into w by conv_view_out_finish (an
 * output). */
static bp_status_t conv_matrix(const bp_tensor_desc_t* w, const conv_kernels_t* K, int copy,
                               conv_view_t* v) {
  memset(v, 0, sizeof *v);
  int64_t fl = conv_flat_stride(w, 1);
  if (w->dtype == K->dtype && fl >= 0) {
    v->base = cpu_desc_ptr(w);
    v->sn = w->strides[0];
    v->sl = fl;
    return BP_OK;
  }
  bp_tensor_desc_t dense;
  struct bpp_buffer_s holder;
  bp_status_t st =
      conv_dense(w, K, copy, copy ? "a weight copy" : "grad_weight", &v->owned, &dense, &holder);
  if (st == BP_OK) {
    v->base = v->owned;
    v->sn = dense.strides[0];
    v->sl = 1;
  }
  return st;
}

/* ---- geometry ------------------------------------------------------------ */
/* big/small/kernel sizes of `nsp` real dims into the padded geometry. */
static void conv_geom_make(conv_geom_t* g, uint32_t nsp, const int64_t* big, const int64_t* small,
                           const int64_t* k, const int64_t* s, const int64_t* p, const int64_t* d) {
  g->kk = g->big_n = g->small_n = 1;
  for (uint32_t i = 0; i < CONV_SP; i++) {
    int real = i >= CONV_SP - nsp;
    uint32_t j = i - (CONV_SP - nsp);
    g->big[i] = real ? big[j] : 1;
    g->small[i] = real ? small[j] : 1;
    g->k[i] = real ? k[j] : 1;
    g->s[i] = real ? s[j] : 1;
    g->p[i] = real ? p[j] : 0;
    g->d[i] = real ? d[j] : 1;
    g->kk *= g->k[i];
    g->big_n *= g->big[i];
    g->small_n *= g->small[i];
  }
}

/* Per-channel values (bias) in the compute dtype; an absent bias gives NULL. */
static bp_status_t conv_bias(const bp_tensor_desc_t* b, const conv_kernels_t* K, void** out) {
  *out = NULL;
  if (!b || b->dtype == BP_DTYPE_INVALID) return BP_OK;
  bp_tensor_desc_t dense;
  struct bpp_buffer_s holder;
  return conv_dense(b, K, 1, "the bias", out, &dense, &holder);
}

/* The operands of one convolution call in the compute dtype. */
typedef struct conv_call {
  const bp_conv_attrs_t* a;
  const conv_kernels_t* K;
  conv_geom_t g;
  int64_t batch, c_in, c_out, groups, cg, og; /* cg/og: channels per group */
} conv_call_t;

/* Geometry from input [N, C, in...], weight and output [N, O, out...]. */
static void conv_call_make(conv_call_t* cc, const bp_conv_attrs_t* a, const bp_tensor_desc_t* in,
                           const bp_tensor_desc_t* w, const bp_tensor_desc_t* out) {
  uint32_t nsp = w->rank - 2;
  cc->a = a;
  cc->K = conv_kernels_for(in->dtype);
  cc->batch = in->sizes[0];
  cc->c_in = in->sizes[1];
  cc->c_out = out->sizes[1];
  cc->groups = a->groups;
  cc->cg = cc->c_in / cc->groups;
  cc->og = cc->c_out / cc->groups;
  const int64_t* big = a->transposed ? out->sizes + 2 : in->sizes + 2;
  const int64_t* small = a->transposed ? in->sizes + 2 : out->sizes + 2;
  conv_geom_make(&cc->g, nsp, big, small, w->sizes + 2, a->stride, a->padding, a->dilation);
}

#define ES(cc) ((int64_t)(cc)->K->es)
#define AT(v, elems, cc) ((v)->base + (elems)*ES(cc))

/* ---- convolution --------------------------------------------------------- */
/* Y = W @ im2col(X) (+ bias) for a non-transposed convolution whose Y view
 * flattens. Three schedules:
 *  - 1x1, stride 1, no padding: X is its own column matrix, one GEMM per
 *    image and group;
 *  - images with at least CONV_CHUNK_MIN_COLS output positions: columns in
 *    chunks of whole small-side rows of about CONV_CHUNK_BYTES, so that a
 *    chunk is still in cache when the GEMM reads it;
 *  - smaller images: the columns of several images side by side, so that
 *    one GEMM has CONV_CHUNK_MIN_COLS columns, into a staging [O, cols]
 *    matrix copied to Y. */
static bp_status_t conv_forward_gemm(const conv_call_t* cc, const conv_view_t* X,
                                     const conv_view_t* W, const void* bias, const conv_view_t* Y) {
  const conv_geom_t* g = &cc->g;
  const conv_kernels_t* K = cc->K;
  int64_t es = ES(cc), kg = cc->cg * g->kk, rows = cc->c_in * g->kk;
  int64_t trows = g->small[0] * g->small[1], L = g->small_n;
  int direct = g->kk == 1;
  for (int i = 0; i < CONV_SP; i++) direct &= g->s[i] == 1 && g->p[i] == 0;
  direct &= X->sl >= 0;
  int64_t tchunk = trows, nimg = 1;
  if (!direct && L >= CONV_CHUNK_MIN_COLS) {
    int64_t per_t = rows * g->small[2] * es;
    int64_t min_t = conv_ceil_div(CONV_CHUNK_MIN_COLS, g->small[2]);
    tchunk = per_t > 0 ? CONV_CHUNK_BYTES / per_t : trows;
    tchunk = tchunk < min_t ? min_t : tchunk;
    tchunk = tchunk < 1 ? 1 : tchunk > trows ? trows : tchunk;
  } else if (!direct && L > 0) {
    nimg = conv_ceil_div(CONV_CHUNK_MIN_COLS, L);
    nimg = nimg > cc->batch ? cc->batch : nimg;
    if (nimg > 0)
      nimg = conv_ceil_div(cc->batch, conv_ceil_div(cc->batch, nimg)); /* equal shares */
  }
  void *col = NULL, *stage = NULL;
  bp_status_t st = BP_OK;
  if (!direct) {
    int64_t cols = nimg > 1 ? nimg * L : tchunk * g->small[2];
    if (!(col = malloc((size_t)(rows * cols > 0 ? rows * cols : 1) * (size_t)es)))
      return conv_oom("the column buffer", rows * cols * es);
    if (nimg > 1 && !(stage = malloc((size_t)(cc->c_out * cols) * (size_t)es))) {
      free(col);
      return conv_oom("the staging buffer", cc->c_out * cols * es);
    }
  }
  if (nimg > 1) {
    for (int64_t n0 = 0; n0 < cc->batch && st == BP_OK; n0 += nimg) {
      int64_t m = cc->batch - n0 < nimg ? cc->batch - n0 : nimg, ld = m * L;
      for (int64_t j = 0; j < m; j++)
        conv_im2col_rows(K, g, X, n0 + j, cc->c_in, (unsigned char*)col + j * L * es, 0, trows, ld);
      if (bias) { /* stage[o, :] = bias[o], then the GEMMs accumulate */
        conv_view_t sv = {stage, 0, ld, {0, 0, 1}, 1, NULL};
        int64_t ext[CONV_SP] = {1, 1, ld};
        conv_fill(K, g, &sv, 0, cc->c_out, bias, ext);
      }
      for (int64_t gi = 0; gi < cc->groups && st == BP_OK; gi++)
        st = cpu_gemm(K->dtype, cc->og, ld, kg, 1.0, AT(W, gi * cc->og * W->sn, cc), W->sn, W->sl,
                      (unsigned char*)col + gi * kg * ld * es, ld, 1, bias != NULL,
                      (unsigned char*)stage + gi * cc->og * ld * es, ld, 1);
      if (st) break;
      /* stage [O, m * L] -> Y[n0 .. n0 + m) */
      bp_tensor_desc_t sd, yd;
      struct bpp_buffer_s sh, yh;
      int64_t sizes[3] = {m, cc->c_out, L};
      int64_t s_str[3] = {L, ld, 1}, y_str[3] = {Y->sn, Y->sc, Y->sl};
      cpu_desc_host(&sd, &sh, stage, K->dtype, 3, sizes, s_str);
      cpu_desc_host(&yd, &yh, AT(Y, n0 * Y->sn, cc), K->dtype, 3, sizes, y_str);
      st = cpu_cast_copy(&yd, &sd);
    }
    goto cleanup;
  }
  for (int64_t n = 0; n < cc->batch && st == BP_OK; n++) {
    /* Y_n[g][:, chunk] = W[g] @ col[g][:, chunk] (+ bias) */
    if (bias) conv_fill(K, g, Y, n, cc->c_out, bias, g->small);
    for (int64_t t0 = 0; t0 < trows && st == BP_OK; t0 += tchunk) {
      int64_t t1 = t0 + tchunk < trows ? t0 + tchunk : trows;
      int64_t len = (t1 - t0) * g->small[2], l0 = t0 * g->small[2];
      if (!direct) conv_im2col_rows(K, g, X, n, cc->c_in, col, t0, t1, len);
      for (int64_t gi = 0; gi < cc->groups && st == BP_OK; gi++) {
        const void* bp;
        int64_t b_rs, b_cs;
        if (direct) {
          bp = AT(X, n * X->sn + gi * cc->cg * X->sc, cc);
          b_rs = X->sc;
          b_cs = X->sl;
        } else {
          bp = (unsigned char*)col + gi * kg * len * es;
          b_rs = len;
          b_cs = 1;
        }
        st = cpu_gemm(K->dtype, cc->og, len, kg, 1.0, AT(W, gi * cc->og * W->sn, cc), W->sn, W->sl,
                      bp, b_rs, b_cs, bias != NULL,
                      AT(Y, n * Y->sn + gi * cc->og * Y->sc + l0 * Y->sl, cc), Y->sc, Y->sl);
      }
    }
  }
cleanup:
  free(col);
  free(stage);
  return st;
}

/* Y = col2im(W^T @ X) (+ bias) for a transposed convolution, per image. */
static bp_status_t conv_forward_transposed(const conv_call_t* cc, const conv_view_t* X,
                                           const conv_view_t* W, const void* bias,
                                           const conv_view_t* Y) {
  const conv_geom_t* g = &cc->g;
  const conv_kernels_t* K = cc->K;
  int64_t es = ES(cc), rows_g = cc->og * g->kk;
  int64_t bytes = cc->c_out * g->kk * g->small_n * es;
  void* col = malloc((size_t)(bytes > 0 ? bytes : 1));
  if (!col) return conv_oom("the column buffer", bytes);
  bp_status_t st = BP_OK;
  for (int64_t n = 0; n < cc->batch && st == BP_OK; n++) {
    /* col[g] = W[g]^T @ X_n[g]; Y_n = col2im(col) (+ bias) */
    for (int64_t gi = 0; gi < cc->groups && st == BP_OK; gi++)
      st = cpu_gemm(K->dtype, rows_g, g->small_n, cc->cg, 1.0, AT(W, gi * cc->cg * W->sn, cc),
                    W->sl, W->sn, AT(X, n * X->sn + gi * cc->cg * X->sc, cc), X->sc, X->sl, 0,
                    (unsigned char*)col + gi * rows_g * g->small_n * es, g->small_n, 1);
    if (st) break;
    conv_fill(K, g, Y, n, cc->c_out, bias, g->big);
    conv_col2im(K, g, Y, n, cc->c_out, col);
  }
  free(col);
  return st;
}

static bp_status_t conv_forward(const bp_op_call_t* call) {
  const bp_conv_attrs_t* a = call->attrs;
  const bp_tensor_desc_t *in = call->inputs[0], *w = call->inputs[1], *out = call->outputs[0];
  const bp_tensor_desc_t* b = call->num_inputs > 2 ? call->inputs[2] : NULL;
  conv_call_t cc;
  conv_call_make(&cc, a, in, w, out);
  const conv_kernels_t* K = cc.K;
  conv_view_t X = {0}, W = {0}, Y = {0};
  void* bias = NULL;
  bp_status_t st = BP_OK;
  if (bp_desc_numel(out) == 0) return BP_OK;
  if (cpu_conv_dnnl_forward(call, &st)) return st; /* f32 through oneDNN, when built with it */
  /* GEMM operands need a flattened spatial index: Y of a convolution, X of
   * a transposed one. */
  if ((st = conv_view_in(in, K, 1, a->transposed != 0, &X)) || (st = conv_matrix(w, K, 1, &W)) ||
      (st = conv_bias(b, K, &bias)) || (st = conv_view_out(out, K, 1, !a->transposed, &Y)))
    goto cleanup;
  st = a->transposed ? conv_forward_transposed(&cc, &X, &W, bias, &Y)
                     : conv_forward_gemm(&cc, &X, &W, bias, &Y);
  if (st == BP_OK) st = conv_view_out_finish(out, K, &Y);
cleanup:
  conv_view_free(&X);
  conv_view_free(&W);
  conv_view_free(&Y);
  free(bias);
  return st;
}

/* ---- convolution_backward -------------------------------------------------- */
typedef struct conv_bias_sum {
  const conv_view_t* dy;
  const conv_geom_t* g;
  int64_t batch;
  uint32_t dtype;
  double* sums; /* per channel */
} conv_bias_sum_t;

/* sums[o] = sum over n and space of dY[n, o, ...], accumulated in f64. */
static void conv_bias_sum_range(void* ctx, int64_t ob, int64_t oe) {
  const conv_bias_sum_t* j = ctx;
  const conv_view_t* v = j->dy;
  const conv_geom_t* g = j->g;
  int f64 = j->dtype == BP_DTYPE_F64;
  size_t es = f64 ? 8 : 4;
  for (int64_t o = ob; o < oe; o++) {
    double s = 0.0;
    for (int64_t n = 0; n < j->batch; n++)
      for (int64_t i0 = 0; i0 < g->big[0]; i0++)
        for (int64_t i1 = 0; i1 < g->big[1]; i1++) {
          const unsigned char* row =
              v->base + (n * v->sn + o * v->sc + i0 * v->ss[0] + i1 * v->ss[1]) * (int64_t)es;
          for (int64_t i2 = 0; i2 < g->big[2]; i2++) {
            s += f64 ? ((const double*)row)[i2 * v->ss[2]]
                     : (double)((const float*)row)[i2 * v->ss[2]];
          }
        }
    j->sums[o] = s;
  }
}

static bp_status_t conv_backward(const bp_op_call_t* call) {
  const bp_conv_attrs_t* a = call->attrs;
  const bp_tensor_desc_t *dy = call->inputs[0], *in = call->inputs[1], *w = call->inputs[2];
  const bp_tensor_desc_t *dx = call->outputs[0], *dw = call->outputs[1], *db = call->outputs[2];
  int want_dx = (a->output_mask & 1u) != 0, want_dw = (a->output_mask & 2u) != 0,
      want_db = (a->output_mask & 4u) != 0;
  conv_call_t cc;
  conv_call_make(&cc, a, in, w, dy);
  const conv_geom_t* g = &cc.g;
  const conv_kernels_t* K = cc.K;
  conv_view_t DY = {0}, X = {0}, W = {0}, DX = {0}, DW = {0};
  void* col = NULL;
  double* sums = NULL;
  bp_status_t st = BP_OK;
  int tr = a->transposed != 0;
  if (want_db) {
    /* grad_bias in the big/small geometry of dY: dY's spatial positions are
     * `small` for a convolution and `big` for a transposed one. */
    conv_geom_t gb = *g;
    if (!tr) memcpy(gb.big, g->small, sizeof gb.big);
    if ((st = conv_view_in(dy, K, 1, 0, &DY))) goto cleanup;
    if (!(sums = calloc((size_t)(cc.c_out > 0 ? cc.c_out : 1), sizeof(double)))) {
      st = conv_oom("grad_bias", cc.c_out * 8);
      goto cleanup;
    }
    conv_bias_sum_t j = {&DY, &gb, cc.batch, K->dtype, sums};
    cpu_parallel_for(cc.c_out, 1, conv_bias_sum_range, &j);
    bp_tensor_desc_t sd;
    struct bpp_buffer_s sh;
    cpu_desc_host(&sd, &sh, sums, BP_DTYPE_F64, 1, &cc.c_out, NULL);
    if ((st = cpu_cast_copy(db, &sd))) goto cleanup;
    conv_view_free(&DY);
  }
  if (!want_dx && !want_dw) goto cleanup;
  /* dY is a GEMM operand with a flattened index for a convolution; X for a
   * transposed one (grad_weight only). */
  if ((st = conv_view_in(dy, K, 1, !tr, &DY)) || (st = conv_matrix(w, K, 1, &W))) goto cleanup;
  if (want_dw && (st = conv_view_in(in, K, 1, tr, &X))) goto cleanup;
  if (want_dx && (st = conv_view_out(dx, K, 1, tr, &DX))) goto cleanup;
  if (want_dw && (st = conv_matrix(dw, K, 0, &DW))) goto cleanup;
  {
    /* Columns: im2col of X (or of dY when transposed): c_in*kk (c_out*kk) rows. */
    int64_t rows = (tr ? cc.c_out : cc.c_in) * g->kk;
    int64_t bytes = rows * g->small_n * ES(&cc);
    if (!(col = malloc((size_t)(bytes > 0 ? bytes : 1)))) {
      st = conv_oom("the column buffer", bytes);
      goto cleanup;
    }
  }
  int64_t kg = cc.cg * g->kk;     /* non-transposed: rows of col per group */
  int64_t rows_g = cc.og * g->kk; /* transposed: rows of col per group */
  for (int64_t n = 0; n < cc.batch && st == BP_OK; n++) {
    const unsigned char* dyn = AT(&DY, n * DY.sn, &cc);
    if (!tr) {
      if (want_dw) {
        conv_im2col(K, g, &X, n, cc.c_in, col);
        /* dW[g] += dY_n[g] @ col[g]^T */
        for (int64_t gi = 0; gi < cc.groups && st == BP_OK; gi++)
          st = cpu_gemm(K->dtype, cc.og, kg, g->small_n, 1.0, dyn + gi * cc.og * DY.sc * ES(&cc),
                        DY.sc, DY.sl, (unsigned char*)col + gi * kg * g->small_n * ES(&cc), 1,
                        g->small_n, n > 0, AT(&DW, gi * cc.og * DW.sn, &cc), DW.sn, DW.sl);
      }
      if (want_dx && st == BP_OK) {
        /* col[g] = W[g]^T @ dY_n[g]; dX_n = col2im(col) */
        for (int64_t gi = 0; gi < cc.groups && st == BP_OK; gi++)
          st = cpu_gemm(K->dtype, kg, g->small_n, cc.og, 1.0, AT(&W, gi * cc.og * W.sn, &cc), W.sl,
                        W.sn, dyn + gi * cc.og * DY.sc * ES(&cc), DY.sc, DY.sl, 0,
                        (unsigned char*)col + gi * kg * g->small_n * ES(&cc), g->small_n, 1);
        if (st) break;
        conv_fill(K, g, &DX, n, cc.c_in, NULL, g->big);
        conv_col2im(K, g, &DX, n, cc.c_in, col);
      }
    } else {
      conv_im2col(K, g, &DY, n, cc.c_out, col);
      for (int64_t gi = 0; gi < cc.groups && st == BP_OK; gi++) {
        const unsigned char* colg = (unsigned char*)col + gi * rows_g * g->small_n * ES(&cc);
        if (want_dx) /* dX_n[g] = W[g] @ col[g] */
          st = cpu_gemm(K->dtype, cc.cg, g->small_n, rows_g, 1.0, AT(&W, gi * cc.cg * W.sn, &cc),
                        W.sn, W.sl, colg, g->small_n, 1, 0,
                        AT(&DX, n * DX.sn + gi * cc.cg * DX.sc, &cc), DX.sc, DX.sl);
        if (want_dw && st == BP_OK) /* dW[g] += X_n[g] @ col[g]^T */
          st = cpu_gemm(K->dtype, cc.cg, rows_g, g->small_n, 1.0,
                        AT(&X, n * X.sn + gi * cc.cg * X.sc, &cc), X.sc, X.sl, colg, 1, g->small_n,
                        n > 0, AT(&DW, gi * cc.cg * DW.sn, &cc), DW.sn, DW.sl);
      }
    }
  }
  if (st) goto cleanup;
  if (want_dw && cc.batch == 0) { /* no image: grad_weight is zero */
    bp_tensor_desc_t zd;
    struct bpp_buffer_s zh;
    double zero = 0.0;
    int64_t one = 1;
    cpu_desc_host(&zd, &zh, &zero, BP_DTYPE_F64, 0, &one, NULL);
    if ((st = cpu_cast_copy(dw, &zd))) goto cleanup;
  } else if (want_dw && (st = conv_view_out_finish(dw, K, &DW))) {
    goto cleanup;
  }
  if (want_dx) st = conv_view_out_finish(dx, K, &DX);
cleanup:
  conv_view_free(&DY);
  conv_view_free(&X);
  conv_view_free(&W);
  conv_view_free(&DX);
  conv_view_free(&DW);
  free(col);
  free(sums);
  return st;
}

/* ---- col2im -------------------------------------------------------------- */
static bp_status_t conv_col2im_op(const bp_op_call_t* call) {
  const bp_col2im_attrs_t* a = call->attrs;
  const bp_tensor_desc_t *in = call->inputs[0], *out = call->outputs[0];
  int batched = in->rank == 3;
  const conv_kernels_t* K = conv_kernels_for(in->dtype);
  int64_t batch = batched ? in->sizes[0] : 1;
  int64_t channels = out->sizes[batched];
  int64_t small[2], ext[2];
  for (int j = 0; j < 2; j++) {
    ext[j] = a->dilation[j] * (a->kernel[j] - 1) + 1;
    small[j] = (a->output_size[j] + 2 * a->padding[j] - ext[j]) / a->stride[j] + 1;
  }
  conv_geom_t g;
  conv_geom_make(&g, 2, a->output_size, small, a->kernel, a->stride, a->padding, a->dilation);
  conv_view_t C = {0}, Y = {0};
  bp_status_t st = BP_OK;
  if (bp_desc_numel(out) == 0) return BP_OK;
  /* The columns must be dense [C * kk, L] per image. */
  int dense_cols = in->dtype == K->dtype && in->strides[in->rank - 1] == 1 &&
                   in->strides[in->rank - 2] == in->sizes[in->rank - 1];
  if (dense_cols) {
    C.base = cpu_desc_ptr(in);
    C.sn = batched ? in->strides[0] : 0;
  } else {
    bp_tensor_desc_t dense;
    struct bpp_buffer_s holder;
    if ((st = conv_dense(in, K, 1, "the columns", &C.owned, &dense, &holder))) goto cleanup;
    C.base = C.owned;
    C.sn = batched ? dense.strides[0] : 0;
  }
  if ((st = conv_view_out(out, K, batched, 0, &Y))) goto cleanup;
  for (int64_t n = 0; n < batch; n++) {
    conv_fill(K, &g, &Y, n, channels, NULL, g.big);
    conv_col2im(K, &g, &Y, n, channels, C.base + n * C.sn * (int64_t)K->es);
  }
  st = conv_view_out_finish(out, K, &Y);
cleanup:
  conv_view_free(&C);
  conv_view_free(&Y);
  return st;
}

/* ---- family -------------------------------------------------------------- */
static int conv_dtype_ok(uint32_t d) {
  return d == BP_DTYPE_F32 || d == BP_DTYPE_F64 || d == BP_DTYPE_F16 || d == BP_DTYPE_BF16;
}

/* The shapes the core's rule guarantees, checked again (cheaply) so that a
 * direct plugin call with inconsistent descriptors fails cleanly instead of
 * writing out of bounds. */
static bp_status_t conv_check(const bp_op_call_t* call) {
  const char* name = cpu_op_name(call->op_id);
  for (uint32_t k = 0; k < call->num_inputs + call->num_outputs; k++) {
    const bp_tensor_desc_t* d =
        k < call->num_inputs ? call->inputs[k] : call->outputs[k - call->num_inputs];
    if (d->dtype != BP_DTYPE_INVALID && !conv_dtype_ok(d->dtype))
      return cpu_error(BP_UNIMPLEMENTED, "cpu: %s: %s is not supported", name,
                       bp_dtype_name(d->dtype));
  }
  if (call->op_id == BP_OP_col2im) {
    const bp_col2im_attrs_t* a = call->attrs;
    const bp_tensor_desc_t *in = call->inputs[0], *out = call->outputs[0];
    int ok = (in->rank == 2 || in->rank == 3) && out->rank == in->rank + 1;
    int b = in->rank == 3;
    int64_t blocks = 1;
    for (int j = 0; ok && j < 2; j++) {
      ok = a->kernel[j] > 0 && a->stride[j] > 0 && a->dilation[j] > 0 && a->padding[j] >= 0 &&
           out->sizes[b + 1 + j] == a->output_size[j];
      if (ok)
        blocks *=
            (a->output_size[j] + 2 * a->padding[j] - a->dilation[j] * (a->kernel[j] - 1) - 1) /
                a->stride[j] +
            1;
    }
    ok = ok && (!b || out->sizes[0] == in->sizes[0]) && in->sizes[b + 1] == blocks &&
         in->sizes[b] == out->sizes[b] * a->kernel[0] * a->kernel[1];
    if (!ok)
      return cpu_error(BP_INVALID_ARGUMENT, "cpu: col2im: shapes do not match the attributes");
    return BP_OK;
  }
  const bp_conv_attrs_t* a = call->attrs;
  int fwd = call->op_id == BP_OP_convolution;
  const bp_tensor_desc_t *in = call->inputs[fwd ? 0 : 1], *w = call->inputs[fwd ? 1 : 2];
  const bp_tensor_desc_t* y = fwd ? call->outputs[0] : call->inputs[0];
  uint32_t nsp = w->rank - 2;
  int ok = w->rank >= 3 && w->rank <= 5 && in->rank == w->rank && y->rank == w->rank &&
           a->groups > 0 && in->sizes[0] == y->sizes[0];
  if (ok && !a->transposed)
    ok = in->sizes[1] == w->sizes[1] * a->groups && y->sizes[1] == w->sizes[0] &&
         w->sizes[0] % a->groups == 0;
  else if (ok)
    ok = in->sizes[1] == w->sizes[0] && y->sizes[1] == w->sizes[1] * a->groups &&
         w->sizes[0] % a->groups == 0;
  for (uint32_t i = 0; ok && i < nsp; i++) {
    int64_t ext = a->dilation[i] * (w->sizes[2 + i] - 1) + 1, x = in->sizes[2 + i];
    ok = a->stride[i] > 0 && a->dilation[i] > 0 && a->padding[i] >= 0 && w->sizes[2 + i] > 0;
    if (ok && !a->transposed)
      ok = x + 2 * a->padding[i] >= ext &&
           y->sizes[2 + i] == (x + 2 * a->padding[i] - ext) / a->stride[i] + 1;
    else if (ok)
      ok = y->sizes[2 + i] ==
           (x - 1) * a->stride[i] - 2 * a->padding[i] + ext + a->output_padding[i];
  }
  if (ok && !fwd) { /* requested gradients have the operands' shapes */
    const bp_tensor_desc_t* const* o = call->outputs;
    ok = (!(a->output_mask & 1u) || o[0]->rank == in->rank) &&
         (!(a->output_mask & 2u) || o[1]->rank == w->rank) &&
         (!(a->output_mask & 4u) || (o[2]->rank == 1 && o[2]->sizes[0] == y->sizes[1]));
    for (uint32_t i = 0; ok && i < in->rank; i++)
      ok = (!(a->output_mask & 1u) || o[0]->sizes[i] == in->sizes[i]) &&
           (!(a->output_mask & 2u) || o[1]->sizes[i] == w->sizes[i]);
  }
  if (!ok)
    return cpu_error(BP_INVALID_ARGUMENT, "cpu: %s: shapes do not match the attributes", name);
  return BP_OK;
}

static bp_status_t exec_conv(const bp_op_call_t* call) {
  bp_status_t st = conv_check(call);
  if (st) return st;
  switch (call->op_id) {
    case BP_OP_convolution:
      return conv_forward(call);
    case BP_OP_convolution_backward:
      return conv_backward(call);
    case BP_OP_col2im:
      return conv_col2im_op(call);
    default:
      return cpu_error(BP_UNIMPLEMENTED, "cpu: op %s is not in the conv family",
                       cpu_op_name(call->op_id));
  }
}

static int supported_conv(const bp_op_call_t* call, char* msg, size_t cap) {
  for (uint32_t k = 0; k < call->num_inputs + call->num_outputs; k++) {
    const bp_tensor_desc_t* d =
        k < call->num_inputs ? call->inputs[k] : call->outputs[k - call->num_inputs];
    if (d->dtype == BP_DTYPE_INVALID) continue;
    if (!conv_dtype_ok(d->dtype)) {
      snprintf(msg, cap, "%s operands are not supported (f32, f64, f16, bf16)",
               bp_dtype_name(d->dtype));
      return BP_SUPPORT_DTYPE;
    }
    /* GEMM dimensions (channels, kernel volume, positions per image) are
     * bounded by one image of an operand, or the whole weight; BLAS takes
     * 32-bit sizes. */
    int is_weight =
        call->op_id != BP_OP_col2im && k == (call->op_id == BP_OP_convolution ? 1u : 2u);
    int64_t n = bp_desc_numel(d), lead = d->rank > 0 && d->sizes[0] > 0 ? d->sizes[0] : 1;
    if (n / lead > INT32_MAX || (is_weight && n > INT32_MAX)) {
      snprintf(msg, cap, "operand %u has over 2^31 elements per image (a GEMM dimension limit)", k);
      return BP_SUPPORT_SIZE;
    }
  }
  return BP_SUPPORT_OK;
}

const cpu_family_t cpu_family_conv = {
    "conv", CPU_FAMILY_OPS(BP_OP_convolution, BP_OP_convolution_backward, BP_OP_col2im), exec_conv,
    supported_conv, 0};
