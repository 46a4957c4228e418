/* backplane Vulkan plugin: the suballocator and the memory pools.
 *
 * A pool is one memory type. Small buffers are carved first-fit (the range
 * sets of plugins/gpu_common, bp_gpu_heap.h) from 64 MiB VkDeviceMemory blocks (alignment from vkGetBufferMemoryRequirements);
 * buffers of 16 MiB and more get a dedicated allocation. Empty blocks are
 * freed, so idle pools give their memory back. The budget of the memory
 * type's heap (VK_EXT_memory_budget when present, else 3/4 of the heap;
 * the "budget_mb" option lowers it) bounds what a pool takes.
 */
#include <stdlib.h>
#include <string.h>

#include "vk_internal.h"

/* ---- pools ----------------------------------------------------------- */
uint64_t vk_pool_budget(vk_pool_t* p) {
  struct bpp_device_s* d = p->dev;
  uint64_t heap = d->mem_props.memoryHeaps[p->heap_index].size;
  uint64_t budget = heap / 4 * 3;
  if (d->feat.memory_budget_ext && d->inst->vk.vkGetPhysicalDeviceMemoryProperties2) {
    VkPhysicalDeviceMemoryBudgetPropertiesEXT b = {
        .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_MEMORY_BUDGET_PROPERTIES_EXT};
    VkPhysicalDeviceMemoryProperties2 mp = {
        .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_MEMORY_PROPERTIES_2, .pNext = &b};
    d->inst->vk.vkGetPhysicalDeviceMemoryProperties2(d->phys, &mp);
    if (b.heapBudget[p->heap_index]) {
      /* heapBudget counts every process; ours is inside heapUsage. */
      uint64_t others = b.heapUsage[p->heap_index] > p->reserved_bytes
                            ? b.heapUsage[p->heap_index] - p->reserved_bytes
                            : 0;
      budget = b.heapBudget[p->heap_index] > others ? b.heapBudget[p->heap_index] - others : 0;
    }
  }
  if (d->inst->opt.budget_limit && d->inst->opt.budget_limit < budget)
    budget = d->inst->opt.budget_limit;
  return budget;
}

uint64_t vk_pool_available(vk_pool_t* p) {
  uint64_t b = vk_pool_budget(p);
  return b > p->reserved_bytes ? b - p->reserved_bytes : 0;
}

/* New VkDeviceMemory of `size` bytes (lock held). */
/* New VkDeviceMemory of `size` bytes (lock held): exportable in an
 * exportable pool, imported from `import_fd` when it is >= 0. */
