/* The graph IR: builder, text format (exact round trip, errors with
 * line:column), inference and verification (errors name node and operand). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "backplane/graph.h"

static const char* k_mlp =
    "graph mlp\n"
    "sym B\n"
    "input x : f32[B, 4]\n"
    "const w : f32[4, 3] = uniform(seed=7, lo=-0.5, hi=0.5)\n"
    "const b : f32[3] = values(0.5, -1.25, 3.0)\n"
    "h = mm(x, w) @fc\n"
    "hb = add(h, b) {alpha=2.0}\n"
    "%5 = relu(hb)\n"
    "m, i = max_dim(%5) {num_dims=1, dims=[1]}\n"
    "output %5, m, i\n";

static void test_round_trip(void** state) {
  (void)state;
  bp_graph_t* g = NULL;
  assert_int_equal(bp_graph_parse(k_mlp, strlen(k_mlp), &g), BP_OK);
  char* text = NULL;
  size_t n = 0;
  assert_int_equal(bp_graph_print(g, &text, &n), BP_OK);
  assert_string_equal(text, k_mlp);
  assert_int_equal(n, strlen(k_mlp));
  /* Inferred: mm of [B,4] x [4,3] is [B,3] with B kept symbolic. */
  uint32_t v;
  assert_int_equal(bp_graph_find_value(g, "hb", &v), BP_OK);
  bp_graph_value_info_t info = {.struct_size = sizeof(info)};
  assert_int_equal(bp_graph_value_info(g, v, &info), BP_OK);
  assert_int_equal(info.dtype, BP_DTYPE_F32);
  assert_int_equal(info.rank, 2);
  assert_true(BP_GRAPH_IS_SYM(info.dims[0]));
  assert_int_equal(info.dims[1], 3);
  assert_int_equal(bp_graph_find_value(g, "i", &v), BP_OK);
  assert_int_equal(bp_graph_value_info(g, v, &info), BP_OK);
  assert_int_equal(info.dtype, BP_DTYPE_I64);
  bp_graph_text_free(text);
  bp_graph_release(g);
}

static void test_builder_prints_like_text(void** state) {
  (void)state;
  bp_graph_t* g = NULL;
  assert_int_equal(bp_graph_create("t", &g), BP_OK);
  int64_t dims[2] = {2, 3};
  uint32_t x, y, z;
  assert_int_equal(bp_graph_add_input(g, "x", BP_DTYPE_F32, 2, dims, &x), BP_OK);
  bp_gelu_attrs_t ga = {.struct_size = sizeof(ga), .approximate = BP_GELU_TANH};
  assert_int_equal(bp_graph_add_node(g, BP_OP_gelu, &x, 1, &ga, "act", &y, 1), BP_OK);
  uint32_t ins[2] = {x, y};
  assert_int_equal(bp_graph_add_node(g, BP_OP_mul, ins, 2, NULL, NULL, &z, 1), BP_OK);
  assert_int_equal(bp_graph_add_output(g, z), BP_OK);
  assert_int_equal(bp_graph_infer(g), BP_OK);
  char* text = NULL;
  assert_int_equal(bp_graph_print(g, &text, NULL), BP_OK);
  assert_string_equal(text, "graph t\ninput x : f32[2, 3]\n%1 = gelu(x) {approximate=1} @act\n%2 = mul(x, %1)\noutput %2\n");
  bp_graph_t* g2 = NULL;
  assert_int_equal(bp_graph_parse(text, strlen(text), &g2), BP_OK);
  char* text2 = NULL;
  assert_int_equal(bp_graph_print(g2, &text2, NULL), BP_OK);
  assert_string_equal(text, text2);
  bp_graph_text_free(text);
  bp_graph_text_free(text2);
  bp_graph_release(g);
  bp_graph_release(g2);
}

static void expect_parse_error(const char* text, const char* fragment) {
  bp_graph_t* g = NULL;
  bp_status_t st = bp_graph_parse(text, strlen(text), &g);
  assert_int_not_equal(st, BP_OK);
  assert_null(g);
  if (strstr(bp_status_message(), fragment) == NULL) {
    fail_msg("message '%s' lacks '%s'", bp_status_message(), fragment);
  }
}

