/* Buffers: ref-counted wrappers of plugin buffers.
 *
 * A buffer holds a reference on its context, so the context (and with it
 * the plugin library and the device) outlives every buffer. The final
 * release waits for the streams that used the buffer through the core
 * before the plugin frees the memory. */
#include <stdlib.h>
#include <string.h>

#include "internal.h"

/* Bytes asked of the plugin for a zero-size buffer: the plugin ABI allocates
 * sizes > 0 only, and every tensor needs a real handle. The core records
 * size 0, so no copy, map or tensor element can reach these bytes. */
#define BP__ZERO_SIZE_BACKING 1u

/* Wraps a plugin buffer of `size_bytes` in memory space `space`; on
 * failure releases the handle. */
static bp_status_t buffer_wrap(bp_device_t* device, bpp_buffer_t handle, uint64_t size_bytes,
                               uint32_t space, const char* api, bp_buffer_t** out_buffer) {
  const bp_plugin_t* plugin = device->plugin;
  bp_buffer_t* buffer = calloc(1, sizeof(*buffer));
  if (buffer && pthread_mutex_init(&buffer->lock, NULL) != 0) {
    free(buffer);
    buffer = NULL;
  }
  if (!buffer) {
    BP__CORE_CALL_VOID(plugin, buffer_release, handle);
    return bp__error(BP_RESOURCE_EXHAUSTED, "%s: out of host memory", api);
  }
  atomic_init(&buffer->refcount, 1);
  buffer->device = device;
  buffer->handle = handle;
  buffer->size = size_bytes;
  buffer->memory_space = space;
  bp_context_retain(plugin->context);
  *out_buffer = buffer;
  return BP_OK;
}

bp_status_t bp_buffer_allocate(bp_device_t* device, uint32_t memory_space, uint64_t size_bytes,
                               bp_buffer_t** out_buffer) {
  bp__clear_error();
  BP__REQUIRE_ARG("bp_buffer_allocate", device);
  BP__REQUIRE_ARG("bp_buffer_allocate", out_buffer);
  if (memory_space >= device->num_spaces)
    return bp__error(BP_INVALID_ARGUMENT,
                     "bp_buffer_allocate: device %s has no memory space %u (it has %u)",
                     device->name, memory_space, device->num_spaces);
  const bp_plugin_t* plugin = device->plugin;
  if (!plugin->core.buffer_allocate || !plugin->core.buffer_release)
    return bp__error(BP_UNIMPLEMENTED,
                     "bp_buffer_allocate: plugin %s lacks buffer_allocate or buffer_release",
                     plugin->name);
  bpp_buffer_t handle = NULL;
  bp_buffer_alloc_info_t info = {.struct_size = sizeof(info),
                                 .memory_space = memory_space,
                                 .size_bytes = size_bytes ? size_bytes : BP__ZERO_SIZE_BACKING};
  bp_status_t status = BP__CORE_CALL(plugin, buffer_allocate, device->handle, &info, &handle);
  if (status != BP_OK) return bp__plugin_error(plugin, status, "buffer_allocate");
  return buffer_wrap(device, handle, size_bytes, memory_space, "bp_buffer_allocate", out_buffer);
}

bp_status_t bp__buffer_import_checked(bp_device_t* device, const bp_external_buffer_desc_t* desc,
                                      const char* api, bp_buffer_t** out_buffer) {
  const bp_plugin_t* plugin = device->plugin;
  if (desc->memory_space >= device->num_spaces)
    return bp__error(BP_INVALID_ARGUMENT, "%s: device %s has no memory space %u", api,
                     device->name, desc->memory_space);
  if (!plugin->core.buffer_import || !plugin->core.buffer_release)
    return bp__error(BP_UNIMPLEMENTED, "%s: backend '%s' cannot import memory", api,
                     plugin->name);
  bpp_buffer_t handle = NULL;
  bp_status_t status = BP__CORE_CALL(plugin, buffer_import, device->handle, desc, &handle);
  if (status != BP_OK) return bp__plugin_error(plugin, status, "buffer_import");
  return buffer_wrap(device, handle, desc->size_bytes, desc->memory_space, api, out_buffer);
}