static bp_status_t new_block(vk_pool_t* p, uint64_t size, int dedicated, int import_fd,
                             vk_block_t** out) {
  struct bpp_device_s* d = p->dev;
  bp_status_t st = BP_OK;
  vk_block_t* b = calloc(1, sizeof *b);
  if (!b) return vk_error(BP_RESOURCE_EXHAUSTED, "vulkan: out of host memory");
  VkMemoryAllocateFlagsInfo flags = {.sType = VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_FLAGS_INFO,
                                     .flags = VK_MEMORY_ALLOCATE_DEVICE_ADDRESS_BIT};
  VkExportMemoryAllocateInfo exp = {.sType = VK_STRUCTURE_TYPE_EXPORT_MEMORY_ALLOCATE_INFO,
                                    .pNext = &flags,
                                    .handleTypes = VK_EXTERNAL_MEMORY_HANDLE_TYPE_OPAQUE_FD_BIT};
  VkImportMemoryFdInfoKHR imp = {.sType = VK_STRUCTURE_TYPE_IMPORT_MEMORY_FD_INFO_KHR,
                                 .pNext = &flags,
                                 .handleType = VK_EXTERNAL_MEMORY_HANDLE_TYPE_OPAQUE_FD_BIT,
                                 .fd = import_fd};
  VkMemoryAllocateInfo ai = {.sType = VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO,
                             .pNext = import_fd >= 0 ? (const void*)&imp
                                      : p->exportable ? (const void*)&exp
                                                      : (const void*)&flags,
                             .allocationSize = size,
                             .memoryTypeIndex = p->type_index};
  VkResult r = d->vk.vkAllocateMemory(d->dev, &ai, NULL, &b->mem);
  if (r != VK_SUCCESS) {
    st = vk_error(import_fd >= 0 && r == VK_ERROR_INVALID_EXTERNAL_HANDLE ? BP_INVALID_ARGUMENT
                                                                         : vk_status_of(r),
                  "vulkan: vkAllocateMemory of %llu bytes (memory type %u%s) failed: %s",
                  (unsigned long long)size, p->type_index,
                  import_fd >= 0 ? ", importing an opaque fd" : "", vk_result_name(r));
    goto cleanup;
  }
  if (p->host_visible) {
    void* m = NULL;
    r = d->vk.vkMapMemory(d->dev, b->mem, 0, VK_WHOLE_SIZE, 0, &m);
    if (r != VK_SUCCESS) {
      st = vk_error(vk_status_of(r), "vulkan: vkMapMemory failed: %s", vk_result_name(r));
      d->vk.vkFreeMemory(d->dev, b->mem, NULL);
      goto cleanup;
    }
    b->map = m;
  }
  if (!dedicated && (st = vk_ranges_init(&b->ranges, size)) != BP_OK) {
    if (b->map) d->vk.vkUnmapMemory(d->dev, b->mem);
    d->vk.vkFreeMemory(d->dev, b->mem, NULL);
    st = vk_error(BP_RESOURCE_EXHAUSTED, "vulkan: out of host memory");
    goto cleanup;
  }
  b->size = size;
  b->dedicated = dedicated;
  p->reserved_bytes += size;
  *out = b;
  b = NULL;
cleanup:
  free(b);
  return st;
}

static void free_block(vk_pool_t* p, vk_block_t* b) {
  struct bpp_device_s* d = p->dev;
  if (b->map) d->vk.vkUnmapMemory(d->dev, b->mem);
  d->vk.vkFreeMemory(d->dev, b->mem, NULL);
  p->reserved_bytes -= b->size;
  if (!b->dedicated) vk_ranges_fini(&b->ranges);
  free(b);
}

static bp_status_t pool_alloc(vk_pool_t* p, uint64_t size, uint64_t align, int import_fd,
                              vk_alloc_t* out) {
  bp_status_t st = BP_OK;
  memset(out, 0, sizeof *out);
  pthread_mutex_lock(&p->lock);
  if (size < VK_DEDICATED_MIN && !p->exportable && import_fd < 0) {
    for (vk_block_t* b = p->blocks; b; b = b->next) {
      uint64_t off;
      if (b->dedicated || vk_ranges_alloc(&b->ranges, size, align, &off) != 0) continue;
      b->live++;
      out->block = b;
      out->offset = off;
      out->size = size;
      goto done;
    }
  }
  int dedicated = size >= VK_DEDICATED_MIN || p->exportable || import_fd >= 0;
  uint64_t want = dedicated ? size : p->block_size;
  uint64_t avail = vk_pool_available(p);
  if (!dedicated && want > avail && size <= avail) want = size; /* a smaller last block */
  if (want > avail) {
    st = vk_error(BP_RESOURCE_EXHAUSTED,
                  "vulkan: cannot allocate %llu bytes: %llu available (budget %llu, %llu in use, "
                  "memory heap %u)",
                  (unsigned long long)size, (unsigned long long)avail,
                  (unsigned long long)vk_pool_budget(p), (unsigned long long)p->reserved_bytes,
                  p->heap_index);
    goto done;
  }
  vk_block_t* b = NULL;
  if ((st = new_block(p, want, dedicated, import_fd, &b)) != BP_OK) goto done;
  uint64_t off = 0;
  if (!dedicated && vk_ranges_alloc(&b->ranges, size, align, &off) != 0) {
    free_block(p, b);
    st = vk_error(BP_INTERNAL, "vulkan: a fresh block cannot hold %llu bytes", (unsigned long long)size);
    goto done;
  }
  b->live = 1;
  b->next = p->blocks;
  p->blocks = b;
  out->block = b;
  out->offset = off;
  out->size = size;
done:
  if (st == BP_OK) p->used_bytes += size;
  pthread_mutex_unlock(&p->lock);
  return st;
}

