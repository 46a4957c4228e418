/* The CUDA plugin through its ABI, over the fake driver (fake_libcuda.so.1,
 * a real shared library found through BP_CUDA_DRIVER_PATH). The plugin
 * module is dlopen'd and negotiated as the core does; the fake's control
 * API (fake_cuda.h) configures it, injects failures and reports misuse.
 * Every test ends with no misuse, no live allocation and no live stream.
 */
#include <dlfcn.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <math.h>

#include "backplane/plugin.h"
#include "fake_cuda.h"

static uint16_t bp_f32_to_bf16_(float f) { /* exact for the tests' values */
  uint32_t u;
  memcpy(&u, &f, 4);
  return (uint16_t)(u >> 16);
}
static float bp_bf16_to_f32_(uint16_t b) {
  uint32_t u = (uint32_t)b << 16;
  float f;
  memcpy(&f, &u, 4);
  return f;
}

/* ---- a minimal host --------------------------------------------------------- */
static char g_msg[512];
static int g_async_errors;
static char g_async_msg[512];
static void host_report(void* ctx, bp_status_t st, const char* m) {
  (void)ctx; (void)st;
  snprintf(g_msg, sizeof g_msg, "%s", m);
}
static void host_log(void* ctx, int32_t level, const char* m) { (void)ctx; (void)level; (void)m; }
static int32_t host_log_enabled(void* ctx, int32_t level) { (void)ctx; (void)level; return 0; }
static void host_async(void* ctx, bpp_device_t d, bp_status_t st, const char* m) {
  (void)ctx; (void)d; (void)st;
  __atomic_add_fetch(&g_async_errors, 1, __ATOMIC_SEQ_CST);
  snprintf(g_async_msg, sizeof g_async_msg, "%s", m);
}
static const bp_host_services_t k_host = {
    .struct_size = sizeof k_host, .report = host_report, .log = host_log,
    .log_enabled = host_log_enabled, .async_error = host_async};

static void* g_plugin_lib;
static const bpp_core_table_t* C;
static const bp_plugin_vtable_t* V;
static const fake_cuda_control_t* F;
static void* g_fake_lib;

static int group_setup(void** state) {
  (void)state;
  setenv("BP_CUDA_DRIVER_PATH", FAKE_CUDA_PATH, 1);
  setenv("BP_CUBLASLT_PATH", FAKE_CUDA_PATH, 1); /* the fake's cuBLASLt */
  g_fake_lib = dlopen(FAKE_CUDA_PATH, RTLD_NOW | RTLD_LOCAL);
  if (!g_fake_lib) return fprintf(stderr, "%s\n", dlerror()), -1;
  F = ((fake_cuda_control_fn)dlsym(g_fake_lib, FAKE_CUDA_CONTROL_SYMBOL))();
  g_plugin_lib = dlopen(CUDA_PLUGIN_PATH, RTLD_NOW | RTLD_LOCAL);
  if (!g_plugin_lib) return fprintf(stderr, "%s\n", dlerror()), -1;
  bp_plugin_negotiate_fn nego = (bp_plugin_negotiate_fn)dlsym(g_plugin_lib, BP_PLUGIN_ENTRY_NAME);
  bp_negotiate_request_t req = {.struct_size = sizeof req, .abi_major = BP_ABI_VERSION_MAJOR,
                                .abi_minor = BP_ABI_VERSION_MINOR, .host = &k_host};
  bp_negotiate_reply_t rep = {.struct_size = sizeof rep};
  if (!nego || nego(&req, &rep) != BP_OK || strcmp(rep.name, "cuda")) return -1;
  C = rep.vtable->core;
  V = rep.vtable;
  return 0;
}
static int group_teardown(void** state) {
  (void)state;
  dlclose(g_plugin_lib);
  dlclose(g_fake_lib);
  return 0;
}

/* Per test: the fake at its defaults, one instance and device 0. */
typedef struct fx {
  bpp_instance_t inst;
  bpp_device_t dev;
  bpp_stream_t s;
} fx_t;
static fx_t g_fx;

static int setup(void** state) {
  F->reset();
  g_msg[0] = 0;
  g_async_errors = 0;
  memset(&g_fx, 0, sizeof g_fx);
  *state = &g_fx;
  return 0;
}
static void open_device(void) {
  assert_int_equal(C->instance_create(NULL, &g_fx.inst), BP_OK);
  assert_int_equal(C->device_open(g_fx.inst, 0, &g_fx.dev), BP_OK);
  assert_int_equal(C->stream_create(g_fx.dev, NULL, &g_fx.s), BP_OK);
}
static int teardown(void** state) {
  (void)state;
  if (g_fx.s) C->stream_destroy(g_fx.s);
  if (g_fx.dev) C->device_close(g_fx.dev);
  if (g_fx.inst) C->instance_destroy(g_fx.inst);
  int bad = 0;
  if (F->misuse_count()) bad = fprintf(stderr, "fake saw misuse: %s\n", F->last_misuse());
  if (F->live_allocations()) bad = fprintf(stderr, "%llu allocations leaked\n",
                                           (unsigned long long)F->live_allocations());
  if (F->live_streams()) bad = fprintf(stderr, "%llu streams leaked\n",
                                       (unsigned long long)F->live_streams());
  if (F->live_events()) bad = fprintf(stderr, "%llu events leaked\n", (unsigned long long)F->live_events());
  unsetenv("BP_CUDA_HOSTFN_WAIT_VALUE");
  return bad ? -1 : 0;
}

static bpp_buffer_t alloc_in(uint32_t space, uint64_t size) {
  bp_buffer_alloc_info_t ai = {.struct_size = sizeof ai, .memory_space = space, .size_bytes = size};
  bpp_buffer_t b = NULL;
  assert_int_equal(C->buffer_allocate(g_fx.dev, &ai, &b), BP_OK);
  return b;
}
static void sync_ok(bpp_stream_t s) { assert_int_equal(C->stream_synchronize(s), BP_OK); }

/* ---- unavailable paths ---------------------------------------------------------- */
static void test_no_library(void** state) {
  (void)state;
  setenv("BP_CUDA_DRIVER_PATH", "/nonexistent/libcuda.so.1", 1);
  bpp_instance_t inst = NULL;
  bp_status_t st = C->instance_create(NULL, &inst);
  setenv("BP_CUDA_DRIVER_PATH", FAKE_CUDA_PATH, 1);
  assert_int_equal(st, BP_UNAVAILABLE);
  assert_non_null(strstr(g_msg, "no CUDA driver ("));
  assert_non_null(strstr(g_msg, "/nonexistent/libcuda.so.1"));
}
static void test_library_lacks_entry(void** state) {
  (void)state;
  setenv("BP_CUDA_DRIVER_PATH", "libm.so.6", 1);
  bpp_instance_t inst = NULL;
  bp_status_t st = C->instance_create(NULL, &inst);
  setenv("BP_CUDA_DRIVER_PATH", FAKE_CUDA_PATH, 1);
  assert_int_equal(st, BP_UNAVAILABLE);
  assert_non_null(strstr(g_msg, "lacks cuGetErrorName"));
}
static void test_no_device(void** state) {
  (void)state;
  F->set_devices(0);
  bpp_instance_t inst = NULL;
  assert_int_equal(C->instance_create(NULL, &inst), BP_UNAVAILABLE);
  assert_non_null(strstr(g_msg, "CUDA_ERROR_NO_DEVICE (100)"));
}
static void test_init_fails(void** state) {
  (void)state;
  F->set_init_error(CUDA_ERROR_UNKNOWN);
  bpp_instance_t inst = NULL;
  assert_int_equal(C->instance_create(NULL, &inst), BP_UNAVAILABLE);
  assert_non_null(strstr(g_msg, "cuInit failed: CUDA_ERROR_UNKNOWN (999)"));
}

/* ---- device and memory ------------------------------------------------------------ */
static void test_properties(void** state) {
  (void)state;
  open_device();
  bp_device_properties_t p = {.struct_size = sizeof p};
  assert_int_equal(C->device_get_properties(g_fx.dev, &p), BP_OK);
  assert_int_equal(p.kind, BP_DEVICE_KIND_GPU);
  assert_string_equal(p.name, "Fake CUDA device 0");
  assert_int_equal(p.memory_bytes, 64u << 20);
  assert_int_equal(p.compute_units, 132);
  assert_int_equal(p.subgroup_size, 32);
  assert_int_equal(p.uuid[0], 0xf0);
  assert_true(p.flags & BP_DEVICE_FLAG_TIMESTAMPS);
  assert_false(p.flags & BP_DEVICE_FLAG_PEER_COPY); /* one device */
  assert_true(p.peak_ops_per_s[BP_DTYPE_F32] > 1e13);
  assert_true(p.memory_bandwidth_bytes_per_s > 1e12);
  bp_memory_space_info_t sp[4];
  uint32_t n = 0;
  assert_int_equal(C->device_memory_spaces(g_fx.dev, 4, sizeof sp[0], sp, &n), BP_OK);
  assert_int_equal(n, 3);
  assert_int_equal(sp[0].kind, BP_MEMORY_DEVICE);
  assert_int_equal(sp[0].flags & BP_MEMORY_FLAG_HOST_VISIBLE, 0);
  assert_int_equal(sp[1].kind, BP_MEMORY_HOST_PINNED);
  assert_true(sp[1].flags & BP_MEMORY_FLAG_HOST_VISIBLE);
  assert_int_equal(sp[2].kind, BP_MEMORY_MANAGED);
}

