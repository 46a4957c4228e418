/* Unit tests of the CPU plugin through its vtable (no libbackplane): the
 * checked build of the library (BP_PLUGIN_CHECKS, which also checks what the
 * core guarantees, since these tests bypass the core) is dlopen'ed from
 * BP_TEST_CHECKED_PLUGIN_DIR. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <dlfcn.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "backplane/plugin.h"

/* ---- host services: remember the last report --------------------------- */
static _Thread_local char g_last_msg[512];
static _Thread_local bp_status_t g_last_status;
static void host_report(void* ctx, bp_status_t st, const char* msg) {
  (void)ctx;
  g_last_status = st;
  snprintf(g_last_msg, sizeof g_last_msg, "%s", msg);
}
static char g_last_log[512]; /* the last warning logged (tests on one thread) */
static void host_log(void* ctx, int32_t level, const char* msg) {
  (void)ctx;
  if (level <= BP_LOG_WARN) snprintf(g_last_log, sizeof g_last_log, "%s", msg);
}
/* Like the core: warnings and errors are printed, so plugins format them. */
static int32_t host_log_enabled(void* ctx, int32_t level) { (void)ctx; return level <= BP_LOG_WARN; }
static const bp_host_services_t g_host = {
    .struct_size = sizeof(bp_host_services_t),
    .report = host_report,
    .log = host_log,
    .log_enabled = host_log_enabled,
};

static void* g_lib;
static bp_plugin_negotiate_fn g_negotiate;
static const bp_plugin_vtable_t* g_vt;
static const bp_stream_create_info_t k_stream_info = {.struct_size = sizeof(bp_stream_create_info_t)};
static const bp_event_create_info_t k_event_info = {.struct_size = sizeof(bp_event_create_info_t),
                                                    .flags = BP_EVENT_TIMING};

static const bpp_core_table_t* C;

typedef struct fx {
  bpp_instance_t inst;
  bpp_device_t dev;
  bpp_stream_t s;
} fx_t;

static int group_setup(void** state) {
  (void)state;
  char path[1024];
  snprintf(path, sizeof path, "%s/libbp_plugin_cpu.so", BP_TEST_CHECKED_PLUGIN_DIR);
  g_lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  if (!g_lib) {
    fprintf(stderr, "cannot load %s: %s\n", path, dlerror());
    return -1;
  }
  *(void**)&g_negotiate = dlsym(g_lib, BP_PLUGIN_ENTRY_NAME);
  if (!g_negotiate) return -1;
  bp_negotiate_request_t req = {.struct_size = sizeof req, .abi_major = BP_ABI_VERSION_MAJOR,
                                .abi_minor = BP_ABI_VERSION_MINOR, .host = &g_host};
  bp_negotiate_reply_t rep = {.struct_size = sizeof rep};
  if (g_negotiate(&req, &rep) != BP_OK) return -1;
  g_vt = rep.vtable;
  C = g_vt->core;
  return 0;
}

static int group_teardown(void** state) {
  (void)state;
  /* Not unloaded: the plugin's thread-local storage must outlive its threads. */
  return 0;
}

static int setup(void** state) {
  fx_t* f = calloc(1, sizeof *f);
  bpp_instance_create_info_t info = {.struct_size = sizeof info};
  if (!f || C->instance_create(&info, &f->inst) || C->device_open(f->inst, 0, &f->dev) ||
      C->stream_create(f->dev, &k_stream_info, &f->s))
    return -1;
  *state = f;
  return 0;
}

static int teardown(void** state) {
  fx_t* f = *state;
  C->stream_destroy(f->s);
  C->device_close(f->dev);
  C->instance_destroy(f->inst);
  free(f);
  return 0;
}

/* ---- helpers ----------------------------------------------------------- */
static bpp_buffer_t alloc_buf(fx_t* f, uint64_t bytes) {
  bp_buffer_alloc_info_t ai = {.struct_size = sizeof ai, .memory_space = 0, .size_bytes = bytes};
  bpp_buffer_t b = NULL;
  assert_int_equal(C->buffer_allocate(f->dev, &ai, &b), BP_OK);
  return b;
}
static void* map(bpp_buffer_t b, uint64_t size) {
  void* p = NULL;
  assert_int_equal(C->buffer_map(b, 0, size, &p), BP_OK);
  return p;
}
static bpp_buffer_t buf_with(fx_t* f, const void* data, uint64_t bytes) {
  bpp_buffer_t b = alloc_buf(f, bytes);
  memcpy(map(b, bytes), data, bytes);
  return b;
}

/* Descriptor: contiguous when strides is NULL. */
static bp_tensor_desc_t desc(bpp_buffer_t b, uint32_t dt, uint32_t rank, const int64_t* sizes,
                             const int64_t* strides, uint64_t offset) {
  bp_tensor_desc_t d = {.struct_size = sizeof d, .dtype = dt, .rank = rank, .buffer = b, .byte_offset = offset};
  int64_t s = 1;
  for (uint32_t i = rank; i-- > 0;) {
    d.sizes[i] = sizes[i];
    d.strides[i] = strides ? strides[i] : s;
    s *= sizes[i];
  }
  return d;
}
static bp_tensor_desc_t absent(void) {
  bp_tensor_desc_t d = {.struct_size = sizeof d, .dtype = BP_DTYPE_INVALID};
  return d;
}

/* Descriptor pointer arrays of one and two entries (bp_op_call_t). */
#define P1(x) ((const bp_tensor_desc_t* const[]){&(x)})
#define P2(a) ((const bp_tensor_desc_t* const[]){&(a)[0], &(a)[1]})

static bp_status_t launch(fx_t* f, uint32_t op, uint32_t cd, uint32_t nin, const bp_tensor_desc_t* in,
                          const bp_tensor_desc_t* out, const void* attrs) {
  const bp_tensor_desc_t* ins[16];
  assert_true(nin <= 16);
  for (uint32_t i = 0; i < nin; i++) ins[i] = &in[i];
  bp_op_call_t call = {.struct_size = sizeof call, .op_id = op, .num_inputs = nin, .num_outputs = 1,
                       .compute_dtype = cd, .inputs = ins, .outputs = &out, .attrs = attrs};
  /* The list operand's place, as the core sets it from ops.def. */
  if (op == BP_OP_cat) call.list_count = nin;
  if (op == BP_OP_index || op == BP_OP_index_put) {
    call.list_begin = 1;
    call.list_count = nin - (op == BP_OP_index_put ? 2 : 1);
  }
  return g_vt->ops->launch[op](f->s, &call);
}
static void run(fx_t* f, uint32_t op, uint32_t cd, uint32_t nin, const bp_tensor_desc_t* in,
                const bp_tensor_desc_t* out, const void* attrs) {
  assert_int_equal(launch(f, op, cd, nin, in, out, attrs), BP_OK);
  bp_status_t st = C->stream_synchronize(f->s);
  if (st) fprintf(stderr, "op %u failed: %s\n", op, g_last_msg);
  assert_int_equal(st, BP_OK);
}

static bp_binary_attrs_t battrs(void) {
  bp_binary_attrs_t a = {.struct_size = sizeof a};
  return a;
}
static bp_reduce_attrs_t rattrs(int ndims, const int32_t* dims, uint32_t flags) {
  bp_reduce_attrs_t a = {.struct_size = sizeof a, .flags = flags, .num_dims = ndims, .correction = 1};
  for (int i = 0; i < ndims; i++) a.dims[i] = dims[i];
  return a;
}

/* ---- negotiation and devices ------------------------------------------- */
static void test_negotiate(void** state) {
  (void)state;
  bp_negotiate_request_t req = {.struct_size = sizeof req, .abi_major = BP_ABI_VERSION_MAJOR + 1,
                                .abi_minor = 0, .host = &g_host};
  bp_negotiate_reply_t rep = {.struct_size = sizeof rep};
  g_last_msg[0] = 0;
  assert_int_equal(g_negotiate(&req, &rep), BP_FAILED_PRECONDITION);
  assert_non_null(strstr(g_last_msg, "ABI major"));
  req.abi_major = BP_ABI_VERSION_MAJOR;
  req.abi_minor = BP_ABI_VERSION_MINOR + 7;
  assert_int_equal(g_negotiate(&req, &rep), BP_OK);
  assert_int_equal(rep.abi_major, BP_ABI_VERSION_MAJOR);
  assert_int_equal(rep.abi_minor, BP_ABI_VERSION_MINOR);
  assert_string_equal(rep.name, "cpu");
  assert_non_null(rep.vtable->core);
  assert_non_null(rep.vtable->ops);
  assert_non_null(rep.vtable->exec); /* compiled regions (tests/region) */
  assert_int_equal(rep.vtable->exec->struct_size, BPP_EXEC_TABLE_V1_SIZE);
  /* Native collectives with host-pointer calls (docs/collectives.md). */
  assert_non_null(rep.vtable->comm);
  assert_int_equal(rep.vtable->comm->tier, BP_COMM_TIER_NATIVE);
  assert_true(rep.vtable->comm->flags & BPP_COMM_HOST_POINTERS);
  assert_int_equal(rep.vtable->comm->struct_size, BPP_COMM_TABLE_V1_SIZE);
  assert_int_equal(rep.vtable->ops->launch_count, BP_OP_COUNT);
  /* The CPU backend runs every op of the table. */
  for (uint32_t op = 1; op < BP_OP_COUNT; op++) assert_non_null(rep.vtable->ops->launch[op]);
  assert_null(rep.vtable->ops->launch[0]);
}

static void test_devices(void** state) {
  (void)state;
  setenv("BP_CPU_DEVICES", "3", 1);
  bpp_instance_t inst;
  bpp_instance_create_info_t info = {.struct_size = sizeof info};
  assert_int_equal(C->instance_create(&info, &inst), BP_OK);
  unsetenv("BP_CPU_DEVICES");
  uint32_t n = 0;
  assert_int_equal(C->device_count(inst, &n), BP_OK);
  assert_int_equal(n, 3);
  for (uint32_t i = 0; i < n; i++) {
    bpp_device_t d;
    assert_int_equal(C->device_open(inst, i, &d), BP_OK);
    bp_device_properties_t p = {.struct_size = sizeof p};
    assert_int_equal(C->device_get_properties(d, &p), BP_OK);
    char want[32];
    snprintf(want, sizeof want, "CPU %u (", i);
    assert_memory_equal(p.name, want, strlen(want));
    assert_int_equal(p.kind, BP_DEVICE_KIND_CPU);
    assert_true(p.memory_bytes > 0);
    assert_true(p.compute_units >= 1);
    assert_true(p.peak_ops_per_s[BP_DTYPE_F32] > 0);
    assert_true(p.flags & BP_DEVICE_FLAG_UNIFIED_MEMORY);
    assert_true(p.dtype_mask & BP_DTYPE_BIT(BP_DTYPE_C64)); /* storage for the fft ops */
    assert_true(p.dtype_mask & BP_DTYPE_BIT(BP_DTYPE_F8E4M3FN));
    C->device_close(d);
  }
  bpp_device_t d;
  assert_int_equal(C->device_open(inst, 3, &d), BP_NOT_FOUND);
  C->instance_destroy(inst);
}

