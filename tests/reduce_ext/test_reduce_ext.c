/* reduce_ext semantics that the conformance suite expresses poorly, checked
 * element by element on cpu:0: sort order of NaN, infinities and signed
 * zeros with stability; max.dim / min.dim NaN and tie indices; var's
 * correction and zero divisors; cumsum's integer promotion; logsumexp's
 * infinities and integer promotion; topk's dtype rule; and the f32 fast
 * paths of sum/amax over columns (several column blocks and row chunks)
 * and of softmax (subnormal results). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "backplane/backplane.h"

#include "cpu_fixture.h"

static bp_tensor_t* make(uint32_t dtype, uint32_t rank, const int64_t* sizes, const void* data) {
  bp_tensor_t* t = NULL;
  assert_int_equal(bp_tensor_create(g_dev, dtype, rank, sizes, &t), BP_OK);
  size_t n = bp_dtype_size(dtype);
  for (uint32_t d = 0; d < rank; d++) n *= (size_t)sizes[d];
  if (n) assert_int_equal(bp_tensor_write(g_stream, t, data, n), BP_OK);
  return t;
}

static void read_all(bp_tensor_t* t, void* dst, size_t bytes) {
  assert_int_equal(bp_tensor_read(g_stream, t, dst, bytes), BP_OK);
}

/* Same float, NaN equal to NaN, -0 told from +0. */
static int same_f(float a, float b) {
  return (isnan(a) && isnan(b)) || (a == b && signbit(a) == signbit(b));
}

static void test_sort_order_and_stability(void** state) {
  (void)state;
  const float x[8] = {NAN, 1.0f, -0.0f, INFINITY, 0.0f, -INFINITY, 1.0f, NAN};
  int64_t n[1] = {8};
  bp_tensor_t* t = make(BP_DTYPE_F32, 1, n, x);
  const float asc_v[8] = {-INFINITY, -0.0f, 0.0f, 1.0f, 1.0f, INFINITY, NAN, NAN};
  const int64_t asc_i[8] = {5, 2, 4, 1, 6, 3, 0, 7};
  const float desc_v[8] = {NAN, NAN, INFINITY, 1.0f, 1.0f, -0.0f, 0.0f, -INFINITY};
  const int64_t desc_i[8] = {0, 7, 3, 1, 6, 2, 4, 5};
  for (int desc = 0; desc < 2; desc++) {
    bp_sort_attrs_t a = {.struct_size = sizeof a, .dim = -1, .descending = (uint32_t)desc};
    bp_tensor_t *v = NULL, *ix = NULL;
    assert_int_equal(bp_op_sort(g_stream, t, &a, &v, &ix), BP_OK);
    float gv[8];
    int64_t gi[8];
    read_all(v, gv, sizeof gv);
    read_all(ix, gi, sizeof gi);
    for (int k = 0; k < 8; k++) {
      assert_true(same_f(gv[k], desc ? desc_v[k] : asc_v[k]));
      assert_int_equal(gi[k], desc ? desc_i[k] : asc_i[k]);
    }
    bp_tensor_release(v);
    bp_tensor_release(ix);
  }
  bp_tensor_release(t);
}

static void test_max_min_dim_nan_and_ties(void** state) {
  (void)state;
  const float x[8] = {1, NAN, 3, NAN, 2, 5, 5, 1};
  int64_t sz[2] = {2, 4};
  bp_tensor_t* t = make(BP_DTYPE_F32, 2, sz, x);
  bp_reduce_attrs_t a = {.struct_size = sizeof a, .num_dims = 1, .dims = {1}};
  bp_tensor_t *v = NULL, *ix = NULL;
  float gv[2];
  int64_t gi[2];
  assert_int_equal(bp_op_max_dim(g_stream, t, &a, &v, &ix), BP_OK);
  read_all(v, gv, sizeof gv);
  read_all(ix, gi, sizeof gi);
  assert_true(isnan(gv[0]));
  assert_int_equal(gi[0], 1); /* the first NaN */
  assert_true(gv[1] == 5.0f);
  assert_int_equal(gi[1], 1); /* the first of the tied maxima */
  bp_tensor_release(v);
  bp_tensor_release(ix);
  v = ix = NULL;
  assert_int_equal(bp_op_min_dim(g_stream, t, &a, &v, &ix), BP_OK);
  read_all(v, gv, sizeof gv);
  read_all(ix, gi, sizeof gi);
  assert_true(isnan(gv[0]));
  assert_int_equal(gi[0], 1);
  assert_true(gv[1] == 1.0f);
  assert_int_equal(gi[1], 3);
  bp_tensor_release(v);
  bp_tensor_release(ix);
  bp_tensor_release(t);
}

