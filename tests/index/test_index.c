/* Index family semantics on cpu:0 that conformance cases cannot express:
 * failures on bad index values, absent (full-slice) index entries, the
 * exact contents of nonzero's padding rows and embedding_bag's outputs. */
#include <math.h>

#include "ops_fixture.h"

static bp_stream_t* g_stream;

/* A dense cpu tensor holding `data`. */
static bp_tensor_t* make(uint32_t dtype, uint32_t rank, const int64_t* sizes, const void* data,
                         size_t bytes) {
  bp_tensor_t* t = ops_tensor(g_cpu, dtype, rank, sizes);
  assert_non_null(t);
  if (bytes) assert_ok(bp_tensor_write(g_stream, t, data, bytes));
  return t;
}
#define MK(dt, data, ...)                                                                  \
  make(BP_DTYPE_##dt, OPS_N(__VA_ARGS__), (int64_t[]){__VA_ARGS__}, (data), sizeof(data))

static void read_back(const bp_tensor_t* t, void* dst, size_t bytes) {
  assert_ok(bp_tensor_read(g_stream, t, dst, bytes));
}

static void test_gather_out_of_range_fails_stream(void** state) {
  (void)state;
  float x[6] = {0, 1, 2, 3, 4, 5};
  int64_t bad[2] = {1, 3}; /* size of dim 1 is 3 */
  bp_tensor_t* self = MK(F32, x, 2, 3);
  bp_tensor_t* index = MK(I64, bad, 2, 1);
  bp_tensor_t* out = NULL;
  bp_dim_attrs_t a = {.struct_size = sizeof a, .dim = 1};
  bp_status_t st = bp_op_gather(g_stream, self, index, &a, &out);
  if (st == BP_OK) {
    ops_track(out);
    st = bp_stream_synchronize(g_stream);
  }
  assert_int_equal(st, BP_OUT_OF_RANGE);
  assert_non_null(strstr(bp_status_message(), "index 3 is out of bounds for dimension 1 with size 3"));
  /* gather does not wrap negative indices. */
  bp_stream_release(g_stream);
  assert_ok(bp_stream_create(g_cpu, NULL, &g_stream));
  int64_t neg[2] = {-1, 0};
  index = MK(I64, neg, 2, 1);
  out = NULL;
  st = bp_op_gather(g_stream, self, index, &a, &out);
  if (st == BP_OK) {
    ops_track(out);
    st = bp_stream_synchronize(g_stream);
  }
  assert_int_equal(st, BP_OUT_OF_RANGE);
  assert_non_null(strstr(bp_status_message(), "index -1 is out of bounds"));
}

static void test_index_wraps_negative_and_rejects_out_of_range(void** state) {
  (void)state;
  int32_t x[4] = {10, 11, 12, 13};
  int64_t idx[3] = {-1, 0, -4};
  bp_tensor_t* self = MK(I32, x, 4);
  const bp_tensor_t* list[1] = {MK(I64, idx, 3)};
  bp_tensor_t* out = NULL;
  assert_ok(bp_op_index(g_stream, self, list, 1, NULL, &out));
  ops_track(out);
  int32_t got[3];
  read_back(out, got, sizeof got);
  assert_int_equal(got[0], 13);
  assert_int_equal(got[1], 10);
  assert_int_equal(got[2], 10);
  int64_t bad[1] = {-5};
  list[0] = MK(I64, bad, 1);
  out = NULL;
  bp_status_t st = bp_op_index(g_stream, self, list, 1, NULL, &out);
  if (st == BP_OK) {
    ops_track(out);
    st = bp_stream_synchronize(g_stream);
  }
  assert_int_equal(st, BP_OUT_OF_RANGE);
  assert_non_null(strstr(bp_status_message(), "index -5 is out of bounds for dimension 0 with size 4"));
  bp_stream_release(g_stream);
  assert_ok(bp_stream_create(g_cpu, NULL, &g_stream));
}

/* x[:, [2, 0]] and x[[1], :, [0]] (separated: the index dims go first). */
static void test_index_absent_entries_are_slices(void** state) {
  (void)state;
  float x[2 * 3 * 2];
  for (int i = 0; i < 12; i++) x[i] = (float)i;
  bp_tensor_t* self = MK(F32, x, 2, 3, 2);
  int64_t cols[2] = {2, 0};
  const bp_tensor_t* l1[2] = {NULL, MK(I64, cols, 2)};
  bp_tensor_t* out = NULL;
  assert_ok(bp_op_index(g_stream, self, l1, 2, NULL, &out));
  ops_track(out);
  assert_int_equal(bp_tensor_rank(out), 3);
  assert_int_equal(bp_tensor_sizes(out)[1], 2);
  float got[8];
  read_back(out, got, sizeof got);
  const float want[8] = {4, 5, 0, 1, 10, 11, 6, 7};
  for (int i = 0; i < 8; i++) assert_true(got[i] == want[i]);

  int64_t one[1] = {1}, zero[1] = {0};
  const bp_tensor_t* l2[3] = {MK(I64, one, 1), NULL, MK(I64, zero, 1)};
  out = NULL;
  assert_ok(bp_op_index(g_stream, self, l2, 3, NULL, &out));
  ops_track(out);
  assert_int_equal(bp_tensor_rank(out), 2); /* [1, 3] */
  assert_int_equal(bp_tensor_sizes(out)[0], 1);
  assert_int_equal(bp_tensor_sizes(out)[1], 3);
  float got2[3];
  read_back(out, got2, sizeof got2);
  assert_true(got2[0] == 6 && got2[1] == 8 && got2[2] == 10);

  /* Bool masks have data-dependent shapes: refused by the shape rule. */
  uint8_t m[2] = {1, 0};
  const bp_tensor_t* l3[1] = {MK(BOOL, m, 2)};
  out = NULL;
  assert_status(bp_op_index(g_stream, self, l3, 1, NULL, &out), BP_INVALID_ARGUMENT, "mask");
}

static void test_index_put_accumulate_sums_duplicates(void** state) {
  (void)state;
  float x[3] = {1, 1, 1}, v[4] = {1, 2, 3, 4};
  int64_t idx[4] = {0, 2, 0, -1};
  bp_tensor_t* self = MK(F32, x, 3);
  const bp_tensor_t* list[1] = {MK(I64, idx, 4)};
  bp_tensor_t* values = MK(F32, v, 4);
  bp_index_put_attrs_t a = {.struct_size = sizeof a, .accumulate = 1};
  bp_tensor_t* out = NULL;
  assert_ok(bp_op_index_put(g_stream, self, list, 1, values, &a, &out));
  ops_track(out);
  float got[3];
  read_back(out, got, sizeof got);
  assert_true(got[0] == 5 && got[1] == 1 && got[2] == 7);
  /* values of another dtype are refused */
  double vd[4] = {0};
  assert_status(bp_op_index_put(g_stream, self, list, 1, MK(F64, vd, 4), &a, &out),
                BP_INVALID_ARGUMENT, "values");
}

static void test_masked_scatter_source_too_small(void** state) {
  (void)state;
  int16_t x[4] = {0}, src[1] = {7};
  uint8_t m[4] = {1, 0, 1, 0};
  bp_tensor_t* out = NULL;
  bp_status_t st = bp_op_masked_scatter(g_stream, MK(I16, x, 4), MK(BOOL, m, 4), MK(I16, src, 1), NULL, &out);
  if (st == BP_OK) {
    ops_track(out);
    st = bp_stream_synchronize(g_stream);
  }
  assert_int_equal(st, BP_OUT_OF_RANGE);
  assert_non_null(strstr(bp_status_message(), "2 true elements"));
  bp_stream_release(g_stream);
  assert_ok(bp_stream_create(g_cpu, NULL, &g_stream));
}

static void test_nonzero_pads_with_minus_one(void** state) {
  (void)state;
  float x[6] = {0, -0.0f, 3, 0, NAN, 0};
  bp_tensor_t *out = NULL, *count = NULL;
  assert_ok(bp_op_nonzero(g_stream, MK(F32, x, 2, 3), NULL, &out, &count));
  ops_track(out);
  ops_track(count);
  int64_t got[12], n;
  read_back(out, got, sizeof got);
  read_back(count, &n, sizeof n);
  assert_int_equal(n, 2);
  const int64_t want[12] = {0, 2, 1, 1, -1, -1, -1, -1, -1, -1, -1, -1};
  for (int i = 0; i < 12; i++) assert_int_equal(got[i], want[i]);
}

/* mode max with an empty bag and a padding index. */
static void test_embedding_bag_outputs(void** state) {
  (void)state;
  float w[3 * 2] = {1, 6, 5, 2, 3, 4};
  int64_t idx[4] = {0, 1, 2, 1}, off[3] = {0, 2, 2};
  bp_embedding_attrs_t a = {.struct_size = sizeof a, .mode = BP_BAG_MAX, .padding_idx = 2};
  bp_tensor_t *out = NULL, *o2b = NULL, *bsz = NULL, *maxi = NULL;
  assert_ok(bp_op_embedding_bag(g_stream, MK(F32, w, 3, 2), MK(I64, idx, 4), MK(I64, off, 3), NULL,
                                &a, &out, &o2b, &bsz, &maxi));
  ops_track(out), ops_track(o2b), ops_track(bsz), ops_track(maxi);
  float o[6];
  int64_t ob[4], bs[3], mi[6];
  read_back(out, o, sizeof o);
  read_back(o2b, ob, sizeof ob);
  read_back(bsz, bs, sizeof bs);
  read_back(maxi, mi, sizeof mi);
  const float wo[6] = {5, 6, 0, 0, 5, 2};
  const int64_t wob[4] = {0, 0, 2, 2}, wbs[3] = {2, 0, 1}, wmi[6] = {1, 0, 0, 0, 1, 1};
  for (int i = 0; i < 6; i++) assert_true(o[i] == wo[i]);
  for (int i = 0; i < 4; i++) assert_int_equal(ob[i], wob[i]);
  for (int i = 0; i < 3; i++) assert_int_equal(bs[i], wbs[i]);
  for (int i = 0; i < 6; i++) assert_int_equal(mi[i], wmi[i]);
  /* per_sample_weights only with mode sum */
  float psw[4] = {1, 1, 1, 1};
  assert_status(bp_op_embedding_bag(g_stream, MK(F32, w, 3, 2), MK(I64, idx, 4), MK(I64, off, 3),
                                    MK(F32, psw, 4), &a, &out, &o2b, &bsz, &maxi),
                BP_INVALID_ARGUMENT, "per_sample_weights");
}

static void test_embedding_dense_backward_freq(void** state) {
  (void)state;
  float g[3 * 2] = {1, 2, 3, 4, 5, 6};
  int64_t idx[3] = {1, 1, 0};
  bp_embedding_attrs_t a = {.struct_size = sizeof a, .padding_idx = 0, .num_weights = 3,
                            .scale_grad_by_freq = 1};
  bp_tensor_t* out = NULL;
  assert_ok(bp_op_embedding_dense_backward(g_stream, MK(F32, g, 3, 2), MK(I64, idx, 3), &a, &out));
  ops_track(out);
  float got[6];
  read_back(out, got, sizeof got);
  const float want[6] = {0, 0, 2, 3, 0, 0}; /* row 0 is padding; row 1 averaged over 2 uses */
  for (int i = 0; i < 6; i++) assert_true(got[i] == want[i]);
}

int main(void) {
  if (ops_fixture_setup() != 0 || g_cpu == NULL) return 1;
  if (bp_stream_create(g_cpu, NULL, &g_stream) != BP_OK) return 1;
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_teardown(test_gather_out_of_range_fails_stream, ops_release_all),
      cmocka_unit_test_teardown(test_index_wraps_negative_and_rejects_out_of_range, ops_release_all),
      cmocka_unit_test_teardown(test_index_absent_entries_are_slices, ops_release_all),
      cmocka_unit_test_teardown(test_index_put_accumulate_sums_duplicates, ops_release_all),
      cmocka_unit_test_teardown(test_masked_scatter_source_too_small, ops_release_all),
      cmocka_unit_test_teardown(test_nonzero_pads_with_minus_one, ops_release_all),
      cmocka_unit_test_teardown(test_embedding_bag_outputs, ops_release_all),
      cmocka_unit_test_teardown(test_embedding_dense_backward_freq, ops_release_all),
  };
  int failed = cmocka_run_group_tests_name("index", tests, NULL, NULL);
  bp_stream_release(g_stream);
  bp_context_release(g_ctx);
  return failed;
}