static void test_memory_spaces_roundtrip(void** state) {
  (void)state;
  open_device();
  for (uint32_t space = 0; space < 3; ++space) {
    bpp_buffer_t b = alloc_in(space, 1000);
    uint64_t used = 0, budget = 0;
    assert_int_equal(C->device_memory_usage(g_fx.dev, space, &used, &budget), BP_OK);
    assert_true(used >= 1000 && budget >= used);
    unsigned char in[300], out[300];
    for (int i = 0; i < 300; ++i) in[i] = (unsigned char)(i * 7 + space);
    assert_int_equal(C->copy_host_to_device(g_fx.s, in, b, 123, 300), BP_OK);
    assert_int_equal(C->copy_device_to_host(g_fx.s, b, 123, out, 300), BP_OK);
    sync_ok(g_fx.s);
    assert_memory_equal(in, out, 300);
    void* p = NULL;
    bp_status_t st = C->buffer_map(b, 100, 400, &p);
    if (space == 0) {
      assert_int_equal(st, BP_FAILED_PRECONDITION);
      assert_non_null(strstr(g_msg, "not host visible"));
    } else {
      assert_int_equal(st, BP_OK);
      assert_memory_equal((char*)p + 23, in, 300); /* the mapping sees device writes */
      memset(p, 0x42, 10);                         /* and the device sees host writes */
      assert_int_equal(C->copy_device_to_host(g_fx.s, b, 100, out, 10), BP_OK);
      sync_ok(g_fx.s);
      for (int i = 0; i < 10; ++i) assert_int_equal(out[i], 0x42);
      assert_int_equal(C->buffer_unmap(b), BP_OK);
    }
    assert_int_equal(C->buffer_map(b, 900, 101, &p), BP_OUT_OF_RANGE);
    C->buffer_release(b);
    assert_int_equal(C->device_memory_usage(g_fx.dev, space, &used, &budget), BP_OK);
    assert_int_equal(used, 0);
  }
}

static void test_memory_bad_requests(void** state) {
  (void)state;
  open_device();
  bpp_buffer_t b = NULL;
  bp_buffer_alloc_info_t ai = {.struct_size = sizeof ai, .size_bytes = 128u << 20};
  assert_int_equal(C->buffer_allocate(g_fx.dev, &ai, &b), BP_RESOURCE_EXHAUSTED);
  assert_non_null(strstr(g_msg, "134217728 bytes requested"));
  /* Within the capacity, but the driver has no room left. */
  bpp_buffer_t big = alloc_in(0, 40u << 20);
  ai.size_bytes = 40u << 20;
  assert_int_equal(C->buffer_allocate(g_fx.dev, &ai, &b), BP_RESOURCE_EXHAUSTED);
  assert_non_null(strstr(g_msg, "CUDA_ERROR_OUT_OF_MEMORY (2)"));
  C->buffer_release(big);
  ai.size_bytes = 0;
  assert_int_equal(C->buffer_allocate(g_fx.dev, &ai, &b), BP_INVALID_ARGUMENT);
  ai.size_bytes = UINT64_MAX;
  ai.alignment = 1u << 20;
  assert_int_equal(C->buffer_allocate(g_fx.dev, &ai, &b), BP_INVALID_ARGUMENT);
  ai.size_bytes = 64;
  ai.alignment = 48;
  assert_int_equal(C->buffer_allocate(g_fx.dev, &ai, &b), BP_INVALID_ARGUMENT);
  ai.alignment = 0;
  ai.memory_space = 3;
  assert_int_equal(C->buffer_allocate(g_fx.dev, &ai, &b), BP_INVALID_ARGUMENT);
  /* A larger alignment than the space's is honoured. */
  ai.memory_space = 1;
  ai.alignment = 1u << 16;
  assert_int_equal(C->buffer_allocate(g_fx.dev, &ai, &b), BP_OK);
  void* p = NULL;
  assert_int_equal(C->buffer_map(b, 0, 64, &p), BP_OK);
  assert_int_equal((uintptr_t)p % (1u << 16), 0);
  /* Copies outside the buffer. */
  char host[8];
  assert_int_equal(C->copy_host_to_device(g_fx.s, host, b, 60, 8), BP_OUT_OF_RANGE);
  assert_int_equal(C->copy_device_to_host(g_fx.s, b, UINT64_MAX, host, 2), BP_OUT_OF_RANGE);
  C->buffer_release(b);
}

static void test_pools_when_supported(void** state) {
  (void)state;
  open_device();
  bpp_buffer_t b = alloc_in(0, 4096);
  C->buffer_release(b);
  sync_ok(g_fx.s);
  assert_int_equal(F->call_count("cuMemAllocFromPoolAsync"), 1);
  assert_int_equal(F->call_count("cuMemFreeAsync"), 1);
  assert_int_equal(F->call_count("cuMemAlloc_v2"), 0);
  teardown(state);
  setup(state);
  F->set_pools(0);
  open_device();
  b = alloc_in(0, 4096);
  C->buffer_release(b);
  assert_int_equal(F->call_count("cuMemAllocFromPoolAsync"), 0);
  assert_int_equal(F->call_count("cuMemAlloc_v2"), 1);
  assert_int_equal(F->call_count("cuMemFree_v2"), 1);
}

/* ---- copies and fills ---------------------------------------------------------------- */
static void test_copies_overlap_memmove(void** state) {
  (void)state;
  open_device();
  enum { N = 1000 };
  unsigned char in[N], out[N], want[N];
  for (int i = 0; i < N; ++i) in[i] = (unsigned char)(i * 13 + 1);
  bpp_buffer_t b = alloc_in(0, N), c = alloc_in(0, N);
  /* forward (dst above src), distance 7, and backward, distance 300 */
  const struct { uint64_t src, dst, n; } cases[] = {{0, 7, 900}, {400, 100, 600}, {0, 1, 999}};
  for (size_t k = 0; k < 3; ++k) {
    assert_int_equal(C->copy_host_to_device(g_fx.s, in, b, 0, N), BP_OK);
    assert_int_equal(C->copy_device_to_device(g_fx.s, b, cases[k].src, b, cases[k].dst,
                                              cases[k].n), BP_OK);
    assert_int_equal(C->copy_device_to_host(g_fx.s, b, 0, out, N), BP_OK);
    sync_ok(g_fx.s);
    memcpy(want, in, N);
    memmove(want + cases[k].dst, want + cases[k].src, cases[k].n);
    assert_memory_equal(out, want, N);
  }
  /* Distinct buffers with offsets. */
  assert_int_equal(C->copy_device_to_device(g_fx.s, b, 10, c, 20, 500), BP_OK);
  assert_int_equal(C->copy_device_to_host(g_fx.s, c, 20, out, 500), BP_OK);
  sync_ok(g_fx.s);
  assert_memory_equal(out, want + 10, 500);
  /* Host memory of a pinned buffer copied into itself. */
  bpp_buffer_t p = alloc_in(1, N);
  void* map = NULL;
  assert_int_equal(C->buffer_map(p, 0, N, &map), BP_OK);
  memcpy(map, in, N);
  assert_int_equal(C->copy_host_to_device(g_fx.s, (char*)map + 3, p, 0, 500), BP_OK);
  sync_ok(g_fx.s);
  memcpy(want, in, N);
  memmove(want, want + 3, 500);
  assert_memory_equal(map, want, N);
  C->buffer_release(p);
  C->buffer_release(b);
  C->buffer_release(c);
}