/* ---- memory and copies ---------------------------------------------------- */
static void test_memory(void** state) {
  fx_t* f = *state;
  bp_buffer_alloc_info_t ai = {.struct_size = sizeof ai, .memory_space = 0, .size_bytes = 0};
  bpp_buffer_t b = NULL;
  g_last_msg[0] = 0;
  assert_int_equal(C->buffer_allocate(f->dev, &ai, &b), BP_INVALID_ARGUMENT);
  assert_non_null(strstr(g_last_msg, "size 0"));
  ai.size_bytes = UINT64_MAX - 3;
  assert_int_equal(C->buffer_allocate(f->dev, &ai, &b), BP_INVALID_ARGUMENT);
  ai.size_bytes = (uint64_t)1 << 62; /* too big for any machine */
  assert_int_equal(C->buffer_allocate(f->dev, &ai, &b), BP_RESOURCE_EXHAUSTED);
  assert_non_null(strstr(g_last_msg, "4611686018427387904"));

  uint64_t used0, budget;
  assert_int_equal(C->device_memory_usage(f->dev, BP_MEMORY_DEVICE, &used0, &budget), BP_OK);
  b = alloc_buf(f, 1000);
  uint64_t used1;
  assert_int_equal(C->device_memory_usage(f->dev, BP_MEMORY_DEVICE, &used1, &budget), BP_OK);
  assert_true(used1 >= used0 + 1000);
  uint8_t* p = map(b, 1000);
  assert_int_equal((uintptr_t)p % 64, 0);
  void* bad;
  assert_int_equal(C->buffer_map(b, 900, 200, &bad), BP_OUT_OF_RANGE);

  uint8_t zero = 0;
  assert_int_equal(C->buffer_fill(f->s, b, 0, 1000, &zero, 1), BP_OK);
  uint32_t pat = 0xdeadbeef;
  assert_int_equal(C->buffer_fill(f->s, b, 8, 40, &pat, 4), BP_OK);
  assert_int_equal(C->buffer_fill(f->s, b, 0, 6, &pat, 4), BP_INVALID_ARGUMENT);
  uint32_t host[12] = {0};
  assert_int_equal(C->copy_device_to_host(f->s, b, 4, host, sizeof host), BP_OK);
  assert_int_equal(C->stream_synchronize(f->s), BP_OK);
  assert_int_equal(host[1], 0xdeadbeef);
  assert_int_equal(host[10], 0xdeadbeef);
  assert_int_equal(host[11], 0);

  bp_memory_space_info_t spaces[4];
  for (int i = 0; i < 4; i++) spaces[i].struct_size = sizeof spaces[i];
  uint32_t ns = 0;
  assert_int_equal(C->device_memory_spaces(f->dev, 4, sizeof spaces[0], spaces, &ns), BP_OK);
  assert_int_equal(ns, 3);
  assert_int_equal(spaces[0].alignment_bytes, 64);
  assert_true(spaces[0].flags & BP_MEMORY_FLAG_HOST_VISIBLE);
  C->buffer_release(b);
  uint64_t used2;
  assert_int_equal(C->device_memory_usage(f->dev, BP_MEMORY_DEVICE, &used2, &budget), BP_OK);
  assert_int_equal(used2, used0);
}

/* ---- memory budget ---------------------------------------------------- */
static bpp_instance_t instance_with(const char* options) {
  bpp_instance_create_info_t info = {.struct_size = sizeof info, .options = options};
  bpp_instance_t inst = NULL;
  assert_int_equal(C->instance_create(&info, &inst), BP_OK);
  return inst;
}

/* Capacity of the device space of device 0 of an instance made with `options`. */
static uint64_t budget_with(const char* options) {
  bpp_instance_t inst = instance_with(options);
  bpp_device_t dev = NULL;
  assert_int_equal(C->device_open(inst, 0, &dev), BP_OK);
  bp_memory_space_info_t space = {.struct_size = sizeof space};
  uint32_t n = 0;
  assert_int_equal(C->device_memory_spaces(dev, 1, sizeof space, &space, &n), BP_OK);
  C->instance_destroy(inst);
  return space.capacity_bytes;
}

static uint64_t physical_bytes(void) {
  return (uint64_t)sysconf(_SC_PHYS_PAGES) * (uint64_t)sysconf(_SC_PAGESIZE);
}

/* Every buffer of the instance counts against one budget, shared by its
 * devices; past it, RESOURCE_EXHAUSTED names the requested and available
 * bytes; use and budget are reported. */
static void test_memory_budget(void** state) {
  (void)state;
  bpp_instance_t inst = instance_with("devices=2;memory_budget=1MiB");
  bpp_device_t d0 = NULL, d1 = NULL;
  assert_int_equal(C->device_open(inst, 0, &d0), BP_OK);
  assert_int_equal(C->device_open(inst, 1, &d1), BP_OK);
  bp_buffer_alloc_info_t ai = {.struct_size = sizeof ai, .memory_space = 0, .size_bytes = 512 << 10};
  bpp_buffer_t a = NULL, b = NULL, c = NULL;
  assert_int_equal(C->buffer_allocate(d0, &ai, &a), BP_OK);
  ai.memory_space = 1; /* host pinned: the same host memory, the same budget */
  assert_int_equal(C->buffer_allocate(d1, &ai, &b), BP_OK);
  uint64_t used = 0, budget = 0;
  assert_int_equal(C->device_memory_usage(d0, 2 /* host pageable */, &used, &budget), BP_OK);
  assert_int_equal(used, 1 << 20);
  assert_int_equal(budget, 1 << 20);
  ai.size_bytes = 1;
  g_last_msg[0] = 0;
  assert_int_equal(C->buffer_allocate(d0, &ai, &c), BP_RESOURCE_EXHAUSTED);
  assert_null(c);
  assert_non_null(strstr(g_last_msg, "1 bytes requested, 0 available"));
  assert_non_null(strstr(g_last_msg, "memory budget 1048576 bytes"));
  C->buffer_release(b);
  ai.size_bytes = 1000;
  assert_int_equal(C->buffer_allocate(d0, &ai, &c), BP_OK);
  ai.size_bytes = 600 << 10;
  assert_int_equal(C->buffer_allocate(d1, &ai, &b), BP_RESOURCE_EXHAUSTED);
  assert_non_null(strstr(g_last_msg, "614400 bytes requested, 523264 available")); /* 1000 -> 1024 */
  C->buffer_release(a);
  C->buffer_release(c);
  assert_int_equal(C->device_memory_usage(d1, BP_MEMORY_DEVICE, &used, &budget), BP_OK);
  assert_int_equal(used, 0);
  C->instance_destroy(inst);

  /* Units, and the default (physical memory less a margin). */
  uint64_t phys = physical_bytes();
  assert_int_equal(budget_with("memory_budget=1.5GiB"), (uint64_t)3 << 29);
  assert_int_equal(budget_with("memory_budget=2GB"), 2000000000);
  assert_int_equal(budget_with("memory_budget=64k;devices=1"), 65536);
  assert_int_equal(budget_with("memory_budget=4096"), 4096);
  assert_int_equal(budget_with("memory_budget=50%"), phys / 2);
  uint64_t dflt = budget_with(NULL);
  assert_true(dflt < phys && dflt >= phys / 2);
  static const char* const bad[] = {"memory_budget=banana", "memory_budget=-1G", "memory_budget=0",
                                    "memory_budget=12parsecs", "memory_budget=200%", "memory_budget="};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    g_last_log[0] = 0;
    assert_int_equal(budget_with(bad[i]), dflt);
    assert_non_null(strstr(g_last_log, "memory_budget"));
    assert_non_null(strstr(g_last_log, "using the default"));
  }
  assert_int_equal(budget_with("xmemory_budget=1K"), dflt); /* whole keys only */
}

/* 1 GiB allocations under the default budget end with RESOURCE_EXHAUSTED
 * before the machine's memory is promised twice over (the pages are never
 * touched, so this costs no memory). */
static void test_memory_exhaustion(void** state) {
  (void)state;
  if (getenv("BP_UNDER_VALGRIND")) skip(); /* valgrind's allocator refuses 1 GiB blocks */
  bpp_instance_t inst = instance_with(NULL);
  bpp_device_t dev = NULL;
  assert_int_equal(C->device_open(inst, 0, &dev), BP_OK);
  enum { MAX_TRIES = 100000 };
  static bpp_buffer_t held[MAX_TRIES];
  bp_buffer_alloc_info_t ai = {.struct_size = sizeof ai, .memory_space = 0, .size_bytes = 1ull << 30};
  uint32_t n = 0;
  bp_status_t st = BP_OK;
  while (n < MAX_TRIES && (st = C->buffer_allocate(dev, &ai, &held[n])) == BP_OK) n++;
  assert_int_equal(st, BP_RESOURCE_EXHAUSTED);
  assert_true(n < physical_bytes() >> 30);
  assert_non_null(strstr(g_last_msg, "1073741824 bytes requested"));
  for (uint32_t i = 0; i < n; i++) C->buffer_release(held[i]);
  C->instance_destroy(inst);
}

static void test_copies(void** state) {
  fx_t* f = *state;
  enum { N = 3 << 20 }; /* big enough for the parallel memcpy */
  uint8_t* src = malloc(N);
  uint8_t* dst = calloc(1, N);
  for (int i = 0; i < N; i++) src[i] = (uint8_t)(i * 7 + 3);
  bpp_buffer_t a = alloc_buf(f, N), b = alloc_buf(f, N);
  assert_int_equal(C->copy_host_to_device(f->s, src, a, 0, N), BP_OK);
  assert_int_equal(C->copy_device_to_device(f->s, a, 0, b, 0, N), BP_OK);
  assert_int_equal(C->copy_peer(f->s, b, 16, a, 0, 64), BP_OK);
  assert_int_equal(C->copy_device_to_host(f->s, b, 0, dst, N), BP_OK);
  assert_int_equal(C->copy_device_to_device(f->s, a, N - 4, b, 0, 8), BP_OUT_OF_RANGE);
  assert_int_equal(C->stream_synchronize(f->s), BP_OK);
  assert_memory_equal(src, dst, N);
  uint8_t head[64];
  assert_int_equal(C->copy_device_to_host(f->s, a, 0, head, 64), BP_OK);
  assert_int_equal(C->stream_synchronize(f->s), BP_OK);
  assert_memory_equal(head, src + 16, 64);
  C->buffer_release(a);
  C->buffer_release(b);
  free(src);
  free(dst);
}

/* ---- streams, events, host functions -------------------------------------- */
static void test_stream_ordering(void** state) {
  fx_t* f = *state;
  enum { N = 1000, OPS = 700 }; /* more ops than ring slots: the producer waits */
  float zeros[N] = {0};
  bpp_buffer_t b = buf_with(f, zeros, sizeof zeros);
  int64_t n = N;
  bp_tensor_desc_t x = desc(b, BP_DTYPE_F32, 1, &n, NULL, 0);
  bp_tensor_desc_t in[2] = {x, absent()};
  bp_binary_attrs_t a = battrs();
  a.flags = BP_BINARY_OTHER_IS_SCALAR;
  a.scalar = (bp_scalar_t){.kind = BP_SCALAR_FLOAT, .v.f = 1.0};
  for (int i = 0; i < OPS; i++) assert_int_equal(launch(f, BP_OP_add, BP_DTYPE_F32, 2, in, &x, &a), BP_OK);
  assert_int_equal(C->stream_synchronize(f->s), BP_OK);
  assert_int_equal(C->stream_query(f->s), BP_OK);
  float* p = map(b, sizeof zeros);
  assert_true(p[0] == OPS && p[N - 1] == OPS);
  C->buffer_release(b);
}

