/* The passes and executables on the CPU backend (BP_CPU_DEVICES=2): dead
 * code, common subexpressions, constant folding, memory planning (reuse and
 * in place), placement (memory limits spread a graph over two devices,
 * pins, errors naming nodes), copies, reruns; every compiled result
 * compared with the eager reference. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "backplane/graph.h"
#include "graph_fixture.h"

static bp_graph_t* parse(const char* text) { return fx_parse(text); }

static bp_tensor_t* input_f32(uint32_t rank, const int64_t* dims, uint32_t seed) {
  int64_t n = 1;
  for (uint32_t i = 0; i < rank; ++i) n *= dims[i];
  float* data = malloc(sizeof(float) * (size_t)n);
  uint32_t s = seed * 2654435761u + 1;
  for (int64_t i = 0; i < n; ++i) {
    s = s * 1664525u + 1013904223u;
    data[i] = (float)((s >> 8) & 0xFFFF) / 32768.0f - 1.0f;
  }
  bp_tensor_t* t = NULL;
  assert_int_equal(bp_tensor_create(g_cpu0, BP_DTYPE_F32, rank, dims, &t), BP_OK);
  assert_int_equal(bp_tensor_write(g_s0, t, data, sizeof(float) * (uint64_t)n), BP_OK);
  free(data);
  return t;
}

static void expect_close(const bp_tensor_t* got, const bp_tensor_t* want) {
  assert_int_equal(bp_tensor_numel(got), bp_tensor_numel(want));
  assert_int_equal(bp_tensor_dtype(got), BP_DTYPE_F32);
  int64_t n = bp_tensor_numel(got);
  float* a = malloc(sizeof(float) * (size_t)n + 1);
  float* b = malloc(sizeof(float) * (size_t)n + 1);
  bp_stream_t* s = NULL;
  assert_int_equal(bp_stream_create(bp_tensor_device(got), NULL, &s), BP_OK);
  assert_int_equal(bp_tensor_read(s, got, a, sizeof(float) * (uint64_t)n), BP_OK);
  assert_int_equal(bp_tensor_read(g_s0, want, b, sizeof(float) * (uint64_t)n), BP_OK);
  for (int64_t i = 0; i < n; ++i) {
    if (!(fabsf(a[i] - b[i]) <= 1e-5f + 1e-4f * fabsf(b[i]))) fail_msg("element %lld: %g vs eager %g", (long long)i, a[i], b[i]);
  }
  bp_stream_release(s);
  free(a);
  free(b);
}

/* Compiles, runs twice (fresh inputs the second time), checks against eager. */
static bp_graph_exec_t* compile_and_check(bp_graph_t* g, const bp_graph_compile_options_t* o, uint32_t rank,
                                          const int64_t* dims) {
  bp_graph_exec_t* x = NULL;
  if (bp_graph_compile(g_ctx, g, o, &x) != BP_OK) fail_msg("compile: %s", bp_status_message());
  for (uint32_t run = 0; run < 2; ++run) {
    bp_tensor_t* in = input_f32(rank, dims, run + 1);
    bp_tensor_t* out = NULL;
    bp_tensor_t* ref = NULL;
    if (bp_graph_exec_run(x, (const bp_tensor_t* const*)&in, 1, &out, 1) != BP_OK) fail_msg("run: %s", bp_status_message());
    if (bp_graph_run_eager(g_s0, g, (const bp_tensor_t* const*)&in, 1, &ref, 1) != BP_OK) fail_msg("eager: %s", bp_status_message());
    expect_close(out, ref);
    bp_tensor_release(out);
    bp_tensor_release(ref);
    bp_tensor_release(in);
  }
  return x;
}

static bp_graph_exec_stats_t stats_of(const bp_graph_exec_t* x) {
  bp_graph_exec_stats_t s = {.struct_size = sizeof(s)};
  assert_int_equal(bp_graph_exec_get_stats(x, &s), BP_OK);
  return s;
}

static bp_graph_compile_options_t opts_cpu0(void) {
  static bp_device_t* devs[1];
  devs[0] = g_cpu0;
  return fx_opts(devs, 1);
}

