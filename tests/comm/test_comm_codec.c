/* The block codec of compressed collectives (plugins/kit/kit_comm_codec.c,
 * kit_comm_quant.c): every ISA variant this CPU runs, forced in turn,
 * against a scalar reference of the documented rounding (int8: ties away
 * from zero; e4m3fn: the kit's bp_f64_to_f8e4m3fn and
 * bp_f8e4m3fn_to_f32), bit for bit: tails, blocks of 1 to 1000, zero
 * blocks, NaN and Inf blocks, subnormal blocks, e4m3fn saturation and its
 * subnormal codes, decode_sum's order, and the other dtypes. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "bp_kit_comm.h"
#include "bp_plugin_common.h"
#include "kit_comm_codec.h"

static const char* const k_isas[] = {"generic", "avx2", "avx512"};
enum { NISA = 3 };

static uint32_t f32_bits(float f) {
  uint32_t b;
  memcpy(&b, &f, sizeof b);
  return b;
}

/* The reference: one element at a time, the documented arithmetic. */
static void ref_encode(uint32_t comp, uint32_t block, const float* x, uint64_t count,
                       int8_t* codes, float* scales) {
  const float top = comp == BP_DTYPE_I8 ? 127.0f : 448.0f;
  for (uint64_t b = 0; b < count; b += block) {
    const uint64_t m = count - b < block ? count - b : block;
    float amax = 0.0f;
    int bad = 0;
    for (uint64_t i = 0; i < m; ++i) {
      if (!isfinite(x[b + i])) bad = 1;
      if (fabsf(x[b + i]) > amax) amax = fabsf(x[b + i]);
    }
    if (bad || amax == 0.0f) {
      scales[b / block] = bad ? NAN : 0.0f;
      memset(codes + b, 0, (size_t)m);
      continue;
    }
    scales[b / block] = amax / top;
    const int tiny = amax < 0x1p-100f;
    const float inv = tiny ? top / (amax * 0x1p64f) : top / amax;
    for (uint64_t i = 0; i < m; ++i) {
      const float y = (tiny ? x[b + i] * 0x1p64f : x[b + i]) * inv;
      if (comp == BP_DTYPE_I8) {
        const float c = y > 127.0f ? 127.0f : y < -127.0f ? -127.0f : y;
        const float q = c + (signbit(c) ? -0.5f : 0.5f);
        codes[b + i] = (int8_t)(int32_t)q;
      } else {
        const float c = fabsf(y) > 448.0f ? copysignf(448.0f, y) : y;
        codes[b + i] = (int8_t)bp_f64_to_f8e4m3fn((double)c);
      }
    }
  }
}

static float ref_value(uint32_t comp, int8_t code, float scale) {
  return (comp == BP_DTYPE_I8 ? (float)code : bp_f8e4m3fn_to_f32((uint8_t)code)) * scale;
}

static int force(int isa) {
  return bp_kit_comm_codec_force(k_isas[isa]);
}

/* Random values of mixed magnitudes, with exact ties of the int8 grid. */
static void fill(float* x, uint64_t n, unsigned seed) {
  srand(seed);
  for (uint64_t i = 0; i < n; ++i) {
    const float u = (float)rand() / (float)RAND_MAX * 2.0f - 1.0f;
    x[i] = u * ldexpf(1.0f, rand() % 20 - 10);
  }
}

