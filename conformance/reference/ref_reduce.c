/* References of the reductions (sum, mean, prod, any, amax, amin, argmax,
 * argmin), softmax and log_softmax. Floating sums accumulate in double and
 * record, per output element, the number of terms and the sum of their
 * magnitudes for the error bound.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ref.h"

/* Output shape of a reduction and the map input element -> output element. */
typedef struct reduce_plan {
  uint8_t mask[BP_MAX_RANK];
  uint32_t out_rank;
  int64_t out_sizes[BP_MAX_RANK];
  int64_t group; /* input elements per output element */
} reduce_plan_t;

static bp_status_t plan_reduce(const bpc_case_t* c, const bpc_host_tensor_t* t, int all_if_empty,
                               reduce_plan_t* p, bpc_ref_result_t* res) {
  const bp_reduce_attrs_t* a = &c->attrs.reduce;
  bp_status_t st = bpc_ref_reduce_dims(a, t->rank, all_if_empty, p->mask, res);
  if (st != BP_OK) return st;
  int keep = (a->flags & BP_REDUCE_KEEPDIM) != 0;
  p->out_rank = 0;
  p->group = 1;
  for (uint32_t d = 0; d < t->rank; d++) {
    if (p->mask[d]) {
      p->group *= t->sizes[d];
      if (keep) p->out_sizes[p->out_rank++] = 1;
    } else {
      p->out_sizes[p->out_rank++] = t->sizes[d];
    }
  }
  return BP_OK;
}

/* Output index of input element idx. */
static int64_t out_index(const bpc_host_tensor_t* t, const reduce_plan_t* p, const int64_t* idx) {
  int64_t lin = 0;
  for (uint32_t d = 0; d < t->rank; d++) {
    if (!p->mask[d]) lin = lin * t->sizes[d] + idx[d];
  }
  return lin;
}

/* Index along the reduced dims (row-major over them): argmax's answer. */
static int64_t reduced_index(const bpc_host_tensor_t* t, const reduce_plan_t* p, const int64_t* idx) {
  int64_t lin = 0;
  for (uint32_t d = 0; d < t->rank; d++) {
    if (p->mask[d]) lin = lin * t->sizes[d] + idx[d];
  }
  return lin;
}

/* Keeps a running product as m * 2^scale with m in [0.5, 1), so that no
 * intermediate product over- or underflows double: the reference is then
 * the true product within n double roundings (PyTorch's order of
 * evaluation could overflow where the exact result does not; the cases keep
 * their factors log-balanced so that this never matters). */
static double renormalize(double m, int64_t* scale) {
  if (m == 0.0 || !isfinite(m)) return m;
  int k;
  m = frexp(m, &k);
  *scale += k;
  return m;
}

/* sum, mean, prod and any: every input element is folded into its output
 * element (add, multiply, or). Floating sums record n and sum |term| for
 * the error bound, products n and |product| (relative error n * u). */