static void test_fill_patterns(void** state) {
  (void)state;
  open_device();
  bpp_buffer_t b = alloc_in(0, 256);
  const unsigned char pat[8] = {1, 2, 3, 4, 5, 6, 7, 8}, same[8] = {9, 9, 9, 9, 9, 9, 9, 9};
  const uint32_t sizes[] = {1, 2, 4, 8};
  const uint64_t offsets[] = {0, 1, 3, 8};
  unsigned char out[256];
  for (int si = 0; si < 4; ++si)
    for (int oi = 0; oi < 4; ++oi)
      for (int same_k = 0; same_k < 2; ++same_k) {
        uint32_t ps = sizes[si];
        const unsigned char* pp = same_k ? same : pat;
        assert_int_equal(C->buffer_fill(g_fx.s, b, 0, 256, "\0\0\0\0", 4), BP_OK);
        assert_int_equal(C->buffer_fill(g_fx.s, b, offsets[oi], ps * 16, pp, ps), BP_OK);
        assert_int_equal(C->copy_device_to_host(g_fx.s, b, 0, out, 256), BP_OK);
        sync_ok(g_fx.s);
        for (uint64_t i = 0; i < 256; ++i) {
          int inside = i >= offsets[oi] && i < offsets[oi] + ps * 16;
          assert_int_equal(out[i], inside ? pp[(i - offsets[oi]) % ps] : 0);
        }
      }
  assert_int_equal(C->buffer_fill(g_fx.s, b, 0, 6, pat, 4), BP_INVALID_ARGUMENT);
  assert_int_equal(C->buffer_fill(g_fx.s, b, 0, 6, pat, 3), BP_INVALID_ARGUMENT);
  assert_int_equal(C->buffer_fill(g_fx.s, b, 250, 8, pat, 8), BP_OUT_OF_RANGE);
  C->buffer_release(b);
}

static void test_peer_copy(void** state) {
  (void)state;
  F->set_devices(2);
  open_device();
  bpp_device_t d1 = NULL;
  assert_int_equal(C->device_open(g_fx.inst, 1, &d1), BP_OK);
  bp_device_properties_t p = {.struct_size = sizeof p};
  assert_int_equal(C->device_get_properties(g_fx.dev, &p), BP_OK);
  assert_true(p.flags & BP_DEVICE_FLAG_PEER_COPY);
  bpp_buffer_t a = alloc_in(0, 64), b = NULL;
  bp_buffer_alloc_info_t ai = {.struct_size = sizeof ai, .size_bytes = 64};
  assert_int_equal(C->buffer_allocate(d1, &ai, &b), BP_OK);
  char in[64], out[64];
  for (int i = 0; i < 64; ++i) in[i] = (char)i;
  assert_int_equal(C->copy_host_to_device(g_fx.s, in, a, 0, 64), BP_OK);
  for (int rep = 0; rep < 2; ++rep)
    assert_int_equal(C->copy_peer(g_fx.s, a, 8, b, 0, 56), BP_OK);
  sync_ok(g_fx.s);
  bpp_stream_t s1 = NULL;
  assert_int_equal(C->stream_create(d1, NULL, &s1), BP_OK);
  assert_int_equal(C->copy_device_to_host(s1, b, 0, out, 56), BP_OK);
  sync_ok(s1);
  assert_memory_equal(out, in + 8, 56);
  assert_int_equal(F->call_count("cuCtxEnablePeerAccess"), 2); /* 2nd: already enabled */
  C->stream_destroy(s1);
  C->buffer_release(a);
  C->buffer_release(b);
  C->device_close(d1);
}

/* ---- streams and events --------------------------------------------------------------- */
static void test_stream_priorities_and_query(void** state) {
  (void)state;
  open_device();
  const struct { int32_t bp; int cuda; } cases[] = {{0, 0}, {2, -2}, {100, -5}, {-100, 0}};
  for (int k = 0; k < 4; ++k) {
    bp_stream_create_info_t si = {.struct_size = sizeof si, .priority = cases[k].bp};
    bpp_stream_t s = NULL;
    assert_int_equal(C->stream_create(g_fx.dev, &si, &s), BP_OK);
    assert_int_equal(F->last_stream_priority(), cases[k].cuda);
    C->stream_destroy(s);
  }
  bp_stream_create_info_t bad = {.struct_size = sizeof bad, .queue = 7};
  bpp_stream_t s = NULL;
  assert_int_equal(C->stream_create(g_fx.dev, &bad, &s), BP_INVALID_ARGUMENT);
  bad.queue = BP_QUEUE_COPY;
  bad.flags = 1;
  assert_int_equal(C->stream_create(g_fx.dev, &bad, &s), BP_INVALID_ARGUMENT);
  /* query: pending, then idle */
  F->set_delay_us(30000);
  bpp_buffer_t b = alloc_in(0, 64);
  assert_int_equal(C->buffer_fill(g_fx.s, b, 0, 64, "\1", 1), BP_OK);
  assert_int_equal(C->stream_query(g_fx.s), BP_NOT_READY);
  sync_ok(g_fx.s);
  assert_int_equal(C->stream_query(g_fx.s), BP_OK);
  C->buffer_release(b);
}

/* Events come from the device's pools (gpu_common's event pool): creating
 * and destroying one in a loop costs one cuEventCreate and no destroy; a
 * recycled event is complete, as a new one is; timing events have a pool
 * of their own and still time; an event destroyed while pending is
 * destroyed, not kept; device close destroys the kept ones. */
static void test_events_recycled(void** state) {
  (void)state;
  open_device();
  const uint64_t c0 = F->call_count("cuEventCreate"), d0 = F->call_count("cuEventDestroy_v2");
  for (int i = 0; i < 10; ++i) {
    bpp_event_t e = NULL;
    assert_int_equal(C->event_create(g_fx.dev, NULL, &e), BP_OK);
    assert_int_equal(C->event_query(e), BP_OK);
    assert_int_equal(C->event_record(e, g_fx.s), BP_OK);
    assert_int_equal(C->event_synchronize(e), BP_OK);
    C->event_destroy(e);
  }
  assert_int_equal(F->call_count("cuEventCreate") - c0, 1);
  assert_int_equal(F->call_count("cuEventDestroy_v2") - d0, 0);
  bp_event_create_info_t ti = {.struct_size = sizeof ti, .flags = BP_EVENT_TIMING};
  for (int round = 0; round < 3; ++round) {
    bpp_event_t t0 = NULL, t1 = NULL;
    assert_int_equal(C->event_create(g_fx.dev, &ti, &t0), BP_OK);
    assert_int_equal(C->event_create(g_fx.dev, &ti, &t1), BP_OK);
    assert_int_equal(C->event_record(t0, g_fx.s), BP_OK);
    assert_int_equal(C->event_record(t1, g_fx.s), BP_OK);
    assert_int_equal(C->event_synchronize(t1), BP_OK);
    uint64_t ns = 0;
    assert_int_equal(C->event_elapsed_ns(t0, t1, &ns), BP_OK);
    C->event_destroy(t0);
    C->event_destroy(t1);
  }
  assert_int_equal(F->call_count("cuEventCreate") - c0, 3); /* 1 plain, 2 timing */
  assert_int_equal(F->live_events(), 3);
  /* Pending when destroyed: destroyed, and the next one is new. */
  F->set_delay_us(30000);
  bpp_buffer_t b = alloc_in(0, 64);
  bpp_event_t p = NULL;
  assert_int_equal(C->event_create(g_fx.dev, NULL, &p), BP_OK);
  assert_int_equal(C->buffer_fill(g_fx.s, b, 0, 64, "\1", 1), BP_OK);
  assert_int_equal(C->event_record(p, g_fx.s), BP_OK);
  assert_int_equal(C->event_query(p), BP_NOT_READY);
  C->event_destroy(p);
  assert_int_equal(F->call_count("cuEventDestroy_v2") - d0, 1);
  sync_ok(g_fx.s);
  assert_int_equal(C->event_create(g_fx.dev, NULL, &p), BP_OK);
  assert_int_equal(F->call_count("cuEventCreate") - c0, 4);
  C->event_destroy(p);
  C->buffer_release(b);
  C->stream_destroy(g_fx.s);
  C->device_close(g_fx.dev);
  g_fx.s = NULL;
  g_fx.dev = NULL;
  assert_int_equal(F->live_events(), 0);
}

/* Stream B reads what stream A wrote, ordered by an event; every command
 * of the fake waits 5 ms first, so a missing wait would read stale data. */
