/* backplane CPU plugin: f32 GEMM through oneDNN's sgemm (cpu_gemm_dnnl.c). */
#ifndef BP_CPU_GEMM_DNNL_H_
#define BP_CPU_GEMM_DNNL_H_

#include <stdint.h>

#include "cpu_kernels.h"

/* 1 when the build has oneDNN and BACKPLANE_CPU_DNNL is not 0 (read once
 * per process; the convolution path asks too). */
CPU_HIDDEN int cpu_dnnl_wanted(void);

/* 1 when an f32 product of m x n x k would run through oneDNN (below). */
CPU_HIDDEN int cpu_sgemm_dnnl_takes(int64_t m, int64_t n, int64_t k);

/* C = alpha * op(A) @ op(B) + beta * C in BLAS terms (column-major when
 * col_major, transposes ta / tb, leading dimensions lda / ldb / ldc), C
 * being m x n and the sum k long. Runs it through oneDNN's sgemm, cut
 * into slices over the plugin's pool, and returns 1. Returns 0 when the
 * caller must run its own GEMM (C as it was, or to be overwritten: beta
 * 0): no oneDNN, turned off, a product too small to gain (below 2^21
 * multiply-adds), leading dimensions oneDNN would refuse, or oneDNN out
 * of memory with beta 0. Returns -1 when oneDNN failed after accumulating
 * into part of C (beta != 0): the caller reports the error. Thread-safe;
 * from inside a pool job it runs on the calling thread alone. */
CPU_HIDDEN int cpu_sgemm_dnnl(int col_major, int ta, int tb, int64_t m, int64_t n, int64_t k, float alpha,
                              const float* a, int64_t lda, const float* b, int64_t ldb, float beta, float* c,
                              int64_t ldc);

#endif /* BP_CPU_GEMM_DNNL_H_ */
