/* References of the reduce_ext family: max.dim, min.dim, var, cumsum, sort,
 * topk and logsumexp. Plain loops in double (floating values) or exact
 * int64 (integers and bool, wrapping like the output dtype).
 *
 * Orders used by sort, topk, max.dim and min.dim (docs/semantics.md,
 * "Sorting"): NaN is larger than every number, -0 and +0 are equal, and
 * equal keys keep their input order (every backplane sort is stable).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ref.h"

void bpc_gen_reduce_ext(struct bpc_gen* g);

/* A tensor seen as [outer, len, inner] around dim `dim` (0-d: one element). */
typedef struct rows {
  int64_t outer, len, inner;
  uint32_t dim;
} rows_t;

static bp_status_t rows_of(const bpc_host_tensor_t* t, int64_t dim, rows_t* r,
                           bpc_ref_result_t* res) {
  int64_t rank = t->rank == 0 ? 1 : (int64_t)t->rank;
  if (dim < -rank || dim >= rank) return bpc_ref_reject(res, "dim %lld out of range", (long long)dim);
  if (dim < 0) dim += rank;
  r->dim = (uint32_t)dim;
  r->outer = r->inner = 1;
  r->len = t->rank == 0 ? 1 : t->sizes[dim];
  for (uint32_t d = 0; d < t->rank; d++) {
    if (d < r->dim) r->outer *= t->sizes[d];
    if (d > r->dim) r->inner *= t->sizes[d];
  }
  return BP_OK;
}

static int is_fp8(uint32_t d) { return d == BP_DTYPE_F8E4M3FN || d == BP_DTYPE_F8E5M2; }

/* Total order of the sorting ops on values of one dtype: -1, 0 or 1. */
static int cmp_num(uint32_t dtype, bpc_num_t a, bpc_num_t b) {
  if (bpc_dtype_is_float(dtype)) {
    int na = isnan(a.f) != 0, nb = isnan(b.f) != 0;
    if (na || nb) return na - nb;
    return a.f < b.f ? -1 : a.f > b.f ? 1 : 0;
  }
  return a.i < b.i ? -1 : a.i > b.i ? 1 : 0;
}

/* Stable insertion sort of one row's positions by value (descending when
 * `desc`): perm[0..n) receives indices into vals. */
static void sort_row(uint32_t dtype, const bpc_num_t* vals, int64_t n, int desc, int64_t* perm) {
  for (int64_t i = 0; i < n; i++) {
    int64_t j = i;
    while (j > 0) {
      int c = cmp_num(dtype, vals[perm[j - 1]], vals[i]);
      if (desc ? c >= 0 : c <= 0) break;
      perm[j] = perm[j - 1];
      j--;
    }
    perm[j] = i;
  }
}

static void put(bpc_expected_t* e, int64_t k, bpc_num_t v) {
  if (e->f) e->f[k] = v.f;
  else e->i[k] = v.i;
}

static bp_status_t two_outputs(bpc_ref_result_t* res, uint32_t dtype, uint32_t rank,
                               const int64_t* sizes) {
  bp_status_t st = bpc_expected_init(&res->out[0], dtype, rank, sizes, 0);
  if (st != BP_OK) return st;
  res->num_outputs = 1;
  st = bpc_expected_init(&res->out[1], BP_DTYPE_I64, rank, sizes, 0);
  if (st != BP_OK) return st;
  res->num_outputs = 2;
  res->compute_dtype = dtype;
  return BP_OK;
}

/* ---- max.dim / min.dim ---------------------------------------------------- */
/* values = the extreme along the dim, indices = its first position; a NaN
 * is the extreme either way (the first NaN). */
