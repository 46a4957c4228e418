/* scaled_dot_product_attention, linear, rotary_embedding, cdist and pdist
 * through the public API on cpu:0: the online softmax across many key
 * blocks against a direct fp64 softmax, masking rules (causal top-left,
 * fully masked rows, NaN rows), the linear epilogue (activations, integer
 * wrap before relu), the two rotary layouts, the cdist mm path's PyTorch
 * behaviours and pdist's order, and the error cases with their messages. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdlib.h>

#include "cpu_fixture.h"

/* ---- scaled_dot_product_attention ------------------------------------------ */

/* softmax(q k^T * scale) v in fp64 for one head: q [L, E], k [S, E], v [S, Ev]. */
static void naive_attention(const float* q, const float* k, const float* v, int64_t L, int64_t S,
                            int64_t E, int64_t Ev, double scale, int causal, float* out) {
  double* s = malloc(sizeof(double) * (size_t)S);
  assert_non_null(s);
  for (int64_t i = 0; i < L; i++) {
    double mx = -INFINITY, l = 0;
    for (int64_t j = 0; j < S; j++) {
      double d = 0;
      for (int64_t e = 0; e < E; e++) d += (double)q[i * E + e] * k[j * E + e];
      s[j] = causal && j > i ? -INFINITY : d * scale;
      if (s[j] > mx) mx = s[j];
    }
    for (int64_t j = 0; j < S; j++) l += exp(s[j] - mx);
    for (int64_t c = 0; c < Ev; c++) {
      double acc = 0;
      for (int64_t j = 0; j < S; j++) acc += exp(s[j] - mx) / l * v[j * Ev + c];
      out[i * Ev + c] = (float)acc;
    }
  }
  free(s);
}

/* 700 keys (several key blocks) whose scores grow along the sequence, so the
 * running maximum rises block after block and earlier sums are rescaled;
 * 70 queries (two query blocks); plain and causal. */
static void test_sdpa_online_softmax_matches_direct(void** state) {
  (void)state;
  enum { L = 70, S = 700, E = 8, EV = 5 };
  float* q = malloc(sizeof(float) * L * E);
  float* k = malloc(sizeof(float) * S * E);
  float* v = malloc(sizeof(float) * S * EV);
  float* got = malloc(sizeof(float) * L * EV);
  float* want = malloc(sizeof(float) * L * EV);
  assert_true(q && k && v && got && want);
  for (int i = 0; i < L * E; i++) q[i] = (float)(0.5 + 0.25 * sin(i * 0.7));
  for (int j = 0; j < S; j++)
    for (int e = 0; e < E; e++) k[j * E + e] = (float)(j * 0.01 + 0.3 * cos(j * 1.3 + e));
  for (int i = 0; i < S * EV; i++) v[i] = (float)sin(i * 0.37);
  bp_tensor_t *tq = FX_T(F32, q, L, E), *tk = FX_T(F32, k, S, E), *tv = FX_T(F32, v, S, EV);
  for (int causal = 0; causal < 2; causal++) {
    bp_sdpa_attrs_t a = {.struct_size = sizeof a, .is_causal = (uint32_t)causal};
    bp_tensor_t* out = NULL;
    assert_int_equal(bp_op_scaled_dot_product_attention(g_stream, tq, tk, tv, NULL, &a, &out), BP_OK);
    fx_track(out);
    fx_read(out, got, L * EV, 4);
    naive_attention(q, k, v, L, S, E, EV, 1.0 / sqrt((double)E), causal, want);
    fx_assert_close(got, want, L * EV, 1e-5);
  }
  free(q), free(k), free(v), free(got), free(want);
}

/* Head sizes that are not multiples of the CPU's 6-wide register tiles nor
 * of 16, 130 queries (two full blocks of 64 and a partial one), 200 keys
 * (three full key blocks and a partial one), two heads; plain and causal,
 * and a query row of NaN (its output is NaN, the rest is unchanged). ctest
 * runs this file again with BP_CPU_ISA=avx2, where the same calls take the
 * block-GEMM path. */
