/* Buffers, copies, streams, events and object lifetimes. */
#include "runtime_fixture.h"

#include <pthread.h>
#include <stdlib.h>

#include "internal.h"

int run_tensor_tests(void);
int run_abi_runtime_tests(void);

static void fill_pattern(unsigned char* p, size_t n, unsigned seed) {
  for (size_t i = 0; i < n; ++i) p[i] = (unsigned char)(i * 131u + seed * 7u + (i >> 8));
}

static const bp_event_create_info_t k_timing = {.struct_size = sizeof(bp_event_create_info_t),
                                                .flags = BP_EVENT_TIMING};

/* ---- buffers ------------------------------------------------------------- */
static void test_buffer_allocate(void** state) {
  fixture_t* f = *state;
  bp_buffer_t* buf = NULL;
  assert_int_equal(fake_used_bytes(f->a0, BP_MEMORY_DEVICE), 0);
  assert_ok(bp_buffer_allocate(f->a0, 0, 1000, &buf));
  assert_int_equal(bp_buffer_size(buf), 1000);
  assert_ptr_equal(bp_buffer_device(buf), f->a0);
  assert_int_equal(fake_used_bytes(f->a0, BP_MEMORY_DEVICE), 1000);
  bp_buffer_retain(buf);
  bp_buffer_release(buf);
  assert_int_equal(fake_used_bytes(f->a0, BP_MEMORY_DEVICE), 1000); /* still referenced */
  bp_buffer_release(buf);
  assert_int_equal(fake_used_bytes(f->a0, BP_MEMORY_DEVICE), 0);
}

static void test_buffer_allocate_errors(void** state) {
  fixture_t* f = *state;
  bp_buffer_t* buf = NULL;
  assert_status_msg(bp_buffer_allocate(f->a0, 2, 16, &buf), BP_INVALID_ARGUMENT,
                    "has no memory space 2 (it has 2)");
  assert_status_msg(bp_buffer_allocate(f->a0, UINT32_MAX, 16, &buf), BP_INVALID_ARGUMENT,
                    "has no memory space 4294967295");
  uint32_t space = 0;
  assert_status_msg(bp_device_find_memory_space(f->a0, BP_MEMORY_MANAGED, &space), BP_NOT_FOUND,
                    "has no memory space of kind 3");
  /* The plugin refuses: its message comes through, prefixed. */
  assert_status_msg(bp_buffer_allocate(f->a0, 0, UINT64_C(1) << 50, &buf),
                    BP_RESOURCE_EXHAUSTED, "requested 1125899906842624 bytes");
  assert_non_null(strstr(bp_status_message(), "fake_host_a"));
  assert_status_msg(bp_buffer_allocate(NULL, 0, 16, &buf), BP_INVALID_ARGUMENT,
                    "bp_buffer_allocate: argument 'device' is NULL");
  assert_status_msg(bp_buffer_allocate(f->a0, 0, 16, NULL), BP_INVALID_ARGUMENT,
                    "bp_buffer_allocate: argument 'out_buffer' is NULL");
  assert_null(buf);
  assert_int_equal(fake_used_bytes(f->a0, BP_MEMORY_DEVICE), 0);
}

static void test_buffer_map(void** state) {
  fixture_t* f = *state;
  bp_buffer_t* dev = NULL;
  bp_buffer_t* pinned = NULL;
  void* ptr = NULL;
  unsigned char out[8];
  assert_ok(bp_buffer_allocate(f->a0, 0, 64, &dev));
  uint32_t pinned_space = 0;
  assert_ok(bp_device_find_memory_space(f->a0, BP_MEMORY_HOST_PINNED, &pinned_space));
  assert_int_equal(pinned_space, 1);
  assert_ok(bp_buffer_allocate(f->a0, pinned_space, 64, &pinned));
  assert_status_msg(bp_buffer_map(dev, 0, 64, &ptr), BP_FAILED_PRECONDITION, "not host visible");
  assert_status_msg(bp_buffer_map(pinned, 60, 8, &ptr), BP_OUT_OF_RANGE,
                    "exceeds the buffer size 64");
  assert_status_msg(bp_buffer_map(pinned, UINT64_MAX, 2, &ptr), BP_OUT_OF_RANGE, "exceeds");
  assert_ok(bp_buffer_map(pinned, 8, 8, &ptr));
  memcpy(ptr, "mapped!", 8);
  assert_ok(bp_buffer_unmap(pinned));
  assert_ok(bp_copy_buffer_to_host(f->sa0, pinned, 8, out, 8));
  assert_ok(bp_stream_synchronize(f->sa0));
  assert_string_equal((char*)out, "mapped!");
  bp_buffer_release(dev);
  bp_buffer_release(pinned);
}