/* Encode and decode of x against the reference, bit for bit. */
static void check_roundtrip(uint32_t comp, uint32_t block, const float* x, uint64_t n) {
  const uint64_t ns = bp_kit_comm_scale_count(n, block);
  int8_t* c = calloc(n + 1, 1);
  int8_t* rc = calloc(n + 1, 1);
  float* s = calloc(ns + 1, sizeof(float));
  float* rs = calloc(ns + 1, sizeof(float));
  float* d = calloc(n + 1, sizeof(float));
  bp_kit_comm_encode(BP_DTYPE_F32, comp, block, x, 0, n, c, s);
  ref_encode(comp, block, x, n, rc, rs);
  for (uint64_t b = 0; b < ns; ++b)
    if (f32_bits(s[b]) != f32_bits(rs[b]) && !(isnan(s[b]) && isnan(rs[b])))
      fail_msg("%s comp %u block %u: scale %llu is %a, want %a", bp_kit_comm_codec()->name, comp,
               block, (unsigned long long)b, s[b], rs[b]);
  for (uint64_t i = 0; i < n; ++i)
    if (c[i] != rc[i])
      fail_msg("%s comp %u block %u: code %llu of %a is %d, want %d", bp_kit_comm_codec()->name,
               comp, block, (unsigned long long)i, x[i], c[i], rc[i]);
  bp_kit_comm_decode(BP_DTYPE_F32, comp, block, c, s, 0, n, d, 0);
  for (uint64_t i = 0; i < n; ++i) {
    const float want = ref_value(comp, rc[i], rs[i / block]);
    if (f32_bits(d[i]) != f32_bits(want) && !(isnan(d[i]) && isnan(want)))
      fail_msg("%s comp %u: decoded %llu is %a, want %a", bp_kit_comm_codec()->name, comp,
               (unsigned long long)i, d[i], want);
    /* The documented bound of one encode and decode (finite blocks). */
    if (isfinite(rs[i / block])) {
      const float amax = rs[i / block] * (comp == BP_DTYPE_I8 ? 127.0f : 448.0f);
      const float bound = comp == BP_DTYPE_I8 ? amax / 254.0f * 1.0001f
                                              : fabsf(x[i]) / 16.0f + amax * 0x1p-9f / 448.0f;
      if (fabsf(d[i] - x[i]) > bound * 1.0001f + 0x1p-140f) /* + the scale's own rounding */
        fail_msg("comp %u: error %g of %g above the bound %g", comp, fabsf(d[i] - x[i]), x[i],
                 bound);
    }
  }
  free(c);
  free(rc);
  free(s);
  free(rs);
  free(d);
}

static void test_variants_match_reference(void** state) {
  (void)state;
  static const uint32_t blocks[] = {1, 7, 32, 256, 1000};
  static const uint64_t sizes[] = {1, 5, 31, 33, 255, 257, 4099};
  const uint32_t comps[] = {BP_DTYPE_I8, BP_DTYPE_F8E4M3FN};
  float* x = malloc(sizeof(float) * 4099);
  int ran = 0;
  for (int v = 0; v < NISA; ++v) {
    if (!force(v)) continue;
    ++ran;
    assert_string_equal(bp_kit_comm_codec()->name, k_isas[v]);
    for (size_t sz = 0; sz < sizeof sizes / sizeof sizes[0]; ++sz)
      for (size_t bl = 0; bl < sizeof blocks / sizeof blocks[0]; ++bl)
        for (int k = 0; k < 2; ++k) {
          fill(x, sizes[sz], (unsigned)(sz * 7 + bl));
          check_roundtrip(comps[k], blocks[bl], x, sizes[sz]);
        }
  }
  assert_true(ran >= 1); /* generic always runs */
  free(x);
  bp_kit_comm_codec_force(NULL);
}

/* Zero blocks, NaN and Inf blocks (scale NaN, the rest of the payload
 * intact), subnormal blocks, ties of the int8 grid, negative zero. */
