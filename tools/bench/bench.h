/* bp-bench harness: what every benchmark suite shares.
 *
 * A suite measures backplane figures and, in the same run and interleaved
 * with them, the baselines they are divided by (a C copy loop's bandwidth,
 * direct OpenBLAS, the CPU plugin for other devices). Every figure is the
 * median of ctx->reps repetitions. Suites are registered in bp-bench.c
 * (BPB_SUITES) and live one per file here (bench_<suite>.c).
 *
 * Threading: single-threaded tool; the baselines spawn their own threads.
 */
#ifndef BP_TOOLS_BENCH_H_
#define BP_TOOLS_BENCH_H_

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "backplane/backplane.h"

#define BPB_MAX_REPS 64

typedef struct bpb_ctx {
  bp_context_t* context;
  bp_device_t* device; /* the device measured (--device) */
  bp_stream_t* stream; /* a stream of it */
  int quick;           /* smoke-test sizes */
  int reps;            /* repetitions per figure (median reported) */
  int cores;           /* online cores, for the all-core baselines */
  int is_cpu;          /* the device belongs to the cpu plugin */
} bpb_ctx_t;

typedef struct bpb_figure {
  const char* name;          /* copied */
  const char* unit;          /* static */
  double value;              /* backplane */
  double baseline;           /* same unit */
  const char* baseline_name; /* static */
  double target;             /* target ratio (or value when lower_is_better); 0: none */
  int lower_is_better;       /* the target applies to the value (times) */
} bpb_figure_t;

/* Set by a suite when this process does not report (an MPI rank other
 * than 0): main then prints no table and writes no files. */
extern int bpb_quiet;
/* Set by a suite whose figures are not the device's (comm_mpi): the
 * Markdown section's heading instead of the device name. */
extern const char* bpb_title;

/* Monotonic seconds. */
double bpb_now(void);
/* Sleeps long enough (0.3 s) for the threads of a BLAS or OpenMP runtime
 * that just ran, which spin for a while before sleeping, to go idle, so
 * that the next timed call (another process's, another library's) gets the
 * cores as it would alone. */
void bpb_quiesce(void);
/* Median of v[0..n) (sorts v). */
double bpb_median(double* v, int n);
/* Records a figure (name copied). */
void bpb_add_figure(const bpb_figure_t* f);
/* Exits with a message when a call fails (a benchmark has no recovery). */
void bpb_check(bp_status_t st, const char* expr);
#define BPB_CHECK(expr) bpb_check((expr), #expr)
/* For the first call of a figure: 1, having printed that the figure is
 * skipped and why, when the device has no kernel for the op or does not
 * support this case (BP_UNIMPLEMENTED, BP_UNSUPPORTED); 0 when the call succeeded; exits as bpb_check on any
 * other failure. */
int bpb_unsupported(bp_status_t st, const char* figure);

/* A new dense tensor on ctx->device. */
bp_tensor_t* bpb_tensor(bpb_ctx_t* ctx, uint32_t dtype, uint32_t rank, const int64_t* sizes);
/* A new f32 tensor filled with uniform values in [-0.5, 0.5) from seed. */
bp_tensor_t* bpb_tensor_random(bpb_ctx_t* ctx, uint32_t rank, const int64_t* sizes,
                               unsigned seed);
/* Deterministic uniform values in [-0.5, 0.5). */
void bpb_fill_random(float* p, size_t n, unsigned seed);
/* 64-byte aligned host memory or exit. */
void* bpb_alloc(size_t bytes);

/* Baselines: a plain C loop over n floats (dst = a, or dst = a + b when b is
 * given) split over `threads` threads; returns seconds for one pass. */
double bpb_copy_loop(const float* a, const float* b, float* dst, size_t n, int threads);

/* Copy-loop bandwidth of this machine, all cores, in GB/s (bytes read +
 * written): a median over ctx->reps passes of 16M floats (1M when quick),
 * measured on first use and cached for the run. Suites that compare against
 * it and run long interleave bpb_copy_loop themselves. */
double bpb_copy_bandwidth(bpb_ctx_t* ctx);

/* A benchmarked unit of work: enqueues one run on ctx->stream; returns
 * the op call's status. */
