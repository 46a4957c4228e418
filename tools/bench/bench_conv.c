/* bp-bench suite "conv": f32 conv2d on ResNet-50 layer shapes, as GFLOP/s
 * against direct cblas_sgemm at the equivalent GEMM shape (M = N * Hout *
 * Wout, N = O, K = C * kh * kw), measured in the same repetitions. Target:
 * 0.6 of sgemm (issue "full operator set"), and the median ratio over the
 * shapes; then convolution_backward at batch 1 against two sgemm calls,
 * without a target; then, at batch 8, PyTorch's conv2d (F.conv2d on CPU:
 * oneDNN) with as many threads, one call of each in turn per repetition
 * (tools/bench/torch_conv.py through bench_torch.c; skipped with the reason
 * where python3-torch is missing, and in --quick runs). */
#include <stdio.h>
#include <stdlib.h>

#include "bench.h"

typedef struct conv_shape {
  const char* name;
  int64_t c, o, hw, k, stride, pad;
} conv_shape_t;

static const conv_shape_t k_shapes[] = {
    {"3x3 64->64 at 56x56", 64, 64, 56, 3, 1, 1},
    {"3x3 128->128 at 28x28", 128, 128, 28, 3, 1, 1},
    {"3x3 256->256 at 14x14", 256, 256, 14, 3, 1, 1},
    {"1x1 256->64 at 56x56", 256, 64, 56, 1, 1, 0},
    {"7x7/2 3->64 at 224x224", 3, 64, 224, 7, 2, 3},
};

static int cmp_double(const void* a, const void* b) {
  double x = *(const double*)a, y = *(const double*)b;
  return (x > y) - (x < y);
}

/* One shape at one batch: figure and its ratio. `backward`: the
 * grad_input and grad_weight of convolution_backward (two GEMMs' worth of
 * flops) against two sgemm calls, reported without a target. */
static double bench_shape(bpb_ctx_t* ctx, const conv_shape_t* s, int64_t batch, int backward) {
  int64_t ho = (s->hw + 2 * s->pad - s->k) / s->stride + 1;
  int64_t xs[4] = {batch, s->c, s->hw, s->hw}, ws[4] = {s->o, s->c, s->k, s->k};
  int64_t ys[4] = {batch, s->o, ho, ho};
  bp_tensor_t* x = bpb_tensor_random(ctx, 4, xs, 11);
  bp_tensor_t* w = bpb_tensor_random(ctx, 4, ws, 12);
  bp_tensor_t* y =
      backward ? bpb_tensor_random(ctx, 4, ys, 15) : bpb_tensor(ctx, BP_DTYPE_F32, 4, ys);
  bp_tensor_t* gx = backward ? bpb_tensor(ctx, BP_DTYPE_F32, 4, xs) : NULL;
  bp_tensor_t* gw = backward ? bpb_tensor(ctx, BP_DTYPE_F32, 4, ws) : NULL;
  bp_tensor_t* gb = NULL; /* grad_bias not requested: [0] */
  bp_conv_attrs_t at = {.struct_size = sizeof at, .spatial_dims = 2, .groups = 1, .output_mask = 3};
  for (int i = 0; i < 2; i++) {
    at.stride[i] = s->stride;
    at.padding[i] = s->pad;
    at.dilation[i] = 1;
  }
  /* The equivalent GEMM: [M, K] x [K, N]. */
  int64_t m = batch * ho * ho, n = s->o, k = s->c * s->k * s->k;
  float* ga = bpb_alloc((size_t)(m * k) * sizeof(float));
  float* gbm = bpb_alloc((size_t)(k * n) * sizeof(float));
  float* gc = bpb_alloc((size_t)(m * n) * sizeof(float));
  bpb_fill_random(ga, (size_t)(m * k), 13);
  bpb_fill_random(gbm, (size_t)(k * n), 14);
  double t_bp[BPB_MAX_REPS], t_ref[BPB_MAX_REPS];
  int ngemm = backward ? 2 : 1;
  for (int r = -1; r < ctx->reps; r++) { /* r = -1: warm-up; then interleaved */
    double t_gemm = 0;
    for (int j = 0; j < ngemm; j++) t_gemm += bpb_sgemm_seconds(1, m, n, k, ga, gbm, gc);
    double t0 = bpb_now();
    if (backward)
      BPB_CHECK(bp_op_convolution_backward(ctx->stream, y, x, w, &at, &gx, &gw, &gb));
    else
      BPB_CHECK(bp_op_convolution(ctx->stream, x, w, NULL, &at, &y));
    BPB_CHECK(bp_stream_synchronize(ctx->stream));
    if (r < 0) continue;
    t_ref[r] = t_gemm;
    t_bp[r] = bpb_now() - t0;
  }
  double flops = 2.0 * ngemm * (double)m * (double)n * (double)k;
  double gf_bp = flops / bpb_median(t_bp, ctx->reps) / 1e9;
  double gf_ref = flops / bpb_median(t_ref, ctx->reps) / 1e9;
  char name[200];
  snprintf(name, sizeof name, "conv2d%s %s, N=%lld: GFLOP/s vs sgemm %lldx%lldx%lld",
           backward ? " backward (input, weight)" : "", s->name, (long long)batch, (long long)m,
           (long long)n, (long long)k);
  bpb_add_figure(&(bpb_figure_t){name, "GFLOP/s", gf_bp, gf_ref,
                                 backward ? "2 x cblas_sgemm (OpenBLAS) at the GEMM shape"
                                          : "cblas_sgemm (OpenBLAS) at the GEMM shape",
                                 backward ? 0.0 : 0.6, 0});
  free(ga);
  free(gbm);
  free(gc);
  bp_tensor_release(x);
  bp_tensor_release(w);
  bp_tensor_release(y);
  if (gx) bp_tensor_release(gx);
  if (gw) bp_tensor_release(gw);
  if (gb) bp_tensor_release(gb);
  return gf_bp / gf_ref;
}

