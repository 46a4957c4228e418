#define _GNU_SOURCE 1 /* memmem */
/* Executables beyond one compile: the guarded cache (hits, rebinds for new
 * symbol values, recompiles when a dtype, a concrete dim or a device guard
 * fails) and ahead-of-time files (round trip; corrupt, truncated, stale and
 * foreign files rejected with a reason). CPU backend, BP_CPU_DEVICES=2. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#define XXH_INLINE_ALL /* xxHash header only: nothing to link */
#include <xxhash.h>
#include <unistd.h>

#include <cmocka.h>

#include "backplane/graph.h"
#include "graph_fixture.h"

static bp_stream_t* g_s1; /* on cpu:1 */

static int setup(void** state) {
  if (fx_setup(state) != 0) return -1;
  return bp_stream_create(g_cpu1, NULL, &g_s1) == BP_OK ? 0 : -1;
}

static int teardown(void** state) {
  bp_stream_release(g_s1);
  return fx_teardown(state);
}

static const char* k_graph =
    "sym B\n"
    "input x : f32[B, 16]\n"
    "const w : f32[16, 8] = uniform(seed=3, lo=-0.5, hi=0.5)\n"
    "h = mm(x, w) @proj\n"
    "y = relu(h)\n"
    "output y\n";

static bp_graph_t* parse(const char* text) { return fx_parse(text); }

static bp_tensor_t* make(bp_stream_t* s, uint32_t dtype, int64_t rows, int64_t cols, uint32_t seed) {
  int64_t dims[2] = {rows, cols};
  bp_tensor_t* t = NULL;
  assert_int_equal(bp_tensor_create(bp_stream_device(s), dtype, 2, dims, &t), BP_OK);
  size_t n = (size_t)(rows * cols);
  double* d = malloc(sizeof(double) * n + 8);
  float* f = malloc(sizeof(float) * n + 4);
  for (size_t i = 0; i < n; ++i) {
    d[i] = (double)((i * 7919u + seed * 104729u) % 2001u) / 1000.0 - 1.0;
    f[i] = (float)d[i];
  }
  assert_int_equal(bp_tensor_write(s, t, dtype == BP_DTYPE_F64 ? (void*)d : (void*)f,
                                   n * (dtype == BP_DTYPE_F64 ? 8 : 4)), BP_OK);
  free(d);
  free(f);
  return t;
}

static double* read_all(const bp_tensor_t* t) { return fx_host(t); }

/* Runs through the cache and checks against eager on the input's device. */
static void cache_run_check(bp_graph_cache_t* c, const bp_graph_t* g, bp_tensor_t* in) {
  bp_tensor_t *out = NULL, *ref = NULL;
  if (bp_graph_cache_run(c, (const bp_tensor_t* const*)&in, 1, &out, 1) != BP_OK) fail_msg("cache run: %s", bp_status_message());
  bp_stream_t* s = bp_tensor_device(in) == g_cpu0 ? g_s0 : g_s1;
  if (bp_graph_run_eager(s, g, (const bp_tensor_t* const*)&in, 1, &ref, 1) != BP_OK) {
    /* The graph declares f32; a f64 input has its own reference: the same graph in f64. */
    fail_msg("eager: %s", bp_status_message());
  }
  assert_int_equal(bp_tensor_numel(out), bp_tensor_numel(ref));
  double* a = read_all(out);
  double* b = read_all(ref);
  for (int64_t i = 0; i < bp_tensor_numel(out); ++i) assert_true(fabs(a[i] - b[i]) <= 1e-5 + 1e-4 * fabs(b[i]));
  free(a);
  free(b);
  bp_tensor_release(out);
  bp_tensor_release(ref);
}

static bp_graph_cache_stats_t stats(const bp_graph_cache_t* c) {
  bp_graph_cache_stats_t s = {.struct_size = sizeof(s)};
  assert_int_equal(bp_graph_cache_get_stats(c, &s), BP_OK);
  return s;
}

