/* bp-bench suite "graph", part "regions": compiled regions against the
 * same ops run eagerly, in one run, medians of ctx->reps repetitions.
 *
 *  - an 8-op elementwise chain over 16M f32 (two inputs, one output):
 *    min(max(|(relu(x*y + 0.5) - y) * x|, x), 2) as one EW_PROGRAM region
 *    against the eight eager ops (target >= 5x), and as bandwidth (bytes
 *    of the inputs and the output per second) against the C copy loop on
 *    all cores (target >= 0.8);
 *  - linear + bias + gelu (M=4096, K=N=1024, f32) as one EPILOGUE region
 *    against eager linear (with its bias) then gelu (target >= 1: a fused
 *    epilogue never loses to the unfused ops).
 *  - sum(x*x) over 16M f32 as one reduction-prologue GRAPH region (the
 *    square folded chunk by chunk, never stored) against eager mul then
 *    sum (target >= 1: reading x once never loses to writing and reading
 *    the squares);
 *  - on an OpenCL device, the same chain through bp_ew_program_run as the
 *    plugin's generated kernel against its interpreter kernel
 *    (BP_OPENCL_EW_GENERATE=0), bursts alternating (report, no target).
 * Region and eager bursts alternate per repetition (time_pair).
 * Skipped with a reason on a device that refuses the region.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"

typedef struct chain_state {
  bp_region_t* region;
  const bp_tensor_t* args[3];
  bp_tensor_t *x, *y, *out;
  bp_tensor_t* t[8]; /* eager intermediates, reused */
} chain_state_t;

static const bp_scalar_t k_consts[2] = {{.kind = BP_SCALAR_FLOAT, .v.f = 0.5},
                                        {.kind = BP_SCALAR_FLOAT, .v.f = 2.0}};

static bp_ew_program_t chain_program(bp_ew_instr_t* p) {
  int k = 0;
#define I(op, d, a, b) p[k++] = (bp_ew_instr_t){(op), (d), (a), (b), 0, 0}
  I(BP_EW_LOAD_INPUT, 0, 0, 0);
  I(BP_EW_LOAD_INPUT, 1, 1, 0);
  I(BP_EW_LOAD_CONST, 2, 0, 0);
  I(BP_EW_LOAD_CONST, 3, 1, 0);
  I(BP_OP_mul, 4, 0, 1);
  I(BP_OP_add, 4, 4, 2);
  I(BP_OP_relu, 4, 4, 0);
  I(BP_OP_sub, 4, 4, 1);
  I(BP_OP_mul, 4, 4, 0);
  I(BP_OP_abs, 4, 4, 0);
  I(BP_OP_maximum, 4, 4, 0);
  I(BP_OP_minimum, 4, 4, 3);
  I(BP_EW_STORE, 0, 0, 4);
#undef I
  bp_ew_program_t prog = {.struct_size = sizeof prog, .num_instrs = (uint32_t)k, .num_registers = 5,
                          .num_inputs = 2, .num_outputs = 1, .num_constants = 2,
                          .compute_dtype = BP_DTYPE_F32, .instr_stride = sizeof(bp_ew_instr_t),
                          .instrs = p, .constants = k_consts};
  return prog;
}

static bp_status_t run_region(bpb_ctx_t* ctx, void* user) {
  chain_state_t* s = user;
  return bp_region_launch(ctx->stream, s->region, s->args, 3, NULL);
}

