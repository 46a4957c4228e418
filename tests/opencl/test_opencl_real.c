/* Tests of the OpenCL plugin on a real OpenCL driver (PoCL in CI), through
 * its tables: loading and the missing-library path, devices, memory,
 * copies, maps, streams, events, host functions, errors, argument checks
 * and a few ops checked against host loops. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "bp_philox.h"
#include "ocl_internal.h"

typedef struct env {
  const bp_plugin_vtable_t* vt;
  const bpp_core_table_t* core;
  bpp_instance_t inst;
  bpp_device_t dev;
  bpp_stream_t s;
} env_t;

static int setup(void** state) {
  env_t* e = calloc(1, sizeof *e);
  e->vt = ocl_vtable();
  e->core = e->vt->core;
  bpp_instance_create_info_t info = {.struct_size = sizeof info};
  if (e->core->instance_create(&info, &e->inst) != BP_OK) {
    fprintf(stderr, "no OpenCL driver: %s\n", bp_plugin_last_error());
    free(e);
    return -1;
  }
  if (e->core->device_open(e->inst, 0, &e->dev) != BP_OK || e->core->stream_create(e->dev, NULL, &e->s) != BP_OK) {
    e->core->instance_destroy(e->inst);
    free(e);
    return -1;
  }
  *state = e;
  return 0;
}

static int teardown(void** state) {
  env_t* e = *state;
  e->core->stream_destroy(e->s);
  e->core->instance_destroy(e->inst);
  free(e);
  return 0;
}

static bpp_buffer_t alloc(env_t* e, uint64_t size, uint32_t space) {
  bp_buffer_alloc_info_t a = {.struct_size = sizeof a, .memory_space = space, .size_bytes = size};
  bpp_buffer_t b = NULL;
  assert_int_equal(e->core->buffer_allocate(e->dev, &a, &b), BP_OK);
  return b;
}

/* A missing loader: UNAVAILABLE naming the library, nothing leaked. */
static void test_missing_library(void** state) {
  (void)state;
  const bp_plugin_vtable_t* vt = ocl_vtable();
  setenv("BP_OPENCL_LIBRARY", "/nonexistent/libOpenCL.so.1", 1);
  bpp_instance_t inst = (bpp_instance_t)1;
  bpp_instance_create_info_t info = {.struct_size = sizeof info};
  bp_status_t st = vt->core->instance_create(&info, &inst);
  unsetenv("BP_OPENCL_LIBRARY");
  assert_int_equal(st, BP_UNAVAILABLE);
  assert_null(inst);
  assert_non_null(strstr(bp_plugin_last_error(), "/nonexistent/libOpenCL.so.1"));
}

static void test_device(void** state) {
  env_t* e = *state;
  uint32_t n = 0;
  assert_int_equal(e->core->device_count(e->inst, &n), BP_OK);
  assert_true(n >= 1);
  bpp_device_t d;
  assert_int_equal(e->core->device_open(e->inst, n, &d), BP_OUT_OF_RANGE);
  bp_device_properties_t p;
  memset(&p, 0, sizeof p);
  p.struct_size = sizeof p;
  assert_int_equal(e->core->device_get_properties(e->dev, &p), BP_OK);
  assert_true(p.name[0] != 0);
  assert_true(p.memory_bytes > 0 && p.compute_units > 0);
  assert_true(p.dtype_mask & BP_DTYPE_BIT(BP_DTYPE_F32));
  assert_true(p.peak_ops_per_s[BP_DTYPE_F32] > 0 && p.memory_bandwidth_bytes_per_s > 0);
  bp_memory_space_info_t sp[4];
  uint32_t count = 0;
  assert_int_equal(e->core->device_memory_spaces(e->dev, 4, sizeof sp[0], sp, &count), BP_OK);
  assert_int_equal(count, 2);
  assert_int_equal(sp[1].kind, BP_MEMORY_HOST_PINNED);
  assert_true(sp[1].flags & BP_MEMORY_FLAG_HOST_VISIBLE);
}

