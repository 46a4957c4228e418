/* Buffers in three memory spaces, and stream-ordered copies and fills.
 *
 *  space 0  device memory: cuMemAllocFromPoolAsync from the device's
 *           default pool where the driver has pools (freed memory stays
 *           cached in the pool), else cuMemAlloc
 *  space 1  pinned host memory (cuMemHostAlloc, portable and mapped):
 *           host visible and coherent, the device reads it over the bus
 *  space 2  managed memory (cuMemAllocManaged), where the device has it
 *
 * Copies have memmove semantics (docs/ABI.md section 8) although the
 * driver's copies leave overlap undefined: overlapping ranges are copied
 * in pieces no longer than their distance, in a safe order.
 */
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "cuda_internal.h"

static uint32_t space_count(bpp_device_t d) { return d->managed ? 3u : 2u; }

static uint64_t host_memory_bytes(void) {
  long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
  return pages > 0 && page > 0 ? (uint64_t)pages * (uint64_t)page : 0;
}

static bp_memory_space_info_t space_info(bpp_device_t d, uint32_t i) {
  bp_memory_space_info_t info = {.struct_size = sizeof info};
  switch (i) {
    case CUDA_SPACE_DEVICE:
      info.kind = BP_MEMORY_DEVICE;
      info.flags = BP_MEMORY_FLAG_DEVICE_LOCAL;
      info.capacity_bytes = d->total_mem;
      info.alignment_bytes = CUDA_DEVICE_ALIGN;
      break;
    case CUDA_SPACE_PINNED:
      info.kind = BP_MEMORY_HOST_PINNED;
      info.flags = BP_MEMORY_FLAG_HOST_VISIBLE | BP_MEMORY_FLAG_HOST_COHERENT;
      info.capacity_bytes = host_memory_bytes();
      info.alignment_bytes = CUDA_HOST_ALIGN;
      break;
    default:
      info.kind = BP_MEMORY_MANAGED;
      info.flags = BP_MEMORY_FLAG_HOST_VISIBLE | BP_MEMORY_FLAG_HOST_COHERENT |
                   BP_MEMORY_FLAG_DEVICE_LOCAL;
      info.capacity_bytes = d->total_mem;
      info.alignment_bytes = CUDA_DEVICE_ALIGN;
      break;
  }
  return info;
}

bp_status_t cuda_device_memory_spaces(bpp_device_t d, uint32_t capacity, uint32_t elem_size,
                                      bp_memory_space_info_t* out, uint32_t* out_count) {
  if (!d || !out_count || (capacity && (!out || elem_size < BP_MEMORY_SPACE_INFO_V1_SIZE)))
    return bp_kit_error(BP_INVALID_ARGUMENT, "cuda: device_memory_spaces: bad argument");
  uint32_t n = space_count(d);
  *out_count = n;
  for (uint32_t i = 0; i < n && i < capacity; ++i) {
    bp_memory_space_info_t info = space_info(d, i);
    bp_kit_put_entry(out, elem_size, i, &info, sizeof info);
  }
  return BP_OK;
}

bp_status_t cuda_device_memory_usage(bpp_device_t d, uint32_t space, uint64_t* out_used,
                                     uint64_t* out_budget) {
  if (!d || !out_used || !out_budget || space >= space_count(d))
    return bp_kit_error(BP_INVALID_ARGUMENT, "cuda: device_memory_usage: bad argument");
  *out_used = __atomic_load_n(&d->used[space], __ATOMIC_RELAXED);
  *out_budget = space_info(d, space).capacity_bytes;
  if (space != CUDA_SPACE_PINNED && cuda_ctx_push(d) == BP_OK) {
    size_t free_b = 0, total_b = 0;
    /* What this process may still get: its own use plus what is free. */
    if (d->cu->cuMemGetInfo_v2(&free_b, &total_b) == CUDA_SUCCESS)
      *out_budget = *out_used + free_b < total_b ? *out_used + free_b : total_b;
    cuda_ctx_pop(d);
  }
  return BP_OK;
}

