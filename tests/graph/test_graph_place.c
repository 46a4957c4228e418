/* Placement across plugins: two test plugins (the template under the names
 * fastdev and slowdev, declaring 1000x different throughput) and the CPU
 * plugin. The cheaper device wins whatever the device order; an op only one
 * device runs goes there, with copies in and out and results equal to
 * eager; forbid-fallback lists the nodes the preferred device refuses.
 * Graph-level claims: groupdev and refusedev (the template again) claim
 * their nodes as one group whose compiled region they estimate at 1 us,
 * under the sum of their nodes' roofline times; refusedev's claim also
 * refuses add with a reason its support query does not give. ewdev (the
 * template with mul and sigmoid) runs x * sigmoid(x) but not silu: the
 * named pattern's rewrite is undone there. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "backplane/graph.h"
#include "graph_fixture.h"

static bp_device_t *g_fast, *g_slow, *g_est, *g_group, *g_refuse, *g_ew;

/* Registers the plugin library `lib` of folder `dir` with ctx. */
static bp_status_t register_plugin(bp_context_t* ctx, const char* dir, const char* lib) {
  char path[1024];
  snprintf(path, sizeof(path), "%s/%s", dir, lib);
  return bp_context_register_plugin(ctx, path, NULL);
}

/* The folder of the CPU plugin under test. */
static const char* cpu_plugin_dir(void) {
  const char* pdir = getenv("BACKPLANE_TEST_PLUGIN_DIR");
  return pdir ? pdir : ".";
}

static int setup(void** state) {
  (void)state;
  bp_context_options_t o = {.struct_size = sizeof(o), .flags = BP_CONTEXT_NO_DISCOVERY};
  if (bp_context_create(&o, &g_ctx) != BP_OK) return -1;
  if (register_plugin(g_ctx, cpu_plugin_dir(), "libbp_plugin_cpu.so") != BP_OK) return -1;
  static const struct {
    const char* lib;
    const char* device;
    bp_device_t** dev;
  } k_devs[] = {{"libbp_graph_fastdev.so", "fastdev:0", &g_fast},
                {"libbp_graph_slowdev.so", "slowdev:0", &g_slow},
                {"libbp_graph_estdev.so", "estdev:0", &g_est},
                {"libbp_graph_groupdev.so", "groupdev:0", &g_group},
                {"libbp_graph_refusedev.so", "refusedev:0", &g_refuse},
                {"libbp_graph_ewdev.so", "ewdev:0", &g_ew}};
  for (size_t i = 0; i < sizeof(k_devs) / sizeof(k_devs[0]); ++i)
    if (register_plugin(g_ctx, GRAPH_COST_DIR, k_devs[i].lib) != BP_OK) return -1;
  for (size_t i = 0; i < sizeof(k_devs) / sizeof(k_devs[0]); ++i)
    if (bp_context_find_device(g_ctx, k_devs[i].device, k_devs[i].dev) != BP_OK) return -1;
  if (bp_context_find_device(g_ctx, "cpu:0", &g_cpu0) != BP_OK) return -1;
  return bp_stream_create(g_cpu0, NULL, &g_s0) == BP_OK ? 0 : -1;
}

static bp_graph_t* parse(const char* text) { return fx_parse(text); }
static bp_graph_compile_options_t opts(bp_device_t** devs, uint32_t n) { return fx_opts(devs, n); }

/* Compiles g for o on ctx; fails the test with the status message when the
 * compile fails. */
static bp_graph_exec_t* compile_ok(bp_context_t* ctx, const bp_graph_t* g, const bp_graph_compile_options_t* o) {
  bp_graph_exec_t* x = NULL;
  if (bp_graph_compile(ctx, g, o, &x) != BP_OK) fail_msg("compile: %s", bp_status_message());
  return x;
}

/* The report of a compile in `format` (freed by the caller with
 * bp_graph_text_free). */
