/* Blocking tensor read/write between dense host memory and a tensor of any
 * layout. Only the plugin copy slots are used, so this works for device
 * memory that the host cannot map. Strided tensors go through a host copy
 * of the byte span they touch: gathered from it on read, scattered into it
 * (read-modify-write, so bytes between elements are preserved) on write. */
#include <stdlib.h>
#include <string.h>

#include "internal.h"

/* Copies between the dense host array and the span copy, run by run. A run
 * is the innermost dim when its stride is 1, else one element. `base` is
 * the byte position of element [0,...,0] within `span`. */
static void walk(const bp_tensor_t* t, int64_t numel, char* span, uint64_t base, char* dense,
                 int to_span) {
  const size_t esize = bp_dtype_size(t->dtype);
  uint32_t n_outer = t->rank;
  int64_t run_elems = 1;
  int64_t idx[BP_MAX_RANK] = {0};
  if (t->rank > 0 && t->strides[t->rank - 1] == 1) {
    n_outer = t->rank - 1;
    run_elems = t->sizes[t->rank - 1];
  }
  const size_t run_bytes = (size_t)run_elems * esize;
  const int64_t runs = numel / run_elems;
  for (int64_t r = 0; r < runs; ++r) {
    int64_t off = 0;
    for (uint32_t d = 0; d < n_outer; ++d) off += idx[d] * t->strides[d];
    char* p = span + base + (uint64_t)off * esize;
    if (to_span)
      memcpy(p, dense, run_bytes);
    else
      memcpy(dense, p, run_bytes);
    dense += run_bytes;
    for (uint32_t d = n_outer; d-- > 0;) {
      if (++idx[d] < t->sizes[d]) break;
      idx[d] = 0;
    }
  }
}

/* Shared checks after the NULL checks; *out_numel is the element count. */
static bp_status_t check_io(const char* fn, bp_stream_t* stream, const bp_tensor_t* t,
                            uint64_t size, int64_t* out_numel) {
  if (stream->device != t->buffer->device)
    return bp__error(BP_INVALID_ARGUMENT, "%s: stream of %s cannot access a tensor on %s", fn,
                     stream->device->name, t->buffer->device->name);
  const int64_t numel = bp_tensor_numel(t);
  uint64_t expected = 0;
  /* Views keep numel * element size within int64 (tensor_view.c); checked
   * again here so a wrapped byte count can never pass the size test. */
  if (bp__nbytes(t->dtype, numel, &expected))
    return bp__error(BP_OUT_OF_RANGE, "%s: the tensor's byte size (%lld elements of %s) overflows",
                     fn, (long long)numel, bp_dtype_name(t->dtype) ? bp_dtype_name(t->dtype) : "?");
  if (size != expected)
    return bp__error(BP_INVALID_ARGUMENT,
                     "%s: size is %llu bytes but the tensor holds %llu (%lld elements of %s)", fn,
                     (unsigned long long)size, (unsigned long long)expected, (long long)numel,
                     bp_dtype_name(t->dtype) ? bp_dtype_name(t->dtype) : "?");
  *out_numel = numel;
  return BP_OK;
}

/* Downloads the tensor's span into a fresh host array (*out_span, owned by
 * the caller) and synchronizes. */
static bp_status_t download_span(const char* fn, bp_stream_t* stream, const bp_tensor_t* t,
                                 char** out_span, uint64_t* out_lo, uint64_t* out_hi) {
  uint64_t lo = 0, hi = 0;
  bp_status_t status = BP_OK;
  if (bp__tensor_span(t->dtype, t->rank, t->sizes, t->strides, t->byte_offset, &lo, &hi) ||
      hi > t->buffer->size)
    return bp__error(BP_OUT_OF_RANGE, "%s: the tensor's elements lie outside its buffer", fn);
  char* span = malloc((size_t)(hi - lo));
  if (!span)
    return bp__error(BP_RESOURCE_EXHAUSTED, "%s: cannot allocate %llu bytes of host staging", fn,
                     (unsigned long long)(hi - lo));
  if ((status = bp_copy_buffer_to_host(stream, t->buffer, lo, span, hi - lo)) != BP_OK ||
      (status = bp_stream_synchronize(stream)) != BP_OK) {
    if (bp__stream_drain(stream)) free(span); /* else the download may still write it */
    return status;
  }
  *out_span = span;
  *out_lo = lo;
  *out_hi = hi;
  return BP_OK;
}

/* bp_tensor_write (to_tensor: host -> tensor) and bp_tensor_read. `host`
 * is only read when to_tensor is set. */
static bp_status_t tensor_io(const char* fn, bp_stream_t* stream, const bp_tensor_t* t, char* host,
                             uint64_t size, int to_tensor) {
  bp_status_t status = BP_OK;
  int64_t numel = 0;
  char* span = NULL;
  uint64_t lo = 0, hi = 0;

  if ((status = check_io(fn, stream, t, size, &numel)) != BP_OK) return status;
  if (numel == 0) return bp_stream_synchronize(stream);
  if (bp_tensor_is_contiguous(t)) {
    status = to_tensor ? bp_copy_host_to_buffer(stream, host, t->buffer, t->byte_offset, size)
                       : bp_copy_buffer_to_host(stream, t->buffer, t->byte_offset, host, size);
    if (status == BP_OK) status = bp_stream_synchronize(stream);
    /* The caller may free `host` once this returns, even after an error. */
    if (status != BP_OK) bp__stream_drain(stream);
    return status;
  }
  /* As PyTorch: a write where several elements share one memory location
   * (an expanded dim) has no defined result. */
  for (uint32_t d = 0; to_tensor && d < t->rank; ++d) {
    if (t->sizes[d] > 1 && t->strides[d] == 0)
      return bp__error(BP_INVALID_ARGUMENT,
                       "%s: dim %u has stride 0 (an expanded view): several elements share one "
                       "memory location",
                       fn, d);
  }
  if ((status = download_span(fn, stream, t, &span, &lo, &hi)) != BP_OK) goto cleanup;
  walk(t, numel, span, t->byte_offset - lo, host, to_tensor);
  if (to_tensor) {
    if ((status = bp_copy_host_to_buffer(stream, span, t->buffer, lo, hi - lo)) != BP_OK)
      goto cleanup;
    status = bp_stream_synchronize(stream);
  }

cleanup:
  if (status == BP_OK || bp__stream_drain(stream)) free(span); /* else it may still be in use */
  return status;
}

/* The NULL checks live in the entry points, where each argument has its
 * public name. A NULL host pointer is fine for an empty tensor. */
bp_status_t bp_tensor_write(bp_stream_t* stream, bp_tensor_t* t, const void* src, uint64_t size) {
  static const char fn[] = "bp_tensor_write";
  bp__clear_error();
  BP__REQUIRE_ARG(fn, stream);
  BP__REQUIRE_ARG(fn, t);
  if (size) BP__REQUIRE_ARG(fn, src);
  return tensor_io(fn, stream, t, (char*)(uintptr_t)src, size, 1);
}

bp_status_t bp_tensor_read(bp_stream_t* stream, const bp_tensor_t* t, void* dst, uint64_t size) {
  static const char fn[] = "bp_tensor_read";
  bp__clear_error();
  BP__REQUIRE_ARG(fn, stream);
  BP__REQUIRE_ARG(fn, t);
  if (size) BP__REQUIRE_ARG(fn, dst);
  return tensor_io(fn, stream, t, dst, size, 0);
}
