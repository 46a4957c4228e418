/* bp-bench suite "core": f32 add bandwidth against C loops, sgemm against
 * direct OpenBLAS, and the dispatch cost of one op. */
#define _GNU_SOURCE
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"

static void bench_add_bandwidth(bpb_ctx_t* ctx, bp_device_t* dev, bp_stream_t* stream, size_t n, int reps) {
  int cores = ctx->cores;
  float* hs = bpb_alloc(n * sizeof(float));
  float* hs2 = bpb_alloc(n * sizeof(float));
  float* hd = bpb_alloc(n * sizeof(float));
  bpb_fill_random(hs, n, 1);
  bpb_fill_random(hs2, n, 4);
  memset(hd, 0, n * sizeof(float));

  int64_t sizes[1] = {(int64_t)n};
  bp_tensor_t* a = bpb_tensor(ctx, BP_DTYPE_F32, 1, sizes);
  bp_tensor_t* b = bpb_tensor(ctx, BP_DTYPE_F32, 1, sizes);
  bp_tensor_t* c = bpb_tensor(ctx, BP_DTYPE_F32, 1, sizes);
  BPB_CHECK(bp_tensor_write(stream, a, hs, n * sizeof(float)));
  BPB_CHECK(bp_tensor_write(stream, b, hs, n * sizeof(float)));

  double t_copy1[BPB_MAX_REPS], t_copyn[BPB_MAX_REPS], t_cadd[BPB_MAX_REPS], t_add[BPB_MAX_REPS];
  /* Warm up: touch every page once. */
  bpb_copy_loop(hs, NULL, hd, n, cores);
  BPB_CHECK(bp_op_add(stream, a, b, NULL, &c));
  BPB_CHECK(bp_stream_synchronize(stream));
  /* Interleave the baselines and the op so that drift hits all alike. */
  for (int r = 0; r < reps; ++r) {
    t_copy1[r] = bpb_copy_loop(hs, NULL, hd, n, 1);
    t_copyn[r] = bpb_copy_loop(hs, NULL, hd, n, cores);
    t_cadd[r] = bpb_copy_loop(hs, hs2, hd, n, cores);
    double t0 = bpb_now();
    BPB_CHECK(bp_op_add(stream, a, b, NULL, &c));
    BPB_CHECK(bp_stream_synchronize(stream));
    t_add[r] = bpb_now() - t0;
  }
  double bytes_copy = 2.0 * (double)n * sizeof(float);
  double bytes_add = 3.0 * (double)n * sizeof(float);
  double bw1 = bytes_copy / bpb_median(t_copy1, reps) / 1e9;
  double bwn = bytes_copy / bpb_median(t_copyn, reps) / 1e9;
  double bwc = bytes_add / bpb_median(t_cadd, reps) / 1e9;
  double bwa = bytes_add / bpb_median(t_add, reps) / 1e9;
  bpb_add_figure(&(bpb_figure_t){"f32 add, 16M elements: bandwidth vs copy loop on all cores", "GB/s",
                        bwa, bwn, "C copy loop, all cores", 0.8, 0});
  bpb_add_figure(&(bpb_figure_t){"f32 add, 16M elements: bandwidth vs copy loop on 1 thread", "GB/s",
                        bwa, bw1, "C copy loop, 1 thread", 0.0, 0});
  bpb_add_figure(&(bpb_figure_t){"f32 add, 16M elements: bandwidth vs C add loop on all cores", "GB/s",
                        bwa, bwc, "C add loop, all cores", 0.0, 0});
  bp_tensor_release(a);
  bp_tensor_release(b);
  bp_tensor_release(c);
  free(hs);
  free(hs2);
  free(hd);
}

