/* Shared fixture of the op front-end tests: one context with the fake host
 * plugin (devices without kernels) and the CPU plugin. */
#ifndef BACKPLANE_TESTS_OPS_FIXTURE_H_
#define BACKPLANE_TESTS_OPS_FIXTURE_H_

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "backplane/backplane.h"

extern bp_context_t* g_ctx;
extern bp_device_t* g_fake;  /* fake_host_a:0 */
extern bp_device_t* g_fake1; /* fake_host_a:1 */
extern bp_device_t* g_cpu;   /* cpu:0 */

/* A dense tensor on `dev`, released by ops_release_all (per-test teardown). */
bp_tensor_t* ops_tensor(bp_device_t* dev, uint32_t dtype, uint32_t rank, const int64_t* sizes);
/* The same on cpu:0 holding `data` (the tensor's bytes, dense; NULL:
 * uninitialized), written through `stream` (ordered before later work on it). */
bp_tensor_t* ops_cpu_tensor(bp_stream_t* stream, uint32_t dtype, uint32_t rank, const int64_t* sizes,
                            const void* data);
/* Tracks a tensor for release at teardown; returns it. */
bp_tensor_t* ops_track(bp_tensor_t* t);
int ops_release_all(void** state);

#define OPS_N(...) (uint32_t)(sizeof((int64_t[]){__VA_ARGS__}) / sizeof(int64_t))
/* T(f32, 2, 3): a [2, 3] f32 tensor on the fake device; T0(f32): 0-d. */
#define T(dt, ...) ops_tensor(g_fake, BP_DTYPE_##dt, OPS_N(__VA_ARGS__), (int64_t[]){__VA_ARGS__})
#define T0(dt) ops_tensor(g_fake, BP_DTYPE_##dt, 0, NULL)

/* The call returns `code` and the thread's message contains `needle`. */
#define assert_status(expr, code, needle)                                          \
  do {                                                                             \
    bp_status_t st_ = (expr);                                                      \
    if (st_ != (code) || strstr(bp_status_message(), (needle)) == NULL) {          \
      print_error("got %s \"%s\", expected %s containing \"%s\"\n",                \
                  bp_status_name(st_), bp_status_message(), bp_status_name(code),  \
                  (needle));                                                       \
      fail();                                                                      \
    }                                                                              \
  } while (0)
#define assert_ok(expr) assert_status(expr, BP_OK, "")

/* Expected output descriptor: dtype and shape, dense strides. */
void ops_assert_desc(const bp_tensor_desc_t* d, uint32_t dtype, uint32_t rank,
                     const int64_t* sizes);
#define assert_desc(d, dt, ...) \
  ops_assert_desc((d), BP_DTYPE_##dt, OPS_N(__VA_ARGS__), (int64_t[]){__VA_ARGS__})
#define assert_desc0(d, dt) ops_assert_desc((d), BP_DTYPE_##dt, 0, NULL)

/* bp_op_infer over an array of `nout` current-size descriptors (their
 * contents kept as creation-op requests; struct_size set to sizeof). */
static inline bp_status_t ops_infer(uint32_t op, const bp_tensor_t* const* in, uint32_t n,
                                    const void* attrs, bp_tensor_desc_t* out, uint32_t nout) {
  bp_tensor_desc_t* ptrs[8];
  if (out == NULL || nout > 8) return bp_op_infer(op, in, n, attrs, NULL, nout);
  for (uint32_t k = 0; k < nout; ++k) {
    out[k].struct_size = sizeof(out[k]);
    ptrs[k] = &out[k];
  }
  return bp_op_infer(op, in, n, attrs, ptrs, nout);
}

/* Creates g_ctx and the device globals (called by the fixture's main; a test
 * executable built with OPS_FIXTURE_NO_MAIN calls it from its own). */
int ops_fixture_setup(void);

int run_info_tests(void);
int run_infer_tests(void);
int run_run_tests(void);

#endif /* BACKPLANE_TESTS_OPS_FIXTURE_H_ */
