/* Unit tests of the conformance suite: number formats, tolerance checker,
 * guard bands, references against hand-computed values, case generation and
 * crash isolation. None of them needs a plugin.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "conform.h"

/* ---- number formats ------------------------------------------------------ */
static int f16_is_nan_bits(uint16_t b) { return (b & 0x7C00u) == 0x7C00u && (b & 0x03FFu); }

static void test_f16_roundtrip_all(void** state) {
  (void)state;
  for (uint32_t b = 0; b < 65536u; b++) {
    double d = bpc_f16_to_f64((uint16_t)b);
    uint16_t back = bpc_f16_from_f64(d);
    if (f16_is_nan_bits((uint16_t)b)) {
      assert_true(isnan(d));
      assert_true(f16_is_nan_bits(back));
    } else {
      assert_int_equal(back, b);
    }
#ifdef __FLT16_MAX__
    _Float16 h;
    uint16_t bb = (uint16_t)b;
    memcpy(&h, &bb, 2);
    if (!isnan(d)) assert_true((double)h == d && signbit((double)h) == signbit(d));
#endif
  }
  assert_int_equal(bpc_f16_from_f64(1.0), 0x3C00);
  assert_int_equal(bpc_f16_from_f64(1.0 + ldexp(1, -11)), 0x3C00); /* tie -> even */
  assert_int_equal(bpc_f16_from_f64(1.0 + 3 * ldexp(1, -11)), 0x3C02);
  assert_int_equal(bpc_f16_from_f64(65519.0), 0x7BFF);
  assert_int_equal(bpc_f16_from_f64(65520.0), 0x7C00); /* overflow -> inf */
  assert_int_equal(bpc_f16_from_f64(ldexp(1, -24)), 0x0001);
  assert_int_equal(bpc_f16_from_f64(ldexp(1, -25)), 0x0000); /* tie to even zero */
  assert_int_equal(bpc_f16_from_f64(3 * ldexp(1, -26)), 0x0001);
  assert_int_equal(bpc_f16_from_f64(-0.0), 0x8000);
  assert_int_equal(bpc_f16_from_f64(ldexp(1023, -24) + ldexp(1, -25)), 0x0400); /* carry to normal */
}

static void test_bf16_roundtrip_all(void** state) {
  (void)state;
  for (uint32_t b = 0; b < 65536u; b++) {
    double d = bpc_bf16_to_f64((uint16_t)b);
    uint32_t fb = b << 16;
    float f;
    memcpy(&f, &fb, 4);
    if (isnan(f)) {
      assert_true(isnan(d));
      continue;
    }
    assert_true(d == (double)f);
    assert_int_equal(bpc_bf16_from_f64(d), b);
  }
  assert_int_equal(bpc_bf16_from_f64(1.0 + ldexp(1, -8)), 0x3F80); /* tie -> even */
  assert_int_equal(bpc_bf16_from_f64(1.0 + 3 * ldexp(1, -8)), 0x3F82);
}

static void test_fp8(void** state) {
  (void)state;
  for (uint32_t b = 0; b < 256; b++) {
    double d = bpc_f8e4m3_to_f64((uint8_t)b);
    if (isnan(d)) assert_int_equal(b & 0x7F, 0x7F);
    else assert_int_equal(bpc_f8e4m3_from_f64(d), b);
    d = bpc_f8e5m2_to_f64((uint8_t)b);
    if (!isnan(d)) assert_int_equal(bpc_f8e5m2_from_f64(d), b);
  }
  assert_true(bpc_f8e4m3_to_f64(0x7E) == 448.0);
  assert_true(bpc_f8e4m3_to_f64(0x01) == ldexp(1, -9));
  assert_int_equal(bpc_f8e4m3_from_f64(464.0), 0x7E);  /* tie -> 448 */
  assert_int_equal(bpc_f8e4m3_from_f64(470.0), 0x7F);  /* rounds past max: NaN */
  assert_int_equal(bpc_f8e4m3_from_f64(INFINITY), 0x7F);
  assert_int_equal(bpc_f8e4m3_from_f64(-1e9), 0xFF);
  assert_true(bpc_f8e5m2_to_f64(0x7B) == 57344.0);
  assert_int_equal(bpc_f8e5m2_from_f64(61440.0), 0x7C); /* tie to even: inf */
  assert_int_equal(bpc_f8e5m2_from_f64(-1e6), 0xFC);
  assert_int_equal(bpc_f8e5m2_from_f64(ldexp(1, -16)), 0x01);
}

static void test_int_rounding_and_wrap(void** state) {
  (void)state;
  int64_t two53 = INT64_C(1) << 53;
  assert_true(bpc_round_i64_to_dtype(two53 + 1, BP_DTYPE_F64) == ldexp(1, 53));
  assert_true(bpc_round_i64_to_dtype(two53 + 3, BP_DTYPE_F64) == ldexp(1, 53) + 4);
  assert_true(bpc_round_i64_to_dtype(INT64_MAX, BP_DTYPE_F32) == ldexp(1, 63));
  assert_true(bpc_round_i64_to_dtype(16777217, BP_DTYPE_F32) == 16777216.0);
  assert_true(isinf(bpc_round_i64_to_dtype(70000, BP_DTYPE_F16)));
  assert_int_equal(bpc_wrap_int(200, BP_DTYPE_I8), -56);
  assert_int_equal(bpc_wrap_int(-1, BP_DTYPE_U8), 255);
  assert_int_equal(bpc_wrap_int(1000, BP_DTYPE_U8), 232);
  assert_int_equal(bpc_wrap_int(70000, BP_DTYPE_I16), 70000 - 65536);
  assert_int_equal(bpc_wrap_int(5, BP_DTYPE_BOOL), 1);
  bpc_num_t v = {-3.7, 0, 0};
  assert_int_equal(bpc_convert(v, BP_DTYPE_F32, BP_DTYPE_I8).i, -3);
  v.f = NAN;
  assert_int_equal(bpc_convert(v, BP_DTYPE_F32, BP_DTYPE_BOOL).i, 1);
  v.f = 500.0;
  assert_true(isnan(bpc_convert(v, BP_DTYPE_F32, BP_DTYPE_F8E4M3FN).f));
}

/* ---- tolerance checker --------------------------------------------------------- */
static void test_ulp_distance(void** state) {
  (void)state;
  assert_true(bpc_ulp(1.0, BP_DTYPE_F32) == ldexp(1, -23));
  assert_true(bpc_ulp(0.0, BP_DTYPE_F16) == ldexp(1, -24));
  assert_true(bpc_ulp(1.5, BP_DTYPE_BF16) == ldexp(1, -7));
  assert_true(bpc_ulp_error((double)nextafterf(1.0f, 2.0f), 1.0, BP_DTYPE_F32) == 1.0);
  double ms = ldexp(1, -149);
  assert_true(bpc_ulp_error(-ms, ms, BP_DTYPE_F32) == 2.0); /* across zero */
  assert_true(bpc_ulp_error(-0.0, 0.0, BP_DTYPE_F32) == 0.0);
  assert_true(bpc_ulp_error(NAN, NAN, BP_DTYPE_F32) == 0.0);
  assert_true(isinf(bpc_ulp_error(NAN, 1.0, BP_DTYPE_F32)));
  assert_true(isinf(bpc_ulp_error(1.0, NAN, BP_DTYPE_F32)));
  assert_true(bpc_ulp_error(INFINITY, INFINITY, BP_DTYPE_F32) == 0.0);
  assert_true(isinf(bpc_ulp_error(-INFINITY, INFINITY, BP_DTYPE_F32)));
  assert_true(isinf(bpc_ulp_error(3e38, INFINITY, BP_DTYPE_F32)));
  /* infinity where the exact result is the largest finite: one ulp away */
  assert_true(bpc_ulp_error(INFINITY, bpc_float_max(BP_DTYPE_F32), BP_DTYPE_F32) == 1.0);
  /* an exact result that rounds to infinity: infinity is exact */
  assert_true(bpc_ulp_error(INFINITY, 3.5e38, BP_DTYPE_F32) == 0.0);
}

