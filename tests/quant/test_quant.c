/* Quantization family through the public API on cpu:0 (docs/semantics.md,
 * "Quantization"): results the kernels' fast and portable paths must both
 * give exactly, the packed nibble order, and MX round trips. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ops_fixture.h"
#include "quant_fixture.h"

static bp_stream_t* g_stream;

static bp_tensor_t* cpu_tensor(uint32_t dtype, uint32_t rank, const int64_t* sizes, const void* data) {
  return ops_cpu_tensor(g_stream, dtype, rank, sizes, data);
}

static void read_bytes(const bp_tensor_t* t, void* out, uint64_t n) {
  assert_ok(bp_tensor_read(g_stream, t, out, n));
  assert_ok(bp_stream_synchronize(g_stream));
}


/* i8 x i8 -> i32 and u8 (zero point 131) x i8 over tails in m, n and k:
 * exactly the integer product. */
static void check_int_mm(uint32_t adt, int32_t azp) {
  const int64_t m = 19, k = 131, n = 37;
  int8_t* a = malloc((size_t)(m * k));
  int8_t* b = malloc((size_t)(k * n));
  int32_t* c = malloc(sizeof(int32_t) * (size_t)(m * n));
  assert_non_null(a), assert_non_null(b), assert_non_null(c);
  uint64_t s = 7;
  for (int64_t i = 0; i < m * k; i++) a[i] = (int8_t)(next(&s) >> 24);
  for (int64_t i = 0; i < k * n; i++) b[i] = (int8_t)(next(&s) >> 24);
  int64_t as[2] = {m, k}, bs[2] = {k, n};
  bp_scaled_mm_attrs_t at = {.struct_size = sizeof at, .a_zero_point = azp};
  bp_tensor_t* out = NULL;
  assert_ok(bp_op_scaled_mm(g_stream, cpu_tensor(adt, 2, as, a), cpu_tensor(BP_DTYPE_I8, 2, bs, b),
                            NULL, NULL, NULL, &at, &out));
  ops_track(out);
  read_bytes(out, c, sizeof(int32_t) * (uint64_t)(m * n));
  for (int64_t i = 0; i < m; i++)
    for (int64_t j = 0; j < n; j++) {
      int64_t want = 0;
      for (int64_t t = 0; t < k; t++) {
        int64_t av = adt == BP_DTYPE_U8 ? (uint8_t)a[i * k + t] : a[i * k + t];
        want += (av - azp) * b[t * n + j];
      }
      assert_int_equal(c[i * n + j], want);
    }
  free(a), free(b), free(c);
}
static void test_int_mm_exact(void** state) {
  (void)state;
  check_int_mm(BP_DTYPE_I8, 0);
  check_int_mm(BP_DTYPE_U8, 131);
}

/* Batch-2 i4 weight-only matmul with groups of 32, u8 zero points and 13
 * rows (a block of 4 rows and a tail) against a double computation. */
static void test_w4_matches_double(void** state) {
  (void)state;
  const int64_t m = 2, k = 256, n = 13, g = 32, groups = k / g;
  float* x = malloc(sizeof(float) * (size_t)(m * k));
  uint8_t* w = malloc((size_t)(n * k / 2));
  float* sc = malloc(sizeof(float) * (size_t)(n * groups));
  uint8_t* zp = malloc((size_t)(n * groups));
  float* y = malloc(sizeof(float) * (size_t)(m * n));
  uint64_t s = 11;
  for (int64_t i = 0; i < m * k; i++) x[i] = (float)((int)(next(&s) % 2001) - 1000) / 500.0f;
  for (int64_t i = 0; i < n * k / 2; i++) w[i] = (uint8_t)(next(&s) >> 24);
  for (int64_t i = 0; i < n * groups; i++) sc[i] = 0.001f * (float)(1 + next(&s) % 50), zp[i] = (uint8_t)(next(&s) % 16);
  int64_t xs[2] = {m, k}, ws[2] = {n, k / 2}, ss[2] = {n, groups};
  bp_quantize_attrs_t at = {.struct_size = sizeof at, .qdtype = BP_DTYPE_U4, .axis = -1, .block_size = g};
  bp_tensor_t* out = NULL;
  assert_ok(bp_op_weight_only_mm(g_stream, cpu_tensor(BP_DTYPE_F32, 2, xs, x),
                                 cpu_tensor(BP_DTYPE_U8, 2, ws, w), cpu_tensor(BP_DTYPE_F32, 2, ss, sc),
                                 cpu_tensor(BP_DTYPE_U8, 2, ss, zp), NULL, &at, &out));
  ops_track(out);
  read_bytes(out, y, sizeof(float) * (uint64_t)(m * n));
  for (int64_t i = 0; i < m; i++)
    for (int64_t j = 0; j < n; j++) {
      double want = 0.0, mag = 0.0;
      for (int64_t t = 0; t < k; t++) {
        int code = (w[j * k / 2 + t / 2] >> ((t & 1) * 4)) & 15; /* low nibble first */
        double p = x[i * k + t] * (code - zp[j * groups + t / g]) * (double)sc[j * groups + t / g];
        want += p, mag += fabs(p);
      }
      assert_true(fabs(y[i * n + j] - want) <= 1e-5 * mag + 1e-6);
    }
  free(x), free(w), free(sc), free(zp), free(y);
}