static void bench_sgemm(bpb_ctx_t* ctx, bp_device_t* dev, bp_stream_t* stream, int64_t n, int reps) {
  size_t count = (size_t)(n * n);
  float* ha = bpb_alloc(count * sizeof(float));
  float* hb = bpb_alloc(count * sizeof(float));
  float* hc = bpb_alloc(count * sizeof(float));
  bpb_fill_random(ha, count, 2);
  bpb_fill_random(hb, count, 3);
  int64_t sizes[2] = {n, n};
  bp_tensor_t* a = bpb_tensor(ctx, BP_DTYPE_F32, 2, sizes);
  bp_tensor_t* b = bpb_tensor(ctx, BP_DTYPE_F32, 2, sizes);
  bp_tensor_t* c = bpb_tensor(ctx, BP_DTYPE_F32, 2, sizes);
  BPB_CHECK(bp_tensor_write(stream, a, ha, count * sizeof(float)));
  BPB_CHECK(bp_tensor_write(stream, b, hb, count * sizeof(float)));
  double flops = 2.0 * (double)n * (double)n * (double)n;
  double t_bp[BPB_MAX_REPS], t_ref[BPB_MAX_REPS];
  BPB_CHECK(bp_op_mm(stream, a, b, NULL, &c)); /* warm-up */
  BPB_CHECK(bp_stream_synchronize(stream));
  for (int r = 0; r < reps; ++r) {
    t_ref[r] = bpb_sgemm_seconds(1, n, n, n, ha, hb, hc);
    double t1 = bpb_now();
    BPB_CHECK(bp_op_mm(stream, a, b, NULL, &c));
    BPB_CHECK(bp_stream_synchronize(stream));
    t_bp[r] = bpb_now() - t1;
  }
  char name[96];
  if (snprintf(name, sizeof name, "sgemm %lldx%lldx%lld: GFLOP/s vs direct OpenBLAS", (long long)n,
               (long long)n, (long long)n) < 0)
    return;
  bpb_add_figure(&(bpb_figure_t){name, "GFLOP/s", flops / bpb_median(t_bp, reps) / 1e9,
                        flops / bpb_median(t_ref, reps) / 1e9, "cblas_sgemm (OpenBLAS) direct",
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

static void bench_dispatch(bpb_ctx_t* ctx, bp_device_t* dev, bp_stream_t* stream, int reps, int calls) {
  int64_t one[1] = {1};
  bp_tensor_t* a = bpb_tensor(ctx, BP_DTYPE_F32, 1, one);
  bp_tensor_t* b = bpb_tensor(ctx, BP_DTYPE_F32, 1, one);
  bp_tensor_t* c = bpb_tensor(ctx, BP_DTYPE_F32, 1, one);
  float v = 1.0f;
  BPB_CHECK(bp_tensor_write(stream, a, &v, sizeof v));
  BPB_CHECK(bp_tensor_write(stream, b, &v, sizeof v));
  double t_call[BPB_MAX_REPS], t_rt[BPB_MAX_REPS], t_noop[BPB_MAX_REPS];
  volatile int sink = 0;
  int batches = calls / DISPATCH_BATCH > 0 ? calls / DISPATCH_BATCH : 1;
  for (int r = 0; r < reps; ++r) {
    double enqueue = 0;
    for (int k = 0; k < batches; ++k) {
      double t0 = bpb_now();
      for (int i = 0; i < DISPATCH_BATCH; ++i) BPB_CHECK(bp_op_add(stream, a, b, NULL, &c));
      enqueue += bpb_now() - t0;
      BPB_CHECK(bp_stream_synchronize(stream));
    }
    t_call[r] = enqueue / ((double)batches * DISPATCH_BATCH) * 1e9;
    double t1 = bpb_now();
    for (int i = 0; i < calls; ++i) BPB_CHECK(bp_op_add(stream, a, b, NULL, &c));
    BPB_CHECK(bp_stream_synchronize(stream));
    t_rt[r] = (bpb_now() - t1) / calls * 1e9;
    double t3 = bpb_now();
    for (int i = 0; i < calls; ++i) g_noop(&sink);
    t_noop[r] = (bpb_now() - t3) / calls * 1e9;
  }
  bpb_add_figure(&(bpb_figure_t){"dispatch of a one-element f32 add (enqueue, output given)", "ns",
                        bpb_median(t_call, reps), bpb_median(t_noop, reps), "indirect empty call",
                        1000.0, 1});
  bpb_add_figure(&(bpb_figure_t){"one-element f32 add, enqueue to completion, amortised", "ns",
                        bpb_median(t_rt, reps), bpb_median(t_noop, reps), "indirect empty call", 0.0,
                        1});
  bp_tensor_release(a);
  bp_tensor_release(b);
  bp_tensor_release(c);
}

void bpb_suite_core(bpb_ctx_t* ctx) {
  bench_add_bandwidth(ctx, ctx->device, ctx->stream, ctx->quick ? (size_t)1 << 20 : (size_t)16 << 20,
                      ctx->reps);
  bench_sgemm(ctx, ctx->device, ctx->stream, ctx->quick ? 256 : 2048, ctx->reps);
  bench_dispatch(ctx, ctx->device, ctx->stream, ctx->reps, ctx->quick ? 2000 : 200000);
}