/* One forward shape at `batch` against PyTorch's conv2d, interleaved;
 * target 1.0 on the first shape (the issue's), none on the others. Each
 * side's call starts after the other side's threads have gone to sleep
 * (bpb_quiesce): otherwise OpenBLAS's threads, which spin for about 2^28
 * cycles after a GEMM, and PyTorch's OpenMP team, which spins after a
 * parallel region, take the cores from whichever side runs next (both
 * ran several times slower in the same run than alone). */
static void bench_vs_torch(bpb_ctx_t* ctx, const conv_shape_t* s, int64_t batch, double target) {
  static char base[128]; /* a figure keeps its baseline's text */
  char name[200], why[256];
  snprintf(name, sizeof name, "conv2d %s, N=%lld: GFLOP/s vs PyTorch conv2d", s->name, (long long)batch);
  const int64_t shape[7] = {batch, s->c, s->o, s->hw, s->k, s->stride, s->pad};
  bpb_torch_t t;
  if (!bpb_torch_open(&t, shape, ctx->cores, why, sizeof why)) {
    printf("figure '%s' skipped: %s\n", name, why);
    return;
  }
  int64_t ho = (s->hw + 2 * s->pad - s->k) / s->stride + 1;
  int64_t xs[4] = {batch, s->c, s->hw, s->hw}, ws[4] = {s->o, s->c, s->k, s->k};
  int64_t ys[4] = {batch, s->o, ho, ho};
  bp_tensor_t* x = bpb_tensor_random(ctx, 4, xs, 11);
  bp_tensor_t* w = bpb_tensor_random(ctx, 4, ws, 12);
  bp_tensor_t* y = bpb_tensor(ctx, BP_DTYPE_F32, 4, ys);
  bp_conv_attrs_t at = {.struct_size = sizeof at, .spatial_dims = 2, .groups = 1, .output_mask = 3};
  for (int i = 0; i < 2; i++) at.stride[i] = s->stride, at.padding[i] = s->pad, at.dilation[i] = 1;
  double t_bp[BPB_MAX_REPS], t_ref[BPB_MAX_REPS];
  int ok = 1;
  for (int r = -1; r < ctx->reps && ok; r++) { /* r = -1: warm-up */
    double tt = bpb_torch_run(&t);
    bpb_quiesce();
    double t0 = bpb_now();
    BPB_CHECK(bp_op_convolution(ctx->stream, x, w, NULL, &at, &y));
    BPB_CHECK(bp_stream_synchronize(ctx->stream));
    double tb = bpb_now() - t0;
    bpb_quiesce();
    ok = tt > 0;
    if (r >= 0) t_ref[r] = tt, t_bp[r] = tb;
  }
  bpb_torch_close(&t);
  if (ok) {
    double flops = 2.0 * (double)(batch * ho * ho) * (double)s->o * (double)(s->c * s->k * s->k);
    snprintf(base, sizeof base, "PyTorch F.conv2d (oneDNN), %d threads, same run", ctx->cores);
    bpb_add_figure(&(bpb_figure_t){name, "GFLOP/s", flops / bpb_median(t_bp, ctx->reps) / 1e9,
                                   flops / bpb_median(t_ref, ctx->reps) / 1e9, base, target, 0});
  } else {
    printf("figure '%s' skipped: the PyTorch child stopped answering\n", name);
  }
  bp_tensor_release(x), bp_tensor_release(w), bp_tensor_release(y);
}

void bpb_suite_conv(bpb_ctx_t* ctx) {
  if (!BPB_HAVE_OPENBLAS) {
    printf("suite conv: skipped (built without OpenBLAS: no sgemm baseline)\n");
    return;
  }
  static const int64_t k_batches[] = {1, 8};
  size_t nb = ctx->quick ? 1 : 2;
  size_t ns = sizeof k_shapes / sizeof k_shapes[0];
  double ratios[2 * sizeof k_shapes / sizeof k_shapes[0]];
  size_t nr = 0;
  for (size_t b = 0; b < nb; b++)
    for (size_t i = 0; i < ns; i++) ratios[nr++] = bench_shape(ctx, &k_shapes[i], k_batches[b], 0);
  qsort(ratios, nr, sizeof ratios[0], cmp_double);
  double med = nr % 2 ? ratios[nr / 2] : 0.5 * (ratios[nr / 2 - 1] + ratios[nr / 2]);
  bpb_add_figure(&(bpb_figure_t){"conv2d ResNet-50 shapes: median ratio to sgemm", "ratio", med,
                                 1.0, "sgemm at each GEMM shape", 0.6, 0});
  /* Backward at batch 1, for information. */
  for (size_t i = 0; i < ns && !ctx->quick; i++) (void)bench_shape(ctx, &k_shapes[i], 1, 1);
  /* PyTorch at batch 8 */
  for (size_t i = 0; i < ns && !ctx->quick; i++) bench_vs_torch(ctx, &k_shapes[i], 8, i == 0 ? 1.0 : 0.0);
}
