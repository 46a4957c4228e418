/* backplane gpu_common: the embedded kernel programs and their table.
 *
 * A GPU plugin embeds the one kernel source compiled to its API's format
 * (cmake/BpGpuKernels.cmake: OpenCL C text, PTX, SPIR-V or AMDGCN) and gets
 * `<prefix>programs[]`, indexed by enum bp_gpu_program (kernels.def
 * order): each blob's one entry point is `kernel`. Immutable; thread-safe.
 */
#ifndef BP_GPU_KERNELS_H_
#define BP_GPU_KERNELS_H_

#include <stddef.h>
#include <stdint.h>

typedef struct bp_gpu_blob {
  const char* name;   /* program name in kernels.def, e.g. "ew_f32" */
  const char* kernel; /* its entry point, "bp_" + name */
  const unsigned char* data;
  uint32_t size; /* bytes, including the NUL of text formats */
} bp_gpu_blob_t;

/* Program ids in kernels.def order (the blob table's index). */
enum bp_gpu_program {
#define BP_GPU_PROGRAM(name, source, defines) BP_GPU_PROGRAM_##name,
#include "kernels/kernels.def"
#undef BP_GPU_PROGRAM
  BP_GPU_PROGRAM_COUNT
};

#endif /* BP_GPU_KERNELS_H_ */
