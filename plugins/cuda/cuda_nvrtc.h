/* NVRTC, the run-time compiler of CUDA C++ (internal), for the generated
 * fused elementwise kernels (cuda_ewgen.c). Opened with dlopen when the
 * first fused program is launched (BP_NVRTC_PATH, else libnvrtc.so.13 /
 * .so.12 / .so; never linked), so a process that runs none never loads it; its
 * types are declared here, so no toolkit header is needed. Without it,
 * fused programs run on the interpreter kernel (the reason is kept).
 * Threading: NVRTC programs are independent; the table is immutable.
 */
#ifndef BP_CUDA_NVRTC_H_
#define BP_CUDA_NVRTC_H_

#include <stddef.h>

#include "cuda_internal.h"

typedef int nvrtcResult_t; /* NVRTC_SUCCESS is 0 */
typedef struct _nvrtcProgram* nvrtcProgram_t;

/* REQ(name, return type, parameters) of every entry point used; OPT: left
 * NULL when the library lacks it. */
#define NVRTC_SYMBOLS(REQ, OPT)                                                                \
  REQ(nvrtcCreateProgram, nvrtcResult_t,                                                     \
      (nvrtcProgram_t*, const char*, const char*, int, const char* const*, const char* const*)) \
  REQ(nvrtcCompileProgram, nvrtcResult_t, (nvrtcProgram_t, int, const char* const*))          \
  REQ(nvrtcGetPTXSize, nvrtcResult_t, (nvrtcProgram_t, size_t*))                              \
  REQ(nvrtcGetPTX, nvrtcResult_t, (nvrtcProgram_t, char*))                                    \
  REQ(nvrtcGetProgramLogSize, nvrtcResult_t, (nvrtcProgram_t, size_t*))                       \
  REQ(nvrtcGetProgramLog, nvrtcResult_t, (nvrtcProgram_t, char*))                             \
  REQ(nvrtcDestroyProgram, nvrtcResult_t, (nvrtcProgram_t*))                                  \
  REQ(nvrtcGetErrorString, const char*, (nvrtcResult_t))                                     \
  OPT(nvrtcVersion, nvrtcResult_t, (int*, int*))

typedef struct cuda_nvrtc {
  void* lib;
#define BP_CUDA_NVRTC_FIELD(name, ret, params) ret(*name) params;
  NVRTC_SYMBOLS(BP_CUDA_NVRTC_FIELD, BP_CUDA_NVRTC_FIELD)
#undef BP_CUDA_NVRTC_FIELD
  int version_major, version_minor; /* nvrtcVersion, 0.0 without it */
} cuda_nvrtc_t;

/* The options every generated kernel is compiled with besides the
 * architecture, as X(option) items: -default-device: the prelude's helpers
 * are device functions; no fused multiply-add (the interpreter kernel's
 * roundings); 177: helpers a program does not call. Part of the program
 * cache's key (CUDA_NVRTC_OPTIONS_TEXT). */
#define CUDA_NVRTC_OPTIONS(X) X("-default-device") X("--fmad=false") X("-diag-suppress=177")
#define CUDA_NVRTC_OPTION_TEXT(o) o " "
#define CUDA_NVRTC_OPTIONS_TEXT CUDA_NVRTC_OPTIONS(CUDA_NVRTC_OPTION_TEXT)


/* At instance creation / destruction. */
void cuda_nvrtc_init(bpp_instance_t inst);
void cuda_nvrtc_close(bpp_instance_t inst);
/* NVRTC, opened on the first call (thread-safe), or NULL with the reason
 * in inst->nvrtc_reason. */
const cuda_nvrtc_t* cuda_nvrtc_get(bpp_instance_t inst);

/* Compiles CUDA C++ `text` (`name` for the log) to PTX for compute
 * capability major.minor: *out_ptx is malloc'd, NUL-terminated. INTERNAL
 * with NVRTC's log when it fails. */
bp_status_t cuda_nvrtc_ptx(const cuda_nvrtc_t* nv, const char* text, const char* name, int major, int minor,
                           char** out_ptx);

#endif /* BP_CUDA_NVRTC_H_ */