static void sleep_ms(int ms) {
  struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
  nanosleep(&ts, NULL);
}
typedef struct hf_state { int order[8]; int count; pthread_mutex_t mu; } hf_state_t;
typedef struct hf_arg { hf_state_t* st; int id; int sleep_ms; } hf_arg_t;
static bp_status_t host_fn(void* user) {
  hf_arg_t* a = user;
  if (a->sleep_ms) sleep_ms(a->sleep_ms);
  pthread_mutex_lock(&a->st->mu);
  a->st->order[a->st->count++] = a->id;
  pthread_mutex_unlock(&a->st->mu);
  return BP_OK;
}

static bp_status_t host_fn_fails(void* user) {
  (void)user;
  return BP_DATA_LOSS;
}

/* A host function that fails poisons the stream: its status is the next
 * synchronize's, once; what follows it still runs. */
static void test_host_func_poisons(void** state) {
  fx_t* f = *state;
  hf_state_t st = {.count = 0};
  pthread_mutex_init(&st.mu, NULL);
  hf_arg_t after = {&st, 7, 0};
  assert_int_equal(C->stream_enqueue_host_func(f->s, host_fn_fails, NULL), BP_OK);
  assert_int_equal(C->stream_enqueue_host_func(f->s, host_fn, &after), BP_OK);
  g_last_msg[0] = 0;
  assert_int_equal(C->stream_synchronize(f->s), BP_DATA_LOSS);
  assert_non_null(strstr(g_last_msg, "host function failed"));
  assert_int_equal(C->stream_synchronize(f->s), BP_OK);
  assert_int_equal(st.count, 1);
  pthread_mutex_destroy(&st.mu);
}

/* Create-info: what the CPU can honour it takes, the rest it refuses. */
static void test_create_info(void** state) {
  fx_t* f = *state;
  bpp_stream_t s = NULL;
  bp_stream_create_info_t si = {.struct_size = sizeof si, .queue = BP_QUEUE_COPY, .priority = -3};
  assert_int_equal(C->stream_create(f->dev, &si, &s), BP_OK);
  C->stream_destroy(s);
  si.queue = 9;
  assert_int_equal(C->stream_create(f->dev, &si, &s), BP_INVALID_ARGUMENT);
  si.queue = BP_QUEUE_COMPUTE;
  si.struct_size = 4;
  assert_int_equal(C->stream_create(f->dev, &si, &s), BP_INVALID_ARGUMENT);
  bpp_event_t e = NULL;
  bp_event_create_info_t ei = {.struct_size = sizeof ei, .flags = BP_EVENT_EXPORTABLE};
  g_last_msg[0] = 0;
  assert_int_equal(C->event_create(f->dev, &ei, &e), BP_UNIMPLEMENTED);
  assert_non_null(strstr(g_last_msg, "exportable"));
  ei.flags = 1u << 9;
  assert_int_equal(C->event_create(f->dev, &ei, &e), BP_INVALID_ARGUMENT);
  ei.flags = BP_EVENT_TIMING;
  assert_int_equal(C->event_create(f->dev, &ei, &e), BP_OK);
  C->event_destroy(e);
}

static void test_events(void** state) {
  fx_t* f = *state;
  bpp_stream_t s2;
  assert_int_equal(C->stream_create(f->dev, &k_stream_info, &s2), BP_OK);
  bpp_event_t e0, e1;
  assert_int_equal(C->event_create(f->dev, &k_event_info, &e0), BP_OK);
  assert_int_equal(C->event_create(f->dev, &k_event_info, &e1), BP_OK);
  assert_int_equal(C->event_query(e1), BP_OK); /* never recorded: complete */
  hf_state_t st = {.count = 0};
  pthread_mutex_init(&st.mu, NULL);
  hf_arg_t slow = {&st, 1, 100}, after = {&st, 2, 0}, other = {&st, 3, 0};
  assert_int_equal(C->event_record(e0, f->s), BP_OK);
  assert_int_equal(C->stream_enqueue_host_func(f->s, host_fn, &slow), BP_OK);
  assert_int_equal(C->event_record(e1, f->s), BP_OK);
  assert_int_equal(C->stream_wait_event(s2, e1), BP_OK);
  assert_int_equal(C->stream_enqueue_host_func(s2, host_fn, &after), BP_OK);
  assert_int_equal(C->event_query(e1), BP_NOT_READY);
  uint64_t ns = 0;
  assert_int_equal(C->event_elapsed_ns(e0, e1, &ns), BP_NOT_READY);
  assert_int_equal(C->stream_query(s2), BP_NOT_READY);
  assert_int_equal(C->stream_synchronize(s2), BP_OK);
  assert_int_equal(C->event_query(e1), BP_OK);
  assert_int_equal(C->event_synchronize(e1), BP_OK);
  assert_int_equal(C->event_elapsed_ns(e0, e1, &ns), BP_OK);
  assert_true(ns >= 50 * 1000000ull);
  /* s2 ran its host function only after the slow one on s1. */
  assert_int_equal(st.count, 2);
  assert_int_equal(st.order[0], 1);
  assert_int_equal(st.order[1], 2);
  assert_int_equal(C->stream_enqueue_host_func(f->s, host_fn, &other), BP_OK);
  assert_int_equal(C->stream_synchronize(f->s), BP_OK);
  assert_int_equal(st.order[2], 3);
  assert_int_equal(C->stream_enqueue_host_func(f->s, NULL, NULL), BP_INVALID_ARGUMENT);
  C->event_destroy(e0);
  C->event_destroy(e1);
  C->stream_destroy(s2);
  pthread_mutex_destroy(&st.mu);
}

static void test_sticky_error(void** state) {
  fx_t* f = *state;
  float v[6] = {0};
  bpp_buffer_t b = buf_with(f, v, sizeof v);
  int64_t s23[2] = {2, 3}, s22[2] = {2, 2}, s24[2] = {2, 4};
  /* cat [2,3] + [2,2] into [2,4]: sizes do not add up; found when it runs. */
  bp_tensor_desc_t in[2] = {desc(b, BP_DTYPE_F32, 2, s23, NULL, 0), desc(b, BP_DTYPE_F32, 2, s22, NULL, 0)};
  bp_tensor_desc_t out = desc(b, BP_DTYPE_F32, 2, s24, (int64_t[]){0, 0}, 0);
  bp_dim_attrs_t a = {.struct_size = sizeof a, .dim = 1};
  assert_int_equal(launch(f, BP_OP_cat, BP_DTYPE_F32, 2, in, &out, &a), BP_OK);
  g_last_msg[0] = 0;
  assert_int_equal(C->stream_synchronize(f->s), BP_INVALID_ARGUMENT);
  assert_non_null(strstr(g_last_msg, "cat"));
  assert_int_equal(C->stream_synchronize(f->s), BP_OK); /* reported once */
  C->buffer_release(b);
}

/* ---- bad input ------------------------------------------------------------ */
static void test_bad_input(void** state) {
  fx_t* f = *state;
  float v[4] = {1, 2, 3, 4};
  bpp_buffer_t b = buf_with(f, v, sizeof v);
  int64_t n = 4;
  bp_tensor_desc_t good = desc(b, BP_DTYPE_F32, 1, &n, NULL, 0);
  bp_tensor_desc_t in[2] = {good, good};
  bp_binary_attrs_t a = battrs();
  bp_op_call_t call = {.struct_size = sizeof call, .op_id = BP_OP_add, .num_inputs = 2, .num_outputs = 1,
                       .compute_dtype = BP_DTYPE_F32, .inputs = P2(in), .outputs = P1(good), .attrs = &a};
  bpp_op_launch_fn add = g_vt->ops->launch[BP_OP_add];
  in[1].dtype = 99;
  g_last_msg[0] = 0;
  assert_int_equal(add(f->s, &call), BP_INVALID_ARGUMENT);
  assert_non_null(strstr(g_last_msg, "dtype"));
  in[1] = good;
  in[1].buffer = NULL;
  assert_int_equal(add(f->s, &call), BP_INVALID_ARGUMENT);
  assert_non_null(strstr(g_last_msg, "NULL buffer"));
  in[1] = good;
  in[1].rank = 9;
  assert_int_equal(add(f->s, &call), BP_INVALID_ARGUMENT);
  in[1] = good;
  in[1].sizes[0] = 5; /* past the end of the 16-byte buffer */
  assert_int_equal(add(f->s, &call), BP_OUT_OF_RANGE);
  in[1] = good;
  call.num_inputs = 1;
  assert_int_equal(add(f->s, &call), BP_INVALID_ARGUMENT);
  call.num_inputs = 2;
  call.attrs = NULL;
  assert_int_equal(add(f->s, &call), BP_INVALID_ARGUMENT);
  call.attrs = &a;
  /* Op ids outside the table, called through the shared launch function. */
  call.op_id = 0;
  g_last_msg[0] = 0;
  assert_int_equal(add(f->s, &call), BP_INVALID_ARGUMENT);
  assert_non_null(strstr(g_last_msg, "op id 0"));
  call.op_id = 5000;
  assert_int_equal(add(f->s, &call), BP_INVALID_ARGUMENT);
  assert_int_equal(C->stream_synchronize(f->s), BP_OK);
  C->buffer_release(b);
}

