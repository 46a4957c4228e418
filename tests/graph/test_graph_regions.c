/* Regions compiled through the CPU plugin's exec table by the graph
 * compiler: claims into convex regions, elementwise programs with several
 * outputs, matmul epilogues, a refusal that splits a region, the run order
 * when an unrelated node sits between a region's nodes, saved executables
 * with their regions' bytes (and a corrupt region blob recompiled, not
 * trusted). Every run is compared with eager execution. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <unistd.h>
#define XXH_INLINE_ALL /* xxHash header only: nothing to link */
#include <xxhash.h>

#include <cmocka.h>
#include <math.h>

#include "graph_fixture.h"
#include "region_checks.h"

/* An elementwise chain whose middle value escapes: one program, two outputs. */
static void test_ew_program_multi_output(void** state) {
  (void)state;
  bp_graph_t* g = fx_parse(
      "input x : f32[64, 96]\n"
      "a = relu(x) @a\n"
      "b = sigmoid(a) @b\n"
      "c = mul(x, b) @c\n" /* not a * sigmoid(a): that is silu's pattern */
      "d = tanh(c) @d\n"
      "e = exp(d) @e\n"
      "s = sum(c) {flags=2} @s\n"
      "output e\n"
      "output s\n");
  int64_t dims[2] = {64, 96};
  bp_graph_exec_t* x = compile_cpu0(g, 0);
  check_runs(x, g, 2, dims);
  bp_graph_exec_stats_t st = stats_of(x);
  assert_int_equal(st.num_regions, 1);
  assert_int_equal(st.num_steps, 2); /* the program, then the sum */
  char* json = report(x);
  assert_non_null(strstr(json, "\"kind\": \"ew_program\", \"region\": 0, \"nodes\": [\"a\", \"b\", \"c\", \"d\", \"e\"]"));
  assert_non_null(strstr(json, "\"inputs\": 1, \"outputs\": 2")); /* c escapes to the sum, e is the graph's */
  bp_graph_text_free(json);
  bp_graph_exec_release(x);
  /* Without regions: five steps more, the same results. */
  x = compile_cpu0(g, BP_GRAPH_NO_REGIONS);
  check_runs(x, g, 2, dims);
  assert_int_equal(stats_of(x).num_regions, 0);
  assert_int_equal(stats_of(x).num_steps, 6);
  bp_graph_exec_release(x);
  bp_graph_release(g);
}

/* linear + residual add + tanh: an epilogue region; the relu that feeds
 * both the linear and the add stays out (joining it would not be convex). */
static void test_epilogue_and_convexity(void** state) {
  (void)state;
  bp_graph_t* g = fx_parse(
      "input x : f32[16, 32]\n"
      "const w : f32[32, 32] = uniform(seed=3, lo=-0.2, hi=0.2)\n"
      "const bias : f32[32] = uniform(seed=4, lo=-0.1, hi=0.1)\n"
      "a = relu(x) @a\n"
      "h = linear(a, w, bias) @fc\n"
      "c = add(a, h) @res\n"
      "y = tanh(c) @t\n"
      "output y\n");
  int64_t dims[2] = {16, 32};
  bp_graph_exec_t* x = compile_cpu0(g, 0);
  check_runs(x, g, 2, dims);
  char* json = report(x);
  assert_non_null(strstr(json, "\"kind\": \"epilogue\", \"region\": 0, \"nodes\": [\"fc\", \"res\", \"t\"]"));
  assert_int_equal(count_of(json, "\"as\": \"compiled region\""), 1);
  bp_graph_text_free(json);
  assert_int_equal(stats_of(x).num_steps, 2); /* relu alone, then the region */
  bp_graph_exec_release(x);
  bp_graph_release(g);
}

/* Ten elementwise values that all escape: a program over the CPU's limit
 * of 8 outputs is refused, the refusal is recorded and the region split. */
