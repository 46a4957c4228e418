/* The pool family (avg_pool, adaptive_avg_pool, max_pool_with_indices, their
 * backward ops, grid_sampler_2d, upsample_bilinear2d, upsample_nearest2d)
 * through the public API on cpu:0: small cases whose PyTorch results are
 * known exactly (ceil_mode windows, count_include_pad, divisor_override, NaN
 * and -inf windows, dilation, nearest rounding half to even, the padding
 * modes, the nearest index formula with and without scale factors), and
 * PyTorch's error cases with their messages. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "backplane/backplane.h"

#include "cpu_fixture.h"

#define F32(data, ...) fx_tensor(BP_DTYPE_F32, (data), FX_N(__VA_ARGS__), (int64_t[]){__VA_ARGS__})
#define TT(dt, data, ...) fx_tensor(BP_DTYPE_##dt, (data), FX_N(__VA_ARGS__), (int64_t[]){__VA_ARGS__})

static void read_raw(const bp_tensor_t* t, void* out, uint64_t bytes) {
  assert_int_equal(bp_tensor_read(g_stream, t, out, bytes), BP_OK);
}

/* Equal floats, NaN equal to NaN; tol is an absolute allowance. */
static void assert_floats(const float* got, const float* want, int64_t n, float tol) {
  for (int64_t i = 0; i < n; i++) {
    int same = (isnan(got[i]) && isnan(want[i])) || fabsf(got[i] - want[i]) <= tol ||
               got[i] == want[i];
    if (!same) {
      print_error("element %lld: got %.9g, expected %.9g\n", (long long)i, got[i], want[i]);
      fail();
    }
  }
}

static void assert_i64s(const int64_t* got, const int64_t* want, int64_t n) {
  for (int64_t i = 0; i < n; i++) {
    if (got[i] != want[i]) {
      print_error("element %lld: got %lld, expected %lld\n", (long long)i, (long long)got[i],
                  (long long)want[i]);
      fail();
    }
  }
}

#define assert_status(expr, code, needle)                                                  \
  do {                                                                                     \
    bp_status_t st_ = (expr);                                                              \
    if (st_ != (code) || strstr(bp_status_message(), (needle)) == NULL) {                  \
      print_error("got %s \"%s\", expected %s containing \"%s\"\n", bp_status_name(st_),   \
                  bp_status_message(), bp_status_name(code), (needle));                    \
      fail();                                                                              \
    }                                                                                      \
  } while (0)

static bp_pool_attrs_t pool2d(int64_t k, int64_t s, int64_t p) {
  bp_pool_attrs_t a = {.struct_size = sizeof a, .spatial_dims = 2, .count_include_pad = 1,
                       .has_stride = 1};
  for (int i = 0; i < BP_MAX_SPATIAL; i++) {
    a.kernel[i] = k;
    a.stride[i] = s;
    a.padding[i] = p;
    a.dilation[i] = 1;
  }
  return a;
}

/* x[r][c] = 4r + c + 1 over a 4x4 image. */
static const float k_img16[16] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16};

/* ---- avg_pool -------------------------------------------------------------------- */

/* ceil_mode windows clipped to input + padding; count_include_pad off, on,
 * and divisor_override. */
static void test_avg_pool2d_ceil_and_divisors(void** state) {
  (void)state;
  bp_tensor_t* x = F32(k_img16, 1, 1, 4, 4);
  bp_pool_attrs_t a = pool2d(3, 2, 1);
  a.ceil_mode = 1;
  a.count_include_pad = 0;
  bp_tensor_t* out = NULL;
  assert_int_equal(bp_op_avg_pool(g_stream, x, &a, &out), BP_OK);
  fx_track(out);
  bp_tensor_desc_t d = {.struct_size = sizeof(d)};
  assert_int_equal(bp_tensor_get_desc(out, &d), BP_OK);
  assert_int_equal(d.rank, 4);
  assert_int_equal(d.sizes[2], 3);
  assert_int_equal(d.sizes[3], 3);
  float y[9];
  read_raw(out, y, sizeof y);
  assert_floats(y, (float[]){3.5f, 5, 6, 9.5f, 11, 12, 13.5f, 15, 16}, 9, 0);
  /* the padded window sizes are 3, 3, 2 per dim (the last is clipped to
   * input + padding) */
  a.count_include_pad = 1;
  bp_tensor_t* out2 = NULL;
  assert_int_equal(bp_op_avg_pool(g_stream, x, &a, &out2), BP_OK);
  fx_track(out2);
  read_raw(out2, y, sizeof y);
  assert_floats(y, (float[]){14.0f / 9, 30.0f / 9, 12.0f / 6, 57.0f / 9, 99.0f / 9, 36.0f / 6,
                             27.0f / 6, 45.0f / 6, 16.0f / 4},
                9, 0);
  a.divisor_override = 2;
  a.has_divisor_override = 1;
  bp_tensor_t* out3 = NULL;
  assert_int_equal(bp_op_avg_pool(g_stream, x, &a, &out3), BP_OK);
  fx_track(out3);
  read_raw(out3, y, sizeof y);
  assert_floats(y, (float[]){7, 15, 6, 28.5f, 49.5f, 18, 13.5f, 22.5f, 8}, 9, 0);
}

