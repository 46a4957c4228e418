/* bp-bench suite "graph", the compiler's part: the 8-op elementwise chain
 * and a transformer block compiled against the same ops run eagerly (the
 * block also against its compile without fused ops, regions and streams), compile time of a 1,000-node graph, a
 * guarded-cache hit, loading a saved executable against compiling it, and
 * the transformer block's peak memory with and without planning.
 *
 * The eager baseline runs the graph's nodes in order with bp_op_run on the
 * measured device (view nodes with their tensor functions, through
 * bp_graph_view_run), outputs allocated by the core and released after
 * their last use, weights uploaded once beforehand: what an application
 * calling the ops itself does. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "backplane/graph.h"
#include "bench.h"

/* A pre-norm transformer block as text, d in d/64 heads of 64 (split and
 * merged by view nodes), causal attention, the FFN width 4d. */
static bp_graph_t* transformer_block(int64_t d) {
  char* text = malloc(8192);
  if (text == NULL) exit(1);
  int n = 0;
  n += snprintf(text + n, 8192 - (size_t)n, "graph transformer_block\nsym S\ninput x : f32[1, S, %lld]\n", (long long)d);
  const char* vec[] = {"ln1_w", "ln1_b", "bq", "bk", "bv", "bo", "ln2_w", "ln2_b", "b2"};
  for (int i = 0; i < 9; ++i) {
    n += snprintf(text + n, 8192 - (size_t)n, "const %s : f32[%lld] = uniform(seed=%d, lo=-0.1, hi=0.1)\n", vec[i],
                  (long long)d, i + 1);
  }
  const char* mat[] = {"wq", "wk", "wv", "wo"};
  for (int i = 0; i < 4; ++i) {
    n += snprintf(text + n, 8192 - (size_t)n, "const %s : f32[%lld, %lld] = uniform(seed=%d, lo=-0.03, hi=0.03)\n",
                  mat[i], (long long)d, (long long)d, i + 20);
  }
  n += snprintf(text + n, 8192 - (size_t)n,
                "const w1 : f32[%lld, %lld] = uniform(seed=30, lo=-0.03, hi=0.03)\n"
                "const b1 : f32[%lld] = uniform(seed=31, lo=-0.01, hi=0.01)\n"
                "const w2 : f32[%lld, %lld] = uniform(seed=32, lo=-0.015, hi=0.015)\n"
                "n1, m1, r1 = layer_norm(x, ln1_w, ln1_b) {normalized_rank=1, normalized_shape=[%lld], eps=1e-05}\n"
                "q = linear(n1, wq, bq)\nk = linear(n1, wk, bk)\nv = linear(n1, wv, bv)\n"
                "q4 = view(q) {sizes=[1, -1, %lld, 64]}\nk4 = view(k) {sizes=[1, -1, %lld, 64]}\n"
                "v4 = view(v) {sizes=[1, -1, %lld, 64]}\n"
                "qh = permute(q4) {dims=[0, 2, 1, 3]}\nkh = permute(k4) {dims=[0, 2, 1, 3]}\n"
                "vh = permute(v4) {dims=[0, 2, 1, 3]}\n"
                "ah = scaled_dot_product_attention(qh, kh, vh, _) {is_causal=1}\n"
                "at = permute(ah) {dims=[0, 2, 1, 3]}\nac = contiguous(at)\na = view(ac) {sizes=[1, -1, %lld]}\n"
                "o = linear(a, wo, bo)\nx2 = add(x, o)\n"
                "n2, m2, r2 = layer_norm(x2, ln2_w, ln2_b) {normalized_rank=1, normalized_shape=[%lld], eps=1e-05}\n"
                "h = linear(n2, w1, b1)\ng = gelu(h)\nf = linear(g, w2, b2)\ny = add(x2, f)\noutput y\n",
                (long long)(4 * d), (long long)d, (long long)(4 * d), (long long)d, (long long)(4 * d), (long long)d,
                (long long)(d / 64), (long long)(d / 64), (long long)(d / 64), (long long)d, (long long)d);
  bp_graph_t* g = NULL;
  BPB_CHECK(bp_graph_parse(text, (size_t)n, &g));
  free(text);
  return g;
}

