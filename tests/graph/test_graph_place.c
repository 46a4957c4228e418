/* Placement across plugins: two test plugins (the template under the names
 * fastdev and slowdev, declaring 1000x different throughput) and the CPU
 * plugin. The cheaper device wins whatever the device order; an op only one
 * device runs goes there, with copies in and out and results equal to
 * eager; forbid-fallback lists the nodes the preferred device refuses. */
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

static bp_device_t *g_fast, *g_slow, *g_est;

static int setup(void** state) {
  (void)state;
  bp_context_options_t o = {.struct_size = sizeof(o), .flags = BP_CONTEXT_NO_DISCOVERY};
  if (bp_context_create(&o, &g_ctx) != BP_OK) return -1;
  const char* pdir = getenv("BACKPLANE_TEST_PLUGIN_DIR");
  char path[1024];
  snprintf(path, sizeof(path), "%s/libbp_plugin_cpu.so", pdir ? pdir : ".");
  if (bp_context_register_plugin(g_ctx, path, NULL) != BP_OK) return -1;
  snprintf(path, sizeof(path), "%s/libbp_graph_fastdev.so", GRAPH_COST_DIR);
  if (bp_context_register_plugin(g_ctx, path, NULL) != BP_OK) return -1;
  snprintf(path, sizeof(path), "%s/libbp_graph_slowdev.so", GRAPH_COST_DIR);
  if (bp_context_register_plugin(g_ctx, path, NULL) != BP_OK) return -1;
  snprintf(path, sizeof(path), "%s/libbp_graph_estdev.so", GRAPH_COST_DIR);
  if (bp_context_register_plugin(g_ctx, path, NULL) != BP_OK) return -1;
  if (bp_context_find_device(g_ctx, "estdev:0", &g_est) != BP_OK) return -1;
  if (bp_context_find_device(g_ctx, "fastdev:0", &g_fast) != BP_OK) return -1;
  if (bp_context_find_device(g_ctx, "slowdev:0", &g_slow) != BP_OK) return -1;
  if (bp_context_find_device(g_ctx, "cpu:0", &g_cpu0) != BP_OK) return -1;
  return bp_stream_create(g_cpu0, NULL, &g_s0) == BP_OK ? 0 : -1;
}

static bp_graph_t* parse(const char* text) { return fx_parse(text); }
static bp_graph_compile_options_t opts(bp_device_t** devs, uint32_t n) { return fx_opts(devs, n); }

/* The device the report gives node `name`. */
static void expect_node_on(const bp_graph_exec_t* x, const char* name, const char* device) {
  char* json = NULL;
  assert_int_equal(bp_graph_exec_report(x, BP_GRAPH_REPORT_JSON, &json), BP_OK);
  char want[256];
  snprintf(want, sizeof(want), "\"name\": \"%s\", \"op\"", name);
  const char* at = strstr(json, want);
  if (at == NULL) fail_msg("no node %s in %s", name, json);
  char dev[128];
  snprintf(dev, sizeof(dev), "\"device\": \"%s\"", device);
  const char* end = strchr(at, '}');
  const char* d = strstr(at, dev);
  if (d == NULL || d > end) fail_msg("node %s is not on %s: %s", name, device, json);
  bp_graph_text_free(json);
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
    bp_graph_exec_t* x = NULL;
    if (bp_graph_compile(g_ctx, g, &o, &x) != BP_OK) fail_msg("compile: %s", bp_status_message());
    expect_node_on(x, "r1", "fastdev:0");
    expect_node_on(x, "a1", "fastdev:0");
    bp_graph_exec_stats_t s = {.struct_size = sizeof(s)};
    assert_int_equal(bp_graph_exec_get_stats(x, &s), BP_OK);
    assert_int_equal(s.num_devices, 1);
    assert_int_equal(s.num_copies, 0);
    /* The report warns that slowdev, requested, runs nothing. */
    char* text = NULL;
    assert_int_equal(bp_graph_exec_report(x, BP_GRAPH_REPORT_TEXT, &text), BP_OK);
    assert_non_null(strstr(text, "warning: slowdev:0 was requested but runs 0 of 2 nodes"));
    bp_graph_text_free(text);
    bp_graph_exec_release(x);
  }
  /* Preferring the slow device overrides the cost. */
  bp_device_t* devs[2] = {g_fast, g_slow};
  bp_graph_compile_options_t o = opts(devs, 2);
  o.prefer_device = g_slow;
  bp_graph_exec_t* x = NULL;
  assert_int_equal(bp_graph_compile(g_ctx, g, &o, &x), BP_OK);
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
  bp_graph_exec_t* x = NULL;
  if (bp_graph_compile(g_ctx, g, &o, &x) != BP_OK) fail_msg("compile: %s", bp_status_message());
  expect_node_on(x, "r1", "estdev:0");
  char* json = NULL;
  assert_int_equal(bp_graph_exec_report(x, BP_GRAPH_REPORT_JSON, &json), BP_OK);
  assert_non_null(strstr(json, "plugin estimate"));
  bp_graph_text_free(json);
  bp_graph_exec_release(x);
  bp_graph_release(g);
}