/* avg_pool1d on an unbatched [C, L] input and i64 division truncating toward
 * zero. */
static void test_avg_pool1d_i64_truncates(void** state) {
  (void)state;
  int64_t v[5] = {-7, 0, 5, 4, 1};
  bp_tensor_t* x = TT(I64, v, 1, 5);
  bp_pool_attrs_t a = {.struct_size = sizeof a, .spatial_dims = 1, .kernel = {2},
                       .dilation = {1}, .count_include_pad = 1};
  bp_tensor_t* out = NULL;
  assert_int_equal(bp_op_avg_pool(g_stream, x, &a, &out), BP_OK);
  fx_track(out);
  int64_t y[2];
  read_raw(out, y, sizeof y);
  assert_i64s(y, (int64_t[]){-3, 4}, 2); /* -7/2 = -3, 9/2 = 4 */
}

/* ---- max_pool_with_indices ------------------------------------------------------ */

/* A NaN wins (the last NaN of the scan, with its index); a window of -inf
 * returns its first element's index. */
static void test_max_pool_nan_and_neg_inf(void** state) {
  (void)state;
  float v[12] = {1, NAN, NAN, 3, -INFINITY, -INFINITY, 5, 2, NAN, 0, -INFINITY, -INFINITY};
  bp_tensor_t* x = F32(v, 1, 2, 6);
  bp_pool_attrs_t a = pool2d(2, 2, 0);
  bp_tensor_t *out = NULL, *ind = NULL;
  assert_int_equal(bp_op_max_pool_with_indices(g_stream, x, &a, &out, &ind), BP_OK);
  fx_track(out);
  fx_track(ind);
  float y[3];
  int64_t iy[3];
  read_raw(out, y, sizeof y);
  read_raw(ind, iy, sizeof iy);
  assert_floats(y, (float[]){NAN, NAN, -INFINITY}, 3, 0);
  assert_i64s(iy, (int64_t[]){1, 8, 4}, 3);
}

/* Dilation 2 with padding 1: taps that fall into the padding are skipped. */
static void test_max_pool_dilation_i32(void** state) {
  (void)state;
  int32_t v[9] = {1, 2, 3, 4, 5, 6, 7, 8, 9};
  bp_tensor_t* x = TT(I32, v, 1, 1, 3, 3);
  bp_pool_attrs_t a = pool2d(2, 1, 1);
  a.dilation[0] = a.dilation[1] = 2;
  bp_tensor_t *out = NULL, *ind = NULL;
  assert_int_equal(bp_op_max_pool_with_indices(g_stream, x, &a, &out, &ind), BP_OK);
  fx_track(out);
  fx_track(ind);
  int32_t y[9];
  int64_t iy[9];
  read_raw(out, y, sizeof y);
  read_raw(ind, iy, sizeof iy);
  const int32_t want[9] = {5, 6, 5, 8, 9, 8, 5, 6, 5};
  for (int i = 0; i < 9; i++) assert_int_equal(y[i], want[i]);
  assert_i64s(iy, (int64_t[]){4, 5, 4, 7, 8, 7, 4, 5, 4}, 9);
}