static char* report(const bp_graph_exec_t* x, uint32_t format) {
  char* text = NULL;
  assert_int_equal(bp_graph_exec_report(x, format, &text), BP_OK);
  return text;
}
static char* report_json(const bp_graph_exec_t* x) { return report(x, BP_GRAPH_REPORT_JSON); }

/* 1 when the report's entry for node `name` contains `what`. */
static int node_has(const char* json, const char* name, const char* what) {
  char want[256];
  snprintf(want, sizeof(want), "\"name\": \"%s\", \"op\"", name);
  const char* at = strstr(json, want);
  if (at == NULL) return 0;
  const char* end = strstr(at, "\n");
  const char* w = strstr(at, what);
  return w != NULL && (end == NULL || w < end);
}

/* Each of the n nodes `names` has `what` in the report of x. */
static void expect_nodes_have(const bp_graph_exec_t* x, const char* const* names, int n, const char* what) {
  char* json = report_json(x);
  for (int i = 0; i < n; ++i)
    if (!node_has(json, names[i], what)) fail_msg("node %s lacks %s: %s", names[i], what, json);
  bp_graph_text_free(json);
}

/* The report of x in `format` contains `what` (present) or does not. */
static void expect_report(const bp_graph_exec_t* x, uint32_t format, const char* what, int present) {
  char* text = report(x, format);
  if ((strstr(text, what) != NULL) != present) fail_msg("the report %s %s: %s", present ? "lacks" : "has", what, text);
  bp_graph_text_free(text);
}

/* The device the report gives node `name`. */
static void expect_node_on(const bp_graph_exec_t* x, const char* name, const char* device) {
  char dev[128];
  snprintf(dev, sizeof(dev), "\"device\": \"%s\"", device);
  expect_nodes_have(x, &name, 1, dev);
}

/* Runs x on one f32 input of `dims` (made on dev, values in [-1, 1)) and
 * compares its one output (out_count elements) with the eager run of g on
 * s (a stream of dev), within f32's conformance tolerances. */
static void expect_run_equals_eager(bp_graph_exec_t* x, const bp_graph_t* g, bp_device_t* dev, bp_stream_t* s,
                                    uint32_t rank, const int64_t* dims, size_t out_count) {
  size_t count = 1;
  for (uint32_t k = 0; k < rank; ++k) count *= (size_t)dims[k];
  float* data = malloc(sizeof(float) * count);
  float* a = malloc(sizeof(float) * out_count);
  float* b = malloc(sizeof(float) * out_count);
  assert_true(data != NULL && a != NULL && b != NULL);
  for (size_t i = 0; i < count; ++i) data[i] = (float)((i * 37) % 101) / 50.0f - 1.0f;
  bp_tensor_t *in = NULL, *out = NULL, *ref = NULL;
  assert_int_equal(bp_tensor_create(dev, BP_DTYPE_F32, rank, dims, &in), BP_OK);
  assert_int_equal(bp_tensor_write(s, in, data, sizeof(float) * count), BP_OK);
  if (bp_graph_exec_run(x, (const bp_tensor_t* const*)&in, 1, &out, 1) != BP_OK) fail_msg("run: %s", bp_status_message());
  assert_int_equal(bp_graph_run_eager(s, g, (const bp_tensor_t* const*)&in, 1, &ref, 1), BP_OK);
  bp_stream_t* so = NULL;
  assert_int_equal(bp_stream_create(bp_tensor_device(out), NULL, &so), BP_OK);
  assert_int_equal(bp_tensor_read(so, out, a, sizeof(float) * out_count), BP_OK);
  assert_int_equal(bp_tensor_read(s, ref, b, sizeof(float) * out_count), BP_OK);
  for (size_t i = 0; i < out_count; ++i) {
    if (!(fabsf(a[i] - b[i]) <= 1e-5f + 1e-4f * fabsf(b[i]))) fail_msg("element %zu: %g vs eager %g", i, a[i], b[i]);
  }
  bp_stream_release(so);
  bp_tensor_release(out);
  bp_tensor_release(ref);
  bp_tensor_release(in);
  free(data);
  free(a);
  free(b);
}