/* Device memory from the pool, or cuMemAlloc. Caller pushed the context. */
static CUresult device_alloc(bpp_device_t d, uint64_t bytes, CUdeviceptr* out, int* out_pooled) {
  const cuda_symbols_t* cu = d->cu;
  if (d->pool) {
    pthread_mutex_lock(&d->alloc_mu);
    CUresult r = cu->cuMemAllocFromPoolAsync(out, bytes, d->pool, d->alloc_stream);
    /* Usable on every stream only once the allocation stream passed it. */
    if (r == CUDA_SUCCESS) r = cu->cuStreamSynchronize(d->alloc_stream);
    pthread_mutex_unlock(&d->alloc_mu);
    *out_pooled = r == CUDA_SUCCESS;
    return r;
  }
  *out_pooled = 0;
  return cu->cuMemAlloc_v2(out, bytes);
}

bp_status_t cuda_buffer_allocate(bpp_device_t d, const bp_buffer_alloc_info_t* info,
                                 bpp_buffer_t* out) {
  if (!d || !info || !out || info->struct_size < BP_BUFFER_ALLOC_INFO_V1_SIZE)
    return bp_kit_error(BP_INVALID_ARGUMENT, "cuda: buffer_allocate: bad argument");
  bp_status_t st = cuda_device_check_alive(d);
  if (st != BP_OK) return st;
  uint32_t space = info->memory_space;
  if (space >= space_count(d))
    return bp_kit_error(BP_INVALID_ARGUMENT, "cuda: buffer_allocate: no memory space %u (%u)",
                        space, space_count(d));
  uint64_t align = info->alignment, natural = space_info(d, space).alignment_bytes;
  if (align & (align - 1))
    return bp_kit_error(BP_INVALID_ARGUMENT, "cuda: alignment %llu is not a power of two",
                        (unsigned long long)align);
  uint64_t pad = align > natural ? align - natural : 0, bytes;
  if (info->size_bytes == 0 || bp_checked_add_u64(info->size_bytes, pad, &bytes) ||
      bytes > (uint64_t)SIZE_MAX)
    return bp_kit_error(BP_INVALID_ARGUMENT, "cuda: buffer_allocate: bad size %llu",
                        (unsigned long long)info->size_bytes);
  uint64_t capacity = space_info(d, space).capacity_bytes;
  if (capacity && bytes > capacity) /* no driver call can succeed */
    return bp_kit_error(BP_RESOURCE_EXHAUSTED,
                        "cuda: out of memory in space %u: %llu bytes requested, capacity %llu",
                        space, (unsigned long long)bytes, (unsigned long long)capacity);
  bpp_buffer_t b = calloc(1, sizeof *b);
  if (!b) return bp_kit_error(BP_RESOURCE_EXHAUSTED, "cuda: out of host memory");
  b->dev = d;
  b->space = space;
  b->size = info->size_bytes;
  b->reserved = bytes;
  st = cuda_ctx_push(d);
  if (st != BP_OK) {
    free(b);
    return st;
  }
  const cuda_symbols_t* cu = d->cu;
  CUresult r;
  if (space == CUDA_SPACE_DEVICE) {
    r = device_alloc(d, bytes, &b->base, &b->pooled);
  } else if (space == CUDA_SPACE_PINNED) {
    r = cu->cuMemHostAlloc(&b->host_base, bytes,
                           CU_MEMHOSTALLOC_PORTABLE | CU_MEMHOSTALLOC_DEVICEMAP);
    if (r == CUDA_SUCCESS) {
      r = cu->cuMemHostGetDevicePointer_v2(&b->base, b->host_base, 0);
      if (r != CUDA_SUCCESS) cu->cuMemFreeHost(b->host_base);
    }
  } else {
    r = cu->cuMemAllocManaged(&b->base, bytes, CU_MEM_ATTACH_GLOBAL);
  }
  cuda_ctx_pop(d);
  if (r != CUDA_SUCCESS) {
    free(b);
    if (r == CUDA_ERROR_OUT_OF_MEMORY) {
      uint64_t used = __atomic_load_n(&d->used[space], __ATOMIC_RELAXED);
      return bp_kit_error(BP_RESOURCE_EXHAUSTED,
                          "cuda: out of memory in space %u: %llu bytes requested, %llu in use "
                          "of %llu (CUDA_ERROR_OUT_OF_MEMORY (2))",
                          space, (unsigned long long)bytes, (unsigned long long)used,
                          (unsigned long long)space_info(d, space).capacity_bytes);
    }
    return cuda_fail(d, r, "buffer_allocate");
  }
  uint64_t mis = align > natural ? (uint64_t)b->base & (align - 1) : 0;
  uint64_t shift = mis ? align - mis : 0;
  b->ptr = b->base + shift;
  if (space == CUDA_SPACE_PINNED) b->host = (char*)b->host_base + shift;
  if (space == CUDA_SPACE_MANAGED) b->host = (void*)(uintptr_t)b->ptr; /* one address */
  __atomic_add_fetch(&d->used[space], bytes, __ATOMIC_RELAXED);
  *out = b;
  return BP_OK;
}

