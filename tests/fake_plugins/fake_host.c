/* A minimal synchronous plugin over malloc'd host memory, for the runtime
 * tests. Built twice (FAKE_HOST_NAME "fake_host_a" and "fake_host_b") so
 * that tests have two plugins of two devices each.
 *
 * Every stream operation runs at enqueue time: copies are memcpy, host
 * functions run inline, events complete when recorded (with a monotonic
 * timestamp). DEVICE memory is not host visible (buffer_map refuses it) so
 * the core must use the copy slots; HOST_PINNED memory maps. No op slots. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "backplane/plugin.h"

#ifndef FAKE_HOST_NAME
#error "define FAKE_HOST_NAME"
#endif

#define FAKE_DEVICES 2u
/* Capacity of each device's DEVICE memory space. */
#define FAKE_DEVICE_BYTES ((uint64_t)1 << 30)

static const bp_host_services_t* g_host;

static bp_status_t fail(bp_status_t status, const char* fmt, ...)
    __attribute__((format(printf, 2, 3)));
static bp_status_t fail(bp_status_t status, const char* fmt, ...) {
  char message[256];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(message, sizeof(message), fmt, ap);
  va_end(ap);
  if (g_host && g_host->report) g_host->report(g_host->host_ctx, status, message);
  return status;
}

struct bpp_instance_s {
  struct bpp_device_s* devices[FAKE_DEVICES];
};

struct bpp_device_s {
  bpp_instance_t instance;
  uint32_t index;
  uint64_t used[BP_MEMORY_KIND_COUNT_]; /* bytes allocated per memory kind (atomic) */
};

struct bpp_buffer_s {
  bpp_device_t device;
  uint32_t kind;
  uint64_t size;
  int mapped;
  unsigned char* data;
};

struct bpp_stream_s {
  bpp_device_t device;
};

struct bpp_event_s {
  bpp_device_t device;
  uint32_t flags;
  int recorded;
  uint64_t timestamp_ns;
};

static uint64_t now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static int outside(uint64_t offset, uint64_t size, uint64_t total) {
  return offset > total || size > total - offset;
}

/* ---- instance and devices ---------------------------------------------- */
static bp_status_t instance_create(const bpp_instance_create_info_t* info, bpp_instance_t* out) {
  (void)info;
  bpp_instance_t inst = calloc(1, sizeof(*inst));
  if (!inst) return fail(BP_RESOURCE_EXHAUSTED, "out of memory");
  *out = inst;
  return BP_OK;
}

static void instance_destroy(bpp_instance_t inst) { free(inst); }

static bp_status_t device_count(bpp_instance_t inst, uint32_t* out) {
  (void)inst;
  *out = FAKE_DEVICES;
  return BP_OK;
}

static bp_status_t device_open(bpp_instance_t inst, uint32_t index, bpp_device_t* out) {
  if (index >= FAKE_DEVICES) return fail(BP_INVALID_ARGUMENT, "no device %u", index);
  if (inst->devices[index]) return fail(BP_FAILED_PRECONDITION, "device %u already open", index);
  bpp_device_t dev = calloc(1, sizeof(*dev));
  if (!dev) return fail(BP_RESOURCE_EXHAUSTED, "out of memory");
  dev->instance = inst;
  dev->index = index;
  inst->devices[index] = dev;
  *out = dev;
  return BP_OK;
}

static void device_close(bpp_device_t dev) {
  dev->instance->devices[dev->index] = NULL;
  free(dev);
}

static bp_status_t device_get_properties(bpp_device_t dev, bp_device_properties_t* props) {
  bp_device_properties_t p;
  memset(&p, 0, sizeof(p));
  p.struct_size = sizeof(p);
  p.kind = BP_DEVICE_KIND_VIRTUAL;
  snprintf(p.name, sizeof(p.name), "%s device %u", FAKE_HOST_NAME, dev->index);
  snprintf(p.vendor, sizeof(p.vendor), "backplane tests");
  snprintf(p.driver_version, sizeof(p.driver_version), "1");
  p.memory_bytes = FAKE_DEVICE_BYTES;
  p.compute_units = 1;
  p.subgroup_size = 1;
  p.dtype_mask = 0;
  for (uint32_t d = 1; d < BP_DTYPE_COUNT_; ++d) p.dtype_mask |= BP_DTYPE_BIT(d);
  p.flags = BP_DEVICE_FLAG_TIMESTAMPS | BP_DEVICE_FLAG_PEER_COPY;
  uint32_t n = props->struct_size < sizeof(p) ? props->struct_size : (uint32_t)sizeof(p);
  memcpy((char*)props + sizeof(uint32_t), (char*)&p + sizeof(uint32_t), n - sizeof(uint32_t));
  return BP_OK;
}

