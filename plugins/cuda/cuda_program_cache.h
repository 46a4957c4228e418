/* The generated kernels' PTX on disk (internal): cuda_program_cache.c.
 *
 * What NVRTC produced for a generated fused elementwise program
 * (cuda_ewgen.c) is kept as a cache entry (bp_kit_cache.h) keyed by the
 * driver version, the NVRTC version, the plugin version, the compute
 * capability, the compiler options and the program text, so a later
 * process loads the PTX instead of compiling it again. A corrupt or
 * foreign entry is ignored with one warning and rewritten.
 * BP_CUDA_PROGRAM_CACHE=DIR relocates the folder; set to nothing (or 0)
 * it turns the cache off.
 */
#ifndef BP_CUDA_PROGRAM_CACHE_H_
#define BP_CUDA_PROGRAM_CACHE_H_

#include <stddef.h>

#include "cuda_nvrtc.h"

/* The entry's key for program text `text` (`size` bytes) on `dev`. */
void cuda_program_cache_key(bpp_device_t dev, const cuda_nvrtc_t* nv, const char* text, size_t size,
                            char* out, size_t cap);
/* The cached PTX for `key` (malloc'd, NUL-terminated; the caller frees),
 * or NULL: absent, ignored (logged) or no cache. `path` receives the
 * entry's path for cuda_program_cache_write ("" when nothing is to be
 * written: the cache is off or the path is not a regular file). */
char* cuda_program_cache_read(const char* key, char* path, size_t path_cap);
/* Saves `ptx` under `key` at `path` (nothing when `path` is ""); a
 * failure costs a warning. */
void cuda_program_cache_write(const char* path, const char* key, const char* ptx);

#endif /* BP_CUDA_PROGRAM_CACHE_H_ */