/* Round trip, fill, overlapping device copy (memmove), map, ranges, budget. */
static void test_memory(void** state) {
  env_t* e = *state;
  enum { N = 1000 };
  float h[N], out[N];
  for (int i = 0; i < N; i++) h[i] = (float)i;
  bpp_buffer_t b = alloc(e, N * 4, 0);
  assert_int_equal(e->core->copy_host_to_device(e->s, h, b, 0, N * 4), BP_OK);
  /* Shift elements 0..899 up by 100 inside the buffer: overlapping. */
  assert_int_equal(e->core->copy_device_to_device(e->s, b, 0, b, 400, 900 * 4), BP_OK);
  uint32_t pat = 0x3f800000u; /* 1.0f */
  assert_int_equal(e->core->buffer_fill(e->s, b, 0, 10 * 4, &pat, 4), BP_OK);
  assert_int_equal(e->core->copy_device_to_host(e->s, b, 0, out, N * 4), BP_OK);
  assert_int_equal(e->core->stream_synchronize(e->s), BP_OK);
  for (int i = 0; i < 10; i++) assert_true(out[i] == 1.0f);
  for (int i = 10; i < 100; i++) assert_true(out[i] == (float)i);
  for (int i = 100; i < N; i++) assert_true(out[i] == (float)(i - 100));
  /* Errors: out of range, bad pattern, size 0, over the budget. */
  assert_int_equal(e->core->copy_device_to_host(e->s, b, 4, out, N * 4), BP_OUT_OF_RANGE);
  assert_int_equal(e->core->buffer_fill(e->s, b, 0, 8, &pat, 3), BP_INVALID_ARGUMENT);
  bp_buffer_alloc_info_t a = {.struct_size = sizeof a, .size_bytes = 0};
  bpp_buffer_t x = NULL;
  assert_int_equal(e->core->buffer_allocate(e->dev, &a, &x), BP_INVALID_ARGUMENT);
  a.size_bytes = UINT64_MAX / 2;
  assert_int_equal(e->core->buffer_allocate(e->dev, &a, &x), BP_RESOURCE_EXHAUSTED);
  a.size_bytes = 64;
  a.memory_space = 7;
  assert_int_equal(e->core->buffer_allocate(e->dev, &a, &x), BP_INVALID_ARGUMENT);
  assert_null(x);
  uint64_t used = 0, budget = 0;
  assert_int_equal(e->core->device_memory_usage(e->dev, 0, &used, &budget), BP_OK);
  assert_true(used >= N * 4 && budget >= used);
  /* Pinned host memory maps. */
  bpp_buffer_t p = alloc(e, 64, 1);
  float* m = NULL;
  assert_int_equal(e->core->buffer_map(p, 0, 64, (void**)&m), BP_OK);
  for (int i = 0; i < 16; i++) m[i] = (float)(2 * i);
  assert_int_equal(e->core->buffer_unmap(p), BP_OK);
  assert_int_equal(e->core->copy_device_to_host(e->s, p, 0, out, 64), BP_OK);
  assert_int_equal(e->core->stream_synchronize(e->s), BP_OK);
  for (int i = 0; i < 16; i++) assert_true(out[i] == (float)(2 * i));
  assert_int_equal(e->core->buffer_map(p, 60, 8, (void**)&m), BP_OUT_OF_RANGE);
  e->core->buffer_release(p);
  e->core->buffer_release(b);
  assert_int_equal(e->core->device_memory_usage(e->dev, 0, &used, &budget), BP_OK);
  assert_int_equal(used, 0);
}

typedef struct order {
  int step;
  int seen_by_second;
} order_t;

static bp_status_t slow_first(void* user) {
  order_t* o = user;
  usleep(50000);
  o->step = 1;
  return BP_OK;
}
static bp_status_t second(void* user) {
  order_t* o = user;
  o->seen_by_second = o->step;
  return BP_OK;
}
static bp_status_t failing(void* user) {
  (void)user;
  return BP_DATA_LOSS;
}

/* A stream that waits on another stream's event runs after it: stream B's
 * host function sees what stream A's (slow) one did. Timing events give an
 * elapsed time; a failed host function poisons its stream once. */