/* Gradients accumulate at their indices; -1 is skipped. */
static void test_max_pool_backward_accumulates(void** state) {
  (void)state;
  float go[2] = {1.5f, 2.5f}, zeros[8] = {0};
  int64_t idx[2] = {5, 5};
  bp_tensor_t* g = F32(go, 1, 1, 1, 2);
  bp_tensor_t* self = F32(zeros, 1, 1, 2, 4);
  bp_tensor_t* ind = TT(I64, idx, 1, 1, 1, 2);
  bp_pool_attrs_t a = pool2d(2, 2, 0);
  bp_tensor_t* gi = NULL;
  assert_int_equal(bp_op_max_pool2d_with_indices_backward(g_stream, g, self, ind, &a, &gi), BP_OK);
  fx_track(gi);
  float y[8];
  read_raw(gi, y, sizeof y);
  assert_floats(y, (float[]){0, 0, 0, 0, 0, 4, 0, 0}, 8, 0);
  int64_t idx2[2] = {-1, 2};
  bp_tensor_t* ind2 = TT(I64, idx2, 1, 1, 1, 2);
  bp_tensor_t* gi2 = NULL;
  assert_int_equal(bp_op_max_pool2d_with_indices_backward(g_stream, g, self, ind2, &a, &gi2), BP_OK);
  fx_track(gi2);
  read_raw(gi2, y, sizeof y);
  assert_floats(y, (float[]){0, 0, 2.5f, 0, 0, 0, 0, 0}, 8, 0);
}

/* An index outside its plane is an error of the stream, not a wild write. */
static void test_max_pool_backward_bad_index(void** state) {
  (void)state;
  bp_stream_t* s = NULL;
  assert_int_equal(bp_stream_create(g_dev, NULL, &s), BP_OK);
  float go[2] = {1, 1}, zeros[8] = {0};
  int64_t idx[2] = {0, 8};
  bp_tensor_t* g = F32(go, 1, 1, 1, 2);
  bp_tensor_t* self = F32(zeros, 1, 1, 2, 4);
  bp_tensor_t* ind = TT(I64, idx, 1, 1, 1, 2);
  bp_pool_attrs_t a = pool2d(2, 2, 0);
  bp_tensor_t* gi = NULL;
  assert_int_equal(bp_op_max_pool2d_with_indices_backward(s, g, self, ind, &a, &gi), BP_OK);
  fx_track(gi);
  assert_status(bp_stream_synchronize(s), BP_OUT_OF_RANGE, "outside its input plane");
  bp_stream_release(s);
}

/* ---- adaptive_avg_pool ---------------------------------------------------------- */

/* Windows [floor(i*5/3), ceil((i+1)*5/3)) overlap; the backward spreads each
 * gradient over its window. */
static void test_adaptive_avg_pool_windows(void** state) {
  (void)state;
  float v[5] = {1, 2, 3, 4, 5};
  bp_tensor_t* x = F32(v, 1, 1, 1, 5);
  bp_adaptive_pool_attrs_t a = {.struct_size = sizeof a, .spatial_dims = 2, .output_size = {1, 3}};
  bp_tensor_t* out = NULL;
  assert_int_equal(bp_op_adaptive_avg_pool(g_stream, x, &a, &out), BP_OK);
  fx_track(out);
  float y[5];
  read_raw(out, y, 3 * sizeof(float));
  assert_floats(y, (float[]){1.5f, 3, 4.5f}, 3, 0);
  float gv[3] = {3, 3, 3};
  bp_tensor_t* g = F32(gv, 1, 1, 1, 3);
  bp_tensor_t* gi = NULL;
  assert_int_equal(bp_op_adaptive_avg_pool2d_backward(g_stream, g, x, NULL, &gi), BP_OK);
  fx_track(gi);
  read_raw(gi, y, sizeof y);
  assert_floats(y, (float[]){1.5f, 2.5f, 1, 2.5f, 1.5f}, 5, 0);
}

/* ---- grid_sampler_2d ------------------------------------------------------------ */
static float grid_run(const float* img, int64_t w, float gx, uint32_t interp, uint32_t pad,
                      uint32_t ac) {
  bp_tensor_t* x = F32(img, 1, 1, 1, w);
  float gv[2] = {gx, 0};
  bp_tensor_t* grid = F32(gv, 1, 1, 1, 2);
  bp_grid_sampler_attrs_t a = {sizeof a, interp, pad, ac};
  bp_tensor_t* out = NULL;
  assert_int_equal(bp_op_grid_sampler_2d(g_stream, x, grid, &a, &out), BP_OK);
  fx_track(out);
  float y;
  read_raw(out, &y, sizeof y);
  return y;
}

