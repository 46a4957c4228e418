/* backplane CPU plugin: grid_sampler_2d, upsample_bilinear2d and
 * upsample_nearest2d (part of the pooling family).
 *
 * Coordinates follow PyTorch's CPU formulas step by step in the kernel type
 * (f32 for f16/bf16/f32, f64 for f64): grid_sampler_unnormalize,
 * compute_coordinates (border clip, reflection), area_pixel_compute_scale /
 * _source_index, guard_index_and_lambda and the channels-first nearest index
 * (floorf of scale * dst). No contraction into fused multiply-adds, so that
 * nearest neighbours match the reference bit for bit. Values interpolate in
 * the kernel type. Equivalent to PyTorch's grid_sampler_2d_cpu and
 * upsample_*2d_kernel_impl for channels-first tensors.
 */
#if defined(__clang__)
#pragma STDC FP_CONTRACT OFF
#elif defined(__GNUC__)
#pragma GCC optimize("fp-contract=off")
#endif

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cpu_pooling.h"

/* Coordinates beyond this are outside any image (and safe to convert). */
#define PK_COORD_LIMIT 0x1p62

typedef struct sample_job {
  const void* in;   /* [N, C, H, W] dense */
  const void* grid; /* [N, Ho, Wo, 2] dense */
  void* out;        /* [N, C, Ho, Wo] dense */
  int64_t N, C, H, W, Ho, Wo;
  uint32_t interp, pad;
  int ac;
  /* upsampling: per output row / column source indices and weights */
  const int64_t *h0, *h1, *w0, *w1;
  const void *lh0, *lh1, *lw0, *lw1;
} sample_job_t;