static void test_event_cross_stream_order(void** state) {
  (void)state;
  open_device();
  bpp_stream_t s2 = NULL;
  assert_int_equal(C->stream_create(g_fx.dev, NULL, &s2), BP_OK);
  bpp_event_t ev = NULL;
  assert_int_equal(C->event_create(g_fx.dev, NULL, &ev), BP_OK);
  bpp_buffer_t a = alloc_in(0, 256), b = alloc_in(0, 256);
  unsigned char in[256], out[256];
  memset(in, 0x3c, sizeof in);
  F->set_delay_us(5000);
  assert_int_equal(C->copy_host_to_device(g_fx.s, in, a, 0, 256), BP_OK);
  assert_int_equal(C->event_record(ev, g_fx.s), BP_OK);
  assert_int_equal(C->event_query(ev), BP_NOT_READY);
  assert_int_equal(C->stream_wait_event(s2, ev), BP_OK);
  assert_int_equal(C->copy_device_to_device(s2, a, 0, b, 0, 256), BP_OK);
  assert_int_equal(C->copy_device_to_host(s2, b, 0, out, 256), BP_OK);
  sync_ok(s2);
  assert_memory_equal(in, out, 256);
  assert_int_equal(C->event_query(ev), BP_OK);
  assert_int_equal(C->event_synchronize(ev), BP_OK);
  C->event_destroy(ev);
  C->stream_destroy(s2);
  C->buffer_release(a);
  C->buffer_release(b);
}

/* The fake's ordering is real: without the wait the reader sees the
 * allocation's initial garbage (0xa5). Proves the test above can fail. */
static void test_fake_orders_for_real(void** state) {
  (void)state;
  open_device();
  bpp_stream_t s2 = NULL;
  assert_int_equal(C->stream_create(g_fx.dev, NULL, &s2), BP_OK);
  bpp_buffer_t a = alloc_in(0, 16);
  unsigned char in[16], out[16];
  memset(in, 0x3c, sizeof in);
  F->set_delay_us(20000);
  /* The writer's copy is its stream's third command (60 ms), the reader's
   * its first (20 ms). */
  bpp_buffer_t z = alloc_in(0, 16);
  assert_int_equal(C->buffer_fill(g_fx.s, z, 0, 16, "\x3c", 1), BP_OK);
  assert_int_equal(C->buffer_fill(g_fx.s, z, 0, 16, "\x3c", 1), BP_OK);
  assert_int_equal(C->copy_host_to_device(g_fx.s, in, a, 0, 16), BP_OK);
  assert_int_equal(C->copy_device_to_host(s2, a, 0, out, 16), BP_OK);
  sync_ok(s2);
  sync_ok(g_fx.s);
  assert_int_equal(out[0], 0xa5);
  C->stream_destroy(s2);
  C->buffer_release(a);
  C->buffer_release(z);
}

static void test_event_timing(void** state) {
  (void)state;
  open_device();
  bp_event_create_info_t ti = {.struct_size = sizeof ti, .flags = BP_EVENT_TIMING};
  bpp_event_t e0 = NULL, e1 = NULL, plain = NULL, x = NULL;
  assert_int_equal(C->event_create(g_fx.dev, &ti, &e0), BP_OK);
  assert_int_equal(C->event_create(g_fx.dev, &ti, &e1), BP_OK);
  assert_int_equal(C->event_create(g_fx.dev, NULL, &plain), BP_OK);
  ti.flags = BP_EVENT_EXPORTABLE;
  assert_int_equal(C->event_create(g_fx.dev, &ti, &x), BP_UNIMPLEMENTED);
  bpp_buffer_t b = alloc_in(0, 64);
  assert_int_equal(C->event_record(e0, g_fx.s), BP_OK);
  F->set_delay_us(20000);
  assert_int_equal(C->buffer_fill(g_fx.s, b, 0, 64, "\1", 1), BP_OK);
  assert_int_equal(C->event_record(e1, g_fx.s), BP_OK);
  assert_int_equal(C->event_record(plain, g_fx.s), BP_OK);
  uint64_t ns = 0;
  assert_int_equal(C->event_elapsed_ns(e0, e1, &ns), BP_FAILED_PRECONDITION); /* pending */
  assert_int_equal(C->event_synchronize(e1), BP_OK);
  assert_int_equal(C->event_elapsed_ns(e0, e1, &ns), BP_OK);
  assert_true(ns >= 20000000u);
  assert_int_equal(C->event_elapsed_ns(e0, plain, &ns), BP_FAILED_PRECONDITION);
  sync_ok(g_fx.s);
  C->event_destroy(e0);
  C->event_destroy(e1);
  C->event_destroy(plain);
  C->buffer_release(b);
}

/* ---- host functions --------------------------------------------------------------------- */
typedef struct hf {
  bpp_buffer_t pinned; /* the function writes into it */
  unsigned char seen;  /* what it found there */
  int calls;
  bp_status_t ret;
} hf_t;
static bp_status_t host_fn(void* user) {
  hf_t* h = user;
  unsigned char* p = NULL;
  C->buffer_map(h->pinned, 0, 16, (void**)&p);
  h->seen = p[0];
  /* A function may call the plugin (this makes CUDA calls on the plugin's
   * thread, never on the driver's callback thread: the fake checks). */
  bp_buffer_alloc_info_t ai = {.struct_size = sizeof ai, .size_bytes = 64};
  bpp_buffer_t tmp = NULL;
  if (C->buffer_allocate(g_fx.dev, &ai, &tmp) == BP_OK) C->buffer_release(tmp);
  struct timespec ts = {0, 20000000};
  nanosleep(&ts, NULL); /* later work must wait for this */
  p[1] = 0x77;
  h->calls++;
  return h->ret;
}
static void host_func_order(void) {
  open_device();
  hf_t h = {.pinned = alloc_in(1, 16)};
  unsigned char out[2] = {0, 0};
  assert_int_equal(C->buffer_fill(g_fx.s, h.pinned, 0, 16, "\x11", 1), BP_OK);
  assert_int_equal(C->stream_enqueue_host_func(g_fx.s, host_fn, &h), BP_OK);
  assert_int_equal(C->copy_device_to_host(g_fx.s, h.pinned, 0, out, 2), BP_OK);
  sync_ok(g_fx.s);
  assert_int_equal(h.calls, 1);
  assert_int_equal(h.seen, 0x11); /* earlier work ran before */
  assert_int_equal(out[1], 0x77); /* later work waited */
  /* A failing function poisons the stream once. */
  h.ret = BP_ABORTED;
  assert_int_equal(C->stream_enqueue_host_func(g_fx.s, host_fn, &h), BP_OK);
  assert_int_equal(C->stream_synchronize(g_fx.s), BP_ABORTED);
  assert_non_null(strstr(g_msg, "host function failed"));
  assert_int_equal(C->stream_synchronize(g_fx.s), BP_OK);
  C->buffer_release(h.pinned);
}
static void test_host_func_wait_value(void** state) {
  (void)state;
  host_func_order();
  assert_true(F->call_count("cuStreamWaitValue32_v2") >= 2);
}
static void test_host_func_blocking(void** state) {
  (void)state;
  setenv("BP_CUDA_HOSTFN_WAIT_VALUE", "0", 1);
  host_func_order();
  assert_int_equal(F->call_count("cuStreamWaitValue32_v2"), 0);
}

/* The fake catches a CUDA call made inside a driver callback (what the
 * plugin's hand-off avoids): calls the fake directly. */
static void CUDA_CB bad_callback(void* user) {
  CUresult (*query)(CUstream) = (CUresult(*)(CUstream))dlsym(g_fake_lib, "cuStreamQuery");
  query((CUstream)user);
}
static void test_fake_catches_call_in_callback(void** state) {
  (void)state;
  open_device();
  __typeof__(&cuLaunchHostFunc) launch = (__typeof__(&cuLaunchHostFunc))dlsym(g_fake_lib,
                                                                           "cuLaunchHostFunc");
  __typeof__(&cuStreamCreateWithPriority) mk =
      (__typeof__(&cuStreamCreateWithPriority))dlsym(g_fake_lib, "cuStreamCreateWithPriority");
  __typeof__(&cuStreamDestroy_v2) rm =
      (__typeof__(&cuStreamDestroy_v2))dlsym(g_fake_lib, "cuStreamDestroy_v2");
  __typeof__(&cuCtxPushCurrent_v2) push =
      (__typeof__(&cuCtxPushCurrent_v2))dlsym(g_fake_lib, "cuCtxPushCurrent_v2");
  __typeof__(&cuCtxPopCurrent_v2) pop =
      (__typeof__(&cuCtxPopCurrent_v2))dlsym(g_fake_lib, "cuCtxPopCurrent_v2");
  __typeof__(&cuDevicePrimaryCtxRetain) retain =
      (__typeof__(&cuDevicePrimaryCtxRetain))dlsym(g_fake_lib, "cuDevicePrimaryCtxRetain");
  __typeof__(&cuDevicePrimaryCtxRelease_v2) release =
      (__typeof__(&cuDevicePrimaryCtxRelease_v2))dlsym(g_fake_lib, "cuDevicePrimaryCtxRelease_v2");
  CUcontext ctx;
  CUstream s;
  assert_int_equal(retain(&ctx, 0), CUDA_SUCCESS);
  assert_int_equal(push(ctx), CUDA_SUCCESS);
  assert_int_equal(mk(&s, CU_STREAM_NON_BLOCKING, 0), CUDA_SUCCESS);
  assert_int_equal(launch(s, bad_callback, s), CUDA_SUCCESS);
  assert_int_equal(rm(s), CUDA_SUCCESS);
  assert_int_equal(F->misuse_count(), 1);
  assert_non_null(strstr(F->last_misuse(), "inside a host function"));
  /* and a double free */
  __typeof__(&cuMemFree_v2) mfree = (__typeof__(&cuMemFree_v2))dlsym(g_fake_lib, "cuMemFree_v2");
  __typeof__(&cuMemAlloc_v2) malloc_ = (__typeof__(&cuMemAlloc_v2))dlsym(g_fake_lib,
                                                                         "cuMemAlloc_v2");
  CUdeviceptr p;
  assert_int_equal(malloc_(&p, 64), CUDA_SUCCESS);
  assert_int_equal(mfree(p), CUDA_SUCCESS);
  assert_int_equal(mfree(p), CUDA_ERROR_INVALID_VALUE);
  assert_int_equal(F->misuse_count(), 2);
  pop(NULL);
  release(0);
  F->reset(); /* the misuse was the point */
}

