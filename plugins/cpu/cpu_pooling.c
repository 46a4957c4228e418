/* backplane CPU plugin: the pooling kernel family.
 *
 * avg_pool (1-3 d), avg_pool2d_backward, adaptive_avg_pool (1-3 d),
 * adaptive_avg_pool2d_backward, max_pool_with_indices (2-3 d),
 * max_pool2d_with_indices_backward here; grid_sampler_2d and the 2-d
 * upsampling ops in cpu_pooling_sample.c.
 *
 * Every op stages its operands as dense arrays of a kernel type (f32 for
 * f32/f16/bf16, f64, i64 for integers), runs one generic loop nest per
 * kernel type over planes (batch x channels) on the pool, and converts the
 * result into the output descriptor. Spatial shapes are viewed as [D, H, W]
 * with missing dims of size 1, so one loop nest serves 1-, 2- and 3-d.
 * Equivalent to PyTorch's CPU kernels (cpu_avg_pool, cpu_max_pool,
 * cpu_adaptive_avg_pool and their backward) for channels-first tensors.
 */
#include <math.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cpu_pooling.h"

/* ---- staging ------------------------------------------------------------------- */
/* d's elements are dense row-major values of kernel type t, suitably aligned. */
static int dense_in(const bp_tensor_desc_t* d, pk_type_t t) {
  if (d->dtype != pk_dtype(t)) return 0;
  int64_t s = 1;
  for (uint32_t i = d->rank; i-- > 0;) {
    if (d->sizes[i] != 1 && d->strides[i] != s) return 0;
    s *= d->sizes[i];
  }
  return (uintptr_t)cpu_desc_ptr(d) % bp_dtype_size(d->dtype) == 0;
}

static bp_status_t stage_alloc(const bp_tensor_desc_t* d, int zero, void** out) {
  *out = NULL;
  int64_t n = bp_desc_numel(d);
  if (n == 0) return BP_OK;
  size_t bytes;
  if (n < 0 || __builtin_mul_overflow((size_t)n, (size_t)8, &bytes)) {
    return cpu_error(BP_RESOURCE_EXHAUSTED, "cpu: pooling: %lld elements do not fit in memory",
                     (long long)n);
  }
  *out = zero ? calloc((size_t)n, 8) : malloc(bytes);
  if (!*out) {
    return cpu_error(BP_RESOURCE_EXHAUSTED, "cpu: pooling: out of memory for %zu staging bytes", bytes);
  }
  return BP_OK;
}

bp_status_t cpu_pool_input(const bp_tensor_desc_t* d, pk_type_t t, const void** data, void** owned) {
  *data = NULL;
  *owned = NULL;
  if (bp_desc_numel(d) == 0) return BP_OK;
  if (dense_in(d, t)) {
    *data = cpu_desc_ptr(d);
    return BP_OK;
  }
  bp_status_t st = stage_alloc(d, 0, owned);
  if (st != BP_OK) return st;
  bp_tensor_desc_t host;
  struct bpp_buffer_s holder;
  cpu_desc_host(&host, &holder, *owned, pk_dtype(t), d->rank, d->sizes, NULL);
  st = cpu_cast_copy(&host, d);
  if (st != BP_OK) {
    free(*owned);
    *owned = NULL;
    return st;
  }
  *data = *owned;
  return BP_OK;
}

bp_status_t cpu_pool_output(const bp_tensor_desc_t* d, pk_type_t t, int zero, void** data,
                            void** owned) {
  *data = NULL;
  *owned = NULL;
  int64_t n = bp_desc_numel(d);
  if (n == 0) return BP_OK;
  if (dense_in(d, t)) {
    *data = cpu_desc_ptr(d);
    if (zero) memset(*data, 0, (size_t)n * bp_dtype_size(d->dtype));
    return BP_OK;
  }
  bp_status_t st = stage_alloc(d, zero, owned);
  *data = *owned;
  return st;
}