/* x quantized the way BP_QUANTIZE_INT8_ACTIVATIONS says: int8 per block of
 * 32 along k, scale amax / 127, codes round to nearest even (in f32, as the
 * kernel does), into xq (the dequantized values, in double). */
static void q8_reference_x(const float* x, int64_t k, double* xq) {
  for (int64_t b = 0; b < k / 32; b++) {
    float amax = 0.0f;
    for (int t = 0; t < 32; t++) amax = fmaxf(amax, fabsf(x[b * 32 + t]));
    float d = amax / 127.0f, inv = amax > 0.0f ? 127.0f / amax : 0.0f;
    for (int t = 0; t < 32; t++) xq[b * 32 + t] = (double)nearbyintf(x[b * 32 + t] * inv) * d;
  }
}

/* weight_only_mm with BP_QUANTIZE_INT8_ACTIVATIONS: 4-bit codes (i4 or u4),
 * group g, zero points (u8 / i8 codes or float of the scale's dtype, or
 * none), n rows (13: blocks of 4 and a tail; 68 or 96: each block's rows
 * from the quarters of w), m = 3. Always within the
 * flag's documented bound of the exact product (half a step of x per
 * element); on a CPU with AVX-512 VNNI (the int8 path runs) also within
 * f32 rounding of the product over the int8-quantized x, which no other
 * quantization of x (or a wrong lane, nibble or block scale) matches. */
