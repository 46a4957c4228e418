/* bp-bench: performance figures as ratios against baselines measured in the
 * same run.
 *
 * Every figure is the median of several repetitions; each ratio divides the
 * backplane figure by a baseline measured by this process minutes apart at
 * most, so machine noise mostly cancels. See docs/performance.md.
 *
 *   bp-bench [--device SPEC] [--quick] [--reps N] [--json FILE]
 */
#define _GNU_SOURCE
#include <cjson/cJSON.h>
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "backplane/backplane.h"

#ifdef BP_BENCH_HAVE_OPENBLAS
#include <cblas.h>
#endif

/* ------------------------------------------------------------------------ */
/* Timing and statistics                                                     */
/* ------------------------------------------------------------------------ */
static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int cmp_double(const void* a, const void* b) {
  double x = *(const double*)a, y = *(const double*)b;
  return (x > y) - (x < y);
}

static double median(double* v, int n) {
  qsort(v, (size_t)n, sizeof *v, cmp_double);
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

#define MAX_REPS 64

/* ------------------------------------------------------------------------ */
/* Baselines: plain C loops (copy, and the add itself), on 1 thread and on  */
/* every core.                                                               */
/* ------------------------------------------------------------------------ */
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

/* Runs the loop over n floats split across `threads` threads; seconds. */
static double timed_loop(const float* a, const float* b, float* dst, size_t n, int threads) {
  pthread_t tid[64];
  loop_job_t jobs[64];
  if (threads > 64) threads = 64;
  size_t chunk = (n + (size_t)threads - 1) / (size_t)threads;
  double t0 = now_s();
  for (int t = 0; t < threads; ++t) {
    size_t lo = (size_t)t * chunk, hi = lo + chunk > n ? n : lo + chunk;
    if (lo > n) lo = n;
    jobs[t] = (loop_job_t){a + lo, b ? b + lo : NULL, dst + lo, hi - lo};
    if (t == 0) continue;
    pthread_create(&tid[t], NULL, plain_loop, &jobs[t]);
  }
  plain_loop(&jobs[0]);
  for (int t = 1; t < threads; ++t) pthread_join(tid[t], NULL);
  return now_s() - t0;
}

/* ------------------------------------------------------------------------ */
/* Helpers                                                                   */
/* ------------------------------------------------------------------------ */
#define CHECK(expr)                                                                  \
  do {                                                                               \
    bp_status_t st_ = (expr);                                                        \
    if (st_ != BP_OK) {                                                              \
      fprintf(stderr, "bp-bench: %s failed: %s: %s\n", #expr, bp_status_name(st_), \
              bp_status_message());                                                  \
      exit(1);                                                                       \
    }                                                                                \
  } while (0)

static bp_tensor_t* new_tensor(bp_device_t* dev, uint32_t dtype, uint32_t rank,
                               const int64_t* sizes) {
  bp_tensor_t* t = NULL;
  CHECK(bp_tensor_create(dev, dtype, rank, sizes, &t));
  return t;
}

static void fill_random(float* p, size_t n, unsigned seed) {
  uint64_t s = seed * 0x9E3779B97F4A7C15ull + 1;
  for (size_t i = 0; i < n; ++i) {
    s ^= s << 13, s ^= s >> 7, s ^= s << 17;
    p[i] = (float)((double)(s >> 11) / 9007199254740992.0 - 0.5);
  }
}

typedef struct figure {
  const char* name;
  const char* unit;
  double value;      /* backplane */
  double baseline;   /* same unit */
  const char* baseline_name;
  double target;     /* ratio target, 0 = none */
  int lower_is_better;
} figure_t;

static figure_t g_figs[32];
static int g_nfigs;

static void add_figure(figure_t f) {
  if (g_nfigs < 32) g_figs[g_nfigs++] = f;
}

/* ------------------------------------------------------------------------ */
/* Benchmarks                                                                */
/* ------------------------------------------------------------------------ */
static void bench_add_bandwidth(bp_device_t* dev, bp_stream_t* stream, size_t n, int reps) {
  int cores = (int)sysconf(_SC_NPROCESSORS_ONLN);
  if (cores < 1) cores = 1;
  float* hs = aligned_alloc(64, n * sizeof(float));
  float* hs2 = aligned_alloc(64, n * sizeof(float));
  float* hd = aligned_alloc(64, n * sizeof(float));
  if (!hs || !hs2 || !hd) {
    fprintf(stderr, "bp-bench: out of host memory\n");
    exit(1);
  }
  fill_random(hs, n, 1);
  fill_random(hs2, n, 4);
  memset(hd, 0, n * sizeof(float));

  int64_t sizes[1] = {(int64_t)n};
  bp_tensor_t* a = new_tensor(dev, BP_DTYPE_F32, 1, sizes);
  bp_tensor_t* b = new_tensor(dev, BP_DTYPE_F32, 1, sizes);
  bp_tensor_t* c = new_tensor(dev, BP_DTYPE_F32, 1, sizes);
  CHECK(bp_tensor_write(stream, a, hs, n * sizeof(float)));
  CHECK(bp_tensor_write(stream, b, hs, n * sizeof(float)));

  double t_copy1[MAX_REPS], t_copyn[MAX_REPS], t_cadd[MAX_REPS], t_add[MAX_REPS];
  /* Warm up: touch every page once. */
  timed_loop(hs, NULL, hd, n, cores);
  CHECK(bp_op_add(stream, a, b, NULL, &c));
  CHECK(bp_stream_synchronize(stream));
  /* Interleave the baselines and the op so that drift hits all alike. */
  for (int r = 0; r < reps; ++r) {
    t_copy1[r] = timed_loop(hs, NULL, hd, n, 1);
    t_copyn[r] = timed_loop(hs, NULL, hd, n, cores);
    t_cadd[r] = timed_loop(hs, hs2, hd, n, cores);
    double t0 = now_s();
    CHECK(bp_op_add(stream, a, b, NULL, &c));
    CHECK(bp_stream_synchronize(stream));
    t_add[r] = now_s() - t0;
  }
  double bytes_copy = 2.0 * (double)n * sizeof(float);
  double bytes_add = 3.0 * (double)n * sizeof(float);
  double bw1 = bytes_copy / median(t_copy1, reps) / 1e9;
  double bwn = bytes_copy / median(t_copyn, reps) / 1e9;
  double bwc = bytes_add / median(t_cadd, reps) / 1e9;
  double bwa = bytes_add / median(t_add, reps) / 1e9;
  add_figure((figure_t){"f32 add, 16M elements: bandwidth vs copy loop on all cores", "GB/s",
                        bwa, bwn, "C copy loop, all cores", 0.8, 0});
  add_figure((figure_t){"f32 add, 16M elements: bandwidth vs copy loop on 1 thread", "GB/s",
                        bwa, bw1, "C copy loop, 1 thread", 0.0, 0});
  add_figure((figure_t){"f32 add, 16M elements: bandwidth vs C add loop on all cores", "GB/s",
                        bwa, bwc, "C add loop, all cores", 0.0, 0});
  bp_tensor_release(a);
  bp_tensor_release(b);
  bp_tensor_release(c);
  free(hs);
  free(hs2);
  free(hd);
}

static void bench_sgemm(bp_device_t* dev, bp_stream_t* stream, int64_t n, int reps) {
  size_t count = (size_t)(n * n);
  float* ha = aligned_alloc(64, count * sizeof(float));
  float* hb = aligned_alloc(64, count * sizeof(float));
  float* hc = aligned_alloc(64, count * sizeof(float));
  if (!ha || !hb || !hc) {
    fprintf(stderr, "bp-bench: out of host memory\n");
    exit(1);
  }
  fill_random(ha, count, 2);
  fill_random(hb, count, 3);
  int64_t sizes[2] = {n, n};
  bp_tensor_t* a = new_tensor(dev, BP_DTYPE_F32, 2, sizes);
  bp_tensor_t* b = new_tensor(dev, BP_DTYPE_F32, 2, sizes);
  bp_tensor_t* c = new_tensor(dev, BP_DTYPE_F32, 2, sizes);
  CHECK(bp_tensor_write(stream, a, ha, count * sizeof(float)));
  CHECK(bp_tensor_write(stream, b, hb, count * sizeof(float)));
  double flops = 2.0 * (double)n * (double)n * (double)n;
  double t_bp[MAX_REPS], t_ref[MAX_REPS];
  CHECK(bp_op_mm(stream, a, b, NULL, &c)); /* warm-up */
  CHECK(bp_stream_synchronize(stream));
  for (int r = 0; r < reps; ++r) {
#ifdef BP_BENCH_HAVE_OPENBLAS
    double t0 = now_s();
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)n, (int)n, (int)n, 1.0f, ha,
                (int)n, hb, (int)n, 0.0f, hc, (int)n);
    t_ref[r] = now_s() - t0;
#else
    t_ref[r] = NAN;
#endif
    double t1 = now_s();
    CHECK(bp_op_mm(stream, a, b, NULL, &c));
    CHECK(bp_stream_synchronize(stream));
    t_bp[r] = now_s() - t1;
  }
  char* name = NULL;
  if (asprintf(&name, "sgemm %lldx%lldx%lld: GFLOP/s vs direct OpenBLAS", (long long)n,
               (long long)n, (long long)n) < 0)
    exit(1);
  add_figure((figure_t){name, "GFLOP/s", flops / median(t_bp, reps) / 1e9,
                        flops / median(t_ref, reps) / 1e9, "cblas_sgemm (OpenBLAS) direct",
                        0.95, 0});
  bp_tensor_release(a);
  bp_tensor_release(b);
  bp_tensor_release(c);
  free(ha);
  free(hb);
  free(hc);
}