static void check_f32(uint32_t accuracy, int sz, const double* ref, const float* got, size_t n,
                      const double* mag, const double* nterms, bpc_check_t* out) {
  bpc_expected_t e;
  int64_t sizes[1] = {(int64_t)n};
  assert_int_equal(bpc_expected_init(&e, BP_DTYPE_F32, 1, sizes, nterms != NULL), BP_OK);
  for (size_t k = 0; k < n; k++) {
    e.f[k] = ref[k];
    if (mag) e.mag[k] = mag[k];
    if (nterms) e.nterms[k] = nterms[k];
  }
  bpc_tolerance_t t = bpc_tolerance_get(accuracy, BP_DTYPE_F32, sz);
  bpc_check_values(&t, &e, got, out);
  bpc_expected_free(&e);
}

static void test_check_values(void** state) {
  (void)state;
  bpc_check_t chk;
  double ref[3] = {1.0, NAN, -0.0};
  float ok[3] = {1.0f, NAN, -0.0f};
  check_f32(BPC_ACC_EXACT, 1, ref, ok, 3, NULL, NULL, &chk);
  assert_int_equal(chk.status, BPC_PASS);
  float nan_missing[3] = {1.0f, 1.0f, -0.0f};
  check_f32(BPC_ACC_EXACT, 1, ref, nan_missing, 3, NULL, NULL, &chk);
  assert_int_equal(chk.status, BPC_FAIL);
  assert_int_equal(chk.worst_index, 1);
  float plus_zero[3] = {1.0f, NAN, 0.0f};
  check_f32(BPC_ACC_EXACT, 1, ref, plus_zero, 3, NULL, NULL, &chk);
  assert_int_equal(chk.status, BPC_FAIL); /* signed zero checked */
  check_f32(BPC_ACC_EXACT, 0, ref, plus_zero, 3, NULL, NULL, &chk);
  assert_int_equal(chk.status, BPC_PASS); /* not checked */
  /* TRANS f32: 4 ulps pass, 10 ulps quality warning, 100 ulps fail. */
  double r1[1] = {1.0};
  float g4[1] = {1.0f + 4 * ldexpf(1, -23)};
  float g10[1] = {1.0f + 10 * ldexpf(1, -23)};
  float g100[1] = {1.0f + 100 * ldexpf(1, -23)};
  check_f32(BPC_ACC_TRANS, 0, r1, g4, 1, NULL, NULL, &chk);
  assert_int_equal(chk.status, BPC_PASS);
  check_f32(BPC_ACC_TRANS, 0, r1, g10, 1, NULL, NULL, &chk);
  assert_int_equal(chk.status, BPC_QUALITY_WARNING);
  assert_true(chk.max_ulps > 9.9 && chk.max_ulps < 10.1);
  check_f32(BPC_ACC_TRANS, 0, r1, g100, 1, NULL, NULL, &chk);
  assert_int_equal(chk.status, BPC_FAIL);
  /* Exact class never warns: one ulp off integer-valued floor is a FAIL. */
  check_f32(BPC_ACC_EXACT, 0, r1, g4, 1, NULL, NULL, &chk);
  assert_int_equal(chk.status, BPC_FAIL);
}

static void test_reduction_bound(void** state) {
  (void)state;
  /* Sum of 1000 terms with sum|x| = 1000 and result 0: the bound is
   * 2 * 1000 * 2^-24 * 1000 (+ 1 ulp of 0). */
  double ref[1] = {0.0}, mag[1] = {1000.0}, n[1] = {1000.0};
  double bound = 2.0 * 1000.0 * ldexp(1, -24) * 1000.0;
  bpc_check_t chk;
  float within[1] = {(float)(0.9 * bound)};
  float warn[1] = {(float)(3.0 * bound)};
  float fail[1] = {(float)(100.0 * bound)};
  check_f32(BPC_ACC_REDUCE, 0, ref, within, 1, mag, n, &chk);
  assert_int_equal(chk.status, BPC_PASS);
  check_f32(BPC_ACC_REDUCE, 0, ref, warn, 1, mag, n, &chk);
  assert_int_equal(chk.status, BPC_QUALITY_WARNING);
  check_f32(BPC_ACC_REDUCE, 0, ref, fail, 1, mag, n, &chk);
  assert_int_equal(chk.status, BPC_FAIL);
  /* The bound grows with the length: the same error passes at n = 10^5. */
  double n2[1] = {100000.0};
  check_f32(BPC_ACC_REDUCE, 0, ref, warn, 1, mag, n2, &chk);
  assert_int_equal(chk.status, BPC_PASS);
}

/* ---- guard bands ----------------------------------------------------------------- */
static void test_guard_bands(void** state) {
  (void)state;
  int64_t sizes[2] = {3, 4};
  bpc_layout_t l;
  assert_int_equal(bpc_layout_make(BP_DTYPE_F32, 2, sizes, BPC_LAYOUT_STRIDED, &l), BP_OK);
  assert_int_equal(l.strides[1], 2);
  assert_int_equal(l.strides[0], 16);
  uint8_t* img = malloc(l.buffer_size);
  assert_non_null(img);
  float dense[12];
  for (int k = 0; k < 12; k++) dense[k] = (float)k;
  bpc_image_fill_guard(img, l.buffer_size);
  bpc_image_scatter(&l, img, dense);
  uint64_t off = 0;
  assert_int_equal(bpc_guard_check(&l, img, &off), 0);
  float back[12];
  bpc_image_gather(&l, img, back);
  assert_memory_equal(back, dense, sizeof dense);
  /* An element write is not a guard violation... */
  img[l.byte_offset] ^= 0xFF;
  assert_int_equal(bpc_guard_check(&l, img, &off), 0);
  /* ...a write into the gap after element [0,0] is, */
  uint64_t gap = l.byte_offset + 4;
  img[gap] ^= 0x01;
  assert_int_equal(bpc_guard_check(&l, img, &off), 1);
  assert_int_equal(off, gap);
  img[gap] ^= 0x01;
  /* and so is one past the end. */
  uint64_t tail = l.buffer_size - 1;
  img[tail] ^= 0x80;
  assert_int_equal(bpc_guard_check(&l, img, &off), 1);
  assert_int_equal(off, tail);
  free(img);
  /* Transposed and offset layouts keep every element inside the buffer. */
  assert_int_equal(bpc_layout_make(BP_DTYPE_F64, 2, sizes, BPC_LAYOUT_TRANSPOSED, &l), BP_OK);
  assert_int_equal(l.strides[0], 1);
  assert_int_equal(l.strides[1], 3);
  assert_int_equal(bpc_layout_make(BP_DTYPE_I16, 2, sizes, BPC_LAYOUT_OFFSET, &l), BP_OK);
  assert_int_equal(l.byte_offset, BPC_GUARD_BYTES + 6);
  assert_int_equal(l.buffer_size, BPC_GUARD_BYTES * 2 + 6 + 24);
}

/* ---- references ------------------------------------------------------------------ */
typedef struct ref_fixture {
  bpc_case_t c;
  bpc_host_tensor_t in[BPC_MAX_INPUTS];
  bpc_ref_result_t res;
} ref_fixture_t;

static void fx_init(ref_fixture_t* f, uint32_t op, uint32_t num_inputs) {
  memset(f, 0, sizeof *f);
  f->c.op_id = op;
  f->c.num_inputs = num_inputs;
  f->c.num_outputs = 1;
}

static void fx_input(ref_fixture_t* f, uint32_t k, uint32_t dtype, uint32_t rank, const int64_t* sizes,
                     const void* data) {
  f->in[k].dtype = dtype;
  f->in[k].rank = rank;
  f->in[k].numel = 1;
  for (uint32_t d = 0; d < rank; d++) {
    f->in[k].sizes[d] = sizes[d];
    f->in[k].numel *= sizes[d];
  }
  f->in[k].data = data;
  f->c.in[k].dtype = dtype;
  f->c.in[k].rank = rank;
  memcpy(f->c.in[k].sizes, f->in[k].sizes, sizeof f->in[k].sizes);
}

static void fx_binary_attrs(ref_fixture_t* f) {
  f->c.has_attrs = 1;
  f->c.attrs.binary.struct_size = sizeof f->c.attrs.binary;
}

static bp_status_t fx_run(ref_fixture_t* f) { return bpc_reference_run(&f->c, f->in, &f->res); }

