/* weight_only_mm on cpu:0 through the public API: the 4-bit kernels for
 * groups of a multiple of 128 (the dequantized-weight tables of the
 * AVX-512 path), every scale dtype and zero-point form, signed and unsigned
 * codes, a tail of rows, and the activation epilogue (ABI 1.4), against a
 * double computation. ctest also runs it
 * with BP_CPU_ISA=base (the portable path) and under valgrind (which hides
 * AVX-512), so both paths must agree with the same reference. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ops_fixture.h"
#include "quant_fixture.h"

static bp_stream_t* g_stream;

static bp_tensor_t* cpu_tensor(uint32_t dtype, uint32_t rank, const int64_t* sizes, const void* data) {
  return ops_cpu_tensor(g_stream, dtype, rank, sizes, data);
}



enum { ZP_NONE, ZP_INT, ZP_FLOAT };

/* enum bp_activation in double (docs/semantics.md). */
static double act_ref(uint32_t act, double v) {
  switch (act) {
    case BP_ACTIVATION_RELU: return v > 0 ? v : 0.0;
    case BP_ACTIVATION_GELU_ERF: return 0.5 * v * (1.0 + erf(v / sqrt(2.0)));
    case BP_ACTIVATION_SILU: return v / (1.0 + exp(-v));
    default: return v;
  }
}

/* y = x @ ((w - z) * s)^T for 4-bit codes q (i4 / u4) in groups of g
 * along k, scales of sdt, zero points absent, i8 / u8 codes or floats of
 * sdt; m = 2 rows of x, n = 13 rows of w (blocks of 4 and a tail). */
static void check_w4_act(uint32_t q, int64_t k, int64_t g, uint32_t sdt, int zmode, uint32_t act) {
  const int64_t m = 2, n = 13, groups = k / g;
  const int sgn = q == BP_DTYPE_I4;
  float* x = malloc(sizeof(float) * (size_t)(m * k));
  uint8_t* w = malloc((size_t)(n * k / 2));
  float* sc = malloc(sizeof(float) * (size_t)(n * groups));
  float* zf = malloc(sizeof(float) * (size_t)(n * groups));
  void* sraw = malloc(sizeof(float) * (size_t)(n * groups));
  void* zraw = malloc(sizeof(float) * (size_t)(n * groups));
  float* y = malloc(sizeof(float) * (size_t)(m * n));
  assert_true(x && w && sc && zf && sraw && zraw && y);
  uint64_t s = 101 + (uint64_t)(k + g + sdt + 7 * zmode + 31 * sgn);
  for (int64_t i = 0; i < m * k; i++) x[i] = (float)((int)(next(&s) % 2001) - 1000) / 500.0f;
  for (int64_t i = 0; i < n * k / 2; i++) w[i] = (uint8_t)(next(&s) >> 24);
  for (int64_t i = 0; i < n * groups; i++) {
    sc[i] = (float)(1 + next(&s) % 50) / 256.0f; /* exact in f16 and bf16 */
    store_exact(sraw, sdt, i, sc[i]);
    int zc = (int)(next(&s) % 16) - (sgn ? 8 : 0);
    zf[i] = zmode == ZP_NONE ? 0.0f : (float)zc;
    if (zmode == ZP_INT) ((int8_t*)zraw)[i] = (int8_t)zc;
    if (zmode == ZP_FLOAT) store_exact(zraw, sdt, i, (float)zc);
  }
  int64_t xs[2] = {m, k}, ws[2] = {n, k / 2}, ss[2] = {n, groups};
  bp_quantize_attrs_t at = {.struct_size = sizeof at, .qdtype = q, .axis = -1, .block_size = g,
                            .activation = act};
  bp_tensor_t* zt = NULL;
  if (zmode == ZP_INT) zt = cpu_tensor(sgn ? BP_DTYPE_I8 : BP_DTYPE_U8, 2, ss, zraw);
  if (zmode == ZP_FLOAT) zt = cpu_tensor(sdt, 2, ss, zraw);
  bp_tensor_t* out = NULL;
  assert_ok(bp_op_weight_only_mm(g_stream, cpu_tensor(BP_DTYPE_F32, 2, xs, x),
                                 cpu_tensor(BP_DTYPE_U8, 2, ws, w), cpu_tensor(sdt, 2, ss, sraw), zt,
                                 NULL, &at, &out));
  ops_track(out);
  assert_ok(bp_tensor_read(g_stream, out, y, sizeof(float) * (uint64_t)(m * n)));
  assert_ok(bp_stream_synchronize(g_stream));
  for (int64_t i = 0; i < m; i++)
    for (int64_t j = 0; j < n; j++) {
      double want = 0.0, mag = 0.0;
      for (int64_t t = 0; t < k; t++) {
        int code = (w[j * k / 2 + t / 2] >> ((t & 1) * 4)) & 15; /* low nibble first */
        if (sgn) code = (code ^ 8) - 8;
        int64_t gi = j * groups + t / g;
        double p = x[i * k + t] * (code - (double)zf[gi]) * (double)sc[gi];
        want += p, mag += fabs(p);
      }
      want = act_ref(act, want); /* every activation here has a slope of at most 1.2 */
      double got = y[i * n + j];
      if (!(fabs(got - want) <= 1.2e-5 * mag + 1e-6))
        fail_msg("q %u k %lld g %lld scale %u zero points %d: y[%lld, %lld] = %.9g, want %.9g",
                 q, (long long)k, (long long)g, sdt, zmode, (long long)i, (long long)j, got, want);
    }
  free(x), free(w), free(sc), free(zf), free(sraw), free(zraw), free(y);
}