static void test_dce_cse_fold(void** state) {
  (void)state;
  /* unused: dead; r2 duplicates r1; k = exp(c) folds to a constant. */
  bp_graph_t* g = parse(
      "input x : f32[4, 8]\n"
      "const c : f32[8] = uniform(seed=1, lo=-1.0, hi=1.0)\n"
      "unused = tanh(x)\n"
      "r1 = relu(x)\n"
      "r2 = relu(x)\n"
      "k = exp(c)\n"
      "s = add(r1, r2)\n"
      "y = mul(s, k)\n"
      "output y\n");
  int64_t dims[2] = {4, 8};
  bp_graph_compile_options_t o = opts_cpu0();
  bp_graph_exec_t* x = compile_and_check(g, &o, 2, dims);
  bp_graph_exec_stats_t s = stats_of(x);
  assert_int_equal(s.num_nodes, 3); /* relu, add, mul */
  char* text = NULL;
  assert_int_equal(bp_graph_print(bp_graph_exec_graph(x), &text, NULL), BP_OK);
  assert_null(strstr(text, "tanh"));
  assert_null(strstr(text, "exp("));
  assert_null(strstr(text, "r2 = relu"));
  assert_non_null(strstr(text, "s = add(r1, r1)"));
  assert_non_null(strstr(text, "const k : f32[8] = values("));
  bp_graph_text_free(text);
  bp_graph_exec_release(x);
  /* The same with the passes off keeps every node (a mutation check of the flags' effect). */
  o.flags = BP_GRAPH_NO_DCE | BP_GRAPH_NO_CSE | BP_GRAPH_NO_FOLD;
  x = compile_and_check(g, &o, 2, dims);
  assert_int_equal(stats_of(x).num_nodes, 6);
  bp_graph_exec_release(x);
  bp_graph_release(g);
}

static const char* k_chain =
    "input x : f32[64, 256]\n"
    "a = relu(x)\n"
    "b = tanh(a)\n" /* not sigmoid: a * sigmoid(a) is silu's pattern */
    "c = mul(a, b)\n"
    "d = tanh(c)\n"
    "e = exp(d)\n"
    "f = neg(e)\n"
    "y = sum(f) {flags=2}\n"
    "output y\n";

static void test_memplan_reuse_and_inplace(void** state) {
  (void)state;
  bp_graph_t* g = parse(k_chain);
  int64_t dims[2] = {64, 256};
  const uint64_t buf = 64 * 256 * 4;
  bp_graph_compile_options_t o = opts_cpu0();
  /* With regions the elementwise chain and the sum are one reduction
   * prologue: no intermediate has a buffer. */
  bp_graph_exec_t* x = compile_and_check(g, &o, 2, dims);
  bp_graph_exec_stats_t fused = stats_of(x);
  bp_graph_exec_release(x);
  assert_int_equal(fused.num_regions, 1);
  assert_int_equal(fused.num_steps, 1);
  assert_int_equal(fused.unplanned_bytes, 0);
  assert_int_equal(fused.peak_bytes, 0);
  /* Node by node: planning and in-place reuse. */
  o.flags = BP_GRAPH_NO_REGIONS;
  x = compile_and_check(g, &o, 2, dims);
  bp_graph_exec_stats_t planned = stats_of(x);
  bp_graph_exec_release(x);
  o.flags = BP_GRAPH_NO_MEMPLAN | BP_GRAPH_NO_REGIONS;
  x = compile_and_check(g, &o, 2, dims);
  bp_graph_exec_stats_t unplanned = stats_of(x);
  bp_graph_exec_release(x);
  /* Six intermediates of buf bytes; a and b live together at most (c, d, e, f reuse). */
  assert_int_equal(unplanned.unplanned_bytes, 6 * buf);
  assert_int_equal(unplanned.peak_bytes, 6 * buf);
  assert_int_equal(planned.unplanned_bytes, 6 * buf);
  assert_int_equal(planned.peak_bytes, 2 * buf);
  bp_graph_release(g);
}