void cuda_buffer_release(bpp_buffer_t b) {
  if (!b) return;
  bpp_device_t d = b->dev;
  if (cuda_ctx_push(d) == BP_OK) {
    const cuda_symbols_t* cu = d->cu;
    if (b->space == CUDA_SPACE_PINNED) {
      cu->cuMemFreeHost(b->host_base);
    } else if (b->pooled) {
      /* The core releases only after every use completed. */
      pthread_mutex_lock(&d->alloc_mu);
      cu->cuMemFreeAsync(b->base, d->alloc_stream);
      pthread_mutex_unlock(&d->alloc_mu);
    } else {
      cu->cuMemFree_v2(b->base);
    }
    cuda_ctx_pop(d);
  }
  __atomic_sub_fetch(&d->used[b->space], b->reserved, __ATOMIC_RELAXED);
  free(b);
}

bp_status_t cuda_buffer_map(bpp_buffer_t b, uint64_t offset, uint64_t size, void** out_ptr) {
  uint64_t end;
  if (!b || !out_ptr || bp_checked_add_u64(offset, size, &end) || end > b->size)
    return bp_kit_error(BP_OUT_OF_RANGE, "cuda: buffer_map: range outside the buffer");
  if (!b->host)
    return bp_kit_error(BP_FAILED_PRECONDITION,
                        "cuda: buffer_map: device memory (space 0) is not host visible");
  *out_ptr = (char*)b->host + offset;
  return BP_OK;
}

bp_status_t cuda_buffer_unmap(bpp_buffer_t b) {
  return b ? BP_OK : bp_kit_error(BP_INVALID_ARGUMENT, "cuda: buffer_unmap: NULL");
}

/* ---- copies --------------------------------------------------------------- */
static bp_status_t range_ok(bpp_buffer_t b, uint64_t off, uint64_t size, const char* what) {
  uint64_t end;
  if (!b || bp_checked_add_u64(off, size, &end) || end > b->size)
    return bp_kit_error(BP_OUT_OF_RANGE, "cuda: %s: [%llu, +%llu) outside the buffer (%llu)",
                        what, (unsigned long long)off, (unsigned long long)size,
                        (unsigned long long)(b ? b->size : 0));
  return BP_OK;
}

/* Copies `size` bytes from device address src to dst on the stream, as
 * memmove would: when the ranges overlap, in pieces no longer than their
 * distance, from the end when dst is above src. Context pushed. */
static CUresult move_d2d(bpp_stream_t s, CUdeviceptr dst, CUdeviceptr src, uint64_t size) {
  const cuda_symbols_t* cu = s->dev->cu;
  uint64_t dist = dst > src ? dst - src : src - dst;
  if (dist >= size || dist == 0)
    return dist == 0 ? CUDA_SUCCESS : cu->cuMemcpyDtoDAsync_v2(dst, src, size, s->s);
  CUresult r = CUDA_SUCCESS;
  if (dst < src) {
    for (uint64_t o = 0; o < size && r == CUDA_SUCCESS; o += dist) {
      uint64_t n = size - o < dist ? size - o : dist;
      r = cu->cuMemcpyDtoDAsync_v2(dst + o, src + o, n, s->s);
    }
  } else {
    for (uint64_t end = size; end > 0 && r == CUDA_SUCCESS;) {
      uint64_t n = end < dist ? end : dist;
      end -= n;
      r = cu->cuMemcpyDtoDAsync_v2(dst + end, src + end, n, s->s);
    }
  }
  return r;
}

