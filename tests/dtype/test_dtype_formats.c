/* The plugin helpers' dtype facts (bp_plugin_common.h) against the hand
 * written table of tests/dtype_expect.h, and the small float conversions
 * over every bit pattern against the formats' specifications:
 *  - OCP 8-bit Floating Point Specification (OFP8) for e4m3fn and e5m2;
 *  - the fnuz variants (e4m3fnuz, e5m2fnuz) as ONNX, PJRT and PyTorch
 *    define them: bias 8 / 16, no infinity, no -0, NaN is 0x80;
 *  - OCP Microscaling Formats (MX) v1.0 for e8m0, fp6 e2m3 / e3m2, fp4 e2m1.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <string.h>

#include "bp_plugin_common.h"
#include "dtype_expect.h"

static void test_facts(void** state) {
  (void)state;
  BP_TEST_CHECK_DTYPE_FACTS();
  for (int i = 0; i < BP_TEST_NUM_DTYPES; ++i) assert_true(bp_dtype_is_valid(bp_test_dtypes[i].dtype));
  for (size_t i = 0; i < sizeof bp_test_bad_dtypes / sizeof bp_test_bad_dtypes[0]; ++i) {
    uint32_t d = bp_test_bad_dtypes[i];
    assert_false(bp_dtype_is_valid(d));
    assert_false(bp_dtype_is_small_float(d));
    assert_int_equal(bp_f64_to_small_float(d, 1.0), 0);
    assert_true(isnan(bp_small_float_to_f64(d, 0)));
  }
}

/* ---- the specifications, one format at a time ------------------------------ */
typedef struct spec {
  uint32_t dtype;
  int width;        /* bits of the encoding */
  int ebits, mbits; /* exponent and mantissa widths (e8m0: 8, 0) */
  int bias;
  int is_signed;
  double max;       /* largest finite value (from the spec's table) */
  double min_sub;   /* smallest positive value */
  /* what overflow, +-inf and NaN encode to; -1: see the test */
  const char* nan_rule;
} spec_t;

static const spec_t kSpecs[] = {
    {BP_DTYPE_F8E4M3FN, 8, 4, 3, 7, 1, 448.0, 0x1p-9, "fn"},
    {BP_DTYPE_F8E5M2, 8, 5, 2, 15, 1, 57344.0, 0x1p-16, "ieee"},
    {BP_DTYPE_F8E4M3FNUZ, 8, 4, 3, 8, 1, 240.0, 0x1p-10, "fnuz"},
    {BP_DTYPE_F8E5M2FNUZ, 8, 5, 2, 16, 1, 57344.0, 0x1p-17, "fnuz"},
    {BP_DTYPE_F8E8M0FNU, 8, 8, 0, 127, 0, 0x1p127, 0x1p-127, "e8m0"},
    {BP_DTYPE_F6E2M3FN, 6, 2, 3, 1, 1, 7.5, 0.125, "sat"},
    {BP_DTYPE_F6E3M2FN, 6, 3, 2, 3, 1, 28.0, 0.0625, "sat"},
    {BP_DTYPE_F4E2M1FN, 4, 2, 1, 1, 1, 6.0, 0.5, "sat"},
};

static int is_nan_code(const spec_t* s, uint32_t c) {
  uint32_t eall = (1u << s->ebits) - 1u, mall = (1u << s->mbits) - 1u;
  uint32_t e = (c >> s->mbits) & eall, m = c & mall;
  if (!strcmp(s->nan_rule, "fn")) return e == eall && m == mall;
  if (!strcmp(s->nan_rule, "ieee")) return e == eall && m != 0;
  if (!strcmp(s->nan_rule, "fnuz")) return c == 0x80u;
  if (!strcmp(s->nan_rule, "e8m0")) return c == 0xffu;
  return 0; /* fp6, fp4: every pattern is a number */
}

/* The value of code c written from the spec's formula:
 * (-1)^s * 2^(1-bias) * 0.m for e == 0, (-1)^s * 2^(e-bias) * 1.m otherwise;
 * e8m0 is 2^(e-127). */
static double spec_value(const spec_t* s, uint32_t c) {
  if (!s->is_signed) return pow(2.0, (double)c - 127.0);
  int sign = (c >> (s->width - 1)) & 1;
  int e = (int)((c >> s->mbits) & ((1u << s->ebits) - 1u));
  int m = (int)(c & ((1u << s->mbits) - 1u));
  double frac = (double)m / (double)(1 << s->mbits);
  double v = e == 0 ? pow(2.0, 1 - s->bias) * frac : pow(2.0, e - s->bias) * (1.0 + frac);
  if (!strcmp(s->nan_rule, "ieee") && e == (1 << s->ebits) - 1) v = INFINITY;
  return sign ? -v : v;
}

