/* References of the norm family: batch_norm, group_norm (+ backward),
 * layer_norm (+ backward), rms_norm, add_layer_norm, add_rms_norm and
 * cross_entropy. Plain fp64 loops
 * over dense inputs, PyTorch's formulas written out:
 *
 *   normalization: y = (x - mean) * rstd * w + b, rstd = 1 / sqrt(var + eps),
 *   var the biased variance of the elements that share a statistic;
 *   backward: dx = rstd * (dyw - mean(dyw) - xhat * mean(dyw * xhat)),
 *   dyw = dy * w, xhat = (x - mean) * rstd with the given mean and rstd;
 *   dw = sum dy * xhat, db = sum dy over the elements that share a weight.
 *
 * Every element maps to a statistic ("group") and a parameter index: rows
 * of the trailing dims (layer_norm, rms_norm), channels (batch_norm), or
 * (sample, group) pairs (group_norm).
 *
 * Error scales (mag, nterms) assume the statistic is accumulated over its
 * n elements in the compute dtype, by two passes or by one (E[x^2] -
 * mean^2): the bound covers both.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ref.h"

void bpc_gen_norm(struct bpc_gen* g);

/* ---- element -> statistic / parameter maps ------------------------------- */
enum { MAP_ROWS = 0, MAP_CHANNELS = 1, MAP_GROUPS = 2 };

typedef struct norm_map {
  int mode;
  int64_t inner;  /* ROWS: elements per row; CHANNELS/GROUPS: spatial size */
  int64_t c;      /* channels */
  int64_t groups; /* GROUPS: groups per sample */
  int64_t nstat;  /* number of statistics */
  int64_t nparam; /* parameter length */
} norm_map_t;

static void map_elem(const norm_map_t* m, int64_t k, int64_t* stat, int64_t* param) {
  if (m->mode == MAP_ROWS) {
    *stat = k / m->inner;
    *param = k % m->inner;
    return;
  }
  int64_t ch = (k / m->inner) % m->c;
  *param = ch;
  if (m->mode == MAP_CHANNELS) {
    *stat = ch;
  } else {
    int64_t n = k / (m->inner * m->c);
    *stat = n * m->groups + ch / (m->c / m->groups);
  }
}

static double load_f(const bpc_host_tensor_t* t, int64_t k) { return bpc_load(t->dtype, t->data, k).f; }

/* Optional parameter p at index i, or `dflt` when absent. */
static double param_or(const bpc_host_tensor_t* p, int64_t i, double dflt) {
  return p->dtype == BP_DTYPE_INVALID ? dflt : load_f(p, i);
}

/* The statistic dtype: PyTorch's mixed type (f32 parameters of an f16/bf16
 * input) or the input's. Rejects other mismatches (the core does too). */
static bp_status_t stat_dtype(const bpc_host_tensor_t* x, const bpc_host_tensor_t* const* ps,
                              uint32_t n, uint32_t* out, bpc_ref_result_t* res) {
  int half = x->dtype == BP_DTYPE_F16 || x->dtype == BP_DTYPE_BF16;
  uint32_t want = x->dtype;
  for (uint32_t i = 0; i < n; i++) {
    if (half && ps[i]->dtype == BP_DTYPE_F32) want = BP_DTYPE_F32;
  }
  for (uint32_t i = 0; i < n; i++) {
    if (ps[i]->dtype != BP_DTYPE_INVALID && ps[i]->dtype != want) {
      return bpc_ref_reject(res, "parameter dtype %s with input %s", bpc_dtype_name(ps[i]->dtype),
                            bpc_dtype_name(x->dtype));
    }
  }
  *out = want;
  return BP_OK;
}

static int is_float_io(uint32_t d) {
  return d == BP_DTYPE_F32 || d == BP_DTYPE_F64 || d == BP_DTYPE_F16 || d == BP_DTYPE_BF16;
}

/* Per-statistic moments: count, mean, mean |x|, mean x^2, biased var. */
typedef struct moments {
  double* n;
  double* mean;
  double* abs_mean;
  double* sq_mean;
  double* var;
} moments_t;

static void moments_free(moments_t* mo) {
  free(mo->n);
  free(mo->mean);
  free(mo->abs_mean);
  free(mo->sq_mean);
  free(mo->var);
}