/* ---- copies -------------------------------------------------------------- */
static void test_copy_bounds(void** state) {
  fixture_t* f = *state;
  bp_buffer_t* buf = NULL;
  bp_buffer_t* other = NULL;
  unsigned char host[64] = {0};
  assert_ok(bp_buffer_allocate(f->a0, 0, 32, &buf));
  assert_ok(bp_buffer_allocate(f->a0, 0, 32, &other));
  assert_status_msg(bp_copy_host_to_buffer(f->sa0, host, buf, 28, 8), BP_OUT_OF_RANGE,
                    "exceeds the buffer size 32");
  assert_status_msg(bp_copy_host_to_buffer(f->sa0, host, buf, 0, 33), BP_OUT_OF_RANGE, "32");
  /* offset + size wraps around 2^64: still caught. */
  assert_status_msg(bp_copy_host_to_buffer(f->sa0, host, buf, UINT64_MAX - 3, 8), BP_OUT_OF_RANGE,
                    "exceeds");
  assert_status_msg(bp_copy_buffer_to_host(f->sa0, buf, 1, host, 32), BP_OUT_OF_RANGE, "source");
  assert_status_msg(bp_copy_buffer(f->sa0, buf, 0, other, 16, 17), BP_OUT_OF_RANGE, "destination");
  assert_status_msg(bp_copy_buffer(f->sa0, buf, UINT64_MAX, other, 0, 1), BP_OUT_OF_RANGE,
                    "source");
  /* Streams of another device. */
  assert_status_msg(bp_copy_host_to_buffer(f->sa1, host, buf, 0, 8), BP_INVALID_ARGUMENT,
                    "cannot write a buffer of fake_host_a:0");
  assert_status_msg(bp_copy_buffer_to_host(f->sb0, buf, 0, host, 8), BP_INVALID_ARGUMENT,
                    "cannot read");
  assert_status_msg(bp_copy_buffer(f->sb0, buf, 0, other, 0, 8), BP_INVALID_ARGUMENT,
                    "belongs to neither");
  assert_status_msg(bp_copy_host_to_buffer(f->sa0, NULL, buf, 0, 8), BP_INVALID_ARGUMENT,
                    "bp_copy_host_to_buffer: argument 'src' is NULL");
  /* Empty copies at the very end are fine. */
  assert_ok(bp_copy_host_to_buffer(f->sa0, host, buf, 32, 0));
  assert_ok(bp_copy_buffer(f->sa0, buf, 32, other, 32, 0));
  bp_buffer_release(buf);
  bp_buffer_release(other);
}

