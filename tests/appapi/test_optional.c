/* Optional values are explicit: pow's Scalar form through its own function,
 * with the same result as the flag form it wraps. (Pooling and upsampling
 * flags: tests/pool.) */
#include "appapi.h"

static void test_pow_scalar(void** state) {
  (void)state;
  const float e[4] = {0, 1, 2, -1};
  bp_tensor_t* x = ops_tensor(g_cpu, BP_DTYPE_F32, 1, (int64_t[]){4});
  assert_ok(bp_tensor_write(g_stream, x, e, sizeof(e)));
  bp_tensor_t* y = NULL;
  bp_scalar_t two = {.kind = BP_SCALAR_FLOAT, .v.f = 2.0};
  assert_ok(bp_op_pow_scalar(g_stream, &two, x, &y));
  ops_track(y);
  float r[4];
  assert_ok(bp_tensor_read(g_stream, y, r, sizeof(r)));
  assert_true(r[0] == 1.0f && r[1] == 2.0f && r[2] == 4.0f && r[3] == 0.5f);
  /* An int base with an i64 exponent stays integral (wrapped-number rule). */
  const int64_t ei[3] = {0, 3, 5};
  bp_tensor_t* xi = ops_tensor(g_cpu, BP_DTYPE_I64, 1, (int64_t[]){3});
  assert_ok(bp_tensor_write(g_stream, xi, ei, sizeof(ei)));
  bp_scalar_t three = {.kind = BP_SCALAR_INT, .v.i = 3};
  bp_tensor_t* yi = NULL;
  assert_ok(bp_op_pow_scalar(g_stream, &three, xi, &yi));
  ops_track(yi);
  assert_int_equal(bp_tensor_dtype(yi), BP_DTYPE_I64);
  int64_t ri[3];
  assert_ok(bp_tensor_read(g_stream, yi, ri, sizeof(ri)));
  assert_true(ri[0] == 1 && ri[1] == 27 && ri[2] == 243);
  /* Errors: no base, a base of kind NONE, a NULL exponent. */
  bp_tensor_t* z = NULL;
  assert_status(bp_op_pow_scalar(g_stream, NULL, x, &z), BP_INVALID_ARGUMENT, "'self'");
  bp_scalar_t none = {.kind = BP_SCALAR_NONE};
  assert_status(bp_op_pow_scalar(g_stream, &none, x, &z), BP_INVALID_ARGUMENT,
                "BP_SCALAR_NONE");
  assert_status(bp_op_pow_scalar(g_stream, &two, NULL, &z), BP_INVALID_ARGUMENT, "'other'");
  assert_null(z);
}

int run_optional_tests(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_teardown(test_pow_scalar, ops_release_all),
  };
  return cmocka_run_group_tests_name("optional", tests, appapi_stream_setup,
                                     appapi_stream_teardown);
}