/* ---- support answers -------------------------------------------------------- */
static void test_support(void** state) {
  fx_t* f = *state;
  int64_t n = 4;
  bp_tensor_desc_t d32 = desc(NULL, BP_DTYPE_F32, 1, &n, NULL, 0);
  bp_tensor_desc_t in[2] = {d32, d32};
  bp_binary_attrs_t a = battrs();
  bp_op_call_t call = {.struct_size = sizeof call, .op_id = BP_OP_add, .num_inputs = 2, .num_outputs = 1,
                       .compute_dtype = BP_DTYPE_F32, .inputs = P2(in), .outputs = P1(d32), .attrs = &a};
  bp_support_t s = {.struct_size = sizeof s};
  const bpp_caps_table_t* caps = g_vt->caps;
  assert_int_equal(caps->query_support(f->dev, &call, &s), BP_OK);
  assert_int_equal(s.supported, 1);
  assert_int_equal(s.requires_contiguous, 0);
  call.op_id = BP_OP_COUNT; /* an id past the table (a newer op) */
  assert_int_equal(caps->query_support(f->dev, &call, &s), BP_OK);
  assert_int_equal(s.supported, 0);
  assert_int_equal(s.reason, BP_SUPPORT_OP);
  call.op_id = BP_OP_add;
  /* sin on fp8: storage type only */
  bp_tensor_desc_t f8 = desc(NULL, BP_DTYPE_F8E4M3FN, 1, &n, NULL, 0);
  call = (bp_op_call_t){.struct_size = sizeof call, .op_id = BP_OP_sin, .num_inputs = 1, .num_outputs = 1,
                        .compute_dtype = BP_DTYPE_F8E4M3FN, .inputs = P1(f8), .outputs = P1(f8)};
  assert_int_equal(caps->query_support(f->dev, &call, &s), BP_OK);
  assert_int_equal(s.supported, 0);
  assert_int_equal(s.reason, BP_SUPPORT_DTYPE);
  assert_true(strlen(s.message) > 0);
  /* bitwise_and on f32: no kernel */
  call = (bp_op_call_t){.struct_size = sizeof call, .op_id = BP_OP_bitwise_and, .num_inputs = 2,
                        .num_outputs = 1, .compute_dtype = BP_DTYPE_F32, .inputs = P2(in), .outputs = P1(d32), .attrs = &a};
  assert_int_equal(caps->query_support(f->dev, &call, &s), BP_OK);
  assert_int_equal(s.supported, 0);
  assert_int_equal(s.reason, BP_SUPPORT_DTYPE);
  /* to_copy into fp8 is supported; mm on bool is not */
  bp_cast_attrs_t ca = {.struct_size = sizeof ca, .dtype = BP_DTYPE_F8E4M3FN};
  call = (bp_op_call_t){.struct_size = sizeof call, .op_id = BP_OP_to_copy, .num_inputs = 1,
                        .num_outputs = 1, .inputs = P1(d32), .outputs = P1(f8), .attrs = &ca};
  assert_int_equal(caps->query_support(f->dev, &call, &s), BP_OK);
  assert_int_equal(s.supported, 1);
  int64_t mk[2] = {2, 2};
  bp_tensor_desc_t mb[2] = {desc(NULL, BP_DTYPE_BOOL, 2, mk, NULL, 0), desc(NULL, BP_DTYPE_BOOL, 2, mk, NULL, 0)};
  call = (bp_op_call_t){.struct_size = sizeof call, .op_id = BP_OP_mm, .num_inputs = 2,
                        .num_outputs = 1, .inputs = P2(mb), .outputs = P1(mb[0])};
  assert_int_equal(caps->query_support(f->dev, &call, &s), BP_OK);
  assert_int_equal(s.supported, 0);
  assert_int_equal(s.reason, BP_SUPPORT_DTYPE);
  bp_cost_estimate_t ce = {.struct_size = sizeof ce};
  mb[0].dtype = mb[1].dtype = BP_DTYPE_F32;
  assert_int_equal(caps->estimate_cost(f->dev, &call, &ce), BP_OK);
  assert_true(ce.flops == 16 && ce.time_ns > 0);
  bp_fusion_caps_t fc = {.struct_size = sizeof fc};
  assert_int_equal(caps->query_fusion(f->dev, &fc), BP_OK);
  /* Elementwise programs, epilogues and patterns are declared (and run:
   * tests/region). */
  assert_true(fc.ew_max_instrs >= 64 && fc.ew_max_registers >= 16 && fc.ew_max_inputs >= 8);
  assert_true(fc.ew_opcode_words * 64 >= BP_OP_COUNT && fc.ew_opcode_mask != NULL);
  assert_true(fc.ew_opcode_mask[BP_OP_add / 64] & (1ull << (BP_OP_add % 64)));
  assert_false(fc.ew_opcode_mask[BP_OP_mm / 64] & (1ull << (BP_OP_mm % 64)));
  assert_true(fc.ew_dtype_mask & BP_DTYPE_BIT(BP_DTYPE_F32));
  assert_true(fc.matmul_epilogues & BP_EPILOGUE_EW_PROGRAM);
  assert_true(fc.num_patterns > 0 && fc.patterns != NULL);
  assert_non_null(caps->launch_ew_program);
}

/* ---- numerics ------------------------------------------------------------ */
static void test_add_broadcast_alpha(void** state) {
  fx_t* f = *state;
  float a[6] = {1, 2, 3, 4, 5, 6}, b[3] = {10, 20, 30}, o[6];
  bpp_buffer_t ba = buf_with(f, a, sizeof a), bb = buf_with(f, b, sizeof b), bo = alloc_buf(f, sizeof o);
  int64_t s23[2] = {2, 3}, s3 = 3;
  bp_tensor_desc_t in[2] = {desc(ba, BP_DTYPE_F32, 2, s23, NULL, 0), desc(bb, BP_DTYPE_F32, 1, &s3, NULL, 0)};
  bp_tensor_desc_t out = desc(bo, BP_DTYPE_F32, 2, s23, NULL, 0);
  bp_binary_attrs_t at = battrs();
  at.alpha = (bp_scalar_t){.kind = BP_SCALAR_FLOAT, .v.f = 2};
  run(f, BP_OP_sub, BP_DTYPE_F32, 2, in, &out, &at);
  float* p = map(bo, sizeof o);
  float want[6] = {-19, -38, -57, -16, -35, -54};
  for (int i = 0; i < 6; i++) assert_true(p[i] == want[i]);
  /* permuted input: a^T viewed [3,2] with strides (1,3), plus b[:, None] */
  int64_t s32[2] = {3, 2}, st_t[2] = {1, 3}, st_col[2] = {1, 0};
  in[0] = desc(ba, BP_DTYPE_F32, 2, s32, st_t, 0);
  in[1] = desc(bb, BP_DTYPE_F32, 2, s32, st_col, 0);
  out = desc(bo, BP_DTYPE_F32, 2, s32, NULL, 0);
  at = battrs();
  run(f, BP_OP_add, BP_DTYPE_F32, 2, in, &out, &at);
  float want2[6] = {11, 14, 22, 25, 33, 36};
  for (int i = 0; i < 6; i++) assert_true(p[i] == want2[i]);
  C->buffer_release(ba);
  C->buffer_release(bb);
  C->buffer_release(bo);
}

static uint16_t h(float x) { /* f16 bits of a small exact value (test helper) */
  uint32_t u;
  memcpy(&u, &x, 4);
  uint32_t e = ((u >> 23) & 0xff), m = u & 0x7fffff;
  if (x == 0) return (uint16_t)((u >> 16) & 0x8000);
  return (uint16_t)(((u >> 16) & 0x8000) | ((e - 112) << 10) | (m >> 13));
}
static float hf(uint16_t v) {
  uint32_t e = (v >> 10) & 0x1f, m = v & 0x3ff, s = (uint32_t)(v & 0x8000) << 16;
  uint32_t u = e == 0 ? s : (s | ((e + 112) << 23) | (m << 13));
  float x;
  memcpy(&x, &u, 4);
  return x;
}

static void test_half_types(void** state) {
  fx_t* f = *state;
  uint16_t a[4] = {h(1.5f), h(-2.0f), h(1024.0f), h(0.25f)}, b[4] = {h(0.5f), h(0.5f), h(1.0f), h(0.125f)};
  bpp_buffer_t ba = buf_with(f, a, sizeof a), bb = buf_with(f, b, sizeof b), bo = alloc_buf(f, 16);
  int64_t n = 4;
  bp_tensor_desc_t in[2] = {desc(ba, BP_DTYPE_F16, 1, &n, NULL, 0), desc(bb, BP_DTYPE_F16, 1, &n, NULL, 0)};
  bp_tensor_desc_t out = desc(bo, BP_DTYPE_F16, 1, &n, NULL, 0);
  bp_binary_attrs_t at = battrs();
  run(f, BP_OP_mul, BP_DTYPE_F16, 2, in, &out, &at);
  uint16_t* p = map(bo, 8);
  assert_true(hf(p[0]) == 0.75f && hf(p[1]) == -1.0f && hf(p[2]) == 1024.0f && hf(p[3]) == 0.03125f);
  /* 1024 + 0.5 rounds to even (1024) in f16 */
  run(f, BP_OP_add, BP_DTYPE_F16, 2, in, &out, &at);
  assert_true(hf(p[2]) == 1025.0f && hf(p[0]) == 2.0f);
  /* bf16: bits are the top half of f32 */
  uint16_t c[2] = {0x3fc0 /* 1.5 */, 0x4040 /* 3 */};
  bpp_buffer_t bc = buf_with(f, c, sizeof c);
  int64_t two = 2;
  bp_tensor_desc_t cin[2] = {desc(bc, BP_DTYPE_BF16, 1, &two, NULL, 0), desc(bc, BP_DTYPE_BF16, 1, &two, NULL, 0)};
  bp_tensor_desc_t cout = desc(bo, BP_DTYPE_F32, 1, &two, NULL, 0);
  run(f, BP_OP_mul, BP_DTYPE_BF16, 2, cin, &cout, &at); /* stored as f32 */
  float* pf = map(bo, 8);
  assert_true(pf[0] == 2.25f && pf[1] == 9.0f);
  C->buffer_release(ba);
  C->buffer_release(bb);
  C->buffer_release(bc);
  C->buffer_release(bo);
}

static void test_int_division(void** state) {
  fx_t* f = *state;
  int32_t a[4] = {-7, 7, -7, 7}, b[4] = {2, -2, 3, -3}, o[4];
  bpp_buffer_t ba = buf_with(f, a, 16), bb = buf_with(f, b, 16), bo = alloc_buf(f, 16);
  int64_t n = 4;
  bp_tensor_desc_t in[2] = {desc(ba, BP_DTYPE_I32, 1, &n, NULL, 0), desc(bb, BP_DTYPE_I32, 1, &n, NULL, 0)};
  bp_tensor_desc_t out = desc(bo, BP_DTYPE_I32, 1, &n, NULL, 0);
  int32_t* p = map(bo, 16);
  bp_binary_attrs_t at = battrs();
  at.rounding_mode = BP_ROUNDING_TRUNC;
  run(f, BP_OP_div, BP_DTYPE_I32, 2, in, &out, &at);
  memcpy(o, p, 16);
  assert_true(o[0] == -3 && o[1] == -3 && o[2] == -2 && o[3] == -2);
  at.rounding_mode = BP_ROUNDING_FLOOR;
  run(f, BP_OP_div, BP_DTYPE_I32, 2, in, &out, &at);
  assert_true(p[0] == -4 && p[1] == -4 && p[2] == -3 && p[3] == -3);
  at = battrs();
  run(f, BP_OP_remainder, BP_DTYPE_I32, 2, in, &out, &at);
  assert_true(p[0] == 1 && p[1] == -1 && p[2] == 2 && p[3] == -2);
  run(f, BP_OP_fmod, BP_DTYPE_I32, 2, in, &out, &at);
  assert_true(p[0] == -1 && p[1] == 1 && p[2] == -1 && p[3] == 1);
  /* true division of integers in f32 */
  float* pf;
  bpp_buffer_t bf = alloc_buf(f, 16);
  bp_tensor_desc_t fout = desc(bf, BP_DTYPE_F32, 1, &n, NULL, 0);
  run(f, BP_OP_div, BP_DTYPE_F32, 2, in, &fout, &at);
  pf = map(bf, 16);
  assert_true(pf[0] == -3.5f && pf[2] == -7.0f / 3.0f);
  /* float remainder takes the divisor's sign */
  bp_tensor_desc_t fin[2] = {fout, absent()};
  at.flags = BP_BINARY_OTHER_IS_SCALAR;
  at.scalar = (bp_scalar_t){.kind = BP_SCALAR_FLOAT, .v.f = -2.0};
  run(f, BP_OP_remainder, BP_DTYPE_F32, 2, fin, &fout, &at);
  assert_true(pf[0] == -1.5f && fabsf(pf[2] - (-1.0f / 3.0f)) < 1e-6f);
  /* u8 + 1000 wraps (scalar converted to u8) */
  uint8_t u[2] = {10, 250};
  bpp_buffer_t bu = buf_with(f, u, 2);
  int64_t two = 2;
  bp_tensor_desc_t uin[2] = {desc(bu, BP_DTYPE_U8, 1, &two, NULL, 0), absent()};
  at = battrs();
  at.flags = BP_BINARY_OTHER_IS_SCALAR;
  at.scalar = (bp_scalar_t){.kind = BP_SCALAR_INT, .v.i = 1000};
  run(f, BP_OP_add, BP_DTYPE_U8, 2, uin, &uin[0], &at);
  uint8_t* pu = map(bu, 2);
  assert_int_equal(pu[0], (uint8_t)(10 + 1000));
  assert_int_equal(pu[1], (uint8_t)(250 + 1000));
  /* pow.Scalar: 2 ** x with self as the scalar */
  bp_tensor_desc_t pin[2] = {absent(), desc(ba, BP_DTYPE_I32, 1, &n, NULL, 0)};
  int32_t e[4] = {0, 1, 10, 3};
  memcpy(map(ba, 16), e, 16);
  at = battrs();
  at.flags = BP_BINARY_SELF_IS_SCALAR;
  at.scalar = (bp_scalar_t){.kind = BP_SCALAR_INT, .v.i = 2};
  run(f, BP_OP_pow, BP_DTYPE_I32, 2, pin, &out, &at);
  assert_true(p[0] == 1 && p[1] == 2 && p[2] == 1024 && p[3] == 8);
  C->buffer_release(ba);
  C->buffer_release(bb);
  C->buffer_release(bo);
  C->buffer_release(bf);
  C->buffer_release(bu);
}

