/* Tensor metadata with PyTorch's rules: the size and stride of one dim
 * (the dim wraps) and the storage offset in elements. Tensors are immutable
 * except through bp_tensor_resize, so these are thread-safe. */
#include "internal.h"

/* sizes[dim] or strides[dim] of t, with the dim wrapped into [0, rank) (a
 * 0-d tensor has no dims). */
static bp_status_t dim_value(const char* fn, const bp_tensor_t* t, int64_t dim, int stride,
                             int64_t* out) {
  bp__clear_error();
  BP__REQUIRE_ARG(fn, t);
  if (!out) return bp__error(BP_INVALID_ARGUMENT, "%s: argument '%s' is NULL", fn,
                             stride ? "out_stride" : "out_size");
  int64_t d = dim < 0 ? dim + (int64_t)t->rank : dim;
  if (d < 0 || d >= (int64_t)t->rank)
    return bp__error(BP_INVALID_ARGUMENT, "%s: dim %lld out of range for a tensor of rank %u", fn,
                     (long long)dim, t->rank);
  *out = stride ? t->strides[d] : t->sizes[d];
  return BP_OK;
}

bp_status_t bp_tensor_size(const bp_tensor_t* t, int64_t dim, int64_t* out_size) {
  return dim_value("bp_tensor_size", t, dim, 0, out_size);
}

bp_status_t bp_tensor_stride(const bp_tensor_t* t, int64_t dim, int64_t* out_stride) {
  return dim_value("bp_tensor_stride", t, dim, 1, out_stride);
}

bp_status_t bp_tensor_storage_offset(const bp_tensor_t* t, int64_t* out_elems) {
  bp__clear_error();
  BP__REQUIRE_ARG("bp_tensor_storage_offset", t);
  BP__REQUIRE_ARG("bp_tensor_storage_offset", out_elems);
  /* Whole elements: bp_tensor_from_buffer requires an aligned byte offset
   * and views move it by whole elements. */
  *out_elems = (int64_t)(t->byte_offset / bp_dtype_size(t->dtype));
  return BP_OK;
}
