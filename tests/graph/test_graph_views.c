/* View nodes in the graph IR: the builder, inference by the tensor
 * functions' rules (errors name the node and operand), the text format's
 * exact round trip of every view, eager and compiled runs (a view's output
 * aliases its input's buffer: no allocation, the input kept alive until
 * the view's last reader), executable files with views (round trip, and a
 * corrupt view record rejected with its reason). CPU devices
 * (BP_CPU_DEVICES=2). */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>
#define XXH_INLINE_ALL /* xxHash header only: nothing to link */
#include <xxhash.h>

#include "backplane/graph.h"
#include "graph_fixture.h"

/* Deterministic inputs in [-1, 1). */
static bp_tensor_t* input_for(const bp_graph_t* g, uint32_t i) {
  uint32_t v;
  assert_int_equal(bp_graph_input(g, i, &v), BP_OK);
  bp_graph_value_info_t vi = {.struct_size = sizeof(vi)};
  assert_int_equal(bp_graph_value_info(g, v, &vi), BP_OK);
  int64_t n = 1;
  for (uint32_t k = 0; k < vi.rank; ++k) n *= vi.dims[k];
  float* data = malloc(sizeof(float) * (size_t)n + 4);
  for (int64_t k = 0; k < n; ++k) data[k] = (float)(((k * 2654435761u + i * 7u) >> 7) % 2001) / 1000.0f - 1.0f;
  bp_tensor_t* t = NULL;
  assert_int_equal(bp_tensor_create(g_cpu0, vi.dtype, vi.rank, vi.dims, &t), BP_OK);
  assert_int_equal(bp_tensor_write(g_s0, t, data, sizeof(float) * (uint64_t)n), BP_OK);
  free(data);
  return t;
}

/* Runs x (twice) and the graph eagerly on the same inputs; outputs equal
 * within the conformance tolerances (f32: 1e-4 relative + 1e-5 absolute). */
static void same_as_eager(bp_graph_exec_t* x, const bp_graph_t* g) {
  uint32_t ni = bp_graph_input_count(g), no = bp_graph_output_count(g);
  bp_tensor_t *in[8] = {0}, *out[8] = {0}, *ref[8] = {0};
  for (uint32_t i = 0; i < ni; ++i) in[i] = input_for(g, i);
  for (int run = 0; run < 2; ++run) {
    for (uint32_t k = 0; k < no; ++k) bp_tensor_release(out[k]);
    if (bp_graph_exec_run(x, (const bp_tensor_t* const*)in, ni, out, no) != BP_OK) fail_msg("run: %s", bp_status_message());
  }
  if (bp_graph_run_eager(g_s0, g, (const bp_tensor_t* const*)in, ni, ref, no) != BP_OK) fail_msg("eager: %s", bp_status_message());
  for (uint32_t k = 0; k < no; ++k) {
    assert_int_equal(bp_tensor_numel(out[k]), bp_tensor_numel(ref[k]));
    assert_int_equal(bp_tensor_rank(out[k]), bp_tensor_rank(ref[k]));
    assert_memory_equal(bp_tensor_sizes(out[k]), bp_tensor_sizes(ref[k]), sizeof(int64_t) * bp_tensor_rank(ref[k]));
    double* a = fx_host(out[k]);
    double* b = fx_host(ref[k]);
    for (int64_t i = 0; i < bp_tensor_numel(out[k]); ++i) {
      double tol = 1e-5 + 1e-4 * fabs(b[i]);
      if (!(fabs(a[i] - b[i]) <= tol)) fail_msg("output %u element %lld: %.9g, eager %.9g", k, (long long)i, a[i], b[i]);
    }
    free(a);
    free(b);
    bp_tensor_release(out[k]);
    bp_tensor_release(ref[k]);
  }
  for (uint32_t i = 0; i < ni; ++i) bp_tensor_release(in[i]);
}