static void test_streams_events(void** state) {
  env_t* e = *state;
  bpp_stream_t b;
  assert_int_equal(e->core->stream_create(e->dev, NULL, &b), BP_OK);
  bp_event_create_info_t ei = {.struct_size = sizeof ei, .flags = BP_EVENT_TIMING};
  bpp_event_t ev0, ev1;
  assert_int_equal(e->core->event_create(e->dev, &ei, &ev0), BP_OK);
  assert_int_equal(e->core->event_create(e->dev, &ei, &ev1), BP_OK);
  assert_int_equal(e->core->event_query(ev0), BP_OK); /* never recorded */
  order_t o = {0, -1};
  assert_int_equal(e->core->event_record(ev0, e->s), BP_OK);
  assert_int_equal(e->core->stream_enqueue_host_func(e->s, slow_first, &o), BP_OK);
  assert_int_equal(e->core->event_record(ev1, e->s), BP_OK);
  assert_int_equal(e->core->stream_wait_event(b, ev1), BP_OK);
  assert_int_equal(e->core->stream_enqueue_host_func(b, second, &o), BP_OK);
  assert_int_equal(e->core->stream_synchronize(b), BP_OK);
  assert_int_equal(o.seen_by_second, 1);
  assert_int_equal(e->core->event_synchronize(ev1), BP_OK);
  assert_int_equal(e->core->event_query(ev1), BP_OK);
  uint64_t ns = 0;
  assert_int_equal(e->core->event_elapsed_ns(ev0, ev1, &ns), BP_OK);
  assert_true(ns >= 40000000ull); /* the 50 ms host function lies between */
  /* Errors of host functions are sticky once. */
  assert_int_equal(e->core->stream_enqueue_host_func(e->s, failing, NULL), BP_OK);
  assert_int_equal(e->core->stream_synchronize(e->s), BP_DATA_LOSS);
  assert_int_equal(e->core->stream_synchronize(e->s), BP_OK);
  assert_int_equal(e->core->stream_query(e->s), BP_OK);
  /* Argument checks. */
  assert_int_equal(e->core->stream_enqueue_host_func(e->s, NULL, NULL), BP_INVALID_ARGUMENT);
  bp_event_create_info_t ex = {.struct_size = sizeof ex, .flags = BP_EVENT_EXPORTABLE};
  bpp_event_t evx = NULL;
  assert_int_equal(e->core->event_create(e->dev, &ex, &evx), BP_UNIMPLEMENTED);
  bpp_event_t plain;
  bp_event_create_info_t pi = {.struct_size = sizeof pi};
  assert_int_equal(e->core->event_create(e->dev, &pi, &plain), BP_OK);
  assert_int_equal(e->core->event_record(plain, e->s), BP_OK);
  assert_int_equal(e->core->event_elapsed_ns(ev0, plain, &ns), BP_FAILED_PRECONDITION);
  e->core->event_destroy(plain);
  e->core->event_destroy(ev0);
  e->core->event_destroy(ev1);
  e->core->stream_destroy(b);
}

static bp_tensor_desc_t desc(bpp_buffer_t b, uint32_t dt, uint32_t rank, const int64_t* sizes) {
  bp_tensor_desc_t d;
  memset(&d, 0, sizeof d);
  d.struct_size = sizeof d;
  d.dtype = dt;
  d.rank = rank;
  d.buffer = b;
  int64_t st = 1;
  for (uint32_t k = rank; k-- > 0;) {
    d.sizes[k] = sizes[k];
    d.strides[k] = st;
    st *= sizes[k];
  }
  return d;
}

/* add with broadcast, softmax over rows and mm, run by the kernels of the
 * one source and checked against host loops; support and launch agree. */
