/* References of the pool family: avg_pool (1-3 d) and its 2-d backward,
 * adaptive_avg_pool (1-3 d) and its 2-d backward, max_pool with indices
 * (2-3 d) and its 2-d backward, grid_sampler_2d and the 2-d upsampling ops.
 *
 * Plain loops in fp64 (exact integers for i64). Where PyTorch's result
 * depends on how a coordinate rounds (nearest neighbours, interpolation
 * weights), the coordinate is computed with PyTorch's formula, every step
 * rounded to the op's compute dtype (f32 for f16/bf16/f32, f64 for f64): the
 * index picked is then the one PyTorch picks, and the weights the ones it
 * uses. The weighted sums themselves are exact. docs/semantics.md, "Pooling
 * and sampling", states the semantics; what it leaves undefined is rejected.
 */
#include <math.h>
#include <string.h>

#include "ref.h"

void bpc_gen_pool(struct bpc_gen* g);

/* A tensor viewed as planes x [D, H, W] (missing spatial dims are 1). */
typedef struct geo {
  int64_t planes;
  int64_t in[3], out[3];
  int64_t k[3], st[3], pad[3], dil[3];
} geo_t;

static int64_t floor_div(int64_t a, int64_t b) {
  int64_t q = a / b;
  return (a % b != 0 && a < 0) ? q - 1 : q;
}

static int is_float_or(uint32_t d, uint32_t extra) {
  return d == BP_DTYPE_F32 || d == BP_DTYPE_F64 || d == BP_DTYPE_F16 || d == BP_DTYPE_BF16 ||
         d == extra;
}

/* Splits t (rank s+1 or s+2, non-batch dims non-empty) into planes and
 * three spatial dims. */
static bp_status_t split(const bpc_host_tensor_t* t, uint32_t s, geo_t* g, bpc_ref_result_t* res) {
  if (s < 1 || s > 3) return bpc_ref_reject(res, "spatial_dims %u not in 1..3", s);
  if (t->rank != s + 1 && t->rank != s + 2) return bpc_ref_reject(res, "input rank %u for %u spatial dims", t->rank, s);
  g->planes = 1;
  for (uint32_t d = 0; d + s < t->rank; d++) g->planes *= t->sizes[d];
  for (uint32_t d = t->rank - s - 1; d < t->rank; d++) {
    if (t->sizes[d] == 0) return bpc_ref_reject(res, "empty non-batch dim");
  }
  for (int k = 0; k < 3; k++) {
    g->in[k] = g->out[k] = g->k[k] = g->st[k] = g->dil[k] = 1;
    g->pad[k] = 0;
  }
  for (uint32_t k = 0; k < s; k++) g->in[3 - s + k] = t->sizes[t->rank - s + k];
  return BP_OK;
}

/* PyTorch's pooling_output_shape and pool*_shape_check. */
static bp_status_t pool_geo(const bpc_host_tensor_t* t, const bp_pool_attrs_t* a, int is_max, geo_t* g,
                            bpc_ref_result_t* res) {
  uint32_t s = a->spatial_dims;
  if (is_max && s < 2) return bpc_ref_reject(res, "max_pool takes 2 or 3 spatial dims");
  bp_status_t st = split(t, s, g, res);
  if (st != BP_OK) return st;
  for (uint32_t k = 0; k < s; k++) {
    int j = 3 - (int)s + (int)k;
    g->k[j] = a->kernel[k];
    g->st[j] = a->has_stride ? a->stride[k] : a->kernel[k]; /* PyTorch's stride=None */
    g->pad[j] = a->padding[k];
    g->dil[j] = a->dilation[k];
    if (g->k[j] <= 0 || g->st[j] <= 0 || g->dil[j] <= 0 || (!is_max && g->dil[j] != 1)) {
      return bpc_ref_reject(res, "bad kernel/stride/dilation");
    }
    if (g->pad[j] < 0 || g->pad[j] > g->k[j] / 2) return bpc_ref_reject(res, "pad above kernel/2");
    int64_t o = floor_div(g->in[j] + 2 * g->pad[j] - g->dil[j] * (g->k[j] - 1) - 1 +
                              (a->ceil_mode ? g->st[j] - 1 : 0),
                          g->st[j]) + 1;
    if (a->ceil_mode && (o - 1) * g->st[j] >= g->in[j] + g->pad[j]) o--;
    if (o < 1) return bpc_ref_reject(res, "output size too small");
    g->out[j] = o;
  }
  return BP_OK;
}