static void test_nan_propagation(void** state) {
  fx_t* f = *state;
  float a[4] = {1, NAN, 3, -5}, b[4] = {NAN, 2, 1, -6};
  bpp_buffer_t ba = buf_with(f, a, 16), bb = buf_with(f, b, 16), bo = alloc_buf(f, 16);
  int64_t n = 4;
  bp_tensor_desc_t in[2] = {desc(ba, BP_DTYPE_F32, 1, &n, NULL, 0), desc(bb, BP_DTYPE_F32, 1, &n, NULL, 0)};
  bp_tensor_desc_t out = desc(bo, BP_DTYPE_F32, 1, &n, NULL, 0);
  float* p = map(bo, 16);
  bp_binary_attrs_t at = battrs();
  run(f, BP_OP_maximum, BP_DTYPE_F32, 2, in, &out, &at);
  assert_true(isnan(p[0]) && isnan(p[1]) && p[2] == 3 && p[3] == -5);
  run(f, BP_OP_minimum, BP_DTYPE_F32, 2, in, &out, &at);
  assert_true(isnan(p[0]) && isnan(p[1]) && p[2] == 1 && p[3] == -6);
  bp_clamp_attrs_t ca = {.struct_size = sizeof ca, .min = {.kind = BP_SCALAR_FLOAT, .v.f = 0},
                         .max = {.kind = BP_SCALAR_INT, .v.i = 2}};
  run(f, BP_OP_clamp, BP_DTYPE_F32, 1, in, &out, &ca);
  assert_true(p[0] == 1 && isnan(p[1]) && p[2] == 2 && p[3] == 0);
  ca.max = (bp_scalar_t){.kind = BP_SCALAR_FLOAT, .v.f = NAN};
  run(f, BP_OP_clamp, BP_DTYPE_F32, 1, in, &out, &ca);
  assert_true(isnan(p[0]) && isnan(p[2]) && isnan(p[3]));
  run(f, BP_OP_relu, BP_DTYPE_F32, 1, in, &out, NULL);
  assert_true(p[0] == 1 && isnan(p[1]) && p[3] == 0);
  run(f, BP_OP_sign, BP_DTYPE_F32, 1, in, &out, NULL);
  assert_true(p[0] == 1 && p[1] == 0 && p[3] == -1);
  /* isnan -> bool */
  bpp_buffer_t bbool = alloc_buf(f, 4);
  bp_tensor_desc_t bout = desc(bbool, BP_DTYPE_BOOL, 1, &n, NULL, 0);
  run(f, BP_OP_isnan, BP_DTYPE_F32, 1, in, &bout, NULL);
  uint8_t* pb = map(bbool, 4);
  assert_true(pb[0] == 0 && pb[1] == 1 && pb[2] == 0 && pb[3] == 0);
  run(f, BP_OP_gt, BP_DTYPE_F32, 2, in, &bout, &at);
  assert_true(pb[0] == 0 && pb[1] == 0 && pb[2] == 1 && pb[3] == 1);
  /* amax over all dims with a NaN; amin over dim 0 without */
  bp_reduce_attrs_t ra = rattrs(0, NULL, BP_REDUCE_ALL_DIMS);
  bp_tensor_desc_t sout = desc(bo, BP_DTYPE_F32, 0, NULL, NULL, 0);
  run(f, BP_OP_amax, BP_DTYPE_F32, 1, in, &sout, &ra);
  assert_true(isnan(p[0]));
  run(f, BP_OP_amin, BP_DTYPE_F32, 1, &in[1], &sout, &ra);
  assert_true(isnan(p[0]));
  in[0] = desc(ba, BP_DTYPE_F32, 1, &n, NULL, 0);
  float c[4] = {1, 7, 7, -2};
  memcpy(map(ba, 16), c, 16);
  run(f, BP_OP_amax, BP_DTYPE_F32, 1, in, &sout, &ra);
  assert_true(p[0] == 7);
  C->buffer_release(ba);
  C->buffer_release(bb);
  C->buffer_release(bo);
  C->buffer_release(bbool);
}

static void test_argmax(void** state) {
  fx_t* f = *state;
  float a[8] = {1, 5, 5, 2, /* row 1: */ 0, NAN, 9, NAN};
  bpp_buffer_t ba = buf_with(f, a, sizeof a), bo = alloc_buf(f, 16);
  int64_t s24[2] = {2, 4}, s2 = 2;
  bp_tensor_desc_t in = desc(ba, BP_DTYPE_F32, 2, s24, NULL, 0);
  bp_tensor_desc_t out = desc(bo, BP_DTYPE_I64, 1, &s2, NULL, 0);
  int32_t dim1 = 1;
  bp_reduce_attrs_t ra = rattrs(1, &dim1, 0);
  run(f, BP_OP_argmax, BP_DTYPE_F32, 1, &in, &out, &ra);
  int64_t* p = map(bo, 16);
  assert_int_equal(p[0], 1); /* first of the tied maxima */
  assert_int_equal(p[1], 1); /* first NaN */
  run(f, BP_OP_argmin, BP_DTYPE_F32, 1, &in, &out, &ra);
  assert_int_equal(p[0], 0);
  assert_int_equal(p[1], 1);
  /* argmax over all dims of a large i32 tensor: split reduction, first tie */
  enum { N = 300000 };
  int32_t* big = calloc(N, sizeof *big);
  big[123457] = 42;
  big[200001] = 42;
  bpp_buffer_t bb = buf_with(f, big, N * sizeof *big);
  int64_t nn = N;
  bp_tensor_desc_t bin = desc(bb, BP_DTYPE_I32, 1, &nn, NULL, 0);
  bp_tensor_desc_t sout = desc(bo, BP_DTYPE_I64, 0, NULL, NULL, 0);
  ra = rattrs(0, NULL, BP_REDUCE_ALL_DIMS);
  run(f, BP_OP_argmax, BP_DTYPE_I32, 1, &bin, &sout, &ra);
  assert_int_equal(p[0], 123457);
  /* sum of i32 to i64 */
  run(f, BP_OP_sum, BP_DTYPE_I64, 1, &bin, &sout, &ra);
  assert_int_equal(p[0], 84);
  free(big);
  C->buffer_release(ba);
  C->buffer_release(bb);
  C->buffer_release(bo);
}

static void test_sum_mean_dims(void** state) {
  fx_t* f = *state;
  /* x[2,3,4] = i; sum over dims (0, 2) keepdim -> [1,3,1]; mean over dim -1 */
  float x[24];
  for (int i = 0; i < 24; i++) x[i] = (float)i;
  bpp_buffer_t bx = buf_with(f, x, sizeof x), bo = alloc_buf(f, 64);
  int64_t s[3] = {2, 3, 4}, so[3] = {1, 3, 1};
  bp_tensor_desc_t in = desc(bx, BP_DTYPE_F32, 3, s, NULL, 0);
  bp_tensor_desc_t out = desc(bo, BP_DTYPE_F32, 3, so, NULL, 0);
  int32_t dims[2] = {0, -1};
  bp_reduce_attrs_t ra = rattrs(2, dims, BP_REDUCE_KEEPDIM);
  run(f, BP_OP_sum, BP_DTYPE_F32, 1, &in, &out, &ra);
  float* p = map(bo, 64);
  for (int j = 0; j < 3; j++) {
    float want = 0;
    for (int i = 0; i < 2; i++)
      for (int k = 0; k < 4; k++) want += x[i * 12 + j * 4 + k];
    assert_true(p[j] == want);
  }
  int64_t s23[2] = {2, 3};
  out = desc(bo, BP_DTYPE_F32, 2, s23, NULL, 0);
  int32_t last = -1;
  ra = rattrs(1, &last, 0);
  run(f, BP_OP_mean, BP_DTYPE_F32, 1, &in, &out, &ra);
  for (int r = 0; r < 6; r++) assert_true(p[r] == (float)(r * 4) + 1.5f);
  C->buffer_release(bx);
  C->buffer_release(bo);
}

