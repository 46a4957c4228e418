/* backplane OpenCL plugin: loading, devices, properties, the tables.
 *
 * instance_create dlopens the ICD loader (BP_OPENCL_LIBRARY, else
 * libOpenCL.so.1, libOpenCL.so), resolves the entry points of
 * ocl_symbols.h and makes every device of every platform a backplane
 * device (ocl_discover.c: enumerated in a child process; the runtime
 * starts in this process on first use). Without the loader, or with no
 * platform or device, it answers UNAVAILABLE with the reason.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ocl_internal.h"


static const bp_kit_symbol_t k_symbols[] = {
#define BP_KIT_SYMBOL_TABLE ocl_symbols_t
    OPENCL_SYMBOLS(BP_KIT_SYMBOL_REQUIRED, BP_KIT_SYMBOL_OPTIONAL)
#undef BP_KIT_SYMBOL_TABLE
};

const char* ocl_error_name(cl_int err) {
  switch (err) {
#define E(x) case x: return #x;
    E(CL_DEVICE_NOT_FOUND) E(CL_DEVICE_NOT_AVAILABLE) E(CL_COMPILER_NOT_AVAILABLE)
    E(CL_MEM_OBJECT_ALLOCATION_FAILURE) E(CL_OUT_OF_RESOURCES) E(CL_OUT_OF_HOST_MEMORY)
    E(CL_PROFILING_INFO_NOT_AVAILABLE) E(CL_MEM_COPY_OVERLAP) E(CL_BUILD_PROGRAM_FAILURE)
    E(CL_MAP_FAILURE) E(CL_EXEC_STATUS_ERROR_FOR_EVENTS_IN_WAIT_LIST) E(CL_INVALID_VALUE)
    E(CL_INVALID_DEVICE) E(CL_INVALID_CONTEXT) E(CL_INVALID_COMMAND_QUEUE) E(CL_INVALID_MEM_OBJECT)
    E(CL_INVALID_BINARY) E(CL_INVALID_BUILD_OPTIONS) E(CL_INVALID_PROGRAM) E(CL_INVALID_KERNEL_NAME)
    E(CL_INVALID_KERNEL) E(CL_INVALID_ARG_INDEX) E(CL_INVALID_ARG_VALUE) E(CL_INVALID_ARG_SIZE)
    E(CL_INVALID_KERNEL_ARGS) E(CL_INVALID_WORK_DIMENSION) E(CL_INVALID_WORK_GROUP_SIZE)
    E(CL_INVALID_WORK_ITEM_SIZE) E(CL_INVALID_GLOBAL_OFFSET) E(CL_INVALID_EVENT_WAIT_LIST)
    E(CL_INVALID_EVENT) E(CL_INVALID_OPERATION) E(CL_INVALID_BUFFER_SIZE) E(CL_INVALID_GLOBAL_WORK_SIZE)
    E(CL_INVALID_PLATFORM)
#undef E
    default: return "CL_ERROR";
  }
}

bp_status_t ocl_fail(const char* what, cl_int err) {
  bp_status_t st = err == CL_MEM_OBJECT_ALLOCATION_FAILURE || err == CL_OUT_OF_RESOURCES ||
                           err == CL_OUT_OF_HOST_MEMORY || err == CL_INVALID_BUFFER_SIZE
                       ? BP_RESOURCE_EXHAUSTED
                       : BP_INTERNAL;
  return BP_KIT_ERROR(st, "%s failed: %s (%d)", what, ocl_error_name(err), (int)err);
}

/* "key=value;..." options: budget_mb=N lowers every device's budget. */
static uint64_t option_budget(const bpp_instance_create_info_t* info) {
  const char* o = info && info->struct_size >= BPP_INSTANCE_CREATE_INFO_V1_SIZE ? info->options : NULL;
  const char* p = o ? strstr(o, "budget_mb=") : NULL;
  if (!p) return 0;
  unsigned long long mb = strtoull(p + 10, NULL, 10);
  return (uint64_t)mb << 20;
}