/* Nearest rounds half to even: x = -0.5, 0, 0.5 land on 0.5, 1.5, 2.5. */
static void test_grid_nearest_half_to_even(void** state) {
  (void)state;
  const float img[4] = {10, 20, 30, 40};
  assert_true(grid_run(img, 4, -0.5f, BP_GRID_NEAREST, BP_GRID_PAD_ZEROS, 0) == 10);
  assert_true(grid_run(img, 4, 0.0f, BP_GRID_NEAREST, BP_GRID_PAD_ZEROS, 0) == 30);
  assert_true(grid_run(img, 4, 0.5f, BP_GRID_NEAREST, BP_GRID_PAD_ZEROS, 0) == 30);
  /* align_corners: x = 0 lands on 1.5 */
  assert_true(grid_run(img, 4, 0.0f, BP_GRID_NEAREST, BP_GRID_PAD_ZEROS, 1) == 30);
}

/* x = 1.5 unnormalizes to 4.5 (past the right edge): zeros pads with 0,
 * border clips to 3, reflection folds to 2.5. */
static void test_grid_padding_modes(void** state) {
  (void)state;
  const float img[4] = {10, 20, 30, 40};
  assert_true(grid_run(img, 4, 1.5f, BP_GRID_BILINEAR, BP_GRID_PAD_ZEROS, 0) == 0);
  assert_true(grid_run(img, 4, 1.5f, BP_GRID_BILINEAR, BP_GRID_PAD_BORDER, 0) == 40);
  assert_true(grid_run(img, 4, 1.5f, BP_GRID_BILINEAR, BP_GRID_PAD_REFLECTION, 0) == 35);
  /* 3.5 with zeros: half of the last pixel */
  assert_true(grid_run(img, 4, 1.0f, BP_GRID_BILINEAR, BP_GRID_PAD_ZEROS, 0) == 20);
  /* bicubic at a pixel centre returns the pixel */
  assert_true(grid_run(img, 4, 0.25f, BP_GRID_BICUBIC, BP_GRID_PAD_BORDER, 0) == 30);
}

/* ---- upsampling ------------------------------------------------------------------ */
static void upsample_row(bp_status_t (*fn)(bp_stream_t*, const bp_tensor_t*, const bp_upsample_attrs_t*,
                                           bp_tensor_t**),
                         const float* img, int64_t w, const bp_upsample_attrs_t* a, float* y,
                         int64_t wout) {
  bp_tensor_t* x = F32(img, 1, 1, 1, w);
  bp_tensor_t* out = NULL;
  assert_int_equal(fn(g_stream, x, a, &out), BP_OK);
  fx_track(out);
  bp_tensor_desc_t d = {.struct_size = sizeof(d)};
  assert_int_equal(bp_tensor_get_desc(out, &d), BP_OK);
  assert_int_equal(d.sizes[3], wout);
  read_raw(out, y, (uint64_t)wout * sizeof(float));
}

/* floor(dst * in/out); with scale factors, floor(dst / scale) and the
 * output size truncated from in * scale; both given (the non-.vec
 * overload): the size from output_size, indices from the scale. */
static void test_upsample_nearest_index(void** state) {
  (void)state;
  const float img[3] = {1, 2, 3};
  float y[9];
  bp_upsample_attrs_t a = {.struct_size = sizeof a, .output_size = {1, 5}, .has_output_size = 1};
  upsample_row(bp_op_upsample_nearest2d, img, 3, &a, y, 5);
  assert_floats(y, (float[]){1, 1, 2, 2, 3}, 5, 0);
  bp_upsample_attrs_t b = {.struct_size = sizeof b, .scale = {1.0, 3.0}, .has_scale = 1};
  upsample_row(bp_op_upsample_nearest2d, img, 3, &b, y, 9);
  assert_floats(y, (float[]){1, 1, 1, 2, 2, 2, 3, 3, 3}, 9, 0);
  bp_upsample_attrs_t c = {.struct_size = sizeof c, .output_size = {1, 5}, .scale = {1.0, 3.0},
                           .has_output_size = 1, .has_scale = 1};
  upsample_row(bp_op_upsample_nearest2d, img, 3, &c, y, 5);
  assert_floats(y, (float[]){1, 1, 1, 2, 2}, 5, 0);
}

