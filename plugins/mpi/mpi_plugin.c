/* The MPI plugin: collectives across processes through Open MPI.
 *
 * libmpi is opened with dlopen (mpi_lib.h: Open MPI's ABI, no mpi.h at
 * build time). Without it the plugin loads and its instance answers
 * UNAVAILABLE with the library names and dlerror text. MPI itself is
 * initialised at the first comm_create (MPI_Init_thread with
 * MPI_THREAD_MULTIPLE), only when the application has not initialised it,
 * and finalized at the last instance's destroy only when this plugin
 * initialised it: loading the plugin costs a dlopen, not an MPI start.
 *
 * One device, mpi:0: this process's host endpoint. It runs no ops (no op
 * table; query_support says no); it has host-memory buffers and kit
 * streams (bp_kit_host.h, bp_kit_stream.h), so collectives can be
 * stream-ordered on its own streams. The comm table is mpi_comm.c.
 *
 * Thread safety: the memory counter is atomic; everything else is
 * immutable or documented where it lives.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bp_kit.h"
#include "bp_kit_host.h"
#include "bp_kit_stream.h"
#include "mpi_internal.h"

#define MPI_DEV_ALIGN 64u

struct bpp_instance_s {
  int unused;
};
struct bpp_device_s {
  bp_kit_host_budget_t memory;
};

static struct bpp_device_s g_device = {{.limit = UINT64_MAX}};

int bp_mpi_is_our_buffer(bpp_buffer_t buffer) { return buffer && buffer->device == &g_device; }

static bp_status_t instance_create(const bpp_instance_create_info_t* info, bpp_instance_t* out) {
  (void)info;
  if (!out) return bp_kit_error(BP_INVALID_ARGUMENT, "mpi: instance_create: NULL out");
  *out = NULL;
  bp_status_t st = bp_mpi_lib_acquire();
  if (st != BP_OK) return st;
  *out = calloc(1, sizeof **out);
  if (*out) return BP_OK;
  bp_mpi_lib_release();
  return bp_kit_error(BP_RESOURCE_EXHAUSTED, "mpi: out of host memory");
}

static void instance_destroy(bpp_instance_t instance) {
  if (!instance) return;
  free(instance);
  bp_mpi_lib_release();
}

static bp_status_t device_count(bpp_instance_t instance, uint32_t* out_count) {
  if (!out_count) return bp_kit_error(BP_INVALID_ARGUMENT, "mpi: device_count: NULL out");
  *out_count = 1;
  return BP_OK;
}

static bp_status_t device_open(bpp_instance_t instance, uint32_t index, bpp_device_t* out) {
  if (!out || index != 0)
    return bp_kit_error(BP_OUT_OF_RANGE, "mpi: device_open: index %u of 1 device", index);
  *out = &g_device;
  return BP_OK;
}

static void device_close(bpp_device_t device) { (void)device; }

static bp_status_t device_get_properties(bpp_device_t device, bp_device_properties_t* props) {
  if (!props || props->struct_size < sizeof(uint32_t))
    return bp_kit_error(BP_INVALID_ARGUMENT, "mpi: device_get_properties: no struct_size");
  bp_device_properties_t p = {
      .struct_size = sizeof p,
      .kind = BP_DEVICE_KIND_CPU,
      .memory_bytes = 0,
      .compute_units = 0,
      .subgroup_size = 1,
      .flags = BP_DEVICE_FLAG_UNIFIED_MEMORY | BP_DEVICE_FLAG_TIMESTAMPS,
  };
  snprintf(p.name, sizeof p.name, "MPI endpoint of this process (collectives only)");
  snprintf(p.vendor, sizeof p.vendor, "Open MPI");
  char version[256] = "";
  int len = 0;
  if (bp_mpi.f.MPI_Get_library_version && bp_mpi.f.MPI_Get_library_version(version, &len) == 0) {
    version[sizeof version - 1] = 0;
    version[strcspn(version, ",\n")] = 0;
  }
  snprintf(p.driver_version, sizeof p.driver_version, "%.63s", version[0] ? version : bp_mpi.path);
  bp_kit_copy_out(props, &p, sizeof p);
  return BP_OK;
}

static bp_status_t device_memory_spaces(bpp_device_t device, uint32_t capacity, uint32_t elem_size,
                                        bp_memory_space_info_t* out, uint32_t* out_count) {
  if (!out_count || (capacity && (!out || elem_size < BP_MEMORY_SPACE_INFO_V1_SIZE)))
    return bp_kit_error(BP_INVALID_ARGUMENT, "mpi: device_memory_spaces: bad argument");
  *out_count = 1;
  bp_memory_space_info_t info = {
      .struct_size = sizeof info,
      .kind = BP_MEMORY_DEVICE,
      .flags = BP_MEMORY_FLAG_HOST_VISIBLE | BP_MEMORY_FLAG_HOST_COHERENT |
               BP_MEMORY_FLAG_DEVICE_LOCAL,
      .capacity_bytes = 0,
      .alignment_bytes = MPI_DEV_ALIGN};
  if (capacity) bp_kit_put_entry(out, elem_size, 0, &info, sizeof info);
  return BP_OK;
}

static bp_status_t device_memory_usage(bpp_device_t device, uint32_t space, uint64_t* out_used,
                                       uint64_t* out_budget) {
  if (!device || !out_used || !out_budget || space != 0)
    return bp_kit_error(BP_INVALID_ARGUMENT, "mpi: device_memory_usage: bad argument");
  *out_used = __atomic_load_n(&device->memory.used, __ATOMIC_RELAXED);
  *out_budget = 0; /* unknown: host memory */
  return BP_OK;
}

