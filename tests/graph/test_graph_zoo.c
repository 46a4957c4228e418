/* The zoo: graphs compiled and run against the same graphs run eagerly on
 * cpu:0, within the conformance suite's elementwise tolerances (f32: 1e-4
 * relative + 1e-5 absolute; integers exact): an MLP, a transformer block
 * with attention, a ResNet basic block, a data-dependent shape (nonzero),
 * each on one device and across two (BP_CPU_DEVICES=2, a memory limit that
 * forces the spread). The op only one device runs and the graph over one
 * device's memory limit are in test_graph_place and test_graph_passes. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "backplane/graph.h"
#include "graph_fixture.h"

/* Compiles `g` with the options, runs it on random inputs (symbols bound by
 * `syms`), compares every output with eager. Returns the stats. */
static bp_graph_exec_stats_t check(const bp_graph_t* g, bp_graph_compile_options_t* o, const int64_t* syms) {
  o->symbol_values = syms;
  o->num_symbol_values = bp_graph_symbol_count(g);
  bp_graph_exec_t* x = NULL;
  if (bp_graph_compile(g_ctx, g, o, &x) != BP_OK) fail_msg("compile: %s", bp_status_message());
  uint32_t ni = bp_graph_input_count(g), no = bp_graph_output_count(g);
  bp_tensor_t *in[8] = {0}, *out[8] = {0}, *ref[8] = {0};
  for (uint32_t i = 0; i < ni; ++i) {
    uint32_t v;
    assert_int_equal(bp_graph_input(g, i, &v), BP_OK);
    bp_graph_value_info_t vi = {.struct_size = sizeof(vi)};
    assert_int_equal(bp_graph_value_info(g, v, &vi), BP_OK);
    int64_t dims[BP_MAX_RANK], n = 1;
    for (uint32_t k = 0; k < vi.rank; ++k) {
      dims[k] = BP_GRAPH_IS_SYM(vi.dims[k]) ? syms[BP_GRAPH_SYM_INDEX(vi.dims[k])] : vi.dims[k];
      n *= dims[k];
    }
    assert_int_equal(vi.dtype, BP_DTYPE_F32);
    float* data = malloc(sizeof(float) * (size_t)n + 4);
    for (int64_t k = 0; k < n; ++k) data[k] = (float)(((k * 2654435761u + i) >> 7) % 2001) / 1000.0f - 1.0f;
    assert_int_equal(bp_tensor_create(g_cpu0, vi.dtype, vi.rank, dims, &in[i]), BP_OK);
    assert_int_equal(bp_tensor_write(g_s0, in[i], data, sizeof(float) * (uint64_t)n), BP_OK);
    free(data);
  }
  /* Twice: the second run reuses everything the first one set up. */
  for (int run = 0; run < 2; ++run) {
    for (uint32_t k = 0; k < no; ++k) bp_tensor_release(out[k]);
    if (bp_graph_exec_run(x, (const bp_tensor_t* const*)in, ni, out, no) != BP_OK) fail_msg("run: %s", bp_status_message());
  }
  if (bp_graph_run_eager(g_s0, g, (const bp_tensor_t* const*)in, ni, ref, no) != BP_OK) fail_msg("eager: %s", bp_status_message());
  for (uint32_t k = 0; k < no; ++k) {
    assert_int_equal(bp_tensor_dtype(out[k]), bp_tensor_dtype(ref[k]));
    assert_int_equal(bp_tensor_numel(out[k]), bp_tensor_numel(ref[k]));
    double* a = fx_host(out[k]);
    double* b = fx_host(ref[k]);
    int exact = bp_tensor_dtype(out[k]) != BP_DTYPE_F32;
    for (int64_t i = 0; i < bp_tensor_numel(out[k]); ++i) {
      double tol = exact ? 0 : 1e-5 + 1e-4 * fabs(b[i]);
      if (!(fabs(a[i] - b[i]) <= tol)) fail_msg("output %u element %lld: %.9g, eager %.9g", k, (long long)i, a[i], b[i]);
    }
    free(a);
    free(b);
  }
  bp_graph_exec_stats_t s = {.struct_size = sizeof(s)};
  assert_int_equal(bp_graph_exec_get_stats(x, &s), BP_OK);
  for (uint32_t k = 0; k < no; ++k) {
    bp_tensor_release(out[k]);
    bp_tensor_release(ref[k]);
  }
  for (uint32_t i = 0; i < ni; ++i) bp_tensor_release(in[i]);
  bp_graph_exec_release(x);
  return s;
}

