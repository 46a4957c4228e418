/* Reduction prologues on cpu:0 through the public region API: GRAPH
 * regions of elementwise nodes and a last sum / mean / amax / amin against
 * the eager ops, in f64 and f32, with a NaN (amax propagates it into its
 * row only), a strided output, the region's saved bytes, and the CPU's
 * refusals with their reasons. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "cpu_fixture.h"
#include "region/region_builder.h"
#include "region/region_compile.h"

static void fill(float* x, int64_t n, uint32_t seed) {
  for (int64_t i = 0; i < n; i++) {
    seed = seed * 1664525u + 1013904223u;
    x[i] = (float)((seed >> 8) & 0xffff) / 32768.0f - 1.0f;
  }
}

static void launch_ok(bp_region_t* r, const bp_tensor_t* const* args, uint32_t n) {
  bp_region_info_t info = {.struct_size = sizeof info};
  assert_int_equal(bp_region_get_info(r, &info), BP_OK);
  assert_int_equal(info.workspace_bytes, 0); /* the chain's result is never stored */
  assert_int_equal(bp_region_launch(g_stream, r, args, n, NULL), BP_OK);
  assert_int_equal(bp_stream_synchronize(g_stream), BP_OK);
}

/* sum((x - y)^2) over the last dim in f64, 37 rows of 1000 (tails of the
 * f64 lanes), against eager sub, mul, sum. */
static void test_f64_sum_of_squares(void** state) {
  (void)state;
  enum { M = 37, N = 1000 };
  static float xf[M * N], yf[M * N];
  static double x[M * N], y[M * N];
  double got[M], want[M];
  fill(xf, M * N, 3);
  fill(yf, M * N, 4);
  for (int i = 0; i < M * N; i++) x[i] = xf[i], y[i] = yf[i];
  bp_tensor_t* tx = FX_T(F64, x, M, N);
  bp_tensor_t* ty = FX_T(F64, y, M, N);
  bp_tensor_t* o = FX_T(F64, NULL, M);
  rb_t b;
  rb_init(&b);
  uint32_t vx = RB_V(&b, F64, M, N), vy = RB_V(&b, F64, M, N), vo = RB_V(&b, F64, M), d = RB_V(&b, F64, M, N),
           q = RB_V(&b, F64, M, N);
  bp_reduce_attrs_t ra = {.struct_size = sizeof ra, .num_dims = 1, .dims = {-1}};
  rb_node(&b, BP_OP_sub, NULL, 2, 1, vx, vy, d);
  rb_node(&b, BP_OP_mul, NULL, 2, 1, d, d, q);
  rb_node(&b, BP_OP_sum, &ra, 1, 1, q, vo);
  bp_region_t* r = compile_ok(rb_desc(&b, BP_REGION_GRAPH, 3, 2, NULL));
  const bp_tensor_t* args[3] = {tx, ty, o};
  launch_ok(r, args, 3);
  fx_read(o, got, M, 8);
  bp_tensor_t *td = NULL, *tq = NULL, *ts = NULL;
  assert_int_equal(bp_op_sub(g_stream, tx, ty, NULL, &td), BP_OK);
  assert_int_equal(bp_op_mul(g_stream, td, td, NULL, &tq), BP_OK);
  assert_int_equal(bp_op_sum(g_stream, tq, &ra, &ts), BP_OK);
  fx_read(ts, want, M, 8);
  for (int i = 0; i < M; i++) assert_true(fabs(got[i] - want[i]) <= 1e-12 * fabs(want[i]));
  bp_tensor_release(td);
  bp_tensor_release(tq);
  bp_tensor_release(ts);
  bp_region_release(r);
}

/* amax(abs(x)) over rows of 40000 (several chunks per row, partials
 * combined) with a NaN in row 1: that row is NaN, the others equal eager;
 * written to a strided output (every other element of a [3, 2] tensor,
 * given as a [3] view). The region's bytes load and run the same. */
