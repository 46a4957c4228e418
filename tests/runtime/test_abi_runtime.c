/* Runtime parts of the ABI: memory spaces read at the caller's element
 * size, allocation by space, stream and event create-info, copy-only
 * streams, external memory slots, host functions that fail and the
 * asynchronous error callback. Runs against the fake host plugins. */
#include <stdio.h>
#include <stdlib.h>

#include "internal.h"
#include "runtime_fixture.h"

/* A bigger struct than this header's: what a newer application passes. */
typedef struct grown_space {
  bp_memory_space_info_t v1;
  uint64_t future[3];
} grown_space_t;

static void test_memory_spaces_at_caller_size(void** state) {
  fixture_t* f = *state;
  grown_space_t grown[3];
  uint32_t count = 0;
  memset(grown, 0x5A, sizeof(grown));
  assert_ok(bp_device_memory_spaces(f->a0, 3, sizeof(grown_space_t), &grown[0].v1, &count));
  assert_int_equal(count, 2);
  /* Entry 1 lies at the caller's stride, not at sizeof(bp_memory_space_info_t). */
  assert_int_equal(grown[0].v1.kind, BP_MEMORY_DEVICE);
  assert_int_equal(grown[1].v1.kind, BP_MEMORY_HOST_PINNED);
  assert_int_equal(grown[1].v1.struct_size, sizeof(bp_memory_space_info_t));
  /* Nothing written past what this library knows, nor past the count. */
  assert_int_equal(grown[0].future[0], 0x5A5A5A5A5A5A5A5Aull);
  assert_int_equal(grown[2].v1.struct_size, 0x5A5A5A5Au);
  assert_status_msg(bp_device_memory_spaces(f->a0, 1, 8, &grown[0].v1, &count), BP_INVALID_ARGUMENT,
                    "element_size = 8");
}

static void test_allocate_by_space(void** state) {
  fixture_t* f = *state;
  bp_buffer_t* buf = NULL;
  assert_int_equal(fake_used_bytes(f->a0, 1), 0);
  assert_ok(bp_buffer_allocate(f->a0, 1, 96, &buf)); /* space 1: host pinned */
  assert_int_equal(fake_used_bytes(f->a0, 1), 96);
  assert_int_equal(fake_used_bytes(f->a0, 0), 0);
  void* ptr = NULL;
  assert_ok(bp_buffer_map(buf, 0, 96, &ptr)); /* pinned is host visible */
  assert_ok(bp_buffer_unmap(buf));
  bp_buffer_release(buf);
  assert_int_equal(fake_used_bytes(f->a0, 1), 0);
}

static void test_copy_stream_refuses_ops(void** state) {
  fixture_t* f = *state;
  bp_stream_t* copy = NULL;
  bp_stream_create_info_t info = {.struct_size = sizeof(info), .queue = BP_QUEUE_COPY};
  assert_ok(bp_stream_create(f->a0, &info, &copy));
  const int64_t sizes[1] = {4};
  bp_tensor_t* t = NULL;
  assert_ok(bp_tensor_create(f->a0, BP_DTYPE_F32, 1, sizes, &t));
  const float data[4] = {1, 2, 3, 4};
  assert_ok(bp_tensor_write(copy, t, data, sizeof(data))); /* copies are fine */
  bp_tensor_t* out = NULL;
  assert_status_msg(bp_op_neg(copy, t, NULL, &out), BP_INVALID_ARGUMENT, "copy-only stream");
  assert_null(out);
  bp_tensor_release(t);
  bp_stream_release(copy);
}

static void test_external_memory_unimplemented(void** state) {
  fixture_t* f = *state;
  bp_buffer_t* buf = NULL;
  bp_event_t* ev = NULL;
  float host[4] = {0};
  bp_external_buffer_desc_t desc = {.struct_size = sizeof(desc),
                                    .kind = BP_EXTERNAL_HOST_POINTER,
                                    .size_bytes = sizeof(host),
                                    .host_pointer = host,
                                    .fd = -1};
  assert_status_msg(bp_buffer_import(f->a0, &desc, &buf), BP_UNIMPLEMENTED,
                    "backend 'fake_host_a' cannot import memory");
  assert_null(buf);
  desc.kind = BP_EXTERNAL_SYNC_FD;
  assert_status_msg(bp_buffer_import(f->a0, &desc, &buf), BP_INVALID_ARGUMENT,
                    "kind 5 is not a buffer kind");
  desc.kind = BP_EXTERNAL_HOST_POINTER;
  desc.size_bytes = 0;
  assert_status_msg(bp_buffer_import(f->a0, &desc, &buf), BP_INVALID_ARGUMENT, "size_bytes must be > 0");
  assert_ok(bp_buffer_allocate(f->a0, 0, 16, &buf));
  bp_external_buffer_desc_t out = {.struct_size = sizeof(out), .kind = BP_EXTERNAL_OPAQUE_FD};
  assert_status_msg(bp_buffer_export(buf, &out), BP_UNIMPLEMENTED, "cannot export memory");
  bp_buffer_release(buf);

  bp_external_event_desc_t ed = {.struct_size = sizeof(ed), .kind = BP_EXTERNAL_SYNC_FD, .fd = 3};
  assert_status_msg(bp_event_import(f->a0, &ed, &ev), BP_UNIMPLEMENTED, "cannot import events");
  assert_null(ev);
  assert_ok(bp_event_create(f->a0, NULL, &ev));
  assert_status_msg(bp_event_export(ev, &ed), BP_INVALID_ARGUMENT, "BP_EVENT_EXPORTABLE");
  bp_event_release(ev);
}