static void test_special_blocks(void** state) {
  (void)state;
  enum { B = 16, N = 7 * B + 3 };
  float x[N];
  for (int i = 0; i < N; ++i) x[i] = (float)(i % 11) - 5.0f;
  for (int i = 0; i < B; ++i) x[i] = 0.0f;                   /* block 0: zeros */
  x[B + 3] = NAN;                                             /* block 1: NaN */
  x[2 * B + 15] = -INFINITY;                                  /* block 2: -Inf */
  for (int i = 0; i < B; ++i) x[3 * B + i] = (float)i * 1e-44f; /* 3: subnormal */
  for (int i = 0; i < B; ++i) x[4 * B + i] = ((float)i - 8.0f) * 0x1p-110f; /* tiny */
  for (int i = 0; i < B; ++i) x[5 * B + i] = 127.0f * (float)(i - 8) / 8.0f + 0.5f; /* ties */
  x[6 * B] = -0.0f;
  const uint32_t comps[] = {BP_DTYPE_I8, BP_DTYPE_F8E4M3FN};
  for (int v = 0; v < NISA; ++v) {
    if (!force(v)) continue;
    for (int k = 0; k < 2; ++k) {
      check_roundtrip(comps[k], B, x, N);
      int8_t c[N];
      float s[8], d[N];
      bp_kit_comm_encode(BP_DTYPE_F32, comps[k], B, x, 0, N, c, s);
      assert_true(s[0] == 0.0f);
      assert_true(isnan(s[1]) && isnan(s[2]));
      assert_true(s[4] > 0.0f);
      bp_kit_comm_decode(BP_DTYPE_F32, comps[k], B, c, s, 0, N, d, 0);
      for (int i = 0; i < B; ++i) {
        assert_true(d[i] == 0.0f);
        assert_true(isnan(d[B + i]) && isnan(d[2 * B + i]));
        /* Subnormal and tiny blocks keep their values to the bound. */
        assert_true(fabsf(d[4 * B + i] - x[4 * B + i]) <= 8.0f * 0x1p-110f / 16.0f);
        assert_true(fabsf(d[3 * B + i] - x[3 * B + i]) <= 0x1p-140f);
      }
      assert_true(d[4 * B + 12] > 0.0f && d[4 * B + 2] < 0.0f);
    }
  }
  bp_kit_comm_codec_force(NULL);
}

/* e4m3fn: with the block's amax at 448 the codes are those of the values
 * themselves: a sweep of f32 bit patterns over [0, 448] (both signs) and
 * the values just above 448 (saturation, not NaN) against the kit's
 * conversion; every midpoint between neighbouring codes and the floats
 * either side of it (the ties to even); every code decodes as
 * bp_f8e4m3fn_to_f32. */
