/* Collectives through the application API (comm.h): every collective on the
 * cpu plugin's native comm table with 2, 3 and 4 ranks (BP_CPU_DEVICES=4)
 * and on the template plugin, which has no comm table, through the core's
 * host-staged path; reductions over every reducible dtype against exact
 * references; in place; groups; and the errors: mismatched calls fail on
 * every rank, a missing rank times out, abort wakes a waiting rank, bad
 * arguments are refused.
 */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include <math.h>

#include "backplane/comm.h"

/* Collective kinds of the compressed checks. */
enum { BP_KIT_ALL_REDUCE_ = 1, BP_KIT_ALL_GATHER_ = 4, BP_KIT_REDUCE_SCATTER_ = 5 };

/* fp8 conversions of the plugin kit (linked statically); f16 and bf16
 * hold the test's small integers exactly through _Float16 and the top
 * half of a float. */
uint8_t bp_f64_to_f8e4m3fn(double v);
float bp_f8e4m3fn_to_f32(uint8_t v);
static uint16_t to_bf16(double v) {
  float f = (float)v;
  uint32_t u;
  memcpy(&u, &f, 4);
  return (uint16_t)(u >> 16);
}
static float from_bf16(uint16_t b) {
  uint32_t u = (uint32_t)b << 16;
  float f;
  memcpy(&f, &u, 4);
  return f;
}
static int is_floating(uint32_t d) {
  return bp_dtype_category(d) == BP_DTYPE_CATEGORY_FLOAT || d == BP_DTYPE_F8E4M3FN;
}

#define MAX_RANKS 4

typedef struct world {
  bp_context_t* ctx;
  int n;
  bp_comm_t* comms[MAX_RANKS];
  bp_stream_t* streams[MAX_RANKS];
  bp_device_t* devices[MAX_RANKS];
} world_t;

static void check_mismatch(const char* plugin);
static void check_split(const char* plugin);

/* Options flags of the next world_open (BP_COMM_PREFER_PLUGIN_ENGINE). */
static uint32_t g_flags;

/* n ranks on cpu:0..n-1 ("cpu") or all on device 0 of another backend. */
static void world_open(world_t* w, const char* plugin, int n, uint64_t timeout_ns) {
  memset(w, 0, sizeof(*w));
  w->n = n;
  assert_int_equal(bp_context_create(NULL, &w->ctx), BP_OK);
  for (int r = 0; r < n; ++r) {
    char spec[32];
    /* cuda: rank r on its own (fake) GPU, as NCCL needs. */
    const int own = strcmp(plugin, "cpu") == 0 || strcmp(plugin, "cuda") == 0;
    snprintf(spec, sizeof(spec), "%s:%d", plugin, own ? r : 0);
    assert_int_equal(bp_context_find_device(w->ctx, spec, &w->devices[r]), BP_OK);
    assert_int_equal(bp_stream_create(w->devices[r], NULL, &w->streams[r]), BP_OK);
  }
  bp_comm_options_t o = {.struct_size = sizeof(o), .flags = g_flags, .timeout_ns = timeout_ns};
  bp_status_t st = bp_comm_init_all(w->devices, (uint32_t)n, &o, w->comms);
  if (st != BP_OK) fail_msg("bp_comm_init_all: %s", bp_status_message());
  for (int r = 0; r < n; ++r) {
    assert_int_equal(bp_comm_rank(w->comms[r]), r);
    assert_int_equal(bp_comm_size(w->comms[r]), n);
  }
}

static void world_close(world_t* w) {
  for (int r = 0; r < w->n; ++r) {
    bp_comm_destroy(w->comms[r]);
    bp_stream_release(w->streams[r]);
  }
  bp_context_release(w->ctx);
}

static void sync_all(world_t* w) {
  for (int r = 0; r < w->n; ++r) {
    bp_status_t st = bp_stream_synchronize(w->streams[r]);
    if (st != BP_OK) fail_msg("rank %d: %s", r, bp_status_message());
  }
}

static bp_tensor_t* tensor(world_t* w, int r, uint32_t dtype, int64_t n) {
  bp_tensor_t* t = NULL;
  assert_int_equal(bp_tensor_create(w->devices[r], dtype, 1, &n, &t), BP_OK);
  return t;
}

/* Small integers (exact in every dtype), distinct per rank and element. */
static double value(uint32_t dtype, int r, int64_t i) {
  int64_t v = (i * 7 + r * 3) % 9;
  const uint32_t c = bp_dtype_category(dtype);
  return c == BP_DTYPE_CATEGORY_UNSIGNED ? (double)v : (double)(v - 4);
}

static void store(uint32_t dtype, void* p, int64_t i, double v) {
  switch (dtype) {
    case BP_DTYPE_F32: ((float*)p)[i] = (float)v; break;
    case BP_DTYPE_F64: ((double*)p)[i] = v; break;
    case BP_DTYPE_F16: ((_Float16*)p)[i] = (_Float16)v; break;
    case BP_DTYPE_BF16: ((uint16_t*)p)[i] = to_bf16(v); break;
    case BP_DTYPE_F8E4M3FN: ((uint8_t*)p)[i] = bp_f64_to_f8e4m3fn(v); break;
    case BP_DTYPE_I8: ((int8_t*)p)[i] = (int8_t)(int64_t)v; break;
    case BP_DTYPE_U8: ((uint8_t*)p)[i] = (uint8_t)(uint64_t)(int64_t)v; break;
    case BP_DTYPE_I32: ((int32_t*)p)[i] = (int32_t)(int64_t)v; break;
    case BP_DTYPE_I64: ((int64_t*)p)[i] = (int64_t)v; break;
    case BP_DTYPE_U64: ((uint64_t*)p)[i] = (uint64_t)(int64_t)v; break;
    default: fail_msg("dtype %u", dtype);
  }
}
static double load(uint32_t dtype, const void* p, int64_t i) {
  switch (dtype) {
    case BP_DTYPE_F32: return ((const float*)p)[i];
    case BP_DTYPE_F64: return ((const double*)p)[i];
    case BP_DTYPE_F16: return (double)((const _Float16*)p)[i];
    case BP_DTYPE_BF16: return from_bf16(((const uint16_t*)p)[i]);
    case BP_DTYPE_F8E4M3FN: return bp_f8e4m3fn_to_f32(((const uint8_t*)p)[i]);
    case BP_DTYPE_I8: return ((const int8_t*)p)[i];
    case BP_DTYPE_U8: return ((const uint8_t*)p)[i];
    case BP_DTYPE_I32: return ((const int32_t*)p)[i];
    case BP_DTYPE_I64: return (double)((const int64_t*)p)[i];
    case BP_DTYPE_U64: return (double)((const uint64_t*)p)[i];
    default: fail_msg("dtype %u", dtype);
  }
  return 0;
}

