/* Norm family through the public API on cpu:0: behaviour the conformance
 * cases do not reach (rows large enough for the streaming path, inputs
 * left untouched, default eps, data-dependent errors, output_mask). */
#include <math.h>
#include <stdlib.h>

#include "ops_fixture.h"

static bp_stream_t* g_stream;

static bp_tensor_t* cpu_f32(uint32_t rank, const int64_t* sizes, const float* data) {
  bp_tensor_t* t = ops_tensor(g_cpu, BP_DTYPE_F32, rank, sizes);
  int64_t n = 1;
  for (uint32_t d = 0; d < rank; d++) n *= sizes[d];
  if (data) assert_ok(bp_tensor_write(g_stream, t, data, sizeof(float) * (uint64_t)n));
  return t;
}

static void read_f32(const bp_tensor_t* t, float* out, int64_t n) {
  assert_ok(bp_tensor_read(g_stream, t, out, sizeof(float) * (uint64_t)n));
  assert_ok(bp_stream_synchronize(g_stream));
}

static float* random_f32(int64_t n, unsigned seed, float lo, float hi) {
  float* p = malloc(sizeof(float) * (size_t)n);
  assert_non_null(p);
  uint64_t s = seed * 0x9E3779B97F4A7C15ull + 1;
  for (int64_t i = 0; i < n; i++) {
    s ^= s << 13, s ^= s >> 7, s ^= s << 17;
    p[i] = lo + (hi - lo) * (float)((s >> 11) * 0x1.0p-53);
  }
  return p;
}

/* layer_norm on rows of 4096 over 2.4M elements (the streaming-store path)
 * and on a small tensor, against a double computation. */
static void check_layer_norm(int64_t rows, int64_t n) {
  int64_t xs[2] = {rows, n}, ps[1] = {n};
  float* x = random_f32(rows * n, 1, -2.0f, 3.0f);
  float* w = random_f32(n, 2, -1.5f, 1.5f);
  float* b = random_f32(n, 3, -1.0f, 1.0f);
  float* y = malloc(sizeof(float) * (size_t)(rows * n));
  float* st = malloc(sizeof(float) * (size_t)rows * 2);
  assert_non_null(y);
  assert_non_null(st);
  bp_tensor_t *out = NULL, *mean = NULL, *rstd = NULL;
  bp_layer_norm_attrs_t a = {sizeof a, 1, {n}, 1e-5, 7, 0};
  assert_ok(bp_op_layer_norm(g_stream, cpu_f32(2, xs, x), cpu_f32(1, ps, w), cpu_f32(1, ps, b), &a,
                             &out, &mean, &rstd));
  ops_track(out), ops_track(mean), ops_track(rstd);
  read_f32(out, y, rows * n);
  read_f32(mean, st, rows);
  read_f32(rstd, st + rows, rows);
  double worst = 0.0;
  for (int64_t r = 0; r < rows; r++) {
    double m = 0.0, v = 0.0;
    for (int64_t j = 0; j < n; j++) m += x[r * n + j];
    m /= (double)n;
    for (int64_t j = 0; j < n; j++) v += (x[r * n + j] - m) * (x[r * n + j] - m);
    double rs = 1.0 / sqrt(v / (double)n + 1e-5);
    assert_true(fabs(st[r] - m) < 1e-5);
    assert_true(fabs(st[rows + r] - rs) < 1e-5 * rs);
    for (int64_t j = 0; j < n; j++) {
      double e = (x[r * n + j] - m) * rs * w[j] + b[j];
      double err = fabs(y[r * n + j] - e);
      if (err > worst) worst = err;
    }
  }
  assert_true(worst < 2e-5);
  free(x), free(w), free(b), free(y), free(st);
}

static void test_layer_norm_large_rows(void** state) {
  (void)state;
  check_layer_norm(600, 4096);
}

static void test_layer_norm_small_rows(void** state) {
  (void)state;
  check_layer_norm(3, 8);
}

/* rms_norm with eps unset uses finfo(f32).eps = 2^-23: visible on a row
 * whose mean square is far below it. */
