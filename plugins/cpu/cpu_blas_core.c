/* backplane CPU plugin: OpenBLAS's kernel choice on CPUs it does not know.
 *
 * A DYNAMIC_ARCH OpenBLAS picks its kernels from the CPU's family and
 * model when it loads. A model newer than the library (OpenBLAS 0.3.21 on
 * an Emerald Rapids Xeon, family 6 model 207, for one) falls back to the
 * Prescott kernels: SSE3, about a fifth of the speed the CPU's AVX-512 or
 * AVX2 units give (measured: sgemm 256^3 at 12 vs 60 GFLOP/s). When the
 * library chose Prescott, the user did not force a core type
 * (OPENBLAS_CORETYPE), and the CPU has AVX-512F (or AVX2 and FMA), the
 * library is initialized again with SkylakeX (or Haswell) kernels: what
 * OPENBLAS_CORETYPE would have chosen at load time.
 *
 * Only with a DYNAMIC_ARCH OpenBLAS (gotoblas_dynamic_init exported; weak
 * references, so any other BLAS leaves this a no-op). Called once, from the
 * first instance_create, before any GEMM runs; it sets and removes
 * OPENBLAS_CORETYPE in the environment around the call.
 */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "cpu_internal.h"

#ifdef BP_CPU_HAVE_CBLAS
extern void* gotoblas __attribute__((weak));
void gotoblas_dynamic_init(void) __attribute__((weak));
char* openblas_get_corename(void) __attribute__((weak));

static void blas_core_fix(void) {
  if (!gotoblas_dynamic_init || !openblas_get_corename || !&gotoblas) return;
  const char* core = openblas_get_corename();
  if (!core || strcasecmp(core, "prescott") != 0 || getenv("OPENBLAS_CORETYPE")) return;
  __builtin_cpu_init();
  const char* better = __builtin_cpu_supports("avx512f")                                     ? "SkylakeX"
                       : __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") ? "Haswell"
                                                                                            : NULL;
  if (!better || setenv("OPENBLAS_CORETYPE", better, 0) != 0) return;
  void* old = gotoblas;
  gotoblas = NULL; /* gotoblas_dynamic_init returns at once while one is set */
  gotoblas_dynamic_init();
  if (!gotoblas) gotoblas = old;
  unsetenv("OPENBLAS_CORETYPE");
}
#endif

void cpu_blas_core_init(void) {
#ifdef BP_CPU_HAVE_CBLAS
  static pthread_once_t once = PTHREAD_ONCE_INIT;
  pthread_once(&once, blas_core_fix);
#endif
}
