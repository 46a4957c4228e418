/* backplane core: inference rules of the scatter family (scatter,
 * scatter_add, scatter_reduce, select_scatter, slice_scatter) and of the
 * shape-changing copies pad and flip. Checks and messages follow PyTorch's
 * (ScatterGatherChecks.h, PadNd.cpp, TensorShape.cpp).
 */
#include <stdio.h>
#include <string.h>

#include "ops/ops_internal.h"

/* ---- scatter, scatter_add, scatter_reduce ---------------------------------------- */

/* PyTorch's ensure_nonempty_dim / ensure_nonempty_size: a 0-d tensor counts
 * as a tensor of shape [1]. */
static uint32_t bp__nonempty_rank(const bp_tensor_desc_t* t) { return t->rank ? t->rank : 1; }
static int64_t bp__nonempty_size(const bp_tensor_desc_t* t, uint32_t d) {
  return t->rank ? t->sizes[d] : 1;
}
static int64_t bp__desc_numel(const bp_tensor_desc_t* t) {
  int64_t n = 1;
  for (uint32_t d = 0; d < t->rank; ++d) n *= t->sizes[d];
  return n;
}

static const char* bp__scatter_reduce_name(uint32_t r) {
  static const char* const names[] = {"none", "sum", "prod", "mean", "amax", "amin"};
  return r < sizeof(names) / sizeof(names[0]) ? names[r] : "?";
}

/* The reduce modes each op takes: scatter (src/value/reduce overloads: none,
 * 'add' = sum, 'multiply' = prod), scatter_add (none or sum, both meaning
 * sum) and scatter_reduce.two (sum, prod, mean, amax, amin). */
static bp_status_t bp__scatter_check_reduce(const bp__infer_t* x, const bp_scatter_attrs_t* a,
                                            uint32_t self_dtype) {
  uint32_t id = x->op->id, r = a->reduce;
  int ok = id == BP_OP_scatter          ? (r == BP_SCATTER_NONE || r == BP_SCATTER_SUM ||
                                           r == BP_SCATTER_PROD)
           : id == BP_OP_scatter_add    ? (r == BP_SCATTER_NONE || r == BP_SCATTER_SUM)
                                        : r != BP_SCATTER_NONE;
  if (!ok) {
    return bp__infer_fail(x, "attrs.reduce = %s is not a reduction this op takes (%s)",
                          bp__scatter_reduce_name(r),
                          id == BP_OP_scatter       ? "none, sum or prod"
                          : id == BP_OP_scatter_add ? "none or sum"
                                                    : "sum, prod, mean, amax or amin");
  }
  if (r == BP_SCATTER_MEAN && self_dtype == BP_DTYPE_BOOL) {
    return bp__infer_fail(x, "reduce = mean is not defined for bool 'self'");
  }
  return BP_OK;
}

bp_status_t bp__infer_scatter(bp__infer_t* x) {
  const bp_scatter_attrs_t* a = x->attrs;
  const bp_tensor_desc_t *self = &x->in[0], *index = &x->in[1];
  const bp_tensor_desc_t* src = bp__in_present(x, 2) ? &x->in[2] : NULL;
  bp_status_t st = bp__scatter_check_reduce(x, a, self->dtype);
  if (st != BP_OK) return st;
  if (index->dtype != BP_DTYPE_I64) {
    return bp__infer_fail(x, "input 'index' has dtype %s; int64 is required",
                          bp_dtype_name(index->dtype));
  }
  if (src && src->dtype != self->dtype) {
    return bp__infer_fail(x, "input 'src' has dtype %s; it must equal 'self' dtype %s",
                          bp_dtype_name(src->dtype), bp_dtype_name(self->dtype));
  }
  if (x->op->id == BP_OP_scatter) {
    if (src && a->value.kind != BP_SCALAR_NONE) {
      return bp__infer_fail(x, "takes either 'src' or attrs.value, not both");
    }
    if (!src && a->value.kind == BP_SCALAR_NONE) {
      return bp__infer_fail(x, "needs 'src' or attrs.value (the scatter.value form)");
    }
  }
  uint32_t dim;
  st = bp__infer_wrap_dim(x, a->dim, self->rank, "attrs.dim", &dim);
  if (st != BP_OK) return st;
  /* An empty index scatters nothing; PyTorch skips the shape checks. */
  if (bp__desc_numel(index) != 0) {
    uint32_t rank = bp__nonempty_rank(self);
    if (bp__nonempty_rank(index) != rank) {
      return bp__infer_fail(x, "input 'index' has rank %u; it must equal 'self' rank %u",
                            index->rank, self->rank);
    }
    if (src && bp__nonempty_rank(src) != rank) {
      return bp__infer_fail(x, "input 'src' has rank %u; it must equal 'index' rank %u",
                            src->rank, index->rank);
    }
    for (uint32_t d = 0; d < rank; ++d) {
      int64_t n = bp__nonempty_size(index, d);
      int bad = (d != dim && n > bp__nonempty_size(self, d)) ||
                (src && n > bp__nonempty_size(src, d));
      if (bad) {
        char si[192], ss[192], sr[192] = "(none)";
        if (src) bp__shape_str(src->rank, src->sizes, sr, sizeof(sr));
        return bp__infer_fail(
            x, "index %s must be no larger than self %s apart from dim %u and no larger than src %s "
               "(dim %u)",
            bp__shape_str(index->rank, index->sizes, si, sizeof(si)),
            bp__shape_str(self->rank, self->sizes, ss, sizeof(ss)), dim, sr, d);
      }
    }
  }
  x->compute_dtype = self->dtype;
  return bp__infer_set_out(x, 0, self->dtype, self->rank, self->sizes);
}