static void test_ref_binary_promotion(void** state) {
  (void)state;
  ref_fixture_t f;
  int64_t s2[1] = {2}, s0[1] = {0};
  int8_t a8[2] = {100, -128}, b8[2] = {100, -1};
  fx_init(&f, BP_OP_add, 2);
  fx_binary_attrs(&f);
  fx_input(&f, 0, BP_DTYPE_I8, 1, s2, a8);
  fx_input(&f, 1, BP_DTYPE_I8, 1, s2, b8);
  assert_int_equal(fx_run(&f), BP_OK);
  assert_int_equal(f.res.out[0].dtype, BP_DTYPE_I8);
  assert_int_equal(f.res.out[0].i[0], -56); /* wraps */
  assert_int_equal(f.res.out[0].i[1], 127);
  bpc_ref_result_free(&f.res);

  /* u8 tensor + 1000 stays u8 and wraps the scalar. */
  uint8_t u[2] = {1, 255};
  fx_init(&f, BP_OP_add, 2);
  fx_binary_attrs(&f);
  f.c.attrs.binary.flags = BP_BINARY_OTHER_IS_SCALAR;
  f.c.attrs.binary.scalar.kind = BP_SCALAR_INT;
  f.c.attrs.binary.scalar.v.i = 1000;
  fx_input(&f, 0, BP_DTYPE_U8, 1, s2, u);
  assert_int_equal(fx_run(&f), BP_OK);
  assert_int_equal(f.res.out[0].dtype, BP_DTYPE_U8);
  assert_int_equal(f.res.out[0].i[0], 233);
  assert_int_equal(f.res.out[0].i[1], 231);
  bpc_ref_result_free(&f.res);

  /* i32 tensor + 2.5 -> f32; bool + 3 -> i64. */
  int32_t i32[2] = {1, -4};
  f.c.attrs.binary.scalar.kind = BP_SCALAR_FLOAT;
  f.c.attrs.binary.scalar.v.f = 2.5;
  fx_input(&f, 0, BP_DTYPE_I32, 1, s2, i32);
  assert_int_equal(fx_run(&f), BP_OK);
  assert_int_equal(f.res.out[0].dtype, BP_DTYPE_F32);
  assert_true(f.res.out[0].f[1] == -1.5);
  bpc_ref_result_free(&f.res);
  uint8_t bl[2] = {1, 0};
  f.c.attrs.binary.scalar.kind = BP_SCALAR_INT;
  f.c.attrs.binary.scalar.v.i = 3;
  fx_input(&f, 0, BP_DTYPE_BOOL, 1, s2, bl);
  assert_int_equal(fx_run(&f), BP_OK);
  assert_int_equal(f.res.out[0].dtype, BP_DTYPE_I64);
  assert_int_equal(f.res.out[0].i[0], 4);
  bpc_ref_result_free(&f.res);

  /* 0-d tensors: f16 + f64 0-d -> f16; i32 + i64 0-d -> i32; i32 + f64 0-d -> f64. */
  uint16_t h[2] = {0x3C00, 0x4000};
  double d0 = 0.5;
  int64_t l0 = 7;
  fx_init(&f, BP_OP_mul, 2);
  fx_binary_attrs(&f);
  fx_input(&f, 0, BP_DTYPE_F16, 1, s2, h);
  fx_input(&f, 1, BP_DTYPE_F64, 0, s0, &d0);
  assert_int_equal(fx_run(&f), BP_OK);
  assert_int_equal(f.res.out[0].dtype, BP_DTYPE_F16);
  assert_true(f.res.out[0].f[1] == 1.0);
  bpc_ref_result_free(&f.res);
  fx_input(&f, 0, BP_DTYPE_I32, 1, s2, i32);
  fx_input(&f, 1, BP_DTYPE_I64, 0, s0, &l0);
  assert_int_equal(fx_run(&f), BP_OK);
  assert_int_equal(f.res.out[0].dtype, BP_DTYPE_I32);
  assert_int_equal(f.res.out[0].i[1], -28);
  bpc_ref_result_free(&f.res);
  fx_input(&f, 1, BP_DTYPE_F64, 0, s0, &d0);
  assert_int_equal(fx_run(&f), BP_OK);
  assert_int_equal(f.res.out[0].dtype, BP_DTYPE_F64);
  bpc_ref_result_free(&f.res);

  assert_int_equal(bpc_promote_types(BP_DTYPE_U8, BP_DTYPE_I8), BP_DTYPE_I16);
  assert_int_equal(bpc_promote_types(BP_DTYPE_F16, BP_DTYPE_BF16), BP_DTYPE_F32);
  assert_int_equal(bpc_promote_types(BP_DTYPE_I64, BP_DTYPE_F16), BP_DTYPE_F16);
  assert_int_equal(bpc_promote_types(BP_DTYPE_BOOL, BP_DTYPE_U8), BP_DTYPE_U8);
  assert_int_equal(bpc_promote_types(BP_DTYPE_F8E4M3FN, BP_DTYPE_F32), BP_DTYPE_INVALID);

  /* sub on bool is rejected. */
  fx_init(&f, BP_OP_sub, 2);
  fx_binary_attrs(&f);
  fx_input(&f, 0, BP_DTYPE_BOOL, 1, s2, bl);
  fx_input(&f, 1, BP_DTYPE_BOOL, 1, s2, bl);
  assert_int_not_equal(fx_run(&f), BP_OK);
}

static void test_ref_division_and_edges(void** state) {
  (void)state;
  ref_fixture_t f;
  int64_t s4[1] = {4};
  int32_t a[4] = {-7, 7, -7, 7}, b[4] = {2, -2, -2, 3};
  fx_init(&f, BP_OP_div, 2);
  fx_binary_attrs(&f);
  f.c.attrs.binary.rounding_mode = BP_ROUNDING_FLOOR;
  fx_input(&f, 0, BP_DTYPE_I32, 1, s4, a);
  fx_input(&f, 1, BP_DTYPE_I32, 1, s4, b);
  assert_int_equal(fx_run(&f), BP_OK);
  int64_t floor_q[4] = {-4, -4, 3, 2};
  for (int k = 0; k < 4; k++) assert_int_equal(f.res.out[0].i[k], floor_q[k]);
  bpc_ref_result_free(&f.res);
  f.c.attrs.binary.rounding_mode = BP_ROUNDING_TRUNC;
  assert_int_equal(fx_run(&f), BP_OK);
  int64_t trunc_q[4] = {-3, -3, 3, 2};
  for (int k = 0; k < 4; k++) assert_int_equal(f.res.out[0].i[k], trunc_q[k]);
  bpc_ref_result_free(&f.res);
  f.c.attrs.binary.rounding_mode = BP_ROUNDING_NONE; /* true division: f32 */
  assert_int_equal(fx_run(&f), BP_OK);
  assert_int_equal(f.res.out[0].dtype, BP_DTYPE_F32);
  assert_true(f.res.out[0].f[0] == -3.5);
  bpc_ref_result_free(&f.res);
  f.c.op_id = BP_OP_remainder; /* sign of the divisor */
  assert_int_equal(fx_run(&f), BP_OK);
  int64_t rem[4] = {1, -1, -1, 1};
  for (int k = 0; k < 4; k++) assert_int_equal(f.res.out[0].i[k], rem[k]);
  bpc_ref_result_free(&f.res);
  f.c.op_id = BP_OP_fmod; /* sign of the dividend */
  assert_int_equal(fx_run(&f), BP_OK);
  int64_t fm[4] = {-1, 1, -1, 1};
  for (int k = 0; k < 4; k++) assert_int_equal(f.res.out[0].i[k], fm[k]);
  bpc_ref_result_free(&f.res);

  /* Floats: floor division of -7.0 / 2.0, maximum with NaN, pow(0, 0). */
  float fa[4] = {-7.0f, NAN, 0.0f, -0.0f}, fb[4] = {2.0f, 1.0f, 0.0f, 5.0f};
  fx_init(&f, BP_OP_div, 2);
  fx_binary_attrs(&f);
  f.c.attrs.binary.rounding_mode = BP_ROUNDING_FLOOR;
  fx_input(&f, 0, BP_DTYPE_F32, 1, s4, fa);
  fx_input(&f, 1, BP_DTYPE_F32, 1, s4, fb);
  assert_int_equal(fx_run(&f), BP_OK);
  assert_true(f.res.out[0].f[0] == -4.0);
  assert_true(isnan(f.res.out[0].f[1]));
  assert_true(isnan(f.res.out[0].f[2])); /* 0 / 0 */
  bpc_ref_result_free(&f.res);
  f.c.op_id = BP_OP_maximum;
  assert_int_equal(fx_run(&f), BP_OK);
  assert_true(isnan(f.res.out[0].f[1]));
  assert_true(f.res.out[0].f[3] == 5.0);
  bpc_ref_result_free(&f.res);
  f.c.op_id = BP_OP_pow;
  assert_int_equal(fx_run(&f), BP_OK);
  assert_true(f.res.out[0].f[2] == 1.0);
  assert_true(f.res.out[0].f[0] == 49.0);
  bpc_ref_result_free(&f.res);
  f.c.op_id = BP_OP_lt;
  assert_int_equal(fx_run(&f), BP_OK);
  assert_int_equal(f.res.out[0].dtype, BP_DTYPE_BOOL);
  assert_int_equal(f.res.out[0].i[0], 1);
  assert_int_equal(f.res.out[0].i[1], 0); /* NaN compares false */
  bpc_ref_result_free(&f.res);

  /* Unary edges: sign(-0) = +0, sign(NaN) = 0, neg(-0) = +0... */
  float ua[4] = {-0.0f, NAN, -3.0f, 0.0f};
  fx_init(&f, BP_OP_sign, 1);
  fx_input(&f, 0, BP_DTYPE_F32, 1, s4, ua);
  assert_int_equal(fx_run(&f), BP_OK);
  assert_true(f.res.out[0].f[0] == 0.0 && !signbit(f.res.out[0].f[0]));
  assert_true(f.res.out[0].f[1] == 0.0);
  assert_true(f.res.out[0].f[2] == -1.0);
  bpc_ref_result_free(&f.res);
  f.c.op_id = BP_OP_neg;
  assert_int_equal(fx_run(&f), BP_OK);
  assert_true(f.res.out[0].f[0] == 0.0 && !signbit(f.res.out[0].f[0]));
  assert_true(f.res.out[0].f[3] == 0.0 && signbit(f.res.out[0].f[3]));
  bpc_ref_result_free(&f.res);
  /* ...abs(INT8_MIN) = INT8_MIN, round half to even, sqrt of an int is f32. */
  int8_t i8[4] = {-128, -5, 3, 0};
  f.c.op_id = BP_OP_abs;
  fx_input(&f, 0, BP_DTYPE_I8, 1, s4, i8);
  assert_int_equal(fx_run(&f), BP_OK);
  assert_int_equal(f.res.out[0].i[0], -128);
  assert_int_equal(f.res.out[0].i[1], 5);
  bpc_ref_result_free(&f.res);
  f.c.op_id = BP_OP_sqrt;
  assert_int_equal(fx_run(&f), BP_OK);
  assert_int_equal(f.res.out[0].dtype, BP_DTYPE_F32);
  assert_true(isnan(f.res.out[0].f[0]));
  bpc_ref_result_free(&f.res);
  float half[4] = {0.5f, 1.5f, 2.5f, -0.5f};
  f.c.op_id = BP_OP_round;
  fx_input(&f, 0, BP_DTYPE_F32, 1, s4, half);
  assert_int_equal(fx_run(&f), BP_OK);
  assert_true(f.res.out[0].f[0] == 0.0 && f.res.out[0].f[1] == 2.0 && f.res.out[0].f[2] == 2.0);
  bpc_ref_result_free(&f.res);
  f.c.op_id = BP_OP_neg; /* neg on bool is rejected */
  fx_input(&f, 0, BP_DTYPE_BOOL, 1, s4, i8);
  assert_int_not_equal(fx_run(&f), BP_OK);
}

