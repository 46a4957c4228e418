/* Tensors: a buffer reference plus a descriptor (dtype, sizes, strides in
 * elements, byte offset). Immutable after creation except through
 * bp_tensor_resize (externally synchronized), so every accessor is
 * thread-safe. */
#include <stdlib.h>
#include <string.h>

#include "internal.h"
#include "runtime/tensor_internal.h"

bp_status_t bp__tensor_check_shape(const char* fn, uint32_t dtype, uint32_t rank,
                                   const int64_t* sizes, const int64_t* strides) {
  if (bp_dtype_size(dtype) == 0)
    return bp__error(BP_INVALID_ARGUMENT, "%s: invalid dtype %u", fn, dtype);
  if (rank > BP_MAX_RANK)
    return bp__error(BP_INVALID_ARGUMENT, "%s: rank %u exceeds the maximum %d", fn, rank,
                     BP_MAX_RANK);
  if (rank > 0) BP__REQUIRE_ARG(fn, sizes);
  for (uint32_t d = 0; d < rank; ++d) {
    if (sizes[d] < 0)
      return bp__error(BP_INVALID_ARGUMENT, "%s: size %lld of dim %u is negative", fn,
                       (long long)sizes[d], d);
    if (strides && strides[d] < 0)
      return bp__error(BP_INVALID_ARGUMENT,
                       "%s: stride %lld of dim %u is negative (negative strides are not supported)",
                       fn, (long long)strides[d], d);
  }
  int64_t numel = 0;
  if (bp__numel(rank, sizes, &numel) ||
      bp__mul_overflow_i64(numel, (int64_t)bp_dtype_size(dtype), &numel))
    return bp__error(BP_INVALID_ARGUMENT, "%s: the tensor's byte size overflows 64 bits", fn);
  return BP_OK;
}

int bp__dense_strides(uint32_t rank, const int64_t* sizes, int64_t* out_strides) {
  int64_t stride = 1;
  for (uint32_t d = rank; d-- > 0;) {
    out_strides[d] = stride;
    /* As PyTorch: a size 0 dim advances the stride as a size 1 dim would. */
    if (bp__mul_overflow_i64(stride, sizes[d] > 1 ? sizes[d] : 1, &stride)) return 1;
  }
  return 0;
}

bp_status_t bp__tensor_wrap(bp_buffer_t* buffer, uint32_t dtype, uint32_t rank,
                            const int64_t* sizes, const int64_t* strides, uint64_t byte_offset,
                            bp_tensor_t** out_tensor) {
  bp_tensor_t* t = calloc(1, sizeof(*t));
  if (!t) return bp__error(BP_RESOURCE_EXHAUSTED, "out of host memory for a tensor");
  atomic_init(&t->refcount, 1);
  bp_buffer_retain(buffer);
  t->buffer = buffer;
  t->dtype = dtype;
  t->rank = rank;
  for (uint32_t d = 0; d < rank; ++d) {
    t->sizes[d] = sizes[d];
    t->strides[d] = strides[d];
  }
  t->byte_offset = byte_offset;
  *out_tensor = t;
  return BP_OK;
}

bp_status_t bp__tensor_check_span(const char* fn, const bp_buffer_t* buffer, uint32_t dtype,
                                  uint32_t rank, const int64_t* sizes, const int64_t* strides,
                                  uint64_t byte_offset) {
  uint64_t lo = 0, hi = 0;
  if (bp__tensor_span(dtype, rank, sizes, strides, byte_offset, &lo, &hi))
    return bp__error(BP_OUT_OF_RANGE, "%s: the tensor's extent overflows 64 bits", fn);
  if (hi > lo && hi > buffer->size)
    return bp__error(
        BP_OUT_OF_RANGE, "%s: elements span bytes [%llu, %llu) but the buffer has %llu bytes", fn,
        (unsigned long long)lo, (unsigned long long)hi, (unsigned long long)buffer->size);
  return BP_OK;
}

/* Shared by create and create_strided: a fresh buffer of `bytes` (0 for a
 * tensor with no elements: a zero-size buffer). */
static bp_status_t create_with_buffer(bp_device_t* device, uint32_t dtype, uint32_t rank,
                                      const int64_t* sizes, const int64_t* strides, uint64_t bytes,
                                      bp_tensor_t** out_tensor) {
  bp_buffer_t* buffer = NULL;
  /* The first device-local space when the device has one, else space 0. */
  uint32_t space = 0;
  for (uint32_t i = device->num_spaces; i-- > 0;) {
    if (device->spaces[i].kind == BP_MEMORY_DEVICE) space = i;
  }
  bp_status_t status =
      bp_buffer_allocate(device, space, bytes, &buffer);
  if (status != BP_OK) return status;
  status = bp__tensor_wrap(buffer, dtype, rank, sizes, strides, 0, out_tensor);
  if (status == BP_OK) (*out_tensor)->core_allocated = 1;
  bp_buffer_release(buffer); /* the tensor holds its own reference */
  return status;
}

bp_status_t bp_tensor_create(bp_device_t* device, uint32_t dtype, uint32_t rank,
                             const int64_t* sizes, bp_tensor_t** out_tensor) {
  static const char fn[] = "bp_tensor_create";
  int64_t strides[BP_MAX_RANK] = {0};
  int64_t numel = 0;
  bp_status_t status = BP_OK;
  bp__clear_error();
  BP__REQUIRE_ARG(fn, device);
  BP__REQUIRE_ARG(fn, out_tensor);
  if ((status = bp__tensor_check_shape(fn, dtype, rank, sizes, NULL)) != BP_OK) return status;
  if (bp__dense_strides(rank, sizes, strides))
    return bp__error(BP_INVALID_ARGUMENT, "%s: the dense strides overflow 64 bits", fn);
  (void)bp__numel(rank, sizes, &numel); /* checked above */
  return create_with_buffer(device, dtype, rank, sizes, strides,
                            (uint64_t)numel * bp_dtype_size(dtype), out_tensor);
}