/* bp_device_query_support hands the plugin the op's default attributes
 * when the caller gives none (the template reads add's flags). */
static void test_support_query_fills_default_attrs(void** state) {
  (void)state;
  int64_t n = 4;
  bp_tensor_desc_t d;
  memset(&d, 0, sizeof(d));
  d.struct_size = sizeof(d);
  d.dtype = BP_DTYPE_F32;
  d.rank = 1;
  d.sizes[0] = n;
  d.strides[0] = 1;
  const bp_tensor_desc_t* ins[2] = {&d, &d};
  const bp_tensor_desc_t* outs[1] = {&d};
  bp_op_call_t call;
  memset(&call, 0, sizeof(call));
  call.struct_size = sizeof(call);
  call.op_id = BP_OP_add;
  call.num_inputs = 2;
  call.num_outputs = 1;
  call.compute_dtype = BP_DTYPE_F32;
  call.inputs = ins;
  call.outputs = outs;
  bp_support_t s = {.struct_size = sizeof(s)};
  assert_int_equal(bp_device_query_support(g_fast, &call, &s), BP_OK);
  if (!s.supported) fail_msg("add with default attributes refused: %s", s.message);
  /* A bad struct_size in the attributes is the caller's error. */
  bp_binary_attrs_t bad = {.struct_size = 2};
  call.attrs = &bad;
  assert_int_equal(bp_device_query_support(g_fast, &call, &s), BP_INVALID_ARGUMENT);
}

static const char* k_ew =
    "input x : f32[262144]\n"
    "a = relu(x) @r1\n"
    "b = add(a, x) @a1\n"
    "output b\n";

static void test_cheaper_device_wins(void** state) {
  (void)state;
  bp_graph_t* g = parse(k_ew);
  bp_device_t* orders[2][2] = {{g_slow, g_fast}, {g_fast, g_slow}};
  for (int k = 0; k < 2; ++k) {
    bp_graph_compile_options_t o = opts(orders[k], 2);
    bp_graph_exec_t* x = compile_ok(g_ctx, g, &o);
    expect_node_on(x, "r1", "fastdev:0");
    expect_node_on(x, "a1", "fastdev:0");
    bp_graph_exec_stats_t s = {.struct_size = sizeof(s)};
    assert_int_equal(bp_graph_exec_get_stats(x, &s), BP_OK);
    assert_int_equal(s.num_devices, 1);
    assert_int_equal(s.num_copies, 0);
    /* The report warns that slowdev, requested, runs nothing. */
    expect_report(x, BP_GRAPH_REPORT_TEXT, "warning: slowdev:0 was requested but runs 0 of 2 nodes", 1);
    bp_graph_exec_release(x);
  }
  /* Preferring the slow device overrides the cost. */
  bp_device_t* devs[2] = {g_fast, g_slow};
  bp_graph_compile_options_t o = opts(devs, 2);
  o.prefer_device = g_slow;
  bp_graph_exec_t* x = compile_ok(g_ctx, g, &o);
  expect_node_on(x, "r1", "slowdev:0");
  bp_graph_exec_release(x);
  bp_graph_release(g);
}

/* A plugin's estimate wins over the roofline of its figures: estdev declares
 * the slow figures (2 ms for relu over 1 MiB by its roofline, where fastdev
 * would take 4 us plus a 110 us copy of the input) but estimates 1 us per op. */
static void test_plugin_estimate_wins(void** state) {
  (void)state;
  bp_graph_t* g = parse(k_ew);
  bp_device_t* devs[2] = {g_est, g_fast}; /* the input lives on estdev */
  bp_graph_compile_options_t o = opts(devs, 2);
  o.flags = BP_GRAPH_NO_ISLANDS;
  bp_graph_exec_t* x = compile_ok(g_ctx, g, &o);
  expect_node_on(x, "r1", "estdev:0");
  expect_report(x, BP_GRAPH_REPORT_JSON, "plugin estimate", 1);
  bp_graph_exec_release(x);
  bp_graph_release(g);
}