static void test_e4m3_codes(void** state) {
  (void)state;
  enum { N = 4096 };
  float* x = malloc(sizeof(float) * N);
  int8_t* c = malloc(N);
  float s[1];
  for (int v = 0; v < NISA; ++v) {
    if (!force(v)) continue;
    uint32_t bits = 0;
    const uint32_t last = f32_bits(448.0f);
    while (bits <= last) {
      x[0] = 448.0f;
      int n = 1;
      for (; n < N && bits <= last; ++n, bits += 0x1f01)
        x[n] = (n & 1) ? -bp__bits_f32(bits) : bp__bits_f32(bits);
      bp_kit_comm_encode(BP_DTYPE_F32, BP_DTYPE_F8E4M3FN, N, x, 0, (uint64_t)n, c, s);
      assert_true(s[0] == 1.0f);
      for (int i = 0; i < n; ++i)
        if ((uint8_t)c[i] != bp_f64_to_f8e4m3fn((double)x[i]))
          fail_msg("%s: e4m3 code of %a is 0x%02x, want 0x%02x", k_isas[v], x[i], (uint8_t)c[i],
                   bp_f64_to_f8e4m3fn((double)x[i]));
    }
    /* The midpoints between codes c and c + 1 (exact in f32), and one f32
     * ulp either side: ties go to the even code. */
    {
      int n = 1;
      x[0] = 448.0f;
      for (int code = 0; code < 0x7e; ++code) {
        const float lo = bp_f8e4m3fn_to_f32((uint8_t)code), hi = bp_f8e4m3fn_to_f32((uint8_t)(code + 1));
        const float mid = lo + (hi - lo) / 2.0f;
        x[n++] = mid;
        x[n++] = -nextafterf(mid, 0.0f);
        x[n++] = nextafterf(mid, 1e9f);
      }
      bp_kit_comm_encode(BP_DTYPE_F32, BP_DTYPE_F8E4M3FN, N, x, 0, (uint64_t)n, c, s);
      for (int i = 0; i < n; ++i)
        if ((uint8_t)c[i] != bp_f64_to_f8e4m3fn((double)x[i]))
          fail_msg("%s: e4m3 code of %a is 0x%02x, want 0x%02x", k_isas[v], x[i], (uint8_t)c[i],
                   bp_f64_to_f8e4m3fn((double)x[i]));
      assert_int_equal((uint8_t)c[1], 0); /* half the smallest subnormal: to even, 0 */
      assert_int_equal((uint8_t)c[4], 2); /* 1.5 x 2^-9: to even, 2 x 2^-9 */
    }
    /* Saturation: 448 x (1 + 2^-23) and a scale whose inverse rounds up. */
    const bp_kit_codec_kernels_t* k = bp_kit_comm_codec();
    const float big[4] = {448.0f, nextafterf(448.0f, 1e9f), -463.9f, 1e30f};
    k->encode(BP_DTYPE_F8E4M3FN, big, 4, 1.0f, c);
    assert_int_equal((uint8_t)c[0], 0x7e);
    assert_int_equal((uint8_t)c[1], 0x7e);
    assert_int_equal((uint8_t)c[2], 0xfe);
    assert_int_equal((uint8_t)c[3], 0x7e);
    /* Every code decodes as the kit's scalar conversion (0x7f, 0xff: NaN). */
    int8_t all[256];
    float out[256];
    for (int i = 0; i < 256; ++i) all[i] = (int8_t)(uint8_t)i;
    k->decode(BP_DTYPE_F8E4M3FN, all, 256, 0.75f, out, 0);
    for (int i = 0; i < 256; ++i) {
      const float want = bp_f8e4m3fn_to_f32((uint8_t)i) * 0.75f;
      if (isnan(want)) assert_true(isnan(out[i]));
      else if (f32_bits(out[i]) != f32_bits(want))
        fail_msg("%s: code 0x%02x decodes to %a, want %a", k_isas[v], i, out[i], want);
    }
    /* int8: every code, accumulating. */
    for (int i = 0; i < 256; ++i) out[i] = 1.0f;
    k->decode(BP_DTYPE_I8, all, 256, 0.5f, out, 1);
    for (int i = 0; i < 256; ++i) assert_true(out[i] == 1.0f + (float)(int8_t)(uint8_t)i * 0.5f);
  }
  free(x);
  free(c);
  bp_kit_comm_codec_force(NULL);
}

/* decode_sum: the ranks' decoded values added in rank order from 0, at an
 * offset that starts mid-block, every variant giving the same bits. */
static void test_decode_sum(void** state) {
  (void)state;
  enum { R = 3, N = 5000, BLOCK = 96, FIRST = 37, COUNT = N - FIRST - 11 };
  const uint64_t ns = bp_kit_comm_scale_count(N, BLOCK);
  int8_t* codes[R];
  float* scales[R];
  float* x = malloc(sizeof(float) * N);
  float* acc = malloc(sizeof(float) * N);
  float* first_acc = malloc(sizeof(float) * N);
  const uint32_t comps[] = {BP_DTYPE_I8, BP_DTYPE_F8E4M3FN};
  for (int k = 0; k < 2; ++k) {
    int have_first = 0;
    for (int v = 0; v < NISA; ++v) {
      if (!force(v)) continue;
      for (int r = 0; r < R; ++r) {
        codes[r] = malloc(N);
        scales[r] = malloc(sizeof(float) * ns);
        fill(x, N, 100u + (unsigned)r);
        bp_kit_comm_encode(BP_DTYPE_F32, comps[k], BLOCK, x, 0, N, codes[r], scales[r]);
      }
      bp_kit_comm_decode_sum(comps[k], BLOCK, (const int8_t* const*)codes,
                             (const float* const*)scales, R, FIRST, COUNT, acc);
      for (uint64_t i = 0; i < COUNT; ++i) {
        const uint64_t e = FIRST + i;
        float want = 0.0f;
        for (int r = 0; r < R; ++r) want += ref_value(comps[k], codes[r][e], scales[r][e / BLOCK]);
        if (f32_bits(acc[i]) != f32_bits(want))
          fail_msg("%s: sum %llu is %a, want %a", k_isas[v], (unsigned long long)i, acc[i], want);
      }
      if (!have_first) memcpy(first_acc, acc, sizeof(float) * COUNT);
      else assert_memory_equal(first_acc, acc, sizeof(float) * COUNT);
      have_first = 1;
      for (int r = 0; r < R; ++r) {
        free(codes[r]);
        free(scales[r]);
      }
    }
  }
  free(x);
  free(acc);
  free(first_acc);
  bp_kit_comm_codec_force(NULL);
}

