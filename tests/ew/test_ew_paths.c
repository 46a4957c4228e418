/* Fast paths of the CPU elementwise driver and of the f32 reductions,
 * checked element by element: copies of transposed views (tiled; sizes not
 * multiples of the tile, 1-, 2-, 4- and 8-byte elements, batched), f16 <->
 * f32 casts of lengths around the vector width, including specials, and
 * sum / mean / amax / amin over rows long enough for the multi-stream
 * kernels and over groups of rows (with and without a NaN). */
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

/* out = copy of permute(src [b, r, c], (0, 2, 1)); checks every element. */
static void check_transpose(uint32_t dtype, int64_t b, int64_t r, int64_t c) {
  size_t es = bp_dtype_size(dtype);
  int64_t sz[3] = {b, r, c}, tsz[3] = {b, c, r};
  size_t n = (size_t)(b * r * c);
  unsigned char* host = malloc(n * es);
  unsigned char* got = malloc(n * es);
  assert_non_null(host);
  assert_non_null(got);
  for (size_t i = 0; i < n * es; i++) host[i] = (unsigned char)(i * 131u + (i >> 8));
  bp_tensor_t *src = NULL, *view = NULL, *dst = NULL;
  assert_int_equal(bp_tensor_create(g_dev, dtype, 3, sz, &src), BP_OK);
  assert_int_equal(bp_tensor_write(g_stream, src, host, n * es), BP_OK);
  int64_t perm[3] = {0, 2, 1};
  assert_int_equal(bp_tensor_permute(src, perm, &view), BP_OK);
  assert_int_equal(bp_tensor_create(g_dev, dtype, 3, tsz, &dst), BP_OK);
  assert_int_equal(bp_op_clone(g_stream, view, NULL, &dst), BP_OK);
  assert_int_equal(bp_tensor_read(g_stream, dst, got, n * es), BP_OK);
  for (int64_t k = 0; k < b; k++)
    for (int64_t i = 0; i < c; i++)
      for (int64_t j = 0; j < r; j++) {
        size_t at = (size_t)((k * c + i) * r + j), from = (size_t)((k * r + j) * c + i);
        if (memcmp(got + at * es, host + from * es, es) != 0) {
          print_error("%s [%lld, %lld, %lld]: element (%lld, %lld, %lld) differs\n",
                      bp_dtype_name(dtype), (long long)b, (long long)r, (long long)c,
                      (long long)k, (long long)i, (long long)j);
          fail();
        }
      }
  bp_tensor_release(src);
  bp_tensor_release(view);
  bp_tensor_release(dst);
  free(host);
  free(got);
}

static void test_transposed_copies(void** state) {
  (void)state;
  check_transpose(BP_DTYPE_F32, 1, 100, 67);
  check_transpose(BP_DTYPE_F32, 1, 32, 32);
  check_transpose(BP_DTYPE_F32, 3, 45, 70);
  check_transpose(BP_DTYPE_F16, 1, 65, 129);
  check_transpose(BP_DTYPE_U8, 2, 33, 97);
  check_transpose(BP_DTYPE_I64, 1, 64, 31);
  check_transpose(BP_DTYPE_F64, 1, 40, 41);
}

static void test_f16_casts(void** state) {
  (void)state;
  static const int64_t lens[] = {1, 7, 8, 9, 15, 16, 17, 1000, 4099};
  for (size_t l = 0; l < sizeof lens / sizeof lens[0]; l++) {
    int64_t n = lens[l];
    float* f = malloc((size_t)n * sizeof(float));
    float* back = malloc((size_t)n * sizeof(float));
    assert_non_null(f);
    assert_non_null(back);
    static const float specials[] = {0.0f, -0.0f, INFINITY, -INFINITY, 65504.0f, 65520.0f,
                                     6.1e-5f, 5.96e-8f, 2.98e-8f, 1.0f / 3.0f};
    for (int64_t i = 0; i < n; i++)
      f[i] = i < 10 ? specials[i] : (float)((i * 7919) % 20011) / 97.0f - 100.0f;
    bp_tensor_t *t = NULL, *h = NULL, *g = NULL;
    assert_int_equal(bp_tensor_create(g_dev, BP_DTYPE_F32, 1, &n, &t), BP_OK);
    assert_int_equal(bp_tensor_write(g_stream, t, f, (size_t)n * sizeof(float)), BP_OK);
    bp_cast_attrs_t to_h = {.struct_size = sizeof to_h, .dtype = BP_DTYPE_F16};
    bp_cast_attrs_t to_f = {.struct_size = sizeof to_f, .dtype = BP_DTYPE_F32};
    assert_int_equal(bp_op_to_copy(g_stream, t, &to_h, &h), BP_OK);
    assert_int_equal(bp_op_to_copy(g_stream, h, &to_f, &g), BP_OK);
    assert_int_equal(bp_tensor_read(g_stream, g, back, (size_t)n * sizeof(float)), BP_OK);
    for (int64_t i = 0; i < n; i++) {
      /* The round trip is f32 -> nearest-even f16 -> exact f32. */
      double x = f[i], y = back[i];
      if (isinf(x) || fabs(x) >= 65520.0) {
        assert_true(isinf(y) && signbit(x) == signbit(y));
        continue;
      }
      double ulp = fabs(x) < 6.103515625e-05 ? 5.960464477539063e-08
                                              : ldexp(1.0, ilogb(x) - 10);
      if (fabs(y - x) > 0.5 * ulp || signbit(x) != signbit(y)) {
        print_error("n=%lld element %lld: %.9g -> %.9g\n", (long long)n, (long long)i, x, y);
        fail();
      }
    }
    bp_tensor_release(t);
    bp_tensor_release(h);
    bp_tensor_release(g);
    free(f);
    free(back);
  }
}