/* relu, then mm and softmax (which only the CPU plugin runs). */
#define K_MM_SOFTMAX                                        \
  "input x : f32[16, 32]\n"                                 \
  "const w : f32[32, 8] = uniform(seed=5, lo=-0.3, hi=0.3)\n" \
  "a = relu(x) @r1\n"                                       \
  "h = mm(a, w) @proj\n"                                    \
  "p = softmax(h) {dim=-1} @sm\n"

static void test_op_only_one_device_runs(void** state) {
  (void)state;
  /* mm and softmax: only the CPU plugin; relu and add: all three. */
  bp_graph_t* g = parse(K_MM_SOFTMAX
      "q = add(p, p) @a1\n"
      "output q\n");
  bp_device_t* devs[2] = {g_fast, g_cpu0};
  bp_graph_compile_options_t o = opts(devs, 2);
  o.flags = BP_GRAPH_NO_ISLANDS;
  bp_graph_exec_t* x = compile_ok(g_ctx, g, &o);
  expect_node_on(x, "proj", "cpu:0");
  expect_node_on(x, "sm", "cpu:0");
  expect_report(x, BP_GRAPH_REPORT_JSON, "\"name\": \"proj\", \"op\": \"mm\", \"device\": \"cpu:0\", \"reason\": \"the only device that runs it\"", 1);
  /* Run on data made on cpu:0 and compare with eager. */
  int64_t dims[2] = {16, 32};
  expect_run_equals_eager(x, g, g_cpu0, g_s0, 2, dims, 16 * 8);
  bp_graph_exec_release(x);
  bp_graph_release(g);
}

/* A plugin that claims the nodes a and c as one group while b between them
 * runs on another device: the group is not convex (a -> b -> c leaves it
 * and comes back), so the compiler drops it with that reason instead of
 * compiling it; the run equals eager. */
static void test_claim_not_convex(void** state) {
  (void)state;
  bp_context_t* ctx = NULL;
  bp_context_options_t co = {.struct_size = sizeof(co), .flags = BP_CONTEXT_NO_DISCOVERY};
  assert_int_equal(bp_context_create(&co, &ctx), BP_OK);
  assert_int_equal(register_plugin(ctx, cpu_plugin_dir(), "libbp_plugin_cpu.so"), BP_OK);
  assert_int_equal(register_plugin(ctx, GRAPH_COST_DIR, "libbp_graph_claimdev.so"), BP_OK);
  bp_device_t *claim = NULL, *cpu = NULL;
  assert_int_equal(bp_context_find_device(ctx, "claimdev:0", &claim), BP_OK);
  assert_int_equal(bp_context_find_device(ctx, "cpu:0", &cpu), BP_OK);
  bp_graph_t* g = parse(
      "input x : f32[4, 8]\n"
      "a = relu(x) @a\n"
      "b = relu(a) @b\n"
      "c = add(a, b) @c\n"
      "output c\n");
  bp_device_t* devs[2] = {claim, cpu};
  bp_graph_compile_options_t o = opts(devs, 2);
  bp_graph_pin_t pins[3] = {{"a", claim}, {"b", cpu}, {"c", claim}};
  o.pins = pins;
  o.num_pins = 3;
  bp_graph_exec_t* x = compile_ok(ctx, g, &o);
  char* json = report_json(x);
  assert_non_null(strstr(json, "{\"device\": \"claimdev:0\", \"first_node\": 0, \"nodes\": 2, \"reason\": 1, "
                               "\"message\": \"the claimed group is not convex: its nodes run alone\"}"));
  bp_graph_text_free(json);
  int64_t dims[2] = {4, 8};
  bp_stream_t* s = NULL;
  assert_int_equal(bp_stream_create(cpu, NULL, &s), BP_OK);
  expect_run_equals_eager(x, g, cpu, s, 2, dims, 32);
  bp_graph_exec_release(x);
  bp_graph_release(g);
  /* claimdev claims mm too, but its support query refuses mm alone (a
   * refused region would leave it to run as an op): not a candidate there,
   * with that reason; it runs on the CPU and the result equals eager. */
  g = parse(
      "input x : f32[4, 8]\n"
      "const w : f32[8, 8] = uniform(seed=2, lo=-0.5, hi=0.5)\n"
      "a = relu(x) @a\n"
      "h = mm(a, w) @proj\n"
      "output h\n");
  o.pins = NULL;
  o.num_pins = 0;
  x = compile_ok(ctx, g, &o);
  const char* proj = "proj";
  expect_node_on(x, proj, "cpu:0");
  expect_nodes_have(x, &proj, 1, "{\"device\": \"claimdev:0\", \"reason\": \"op: claimed, but its support query refuses it alone: ");
  expect_run_equals_eager(x, g, cpu, s, 2, dims, 32);
  bp_stream_release(s);
  bp_graph_exec_release(x);
  bp_graph_release(g);
  bp_context_release(ctx);
}

