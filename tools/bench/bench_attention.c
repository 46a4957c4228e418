/* bp-bench suite "attention": f32 scaled_dot_product_attention at sequence
 * 1024, head dim 64 (batch 1, 8 heads), plain and causal, as GFLOP/s over
 * its two matmuls (4 * L * S * E per head; causal: only the unmasked
 * (query, key) pairs, 4 * E * L * (L + 1) / 2) against direct cblas_sgemm
 * running the same two products unfused (8 x [L, E] @ [E, S] and
 * 8 x [L, S] @ [S, E]), measured in the same repetitions. Target: 0.5 of
 * sgemm (issue "full operator set"). */
#include <stdio.h>
#include <stdlib.h>

#include "bench.h"

static void bench_sdpa(bpb_ctx_t* ctx, int64_t heads, int64_t L, int64_t E, int causal) {
  int64_t qs[4] = {1, heads, L, E};
  bp_tensor_t* q = bpb_tensor_random(ctx, 4, qs, 21);
  bp_tensor_t* k = bpb_tensor_random(ctx, 4, qs, 22);
  bp_tensor_t* v = bpb_tensor_random(ctx, 4, qs, 23);
  bp_tensor_t* o = bpb_tensor(ctx, BP_DTYPE_F32, 4, qs);
  bp_sdpa_attrs_t at = {.struct_size = sizeof at, .is_causal = (uint32_t)causal};
  /* Baseline operands: scores = Q @ K^T, then P @ V, per head. */
  size_t qe = (size_t)(heads * L * E), se = (size_t)(heads * L * L);
  float* ga = bpb_alloc(qe * sizeof(float));
  float* gb = bpb_alloc(qe * sizeof(float));
  float* gs = bpb_alloc(se * sizeof(float));
  float* gv = bpb_alloc(qe * sizeof(float));
  float* go = bpb_alloc(qe * sizeof(float));
  bpb_fill_random(ga, qe, 24);
  bpb_fill_random(gb, qe, 25);
  bpb_fill_random(gs, se, 26);
  bpb_fill_random(gv, qe, 27);
  char name[200];
  snprintf(name, sizeof name,
           "sdpa f32%s, 1x%lld heads, L=S=%lld, E=%lld: GFLOP/s (two matmuls) vs sgemm",
           causal ? " causal" : "", (long long)heads, (long long)L, (long long)E);
  double t_bp[BPB_MAX_REPS], t_ref[BPB_MAX_REPS];
  bp_status_t st = bp_op_scaled_dot_product_attention(ctx->stream, q, k, v, NULL, &at, &o); /* warm-up */
  int measured = !bpb_unsupported(st, name);
  BPB_CHECK(bp_stream_synchronize(ctx->stream));
  (void)bpb_sgemm_seconds(heads, L, L, E, ga, gb, gs);
  for (int r = 0; measured && r < ctx->reps; r++) { /* interleaved: both see the same machine state */
    t_ref[r] = bpb_sgemm_seconds(heads, L, L, E, ga, gb, gs) +
               bpb_sgemm_seconds(heads, L, E, L, gs, gv, go);
    double t0 = bpb_now();
    BPB_CHECK(bp_op_scaled_dot_product_attention(ctx->stream, q, k, v, NULL, &at, &o));
    BPB_CHECK(bp_stream_synchronize(ctx->stream));
    t_bp[r] = bpb_now() - t0;
  }
  double pairs = causal ? (double)L * (double)(L + 1) / 2.0 : (double)L * (double)L;
  double flops = 4.0 * (double)heads * pairs * (double)E;
  double flops_ref = 4.0 * (double)heads * (double)L * (double)L * (double)E;
  if (measured)
    bpb_add_figure(&(bpb_figure_t){name, "GFLOP/s", flops / bpb_median(t_bp, ctx->reps) / 1e9,
                                   flops_ref / bpb_median(t_ref, ctx->reps) / 1e9,
                                   "cblas_sgemm (OpenBLAS), the two products unfused", 0.5, 0});
  free(ga);
  free(gb);
  free(gs);
  free(gv);
  free(go);
  bp_tensor_release(q);
  bp_tensor_release(k);
  bp_tensor_release(v);
  bp_tensor_release(o);
}

void bpb_suite_attention(bpb_ctx_t* ctx) {
  if (!BPB_HAVE_OPENBLAS) {
    printf("suite attention: skipped (built without OpenBLAS: no sgemm baseline)\n");
    return;
  }
  int64_t L = ctx->quick ? 256 : 1024;
  bench_sdpa(ctx, 8, L, 64, 0);
  bench_sdpa(ctx, 8, L, 64, 1);
}