bp_status_t bp_tensor_create_strided(bp_device_t* device, uint32_t dtype, uint32_t rank,
                                     const int64_t* sizes, const int64_t* strides,
                                     bp_tensor_t** out_tensor) {
  static const char fn[] = "bp_tensor_create_strided";
  uint64_t lo = 0, hi = 0;
  bp_status_t status = BP_OK;
  bp__clear_error();
  BP__REQUIRE_ARG(fn, device);
  BP__REQUIRE_ARG(fn, out_tensor);
  if (rank > 0) BP__REQUIRE_ARG(fn, strides);
  if ((status = bp__tensor_check_shape(fn, dtype, rank, sizes, strides)) != BP_OK) return status;
  if (bp__tensor_span(dtype, rank, sizes, strides, 0, &lo, &hi))
    return bp__error(BP_INVALID_ARGUMENT, "%s: the tensor's extent overflows 64 bits", fn);
  return create_with_buffer(device, dtype, rank, sizes, strides, hi, out_tensor);
}

bp_status_t bp_tensor_from_buffer(bp_buffer_t* buffer, uint32_t dtype, uint32_t rank,
                                  const int64_t* sizes, const int64_t* strides,
                                  uint64_t byte_offset, bp_tensor_t** out_tensor) {
  static const char fn[] = "bp_tensor_from_buffer";
  int64_t dense[BP_MAX_RANK] = {0};
  bp_status_t status = BP_OK;
  bp__clear_error();
  BP__REQUIRE_ARG(fn, buffer);
  BP__REQUIRE_ARG(fn, out_tensor);
  if ((status = bp__tensor_check_shape(fn, dtype, rank, sizes, strides)) != BP_OK) return status;
  if (byte_offset % bp_dtype_size(dtype) != 0)
    return bp__error(BP_INVALID_ARGUMENT,
                     "%s: byte offset %llu is not a multiple of the element size %zu", fn,
                     (unsigned long long)byte_offset, bp_dtype_size(dtype));
  if (!strides) {
    if (bp__dense_strides(rank, sizes, dense))
      return bp__error(BP_INVALID_ARGUMENT, "%s: the dense strides overflow 64 bits", fn);
    strides = dense;
  }
  if ((status = bp__tensor_check_span(fn, buffer, dtype, rank, sizes, strides, byte_offset)) !=
      BP_OK)
    return status;
  return bp__tensor_wrap(buffer, dtype, rank, sizes, strides, byte_offset, out_tensor);
}

void bp_tensor_retain(bp_tensor_t* tensor) {
  if (tensor) atomic_fetch_add_explicit(&tensor->refcount, 1, memory_order_relaxed);
}

void bp_tensor_release(bp_tensor_t* tensor) {
  if (!tensor) return;
  if (atomic_fetch_sub_explicit(&tensor->refcount, 1, memory_order_acq_rel) != 1) return;
  bp_buffer_release(tensor->buffer);
  free(tensor);
}

uint32_t bp_tensor_dtype(const bp_tensor_t* t) { return t ? t->dtype : BP_DTYPE_INVALID; }
uint32_t bp_tensor_rank(const bp_tensor_t* t) { return t ? t->rank : 0; }
const int64_t* bp_tensor_sizes(const bp_tensor_t* t) { return t ? t->sizes : NULL; }
const int64_t* bp_tensor_strides(const bp_tensor_t* t) { return t ? t->strides : NULL; }
uint64_t bp_tensor_byte_offset(const bp_tensor_t* t) { return t ? t->byte_offset : 0; }
bp_buffer_t* bp_tensor_buffer(const bp_tensor_t* t) { return t ? t->buffer : NULL; }
bp_device_t* bp_tensor_device(const bp_tensor_t* t) { return t ? t->buffer->device : NULL; }

int64_t bp_tensor_numel(const bp_tensor_t* t) {
  int64_t n = 0;
  if (!t) return 0;
  (void)bp__numel(t->rank, t->sizes, &n); /* cannot overflow: checked at creation */
  return n;
}

/* PyTorch's rule: dims of size 1 may have any stride; empty tensors are
 * contiguous. */
int bp_tensor_is_contiguous(const bp_tensor_t* t) {
  int64_t expected = 1;
  if (!t) return 0;
  if (bp_tensor_numel(t) == 0) return 1;
  for (uint32_t d = t->rank; d-- > 0;) {
    if (t->sizes[d] == 1) continue;
    if (t->strides[d] != expected) return 0;
    expected *= t->sizes[d];
  }
  return 1;
}

bp_status_t bp_tensor_get_desc(const bp_tensor_t* t, bp_tensor_desc_t* out_desc) {
  bp_tensor_desc_t desc;
  bp__clear_error();
  BP__REQUIRE_ARG("bp_tensor_get_desc", t);
  BP__REQUIRE_ARG("bp_tensor_get_desc", out_desc);
  memset(&desc, 0, sizeof(desc));
  desc.struct_size = sizeof(desc);
  desc.dtype = t->dtype;
  desc.rank = t->rank;
  desc.buffer = t->buffer->handle;
  desc.byte_offset = t->byte_offset;
  for (uint32_t d = 0; d < t->rank; ++d) {
    desc.sizes[d] = t->sizes[d];
    desc.strides[d] = t->strides[d];
  }
  return bp__out_struct_write("bp_tensor_get_desc", "bp_tensor_desc_t", out_desc, &desc,
                              sizeof(desc), BP_TENSOR_DESC_V1_SIZE);
}
