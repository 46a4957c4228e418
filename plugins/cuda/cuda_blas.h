/* GEMM through cuBLASLt, dlopen'd like the driver (libcublasLt.so.13, .12,
 * or BP_CUBLASLT_PATH), with its entry points in one X-macro table.
 * Without it the matmul ops are unsupported, with the reason.
 */
#ifndef BP_CUDA_BLAS_H_
#define BP_CUDA_BLAS_H_

#include <cublasLt.h>

#include "cuda_internal.h"

#define CUBLASLT_SYMBOLS(REQ)               \
  REQ(cublasLtGetVersion)                   \
  REQ(cublasLtCreate)                       \
  REQ(cublasLtDestroy)                      \
  REQ(cublasLtMatmulDescCreate)             \
  REQ(cublasLtMatmulDescDestroy)            \
  REQ(cublasLtMatmulDescSetAttribute)       \
  REQ(cublasLtMatrixLayoutCreate)           \
  REQ(cublasLtMatrixLayoutDestroy)          \
  REQ(cublasLtMatrixLayoutSetAttribute)     \
  REQ(cublasLtMatmulPreferenceCreate)       \
  REQ(cublasLtMatmulPreferenceDestroy)      \
  REQ(cublasLtMatmulPreferenceSetAttribute) \
  REQ(cublasLtMatmulAlgoGetHeuristic)       \
  REQ(cublasLtMatmul)

typedef struct cublaslt_symbols {
  CUBLASLT_SYMBOLS(BP_CUDA_SYMBOL_FIELD)
} cublaslt_symbols_t;

struct cuda_blas {
  cublaslt_symbols_t lt;
  void* lib;
  size_t version;
};

/* Instance: opens cuBLASLt (inst->blas, or inst->blas_reason). */
void cuda_blas_open(bpp_instance_t inst);
void cuda_blas_close(bpp_instance_t inst);
/* Device: the cuBLASLt handle (context pushed by the caller). */
bp_status_t cuda_blas_device_open(bpp_device_t dev);
void cuda_blas_device_close(bpp_device_t dev);
/* Stream: its GEMM workspace, freed at destroy (context pushed). */
void cuda_blas_stream_release(bpp_stream_t stream);

/* mm, bmm, addmm, linear: the support answer (reason, message) and the
 * launch. */
uint32_t cuda_gemm_support(bpp_device_t dev, const bp_op_call_t* call, char* why, size_t cap);
bp_status_t cuda_gemm_launch(bpp_stream_t stream, const bp_op_call_t* call);

#endif /* BP_CUDA_BLAS_H_ */