static bp_graph_compile_options_t one(void) {
  static bp_device_t* d[1];
  d[0] = g_cpu0;
  return fx_opts(d, 1);
}

static bp_graph_compile_options_t two(uint64_t limit) {
  static bp_device_t* d[2];
  d[0] = g_cpu0;
  d[1] = g_cpu1;
  bp_graph_compile_options_t o = fx_opts(d, 2);
  o.memory_limit_bytes = limit;
  return o;
}

static bp_graph_t* load(const char* name) {
  char path[1024];
  snprintf(path, sizeof(path), "%s/examples/graphs/%s", BP_SOURCE_DIR, name);
  bp_graph_t* g = NULL;
  if (bp_graph_load_file(path, &g) != BP_OK) fail_msg("%s", bp_status_message());
  return g;
}

static void test_mlp(void** state) {
  (void)state;
  bp_graph_t* g = load("mlp.bpg");
  int64_t b = 8;
  bp_graph_compile_options_t o = one();
  check(g, &o, &b);
  o = two(40 * 1024); /* w1 (32 KiB) and fc1's output fill cpu:0: the rest goes to cpu:1 */
  o.flags = BP_GRAPH_NO_ISLANDS;
  bp_graph_exec_stats_t s = check(g, &o, &b);
  assert_int_equal(s.num_devices, 2);
  assert_true(s.num_copies >= 1);
  bp_graph_release(g);
}

static void test_transformer_block(void** state) {
  (void)state;
  bp_graph_t* g = load("transformer_block.bpg");
  int64_t s = 16;
  bp_graph_compile_options_t o = one();
  bp_graph_exec_stats_t st = check(g, &o, &s);
  /* q/k/v (horizontal), add + layer_norm, linear + gelu (fused ops), linear + add (an epilogue region) */
  assert_int_equal(st.num_regions, 4);
  assert_true(st.peak_bytes < st.unplanned_bytes);
  o = two(2560 * 1024); /* the attention weights and w1 (2 MiB) fit cpu:0, w2 (1 MiB more) does not */
  o.flags = BP_GRAPH_NO_ISLANDS;
  st = check(g, &o, &s);
  assert_int_equal(st.num_devices, 2);
  bp_graph_release(g);
}

static void test_resnet_block(void** state) {
  (void)state;
  bp_graph_t* g = load("resnet_block.bpg");
  int64_t n = 2;
  bp_graph_compile_options_t o = one();
  check(g, &o, &n);
  o = two(80000); /* both blocks weights and buffers do not fit one device: the second half goes to cpu:1 */
  o.flags = BP_GRAPH_NO_ISLANDS;
  bp_graph_exec_stats_t st = check(g, &o, &n);
  assert_int_equal(st.num_devices, 2);
  bp_graph_release(g);
}

static void test_data_dependent_shape(void** state) {
  (void)state;
  /* nonzero's output shape does not depend on the data (a [numel, rank]
   * buffer and a count), so the graph compiles like any other. */
  const char* text =
      "input x : f32[6, 5]\n"
      "p = gt(x, _) {flags=1, scalar=0.0}\n"
      "idx, count = nonzero(p) @nz\n"
      "q = relu(x)\n"
      "output idx, count, q\n";
  bp_graph_t* g = fx_parse(text);
  bp_graph_compile_options_t o = one();
  check(g, &o, NULL);
  o = two(0);
  bp_graph_pin_t pin = {"nz", g_cpu1};
  o.pins = &pin;
  o.num_pins = 1;
  bp_graph_exec_stats_t st = check(g, &o, NULL);
  assert_int_equal(st.num_devices, 2); /* nonzero pinned to cpu:1, relu on cpu:0 */
  bp_graph_release(g);
}

