/* Compiled regions of the CUDA plugin (its exec table) over the fake
 * driver: replays through CUDA graphs (one capture, then one cuGraphLaunch
 * per run) equal eager results; a changed argument re-captures and updates
 * the instantiated graph; capture failures fall back to eager replay or
 * map to clear statuses; a driver without the graph entry points replays
 * eagerly; the fake enforces the capture rules; saved regions reload and
 * corrupt bytes are refused; fused programs, eager or compiled, run their
 * generated kernels (NVRTC, the fake) or the interpreter with the reason;
 * their PTX is cached on disk (hits, misses, corrupt and foreign entries).
 */
#include <dirent.h>
#include <dlfcn.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "backplane/plugin.h"
#include "fake_cuda.h"

static char g_msg[512];
static void host_report(void* ctx, bp_status_t st, const char* m) {
  (void)ctx, (void)st;
  snprintf(g_msg, sizeof g_msg, "%s", m);
}
/* The plugin's log lines since setup, joined (the first LOG_CAP bytes);
 * lines may come from the fake's stream threads. */
enum { LOG_CAP = 8192 };
static char g_log[LOG_CAP];
static pthread_mutex_t g_log_mu = PTHREAD_MUTEX_INITIALIZER;
static void host_log(void* ctx, int32_t level, const char* m) {
  (void)ctx, (void)level;
  pthread_mutex_lock(&g_log_mu);
  size_t n = strlen(g_log);
  snprintf(g_log + n, sizeof g_log - n, "%s\n", m);
  pthread_mutex_unlock(&g_log_mu);
}
static int32_t host_log_enabled(void* ctx, int32_t level) { (void)ctx, (void)level; return 1; }
static void log_clear(void) {
  pthread_mutex_lock(&g_log_mu);
  g_log[0] = 0;
  pthread_mutex_unlock(&g_log_mu);
}
static int logged(const char* text) {
  pthread_mutex_lock(&g_log_mu);
  int found = strstr(g_log, text) != NULL;
  pthread_mutex_unlock(&g_log_mu);
  return found;
}
static const bp_host_services_t k_host = {.struct_size = sizeof k_host, .report = host_report,
                                          .log = host_log, .log_enabled = host_log_enabled};

static void* g_plugin;
static const bpp_core_table_t* C;
static const bp_plugin_vtable_t* V;
static const bpp_exec_table_t* X;
static const fake_cuda_control_t* F;
static void* g_fake;
static void* g_nvrtc;
typedef void (*nvrtc_record_fn)(int* compiles, int* live, char* opts, size_t opts_cap, char* src, size_t src_cap);
static nvrtc_record_fn nvrtc_record;

static int group_setup(void** state) {
  (void)state;
  setenv("BP_CUDA_DRIVER_PATH", FAKE_CUDA_PATH, 1);
  setenv("BP_CUBLASLT_PATH", FAKE_CUDA_PATH, 1);
  setenv("BP_NVRTC_PATH", FAKE_NVRTC_PATH, 1); /* generated kernels through the fake NVRTC */
  setenv("BP_CUDA_PROGRAM_CACHE", "", 1);       /* compiles counted: no disk cache but the test's own */
  g_fake = dlopen(FAKE_CUDA_PATH, RTLD_NOW | RTLD_LOCAL);
  if (!g_fake) return fprintf(stderr, "%s\n", dlerror()), -1;
  F = ((fake_cuda_control_fn)dlsym(g_fake, FAKE_CUDA_CONTROL_SYMBOL))();
  g_nvrtc = dlopen(FAKE_NVRTC_PATH, RTLD_NOW | RTLD_LOCAL);
  if (!g_nvrtc) return fprintf(stderr, "%s\n", dlerror()), -1;
  nvrtc_record = (nvrtc_record_fn)dlsym(g_nvrtc, "fake_nvrtc_record");
  g_plugin = dlopen(CUDA_PLUGIN_PATH, RTLD_NOW | RTLD_LOCAL);
  if (!g_plugin) return fprintf(stderr, "%s\n", dlerror()), -1;
  bp_plugin_negotiate_fn nego = (bp_plugin_negotiate_fn)dlsym(g_plugin, BP_PLUGIN_ENTRY_NAME);
  bp_negotiate_request_t req = {.struct_size = sizeof req, .abi_major = BP_ABI_VERSION_MAJOR,
                                .abi_minor = BP_ABI_VERSION_MINOR, .host = &k_host};
  bp_negotiate_reply_t rep = {.struct_size = sizeof rep};
  if (!nego || nego(&req, &rep) != BP_OK) return -1;
  V = rep.vtable;
  C = V->core;
  X = V->exec;
  return X ? 0 : -1;
}
static int group_teardown(void** state) {
  (void)state;
  dlclose(g_plugin);
  dlclose(g_fake);
  dlclose(g_nvrtc);
  return 0;
}

typedef struct fx {
  bpp_instance_t inst;
  bpp_device_t dev;
  bpp_stream_t s;
  const fake_cuda_control_t* f; /* the driver this instance opened */
} fx_t;
static fx_t g_fx;

static void open_with(const char* driver, const fake_cuda_control_t* f) {
  setenv("BP_CUDA_DRIVER_PATH", driver, 1);
  g_fx.f = f;
  assert_int_equal(C->instance_create(NULL, &g_fx.inst), BP_OK);
  assert_int_equal(C->device_open(g_fx.inst, 0, &g_fx.dev), BP_OK);
  assert_int_equal(C->stream_create(g_fx.dev, NULL, &g_fx.s), BP_OK);
}
static int setup(void** state) {
  (void)state;
  F->reset();
  memset(&g_fx, 0, sizeof g_fx);
  g_msg[0] = 0;
  log_clear();
  return 0;
}
static int teardown(void** state) {
  (void)state;
  if (g_fx.s) C->stream_destroy(g_fx.s);
  if (g_fx.dev) C->device_close(g_fx.dev);
  if (g_fx.inst) C->instance_destroy(g_fx.inst);
  setenv("BP_CUDA_DRIVER_PATH", FAKE_CUDA_PATH, 1);
  setenv("BP_NVRTC_PATH", FAKE_NVRTC_PATH, 1);
  const fake_cuda_control_t* f = g_fx.f ? g_fx.f : F;
  int bad = 0;
  if (f->misuse_count()) bad = fprintf(stderr, "fake saw misuse: %s\n", f->last_misuse());
  if (f->live_allocations()) bad = fprintf(stderr, "%llu allocations leaked\n",
                                           (unsigned long long)f->live_allocations());
  if (f->live_graphs()) bad = fprintf(stderr, "%llu graphs leaked\n",
                                      (unsigned long long)f->live_graphs());
  if (f->live_events()) bad = fprintf(stderr, "%llu events leaked\n", (unsigned long long)f->live_events());
  return bad ? -1 : 0;
}

