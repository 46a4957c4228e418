#include "ops_fixture.h"

#include <stdio.h>
#include <stdlib.h>

bp_context_t* g_ctx;
bp_device_t* g_fake;
bp_device_t* g_fake1;
bp_device_t* g_cpu;

#define OPS_MAX_TRACKED 256
static bp_tensor_t* g_tracked[OPS_MAX_TRACKED];
static int g_num_tracked;

bp_tensor_t* ops_track(bp_tensor_t* t) {
  assert_non_null(t);
  assert_true(g_num_tracked < OPS_MAX_TRACKED);
  g_tracked[g_num_tracked++] = t;
  return t;
}

bp_tensor_t* ops_tensor(bp_device_t* dev, uint32_t dtype, uint32_t rank, const int64_t* sizes) {
  bp_tensor_t* t = NULL;
  assert_ok(bp_tensor_create(dev, dtype, rank, sizes, &t));
  return ops_track(t);
}

bp_tensor_t* ops_cpu_tensor(bp_stream_t* stream, uint32_t dtype, uint32_t rank, const int64_t* sizes,
                            const void* data) {
  bp_tensor_t* t = ops_tensor(g_cpu, dtype, rank, sizes);
  uint64_t n = bp_dtype_size(dtype);
  for (uint32_t d = 0; d < rank; d++) n *= (uint64_t)sizes[d];
  if (data) assert_ok(bp_tensor_write(stream, t, data, n));
  return t;
}

int ops_release_all(void** state) {
  (void)state;
  for (int i = 0; i < g_num_tracked; ++i) bp_tensor_release(g_tracked[i]);
  g_num_tracked = 0;
  return 0;
}

void ops_assert_desc(const bp_tensor_desc_t* d, uint32_t dtype, uint32_t rank,
                     const int64_t* sizes) {
  assert_int_equal(d->struct_size, sizeof(bp_tensor_desc_t));
  assert_string_equal(bp_dtype_name(d->dtype), bp_dtype_name(dtype));
  assert_int_equal(d->rank, rank);
  int64_t stride = 1;
  for (uint32_t i = rank; i-- > 0;) {
    assert_int_equal(d->sizes[i], sizes[i]);
    assert_int_equal(d->strides[i], stride);
    stride *= sizes[i] > 1 ? sizes[i] : 1;
  }
  assert_null(d->buffer);
}

static bp_status_t register_from(const char* env, const char* file) {
  const char* dir = getenv(env);
  if (dir == NULL) {
    fprintf(stderr, "%s is not set\n", env);
    return BP_NOT_FOUND;
  }
  char path[4096];
  snprintf(path, sizeof(path), "%s/%s", dir, file);
  return bp_context_register_plugin(g_ctx, path, NULL);
}

int ops_fixture_setup(void) {
  bp_context_options_t opts = {.struct_size = sizeof(opts), .flags = BP_CONTEXT_NO_DISCOVERY};
  if (bp_context_create(&opts, &g_ctx) != BP_OK) return -1;
  if (register_from("BACKPLANE_TEST_FAKE_DIR", "libbp_fake_host_a.so") != BP_OK ||
      bp_context_find_device(g_ctx, "fake_host_a:0", &g_fake) != BP_OK ||
      bp_context_find_device(g_ctx, "fake_host_a:1", &g_fake1) != BP_OK) {
    fprintf(stderr, "fake host plugin: %s\n", bp_status_message());
    return -1;
  }
  /* The CPU plugin is needed by the dispatch tests only. */
  if (register_from("BACKPLANE_TEST_PLUGIN_DIR", "libbp_plugin_cpu.so") != BP_OK ||
      bp_context_find_device(g_ctx, "cpu:0", &g_cpu) != BP_OK) {
    fprintf(stderr, "cpu plugin: %s\n", bp_status_message());
    g_cpu = NULL;
  }
  return 0;
}

#ifndef OPS_FIXTURE_NO_MAIN
int main(void) {
  if (ops_fixture_setup() != 0) return 1;
  int failed = 0;
  failed += run_info_tests();
  failed += run_infer_tests();
  failed += run_run_tests();
  bp_context_release(g_ctx);
  return failed;
}
#endif
