/* References of data movement and creation: to_copy, copy, clone, cat, fill,
 * arange. All exact (casts follow docs/semantics.md, "Casts").
 */
#include <math.h>
#include <string.h>

#include "ref.h"

/* Converts every element of `t` (broadcast to the output shape) into `e`. */
static void convert_into(const bpc_host_tensor_t* t, bpc_expected_t* e) {
  int64_t idx[BP_MAX_RANK] = {0};
  for (int64_t k = 0; k < e->numel; k++) {
    bpc_num_t v = bpc_convert(bpc_load(t->dtype, t->data, bpc_broadcast_index(t, e->rank, idx)),
                              t->dtype, e->dtype);
    if (e->f) e->f[k] = v.f;
    else e->i[k] = v.i;
    bpc_next_index(e->rank, e->sizes, idx);
  }
}

static int castable(uint32_t d) { return bpc_dtype_size(d) != 0 && d != BP_DTYPE_C64; }

bp_status_t bpc_ref_to_copy(const bpc_case_t* c, const bpc_host_tensor_t* in, bpc_ref_result_t* res) {
  uint32_t to = c->attrs.cast.dtype;
  if (!castable(to) || !castable(in[0].dtype)) return bpc_ref_reject(res, "to_copy: dtype not in the suite");
  bp_status_t st = bpc_ref_single_output(res, to, in[0].rank, in[0].sizes, 0, to);
  if (st != BP_OK) return st;
  convert_into(&in[0], &res->out[0]);
  return BP_OK;
}

bp_status_t bpc_ref_copy(const bpc_case_t* c, const bpc_host_tensor_t* in, bpc_ref_result_t* res) {
  (void)c;
  const bpc_host_tensor_t* ts[2] = {&in[0], &in[1]};
  uint32_t rank;
  int64_t sizes[BP_MAX_RANK];
  if (!castable(in[0].dtype) || !castable(in[1].dtype)) return bpc_ref_reject(res, "copy: dtype not in the suite");
  if (bpc_broadcast(ts, 2, &rank, sizes) != BP_OK || rank != in[0].rank ||
      memcmp(sizes, in[0].sizes, rank * sizeof(int64_t)) != 0) {
    return bpc_ref_reject(res, "copy: src does not broadcast to self");
  }
  bp_status_t st = bpc_ref_single_output(res, in[0].dtype, in[0].rank, in[0].sizes, 0, in[0].dtype);
  if (st != BP_OK) return st;
  convert_into(&in[1], &res->out[0]);
  return BP_OK;
}

bp_status_t bpc_ref_clone(const bpc_case_t* c, const bpc_host_tensor_t* in, bpc_ref_result_t* res) {
  (void)c;
  if (!castable(in[0].dtype)) return bpc_ref_reject(res, "clone: dtype not in the suite");
  bp_status_t st = bpc_ref_single_output(res, in[0].dtype, in[0].rank, in[0].sizes, 0, in[0].dtype);
  if (st != BP_OK) return st;
  convert_into(&in[0], &res->out[0]);
  return BP_OK;
}

/* Legacy rule: 1-d tensors of size [0] take no part in cat. */
static int cat_skipped(const bpc_host_tensor_t* t) { return t->rank == 1 && t->sizes[0] == 0; }