static void test_ops(void** state) {
  env_t* e = *state;
  enum { R = 3, C = 37 };
  float a[R * C], bias[C], y[R * C], sm[R * C], mm[R * R];
  for (int i = 0; i < R * C; i++) a[i] = (float)((i * 7) % 11) - 5.0f;
  for (int j = 0; j < C; j++) bias[j] = 0.25f * (float)j;
  bpp_buffer_t ba = alloc(e, sizeof a, 0), bb = alloc(e, sizeof bias, 0), by = alloc(e, sizeof y, 0);
  bpp_buffer_t bs = alloc(e, sizeof sm, 0), bm = alloc(e, sizeof mm, 0);
  assert_int_equal(e->core->copy_host_to_device(e->s, a, ba, 0, sizeof a), BP_OK);
  assert_int_equal(e->core->copy_host_to_device(e->s, bias, bb, 0, sizeof bias), BP_OK);
  int64_t s2[2] = {R, C}, s1[1] = {C}, sq[2] = {R, R};
  bp_tensor_desc_t da = desc(ba, BP_DTYPE_F32, 2, s2), db = desc(bb, BP_DTYPE_F32, 1, s1);
  bp_tensor_desc_t dy = desc(by, BP_DTYPE_F32, 2, s2), ds = desc(bs, BP_DTYPE_F32, 2, s2);
  const bp_tensor_desc_t* ins[2] = {&da, &db};
  const bp_tensor_desc_t* outs[1] = {&dy};
  bp_binary_attrs_t at;
  memset(&at, 0, sizeof at);
  at.struct_size = sizeof at;
  bp_op_call_t c;
  memset(&c, 0, sizeof c);
  c.struct_size = sizeof c;
  c.op_id = BP_OP_add;
  c.num_inputs = 2;
  c.num_outputs = 1;
  c.inputs = ins;
  c.outputs = outs;
  c.attrs = &at;
  c.compute_dtype = BP_DTYPE_F32;
  bp_support_t sup;
  memset(&sup, 0, sizeof sup);
  sup.struct_size = sizeof sup;
  assert_int_equal(e->vt->caps->query_support(e->dev, &c, &sup), BP_OK);
  assert_int_equal(sup.reason, BP_SUPPORT_OK);
  assert_int_equal(e->vt->ops->launch[BP_OP_add](e->s, &c), BP_OK);
  /* softmax over dim 1 */
  bp_softmax_attrs_t sa = {.struct_size = sizeof sa, .dim = 1};
  const bp_tensor_desc_t* sin[1] = {&da};
  const bp_tensor_desc_t* sout[1] = {&ds};
  bp_op_call_t c2 = c;
  c2.op_id = BP_OP_softmax;
  c2.num_inputs = 1;
  c2.inputs = sin;
  c2.outputs = sout;
  c2.attrs = &sa;
  assert_int_equal(e->vt->ops->launch[BP_OP_softmax](e->s, &c2), BP_OK);
  /* mm: a [R, C] x a^T [C, R] (a transposed view: strides swapped) */
  bp_tensor_desc_t dt = da;
  dt.sizes[0] = C;
  dt.sizes[1] = R;
  dt.strides[0] = 1;
  dt.strides[1] = C;
  bp_tensor_desc_t dm = desc(bm, BP_DTYPE_F32, 2, sq);
  const bp_tensor_desc_t* min[2] = {&da, &dt};
  const bp_tensor_desc_t* mout[1] = {&dm};
  bp_op_call_t c3 = c;
  c3.op_id = BP_OP_mm;
  c3.inputs = min;
  c3.outputs = mout;
  c3.attrs = NULL;
  assert_int_equal(e->vt->ops->launch[BP_OP_mm](e->s, &c3), BP_OK);
  assert_int_equal(e->core->copy_device_to_host(e->s, by, 0, y, sizeof y), BP_OK);
  assert_int_equal(e->core->copy_device_to_host(e->s, bs, 0, sm, sizeof sm), BP_OK);
  assert_int_equal(e->core->copy_device_to_host(e->s, bm, 0, mm, sizeof mm), BP_OK);
  assert_int_equal(e->core->stream_synchronize(e->s), BP_OK);
  for (int i = 0; i < R; i++) {
    double mx = -INFINITY, sum = 0;
    for (int j = 0; j < C; j++) {
      assert_true(y[i * C + j] == a[i * C + j] + bias[j]);
      mx = fmax(mx, a[i * C + j]);
    }
    for (int j = 0; j < C; j++) sum += exp(a[i * C + j] - mx);
    for (int j = 0; j < C; j++) assert_true(fabs(sm[i * C + j] - exp(a[i * C + j] - mx) / sum) < 1e-6);
    for (int k = 0; k < R; k++) {
      double d = 0;
      for (int j = 0; j < C; j++) d += (double)a[i * C + j] * a[k * C + j];
      assert_true(fabs(mm[i * R + k] - d) < 1e-3);
    }
  }
  /* Malformed calls are refused before any enqueue. */
  assert_int_equal(e->vt->ops->launch[BP_OP_add](e->s, NULL), BP_INVALID_ARGUMENT);
  bp_tensor_desc_t odd = da;
  odd.byte_offset = 2; /* not a multiple of 4 */
  const bp_tensor_desc_t* bad[2] = {&odd, &db};
  c.inputs = bad;
  assert_int_equal(e->vt->ops->launch[BP_OP_add](e->s, &c), BP_INVALID_ARGUMENT);
  /* An op without a kernel has no slot and a clear support answer. */
  assert_null(e->vt->ops->launch[BP_OP_fft_r2c]);
  c.op_id = BP_OP_fft_r2c;
  c.inputs = ins;
  assert_int_equal(e->vt->caps->query_support(e->dev, &c, &sup), BP_OK);
  assert_int_equal(sup.reason, BP_SUPPORT_OP);
  e->core->buffer_release(ba);
  e->core->buffer_release(bb);
  e->core->buffer_release(by);
  e->core->buffer_release(bs);
  e->core->buffer_release(bm);
}