/* ---- select_scatter, slice_scatter ------------------------------------------------ */

/* PyTorch's slice(): negative start/end count from the end, then both clamp
 * into [0, size] with end >= start; the length is ceil((end - start) / step). */
static void bp__slice_normalize(int64_t size, int64_t start, int64_t end, int64_t step,
                                int64_t* out_start, int64_t* out_len) {
  if (start < 0) start += size;
  if (end < 0) end += size;
  if (start < 0) start = 0;
  else if (start > size) start = size;
  if (end < start) end = start;
  else if (end > size) end = size;
  *out_start = start;
  *out_len = (end - start) / step + ((end - start) % step != 0);
}

bp_status_t bp__infer_slice_scatter(bp__infer_t* x) {
  const bp_slice_attrs_t* a = x->attrs;
  const bp_tensor_desc_t *self = &x->in[0], *src = &x->in[1];
  int is_select = x->op->id == BP_OP_select_scatter;
  if (self->rank == 0) {
    return bp__infer_fail(x, "%s cannot be applied to a 0-dim 'self'", is_select ? "select" : "slice");
  }
  uint32_t dim;
  bp_status_t st = bp__infer_wrap_dim(x, a->dim, self->rank, "attrs.dim", &dim);
  if (st != BP_OK) return st;
  int64_t size = self->sizes[dim];
  uint32_t rank = 0;
  int64_t want[BP_MAX_RANK];
  if (is_select) {
    if (a->start < -size || a->start >= size) {
      return bp__infer_fail(x, "index attrs.start = %lld is out of range for dim %u of size %lld",
                            (long long)a->start, dim, (long long)size);
    }
    for (uint32_t d = 0; d < self->rank; ++d) {
      if (d != dim) want[rank++] = self->sizes[d];
    }
  } else {
    if (a->step <= 0) {
      return bp__infer_fail(x, "attrs.step = %lld must be positive", (long long)a->step);
    }
    int64_t start, len;
    bp__slice_normalize(size, a->start, a->end, a->step, &start, &len);
    rank = self->rank;
    memcpy(want, self->sizes, sizeof(int64_t) * rank);
    want[dim] = len;
  }
  if (!bp__shape_equal(src->rank, src->sizes, rank, want)) {
    char s0[192], s1[192];
    return bp__infer_fail(x, "input 'src' has shape %s; the %s of 'self' has shape %s",
                          bp__shape_str(src->rank, src->sizes, s0, sizeof(s0)),
                          is_select ? "selection" : "slice", bp__shape_str(rank, want, s1, sizeof(s1)));
  }
  x->compute_dtype = self->dtype;
  return bp__infer_set_out(x, 0, self->dtype, self->rank, self->sizes);
}

/* ---- flip ------------------------------------------------------------------------- */

bp_status_t bp__infer_flip(bp__infer_t* x) {
  const bp_dims_attrs_t* a = x->attrs;
  const bp_tensor_desc_t* in = &x->in[0];
  uint32_t seen = 0;
  for (uint32_t k = 0; k < a->num_dims; ++k) {
    uint32_t d;
    bp_status_t st = bp__infer_wrap_dim(x, a->dims[k], in->rank, "attrs.dims entry", &d);
    if (st != BP_OK) return st;
    if (seen & (1u << d)) {
      return bp__infer_fail(x, "dim %u appears more than once in attrs.dims", d);
    }
    seen |= 1u << d;
  }
  x->compute_dtype = in->dtype;
  return bp__infer_set_out(x, 0, in->dtype, in->rank, in->sizes);
}

