/* Streams: in-order queues of one device.
 *
 * A stream holds a reference on its context, so the context outlives it.
 * Streams are externally synchronized: one thread enqueues at a time. */
#include <stdio.h>
#include <stdlib.h>

#include "internal.h"

static bp_status_t stream_create(bp_device_t* device, const bp_stream_create_info_t* info,
                                 bp_stream_t** out_stream) {
  bp_status_t status = BP_OK;
  bp_stream_t* stream = NULL;
  bpp_stream_t handle = NULL;
  const bp_plugin_t* plugin = device->plugin;

  if (!plugin->core.stream_create || !plugin->core.stream_destroy)
    return bp__error(BP_UNIMPLEMENTED,
                     "bp_stream_create: plugin %s lacks stream_create or stream_destroy",
                     plugin->name);
  stream = calloc(1, sizeof(*stream));
  if (!stream) {
    status = bp__error(BP_RESOURCE_EXHAUSTED, "bp_stream_create: out of host memory");
    goto cleanup;
  }
  status = BP__CORE_CALL(plugin, stream_create, device->handle, info, &handle);
  if (status != BP_OK) {
    status = bp__plugin_error(plugin, status, "stream_create");
    goto cleanup;
  }
  atomic_init(&stream->refcount, 1);
  pthread_mutex_init(&stream->kept_lock, NULL);
  stream->device = device;
  stream->handle = handle;
  stream->queue = info->queue;
  bp_context_retain(plugin->context);
  *out_stream = stream;
  stream = NULL;

cleanup:
  free(stream);
  return status;
}

bp_status_t bp_stream_create(bp_device_t* device, const bp_stream_create_info_t* info,
                             bp_stream_t** out_stream) {
  bp__clear_error();
  BP__REQUIRE_ARG("bp_stream_create", device);
  BP__REQUIRE_ARG("bp_stream_create", out_stream);
  /* The plugin always gets a full struct of this header's size. */
  bp_stream_create_info_t full = {.struct_size = sizeof(full), .queue = BP_QUEUE_COMPUTE};
  if (info != NULL) {
    if (info->struct_size < BP_STREAM_CREATE_INFO_V1_SIZE)
      return bp__error(BP_INVALID_ARGUMENT,
                       "bp_stream_create: info->struct_size = %u (expected >= %u)",
                       info->struct_size, BP_STREAM_CREATE_INFO_V1_SIZE);
    full.queue = info->queue;
    full.priority = info->priority;
    full.flags = info->flags;
    full.next = info->next;
  }
  if (full.queue > BP_QUEUE_COPY)
    return bp__error(BP_INVALID_ARGUMENT, "bp_stream_create: unknown queue kind %u", full.queue);
  if (full.flags != 0)
    return bp__error(BP_INVALID_ARGUMENT, "bp_stream_create: unknown flags 0x%x", full.flags);
  return stream_create(device, &full, out_stream);
}

void bp_stream_retain(bp_stream_t* stream) {
  if (stream) atomic_fetch_add_explicit(&stream->refcount, 1, memory_order_relaxed);
}

void bp_stream_release(bp_stream_t* stream) {
  if (!stream) return;
  if (atomic_fetch_sub_explicit(&stream->refcount, 1, memory_order_acq_rel) != 1) return;
  bp_context_t* context = stream->device->plugin->context;
  /* The plugin's stream_destroy waits for pending work before freeing. */
  BP__CORE_CALL_VOID(stream->device->plugin, stream_destroy, stream->handle);
  if (stream->kept_status != BP_OK)
    bp__log(BP_LOG_WARN, "a stream of %s was released with an error no synchronize returned: %s",
            stream->device->name, stream->kept_message);
  pthread_mutex_destroy(&stream->kept_lock);
  free(stream);
  if (context) bp_context_release(context);
}

/* Stores the thread's current message as the stream's kept error unless
 * one is kept already (the first error wins; later ones went to the log). */
static void keep_error(bp_stream_t* stream, bp_status_t status, const char* why) {
  pthread_mutex_lock(&stream->kept_lock);
  if (stream->kept_status == BP_OK) {
    stream->kept_status = status;
    snprintf(stream->kept_message, sizeof stream->kept_message, "%s (found by a synchronize %s)",
             bp_status_message(), why);
  } else {
    bp__log(BP_LOG_WARN, "a stream of %s: %s (found by a synchronize %s; an earlier error is pending)",
            stream->device->name, bp_status_message(), why);
  }
  pthread_mutex_unlock(&stream->kept_lock);
}

