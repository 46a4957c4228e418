/* backplane gpu_common: range sets, the suballocator and the event pool
 * (bp_gpu_heap.h). The range set is the Vulkan plugin's (which uses it from
 * here); the heap places best fit over every shared block and gets its
 * blocks from the owner's callbacks.
 */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "bp_gpu_heap.h"
#include "bp_kit.h"

/* A block; dedicated blocks have no free ranges. */
typedef struct heap_block {
  struct heap_block* next;
  void* handle;
  uint64_t size;
  int dedicated;
  bp_gpu_ranges_t r;
} heap_block_t;

struct bp_gpu_heap {
  bp_gpu_heap_config_t cfg;
  bp_gpu_heap_ops_t ops;
  void* ctx;
  pthread_mutex_t mu;
  heap_block_t* blocks;
  uint64_t held, used;
};

static uint64_t align_up(uint64_t v, uint64_t a) { return (v + a - 1) & ~(a - 1); }

bp_status_t bp_gpu_heap_create(const bp_gpu_heap_config_t* config, const bp_gpu_heap_ops_t* ops, void* ctx,
                               bp_gpu_heap_t** out_heap) {
  if (!out_heap) return BP_KIT_ERROR(BP_INVALID_ARGUMENT, "heap: NULL out_heap");
  *out_heap = NULL;
  if (!config || !ops || !ops->block_alloc || !ops->block_free)
    return BP_KIT_ERROR(BP_INVALID_ARGUMENT, "heap: NULL config or callbacks");
  if (config->block_size == 0 || config->alignment == 0 || (config->alignment & (config->alignment - 1)) ||
      config->block_size % config->alignment)
    return BP_KIT_ERROR(BP_INVALID_ARGUMENT,
                        "heap: block size %llu must be a nonzero multiple of the alignment %llu (a power of two)",
                        (unsigned long long)config->block_size, (unsigned long long)config->alignment);
  bp_gpu_heap_t* h = calloc(1, sizeof *h);
  if (!h) return BP_KIT_ERROR(BP_RESOURCE_EXHAUSTED, "heap: out of host memory");
  h->cfg = *config;
  h->ops = *ops;
  h->ctx = ctx;
  pthread_mutex_init(&h->mu, NULL);
  *out_heap = h;
  return BP_OK;
}

static void block_drop(bp_gpu_heap_t* h, heap_block_t* b) {
  heap_block_t** p = &h->blocks;
  while (*p != b) p = &(*p)->next;
  *p = b->next;
  h->ops.block_free(h->ctx, b->handle);
  h->held -= b->size;
  bp_gpu_ranges_fini(&b->r);
  free(b);
}

void bp_gpu_heap_destroy(bp_gpu_heap_t* heap) {
  if (!heap) return;
  while (heap->blocks) block_drop(heap, heap->blocks);
  pthread_mutex_destroy(&heap->mu);
  free(heap);
}

/* ---- range sets ------------------------------------------------------------ */
bp_status_t bp_gpu_ranges_init(bp_gpu_ranges_t* r, uint64_t total) {
  memset(r, 0, sizeof *r);
  r->cap = 16;
  r->free = malloc(r->cap * sizeof *r->free);
  if (!r->free) return BP_KIT_ERROR(BP_RESOURCE_EXHAUSTED, "ranges: out of host memory");
  r->free[0].off = 0;
  r->free[0].size = total;
  r->count = total ? 1 : 0;
  r->total = r->free_bytes = total;
  return BP_OK;
}

void bp_gpu_ranges_fini(bp_gpu_ranges_t* r) {
  free(r->free);
  memset(r, 0, sizeof *r);
}

/* Room for one more free range; 0 without host memory. */
static int ranges_grow(bp_gpu_ranges_t* r) {
  if (r->count < r->cap) return 1;
  uint32_t cap = r->cap ? 2 * r->cap : 16;
  bp_gpu_range_t* n = realloc(r->free, cap * sizeof *n);
  if (!n) return 0;
  r->free = n;
  r->cap = cap;
  return 1;
}

