/* A small self-contained plugin built three times, against the frozen 1.0
 * headers (tests/abi/v1_0), the 1.1-shaped ones (tests/abi/v1_1: every
 * struct and table grown) and the current ones, to prove that a host runs
 * each the same way. Host memory, synchronous streams; ops add and cat on
 * dense f32 (the core packs other layouts: requires_contiguous). It uses no
 * helper library on purpose: only the headers it is built against. */
#include <stdlib.h>
#include <string.h>

#include "backplane/plugin.h"

static const bp_host_services_t* g_host;

static bp_status_t fail(bp_status_t st, const char* msg) {
  if (g_host && g_host->report) g_host->report(g_host->host_ctx, st, msg);
  return st;
}

/* Writes min(capacity, size) bytes of `src` into a caller-sized struct. */
static void put(void* dst, uint32_t capacity, const void* src, uint32_t size) {
  uint32_t n = capacity < size ? capacity : size;
  memcpy(dst, src, n);
  memcpy(dst, &n, sizeof n);
}

struct bpp_instance_s { int unused; };
struct bpp_device_s { int unused; };
struct bpp_buffer_s { unsigned char* data; uint64_t size; };
struct bpp_stream_s { bp_status_t sticky; };
struct bpp_event_s { int recorded; };
static struct bpp_instance_s g_instance;
static struct bpp_device_s g_device;

static bp_status_t instance_create(const bpp_instance_create_info_t* info, bpp_instance_t* out) {
  (void)info;
  *out = &g_instance;
  return BP_OK;
}
static void instance_destroy(bpp_instance_t inst) { (void)inst; }
static bp_status_t device_count(bpp_instance_t inst, uint32_t* out) {
  (void)inst;
  *out = 1;
  return BP_OK;
}
static bp_status_t device_open(bpp_instance_t inst, uint32_t index, bpp_device_t* out) {
  (void)inst;
  if (index != 0) return fail(BP_OUT_OF_RANGE, "abi_plugin: one device");
  *out = &g_device;
  return BP_OK;
}
static void device_close(bpp_device_t dev) { (void)dev; }
static bp_status_t device_get_properties(bpp_device_t dev, bp_device_properties_t* props) {
  (void)dev;
  bp_device_properties_t p;
  memset(&p, 0, sizeof p);
  p.struct_size = sizeof p;
  p.kind = BP_DEVICE_KIND_VIRTUAL;
  strcpy(p.name, "abi test device");
  p.memory_bytes = 1u << 30;
  p.compute_units = 1;
  p.subgroup_size = 1;
  p.dtype_mask = BP_DTYPE_BIT(BP_DTYPE_F32);
  p.peak_ops_per_s[BP_DTYPE_F32] = 1e9;
#ifdef ABI_PLUGIN_GROWN /* the grown test headers (v1_1/) */
  p.grown_1_1 = 7; /* written only when the caller's struct has room */
#endif
  put(props, props->struct_size, &p, sizeof p);
  return BP_OK;
}
/* Two spaces, so that entry 1 shows where the caller's stride puts it. */
static bp_status_t device_memory_spaces(bpp_device_t dev, uint32_t capacity, uint32_t element_size,
                                        bp_memory_space_info_t* out, uint32_t* out_count) {
  (void)dev;
  static const uint32_t kinds[2] = {BP_MEMORY_DEVICE, BP_MEMORY_HOST_PINNED};
  *out_count = 2;
  for (uint32_t i = 0; i < 2 && i < capacity; ++i) {
    bp_memory_space_info_t s;
    memset(&s, 0, sizeof s);
    s.struct_size = sizeof s;
    s.kind = kinds[i];
    s.flags = BP_MEMORY_FLAG_HOST_VISIBLE | BP_MEMORY_FLAG_HOST_COHERENT;
    s.capacity_bytes = 1u << 30;
    s.alignment_bytes = 16;
    put((char*)out + (size_t)i * element_size, element_size, &s, sizeof s);
  }
  return BP_OK;
}
static bp_status_t buffer_allocate(bpp_device_t dev, const bp_buffer_alloc_info_t* info,
                                   bpp_buffer_t* out) {
  (void)dev;
  if (info->memory_space > 1) return fail(BP_INVALID_ARGUMENT, "abi_plugin: no such space");
  bpp_buffer_t b = calloc(1, sizeof *b);
  if (b) b->data = calloc(1, info->size_bytes);
  if (!b || !b->data) {
    free(b);
    return fail(BP_RESOURCE_EXHAUSTED, "abi_plugin: out of memory");
  }
  b->size = info->size_bytes;
  *out = b;
  return BP_OK;
}
static void buffer_release(bpp_buffer_t b) {
  if (b) free(b->data);
  free(b);
}
static bp_status_t buffer_map(bpp_buffer_t b, uint64_t off, uint64_t size, void** out) {
  if (off > b->size || size > b->size - off) return fail(BP_OUT_OF_RANGE, "abi_plugin: map range");
  *out = b->data + off;
  return BP_OK;
}
static bp_status_t buffer_unmap(bpp_buffer_t b) {
  (void)b;
  return BP_OK;
}
static bp_status_t h2d(bpp_stream_t s, const void* src, bpp_buffer_t dst, uint64_t off, uint64_t n) {
  (void)s;
  memcpy(dst->data + off, src, n);
  return BP_OK;
}
static bp_status_t d2h(bpp_stream_t s, bpp_buffer_t src, uint64_t off, void* dst, uint64_t n) {
  (void)s;
  memcpy(dst, src->data + off, n);
  return BP_OK;
}
static bp_status_t d2d(bpp_stream_t s, bpp_buffer_t src, uint64_t so, bpp_buffer_t dst, uint64_t o,
                       uint64_t n) {
  (void)s;
  memmove(dst->data + o, src->data + so, n);
  return BP_OK;
}
static bp_status_t stream_create(bpp_device_t dev, const bp_stream_create_info_t* info,
                                 bpp_stream_t* out) {
  (void)dev;
  if (!info || info->struct_size < BP_STREAM_CREATE_INFO_V1_SIZE)
    return fail(BP_INVALID_ARGUMENT, "abi_plugin: stream create info too small");
  *out = calloc(1, sizeof **out);
  return *out ? BP_OK : fail(BP_RESOURCE_EXHAUSTED, "abi_plugin: out of memory");
}
static void stream_destroy(bpp_stream_t s) { free(s); }
static bp_status_t stream_sync(bpp_stream_t s) {
  bp_status_t st = s->sticky;
  s->sticky = BP_OK;
  return st ? fail(st, "abi_plugin: earlier work failed") : BP_OK;
}
static bp_status_t host_func(bpp_stream_t s, bp_host_func_t fn, void* user) {
  bp_status_t st = fn(user);
  if (st != BP_OK && s->sticky == BP_OK) s->sticky = st;
  return BP_OK;
}