static void test_decode_every_pattern(void** state) {
  (void)state;
  for (size_t k = 0; k < sizeof kSpecs / sizeof kSpecs[0]; ++k) {
    const spec_t* s = &kSpecs[k];
    assert_true(bp_dtype_is_small_float(s->dtype));
    assert_int_equal(bp_dtype_bits(s->dtype), (uint32_t)s->width);
    double max = 0.0, min_sub = INFINITY;
    for (uint32_t c = 0; c < (1u << s->width); ++c) {
      double got = bp_small_float_to_f64(s->dtype, c);
      if (is_nan_code(s, c)) {
        assert_true(isnan(got));
        continue;
      }
      double want = spec_value(s, c);
      assert_false(isnan(got));
      assert_true(got == want);
      assert_int_equal(!!signbit(got), !!signbit(want)); /* -0 where the format has it */
      if (isfinite(got) && got > max) max = got;
      if (got > 0 && got < min_sub) min_sub = got;
    }
    assert_true(max == s->max);
    assert_true(min_sub == s->min_sub);
  }
  /* A few values named by the specifications. */
  assert_true(bp_small_float_to_f64(BP_DTYPE_F8E8M0FNU, 0x7f) == 1.0);
  assert_true(bp_small_float_to_f64(BP_DTYPE_F4E2M1FN, 0x7) == 6.0);
  assert_true(bp_small_float_to_f64(BP_DTYPE_F4E2M1FN, 0xd) == -3.0);
  assert_true(bp_small_float_to_f64(BP_DTYPE_F6E2M3FN, 0x3f) == -7.5);
  assert_true(bp_small_float_to_f64(BP_DTYPE_F8E4M3FNUZ, 0x00) == 0.0);
  assert_true(bp_small_float_to_f64(BP_DTYPE_F8E5M2, 0xfc) == -INFINITY);
}

/* The code the spec gives to a value with no exact encoding beyond the
 * largest finite one (overflow, infinity) and to NaN. */
static uint32_t overflow_code(const spec_t* s, int negative) {
  uint32_t sign = negative ? 1u << (s->width - 1) : 0u;
  if (!strcmp(s->nan_rule, "fn")) return sign | 0x7fu;                  /* NaN */
  if (!strcmp(s->nan_rule, "ieee")) return sign | 0x7cu;                /* inf */
  if (!strcmp(s->nan_rule, "fnuz")) return 0x80u;                       /* NaN */
  if (!strcmp(s->nan_rule, "e8m0")) return 0xffu;                       /* NaN */
  return sign | ((1u << (s->width - 1)) - 1u);                          /* saturate */
}

static void test_encode_every_pattern(void** state) {
  (void)state;
  for (size_t k = 0; k < sizeof kSpecs / sizeof kSpecs[0]; ++k) {
    const spec_t* s = &kSpecs[k];
    /* Every number encodes to its own pattern (+0 for the fnuz -0 slot,
     * which is the NaN). */
    double pos[256];
    uint32_t pos_code[256];
    int n = 0;
    for (uint32_t c = 0; c < (1u << s->width); ++c) {
      if (is_nan_code(s, c)) continue;
      double v = spec_value(s, c);
      assert_int_equal(bp_f64_to_small_float(s->dtype, v), isinf(v) ? overflow_code(s, v < 0) : c);
      if (v >= 0 && isfinite(v) && !signbit(v)) {
        pos[n] = v;
        pos_code[n++] = c;
      }
    }
    /* Between neighbours: nearest, and at the midpoint the even pattern
     * (e8m0's significand has no bits: its ties go to the upper power). */
    for (int i = 0; i + 1 < n; ++i) {
      assert_true(pos[i] < pos[i + 1]);
      double mid = (pos[i] + pos[i + 1]) / 2.0;
      uint32_t tie = !s->is_signed ? pos_code[i + 1]
                     : (pos_code[i] & 1u) == 0 ? pos_code[i] : pos_code[i + 1];
      assert_int_equal(bp_f64_to_small_float(s->dtype, mid), tie);
      assert_int_equal(bp_f64_to_small_float(s->dtype, nextafter(mid, 0.0)), pos_code[i]);
      assert_int_equal(bp_f64_to_small_float(s->dtype, nextafter(mid, INFINITY)), pos_code[i + 1]);
      if (s->is_signed) {
        uint32_t neg = 1u << (s->width - 1);
        uint32_t lo = pos_code[i] == 0 && !strcmp(s->nan_rule, "fnuz") ? 0u : neg | pos_code[i];
        assert_int_equal(bp_f64_to_small_float(s->dtype, -nextafter(mid, 0.0)), lo);
        assert_int_equal(bp_f64_to_small_float(s->dtype, -nextafter(mid, INFINITY)),
                         neg | pos_code[i + 1]);
      }
    }
    /* Past the largest finite value: half a step above rounds away. */
    double top = pos[n - 1], step = top - pos[n - 2];
    assert_int_equal(bp_f64_to_small_float(s->dtype, top + step), overflow_code(s, 0));
    assert_int_equal(bp_f64_to_small_float(s->dtype, INFINITY), overflow_code(s, 0));
    assert_int_equal(bp_f64_to_small_float(s->dtype, 1e300), overflow_code(s, 0));
    if (s->is_signed) {
      assert_int_equal(bp_f64_to_small_float(s->dtype, -INFINITY), overflow_code(s, 1));
      assert_int_equal(bp_f64_to_small_float(s->dtype, -1e300), overflow_code(s, 1));
    }
  }
}