/* Copies `n` bytes from src (on stream's or another device) and checks them. */
static void check_copy(fixture_t* f, bp_stream_t* stream, bp_device_t* src_dev,
                       bp_device_t* dst_dev, size_t n) {
  bp_buffer_t* src = NULL;
  bp_buffer_t* dst = NULL;
  bp_stream_t* src_stream = NULL;
  bp_stream_t* dst_stream = NULL;
  unsigned char* in = malloc(n);
  unsigned char* out = malloc(n + 16);
  (void)f;
  assert_non_null(in);
  assert_non_null(out);
  fill_pattern(in, n, (unsigned)n);
  assert_ok(bp_stream_create(src_dev, NULL, &src_stream));
  assert_ok(bp_stream_create(dst_dev, NULL, &dst_stream));
  assert_ok(bp_buffer_allocate(src_dev, 0, n + 8, &src));
  assert_ok(bp_buffer_allocate(dst_dev, 0, n + 16, &dst));
  assert_ok(bp_copy_host_to_buffer(src_stream, in, src, 8, n));
  assert_ok(bp_stream_synchronize(src_stream));
  assert_ok(bp_copy_buffer(stream, src, 8, dst, 4, n));
  assert_ok(bp_stream_synchronize(stream));
  assert_ok(bp_copy_buffer_to_host(dst_stream, dst, 0, out, n + 16));
  assert_ok(bp_stream_synchronize(dst_stream));
  assert_memory_equal(out + 4, in, n);
  /* Bytes around the destination range are untouched (fake fill is 0xA5). */
  for (int i = 0; i < 4; ++i) assert_int_equal(out[i], 0xA5);
  for (size_t i = n + 4; i < n + 16; ++i) assert_int_equal(out[i], 0xA5);
  bp_buffer_release(src);
  bp_buffer_release(dst);
  bp_stream_release(src_stream);
  bp_stream_release(dst_stream);
  free(in);
  free(out);
}

static void test_copy_same_device(void** state) {
  fixture_t* f = *state;
  check_copy(f, f->sa0, f->a0, f->a0, 1000);
}

static void test_copy_peer(void** state) {
  fixture_t* f = *state;
  check_copy(f, f->sa0, f->a0, f->a1, 777);  /* stream on the source */
  check_copy(f, f->sa1, f->a0, f->a1, 4096); /* stream on the destination */
}

static void test_copy_cross_plugin(void** state) {
  fixture_t* f = *state;
  check_copy(f, f->sa0, f->a0, f->b0, 12345); /* staged; stream on the source */
  check_copy(f, f->sb0, f->a1, f->b0, 333);   /* staged; stream on the destination */
}

static void test_copy_cross_plugin_chunked(void** state) {
  fixture_t* f = *state;
  /* Larger than the 64 MiB staging chunk: two chunks, the second partial. */
  check_copy(f, f->sb0, f->a0, f->b0, ((size_t)64 << 20) + 4099);
}

/* ---- streams and events ------------------------------------------------- */
static void test_stream_basics(void** state) {
  fixture_t* f = *state;
  bp_stream_t* s = NULL;
  bp_stream_create_info_t info = {.struct_size = sizeof(info), .flags = 0x40};
  assert_status_msg(bp_stream_create(f->a0, &info, &s), BP_INVALID_ARGUMENT, "unknown flags 0x40");
  info.flags = 0;
  info.queue = 7;
  assert_status_msg(bp_stream_create(f->a0, &info, &s), BP_INVALID_ARGUMENT, "unknown queue kind 7");
  info.queue = BP_QUEUE_COMPUTE;
  info.struct_size = 8;
  assert_status_msg(bp_stream_create(f->a0, &info, &s), BP_INVALID_ARGUMENT,
                    "info->struct_size = 8");
  /* What the backend cannot honour it refuses, with its reason. */
  info.struct_size = sizeof(info);
  info.priority = 2;
  assert_status_msg(bp_stream_create(f->a0, &info, &s), BP_UNIMPLEMENTED,
                    "stream priorities are not supported");
  assert_status_msg(bp_stream_create(NULL, NULL, &s), BP_INVALID_ARGUMENT,
                    "bp_stream_create: argument 'device' is NULL");
  assert_null(s);
  assert_ok(bp_stream_create(f->b1, NULL, &s));
  assert_ptr_equal(bp_stream_device(s), f->b1);
  assert_int_equal(bp_stream_query(s), BP_OK);
  assert_ok(bp_stream_synchronize(s));
  bp_stream_retain(s);
  bp_stream_release(s);
  assert_int_equal(bp_stream_query(s), BP_OK); /* still alive */
  bp_stream_release(s);
  assert_status_msg(bp_stream_synchronize(NULL), BP_INVALID_ARGUMENT,
                    "bp_stream_synchronize: argument 'stream' is NULL");
}