/* ---- helpers -------------------------------------------------------------------- */
enum { N = 300 }; /* elements per tensor: two blocks of the elementwise kernel */

typedef struct tensor {
  bpp_buffer_t b;
  float* host; /* pinned and mapped */
  bp_tensor_desc_t d;
} tensor_t;

static tensor_t tensor_new(uint64_t extra) {
  tensor_t t;
  bp_buffer_alloc_info_t ai = {.struct_size = sizeof ai, .memory_space = 1,
                               .size_bytes = N * sizeof(float) + extra};
  assert_int_equal(C->buffer_allocate(g_fx.dev, &ai, &t.b), BP_OK);
  void* p = NULL;
  assert_int_equal(C->buffer_map(t.b, 0, ai.size_bytes, &p), BP_OK);
  t.host = (float*)((char*)p + extra);
  memset(p, 0, ai.size_bytes);
  t.d = (bp_tensor_desc_t){.struct_size = sizeof t.d, .dtype = BP_DTYPE_F32, .rank = 1,
                           .buffer = t.b, .byte_offset = extra};
  t.d.sizes[0] = N;
  t.d.strides[0] = 1;
  return t;
}
static void fill(tensor_t* t, float scale, float shift) {
  for (int i = 0; i < N; ++i) t->host[i] = scale * (float)(i % 37) + shift;
}
static uint64_t calls(const char* entry) { return g_fx.f->call_count(entry); }

/* out = -((a + b) * a) as a program. */
static const bp_ew_instr_t k_instrs[] = {
    {BP_EW_LOAD_INPUT, 0, 0, 0, 0, 0}, {BP_EW_LOAD_INPUT, 1, 1, 0, 0, 0},
    {BP_OP_add, 2, 0, 1, 0, 0},        {BP_OP_mul, 3, 2, 0, 0, 0},
    {BP_OP_neg, 4, 3, 0, 0, 0},        {BP_EW_STORE, 0, 0, 4, 0, 0}};
static const bp_ew_program_t k_prog = {
    .struct_size = sizeof k_prog, .num_instrs = 6, .num_registers = 5, .num_inputs = 2,
    .num_outputs = 1, .compute_dtype = BP_DTYPE_F32, .instr_stride = sizeof(bp_ew_instr_t),
    .instrs = k_instrs};
static float expect(float a, float b) { return -((a + b) * a); }

static bp_tensor_desc_t k_shape = {.struct_size = sizeof(bp_tensor_desc_t), .dtype = BP_DTYPE_F32,
                                   .rank = 1, .sizes = {N}, .strides = {1}};

static bpp_executable_t compile_program(void) {
  const bp_tensor_desc_t* values[3] = {&k_shape, &k_shape, &k_shape};
  bp_region_desc_t r = {.struct_size = sizeof r, .kind = BP_REGION_EW_PROGRAM, .num_values = 3,
                        .num_args = 3, .num_inputs = 2, .values = values, .program = &k_prog};
  bp_support_t why = {.struct_size = sizeof why};
  bpp_executable_t e = NULL;
  assert_int_equal(X->region_compile(g_fx.dev, &r, &why, &e), BP_OK);
  return e;
}

/* The same as GRAPH: t = a + b (alpha 1); u = t * a; out = -u (values 3
 * and 4 are temporaries in the workspace). */
static const bp_binary_attrs_t k_one = {.struct_size = sizeof k_one,
                                        .alpha = {.kind = BP_SCALAR_FLOAT, .v.f = 1.0}};
static const uint32_t k_add_ids[] = {0, 1, 3}, k_mul_ids[] = {3, 0, 4}, k_neg_ids[] = {4, 2};
static const bp_region_node_t k_nodes[3] = {
    {.struct_size = sizeof(bp_region_node_t), .op_id = BP_OP_add, .num_inputs = 2, .num_outputs = 1,
     .compute_dtype = BP_DTYPE_F32, .inputs = k_add_ids, .outputs = k_add_ids + 2, .attrs = &k_one},
    {.struct_size = sizeof(bp_region_node_t), .op_id = BP_OP_mul, .num_inputs = 2, .num_outputs = 1,
     .compute_dtype = BP_DTYPE_F32, .inputs = k_mul_ids, .outputs = k_mul_ids + 2, .attrs = &k_one},
    {.struct_size = sizeof(bp_region_node_t), .op_id = BP_OP_neg, .num_inputs = 1, .num_outputs = 1,
     .compute_dtype = BP_DTYPE_F32, .inputs = k_neg_ids, .outputs = k_neg_ids + 1}};

static bp_region_desc_t graph_desc(const bp_tensor_desc_t** values, const bp_region_node_t** nodes) {
  for (int i = 0; i < 5; ++i) values[i] = &k_shape;
  for (int i = 0; i < 3; ++i) nodes[i] = &k_nodes[i];
  return (bp_region_desc_t){.struct_size = sizeof(bp_region_desc_t), .kind = BP_REGION_GRAPH,
                            .num_values = 5, .num_args = 3, .num_inputs = 2, .num_nodes = 3,
                            .values = values, .nodes = nodes};
}

static void launch_ok(bpp_executable_t e, tensor_t* a, tensor_t* b, tensor_t* o,
                      const bp_tensor_desc_t* ws) {
  const bp_tensor_desc_t* args[3] = {&a->d, &b->d, &o->d};
  assert_int_equal(X->executable_launch(g_fx.s, e, 3, args, ws), BP_OK);
  assert_int_equal(C->stream_synchronize(g_fx.s), BP_OK);
}
static void check(const tensor_t* a, const tensor_t* b, const tensor_t* o) {
  for (int i = 0; i < N; ++i) assert_float_equal(o->host[i], expect(a->host[i], b->host[i]), 1e-5);
}

/* ---- tests ---------------------------------------------------------------------- */
/* An EW_PROGRAM region replayed 5 times: one capture, one instantiation,
 * five graph launches, the kernel launched once (inside the capture);
 * results equal the eager launch_ew_program's. New input values reach the
 * replay (the graph reads memory when it runs); a new output buffer is a
 * re-capture that updates the instantiated graph. */
