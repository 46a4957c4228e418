/* backplane OpenCL plugin: buffers, maps, copies and fills.
 *
 * Buffers are cl_mem objects of the device's context, accounted against
 * the device budget (atomically, so two threads cannot overrun it). Below
 * OCL_SUBALLOC_MAX bytes a buffer is a sub-buffer (clCreateSubBuffer) of a
 * 64 MiB block from gpu_common's heap (best fit, coalescing, offsets
 * aligned to CL_DEVICE_MEM_BASE_ADDR_ALIGN), so small allocations stop
 * costing a driver allocation each; larger ones are buffers of their own. Space
 * 1 asks for pinned host memory (CL_MEM_ALLOC_HOST_PTR). Copies and fills
 * are enqueued on the stream's in-order queue without blocking (the ABI
 * keeps host pointers valid until the stream passes them). Device to
 * device copies within one buffer whose ranges overlap go through a
 * temporary buffer (OpenCL refuses overlapping copies; the ABI copies as
 * memmove does).
 */
#include <stdlib.h>
#include <string.h>

#include "ocl_internal.h"

#define OCL_BLOCK_SIZE ((uint64_t)64 << 20)
#define OCL_SUBALLOC_MAX ((uint64_t)4 << 20)

static cl_mem_flags space_flags(uint32_t space) {
  return CL_MEM_READ_WRITE | (space == 1 ? CL_MEM_ALLOC_HOST_PTR : 0);
}

static bp_status_t heap_block_alloc(void* ctx, uint64_t size, void** out) {
  struct ocl_heap_ctx* h = ctx;
  cl_int err = CL_SUCCESS;
  cl_mem m = h->dev->cl->clCreateBuffer(h->dev->ctx, space_flags(h->space), size, NULL, &err);
  if (!m || err != CL_SUCCESS) return ocl_fail("clCreateBuffer (a block of the suballocator)", err);
  *out = m;
  return BP_OK;
}

static void heap_block_free(void* ctx, void* block) {
  struct ocl_heap_ctx* h = ctx;
  h->dev->cl->clReleaseMemObject((cl_mem)block);
}

bp_status_t ocl_heaps_create(struct bpp_device_s* d) {
  cl_uint bits = 0;
  if (d->cl->clGetDeviceInfo(d->id, CL_DEVICE_MEM_BASE_ADDR_ALIGN, sizeof bits, &bits, NULL) != CL_SUCCESS)
    bits = 1024;
  uint64_t align = bits / 8 >= 128 ? bits / 8 : 128;
  if (align & (align - 1)) align = 4096;
  uint64_t block = OCL_BLOCK_SIZE;
  if (d->max_alloc && d->max_alloc < block) block = d->max_alloc & ~(align - 1);
  if (block < OCL_SUBALLOC_MAX) return BP_OK; /* no room for blocks: every buffer is its own */
  static const bp_gpu_heap_ops_t ops = {heap_block_alloc, heap_block_free};
  for (uint32_t k = 0; k < 2; k++) {
    d->heap_ctx[k].dev = d;
    d->heap_ctx[k].space = k;
    bp_gpu_heap_config_t cfg = {.block_size = block, .alignment = align, .budget = d->budget};
    bp_status_t st = bp_gpu_heap_create(&cfg, &ops, &d->heap_ctx[k], &d->heap[k]);
    if (st) return st;
  }
  return BP_OK;
}

void ocl_heaps_destroy(struct bpp_device_s* d) {
  for (uint32_t k = 0; k < 2; k++) {
    bp_gpu_heap_destroy(d->heap[k]);
    d->heap[k] = NULL;
  }
}

/* b->mem as a sub-buffer of a heap block; 0, or a status with nothing
 * held. */