static void test_event_basics(void** state) {
  fixture_t* f = *state;
  bp_event_t* plain = NULL;
  bp_event_t* t0 = NULL;
  bp_event_t* t1 = NULL;
  bp_event_t* tb = NULL;
  uint64_t ns = 12345;
  bp_event_create_info_t bad = {.struct_size = sizeof(bad), .flags = 0x80};
  assert_status_msg(bp_event_create(f->a0, &bad, &plain), BP_INVALID_ARGUMENT, "unknown flags");
  bad.flags = BP_EVENT_EXPORTABLE;
  assert_status_msg(bp_event_create(f->a0, &bad, &plain), BP_UNIMPLEMENTED,
                    "exportable events are not supported");
  assert_null(plain);
  assert_ok(bp_event_create(f->a0, NULL, &plain));
  assert_ok(bp_event_create(f->a0, &k_timing, &t0));
  assert_ok(bp_event_create(f->a0, &k_timing, &t1));
  assert_ok(bp_event_create(f->b0, &k_timing, &tb));
  /* Never recorded: complete, as cuEventQuery. */
  assert_int_equal(bp_event_query(plain), BP_OK);
  assert_ok(bp_event_synchronize(plain));
  assert_status_msg(bp_event_elapsed_ns(t0, t1, &ns), BP_FAILED_PRECONDITION, "must be recorded");
  assert_status_msg(bp_event_record(plain, f->sa1), BP_INVALID_ARGUMENT,
                    "cannot be recorded on a stream of fake_host_a:1");
  assert_ok(bp_event_record(plain, f->sa0));
  assert_ok(bp_event_record(t0, f->sa0));
  assert_ok(bp_event_record(t1, f->sa0));
  assert_ok(bp_event_record(tb, f->sb0));
  assert_int_equal(bp_event_query(t1), BP_OK);
  assert_ok(bp_event_synchronize(t1));
  assert_ok(bp_event_elapsed_ns(t0, t1, &ns));
  assert_true(ns < UINT64_C(60000000000));
  assert_status_msg(bp_event_elapsed_ns(plain, t1, &ns), BP_INVALID_ARGUMENT, "BP_EVENT_TIMING");
  assert_status_msg(bp_event_elapsed_ns(t0, tb, &ns), BP_INVALID_ARGUMENT, "different plugins");
  bp_event_release(plain);
  bp_event_release(t0);
  bp_event_release(t1);
  bp_event_release(tb);
}

static void test_stream_wait_event(void** state) {
  fixture_t* f = *state;
  bp_event_t* ev = NULL;
  bp_event_t* unrecorded = NULL;
  assert_ok(bp_event_create(f->a0, NULL, &ev));
  assert_ok(bp_event_create(f->a0, NULL, &unrecorded));
  assert_ok(bp_stream_wait_event(f->sb0, unrecorded)); /* nothing to wait for */
  assert_ok(bp_event_record(ev, f->sa0));
  assert_ok(bp_stream_wait_event(f->sa1, ev)); /* same plugin: the plugin's wait */
  assert_int_equal(atomic_load(&ev->refcount), 1);
  assert_ok(bp_stream_wait_event(f->sb0, ev)); /* other plugin: host function bridge */
  assert_ok(bp_stream_synchronize(f->sb0));
  /* The bridge's reference is gone once its host function ran. */
  assert_int_equal(atomic_load(&ev->refcount), 1);
  assert_status_msg(bp_stream_wait_event(NULL, ev), BP_INVALID_ARGUMENT,
                    "bp_stream_wait_event: argument 'stream' is NULL");
  assert_status_msg(bp_stream_wait_event(f->sb0, NULL), BP_INVALID_ARGUMENT,
                    "bp_stream_wait_event: argument 'event' is NULL");
  bp_event_release(ev);
  bp_event_release(unrecorded);
}

