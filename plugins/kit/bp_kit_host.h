/* backplane plugin kit: buffers of host memory, for plugins whose device
 * memory is host memory (the CPU plugin, the template, simulators).
 *
 * The kit owns `struct bpp_buffer_s` here, so the functions below have the
 * ABI's signatures and go straight into the core table
 * (BP_KIT_HOST_MEMORY_SLOTS). Copies and fills are enqueued on the kit's
 * stream queues (bp_kit_stream.h). A plugin that includes this header does
 * not define struct bpp_buffer_s itself; it is not part of bp_kit.h, since
 * a plugin with device memory defines its own buffers.
 *
 * Thread-safe: a buffer is immutable after allocation; usage counters are
 * updated atomically.
 */
#ifndef BACKPLANE_KIT_HOST_H_
#define BACKPLANE_KIT_HOST_H_

#include <stdint.h>

#include "backplane/plugin.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The memory budget host buffers are accounted against: one per device, or
 * one for every device of an instance (the CPU plugin). Owned by the plugin;
 * must outlive its buffers. */
typedef struct bp_kit_host_budget {
  uint64_t limit;   /* bytes; UINT64_MAX: no limit */
  uint64_t used;    /* bytes reserved (<= limit); atomic access only */
  const char* hint; /* how to raise the limit, appended to RESOURCE_EXHAUSTED
                       messages, or NULL */
} bp_kit_host_budget_t;

/* Called once by bp_kit_host_buffer_release for memory the buffer does not
 * own (imported), instead of freeing it. */
typedef void (*bp_kit_host_external_release_fn)(void* external);

struct bpp_buffer_s {
  unsigned char* ptr;            /* aligned host memory, owned unless imported */
  uint64_t size;                 /* bytes requested */
  uint64_t reserved;             /* bytes accounted in the budget (rounded to the alignment) */
  uint32_t space;                /* memory space index it was allocated in */
  struct bpp_device_s* device;   /* the allocating device */
  bp_kit_host_budget_t* budget;  /* where `reserved` is accounted */
  /* Imported memory (bp_kit_host_buffer_wrap): not freed, not in the
   * budget; external_release(external) runs on release when not NULL. */
  int imported;
  int mapped; /* owned memory mapped on its own (bp_kit_host_pages.h) */
  bp_kit_host_external_release_fn external_release;
  void* external;
};

/* Allocates info->size_bytes of host memory aligned to max(info->alignment,
 * min_alignment) (powers of two), reserving the rounded size in `budget`
 * atomically (no two threads overrun it). The plugin checks
 * info->memory_space first. INVALID_ARGUMENT for a short info, size 0, a bad
 * alignment or an overflowing size; RESOURCE_EXHAUSTED naming the requested
 * and available bytes (and the budget's hint) past the budget, or when the
 * system refuses the memory. */
bp_status_t bp_kit_host_buffer_allocate(bpp_device_t device, const bp_buffer_alloc_info_t* info,
                                        uint64_t min_alignment, bp_kit_host_budget_t* budget,
                                        bpp_buffer_t* out_buffer);
/* Wraps `size` bytes of caller memory at `ptr` as a buffer of `device` in
 * space `space` without a copy (host pointer and DLPack imports). The memory
 * is not counted in any budget and not freed: on release the buffer calls
 * release(external) when release is not NULL. The caller checked ptr, size
 * and alignment. RESOURCE_EXHAUSTED when the host heap is out; then release
 * is not called. */
bp_status_t bp_kit_host_buffer_wrap(bpp_device_t device, void* ptr, uint64_t size, uint32_t space,
                                    bp_kit_host_external_release_fn release, void* external,
                                    bpp_buffer_t* out_buffer);
/* Reserves `bytes` in `budget`: 1, or 0 and the bytes still available when
 * they do not fit. Thread-safe. bp_kit_host_budget_release returns them. */
int bp_kit_host_budget_reserve(bp_kit_host_budget_t* budget, uint64_t bytes,
                               uint64_t* out_available);
void bp_kit_host_budget_release(bp_kit_host_budget_t* budget, uint64_t bytes);

/* ABI slots (bpp_core_table_t) for host buffers on kit streams: */
void bp_kit_host_buffer_release(bpp_buffer_t buffer);
bp_status_t bp_kit_host_buffer_map(bpp_buffer_t buffer, uint64_t offset, uint64_t size,
                                   void** out_ptr);
bp_status_t bp_kit_host_buffer_unmap(bpp_buffer_t buffer);
bp_status_t bp_kit_host_copy_h2d(bpp_stream_t stream, const void* src, bpp_buffer_t dst,
                                 uint64_t dst_offset, uint64_t size);
bp_status_t bp_kit_host_copy_d2h(bpp_stream_t stream, bpp_buffer_t src, uint64_t src_offset,
                                 void* dst, uint64_t size);
bp_status_t bp_kit_host_copy_d2d(bpp_stream_t stream, bpp_buffer_t src, uint64_t src_offset,
                                 bpp_buffer_t dst, uint64_t dst_offset, uint64_t size);
bp_status_t bp_kit_host_buffer_fill(bpp_stream_t stream, bpp_buffer_t buffer, uint64_t offset,
                                    uint64_t size, const void* pattern, uint32_t pattern_size);

#define BP_KIT_HOST_MEMORY_SLOTS                     \
  .buffer_release = bp_kit_host_buffer_release,      \
  .buffer_map = bp_kit_host_buffer_map,              \
  .buffer_unmap = bp_kit_host_buffer_unmap,          \
  .copy_host_to_device = bp_kit_host_copy_h2d,       \
  .copy_device_to_host = bp_kit_host_copy_d2h,       \
  .copy_device_to_device = bp_kit_host_copy_d2d,     \
  .buffer_fill = bp_kit_host_buffer_fill

/* BP_OK when [offset, offset + size) lies inside `buffer` (overflow-safe);
 * else INVALID_ARGUMENT (NULL buffer) or OUT_OF_RANGE, naming `what`. */
bp_status_t bp_kit_host_check_range(const char* what, bpp_buffer_t buffer, uint64_t offset,
                                    uint64_t size);

/* The buffer's size in bytes (a bp_kit_buffer_size_fn for bp_kit_call_check). */
uint64_t bp_kit_host_buffer_size(bpp_buffer_t buffer);

/* Host pointer of a descriptor's element [0, ..., 0]. */
static inline unsigned char* bp_kit_host_desc_ptr(const bp_tensor_desc_t* d) {
  return d->buffer->ptr + d->byte_offset;
}

#ifdef __cplusplus
}
#endif
#endif /* BACKPLANE_KIT_HOST_H_ */