static void test_forbid_fallback_lists_nodes(void** state) {
  (void)state;
  bp_graph_t* g = parse(K_MM_SOFTMAX "output p\n");
  bp_device_t* devs[3] = {g_slow, g_fast, g_cpu0};
  bp_graph_compile_options_t o = opts(devs, 3);
  o.prefer_device = g_slow;
  o.flags = BP_GRAPH_FORBID_FALLBACK;
  bp_graph_exec_t* x = NULL;
  assert_int_equal(bp_graph_compile(g_ctx, g, &o, &x), BP_UNSUPPORTED);
  const char* m = bp_status_message();
  assert_non_null(strstr(m, "forbid-fallback: 2 nodes cannot run on slowdev:0"));
  assert_non_null(strstr(m, "node 'proj' (#1, mm): op:"));
  assert_non_null(strstr(m, "node 'sm' (#2, softmax): op:"));
  assert_null(strstr(m, "'r1'"));
  /* Without forbid-fallback the same compile falls back, saying why. */
  o.flags = 0;
  x = compile_ok(g_ctx, g, &o);
  expect_node_on(x, "r1", "slowdev:0");
  expect_node_on(x, "proj", "cpu:0");
  expect_report(x, BP_GRAPH_REPORT_JSON, "the only device that runs it", 1);
  bp_graph_exec_release(x);
  bp_graph_release(g);
}

/* A 256 KiB relu chain whose input lives on the first device. */
static const char* k_chain =
    "input x : f32[65536]\n"
    "a = relu(x) @g1\n"
    "b = relu(a) @g2\n"
    "c = relu(b) @g3\n"
    "output c\n";

/* groupdev's roofline puts each relu at 0.5 ms, fastdev's at 2 us plus a
 * 36 us copy of the input: node by node fastdev wins, but groupdev's
 * group of the three at 1 us wins whole. The run equals eager (groupdev
 * runs the chain as its compiled program). */
static void test_claimed_group_wins_whole(void** state) {
  (void)state;
  bp_graph_t* g = parse(k_chain);
  bp_device_t* devs[2] = {g_group, g_fast};
  bp_graph_compile_options_t o = opts(devs, 2);
  bp_graph_exec_t* x = compile_ok(g_ctx, g, &o);
  const char* names[3] = {"g1", "g2", "g3"};
  expect_nodes_have(x, names, 3, "\"device\": \"groupdev:0\"");
  expect_nodes_have(x, names, 3, "\"claim\": \"group\", \"group\": 0");
  char* json = report_json(x);
  assert_non_null(strstr(json, "\"reason\": \"claimed group of 3 nodes: 1.0 us"));
  assert_non_null(strstr(json, "region estimate"));
  assert_non_null(strstr(json, "{\"group\": 0, \"device\": \"groupdev:0\", \"nodes\": [\"g1\", \"g2\", \"g3\"], "
                               "\"estimated_ns\": 1000, \"cost\": \"region estimate\"}"));
  /* ... and runs as one compiled region there. */
  assert_non_null(strstr(json, "\"nodes\": [\"g1\", \"g2\", \"g3\"], \"ops\": [\"relu\", \"relu\", \"relu\"], "
                               "\"as\": \"compiled region\", \"device\": \"groupdev:0\""));
  bp_graph_text_free(json);
  int64_t dims[1] = {65536};
  expect_run_equals_eager(x, g, g_cpu0, g_s0, 1, dims, 65536);
  bp_graph_exec_release(x);
  bp_graph_release(g);
}