bp_status_t cpu_pool_finish(const bp_tensor_desc_t* d, pk_type_t t, const void* owned) {
  if (!owned) return BP_OK;
  bp_tensor_desc_t host;
  struct bpp_buffer_s holder;
  cpu_desc_host(&host, &holder, (void*)owned, pk_dtype(t), d->rank, d->sizes, NULL);
  return cpu_cast_copy(d, &host);
}

bp_status_t cpu_pool_expect(const bp_tensor_desc_t* d, uint32_t rank, const int64_t* sizes,
                            const char* op, const char* what) {
  int ok = d->rank == rank;
  for (uint32_t i = 0; ok && i < rank; i++) ok = d->sizes[i] == sizes[i];
  if (ok) return BP_OK;
  return cpu_error(BP_INVALID_ARGUMENT, "cpu: %s: %s has the wrong shape (rank %u)", op, what, d->rank);
}

/* ---- geometry ----------------------------------------------------------------- */
typedef struct pgeo {
  int64_t planes;
  int64_t in[3], out[3];
  int64_t k[3], st[3], pad[3], dil[3];
  int64_t in_plane, out_plane;
} pgeo_t;

static int64_t floor_div(int64_t a, int64_t b) {
  int64_t q = a / b;
  return (a % b != 0 && a < 0) ? q - 1 : q;
}

/* Planes and [D, H, W] of x (rank s+1 or s+2). */
static bp_status_t split(const bp_tensor_desc_t* x, uint32_t s, const char* op, pgeo_t* g) {
  if (s < 1 || s > 3 || (x->rank != s + 1 && x->rank != s + 2)) {
    return cpu_error(BP_INVALID_ARGUMENT, "cpu: %s: rank %u input for %u spatial dims", op, x->rank, s);
  }
  g->planes = 1;
  for (uint32_t d = 0; d + s < x->rank; d++) g->planes *= x->sizes[d];
  for (int k = 0; k < 3; k++) {
    g->in[k] = g->out[k] = g->k[k] = g->st[k] = g->dil[k] = 1;
    g->pad[k] = 0;
  }
  for (uint32_t k = 0; k < s; k++) {
    g->in[3 - s + k] = x->sizes[x->rank - s + k];
    if (g->in[3 - s + k] <= 0) return cpu_error(BP_INVALID_ARGUMENT, "cpu: %s: empty spatial dim", op);
  }
  return BP_OK;
}

static void finish(pgeo_t* g) {
  g->in_plane = g->in[0] * g->in[1] * g->in[2];
  g->out_plane = g->out[0] * g->out[1] * g->out[2];
}

/* Output sizes of a fixed-window pooling (PyTorch's pooling_output_shape). */
static bp_status_t pool_geo(const bp_pool_attrs_t* a, const bp_tensor_desc_t* x, int is_max,
                            const char* op, pgeo_t* g) {
  uint32_t s = a->spatial_dims;
  bp_status_t st = split(x, s, op, g);
  if (st != BP_OK) return st;
  for (uint32_t k = 0; k < s; k++) {
    int j = 3 - (int)s + (int)k;
    g->k[j] = a->kernel[k];
    g->st[j] = a->stride[k]; /* resolved by the core (has_stride is always 1 here) */
    g->pad[j] = a->padding[k];
    g->dil[j] = a->dilation[k];
    if (g->k[j] <= 0 || g->k[j] > INT32_MAX || g->st[j] <= 0 || g->st[j] > INT32_MAX ||
        g->dil[j] <= 0 || g->dil[j] > INT32_MAX || (!is_max && g->dil[j] != 1) || g->pad[j] < 0 ||
        g->pad[j] > g->k[j] / 2) {
      return cpu_error(BP_INVALID_ARGUMENT, "cpu: %s: invalid kernel, stride, padding or dilation", op);
    }
    int64_t o = floor_div(g->in[j] + 2 * g->pad[j] - g->dil[j] * (g->k[j] - 1) - 1 +
                              (a->ceil_mode ? g->st[j] - 1 : 0),
                          g->st[j]) + 1;
    if (a->ceil_mode && (o - 1) * g->st[j] >= g->in[j] + g->pad[j]) o--;
    if (o < 1) return cpu_error(BP_INVALID_ARGUMENT, "cpu: %s: output size too small", op);
    g->out[j] = o;
  }
  finish(g);
  return BP_OK;
}

