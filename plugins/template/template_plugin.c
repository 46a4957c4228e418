/* The template plugin: the smallest complete backplane backend.
 *
 * Copy this folder to start a new backend. It shows every rule a plugin must
 * follow (docs/ABI.md) on a device made of host memory:
 *  - one exported symbol, bp_plugin_negotiate, with version negotiation;
 *  - the required core table (instance, devices, memory, copies, streams,
 *    events), errors reported through the host;
 *  - two ops (add and relu on f32, any strides and broadcasting) and an
 *    honest query_support: everything else answers "not supported", and
 *    the conformance suite scores those cases NOT_SUPPORTED.
 *
 * Streams here are synchronous: work runs at enqueue time, which trivially
 * keeps stream order. A real backend queues work; see plugins/cpu.
 * Thread safety: the only shared mutable state is the memory counter
 * (atomic); streams are externally synchronized by the ABI.
 */
#define _GNU_SOURCE
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "backplane/plugin.h"

#ifndef TEMPLATE_NAME
#define TEMPLATE_NAME "template"
#endif
#define TEMPLATE_ALIGN 64u
#define TEMPLATE_CAPACITY (UINT64_C(1) << 30) /* a pretend 1 GiB device */

/* ------------------------------------------------------------------------ */
/* Host services and error reporting                                         */
/* ------------------------------------------------------------------------ */
static const bp_host_services_t* g_host;

static bp_status_t fail(bp_status_t status, const char* fmt, ...)
    __attribute__((format(printf, 2, 3)));