/* DEVICE (not host visible) and HOST_PINNED (mappable); no other kinds. */
static bp_status_t device_memory_spaces(bpp_device_t dev, uint32_t capacity,
                                        bp_memory_space_info_t* out, uint32_t* out_count) {
  (void)dev;
  const bp_memory_space_info_t spaces[2] = {
      {sizeof(bp_memory_space_info_t), BP_MEMORY_DEVICE, BP_MEMORY_FLAG_DEVICE_LOCAL, 0,
       FAKE_DEVICE_BYTES, 64},
      {sizeof(bp_memory_space_info_t), BP_MEMORY_HOST_PINNED,
       BP_MEMORY_FLAG_HOST_VISIBLE | BP_MEMORY_FLAG_HOST_COHERENT, 0, FAKE_DEVICE_BYTES, 64},
  };
  for (uint32_t i = 0; i < 2 && i < capacity; ++i) out[i] = spaces[i];
  *out_count = 2;
  return BP_OK;
}

static bp_status_t device_memory_usage(bpp_device_t dev, uint32_t kind, uint64_t* out_used,
                                       uint64_t* out_budget) {
  if (kind >= BP_MEMORY_KIND_COUNT_)
    return fail(BP_INVALID_ARGUMENT, "unknown memory kind %u", kind);
  *out_used = __atomic_load_n(&dev->used[kind], __ATOMIC_RELAXED);
  *out_budget = FAKE_DEVICE_BYTES;
  return BP_OK;
}

/* ---- buffers ------------------------------------------------------------ */
static bp_status_t buffer_allocate(bpp_device_t dev, const bp_buffer_alloc_info_t* info,
                                   bpp_buffer_t* out) {
  if (info->memory_kind != BP_MEMORY_DEVICE && info->memory_kind != BP_MEMORY_HOST_PINNED)
    return fail(BP_INVALID_ARGUMENT, "memory kind %u not offered", info->memory_kind);
  uint64_t used = __atomic_load_n(&dev->used[info->memory_kind], __ATOMIC_RELAXED);
  if (info->size_bytes > FAKE_DEVICE_BYTES - used)
    return fail(BP_RESOURCE_EXHAUSTED, "requested %llu bytes, %llu available",
                (unsigned long long)info->size_bytes,
                (unsigned long long)(FAKE_DEVICE_BYTES - used));
  bpp_buffer_t buf = calloc(1, sizeof(*buf));
  unsigned char* data = malloc((size_t)info->size_bytes);
  if (!buf || !data) {
    free(buf);
    free(data);
    return fail(BP_RESOURCE_EXHAUSTED, "host malloc of %llu bytes failed",
                (unsigned long long)info->size_bytes);
  }
  /* A recognisable pattern instead of zeros, so tests see untouched bytes. */
  memset(data, 0xA5, (size_t)info->size_bytes);
  buf->device = dev;
  buf->kind = info->memory_kind;
  buf->size = info->size_bytes;
  buf->data = data;
  __atomic_fetch_add(&dev->used[info->memory_kind], info->size_bytes, __ATOMIC_RELAXED);
  *out = buf;
  return BP_OK;
}

static void buffer_release(bpp_buffer_t buf) {
  __atomic_fetch_sub(&buf->device->used[buf->kind], buf->size, __ATOMIC_RELAXED);
  free(buf->data);
  free(buf);
}

static bp_status_t buffer_map(bpp_buffer_t buf, uint64_t offset, uint64_t size, void** out) {
  if (buf->kind != BP_MEMORY_HOST_PINNED)
    return fail(BP_FAILED_PRECONDITION, "buffer is not host visible");
  if (outside(offset, size, buf->size))
    return fail(BP_OUT_OF_RANGE, "map range outside the buffer");
  buf->mapped = 1;
  *out = buf->data + offset;
  return BP_OK;
}

