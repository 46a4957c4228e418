/* The synchronous debug mode: with BP_CONTEXT_SYNC_EACH_OP (or the
 * environment variable BACKPLANE_SYNC=1) the core synchronizes the stream
 * after every op, so an error a kernel finds while running (here gather
 * with an index out of range on cpu:0) comes back from that op's call,
 * naming the op, its id and the device, with the plugin's message; the
 * output is not handed out. Without the mode, an error that a synchronize
 * inside a buffer's release found is kept for the application's next
 * synchronize or query. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backplane/backplane.h"
#include "test_util.h"

typedef struct fixture {
  bp_context_t* ctx;
  bp_device_t* cpu;
  bp_stream_t* stream;
} fixture_t;

static int open_cpu(fixture_t* f, uint32_t flags) {
  bp_context_options_t opts = {.struct_size = sizeof opts, .flags = BP_CONTEXT_NO_DISCOVERY | flags};
  char path[4096];
  const char* dir = getenv("BACKPLANE_TEST_PLUGIN_DIR");
  if (!dir) return -1;
  snprintf(path, sizeof path, "%s/libbp_plugin_cpu.so", dir);
  if (bp_context_create(&opts, &f->ctx) != BP_OK) return -1;
  if (bp_context_register_plugin(f->ctx, path, NULL) != BP_OK ||
      bp_context_find_device(f->ctx, "cpu:0", &f->cpu) != BP_OK ||
      bp_stream_create(f->cpu, 0, &f->stream) != BP_OK)
    return -1;
  return 0;
}

static void close_cpu(fixture_t* f) {
  if (f->stream) bp_stream_release(f->stream);
  if (f->ctx) bp_context_release(f->ctx);
  memset(f, 0, sizeof *f);
}

static bp_tensor_t* tensor(fixture_t* f, uint32_t dtype, int64_t rows, int64_t cols,
                           const void* data, size_t bytes) {
  int64_t sizes[2] = {rows, cols};
  bp_tensor_t* t = NULL;
  assert_int_equal(bp_tensor_create(f->cpu, dtype, 2, sizes, &t), BP_OK);
  assert_int_equal(bp_tensor_write(f->stream, t, data, bytes), BP_OK);
  return t;
}

/* gather along dim 1 of a 2x3 f32 tensor with index `bad` in row 1. The
 * operands are released after the stream has been synchronized. */
typedef struct gather_args {
  bp_tensor_t* self;
  bp_tensor_t* index;
} gather_args_t;

static bp_status_t gather_with_index(fixture_t* f, int64_t bad, gather_args_t* args,
                                     bp_tensor_t** out) {
  float x[6] = {0, 1, 2, 3, 4, 5};
  int64_t idx[2] = {1, bad};
  args->self = tensor(f, BP_DTYPE_F32, 2, 3, x, sizeof x);
  args->index = tensor(f, BP_DTYPE_I64, 2, 1, idx, sizeof idx);
  bp_dim_attrs_t a = {.struct_size = sizeof a, .dim = 1};
  return bp_op_gather(f->stream, args->self, args->index, &a, out);
}

static void release_args(gather_args_t* args) {
  bp_tensor_release(args->self);
  bp_tensor_release(args->index);
}

static void expect_named_failure(fixture_t* f) {
  bp_tensor_t* out = NULL;
  gather_args_t args;
  assert_int_equal(gather_with_index(f, 3, &args, &out), BP_OUT_OF_RANGE);
  const char* msg = bp_status_message();
  if (!strstr(msg, "op 'gather' (id 109) on device 'cpu:0'")) print_error("message: %s\n", msg);
  assert_non_null(strstr(msg, "op 'gather' (id 109) on device 'cpu:0'"));
  assert_non_null(strstr(msg, "index 3 is out of bounds for dimension 1 with size 3"));
  assert_null(out); /* a failed op hands out no output */
  release_args(&args);
}