static void out_shape(const bpc_host_tensor_t* t, uint32_t s, const geo_t* g, int64_t* sizes) {
  memcpy(sizes, t->sizes, sizeof(int64_t) * t->rank);
  for (uint32_t k = 0; k < s; k++) sizes[t->rank - s + k] = g->out[3 - s + k];
}

/* ---- avg_pool and avg_pool2d_backward -------------------------------------------- */
/* Window of output element o along dim j: [lo, hi) clipped to the input, and
 * the count including padding (PyTorch's pool_size). */
static void avg_window(const geo_t* g, int j, int64_t o, int64_t* lo, int64_t* hi, int64_t* padded) {
  int64_t start = o * g->st[j] - g->pad[j];
  int64_t end = start + g->k[j];
  if (end > g->in[j] + g->pad[j]) end = g->in[j] + g->pad[j];
  *padded = end - start;
  *lo = start < 0 ? 0 : start;
  *hi = end > g->in[j] ? g->in[j] : end;
}

static bp_status_t ref_avg_pool(const bpc_case_t* c, const bpc_host_tensor_t* in, bpc_ref_result_t* res) {
  const bp_pool_attrs_t* a = &c->attrs.pool;
  int backward = c->op_id == BP_OP_avg_pool2d_backward;
  const bpc_host_tensor_t* x = &in[backward ? 1 : 0];
  const bpc_host_tensor_t* go = backward ? &in[0] : NULL;
  uint32_t d = x->dtype;
  if (!is_float_or(d, BP_DTYPE_I64)) return bpc_ref_reject(res, "avg_pool over %s", bpc_dtype_name(d));
  if (backward && a->spatial_dims != 2) return bpc_ref_reject(res, "avg_pool2d_backward is 2-d");
  geo_t g;
  bp_status_t st = pool_geo(x, a, 0, &g, res);
  if (st != BP_OK) return st;
  int64_t osz[BP_MAX_RANK];
  out_shape(x, a->spatial_dims, &g, osz);
  if (backward) {
    if (go->dtype != d) return bpc_ref_reject(res, "grad_output dtype differs");
    if (go->rank != x->rank || memcmp(go->sizes, osz, sizeof(int64_t) * x->rank) != 0) {
      return bpc_ref_reject(res, "grad_output shape is not the forward output's");
    }
    st = bpc_ref_single_output(res, d, x->rank, x->sizes, 1, d);
  } else {
    st = bpc_ref_single_output(res, d, x->rank, osz, 1, d);
  }
  if (st != BP_OK) return st;
  bpc_expected_t* e = &res->out[0];
  int fl = bpc_dtype_is_float(d);
  int64_t in_plane = g.in[0] * g.in[1] * g.in[2], out_plane = g.out[0] * g.out[1] * g.out[2];
  for (int64_t p = 0; p < g.planes; p++) {
    for (int64_t od = 0; od < g.out[0]; od++) {
      for (int64_t oh = 0; oh < g.out[1]; oh++) {
        for (int64_t ow = 0; ow < g.out[2]; ow++) {
          int64_t lo[3], hi[3], padded[3];
          avg_window(&g, 0, od, &lo[0], &hi[0], &padded[0]);
          avg_window(&g, 1, oh, &lo[1], &hi[1], &padded[1]);
          avg_window(&g, 2, ow, &lo[2], &hi[2], &padded[2]);
          int64_t count = (hi[0] - lo[0]) * (hi[1] - lo[1]) * (hi[2] - lo[2]);
          int64_t oidx = p * out_plane + (od * g.out[1] + oh) * g.out[2] + ow;
          int empty = lo[0] >= hi[0] || lo[1] >= hi[1] || lo[2] >= hi[2];
          int64_t div = a->has_divisor_override ? a->divisor_override
                        : a->count_include_pad ? padded[0] * padded[1] * padded[2]
                                               : count;
          if (!backward) {
            if (empty) continue; /* PyTorch writes 0 (the result is zero-initialised) */
            double sum = 0.0, mag = 0.0;
            int64_t isum = 0;
            for (int64_t id = lo[0]; id < hi[0]; id++)
              for (int64_t ih = lo[1]; ih < hi[1]; ih++)
                for (int64_t iw = lo[2]; iw < hi[2]; iw++) {
                  bpc_num_t v = bpc_load(d, x->data, p * in_plane + (id * g.in[1] + ih) * g.in[2] + iw);
                  sum += v.f;
                  mag += fabs(v.f);
                  if (!fl && __builtin_add_overflow(isum, v.i, &isum)) {
                    return bpc_ref_reject(res, "i64 window sum overflows");
                  }
                }
            if (fl) {
              e->f[oidx] = sum / (double)div;
              e->mag[oidx] = mag / fabs((double)div);
              e->nterms[oidx] = (double)count + 1.0;
            } else {
              if (isum == INT64_MIN && div == -1) return bpc_ref_reject(res, "i64 quotient overflows");
              e->i[oidx] = isum / div; /* truncation, as C++ integer division */
            }
          } else {
            if (empty) continue;
            bpc_num_t gv = bpc_load(d, go->data, oidx);
            double delta = gv.f / (double)div;
            if (!fl && gv.i == INT64_MIN && div == -1) return bpc_ref_reject(res, "i64 quotient overflows");
            int64_t idelta = fl ? 0 : gv.i / div;
            for (int64_t id = lo[0]; id < hi[0]; id++)
              for (int64_t ih = lo[1]; ih < hi[1]; ih++)
                for (int64_t iw = lo[2]; iw < hi[2]; iw++) {
                  int64_t i = p * in_plane + (id * g.in[1] + ih) * g.in[2] + iw;
                  if (fl) {
                    e->f[i] += delta;
                    e->mag[i] += fabs(delta);
                    e->nterms[i] += 2.0; /* the division and the addition */
                  } else {
                    e->i[i] = (int64_t)((uint64_t)e->i[i] + (uint64_t)idelta);
                  }
                }
          }
        }
      }
    }
  }
  return BP_OK;
}

