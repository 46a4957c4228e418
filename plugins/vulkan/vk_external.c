/* backplane Vulkan plugin: external memory as opaque fds
 * (VK_KHR_external_memory_fd).
 *
 * Buffers are exportable on request, by memory space: space 2
 * (BP_MEMORY_FLAG_EXPORTABLE, present when the device has the extension)
 * gives every buffer its own VkDeviceMemory allocated with
 * VkExportMemoryAllocateInfo, so an fd carries exactly one buffer at offset
 * 0 and the importer can rebuild the allocation from the buffer's size.
 * Spaces 0 and 1 stay suballocated (64 MiB blocks shared by many buffers)
 * and are not exportable: an fd of a block would hand out its neighbours.
 *
 * Export returns a new fd (vkGetMemoryFdKHR) that the receiver owns; import
 * (vkAllocateMemory + VkImportMemoryFdInfoKHR) takes the fd on success only.
 * An importer must run the same driver on the same physical device (same
 * driver and device UUIDs): another VkDevice of this process or another
 * process. Memory is shared, not ordered: order the work with events.
 *
 * Thread-safe: the pools lock themselves. */
#include <stdio.h>

#include "vk_internal.h"

/* UNIMPLEMENTED naming the missing extension, or BP_OK. */
static bp_status_t need_memory_fd(const struct bpp_device_s* d, const char* what) {
  if (d->feat.memory_fd_ext && d->vk.vkGetMemoryFdKHR) return BP_OK;
  return vk_error(BP_UNIMPLEMENTED,
                  "vulkan: %s: device %s lacks VK_KHR_external_memory_fd (no opaque fd memory)",
                  what, d->props.name);
}

bp_status_t vk_buffer_import(bpp_device_t d, const bp_external_buffer_desc_t* desc,
                             bpp_buffer_t* out) {
  if (out) *out = NULL;
  if (!d || !desc || !out)
    return vk_error(BP_INVALID_ARGUMENT, "vulkan: buffer_import: NULL argument");
  if (desc->struct_size < BP_EXTERNAL_BUFFER_DESC_V1_SIZE)
    return vk_error(BP_INVALID_ARGUMENT, "vulkan: buffer_import: desc struct_size %u too small",
                    desc->struct_size);
  if (desc->kind != BP_EXTERNAL_OPAQUE_FD)
    return vk_error(BP_UNIMPLEMENTED,
                    "vulkan: buffer_import: kind %u: the Vulkan backend imports OPAQUE_FD memory "
                    "only",
                    desc->kind);
  bp_status_t st = need_memory_fd(d, "buffer_import");
  if (st != BP_OK) return st;
  if (desc->fd < 0 || desc->fd > INT32_MAX)
    return vk_error(BP_INVALID_ARGUMENT, "vulkan: buffer_import: fd %lld is not a file descriptor",
                    (long long)desc->fd);
  if (desc->memory_space != VK_SPACE_EXPORT)
    return vk_error(BP_INVALID_ARGUMENT,
                    "vulkan: buffer_import: memory_space %u: opaque fd memory lives in the "
                    "exportable space %u",
                    desc->memory_space, VK_SPACE_EXPORT);
  if (desc->offset_bytes != 0)
    return vk_error(BP_INVALID_ARGUMENT,
                    "vulkan: buffer_import: offset_bytes %llu: an exported fd holds one buffer at "
                    "offset 0",
                    (unsigned long long)desc->offset_bytes);
  if (desc->size_bytes == 0 || desc->size_bytes > (1ull << 62))
    return vk_error(BP_INVALID_ARGUMENT, "vulkan: buffer_import: size_bytes %llu out of range",
                    (unsigned long long)desc->size_bytes);
  return vk_buffer_import_fd(d, desc->size_bytes, (int)desc->fd, out);
}

bp_status_t vk_buffer_export(bpp_buffer_t b, bp_external_buffer_desc_t* out) {
  if (!b || !out) return vk_error(BP_INVALID_ARGUMENT, "vulkan: buffer_export: NULL argument");
  if (out->struct_size < BP_EXTERNAL_BUFFER_DESC_V1_SIZE)
    return vk_error(BP_INVALID_ARGUMENT, "vulkan: buffer_export: out struct_size %u too small",
                    out->struct_size);
  if (out->kind != BP_EXTERNAL_OPAQUE_FD)
    return vk_error(BP_UNIMPLEMENTED,
                    "vulkan: buffer_export: kind %u: the Vulkan backend exports OPAQUE_FD memory "
                    "only (device memory has no host pointer or DLPack form)",
                    out->kind);
  struct bpp_device_s* d = b->dev;
  bp_status_t st = need_memory_fd(d, "buffer_export");
  if (st != BP_OK) return st;
  if (!b->pool->exportable)
    return vk_error(BP_FAILED_PRECONDITION,
                    "vulkan: buffer_export: the buffer is suballocated; allocate it in the "
                    "exportable memory space %u",
                    VK_SPACE_EXPORT);
  VkMemoryGetFdInfoKHR gi = {.sType = VK_STRUCTURE_TYPE_MEMORY_GET_FD_INFO_KHR,
                             .memory = b->alloc.block->mem,
                             .handleType = VK_EXTERNAL_MEMORY_HANDLE_TYPE_OPAQUE_FD_BIT};
  int fd = -1;
  VkResult r = d->vk.vkGetMemoryFdKHR(d->dev, &gi, &fd);
  if (r != VK_SUCCESS)
    return vk_error(vk_status_of(r), "vulkan: buffer_export: vkGetMemoryFdKHR failed: %s",
                    vk_result_name(r));
  out->fd = fd;
  out->size_bytes = b->size;
  out->offset_bytes = 0;
  return BP_OK;
}
