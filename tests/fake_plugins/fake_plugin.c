/* Fake plugins over malloc'd host memory: one source, built into several
 * libraries (libbp_fake_<case>.so) whose -D defines select how each one
 * behaves or misbehaves at negotiation and initialisation.
 *
 *   FAKE_NAME            backend name answered (string)
 *   FAKE_VERSION         plugin version string
 *   FAKE_HOST            the runtime tests' plugin (fake_host_a/_b): DEVICE
 *                        memory is not host visible (buffer_map refuses it,
 *                        so the core must use the copy slots), HOST_PINNED
 *                        memory maps, and copy_peer copies between devices
 *                        of one instance. Without it DEVICE memory is host
 *                        visible, there is no other space and no copy_peer
 *                        (the core stages peer copies).
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
 *   FAKE_CRASH="<slot>"  that slot stores to an inaccessible page (SIGSEGV): negotiate,
 *                        instance_create, stream_synchronize, launch (with
 *                        FAKE_OPS), or "worker" (stream_synchronize crashes
 *                        on a thread the plugin starts)
 *   FAKE_ABORT="<slot>"  that slot calls abort()
 *   FAKE_HANG="<slot>"   that slot never returns; "stream": streams and
 *                        events never complete (queries answer NOT_READY,
 *                        synchronizes block)
 *   FAKE_OPS             an op table with a do-nothing add (any dtype)
 *   FAKE_DRAFT_EXEC      an exec table of the provisional draft (48 bytes,
 *                        ABI 1.0 and 1.1): ignored by the loader
 *   FAKE_DRAFT_COMM      a comm table of the provisional draft (120 bytes,
 *                        tier NATIVE, no slot): the loader must ignore it
 *   FAKE_HOSTILE         every string it hands the host is hostile
 *                        (FAKE_HOSTILE_TEXT: terminal escapes, CR/LF with a
 *                        forged log line, invalid UTF-8): version, vendor,
 *                        device name, a log line at instance_create, and the
 *                        report of a buffer_allocate of 4242 bytes (which
 *                        fails)
 *
 * Every stream operation runs at enqueue time: copies are memcpy, host
 * functions run inline, events complete when recorded (with a monotonic
 * timestamp). Instance options "devices=N" change the device count
 * (default 2). New buffers hold the byte 0xA5 so that tests see untouched
 * bytes. No op slots.
 */
#include <dlfcn.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

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

#ifdef FAKE_HOSTILE
#define FAKE_HOSTILE_TEXT \
  "v1\x1b]0;pwned\x07\x1b[2J\r\nbackplane[error] forged line\xff\xfe\xc3("
#undef FAKE_VERSION
#define FAKE_VERSION FAKE_HOSTILE_TEXT
#define FAKE_VENDOR FAKE_HOSTILE_TEXT
#else
#define FAKE_VENDOR "backplane tests"
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

/* ---- injected faults (FAKE_CRASH, FAKE_ABORT, FAKE_HANG) ---------------- */
#ifdef FAKE_CRASH
/* A store to a page mapped without access: a real SIGSEGV at an
 * instruction of this library, and no undefined behaviour for UBSan to stop
 * at first (a NULL store would be). */