/* The reduction of element i over ranks 0..n-1, as the dtype stores it:
 * integers wrap (the stored value of the exact result), AVG of integers
 * truncates toward zero. */
static double expected(uint32_t dtype, uint32_t op, int n, int64_t i) {
  double acc = value(dtype, 0, i);
  for (int r = 1; r < n; ++r) {
    double v = value(dtype, r, i);
    switch (op) {
      case BP_REDUCE_PROD: acc *= v; break;
      case BP_REDUCE_MIN: acc = v < acc ? v : acc; break;
      case BP_REDUCE_MAX: acc = v > acc ? v : acc; break;
      default: acc += v; break;
    }
  }
  const int is_float = is_floating(dtype);
  if (op == BP_REDUCE_AVG) acc = is_float ? acc / n : (double)((int64_t)acc / n);
  unsigned char cell[8];
  store(dtype, cell, 0, acc); /* wraps integers, rounds floats */
  return load(dtype, cell, 0);
}

static void fill(world_t* w, int r, bp_tensor_t* t, int64_t count, int64_t first_elem) {
  const uint32_t dtype = bp_tensor_dtype(t);
  unsigned char* host = malloc((size_t)(count * (int64_t)bp_dtype_size(dtype)) + 1);
  for (int64_t i = 0; i < count; ++i) store(dtype, host, i, value(dtype, r, first_elem + i));
  assert_int_equal(bp_tensor_write(w->streams[r], t, host, (uint64_t)count * bp_dtype_size(dtype)),
                   BP_OK);
  free(host);
}

static void* read_all(world_t* w, int r, bp_tensor_t* t) {
  const uint64_t bytes = (uint64_t)bp_tensor_numel(t) * bp_dtype_size(bp_tensor_dtype(t));
  void* host = malloc(bytes + 1);
  assert_int_equal(bp_tensor_read(w->streams[r], t, host, bytes), BP_OK);
  return host;
}

/* ------------------------------------------------------------------------ */
/* all_reduce over dtypes and ops, out of place and in place                 */
/* ------------------------------------------------------------------------ */
static void check_all_reduce(const char* plugin, int n, uint32_t dtype, uint32_t op, int64_t count,
                             int in_place) {
  world_t w;
  world_open(&w, plugin, n, 0);
  bp_tensor_t *send[MAX_RANKS], *recv[MAX_RANKS];
  for (int r = 0; r < n; ++r) {
    send[r] = tensor(&w, r, dtype, count);
    recv[r] = in_place ? send[r] : tensor(&w, r, dtype, count);
    fill(&w, r, send[r], count, 0);
  }
  for (int r = 0; r < n; ++r) {
    bp_status_t st = bp_comm_all_reduce(w.comms[r], w.streams[r], send[r], recv[r], op, NULL);
    if (st != BP_OK) fail_msg("all_reduce: %s", bp_status_message());
  }
  sync_all(&w);
  for (int r = 0; r < n; ++r) {
    void* got = read_all(&w, r, recv[r]);
    for (int64_t i = 0; i < count; ++i) {
      double e = expected(dtype, op, n, i), g = load(dtype, got, i);
      if (e != g)
        fail_msg("%s %d ranks %s op %u rank %d [%lld]: got %g, expected %g", plugin, n,
                 bp_dtype_name(dtype), op, r, (long long)i, g, e);
    }
    free(got);
    if (!in_place) bp_tensor_release(recv[r]);
    bp_tensor_release(send[r]);
  }
  world_close(&w);
}

static void test_all_reduce_dtypes_ops(void** state) {
  (void)state;
  static const uint32_t dtypes[] = {BP_DTYPE_F32, BP_DTYPE_F64, BP_DTYPE_F16, BP_DTYPE_BF16,
                                    BP_DTYPE_F8E4M3FN, BP_DTYPE_I8, BP_DTYPE_U8, BP_DTYPE_I32,
                                    BP_DTYPE_I64, BP_DTYPE_U64};
  for (size_t d = 0; d < sizeof(dtypes) / sizeof(dtypes[0]); ++d)
    for (uint32_t op = BP_REDUCE_SUM; op <= BP_REDUCE_AVG; ++op)
      check_all_reduce("cpu", 3, dtypes[d], op, 1001, 0);
}

static void test_all_reduce_ranks_sizes_in_place(void** state) {
  (void)state;
  static const int64_t counts[] = {0, 1, 5, 4099};
  for (int n = 2; n <= 4; ++n)
    for (size_t c = 0; c < 4; ++c) {
      check_all_reduce("cpu", n, BP_DTYPE_F32, BP_REDUCE_SUM, counts[c], 0);
      check_all_reduce("cpu", n, BP_DTYPE_F32, BP_REDUCE_MAX, counts[c], 1);
    }
}