/* ---- max_pool_with_indices and its 2-d backward ----------------------------------- */
static bp_status_t ref_max_pool(const bpc_case_t* c, const bpc_host_tensor_t* in, bpc_ref_result_t* res) {
  const bp_pool_attrs_t* a = &c->attrs.pool;
  const bpc_host_tensor_t* x = &in[0];
  uint32_t d = x->dtype;
  if (d == BP_DTYPE_BOOL || !(is_float_or(d, 0) || bpc_dtype_is_int(d))) {
    return bpc_ref_reject(res, "max_pool over %s", bpc_dtype_name(d));
  }
  geo_t g;
  bp_status_t st = pool_geo(x, a, 1, &g, res);
  if (st != BP_OK) return st;
  int64_t osz[BP_MAX_RANK];
  out_shape(x, a->spatial_dims, &g, osz);
  res->num_outputs = 2;
  res->compute_dtype = d;
  st = bpc_expected_init(&res->out[0], d, x->rank, osz, 0);
  if (st == BP_OK) st = bpc_expected_init(&res->out[1], BP_DTYPE_I64, x->rank, osz, 0);
  if (st != BP_OK) return st;
  int fl = bpc_dtype_is_float(d);
  int64_t in_plane = g.in[0] * g.in[1] * g.in[2], out_plane = g.out[0] * g.out[1] * g.out[2];
  for (int64_t p = 0; p < g.planes; p++) {
    for (int64_t oi = 0; oi < out_plane; oi++) {
      int64_t o[3] = {oi / (g.out[1] * g.out[2]), (oi / g.out[2]) % g.out[1], oi % g.out[2]};
      int64_t lo[3], hi[3];
      for (int j = 0; j < 3; j++) {
        lo[j] = o[j] * g.st[j] - g.pad[j];
        hi[j] = lo[j] + (g.k[j] - 1) * g.dil[j] + 1;
        if (hi[j] > g.in[j]) hi[j] = g.in[j];
        while (lo[j] < 0) lo[j] += g.dil[j];
        if (lo[j] >= hi[j]) return bpc_ref_reject(res, "a window holds no input element");
      }
      /* PyTorch's scan: the first element, replaced by anything greater and
       * by every NaN (so the last NaN wins). */
      int64_t best = (lo[0] * g.in[1] + lo[1]) * g.in[2] + lo[2];
      double bf = -INFINITY;
      int64_t bi = INT64_MIN;
      for (int64_t id = lo[0]; id < hi[0]; id += g.dil[0])
        for (int64_t ih = lo[1]; ih < hi[1]; ih += g.dil[1])
          for (int64_t iw = lo[2]; iw < hi[2]; iw += g.dil[2]) {
            int64_t idx = (id * g.in[1] + ih) * g.in[2] + iw;
            bpc_num_t v = bpc_load(d, x->data, p * in_plane + idx);
            if (fl ? (v.f > bf || isnan(v.f)) : v.i > bi) {
              bf = v.f;
              bi = v.i;
              best = idx;
            }
          }
      if (fl) {
        /* no element replaced the start: every value is -inf */
        res->out[0].f[p * out_plane + oi] = bf;
      } else {
        res->out[0].i[p * out_plane + oi] = bi == INT64_MIN ? bpc_load(d, x->data, p * in_plane + best).i : bi;
      }
      res->out[1].i[p * out_plane + oi] = best;
    }
  }
  return BP_OK;
}

