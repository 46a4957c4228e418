/* backplane core: inference rules of copies, data movement and indexing
 * (creation ops: op_infer_creation.c).
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "ops/ops_internal.h"

/* ---- copies ------------------------------------------------------------------- */

bp_status_t bp__infer_cast(bp__infer_t* x) {
  const bp_cast_attrs_t* a = x->attrs;
  x->compute_dtype = a->dtype;
  return bp__infer_set_out(x, 0, a->dtype, x->in[0].rank, x->in[0].sizes);
}

/* copy(self, src): the result has self's dtype and shape; src broadcasts to
 * self (one way only) and is converted to self's dtype. */
bp_status_t bp__infer_copy(bp__infer_t* x) {
  const bp_tensor_desc_t *self = &x->in[0], *src = &x->in[1];
  int ok = src->rank <= self->rank;
  for (uint32_t k = 0; ok && k < src->rank; ++k) {
    int64_t s = src->sizes[src->rank - 1 - k];
    ok = s == 1 || s == self->sizes[self->rank - 1 - k];
  }
  if (!ok) {
    char s0[192], s1[192];
    return bp__infer_fail(x, "input 'src' of shape %s does not broadcast to 'self' shape %s",
                          bp__shape_str(src->rank, src->sizes, s0, sizeof(s0)),
                          bp__shape_str(self->rank, self->sizes, s1, sizeof(s1)));
  }
  x->compute_dtype = self->dtype;
  return bp__infer_set_out(x, 0, self->dtype, self->rank, self->sizes);
}

static bp_status_t bp__like_input(bp__infer_t* x, uint32_t i) {
  x->compute_dtype = x->in[i].dtype;
  return bp__infer_set_out(x, 0, x->in[i].dtype, x->in[i].rank, x->in[i].sizes);
}
bp_status_t bp__infer_like_input1(bp__infer_t* x) { return bp__like_input(x, 0); }
bp_status_t bp__infer_like_input2(bp__infer_t* x) { return bp__like_input(x, 1); }

/* cat: ranks match (1-d empty tensors are skipped, legacy PyTorch), dtypes
 * promote, all sizes but dim match. */
bp_status_t bp__infer_cat(bp__infer_t* x) {
  const bp_dim_attrs_t* a = x->attrs;
  char n0[64], n1[64];
  if (x->num_inputs == 0) return bp__infer_fail(x, "needs at least one tensor");
  if (a->dtype != BP_DTYPE_INVALID) {
    return bp__infer_fail(x, "attrs.dtype must be BP_DTYPE_INVALID (cat promotes its inputs)");
  }
  bp__result_type_t rt;
  bp__result_type_init(&rt);
  uint32_t first = UINT32_MAX;
  for (uint32_t i = 0; i < x->num_inputs; ++i) {
    const bp_tensor_desc_t* t = &x->in[i];
    if (t->rank == 0) {
      return bp__infer_fail(x, "zero-dimensional tensor '%s' cannot be concatenated",
                            bp__op_input_name(x->op, x->num_inputs, i, n0));
    }
    bp__result_type_add_tensor(&rt, t);
    if (first == UINT32_MAX && !(t->rank == 1 && t->sizes[0] == 0)) first = i;
  }
  uint32_t d = bp__result_type_get(&rt);
  if (d == BP_DTYPE_INVALID) return bp__infer_fail(x, "the tensors' dtypes have no common dtype");
  x->compute_dtype = d;
  if (first == UINT32_MAX) {
    int64_t zero = 0;
    return bp__infer_set_out(x, 0, d, 1, &zero);
  }
  const bp_tensor_desc_t* f = &x->in[first];
  uint32_t dim;
  bp_status_t st = bp__infer_wrap_dim(x, a->dim, f->rank, "attrs.dim", &dim);
  if (st != BP_OK) return st;
  int64_t sizes[BP_MAX_RANK];
  memcpy(sizes, f->sizes, sizeof(int64_t) * f->rank);
  sizes[dim] = 0;
  for (uint32_t i = first; i < x->num_inputs; ++i) {
    const bp_tensor_desc_t* t = &x->in[i];
    if (t->rank == 1 && t->sizes[0] == 0) continue;
    char s0[192], s1[192];
    int same = t->rank == f->rank;
    for (uint32_t k = 0; same && k < f->rank; ++k) same = k == dim || t->sizes[k] == f->sizes[k];
    if (!same) {
      return bp__infer_fail(x, "tensor '%s' of shape %s does not match '%s' of shape %s except "
                               "in dim %u",
                            bp__op_input_name(x->op, x->num_inputs, i, n0),
                            bp__shape_str(t->rank, t->sizes, s0, sizeof(s0)),
                            bp__op_input_name(x->op, x->num_inputs, first, n1),
                            bp__shape_str(f->rank, f->sizes, s1, sizeof(s1)), dim);
    }
    if (__builtin_add_overflow(sizes[dim], t->sizes[dim], &sizes[dim])) {
      return bp__infer_fail(x, "the concatenated size overflows int64");
    }
  }
  return bp__infer_set_out(x, 0, d, f->rank, sizes);
}