static void test_syntax_errors_have_line_and_column(void** state) {
  (void)state;
  expect_parse_error("input x : f32[2]\ny = nosuchop(x)\n", "2:5: unknown op 'nosuchop'");
  expect_parse_error("input x : f33[2]\n", "1:11: 'f33' is not a dtype");
  expect_parse_error("input x : f32[2\n", "1:16: expected ','");
  expect_parse_error("input x : f32[B]\n", "1:15: 'B' is not a declared symbol");
  expect_parse_error("input x : f32[2]\ny = relu(q)\n", "2:10: unknown value 'q'");
  expect_parse_error("input x : f32[2]\ny = gelu(x) {approx=1}\n", "2:14: op 'gelu' has no attribute 'approx'");
  expect_parse_error("input x : f32[2]\ny = relu(x) junk\n", "2:13: unexpected text");
  expect_parse_error("const c : f32[3] = values(1, 2)\n", "1:7: c has 3 elements");
  expect_parse_error("input x : f32[2]\nx = relu(x)\n", "already defined");
  /* values() is for the dtypes the printer writes that way; a 16-byte
   * element is not read from an 8-byte integer. */
  expect_parse_error("const k : c128[2] = values(-7, 9)\n", "1:7: values() takes f32, f64, i8, i16, i32, i64, u8 or bool; k is c128, use bytes()");
  expect_parse_error("const k : f16[1] = values(1)\n", "k is f16, use bytes()");
  /* Shapes whose concrete dims alone overflow; a large shape with few values. */
  expect_parse_error("input x : f32[4611686018427387904, 2]\n", "dim 0 (4611686018427387904): the shape holds more than 2^63 bytes");
  expect_parse_error("sym B\ninput x : f32[B, 1152921504606846976, 8]\n", "dim 2 (8): the shape holds more than 2^63 bytes");
  expect_parse_error("const c : f32[100000000] = values(1, 2)\n", "c has 100000000 elements, values() gave 2");
}

static void test_verify_names_node_and_operand(void** state) {
  (void)state;
  /* mm of [2,3] x [4,5]: the core's rule refuses; the message names the node and the op. */
  expect_parse_error("input a : f32[2, 3]\ninput b : f32[4, 5]\nc = mm(a, b) @proj\noutput c\n",
                     "3:1: node 'proj' (#0, mm): ");
  /* Wrong operand count. */
  expect_parse_error("input a : f32[2]\nc = add(a)\n", "node #0 (add): op 'add' takes 2 inputs, got 1");
  /* A required operand absent. */
  expect_parse_error("input a : f32[2]\nc = add(a, _)\n", "2:1: node #0 (add): op 'add': input 'other' is NULL");
  /* Builder: an input that does not exist. */
  bp_graph_t* g = NULL;
  assert_int_equal(bp_graph_create(NULL, &g), BP_OK);
  uint32_t bad = 42, out;
  assert_int_equal(bp_graph_add_node(g, BP_OP_relu, &bad, 1, NULL, NULL, &out, 1), BP_INVALID_ARGUMENT);
  assert_non_null(strstr(bp_status_message(), "value 42"));
  assert_int_equal(bp_graph_add_node(g, 9999, NULL, 0, NULL, NULL, &out, 1), BP_INVALID_ARGUMENT);
  assert_int_equal(bp_graph_add_input(g, "1x", BP_DTYPE_F32, 0, NULL, &out), BP_INVALID_ARGUMENT);
  assert_int_equal(bp_graph_add_input(g, "x", 0, 0, NULL, &out), BP_INVALID_ARGUMENT);
  int64_t huge[1] = {3};
  assert_int_equal(bp_graph_add_constant(g, "c", BP_DTYPE_F32, 1, huge, "abcd", 4, &out), BP_INVALID_ARGUMENT);
  bp_graph_release(g);
}