static void test_cat_arange_where(void** state) {
  fx_t* f = *state;
  int32_t a[4] = {1, 2, 3, 4};
  int64_t b[2] = {5, 6};
  bpp_buffer_t ba = buf_with(f, a, 16), bb = buf_with(f, b, 16), bo = alloc_buf(f, 48);
  int64_t s22[2] = {2, 2}, s21[2] = {2, 1}, s23[2] = {2, 3}, zero = 0;
  bp_tensor_desc_t in[3] = {desc(ba, BP_DTYPE_I32, 2, s22, NULL, 0), desc(ba, BP_DTYPE_I32, 1, &zero, NULL, 0),
                            desc(bb, BP_DTYPE_I64, 2, s21, NULL, 0)};
  bp_tensor_desc_t out = desc(bo, BP_DTYPE_I64, 2, s23, NULL, 0);
  bp_dim_attrs_t da = {.struct_size = sizeof da, .dim = -1};
  run(f, BP_OP_cat, BP_DTYPE_I64, 3, in, &out, &da);
  int64_t* p = map(bo, 48);
  int64_t want[6] = {1, 2, 5, 3, 4, 6};
  assert_memory_equal(p, want, sizeof want);
  /* arange(3, -2, -1.5) in f64 -> 3, 1.5, 0, -1.5 */
  int64_t n4 = 4;
  bp_tensor_desc_t ar = desc(bo, BP_DTYPE_F64, 1, &n4, NULL, 0);
  bp_arange_attrs_t aa = {.struct_size = sizeof aa, .start = {.kind = BP_SCALAR_INT, .v.i = 3},
                          .end = {.kind = BP_SCALAR_INT, .v.i = -2}, .step = {.kind = BP_SCALAR_FLOAT, .v.f = -1.5}};
  run(f, BP_OP_arange, BP_DTYPE_F64, 0, NULL, &ar, &aa);
  double* d = map(bo, 32);
  assert_true(d[0] == 3 && d[1] == 1.5 && d[2] == 0 && d[3] == -1.5);
  /* arange into a strided i32 view: every other element */
  int64_t n2 = 2, st2 = 2;
  bp_tensor_desc_t ar2 = desc(ba, BP_DTYPE_I32, 1, &n2, &st2, 0);
  aa = (bp_arange_attrs_t){.struct_size = sizeof aa, .start = {.kind = BP_SCALAR_INT, .v.i = 10},
                           .end = {.kind = BP_SCALAR_INT, .v.i = 30}, .step = {.kind = BP_SCALAR_INT, .v.i = 10}};
  run(f, BP_OP_arange, BP_DTYPE_I32, 0, NULL, &ar2, &aa);
  int32_t* pa = map(ba, 16);
  assert_true(pa[0] == 10 && pa[1] == 2 && pa[2] == 20 && pa[3] == 4);
  /* where(cond, f32 tensor, scalar-like broadcast 0-d) */
  uint8_t cond[4] = {1, 0, 0, 1};
  float x[4] = {1, 2, 3, 4}, y = -1;
  bpp_buffer_t bc = buf_with(f, cond, 4), bx = buf_with(f, x, 16), by = buf_with(f, &y, 4), bw = alloc_buf(f, 16);
  bp_tensor_desc_t win[3] = {desc(bc, BP_DTYPE_BOOL, 1, &n4, NULL, 0), desc(bx, BP_DTYPE_F32, 1, &n4, NULL, 0),
                             desc(by, BP_DTYPE_F32, 0, NULL, NULL, 0)};
  bp_tensor_desc_t wout = desc(bw, BP_DTYPE_F32, 1, &n4, NULL, 0);
  run(f, BP_OP_where, BP_DTYPE_F32, 3, win, &wout, NULL);
  float* pw = map(bw, 16);
  assert_true(pw[0] == 1 && pw[1] == -1 && pw[2] == -1 && pw[3] == 4);
  /* fill an f16 tensor with 0.5 */
  bp_fill_attrs_t fa = {.struct_size = sizeof fa, .value = {.kind = BP_SCALAR_FLOAT, .v.f = 0.5}};
  bp_tensor_desc_t fh = desc(bw, BP_DTYPE_F16, 1, &n4, NULL, 0);
  run(f, BP_OP_fill, BP_DTYPE_F16, 0, NULL, &fh, &fa);
  uint16_t* ph = map(bw, 8);
  assert_true(ph[0] == 0x3800 && ph[3] == 0x3800);
  C->buffer_release(ba);
  C->buffer_release(bb);
  C->buffer_release(bo);
  C->buffer_release(bc);
  C->buffer_release(bx);
  C->buffer_release(by);
  C->buffer_release(bw);
}

static void test_softmax(void** state) {
  fx_t* f = *state;
  float x[6] = {1, 2, 3, 1000, 1000, -INFINITY};
  bpp_buffer_t bx = buf_with(f, x, sizeof x), bo = alloc_buf(f, 24);
  int64_t s23[2] = {2, 3};
  bp_tensor_desc_t in = desc(bx, BP_DTYPE_F32, 2, s23, NULL, 0);
  bp_tensor_desc_t out = desc(bo, BP_DTYPE_F32, 2, s23, NULL, 0);
  bp_softmax_attrs_t sa = {.struct_size = sizeof sa, .dim = -1};
  run(f, BP_OP_softmax, BP_DTYPE_F32, 1, &in, &out, &sa);
  float* p = map(bo, 24);
  for (int r = 0; r < 2; r++) assert_true(fabsf(p[r * 3] + p[r * 3 + 1] + p[r * 3 + 2] - 1.0f) < 1e-6f);
  assert_true(fabsf(p[3] - 0.5f) < 1e-6f && p[5] == 0.0f);
  assert_true(fabsf(p[2] - expf(3) / (expf(1) + expf(2) + expf(3))) < 1e-6f);
  /* along dim 0 (strided rows) */
  sa.dim = 0;
  run(f, BP_OP_softmax, BP_DTYPE_F32, 1, &in, &out, &sa);
  assert_true(fabsf(p[0] + p[3] - 1.0f) < 1e-6f && p[5] == 0 && p[2] == 1);
  C->buffer_release(bx);
  C->buffer_release(bo);
}

static void naive_mm(const float* a, const float* b, float* c, int n, int k, int m, int a_t) {
  for (int i = 0; i < n; i++)
    for (int j = 0; j < m; j++) {
      double s = 0;
      for (int p = 0; p < k; p++) s += (double)(a_t ? a[p * n + i] : a[i * k + p]) * b[p * m + j];
      c[i * m + j] = (float)s;
    }
}

static void test_matmul(void** state) {
  fx_t* f = *state;
  enum { N = 37, K = 53, M = 29 };
  float* a = malloc(sizeof(float) * N * K);
  float* b = malloc(sizeof(float) * K * M);
  float* want = malloc(sizeof(float) * N * M);
  for (int i = 0; i < N * K; i++) a[i] = (float)((i * 7) % 13) - 6;
  for (int i = 0; i < K * M; i++) b[i] = (float)((i * 5) % 11) - 5;
  bpp_buffer_t ba = buf_with(f, a, sizeof(float) * N * K), bb = buf_with(f, b, sizeof(float) * K * M);
  bpp_buffer_t bo = alloc_buf(f, sizeof(float) * N * M);
  int64_t sa[2] = {N, K}, sb[2] = {K, M}, so[2] = {N, M};
  bp_tensor_desc_t in[3] = {desc(ba, BP_DTYPE_F32, 2, sa, NULL, 0), desc(bb, BP_DTYPE_F32, 2, sb, NULL, 0)};
  bp_tensor_desc_t out = desc(bo, BP_DTYPE_F32, 2, so, NULL, 0);
  run(f, BP_OP_mm, BP_DTYPE_F32, 2, in, &out, NULL);
  naive_mm(a, b, want, N, K, M, 0);
  float* p = map(bo, sizeof(float) * N * M);
  for (int i = 0; i < N * M; i++) assert_true(p[i] == want[i]); /* small integers: exact */
  /* A given as a transposed view of a [K, N] buffer */
  int64_t st_t[2] = {1, N};
  in[0] = desc(ba, BP_DTYPE_F32, 2, sa, st_t, 0);
  run(f, BP_OP_mm, BP_DTYPE_F32, 2, in, &out, NULL);
  naive_mm(a, b, want, N, K, M, 1);
  for (int i = 0; i < N * M; i++) assert_true(p[i] == want[i]);
  /* output as a transposed view (column-major) */
  int64_t ost[2] = {1, N};
  bp_tensor_desc_t tout = desc(bo, BP_DTYPE_F32, 2, so, ost, 0);
  run(f, BP_OP_mm, BP_DTYPE_F32, 2, in, &tout, NULL);
  for (int i = 0; i < N; i++)
    for (int j = 0; j < M; j++) assert_true(p[j * N + i] == want[i * M + j]);
  /* addmm: 2 * bias[M] (broadcast) + 0.5 * A@B */
  float* bias = malloc(sizeof(float) * M);
  for (int j = 0; j < M; j++) bias[j] = (float)j;
  bpp_buffer_t bbias = buf_with(f, bias, sizeof(float) * M);
  int64_t sm = M;
  bp_tensor_desc_t ain[3] = {desc(bbias, BP_DTYPE_F32, 1, &sm, NULL, 0), in[0], in[1]};
  bp_addmm_attrs_t aa = {.struct_size = sizeof aa, .beta = {.kind = BP_SCALAR_INT, .v.i = 2},
                         .alpha = {.kind = BP_SCALAR_FLOAT, .v.f = 0.5}};
  run(f, BP_OP_addmm, BP_DTYPE_F32, 3, ain, &out, &aa);
  for (int i = 0; i < N; i++)
    for (int j = 0; j < M; j++) assert_true(p[i * M + j] == 2 * bias[j] + 0.5f * want[i * M + j]);
  /* i32 mm through the blocked kernel, and bmm of f64 */
  int32_t ia[6] = {1, 2, 3, 4, 5, 6}, ib[6] = {7, 8, 9, 10, 11, 12};
  bpp_buffer_t bia = buf_with(f, ia, 24), bib = buf_with(f, ib, 24), bio = alloc_buf(f, 16);
  int64_t s23[2] = {2, 3}, s32[2] = {3, 2}, s22[2] = {2, 2};
  bp_tensor_desc_t iin[2] = {desc(bia, BP_DTYPE_I32, 2, s23, NULL, 0), desc(bib, BP_DTYPE_I32, 2, s32, NULL, 0)};
  bp_tensor_desc_t iout = desc(bio, BP_DTYPE_I32, 2, s22, NULL, 0);
  run(f, BP_OP_mm, BP_DTYPE_I32, 2, iin, &iout, NULL);
  int32_t* pi = map(bio, 16);
  assert_true(pi[0] == 58 && pi[1] == 64 && pi[2] == 139 && pi[3] == 154);
  double da[8] = {1, 2, 3, 4, 1, 0, 0, 1}, db[8] = {1, 1, 1, 1, 5, 6, 7, 8};
  bpp_buffer_t bda = buf_with(f, da, 64), bdb = buf_with(f, db, 64), bdo = alloc_buf(f, 64);
  int64_t s222[3] = {2, 2, 2};
  bp_tensor_desc_t bin[2] = {desc(bda, BP_DTYPE_F64, 3, s222, NULL, 0), desc(bdb, BP_DTYPE_F64, 3, s222, NULL, 0)};
  bp_tensor_desc_t bout = desc(bdo, BP_DTYPE_F64, 3, s222, NULL, 0);
  run(f, BP_OP_bmm, BP_DTYPE_F64, 2, bin, &bout, NULL);
  double* pd = map(bdo, 64);
  double bw[8] = {3, 3, 7, 7, 5, 6, 7, 8};
  assert_memory_equal(pd, bw, sizeof bw);
  /* f16 mm */
  uint16_t ha[4] = {h(1), h(2), h(3), h(4)};
  bpp_buffer_t bha = buf_with(f, ha, 8), bho = alloc_buf(f, 8);
  bp_tensor_desc_t hin[2] = {desc(bha, BP_DTYPE_F16, 2, s22, NULL, 0), desc(bha, BP_DTYPE_F16, 2, s22, NULL, 0)};
  bp_tensor_desc_t hout = desc(bho, BP_DTYPE_F16, 2, s22, NULL, 0);
  run(f, BP_OP_mm, BP_DTYPE_F16, 2, hin, &hout, NULL);
  uint16_t* ph = map(bho, 8);
  assert_true(hf(ph[0]) == 7 && hf(ph[1]) == 10 && hf(ph[2]) == 15 && hf(ph[3]) == 22);
  bpp_buffer_t bufs[] = {ba, bb, bo, bbias, bia, bib, bio, bda, bdb, bdo, bha, bho};
  for (size_t i = 0; i < sizeof bufs / sizeof *bufs; i++) C->buffer_release(bufs[i]);
  free(a);
  free(b);
  free(want);
  free(bias);
}

/* ---- blocked GEMM: shapes over several k steps, row blocks and column
 * blocks, partial tiles, strided / transposed operands, every native dtype,
 * integer wrap-around. References are exact: integers modulo 2^64 (then the
 * stored width), floats on small even integers (alpha 0.5 stays exact). */
