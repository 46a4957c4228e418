/* Creation ops allocate their output like every other op: outputs[0] ==
 * NULL takes the dtype and shape from the attributes (PyTorch's default
 * dtypes), and a given output must agree with what the attributes set. */
#include "appapi.h"

static bp_tensor_t* run1(uint32_t op, const void* attrs) {
  bp_tensor_t* out = NULL;
  assert_ok(bp_op_run(g_stream, op, NULL, 0, attrs, &out, 1));
  assert_non_null(out);
  return ops_track(out);
}

static void expect_meta(const bp_tensor_t* t, uint32_t dtype, uint32_t rank, const int64_t* sizes) {
  assert_string_equal(bp_dtype_name(bp_tensor_dtype(t)), bp_dtype_name(dtype));
  assert_int_equal(bp_tensor_rank(t), rank);
  for (uint32_t d = 0; d < rank; ++d) assert_int_equal(bp_tensor_sizes(t)[d], sizes[d]);
  assert_true(bp_tensor_is_contiguous(t));
}

static void test_fill_allocates(void** state) {
  (void)state;
  bp_fill_attrs_t a = {.struct_size = sizeof(a), .value = {.kind = BP_SCALAR_FLOAT, .v.f = 2.5},
                       .has_shape = 1, .rank = 2, .sizes = {2, 3}};
  bp_tensor_t* t = run1(BP_OP_fill, &a);
  expect_meta(t, BP_DTYPE_F32, 2, (int64_t[]){2, 3});
  float f[6];
  assert_ok(bp_tensor_read(g_stream, t, f, sizeof(f)));
  for (int i = 0; i < 6; ++i) assert_true(f[i] == 2.5f);
  /* The typed function too; the default dtype follows the value. */
  a.value = (bp_scalar_t){.kind = BP_SCALAR_INT, .v.i = -7};
  a.rank = 1;
  a.sizes[0] = 3;
  bp_tensor_t* out = NULL;
  assert_ok(bp_op_fill(g_stream, &a, &out));
  ops_track(out);
  expect_meta(out, BP_DTYPE_I64, 1, (int64_t[]){3});
  int64_t i64[3];
  assert_ok(bp_tensor_read(g_stream, out, i64, sizeof(i64)));
  assert_true(i64[0] == -7 && i64[2] == -7);
  a.value = (bp_scalar_t){.kind = BP_SCALAR_BOOL, .v.b = 1};
  expect_meta(run1(BP_OP_fill, &a), BP_DTYPE_BOOL, 1, (int64_t[]){3});
  a.dtype = BP_DTYPE_F16;
  expect_meta(run1(BP_OP_fill, &a), BP_DTYPE_F16, 1, (int64_t[]){3});
  /* scalar_tensor: a 0-d shape. */
  a = (bp_fill_attrs_t){.struct_size = sizeof(a), .value = {.kind = BP_SCALAR_FLOAT, .v.f = 4},
                        .has_shape = 1, .rank = 0};
  bp_scalar_t s;
  assert_ok(bp_tensor_item(g_stream, run1(BP_OP_fill, &a), &s));
  assert_true(s.kind == BP_SCALAR_FLOAT && s.v.f == 4.0);

  /* Neither an output nor a shape; a given output that disagrees. */
  out = NULL;
  a.has_shape = 0;
  assert_status(bp_op_fill(g_stream, &a, &out), BP_INVALID_ARGUMENT, "pass outputs[0]");
  assert_null(out);
  out = ops_tensor(g_cpu, BP_DTYPE_F32, 1, (int64_t[]){4});
  a.has_shape = 1;
  a.rank = 1;
  a.sizes[0] = 5;
  assert_status(bp_op_fill(g_stream, &a, &out), BP_INVALID_ARGUMENT,
                "attrs.sizes give shape [5] but output 'out' has shape [4]");
  a.sizes[0] = 4;
  a.dtype = BP_DTYPE_F64;
  assert_status(bp_op_fill(g_stream, &a, &out), BP_INVALID_ARGUMENT,
                "attrs.dtype is f64 but output 'out' has dtype f32");
  a.dtype = BP_DTYPE_F32;
  assert_ok(bp_op_fill(g_stream, &a, &out));
  a.has_shape = 2;
  assert_status(bp_op_fill(g_stream, &a, &out), BP_INVALID_ARGUMENT, "has_shape = 2");
  a.has_shape = 1;
  a.sizes[0] = -1;
  assert_status(bp_op_fill(g_stream, &a, &out), BP_INVALID_ARGUMENT, "attrs.sizes[0] = -1");
  a.sizes[0] = 1;
  a.rank = 9;
  assert_status(bp_op_fill(g_stream, &a, &out), BP_INVALID_ARGUMENT, "attrs.rank = 9");
}