static void crash_now(void) {
  void* page = mmap(NULL, 4096, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  volatile int* volatile target = page == MAP_FAILED ? (int*)(uintptr_t)8 : (int*)page;
  *target = 1;
}
static void* crash_thread(void* arg) {
  (void)arg;
  crash_now();
  return NULL;
}
#endif

/* Called first thing by the slots that can fault. */
static void fault_point(const char* slot) {
  (void)slot;
#ifdef FAKE_CRASH
  if (strcmp(slot, FAKE_CRASH) == 0) crash_now();
  if (strcmp(FAKE_CRASH, "worker") == 0 && strcmp(slot, "stream_synchronize") == 0) {
    pthread_t t;
    if (pthread_create(&t, NULL, crash_thread, NULL) == 0) pthread_join(t, NULL);
  }
#endif
#ifdef FAKE_ABORT
  if (strcmp(slot, FAKE_ABORT) == 0) abort();
#endif
#ifdef FAKE_HANG
  if (strcmp(slot, FAKE_HANG) == 0)
    for (;;) pause();
#endif
}

/* Memory spaces of every device, each FAKE_DEVICE_BYTES large. */
static const bp_memory_space_info_t k_spaces[] = {
#ifdef FAKE_HOST
    {sizeof(bp_memory_space_info_t), BP_MEMORY_DEVICE, BP_MEMORY_FLAG_DEVICE_LOCAL, 0,
     FAKE_DEVICE_BYTES, 64},
    {sizeof(bp_memory_space_info_t), BP_MEMORY_HOST_PINNED,
     BP_MEMORY_FLAG_HOST_VISIBLE | BP_MEMORY_FLAG_HOST_COHERENT, 0, FAKE_DEVICE_BYTES, 64},
#else
    {sizeof(bp_memory_space_info_t), BP_MEMORY_DEVICE,
     BP_MEMORY_FLAG_HOST_VISIBLE | BP_MEMORY_FLAG_HOST_COHERENT, 0, FAKE_DEVICE_BYTES, 64},
#endif
};
#define FAKE_SPACE_COUNT ((uint32_t)(sizeof(k_spaces) / sizeof(k_spaces[0])))

/* The space of memory kind `kind`, or NULL where it is not offered. */
static const bp_memory_space_info_t* find_space(uint32_t kind) {
  for (uint32_t i = 0; i < FAKE_SPACE_COUNT; ++i)
    if (k_spaces[i].kind == kind) return &k_spaces[i];
  return NULL;
}

/* ---- objects ------------------------------------------------------------ */
struct bpp_instance_s {
  uint32_t device_count;
  int lost_events; /* option lost_events=1: every recorded event fails as on a lost device */
  struct bpp_device_s* devices[FAKE_MAX_DEVICES]; /* open devices by index */
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
  /* Sticky: a failed host function; reported once. Atomic: synchronize
   * and query may run on any thread (the core's buffer eviction does). */
  atomic_int error;
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
  fault_point("instance_create");
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
#ifdef FAKE_HOSTILE
  if (g_host && g_host->log) g_host->log(g_host->host_ctx, BP_LOG_WARN, FAKE_HOSTILE_TEXT);
#endif
  bpp_instance_t inst = calloc(1, sizeof(*inst));
  if (!inst) return fail(BP_RESOURCE_EXHAUSTED, "out of memory");
  inst->device_count = count;
  inst->lost_events = info && info->options && strstr(info->options, "lost_events=1") != NULL;
  *out = inst;
  return BP_OK;
#endif
}

static void instance_destroy(bpp_instance_t instance) { free(instance); }

static bp_status_t device_count(bpp_instance_t instance, uint32_t* out_count) {
  *out_count = instance->device_count;
  return BP_OK;
}

static bp_status_t device_open(bpp_instance_t inst, uint32_t index, bpp_device_t* out) {
  if (index >= inst->device_count) return fail(BP_OUT_OF_RANGE, "no device %u", index);
#ifdef FAKE_DEVICE_FAIL
  if (index == 1) return fail(BP_DEVICE_LOST, "fake device 1 fell off the bus");
#endif
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

static bp_status_t device_get_properties(bpp_device_t device, bp_device_properties_t* props) {
  if (props->struct_size < sizeof(*props)) return fail(BP_INVALID_ARGUMENT, "props too small");
  uint32_t size = props->struct_size;
  memset(props, 0, sizeof(*props));
  props->struct_size = size;
  props->kind = BP_DEVICE_KIND_VIRTUAL;
#ifdef FAKE_HOSTILE
  snprintf(props->name, sizeof(props->name), "%s", FAKE_HOSTILE_TEXT);
#else
  snprintf(props->name, sizeof(props->name), "Fake %s device %u", FAKE_NAME, device->index);
#endif
  snprintf(props->vendor, sizeof(props->vendor), "%s", FAKE_VENDOR);
  snprintf(props->driver_version, sizeof(props->driver_version), FAKE_VERSION);
  props->memory_bytes = FAKE_DEVICE_BYTES * (device->index + 1);
  props->compute_units = 4;
  props->subgroup_size = 1;
  for (uint32_t d = 1; d < BP_DTYPE_COUNT_; ++d) props->dtype_mask |= BP_DTYPE_BIT(d);
  props->flags = BP_DEVICE_FLAG_TIMESTAMPS;
#ifdef FAKE_HOST
  props->flags |= BP_DEVICE_FLAG_PEER_COPY;
#else
  props->flags |= BP_DEVICE_FLAG_UNIFIED_MEMORY;
#endif
  props->peak_ops_per_s[BP_DTYPE_F32] = 1e9;
  props->memory_bandwidth_bytes_per_s = 1e10;
  return BP_OK;
}

static bp_status_t device_memory_spaces(bpp_device_t dev, uint32_t capacity,
                                        uint32_t element_size, bp_memory_space_info_t* out,
                                        uint32_t* out_count) {
  (void)dev;
  if (capacity && element_size < BP_MEMORY_SPACE_INFO_V1_SIZE)
    return fail(BP_INVALID_ARGUMENT, "element_size %u too small", element_size);
  for (uint32_t i = 0; i < FAKE_SPACE_COUNT && i < capacity; ++i) {
    bp_memory_space_info_t* dst =
        (bp_memory_space_info_t*)(void*)((char*)out + (size_t)i * element_size);
    uint32_t n = element_size < sizeof(k_spaces[i]) ? element_size : (uint32_t)sizeof(k_spaces[i]);
    memcpy(dst, &k_spaces[i], n);
    dst->struct_size = n;
  }
  *out_count = FAKE_SPACE_COUNT;
  return BP_OK;
}

static bp_status_t device_memory_usage(bpp_device_t dev, uint32_t space, uint64_t* out_used,
                                       uint64_t* out_budget) {
  if (space >= FAKE_SPACE_COUNT) return fail(BP_INVALID_ARGUMENT, "no memory space %u", space);
  *out_used = __atomic_load_n(&dev->used[k_spaces[space].kind], __ATOMIC_RELAXED);
  *out_budget = FAKE_DEVICE_BYTES;
  return BP_OK;
}

/* ---- buffers ------------------------------------------------------------ */
static bp_status_t buffer_allocate(bpp_device_t dev, const bp_buffer_alloc_info_t* info,
                                   bpp_buffer_t* out) {
  if (info->memory_space >= FAKE_SPACE_COUNT)
    return fail(BP_INVALID_ARGUMENT, "no memory space %u", info->memory_space);
#ifdef FAKE_HOSTILE
  if (info->size_bytes == 4242) return fail(BP_RESOURCE_EXHAUSTED, "%s", FAKE_HOSTILE_TEXT);
#endif
  const uint32_t kind = k_spaces[info->memory_space].kind;
  uint64_t used = __atomic_load_n(&dev->used[kind], __ATOMIC_RELAXED);
  if (info->size_bytes > FAKE_DEVICE_BYTES - used)
    return fail(BP_RESOURCE_EXHAUSTED, "requested %llu bytes, %llu available",
                (unsigned long long)info->size_bytes,
                (unsigned long long)(FAKE_DEVICE_BYTES - used));
  bpp_buffer_t buf = calloc(1, sizeof(*buf));
  unsigned char* data = malloc(info->size_bytes ? (size_t)info->size_bytes : 1);
  if (!buf || !data) {
    free(buf);
    free(data);
    return fail(BP_RESOURCE_EXHAUSTED, "host malloc of %llu bytes failed",
                (unsigned long long)info->size_bytes);
  }
  /* A recognisable pattern instead of zeros, so tests see untouched bytes. */
  memset(data, 0xA5, (size_t)info->size_bytes);
  buf->device = dev;
  buf->kind = kind;
  buf->size = info->size_bytes;
  buf->data = data;
  __atomic_fetch_add(&dev->used[kind], info->size_bytes, __ATOMIC_RELAXED);
  *out = buf;
  return BP_OK;
}

static void buffer_release(bpp_buffer_t buf) {
  if (!buf) return;
  __atomic_fetch_sub(&buf->device->used[buf->kind], buf->size, __ATOMIC_RELAXED);
  free(buf->data);
  free(buf);
}

static bp_status_t buffer_map(bpp_buffer_t buf, uint64_t offset, uint64_t size, void** out) {
  if (!(find_space(buf->kind)->flags & BP_MEMORY_FLAG_HOST_VISIBLE))
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

#ifdef FAKE_HOST
static bp_status_t copy_peer(bpp_stream_t s, bpp_buffer_t src, uint64_t src_off, bpp_buffer_t dst,
                             uint64_t dst_off, uint64_t size) {
  if (src->device->instance != s->device->instance || dst->device->instance != s->device->instance)
    return fail(BP_INVALID_ARGUMENT, "peer copy across instances");
  return copy_any(src, src_off, dst, dst_off, size);
}
#define FAKE_COPY_PEER copy_peer
#else
#define FAKE_COPY_PEER NULL /* the core stages peer copies */
#endif

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
static bp_status_t stream_create(bpp_device_t dev, const bp_stream_create_info_t* info,
                                 bpp_stream_t* out) {
  if (!info || info->struct_size < BP_STREAM_CREATE_INFO_V1_SIZE)
    return fail(BP_INVALID_ARGUMENT, "stream create info missing or too small");
  if (info->priority != 0) return fail(BP_UNIMPLEMENTED, "stream priorities are not supported");
  bpp_stream_t s = calloc(1, sizeof(*s));
  if (!s) return fail(BP_RESOURCE_EXHAUSTED, "out of memory");
  s->device = dev;
  *out = s;
  return BP_OK;
}

static void stream_destroy(bpp_stream_t s) { free(s); }

/* Work ran at enqueue: a stream is always idle; it returns (and clears)
 * the error of a failed host function. */
static bp_status_t stream_idle(bpp_stream_t s) {
#if defined(FAKE_HANG)
  if (strcmp(FAKE_HANG, "stream") == 0) return BP_NOT_READY; /* never finishes */
#endif
  bp_status_t st = (bp_status_t)atomic_exchange(&s->error, BP_OK);
  if (st != BP_OK) return fail(st, "a host function on the stream failed with status %d", (int)st);
  return BP_OK;
}

static bp_status_t stream_synchronize(bpp_stream_t s) {
  fault_point("stream_synchronize");
  fault_point("stream");
  return stream_idle(s);
}

static bp_status_t stream_host_func(bpp_stream_t s, bp_host_func_t fn, void* user_data) {
  bp_status_t st = fn(user_data);
  int none = BP_OK; /* poisons the stream, keeping the first error */
  if (st != BP_OK) atomic_compare_exchange_strong(&s->error, &none, (int)st);
  return BP_OK;
}

static bp_status_t event_create(bpp_device_t dev, const bp_event_create_info_t* info,
                                bpp_event_t* out) {
  if (!info || info->struct_size < BP_EVENT_CREATE_INFO_V1_SIZE)
    return fail(BP_INVALID_ARGUMENT, "event create info missing or too small");
  if (info->flags & BP_EVENT_EXPORTABLE)
    return fail(BP_UNIMPLEMENTED, "exportable events are not supported");
  bpp_event_t e = calloc(1, sizeof(*e));
  if (!e) return fail(BP_RESOURCE_EXHAUSTED, "out of memory");
  e->device = dev;
  e->flags = info->flags;
  *out = e;
  return BP_OK;
}

static void event_destroy(bpp_event_t e) { free(e); }

static bp_status_t event_record(bpp_event_t e, bpp_stream_t s) {
  if (s->device != e->device) return fail(BP_INVALID_ARGUMENT, "stream of another device");
  e->recorded = 1;
  e->timestamp_ns = now_ns();
  if (e->device->instance->lost_events && g_host->struct_size >= BP_HOST_SERVICES_V1_SIZE &&
      g_host->async_error)
    g_host->async_error(g_host->host_ctx, e->device, BP_DEVICE_LOST, "fake: device lost");
  return BP_OK;
}

static bp_status_t stream_wait_event(bpp_stream_t s, bpp_event_t e) {
  if (s->device->instance != e->device->instance)
    return fail(BP_INVALID_ARGUMENT, "event of another instance");
  return BP_OK; /* recorded events are complete */
}

/* Events complete when recorded (or fail, with option lost_events=1). */
static bp_status_t event_idle(bpp_event_t e) {
#if defined(FAKE_HANG)
  if (strcmp(FAKE_HANG, "stream") == 0) return BP_NOT_READY; /* never completes */
#endif
  if (e->recorded && e->device->instance->lost_events)
    return fail(BP_DEVICE_LOST, "fake: the device was lost before the event completed");
  return BP_OK;
}

static bp_status_t event_synchronize(bpp_event_t e) {
  fault_point("stream");
  return event_idle(e);
}

static bp_status_t event_elapsed(bpp_event_t start, bpp_event_t end, uint64_t* out) {
  if (!start->recorded || !end->recorded) return fail(BP_FAILED_PRECONDITION, "event not recorded");
  *out = end->timestamp_ns >= start->timestamp_ns ? end->timestamp_ns - start->timestamp_ns : 0;
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
            .copy_peer = FAKE_OPTIONAL(FAKE_COPY_PEER),
            .buffer_fill = FAKE_OPTIONAL(buffer_fill),
            .stream_create = FAKE_OPTIONAL(stream_create),
            .stream_destroy = FAKE_OPTIONAL(stream_destroy),
            .stream_synchronize = FAKE_OPTIONAL(stream_synchronize),
            .stream_query = FAKE_OPTIONAL(stream_idle),
            .stream_enqueue_host_func = FAKE_OPTIONAL(stream_host_func),
            .event_create = FAKE_OPTIONAL(event_create),
            .event_destroy = FAKE_OPTIONAL(event_destroy),
            .event_record = FAKE_OPTIONAL(event_record),
            .stream_wait_event = FAKE_OPTIONAL(stream_wait_event),
            .event_query = FAKE_OPTIONAL(event_idle),
            .event_synchronize = FAKE_OPTIONAL(event_synchronize),
            .event_elapsed_ns = FAKE_OPTIONAL(event_elapsed),
        },
    .future_slot_a = future_slot,
    .future_slot_b = future_slot,
};

#ifdef FAKE_OPS
/* add: checks nothing, computes nothing (the crash tests need a launch). */
static bp_status_t launch_add(bpp_stream_t s, const bp_op_call_t* call) {
  (void)s;
  (void)call;
  fault_point("launch");
  return BP_OK;
}
static bpp_op_launch_fn fake_launch[BP_OP_COUNT] = {[BP_OP_add] = launch_add};
static const bpp_op_table_t fake_ops = {
    .struct_size = sizeof(bpp_op_table_t), .launch_count = BP_OP_COUNT, .launch = fake_launch};
#define FAKE_OP_TABLE (&fake_ops)
#else
#define FAKE_OP_TABLE NULL
#endif

#ifdef FAKE_DRAFT_COMM
/* The draft's layout: struct_size, tier, then 14 slots (never called). */
static const struct {
  uint32_t struct_size, tier;
  void* slots[14];
} fake_draft_comm = {120u, BP_COMM_TIER_NATIVE, {0}};
_Static_assert(sizeof(fake_draft_comm) == 120, "the draft comm table had 120 bytes");
#define FAKE_COMM_TABLE ((const bpp_comm_table_t*)(const void*)&fake_draft_comm)
#else
#define FAKE_COMM_TABLE NULL
#endif

#ifdef FAKE_DRAFT_EXEC
/* The provisional exec table of ABI 1.0 and 1.1 (48 bytes: struct_size,
 * reserved, five slots); its slots abort, so a call would show. */
static bp_status_t draft_exec_slot(void) { abort(); }
static const struct {
  uint32_t struct_size, reserved0;
  void* slots[5];
} fake_draft_exec = {48u, 0u, {(void*)draft_exec_slot, (void*)draft_exec_slot, (void*)draft_exec_slot,
                               (void*)draft_exec_slot, (void*)draft_exec_slot}};
_Static_assert(sizeof(fake_draft_exec) == 48, "the draft exec table had 48 bytes");
#define FAKE_EXEC_TABLE ((const bpp_exec_table_t*)(const void*)&fake_draft_exec)
#else
#define FAKE_EXEC_TABLE NULL
#endif

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
            .ops = FAKE_OP_TABLE,
            .caps = NULL,
            .exec = FAKE_EXEC_TABLE,
            .comm = FAKE_COMM_TABLE,
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
  fault_point("negotiate");
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
  reply->vendor = FAKE_VENDOR;
#ifdef FAKE_NULL_VTABLE
  reply->vtable = fake_vtable.v1.struct_size == 0 ? &fake_vtable.v1 : NULL; /* always NULL */
#else
  reply->vtable = &fake_vtable.v1;
#endif
  return BP_OK;
}