/* The group needs its three 256 KiB outputs at once on groupdev; under a
 * 640 KiB limit it does not fit there and is not placed there: the nodes,
 * offered one by one, go to fastdev (each fits, with the values that died
 * freed). With 64 MiB the group goes whole to groupdev. */
static void test_claimed_group_over_memory(void** state) {
  (void)state;
  bp_graph_t* g = parse(k_chain);
  bp_device_t* devs[2] = {g_group, g_fast};
  bp_graph_compile_options_t o = opts(devs, 2);
  o.memory_limit_bytes = 5u << 17; /* 640 KiB */
  bp_graph_exec_t* x = compile_ok(g_ctx, g, &o);
  const char* names[3] = {"g1", "g2", "g3"};
  expect_nodes_have(x, names, 3, "\"device\": \"fastdev:0\"");
  expect_nodes_have(x, names, 3, "\"claim\": \"node\"");
  expect_report(x, BP_GRAPH_REPORT_JSON, "\"claim\": \"group\"", 0);
  bp_graph_exec_release(x);
  o.memory_limit_bytes = 64u << 20;
  x = compile_ok(g_ctx, g, &o);
  expect_nodes_have(x, names, 3, "\"device\": \"groupdev:0\"");
  bp_graph_exec_release(x);
  bp_graph_release(g);
}

/* refusedev's claim refuses add (its support query would take it): the
 * claim's reason is the node's, in the report (JSON and text) and in the
 * forbid-fallback error. */
static void test_claim_refusal_reasons(void** state) {
  (void)state;
  bp_graph_t* g = parse(k_ew);
  bp_device_t* devs[2] = {g_refuse, g_cpu0};
  bp_graph_compile_options_t o = opts(devs, 2);
  o.prefer_device = g_refuse;
  o.flags = BP_GRAPH_FORBID_FALLBACK;
  bp_graph_exec_t* x = NULL;
  assert_int_equal(bp_graph_compile(g_ctx, g, &o, &x), BP_UNSUPPORTED);
  const char* m = bp_status_message();
  if (strstr(m, "forbid-fallback: 1 node cannot run on refusedev:0: node 'a1' (#1, add): op: refusedev: refuses add in a claim") == NULL)
    fail_msg("message: %s", m);
  o.flags = 0;
  x = compile_ok(g_ctx, g, &o);
  char* json = report_json(x);
  if (!node_has(json, "a1", "\"device\": \"cpu:0\"") ||
      !node_has(json, "a1", "\"refused_by\": [{\"device\": \"refusedev:0\", \"reason\": \"op: refusedev: refuses add in a claim\"}]"))
    fail_msg("a1: %s", json);
  assert_true(node_has(json, "r1", "\"device\": \"refusedev:0\""));
  assert_false(node_has(json, "r1", "refused_by"));
  bp_graph_text_free(json);
  expect_report(x, BP_GRAPH_REPORT_TEXT, "refused: #1 a1 by refusedev:0: op: refusedev: refuses add in a claim\n", 1);
  bp_graph_exec_release(x);
  bp_graph_release(g);
}

/* The nodes section of a report (compile time and measurements left out). */
static char* placement_of(const bp_graph_exec_t* x) {
  char* json = NULL;
  assert_int_equal(bp_graph_exec_report(x, BP_GRAPH_REPORT_JSON, &json), BP_OK);
  char* from = strstr(json, "\"nodes\": [");
  char* to = from ? strstr(from, "\"copy_bytes\"") : NULL;
  assert_non_null(to);
  *to = '\0';
  char* out = strdup(from);
  bp_graph_text_free(json);
  return out;
}

