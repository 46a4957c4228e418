/* bp-bench suite "comm": collectives between ranks of one process.
 *
 * all_reduce (sum) of 64 MiB f32 per rank (4 MiB with --quick) across 4
 * ranks on the measured device's plugin (four streams of one device: the
 * engine does not care which device a rank's stream is on), against the
 * lower bound of any shared-memory all_reduce: every rank's input read
 * once and every rank's output written once, i.e. a copy loop over
 * ranks x size bytes on all cores, timed in the same run. The figure is
 * that traffic over time (GB/s of bytes read + written); the NCCL-style
 * bus bandwidth (size x 2(n-1)/n per second) is printed beside it.
 *
 * The int8 block codec alone (the kit's encode and decode of the same
 * f32 vector, one core) against a one-core copy of it: its throughput E
 * says below which link bandwidth compression pays (docs/collectives.md,
 * "Where compression pays": 1.5x for 4 ranks below about 0.2 E per rank). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backplane/comm.h"
#include "bench.h"
#include "bp_kit_comm.h"
#include "kit_comm_codec.h"

#define RANKS 4

typedef struct ar_run {
  const bp_collective_options_t* options; /* NULL: uncompressed */
  bp_comm_t* comms[RANKS];
  bp_stream_t* streams[RANKS];
  bp_tensor_t* send[RANKS];
  bp_tensor_t* recv[RANKS];
} ar_run_t;

static bp_status_t run_all_reduce(bpb_ctx_t* ctx, void* user) {
  ar_run_t* r = user;
  (void)ctx;
  for (int i = 0; i < RANKS; ++i) {
    bp_status_t st = bp_comm_all_reduce(r->comms[i], r->streams[i], r->send[i], r->recv[i],
                                        BP_REDUCE_SUM, r->options);
    if (st != BP_OK) return st;
  }
  for (int i = 1; i < RANKS; ++i) {
    bp_status_t st = bp_stream_synchronize(r->streams[i]);
    if (st != BP_OK) return st;
  }
  return BP_OK;
}

/* Encode + decode of n f32 (int8, then e4m3fn, blocks of 256), one core,
 * against a memcpy of the same bytes, interleaved; the kit's codec
 * variant for this CPU (kit_comm_codec.c). */
static void codec_figure(bpb_ctx_t* ctx, const float* src, float* dst, int64_t n) {
  const uint32_t block = 256, comps[2] = {BP_DTYPE_I8, BP_DTYPE_F8E4M3FN};
  int8_t* codes = bpb_alloc((size_t)n);
  float* scales = bpb_alloc(sizeof(float) * (size_t)bp_kit_comm_scale_count((uint64_t)n, block));
  for (int c = 0; c < 2; ++c) {
    double t_enc[BPB_MAX_REPS], t_dec[BPB_MAX_REPS], t_copy[BPB_MAX_REPS];
    for (int k = -1; k < ctx->reps; ++k) { /* k = -1: a warm-up */
      double t0 = bpb_now();
      bp_kit_comm_encode(BP_DTYPE_F32, comps[c], block, src, 0, (uint64_t)n, codes, scales);
      const double t1 = bpb_now();
      bp_kit_comm_decode(BP_DTYPE_F32, comps[c], block, codes, scales, 0, (uint64_t)n, dst, 0);
      const double t2 = bpb_now();
      memcpy(dst, src, (size_t)n * sizeof(float));
      const double copy = bpb_now() - t2;
      if (k >= 0) {
        t_enc[k] = t1 - t0;
        t_dec[k] = t2 - t1;
        t_copy[k] = copy;
      }
    }
    const double bytes = (double)n * sizeof(float);
    const double enc = bpb_median(t_enc, ctx->reps), dec = bpb_median(t_dec, ctx->reps);
    const double e = bytes / (enc + dec);
    char name[160];
    snprintf(name, sizeof name, "%s codec (encode + decode, blocks of 256, %s) of %lld MiB f32, "
             "one core: f32 bytes per second vs memcpy", c ? "e4m3fn" : "int8",
             bp_kit_comm_codec()->name, (long long)(n * 4 >> 20));
    bpb_add_figure(&(bpb_figure_t){name, "GB/s", e / 1e9,
                                   bytes / bpb_median(t_copy, ctx->reps) / 1e9,
                                   "memcpy of the same bytes, one core", 0, 0});
    printf("  %s: encode %.2f GB/s, decode %.2f GB/s (f32 bytes)\n", c ? "e4m3fn" : "int8",
           bytes / enc / 1e9, bytes / dec / 1e9);
    if (c == 0)
      printf("  compression of a 4-rank f32 all_reduce pays 1.5x over links below about %.2f "
             "GB/s per rank (0.2 x the codec's rate; docs/collectives.md)\n", 0.206 * e / 1e9);
  }
  free(codes);
  free(scales);
}

