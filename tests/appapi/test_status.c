/* The unsupported status and its reason, as an application reads them. */
#include "appapi.h"

static void test_unsupported_reason(void** state) {
  (void)state;
  assert_string_equal(bp_status_name(BP_UNSUPPORTED), "UNSUPPORTED");
  assert_string_equal(bp_support_reason_name(BP_SUPPORT_RANK), "rank");
  assert_string_equal(bp_support_reason_name(BP_SUPPORT_OK), "ok");
  assert_string_equal(bp_support_reason_name(1000), "unknown");
  /* cpu has an abs kernel but not for c64: UNSUPPORTED, DTYPE,
   * nothing allocated, and the generic entry point says the same. */
  bp_tensor_t* x = ops_tensor(g_cpu, BP_DTYPE_C64, 1, (int64_t[]){8});
  bp_tensor_t* out = NULL;
  assert_status(bp_op_abs(g_stream, x, NULL, &out), BP_UNSUPPORTED, "does not support op 'abs'");
  assert_int_equal(bp_status_support_reason(), BP_SUPPORT_DTYPE);
  assert_non_null(strstr(bp_status_message(), "(dtype)"));
  assert_null(out);
  const bp_tensor_t* in[1] = {x};
  assert_int_equal(bp_op_run(g_stream, BP_OP_abs, in, 1, NULL, &out, 1), BP_UNSUPPORTED);
  assert_int_equal(bp_status_support_reason(), BP_SUPPORT_DTYPE);
  /* A validation error is not a support refusal. */
  assert_status(bp_op_abs(g_stream, NULL, NULL, &out), BP_INVALID_ARGUMENT, "self");
  assert_int_equal(bp_status_support_reason(), BP_SUPPORT_OK);
}

int run_status_tests(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_teardown(test_unsupported_reason, ops_release_all),
  };
  return cmocka_run_group_tests_name("status", tests, appapi_stream_setup,
                                     appapi_stream_teardown);
}