static void test_ref_reductions(void** state) {
  (void)state;
  ref_fixture_t f;
  int64_t s[2] = {2, 3};
  uint16_t h[6];
  double vals[6] = {1, 2, 3, -4, 5, -6};
  for (int k = 0; k < 6; k++) h[k] = bpc_f16_from_f64(vals[k]);
  fx_init(&f, BP_OP_sum, 1);
  f.c.has_attrs = 1;
  f.c.attrs.reduce.struct_size = sizeof f.c.attrs.reduce;
  f.c.attrs.reduce.num_dims = 1;
  f.c.attrs.reduce.dims[0] = -1;
  fx_input(&f, 0, BP_DTYPE_F16, 2, s, h);
  assert_int_equal(fx_run(&f), BP_OK);
  assert_int_equal(f.res.out[0].rank, 1);
  assert_true(f.res.out[0].f[0] == 6.0 && f.res.out[0].f[1] == -5.0);
  assert_true(f.res.out[0].mag[1] == 15.0 && f.res.out[0].nterms[1] == 3.0);
  bpc_ref_result_free(&f.res);
  f.c.attrs.reduce.flags = BP_REDUCE_KEEPDIM;
  f.c.attrs.reduce.dims[0] = 0;
  f.c.op_id = BP_OP_mean;
  assert_int_equal(fx_run(&f), BP_OK);
  assert_int_equal(f.res.out[0].rank, 2);
  assert_int_equal(f.res.out[0].sizes[0], 1);
  assert_true(f.res.out[0].f[0] == -1.5);
  bpc_ref_result_free(&f.res);

  /* sum of bool gives i64; mean of an empty dim is NaN. */
  uint8_t b[6] = {1, 1, 0, 1, 0, 0};
  f.c.op_id = BP_OP_sum;
  f.c.attrs.reduce.flags = BP_REDUCE_ALL_DIMS;
  fx_input(&f, 0, BP_DTYPE_BOOL, 2, s, b);
  assert_int_equal(fx_run(&f), BP_OK);
  assert_int_equal(f.res.out[0].dtype, BP_DTYPE_I64);
  assert_int_equal(f.res.out[0].rank, 0);
  assert_int_equal(f.res.out[0].i[0], 3);
  bpc_ref_result_free(&f.res);
  int64_t se[2] = {0, 3};
  f.c.op_id = BP_OP_mean;
  f.c.attrs.reduce.flags = 0;
  fx_input(&f, 0, BP_DTYPE_F32, 2, se, NULL);
  assert_int_equal(fx_run(&f), BP_OK);
  assert_int_equal(f.res.out[0].numel, 3);
  assert_true(isnan(f.res.out[0].f[0]));
  bpc_ref_result_free(&f.res);

  /* argmax: first NaN wins; ties give the first index; amax propagates NaN. */
  float x[6] = {1.0f, 3.0f, 3.0f, 2.0f, NAN, NAN};
  f.c.op_id = BP_OP_argmax;
  f.c.attrs.reduce.num_dims = 1;
  f.c.attrs.reduce.dims[0] = 1;
  fx_input(&f, 0, BP_DTYPE_F32, 2, s, x);
  assert_int_equal(fx_run(&f), BP_OK);
  assert_int_equal(f.res.out[0].dtype, BP_DTYPE_I64);
  assert_int_equal(f.res.out[0].i[0], 1);
  assert_int_equal(f.res.out[0].i[1], 1);
  bpc_ref_result_free(&f.res);
  f.c.attrs.reduce.flags = BP_REDUCE_ALL_DIMS;
  assert_int_equal(fx_run(&f), BP_OK);
  assert_int_equal(f.res.out[0].i[0], 4);
  bpc_ref_result_free(&f.res);
  f.c.op_id = BP_OP_amax;
  f.c.attrs.reduce.flags = 0;
  assert_int_equal(fx_run(&f), BP_OK);
  assert_true(f.res.out[0].f[0] == 3.0 && isnan(f.res.out[0].f[1]));
  bpc_ref_result_free(&f.res);
  f.c.op_id = BP_OP_amin;
  fx_input(&f, 0, BP_DTYPE_F32, 2, se, NULL); /* empty reduced dim: rejected */
  f.c.attrs.reduce.dims[0] = 0;
  assert_int_not_equal(fx_run(&f), BP_OK);

  /* softmax: [0, ln 3] -> [0.25, 0.75]; an all -inf row is NaN. */
  double sm[4] = {0.0, log(3.0), -INFINITY, -INFINITY};
  int64_t s22[2] = {2, 2};
  fx_init(&f, BP_OP_softmax, 1);
  f.c.has_attrs = 1;
  f.c.attrs.softmax.struct_size = sizeof f.c.attrs.softmax;
  f.c.attrs.softmax.dim = -1;
  fx_input(&f, 0, BP_DTYPE_F64, 2, s22, sm);
  assert_int_equal(fx_run(&f), BP_OK);
  assert_true(fabs(f.res.out[0].f[0] - 0.25) < 1e-15 && fabs(f.res.out[0].f[1] - 0.75) < 1e-15);
  assert_true(isnan(f.res.out[0].f[2]) && isnan(f.res.out[0].f[3]));
  bpc_ref_result_free(&f.res);
}

