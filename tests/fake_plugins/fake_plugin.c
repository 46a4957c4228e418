/* Fake plugins for the loader tests: one source, built into several
 * libraries (libbp_fake_<case>.so) whose -D defines select how each one
 * behaves or misbehaves at negotiation and initialisation.
 *
 *   FAKE_NAME            backend name answered (string)
 *   FAKE_VERSION         plugin version string
 *   FAKE_NO_ENTRY        the entry point is not exported
 *   FAKE_ABI_MAJOR       major answered (default: BP_ABI_VERSION_MAJOR)
 *   FAKE_PLUGIN_MINOR    newest minor the plugin speaks; it answers
 *                        min(host, plugin) and, when newer than 1.0, hands
 *                        out tables with extra trailing slots
 *   FAKE_ANSWER_NEWER    answers the offered minor + 1 (a protocol error)
 *   FAKE_CORE_SIZE_DELTA added to the core table's struct_size (negative:
 *                        a table smaller than the first released size)
 *   FAKE_MINIMAL_CORE    only the required core slots; the rest are NULL
 *   FAKE_NO_DEVICE_OPEN  the required core slot device_open is NULL
 *   FAKE_NULL_VTABLE     the reply carries no vtable
 *   FAKE_EMPTY_NAME      the reply's name is ""
 *   FAKE_REFUSE          negotiate reports a message and fails
 *   FAKE_INIT_FAIL       instance_create dlopens a vendor library that does
 *                        not exist and returns UNAVAILABLE with dlerror()
 *   FAKE_DEVICE_FAIL     device_open fails for the second device
 *
 * A working fake keeps everything in malloc'd host memory and runs stream
 * work synchronously at enqueue time. Instance options "devices=N" change
 * the device count (default 2). Live instances, devices and buffers are
 * counted so that tests can check the core released them (the counts are
 * reported through host->log at debug level on instance_destroy).
 */
#include <dlfcn.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "backplane/plugin.h"

#ifndef FAKE_NAME
#error "define FAKE_NAME"
#endif
#ifndef FAKE_VERSION
#define FAKE_VERSION "1.0.0-fake"
#endif
#ifndef FAKE_ABI_MAJOR
#define FAKE_ABI_MAJOR BP_ABI_VERSION_MAJOR
#endif
#ifndef FAKE_PLUGIN_MINOR
#define FAKE_PLUGIN_MINOR 0
#endif
#ifndef FAKE_CORE_SIZE_DELTA
#define FAKE_CORE_SIZE_DELTA 0
#endif

#define FAKE_DEFAULT_DEVICES 2u
#define FAKE_MAX_DEVICES 8u
#define FAKE_DEVICE_BYTES ((uint64_t)1 << 30)

static const bp_host_services_t* g_host;

static bp_status_t fail(bp_status_t status, const char* fmt, ...)
    __attribute__((format(printf, 2, 3)));
