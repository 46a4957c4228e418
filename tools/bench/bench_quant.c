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
 * once): the ratio is the unfused time over the fused time.
 * And the quantized matmuls:
 *   - scaled_mm i8 x i8 -> i32 at 2048^3 vs the plugin's own f32 mm at the
 *     same shape (GOP/s, alternately in one run);
 *   - weight_only_mm, batch-1 decode with i4 weights (group 128, f16
 *     scales), f32 activations and int8 ones: the packed weight bytes read
 *     per second vs the copy loop over as many bytes (read + written per
 *     second), interleaved: at 4096 x 4096 with one weight (8 MiB, called
 *     64 times per run, back to back as a decode step's calls: it stays in
 *     a large last-level cache, and so do the copy loop's 2 x 8 MiB, so
 *     both sides run at cache bandwidth), with
 *     64 such weights called in turn (512 MiB, what a decode step through
 *     64 layers reads, one run a whole step with its 64 calls enqueued back
 *     to back: above any cache, like the copy loop's 2 x 512 MiB, so both
 *     sides run at memory bandwidth) and at 32768 x 32768 (one 512 MiB
 *     weight). */
#include <stdio.h>
#include <stdlib.h>

#include "bench.h"

typedef struct quant_run {
  const bp_tensor_t *x, *res, *w;
  bp_tensor_t *gate, *up; /* views of x (swiglu) */
  bp_tensor_t *out, *res_out, *tmp;
  const void* attrs;
  int calls; /* add_rms_norm: calls enqueued back to back per run */
} quant_run_t;

static bp_status_t run_add_rms_fused(bpb_ctx_t* ctx, void* user) {
  quant_run_t* r = user;
  bp_status_t st = BP_OK;
  for (int i = 0; i < r->calls && st == BP_OK; i++)
    st = bp_op_add_rms_norm(ctx->stream, r->x, r->res, r->w, r->attrs, &r->out, &r->res_out);
  return st;
}