static bp_graph_exec_t* compile(const bp_graph_t* g, uint32_t flags) {
  bp_device_t* d[1] = {g_cpu0};
  bp_graph_compile_options_t o = fx_opts(d, 1);
  o.flags = flags;
  bp_graph_exec_t* x = NULL;
  if (bp_graph_compile(g_ctx, g, &o, &x) != BP_OK) fail_msg("compile: %s", bp_status_message());
  return x;
}

static void check_compiled(const char* text, uint32_t flags) {
  bp_graph_t* g = fx_parse(text);
  bp_graph_exec_t* x = compile(g, flags);
  same_as_eager(x, g);
  bp_graph_exec_release(x);
  bp_graph_release(g);
}

static void dims_are(const bp_graph_t* g, const char* name, uint32_t rank, const int64_t* dims) {
  uint32_t v;
  assert_int_equal(bp_graph_find_value(g, name, &v), BP_OK);
  bp_graph_value_info_t vi = {.struct_size = sizeof(vi)};
  assert_int_equal(bp_graph_value_info(g, v, &vi), BP_OK);
  assert_int_equal(vi.rank, rank);
  assert_memory_equal(vi.dims, dims, sizeof(int64_t) * rank);
}

/* Every view in the text format: parsed, inferred by the tensor
 * functions' rules, printed back byte for byte. */
static const char k_every_view[] =
    "graph views\n"
    "input x : f32[2, 3, 4]\n"
    "a = view(x) {sizes=[6, -1]}\n"
    "kt = permute(x) {dims=[0, 2, 1]}\n"
    "c = expand(x) {sizes=[5, 2, 3, 4]}\n"
    "d = slice(x) {dim=2, start=1, end=4, step=2}\n"
    "e = select(x) {dim=-2, index=1}\n"
    "f = unsqueeze(x) {dim=1}\n"
    "h = squeeze(f) {dim=1}\n"
    "i = contiguous(kt)\n"
    "j = add(i, _) {flags=1, scalar=1.0}\n"
    "output a, kt, c, d, e, h, j\n";

static void test_text_round_trip(void** state) {
  (void)state;
  bp_graph_t* g = fx_parse(k_every_view);
  char* text = NULL;
  size_t size = 0;
  assert_int_equal(bp_graph_print(g, &text, &size), BP_OK);
  assert_string_equal(text, k_every_view);
  bp_graph_text_free(text);
  dims_are(g, "a", 2, (const int64_t[]){6, 4});
  dims_are(g, "kt", 3, (const int64_t[]){2, 4, 3});
  dims_are(g, "c", 4, (const int64_t[]){5, 2, 3, 4});
  dims_are(g, "d", 3, (const int64_t[]){2, 3, 2});
  dims_are(g, "e", 2, (const int64_t[]){2, 4});
  dims_are(g, "h", 3, (const int64_t[]){2, 3, 4});
  dims_are(g, "i", 3, (const int64_t[]){2, 4, 3});
  /* A view node reports its op as BP_GRAPH_VIEW_OP and its params. */
  uint32_t v;
  assert_int_equal(bp_graph_find_value(g, "kt", &v), BP_OK);
  bp_graph_value_info_t vi = {.struct_size = sizeof(vi)};
  assert_int_equal(bp_graph_value_info(g, v, &vi), BP_OK);
  bp_graph_node_info_t ni = {.struct_size = sizeof(ni)};
  assert_int_equal(bp_graph_node_info(g, vi.producer, &ni), BP_OK);
  assert_int_equal(ni.op_id, BP_GRAPH_VIEW_OP(BP_VIEW_permute));
  const bp_graph_view_params_t* p = ni.attrs;
  assert_int_equal(p->rank, 3);
  assert_int_equal(p->sizes[1], 2);
  bp_graph_release(g);
}