/* ---- ops ------------------------------------------------------------------ */
static float* f32(const bp_tensor_desc_t* d) { return (float*)(void*)(d->buffer->data + d->byte_offset); }
static int64_t numel(const bp_tensor_desc_t* d) {
  int64_t n = 1;
  for (uint32_t i = 0; i < d->rank; ++i) n *= d->sizes[i];
  return n;
}
static bp_status_t launch_add(bpp_stream_t s, const bp_op_call_t* call) {
  (void)s;
  const bp_tensor_desc_t *a = call->inputs[0], *b = call->inputs[1], *o = call->outputs[0];
  const bp_binary_attrs_t* at = call->attrs;
  double alpha = at && at->alpha.kind == BP_SCALAR_FLOAT ? at->alpha.v.f : 1.0;
  for (int64_t i = 0; i < numel(o); ++i) f32(o)[i] = f32(a)[i] + (float)alpha * f32(b)[i];
  return BP_OK;
}
/* cat along dim 0: the list is inputs[list_begin .. + list_count). */
static bp_status_t launch_cat(bpp_stream_t s, const bp_op_call_t* call) {
  (void)s;
  float* dst = f32(call->outputs[0]);
  for (uint32_t i = call->list_begin; i < call->list_begin + call->list_count; ++i) {
    const bp_tensor_desc_t* t = call->inputs[i];
    memcpy(dst, f32(t), sizeof(float) * (size_t)numel(t));
    dst += numel(t);
  }
  return BP_OK;
}
static bp_status_t query_support(bpp_device_t dev, const bp_op_call_t* call, bp_support_t* out) {
  (void)dev;
  bp_support_t a;
  memset(&a, 0, sizeof a);
  a.struct_size = sizeof a;
  a.requires_contiguous = 1;
  a.supported = call->op_id == BP_OP_add || call->op_id == BP_OP_cat;
  a.reason = a.supported ? BP_SUPPORT_OK : BP_SUPPORT_OP;
  for (uint32_t i = 0; a.supported && i < call->num_inputs + call->num_outputs; ++i) {
    const bp_tensor_desc_t* d = i < call->num_inputs ? call->inputs[i] : call->outputs[i - call->num_inputs];
    if (d->dtype != BP_DTYPE_F32) {
      a.supported = 0;
      a.reason = BP_SUPPORT_DTYPE;
    }
  }
  if (call->op_id == BP_OP_cat && a.supported && ((const bp_dim_attrs_t*)call->attrs)->dim != 0)
  {
    a.supported = 0;
    a.reason = BP_SUPPORT_ATTRIBUTE;
  }
  put(out, out->struct_size, &a, sizeof a);
  return BP_OK;
}
static const bp_fused_pattern_t k_patterns[2] = {
    {.struct_size = sizeof(bp_fused_pattern_t), .op_id = BP_OP_addcmul,
     .dtype_mask = BP_DTYPE_BIT(BP_DTYPE_F32)},
    {.struct_size = sizeof(bp_fused_pattern_t), .op_id = BP_OP_lerp,
     .dtype_mask = BP_DTYPE_BIT(BP_DTYPE_F32) | BP_DTYPE_BIT(BP_DTYPE_F16)}};