static bp_status_t ref_max_dim(const bpc_case_t* c, const bpc_host_tensor_t* in,
                               bpc_ref_result_t* res) {
  const bpc_host_tensor_t* t = &in[0];
  const bp_reduce_attrs_t* a = &c->attrs.reduce;
  int is_max = c->op_id == BP_OP_max_dim;
  if (is_fp8(t->dtype) || t->dtype == BP_DTYPE_C64) {
    return bpc_ref_reject(res, "max.dim/min.dim over %s", bpc_dtype_name(t->dtype));
  }
  if ((a->flags & BP_REDUCE_ALL_DIMS) || a->num_dims != 1) {
    return bpc_ref_reject(res, "max.dim/min.dim take exactly one dim");
  }
  rows_t r = {0, 0, 0, 0};
  bp_status_t st = rows_of(t, a->dims[0], &r, res);
  if (st != BP_OK) return st;
  uint32_t rank = 0;
  int64_t sizes[BP_MAX_RANK];
  for (uint32_t d = 0; d < t->rank; d++) {
    if (d != r.dim) sizes[rank++] = t->sizes[d];
    else if (a->flags & BP_REDUCE_KEEPDIM) sizes[rank++] = 1;
  }
  if (r.len == 0 && r.outer * r.inner != 0) return bpc_ref_reject(res, "max.dim of an empty dim");
  st = two_outputs(res, t->dtype, rank, sizes);
  if (st != BP_OK) return st;
  for (int64_t o = 0; o < r.outer; o++) {
    for (int64_t i = 0; i < r.inner; i++) {
      int64_t best = 0;
      bpc_num_t bv = bpc_load(t->dtype, t->data, o * r.len * r.inner + i);
      for (int64_t j = 1; j < r.len; j++) {
        bpc_num_t v = bpc_load(t->dtype, t->data, (o * r.len + j) * r.inner + i);
        int take;
        if (bpc_dtype_is_float(t->dtype)) {
          take = !isnan(bv.f) && (isnan(v.f) || (is_max ? v.f > bv.f : v.f < bv.f));
        } else {
          take = is_max ? v.i > bv.i : v.i < bv.i;
        }
        if (take) {
          best = j;
          bv = v;
        }
      }
      put(&res->out[0], o * r.inner + i, bv);
      res->out[1].i[o * r.inner + i] = best;
    }
  }
  return BP_OK;
}

/* ---- var and logsumexp ------------------------------------------------------ */
typedef struct red_map {
  uint8_t mask[BP_MAX_RANK];
  uint32_t out_rank;
  int64_t out_sizes[BP_MAX_RANK];
  int64_t group;
} red_map_t;

static bp_status_t map_reduce(const bpc_case_t* c, const bpc_host_tensor_t* t, red_map_t* m,
                              bpc_ref_result_t* res) {
  const bp_reduce_attrs_t* a = &c->attrs.reduce;
  bp_status_t st = bpc_ref_reduce_dims(a, t->rank, 1, m->mask, res);
  if (st != BP_OK) return st;
  m->out_rank = 0;
  m->group = 1;
  for (uint32_t d = 0; d < t->rank; d++) {
    if (m->mask[d]) {
      m->group *= t->sizes[d];
      if (a->flags & BP_REDUCE_KEEPDIM) m->out_sizes[m->out_rank++] = 1;
    } else {
      m->out_sizes[m->out_rank++] = t->sizes[d];
    }
  }
  return BP_OK;
}

static int64_t out_of(const bpc_host_tensor_t* t, const red_map_t* m, const int64_t* idx) {
  int64_t lin = 0;
  for (uint32_t d = 0; d < t->rank; d++) {
    if (!m->mask[d]) lin = lin * t->sizes[d] + idx[d];
  }
  return lin;
}

/* var: sum((x - mean)^2) / max(0, n - correction), two passes in double.
 * A zero divisor gives inf (or NaN when the sum is 0), as PyTorch. */