static bp_status_t run_eager(bpb_ctx_t* ctx, void* user) {
  chain_state_t* s = user;
  bp_stream_t* st = ctx->stream;
  bp_binary_attrs_t half = {.struct_size = sizeof half, .flags = BP_BINARY_OTHER_IS_SCALAR,
                            .scalar = k_consts[0]};
  bp_binary_attrs_t two = {.struct_size = sizeof two, .flags = BP_BINARY_OTHER_IS_SCALAR,
                           .scalar = k_consts[1]};
  bp_status_t r;
  if ((r = bp_op_mul(st, s->x, s->y, NULL, &s->t[0])) || (r = bp_op_add(st, s->t[0], NULL, &half, &s->t[1])) ||
      (r = bp_op_relu(st, s->t[1], NULL, &s->t[2])) || (r = bp_op_sub(st, s->t[2], s->y, NULL, &s->t[3])) ||
      (r = bp_op_mul(st, s->t[3], s->x, NULL, &s->t[4])) || (r = bp_op_abs(st, s->t[4], NULL, &s->t[5])) ||
      (r = bp_op_maximum(st, s->t[5], s->x, NULL, &s->t[6])) || (r = bp_op_minimum(st, s->t[6], NULL, &two, &s->t[7])))
    return r;
  return BP_OK;
}

/* Seconds per run of fn: a burst of back-to-back runs closed by one
 * synchronize (steady state, as bpb_time_vs_copy). */
static double burst_seconds(bpb_ctx_t* ctx, bpb_run_fn fn, void* user) {
  int n = 0;
  double t0 = bpb_now(), t;
  do {
    BPB_CHECK(fn(ctx, user));
    n++;
    BPB_CHECK(bp_stream_synchronize(ctx->stream));
    t = bpb_now() - t0;
  } while (n < BPB_BURST || t < BPB_BURST_S);
  return t / n;
}

/* Medians of reps bursts of `a` and of `b`, interleaved (a, b, a, b, ...)
 * so that both see the same load on a shared machine. */
static void time_pair(bpb_ctx_t* ctx, bpb_run_fn a, bpb_run_fn b, void* user, double* out_a, double* out_b) {
  double va[BPB_MAX_REPS], vb[BPB_MAX_REPS];
  BPB_CHECK(a(ctx, user));
  BPB_CHECK(b(ctx, user));
  BPB_CHECK(bp_stream_synchronize(ctx->stream));
  for (int r = 0; r < ctx->reps; r++) {
    va[r] = burst_seconds(ctx, a, user);
    vb[r] = burst_seconds(ctx, b, user);
  }
  *out_a = bpb_median(va, ctx->reps);
  *out_b = bpb_median(vb, ctx->reps);
}

static void chain_figures(bpb_ctx_t* ctx) {
  const int64_t n = ctx->quick ? (int64_t)1 << 20 : (int64_t)16 << 20;
  int64_t sz[1] = {n};
  chain_state_t s;
  memset(&s, 0, sizeof s);
  s.x = bpb_tensor_random(ctx, 1, sz, 1);
  s.y = bpb_tensor_random(ctx, 1, sz, 2);
  s.out = bpb_tensor(ctx, BP_DTYPE_F32, 1, sz);
  bp_ew_instr_t ins[16];
  bp_ew_program_t prog = chain_program(ins);
  bp_tensor_desc_t v = {.struct_size = sizeof v, .dtype = BP_DTYPE_F32, .rank = 1, .sizes = {n}, .strides = {1}};
  const bp_tensor_desc_t* vals[3] = {&v, &v, &v};
  bp_region_desc_t d = {.struct_size = sizeof d, .kind = BP_REGION_EW_PROGRAM, .num_values = 3,
                        .num_args = 3, .num_inputs = 2, .values = vals, .program = &prog};
  bp_support_t why = {.struct_size = sizeof why};
  const char* name = "8-op elementwise chain (f32), compiled region vs eager ops";
  if (bpb_unsupported(bp_region_compile(ctx->device, &d, &why, &s.region), name)) goto done;
  s.args[0] = s.x;
  s.args[1] = s.y;
  s.args[2] = s.out;
  double t_eager, t_region;
  time_pair(ctx, run_eager, run_region, &s, &t_eager, &t_region);
  char fig[160];
  snprintf(fig, sizeof fig, "8-op elementwise chain, %lldM f32: compiled region vs eager ops", (long long)(n >> 20));
  bpb_add_figure(&(bpb_figure_t){fig, "runs/s", 1.0 / t_region, 1.0 / t_eager, "the 8 ops eagerly", 5.0, 0});
  /* Against one copy-loop pass over the same bytes, interleaved. */
  float* ha = bpb_alloc((size_t)n * sizeof(float));
  float* hd = bpb_alloc((size_t)n * sizeof(float));
  bpb_fill_random(ha, (size_t)n, 5);
  memset(hd, 0, (size_t)n * sizeof(float));
  double t_op, t_copy;
  snprintf(fig, sizeof fig, "8-op elementwise chain, %lldM f32, compiled region: bandwidth vs copy loop",
           (long long)(n >> 20));
  if (bpb_time_vs_copy(ctx, run_region, &s, ha, hd, (size_t)n, fig, &t_op, &t_copy)) {
    double bw = 3.0 * 4.0 * (double)n / t_op / 1e9, base = 2.0 * 4.0 * (double)n / t_copy / 1e9;
    bpb_add_figure(&(bpb_figure_t){fig, "GB/s", bw, base, "C copy loop, all cores", 0.8, 0});
  }
  free(ha);
  free(hd);
done:
  bp_region_release(s.region);
  bp_tensor_release(s.x);
  bp_tensor_release(s.y);
  bp_tensor_release(s.out);
  for (int i = 0; i < 8; i++) bp_tensor_release(s.t[i]);
}