static void test_arange_allocates(void** state) {
  (void)state;
  bp_arange_attrs_t a = {.struct_size = sizeof(a), .start = {.kind = BP_SCALAR_INT, .v.i = 0},
                         .end = {.kind = BP_SCALAR_INT, .v.i = 10},
                         .step = {.kind = BP_SCALAR_INT, .v.i = 3}};
  bp_tensor_t* t = run1(BP_OP_arange, &a);
  expect_meta(t, BP_DTYPE_I64, 1, (int64_t[]){4});
  int64_t i[4];
  assert_ok(bp_tensor_read(g_stream, t, i, sizeof(i)));
  assert_true(i[0] == 0 && i[1] == 3 && i[2] == 6 && i[3] == 9);
  a.dtype = BP_DTYPE_F64;
  expect_meta(run1(BP_OP_arange, &a), BP_DTYPE_F64, 1, (int64_t[]){4});
  /* A float bound: f32 by default, the same length formula as inference. */
  a = (bp_arange_attrs_t){.struct_size = sizeof(a), .start = {.kind = BP_SCALAR_FLOAT, .v.f = 1},
                          .end = {.kind = BP_SCALAR_FLOAT, .v.f = -0.25},
                          .step = {.kind = BP_SCALAR_FLOAT, .v.f = -0.5}};
  t = run1(BP_OP_arange, &a);
  expect_meta(t, BP_DTYPE_F32, 1, (int64_t[]){3});
  float f[3];
  assert_ok(bp_tensor_read(g_stream, t, f, sizeof(f)));
  assert_true(f[0] == 1.0f && f[1] == 0.5f && f[2] == 0.0f);
  bp_tensor_desc_t d = {.struct_size = sizeof(d)};
  bp_tensor_desc_t* dp = &d;
  assert_ok(bp_op_infer(BP_OP_arange, NULL, 0, &a, &dp, 1));
  assert_int_equal(d.sizes[0], 3);
  assert_int_equal(d.dtype, BP_DTYPE_F32);
  /* Empty range: an empty tensor. */
  a.end.v.f = 1.0;
  expect_meta(run1(BP_OP_arange, &a), BP_DTYPE_F32, 1, (int64_t[]){0});
  /* A given output of another dtype than attrs.dtype. */
  bp_tensor_t* out = ops_tensor(g_cpu, BP_DTYPE_I32, 1, (int64_t[]){0});
  a.dtype = BP_DTYPE_F32;
  assert_status(bp_op_arange(g_stream, &a, &out), BP_INVALID_ARGUMENT,
                "attrs.dtype is f32 but output 'out' has dtype i32");
  a.dtype = BP_DTYPE_BOOL;
  out = NULL;
  assert_status(bp_op_arange(g_stream, &a, &out), BP_INVALID_ARGUMENT, "bool");
  a.dtype = 999;
  assert_status(bp_op_arange(g_stream, &a, &out), BP_INVALID_ARGUMENT, "attrs.dtype = 999");
  assert_null(out);
}

/* rand, randn, randperm: the allocated output holds the same bits as a given
 * one with the same seed and offset. */
static void check_random_same(uint32_t op, bp_random_attrs_t a, uint32_t dtype, int64_t n) {
  bp_tensor_t* t = run1(op, &a);
  expect_meta(t, dtype, a.rank, a.sizes);
  bp_random_attrs_t given_attrs = {.struct_size = sizeof(given_attrs), .seed = a.seed,
                                   .offset = a.offset};
  bp_tensor_t* g = ops_tensor(g_cpu, dtype, a.rank, a.sizes);
  assert_ok(bp_op_run(g_stream, op, NULL, 0, &given_attrs, &g, 1));
  size_t bytes = (size_t)n * bp_dtype_size(dtype);
  unsigned char x[512], y[512];
  assert_true(bytes <= sizeof(x));
  assert_ok(bp_tensor_read(g_stream, t, x, bytes));
  assert_ok(bp_tensor_read(g_stream, g, y, bytes));
  assert_memory_equal(x, y, bytes);
}

static void test_random_allocates(void** state) {
  (void)state;
  bp_random_attrs_t a = {.struct_size = sizeof(a), .seed = 42, .offset = 3, .has_shape = 1,
                         .rank = 2, .sizes = {4, 5}};
  check_random_same(BP_OP_rand, a, BP_DTYPE_F32, 20);
  check_random_same(BP_OP_randn, a, BP_DTYPE_F32, 20);
  a.dtype = BP_DTYPE_F64;
  check_random_same(BP_OP_randn, a, BP_DTYPE_F64, 20);
  a = (bp_random_attrs_t){.struct_size = sizeof(a), .seed = 7, .has_shape = 1, .rank = 1,
                          .sizes = {10}};
  check_random_same(BP_OP_randperm, a, BP_DTYPE_I64, 10);
  bp_tensor_t* p = run1(BP_OP_randperm, &a);
  int64_t v[10];
  int seen[10] = {0};
  assert_ok(bp_tensor_read(g_stream, p, v, sizeof(v)));
  for (int i = 0; i < 10; ++i) {
    assert_true(v[i] >= 0 && v[i] < 10);
    seen[v[i]]++;
  }
  for (int i = 0; i < 10; ++i) assert_int_equal(seen[i], 1);

  bp_tensor_t* out = NULL;
  a.dtype = BP_DTYPE_I32;
  assert_status(bp_op_rand(g_stream, &a, &out), BP_INVALID_ARGUMENT, "a floating dtype");
  a.dtype = BP_DTYPE_INVALID;
  a.rank = 2;
  assert_status(bp_op_randperm(g_stream, &a, &out), BP_INVALID_ARGUMENT, "rank 1");
  a.has_shape = 0;
  assert_status(bp_op_randn(g_stream, &a, &out), BP_INVALID_ARGUMENT, "pass outputs[0]");
  assert_null(out);
  /* dropout's outputs follow its input: a shape there is refused. */
  bp_tensor_t* mask = NULL;
  a.has_shape = 1;
  a.p = 0.5;
  a.train = 1;
  assert_status(bp_op_dropout(g_stream, ops_tensor(g_cpu, BP_DTYPE_F32, 1, (int64_t[]){4}), &a,
                              &out, &mask),
                BP_INVALID_ARGUMENT, "dropout's outputs follow its input");
}

int run_creation_tests(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_teardown(test_fill_allocates, ops_release_all),
      cmocka_unit_test_teardown(test_arange_allocates, ops_release_all),
      cmocka_unit_test_teardown(test_random_allocates, ops_release_all),
  };
  return cmocka_run_group_tests_name("creation", tests, appapi_stream_setup,
                                     appapi_stream_teardown);
}
