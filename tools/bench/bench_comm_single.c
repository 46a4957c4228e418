/* bp-bench check "single-rank collectives" (run by the vs_raw suite): a
 * communicator of one rank on the measured device (through its plugin's
 * comm table: NCCL on the CUDA plugin), each collective checked exactly
 * (one rank: every result is the input), then all_reduce of 64 MiB f32 timed
 * against one device copy of the same bytes in the same run (NCCL's one
 * rank is a copy; reported, no target). Prints "single-rank collectives:
 * N passed, F failed".
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backplane/comm.h"
#include "bench.h"

/* Nonzero when t holds exactly want[0..n). */
static int equals(bpb_ctx_t* ctx, bp_tensor_t* t, const float* want, int64_t n) {
  float* got = bpb_alloc((size_t)n * sizeof(float));
  int ok = bp_tensor_read(ctx->stream, t, got, (uint64_t)n * sizeof(float)) == BP_OK &&
           memcmp(got, want, (size_t)n * sizeof(float)) == 0;
  free(got);
  return ok;
}

void bpb_comm_single(bpb_ctx_t* ctx) {
  bp_comm_t* comm = NULL;
  bp_device_t* devs[1] = {ctx->device};
  bp_status_t st = bp_comm_init_all(devs, 1, NULL, &comm);
  if (st != BP_OK) {
    printf("single-rank collectives: skipped (bp_comm_init_all: %s)\n", bp_status_message());
    return;
  }
  printf("single-rank collectives: tier %s\n", bp_comm_tier(comm) == BP_COMM_TIER_NATIVE ? "native" : "host-staged");
  enum { N = 4099 };
  int64_t n = N;
  float* host = bpb_alloc(N * sizeof(float));
  float* stale = bpb_alloc(N * sizeof(float));
  bpb_fill_random(host, N, 61);
  memset(stale, 0, N * sizeof(float));
  bp_tensor_t* a = bpb_tensor(ctx, BP_DTYPE_F32, 1, &n);
  bp_tensor_t* b = bpb_tensor(ctx, BP_DTYPE_F32, 1, &n);
  BPB_CHECK(bp_tensor_write(ctx->stream, a, host, N * sizeof(float)));
  bp_collective_options_t root0 = {.struct_size = sizeof root0};
  const char* names[] = {"all_reduce", "broadcast", "reduce", "all_gather", "reduce_scatter",
                         "all_to_all", "barrier"};
  int passed = 0, failed = 0;
  for (int k = 0; k < 7; ++k) {
    BPB_CHECK(bp_tensor_write(ctx->stream, b, stale, N * sizeof(float)));
    switch (k) {
      case 0: st = bp_comm_all_reduce(comm, ctx->stream, a, b, BP_REDUCE_SUM, NULL); break;
      case 1: st = bp_comm_broadcast(comm, ctx->stream, a, b, &root0); break;
      case 2: st = bp_comm_reduce(comm, ctx->stream, a, b, BP_REDUCE_MAX, &root0); break;
      case 3: st = bp_comm_all_gather(comm, ctx->stream, a, b, NULL); break;
      case 4: st = bp_comm_reduce_scatter(comm, ctx->stream, a, b, BP_REDUCE_SUM, NULL); break;
      case 5: st = bp_comm_all_to_all(comm, ctx->stream, a, b, NULL); break;
      default: st = bp_comm_barrier(comm, ctx->stream); break;
    }
    if (st == BP_OK) st = bp_stream_synchronize(ctx->stream);
    int ok = st == BP_OK && (k == 6 || equals(ctx, b, host, N));
    printf("  %-15s %s%s%s\n", names[k], ok ? "ok" : "FAILED", st ? ": " : "",
           st ? bp_status_message() : "");
    ok ? passed++ : failed++;
  }
  printf("single-rank collectives: %d passed, %d failed\n", passed, failed);
  /* Time: all_reduce of 64 MiB (one rank) vs a device copy of it. */
  int64_t big = ctx->quick ? (int64_t)1 << 18 : (int64_t)16 << 20;
  bp_tensor_t* x = bpb_tensor_random(ctx, 1, &big, 62);
  bp_tensor_t* y = bpb_tensor(ctx, BP_DTYPE_F32, 1, &big);
  double tc[BPB_MAX_REPS], tr[BPB_MAX_REPS];
  for (int r = 0; r < ctx->reps; ++r) {
    double t0 = bpb_now();
    BPB_CHECK(bp_comm_all_reduce(comm, ctx->stream, x, y, BP_REDUCE_SUM, NULL));
    BPB_CHECK(bp_stream_synchronize(ctx->stream));
    tr[r] = bpb_now() - t0;
    t0 = bpb_now();
    BPB_CHECK(bp_copy_buffer(ctx->stream, bp_tensor_buffer(x), bp_tensor_byte_offset(x),
                             bp_tensor_buffer(y), bp_tensor_byte_offset(y), (uint64_t)big * 4));
    BPB_CHECK(bp_stream_synchronize(ctx->stream));
    tc[r] = bpb_now() - t0;
  }
  char name[160];
  snprintf(name, sizeof name, "single-rank all_reduce of %lld MiB f32 vs a device copy: %s",
           (long long)(big * 4 >> 20), bp_device_name(ctx->device));
  double bytes = 2.0 * 4.0 * (double)big;
  bpb_add_figure(&(bpb_figure_t){name, "GB/s", bytes / bpb_median(tr, ctx->reps) / 1e9,
                                 bytes / bpb_median(tc, ctx->reps) / 1e9, "bp_copy_buffer of the same bytes, same run", 0, 0});
  bp_tensor_release(x);
  bp_tensor_release(y);
  bp_tensor_release(a);
  bp_tensor_release(b);
  free(host);
  free(stale);
  bp_comm_destroy(comm);
}