static bp_status_t ref_var(const bpc_case_t* c, const bpc_host_tensor_t* in, bpc_ref_result_t* res) {
  const bpc_host_tensor_t* t = &in[0];
  if (!bpc_dtype_is_float(t->dtype) || is_fp8(t->dtype)) {
    return bpc_ref_reject(res, "var needs a floating input, got %s", bpc_dtype_name(t->dtype));
  }
  if (c->attrs.reduce.dtype != BP_DTYPE_INVALID) return bpc_ref_reject(res, "var takes no dtype");
  red_map_t m;
  bp_status_t st = map_reduce(c, t, &m, res);
  if (st != BP_OK) return st;
  st = bpc_ref_single_output(res, t->dtype, m.out_rank, m.out_sizes, 1, t->dtype);
  if (st != BP_OK) return st;
  bpc_expected_t* e = &res->out[0];
  double* mean = calloc((size_t)(e->numel > 0 ? e->numel : 1), sizeof *mean);
  if (!mean) return BP_RESOURCE_EXHAUSTED;
  int64_t idx[BP_MAX_RANK] = {0};
  for (int64_t k = 0; k < t->numel; k++, bpc_next_index(t->rank, t->sizes, idx)) {
    mean[out_of(t, &m, idx)] += bpc_load(t->dtype, t->data, k).f;
  }
  for (int64_t o = 0; o < e->numel; o++) mean[o] /= (double)m.group;
  memset(idx, 0, sizeof idx);
  for (int64_t k = 0; k < t->numel; k++, bpc_next_index(t->rank, t->sizes, idx)) {
    int64_t o = out_of(t, &m, idx);
    double dv = bpc_load(t->dtype, t->data, k).f - mean[o];
    e->f[o] += dv * dv;
  }
  double div = (double)m.group - c->attrs.reduce.correction;
  if (div < 0) div = 0;
  for (int64_t o = 0; o < e->numel; o++) {
    e->f[o] /= div;
    e->mag[o] = fabs(e->f[o]);
    e->nterms[o] = (double)m.group + 4.0;
  }
  free(mean);
  return BP_OK;
}

/* logsumexp: m + log(sum exp(x - m)) with m the row's maximum (0 when it is
 * infinite); NaN propagates, an empty reduction gives -inf. */
static bp_status_t ref_logsumexp(const bpc_case_t* c, const bpc_host_tensor_t* in,
                                 bpc_ref_result_t* res) {
  const bpc_host_tensor_t* t = &in[0];
  uint32_t d = t->dtype;
  if (is_fp8(d) || d == BP_DTYPE_C64) return bpc_ref_reject(res, "logsumexp over %s", bpc_dtype_name(d));
  if (c->attrs.reduce.dtype != BP_DTYPE_INVALID) return bpc_ref_reject(res, "logsumexp takes no dtype");
  uint32_t out = bpc_dtype_is_float(d) ? d : BP_DTYPE_F32;
  red_map_t m;
  bp_status_t st = map_reduce(c, t, &m, res);
  if (st != BP_OK) return st;
  st = bpc_ref_single_output(res, out, m.out_rank, m.out_sizes, 1, out);
  if (st != BP_OK) return st;
  bpc_expected_t* e = &res->out[0];
  size_t n = (size_t)(e->numel > 0 ? e->numel : 1);
  double* mx = malloc(n * sizeof *mx);
  double* dev = calloc(n, sizeof *dev);
  uint8_t* nan = calloc(n, 1);
  if (!mx || !dev || !nan) {
    free(mx), free(dev), free(nan);
    return BP_RESOURCE_EXHAUSTED;
  }
  for (size_t o = 0; o < n; o++) mx[o] = -INFINITY;
  int64_t idx[BP_MAX_RANK] = {0};
  for (int64_t k = 0; k < t->numel; k++, bpc_next_index(t->rank, t->sizes, idx)) {
    int64_t o = out_of(t, &m, idx);
    double x = bpc_convert(bpc_load(d, t->data, k), d, BP_DTYPE_F64).f;
    if (isnan(x)) nan[o] = 1;
    else if (x > mx[o]) mx[o] = x;
  }
  for (size_t o = 0; o < n; o++) {
    if (isinf(mx[o])) mx[o] = 0.0;
  }
  memset(idx, 0, sizeof idx);
  for (int64_t k = 0; k < t->numel; k++, bpc_next_index(t->rank, t->sizes, idx)) {
    int64_t o = out_of(t, &m, idx);
    double x = bpc_convert(bpc_load(d, t->data, k), d, BP_DTYPE_F64).f - mx[o];
    e->f[o] += exp(x);
    if (isfinite(x) && fabs(x) > dev[o]) dev[o] = fabs(x);
  }
  for (int64_t o = 0; o < e->numel; o++) {
    double ls = log(e->f[o]);
    e->f[o] = nan[o] ? NAN : ls + mx[o];
    /* Absolute error: the sum's (n terms), exp's of the rounded x - m, and
     * the final addition of m and log(sum). */
    e->mag[o] = 1.0;
    e->nterms[o] = (double)m.group + 8.0 + dev[o] + (isfinite(ls) ? 2.0 * (fabs(ls) + fabs(mx[o])) : 0.0);
  }
  free(mx), free(dev), free(nan);
  return BP_OK;
}