typedef struct lin_state {
  bp_region_t* region;
  const bp_tensor_t* args[4];
  bp_tensor_t *x, *w, *b, *out, *l, *g;
} lin_state_t;

static bp_status_t lin_region(bpb_ctx_t* ctx, void* user) {
  lin_state_t* s = user;
  return bp_region_launch(ctx->stream, s->region, s->args, 4, NULL);
}
static bp_status_t lin_eager(bpb_ctx_t* ctx, void* user) {
  lin_state_t* s = user;
  bp_status_t r = bp_op_linear(ctx->stream, s->x, s->w, s->b, NULL, &s->l);
  return r ? r : bp_op_gelu(ctx->stream, s->l, NULL, &s->g);
}

static void linear_figures(bpb_ctx_t* ctx) {
  const int64_t M = ctx->quick ? 256 : 4096, K = ctx->quick ? 256 : 1024, N = K;
  lin_state_t s;
  memset(&s, 0, sizeof s);
  s.x = bpb_tensor_random(ctx, 2, (int64_t[]){M, K}, 1);
  s.w = bpb_tensor_random(ctx, 2, (int64_t[]){N, K}, 2);
  s.b = bpb_tensor_random(ctx, 1, (int64_t[]){N}, 3);
  s.out = bpb_tensor(ctx, BP_DTYPE_F32, 2, (int64_t[]){M, N});
  bp_tensor_desc_t vx = {.struct_size = sizeof vx, .dtype = BP_DTYPE_F32, .rank = 2, .sizes = {M, K}, .strides = {K, 1}};
  bp_tensor_desc_t vw = {.struct_size = sizeof vw, .dtype = BP_DTYPE_F32, .rank = 2, .sizes = {N, K}, .strides = {K, 1}};
  bp_tensor_desc_t vb = {.struct_size = sizeof vb, .dtype = BP_DTYPE_F32, .rank = 1, .sizes = {N}, .strides = {1}};
  bp_tensor_desc_t vo = {.struct_size = sizeof vo, .dtype = BP_DTYPE_F32, .rank = 2, .sizes = {M, N}, .strides = {N, 1}};
  const bp_tensor_desc_t* vals[5] = {&vx, &vw, &vb, &vo, &vo};
  uint32_t ids0[4] = {0, 1, 2, 4}, ids1[2] = {4, 3};
  bp_region_node_t n0 = {.struct_size = sizeof n0, .op_id = BP_OP_linear, .num_inputs = 3, .num_outputs = 1,
                         .inputs = ids0, .outputs = ids0 + 3};
  bp_region_node_t n1 = {.struct_size = sizeof n1, .op_id = BP_OP_gelu, .num_inputs = 1, .num_outputs = 1,
                         .inputs = ids1, .outputs = ids1 + 1};
  const bp_region_node_t* nodes[2] = {&n0, &n1};
  bp_region_desc_t d = {.struct_size = sizeof d, .kind = BP_REGION_EPILOGUE, .num_values = 5, .num_args = 4,
                        .num_inputs = 3, .num_nodes = 2, .values = vals, .nodes = nodes};
  char fig[160];
  snprintf(fig, sizeof fig, "linear + bias + gelu %lldx%lldx%lld f32: epilogue region vs eager ops",
           (long long)M, (long long)K, (long long)N);
  bp_support_t why = {.struct_size = sizeof why};
  if (bpb_unsupported(bp_region_compile(ctx->device, &d, &why, &s.region), fig)) goto done;
  s.args[0] = s.x;
  s.args[1] = s.w;
  s.args[2] = s.b;
  s.args[3] = s.out;
  double t_eager, t_region;
  time_pair(ctx, lin_eager, lin_region, &s, &t_eager, &t_region);
  bpb_add_figure(&(bpb_figure_t){fig, "runs/s", 1.0 / t_region, 1.0 / t_eager, "linear then gelu eagerly", 1.0, 0});
done:
  bp_region_release(s.region);
  bp_tensor_t* all[] = {s.x, s.w, s.b, s.out, s.l, s.g};
  for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) bp_tensor_release(all[i]);
}

