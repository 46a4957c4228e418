/* Checks shared by the region tests of the graph compiler: f32 inputs from
 * a seed, runs compared with eager execution, the executable's stats and
 * report. Static helpers over graph_fixture.h's devices and streams. */
#ifndef BP_TESTS_GRAPH_REGION_CHECKS_H_
#define BP_TESTS_GRAPH_REGION_CHECKS_H_

#include <math.h>
#include <stdio.h>
#include <unistd.h>
#include <stdlib.h>
#include <string.h>

#include "graph_fixture.h"

static inline bp_tensor_t* input_f32(uint32_t rank, const int64_t* dims, uint64_t seed) {
  bp_tensor_t* t = NULL;
  assert_int_equal(bp_tensor_create(g_cpu0, BP_DTYPE_F32, rank, dims, &t), BP_OK);
  size_t n = (size_t)bp_tensor_numel(t);
  float* h = malloc(sizeof(float) * n + 4);
  uint64_t s = seed * 2654435761u + 1;
  for (size_t i = 0; i < n; ++i) {
    s = s * 6364136223846793005ull + 1442695040888963407ull;
    h[i] = (float)((double)(s >> 40) / (double)(1ull << 24) * 2.0 - 1.0);
  }
  assert_int_equal(bp_tensor_write(g_s0, t, h, sizeof(float) * n), BP_OK);
  assert_int_equal(bp_stream_synchronize(g_s0), BP_OK);
  free(h);
  return t;
}

static inline void expect_close(const bp_tensor_t* a, const bp_tensor_t* b) {
  assert_int_equal(bp_tensor_numel(a), bp_tensor_numel(b));
  double* x = fx_host(a);
  double* y = fx_host(b);
  for (int64_t i = 0; i < bp_tensor_numel(a); ++i) {
    double tol = 1e-5 + 1e-5 * fabs(y[i]);
    if (fabs(x[i] - y[i]) > tol) fail_msg("element %lld: compiled %.9g, eager %.9g", (long long)i, x[i], y[i]);
  }
  free(x);
  free(y);
}

/* Runs x twice on fresh inputs and compares every output with eager. */
static inline void check_runs(bp_graph_exec_t* x, const bp_graph_t* g, uint32_t rank, const int64_t* dims) {
  uint32_t no = bp_graph_output_count(g);
  for (uint32_t run = 0; run < 2; ++run) {
    bp_tensor_t* in = input_f32(rank, dims, run + 11);
    bp_tensor_t* out[16] = {0};
    bp_tensor_t* ref[16] = {0};
    if (bp_graph_exec_run(x, (const bp_tensor_t* const*)&in, 1, out, no) != BP_OK) fail_msg("run: %s", bp_status_message());
    if (bp_graph_run_eager(g_s0, g, (const bp_tensor_t* const*)&in, 1, ref, no) != BP_OK) {
      fail_msg("eager: %s", bp_status_message());
    }
    for (uint32_t k = 0; k < no; ++k) {
      expect_close(out[k], ref[k]);
      bp_tensor_release(out[k]);
      bp_tensor_release(ref[k]);
    }
    bp_tensor_release(in);
  }
}

static inline bp_graph_exec_t* compile_cpu0(const bp_graph_t* g, uint32_t flags) {
  static bp_device_t* devs[1];
  devs[0] = g_cpu0;
  bp_graph_compile_options_t o = fx_opts(devs, 1);
  o.flags = flags;
  bp_graph_exec_t* x = NULL;
  if (bp_graph_compile(g_ctx, g, &o, &x) != BP_OK) fail_msg("compile: %s", bp_status_message());
  return x;
}

static inline bp_graph_exec_stats_t stats_of(const bp_graph_exec_t* x) {
  bp_graph_exec_stats_t s = {.struct_size = sizeof(s)};
  assert_int_equal(bp_graph_exec_get_stats(x, &s), BP_OK);
  return s;
}

static inline char* report(const bp_graph_exec_t* x) {
  char* json = NULL;
  assert_int_equal(bp_graph_exec_report(x, BP_GRAPH_REPORT_JSON, &json), BP_OK);
  return json;
}

static inline uint32_t count_of(const char* text, const char* what) {
  uint32_t n = 0;
  size_t len = strlen(what), total = strlen(text);
  for (size_t i = 0; i + len <= total; ++i) n += memcmp(text + i, what, len) == 0;
  return n;
}

/* Compiles g for cpu:0 (*out), checks two runs against eager and returns
 * the JSON report (bp_graph_text_free). */
static inline char* compile_checked(const bp_graph_t* g, uint32_t rank, const int64_t* dims, bp_graph_exec_t** out) {
  *out = compile_cpu0(g, 0);
  check_runs(*out, g, rank, dims);
  return report(*out);
}

/* Saves x (then released) as a file named after tag and loads it back;
 * the file is removed. */
static inline bp_graph_exec_t* save_and_load(bp_graph_exec_t* x, const char* tag) {
  char path[128];
  snprintf(path, sizeof(path), "/tmp/bp_test_graph_%s_%d.bpx", tag, (int)getpid());
  assert_int_equal(bp_graph_exec_save(x, path), BP_OK);
  bp_graph_exec_release(x);
  bp_graph_exec_t* l = NULL;
  if (bp_graph_exec_load(g_ctx, path, &l) != BP_OK) fail_msg("load: %s", bp_status_message());
  remove(path);
  return l;
}

/* Releases what a test made. */
static inline void release_all(char* json, bp_graph_exec_t* x, bp_graph_t* g) {
  bp_graph_text_free(json);
  bp_graph_exec_release(x);
  bp_graph_release(g);
}

#endif /* BP_TESTS_GRAPH_REGION_CHECKS_H_ */