static void test_op_only_one_device_runs(void** state) {
  (void)state;
  /* mm and softmax: only the CPU plugin; relu and add: all three. */
  bp_graph_t* g = parse(
      "input x : f32[16, 32]\n"
      "const w : f32[32, 8] = uniform(seed=5, lo=-0.3, hi=0.3)\n"
      "a = relu(x) @r1\n"
      "h = mm(a, w) @proj\n"
      "p = softmax(h) {dim=-1} @sm\n"
      "q = add(p, p) @a1\n"
      "output q\n");
  bp_device_t* devs[2] = {g_fast, g_cpu0};
  bp_graph_compile_options_t o = opts(devs, 2);
  o.flags = BP_GRAPH_NO_ISLANDS;
  bp_graph_exec_t* x = NULL;
  if (bp_graph_compile(g_ctx, g, &o, &x) != BP_OK) fail_msg("compile: %s", bp_status_message());
  expect_node_on(x, "proj", "cpu:0");
  expect_node_on(x, "sm", "cpu:0");
  char* json = NULL;
  assert_int_equal(bp_graph_exec_report(x, BP_GRAPH_REPORT_JSON, &json), BP_OK);
  assert_non_null(strstr(json, "\"name\": \"proj\", \"op\": \"mm\", \"device\": \"cpu:0\", \"reason\": \"the only device that runs it\""));
  bp_graph_text_free(json);
  /* Run on random data (input made on cpu:0) and compare with eager. */
  float data[16 * 32];
  for (int i = 0; i < 16 * 32; ++i) data[i] = (float)((i * 37) % 101) / 50.0f - 1.0f;
  int64_t dims[2] = {16, 32};
  bp_tensor_t* in = NULL;
  assert_int_equal(bp_tensor_create(g_cpu0, BP_DTYPE_F32, 2, dims, &in), BP_OK);
  assert_int_equal(bp_tensor_write(g_s0, in, data, sizeof(data)), BP_OK);
  bp_tensor_t *out = NULL, *ref = NULL;
  if (bp_graph_exec_run(x, (const bp_tensor_t* const*)&in, 1, &out, 1) != BP_OK) fail_msg("run: %s", bp_status_message());
  assert_int_equal(bp_graph_run_eager(g_s0, g, (const bp_tensor_t* const*)&in, 1, &ref, 1), BP_OK);
  float a[16 * 8], b[16 * 8];
  bp_stream_t* s = NULL;
  assert_int_equal(bp_stream_create(bp_tensor_device(out), NULL, &s), BP_OK);
  assert_int_equal(bp_tensor_read(s, out, a, sizeof(a)), BP_OK);
  assert_int_equal(bp_tensor_read(g_s0, ref, b, sizeof(b)), BP_OK);
  for (int i = 0; i < 16 * 8; ++i) assert_true(fabsf(a[i] - b[i]) <= 1e-5f + 1e-4f * fabsf(b[i]));
  bp_stream_release(s);
  bp_tensor_release(out);
  bp_tensor_release(ref);
  bp_tensor_release(in);
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
  const char* pdir = getenv("BACKPLANE_TEST_PLUGIN_DIR");
  char path[1024];
  snprintf(path, sizeof(path), "%s/libbp_plugin_cpu.so", pdir ? pdir : ".");
  assert_int_equal(bp_context_register_plugin(ctx, path, NULL), BP_OK);
  snprintf(path, sizeof(path), "%s/libbp_graph_claimdev.so", GRAPH_COST_DIR);
  assert_int_equal(bp_context_register_plugin(ctx, path, NULL), BP_OK);
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
  bp_graph_exec_t* x = NULL;
  if (bp_graph_compile(ctx, g, &o, &x) != BP_OK) fail_msg("compile: %s", bp_status_message());
  char* json = NULL;
  assert_int_equal(bp_graph_exec_report(x, BP_GRAPH_REPORT_JSON, &json), BP_OK);
  assert_non_null(strstr(json, "{\"device\": \"claimdev:0\", \"first_node\": 0, \"nodes\": 2, \"reason\": 1, "
                               "\"message\": \"the claimed group is not convex: its nodes run alone\"}"));
  bp_graph_text_free(json);
  float data[32];
  for (int i = 0; i < 32; ++i) data[i] = (float)i / 8.0f - 2.0f;
  int64_t dims[2] = {4, 8};
  bp_stream_t* s = NULL;
  assert_int_equal(bp_stream_create(cpu, NULL, &s), BP_OK);
  bp_tensor_t *in = NULL, *out = NULL, *ref = NULL;
  assert_int_equal(bp_tensor_create(cpu, BP_DTYPE_F32, 2, dims, &in), BP_OK);
  assert_int_equal(bp_tensor_write(s, in, data, sizeof(data)), BP_OK);
  if (bp_graph_exec_run(x, (const bp_tensor_t* const*)&in, 1, &out, 1) != BP_OK) fail_msg("run: %s", bp_status_message());
  assert_int_equal(bp_graph_run_eager(s, g, (const bp_tensor_t* const*)&in, 1, &ref, 1), BP_OK);
  float a[32], b[32];
  bp_stream_t* so = NULL;
  assert_int_equal(bp_stream_create(bp_tensor_device(out), NULL, &so), BP_OK);
  assert_int_equal(bp_tensor_read(so, out, a, sizeof(a)), BP_OK);
  assert_int_equal(bp_tensor_read(s, ref, b, sizeof(b)), BP_OK);
  for (int i = 0; i < 32; ++i) assert_true(a[i] == b[i]);
  bp_stream_release(so);
  bp_stream_release(s);
  bp_tensor_release(out);
  bp_tensor_release(ref);
  bp_tensor_release(in);
  bp_graph_exec_release(x);
  bp_graph_release(g);
  bp_context_release(ctx);
}

static void test_forbid_fallback_lists_nodes(void** state) {
  (void)state;
  bp_graph_t* g = parse(
      "input x : f32[16, 32]\n"
      "const w : f32[32, 8] = uniform(seed=5, lo=-0.3, hi=0.3)\n"
      "a = relu(x) @r1\n"
      "h = mm(a, w) @proj\n"
      "p = softmax(h) {dim=-1} @sm\n"
      "output p\n");
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
  assert_int_equal(bp_graph_compile(g_ctx, g, &o, &x), BP_OK);
  expect_node_on(x, "r1", "slowdev:0");
  expect_node_on(x, "proj", "cpu:0");
  char* json = NULL;
  assert_int_equal(bp_graph_exec_report(x, BP_GRAPH_REPORT_JSON, &json), BP_OK);
  assert_non_null(strstr(json, "the only device that runs it"));
  bp_graph_text_free(json);
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
  };
  return cmocka_run_group_tests(tests, setup, fx_teardown);
}
