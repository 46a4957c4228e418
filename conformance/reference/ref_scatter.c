/* References of the scatter family: scatter (src and value forms, reduce
 * none / sum / prod), scatter_add, scatter_reduce (sum, prod, mean, amax,
 * amin; include_self), select_scatter and slice_scatter. Plain loops in
 * exact integer or fp64 arithmetic (docs/semantics.md, "Scatter").
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ref.h"

void bpc_gen_scatter(struct bpc_gen* g);       /* scatter, scatter_add, scatter_reduce */
void bpc_gen_slice_scatter(struct bpc_gen* g); /* select_scatter, slice_scatter */

/* Row-major linear index of idx in a tensor of `sizes` (0-d: [1]). */
static int64_t lin_index(uint32_t rank, const int64_t* sizes, const int64_t* idx) {
  int64_t k = 0;
  for (uint32_t d = 0; d < rank; d++) k = k * sizes[d] + idx[d];
  return k;
}

static int64_t numel_of(const bpc_host_tensor_t* t) {
  int64_t n = 1;
  for (uint32_t d = 0; d < t->rank; d++) n *= t->sizes[d];
  return n;
}

/* Shape of t seen with `rank` dims (a 0-d tensor is [1]). */
static void sizes_of(const bpc_host_tensor_t* t, uint32_t rank, int64_t* s) {
  for (uint32_t d = 0; d < rank; d++) s[d] = t->rank ? t->sizes[d] : 1;
}

static int64_t reduce_of(const bpc_case_t* c) {
  if (c->op_id == BP_OP_scatter_add) return BP_SCATTER_SUM;
  return c->attrs.scatter.reduce;
}

/* The validity rules of the scatter ops (PyTorch ScatterGatherChecks.h). */
static bp_status_t scatter_validate(const bpc_case_t* c, const bpc_host_tensor_t* in,
                                    uint32_t* out_dim, bpc_ref_result_t* res) {
  const bpc_host_tensor_t *self = &in[0], *index = &in[1];
  const bpc_host_tensor_t* src = c->num_inputs > 2 && in[2].dtype != BP_DTYPE_INVALID ? &in[2] : NULL;
  const bp_scatter_attrs_t* a = &c->attrs.scatter;
  uint32_t r = (uint32_t)reduce_of(c);
  if (c->op_id == BP_OP_scatter && r != BP_SCATTER_NONE && r != BP_SCATTER_SUM && r != BP_SCATTER_PROD)
    return bpc_ref_reject(res, "scatter: reduce %u", r);
  if (c->op_id == BP_OP_scatter_reduce && (r < BP_SCATTER_SUM || r > BP_SCATTER_AMIN))
    return bpc_ref_reject(res, "scatter_reduce: reduce %u", r);
  if (c->op_id == BP_OP_scatter_add && a->reduce != BP_SCATTER_NONE && a->reduce != BP_SCATTER_SUM)
    return bpc_ref_reject(res, "scatter_add: reduce %u", a->reduce);
  if (r == BP_SCATTER_MEAN && self->dtype == BP_DTYPE_BOOL) return bpc_ref_reject(res, "mean of bool");
  if (index->dtype != BP_DTYPE_I64) return bpc_ref_reject(res, "index must be int64");
  if (src && src->dtype != self->dtype) return bpc_ref_reject(res, "src dtype differs from self");
  if (c->op_id == BP_OP_scatter && !src && a->value.kind == BP_SCALAR_NONE)
    return bpc_ref_reject(res, "scatter without src or value");
  if (c->op_id == BP_OP_scatter && src && a->value.kind != BP_SCALAR_NONE)
    return bpc_ref_reject(res, "scatter with both src and value");
  uint32_t rank = self->rank ? self->rank : 1;
  int64_t dim = a->dim < 0 ? a->dim + (int64_t)rank : a->dim;
  if (dim < 0 || dim >= (int64_t)rank) return bpc_ref_reject(res, "dim out of range");
  *out_dim = (uint32_t)dim;
  if (numel_of(index) == 0) return BP_OK;
  uint32_t irank = index->rank ? index->rank : 1;
  if (irank != rank || (src && (src->rank ? src->rank : 1) != rank))
    return bpc_ref_reject(res, "ranks of self, index and src differ");
  int64_t ss[BP_MAX_RANK], is[BP_MAX_RANK], rs[BP_MAX_RANK];
  sizes_of(self, rank, ss);
  sizes_of(index, rank, is);
  if (src) sizes_of(src, rank, rs);
  for (uint32_t d = 0; d < rank; d++) {
    if ((d != dim && is[d] > ss[d]) || (src && is[d] > rs[d]))
      return bpc_ref_reject(res, "index larger than self or src in dim %u", d);
  }
  int64_t idx[BP_MAX_RANK] = {0};
  for (int64_t k = 0; k < numel_of(index); k++) {
    int64_t t = bpc_load(BP_DTYPE_I64, index->data, k).i;
    if (t < 0 || t >= ss[dim]) return bpc_ref_reject(res, "index %lld out of range", (long long)t);
    bpc_next_index(rank, is, idx);
  }
  return BP_OK;
}

