/* Reduction prologues through the CPU plugin: an elementwise chain whose
 * only reader is a sum / mean / amax / amin compiles with it as one region
 * (the chain's result never stored), over small and chunked shapes with
 * broadcast operands; a region the plugin refuses is split (the chain a
 * program, the reduction alone); chains whose values have other readers
 * are not taken; a saved executable loads its prologue regions. Every run
 * is compared with eager execution. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <unistd.h>

#include <cmocka.h>

#include "graph_fixture.h"
#include "region_checks.h"

/* sum(x*x) over everything, mean((x - exp(x))^2) over the last dim,
 * amax(abs(x)) over the last dim kept: three prologue regions, three steps. */
static void test_prologues_fused(void** state) {
  (void)state;
  bp_graph_t* g = fx_parse(
      "input x : f32[64, 96]\n"
      "sq = mul(x, x) @sq\n"
      "s = sum(sq) {flags=2} @s\n"
      "e = exp(x) @e\n"
      "d = sub(x, e) @d\n"
      "q = mul(d, d) @q\n"
      "m = mean(q) {num_dims=1, dims=[1]} @m\n"
      "a = abs(x) @ab\n"
      "mx = amax(a) {num_dims=1, dims=[-1], flags=1} @mx\n"
      "output s\n"
      "output m\n"
      "output mx\n");
  bp_graph_exec_t* x = NULL;
  char* json = compile_checked(g, 2, (const int64_t[]){64, 96}, &x);
  bp_graph_exec_stats_t st = stats_of(x);
  assert_int_equal(st.num_regions, 3);
  assert_int_equal(st.num_steps, 3);
  assert_int_equal(count_of(json, "\"kind\": \"reduction_prologue\""), 3);
  assert_non_null(strstr(json, "\"nodes\": [\"sq\", \"s\"]"));
  assert_non_null(strstr(json, "\"nodes\": [\"e\", \"d\", \"q\", \"m\"]"));
  assert_non_null(strstr(json, "\"nodes\": [\"ab\", \"mx\"]"));
  release_all(json, x, g);
}

/* Runs longer than a chunk (partials combined per output element) and
 * outputs holding many runs, with operands broadcast along leading,
 * middle and trailing dims. */
static void test_prologues_chunked(void** state) {
  (void)state;
  bp_graph_t* g = fx_parse(
      "input x : f32[4, 3, 20000]\n"
      "const w : f32[20000] = uniform(seed=7, lo=-1, hi=1)\n"
      "const b : f32[3, 1] = uniform(seed=8, lo=-0.5, hi=0.5)\n"
      "d = sub(x, w) @d\n"
      "q = mul(d, d) @q\n"
      "r = add(q, b) @r\n"
      "s = sum(r) {num_dims=2, dims=[1, 2]} @s\n"
      "t = tanh(x) @t\n"
      "u = mul(t, b) @u\n"
      "mn = amin(u) {num_dims=1, dims=[2]} @mn\n"
      "n = neg(x) @n\n"
      "nm = mean(n) {flags=2} @nm\n"
      "output s\n"
      "output mn\n"
      "output nm\n");
  bp_graph_exec_t* x = NULL;
  char* json = compile_checked(g, 3, (const int64_t[]){4, 3, 20000}, &x);
  assert_int_equal(count_of(json, "\"kind\": \"reduction_prologue\""), 3);
  assert_int_equal(stats_of(x).num_steps, 3);
  release_all(json, x, g);
}

/* sum over the leading dim: the plugin refuses (the reduced dim comes
 * before a kept one) with its reason; the chain runs as one program and
 * the sum alone. */
static void test_prologue_refusal_splits(void** state) {
  (void)state;
  bp_graph_t* g = fx_parse(
      "input x : f32[64, 96]\n"
      "a = abs(x) @a\n"
      "e = exp(a) @e\n"
      "s = sum(e) {num_dims=1, dims=[0]} @s\n"
      "output s\n");
  bp_graph_exec_t* x = NULL;
  char* json = compile_checked(g, 2, (const int64_t[]){64, 96}, &x);
  assert_non_null(strstr(json, "\"refused\": [\n    {\"device\": \"cpu:0\", \"first_node\": 0, \"nodes\": 3"));
  assert_non_null(strstr(json, "the reduced dims must come after every kept dim"));
  assert_int_equal(count_of(json, "\"kind\": \"reduction_prologue\""), 0);
  assert_non_null(strstr(json, "\"kind\": \"ew_program\", \"region\": 0, \"nodes\": [\"a\", \"e\"]"));
  bp_graph_exec_stats_t st = stats_of(x);
  assert_int_equal(st.num_regions, 1);
  assert_int_equal(st.num_steps, 2);
  release_all(json, x, g);
}

/* A value with another reader (or a graph output) stays out of the chain:
 * sq feeds the sum and tanh (no prologue); a is a graph output, so only
 * exp and mul join the amax. */
static void test_prologue_readers(void** state) {
  (void)state;
  bp_graph_t* g = fx_parse(
      "input x : f32[32, 48]\n"
      "sq = mul(x, x) @sq\n"
      "s = sum(sq) {flags=2} @s\n"
      "y = tanh(sq) @y\n"
      "a = abs(x) @a\n"
      "e = exp(a) @e\n"
      "f = mul(e, x) @f\n"
      "m = amax(f) {flags=2} @m\n"
      "output s\n"
      "output y\n"
      "output a\n"
      "output m\n");
  bp_graph_exec_t* x = NULL;
  char* json = compile_checked(g, 2, (const int64_t[]){32, 48}, &x);
  assert_int_equal(count_of(json, "\"kind\": \"reduction_prologue\""), 1);
  assert_non_null(strstr(json, "\"nodes\": [\"e\", \"f\", \"m\"]"));
  assert_null(strstr(json, "\"nodes\": [\"sq\", \"s\"]"));
  release_all(json, x, g);
}

/* Saved and loaded: the prologue region comes from its bytes. */
static void test_prologue_saved(void** state) {
  (void)state;
  bp_graph_t* g = fx_parse(
      "input x : f32[8, 4096]\n"
      "s = sigmoid(x) @s\n"
      "q = mul(s, x) @q\n"
      "m = mean(q) {num_dims=1, dims=[-1]} @m\n"
      "output m\n");
  int64_t dims[2] = {8, 4096};
  bp_graph_exec_t* l = save_and_load(compile_cpu0(g, 0), "prologue");
  check_runs(l, g, 2, dims);
  char* json = report(l);
  assert_int_equal(count_of(json, "\"source\": \"loaded\""), 1);
  assert_int_equal(count_of(json, "\"kind\": \"reduction_prologue\""), 1);
  release_all(json, l, g);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_prologues_fused),
      cmocka_unit_test(test_prologues_chunked),
      cmocka_unit_test(test_prologue_refusal_splits),
      cmocka_unit_test(test_prologue_readers),
      cmocka_unit_test(test_prologue_saved),
  };
  return cmocka_run_group_tests(tests, fx_setup, fx_teardown);
}