/* Runs one neg over 4 f32 on a fresh instance (so a program is built or
 * loaded from the disk cache). */
static void run_neg_on_fresh_instance(void) {
  const bp_plugin_vtable_t* vt = ocl_vtable();
  bpp_instance_create_info_t info = {.struct_size = sizeof info};
  bpp_instance_t inst;
  bpp_device_t dev;
  bpp_stream_t s;
  assert_int_equal(vt->core->instance_create(&info, &inst), BP_OK);
  assert_int_equal(vt->core->device_open(inst, 0, &dev), BP_OK);
  assert_int_equal(vt->core->stream_create(dev, NULL, &s), BP_OK);
  bp_buffer_alloc_info_t a = {.struct_size = sizeof a, .size_bytes = 16};
  bpp_buffer_t b;
  assert_int_equal(vt->core->buffer_allocate(dev, &a, &b), BP_OK);
  float h[4] = {1, -2, 3, -4}, out[4];
  assert_int_equal(vt->core->copy_host_to_device(s, h, b, 0, 16), BP_OK);
  int64_t n[1] = {4};
  bp_tensor_desc_t d = desc(b, BP_DTYPE_F32, 1, n);
  const bp_tensor_desc_t* io[1] = {&d};
  bp_op_call_t c;
  memset(&c, 0, sizeof c);
  c.struct_size = sizeof c;
  c.op_id = BP_OP_neg;
  c.num_inputs = c.num_outputs = 1;
  c.inputs = c.outputs = io;
  c.compute_dtype = BP_DTYPE_F32;
  assert_int_equal(vt->ops->launch[BP_OP_neg](s, &c), BP_OK);
  assert_int_equal(vt->core->copy_device_to_host(s, b, 0, out, 16), BP_OK);
  assert_int_equal(vt->core->stream_synchronize(s), BP_OK);
  for (int i = 0; i < 4; i++) assert_true(out[i] == -h[i]);
  vt->core->buffer_release(b);
  vt->core->stream_destroy(s);
  vt->core->instance_destroy(inst);
}

/* The first build writes the program's binary into the cache folder; a
 * corrupt file is ignored (the op still runs) and rewritten. */
static void test_program_cache(void** state) {
  (void)state;
  char dir[] = "/tmp/bp_ocl_cacheXXXXXX";
  assert_non_null(mkdtemp(dir));
  setenv("XDG_CACHE_HOME", dir, 1);
  run_neg_on_fresh_instance();
  char pattern[600], path[700] = "";
  snprintf(pattern, sizeof pattern, "ls %s/backplane/opencl-*-ew_f32-*.bin 2>/dev/null", dir);
  FILE* ls = popen(pattern, "r");
  assert_non_null(ls);
  if (!fgets(path, sizeof path, ls)) path[0] = 0;
  pclose(ls);
  path[strcspn(path, "\n")] = 0;
  assert_true(path[0] != 0);
  FILE* f = fopen(path, "rb");
  char magic[8] = {0};
  assert_non_null(f);
  assert_int_equal(fread(magic, 1, 8, f), 8);
  fclose(f);
  assert_memory_equal(magic, "BPCENTRY", 8); /* a plugin kit cache entry */
  /* Corrupt it: the next instance ignores it, runs, and rewrites it. */
  f = fopen(path, "wb");
  fputs("garbage", f);
  fclose(f);
  run_neg_on_fresh_instance();
  f = fopen(path, "rb");
  memset(magic, 0, sizeof magic);
  assert_int_equal(fread(magic, 1, 8, f), 8);
  fclose(f);
  assert_memory_equal(magic, "BPCENTRY", 8);
  /* And a third instance loads it (still running correctly). */
  run_neg_on_fresh_instance();
  /* Only our folder goes: the driver may keep its own cache under the same
   * XDG_CACHE_HOME for the rest of the process (PoCL does). */
  char rm[700];
  snprintf(rm, sizeof rm, "rm -rf %s/backplane", dir);
  assert_int_equal(system(rm), 0);
  unsetenv("XDG_CACHE_HOME");
}