/* scatter, scatter_add, scatter_reduce. Floating sums and products carry
 * the REDUCE bound (nterms, mag); amax/amin and assignments are exact. */
static bp_status_t ref_scatter(const bpc_case_t* c, const bpc_host_tensor_t* in,
                               bpc_ref_result_t* res) {
  const bpc_host_tensor_t *self = &in[0], *index = &in[1];
  const bpc_host_tensor_t* src = c->num_inputs > 2 && in[2].dtype != BP_DTYPE_INVALID ? &in[2] : NULL;
  const bp_scatter_attrs_t* a = &c->attrs.scatter;
  uint32_t dim = 0;
  bp_status_t st = scatter_validate(c, in, &dim, res);
  if (st != BP_OK) return st;
  const uint32_t dt = self->dtype;
  const int is_float = bpc_dtype_is_float(dt);
  const int64_t r = reduce_of(c);
  const int include_self = c->op_id != BP_OP_scatter_reduce || a->include_self;
  st = bpc_ref_single_output(res, dt, self->rank, self->sizes, 1, dt);
  if (st != BP_OK) return st;
  bpc_expected_t* e = &res->out[0];
  const int64_t n = e->numel;
  int64_t* count = calloc((size_t)(n > 0 ? n : 1), sizeof *count);
  uint8_t* touched = calloc((size_t)(n > 0 ? n : 1), 1);
  if (!count || !touched) {
    free(count);
    free(touched);
    return BP_RESOURCE_EXHAUSTED;
  }
  for (int64_t k = 0; k < n; k++) {
    bpc_num_t v = bpc_load(dt, self->data, k);
    if (is_float) {
      e->f[k] = v.f;
      e->mag[k] = fabs(v.f);
      e->nterms[k] = 1;
    } else {
      e->i[k] = v.i;
    }
    count[k] = include_self;
  }
  uint32_t rank = self->rank ? self->rank : 1;
  int64_t ss[BP_MAX_RANK], is[BP_MAX_RANK], rs[BP_MAX_RANK];
  sizes_of(self, rank, ss);
  sizes_of(index, rank, is);
  if (src) sizes_of(src, rank, rs);
  uint32_t vdt = dt;
  bpc_num_t value = {0, 0, 0};
  if (!src) value = bpc_convert(bpc_scalar_value(&a->value, &vdt), vdt, dt);
  int64_t idx[BP_MAX_RANK] = {0}, tgt[BP_MAX_RANK];
  const int64_t ni = numel_of(index);
  for (int64_t k = 0; k < ni; k++, bpc_next_index(rank, is, idx)) {
    memcpy(tgt, idx, sizeof tgt);
    tgt[dim] = bpc_load(BP_DTYPE_I64, index->data, k).i;
    int64_t o = lin_index(rank, ss, tgt);
    bpc_num_t v = src ? bpc_load(dt, src->data, lin_index(rank, rs, idx)) : value;
    if (!touched[o] && !include_self) { /* the first value replaces self */
      if (is_float) {
        e->f[o] = v.f;
        e->mag[o] = fabs(v.f);
        e->nterms[o] = 1;
      } else {
        e->i[o] = v.i;
      }
      touched[o] = 1;
      count[o] = 1;
      continue;
    }
    touched[o] = 1;
    count[o]++;
    if (is_float) {
      double x = e->f[o];
      switch (r) {
        case BP_SCATTER_NONE: x = v.f; break;
        case BP_SCATTER_SUM: case BP_SCATTER_MEAN: x += v.f; break;
        case BP_SCATTER_PROD: x *= v.f; break;
        case BP_SCATTER_AMAX: x = (isnan(x) || isnan(v.f)) ? NAN : (v.f > x ? v.f : x); break;
        default: x = (isnan(x) || isnan(v.f)) ? NAN : (v.f < x ? v.f : x); break;
      }
      e->f[o] = x;
      if (r == BP_SCATTER_SUM || r == BP_SCATTER_MEAN) {
        e->mag[o] += fabs(v.f);
        e->nterms[o] += 1;
      } else if (r == BP_SCATTER_PROD) {
        e->mag[o] = fabs(x);
        e->nterms[o] += 1;
      } else {
        e->mag[o] = 0;
      }
    } else {
      uint64_t x = (uint64_t)e->i[o], y = (uint64_t)v.i;
      int64_t s = (int64_t)x, w = v.i;
      switch (r) {
        case BP_SCATTER_NONE: s = w; break;
        case BP_SCATTER_SUM: case BP_SCATTER_MEAN: s = (int64_t)(x + y); break;
        case BP_SCATTER_PROD: s = (int64_t)(x * y); break;
        case BP_SCATTER_AMAX: s = w > s ? w : s; break;
        default: s = w < s ? w : s; break;
      }
      e->i[o] = bpc_wrap_int(s, dt); /* integer arithmetic wraps in the dtype; bool saturates */
    }
  }
  if (r == BP_SCATTER_MEAN) {
    for (int64_t k = 0; k < n; k++) {
      int64_t cnt = count[k] ? count[k] : 1;
      if (is_float) {
        e->f[k] /= (double)cnt;
        e->mag[k] /= (double)cnt;
        e->nterms[k] += 1;
      } else {
        int64_t x = e->i[k], q = x / cnt;
        if (x % cnt != 0 && x < 0) q--; /* floor division */
        e->i[k] = bpc_wrap_int(q, dt);
      }
    }
  }
  if (is_float && (r == BP_SCATTER_NONE || r == BP_SCATTER_AMAX || r == BP_SCATTER_AMIN)) {
    for (int64_t k = 0; k < n; k++) e->mag[k] = 0;
  }
  free(count);
  free(touched);
  return BP_OK;
}