bp_status_t vk_pool_alloc(vk_pool_t* p, uint64_t size, uint64_t align, vk_alloc_t* out) {
  return pool_alloc(p, size, align, -1, out);
}

bp_status_t vk_pool_import(vk_pool_t* p, uint64_t size, int fd, vk_alloc_t* out) {
  return pool_alloc(p, size, 1, fd, out);
}

void vk_pool_free(vk_pool_t* p, const vk_alloc_t* a) {
  if (!a->block) return;
  pthread_mutex_lock(&p->lock);
  vk_block_t* b = a->block;
  if (!b->dedicated) vk_ranges_free(&b->ranges, a->offset, a->size);
  p->used_bytes -= a->size;
  if (--b->live == 0) {
    vk_block_t** pp = &p->blocks;
    while (*pp && *pp != b) pp = &(*pp)->next;
    if (*pp) *pp = b->next;
    free_block(p, b);
  }
  pthread_mutex_unlock(&p->lock);
}

void vk_pool_fini(vk_pool_t* p) {
  while (p->blocks) {
    vk_block_t* b = p->blocks;
    p->blocks = b->next;
    free_block(p, b);
  }
  pthread_mutex_destroy(&p->lock);
}

/* ---- buffers ---------------------------------------------------------- */
/* vk_buffer_create, or with import_fd >= 0 vk_buffer_import_fd. */
static bp_status_t buffer_create(struct bpp_device_s* d, vk_pool_t* pool, uint64_t size,
                                 uint32_t kind, int import_fd, struct bpp_buffer_s** out) {
  bp_status_t st = BP_OK;
  struct bpp_buffer_s* b = calloc(1, sizeof *b);
  if (!b) return vk_error(BP_RESOURCE_EXHAUSTED, "vulkan: out of host memory");
  b->dev = d;
  b->pool = pool;
  b->size = size;
  b->kind = kind;
  pthread_mutex_init(&b->views_lock, NULL);
  VkBufferCreateInfo bi = {
      .sType = VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO,
      .size = size,
      .usage = VK_BUFFER_USAGE_STORAGE_BUFFER_BIT | VK_BUFFER_USAGE_UNIFORM_TEXEL_BUFFER_BIT |
               VK_BUFFER_USAGE_TRANSFER_SRC_BIT | VK_BUFFER_USAGE_TRANSFER_DST_BIT |
               VK_BUFFER_USAGE_SHADER_DEVICE_ADDRESS_BIT,
      .sharingMode = VK_SHARING_MODE_EXCLUSIVE,
  };
  VkExternalMemoryBufferCreateInfo ext = {
      .sType = VK_STRUCTURE_TYPE_EXTERNAL_MEMORY_BUFFER_CREATE_INFO,
      .handleTypes = VK_EXTERNAL_MEMORY_HANDLE_TYPE_OPAQUE_FD_BIT};
  if (pool->exportable) bi.pNext = &ext;
  VkResult r = d->vk.vkCreateBuffer(d->dev, &bi, NULL, &b->buf);
  if (r != VK_SUCCESS) {
    st = vk_error(vk_status_of(r), "vulkan: vkCreateBuffer of %llu bytes failed: %s",
                  (unsigned long long)size, vk_result_name(r));
    b->buf = VK_NULL_HANDLE;
    goto cleanup;
  }
  VkMemoryRequirements req;
  d->vk.vkGetBufferMemoryRequirements(d->dev, b->buf, &req);
  if (!(req.memoryTypeBits & (1u << pool->type_index))) {
    st = vk_error(BP_INTERNAL, "vulkan: buffers cannot live in memory type %u (allowed mask 0x%x)",
                  pool->type_index, req.memoryTypeBits);
    goto cleanup;
  }
  uint64_t align = req.alignment < 256 ? 256 : req.alignment; /* covers every dtype and offset */
  /* An import's allocation size is the exporter's: the same buffer create
   * info on the same driver gives the same requirements. */
  st = import_fd >= 0 ? vk_pool_import(pool, req.size, import_fd, &b->alloc)
                      : vk_pool_alloc(pool, req.size, align, &b->alloc);
  if (st != BP_OK) goto cleanup;
  r = d->vk.vkBindBufferMemory(d->dev, b->buf, b->alloc.block->mem, b->alloc.offset);
  if (r != VK_SUCCESS) {
    st = vk_error(vk_status_of(r), "vulkan: vkBindBufferMemory failed: %s", vk_result_name(r));
    goto cleanup;
  }
  VkBufferDeviceAddressInfo ai = {.sType = VK_STRUCTURE_TYPE_BUFFER_DEVICE_ADDRESS_INFO,
                                  .buffer = b->buf};
  b->addr = d->vk.vkGetBufferDeviceAddress(d->dev, &ai);
  if (b->alloc.block->map) b->map = b->alloc.block->map + b->alloc.offset;
  *out = b;
  b = NULL;
cleanup:
  if (b) vk_buffer_destroy(b);
  return st;
}

