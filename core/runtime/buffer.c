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

static const char* memory_kind_name(uint32_t kind) {
  static const char* const names[BP_MEMORY_KIND_COUNT_] = {"device", "host_pinned", "host_pageable",
                                                           "managed"};
  return kind < BP_MEMORY_KIND_COUNT_ ? names[kind] : "unknown";
}

static const bp_memory_space_info_t* find_space(const bp_device_t* device, uint32_t kind) {
  for (uint32_t i = 0; i < device->num_spaces; ++i) {
    if (device->spaces[i].kind == kind) return &device->spaces[i];
  }
  return NULL;
}

bp_status_t bp_buffer_allocate(bp_device_t* device, uint32_t memory_kind, uint64_t size_bytes,
                               bp_buffer_t** out_buffer) {
  bp_status_t status = BP_OK;
  bp_buffer_t* buffer = NULL;
  bpp_buffer_t handle = NULL;
  int mutex_ready = 0;

  bp__clear_error();
  BP__REQUIRE_ARG("bp_buffer_allocate", device);
  BP__REQUIRE_ARG("bp_buffer_allocate", out_buffer);
  if (memory_kind >= BP_MEMORY_KIND_COUNT_)
    return bp__error(BP_INVALID_ARGUMENT, "bp_buffer_allocate: unknown memory kind %u",
                     memory_kind);
  if (!find_space(device, memory_kind))
    return bp__error(BP_INVALID_ARGUMENT, "bp_buffer_allocate: device %s has no %s memory",
                     device->name, memory_kind_name(memory_kind));
  const bp_plugin_t* plugin = device->plugin;
  if (!plugin->core.buffer_allocate || !plugin->core.buffer_release)
    return bp__error(BP_UNIMPLEMENTED,
                     "bp_buffer_allocate: plugin %s lacks buffer_allocate or buffer_release",
                     plugin->name);

  buffer = calloc(1, sizeof(*buffer));
  if (!buffer) {
    status = bp__error(BP_RESOURCE_EXHAUSTED, "bp_buffer_allocate: out of host memory");
    goto cleanup;
  }
  if (pthread_mutex_init(&buffer->lock, NULL) != 0) {
    status = bp__error(BP_INTERNAL, "bp_buffer_allocate: pthread_mutex_init failed");
    goto cleanup;
  }
  mutex_ready = 1;
  bp_buffer_alloc_info_t info = {
      .struct_size = sizeof(info), .memory_kind = memory_kind,
      .size_bytes = size_bytes ? size_bytes : BP__ZERO_SIZE_BACKING};
  status = plugin->core.buffer_allocate(device->handle, &info, &handle);
  if (status != BP_OK) {
    status = bp__plugin_error(plugin, status, "buffer_allocate");
    goto cleanup;
  }
  atomic_init(&buffer->refcount, 1);
  buffer->device = device;
  buffer->handle = handle;
  buffer->size = size_bytes;
  buffer->memory_kind = memory_kind;
  bp_context_retain(plugin->context);
  *out_buffer = buffer;
  buffer = NULL;

cleanup:
  if (buffer) {
    if (mutex_ready) pthread_mutex_destroy(&buffer->lock);
    free(buffer);
  }
  return status;
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
  for (uint32_t i = 0; i < buffer->num_users; ++i) {
    bp_stream_t* stream = buffer->users[i];
    if (stream->device->plugin->core.stream_synchronize) {
      bp_status_t status = stream->device->plugin->core.stream_synchronize(stream->handle);
      if (status != BP_OK)
        bp__log(BP_LOG_WARN, "buffer release: stream of %s reported %d while draining",
                stream->device->name, (int)status);
    }
  }
  buffer->device->plugin->core.buffer_release(buffer->handle);
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
    if (evicted->device->plugin->core.stream_synchronize)
      (void)evicted->device->plugin->core.stream_synchronize(evicted->handle);
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
  bp_status_t status = plugin->core.buffer_map(buffer->handle, offset, size, &ptr);
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
  bp_status_t status = plugin->core.buffer_unmap(buffer->handle);
  if (status != BP_OK) return bp__plugin_error(plugin, status, "buffer_unmap");
  return BP_OK;
}
