/* convolution, convolution_backward and col2im through the public API on
 * cpu:0: small cases with exactly known results (forward, transposed,
 * backward with partial output masks, f16, attributes left to their
 * defaults), and PyTorch's error cases with their messages. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
/* cmocka needs the four headers above first */
#include <cmocka.h>

#include <stdlib.h>
#include <string.h>

#include "backplane/backplane.h"

#include "cpu_fixture.h"

#define F32(data, ...) fx_tensor(BP_DTYPE_F32, (data), FX_N(__VA_ARGS__), (int64_t[]){__VA_ARGS__})
#define TT(dt, ...) fx_tensor(BP_DTYPE_##dt, NULL, FX_N(__VA_ARGS__), (int64_t[]){__VA_ARGS__})

static void read_f32(const bp_tensor_t* t, float* out, int64_t n) {
  assert_int_equal(bp_tensor_read(g_stream, t, out, (uint64_t)n * 4), BP_OK);
}

static void assert_floats(const float* got, const float* want, int64_t n) {
  for (int64_t i = 0; i < n; i++) {
    if (got[i] != want[i]) {
      print_error("element %lld: got %g, expected %g\n", (long long)i, got[i], want[i]);
      fail();
    }
  }
}

static bp_conv_attrs_t conv2d(int64_t stride, int64_t pad) {
  bp_conv_attrs_t a = {.struct_size = sizeof a, .spatial_dims = 2, .groups = 1, .output_mask = 7};
  for (int i = 0; i < BP_MAX_SPATIAL; i++) {
    a.stride[i] = stride;
    a.padding[i] = pad;
    a.dilation[i] = 1;
  }
  return a;
}

/* The call fails with `code` and a message containing `needle`. */
#define assert_status(expr, code, needle)                                                \
  do {                                                                                   \
    bp_status_t st_ = (expr);                                                            \
    if (st_ != (code) || strstr(bp_status_message(), (needle)) == NULL) {                \
      print_error("got %s \"%s\", expected %s containing \"%s\"\n", bp_status_name(st_), \
                  bp_status_message(), bp_status_name(code), (needle));                  \
      fail();                                                                            \
    }                                                                                    \
  } while (0)

/* ---- values -------------------------------------------------------------- */

/* 3x3 input 1..9, 2x2 kernel of ones, bias 0.5: window sums; then the same
 * with padding 1 and stride 2 (corners of the padded image). */
static void test_conv2d_window_sums(void** state) {
  (void)state;
  float x[9] = {1, 2, 3, 4, 5, 6, 7, 8, 9}, w[4] = {1, 1, 1, 1}, b[1] = {0.5f}, y[4];
  bp_tensor_t *tx = F32(x, 1, 1, 3, 3), *tw = F32(w, 1, 1, 2, 2), *tb = F32(b, 1);
  bp_conv_attrs_t a = conv2d(1, 0);
  bp_tensor_t* out = NULL;
  assert_int_equal(bp_op_convolution(g_stream, tx, tw, tb, &a, &out), BP_OK);
  fx_track(out);
  read_f32(out, y, 4);
  assert_floats(y, (float[]){12.5f, 16.5f, 24.5f, 28.5f}, 4);
  /* padded [5, 5] image, windows at (0, 0), (0, 2), (2, 0), (2, 2) */
  a = conv2d(2, 1);
  bp_tensor_t* out2 = NULL;
  assert_int_equal(bp_op_convolution(g_stream, tx, tw, NULL, &a, &out2), BP_OK);
  fx_track(out2);
  read_f32(out2, y, 4);
  assert_floats(y, (float[]){1, 5, 11, 28}, 4);
}

/* NULL attrs: spatial dims from the weight, stride 1, no padding. */
static void test_conv_default_attrs(void** state) {
  (void)state;
  float x[5] = {1, 2, 3, 4, 5}, w[2] = {1, -1}, y[4];
  bp_tensor_t* out = NULL;
  assert_int_equal(bp_op_convolution(g_stream, F32(x, 1, 1, 5), F32(w, 1, 1, 2), NULL, NULL, &out),
                   BP_OK);
  fx_track(out);
  bp_tensor_desc_t d = {.struct_size = sizeof d};
  bp_tensor_get_desc(out, &d);
  assert_int_equal(d.rank, 3);
  assert_int_equal(d.sizes[2], 4);
  read_f32(out, y, 4);
  assert_floats(y, (float[]){-1, -1, -1, -1}, 4);
}