/* align_corners maps the corners onto each other; without it, half-pixel
 * centres, clamped at 0 and at the last pixel. */
static void test_upsample_bilinear_align_corners(void** state) {
  (void)state;
  const float img[2] = {0, 10};
  float y[5];
  bp_upsample_attrs_t a = {.struct_size = sizeof a, .align_corners = 1, .output_size = {1, 5},
                           .has_output_size = 1};
  upsample_row(bp_op_upsample_bilinear2d, img, 2, &a, y, 5);
  assert_floats(y, (float[]){0, 2.5f, 5, 7.5f, 10}, 5, 0);
  a.align_corners = 0;
  upsample_row(bp_op_upsample_bilinear2d, img, 2, &a, y, 5);
  assert_floats(y, (float[]){0, 1, 5, 9, 10}, 5, 1e-5f);
}

/* ---- errors ----------------------------------------------------------------------- */
static void test_pool_errors(void** state) {
  (void)state;
  bp_tensor_t* x = F32(NULL, 1, 1, 4, 4);
  bp_tensor_t* out = NULL;
  bp_pool_attrs_t a = pool2d(3, 1, 2);
  assert_status(bp_op_avg_pool(g_stream, x, &a, &out), BP_INVALID_ARGUMENT,
                "attrs.padding[0] (h) = 2 must be in 0..kernel/2 = 1");
  a = pool2d(5, 1, 0);
  assert_status(bp_op_avg_pool(g_stream, x, &a, &out), BP_INVALID_ARGUMENT,
                "output size is too small");
  assert_status(bp_op_avg_pool(g_stream, x, NULL, &out), BP_INVALID_ARGUMENT,
                "attrs.spatial_dims = 0 must be 1, 2 or 3");
  a = pool2d(2, 2, 0);
  a.dilation[0] = 2;
  assert_status(bp_op_avg_pool(g_stream, x, &a, &out), BP_INVALID_ARGUMENT,
                "1 (avg_pool has no dilation)");
  a = pool2d(2, 2, 0);
  bp_tensor_t* xi = TT(I32, NULL, 1, 1, 4, 4);
  assert_status(bp_op_avg_pool(g_stream, xi, &a, &out), BP_INVALID_ARGUMENT,
                "expected a floating dtype or i64");
  bp_tensor_t* empty = F32(NULL, 1, 0, 4, 4);
  assert_status(bp_op_avg_pool(g_stream, empty, &a, &out), BP_INVALID_ARGUMENT,
                "expected non-zero sizes in every dim but the batch dim");
  bp_tensor_t* ind = NULL;
  a.spatial_dims = 1;
  assert_status(bp_op_max_pool_with_indices(g_stream, x, &a, &out, &ind), BP_INVALID_ARGUMENT,
                "must be 2 or 3");
  a = pool2d(2, 2, 0);
  bp_tensor_t* g = F32(NULL, 1, 1, 3, 2);
  assert_status(bp_op_avg_pool2d_backward(g_stream, g, x, &a, &out), BP_INVALID_ARGUMENT,
                "expected the forward output's shape [1, 1, 2, 2]");
  /* Optional values are explicit: a stride of 0 given is an error (it does
   * not mean "the kernel"), as is a value set without its flag. */
  a = pool2d(2, 0, 0);
  assert_status(bp_op_avg_pool(g_stream, x, &a, &out), BP_INVALID_ARGUMENT,
                "attrs.stride[0] = 0 must be > 0");
  a.has_stride = 0;
  a.stride[1] = 2;
  assert_status(bp_op_avg_pool(g_stream, x, &a, &out), BP_INVALID_ARGUMENT,
                "attrs.stride is set but attrs.has_stride is 0");
  a = pool2d(2, 2, 0);
  a.has_divisor_override = 1;
  assert_status(bp_op_avg_pool(g_stream, x, &a, &out), BP_INVALID_ARGUMENT,
                "attrs.divisor_override = 0 is given (has_divisor_override) but must not be zero");
  a.has_divisor_override = 0;
  a.divisor_override = 3;
  assert_status(bp_op_avg_pool(g_stream, x, &a, &out), BP_INVALID_ARGUMENT,
                "attrs.divisor_override is set but attrs.has_divisor_override is 0");
  a.has_stride = 2;
  assert_status(bp_op_avg_pool(g_stream, x, &a, &out), BP_INVALID_ARGUMENT,
                "attrs.has_stride = 2 must be 0 or 1");
  bp_adaptive_pool_attrs_t ad = {.struct_size = sizeof ad, .spatial_dims = 2, .output_size = {-1, 2}};
  assert_status(bp_op_adaptive_avg_pool(g_stream, x, &ad, &out), BP_INVALID_ARGUMENT,
                "attrs.output_size[0] (h) = -1 must be >= 0");
  assert_null(out);
}