int bp_gpu_ranges_take(bp_gpu_ranges_t* r, uint32_t i, uint64_t start, uint64_t size) {
  bp_gpu_range_t* f = &r->free[i];
  uint64_t pad = start - f->off, tail = f->size - pad - size;
  if (pad && tail) { /* one range becomes two */
    if (!ranges_grow(r)) return -1;
    f = &r->free[i];
    memmove(&r->free[i + 2], &r->free[i + 1], (r->count - i - 1) * sizeof *f);
    r->count++;
    r->free[i + 1].off = start + size;
    r->free[i + 1].size = tail;
    f->size = pad;
  } else if (pad) {
    f->size = pad;
  } else if (tail) {
    f->off = start + size;
    f->size = tail;
  } else {
    memmove(&r->free[i], &r->free[i + 1], (r->count - i - 1) * sizeof *f);
    r->count--;
  }
  r->free_bytes -= size;
  return 0;
}

int bp_gpu_ranges_alloc(bp_gpu_ranges_t* r, uint64_t size, uint64_t align, uint64_t* out_off) {
  if (size == 0 || align == 0 || (align & (align - 1))) return -1;
  for (uint32_t i = 0; i < r->count; i++) {
    const bp_gpu_range_t* f = &r->free[i];
    uint64_t start = align_up(f->off, align);
    if (start - f->off > f->size || f->size - (start - f->off) < size) continue;
    if (bp_gpu_ranges_take(r, i, start, size)) return -1;
    *out_off = start;
    return 0;
  }
  return -1;
}

int bp_gpu_ranges_free(bp_gpu_ranges_t* r, uint64_t off, uint64_t size) {
  if (size == 0 || off > r->total || r->total - off < size) return -1;
  uint32_t i = 0; /* first free range at or after off */
  while (i < r->count && r->free[i].off < off) i++;
  if (i > 0 && r->free[i - 1].off + r->free[i - 1].size > off) return -1;
  if (i < r->count && off + size > r->free[i].off) return -1;
  int prev = i > 0 && r->free[i - 1].off + r->free[i - 1].size == off;
  int next = i < r->count && off + size == r->free[i].off;
  if (prev && next) {
    r->free[i - 1].size += size + r->free[i].size;
    memmove(&r->free[i], &r->free[i + 1], (r->count - i - 1) * sizeof r->free[0]);
    r->count--;
  } else if (prev) {
    r->free[i - 1].size += size;
  } else if (next) {
    r->free[i].off = off;
    r->free[i].size += size;
  } else {
    if (!ranges_grow(r)) return -2;
    memmove(&r->free[i + 1], &r->free[i], (r->count - i) * sizeof r->free[0]);
    r->free[i].off = off;
    r->free[i].size = size;
    r->count++;
  }
  r->free_bytes += size;
  return 0;
}

uint64_t bp_gpu_ranges_largest(const bp_gpu_ranges_t* r) {
  uint64_t m = 0;
  for (uint32_t i = 0; i < r->count; i++)
    if (r->free[i].size > m) m = r->free[i].size;
  return m;
}

/* ---- the heap ------------------------------------------------------------------ */
static int block_empty(const heap_block_t* b) { return !b->dedicated && b->r.free_bytes == b->size; }

/* A new block of `size` bytes (lock held); NULL with the error reported. */
static heap_block_t* block_new(bp_gpu_heap_t* h, uint64_t size, int dedicated, bp_status_t* st) {
  heap_block_t* b = calloc(1, sizeof *b);
  if (!b || (!dedicated && bp_gpu_ranges_init(&b->r, size))) {
    free(b);
    *st = BP_KIT_ERROR(BP_RESOURCE_EXHAUSTED, "heap: out of host memory");
    return NULL;
  }
  *st = h->ops.block_alloc(h->ctx, size, &b->handle);
  if (*st) {
    bp_gpu_ranges_fini(&b->r);
    free(b);
    return NULL;
  }
  b->size = size;
  b->dedicated = dedicated;
  b->next = h->blocks;
  h->blocks = b;
  h->held += size;
  return b;
}

static bp_status_t over_budget(const bp_gpu_heap_t* h, uint64_t size) {
  return BP_KIT_ERROR(BP_RESOURCE_EXHAUSTED,
                      "heap: %llu bytes requested; %llu of the %llu-byte budget are held (%llu in use)",
                      (unsigned long long)size, (unsigned long long)h->held, (unsigned long long)h->cfg.budget,
                      (unsigned long long)h->used);
}

static int fits_budget(const bp_gpu_heap_t* h, uint64_t bytes) {
  return !h->cfg.budget || (bytes <= h->cfg.budget && h->held <= h->cfg.budget - bytes);
}

