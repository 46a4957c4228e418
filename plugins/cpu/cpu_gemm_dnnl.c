/* backplane CPU plugin: f32 GEMM through oneDNN's sgemm (libdnnl), when
 * the plugin is built with it (BP_DNNL, plugins/cpu/CMakeLists.txt).
 *
 * oneDNN's AVX-512 sgemm ran the transformer block's products (512 rows by
 * 1024 to 4096) at 310-346 GFLOP/s on a 2-core AVX-512 machine where
 * OpenBLAS 0.3.21 ran them at 96-155 with its own threads and at 190-198
 * cut in row halves, one thread each. As for convolutions
 * (cpu_conv_dnnl.c), no OpenMP team runs: a team splits a call statically,
 * so one starved thread holds the whole call back. The product is cut
 * into one slice per pool participant, by columns of op(B) (rows of op(A)
 * when C has few columns), each slice one sgemm with an OpenMP team of
 * one, run on the pool (cpu_parallel_for). Small products stay with the
 * caller's BLAS: below about 2^21 multiply-adds the call costs more than
 * it gains (attention's tiles, decode GEMVs).
 *
 * Row-major is oneDNN's convention; a column-major call is the same
 * product transposed (C^T = op(B)^T op(A)^T), so it swaps the operands.
 */
#include "cpu_gemm_dnnl.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "cpu_internal.h"

#ifdef BP_CPU_HAVE_DNNL
#include <oneapi/dnnl/dnnl.h>
#include <omp.h>

static int g_wanted;
static pthread_once_t g_wanted_once = PTHREAD_ONCE_INIT;
static void wanted_init(void) {
  const char* env = getenv("BACKPLANE_CPU_DNNL");
  g_wanted = !(env && strcmp(env, "0") == 0);
}
int cpu_dnnl_wanted(void) {
  pthread_once(&g_wanted_once, wanted_init);
  return g_wanted;
}

/* Products smaller than this (multiply-adds) keep the caller's BLAS. */
#define SGEMM_DNNL_MIN_MACS (INT64_C(1) << 21)
/* C's columns from which the slices cut columns (else rows). */
#define SGEMM_DNNL_MIN_SIDE 256
/* Slices are whole multiples of this many rows or columns. */
#define SGEMM_DNNL_ALIGN 16

typedef struct sgemm_job {
  char ta, tb;
  int64_t m, n, k, lda, ldb, ldc;
  float alpha, beta;
  const float *a, *b;
  float* c;
  int by_rows;      /* slices of C's rows (else of its columns) */
  int64_t per;      /* rows or columns per slice */
  _Atomic int failed;
} sgemm_job_t;

static void sgemm_slices(void* ctx, int64_t begin, int64_t end) {
  sgemm_job_t* j = ctx;
  omp_set_num_threads(1); /* this thread's OpenMP team: itself (the ICV is per thread) */
  for (int64_t s = begin; s < end; s++) {
    int64_t lo = s * j->per, len = (j->by_rows ? j->m : j->n) - lo;
    if (len > j->per) len = j->per;
    if (len <= 0) continue;
    const float *a = j->a, *b = j->b;
    float* c = j->c;
    int64_t m = j->m, n = j->n;
    if (j->by_rows) {
      a += j->ta == 'N' ? lo * j->lda : lo;
      c += lo * j->ldc;
      m = len;
    } else {
      b += j->tb == 'N' ? lo : lo * j->ldb;
      c += lo;
      n = len;
    }
    if (dnnl_sgemm(j->ta, j->tb, m, n, j->k, j->alpha, a, j->lda, b, j->ldb, j->beta, c, j->ldc) !=
        dnnl_success)
      atomic_store(&j->failed, 1);
  }
}

int cpu_sgemm_dnnl_takes(int64_t m, int64_t n, int64_t k) {
  /* in double: three sizes up to 2^31 each overflow int64 */
  return cpu_dnnl_wanted() && m > 0 && n > 0 && k > 0 && (double)m * (double)n * (double)k >= (double)SGEMM_DNNL_MIN_MACS;
}

int cpu_sgemm_dnnl(int col_major, int ta, int tb, int64_t m, int64_t n, int64_t k, float alpha, const float* a,
                   int64_t lda, const float* b, int64_t ldb, float beta, float* c, int64_t ldc) {
  if (!cpu_sgemm_dnnl_takes(m, n, k)) return 0;
  sgemm_job_t j;
  memset(&j, 0, sizeof j);
  if (col_major) { /* the row-major product C^T = op(B)^T op(A)^T */
    j.ta = tb ? 'T' : 'N', j.tb = ta ? 'T' : 'N';
    j.m = n, j.n = m, j.a = b, j.lda = ldb, j.b = a, j.ldb = lda;
  } else {
    j.ta = ta ? 'T' : 'N', j.tb = tb ? 'T' : 'N';
    j.m = m, j.n = n, j.a = a, j.lda = lda, j.b = b, j.ldb = ldb;
  }
  j.k = k, j.alpha = alpha, j.beta = beta, j.c = c, j.ldc = ldc;
  if (j.lda < (j.ta == 'N' ? j.k : j.m) || j.ldb < (j.tb == 'N' ? j.n : j.k) || j.ldc < j.n) return 0;
  /* Columns of op(B) when there are enough: each slice then packs its own
   * part of B (the weights of a linear layer) and all of A, which is the
   * smaller share for the activations' few rows; rows otherwise. Measured
   * on the transformer block's shapes (512 rows, 1024 to 4096 columns):
   * 350-380 GFLOP/s by columns, 180-245 by rows, 300-315 with oneDNN's
   * own team of two. */
  j.by_rows = j.n < SGEMM_DNNL_MIN_SIDE;
  int64_t side = j.by_rows ? j.m : j.n, parts = (int64_t)cpu_pool_threads();
  int64_t units = (side + SGEMM_DNNL_ALIGN - 1) / SGEMM_DNNL_ALIGN;
  if (parts > units) parts = units;
  if (parts < 1) parts = 1;
  j.per = (units + parts - 1) / parts * SGEMM_DNNL_ALIGN;
  cpu_parallel_for((side + j.per - 1) / j.per, 1, sgemm_slices, &j);
  /* Leading dimensions were checked, so a failure is oneDNN out of memory
   * for its packing buffers, with some slices written: with beta = 0 the
   * caller's BLAS recomputes the whole product, else C has lost its
   * accumulator and the caller reports the error. */
  if (atomic_load(&j.failed)) return beta == 0.0f ? 0 : -1;
  return 1;
}

#else /* no oneDNN in this build */

int cpu_dnnl_wanted(void) { return 0; }
int cpu_sgemm_dnnl_takes(int64_t m, int64_t n, int64_t k) {
  (void)m, (void)n, (void)k;
  return 0;
}
int cpu_sgemm_dnnl(int col_major, int ta, int tb, int64_t m, int64_t n, int64_t k, float alpha, const float* a,
                   int64_t lda, const float* b, int64_t ldb, float beta, float* c, int64_t ldc) {
  (void)col_major, (void)ta, (void)tb, (void)m, (void)n, (void)k, (void)alpha, (void)a, (void)lda;
  (void)b, (void)ldb, (void)beta, (void)c, (void)ldc;
  return 0;
}

#endif