static void test_program_replays_as_one_graph(void** state) {
  (void)state;
  open_with(FAKE_CUDA_PATH, F);
  tensor_t a = tensor_new(0), b = tensor_new(64), o = tensor_new(0), eager = tensor_new(0);
  fill(&a, 0.5f, -3.0f);
  fill(&b, -0.25f, 1.0f);
  const bp_tensor_desc_t* in[2] = {&a.d, &b.d};
  const bp_tensor_desc_t* out[1] = {&eager.d};
  assert_int_equal(V->caps->launch_ew_program(g_fx.s, &k_prog, 2, in, 1, out), BP_OK);
  assert_int_equal(C->stream_synchronize(g_fx.s), BP_OK);
  bpp_executable_t e = compile_program();
  uint64_t k0 = calls("cuLaunchKernel");
  for (int rep = 0; rep < 5; ++rep) {
    memset(o.host, 0, N * sizeof(float));
    launch_ok(e, &a, &b, &o, NULL);
    assert_memory_equal(o.host, eager.host, N * sizeof(float));
  }
  check(&a, &b, &o);
  assert_int_equal(calls("cuStreamBeginCapture_v2"), 1);
  assert_int_equal(calls("cuGraphInstantiateWithFlags"), 1);
  assert_int_equal(calls("cuGraphLaunch"), 5);
  assert_int_equal(calls("cuLaunchKernel") - k0, 1);
  fill(&a, 2.0f, 0.5f); /* same buffers, new values: no new capture */
  launch_ok(e, &a, &b, &o, NULL);
  check(&a, &b, &o);
  assert_int_equal(calls("cuStreamBeginCapture_v2"), 1);
  tensor_t o2 = tensor_new(128); /* another output buffer: capture again, update */
  launch_ok(e, &a, &b, &o2, NULL);
  check(&a, &b, &o2);
  assert_int_equal(calls("cuStreamBeginCapture_v2"), 2);
  assert_int_equal(calls("cuGraphExecUpdate_v2"), 1);
  assert_int_equal(calls("cuGraphInstantiateWithFlags"), 1);
  assert_int_equal(calls("cuGraphLaunch"), 7);
  X->executable_release(e);
  bpp_buffer_t bufs[] = {a.b, b.b, o.b, eager.b, o2.b};
  for (int i = 0; i < 5; ++i) C->buffer_release(bufs[i]);
}

/* Three ops (add, mul, neg) with two temporaries in the workspace: one
 * graph launch per run, three kernels captured once. */
static void test_graph_region_multi_op(void** state) {
  (void)state;
  open_with(FAKE_CUDA_PATH, F);
  const bp_tensor_desc_t* values[5];
  const bp_region_node_t* nodes[3];
  bp_region_desc_t r = graph_desc(values, nodes);
  bp_support_t why = {.struct_size = sizeof why};
  bpp_executable_t e = NULL;
  assert_int_equal(X->region_compile(g_fx.dev, &r, &why, &e), BP_OK);
  bp_region_info_t info = {.struct_size = sizeof info};
  assert_int_equal(X->executable_get_info(e, &info), BP_OK);
  assert_true(info.workspace_bytes >= 2 * N * sizeof(float));
  bp_buffer_alloc_info_t ai = {.struct_size = sizeof ai, .memory_space = 0,
                               .size_bytes = info.workspace_bytes + 256};
  bpp_buffer_t wsb = NULL;
  assert_int_equal(C->buffer_allocate(g_fx.dev, &ai, &wsb), BP_OK);
  bp_tensor_desc_t ws = {.struct_size = sizeof ws, .dtype = BP_DTYPE_U8, .rank = 1, .buffer = wsb,
                         .byte_offset = 256, .sizes = {(int64_t)info.workspace_bytes}, .strides = {1}};
  const bp_tensor_desc_t* noargs[3] = {NULL, NULL, NULL};
  assert_int_equal(X->executable_launch(g_fx.s, e, 3, noargs, &ws), BP_INVALID_ARGUMENT);
  tensor_t a = tensor_new(0), b = tensor_new(0), o = tensor_new(0);
  const bp_tensor_desc_t* args[3] = {&a.d, &b.d, &o.d};
  assert_int_equal(X->executable_launch(g_fx.s, e, 3, args, NULL), BP_INVALID_ARGUMENT);
  assert_non_null(strstr(g_msg, "workspace"));
  uint64_t k0 = calls("cuLaunchKernel");
  for (int rep = 0; rep < 4; ++rep) {
    fill(&a, 0.25f * (float)(rep + 1), -1.0f);
    fill(&b, 1.5f, (float)rep);
    launch_ok(e, &a, &b, &o, &ws);
    check(&a, &b, &o);
  }
  assert_int_equal(calls("cuLaunchKernel") - k0, 3);
  assert_int_equal(calls("cuStreamBeginCapture_v2"), 1);
  assert_int_equal(calls("cuGraphLaunch"), 4);
  X->executable_release(e);
  bpp_buffer_t bufs[] = {a.b, b.b, o.b, wsb};
  for (int i = 0; i < 4; ++i) C->buffer_release(bufs[i]);
}

/* A capture the driver invalidates: the launch still runs (eagerly) and
 * the region stays eager; an instantiation out of memory is
 * RESOURCE_EXHAUSTED with the driver's error, and the next launch
 * captures again. */
static void test_capture_failures(void** state) {
  (void)state;
  open_with(FAKE_CUDA_PATH, F);
  tensor_t a = tensor_new(0), b = tensor_new(0), o = tensor_new(0);
  fill(&a, 1.0f, 0.0f);
  fill(&b, -2.0f, 3.0f);
  bpp_executable_t e = compile_program();
  F->fail_call("cuGraphInstantiateWithFlags", 1, CUDA_ERROR_OUT_OF_MEMORY);
  const bp_tensor_desc_t* args[3] = {&a.d, &b.d, &o.d};
  assert_int_equal(X->executable_launch(g_fx.s, e, 3, args, NULL), BP_RESOURCE_EXHAUSTED);
  assert_non_null(strstr(g_msg, "cuGraphInstantiate: CUDA_ERROR_OUT_OF_MEMORY (2)"));
  assert_int_equal(C->stream_synchronize(g_fx.s), BP_OK);
  launch_ok(e, &a, &b, &o, NULL);
  check(&a, &b, &o);
  assert_int_equal(calls("cuStreamBeginCapture_v2"), 2);
  assert_int_equal(calls("cuGraphLaunch"), 1);
  X->executable_release(e);

  e = compile_program();
  F->fail_call("cuStreamEndCapture", 1, CUDA_ERROR_STREAM_CAPTURE_INVALIDATED);
  memset(o.host, 0, N * sizeof(float));
  uint64_t k0 = calls("cuLaunchKernel");
  launch_ok(e, &a, &b, &o, NULL);
  check(&a, &b, &o);
  launch_ok(e, &a, &b, &o, NULL);
  assert_int_equal(calls("cuStreamBeginCapture_v2"), 3); /* no capture after the failure */
  assert_int_equal(calls("cuGraphLaunch"), 1);
  assert_int_equal(calls("cuLaunchKernel") - k0, 3); /* captured once, then two eager */
  X->executable_release(e);
  bpp_buffer_t bufs[] = {a.b, b.b, o.b};
  for (int i = 0; i < 3; ++i) C->buffer_release(bufs[i]);
}

