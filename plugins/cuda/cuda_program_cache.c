/* The generated kernels' PTX on disk (see cuda_program_cache.h).
 *
 * One entry per program (bp_kit_cache.h: checksummed, written atomically)
 * in the folder BP_CUDA_PROGRAM_CACHE names, else the user's cache folder.
 * Thread-safe (no state).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bp_kit_cache.h"
#include "cuda_program_cache.h"

#define CUDA_PTX_FILE_MAX ((size_t)16 << 20) /* bigger entries are ignored */

void cuda_program_cache_key(bpp_device_t d, const cuda_nvrtc_t* nv, const char* text, size_t size, char* out,
                            size_t cap) {
  char id[64];
  bp_kit_cache_text_id(text, size, id, sizeof id);
  snprintf(out, cap, "cuda ptx; driver %d; nvrtc %d.%d; plugin %s; compute_%d%d; options %s; source %s",
           d->inst->driver_version, nv->version_major, nv->version_minor, CUDA_PLUGIN_VERSION, d->cc_major,
           d->cc_minor, CUDA_NVRTC_OPTIONS_TEXT, id);
}

char* cuda_program_cache_read(const char* key, char* path, size_t path_cap) {
  path[0] = 0;
  char dir[600], why[240];
  int have = bp_kit_cache_dir_env("BP_CUDA_PROGRAM_CACHE", dir, sizeof dir, why, sizeof why);
  if (have < 0) bp_kit_log(BP_LOG_WARN, "cuda: %s; generated kernels are not cached on disk", why);
  if (have <= 0 || !bp_kit_cache_entry_path(dir, "cuda-ptx", key, path, path_cap)) return NULL;
  size_t n = 0;
  int state;
  char* data = bp_kit_cache_entry_read(path, key, CUDA_PTX_FILE_MAX, &n, &state, why, sizeof why);
  if (data && (n == 0 || data[n - 1] != 0)) { /* entries are written with their NUL */
    free(data);
    data = NULL;
    state = BP_KIT_CACHE_BAD;
    snprintf(why, sizeof why, "not NUL-terminated PTX");
  }
  if (state == BP_KIT_CACHE_NOT_FILE) {
    bp_kit_log(BP_LOG_WARN, "cuda: program cache '%s' is %s; not used", path, why);
    path[0] = 0; /* never written over */
  } else if (state == BP_KIT_CACHE_BAD || state == BP_KIT_CACHE_FOREIGN) {
    bp_kit_log(BP_LOG_WARN, "cuda: program cache '%s' ignored (%s); it is rewritten", path, why);
  }
  return data;
}

void cuda_program_cache_write(const char* path, const char* key, const char* ptx) {
  if (!path[0]) return;
  if (bp_kit_cache_entry_write(path, key, ptx, strlen(ptx) + 1) != 0)
    bp_kit_log(BP_LOG_WARN, "cuda: could not save a generated kernel to the program cache %s", path);
}
