/* bp-bench harness: timing, statistics, baselines and the figure list. */
#define _GNU_SOURCE
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

#include "bench.h"

#ifdef BP_BENCH_HAVE_OPENBLAS
#include <cblas.h>
#endif

double bpb_now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

void bpb_quiesce(void) {
  /* OpenBLAS's threads spin for 2^28 cycles (its THREAD_TIMEOUT default;
   * 0.13 s at 2.1 GHz) after a call before they sleep */
  struct timespec ts = {0, 300 * 1000 * 1000};
  while (nanosleep(&ts, &ts) != 0) {
  }
}

static int cmp_double(const void* a, const void* b) {
  double x = *(const double*)a, y = *(const double*)b;
  return (x > y) - (x < y);
}

double bpb_median(double* v, int n) {
  if (n <= 0) return NAN;
  qsort(v, (size_t)n, sizeof *v, cmp_double);
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

void bpb_check(bp_status_t st, const char* expr) {
  if (st == BP_OK) return;
  fprintf(stderr, "bp-bench: %s failed: %s: %s\n", expr, bp_status_name(st), bp_status_message());
  exit(1);
}

int bpb_unsupported(bp_status_t st, const char* figure) {
  if (st != BP_UNIMPLEMENTED && st != BP_UNSUPPORTED) {
    bpb_check(st, figure);
    return 0;
  }
  printf("figure '%s' skipped: %s\n", figure, bp_status_message());
  return 1;
}

/* Large blocks are aligned to 2 MiB and marked for transparent huge pages,
 * as the CPU plugin's buffers are (bp_kit_host_pages.h), so that the copy
 * loop baselines run on the same kind of pages as the ops they measure. */
void* bpb_alloc(size_t bytes) {
  const size_t huge = (size_t)2 << 20;
  void* p;
  if (bytes >= 2 * huge) {
    size_t rounded = (bytes + huge - 1) / huge * huge;
    p = aligned_alloc(huge, rounded);
#ifdef MADV_HUGEPAGE
    if (p) (void)madvise(p, rounded, MADV_HUGEPAGE);
#endif
  } else {
    p = aligned_alloc(64, (bytes + 63) / 64 * 64);
  }
  if (!p) {
    fprintf(stderr, "bp-bench: out of host memory (%zu bytes)\n", bytes);
    exit(1);
  }
  return p;
}

void bpb_fill_random(float* p, size_t n, unsigned seed) {
  uint64_t s = seed * 0x9E3779B97F4A7C15ull + 1;
  for (size_t i = 0; i < n; ++i) {
    s ^= s << 13, s ^= s >> 7, s ^= s << 17;
    p[i] = (float)((double)(s >> 11) / 9007199254740992.0 - 0.5);
  }
}

bp_tensor_t* bpb_tensor(bpb_ctx_t* ctx, uint32_t dtype, uint32_t rank, const int64_t* sizes) {
  bp_tensor_t* t = NULL;
  BPB_CHECK(bp_tensor_create(ctx->device, dtype, rank, sizes, &t));
  return t;
}

bp_tensor_t* bpb_tensor_random(bpb_ctx_t* ctx, uint32_t rank, const int64_t* sizes,
                               unsigned seed) {
  size_t n = 1;
  for (uint32_t d = 0; d < rank; ++d) n *= (size_t)sizes[d];
  bp_tensor_t* t = bpb_tensor(ctx, BP_DTYPE_F32, rank, sizes);
  float* h = bpb_alloc(n * sizeof(float));
  bpb_fill_random(h, n, seed);
  BPB_CHECK(bp_tensor_write(ctx->stream, t, h, n * sizeof(float)));
  BPB_CHECK(bp_stream_synchronize(ctx->stream));
  free(h);
  return t;
}

/* ---- figures ---------------------------------------------------------- */
#define BPB_MAX_FIGURES 128
static bpb_figure_t g_figs[BPB_MAX_FIGURES];
static int g_nfigs;

void bpb_add_figure(const bpb_figure_t* f) {
  if (g_nfigs >= BPB_MAX_FIGURES) return;
  g_figs[g_nfigs] = *f;
  g_figs[g_nfigs].name = strdup(f->name);
  if (g_figs[g_nfigs].name) g_nfigs++;
}

int bpb__figure_count(void) { return g_nfigs; }
const bpb_figure_t* bpb__figure(int i) { return &g_figs[i]; }
void bpb__figures_free(void) {
  for (int i = 0; i < g_nfigs; ++i) free((char*)g_figs[i].name);
  g_nfigs = 0;
}

/* ---- baselines -------------------------------------------------------- */
typedef struct loop_job {
  const float* a;
  const float* b; /* NULL: copy a to dst */
  float* dst;
  size_t n;
} loop_job_t;

static void* plain_loop(void* arg) {
  loop_job_t* j = arg;
  const float* restrict a = j->a;
  const float* restrict b = j->b;
  float* restrict d = j->dst;
  if (b)
    for (size_t i = 0; i < j->n; ++i) d[i] = a[i] + b[i];
  else
    for (size_t i = 0; i < j->n; ++i) d[i] = a[i];
  return NULL;
}

double bpb_copy_loop(const float* a, const float* b, float* dst, size_t n, int threads) {
  pthread_t tid[64];
  loop_job_t jobs[64];
  if (threads > 64) threads = 64;
  if (threads < 1) threads = 1;
  size_t chunk = (n + (size_t)threads - 1) / (size_t)threads;
  double t0 = bpb_now();
  for (int t = 0; t < threads; ++t) {
    size_t lo = (size_t)t * chunk, hi = lo + chunk > n ? n : lo + chunk;
    if (lo > n) lo = n;
    jobs[t] = (loop_job_t){a + lo, b ? b + lo : NULL, dst + lo, hi - lo};
    if (t == 0) continue;
    pthread_create(&tid[t], NULL, plain_loop, &jobs[t]);
  }
  plain_loop(&jobs[0]);
  for (int t = 1; t < threads; ++t) pthread_join(tid[t], NULL);
  return bpb_now() - t0;
}

double bpb_copy_bandwidth(bpb_ctx_t* ctx) {
  static double cached;
  if (cached > 0) return cached;
  size_t n = ctx->quick ? (size_t)1 << 20 : (size_t)16 << 20;
  float* a = bpb_alloc(n * sizeof(float));
  float* d = bpb_alloc(n * sizeof(float));
  bpb_fill_random(a, n, 7);
  memset(d, 0, n * sizeof(float));
  bpb_copy_loop(a, NULL, d, n, ctx->cores); /* touch every page */
  double t[BPB_MAX_REPS];
  for (int r = 0; r < ctx->reps; ++r) t[r] = bpb_copy_loop(a, NULL, d, n, ctx->cores);
  cached = 2.0 * (double)n * sizeof(float) / bpb_median(t, ctx->reps) / 1e9;
  free(a);
  free(d);
  return cached;
}

double bpb_time(bpb_ctx_t* ctx, bpb_run_fn fn, void* user) {
  double t[BPB_MAX_REPS];
  for (int w = 0; w < BPB_WARMUP_RUNS; w++) BPB_CHECK(fn(ctx, user));
  BPB_CHECK(bp_stream_synchronize(ctx->stream));
  for (int r = 0; r < ctx->reps; ++r) {
    double t0 = bpb_now();
    BPB_CHECK(fn(ctx, user));
    BPB_CHECK(bp_stream_synchronize(ctx->stream));
    t[r] = bpb_now() - t0;
  }
  return bpb_median(t, ctx->reps);
}

double bpb_sgemm_seconds(int64_t batch, int64_t m, int64_t n, int64_t k, const float* a,
                         const float* b, float* c) {
#ifdef BP_BENCH_HAVE_OPENBLAS
  double t0 = bpb_now();
  for (int64_t i = 0; i < batch; ++i)
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)m, (int)n, (int)k, 1.0f,
                a + i * m * k, (int)k, b + i * k * n, (int)n, 0.0f, c + i * m * n, (int)n);
  return bpb_now() - t0;
