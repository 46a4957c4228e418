/* backplane plugin kit: host-memory buffers. See bp_kit_host.h. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include "bp_kit_host.h"
#include "bp_kit_host_pages.h"
#include "bp_kit_plugin.h"
#include "bp_kit_stream.h"

int bp_kit_host_budget_reserve(bp_kit_host_budget_t* budget, uint64_t bytes, uint64_t* out_available) {
  uint64_t used = __atomic_load_n(&budget->used, __ATOMIC_RELAXED);
  do {
    /* used <= limit always holds, so the difference cannot wrap. */
    if (bytes > budget->limit - used) {
      *out_available = budget->limit - used;
      return 0;
    }
  } while (!__atomic_compare_exchange_n(&budget->used, &used, used + bytes, 1, __ATOMIC_RELAXED,
                                        __ATOMIC_RELAXED));
  return 1;
}

void bp_kit_host_budget_release(bp_kit_host_budget_t* budget, uint64_t bytes) {
  __atomic_fetch_sub(&budget->used, bytes, __ATOMIC_RELAXED);
}

bp_status_t bp_kit_host_buffer_allocate(bpp_device_t device, const bp_buffer_alloc_info_t* info,
                                        uint64_t min_align, bp_kit_host_budget_t* budget,
                                        bpp_buffer_t* out) {
  if (out) *out = NULL;
  if (!device || !info || !budget || !out)
    return BP_KIT_ERROR(BP_INVALID_ARGUMENT, "buffer_allocate: NULL argument");
  if (info->struct_size < offsetof(bp_buffer_alloc_info_t, next))
    return BP_KIT_ERROR(BP_INVALID_ARGUMENT, "buffer_allocate: info struct_size %u too small",
                        info->struct_size);
  uint64_t align = info->alignment > min_align ? info->alignment : min_align;
  if ((info->alignment & (info->alignment - 1)) || align == 0 || (align & (align - 1)))
    return BP_KIT_ERROR(BP_INVALID_ARGUMENT, "buffer_allocate: alignment %llu is not a power of two",
                        (unsigned long long)info->alignment);
  if (info->size_bytes == 0) return BP_KIT_ERROR(BP_INVALID_ARGUMENT, "buffer_allocate: size 0");
  uint64_t rounded;
  if (__builtin_add_overflow(info->size_bytes, align - 1, &rounded) || rounded > (uint64_t)PTRDIFF_MAX)
    return BP_KIT_ERROR(BP_INVALID_ARGUMENT, "buffer_allocate: size %llu overflows",
                        (unsigned long long)info->size_bytes);
  rounded &= ~(align - 1);
  uint64_t available = 0;
  if (!bp_kit_host_budget_reserve(budget, rounded, &available))
    return BP_KIT_ERROR(BP_RESOURCE_EXHAUSTED,
                        "buffer_allocate: %llu bytes requested, %llu available (memory budget %llu "
                        "bytes, %llu in use%s%s)",
                        (unsigned long long)info->size_bytes, (unsigned long long)available,
                        (unsigned long long)budget->limit,
                        (unsigned long long)(budget->limit - available), budget->hint ? "; " : "",
                        budget->hint ? budget->hint : "");
  struct bpp_buffer_s* b = calloc(1, sizeof *b);
  if (b) b->ptr = bp_kit_host_pages_alloc(align, rounded, &b->mapped);
  if (!b || !b->ptr) {
    free(b);
    bp_kit_host_budget_release(budget, rounded);
    return BP_KIT_ERROR(BP_RESOURCE_EXHAUSTED,
                        "buffer_allocate: the system refused %llu bytes (%llu of the %llu-byte "
                        "memory budget in use)",
                        (unsigned long long)info->size_bytes,
                        (unsigned long long)__atomic_load_n(&budget->used, __ATOMIC_RELAXED),
                        (unsigned long long)budget->limit);
  }
  b->size = info->size_bytes;
  b->reserved = rounded;
  b->space = info->memory_space;
  b->device = device;
  b->budget = budget;
  *out = b;
  return BP_OK;
}

