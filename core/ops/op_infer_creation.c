/* backplane core: inference rules of the creation ops (fill, arange, rand,
 * randn, randperm).
 *
 * Their output is either given (outputs[0]: its dtype and shape are the
 * request) or allocated by the core like every other op's: then the dtype
 * and shape come from the attributes, with PyTorch's defaults for the dtype.
 * Attributes that are set must agree with a given output.
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "ops/ops_internal.h"

/* What the attributes say about the output: a dtype (INVALID: not given) and
 * optionally a shape. */
typedef struct bp__creation_req {
  uint32_t dtype;
  uint32_t default_dtype; /* when neither the output nor attrs.dtype says */
  int has_shape;
  uint32_t rank;
  const int64_t* sizes;
} bp__creation_req_t;

/* The output's dtype and shape: the given output's, checked against what the
 * attributes set, or the attributes' own. */
static bp_status_t bp__creation_target(bp__infer_t* x, const bp__creation_req_t* r,
                                       uint32_t* out_dtype, uint32_t* out_rank,
                                       int64_t* out_sizes) {
  const bp_tensor_desc_t* g =
      x->given != NULL && x->given[0].dtype != BP_DTYPE_INVALID ? &x->given[0] : NULL;
  if (g == NULL) {
    if (!r->has_shape) {
      return bp__infer_fail(x, "pass outputs[0], or set attrs.has_shape with attrs.rank and "
                               "attrs.sizes so the core allocates the output");
    }
    *out_dtype = r->dtype != BP_DTYPE_INVALID ? r->dtype : r->default_dtype;
    *out_rank = r->rank;
    memcpy(out_sizes, r->sizes, sizeof(int64_t) * r->rank);
    return BP_OK;
  }
  if (!bp__dtype_valid(g->dtype) || g->rank > BP_MAX_RANK) {
    return bp__infer_fail(x, "output 'out' has an invalid dtype (%u) or rank (%u)", g->dtype,
                          g->rank);
  }
  if (r->dtype != BP_DTYPE_INVALID && r->dtype != g->dtype) {
    return bp__infer_fail(x, "attrs.dtype is %s but output 'out' has dtype %s",
                          bp_dtype_name(r->dtype), bp_dtype_name(g->dtype));
  }
  if (r->has_shape && !bp__shape_equal(r->rank, r->sizes, g->rank, g->sizes)) {
    char s0[192], s1[192];
    return bp__infer_fail(x, "attrs.sizes give shape %s but output 'out' has shape %s",
                          bp__shape_str(r->rank, r->sizes, s0, sizeof(s0)),
                          bp__shape_str(g->rank, g->sizes, s1, sizeof(s1)));
  }
  *out_dtype = g->dtype;
  *out_rank = g->rank;
  memcpy(out_sizes, g->sizes, sizeof(int64_t) * g->rank);
  return BP_OK;
}

/* fill's default dtype follows its value, as torch.full does. */
static uint32_t bp__fill_default_dtype(const bp_scalar_t* v) {
  switch (v->kind) {
    case BP_SCALAR_BOOL: return BP_DTYPE_BOOL;
    case BP_SCALAR_INT: return BP_DTYPE_I64;
    default: return BP_DTYPE_F32;
  }
}

bp_status_t bp__infer_creation(bp__infer_t* x) {
  uint32_t id = x->op->id;
  bp__creation_req_t r;
  memset(&r, 0, sizeof(r));
  if (id == BP_OP_fill) {
    const bp_fill_attrs_t* a = x->attrs;
    r = (bp__creation_req_t){a->dtype, bp__fill_default_dtype(&a->value), a->has_shape != 0,
                             a->rank, a->sizes};
  } else {
    const bp_random_attrs_t* a = x->attrs;
    r = (bp__creation_req_t){a->dtype, id == BP_OP_randperm ? BP_DTYPE_I64 : BP_DTYPE_F32,
                             a->has_shape != 0, a->rank, a->sizes};
  }
  uint32_t d, rank;
  int64_t sizes[BP_MAX_RANK];
  bp_status_t st = bp__creation_target(x, &r, &d, &rank, sizes);
  if (st != BP_OK) return st;
  if (bp__dtype_is_storage_only(d) && id != BP_OP_fill) {
    return bp__infer_fail(x, "output dtype %s is storage only", bp_dtype_name(d));
  }
  if ((id == BP_OP_rand || id == BP_OP_randn) && !bp__dtype_is_float(d)) {
    return bp__infer_fail(x, "output 'out' has dtype %s; a floating dtype is required",
                          bp_dtype_name(d));
  }
  if (id == BP_OP_randperm) {
    if (rank != 1) return bp__infer_fail(x, "output 'out' must have rank 1, got %u", rank);
    if (!bp__dtype_is_int(d) && !bp__dtype_is_float(d)) {
      return bp__infer_fail(x, "output 'out' has dtype %s; integer or floating required",
                            bp_dtype_name(d));
    }
  }
  x->compute_dtype = d;
  return bp__infer_set_out(x, 0, d, rank, sizes);
}