bp_status_t bpc_ref_cat(const bpc_case_t* c, const bpc_host_tensor_t* in, bpc_ref_result_t* res) {
  uint32_t n = c->num_inputs;
  const bpc_host_tensor_t* first = NULL;
  uint32_t out_dtype = BP_DTYPE_INVALID;
  for (uint32_t k = 0; k < n; k++) {
    if (!castable(in[k].dtype)) return bpc_ref_reject(res, "cat: dtype not in the suite");
    if (k == 0) out_dtype = in[k].dtype;
    else out_dtype = bpc_promote_types(out_dtype, in[k].dtype);
    if (out_dtype == BP_DTYPE_INVALID) return bpc_ref_reject(res, "cat: dtypes do not promote");
    if (!first && !cat_skipped(&in[k])) first = &in[k];
  }
  if (n == 0) return bpc_ref_reject(res, "cat: no tensors");
  if (!first) first = &in[0]; /* all skipped: result is [0] */
  uint32_t rank = first->rank;
  if (rank == 0) return bpc_ref_reject(res, "cat: zero-dimensional tensor");
  int64_t dim = c->attrs.dim.dim;
  if (dim < -(int64_t)rank || dim >= (int64_t)rank) return bpc_ref_reject(res, "cat: dim out of range");
  if (dim < 0) dim += rank;
  int64_t sizes[BP_MAX_RANK];
  memcpy(sizes, first->sizes, sizeof sizes);
  sizes[dim] = 0;
  for (uint32_t k = 0; k < n; k++) {
    if (cat_skipped(&in[k]) && first != &in[k]) continue;
    if (in[k].rank != rank) return bpc_ref_reject(res, "cat: ranks differ");
    for (uint32_t d = 0; d < rank; d++) {
      if (d != dim && in[k].sizes[d] != first->sizes[d]) return bpc_ref_reject(res, "cat: sizes differ");
    }
    sizes[dim] += in[k].sizes[dim];
  }
  bpc_expected_t* e = &res->out[0];
  bp_status_t st = bpc_ref_single_output(res, out_dtype, rank, sizes, 0, out_dtype);
  if (st != BP_OK) return st;
  /* Walk the output; find which input holds each element along `dim`. */
  int64_t idx[BP_MAX_RANK] = {0};
  for (int64_t k = 0; k < e->numel; k++) {
    int64_t pos = idx[dim];
    for (uint32_t j = 0; j < n; j++) {
      if (cat_skipped(&in[j]) && first != &in[j]) continue;
      if (pos < in[j].sizes[dim]) {
        int64_t lin = 0;
        for (uint32_t d = 0; d < rank; d++) lin = lin * in[j].sizes[d] + (d == dim ? pos : idx[d]);
        bpc_num_t v = bpc_convert(bpc_load(in[j].dtype, in[j].data, lin), in[j].dtype, out_dtype);
        if (e->f) e->f[k] = v.f;
        else e->i[k] = v.i;
        break;
      }
      pos -= in[j].sizes[dim];
    }
    bpc_next_index(rank, sizes, idx);
  }
  return BP_OK;
}

bp_status_t bpc_ref_fill(const bpc_case_t* c, const bpc_host_tensor_t* in, bpc_ref_result_t* res) {
  (void)in;
  const bpc_operand_t* o = &c->out[0];
  uint32_t sd;
  bpc_num_t v = bpc_scalar_value(&c->attrs.fill.value, &sd);
  if (sd == BP_DTYPE_INVALID || !castable(o->dtype)) return bpc_ref_reject(res, "fill: bad value or dtype");
  bp_status_t st = bpc_ref_single_output(res, o->dtype, o->rank, o->sizes, 0, o->dtype);
  if (st != BP_OK) return st;
  bpc_num_t cv = bpc_convert(v, sd, o->dtype);
  for (int64_t k = 0; k < res->out[0].numel; k++) {
    if (res->out[0].f) res->out[0].f[k] = cv.f;
    else res->out[0].i[k] = cv.i;
  }
  return BP_OK;
}

bp_status_t bpc_ref_arange(const bpc_case_t* c, const bpc_host_tensor_t* in, bpc_ref_result_t* res) {
  (void)in;
  const bpc_operand_t* o = &c->out[0];
  const bp_arange_attrs_t* a = &c->attrs.arange;
  uint32_t d0, d1, d2;
  bpc_num_t start = bpc_scalar_value(&a->start, &d0), end = bpc_scalar_value(&a->end, &d1),
            step = bpc_scalar_value(&a->step, &d2);
  if (d0 == BP_DTYPE_INVALID || d1 == BP_DTYPE_INVALID || d2 == BP_DTYPE_INVALID || o->rank != 1) {
    return bpc_ref_reject(res, "arange: start, end, step and a 1-d output required");
  }
  int all_int = !bpc_dtype_is_float(d0) && !bpc_dtype_is_float(d1) && !bpc_dtype_is_float(d2);
  int64_t len;
  if (all_int) {
    if (step.i == 0 || (end.i - start.i) / step.i < 0) return bpc_ref_reject(res, "arange: bad step");
    int64_t span = end.i - start.i;
    len = span / step.i + ((span % step.i) != 0);
  } else {
    if (step.f == 0.0 || (end.f - start.f) / step.f < 0.0) return bpc_ref_reject(res, "arange: bad step");
    len = (int64_t)ceil((end.f - start.f) / step.f);
  }
  if (len != o->sizes[0]) return bpc_ref_reject(res, "arange: output has %lld elements, expected %lld", (long long)o->sizes[0], (long long)len);
  if (!bpc_dtype_is_float(o->dtype) && !all_int) return bpc_ref_reject(res, "arange: integer output needs integer scalars");
  bp_status_t st = bpc_ref_single_output(res, o->dtype, 1, o->sizes, 0, o->dtype);
  if (st != BP_OK) return st;
  for (int64_t k = 0; k < len; k++) {
    if (res->out[0].f) res->out[0].f[k] = start.f + (double)k * step.f; /* f64, unrounded */
    else res->out[0].i[k] = bpc_wrap_int(start.i + k * step.i, o->dtype);
  }
  return BP_OK;
}
