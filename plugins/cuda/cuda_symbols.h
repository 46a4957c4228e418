/* The CUDA driver entry points the plugin uses, declared once (X-macro).
 *
 * Each entry is the exact symbol libcuda.so.1 exports: the versioned name
 * where cuda.h maps the plain name to one (cuMemAlloc -> cuMemAlloc_v2),
 * so the table never picks up a legacy ABI (32-bit sizes, old semantics).
 * Types come from cuda.h's prototypes (__typeof__), so a wrong signature
 * does not compile. cuda.h is used for types only: libcuda is never
 * linked, it is dlopen'd (plugins/kit/bp_kit_dynlib.h) from libcuda.so.1 or
 * from BP_CUDA_DRIVER_PATH (the tests' fake driver).
 *
 * REQ: the plugin refuses a driver without it (UNAVAILABLE, naming it).
 * OPT: left NULL when absent; the feature it serves is then off:
 *   pools            cuDeviceGetDefaultMemPool, cuMemPoolSetAttribute,
 *                    cuMemAllocFromPoolAsync, cuMemFreeAsync
 *   host functions   cuStreamWaitValue32_v2 (the stream waits for the
 *                    plugin thread that ran the function; without it the
 *                    driver's callback thread blocks until it is done)
 *   peer copies      cuDeviceCanAccessPeer, cuCtxEnablePeerAccess,
 *                    cuMemcpyPeerAsync
 *   kernels          cuModuleLoadDataEx, cuModuleGetFunction,
 *                    cuModuleUnload, cuLaunchKernel (cuda_kernels.c)
 *   graphs           cuStreamBeginCapture_v2, cuStreamEndCapture,
 *                    cuGraphInstantiateWithFlags, cuGraphLaunch,
 *                    cuGraphExecDestroy, cuGraphDestroy (compiled regions
 *                    replay as one graph launch; without them, eagerly);
 *                    cuGraphExecUpdate_v2 (else a changed region is
 *                    instantiated again) (cuda_graph.c)
 *   timing           cuEventElapsedTime_v2 (12.8+), else the older export
 *                    cuEventElapsedTime (same signature, resolved by hand)
 */
#ifndef BP_CUDA_SYMBOLS_H_
#define BP_CUDA_SYMBOLS_H_

#include <cuda.h>

#define CUDA_SYMBOLS(REQ, OPT)            \
  REQ(cuGetErrorName)                     \
  REQ(cuGetErrorString)                   \
  REQ(cuInit)                             \
  REQ(cuDriverGetVersion)                 \
  REQ(cuDeviceGetCount)                   \
  REQ(cuDeviceGet)                        \
  REQ(cuDeviceGetName)                    \
  REQ(cuDeviceGetAttribute)               \
  REQ(cuDeviceTotalMem_v2)                \
  OPT(cuDeviceGetUuid_v2)                 \
  REQ(cuDevicePrimaryCtxRetain)           \
  REQ(cuDevicePrimaryCtxRelease_v2)       \
  REQ(cuCtxPushCurrent_v2)                \
  REQ(cuCtxPopCurrent_v2)                 \
  REQ(cuCtxGetStreamPriorityRange)        \
  REQ(cuMemGetInfo_v2)                    \
  REQ(cuMemAlloc_v2)                      \
  REQ(cuMemFree_v2)                       \
  REQ(cuMemHostAlloc)                     \
  REQ(cuMemFreeHost)                      \
  REQ(cuMemHostGetDevicePointer_v2)       \
  REQ(cuMemAllocManaged)                  \
  OPT(cuDeviceGetDefaultMemPool)          \
  OPT(cuMemPoolSetAttribute)              \
  OPT(cuMemAllocFromPoolAsync)            \
  OPT(cuMemFreeAsync)                     \
  REQ(cuMemcpyHtoDAsync_v2)               \
  REQ(cuMemcpyDtoHAsync_v2)               \
  REQ(cuMemcpyDtoDAsync_v2)               \
  OPT(cuDeviceCanAccessPeer)              \
  OPT(cuCtxEnablePeerAccess)              \
  OPT(cuMemcpyPeerAsync)                  \
  REQ(cuMemsetD8Async)                    \
  REQ(cuMemsetD16Async)                   \
  REQ(cuMemsetD32Async)                   \
  REQ(cuMemsetD2D8Async)                  \
  REQ(cuStreamCreateWithPriority)         \
  REQ(cuStreamDestroy_v2)                 \
  REQ(cuStreamSynchronize)                \
  REQ(cuStreamQuery)                      \
  REQ(cuStreamWaitEvent)                  \
  REQ(cuLaunchHostFunc)                   \
  OPT(cuStreamWaitValue32_v2)             \
  REQ(cuEventCreate)                      \
  REQ(cuEventDestroy_v2)                  \
  REQ(cuEventRecord)                      \
  REQ(cuEventQuery)                       \
  REQ(cuEventSynchronize)                 \
  OPT(cuEventElapsedTime_v2)             \
  OPT(cuModuleLoadDataEx)                \
  OPT(cuModuleGetFunction)               \
  OPT(cuModuleUnload)                    \
  OPT(cuLaunchKernel)                    \
  OPT(cuStreamBeginCapture_v2)           \
  OPT(cuStreamEndCapture)                \
  OPT(cuGraphInstantiateWithFlags)       \
  OPT(cuGraphLaunch)                     \
  OPT(cuGraphExecDestroy)                \
  OPT(cuGraphDestroy)                    \
  OPT(cuGraphExecUpdate_v2)

#define BP_CUDA_SYMBOL_FIELD(name) __typeof__(&name) name;

typedef struct cuda_symbols {
  CUDA_SYMBOLS(BP_CUDA_SYMBOL_FIELD, BP_CUDA_SYMBOL_FIELD)
  /* The pre-12.8 export of cuEventElapsedTime (cuda.h renames the plain
   * name to _v2, so it is listed by hand); used when _v2 is absent. */
  __typeof__(&cuEventElapsedTime_v2) cuEventElapsedTime_v1;
} cuda_symbols_t;

/* Opens the driver (BP_CUDA_DRIVER_PATH, else libcuda.so.1) and resolves
 * the table. UNAVAILABLE with "no CUDA driver (<dlerror>)" or the missing
 * entry point in `msg`. *out_lib is closed with bp_kit_library_close. */
bp_status_t cuda_symbols_load(cuda_symbols_t* syms, void** out_lib, char* msg, size_t msg_cap);

#endif /* BP_CUDA_SYMBOLS_H_ */