static void fx_reduce(ref_fixture_t* f, uint32_t op, uint32_t flags, int32_t dim) {
  fx_init(f, op, 1);
  f->c.has_attrs = 1;
  f->c.attrs.reduce.struct_size = sizeof f->c.attrs.reduce;
  f->c.attrs.reduce.flags = flags;
  if (!(flags & BP_REDUCE_ALL_DIMS)) {
    f->c.attrs.reduce.num_dims = 1;
    f->c.attrs.reduce.dims[0] = dim;
  }
}

/* prod: bool and integers give i64 (wrapping), floats keep their dtype,
 * attrs.dtype overrides; the empty product is 1; the bound records n and
 * |product|; intermediate over/underflow does not spoil the result. */
static void test_ref_prod(void** state) {
  (void)state;
  ref_fixture_t f;
  int64_t s23[2] = {2, 3}, s03[2] = {0, 3}, s2[1] = {2}, s3[1] = {3}, s4[1] = {4};
  float x[6] = {1.5f, -2.0f, 4.0f, 0.5f, 3.0f, -1.0f};
  fx_reduce(&f, BP_OP_prod, 0, -1);
  fx_input(&f, 0, BP_DTYPE_F32, 2, s23, x);
  assert_int_equal(fx_run(&f), BP_OK);
  assert_int_equal(f.res.out[0].dtype, BP_DTYPE_F32);
  assert_int_equal(f.res.out[0].numel, 2);
  assert_true(f.res.out[0].f[0] == -12.0 && f.res.out[0].f[1] == -1.5);
  assert_true(f.res.out[0].mag[0] == 12.0 && f.res.out[0].mag[1] == 1.5);
  assert_true(f.res.out[0].nterms[0] == 3.0);
  bpc_ref_result_free(&f.res);
  f.c.attrs.reduce.dims[0] = 0; /* columns: 0.75, -6, -4 */
  f.c.attrs.reduce.flags = BP_REDUCE_KEEPDIM;
  assert_int_equal(fx_run(&f), BP_OK);
  assert_int_equal(f.res.out[0].rank, 2);
  assert_true(f.res.out[0].f[0] == 0.75 && f.res.out[0].f[1] == -6.0 && f.res.out[0].f[2] == -4.0);
  bpc_ref_result_free(&f.res);

  /* Empty reduced dim: ones. */
  fx_reduce(&f, BP_OP_prod, 0, 0);
  fx_input(&f, 0, BP_DTYPE_F16, 2, s03, NULL);
  assert_int_equal(fx_run(&f), BP_OK);
  assert_int_equal(f.res.out[0].numel, 3);
  assert_true(f.res.out[0].f[0] == 1.0 && f.res.out[0].f[2] == 1.0);
  bpc_ref_result_free(&f.res);

  /* Integers: i64 output, two's complement wrap; bool too. */
  int64_t big[2] = {INT64_MAX, 2};
  fx_reduce(&f, BP_OP_prod, BP_REDUCE_ALL_DIMS, 0);
  fx_input(&f, 0, BP_DTYPE_I64, 1, s2, big);
  assert_int_equal(fx_run(&f), BP_OK);
  assert_int_equal(f.res.out[0].i[0], -2);
  bpc_ref_result_free(&f.res);
  uint8_t u[3] = {200, 200, 200};
  fx_input(&f, 0, BP_DTYPE_U8, 1, s3, u);
  assert_int_equal(fx_run(&f), BP_OK);
  assert_int_equal(f.res.out[0].dtype, BP_DTYPE_I64);
  assert_int_equal(f.res.out[0].i[0], 8000000);
  bpc_ref_result_free(&f.res);
  uint8_t b[3] = {1, 0, 1};
  fx_input(&f, 0, BP_DTYPE_BOOL, 1, s3, b);
  assert_int_equal(fx_run(&f), BP_OK);
  assert_int_equal(f.res.out[0].dtype, BP_DTYPE_I64);
  assert_int_equal(f.res.out[0].i[0], 0);
  bpc_ref_result_free(&f.res);
  /* attrs.dtype: i32 multiplied in f64, no wrap. */
  int32_t w[2] = {65536, 65536 * 2};
  f.c.attrs.reduce.dtype = BP_DTYPE_F64;
  fx_input(&f, 0, BP_DTYPE_I32, 1, s2, w);
  assert_int_equal(fx_run(&f), BP_OK);
  assert_int_equal(f.res.out[0].dtype, BP_DTYPE_F64);
  assert_true(f.res.out[0].f[0] == 8589934592.0);
  bpc_ref_result_free(&f.res);
  f.c.attrs.reduce.dtype = BP_DTYPE_INVALID;

  /* 1e300 * 1e300 * 1e-300 * 1e-300 is about 1, not inf; three 1e-200 give
   * 0 (below double's range); inf * 0 is NaN. */
  double y[4] = {1e300, 1e300, 1e-300, 1e-300}, z[3] = {1e-200, 1e-200, 1e-200};
  fx_input(&f, 0, BP_DTYPE_F64, 1, s4, y);
  assert_int_equal(fx_run(&f), BP_OK);
  assert_true(fabs(f.res.out[0].f[0] - 1.0) < 1e-14);
  assert_true(f.res.out[0].nterms[0] == 4.0);
  bpc_ref_result_free(&f.res);
  fx_input(&f, 0, BP_DTYPE_F64, 1, s3, z);
  assert_int_equal(fx_run(&f), BP_OK);
  assert_true(f.res.out[0].f[0] == 0.0);
  bpc_ref_result_free(&f.res);
  double n[3] = {INFINITY, 2.0, 0.0};
  fx_input(&f, 0, BP_DTYPE_F64, 1, s3, n);
  assert_int_equal(fx_run(&f), BP_OK);
  assert_true(isnan(f.res.out[0].f[0]));
  bpc_ref_result_free(&f.res);
}

/* any: every dtype gives bool; NaN and subnormals are true, -0 false; the
 * empty any is false; attrs.dtype is refused. */
static void test_ref_any(void** state) {
  (void)state;
  ref_fixture_t f;
  int64_t s32[2] = {3, 2}, s03[2] = {0, 3}, s4[1] = {4};
  float x[6] = {0.0f, -0.0f, NAN, 0.0f, 0.0f, 1e-45f};
  fx_reduce(&f, BP_OP_any, 0, 1);
  fx_input(&f, 0, BP_DTYPE_F32, 2, s32, x);
  assert_int_equal(fx_run(&f), BP_OK);
  assert_int_equal(f.res.out[0].dtype, BP_DTYPE_BOOL);
  assert_int_equal(f.res.out[0].numel, 3);
  assert_int_equal(f.res.out[0].i[0], 0);
  assert_int_equal(f.res.out[0].i[1], 1);
  assert_int_equal(f.res.out[0].i[2], 1);
  bpc_ref_result_free(&f.res);
  f.c.attrs.reduce.dims[0] = -2; /* columns: {0, NaN, 0}, {-0, 0, 1e-45} */
  assert_int_equal(fx_run(&f), BP_OK);
  assert_int_equal(f.res.out[0].i[0], 1);
  assert_int_equal(f.res.out[0].i[1], 1);
  bpc_ref_result_free(&f.res);
  int16_t v[4] = {0, 0, 0, -5};
  fx_reduce(&f, BP_OP_any, BP_REDUCE_ALL_DIMS | BP_REDUCE_KEEPDIM, 0);
  fx_input(&f, 0, BP_DTYPE_I16, 1, s4, v);
  assert_int_equal(fx_run(&f), BP_OK);
  assert_int_equal(f.res.out[0].rank, 1);
  assert_int_equal(f.res.out[0].i[0], 1);
  bpc_ref_result_free(&f.res);
  v[3] = 0;
  assert_int_equal(fx_run(&f), BP_OK);
  assert_int_equal(f.res.out[0].i[0], 0);
  bpc_ref_result_free(&f.res);
  /* fp8: only != 0 matters (0x80 is -0 in e4m3fn). */
  uint8_t q[4] = {0x00, 0x80, 0x00, 0x00};
  fx_input(&f, 0, BP_DTYPE_F8E4M3FN, 1, s4, q);
  assert_int_equal(fx_run(&f), BP_OK);
  assert_int_equal(f.res.out[0].i[0], 0);
  bpc_ref_result_free(&f.res);
  q[2] = 0x01;
  assert_int_equal(fx_run(&f), BP_OK);
  assert_int_equal(f.res.out[0].i[0], 1);
  bpc_ref_result_free(&f.res);
  f.c.attrs.reduce.dtype = BP_DTYPE_I64;
  assert_int_not_equal(fx_run(&f), BP_OK);
  fx_reduce(&f, BP_OP_any, 0, 0);
  fx_input(&f, 0, BP_DTYPE_F32, 2, s03, NULL);
  assert_int_equal(fx_run(&f), BP_OK);
  assert_int_equal(f.res.out[0].numel, 3);
  assert_int_equal(f.res.out[0].i[0], 0);
  bpc_ref_result_free(&f.res);
}