static bp_status_t ref_max_pool_backward(const bpc_case_t* c, const bpc_host_tensor_t* in,
                                         bpc_ref_result_t* res) {
  const bp_pool_attrs_t* a = &c->attrs.pool;
  const bpc_host_tensor_t *go = &in[0], *x = &in[1], *ind = &in[2];
  uint32_t d = x->dtype;
  if (!is_float_or(d, 0)) return bpc_ref_reject(res, "max_pool backward over %s", bpc_dtype_name(d));
  if (a->spatial_dims != 2) return bpc_ref_reject(res, "max_pool2d_with_indices_backward is 2-d");
  geo_t g;
  bp_status_t st = pool_geo(x, a, 1, &g, res);
  if (st != BP_OK) return st;
  int64_t osz[BP_MAX_RANK];
  out_shape(x, 2, &g, osz);
  if (go->dtype != d || ind->dtype != BP_DTYPE_I64) return bpc_ref_reject(res, "operand dtypes");
  if (go->rank != x->rank || ind->rank != x->rank ||
      memcmp(go->sizes, osz, sizeof(int64_t) * x->rank) != 0 ||
      memcmp(ind->sizes, osz, sizeof(int64_t) * x->rank) != 0) {
    return bpc_ref_reject(res, "grad_output/indices shape is not the forward output's");
  }
  st = bpc_ref_single_output(res, d, x->rank, x->sizes, 1, d);
  if (st != BP_OK) return st;
  bpc_expected_t* e = &res->out[0];
  int64_t in_plane = g.in[1] * g.in[2], out_plane = g.out[1] * g.out[2];
  for (int64_t p = 0; p < g.planes; p++) {
    for (int64_t oi = 0; oi < out_plane; oi++) {
      int64_t idx = bpc_load(BP_DTYPE_I64, ind->data, p * out_plane + oi).i;
      if (idx == -1) continue; /* PyTorch skips -1 */
      if (idx < 0 || idx >= in_plane) return bpc_ref_reject(res, "index %lld outside the input plane", (long long)idx);
      double v = bpc_load(d, go->data, p * out_plane + oi).f;
      e->f[p * in_plane + idx] += v;
      e->mag[p * in_plane + idx] += fabs(v);
      e->nterms[p * in_plane + idx] += 1.0;
    }
  }
  return BP_OK;
}

/* ---- adaptive_avg_pool and its 2-d backward --------------------------------------- */
static int64_t ad_start(int64_t o, int64_t in, int64_t out) { return (o * in) / out; }
static int64_t ad_end(int64_t o, int64_t in, int64_t out) { return ((o + 1) * in + out - 1) / out; }

static bp_status_t ref_adaptive(const bpc_case_t* c, const bpc_host_tensor_t* in, bpc_ref_result_t* res) {
  int backward = c->op_id == BP_OP_adaptive_avg_pool2d_backward;
  const bpc_host_tensor_t* x = &in[backward ? 1 : 0];
  const bpc_host_tensor_t* go = backward ? &in[0] : NULL;
  uint32_t d = x->dtype, s = backward ? 2 : c->attrs.adaptive_pool.spatial_dims;
  if (!is_float_or(d, 0)) return bpc_ref_reject(res, "adaptive_avg_pool over %s", bpc_dtype_name(d));
  geo_t g;
  bp_status_t st = split(x, s, &g, res);
  if (st != BP_OK) return st;
  int64_t osz[BP_MAX_RANK];
  if (backward) {
    if (go->dtype != d || go->rank != x->rank) return bpc_ref_reject(res, "grad_output dtype/rank");
    for (uint32_t k = 0; k + 2 < x->rank; k++) {
      if (go->sizes[k] != x->sizes[k]) return bpc_ref_reject(res, "grad_output leading dims");
    }
    for (uint32_t k = 0; k < 2; k++) g.out[1 + k] = go->sizes[x->rank - 2 + k];
    if (g.out[1] <= 0 || g.out[2] <= 0) return bpc_ref_reject(res, "grad_output spatial dims empty");
    st = bpc_ref_single_output(res, d, x->rank, x->sizes, 1, d);
  } else {
    for (uint32_t k = 0; k < s; k++) {
      if (c->attrs.adaptive_pool.output_size[k] < 0) return bpc_ref_reject(res, "negative output size");
      g.out[3 - s + k] = c->attrs.adaptive_pool.output_size[k];
    }
    out_shape(x, s, &g, osz);
    st = bpc_ref_single_output(res, d, x->rank, osz, 1, d);
  }
  if (st != BP_OK) return st;
  bpc_expected_t* e = &res->out[0];
  int64_t in_plane = g.in[0] * g.in[1] * g.in[2], out_plane = g.out[0] * g.out[1] * g.out[2];
  for (int64_t p = 0; p < g.planes; p++) {
    for (int64_t oi = 0; oi < out_plane; oi++) {
      int64_t o[3] = {oi / (g.out[1] * g.out[2]), (oi / g.out[2]) % g.out[1], oi % g.out[2]};
      int64_t lo[3], hi[3], count = 1;
      for (int j = 0; j < 3; j++) {
        lo[j] = ad_start(o[j], g.in[j], g.out[j]);
        hi[j] = ad_end(o[j], g.in[j], g.out[j]);
        count *= hi[j] - lo[j];
      }
      double gv = backward ? bpc_load(d, go->data, p * out_plane + oi).f / (double)count : 0.0;
      double sum = 0.0, mag = 0.0;
      for (int64_t id = lo[0]; id < hi[0]; id++)
        for (int64_t ih = lo[1]; ih < hi[1]; ih++)
          for (int64_t iw = lo[2]; iw < hi[2]; iw++) {
            int64_t i = p * in_plane + (id * g.in[1] + ih) * g.in[2] + iw;
            if (backward) {
              e->f[i] += gv;
              e->mag[i] += fabs(gv);
              e->nterms[i] += 3.0; /* two divisions (PyTorch divides by kh, then kw) and the add */
            } else {
              double v = bpc_load(d, x->data, i).f;
              sum += v;
              mag += fabs(v);
            }
          }
      if (!backward) {
        e->f[p * out_plane + oi] = sum / (double)count;
        e->mag[p * out_plane + oi] = mag / (double)count;
        e->nterms[p * out_plane + oi] = (double)count + 1.0;
      }
    }
  }
  return BP_OK;
}