bp_status_t bpc_ref_sum(const bpc_case_t* c, const bpc_host_tensor_t* in, bpc_ref_result_t* res) {
  const bpc_host_tensor_t* t = &in[0];
  const char* name = bpc_op_entry(c->op_id)->name;
  int is_mean = c->op_id == BP_OP_mean, is_prod = c->op_id == BP_OP_prod, is_any = c->op_id == BP_OP_any;
  uint32_t out = c->attrs.reduce.dtype;
  if (!bpc_dtype_is_float(t->dtype) && !bpc_dtype_is_int(t->dtype) && t->dtype != BP_DTYPE_BOOL) {
    return bpc_ref_reject(res, "%s over %s", name, bpc_dtype_name(t->dtype));
  }
  int in_fp8 = t->dtype == BP_DTYPE_F8E4M3FN || t->dtype == BP_DTYPE_F8E5M2;
  if (is_any) { /* any dtype, fp8 included: only != 0 matters */
    if (out != BP_DTYPE_INVALID) return bpc_ref_reject(res, "any: attrs.dtype must be unset (bool output)");
    out = t->dtype == BP_DTYPE_U8 ? BP_DTYPE_U8 : BP_DTYPE_BOOL; /* PyTorch keeps uint8 */
  } else {
    if (in_fp8) return bpc_ref_reject(res, "no fp8 arithmetic");
    if (out == BP_DTYPE_F8E4M3FN || out == BP_DTYPE_F8E5M2) return bpc_ref_reject(res, "%s: fp8 attrs.dtype", name);
    if (out == BP_DTYPE_INVALID) out = bpc_dtype_is_float(t->dtype) ? t->dtype : BP_DTYPE_I64;
  }
  if (is_mean && !bpc_dtype_is_float(out)) return bpc_ref_reject(res, "mean: floating dtype required");
  reduce_plan_t p;
  bp_status_t st = plan_reduce(c, t, 1, &p, res);
  if (st != BP_OK) return st;
  bpc_expected_t* e = &res->out[0];
  st = bpc_ref_single_output(res, out, p.out_rank, p.out_sizes, 1, out);
  if (st != BP_OK) return st;
  int64_t* scale = NULL; /* prod: binary exponent of each running product */
  if (is_prod) {
    scale = calloc((size_t)(e->numel > 0 ? e->numel : 1), sizeof *scale);
    if (!scale) return BP_RESOURCE_EXHAUSTED;
    for (int64_t o = 0; o < e->numel; o++) {
      if (e->f) e->f[o] = 1.0;
      else e->i[o] = 1;
    }
  }
  int64_t idx[BP_MAX_RANK] = {0};
  for (int64_t k = 0; k < t->numel; k++) {
    int64_t o = out_index(t, &p, idx);
    bpc_num_t v = bpc_convert(bpc_load(t->dtype, t->data, k), t->dtype, is_any ? BP_DTYPE_BOOL : out);
    if (is_any) {
      e->i[o] |= v.i;
    } else if (e->f && is_prod) {
      e->f[o] = renormalize(e->f[o] * v.f, &scale[o]);
    } else if (e->f) {
      e->f[o] += v.f;
      e->mag[o] += fabs(v.f);
    } else {
      uint64_t a = (uint64_t)e->i[o], b = (uint64_t)v.i;
      e->i[o] = bpc_wrap_int((int64_t)(is_prod ? a * b : a + b), out);
    }
    bpc_next_index(t->rank, t->sizes, idx);
  }
  if (e->f) {
    for (int64_t o = 0; o < e->numel; o++) {
      e->nterms[o] = (double)p.group;
      if (is_prod) {
        int64_t sc = scale[o] < -100000 ? -100000 : scale[o] > 100000 ? 100000 : scale[o];
        e->f[o] = ldexp(e->f[o], (int)sc);
        e->mag[o] = fabs(e->f[o]);
      }
      if (is_mean) {
        e->f[o] = p.group ? e->f[o] / (double)p.group : NAN;
        e->mag[o] = p.group ? e->mag[o] / (double)p.group : 0.0;
        e->nterms[o] += 1.0;
      }
    }
  }
  free(scale);
  return BP_OK;
}

