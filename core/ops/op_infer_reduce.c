/* backplane core: inference rules of reductions, scans, sort and topk
 * (docs/semantics.md, "Reductions").
 */
#include <string.h>

#include "ops/ops_internal.h"

enum bp__dims_policy {
  BP__DIMS_ANY = 0,      /* sum, mean, amax...: any set of dims, or all */
  BP__DIMS_AT_MOST_ONE,  /* argmax/argmin: one dim, or all (flattened) */
  BP__DIMS_EXACTLY_ONE   /* max.dim/min.dim */
};

/* Output shape of a reduction from bp_reduce_attrs_t. `needs_nonempty`:
 * the op has no identity (amax, argmax...), so reducing an empty dim is an
 * error unless the output is empty too. */
static bp_status_t bp__reduce_shape(bp__infer_t* x, enum bp__dims_policy policy,
                                    int needs_nonempty, uint32_t* out_rank, int64_t* out_sizes) {
  const bp_reduce_attrs_t* a = x->attrs;
  const bp_tensor_desc_t* in = &x->in[0];
  int all = (a->flags & BP_REDUCE_ALL_DIMS) != 0;
  int keepdim = (a->flags & BP_REDUCE_KEEPDIM) != 0;
  if (all && a->num_dims > 0) {
    return bp__infer_fail(x, "attrs.flags has BP_REDUCE_ALL_DIMS but attrs.num_dims = %d "
                             "(clear the flag to reduce the listed dims)",
                          a->num_dims);
  }
  if (policy == BP__DIMS_EXACTLY_ONE && (all || a->num_dims != 1)) {
    return bp__infer_fail(x, "needs exactly one dim (attrs.num_dims = 1 without "
                             "BP_REDUCE_ALL_DIMS), got num_dims = %d%s",
                          a->num_dims, all ? " with BP_REDUCE_ALL_DIMS" : "");
  }
  if (policy == BP__DIMS_AT_MOST_ONE && a->num_dims > 1) {
    return bp__infer_fail(x, "takes one dim or all dims, got attrs.num_dims = %d", a->num_dims);
  }
  uint32_t reduced = 0;
  if (all || a->num_dims == 0) {
    reduced = in->rank ? (uint32_t)((1ull << in->rank) - 1) : 0;
  } else {
    for (int32_t k = 0; k < a->num_dims; ++k) {
      uint32_t d;
      bp_status_t st = bp__infer_wrap_dim(x, a->dims[k], in->rank, "dim", &d);
      if (st != BP_OK) return st;
      if (in->rank == 0) continue; /* 0-d: dim 0 / -1 name the tensor itself */
      if (reduced & (1u << d)) {
        return bp__infer_fail(x, "dim %u appears more than once in attrs.dims", d);
      }
      reduced |= 1u << d;
    }
  }
  uint32_t rank = 0;
  int64_t out_numel = 1;
  uint32_t empty_dim = UINT32_MAX;
  for (uint32_t d = 0; d < in->rank; ++d) {
    if (reduced & (1u << d)) {
      if (in->sizes[d] == 0 && empty_dim == UINT32_MAX) empty_dim = d;
      if (keepdim) out_sizes[rank++] = 1;
    } else {
      out_sizes[rank++] = in->sizes[d];
      out_numel *= in->sizes[d] > 1 ? 1 : in->sizes[d]; /* only zero-ness matters */
    }
  }
  if (needs_nonempty && empty_dim != UINT32_MAX && out_numel != 0) {
    return bp__infer_fail(x, "cannot reduce over dim %u of size 0: the op has no identity",
                          empty_dim);
  }
  *out_rank = rank;
  return BP_OK;
}

static bp_status_t bp__reject_dtype_attr(bp__infer_t* x) {
  const bp_reduce_attrs_t* a = x->attrs;
  if (a->dtype != BP_DTYPE_INVALID) {
    return bp__infer_fail(x, "attrs.dtype must be BP_DTYPE_INVALID (the output dtype is fixed)");
  }
  return BP_OK;
}