static void test_builder(void** state) {
  (void)state;
  bp_graph_t* g = NULL;
  assert_int_equal(bp_graph_create("b", &g), BP_OK);
  uint32_t x, kt, s, bad;
  assert_int_equal(bp_graph_add_input(g, "x", BP_DTYPE_F32, 3, (const int64_t[]){4, 8, 16}, &x), BP_OK);
  bp_graph_view_params_t p = {.struct_size = sizeof(p), .rank = 3, .sizes = {0, 2, 1}};
  assert_int_equal(bp_graph_add_view(g, BP_VIEW_permute, x, &p, "kt", &kt), BP_OK);
  bp_graph_view_params_t sl = {.struct_size = sizeof(sl), .dim = 1, .start = 2, .end = 6, .step = 1};
  assert_int_equal(bp_graph_add_view(g, BP_VIEW_slice, kt, &sl, NULL, &s), BP_OK);
  assert_int_equal(bp_graph_add_output(g, s), BP_OK);
  assert_int_equal(bp_graph_infer(g), BP_OK);
  bp_graph_value_info_t vi = {.struct_size = sizeof(vi)};
  assert_int_equal(bp_graph_value_info(g, s, &vi), BP_OK);
  assert_int_equal(vi.rank, 3);
  assert_int_equal(vi.dims[0], 4);
  assert_int_equal(vi.dims[1], 4);
  assert_int_equal(vi.dims[2], 8);
  /* Not a graph view; a view through bp_graph_add_node; missing params. */
  assert_int_equal(bp_graph_add_view(g, BP_VIEW_diagonal, x, &p, NULL, &bad), BP_INVALID_ARGUMENT);
  assert_int_equal(bp_graph_add_node(g, BP_GRAPH_VIEW_OP(BP_VIEW_permute), &x, 1, &p, NULL, &bad, 1),
                   BP_INVALID_ARGUMENT);
  assert_int_equal(bp_graph_add_view(g, BP_VIEW_view, x, NULL, NULL, &bad), BP_INVALID_ARGUMENT);
  assert_non_null(strstr(bp_status_message(), "needs params"));
  /* The same views on a tensor, as an application running nodes itself does. */
  bp_tensor_t *t = NULL, *v1 = NULL, *v2 = NULL;
  assert_int_equal(bp_tensor_create(g_cpu0, BP_DTYPE_F32, 3, (const int64_t[]){4, 8, 16}, &t), BP_OK);
  assert_int_equal(bp_graph_view_run(g_s0, BP_VIEW_permute, &p, t, &v1), BP_OK);
  assert_int_equal(bp_graph_view_run(g_s0, BP_VIEW_slice, &sl, v1, &v2), BP_OK);
  assert_int_equal(bp_tensor_sizes(v2)[1], vi.dims[1]);
  assert_int_equal(bp_tensor_strides(v2)[1], 1); /* a view of t's buffer: the permuted stride */
  assert_ptr_equal(bp_tensor_buffer(v2), bp_tensor_buffer(t));
  assert_int_equal(bp_graph_view_run(g_s0, BP_VIEW_diagonal, &p, t, &v1), BP_INVALID_ARGUMENT);
  bp_tensor_release(v2);
  bp_tensor_release(v1);
  bp_tensor_release(t);
  bp_graph_release(g);
}

/* Errors name the node and what is wrong, by the tensor functions' rules. */
static void test_infer_errors(void** state) {
  (void)state;
  static const struct {
    const char* line;
    const char* want;
  } cases[] = {
      {"y = permute(x) {dims=[0, 1]} @p\n", "permute: 2 dims given for input 'self' of rank 3"},
      {"y = permute(x) {dims=[0, 1, 1]} @p\n", "repeats"},
      {"y = view(x) {sizes=[5, -1]} @p\n", "invalid for 24 elements"},
      {"t = permute(x) {dims=[2, 1, 0]}\ny = view(t) {sizes=[24]} @p\n", "incompatible"},
      {"y = select(x) {dim=0, index=2} @p\n", "out of range"},
      {"y = slice(x) {dim=0, start=0, end=1, step=0} @p\n", "step 0 must be positive"},
      {"y = expand(x) {sizes=[2, 5, 4]} @p\n", "only size-1 dims expand"},
      {"y = squeeze(x) {dim=3} @p\n", "out of range"},
  };
  for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); ++i) {
    char text[512];
    snprintf(text, sizeof(text), "input x : f32[2, 3, 4]\n%soutput y\n", cases[i].line);
    bp_graph_t* g = NULL;
    assert_int_not_equal(bp_graph_parse(text, strlen(text), &g), BP_OK);
    const char* m = bp_status_message();
    if (strstr(m, "node 'p'") == NULL || strstr(m, cases[i].want) == NULL) fail_msg("case %zu: %s", i, m);
  }
  /* A parse error in a view's params points at the attribute. */
  const char* bad = "input x : f32[2, 3]\ny = permute(x) {order=[1, 0]}\noutput y\n";
  bp_graph_t* g = NULL;
  assert_int_equal(bp_graph_parse(bad, strlen(bad), &g), BP_INVALID_ARGUMENT);
  assert_non_null(strstr(bp_status_message(), "2:17: view 'permute' has no attribute 'order'"));
}