/* ---- coordinates in the compute dtype ------------------------------------------- */
/* r(): one rounding to the compute dtype (f32 or f64), so that every step of
 * a coordinate formula rounds as it does in PyTorch's kernels. */
typedef struct cdt {
  uint32_t d;
} cdt_t;
static double r(cdt_t c, double v) { return bpc_round_to_dtype(v, c.d); }

/* grid_sampler_unnormalize. */
static double unnormalize(cdt_t c, double coord, int64_t size, int ac) {
  if (ac) return r(c, r(c, r(c, coord + 1.0) / 2.0) * (double)(size - 1));
  return r(c, r(c, r(c, r(c, coord + 1.0) * (double)size) - 1.0) / 2.0);
}
static double clip_coord(double v, int64_t size) {
  double hi = (double)(size - 1);
  return v < 0.0 ? 0.0 : v > hi ? hi : v;
}
static double reflect_coord(cdt_t c, double v, int64_t twice_low, int64_t twice_high) {
  if (twice_low == twice_high) return 0.0;
  double mn = (double)twice_low / 2.0, span = (double)(twice_high - twice_low) / 2.0;
  v = fabs(r(c, v - mn));
  double extra = fmod(v, span);
  int64_t flips = (int64_t)floor(r(c, v / span));
  return flips % 2 == 0 ? r(c, extra + mn) : r(c, r(c, span - extra) + mn);
}
/* compute_coordinates: padding of a source coordinate. */
static double pad_coord(cdt_t c, double v, int64_t size, uint32_t mode, int ac) {
  if (mode == BP_GRID_PAD_BORDER) return clip_coord(v, size);
  if (mode == BP_GRID_PAD_REFLECTION) {
    v = ac ? reflect_coord(c, v, 0, 2 * (size - 1)) : reflect_coord(c, v, -1, 2 * size - 1);
    return clip_coord(v, size);
  }
  return v;
}

/* Cubic convolution weights (A = -0.75) of the four taps at offset t. */
static void cubic_weights(double t, double w[4]) {
  const double A = -0.75;
  double x = t + 1.0;
  w[0] = ((A * x - 5.0 * A) * x + 8.0 * A) * x - 4.0 * A;
  w[1] = ((A + 2.0) * t - (A + 3.0)) * t * t + 1.0;
  x = 1.0 - t;
  w[2] = ((A + 2.0) * x - (A + 3.0)) * x * x + 1.0;
  x = 2.0 - t;
  w[3] = ((A * x - 5.0 * A) * x + 8.0 * A) * x - 4.0 * A;
}