/* amax / amin: NaN propagates; exact. */
bp_status_t bpc_ref_amax(const bpc_case_t* c, const bpc_host_tensor_t* in, bpc_ref_result_t* res) {
  const bpc_host_tensor_t* t = &in[0];
  int is_max = c->op_id == BP_OP_amax;
  if (t->dtype == BP_DTYPE_F8E4M3FN || t->dtype == BP_DTYPE_F8E5M2 || t->dtype == BP_DTYPE_C64 ||
      t->dtype == BP_DTYPE_BOOL) {
    return bpc_ref_reject(res, "amax/amin over %s not in the suite", bpc_dtype_name(t->dtype));
  }
  reduce_plan_t p;
  bp_status_t st = plan_reduce(c, t, 0, &p, res);
  if (st != BP_OK) return st;
  if (p.group == 0 && t->numel == 0) {
    int64_t on = 1;
    for (uint32_t d = 0; d < p.out_rank; d++) on *= p.out_sizes[d];
    if (on != 0) return bpc_ref_reject(res, "amax/amin of an empty dim");
  }
  bpc_expected_t* e = &res->out[0];
  st = bpc_ref_single_output(res, t->dtype, p.out_rank, p.out_sizes, 0, t->dtype);
  if (st != BP_OK) return st;
  uint8_t* seen = calloc((size_t)(e->numel > 0 ? e->numel : 1), 1);
  if (!seen) return BP_RESOURCE_EXHAUSTED;
  int64_t idx[BP_MAX_RANK] = {0};
  for (int64_t k = 0; k < t->numel; k++) {
    int64_t o = out_index(t, &p, idx);
    bpc_num_t v = bpc_load(t->dtype, t->data, k);
    if (e->f) {
      double cur = e->f[o];
      if (!seen[o] || isnan(v.f) || (!isnan(cur) && (is_max ? v.f > cur : v.f < cur))) e->f[o] = v.f;
    } else {
      int64_t cur = e->i[o];
      if (!seen[o] || (is_max ? v.i > cur : v.i < cur)) e->i[o] = v.i;
    }
    seen[o] = 1;
    bpc_next_index(t->rank, t->sizes, idx);
  }
  free(seen);
  return BP_OK;
}

/* argmax / argmin: NaN is the extreme either way (the first NaN wins, as
 * PyTorch); ties give the first index. */
bp_status_t bpc_ref_argmax(const bpc_case_t* c, const bpc_host_tensor_t* in, bpc_ref_result_t* res) {
  const bpc_host_tensor_t* t = &in[0];
  const bp_reduce_attrs_t* a = &c->attrs.reduce;
  int is_max = c->op_id != BP_OP_argmin;
  if (t->dtype == BP_DTYPE_F8E4M3FN || t->dtype == BP_DTYPE_F8E5M2 || t->dtype == BP_DTYPE_C64 ||
      t->dtype == BP_DTYPE_BOOL) {
    return bpc_ref_reject(res, "argmax/argmin over %s not in the suite", bpc_dtype_name(t->dtype));
  }
  if (!(a->flags & BP_REDUCE_ALL_DIMS) && a->num_dims != 1) {
    return bpc_ref_reject(res, "argmax/argmin: one dim or all");
  }
  reduce_plan_t p;
  bp_status_t st = plan_reduce(c, t, 0, &p, res);
  if (st != BP_OK) return st;
  if ((a->flags & BP_REDUCE_ALL_DIMS) && (a->flags & BP_REDUCE_KEEPDIM)) {
    p.out_rank = t->rank; /* all dims kept with size 1 */
    for (uint32_t d = 0; d < t->rank; d++) p.out_sizes[d] = 1;
  }
  int64_t on = 1;
  for (uint32_t d = 0; d < p.out_rank; d++) on *= p.out_sizes[d];
  if (p.group == 0 && on != 0) return bpc_ref_reject(res, "argmax/argmin of an empty dim");
  bpc_expected_t* e = &res->out[0];
  st = bpc_ref_single_output(res, BP_DTYPE_I64, p.out_rank, p.out_sizes, 0, t->dtype);
  if (st != BP_OK) return st;
  size_t n = (size_t)(on > 0 ? on : 1);
  bpc_num_t* best = calloc(n, sizeof *best);
  uint8_t* seen = calloc(n, 1);
  if (!best || !seen) {
    free(best);
    free(seen);
    return BP_RESOURCE_EXHAUSTED;
  }
  int fl = bpc_dtype_is_float(t->dtype);
  int64_t idx[BP_MAX_RANK] = {0};
  for (int64_t k = 0; k < t->numel; k++) {
    int64_t o = out_index(t, &p, idx);
    bpc_num_t v = bpc_load(t->dtype, t->data, k);
    int take;
    if (!seen[o]) {
      take = 1;
    } else if (fl) {
      if (isnan(best[o].f)) take = 0;
      else take = isnan(v.f) || (is_max ? v.f > best[o].f : v.f < best[o].f);
    } else {
      take = is_max ? v.i > best[o].i : v.i < best[o].i;
    }
    if (take) {
      best[o] = v;
      e->i[o] = reduced_index(t, &p, idx);
    }
    seen[o] = 1;
    bpc_next_index(t->rank, t->sizes, idx);
  }
  free(best);
  free(seen);
  return BP_OK;
}