/* The device address of host memory inside a mapped buffer, or 0. */
static CUdeviceptr mapped_address(bpp_buffer_t b, const void* host, uint64_t size) {
  if (!b->host) return 0;
  uintptr_t h = (uintptr_t)host, lo = (uintptr_t)b->host;
  if (h < lo || h - lo > b->size || size > b->size - (h - lo)) return 0;
  return b->ptr + (h - lo);
}

static int overlaps(uintptr_t a, uintptr_t b, uint64_t size) {
  return a < b + size && b < a + size;
}

bp_status_t cuda_copy_h2d(bpp_stream_t s, const void* src, bpp_buffer_t dst, uint64_t dst_off,
                          uint64_t size) {
  bp_status_t st = range_ok(dst, dst_off, size, "copy_host_to_device");
  if (st != BP_OK || size == 0) return st;
  if ((st = cuda_device_check_alive(s->dev)) != BP_OK || (st = cuda_ctx_push(s->dev)) != BP_OK)
    return st;
  CUresult r;
  CUdeviceptr src_dev = mapped_address(dst, src, size);
  if (src_dev && overlaps(src_dev, dst->ptr + dst_off, size))
    r = move_d2d(s, dst->ptr + dst_off, src_dev, size); /* host memory of this buffer */
  else
    r = s->dev->cu->cuMemcpyHtoDAsync_v2(dst->ptr + dst_off, src, size, s->s);
  cuda_ctx_pop(s->dev);
  return r == CUDA_SUCCESS ? BP_OK : cuda_fail(s->dev, r, "cuMemcpyHtoDAsync");
}

bp_status_t cuda_copy_d2h(bpp_stream_t s, bpp_buffer_t src, uint64_t src_off, void* dst,
                          uint64_t size) {
  bp_status_t st = range_ok(src, src_off, size, "copy_device_to_host");
  if (st != BP_OK || size == 0) return st;
  if ((st = cuda_device_check_alive(s->dev)) != BP_OK || (st = cuda_ctx_push(s->dev)) != BP_OK)
    return st;
  CUresult r;
  CUdeviceptr dst_dev = mapped_address(src, dst, size);
  if (dst_dev && overlaps(dst_dev, src->ptr + src_off, size))
    r = move_d2d(s, dst_dev, src->ptr + src_off, size);
  else
    r = s->dev->cu->cuMemcpyDtoHAsync_v2(dst, src->ptr + src_off, size, s->s);
  cuda_ctx_pop(s->dev);
  return r == CUDA_SUCCESS ? BP_OK : cuda_fail(s->dev, r, "cuMemcpyDtoHAsync");
}

bp_status_t cuda_copy_d2d(bpp_stream_t s, bpp_buffer_t src, uint64_t src_off, bpp_buffer_t dst,
                          uint64_t dst_off, uint64_t size) {
  bp_status_t st = range_ok(src, src_off, size, "copy_device_to_device");
  if (st == BP_OK) st = range_ok(dst, dst_off, size, "copy_device_to_device");
  if (st != BP_OK || size == 0) return st;
  if ((st = cuda_device_check_alive(s->dev)) != BP_OK || (st = cuda_ctx_push(s->dev)) != BP_OK)
    return st;
  CUresult r = move_d2d(s, dst->ptr + dst_off, src->ptr + src_off, size);
  cuda_ctx_pop(s->dev);
  return r == CUDA_SUCCESS ? BP_OK : cuda_fail(s->dev, r, "cuMemcpyDtoDAsync");
}

/* Enables access from `from` to `to` once (the driver remembers it). */
static void peer_enable(bpp_device_t from, bpp_device_t to) {
  const cuda_symbols_t* cu = from->cu;
  int can = 0;
  if (!cu->cuCtxEnablePeerAccess ||
      cu->cuDeviceCanAccessPeer(&can, from->dev, to->dev) != CUDA_SUCCESS || !can)
    return;
  CUresult r = cu->cuCtxEnablePeerAccess(to->ctx, 0); /* from's context is current */
  if (r != CUDA_SUCCESS && r != CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED)
    bp_kit_log(BP_LOG_DEBUG, "cuda: peer access %u -> %u not enabled (%d); copies stage",
               from->index, to->index, (int)r);
}