static void test_host_staged_all_reduce(void** state) {
  (void)state;
  world_t w;
  world_open(&w, "template", 2, 0);
  assert_int_equal(bp_comm_tier(w.comms[0]), BP_COMM_TIER_HOST_STAGED);
  world_close(&w);
  for (int n = 2; n <= 4; ++n) {
    check_all_reduce("template", n, BP_DTYPE_F32, BP_REDUCE_SUM, 777, 0);
    check_all_reduce("template", n, BP_DTYPE_I32, BP_REDUCE_MIN, 33, 1);
  }
}

/* ------------------------------------------------------------------------ */
/* The other collectives                                                     */
/* ------------------------------------------------------------------------ */
static void check_others(const char* plugin, int n, int64_t count) {
  world_t w;
  world_open(&w, plugin, n, 0);
  const uint32_t dt = BP_DTYPE_I32;
  bp_tensor_t *a[MAX_RANKS], *big[MAX_RANKS], *b[MAX_RANKS];
  for (int r = 0; r < n; ++r) {
    a[r] = tensor(&w, r, dt, count);
    b[r] = tensor(&w, r, dt, count);
    big[r] = tensor(&w, r, dt, count * n);
  }
  /* broadcast from the last rank */
  for (int r = 0; r < n; ++r) fill(&w, r, a[r], count, 0);
  bp_collective_options_t o = {.struct_size = sizeof(o), .root = n - 1};
  for (int r = 0; r < n; ++r)
    assert_int_equal(bp_comm_broadcast(w.comms[r], w.streams[r], a[r], b[r], &o), BP_OK);
  sync_all(&w);
  for (int r = 0; r < n; ++r) {
    int32_t* got = read_all(&w, r, b[r]);
    for (int64_t i = 0; i < count; ++i) assert_int_equal(got[i], (int32_t)value(dt, n - 1, i));
    free(got);
  }
  /* reduce (sum) to rank 0 */
  o.root = 0;
  for (int r = 0; r < n; ++r)
    assert_int_equal(bp_comm_reduce(w.comms[r], w.streams[r], a[r], b[r], BP_REDUCE_SUM, &o),
                     BP_OK);
  sync_all(&w);
  int32_t* got = read_all(&w, 0, b[0]);
  for (int64_t i = 0; i < count; ++i)
    assert_int_equal(got[i], (int32_t)expected(dt, BP_REDUCE_SUM, n, i));
  free(got);
  /* all_gather */
  for (int r = 0; r < n; ++r)
    assert_int_equal(bp_comm_all_gather(w.comms[r], w.streams[r], a[r], big[r], NULL), BP_OK);
  sync_all(&w);
  for (int r = 0; r < n; ++r) {
    got = read_all(&w, r, big[r]);
    for (int q = 0; q < n; ++q)
      for (int64_t i = 0; i < count; ++i)
        assert_int_equal(got[q * count + i], (int32_t)value(dt, q, i));
    free(got);
  }
  /* reduce_scatter (max): rank r gets block r of the elementwise max */
  for (int r = 0; r < n; ++r) fill(&w, r, big[r], count * n, 0);
  for (int r = 0; r < n; ++r)
    assert_int_equal(bp_comm_reduce_scatter(w.comms[r], w.streams[r], big[r], a[r],
                                            BP_REDUCE_MAX, NULL), BP_OK);
  sync_all(&w);
  for (int r = 0; r < n; ++r) {
    got = read_all(&w, r, a[r]);
    for (int64_t i = 0; i < count; ++i)
      assert_int_equal(got[i], (int32_t)expected(dt, BP_REDUCE_MAX, n, r * count + i));
    free(got);
  }
  /* all_to_all: block q of rank p lands as block p on rank q */
  bp_tensor_t* big2[MAX_RANKS];
  for (int r = 0; r < n; ++r) big2[r] = tensor(&w, r, dt, count * n);
  for (int r = 0; r < n; ++r)
    assert_int_equal(bp_comm_all_to_all(w.comms[r], w.streams[r], big[r], big2[r], NULL), BP_OK);
  sync_all(&w);
  for (int r = 0; r < n; ++r) {
    got = read_all(&w, r, big2[r]);
    for (int p = 0; p < n; ++p)
      for (int64_t i = 0; i < count; ++i)
        assert_int_equal(got[p * count + i], (int32_t)value(dt, p, r * count + i));
    free(got);
  }
  /* all_to_allv: rank p sends q+1 elements to rank q (from offset q) */
  uint64_t sc[MAX_RANKS][MAX_RANKS], sd[MAX_RANKS][MAX_RANKS], rc[MAX_RANKS][MAX_RANKS],
      rd[MAX_RANKS][MAX_RANKS];
  for (int p = 0; p < n; ++p) {
    uint64_t off = 0;
    for (int q = 0; q < n; ++q) {
      sc[p][q] = (uint64_t)q + 1;
      sd[p][q] = (uint64_t)q;
      rc[p][q] = (uint64_t)p + 1;
      rd[p][q] = off;
      off += (uint64_t)p + 1;
    }
  }
  for (int r = 0; r < n; ++r) fill(&w, r, big[r], count * n, 0);
  if (count * n >= 2 * n) {
    for (int r = 0; r < n; ++r)
      assert_int_equal(bp_comm_all_to_allv(w.comms[r], w.streams[r], big[r], sc[r], sd[r],
                                           big2[r], rc[r], rd[r], NULL), BP_OK);
    sync_all(&w);
    for (int r = 0; r < n; ++r) {
      got = read_all(&w, r, big2[r]);
      for (int p = 0; p < n; ++p)
        for (uint64_t k = 0; k < rc[r][p]; ++k)
          assert_int_equal(got[rd[r][p] + k], (int32_t)value(dt, p, (int64_t)(sd[p][r] + k)));
      free(got);
    }
  }
  /* a ring of send/recv from one thread, in a group */
  for (int r = 0; r < n; ++r) fill(&w, r, a[r], count, 0);
  assert_int_equal(bp_comm_group_begin(), BP_OK);
  for (int r = 0; r < n; ++r) {
    assert_int_equal(bp_comm_send(w.comms[r], w.streams[r], a[r], (r + 1) % n), BP_OK);
    assert_int_equal(bp_comm_recv(w.comms[r], w.streams[r], b[r], (r + n - 1) % n), BP_OK);
  }
  assert_int_equal(bp_comm_group_end(), BP_OK);
  sync_all(&w);
  for (int r = 0; r < n; ++r) {
    got = read_all(&w, r, b[r]);
    for (int64_t i = 0; i < count; ++i)
      assert_int_equal(got[i], (int32_t)value(dt, (r + n - 1) % n, i));
    free(got);
  }
  for (int r = 0; r < n; ++r) assert_int_equal(bp_comm_barrier(w.comms[r], w.streams[r]), BP_OK);
  sync_all(&w);
  for (int r = 0; r < n; ++r) {
    bp_tensor_release(a[r]);
    bp_tensor_release(b[r]);
    bp_tensor_release(big[r]);
    bp_tensor_release(big2[r]);
  }
  world_close(&w);
}