void bpb_suite_comm(bpb_ctx_t* ctx) {
  const int64_t n = (ctx->quick ? 4 : 64) * (1 << 20) / 4; /* floats per rank */
  ar_run_t r = {0};
  bp_device_t* devices[RANKS];
  for (int i = 0; i < RANKS; ++i) devices[i] = ctx->device;
  r.streams[0] = ctx->stream;
  for (int i = 1; i < RANKS; ++i) BPB_CHECK(bp_stream_create(ctx->device, NULL, &r.streams[i]));
  BPB_CHECK(bp_comm_init_all(devices, RANKS, NULL, r.comms));
  for (int i = 0; i < RANKS; ++i) {
    r.send[i] = bpb_tensor_random(ctx, 1, &n, 21 + (unsigned)i);
    r.recv[i] = bpb_tensor(ctx, BP_DTYPE_F32, 1, &n);
  }
  const size_t total = (size_t)n * RANKS;
  float* src = bpb_alloc(total * sizeof(float));
  float* dst = bpb_alloc(total * sizeof(float));
  bpb_fill_random(src, total, 5);
  double t_ar[BPB_MAX_REPS], t_copy[BPB_MAX_REPS];
  BPB_CHECK(run_all_reduce(ctx, &r)); /* warm-up: pages, threads */
  bpb_copy_loop(src, NULL, dst, total, ctx->cores);
  for (int k = 0; k < ctx->reps; ++k) {
    double t0 = bpb_now();
    BPB_CHECK(run_all_reduce(ctx, &r));
    t_ar[k] = bpb_now() - t0;
    t0 = bpb_now();
    bpb_copy_loop(src, NULL, dst, total, ctx->cores);
    t_copy[k] = bpb_now() - t0;
  }
  const double ar = bpb_median(t_ar, ctx->reps), cp = bpb_median(t_copy, ctx->reps);
  const double bytes = 2.0 * (double)total * sizeof(float);
  char name[128];
  snprintf(name, sizeof name, "all_reduce f32 %lld MiB x %d ranks in one process (%s): traffic "
           "vs copy loop", (long long)(n * 4 >> 20), RANKS, bp_comm_tier(r.comms[0]) ==
           BP_COMM_TIER_NATIVE ? "native" : "host-staged");
  bpb_add_figure(&(bpb_figure_t){name, "GB/s", bytes / ar / 1e9, bytes / cp / 1e9,
                                 "C copy loop over ranks x size, all cores", 0.5, 0});
  printf("  bus bandwidth (size x 2(n-1)/n per second): %.2f GB/s\n",
         (double)n * 4 * 2.0 * (RANKS - 1) / RANKS / ar / 1e9);

  /* int8 blocks of 256 with f32 scales against the same uncompressed call,
   * interleaved; the error is measured on rank 0's result. */
  bp_collective_options_t i8 = {.struct_size = sizeof i8, .compression = BP_DTYPE_I8,
                                .compression_block = 256};
  double t_plain[BPB_MAX_REPS], t_i8[BPB_MAX_REPS];
  float* exact = bpb_alloc((size_t)n * sizeof(float));
  float* got = bpb_alloc((size_t)n * sizeof(float));
  r.options = NULL;
  BPB_CHECK(run_all_reduce(ctx, &r));
  BPB_CHECK(bp_stream_synchronize(r.streams[0]));
  BPB_CHECK(bp_tensor_read(r.streams[0], r.recv[0], exact, (uint64_t)n * sizeof(float)));
  for (int k = 0; k < ctx->reps; ++k) {
    r.options = NULL;
    double t0 = bpb_now();
    BPB_CHECK(run_all_reduce(ctx, &r));
    BPB_CHECK(bp_stream_synchronize(r.streams[0]));
    t_plain[k] = bpb_now() - t0;
    r.options = &i8;
    t0 = bpb_now();
    BPB_CHECK(run_all_reduce(ctx, &r));
    BPB_CHECK(bp_stream_synchronize(r.streams[0]));
    t_i8[k] = bpb_now() - t0;
  }
  BPB_CHECK(bp_tensor_read(r.streams[0], r.recv[0], got, (uint64_t)n * sizeof(float)));
  double err = 0, scale = 0;
  for (int64_t i = 0; i < n; ++i) {
    const double d = (double)got[i] - exact[i];
    if (d > err || -d > err) err = d > 0 ? d : -d;
    if (exact[i] > scale || -exact[i] > scale) scale = exact[i] > 0 ? exact[i] : -exact[i];
  }
  const double tp = bpb_median(t_plain, ctx->reps), tq = bpb_median(t_i8, ctx->reps);
  const double bus = (double)n * 4 * 2.0 * (RANKS - 1) / RANKS;
  snprintf(name, sizeof name, "all_reduce f32 %lld MiB x %d ranks, int8 blocks of 256: bus "
           "bandwidth vs uncompressed", (long long)(n * 4 >> 20), RANKS);
  bpb_add_figure(&(bpb_figure_t){name, "GB/s", bus / tq / 1e9, bus / tp / 1e9,
                                 "the same all_reduce uncompressed, same run", 1.5, 0});
  printf("  int8-compressed all_reduce: max abs error %.3g (%.2e of the largest |sum|)\n", err,
         scale > 0 ? err / scale : 0.0);
  codec_figure(ctx, src, dst, n);
  free(exact);
  free(got);
  free(src);
  free(dst);
  for (int i = 0; i < RANKS; ++i) {
    bp_tensor_release(r.send[i]);
    bp_tensor_release(r.recv[i]);
    bp_comm_destroy(r.comms[i]);
    if (i) bp_stream_release(r.streams[i]);
  }
}