static bp_status_t buffer_unmap(bpp_buffer_t buf) {
  if (!buf->mapped) return fail(BP_FAILED_PRECONDITION, "buffer is not mapped");
  buf->mapped = 0;
  return BP_OK;
}

/* ---- copies (run at enqueue) ------------------------------------------ */
static bp_status_t copy_h2d(bpp_stream_t s, const void* src, bpp_buffer_t dst, uint64_t off,
                            uint64_t size) {
  if (dst->device != s->device) return fail(BP_INVALID_ARGUMENT, "buffer of another device");
  if (outside(off, size, dst->size)) return fail(BP_OUT_OF_RANGE, "copy outside the buffer");
  memcpy(dst->data + off, src, (size_t)size);
  return BP_OK;
}

static bp_status_t copy_d2h(bpp_stream_t s, bpp_buffer_t src, uint64_t off, void* dst,
                            uint64_t size) {
  if (src->device != s->device) return fail(BP_INVALID_ARGUMENT, "buffer of another device");
  if (outside(off, size, src->size)) return fail(BP_OUT_OF_RANGE, "copy outside the buffer");
  memcpy(dst, src->data + off, (size_t)size);
  return BP_OK;
}

static bp_status_t copy_any(bpp_buffer_t src, uint64_t src_off, bpp_buffer_t dst, uint64_t dst_off,
                            uint64_t size) {
  if (outside(src_off, size, src->size) || outside(dst_off, size, dst->size))
    return fail(BP_OUT_OF_RANGE, "copy outside the buffer");
  memmove(dst->data + dst_off, src->data + src_off, (size_t)size);
  return BP_OK;
}

static bp_status_t copy_d2d(bpp_stream_t s, bpp_buffer_t src, uint64_t src_off, bpp_buffer_t dst,
                            uint64_t dst_off, uint64_t size) {
  if (src->device != s->device || dst->device != s->device)
    return fail(BP_INVALID_ARGUMENT, "buffer of another device");
  return copy_any(src, src_off, dst, dst_off, size);
}

static bp_status_t copy_peer(bpp_stream_t s, bpp_buffer_t src, uint64_t src_off, bpp_buffer_t dst,
                             uint64_t dst_off, uint64_t size) {
  if (src->device->instance != s->device->instance || dst->device->instance != s->device->instance)
    return fail(BP_INVALID_ARGUMENT, "peer copy across instances");
  return copy_any(src, src_off, dst, dst_off, size);
}

static bp_status_t buffer_fill(bpp_stream_t s, bpp_buffer_t buf, uint64_t off, uint64_t size,
                               const void* pattern, uint32_t pattern_size) {
  (void)s;
  if (pattern_size != 1 && pattern_size != 2 && pattern_size != 4 && pattern_size != 8)
    return fail(BP_INVALID_ARGUMENT, "pattern size %u", pattern_size);
  if (outside(off, size, buf->size) || size % pattern_size)
    return fail(BP_OUT_OF_RANGE, "fill outside the buffer");
  for (uint64_t i = 0; i < size; i += pattern_size)
    memcpy(buf->data + off + i, pattern, pattern_size);
  return BP_OK;
}

/* ---- streams and events ------------------------------------------------ */
static bp_status_t stream_create(bpp_device_t dev, uint32_t flags, bpp_stream_t* out) {
  (void)flags;
  bpp_stream_t s = calloc(1, sizeof(*s));
  if (!s) return fail(BP_RESOURCE_EXHAUSTED, "out of memory");
  s->device = dev;
  *out = s;
  return BP_OK;
}

static void stream_destroy(bpp_stream_t s) { free(s); }
static bp_status_t stream_synchronize(bpp_stream_t s) {
  (void)s;
  return BP_OK;
}
static bp_status_t stream_query(bpp_stream_t s) {
  (void)s;
  return BP_OK;
}

static bp_status_t stream_enqueue_host_func(bpp_stream_t s, bp_host_func_t fn, void* user_data) {
  (void)s;
  fn(user_data);
  return BP_OK;
}