/* ---- grid_sampler_2d ------------------------------------------------------------- */
static bp_status_t ref_grid_sampler(const bpc_case_t* c, const bpc_host_tensor_t* in, bpc_ref_result_t* res) {
  const bp_grid_sampler_attrs_t* a = &c->attrs.grid_sampler;
  const bpc_host_tensor_t *x = &in[0], *grid = &in[1];
  uint32_t d = x->dtype;
  if (!is_float_or(d, 0) || grid->dtype != d) return bpc_ref_reject(res, "grid_sampler dtypes");
  if (x->rank != 4 || grid->rank != 4 || grid->sizes[3] != 2 || grid->sizes[0] != x->sizes[0] ||
      x->sizes[2] == 0 || x->sizes[3] == 0) {
    return bpc_ref_reject(res, "grid_sampler shapes");
  }
  if (a->interpolation > BP_GRID_BICUBIC || a->padding_mode > BP_GRID_PAD_REFLECTION) {
    return bpc_ref_reject(res, "grid_sampler mode");
  }
  int64_t N = x->sizes[0], C = x->sizes[1], H = x->sizes[2], W = x->sizes[3];
  int64_t Ho = grid->sizes[1], Wo = grid->sizes[2];
  int64_t osz[4] = {N, C, Ho, Wo};
  bp_status_t st = bpc_ref_single_output(res, d, 4, osz, 1, d);
  if (st != BP_OK) return st;
  bpc_expected_t* e = &res->out[0];
  cdt_t cd = {d == BP_DTYPE_F64 ? BP_DTYPE_F64 : BP_DTYPE_F32};
  int ac = a->align_corners != 0;
  for (int64_t n = 0; n < N; n++) {
    for (int64_t h = 0; h < Ho; h++) {
      for (int64_t w = 0; w < Wo; w++) {
        int64_t gi = ((n * Ho + h) * Wo + w) * 2;
        double gx = bpc_load(d, grid->data, gi).f, gy = bpc_load(d, grid->data, gi + 1).f;
        if (!isfinite(gx) || !isfinite(gy)) return bpc_ref_reject(res, "non-finite grid coordinates");
        double ix = unnormalize(cd, gx, W, ac), iy = unnormalize(cd, gy, H, ac);
        for (int64_t ch = 0; ch < C; ch++) {
          const int64_t base = (n * C + ch) * H * W;
          int64_t oi = ((n * C + ch) * Ho + h) * Wo + w;
          double sum = 0.0, mag = 0.0, nterms = 8.0;
          if (a->interpolation == BP_GRID_BICUBIC) {
            double fx = floor(ix), fy = floor(iy);
            double tx = r(cd, ix - fx), ty = r(cd, iy - fy);
            double wx[4], wy[4];
            cubic_weights(tx, wx);
            cubic_weights(ty, wy);
            for (int j = 0; j < 4; j++) {
              for (int i = 0; i < 4; i++) {
                double cx = pad_coord(cd, fx - 1.0 + i, W, a->padding_mode, ac);
                double cy = pad_coord(cd, fy - 1.0 + j, H, a->padding_mode, ac);
                int64_t px = (int64_t)cx, py = (int64_t)cy;
                if (px < 0 || px >= W || py < 0 || py >= H) continue;
                double v = bpc_load(d, x->data, base + py * W + px).f;
                if (!isfinite(v)) return bpc_ref_reject(res, "non-finite input under bicubic weights");
                sum += wy[j] * wx[i] * v;
                /* the weights round in the compute dtype: a few units of
                 * roundoff per weight (cubic polynomials of size <= 12) */
                mag += (fabs(wy[j] * wx[i]) + 2.0) * fabs(v);
              }
            }
            nterms = 24.0;
          } else {
            double sx = pad_coord(cd, ix, W, a->padding_mode, ac);
            double sy = pad_coord(cd, iy, H, a->padding_mode, ac);
            if (a->interpolation == BP_GRID_NEAREST) {
              int64_t px = (int64_t)nearbyint(sx), py = (int64_t)nearbyint(sy);
              if (px >= 0 && px < W && py >= 0 && py < H) sum = bpc_load(d, x->data, base + py * W + px).f;
              e->f[oi] = sum;
              continue;
            }
            int64_t x0 = (int64_t)floor(sx), y0 = (int64_t)floor(sy);
            /* PyTorch's surfaces, rounded as its kernels round them */
            double wts[4] = {r(cd, r(cd, (double)(x0 + 1) - sx) * r(cd, (double)(y0 + 1) - sy)),
                             r(cd, r(cd, sx - (double)x0) * r(cd, (double)(y0 + 1) - sy)),
                             r(cd, r(cd, (double)(x0 + 1) - sx) * r(cd, sy - (double)y0)),
                             r(cd, r(cd, sx - (double)x0) * r(cd, sy - (double)y0))};
            for (int t = 0; t < 4; t++) {
              int64_t px = x0 + (t & 1), py = y0 + (t >> 1);
              if (px < 0 || px >= W || py < 0 || py >= H) continue;
              double v = bpc_load(d, x->data, base + py * W + px).f;
              if (!isfinite(v)) return bpc_ref_reject(res, "non-finite input under bilinear weights");
              sum += wts[t] * v;
              mag += fabs(wts[t] * v);
            }
          }
          e->f[oi] = sum;
          e->mag[oi] = mag;
          e->nterms[oi] = nterms;
        }
      }
    }
  }
  return BP_OK;
}