static void test_refusal_splits(void** state) {
  (void)state;
  char text[2048];
  int n = snprintf(text, sizeof(text), "input x : f32[8, 16]\n");
  const char* ops[] = {"relu", "neg", "tanh", "abs", "sigmoid"};
  const char* prev = "x";
  char names[10][8];
  for (int i = 0; i < 10; ++i) {
    snprintf(names[i], sizeof(names[i]), "v%d", i);
    n += snprintf(text + n, sizeof(text) - (size_t)n, "%s = %s(%s) @n%d\n", names[i], ops[i % 5], prev, i);
    prev = names[i];
  }
  for (int i = 0; i < 10; ++i) n += snprintf(text + n, sizeof(text) - (size_t)n, "output v%d\n", i);
  bp_graph_t* g = fx_parse(text);
  int64_t dims[2] = {8, 16};
  bp_graph_exec_t* x = compile_cpu0(g, 0);
  check_runs(x, g, 2, dims);
  char* json = report(x);
  assert_non_null(strstr(json, "\"refused\": [\n    {\"device\": \"cpu:0\", \"first_node\": 0, \"nodes\": 10"));
  assert_non_null(strstr(json, "over the CPU's limits"));
  assert_int_equal(count_of(json, "\"as\": \"compiled region\""), 2); /* two halves of five */
  assert_non_null(strstr(json, "\"nodes\": [\"n0\", \"n1\", \"n2\", \"n3\", \"n4\"]"));
  assert_non_null(strstr(json, "\"nodes\": [\"n5\", \"n6\", \"n7\", \"n8\", \"n9\"]"));
  bp_graph_text_free(json);
  assert_int_equal(stats_of(x).num_regions, 2);
  bp_graph_exec_release(x);
  bp_graph_release(g);
}

/* A region whose nodes are not adjacent in index order: the softmax
 * between them feeds the region's last node and the sum reads its first
 * value; the run order puts the softmax before the region and the region
 * before the sum. */
static void test_run_order(void** state) {
  (void)state;
  bp_graph_t* g = fx_parse(
      "input x : f32[32, 32]\n"
      "a = relu(x) @a\n"
      "p = softmax(x) {dim=-1} @between\n"
      "m = sum(a) {flags=2} @after\n"
      "b = neg(a) @b\n"
      "c = mul(b, p) @c\n"
      "output m\n"
      "output c\n");
  int64_t dims[2] = {32, 32};
  bp_graph_exec_t* x = compile_cpu0(g, 0);
  check_runs(x, g, 2, dims);
  char* json = report(x);
  assert_non_null(strstr(json, "\"nodes\": [\"a\", \"b\", \"c\"]"));
  bp_graph_text_free(json);
  assert_int_equal(stats_of(x).num_steps, 3);
  bp_graph_exec_release(x);
  bp_graph_release(g);
}

/* Two independent branches on one device: the second gets a stream of its
 * own, the join waits for it; results equal eager (and the one-stream
 * compile), and a saved executable keeps the streams. */
static void test_two_streams(void** state) {
  (void)state;
  bp_graph_t* g = fx_parse(
      "input x : f32[64, 64]\n"
      "const w : f32[64, 64] = uniform(seed=7, lo=-0.2, hi=0.2)\n"
      "p = softmax(x) {dim=-1} @left\n"
      "h = mm(x, w) @right\n"
      "q = log_softmax(h) {dim=-1} @right2\n"
      "y = add(p, q) @join\n"
      "output y\n");
  int64_t dims[2] = {64, 64};
  bp_graph_exec_t* x = compile_cpu0(g, 0);
  for (int i = 0; i < 3; ++i) check_runs(x, g, 2, dims);
  char* json = report(x);
  assert_non_null(strstr(json, "\"streams\": 2"));
  assert_non_null(strstr(json, "\"name\": \"left\", \"op\": \"softmax\", \"device\": \"cpu:0\", \"reason\": \"the only device compiled for\", \"stream\": 0"));
  assert_non_null(strstr(json, "\"name\": \"right\", \"op\": \"mm\", \"device\": \"cpu:0\", \"reason\": \"the only device compiled for\", \"stream\": 1"));
  assert_non_null(strstr(json, "\"name\": \"right2\", \"op\": \"log_softmax\", \"device\": \"cpu:0\", \"reason\": \"the only device compiled for\", \"stream\": 1"));
  assert_non_null(strstr(json, "\"name\": \"join\", \"op\": \"add\", \"device\": \"cpu:0\", \"reason\": \"the only device compiled for\", \"stream\": 0"));
  bp_graph_text_free(json);
  bp_graph_exec_stats_t two = stats_of(x);
  bp_graph_exec_t* l = save_and_load(x, "streams");
  check_runs(l, g, 2, dims);
  json = report(l);
  assert_non_null(strstr(json, "\"streams\": 2"));
  bp_graph_text_free(json);
  bp_graph_exec_release(l);
  /* One stream: the same results; the buffers the second stream touched
   * were kept apart for the whole run, so planning with one stream is
   * never larger. */
  x = compile_cpu0(g, BP_GRAPH_ONE_STREAM);
  check_runs(x, g, 2, dims);
  json = report(x);
  assert_non_null(strstr(json, "\"streams\": 1"));
  assert_null(strstr(json, "\"stream\": 1"));
  bp_graph_text_free(json);
  assert_true(stats_of(x).peak_bytes <= two.peak_bytes);
  bp_graph_exec_release(x);
  bp_graph_release(g);
}