/* A chain of `nodes` elementwise ops over [64, 64] with a few side branches. */
static bp_graph_t* long_chain(int nodes) {
  bp_graph_t* g = NULL;
  BPB_CHECK(bp_graph_create("chain", &g));
  int64_t dims[2] = {64, 64};
  uint32_t x, cur;
  BPB_CHECK(bp_graph_add_input(g, "x", BP_DTYPE_F32, 2, dims, &x));
  cur = x;
  static const uint32_t ops[] = {BP_OP_relu, BP_OP_sigmoid, BP_OP_tanh, BP_OP_neg, BP_OP_abs};
  for (int i = 0; i < nodes; ++i) {
    uint32_t out;
    if (i % 7 == 6) {
      uint32_t ins[2] = {cur, x};
      BPB_CHECK(bp_graph_add_node(g, BP_OP_add, ins, 2, NULL, NULL, &out, 1));
    } else {
      BPB_CHECK(bp_graph_add_node(g, ops[i % 5], &cur, 1, NULL, NULL, &out, 1));
    }
    cur = out;
  }
  BPB_CHECK(bp_graph_add_output(g, cur));
  BPB_CHECK(bp_graph_infer(g));
  return g;
}

/* ---- the eager baseline ---- */
typedef struct eager_run {
  const bp_graph_t* g;
  bp_tensor_t** vals; /* inputs and constants set beforehand; node outputs per run */
  uint32_t* uses;     /* readers per value (graph outputs count one) */
  uint32_t* left;
} eager_run_t;

static void eager_prepare(bpb_ctx_t* ctx, eager_run_t* e, const bp_graph_t* g, bp_tensor_t* const* inputs,
                          uint32_t num_inputs) {
  uint32_t nv = bp_graph_value_count(g);
  e->g = g;
  e->vals = calloc(nv, sizeof(bp_tensor_t*));
  e->uses = calloc(nv, sizeof(uint32_t));
  e->left = calloc(nv, sizeof(uint32_t));
  for (uint32_t v = 0; v < nv; ++v) {
    bp_graph_value_info_t vi = {.struct_size = sizeof(vi)};
    BPB_CHECK(bp_graph_value_info(g, v, &vi));
    if (vi.kind == BP_GRAPH_VALUE_CONSTANT) e->vals[v] = bpb_tensor_random(ctx, vi.rank, vi.dims, 100 + v);
  }
  for (uint32_t i = 0; i < num_inputs; ++i) {
    uint32_t in;
    BPB_CHECK(bp_graph_input(g, i, &in));
    e->vals[in] = inputs[i];
    bp_tensor_retain(inputs[i]);
  }
  for (uint32_t n = 0; n < bp_graph_node_count(g); ++n) {
    bp_graph_node_info_t ni = {.struct_size = sizeof(ni)};
    BPB_CHECK(bp_graph_node_info(g, n, &ni));
    for (uint32_t i = 0; i < ni.num_inputs; ++i) {
      if (ni.inputs[i] != BP_GRAPH_NO_VALUE) e->uses[ni.inputs[i]]++;
    }
  }
  for (uint32_t k = 0; k < bp_graph_output_count(g); ++k) {
    uint32_t v;
    BPB_CHECK(bp_graph_output(g, k, &v));
    e->uses[v]++;
  }
}

static bp_status_t eager_once(bpb_ctx_t* ctx, void* user) {
  eager_run_t* e = user;
  const bp_graph_t* g = e->g;
  uint32_t nv = bp_graph_value_count(g);
  memcpy(e->left, e->uses, sizeof(uint32_t) * nv);
  for (uint32_t n = 0; n < bp_graph_node_count(g); ++n) {
    bp_graph_node_info_t ni = {.struct_size = sizeof(ni)};
    BPB_CHECK(bp_graph_node_info(g, n, &ni));
    const bp_tensor_t* in[16];
    bp_tensor_t* out[4] = {0};
    for (uint32_t i = 0; i < ni.num_inputs; ++i) in[i] = ni.inputs[i] == BP_GRAPH_NO_VALUE ? NULL : e->vals[ni.inputs[i]];
    bp_status_t st = ni.op_id >= BP_GRAPH_VIEW_OP(0)
                         ? bp_graph_view_run(ctx->stream, ni.op_id - BP_GRAPH_VIEW_OP(0), ni.attrs, in[0], &out[0])
                         : bp_op_run(ctx->stream, ni.op_id, in, ni.num_inputs, ni.attrs, out, ni.num_outputs);
    if (st != BP_OK) return st;
    for (uint32_t k = 0; k < ni.num_outputs; ++k) {
      if (e->uses[ni.outputs[k]] == 0) bp_tensor_release(out[k]); /* nobody reads it (mean, rstd) */
      else e->vals[ni.outputs[k]] = out[k];
    }
    for (uint32_t i = 0; i < ni.num_inputs; ++i) {
      uint32_t v = ni.inputs[i];
      if (v == BP_GRAPH_NO_VALUE) continue;
      bp_graph_value_info_t vi = {.struct_size = sizeof(vi)};
      BPB_CHECK(bp_graph_value_info(g, v, &vi));
      if (vi.kind == BP_GRAPH_VALUE_NODE && --e->left[v] == 0) {
        bp_tensor_release(e->vals[v]);
        e->vals[v] = NULL;
      }
    }
  }
  for (uint32_t k = 0; k < bp_graph_output_count(g); ++k) {
    uint32_t v;
    BPB_CHECK(bp_graph_output(g, k, &v));
    bp_tensor_release(e->vals[v]);
    e->vals[v] = NULL;
  }
  return BP_OK;
}