/* ---- upsample_nearest2d / upsample_bilinear2d ------------------------------------ */
/* The output size (PyTorch's compute_output_size for the .vec overloads). */
static bp_status_t upsample_geo(const bpc_case_t* c, const bpc_host_tensor_t* x, int64_t* out,
                                bpc_ref_result_t* res) {
  const bp_upsample_attrs_t* a = &c->attrs.upsample;
  if (x->rank != 4 || x->sizes[1] == 0 || x->sizes[2] == 0 || x->sizes[3] == 0) {
    return bpc_ref_reject(res, "upsample input must be [N, C, H, W] with non-empty C, H, W");
  }
  if (!a->has_output_size && !a->has_scale) return bpc_ref_reject(res, "neither output size nor scale");
  for (int k = 0; k < 2; k++) {
    if (a->has_scale && (!(a->scale[k] > 0.0) || isinf(a->scale[k]))) return bpc_ref_reject(res, "bad scale");
    if (a->has_output_size) {
      out[k] = a->output_size[k];
    } else {
      out[k] = (int64_t)((double)x->sizes[2 + k] * a->scale[k]);
    }
    if (out[k] <= 0) return bpc_ref_reject(res, "empty upsample output");
  }
  return BP_OK;
}

/* The source index of nearest upsampling (PyTorch's channels-first CPU
 * kernel): scale and product in the compute dtype, the product then rounded
 * to f32 and floored (floorf), clamped to the input. */
static int64_t nearest_src(cdt_t cd, int64_t dst, int64_t in, int64_t out, double scale_attr) {
  cdt_t f = {BP_DTYPE_F32};
  double sc = scale_attr > 0.0 ? r(cd, 1.0 / scale_attr) : r(cd, r(cd, (double)in) / r(cd, (double)out));
  int64_t s = (int64_t)floor(r(f, r(cd, sc * (double)dst)));
  return s < in - 1 ? s : in - 1;
}

/* compute_source_index_and_lambda in the compute dtype. */
static void linear_src(cdt_t cd, int64_t dst, int64_t in, int64_t out, int ac, double scale_attr,
                       int64_t* i0, int64_t* i1, double* l0, double* l1) {
  if (out == in) {
    *i0 = *i1 = dst;
    *l0 = 1.0;
    *l1 = 0.0;
    return;
  }
  double sc, src;
  if (ac) {
    sc = out > 1 ? r(cd, r(cd, (double)(in - 1)) / r(cd, (double)(out - 1))) : 0.0;
    src = r(cd, sc * (double)dst);
  } else {
    sc = scale_attr > 0.0 ? r(cd, 1.0 / scale_attr) : r(cd, r(cd, (double)in) / r(cd, (double)out));
    src = r(cd, r(cd, sc * r(cd, (double)dst + 0.5)) - 0.5);
    if (src < 0.0) src = 0.0;
  }
  int64_t f = (int64_t)floor(bpc_round_to_dtype(src, BP_DTYPE_F32)); /* floorf */
  *i0 = f < in - 1 ? f : in - 1;
  double lam = r(cd, src - (double)*i0);
  *l1 = lam < 0.0 ? 0.0 : lam > 1.0 ? 1.0 : lam;
  *i1 = *i0 + (*i0 < in - 1 ? 1 : 0);
  *l0 = r(cd, 1.0 - *l1);
}

