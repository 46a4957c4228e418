/* Large f32 products on cpu:0 (over 2^21 multiply-adds: the oneDNN sgemm
 * path in a build with oneDNN, cpu_gemm_dnnl.h; ctest runs this again with
 * BACKPLANE_CPU_DNNL=0 for OpenBLAS) against a double reference: every
 * layout the plugin hands a GEMM (transposed operand views, a transposed
 * output, which makes the product column-major), shapes whose slices are
 * not multiples of 16, addmm's accumulation into beta * self, bmm, and
 * linear's weight layout. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include <cmocka.h>

#include "cpu_fixture.h"

static float* random_floats(int64_t n, uint32_t seed) {
  float* p = malloc((size_t)n * sizeof(float));
  assert_non_null(p);
  for (int64_t i = 0; i < n; i++) {
    seed = seed * 1664525u + 1013904223u;
    p[i] = (float)(seed >> 8) / (float)(1u << 24) - 0.5f;
  }
  return p;
}

/* want[i][j] = alpha * sum_k A(i, k) B(k, j) + beta * C0[i][j], with A(i, k)
 * at a[i * ars + k * acs] and B(k, j) at b[k * brs + j * bcs]. */
static void reference(const float* a, int64_t ars, int64_t acs, const float* b, int64_t brs, int64_t bcs,
                      const float* c0, double alpha, double beta, int64_t m, int64_t n, int64_t k, float* want) {
  for (int64_t i = 0; i < m; i++)
    for (int64_t j = 0; j < n; j++) {
      double s = 0;
      for (int64_t t = 0; t < k; t++) s += (double)a[i * ars + t * acs] * (double)b[t * brs + j * bcs];
      want[i * n + j] = (float)(alpha * s + (c0 ? beta * (double)c0[i * n + j] : 0.0));
    }
}

/* A view of t with its two dims swapped (tracked). */
static bp_tensor_t* transposed(bp_tensor_t* t) {
  bp_tensor_t* v = NULL;
  assert_int_equal(bp_tensor_permute(t, (int64_t[]){1, 0}, &v), BP_OK);
  return fx_track(v);
}

/* mm over the four operand layouts, C rows x cols over 2^21 MACs with
 * sizes that do not divide into 16s. */
static void test_mm_layouts(void** state) {
  (void)state;
  const int64_t shapes[][3] = {{173, 301, 67}, {517, 33, 260}, {40, 700, 90}};
  for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
    int64_t m = shapes[s][0], n = shapes[s][1], k = shapes[s][2];
    float* a = random_floats(m * k, 1u + (uint32_t)s);
    float* b = random_floats(k * n, 7u + (uint32_t)s);
    float* want = malloc((size_t)(m * n) * sizeof(float));
    float* got = malloc((size_t)(m * n) * sizeof(float));
    assert_true(want && got);
    for (int layout = 0; layout < 4; layout++) {
      int ta = layout & 1, tb = layout >> 1;
      /* A stored [m, k] or, transposed, [k, m] viewed as [m, k]; B alike */
      bp_tensor_t* at = ta ? transposed(FX_T(F32, a, k, m)) : FX_T(F32, a, m, k);
      bp_tensor_t* bt = tb ? transposed(FX_T(F32, b, n, k)) : FX_T(F32, b, k, n);
      bp_tensor_t* out = NULL;
      assert_int_equal(bp_op_mm(g_stream, at, bt, NULL, &out), BP_OK);
      fx_track(out);
      fx_read(out, got, m * n, sizeof(float));
      reference(a, ta ? 1 : k, ta ? m : 1, b, tb ? 1 : n, tb ? k : 1, NULL, 1.0, 0.0, m, n, k, want);
      fx_assert_close(got, want, m * n, 1e-5);
    }
    free(a), free(b), free(want), free(got);
    fx_release_all(NULL);
  }
}

/* A transposed output (the product then runs column-major) and addmm's
 * beta * self + alpha * A @ B into it, with A given plain and transposed
 * (so the column-major product sees both transposes of A). */
