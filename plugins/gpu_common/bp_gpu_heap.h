/* backplane gpu_common: the device-memory suballocator and the event pool
 * every GPU plugin can use (API-agnostic host C; the plugin supplies the
 * API calls as callbacks).
 *
 * The heap carves small allocations from large blocks (best fit over every
 * block's free ranges, neighbours coalesced on free, offsets aligned to the
 * device's alignment) and gives large ones a block of their own. Blocks
 * count against a budget: past it, allocation fails with
 * RESOURCE_EXHAUSTED naming the requested, held and budget bytes. Empty
 * blocks go back to the API (one empty shared block is kept for the next
 * allocation). Freeing a range that is not allocated (a double free, a
 * foreign block) is INVALID_ARGUMENT and changes nothing.
 *
 * The event pool recycles API event objects (CUDA events, Level Zero
 * events): get hands out a cached one or creates one; put caches it (up to
 * a limit) or destroys it; putting an event that is already cached is
 * INVALID_ARGUMENT.
 *
 * Both are thread-safe (one mutex each); callbacks run under it and must
 * not call back into the heap or pool. Errors carry their message through
 * bp_kit_error.
 */
#ifndef BP_GPU_HEAP_H_
#define BP_GPU_HEAP_H_

#include <stdint.h>

#include "backplane/plugin.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- range sets: the free ranges of one block (not thread-safe) ------- */
typedef struct bp_gpu_range {
  uint64_t off, size;
} bp_gpu_range_t;

typedef struct bp_gpu_ranges {
  bp_gpu_range_t* free; /* sorted by offset, never adjacent (coalesced) */
  uint32_t count, cap;
  uint64_t total; /* block size */
  uint64_t free_bytes;
} bp_gpu_ranges_t;

/* All of [0, total) free; RESOURCE_EXHAUSTED without host memory. */
bp_status_t bp_gpu_ranges_init(bp_gpu_ranges_t* r, uint64_t total);
void bp_gpu_ranges_fini(bp_gpu_ranges_t* r);
/* First fit of `size` bytes at a multiple of `align` (a power of two):
 * 0 and the offset, or -1 when no free range fits. */
int bp_gpu_ranges_alloc(bp_gpu_ranges_t* r, uint64_t size, uint64_t align, uint64_t* out_off);
/* Takes [start, start + size) out of free range i, which must hold it (the
 * caller's own placement, e.g. best fit): 0, or -1 without host memory. */
int bp_gpu_ranges_take(bp_gpu_ranges_t* r, uint32_t i, uint64_t start, uint64_t size);
/* Gives [off, off + size) back, merging neighbours: 0, or -1 when any of
 * it is free already (a double free) or outside the block, -2 without
 * host memory. */
int bp_gpu_ranges_free(bp_gpu_ranges_t* r, uint64_t off, uint64_t size);
/* Largest free range (fragmentation reports). */
uint64_t bp_gpu_ranges_largest(const bp_gpu_ranges_t* r);

/* ---- the heap ------------------------------------------------------------ */
typedef struct bp_gpu_heap bp_gpu_heap_t;

typedef struct bp_gpu_heap_ops {
  /* A new block of `size` bytes in *out_block (an opaque API handle). */
  bp_status_t (*block_alloc)(void* ctx, uint64_t size, void** out_block);
  void (*block_free)(void* ctx, void* block);
} bp_gpu_heap_ops_t;

typedef struct bp_gpu_heap_config {
  uint64_t block_size;    /* bytes of a shared block (e.g. 64 MiB) */
  uint64_t dedicated_min; /* requests of at least this many bytes get a block of their own */
  uint64_t alignment;     /* of every offset: a power of two (the device's base address alignment) */
  uint64_t budget;        /* bytes of blocks the heap may hold; 0: no limit */
} bp_gpu_heap_config_t;

/* One allocation: bytes [offset, offset + size) of `block`. */
typedef struct bp_gpu_alloc {
  void* block;
  uint64_t offset;
  uint64_t size; /* as requested */
} bp_gpu_alloc_t;

typedef struct bp_gpu_heap_stats {
  uint64_t held_bytes;    /* bytes of every block */
  uint64_t used_bytes;    /* bytes handed out (alignment padding excluded) */
  uint64_t blocks;        /* blocks held, dedicated ones included */
  uint64_t free_ranges;   /* free ranges over all shared blocks (fragmentation) */
  uint64_t largest_free;  /* largest free range of a shared block */
} bp_gpu_heap_stats_t;

/* INVALID_ARGUMENT for a zero block size, an alignment that is not a power
 * of two, or NULL ops; RESOURCE_EXHAUSTED without host memory. */
bp_status_t bp_gpu_heap_create(const bp_gpu_heap_config_t* config, const bp_gpu_heap_ops_t* ops, void* ctx,
                               bp_gpu_heap_t** out_heap);
/* Frees every block, allocated ranges included (the owner's objects are
 * gone). NULL is a no-op. */
void bp_gpu_heap_destroy(bp_gpu_heap_t* heap);
bp_status_t bp_gpu_heap_alloc(bp_gpu_heap_t* heap, uint64_t size, bp_gpu_alloc_t* out);
bp_status_t bp_gpu_heap_free(bp_gpu_heap_t* heap, const bp_gpu_alloc_t* alloc);
void bp_gpu_heap_stats(bp_gpu_heap_t* heap, bp_gpu_heap_stats_t* out);

typedef struct bp_gpu_event_pool bp_gpu_event_pool_t;

typedef struct bp_gpu_event_ops {
  bp_status_t (*create)(void* ctx, void** out_event);
  void (*destroy)(void* ctx, void* event);
} bp_gpu_event_ops_t;

/* Keeps at most `max_cached` events for reuse. */
bp_status_t bp_gpu_event_pool_create(const bp_gpu_event_ops_t* ops, void* ctx, uint32_t max_cached,
                                     bp_gpu_event_pool_t** out_pool);
/* Destroys the cached events (events still out are the caller's). */
void bp_gpu_event_pool_destroy(bp_gpu_event_pool_t* pool);
bp_status_t bp_gpu_event_get(bp_gpu_event_pool_t* pool, void** out_event);
bp_status_t bp_gpu_event_put(bp_gpu_event_pool_t* pool, void* event);
/* Events created so far and events cached now. */
void bp_gpu_event_pool_counts(bp_gpu_event_pool_t* pool, uint64_t* out_created, uint32_t* out_cached);

#ifdef __cplusplus
}
#endif
#endif /* BP_GPU_HEAP_H_ */