#define SAMPLE_KERNELS(T, SUF, FLOOR, NEARBYINT, FABS, FMOD)                                   \
  static inline T unnorm_##SUF(T c, int64_t size, int ac) {                                    \
    return ac ? ((c + 1) / 2) * (T)(size - 1) : ((c + 1) * (T)size - 1) / 2;                   \
  }                                                                                            \
  static inline T clip_##SUF(T v, int64_t size) {                                              \
    T hi = (T)(size - 1);                                                                      \
    return v < 0 ? (T)0 : v > hi ? hi : v;                                                     \
  }                                                                                            \
  static inline T reflect_##SUF(T v, int64_t lo2, int64_t hi2) {                               \
    if (lo2 == hi2) return 0;                                                                  \
    T mn = (T)lo2 / 2, span = (T)(hi2 - lo2) / 2;                                              \
    v = FABS(v - mn);                                                                          \
    T extra = FMOD(v, span);                                                                   \
    int64_t flips = (int64_t)FLOOR(v / span);                                                  \
    return flips % 2 == 0 ? extra + mn : (span - extra) + mn;                                  \
  }                                                                                            \
  /* compute_coordinates */                                                                    \
  static inline T padc_##SUF(T v, int64_t size, uint32_t mode, int ac) {                       \
    if (mode == BP_GRID_PAD_BORDER) return clip_##SUF(v, size);                                \
    if (mode == BP_GRID_PAD_REFLECTION) {                                                      \
      if (!(FABS(v) < (T)PK_COORD_LIMIT)) return v; /* NaN/huge: outside */                    \
      v = ac ? reflect_##SUF(v, 0, 2 * (size - 1)) : reflect_##SUF(v, -1, 2 * size - 1);       \
      return clip_##SUF(v, size);                                                              \
    }                                                                                          \
    return v;                                                                                  \
  }                                                                                            \
  /* Input value at a padded integral coordinate, 0 outside. */                                \
  static inline T tap_##SUF(const T* plane, T x, T y, int64_t H, int64_t W, uint32_t mode,     \
                            int ac) {                                                          \
    x = padc_##SUF(x, W, mode, ac);                                                            \
    y = padc_##SUF(y, H, mode, ac);                                                            \
    if (!(FABS(x) < (T)PK_COORD_LIMIT) || !(FABS(y) < (T)PK_COORD_LIMIT)) return 0;            \
    int64_t ix = (int64_t)x, iy = (int64_t)y;                                                  \
    return (ix >= 0 && ix < W && iy >= 0 && iy < H) ? plane[iy * W + ix] : (T)0;               \
  }                                                                                            \
  static inline T cc1_##SUF(T x, T A) { return ((A + 2) * x - (A + 3)) * x * x + 1; }          \
  static inline T cc2_##SUF(T x, T A) { return ((A * x - 5 * A) * x + 8 * A) * x - 4 * A; }    \
  static inline T cubic_##SUF(T x0, T x1, T x2, T x3, T t) {                                   \
    const T A = (T)-0.75;                                                                      \
    T c0 = cc2_##SUF(t + 1, A), c1 = cc1_##SUF(t, A);                                          \
    T u = 1 - t;                                                                               \
    T c2 = cc1_##SUF(u, A), c3 = cc2_##SUF(u + 1, A);                                          \
    return x0 * c0 + x1 * c1 + x2 * c2 + x3 * c3;                                              \
  }                                                                                            \
  static void grid_rows_##SUF(void* ctx, int64_t r0, int64_t r1) {                             \
    const sample_job_t* j = ctx;                                                               \
    const int64_t H = j->H, W = j->W, C = j->C;                                                \
    for (int64_t r = r0; r < r1; r++) {                                                        \
      int64_t n = r / j->Ho, h = r % j->Ho;                                                    \
      for (int64_t w = 0; w < j->Wo; w++) {                                                    \
        const T* gp = (const T*)j->grid + ((n * j->Ho + h) * j->Wo + w) * 2;                   \
        T ix = unnorm_##SUF(gp[0], W, j->ac), iy = unnorm_##SUF(gp[1], H, j->ac);              \
        T* out = (T*)j->out + (n * C * j->Ho + h) * j->Wo + w;                                 \
        const int64_t ostride = j->Ho * j->Wo;                                                 \
        const T* in = (const T*)j->in + n * C * H * W;                                         \
        if (j->interp == BP_GRID_BICUBIC) {                                                    \
          if (!(FABS(ix) < (T)PK_COORD_LIMIT) || !(FABS(iy) < (T)PK_COORD_LIMIT)) {            \
            for (int64_t c = 0; c < C; c++) out[c * ostride] = 0;                              \
            continue;                                                                          \
          }                                                                                    \
          T fx = FLOOR(ix), fy = FLOOR(iy);                                                    \
          T tx = ix - fx, ty = iy - fy;                                                        \
          for (int64_t c = 0; c < C; c++) {                                                    \
            const T* pl = in + c * H * W;                                                      \
            T rows[4];                                                                         \
            for (int i = 0; i < 4; i++) {                                                      \
              T y = fy - 1 + (T)i;                                                             \
              rows[i] = cubic_##SUF(tap_##SUF(pl, fx - 1, y, H, W, j->pad, j->ac),             \
                                    tap_##SUF(pl, fx, y, H, W, j->pad, j->ac),                 \
                                    tap_##SUF(pl, fx + 1, y, H, W, j->pad, j->ac),             \
                                    tap_##SUF(pl, fx + 2, y, H, W, j->pad, j->ac), tx);        \
            }                                                                                  \
            out[c * ostride] = cubic_##SUF(rows[0], rows[1], rows[2], rows[3], ty);            \
          }                                                                                    \
          continue;                                                                            \
        }                                                                                      \
        ix = padc_##SUF(ix, W, j->pad, j->ac);                                                 \
        iy = padc_##SUF(iy, H, j->pad, j->ac);                                                 \
        int inside = FABS(ix) < (T)PK_COORD_LIMIT && FABS(iy) < (T)PK_COORD_LIMIT;             \
        if (j->interp == BP_GRID_NEAREST) {                                                    \
          int64_t px = inside ? (int64_t)NEARBYINT(ix) : -1;                                   \
          int64_t py = inside ? (int64_t)NEARBYINT(iy) : -1;                                   \
          int ok = px >= 0 && px < W && py >= 0 && py < H;                                     \
          for (int64_t c = 0; c < C; c++) {                                                    \
            out[c * ostride] = ok ? in[c * H * W + py * W + px] : (T)0;                        \
          }                                                                                    \
          continue;                                                                            \
        }                                                                                      \
        if (!inside) {                                                                         \
          for (int64_t c = 0; c < C; c++) out[c * ostride] = 0;                                \
          continue;                                                                            \
        }                                                                                      \
        int64_t x0 = (int64_t)FLOOR(ix), y0 = (int64_t)FLOOR(iy);                              \
        T wt[4] = {((T)(x0 + 1) - ix) * ((T)(y0 + 1) - iy), (ix - (T)x0) * ((T)(y0 + 1) - iy), \
                   ((T)(x0 + 1) - ix) * (iy - (T)y0), (ix - (T)x0) * (iy - (T)y0)};            \
        int64_t off[4];                                                                        \
        int ok[4];                                                                             \
        for (int t = 0; t < 4; t++) {                                                          \
          int64_t px = x0 + (t & 1), py = y0 + (t >> 1);                                       \
          ok[t] = px >= 0 && px < W && py >= 0 && py < H;                                      \
          off[t] = ok[t] ? py * W + px : 0;                                                    \
        }                                                                                      \
        for (int64_t c = 0; c < C; c++) {                                                      \
          const T* pl = in + c * H * W;                                                        \
          T acc = 0;                                                                           \
          for (int t = 0; t < 4; t++)                                                          \
            if (ok[t]) acc += pl[off[t]] * wt[t];                                              \
          out[c * ostride] = acc;                                                              \
        }                                                                                      \
      }                                                                                        \
    }                                                                                          \
  }                                                                                            \
  /* Source index of nearest upsampling: floorf(scale * dst), clamped. */                      \
  static void nearest_index_##SUF(int64_t in, int64_t out, double scale, int64_t* idx) {       \
    T sc = scale > 0 ? (T)(1.0 / scale) : (T)in / (T)out;                                      \
    for (int64_t i = 0; i < out; i++) {                                                        \
      int64_t s = (int64_t)floorf((float)(sc * (T)i));                                         \
      idx[i] = s < in - 1 ? s : in - 1;                                                        \
    }                                                                                          \
  }                                                                                            \
  /* compute_source_index_and_lambda for every output index. */                                \
  static void linear_index_##SUF(int64_t in, int64_t out, int ac, double scale, int64_t* i0,   \
                                 int64_t* i1, T* l0, T* l1) {                                  \
    T sc = ac ? (out > 1 ? (T)(in - 1) / (T)(out - 1) : (T)0)                                  \
              : (scale > 0 ? (T)(1.0 / scale) : (T)in / (T)out);                               \
    for (int64_t i = 0; i < out; i++) {                                                        \
      if (out == in) {                                                                         \
        i0[i] = i1[i] = i;                                                                     \
        l0[i] = 1;                                                                             \
        l1[i] = 0;                                                                             \
        continue;                                                                              \
      }                                                                                        \
      T src = ac ? sc * (T)i : sc * ((T)i + (T)0.5) - (T)0.5;                                  \
      if (!ac && src < 0) src = 0;                                                             \
      int64_t f = (int64_t)floorf((float)src);                                                 \
      i0[i] = f < in - 1 ? f : in - 1;                                                         \
      T lam = src - (T)i0[i];                                                                  \
      lam = lam < 0 ? (T)0 : lam > 1 ? (T)1 : lam;                                             \
      l1[i] = lam;                                                                             \
      i1[i] = i0[i] + (i0[i] < in - 1 ? 1 : 0);                                                \
      l0[i] = 1 - lam;                                                                         \
    }                                                                                          \
  }                                                                                            \
  /* Rows of (plane, output row). */                                                           \
  static void upsample_rows_##SUF(void* ctx, int64_t r0, int64_t r1) {                         \
    const sample_job_t* j = ctx;                                                               \
    const T *lh0 = j->lh0, *lh1 = j->lh1, *lw0 = j->lw0, *lw1 = j->lw1;                        \
    for (int64_t r = r0; r < r1; r++) {                                                        \
      int64_t p = r / j->Ho, oh = r % j->Ho;                                                   \
      const T* pl = (const T*)j->in + p * j->H * j->W;                                         \
      T* out = (T*)j->out + r * j->Wo;                                                         \
      if (!lh0) { /* nearest */                                                                \
        const T* row = pl + j->h0[oh] * j->W;                                                  \
        for (int64_t ow = 0; ow < j->Wo; ow++) out[ow] = row[j->w0[ow]];                       \
        continue;                                                                              \
      }                                                                                        \
      const T* ra = pl + j->h0[oh] * j->W;                                                     \
      const T* rb = pl + j->h1[oh] * j->W;                                                     \
      T a = lh0[oh], b = lh1[oh];                                                              \
      for (int64_t ow = 0; ow < j->Wo; ow++) {                                                 \
        int64_t c0 = j->w0[ow], c1 = j->w1[ow];                                                \
        out[ow] = a * (lw0[ow] * ra[c0] + lw1[ow] * ra[c1]) +                                  \
                  b * (lw0[ow] * rb[c0] + lw1[ow] * rb[c1]);                                   \
      }                                                                                        \
    }                                                                                          \
  }