static void test_collectives_native(void** state) {
  (void)state;
  for (int n = 2; n <= 4; ++n) {
    check_others("cpu", n, 1);
    check_others("cpu", n, 37);
  }
}

static void test_collectives_host_staged(void** state) {
  (void)state;
  for (int n = 2; n <= 4; ++n) check_others("template", n, 19);
}

/* Template devices through the cpu plugin's communicator, called with
 * host pointers from host functions on the template's streams (the path
 * the mpi plugin serves across processes). */
static void test_collectives_bridged(void** state) {
  (void)state;
  g_flags = BP_COMM_PREFER_PLUGIN_ENGINE;
  world_t w;
  world_open(&w, "template", 2, 0);
  assert_int_equal(bp_comm_tier(w.comms[0]), BP_COMM_TIER_HOST_STAGED);
  world_close(&w);
  for (int n = 2; n <= 4; ++n) {
    check_all_reduce("template", n, BP_DTYPE_F32, BP_REDUCE_SUM, 333, 0);
    check_all_reduce("template", n, BP_DTYPE_BF16, BP_REDUCE_AVG, 64, 1);
    check_others("template", n, 11);
  }
  check_mismatch("template");
  check_split("template");
  g_flags = 0;
}

/* ------------------------------------------------------------------------ */
/* Errors                                                                    */
/* ------------------------------------------------------------------------ */
static void check_mismatch(const char* plugin) {
  world_t w;
  world_open(&w, plugin, 2, 0);
  bp_tensor_t* t0 = tensor(&w, 0, BP_DTYPE_F32, 8);
  bp_tensor_t* t1 = tensor(&w, 1, BP_DTYPE_F32, 9);
  assert_int_equal(bp_comm_all_reduce(w.comms[0], w.streams[0], t0, t0, BP_REDUCE_SUM, NULL), BP_OK);
  assert_int_equal(bp_comm_all_reduce(w.comms[1], w.streams[1], t1, t1, BP_REDUCE_SUM, NULL), BP_OK);
  for (int r = 0; r < 2; ++r) {
    assert_int_equal(bp_stream_synchronize(w.streams[r]), BP_INVALID_ARGUMENT);
  }
  /* The communicator stays usable after a mismatch. */
  assert_int_equal(bp_comm_get_async_error(w.comms[0]), BP_OK);
  bp_tensor_t* t1b = tensor(&w, 1, BP_DTYPE_F32, 8);
  fill(&w, 0, t0, 8, 0);
  fill(&w, 1, t1b, 8, 0);
  assert_int_equal(bp_comm_all_reduce(w.comms[0], w.streams[0], t0, t0, BP_REDUCE_SUM, NULL), BP_OK);
  assert_int_equal(bp_comm_all_reduce(w.comms[1], w.streams[1], t1b, t1b, BP_REDUCE_SUM, NULL), BP_OK);
  sync_all(&w);
  float* got = read_all(&w, 1, t1b);
  for (int i = 0; i < 8; ++i) assert_true(got[i] == (float)expected(BP_DTYPE_F32, 0, 2, i));
  free(got);
  bp_tensor_release(t0);
  bp_tensor_release(t1);
  bp_tensor_release(t1b);
  world_close(&w);
}
static void test_mismatch_fails_every_rank(void** state) {
  (void)state;
  check_mismatch("cpu");
  check_mismatch("template");
}

static void test_missing_rank_times_out(void** state) {
  (void)state;
  world_t w;
  world_open(&w, "cpu", 3, 200 * 1000000ull); /* 200 ms */
  bp_tensor_t* t = tensor(&w, 0, BP_DTYPE_F32, 4);
  assert_int_equal(bp_comm_all_reduce(w.comms[0], w.streams[0], t, t, BP_REDUCE_SUM, NULL), BP_OK);
  assert_int_equal(bp_stream_synchronize(w.streams[0]), BP_DEADLINE_EXCEEDED);
  if (!strstr(bp_status_message(), "rank(s) 1 2")) fail_msg("message: %s", bp_status_message());
  /* The communicator is broken from now on, for every rank. */
  assert_int_equal(bp_comm_get_async_error(w.comms[1]), BP_DEADLINE_EXCEEDED);
  bp_tensor_release(t);
  world_close(&w);
}

