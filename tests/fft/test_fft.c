/* fft_r2c and fft_c2r through the public API on cpu:0: known spectra, the
 * three normalizations, round trips over power-of-two, mixed-radix, small
 * prime and Bluestein lengths, the Hermitian rules of c2r (ignored
 * imaginary parts of DC and Nyquist, extra frequencies), several dims, and
 * the error cases with their messages. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdlib.h>

#include "cpu_fixture.h"

static bp_fft_attrs_t fft_attrs(uint32_t nd, const int64_t* dims, uint32_t norm) {
  bp_fft_attrs_t a = {.struct_size = sizeof a, .num_dims = nd, .normalization = norm, .onesided = 1};
  for (uint32_t i = 0; i < nd; i++) a.dims[i] = dims[i];
  return a;
}

/* A delta has a flat spectrum; a cosine of frequency 1 has N/2 at bins 1 and
 * N-1 (onesided: bin 1 only); ortho scales by 1/sqrt(N). */
static void test_r2c_known_spectra(void** state) {
  (void)state;
  float delta[8] = {1, 0, 0, 0, 0, 0, 0, 0}, cosine[8], got[2 * 8];
  for (int i = 0; i < 8; i++) cosine[i] = (float)cos(2 * M_PI * i / 8);
  bp_fft_attrs_t a = fft_attrs(1, (int64_t[]){0}, BP_FFT_NORM_NONE);
  bp_tensor_t* out = NULL;
  assert_int_equal(bp_op_fft_r2c(g_stream, FX_T(F32, delta, 8), &a, &out), BP_OK);
  fx_track(out);
  assert_int_equal(bp_tensor_sizes(out)[0], 5);
  assert_int_equal(bp_tensor_dtype(out), BP_DTYPE_C64);
  fx_read(out, got, 5, 8);
  fx_assert_close(got, (float[]){1, 0, 1, 0, 1, 0, 1, 0, 1, 0}, 10, 1e-7);
  a.normalization = BP_FFT_NORM_ORTHO;
  a.onesided = 0;
  bp_tensor_t* out2 = NULL;
  assert_int_equal(bp_op_fft_r2c(g_stream, FX_T(F32, cosine, 8), &a, &out2), BP_OK);
  fx_track(out2);
  assert_int_equal(bp_tensor_sizes(out2)[0], 8);
  fx_read(out2, got, 8, 8);
  float want[16] = {0};
  want[2] = want[14] = (float)(4 / sqrt(8.0));
  for (int i = 0; i < 16; i++) assert_true(fabsf(got[i] - want[i]) < 1e-6f);
}

/* r2c then c2r with 1/n is the identity, for lengths that exercise every
 * plan: powers of two, mixed radix, a generic prime radix and Bluestein. */
static void test_round_trip_lengths(void** state) {
  (void)state;
  static const int64_t lens[] = {1, 2, 3, 16, 60, 31, 37, 97, 74, 210};
  for (size_t li = 0; li < sizeof lens / sizeof lens[0]; li++) {
    int64_t n = lens[li], h = n / 2 + 1;
    float* x = malloc(sizeof(float) * (size_t)(2 * n));
    float* y = malloc(sizeof(float) * (size_t)(2 * n));
    assert_true(x && y);
    for (int64_t b = 0; b < 2; b++)
      for (int64_t i = 0; i < n; i++) x[b * n + i] = (float)sin(1.7 * (double)i + (double)b) + 0.25f;
    bp_fft_attrs_t f = fft_attrs(1, (int64_t[]){-1}, BP_FFT_NORM_NONE);
    bp_tensor_t *spec = NULL, *back = NULL;
    assert_int_equal(bp_op_fft_r2c(g_stream, FX_T(F32, x, 2, n), &f, &spec), BP_OK);
    fx_track(spec);
    assert_int_equal(bp_tensor_sizes(spec)[1], h);
    bp_fft_attrs_t inv = fft_attrs(1, (int64_t[]){1}, BP_FFT_NORM_BY_N);
    inv.last_dim_size = n;
    assert_int_equal(bp_op_fft_c2r(g_stream, spec, &inv, &back), BP_OK);
    fx_track(back);
    fx_read(back, y, 2 * n, 4);
    fx_assert_close(y, x, 2 * n, 2e-6);
    free(x);
    free(y);
  }
}

/* c2r reads Re X[0] and, for even N, Re X[N/2] only, and ignores
 * frequencies past N/2 + 1 (pocketfft and cuFFT do the same). */