/* Shape of x with its last s dims replaced by g's output sizes. */
static void pooled_shape(const bp_tensor_desc_t* x, uint32_t s, const pgeo_t* g, int64_t* sizes) {
  memcpy(sizes, x->sizes, sizeof(int64_t) * x->rank);
  for (uint32_t k = 0; k < s; k++) sizes[x->rank - s + k] = g->out[3 - s + k];
}

/* ---- kernels -------------------------------------------------------------------- */
typedef struct pool_job {
  const pgeo_t* g;
  const void* in;      /* forward: input; backward: grad_output */
  const int64_t* ind;  /* max backward: indices */
  void* out;           /* forward: output; backward: grad_input (zeroed) */
  int64_t* out_ind;    /* max forward: indices */
  int64_t divisor;     /* avg: divisor_override (0 = none) */
  int count_include_pad;
  atomic_int bad_index; /* max backward: set when an index is outside its plane */
} pool_job_t;

/* Clipped window of output o along dim j, and its size counting padding. */
static inline void avg_win(const pgeo_t* g, int j, int64_t o, int64_t* lo, int64_t* hi, int64_t* padded) {
  int64_t s = o * g->st[j] - g->pad[j];
  int64_t e = s + g->k[j];
  if (e > g->in[j] + g->pad[j]) e = g->in[j] + g->pad[j];
  *padded = e - s;
  *lo = s < 0 ? 0 : s;
  *hi = e > g->in[j] ? g->in[j] : e;
}

/* Divisor of an avg_pool window. */
static inline int64_t avg_div(const pool_job_t* j, const int64_t* lo, const int64_t* hi, const int64_t* pd) {
  if (j->divisor) return j->divisor;
  if (j->count_include_pad) return pd[0] * pd[1] * pd[2];
  return (hi[0] - lo[0]) * (hi[1] - lo[1]) * (hi[2] - lo[2]);
}

/* Taps of max_pool output o along dim j: start, start + dilation, ... below
 * hi, the first one moved past the left padding. */
static inline void max_win(const pgeo_t* g, int j, int64_t o, int64_t* lo, int64_t* hi) {
  int64_t s = o * g->st[j] - g->pad[j];
  int64_t e = s + (g->k[j] - 1) * g->dil[j] + 1;
  while (s < 0) s += g->dil[j];
  *lo = s;
  *hi = e > g->in[j] ? g->in[j] : e;
}

/* x / d where d may be -1 (integer division would trap on INT64_MIN; the
 * plugin wraps signed overflow). */
/* The input window [lo, hi) per spatial dim (d, h, w) of adaptive pooling's
 * output position q (a flat index into the output plane), as PyTorch:
 * floor(o * in / out) to ceil((o + 1) * in / out). Returns its element count. */
static int64_t adaptive_window(const pgeo_t* g, int64_t q, int64_t lo[3], int64_t hi[3]) {
  const int64_t o[3] = {q / (g->out[1] * g->out[2]), (q / g->out[2]) % g->out[1], q % g->out[2]};
  int64_t cnt = 1;
  for (int k = 0; k < 3; k++) {
    lo[k] = o[k] * g->in[k] / g->out[k];
    hi[k] = ((o[k] + 1) * g->in[k] + g->out[k] - 1) / g->out[k];
    cnt *= hi[k] - lo[k];
  }
  return cnt;
}

#define PK_DIV(T, x, d) ((d) == -1 ? (T)(-(x)) : (T)((x) / (T)(d)))

/* Instantiated per kernel type T (f32: float, f64: double, i64: int64_t);
 * LOWEST is max_pool's starting value, ISNAN the NaN test (none for i64). */