typedef struct {
  bp_comm_t* comm;
} abort_arg_t;
static void* abort_later(void* a) {
  struct timespec ts = {0, 50 * 1000000L};
  nanosleep(&ts, NULL);
  bp_comm_abort(((abort_arg_t*)a)->comm);
  return NULL;
}
static void check_abort(const char* plugin) {
  world_t w;
  world_open(&w, plugin, 2, 0); /* default timeout: minutes */
  bp_tensor_t* t = tensor(&w, 0, BP_DTYPE_F32, 4);
  assert_int_equal(bp_comm_all_reduce(w.comms[0], w.streams[0], t, t, BP_REDUCE_SUM, NULL), BP_OK);
  pthread_t th;
  abort_arg_t arg = {w.comms[1]};
  assert_int_equal(pthread_create(&th, NULL, abort_later, &arg), 0);
  assert_int_equal(bp_stream_synchronize(w.streams[0]), BP_ABORTED);
  pthread_join(th, NULL);
  assert_int_equal(bp_comm_get_async_error(w.comms[0]), BP_ABORTED);
  bp_tensor_release(t);
  world_close(&w);
}
static void test_abort_wakes_a_waiting_rank(void** state) {
  (void)state;
  check_abort("cpu");
}

static void test_bad_arguments(void** state) {
  (void)state;
  world_t w;
  world_open(&w, "cpu", 2, 0);
  bp_tensor_t* a = tensor(&w, 0, BP_DTYPE_F32, 6);
  bp_tensor_t* other = tensor(&w, 1, BP_DTYPE_F32, 6);
  bp_tensor_t* i32 = tensor(&w, 0, BP_DTYPE_I32, 6);
  bp_tensor_t* five = tensor(&w, 0, BP_DTYPE_F32, 5);
  assert_int_equal(bp_comm_all_reduce(NULL, w.streams[0], a, a, 0, NULL), BP_INVALID_ARGUMENT);
  assert_int_equal(bp_comm_all_reduce(w.comms[0], NULL, a, a, 0, NULL), BP_INVALID_ARGUMENT);
  assert_int_equal(bp_comm_all_reduce(w.comms[0], w.streams[1], a, a, 0, NULL),
                   BP_INVALID_ARGUMENT); /* stream of another device */
  assert_int_equal(bp_comm_all_reduce(w.comms[0], w.streams[0], other, other, 0, NULL),
                   BP_INVALID_ARGUMENT); /* tensor of another device */
  assert_int_equal(bp_comm_all_reduce(w.comms[0], w.streams[0], a, i32, 0, NULL),
                   BP_INVALID_ARGUMENT);
  assert_int_equal(bp_comm_all_reduce(w.comms[0], w.streams[0], a, five, 0, NULL),
                   BP_INVALID_ARGUMENT);
  assert_int_equal(bp_comm_all_reduce(w.comms[0], w.streams[0], a, a, 99, NULL),
                   BP_INVALID_ARGUMENT);
  assert_int_equal(bp_comm_all_gather(w.comms[0], w.streams[0], a, five, NULL),
                   BP_INVALID_ARGUMENT);
  bp_collective_options_t o = {.struct_size = sizeof(o), .root = 2};
  assert_int_equal(bp_comm_broadcast(w.comms[0], w.streams[0], a, a, &o), BP_INVALID_ARGUMENT);
  assert_int_equal(bp_comm_send(w.comms[0], w.streams[0], a, 0), BP_INVALID_ARGUMENT);
  bp_tensor_t* strided = NULL;
  assert_int_equal(bp_tensor_slice(a, 0, 0, 6, 2, &strided), BP_OK);
  assert_int_equal(bp_comm_all_reduce(w.comms[0], w.streams[0], strided, strided, 0, NULL),
                   BP_INVALID_ARGUMENT);
  assert_int_equal(bp_comm_group_end(), BP_FAILED_PRECONDITION);
  bp_device_t* mixed[2] = {w.devices[0], NULL};
  bp_comm_t* out[2];
  assert_int_equal(bp_comm_init_all(mixed, 2, NULL, out), BP_INVALID_ARGUMENT);
  assert_int_equal(bp_comm_init_all(mixed, 0, NULL, out), BP_INVALID_ARGUMENT);
  bp_tensor_release(strided);
  bp_tensor_release(a);
  bp_tensor_release(other);
  bp_tensor_release(i32);
  bp_tensor_release(five);
  /* Nothing was enqueued: the streams are clean. */
  sync_all(&w);
  world_close(&w);
}

/* ------------------------------------------------------------------------ */
/* Split                                                                     */
/* ------------------------------------------------------------------------ */
typedef struct {
  bp_comm_t* comm;
  int32_t color, key;
  bp_comm_t* out;
  bp_status_t st;
} split_arg_t;
static void* split_main(void* p) {
  split_arg_t* a = p;
  a->st = bp_comm_split(a->comm, a->color, a->key, &a->out);
  return NULL;
}
static void check_split(const char* plugin) {
  world_t w;
  world_open(&w, plugin, 4, 0);
  split_arg_t args[4];
  pthread_t th[4];
  for (int r = 0; r < 4; ++r) {
    /* Odd and even ranks, in reverse order by key; rank 3 joins none. */
    args[r] = (split_arg_t){w.comms[r], r == 3 ? BP_COMM_SPLIT_NO_COLOR : r % 2, -r, NULL, 0};
    assert_int_equal(pthread_create(&th[r], NULL, split_main, &args[r]), 0);
  }
  for (int r = 0; r < 4; ++r) pthread_join(th[r], NULL);
  for (int r = 0; r < 4; ++r) assert_int_equal(args[r].st, BP_OK);
  assert_null(args[3].out);
  assert_int_equal(bp_comm_size(args[0].out), 2);
  assert_int_equal(bp_comm_rank(args[0].out), 1); /* key 0 > key -2 */
  assert_int_equal(bp_comm_rank(args[2].out), 0);
  assert_int_equal(bp_comm_size(args[1].out), 1);
  /* The even pair sums its inputs. */
  bp_tensor_t* t0 = tensor(&w, 0, BP_DTYPE_F32, 3);
  bp_tensor_t* t2 = tensor(&w, 2, BP_DTYPE_F32, 3);
  fill(&w, 0, t0, 3, 0);
  fill(&w, 2, t2, 3, 0);
  assert_int_equal(bp_comm_all_reduce(args[0].out, w.streams[0], t0, t0, BP_REDUCE_SUM, NULL), BP_OK);
  assert_int_equal(bp_comm_all_reduce(args[2].out, w.streams[2], t2, t2, BP_REDUCE_SUM, NULL), BP_OK);
  sync_all(&w);
  float* got = read_all(&w, 2, t2);
  for (int i = 0; i < 3; ++i) assert_true(got[i] == (float)(value(BP_DTYPE_F32, 0, i) +
                                                          value(BP_DTYPE_F32, 2, i)));
  free(got);
  bp_tensor_release(t0);
  bp_tensor_release(t2);
  for (int r = 0; r < 3; ++r) bp_comm_destroy(args[r].out);
  world_close(&w);
}
static void test_split(void** state) {
  (void)state;
  check_split("cpu");
  check_split("template");
}

