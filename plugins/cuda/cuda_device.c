/* Instance (the driver library, cuInit) and devices (primary contexts,
 * properties). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuda_blas.h"
#include "cuda_event_pool.h"
#include "cuda_kernels.h"
#include "cuda_nvrtc.h"

void cuda_error_set_symbols(const cuda_symbols_t* cu);

static bp_status_t instance_create(const bpp_instance_create_info_t* info, bpp_instance_t* out) {
  (void)info;
  if (!out) return bp_kit_error(BP_INVALID_ARGUMENT, "cuda: instance_create: NULL out");
  bpp_instance_t inst = calloc(1, sizeof *inst);
  if (!inst) return bp_kit_error(BP_RESOURCE_EXHAUSTED, "cuda: out of host memory");
  char msg[512];
  bp_status_t st = cuda_symbols_load(&inst->cu, &inst->lib, msg, sizeof msg);
  if (st != BP_OK) {
    free(inst);
    return bp_kit_error(st, "cuda: %s", msg);
  }
  cuda_error_set_symbols(&inst->cu);
  CUresult r = inst->cu.cuInit(0);
  if (r == CUDA_SUCCESS) r = inst->cu.cuDriverGetVersion(&inst->driver_version);
  if (r == CUDA_SUCCESS) r = inst->cu.cuDeviceGetCount(&inst->device_count);
  if (r != CUDA_SUCCESS) {
    char text[200];
    cuda_error_text(&inst->cu, r, text, sizeof text);
    bp_kit_library_close(inst->lib);
    free(inst);
    return bp_kit_error(BP_UNAVAILABLE, "cuda: cuInit failed: %s", text);
  }
  if (inst->device_count <= 0) {
    bp_kit_library_close(inst->lib);
    free(inst);
    return bp_kit_error(BP_UNAVAILABLE, "cuda: the driver reports no CUDA device");
  }
  /* BP_CUDA_HOSTFN_WAIT_VALUE=0 forces the blocking callback (tests). */
  int wait_value = 1;
  bp_plugin_parse_flag(bp_kit_host(), "BP_CUDA_HOSTFN_WAIT_VALUE",
                       getenv("BP_CUDA_HOSTFN_WAIT_VALUE"), 1, &wait_value);
  inst->hostfn_wait_value = wait_value && inst->cu.cuStreamWaitValue32_v2;
  cuda_blas_open(inst);
  cuda_nvrtc_init(inst);
  bp_kit_log(BP_LOG_INFO, "cuda: driver %d.%d, %d device(s), host functions %s; %s",
             inst->driver_version / 1000, inst->driver_version % 1000 / 10, inst->device_count,
             inst->hostfn_wait_value ? "on a plugin thread (stream waits on a flag)"
                                     : "in a blocking driver callback",
             inst->blas ? "cuBLASLt loaded" : inst->blas_reason);
  *out = inst;
  return BP_OK;
}

static void instance_destroy(bpp_instance_t inst) {
  if (!inst) return;
  cuda_blas_close(inst);
  cuda_nvrtc_close(inst);
  cuda_error_set_symbols(NULL);
  bp_kit_library_close(inst->lib);
  free(inst);
}

static bp_status_t device_count(bpp_instance_t inst, uint32_t* out_count) {
  if (!inst || !out_count) return bp_kit_error(BP_INVALID_ARGUMENT, "cuda: device_count: NULL");
  *out_count = (uint32_t)inst->device_count;
  return BP_OK;
}

static int attr(bpp_device_t d, CUdevice_attribute a) {
  int v = 0;
  if (d->cu->cuDeviceGetAttribute(&v, a, d->dev) != CUDA_SUCCESS) v = 0;
  return v;
}

bp_status_t cuda_ctx_push(bpp_device_t dev) {
  CUresult r = dev->cu->cuCtxPushCurrent_v2(dev->ctx);
  return r == CUDA_SUCCESS ? BP_OK : cuda_fail(dev, r, "cuCtxPushCurrent");
}

void cuda_ctx_pop(bpp_device_t dev) {
  CUcontext popped = NULL;
  dev->cu->cuCtxPopCurrent_v2(&popped);
}

/* The pool: the device's default pool, keeping freed memory cached
 * (release threshold = all) so reallocations do not go to the driver. */
static void pool_open(bpp_device_t d) {
  const cuda_symbols_t* cu = d->cu;
  if (!cu->cuDeviceGetDefaultMemPool || !cu->cuMemPoolSetAttribute ||
      !cu->cuMemAllocFromPoolAsync || !cu->cuMemFreeAsync ||
      !attr(d, CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED) ||
      getenv("BP_CUDA_NO_POOLS"))
    return;
  cuuint64_t keep = UINT64_MAX;
  if (cu->cuDeviceGetDefaultMemPool(&d->pool, d->dev) != CUDA_SUCCESS ||
      cu->cuMemPoolSetAttribute(d->pool, CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, &keep) != CUDA_SUCCESS ||
      cu->cuStreamCreateWithPriority(&d->alloc_stream, CU_STREAM_NON_BLOCKING, 0) != CUDA_SUCCESS) {
    d->pool = NULL;
    d->alloc_stream = NULL;
  }
}