bp_status_t cuda_copy_peer(bpp_stream_t s, bpp_buffer_t src, uint64_t src_off, bpp_buffer_t dst,
                           uint64_t dst_off, uint64_t size) {
  bp_status_t st = range_ok(src, src_off, size, "copy_peer");
  if (st == BP_OK) st = range_ok(dst, dst_off, size, "copy_peer");
  if (st != BP_OK || size == 0) return st;
  if (src->dev == dst->dev) return cuda_copy_d2d(s, src, src_off, dst, dst_off, size);
  if (!s->dev->cu->cuMemcpyPeerAsync || !s->dev->cu->cuDeviceCanAccessPeer)
    return bp_kit_error(BP_UNIMPLEMENTED, "cuda: copy_peer: the driver lacks cuMemcpyPeerAsync");
  if ((st = cuda_device_check_alive(s->dev)) != BP_OK || (st = cuda_ctx_push(s->dev)) != BP_OK)
    return st;
  peer_enable(s->dev, s->dev == src->dev ? dst->dev : src->dev);
  CUresult r = s->dev->cu->cuMemcpyPeerAsync(dst->ptr + dst_off, dst->dev->ctx,
                                             src->ptr + src_off, src->dev->ctx, size, s->s);
  cuda_ctx_pop(s->dev);
  return r == CUDA_SUCCESS ? BP_OK : cuda_fail(s->dev, r, "cuMemcpyPeerAsync");
}

/* ---- fills ---------------------------------------------------------------- */
/* One cuMemsetD8/16/32 when the pattern reduces to that width and the
 * address is aligned for it; else one strided cuMemsetD2D8 per byte of the
 * pattern (byte k of every repetition is one column of a 2-D memset). */
bp_status_t cuda_buffer_fill(bpp_stream_t s, bpp_buffer_t b, uint64_t offset, uint64_t size,
                             const void* pattern, uint32_t psize) {
  bp_status_t st = range_ok(b, offset, size, "buffer_fill");
  if (st != BP_OK) return st;
  if (!pattern || (psize != 1 && psize != 2 && psize != 4 && psize != 8) || size % psize)
    return bp_kit_error(BP_INVALID_ARGUMENT, "cuda: buffer_fill: pattern of %u bytes over %llu",
                        psize, (unsigned long long)size);
  if (size == 0) return BP_OK;
  const uint8_t* p = pattern;
  /* Narrow the pattern while its halves are equal (8 -> 4 -> 2 -> 1). */
  while (psize > 1 && !memcmp(p, p + psize / 2, psize / 2)) psize /= 2;
  if ((st = cuda_device_check_alive(s->dev)) != BP_OK || (st = cuda_ctx_push(s->dev)) != BP_OK)
    return st;
  const cuda_symbols_t* cu = s->dev->cu;
  CUdeviceptr at = b->ptr + offset;
  CUresult r = CUDA_SUCCESS;
  if (psize == 1) {
    r = cu->cuMemsetD8Async(at, p[0], size, s->s);
  } else if (psize == 2 && at % 2 == 0) {
    uint16_t v;
    memcpy(&v, p, 2);
    r = cu->cuMemsetD16Async(at, v, size / 2, s->s);
  } else if (psize == 4 && at % 4 == 0) {
    uint32_t v;
    memcpy(&v, p, 4);
    r = cu->cuMemsetD32Async(at, v, size / 4, s->s);
  } else {
    for (uint32_t k = 0; k < psize && r == CUDA_SUCCESS; ++k)
      r = cu->cuMemsetD2D8Async(at + k, psize, p[k], 1, size / psize, s->s);
  }
  cuda_ctx_pop(s->dev);
  return r == CUDA_SUCCESS ? BP_OK : cuda_fail(s->dev, r, "buffer_fill");
}