/* ------------------------------------------------------------------------ */
/* Compressed payloads (int8 / fp8 e4m3 blocks with f32 scales)              */
/* ------------------------------------------------------------------------ */
static float fvalue(int r, int64_t i) {
  return (float)(sin((double)i * 0.37 + r) * (double)(1 + i % 13));
}

/* The bound of docs/collectives.md for one element of block b: n encoded
 * inputs plus, for all_reduce, the encoded result. */
static double bound(uint32_t comp, int terms, double amax_in) {
  const double per = comp == BP_DTYPE_I8 ? amax_in / 254.0 : amax_in * (1.0 / 16 + 1.0 / 458752);
  return terms * per * 1.0001 + 1e-6;
}

static void check_compressed(uint32_t kind, uint32_t comp, uint32_t block, int n, int64_t count,
                             uint32_t op) {
  world_t w;
  world_open(&w, "cpu", n, 0);
  const int64_t in_n = kind == BP_KIT_REDUCE_SCATTER_ ? count * n : count;
  const int64_t out_n = kind == BP_KIT_ALL_GATHER_ ? count * n : count;
  bp_tensor_t *send[MAX_RANKS], *recv[MAX_RANKS];
  float* host = malloc(sizeof(float) * (size_t)(in_n > out_n ? in_n : out_n));
  for (int r = 0; r < n; ++r) {
    send[r] = tensor(&w, r, BP_DTYPE_F32, in_n);
    recv[r] = tensor(&w, r, BP_DTYPE_F32, out_n);
    for (int64_t i = 0; i < in_n; ++i) host[i] = fvalue(r, i);
    assert_int_equal(bp_tensor_write(w.streams[r], send[r], host, (uint64_t)in_n * 4), BP_OK);
  }
  bp_collective_options_t o = {.struct_size = sizeof o, .compression = comp,
                               .compression_block = block};
  for (int r = 0; r < n; ++r) {
    bp_status_t st = kind == BP_KIT_ALL_GATHER_
                         ? bp_comm_all_gather(w.comms[r], w.streams[r], send[r], recv[r], &o)
                     : kind == BP_KIT_REDUCE_SCATTER_
                         ? bp_comm_reduce_scatter(w.comms[r], w.streams[r], send[r], recv[r], op, &o)
                         : bp_comm_all_reduce(w.comms[r], w.streams[r], send[r], recv[r], op, &o);
    if (st != BP_OK) fail_msg("issue: %s", bp_status_message());
  }
  sync_all(&w);
  float* first = NULL;
  for (int r = 0; r < n; ++r) {
    float* got = read_all(&w, r, recv[r]);
    for (int64_t i = 0; i < out_n; ++i) {
      /* The exact result and the block's largest input magnitude. */
      double exact = 0, amax = 0;
      int terms = 1;
      if (kind == BP_KIT_ALL_GATHER_) {
        const int q = (int)(i / count);
        const int64_t e = i % count, b0 = e / block * block;
        exact = fvalue(q, e);
        for (int64_t k = b0; k < b0 + block && k < count; ++k)
          amax = fmax(amax, fabs(fvalue(q, k)));
      } else {
        /* reduce_scatter: blocks counted from the start of rank r's segment. */
        const int64_t seg = kind == BP_KIT_REDUCE_SCATTER_ ? (int64_t)r * count : 0;
        const int64_t e = seg + i, b0 = seg + i / block * block, lim = seg + count;
        for (int q = 0; q < n; ++q) {
          exact += fvalue(q, e);
          for (int64_t k = b0; k < b0 + block && k < lim; ++k)
            amax = fmax(amax, fabs(fvalue(q, k)));
        }
        terms = kind == BP_KIT_ALL_REDUCE_ ? 2 * n : n;
        if (op == BP_REDUCE_AVG) {
          exact /= n;
          amax /= 1; /* the bound scales with the sum; AVG divides both */
          terms = kind == BP_KIT_ALL_REDUCE_ ? 2 * n : n;
        }
      }
      const double limit = bound(comp, terms, amax) / (op == BP_REDUCE_AVG ? n : 1);
      if (fabs(got[i] - exact) > limit)
        fail_msg("comp %u kind %u rank %d [%lld]: got %.7g, exact %.7g, bound %.3g", comp, kind,
                 r, (long long)i, got[i], exact, limit);
    }
    if (kind == BP_KIT_ALL_REDUCE_) {
      /* Every rank holds the same values. */
      if (first) assert_memory_equal(first, got, (size_t)out_n * 4);
      else first = got;
    }
    if (got != first) free(got);
  }
  free(first);
  free(host);
  for (int r = 0; r < n; ++r) {
    bp_tensor_release(send[r]);
    bp_tensor_release(recv[r]);
  }
  world_close(&w);
}