static bp_status_t suballocate(struct bpp_device_s* d, uint32_t space, uint64_t size, struct bpp_buffer_s* b) {
  bp_status_t st = bp_gpu_heap_alloc(d->heap[space], size, &b->sub);
  if (st) return st;
  cl_buffer_region region = {(size_t)b->sub.offset, (size_t)size};
  cl_int err = CL_SUCCESS;
  b->mem = d->cl->clCreateSubBuffer((cl_mem)b->sub.block, CL_MEM_READ_WRITE, CL_BUFFER_CREATE_TYPE_REGION, &region,
                                    &err);
  if (!b->mem || err != CL_SUCCESS) {
    bp_gpu_heap_free(d->heap[space], &b->sub);
    memset(&b->sub, 0, sizeof b->sub);
    return ocl_fail("clCreateSubBuffer", err);
  }
  return BP_OK;
}

static bp_status_t reserve(struct bpp_device_s* d, uint64_t bytes) {
  uint64_t used = __atomic_load_n(&d->used, __ATOMIC_RELAXED);
  do {
    if (bytes > d->budget || used > d->budget - bytes)
      return BP_KIT_ERROR(BP_RESOURCE_EXHAUSTED,
                          "buffer_allocate: %llu bytes requested, %llu of the %llu-byte budget available",
                          (unsigned long long)bytes, (unsigned long long)(d->budget - used),
                          (unsigned long long)d->budget);
  } while (!__atomic_compare_exchange_n(&d->used, &used, used + bytes, 0, __ATOMIC_RELAXED, __ATOMIC_RELAXED));
  return BP_OK;
}

bp_status_t ocl_buffer_allocate(bpp_device_t d, const bp_buffer_alloc_info_t* info, bpp_buffer_t* out) {
  if (!d || !info || !out) return BP_KIT_ERROR(BP_INVALID_ARGUMENT, "buffer_allocate: NULL argument");
  *out = NULL;
  if (info->struct_size < BP_BUFFER_ALLOC_INFO_V1_SIZE)
    return BP_KIT_ERROR(BP_INVALID_ARGUMENT, "buffer_allocate: struct_size %u < %u", info->struct_size,
                        BP_BUFFER_ALLOC_INFO_V1_SIZE);
  if (info->memory_space > 1)
    return BP_KIT_ERROR(BP_INVALID_ARGUMENT, "buffer_allocate: no memory space %u (2 spaces)", info->memory_space);
  if (info->size_bytes == 0) return BP_KIT_ERROR(BP_INVALID_ARGUMENT, "buffer_allocate: size 0");
  if (info->alignment & (info->alignment - 1))
    return BP_KIT_ERROR(BP_INVALID_ARGUMENT, "buffer_allocate: alignment %llu is not a power of two",
                        (unsigned long long)info->alignment);
  if (info->alignment > 128)
    return BP_KIT_ERROR(BP_UNIMPLEMENTED, "buffer_allocate: alignment %llu > 128 (the device's)",
                        (unsigned long long)info->alignment);
  if (d->max_alloc && info->size_bytes > d->max_alloc)
    return BP_KIT_ERROR(BP_RESOURCE_EXHAUSTED, "buffer_allocate: %llu bytes exceed the device's largest buffer (%llu)",
                        (unsigned long long)info->size_bytes, (unsigned long long)d->max_alloc);
  bp_status_t st = ocl_runtime_ready(d);
  if (!st) st = reserve(d, info->size_bytes);
  if (st) return st;
  struct bpp_buffer_s* b = calloc(1, sizeof *b);
  if (!b) {
    __atomic_fetch_sub(&d->used, info->size_bytes, __ATOMIC_RELAXED);
    return BP_KIT_ERROR(BP_RESOURCE_EXHAUSTED, "buffer_allocate: out of host memory");
  }
  if (d->heap[info->memory_space] && info->size_bytes < OCL_SUBALLOC_MAX) {
    st = suballocate(d, info->memory_space, info->size_bytes, b);
  } else {
    cl_int err = CL_SUCCESS;
    b->mem = d->cl->clCreateBuffer(d->ctx, space_flags(info->memory_space), info->size_bytes, NULL, &err);
    if (!b->mem || err != CL_SUCCESS) st = ocl_fail("clCreateBuffer", err);
  }
  if (st) {
    free(b);
    __atomic_fetch_sub(&d->used, info->size_bytes, __ATOMIC_RELAXED);
    return st;
  }
  b->dev = d;
  b->size = info->size_bytes;
  b->space = info->memory_space;
  *out = b;
  return BP_OK;
}