/* ---- errors ---------------------------------------------------------------------------- */
static void test_sticky_error_device_lost(void** state) {
  (void)state;
  open_device();
  bpp_buffer_t b = alloc_in(0, 64);
  F->make_sticky(CUDA_ERROR_ILLEGAL_ADDRESS);
  assert_int_equal(C->buffer_fill(g_fx.s, b, 0, 64, "\1", 1), BP_OK);
  assert_int_equal(C->stream_synchronize(g_fx.s), BP_DEVICE_LOST);
  assert_non_null(strstr(g_msg, "CUDA_ERROR_ILLEGAL_ADDRESS (700)"));
  assert_int_equal(g_async_errors, 1);
  assert_non_null(strstr(g_async_msg, "CUDA_ERROR_ILLEGAL_ADDRESS (700)"));
  /* Every later call: DEVICE_LOST with the cause, without a driver call. */
  bpp_buffer_t c = NULL;
  bp_buffer_alloc_info_t ai = {.struct_size = sizeof ai, .size_bytes = 64};
  assert_int_equal(C->buffer_allocate(g_fx.dev, &ai, &c), BP_DEVICE_LOST);
  assert_non_null(strstr(g_msg, "CUDA_ERROR_ILLEGAL_ADDRESS (700)"));
  assert_int_equal(C->stream_query(g_fx.s), BP_DEVICE_LOST);
  assert_int_equal(g_async_errors, 1);
  C->buffer_release(b);
}

static void test_error_mapping(void** state) {
  (void)state;
  open_device();
  bpp_stream_t s = NULL;
  F->fail_call("cuStreamCreateWithPriority", 1, CUDA_ERROR_OUT_OF_MEMORY);
  assert_int_equal(C->stream_create(g_fx.dev, NULL, &s), BP_RESOURCE_EXHAUSTED);
  assert_non_null(strstr(g_msg, "cuStreamCreateWithPriority: CUDA_ERROR_OUT_OF_MEMORY (2)"));
  bpp_buffer_t b = alloc_in(0, 64);
  char host[64] = {0};
  F->fail_call("cuMemcpyHtoDAsync_v2", 1, CUDA_ERROR_INVALID_VALUE);
  assert_int_equal(C->copy_host_to_device(g_fx.s, host, b, 0, 64), BP_INVALID_ARGUMENT);
  assert_non_null(strstr(g_msg, "CUDA_ERROR_INVALID_VALUE (1)"));
  F->fail_call("cuEventCreate", 2, CUDA_ERROR_NOT_SUPPORTED);
  bpp_event_t e = NULL, e2 = NULL;
  assert_int_equal(C->event_create(g_fx.dev, NULL, &e), BP_OK);
  assert_int_equal(C->event_create(g_fx.dev, NULL, &e2), BP_UNIMPLEMENTED);
  F->fail_call("cuLaunchHostFunc", 1, CUDA_ERROR_INVALID_HANDLE);
  assert_int_equal(C->stream_enqueue_host_func(g_fx.s, host_fn, NULL), BP_INVALID_ARGUMENT);
  sync_ok(g_fx.s);
  assert_int_equal(g_async_errors, 0); /* none of these is sticky */
  C->event_destroy(e);
  C->buffer_release(b);
}


/* ---- GEMM through cuBLASLt ------------------------------------------------------ */
static bp_tensor_desc_t desc(bpp_buffer_t b, uint64_t off, uint32_t dtype, uint32_t rank,
                             const int64_t* sizes, const int64_t* strides) {
  bp_tensor_desc_t d = {.struct_size = sizeof d, .dtype = dtype, .rank = rank, .buffer = b,
                        .byte_offset = off};
  for (uint32_t i = 0; i < rank; ++i) d.sizes[i] = sizes[i], d.strides[i] = strides[i];
  return d;
}
static bp_op_call_t call_of(uint32_t op, uint32_t nin, const bp_tensor_desc_t* const* in,
                            const bp_tensor_desc_t* const* out, const void* attrs) {
  bp_op_call_t c = {.struct_size = sizeof c, .op_id = op, .num_inputs = nin, .num_outputs = 1,
                    .inputs = in, .outputs = out, .attrs = attrs};
  return c;
}
static uint32_t support(const bp_op_call_t* c, char* msg) {
  bp_support_t s = {.struct_size = sizeof s};
  assert_int_equal(V->caps->query_support(g_fx.dev, c, &s), BP_OK);
  if (msg) snprintf(msg, 256, "%s", s.message);
  return s.supported ? BP_SUPPORT_OK : s.reason;
}
/* The cuBLASLt path's own answer: the plugin's on a second device object
 * opened with the shared kernels turned off (BP_CUDA_NO_KERNELS=1). */
static uint32_t cuda_gemm_support_of(const bp_op_call_t* c, char* msg) {
  bpp_device_t d = NULL;
  setenv("BP_CUDA_NO_KERNELS", "1", 1);
  assert_int_equal(C->device_open(g_fx.inst, 0, &d), BP_OK);
  unsetenv("BP_CUDA_NO_KERNELS");
  bp_support_t s = {.struct_size = sizeof s};
  assert_int_equal(V->caps->query_support(d, c, &s), BP_OK);
  snprintf(msg, 256, "%s", s.message);
  C->device_close(d);
  return s.supported ? BP_SUPPORT_OK : s.reason;
}
static bp_status_t run(const bp_op_call_t* c) {
  return V->ops->launch[c->op_id](g_fx.s, c);
}
/* A device buffer holding a copy of `host` (enqueued on the fixture's stream). */
static bpp_buffer_t upload(const void* host, uint64_t n) {
  bpp_buffer_t b = alloc_in(0, n);
  assert_int_equal(C->copy_host_to_device(g_fx.s, host, b, 0, n), BP_OK);
  return b;
}
static void release_all(bpp_buffer_t* b, int n) {
  for (int i = 0; i < n; ++i) C->buffer_release(b[i]);
}
/* Element (i, j) of a strided f32 matrix in host memory. */
#define AT(p, i, j, si, sj) ((p)[(i) * (si) + (j) * (sj)])

/* mm with A row-major, B stored column-major (a transposed view), the
 * output with padded rows, at byte offsets: every layout cuBLASLt takes. */