static void eager_release(eager_run_t* e) {
  for (uint32_t v = 0; v < bp_graph_value_count(e->g); ++v) bp_tensor_release(e->vals[v]);
  free(e->vals);
  free(e->uses);
  free(e->left);
}

typedef struct compiled_run {
  bp_graph_exec_t* x;
  const bp_tensor_t* in[2];
  uint32_t num_in;
} compiled_run_t;

static bp_status_t compiled_once(bpb_ctx_t* ctx, void* user) {
  (void)ctx;
  compiled_run_t* c = user;
  bp_tensor_t* out = NULL;
  bp_status_t st = bp_graph_exec_run(c->x, c->in, c->num_in, &out, 1);
  bp_tensor_release(out);
  return st;
}

static bp_graph_compile_options_t one_device(bpb_ctx_t* ctx, const int64_t* sym) {
  bp_graph_compile_options_t o;
  memset(&o, 0, sizeof(o));
  o.struct_size = sizeof(o);
  o.devices = &ctx->device;
  o.num_devices = 1;
  o.symbol_values = sym;
  o.num_symbol_values = sym ? 1 : 0;
  return o;
}

static void bench_transformer(bpb_ctx_t* ctx) {
  int64_t d = ctx->quick ? 256 : 1024, s = ctx->quick ? 64 : 512;
  bp_graph_t* g = transformer_block(d);
  bp_graph_compile_options_t o = one_device(ctx, &s);
  bp_graph_exec_t *x = NULL, *xu = NULL;
  bp_status_t st = bp_graph_compile(ctx->context, g, &o, &x);
  if (bpb_unsupported(st, "graph: transformer block")) {
    bp_graph_release(g);
    return;
  }
  /* The same compile without fused ops, regions and extra streams: what they add. */
  bp_graph_compile_options_t op = o;
  op.flags = BP_GRAPH_NO_FUSE | BP_GRAPH_NO_REGIONS | BP_GRAPH_ONE_STREAM;
  bp_graph_exec_t* xp = NULL;
  BPB_CHECK(bp_graph_compile(ctx->context, g, &op, &xp));
  int64_t dims[3] = {1, s, d};
  bp_tensor_t* in = bpb_tensor_random(ctx, 3, dims, 7);
  compiled_run_t c = {x, {in}, 1}, cp = {xp, {in}, 1};
  eager_run_t e;
  eager_prepare(ctx, &e, g, &in, 1);
  /* Interleaved: a compiled and an eager measurement per round, medians. */
  double tc[BPB_MAX_REPS], te[BPB_MAX_REPS], tp[BPB_MAX_REPS];
  int reps = ctx->reps;
  /* Warm-up rounds, as the harness's: the arenas' pages, and the malloc
   * heaps of the threads that run oneDNN, which grow by a few MiB a run
   * (first-touch page faults) until its buffers of every size fit. */
  for (int w = 0; w < BPB_WARMUP_RUNS; w++) {
    BPB_CHECK(compiled_once(ctx, &c));
    BPB_CHECK(compiled_once(ctx, &cp));
    BPB_CHECK(eager_once(ctx, &e));
    BPB_CHECK(bp_stream_synchronize(ctx->stream));
  }
  for (int r = 0; r < reps; ++r) {
    double t0 = bpb_now();
    BPB_CHECK(compiled_once(ctx, &c));
    tc[r] = bpb_now() - t0;
    t0 = bpb_now();
    BPB_CHECK(eager_once(ctx, &e));
    BPB_CHECK(bp_stream_synchronize(ctx->stream));
    te[r] = bpb_now() - t0;
    t0 = bpb_now();
    BPB_CHECK(compiled_once(ctx, &cp));
    tp[r] = bpb_now() - t0;
    if (getenv("BP_BENCH_ROUNDS")) /* each round, for warm-up and drift */
      fprintf(stderr, "transformer round %d: compiled %.1f ms, eager %.1f ms, compiled plain %.1f ms\n", r, tc[r] * 1e3,
              te[r] * 1e3, tp[r] * 1e3);
  }
  double mc = bpb_median(tc, reps), me = bpb_median(te, reps), mp = bpb_median(tp, reps);
  char name[160];
  snprintf(name, sizeof(name), "graph: transformer block d=%lld seq=%lld f32, compiled vs eager", (long long)d, (long long)s);
  bpb_add_figure(&(bpb_figure_t){name, "runs/s", 1.0 / mc, 1.0 / me, "the same ops run eagerly", 1.5, 0});
  snprintf(name, sizeof(name), "graph: transformer block d=%lld seq=%lld f32, compiled vs compiled plain", (long long)d,
           (long long)s);
  bpb_add_figure(&(bpb_figure_t){name, "runs/s", 1.0 / mc, 1.0 / mp, "no fused ops, regions or extra streams", 0, 0});
  /* Peak memory of the intermediates, planned against one buffer each. */
  o.flags = BP_GRAPH_NO_MEMPLAN;
  BPB_CHECK(bp_graph_compile(ctx->context, g, &o, &xu));
  bp_graph_exec_stats_t sp = {.struct_size = sizeof(sp)}, su = {.struct_size = sizeof(su)};
  BPB_CHECK(bp_graph_exec_get_stats(x, &sp));
  BPB_CHECK(bp_graph_exec_get_stats(xu, &su));
  snprintf(name, sizeof(name), "graph: transformer block peak memory, planned (%% of one buffer each)");
  bpb_add_figure(&(bpb_figure_t){name, "%", 100.0 * (double)sp.peak_bytes / (double)su.peak_bytes, 100.0,
                                 "every intermediate its own buffer", 50, 1});
  eager_release(&e);
  bp_tensor_release(in);
  bp_graph_exec_release(x);
  bp_graph_exec_release(xu);
  bp_graph_exec_release(xp);
  bp_graph_release(g);
}