static void check_w4_q8(uint32_t q, int64_t k, int64_t g, uint32_t sdt, int zero_points, int nan_row,
                        int64_t n) {
  /* the int8 path runs: its shapes (k a multiple of 128; g 32, 64 or a
   * multiple of 128) and a finite x (a NaN sends the call to the f32 path) */
  const int fits = k % 128 == 0 && !nan_row;
  const int64_t m = 3, groups = k / g;
  float* x = malloc(sizeof(float) * (size_t)(m * k));
  uint8_t* w = malloc((size_t)(n * k / 2));
  float* sc = malloc(sizeof(float) * (size_t)(n * groups));
  void* sraw = malloc(sizeof(float) * (size_t)(n * groups));
  uint8_t* zp = malloc((size_t)(n * groups));
  float* y = malloc(sizeof(float) * (size_t)(m * n));
  double* xq = malloc(sizeof(double) * (size_t)k);
  assert_true(x && w && sc && sraw && zp && y && xq);
  uint64_t s = 29 + (uint64_t)k + (uint64_t)g;
  for (int64_t i = 0; i < m * k; i++) x[i] = (float)((int)(next(&s) % 2001) - 1000) / 300.0f;
  for (int64_t i = 0; i < k; i += 37) x[i] = 0.0f;       /* a few zeros */
  for (int64_t i = 64; i < 96; i++) x[i] = 0.0f;         /* a block of zeros: scale 0 */
  if (nan_row) x[k + 5] = NAN;                           /* row 1: the f32 path, NaN out */
  for (int64_t i = 0; i < n * k / 2; i++) w[i] = (uint8_t)(next(&s) >> 24);
  for (int64_t i = 0; i < n * groups; i++) {
    sc[i] = (float)(1 + next(&s) % 50) / 1024.0f; /* exact in f16 and bf16 */
    store_exact(sraw, sdt, i, sc[i]);
    zp[i] = (uint8_t)(next(&s) % 16);
    if (q == BP_DTYPE_I4) zp[i] = (uint8_t)(int8_t)((int)zp[i] - 8);
  }
  int64_t xs[2] = {m, k}, ws[2] = {n, k / 2}, ss[2] = {n, groups};
  bp_quantize_attrs_t at = {.struct_size = sizeof at, .qdtype = q, .axis = -1, .block_size = g,
                            .flags = BP_QUANTIZE_INT8_ACTIVATIONS};
  bp_tensor_t* zt = NULL;
  if (zero_points == 1) zt = cpu_tensor(q == BP_DTYPE_I4 ? BP_DTYPE_I8 : BP_DTYPE_U8, 2, ss, zp);
  bp_tensor_t* out = NULL;
  assert_ok(bp_op_weight_only_mm(g_stream, cpu_tensor(BP_DTYPE_F32, 2, xs, x),
                                 cpu_tensor(BP_DTYPE_U8, 2, ws, w), cpu_tensor(sdt, 2, ss, sraw),
                                 zt, NULL, &at, &out));
  ops_track(out);
  read_bytes(out, y, sizeof(float) * (uint64_t)(m * n));
  __builtin_cpu_init();
  const char* cap = getenv("BP_CPU_ISA"); /* base / avx2: the plugin's portable paths */
  int vnni = __builtin_cpu_supports("avx512vnni") && __builtin_cpu_supports("avx512bw") &&
             __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("f16c") &&
             __builtin_cpu_supports("avx512vbmi") && !(cap && *cap && strcmp(cap, "avx512") != 0);
  for (int64_t i = 0; i < m; i++) {
    q8_reference_x(x + i * k, k, xq);
    for (int64_t j = 0; j < n; j++) {
      double exact = 0.0, viaq = 0.0, mag = 0.0, bound = 0.0;
      for (int64_t t = 0; t < k; t++) {
        int code = (w[j * k / 2 + t / 2] >> ((t & 1) * 4)) & 15; /* low nibble first */
        if (q == BP_DTYPE_I4) code = (code ^ 8) - 8;
        int64_t gi = j * groups + t / g;
        double z = zero_points ? (double)(q == BP_DTYPE_I4 ? (int8_t)zp[gi] : zp[gi]) : 0.0;
        double wd = (code - z) * (double)sc[gi];
        float amax = 0.0f;
        for (int u = 0; u < 32; u++) amax = fmaxf(amax, fabsf(x[i * k + t / 32 * 32 + u]));
        exact += x[i * k + t] * wd, viaq += xq[t] * wd, mag += fabs(x[i * k + t] * wd);
        bound += fabs(wd) * (double)amax / 254.0;
      }
      double got = y[i * n + j];
      if (nan_row && i == 1) {
        assert_true(isnan(got));
        continue;
      }
      assert_true(fabs(got - exact) <= bound * (1 + 1e-6) + 1e-5 * mag + 1e-6);
      if (vnni && fits) assert_true(fabs(got - viaq) <= 1e-5 * mag + 1e-6);
    }
  }
  free(x), free(w), free(sc), free(sraw), free(zp), free(y), free(xq);
}
static void test_w4_int8_activations(void** state) {
  (void)state;
  check_w4_q8(BP_DTYPE_I4, 256, 32, BP_DTYPE_F32, 0, 0, 13);
  check_w4_q8(BP_DTYPE_U4, 256, 64, BP_DTYPE_F16, 1, 0, 13);
  check_w4_q8(BP_DTYPE_I4, 384, 128, BP_DTYPE_F32, 1, 0, 13);
  check_w4_q8(BP_DTYPE_U4, 512, 256, BP_DTYPE_BF16, 0, 1, 13);
  check_w4_q8(BP_DTYPE_I4, 96, 32, BP_DTYPE_F32, 0, 0, 13); /* k not a multiple of 128: the f32 path */
  /* more than 16 groups: the scales of a second batch of 16, and its tail */
  check_w4_q8(BP_DTYPE_I4, 2560, 128, BP_DTYPE_F16, 0, 0, 13);
  check_w4_q8(BP_DTYPE_U4, 4352, 256, BP_DTYPE_BF16, 1, 0, 13);
  /* blocks of rows from the quarters of w: whole groups, groups of 64 */
  check_w4_q8(BP_DTYPE_I4, 512, 128, BP_DTYPE_F16, 1, 0, 68);
  check_w4_q8(BP_DTYPE_U4, 256, 64, BP_DTYPE_F32, 1, 0, 96);
}