#define PK_NO_NAN(v) 0
#define POOL_KERNELS(T, SUF, LOWEST, ISNAN)                                                          \
  static void avg_fwd_##SUF(void* ctx, int64_t p0, int64_t p1) {                              \
    const pool_job_t* j = ctx;                                                                \
    const pgeo_t* g = j->g;                                                                   \
    for (int64_t p = p0; p < p1; p++) {                                                       \
      const T* in = (const T*)j->in + p * g->in_plane;                                        \
      T* out = (T*)j->out + p * g->out_plane;                                                 \
      for (int64_t od = 0; od < g->out[0]; od++)                                              \
        for (int64_t oh = 0; oh < g->out[1]; oh++)                                            \
          for (int64_t ow = 0; ow < g->out[2]; ow++) {                                        \
            int64_t lo[3], hi[3], pd[3];                                                      \
            avg_win(g, 0, od, &lo[0], &hi[0], &pd[0]);                                        \
            avg_win(g, 1, oh, &lo[1], &hi[1], &pd[1]);                                        \
            avg_win(g, 2, ow, &lo[2], &hi[2], &pd[2]);                                        \
            T* o = &out[(od * g->out[1] + oh) * g->out[2] + ow];                              \
            if (lo[0] >= hi[0] || lo[1] >= hi[1] || lo[2] >= hi[2]) {                         \
              *o = 0;                                                                         \
              continue;                                                                       \
            }                                                                                 \
            T sum = 0;                                                                        \
            for (int64_t id = lo[0]; id < hi[0]; id++)                                        \
              for (int64_t ih = lo[1]; ih < hi[1]; ih++) {                                    \
                const T* row = in + (id * g->in[1] + ih) * g->in[2];                          \
                for (int64_t iw = lo[2]; iw < hi[2]; iw++) sum += row[iw];                    \
              }                                                                               \
            int64_t dv = avg_div(j, lo, hi, pd);                                              \
            *o = PK_DIV(T, sum, dv);                                                          \
          }                                                                                   \
    }                                                                                         \
  }                                                                                           \
  static void avg_bwd_##SUF(void* ctx, int64_t p0, int64_t p1) {                              \
    const pool_job_t* j = ctx;                                                                \
    const pgeo_t* g = j->g;                                                                   \
    for (int64_t p = p0; p < p1; p++) {                                                       \
      const T* go = (const T*)j->in + p * g->out_plane;                                       \
      T* gi = (T*)j->out + p * g->in_plane;                                                   \
      for (int64_t od = 0; od < g->out[0]; od++)                                              \
        for (int64_t oh = 0; oh < g->out[1]; oh++)                                            \
          for (int64_t ow = 0; ow < g->out[2]; ow++) {                                        \
            int64_t lo[3], hi[3], pd[3];                                                      \
            avg_win(g, 0, od, &lo[0], &hi[0], &pd[0]);                                        \
            avg_win(g, 1, oh, &lo[1], &hi[1], &pd[1]);                                        \
            avg_win(g, 2, ow, &lo[2], &hi[2], &pd[2]);                                        \
            if (lo[0] >= hi[0] || lo[1] >= hi[1] || lo[2] >= hi[2]) continue;                \
            int64_t dv = avg_div(j, lo, hi, pd);                                              \
            T delta = PK_DIV(T, go[(od * g->out[1] + oh) * g->out[2] + ow], dv);              \
            for (int64_t id = lo[0]; id < hi[0]; id++)                                        \
              for (int64_t ih = lo[1]; ih < hi[1]; ih++) {                                    \
                T* row = gi + (id * g->in[1] + ih) * g->in[2];                                \
                for (int64_t iw = lo[2]; iw < hi[2]; iw++) row[iw] += delta;                  \
              }                                                                               \
          }                                                                                   \
    }                                                                                         \
  }                                                                                           \
  static void max_fwd_##SUF(void* ctx, int64_t p0, int64_t p1) {                              \
    const pool_job_t* j = ctx;                                                                \
    const pgeo_t* g = j->g;                                                                   \
    for (int64_t p = p0; p < p1; p++) {                                                       \
      const T* in = (const T*)j->in + p * g->in_plane;                                        \
      T* out = (T*)j->out + p * g->out_plane;                                                 \
      int64_t* oi = j->out_ind + p * g->out_plane;                                            \
      for (int64_t od = 0; od < g->out[0]; od++) {                                            \
        int64_t d0, d1, h0, h1, w0, w1;                                                       \
        max_win(g, 0, od, &d0, &d1);                                                          \
        for (int64_t oh = 0; oh < g->out[1]; oh++) {                                          \
          max_win(g, 1, oh, &h0, &h1);                                                        \
          for (int64_t ow = 0; ow < g->out[2]; ow++, out++, oi++) {                           \
            max_win(g, 2, ow, &w0, &w1);                                                      \
            /* PyTorch's scan: anything greater, and every NaN, replaces. */                  \
            int64_t best = (d0 * g->in[1] + h0) * g->in[2] + w0;                              \
            T m = LOWEST;                                                                     \
            for (int64_t id = d0; id < d1; id += g->dil[0])                                   \
              for (int64_t ih = h0; ih < h1; ih += g->dil[1]) {                               \
                int64_t rowi = (id * g->in[1] + ih) * g->in[2];                               \
                for (int64_t iw = w0; iw < w1; iw += g->dil[2]) {                             \
                  T v = in[rowi + iw];                                                        \
                  if (v > m || ISNAN(v)) {                                                    \
                    m = v;                                                                    \
                    best = rowi + iw;                                                         \
                  }                                                                           \
                }                                                                             \
              }                                                                               \
            *out = m;                                                                         \
            *oi = best;                                                                       \
          }                                                                                   \
        }                                                                                     \
      }                                                                                       \
    }                                                                                         \
  }

