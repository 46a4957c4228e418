/* backplane OpenCL plugin: programs of the one GPU kernel source.
 *
 * The kernels (plugins/gpu_common/kernels) are embedded as OpenCL C text
 * (cmake/BpGpuKernels.cmake, format `source`). Each kernels.def program is
 * built on first use, so start-up builds nothing (PoCL's compiler takes
 * seconds per program). Built programs are kept on disk
 * (clGetProgramInfo(CL_PROGRAM_BINARIES)) as the kit's cache entries
 * (bp_kit_cache.h: checksummed, written atomically), one per program keyed
 * by the device, driver and plugin versions, the build options and the
 * program text: a later process loads the binary instead of compiling. A
 * corrupt, foreign or stale entry is ignored with one warning and
 * rewritten. Build failures are kept and returned again (with the
 * driver's build log) rather than retried on every launch.
 * BP_OPENCL_PROGRAM_CACHE=DIR relocates the folder; set to nothing or 0
 * it turns the disk cache off. Generated
 * elementwise programs (ocl_ewgen.c) go through the same build and cache.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bp_kit_cache.h"
#include "ocl_internal.h"
#include "ocl_kernels.h"

#define OCL_CACHE_MAX ((size_t)64 << 20)
#define OCL_BUILD_OPTIONS "-cl-std=CL1.2"

/* The cache entry of program `name` (text `text`, `size` bytes) on `d`:
 * its path and key (the device, driver and plugin versions, the build
 * options and the text's hashes); 0 when there is none. */
static int cache_path(struct bpp_device_s* d, const char* name, const char* text, size_t size, char* out,
                      size_t cap, char* key, size_t key_cap) {
  char dir[700], why[240];
  int have = bp_kit_cache_dir_env("BP_OPENCL_PROGRAM_CACHE", dir, sizeof dir, why, sizeof why);
  if (have < 0) bp_kit_log(BP_LOG_WARN, "opencl: %s; programs are not cached on disk", why);
  if (have <= 0) return 0;
  char id[64];
  bp_kit_cache_text_id(text, size, id, sizeof id);
  snprintf(key, key_cap, "opencl binary; %s; options %s; source %s", d->cache_key, OCL_BUILD_OPTIONS, id);
  char prefix[120];
  uint64_t dk = bp_gpu_text_hash(0, d->cache_key, strlen(d->cache_key));
  snprintf(prefix, sizeof prefix, "opencl-%016llx-%.60s", (unsigned long long)dk, name);
  return bp_kit_cache_entry_path(dir, prefix, key, out, cap);
}

/* A built program from a binary, or NULL when the driver refuses it. */
static cl_program program_from_binary(struct bpp_device_s* d, const unsigned char* bin, size_t bsize) {
  const ocl_symbols_t* cl = d->cl;
  cl_int status = CL_SUCCESS, err = CL_SUCCESS;
  cl_program p = cl->clCreateProgramWithBinary(d->ctx, 1, &d->id, &bsize, &bin, &status, &err);
  if (p && (err != CL_SUCCESS || status != CL_SUCCESS ||
            cl->clBuildProgram(p, 1, &d->id, OCL_BUILD_OPTIONS, NULL, NULL) != CL_SUCCESS)) {
    cl->clReleaseProgram(p);
    p = NULL;
  }
  return p;
}

/* A program from the cached binary, or NULL (absent, or ignored with a
 * warning); *out_rewrite: the entry is to be written (absent or ignored,
 * not a non-file in the way). */
static cl_program load_cached(struct bpp_device_s* d, const char* path, const char* key, int* out_rewrite) {
  size_t n = 0;
  int state;
  char why[240];
  unsigned char* data = bp_kit_cache_entry_read(path, key, OCL_CACHE_MAX, &n, &state, why, sizeof why);
  *out_rewrite = state != BP_KIT_CACHE_NOT_FILE;
  cl_program p = data ? program_from_binary(d, data, n) : NULL;
  if (data && !p) snprintf(why, sizeof why, "the driver refused the binary");
  free(data);
  if (state == BP_KIT_CACHE_NOT_FILE)
    bp_kit_log(BP_LOG_WARN, "opencl: program cache '%s' is %s; not used", path, why);
  else if (!p && state != BP_KIT_CACHE_ABSENT)
    bp_kit_log(BP_LOG_WARN, "opencl: program cache '%s' ignored (%s); it is rewritten", path, why);
  return p;
}

