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

/* The caps table's elementwise programs (eager) and fusion declaration
 * (none without kernels). */
bp_status_t cuda_kernels_launch_ew(bpp_stream_t stream, const bp_ew_program_t* program,
                                   uint32_t num_inputs, const bp_tensor_desc_t* const* inputs,
                                   uint32_t num_outputs, const bp_tensor_desc_t* const* outputs);
bp_status_t cuda_kernels_fusion(bpp_device_t dev, bp_fusion_caps_t* out);
/* EW_PROGRAM regions: BP_SUPPORT_OK when the kernel runs `program` on
 * `dev` (else the reason in `why`); the outputs that may alias inputs
 * (num_args^2 records of room). */
uint32_t cuda_kernels_ew_fits(bpp_device_t dev, const bp_ew_program_t* program, char* why, size_t cap);
uint32_t cuda_kernels_ew_aliases(const bp_region_desc_t* region, bp_region_alias_t* out);

/* ---- plans: launches recorded instead of enqueued (compiled regions) -- */
/* One kernel launch, self-contained: the operands' device addresses (0:
 * an unbound slot), the grid and the argument block, which the launch
 * reads from device memory at an address given when it is enqueued. */
#define CUDA_ARGS_MAX 2048u /* bytes of the largest argument block */
typedef struct cuda_launch_rec {
  uint32_t program;      /* enum bp_gpu_program */
  uint32_t num_operands;
  CUdeviceptr ptr[8];    /* BP_GPU_LAUNCH_MAX_OPERANDS */
  unsigned grid[3], block[3];
  uint32_t args_size;
  uint32_t generated;    /* 1: a fused program's launch (args hold bp_gpu_ew_args_t): its
                          * generated kernel runs where NVRTC builds one */
  unsigned char args[CUDA_ARGS_MAX];
} cuda_launch_rec_t;
/* A region's launches for one set of arguments, in stream order. */
typedef struct cuda_plan {
  uint32_t n, cap;
  cuda_launch_rec_t* recs; /* owned */
  CUfunction* fns;         /* owned, n entries once cuda_kernels_load resolved them, else NULL */
} cuda_plan_t;

/* Appends the launches of a checked op call or elementwise program to
 * `plan` (host work only: nothing is enqueued, no context needed). The
 * program's launches are marked `generated` unless BP_CUDA_EW_GENERATE=0. */
bp_status_t cuda_kernels_plan_op(const bp_op_call_t* call, cuda_plan_t* plan);
bp_status_t cuda_kernels_plan_ew(const bp_ew_program_t* program, uint32_t num_inputs,
                                 const bp_tensor_desc_t* const* inputs, uint32_t num_outputs,
                                 const bp_tensor_desc_t* const* outputs, cuda_plan_t* plan);
void cuda_plan_clear(cuda_plan_t* plan);
/* Resolves the function of every record into plan->fns, loading the
 * modules and building the generated kernels they use (context pushed);
 * done before a stream capture, where module loading is not allowed. A
 * `generated` record whose kernel NVRTC cannot build takes the
 * interpreter kernel, with the reason in `why` (left empty otherwise). */
bp_status_t cuda_kernels_load(bpp_device_t dev, cuda_plan_t* plan, char* why, size_t cap);
/* cuLaunchKernel of record i of a loaded plan reading its block at `args`
 * (context pushed); nothing else is enqueued, so it may run inside a
 * capture. */
bp_status_t cuda_kernels_enqueue(bpp_stream_t stream, const cuda_plan_t* plan, uint32_t i,
                                 CUdeviceptr args);

#endif /* BP_CUDA_KERNELS_H_ */