void ocl_device_free(struct bpp_device_s* d) {
  if (!d) return;
  ocl_kernels_release(d);
  ocl_ewgen_release(d);
  ocl_heaps_destroy(d);
  if (d->aux_queue) d->cl->clReleaseCommandQueue(d->aux_queue);
  pthread_mutex_destroy(&d->aux_mu);
  free(d);
}

static bp_status_t instance_create(const bpp_instance_create_info_t* info, bpp_instance_t* out) {
  if (!out) return BP_KIT_ERROR(BP_INVALID_ARGUMENT, "instance_create: NULL out");
  *out = NULL;
  struct bpp_instance_s* inst = calloc(1, sizeof *inst);
  if (!inst) return BP_KIT_ERROR(BP_RESOURCE_EXHAUSTED, "out of host memory");
  pthread_mutex_init(&inst->mu, NULL);
  inst->budget_override = option_budget(info);
  const char* env = getenv("BP_OPENCL_LIBRARY");
  const char* names[2] = {"libOpenCL.so.1", "libOpenCL.so"};
  if (env && env[0]) names[0] = env;
  char msg[512];
  bp_status_t st = bp_kit_library_open(names, env && env[0] ? 1 : 2, &inst->lib, msg, sizeof msg);
  if (!st) st = bp_kit_symbols_load(&inst->cl, k_symbols, BP_KIT_COUNT(k_symbols), bp_kit_dlsym, inst->lib,
                                    names[0], msg, sizeof msg);
  if (!st) st = ocl_discover(inst, msg, sizeof msg);
  if (st) {
    if (inst->lib) bp_kit_library_close(inst->lib);
    pthread_mutex_destroy(&inst->mu);
    free(inst);
    return BP_KIT_ERROR(BP_UNAVAILABLE, "%s", msg);
  }
  *out = inst;
  return BP_OK;
}

static void instance_destroy(bpp_instance_t inst) {
  if (!inst) return;
  for (uint32_t k = 0; k < inst->ndevices; k++) ocl_device_free(inst->devices[k]);
  for (uint32_t c = 0; c < inst->ncontexts; c++) inst->cl.clReleaseContext(inst->contexts[c]);
  /* The ICD loader stays loaded once OpenCL ran in this process: drivers
   * keep threads (PoCL's workers) that would run unmapped code after an
   * unload. An instance that never started OpenCL closes it. */
  if (!inst->runtime_started && !inst->runtime_ready) bp_kit_library_close(inst->lib);
  pthread_mutex_destroy(&inst->mu);
  free(inst);
}

static bp_status_t device_count(bpp_instance_t inst, uint32_t* out) {
  if (!inst || !out) return BP_KIT_ERROR(BP_INVALID_ARGUMENT, "device_count: NULL argument");
  *out = inst->ndevices;
  return BP_OK;
}

static bp_status_t device_open(bpp_instance_t inst, uint32_t index, bpp_device_t* out) {
  if (!inst || !out) return BP_KIT_ERROR(BP_INVALID_ARGUMENT, "device_open: NULL argument");
  if (index >= inst->ndevices)
    return BP_KIT_ERROR(BP_OUT_OF_RANGE, "device_open: index %u of %u devices", index, inst->ndevices);
  *out = inst->devices[index];
  return BP_OK;
}

/* Devices live as long as the instance. */
static void device_close(bpp_device_t d) { (void)d; }

static bp_status_t device_get_properties(bpp_device_t d, bp_device_properties_t* props) {
  if (!d || !props || props->struct_size < sizeof(uint32_t))
    return BP_KIT_ERROR(BP_INVALID_ARGUMENT, "device_get_properties: bad argument");
  bp_kit_copy_out(props, &d->props, sizeof d->props);
  return BP_OK;
}

/* Space 0: device memory (host visible where the device shares memory
 * with the host); space 1: pinned host memory (CL_MEM_ALLOC_HOST_PTR). */