/* Writes the binary of the source-built program `p` to the cache. */
static void store_cached(struct bpp_device_s* d, cl_program p, const char* path, const char* key) {
  const ocl_symbols_t* cl = d->cl;
  size_t size = 0;
  if (cl->clGetProgramInfo(p, CL_PROGRAM_BINARY_SIZES, sizeof size, &size, NULL) != CL_SUCCESS || size == 0 ||
      size > OCL_CACHE_MAX)
    return;
  unsigned char* bin = malloc(size);
  if (!bin) return;
  if (cl->clGetProgramInfo(p, CL_PROGRAM_BINARIES, sizeof bin, &bin, NULL) == CL_SUCCESS &&
      bp_kit_cache_entry_write(path, key, bin, size) != 0)
    bp_kit_log(BP_LOG_WARN, "opencl: could not save the program cache to %s", path);
  free(bin);
}

bp_status_t ocl_program_build(struct bpp_device_s* d, const char* name, const char* text, size_t size,
                              const char* kernel, ocl_kernel_t* k, int* out_from_disk) {
  const ocl_symbols_t* cl = d->cl;
  char path[900], key[700];
  int cached = cache_path(d, name, text, size, path, sizeof path, key, sizeof key), rewrite = 0;
  cl_program p = cached ? load_cached(d, path, key, &rewrite) : NULL;
  if (out_from_disk) *out_from_disk = p != NULL;
  cl_int err = CL_SUCCESS;
  if (!p) {
    p = cl->clCreateProgramWithSource(d->ctx, 1, &text, NULL, &err);
    if (!p) return ocl_fail("clCreateProgramWithSource", err);
    err = cl->clBuildProgram(p, 1, &d->id, OCL_BUILD_OPTIONS, NULL, NULL);
    if (err != CL_SUCCESS) {
      char log[160] = "";
      cl->clGetProgramBuildInfo(p, d->id, CL_PROGRAM_BUILD_LOG, sizeof log, log, NULL);
      log[sizeof log - 1] = 0;
      cl->clReleaseProgram(p);
      return BP_KIT_ERROR(BP_INTERNAL, "building kernel program %s: %s (%d): %s", name, ocl_error_name(err),
                          (int)err, log);
    }
    if (cached && rewrite) store_cached(d, p, path, key);
  }
  cl_kernel kern = cl->clCreateKernel(p, kernel, &err);
  if (!kern) {
    cl->clReleaseProgram(p);
    return ocl_fail("clCreateKernel", err);
  }
  k->program = p;
  k->kernel = kern;
  return BP_OK;
}

static bp_status_t build(struct bpp_device_s* d, uint32_t program, ocl_kernel_t* k) {
  const bp_gpu_blob_t* blob = &ocl_programs[program];
  return ocl_program_build(d, blob->name, (const char*)blob->data, blob->size, blob->kernel, k, NULL);
}

const bp_gpu_blob_t* ocl_program_blob(uint32_t program) { return &ocl_programs[program]; }

bp_status_t ocl_kernel_get(struct bpp_device_s* d, uint32_t program, ocl_kernel_t** out) {
  if (program >= BP_GPU_PROGRAM_COUNT)
    return BP_KIT_ERROR(BP_INTERNAL, "kernel program %u out of range", program);
  ocl_kernel_t* k = &d->kernels[program];
  pthread_mutex_lock(&k->mu);
  if (k->state == 0) {
    bp_status_t st = build(d, program, k);
    k->state = st ? -1 : 1;
    k->err = st;
    if (st) snprintf(k->err_msg, sizeof k->err_msg, "%s", bp_plugin_last_error());
  }
  int state = k->state;
  pthread_mutex_unlock(&k->mu);
  if (state < 0) return bp_kit_error(k->err, "%s", k->err_msg);
  *out = k;
  return BP_OK;
}

void ocl_kernels_release(struct bpp_device_s* d) {
  for (uint32_t i = 0; i < BP_GPU_PROGRAM_COUNT; i++) {
    ocl_kernel_t* k = &d->kernels[i];
    if (k->kernel) d->cl->clReleaseKernel(k->kernel);
    if (k->program) d->cl->clReleaseProgram(k->program);
    pthread_mutex_destroy(&k->mu);
  }
}
