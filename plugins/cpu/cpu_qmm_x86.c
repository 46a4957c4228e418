/* backplane CPU plugin: x86 kernels of the quantized matmuls (cpu_qmm.h). */
#include "cpu_qmm.h"

int cpu_qmm_vnni_available(void) { return 0; }
int cpu_qmm_avx512_available(void) { return 0; }

bp_status_t cpu_qmm_s8_gemm_vnni(const uint8_t* a, int a_u8, int32_t a_zp, const int8_t* b,
                                 int64_t m, int64_t n, int64_t k, int32_t* c) {
  (void)a, (void)a_u8, (void)a_zp, (void)b, (void)m, (void)n, (void)k, (void)c;
  return cpu_error(BP_UNIMPLEMENTED, "cpu: scaled_mm: no VNNI kernel on this build");
}

bp_status_t cpu_qmm_w4_gemv_avx512(const uint8_t* w, int w_signed, const float* x, int64_t m,
                                   int64_t n, int64_t k, int64_t g, const double* s,
                                   const double* z, const double* bias, float* y) {
  (void)w, (void)w_signed, (void)x, (void)m, (void)n, (void)k, (void)g, (void)s, (void)z,
      (void)bias, (void)y;
  return cpu_error(BP_UNIMPLEMENTED, "cpu: weight_only_mm: no AVX-512 kernel on this build");
}