/* ---- cumsum --------------------------------------------------------------- */
/* Each input element is first converted to the output dtype (PyTorch's
 * self.to(dtype)), then prefix sums run exactly (double for floating
 * outputs, wrapping int64 for integers). */
static bp_status_t ref_cumsum(const bpc_case_t* c, const bpc_host_tensor_t* in, bpc_ref_result_t* res) {
  const bpc_host_tensor_t* t = &in[0];
  const bp_dim_attrs_t* a = &c->attrs.dim;
  uint32_t d = t->dtype, out = a->dtype;
  if (is_fp8(d) || d == BP_DTYPE_C64) return bpc_ref_reject(res, "cumsum over %s", bpc_dtype_name(d));
  if (out == BP_DTYPE_INVALID) out = bpc_dtype_is_float(d) ? d : BP_DTYPE_I64;
  if (is_fp8(out) || out == BP_DTYPE_C64 || out == BP_DTYPE_BOOL) {
    return bpc_ref_reject(res, "cumsum to %s", bpc_dtype_name(out));
  }
  rows_t r = {0, 0, 0, 0};
  bp_status_t st = rows_of(t, a->dim, &r, res);
  if (st != BP_OK) return st;
  st = bpc_ref_single_output(res, out, t->rank, t->sizes, 1, out);
  if (st != BP_OK) return st;
  bpc_expected_t* e = &res->out[0];
  for (int64_t o = 0; o < r.outer; o++) {
    for (int64_t i = 0; i < r.inner; i++) {
      double s = 0.0, mag = 0.0;
      int64_t si = 0;
      for (int64_t j = 0; j < r.len; j++) {
        int64_t k = (o * r.len + j) * r.inner + i;
        bpc_num_t v = bpc_convert(bpc_load(d, t->data, k), d, out);
        if (e->f) {
          s += v.f;
          mag += fabs(v.f);
          e->f[k] = s;
          e->mag[k] = mag;
          e->nterms[k] = (double)(j + 1);
        } else {
          si = bpc_wrap_int((int64_t)((uint64_t)si + (uint64_t)v.i), out);
          e->i[k] = si;
        }
      }
    }
  }
  return BP_OK;
}

/* ---- sort and topk --------------------------------------------------------- */
/* Sorts every row along the dim (stable); topk keeps the first k of the
 * descending (largest) or ascending (smallest) order. */