/* An instance created before fork (devices listed, OpenCL not started in
 * this process) works in the child: drivers' threads do not survive fork,
 * so listing devices must not start them here (the conformance runner forks
 * like this). With BP_OPENCL_DISCOVERY=inprocess the child hangs. */
static void test_fork_after_discovery(void** state) {
  (void)state;
  const bp_plugin_vtable_t* vt = ocl_vtable();
  bpp_instance_create_info_t info = {.struct_size = sizeof info};
  bpp_instance_t inst;
  assert_int_equal(vt->core->instance_create(&info, &inst), BP_OK);
  pid_t pid = fork();
  assert_true(pid >= 0);
  if (pid == 0) {
    alarm(120); /* a hang ends the child with SIGALRM */
    bpp_device_t dev;
    bpp_stream_t s;
    bp_buffer_alloc_info_t a = {.struct_size = sizeof a, .size_bytes = 16};
    bpp_buffer_t b;
    float h[4] = {1, 2, 3, 4}, out[4] = {0};
    int ok = vt->core->device_open(inst, 0, &dev) == BP_OK && vt->core->stream_create(dev, NULL, &s) == BP_OK &&
             vt->core->buffer_allocate(dev, &a, &b) == BP_OK &&
             vt->core->copy_host_to_device(s, h, b, 0, 16) == BP_OK &&
             vt->core->copy_device_to_host(s, b, 0, out, 16) == BP_OK && vt->core->stream_synchronize(s) == BP_OK &&
             memcmp(h, out, sizeof h) == 0;
    _exit(ok ? 0 : 1);
  }
  int status = 0;
  assert_int_equal(waitpid(pid, &status, 0), pid);
  assert_true(WIFEXITED(status));
  assert_int_equal(WEXITSTATUS(status), 0);
  vt->core->instance_destroy(inst);
}

/* rand (f32: one word per element; f64: a word pair) and dropout draw the
 * very words of the shared Philox stream the CPU plugin draws: the values
 * equal the host's, bit for bit (bp_philox.h's formulas, docs/semantics.md
 * "Random"); the conformance suite checks only statistics. */
static void test_random_stream(void** state) {
  env_t* e = *state;
  enum { N = 37 };
  float r32[N], x[N], d32[N];
  double r64[N];
  uint8_t mask[N];
  for (int i = 0; i < N; i++) x[i] = (float)i - 11.5f;
  bpp_buffer_t b32 = alloc(e, sizeof r32, 0), b64 = alloc(e, sizeof r64, 0), bx = alloc(e, sizeof x, 0);
  bpp_buffer_t bd = alloc(e, sizeof d32, 0), bm = alloc(e, sizeof mask, 0);
  assert_int_equal(e->core->copy_host_to_device(e->s, x, bx, 0, sizeof x), BP_OK);
  int64_t sz[1] = {N};
  bp_tensor_desc_t o32 = desc(b32, BP_DTYPE_F32, 1, sz), o64 = desc(b64, BP_DTYPE_F64, 1, sz);
  bp_tensor_desc_t dx = desc(bx, BP_DTYPE_F32, 1, sz), dd = desc(bd, BP_DTYPE_F32, 1, sz);
  bp_tensor_desc_t dm = desc(bm, BP_DTYPE_BOOL, 1, sz);
  bp_random_attrs_t at;
  memset(&at, 0, sizeof at);
  at.struct_size = sizeof at;
  at.seed = 0x1234567890abcdefull;
  at.offset = 5;
  at.train = 1;
  at.p = 0.3;
  const bp_tensor_desc_t* outs[2] = {&o32, NULL};
  const bp_tensor_desc_t* ins[1] = {&dx};
  bp_op_call_t c;
  memset(&c, 0, sizeof c);
  c.struct_size = sizeof c;
  c.op_id = BP_OP_rand;
  c.num_outputs = 1;
  c.outputs = outs;
  c.attrs = &at;
  assert_int_equal(e->vt->ops->launch[BP_OP_rand](e->s, &c), BP_OK);
  outs[0] = &o64;
  assert_int_equal(e->vt->ops->launch[BP_OP_rand](e->s, &c), BP_OK);
  outs[0] = &dd;
  outs[1] = &dm;
  c.op_id = BP_OP_dropout;
  c.num_inputs = 1;
  c.inputs = ins;
  c.num_outputs = 2;
  assert_int_equal(e->vt->ops->launch[BP_OP_dropout](e->s, &c), BP_OK);
  assert_int_equal(e->core->copy_device_to_host(e->s, b32, 0, r32, sizeof r32), BP_OK);
  assert_int_equal(e->core->copy_device_to_host(e->s, b64, 0, r64, sizeof r64), BP_OK);
  assert_int_equal(e->core->copy_device_to_host(e->s, bd, 0, d32, sizeof d32), BP_OK);
  assert_int_equal(e->core->copy_device_to_host(e->s, bm, 0, mask, sizeof mask), BP_OK);
  assert_int_equal(e->core->stream_synchronize(e->s), BP_OK);
  uint32_t w[2 * N];
  bp_philox_words(at.seed, at.offset, 0, 2 * N, w);
  int kept = 0;
  for (int i = 0; i < N; i++) {
    assert_true(r32[i] == (float)bp_philox_u32_to_unit(w[i], 24));
    uint64_t pair = (uint64_t)w[2 * i] | (uint64_t)w[2 * i + 1] << 32;
    assert_true(r64[i] == bp_philox_u64_to_unit(pair, 53));
    int keep = bp_philox_u32_to_unit(w[i], 24) >= at.p;
    assert_int_equal(mask[i], keep);
    assert_true(d32[i] == (x[i] * (float)keep) * (float)(1.0 / (1.0 - at.p)));
    kept += keep;
  }
  assert_true(kept > 0 && kept < N); /* both branches were taken */
  bpp_buffer_t bufs[5] = {b32, b64, bx, bd, bm};
  for (int k = 0; k < 5; k++) e->core->buffer_release(bufs[k]);
}

