/* bp-bench suite "matmul": f32 mm, bmm and addmm against direct OpenBLAS at
 * the same shapes (target 0.95 each), and linear with bias and the gelu
 * epilogue against the bare sgemm of its shape (no target: the epilogue is
 * extra work). Baselines run interleaved with the ops, in the same
 * repetitions. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"

#if BPB_HAVE_OPENBLAS
#include <cblas.h>
#endif

typedef enum { MM, BMM, ADDMM, LINEAR } mm_kind_t;

/* Seconds of the baseline: sgemm, or for addmm the bias broadcast into C
 * followed by sgemm with beta = 1 (what addmm computes). */
static double baseline(mm_kind_t kind, int64_t batch, int64_t m, int64_t n, int64_t k, const float* a,
                       const float* b, const float* bias, float* c) {
#if BPB_HAVE_OPENBLAS
  if (kind == ADDMM) {
    double t0 = bpb_now();
    for (int64_t i = 0; i < m; i++) memcpy(c + i * n, bias, (size_t)n * sizeof(float));
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)m, (int)n, (int)k, 1.0f, a, (int)k,
                b, (int)n, 1.0f, c, (int)n);
    return bpb_now() - t0;
  }
#endif
  (void)bias;
  return bpb_sgemm_seconds(kind == BMM ? batch : 1, m, n, k, a, b, c);
}

static void bench_mm(bpb_ctx_t* ctx, mm_kind_t kind, int64_t batch, int64_t m, int64_t n, int64_t k) {
  int64_t sa[3] = {batch, m, k}, sb[3] = {batch, k, n}, sc[3] = {batch, m, n};
  int bat = kind == BMM;
  int64_t wsz[2] = {n, k}, bsz[1] = {n};
  bp_tensor_t* A = bpb_tensor_random(ctx, bat ? 3 : 2, bat ? sa : sa + 1, 31);
  bp_tensor_t* B = kind == LINEAR ? bpb_tensor_random(ctx, 2, wsz, 32)
                                  : bpb_tensor_random(ctx, bat ? 3 : 2, bat ? sb : sb + 1, 32);
  bp_tensor_t* bias = bpb_tensor_random(ctx, 1, bsz, 33);
  bp_tensor_t* C = bpb_tensor(ctx, BP_DTYPE_F32, bat ? 3 : 2, bat ? sc : sc + 1);
  size_t ne_a = (size_t)(batch * m * k), ne_b = (size_t)(batch * k * n), ne_c = (size_t)(batch * m * n);
  float* ha = bpb_alloc(ne_a * sizeof(float));
  float* hb = bpb_alloc(ne_b * sizeof(float));
  float* hc = bpb_alloc(ne_c * sizeof(float));
  float* hbias = bpb_alloc((size_t)n * sizeof(float));
  bpb_fill_random(ha, ne_a, 34);
  bpb_fill_random(hb, ne_b, 35);
  bpb_fill_random(hbias, (size_t)n, 36);
  bp_linear_attrs_t la = {.struct_size = sizeof la, .activation = BP_ACTIVATION_GELU_ERF};
  static const char* const names[] = {"mm", "bmm", "addmm (bias [n])", "linear + bias + gelu"};
  char name[200];
  snprintf(name, sizeof name, "%s f32 %lld x %lldx%lldx%lld: GFLOP/s vs direct OpenBLAS",
           names[kind], (long long)batch, (long long)m, (long long)n, (long long)k);
  double t_bp[BPB_MAX_REPS], t_ref[BPB_MAX_REPS];
  int skipped = 0;
  for (int r = -1; r < ctx->reps; r++) { /* r = -1: warm-up */
    double tr = baseline(kind, batch, m, n, k, ha, hb, hbias, hc);
    double t0 = bpb_now();
    bp_status_t st = BP_OK;
    switch (kind) {
      case MM: st = bp_op_mm(ctx->stream, A, B, NULL, &C); break;
      case BMM: st = bp_op_bmm(ctx->stream, A, B, NULL, &C); break;
      case ADDMM: st = bp_op_addmm(ctx->stream, bias, A, B, NULL, &C); break;
      case LINEAR: st = bp_op_linear(ctx->stream, A, B, bias, &la, &C); break;
    }
    if (r < 0 && bpb_unsupported(st, name)) {
      skipped = 1;
      break;
    }
    bpb_check(st, name);
    BPB_CHECK(bp_stream_synchronize(ctx->stream));
    if (r < 0) continue;
    t_bp[r] = bpb_now() - t0;
    t_ref[r] = tr;
  }
  double flops = 2.0 * (double)batch * (double)m * (double)n * (double)k;
  if (!skipped)
    bpb_add_figure(&(bpb_figure_t){name, "GFLOP/s", flops / bpb_median(t_bp, ctx->reps) / 1e9,
                                   flops / bpb_median(t_ref, ctx->reps) / 1e9,
                                   kind == LINEAR ? "cblas_sgemm (OpenBLAS), GEMM only"
                                                  : "cblas_sgemm (OpenBLAS) direct",
                                   kind == LINEAR ? 0.0 : 0.95, 0});
  free(ha);
  free(hb);
  free(hc);
  free(hbias);
  bp_tensor_release(A);
  bp_tensor_release(B);
  bp_tensor_release(bias);
  bp_tensor_release(C);
}

void bpb_suite_matmul(bpb_ctx_t* ctx) {
  if (!BPB_HAVE_OPENBLAS) {
    printf("suite matmul: skipped (built without OpenBLAS: no sgemm baseline)\n");
    return;
  }
  int64_t s = ctx->quick ? 256 : 1024;
  bench_mm(ctx, MM, 1, s, s, s);
  bench_mm(ctx, BMM, ctx->quick ? 4 : 16, s / 2, s / 2, s / 2);
  bench_mm(ctx, ADDMM, 1, s, s, s);
  int64_t l = ctx->quick ? 512 : 4096;
  bench_mm(ctx, LINEAR, 1, l, l, l);
}