/* ---- pad -------------------------------------------------------------------------- */

static const char* bp__pad_mode_name(uint32_t m) {
  static const char* const names[] = {"constant", "reflect", "replicate", "circular"};
  return m < 4 ? names[m] : "?";
}

/* Checks of the non-constant modes (PyTorch at::pad): 1, 2 or 3 padded dims
 * on an input of that many dims plus one or two (channel, batch), no value. */
static bp_status_t bp__pad_check_mode(const bp__infer_t* x, const bp_pad_attrs_t* a,
                                      const bp_tensor_desc_t* in) {
  const char* mode = bp__pad_mode_name(a->mode);
  int value_zero = a->value.kind == BP_SCALAR_NONE ||
                   (a->value.kind == BP_SCALAR_FLOAT && a->value.v.f == 0.0) ||
                   (a->value.kind == BP_SCALAR_INT && a->value.v.i == 0) ||
                   (a->value.kind == BP_SCALAR_BOOL && !a->value.v.b);
  if (!value_zero) return bp__infer_fail(x, "padding mode %s takes no attrs.value", mode);
  uint32_t k = a->num_pads / 2;
  if (k < 1 || k > 3 || (in->rank != k + 1 && in->rank != k + 2)) {
    return bp__infer_fail(x, "padding mode %s pads 1, 2 or 3 trailing dims of an input with one "
                             "or two more dims; got %u pads for rank %u",
                          mode, a->num_pads, in->rank);
  }
  if (a->mode == BP_PAD_CIRCULAR) return BP_OK;
  /* reflect, replicate: every dim but the batch dim is non-empty. */
  for (uint32_t d = in->rank == k + 2 ? 1 : 0; d < in->rank; ++d) {
    if (in->sizes[d] == 0) {
      char s[192];
      return bp__infer_fail(x, "padding mode %s needs non-empty dims apart from the batch dim; "
                               "input shape %s",
                            mode, bp__shape_str(in->rank, in->sizes, s, sizeof(s)));
    }
  }
  return BP_OK;
}

bp_status_t bp__infer_pad(bp__infer_t* x) {
  const bp_pad_attrs_t* a = x->attrs;
  const bp_tensor_desc_t* in = &x->in[0];
  const char* mode = bp__pad_mode_name(a->mode);
  if (a->num_pads > 2 * in->rank) {
    return bp__infer_fail(x, "attrs.num_pads = %u exceeds twice the input's rank %u", a->num_pads,
                          in->rank);
  }
  if (a->mode != BP_PAD_CONSTANT) {
    bp_status_t st = bp__pad_check_mode(x, a, in);
    if (st != BP_OK) return st;
  }
  int64_t sizes[BP_MAX_RANK];
  memcpy(sizes, in->sizes, sizeof(int64_t) * in->rank);
  for (uint32_t p = 0; p < a->num_pads / 2; ++p) {
    uint32_t d = in->rank - 1 - p;
    int64_t before = a->pads[2 * p], after = a->pads[2 * p + 1];
    int64_t s = in->sizes[d], o;
    if (__builtin_add_overflow(s, before, &o) || __builtin_add_overflow(o, after, &o) || o < 0) {
      return bp__infer_fail(x, "input size %lld of dim %u with pads (%lld, %lld) gives an invalid "
                               "output size",
                            (long long)s, d, (long long)before, (long long)after);
    }
    if (a->mode == BP_PAD_REFLECT && (before >= s || after >= s)) {
      return bp__infer_fail(x, "reflect pads (%lld, %lld) must be smaller than size %lld of dim %u",
                            (long long)before, (long long)after, (long long)s, d);
    }
    if (a->mode == BP_PAD_CIRCULAR) {
      /* Negative pads crop first; a pad then wraps at most once around what
       * is left. */
      int64_t kept = s - (before < 0 ? -before : 0) - (after < 0 ? -after : 0);
      if (before > kept || after > kept) {
        return bp__infer_fail(x, "circular pads (%lld, %lld) wrap around size %lld of dim %u more "
                                 "than once",
                              (long long)before, (long long)after, (long long)s, d);
      }
    }
    if ((a->mode == BP_PAD_REFLECT || a->mode == BP_PAD_REPLICATE) && o < 1) {
      return bp__infer_fail(x, "%s padding of dim %u (size %lld, pads %lld, %lld) leaves no "
                               "output",
                            mode, d, (long long)s, (long long)before, (long long)after);
    }
    sizes[d] = o;
  }
  x->compute_dtype = in->dtype;
  return bp__infer_set_out(x, 0, in->dtype, in->rank, sizes);
}