static void bench_compile_cache_load(bpb_ctx_t* ctx) {
  int nodes = ctx->quick ? 200 : 1000;
  bp_graph_t* g = long_chain(nodes);
  bp_graph_compile_options_t o = one_device(ctx, NULL);
  double tcomp[BPB_MAX_REPS], tload[BPB_MAX_REPS];
  int reps = ctx->reps;
  char path[256];
  snprintf(path, sizeof(path), "/tmp/bp_bench_graph_%d.bpx", (int)getpid());
  bp_graph_exec_t* x = NULL;
  bp_status_t st = bp_graph_compile(ctx->context, g, &o, &x);
  if (bpb_unsupported(st, "graph: compile")) {
    bp_graph_release(g);
    return;
  }
  BPB_CHECK(bp_graph_exec_save(x, path));
  bp_graph_exec_release(x);
  for (int r = 0; r < reps; ++r) {
    double t0 = bpb_now();
    BPB_CHECK(bp_graph_compile(ctx->context, g, &o, &x));
    tcomp[r] = bpb_now() - t0;
    bp_graph_exec_release(x);
    t0 = bpb_now();
    BPB_CHECK(bp_graph_exec_load(ctx->context, path, &x));
    tload[r] = bpb_now() - t0;
    bp_graph_exec_release(x);
  }
  remove(path);
  double mcomp = bpb_median(tcomp, reps), mload = bpb_median(tload, reps);
  /* One run of the compiled graph, the context for the compile time. */
  int64_t dims[2] = {64, 64};
  bp_tensor_t* in = bpb_tensor_random(ctx, 2, dims, 3);
  BPB_CHECK(bp_graph_compile(ctx->context, g, &o, &x));
  compiled_run_t c = {x, {in}, 1};
  BPB_CHECK(compiled_once(ctx, &c));
  double trun = bpb_time(ctx, compiled_once, &c);
  char name[160];
  snprintf(name, sizeof(name), "graph: compile a %d-node graph", nodes);
  bpb_add_figure(&(bpb_figure_t){name, "ms", mcomp * 1e3, trun * 1e3, "one run of it", 50, 1});
  snprintf(name, sizeof(name), "graph: load a saved %d-node executable vs compile it", nodes);
  bpb_add_figure(&(bpb_figure_t){name, "loads/s", 1.0 / mload, 1.0 / mcomp, "compiles/s", 10, 0});
  /* A cache hit: guards checked, the executable found, nothing compiled. */
  bp_graph_cache_t* cache = NULL;
  BPB_CHECK(bp_graph_cache_create(ctx->context, g, &o, &cache));
  bp_graph_exec_t* found = NULL;
  const bp_tensor_t* ins[1] = {in};
  BPB_CHECK(bp_graph_cache_lookup(cache, ins, 1, &found)); /* the compile */
  double th[BPB_MAX_REPS];
  enum { LOOKUPS = 10000 };
  for (int r = 0; r < reps; ++r) {
    double t0 = bpb_now();
    for (int i = 0; i < LOOKUPS; ++i) BPB_CHECK(bp_graph_cache_lookup(cache, ins, 1, &found));
    th[r] = (bpb_now() - t0) / LOOKUPS;
  }
  bp_graph_cache_stats_t cs = {.struct_size = sizeof(cs)};
  BPB_CHECK(bp_graph_cache_get_stats(cache, &cs));
  if (cs.compiles != 1) {
    fprintf(stderr, "bp-bench: graph: the cache compiled %llu times\n", (unsigned long long)cs.compiles);
    exit(1);
  }
  bpb_add_figure(&(bpb_figure_t){"graph: guarded cache hit (no compile)", "us", bpb_median(th, reps) * 1e6,
                                 mcomp * 1e6, "a compile", 10, 1});
  bp_graph_cache_release(cache);
  bp_tensor_release(in);
  bp_graph_exec_release(x);
  bp_graph_release(g);
}

