/* Copies between host memory and buffers, and between any two buffers.
 *
 * Bounds are checked here with overflow-safe arithmetic, so a plugin only
 * ever sees ranges inside its buffers. */
#include <stdlib.h>

#include "internal.h"

/* Largest host staging buffer of a cross-plugin copy, in bytes. */
#define BP__STAGING_CHUNK ((uint64_t)64 << 20)

static bp_status_t check_range(const char* fn, const char* which, const bp_buffer_t* buffer,
                               uint64_t offset, uint64_t size) {
  if (bp__range_outside(offset, size, buffer->size))
    return bp__error(BP_OUT_OF_RANGE,
                     "%s: %s range [%llu, %llu + %llu) exceeds the buffer size %llu", fn, which,
                     (unsigned long long)offset, (unsigned long long)offset,
                     (unsigned long long)size, (unsigned long long)buffer->size);
  return BP_OK;
}

bp_status_t bp_copy_host_to_buffer(bp_stream_t* stream, const void* src, bp_buffer_t* dst,
                                   uint64_t dst_offset, uint64_t size) {
  static const char fn[] = "bp_copy_host_to_buffer";
  bp_status_t status = BP_OK;
  bp__clear_error();
  BP__REQUIRE_ARG(fn, stream);
  if (size) BP__REQUIRE_ARG(fn, src); /* NULL is fine for an empty copy */
  BP__REQUIRE_ARG(fn, dst);
  if (stream->device != dst->device)
    return bp__error(BP_INVALID_ARGUMENT, "%s: stream of %s cannot write a buffer of %s", fn,
                     stream->device->name, dst->device->name);
  if ((status = check_range(fn, "destination", dst, dst_offset, size)) != BP_OK) return status;
  if (size == 0) return BP_OK;
  const bp_plugin_t* plugin = stream->device->plugin;
  if (!plugin->core.copy_host_to_device)
    return bp__error(BP_UNIMPLEMENTED, "%s: plugin %s lacks copy_host_to_device", fn, plugin->name);
  bp__buffer_note_use(dst, stream);
  status = BP__CORE_CALL(plugin, copy_host_to_device, stream->handle, src, dst->handle, dst_offset, size);
  if (status != BP_OK) return bp__plugin_error(plugin, status, "copy_host_to_device");
  return BP_OK;
}

bp_status_t bp_copy_buffer_to_host(bp_stream_t* stream, bp_buffer_t* src, uint64_t src_offset,
                                   void* dst, uint64_t size) {
  static const char fn[] = "bp_copy_buffer_to_host";
  bp_status_t status = BP_OK;
  bp__clear_error();
  BP__REQUIRE_ARG(fn, stream);
  BP__REQUIRE_ARG(fn, src);
  if (size) BP__REQUIRE_ARG(fn, dst); /* NULL is fine for an empty copy */
  if (stream->device != src->device)
    return bp__error(BP_INVALID_ARGUMENT, "%s: stream of %s cannot read a buffer of %s", fn,
                     stream->device->name, src->device->name);
  if ((status = check_range(fn, "source", src, src_offset, size)) != BP_OK) return status;
  if (size == 0) return BP_OK;
  const bp_plugin_t* plugin = stream->device->plugin;
  if (!plugin->core.copy_device_to_host)
    return bp__error(BP_UNIMPLEMENTED, "%s: plugin %s lacks copy_device_to_host", fn, plugin->name);
  bp__buffer_note_use(src, stream);
  status = BP__CORE_CALL(plugin, copy_device_to_host, stream->handle, src->handle, src_offset, dst, size);
  if (status != BP_OK) return bp__plugin_error(plugin, status, "copy_device_to_host");
  return BP_OK;
}

/* Staged copy through a host buffer: download a chunk on `src_stream`, wait,
 * upload it on `dst_stream`, wait. Blocking. */