POOL_KERNELS(float, F32, -INFINITY, isnan)
POOL_KERNELS(double, F64, -INFINITY, isnan)
POOL_KERNELS(int64_t, I64, INT64_MIN, PK_NO_NAN)

#define POOL_FLOAT_KERNELS(T, SUF)                                                            \
  static void max_bwd_##SUF(void* ctx, int64_t p0, int64_t p1) {                              \
    pool_job_t* j = ctx;                                                                      \
    const pgeo_t* g = j->g;                                                                   \
    for (int64_t p = p0; p < p1; p++) {                                                       \
      const T* go = (const T*)j->in + p * g->out_plane;                                       \
      const int64_t* ind = j->ind + p * g->out_plane;                                         \
      T* gi = (T*)j->out + p * g->in_plane;                                                   \
      for (int64_t q = 0; q < g->out_plane; q++) {                                            \
        int64_t idx = ind[q];                                                                 \
        if (idx == -1) continue; /* as PyTorch */                                             \
        if (idx < 0 || idx >= g->in_plane) {                                                  \
          atomic_store_explicit(&j->bad_index, 1, memory_order_relaxed);                      \
          continue;                                                                           \
        }                                                                                     \
        gi[idx] += go[q];                                                                     \
      }                                                                                       \
    }                                                                                         \
  }                                                                                           \
  static void ad_fwd_##SUF(void* ctx, int64_t p0, int64_t p1) {                               \
    const pool_job_t* j = ctx;                                                                \
    const pgeo_t* g = j->g;                                                                   \
    for (int64_t p = p0; p < p1; p++) {                                                       \
      const T* in = (const T*)j->in + p * g->in_plane;                                        \
      T* out = (T*)j->out + p * g->out_plane;                                                 \
      for (int64_t q = 0; q < g->out_plane; q++) {                                            \
        int64_t lo[3], hi[3];                                                                 \
        const int64_t cnt = adaptive_window(g, q, lo, hi);                                    \
        T sum = 0;                                                                            \
        for (int64_t id = lo[0]; id < hi[0]; id++)                                            \
          for (int64_t ih = lo[1]; ih < hi[1]; ih++) {                                        \
            const T* row = in + (id * g->in[1] + ih) * g->in[2];                              \
            for (int64_t iw = lo[2]; iw < hi[2]; iw++) sum += row[iw];                        \
          }                                                                                   \
        out[q] = sum / (T)cnt;                                                                \
      }                                                                                       \
    }                                                                                         \
  }                                                                                           \
  static void ad_bwd_##SUF(void* ctx, int64_t p0, int64_t p1) {                               \
    const pool_job_t* j = ctx;                                                                \
    const pgeo_t* g = j->g;                                                                   \
    for (int64_t p = p0; p < p1; p++) {                                                       \
      const T* go = (const T*)j->in + p * g->out_plane;                                       \
      T* gi = (T*)j->out + p * g->in_plane;                                                   \
      for (int64_t q = 0; q < g->out_plane; q++) {                                            \
        int64_t lo[3], hi[3];                                                                 \
        const int64_t cnt = adaptive_window(g, q, lo, hi);                                    \
        T delta = go[q] / (T)cnt;                                                             \
        for (int64_t id = lo[0]; id < hi[0]; id++)                                            \
          for (int64_t ih = lo[1]; ih < hi[1]; ih++) {                                        \
            T* row = gi + (id * g->in[1] + ih) * g->in[2];                                    \
            for (int64_t iw = lo[2]; iw < hi[2]; iw++) row[iw] += delta;                      \
          }                                                                                   \
      }                                                                                       \
    }                                                                                         \
  }