static void test_sdpa_odd_heads_partial_blocks(void** state) {
  (void)state;
  enum { H = 2, L = 130, S = 200, E = 37, EV = 19 };
  float* q = malloc(sizeof(float) * H * L * E);
  float* k = malloc(sizeof(float) * H * S * E);
  float* v = malloc(sizeof(float) * H * S * EV);
  float* got = malloc(sizeof(float) * H * L * EV);
  float* want = malloc(sizeof(float) * H * L * EV);
  assert_true(q && k && v && got && want);
  for (int i = 0; i < H * L * E; i++) q[i] = (float)sin(i * 0.31);
  for (int i = 0; i < H * S * E; i++) k[i] = (float)cos(i * 0.17);
  for (int i = 0; i < H * S * EV; i++) v[i] = (float)sin(i * 0.53 + 1);
  for (int nan_row = 0; nan_row < 2; nan_row++) {
    if (nan_row) q[(L + 100) * E + 3] = NAN; /* head 1, query 100 */
    bp_tensor_t *tq = FX_T(F32, q, H, L, E), *tk = FX_T(F32, k, H, S, E), *tv = FX_T(F32, v, H, S, EV);
    for (int causal = 0; causal < 2; causal++) {
      bp_sdpa_attrs_t a = {.struct_size = sizeof a, .is_causal = (uint32_t)causal};
      bp_tensor_t* out = NULL;
      assert_int_equal(bp_op_scaled_dot_product_attention(g_stream, tq, tk, tv, NULL, &a, &out), BP_OK);
      fx_track(out);
      fx_read(out, got, H * L * EV, 4);
      for (int h = 0; h < H; h++)
        naive_attention(q + h * L * E, k + h * S * E, v + h * S * EV, L, S, E, EV, 1.0 / sqrt((double)E), causal,
                        want + h * L * EV);
      for (int i = 0; i < H * L * EV; i++) {
        if (isnan(want[i])) {
          assert_true(isnan(got[i]));
          assert_true(nan_row && i / EV == L + 100);
        } else {
          assert_float_equal(got[i], want[i], 1e-5);
        }
      }
    }
  }
  free(q), free(k), free(v), free(got), free(want);
}

/* is_causal is top-left aligned: query i sees keys 0..i, whatever S is. */
static void test_sdpa_causal_top_left(void** state) {
  (void)state;
  float q[2] = {0, 0}, k[3] = {1, 2, 3}, v[3] = {10, 20, 40}, got[2];
  bp_sdpa_attrs_t a = {.struct_size = sizeof a, .is_causal = 1};
  bp_tensor_t* out = NULL;
  assert_int_equal(bp_op_scaled_dot_product_attention(g_stream, FX_T(F32, q, 2, 1), FX_T(F32, k, 3, 1),
                                                      FX_T(F32, v, 3, 1), NULL, &a, &out),
                   BP_OK);
  fx_track(out);
  fx_read(out, got, 2, 4);
  /* zero queries: uniform weights over the visible keys */
  fx_assert_close(got, (float[]){10, 15}, 2, 1e-6);
}

/* A row whose keys are all masked gives 0 (PyTorch's _safe_softmax); a NaN
 * score makes its row NaN and leaves the others alone. */
