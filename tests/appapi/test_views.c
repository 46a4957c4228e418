/* The view and metadata functions that ops.def's view table names, and
 * the table itself at run time. */
#include <dlfcn.h>
#include <math.h>

#include "appapi.h"


/* A cpu tensor holding `bytes` of raw element data. */
static bp_tensor_t* cpu_raw(uint32_t dtype, uint32_t rank, const int64_t* sizes, const void* data,
                            size_t bytes) {
  bp_tensor_t* t = ops_tensor(g_cpu, dtype, rank, sizes);
  assert_ok(bp_tensor_write(g_stream, t, data, bytes));
  return t;
}

static void test_view_table(void** state) {
  (void)state;
  uint32_t n = bp_view_count();
  assert_true(n >= 21);
  int saw_squeeze_dims = 0;
  for (uint32_t i = 0; i < n; ++i) {
    bp_view_info_t info = {.struct_size = sizeof(info)};
    assert_ok(bp_view_get_info(i, &info));
    assert_int_equal(info.index, i);
    assert_non_null(info.name);
    assert_true(strncmp(info.aten, "aten.", 5) == 0);
    assert_true(info.note[0] != '\0');
    /* Every function the table names is exported by libbackplane. */
    if (dlsym(RTLD_DEFAULT, info.function) == NULL) fail_msg("%s is not exported", info.function);
    if (strcmp(info.aten, "aten.squeeze.dims") == 0) {
      assert_string_equal(info.function, "bp_tensor_squeeze_dims");
      saw_squeeze_dims = 1;
    }
  }
  assert_true(saw_squeeze_dims);
  bp_view_info_t info = {.struct_size = sizeof(info)};
  assert_status(bp_view_get_info(n, &info), BP_OUT_OF_RANGE, "out of range");
  assert_status(bp_view_get_info(0, NULL), BP_INVALID_ARGUMENT, "out_info");
  info.struct_size = 8;
  assert_status(bp_view_get_info(0, &info), BP_INVALID_ARGUMENT, "struct_size");
}

static void test_size_stride(void** state) {
  (void)state;
  bp_tensor_t* t = T(F32, 2, 3, 4);
  int64_t v = 0;
  assert_ok(bp_tensor_size(t, 0, &v));
  assert_int_equal(v, 2);
  assert_ok(bp_tensor_size(t, -1, &v));
  assert_int_equal(v, 4);
  assert_ok(bp_tensor_size(t, -3, &v));
  assert_int_equal(v, 2);
  assert_ok(bp_tensor_stride(t, 0, &v));
  assert_int_equal(v, 12);
  assert_ok(bp_tensor_stride(t, -2, &v));
  assert_int_equal(v, 4);
  v = 99;
  assert_status(bp_tensor_size(t, 3, &v), BP_INVALID_ARGUMENT, "dim 3 out of range");
  assert_status(bp_tensor_stride(t, -4, &v), BP_INVALID_ARGUMENT, "dim -4 out of range");
  assert_int_equal(v, 99);
  assert_status(bp_tensor_size(T0(F32), 0, &v), BP_INVALID_ARGUMENT, "rank 0");
  assert_status(bp_tensor_size(NULL, 0, &v), BP_INVALID_ARGUMENT, "'t'");
  assert_status(bp_tensor_stride(t, 0, NULL), BP_INVALID_ARGUMENT, "out_stride");
  /* A strided view's stride. */
  bp_tensor_t* s = NULL;
  assert_ok(bp_tensor_slice(t, 2, 0, 4, 2, &s));
  ops_track(s);
  assert_ok(bp_tensor_stride(s, -1, &v));
  assert_int_equal(v, 2);
  assert_ok(bp_tensor_size(s, -1, &v));
  assert_int_equal(v, 2);
}