/* ---- lifetimes ----------------------------------------------------------- */
static void test_objects_outlive_context(void** state) {
  (void)state;
  fixture_t* f = NULL;
  void* st = NULL;
  bp_buffer_t* buf = NULL;
  bp_event_t* ev = NULL;
  bp_stream_t* s = NULL;
  bp_tensor_t* t = NULL;
  const int64_t sizes[1] = {4};
  const float in[4] = {1, 2, 3, 4};
  float out[4] = {0};
  assert_int_equal(fixture_setup(&st), 0);
  f = st;
  bp_context_t* ctx = f->ctx;
  assert_ok(bp_buffer_allocate(f->a0, 0, 64, &buf));
  assert_ok(bp_event_create(f->a0, NULL, &ev));
  assert_ok(bp_stream_create(f->a0, NULL, &s));
  assert_ok(bp_tensor_create(f->a0, BP_DTYPE_F32, 1, sizes, &t));
  assert_int_equal(atomic_load(&ctx->refcount), 8); /* fixture: 1 + 3 streams; 4 here */
  /* Drop the application's context reference first: objects keep it alive. */
  assert_int_equal(fixture_teardown_keep(st), 0);
  assert_ok(bp_tensor_write(s, t, in, sizeof(in)));
  assert_ok(bp_tensor_read(s, t, out, sizeof(out)));
  assert_memory_equal(in, out, sizeof(in));
  assert_ok(bp_event_record(ev, s));
  bp_tensor_release(t);
  bp_buffer_release(buf);
  bp_event_release(ev);
  bp_stream_release(s); /* the last reference: the context goes here */
}

/* Buffer users: the list holds stream references until the buffer goes. */
static void test_buffer_users(void** state) {
  fixture_t* f = *state;
  bp_buffer_t* buf = NULL;
  bp_stream_t* streams[10] = {0};
  unsigned char host[4] = {1, 2, 3, 4};
  assert_ok(bp_buffer_allocate(f->a0, 0, 16, &buf));
  for (int i = 0; i < 10; ++i) {
    assert_ok(bp_stream_create(f->a0, NULL, &streams[i]));
    assert_ok(bp_copy_host_to_buffer(streams[i], host, buf, 0, 4));
    assert_ok(bp_copy_host_to_buffer(streams[i], host, buf, 4, 4)); /* noted once */
  }
  assert_int_equal(buf->num_users, 8);
  /* The two oldest were evicted (synchronized and released). */
  assert_int_equal(atomic_load(&streams[0]->refcount), 1);
  assert_int_equal(atomic_load(&streams[1]->refcount), 1);
  assert_int_equal(atomic_load(&streams[9]->refcount), 2);
  for (int i = 0; i < 10; ++i) bp_stream_release(streams[i]);
  bp_buffer_release(buf); /* drains and drops the last stream references */
}

/* Threads share one buffer (its user list) and one device (tensor
 * creation), each on its own stream, as the threading contract allows. */
typedef struct worker {
  fixture_t* f;
  bp_buffer_t* shared;
  int index;
  int failures;
} worker_t;

static void* worker_main(void* arg) {
  worker_t* w = arg;
  bp_stream_t* s = NULL;
  const int64_t sizes[2] = {8, 8};
  if (bp_stream_create(w->f->a0, NULL, &s) != BP_OK) return (void*)(w->failures = 1, NULL);
  for (int iter = 0; iter < 50; ++iter) {
    bp_tensor_t* t = NULL;
    bp_tensor_t* p = NULL;
    const int64_t dims[2] = {1, 0};
    float in[64], out[64];
    for (int i = 0; i < 64; ++i) in[i] = (float)(w->index * 1000 + iter * 64 + i);
    unsigned char tag = (unsigned char)w->index;
    if (bp_copy_host_to_buffer(s, &tag, w->shared, (uint64_t)w->index, 1) != BP_OK ||
        bp_tensor_create(w->f->a0, BP_DTYPE_F32, 2, sizes, &t) != BP_OK ||
        bp_tensor_permute(t, dims, &p) != BP_OK || bp_tensor_write(s, p, in, sizeof(in)) != BP_OK ||
        bp_tensor_read(s, p, out, sizeof(out)) != BP_OK || memcmp(in, out, sizeof(in)) != 0)
      w->failures++;
    bp_tensor_release(p);
    bp_tensor_release(t);
  }
  bp_stream_release(s);
  return NULL;
}

