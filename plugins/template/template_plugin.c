/* The template plugin: the smallest complete backplane backend.
 *
 * Copy this folder to start a new backend: it builds in the backplane tree
 * and on its own against an installed backplane (docs/PLUGIN_GUIDE.md). It
 * keeps every rule of docs/ABI.md on a device made of host memory; the
 * plugin kit (bp_kit.h) does what every plugin shares: the one exported
 * symbol (BP_KIT_PLUGIN_ENTRY), errors through the host (bp_kit_error),
 * in-order stream queues with a worker thread, host functions, events and
 * sticky errors (BP_KIT_STREAM_SLOTS: a launch copies the call and
 * returns), host buffers (BP_KIT_HOST_MEMORY_SLOTS), op metadata from
 * ops.def, debug-build call checks and support answers.
 * Two ops, add and relu on f32 (any strides, broadcasting), with an honest
 * query_support: everything else answers "not supported", which the
 * conformance suite scores NOT_SUPPORTED.
 * Thread safety: the memory counter is updated atomically; streams are
 * externally synchronized by the ABI; everything else is immutable.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bp_kit.h"
#include "bp_kit_host.h" /* struct bpp_buffer_s: host memory */

#define TEMPLATE_ALIGN 64u
#define TEMPLATE_CAPACITY (UINT64_C(1) << 30) /* a pretend 1 GiB device */

struct bpp_instance_s {
  int unused;
};
struct bpp_device_s {
  bp_kit_host_budget_t memory; /* every buffer reserves its bytes here */
};

static struct bpp_device_s g_device = {{.limit = TEMPLATE_CAPACITY}};

/* ---- instance and device ----------------------------------------------- */
static bp_status_t instance_create(const bpp_instance_create_info_t* info, bpp_instance_t* out) {
  if (!out) return bp_kit_error(BP_INVALID_ARGUMENT, "template: instance_create: NULL out");
  /* A vendor backend opens its driver here (bp_kit_library_open, then
   * bp_kit_symbols_load) and returns BP_UNAVAILABLE with the reason. */
  *out = calloc(1, sizeof **out);
  return *out ? BP_OK : bp_kit_error(BP_RESOURCE_EXHAUSTED, "template: out of host memory");
}

static void instance_destroy(bpp_instance_t instance) { free(instance); }

static bp_status_t device_count(bpp_instance_t instance, uint32_t* out_count) {
  if (!out_count) return bp_kit_error(BP_INVALID_ARGUMENT, "template: device_count: NULL out");
  *out_count = 1;
  return BP_OK;
}

static bp_status_t device_open(bpp_instance_t instance, uint32_t index, bpp_device_t* out) {
  if (!out || index != 0)
    return bp_kit_error(BP_OUT_OF_RANGE, "template: device_open: index %u of 1 device", index);
  *out = &g_device;
  return BP_OK;
}

static void device_close(bpp_device_t device) {}

static bp_status_t device_get_properties(bpp_device_t device, bp_device_properties_t* props) {
  if (!props || props->struct_size < sizeof(uint32_t))
    return bp_kit_error(BP_INVALID_ARGUMENT, "template: device_get_properties: no struct_size");
  bp_device_properties_t p = {
      .struct_size = sizeof p,
      .kind = BP_DEVICE_KIND_VIRTUAL,
      .memory_bytes = TEMPLATE_CAPACITY,
      .compute_units = 1,
      .subgroup_size = 1,
      .dtype_mask = BP_DTYPE_BIT(BP_DTYPE_F32),
      .flags = BP_DEVICE_FLAG_UNIFIED_MEMORY | BP_DEVICE_FLAG_TIMESTAMPS |
               BP_DEVICE_FLAG_DENORMALS_PRESERVED | BP_DEVICE_FLAG_CORRECTLY_ROUNDED,
      .memory_bandwidth_bytes_per_s = 5e9,
      .launch_overhead_ns = 2000,
  };
  snprintf(p.name, sizeof p.name, "Template device (host memory)");
  snprintf(p.vendor, sizeof p.vendor, "backplane");
  snprintf(p.driver_version, sizeof p.driver_version, "1.0");
  p.peak_ops_per_s[BP_DTYPE_F32] = 1e9; /* one scalar core, roughly */
  bp_kit_copy_out(props, &p, sizeof p);
  return BP_OK;
}