/* A driver that lacks the graph entry points: every launch is eager, with
 * the same results. */
static void test_driver_without_graphs(void** state) {
  (void)state;
  void* lib = dlopen(FAKE_CUDA_NOGRAPHS_PATH, RTLD_NOW | RTLD_LOCAL);
  assert_non_null(lib);
  assert_null(dlsym(lib, "cuGraphLaunch"));
  const fake_cuda_control_t* f = ((fake_cuda_control_fn)dlsym(lib, FAKE_CUDA_CONTROL_SYMBOL))();
  f->reset();
  open_with(FAKE_CUDA_NOGRAPHS_PATH, f);
  tensor_t a = tensor_new(0), b = tensor_new(0), o = tensor_new(0);
  fill(&a, 0.75f, 1.0f);
  fill(&b, 0.5f, -4.0f);
  bpp_executable_t e = compile_program();
  uint64_t k0 = calls("cuLaunchKernel");
  for (int rep = 0; rep < 3; ++rep) {
    memset(o.host, 0, N * sizeof(float));
    launch_ok(e, &a, &b, &o, NULL);
    check(&a, &b, &o);
  }
  assert_int_equal(calls("cuLaunchKernel") - k0, 3);
  X->executable_release(e);
  bpp_buffer_t bufs[] = {a.b, b.b, o.b};
  for (int i = 0; i < 3; ++i) C->buffer_release(bufs[i]);
  assert_int_equal(teardown(state), 0);
  g_fx.s = NULL, g_fx.dev = NULL, g_fx.inst = NULL;
  g_fx.f = NULL;
  dlclose(lib);
}

/* The fake's capture rules, straight through its entry points:
 * synchronizing a capturing stream or allocating on the capturing thread
 * is refused and invalidates the capture. */