/* The other input dtypes go through f32 tiles: f64, f16, bf16 encode as
 * their f32 values do, and decode back to the dtype (a block longer than
 * a conversion tile). */
static void test_other_dtypes(void** state) {
  (void)state;
  enum { N = 2500, BLOCK = 1200 };
  float* x = malloc(sizeof(float) * N);
  double* xd = malloc(sizeof(double) * N);
  uint16_t* xh = malloc(sizeof(uint16_t) * N);
  float* xf = malloc(sizeof(float) * N);
  int8_t *c = malloc(N), *rc = malloc(N);
  float s[3], rs[3];
  fill(x, N, 9);
  for (int v = 0; v < NISA; ++v) {
    if (!force(v)) continue;
    for (int i = 0; i < N; ++i) xd[i] = (double)x[i];
    bp_kit_comm_encode(BP_DTYPE_F64, BP_DTYPE_I8, BLOCK, xd, 0, N, c, s);
    ref_encode(BP_DTYPE_I8, BLOCK, x, N, rc, rs);
    assert_memory_equal(c, rc, N);
    assert_memory_equal(s, rs, sizeof s);
    for (int i = 0; i < N; ++i) {
      xh[i] = bp_f32_to_f16(x[i]);
      xf[i] = bp_f16_to_f32(xh[i]);
    }
    bp_kit_comm_encode(BP_DTYPE_F16, BP_DTYPE_F8E4M3FN, BLOCK, xh, 0, N, c, s);
    ref_encode(BP_DTYPE_F8E4M3FN, BLOCK, xf, N, rc, rs);
    assert_memory_equal(c, rc, N);
    uint16_t* out = malloc(sizeof(uint16_t) * N);
    bp_kit_comm_decode(BP_DTYPE_BF16, BP_DTYPE_F8E4M3FN, BLOCK, c, s, 0, N, out, 0);
    for (int i = 0; i < N; ++i)
      assert_int_equal(out[i], bp_f32_to_bf16(ref_value(BP_DTYPE_F8E4M3FN, rc[i], rs[i / BLOCK])));
    free(out);
  }
  free(x);
  free(xd);
  free(xh);
  free(xf);
  free(c);
  free(rc);
  bp_kit_comm_codec_force(NULL);
}

/* Forcing: unknown names are refused; the widest variant the CPU runs is
 * chosen by default and BACKPLANE_COMM_CODEC_ISA picks another. */
static void test_force_and_choice(void** state) {
  (void)state;
  assert_int_equal(bp_kit_comm_codec_force("sse9"), 0);
  assert_int_equal(bp_kit_comm_codec_force("generic"), 1);
  assert_string_equal(bp_kit_comm_codec()->name, "generic");
  setenv("BACKPLANE_COMM_CODEC_ISA", "generic", 1);
  bp_kit_comm_codec_force(NULL);
  assert_string_equal(bp_kit_comm_codec()->name, "generic");
  unsetenv("BACKPLANE_COMM_CODEC_ISA");
  bp_kit_comm_codec_force(NULL);
  const char* best = bp_kit_comm_codec()->name;
  for (int v = NISA - 1; v >= 0; --v)
    if (bp_kit_comm_codec_force(k_isas[v])) {
      assert_string_equal(best, k_isas[v]);
      break;
    }
  bp_kit_comm_codec_force(NULL);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_variants_match_reference),
      cmocka_unit_test(test_special_blocks),
      cmocka_unit_test(test_e4m3_codes),
      cmocka_unit_test(test_decode_sum),
      cmocka_unit_test(test_other_dtypes),
      cmocka_unit_test(test_force_and_choice),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