typedef bp_status_t (*bpb_run_fn)(bpb_ctx_t* ctx, void* user);

/* A timed burst in bpb_time_vs_copy: at least BPB_BURST runs and at least
 * BPB_BURST_S seconds of them. */
#define BPB_BURST 4
#define BPB_BURST_S 0.03

/* A memory-bound op against the copy loop over n floats (src -> dst, all
 * cores), interleaved: each repetition times a burst of back-to-back copy
 * passes, then a burst of back-to-back runs of fn(user) closed by one
 * stream synchronize, so both are measured in steady state (threads awake,
 * caches and clocks as in a model's sequence of ops) rather than from a
 * cold start. Writes the medians of the seconds per run and returns 1; or
 * returns 0, having printed that `figure` is skipped and why, when the
 * device has no kernel for the op or does not support the case (the
 * first warm-up run's BP_UNIMPLEMENTED or BP_UNSUPPORTED). */
int bpb_time_vs_copy(bpb_ctx_t* ctx, bpb_run_fn fn, void* user, const float* src, float* dst,
                     size_t n, const char* figure, double* out_op_s, double* out_copy_s);

/* Untimed runs before the timed ones: a backend may compile its
 * specialized kernels only once a shape recurs (the Vulkan plugin's tiered
 * elementwise pipelines), which must not land in a timed run. */
#define BPB_WARMUP_RUNS 4

/* Times `reps` runs of fn(user) each followed by a stream synchronize;
 * returns the median seconds. BPB_WARMUP_RUNS untimed runs first. */
double bpb_time(bpb_ctx_t* ctx, bpb_run_fn fn, void* user);

/* PyTorch as a same-run baseline (bench_torch.c): a child process running
 * tools/bench/torch_conv.py --serve on one conv2d shape {N, C, O, HW, K,
 * stride, pad} with `threads` threads. open returns 0 with the reason in
 * `why` when torch cannot be started; run returns the seconds of one
 * call (-1 on failure). */
typedef struct bpb_torch {
  int pid;
  FILE *to, *from;
} bpb_torch_t;
int bpb_torch_open(bpb_torch_t* t, const int64_t shape[7], int threads, char* why, size_t cap);
double bpb_torch_run(bpb_torch_t* t);
void bpb_torch_close(bpb_torch_t* t);

#ifdef BP_BENCH_HAVE_OPENBLAS
#define BPB_HAVE_OPENBLAS 1
#else
#define BPB_HAVE_OPENBLAS 0
#endif
/* Seconds of one direct cblas_sgemm C[m,n] = A[m,k] B[k,n] (row-major,
 * optionally batched `batch` times over consecutive matrices); NAN without
 * OpenBLAS. */
double bpb_sgemm_seconds(int64_t batch, int64_t m, int64_t n, int64_t k, const float* a,
                         const float* b, float* c);

/* The suites (one per file). Each checks what it needs (device kind,
 * OpenBLAS) and skips with a printed reason otherwise. */
#define BPB_SUITES(X) \
  X(core) X(ew) X(matmul) X(reduce) X(norm) X(conv) X(attention) X(quant) X(vs_cpu) X(vk_raw) \
  X(vs_raw) X(comm) X(comm_mpi) X(graph) X(serving) X(moe)
#define BPB__SUITE_DECL(s) void bpb_suite_##s(bpb_ctx_t* ctx);
BPB_SUITES(BPB__SUITE_DECL)
#undef BPB__SUITE_DECL
/* The compiled-region dispatch figure (bench_region_dispatch.c): an 8-op
 * chain on 4096 f32 as one GRAPH region vs the 8 ops eagerly (the vs_raw
 * suite runs it). */
void bpb_region_dispatch(bpb_ctx_t* ctx);
/* Single-rank collectives on the device, checked exactly, and all_reduce
 * timed against a device copy (bench_comm_single.c; the vs_raw suite
 * runs it: on the CUDA plugin, NCCL with one rank). */
void bpb_comm_single(bpb_ctx_t* ctx);
/* Parts of the graph suite (bench_graph.c runs them). */
void bpb_graph_compiler(bpb_ctx_t* ctx);
void bpb_graph_regions(bpb_ctx_t* ctx);

#endif /* BP_TOOLS_BENCH_H_ */