/* Transposed 1-d: input [1, 2], kernel [1, 1, 1], stride 2 scatters each
 * input over three outputs: [1, 1, 1 + 2, 2, 2]; output_padding 1 appends a
 * position that no input reaches (plus the bias). */
static void test_conv_transposed_1d(void** state) {
  (void)state;
  float x[2] = {1, 2}, w[3] = {1, 1, 1}, b[1] = {10}, y[6];
  bp_conv_attrs_t a = {.struct_size = sizeof a,
                       .spatial_dims = 1,
                       .stride = {2},
                       .dilation = {1},
                       .groups = 1,
                       .transposed = 1};
  bp_tensor_t* out = NULL;
  assert_int_equal(bp_op_convolution(g_stream, F32(x, 1, 1, 2), F32(w, 1, 1, 3), NULL, &a, &out),
                   BP_OK);
  fx_track(out);
  read_f32(out, y, 5);
  assert_floats(y, (float[]){1, 1, 3, 2, 2}, 5);
  a.output_padding[0] = 1;
  bp_tensor_t* out2 = NULL;
  assert_int_equal(
      bp_op_convolution(g_stream, F32(x, 1, 1, 2), F32(w, 1, 1, 3), F32(b, 1), &a, &out2), BP_OK);
  fx_track(out2);
  read_f32(out2, y, 6);
  assert_floats(y, (float[]){11, 11, 13, 12, 12, 10}, 6);
}

/* Backward of the window-sum convolution with dY = 1: grad_input counts the
 * windows covering each pixel, grad_weight sums the window contents,
 * grad_bias counts the outputs. With output_mask = 2 only grad_weight is
 * computed; the others are [0]. */
static void test_conv_backward_masks(void** state) {
  (void)state;
  float x[9] = {1, 2, 3, 4, 5, 6, 7, 8, 9}, w[4] = {1, 1, 1, 1}, dy[4] = {1, 1, 1, 1};
  float gx[9], gw[4], gb[1];
  bp_tensor_t *tdy = F32(dy, 1, 1, 2, 2), *tx = F32(x, 1, 1, 3, 3), *tw = F32(w, 1, 1, 2, 2);
  bp_conv_attrs_t a = conv2d(1, 0);
  bp_tensor_t *o0 = NULL, *o1 = NULL, *o2 = NULL;
  assert_int_equal(bp_op_convolution_backward(g_stream, tdy, tx, tw, &a, &o0, &o1, &o2), BP_OK);
  fx_track(o0), fx_track(o1), fx_track(o2);
  read_f32(o0, gx, 9);
  read_f32(o1, gw, 4);
  read_f32(o2, gb, 1);
  assert_floats(gx, (float[]){1, 2, 1, 2, 4, 2, 1, 2, 1}, 9);
  assert_floats(gw, (float[]){12, 16, 24, 28}, 4);
  assert_floats(gb, (float[]){4}, 1);

  a.output_mask = 2;
  const bp_tensor_t* ins[3] = {tdy, tx, tw};
  bp_tensor_desc_t d[3];
  memset(d, 0, sizeof d);
  for (int k = 0; k < 3; k++) d[k].struct_size = sizeof d[k];
  bp_tensor_desc_t* dp[3] = {&d[0], &d[1], &d[2]};
  assert_int_equal(bp_op_infer(BP_OP_convolution_backward, ins, 3, &a, dp, 3), BP_OK);
  assert_int_equal(d[0].rank, 1);
  assert_int_equal(d[0].sizes[0], 0);
  assert_int_equal(d[1].rank, 4);
  assert_int_equal(d[2].sizes[0], 0);
  bp_tensor_t *p0 = NULL, *p1 = NULL, *p2 = NULL;
  assert_int_equal(bp_op_convolution_backward(g_stream, tdy, tx, tw, &a, &p0, &p1, &p2), BP_OK);
  fx_track(p0), fx_track(p1), fx_track(p2);
  memset(gw, 0, sizeof gw);
  read_f32(p1, gw, 4);
  assert_floats(gw, (float[]){12, 16, 24, 28}, 4);
}