static bp_status_t moments_compute(const norm_map_t* m, const bpc_host_tensor_t* x, moments_t* mo) {
  size_t ns = (size_t)(m->nstat > 0 ? m->nstat : 1);
  mo->n = calloc(ns, sizeof(double));
  mo->mean = calloc(ns, sizeof(double));
  mo->abs_mean = calloc(ns, sizeof(double));
  mo->sq_mean = calloc(ns, sizeof(double));
  mo->var = calloc(ns, sizeof(double));
  if (!mo->n || !mo->mean || !mo->abs_mean || !mo->sq_mean || !mo->var) {
    moments_free(mo);
    return BP_RESOURCE_EXHAUSTED;
  }
  int64_t s, p;
  for (int64_t k = 0; k < x->numel; k++) {
    map_elem(m, k, &s, &p);
    double v = load_f(x, k);
    mo->n[s] += 1.0;
    mo->mean[s] += v;
    mo->abs_mean[s] += fabs(v);
    mo->sq_mean[s] += v * v;
  }
  for (int64_t j = 0; j < m->nstat; j++) {
    mo->mean[j] /= mo->n[j];
    mo->abs_mean[j] /= mo->n[j];
    mo->sq_mean[j] /= mo->n[j];
  }
  for (int64_t k = 0; k < x->numel; k++) { /* second pass: exact-ish variance */
    map_elem(m, k, &s, &p);
    double d = load_f(x, k) - mo->mean[s];
    mo->var[s] += d * d;
  }
  for (int64_t j = 0; j < m->nstat; j++) mo->var[j] /= mo->n[j];
  return BP_OK;
}

/* y = (x - mean) * rstd * w + b into out (expected values with bounds). */
static void normalize_out(const norm_map_t* m, const bpc_host_tensor_t* x, const bpc_host_tensor_t* w,
                          const bpc_host_tensor_t* b, const moments_t* mo, double eps,
                          bpc_expected_t* out) {
  int64_t s, p;
  for (int64_t k = 0; k < x->numel; k++) {
    map_elem(m, k, &s, &p);
    double rstd = 1.0 / sqrt(mo->var[s] + eps);
    double wv = param_or(w, p, 1.0), bv = param_or(b, p, 0.0);
    double d = load_f(x, k) - mo->mean[s];
    out->f[k] = d * rstd * wv + bv;
    /* mean off by n u E|x|, rstd relatively off by n u (two passes) or by
     * n u E[x^2] rstd^2 / 2 (one pass) */
    double sens = fabs(wv) * rstd;
    out->mag[k] = sens * (mo->abs_mean[s] + fabs(d) * (1.0 + 0.5 * mo->sq_mean[s] * rstd * rstd)) +
                  fabs(bv) + fabs(out->f[k]);
    out->nterms[k] = mo->n[s] + 8.0;
  }
}

/* Saved statistics: mean and rstd (or save_invstd). */
static void stats_out(const norm_map_t* m, const moments_t* mo, double eps, bpc_expected_t* mean,
                      bpc_expected_t* rstd) {
  for (int64_t j = 0; j < m->nstat; j++) {
    double r = 1.0 / sqrt(mo->var[j] + eps);
    mean->f[j] = mo->mean[j];
    mean->mag[j] = mo->abs_mean[j];
    mean->nterms[j] = mo->n[j] + 2.0;
    rstd->f[j] = r;
    rstd->mag[j] = r * (1.0 + 0.5 * mo->sq_mean[j] * r * r) + r;
    rstd->nterms[j] = mo->n[j] + 4.0;
  }
}

static int64_t prod(const int64_t* s, uint32_t from, uint32_t to) {
  int64_t n = 1;
  for (uint32_t k = from; k < to; k++) n *= s[k];
  return n;
}