static void test_sdpa_masked_and_nan_rows(void** state) {
  (void)state;
  float q[3] = {1, NAN, 1}, k[2] = {1, 1}, v[2] = {3, 5}, got[3];
  uint8_t m[6] = {1, 1, 1, 1, 0, 0}; /* row 2 sees no key */
  bp_tensor_t* out = NULL;
  assert_int_equal(bp_op_scaled_dot_product_attention(g_stream, FX_T(F32, q, 3, 1), FX_T(F32, k, 2, 1),
                                                      FX_T(F32, v, 2, 1), FX_T(BOOL, m, 3, 2), NULL,
                                                      &out),
                   BP_OK);
  fx_track(out);
  fx_read(out, got, 3, 4);
  assert_float_equal(got[0], 4.0f, 1e-6);
  assert_true(isnan(got[1]));
  assert_true(got[2] == 0.0f && !signbit(got[2]));
  /* an additive -inf everywhere masks the row the same way */
  float fm[2] = {-INFINITY, -INFINITY}, one = 1, g1;
  bp_tensor_t* out2 = NULL;
  assert_int_equal(bp_op_scaled_dot_product_attention(g_stream, FX_T(F32, &one, 1, 1), FX_T(F32, k, 2, 1),
                                                      FX_T(F32, v, 2, 1), FX_T(F32, fm, 2), NULL, &out2),
                   BP_OK);
  fx_track(out2);
  fx_read(out2, &g1, 1, 4);
  assert_true(g1 == 0.0f);
}

/* Grouped-query heads: query head h reads key/value head h / (Hq / Hk). */
static void test_sdpa_gqa(void** state) {
  (void)state;
  float q[4] = {0, 0, 0, 0}, k[2] = {0, 0}, v[2] = {7, -3}, got[4];
  bp_sdpa_attrs_t a = {.struct_size = sizeof a, .enable_gqa = 1};
  bp_tensor_t* out = NULL;
  assert_int_equal(bp_op_scaled_dot_product_attention(g_stream, FX_T(F32, q, 4, 1, 1),
                                                      FX_T(F32, k, 2, 1, 1), FX_T(F32, v, 2, 1, 1),
                                                      NULL, &a, &out),
                   BP_OK);
  fx_track(out);
  fx_read(out, got, 4, 4);
  fx_assert_close(got, (float[]){7, 7, -3, -3}, 4, 0);
}

static void test_sdpa_errors(void** state) {
  (void)state;
  bp_tensor_t* out = NULL;
  bp_sdpa_attrs_t causal = {.struct_size = sizeof causal, .is_causal = 1};
  fx_assert_status(bp_op_scaled_dot_product_attention(g_stream, FX_T(F32, NULL, 2, 4), FX_T(F32, NULL, 3, 4),
                                                      FX_T(F32, NULL, 3, 4), FX_T(BOOL, NULL, 2, 3),
                                                      &causal, &out),
                   BP_INVALID_ARGUMENT, "must not be given with attrs.is_causal");
  fx_assert_status(bp_op_scaled_dot_product_attention(g_stream, FX_T(F32, NULL, 2, 4), FX_T(F32, NULL, 3, 5),
                                                      FX_T(F32, NULL, 3, 4), NULL, NULL, &out),
                   BP_INVALID_ARGUMENT, "query has head dim 4 but key has 5");
  fx_assert_status(bp_op_scaled_dot_product_attention(g_stream, FX_T(F32, NULL, 2, 4), FX_T(F32, NULL, 3, 4),
                                                      FX_T(F32, NULL, 2, 4), NULL, NULL, &out),
                   BP_INVALID_ARGUMENT, "key has 3 positions but value has 2");
  bp_sdpa_attrs_t gqa = {.struct_size = sizeof gqa, .enable_gqa = 1};
  fx_assert_status(bp_op_scaled_dot_product_attention(g_stream, FX_T(F32, NULL, 3, 2, 4),
                                                      FX_T(F32, NULL, 2, 2, 4), FX_T(F32, NULL, 2, 2, 4),
                                                      NULL, &gqa, &out),
                   BP_INVALID_ARGUMENT, "not a multiple of the 2 heads");
  fx_assert_status(bp_op_scaled_dot_product_attention(g_stream, FX_T(I32, NULL, 2, 4), FX_T(I32, NULL, 3, 4),
                                                      FX_T(I32, NULL, 3, 4), NULL, NULL, &out),
                   BP_INVALID_ARGUMENT, "a floating dtype is required");
  fx_assert_status(bp_op_scaled_dot_product_attention(g_stream, FX_T(F32, NULL, 2, 4), FX_T(F32, NULL, 3, 4),
                                                      FX_T(F32, NULL, 3, 4), FX_T(I32, NULL, 2, 3), NULL,
                                                      &out),
                   BP_INVALID_ARGUMENT, "expected bool or f32");
  assert_null(out);
}

