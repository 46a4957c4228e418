/* Zero-size buffers and empty tensors: create, views, I/O and ops, with no
 * dummy buffer anywhere. */
#include "appapi.h"


static void test_zero_size_buffer(void** state) {
  (void)state;
  bp_buffer_t* buf = NULL;
  assert_ok(bp_buffer_allocate(g_cpu, 0, 0, &buf));
  assert_int_equal(bp_buffer_size(buf), 0);
  unsigned char byte = 7;
  assert_ok(bp_copy_host_to_buffer(g_stream, &byte, buf, 0, 0));
  assert_status(bp_copy_host_to_buffer(g_stream, &byte, buf, 0, 1), BP_OUT_OF_RANGE,
                "exceeds the buffer size 0");
  assert_status(bp_copy_buffer_to_host(g_stream, buf, 0, &byte, 1), BP_OUT_OF_RANGE,
                "exceeds the buffer size 0");
  /* An empty tensor over it; one element would not fit. */
  bp_tensor_t* t = NULL;
  assert_ok(bp_tensor_from_buffer(buf, BP_DTYPE_F32, 2, (int64_t[]){0, 5}, NULL, 0, &t));
  ops_track(t);
  assert_int_equal(bp_tensor_numel(t), 0);
  assert_status(bp_tensor_from_buffer(buf, BP_DTYPE_F32, 1, (int64_t[]){1}, NULL, 0, &t),
                BP_OUT_OF_RANGE, "the buffer has 0 bytes");
  bp_buffer_release(buf); /* the tensor keeps it */
  assert_ok(bp_stream_synchronize(g_stream));
}

static void test_empty_tensor_paths(void** state) {
  (void)state;
  bp_tensor_t* e = ops_tensor(g_cpu, BP_DTYPE_F32, 2, (int64_t[]){0, 3});
  assert_int_equal(bp_buffer_size(bp_tensor_buffer(e)), 0);
  /* Views. */
  bp_tensor_t* v = NULL;
  assert_ok(bp_tensor_permute(e, (int64_t[]){1, 0}, &v));
  ops_track(v);
  assert_int_equal(bp_tensor_sizes(v)[0], 3);
  assert_ok(bp_tensor_view(e, 2, (int64_t[]){3, 0}, &v));
  ops_track(v);
  assert_ok(bp_tensor_slice(e, 1, 1, 3, 1, &v));
  ops_track(v);
  assert_ok(bp_tensor_unsqueeze(e, 0, &v));
  ops_track(v);
  assert_ok(bp_tensor_expand(e, 3, (int64_t[]){4, 0, 3}, &v));
  ops_track(v);
  assert_int_equal(bp_tensor_numel(v), 0);
  /* I/O of zero bytes. */
  assert_ok(bp_tensor_write(g_stream, e, NULL, 0));
  assert_ok(bp_tensor_read(g_stream, e, NULL, 0));
  /* Ops: elementwise (allocated output is empty too), a reduction to a
   * value, a matmul with an empty inner dim, cat with a non-empty tensor. */
  bp_tensor_t* sum = NULL;
  assert_ok(bp_op_add(g_stream, e, e, NULL, &sum));
  ops_track(sum);
  assert_int_equal(bp_tensor_numel(sum), 0);
  assert_int_equal(bp_buffer_size(bp_tensor_buffer(sum)), 0);
  bp_tensor_t* total = NULL;
  assert_ok(bp_op_sum(g_stream, e, NULL, &total));
  ops_track(total);
  bp_scalar_t s;
  assert_ok(bp_tensor_item(g_stream, total, &s));
  assert_true(s.kind == BP_SCALAR_FLOAT && s.v.f == 0.0);
  bp_tensor_t* a = ops_tensor(g_cpu, BP_DTYPE_F32, 2, (int64_t[]){2, 0});
  bp_tensor_t* mm = NULL;
  assert_ok(bp_op_mm(g_stream, a, e, NULL, &mm));
  ops_track(mm);
  float r[6] = {1, 1, 1, 1, 1, 1};
  assert_ok(bp_tensor_read(g_stream, mm, r, sizeof(r)));
  for (int i = 0; i < 6; ++i) assert_true(r[i] == 0.0f);
  const float ones[3] = {1, 2, 3};
  bp_tensor_t* row = ops_tensor(g_cpu, BP_DTYPE_F32, 2, (int64_t[]){1, 3});
  assert_ok(bp_tensor_write(g_stream, row, ones, sizeof(ones)));
  bp_tensor_t* cat = NULL;
  bp_dim_attrs_t dim0 = {.struct_size = sizeof(dim0), .dim = 0};
  assert_ok(bp_op_cat(g_stream, (const bp_tensor_t*[]){e, row, e}, 3, &dim0, &cat));
  ops_track(cat);
  assert_int_equal(bp_tensor_sizes(cat)[0], 1);
  assert_ok(bp_tensor_read(g_stream, cat, r, 3 * sizeof(float)));
  assert_memory_equal(r, ones, sizeof(ones));
}

int run_empty_tests(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_teardown(test_zero_size_buffer, ops_release_all),
      cmocka_unit_test_teardown(test_empty_tensor_paths, ops_release_all),
  };
  return cmocka_run_group_tests_name("empty", tests, appapi_stream_setup,
                                     appapi_stream_teardown);
}