static void test_garbage_never_crashes(void** state) {
  (void)state;
  /* Every prefix of a valid file: parses or fails with a message, never crashes. */
  size_t n = strlen(k_mlp);
  for (size_t i = 0; i <= n; ++i) {
    bp_graph_t* g = NULL;
    bp_status_t st = bp_graph_parse(k_mlp, i, &g);
    if (st == BP_OK) bp_graph_release(g);
    else assert_true(bp_status_message()[0] != '\0');
  }
  const char nul[] = "input x : f32[2]\0\n";
  bp_graph_t* g = NULL;
  assert_int_equal(bp_graph_parse(nul, sizeof(nul) - 1, &g), BP_INVALID_ARGUMENT);
}

static bp_tensor_desc_t desc(uint32_t dtype, uint32_t rank, const int64_t* sizes) {
  bp_tensor_desc_t d;
  memset(&d, 0, sizeof(d));
  d.struct_size = sizeof(d);
  d.dtype = dtype;
  d.rank = rank;
  int64_t stride = 1;
  for (uint32_t i = rank; i-- > 0;) {
    d.sizes[i] = sizes[i];
    d.strides[i] = stride;
    stride *= sizes[i];
  }
  return d;
}

/* The core's descriptor-based inference (what the compiler infers with). */
static void test_op_infer_desc(void** state) {
  (void)state;
  int64_t a_sz[2] = {2, 1}, b_sz[1] = {3};
  bp_tensor_desc_t a = desc(BP_DTYPE_F32, 2, a_sz), b = desc(BP_DTYPE_I64, 1, b_sz);
  const bp_tensor_desc_t* in[2] = {&a, &b};
  bp_tensor_desc_t out;
  memset(&out, 0, sizeof(out));
  out.struct_size = sizeof(out);
  bp_tensor_desc_t* outs[1] = {&out};
  assert_int_equal(bp_op_infer_desc(BP_OP_add, in, 2, NULL, outs, 1), BP_OK);
  assert_int_equal(out.dtype, BP_DTYPE_F32);
  assert_int_equal(out.rank, 2);
  assert_int_equal(out.sizes[0], 2);
  assert_int_equal(out.sizes[1], 3);
  /* clamp_tensor's optional bounds: absent as NULL or as dtype INVALID. */
  bp_tensor_desc_t none;
  memset(&none, 0, sizeof(none));
  none.struct_size = sizeof(none);
  const bp_tensor_desc_t* cin[3] = {&a, NULL, &a};
  memset(&out, 0, sizeof(out));
  out.struct_size = sizeof(out);
  assert_int_equal(bp_op_infer_desc(BP_OP_clamp_tensor, cin, 3, NULL, outs, 1), BP_OK);
  cin[1] = &none;
  assert_int_equal(bp_op_infer_desc(BP_OP_clamp_tensor, cin, 3, NULL, outs, 1), BP_OK);
  cin[2] = &none; /* both bounds absent: the op's own rule refuses */
  assert_int_equal(bp_op_infer_desc(BP_OP_clamp_tensor, cin, 3, NULL, outs, 1), BP_INVALID_ARGUMENT);
  /* Errors: shapes that do not broadcast, NULL arrays, a bad descriptor. */
  int64_t c_sz[1] = {4};
  bp_tensor_desc_t c = desc(BP_DTYPE_F32, 1, c_sz);
  const bp_tensor_desc_t* bad[2] = {&b, &c};
  memset(&out, 0, sizeof(out));
  out.struct_size = sizeof(out);
  assert_int_equal(bp_op_infer_desc(BP_OP_add, bad, 2, NULL, outs, 1), BP_INVALID_ARGUMENT);
  assert_int_equal(bp_op_infer_desc(BP_OP_add, NULL, 2, NULL, outs, 1), BP_INVALID_ARGUMENT);
  c.struct_size = 8;
  assert_int_equal(bp_op_infer_desc(BP_OP_add, bad, 2, NULL, outs, 1), BP_INVALID_ARGUMENT);
  assert_non_null(strstr(bp_status_message(), "not a valid descriptor"));
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_round_trip),
      cmocka_unit_test(test_builder_prints_like_text),
      cmocka_unit_test(test_syntax_errors_have_line_and_column),
      cmocka_unit_test(test_verify_names_node_and_operand),
      cmocka_unit_test(test_garbage_never_crashes),
      cmocka_unit_test(test_op_infer_desc),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