bp_status_t bp_buffer_import(bp_device_t* device, const bp_external_buffer_desc_t* desc,
                             bp_buffer_t** out_buffer) {
  static const char fn[] = "bp_buffer_import";
  bp__clear_error();
  BP__REQUIRE_ARG(fn, device);
  BP__REQUIRE_ARG(fn, desc);
  BP__REQUIRE_ARG(fn, out_buffer);
  if (desc->struct_size < BP_EXTERNAL_BUFFER_DESC_V1_SIZE)
    return bp__error(BP_INVALID_ARGUMENT, "%s: desc->struct_size = %u (expected >= %u)", fn,
                     desc->struct_size, BP_EXTERNAL_BUFFER_DESC_V1_SIZE);
  if (desc->kind == BP_EXTERNAL_NONE || desc->kind > BP_EXTERNAL_DMA_BUF_FD)
    return bp__error(BP_INVALID_ARGUMENT, "%s: kind %u is not a buffer kind", fn, desc->kind);
  if (desc->kind == BP_EXTERNAL_DLPACK) return bp__buffer_import_dlpack(device, desc, out_buffer);
  if (desc->size_bytes == 0) return bp__error(BP_INVALID_ARGUMENT, "%s: size_bytes must be > 0", fn);
  if (desc->kind == BP_EXTERNAL_HOST_POINTER) {
    BP__REQUIRE_ARG(fn, desc->host_pointer);
    uint64_t end = 0;
    if (__builtin_add_overflow(desc->offset_bytes, desc->size_bytes, &end) ||
        __builtin_add_overflow((uint64_t)(uintptr_t)desc->host_pointer, end, &end) ||
        end > (uint64_t)UINTPTR_MAX)
      return bp__error(BP_INVALID_ARGUMENT,
                       "%s: host_pointer %p + offset_bytes %llu + size_bytes %llu overflows the "
                       "address space",
                       fn, desc->host_pointer, (unsigned long long)desc->offset_bytes,
                       (unsigned long long)desc->size_bytes);
  }
  return bp__buffer_import_checked(device, desc, fn, out_buffer);
}

bp_status_t bp_buffer_export(bp_buffer_t* buffer, bp_external_buffer_desc_t* out) {
  static const char fn[] = "bp_buffer_export";
  bp__clear_error();
  BP__REQUIRE_ARG(fn, buffer);
  BP__REQUIRE_ARG(fn, out);
  if (out->struct_size < BP_EXTERNAL_BUFFER_DESC_V1_SIZE)
    return bp__error(BP_INVALID_ARGUMENT, "%s: out->struct_size = %u (expected >= %u)", fn,
                     out->struct_size, BP_EXTERNAL_BUFFER_DESC_V1_SIZE);
  if (out->kind == BP_EXTERNAL_NONE || out->kind > BP_EXTERNAL_DMA_BUF_FD)
    return bp__error(BP_INVALID_ARGUMENT, "%s: kind %u is not a buffer kind", fn, out->kind);
  /* DLPack: the application's tensor holds a buffer reference (dlpack.c). */
  if (out->kind == BP_EXTERNAL_DLPACK) return bp__buffer_export_dlpack(buffer, out);
  const bp_plugin_t* plugin = buffer->device->plugin;
  if (!plugin->core.buffer_export)
    return bp__error(BP_UNIMPLEMENTED, "%s: backend '%s' cannot export memory", fn, plugin->name);
  bp_status_t status = BP__CORE_CALL(plugin, buffer_export, buffer->handle, out);
  if (status != BP_OK) return bp__plugin_error(plugin, status, "buffer_export");
  return BP_OK;
}

void bp_buffer_retain(bp_buffer_t* buffer) {
  if (buffer) atomic_fetch_add_explicit(&buffer->refcount, 1, memory_order_relaxed);
}