static void test_gemm_mm_layouts(void** state) {
  (void)state;
  open_device();
  enum { N = 5, K = 7, M = 3, LDO = 4 };
  float a[N * K], b[K * M], o[N * LDO];
  for (int i = 0; i < N * K; ++i) a[i] = (float)((i * 37) % 11) - 5.0f;
  for (int i = 0; i < K * M; ++i) b[i] = (float)((i * 17) % 7) * 0.5f - 1.0f;
  bpp_buffer_t ba = alloc_in(0, 64 + sizeof a), bb = alloc_in(0, sizeof b), bo = alloc_in(0, sizeof o);
  F->set_delay_us(2000); /* the GEMM must run after the uploads, before the download */
  assert_int_equal(C->copy_host_to_device(g_fx.s, a, ba, 64, sizeof a), BP_OK);
  assert_int_equal(C->copy_host_to_device(g_fx.s, b, bb, 0, sizeof b), BP_OK);
  assert_int_equal(C->buffer_fill(g_fx.s, bo, 0, sizeof o, "\0\0\0\0", 4), BP_OK);
  /* B is K x M stored column-major: element (p, j) at p + j * K. */
  bp_tensor_desc_t da = desc(ba, 64, BP_DTYPE_F32, 2, (int64_t[]){N, K}, (int64_t[]){K, 1});
  bp_tensor_desc_t db = desc(bb, 0, BP_DTYPE_F32, 2, (int64_t[]){K, M}, (int64_t[]){1, K});
  bp_tensor_desc_t dout = desc(bo, 0, BP_DTYPE_F32, 2, (int64_t[]){N, M}, (int64_t[]){LDO, 1});
  const bp_tensor_desc_t* in[] = {&da, &db};
  const bp_tensor_desc_t* out[] = {&dout};
  bp_op_call_t c = call_of(BP_OP_mm, 2, in, out, NULL);
  assert_int_equal(support(&c, NULL), BP_SUPPORT_OK);
  assert_int_equal(run(&c), BP_OK);
  assert_int_equal(C->copy_device_to_host(g_fx.s, bo, 0, o, sizeof o), BP_OK);
  sync_ok(g_fx.s);
  for (int i = 0; i < N; ++i)
    for (int j = 0; j < M; ++j) {
      double want = 0;
      for (int p = 0; p < K; ++p) want += (double)AT(a, i, p, K, 1) * AT(b, p, j, 1, K);
      assert_float_equal(o[i * LDO + j], want, 1e-4);
    }
  assert_int_equal(o[LDO - 1], 0.0f); /* the padding is left alone */
  assert_int_equal(F->call_count("cublasLtMatmul"), 1);
  /* Neither stride 1: cuBLASLt refuses it (the shared matmul kernel takes
   * it: test_kernel_matmul_fallback). */
  bp_tensor_desc_t odd = desc(bb, 0, BP_DTYPE_F32, 2, (int64_t[]){K / 2, M}, (int64_t[]){2, 2 * K});
  in[1] = &odd;
  da.sizes[1] = K / 2;
  char msg[256];
  assert_int_equal(cuda_gemm_support_of(&c, msg), BP_SUPPORT_LAYOUT);
  assert_non_null(strstr(msg, "unit stride"));
  C->buffer_release(ba);
  C->buffer_release(bb);
  C->buffer_release(bo);
}

/* bmm in bf16 with a broadcast batch operand (batch stride 0). */
static void test_gemm_bmm_bf16(void** state) {
  (void)state;
  open_device();
  enum { B = 3, N = 2, K = 4, M = 5 };
  uint16_t a[B * N * K], w[K * M], o[B * N * M];
  float af[B * N * K], wf[K * M];
  for (int i = 0; i < B * N * K; ++i) af[i] = (float)(i % 5) - 2.0f, a[i] = bp_f32_to_bf16_(af[i]);
  for (int i = 0; i < K * M; ++i) wf[i] = (float)(i % 3) * 0.25f, w[i] = bp_f32_to_bf16_(wf[i]);
  bpp_buffer_t ba = upload(a, sizeof a), bw = upload(w, sizeof w), bo = alloc_in(0, sizeof o);
  bp_tensor_desc_t da = desc(ba, 0, BP_DTYPE_BF16, 3, (int64_t[]){B, N, K}, (int64_t[]){N * K, K, 1});
  bp_tensor_desc_t dw = desc(bw, 0, BP_DTYPE_BF16, 3, (int64_t[]){B, K, M}, (int64_t[]){0, M, 1});
  bp_tensor_desc_t dout = desc(bo, 0, BP_DTYPE_BF16, 3, (int64_t[]){B, N, M}, (int64_t[]){N * M, M, 1});
  const bp_tensor_desc_t* in[] = {&da, &dw};
  const bp_tensor_desc_t* out[] = {&dout};
  bp_op_call_t c = call_of(BP_OP_bmm, 2, in, out, NULL);
  assert_int_equal(support(&c, NULL), BP_SUPPORT_OK);
  assert_int_equal(run(&c), BP_OK);
  assert_int_equal(C->copy_device_to_host(g_fx.s, bo, 0, o, sizeof o), BP_OK);
  sync_ok(g_fx.s);
  for (int bt = 0; bt < B; ++bt)
    for (int i = 0; i < N; ++i)
      for (int j = 0; j < M; ++j) {
        double want = 0;
        for (int p = 0; p < K; ++p) want += (double)af[bt * N * K + i * K + p] * wf[p * M + j];
        assert_float_equal(bp_bf16_to_f32_(o[bt * N * M + i * M + j]), want, 0.05);
      }
  release_all((bpp_buffer_t[]){ba, bw, bo}, 3);
}

/* addmm: a full self goes to cuBLASLt's C (beta, alpha), a broadcast row
 * to the bias epilogue (beta 1 only). */
static void test_gemm_addmm(void** state) {
  (void)state;
  open_device();
  enum { N = 3, K = 2, M = 4 };
  double a[N * K] = {1, 2, 3, 4, 5, 6}, w[K * M] = {1, 0, -1, 2, 0.5, 1, 1, -2};
  double self[N * M], row[M] = {10, 20, 30, 40}, o[N * M];
  for (int i = 0; i < N * M; ++i) self[i] = i;
  bpp_buffer_t ba = upload(a, sizeof a), bw = upload(w, sizeof w), bs = upload(self, sizeof self),
               br = upload(row, sizeof row), bo = alloc_in(0, sizeof o);
  bp_tensor_desc_t da = desc(ba, 0, BP_DTYPE_F64, 2, (int64_t[]){N, K}, (int64_t[]){K, 1});
  bp_tensor_desc_t dw = desc(bw, 0, BP_DTYPE_F64, 2, (int64_t[]){K, M}, (int64_t[]){M, 1});
  bp_tensor_desc_t ds = desc(bs, 0, BP_DTYPE_F64, 2, (int64_t[]){N, M}, (int64_t[]){M, 1});
  bp_tensor_desc_t dr = desc(br, 0, BP_DTYPE_F64, 1, (int64_t[]){M}, (int64_t[]){1});
  bp_tensor_desc_t dout = desc(bo, 0, BP_DTYPE_F64, 2, (int64_t[]){N, M}, (int64_t[]){M, 1});
  const bp_tensor_desc_t* in[] = {&ds, &da, &dw};
  const bp_tensor_desc_t* out[] = {&dout};
  bp_addmm_attrs_t at = {.struct_size = sizeof at, .beta = {.kind = BP_SCALAR_FLOAT, .v.f = 0.5},
                         .alpha = {.kind = BP_SCALAR_FLOAT, .v.f = 2.0}};
  bp_op_call_t c = call_of(BP_OP_addmm, 3, in, out, &at);
  for (int form = 0; form < 2; ++form) {
    if (form == 1) in[0] = &dr, at.beta.v.f = 1.0;
    assert_int_equal(support(&c, NULL), BP_SUPPORT_OK);
    assert_int_equal(run(&c), BP_OK);
    assert_int_equal(C->copy_device_to_host(g_fx.s, bo, 0, o, sizeof o), BP_OK);
    sync_ok(g_fx.s);
    for (int i = 0; i < N; ++i)
      for (int j = 0; j < M; ++j) {
        double p = 0;
        for (int q = 0; q < K; ++q) p += a[i * K + q] * w[q * M + j];
        double want = 2.0 * p + (form ? row[j] : 0.5 * self[i * M + j]);
        assert_float_equal(o[i * M + j], want, 1e-12);
      }
  }
  at.beta.v.f = 2.0; /* a broadcast self scaled: no cuBLASLt form */
  char msg[256];
  assert_int_equal(cuda_gemm_support_of(&c, msg), BP_SUPPORT_ATTRIBUTE);
  assert_non_null(strstr(msg, "beta = 1"));
  release_all((bpp_buffer_t[]){ba, bw, bs, br, bo}, 5);
}

/* linear: input [2, 3, K] merged into 6 rows, weight [N, K] used
 * transposed, bias and relu / tanh-gelu as cuBLASLt epilogues. */