static void test_threads(void** state) {
  fixture_t* f = *state;
  enum { N = 12 };
  pthread_t threads[N];
  worker_t workers[N];
  bp_buffer_t* shared = NULL;
  unsigned char tags[N];
  assert_ok(bp_buffer_allocate(f->a0, 0, N, &shared));
  for (int i = 0; i < N; ++i) {
    workers[i] = (worker_t){.f = f, .shared = shared, .index = i};
    assert_int_equal(pthread_create(&threads[i], NULL, worker_main, &workers[i]), 0);
  }
  for (int i = 0; i < N; ++i) {
    assert_int_equal(pthread_join(threads[i], NULL), 0);
    assert_int_equal(workers[i].failures, 0);
  }
  assert_ok(bp_copy_buffer_to_host(f->sa0, shared, 0, tags, N));
  assert_ok(bp_stream_synchronize(f->sa0));
  for (int i = 0; i < N; ++i) assert_int_equal(tags[i], i);
  assert_true(shared->num_users <= 8);
  bp_buffer_release(shared);
  assert_int_equal(fake_used_bytes(f->a0, BP_MEMORY_DEVICE), 0);
}

/* Each NULL pointer argument is reported by its own name, one at a time in
 * the order of the parameters, with the function's name in front. */
#define assert_null_arg(expr, fn, arg)                                           \
  do {                                                                           \
    assert_int_equal((expr), BP_INVALID_ARGUMENT);                               \
    assert_string_equal(bp_status_message(), fn ": argument '" arg "' is NULL"); \
  } while (0)