static void test_sampling_errors(void** state) {
  (void)state;
  bp_tensor_t* x = F32(NULL, 2, 1, 4, 4);
  bp_tensor_t* out = NULL;
  bp_upsample_attrs_t u = {.struct_size = sizeof u};
  assert_status(bp_op_upsample_bilinear2d(g_stream, x, &u, &out), BP_INVALID_ARGUMENT,
                "give attrs.output_size (has_output_size) or attrs.scale (has_scale)");
  u.output_size[0] = u.output_size[1] = 8;
  assert_status(bp_op_upsample_bilinear2d(g_stream, x, &u, &out), BP_INVALID_ARGUMENT,
                "attrs.output_size is set but attrs.has_output_size is 0");
  u.has_output_size = 1;
  u.align_corners = 1;
  assert_status(bp_op_upsample_nearest2d(g_stream, x, &u, &out), BP_INVALID_ARGUMENT,
                "align_corners must be 0");
  bp_upsample_attrs_t s = {.struct_size = sizeof s, .scale = {0.1, 2.0}, .has_scale = 1};
  assert_status(bp_op_upsample_bilinear2d(g_stream, x, &s, &out), BP_INVALID_ARGUMENT,
                "gives an empty output");
  /* A scale given as 0 is an error, not "not given". */
  s.scale[0] = 0.0;
  assert_status(bp_op_upsample_bilinear2d(g_stream, x, &s, &out), BP_INVALID_ARGUMENT,
                "attrs.scale[0] = 0 must be finite and > 0");
  s.has_scale = 0;
  assert_status(bp_op_upsample_bilinear2d(g_stream, x, &s, &out), BP_INVALID_ARGUMENT,
                "attrs.scale is set but attrs.has_scale is 0");
  bp_tensor_t* grid = F32(NULL, 1, 3, 3, 2);
  bp_grid_sampler_attrs_t a = {sizeof a, BP_GRID_BILINEAR, BP_GRID_PAD_ZEROS, 0};
  assert_status(bp_op_grid_sampler_2d(g_stream, x, grid, &a, &out), BP_INVALID_ARGUMENT,
                "with input's batch size");
  bp_tensor_t* grid64 = TT(F64, NULL, 2, 3, 3, 2);
  assert_status(bp_op_grid_sampler_2d(g_stream, x, grid64, &a, &out), BP_INVALID_ARGUMENT,
                "(no promotion)");
  assert_null(out);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_teardown(test_avg_pool2d_ceil_and_divisors, fx_release_all),
      cmocka_unit_test_teardown(test_avg_pool1d_i64_truncates, fx_release_all),
      cmocka_unit_test_teardown(test_max_pool_nan_and_neg_inf, fx_release_all),
      cmocka_unit_test_teardown(test_max_pool_dilation_i32, fx_release_all),
      cmocka_unit_test_teardown(test_max_pool_backward_accumulates, fx_release_all),
      cmocka_unit_test_teardown(test_max_pool_backward_bad_index, fx_release_all),
      cmocka_unit_test_teardown(test_adaptive_avg_pool_windows, fx_release_all),
      cmocka_unit_test_teardown(test_grid_nearest_half_to_even, fx_release_all),
      cmocka_unit_test_teardown(test_grid_padding_modes, fx_release_all),
      cmocka_unit_test_teardown(test_upsample_nearest_index, fx_release_all),
      cmocka_unit_test_teardown(test_upsample_bilinear_align_corners, fx_release_all),
      cmocka_unit_test_teardown(test_pool_errors, fx_release_all),
      cmocka_unit_test_teardown(test_sampling_errors, fx_release_all),
  };
  return cmocka_run_group_tests(tests, fx_setup, fx_teardown);
}