static bp_status_t device_memory_spaces(bpp_device_t d, uint32_t capacity, uint32_t elem_size,
                                        bp_memory_space_info_t* out, uint32_t* out_count) {
  if (!d || !out_count || (capacity && (!out || elem_size < BP_MEMORY_SPACE_INFO_V1_SIZE)))
    return BP_KIT_ERROR(BP_INVALID_ARGUMENT, "device_memory_spaces: bad argument");
  *out_count = 2;
  bp_memory_space_info_t s0 = {.struct_size = sizeof s0,
                               .kind = BP_MEMORY_DEVICE,
                               .flags = BP_MEMORY_FLAG_DEVICE_LOCAL |
                                        (d->host_unified ? BP_MEMORY_FLAG_HOST_VISIBLE | BP_MEMORY_FLAG_HOST_COHERENT : 0),
                               .capacity_bytes = d->budget,
                               .alignment_bytes = 128};
  bp_memory_space_info_t s1 = {.struct_size = sizeof s1,
                               .kind = BP_MEMORY_HOST_PINNED,
                               .flags = BP_MEMORY_FLAG_HOST_VISIBLE | BP_MEMORY_FLAG_HOST_COHERENT,
                               .capacity_bytes = d->budget,
                               .alignment_bytes = 128};
  if (capacity > 0) bp_kit_put_entry(out, elem_size, 0, &s0, sizeof s0);
  if (capacity > 1) bp_kit_put_entry(out, elem_size, 1, &s1, sizeof s1);
  return BP_OK;
}

static bp_status_t device_memory_usage(bpp_device_t d, uint32_t space, uint64_t* out_used, uint64_t* out_budget) {
  if (!d || !out_used || !out_budget) return BP_KIT_ERROR(BP_INVALID_ARGUMENT, "device_memory_usage: NULL argument");
  if (space > 1) return BP_KIT_ERROR(BP_INVALID_ARGUMENT, "device_memory_usage: no memory space %u", space);
  *out_used = __atomic_load_n(&d->used, __ATOMIC_RELAXED);
  *out_budget = d->budget;
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
    .buffer_allocate = ocl_buffer_allocate,
    .buffer_release = ocl_buffer_release,
    .buffer_map = ocl_buffer_map,
    .buffer_unmap = ocl_buffer_unmap,
    .copy_host_to_device = ocl_copy_h2d,
    .copy_device_to_host = ocl_copy_d2h,
    .copy_device_to_device = ocl_copy_d2d,
    .buffer_fill = ocl_buffer_fill,
    .stream_create = ocl_stream_create,
    .stream_destroy = ocl_stream_destroy,
    .stream_synchronize = ocl_stream_synchronize,
    .stream_query = ocl_stream_query,
    .stream_enqueue_host_func = ocl_stream_enqueue_host_func,
    .event_create = ocl_event_create,
    .event_destroy = ocl_event_destroy,
    .event_record = ocl_event_record,
    .stream_wait_event = ocl_stream_wait_event,
    .event_query = ocl_event_query,
    .event_synchronize = ocl_event_synchronize,
    .event_elapsed_ns = ocl_event_elapsed_ns,
};

static bpp_op_launch_fn k_launch[BP_OP_COUNT];
static const bpp_op_table_t k_ops = {
    .struct_size = sizeof(bpp_op_table_t), .launch_count = BP_OP_COUNT, .launch = k_launch};

static const bpp_caps_table_t k_caps = {
    .struct_size = sizeof(bpp_caps_table_t),
    .query_support = ocl_query_support,
    .query_fusion = ocl_query_fusion,
    .launch_ew_program = ocl_launch_ew_program,
};

static const bp_plugin_vtable_t k_vtable = {
    .struct_size = sizeof(bp_plugin_vtable_t), .core = &k_core, .ops = &k_ops, .caps = &k_caps};

static pthread_once_t k_once = PTHREAD_ONCE_INIT;
static void fill_launch(void) {
  for (uint32_t op = 1; op < BP_OP_COUNT; op++)
    if (bp_gpu_op_implemented(op)) k_launch[op] = ocl_launch_op;
}

const bp_plugin_vtable_t* ocl_vtable(void) {
  pthread_once(&k_once, fill_launch);
  return &k_vtable;
}