static uint64_t k_opcodes[(BP_OP_COUNT + 63) / 64];
static bp_status_t query_fusion(bpp_device_t dev, bp_fusion_caps_t* out) {
  (void)dev;
  bp_fusion_caps_t c;
  memset(&c, 0, sizeof c);
  memset(k_opcodes, 0, sizeof k_opcodes);
  k_opcodes[BP_OP_add / 64] |= UINT64_C(1) << (BP_OP_add % 64);
  c.struct_size = sizeof c;
  c.ew_opcode_words = (uint32_t)(sizeof k_opcodes / sizeof k_opcodes[0]);
  c.ew_opcode_mask = k_opcodes;
  c.num_patterns = 2;
  c.pattern_stride = sizeof(bp_fused_pattern_t);
  c.patterns = k_patterns;
  put(out, out->struct_size, &c, sizeof c);
  return BP_OK;
}

static const bpp_core_table_t k_core = {
    .struct_size = sizeof(bpp_core_table_t), .instance_create = instance_create,
    .instance_destroy = instance_destroy, .device_count = device_count, .device_open = device_open,
    .device_close = device_close, .device_get_properties = device_get_properties,
    .device_memory_spaces = device_memory_spaces, .buffer_allocate = buffer_allocate,
    .buffer_release = buffer_release, .buffer_map = buffer_map, .buffer_unmap = buffer_unmap,
    .copy_host_to_device = h2d, .copy_device_to_host = d2h, .copy_device_to_device = d2d,
    .stream_create = stream_create, .stream_destroy = stream_destroy,
    .stream_synchronize = stream_sync, .stream_query = stream_sync,
    .stream_enqueue_host_func = host_func};
static bpp_op_launch_fn k_launch[BP_OP_COUNT];
static const bpp_op_table_t k_ops = {
    .struct_size = sizeof(bpp_op_table_t), .launch_count = BP_OP_COUNT, .launch = k_launch};
static const bpp_caps_table_t k_caps = {.struct_size = sizeof(bpp_caps_table_t),
                                        .query_support = query_support,
                                        .query_fusion = query_fusion};
static const bp_plugin_vtable_t k_vtable = {.struct_size = sizeof(bp_plugin_vtable_t),
                                            .core = &k_core, .ops = &k_ops, .caps = &k_caps};

BP_PLUGIN_EXPORT bp_status_t bp_plugin_negotiate(const bp_negotiate_request_t* req,
                                                 bp_negotiate_reply_t* reply) {
  if (!req || req->struct_size < BP_NEGOTIATE_REQUEST_V1_SIZE || !reply) return BP_INVALID_ARGUMENT;
  g_host = req->host && req->host->struct_size >= BP_HOST_SERVICES_V1_SIZE ? req->host : NULL;
  if (req->abi_major != BP_ABI_VERSION_MAJOR) return fail(BP_FAILED_PRECONDITION, "abi_plugin: major");
  k_launch[BP_OP_add] = launch_add;
  k_launch[BP_OP_cat] = launch_cat;
  bp_negotiate_reply_t r;
  memset(&r, 0, sizeof r);
  r.struct_size = sizeof r;
  r.abi_major = BP_ABI_VERSION_MAJOR;
  uint16_t mine = BP_ABI_VERSION_MINOR; /* the header's: 0 or 1 */
  r.abi_minor = req->abi_minor < mine ? req->abi_minor : mine;
  r.name = ABI_PLUGIN_NAME;
  r.version = "1";
  r.vendor = "backplane tests";
  r.vtable = &k_vtable;
  put(reply, reply->struct_size, &r, sizeof r);
  return BP_OK;
}