bp_status_t vk_buffer_create(struct bpp_device_s* d, vk_pool_t* pool, uint64_t size, uint32_t kind,
                             struct bpp_buffer_s** out) {
  return buffer_create(d, pool, size, kind, -1, out);
}

bp_status_t vk_buffer_import_fd(struct bpp_device_s* d, uint64_t size, int fd,
                                struct bpp_buffer_s** out) {
  return buffer_create(d, &d->pool_export, size, BP_MEMORY_DEVICE, fd, out);
}

/* ---- texel views --------------------------------------------------------- */
struct vk_texel_view {
  uint64_t off, bytes;
  VkBufferView view;
  struct vk_texel_view* next;
};

int vk_buffer_texel_view(struct bpp_buffer_s* b, uint64_t off, uint64_t bytes, VkBufferView* out) {
  struct bpp_device_s* d = b->dev;
  const vk_features_t* f = &d->feat;
  if (!d->vk.vkCreateBufferView || !d->vk.vkDestroyBufferView || bytes == 0 || bytes % 16) return -1;
  if (off % (f->min_texel_align ? f->min_texel_align : 16) || off % 16) return -1;
  if (off > b->size || bytes > b->size - off || bytes / 16 > f->max_texels) return -1;
  int rc = -1;
  pthread_mutex_lock(&b->views_lock);
  for (struct vk_texel_view* v = b->views; v; v = v->next)
    if (v->off == off && v->bytes == bytes) {
      *out = v->view;
      rc = 0;
      goto done;
    }
  if (b->num_views >= VK_MAX_VIEWS_PER_BUFFER) goto done;
  struct vk_texel_view* v = calloc(1, sizeof *v);
  if (!v) goto done;
  /* R32G32B32A32_UINT supports uniform texel buffers on every device (a
   * mandatory format feature). */
  VkBufferViewCreateInfo vi = {.sType = VK_STRUCTURE_TYPE_BUFFER_VIEW_CREATE_INFO,
                               .buffer = b->buf,
                               .format = VK_FORMAT_R32G32B32A32_UINT,
                               .offset = off,
                               .range = bytes};
  if (d->vk.vkCreateBufferView(d->dev, &vi, NULL, &v->view) != VK_SUCCESS) {
    free(v);
    goto done;
  }
  v->off = off;
  v->bytes = bytes;
  v->next = b->views;
  b->views = v;
  b->num_views++;
  *out = v->view;
  rc = 0;
done:
  pthread_mutex_unlock(&b->views_lock);
  return rc;
}

void vk_buffer_destroy(struct bpp_buffer_s* b) {
  if (!b) return;
  while (b->views) {
    struct vk_texel_view* v = b->views;
    b->views = v->next;
    b->dev->vk.vkDestroyBufferView(b->dev->dev, v->view, NULL);
    free(v);
  }
  pthread_mutex_destroy(&b->views_lock);
  if (b->buf) b->dev->vk.vkDestroyBuffer(b->dev->dev, b->buf, NULL);
  vk_pool_free(b->pool, &b->alloc);
  free(b);
}