/* scatter_add and scatter_reduce (mean without self, prod with self) with
 * repeated targets in a line: each target combines every element aimed at
 * it once, in index order (the conformance suite's scatter checker accepts
 * any of the duplicates, so it cannot see a target combined twice). */
static void test_scatter_duplicates(void** state) {
  env_t* e = *state;
  enum { R = 2, C = 4, K = 5 };
  float self[R * C], src[R * K], got[3][R * C];
  const int64_t idx[R * K] = {1, 1, 3, 1, 0, 0, 0, 2, 0, 2};
  for (int i = 0; i < R * C; i++) self[i] = 1.5f + (float)i;
  for (int i = 0; i < R * K; i++) src[i] = 0.5f * (float)(i + 1);
  bpp_buffer_t bself = alloc(e, sizeof self, 0), bsrc = alloc(e, sizeof src, 0), bidx = alloc(e, sizeof idx, 0);
  bpp_buffer_t bout[3] = {alloc(e, sizeof self, 0), alloc(e, sizeof self, 0), alloc(e, sizeof self, 0)};
  assert_int_equal(e->core->copy_host_to_device(e->s, self, bself, 0, sizeof self), BP_OK);
  assert_int_equal(e->core->copy_host_to_device(e->s, src, bsrc, 0, sizeof src), BP_OK);
  assert_int_equal(e->core->copy_host_to_device(e->s, idx, bidx, 0, sizeof idx), BP_OK);
  int64_t sc[2] = {R, C}, sk[2] = {R, K};
  bp_tensor_desc_t dself = desc(bself, BP_DTYPE_F32, 2, sc), dsrc = desc(bsrc, BP_DTYPE_F32, 2, sk);
  bp_tensor_desc_t didx = desc(bidx, BP_DTYPE_I64, 2, sk);
  const bp_tensor_desc_t* ins[3] = {&dself, &didx, &dsrc};
  const uint32_t ops[3] = {BP_OP_scatter_add, BP_OP_scatter_reduce, BP_OP_scatter_reduce};
  const uint32_t reduce[3] = {BP_SCATTER_SUM, BP_SCATTER_MEAN, BP_SCATTER_PROD};
  const uint32_t with_self[3] = {1, 0, 1};
  for (int k = 0; k < 3; k++) {
    bp_tensor_desc_t dout = desc(bout[k], BP_DTYPE_F32, 2, sc);
    const bp_tensor_desc_t* outs[1] = {&dout};
    bp_scatter_attrs_t at = {.struct_size = sizeof at, .dim = 1, .reduce = reduce[k], .include_self = with_self[k]};
    bp_op_call_t c;
    memset(&c, 0, sizeof c);
    c.struct_size = sizeof c;
    c.op_id = ops[k];
    c.num_inputs = 3;
    c.inputs = ins;
    c.num_outputs = 1;
    c.outputs = outs;
    c.attrs = &at;
    assert_int_equal(e->vt->ops->launch[ops[k]](e->s, &c), BP_OK);
    assert_int_equal(e->core->copy_device_to_host(e->s, bout[k], 0, got[k], sizeof self), BP_OK);
  }
  assert_int_equal(e->core->stream_synchronize(e->s), BP_OK);
  for (int k = 0; k < 3; k++) {
    for (int r = 0; r < R; r++)
      for (int t = 0; t < C; t++) {
        double acc = with_self[k] ? self[r * C + t] : reduce[k] == BP_SCATTER_PROD ? 1.0 : 0.0;
        int n = with_self[k], hit = 0;
        for (int j = 0; j < K; j++) {
          if (idx[r * K + j] != t) continue;
          hit = 1;
          n++;
          if (reduce[k] == BP_SCATTER_PROD) acc *= src[r * K + j];
          else acc += src[r * K + j];
        }
        if (!hit) acc = self[r * C + t];
        else if (reduce[k] == BP_SCATTER_MEAN) acc /= n;
        assert_true(got[k][r * C + t] == (float)acc);
      }
  }
  e->core->buffer_release(bself);
  e->core->buffer_release(bsrc);
  e->core->buffer_release(bidx);
  for (int k = 0; k < 3; k++) e->core->buffer_release(bout[k]);
}