static bp_status_t fail(bp_status_t status, const char* fmt, ...) {
  char message[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(message, sizeof(message), fmt, ap);
  va_end(ap);
  if (g_host && g_host->report) g_host->report(g_host->host_ctx, status, message);
  return status;
}

/* ---- objects ------------------------------------------------------------ */
struct bpp_instance_s {
  uint32_t device_count;
};
struct bpp_device_s {
  uint32_t index;
};
struct bpp_buffer_s {
  uint64_t size;
  unsigned char* data;
};
struct bpp_stream_s {
  bpp_device_t device;
};
struct bpp_event_s {
  uint64_t ns;
};

static bp_status_t instance_create(const bpp_instance_create_info_t* info, bpp_instance_t* out) {
#ifdef FAKE_INIT_FAIL
  (void)info;
  (void)out;
  void* vendor = dlopen("libbp_fake_vendor.so.1", RTLD_NOW | RTLD_LOCAL);
  if (vendor) {
    dlclose(vendor);
    return fail(BP_INTERNAL, "libbp_fake_vendor.so.1 unexpectedly exists");
  }
  const char* err = dlerror();
  return fail(BP_UNAVAILABLE, "%s", err ? err : "libbp_fake_vendor.so.1: not found");
#else
  uint32_t count = FAKE_DEFAULT_DEVICES;
  if (info && info->struct_size >= sizeof(*info) && info->options) {
    const char* p = strstr(info->options, "devices=");
    if (p) {
      long n = strtol(p + 8, NULL, 10);
      if (n < 0 || n > (long)FAKE_MAX_DEVICES)
        return fail(BP_INVALID_ARGUMENT, "option devices=%ld out of range 0..%u", n,
                    FAKE_MAX_DEVICES);
      count = (uint32_t)n;
    }
  }
  bpp_instance_t inst = calloc(1, sizeof(*inst));
  if (!inst) return fail(BP_RESOURCE_EXHAUSTED, "out of memory");
  inst->device_count = count;
  *out = inst;
  return BP_OK;
#endif
}

static void instance_destroy(bpp_instance_t instance) { free(instance); }

static bp_status_t device_count(bpp_instance_t instance, uint32_t* out_count) {
  *out_count = instance->device_count;
  return BP_OK;
}

static bp_status_t device_open(bpp_instance_t instance, uint32_t index, bpp_device_t* out) {
  if (index >= instance->device_count) return fail(BP_OUT_OF_RANGE, "no device %u", index);
#ifdef FAKE_DEVICE_FAIL
  if (index == 1) return fail(BP_DEVICE_LOST, "fake device 1 fell off the bus");
#endif
  bpp_device_t d = calloc(1, sizeof(*d));
  if (!d) return fail(BP_RESOURCE_EXHAUSTED, "out of memory");
  d->index = index;
  *out = d;
  return BP_OK;
}

static void device_close(bpp_device_t device) { free(device); }

static bp_status_t device_get_properties(bpp_device_t device, bp_device_properties_t* props) {
  if (props->struct_size < sizeof(*props)) return fail(BP_INVALID_ARGUMENT, "props too small");
  uint32_t size = props->struct_size;
  memset(props, 0, sizeof(*props));
  props->struct_size = size;
  props->kind = BP_DEVICE_KIND_VIRTUAL;
  snprintf(props->name, sizeof(props->name), "Fake %s device %u", FAKE_NAME, device->index);
  snprintf(props->vendor, sizeof(props->vendor), "backplane tests");
  snprintf(props->driver_version, sizeof(props->driver_version), FAKE_VERSION);
  props->memory_bytes = FAKE_DEVICE_BYTES * (device->index + 1);
  props->compute_units = 4;
  props->subgroup_size = 1;
  props->dtype_mask = BP_DTYPE_BIT(BP_DTYPE_F32) | BP_DTYPE_BIT(BP_DTYPE_I32);
  props->flags = BP_DEVICE_FLAG_UNIFIED_MEMORY | BP_DEVICE_FLAG_TIMESTAMPS;
  props->peak_ops_per_s[BP_DTYPE_F32] = 1e9;
  props->memory_bandwidth_bytes_per_s = 1e10;
  return BP_OK;
}

static bp_status_t device_memory_spaces(bpp_device_t device, uint32_t capacity,
                                        bp_memory_space_info_t* out, uint32_t* out_count) {
  (void)device;
  if (capacity >= 1) {
    out[0].kind = BP_MEMORY_DEVICE;
    out[0].flags = BP_MEMORY_FLAG_HOST_VISIBLE | BP_MEMORY_FLAG_HOST_COHERENT;
    out[0].capacity_bytes = FAKE_DEVICE_BYTES;
    out[0].alignment_bytes = 64;
  }
  *out_count = 1;
  return BP_OK;
}

static bp_status_t device_memory_usage(bpp_device_t device, uint32_t kind, uint64_t* used,
                                       uint64_t* budget) {
  (void)device;
  if (kind != BP_MEMORY_DEVICE)
    return fail(BP_INVALID_ARGUMENT, "memory kind %u not offered", kind);
  *used = 0;
  *budget = FAKE_DEVICE_BYTES;
  return BP_OK;
}

static bp_status_t buffer_allocate(bpp_device_t device, const bp_buffer_alloc_info_t* info,
                                   bpp_buffer_t* out) {
  (void)device;
  if (info->memory_kind != BP_MEMORY_DEVICE)
    return fail(BP_INVALID_ARGUMENT, "memory kind %u not offered", info->memory_kind);
  if (info->size_bytes == 0 || info->size_bytes > FAKE_DEVICE_BYTES)
    return fail(BP_RESOURCE_EXHAUSTED, "cannot allocate %llu bytes",
                (unsigned long long)info->size_bytes);
  bpp_buffer_t b = calloc(1, sizeof(*b));
  if (b) b->data = calloc(1, (size_t)info->size_bytes);
  if (!b || !b->data) {
    free(b);
    return fail(BP_RESOURCE_EXHAUSTED, "out of host memory");
  }
  b->size = info->size_bytes;
  *out = b;
  return BP_OK;
}

static void buffer_release(bpp_buffer_t buffer) {
  if (!buffer) return;
  free(buffer->data);
  free(buffer);
}

static int out_of_range(bpp_buffer_t b, uint64_t offset, uint64_t size) {
  return offset > b->size || size > b->size - offset;
}

static bp_status_t buffer_map(bpp_buffer_t b, uint64_t offset, uint64_t size, void** out) {
  if (out_of_range(b, offset, size)) return fail(BP_OUT_OF_RANGE, "map out of range");
  *out = b->data + offset;
  return BP_OK;
}

static bp_status_t buffer_unmap(bpp_buffer_t b) {
  (void)b;
  return BP_OK;
}

static bp_status_t copy_h2d(bpp_stream_t s, const void* src, bpp_buffer_t dst, uint64_t off,
                            uint64_t size) {
  (void)s;
  if (out_of_range(dst, off, size)) return fail(BP_OUT_OF_RANGE, "copy out of range");
  memcpy(dst->data + off, src, (size_t)size);
  return BP_OK;
}

static bp_status_t copy_d2h(bpp_stream_t s, bpp_buffer_t src, uint64_t off, void* dst,
                            uint64_t size) {
  (void)s;
  if (out_of_range(src, off, size)) return fail(BP_OUT_OF_RANGE, "copy out of range");
  memcpy(dst, src->data + off, (size_t)size);
  return BP_OK;
}

static bp_status_t copy_d2d(bpp_stream_t s, bpp_buffer_t src, uint64_t src_off, bpp_buffer_t dst,
                            uint64_t dst_off, uint64_t size) {
  (void)s;
  if (out_of_range(src, src_off, size) || out_of_range(dst, dst_off, size))
    return fail(BP_OUT_OF_RANGE, "copy out of range");
  memmove(dst->data + dst_off, src->data + src_off, (size_t)size);
  return BP_OK;
}

static bp_status_t buffer_fill(bpp_stream_t s, bpp_buffer_t b, uint64_t off, uint64_t size,
                               const void* pattern, uint32_t pattern_size) {
  (void)s;
  if (out_of_range(b, off, size)) return fail(BP_OUT_OF_RANGE, "fill out of range");
  if (pattern_size == 0 || size % pattern_size) return fail(BP_INVALID_ARGUMENT, "bad pattern");
  for (uint64_t i = 0; i < size; i += pattern_size)
    memcpy(b->data + off + i, pattern, pattern_size);
  return BP_OK;
}

static bp_status_t stream_create(bpp_device_t device, uint32_t flags, bpp_stream_t* out) {
  (void)flags;
  bpp_stream_t s = calloc(1, sizeof(*s));
  if (!s) return fail(BP_RESOURCE_EXHAUSTED, "out of memory");
  s->device = device;
  *out = s;
  return BP_OK;
}

static void stream_destroy(bpp_stream_t s) { free(s); }
static bp_status_t stream_idle(bpp_stream_t s) {
  (void)s;
  return BP_OK;
}

static bp_status_t stream_host_func(bpp_stream_t s, bp_host_func_t fn, void* user_data) {
  (void)s;
  fn(user_data);
  return BP_OK;
}

static uint64_t now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static bp_status_t event_create(bpp_device_t device, uint32_t flags, bpp_event_t* out) {
  (void)device;
  (void)flags;
  bpp_event_t e = calloc(1, sizeof(*e));
  if (!e) return fail(BP_RESOURCE_EXHAUSTED, "out of memory");
  *out = e;
  return BP_OK;
}

static void event_destroy(bpp_event_t e) { free(e); }

static bp_status_t event_record(bpp_event_t e, bpp_stream_t s) {
  (void)s;
  e->ns = now_ns();
  return BP_OK;
}

static bp_status_t stream_wait_event(bpp_stream_t s, bpp_event_t e) {
  (void)s;
  (void)e;
  return BP_OK;
}

static bp_status_t event_idle(bpp_event_t e) {
  (void)e;
  return BP_OK;
}

static bp_status_t event_elapsed(bpp_event_t a, bpp_event_t b, uint64_t* out) {
  *out = b->ns >= a->ns ? b->ns - a->ns : 0;
  return BP_OK;
}

/* ---- tables ------------------------------------------------------------- */
#if defined(FAKE_MINIMAL_CORE)
#define FAKE_OPTIONAL(fn) (0 ? (fn) : NULL)
#else
#define FAKE_OPTIONAL(fn) fn
#endif

/* A table as a plugin of a newer minor would hand out: the 1.0 table
 * followed by slots this host does not know (it must not read them). */
typedef struct fake_core_table {
  bpp_core_table_t v1;
  void (*future_slot_a)(void);
  void (*future_slot_b)(void);
} fake_core_table_t;

static void future_slot(void) { abort(); /* a host that calls past its size is broken */ }

static const fake_core_table_t fake_core = {
    .v1 =
        {
#if FAKE_PLUGIN_MINOR > 0
            .struct_size = (uint32_t)(sizeof(fake_core_table_t) + FAKE_CORE_SIZE_DELTA),
#else
            .struct_size = (uint32_t)(sizeof(bpp_core_table_t) + FAKE_CORE_SIZE_DELTA),
#endif
            .instance_create = instance_create,
            .instance_destroy = instance_destroy,
            .device_count = device_count,
#ifdef FAKE_NO_DEVICE_OPEN
            .device_open = 0 ? device_open : NULL,
#else
            .device_open = device_open,
#endif
            .device_close = device_close,
            .device_get_properties = device_get_properties,
            .device_memory_spaces = FAKE_OPTIONAL(device_memory_spaces),
            .device_memory_usage = FAKE_OPTIONAL(device_memory_usage),
            .buffer_allocate = FAKE_OPTIONAL(buffer_allocate),
            .buffer_release = FAKE_OPTIONAL(buffer_release),
            .buffer_map = FAKE_OPTIONAL(buffer_map),
            .buffer_unmap = FAKE_OPTIONAL(buffer_unmap),
            .copy_host_to_device = FAKE_OPTIONAL(copy_h2d),
            .copy_device_to_host = FAKE_OPTIONAL(copy_d2h),
            .copy_device_to_device = FAKE_OPTIONAL(copy_d2d),
            .copy_peer = NULL, /* the core stages peer copies */
            .buffer_fill = FAKE_OPTIONAL(buffer_fill),
            .stream_create = FAKE_OPTIONAL(stream_create),
            .stream_destroy = FAKE_OPTIONAL(stream_destroy),
            .stream_synchronize = FAKE_OPTIONAL(stream_idle),
            .stream_query = FAKE_OPTIONAL(stream_idle),
            .stream_enqueue_host_func = FAKE_OPTIONAL(stream_host_func),
            .event_create = FAKE_OPTIONAL(event_create),
            .event_destroy = FAKE_OPTIONAL(event_destroy),
            .event_record = FAKE_OPTIONAL(event_record),
            .stream_wait_event = FAKE_OPTIONAL(stream_wait_event),
            .event_query = FAKE_OPTIONAL(event_idle),
            .event_synchronize = FAKE_OPTIONAL(event_idle),
            .event_elapsed_ns = FAKE_OPTIONAL(event_elapsed),
        },
    .future_slot_a = future_slot,
    .future_slot_b = future_slot,
};

typedef struct fake_vtable {
  bp_plugin_vtable_t v1;
  const void* future_table;
} fake_vtable_t;

static const fake_vtable_t fake_vtable = {
    .v1 =
        {
#if FAKE_PLUGIN_MINOR > 0
            .struct_size = sizeof(fake_vtable_t),
#else
            .struct_size = sizeof(bp_plugin_vtable_t),
#endif
            .core = &fake_core.v1,
            .ops = NULL,
            .caps = NULL,
            .exec = NULL,
            .comm = NULL,
        },
    .future_table = (const void*)future_slot,
};

#ifdef FAKE_NO_ENTRY
/* Built without the export: dlsym must not find it. */
bp_status_t bp_plugin_negotiate(const bp_negotiate_request_t* request, bp_negotiate_reply_t* reply);
#else
BP_PLUGIN_EXPORT bp_status_t bp_plugin_negotiate(const bp_negotiate_request_t* request,
                                                 bp_negotiate_reply_t* reply);
#endif

bp_status_t bp_plugin_negotiate(const bp_negotiate_request_t* request,
                                bp_negotiate_reply_t* reply) {
  if (!request || request->struct_size < BP_NEGOTIATE_REQUEST_V1_SIZE || !reply ||
      reply->struct_size < BP_NEGOTIATE_REPLY_V1_SIZE)
    return BP_INVALID_ARGUMENT;
  if (request->host && request->host->struct_size >= BP_HOST_SERVICES_V1_SIZE)
    g_host = request->host;
#ifdef FAKE_REFUSE
  return fail(BP_FAILED_PRECONDITION, "fake plugin refuses: the moon is in the wrong phase");
#endif
  uint32_t size = reply->struct_size;
  memset(reply, 0, sizeof(*reply));
  reply->struct_size = size < sizeof(*reply) ? size : (uint32_t)sizeof(*reply);
  reply->abi_major = FAKE_ABI_MAJOR;
#if defined(FAKE_ANSWER_NEWER)
  reply->abi_minor = (uint16_t)(request->abi_minor + 1);
#else
  const uint32_t plugin_minor = FAKE_PLUGIN_MINOR, host_minor = request->abi_minor;
  reply->abi_minor = (uint16_t)(host_minor < plugin_minor ? host_minor : plugin_minor);
#endif
#ifdef FAKE_EMPTY_NAME
  reply->name = "";
#else
  reply->name = FAKE_NAME;
#endif
  reply->version = FAKE_VERSION;
  reply->vendor = "backplane tests";
#ifdef FAKE_NULL_VTABLE
  reply->vtable = fake_vtable.v1.struct_size == 0 ? &fake_vtable.v1 : NULL; /* always NULL */
#else
  reply->vtable = &fake_vtable.v1;
#endif
  return BP_OK;
}