/* argmin: the first NaN wins, as for argmax; ties give the first index; an
 * empty reduced dim is rejected. */
static void test_ref_argmin(void** state) {
  (void)state;
  ref_fixture_t f;
  int64_t s23[2] = {2, 3}, s03[2] = {0, 3}, s4[1] = {4};
  float x[6] = {3.0f, 1.0f, 1.0f, -INFINITY, NAN, NAN};
  fx_reduce(&f, BP_OP_argmin, 0, -1);
  fx_input(&f, 0, BP_DTYPE_F32, 2, s23, x);
  assert_int_equal(fx_run(&f), BP_OK);
  assert_int_equal(f.res.out[0].dtype, BP_DTYPE_I64);
  assert_int_equal(f.res.out[0].i[0], 1);
  assert_int_equal(f.res.out[0].i[1], 1);
  bpc_ref_result_free(&f.res);
  f.c.attrs.reduce.dims[0] = 0; /* columns: (3, -inf), (1, NaN), (1, NaN) */
  assert_int_equal(fx_run(&f), BP_OK);
  assert_true(f.res.out[0].i[0] == 1 && f.res.out[0].i[1] == 1 && f.res.out[0].i[2] == 1);
  bpc_ref_result_free(&f.res);
  x[4] = 0.0f; /* column 1: (1, 0) -> 1; column 0 -inf -> 1 */
  x[0] = -INFINITY;
  assert_int_equal(fx_run(&f), BP_OK);
  assert_true(f.res.out[0].i[0] == 0 && f.res.out[0].i[1] == 1 && f.res.out[0].i[2] == 1);
  bpc_ref_result_free(&f.res);
  fx_reduce(&f, BP_OP_argmin, BP_REDUCE_ALL_DIMS, 0);
  fx_input(&f, 0, BP_DTYPE_F32, 2, s23, x); /* flattened: first NaN at 5 */
  assert_int_equal(fx_run(&f), BP_OK);
  assert_int_equal(f.res.out[0].rank, 0);
  assert_int_equal(f.res.out[0].i[0], 5);
  bpc_ref_result_free(&f.res);
  int8_t v[4] = {5, -2, -2, 7};
  fx_input(&f, 0, BP_DTYPE_I8, 1, s4, v);
  assert_int_equal(fx_run(&f), BP_OK);
  assert_int_equal(f.res.out[0].i[0], 1);
  bpc_ref_result_free(&f.res);
  fx_reduce(&f, BP_OP_argmin, 0, 0);
  fx_input(&f, 0, BP_DTYPE_F32, 2, s03, NULL);
  assert_int_not_equal(fx_run(&f), BP_OK);
}

/* log_softmax: x - max - log(sum exp(x - max)); -inf stays -inf; an all
 * -inf row is NaN; half_to_float gives f32; the error is absolute. */
static void test_ref_log_softmax(void** state) {
  (void)state;
  ref_fixture_t f;
  double sm[6] = {0.0, log(3.0), -INFINITY, 0.0, -INFINITY, -INFINITY};
  int64_t s32[2] = {3, 2};
  fx_init(&f, BP_OP_log_softmax, 1);
  f.c.has_attrs = 1;
  f.c.attrs.softmax.struct_size = sizeof f.c.attrs.softmax;
  f.c.attrs.softmax.dim = -1;
  fx_input(&f, 0, BP_DTYPE_F64, 2, s32, sm);
  assert_int_equal(fx_run(&f), BP_OK);
  assert_int_equal(f.res.out[0].dtype, BP_DTYPE_F64);
  assert_true(fabs(f.res.out[0].f[0] - log(0.25)) < 1e-15);
  assert_true(fabs(f.res.out[0].f[1] - log(0.75)) < 1e-15);
  assert_true(isinf(f.res.out[0].f[2]) && f.res.out[0].f[2] < 0 && f.res.out[0].f[3] == 0.0);
  assert_true(isnan(f.res.out[0].f[4]) && isnan(f.res.out[0].f[5]));
  /* mag 1; n = len + 8 + |x - max| + 2 log(sum) = 2 + 8 + ln 3 + 2 ln(4/3). */
  assert_true(f.res.out[0].mag[0] == 1.0);
  assert_true(fabs(f.res.out[0].nterms[0] - (10.0 + log(3.0) + 2.0 * log(4.0 / 3.0))) < 1e-12);
  bpc_ref_result_free(&f.res);
  /* Along dim 0 of [[1, 2], [1, 2], [1, 2]]: -ln 3 everywhere; f16 input
   * with half_to_float gives f32. */
  uint16_t h[6];
  for (int k = 0; k < 6; k++) h[k] = bpc_f16_from_f64((double)(k % 2 + 1));
  f.c.attrs.softmax.dim = 0;
  f.c.attrs.softmax.half_to_float = 1;
  fx_input(&f, 0, BP_DTYPE_F16, 2, s32, h);
  assert_int_equal(fx_run(&f), BP_OK);
  assert_int_equal(f.res.out[0].dtype, BP_DTYPE_F32);
  for (int k = 0; k < 6; k++) assert_true(fabs(f.res.out[0].f[k] + log(3.0)) < 1e-15);
  bpc_ref_result_free(&f.res);
  f.c.attrs.softmax.dim = 2;
  assert_int_not_equal(fx_run(&f), BP_OK);
}

/* The generated data make the new references answer more than one way:
 * any sees false and true rows, long products stay finite and nonzero. */
static void test_cases_reductions_informative(void** state) {
  (void)state;
  uint32_t ops[2] = {BP_OP_any, BP_OP_prod};
  for (int o = 0; o < 2; o++) {
    bpc_case_list_t l = {0};
    assert_int_equal(bpc_cases_generate(ops[o], 0, &l), BP_OK);
    int64_t falses = 0, trues = 0, long_finite = 0, long_total = 0;
    for (size_t k = 0; k < l.count; k++) {
      const bpc_case_t* c = &l.items[k];
      bpc_host_tensor_t in[BPC_MAX_INPUTS];
      void* data = NULL;
      memset(in, 0, sizeof in);
      assert_int_equal(bpc_case_materialize(c, 0, &data), BP_OK);
      in[0].dtype = c->in[0].dtype;
      in[0].rank = c->in[0].rank;
      memcpy(in[0].sizes, c->in[0].sizes, sizeof in[0].sizes);
      in[0].numel = 1;
      for (uint32_t d = 0; d < in[0].rank; d++) in[0].numel *= in[0].sizes[d];
      in[0].data = data;
      bpc_ref_result_t res;
      if (bpc_reference_run(c, in, &res) != BP_OK) fail_msg("%s: %s", c->id, res.message);
      const bpc_expected_t* e = &res.out[0];
      for (int64_t i = 0; i < e->numel && ops[o] == BP_OP_any; i++) {
        if (e->i[i]) trues++;
        else falses++;
      }
      if (ops[o] == BP_OP_prod && e->f && in[0].numel >= 255 && c->in[0].values == BPC_V_RANDOM) {
        long_total++;
        if (isfinite(e->f[0]) && e->f[0] != 0.0 && fabs(log(fabs(e->f[0]))) < 80.0) long_finite++;
      }
      bpc_ref_result_free(&res);
      free(data);
    }
    if (ops[o] == BP_OP_any) {
      assert_true(falses > 50 && trues > 50);
    } else {
      assert_true(long_total >= 12);
      assert_int_equal(long_finite, long_total);
    }
    bpc_case_list_free(&l);
  }
}