static void test_special_inputs(void** state) {
  (void)state;
  /* NaN: fn keeps the sign in its NaN; fnuz has one NaN; fp6/fp4 have none
   * and give +0; e8m0 gives its NaN. */
  assert_int_equal(bp_f64_to_small_float(BP_DTYPE_F8E4M3FN, NAN), 0x7f);
  assert_int_equal(bp_f64_to_small_float(BP_DTYPE_F8E4M3FN, -NAN), 0xff);
  assert_int_equal(bp_f64_to_small_float(BP_DTYPE_F8E5M2, NAN), 0x7e);
  assert_int_equal(bp_f64_to_small_float(BP_DTYPE_F8E4M3FNUZ, -NAN), 0x80);
  assert_int_equal(bp_f64_to_small_float(BP_DTYPE_F8E5M2FNUZ, NAN), 0x80);
  assert_int_equal(bp_f64_to_small_float(BP_DTYPE_F8E8M0FNU, NAN), 0xff);
  assert_int_equal(bp_f64_to_small_float(BP_DTYPE_F6E2M3FN, NAN), 0x00);
  assert_int_equal(bp_f64_to_small_float(BP_DTYPE_F6E3M2FN, -NAN), 0x00);
  assert_int_equal(bp_f64_to_small_float(BP_DTYPE_F4E2M1FN, NAN), 0x0);
  /* -0: kept where the format has it, +0 for fnuz. */
  assert_int_equal(bp_f64_to_small_float(BP_DTYPE_F8E4M3FN, -0.0), 0x80);
  assert_int_equal(bp_f64_to_small_float(BP_DTYPE_F4E2M1FN, -0.0), 0x8);
  assert_int_equal(bp_f64_to_small_float(BP_DTYPE_F8E4M3FNUZ, -0.0), 0x00);
  assert_int_equal(bp_f64_to_small_float(BP_DTYPE_F8E5M2FNUZ, -1e-30), 0x00);
  /* e8m0: no sign and no zero. */
  assert_int_equal(bp_f64_to_small_float(BP_DTYPE_F8E8M0FNU, -2.0), 0xff);
  assert_int_equal(bp_f64_to_small_float(BP_DTYPE_F8E8M0FNU, 0.0), 0x00);
  assert_int_equal(bp_f64_to_small_float(BP_DTYPE_F8E8M0FNU, 1e-300), 0x00);
  assert_int_equal(bp_f64_to_small_float(BP_DTYPE_F8E8M0FNU, 1.0), 0x7f);
  assert_int_equal(bp_f64_to_small_float(BP_DTYPE_F8E8M0FNU, 0x1.7p0), 0x7f);
  assert_int_equal(bp_f64_to_small_float(BP_DTYPE_F8E8M0FNU, 0x1.9p0), 0x80);
}

/* The generic conversions agree with the ones the CPU plugin's casts use
 * for the two original fp8 formats. */
static void test_matches_cast_helpers(void** state) {
  (void)state;
  for (uint32_t c = 0; c < 256; ++c) {
    double a = bp_small_float_to_f64(BP_DTYPE_F8E4M3FN, c);
    float b = bp_f8e4m3fn_to_f32((uint8_t)c);
    assert_true((isnan(a) && isnan(b)) || a == (double)b);
    a = bp_small_float_to_f64(BP_DTYPE_F8E5M2, c);
    b = bp_f8e5m2_to_f32((uint8_t)c);
    assert_true((isnan(a) && isnan(b)) || a == (double)b);
  }
  /* A sweep of doubles over both ranges, both signs, specials included. */
  for (int i = -4000; i <= 4000; ++i) {
    double v = i == 0 ? NAN : ldexp((double)i, -7) * 1.0173;
    for (int e = -24; e <= 16; e += 4) {
      double x = ldexp(v, e);
      assert_int_equal(bp_f64_to_small_float(BP_DTYPE_F8E4M3FN, x), bp_f64_to_f8e4m3fn(x));
      assert_int_equal(bp_f64_to_small_float(BP_DTYPE_F8E5M2, x), bp_f64_to_f8e5m2(x));
    }
  }
  assert_int_equal(bp_f64_to_small_float(BP_DTYPE_F8E5M2, -INFINITY), bp_f64_to_f8e5m2(-INFINITY));
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_facts),
      cmocka_unit_test(test_decode_every_pattern),
      cmocka_unit_test(test_encode_every_pattern),
      cmocka_unit_test(test_special_inputs),
      cmocka_unit_test(test_matches_cast_helpers),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
