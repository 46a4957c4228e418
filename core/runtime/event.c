/* Events: recorded on a stream, queried, waited on by streams of any
 * device. An event holds a reference on its context. */
#include <stdlib.h>

#include "internal.h"

/* Wraps a plugin event; on failure destroys the handle. */
static bp_status_t event_wrap(bp_device_t* device, bpp_event_t handle, uint32_t flags,
                              int recorded, const char* api, bp_event_t** out_event) {
  const bp_plugin_t* plugin = device->plugin;
  bp_event_t* event = calloc(1, sizeof(*event));
  if (!event) {
    BP__CORE_CALL_VOID(plugin, event_destroy, handle);
    return bp__error(BP_RESOURCE_EXHAUSTED, "%s: out of host memory", api);
  }
  atomic_init(&event->refcount, 1);
  atomic_init(&event->recorded, recorded);
  event->device = device;
  event->handle = handle;
  event->flags = flags;
  bp_context_retain(plugin->context);
  *out_event = event;
  return BP_OK;
}

bp_status_t bp_event_create(bp_device_t* device, const bp_event_create_info_t* info,
                            bp_event_t** out_event) {
  bp_status_t status = BP_OK;
  bpp_event_t handle = NULL;

  bp__clear_error();
  BP__REQUIRE_ARG("bp_event_create", device);
  BP__REQUIRE_ARG("bp_event_create", out_event);
  bp_event_create_info_t full = {.struct_size = sizeof(full)};
  if (info != NULL) {
    if (info->struct_size < BP_EVENT_CREATE_INFO_V1_SIZE)
      return bp__error(BP_INVALID_ARGUMENT,
                       "bp_event_create: info->struct_size = %u (expected >= %u)",
                       info->struct_size, BP_EVENT_CREATE_INFO_V1_SIZE);
    full.flags = info->flags;
    full.next = info->next;
  }
  const uint32_t flags = full.flags;
  if (flags & ~(uint32_t)(BP_EVENT_TIMING | BP_EVENT_EXPORTABLE))
    return bp__error(BP_INVALID_ARGUMENT, "bp_event_create: unknown flags 0x%x", flags);
  const bp_plugin_t* plugin = device->plugin;
  if (!plugin->core.event_create || !plugin->core.event_destroy)
    return bp__error(BP_UNIMPLEMENTED,
                     "bp_event_create: plugin %s lacks event_create or event_destroy",
                     plugin->name);
  status = BP__CORE_CALL(plugin, event_create, device->handle, &full, &handle);
  if (status != BP_OK) return bp__plugin_error(plugin, status, "event_create");
  return event_wrap(device, handle, flags, 0, "bp_event_create", out_event);
}

bp_status_t bp_event_import(bp_device_t* device, const bp_external_event_desc_t* desc,
                            bp_event_t** out_event) {
  bp__clear_error();
  BP__REQUIRE_ARG("bp_event_import", device);
  BP__REQUIRE_ARG("bp_event_import", desc);
  BP__REQUIRE_ARG("bp_event_import", out_event);
  if (desc->struct_size < BP_EXTERNAL_EVENT_DESC_V1_SIZE)
    return bp__error(BP_INVALID_ARGUMENT, "bp_event_import: desc->struct_size = %u (expected >= %u)",
                     desc->struct_size, BP_EXTERNAL_EVENT_DESC_V1_SIZE);
  if (desc->kind != BP_EXTERNAL_OPAQUE_FD && desc->kind != BP_EXTERNAL_SYNC_FD)
    return bp__error(BP_INVALID_ARGUMENT, "bp_event_import: kind %u is not an event kind",
                     desc->kind);
  const bp_plugin_t* plugin = device->plugin;
  if (!plugin->core.event_import || !plugin->core.event_destroy)
    return bp__error(BP_UNIMPLEMENTED, "bp_event_import: backend '%s' cannot import events",
                     plugin->name);
  bpp_event_t handle = NULL;
  bp_status_t status = BP__CORE_CALL(plugin, event_import, device->handle, desc, &handle);
  if (status != BP_OK) return bp__plugin_error(plugin, status, "event_import");
  /* An imported event stands for work elsewhere: waits on it must go to
   * the plugin, so it counts as recorded. */
  return event_wrap(device, handle, 0, 1, "bp_event_import", out_event);
}