bp_status_t bp_gpu_heap_alloc(bp_gpu_heap_t* h, uint64_t size, bp_gpu_alloc_t* out) {
  if (!h || !out) return BP_KIT_ERROR(BP_INVALID_ARGUMENT, "heap: NULL argument");
  memset(out, 0, sizeof *out);
  const uint64_t a = h->cfg.alignment;
  if (size == 0 || size > UINT64_MAX - a) return BP_KIT_ERROR(BP_INVALID_ARGUMENT, "heap: size %llu", (unsigned long long)size);
  const uint64_t need = align_up(size, a);
  bp_status_t st = BP_OK;
  pthread_mutex_lock(&h->mu);
  if ((h->cfg.dedicated_min && size >= h->cfg.dedicated_min) || need > h->cfg.block_size) {
    heap_block_t* b = fits_budget(h, need) ? block_new(h, need, 1, &st) : NULL;
    if (!b && !st) st = over_budget(h, size);
    if (b) {
      out->block = b->handle;
      out->size = size;
      h->used += size;
    }
    pthread_mutex_unlock(&h->mu);
    return st;
  }
  /* best fit: the free range that leaves the least over */
  heap_block_t* best = NULL;
  uint32_t bi = 0;
  uint64_t best_start = 0, best_left = UINT64_MAX;
  for (heap_block_t* b = h->blocks; b; b = b->next)
    for (uint32_t i = 0; i < b->r.count; i++) {
      const bp_gpu_range_t* f = &b->r.free[i];
      uint64_t start = align_up(f->off, a);
      if (start - f->off > f->size || f->size - (start - f->off) < size) continue;
      uint64_t left = f->size - size;
      if (left < best_left) {
        best = b;
        bi = i;
        best_start = start;
        best_left = left;
      }
    }
  if (!best) {
    /* a new shared block; near the budget, one just big enough */
    uint64_t bsize = fits_budget(h, h->cfg.block_size) ? h->cfg.block_size : need;
    best = fits_budget(h, bsize) ? block_new(h, bsize, 0, &st) : NULL;
    if (!best && !st) st = over_budget(h, size);
    bi = 0;
    best_start = 0;
  }
  if (best && bp_gpu_ranges_take(&best->r, bi, best_start, size)) {
    st = BP_KIT_ERROR(BP_RESOURCE_EXHAUSTED, "heap: out of host memory");
    if (block_empty(best)) block_drop(h, best);
    best = NULL;
  }
  if (best) {
    out->block = best->handle;
    out->offset = best_start;
    out->size = size;
    h->used += size;
  }
  pthread_mutex_unlock(&h->mu);
  return st;
}

bp_status_t bp_gpu_heap_free(bp_gpu_heap_t* h, const bp_gpu_alloc_t* alloc) {
  if (!h || !alloc) return BP_KIT_ERROR(BP_INVALID_ARGUMENT, "heap: NULL argument");
  pthread_mutex_lock(&h->mu);
  heap_block_t* b = h->blocks;
  while (b && b->handle != alloc->block) b = b->next;
  bp_status_t st = BP_OK;
  if (!b || alloc->size == 0) {
    st = BP_KIT_ERROR(BP_INVALID_ARGUMENT, "heap: [%llu, +%llu) is not in a block of this heap (freed already?)",
                      (unsigned long long)alloc->offset, (unsigned long long)alloc->size);
  } else if (b->dedicated) {
    if (alloc->offset != 0 || align_up(alloc->size, h->cfg.alignment) != b->size) {
      st = BP_KIT_ERROR(BP_INVALID_ARGUMENT, "heap: [%llu, +%llu) is not the dedicated block's allocation",
                        (unsigned long long)alloc->offset, (unsigned long long)alloc->size);
    } else {
      h->used -= alloc->size;
      block_drop(h, b);
    }
  } else {
    int r = bp_gpu_ranges_free(&b->r, alloc->offset, alloc->size);
    if (r == -1) {
      st = BP_KIT_ERROR(BP_INVALID_ARGUMENT, "heap: [%llu, +%llu) is free already (a double free?) or outside its block",
                        (unsigned long long)alloc->offset, (unsigned long long)alloc->size);
    } else if (r == -2) {
      st = BP_KIT_ERROR(BP_RESOURCE_EXHAUSTED, "heap: out of host memory");
    } else {
      h->used -= alloc->size;
      /* keep one empty shared block for the next allocation */
      if (block_empty(b))
        for (heap_block_t* o = h->blocks; o; o = o->next)
          if (o != b && block_empty(o)) {
            block_drop(h, b);
            break;
          }
    }
  }
  pthread_mutex_unlock(&h->mu);
  return st;
}