/* ---- batch_norm ------------------------------------------------------------- */
static bp_status_t ref_batch_norm(const bpc_case_t* c, const bpc_host_tensor_t* in,
                                  bpc_ref_result_t* res) {
  const bp_batch_norm_attrs_t* a = &c->attrs.batch_norm;
  const bpc_host_tensor_t *x = &in[0], *w = &in[1], *b = &in[2], *rm = &in[3], *rv = &in[4];
  if (!is_float_io(x->dtype) || x->rank < 2) return bpc_ref_reject(res, "batch_norm: float [N, C, *]");
  int has_stats = rm->dtype != BP_DTYPE_INVALID && rv->dtype != BP_DTYPE_INVALID;
  if (!a->training && !has_stats) return bpc_ref_reject(res, "batch_norm: eval needs running stats");
  const bpc_host_tensor_t* ps[4] = {w, b, rm, rv};
  uint32_t sd;
  bp_status_t st = stat_dtype(x, ps, 4, &sd, res);
  if (st != BP_OK) return st;
  norm_map_t m = {MAP_CHANNELS, prod(x->sizes, 2, x->rank), x->sizes[1], 0, x->sizes[1], x->sizes[1]};
  if (a->training && x->numel == 0 && m.c > 0) {
    return bpc_ref_reject(res, "batch_norm: training statistics of no elements are undefined");
  }
  int64_t ssz[1] = {a->training ? m.c : 0};
  res->num_outputs = 3;
  res->compute_dtype = x->dtype;
  st = bpc_expected_init(&res->out[0], x->dtype, x->rank, x->sizes, 1);
  if (st == BP_OK) st = bpc_expected_init(&res->out[1], sd, 1, ssz, 1);
  if (st == BP_OK) st = bpc_expected_init(&res->out[2], sd, 1, ssz, 1);
  if (st != BP_OK) return st;
  if (a->training) {
    moments_t mo;
    st = moments_compute(&m, x, &mo);
    if (st != BP_OK) return st;
    normalize_out(&m, x, w, b, &mo, a->eps, &res->out[0]);
    stats_out(&m, &mo, a->eps, &res->out[1], &res->out[2]);
    moments_free(&mo);
    return BP_OK;
  }
  /* eval: alpha = w / sqrt(rv + eps), y = x * alpha + (b - rm * alpha) */
  int64_t s, p;
  bpc_expected_t* e = &res->out[0];
  for (int64_t k = 0; k < x->numel; k++) {
    map_elem(&m, k, &s, &p);
    double inv = 1.0 / sqrt(load_f(rv, p) + a->eps);
    double wv = param_or(w, p, 1.0), bv = param_or(b, p, 0.0), mu = load_f(rm, p);
    double xv = load_f(x, k);
    e->f[k] = (xv - mu) * inv * wv + bv;
    e->mag[k] = fabs(wv) * inv * (fabs(xv) + fabs(mu)) + fabs(bv);
    e->nterms[k] = 6.0;
  }
  return BP_OK;
}

/* ---- group_norm --------------------------------------------------------------- */
static bp_status_t group_map(const bpc_case_t* c, const bpc_host_tensor_t* x, norm_map_t* m,
                             bpc_ref_result_t* res) {
  const bp_group_norm_attrs_t* a = &c->attrs.group_norm;
  if (!is_float_io(x->dtype) || x->rank < 2) return bpc_ref_reject(res, "group_norm: float [N, C, *]");
  int64_t hxw = prod(x->sizes, 2, x->rank);
  if (a->n != x->sizes[0] || a->c != x->sizes[1] || a->hxw != hxw || a->group <= 0 ||
      a->c % a->group != 0) {
    return bpc_ref_reject(res, "group_norm: attrs N, C, HxW, group do not fit the input");
  }
  norm_map_t mm = {MAP_GROUPS, hxw, a->c, a->group, a->n * a->group, a->c};
  *m = mm;
  return BP_OK;
}

static bp_status_t ref_group_norm(const bpc_case_t* c, const bpc_host_tensor_t* in,
                                  bpc_ref_result_t* res) {
  const bp_group_norm_attrs_t* a = &c->attrs.group_norm;
  const bpc_host_tensor_t *x = &in[0], *w = &in[1], *b = &in[2];
  norm_map_t m;
  bp_status_t st = group_map(c, x, &m, res);
  if (st != BP_OK) return st;
  if (m.inner * (m.c / m.groups) == 0 && m.nstat > 0) {
    return bpc_ref_reject(res, "group_norm: statistics of empty groups are undefined");
  }
  const bpc_host_tensor_t* ps[2] = {w, b};
  uint32_t sd;
  st = stat_dtype(x, ps, 2, &sd, res);
  if (st != BP_OK) return st;
  int64_t ssz[2] = {a->n, a->group};
  res->num_outputs = 3;
  res->compute_dtype = x->dtype;
  st = bpc_expected_init(&res->out[0], x->dtype, x->rank, x->sizes, 1);
  if (st == BP_OK) st = bpc_expected_init(&res->out[1], sd, 2, ssz, 1);
  if (st == BP_OK) st = bpc_expected_init(&res->out[2], sd, 2, ssz, 1);
  if (st != BP_OK) return st;
  moments_t mo;
  st = moments_compute(&m, x, &mo);
  if (st != BP_OK) return st;
  normalize_out(&m, x, w, b, &mo, a->eps, &res->out[0]);
  stats_out(&m, &mo, a->eps, &res->out[1], &res->out[2]);
  moments_free(&mo);
  return BP_OK;
}