static void test_storage_offset(void** state) {
  (void)state;
  bp_tensor_t* t = T(F64, 12);
  int64_t off = -1;
  assert_ok(bp_tensor_storage_offset(t, &off));
  assert_int_equal(off, 0);
  bp_tensor_t* s = NULL;
  assert_ok(bp_tensor_slice(t, 0, 5, 12, 1, &s));
  ops_track(s);
  assert_ok(bp_tensor_storage_offset(s, &off));
  assert_int_equal(off, 5);
  assert_int_equal(bp_tensor_byte_offset(s), 40);
  /* as_strided takes the same unit; NULL keeps the tensor's offset. */
  bp_tensor_t* a = NULL;
  const int64_t sz[1] = {2}, st[1] = {3};
  assert_ok(bp_tensor_as_strided(s, 1, sz, st, &(int64_t){3}, &a));
  ops_track(a);
  assert_ok(bp_tensor_storage_offset(a, &off));
  assert_int_equal(off, 3);
  assert_int_equal(bp_tensor_byte_offset(a), 24);
  assert_ok(bp_tensor_as_strided(s, 1, sz, st, NULL, &a));
  ops_track(a);
  assert_ok(bp_tensor_storage_offset(a, &off));
  assert_int_equal(off, 5);
  /* bp_tensor_from_buffer takes bytes. */
  bp_tensor_t* b = NULL;
  assert_ok(bp_tensor_from_buffer(bp_tensor_buffer(t), BP_DTYPE_F64, 1, sz, NULL, 16, &b));
  ops_track(b);
  assert_ok(bp_tensor_storage_offset(b, &off));
  assert_int_equal(off, 2);
  assert_status(bp_tensor_storage_offset(NULL, &off), BP_INVALID_ARGUMENT, "'t'");
}

static void expect_item(uint32_t dtype, uint32_t rank, const void* data, size_t bytes,
                        uint32_t kind, double f, int64_t i) {
  int64_t ones[2] = {1, 1};
  bp_tensor_t* t = cpu_raw(dtype, rank, ones, data, bytes);
  bp_scalar_t s = {.kind = 99};
  assert_ok(bp_tensor_item(g_stream, t, &s));
  assert_int_equal(s.kind, kind);
  if (kind == BP_SCALAR_FLOAT) {
    if (isnan(f)) {
      assert_true(isnan(s.v.f));
    } else {
      assert_true(s.v.f == f);
      assert_int_equal(signbit(s.v.f) != 0, signbit(f) != 0);
    }
  } else if (kind == BP_SCALAR_INT) {
    assert_int_equal(s.v.i, i);
  } else {
    assert_int_equal(s.v.b, (uint64_t)i);
  }
}