static void test_addmm_into_transposed_output(void** state) {
  (void)state;
  const int64_t m = 211, n = 190, k = 77;
  float* a = random_floats(m * k, 3);
  float* b = random_floats(k * n, 4);
  float* c0 = random_floats(m * n, 5);
  float* want = malloc((size_t)(m * n) * sizeof(float));
  float* got = malloc((size_t)(m * n) * sizeof(float));
  float* col = malloc((size_t)(m * n) * sizeof(float));
  assert_true(want && got && col);
  bp_addmm_attrs_t attrs = {.struct_size = sizeof attrs,
                            .beta = {.kind = BP_SCALAR_FLOAT, .v.f = 0.75},
                            .alpha = {.kind = BP_SCALAR_FLOAT, .v.f = -1.5}};
  for (int ta = 0; ta < 2; ta++) {
    bp_tensor_t* at = ta ? transposed(FX_T(F32, a, k, m)) : FX_T(F32, a, m, k);
    bp_tensor_t* bt = FX_T(F32, b, k, n);
    bp_tensor_t* self = FX_T(F32, c0, m, n);
    bp_tensor_t* storage = FX_T(F32, NULL, n, m); /* out[i][j] at storage[j][i] */
    bp_tensor_t* out = transposed(storage);
    assert_int_equal(bp_op_addmm(g_stream, self, at, bt, &attrs, &out), BP_OK);
    fx_read(storage, col, m * n, sizeof(float));
    for (int64_t i = 0; i < m; i++)
      for (int64_t j = 0; j < n; j++) got[i * n + j] = col[j * m + i];
    reference(a, ta ? 1 : k, ta ? m : 1, b, n, 1, c0, -1.5, 0.75, m, n, k, want);
    fx_assert_close(got, want, m * n, 1e-5);
  }
  free(a), free(b), free(c0), free(want), free(got), free(col);
}

/* linear (weight [n, k]: B transposed) with bias, and bmm over 3 batches. */
static void test_linear_and_bmm(void** state) {
  (void)state;
  const int64_t m = 96, n = 257, k = 130, nb = 3;
  float* x = random_floats(nb * m * k, 8);
  float* w = random_floats(n * k, 9);
  float* bias = random_floats(n, 10);
  float* want = malloc((size_t)(nb * m * n) * sizeof(float));
  float* got = malloc((size_t)(nb * m * n) * sizeof(float));
  assert_true(want && got);
  bp_tensor_t* xt = FX_T(F32, x, m, k);
  bp_tensor_t* wt = FX_T(F32, w, n, k);
  bp_tensor_t* bt = FX_T(F32, bias, n);
  bp_tensor_t* out = NULL;
  assert_int_equal(bp_op_linear(g_stream, xt, wt, bt, NULL, &out), BP_OK);
  fx_track(out);
  fx_read(out, got, m * n, sizeof(float));
  reference(x, k, 1, w, 1, k, NULL, 1.0, 0.0, m, n, k, want);
  for (int64_t i = 0; i < m; i++)
    for (int64_t j = 0; j < n; j++) want[i * n + j] += bias[j];
  fx_assert_close(got, want, m * n, 1e-5);
  /* bmm: [nb, m, k] @ [nb, k, n] with the weights as B of each batch */
  float* bb = random_floats(nb * k * n, 11);
  bp_tensor_t* xb = FX_T(F32, x, nb, m, k);
  bp_tensor_t* bbt = FX_T(F32, bb, nb, k, n);
  bp_tensor_t* ob = NULL;
  assert_int_equal(bp_op_bmm(g_stream, xb, bbt, NULL, &ob), BP_OK);
  fx_track(ob);
  fx_read(ob, got, nb * m * n, sizeof(float));
  for (int64_t q = 0; q < nb; q++)
    reference(x + q * m * k, k, 1, bb + q * k * n, n, 1, NULL, 1.0, 0.0, m, n, k, want + q * m * n);
  fx_assert_close(got, want, nb * m * n, 1e-5);
  free(x), free(w), free(bias), free(want), free(got), free(bb);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_teardown(test_mm_layouts, fx_release_all),
      cmocka_unit_test_teardown(test_addmm_into_transposed_output, fx_release_all),
      cmocka_unit_test_teardown(test_linear_and_bmm, fx_release_all),
  };
  return cmocka_run_group_tests(tests, fx_setup, fx_teardown);
}