void ocl_buffer_release(bpp_buffer_t b) {
  if (!b) return;
  if (b->mapped) ocl_buffer_unmap(b);
  b->dev->cl->clReleaseMemObject(b->mem);
  /* the range may be handed out again at once: the core releases a buffer
   * only after the streams that used it finished (core/runtime/buffer.c) */
  if (b->sub.block && bp_gpu_heap_free(b->dev->heap[b->space], &b->sub))
    bp_kit_log(BP_LOG_WARN, "opencl: %s", bp_plugin_last_error());
  __atomic_fetch_sub(&b->dev->used, b->size, __ATOMIC_RELAXED);
  free(b);
}

/* Maps the whole buffer once (blocking, on the device's map queue) and
 * hands out pointers into it until unmap. */
bp_status_t ocl_buffer_map(bpp_buffer_t b, uint64_t offset, uint64_t size, void** out_ptr) {
  if (!b || !out_ptr) return BP_KIT_ERROR(BP_INVALID_ARGUMENT, "buffer_map: NULL argument");
  if (b->space == 0 && !b->dev->host_unified)
    return BP_KIT_ERROR(BP_FAILED_PRECONDITION, "buffer_map: device memory of this device is not host visible");
  if (offset > b->size || size > b->size - offset)
    return BP_KIT_ERROR(BP_OUT_OF_RANGE, "buffer_map: [%llu, +%llu) outside the %llu-byte buffer",
                        (unsigned long long)offset, (unsigned long long)size, (unsigned long long)b->size);
  struct bpp_device_s* d = b->dev;
  pthread_mutex_lock(&d->aux_mu);
  if (!b->mapped) {
    cl_int err = CL_SUCCESS;
    void* p = d->cl->clEnqueueMapBuffer(d->aux_queue, b->mem, CL_TRUE, CL_MAP_READ | CL_MAP_WRITE, 0, b->size, 0,
                                        NULL, NULL, &err);
    if (!p || err != CL_SUCCESS) {
      pthread_mutex_unlock(&d->aux_mu);
      return ocl_fail("clEnqueueMapBuffer", err);
    }
    b->mapped = p;
  }
  *out_ptr = (char*)b->mapped + offset;
  pthread_mutex_unlock(&d->aux_mu);
  return BP_OK;
}

bp_status_t ocl_buffer_unmap(bpp_buffer_t b) {
  if (!b) return BP_KIT_ERROR(BP_INVALID_ARGUMENT, "buffer_unmap: NULL buffer");
  struct bpp_device_s* d = b->dev;
  pthread_mutex_lock(&d->aux_mu);
  cl_int err = CL_SUCCESS;
  if (b->mapped) {
    err = d->cl->clEnqueueUnmapMemObject(d->aux_queue, b->mem, b->mapped, 0, NULL, NULL);
    if (err == CL_SUCCESS) err = d->cl->clFinish(d->aux_queue);
    b->mapped = NULL;
  }
  pthread_mutex_unlock(&d->aux_mu);
  return err == CL_SUCCESS ? BP_OK : ocl_fail("clEnqueueUnmapMemObject", err);
}

static bp_status_t check_range(const char* what, bpp_buffer_t b, uint64_t off, uint64_t size) {
  if (!b) return BP_KIT_ERROR(BP_INVALID_ARGUMENT, "%s: NULL buffer", what);
  if (off > b->size || size > b->size - off)
    return BP_KIT_ERROR(BP_OUT_OF_RANGE, "%s: [%llu, +%llu) outside the %llu-byte buffer", what,
                        (unsigned long long)off, (unsigned long long)size, (unsigned long long)b->size);
  return BP_OK;
}

bp_status_t ocl_copy_h2d(bpp_stream_t s, const void* src, bpp_buffer_t dst, uint64_t off, uint64_t size) {
  if (!s || (!src && size)) return BP_KIT_ERROR(BP_INVALID_ARGUMENT, "copy_host_to_device: NULL argument");
  bp_status_t st = check_range("copy_host_to_device", dst, off, size);
  if (st || size == 0) return st;
  cl_event ev = NULL;
  cl_int err = s->dev->cl->clEnqueueWriteBuffer(s->q, dst->mem, CL_FALSE, off, size, src, 0, NULL, &ev);
  ocl_stream_track(s, ev);
  return err == CL_SUCCESS ? BP_OK : ocl_fail("clEnqueueWriteBuffer", err);
}

