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

/* Compiles `text` with and without the pass: its live node counts, and
 * the compiled graph's text holds `has` (NULL: not checked). */
static void views_case(const char* text, uint32_t live, uint32_t live_without, const char* has) {
  bp_graph_t* g = fx_parse(text);
  bp_graph_exec_t* x = compile_check(g, 0);
  char* t = NULL;
  assert_int_equal(bp_graph_print(bp_graph_exec_graph(x), &t, NULL), BP_OK);
  if (live_nodes(x) != live) fail_msg("%u live nodes, want %u:\n%s", live_nodes(x), live, t);
  if (has != NULL && strstr(t, has) == NULL) fail_msg("no '%s' in:\n%s", has, t);
  bp_graph_text_free(t);
  bp_graph_exec_release(x);
  x = compile_check(g, BP_GRAPH_NO_CANONICALIZE);
  assert_int_equal(live_nodes(x), live_without);
  bp_graph_exec_release(x);
  bp_graph_release(g);
}

/* permute(permute(x)) is one permute with the dims composed; a permute
 * and its inverse are nothing. */
static void test_permute_chains(void** state) {
  (void)state;
  views_case(
      "input x : f32[8, 16]\n"
      "a = view(x) {sizes=[2, 4, 16]}\n"
      "p1 = permute(a) {dims=[2, 0, 1]}\n"
      "p2 = permute(p1) {dims=[0, 2, 1]}\n"
      "y = relu(p2)\n"
      "output y\n",
      3, 4, "permute(a) {dims=[2, 1, 0]}");
  views_case(
      "input x : f32[8, 16]\n"
      "p1 = permute(x) {dims=[1, 0]}\n"
      "p2 = permute(p1) {dims=[-1, 0]}\n"
      "y = relu(p2)\n"
      "output y\n",
      1, 3, NULL);
}

/* view(view(x)) of a dense x is one view; a view of a strided value keeps
 * its chain (the layout may not allow it). */
static void test_view_chains(void** state) {
  (void)state;
  views_case(
      "input x : f32[8, 16]\n"
      "a = view(x) {sizes=[128]}\n"
      "b = view(a) {sizes=[4, -1]}\n"
      "y = relu(b)\n"
      "output y\n",
      2, 3, "b = view(x) {sizes=[4, -1]}");
  views_case(
      "input x : f32[8, 16]\n"
      "t = permute(x) {dims=[1, 0]}\n"
      "a = view(t) {sizes=[4, 4, 8]}\n"
      "b = view(a) {sizes=[16, 8]}\n"
      "y = relu(b)\n"
      "output y\n",
      4, 4, "b = view(a) {sizes=[16, 8]}");
}

/* squeeze(unsqueeze(x, d), d) is x; views that change nothing go. */
static void test_identity_views(void** state) {
  (void)state;
  views_case(
      "input x : f32[8, 16]\n"
      "u = unsqueeze(x) {dim=1}\n"
      "s = squeeze(u) {dim=-2}\n"
      "y = relu(s)\n"
      "output y\n",
      1, 3, NULL);
  views_case(
      "input x : f32[8, 16]\n"
      "a = view(x) {sizes=[8, 16]}\n"
      "b = slice(a) {dim=1, start=0, end=16, step=1}\n"
      "c = expand(b) {sizes=[8, -1]}\n"
      "d = squeeze(c) {dim=0}\n"
      "e = permute(d) {dims=[0, 1]}\n"
      "y = relu(e)\n"
      "output y\n",
      1, 6, NULL);
  /* A slice that drops elements, an unsqueeze: not identities. */
  views_case(
      "input x : f32[8, 16]\n"
      "b = slice(x) {dim=1, start=1, end=16, step=1}\n"
      "c = unsqueeze(b) {dim=0}\n"
      "y = relu(c)\n"
      "output y\n",
      3, 3, NULL);
}

/* contiguous of a dense value goes; of a transpose read only by GEMMs it
 * goes (the GEMM takes the transposed operand); else it is a copy. */
static void test_contiguous(void** state) {
  (void)state;
  views_case(
      "input x : f32[8, 16]\n"
      "a = view(x) {sizes=[16, 8]}\n"
      "c = contiguous(a)\n"
      "y = relu(c)\n"
      "output y\n",
      2, 2, NULL); /* without the pass, the compile front still drops it */
  views_case(
      "input x : f32[8, 16]\n"
      "t = permute(x) {dims=[1, 0]}\n"
      "c = contiguous(t)\n"
      "y = mm(x, c)\n"
      "output y\n",
      2, 3, "y = mm(x, t)");
  views_case(
      "input x : f32[8, 16]\n"
      "t = permute(x) {dims=[1, 0]}\n"
      "c = contiguous(t)\n"
      "m = mm(x, c)\n"
      "r = relu(c)\n"
      "s = sum(r) {num_dims=1, dims=[0]}\n"
      "y = add(m, s)\n"
      "output y\n",
      6, 6, "clone(t)");
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_identity_copies),
      cmocka_unit_test(test_real_copies_stay),
      cmocka_unit_test(test_commutative_order_for_cse),
      cmocka_unit_test(test_permute_chains),
      cmocka_unit_test(test_view_chains),
      cmocka_unit_test(test_identity_views),
      cmocka_unit_test(test_contiguous),
  };
  return cmocka_run_group_tests(tests, fx_setup, fx_teardown);
}