static void test_compressed_collectives(void** state) {
  (void)state;
  static const uint32_t comps[] = {BP_DTYPE_I8, BP_DTYPE_F8E4M3FN};
  for (int c = 0; c < 2; ++c)
    for (int n = 2; n <= 4; ++n) {
      check_compressed(BP_KIT_ALL_REDUCE_, comps[c], 256, n, 1000, BP_REDUCE_SUM);
      check_compressed(BP_KIT_ALL_REDUCE_, comps[c], 32, n, 77, BP_REDUCE_AVG);
      check_compressed(BP_KIT_ALL_GATHER_, comps[c], 64, n, 300, BP_REDUCE_SUM);
      check_compressed(BP_KIT_REDUCE_SCATTER_, comps[c], 128, n, 513, BP_REDUCE_SUM);
    }
  /* Refusals: integers, PROD, a collective without a compressed form, an
   * unknown code dtype. A refused collective is still shown to the peers
   * (so they fail with it rather than wait): the peer here never calls,
   * so rank 0's stream ends with the timeout of a short-lived world. */
  world_t w;
  world_open(&w, "cpu", 2, 200 * 1000000ull);
  bp_tensor_t* i32 = tensor(&w, 0, BP_DTYPE_I32, 8);
  bp_tensor_t* f = tensor(&w, 0, BP_DTYPE_F32, 8);
  bp_collective_options_t o = {.struct_size = sizeof o, .compression = BP_DTYPE_I8};
  assert_int_equal(bp_comm_all_reduce(w.comms[0], w.streams[0], i32, i32, BP_REDUCE_SUM, &o),
                   BP_UNIMPLEMENTED);
  assert_non_null(strstr(bp_status_message(), "cannot compress"));
  assert_int_equal(bp_comm_all_reduce(w.comms[0], w.streams[0], f, f, BP_REDUCE_PROD, &o),
                   BP_UNIMPLEMENTED);
  assert_int_equal(bp_comm_broadcast(w.comms[0], w.streams[0], f, f, &o), BP_INVALID_ARGUMENT);
  o.compression = BP_DTYPE_U8;
  assert_int_equal(bp_comm_all_reduce(w.comms[0], w.streams[0], f, f, BP_REDUCE_SUM, &o),
                   BP_UNIMPLEMENTED);
  assert_int_equal(bp_stream_synchronize(w.streams[0]), BP_DEADLINE_EXCEEDED);
  bp_tensor_release(i32);
  bp_tensor_release(f);
  world_close(&w);
}

/* Link tiers and the cost model the compiler reads. */
static void test_link_tiers_and_cost(void** state) {
  (void)state;
  world_t w;
  world_open(&w, "cpu", 4, 0);
  bp_device_t* tmpl = NULL;
  assert_int_equal(bp_context_find_device(w.ctx, "template:0", &tmpl), BP_OK);
  assert_int_equal(bp_device_link_tier(w.devices[0], w.devices[0]), BP_LINK_SAME_DEVICE);
  assert_int_equal(bp_device_link_tier(w.devices[0], w.devices[1]), BP_LINK_PEER);
  assert_int_equal(bp_device_link_tier(w.devices[0], tmpl), BP_LINK_HOST);
  assert_int_equal(bp_device_link_tier(NULL, tmpl), BP_LINK_NETWORK);
  assert_int_equal(bp_comm_link_tier(w.comms[0]), BP_LINK_PEER);
  /* all_reduce: 2 steps of latency + 2(n-1)/n of the bytes at memory speed. */
  const bp_device_properties_t* p = bp_device_properties(w.devices[0]);
  const uint64_t bytes = 64u << 20;
  double ns = 0, small = 0, bcast = 0;
  assert_int_equal(bp_comm_estimate_ns(w.comms[0], BP_COLLECTIVE_ALL_REDUCE, bytes, &ns), BP_OK);
  const double want = 2 * 2000.0 + 1.5 * (double)bytes / p->memory_bandwidth_bytes_per_s * 1e9;
  assert_true(fabs(ns - want) <= 1e-9 * want);
  assert_int_equal(bp_comm_estimate_ns(w.comms[0], BP_COLLECTIVE_ALL_REDUCE, 8, &small), BP_OK);
  assert_int_equal(bp_comm_estimate_ns(w.comms[0], BP_COLLECTIVE_BROADCAST, bytes, &bcast), BP_OK);
  assert_true(small < ns && bcast < ns);
  assert_int_equal(bp_comm_estimate_ns(w.comms[0], 99, bytes, &ns), BP_INVALID_ARGUMENT);
  assert_int_equal(bp_comm_estimate_ns(NULL, 0, bytes, &ns), BP_INVALID_ARGUMENT);
  /* Compressed: the codes' bus bytes plus the codec's passes (added on
   * this link: shared memory), which do not pay at memory speed. */
  double comp = 0;
  setenv("BACKPLANE_COMM_CODEC_GBPS", "4", 1);
  assert_int_equal(bp_comm_estimate_compressed_ns(w.comms[0], BP_COLLECTIVE_ALL_REDUCE,
                                                  BP_DTYPE_F32, bytes, BP_DTYPE_I8, 256, &comp),
                   BP_OK);
  const double wire = 2 * 2000.0 + 1.5 * (double)bytes / 4 * (1 + 4.0 / 256) /
                                        p->memory_bandwidth_bytes_per_s * 1e9;
  const double codec = (3 + 0.25) * (double)bytes / 4e9 * 1e9;
  assert_true(fabs(comp - (wire + codec)) <= 1e-9 * comp);
  assert_true(comp > ns);
  /* The cost follows the elements: f16 of half the bytes (block 0: 256)
   * costs what f32 does. */
  double half = 0;
  assert_int_equal(bp_comm_estimate_compressed_ns(w.comms[0], BP_COLLECTIVE_ALL_REDUCE,
                                                  BP_DTYPE_F16, bytes / 2, BP_DTYPE_F8E4M3FN, 0,
                                                  &half), BP_OK);
  assert_true(fabs(half - comp) <= 1e-9 * comp);
  /* all_gather and reduce_scatter have fewer passes than all_reduce. */
  double ag = 0, rs = 0;
  assert_int_equal(bp_comm_estimate_compressed_ns(w.comms[0], BP_COLLECTIVE_ALL_GATHER,
                                                  BP_DTYPE_F32, bytes, BP_DTYPE_I8, 256, &ag), BP_OK);
  assert_int_equal(bp_comm_estimate_compressed_ns(w.comms[0], BP_COLLECTIVE_REDUCE_SCATTER,
                                                  BP_DTYPE_F32, bytes, BP_DTYPE_I8, 256, &rs), BP_OK);
  assert_true(ag < rs && rs < comp);
  /* A faster codec costs less. */
  setenv("BACKPLANE_COMM_CODEC_GBPS", "8", 1);
  double fast = 0;
  assert_int_equal(bp_comm_estimate_compressed_ns(w.comms[0], BP_COLLECTIVE_ALL_REDUCE,
                                                  BP_DTYPE_F32, bytes, BP_DTYPE_I8, 256, &fast), BP_OK);
  assert_true(fast < comp);
  unsetenv("BACKPLANE_COMM_CODEC_GBPS");
  assert_int_equal(bp_comm_estimate_compressed_ns(w.comms[0], BP_COLLECTIVE_BROADCAST,
                                                  BP_DTYPE_F32, bytes, BP_DTYPE_I8, 256, &comp),
                   BP_INVALID_ARGUMENT);
  assert_int_equal(bp_comm_estimate_compressed_ns(w.comms[0], BP_COLLECTIVE_ALL_REDUCE,
                                                  BP_DTYPE_I32, bytes, BP_DTYPE_I8, 256, &comp),
                   BP_UNIMPLEMENTED);
  assert_int_equal(bp_comm_estimate_compressed_ns(w.comms[0], BP_COLLECTIVE_ALL_REDUCE,
                                                  BP_DTYPE_F32, bytes, BP_DTYPE_U8, 256, &comp),
                   BP_UNIMPLEMENTED);
  assert_int_equal(bp_comm_estimate_compressed_ns(w.comms[0], BP_COLLECTIVE_ALL_REDUCE,
                                                  BP_DTYPE_F32, bytes, BP_DTYPE_I8, 1u << 25, &comp),
                   BP_INVALID_ARGUMENT);
  assert_int_equal(bp_comm_estimate_compressed_ns(NULL, 0, BP_DTYPE_F32, bytes, BP_DTYPE_I8, 256,
                                                  &comp), BP_INVALID_ARGUMENT);
  world_close(&w);
  /* Ranks sharing one template device, host-staged: the staging copies
   * are part of the cost. */
  world_open(&w, "template", 2, 0);
  assert_int_equal(bp_comm_link_tier(w.comms[0]), BP_LINK_SAME_DEVICE);
  double staged = 0;
  assert_int_equal(bp_comm_estimate_ns(w.comms[0], BP_COLLECTIVE_ALL_REDUCE, bytes, &staged),
                   BP_OK);
  const bp_device_properties_t* tp = bp_device_properties(w.devices[0]);
  const double base = 2 * 1000.0 + 1.0 * (double)bytes / tp->memory_bandwidth_bytes_per_s * 1e9;
  assert_true(staged > base);
  world_close(&w);
}