/* scatter without reduction: PyTorch leaves the winner among duplicate
 * indices unspecified, so an element written more than once may hold any
 * of its candidates. With a reduction the REDUCE tolerance applies. */
static void check_scatter(const bpc_case_t* c, const bpc_host_tensor_t* in,
                          const bpc_ref_result_t* ref, const void* const* got,
                          const bpc_tolerance_t* tol, bpc_check_t* out) {
  (void)tol;
  const bpc_expected_t* e = &ref->out[0];
  if (c->attrs.scatter.reduce != BP_SCATTER_NONE) {
    bpc_tolerance_t t = bpc_tolerance_get(BPC_ACC_REDUCE, e->dtype, 0);
    bpc_check_values(&t, e, got[0], out);
    return;
  }
  bpc_tolerance_t exact = bpc_tolerance_get(BPC_ACC_EXACT, e->dtype, 1);
  bpc_check_values(&exact, e, got[0], out);
  if (out->status == BPC_PASS) return;
  /* Re-judge each mismatch against every candidate written there. */
  const bpc_host_tensor_t *self = &in[0], *index = &in[1];
  const bpc_host_tensor_t* src = c->num_inputs > 2 && in[2].dtype != BP_DTYPE_INVALID ? &in[2] : NULL;
  uint32_t rank = self->rank ? self->rank : 1;
  int64_t dim = c->attrs.scatter.dim < 0 ? c->attrs.scatter.dim + (int64_t)rank : c->attrs.scatter.dim;
  int64_t ss[BP_MAX_RANK], is[BP_MAX_RANK], rs[BP_MAX_RANK];
  sizes_of(self, rank, ss);
  sizes_of(index, rank, is);
  if (src) sizes_of(src, rank, rs);
  uint8_t* ok = calloc((size_t)(e->numel > 0 ? e->numel : 1), 1);
  if (!ok) {
    snprintf(out->message, sizeof out->message, "suite: out of memory");
    out->status = BPC_RESOURCE_ERROR;
    return;
  }
  int fl = bpc_dtype_is_float(e->dtype);
  int64_t idx[BP_MAX_RANK] = {0}, tgt[BP_MAX_RANK];
  for (int64_t k = 0; k < numel_of(index); k++, bpc_next_index(rank, is, idx)) {
    memcpy(tgt, idx, sizeof tgt);
    tgt[dim] = bpc_load(BP_DTYPE_I64, index->data, k).i;
    int64_t o = lin_index(rank, ss, tgt);
    if (!src) continue; /* the value form writes one value everywhere */
    bpc_num_t v = bpc_load(e->dtype, src->data, lin_index(rank, rs, idx));
    bpc_num_t g = bpc_load(e->dtype, got[0], o);
    int same = fl ? ((isnan(v.f) && isnan(g.f)) || (v.f == g.f && signbit(v.f) == signbit(g.f)))
                  : v.i == g.i;
    if (same) ok[o] = 1;
  }
  int64_t bad = 0, first = -1;
  for (int64_t k = 0; k < e->numel; k++) {
    bpc_num_t g = bpc_load(e->dtype, got[0], k);
    int match = fl ? ((isnan(g.f) && isnan(e->f[k])) || (g.f == e->f[k] && signbit(g.f) == signbit(e->f[k])))
                   : g.i == e->i[k];
    if (!match && !ok[k]) {
      if (first < 0) first = k;
      bad++;
    }
  }
  free(ok);
  out->mismatches = bad;
  out->worst_index = first;
  if (bad == 0) {
    out->status = BPC_PASS;
    out->message[0] = '\0';
  } else {
    out->status = BPC_FAIL;
    snprintf(out->message, sizeof out->message,
             "%lld of %lld elements hold neither self nor any value scattered there; first [%lld]",
             (long long)bad, (long long)e->numel, (long long)first);
  }
}