static bp_status_t copy_staged(bp_stream_t* src_stream, bp_buffer_t* src, uint64_t src_offset,
                               bp_stream_t* dst_stream, bp_buffer_t* dst, uint64_t dst_offset,
                               uint64_t size) {
  bp_status_t status = BP_OK;
  uint64_t chunk = size < BP__STAGING_CHUNK ? size : BP__STAGING_CHUNK;
  void* staging = malloc((size_t)chunk);
  if (!staging)
    return bp__error(BP_RESOURCE_EXHAUSTED, "bp_copy_buffer: cannot allocate %llu staging bytes",
                     (unsigned long long)chunk);
  for (uint64_t done = 0; done < size; done += chunk) {
    uint64_t n = size - done < chunk ? size - done : chunk;
    if ((status = bp_copy_buffer_to_host(src_stream, src, src_offset + done, staging, n)) !=
            BP_OK ||
        (status = bp_stream_synchronize(src_stream)) != BP_OK ||
        (status = bp_copy_host_to_buffer(dst_stream, staging, dst, dst_offset + done, n)) !=
            BP_OK ||
        (status = bp_stream_synchronize(dst_stream)) != BP_OK)
      break;
  }
  /* After a failure a copy into or out of `staging` may still be queued:
   * free it only once both streams are idle. */
  int drained = status == BP_OK || (bp__stream_drain(src_stream) & bp__stream_drain(dst_stream));
  if (drained) free(staging);
  return status;
}

bp_status_t bp_copy_buffer(bp_stream_t* stream, bp_buffer_t* src, uint64_t src_offset,
                           bp_buffer_t* dst, uint64_t dst_offset, uint64_t size) {
  static const char fn[] = "bp_copy_buffer";
  bp_status_t status = BP_OK;
  bp_stream_t* other = NULL; /* temporary stream of the device `stream` is not on */

  bp__clear_error();
  BP__REQUIRE_ARG(fn, stream);
  BP__REQUIRE_ARG(fn, src);
  BP__REQUIRE_ARG(fn, dst);
  if (stream->device != src->device && stream->device != dst->device)
    return bp__error(BP_INVALID_ARGUMENT,
                     "%s: stream of %s belongs to neither the source (%s) nor the destination (%s)",
                     fn, stream->device->name, src->device->name, dst->device->name);
  if ((status = check_range(fn, "source", src, src_offset, size)) != BP_OK ||
      (status = check_range(fn, "destination", dst, dst_offset, size)) != BP_OK)
    return status;
  if (size == 0) return BP_OK;

  const bp_plugin_t* plugin = stream->device->plugin;
  if (src->device == dst->device && plugin->core.copy_device_to_device) {
    bp__buffer_note_use(src, stream);
    bp__buffer_note_use(dst, stream);
    status = BP__CORE_CALL(plugin, copy_device_to_device, stream->handle, src->handle, src_offset,
                                                dst->handle, dst_offset, size);
    if (status != BP_OK) return bp__plugin_error(plugin, status, "copy_device_to_device");
    return BP_OK;
  }
  if (src->device != dst->device && src->device->plugin == dst->device->plugin &&
      plugin->core.copy_peer) {
    bp__buffer_note_use(src, stream);
    bp__buffer_note_use(dst, stream);
    status = BP__CORE_CALL(plugin, copy_peer, stream->handle, src->handle, src_offset, dst->handle,
                                    dst_offset, size);
    if (status != BP_OK) return bp__plugin_error(plugin, status, "copy_peer");
    return BP_OK;
  }

  /* Staged through host memory, blocking. The side `stream` is not on uses a
   * stream of its own for the duration of the call. The copy is ordered
   * after everything enqueued on `stream` so far, event waits included (so
   * after the other device's work the application ordered with events):
   * with `stream` on the source, the download is enqueued behind that work;
   * with `stream` on the destination, `stream` drains before the download
   * starts. */
  if (src->device == dst->device) {
    status = copy_staged(stream, src, src_offset, stream, dst, dst_offset, size);
  } else if (stream->device == src->device) {
    if ((status = bp_stream_create(dst->device, NULL, &other)) == BP_OK)
      status = copy_staged(stream, src, src_offset, other, dst, dst_offset, size);
  } else {
    if ((status = bp_stream_synchronize(stream)) == BP_OK &&
        (status = bp_stream_create(src->device, NULL, &other)) == BP_OK)
      status = copy_staged(other, src, src_offset, stream, dst, dst_offset, size);
  }
  bp_stream_release(other);
  return status;
}
