/* Fixture of the graph compiler's tests on the CPU backend with
 * BP_CPU_DEVICES=2: one context, cpu:0 and cpu:1, a stream on cpu:0, and
 * helpers to parse graphs, build options and read results. Include after
 * <cmocka.h>; header-only (each test executable has one copy). */
#ifndef BP_TESTS_GRAPH_FIXTURE_H_
#define BP_TESTS_GRAPH_FIXTURE_H_

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backplane/graph.h"

static bp_context_t* g_ctx;
static bp_device_t *g_cpu0, *g_cpu1;
static bp_stream_t* g_s0;

static inline int fx_setup(void** state) {
  (void)state;
  if (bp_context_create(NULL, &g_ctx) != BP_OK) return -1;
  if (bp_context_find_device(g_ctx, "cpu:0", &g_cpu0) != BP_OK) return -1;
  if (bp_context_find_device(g_ctx, "cpu:1", &g_cpu1) != BP_OK) return -1; /* BP_CPU_DEVICES=2 */
  return bp_stream_create(g_cpu0, NULL, &g_s0) == BP_OK ? 0 : -1;
}

static inline int fx_teardown(void** state) {
  (void)state;
  bp_stream_release(g_s0);
  bp_context_release(g_ctx);
  return 0;
}

static inline bp_graph_t* fx_parse(const char* text) {
  bp_graph_t* g = NULL;
  if (bp_graph_parse(text, strlen(text), &g) != BP_OK) fail_msg("parse: %s", bp_status_message());
  return g;
}

/* Options over `devs` (n of them; the array must outlive the compile). */
static inline bp_graph_compile_options_t fx_opts(bp_device_t** devs, uint32_t n) {
  bp_graph_compile_options_t o;
  memset(&o, 0, sizeof(o));
  o.struct_size = sizeof(o);
  o.devices = devs;
  o.num_devices = n;
  return o;
}

/* Any f32, f64, i64 or bool tensor, on any device, as host doubles (free them). */
static inline double* fx_host(const bp_tensor_t* t) {
  bp_stream_t* s = NULL;
  assert_int_equal(bp_stream_create(bp_tensor_device(t), NULL, &s), BP_OK);
  size_t n = (size_t)bp_tensor_numel(t), es = bp_dtype_size(bp_tensor_dtype(t));
  unsigned char* raw = malloc(n * es + 8);
  double* d = malloc(sizeof(double) * n + 8);
  assert_int_equal(bp_tensor_read(s, t, raw, n * es), BP_OK);
  for (size_t i = 0; i < n; ++i) {
    switch (bp_tensor_dtype(t)) {
      case BP_DTYPE_F32: d[i] = ((float*)(void*)raw)[i]; break;
      case BP_DTYPE_F64: d[i] = ((double*)(void*)raw)[i]; break;
      case BP_DTYPE_I64: d[i] = (double)((int64_t*)(void*)raw)[i]; break;
      case BP_DTYPE_BOOL: d[i] = raw[i]; break;
      default: fail_msg("fx_host: dtype %s", bp_dtype_name(bp_tensor_dtype(t)));
    }
  }
  free(raw);
  bp_stream_release(s);
  return d;
}

/* A whole file in a malloc'd buffer (free it). */
static inline uint8_t* fx_read_file(const char* path, size_t* out_n) {
  FILE* f = fopen(path, "rb");
  assert_non_null(f);
  fseek(f, 0, SEEK_END);
  long n = ftell(f);
  fseek(f, 0, SEEK_SET);
  uint8_t* p = malloc((size_t)n + 1);
  assert_int_equal(fread(p, 1, (size_t)n, f), (size_t)n);
  fclose(f);
  *out_n = (size_t)n;
  return p;
}

#endif /* BP_TESTS_GRAPH_FIXTURE_H_ */