/* ---- layer_norm and rms_norm ------------------------------------------------ */
static bp_status_t ref_layer_norm(const bpc_case_t* c, const bpc_host_tensor_t* in,
                                  bpc_ref_result_t* res) {
  const bp_layer_norm_attrs_t* a = &c->attrs.layer_norm;
  const bpc_host_tensor_t *x = &in[0], *w = &in[1], *b = &in[2];
  uint32_t nr = a->normalized_rank;
  if (!is_float_io(x->dtype) || nr == 0 || nr > x->rank) return bpc_ref_reject(res, "layer_norm: bad rank");
  int64_t inner = prod(x->sizes, x->rank - nr, x->rank);
  if (inner == 0 && x->numel == 0 && prod(x->sizes, 0, x->rank - nr) > 0) {
    return bpc_ref_reject(res, "layer_norm: statistics of empty rows are undefined");
  }
  const bpc_host_tensor_t* ps[2] = {w, b};
  uint32_t sd;
  bp_status_t st = stat_dtype(x, ps, 2, &sd, res);
  if (st != BP_OK) return st;
  int64_t ssz[BP_MAX_RANK];
  memcpy(ssz, x->sizes, sizeof ssz);
  for (uint32_t k = x->rank - nr; k < x->rank; k++) ssz[k] = 1;
  norm_map_t m = {MAP_ROWS, inner > 0 ? inner : 1, 0, 0, inner > 0 ? x->numel / inner : 0, inner};
  res->num_outputs = 3;
  res->compute_dtype = x->dtype;
  st = bpc_expected_init(&res->out[0], x->dtype, x->rank, x->sizes, 1);
  if (st == BP_OK) st = bpc_expected_init(&res->out[1], sd, x->rank, ssz, 1);
  if (st == BP_OK) st = bpc_expected_init(&res->out[2], sd, x->rank, ssz, 1);
  if (st != BP_OK) return st;
  moments_t mo;
  st = moments_compute(&m, x, &mo);
  if (st != BP_OK) return st;
  normalize_out(&m, x, w, b, &mo, a->eps, &res->out[0]);
  stats_out(&m, &mo, a->eps, &res->out[1], &res->out[2]);
  moments_free(&mo);
  return BP_OK;
}

/* machine epsilon of a floating dtype (torch.finfo(dtype).eps) */
static double dtype_eps(uint32_t d) { return ldexp(1.0, -bpc_float_mant_bits(d)); }

/* rms_norm rows of x (trailing nr dims) into e. */
static void rms_rows(const bpc_host_tensor_t* x, const bpc_host_tensor_t* w, uint32_t nr,
                     double eps, bpc_expected_t* e) {
  int64_t inner = prod(x->sizes, x->rank - nr, x->rank);
  for (int64_t r = 0; inner > 0 && r < x->numel / inner; r++) {
    double ss = 0.0;
    for (int64_t j = 0; j < inner; j++) {
      double v = load_f(x, r * inner + j);
      ss += v * v;
    }
    double rr = 1.0 / sqrt(ss / (double)inner + eps);
    for (int64_t j = 0; j < inner; j++) {
      int64_t k = r * inner + j;
      e->f[k] = load_f(x, k) * rr * param_or(w, j, 1.0);
      e->mag[k] = fabs(e->f[k]);
      e->nterms[k] = (double)inner + 8.0;
    }
  }
}

static bp_status_t ref_rms_norm(const bpc_case_t* c, const bpc_host_tensor_t* in,
                                bpc_ref_result_t* res) {
  const bp_rms_norm_attrs_t* a = &c->attrs.rms_norm;
  const bpc_host_tensor_t *x = &in[0], *w = &in[1];
  uint32_t nr = a->normalized_rank;
  if (!is_float_io(x->dtype) || nr == 0 || nr > x->rank) return bpc_ref_reject(res, "rms_norm: bad rank");
  if (w->dtype != BP_DTYPE_INVALID && !is_float_io(w->dtype)) return bpc_ref_reject(res, "rms_norm: weight dtype");
  bp_status_t st = bpc_ref_single_output(res, x->dtype, x->rank, x->sizes, 1, x->dtype);
  if (st != BP_OK) return st;
  rms_rows(x, w, nr, a->eps != 0.0 ? a->eps : dtype_eps(x->dtype), &res->out[0]);
  return BP_OK;
}

