/* Scatter and shape families on cpu:0, beyond what conformance cases
 * express: the shape rules' errors, index values out of range (the stream
 * fails with OUT_OF_RANGE and nothing is read out of bounds), and results
 * compared with PyTorch's documented outputs. */
#include <math.h>

#include "ops_fixture.h"

static bp_stream_t* g_stream;

static bp_tensor_t* make(uint32_t dtype, uint32_t rank, const int64_t* sizes, const void* data,
                         size_t bytes) {
  bp_tensor_t* t = ops_tensor(g_cpu, dtype, rank, sizes);
  if (bytes) assert_ok(bp_tensor_write(g_stream, t, data, bytes));
  return t;
}
#define MK(dt, data, ...) \
  make(BP_DTYPE_##dt, OPS_N(__VA_ARGS__), (int64_t[]){__VA_ARGS__}, (data), sizeof(data))

static void read_back(const bp_tensor_t* t, void* dst, size_t bytes) {
  assert_ok(bp_stream_synchronize(g_stream));
  assert_ok(bp_tensor_read(g_stream, t, dst, bytes));
}

/* Inference of one op over a compound-literal list of inputs. */
#define INFER(op, attrs, out, ...)                                                      \
  ops_infer(BP_OP_##op, (const bp_tensor_t*[]){__VA_ARGS__},                          \
              (uint32_t)(sizeof((const bp_tensor_t*[]){__VA_ARGS__}) / sizeof(bp_tensor_t*)), \
              (attrs), (out), (uint32_t)(sizeof(out) / sizeof((out)[0])))

/* A fresh stream after a test left the current one failed. */
static void reset_stream(void) {
  bp_stream_release(g_stream);
  assert_ok(bp_stream_create(g_cpu, NULL, &g_stream));
}

static void test_scatter_reduce_pytorch_examples(void** state) {
  (void)state;
  const float src[6] = {1, 2, 3, 4, 5, 6}, in1[4] = {1, 2, 3, 4}, in2[4] = {5, 4, 3, 2};
  const int64_t index[6] = {0, 1, 0, 1, 2, 1};
  struct { const float* self; uint32_t reduce, include_self; float want[4]; } v[] = {
      {in1, BP_SCATTER_SUM, 1, {5, 14, 8, 4}},
      {in1, BP_SCATTER_SUM, 0, {4, 12, 5, 4}},
      {in2, BP_SCATTER_AMAX, 1, {5, 6, 5, 2}},
      {in2, BP_SCATTER_AMAX, 0, {3, 6, 5, 2}},
      {in1, BP_SCATTER_MEAN, 1, {5.0f / 3, 3.5f, 4, 4}},
      {in1, BP_SCATTER_PROD, 0, {3, 48, 5, 4}},
      {in2, BP_SCATTER_AMIN, 1, {1, 2, 3, 2}},
  };
  for (size_t k = 0; k < sizeof v / sizeof v[0]; k++) {
    bp_scatter_attrs_t a = {.struct_size = sizeof a, .dim = 0, .reduce = v[k].reduce,
                            .include_self = v[k].include_self};
    bp_tensor_t* out = NULL;
    assert_ok(bp_op_scatter_reduce(g_stream, make(BP_DTYPE_F32, 1, (int64_t[]){4}, v[k].self, 16),
                                   MK(I64, index, 6), MK(F32, src, 6), &a, &out));
    ops_track(out);
    float got[4];
    read_back(out, got, sizeof got);
    for (int i = 0; i < 4; i++) assert_float_equal(got[i], v[k].want[i], 1e-6);
  }
}

static void test_scatter_reduce_integer_mean_floors(void** state) {
  (void)state;
  const int64_t self[2] = {-1, 7}, src[3] = {-2, -2, 2}, index[3] = {0, 0, 1};
  bp_scatter_attrs_t a = {.struct_size = sizeof a, .dim = 0, .reduce = BP_SCATTER_MEAN,
                          .include_self = 1};
  bp_tensor_t* out = NULL;
  assert_ok(bp_op_scatter_reduce(g_stream, MK(I64, self, 2), MK(I64, index, 3), MK(I64, src, 3), &a,
                                 &out));
  ops_track(out);
  int64_t got[2];
  read_back(out, got, sizeof got);
  assert_int_equal(got[0], -2); /* floor(-5 / 3), not trunc */
  assert_int_equal(got[1], 4);  /* floor(9 / 2) */
}

static void test_scatter_value_form_and_2d(void** state) {
  (void)state;
  const float self[2 * 3] = {0, 0, 0, 0, 0, 0};
  const int64_t index[2 * 2] = {2, 0, 1, 2}; /* rows 0 and 1, dim 1 */
  bp_scatter_attrs_t a = {.struct_size = sizeof a, .dim = 1,
                          .value = {.kind = BP_SCALAR_FLOAT, .v.f = 1.25}};
  bp_tensor_t* out = NULL;
  assert_ok(bp_op_scatter(g_stream, MK(F32, self, 2, 3), MK(I64, index, 2, 2), NULL, &a, &out));
  ops_track(out);
  float got[6];
  read_back(out, got, sizeof got);
  const float want[6] = {1.25f, 0, 1.25f, 0, 1.25f, 1.25f};
  for (int i = 0; i < 6; i++) assert_true(got[i] == want[i]);
}

static void test_scatter_out_of_range_fails_stream(void** state) {
  (void)state;
  const float self[3] = {1, 2, 3}, src[2] = {5, 6};
  bp_scatter_attrs_t a = {.struct_size = sizeof a, .dim = 0, .reduce = BP_SCATTER_SUM,
                          .include_self = 1};
  const int64_t bads[2][2] = {{0, 3}, {-1, 0}}; /* no wrapping of negative indices */
  for (int k = 0; k < 2; k++) {
    bp_tensor_t* out = NULL;
    bp_status_t st = bp_op_scatter_reduce(g_stream, MK(F32, self, 3),
                                          make(BP_DTYPE_I64, 1, (int64_t[]){2}, bads[k], 16),
                                          MK(F32, src, 2), &a, &out);
    if (st == BP_OK) {
      ops_track(out);
      st = bp_stream_synchronize(g_stream);
    }
    assert_int_equal(st, BP_OUT_OF_RANGE);
    assert_non_null(strstr(bp_status_message(), k == 0 ? "index 3 is out of bounds for dimension 0 with size 3"
                                                       : "index -1 is out of bounds"));
    reset_stream();
  }
}

static void test_scatter_rule_errors(void** state) {
  (void)state;
  bp_tensor_desc_t o[1] = {{.struct_size = sizeof(bp_tensor_desc_t)}};
  bp_scatter_attrs_t a = {.struct_size = sizeof a, .dim = 0, .include_self = 1};
  const bp_tensor_t* in[3] = {T(F32, 4, 3), T(I32, 2, 3), T(F32, 2, 3)};
  assert_status(ops_infer(BP_OP_scatter, in, 3, &a, o, 1), BP_INVALID_ARGUMENT, "int64 is required");
  in[1] = T(I64, 2, 3);
  in[2] = T(F64, 2, 3);
  assert_status(ops_infer(BP_OP_scatter, in, 3, &a, o, 1), BP_INVALID_ARGUMENT, "must equal 'self' dtype");
  in[2] = T(F32, 2, 2); /* index larger than src in dim 1 */
  assert_status(ops_infer(BP_OP_scatter, in, 3, &a, o, 1), BP_INVALID_ARGUMENT, "no larger than src");
  in[1] = T(I64, 2, 4); /* index larger than self outside dim */
  in[2] = T(F32, 2, 4);
  assert_status(ops_infer(BP_OP_scatter, in, 3, &a, o, 1), BP_INVALID_ARGUMENT, "no larger than self");
  in[1] = T(I64, 6, 3); /* larger than self along dim is fine */
  in[2] = T(F32, 6, 3);
  assert_ok(ops_infer(BP_OP_scatter, in, 3, &a, o, 1));
  assert_desc(&o[0], F32, 4, 3);
  in[1] = T(I64, 2);
  assert_status(ops_infer(BP_OP_scatter, in, 3, &a, o, 1), BP_INVALID_ARGUMENT, "rank");
  in[1] = T(I64, 0); /* an empty index skips the shape checks */
  assert_ok(ops_infer(BP_OP_scatter, in, 3, &a, o, 1));
  in[1] = T(I64, 2, 3);
  in[2] = NULL; /* neither src nor value */
  assert_status(ops_infer(BP_OP_scatter, in, 3, &a, o, 1), BP_INVALID_ARGUMENT, "needs 'src' or attrs.value");
  in[2] = T(F32, 2, 3);
  a.reduce = BP_SCATTER_MEAN;
  assert_status(ops_infer(BP_OP_scatter, in, 3, &a, o, 1), BP_INVALID_ARGUMENT, "none, sum or prod");
  a.reduce = BP_SCATTER_NONE;
  assert_status(ops_infer(BP_OP_scatter_reduce, in, 3, &a, o, 1), BP_INVALID_ARGUMENT,
                "sum, prod, mean, amax or amin");
  a.reduce = BP_SCATTER_MEAN;
  const bp_tensor_t* bin[3] = {T(BOOL, 4, 3), T(I64, 2, 3), T(BOOL, 2, 3)};
  assert_status(ops_infer(BP_OP_scatter_reduce, bin, 3, &a, o, 1), BP_INVALID_ARGUMENT, "bool");
  a.dim = 2;
  assert_status(ops_infer(BP_OP_scatter_reduce, in, 3, &a, o, 1), BP_INVALID_ARGUMENT, "out of range");
}

static void test_slice_scatter_rules_and_clamping(void** state) {
  (void)state;
  bp_tensor_desc_t o[1] = {{.struct_size = sizeof(bp_tensor_desc_t)}};
  bp_slice_attrs_t a = {.struct_size = sizeof a, .dim = 0, .start = -100, .end = 100, .step = 3};
  const bp_tensor_t* in[2] = {T(F32, 7, 2), T(F32, 3, 2)}; /* rows 0, 3, 6 */
  assert_ok(ops_infer(BP_OP_slice_scatter, in, 2, &a, o, 1));
  in[1] = T(F32, 2, 2);
  assert_status(ops_infer(BP_OP_slice_scatter, in, 2, &a, o, 1), BP_INVALID_ARGUMENT, "slice of 'self' has shape [3, 2]");
  a.step = 0;
  assert_status(ops_infer(BP_OP_slice_scatter, in, 2, &a, o, 1), BP_INVALID_ARGUMENT, "must be positive");
  bp_slice_attrs_t s = {.struct_size = sizeof s, .dim = 1, .start = 2, .end = INT64_MAX, .step = 1};
  in[1] = T(F32, 7);
  assert_status(ops_infer(BP_OP_select_scatter, in, 2, &s, o, 1), BP_INVALID_ARGUMENT, "out of range");
  s.start = -2;
  assert_ok(ops_infer(BP_OP_select_scatter, in, 2, &s, o, 1));
  const bp_tensor_t* zin[2] = {T0(F32), T0(F32)};
  assert_status(ops_infer(BP_OP_select_scatter, zin, 2, &s, o, 1), BP_INVALID_ARGUMENT, "0-dim");
  /* Values: src i32 converted into an f32 self, every third row from -100. */
  const float self[5] = {0, 0, 0, 0, 0};
  const int32_t src[2] = {7, -8};
  bp_slice_attrs_t v = {.struct_size = sizeof v, .dim = 0, .start = -100, .end = 100, .step = 3};
  bp_tensor_t* out = NULL;
  assert_ok(bp_op_slice_scatter(g_stream, MK(F32, self, 5), MK(I32, src, 2), &v, &out));
  ops_track(out);
  float got[5];
  read_back(out, got, sizeof got);
  const float want[5] = {7, 0, 0, -8, 0};
  for (int i = 0; i < 5; i++) assert_true(got[i] == want[i]);
}

static void test_pad_modes_match_pytorch(void** state) {
  (void)state;
  const float x[4] = {0, 1, 2, 3};
  struct { uint32_t mode; int64_t l, r; double value; int n; float want[8]; } v[] = {
      {BP_PAD_REFLECT, 2, 1, 0, 7, {2, 1, 0, 1, 2, 3, 2}},
      {BP_PAD_REPLICATE, 2, 1, 0, 7, {0, 0, 0, 1, 2, 3, 3}},
      {BP_PAD_CIRCULAR, 2, 1, 0, 7, {2, 3, 0, 1, 2, 3, 0}},
      {BP_PAD_CONSTANT, -1, 2, 9, 5, {1, 2, 3, 9, 9}},
      {BP_PAD_REFLECT, -1, 2, 0, 5, {1, 2, 3, 2, 1}},
      {BP_PAD_CIRCULAR, -1, 2, 0, 5, {1, 2, 3, 1, 2}}, /* wraps what the crop left */
  };
  for (size_t k = 0; k < sizeof v / sizeof v[0]; k++) {
    bp_pad_attrs_t a = {.struct_size = sizeof a, .mode = v[k].mode, .num_pads = 2,
                        .pads = {v[k].l, v[k].r}};
    if (v[k].mode == BP_PAD_CONSTANT) a.value = (bp_scalar_t){.kind = BP_SCALAR_FLOAT, .v.f = v[k].value};
    bp_tensor_t* out = NULL;
    assert_ok(bp_op_pad(g_stream, MK(F32, x, 1, 4), &a, &out));
    ops_track(out);
    assert_int_equal(bp_tensor_sizes(out)[1], v[k].n);
    float got[8];
    read_back(out, got, sizeof(float) * (size_t)v[k].n);
    for (int i = 0; i < v[k].n; i++) assert_true(got[i] == v[k].want[i]);
  }
}

static void test_pad_rule_errors(void** state) {
  (void)state;
  bp_tensor_desc_t o[1] = {{.struct_size = sizeof(bp_tensor_desc_t)}};
  bp_pad_attrs_t a = {.struct_size = sizeof a, .mode = BP_PAD_REFLECT, .num_pads = 2, .pads = {4, 0}};
  assert_status(INFER(pad, &a, o, T(F32, 2, 4)), BP_INVALID_ARGUMENT, "must be smaller than size 4");
  a.pads[0] = 1;
  assert_status(INFER(pad, &a, o, T(F32, 4)), BP_INVALID_ARGUMENT, "1, 2 or 3 trailing dims");
  assert_status(INFER(pad, &a, o, T(F32, 1, 2, 3, 4)), BP_INVALID_ARGUMENT, "1, 2 or 3 trailing dims");
  assert_ok(INFER(pad, &a, o, T(F32, 2, 3, 4)));
  assert_desc(&o[0], F32, 2, 3, 5);
  assert_status(INFER(pad, &a, o, T(F32, 0, 4)), BP_INVALID_ARGUMENT, "non-empty");
  assert_ok(INFER(pad, &a, o, T(F32, 0, 3, 4))); /* an empty batch is fine */
  a.value = (bp_scalar_t){.kind = BP_SCALAR_FLOAT, .v.f = 1};
  assert_status(INFER(pad, &a, o, T(F32, 2, 4)), BP_INVALID_ARGUMENT, "takes no attrs.value");
  a.value.kind = BP_SCALAR_NONE;
  a.mode = BP_PAD_CIRCULAR;
  a.pads[0] = 5;
  assert_status(INFER(pad, &a, o, T(F32, 2, 4)), BP_INVALID_ARGUMENT, "more than once");
  a.mode = BP_PAD_CONSTANT;
  a.pads[0] = -3;
  a.pads[1] = -2;
  assert_status(INFER(pad, &a, o, T(F32, 2, 4)), BP_INVALID_ARGUMENT, "invalid output size");
  a.pads[1] = -1;
  assert_ok(INFER(pad, &a, o, T(F32, 2, 4)));
  assert_desc(&o[0], F32, 2, 0);
}

static void test_flip_and_repeat(void** state) {
  (void)state;
  bp_tensor_desc_t o[1] = {{.struct_size = sizeof(bp_tensor_desc_t)}};
  bp_dims_attrs_t f = {.struct_size = sizeof f, .num_dims = 2, .dims = {1, -1}};
  assert_status(INFER(flip, &f, o, T(F32, 2, 3)), BP_INVALID_ARGUMENT, "more than once");
  f.dims[1] = 2;
  assert_status(INFER(flip, &f, o, T(F32, 2, 3)), BP_INVALID_ARGUMENT, "out of range");
  const int16_t x[6] = {1, 2, 3, 4, 5, 6};
  f.dims[1] = 0;
  bp_tensor_t* out = NULL;
  assert_ok(bp_op_flip(g_stream, MK(I16, x, 2, 3), &f, &out));
  ops_track(out);
  int16_t got[12];
  read_back(out, got, 6 * sizeof(int16_t));
  const int16_t want[6] = {6, 5, 4, 3, 2, 1};
  for (int i = 0; i < 6; i++) assert_int_equal(got[i], want[i]);
  /* repeat [2] by (2, 3): a leading new dim. */
  bp_dims_attrs_t r = {.struct_size = sizeof r, .num_dims = 2, .dims = {2, 3}};
  out = NULL;
  assert_ok(bp_op_repeat(g_stream, MK(I16, ((int16_t[]){7, 8}), 2), &r, &out));
  ops_track(out);
  assert_int_equal(bp_tensor_rank(out), 2);
  assert_int_equal(bp_tensor_sizes(out)[1], 6);
  read_back(out, got, 12 * sizeof(int16_t));
  for (int i = 0; i < 12; i++) assert_int_equal(got[i], i % 2 ? 8 : 7);
}

int main(void) {
  if (ops_fixture_setup() != 0 || g_cpu == NULL) return 1;
  if (bp_stream_create(g_cpu, NULL, &g_stream) != BP_OK) return 1;
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_teardown(test_scatter_reduce_pytorch_examples, ops_release_all),
      cmocka_unit_test_teardown(test_scatter_reduce_integer_mean_floors, ops_release_all),
      cmocka_unit_test_teardown(test_scatter_value_form_and_2d, ops_release_all),
      cmocka_unit_test_teardown(test_scatter_out_of_range_fails_stream, ops_release_all),
      cmocka_unit_test_teardown(test_scatter_rule_errors, ops_release_all),
      cmocka_unit_test_teardown(test_slice_scatter_rules_and_clamping, ops_release_all),
      cmocka_unit_test_teardown(test_pad_modes_match_pytorch, ops_release_all),
      cmocka_unit_test_teardown(test_pad_rule_errors, ops_release_all),
      cmocka_unit_test_teardown(test_flip_and_repeat, ops_release_all),
  };
  int failed = cmocka_run_group_tests_name("scatter", tests, NULL, NULL);
  bp_stream_release(g_stream);
  bp_context_release(g_ctx);
  return failed;
}