bp_status_t bp_event_export(bp_event_t* event, bp_external_event_desc_t* out) {
  bp__clear_error();
  BP__REQUIRE_ARG("bp_event_export", event);
  BP__REQUIRE_ARG("bp_event_export", out);
  if (out->struct_size < BP_EXTERNAL_EVENT_DESC_V1_SIZE)
    return bp__error(BP_INVALID_ARGUMENT, "bp_event_export: out->struct_size = %u (expected >= %u)",
                     out->struct_size, BP_EXTERNAL_EVENT_DESC_V1_SIZE);
  if (!(event->flags & BP_EVENT_EXPORTABLE))
    return bp__error(BP_INVALID_ARGUMENT,
                     "bp_event_export: the event was not created with BP_EVENT_EXPORTABLE");
  const bp_plugin_t* plugin = event->device->plugin;
  if (!plugin->core.event_export)
    return bp__error(BP_UNIMPLEMENTED, "bp_event_export: backend '%s' cannot export events",
                     plugin->name);
  bp_status_t status = BP__CORE_CALL(plugin, event_export, event->handle, out);
  if (status != BP_OK) return bp__plugin_error(plugin, status, "event_export");
  return BP_OK;
}

void bp_event_retain(bp_event_t* event) {
  if (event) atomic_fetch_add_explicit(&event->refcount, 1, memory_order_relaxed);
}

void bp_event_release(bp_event_t* event) {
  if (!event) return;
  if (atomic_fetch_sub_explicit(&event->refcount, 1, memory_order_acq_rel) != 1) return;
  bp_context_t* context = event->device->plugin->context;
  BP__CORE_CALL_VOID(event->device->plugin, event_destroy, event->handle);
  free(event);
  bp_context_release(context);
}

bp_status_t bp_event_record(bp_event_t* event, bp_stream_t* stream) {
  bp__clear_error();
  BP__REQUIRE_ARG("bp_event_record", event);
  BP__REQUIRE_ARG("bp_event_record", stream);
  if (event->device != stream->device)
    return bp__error(BP_INVALID_ARGUMENT,
                     "bp_event_record: event of %s cannot be recorded on a stream of %s",
                     event->device->name, stream->device->name);
  const bp_plugin_t* plugin = event->device->plugin;
  if (!plugin->core.event_record)
    return bp__error(BP_UNIMPLEMENTED, "bp_event_record: plugin %s lacks event_record",
                     plugin->name);
  bp_status_t status = BP__CORE_CALL(plugin, event_record, event->handle, stream->handle);
  if (status != BP_OK) return bp__plugin_error(plugin, status, "event_record");
  atomic_store(&event->recorded, 1);
  return BP_OK;
}

/* Cross-plugin wait: runs on the waiting stream's host thread and blocks it
 * until the other plugin's event completes. Owns one event reference. A
 * failed wait poisons the waiting stream: its status becomes that stream's
 * sticky error, so work ordered after the event does not pass silently. */
static bp_status_t wait_event_host_func(void* user_data) {
  bp_event_t* event = user_data;
  const bp_plugin_t* plugin = event->device->plugin;
  bp_status_t status = BP__CORE_CALL(plugin, event_synchronize, event->handle);
  if (status != BP_OK)
    bp__log(BP_LOG_WARN, "cross-plugin wait: event of %s completed with status %d",
            event->device->name, (int)status);
  bp_event_release(event);
  return status;
}