/* ---- add_rms_norm, add_layer_norm ----------------------------------------------- */
/* residual_out = input + residual: its expected values into res->out[1] (one
 * rounding of the exact sum), and in *z (dense, the input's dtype) the values
 * it stores, which the norm then reads. Frees nothing on failure; z->data is
 * the caller's to free. */
static bp_status_t residual_sum(const bpc_host_tensor_t* x, const bpc_host_tensor_t* r,
                                bpc_ref_result_t* res, bpc_host_tensor_t* z) {
  if (!is_float_io(x->dtype) || r->dtype != x->dtype || r->numel != x->numel) {
    return bpc_ref_reject(res, "residual must match the input's dtype and shape");
  }
  *z = *x;
  void* data = malloc((size_t)(x->numel > 0 ? x->numel : 1) * bpc_dtype_size(x->dtype));
  if (!data) return BP_RESOURCE_EXHAUSTED;
  z->data = data;
  res->num_outputs = 2;
  res->compute_dtype = x->dtype;
  bp_status_t st = bpc_expected_init(&res->out[0], x->dtype, x->rank, x->sizes, 1);
  if (st == BP_OK) st = bpc_expected_init(&res->out[1], x->dtype, x->rank, x->sizes, 1);
  if (st != BP_OK) return st;
  bpc_expected_t* e = &res->out[1];
  for (int64_t k = 0; k < x->numel; k++) {
    double a = load_f(x, k), b = load_f(r, k);
    e->f[k] = a + b;
    e->mag[k] = fabs(a) + fabs(b);
    e->nterms[k] = 1.0;
    bpc_store(x->dtype, data, k, (bpc_num_t){a + b, 0, 0.0}, BP_DTYPE_F64);
  }
  return BP_OK;
}

static bp_status_t ref_add_rms_norm(const bpc_case_t* c, const bpc_host_tensor_t* in,
                                    bpc_ref_result_t* res) {
  const bp_rms_norm_attrs_t* a = &c->attrs.rms_norm;
  const bpc_host_tensor_t *x = &in[0], *w = &in[2];
  uint32_t nr = a->normalized_rank;
  if (!is_float_io(x->dtype) || nr == 0 || nr > x->rank) return bpc_ref_reject(res, "add_rms_norm: bad rank");
  if (w->dtype != BP_DTYPE_INVALID && !is_float_io(w->dtype)) return bpc_ref_reject(res, "add_rms_norm: weight dtype");
  bpc_host_tensor_t z;
  memset(&z, 0, sizeof z);
  bp_status_t st = residual_sum(x, &in[1], res, &z);
  if (st == BP_OK) rms_rows(&z, w, nr, a->eps != 0.0 ? a->eps : dtype_eps(x->dtype), &res->out[0]);
  free((void*)z.data);
  return st;
}

static bp_status_t ref_add_layer_norm(const bpc_case_t* c, const bpc_host_tensor_t* in,
                                      bpc_ref_result_t* res) {
  const bp_layer_norm_attrs_t* a = &c->attrs.layer_norm;
  const bpc_host_tensor_t *x = &in[0], *w = &in[2], *b = &in[3];
  uint32_t nr = a->normalized_rank;
  if (!is_float_io(x->dtype) || nr == 0 || nr > x->rank) return bpc_ref_reject(res, "add_layer_norm: bad rank");
  const bpc_host_tensor_t* ps[2] = {w, b};
  uint32_t sd;
  bp_status_t st = stat_dtype(x, ps, 2, &sd, res);
  if (st != BP_OK) return st;
  bpc_host_tensor_t z;
  memset(&z, 0, sizeof z);
  st = residual_sum(x, &in[1], res, &z);
  int64_t inner = prod(x->sizes, x->rank - nr, x->rank);
  if (st == BP_OK && inner > 0) {
    norm_map_t m = {MAP_ROWS, inner, 0, 0, x->numel / inner, inner};
    moments_t mo;
    st = moments_compute(&m, &z, &mo);
    if (st == BP_OK) {
      normalize_out(&m, &z, w, b, &mo, a->eps, &res->out[0]);
      moments_free(&mo);
    }
  }
  free((void*)z.data);
  return st;
}