/* ---- indexing ------------------------------------------------------------------- */

static bp_status_t bp__index_dtype(bp__infer_t* x, uint32_t i) {
  uint32_t d = x->in[i].dtype;
  if (d != BP_DTYPE_I32 && d != BP_DTYPE_I64) {
    char n[64];
    return bp__infer_fail(x, "input '%s' has dtype %s; expected i32 or i64",
                          bp__op_input_name(x->op, x->num_inputs, i, n), bp_dtype_name(d));
  }
  return BP_OK;
}

/* index_select and gather: input 1 holds indices, attrs.dim wraps over
 * input 0's rank into *out_dim. */
static bp_status_t bp__index_args(bp__infer_t* x, uint32_t* out_dim) {
  const bp_dim_attrs_t* a = x->attrs;
  bp_status_t st = bp__index_dtype(x, 1);
  if (st != BP_OK) return st;
  return bp__infer_wrap_dim(x, a->dim, x->in[0].rank, "attrs.dim", out_dim);
}

bp_status_t bp__infer_index_select(bp__infer_t* x) {
  const bp_tensor_desc_t *self = &x->in[0], *index = &x->in[1];
  uint32_t dim;
  bp_status_t st = bp__index_args(x, &dim);
  if (st != BP_OK) return st;
  if (index->rank > 1) {
    return bp__infer_fail(x, "input 'index' must have rank 0 or 1, got %u", index->rank);
  }
  int64_t n = index->rank ? index->sizes[0] : 1;
  int64_t sizes[BP_MAX_RANK];
  memcpy(sizes, self->sizes, sizeof(int64_t) * self->rank);
  if (self->rank) {
    sizes[dim] = n;
  } else if (n != 1) {
    return bp__infer_fail(x, "a 0-d 'self' takes exactly one index, got %lld", (long long)n);
  }
  x->compute_dtype = self->dtype;
  return bp__infer_set_out(x, 0, self->dtype, self->rank, sizes);
}

bp_status_t bp__infer_gather(bp__infer_t* x) {
  const bp_tensor_desc_t *self = &x->in[0], *index = &x->in[1];
  uint32_t dim;
  bp_status_t st = bp__index_args(x, &dim);
  if (st != BP_OK) return st;
  uint32_t sr = self->rank ? self->rank : 1, ir = index->rank ? index->rank : 1;
  if (sr != ir) {
    return bp__infer_fail(x, "input 'index' has rank %u but 'self' has rank %u", index->rank,
                          self->rank);
  }
  for (uint32_t k = 0; k < index->rank && self->rank; ++k) {
    if (k != dim && index->sizes[k] > self->sizes[k]) {
      return bp__infer_fail(x, "input 'index' size %lld exceeds 'self' size %lld in dim %u",
                            (long long)index->sizes[k], (long long)self->sizes[k], k);
    }
  }
  x->compute_dtype = self->dtype;
  return bp__infer_set_out(x, 0, self->dtype, index->rank, index->sizes);
}

/* ---- shape-changing copies -------------------------------------------------------- */

/* pad: core/ops/op_infer_scatter.c. */

bp_status_t bp__infer_repeat(bp__infer_t* x) {
  const bp_dims_attrs_t* a = x->attrs;
  const bp_tensor_desc_t* in = &x->in[0];
  if (a->num_dims < in->rank) {
    return bp__infer_fail(x, "attrs.num_dims = %u is smaller than the input's rank %u",
                          a->num_dims, in->rank);
  }
  int64_t sizes[BP_MAX_RANK];
  uint32_t lead = a->num_dims - in->rank;
  for (uint32_t d = 0; d < a->num_dims; ++d) {
    if (a->dims[d] < 0) {
      return bp__infer_fail(x, "repeat count attrs.dims[%u] = %lld is negative", d,
                            (long long)a->dims[d]);
    }
    int64_t s = d < lead ? 1 : in->sizes[d - lead];
    if (bp__mul_overflow_i64(s, a->dims[d], &sizes[d])) {
      return bp__infer_fail(x, "the repeated size of dim %u overflows int64", d);
    }
  }
  x->compute_dtype = in->dtype;
  return bp__infer_set_out(x, 0, in->dtype, a->num_dims, sizes);
}