/* f16 operands compute in f32 and round once: small integers are exact. */
static void test_conv_f16(void** state) {
  (void)state;
  float x[9] = {1, 2, 3, 4, 5, 6, 7, 8, 9}, w[4] = {1, 1, 1, 1}, y[4];
  bp_cast_attrs_t to_h = {.struct_size = sizeof to_h, .dtype = BP_DTYPE_F16};
  bp_cast_attrs_t to_f = {.struct_size = sizeof to_f, .dtype = BP_DTYPE_F32};
  bp_tensor_t *hx = NULL, *hw = NULL, *hy = NULL, *fy = NULL;
  assert_int_equal(bp_op_to_copy(g_stream, F32(x, 1, 1, 3, 3), &to_h, &hx), BP_OK);
  fx_track(hx);
  assert_int_equal(bp_op_to_copy(g_stream, F32(w, 1, 1, 2, 2), &to_h, &hw), BP_OK);
  fx_track(hw);
  bp_conv_attrs_t a = conv2d(1, 0);
  assert_int_equal(bp_op_convolution(g_stream, hx, hw, NULL, &a, &hy), BP_OK);
  fx_track(hy);
  assert_int_equal(bp_op_to_copy(g_stream, hy, &to_f, &fy), BP_OK);
  fx_track(fy);
  read_f32(fy, y, 4);
  assert_floats(y, (float[]){12, 16, 24, 28}, 4);
}

/* col2im of a [1, 4, 4] column matrix (kernel 2x2, 3x3 output, stride 1):
 * every column entry 1, so each output counts its covering blocks. */
static void test_col2im_counts(void** state) {
  (void)state;
  float c[16], y[9];
  for (int i = 0; i < 16; i++) c[i] = 1;
  bp_col2im_attrs_t a = {.struct_size = sizeof a,
                         .output_size = {3, 3},
                         .kernel = {2, 2},
                         .dilation = {1, 1},
                         .stride = {1, 1}};
  bp_tensor_t* out = NULL;
  assert_int_equal(bp_op_col2im(g_stream, F32(c, 1, 4, 4), &a, &out), BP_OK);
  fx_track(out);
  read_f32(out, y, 9);
  assert_floats(y, (float[]){1, 2, 1, 2, 4, 2, 1, 2, 1}, 9);
}