static void test_rms_norm_default_eps(void** state) {
  (void)state;
  int64_t xs[2] = {2, 4};
  float x[8] = {1e-4f, -1e-4f, 1e-4f, -1e-4f, 1.0f, 2.0f, 3.0f, 4.0f};
  bp_tensor_t* out = NULL;
  assert_ok(bp_op_rms_norm(g_stream, cpu_f32(2, xs, x), NULL, NULL, &out));
  ops_track(out);
  float y[8];
  read_f32(out, y, 8);
  double r0 = 1.0 / sqrt(1e-8 + 0x1.0p-23), r1 = 1.0 / sqrt(30.0 / 4.0 + 0x1.0p-23);
  assert_true(fabs(y[0] - 1e-4 * r0) < 1e-6);
  assert_true(fabs(y[1] + 1e-4 * r0) < 1e-6);
  assert_true(fabs(y[7] - 4.0 * r1) < 1e-6);
}

/* add_rms_norm / add_layer_norm on cpu:0 are exactly add then the norm: the
 * same f32 arithmetic on the same rounded sum, bit for bit, on rows past the
 * streaming threshold (600 x 4096) and on small ones; the inputs are left
 * as they were. */
static void check_add_norm(uint32_t op, int64_t rows, int64_t n) {
  int64_t xs[2] = {rows, n}, ps[1] = {n}, total = rows * n;
  float* x = random_f32(total, 4, -2.0f, 3.0f);
  float* r = random_f32(total, 5, -3.0f, 2.0f);
  float* w = random_f32(n, 6, -1.5f, 1.5f);
  float* b = random_f32(n, 7, -1.0f, 1.0f);
  float* got = malloc(sizeof(float) * (size_t)total * 4);
  assert_non_null(got);
  float *got_res = got + total, *want = got + 2 * total, *want_res = got + 3 * total;
  bp_tensor_t *tx = cpu_f32(2, xs, x), *tr = cpu_f32(2, xs, r), *tw = cpu_f32(1, ps, w),
              *tb = cpu_f32(1, ps, b);
  bp_tensor_t *out = NULL, *res_out = NULL, *sum = NULL, *ref = NULL, *m = NULL, *rs = NULL;
  bp_rms_norm_attrs_t ra = {sizeof ra, 1, 1e-6};
  bp_layer_norm_attrs_t la = {sizeof la, 1, {n}, 1e-5, 7, 0};
  if (op == BP_OP_add_rms_norm) {
    assert_ok(bp_op_add_rms_norm(g_stream, tx, tr, tw, &ra, &out, &res_out));
  } else {
    assert_ok(bp_op_add_layer_norm(g_stream, tx, tr, tw, tb, &la, &out, &res_out));
  }
  ops_track(out), ops_track(res_out);
  assert_ok(bp_op_add(g_stream, tx, tr, NULL, &sum));
  ops_track(sum);
  if (op == BP_OP_add_rms_norm) {
    assert_ok(bp_op_rms_norm(g_stream, sum, tw, &ra, &ref));
  } else {
    assert_ok(bp_op_layer_norm(g_stream, sum, tw, tb, &la, &ref, &m, &rs));
    ops_track(m), ops_track(rs);
  }
  ops_track(ref);
  read_f32(out, got, total);
  read_f32(res_out, got_res, total);
  read_f32(ref, want, total);
  read_f32(sum, want_res, total);
  assert_memory_equal(got_res, want_res, sizeof(float) * (size_t)total);
  assert_memory_equal(got, want, sizeof(float) * (size_t)total);
  read_f32(tx, got, total);
  read_f32(tr, got_res, total);
  assert_memory_equal(got, x, sizeof(float) * (size_t)total);
  assert_memory_equal(got_res, r, sizeof(float) * (size_t)total);
  free(x), free(r), free(w), free(b), free(got);
}

static void test_add_rms_norm_is_add_then_rms_norm(void** state) {
  (void)state;
  check_add_norm(BP_OP_add_rms_norm, 600, 4096);
  check_add_norm(BP_OP_add_rms_norm, 5, 19);
}

static void test_add_layer_norm_is_add_then_layer_norm(void** state) {
  (void)state;
  check_add_norm(BP_OP_add_layer_norm, 600, 4096);
  check_add_norm(BP_OP_add_layer_norm, 5, 19);
}