bp_status_t bp__stream_sync_for_core(bp_stream_t* stream, const char* why) {
  const bp_plugin_t* plugin = stream->device->plugin;
  if (!plugin->core.stream_synchronize) return BP_OK;
  char saved[1024];
  snprintf(saved, sizeof(saved), "%s", bp_status_message());
  bp_status_t status = BP__CORE_CALL(plugin, stream_synchronize, stream->handle);
  if (status != BP_OK) {
    bp__plugin_error(plugin, status, "stream_synchronize");
    keep_error(stream, status, why);
  }
  bp__error(BP_OK, "%s", saved);
  return status;
}

void bp__stream_keep_error(bp_stream_t* stream, bp_status_t status, const char* message) {
  pthread_mutex_lock(&stream->kept_lock);
  if (stream->kept_status == BP_OK) {
    stream->kept_status = status;
    snprintf(stream->kept_message, sizeof stream->kept_message, "%s", message);
  }
  pthread_mutex_unlock(&stream->kept_lock);
}

bp_status_t bp__stream_take_kept(bp_stream_t* stream, bp_status_t status) {
  pthread_mutex_lock(&stream->kept_lock);
  bp_status_t kept = stream->kept_status;
  if (kept == BP_OK) {
    pthread_mutex_unlock(&stream->kept_lock);
    return status;
  }
  char message[sizeof stream->kept_message];
  snprintf(message, sizeof message, "%s", stream->kept_message);
  stream->kept_status = status;
  if (status != BP_OK)
    snprintf(stream->kept_message, sizeof stream->kept_message, "%s", bp_status_message());
  pthread_mutex_unlock(&stream->kept_lock);
  return bp__error(kept, "%s", message);
}

int bp__stream_drain(bp_stream_t* stream) {
  if (!stream->device->plugin->core.stream_synchronize) return 0;
  int drained = 0;
  /* A synchronize reports a sticky error once; the next one waits for the
   * rest of the work. Errors found here are kept for the application. */
  for (int attempt = 0; attempt < 4 && !drained; ++attempt)
    drained = bp__stream_sync_for_core(stream, "that drained the stream after a failed transfer") == BP_OK;
  if (!drained)
    bp__log(BP_LOG_WARN, "a stream of %s cannot be drained after an error: host memory it used is kept",
            stream->device->name);
  return drained;
}

bp_device_t* bp_stream_device(const bp_stream_t* stream) { return stream ? stream->device : NULL; }

bp_status_t bp_stream_synchronize(bp_stream_t* stream) {
  bp__clear_error();
  BP__REQUIRE_ARG("bp_stream_synchronize", stream);
  const bp_plugin_t* plugin = stream->device->plugin;
  if (!plugin->core.stream_synchronize)
    return bp__error(BP_UNIMPLEMENTED, "bp_stream_synchronize: plugin %s lacks stream_synchronize",
                     plugin->name);
  bp_status_t status = BP__CORE_CALL(plugin, stream_synchronize, stream->handle);
  if (status != BP_OK) status = bp__plugin_error(plugin, status, "stream_synchronize");
  return bp__stream_take_kept(stream, status);
}

bp_status_t bp_stream_query(bp_stream_t* stream) {
  bp__clear_error();
  BP__REQUIRE_ARG("bp_stream_query", stream);
  const bp_plugin_t* plugin = stream->device->plugin;
  if (!plugin->core.stream_query)
    return bp__error(BP_UNIMPLEMENTED, "bp_stream_query: plugin %s lacks stream_query",
                     plugin->name);
  bp_status_t status = BP__CORE_CALL(plugin, stream_query, stream->handle);
  if (status == BP_NOT_READY) {
    /* A kept error is as final as a sticky one: returned without waiting. */
    bp_status_t kept = bp__stream_take_kept(stream, BP_OK);
    return kept != BP_OK ? kept : BP_NOT_READY;
  }
  if (status != BP_OK) status = bp__plugin_error(plugin, status, "stream_query");
  return bp__stream_take_kept(stream, status);
}