static void check_w4(uint32_t q, int64_t k, int64_t g, uint32_t sdt, int zmode) {
  check_w4_act(q, k, g, sdt, zmode, BP_ACTIVATION_NONE);
}

static void test_w4_groups_of_128(void** state) {
  (void)state;
  const uint32_t sdts[3] = {BP_DTYPE_F32, BP_DTYPE_F16, BP_DTYPE_BF16};
  for (int sd = 0; sd < 3; sd++)
    for (int zmode = ZP_NONE; zmode <= ZP_FLOAT; zmode++) {
      check_w4(BP_DTYPE_U4, 512, 128, sdts[sd], zmode);
      check_w4(BP_DTYPE_I4, 512, 128, sdts[sd], zmode);
    }
  check_w4(BP_DTYPE_U4, 768, 256, BP_DTYPE_F16, ZP_INT); /* two chunks per group, odd group count */
  check_w4(BP_DTYPE_I4, 384, 384, BP_DTYPE_F32, ZP_FLOAT); /* one group over the row */
  check_w4(BP_DTYPE_I4, 256, 64, BP_DTYPE_F16, ZP_FLOAT);  /* groups of 64: the lane-scale kernel */
  /* over 16 groups: scales and zero points converted 16 groups at a time */
  check_w4(BP_DTYPE_I4, 2560, 128, BP_DTYPE_F16, ZP_INT);
  check_w4(BP_DTYPE_U4, 2560, 128, BP_DTYPE_F32, ZP_INT);
  check_w4(BP_DTYPE_U4, 4352, 256, BP_DTYPE_BF16, ZP_FLOAT);
}

/* attrs.activation (ABI 1.4) after x @ w^T: on the groups-of-128 kernel
 * and the lane-scale one; refused values and ops. */
static void test_activation_epilogue(void** state) {
  (void)state;
  check_w4_act(BP_DTYPE_U4, 512, 128, BP_DTYPE_F16, ZP_INT, BP_ACTIVATION_SILU);
  check_w4_act(BP_DTYPE_I4, 256, 32, BP_DTYPE_F32, ZP_NONE, BP_ACTIVATION_GELU_ERF);
  check_w4_act(BP_DTYPE_I4, 384, 128, BP_DTYPE_BF16, ZP_FLOAT, BP_ACTIVATION_RELU);
  int64_t xs[2] = {1, 128}, ws[2] = {4, 64}, ss[2] = {4, 1}, one = 1;
  bp_tensor_t* x = cpu_tensor(BP_DTYPE_F32, 2, xs, NULL);
  bp_tensor_t* w = cpu_tensor(BP_DTYPE_U8, 2, ws, NULL);
  bp_tensor_t* s = cpu_tensor(BP_DTYPE_F32, 2, ss, NULL);
  bp_quantize_attrs_t at = {.struct_size = sizeof at, .qdtype = BP_DTYPE_U4, .axis = -1,
                            .block_size = 128, .activation = BP_ACTIVATION_TANH + 1};
  bp_tensor_t* out = NULL;
  assert_int_equal(bp_op_weight_only_mm(g_stream, x, w, s, NULL, NULL, &at, &out), BP_INVALID_ARGUMENT);
  assert_non_null(strstr(bp_status_message(), "attrs.activation"));
  bp_quantize_attrs_t qa = {.struct_size = sizeof qa, .qdtype = BP_DTYPE_I8, .axis = -1,
                            .activation = BP_ACTIVATION_RELU};
  bp_tensor_t* sc = cpu_tensor(BP_DTYPE_F32, 1, &one, NULL);
  assert_int_equal(bp_op_quantize(g_stream, x, sc, NULL, &qa, &out), BP_INVALID_ARGUMENT);
  assert_non_null(strstr(bp_status_message(), "only weight_only_mm takes an activation"));
  assert_null(out);
}

int main(void) {
  if (ops_fixture_setup() != 0 || g_cpu == NULL) return 1;
  if (bp_stream_create(g_cpu, NULL, &g_stream) != BP_OK) return 1;
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_teardown(test_w4_groups_of_128, ops_release_all),
      cmocka_unit_test_teardown(test_activation_epilogue, ops_release_all),
  };
  int failed = cmocka_run_group_tests_name("weight_only", tests, NULL, NULL);
  bp_stream_release(g_stream);
  bp_context_release(g_ctx);
  return failed;
}