static bp_status_t fail(bp_status_t status, const char* fmt, ...) {
  char msg[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  if (g_host && g_host->report) g_host->report(g_host->host_ctx, status, msg);
  return status;
}

/* ------------------------------------------------------------------------ */
/* Objects                                                                   */
/* ------------------------------------------------------------------------ */
struct bpp_instance_s {
  int unused;
};
struct bpp_device_s {
  atomic_uint_fast64_t used_bytes;
};
struct bpp_buffer_s {
  struct bpp_device_s* device;
  uint64_t size;
  unsigned char* data;
};
struct bpp_stream_s {
  struct bpp_device_s* device;
  bp_status_t sticky; /* first error of work run on this stream */
};
struct bpp_event_s {
  int recorded;
  uint64_t ns;
};

static struct bpp_device_s g_device;

static uint64_t now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* ------------------------------------------------------------------------ */
/* Instance and device                                                       */
/* ------------------------------------------------------------------------ */
static bp_status_t instance_create(const bpp_instance_create_info_t* info,
                                   bpp_instance_t* out_instance) {
  if (!out_instance) return fail(BP_INVALID_ARGUMENT, "instance_create: out_instance is NULL");
  /* A vendor backend dlopens its driver here and returns BP_UNAVAILABLE with
   * the library name and dlerror() text when it is missing. */
  struct bpp_instance_s* inst = calloc(1, sizeof *inst);
  if (!inst) return fail(BP_RESOURCE_EXHAUSTED, "instance_create: out of host memory");
  *out_instance = inst;
  return BP_OK;
}

static void instance_destroy(bpp_instance_t instance) { free(instance); }

static bp_status_t device_count(bpp_instance_t instance, uint32_t* out_count) {
  if (!out_count) return fail(BP_INVALID_ARGUMENT, "device_count: out_count is NULL");
  *out_count = 1;
  return BP_OK;
}

static bp_status_t device_open(bpp_instance_t instance, uint32_t index, bpp_device_t* out) {
  if (!out) return fail(BP_INVALID_ARGUMENT, "device_open: out_device is NULL");
  if (index != 0) return fail(BP_OUT_OF_RANGE, "device_open: index %u, have 1 device", index);
  *out = &g_device;
  return BP_OK;
}

static void device_close(bpp_device_t device) {}

static bp_status_t device_get_properties(bpp_device_t device, bp_device_properties_t* props) {
  if (!props || props->struct_size < offsetof(bp_device_properties_t, peak_ops_per_s))
    return fail(BP_INVALID_ARGUMENT, "device_get_properties: props missing or too small");
  uint32_t size = props->struct_size;
  bp_device_properties_t p;
  memset(&p, 0, sizeof p);
  p.struct_size = size;
  p.kind = BP_DEVICE_KIND_VIRTUAL;
  snprintf(p.name, sizeof p.name, "Template device (host memory)");
  snprintf(p.vendor, sizeof p.vendor, "backplane");
  snprintf(p.driver_version, sizeof p.driver_version, "1.0");
  p.memory_bytes = TEMPLATE_CAPACITY;
  p.compute_units = 1;
  p.subgroup_size = 1;
  p.dtype_mask = BP_DTYPE_BIT(BP_DTYPE_F32);
  p.flags = BP_DEVICE_FLAG_UNIFIED_MEMORY | BP_DEVICE_FLAG_TIMESTAMPS |
            BP_DEVICE_FLAG_DENORMALS_PRESERVED | BP_DEVICE_FLAG_CORRECTLY_ROUNDED;
  p.peak_ops_per_s[BP_DTYPE_F32] = 1e9; /* one scalar core, roughly */
  p.memory_bandwidth_bytes_per_s = 5e9;
  p.launch_overhead_ns = 100;
  memcpy(props, &p, size < sizeof p ? size : sizeof p);
  return BP_OK;
}

static bp_status_t device_memory_spaces(bpp_device_t device, uint32_t capacity,
                                        bp_memory_space_info_t* out, uint32_t* out_count) {
  if (!out_count) return fail(BP_INVALID_ARGUMENT, "device_memory_spaces: out_count is NULL");
  *out_count = 1;
  if (capacity >= 1 && out) {
    out[0] = (bp_memory_space_info_t){
        .struct_size = sizeof(bp_memory_space_info_t),
        .kind = BP_MEMORY_DEVICE,
        .flags = BP_MEMORY_FLAG_HOST_VISIBLE | BP_MEMORY_FLAG_HOST_COHERENT |
                 BP_MEMORY_FLAG_DEVICE_LOCAL,
        .capacity_bytes = TEMPLATE_CAPACITY,
        .alignment_bytes = TEMPLATE_ALIGN};
  }
  return BP_OK;
}

static bp_status_t device_memory_usage(bpp_device_t device, uint32_t kind, uint64_t* out_used,
                                       uint64_t* out_budget) {
  if (!out_used || !out_budget) return fail(BP_INVALID_ARGUMENT, "device_memory_usage: NULL out");
  *out_used = atomic_load(&device->used_bytes);
  *out_budget = TEMPLATE_CAPACITY;
  return BP_OK;
}

/* ------------------------------------------------------------------------ */
/* Buffers and copies                                                        */
/* ------------------------------------------------------------------------ */
static bp_status_t buffer_allocate(bpp_device_t device, const bp_buffer_alloc_info_t* info,
                                   bpp_buffer_t* out) {
  if (!info || !out) return fail(BP_INVALID_ARGUMENT, "buffer_allocate: NULL argument");
  if (info->memory_kind != BP_MEMORY_DEVICE)
    return fail(BP_INVALID_ARGUMENT, "buffer_allocate: memory kind %u not offered",
                info->memory_kind);
  if (info->size_bytes == 0 || info->size_bytes > TEMPLATE_CAPACITY)
    return fail(info->size_bytes ? BP_RESOURCE_EXHAUSTED : BP_INVALID_ARGUMENT,
                "buffer_allocate: %llu bytes requested, capacity %llu",
                (unsigned long long)info->size_bytes, (unsigned long long)TEMPLATE_CAPACITY);
  uint64_t rounded = (info->size_bytes + TEMPLATE_ALIGN - 1) / TEMPLATE_ALIGN * TEMPLATE_ALIGN;
  struct bpp_buffer_s* b = calloc(1, sizeof *b);
  void* data = b ? aligned_alloc(TEMPLATE_ALIGN, rounded) : NULL;
  if (!data) {
    free(b);
    return fail(BP_RESOURCE_EXHAUSTED, "buffer_allocate: host allocation of %llu bytes failed",
                (unsigned long long)rounded);
  }
  b->device = device;
  b->size = info->size_bytes;
  b->data = data;
  atomic_fetch_add(&device->used_bytes, rounded);
  *out = b;
  return BP_OK;
}

static void buffer_release(bpp_buffer_t b) {
  if (!b) return;
  uint64_t rounded = (b->size + TEMPLATE_ALIGN - 1) / TEMPLATE_ALIGN * TEMPLATE_ALIGN;
  atomic_fetch_sub(&b->device->used_bytes, rounded);
  free(b->data);
  free(b);
}

static int in_range(bpp_buffer_t b, uint64_t offset, uint64_t size) {
  return b && offset <= b->size && size <= b->size - offset;
}

static bp_status_t buffer_map(bpp_buffer_t b, uint64_t offset, uint64_t size, void** out_ptr) {
  if (!out_ptr || !in_range(b, offset, size))
    return fail(BP_OUT_OF_RANGE, "buffer_map: range outside the buffer");
  *out_ptr = b->data + offset;
  return BP_OK;
}

static bp_status_t buffer_unmap(bpp_buffer_t b) { return BP_OK; }

static bp_status_t copy_h2d(bpp_stream_t s, const void* src, bpp_buffer_t dst, uint64_t off,
                            uint64_t size) {
  if (!s || !src || !in_range(dst, off, size))
    return fail(BP_OUT_OF_RANGE, "copy_host_to_device: bad arguments or range");
  memcpy(dst->data + off, src, size);
  return BP_OK;
}

static bp_status_t copy_d2h(bpp_stream_t s, bpp_buffer_t src, uint64_t off, void* dst,
                            uint64_t size) {
  if (!s || !dst || !in_range(src, off, size))
    return fail(BP_OUT_OF_RANGE, "copy_device_to_host: bad arguments or range");
  memcpy(dst, src->data + off, size);
  return BP_OK;
}

static bp_status_t copy_d2d(bpp_stream_t s, bpp_buffer_t src, uint64_t src_off, bpp_buffer_t dst,
                            uint64_t dst_off, uint64_t size) {
  if (!s || !in_range(src, src_off, size) || !in_range(dst, dst_off, size))
    return fail(BP_OUT_OF_RANGE, "copy_device_to_device: bad arguments or range");
  memmove(dst->data + dst_off, src->data + src_off, size);
  return BP_OK;
}

static bp_status_t buffer_fill(bpp_stream_t s, bpp_buffer_t b, uint64_t off, uint64_t size,
                               const void* pattern, uint32_t psize) {
  if (!s || !pattern || !in_range(b, off, size) ||
      (psize != 1 && psize != 2 && psize != 4 && psize != 8) || size % psize)
    return fail(BP_INVALID_ARGUMENT, "buffer_fill: bad arguments");
  for (uint64_t i = 0; i < size; i += psize) memcpy(b->data + off + i, pattern, psize);
  return BP_OK;
}

/* ------------------------------------------------------------------------ */
/* Streams and events (synchronous)                                          */
/* ------------------------------------------------------------------------ */
static bp_status_t stream_create(bpp_device_t device, uint32_t flags, bpp_stream_t* out) {
  if (!out) return fail(BP_INVALID_ARGUMENT, "stream_create: out_stream is NULL");
  struct bpp_stream_s* s = calloc(1, sizeof *s);
  if (!s) return fail(BP_RESOURCE_EXHAUSTED, "stream_create: out of host memory");
  s->device = device;
  *out = s;
  return BP_OK;
}

static void stream_destroy(bpp_stream_t s) { free(s); }

static bp_status_t stream_synchronize(bpp_stream_t s) {
  if (!s) return fail(BP_INVALID_ARGUMENT, "stream_synchronize: stream is NULL");
  bp_status_t st = s->sticky;
  s->sticky = BP_OK;
  return st ? fail(st, "an earlier op on this stream failed") : BP_OK;
}

static bp_status_t stream_query(bpp_stream_t s) { return stream_synchronize(s); }

static bp_status_t stream_host_func(bpp_stream_t s, bp_host_func_t fn, void* user) {
  if (!s || !fn) return fail(BP_INVALID_ARGUMENT, "stream_enqueue_host_func: NULL argument");
  fn(user);
  return BP_OK;
}

static bp_status_t event_create(bpp_device_t device, uint32_t flags, bpp_event_t* out) {
  if (!out) return fail(BP_INVALID_ARGUMENT, "event_create: out_event is NULL");
  *out = calloc(1, sizeof **out);
  return *out ? BP_OK : fail(BP_RESOURCE_EXHAUSTED, "event_create: out of host memory");
}

static void event_destroy(bpp_event_t e) { free(e); }

static bp_status_t event_record(bpp_event_t e, bpp_stream_t s) {
  if (!e || !s) return fail(BP_INVALID_ARGUMENT, "event_record: NULL argument");
  e->recorded = 1;
  e->ns = now_ns();
  return BP_OK;
}

static bp_status_t stream_wait_event(bpp_stream_t s, bpp_event_t e) {
  return s && e ? BP_OK : fail(BP_INVALID_ARGUMENT, "stream_wait_event: NULL argument");
}

static bp_status_t event_query(bpp_event_t e) {
  return e ? BP_OK : fail(BP_INVALID_ARGUMENT, "event_query: event is NULL");
}

static bp_status_t event_elapsed(bpp_event_t a, bpp_event_t b, uint64_t* out_ns) {
  if (!a || !b || !out_ns || !a->recorded || !b->recorded)
    return fail(BP_FAILED_PRECONDITION, "event_elapsed_ns: both events must be recorded");
  *out_ns = b->ns >= a->ns ? b->ns - a->ns : 0;
  return BP_OK;
}

/* ------------------------------------------------------------------------ */
/* Ops: add and relu on f32, any strides (the core validated the shapes)     */
/* ------------------------------------------------------------------------ */
static const float* f32_at(const bp_tensor_desc_t* d, const int64_t* index) {
  int64_t off = 0;
  for (uint32_t i = 0; i < d->rank; ++i) off += index[i] * d->strides[i];
  return (const float*)(d->buffer->data + d->byte_offset) + off;
}

/* Visits every output element in row-major order. Inputs of lower rank are
 * right-aligned against the output (broadcast dims have stride 0 or size 1). */
static void for_each_index(const bp_tensor_desc_t* out, void (*fn)(const int64_t*, void*),
                           void* ctx) {
  int64_t n = 1;
  for (uint32_t i = 0; i < out->rank; ++i) n *= out->sizes[i];
  int64_t index[BP_MAX_RANK] = {0};
  for (int64_t k = 0; k < n; ++k) {
    fn(index, ctx);
    for (int d = (int)out->rank - 1; d >= 0; --d) {
      if (++index[d] < out->sizes[d]) break;
      index[d] = 0;
    }
  }
}

static const float* input_at(const bp_tensor_desc_t* in, const bp_tensor_desc_t* out,
                             const int64_t* out_index) {
  int64_t index[BP_MAX_RANK];
  uint32_t lead = out->rank - in->rank;
  for (uint32_t i = 0; i < in->rank; ++i)
    index[i] = in->sizes[i] == 1 ? 0 : out_index[lead + i];
  return f32_at(in, index);
}

typedef struct add_ctx {
  const bp_op_call_t* call;
  float alpha;
  float scalar;
} add_ctx_t;

static void add_one(const int64_t* index, void* p) {
  add_ctx_t* c = p;
  const bp_tensor_desc_t* out = &c->call->outputs[0];
  float a = *input_at(&c->call->inputs[0], out, index);
  float b = c->call->inputs[1].buffer ? *input_at(&c->call->inputs[1], out, index) : c->scalar;
  *(float*)f32_at(out, index) = a + c->alpha * b;
}

static void relu_one(const int64_t* index, void* p) {
  const bp_op_call_t* call = p;
  const bp_tensor_desc_t* out = &call->outputs[0];
  float x = *input_at(&call->inputs[0], out, index);
  *(float*)f32_at(out, index) = x > 0.0f || x != x ? x : 0.0f; /* NaN propagates */
}

static double scalar_value(const bp_scalar_t* s, double dflt) {
  switch (s->kind) {
    case BP_SCALAR_FLOAT: return s->v.f;
    case BP_SCALAR_INT: return (double)s->v.i;
    case BP_SCALAR_BOOL: return (double)s->v.b;
    default: return dflt;
  }
}

static int all_f32(const bp_op_call_t* call) {
  for (uint32_t i = 0; i < call->num_inputs; ++i)
    if (call->inputs[i].dtype != BP_DTYPE_INVALID && call->inputs[i].dtype != BP_DTYPE_F32)
      return 0;
  return call->num_outputs == 1 && call->outputs[0].dtype == BP_DTYPE_F32 &&
         call->compute_dtype == BP_DTYPE_F32;
}

/* Fault injection for the conformance suite's self-test (tests/conformance):
 * built with TEMPLATE_FAULT = 1 (wrong results), 2 (crash) or 3 (hang), the
 * plugin misbehaves on purpose in add, which its query_support still claims.
 * A vendor copying this file deletes this block. */
#if defined(TEMPLATE_FAULT)
#include <signal.h>
#include <unistd.h>
static void inject_fault(const bp_op_call_t* call) {
  if (TEMPLATE_FAULT == 1) {
    float* first = (float*)f32_at(&call->outputs[0], (const int64_t[BP_MAX_RANK]){0});
    int64_t n = 1;
    for (uint32_t i = 0; i < call->outputs[0].rank; ++i) n *= call->outputs[0].sizes[i];
    if (n > 0) *first += 1.0f;
  } else if (TEMPLATE_FAULT == 2) {
    raise(SIGSEGV);
  } else if (TEMPLATE_FAULT == 3) {
    for (;;) pause();
  }
}
#else
static void inject_fault(const bp_op_call_t* call) { (void)call; }
#endif

static bp_status_t launch_add(bpp_stream_t s, const bp_op_call_t* call) {
  if (!s || !call || call->num_inputs != 2 || !all_f32(call) || !call->attrs)
    return fail(BP_UNIMPLEMENTED, "add: only f32 tensors are implemented");
  const bp_binary_attrs_t* attrs = call->attrs;
  if (attrs->flags & BP_BINARY_SELF_IS_SCALAR)
    return fail(BP_UNIMPLEMENTED, "add: a scalar self is not implemented");
  add_ctx_t c = {call, (float)scalar_value(&attrs->alpha, 1.0),
                 (float)scalar_value(&attrs->scalar, 0.0)};
  for_each_index(&call->outputs[0], add_one, &c);
  inject_fault(call);
  return BP_OK;
}

static bp_status_t launch_relu(bpp_stream_t s, const bp_op_call_t* call) {
  if (!s || !call || call->num_inputs != 1 || !all_f32(call))
    return fail(BP_UNIMPLEMENTED, "relu: only f32 tensors are implemented");
  for_each_index(&call->outputs[0], relu_one, (void*)call);
  return BP_OK;
}

static bp_status_t query_support(bpp_device_t device, const bp_op_call_t* call,
                                 bp_support_t* out) {
  if (!call || !out || out->struct_size < offsetof(bp_support_t, message) + 1)
    return fail(BP_INVALID_ARGUMENT, "query_support: NULL or short argument");
  out->supported = 0;
  out->requires_contiguous = 0;
  if (call->op_id != BP_OP_add && call->op_id != BP_OP_relu) {
    out->reason = BP_SUPPORT_OP;
    snprintf(out->message, sizeof out->message, "the template backend implements add and relu only");
  } else if (!all_f32(call)) {
    out->reason = BP_SUPPORT_DTYPE;
    snprintf(out->message, sizeof out->message, "only f32");
  } else if (call->op_id == BP_OP_add && call->attrs &&
             (((const bp_binary_attrs_t*)call->attrs)->flags & BP_BINARY_SELF_IS_SCALAR)) {
    out->reason = BP_SUPPORT_ATTRIBUTE;
    snprintf(out->message, sizeof out->message, "a scalar self is not implemented");
  } else {
    out->supported = 1;
    out->reason = BP_SUPPORT_OK;
    out->message[0] = '\0';
  }
  return BP_OK;
}

static bp_status_t query_fusion(bpp_device_t device, bp_fusion_caps_t* out) {
  if (!out) return fail(BP_INVALID_ARGUMENT, "query_fusion: out is NULL");
  uint32_t size = out->struct_size;
  memset(out, 0, size < sizeof *out ? size : sizeof *out);
  out->struct_size = size; /* declares no fusion */
  return BP_OK;
}

/* ------------------------------------------------------------------------ */
/* Tables and the entry point                                                */
/* ------------------------------------------------------------------------ */
static const bpp_core_table_t k_core = {
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
    .copy_peer = NULL, /* one device: nothing to peer with */
    .buffer_fill = buffer_fill,
    .stream_create = stream_create,
    .stream_destroy = stream_destroy,
    .stream_synchronize = stream_synchronize,
    .stream_query = stream_query,
    .stream_enqueue_host_func = stream_host_func,
    .event_create = event_create,
    .event_destroy = event_destroy,
    .event_record = event_record,
    .stream_wait_event = stream_wait_event,
    .event_query = event_query,
    .event_synchronize = event_query,
    .event_elapsed_ns = event_elapsed,
};

static const bpp_op_launch_fn k_launch[BP_OP_COUNT] = {
    [BP_OP_add] = launch_add,
    [BP_OP_relu] = launch_relu,
};

static const bpp_op_table_t k_ops = {
    .struct_size = sizeof(bpp_op_table_t),
    .launch_count = BP_OP_COUNT,
    .launch = k_launch,
};

static const bpp_caps_table_t k_caps = {
    .struct_size = sizeof(bpp_caps_table_t),
    .query_support = query_support,
    .estimate_cost = NULL, /* the compiler's roofline from the properties */
    .query_fusion = query_fusion,
    .launch_ew_program = NULL,
};

static const bp_plugin_vtable_t k_vtable = {
    .struct_size = sizeof(bp_plugin_vtable_t),
    .core = &k_core,
    .ops = &k_ops,
    .caps = &k_caps,
    .exec = NULL,
    .comm = NULL, /* the core stages collectives through host memory */
};

BP_PLUGIN_EXPORT bp_status_t bp_plugin_negotiate(const bp_negotiate_request_t* request,
                                                 bp_negotiate_reply_t* reply) {
  if (!request || !reply || request->struct_size < BP_NEGOTIATE_REQUEST_V1_SIZE ||
      reply->struct_size < BP_NEGOTIATE_REPLY_V1_SIZE)
    return BP_INVALID_ARGUMENT; /* no host services to report through yet */
  g_host = request->host;
  if (request->abi_major != BP_ABI_VERSION_MAJOR)
    return fail(BP_FAILED_PRECONDITION, "template plugin speaks ABI %d.x, host offered %u.%u",
                BP_ABI_VERSION_MAJOR, request->abi_major, request->abi_minor);
  reply->abi_major = BP_ABI_VERSION_MAJOR;
  static const uint16_t k_my_minor = BP_ABI_VERSION_MINOR;
  reply->abi_minor = request->abi_minor < k_my_minor ? request->abi_minor : k_my_minor;
  reply->name = TEMPLATE_NAME;
  reply->version = "1.0.0";
  reply->vendor = "backplane";
  reply->vtable = &k_vtable;
  return BP_OK;
}