static float var_of(const float* x, int64_t n, double correction) {
  int64_t sz[1] = {n};
  bp_tensor_t* t = make(BP_DTYPE_F32, 1, sz, x);
  bp_reduce_attrs_t a = {.struct_size = sizeof a, .flags = BP_REDUCE_ALL_DIMS, .correction = correction};
  bp_tensor_t* out = NULL;
  assert_int_equal(bp_op_var(g_stream, t, &a, &out), BP_OK);
  float r;
  read_all(out, &r, sizeof r);
  bp_tensor_release(out);
  bp_tensor_release(t);
  return r;
}

static void test_var_correction(void** state) {
  (void)state;
  const float x[4] = {1, 2, 3, 4};
  assert_float_equal(var_of(x, 4, 1.0), 5.0f / 3.0f, 1e-6f);
  assert_float_equal(var_of(x, 4, 0.0), 1.25f, 1e-6f);
  float r = var_of(x, 4, 4.0); /* divisor max(0, 4 - 4) = 0, squares > 0 */
  assert_true(isinf(r) && r > 0);
  const float c[2] = {2, 2};
  assert_true(isnan(var_of(c, 2, 2.0))); /* 0 / 0 */
  assert_true(isnan(var_of(c, 1, 1.0)));
}

static void test_cumsum_promotes_integers(void** state) {
  (void)state;
  const int32_t x[3] = {INT32_MAX, 1, -5};
  int64_t sz[1] = {3};
  bp_tensor_t* t = make(BP_DTYPE_I32, 1, sz, x);
  bp_dim_attrs_t a = {.struct_size = sizeof a, .dim = 0};
  bp_tensor_t* out = NULL;
  assert_int_equal(bp_op_cumsum(g_stream, t, &a, &out), BP_OK);
  bp_tensor_desc_t d = {.struct_size = sizeof d};
  bp_tensor_get_desc(out, &d);
  assert_int_equal(d.dtype, BP_DTYPE_I64);
  int64_t g[3];
  read_all(out, g, sizeof g);
  assert_int_equal(g[0], INT32_MAX);
  assert_int_equal(g[1], (int64_t)INT32_MAX + 1);
  assert_int_equal(g[2], (int64_t)INT32_MAX - 4);
  bp_tensor_release(out);
  bp_tensor_release(t);
}

static float lse_of(const float* x, int64_t n) {
  int64_t sz[1] = {n};
  bp_tensor_t* t = make(BP_DTYPE_F32, 1, sz, x);
  bp_reduce_attrs_t a = {.struct_size = sizeof a, .flags = BP_REDUCE_ALL_DIMS};
  bp_tensor_t* out = NULL;
  assert_int_equal(bp_op_logsumexp(g_stream, t, &a, &out), BP_OK);
  float r;
  read_all(out, &r, sizeof r);
  bp_tensor_release(out);
  bp_tensor_release(t);
  return r;
}

static void test_logsumexp_specials_and_ints(void** state) {
  (void)state;
  const float ninf[2] = {-INFINITY, -INFINITY}, pinf[2] = {INFINITY, 1.0f}, big[2] = {1000, 1000};
  const float withnan[3] = {INFINITY, NAN, 1.0f};
  float r = lse_of(ninf, 2);
  assert_true(isinf(r) && r < 0);
  r = lse_of(pinf, 2);
  assert_true(isinf(r) && r > 0);
  assert_true(isnan(lse_of(withnan, 3)));
  assert_float_equal(lse_of(big, 2), 1000.0f + (float)log(2.0), 1e-4f);
  r = lse_of(big, 0); /* empty: log(0) */
  assert_true(isinf(r) && r < 0);
  /* integers compute in the default float dtype */
  const int32_t xi[2] = {1, 1};
  int64_t sz[1] = {2};
  bp_tensor_t* t = make(BP_DTYPE_I32, 1, sz, xi);
  bp_reduce_attrs_t a = {.struct_size = sizeof a, .flags = BP_REDUCE_ALL_DIMS};
  bp_tensor_t* out = NULL;
  assert_int_equal(bp_op_logsumexp(g_stream, t, &a, &out), BP_OK);
  bp_tensor_desc_t d = {.struct_size = sizeof d};
  bp_tensor_get_desc(out, &d);
  assert_int_equal(d.dtype, BP_DTYPE_F32);
  read_all(out, &r, sizeof r);
  assert_float_equal(r, 1.0f + (float)log(2.0), 1e-6f);
  bp_tensor_release(out);
  bp_tensor_release(t);
}