/* groupdev and refusedev claim the same group at the same cost, and the
 * graph reads only constants (no input favours the first device): a tie,
 * which goes to the earlier device of the list, and compiling again gives
 * the same placement. */
static void test_claims_deterministic(void** state) {
  (void)state;
  bp_graph_t* g = parse(
      "const x : f32[4096] = uniform(seed=3, lo=-1, hi=1)\n"
      "a = relu(x) @t1\n"
      "b = relu(a) @t2\n"
      "output b\n");
  bp_device_t* orders[2][2] = {{g_group, g_refuse}, {g_refuse, g_group}};
  const char* first[2] = {"groupdev:0", "refusedev:0"};
  for (int k = 0; k < 2; ++k) {
    bp_graph_compile_options_t o = opts(orders[k], 2);
    o.flags = BP_GRAPH_NO_FOLD;
    bp_graph_exec_t *x = compile_ok(g_ctx, g, &o), *y = compile_ok(g_ctx, g, &o);
    char* px = placement_of(x);
    char* py = placement_of(y);
    assert_string_equal(px, py);
    char want[64];
    snprintf(want, sizeof(want), "\"device\": \"%s\"", first[k]);
    char* json = report_json(x);
    if (!node_has(json, "t1", want) || !node_has(json, "t2", want) || !node_has(json, "t1", "\"claim\": \"group\""))
      fail_msg("order %d: %s", k, json);
    bp_graph_text_free(json);
    free(px);
    free(py);
    bp_graph_exec_release(x);
    bp_graph_exec_release(y);
  }
  bp_graph_release(g);
}

/* A new binding of the graph's symbols keeps the placement (a rebind, not
 * a compile): the report of the rebound executable still says which
 * claimed group each node was placed with. */
static void test_rebind_keeps_claims(void** state) {
  (void)state;
  bp_graph_t* g = parse(
      "sym N\n"
      "input x : f32[N]\n"
      "a = relu(x) @g1\n"
      "b = relu(a) @g2\n"
      "output b\n");
  bp_device_t* devs[2] = {g_group, g_fast};
  bp_graph_compile_options_t o = opts(devs, 2);
  bp_graph_cache_t* cache = NULL;
  assert_int_equal(bp_graph_cache_create(g_ctx, g, &o, &cache), BP_OK);
  int64_t sizes[2] = {65536, 4096};
  for (int k = 0; k < 2; ++k) {
    bp_tensor_t* in = NULL;
    assert_int_equal(bp_tensor_create(g_cpu0, BP_DTYPE_F32, 1, &sizes[k], &in), BP_OK);
    bp_graph_exec_t* x = NULL;
    if (bp_graph_cache_lookup(cache, (const bp_tensor_t* const*)&in, 1, &x) != BP_OK) fail_msg("lookup: %s", bp_status_message());
    char* json = report_json(x);
    if (!node_has(json, "g1", "\"device\": \"groupdev:0\"") || !node_has(json, "g2", "\"claim\": \"group\", \"group\": 0"))
      fail_msg("binding %d: %s", k, json);
    bp_graph_text_free(json);
    bp_tensor_release(in);
  }
  bp_graph_cache_stats_t st = {.struct_size = sizeof(st)};
  assert_int_equal(bp_graph_cache_get_stats(cache, &st), BP_OK);
  assert_int_equal(st.compiles, 1);
  assert_int_equal(st.rebinds, 1);
  bp_graph_cache_release(cache);
  bp_graph_release(g);
}

/* View nodes run in the core and are not offered in claims (a region
 * holds ops over dense values): the ops around one are still claimed, and
 * the view is answered by the support query. */