static void test_memory_limit_spreads_over_devices(void** state) {
  (void)state;
  /* A chain of matmuls whose weights and activations exceed one device's limit. */
  bp_graph_t* g = parse(
      "input x : f32[128, 128]\n"
      "const w1 : f32[128, 128] = uniform(seed=1, lo=-0.1, hi=0.1)\n"
      "const w2 : f32[128, 128] = uniform(seed=2, lo=-0.1, hi=0.1)\n"
      "const w3 : f32[128, 128] = uniform(seed=3, lo=-0.1, hi=0.1)\n"
      "const w4 : f32[128, 128] = uniform(seed=4, lo=-0.1, hi=0.1)\n"
      "h1 = mm(x, w1) @l1\n"
      "h2 = mm(h1, w2) @l2\n"
      "h3 = mm(h2, w3) @l3\n"
      "h4 = mm(h3, w4) @l4\n"
      "output h4\n");
  int64_t dims[2] = {128, 128};
  bp_device_t* devs[2] = {g_cpu0, g_cpu1};
  bp_graph_compile_options_t o;
  memset(&o, 0, sizeof(o));
  o.struct_size = sizeof(o);
  o.devices = devs;
  o.num_devices = 2;
  o.flags = BP_GRAPH_NO_ISLANDS;
  o.memory_limit_bytes = 4 * 128 * 128 * 4 + 4096; /* two weights and two activations per device */
  bp_graph_exec_t* x = compile_and_check(g, &o, 2, dims);
  bp_graph_exec_stats_t s = stats_of(x);
  assert_int_equal(s.num_devices, 2);
  assert_true(s.num_copies >= 1);
  char* json = NULL;
  assert_int_equal(bp_graph_exec_report(x, BP_GRAPH_REPORT_JSON, &json), BP_OK);
  assert_non_null(strstr(json, "\"device\": \"cpu:1\""));
  assert_non_null(strstr(json, "the only device with memory left"));
  bp_graph_text_free(json);
  bp_graph_exec_release(x);
  /* Too small for anything: the error names the node. */
  o.memory_limit_bytes = 1024;
  assert_int_equal(bp_graph_compile(g_ctx, g, &o, &x), BP_RESOURCE_EXHAUSTED);
  assert_non_null(strstr(bp_status_message(), "node 'l1'"));
  bp_graph_release(g);
}

static void test_pins_and_copies(void** state) {
  (void)state;
  bp_graph_t* g = parse(k_chain);
  int64_t dims[2] = {64, 256};
  bp_device_t* devs[2] = {g_cpu0, g_cpu1};
  bp_graph_pin_t pins[1] = {{"nosuch", g_cpu1}};
  bp_graph_compile_options_t o;
  memset(&o, 0, sizeof(o));
  o.struct_size = sizeof(o);
  o.devices = devs;
  o.num_devices = 2;
  o.pins = pins;
  o.num_pins = 1;
  /* Name the tanh node and pin it to cpu:1: copies in and out, same results. */
  bp_graph_t* g2 = parse(
      "input x : f32[64, 256]\n"
      "a = relu(x)\n"
      "d = tanh(a) @mid\n"
      "e = exp(d)\n"
      "output e\n");
  pins[0].node_name = "mid";
  o.flags = BP_GRAPH_NO_ISLANDS;
  bp_graph_exec_t* x = compile_and_check(g2, &o, 2, dims);
  bp_graph_exec_stats_t s = stats_of(x);
  /* One copy in (a to cpu:1); exp then costs less where its input is. */
  assert_int_equal(s.num_devices, 2);
  assert_int_equal(s.num_copies, 1);
  assert_int_equal(s.copy_bytes, 64 * 256 * 4);
  bp_graph_exec_release(x);
  /* With islands on, the pinned node stays where it is pinned. */
  o.flags = 0;
  x = compile_and_check(g2, &o, 2, dims);
  assert_int_equal(stats_of(x).num_copies, 1);
  bp_graph_exec_release(x);
  /* A pin to a device outside the compile's list is an error naming the node. */
  bp_device_t* one[1] = {g_cpu0};
  o.devices = one;
  o.num_devices = 1;
  assert_int_equal(bp_graph_compile(g_ctx, g2, &o, &x), BP_UNSUPPORTED);
  assert_non_null(strstr(bp_status_message(), "node 'mid'"));
  /* forbid-fallback without a preferred device is refused. */
  o.num_pins = 0;
  o.flags = BP_GRAPH_FORBID_FALLBACK;
  assert_int_equal(bp_graph_compile(g_ctx, g2, &o, &x), BP_INVALID_ARGUMENT);
  bp_graph_release(g2);
  bp_graph_release(g);
}