static int report_has(const bp_graph_t* g, bp_graph_compile_options_t* o, const int64_t* syms, const char* what) {
  o->symbol_values = syms;
  o->num_symbol_values = bp_graph_symbol_count(g);
  bp_graph_exec_t* x = NULL;
  if (bp_graph_compile(g_ctx, g, o, &x) != BP_OK) fail_msg("compile: %s", bp_status_message());
  char* json = NULL;
  assert_int_equal(bp_graph_exec_report(x, BP_GRAPH_REPORT_JSON, &json), BP_OK);
  int has = strstr(json, what) != NULL;
  bp_graph_text_free(json);
  bp_graph_exec_release(x);
  return has;
}

/* Decomposed attention (the key's transpose is a view node): fused into
 * scaled_dot_product_attention, equal to the unfused graph run eagerly;
 * with an additive mask, over rank-4 [batch, heads, seq, dim] values
 * viewed around the bmms (4-d or 3-d scores), and with a constant causal
 * mask (is_causal). */
static void test_decomposed_attention(void** state) {
  (void)state;
  static const char* const texts[] = {
      "input q : f32[4, 24, 16]\n"
      "input k : f32[4, 24, 16]\n"
      "input v : f32[4, 24, 16]\n"
      "kt = permute(k) {dims=[0, 2, 1]}\n"
      "s = bmm(q, kt)\n"
      "s2 = mul(s, _) {flags=1, scalar=0.25}\n"
      "p = softmax(s2) {dim=-1}\n"
      "o = bmm(p, v)\n"
      "output o\n",
      "input q : f32[4, 24, 16]\n"
      "input k : f32[4, 24, 16]\n"
      "input v : f32[4, 24, 16]\n"
      "input m : f32[24, 24]\n"
      "kt = permute(k) {dims=[0, 2, 1]}\n"
      "s = bmm(q, kt)\n"
      "s2 = div(s, _) {flags=1, scalar=4.0}\n"
      "s3 = add(s2, m)\n"
      "p = softmax(s3) {dim=-1}\n"
      "o = bmm(p, v)\n"
      "output o\n",
      /* rank 4 [batch, heads, seq, dim]: views around the bmms, the scores
       * scaled, masked and normalized in 4-d */
      "input q : f32[2, 3, 12, 8]\n"
      "input k : f32[2, 3, 20, 8]\n"
      "input v : f32[2, 3, 20, 16]\n"
      "input m : f32[1, 1, 12, 20]\n"
      "q3 = view(q) {sizes=[6, 12, 8]}\n"
      "k3 = view(k) {sizes=[6, 20, 8]}\n"
      "v3 = view(v) {sizes=[6, 20, 16]}\n"
      "kt = permute(k3) {dims=[0, 2, 1]}\n"
      "s = bmm(q3, kt)\n"
      "s4 = view(s) {sizes=[2, 3, 12, 20]}\n"
      "s2 = mul(s4, _) {flags=1, scalar=0.35355339059327373}\n"
      "s3 = add(s2, m)\n"
      "p4 = softmax(s3) {dim=-1}\n"
      "p = view(p4) {sizes=[6, 12, 20]}\n"
      "o3 = bmm(p, v3)\n"
      "o = view(o3) {sizes=[2, 3, 12, 16]}\n"
      "output o\n",
      /* rank 4 with 3-d scores, no scale, no mask */
      "input q : f32[2, 3, 12, 8]\n"
      "input k : f32[2, 3, 12, 8]\n"
      "input v : f32[2, 3, 12, 8]\n"
      "q3 = view(q) {sizes=[6, 12, 8]}\n"
      "k3 = view(k) {sizes=[6, 12, 8]}\n"
      "v3 = view(v) {sizes=[6, 12, 8]}\n"
      "kt = permute(k3) {dims=[0, 2, 1]}\n"
      "s = bmm(q3, kt)\n"
      "p = softmax(s) {dim=2}\n"
      "o3 = bmm(p, v3)\n"
      "o = view(o3) {sizes=[2, 3, 12, 8]}\n"
      "output o\n",
  };
  for (int i = 0; i < 4; ++i) {
    bp_graph_t* g = fx_parse(texts[i]);
    bp_graph_compile_options_t o = one();
    check(g, &o, NULL);
    assert_true(report_has(g, &o, NULL, "scaled_dot_product_attention"));
    o.flags = BP_GRAPH_NO_FUSE;
    assert_false(report_has(g, &o, NULL, "scaled_dot_product_attention"));
    bp_graph_release(g);
  }
  /* A constant causal mask: is_causal, no mask operand. */
  enum { L = 6 };
  float mask[L * L];
  for (int i = 0; i < L; ++i) {
    for (int j = 0; j < L; ++j) mask[i * L + j] = j <= i ? 0.0f : -INFINITY;
  }
  bp_graph_t* g = NULL;
  assert_int_equal(bp_graph_create("causal", &g), BP_OK);
  uint32_t q, k, v, m, kt, s, s2, s3, p, out;
  int64_t dims[3] = {2, L, 8};
  assert_int_equal(bp_graph_add_input(g, "q", BP_DTYPE_F32, 3, dims, &q), BP_OK);
  assert_int_equal(bp_graph_add_input(g, "k", BP_DTYPE_F32, 3, dims, &k), BP_OK);
  assert_int_equal(bp_graph_add_input(g, "v", BP_DTYPE_F32, 3, dims, &v), BP_OK);
  assert_int_equal(bp_graph_add_constant(g, "mask", BP_DTYPE_F32, 2, (const int64_t[]){L, L}, mask, sizeof(mask), &m), BP_OK);
  bp_graph_view_params_t tp = {.struct_size = sizeof(tp), .rank = 3, .sizes = {0, 2, 1}};
  assert_int_equal(bp_graph_add_view(g, BP_VIEW_permute, k, &tp, NULL, &kt), BP_OK);
  assert_int_equal(bp_graph_add_node(g, BP_OP_bmm, (const uint32_t[]){q, kt}, 2, NULL, NULL, &s, 1), BP_OK);
  bp_binary_attrs_t sc = {.struct_size = sizeof(sc), .flags = BP_BINARY_OTHER_IS_SCALAR};
  sc.scalar.kind = BP_SCALAR_FLOAT;
  sc.scalar.v.f = 0.35355339059327373;
  assert_int_equal(bp_graph_add_node(g, BP_OP_mul, (const uint32_t[]){s, BP_GRAPH_NO_VALUE}, 2, &sc, NULL, &s2, 1), BP_OK);
  assert_int_equal(bp_graph_add_node(g, BP_OP_add, (const uint32_t[]){s2, m}, 2, NULL, NULL, &s3, 1), BP_OK);
  bp_softmax_attrs_t sa = {.struct_size = sizeof(sa), .dim = -1};
  assert_int_equal(bp_graph_add_node(g, BP_OP_softmax, &s3, 1, &sa, NULL, &p, 1), BP_OK);
  assert_int_equal(bp_graph_add_node(g, BP_OP_bmm, (const uint32_t[]){p, v}, 2, NULL, NULL, &out, 1), BP_OK);
  assert_int_equal(bp_graph_add_output(g, out), BP_OK);
  assert_int_equal(bp_graph_infer(g), BP_OK);
  bp_graph_compile_options_t o = one();
  check(g, &o, NULL);
  assert_true(report_has(g, &o, NULL, "scaled_dot_product_attention {is_causal=1}"));
  bp_graph_release(g);
}