static void test_c2r_hermitian_rules(void** state) {
  (void)state;
  /* N = 4: X = [2 + 5i, 0, 2 - 7i, 9 + 9i (extra)] -> x[n] = (2 + 2 (-1)^n) / 1 */
  float spec[8] = {2, 5, 0, 0, 2, -7, 9, 9}, got[4];
  bp_fft_attrs_t a = fft_attrs(1, (int64_t[]){0}, BP_FFT_NORM_NONE);
  a.last_dim_size = 4;
  bp_tensor_t* out = NULL;
  assert_int_equal(bp_op_fft_c2r(g_stream, FX_T(C64, spec, 4), &a, &out), BP_OK);
  fx_track(out);
  fx_read(out, got, 4, 4);
  fx_assert_close(got, (float[]){4, 0, 4, 0}, 4, 1e-6);
  /* N = 3 from the same first two frequencies: x[n] = 2 + 0 */
  a.last_dim_size = 3;
  bp_tensor_t* out3 = NULL;
  assert_int_equal(bp_op_fft_c2r(g_stream, FX_T(C64, spec, 2), &a, &out3), BP_OK);
  fx_track(out3);
  fx_read(out3, got, 3, 4);
  fx_assert_close(got, (float[]){2, 2, 2}, 3, 1e-6);
}

/* 2-d: a delta at (0, 0) of a [4, 6] signal over both dims has a flat
 * spectrum of shape [4, 4]; listing the dims the other way round halves
 * dim 0 instead ([3, 6]). */
static void test_r2c_two_dims(void** state) {
  (void)state;
  float x[24] = {1}, got[2 * 24];
  bp_fft_attrs_t a = fft_attrs(2, (int64_t[]){0, 1}, BP_FFT_NORM_BY_N);
  bp_tensor_t* out = NULL;
  assert_int_equal(bp_op_fft_r2c(g_stream, FX_T(F32, x, 4, 6), &a, &out), BP_OK);
  fx_track(out);
  assert_int_equal(bp_tensor_sizes(out)[0], 4);
  assert_int_equal(bp_tensor_sizes(out)[1], 4);
  fx_read(out, got, 16, 8);
  for (int i = 0; i < 16; i++) {
    assert_true(fabsf(got[2 * i] - 1.0f / 24) < 1e-7f);
    assert_true(fabsf(got[2 * i + 1]) < 1e-7f);
  }
  bp_fft_attrs_t b = fft_attrs(2, (int64_t[]){1, 0}, BP_FFT_NORM_NONE);
  bp_tensor_t* out2 = NULL;
  assert_int_equal(bp_op_fft_r2c(g_stream, FX_T(F32, x, 4, 6), &b, &out2), BP_OK);
  fx_track(out2);
  assert_int_equal(bp_tensor_sizes(out2)[0], 3);
  assert_int_equal(bp_tensor_sizes(out2)[1], 6);
}

static void test_fft_errors(void** state) {
  (void)state;
  bp_tensor_t* out = NULL;
  bp_fft_attrs_t a = fft_attrs(1, (int64_t[]){0}, BP_FFT_NORM_NONE);
  fx_assert_status(bp_op_fft_r2c(g_stream, FX_T(F64, NULL, 8), &a, &out), BP_INVALID_ARGUMENT,
                   "fft_r2c takes f32");
  bp_fft_attrs_t rep = fft_attrs(2, (int64_t[]){1, -1}, BP_FFT_NORM_NONE);
  fx_assert_status(bp_op_fft_r2c(g_stream, FX_T(F32, NULL, 3, 8), &rep, &out), BP_INVALID_ARGUMENT,
                   "repeats dim 1");
  bp_fft_attrs_t none = fft_attrs(0, NULL, BP_FFT_NORM_NONE);
  fx_assert_status(bp_op_fft_r2c(g_stream, FX_T(F32, NULL, 8), &none, &out), BP_INVALID_ARGUMENT,
                   "num_dims must be at least 1");
  fx_assert_status(bp_op_fft_r2c(g_stream, FX_T(F32, NULL, 0), &a, &out), BP_INVALID_ARGUMENT,
                   "invalid number of data points (0)");
  bp_fft_attrs_t c = fft_attrs(1, (int64_t[]){0}, BP_FFT_NORM_NONE);
  c.last_dim_size = 10;
  fx_assert_status(bp_op_fft_c2r(g_stream, FX_T(C64, NULL, 5), &c, &out), BP_INVALID_ARGUMENT,
                   "last_dim_size 10 needs 6");
  fx_assert_status(bp_op_fft_c2r(g_stream, FX_T(F32, NULL, 6), &c, &out), BP_INVALID_ARGUMENT,
                   "fft_c2r takes c64");
  c.last_dim_size = 0;
  fx_assert_status(bp_op_fft_c2r(g_stream, FX_T(C64, NULL, 6), &c, &out), BP_INVALID_ARGUMENT,
                   "must be at least 1");
  assert_null(out);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_teardown(test_r2c_known_spectra, fx_release_all),
      cmocka_unit_test_teardown(test_round_trip_lengths, fx_release_all),
      cmocka_unit_test_teardown(test_c2r_hermitian_rules, fx_release_all),
      cmocka_unit_test_teardown(test_r2c_two_dims, fx_release_all),
      cmocka_unit_test_teardown(test_fft_errors, fx_release_all),
  };
  return cmocka_run_group_tests(tests, fx_setup, fx_teardown);
}