static void test_option_flag(void** state) {
  (void)state;
  fixture_t f = {0};
  assert_int_equal(open_cpu(&f, BP_CONTEXT_SYNC_EACH_OP), 0);
  /* A good op runs and its result is there without a synchronize. */
  bp_tensor_t* out = NULL;
  gather_args_t args;
  assert_int_equal(gather_with_index(&f, 2, &args, &out), BP_OK);
  float got[2];
  assert_int_equal(bp_tensor_read(f.stream, out, got, sizeof got), BP_OK);
  assert_true(got[0] == 1.0f && got[1] == 5.0f);
  bp_tensor_release(out);
  release_args(&args);
  expect_named_failure(&f);
  close_cpu(&f);
}

static void test_environment(void** state) {
  (void)state;
  fixture_t f = {0};
  setenv("BACKPLANE_SYNC", "1", 1);
  int rc = open_cpu(&f, 0);
  unsetenv("BACKPLANE_SYNC");
  assert_int_equal(rc, 0);
  expect_named_failure(&f);
  close_cpu(&f);
}

/* cpu:0 without the mode, whatever the environment says. */
static void open_cpu_default_mode(fixture_t* f) {
  setenv("BACKPLANE_SYNC", "0", 1);
  int rc = open_cpu(f, 0);
  unsetenv("BACKPLANE_SYNC");
  assert_int_equal(rc, 0);
}

/* Without the mode the same error is the stream's, found by a later
 * synchronize at the latest, and not attributed to an op id. */
static void test_default_mode(void** state) {
  (void)state;
  fixture_t f = {0};
  open_cpu_default_mode(&f);
  bp_tensor_t* out = NULL;
  gather_args_t args;
  bp_status_t st = gather_with_index(&f, 3, &args, &out);
  if (st == BP_OK) st = bp_stream_synchronize(f.stream);
  assert_int_equal(st, BP_OUT_OF_RANGE);
  assert_null(strstr(bp_status_message(), "(id 109)"));
  if (out) bp_tensor_release(out);
  release_args(&args);
  close_cpu(&f);
}

/* Releasing the operands before the synchronize: the last release of a
 * buffer waits for the work that used it, and the plugin reports its sticky
 * error to that wait. The core keeps the error on the stream, so the
 * application's next synchronize (or query) still returns it, once. */
static void run_release_first(bp_status_t (*wait)(bp_stream_t*)) {
  fixture_t f = {0};
  open_cpu_default_mode(&f);
  bp_tensor_t* out = NULL;
  gather_args_t args;
  assert_int_equal(gather_with_index(&f, 3, &args, &out), BP_OK);
  release_args(&args);
  bp_tensor_release(out);
  bp_status_t st = wait(f.stream);
  const char* msg = bp_status_message();
  if (st != BP_OUT_OF_RANGE) print_error("status %s: %s\n", bp_status_name(st), msg);
  assert_int_equal(st, BP_OUT_OF_RANGE);
  assert_non_null(strstr(msg, "index 3 is out of bounds for dimension 1 with size 3"));
  assert_non_null(strstr(msg, "inside bp_buffer_release"));
  assert_int_equal(bp_stream_synchronize(f.stream), BP_OK); /* returned once */
  close_cpu(&f);
}

static void test_release_before_synchronize(void** state) {
  (void)state;
  run_release_first(bp_stream_synchronize);
}

static void test_release_before_query(void** state) {
  (void)state;
  run_release_first(bp_stream_query);
}

static bp_status_t synchronize_1s(bp_stream_t* s) { return bp_stream_synchronize_timeout(s, 1000000000ull); }

static void test_release_before_synchronize_timeout(void** state) {
  (void)state;
  run_release_first(synchronize_1s);
}

static void test_unknown_flag_rejected(void** state) {
  (void)state;
  bp_context_options_t opts = {.struct_size = sizeof opts, .flags = 1u << 30};
  bp_context_t* ctx = NULL;
  assert_int_equal(bp_context_create(&opts, &ctx), BP_INVALID_ARGUMENT);
  assert_null(ctx);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_option_flag),
      cmocka_unit_test(test_environment),
      cmocka_unit_test(test_default_mode),
      cmocka_unit_test(test_release_before_synchronize),
      cmocka_unit_test(test_release_before_query),
      cmocka_unit_test(test_release_before_synchronize_timeout),
      cmocka_unit_test(test_unknown_flag_rejected),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