/* Element 2j in the low nibble: [1, -2, 7, -8] as i4 -> 0xE1, 0x87. */
static void test_nibble_order(void** state) {
  (void)state;
  const float x[4] = {1, -2, 7, -8}, one = 1.0f;
  int64_t xs[2] = {1, 4}, s1[1] = {1};
  bp_quantize_attrs_t at = {.struct_size = sizeof at, .qdtype = BP_DTYPE_I4, .axis = -1};
  bp_tensor_t *q = NULL, *back = NULL;
  bp_tensor_t* sc = cpu_tensor(BP_DTYPE_F32, 1, s1, &one);
  assert_ok(bp_op_quantize(g_stream, cpu_tensor(BP_DTYPE_F32, 2, xs, x), sc, NULL, &at, &q));
  ops_track(q);
  uint8_t bytes[2];
  read_bytes(q, bytes, 2);
  assert_int_equal(bytes[0], 0xE1);
  assert_int_equal(bytes[1], 0x87);
  assert_ok(bp_op_dequantize(g_stream, q, sc, NULL, &at, &back));
  ops_track(back);
  float y[4];
  read_bytes(back, y, sizeof y);
  assert_memory_equal(x, y, sizeof y);
}

/* MX: quantize_dynamic to fp4 e2m1 and fp8 e4m3fn with e8m0 scales, then
 * dequantize with those scales as input: within half an element step. */
static void check_mx(uint32_t q, double rel_step) {
  const int64_t rows = 3, k = 96;
  float* x = malloc(sizeof(float) * (size_t)(rows * k));
  float* y = malloc(sizeof(float) * (size_t)(rows * k));
  uint64_t s = 5;
  for (int64_t i = 0; i < rows * k; i++) x[i] = (float)((int)(next(&s) % 20001) - 10000) / 997.0f;
  x[5] = 0.0f;
  int64_t xs[2] = {rows, k};
  bp_quantize_attrs_t at = {.struct_size = sizeof at, .qdtype = q, .axis = -1, .block_size = 32,
                            .dtype = BP_DTYPE_F8E8M0FNU};
  bp_tensor_t *codes = NULL, *scale = NULL, *back = NULL;
  assert_ok(bp_op_quantize_dynamic(g_stream, cpu_tensor(BP_DTYPE_F32, 2, xs, x), &at, &codes, &scale));
  ops_track(codes), ops_track(scale);
  at.dtype = BP_DTYPE_F32;
  assert_ok(bp_op_dequantize(g_stream, codes, scale, NULL, &at, &back));
  ops_track(back);
  read_bytes(back, y, sizeof(float) * (uint64_t)(rows * k));
  uint8_t sb[3 * 3];
  read_bytes(scale, sb, sizeof sb);
  for (int64_t r = 0; r < rows; r++)
    for (int64_t b = 0; b < 3; b++) {
      double amax = 0.0;
      for (int64_t j = b * 32; j < b * 32 + 32; j++) amax = fmax(amax, fabs(x[r * k + j]));
      double scl = ldexp(1.0, (int)sb[r * 3 + b] - 127);
      assert_true(scl * (q == BP_DTYPE_F4E2M1FN ? 6.0 : 448.0) >= amax / 2); /* the MX exponent */
      for (int64_t j = b * 32; j < b * 32 + 32; j++)
        assert_true(fabs(y[r * k + j] - x[r * k + j]) <= rel_step * fabs(x[r * k + j]) + scl * 0.5);
    }
  free(x), free(y);
}
static void test_mx_round_trip(void** state) {
  (void)state;
  check_mx(BP_DTYPE_F4E2M1FN, 0.25);
  check_mx(BP_DTYPE_F8E4M3FN, 1.0 / 16);
}

int main(void) {
  if (ops_fixture_setup() != 0 || g_cpu == NULL) return 1;
  if (bp_stream_create(g_cpu, NULL, &g_stream) != BP_OK) return 1;
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_teardown(test_int_mm_exact, ops_release_all),
      cmocka_unit_test_teardown(test_w4_matches_double, ops_release_all),
      cmocka_unit_test_teardown(test_w4_int8_activations, ops_release_all),
      cmocka_unit_test_teardown(test_nibble_order, ops_release_all),
      cmocka_unit_test_teardown(test_mx_round_trip, ops_release_all),
  };
  int failed = cmocka_run_group_tests_name("quant", tests, NULL, NULL);
  bp_stream_release(g_stream);
  bp_context_release(g_ctx);
  return failed;
}