static void test_claims_around_views(void** state) {
  (void)state;
  bp_graph_t* g = parse(
      "input x : f32[4, 8]\n"
      "a = relu(x) @v1\n"
      "r = view(a) {sizes=[8, 4]} @rs\n"
      "b = relu(r) @v2\n"
      "output b\n");
  bp_device_t* devs[2] = {g_fast, g_cpu0};
  bp_graph_compile_options_t o = opts(devs, 2);
  bp_graph_exec_t* x = compile_ok(g_ctx, g, &o);
  char* json = report_json(x);
  if (!node_has(json, "v1", "\"claim\": \"node\"") || !node_has(json, "v2", "\"claim\": \"node\"") ||
      !node_has(json, "rs", "\"claim\": \"query\""))
    fail_msg("%s", json);
  bp_graph_text_free(json);
  expect_report(x, BP_GRAPH_REPORT_TEXT, "claim of", 0);
  int64_t dims[2] = {4, 8};
  expect_run_equals_eager(x, g, g_cpu0, g_s0, 2, dims, 32);
  bp_graph_exec_release(x);
  bp_graph_release(g);
}

/* The named patterns' undo path: the rewrite of x * sigmoid(x) into silu
 * is undone when no device of the compile runs silu (ewdev alone): the
 * graph keeps mul and sigmoid, runs them on ewdev and equals the CPU's
 * eager run. With cpu:0, which runs silu, the rewrite stays. */
static void test_pattern_undone_where_no_device_runs_it(void** state) {
  (void)state;
  bp_graph_t* g = parse("input x : f32[4096]\ns = sigmoid(x) @sig\ny = mul(x, s) @mul\noutput y\n");
  bp_device_t* devs[1] = {g_ew};
  bp_graph_compile_options_t o = opts(devs, 1);
  bp_graph_exec_t* x = NULL;
  if (bp_graph_compile(g_ctx, g, &o, &x) != BP_OK) fail_msg("compile on ewdev: %s", bp_status_message());
  expect_node_on(x, "sig", "ewdev:0");
  expect_node_on(x, "mul", "ewdev:0");
  char* json = NULL;
  assert_int_equal(bp_graph_exec_report(x, BP_GRAPH_REPORT_JSON, &json), BP_OK);
  assert_null(strstr(json, "silu"));
  bp_graph_text_free(json);
  bp_graph_exec_stats_t st = {.struct_size = sizeof(st)};
  assert_int_equal(bp_graph_exec_get_stats(x, &st), BP_OK);
  assert_int_equal(st.num_nodes, 2);
  expect_run_equals_eager(x, g, g_cpu0, g_s0, 1, (const int64_t[]){4096}, 4096);
  bp_graph_exec_release(x);
  devs[0] = g_cpu0;
  o = opts(devs, 1);
  if (bp_graph_compile(g_ctx, g, &o, &x) != BP_OK) fail_msg("compile on cpu:0: %s", bp_status_message());
  assert_int_equal(bp_graph_exec_report(x, BP_GRAPH_REPORT_JSON, &json), BP_OK);
  assert_non_null(strstr(json, "silu"));
  bp_graph_text_free(json);
  st.struct_size = sizeof(st);
  assert_int_equal(bp_graph_exec_get_stats(x, &st), BP_OK);
  assert_int_equal(st.num_nodes, 1);
  bp_graph_exec_release(x);
  bp_graph_release(g);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_support_query_fills_default_attrs),
      cmocka_unit_test(test_cheaper_device_wins),
      cmocka_unit_test(test_plugin_estimate_wins),
      cmocka_unit_test(test_op_only_one_device_runs),
      cmocka_unit_test(test_forbid_fallback_lists_nodes),
      cmocka_unit_test(test_claim_not_convex),
      cmocka_unit_test(test_claimed_group_wins_whole),
      cmocka_unit_test(test_claimed_group_over_memory),
      cmocka_unit_test(test_claim_refusal_reasons),
      cmocka_unit_test(test_claims_deterministic),
      cmocka_unit_test(test_rebind_keeps_claims),
      cmocka_unit_test(test_claims_around_views),
      cmocka_unit_test(test_pattern_undone_where_no_device_runs_it),
  };
  return cmocka_run_group_tests(tests, setup, fx_teardown);
}