static void test_symbols_and_bad_inputs(void** state) {
  (void)state;
  bp_graph_t* g = parse(
      "sym B\n"
      "input x : f32[B, 16]\n"
      "const w : f32[16, 4] = uniform(seed=9, lo=-0.5, hi=0.5)\n"
      "y = mm(x, w)\n"
      "z = relu(y)\n"
      "output z\n");
  bp_graph_compile_options_t o = opts_cpu0();
  bp_graph_exec_t* x = NULL;
  /* Symbols must be bound. */
  assert_int_equal(bp_graph_compile(g_ctx, g, &o, &x), BP_INVALID_ARGUMENT);
  /* ... to a size whose bytes fit in int64: 2^58 rows of 64 bytes do not. */
  int64_t b = (int64_t)1 << 58;
  o.symbol_values = &b;
  o.num_symbol_values = 1;
  assert_int_equal(bp_graph_compile(g_ctx, g, &o, &x), BP_INVALID_ARGUMENT);
  assert_non_null(strstr(bp_status_message(), "input 'x' holds more than 2^63 bytes with the symbols' values"));
  assert_null(x);
  b = 5;
  int64_t dims[2] = {5, 16};
  x = compile_and_check(g, &o, 2, dims);
  /* A run with another size is refused, naming the input. */
  int64_t other[2] = {6, 16};
  bp_tensor_t* in = input_f32(2, other, 3);
  bp_tensor_t* out = NULL;
  assert_int_equal(bp_graph_exec_run(x, (const bp_tensor_t* const*)&in, 1, &out, 1), BP_FAILED_PRECONDITION);
  assert_non_null(strstr(bp_status_message(), "input 'x' is f32[6,16], compiled for f32[5,16]"));
  assert_null(out);
  assert_int_equal(bp_graph_exec_run(x, NULL, 1, &out, 1), BP_INVALID_ARGUMENT);
  assert_int_equal(bp_graph_exec_run(x, (const bp_tensor_t* const*)&in, 2, &out, 1), BP_INVALID_ARGUMENT);
  bp_tensor_release(in);
  bp_graph_exec_release(x);
  bp_graph_release(g);
}