static bp_status_t device_open(bpp_instance_t inst, uint32_t index, bpp_device_t* out) {
  if (!inst || !out) return bp_kit_error(BP_INVALID_ARGUMENT, "cuda: device_open: NULL");
  if (index >= (uint32_t)inst->device_count)
    return bp_kit_error(BP_OUT_OF_RANGE, "cuda: device_open: index %u of %d devices", index,
                        inst->device_count);
  bpp_device_t d = calloc(1, sizeof *d);
  if (!d) return bp_kit_error(BP_RESOURCE_EXHAUSTED, "cuda: out of host memory");
  d->inst = inst;
  d->cu = &inst->cu;
  d->index = index;
  pthread_mutex_init(&d->lost_mu, NULL);
  pthread_mutex_init(&d->alloc_mu, NULL);
  const cuda_symbols_t* cu = d->cu;
  CUresult r = cu->cuDeviceGet(&d->dev, (int)index);
  if (r == CUDA_SUCCESS) r = cu->cuDevicePrimaryCtxRetain(&d->ctx, d->dev);
  if (r != CUDA_SUCCESS) {
    bp_status_t st = cuda_fail(NULL, r, "device_open");
    pthread_mutex_destroy(&d->lost_mu);
    pthread_mutex_destroy(&d->alloc_mu);
    free(d);
    return st;
  }
  if (cu->cuDeviceGetName(d->name, (int)sizeof d->name, d->dev) != CUDA_SUCCESS)
    snprintf(d->name, sizeof d->name, "CUDA device %u", index);
  size_t total = 0;
  if (cu->cuDeviceTotalMem_v2(&total, d->dev) == CUDA_SUCCESS) d->total_mem = total;
  d->cc_major = attr(d, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR);
  d->cc_minor = attr(d, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR);
  d->sm_count = attr(d, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT);
  d->managed = attr(d, CU_DEVICE_ATTRIBUTE_MANAGED_MEMORY);
  bp_status_t st = cuda_ctx_push(d);
  if (st == BP_OK) {
    if (cu->cuCtxGetStreamPriorityRange(&d->prio_least, &d->prio_greatest) != CUDA_SUCCESS)
      d->prio_least = d->prio_greatest = 0;
    pool_open(d);
    st = cuda_event_pools_open(d);
    if (st == BP_OK) st = cuda_blas_device_open(d);
    if (st == BP_OK) st = cuda_kernels_device_open(d);
    if (st != BP_OK) { /* undo what opened (each close skips what did not) */
      cuda_blas_device_close(d);
      cuda_event_pools_close(d);
      if (d->alloc_stream) cu->cuStreamDestroy_v2(d->alloc_stream);
    }
    cuda_ctx_pop(d);
  }
  if (st != BP_OK) {
    cu->cuDevicePrimaryCtxRelease_v2(d->dev);
    pthread_mutex_destroy(&d->lost_mu);
    pthread_mutex_destroy(&d->alloc_mu);
    free(d);
    return st;
  }
  *out = d;
  return BP_OK;
}

static void device_close(bpp_device_t d) {
  if (!d) return;
  if (cuda_ctx_push(d) == BP_OK) {
    cuda_blas_device_close(d);
    cuda_kernels_device_close(d);
    cuda_event_pools_close(d); /* after the kernels: no executable holds an event now */
    if (d->alloc_stream) {
      d->cu->cuStreamSynchronize(d->alloc_stream);
      d->cu->cuStreamDestroy_v2(d->alloc_stream);
    }
    cuda_ctx_pop(d);
  }
  d->cu->cuDevicePrimaryCtxRelease_v2(d->dev);
  pthread_mutex_destroy(&d->lost_mu);
  pthread_mutex_destroy(&d->alloc_mu);
  free(d);
}

/* FP32 lanes per SM by compute capability (the CUDA programming guide's
 * throughput table); dense tensor-core f16/bf16 FLOP per SM per clock. */
static void sm_rates(int major, int minor, double* f32_lanes, double* tc_flops) {
  *f32_lanes = major >= 9 || (major == 8 && minor > 0) ? 128.0 : major >= 7 ? 64.0 : 64.0;
  *tc_flops = major >= 9 ? 4096.0 : major == 8 ? (minor == 0 ? 2048.0 : 1024.0)
                                               : major == 7 ? 1024.0 : 0.0;
}