static void test_gemm_linear_epilogues(void** state) {
  (void)state;
  open_device();
  enum { R = 6, K = 4, N = 3 };
  float x[R * K], w[N * K], bias[N] = {0.5f, -3.0f, 1.0f}, o[R * N];
  for (int i = 0; i < R * K; ++i) x[i] = (float)((i * 7) % 9) - 4.0f;
  for (int i = 0; i < N * K; ++i) w[i] = (float)((i * 5) % 7) * 0.25f - 0.5f;
  bpp_buffer_t bx = upload(x, sizeof x), bw = upload(w, sizeof w), bb = upload(bias, sizeof bias),
               bo = alloc_in(0, sizeof o);
  bp_tensor_desc_t dx = desc(bx, 0, BP_DTYPE_F32, 3, (int64_t[]){2, 3, K}, (int64_t[]){3 * K, K, 1});
  bp_tensor_desc_t dw = desc(bw, 0, BP_DTYPE_F32, 2, (int64_t[]){N, K}, (int64_t[]){K, 1});
  bp_tensor_desc_t db = desc(bb, 0, BP_DTYPE_F32, 1, (int64_t[]){N}, (int64_t[]){1});
  bp_tensor_desc_t dout = desc(bo, 0, BP_DTYPE_F32, 3, (int64_t[]){2, 3, N}, (int64_t[]){3 * N, N, 1});
  const bp_tensor_desc_t* in[] = {&dx, &dw, &db};
  const bp_tensor_desc_t* out[] = {&dout};
  bp_linear_attrs_t la = {.struct_size = sizeof la};
  bp_op_call_t c = call_of(BP_OP_linear, 3, in, out, &la);
  const uint32_t acts[] = {BP_ACTIVATION_NONE, BP_ACTIVATION_RELU, BP_ACTIVATION_GELU_TANH};
  for (int t = 0; t < 3; ++t) {
    la.activation = acts[t];
    assert_int_equal(support(&c, NULL), BP_SUPPORT_OK);
    assert_int_equal(run(&c), BP_OK);
    assert_int_equal(C->copy_device_to_host(g_fx.s, bo, 0, o, sizeof o), BP_OK);
    sync_ok(g_fx.s);
    for (int r = 0; r < R; ++r)
      for (int n = 0; n < N; ++n) {
        double v = bias[n];
        for (int k = 0; k < K; ++k) v += (double)x[r * K + k] * w[n * K + k];
        if (acts[t] == BP_ACTIVATION_RELU && v < 0) v = 0;
        if (acts[t] == BP_ACTIVATION_GELU_TANH)
          v = 0.5 * v * (1 + tanh(0.7978845608028654 * (v + 0.044715 * v * v * v)));
        assert_float_equal(o[r * N + n], v, 1e-4);
      }
  }
  char msg[256];
  la.activation = BP_ACTIVATION_GELU_ERF;
  assert_int_equal(cuda_gemm_support_of(&c, msg), BP_SUPPORT_ATTRIBUTE);
  assert_non_null(strstr(msg, "relu and tanh-gelu only"));
  la.activation = BP_ACTIVATION_NONE;
  dx.dtype = dw.dtype = dout.dtype = db.dtype = BP_DTYPE_I32;
  assert_int_equal(cuda_gemm_support_of(&c, msg), BP_SUPPORT_DTYPE);
  /* Ops without a CUDA kernel are answered honestly. */
  bp_conv_attrs_t conv = {.struct_size = sizeof conv, .spatial_dims = 1};
  c.op_id = BP_OP_convolution;
  c.attrs = &conv;
  assert_int_equal(support(&c, msg), BP_SUPPORT_OP);
  assert_non_null(strstr(msg, "no CUDA kernel"));
  release_all((bpp_buffer_t[]){bx, bw, bb, bo}, 4);
}

/* Without cuBLASLt: an f32 mm runs on the shared matmul kernel; what
 * neither takes (i32) is unsupported with cuBLASLt's absence as reason. */
static void test_gemm_without_cublaslt(void** state) {
  (void)state;
  setenv("BP_CUBLASLT_PATH", "/nonexistent/libcublasLt.so.13", 1);
  open_device();
  setenv("BP_CUBLASLT_PATH", FAKE_CUDA_PATH, 1);
  float x[4] = {1, 2, 3, 4}, o[4];
  bpp_buffer_t bx = upload(x, sizeof x), bo = alloc_in(0, sizeof o);
  bp_tensor_desc_t dx = desc(bx, 0, BP_DTYPE_F32, 2, (int64_t[]){2, 2}, (int64_t[]){2, 1});
  bp_tensor_desc_t dout = desc(bo, 0, BP_DTYPE_F32, 2, (int64_t[]){2, 2}, (int64_t[]){2, 1});
  const bp_tensor_desc_t* in[] = {&dx, &dx};
  const bp_tensor_desc_t* out[] = {&dout};
  bp_op_call_t c = call_of(BP_OP_mm, 2, in, out, NULL);
  char msg[256];
  assert_int_equal(support(&c, msg), BP_SUPPORT_OK);
  assert_int_equal(run(&c), BP_OK);
  assert_int_equal(C->copy_device_to_host(g_fx.s, bo, 0, o, sizeof o), BP_OK);
  sync_ok(g_fx.s);
  const float want[4] = {7, 10, 15, 22};
  assert_memory_equal(o, want, sizeof o);
  assert_int_equal(F->call_count("cublasLtMatmul"), 0);
  dx.dtype = dout.dtype = BP_DTYPE_I32;
  assert_int_equal(support(&c, msg), BP_SUPPORT_OP);
  assert_non_null(strstr(msg, "no cuBLASLt (cannot load /nonexistent/libcublasLt.so.13"));
  release_all((bpp_buffer_t[]){bx, bo}, 2);
}

/* ---- kernels of the shared source ------------------------------------------------ */
/* add over broadcast operands in pinned memory (host-visible, so the test
 * knows their device addresses): the launch's name, shape and parameters
 * as the fake recorded them, and the result the fake computed by running
 * the same kernel source as host C. */
static void test_kernel_launch_add(void** state) {
  (void)state;
  open_device();
  enum { R = 5, W = 70 };
  float a[R * W], b[W], o[R * W];
  for (int i = 0; i < R * W; ++i) a[i] = (float)i * 0.5f;
  for (int i = 0; i < W; ++i) b[i] = (float)-i;
  bpp_buffer_t ba = alloc_in(1, sizeof a), bb = alloc_in(1, 64 + sizeof b), bo = alloc_in(1, sizeof o);
  void *pa, *pb, *po;
  assert_int_equal(C->buffer_map(ba, 0, sizeof a, &pa), BP_OK);
  assert_int_equal(C->buffer_map(bb, 0, 64 + sizeof b, &pb), BP_OK);
  assert_int_equal(C->buffer_map(bo, 0, sizeof o, &po), BP_OK);
  memcpy(pa, a, sizeof a);
  memcpy((char*)pb + 64, b, sizeof b);
  bp_tensor_desc_t da = desc(ba, 0, BP_DTYPE_F32, 2, (int64_t[]){R, W}, (int64_t[]){W, 1});
  bp_tensor_desc_t db = desc(bb, 64, BP_DTYPE_F32, 2, (int64_t[]){R, W}, (int64_t[]){0, 1});
  bp_tensor_desc_t dout = desc(bo, 0, BP_DTYPE_F32, 2, (int64_t[]){R, W}, (int64_t[]){W, 1});
  const bp_tensor_desc_t* in[] = {&da, &db};
  const bp_tensor_desc_t* out[] = {&dout};
  bp_binary_attrs_t ba_attrs = {.struct_size = sizeof ba_attrs,
                                .alpha = {.kind = BP_SCALAR_FLOAT, .v.f = 2.0}};
  bp_op_call_t c = call_of(BP_OP_add, 2, in, out, &ba_attrs);
  c.compute_dtype = BP_DTYPE_F32;
  assert_int_equal(support(&c, NULL), BP_SUPPORT_OK);
  assert_int_equal(run(&c), BP_OK);
  sync_ok(g_fx.s);
  for (int i = 0; i < R * W; ++i) assert_float_equal(((float*)po)[i], a[i] + 2.0f * b[i % W], 0);
  fake_cuda_launch_t l;
  uint64_t n = 0;
  F->last_launch(&l, &n);
  assert_int_equal(n, 1);
  assert_string_equal(l.name, "bp_ew_f32");
  assert_int_equal(l.nparams, 9); /* 8 operand slots and the argument block */
  assert_true((uint64_t)l.grid[0] * l.block[0] * l.grid[1] * l.block[1] >= R * W);
  assert_int_equal(l.shared_bytes, 0);
  /* Whole buffers are bound (offsets travel in the block): the inputs',
   * the output's, unused slots the first operand's; the block is not
   * any of them. */
  uintptr_t want[3] = {(uintptr_t)pa, (uintptr_t)pb, (uintptr_t)po};
  int seen[3] = {0, 0, 0};
  for (int i = 0; i < 8; ++i) {
    int known = 0;
    for (int k = 0; k < 3; ++k)
      if (l.params[i] == want[k]) seen[k] = known = 1;
    assert_true(known);
  }
  assert_true(seen[0] && seen[1] && seen[2]);
  for (int k = 0; k < 3; ++k) assert_true(l.params[8] != want[k]);
  /* A module that does not load: the launch fails with the driver's error. */
  release_all((bpp_buffer_t[]){ba, bb, bo}, 3);
  assert_int_equal(teardown(state), 0);
  setup(state);
  open_device();
  ba = alloc_in(1, sizeof a), bb = alloc_in(1, 64 + sizeof b), bo = alloc_in(1, sizeof o);
  da.buffer = ba, db.buffer = bb, dout.buffer = bo;
  F->fail_call("cuModuleLoadDataEx", 1, CUDA_ERROR_NOT_SUPPORTED);
  assert_int_equal(run(&c), BP_UNIMPLEMENTED);
  assert_non_null(strstr(g_msg, "loading kernel bp_ew_f32: CUDA_ERROR_NOT_SUPPORTED (801)"));
  release_all((bpp_buffer_t[]){ba, bb, bo}, 3);
}

