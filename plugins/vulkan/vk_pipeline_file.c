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

#include "bp_file.h"
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

/* Creates `dir` (mode 0700) unless it is a folder already; 0 on success,
 * else an errno (ENOTDIR: something else is there). */
static int make_dir(const char* dir) {
  if (mkdir(dir, 0700) == 0) return 0;
  int err = errno;
  struct stat st;
  if (err == EEXIST) return stat(dir, &st) == 0 && S_ISDIR(st.st_mode) ? 0 : ENOTDIR;
  return err;
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
  /* XDG base directories: only absolute paths count. */
  const char* xdg = getenv("XDG_CACHE_HOME");
  const char* home = getenv("HOME");
  char dir[600];
  if (xdg && xdg[0] == '/') {
    snprintf(dir, sizeof dir, "%.560s", xdg);
  } else if (home && home[0] == '/') {
    snprintf(dir, sizeof dir, "%.560s/.cache", home);
  } else {
    vk_log(BP_LOG_INFO, "vulkan: neither XDG_CACHE_HOME nor HOME is set: pipelines are not cached on disk");
    return 0;
  }
  int err = make_dir(dir);
  size_t n = strlen(dir);
  if (!err) {
    snprintf(dir + n, sizeof dir - n, "/backplane");
    err = make_dir(dir);
  }
  if (err) {
    vk_log(BP_LOG_WARN, "vulkan: cannot use %s for the pipeline cache (%s); pipelines are not cached on disk",
           dir, err == ENOTDIR ? "not a folder" : strerror(err));
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
  int fd = -1;
  struct stat st;
  int err = bp_file_open_regular(path, &fd, &st);
  if (err == BP_FILE_NOT_REGULAR)
    vk_log(BP_LOG_WARN, "vulkan: pipeline cache '%s' is %s, not a regular file; not used", path,
           bp_file_kind(st.st_mode));
  if (err) return NULL; /* absent (the usual first run) or not a file: nothing to rewrite */
  FILE* f = fdopen(fd, "rb");
  if (!f) {
    close(fd);
    return NULL;
  }
  void* data = NULL;
  long n = fseek(f, 0, SEEK_END) == 0 ? ftell(f) : -1;
  char why[160] = "unreadable";
  if (n >= 0 && n < VK_CACHE_FILE_MAX && fseek(f, 0, SEEK_SET) == 0 &&
      (data = malloc(n ? (size_t)n : 1)) != NULL) {
    if (fread(data, 1, (size_t)n, f) == (size_t)n && vk_pipeline_file_check(data, (size_t)n, ids, why, sizeof why)) {
      *out_size = (size_t)n;
    } else {
      free(data);
      data = NULL;
    }
  } else if (n >= VK_CACHE_FILE_MAX) {
    snprintf(why, sizeof why, "%ld bytes, over the %ld MiB limit", n, VK_CACHE_FILE_MAX >> 20);
  }
  fclose(f);
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
  char tmp[1100];
  /* Unique per process and device: devices sharing one named file may close
   * at the same time. */
  snprintf(tmp, sizeof tmp, "%s.%ld.%p.tmp", path, (long)getpid(), (void*)d);
  FILE* f = NULL;
  int ok = data && d->vk.vkGetPipelineCacheData(d->dev, cache, &n, data) == VK_SUCCESS &&
           (f = fopen(tmp, "wb")) != NULL && fwrite(data, 1, n, f) == n;
  if (f && fclose(f) != 0) ok = 0;
  if (ok && rename(tmp, path) != 0) ok = 0;
  if (!ok) {
    if (f) remove(tmp);
    vk_log(BP_LOG_WARN, "vulkan: could not save the pipeline cache to %s", path);
  }
  free(data);
}