POOL_FLOAT_KERNELS(float, F32)
POOL_FLOAT_KERNELS(double, F64)

static const cpu_range_fn k_avg_fwd[3] = {avg_fwd_F32, avg_fwd_F64, avg_fwd_I64};
static const cpu_range_fn k_avg_bwd[3] = {avg_bwd_F32, avg_bwd_F64, avg_bwd_I64};
static const cpu_range_fn k_max_fwd[3] = {max_fwd_F32, max_fwd_F64, max_fwd_I64};
static const cpu_range_fn k_max_bwd[2] = {max_bwd_F32, max_bwd_F64};
static const cpu_range_fn k_ad_fwd[2] = {ad_fwd_F32, ad_fwd_F64};
static const cpu_range_fn k_ad_bwd[2] = {ad_bwd_F32, ad_bwd_F64};

/* Planes per task: about 16k window elements each. */
static int64_t plane_grain(const pgeo_t* g) {
  int64_t work = (g->in_plane > g->out_plane ? g->in_plane : g->out_plane) + 1;
  int64_t grain = 16384 / work;
  return grain < 1 ? 1 : grain;
}

/* ---- executors ------------------------------------------------------------------ */
static bp_status_t exec_pool(const bp_op_call_t* call) {
  uint32_t op = call->op_id;
  const char* name = cpu_op_name(op);
  const bp_pool_attrs_t* a = call->attrs;
  int is_max = op == BP_OP_max_pool_with_indices || op == BP_OP_max_pool2d_with_indices_backward;
  int backward = op == BP_OP_avg_pool2d_backward || op == BP_OP_max_pool2d_with_indices_backward;
  const bp_tensor_desc_t* x = call->inputs[backward ? 1 : 0];
  const bp_tensor_desc_t* y = call->outputs[0];
  /* forward: src = self, aux = indices output; backward: src = grad_output,
   * aux = indices input */
  const bp_tensor_desc_t* src = backward ? call->inputs[0] : x;
  const bp_tensor_desc_t* aux = is_max ? (backward ? call->inputs[2] : call->outputs[1]) : NULL;
  void *in_owned = NULL, *out_owned = NULL, *aux_owned = NULL, *out = NULL, *auxp = NULL;
  const void* in = NULL;
  pgeo_t g;
  pk_type_t t = pk_of(x->dtype);
  int64_t osz[BP_MAX_RANK];
  bp_status_t st = pool_geo(a, x, is_max, name, &g);
  if (st != BP_OK) return st;
  if (backward && a->spatial_dims != 2) return cpu_error(BP_INVALID_ARGUMENT, "cpu: %s: 2-d only", name);
  if (backward && is_max && t == PK_I64) {
    return cpu_error(BP_INVALID_ARGUMENT, "cpu: %s: floating dtypes only", name);
  }
  pooled_shape(x, a->spatial_dims, &g, osz);
  st = cpu_pool_expect(backward ? src : y, x->rank, osz, name, backward ? "grad_output" : "output");
  if (st == BP_OK && backward) st = cpu_pool_expect(y, x->rank, x->sizes, name, "grad_input");
  if (st == BP_OK && aux) st = cpu_pool_expect(aux, x->rank, osz, name, "indices");
  if (st == BP_OK && aux && aux->dtype != BP_DTYPE_I64) {
    st = cpu_error(BP_INVALID_ARGUMENT, "cpu: %s: indices must be i64", name);
  }
  if (st != BP_OK || bp_desc_numel(y) == 0) return st;
  pool_job_t j = {&g,    NULL, NULL, NULL, NULL, a->has_divisor_override ? a->divisor_override : 0,
                  a->count_include_pad != 0, 0};
  atomic_init(&j.bad_index, 0);
  st = cpu_pool_input(src, t, &in, &in_owned);
  if (st == BP_OK) st = cpu_pool_output(y, t, backward, &out, &out_owned);
  if (st == BP_OK && aux && backward) st = cpu_pool_input(aux, PK_I64, (const void**)&auxp, &aux_owned);
  if (st == BP_OK && aux && !backward) st = cpu_pool_output(aux, PK_I64, 0, &auxp, &aux_owned);
  if (st != BP_OK) goto cleanup;
  j.in = in;
  j.out = out;
  if (backward) j.ind = auxp;
  else j.out_ind = auxp;
  cpu_range_fn fn = backward ? (is_max ? k_max_bwd[t] : k_avg_bwd[t]) : (is_max ? k_max_fwd[t] : k_avg_fwd[t]);
  cpu_parallel_for(g.planes, plane_grain(&g), fn, &j);
  if (atomic_load(&j.bad_index)) {
    st = cpu_error(BP_OUT_OF_RANGE, "cpu: %s: an index lies outside its input plane of %lld elements",
                   name, (long long)g.in_plane);
    goto cleanup;
  }
  st = cpu_pool_finish(y, t, out_owned);
  if (st == BP_OK && aux && !backward) st = cpu_pool_finish(aux, PK_I64, aux_owned);
cleanup:
  free(in_owned);
  free(out_owned);
  free(aux_owned);
  return st;
}