/* Vulkan (lavapipe in CI): host-staged ranks sharing vulkan:0, whose
 * host functions wait for each other across streams of one queue. */
static void test_collectives_vulkan(void** state) {
  (void)state;
  for (int n = 2; n <= 4; ++n) {
    check_all_reduce("vulkan", n, BP_DTYPE_F32, BP_REDUCE_SUM, 4099, 0);
    check_all_reduce("vulkan", n, BP_DTYPE_F16, BP_REDUCE_MAX, 77, 1);
    check_others("vulkan", n, 13);
  }
  check_mismatch("vulkan");
}

/* CUDA through NCCL (tests/cuda: the fake driver and fake libnccl): the
 * same collectives and split on ranks sharing cuda:0. */
static void test_collectives_cuda(void** state) {
  (void)state;
  for (int n = 2; n <= 4; ++n) {
    check_all_reduce("cuda", n, BP_DTYPE_F32, BP_REDUCE_SUM, 4099, 0);
    check_all_reduce("cuda", n, BP_DTYPE_BF16, BP_REDUCE_MAX, 77, 1);
    check_others("cuda", n, 13);
  }
  check_split("cuda");
  check_abort("cuda");
}

int main(void) {
  /* test_comm_cuda: the CUDA group only (it must find cuda:0). */
  const char* cu = getenv("BP_TEST_COMM_CUDA");
  if (cu && strcmp(cu, "1") == 0) {
    const struct CMUnitTest cuda_tests[] = {cmocka_unit_test(test_collectives_cuda)};
    return cmocka_run_group_tests(cuda_tests, NULL, NULL);
  }
  /* test_comm_vulkan: the Vulkan group only (it must find vulkan:0). */
  const char* vk = getenv("BP_TEST_COMM_VULKAN");
  if (vk && strcmp(vk, "1") == 0) {
    const struct CMUnitTest vk_tests[] = {cmocka_unit_test(test_collectives_vulkan)};
    return cmocka_run_group_tests(vk_tests, NULL, NULL);
  }
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_all_reduce_dtypes_ops),
      cmocka_unit_test(test_all_reduce_ranks_sizes_in_place),
      cmocka_unit_test(test_host_staged_all_reduce),
      cmocka_unit_test(test_collectives_native),
      cmocka_unit_test(test_collectives_host_staged),
      cmocka_unit_test(test_collectives_bridged),
      cmocka_unit_test(test_mismatch_fails_every_rank),
      cmocka_unit_test(test_missing_rank_times_out),
      cmocka_unit_test(test_abort_wakes_a_waiting_rank),
      cmocka_unit_test(test_bad_arguments),
      cmocka_unit_test(test_split),
      cmocka_unit_test(test_compressed_collectives),
      cmocka_unit_test(test_link_tiers_and_cost),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