/* Reduces x [rows, cols] over dim 1 with `op` and checks every row against
 * a double-precision loop (sums: relative 1e-5; extremes: exact). */
static void check_rows(uint32_t op, int64_t rows, int64_t cols, int64_t nan_at) {
  size_t n = (size_t)(rows * cols);
  float* x = malloc(n * sizeof(float));
  float* got = malloc((size_t)rows * sizeof(float));
  assert_non_null(x);
  assert_non_null(got);
  for (size_t i = 0; i < n; i++) x[i] = (float)((i * 2654435761u) % 1000003) / 1000.0f - 500.0f;
  if (nan_at >= 0) x[nan_at] = NAN;
  int64_t sz[2] = {rows, cols}, osz[1] = {rows};
  bp_tensor_t *t = NULL, *o = NULL;
  assert_int_equal(bp_tensor_create(g_dev, BP_DTYPE_F32, 2, sz, &t), BP_OK);
  assert_int_equal(bp_tensor_create(g_dev, BP_DTYPE_F32, 1, osz, &o), BP_OK);
  assert_int_equal(bp_tensor_write(g_stream, t, x, n * sizeof(float)), BP_OK);
  bp_reduce_attrs_t ra = {.struct_size = sizeof ra, .num_dims = 1, .dims = {1}};
  const bp_tensor_t* in[1] = {t};
  bp_tensor_t* out[1] = {o};
  assert_int_equal(bp_op_run(g_stream, op, in, 1, &ra, out, 1), BP_OK);
  assert_int_equal(bp_tensor_read(g_stream, o, got, (size_t)rows * sizeof(float)), BP_OK);
  for (int64_t r = 0; r < rows; r++) {
    double sum = 0, mag = 0, mx = -INFINITY, mn = INFINITY;
    int nan = 0;
    for (int64_t c = 0; c < cols; c++) {
      double v = x[r * cols + c];
      nan |= isnan(v);
      sum += v;
      mag += fabs(v);
      mx = v > mx ? v : mx;
      mn = v < mn ? v : mn;
    }
    double want = op == BP_OP_sum ? sum : op == BP_OP_mean ? sum / (double)cols
                : op == BP_OP_amax ? mx : mn;
    double tol = op == BP_OP_sum ? 1e-5 * mag : op == BP_OP_mean ? 1e-5 * mag / (double)cols : 0;
    if (nan ? !isnan(got[r]) : fabs(got[r] - want) > tol) {
      print_error("op %u [%lld, %lld] row %lld: got %.9g, want %.9g\n", op, (long long)rows,
                  (long long)cols, (long long)r, got[r], want);
      fail();
    }
  }
  bp_tensor_release(t);
  bp_tensor_release(o);
  free(x);
  free(got);
}

static void test_f32_reductions(void** state) {
  (void)state;
  static const uint32_t ops[] = {BP_OP_sum, BP_OP_mean, BP_OP_amax, BP_OP_amin};
  for (size_t k = 0; k < sizeof ops / sizeof ops[0]; k++) {
    check_rows(ops[k], 3, 20011, -1);      /* long rows: quarter streams + tail */
    check_rows(ops[k], 2, 40000, 30001);   /* a NaN in the third quarter */
    check_rows(ops[k], 11, 1031, -1);      /* groups of four rows + leftovers */
    check_rows(ops[k], 9, 64, 4 * 64 + 5); /* a NaN in one row of a group */
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_transposed_copies),
      cmocka_unit_test(test_f16_casts),
      cmocka_unit_test(test_f32_reductions),
  };
  return cmocka_run_group_tests(tests, fx_setup, fx_teardown);
}