/* The 8-op chain of the regions part (min(max(|(relu(x*y + 0.5) - y) * x|, x), 2))
 * as a graph: what the compiler makes of it (one program through the
 * plugin's claim) against the same ops run eagerly. */
static void bench_chain(bpb_ctx_t* ctx) {
  int64_t n = ctx->quick ? (int64_t)1 << 20 : (int64_t)16 << 20;
  char text[1024];
  int len = snprintf(text, sizeof(text),
                     "graph chain8\ninput x : f32[%lld]\ninput y : f32[%lld]\n"
                     "a = mul(x, y)\nb = add(a, _) {flags=1, scalar=0.5}\nc = relu(b)\nd = sub(c, y)\n"
                     "e = mul(d, x)\nf = abs(e)\ng = maximum(f, x)\nh = minimum(g, _) {flags=1, scalar=2.0}\n"
                     "output h\n", (long long)n, (long long)n);
  bp_graph_t* g = NULL;
  BPB_CHECK(bp_graph_parse(text, (size_t)len, &g));
  bp_graph_compile_options_t o = one_device(ctx, NULL);
  bp_graph_exec_t* x = NULL;
  bp_status_t st = bp_graph_compile(ctx->context, g, &o, &x);
  if (bpb_unsupported(st, "graph: 8-op chain")) {
    bp_graph_release(g);
    return;
  }
  int64_t dims[1] = {n};
  bp_tensor_t* in[2] = {bpb_tensor_random(ctx, 1, dims, 1), bpb_tensor_random(ctx, 1, dims, 2)};
  compiled_run_t c = {x, {in[0], in[1]}, 2};
  eager_run_t e;
  eager_prepare(ctx, &e, g, in, 2);
  double tc[BPB_MAX_REPS], te[BPB_MAX_REPS];
  BPB_CHECK(compiled_once(ctx, &c));
  BPB_CHECK(eager_once(ctx, &e));
  BPB_CHECK(bp_stream_synchronize(ctx->stream));
  for (int r = 0; r < ctx->reps; ++r) {
    double t0 = bpb_now();
    BPB_CHECK(compiled_once(ctx, &c));
    tc[r] = bpb_now() - t0;
    t0 = bpb_now();
    BPB_CHECK(eager_once(ctx, &e));
    BPB_CHECK(bp_stream_synchronize(ctx->stream));
    te[r] = bpb_now() - t0;
  }
  bp_graph_exec_stats_t sx = {.struct_size = sizeof(sx)};
  BPB_CHECK(bp_graph_exec_get_stats(x, &sx));
  char name[160];
  snprintf(name, sizeof(name), "graph: 8-op chain %lldM f32 compiled (%u region%s) vs eager", (long long)(n >> 20),
           sx.num_regions, sx.num_regions == 1 ? "" : "s");
  bpb_add_figure(&(bpb_figure_t){name, "runs/s", 1.0 / bpb_median(tc, ctx->reps), 1.0 / bpb_median(te, ctx->reps),
                                 "the same ops run eagerly", 5.0, 0});
  eager_release(&e);
  bp_tensor_release(in[0]);
  bp_tensor_release(in[1]);
  bp_graph_exec_release(x);
  bp_graph_release(g);
}

void bpb_graph_compiler(bpb_ctx_t* ctx) {
  bench_chain(ctx);
  bench_transformer(ctx);
  bench_compile_cache_load(ctx);
}