/* ---- linear ------------------------------------------------------------------- */

/* [1, 2] @ [[1, 1], [1, -1]]^T + [0.5, 0] = [3.5, -1], then each activation. */
static void test_linear_epilogues(void** state) {
  (void)state;
  float x[2] = {1, 2}, w[4] = {1, 1, 1, -1}, b[2] = {0.5f, 0}, got[2];
  const struct {
    uint32_t act;
    double y0, y1;
  } cases[] = {
      {BP_ACTIVATION_NONE, 3.5, -1},
      {BP_ACTIVATION_RELU, 3.5, 0},
      {BP_ACTIVATION_GELU_ERF, 0.5 * 3.5 * (1 + erf(3.5 / sqrt(2.0))), 0.5 * -1 * (1 + erf(-1 / sqrt(2.0)))},
      {BP_ACTIVATION_GELU_TANH, 0.5 * 3.5 * (1 + tanh(sqrt(2 / M_PI) * (3.5 + 0.044715 * 42.875))),
       0.5 * -1 * (1 + tanh(sqrt(2 / M_PI) * (-1 - 0.044715)))},
      {BP_ACTIVATION_SILU, 3.5 / (1 + exp(-3.5)), -1 / (1 + exp(1.0))},
      {BP_ACTIVATION_SIGMOID, 1 / (1 + exp(-3.5)), 1 / (1 + exp(1.0))},
      {BP_ACTIVATION_TANH, tanh(3.5), tanh(-1.0)},
  };
  bp_tensor_t *tx = FX_T(F32, x, 1, 2), *tw = FX_T(F32, w, 2, 2), *tb = FX_T(F32, b, 2);
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    bp_linear_attrs_t a = {.struct_size = sizeof a, .activation = cases[i].act};
    bp_tensor_t* out = NULL;
    assert_int_equal(bp_op_linear(g_stream, tx, tw, tb, &a, &out), BP_OK);
    fx_track(out);
    fx_read(out, got, 2, 4);
    fx_assert_close(got, (float[]){(float)cases[i].y0, (float)cases[i].y1}, 2, 2e-7);
  }
}

/* i8: 100 * 1 + 100 * 1 = 200 wraps to -56 before relu; bias 100 on the
 * other row: 20 + 100 = 120 stays. */
static void test_linear_int_wraps_before_relu(void** state) {
  (void)state;
  int8_t x[2] = {100, 10}, w[4] = {1, 0, 0, 2}, b[2] = {100, 100}, got[2];
  bp_linear_attrs_t a = {.struct_size = sizeof a, .activation = BP_ACTIVATION_RELU};
  bp_tensor_t* out = NULL;
  /* row: [100, 10] . [1, 0] + 100 = 200 -> -56 -> relu 0; [100, 10] . [0, 2] + 100 = 120 */
  assert_int_equal(bp_op_linear(g_stream, FX_T(I8, x, 1, 2), FX_T(I8, w, 2, 2), FX_T(I8, b, 2), &a, &out),
                   BP_OK);
  fx_track(out);
  fx_read(out, got, 2, 1);
  assert_int_equal(got[0], 0);
  assert_int_equal(got[1], 120);
}