/* ---- errors (PyTorch's checks and messages) ------------------------------- */
static void test_conv_errors(void** state) {
  (void)state;
  bp_tensor_t* out = NULL;
  bp_conv_attrs_t a = conv2d(1, 0);
  bp_tensor_t *x = TT(F32, 1, 4, 5, 5), *w = TT(F32, 6, 2, 3, 3);
  /* channels: weight [6, 2] with groups 1 expects 2 input channels */
  assert_status(bp_op_convolution(g_stream, x, w, NULL, &a, &out), BP_INVALID_ARGUMENT,
                "expected input [1, 4, 5, 5] to have 2 channels, but got 4 channels instead");
  a.groups = 2; /* now valid */
  assert_int_equal(bp_op_convolution(g_stream, x, w, NULL, &a, &out), BP_OK);
  fx_track(out);
  out = NULL;
  a.groups = 4;
  assert_status(bp_op_convolution(g_stream, x, w, NULL, &a, &out), BP_INVALID_ARGUMENT,
                "expected weight to be divisible by 4 at dimension 0");
  a.groups = 8;
  assert_status(bp_op_convolution(g_stream, x, w, NULL, &a, &out), BP_INVALID_ARGUMENT,
                "expected weight to be at least 8 at dimension 0");
  a.groups = 0;
  assert_status(bp_op_convolution(g_stream, x, w, NULL, &a, &out), BP_INVALID_ARGUMENT,
                "non-positive groups is not supported");
  a = conv2d(1, 0);
  a.groups = 2;
  bp_tensor_t* small = TT(F32, 1, 4, 2, 5);
  assert_status(bp_op_convolution(g_stream, small, w, NULL, &a, &out), BP_INVALID_ARGUMENT,
                "calculated padded input size per channel: (2, 5). Kernel size: (3, 3). Kernel "
                "size can't be greater than actual input size");
  a.dilation[1] = 0;
  assert_status(bp_op_convolution(g_stream, x, w, NULL, &a, &out), BP_INVALID_ARGUMENT,
                "dilation should be greater than zero");
  a.dilation[1] = 1;
  a.stride[0] = 0;
  assert_status(bp_op_convolution(g_stream, x, w, NULL, &a, &out), BP_INVALID_ARGUMENT,
                "non-positive stride is not supported");
  a.stride[0] = 1;
  a.padding[0] = -1;
  assert_status(bp_op_convolution(g_stream, x, w, NULL, &a, &out), BP_INVALID_ARGUMENT,
                "negative padding is not supported");
  a.padding[0] = 0;
  a.spatial_dims = 1;
  assert_status(bp_op_convolution(g_stream, x, w, NULL, &a, &out), BP_INVALID_ARGUMENT,
                "attrs.spatial_dims = 1");
  a.spatial_dims = 2;
  /* aten.convolution needs the batch dim */
  assert_status(bp_op_convolution(g_stream, TT(F32, 4, 5, 5), w, NULL, &a, &out),
                BP_INVALID_ARGUMENT, "expected 4-dimensional input for 4-dimensional weight");
  assert_status(bp_op_convolution(g_stream, x, w, TT(F32, 5), &a, &out), BP_INVALID_ARGUMENT,
                "expected 'bias' to be 1-dimensional with 6 elements");
  assert_status(bp_op_convolution(g_stream, x, TT(F64, 6, 2, 3, 3), NULL, &a, &out),
                BP_INVALID_ARGUMENT, "input 'input' has dtype f32 and input 'weight' has f64");
  assert_status(
      bp_op_convolution(g_stream, TT(I32, 1, 4, 5, 5), TT(I32, 6, 2, 3, 3), NULL, &a, &out),
      BP_INVALID_ARGUMENT, "a floating dtype");
  assert_status(bp_op_convolution(g_stream, x, TT(F32, 6, 2, 0, 3), NULL, &a, &out),
                BP_INVALID_ARGUMENT, "kernel size should be greater than zero");
  /* empty inputs: only a zero batch (or zero channels with an empty output) */
  assert_status(bp_op_convolution(g_stream, TT(F32, 1, 4, 0, 5), w, NULL, &a, &out),
                BP_INVALID_ARGUMENT,
                "only zero batch or zero channel inputs are supported, but got input shape "
                "[1, 4, 0, 5]");
  assert_status(
      bp_op_convolution(g_stream, TT(F32, 1, 0, 5, 5), TT(F32, 6, 0, 3, 3), NULL, &a, &out),
      BP_INVALID_ARGUMENT, "has no channels");
  assert_int_equal(bp_op_convolution(g_stream, TT(F32, 0, 4, 5, 5), w, NULL, &a, &out), BP_OK);
  fx_track(out);
  out = NULL;
  /* huge attributes: overflow is an error, not a wrapped size */
  a.padding[0] = INT64_MAX / 2;
  assert_status(bp_op_convolution(g_stream, x, w, NULL, &a, &out), BP_INVALID_ARGUMENT, "overflow");
}

static void test_conv_transposed_errors(void** state) {
  (void)state;
  bp_tensor_t* out = NULL;
  bp_conv_attrs_t a = conv2d(2, 0);
  a.transposed = 1;
  bp_tensor_t *x = TT(F32, 1, 4, 3, 3), *w = TT(F32, 4, 2, 3, 3);
  a.output_padding[0] = 2; /* >= stride 2 and >= dilation 1 */
  assert_status(bp_op_convolution(g_stream, x, w, NULL, &a, &out), BP_INVALID_ARGUMENT,
                "output padding must be smaller than either stride or dilation");
  a.output_padding[0] = 1;
  a.padding[0] = 4; /* (3 - 1) * 2 - 8 + 3 + 1 = 0 */
  assert_status(bp_op_convolution(g_stream, x, w, NULL, &a, &out), BP_INVALID_ARGUMENT,
                "Output size is too small");
  a.padding[0] = 0;
  assert_status(bp_op_convolution(g_stream, TT(F32, 1, 3, 3, 3), w, NULL, &a, &out),
                BP_INVALID_ARGUMENT, "transposed=1, weight of size [4, 2, 3, 3], expected input");
  /* bias of a transposed convolution has weight.size(1) * groups entries */
  a.groups = 2;
  assert_int_equal(bp_op_convolution(g_stream, x, w, TT(F32, 4), &a, &out), BP_OK);
  fx_track(out);
  out = NULL;
  assert_status(bp_op_convolution(g_stream, x, w, TT(F32, 2), &a, &out), BP_INVALID_ARGUMENT,
                "with 4 elements");
}