/* The norm of add_layer_norm reads residual_out as stored: in f16, 2048 + 1
 * rounds to 2048 (ties to even), so the row [2048 + 1, 2048 + 0] is
 * [2048, 2048] and normalizes to [0, 0]; normalizing the unrounded sums
 * would give [1, -1]. */
static void test_add_layer_norm_reads_rounded_residual(void** state) {
  (void)state;
  int64_t xs[2] = {1, 2};
  const uint16_t x[2] = {0x6800, 0x6800}, r[2] = {0x3C00, 0x0000}; /* 2048, 2048; 1, 0 */
  bp_tensor_t* tx = ops_tensor(g_cpu, BP_DTYPE_F16, 2, xs);
  bp_tensor_t* tr = ops_tensor(g_cpu, BP_DTYPE_F16, 2, xs);
  assert_ok(bp_tensor_write(g_stream, tx, x, sizeof x));
  assert_ok(bp_tensor_write(g_stream, tr, r, sizeof r));
  bp_tensor_t *out = NULL, *res_out = NULL;
  assert_ok(bp_op_add_layer_norm(g_stream, tx, tr, NULL, NULL, NULL, &out, &res_out));
  ops_track(out), ops_track(res_out);
  uint16_t y[2], z[2];
  assert_ok(bp_tensor_read(g_stream, res_out, z, sizeof z));
  assert_ok(bp_tensor_read(g_stream, out, y, sizeof y));
  assert_ok(bp_stream_synchronize(g_stream));
  assert_int_equal(z[0], 0x6800);
  assert_int_equal(z[1], 0x6800);
  assert_int_equal(y[0], 0x0000);
  assert_int_equal(y[1], 0x0000);
}

/* Training reads no running statistics and writes none (inputs are never
 * written); eval uses them; save_mean/save_invstd are [0] in eval. */
static void test_batch_norm_running_stats(void** state) {
  (void)state;
  int64_t xs[2] = {4, 2}, cs[1] = {2};
  float x[8] = {1, 10, 2, 20, 3, 30, 4, 40};
  float rm0[2] = {0.5f, -1.0f}, rv0[2] = {2.0f, 0.25f};
  bp_tensor_t* xt = cpu_f32(2, xs, x);
  bp_tensor_t* rm = cpu_f32(1, cs, rm0);
  bp_tensor_t* rv = cpu_f32(1, cs, rv0);
  bp_tensor_t *out = NULL, *sm = NULL, *si = NULL;
  bp_batch_norm_attrs_t a = {sizeof a, 1, 0.1, 1e-5};
  assert_ok(bp_op_batch_norm(g_stream, xt, NULL, NULL, rm, rv, &a, &out, &sm, &si));
  ops_track(out), ops_track(sm), ops_track(si);
  float m[2], inv[2], back[2];
  read_f32(sm, m, 2);
  read_f32(si, inv, 2);
  assert_true(fabs(m[0] - 2.5f) < 1e-6 && fabs(m[1] - 25.0f) < 1e-5);
  assert_true(fabs(inv[0] - 1.0 / sqrt(1.25 + 1e-5)) < 1e-5);
  assert_true(fabs(inv[1] - 1.0 / sqrt(125.0 + 1e-5)) < 1e-6);
  read_f32(rm, back, 2);
  assert_true(back[0] == rm0[0] && back[1] == rm0[1]);
  read_f32(rv, back, 2);
  assert_true(back[0] == rv0[0] && back[1] == rv0[1]);
  /* eval */
  a.training = 0;
  bp_tensor_t *eo = NULL, *esm = NULL, *esi = NULL;
  assert_ok(bp_op_batch_norm(g_stream, xt, NULL, NULL, rm, rv, &a, &eo, &esm, &esi));
  ops_track(eo), ops_track(esm), ops_track(esi);
  bp_tensor_desc_t d = {.struct_size = sizeof d};
  bp_tensor_get_desc(esm, &d);
  assert_int_equal(d.rank, 1);
  assert_int_equal(d.sizes[0], 0);
  float y[8];
  read_f32(eo, y, 8);
  assert_true(fabs(y[3] - (20.0 + 1.0) / sqrt(0.25 + 1e-5)) < 1e-4);
}