static void test_cache_guards(void** state) {
  (void)state;
  bp_graph_t* g = parse(k_graph);
  bp_device_t* devs[2] = {g_cpu0, g_cpu1};
  bp_graph_compile_options_t o;
  memset(&o, 0, sizeof(o));
  o.struct_size = sizeof(o);
  o.devices = devs;
  o.num_devices = 2;
  bp_graph_cache_t* c = NULL;
  assert_int_equal(bp_graph_cache_create(g_ctx, g, &o, &c), BP_OK);
  bp_tensor_t* a4 = make(g_s0, BP_DTYPE_F32, 4, 16, 1);
  bp_tensor_t* a7 = make(g_s0, BP_DTYPE_F32, 7, 16, 2);
  cache_run_check(c, g, a4);
  bp_graph_cache_stats_t s = stats(c);
  assert_int_equal(s.compiles, 1);
  assert_int_equal(s.hits, 0);
  cache_run_check(c, g, a4);
  s = stats(c);
  assert_int_equal(s.compiles, 1);
  assert_int_equal(s.hits, 1);
  /* B = 7: a rebind, not a recompile. */
  cache_run_check(c, g, a7);
  s = stats(c);
  assert_int_equal(s.compiles, 1);
  assert_int_equal(s.rebinds, 1);
  assert_int_equal(s.entries, 2);
  cache_run_check(c, g, a4);
  cache_run_check(c, g, a7);
  s = stats(c);
  assert_int_equal(s.hits, 3);
  assert_int_equal(s.compiles + s.rebinds, 2);
  /* The input on another device: a guard fails, a recompile. */
  bp_tensor_t* b4 = make(g_s1, BP_DTYPE_F32, 4, 16, 1);
  cache_run_check(c, g, b4);
  assert_int_equal(stats(c).compiles, 2);
  /* Wrong rank: refused, no compile. */
  int64_t d3[3] = {1, 4, 16};
  bp_tensor_t* r3 = NULL;
  assert_int_equal(bp_tensor_create(g_cpu0, BP_DTYPE_F32, 3, d3, &r3), BP_OK);
  bp_tensor_t* out = NULL;
  assert_int_equal(bp_graph_cache_run(c, (const bp_tensor_t* const*)&r3, 1, &out, 1), BP_FAILED_PRECONDITION);
  assert_non_null(strstr(bp_status_message(), "input 'x' has rank 3"));
  assert_int_equal(stats(c).compiles, 2);
  bp_tensor_release(r3);
  bp_tensor_release(a4);
  bp_tensor_release(a7);
  bp_tensor_release(b4);
  bp_graph_cache_release(c);
  bp_graph_release(g);
}

static void test_cache_dtype_guard(void** state) {
  (void)state;
  /* A f64 input: the graph compiled again with x as f64 (the constant stays
   * f32; mm promotes as eager does). Its eager reference: the same text in f64. */
  bp_graph_t* g = parse(k_graph);
  bp_graph_cache_t* c = NULL;
  bp_device_t* devs[1] = {g_cpu0};
  bp_graph_compile_options_t o;
  memset(&o, 0, sizeof(o));
  o.struct_size = sizeof(o);
  o.devices = devs;
  o.num_devices = 1;
  assert_int_equal(bp_graph_cache_create(g_ctx, g, &o, &c), BP_OK);
  bp_tensor_t* a = make(g_s0, BP_DTYPE_F32, 3, 16, 5);
  cache_run_check(c, g, a);
  bp_tensor_t* d = make(g_s0, BP_DTYPE_F64, 3, 16, 5);
  bp_tensor_t* out = NULL;
  bp_status_t st = bp_graph_cache_run(c, (const bp_tensor_t* const*)&d, 1, &out, 1);
  /* mm needs equal dtypes (PyTorch): the recompile's verification names the node. */
  assert_int_equal(st, BP_INVALID_ARGUMENT);
  assert_non_null(strstr(bp_status_message(), "node 'proj'"));
  bp_graph_cache_stats_t s = stats(c);
  assert_int_equal(s.compiles, 1);
  assert_int_equal(s.entries, 1);
  bp_tensor_release(a);
  bp_tensor_release(d);
  bp_graph_cache_release(c);
  bp_graph_release(g);
  /* A graph that takes any float dtype: relu then sum; f64 recompiles and runs. */
  g = parse("sym B\ninput x : f32[B, 16]\ny = relu(x)\noutput y\n");
  assert_int_equal(bp_graph_cache_create(g_ctx, g, &o, &c), BP_OK);
  a = make(g_s0, BP_DTYPE_F32, 2, 16, 6);
  d = make(g_s0, BP_DTYPE_F64, 2, 16, 6);
  cache_run_check(c, g, a);
  assert_int_equal(bp_graph_cache_run(c, (const bp_tensor_t* const*)&d, 1, &out, 1), BP_OK);
  assert_int_equal(bp_tensor_dtype(out), BP_DTYPE_F64);
  bp_tensor_release(out);
  assert_int_equal(stats(c).compiles, 2);
  bp_tensor_release(a);
  bp_tensor_release(d);
  bp_graph_cache_release(c);
  bp_graph_release(g);
}