/* softmax and log_softmax along one dim, computed stably: exp(x - max) / sum
 * and x - max - log(sum), sum = sum_j exp(x_j - max). */
bp_status_t bpc_ref_softmax(const bpc_case_t* c, const bpc_host_tensor_t* in, bpc_ref_result_t* res) {
  const bpc_host_tensor_t* t = &in[0];
  const bp_softmax_attrs_t* a = &c->attrs.softmax;
  uint32_t d = t->dtype;
  int is_log = c->op_id == BP_OP_log_softmax;
  if (d != BP_DTYPE_F32 && d != BP_DTYPE_F64 && d != BP_DTYPE_F16 && d != BP_DTYPE_BF16) {
    return bpc_ref_reject(res, "softmax/log_softmax: floating input required");
  }
  uint32_t out = (a->half_to_float && (d == BP_DTYPE_F16 || d == BP_DTYPE_BF16)) ? BP_DTYPE_F32 : d;
  int64_t r = t->rank == 0 ? 1 : t->rank;
  int64_t dim = a->dim;
  if (dim < -r || dim >= r) return bpc_ref_reject(res, "softmax/log_softmax: dim out of range");
  if (dim < 0) dim += r;
  bpc_expected_t* e = &res->out[0];
  bp_status_t st = bpc_ref_single_output(res, out, t->rank, t->sizes, 1, out);
  if (st != BP_OK) return st;
  int64_t len = t->rank == 0 ? 1 : t->sizes[dim];
  int64_t inner = 1;
  for (uint32_t k = (uint32_t)dim + 1; k < t->rank; k++) inner *= t->sizes[k];
  int64_t outer = len > 0 && inner > 0 ? t->numel / (len * inner) : 0;
  for (int64_t o = 0; o < outer; o++) {
    for (int64_t i = 0; i < inner; i++) {
      int64_t base = o * len * inner + i;
      double m = -INFINITY;
      int nan_seen = 0;
      for (int64_t j = 0; j < len; j++) {
        double x = bpc_load(d, t->data, base + j * inner).f;
        if (isnan(x)) nan_seen = 1;
        else if (x > m) m = x;
      }
      double s = 0.0;
      for (int64_t j = 0; j < len; j++) s += exp(bpc_load(d, t->data, base + j * inner).f - m);
      double ls = log(s);
      for (int64_t j = 0; j < len; j++) {
        int64_t k = base + j * inner;
        double shift = bpc_load(d, t->data, k).f - m;
        double v = is_log ? shift - ls : exp(shift) / s;
        e->f[k] = nan_seen ? NAN : v;
        /* x - max is rounded in the compute dtype: an error of |x - max| * u
         * in the exponent, on top of the sum's (len) and exp's own. softmax's
         * error is relative (mag = the result); log_softmax's is absolute
         * (mag = 1), adding log's own error and the final subtraction, whose
         * operands are at most |x - max| and log(sum). */
        double dev = isfinite(shift) ? fabs(shift) : 0.0;
        e->mag[k] = is_log ? 1.0 : fabs(v);
        e->nterms[k] = (double)len + 8.0 + dev + (is_log && isfinite(ls) ? 2.0 * fabs(ls) : 0.0);
      }
    }
  }
  return BP_OK;
}