static bp_status_t event_create(bpp_device_t dev, uint32_t flags, bpp_event_t* out) {
  bpp_event_t e = calloc(1, sizeof(*e));
  if (!e) return fail(BP_RESOURCE_EXHAUSTED, "out of memory");
  e->device = dev;
  e->flags = flags;
  *out = e;
  return BP_OK;
}

static void event_destroy(bpp_event_t e) { free(e); }

static bp_status_t event_record(bpp_event_t e, bpp_stream_t s) {
  if (s->device != e->device) return fail(BP_INVALID_ARGUMENT, "stream of another device");
  e->recorded = 1;
  e->timestamp_ns = now_ns();
  return BP_OK;
}

static bp_status_t stream_wait_event(bpp_stream_t s, bpp_event_t e) {
  if (s->device->instance != e->device->instance)
    return fail(BP_INVALID_ARGUMENT, "event of another instance");
  return BP_OK; /* recorded events are complete */
}

static bp_status_t event_query(bpp_event_t e) {
  (void)e;
  return BP_OK;
}
static bp_status_t event_synchronize(bpp_event_t e) {
  (void)e;
  return BP_OK;
}

static bp_status_t event_elapsed_ns(bpp_event_t start, bpp_event_t end, uint64_t* out) {
  if (!start->recorded || !end->recorded) return fail(BP_FAILED_PRECONDITION, "event not recorded");
  *out = end->timestamp_ns >= start->timestamp_ns ? end->timestamp_ns - start->timestamp_ns : 0;
  return BP_OK;
}

static const bpp_core_table_t g_core = {
    .struct_size = sizeof(bpp_core_table_t),
    .instance_create = instance_create,
    .instance_destroy = instance_destroy,
    .device_count = device_count,
    .device_open = device_open,
    .device_close = device_close,
    .device_get_properties = device_get_properties,
    .device_memory_spaces = device_memory_spaces,
    .device_memory_usage = device_memory_usage,
    .buffer_allocate = buffer_allocate,
    .buffer_release = buffer_release,
    .buffer_map = buffer_map,
    .buffer_unmap = buffer_unmap,
    .copy_host_to_device = copy_h2d,
    .copy_device_to_host = copy_d2h,
    .copy_device_to_device = copy_d2d,
    .copy_peer = copy_peer,
    .buffer_fill = buffer_fill,
    .stream_create = stream_create,
    .stream_destroy = stream_destroy,
    .stream_synchronize = stream_synchronize,
    .stream_query = stream_query,
    .stream_enqueue_host_func = stream_enqueue_host_func,
    .event_create = event_create,
    .event_destroy = event_destroy,
    .event_record = event_record,
    .stream_wait_event = stream_wait_event,
    .event_query = event_query,
    .event_synchronize = event_synchronize,
    .event_elapsed_ns = event_elapsed_ns,
};

static const bp_plugin_vtable_t g_vtable = {
    .struct_size = sizeof(bp_plugin_vtable_t),
    .core = &g_core,
};

BP_PLUGIN_EXPORT bp_status_t bp_plugin_negotiate(const bp_negotiate_request_t* request,
                                                 bp_negotiate_reply_t* reply) {
  if (!request || !reply || request->struct_size < BP_NEGOTIATE_REQUEST_V1_SIZE ||
      reply->struct_size < BP_NEGOTIATE_REPLY_V1_SIZE)
    return BP_INVALID_ARGUMENT;
  g_host = request->host;
  if (request->abi_major != BP_ABI_VERSION_MAJOR)
    return fail(BP_FAILED_PRECONDITION, "%s speaks ABI %d, host %u", FAKE_HOST_NAME,
                BP_ABI_VERSION_MAJOR, request->abi_major);
  reply->abi_major = BP_ABI_VERSION_MAJOR;
  const uint16_t minor = BP_ABI_VERSION_MINOR;
  reply->abi_minor = request->abi_minor < minor ? request->abi_minor : minor;
  reply->name = FAKE_HOST_NAME;
  reply->version = "1.0";
  reply->vendor = "backplane tests";
  reply->vtable = &g_vtable;
  reply->next = NULL;
  return BP_OK;
}