/* The image a kernel module loads from: the cubin built for the device's
 * compute capability (sm_90 on 9.0, sm_80 on 8.6: SASS runs on newer
 * minors of its major), else the PTX through the JIT (7.5); a cubin the
 * driver refuses falls back to the PTX. Each path computes the same add. */
static void add_on(int cc, const char* want_image, int refuse_cubin) {
  void* st = NULL;
  setup(&st);
  F->set_compute_capability(cc);
  open_device();
  enum { W = 300 };
  float a[W], o[W];
  for (int i = 0; i < W; ++i) a[i] = (float)i - 100.0f;
  bpp_buffer_t ba = alloc_in(1, sizeof a), bo = alloc_in(1, sizeof o);
  void *pa, *po;
  assert_int_equal(C->buffer_map(ba, 0, sizeof a, &pa), BP_OK);
  assert_int_equal(C->buffer_map(bo, 0, sizeof o, &po), BP_OK);
  memcpy(pa, a, sizeof a);
  bp_tensor_desc_t da = desc(ba, 0, BP_DTYPE_F32, 1, (int64_t[]){W}, (int64_t[]){1});
  bp_tensor_desc_t dout = desc(bo, 0, BP_DTYPE_F32, 1, (int64_t[]){W}, (int64_t[]){1});
  const bp_tensor_desc_t* in[] = {&da, &da};
  const bp_tensor_desc_t* out[] = {&dout};
  bp_binary_attrs_t one = {.struct_size = sizeof one, .alpha = {.kind = BP_SCALAR_FLOAT, .v.f = 1.0}};
  bp_op_call_t c = call_of(BP_OP_add, 2, in, out, &one);
  c.compute_dtype = BP_DTYPE_F32;
  if (refuse_cubin) F->fail_call("cuModuleLoadDataEx", 1, CUDA_ERROR_NO_BINARY_FOR_GPU);
  assert_int_equal(run(&c), BP_OK);
  sync_ok(g_fx.s);
  for (int i = 0; i < W; ++i) assert_float_equal(((float*)po)[i], 2.0f * a[i], 0);
  char image[32];
  F->last_image(image, sizeof image);
  assert_string_equal(image, want_image);
  assert_int_equal(F->call_count("cuModuleLoadDataEx"), refuse_cubin ? 2 : 1);
  release_all((bpp_buffer_t[]){ba, bo}, 2);
  assert_int_equal(teardown(&st), 0);
}
static void test_kernel_image_by_compute_capability(void** state) {
  (void)state;
#if FAKE_CUDA_CUBINS
  add_on(90, "cubin sm_90", 0);
  add_on(86, "cubin sm_80", 0);
  add_on(90, "ptx", 1); /* refused: the PTX instead */
#else
  add_on(90, "ptx", 0); /* built without cubins */
#endif
  add_on(75, "ptx", 0);
  memset(&g_fx, 0, sizeof g_fx);
}

/* mm with neither stride 1 in an operand: cuBLASLt cannot take it, the
 * shared matmul kernel (local-memory tiles, barriers) does. */
static void test_kernel_matmul_fallback(void** state) {
  (void)state;
  open_device();
  enum { N = 9, K = 5, M = 7 };
  double a[N * K * 2], b[K * M], o[N * M];
  for (int i = 0; i < N * K * 2; ++i) a[i] = (double)(i % 13) - 6.0;
  for (int i = 0; i < K * M; ++i) b[i] = (double)(i % 5) * 0.5;
  bpp_buffer_t ba = upload(a, sizeof a), bb = upload(b, sizeof b), bo = alloc_in(0, sizeof o);
  /* A [N, K] read with a column stride of 2: no unit stride */
  bp_tensor_desc_t da = desc(ba, 0, BP_DTYPE_F64, 2, (int64_t[]){N, K}, (int64_t[]){2 * K, 2});
  bp_tensor_desc_t db = desc(bb, 0, BP_DTYPE_F64, 2, (int64_t[]){K, M}, (int64_t[]){M, 1});
  bp_tensor_desc_t dout = desc(bo, 0, BP_DTYPE_F64, 2, (int64_t[]){N, M}, (int64_t[]){M, 1});
  const bp_tensor_desc_t* in[] = {&da, &db};
  const bp_tensor_desc_t* out[] = {&dout};
  bp_op_call_t c = call_of(BP_OP_mm, 2, in, out, NULL);
  assert_int_equal(support(&c, NULL), BP_SUPPORT_OK);
  assert_int_equal(run(&c), BP_OK);
  assert_int_equal(C->copy_device_to_host(g_fx.s, bo, 0, o, sizeof o), BP_OK);
  sync_ok(g_fx.s);
  for (int i = 0; i < N; ++i)
    for (int j = 0; j < M; ++j) {
      double want = 0;
      for (int p = 0; p < K; ++p) want += a[i * 2 * K + 2 * p] * b[p * M + j];
      assert_float_equal(o[i * M + j], want, 1e-12);
    }
  fake_cuda_launch_t l;
  uint64_t n = 0;
  F->last_launch(&l, &n);
  assert_string_equal(l.name, "bp_matmul_f64");
  assert_int_equal(F->call_count("cublasLtMatmul"), 0);
  release_all((bpp_buffer_t[]){ba, bb, bo}, 3);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(test_no_library, setup, teardown),
      cmocka_unit_test_setup_teardown(test_library_lacks_entry, setup, teardown),
      cmocka_unit_test_setup_teardown(test_no_device, setup, teardown),
      cmocka_unit_test_setup_teardown(test_init_fails, setup, teardown),
      cmocka_unit_test_setup_teardown(test_properties, setup, teardown),
      cmocka_unit_test_setup_teardown(test_memory_spaces_roundtrip, setup, teardown),
      cmocka_unit_test_setup_teardown(test_memory_bad_requests, setup, teardown),
      cmocka_unit_test_setup_teardown(test_pools_when_supported, setup, teardown),
      cmocka_unit_test_setup_teardown(test_copies_overlap_memmove, setup, teardown),
      cmocka_unit_test_setup_teardown(test_fill_patterns, setup, teardown),
      cmocka_unit_test_setup_teardown(test_peer_copy, setup, teardown),
      cmocka_unit_test_setup_teardown(test_stream_priorities_and_query, setup, teardown),
      cmocka_unit_test_setup_teardown(test_event_cross_stream_order, setup, teardown),
      cmocka_unit_test_setup_teardown(test_events_recycled, setup, teardown),
      cmocka_unit_test_setup_teardown(test_fake_orders_for_real, setup, teardown),
      cmocka_unit_test_setup_teardown(test_event_timing, setup, teardown),
      cmocka_unit_test_setup_teardown(test_host_func_wait_value, setup, teardown),
      cmocka_unit_test_setup_teardown(test_host_func_blocking, setup, teardown),
      cmocka_unit_test_setup_teardown(test_fake_catches_call_in_callback, setup, teardown),
      cmocka_unit_test_setup_teardown(test_sticky_error_device_lost, setup, teardown),
      cmocka_unit_test_setup_teardown(test_error_mapping, setup, teardown),
      cmocka_unit_test_setup_teardown(test_gemm_mm_layouts, setup, teardown),
      cmocka_unit_test_setup_teardown(test_gemm_bmm_bf16, setup, teardown),
      cmocka_unit_test_setup_teardown(test_gemm_addmm, setup, teardown),
      cmocka_unit_test_setup_teardown(test_gemm_linear_epilogues, setup, teardown),
      cmocka_unit_test_setup_teardown(test_gemm_without_cublaslt, setup, teardown),
      cmocka_unit_test_setup_teardown(test_kernel_launch_add, setup, teardown),
      cmocka_unit_test_setup_teardown(test_kernel_matmul_fallback, setup, teardown),
      cmocka_unit_test_setup_teardown(test_kernel_image_by_compute_capability, setup, teardown),
  };
  return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