static bp_status_t exec_adaptive(const bp_op_call_t* call) {
  uint32_t op = call->op_id;
  const char* name = cpu_op_name(op);
  int backward = op == BP_OP_adaptive_avg_pool2d_backward;
  const bp_tensor_desc_t* x = call->inputs[backward ? 1 : 0];
  const bp_tensor_desc_t* y = call->outputs[0];
  uint32_t s = backward ? 2 : ((const bp_adaptive_pool_attrs_t*)call->attrs)->spatial_dims;
  void *in_owned = NULL, *out_owned = NULL, *out = NULL;
  const void* in = NULL;
  pgeo_t g;
  pk_type_t t = pk_of(x->dtype);
  bp_status_t st = split(x, s, name, &g);
  if (st != BP_OK) return st;
  if (t == PK_I64) return cpu_error(BP_INVALID_ARGUMENT, "cpu: %s: floating dtypes only", name);
  int64_t osz[BP_MAX_RANK];
  memcpy(osz, x->sizes, sizeof(int64_t) * x->rank);
  const bp_tensor_desc_t* src = x;
  if (backward) {
    const bp_tensor_desc_t* go = call->inputs[0];
    if (go->rank != x->rank) return cpu_error(BP_INVALID_ARGUMENT, "cpu: %s: grad_output rank", name);
    for (uint32_t k = 0; k < 2; k++) osz[x->rank - 2 + k] = go->sizes[x->rank - 2 + k];
    st = cpu_pool_expect(go, x->rank, osz, name, "grad_output");
    if (st == BP_OK) st = cpu_pool_expect(y, x->rank, x->sizes, name, "grad_input");
    src = go;
  } else {
    const bp_adaptive_pool_attrs_t* a = call->attrs;
    for (uint32_t k = 0; k < s; k++) osz[x->rank - s + k] = a->output_size[k];
    st = cpu_pool_expect(y, x->rank, osz, name, "output");
  }
  if (st != BP_OK) return st;
  for (uint32_t k = 0; k < s; k++) {
    g.out[3 - s + k] = osz[x->rank - s + k];
    if (g.out[3 - s + k] < 0 || (backward && g.out[3 - s + k] == 0)) {
      return cpu_error(BP_INVALID_ARGUMENT, "cpu: %s: bad output size", name);
    }
  }
  finish(&g);
  if (bp_desc_numel(y) == 0) return BP_OK;
  st = cpu_pool_input(src, t, &in, &in_owned);
  if (st == BP_OK) st = cpu_pool_output(y, t, backward, &out, &out_owned);
  if (st != BP_OK) goto cleanup;
  pool_job_t j = {&g, in, NULL, out, NULL, 0, 0, 0};
  cpu_parallel_for(g.planes, plane_grain(&g), backward ? k_ad_bwd[t] : k_ad_fwd[t], &j);
  st = cpu_pool_finish(y, t, out_owned);
cleanup:
  free(in_owned);
  free(out_owned);
  return st;
}