static void test_null_arguments_named(void** state) {
  fixture_t* f = *state;
  bp_plugin_t* plugin = NULL;
  bp_device_t* device = NULL;
  bp_plugin_info_t info;
  uint32_t count = 0;
  bp_buffer_t* buf = NULL;
  bp_event_t* ev = NULL;
  bp_event_t* ev2 = NULL;
  bp_tensor_t* t = NULL;
  bp_tensor_t* out = NULL;
  uint64_t ns = 0;
  void* ptr = NULL;
  unsigned char host[16] = {0};
  const int64_t sizes[1] = {4};
  const int64_t strides[1] = {1};
  const int64_t dims[1] = {0};
  assert_ok(bp_buffer_allocate(f->a0, 0, 16, &buf));
  assert_ok(bp_event_create(f->a0, &k_timing, &ev));
  assert_ok(bp_tensor_create(f->a0, BP_DTYPE_F32, 1, sizes, &t));

  assert_null_arg(bp_context_create(NULL, NULL), "bp_context_create", "out_context");
  assert_null_arg(bp_context_register_plugin(NULL, "x", &plugin), "bp_context_register_plugin",
                  "context");
  assert_null_arg(bp_context_plugin(NULL, 0, &plugin), "bp_context_plugin", "context");
  assert_null_arg(bp_context_plugin(f->ctx, 0, NULL), "bp_context_plugin", "out_plugin");
  assert_null_arg(bp_context_find_plugin(NULL, "x", &plugin), "bp_context_find_plugin", "context");
  assert_null_arg(bp_context_find_plugin(f->ctx, NULL, &plugin), "bp_context_find_plugin", "name");
  assert_null_arg(bp_context_find_plugin(f->ctx, "x", NULL), "bp_context_find_plugin",
                  "out_plugin");
  assert_null_arg(bp_context_device(NULL, 0, &device), "bp_context_device", "context");
  assert_null_arg(bp_context_device(f->ctx, 0, NULL), "bp_context_device", "out_device");
  assert_null_arg(bp_context_find_device(NULL, "x", &device), "bp_context_find_device", "context");
  assert_null_arg(bp_context_find_device(f->ctx, NULL, &device), "bp_context_find_device", "spec");
  assert_null_arg(bp_context_find_device(f->ctx, "x", NULL), "bp_context_find_device",
                  "out_device");
  assert_null_arg(bp_plugin_get_info(NULL, &info), "bp_plugin_get_info", "plugin");
  assert_null_arg(bp_plugin_get_info(f->pa, NULL), "bp_plugin_get_info", "out_info");
  assert_null_arg(bp_plugin_device(NULL, 0, &device), "bp_plugin_device", "plugin");
  assert_null_arg(bp_plugin_device(f->pa, 0, NULL), "bp_plugin_device", "out_device");
  assert_null_arg(bp_device_memory_spaces(NULL, 0, 0, NULL, &count), "bp_device_memory_spaces",
                  "device");
  assert_null_arg(bp_device_memory_spaces(f->a0, 0, 0, NULL, NULL), "bp_device_memory_spaces",
                  "out_count");

  assert_null_arg(bp_buffer_map(NULL, 0, 1, &ptr), "bp_buffer_map", "buffer");
  assert_null_arg(bp_buffer_map(buf, 0, 1, NULL), "bp_buffer_map", "out_ptr");
  assert_null_arg(bp_buffer_unmap(NULL), "bp_buffer_unmap", "buffer");

  assert_null_arg(bp_stream_create(f->a0, NULL, NULL), "bp_stream_create", "out_stream");
  assert_null_arg(bp_stream_query(NULL), "bp_stream_query", "stream");
  assert_null_arg(bp_event_create(NULL, NULL, &ev2), "bp_event_create", "device");
  assert_null_arg(bp_event_create(f->a0, NULL, NULL), "bp_event_create", "out_event");
  assert_null_arg(bp_event_record(NULL, f->sa0), "bp_event_record", "event");
  assert_null_arg(bp_event_record(ev, NULL), "bp_event_record", "stream");
  assert_null_arg(bp_event_query(NULL), "bp_event_query", "event");
  assert_null_arg(bp_event_synchronize(NULL), "bp_event_synchronize", "event");
  assert_null_arg(bp_event_elapsed_ns(NULL, ev, &ns), "bp_event_elapsed_ns", "start");
  assert_null_arg(bp_event_elapsed_ns(ev, NULL, &ns), "bp_event_elapsed_ns", "end");
  assert_null_arg(bp_event_elapsed_ns(ev, ev, NULL), "bp_event_elapsed_ns", "out_ns");

  assert_null_arg(bp_copy_host_to_buffer(NULL, host, buf, 0, 16), "bp_copy_host_to_buffer",
                  "stream");
  assert_null_arg(bp_copy_host_to_buffer(f->sa0, host, NULL, 0, 16), "bp_copy_host_to_buffer",
                  "dst");
  assert_null_arg(bp_copy_buffer_to_host(NULL, buf, 0, host, 16), "bp_copy_buffer_to_host",
                  "stream");
  assert_null_arg(bp_copy_buffer_to_host(f->sa0, NULL, 0, host, 16), "bp_copy_buffer_to_host",
                  "src");
  assert_null_arg(bp_copy_buffer_to_host(f->sa0, buf, 0, NULL, 16), "bp_copy_buffer_to_host",
                  "dst");
  assert_null_arg(bp_copy_buffer(NULL, buf, 0, buf, 0, 0), "bp_copy_buffer", "stream");
  assert_null_arg(bp_copy_buffer(f->sa0, NULL, 0, buf, 0, 0), "bp_copy_buffer", "src");
  assert_null_arg(bp_copy_buffer(f->sa0, buf, 0, NULL, 0, 0), "bp_copy_buffer", "dst");
  /* An empty copy may pass NULL host memory. */
  assert_ok(bp_copy_host_to_buffer(f->sa0, NULL, buf, 0, 0));
  assert_ok(bp_copy_buffer_to_host(f->sa0, buf, 0, NULL, 0));

  assert_null_arg(bp_tensor_create(NULL, BP_DTYPE_F32, 1, sizes, &out), "bp_tensor_create",
                  "device");
  assert_null_arg(bp_tensor_create(f->a0, BP_DTYPE_F32, 1, sizes, NULL), "bp_tensor_create",
                  "out_tensor");
  assert_null_arg(bp_tensor_create_strided(f->a0, BP_DTYPE_F32, 1, sizes, NULL, &out),
                  "bp_tensor_create_strided", "strides");
  assert_null_arg(bp_tensor_create_strided(f->a0, BP_DTYPE_F32, 1, NULL, strides, &out),
                  "bp_tensor_create_strided", "sizes");
  assert_null_arg(bp_tensor_from_buffer(NULL, BP_DTYPE_F32, 1, sizes, NULL, 0, &out),
                  "bp_tensor_from_buffer", "buffer");
  assert_null_arg(bp_tensor_from_buffer(buf, BP_DTYPE_F32, 1, sizes, NULL, 0, NULL),
                  "bp_tensor_from_buffer", "out_tensor");
  assert_null_arg(bp_tensor_alias(NULL, &out), "bp_tensor_alias", "t");
  assert_null_arg(bp_tensor_alias(t, NULL), "bp_tensor_alias", "out");
  assert_null_arg(bp_tensor_as_strided(t, 1, NULL, strides, NULL, &out), "bp_tensor_as_strided",
                  "sizes");
  assert_null_arg(bp_tensor_as_strided(t, 1, sizes, NULL, NULL, &out), "bp_tensor_as_strided",
                  "strides");
  assert_null_arg(bp_tensor_permute(t, NULL, &out), "bp_tensor_permute", "dims");
  assert_null_arg(bp_tensor_permute(t, dims, NULL), "bp_tensor_permute", "out");
  assert_null_arg(bp_tensor_view(t, 1, NULL, &out), "bp_tensor_view", "sizes");
  assert_null_arg(bp_tensor_write(NULL, t, host, 16), "bp_tensor_write", "stream");
  assert_null_arg(bp_tensor_write(f->sa0, NULL, host, 16), "bp_tensor_write", "t");
  assert_null_arg(bp_tensor_read(NULL, t, host, 16), "bp_tensor_read", "stream");
  assert_null_arg(bp_tensor_read(f->sa0, NULL, host, 16), "bp_tensor_read", "t");
  /* Nothing was created by the failed calls. */
  assert_null(ev2);
  assert_null(out);
  assert_null(ptr);

  bp_tensor_release(t);
  bp_event_release(ev);
  bp_buffer_release(buf);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      FIXTURE_TEST(test_buffer_allocate),   FIXTURE_TEST(test_buffer_allocate_errors),
      FIXTURE_TEST(test_buffer_map),        FIXTURE_TEST(test_copy_bounds),
      FIXTURE_TEST(test_copy_same_device),  FIXTURE_TEST(test_copy_peer),
      FIXTURE_TEST(test_copy_cross_plugin), FIXTURE_TEST(test_copy_cross_plugin_chunked),
      FIXTURE_TEST(test_stream_basics),     FIXTURE_TEST(test_event_basics),
      FIXTURE_TEST(test_stream_wait_event), FIXTURE_TEST(test_buffer_users),
      FIXTURE_TEST(test_threads),           cmocka_unit_test(test_objects_outlive_context),
      FIXTURE_TEST(test_null_arguments_named),
  };
  int failed = cmocka_run_group_tests_name("runtime", tests, NULL, NULL);
  return failed | run_tensor_tests() | run_abi_runtime_tests();
}