static void test_item(void** state) {
  (void)state;
  expect_item(BP_DTYPE_F32, 0, &(float){2.5f}, 4, BP_SCALAR_FLOAT, 2.5, 0);
  expect_item(BP_DTYPE_F64, 2, &(double){-1e300}, 8, BP_SCALAR_FLOAT, -1e300, 0);
  expect_item(BP_DTYPE_I64, 1, &(int64_t){INT64_MIN}, 8, BP_SCALAR_INT, 0, INT64_MIN);
  expect_item(BP_DTYPE_I8, 1, &(int8_t){-7}, 1, BP_SCALAR_INT, 0, -7);
  expect_item(BP_DTYPE_U8, 1, &(uint8_t){250}, 1, BP_SCALAR_INT, 0, 250);
  expect_item(BP_DTYPE_I16, 1, &(int16_t){-300}, 2, BP_SCALAR_INT, 0, -300);
  expect_item(BP_DTYPE_I32, 1, &(int32_t){123456}, 4, BP_SCALAR_INT, 0, 123456);
  expect_item(BP_DTYPE_BOOL, 0, &(uint8_t){1}, 1, BP_SCALAR_BOOL, 0, 1);
  /* Narrow floats, decoded exactly: normal, subnormal, signed zero, inf, NaN. */
  expect_item(BP_DTYPE_F16, 0, &(uint16_t){0x3C00}, 2, BP_SCALAR_FLOAT, 1.0, 0);
  expect_item(BP_DTYPE_F16, 0, &(uint16_t){0xC248}, 2, BP_SCALAR_FLOAT, -3.140625, 0);
  expect_item(BP_DTYPE_F16, 0, &(uint16_t){0x0001}, 2, BP_SCALAR_FLOAT, ldexp(1, -24), 0);
  expect_item(BP_DTYPE_F16, 0, &(uint16_t){0x8000}, 2, BP_SCALAR_FLOAT, -0.0, 0);
  expect_item(BP_DTYPE_F16, 0, &(uint16_t){0xFC00}, 2, BP_SCALAR_FLOAT, -INFINITY, 0);
  expect_item(BP_DTYPE_F16, 0, &(uint16_t){0x7E00}, 2, BP_SCALAR_FLOAT, NAN, 0);
  expect_item(BP_DTYPE_BF16, 0, &(uint16_t){0x4049}, 2, BP_SCALAR_FLOAT, 3.140625, 0);
  expect_item(BP_DTYPE_BF16, 0, &(uint16_t){0x0001}, 2, BP_SCALAR_FLOAT, ldexp(1, -133), 0);
  expect_item(BP_DTYPE_F8E4M3FN, 0, &(uint8_t){0x7E}, 1, BP_SCALAR_FLOAT, 448.0, 0);
  expect_item(BP_DTYPE_F8E4M3FN, 0, &(uint8_t){0xF8}, 1, BP_SCALAR_FLOAT, -256.0, 0);
  expect_item(BP_DTYPE_F8E4M3FN, 0, &(uint8_t){0x01}, 1, BP_SCALAR_FLOAT, ldexp(1, -9), 0);
  expect_item(BP_DTYPE_F8E4M3FN, 0, &(uint8_t){0x7F}, 1, BP_SCALAR_FLOAT, NAN, 0);
  expect_item(BP_DTYPE_F8E5M2, 0, &(uint8_t){0x7B}, 1, BP_SCALAR_FLOAT, 57344.0, 0);
  expect_item(BP_DTYPE_F8E5M2, 0, &(uint8_t){0x7C}, 1, BP_SCALAR_FLOAT, INFINITY, 0);
  expect_item(BP_DTYPE_F8E5M2, 0, &(uint8_t){0x01}, 1, BP_SCALAR_FLOAT, ldexp(1, -16), 0);

  /* The value after the enqueued work: item synchronizes first. */
  bp_tensor_t* x = cpu_raw(BP_DTYPE_F32, 0, NULL, &(float){-4.0f}, 4);
  bp_tensor_t* y = NULL;
  assert_ok(bp_op_neg(g_stream, x, NULL, &y));
  ops_track(y);
  bp_scalar_t s;
  assert_ok(bp_tensor_item(g_stream, y, &s));
  assert_true(s.kind == BP_SCALAR_FLOAT && s.v.f == 4.0);

  s.kind = 77;
  assert_status(bp_tensor_item(g_stream, T(F32, 2), &s), BP_INVALID_ARGUMENT, "2 elements");
  assert_status(bp_tensor_item(g_stream, ops_tensor(g_cpu, BP_DTYPE_F32, 1, (int64_t[]){0}), &s),
                BP_INVALID_ARGUMENT, "0 elements");
  assert_status(bp_tensor_item(g_stream, ops_tensor(g_cpu, BP_DTYPE_C64, 0, NULL), &s),
                BP_INVALID_ARGUMENT, "c64");
  assert_int_equal(s.kind, 77);
  assert_status(bp_tensor_item(NULL, x, &s), BP_INVALID_ARGUMENT, "stream");
  assert_status(bp_tensor_item(g_stream, x, NULL), BP_INVALID_ARGUMENT, "out_value");
}

static void read_f32(const bp_tensor_t* t, float* out, size_t n) {
  assert_ok(bp_tensor_read(g_stream, t, out, n * sizeof(float)));
}