bp_status_t bp_stream_wait_event(bp_stream_t* stream, bp_event_t* event) {
  bp_status_t status = BP_OK;
  bp__clear_error();
  BP__REQUIRE_ARG("bp_stream_wait_event", stream);
  BP__REQUIRE_ARG("bp_stream_wait_event", event);
  /* An event never recorded is complete (as cuStreamWaitEvent). */
  if (!atomic_load(&event->recorded)) return BP_OK;
  const bp_plugin_t* waiter = stream->device->plugin;
  const bp_plugin_t* signaler = event->device->plugin;
  if (waiter == signaler && waiter->core.stream_wait_event) {
    status = BP__CORE_CALL(waiter, stream_wait_event, stream->handle, event->handle);
    if (status != BP_OK) return bp__plugin_error(waiter, status, "stream_wait_event");
    return BP_OK;
  }
  if (!signaler->core.event_synchronize)
    return bp__error(BP_UNIMPLEMENTED, "bp_stream_wait_event: plugin %s lacks event_synchronize",
                     signaler->name);
  if (!waiter->core.stream_enqueue_host_func) {
    /* No way to block the stream itself: wait on the calling thread, which
     * orders all later enqueues after the event. */
    status = BP__CORE_CALL(signaler, event_synchronize, event->handle);
    if (status != BP_OK) return bp__plugin_error(signaler, status, "event_synchronize");
    return BP_OK;
  }
  bp_event_retain(event);
  status = BP__CORE_CALL(waiter, stream_enqueue_host_func, stream->handle, wait_event_host_func, event);
  if (status != BP_OK) {
    bp_event_release(event);
    return bp__plugin_error(waiter, status, "stream_enqueue_host_func");
  }
  return BP_OK;
}

bp_status_t bp_event_query(bp_event_t* event) {
  bp__clear_error();
  BP__REQUIRE_ARG("bp_event_query", event);
  if (!atomic_load(&event->recorded)) return BP_OK;
  const bp_plugin_t* plugin = event->device->plugin;
  if (!plugin->core.event_query)
    return bp__error(BP_UNIMPLEMENTED, "bp_event_query: plugin %s lacks event_query", plugin->name);
  bp_status_t status = BP__CORE_CALL(plugin, event_query, event->handle);
  if (status == BP_OK || status == BP_NOT_READY) return status;
  return bp__plugin_error(plugin, status, "event_query");
}

bp_status_t bp_event_synchronize(bp_event_t* event) {
  bp__clear_error();
  BP__REQUIRE_ARG("bp_event_synchronize", event);
  if (!atomic_load(&event->recorded)) return BP_OK;
  const bp_plugin_t* plugin = event->device->plugin;
  if (!plugin->core.event_synchronize)
    return bp__error(BP_UNIMPLEMENTED, "bp_event_synchronize: plugin %s lacks event_synchronize",
                     plugin->name);
  bp_status_t status = BP__CORE_CALL(plugin, event_synchronize, event->handle);
  if (status != BP_OK) return bp__plugin_error(plugin, status, "event_synchronize");
  return BP_OK;
}

bp_status_t bp_event_elapsed_ns(bp_event_t* start, bp_event_t* end, uint64_t* out_ns) {
  bp__clear_error();
  BP__REQUIRE_ARG("bp_event_elapsed_ns", start);
  BP__REQUIRE_ARG("bp_event_elapsed_ns", end);
  BP__REQUIRE_ARG("bp_event_elapsed_ns", out_ns);
  if (!(start->flags & BP_EVENT_TIMING) || !(end->flags & BP_EVENT_TIMING))
    return bp__error(BP_INVALID_ARGUMENT,
                     "bp_event_elapsed_ns: both events must be created with BP_EVENT_TIMING");
  if (start->device->plugin != end->device->plugin)
    return bp__error(BP_INVALID_ARGUMENT,
                     "bp_event_elapsed_ns: events of %s and %s belong to different plugins",
                     start->device->name, end->device->name);
  if (!atomic_load(&start->recorded) || !atomic_load(&end->recorded))
    return bp__error(BP_FAILED_PRECONDITION, "bp_event_elapsed_ns: both events must be recorded");
  const bp_plugin_t* plugin = start->device->plugin;
  if (!plugin->core.event_elapsed_ns)
    return bp__error(BP_UNIMPLEMENTED, "bp_event_elapsed_ns: plugin %s lacks event_elapsed_ns",
                     plugin->name);
  uint64_t ns = 0;
  bp_status_t status = BP__CORE_CALL(plugin, event_elapsed_ns, start->handle, end->handle, &ns);
  if (status != BP_OK) return bp__plugin_error(plugin, status, "event_elapsed_ns");
  *out_ns = ns;
  return BP_OK;
}