typedef struct sumsq_state {
  bp_region_t* region;
  const bp_tensor_t* args[2];
  bp_tensor_t *x, *out, *sq, *sum;
} sumsq_state_t;

static const bp_reduce_attrs_t k_all_dims = {.struct_size = sizeof(bp_reduce_attrs_t), .flags = BP_REDUCE_ALL_DIMS};

static bp_status_t sumsq_region(bpb_ctx_t* ctx, void* user) {
  sumsq_state_t* s = user;
  return bp_region_launch(ctx->stream, s->region, s->args, 2, NULL);
}
static bp_status_t sumsq_eager(bpb_ctx_t* ctx, void* user) {
  sumsq_state_t* s = user;
  bp_status_t r = bp_op_mul(ctx->stream, s->x, s->x, NULL, &s->sq);
  return r ? r : bp_op_sum(ctx->stream, s->sq, &k_all_dims, &s->sum);
}

static void prologue_figures(bpb_ctx_t* ctx) {
  const int64_t n = ctx->quick ? (int64_t)1 << 20 : (int64_t)16 << 20;
  sumsq_state_t s;
  memset(&s, 0, sizeof s);
  s.x = bpb_tensor_random(ctx, 1, (int64_t[]){n}, 1);
  s.out = bpb_tensor(ctx, BP_DTYPE_F32, 0, NULL);
  bp_tensor_desc_t vx = {.struct_size = sizeof vx, .dtype = BP_DTYPE_F32, .rank = 1, .sizes = {n}, .strides = {1}};
  bp_tensor_desc_t vs = {.struct_size = sizeof vs, .dtype = BP_DTYPE_F32, .rank = 0};
  const bp_tensor_desc_t* vals[3] = {&vx, &vs, &vx}; /* x, the sum, the squares (a temporary) */
  uint32_t ids0[3] = {0, 0, 2}, ids1[2] = {2, 1};
  bp_region_node_t n0 = {.struct_size = sizeof n0, .op_id = BP_OP_mul, .num_inputs = 2, .num_outputs = 1,
                         .compute_dtype = BP_DTYPE_F32, .inputs = ids0, .outputs = ids0 + 2};
  bp_region_node_t n1 = {.struct_size = sizeof n1, .op_id = BP_OP_sum, .num_inputs = 1, .num_outputs = 1,
                         .compute_dtype = BP_DTYPE_F32, .inputs = ids1, .outputs = ids1 + 1, .attrs = &k_all_dims};
  const bp_region_node_t* nodes[2] = {&n0, &n1};
  bp_region_desc_t d = {.struct_size = sizeof d, .kind = BP_REGION_GRAPH, .num_values = 3, .num_args = 2,
                        .num_inputs = 1, .num_nodes = 2, .values = vals, .nodes = nodes};
  char fig[160];
  snprintf(fig, sizeof fig, "sum(x*x), %lldM f32: reduction-prologue region vs eager mul then sum",
           (long long)(n >> 20));
  bp_support_t why = {.struct_size = sizeof why};
  if (bpb_unsupported(bp_region_compile(ctx->device, &d, &why, &s.region), fig)) goto done;
  s.args[0] = s.x;
  s.args[1] = s.out;
  double t_eager, t_region;
  time_pair(ctx, sumsq_eager, sumsq_region, &s, &t_eager, &t_region);
  bpb_add_figure(&(bpb_figure_t){fig, "runs/s", 1.0 / t_region, 1.0 / t_eager, "mul then sum eagerly", 1.0, 0});
done:
  bp_region_release(s.region);
  bp_tensor_t* all[] = {s.x, s.out, s.sq, s.sum};
  for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) bp_tensor_release(all[i]);
}

