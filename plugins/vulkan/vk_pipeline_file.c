/* backplane Vulkan plugin: the pipeline-cache file.
 *
 * Where it lives (the file named by BP_VULKAN_PIPELINE_CACHE / option
 * pipeline_cache, else a per-user default keyed by the device, the driver and
 * the plugin version, so an update never reads a stale file), and what is
 * handed to the driver: only a file whose VkPipelineCacheHeaderVersionOne
 * matches the device. A corrupt or foreign file is ignored with one warning
 * and rewritten when the device closes. Thread-safe (no shared state).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "bp_kit_cache.h"
#include "vk_internal.h"

#define VK_CACHE_FILE_MAX (256l << 20) /* bigger files are ignored */

static uint32_t le32(const unsigned char* p) {
  return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

int vk_pipeline_file_check(const void* data, size_t size, const vk_cache_ids_t* ids, char* why,
                           size_t cap) {
  const unsigned char* p = data;
  if (!p || size < VK_CACHE_HEADER_BYTES) {
    snprintf(why, cap, "truncated: %zu bytes, shorter than the %u-byte header", p ? size : 0,
             VK_CACHE_HEADER_BYTES);
    return 0;
  }
  uint32_t length = le32(p), version = le32(p + 4), vendor = le32(p + 8), device = le32(p + 12);
  if (length != VK_CACHE_HEADER_BYTES) {
    snprintf(why, cap, "the header says it is %u bytes long, not %u", length, VK_CACHE_HEADER_BYTES);
    return 0;
  }
  if (version != VK_PIPELINE_CACHE_HEADER_VERSION_ONE) {
    snprintf(why, cap, "header version %u, not %u", version, (unsigned)VK_PIPELINE_CACHE_HEADER_VERSION_ONE);
    return 0;
  }
  if (vendor != ids->vendor_id || device != ids->device_id) {
    snprintf(why, cap, "written for vendor 0x%x device 0x%x, this is vendor 0x%x device 0x%x", vendor,
             device, ids->vendor_id, ids->device_id);
    return 0;
  }
  if (memcmp(p + 16, ids->uuid, VK_UUID_SIZE) != 0) {
    snprintf(why, cap, "written for another pipelineCacheUUID (another driver build)");
    return 0;
  }
  return 1;
}

int vk_pipeline_file_path(const vk_options_t* opt, const vk_cache_ids_t* ids, char* out, size_t cap) {
  out[0] = 0;
  if (opt->pipeline_cache_off) return 0;
  if (opt->pipeline_cache[0]) {
    if ((size_t)snprintf(out, cap, "%s", opt->pipeline_cache) >= cap) {
      out[0] = 0;
      return 0;
    }
    return 1;
  }
  char dir[600], why[200];
  int have = bp_kit_cache_dir(dir, sizeof dir, why, sizeof why);
  if (have <= 0) {
    vk_log(have == 0 ? BP_LOG_INFO : BP_LOG_WARN, "vulkan: %s; pipelines are not cached on disk", why);
    return 0;
  }
  char uuid[2 * VK_UUID_SIZE + 1];
  for (unsigned i = 0; i < VK_UUID_SIZE; i++) snprintf(uuid + 2 * i, 3, "%02x", ids->uuid[i]);
  if ((size_t)snprintf(out, cap, "%s/vulkan-%04x-%04x-%08x-%s-%s.bin", dir, ids->vendor_id,
                       ids->device_id, ids->driver_version, uuid, VK_PLUGIN_VERSION) >= cap) {
    out[0] = 0;
    return 0;
  }
  return 1;
}

void* vk_pipeline_file_read(const char* path, const vk_cache_ids_t* ids, size_t* out_size,
                            int* out_rejected) {
  *out_size = 0;
  *out_rejected = 0;
  if (!path[0]) return NULL;
  char why[160];
  size_t n = 0;
  int state;
  void* data = bp_kit_cache_read(path, (size_t)VK_CACHE_FILE_MAX, &n, &state, why, sizeof why);
  if (state == BP_KIT_CACHE_NOT_FILE)
    vk_log(BP_LOG_WARN, "vulkan: pipeline cache '%s' is %s; not used", path, why);
  if (state == BP_KIT_CACHE_ABSENT || state == BP_KIT_CACHE_NOT_FILE)
    return NULL; /* absent (the usual first run) or not a file: nothing to rewrite */
  if (data && !vk_pipeline_file_check(data, n, ids, why, sizeof why)) {
    free(data);
    data = NULL;
  }
  if (data) *out_size = n;
  if (!data) {
    *out_rejected = 1;
    vk_log(BP_LOG_WARN, "vulkan: pipeline cache '%s' ignored (%s); it is rewritten when the device closes",
           path, why);
  }
  return data;
}

void vk_pipeline_file_write(struct bpp_device_s* d, VkPipelineCache cache, const char* path) {
  if (!path[0] || !d->vk.vkGetPipelineCacheData) return;
  size_t n = 0;
  if (d->vk.vkGetPipelineCacheData(d->dev, cache, &n, NULL) != VK_SUCCESS || n == 0) return;
  void* data = malloc(n);
  int ok = data && d->vk.vkGetPipelineCacheData(d->dev, cache, &n, data) == VK_SUCCESS &&
           bp_kit_cache_write(path, data, n) == 0;
  if (!ok) vk_log(BP_LOG_WARN, "vulkan: could not save the pipeline cache to %s", path);
  free(data);
}