#else
  (void)batch, (void)m, (void)n, (void)k, (void)a, (void)b, (void)c;
  return NAN;
#endif
}

int bpb_time_vs_copy(bpb_ctx_t* ctx, bpb_run_fn fn, void* user, const float* src, float* dst,
                     size_t n, const char* figure, double* out_op_s, double* out_copy_s) {
  double t_op[BPB_MAX_REPS], t_copy[BPB_MAX_REPS];
  /* warm-up: first-touch of outputs, pipelines, caches */
  if (bpb_unsupported(fn(ctx, user), figure)) return 0;
  for (int w = 1; w < BPB_WARMUP_RUNS; w++) BPB_CHECK(fn(ctx, user));
  BPB_CHECK(bp_stream_synchronize(ctx->stream));
  bpb_copy_loop(src, NULL, dst, n, ctx->cores);
  for (int r = 0; r < ctx->reps; r++) {
    int runs = 0;
    double t0 = bpb_now(), dt;
    do {
      bpb_copy_loop(src, NULL, dst, n, ctx->cores);
      dt = bpb_now() - t0;
    } while (++runs < BPB_BURST || dt < BPB_BURST_S);
    t_copy[r] = dt / runs;
    runs = 0;
    t0 = bpb_now();
    do {
      for (int b = 0; b < BPB_BURST; b++) BPB_CHECK(fn(ctx, user));
      BPB_CHECK(bp_stream_synchronize(ctx->stream));
      runs += BPB_BURST;
      dt = bpb_now() - t0;
    } while (dt < BPB_BURST_S);
    t_op[r] = dt / runs;
  }
  *out_op_s = bpb_median(t_op, ctx->reps);
  *out_copy_s = bpb_median(t_copy, ctx->reps);
  return 1;
}