/* Compiled equals eager through every view, strided inputs to ops
 * included (the core packs them where a kernel needs dense ones). */
static void test_compiled_every_view(void** state) {
  (void)state;
  check_compiled(k_every_view, 0);
  check_compiled(k_every_view, BP_GRAPH_NO_MEMPLAN | BP_GRAPH_NO_REGIONS);
  /* Strided views into elementwise chains, a reduction and a GEMM. */
  check_compiled(
      "input x : f32[8, 16]\n"
      "input w : f32[8, 16]\n"
      "t = permute(x) {dims=[1, 0]}\n"
      "u = relu(t)\n"
      "s = slice(w) {dim=1, start=3, end=16, step=3}\n"
      "e = exp(s)\n"
      "m = mm(t, w)\n"
      "o = add(m, _) {flags=1, scalar=2.0}\n"
      "output u, e, o\n",
      0);
}

/* A view allocates nothing, and keeps its input alive until its last
 * reader: h's buffer is not reused by u (which memory planning would do
 * if h died at the view) -- compiled equals eager. */
static void test_view_lifetime(void** state) {
  (void)state;
  const char* text =
      "input x : f32[64, 64]\n"
      "h = relu(x)\n"
      "t = permute(h) {dims=[1, 0]}\n"
      "u = neg(x)\n"
      "w = exp(u)\n"
      "o = add(t, w)\n"
      "output o\n";
  /* One stream: the independent branch would otherwise get buffers of its own. */
  check_compiled(text, BP_GRAPH_NO_REGIONS | BP_GRAPH_ONE_STREAM);
  check_compiled(text, BP_GRAPH_ONE_STREAM);
  /* The same graph without the view plans the same bytes: the view has no buffer. */
  bp_graph_t* g = fx_parse(text);
  bp_graph_t* g2 = fx_parse(
      "input x : f32[64, 64]\n"
      "h = relu(x)\n"
      "u = neg(x)\n"
      "w = exp(u)\n"
      "o = add(h, w)\n"
      "output o\n");
  bp_graph_exec_t* x = compile(g, BP_GRAPH_NO_REGIONS);
  bp_graph_exec_t* x2 = compile(g2, BP_GRAPH_NO_REGIONS);
  bp_graph_exec_stats_t s = {.struct_size = sizeof(s)}, s2 = {.struct_size = sizeof(s2)};
  assert_int_equal(bp_graph_exec_get_stats(x, &s), BP_OK);
  assert_int_equal(bp_graph_exec_get_stats(x2, &s2), BP_OK);
  assert_int_equal(s.unplanned_bytes, s2.unplanned_bytes);
  assert_int_equal(s.num_steps, s2.num_steps + 1);
  /* x + permute(x): never written in place under its own view. */
  check_compiled(
      "input x : f32[32, 32]\n"
      "h = relu(x)\n"
      "t = permute(h) {dims=[1, 0]}\n"
      "o = add(h, t)\n"
      "r = neg(o)\n"
      "output r\n",
      BP_GRAPH_NO_REGIONS | BP_GRAPH_ONE_STREAM);
  bp_graph_exec_release(x);
  bp_graph_exec_release(x2);
  bp_graph_release(g);
  bp_graph_release(g2);
}

/* A view that is a graph output: the caller gets a tensor of its own, not
 * planned memory that later steps (u, w) reuse. */
