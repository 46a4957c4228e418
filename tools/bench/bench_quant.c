/* bp-bench suite "quant": the fused layers of transformer serving against
 * their unfused forms, on shapes well above the last-level cache.
 *   - add_rms_norm (one pass: read input and residual, write out and
 *     residual_out) vs add then rms_norm (two ops, the sum written and read
 *     back);
 *   - swiglu over [gate | up] vs silu of the gate half then mul by the up
 *     half (PyTorch's composite `silu(x[..., :H]) * x[..., H:]`, on views).
 * Both sides are timed alternately in one run (medians of --reps single
 * runs each, every run closed by a stream synchronize) and reported as the
 * bandwidth of the fused op's bytes (inputs read once, outputs written
 * once): the ratio is the unfused time over the fused time. */
#include <stdio.h>
#include <stdlib.h>

#include "bench.h"

typedef struct quant_run {
  const bp_tensor_t *x, *res, *w;
  bp_tensor_t *gate, *up; /* views of x (swiglu) */
  bp_tensor_t *out, *res_out, *tmp;
  const void* attrs;
} quant_run_t;

static bp_status_t run_add_rms_fused(bpb_ctx_t* ctx, void* user) {
  quant_run_t* r = user;
  return bp_op_add_rms_norm(ctx->stream, r->x, r->res, r->w, r->attrs, &r->out, &r->res_out);
}

static bp_status_t run_add_rms_unfused(bpb_ctx_t* ctx, void* user) {
  quant_run_t* r = user;
  bp_status_t st = bp_op_add(ctx->stream, r->x, r->res, NULL, &r->res_out);
  return st != BP_OK ? st : bp_op_rms_norm(ctx->stream, r->res_out, r->w, r->attrs, &r->out);
}

static bp_status_t run_swiglu_fused(bpb_ctx_t* ctx, void* user) {
  quant_run_t* r = user;
  return bp_op_swiglu(ctx->stream, r->x, NULL, &r->out);
}

static bp_status_t run_swiglu_unfused(bpb_ctx_t* ctx, void* user) {
  quant_run_t* r = user;
  bp_status_t st = bp_op_silu(ctx->stream, r->gate, NULL, &r->tmp);
  return st != BP_OK ? st : bp_op_mul(ctx->stream, r->tmp, r->up, NULL, &r->out);
}

/* Times fused and unfused alternately (one warm-up each); records the
 * bandwidth of `bytes` moved per run for both. */
static void fused_vs_unfused(bpb_ctx_t* ctx, const char* name, bpb_run_fn fused, bpb_run_fn unfused,
                             quant_run_t* rf, quant_run_t* ru, double bytes, double target) {
  if (bpb_unsupported(fused(ctx, rf), name) || bpb_unsupported(unfused(ctx, ru), name)) return;
  BPB_CHECK(bp_stream_synchronize(ctx->stream));
  double tf[BPB_MAX_REPS], tu[BPB_MAX_REPS];
  for (int i = 0; i < ctx->reps; i++) {
    double t0 = bpb_now();
    BPB_CHECK(fused(ctx, rf));
    BPB_CHECK(bp_stream_synchronize(ctx->stream));
    double t1 = bpb_now();
    BPB_CHECK(unfused(ctx, ru));
    BPB_CHECK(bp_stream_synchronize(ctx->stream));
    tf[i] = t1 - t0;
    tu[i] = bpb_now() - t1;
  }
  double mf = bpb_median(tf, ctx->reps), mu = bpb_median(tu, ctx->reps);
  printf("%s: fused %.2f ms, unfused %.2f ms (medians)\n", name, mf * 1e3, mu * 1e3);
  bpb_add_figure(&(bpb_figure_t){name, "GB/s", bytes / mf / 1e9, bytes / mu / 1e9,
                                 "unfused ops, same run", target, 0});
}

static void release_run(quant_run_t* r) {
  bp_tensor_t* ts[] = {r->gate, r->up, r->out, r->res_out, r->tmp};
  for (size_t i = 0; i < sizeof ts / sizeof ts[0]; i++) {
    if (ts[i]) bp_tensor_release(ts[i]);
  }
}

void bpb_suite_quant(bpb_ctx_t* ctx) {
  /* 16384 x 4096 f32: 256 MiB per tensor, 1 GiB moved by the fused op,
   * well above the last-level cache of the machines measured (300 MiB is
   * the largest lscpu reports) */
  int64_t rows = ctx->quick ? 256 : 16384, hidden = 4096;
  int64_t xs[2] = {rows, hidden}, wn = hidden;
  double fsz = (double)sizeof(float), n = (double)(rows * hidden);
  char name[128];
  bp_tensor_t* x = bpb_tensor_random(ctx, 2, xs, 21);
  bp_tensor_t* res = bpb_tensor_random(ctx, 2, xs, 22);
  bp_tensor_t* w = bpb_tensor_random(ctx, 1, &wn, 23);
  bp_rms_norm_attrs_t rn = {sizeof rn, 1, 1e-6};
  quant_run_t rf = {x, res, w, NULL, NULL, NULL, NULL, NULL, &rn};
  quant_run_t ru = rf;
  snprintf(name, sizeof name, "add_rms_norm f32 [%lld, %lld]: fused vs add then rms_norm",
           (long long)rows, (long long)hidden);
  fused_vs_unfused(ctx, name, run_add_rms_fused, run_add_rms_unfused, &rf, &ru, 4.0 * n * fsz, 1.4);
  release_run(&rf);
  release_run(&ru);
  bp_tensor_release(x);
  bp_tensor_release(res);
  bp_tensor_release(w);

  /* swiglu: [rows, 2 * 4096] -> [rows, 4096] */
  int64_t gs[2] = {rows, 2 * hidden};
  bp_tensor_t* g = bpb_tensor_random(ctx, 2, gs, 24);
  quant_run_t sf = {g, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL};
  quant_run_t su = sf;
  BPB_CHECK(bp_tensor_slice(g, 1, 0, hidden, 1, &su.gate));
  BPB_CHECK(bp_tensor_slice(g, 1, hidden, 2 * hidden, 1, &su.up));
  snprintf(name, sizeof name, "swiglu f32 [%lld, %lld]: fused vs silu then mul",
           (long long)rows, (long long)(2 * hidden));
  fused_vs_unfused(ctx, name, run_swiglu_fused, run_swiglu_unfused, &sf, &su, 3.0 * n * fsz, 0.0);
  release_run(&sf);
  release_run(&su);
  bp_tensor_release(g);
}