typedef CUresult (*fn_stream_t)(CUstream);
static void test_fake_capture_rules(void** state) {
  (void)state;
  g_fx.f = F;
  CUresult (*init)(unsigned) = (CUresult(*)(unsigned))dlsym(g_fake, "cuInit");
  CUresult (*retain)(CUcontext*, CUdevice) = (CUresult(*)(CUcontext*, CUdevice))dlsym(g_fake, "cuDevicePrimaryCtxRetain");
  CUresult (*release)(CUdevice) = (CUresult(*)(CUdevice))dlsym(g_fake, "cuDevicePrimaryCtxRelease_v2");
  CUresult (*push)(CUcontext) = (CUresult(*)(CUcontext))dlsym(g_fake, "cuCtxPushCurrent_v2");
  CUresult (*pop)(CUcontext*) = (CUresult(*)(CUcontext*))dlsym(g_fake, "cuCtxPopCurrent_v2");
  CUresult (*create)(CUstream*, unsigned, int) = (CUresult(*)(CUstream*, unsigned, int))dlsym(g_fake, "cuStreamCreateWithPriority");
  fn_stream_t destroy = (fn_stream_t)dlsym(g_fake, "cuStreamDestroy_v2");
  fn_stream_t sync = (fn_stream_t)dlsym(g_fake, "cuStreamSynchronize");
  CUresult (*begin)(CUstream, CUstreamCaptureMode) = (CUresult(*)(CUstream, CUstreamCaptureMode))dlsym(g_fake, "cuStreamBeginCapture_v2");
  CUresult (*end)(CUstream, CUgraph*) = (CUresult(*)(CUstream, CUgraph*))dlsym(g_fake, "cuStreamEndCapture");
  CUresult (*alloc)(CUdeviceptr*, size_t) = (CUresult(*)(CUdeviceptr*, size_t))dlsym(g_fake, "cuMemAlloc_v2");
  CUresult (*gdestroy)(CUgraph) = (CUresult(*)(CUgraph))dlsym(g_fake, "cuGraphDestroy");
  CUcontext ctx = NULL;
  CUstream s = NULL;
  assert_int_equal(init(0), CUDA_SUCCESS);
  assert_int_equal(retain(&ctx, 0), CUDA_SUCCESS);
  assert_int_equal(push(ctx), CUDA_SUCCESS);
  assert_int_equal(create(&s, CU_STREAM_NON_BLOCKING, 0), CUDA_SUCCESS);
  CUgraph g = NULL;
  assert_int_equal(begin(s, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL), CUDA_SUCCESS);
  assert_int_equal(end(s, &g), CUDA_SUCCESS); /* an empty capture is a graph */
  assert_non_null(g);
  assert_int_equal(gdestroy(g), CUDA_SUCCESS);
  assert_int_equal(begin(s, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL), CUDA_SUCCESS);
  assert_int_equal(begin(s, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL), CUDA_ERROR_ILLEGAL_STATE);
  assert_int_equal(sync(s), CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
  assert_int_equal(end(s, &g), CUDA_ERROR_STREAM_CAPTURE_INVALIDATED);
  assert_null(g);
  CUdeviceptr p = 0;
  assert_int_equal(begin(s, CU_STREAM_CAPTURE_MODE_GLOBAL), CUDA_SUCCESS);
  assert_int_equal(alloc(&p, 64), CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
  assert_int_equal(end(s, &g), CUDA_ERROR_STREAM_CAPTURE_INVALIDATED);
  assert_int_equal(sync(s), CUDA_SUCCESS); /* capture over: legal again */
  assert_int_equal(destroy(s), CUDA_SUCCESS);
  pop(&ctx);
  release(0);
}

/* Saved bytes reload into an executable that runs the same; a flipped
 * byte is DATA_LOSS, another plugin's bytes FAILED_PRECONDITION, a short
 * buffer OUT_OF_RANGE. */
static void test_serialize_roundtrip(void** state) {
  (void)state;
  open_with(FAKE_CUDA_PATH, F);
  const bp_tensor_desc_t* values[5];
  const bp_region_node_t* nodes[3];
  bp_region_desc_t r = graph_desc(values, nodes);
  bp_support_t why = {.struct_size = sizeof why};
  bpp_executable_t e = NULL, back = NULL;
  assert_int_equal(X->region_compile(g_fx.dev, &r, &why, &e), BP_OK);
  uint64_t size = 0;
  assert_int_equal(X->executable_serialize(e, NULL, 0, &size), BP_OK);
  unsigned char* bytes = malloc(size);
  assert_int_equal(X->executable_serialize(e, bytes, size - 1, &size), BP_OUT_OF_RANGE);
  assert_int_equal(X->executable_serialize(e, bytes, size, &size), BP_OK);
  assert_int_equal(X->executable_deserialize(g_fx.dev, bytes, size, &back), BP_OK);
  bp_region_info_t info = {.struct_size = sizeof info};
  assert_int_equal(X->executable_get_info(back, &info), BP_OK);
  bp_buffer_alloc_info_t ai = {.struct_size = sizeof ai, .memory_space = 0,
                               .size_bytes = info.workspace_bytes};
  bpp_buffer_t wsb = NULL;
  assert_int_equal(C->buffer_allocate(g_fx.dev, &ai, &wsb), BP_OK);
  bp_tensor_desc_t ws = {.struct_size = sizeof ws, .dtype = BP_DTYPE_U8, .rank = 1, .buffer = wsb,
                         .sizes = {(int64_t)info.workspace_bytes}, .strides = {1}};
  tensor_t a = tensor_new(0), b = tensor_new(0), o = tensor_new(0);
  fill(&a, 0.5f, 2.0f);
  fill(&b, 1.0f, -7.0f);
  launch_ok(back, &a, &b, &o, &ws);
  check(&a, &b, &o);
  for (uint64_t i = 8; i < size; i += size / 7) {
    bytes[i] ^= 0x40;
    bpp_executable_t bad = NULL;
    assert_int_equal(X->executable_deserialize(g_fx.dev, bytes, size, &bad), BP_DATA_LOSS);
    assert_null(bad);
    bytes[i] ^= 0x40;
  }
  bpp_executable_t bad = NULL;
  assert_int_equal(X->executable_deserialize(g_fx.dev, bytes, size / 2, &bad), BP_DATA_LOSS);
  bytes[0] = 'X';
  assert_int_equal(X->executable_deserialize(g_fx.dev, bytes, size, &bad), BP_FAILED_PRECONDITION);
  assert_non_null(strstr(g_msg, "not a region of the CUDA plugin"));
  free(bytes);
  X->executable_release(e);
  X->executable_release(back);
  bpp_buffer_t bufs[] = {a.b, b.b, o.b, wsb};
  for (int i = 0; i < 4; ++i) C->buffer_release(bufs[i]);
}

/* region_claim groups runs of nodes the kernels take; an f32 mm (run by
 * cuBLASLt eagerly) splits them with its reason; compiling a region with
 * it is refused with the same reason. */
static void test_claim_and_refusal(void** state) {
  (void)state;
  open_with(FAKE_CUDA_PATH, F);
  static const bp_tensor_desc_t sq = {.struct_size = sizeof(bp_tensor_desc_t), .dtype = BP_DTYPE_F32,
                                      .rank = 2, .sizes = {4, 4}, .strides = {4, 1}};
  const bp_tensor_desc_t* values[6] = {&sq, &sq, &sq, &sq, &sq, &sq};
  static const uint32_t neg1[] = {0, 2}, mm[] = {2, 1, 3}, neg2[] = {3, 4}, neg3[] = {4, 5};
  const bp_region_node_t n[4] = {
      {.struct_size = sizeof n[0], .op_id = BP_OP_neg, .num_inputs = 1, .num_outputs = 1, .inputs = neg1, .outputs = neg1 + 1},
      {.struct_size = sizeof n[0], .op_id = BP_OP_mm, .num_inputs = 2, .num_outputs = 1, .inputs = mm, .outputs = mm + 2},
      {.struct_size = sizeof n[0], .op_id = BP_OP_neg, .num_inputs = 1, .num_outputs = 1, .inputs = neg2, .outputs = neg2 + 1},
      {.struct_size = sizeof n[0], .op_id = BP_OP_neg, .num_inputs = 1, .num_outputs = 1, .inputs = neg3, .outputs = neg3 + 1}};
  const bp_region_node_t* nodes[4] = {&n[0], &n[1], &n[2], &n[3]};
  bp_region_desc_t g = {.struct_size = sizeof g, .kind = BP_REGION_GRAPH, .num_values = 6,
                        .num_args = 3, .num_inputs = 2, .num_nodes = 4, .values = values, .nodes = nodes};
  uint32_t groups[4] = {9, 9, 9, 9};
  bp_support_t r[4];
  bp_support_t* rp[4];
  for (int i = 0; i < 4; ++i) r[i] = (bp_support_t){.struct_size = sizeof r[i]}, rp[i] = &r[i];
  assert_int_equal(X->region_claim(g_fx.dev, &g, groups, rp), BP_OK);
  assert_int_equal(groups[0], 1);
  assert_int_equal(groups[1], 0);
  assert_int_equal(groups[2], 2);
  assert_int_equal(groups[3], 2);
  assert_non_null(strstr(r[1].message, "cuBLASLt"));
  bp_support_t why = {.struct_size = sizeof why};
  bpp_executable_t e = NULL;
  assert_int_equal(X->region_compile(g_fx.dev, &g, &why, &e), BP_UNIMPLEMENTED);
  assert_null(e);
  assert_false(why.supported);
  assert_non_null(strstr(why.message, "node 1 (mm)"));
}

/* Inputs a, b (filled) and an output o for k_prog; in/out point at them. */
typedef struct prog_io {
  tensor_t a, b, o;
  const bp_tensor_desc_t* in[2];
  const bp_tensor_desc_t* out[1];
} prog_io_t;
static void prog_io_new(prog_io_t* io) {
  io->a = tensor_new(0);
  io->b = tensor_new(64);
  io->o = tensor_new(0);
  fill(&io->a, 0.5f, -3.0f);
  fill(&io->b, -0.25f, 1.0f);
  io->in[0] = &io->a.d;
  io->in[1] = &io->b.d;
  io->out[0] = &io->o.d;
}
static void prog_io_release(prog_io_t* io) {
  C->buffer_release(io->a.b);
  C->buffer_release(io->b.b);
  C->buffer_release(io->o.b);
}
/* Launches k_prog eagerly over io, checks the result; the kernel launched. */
static void run_prog(prog_io_t* io, fake_cuda_launch_t* last) {
  uint64_t n;
  memset(io->o.host, 0, N * sizeof(float));
  assert_int_equal(V->caps->launch_ew_program(g_fx.s, &k_prog, 2, io->in, 1, io->out), BP_OK);
  assert_int_equal(C->stream_synchronize(g_fx.s), BP_OK);
  check(&io->a, &io->b, &io->o);
  g_fx.f->last_launch(last, &n);
}

/* Fused programs launched eagerly run as generated kernels: NVRTC (the
 * fake) compiles the generated text once per program and layout, for the
 * device's compute capability and without fused multiply-add; the launch
 * is of bp_ew_gen_f32 with the interpreter's arguments (the fake runs the
 * interpreter for it, so packing is checked by the results); a second
 * launch compiles nothing; a refused compile falls back to the interpreter
 * once and for all; BP_CUDA_EW_GENERATE=0 turns it off. */
static void test_generated_kernel_nvrtc(void** state) {
  (void)state;
  open_with(FAKE_CUDA_PATH, F);
  prog_io_t io;
  prog_io_new(&io);
  int c0, c1, live;
  char opts[512], src[2048];
  nvrtc_record(&c0, &live, opts, sizeof opts, src, sizeof src);
  fake_cuda_launch_t last;
  for (int rep = 0; rep < 2; ++rep) {
    run_prog(&io, &last);
    assert_string_equal(last.name, "bp_ew_gen_f32");
    assert_int_equal(last.nparams, 9);
    nvrtc_record(&c1, &live, opts, sizeof opts, src, sizeof src);
    assert_int_equal(c1, c0 + 1); /* compiled once, found the second time */
    assert_int_equal(live, 0);   /* every NVRTC program destroyed */
  }
  assert_non_null(strstr(opts, "--gpu-architecture=compute_90"));
  assert_non_null(strstr(opts, "--fmad=false"));
  char want[96];
  snprintf(want, sizeof want, "r2 = wrapc(apply(%uu, r0, r1, r0, 0u, A), %uu);", BP_OP_add, BP_DTYPE_F32);
  assert_non_null(strstr(src, want));
  assert_non_null(strstr(src, "BP_KERNEL void bp_ew_gen_f32("));
  /* Another layout (b broadcast): another kernel, refused by NVRTC: the
   * interpreter runs it, and the refusal is kept. */
  bp_tensor_desc_t one = io.b.d;
  one.sizes[0] = 1;
  const bp_tensor_desc_t* in_b[2] = {&io.a.d, &one};
  setenv("FAKE_NVRTC_FAIL", "1", 1);
  for (int rep = 0; rep < 2; ++rep) {
    uint64_t n;
    assert_int_equal(V->caps->launch_ew_program(g_fx.s, &k_prog, 2, in_b, 1, io.out), BP_OK);
    assert_int_equal(C->stream_synchronize(g_fx.s), BP_OK);
    for (int i = 0; i < N; ++i) assert_float_equal(io.o.host[i], expect(io.a.host[i], io.b.host[0]), 1e-5);
    g_fx.f->last_launch(&last, &n);
    assert_string_equal(last.name, "bp_ew_f32");
    nvrtc_record(&c0, &live, opts, sizeof opts, src, sizeof src);
    assert_int_equal(c0, c1 + 1);
  }
  unsetenv("FAKE_NVRTC_FAIL");
  /* Off: the interpreter, nothing compiled. */
  setenv("BP_CUDA_EW_GENERATE", "0", 1);
  run_prog(&io, &last);
  unsetenv("BP_CUDA_EW_GENERATE");
  assert_string_equal(last.name, "bp_ew_f32");
  nvrtc_record(&c1, &live, opts, sizeof opts, src, sizeof src);
  assert_int_equal(c1, c0);
  prog_io_release(&io);
}

/* Opens the fixture with BP_NVRTC_PATH = `nvrtc` (NULL: unset, the
 * system's; NVRTC is opened at the first fused launch; teardown puts the
 * fake back). */
static void open_with_nvrtc(const char* nvrtc) {
  if (nvrtc) setenv("BP_NVRTC_PATH", nvrtc, 1);
  else unsetenv("BP_NVRTC_PATH");
  open_with(FAKE_CUDA_PATH, F);
}

/* Without NVRTC (BP_NVRTC_PATH names nothing) fused programs run on the
 * interpreter kernel. */
static void test_generated_kernel_without_nvrtc(void** state) {
  (void)state;
  open_with_nvrtc("/nonexistent/libnvrtc.so.13");
  prog_io_t io;
  prog_io_new(&io);
  int c0, c1, live;
  char opts[64], src[64];
  nvrtc_record(&c0, &live, opts, sizeof opts, src, sizeof src);
  fake_cuda_launch_t last;
  run_prog(&io, &last);
  assert_string_equal(last.name, "bp_ew_f32");
  nvrtc_record(&c1, &live, opts, sizeof opts, src, sizeof src);
  assert_int_equal(c1, c0);
  prog_io_release(&io);
}

/* The real NVRTC where this machine has one (the toolkit's libnvrtc.so.13
 * or .12): the generated text, prelude included, compiles as CUDA C++ for
 * compute 9.0 and its PTX entry point (bp_ew_gen_f32, 9 parameters) is
 * what the fake driver runs. Without a loadable NVRTC (or under valgrind,
 * where NVRTC's own code is not checked) the interpreter runs instead,
 * which is asserted too. */
static void test_generated_kernel_real_nvrtc(void** state) {
  (void)state;
  const char* vg = getenv("BP_UNDER_VALGRIND");
  void* real = vg && *vg == '1' ? NULL : dlopen("libnvrtc.so.13", RTLD_NOW | RTLD_LOCAL);
  if (!real && !(vg && *vg == '1')) real = dlopen("libnvrtc.so.12", RTLD_NOW | RTLD_LOCAL);
  int use_real = real != NULL; /* left loaded, as the plugin leaves it */
  open_with_nvrtc(use_real ? NULL : "/nonexistent/libnvrtc.so.13");
  prog_io_t io;
  prog_io_new(&io);
  fake_cuda_launch_t last;
  run_prog(&io, &last);
  if (!use_real) fprintf(stderr, "test_generated_kernel_real_nvrtc: no real NVRTC here; the interpreter ran\n");
  assert_string_equal(last.name, use_real ? "bp_ew_gen_f32" : "bp_ew_f32");
  assert_int_equal(last.nparams, 9);
  prog_io_release(&io);
}

/* An EW_PROGRAM region over `b_shape` (the second input's shape). */
static bpp_executable_t compile_program_b(const bp_tensor_desc_t* b_shape) {
  const bp_tensor_desc_t* values[3] = {&k_shape, b_shape, &k_shape};
  bp_region_desc_t r = {.struct_size = sizeof r, .kind = BP_REGION_EW_PROGRAM, .num_values = 3,
                        .num_args = 3, .num_inputs = 2, .values = values, .program = &k_prog};
  bp_support_t why = {.struct_size = sizeof why};
  bpp_executable_t e = NULL;
  assert_int_equal(X->region_compile(g_fx.dev, &r, &why, &e), BP_OK);
  return e;
}

/* Launches region e over io (b as `b`) twice; out must be -((a + b) * a)
 * with b broadcast when it has one element. The kernel captured. */
static void run_region(bpp_executable_t e, prog_io_t* io, const bp_tensor_desc_t* b,
                       fake_cuda_launch_t* last) {
  const bp_tensor_desc_t* args[3] = {&io->a.d, b, &io->o.d};
  for (int rep = 0; rep < 2; ++rep) {
    memset(io->o.host, 0, N * sizeof(float));
    assert_int_equal(X->executable_launch(g_fx.s, e, 3, args, NULL), BP_OK);
    assert_int_equal(C->stream_synchronize(g_fx.s), BP_OK);
    for (int i = 0; i < N; ++i)
      assert_float_equal(io->o.host[i], expect(io->a.host[i], io->b.host[b->sizes[0] == 1 ? 0 : i]), 1e-5);
  }
  uint64_t n;
  g_fx.f->last_launch(last, &n);
}

/* Compiled EW_PROGRAM regions run the program's generated kernel, built
 * by NVRTC before the capture and captured into the graph like any launch
 * (one capture, one compile for two runs); results equal the reference.
 * A layout NVRTC refuses runs the interpreter kernel, the reason logged;
 * BP_CUDA_EW_GENERATE=0 plans interpreter launches, nothing compiled.
 * The replays' events come from the device's event pool. */
static void test_region_generated_kernel(void** state) {
  (void)state;
  open_with(FAKE_CUDA_PATH, F);
  prog_io_t io;
  prog_io_new(&io);
  int c0, c1, live;
  char opts[64], src[64];
  nvrtc_record(&c0, &live, opts, sizeof opts, src, sizeof src);
  fake_cuda_launch_t last;
  const uint64_t ev0 = calls("cuEventCreate");
  bpp_executable_t e = compile_program();
  uint64_t k0 = calls("cuLaunchKernel");
  run_region(e, &io, &io.b.d, &last);
  assert_string_equal(last.name, "bp_ew_gen_f32");
  assert_int_equal(last.nparams, 9);
  assert_int_equal(calls("cuLaunchKernel") - k0, 1); /* inside the one capture */
  assert_int_equal(calls("cuStreamBeginCapture_v2"), 1);
  assert_int_equal(calls("cuGraphLaunch"), 2);
  nvrtc_record(&c1, &live, opts, sizeof opts, src, sizeof src);
  assert_int_equal(c1, c0 + 1);
  assert_int_equal(live, 0);
  assert_false(logged("runs on the interpreter kernel"));
  X->executable_release(e);
  /* b broadcast: another generated text, which NVRTC refuses. */
  bp_tensor_desc_t one = io.b.d, one_shape = k_shape;
  one.sizes[0] = one_shape.sizes[0] = 1;
  setenv("FAKE_NVRTC_FAIL", "1", 1);
  e = compile_program_b(&one_shape);
  run_region(e, &io, &one, &last);
  unsetenv("FAKE_NVRTC_FAIL");
  assert_string_equal(last.name, "bp_ew_f32");
  assert_true(logged("a compiled elementwise region runs on the interpreter kernel"));
  assert_true(logged("fake: compilation refused"));
  nvrtc_record(&c0, &live, opts, sizeof opts, src, sizeof src);
  assert_int_equal(c0, c1 + 1); /* refused once, remembered */
  X->executable_release(e);
  /* Generation off: interpreter launches, nothing compiled or logged. */
  setenv("BP_CUDA_EW_GENERATE", "0", 1);
  log_clear();
  e = compile_program();
  run_region(e, &io, &io.b.d, &last);
  unsetenv("BP_CUDA_EW_GENERATE");
  assert_string_equal(last.name, "bp_ew_f32");
  nvrtc_record(&c1, &live, opts, sizeof opts, src, sizeof src);
  assert_int_equal(c1, c0);
  assert_false(logged("runs on the interpreter kernel"));
  X->executable_release(e);
  /* Three executables one after another: one event, recycled (the pool). */
  assert_int_equal(calls("cuEventCreate") - ev0, 1);
  prog_io_release(&io);
}

/* Without NVRTC a compiled EW_PROGRAM region runs the interpreter kernel
 * (captured as before) and logs why. */
static void test_region_without_nvrtc(void** state) {
  (void)state;
  open_with_nvrtc("/nonexistent/libnvrtc.so.13");
  prog_io_t io;
  prog_io_new(&io);
  fake_cuda_launch_t last;
  bpp_executable_t e = compile_program();
  run_region(e, &io, &io.b.d, &last);
  assert_string_equal(last.name, "bp_ew_f32");
  assert_int_equal(calls("cuGraphLaunch"), 2);
  assert_true(logged("a compiled elementwise region runs on the interpreter kernel"));
  assert_true(logged("no NVRTC"));
  X->executable_release(e);
  prog_io_release(&io);
}

/* ---- the program cache (BP_CUDA_PROGRAM_CACHE) ---------------------------------- */
/* The entries (*.bin) in `dir`: their count, and in `other` the path of
 * one not named `except` (NULL: any). */
static int cache_entries(const char* dir, const char* except, char* other, size_t cap) {
  DIR* d = opendir(dir);
  assert_non_null(d);
  int count = 0;
  for (struct dirent* de; (de = readdir(d));) {
    size_t n = strlen(de->d_name);
    if (n < 4 || strcmp(de->d_name + n - 4, ".bin") != 0) continue;
    char path[600];
    snprintf(path, sizeof path, "%s/%s", dir, de->d_name);
    count++;
    if (!except || strcmp(path, except) != 0) snprintf(other, cap, "%s", path);
  }
  closedir(d);
  return count;
}

/* One process's worth: a fresh instance runs k_prog eagerly; the NVRTC
 * compiles it took (0: loaded from the cache). */
static int compiles_of_fresh_run(void) {
  int c0, c1, live;
  char opts[8], src[8];
  open_with(FAKE_CUDA_PATH, F);
  prog_io_t io;
  prog_io_new(&io);
  fake_cuda_launch_t last;
  nvrtc_record(&c0, &live, opts, sizeof opts, src, sizeof src);
  run_prog(&io, &last);
  assert_string_equal(last.name, "bp_ew_gen_f32");
  nvrtc_record(&c1, &live, opts, sizeof opts, src, sizeof src);
  prog_io_release(&io);
  C->stream_destroy(g_fx.s);
  C->device_close(g_fx.dev);
  C->instance_destroy(g_fx.inst);
  memset(&g_fx, 0, sizeof g_fx);
  return c1 - c0;
}

static size_t read_file(const char* path, unsigned char* data, size_t cap) {
  FILE* f = fopen(path, "rb");
  assert_non_null(f);
  size_t n = fread(data, 1, cap, f);
  fclose(f);
  return n;
}
/* Flips bit 5 of the byte `back` bytes before the end of `path`, in place. */
static void flip_byte(const char* path, long back) {
  FILE* f = fopen(path, "r+b");
  assert_non_null(f);
  assert_int_equal(fseek(f, -back, SEEK_END), 0);
  int c = fgetc(f);
  assert_int_equal(fseek(f, -back, SEEK_END), 0);
  assert_int_equal(fputc(c ^ 0x20, f), c ^ 0x20);
  assert_int_equal(fclose(f), 0);
}

/* The generated kernels' PTX on disk: a miss compiles and writes one
 * entry, a later instance (another process's start) loads it and compiles
 * nothing; a corrupt entry (one payload byte flipped, or truncated) is
 * ignored with a warning, compiled again and rewritten; another driver
 * version is another key (a miss); an entry of another key moved to this
 * key's path (a foreign file) is rejected and rewritten; a folder at the
 * path is left alone; a relative folder is refused with a warning; set to
 * nothing the variable turns the cache off (as the group's setup leaves
 * it). */
static void test_program_cache(void** state) {
  (void)state;
  char dir[] = "/tmp/bp-cuda-program-cache-XXXXXX";
  assert_non_null(mkdtemp(dir));
  setenv("BP_CUDA_PROGRAM_CACHE", dir, 1);
  char a[600], b[600];
  assert_int_equal(compiles_of_fresh_run(), 1); /* miss */
  assert_int_equal(cache_entries(dir, NULL, a, sizeof a), 1);
  assert_int_equal(compiles_of_fresh_run(), 0); /* hit */
  flip_byte(a, 5); /* corrupt: a PTX byte */
  log_clear();
  assert_int_equal(compiles_of_fresh_run(), 1);
  assert_true(logged("ignored (checksum mismatch (corrupt)); it is rewritten"));
  assert_int_equal(compiles_of_fresh_run(), 0); /* rewritten whole */
  struct stat st;
  assert_int_equal(stat(a, &st), 0);
  assert_int_equal(truncate(a, st.st_size / 2), 0);
  log_clear();
  assert_int_equal(compiles_of_fresh_run(), 1);
  assert_true(logged("ignored (truncated"));
  assert_int_equal(compiles_of_fresh_run(), 0);
  /* Another driver: another key, so a miss and a second entry. */
  setenv("FAKE_CUDA_DRIVER_VERSION", "12080", 1);
  assert_int_equal(compiles_of_fresh_run(), 1);
  assert_int_equal(cache_entries(dir, a, b, sizeof b), 2);
  assert_int_equal(compiles_of_fresh_run(), 0);
  /* The 13.0 driver's entry moved over the 12.8 one: foreign. */
  static unsigned char want[1 << 16], got[1 << 16];
  size_t n = read_file(b, want, sizeof want);
  assert_true(n > 64 && n < sizeof want);
  assert_int_equal(rename(a, b), 0);
  log_clear();
  assert_int_equal(compiles_of_fresh_run(), 1);
  assert_true(logged("ignored (written for another key (cuda ptx; driver 13000;"));
  assert_int_equal(read_file(b, got, sizeof got), n); /* rewritten: the 12.8 entry again */
  assert_memory_equal(got, want, n);
  unsetenv("FAKE_CUDA_DRIVER_VERSION");
  /* A folder at the entry's path: left alone, compiled every time. */
  assert_int_equal(mkdir(a, 0700), 0);
  log_clear();
  assert_int_equal(compiles_of_fresh_run(), 1);
  assert_int_equal(compiles_of_fresh_run(), 1);
  assert_true(logged("is a folder, not a regular file; not used"));
  assert_int_equal(rmdir(a), 0);
  /* A relative folder is refused with a warning; off compiles every time. */
  setenv("BP_CUDA_PROGRAM_CACHE", "relative/programs", 1);
  log_clear();
  assert_int_equal(compiles_of_fresh_run(), 1);
  assert_true(logged("BP_CUDA_PROGRAM_CACHE=relative/programs is not an absolute path"));
  setenv("BP_CUDA_PROGRAM_CACHE", "", 1);
  assert_int_equal(compiles_of_fresh_run(), 1);
  assert_int_equal(compiles_of_fresh_run(), 1);
  assert_int_equal(cache_entries(dir, NULL, a, sizeof a), 1);
  assert_int_equal(remove(b), 0);
  assert_int_equal(rmdir(dir), 0);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(test_program_replays_as_one_graph, setup, teardown),
      cmocka_unit_test_setup_teardown(test_generated_kernel_nvrtc, setup, teardown),
      cmocka_unit_test_setup_teardown(test_generated_kernel_without_nvrtc, setup, teardown),
      cmocka_unit_test_setup_teardown(test_generated_kernel_real_nvrtc, setup, teardown),
      cmocka_unit_test_setup_teardown(test_region_generated_kernel, setup, teardown),
      cmocka_unit_test_setup_teardown(test_region_without_nvrtc, setup, teardown),
      cmocka_unit_test_setup_teardown(test_program_cache, setup, teardown),
      cmocka_unit_test_setup_teardown(test_graph_region_multi_op, setup, teardown),
      cmocka_unit_test_setup_teardown(test_capture_failures, setup, teardown),
      cmocka_unit_test_setup_teardown(test_driver_without_graphs, setup, teardown),
      cmocka_unit_test_setup_teardown(test_fake_capture_rules, setup, teardown),
      cmocka_unit_test_setup_teardown(test_serialize_roundtrip, setup, teardown),
      cmocka_unit_test_setup_teardown(test_claim_and_refusal, setup, teardown),
  };
  return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
