/* backplane OpenCL plugin: programs of the one GPU kernel source.
 *
 * The kernels (plugins/gpu_common/kernels) are embedded as OpenCL C text
 * (cmake/BpGpuKernels.cmake, format `source`). Each kernels.def program is
 * built on first use, so start-up builds nothing (PoCL's compiler takes
 * about a second per program). Build failures are kept and returned again
 * (with the driver's build log) rather than retried on every launch.
 */
#include <stdio.h>
#include <string.h>

#include "ocl_internal.h"
#include "ocl_kernels.h"

static bp_status_t build(struct bpp_device_s* d, uint32_t program, ocl_kernel_t* k) {
  const ocl_symbols_t* cl = d->cl;
  const bp_gpu_blob_t* blob = &ocl_programs[program];
  const char* src = (const char*)blob->data;
  cl_int err = CL_SUCCESS;
  cl_program p = cl->clCreateProgramWithSource(d->ctx, 1, &src, NULL, &err);
  if (!p) return ocl_fail("clCreateProgramWithSource", err);
  err = cl->clBuildProgram(p, 1, &d->id, "-cl-std=CL1.2", NULL, NULL);
  if (err != CL_SUCCESS) {
    char log[160] = "";
    cl->clGetProgramBuildInfo(p, d->id, CL_PROGRAM_BUILD_LOG, sizeof log, log, NULL);
    log[sizeof log - 1] = 0;
    cl->clReleaseProgram(p);
    return BP_KIT_ERROR(BP_INTERNAL, "building kernel program %s: %s (%d): %s", blob->name, ocl_error_name(err),
                        (int)err, log);
  }
  cl_kernel kern = cl->clCreateKernel(p, blob->kernel, &err);
  if (!kern) {
    cl->clReleaseProgram(p);
    return ocl_fail("clCreateKernel", err);
  }
  k->program = p;
  k->kernel = kern;
  return BP_OK;
}

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