static bp_status_t exec_pooling(const bp_op_call_t* call) {
  switch (call->op_id) {
    case BP_OP_adaptive_avg_pool:
    case BP_OP_adaptive_avg_pool2d_backward: return exec_adaptive(call);
    case BP_OP_grid_sampler_2d: return cpu_exec_grid_sampler(call);
    case BP_OP_upsample_bilinear2d:
    case BP_OP_upsample_nearest2d: return cpu_exec_upsample(call);
    default: return exec_pool(call);
  }
}

/* ---- support -------------------------------------------------------------------- */
static int supported_pooling(const bp_op_call_t* call, char* msg, size_t cap) {
  uint32_t op = call->op_id;
  /* the tensor whose dtype decides: self for the backward ops, else input 0 */
  uint32_t xi = (op == BP_OP_avg_pool2d_backward || op == BP_OP_adaptive_avg_pool2d_backward ||
                 op == BP_OP_max_pool2d_with_indices_backward)
                    ? 1
                    : 0;
  if (call->num_inputs <= xi) {
    snprintf(msg, cap, "missing operands");
    return BP_SUPPORT_OP;
  }
  uint32_t d = call->inputs[xi]->dtype;
  int fl = bp_dtype_is_float(d);
  int ok;
  switch (op) {
    case BP_OP_avg_pool:
    case BP_OP_avg_pool2d_backward: ok = fl || d == BP_DTYPE_I64; break;
    case BP_OP_max_pool_with_indices: ok = fl || bp_dtype_is_int(d); break;
    case BP_OP_upsample_nearest2d: ok = fl || d == BP_DTYPE_U8; break;
    default: ok = fl; break;
  }
  if (!ok) {
    snprintf(msg, cap, "%s is not supported (PyTorch CPU does not take it either)", bp_dtype_name(d));
    return BP_SUPPORT_DTYPE;
  }
  for (uint32_t i = 0; i < call->num_inputs; i++) {
    uint32_t di = call->inputs[i]->dtype;
    int is_index = op == BP_OP_max_pool2d_with_indices_backward && i == 2;
    if (di != (is_index ? BP_DTYPE_I64 : d)) {
      snprintf(msg, cap, "operand %u has dtype %s; expected %s", i, bp_dtype_name(di),
               bp_dtype_name(is_index ? BP_DTYPE_I64 : d));
      return BP_SUPPORT_DTYPE;
    }
  }
  if (call->outputs[0]->dtype != d) {
    snprintf(msg, cap, "output dtype %s differs from the input's %s",
             bp_dtype_name(call->outputs[0]->dtype), bp_dtype_name(d));
    return BP_SUPPORT_DTYPE;
  }
  return BP_SUPPORT_OK;
}

const cpu_family_t cpu_family_pooling = {
    "pooling",
    CPU_FAMILY_OPS(BP_OP_avg_pool, BP_OP_avg_pool2d_backward, BP_OP_adaptive_avg_pool,
                   BP_OP_adaptive_avg_pool2d_backward, BP_OP_max_pool_with_indices,
                   BP_OP_max_pool2d_with_indices_backward, BP_OP_grid_sampler_2d,
                   BP_OP_upsample_bilinear2d, BP_OP_upsample_nearest2d),
    exec_pooling,
    supported_pooling,
    0};