typedef struct mm_layout {
  int64_t rs, cs, elems; /* element strides and buffer length in elements */
} mm_layout_t;

static void mm_put(uint32_t dt, void* p, int64_t i, int64_t v) {
  switch (dt) {
    case BP_DTYPE_F32: ((float*)p)[i] = (float)v; break;
    case BP_DTYPE_F64: ((double*)p)[i] = (double)v; break;
    case BP_DTYPE_I8: ((int8_t*)p)[i] = (int8_t)v; break;
    case BP_DTYPE_U8: ((uint8_t*)p)[i] = (uint8_t)v; break;
    case BP_DTYPE_I16: ((int16_t*)p)[i] = (int16_t)v; break;
    case BP_DTYPE_I32: ((int32_t*)p)[i] = (int32_t)v; break;
    default: ((int64_t*)p)[i] = v; break;
  }
}
static int64_t mm_get(uint32_t dt, const void* p, int64_t i) {
  switch (dt) {
    case BP_DTYPE_F32: return (int64_t)((const float*)p)[i];
    case BP_DTYPE_F64: return (int64_t)((const double*)p)[i];
    case BP_DTYPE_I8: return ((const int8_t*)p)[i];
    case BP_DTYPE_U8: return ((const uint8_t*)p)[i];
    case BP_DTYPE_I16: return ((const int16_t*)p)[i];
    case BP_DTYPE_I32: return ((const int32_t*)p)[i];
    default: return ((const int64_t*)p)[i];
  }
}
/* Operand values: small for floats (sums stay exact), full-width for integers. */
static int64_t mm_val(uint32_t dt, int64_t i, int64_t j, int64_t salt) {
  uint64_t x = (uint64_t)(i * 1315423911 + j * 2654435761u + salt * 97);
  x ^= x >> 13;
  x *= 0x9E3779B97F4A7C15ull;
  x ^= x >> 29;
  if (dt == BP_DTYPE_F32 || dt == BP_DTYPE_F64) return ((int64_t)(x % 7) - 3) * 2; /* even */
  return (int64_t)x;
}
/* The stored value of v in dtype dt, as an int64. */
static int64_t mm_round(uint32_t dt, int64_t v) {
  unsigned char tmp[8];
  mm_put(dt, tmp, 0, v);
  return mm_get(dt, tmp, 0);
}

static void mm_case(fx_t* f, uint32_t dt, int64_t n, int64_t k, int64_t m, int variant) {
  size_t es = dt == BP_DTYPE_F32 || dt == BP_DTYPE_I32 ? 4 : dt == BP_DTYPE_I16 ? 2
              : dt == BP_DTYPE_I8 || dt == BP_DTYPE_U8 ? 1 : 8;
  int is_float = dt == BP_DTYPE_F32 || dt == BP_DTYPE_F64;
  /* variant 0: contiguous mm; 1: A and B transposed views; 2: padded A rows,
   * transposed C, addmm with a broadcast bias; 3: padded C rows, addmm. */
  mm_layout_t la = {k, 1, n * k}, lb = {m, 1, k * m}, lc = {m, 1, n * m};
  if (variant == 1) la = (mm_layout_t){1, n, n * k}, lb = (mm_layout_t){1, k, k * m};
  if (variant == 2) la = (mm_layout_t){k + 3, 1, n * (k + 3)}, lc = (mm_layout_t){1, n, n * m};
  if (variant == 3) lc = (mm_layout_t){m + 5, 1, n * (m + 5)};
  int addmm = variant >= 2;
  int64_t alpha = -2, beta = is_float ? 2 : 3; /* float alpha: 0.5 */
  void* ha = calloc((size_t)la.elems, es);
  void* hb = calloc((size_t)lb.elems, es);
  void* hself = calloc((size_t)(n * m), es);
  int64_t* want = calloc((size_t)(n * m), sizeof(int64_t));
  assert_non_null(ha);
  assert_non_null(hb);
  assert_non_null(hself);
  assert_non_null(want);
  for (int64_t i = 0; i < n; i++)
    for (int64_t p = 0; p < k; p++) mm_put(dt, ha, i * la.rs + p * la.cs, mm_val(dt, i, p, 1));
  for (int64_t p = 0; p < k; p++)
    for (int64_t j = 0; j < m; j++) mm_put(dt, hb, p * lb.rs + j * lb.cs, mm_val(dt, p, j, 2));
  int64_t self_rows = variant == 2 ? 1 : n; /* variant 2: bias [m] */
  for (int64_t i = 0; i < self_rows; i++)
    for (int64_t j = 0; j < m; j++) mm_put(dt, hself, i * m + j, mm_val(dt, i, j, 3));
  int64_t* a64 = malloc(sizeof(int64_t) * (size_t)(n * k));
  int64_t* b64 = malloc(sizeof(int64_t) * (size_t)(k * m));
  assert_non_null(a64);
  assert_non_null(b64);
  for (int64_t i = 0; i < n; i++)
    for (int64_t p = 0; p < k; p++) a64[i * k + p] = mm_get(dt, ha, i * la.rs + p * la.cs);
  for (int64_t p = 0; p < k; p++)
    for (int64_t j = 0; j < m; j++) b64[p * m + j] = mm_get(dt, hb, p * lb.rs + j * lb.cs);
  for (int64_t i = 0; i < n; i++)
    for (int64_t j = 0; j < m; j++) {
      uint64_t s = 0; /* exact modulo 2^64 */
      for (int64_t p = 0; p < k; p++) s += (uint64_t)a64[i * k + p] * (uint64_t)b64[p * m + j];
      if (addmm) {
        if (is_float) s = (uint64_t)((int64_t)s / 2); /* alpha 0.5 */
        else s *= (uint64_t)alpha;
        s += (uint64_t)beta * (uint64_t)mm_get(dt, hself, (variant == 2 ? 0 : i) * m + j);
      }
      want[i * m + j] = mm_round(dt, (int64_t)s);
    }
  free(a64);
  free(b64);
  /* Guard bytes after every C row catch writes outside the view. */
  unsigned char* hc = malloc((size_t)lc.elems * es);
  assert_non_null(hc);
  memset(hc, 0x5A, (size_t)lc.elems * es);
  bpp_buffer_t ba = buf_with(f, ha, (size_t)la.elems * es), bb = buf_with(f, hb, (size_t)lb.elems * es);
  bpp_buffer_t bc = buf_with(f, hc, (size_t)lc.elems * es), bs = buf_with(f, hself, (size_t)(n * m) * es);
  int64_t sa[2] = {n, k}, sb[2] = {k, m}, sc[2] = {n, m}, sta[2] = {la.rs, la.cs},
          stb[2] = {lb.rs, lb.cs}, stc[2] = {lc.rs, lc.cs};
  bp_tensor_desc_t out = desc(bc, dt, 2, sc, stc, 0);
  bp_tensor_desc_t in[3] = {desc(bs, dt, variant == 2 ? 1 : 2, variant == 2 ? &m : sc, NULL, 0),
                            desc(ba, dt, 2, sa, sta, 0), desc(bb, dt, 2, sb, stb, 0)};
  if (addmm) {
    bp_addmm_attrs_t at = {.struct_size = sizeof at, .beta = {.kind = BP_SCALAR_INT, .v.i = beta},
                           .alpha = {.kind = BP_SCALAR_INT, .v.i = alpha}};
    if (is_float) at.alpha = (bp_scalar_t){.kind = BP_SCALAR_FLOAT, .v.f = 0.5};
    run(f, BP_OP_addmm, dt, 3, in, &out, &at);
  } else {
    run(f, BP_OP_mm, dt, 2, in + 1, &out, NULL);
  }
  const unsigned char* pc = map(bc, (size_t)lc.elems * es);
  for (int64_t i = 0; i < n; i++)
    for (int64_t j = 0; j < m; j++) {
      int64_t got = mm_get(dt, pc, i * lc.rs + j * lc.cs);
      if (got != want[i * m + j])
        fail_msg("dtype %u variant %d [%lld x %lld x %lld]: C[%lld, %lld] = %lld, want %lld", dt,
                 variant, (long long)n, (long long)k, (long long)m, (long long)i, (long long)j,
                 (long long)got, (long long)want[i * m + j]);
    }
  if (variant == 3) /* row padding untouched */
    for (int64_t i = 0; i < n; i++)
      for (int64_t b = (i * lc.rs + m) * (int64_t)es; b < (i + 1) * lc.rs * (int64_t)es; b++)
        assert_int_equal(pc[b], 0x5A);
  C->buffer_release(ba);
  C->buffer_release(bb);
  C->buffer_release(bc);
  C->buffer_release(bs);
  free(ha);
  free(hb);
  free(hc);
  free(hself);
  free(want);
}

static void test_matmul_blocked(void** state) {
  fx_t* f = *state;
  static const uint32_t dts[] = {BP_DTYPE_F32, BP_DTYPE_F64, BP_DTYPE_I8, BP_DTYPE_U8,
                                 BP_DTYPE_I16, BP_DTYPE_I32, BP_DTYPE_I64};
  for (size_t d = 0; d < sizeof dts / sizeof *dts; d++)
    for (int v = 0; v < 4; v++) {
      mm_case(f, dts[d], 263, 300, 77, v); /* 2 k steps (the last partial), 2 row blocks */
      mm_case(f, dts[d], 5, 3, 7, v);      /* one partial tile */
    }
  mm_case(f, BP_DTYPE_F32, 3, 5, 4100, 0); /* more than one column block */
  mm_case(f, BP_DTYPE_I32, 1, 1, 1, 3);
}

