/* Fixture of the op-family tests: one context, cpu:0 and a
 * stream; tensors made here are released after each test. Include after
 * <cmocka.h>. Header-only: each test executable has one copy. */
#ifndef BP_TESTS_CPU_FIXTURE_H_
#define BP_TESTS_CPU_FIXTURE_H_

#include <math.h>
#include <string.h>

#include "backplane/backplane.h"

static bp_context_t* g_ctx;
static bp_device_t* g_dev;
static bp_stream_t* g_stream;

enum { FX_MAX_TRACK = 64 };
static bp_tensor_t* g_track[FX_MAX_TRACK];
static int g_ntrack;

static inline int fx_setup(void** state) {
  (void)state;
  if (bp_context_create(NULL, &g_ctx) != BP_OK) return -1;
  if (bp_context_find_device(g_ctx, "cpu:0", &g_dev) != BP_OK) return -1;
  return bp_stream_create(g_dev, NULL, &g_stream) == BP_OK ? 0 : -1;
}

static inline int fx_teardown(void** state) {
  (void)state;
  bp_stream_release(g_stream);
  bp_context_release(g_ctx);
  return 0;
}

static inline int fx_release_all(void** state) {
  (void)state;
  for (int i = 0; i < g_ntrack; i++) bp_tensor_release(g_track[i]);
  g_ntrack = 0;
  return 0;
}

static inline bp_tensor_t* fx_track(bp_tensor_t* t) {
  assert_true(g_ntrack < FX_MAX_TRACK);
  g_track[g_ntrack++] = t;
  return t;
}

#define FX_N(...) (uint32_t)(sizeof((int64_t[]){__VA_ARGS__}) / sizeof(int64_t))

/* A tensor of `dtype` holding `data` (bytes of the dense tensor; NULL:
 * uninitialised). */
static inline bp_tensor_t* fx_tensor(uint32_t dtype, const void* data, uint32_t rank, const int64_t* sizes) {
  bp_tensor_t* t = NULL;
  assert_int_equal(bp_tensor_create(g_dev, dtype, rank, sizes, &t), BP_OK);
  fx_track(t);
  if (data) {
    int64_t n = 1;
    for (uint32_t i = 0; i < rank; i++) n *= sizes[i];
    assert_int_equal(bp_tensor_write(g_stream, t, data, (uint64_t)n * bp_dtype_size(dtype)), BP_OK);
  }
  return t;
}
#define FX_T(dt, data, ...) fx_tensor(BP_DTYPE_##dt, (data), FX_N(__VA_ARGS__), (int64_t[]){__VA_ARGS__})

/* Reads n elements of `bytes_each` bytes (after the stream drains). */
static inline void fx_read(const bp_tensor_t* t, void* out, int64_t n, size_t bytes_each) {
  assert_int_equal(bp_stream_synchronize(g_stream), BP_OK);
  assert_int_equal(bp_tensor_read(g_stream, t, out, (uint64_t)n * bytes_each), BP_OK);
}

/* |got - want| <= tol * max(1, |want|) for every element (NaN matches NaN). */
static inline void fx_assert_close(const float* got, const float* want, int64_t n, double tol) {
  for (int64_t i = 0; i < n; i++) {
    double g = got[i], w = want[i], scale = fabs(w) > 1.0 ? fabs(w) : 1.0;
    int ok = (isnan(g) && isnan(w)) || g == w || fabs(g - w) <= tol * scale;
    if (!ok) {
      print_error("element %lld: got %.9g, expected %.9g\n", (long long)i, g, w);
      fail();
    }
  }
}

/* The call fails with `code` and a message containing `needle`. */
#define fx_assert_status(expr, code, needle)                                               \
  do {                                                                                     \
    bp_status_t st_ = (expr);                                                              \
    if (st_ != (code) || strstr(bp_status_message(), (needle)) == NULL) {                  \
      print_error("got %s \"%s\", expected %s containing \"%s\"\n", bp_status_name(st_),   \
                  bp_status_message(), bp_status_name(code), (needle));                    \
      fail();                                                                              \
    }                                                                                      \
  } while (0)

#endif /* BP_TESTS_CPU_FIXTURE_H_ */