bp_status_t bp_kit_host_buffer_wrap(bpp_device_t device, void* ptr, uint64_t size, uint32_t space,
                                    bp_kit_host_external_release_fn release, void* external,
                                    bpp_buffer_t* out) {
  struct bpp_buffer_s* b = calloc(1, sizeof *b);
  if (!b) return BP_KIT_ERROR(BP_RESOURCE_EXHAUSTED, "buffer_import: out of host memory");
  b->ptr = ptr;
  b->size = size;
  b->space = space;
  b->device = device;
  b->imported = 1;
  b->external_release = release;
  b->external = external;
  *out = b;
  return BP_OK;
}

void bp_kit_host_buffer_release(bpp_buffer_t b) {
  if (!b) return;
  if (b->imported) {
    if (b->external_release) b->external_release(b->external);
  } else {
    bp_kit_host_budget_release(b->budget, b->reserved);
    bp_kit_host_pages_free(b->ptr, b->reserved, b->mapped);
  }
  free(b);
}

uint64_t bp_kit_host_buffer_size(bpp_buffer_t b) { return b->size; }

bp_status_t bp_kit_host_check_range(const char* what, bpp_buffer_t b, uint64_t off, uint64_t size) {
  if (!b) return BP_KIT_ERROR(BP_INVALID_ARGUMENT, "%s: NULL buffer", what);
  if (off > b->size || size > b->size - off)
    return BP_KIT_ERROR(BP_OUT_OF_RANGE, "%s: range [%llu, +%llu) exceeds the buffer of %llu bytes",
                        what, (unsigned long long)off, (unsigned long long)size,
                        (unsigned long long)b->size);
  return BP_OK;
}

bp_status_t bp_kit_host_buffer_map(bpp_buffer_t b, uint64_t off, uint64_t size, void** out) {
  if (!b || !out) return BP_KIT_ERROR(BP_INVALID_ARGUMENT, "buffer_map: NULL argument");
  bp_status_t st = bp_kit_host_check_range("buffer_map", b, off, size);
  if (st == BP_OK) *out = b->ptr + off;
  return st;
}

bp_status_t bp_kit_host_buffer_unmap(bpp_buffer_t b) {
  return b ? BP_OK : BP_KIT_ERROR(BP_INVALID_ARGUMENT, "buffer_unmap: NULL buffer");
}

bp_status_t bp_kit_host_copy_h2d(bpp_stream_t s, const void* src, bpp_buffer_t dst, uint64_t off,
                                 uint64_t size) {
  bp_status_t st = bp_kit_host_check_range("copy_host_to_device destination", dst, off, size);
  return st ? st : bp_kit_stream_enqueue_copy(s, dst->ptr + off, src, size);
}

bp_status_t bp_kit_host_copy_d2h(bpp_stream_t s, bpp_buffer_t src, uint64_t off, void* dst,
                                 uint64_t size) {
  bp_status_t st = bp_kit_host_check_range("copy_device_to_host source", src, off, size);
  return st ? st : bp_kit_stream_enqueue_copy(s, dst, src->ptr + off, size);
}

bp_status_t bp_kit_host_copy_d2d(bpp_stream_t s, bpp_buffer_t src, uint64_t src_off,
                                 bpp_buffer_t dst, uint64_t dst_off, uint64_t size) {
  bp_status_t st = bp_kit_host_check_range("copy source", src, src_off, size);
  if (st == BP_OK) st = bp_kit_host_check_range("copy destination", dst, dst_off, size);
  return st ? st : bp_kit_stream_enqueue_copy(s, dst->ptr + dst_off, src->ptr + src_off, size);
}

bp_status_t bp_kit_host_buffer_fill(bpp_stream_t s, bpp_buffer_t b, uint64_t off, uint64_t size,
                                    const void* pattern, uint32_t psize) {
  bp_status_t st = bp_kit_host_check_range("buffer_fill", b, off, size);
  return st ? st : bp_kit_stream_enqueue_fill(s, b->ptr + off, size, pattern, psize);
}