static void test_batch_norm_bad_input(void** state) {
  (void)state;
  int64_t xs[2] = {4, 2}, cs[1] = {2}, c3[1] = {3};
  bp_tensor_t* x = cpu_f32(2, xs, NULL);
  bp_tensor_t* rm = cpu_f32(1, cs, NULL);
  bp_tensor_t *o = NULL, *s1 = NULL, *s2 = NULL;
  bp_batch_norm_attrs_t a = {sizeof a, 0, 0.1, 1e-5};
  assert_status(bp_op_batch_norm(g_stream, x, NULL, NULL, NULL, NULL, &a, &o, &s1, &s2),
                BP_INVALID_ARGUMENT, "attrs.training = 0 needs running_mean and running_var");
  a.training = 1;
  assert_status(bp_op_batch_norm(g_stream, x, NULL, NULL, rm, NULL, &a, &o, &s1, &s2),
                BP_INVALID_ARGUMENT, "must both be given or both be absent");
  assert_status(bp_op_batch_norm(g_stream, x, cpu_f32(1, c3, NULL), NULL, NULL, NULL, &a, &o, &s1,
                                 &s2),
                BP_INVALID_ARGUMENT, "expected [2] (the channels)");
}

static void test_group_norm_bad_group(void** state) {
  (void)state;
  int64_t xs[3] = {2, 6, 5};
  bp_tensor_t *o = NULL, *s1 = NULL, *s2 = NULL;
  bp_group_norm_attrs_t a = {sizeof a, 7, 2, 6, 5, 4, 1e-5};
  assert_status(bp_op_group_norm(g_stream, cpu_f32(3, xs, NULL), NULL, NULL, &a, &o, &s1, &s2),
                BP_INVALID_ARGUMENT, "attrs.group = 4 must be positive and divide C = 6");
  a.hxw = 6;
  assert_status(bp_op_group_norm(g_stream, cpu_f32(3, xs, NULL), NULL, NULL, &a, &o, &s1, &s2),
                BP_INVALID_ARGUMENT, "do not match input shape [2, 6, 5]");
}

/* A target outside [0, C) that is not ignore_index fails the stream. */
static void test_cross_entropy_target_out_of_range(void** state) {
  (void)state;
  bp_stream_t* s = NULL;
  assert_ok(bp_stream_create(g_cpu, NULL, &s));
  int64_t xs[2] = {2, 5}, ts[1] = {2};
  int64_t tgt[2] = {1, 7};
  bp_tensor_t* x = cpu_f32(2, xs, (float[10]){0});
  bp_tensor_t* t = ops_tensor(g_cpu, BP_DTYPE_I64, 1, ts);
  assert_ok(bp_tensor_write(g_stream, t, tgt, sizeof tgt));
  assert_ok(bp_stream_synchronize(g_stream));
  bp_tensor_t* out = NULL;
  assert_ok(bp_op_cross_entropy(s, x, t, NULL, NULL, &out));
  ops_track(out);
  assert_status(bp_stream_synchronize(s), BP_INVALID_ARGUMENT, "target 7 is out of bounds [0, 5)");
  bp_stream_release(s);
}

/* mean over no kept target is 0/0 = NaN; sum is 0; none is 0 per ignored
 * position. */
static void test_cross_entropy_all_ignored(void** state) {
  (void)state;
  int64_t xs[2] = {2, 3}, ts[1] = {2};
  int64_t tgt[2] = {-100, -100};
  float x[6] = {1, 2, 3, 4, 5, 6};
  bp_tensor_t* xt = cpu_f32(2, xs, x);
  bp_tensor_t* t = ops_tensor(g_cpu, BP_DTYPE_I64, 1, ts);
  assert_ok(bp_tensor_write(g_stream, t, tgt, sizeof tgt));
  float v[2];
  bp_tensor_t *mean = NULL, *sum = NULL, *none = NULL;
  bp_cross_entropy_attrs_t a = {sizeof a, BP_LOSS_MEAN, -100, 0.1};
  assert_ok(bp_op_cross_entropy(g_stream, xt, t, NULL, &a, &mean));
  ops_track(mean);
  read_f32(mean, v, 1);
  assert_true(isnan(v[0]));
  a.reduction = BP_LOSS_SUM;
  assert_ok(bp_op_cross_entropy(g_stream, xt, t, NULL, &a, &sum));
  ops_track(sum);
  read_f32(sum, v, 1);
  assert_true(v[0] == 0.0f);
  a.reduction = BP_LOSS_NONE;
  assert_ok(bp_op_cross_entropy(g_stream, xt, t, NULL, &a, &none));
  ops_track(none);
  read_f32(none, v, 2);
  assert_true(v[0] == 0.0f && v[1] == 0.0f);
}