/* Dispatch cost: time for bp_op_add to validate and enqueue a one-element
 * add into a given output (the call returns once enqueued). Calls are timed
 * in batches of 64, below any sane queue depth, so the figure is the
 * caller's cost and not the queue's back-pressure; the stream is drained
 * between batches (not timed). A second figure is the amortised time per op
 * from enqueue to completion over long runs (the backend's per-op
 * throughput). The baseline is an empty call through a function pointer. */
static void noop_call(volatile int* p) { (void)p; }
static void (*volatile g_noop)(volatile int*) = noop_call;

#define DISPATCH_BATCH 64

static void bench_dispatch(bp_device_t* dev, bp_stream_t* stream, int reps, int calls) {
  int64_t one[1] = {1};
  bp_tensor_t* a = new_tensor(dev, BP_DTYPE_F32, 1, one);
  bp_tensor_t* b = new_tensor(dev, BP_DTYPE_F32, 1, one);
  bp_tensor_t* c = new_tensor(dev, BP_DTYPE_F32, 1, one);
  float v = 1.0f;
  CHECK(bp_tensor_write(stream, a, &v, sizeof v));
  CHECK(bp_tensor_write(stream, b, &v, sizeof v));
  double t_call[MAX_REPS], t_rt[MAX_REPS], t_noop[MAX_REPS];
  volatile int sink = 0;
  int batches = calls / DISPATCH_BATCH > 0 ? calls / DISPATCH_BATCH : 1;
  for (int r = 0; r < reps; ++r) {
    double enqueue = 0;
    for (int k = 0; k < batches; ++k) {
      double t0 = now_s();
      for (int i = 0; i < DISPATCH_BATCH; ++i) CHECK(bp_op_add(stream, a, b, NULL, &c));
      enqueue += now_s() - t0;
      CHECK(bp_stream_synchronize(stream));
    }
    t_call[r] = enqueue / ((double)batches * DISPATCH_BATCH) * 1e9;
    double t1 = now_s();
    for (int i = 0; i < calls; ++i) CHECK(bp_op_add(stream, a, b, NULL, &c));
    CHECK(bp_stream_synchronize(stream));
    t_rt[r] = (now_s() - t1) / calls * 1e9;
    double t3 = now_s();
    for (int i = 0; i < calls; ++i) g_noop(&sink);
    t_noop[r] = (now_s() - t3) / calls * 1e9;
  }
  add_figure((figure_t){"dispatch of a one-element f32 add (enqueue, output given)", "ns",
                        median(t_call, reps), median(t_noop, reps), "indirect empty call",
                        1000.0, 1});
  add_figure((figure_t){"one-element f32 add, enqueue to completion, amortised", "ns",
                        median(t_rt, reps), median(t_noop, reps), "indirect empty call", 0.0,
                        1});
  bp_tensor_release(a);
  bp_tensor_release(b);
  bp_tensor_release(c);
}

