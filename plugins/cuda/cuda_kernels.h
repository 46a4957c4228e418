/* Kernels of the one GPU kernel source (plugins/gpu_common), compiled to
 * PTX at build time and JIT-loaded by the driver (cuModuleLoadDataEx) the
 * first time a program is used on a device. Ops are lowered by gpu_common
 * (bp_gpu_op_run) to launches; this file binds them to cuLaunchKernel.
 * Without the PTX build (no clang-15 / libclc at build time) or without the
 * driver's module entry points, every op answers "not supported" with the
 * reason.
 */
#ifndef BP_CUDA_KERNELS_H_
#define BP_CUDA_KERNELS_H_

#include "cuda_internal.h"

/* Device: the module cache (context pushed by the caller). */
bp_status_t cuda_kernels_device_open(bpp_device_t dev);
void cuda_kernels_device_close(bpp_device_t dev);
/* Stream: its argument slot, freed at destroy (context pushed). */
void cuda_kernels_stream_release(bpp_stream_t stream);

/* Nonzero when op has a kernel lowering at all. */
int cuda_kernels_implemented(uint32_t op);
/* BP_SUPPORT_OK or a reason with the message in `why`. */
uint32_t cuda_kernels_support(bpp_device_t dev, const bp_op_call_t* call, char* why, size_t cap);
bp_status_t cuda_kernels_launch(bpp_stream_t stream, const bp_op_call_t* call);

#endif /* BP_CUDA_KERNELS_H_ */
