/* Generated fused elementwise kernels on CUDA (internal): cuda_ewgen.c.
 * NVRTC (cuda_nvrtc.h) compiles the program text gpu_common generates;
 * the module is kept per device. Context pushed by the callers. */
#ifndef BP_CUDA_EWGEN_H_
#define BP_CUDA_EWGEN_H_

#include "cuda_internal.h"

struct bp_gpu_ew_args; /* kernels/bp_gpu_args.h */

/* 0 when BP_CUDA_EW_GENERATE=0 (or no kernels at build time). */
int cuda_ewgen_enabled(void);
bp_status_t cuda_ewgen_device_open(bpp_device_t dev);
void cuda_ewgen_device_close(bpp_device_t dev);
/* The generated kernel of the packed program `a` (compiled and loaded on
 * first use), or an error: no NVRTC, a refused compile or load (logged
 * once); the caller then runs the interpreter kernel. */
bp_status_t cuda_ewgen_function(bpp_device_t dev, const struct bp_gpu_ew_args* a, CUfunction* out);

#endif /* BP_CUDA_EWGEN_H_ */