bp_status_t bp__infer_reduce_sum(bp__infer_t* x) {
  const bp_reduce_attrs_t* a = x->attrs;
  uint32_t in = x->in[0].dtype;
  uint32_t d = a->dtype;
  if (d == BP_DTYPE_INVALID) {
    d = (bp__dtype_is_int(in) || in == BP_DTYPE_BOOL) ? BP_DTYPE_I64 : in;
  } else if (bp__dtype_is_storage_only(d)) {
    return bp__infer_fail(x, "attrs.dtype %s is a storage-only dtype", bp_dtype_name(d));
  }
  uint32_t rank;
  int64_t sizes[BP_MAX_RANK];
  bp_status_t st = bp__reduce_shape(x, BP__DIMS_ANY, 0, &rank, sizes);
  if (st != BP_OK) return st;
  x->compute_dtype = d;
  return bp__infer_set_out(x, 0, d, rank, sizes);
}

bp_status_t bp__infer_reduce_float(bp__infer_t* x) {
  const bp_reduce_attrs_t* a = x->attrs;
  uint32_t in = x->in[0].dtype;
  uint32_t op = x->op->id;
  /* var and logsumexp take no dtype argument in PyTorch. */
  if ((op == BP_OP_var || op == BP_OP_logsumexp) && a->dtype != BP_DTYPE_INVALID) {
    return bp__infer_fail(x, "attrs.dtype must be BP_DTYPE_INVALID (the op has no dtype argument)");
  }
  /* logsumexp of an integer or bool tensor computes in the default float
   * dtype (f32), as PyTorch. */
  if (op == BP_OP_logsumexp && (bp__dtype_is_int(in) || in == BP_DTYPE_BOOL)) in = BP_DTYPE_F32;
  uint32_t d = a->dtype != BP_DTYPE_INVALID ? a->dtype : in;
  if (!bp__dtype_is_float(d) && !bp__dtype_is_complex(d)) {
    return bp__infer_fail(x, "needs a floating input or a floating attrs.dtype, got %s%s",
                          bp_dtype_name(d),
                          a->dtype != BP_DTYPE_INVALID ? " (attrs.dtype)" : " (input 'self')");
  }
  uint32_t rank;
  int64_t sizes[BP_MAX_RANK];
  bp_status_t st = bp__reduce_shape(x, BP__DIMS_ANY, 0, &rank, sizes);
  if (st != BP_OK) return st;
  x->compute_dtype = d;
  /* var of a complex tensor is real. */
  uint32_t out = (x->op->id == BP_OP_var && bp__dtype_is_complex(d)) ? BP_DTYPE_F32 : d;
  return bp__infer_set_out(x, 0, out, rank, sizes);
}

/* Reductions with a fixed output dtype: no attrs.dtype, optionally no
 * complex input when needs_nonempty; index_output adds an i64 indices output. */
static bp_status_t bp__reduce_fixed(bp__infer_t* x, enum bp__dims_policy policy,
                                    int needs_nonempty, uint32_t out_dtype,
                                    uint32_t index_output) {
  bp_status_t st = bp__reject_dtype_attr(x);
  if (st != BP_OK) return st;
  uint32_t d = x->in[0].dtype;
  if (needs_nonempty && bp__dtype_is_complex(d)) {
    return bp__infer_fail(x, "not defined for complex input");
  }
  uint32_t rank;
  int64_t sizes[BP_MAX_RANK];
  st = bp__reduce_shape(x, policy, needs_nonempty, &rank, sizes);
  if (st != BP_OK) return st;
  x->compute_dtype = d;
  st = bp__infer_set_out(x, 0, out_dtype == BP_DTYPE_INVALID ? d : out_dtype, rank, sizes);
  if (st == BP_OK && index_output) st = bp__infer_set_out(x, 1, BP_DTYPE_I64, rank, sizes);
  return st;
}

/* amax/amin: the input's dtype. */
bp_status_t bp__infer_reduce_same(bp__infer_t* x) {
  return bp__reduce_fixed(x, BP__DIMS_ANY, 1, BP_DTYPE_INVALID, 0);
}
/* any: bool, except that a uint8 input gives uint8 (as PyTorch, which keeps
 * uint8 there for compatibility with masks of the days before bool). */