static void test_resize(void** state) {
  (void)state;
  const float v[6] = {0, 1, 2, 3, 4, 5};
  bp_tensor_t* t = cpu_raw(BP_DTYPE_F32, 2, (int64_t[]){2, 3}, v, sizeof(v));
  /* Fits: only the descriptor changes (dense strides). */
  assert_ok(bp_tensor_resize(NULL, t, 2, (int64_t[]){3, 2}));
  assert_int_equal(bp_tensor_sizes(t)[0], 3);
  assert_int_equal(bp_tensor_strides(t)[0], 2);
  assert_int_equal(bp_buffer_size(bp_tensor_buffer(t)), 24);
  float r[16];
  read_f32(t, r, 6);
  assert_memory_equal(r, v, sizeof(v));
  assert_ok(bp_tensor_resize(NULL, t, 1, (int64_t[]){4}));
  read_f32(t, r, 4);
  assert_memory_equal(r, v, 4 * sizeof(float));
  /* Grows: the old bytes come along, the buffer is new. */
  bp_buffer_t* before = bp_tensor_buffer(t);
  assert_status(bp_tensor_resize(NULL, t, 2, (int64_t[]){4, 4}), BP_INVALID_ARGUMENT,
                "needs a stream");
  assert_ok(bp_tensor_resize(g_stream, t, 2, (int64_t[]){4, 4}));
  assert_true(bp_tensor_buffer(t) != before);
  assert_int_equal(bp_buffer_size(bp_tensor_buffer(t)), 64);
  assert_int_equal(bp_tensor_strides(t)[0], 4);
  read_f32(t, r, 16);
  assert_memory_equal(r, v, sizeof(v));
  /* A view shares the buffer: growing would move it under the view. */
  bp_tensor_t* view = NULL;
  assert_ok(bp_tensor_alias(t, &view));
  assert_status(bp_tensor_resize(g_stream, t, 1, (int64_t[]){100}), BP_FAILED_PRECONDITION,
                "1 other references");
  assert_status(bp_tensor_resize(g_stream, view, 1, (int64_t[]){100}), BP_FAILED_PRECONDITION,
                "does not own it");
  /* Within the buffer, a view resizes too, keeping its storage offset. */
  bp_tensor_t* tail = NULL;
  assert_ok(bp_tensor_slice(t, 0, 1, 4, 1, &tail)); /* offset 4 elements */
  ops_track(tail);
  assert_ok(bp_tensor_resize(NULL, tail, 1, (int64_t[]){12}));
  int64_t off = 0;
  assert_ok(bp_tensor_storage_offset(tail, &off));
  assert_int_equal(off, 4);
  assert_status(bp_tensor_resize(NULL, tail, 1, (int64_t[]){13}), BP_INVALID_ARGUMENT,
                "needs a stream");
  bp_tensor_release(view);
  /* Bad shapes are refused and leave the tensor as it was. */
  assert_status(bp_tensor_resize(g_stream, t, 1, (int64_t[]){-1}), BP_INVALID_ARGUMENT,
                "negative");
  assert_status(bp_tensor_resize(g_stream, t, 9, (int64_t[]){1, 1, 1, 1, 1, 1, 1, 1, 1}),
                BP_INVALID_ARGUMENT, "rank 9");
  assert_int_equal(bp_tensor_rank(t), 2);
  assert_int_equal(bp_tensor_sizes(t)[1], 4);
  assert_ok(bp_tensor_resize(NULL, t, 1, (int64_t[]){0}));
  assert_int_equal(bp_tensor_numel(t), 0);
}

static void expect_shape(const bp_tensor_t* t, uint32_t rank, const int64_t* sizes,
                         const int64_t* strides) {
  assert_int_equal(bp_tensor_rank(t), rank);
  for (uint32_t d = 0; d < rank; ++d) {
    assert_int_equal(bp_tensor_sizes(t)[d], sizes[d]);
    assert_int_equal(bp_tensor_strides(t)[d], strides[d]);
  }
}

static void test_squeeze_dims(void** state) {
  (void)state;
  bp_tensor_t* t = T(F32, 1, 3, 1, 2);
  bp_tensor_t* v = NULL;
  assert_ok(bp_tensor_squeeze_dims(t, 2, (int64_t[]){0, -2}, &v));
  ops_track(v);
  expect_shape(v, 2, (int64_t[]){3, 2}, (int64_t[]){2, 1});
  /* A listed dim whose size is not 1 stays. */
  assert_ok(bp_tensor_squeeze_dims(t, 2, (int64_t[]){-1, 2}, &v));
  ops_track(v);
  expect_shape(v, 3, (int64_t[]){1, 3, 2}, (int64_t[]){6, 2, 1});
  assert_ok(bp_tensor_squeeze_dims(t, 0, NULL, &v));
  ops_track(v);
  expect_shape(v, 4, (int64_t[]){1, 3, 1, 2}, (int64_t[]){6, 2, 2, 1});
  bp_tensor_t* z = T0(F32);
  assert_ok(bp_tensor_squeeze_dims(z, 1, (int64_t[]){-1}, &v));
  ops_track(v);
  assert_int_equal(bp_tensor_rank(v), 0);
  v = NULL;
  assert_status(bp_tensor_squeeze_dims(t, 2, (int64_t[]){0, -4}, &v), BP_INVALID_ARGUMENT,
                "more than once");
  assert_status(bp_tensor_squeeze_dims(t, 1, (int64_t[]){4}, &v), BP_INVALID_ARGUMENT,
                "dim 4 out of range");
  assert_status(bp_tensor_squeeze_dims(t, 5, (int64_t[]){0, 1, 2, 3, 0}, &v), BP_INVALID_ARGUMENT,
                "5 dims given");
  assert_status(bp_tensor_squeeze_dims(z, 1, (int64_t[]){1}, &v), BP_INVALID_ARGUMENT,
                "out of range");
  assert_status(bp_tensor_squeeze_dims(t, 1, NULL, &v), BP_INVALID_ARGUMENT, "dims");
  assert_null(v);
}

/* bp_view_infer_desc gives what the tensor function gives, without a
 * tensor, for every view it serves; errors are the function's. */