typedef struct seen_error {
  int calls;
  bp_device_t* device;
  bp_status_t status;
  char message[256];
} seen_error_t;

static void on_error(void* user_data, bp_device_t* device, bp_status_t status, const char* message) {
  seen_error_t* seen = user_data;
  seen->calls++;
  seen->device = device;
  seen->status = status;
  snprintf(seen->message, sizeof(seen->message), "%s", message);
}

/* A cross-plugin wait whose event fails poisons the waiting stream (the
 * host function's status becomes its sticky error), and the plugin's
 * asynchronous error reaches the application's callback. */
static void test_failed_cross_plugin_wait_poisons_stream(void** state) {
  (void)state;
  seen_error_t seen = {0};
  bp_context_options_t options = {.struct_size = sizeof(options),
                                  .flags = BP_CONTEXT_NO_DISCOVERY,
                                  .error_callback = on_error,
                                  .error_user_data = &seen};
  bp_context_t* ctx = NULL;
  assert_ok(bp_context_create(&options, &ctx));
  const char* dir = getenv("BACKPLANE_TEST_FAKE_DIR");
  assert_non_null(dir);
  char path[4096];
  bp_plugin_t* pa = NULL;
  bp_plugin_t* pb = NULL;
  snprintf(path, sizeof(path), "%s/libbp_fake_host_a.so", dir);
  assert_ok(bp_context_register_plugin(ctx, path, &pa));
  setenv("BACKPLANE_FAKE_HOST_B_OPTIONS", "lost_events=1", 1);
  snprintf(path, sizeof(path), "%s/libbp_fake_host_b.so", dir);
  assert_ok(bp_context_register_plugin(ctx, path, &pb));
  unsetenv("BACKPLANE_FAKE_HOST_B_OPTIONS");
  bp_device_t *a0 = NULL, *b0 = NULL;
  assert_ok(bp_plugin_device(pa, 0, &a0));
  assert_ok(bp_plugin_device(pb, 0, &b0));
  bp_stream_t *sa = NULL, *sb = NULL;
  assert_ok(bp_stream_create(a0, NULL, &sa));
  assert_ok(bp_stream_create(b0, NULL, &sb));
  bp_event_t* ev = NULL;
  assert_ok(bp_event_create(b0, NULL, &ev));
  assert_ok(bp_event_record(ev, sb));
  assert_int_equal(seen.calls, 1);
  assert_ptr_equal(seen.device, b0);
  assert_int_equal(seen.status, BP_DEVICE_LOST);
  assert_non_null(strstr(seen.message, "fake_host_b:0: fake: device lost"));
  assert_ok(bp_stream_wait_event(sa, ev)); /* enqueued; fails when it runs */
  assert_status_msg(bp_stream_synchronize(sa), BP_DEVICE_LOST, "host function");
  assert_ok(bp_stream_synchronize(sa)); /* reported once */
  bp_event_release(ev);
  bp_stream_release(sa);
  bp_stream_release(sb);
  bp_context_release(ctx);
}


int run_abi_runtime_tests(void) {
  const struct CMUnitTest tests[] = {
      FIXTURE_TEST(test_memory_spaces_at_caller_size),
      FIXTURE_TEST(test_allocate_by_space),
      FIXTURE_TEST(test_copy_stream_refuses_ops),
      FIXTURE_TEST(test_external_memory_unimplemented),
      cmocka_unit_test(test_failed_cross_plugin_wait_poisons_stream),
  };
  return cmocka_run_group_tests_name("abi_runtime", tests, NULL, NULL);
}