static void test_f32_amax_nan_strided_saved(void** state) {
  (void)state;
  enum { M = 3, N = 40000 };
  static float x[M * N];
  fill(x, M * N, 9);
  x[N + 12345] = NAN;
  bp_tensor_t* tx = FX_T(F32, x, M, N);
  static const float zeros[M * 2];
  bp_tensor_t* wide = FX_T(F32, zeros, M, 2);
  bp_tensor_t* o = NULL;
  assert_int_equal(bp_tensor_select(wide, 1, 0, &o), BP_OK);
  rb_t b;
  rb_init(&b);
  uint32_t vx = RB_V(&b, F32, M, N), vo = RB_V(&b, F32, M), a = RB_V(&b, F32, M, N);
  bp_reduce_attrs_t ra = {.struct_size = sizeof ra, .num_dims = 1, .dims = {1}};
  rb_node(&b, BP_OP_abs, NULL, 1, 1, vx, a);
  rb_node(&b, BP_OP_amax, &ra, 1, 1, a, vo);
  bp_region_t* r = compile_ok(rb_desc(&b, BP_REGION_GRAPH, 2, 1, NULL));
  const bp_tensor_t* args[2] = {tx, o};
  launch_ok(r, args, 2);
  float got[M * 2], want[M];
  fx_read(wide, got, M * 2, 4);
  bp_tensor_t *ta = NULL, *tm = NULL;
  assert_int_equal(bp_op_abs(g_stream, tx, NULL, &ta), BP_OK);
  assert_int_equal(bp_op_amax(g_stream, ta, &ra, &tm), BP_OK);
  fx_read(tm, want, M, 4);
  assert_true(isnan(want[1]));
  for (int i = 0; i < M; i++) {
    fx_assert_close(&got[2 * i], &want[i], 1, 0);
    assert_true(got[2 * i + 1] == 0.0f); /* the column between stays as it was */
  }
  /* Saved and loaded: the same step, the same bits. */
  uint64_t size = 0;
  assert_int_equal(bp_region_serialize(r, NULL, 0, &size), BP_OK);
  unsigned char* bytes = malloc(size);
  assert_non_null(bytes);
  assert_int_equal(bp_region_serialize(r, bytes, size, &size), BP_OK);
  bp_region_t* r2 = NULL;
  assert_int_equal(bp_region_deserialize(g_dev, bytes, size, &r2), BP_OK);
  free(bytes);
  float again[M * 2];
  launch_ok(r2, args, 2);
  fx_read(wide, again, M * 2, 4);
  assert_memory_equal(again, got, sizeof got);
  bp_tensor_release(ta);
  bp_tensor_release(tm);
  bp_tensor_release(o);
  bp_region_release(r2);
  bp_region_release(r);
}

/* What the CPU refuses, with the reason: an f16 result, a sum whose
 * reduced dim comes before a kept one, a sum into another dtype. */
static void test_refusals(void** state) {
  (void)state;
  static const struct {
    uint32_t dtype, out_dtype;
    int32_t dim;
    uint32_t reason;
    const char* needle;
  } k_cases[] = {
      {BP_DTYPE_F16, BP_DTYPE_F16, 1, BP_SUPPORT_DTYPE, "not f32 or f64"},
      {BP_DTYPE_F32, BP_DTYPE_F32, 0, BP_SUPPORT_ATTRIBUTE, "after every kept dim"},
      {BP_DTYPE_F32, BP_DTYPE_F64, 1, BP_SUPPORT_DTYPE, "changes the dtype"},
  };
  for (size_t k = 0; k < sizeof k_cases / sizeof k_cases[0]; k++) {
    rb_t b;
    rb_init(&b);
    uint32_t vx = rb_value(&b, k_cases[k].dtype, 2, (int64_t[]){6, 10});
    uint32_t vo = rb_value(&b, k_cases[k].out_dtype, 1, (int64_t[]){k_cases[k].dim == 1 ? 6 : 10});
    uint32_t e = rb_value(&b, k_cases[k].dtype, 2, (int64_t[]){6, 10});
    bp_reduce_attrs_t ra = {.struct_size = sizeof ra, .num_dims = 1, .dims = {k_cases[k].dim},
                            .dtype = k_cases[k].out_dtype == k_cases[k].dtype ? 0 : k_cases[k].out_dtype};
    rb_node(&b, BP_OP_exp, NULL, 1, 1, vx, e);
    rb_node(&b, BP_OP_sum, &ra, 1, 1, e, vo);
    bp_region_t* r = NULL;
    bp_support_t why = {.struct_size = sizeof why};
    fx_assert_status(bp_region_compile(g_dev, rb_desc(&b, BP_REGION_GRAPH, 2, 1, NULL), &why, &r),
                     BP_UNIMPLEMENTED, k_cases[k].needle);
    assert_null(r);
    assert_int_equal(why.reason, k_cases[k].reason);
    assert_non_null(strstr(why.message, "reduction prologue"));
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_teardown(test_f64_sum_of_squares, fx_release_all),
      cmocka_unit_test_teardown(test_f32_amax_nan_strided_saved, fx_release_all),
      cmocka_unit_test_teardown(test_refusals, fx_release_all),
  };
  return cmocka_run_group_tests(tests, fx_setup, fx_teardown);
}