static void test_fuse_epilogue_and_add_norm(void** state) {
  (void)state;
  bp_graph_t* g = parse(
      "input x : f32[8, 32]\n"
      "const w : f32[64, 32] = uniform(seed=1, lo=-0.2, hi=0.2)\n"
      "const b : f32[64] = uniform(seed=2, lo=-0.1, hi=0.1)\n"
      "const w2 : f32[32, 64] = uniform(seed=3, lo=-0.2, hi=0.2)\n"
      "const lw : f32[32] = uniform(seed=4, lo=0.9, hi=1.1)\n"
      "const lb : f32[32] = uniform(seed=5, lo=-0.1, hi=0.1)\n"
      "h = linear(x, w, b) @fc1\n"
      "a = gelu(h) @act\n"
      "o = linear(a, w2, _) @fc2\n"
      "s = add(x, o) @res\n"
      "n, m, r = layer_norm(s, lw, lb) {normalized_rank=1, normalized_shape=[32], eps=1e-05} @ln\n"
      "y = mul(n, s)\n"
      "output y\n");
  int64_t dims[2] = {8, 32};
  bp_graph_compile_options_t o = opts_cpu0();
  o.flags = BP_GRAPH_NO_REGIONS; /* the fused-op rewrites alone (regions: test_graph_regions) */
  bp_graph_exec_t* x = compile_and_check(g, &o, 2, dims);
  bp_graph_exec_stats_t st = stats_of(x);
  assert_int_equal(st.num_regions, 2);
  assert_int_equal(st.num_nodes, 4); /* fc1+act, fc2, res+ln, mul */
  char* json = NULL;
  assert_int_equal(bp_graph_exec_report(x, BP_GRAPH_REPORT_JSON, &json), BP_OK);
  assert_non_null(strstr(json, "\"kind\": \"epilogue\", \"nodes\": [\"fc1\", \"act\"]"));
  assert_non_null(strstr(json, "\"kind\": \"pattern\", \"nodes\": [\"res\", \"ln\"], \"ops\": [\"add\", \"layer_norm\"], \"as\": \"add_layer_norm\""));
  bp_graph_text_free(json);
  bp_graph_exec_release(x);
  o.flags = BP_GRAPH_NO_FUSE | BP_GRAPH_NO_REGIONS;
  x = compile_and_check(g, &o, 2, dims);
  assert_int_equal(stats_of(x).num_regions, 0);
  assert_int_equal(stats_of(x).num_nodes, 6);
  bp_graph_exec_release(x);
  bp_graph_release(g);
  /* Not fusable: the linear's output has a second reader; the norm's mean is read. */
  g = parse(
      "input x : f32[8, 32]\n"
      "const w : f32[32, 32] = uniform(seed=1, lo=-0.2, hi=0.2)\n"
      "h = linear(x, w, _)\n"
      "a = relu(h)\n"
      "s = add(a, h)\n"
      "n, m, r = layer_norm(s, _, _) {normalized_rank=1, normalized_shape=[32], eps=1e-05}\n"
      "y = mul(n, m)\n"
      "output y\n");
  o.flags = BP_GRAPH_NO_REGIONS;
  x = compile_and_check(g, &o, 2, dims);
  assert_int_equal(stats_of(x).num_regions, 0);
  bp_graph_exec_release(x);
  bp_graph_release(g);
}

/* Every decomposition in the registry against the undecomposed op (eager). */
static void test_decompositions(void** state) {
  (void)state;
  bp_graph_t* g = parse(
      "input x : f32[4, 24]\n"
      "const t1 : f32[24] = uniform(seed=1, lo=-2.0, hi=2.0)\n"
      "const t2 : f32[4, 24] = uniform(seed=2, lo=-2.0, hi=2.0)\n"
      "a = silu(x) @s\n"
      "b = mish(a) @m\n"
      "c = hardsigmoid(b) @hs\n"
      "d = hardswish(x) @hw\n"
      "e = addcmul(c, t1, t2) {alpha=0.75} @ac\n"
      "f = add(d, e)\n"
      "y = log_softmax(f) {dim=1} @ls\n"
      "output y\n");
  int64_t dims[2] = {4, 24};
  bp_graph_compile_options_t o = opts_cpu0();
  o.flags = BP_GRAPH_DECOMPOSE_ALL | BP_GRAPH_NO_FOLD;
  bp_graph_exec_t* x = compile_and_check(g, &o, 2, dims);
  char* json = NULL;
  assert_int_equal(bp_graph_exec_report(x, BP_GRAPH_REPORT_JSON, &json), BP_OK);
  assert_non_null(strstr(json, "\"decomposed\": 6"));
  assert_null(strstr(json, "\"op\": \"silu\""));
  assert_null(strstr(json, "\"op\": \"log_softmax\""));
  assert_non_null(strstr(json, "\"name\": \"ls.1\", \"op\": \"logsumexp\""));
  bp_graph_text_free(json);
  bp_graph_exec_release(x);
  /* Without the flag the CPU runs every op itself: nothing is decomposed. */
  o.flags = 0;
  x = compile_and_check(g, &o, 2, dims);
  assert_int_equal(stats_of(x).num_nodes, 7);
  bp_graph_exec_release(x);
  bp_graph_release(g);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_dce_cse_fold),
      cmocka_unit_test(test_memplan_reuse_and_inplace),
      cmocka_unit_test(test_memory_limit_spreads_over_devices),
      cmocka_unit_test(test_pins_and_copies),
      cmocka_unit_test(test_symbols_and_bad_inputs),
      cmocka_unit_test(test_fuse_epilogue_and_add_norm),
      cmocka_unit_test(test_decompositions),
  };
  return cmocka_run_group_tests(tests, fx_setup, fx_teardown);
}