void bp_buffer_release(bp_buffer_t* buffer) {
  if (!buffer) return;
  if (atomic_fetch_sub_explicit(&buffer->refcount, 1, memory_order_acq_rel) != 1) return;
  /* Last reference: no other thread can reach the buffer, so `users` needs
   * no lock. Wait for all work that used it, then free. */
  bp_context_t* context = buffer->device->plugin->context;
  /* Release has no status to return: an error found here is kept on its
   * stream for the application's next synchronize or query. */
  for (uint32_t i = 0; i < buffer->num_users; ++i)
    (void)bp__stream_sync_for_core(buffer->users[i], "inside bp_buffer_release");
  BP__CORE_CALL_VOID(buffer->device->plugin, buffer_release, buffer->handle);
  for (uint32_t i = 0; i < buffer->num_users; ++i) bp_stream_release(buffer->users[i]);
  pthread_mutex_destroy(&buffer->lock);
  free(buffer);
  bp_context_release(context);
}

void bp__buffer_note_use(bp_buffer_t* buffer, bp_stream_t* stream) {
  bp_stream_t* evicted = NULL;
  if (!buffer || !stream) return;
  pthread_mutex_lock(&buffer->lock);
  for (uint32_t i = 0; i < buffer->num_users; ++i) {
    if (buffer->users[i] == stream) {
      pthread_mutex_unlock(&buffer->lock);
      return;
    }
  }
  const uint32_t capacity = (uint32_t)(sizeof(buffer->users) / sizeof(buffer->users[0]));
  if (buffer->num_users == capacity) {
    /* Full: forget the oldest user after waiting for it (below, unlocked). */
    evicted = buffer->users[0];
    memmove(&buffer->users[0], &buffer->users[1], (capacity - 1) * sizeof(buffer->users[0]));
    buffer->num_users--;
  }
  bp_stream_retain(stream);
  buffer->users[buffer->num_users++] = stream;
  pthread_mutex_unlock(&buffer->lock);
  if (evicted) {
    (void)bp__stream_sync_for_core(evicted, "that retired the oldest of a buffer's streams");
    bp_stream_release(evicted);
  }
}

uint64_t bp_buffer_size(const bp_buffer_t* buffer) { return buffer ? buffer->size : 0; }

bp_device_t* bp_buffer_device(const bp_buffer_t* buffer) { return buffer ? buffer->device : NULL; }

bp_status_t bp_buffer_map(bp_buffer_t* buffer, uint64_t offset, uint64_t size, void** out_ptr) {
  bp__clear_error();
  BP__REQUIRE_ARG("bp_buffer_map", buffer);
  BP__REQUIRE_ARG("bp_buffer_map", out_ptr);
  if (bp__range_outside(offset, size, buffer->size))
    return bp__error(
        BP_OUT_OF_RANGE, "bp_buffer_map: range [%llu, +%llu) exceeds the buffer size %llu",
        (unsigned long long)offset, (unsigned long long)size, (unsigned long long)buffer->size);
  const bp_plugin_t* plugin = buffer->device->plugin;
  if (!plugin->core.buffer_map)
    return bp__error(BP_UNIMPLEMENTED, "bp_buffer_map: plugin %s implements no buffer_map",
                     plugin->name);
  void* ptr = NULL;
  bp_status_t status = BP__CORE_CALL(plugin, buffer_map, buffer->handle, offset, size, &ptr);
  if (status != BP_OK) return bp__plugin_error(plugin, status, "buffer_map");
  *out_ptr = ptr;
  return BP_OK;
}

bp_status_t bp_buffer_unmap(bp_buffer_t* buffer) {
  bp__clear_error();
  BP__REQUIRE_ARG("bp_buffer_unmap", buffer);
  const bp_plugin_t* plugin = buffer->device->plugin;
  if (!plugin->core.buffer_unmap)
    return bp__error(BP_UNIMPLEMENTED, "bp_buffer_unmap: plugin %s implements no buffer_unmap",
                     plugin->name);
  bp_status_t status = BP__CORE_CALL(plugin, buffer_unmap, buffer->handle);
  if (status != BP_OK) return bp__plugin_error(plugin, status, "buffer_unmap");
  return BP_OK;
}