static bp_status_t run_add_rms_unfused(bpb_ctx_t* ctx, void* user) {
  quant_run_t* r = user;
  bp_status_t st = BP_OK;
  for (int i = 0; i < r->calls && st == BP_OK; i++) {
    st = bp_op_add(ctx->stream, r->x, r->res, NULL, &r->res_out);
    if (st == BP_OK) st = bp_op_rms_norm(ctx->stream, r->res_out, r->w, r->attrs, &r->out);
  }
  return st;
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

/* Times `fused` and `unfused` alternately (one warm-up each); records
 * work / seconds of both in `unit` (scale divides). */
static void timed_pair(bpb_ctx_t* ctx, const char* name, bpb_run_fn fused, bpb_run_fn unfused,
                       void* rf, void* ru, double work, const char* unit, double scale,
                       const char* baseline_name, double target) {
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
  printf("%s: %.2f ms vs %.2f ms (medians)\n", name, mf * 1e3, mu * 1e3);
  bpb_add_figure(&(bpb_figure_t){name, unit, work / mf / scale, work / mu / scale, baseline_name,
                                 target, 0});
}

static void fused_vs_unfused(bpb_ctx_t* ctx, const char* name, bpb_run_fn fused, bpb_run_fn unfused,
                             quant_run_t* rf, quant_run_t* ru, double bytes, double target) {
  timed_pair(ctx, name, fused, unfused, rf, ru, bytes, "GB/s", 1e9, "unfused ops, same run", target);
}

/* ---- quantized matmuls -------------------------------------------------------- */

typedef struct qmm_run {
  const bp_tensor_t *a, *b, *s;
  bp_tensor_t* out;
  const void* attrs;
} qmm_run_t;

static bp_status_t run_int8_mm(bpb_ctx_t* ctx, void* user) {
  qmm_run_t* r = user;
  return bp_op_scaled_mm(ctx->stream, r->a, r->b, NULL, NULL, NULL, r->attrs, &r->out);
}
static bp_status_t run_f32_mm(bpb_ctx_t* ctx, void* user) {
  qmm_run_t* r = user;
  return bp_op_mm(ctx->stream, r->a, r->b, NULL, &r->out);
}
static bp_status_t run_w4(bpb_ctx_t* ctx, void* user) {
  qmm_run_t* r = user;
  return bp_op_weight_only_mm(ctx->stream, r->a, r->b, r->s, NULL, NULL, r->attrs, &r->out);
}

/* One decode step: `calls` calls of weight_only_mm through `layers`
 * weights (and scales) in turn, enqueued back to back as an application's
 * step walks a model's layers (one run reads `calls` weights' bytes). */
typedef struct w4_layers_run {
  qmm_run_t r;
  bp_tensor_t **w, **s;
  int layers, calls;
} w4_layers_run_t;

static bp_status_t run_w4_layers(bpb_ctx_t* ctx, void* user) {
  w4_layers_run_t* l = user;
  for (int i = 0; i < l->calls; i++) {
    l->r.b = l->w[i % l->layers], l->r.s = l->s[i % l->layers];
    bp_status_t st = run_w4(ctx, &l->r);
    if (st != BP_OK) return st;
  }
  return BP_OK;
}

/* A tensor of `dtype` holding n random bytes per element byte. */
static bp_tensor_t* random_bytes(bpb_ctx_t* ctx, uint32_t dtype, uint32_t rank, const int64_t* sizes,
                                 unsigned seed) {
  bp_tensor_t* t = bpb_tensor(ctx, dtype, rank, sizes);
  size_t bytes = bp_dtype_size(dtype);
  for (uint32_t d = 0; d < rank; d++) bytes *= (size_t)sizes[d];
  uint8_t* p = bpb_alloc(bytes + 64);
  uint64_t x = 0x9E3779B97F4A7C15ull * (seed + 1);
  for (size_t i = 0; i < bytes; i++) {
    x ^= x << 13, x ^= x >> 7, x ^= x << 17;
    p[i] = dtype == BP_DTYPE_F16 ? (uint8_t)(i & 1 ? 0x20 : (x & 0xFF)) : (uint8_t)(x >> 24);
  }
  BPB_CHECK(bp_tensor_write(ctx->stream, t, p, bytes));
  BPB_CHECK(bp_stream_synchronize(ctx->stream));
  free(p);
  return t;
}

static void bench_int8_gemm(bpb_ctx_t* ctx) {
  int64_t n = ctx->quick ? 256 : 2048, sz[2] = {n, n};
  char name[128];
  bp_tensor_t* a8 = random_bytes(ctx, BP_DTYPE_I8, 2, sz, 31);
  bp_tensor_t* b8 = random_bytes(ctx, BP_DTYPE_I8, 2, sz, 32);
  bp_tensor_t* af = bpb_tensor_random(ctx, 2, sz, 33);
  bp_tensor_t* bf = bpb_tensor_random(ctx, 2, sz, 34);
  bp_scaled_mm_attrs_t at = {.struct_size = sizeof at};
  qmm_run_t ri = {a8, b8, NULL, NULL, &at}, rf = {af, bf, NULL, NULL, NULL};
  snprintf(name, sizeof name, "scaled_mm i8 x i8 -> i32 %lld^3 vs mm f32 (the plugin's sgemm)",
           (long long)n);
  timed_pair(ctx, name, run_int8_mm, run_f32_mm, &ri, &rf, 2.0 * (double)n * n * n, "GOP/s", 1e9,
             "f32 mm, same shape, same run", 1.5);
  bp_tensor_t* ts[] = {a8, b8, af, bf, ri.out, rf.out};
  for (size_t i = 0; i < sizeof ts / sizeof ts[0]; i++)
    if (ts[i]) bp_tensor_release(ts[i]);
}

/* Batch-1 decode with i4 weights (group 128, f16 scales): `calls` calls
 * per run through `layers` weights of [nrows, k] in turn: the
 * f32-activation path and the int8-activation one
 * (BP_QUANTIZE_INT8_ACTIVATIONS), each interleaved with the copy loop over
 * the layers' packed bytes (2 x 8 MiB for the cache-resident weight); both
 * sides as bytes per second, so the two runs need not move as many. */
static void bench_w4_decode(bpb_ctx_t* ctx, int64_t k, int64_t nrows, int layers, int calls,
                            const char* where) {
  int64_t g = 128, xs[2] = {1, k}, ws[2] = {nrows, k / 2}, ss[2] = {nrows, k / g};
  char name[224];
  bp_tensor_t* x = bpb_tensor_random(ctx, 2, xs, 41);
  bp_tensor_t** w = calloc((size_t)layers, sizeof *w);
  bp_tensor_t** s = calloc((size_t)layers, sizeof *s);
  if (!w || !s) {
    fprintf(stderr, "bp-bench: out of memory\n");
    exit(1);
  }
  for (int l = 0; l < layers; l++) {
    w[l] = random_bytes(ctx, BP_DTYPE_U8, 2, ws, 42 + 2 * (unsigned)l);
    s[l] = random_bytes(ctx, BP_DTYPE_F16, 2, ss, 43 + 2 * (unsigned)l);
  }
  double wbytes = (double)(nrows * k / 2);
  size_t nf = (size_t)(wbytes * layers / 4); /* the copy loop: every layer's bytes once */
  float* src = bpb_alloc(nf * 4);
  float* dst = bpb_alloc(nf * 4);
  bpb_fill_random(src, nf, 44);
  for (int q8 = 0; q8 < 2; q8++) {
    bp_quantize_attrs_t at = {.struct_size = sizeof at, .qdtype = BP_DTYPE_I4, .axis = -1,
                              .block_size = g, .flags = q8 ? BP_QUANTIZE_INT8_ACTIVATIONS : 0};
    w4_layers_run_t r = {{x, w[0], s[0], NULL, &at}, w, s, layers, calls};
    char lay[48] = "";
    if (layers > 1) snprintf(lay, sizeof lay, " x %d layers in turn", layers);
    else if (calls > 1) snprintf(lay, sizeof lay, " x %d calls", calls);
    snprintf(name, sizeof name,
             "weight_only_mm i4 g128%s [1, %lld] @ [%lld, %lld]^T%s (%.0f MiB packed, %s) vs copy loop",
             q8 ? " int8 activations" : "", (long long)k, (long long)nrows, (long long)k, lay,
             wbytes * layers / (1 << 20), where);
    double t_op, t_copy;
    if (bpb_time_vs_copy(ctx, run_w4_layers, &r, src, dst, nf, name, &t_op, &t_copy)) {
      printf("%s: %.3f ms per call vs copy %.3f ms (medians)\n", name, t_op / calls * 1e3, t_copy * 1e3);
      bpb_add_figure(&(bpb_figure_t){name, "GB/s", wbytes * calls / t_op / 1e9,
                                     2.0 * wbytes * layers / t_copy / 1e9,
                                     "copy loop over the packed bytes (read + written), same run",
                                     0.8, 0});
    }
    if (r.r.out) bp_tensor_release(r.r.out);
  }
  free(src), free(dst);
  bp_tensor_release(x);
  for (int l = 0; l < layers; l++) bp_tensor_release(w[l]), bp_tensor_release(s[l]);
  free(w), free(s);
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
  quant_run_t rf = {x, res, w, NULL, NULL, NULL, NULL, NULL, &rn, 1};
  quant_run_t ru = rf;
  snprintf(name, sizeof name, "add_rms_norm f32 [%lld, %lld]: fused vs add then rms_norm",
           (long long)rows, (long long)hidden);
  fused_vs_unfused(ctx, name, run_add_rms_fused, run_add_rms_unfused, &rf, &ru, 4.0 * n * fsz, 1.4);
  release_run(&rf);
  release_run(&ru);
  bp_tensor_release(x);
  bp_tensor_release(res);

  /* A decode step's norms: a batch of 64 tokens (1 MiB a tensor, the four
   * resident in the last-level cache), 64 layers' calls back to back per
   * run. Informative: no memory traffic for the fused op to save. */
  const int64_t tokens = 64;
  const int layers = 64;
  int64_t ds[2] = {tokens, hidden};
  x = bpb_tensor_random(ctx, 2, ds, 25);
  res = bpb_tensor_random(ctx, 2, ds, 26);
  quant_run_t df = {x, res, w, NULL, NULL, NULL, NULL, NULL, &rn, layers};
  quant_run_t du = df;
  snprintf(name, sizeof name,
           "add_rms_norm f32 [%lld, %lld] x %d calls (decode batch, in cache): fused vs add then rms_norm",
           (long long)tokens, (long long)hidden, layers);
  fused_vs_unfused(ctx, name, run_add_rms_fused, run_add_rms_unfused, &df, &du,
                   layers * 4.0 * (double)(tokens * hidden) * fsz, 0);
  release_run(&df);
  release_run(&du);
  bp_tensor_release(x);
  bp_tensor_release(res);
  bp_tensor_release(w);

  /* swiglu: [rows, 2 * 4096] -> [rows, 4096] */
  int64_t gs[2] = {rows, 2 * hidden};
  bp_tensor_t* g = bpb_tensor_random(ctx, 2, gs, 24);
  quant_run_t sf = {g, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, 0};
  quant_run_t su = sf;
  BPB_CHECK(bp_tensor_slice(g, 1, 0, hidden, 1, &su.gate));
  BPB_CHECK(bp_tensor_slice(g, 1, hidden, 2 * hidden, 1, &su.up));
  snprintf(name, sizeof name, "swiglu f32 [%lld, %lld]: fused vs silu then mul",
           (long long)rows, (long long)(2 * hidden));
  fused_vs_unfused(ctx, name, run_swiglu_fused, run_swiglu_unfused, &sf, &su, 3.0 * n * fsz, 0.0);
  release_run(&sf);
  release_run(&su);
  bp_tensor_release(g);

  bench_int8_gemm(ctx);
  bench_w4_decode(ctx, 4096, ctx->quick ? 256 : 4096, 1, 64, "cache-resident");
  if (!ctx->quick) {
    bench_w4_decode(ctx, 4096, 4096, 64, 64, "above the cache");
    bench_w4_decode(ctx, 32768, 32768, 1, 1, "above the cache");
  }
}
