/* bp-bench suite "norm": layer_norm and rms_norm over rows of 4096 f32, and
 * batch_norm / group_norm on a ResNet-like activation, as bandwidth (bytes
 * of input + output per second) against the same run's copy loop. */
#include <stdio.h>
#include <stdlib.h>

#include "bench.h"

typedef struct norm_run {
  uint32_t op;
  const bp_tensor_t *x, *w, *b;
  bp_tensor_t *out, *s1, *s2;
  const void* attrs;
} norm_run_t;

static bp_status_t run_norm(bpb_ctx_t* ctx, void* user) {
  norm_run_t* r = user;
  switch (r->op) {
    case BP_OP_layer_norm:
      return bp_op_layer_norm(ctx->stream, r->x, r->w, r->b, r->attrs, &r->out, &r->s1, &r->s2);
    case BP_OP_rms_norm:
      return bp_op_rms_norm(ctx->stream, r->x, r->w, r->attrs, &r->out);
    case BP_OP_batch_norm:
      return bp_op_batch_norm(ctx->stream, r->x, r->w, r->b, NULL, NULL, r->attrs, &r->out, &r->s1,
                              &r->s2);
    default:
      return bp_op_group_norm(ctx->stream, r->x, r->w, r->b, r->attrs, &r->out, &r->s1, &r->s2);
  }
}

/* Measures one op on x [sizes] with parameters of `plen` elements and
 * records its bandwidth against the copy loop. */
static void bench_one(bpb_ctx_t* ctx, const char* name, uint32_t op, uint32_t rank,
                      const int64_t* sizes, int64_t plen, const void* attrs, double target) {
  int64_t n = 1;
  for (uint32_t d = 0; d < rank; d++) n *= sizes[d];
  norm_run_t r = {op, NULL, NULL, NULL, NULL, NULL, NULL, attrs};
  bp_tensor_t* x = bpb_tensor_random(ctx, rank, sizes, 11);
  bp_tensor_t* w = bpb_tensor_random(ctx, 1, &plen, 12);
  bp_tensor_t* b = bpb_tensor_random(ctx, 1, &plen, 13);
  r.x = x;
  r.w = w;
  r.b = b;
  /* the copy loop over the same bytes, interleaved with the op so that
   * drift (other load, frequency) hits both alike */
  float* src = bpb_alloc((size_t)n * sizeof(float));
  float* dst = bpb_alloc((size_t)n * sizeof(float));
  bpb_fill_random(src, (size_t)n, 14);
  double t_op, t_copy;
  if (bpb_time_vs_copy(ctx, run_norm, &r, src, dst, (size_t)n, name, &t_op, &t_copy)) {
    double bytes = 2.0 * (double)n * sizeof(float);
    bpb_add_figure(&(bpb_figure_t){name, "GB/s", bytes / t_op / 1e9, bytes / t_copy / 1e9,
                                   "C copy loop, all cores", target, 0});
  }
  free(src);
  free(dst);
  bp_tensor_release(x);
  bp_tensor_release(w);
  bp_tensor_release(b);
  if (r.out) bp_tensor_release(r.out);
  if (r.s1) bp_tensor_release(r.s1);
  if (r.s2) bp_tensor_release(r.s2);
}

void bpb_suite_norm(bpb_ctx_t* ctx) {
  int64_t rows = ctx->quick ? 256 : 4096;
  int64_t rs[2] = {rows, 4096};
  bp_layer_norm_attrs_t ln = {sizeof ln, 1, {4096}, 1e-5, 7, 0};
  bp_rms_norm_attrs_t rn = {sizeof rn, 1, 1e-6};
  char name[96];
  snprintf(name, sizeof name, "layer_norm f32 [%lld, 4096]: bandwidth vs copy loop", (long long)rows);
  bench_one(ctx, name, BP_OP_layer_norm, 2, rs, 4096, &ln, 0.7);
  snprintf(name, sizeof name, "rms_norm f32 [%lld, 4096]: bandwidth vs copy loop", (long long)rows);
  bench_one(ctx, name, BP_OP_rms_norm, 2, rs, 4096, &rn, 0.7);
  int64_t batch = ctx->quick ? 2 : 32;
  int64_t act[4] = {batch, 64, 56, 56};
  bp_batch_norm_attrs_t bn = {sizeof bn, 1, 0.1, 1e-5};
  snprintf(name, sizeof name, "batch_norm f32 train [%lld, 64, 56, 56]: bandwidth vs copy loop",
           (long long)batch);
  bench_one(ctx, name, BP_OP_batch_norm, 4, act, 64, &bn, 0.0);
  bp_group_norm_attrs_t gn = {sizeof gn, 7, batch, 64, 56 * 56, 32, 1e-5};
  snprintf(name, sizeof name, "group_norm f32 32 groups [%lld, 64, 56, 56]: bandwidth vs copy loop",
           (long long)batch);
  bench_one(ctx, name, BP_OP_group_norm, 4, act, 64, &gn, 0.0);
}