static void test_casts(void** state) {
  fx_t* f = *state;
  /* values representable in e4m3: round trip exactly; 1000 overflows to NaN */
  float v[8] = {0.0f, -0.015625f, 1.0f, 1.125f, -448.0f, 0.001953125f, 240.0f, 1000.0f};
  bpp_buffer_t bv = buf_with(f, v, sizeof v), b8 = alloc_buf(f, 8), bo = alloc_buf(f, 64);
  int64_t n = 8;
  bp_tensor_desc_t src = desc(bv, BP_DTYPE_F32, 1, &n, NULL, 0);
  bp_tensor_desc_t f8 = desc(b8, BP_DTYPE_F8E4M3FN, 1, &n, NULL, 0);
  bp_tensor_desc_t back = desc(bo, BP_DTYPE_F32, 1, &n, NULL, 0);
  bp_cast_attrs_t ca = {.struct_size = sizeof ca, .dtype = BP_DTYPE_F8E4M3FN};
  run(f, BP_OP_to_copy, BP_DTYPE_F32, 1, &src, &f8, &ca);
  ca.dtype = BP_DTYPE_F32;
  run(f, BP_OP_to_copy, BP_DTYPE_F8E4M3FN, 1, &f8, &back, &ca);
  float* p = map(bo, 32);
  for (int i = 0; i < 7; i++) assert_true(p[i] == v[i]);
  assert_true(isnan(p[7]));
  uint8_t* q = map(b8, 8);
  assert_int_equal(q[2], 0x38); /* 1.0 */
  /* e5m2 overflows to inf */
  bp_tensor_desc_t e5 = desc(b8, BP_DTYPE_F8E5M2, 1, &n, NULL, 0);
  ca.dtype = BP_DTYPE_F8E5M2;
  v[7] = 1e6f;
  memcpy(map(bv, 32), v, 32);
  run(f, BP_OP_to_copy, BP_DTYPE_F32, 1, &src, &e5, &ca);
  assert_int_equal(q[7], 0x7c);
  assert_int_equal(q[2], 0x3c);
  /* f32 -> i32 truncates; -> bool is nonzero; clone of a permuted view */
  float w[4] = {-1.7f, 2.9f, 0.0f, NAN};
  memcpy(map(bv, 16), w, 16);
  int64_t four = 4;
  bp_tensor_desc_t s4 = desc(bv, BP_DTYPE_F32, 1, &four, NULL, 0);
  bp_tensor_desc_t i4 = desc(bo, BP_DTYPE_I32, 1, &four, NULL, 0);
  ca.dtype = BP_DTYPE_I32;
  run(f, BP_OP_to_copy, BP_DTYPE_F32, 1, &s4, &i4, &ca);
  int32_t* pi = map(bo, 16);
  assert_true(pi[0] == -1 && pi[1] == 2 && pi[2] == 0);
  bp_tensor_desc_t b4 = desc(b8, BP_DTYPE_BOOL, 1, &four, NULL, 0);
  ca.dtype = BP_DTYPE_BOOL;
  run(f, BP_OP_to_copy, BP_DTYPE_F32, 1, &s4, &b4, &ca);
  assert_true(q[0] == 1 && q[1] == 1 && q[2] == 0 && q[3] == 1);
  float m[6] = {1, 2, 3, 4, 5, 6};
  memcpy(map(bv, 24), m, 24);
  int64_t s32[2] = {3, 2}, st[2] = {1, 3};
  bp_tensor_desc_t tv = desc(bv, BP_DTYPE_F32, 2, s32, st, 0);
  bp_tensor_desc_t cl = desc(bo, BP_DTYPE_F32, 2, s32, NULL, 0);
  run(f, BP_OP_clone, BP_DTYPE_F32, 1, &tv, &cl, NULL);
  float want[6] = {1, 4, 2, 5, 3, 6};
  assert_memory_equal(p, want, 24);
  /* copy: src [2] broadcast into [3,2] with a cast to f64 */
  int64_t two = 2;
  bp_tensor_desc_t cin[2] = {cl, desc(bv, BP_DTYPE_F32, 1, &two, NULL, 0)};
  bp_tensor_desc_t cout = desc(bo, BP_DTYPE_F64, 2, s32, NULL, 0);
  cin[0] = cout;
  run(f, BP_OP_copy, BP_DTYPE_F64, 2, cin, &cout, NULL);
  double* pd = map(bo, 48);
  assert_true(pd[0] == 1 && pd[1] == 2 && pd[4] == 1 && pd[5] == 2);
  C->buffer_release(bv);
  C->buffer_release(b8);
  C->buffer_release(bo);
}

static void test_unary_misc(void** state) {
  fx_t* f = *state;
  double x[4] = {-1.5, 0.5, 2.5, -0.0};
  bpp_buffer_t bx = buf_with(f, x, 32), bo = alloc_buf(f, 32);
  int64_t n = 4;
  bp_tensor_desc_t in = desc(bx, BP_DTYPE_F64, 1, &n, NULL, 0);
  bp_tensor_desc_t out = desc(bo, BP_DTYPE_F64, 1, &n, NULL, 0);
  double* p = map(bo, 32);
  run(f, BP_OP_round, BP_DTYPE_F64, 1, &in, &out, NULL);
  assert_true(p[0] == -2 && p[1] == 0 && p[2] == 2);
  run(f, BP_OP_sign, BP_DTYPE_F64, 1, &in, &out, NULL);
  assert_true(p[3] == 0 && !signbit(p[3]));
  bp_gelu_attrs_t ga = {.struct_size = sizeof ga, .approximate = BP_GELU_NONE};
  run(f, BP_OP_gelu, BP_DTYPE_F64, 1, &in, &out, &ga);
  assert_true(fabs(p[1] - 0.5 * 0.5 * (1 + erf(0.5 / sqrt(2.0)))) < 1e-15);
  ga.approximate = BP_GELU_TANH;
  run(f, BP_OP_gelu, BP_DTYPE_F64, 1, &in, &out, &ga);
  assert_true(fabs(p[2] - 0.5 * 2.5 * (1 + tanh(sqrt(2 / M_PI) * (2.5 + 0.044715 * 2.5 * 2.5 * 2.5)))) < 1e-15);
  bp_hardtanh_attrs_t ha = {.struct_size = sizeof ha, .min_val = -1, .max_val = 1};
  run(f, BP_OP_hardtanh, BP_DTYPE_F64, 1, &in, &out, &ha);
  assert_true(p[0] == -1 && p[1] == 0.5 && p[2] == 1);
  bp_leaky_relu_attrs_t la = {.struct_size = sizeof la, .negative_slope = 0.1};
  run(f, BP_OP_leaky_relu, BP_DTYPE_F64, 1, &in, &out, &la);
  assert_true(fabs(p[0] + 0.15) < 1e-15 && p[2] == 2.5);
  bp_elu_attrs_t ea = {.struct_size = sizeof ea, .alpha = 1, .scale = 1, .input_scale = 1};
  run(f, BP_OP_elu, BP_DTYPE_F64, 1, &in, &out, &ea);
  assert_true(fabs(p[0] - expm1(-1.5)) < 1e-15);
  /* sin of an int32 input computes in f32 */
  int32_t iv[4] = {0, 1, 2, 3};
  bpp_buffer_t bi = buf_with(f, iv, 16), bf = alloc_buf(f, 16);
  bp_tensor_desc_t iin = desc(bi, BP_DTYPE_I32, 1, &n, NULL, 0), fout = desc(bf, BP_DTYPE_F32, 1, &n, NULL, 0);
  run(f, BP_OP_sin, BP_DTYPE_F32, 1, &iin, &fout, NULL);
  float* pf = map(bf, 16);
  assert_true(fabsf(pf[1] - sinf(1)) < 1e-7f);
  /* abs(INT_MIN) wraps; bitwise_not */
  int32_t im[2] = {INT32_MIN, 5};
  memcpy(map(bi, 8), im, 8);
  int64_t two = 2;
  bp_tensor_desc_t i2 = desc(bi, BP_DTYPE_I32, 1, &two, NULL, 0);
  run(f, BP_OP_abs, BP_DTYPE_I32, 1, &i2, &i2, NULL);
  int32_t* pi = map(bi, 8);
  assert_true(pi[0] == INT32_MIN && pi[1] == 5);
  run(f, BP_OP_bitwise_not, BP_DTYPE_I32, 1, &i2, &i2, NULL);
  assert_true(pi[1] == ~5);
  /* clamp_tensor with an absent min and an f32 max tensor */
  float cv[4] = {-5, 0, 5, 10}, cmax[1] = {3};
  bpp_buffer_t bc = buf_with(f, cv, 16), bm = buf_with(f, cmax, 4);
  int64_t one = 1;
  bp_tensor_desc_t cin[3] = {desc(bc, BP_DTYPE_F32, 1, &n, NULL, 0), absent(), desc(bm, BP_DTYPE_F32, 1, &one, NULL, 0)};
  run(f, BP_OP_clamp_tensor, BP_DTYPE_F32, 3, cin, &cin[0], NULL);
  float* pc = map(bc, 16);
  assert_true(pc[0] == -5 && pc[1] == 0 && pc[2] == 3 && pc[3] == 3);
  bpp_buffer_t bufs[] = {bx, bo, bi, bf, bc, bm};
  for (size_t i = 0; i < sizeof bufs / sizeof *bufs; i++) C->buffer_release(bufs[i]);
}

/* A large contiguous add goes through the pool; checks chunk boundaries. */
static void test_large_parallel(void** state) {
  fx_t* f = *state;
  enum { N = (1 << 20) + 7 };
  bpp_buffer_t ba = alloc_buf(f, N * 4), bo = alloc_buf(f, N * 4);
  float* a = map(ba, N * 4);
  for (int i = 0; i < N; i++) a[i] = (float)i;
  int64_t n = N;
  bp_tensor_desc_t in[2] = {desc(ba, BP_DTYPE_F32, 1, &n, NULL, 0), desc(ba, BP_DTYPE_F32, 1, &n, NULL, 0)};
  bp_tensor_desc_t out = desc(bo, BP_DTYPE_F32, 1, &n, NULL, 0);
  bp_binary_attrs_t at = battrs();
  run(f, BP_OP_add, BP_DTYPE_F32, 2, in, &out, &at);
  float* p = map(bo, N * 4);
  for (int i = 0; i < N; i += 997) assert_true(p[i] == 2.0f * (float)i);
  assert_true(p[N - 1] == 2.0f * (float)(N - 1));
  /* f32 -> f64 sum over everything: exact in double */
  bp_reduce_attrs_t ra = rattrs(0, NULL, BP_REDUCE_ALL_DIMS);
  bp_tensor_desc_t so = desc(bo, BP_DTYPE_F64, 0, NULL, NULL, 0);
  ra.dtype = BP_DTYPE_F64;
  run(f, BP_OP_sum, BP_DTYPE_F64, 1, in, &so, &ra);
  double* d = map(bo, 8);
  assert_true(*d == (double)N * (N - 1) / 2);
  C->buffer_release(ba);
  C->buffer_release(bo);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_negotiate),
      cmocka_unit_test(test_devices),
      cmocka_unit_test_setup_teardown(test_memory, setup, teardown),
      cmocka_unit_test_setup_teardown(test_host_func_poisons, setup, teardown),
      cmocka_unit_test_setup_teardown(test_create_info, setup, teardown),
      cmocka_unit_test_setup_teardown(test_copies, setup, teardown),
      cmocka_unit_test_setup_teardown(test_stream_ordering, setup, teardown),
      cmocka_unit_test_setup_teardown(test_events, setup, teardown),
      cmocka_unit_test_setup_teardown(test_sticky_error, setup, teardown),
      cmocka_unit_test_setup_teardown(test_bad_input, setup, teardown),
      cmocka_unit_test(test_memory_budget),
      cmocka_unit_test(test_memory_exhaustion),
      cmocka_unit_test_setup_teardown(test_support, setup, teardown),
      cmocka_unit_test_setup_teardown(test_add_broadcast_alpha, setup, teardown),
      cmocka_unit_test_setup_teardown(test_half_types, setup, teardown),
      cmocka_unit_test_setup_teardown(test_int_division, setup, teardown),
      cmocka_unit_test_setup_teardown(test_nan_propagation, setup, teardown),
      cmocka_unit_test_setup_teardown(test_argmax, setup, teardown),
      cmocka_unit_test_setup_teardown(test_sum_mean_dims, setup, teardown),
      cmocka_unit_test_setup_teardown(test_cat_arange_where, setup, teardown),
      cmocka_unit_test_setup_teardown(test_softmax, setup, teardown),
      cmocka_unit_test_setup_teardown(test_matmul, setup, teardown),
      cmocka_unit_test_setup_teardown(test_matmul_blocked, setup, teardown),
      cmocka_unit_test_setup_teardown(test_casts, setup, teardown),
      cmocka_unit_test_setup_teardown(test_unary_misc, setup, teardown),
      cmocka_unit_test_setup_teardown(test_large_parallel, setup, teardown),
  };
  return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
