/* The named-pattern pass (compiler/passes/patterns.c): each decomposed
 * form compiled for cpu:0 becomes its one op (the report names it, one
 * live node is left), its result equals eager execution of the
 * decomposed graph within the f32 tolerance; forms that must not match
 * (an intermediate read elsewhere, eps 0, another reduction dim, a weight
 * that is not a [D] vector, BP_GRAPH_NO_FUSE) keep their nodes. */
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
  for (size_t i = 0; i < n; ++i) h[i] = (float)sin((double)(i * 7 + seed * 13)) * 3.0f + 0.25f;
  assert_int_equal(bp_tensor_write(g_s0, t, h, sizeof(float) * n), BP_OK);
  assert_int_equal(bp_stream_synchronize(g_s0), BP_OK);
  free(h);
  return t;
}

/* Compiles `text` (input x : f32[6, 32]) for cpu:0 with `flags`, checks
 * every output against eager within 1e-5 relative + 1e-6, and returns the
 * live node count; *out_report gets the text report (free it). */
static uint32_t compile_check(const char* text, uint32_t flags, char** out_report) {
  bp_graph_t* g = fx_parse(text);
  static bp_device_t* devs[1];
  devs[0] = g_cpu0;
  bp_graph_compile_options_t o = fx_opts(devs, 1);
  o.flags = flags | BP_GRAPH_NO_REGIONS; /* node by node: the count shows what the pass did */
  bp_graph_exec_t* x = NULL;
  if (bp_graph_compile(g_ctx, g, &o, &x) != BP_OK) fail_msg("compile: %s", bp_status_message());
  int64_t dims[2] = {6, 32};
  bp_tensor_t* in = input_f32(2, dims, 3);
  uint32_t nout = bp_graph_output_count(g);
  bp_tensor_t *out[4] = {0}, *ref[4] = {0};
  if (bp_graph_exec_run(x, (const bp_tensor_t* const*)&in, 1, out, nout) != BP_OK) fail_msg("run: %s", bp_status_message());
  if (bp_graph_run_eager(g_s0, g, (const bp_tensor_t* const*)&in, 1, ref, nout) != BP_OK) {
    fail_msg("eager: %s", bp_status_message());
  }
  for (uint32_t k = 0; k < nout; ++k) {
    double* a = fx_host(out[k]);
    double* b = fx_host(ref[k]);
    for (int64_t i = 0; i < bp_tensor_numel(ref[k]); ++i) {
      if (!(fabs(a[i] - b[i]) <= 1e-5 * fabs(b[i]) + 1e-6)) {
        fail_msg("output %u element %lld: compiled %.9g, eager %.9g", k, (long long)i, a[i], b[i]);
      }
    }
    free(a);
    free(b);
    bp_tensor_release(out[k]);
    bp_tensor_release(ref[k]);
  }
  bp_graph_exec_stats_t s = {.struct_size = sizeof(s)};
  assert_int_equal(bp_graph_exec_get_stats(x, &s), BP_OK);
  assert_int_equal(bp_graph_exec_report(x, BP_GRAPH_REPORT_TEXT, out_report), BP_OK);
  bp_tensor_release(in);
  bp_graph_exec_release(x);
  bp_graph_release(g);
  return s.num_nodes;
}

static void expect_pattern(const char* text, const char* fused_as, uint32_t nodes) {
  char* report = NULL;
  uint32_t n = compile_check(text, 0, &report);
  char want[64];
  snprintf(want, sizeof(want), "-> %s (", fused_as);
  if (strstr(report, want) == NULL) fail_msg("no '%s' in the report:\n%s", want, report);
  if (n != nodes) fail_msg("%u live nodes, want %u:\n%s", n, nodes, report);
  bp_graph_text_free(report);
}

static void expect_untouched(const char* text, uint32_t flags, uint32_t nodes) {
  char* report = NULL;
  uint32_t n = compile_check(text, flags, &report);
  if (strstr(report, "(pattern)") != NULL) fail_msg("a pattern matched:\n%s", report);
  if (n != nodes) fail_msg("%u live nodes, want %u:\n%s", n, nodes, report);
  bp_graph_text_free(report);
}

#define HEAD "graph p\ninput x : f32[6, 32]\n"
#define WEIGHTS                                                   \
  "const w : f32[32] = uniform(seed=1, lo=0.5, hi=1.5)\n"         \
  "const b : f32[32] = uniform(seed=2, lo=-0.5, hi=0.5)\n"
#define SOFTMAX_BODY                                              \
  "mx = amax(x) {flags=1, num_dims=1, dims=[1]}\n"                \
  "t = sub(x, mx)\ne = exp(t)\n"                                  \
  "s = sum(e) {flags=1, num_dims=1, dims=[-1]}\n"
#define RMS_BODY                                                  \
  "sq = mul(x, x)\n"                                              \
  "ms = mean(sq) {flags=1, num_dims=1, dims=[-1]}\n"              \
  "s = add(ms, _) {flags=1, scalar=1e-06}\n"                      \
  "r = rsqrt(s)\nn = mul(x, r)\n"

static void test_softmax(void** state) {
  (void)state;
  expect_pattern(HEAD SOFTMAX_BODY "y = div(e, s)\noutput y\n", "softmax", 1);
}