/* ---- backward ---------------------------------------------------------------------- */
/* Shared by layer_norm_backward and group_norm_backward: dx, dw, db for the
 * map m with the given mean/rstd (one per statistic, dense). */
static bp_status_t norm_backward(const norm_map_t* m, const bpc_host_tensor_t* dy,
                                 const bpc_host_tensor_t* x, const bpc_host_tensor_t* mean,
                                 const bpc_host_tensor_t* rstd, const bpc_host_tensor_t* w,
                                 uint32_t mask, bpc_ref_result_t* res) {
  size_t ns = (size_t)(m->nstat > 0 ? m->nstat : 1);
  /* per statistic: means of dy*w, dy*w*xhat, |dy*w|, |dy*w*xhat| and
   * |dy*w| * (|x| + |mean|) * rstd (the scale of xhat's rounding), count */
  enum { S1, S2, A1, A2, A3, CNT, NSUM };
  double* sum = calloc(ns * NSUM, sizeof(double));
  if (!sum) return BP_RESOURCE_EXHAUSTED;
  int64_t s, p;
  for (int64_t k = 0; k < x->numel; k++) {
    map_elem(m, k, &s, &p);
    double mu = load_f(mean, s), r = load_f(rstd, s), xv = load_f(x, k);
    double xh = (xv - mu) * r;
    double g = load_f(dy, k) * param_or(w, p, 1.0);
    double* q = &sum[s * NSUM];
    q[S1] += g;
    q[S2] += g * xh;
    q[A1] += fabs(g);
    q[A2] += fabs(g * xh);
    q[A3] += fabs(g) * (fabs(xv) + fabs(mu)) * fabs(r);
    q[CNT] += 1.0;
  }
  for (int64_t j = 0; j < m->nstat; j++) {
    double* q = &sum[j * NSUM];
    for (int i = 0; i < CNT && q[CNT] > 0; i++) q[i] /= q[CNT];
  }
  bpc_expected_t *dx = &res->out[0], *dw = &res->out[1], *db = &res->out[2];
  for (int64_t k = 0; k < x->numel; k++) {
    map_elem(m, k, &s, &p);
    double mu = load_f(mean, s), r = load_f(rstd, s);
    double xv = load_f(x, k), xh = (xv - mu) * r;
    double wv = param_or(w, p, 1.0), gy = load_f(dy, k), g = gy * wv;
    const double* q = &sum[s * NSUM];
    if (mask & 1u) {
      dx->f[k] = r * (g - q[S1] - xh * q[S2]);
      double xh_mag = (fabs(xv) + fabs(mu)) * fabs(r); /* xhat's rounding scale */
      dx->mag[k] = fabs(r) * (fabs(g) + q[A1] + xh_mag * fabs(q[S2]) + fabs(xh) * (q[A2] + q[A3]));
      dx->nterms[k] = q[CNT] + 8.0;
    }
    if (mask & 2u) {
      dw->f[p] += gy * xh;
      dw->mag[p] += fabs(gy) * (fabs(xv) + fabs(mu)) * fabs(r);
      dw->nterms[p] += 1.0;
    }
    if (mask & 4u) {
      db->f[p] += gy;
      db->mag[p] += fabs(gy);
      db->nterms[p] += 1.0;
    }
  }
  for (int k = 1; k <= 2; k++) {
    bpc_expected_t* e = &res->out[k];
    if (!(mask & (1u << k))) continue;
    for (int64_t j = 0; j < e->numel; j++) e->nterms[j] += 4.0;
  }
  free(sum);
  return BP_OK;
}

/* Outputs of a backward op: each [0] unless its mask bit is set. */
static bp_status_t backward_outputs(bpc_ref_result_t* res, uint32_t mask, const bpc_host_tensor_t* x,
                                    uint32_t wdtype, uint32_t bdtype, uint32_t prank,
                                    const int64_t* psizes) {
  static const int64_t zero[1] = {0};
  res->num_outputs = 3;
  res->compute_dtype = x->dtype;
  bp_status_t st = (mask & 1u) ? bpc_expected_init(&res->out[0], x->dtype, x->rank, x->sizes, 1)
                               : bpc_expected_init(&res->out[0], x->dtype, 1, zero, 1);
  if (st == BP_OK) {
    st = (mask & 2u) ? bpc_expected_init(&res->out[1], wdtype, prank, psizes, 1)
                     : bpc_expected_init(&res->out[1], wdtype, 1, zero, 1);
  }
  if (st == BP_OK) {
    st = (mask & 4u) ? bpc_expected_init(&res->out[2], bdtype, prank, psizes, 1)
                     : bpc_expected_init(&res->out[2], bdtype, 1, zero, 1);
  }
  return st;
}