static bp_status_t buffer_allocate(bpp_device_t device, const bp_buffer_alloc_info_t* info,
                                   bpp_buffer_t* out) {
  if (info && info->memory_space != 0)
    return bp_kit_error(BP_INVALID_ARGUMENT, "mpi: buffer_allocate: no memory space %u",
                        info->memory_space);
  return bp_kit_host_buffer_allocate(device, info, MPI_DEV_ALIGN, &device->memory, out);
}

/* The device runs no ops: a stream carries copies, fills, host functions
 * and collectives only. */
static bp_status_t exec(bpp_device_t device, const bp_op_call_t* call) {
  return bp_kit_error(BP_UNIMPLEMENTED, "mpi: the mpi device runs collectives only");
}
static const bp_kit_queue_t k_queue = {.exec = exec};

static bp_status_t stream_create(bpp_device_t device, const bp_stream_create_info_t* info,
                                 bpp_stream_t* out) {
  return bp_kit_stream_create(&k_queue, device, info, out);
}

static bp_status_t query_support(bpp_device_t device, const bp_op_call_t* call, bp_support_t* out) {
  if (!call || !out) return bp_kit_error(BP_INVALID_ARGUMENT, "mpi: query_support: NULL");
  return bp_kit_support_answer(out, BP_SUPPORT_OP,
                               "the mpi device runs collectives only (comm table), no ops");
}

static bp_status_t query_fusion(bpp_device_t device, bp_fusion_caps_t* out) {
  if (!out) return bp_kit_error(BP_INVALID_ARGUMENT, "mpi: query_fusion: out is NULL");
  bp_fusion_caps_t none = {.struct_size = sizeof none};
  bp_kit_copy_out(out, &none, sizeof none);
  return BP_OK;
}

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
    BP_KIT_HOST_MEMORY_SLOTS,
    .stream_create = stream_create,
    BP_KIT_STREAM_SLOTS,
};

static const bpp_caps_table_t k_caps = {
    .struct_size = sizeof k_caps, .query_support = query_support, .query_fusion = query_fusion};
static const bp_plugin_vtable_t k_vtable = {.struct_size = sizeof k_vtable,
                                            .core = &k_core,
                                            .caps = &k_caps,
                                            .comm = &bp_mpi_comm_table};

const bp_plugin_vtable_t* bp_mpi_plugin_vtable(void) { return &k_vtable; }