static bp_status_t device_memory_spaces(bpp_device_t device, uint32_t capacity, uint32_t elem_size,
                                        bp_memory_space_info_t* out, uint32_t* out_count) {
  if (!out_count || (capacity && (!out || elem_size < BP_MEMORY_SPACE_INFO_V1_SIZE)))
    return bp_kit_error(BP_INVALID_ARGUMENT, "template: device_memory_spaces: bad argument");
  *out_count = 1;
  bp_memory_space_info_t info = {
      .struct_size = sizeof info,
      .kind = BP_MEMORY_DEVICE,
      .flags = BP_MEMORY_FLAG_HOST_VISIBLE | BP_MEMORY_FLAG_HOST_COHERENT |
               BP_MEMORY_FLAG_DEVICE_LOCAL,
      .capacity_bytes = TEMPLATE_CAPACITY,
      .alignment_bytes = TEMPLATE_ALIGN};
  if (capacity) bp_kit_put_entry(out, elem_size, 0, &info, sizeof info);
  return BP_OK;
}

static bp_status_t device_memory_usage(bpp_device_t device, uint32_t space, uint64_t* out_used,
                                       uint64_t* out_budget) {
  if (!out_used || !out_budget || space != 0)
    return bp_kit_error(BP_INVALID_ARGUMENT, "template: device_memory_usage: bad argument");
  *out_used = __atomic_load_n(&device->memory.used, __ATOMIC_RELAXED);
  *out_budget = TEMPLATE_CAPACITY;
  return BP_OK;
}

/* ---- buffers: host memory, copies on the stream (bp_kit_host.h) ------- */
static bp_status_t buffer_allocate(bpp_device_t device, const bp_buffer_alloc_info_t* info,
                                   bpp_buffer_t* out) {
  if (info && info->memory_space != 0)
    return bp_kit_error(BP_INVALID_ARGUMENT, "template: buffer_allocate: no memory space %u",
                        info->memory_space);
  return bp_kit_host_buffer_allocate(device, info, TEMPLATE_ALIGN, &device->memory, out);
}

/* ---- ops: add and relu on f32 -------------------------------------------- */
/* Support answer shared by query_support and launch. */
static uint32_t support_reason(const bp_op_call_t* call, const char** why) {
  *why = "only f32";
  if (call->op_id != BP_OP_add && call->op_id != BP_OP_relu) {
    *why = "the template backend implements add and relu only";
    return BP_SUPPORT_OP;
  }
  for (uint32_t i = 0; i < call->num_inputs; ++i)
    if (call->inputs[i]->dtype != BP_DTYPE_INVALID && call->inputs[i]->dtype != BP_DTYPE_F32)
      return BP_SUPPORT_DTYPE;
  if (call->num_outputs != 1 || call->outputs[0]->dtype != BP_DTYPE_F32 ||
      call->compute_dtype != BP_DTYPE_F32)
    return BP_SUPPORT_DTYPE;
  const bp_binary_attrs_t* a = call->attrs;
  *why = "a scalar self is not implemented";
  if (call->op_id == BP_OP_add && (!a || (a->flags & BP_BINARY_SELF_IS_SCALAR)))
    return BP_SUPPORT_ATTRIBUTE;
  return BP_SUPPORT_OK;
}

static float* at(const bp_tensor_desc_t* d, int64_t off) {
  return (float*)bp_kit_host_desc_ptr(d) + off;
}