/* Linears sharing their input with constant weights: one linear over the
 * concatenated weights and slice views (one GEMM instead of three), equal
 * to eager; groups only form where every member can join. */
static void test_qkv_horizontal(void** state) {
  (void)state;
  const char* text =
      "sym S\n"
      "input x : f32[2, S, 32]\n"
      "const wq : f32[32, 32] = uniform(seed=1, lo=-0.2, hi=0.2)\n"
      "const bq : f32[32] = uniform(seed=2, lo=-0.1, hi=0.1)\n"
      "const wk : f32[16, 32] = uniform(seed=3, lo=-0.2, hi=0.2)\n"
      "const bk : f32[16] = uniform(seed=4, lo=-0.1, hi=0.1)\n"
      "const wv : f32[24, 32] = uniform(seed=5, lo=-0.2, hi=0.2)\n"
      "const bv : f32[24] = uniform(seed=6, lo=-0.1, hi=0.1)\n"
      "input wo : f32[32, 32]\n"
      "const bo : f32[32] = uniform(seed=7, lo=-0.1, hi=0.1)\n"
      "q = linear(x, wq, bq) @q_proj\n"
      "k = linear(x, wk, bk) @k_proj\n"
      "v = linear(x, wv, bv) @v_proj\n"
      "u = linear(x, wo, bo) @other\n"
      "r = relu(k)\n"
      "output q, r, v, u\n";
  bp_graph_t* g = fx_parse(text);
  int64_t s = 5;
  bp_graph_compile_options_t o = one();
  check(g, &o, &s);
  o.symbol_values = &s;
  o.num_symbol_values = 1;
  bp_graph_exec_t* x = NULL;
  assert_int_equal(bp_graph_compile(g_ctx, g, &o, &x), BP_OK);
  char* t = NULL;
  assert_int_equal(bp_graph_exec_report(x, BP_GRAPH_REPORT_JSON, &t), BP_OK);
  if (strstr(t, "\"horizontal\"") == NULL || strstr(t, "linear over 3 linears: q_proj k_proj v_proj") == NULL) fail_msg("%s", t);
  bp_graph_text_free(t);
  assert_int_equal(bp_graph_print(bp_graph_exec_graph(x), &t, NULL), BP_OK);
  /* One linear for q, k, v (and `other`, whose weight is an input, alone). */
  int linears = 0;
  for (const char* p = t; (p = strstr(p, "= linear(")) != NULL; ++p) linears++;
  if (linears != 2 || strstr(t, "q = slice(%") == NULL || strstr(t, "{dim=-1, start=32, end=48, step=1} @k_proj") == NULL) {
    fail_msg("%s", t);
  }
  bp_graph_text_free(t);
  bp_graph_exec_release(x);
  o.flags = BP_GRAPH_NO_FUSE;
  assert_int_equal(bp_graph_compile(g_ctx, g, &o, &x), BP_OK);
  assert_int_equal(bp_graph_print(bp_graph_exec_graph(x), &t, NULL), BP_OK);
  assert_null(strstr(t, "slice("));
  bp_graph_text_free(t);
  bp_graph_exec_release(x);
  bp_graph_release(g);
}

/* The multi-head transformer block of examples/ (heads split and merged
 * by view nodes) at a small sequence length, on one device and two. */
static void test_multi_head_block(void** state) {
  (void)state;
  bp_graph_t* g = load("transformer_block.bpg");
  int64_t s = 24;
  bp_graph_compile_options_t o = one();
  check(g, &o, &s);
  o = two(0);
  bp_graph_pin_t pin = {"attn", g_cpu1};
  o.pins = &pin;
  o.num_pins = 1;
  bp_graph_exec_stats_t st = check(g, &o, &s);
  assert_int_equal(st.num_devices, 2);
  bp_graph_release(g);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_mlp),
      cmocka_unit_test(test_transformer_block),
      cmocka_unit_test(test_resnet_block),
      cmocka_unit_test(test_data_dependent_shape),
      cmocka_unit_test(test_decomposed_attention),
      cmocka_unit_test(test_multi_head_block),
      cmocka_unit_test(test_qkv_horizontal),
  };
  return cmocka_run_group_tests(tests, fx_setup, fx_teardown);
}