static void test_ref_matmul_and_data(void** state) {
  (void)state;
  ref_fixture_t f;
  int64_t s22[2] = {2, 2}, s2[1] = {2};
  float a[4] = {1, 2, 3, 4}, b[4] = {5, 6, 7, 8};
  fx_init(&f, BP_OP_mm, 2);
  fx_input(&f, 0, BP_DTYPE_F32, 2, s22, a);
  fx_input(&f, 1, BP_DTYPE_F32, 2, s22, b);
  assert_int_equal(fx_run(&f), BP_OK);
  double want[4] = {19, 22, 43, 50};
  for (int k = 0; k < 4; k++) assert_true(f.res.out[0].f[k] == want[k]);
  assert_true(f.res.out[0].nterms[0] == 2.0 && f.res.out[0].mag[3] == 50.0);
  bpc_ref_result_free(&f.res);
  /* addmm with beta = 0 ignores NaN in self. */
  float self[2] = {NAN, 1.0f};
  fx_init(&f, BP_OP_addmm, 3);
  f.c.has_attrs = 1;
  f.c.attrs.addmm.struct_size = sizeof f.c.attrs.addmm;
  f.c.attrs.addmm.beta.kind = BP_SCALAR_FLOAT;
  f.c.attrs.addmm.beta.v.f = 0.0;
  f.c.attrs.addmm.alpha.kind = BP_SCALAR_FLOAT;
  f.c.attrs.addmm.alpha.v.f = 2.0;
  fx_input(&f, 0, BP_DTYPE_F32, 1, s2, self);
  fx_input(&f, 1, BP_DTYPE_F32, 2, s22, a);
  fx_input(&f, 2, BP_DTYPE_F32, 2, s22, b);
  assert_int_equal(fx_run(&f), BP_OK);
  assert_true(f.res.out[0].f[0] == 38.0 && f.res.out[0].f[3] == 100.0);
  bpc_ref_result_free(&f.res);
  f.c.attrs.addmm.beta.v.f = 1.0;
  assert_int_equal(fx_run(&f), BP_OK);
  assert_true(isnan(f.res.out[0].f[0]) && f.res.out[0].f[1] == 45.0);
  bpc_ref_result_free(&f.res);

  /* cat skips legacy 1-d empty tensors and promotes. */
  int64_t s0[1] = {0}, s23[2] = {2, 3}, s13[2] = {1, 3};
  int32_t x[6] = {1, 2, 3, 4, 5, 6};
  uint16_t y[3] = {0x3C00, 0x4000, 0x4200};
  fx_init(&f, BP_OP_cat, 3);
  f.c.has_attrs = 1;
  f.c.attrs.dim.struct_size = sizeof f.c.attrs.dim;
  fx_input(&f, 0, BP_DTYPE_I32, 1, s0, NULL);
  fx_input(&f, 1, BP_DTYPE_I32, 2, s23, x);
  fx_input(&f, 2, BP_DTYPE_F16, 2, s13, y);
  assert_int_equal(fx_run(&f), BP_OK);
  assert_int_equal(f.res.out[0].dtype, BP_DTYPE_F16);
  assert_int_equal(f.res.out[0].sizes[0], 3);
  assert_true(f.res.out[0].f[5] == 6.0 && f.res.out[0].f[8] == 3.0);
  bpc_ref_result_free(&f.res);

  /* to_copy: f32 -> f8e4m3 overflow is NaN; f32 -> i8 truncates. */
  float src[2] = {500.0f, -3.75f};
  fx_init(&f, BP_OP_to_copy, 1);
  f.c.has_attrs = 1;
  f.c.attrs.cast.struct_size = sizeof f.c.attrs.cast;
  f.c.attrs.cast.dtype = BP_DTYPE_F8E4M3FN;
  fx_input(&f, 0, BP_DTYPE_F32, 1, s2, src);
  assert_int_equal(fx_run(&f), BP_OK);
  assert_true(isnan(f.res.out[0].f[0]) && f.res.out[0].f[1] == -3.75);
  bpc_ref_result_free(&f.res);
  f.c.attrs.cast.dtype = BP_DTYPE_I8;
  src[0] = 100.9f;
  assert_int_equal(fx_run(&f), BP_OK);
  assert_int_equal(f.res.out[0].i[0], 100);
  assert_int_equal(f.res.out[0].i[1], -3);
  bpc_ref_result_free(&f.res);

  /* arange(-5, 17, 3) in i32: 8 elements, last 16. */
  fx_init(&f, BP_OP_arange, 0);
  f.c.has_attrs = 1;
  f.c.attrs.arange.start.kind = f.c.attrs.arange.end.kind = f.c.attrs.arange.step.kind = BP_SCALAR_INT;
  f.c.attrs.arange.start.v.i = -5;
  f.c.attrs.arange.end.v.i = 17;
  f.c.attrs.arange.step.v.i = 3;
  f.c.out[0].dtype = BP_DTYPE_I32;
  f.c.out[0].rank = 1;
  f.c.out[0].sizes[0] = 8;
  assert_int_equal(fx_run(&f), BP_OK);
  assert_int_equal(f.res.out[0].i[7], 16);
  bpc_ref_result_free(&f.res);
  f.c.out[0].sizes[0] = 7; /* wrong length: rejected */
  assert_int_not_equal(fx_run(&f), BP_OK);
}

/* ---- case generation ------------------------------------------------------------ */
static void test_cases_valid_and_deterministic(void** state) {
  (void)state;
  size_t total = 0;
  for (uint32_t op = 1; op < bpc_op_count(); op++) {
    const bpc_op_entry_t* e = bpc_op_entry(op);
    bpc_case_list_t quick = {0}, full = {0};
    assert_int_equal(bpc_cases_generate(op, 1, &quick), BP_OK);
    if (!e->reference) {
      assert_int_equal(quick.count, 0);
      continue;
    }
    assert_int_equal(bpc_cases_generate(op, 0, &full), BP_OK);
    assert_true(quick.count > 0);
    assert_true(full.count >= quick.count);
    /* Every quick case is valid under its reference; ids are unique. */
    for (size_t k = 0; k < quick.count; k++) {
      const bpc_case_t* c = &quick.items[k];
      for (size_t j = k + 1; j < quick.count; j++) {
        if (strcmp(c->id, quick.items[j].id) == 0) fail_msg("duplicate case id %s", c->id);
      }
      bpc_host_tensor_t in[BPC_MAX_INPUTS];
      void* data[BPC_MAX_INPUTS] = {0};
      memset(in, 0, sizeof in);
      for (uint32_t i = 0; i < c->num_inputs; i++) {
        assert_int_equal(bpc_case_materialize(c, i, &data[i]), BP_OK);
        in[i].dtype = c->in[i].dtype;
        in[i].rank = c->in[i].rank;
        memcpy(in[i].sizes, c->in[i].sizes, sizeof in[i].sizes);
        in[i].numel = 1;
        for (uint32_t d = 0; d < c->in[i].rank; d++) in[i].numel *= c->in[i].sizes[d];
        in[i].data = data[i];
      }
      bpc_ref_result_t res;
      if (bpc_reference_run(c, in, &res) != BP_OK) fail_msg("%s: %s", c->id, res.message);
      bpc_ref_result_free(&res);
      for (uint32_t i = 0; i < c->num_inputs; i++) free(data[i]);
    }
    total += full.count;
    bpc_case_list_free(&quick);
    bpc_case_list_free(&full);
  }
  assert_true(total > 1000);
  /* Same ids and the same bytes on a second generation. */
  bpc_case_list_t a = {0}, b = {0};
  assert_int_equal(bpc_cases_generate(BP_OP_add, 0, &a), BP_OK);
  assert_int_equal(bpc_cases_generate(BP_OP_add, 0, &b), BP_OK);
  assert_int_equal(a.count, b.count);
  for (size_t k = 0; k < a.count; k++) {
    assert_string_equal(a.items[k].id, b.items[k].id);
    void *da = NULL, *db = NULL;
    assert_int_equal(bpc_case_materialize(&a.items[k], 0, &da), BP_OK);
    assert_int_equal(bpc_case_materialize(&b.items[k], 0, &db), BP_OK);
    int64_t n = 1;
    for (uint32_t d = 0; d < a.items[k].in[0].rank; d++) n *= a.items[k].in[0].sizes[d];
    if (da) assert_memory_equal(da, db, (size_t)n * bpc_dtype_size(a.items[k].in[0].dtype));
    free(da);
    free(db);
  }
  bpc_case_list_free(&a);
  bpc_case_list_free(&b);
}