static bp_status_t ref_upsample(const bpc_case_t* c, const bpc_host_tensor_t* in, bpc_ref_result_t* res) {
  const bp_upsample_attrs_t* a = &c->attrs.upsample;
  const bpc_host_tensor_t* x = &in[0];
  uint32_t d = x->dtype;
  int nearest = c->op_id == BP_OP_upsample_nearest2d;
  if (!is_float_or(d, nearest ? BP_DTYPE_U8 : 0)) return bpc_ref_reject(res, "upsample over %s", bpc_dtype_name(d));
  if (nearest && a->align_corners) return bpc_ref_reject(res, "nearest has no align_corners");
  int64_t o[2] = {0, 0};
  bp_status_t st = upsample_geo(c, x, o, res);
  if (st != BP_OK) return st;
  int64_t N = x->sizes[0], C = x->sizes[1], H = x->sizes[2], W = x->sizes[3];
  int64_t osz[4] = {N, C, o[0], o[1]};
  st = bpc_ref_single_output(res, d, 4, osz, !nearest, d);
  if (st != BP_OK) return st;
  bpc_expected_t* e = &res->out[0];
  cdt_t cd = {d == BP_DTYPE_F64 ? BP_DTYPE_F64 : BP_DTYPE_F32};
  int fl = bpc_dtype_is_float(d);
  /* The source-index helpers take 0 for a scale that was not given. */
  const double sh = a->has_scale ? a->scale[0] : 0.0, sw = a->has_scale ? a->scale[1] : 0.0;
  for (int64_t pl = 0; pl < N * C; pl++) {
    for (int64_t oh = 0; oh < o[0]; oh++) {
      for (int64_t ow = 0; ow < o[1]; ow++) {
        int64_t oi = (pl * o[0] + oh) * o[1] + ow;
        if (nearest) {
          int64_t ih = nearest_src(cd, oh, H, o[0], sh), iw = nearest_src(cd, ow, W, o[1], sw);
          bpc_num_t v = bpc_load(d, x->data, (pl * H + ih) * W + iw);
          if (fl) e->f[oi] = v.f;
          else e->i[oi] = v.i;
          continue;
        }
        int64_t h0, h1, w0, w1;
        double lh0, lh1, lw0, lw1;
        linear_src(cd, oh, H, o[0], a->align_corners != 0, sh, &h0, &h1, &lh0, &lh1);
        linear_src(cd, ow, W, o[1], a->align_corners != 0, sw, &w0, &w1, &lw0, &lw1);
        const int64_t hs[2] = {h0, h1}, ws[2] = {w0, w1};
        const double lh[2] = {lh0, lh1}, lw[2] = {lw0, lw1};
        double sum = 0.0, mag = 0.0;
        for (int i = 0; i < 2; i++)
          for (int j = 0; j < 2; j++) {
            double v = bpc_load(d, x->data, (pl * H + hs[i]) * W + ws[j]).f;
            if (!isfinite(v)) return bpc_ref_reject(res, "non-finite input under bilinear weights");
            sum += lh[i] * lw[j] * v;
            mag += fabs(lh[i] * lw[j] * v);
          }
        e->f[oi] = sum;
        e->mag[oi] = mag;
        e->nterms[oi] = 8.0;
      }
    }
  }
  return BP_OK;
}

/* Nearest sampling (grid_sampler_2d with NEAREST) is exact; the other modes
 * use the group's bound. */
static void check_grid(const bpc_case_t* c, const bpc_host_tensor_t* in, const bpc_ref_result_t* ref,
                       const void* const* got, const bpc_tolerance_t* tol, bpc_check_t* out) {
  (void)in;
  bpc_tolerance_t t = *tol;
  if (c->attrs.grid_sampler.interpolation == BP_GRID_NEAREST) {
    t = bpc_tolerance_get(BPC_ACC_EXACT, ref->out[0].dtype, 0);
  }
  bpc_check_values(&t, &ref->out[0], got[0], out);
}

static const bpc_ref_group_t k_groups[] = {
    {ref_avg_pool, BPC_ACC_REDUCE, 0, BPC_OPS(BP_OP_avg_pool, BP_OP_avg_pool2d_backward), bpc_gen_pool, NULL},
    {ref_adaptive, BPC_ACC_REDUCE, 0, BPC_OPS(BP_OP_adaptive_avg_pool, BP_OP_adaptive_avg_pool2d_backward),
     bpc_gen_pool, NULL},
    {ref_max_pool, BPC_ACC_EXACT, 0, BPC_OPS(BP_OP_max_pool_with_indices), bpc_gen_pool, NULL},
    {ref_max_pool_backward, BPC_ACC_REDUCE, 0, BPC_OPS(BP_OP_max_pool2d_with_indices_backward), bpc_gen_pool,
     NULL},
    {ref_grid_sampler, BPC_ACC_REDUCE, 0, BPC_OPS(BP_OP_grid_sampler_2d), bpc_gen_pool, check_grid},
    {ref_upsample, BPC_ACC_REDUCE, 0, BPC_OPS(BP_OP_upsample_bilinear2d), bpc_gen_pool, NULL},
    {ref_upsample, BPC_ACC_EXACT, 0, BPC_OPS(BP_OP_upsample_nearest2d), bpc_gen_pool, NULL},
};
const bpc_ref_family_t bpc_ref_family_pool = BPC_FAMILY(pool, k_groups);