static bp_status_t ref_layer_norm_backward(const bpc_case_t* c, const bpc_host_tensor_t* in,
                                           bpc_ref_result_t* res) {
  const bp_layer_norm_attrs_t* a = &c->attrs.layer_norm;
  const bpc_host_tensor_t *dy = &in[0], *x = &in[1], *mean = &in[2], *rstd = &in[3], *w = &in[4],
                          *b = &in[5];
  uint32_t nr = a->normalized_rank;
  if (!is_float_io(x->dtype) || nr == 0 || nr > x->rank || a->output_mask > 7) {
    return bpc_ref_reject(res, "layer_norm_backward: bad input");
  }
  int64_t inner = prod(x->sizes, x->rank - nr, x->rank);
  int64_t rows = prod(x->sizes, 0, x->rank - nr);
  if (mean->numel != rows || rstd->numel != rows) return bpc_ref_reject(res, "layer_norm_backward: stats");
  norm_map_t m = {MAP_ROWS, inner > 0 ? inner : 1, 0, 0, rows, inner};
  uint32_t wd = w->dtype != BP_DTYPE_INVALID ? w->dtype : x->dtype;
  uint32_t bd = b->dtype != BP_DTYPE_INVALID ? b->dtype : x->dtype;
  bp_status_t st = backward_outputs(res, a->output_mask, x, wd, bd, nr, x->sizes + x->rank - nr);
  if (st != BP_OK) return st;
  return norm_backward(&m, dy, x, mean, rstd, w, a->output_mask, res);
}

static bp_status_t ref_group_norm_backward(const bpc_case_t* c, const bpc_host_tensor_t* in,
                                           bpc_ref_result_t* res) {
  const bp_group_norm_attrs_t* a = &c->attrs.group_norm;
  const bpc_host_tensor_t *dy = &in[0], *x = &in[1], *mean = &in[2], *rstd = &in[3], *w = &in[4];
  norm_map_t m;
  bp_status_t st = group_map(c, x, &m, res);
  if (st != BP_OK) return st;
  if (a->output_mask > 7 || mean->numel != m.nstat || rstd->numel != m.nstat) {
    return bpc_ref_reject(res, "group_norm_backward: bad input");
  }
  uint32_t wd = w->dtype != BP_DTYPE_INVALID ? w->dtype : x->dtype;
  int64_t csz[1] = {a->c};
  st = backward_outputs(res, a->output_mask, x, wd, wd, 1, csz);
  if (st != BP_OK) return st;
  return norm_backward(&m, dy, x, mean, rstd, w, a->output_mask, res);
}

/* ---- cross_entropy ----------------------------------------------------------------- */
/* log_softmax over the class dim, then nll with weights, ignore_index and
 * label smoothing (PyTorch's cross_entropy_loss_label_smoothing when
 * label_smoothing > 0, else nll_loss_nd). */