/* ---- crash isolation ------------------------------------------------------------- */
/* Case 2 raises SIGSEGV, case 4 hangs, case 6 calls _exit; the others pass. */
static int fake_group(void* user, uint32_t group, uint32_t start, bpc_child_t* child, char* msg,
                      size_t size) {
  (void)user;
  if (group == 1) {
    snprintf(msg, size, "backend went away");
    return 1;
  }
  for (uint32_t k = start; k < 8; k++) {
    bpc_child_begin(child, k);
    if (k == 2) raise(SIGSEGV);
    if (k == 4) sleep(30);
    if (k == 6) _exit(7);
    bpc_result_t r;
    memset(&r, 0, sizeof r);
    r.status = BPC_PASS;
    r.max_ulps = r.max_abs = -1.0;
    snprintf(r.message, sizeof r.message, "case %u ok", k);
    bpc_child_result(child, k, &r);
  }
  return 0;
}

static void test_runner_crash_isolation(void** state) {
  (void)state;
  bpc_runner_ops_t ops = {.user = NULL, .run_group = fake_group};
  bpc_result_t res[8];
  assert_int_equal(bpc_run_isolated(&ops, 0, 8, 1.0, res), BP_OK);
  uint32_t want[8] = {BPC_PASS, BPC_PASS, BPC_CRASH, BPC_PASS, BPC_TIMEOUT, BPC_PASS, BPC_CRASH, BPC_PASS};
  for (int k = 0; k < 8; k++) {
    if (res[k].status != want[k]) fail_msg("case %d: %s (%s)", k, bpc_status_name(res[k].status), res[k].message);
  }
  assert_string_equal(res[7].message, "case 7 ok");
  assert_non_null(strstr(res[6].message, "status 7"));
  assert_non_null(strstr(res[4].message, "timed out"));
  /* A child that cannot run at all: every case FAILs with its reason. */
  assert_int_equal(bpc_run_isolated(&ops, 1, 3, 1.0, res), BP_OK);
  for (int k = 0; k < 3; k++) {
    assert_int_equal(res[k].status, BPC_FAIL);
    assert_string_equal(res[k].message, "backend went away");
  }
  assert_int_equal(bpc_run_isolated(&ops, 0, 8, 0.0, res), BP_INVALID_ARGUMENT);
}

/* ---- runtime cases ------------------------------------------------------------------ */
static size_t count_prefix(const bpc_case_list_t* l, const char* prefix) {
  size_t n = 0;
  for (size_t k = 0; k < l->count; k++) n += strncmp(l->items[k].id, prefix, strlen(prefix)) == 0;
  return n;
}

static void test_runtime_generation(void** state) {
  (void)state;
  /* One device, a device-local space that is not host visible. */
  bpc_runtime_target_t t;
  memset(&t, 0, sizeof t);
  t.device_count = 1;
  t.num_spaces = 1;
  t.spaces[0].kind = BP_MEMORY_DEVICE;
  t.spaces[0].capacity_bytes = UINT64_C(1) << 20;
  bpc_case_list_t a, b;
  memset(&a, 0, sizeof a);
  memset(&b, 0, sizeof b);
  assert_int_equal(bpc_runtime_cases_generate(&t, &a), BP_OK);
  assert_int_equal(bpc_runtime_cases_generate(&t, &b), BP_OK);
  assert_int_equal(a.count, b.count);
  assert_true(a.count > 20);
  for (size_t k = 0; k < a.count; k++) {
    const bpc_case_t* c = &a.items[k];
    assert_string_equal(c->id, b.items[k].id); /* deterministic */
    assert_true(c->seed == b.items[k].seed);
    assert_true(bpc_is_runtime_op(c->op_id));
    assert_false(bpc_is_runtime_op(BP_OP_add));
    assert_memory_equal(c->id, bpc_group_name(c->op_id), strlen(bpc_group_name(c->op_id)));
    assert_memory_equal(c->id, "runtime/", 8);
    for (size_t j = 0; j < k; j++) assert_string_not_equal(c->id, a.items[j].id);
    if (k > 0) assert_true(c->op_id >= a.items[k - 1].op_id); /* grouped by area */
  }
  assert_string_equal(bpc_group_name(BP_OP_add), "add");
  assert_string_equal(bpc_group_name(BPC_RUNTIME_OP(BPC_RT_EVENT)), "runtime/event");
  assert_string_equal(bpc_group_name(BPC_RUNTIME_OP(BPC_RT_AREA_COUNT_)), "?");
  /* One device: no multi-device or foreign-operand cases; no mapping of a
   * space that is not host visible. */
  assert_int_equal(count_prefix(&a, "runtime/multi_device/"), 0);
  assert_int_equal(count_prefix(&a, "runtime/errors/foreign"), 0);
  assert_int_equal(count_prefix(&a, "runtime/memory/device/map"), 0);
  assert_int_equal(count_prefix(&a, "runtime/stream_order/chain_100"), 1);
  /* Over-capacity requests lie above the capacity; "large" fits in it. */
  for (size_t k = 0; k < a.count; k++) {
    const bpc_case_t* c = &a.items[k];
    if (strstr(c->id, "over_capacity")) assert_true(c->rt_args[0] > t.spaces[0].capacity_bytes);
    if (strstr(c->id, "alloc_large")) assert_true(c->rt_args[0] <= t.spaces[0].capacity_bytes / 4);
  }
  bpc_case_list_free(&a);
  bpc_case_list_free(&b);
  /* Two devices, two host-visible spaces, one without a capacity. */
  t.device_count = 2;
  t.num_spaces = 2;
  t.spaces[0].flags = BP_MEMORY_FLAG_HOST_VISIBLE;
  t.spaces[1].kind = BP_MEMORY_HOST_PINNED;
  t.spaces[1].flags = BP_MEMORY_FLAG_HOST_VISIBLE;
  t.spaces[1].capacity_bytes = 0;
  assert_int_equal(bpc_runtime_cases_generate(&t, &a), BP_OK);
  assert_true(count_prefix(&a, "runtime/multi_device/copy_") >= 4);
  assert_int_equal(count_prefix(&a, "runtime/errors/foreign"), 2);
  assert_int_equal(count_prefix(&a, "runtime/memory/device/map_roundtrip"), 1);
  assert_int_equal(count_prefix(&a, "runtime/memory/host_pinned/map_roundtrip"), 1);
  for (size_t k = 0; k < a.count; k++) {
    const bpc_case_t* c = &a.items[k];
    if (strstr(c->id, "host_pinned/") && strstr(c->id, "over_capacity")) assert_true(c->rt_args[0] == 0);
  }
  bpc_case_list_free(&a);
  assert_int_equal(bpc_runtime_cases_generate(NULL, &a), BP_INVALID_ARGUMENT);
}

static void test_report_counts(void** state) {
  (void)state;
  bpc_backend_report_t r;
  memset(&r, 0, sizeof r);
  bpc_case_t c;
  memset(&c, 0, sizeof c);
  c.op_id = BP_OP_add;
  uint32_t sts[8] = {BPC_PASS, BPC_QUALITY_WARNING, BPC_FAIL, BPC_CRASH, BPC_TIMEOUT,
                     BPC_NOT_SUPPORTED, BPC_SKIPPED, BPC_RESOURCE_ERROR};
  for (int k = 0; k < 8; k++) {
    bpc_result_t res;
    memset(&res, 0, sizeof res);
    res.status = sts[k];
    assert_int_equal(bpc_report_add(&r, &c, &res), BP_OK);
  }
  uint64_t p, f, s;
  bpc_report_counts(&r, &p, &f, &s);
  assert_int_equal(p, 2);
  assert_int_equal(f, 3);
  assert_int_equal(s, 3);
  bpc_report_free(&r);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_f16_roundtrip_all),
      cmocka_unit_test(test_bf16_roundtrip_all),
      cmocka_unit_test(test_fp8),
      cmocka_unit_test(test_int_rounding_and_wrap),
      cmocka_unit_test(test_ulp_distance),
      cmocka_unit_test(test_check_values),
      cmocka_unit_test(test_reduction_bound),
      cmocka_unit_test(test_guard_bands),
      cmocka_unit_test(test_ref_binary_promotion),
      cmocka_unit_test(test_ref_division_and_edges),
      cmocka_unit_test(test_ref_reductions),
      cmocka_unit_test(test_ref_prod),
      cmocka_unit_test(test_ref_any),
      cmocka_unit_test(test_ref_argmin),
      cmocka_unit_test(test_ref_log_softmax),
      cmocka_unit_test(test_cases_reductions_informative),
      cmocka_unit_test(test_ref_matmul_and_data),
      cmocka_unit_test(test_cases_valid_and_deterministic),
      cmocka_unit_test(test_runner_crash_isolation),
      cmocka_unit_test(test_runtime_generation),
      cmocka_unit_test(test_report_counts),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