static void test_view_infer_desc(void** state) {
  (void)state;
  bp_tensor_t* t = T(F32, 2, 3, 4);
  bp_tensor_t* p = NULL;
  assert_ok(bp_tensor_permute(t, (int64_t[]){2, 0, 1}, &p));
  ops_track(p);
  bp_tensor_desc_t in = {.struct_size = sizeof(in)};
  assert_ok(bp_tensor_get_desc(p, &in));
  static const struct {
    uint32_t view, n;
    int64_t args[4];
  } cases[] = {
      {BP_VIEW_alias, 0, {0}},          {BP_VIEW_permute, 3, {1, 2, 0}},
      {BP_VIEW_slice, 4, {1, 1, 2, 1}}, {BP_VIEW_select, 2, {-1, 2}},
      {BP_VIEW_squeeze, 1, {0}},        {BP_VIEW_unsqueeze, 1, {3}},
      {BP_VIEW_expand, 4, {5, -1, 2, 3}}, {BP_VIEW_squeeze_dims, 1, {1}},
      {BP_VIEW_view, 3, {4, 2, 3}},
  };
  for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); ++i) {
    bp_tensor_desc_t out = {.struct_size = sizeof(out)};
    assert_ok(bp_view_infer_desc(cases[i].view, &in, cases[i].args, cases[i].n, &out));
    bp_tensor_t* v = NULL;
    const int64_t* a = cases[i].args;
    switch (cases[i].view) {
      case BP_VIEW_alias: assert_ok(bp_tensor_alias(p, &v)); break;
      case BP_VIEW_permute: assert_ok(bp_tensor_permute(p, a, &v)); break;
      case BP_VIEW_slice: assert_ok(bp_tensor_slice(p, a[0], a[1], a[2], a[3], &v)); break;
      case BP_VIEW_select: assert_ok(bp_tensor_select(p, a[0], a[1], &v)); break;
      case BP_VIEW_squeeze: assert_ok(bp_tensor_squeeze(p, a[0], &v)); break;
      case BP_VIEW_unsqueeze: assert_ok(bp_tensor_unsqueeze(p, a[0], &v)); break;
      case BP_VIEW_expand: assert_ok(bp_tensor_expand(p, cases[i].n, a, &v)); break;
      case BP_VIEW_squeeze_dims: assert_ok(bp_tensor_squeeze_dims(p, cases[i].n, a, &v)); break;
      default: assert_ok(bp_tensor_view(p, cases[i].n, a, &v)); break;
    }
    ops_track(v);
    expect_shape(v, out.rank, out.sizes, out.strides);
    assert_int_equal(bp_tensor_byte_offset(v), out.byte_offset);
  }
  bp_tensor_desc_t out = {.struct_size = sizeof(out)};
  /* [4, 2, 3] permuted from [2, 3, 4] cannot be viewed as [24]. */
  assert_status(bp_view_infer_desc(BP_VIEW_view, &in, (int64_t[]){24}, 1, &out), BP_INVALID_ARGUMENT,
                "bp_tensor_view: the tensor's strides are incompatible");
  assert_status(bp_view_infer_desc(BP_VIEW_permute, &in, (int64_t[]){0, 1}, 2, &out), BP_INVALID_ARGUMENT,
                "takes 3 arguments");
  assert_status(bp_view_infer_desc(BP_VIEW_diagonal, &in, NULL, 0, &out), BP_UNIMPLEMENTED, "no descriptor form");
  assert_status(bp_view_infer_desc(BP_VIEW_view, NULL, NULL, 0, &out), BP_INVALID_ARGUMENT, "input");
  /* The capture ends with the call: the functions make tensors again. */
  bp_tensor_t* v = NULL;
  assert_ok(bp_tensor_permute(t, (int64_t[]){1, 0, 2}, &v));
  ops_track(v);
  assert_non_null(v);
}

int run_view_tests(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_teardown(test_view_table, ops_release_all),
      cmocka_unit_test_teardown(test_size_stride, ops_release_all),
      cmocka_unit_test_teardown(test_storage_offset, ops_release_all),
      cmocka_unit_test_teardown(test_item, ops_release_all),
      cmocka_unit_test_teardown(test_resize, ops_release_all),
      cmocka_unit_test_teardown(test_squeeze_dims, ops_release_all),
      cmocka_unit_test_teardown(test_view_infer_desc, ops_release_all),
  };
  return cmocka_run_group_tests_name("views", tests, appapi_stream_setup,
                                     appapi_stream_teardown);
}