static void test_linear_errors(void** state) {
  (void)state;
  bp_tensor_t* out = NULL;
  bp_linear_attrs_t gelu = {.struct_size = sizeof gelu, .activation = BP_ACTIVATION_GELU_ERF};
  fx_assert_status(bp_op_linear(g_stream, FX_T(I32, NULL, 2, 3), FX_T(I32, NULL, 4, 3), NULL, &gelu, &out),
                   BP_INVALID_ARGUMENT, "needs a floating dtype");
  fx_assert_status(bp_op_linear(g_stream, FX_T(F32, NULL, 2, 3), FX_T(F32, NULL, 4, 5), NULL, NULL, &out),
                   BP_INVALID_ARGUMENT, "cannot be multiplied");
  fx_assert_status(bp_op_linear(g_stream, FX_T(F32, NULL, 2, 3), FX_T(F32, NULL, 4, 3),
                                FX_T(F32, NULL, 3), NULL, &out),
                   BP_INVALID_ARGUMENT, "does not broadcast to [2, 4]");
  fx_assert_status(bp_op_linear(g_stream, FX_T(F32, NULL, 2, 3), FX_T(F16, NULL, 4, 3), NULL, NULL, &out),
                   BP_INVALID_ARGUMENT, "no promotion");
  assert_null(out);
}

/* ---- rotary_embedding ---------------------------------------------------------- */

/* A quarter turn (cos 0, sin 1): rotate-half maps [1, 2, 3, 4] to
 * [-3, -4, 1, 2]; GPT-J pairs map it to [-2, 1, -4, 3]. Full tables give the
 * same with the angle repeated. */
static void test_rotary_layouts(void** state) {
  (void)state;
  float x[4] = {1, 2, 3, 4}, c[2] = {0, 0}, s[2] = {1, 1}, cf[4] = {0, 0, 0, 0}, sf[4] = {1, 1, 1, 1};
  float got[4];
  const float want[2][4] = {{-3, -4, 1, 2}, {-2, 1, -4, 3}};
  for (int il = 0; il < 2; il++) {
    for (int full = 0; full < 2; full++) {
      bp_rotary_attrs_t a = {.struct_size = sizeof a, .interleaved = (uint32_t)il};
      bp_tensor_t* out = NULL;
      bp_tensor_t* tc = full ? FX_T(F32, cf, 1, 4) : FX_T(F32, c, 1, 2);
      bp_tensor_t* ts = full ? FX_T(F32, sf, 1, 4) : FX_T(F32, s, 1, 2);
      assert_int_equal(bp_op_rotary_embedding(g_stream, FX_T(F32, x, 1, 1, 4), tc, ts, &a, &out), BP_OK);
      fx_track(out);
      fx_read(out, got, 4, 4);
      fx_assert_close(got, want[il], 4, 0);
    }
  }
}

static void test_rotary_errors(void** state) {
  (void)state;
  bp_tensor_t* out = NULL;
  fx_assert_status(bp_op_rotary_embedding(g_stream, FX_T(F32, NULL, 2, 5), FX_T(F32, NULL, 2, 2),
                                          FX_T(F32, NULL, 2, 2), NULL, &out),
                   BP_INVALID_ARGUMENT, "must be even");
  fx_assert_status(bp_op_rotary_embedding(g_stream, FX_T(F32, NULL, 2, 6), FX_T(F32, NULL, 2, 4),
                                          FX_T(F32, NULL, 2, 4), NULL, &out),
                   BP_INVALID_ARGUMENT, "expected 3 (half tables) or 6 (full tables)");
  fx_assert_status(bp_op_rotary_embedding(g_stream, FX_T(F32, NULL, 2, 6), FX_T(F32, NULL, 3, 3),
                                          FX_T(F32, NULL, 3, 3), NULL, &out),
                   BP_INVALID_ARGUMENT, "does not broadcast");
  fx_assert_status(bp_op_rotary_embedding(g_stream, FX_T(F32, NULL, 2, 6), FX_T(F32, NULL, 2, 3),
                                          FX_T(F32, NULL, 3), NULL, &out),
                   BP_INVALID_ARGUMENT, "'cos' has shape [2, 3] but 'sin' has [3]");
  assert_null(out);
}

/* ---- cdist, pdist --------------------------------------------------------------------- */

/* Equal rows: the direct path gives 0; the mm path (compute_mode 1) gives
 * sqrt(1e-30) = 1e-15 as PyTorch's clamp_min(1e-30).sqrt(). p = 0 counts
 * differing entries, p = inf takes the largest difference. */