typedef struct gen_state {
  bp_ew_program_t prog;
  const bp_tensor_t* in[2];
  bp_tensor_t* out[1];
} gen_state_t;

static bp_status_t run_program(bpb_ctx_t* ctx, void* user) {
  gen_state_t* s = user;
  return bp_ew_program_run(ctx->stream, &s->prog, s->in, 2, s->out, 1);
}
static bp_status_t run_generated(bpb_ctx_t* ctx, void* user) {
  unsetenv("BP_OPENCL_EW_GENERATE");
  return run_program(ctx, user);
}
static bp_status_t run_interpreted(bpb_ctx_t* ctx, void* user) {
  setenv("BP_OPENCL_EW_GENERATE", "0", 1);
  return run_program(ctx, user);
}

/* The chain as the OpenCL plugin's generated kernel vs its interpreter. */
static void generated_figures(bpb_ctx_t* ctx) {
  if (strncmp(bp_device_name(ctx->device), "opencl:", 7) != 0) return;
  const int64_t n = ctx->quick ? (int64_t)1 << 20 : (int64_t)16 << 20;
  int64_t sz[1] = {n};
  gen_state_t s;
  bp_ew_instr_t ins[16];
  s.prog = chain_program(ins);
  bp_tensor_t* x = bpb_tensor_random(ctx, 1, sz, 1);
  bp_tensor_t* y = bpb_tensor_random(ctx, 1, sz, 2);
  s.in[0] = x;
  s.in[1] = y;
  s.out[0] = bpb_tensor(ctx, BP_DTYPE_F32, 1, sz);
  const char* old = getenv("BP_OPENCL_EW_GENERATE");
  char* saved = old ? strdup(old) : NULL;
  double t_gen, t_int;
  time_pair(ctx, run_generated, run_interpreted, &s, &t_gen, &t_int);
  if (saved) setenv("BP_OPENCL_EW_GENERATE", saved, 1);
  else unsetenv("BP_OPENCL_EW_GENERATE");
  free(saved);
  char fig[160];
  snprintf(fig, sizeof fig, "8-op elementwise chain, %lldM f32: generated kernel vs interpreter kernel",
           (long long)(n >> 20));
  bpb_add_figure(&(bpb_figure_t){fig, "runs/s", 1.0 / t_gen, 1.0 / t_int, "the interpreter kernel", 0, 0});
  bp_tensor_release(x);
  bp_tensor_release(y);
  bp_tensor_release(s.out[0]);
}

void bpb_graph_regions(bpb_ctx_t* ctx) {
  chain_figures(ctx);
  generated_figures(ctx);
  linear_figures(ctx);
  prologue_figures(ctx);
}