bp_status_t ocl_copy_d2h(bpp_stream_t s, bpp_buffer_t src, uint64_t off, void* dst, uint64_t size) {
  if (!s || (!dst && size)) return BP_KIT_ERROR(BP_INVALID_ARGUMENT, "copy_device_to_host: NULL argument");
  bp_status_t st = check_range("copy_device_to_host", src, off, size);
  if (st || size == 0) return st;
  cl_event ev = NULL;
  cl_int err = s->dev->cl->clEnqueueReadBuffer(s->q, src->mem, CL_FALSE, off, size, dst, 0, NULL, &ev);
  ocl_stream_track(s, ev);
  return err == CL_SUCCESS ? BP_OK : ocl_fail("clEnqueueReadBuffer", err);
}

bp_status_t ocl_copy_d2d(bpp_stream_t s, bpp_buffer_t src, uint64_t soff, bpp_buffer_t dst, uint64_t doff,
                         uint64_t size) {
  if (!s) return BP_KIT_ERROR(BP_INVALID_ARGUMENT, "copy_device_to_device: NULL stream");
  bp_status_t st = check_range("copy_device_to_device (source)", src, soff, size);
  if (!st) st = check_range("copy_device_to_device (destination)", dst, doff, size);
  if (st || size == 0 || (src == dst && soff == doff)) return st;
  const ocl_symbols_t* cl = s->dev->cl;
  cl_int err;
  cl_event ev = NULL;
  if (src == dst && soff < doff + size && doff < soff + size) {
    cl_mem tmp = cl->clCreateBuffer(s->dev->ctx, CL_MEM_READ_WRITE, size, NULL, &err);
    if (!tmp) return ocl_fail("clCreateBuffer (overlapping copy)", err);
    err = cl->clEnqueueCopyBuffer(s->q, src->mem, tmp, soff, 0, size, 0, NULL, NULL);
    if (err == CL_SUCCESS) err = cl->clEnqueueCopyBuffer(s->q, tmp, dst->mem, 0, doff, size, 0, NULL, &ev);
    cl->clReleaseMemObject(tmp); /* freed once the copies finish */
  } else {
    err = cl->clEnqueueCopyBuffer(s->q, src->mem, dst->mem, soff, doff, size, 0, NULL, &ev);
  }
  ocl_stream_track(s, ev);
  return err == CL_SUCCESS ? BP_OK : ocl_fail("clEnqueueCopyBuffer", err);
}

bp_status_t ocl_buffer_fill(bpp_stream_t s, bpp_buffer_t b, uint64_t off, uint64_t size, const void* pattern,
                            uint32_t pattern_size) {
  if (!s || !pattern) return BP_KIT_ERROR(BP_INVALID_ARGUMENT, "buffer_fill: NULL argument");
  if (pattern_size != 1 && pattern_size != 2 && pattern_size != 4 && pattern_size != 8)
    return BP_KIT_ERROR(BP_INVALID_ARGUMENT, "buffer_fill: pattern of %u bytes (1, 2, 4 or 8)", pattern_size);
  bp_status_t st = check_range("buffer_fill", b, off, size);
  if (st) return st;
  if (off % pattern_size || size % pattern_size)
    return BP_KIT_ERROR(BP_INVALID_ARGUMENT, "buffer_fill: offset %llu and size %llu must be multiples of %u",
                        (unsigned long long)off, (unsigned long long)size, pattern_size);
  if (size == 0) return BP_OK;
  cl_event ev = NULL;
  cl_int err = s->dev->cl->clEnqueueFillBuffer(s->q, b->mem, pattern, pattern_size, off, size, 0, NULL, &ev);
  ocl_stream_track(s, ev);
  return err == CL_SUCCESS ? BP_OK : ocl_fail("clEnqueueFillBuffer", err);
}