/* Runs on the stream's worker thread, in stream order. */
static bp_status_t exec(bpp_device_t device, const bp_op_call_t* call) {
  const bp_tensor_desc_t *out = call->outputs[0], *a = call->inputs[0], *b = NULL;
  float alpha = 1.0f, other = 0.0f;
  if (call->op_id == BP_OP_add) {
    const bp_binary_attrs_t* attrs = call->attrs;
    if (call->inputs[1]->dtype != BP_DTYPE_INVALID) b = call->inputs[1];
    alpha = (float)bp_kit_scalar_f64(&attrs->alpha, 1.0);
    other = (float)bp_kit_scalar_f64(&attrs->scalar, 0.0);
  }
  int64_t n = bp_desc_numel(out);
  bp_nd_layout_t l;
  bp_kit_nd_layout_init(&l, 3, out);
  bp_kit_nd_layout_bind(&l, 1, out, a);
  if (b) bp_kit_nd_layout_bind(&l, 2, out, b);
  bp_nd_collapse(&l);
  bp_nd_cursor_t c;
  bp_nd_cursor_init(&c, &l, 0);
  int in = l.ndim - 1;
  for (int64_t done = 0, row; done < n; done += row) {
    row = bp_nd_row_left(&c, &l);
    for (int64_t i = 0; i < row; ++i) {
      float x = *at(a, c.off[1] + i * l.strides[1][in]), *y = at(out, c.off[0] + i * l.strides[0][in]);
      if (call->op_id == BP_OP_relu) *y = x > 0.0f || x != x ? x : 0.0f; /* NaN propagates */
      else *y = x + alpha * (b ? *at(b, c.off[2] + i * l.strides[2][in]) : other);
    }
    bp_nd_cursor_advance(&c, &l, row);
  }
  return BP_OK;
}

static const bp_kit_queue_t k_queue = {.exec = exec};

static bp_status_t stream_create(bpp_device_t device, const bp_stream_create_info_t* info,
                                 bpp_stream_t* out) {
  return bp_kit_stream_create(&k_queue, device, info, out);
}

static bp_status_t launch(bpp_stream_t s, const bp_op_call_t* call) {
  const char* why;
  /* The core validated the call; a checked build (BP_PLUGIN_CHECKS, or
   * without NDEBUG) walks it again. */
  BP_PLUGIN_DEBUG_CHECK(bp_kit_call_check(call, 2, bp_kit_host_buffer_size));
  if (support_reason(call, &why) != BP_SUPPORT_OK)
    return bp_kit_error(BP_UNIMPLEMENTED, "template: %s: %s", bp_kit_op_name(call->op_id), why);
  return bp_kit_stream_enqueue_op(s, call);
}

static bp_status_t query_support(bpp_device_t device, const bp_op_call_t* call, bp_support_t* out) {
  const char* why;
  if (!call || !out) return bp_kit_error(BP_INVALID_ARGUMENT, "template: query_support: NULL");
  uint32_t reason = support_reason(call, &why);
  return bp_kit_support_answer(out, reason, "%s", why);
}

static bp_status_t query_fusion(bpp_device_t device, bp_fusion_caps_t* out) {
  if (!out) return bp_kit_error(BP_INVALID_ARGUMENT, "template: query_fusion: out is NULL");
  bp_fusion_caps_t none = {.struct_size = sizeof none}; /* declares no fusion */
  bp_kit_copy_out(out, &none, sizeof none);
  return BP_OK;
}

/* ---- tables and the entry point ------------------------------------------ */
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
    BP_KIT_HOST_MEMORY_SLOTS, /* copy_peer stays NULL: one device, no peers */
    .stream_create = stream_create,
    BP_KIT_STREAM_SLOTS,
};

static const bpp_op_launch_fn k_launch[BP_OP_COUNT] = {[BP_OP_add] = launch, [BP_OP_relu] = launch};
static const bpp_op_table_t k_ops = {
    .struct_size = sizeof k_ops, .launch_count = BP_OP_COUNT, .launch = k_launch};
static const bpp_caps_table_t k_caps = {
    .struct_size = sizeof k_caps, .query_support = query_support, .query_fusion = query_fusion};
static const bp_plugin_vtable_t k_vtable = {
    .struct_size = sizeof k_vtable, .core = &k_core, .ops = &k_ops, .caps = &k_caps};

static const bp_plugin_vtable_t* get_vtable(void) { return &k_vtable; }
static const bp_kit_plugin_info_t k_info = {
    .name = "template", .version = "1.0.0", .vendor = "backplane", .get_vtable = get_vtable};

BP_KIT_PLUGIN_ENTRY(&k_info)