static bp_status_t ref_sort(const bpc_case_t* c, const bpc_host_tensor_t* in, bpc_ref_result_t* res) {
  const bpc_host_tensor_t* t = &in[0];
  int is_topk = c->op_id == BP_OP_topk;
  if (is_fp8(t->dtype) || t->dtype == BP_DTYPE_C64 || (is_topk && t->dtype == BP_DTYPE_BOOL)) {
    return bpc_ref_reject(res, "%s over %s", is_topk ? "topk" : "sort", bpc_dtype_name(t->dtype));
  }
  int64_t dim = is_topk ? c->attrs.topk.dim : c->attrs.sort.dim;
  int desc = is_topk ? c->attrs.topk.largest != 0 : c->attrs.sort.descending != 0;
  rows_t r = {0, 0, 0, 0};
  bp_status_t st = rows_of(t, dim, &r, res);
  if (st != BP_OK) return st;
  int64_t k = r.len;
  if (is_topk) {
    k = c->attrs.topk.k;
    if (k < 0 || k > r.len) return bpc_ref_reject(res, "topk: k = %lld out of range", (long long)k);
  }
  int64_t sizes[BP_MAX_RANK];
  memcpy(sizes, t->sizes, sizeof sizes);
  if (t->rank) sizes[r.dim] = k;
  st = two_outputs(res, t->dtype, t->rank, sizes);
  if (st != BP_OK) return st;
  size_t n = (size_t)(r.len > 0 ? r.len : 1);
  bpc_num_t* vals = malloc(n * sizeof *vals);
  int64_t* perm = malloc(n * sizeof *perm);
  if (!vals || !perm) {
    free(vals), free(perm);
    return BP_RESOURCE_EXHAUSTED;
  }
  for (int64_t o = 0; o < r.outer; o++) {
    for (int64_t i = 0; i < r.inner; i++) {
      for (int64_t j = 0; j < r.len; j++) vals[j] = bpc_load(t->dtype, t->data, (o * r.len + j) * r.inner + i);
      sort_row(t->dtype, vals, r.len, desc, perm);
      for (int64_t j = 0; j < k; j++) {
        int64_t dst = (o * k + j) * r.inner + i;
        put(&res->out[0], dst, vals[perm[j]]);
        res->out[1].i[dst] = perm[j];
      }
    }
  }
  free(vals), free(perm);
  return BP_OK;
}

/* topk's valid answers are not unique when values tie: the values must
 * match the reference exactly (as a multiset per row when attrs.sorted is
 * 0), and every index must be in range, distinct within its row and point
 * at an element equal to the value beside it (bit for bit, so -0 and +0 are
 * told apart there). */