/* output_mask bit clear: that gradient is [0]; bf16 input with f32
 * parameters keeps f32 statistics (PyTorch's mixed type). */
static void test_layer_norm_backward_mask_and_mixed(void** state) {
  (void)state;
  bp_layer_norm_attrs_t a = {sizeof a, 1, {4}, 1e-5, 1, 0};
  int64_t xs[2] = {3, 4}, ss[2] = {3, 1};
  bp_tensor_desc_t out[3];
  const bp_tensor_t* ins[6] = {ops_tensor(g_cpu, BP_DTYPE_F32, 2, xs), ops_tensor(g_cpu, BP_DTYPE_F32, 2, xs),
                               ops_tensor(g_cpu, BP_DTYPE_F32, 2, ss), ops_tensor(g_cpu, BP_DTYPE_F32, 2, ss),
                               NULL, NULL};
  memset(out, 0, sizeof out);
  for (int k = 0; k < 3; k++) out[k].struct_size = sizeof out[k];
  assert_ok(ops_infer(BP_OP_layer_norm_backward, ins, 6, &a, out, 3));
  assert_desc(&out[0], F32, 3, 4);
  assert_desc(&out[1], F32, 0);
  assert_desc(&out[2], F32, 0);
  int64_t ps[1] = {4};
  const bp_tensor_t* fw[3] = {ops_tensor(g_cpu, BP_DTYPE_BF16, 2, xs), ops_tensor(g_cpu, BP_DTYPE_F32, 1, ps), NULL};
  assert_ok(ops_infer(BP_OP_layer_norm, fw, 3, &a, out, 3));
  assert_desc(&out[0], BF16, 3, 4);
  assert_desc(&out[1], F32, 3, 1);
  const bp_tensor_t* bad[3] = {fw[0], ops_tensor(g_cpu, BP_DTYPE_F64, 1, ps), NULL};
  assert_status(ops_infer(BP_OP_layer_norm, bad, 3, &a, out, 3), BP_INVALID_ARGUMENT,
                "input 'weight' has dtype f64; expected bf16");
}

int main(void) {
  if (ops_fixture_setup() != 0 || g_cpu == NULL) return 1;
  if (bp_stream_create(g_cpu, NULL, &g_stream) != BP_OK) return 1;
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_teardown(test_layer_norm_large_rows, ops_release_all),
      cmocka_unit_test_teardown(test_layer_norm_small_rows, ops_release_all),
      cmocka_unit_test_teardown(test_rms_norm_default_eps, ops_release_all),
      cmocka_unit_test_teardown(test_add_rms_norm_is_add_then_rms_norm, ops_release_all),
      cmocka_unit_test_teardown(test_add_layer_norm_is_add_then_layer_norm, ops_release_all),
      cmocka_unit_test_teardown(test_add_layer_norm_reads_rounded_residual, ops_release_all),
      cmocka_unit_test_teardown(test_batch_norm_running_stats, ops_release_all),
      cmocka_unit_test_teardown(test_batch_norm_bad_input, ops_release_all),
      cmocka_unit_test_teardown(test_group_norm_bad_group, ops_release_all),
      cmocka_unit_test_teardown(test_cross_entropy_target_out_of_range, ops_release_all),
      cmocka_unit_test_teardown(test_cross_entropy_all_ignored, ops_release_all),
      cmocka_unit_test_teardown(test_layer_norm_backward_mask_and_mixed, ops_release_all),
  };
  int failed = cmocka_run_group_tests_name("norm", tests, NULL, NULL);
  bp_stream_release(g_stream);
  bp_context_release(g_ctx);
  return failed;
}