/* Small buffers are sub-buffers of one heap block at aligned offsets, and
 * neighbours keep their own bytes; a buffer of 4 MiB or more is its own;
 * freed ranges are reused. */
static void test_suballocation(void** state) {
  env_t* e = *state;
  bpp_buffer_t a = alloc(e, 1000, 0), b = alloc(e, 24, 0), big = alloc(e, (uint64_t)5 << 20, 0);
  assert_non_null(a->sub.block);
  assert_ptr_equal(a->sub.block, b->sub.block);
  assert_true(a->sub.offset != b->sub.offset);
  assert_int_equal(b->sub.offset % 128, 0);
  assert_null(big->sub.block);
  uint8_t x[1000], y[24], back[1000];
  memset(x, 0xab, sizeof x);
  memset(y, 0x5c, sizeof y);
  assert_int_equal(e->core->copy_host_to_device(e->s, x, a, 0, sizeof x), BP_OK);
  assert_int_equal(e->core->copy_host_to_device(e->s, y, b, 0, sizeof y), BP_OK);
  assert_int_equal(e->core->copy_device_to_host(e->s, a, 0, back, sizeof back), BP_OK);
  assert_int_equal(e->core->stream_synchronize(e->s), BP_OK);
  assert_memory_equal(back, x, sizeof x);
  uint64_t off = b->sub.offset;
  e->core->buffer_release(b);
  bpp_buffer_t c = alloc(e, 16, 0);
  assert_int_equal(c->sub.offset, off); /* best fit: the hole b left */
  bp_gpu_heap_stats_t st;
  bp_gpu_heap_stats(e->dev->heap[0], &st);
  assert_int_equal(st.used_bytes, 1000 + 16);
  e->core->buffer_release(a);
  e->core->buffer_release(c);
  e->core->buffer_release(big);
  bp_gpu_heap_stats(e->dev->heap[0], &st);
  assert_int_equal(st.used_bytes, 0);
}

int main(void) {
  const struct CMUnitTest missing[] = {cmocka_unit_test(test_missing_library),
                                       cmocka_unit_test(test_fork_after_discovery),
                                       cmocka_unit_test(test_program_cache)};
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_device), cmocka_unit_test(test_memory), cmocka_unit_test(test_streams_events),
      cmocka_unit_test(test_ops), cmocka_unit_test(test_random_stream), cmocka_unit_test(test_scatter_duplicates),
      cmocka_unit_test(test_suballocation),
  };
  int failed = cmocka_run_group_tests(missing, NULL, NULL);
  return failed + cmocka_run_group_tests(tests, setup, teardown);
}