static void test_conv_backward_errors(void** state) {
  (void)state;
  bp_tensor_t *o0 = NULL, *o1 = NULL, *o2 = NULL;
  bp_conv_attrs_t a = conv2d(1, 0);
  bp_tensor_t *x = TT(F32, 2, 3, 6, 6), *w = TT(F32, 4, 3, 3, 3);
  assert_status(
      bp_op_convolution_backward(g_stream, TT(F32, 2, 4, 5, 4), x, w, &a, &o0, &o1, &o2),
      BP_INVALID_ARGUMENT,
      "'grad_output' has shape [2, 4, 5, 4]; the convolution's output has shape [2, 4, 4, 4]");
  assert_status(bp_op_convolution_backward(g_stream, TT(F64, 2, 4, 4, 4), x, w, &a, &o0, &o1, &o2),
                BP_INVALID_ARGUMENT, "they must be the same");
  a.output_mask = 8;
  assert_status(bp_op_convolution_backward(g_stream, TT(F32, 2, 4, 4, 4), x, w, &a, &o0, &o1, &o2),
                BP_INVALID_ARGUMENT, "attrs.output_mask = 8");
}

static void test_col2im_errors(void** state) {
  (void)state;
  bp_tensor_t* out = NULL;
  bp_col2im_attrs_t a = {.struct_size = sizeof a,
                         .output_size = {3, 3},
                         .kernel = {2, 2},
                         .dilation = {1, 1},
                         .stride = {1, 1}};
  assert_status(bp_op_col2im(g_stream, TT(F32, 1, 6, 4), &a, &out), BP_INVALID_ARGUMENT,
                "to be divisible by the product of kernel_size, but got input.size(1)=6");
  assert_status(bp_op_col2im(g_stream, TT(F32, 1, 8, 5), &a, &out), BP_INVALID_ARGUMENT,
                "calculated number of sliding blocks 2 * 2 = 4, but got input.size(2)=5");
  assert_status(bp_op_col2im(g_stream, TT(F32, 1, 0, 4), &a, &out), BP_INVALID_ARGUMENT,
                "non-zero other dims");
  assert_status(bp_op_col2im(g_stream, TT(F32, 2, 8, 4, 1), &a, &out), BP_INVALID_ARGUMENT,
                "expected a 2-d or 3-d (batch mode) input");
  a.kernel[1] = 0;
  assert_status(bp_op_col2im(g_stream, TT(F32, 1, 8, 4), &a, &out), BP_INVALID_ARGUMENT,
                "kernel size should be greater than zero");
  a.kernel[1] = 2;
  a.stride[0] = -1;
  assert_status(bp_op_col2im(g_stream, TT(F32, 1, 8, 4), &a, &out), BP_INVALID_ARGUMENT,
                "stride should be greater than zero");
  a.stride[0] = 1;
  a.output_size[0] = 1; /* no 2-row block fits in 1 row */
  assert_status(bp_op_col2im(g_stream, TT(F32, 1, 8, 4), &a, &out), BP_INVALID_ARGUMENT,
                "sliding blocks");
  a.output_size[0] = 3;
  /* unbatched input: [C, oh, ow] */
  assert_int_equal(bp_op_col2im(g_stream, TT(F32, 8, 4), &a, &out), BP_OK);
  fx_track(out);
  bp_tensor_desc_t d = {.struct_size = sizeof d};
  bp_tensor_get_desc(out, &d);
  assert_int_equal(d.rank, 3);
  assert_int_equal(d.sizes[0], 2);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_teardown(test_conv2d_window_sums, fx_release_all),
      cmocka_unit_test_teardown(test_conv_default_attrs, fx_release_all),
      cmocka_unit_test_teardown(test_conv_transposed_1d, fx_release_all),
      cmocka_unit_test_teardown(test_conv_backward_masks, fx_release_all),
      cmocka_unit_test_teardown(test_conv_f16, fx_release_all),
      cmocka_unit_test_teardown(test_col2im_counts, fx_release_all),
      cmocka_unit_test_teardown(test_conv_errors, fx_release_all),
      cmocka_unit_test_teardown(test_conv_transposed_errors, fx_release_all),
      cmocka_unit_test_teardown(test_conv_backward_errors, fx_release_all),
      cmocka_unit_test_teardown(test_col2im_errors, fx_release_all),
  };
  return cmocka_run_group_tests(tests, fx_setup, fx_teardown);
}