static void test_view_output(void** state) {
  (void)state;
  const char* text =
      "input x : f32[16, 16]\n"
      "h = relu(x)\n"
      "t = permute(h) {dims=[1, 0]}\n"
      "s = select(t) {dim=0, index=2}\n"
      "u = neg(x)\n"
      "w = exp(u)\n"
      "output t, s, w\n";
  check_compiled(text, BP_GRAPH_ONE_STREAM | BP_GRAPH_NO_REGIONS);
  check_compiled(text, 0);
}

/* A view of a constant as a graph output is the caller's copy: writing
 * into it does not change the next run's result. */
static void test_view_of_constant_output(void** state) {
  (void)state;
  bp_graph_t* g = fx_parse(
      "input x : f32[2, 3]\n"
      "const c : f32[3, 2] = values(1, 2, 3, 4, 5, 6)\n"
      "t = permute(c) {dims=[1, 0]}\n"
      "y = add(x, t)\n"
      "output t, y\n");
  bp_graph_exec_t* x = compile(g, 0);
  bp_tensor_t* in = input_for(g, 0);
  for (int run = 0; run < 2; ++run) {
    bp_tensor_t* out[2] = {0};
    if (bp_graph_exec_run(x, (const bp_tensor_t* const*)&in, 1, out, 2) != BP_OK) fail_msg("%s", bp_status_message());
    double* t = fx_host(out[0]);
    assert_true(t[0] == 1.0 && t[1] == 3.0 && t[3] == 2.0);
    free(t);
    float zeros[6] = {0};
    assert_int_equal(bp_copy_host_to_buffer(g_s0, zeros, bp_tensor_buffer(out[0]), bp_tensor_byte_offset(out[0]),
                                            sizeof(zeros)),
                     BP_OK);
    assert_int_equal(bp_stream_synchronize(g_s0), BP_OK);
    bp_tensor_release(out[0]);
    bp_tensor_release(out[1]);
  }
  bp_tensor_release(in);
  bp_graph_exec_release(x);
  bp_graph_release(g);
}

/* Multi-head attention: heads split by view + permute, sdpa over strided
 * q/k/v, merged by permute + contiguous + view. */
static const char k_mha[] =
    "sym S\n"
    "input x : f32[1, S, 64]\n"
    "const wq : f32[64, 64] = uniform(seed=1, lo=-0.125, hi=0.125)\n"
    "const wk : f32[64, 64] = uniform(seed=2, lo=-0.125, hi=0.125)\n"
    "const wv : f32[64, 64] = uniform(seed=3, lo=-0.125, hi=0.125)\n"
    "q = linear(x, wq, _)\n"
    "k = linear(x, wk, _)\n"
    "v = linear(x, wv, _)\n"
    "q4 = view(q) {sizes=[1, -1, 4, 16]}\n"
    "k4 = view(k) {sizes=[1, -1, 4, 16]}\n"
    "v4 = view(v) {sizes=[1, -1, 4, 16]}\n"
    "qh = permute(q4) {dims=[0, 2, 1, 3]}\n"
    "kh = permute(k4) {dims=[0, 2, 1, 3]}\n"
    "vh = permute(v4) {dims=[0, 2, 1, 3]}\n"
    "a = scaled_dot_product_attention(qh, kh, vh, _) {is_causal=1}\n"
    "at = permute(a) {dims=[0, 2, 1, 3]}\n"
    "ac = contiguous(at)\n"
    "y = view(ac) {sizes=[1, -1, 64]}\n"
    "output y\n";

static void test_multi_head(void** state) {
  (void)state;
  bp_graph_t* g = fx_parse(k_mha);
  bp_device_t* d[1] = {g_cpu0};
  bp_graph_compile_options_t o = fx_opts(d, 1);
  int64_t s = 12;
  o.symbol_values = &s;
  o.num_symbol_values = 1;
  bp_graph_exec_t* x = NULL;
  if (bp_graph_compile(g_ctx, g, &o, &x) != BP_OK) fail_msg("compile: %s", bp_status_message());
  /* Eager needs concrete shapes: the same graph with S bound. */
  char* text = NULL;
  size_t n = 0;
  assert_int_equal(bp_graph_print(bp_graph_exec_graph(x), &text, &n), BP_OK);
  bp_graph_t* gc = fx_parse(text);
  bp_graph_text_free(text);
  same_as_eager(x, gc);
  bp_graph_release(gc);
  bp_graph_exec_release(x);
  bp_graph_release(g);
}