static void test_rms_norm_forms(void** state) {
  (void)state;
  /* weight on either side; x^2 as pow; x / sqrt(s); no weight. */
  expect_pattern(HEAD WEIGHTS RMS_BODY "y = mul(w, n)\noutput y\n", "rms_norm", 1);
  expect_pattern(HEAD WEIGHTS RMS_BODY "y = mul(n, w)\noutput y\n", "rms_norm", 1);
  expect_pattern(HEAD RMS_BODY "output n\n", "rms_norm", 1);
  expect_pattern(HEAD WEIGHTS
                 "sq = pow(x, _) {flags=1, scalar=2}\n"
                 "ms = mean(sq) {flags=1, num_dims=1, dims=[1]}\n"
                 "s = add(ms, _) {flags=1, scalar=1e-05}\n"
                 "q = sqrt(s)\nn = div(x, q)\ny = mul(n, w)\noutput y\n",
                 "rms_norm", 1);
}

static void test_layer_norm_forms(void** state) {
  (void)state;
  const char* centered =
      "m = mean(x) {flags=1, num_dims=1, dims=[-1]}\n"
      "d = sub(x, m)\n";
  char text[1024];
  /* mean(d * d) with rsqrt, weight and bias */
  snprintf(text, sizeof(text), HEAD WEIGHTS "%s%s", centered,
           "dd = mul(d, d)\nv = mean(dd) {flags=1, num_dims=1, dims=[-1]}\n"
           "s = add(v, _) {flags=1, scalar=1e-05}\nr = rsqrt(s)\nn = mul(d, r)\n"
           "t = mul(n, w)\ny = add(t, b)\noutput y\n");
  expect_pattern(text, "layer_norm", 1);
  /* var(x, correction 0) with d / sqrt, bias only */
  snprintf(text, sizeof(text), HEAD WEIGHTS "%s%s", centered,
           "v = var(x) {flags=1, num_dims=1, dims=[1]}\n"
           "s = add(v, _) {flags=1, scalar=1e-05}\nq = sqrt(s)\nn = div(d, q)\n"
           "y = add(b, n)\noutput y\n");
  expect_pattern(text, "layer_norm", 1);
  /* Bessel's correction (var's default 1) is not layer_norm: untouched
   * (8 nodes: mean, sub, var, add, sqrt, div, add). */
  snprintf(text, sizeof(text), HEAD WEIGHTS "%s%s", centered,
           "v = var(x) {flags=1, num_dims=1, dims=[1], correction=1.0}\n"
           "s = add(v, _) {flags=1, scalar=1e-05}\nq = sqrt(s)\nn = div(d, q)\n"
           "y = add(b, n)\noutput y\n");
  expect_untouched(text, 0, 7);
}

static void test_silu(void** state) {
  (void)state;
  expect_pattern(HEAD "a = sigmoid(x)\ny = mul(a, x)\noutput y\n", "silu", 1);
}

static void test_no_match(void** state) {
  (void)state;
  /* r is also an output: the rewrite would compute it twice. */
  expect_untouched(HEAD WEIGHTS RMS_BODY "y = mul(w, n)\noutput y, r\n", 0, 6);
  /* eps 0 (rms_norm's 0 would be machine epsilon). */
  expect_untouched(HEAD
                   "sq = mul(x, x)\nms = mean(sq) {flags=1, num_dims=1, dims=[-1]}\n"
                   "s = add(ms, _) {flags=1, scalar=0.0}\nr = rsqrt(s)\nn = mul(x, r)\noutput n\n",
                   0, 5);
  /* The mean over dim 0: not the rows' norm. */
  expect_untouched(HEAD
                   "sq = mul(x, x)\nms = mean(sq) {flags=1, num_dims=1, dims=[0]}\n"
                   "s = add(ms, _) {flags=1, scalar=1e-06}\nr = rsqrt(s)\nn = mul(x, r)\noutput n\n",
                   0, 5);
  /* softmax with the sum over another dim than the max. */
  expect_untouched(HEAD
                   "mx = amax(x) {flags=1, num_dims=1, dims=[1]}\nt = sub(x, mx)\ne = exp(t)\n"
                   "s = sum(e) {flags=1, num_dims=1, dims=[0]}\ny = div(e, s)\noutput y\n",
                   0, 5);
  /* The same patterns with BP_GRAPH_NO_FUSE. */
  expect_untouched(HEAD SOFTMAX_BODY "y = div(e, s)\noutput y\n", BP_GRAPH_NO_FUSE, 5);
}

static void test_weight_not_a_vector(void** state) {
  (void)state;
  /* A [6, 32] multiplier is no norm weight: rms_norm without it, then the mul. */
  expect_pattern(HEAD "const w : f32[6, 32] = uniform(seed=1, lo=0.5, hi=1.5)\n" RMS_BODY
                      "y = mul(w, n)\noutput y\n",
                 "rms_norm", 2);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_softmax),          cmocka_unit_test(test_rms_norm_forms),
      cmocka_unit_test(test_layer_norm_forms), cmocka_unit_test(test_silu),
      cmocka_unit_test(test_no_match),         cmocka_unit_test(test_weight_not_a_vector),
  };
  return cmocka_run_group_tests(tests, fx_setup, fx_teardown);
}