static void test_topk_rejects_bool(void** state) {
  (void)state;
  const uint8_t x[3] = {1, 0, 1};
  int64_t sz[1] = {3};
  bp_tensor_t* t = make(BP_DTYPE_BOOL, 1, sz, x);
  bp_topk_attrs_t a = {.struct_size = sizeof a, .dim = -1, .k = 1, .largest = 1, .sorted = 1};
  bp_tensor_t *v = NULL, *ix = NULL;
  assert_int_equal(bp_op_topk(g_stream, t, &a, &v, &ix), BP_INVALID_ARGUMENT);
  assert_non_null(strstr(bp_status_message(), "bool"));
  bp_tensor_release(t);
}

/* sum and amax over dim 0 of [rows, cols] f32: more columns than one block
 * and enough rows for several row chunks; one column holds a NaN. */
static void test_column_reductions(void** state) {
  (void)state;
  const int64_t rows = 300, cols = 2100;
  float* x = malloc((size_t)(rows * cols) * sizeof *x);
  float* got = malloc((size_t)cols * sizeof *got);
  assert_non_null(x);
  assert_non_null(got);
  for (int64_t i = 0; i < rows * cols; i++) x[i] = (float)((i * 7919) % 2001 - 1000) / 64.0f;
  x[123 * cols + 2050] = NAN;
  int64_t sz[2] = {rows, cols};
  bp_tensor_t* t = make(BP_DTYPE_F32, 2, sz, x);
  bp_reduce_attrs_t a = {.struct_size = sizeof a, .num_dims = 1, .dims = {0}};
  bp_tensor_t *s = NULL, *m = NULL;
  assert_int_equal(bp_op_sum(g_stream, t, &a, &s), BP_OK);
  assert_int_equal(bp_op_amax(g_stream, t, &a, &m), BP_OK);
  read_all(s, got, (size_t)cols * sizeof *got);
  for (int64_t c = 0; c < cols; c++) {
    double e = 0;
    for (int64_t r = 0; r < rows; r++) e += x[r * cols + c];
    if (c == 2050) assert_true(isnan(got[c]));
    else assert_float_equal(got[c], (float)e, 1e-3f);
  }
  read_all(m, got, (size_t)cols * sizeof *got);
  for (int64_t c = 0; c < cols; c++) {
    float e = -INFINITY;
    for (int64_t r = 0; r < rows; r++) e = x[r * cols + c] > e ? x[r * cols + c] : e;
    if (c == 2050) assert_true(isnan(got[c]));
    else assert_true(got[c] == e);
  }
  bp_tensor_release(s);
  bp_tensor_release(m);
  bp_tensor_release(t);
  free(x);
  free(got);
}

/* softmax of a row of 11 (vector body and tail) with a subnormal result,
 * an exact zero from -inf, and the rest. */
static void test_softmax_subnormal(void** state) {
  (void)state;
  float x[11] = {0, -100, -INFINITY, -1, -2, -3, -4, -5, -6, -7, -100};
  int64_t sz[1] = {11};
  bp_tensor_t* t = make(BP_DTYPE_F32, 1, sz, x);
  bp_softmax_attrs_t a = {.struct_size = sizeof a, .dim = 0};
  bp_tensor_t* out = NULL;
  assert_int_equal(bp_op_softmax(g_stream, t, &a, &out), BP_OK);
  float y[11];
  read_all(out, y, sizeof y);
  double s = 0;
  for (int k = 0; k < 11; k++) s += exp((double)x[k]);
  for (int k = 0; k < 11; k++) {
    double e = exp((double)x[k]) / s;
    double tol = e < 1e-38 ? 2 * 0x1p-149 : 4e-7 * e;
    assert_true(fabs(y[k] - e) <= tol);
  }
  assert_true(y[2] == 0.0f);
  assert_true(y[1] > 0.0f && y[10] > 0.0f); /* subnormal, not flushed */
  bp_tensor_release(out);
  bp_tensor_release(t);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_sort_order_and_stability),
      cmocka_unit_test(test_max_min_dim_nan_and_ties),
      cmocka_unit_test(test_var_correction),
      cmocka_unit_test(test_cumsum_promotes_integers),
      cmocka_unit_test(test_logsumexp_specials_and_ints),
      cmocka_unit_test(test_topk_rejects_bool),
      cmocka_unit_test(test_column_reductions),
      cmocka_unit_test(test_softmax_subnormal),
  };
  return cmocka_run_group_tests(tests, fx_setup, fx_teardown);
}
