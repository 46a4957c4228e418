/* The canonicalization pass (compiler/passes/canonicalize.c): each rewrite
 * on a graph compiled for cpu:0, its results against eager execution of the
 * original graph, and the same compile with BP_GRAPH_NO_CANONICALIZE to
 * show what the pass changed. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include <cmocka.h>
#include <math.h>

#include "graph_fixture.h"

static bp_tensor_t* input_f32(uint32_t rank, const int64_t* dims, uint64_t seed) {
  bp_tensor_t* t = NULL;
  assert_int_equal(bp_tensor_create(g_cpu0, BP_DTYPE_F32, rank, dims, &t), BP_OK);
  size_t n = (size_t)bp_tensor_numel(t);
  float* h = malloc(sizeof(float) * n + 4);
  for (size_t i = 0; i < n; ++i) h[i] = (float)sin((double)(i * 7 + seed * 13)) * 2.0f;
  assert_int_equal(bp_tensor_write(g_s0, t, h, sizeof(float) * n), BP_OK);
  assert_int_equal(bp_stream_synchronize(g_s0), BP_OK);
  free(h);
  return t;
}

/* Compiles g for cpu:0 with `flags`, runs it and eager on one input and
 * requires equal outputs (exactly: the rewrites keep every number). */
static bp_graph_exec_t* compile_check(const bp_graph_t* g, uint32_t flags) {
  static bp_device_t* devs[1];
  devs[0] = g_cpu0;
  bp_graph_compile_options_t o = fx_opts(devs, 1);
  o.flags = flags | BP_GRAPH_NO_REGIONS; /* ops node by node: what the pass changed shows in the node count */
  bp_graph_exec_t* x = NULL;
  if (bp_graph_compile(g_ctx, g, &o, &x) != BP_OK) fail_msg("compile: %s", bp_status_message());
  int64_t dims[2] = {8, 16};
  bp_tensor_t* in = input_f32(2, dims, 5);
  bp_tensor_t* out = NULL;
  bp_tensor_t* ref = NULL;
  if (bp_graph_exec_run(x, (const bp_tensor_t* const*)&in, 1, &out, 1) != BP_OK) fail_msg("run: %s", bp_status_message());
  if (bp_graph_run_eager(g_s0, g, (const bp_tensor_t* const*)&in, 1, &ref, 1) != BP_OK) fail_msg("eager: %s", bp_status_message());
  assert_int_equal(bp_tensor_dtype(out), bp_tensor_dtype(ref));
  double* a = fx_host(out);
  double* b = fx_host(ref);
  for (int64_t i = 0; i < bp_tensor_numel(ref); ++i) {
    if (a[i] != b[i]) fail_msg("element %lld: compiled %.9g, eager %.9g", (long long)i, a[i], b[i]);
  }
  free(a);
  free(b);
  bp_tensor_release(out);
  bp_tensor_release(ref);
  bp_tensor_release(in);
  return x;
}

static uint32_t live_nodes(const bp_graph_exec_t* x) {
  bp_graph_exec_stats_t s = {.struct_size = sizeof(s)};
  assert_int_equal(bp_graph_exec_get_stats(x, &s), BP_OK);
  return s.num_nodes;
}

static int report_has(const bp_graph_exec_t* x, const char* what) {
  char* json = NULL;
  assert_int_equal(bp_graph_exec_report(x, BP_GRAPH_REPORT_JSON, &json), BP_OK);
  int has = strstr(json, what) != NULL;
  bp_graph_text_free(json);
  return has;
}

static void test_identity_copies(void** state) {
  (void)state;
  bp_graph_t* g = fx_parse(
      "input x : f32[8, 16]\n"
      "c = clone(x)\n"
      "r = relu(c)\n"
      "k = to_copy(r) {dtype=f32}\n"
      "y = mul(k, _) {flags=1, scalar=1}\n"
      "output y\n");
  bp_graph_exec_t* x = compile_check(g, 0);
  assert_int_equal(live_nodes(x), 1); /* relu */
  assert_true(report_has(x, "\"canonicalized\": 3"));
  char* text = NULL;
  assert_int_equal(bp_graph_print(bp_graph_exec_graph(x), &text, NULL), BP_OK);
  assert_null(strstr(text, "clone("));
  assert_null(strstr(text, "to_copy("));
  bp_graph_text_free(text);
  bp_graph_exec_release(x);
  x = compile_check(g, BP_GRAPH_NO_CANONICALIZE);
  assert_int_equal(live_nodes(x), 4);
  bp_graph_exec_release(x);
  bp_graph_release(g);
}

/* Copies that change something stay: another dtype, a scalar other than 1. */
static void test_real_copies_stay(void** state) {
  (void)state;
  bp_graph_t* g = fx_parse(
      "input x : f32[8, 16]\n"
      "k = to_copy(x) {dtype=f64}\n"
      "y = mul(k, _) {flags=1, scalar=2}\n"
      "output y\n");
  bp_graph_exec_t* x = compile_check(g, 0);
  assert_int_equal(live_nodes(x), 2);
  assert_true(report_has(x, "\"canonicalized\": 0"));
  bp_graph_exec_release(x);
  bp_graph_release(g);
}

/* add(a, b) and add(b, a) meet in CSE once their operands are in order;
 * an add with alpha (not commutative) keeps its order. */
static void test_commutative_order_for_cse(void** state) {
  (void)state;
  bp_graph_t* g = fx_parse(
      "input x : f32[8, 16]\n"
      "a = relu(x)\n"
      "b = tanh(x)\n"
      "s1 = add(a, b)\n"
      "s2 = add(b, a)\n"
      "m1 = maximum(b, a)\n"
      "m2 = maximum(a, b)\n"
      "p = mul(s1, s2)\n"
      "q = mul(m1, m2)\n"
      "y = add(p, q)\n"
      "output y\n");
  bp_graph_exec_t* x = compile_check(g, 0);
  assert_true(report_has(x, "\"merged\": 2"));
  assert_int_equal(live_nodes(x), 7);
  bp_graph_exec_release(x);
  x = compile_check(g, BP_GRAPH_NO_CANONICALIZE);
  assert_true(report_has(x, "\"merged\": 0"));
  assert_int_equal(live_nodes(x), 9);
  bp_graph_exec_release(x);
  bp_graph_release(g);
  g = fx_parse(
      "input x : f32[8, 16]\n"
      "a = relu(x)\n"
      "b = tanh(x)\n"
      "s1 = add(a, b) {alpha=2.0}\n"
      "s2 = add(b, a) {alpha=2.0}\n"
      "y = sub(s1, s2)\n"
      "output y\n");
  x = compile_check(g, 0);
  assert_true(report_has(x, "\"merged\": 0"));
  assert_int_equal(live_nodes(x), 5);
  bp_graph_exec_release(x);
  bp_graph_release(g);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_identity_copies),
      cmocka_unit_test(test_real_copies_stay),
      cmocka_unit_test(test_commutative_order_for_cse),
  };
  return cmocka_run_group_tests(tests, fx_setup, fx_teardown);
}