static void check_topk(const bpc_case_t* c, const bpc_host_tensor_t* in, const bpc_ref_result_t* ref,
                       const void* const* got, const bpc_tolerance_t* tol, bpc_check_t* out) {
  (void)tol;
  const bpc_host_tensor_t* t = &in[0];
  uint32_t dt = t->dtype;
  rows_t r = {0, 0, 0, 0};
  bpc_ref_result_t scratch;
  out->status = BPC_FAIL;
  if (rows_of(t, c->attrs.topk.dim, &r, &scratch) != BP_OK) {
    snprintf(out->message, sizeof out->message, "topk check: bad dim");
    return;
  }
  int64_t k = c->attrs.topk.k;
  int desc = c->attrs.topk.largest != 0;
  size_t cap = (size_t)(k > 0 ? k : 1);
  bpc_num_t* gv = malloc(cap * sizeof *gv);
  bpc_num_t* rv = malloc(cap * sizeof *rv);
  int64_t* pg = malloc(cap * sizeof *pg);
  int64_t* pr = malloc(cap * sizeof *pr);
  uint8_t* used = calloc((size_t)(r.len > 0 ? r.len : 1), 1);
  if (!gv || !rv || !pg || !pr || !used) {
    out->status = BPC_RESOURCE_ERROR;
    snprintf(out->message, sizeof out->message, "topk check: out of memory");
    goto cleanup;
  }
  for (int64_t o = 0; o < r.outer; o++) {
    for (int64_t i = 0; i < r.inner; i++) {
      memset(used, 0, (size_t)(r.len > 0 ? r.len : 1));
      for (int64_t j = 0; j < k; j++) {
        int64_t p = (o * k + j) * r.inner + i;
        gv[j] = bpc_load(dt, got[0], p);
        memset(&rv[j], 0, sizeof rv[j]);
        if (ref->out[0].f) rv[j].f = ref->out[0].f[p];
        else rv[j].i = ref->out[0].i[p];
        int64_t ix = bpc_load(BP_DTYPE_I64, got[1], p).i;
        if (ix < 0 || ix >= r.len || used[ix]) {
          snprintf(out->message, sizeof out->message,
                   "indices[%lld] = %lld is out of range or repeated in its row", (long long)p,
                   (long long)ix);
          out->worst_index = p;
          goto cleanup;
        }
        used[ix] = 1;
        bpc_num_t sv = bpc_load(dt, t->data, (o * r.len + ix) * r.inner + i);
        int same = bpc_dtype_is_float(dt)
                       ? ((isnan(sv.f) && isnan(gv[j].f)) ||
                          (sv.f == gv[j].f && signbit(sv.f) == signbit(gv[j].f)))
                       : sv.i == gv[j].i;
        if (!same) {
          snprintf(out->message, sizeof out->message,
                   "values[%lld] = %.17g but self at index %lld holds %.17g", (long long)p,
                   bpc_dtype_is_float(dt) ? gv[j].f : (double)gv[j].i, (long long)ix,
                   bpc_dtype_is_float(dt) ? sv.f : (double)sv.i);
          out->worst_index = p;
          goto cleanup;
        }
      }
      /* Values against the reference, in order or as multisets. */
      if (c->attrs.topk.sorted) {
        for (int64_t j = 0; j < k; j++) pg[j] = pr[j] = j;
      } else {
        sort_row(dt, gv, k, desc, pg);
        sort_row(dt, rv, k, desc, pr);
      }
      for (int64_t j = 0; j < k; j++) {
        if (cmp_num(dt, gv[pg[j]], rv[pr[j]]) != 0) {
          int64_t p = (o * k + j) * r.inner + i;
          snprintf(out->message, sizeof out->message, "values[%lld] = %.17g, expected %.17g%s",
                   (long long)p, bpc_dtype_is_float(dt) ? gv[pg[j]].f : (double)gv[pg[j]].i,
                   bpc_dtype_is_float(dt) ? rv[pr[j]].f : (double)rv[pr[j]].i,
                   c->attrs.topk.sorted ? "" : " (compared as a sorted multiset)");
          out->worst_index = p;
          goto cleanup;
        }
      }
    }
  }
  out->status = BPC_PASS;
  out->mismatches = 0;
cleanup:
  free(gv), free(rv), free(pg), free(pr), free(used);
}

static const bpc_ref_group_t k_groups[] = {
    {ref_max_dim, BPC_ACC_EXACT, 0, BPC_OPS(BP_OP_max_dim, BP_OP_min_dim), bpc_gen_reduce_ext, NULL},
    {ref_var, BPC_ACC_REDUCE, 0, BPC_OPS(BP_OP_var), bpc_gen_reduce_ext, NULL},
    {ref_cumsum, BPC_ACC_REDUCE, 0, BPC_OPS(BP_OP_cumsum), bpc_gen_reduce_ext, NULL},
    {ref_sort, BPC_ACC_EXACT, 0, BPC_OPS(BP_OP_sort), bpc_gen_reduce_ext, NULL},
    {ref_sort, BPC_ACC_EXACT, 0, BPC_OPS(BP_OP_topk), bpc_gen_reduce_ext, check_topk},
    {ref_logsumexp, BPC_ACC_REDUCE, 0, BPC_OPS(BP_OP_logsumexp), bpc_gen_reduce_ext, NULL},
};

const bpc_ref_family_t bpc_ref_family_reduce_ext = BPC_FAMILY(reduce_ext, k_groups);