/* Saved with its regions' bytes, loaded without compiling them; a region
 * blob with a flipped byte (the file's own checksum made right again) is
 * rejected by the region loader and the region compiled again. */
static void test_aot_regions(void** state) {
  (void)state;
  bp_graph_t* g = fx_parse(
      "input x : f32[16, 32]\n"
      "const w : f32[32, 32] = uniform(seed=5, lo=-0.2, hi=0.2)\n"
      "a = sigmoid(x) @a\n"
      "b = mul(a, a) @b\n" /* not a * x: that is silu's pattern */
      "h = linear(b, w, _) @fc\n"
      "y = add(h, b) @res\n"
      "output y\n");
  int64_t dims[2] = {16, 32};
  bp_graph_exec_t* x = compile_cpu0(g, 0);
  assert_int_equal(stats_of(x).num_regions, 2);
  char path[128];
  snprintf(path, sizeof(path), "/tmp/bp_test_graph_regions_%d.bpx", (int)getpid());
  assert_int_equal(bp_graph_exec_save(x, path), BP_OK);
  bp_graph_exec_release(x);
  bp_graph_exec_t* l = NULL;
  if (bp_graph_exec_load(g_ctx, path, &l) != BP_OK) fail_msg("load: %s", bp_status_message());
  check_runs(l, g, 2, dims);
  char* json = report(l);
  assert_int_equal(count_of(json, "\"source\": \"loaded\""), 2);
  bp_graph_text_free(json);
  bp_graph_exec_release(l);
  /* Corrupt the second region's blob past the core's header. */
  size_t n = 0;
  uint8_t* file = fx_read_file(path, &n);
  uint8_t* last = NULL;
  for (size_t i = 0; i + 8 <= n; ++i) {
    if (memcmp(file + i, "BPREGN01", 8) == 0) last = file + i;
  }
  assert_non_null(last);
  assert_true((size_t)(last - file) + 200 < n);
  last[150] ^= 0x5a; /* inside the device name field: the region's checksum catches it */
  uint64_t h = (uint64_t)XXH3_64bits(file + 40, n - 40); /* the file's checksum again */
  memcpy(file + 32, &h, 8);
  FILE* f = fopen(path, "wb");
  assert_non_null(f);
  assert_int_equal(fwrite(file, 1, n, f), n);
  fclose(f);
  free(file);
  if (bp_graph_exec_load(g_ctx, path, &l) != BP_OK) fail_msg("load of the corrupt region: %s", bp_status_message());
  check_runs(l, g, 2, dims);
  json = report(l);
  assert_int_equal(count_of(json, "\"source\": \"loaded\""), 1);
  assert_int_equal(count_of(json, "\"source\": \"recompiled\""), 1);
  bp_graph_text_free(json);
  bp_graph_exec_release(l);
  remove(path);
  bp_graph_release(g);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_ew_program_multi_output),
      cmocka_unit_test(test_epilogue_and_convexity),
      cmocka_unit_test(test_refusal_splits),
      cmocka_unit_test(test_run_order),
      cmocka_unit_test(test_aot_regions),
      cmocka_unit_test(test_two_streams),
  };
  return cmocka_run_group_tests(tests, fx_setup, fx_teardown);
}