/* ------------------------------------------------------------------------ */
/* Main                                                                      */
/* ------------------------------------------------------------------------ */
static void usage(FILE* f) {
  fprintf(f,
          "usage: bp-bench [--device SPEC] [--quick] [--reps N] [--json FILE]\n"
          "  --device SPEC  device to measure (default cpu:0)\n"
          "  --quick        smaller sizes and fewer repetitions (smoke test)\n"
          "  --reps N       repetitions per figure (median reported; default 9)\n"
          "  --json FILE    also write the figures as JSON\n");
}

int main(int argc, char** argv) {
  const char* spec = "cpu:0";
  const char* json_path = NULL;
  int quick = 0, reps = 9;
  for (int i = 1; i < argc; ++i) {
    if (!strcmp(argv[i], "--device") && i + 1 < argc) spec = argv[++i];
    else if (!strcmp(argv[i], "--json") && i + 1 < argc) json_path = argv[++i];
    else if (!strcmp(argv[i], "--reps") && i + 1 < argc) reps = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--quick")) quick = 1;
    else if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
      usage(stdout);
      return 0;
    } else {
      usage(stderr);
      return 2;
    }
  }
  if (reps < 1) reps = 1;
  if (reps > MAX_REPS) reps = MAX_REPS;
  if (quick && reps > 3) reps = 3;

  bp_context_t* ctx = NULL;
  CHECK(bp_context_create(NULL, &ctx));
  bp_device_t* dev = NULL;
  CHECK(bp_context_find_device(ctx, spec, &dev));
  bp_stream_t* stream = NULL;
  CHECK(bp_stream_create(dev, 0, &stream));

  printf("bp-bench on %s (%s); medians of %d repetitions\n", bp_device_name(dev),
         bp_device_properties(dev)->name, reps);
  bench_add_bandwidth(dev, stream, quick ? (size_t)1 << 20 : (size_t)16 << 20, reps);
  bench_sgemm(dev, stream, quick ? 256 : 2048, reps);
  bench_dispatch(dev, stream, reps, quick ? 2000 : 200000);

  printf("\n%-62s %12s %12s %9s %10s\n", "figure", "backplane", "baseline", "ratio", "target");
  cJSON* root = cJSON_CreateObject();
  cJSON_AddStringToObject(root, "device", bp_device_name(dev));
  cJSON_AddNumberToObject(root, "repetitions", reps);
  cJSON_AddBoolToObject(root, "quick", quick);
  cJSON* arr = cJSON_AddArrayToObject(root, "figures");
  for (int i = 0; i < g_nfigs; ++i) {
    figure_t* f = &g_figs[i];
    /* Ratios are always backplane / baseline; for times (lower is better)
     * the target applies to the value itself, not the ratio. */
    double ratio = f->value / f->baseline;
    char target[32] = "-";
    if (f->target > 0 && f->lower_is_better)
      snprintf(target, sizeof target, "<= %.0f %s", f->target, f->unit);
    else if (f->target > 0)
      snprintf(target, sizeof target, ">= %.2f", f->target);
    printf("%-62s %12.2f %12.2f %9.3f %10s  (%s; baseline: %s)\n", f->name, f->value,
           f->baseline, ratio, target, f->unit, f->baseline_name);
    cJSON* o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "name", f->name);
    cJSON_AddStringToObject(o, "unit", f->unit);
    cJSON_AddNumberToObject(o, "value", f->value);
    cJSON_AddStringToObject(o, "baseline_name", f->baseline_name);
    cJSON_AddNumberToObject(o, "baseline", f->baseline);
    cJSON_AddNumberToObject(o, "ratio", ratio);
    if (f->target > 0) {
      cJSON_AddNumberToObject(o, "target", f->target);
      cJSON_AddStringToObject(o, "target_applies_to", f->lower_is_better ? "value" : "ratio");
      cJSON_AddBoolToObject(o, "target_met", f->lower_is_better ? f->value <= f->target
                                                                 : ratio >= f->target);
    }
    cJSON_AddItemToArray(arr, o);
  }
  if (json_path) {
    char* text = cJSON_Print(root);
    FILE* f = fopen(json_path, "w");
    if (!f || fputs(text, f) < 0) {
      fprintf(stderr, "bp-bench: cannot write %s: %s\n", json_path, strerror(errno));
      return 1;
    }
    fclose(f);
    free(text);
  }
  cJSON_Delete(root);
  bp_stream_release(stream);
  bp_context_release(ctx);
  return 0;
}