static double bp__scalar_f64(const bp_scalar_t* s, double none_value) {
  switch (s->kind) {
    case BP_SCALAR_FLOAT: return s->v.f;
    case BP_SCALAR_INT: return (double)s->v.i;
    case BP_SCALAR_BOOL: return (double)s->v.b;
    default: return none_value;
  }
}

static int bp__scalar_exact(const bp_scalar_t* s) {
  return s->kind == BP_SCALAR_INT || s->kind == BP_SCALAR_BOOL || s->kind == BP_SCALAR_NONE;
}

static __int128 bp__scalar_i128(const bp_scalar_t* s, int64_t none_value) {
  if (s->kind == BP_SCALAR_INT) return s->v.i;
  if (s->kind == BP_SCALAR_BOOL) return (__int128)s->v.b;
  return none_value;
}

/* The one length formula of arange(start, end, step): ceil((end - start) /
 * step), exact for integer outputs with integer bounds, in f64 otherwise. */
static bp_status_t bp__arange_length(bp__infer_t* x, const bp_arange_attrs_t* a, uint32_t d,
                                     int64_t* out_len) {
  if (bp__dtype_is_int(d) && bp__scalar_exact(&a->start) && bp__scalar_exact(&a->end) &&
      bp__scalar_exact(&a->step)) {
    __int128 start = bp__scalar_i128(&a->start, 0), end = bp__scalar_i128(&a->end, 0);
    __int128 step = bp__scalar_i128(&a->step, 1);
    if (step == 0) return bp__infer_fail(x, "attrs.step must not be zero");
    __int128 span = end - start;
    if ((span > 0 && step < 0) || (span < 0 && step > 0)) {
      return bp__infer_fail(x, "attrs.step has the wrong sign to go from start to end");
    }
    __int128 n = span / step + ((span % step) != 0);
    if (n > INT64_MAX) return bp__infer_fail(x, "the length overflows int64");
    *out_len = (int64_t)n;
    return BP_OK;
  }
  double start = bp__scalar_f64(&a->start, 0.0), end = bp__scalar_f64(&a->end, 0.0);
  double step = bp__scalar_f64(&a->step, 1.0);
  if (!isfinite(start) || !isfinite(end) || !isfinite(step)) {
    return bp__infer_fail(x, "attrs.start, end and step must be finite");
  }
  if (step == 0.0) return bp__infer_fail(x, "attrs.step must not be zero");
  if ((end > start && step < 0) || (end < start && step > 0)) {
    return bp__infer_fail(x, "attrs.step has the wrong sign to go from start to end");
  }
  double n = ceil((end - start) / step);
  if (!(n < 9.2e18)) return bp__infer_fail(x, "the length overflows int64");
  *out_len = (int64_t)n;
  return BP_OK;
}

bp_status_t bp__infer_arange(bp__infer_t* x) {
  const bp_arange_attrs_t* a = x->attrs;
  if (a->end.kind == BP_SCALAR_NONE) return bp__infer_fail(x, "attrs.end is required");
  int integral = bp__scalar_exact(&a->start) && bp__scalar_exact(&a->end) &&
                 bp__scalar_exact(&a->step);
  const bp_tensor_desc_t* g =
      x->given != NULL && x->given[0].dtype != BP_DTYPE_INVALID ? &x->given[0] : NULL;
  /* The dtype first (the length depends on it), then the shape. */
  bp__creation_req_t r = {a->dtype, integral ? BP_DTYPE_I64 : BP_DTYPE_F32, 0, 1, NULL};
  uint32_t d = g != NULL ? g->dtype : (a->dtype != BP_DTYPE_INVALID ? a->dtype : r.default_dtype);
  if (!bp__dtype_is_int(d) && !bp__dtype_is_float(d)) {
    return bp__infer_fail(x, "output dtype %s is not an integer or floating dtype",
                          bp_dtype_name(d));
  }
  int64_t len;
  bp_status_t st = bp__arange_length(x, a, d, &len);
  if (st != BP_OK) return st;
  if (g != NULL && g->rank != 1) {
    return bp__infer_fail(x, "output 'out' must have rank 1, got %u", g->rank);
  }
  if (g != NULL && g->sizes[0] != len) {
    return bp__infer_fail(x, "output 'out' has %lld elements but the range has %lld",
                          (long long)g->sizes[0], (long long)len);
  }
  r.has_shape = 1;
  r.sizes = &len;
  uint32_t rank;
  int64_t sizes[BP_MAX_RANK];
  st = bp__creation_target(x, &r, &d, &rank, sizes);
  if (st != BP_OK) return st;
  x->compute_dtype = d;
  return bp__infer_set_out(x, 0, d, rank, sizes);
}