/* ---- ahead of time ---- */
/* The file's checksum (docs/graph.md): XXH3-64 of the payload. */
static uint64_t file_checksum(const uint8_t* p, size_t n) { return (uint64_t)XXH3_64bits(p, n); }

static uint8_t* read_file(const char* path, size_t* n) {
  FILE* f = fopen(path, "rb");
  assert_non_null(f);
  fseek(f, 0, SEEK_END);
  *n = (size_t)ftell(f);
  fseek(f, 0, SEEK_SET);
  uint8_t* b = malloc(*n + 1);
  assert_int_equal(fread(b, 1, *n, f), *n);
  fclose(f);
  return b;
}

static void expect_load(const uint8_t* b, size_t n, bp_status_t want, const char* fragment) {
  bp_graph_exec_t* x = NULL;
  bp_status_t st = bp_graph_exec_load_bytes(g_ctx, b, n, &x);
  if (st != want || (fragment && strstr(bp_status_message(), fragment) == NULL)) {
    fail_msg("load: %s (%d), wanted %d with '%s'", bp_status_message(), st, want, fragment ? fragment : "");
  }
  if (st == BP_OK) bp_graph_exec_release(x);
  else assert_null(x);
}

static void test_aot_round_trip_and_rejections(void** state) {
  (void)state;
  bp_graph_t* g = parse(k_graph);
  bp_device_t* devs[2] = {g_cpu0, g_cpu1};
  bp_graph_pin_t pin = {"proj", g_cpu1};
  int64_t b = 5;
  bp_graph_compile_options_t o;
  memset(&o, 0, sizeof(o));
  o.struct_size = sizeof(o);
  o.devices = devs;
  o.num_devices = 2;
  o.pins = &pin;
  o.num_pins = 1;
  o.symbol_values = &b;
  o.num_symbol_values = 1;
  bp_graph_exec_t* x = NULL;
  assert_int_equal(bp_graph_compile(g_ctx, g, &o, &x), BP_OK);
  char path[256];
  snprintf(path, sizeof(path), "/tmp/bp_graph_aot_%d.bpx", (int)getpid());
  assert_int_equal(bp_graph_exec_save(x, path), BP_OK);
  bp_graph_exec_t* y = NULL;
  if (bp_graph_exec_load(g_ctx, path, &y) != BP_OK) fail_msg("load: %s", bp_status_message());
  /* Same placement (the pin is in the file, not asked again), same results. */
  bp_graph_exec_stats_t sx = {.struct_size = sizeof(sx)}, sy = {.struct_size = sizeof(sy)};
  assert_int_equal(bp_graph_exec_get_stats(x, &sx), BP_OK);
  assert_int_equal(bp_graph_exec_get_stats(y, &sy), BP_OK);
  assert_int_equal(sy.num_devices, sx.num_devices);
  char* json = NULL;
  assert_int_equal(bp_graph_exec_report(y, BP_GRAPH_REPORT_JSON, &json), BP_OK);
  assert_non_null(strstr(json, "\"name\": \"proj\", \"op\": \"mm\", \"device\": \"cpu:1\", \"reason\": \"pinned\""));
  bp_graph_text_free(json);
  assert_int_equal(sy.num_copies, sx.num_copies);
  assert_int_equal(sy.peak_bytes, sx.peak_bytes);
  bp_tensor_t* in = make(g_s0, BP_DTYPE_F32, 5, 16, 9);
  bp_tensor_t *o1 = NULL, *o2 = NULL;
  assert_int_equal(bp_graph_exec_run(x, (const bp_tensor_t* const*)&in, 1, &o1, 1), BP_OK);
  assert_int_equal(bp_graph_exec_run(y, (const bp_tensor_t* const*)&in, 1, &o2, 1), BP_OK);
  double* a = read_all(o1);
  double* c = read_all(o2);
  assert_memory_equal(a, c, sizeof(double) * 5 * 8);
  free(a);
  free(c);
  bp_tensor_release(o1);
  bp_tensor_release(o2);
  bp_tensor_release(in);
  bp_graph_exec_release(y);

  size_t n = 0;
  uint8_t* file = read_file(path, &n);
  uint8_t* m = malloc(n + 1);
  expect_load(file, n, BP_OK, NULL);
  /* Corrupt: one payload byte flipped. */
  memcpy(m, file, n);
  m[n / 2] ^= 0x40;
  expect_load(m, n, BP_DATA_LOSS, "checksum mismatch");
  /* Truncated. */
  expect_load(file, n - 3, BP_DATA_LOSS, "truncated");
  expect_load(file, 10, BP_DATA_LOSS, "not a backplane graph executable");
  /* Not ours. */
  memcpy(m, file, n);
  m[0] = 'X';
  expect_load(m, n, BP_DATA_LOSS, "bad magic");
  /* Stale: another ABI minor, another format version. */
  memcpy(m, file, n);
  m[16] ^= 1;
  expect_load(m, n, BP_FAILED_PRECONDITION, "stale");
  memcpy(m, file, n);
  m[8] = 99;
  expect_load(m, n, BP_FAILED_PRECONDITION, "format version 99");
  /* Foreign: a device model that is not this one (checksum made valid, so
   * only the device check can refuse it). */
  memcpy(m, file, n);
  uint8_t* at = memmem(m, n, "cpu:1", 5);
  assert_non_null(at);
  uint8_t* model = memmem(at, n - (size_t)(at - m), "CPU", 3);
  if (model == NULL) model = memmem(at, n - (size_t)(at - m), "cpu", 3);
  assert_non_null(model);
  model[0] ^= 0x20;
  uint64_t sum = file_checksum(m + 40, n - 40);
  memcpy(m + 32, &sum, 8);
  expect_load(m, n, BP_FAILED_PRECONDITION, "another device than the one it was compiled for");
  /* A corrupt op id with a valid checksum: the graph reader refuses it
   * (a node is: u32 op, u32 name length, the name). */
  memcpy(m, file, n);
  uint8_t* nm = memmem(m + 40, n - 40, "proj", 4);
  assert_non_null(nm);
  uint32_t bad_op = 9999;
  memcpy(nm - 8, &bad_op, 4);
  sum = file_checksum(m + 40, n - 40);
  memcpy(m + 32, &sum, 8);
  expect_load(m, n, BP_DATA_LOSS, "op 9999");
  /* Operands out of order, with a valid checksum: proj reading its own
   * output, and proj writing the graph's input. After the name come u32
   * dead, u32 num_in, u32 num_out, then the inputs' and outputs' ids. */
  uint32_t proj_in0, proj_out0;
  memcpy(&proj_in0, nm + 4 + 12, 4);
  memcpy(&proj_out0, nm + 4 + 12 + 8, 4);
  memcpy(m, file, n);
  memcpy(nm + 4 + 12, &proj_out0, 4);
  sum = file_checksum(m + 40, n - 40);
  memcpy(m + 32, &sum, 8);
  expect_load(m, n, BP_DATA_LOSS, "which no earlier live node writes");
  memcpy(m, file, n);
  memcpy(nm + 4 + 12 + 8, &proj_in0, 4);
  sum = file_checksum(m + 40, n - 40);
  memcpy(m + 32, &sum, 8);
  expect_load(m, n, BP_DATA_LOSS, "which it does not produce");
  /* Every truncation with a fixed-up header: rejected, never a crash. */
  for (size_t cut = 40; cut < n; cut += 7) {
    memcpy(m, file, cut);
    uint64_t payload = cut - 40;
    memcpy(m + 24, &payload, 8);
    sum = file_checksum(m + 40, payload);
    memcpy(m + 32, &sum, 8);
    bp_graph_exec_t* z = NULL;
    assert_int_not_equal(bp_graph_exec_load_bytes(g_ctx, m, cut, &z), BP_OK);
    assert_null(z);
  }
  free(m);
  free(file);
  assert_int_equal(bp_graph_exec_load(g_ctx, "/nonexistent/x.bpx", &y), BP_NOT_FOUND);
  remove(path);
  bp_graph_exec_release(x);
  bp_graph_release(g);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_cache_guards),
      cmocka_unit_test(test_cache_dtype_guard),
      cmocka_unit_test(test_aot_round_trip_and_rejections),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