static bp_status_t device_get_properties(bpp_device_t d, bp_device_properties_t* props) {
  if (!d || !props || props->struct_size < sizeof(uint32_t))
    return bp_kit_error(BP_INVALID_ARGUMENT, "cuda: device_get_properties: no struct_size");
  bp_device_properties_t p = {.struct_size = sizeof p, .kind = BP_DEVICE_KIND_GPU};
  snprintf(p.name, sizeof p.name, "%s", d->name);
  snprintf(p.vendor, sizeof p.vendor, "NVIDIA");
  int v = d->inst->driver_version;
  snprintf(p.driver_version, sizeof p.driver_version, "CUDA %d.%d, sm_%d%d", v / 1000,
           v % 1000 / 10, d->cc_major, d->cc_minor);
  CUuuid uuid;
  if (d->cu->cuDeviceGetUuid_v2 && d->cu->cuDeviceGetUuid_v2(&uuid, d->dev) == CUDA_SUCCESS)
    memcpy(p.uuid, uuid.bytes, sizeof p.uuid);
  p.memory_bytes = d->total_mem;
  p.compute_units = (uint32_t)d->sm_count;
  p.subgroup_size = (uint32_t)attr(d, CU_DEVICE_ATTRIBUTE_WARP_SIZE);
  /* Storage: every dtype of whole bytes the copies and fills move. */
  p.dtype_mask = BP_DTYPE_BIT(BP_DTYPE_F32) | BP_DTYPE_BIT(BP_DTYPE_F16) |
                 BP_DTYPE_BIT(BP_DTYPE_BF16) | BP_DTYPE_BIT(BP_DTYPE_F64) |
                 BP_DTYPE_BIT(BP_DTYPE_I8) | BP_DTYPE_BIT(BP_DTYPE_U8) |
                 BP_DTYPE_BIT(BP_DTYPE_I16) | BP_DTYPE_BIT(BP_DTYPE_I32) |
                 BP_DTYPE_BIT(BP_DTYPE_I64) | BP_DTYPE_BIT(BP_DTYPE_BOOL);
  /* IEEE division and square root, denormals kept (no -ftz), events time. */
  p.flags = BP_DEVICE_FLAG_DENORMALS_PRESERVED | BP_DEVICE_FLAG_CORRECTLY_ROUNDED |
            BP_DEVICE_FLAG_TIMESTAMPS;
  if (d->inst->device_count > 1 && d->cu->cuDeviceCanAccessPeer && d->cu->cuMemcpyPeerAsync)
    p.flags |= BP_DEVICE_FLAG_PEER_COPY;
  double clock_hz = attr(d, CU_DEVICE_ATTRIBUTE_CLOCK_RATE) * 1e3;
  double lanes, tc;
  sm_rates(d->cc_major, d->cc_minor, &lanes, &tc);
  p.peak_ops_per_s[BP_DTYPE_F32] = 2.0 * lanes * d->sm_count * clock_hz;
  p.peak_ops_per_s[BP_DTYPE_F16] = tc * d->sm_count * clock_hz;
  p.peak_ops_per_s[BP_DTYPE_BF16] = tc * d->sm_count * clock_hz;
  p.peak_ops_per_s[BP_DTYPE_F64] = p.peak_ops_per_s[BP_DTYPE_F32] / (d->cc_major >= 8 &&
                                                                     d->cc_minor == 0 ? 2 : 64);
  /* DDR: two transfers per memory clock over the bus. */
  p.memory_bandwidth_bytes_per_s = 2.0 * attr(d, CU_DEVICE_ATTRIBUTE_MEMORY_CLOCK_RATE) * 1e3 *
                                   attr(d, CU_DEVICE_ATTRIBUTE_GLOBAL_MEMORY_BUS_WIDTH) / 8.0;
  p.host_link_bandwidth_bytes_per_s = d->cc_major >= 9 ? 50e9 : 25e9; /* PCIe 5 / 4 x16 */
  p.launch_overhead_ns = 4000;
  bp_kit_copy_out(props, &p, sizeof p);
  return BP_OK;
}

/* Host functions: cuda_hostfn.c; the rest of the slots in cuda_memory.c
 * and cuda_stream.c. */
static bp_status_t stream_enqueue_host_func(bpp_stream_t s, bp_host_func_t fn, void* user) {
  return cuda_hostfn_enqueue(s, fn, user);
}

const bpp_core_table_t cuda_core_table = {
    .struct_size = sizeof(bpp_core_table_t),
    .instance_create = instance_create,
    .instance_destroy = instance_destroy,
    .device_count = device_count,
    .device_open = device_open,
    .device_close = device_close,
    .device_get_properties = device_get_properties,
    .device_memory_spaces = cuda_device_memory_spaces,
    .device_memory_usage = cuda_device_memory_usage,
    .buffer_allocate = cuda_buffer_allocate,
    .buffer_release = cuda_buffer_release,
    .buffer_map = cuda_buffer_map,
    .buffer_unmap = cuda_buffer_unmap,
    .copy_host_to_device = cuda_copy_h2d,
    .copy_device_to_host = cuda_copy_d2h,
    .copy_device_to_device = cuda_copy_d2d,
    .copy_peer = cuda_copy_peer,
    .buffer_fill = cuda_buffer_fill,
    .stream_create = cuda_stream_create,
    .stream_destroy = cuda_stream_destroy,
    .stream_synchronize = cuda_stream_synchronize,
    .stream_query = cuda_stream_query,
    .stream_enqueue_host_func = stream_enqueue_host_func,
    .event_create = cuda_event_create,
    .event_destroy = cuda_event_destroy,
    .event_record = cuda_event_record,
    .stream_wait_event = cuda_stream_wait_event,
    .event_query = cuda_event_query,
    .event_synchronize = cuda_event_synchronize,
    .event_elapsed_ns = cuda_event_elapsed_ns,
};