/* Executables with views saved and loaded; a view record whose params do
 * not fit its input (checksum made right) is rejected with the reason. */
static void test_aot(void** state) {
  (void)state;
  const char* text =
      "input x : f32[4, 6, 8]\n"
      "h = relu(x)\n"
      "kt = permute(h) {dims=[0, 2, 1]}\n"
      "o = exp(kt)\n"
      "output o\n";
  bp_graph_t* g = fx_parse(text);
  bp_graph_exec_t* x = compile(g, 0);
  char path[64];
  snprintf(path, sizeof(path), "test_graph_views_%d.bpx", (int)getpid());
  assert_int_equal(bp_graph_exec_save(x, path), BP_OK);
  bp_graph_exec_t* y = NULL;
  if (bp_graph_exec_load(g_ctx, path, &y) != BP_OK) fail_msg("load: %s", bp_status_message());
  same_as_eager(y, g);
  bp_graph_exec_release(y);
  /* Find the permute's params (struct_size, rank 3, dims 0 2 1) and break them. */
  size_t n = 0;
  char* bytes = (char*)fx_read_file(path, &n);
  bp_graph_view_params_t p;
  memset(&p, 0, sizeof(p));
  p.struct_size = sizeof(p);
  p.rank = 3;
  p.sizes[0] = 0;
  p.sizes[1] = 2;
  p.sizes[2] = 1;
  char* at = NULL;
  for (size_t i = 0; i + sizeof(p) <= n && at == NULL; ++i) {
    if (memcmp(bytes + i, &p, offsetof(bp_graph_view_params_t, dim)) == 0) at = bytes + i;
  }
  assert_non_null(at);
  int64_t two = 2;
  memcpy(at + offsetof(bp_graph_view_params_t, sizes) + 16, &two, 8); /* dims [0, 2, 2] */
  uint64_t sum = XXH3_64bits(bytes + 40, n - 40);
  memcpy(bytes + 32, &sum, 8);
  assert_int_equal(bp_graph_exec_load_bytes(g_ctx, bytes, n, &y), BP_DATA_LOSS);
  if (strstr(bp_status_message(), "params do not fit its input") == NULL || strstr(bp_status_message(), "permute") == NULL) {
    fail_msg("%s", bp_status_message());
  }
  /* Dims that fit but give another shape than the file's. */
  int64_t zero = 0, one = 1;
  memcpy(at + offsetof(bp_graph_view_params_t, sizes) + 8, &one, 8);
  memcpy(at + offsetof(bp_graph_view_params_t, sizes) + 16, &two, 8);
  memcpy(at + offsetof(bp_graph_view_params_t, sizes), &zero, 8); /* dims [0, 1, 2]: [4, 6, 8], the file says [4, 8, 6] */
  sum = XXH3_64bits(bytes + 40, n - 40);
  memcpy(bytes + 32, &sum, 8);
  assert_int_equal(bp_graph_exec_load_bytes(g_ctx, bytes, n, &y), BP_DATA_LOSS);
  if (strstr(bp_status_message(), "not what its params give") == NULL) fail_msg("%s", bp_status_message());
  free(bytes);
  unlink(path);
  bp_graph_exec_release(x);
  bp_graph_release(g);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_text_round_trip), cmocka_unit_test(test_builder),
      cmocka_unit_test(test_infer_errors),    cmocka_unit_test(test_compiled_every_view),
      cmocka_unit_test(test_view_lifetime),   cmocka_unit_test(test_view_output),
      cmocka_unit_test(test_multi_head),      cmocka_unit_test(test_aot),
      cmocka_unit_test(test_view_of_constant_output),
  };
  return cmocka_run_group_tests(tests, fx_setup, fx_teardown);
}