/* select_scatter, slice_scatter: out = self; out's selection or slice = src
 * converted to self's dtype. */
static bp_status_t ref_slice_scatter(const bpc_case_t* c, const bpc_host_tensor_t* in,
                                     bpc_ref_result_t* res) {
  const bpc_host_tensor_t *self = &in[0], *src = &in[1];
  const bp_slice_attrs_t* a = &c->attrs.slice;
  int is_select = c->op_id == BP_OP_select_scatter;
  if (self->rank == 0) return bpc_ref_reject(res, "0-d self");
  int64_t dim = a->dim < 0 ? a->dim + (int64_t)self->rank : a->dim;
  if (dim < 0 || dim >= (int64_t)self->rank) return bpc_ref_reject(res, "dim out of range");
  int64_t size = self->sizes[dim], start, len, step = is_select ? 1 : a->step;
  if (is_select) {
    start = a->start < 0 ? a->start + size : a->start;
    if (start < 0 || start >= size) return bpc_ref_reject(res, "index out of range");
    len = 1;
  } else {
    if (step <= 0) return bpc_ref_reject(res, "step must be positive");
    start = a->start < 0 ? a->start + size : a->start;
    int64_t end = a->end < 0 ? a->end + size : a->end;
    if (start < 0) start = 0;
    if (start > size) start = size;
    if (end < start) end = start;
    if (end > size) end = size;
    len = 0;
    for (int64_t i = start; i < end; i += step) len++;
  }
  /* src has self's shape with dim sized len (select: dim removed). */
  int64_t want[BP_MAX_RANK];
  uint32_t wr = 0;
  for (uint32_t d = 0; d < self->rank; d++) {
    if (d == dim && is_select) continue;
    want[wr++] = d == dim ? len : self->sizes[d];
  }
  if (src->rank != wr || memcmp(src->sizes, want, wr * sizeof(int64_t)) != 0)
    return bpc_ref_reject(res, "src shape differs from the %s", is_select ? "selection" : "slice");
  if (bpc_dtype_size(self->dtype) == 0 || bpc_dtype_size(src->dtype) == 0)
    return bpc_ref_reject(res, "dtype not in the suite");
  bp_status_t st = bpc_ref_single_output(res, self->dtype, self->rank, self->sizes, 0, self->dtype);
  if (st != BP_OK) return st;
  bpc_expected_t* e = &res->out[0];
  int64_t idx[BP_MAX_RANK] = {0};
  for (int64_t k = 0; k < e->numel; k++, bpc_next_index(self->rank, self->sizes, idx)) {
    int64_t i = idx[dim] - start;
    bpc_num_t v;
    if (i >= 0 && i % step == 0 && i / step < len) { /* inside the slice: from src */
      int64_t sidx[BP_MAX_RANK];
      uint32_t r = 0;
      for (uint32_t d = 0; d < self->rank; d++) {
        if (d == dim && is_select) continue;
        sidx[r++] = d == dim ? i / step : idx[d];
      }
      v = bpc_convert(bpc_load(src->dtype, src->data, lin_index(wr, src->sizes, sidx)), src->dtype,
                      self->dtype);
    } else {
      v = bpc_load(self->dtype, self->data, k);
    }
    if (e->f) e->f[k] = v.f;
    else e->i[k] = v.i;
  }
  return BP_OK;
}

#define SZ BPC_OPF_SIGNED_ZERO
static const bpc_ref_group_t k_groups[] = {
    {ref_scatter, BPC_ACC_EXACT, SZ, BPC_OPS(BP_OP_scatter), bpc_gen_scatter, check_scatter},
    {ref_scatter, BPC_ACC_REDUCE, 0, BPC_OPS(BP_OP_scatter_add, BP_OP_scatter_reduce), bpc_gen_scatter, NULL},
    {ref_slice_scatter, BPC_ACC_EXACT, SZ, BPC_OPS(BP_OP_select_scatter, BP_OP_slice_scatter),
     bpc_gen_slice_scatter, NULL},
};
#undef SZ

const bpc_ref_family_t bpc_ref_family_scatter = BPC_FAMILY(scatter, k_groups);