bp_status_t bp__infer_reduce_bool(bp__infer_t* x) {
  uint32_t out = x->in[0].dtype == BP_DTYPE_U8 ? BP_DTYPE_U8 : BP_DTYPE_BOOL;
  return bp__reduce_fixed(x, BP__DIMS_ANY, 0, out, 0);
}
/* argmax/argmin: i64. */
bp_status_t bp__infer_reduce_index(bp__infer_t* x) {
  return bp__reduce_fixed(x, BP__DIMS_AT_MOST_ONE, 1, BP_DTYPE_I64, 0);
}
/* max.dim/min.dim: values in the input's dtype, i64 indices. */
bp_status_t bp__infer_reduce_value_index(bp__infer_t* x) {
  return bp__reduce_fixed(x, BP__DIMS_EXACTLY_ONE, 1, BP_DTYPE_INVALID, 1);
}

/* ---- scans and sorting --------------------------------------------------------- */

bp_status_t bp__infer_cumsum(bp__infer_t* x) {
  const bp_dim_attrs_t* a = x->attrs;
  const bp_tensor_desc_t* in = &x->in[0];
  uint32_t dim;
  bp_status_t st = bp__infer_wrap_dim(x, a->dim, in->rank, "attrs.dim", &dim);
  if (st != BP_OK) return st;
  uint32_t d = a->dtype;
  if (d == BP_DTYPE_INVALID) {
    d = (bp__dtype_is_int(in->dtype) || in->dtype == BP_DTYPE_BOOL) ? BP_DTYPE_I64 : in->dtype;
  } else if (bp__dtype_is_storage_only(d)) {
    return bp__infer_fail(x, "attrs.dtype %s is a storage-only dtype", bp_dtype_name(d));
  }
  x->compute_dtype = d;
  return bp__infer_set_out(x, 0, d, in->rank, in->sizes);
}

bp_status_t bp__infer_sort(bp__infer_t* x) {
  const bp_sort_attrs_t* a = x->attrs;
  const bp_tensor_desc_t* in = &x->in[0];
  uint32_t dim;
  bp_status_t st = bp__infer_wrap_dim(x, a->dim, in->rank, "attrs.dim", &dim);
  if (st != BP_OK) return st;
  if (bp__dtype_is_complex(in->dtype)) return bp__infer_fail(x, "not defined for complex input");
  x->compute_dtype = in->dtype;
  st = bp__infer_set_out(x, 0, in->dtype, in->rank, in->sizes);
  if (st != BP_OK) return st;
  return bp__infer_set_out(x, 1, BP_DTYPE_I64, in->rank, in->sizes);
}

bp_status_t bp__infer_topk(bp__infer_t* x) {
  const bp_topk_attrs_t* a = x->attrs;
  const bp_tensor_desc_t* in = &x->in[0];
  uint32_t dim;
  bp_status_t st = bp__infer_wrap_dim(x, a->dim, in->rank, "attrs.dim", &dim);
  if (st != BP_OK) return st;
  if (bp__dtype_is_complex(in->dtype)) return bp__infer_fail(x, "not defined for complex input");
  if (in->dtype == BP_DTYPE_BOOL) return bp__infer_fail(x, "not defined for bool input (as PyTorch)");
  int64_t n = in->rank ? in->sizes[dim] : 1;
  if (a->k < 0 || a->k > n) {
    return bp__infer_fail(x, "attrs.k = %lld is out of range for a dim of size %lld",
                          (long long)a->k, (long long)n);
  }
  int64_t sizes[BP_MAX_RANK];
  memcpy(sizes, in->sizes, sizeof(int64_t) * in->rank);
  if (in->rank) sizes[dim] = a->k;
  x->compute_dtype = in->dtype;
  st = bp__infer_set_out(x, 0, in->dtype, in->rank, sizes);
  if (st != BP_OK) return st;
  return bp__infer_set_out(x, 1, BP_DTYPE_I64, in->rank, sizes);
}