static bp_status_t ref_cross_entropy(const bpc_case_t* c, const bpc_host_tensor_t* in,
                                     bpc_ref_result_t* res) {
  const bp_cross_entropy_attrs_t* a = &c->attrs.cross_entropy;
  const bpc_host_tensor_t *x = &in[0], *t = &in[1], *w = &in[2];
  if (!is_float_io(x->dtype) || x->rank < 1 || t->dtype != BP_DTYPE_I64) {
    return bpc_ref_reject(res, "cross_entropy: float logits, i64 target");
  }
  if (a->reduction > BP_LOSS_SUM || !(a->label_smoothing >= 0.0 && a->label_smoothing <= 1.0)) {
    return bpc_ref_reject(res, "cross_entropy: bad attributes");
  }
  uint32_t cdim = x->rank == 1 ? 0 : 1;
  int64_t C = x->sizes[cdim];
  int64_t inner = prod(x->sizes, cdim + 1, x->rank);
  int64_t outer = cdim == 1 ? x->sizes[0] : 1;
  int64_t npos = outer * inner;
  double ls = a->label_smoothing;
  bp_status_t st = a->reduction == BP_LOSS_NONE
                       ? bpc_ref_single_output(res, x->dtype, t->rank, t->sizes, 1, x->dtype)
                       : bpc_ref_single_output(res, x->dtype, 0, NULL, 1, x->dtype);
  if (st != BP_OK) return st;
  bpc_expected_t* e = &res->out[0];
  double tot = 0.0, tot_mag = 0.0, wsum = 0.0;
  for (int64_t o = 0; o < outer; o++) {
    for (int64_t i = 0; i < inner; i++) {
      int64_t pos = o * inner + i;
      int64_t base = o * C * inner + i;
      int64_t tg = bpc_load(BP_DTYPE_I64, t->data, pos).i;
      double loss = 0.0, mag = 0.0;
      if (tg != a->ignore_index) {
        if (tg < 0 || tg >= C) return bpc_ref_reject(res, "cross_entropy: target %lld out of range", (long long)tg);
        double mx = -INFINITY;
        int nan = 0;
        for (int64_t j = 0; j < C; j++) {
          double v = load_f(x, base + j * inner);
          if (isnan(v)) nan = 1;
          else if (v > mx) mx = v;
        }
        double se = 0.0;
        for (int64_t j = 0; j < C; j++) se += exp(load_f(x, base + j * inner) - mx);
        double lse = mx + log(se);
        double wt = param_or(w, tg, 1.0);
        double lp = load_f(x, base + tg * inner) - lse;
        loss = -(1.0 - ls) * wt * lp;
        mag = fabs(wt) * (fabs(lp) + fabs(load_f(x, base + tg * inner)) + fabs(mx) + 1.0);
        if (ls > 0.0) {
          double sm = 0.0, smag = 0.0;
          for (int64_t j = 0; j < C; j++) {
            double wj = param_or(w, j, 1.0), lpj = load_f(x, base + j * inner) - lse;
            sm -= wj * lpj;
            smag += fabs(wj) * (fabs(lpj) + fabs(load_f(x, base + j * inner)) + fabs(mx) + 1.0);
          }
          loss += ls / (double)C * sm;
          mag += ls / (double)C * smag;
        }
        if (nan) loss = NAN;
        wsum += wt;
      }
      if (a->reduction == BP_LOSS_NONE) {
        e->f[pos] = loss;
        e->mag[pos] = mag;
        e->nterms[pos] = (double)C + 8.0;
      }
      tot += loss;
      tot_mag += mag;
    }
  }
  if (a->reduction != BP_LOSS_NONE) {
    double div = a->reduction == BP_LOSS_MEAN ? wsum : 1.0;
    e->f[0] = tot / div;
    e->mag[0] = tot_mag / fabs(div) + fabs(e->f[0]);
    e->nterms[0] = (double)C + (double)npos + 8.0;
    if (a->reduction == BP_LOSS_MEAN && w->dtype != BP_DTYPE_INVALID) e->nterms[0] += (double)npos;
  }
  return BP_OK;
}

static const bpc_ref_group_t k_groups[] = {
    {ref_batch_norm, BPC_ACC_REDUCE, 0, BPC_OPS(BP_OP_batch_norm), bpc_gen_norm, NULL},
    {ref_group_norm, BPC_ACC_REDUCE, 0, BPC_OPS(BP_OP_group_norm), bpc_gen_norm, NULL},
    {ref_group_norm_backward, BPC_ACC_REDUCE, 0, BPC_OPS(BP_OP_group_norm_backward), bpc_gen_norm, NULL},
    {ref_layer_norm, BPC_ACC_REDUCE, 0, BPC_OPS(BP_OP_layer_norm), bpc_gen_norm, NULL},
    {ref_layer_norm_backward, BPC_ACC_REDUCE, 0, BPC_OPS(BP_OP_layer_norm_backward), bpc_gen_norm, NULL},
    {ref_rms_norm, BPC_ACC_REDUCE, 0, BPC_OPS(BP_OP_rms_norm), bpc_gen_norm, NULL},
    {ref_add_rms_norm, BPC_ACC_REDUCE, 0, BPC_OPS(BP_OP_add_rms_norm), bpc_gen_norm, NULL},
    {ref_add_layer_norm, BPC_ACC_REDUCE, 0, BPC_OPS(BP_OP_add_layer_norm), bpc_gen_norm, NULL},
    {ref_cross_entropy, BPC_ACC_REDUCE, 0, BPC_OPS(BP_OP_cross_entropy), bpc_gen_norm, NULL},
};
const bpc_ref_family_t bpc_ref_family_norm = BPC_FAMILY(norm, k_groups);