static void test_cdist_modes(void** state) {
  (void)state;
  float a[2] = {1, 2}, b[4] = {1, 2, 4, 6}, got[2];
  const struct {
    double p;
    int mode;
    float d0, d1;
  } cases[] = {{2, 2, 0, 5}, {2, 1, 1e-15f, 5}, {0, 0, 0, 2}, {INFINITY, 0, 0, 4}, {1, 0, 0, 7}};
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    bp_cdist_attrs_t at = {.struct_size = sizeof at, .p = cases[i].p, .compute_mode = cases[i].mode};
    bp_tensor_t* out = NULL;
    assert_int_equal(bp_op_cdist(g_stream, FX_T(F32, a, 1, 2), FX_T(F32, b, 2, 2), &at, &out), BP_OK);
    fx_track(out);
    fx_read(out, got, 2, 4);
    fx_assert_close(got, (float[]){cases[i].d0, cases[i].d1}, 2, 1e-6);
    if (cases[i].mode == 1) assert_true(got[0] > 0.0f);
  }
}

/* pdist lists the pairs (0,1), (0,2), (1,2): row-major upper triangle. */
static void test_pdist_order(void** state) {
  (void)state;
  float x[3] = {0, 1, 3}, got[3];
  bp_tensor_t* out = NULL;
  assert_int_equal(bp_op_pdist(g_stream, FX_T(F32, x, 3, 1), NULL, &out), BP_OK);
  fx_track(out);
  fx_read(out, got, 3, 4);
  fx_assert_close(got, (float[]){1, 3, 2}, 3, 0);
}

static void test_dist_errors(void** state) {
  (void)state;
  bp_tensor_t* out = NULL;
  bp_cdist_attrs_t neg = {.struct_size = sizeof neg, .p = -1};
  fx_assert_status(bp_op_cdist(g_stream, FX_T(F32, NULL, 2, 3), FX_T(F32, NULL, 4, 3), &neg, &out),
                   BP_INVALID_ARGUMENT, "only non-negative p values");
  fx_assert_status(bp_op_cdist(g_stream, FX_T(F32, NULL, 2, 3), FX_T(F32, NULL, 4, 2), NULL, &out),
                   BP_INVALID_ARGUMENT, "same number of columns");
  fx_assert_status(bp_op_pdist(g_stream, FX_T(F32, NULL, 2, 3, 4), NULL, &out), BP_INVALID_ARGUMENT,
                   "must have rank 2");
  fx_assert_status(bp_op_pdist(g_stream, FX_T(I64, NULL, 3, 4), NULL, &out), BP_INVALID_ARGUMENT,
                   "a floating dtype is required");
  assert_null(out);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_teardown(test_sdpa_online_softmax_matches_direct, fx_release_all),
      cmocka_unit_test_teardown(test_sdpa_odd_heads_partial_blocks, fx_release_all),
      cmocka_unit_test_teardown(test_sdpa_causal_top_left, fx_release_all),
      cmocka_unit_test_teardown(test_sdpa_masked_and_nan_rows, fx_release_all),
      cmocka_unit_test_teardown(test_sdpa_gqa, fx_release_all),
      cmocka_unit_test_teardown(test_sdpa_errors, fx_release_all),
      cmocka_unit_test_teardown(test_linear_epilogues, fx_release_all),
      cmocka_unit_test_teardown(test_linear_int_wraps_before_relu, fx_release_all),
      cmocka_unit_test_teardown(test_linear_errors, fx_release_all),
      cmocka_unit_test_teardown(test_rotary_layouts, fx_release_all),
      cmocka_unit_test_teardown(test_rotary_errors, fx_release_all),
      cmocka_unit_test_teardown(test_cdist_modes, fx_release_all),
      cmocka_unit_test_teardown(test_pdist_order, fx_release_all),
      cmocka_unit_test_teardown(test_dist_errors, fx_release_all),
  };
  return cmocka_run_group_tests(tests, fx_setup, fx_teardown);
}
