/* backplane CPU plugin: the x86 kernels of the quantized matmuls
 * (cpu_qmm_x86.c), chosen at run time by CPUID; cpu_qmm.c holds the
 * portable paths and falls back to them where these are unavailable (other
 * CPUs, other architectures, valgrind, which hides AVX-512). */
#ifndef BP_CPU_QMM_H_
#define BP_CPU_QMM_H_

#include <stdint.h>

#include "cpu_internal.h"

/* Nonzero when the CPU runs AVX-512 F/BW (+ VNNI for the first). */
CPU_HIDDEN int cpu_qmm_vnni_available(void);
CPU_HIDDEN int cpu_qmm_avx512_available(void);

/* c[m, n] (i32, dense) = sum_k (a[m, k] - a_zp) * b[k, n]: a i8 (a_u8 0) or
 * u8, b i8, both dense row-major; exact while the sums fit in int32.
 * Packs b into VNNI panels and a into u8 rows (temporaries of the operands'
 * size); runs on the pool. Equivalent to MatMulInteger with b_zero_point 0. */
CPU_HIDDEN bp_status_t cpu_qmm_s8_gemm_vnni(const uint8_t* a, int a_u8, int32_t a_zp,
                                            const int8_t* b, int64_t m, int64_t n, int64_t k,
                                            int32_t* c);

/* Nonzero when the AVX-512 weight-only path takes these: 4-bit codes with
 * k a multiple of 128 and groups of 32, 64 or a multiple of 128; 8-bit
 * codes with groups of a multiple of 16; the group size dividing k; f32 /
 * f16 / bf16 scales; zero points absent, of the scale's dtype, i8 or u8. */
CPU_HIDDEN int cpu_qmm_wq_fits(int bits, int64_t k, int64_t g, uint32_t s_dtype, uint32_t z_dtype);

/* y[m, n] = x[m, k] @ ((w - z) * s)^T + bias: w [n, k] 8-bit codes or
 * [n, k / 2] two 4-bit codes per byte (low nibble first); signed codes
 * when w_signed; s and z [n, k / g] as stored (z NULL: 0), x and y f32
 * dense, bias n doubles (NULL: none). The codes are decoded in registers,
 * never into a temporary; x is copied (4-bit: permuted) once per call
 * (m * k floats). Runs on the pool. */
CPU_HIDDEN bp_status_t cpu_qmm_wq_gemv_avx512(const uint8_t* w, int bits, int w_signed,
                                              const float* x, int64_t m, int64_t n, int64_t k,
                                              int64_t g, const void* s, uint32_t s_dtype,
                                              const void* z, uint32_t z_dtype, const double* bias,
                                              float* y);

/* The same product for 4-bit codes with each row of x quantized to int8
 * per block of 32 elements (scale amax / 127; BP_QUANTIZE_INT8_ACTIVATIONS):
 * integer dot products through AVX-512 VNNI (vpdpbusd) on the nibbles
 * unpacked in registers, converted to f32 once per 128 codes. Takes
 * cpu_qmm_wq_gemv_avx512's f32 path instead where VNNI is missing, the
 * shape does not fit (cpu_qmm_wq_fits) or x holds a NaN or an infinity.
 * Temporaries: m * k bytes of codes and m * k / 8 + m * k / 32 words. */
CPU_HIDDEN bp_status_t cpu_qmm_wq_gemv_q8(const uint8_t* w, int w_signed, const float* x,
                                          int64_t m, int64_t n, int64_t k, int64_t g,
                                          const void* s, uint32_t s_dtype, const void* z,
                                          uint32_t z_dtype, const double* bias, float* y);

/* enum bp_activation `act` of v (NONE: v), in double. */
CPU_HIDDEN double cpu_qmm_act(uint32_t act, double v);

/* weight_only_mm on a validated, dense call (cpu_qmm.c); grouped_mm runs it
 * once per expert on descriptors of the expert's slices. */
CPU_HIDDEN bp_status_t cpu_exec_weight_only_mm(const bp_op_call_t* call);

#endif /* BP_CPU_QMM_H_ */