SAMPLE_KERNELS(float, F32, floorf, nearbyintf, fabsf, fmodf)
SAMPLE_KERNELS(double, F64, floor, nearbyint, fabs, fmod)

static int64_t row_grain(int64_t row_elems) {
  int64_t g = 8192 / (row_elems + 1);
  return g < 1 ? 1 : g;
}

bp_status_t cpu_exec_grid_sampler(const bp_op_call_t* call) {
  const bp_grid_sampler_attrs_t* a = call->attrs;
  const bp_tensor_desc_t *x = call->inputs[0], *grid = call->inputs[1], *y = call->outputs[0];
  const char* name = "grid_sampler_2d";
  if (x->rank != 4 || grid->rank != 4 || grid->sizes[3] != 2 || grid->sizes[0] != x->sizes[0] ||
      x->sizes[2] <= 0 || x->sizes[3] <= 0 || grid->dtype != x->dtype) {
    return cpu_error(BP_INVALID_ARGUMENT, "cpu: %s: input must be [N, C, H, W] and grid [N, Ho, Wo, 2] of its dtype", name);
  }
  if (a->interpolation > BP_GRID_BICUBIC || a->padding_mode > BP_GRID_PAD_REFLECTION) {
    return cpu_error(BP_INVALID_ARGUMENT, "cpu: %s: unknown mode", name);
  }
  int64_t osz[4] = {x->sizes[0], x->sizes[1], grid->sizes[1], grid->sizes[2]};
  bp_status_t st = cpu_pool_expect(y, 4, osz, name, "output");
  if (st != BP_OK) return st;
  if (bp_desc_numel(y) == 0) return BP_OK;
  pk_type_t t = pk_of(x->dtype);
  void *in_owned = NULL, *g_owned = NULL, *out_owned = NULL, *out = NULL;
  const void *in = NULL, *g = NULL;
  st = cpu_pool_input(x, t, &in, &in_owned);
  if (st == BP_OK) st = cpu_pool_input(grid, t, &g, &g_owned);
  if (st == BP_OK) st = cpu_pool_output(y, t, 0, &out, &out_owned);
  if (st != BP_OK) goto cleanup;
  sample_job_t j;
  memset(&j, 0, sizeof j);
  j.in = in;
  j.grid = g;
  j.out = out;
  j.N = x->sizes[0];
  j.C = x->sizes[1];
  j.H = x->sizes[2];
  j.W = x->sizes[3];
  j.Ho = osz[2];
  j.Wo = osz[3];
  j.interp = a->interpolation;
  j.pad = a->padding_mode;
  j.ac = a->align_corners != 0;
  cpu_parallel_for(j.N * j.Ho, row_grain(j.Wo * j.C), t == PK_F64 ? grid_rows_F64 : grid_rows_F32, &j);
  st = cpu_pool_finish(y, t, out_owned);
cleanup:
  free(in_owned);
  free(g_owned);
  free(out_owned);
  return st;
}