void bp_gpu_heap_stats(bp_gpu_heap_t* h, bp_gpu_heap_stats_t* out) {
  memset(out, 0, sizeof *out);
  pthread_mutex_lock(&h->mu);
  out->held_bytes = h->held;
  out->used_bytes = h->used;
  for (heap_block_t* b = h->blocks; b; b = b->next) {
    out->blocks++;
    out->free_ranges += b->r.count;
    uint64_t m = bp_gpu_ranges_largest(&b->r);
    if (m > out->largest_free) out->largest_free = m;
  }
  pthread_mutex_unlock(&h->mu);
}

/* ---- event pool --------------------------------------------------------- */
struct bp_gpu_event_pool {
  bp_gpu_event_ops_t ops;
  void* ctx;
  pthread_mutex_t mu;
  uint32_t max, count;
  uint64_t created;
  void** cached;
};

bp_status_t bp_gpu_event_pool_create(const bp_gpu_event_ops_t* ops, void* ctx, uint32_t max_cached,
                                     bp_gpu_event_pool_t** out_pool) {
  if (!out_pool) return BP_KIT_ERROR(BP_INVALID_ARGUMENT, "event pool: NULL out_pool");
  *out_pool = NULL;
  if (!ops || !ops->create || !ops->destroy) return BP_KIT_ERROR(BP_INVALID_ARGUMENT, "event pool: NULL callbacks");
  bp_gpu_event_pool_t* p = calloc(1, sizeof *p);
  void** cached = max_cached ? calloc(max_cached, sizeof *cached) : NULL;
  if (!p || (max_cached && !cached)) {
    free(p);
    free(cached);
    return BP_KIT_ERROR(BP_RESOURCE_EXHAUSTED, "event pool: out of host memory");
  }
  p->ops = *ops;
  p->ctx = ctx;
  p->max = max_cached;
  p->cached = cached;
  pthread_mutex_init(&p->mu, NULL);
  *out_pool = p;
  return BP_OK;
}

void bp_gpu_event_pool_destroy(bp_gpu_event_pool_t* p) {
  if (!p) return;
  for (uint32_t i = 0; i < p->count; i++) p->ops.destroy(p->ctx, p->cached[i]);
  pthread_mutex_destroy(&p->mu);
  free(p->cached);
  free(p);
}

bp_status_t bp_gpu_event_get(bp_gpu_event_pool_t* p, void** out_event) {
  if (!p || !out_event) return BP_KIT_ERROR(BP_INVALID_ARGUMENT, "event pool: NULL argument");
  pthread_mutex_lock(&p->mu);
  bp_status_t st = BP_OK;
  if (p->count) {
    *out_event = p->cached[--p->count];
  } else {
    st = p->ops.create(p->ctx, out_event);
    if (!st) p->created++;
  }
  pthread_mutex_unlock(&p->mu);
  return st;
}

bp_status_t bp_gpu_event_put(bp_gpu_event_pool_t* p, void* event) {
  if (!p || !event) return BP_KIT_ERROR(BP_INVALID_ARGUMENT, "event pool: NULL argument");
  pthread_mutex_lock(&p->mu);
  for (uint32_t i = 0; i < p->count; i++)
    if (p->cached[i] == event) {
      pthread_mutex_unlock(&p->mu);
      return BP_KIT_ERROR(BP_INVALID_ARGUMENT, "event pool: event %p is in the pool already (put twice?)", event);
    }
  if (p->count < p->max) p->cached[p->count++] = event;
  else p->ops.destroy(p->ctx, event);
  pthread_mutex_unlock(&p->mu);
  return BP_OK;
}

void bp_gpu_event_pool_counts(bp_gpu_event_pool_t* p, uint64_t* out_created, uint32_t* out_cached) {
  pthread_mutex_lock(&p->mu);
  if (out_created) *out_created = p->created;
  if (out_cached) *out_cached = p->count;
  pthread_mutex_unlock(&p->mu);
}
