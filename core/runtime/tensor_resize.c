/* bp_tensor_resize (aten.resize_): a new dense shape for a tensor, in
 * place, growing its buffer the way PyTorch grows a storage.
 *
 * The one call that changes a tensor object: the tensor is externally
 * synchronized during it. */
#include <string.h>

#include "internal.h"
#include "runtime/tensor_internal.h"

/* Replaces t's buffer by a fresh one of `bytes` on the same device and
 * memory kind, holding the old bytes (copied on `stream`). */
static bp_status_t grow_buffer(const char* fn, bp_stream_t* stream, bp_tensor_t* t,
                               uint64_t bytes) {
  bp_buffer_t* old = t->buffer;
  if (!stream)
    return bp__error(BP_INVALID_ARGUMENT,
                     "%s: the buffer must grow from %llu to %llu bytes, which needs a stream",
                     fn, (unsigned long long)old->size, (unsigned long long)bytes);
  if (!t->core_allocated)
    return bp__error(BP_FAILED_PRECONDITION,
                     "%s: the buffer must grow from %llu to %llu bytes, but the tensor does not "
                     "own it (a view, or made by bp_tensor_from_buffer)",
                     fn, (unsigned long long)old->size, (unsigned long long)bytes);
  int refs = atomic_load_explicit(&old->refcount, memory_order_acquire);
  if (refs != 1)
    return bp__error(BP_FAILED_PRECONDITION,
                     "%s: the buffer must grow from %llu to %llu bytes, but %d other references "
                     "share it (views or bp_buffer_retain)",
                     fn, (unsigned long long)old->size, (unsigned long long)bytes, refs - 1);
  bp_buffer_t* grown = NULL;
  bp_status_t status = bp_buffer_allocate(old->device, old->memory_space, bytes, &grown);
  if (status != BP_OK) return status;
  status = bp_copy_buffer(stream, old, 0, grown, 0, old->size);
  if (status != BP_OK) {
    bp_buffer_release(grown);
    return status;
  }
  t->buffer = grown;
  bp_buffer_release(old); /* freed once the copy (and earlier work) is done */
  return BP_OK;
}

bp_status_t bp_tensor_resize(bp_stream_t* stream, bp_tensor_t* t, uint32_t rank,
                             const int64_t* sizes) {
  static const char fn[] = "bp_tensor_resize";
  int64_t strides[BP_MAX_RANK] = {0};
  int64_t numel = 0;
  uint64_t needed = 0;
  bp__clear_error();
  BP__REQUIRE_ARG(fn, t);
  bp_status_t status = bp__tensor_check_shape(fn, t->dtype, rank, sizes, NULL);
  if (status != BP_OK) return status;
  if (bp__dense_strides(rank, sizes, strides))
    return bp__error(BP_INVALID_ARGUMENT, "%s: the dense strides overflow 64 bits", fn);
  (void)bp__numel(rank, sizes, &numel); /* checked above */
  if (numel > 0 &&
      bp__add_overflow_u64(t->byte_offset, (uint64_t)numel * bp_dtype_size(t->dtype), &needed))
    return bp__error(BP_INVALID_ARGUMENT, "%s: the needed buffer size overflows 64 bits", fn);
  if (needed > t->buffer->size && (status = grow_buffer(fn, stream, t, needed)) != BP_OK)
    return status;
  t->rank = rank;
  memset(t->sizes, 0, sizeof(t->sizes));
  memset(t->strides, 0, sizeof(t->strides));
  for (uint32_t d = 0; d < rank; ++d) {
    t->sizes[d] = sizes[d];
    t->strides[d] = strides[d];
  }
  return BP_OK;
}