bp_status_t cpu_exec_upsample(const bp_op_call_t* call) {
  const bp_upsample_attrs_t* a = call->attrs;
  const bp_tensor_desc_t *x = call->inputs[0], *y = call->outputs[0];
  int nearest = call->op_id == BP_OP_upsample_nearest2d;
  const char* name = cpu_op_name(call->op_id);
  if (x->rank != 4 || y->rank != 4 || x->sizes[2] <= 0 || x->sizes[3] <= 0 || y->sizes[2] <= 0 ||
      y->sizes[3] <= 0) {
    return cpu_error(BP_INVALID_ARGUMENT, "cpu: %s: input and output must be [N, C, H, W] with non-empty H, W", name);
  }
  int64_t osz[4] = {x->sizes[0], x->sizes[1], y->sizes[2], y->sizes[3]};
  bp_status_t st = cpu_pool_expect(y, 4, osz, name, "output");
  if (st != BP_OK) return st;
  if (bp_desc_numel(y) == 0) return BP_OK;
  /* u8 (nearest only) stages exactly in f32 */
  pk_type_t t = x->dtype == BP_DTYPE_F64 ? PK_F64 : PK_F32;
  size_t es = t == PK_F64 ? sizeof(double) : sizeof(float);
  int64_t H = x->sizes[2], W = x->sizes[3], Ho = osz[2], Wo = osz[3];
  void *in_owned = NULL, *out_owned = NULL, *out = NULL;
  const void* in = NULL;
  /* indices: h0 h1 (Ho each), w0 w1 (Wo each); weights likewise */
  int64_t* idx = malloc(sizeof(int64_t) * (size_t)(2 * (Ho + Wo)));
  unsigned char* wts = malloc(es * (size_t)(2 * (Ho + Wo)));
  if (!idx || !wts) {
    st = cpu_error(BP_RESOURCE_EXHAUSTED, "cpu: %s: out of memory", name);
    goto cleanup;
  }
  st = cpu_pool_input(x, t, &in, &in_owned);
  if (st == BP_OK) st = cpu_pool_output(y, t, 0, &out, &out_owned);
  if (st != BP_OK) goto cleanup;
  sample_job_t j;
  memset(&j, 0, sizeof j);
  j.in = in;
  j.out = out;
  j.H = H;
  j.W = W;
  j.Ho = Ho;
  j.Wo = Wo;
  j.h0 = idx;
  j.h1 = idx + Ho;
  j.w0 = idx + 2 * Ho;
  j.w1 = idx + 2 * Ho + Wo;
  int ac = a->align_corners != 0;
  /* The index helpers take 0 for a scale that was not given. */
  const double sh = a->has_scale ? a->scale[0] : 0.0, sw = a->has_scale ? a->scale[1] : 0.0;
  if (nearest) {
    if (t == PK_F64) {
      nearest_index_F64(H, Ho, sh, idx);
      nearest_index_F64(W, Wo, sw, idx + 2 * Ho);
    } else {
      nearest_index_F32(H, Ho, sh, idx);
      nearest_index_F32(W, Wo, sw, idx + 2 * Ho);
    }
  } else {
    j.lh0 = wts;
    j.lh1 = wts + es * (size_t)Ho;
    j.lw0 = wts + es * (size_t)(2 * Ho);
    j.lw1 = wts + es * (size_t)(2 * Ho + Wo);
    if (t == PK_F64) {
      linear_index_F64(H, Ho, ac, sh, idx, idx + Ho, (double*)j.lh0, (double*)j.lh1);
      linear_index_F64(W, Wo, ac, sw, idx + 2 * Ho, idx + 2 * Ho + Wo, (double*)j.lw0, (double*)j.lw1);
    } else {
      linear_index_F32(H, Ho, ac, sh, idx, idx + Ho, (float*)j.lh0, (float*)j.lh1);
      linear_index_F32(W, Wo, ac, sw, idx + 2 * Ho, idx + 2 * Ho + Wo, (float*)j.lw0, (float*)j.lw1);
    }
  }
  int64_t planes = x->sizes[0] * x->sizes[1];
  cpu_parallel_for(planes * Ho, row_grain(Wo), t == PK_F64 ? upsample_rows_F64 : upsample_rows_F32, &j);
  st = cpu_pool_finish(y, t, out_owned);
cleanup:
  free(idx);
  free(wts);
  free(in_owned);
  free(out_owned);
  return st;
}
