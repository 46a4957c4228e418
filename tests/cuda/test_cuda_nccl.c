/* The CUDA plugin's collectives through NCCL, over the fake driver and the
 * fake libnccl (fake_nccl.c), through the application API: results of the
 * collectives (all_to_all's own block is a device copy), NCCL's limits
 * answered UNIMPLEMENTED, asynchronous errors and hangs turned into the
 * stream's status by the watchdog (mismatch, missing rank) (abort, split
 * and the other collectives: test_comm_cuda, tests/comm/test_comm.c);
 * and, with BP_TEST_NO_NCCL=1 (no libnccl), host staging instead.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>

#include "backplane/comm.h"

#define MAX_RANKS 4

typedef struct world {
  bp_context_t* ctx;
  int n;
  bp_comm_t* comms[MAX_RANKS];
  bp_stream_t* streams[MAX_RANKS];
  bp_device_t* devices[MAX_RANKS];
} world_t;

/* Rank r on cuda:r (FAKE_CUDA_DEVICES=4: NCCL takes one rank per GPU),
 * each with its stream. */
static void world_open(world_t* w, int n, uint64_t timeout_ns) {
  memset(w, 0, sizeof *w);
  w->n = n;
  assert_int_equal(bp_context_create(NULL, &w->ctx), BP_OK);
  for (int r = 0; r < n; ++r) {
    char spec[16];
    snprintf(spec, sizeof spec, "cuda:%d", r);
    if (bp_context_find_device(w->ctx, spec, &w->devices[r]) != BP_OK)
      fail_msg("%s: %s", spec, bp_status_message());
    assert_int_equal(bp_stream_create(w->devices[r], NULL, &w->streams[r]), BP_OK);
  }
  bp_comm_options_t o = {.struct_size = sizeof o, .timeout_ns = timeout_ns};
  if (bp_comm_init_all(w->devices, (uint32_t)n, &o, w->comms) != BP_OK)
    fail_msg("bp_comm_init_all: %s", bp_status_message());
}
static void world_close(world_t* w) {
  for (int r = 0; r < w->n; ++r) {
    bp_comm_destroy(w->comms[r]);
    bp_stream_release(w->streams[r]);
  }
  bp_context_release(w->ctx);
}

static bp_tensor_t* tensor(world_t* w, int r, uint32_t dtype, int64_t n) {
  bp_tensor_t* t = NULL;
  assert_int_equal(bp_tensor_create(w->devices[r], dtype, 1, &n, &t), BP_OK);
  return t;
}
static float value(int r, int64_t i) { return (float)((i * 7 + r * 3) % 9) - 4.0f; }
static void fill(world_t* w, int r, bp_tensor_t* t) {
  int64_t n = bp_tensor_numel(t);
  float* h = malloc(sizeof *h * (size_t)n + 1);
  for (int64_t i = 0; i < n; ++i) h[i] = value(r, i);
  assert_int_equal(bp_tensor_write(w->streams[r], t, h, sizeof *h * (uint64_t)n), BP_OK);
  free(h);
}
static float* read_back(world_t* w, int r, bp_tensor_t* t) {
  int64_t n = bp_tensor_numel(t);
  float* h = malloc(sizeof *h * (size_t)n + 1);
  assert_int_equal(bp_tensor_read(w->streams[r], t, h, sizeof *h * (uint64_t)n), BP_OK);
  return h;
}
static void sync_all(world_t* w) {
  for (int r = 0; r < w->n; ++r)
    if (bp_stream_synchronize(w->streams[r]) != BP_OK) fail_msg("rank %d: %s", r, bp_status_message());
}

/* all_reduce, all_to_all and a send/recv ring in a group, barrier: every
 * result exact, the communicator NATIVE. */
static void test_collectives_through_nccl(void** state) {
  (void)state;
  enum { N = 3, C = 5 };
  world_t w;
  world_open(&w, N, 0);
  bp_tensor_t *a[N], *s[N], *x[N], *ring[N];
  for (int r = 0; r < N; ++r) {
    assert_int_equal(bp_comm_tier(w.comms[r]), BP_COMM_TIER_NATIVE);
    a[r] = tensor(&w, r, BP_DTYPE_F32, 1001);
    s[r] = tensor(&w, r, BP_DTYPE_F32, N * C);
    x[r] = tensor(&w, r, BP_DTYPE_F32, N * C);
    ring[r] = tensor(&w, r, BP_DTYPE_F32, C);
    fill(&w, r, a[r]);
    fill(&w, r, s[r]);
  }
  for (int r = 0; r < N; ++r) {
    assert_int_equal(bp_comm_all_reduce(w.comms[r], w.streams[r], a[r], a[r], BP_REDUCE_SUM, NULL), BP_OK);
    assert_int_equal(bp_comm_all_to_all(w.comms[r], w.streams[r], s[r], x[r], NULL), BP_OK);
    assert_int_equal(bp_comm_barrier(w.comms[r], w.streams[r]), BP_OK);
  }
  bp_tensor_t* snd[N];
  for (int r = 0; r < N; ++r) {
    snd[r] = tensor(&w, r, BP_DTYPE_F32, C);
    fill(&w, r, snd[r]);
  }
  assert_int_equal(bp_comm_group_begin(), BP_OK);
  for (int r = 0; r < N; ++r) {
    assert_int_equal(bp_comm_send(w.comms[r], w.streams[r], snd[r], (r + 1) % N), BP_OK);
    assert_int_equal(bp_comm_recv(w.comms[r], w.streams[r], ring[r], (r + N - 1) % N), BP_OK);
  }
  assert_int_equal(bp_comm_group_end(), BP_OK);
  sync_all(&w);
  for (int r = 0; r < N; ++r) {
    float* got = read_back(&w, r, a[r]);
    for (int i = 0; i < 1001; ++i) assert_true(got[i] == value(0, i) + value(1, i) + value(2, i));
    free(got);
    got = read_back(&w, r, x[r]);
    for (int p = 0; p < N; ++p) /* block p came from rank p's block r */
      for (int i = 0; i < C; ++i) assert_true(got[p * C + i] == value(p, r * C + i));
    free(got);
    got = read_back(&w, r, ring[r]);
    for (int i = 0; i < C; ++i) assert_true(got[i] == value((r + N - 1) % N, i));
    free(got);
  }
  for (int r = 0; r < N; ++r) {
    bp_tensor_release(snd[r]);
    bp_tensor_release(a[r]);
    bp_tensor_release(s[r]);
    bp_tensor_release(x[r]);
    bp_tensor_release(ring[r]);
  }
  world_close(&w);
}

/* Two ranks on one GPU in one process: NCCL cannot; every rank answers
 * UNIMPLEMENTED (a scorer's "not supported"), none waits in NCCL. */
static void test_one_rank_per_gpu(void** state) {
  (void)state;
  bp_context_t* ctx = NULL;
  bp_device_t* d[2] = {NULL, NULL};
  assert_int_equal(bp_context_create(NULL, &ctx), BP_OK);
  assert_int_equal(bp_context_find_device(ctx, "cuda:1", &d[0]), BP_OK);
  d[1] = d[0];
  bp_comm_t* comms[2] = {NULL, NULL};
  /* The core then looks for another engine and says there is none. */
  assert_int_equal(bp_comm_init_all(d, 2, NULL, comms), BP_UNIMPLEMENTED);
  bp_context_release(ctx);
}

/* NCCL reduces no int16 and compresses nothing: UNIMPLEMENTED, said. */
static void test_limits_unimplemented(void** state) {
  (void)state;
  world_t w;
  world_open(&w, 2, 0);
  bp_tensor_t* t = tensor(&w, 0, BP_DTYPE_I16, 4);
  assert_int_equal(bp_comm_all_reduce(w.comms[0], w.streams[0], t, t, BP_REDUCE_SUM, NULL), BP_UNIMPLEMENTED);
  if (!strstr(bp_status_message(), "NCCL cannot reduce i16")) fail_msg("%s", bp_status_message());
  bp_tensor_t* f = tensor(&w, 0, BP_DTYPE_F32, 512);
  bp_collective_options_t o = {.struct_size = sizeof o, .compression = BP_DTYPE_I8};
  assert_int_equal(bp_comm_all_reduce(w.comms[0], w.streams[0], f, f, BP_REDUCE_SUM, &o), BP_UNIMPLEMENTED);
  bp_tensor_release(t);
  bp_tensor_release(f);
  world_close(&w);
}

/* Calls that disagree: NCCL's asynchronous error comes back from every
 * rank's synchronize with NCCL's message; the communicator is broken
 * (NCCL's errors are final). */
static void test_mismatch_async_error(void** state) {
  (void)state;
  world_t w;
  world_open(&w, 2, 0);
  bp_tensor_t* t0 = tensor(&w, 0, BP_DTYPE_F32, 8);
  bp_tensor_t* t1 = tensor(&w, 1, BP_DTYPE_F32, 9);
  assert_int_equal(bp_comm_all_reduce(w.comms[0], w.streams[0], t0, t0, BP_REDUCE_SUM, NULL), BP_OK);
  assert_int_equal(bp_comm_all_reduce(w.comms[1], w.streams[1], t1, t1, BP_REDUCE_SUM, NULL), BP_OK);
  for (int r = 0; r < 2; ++r) {
    assert_int_equal(bp_stream_synchronize(w.streams[r]), BP_INVALID_ARGUMENT);
    if (!strstr(bp_status_message(), "invalid usage")) fail_msg("%s", bp_status_message());
  }
  assert_int_equal(bp_comm_get_async_error(w.comms[0]), BP_INVALID_ARGUMENT);
  assert_int_equal(bp_comm_all_reduce(w.comms[0], w.streams[0], t0, t0, BP_REDUCE_SUM, NULL),
                   BP_INVALID_ARGUMENT);
  bp_tensor_release(t0);
  bp_tensor_release(t1);
  world_close(&w);
}

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* A rank that never comes: NCCL would hang; the watchdog aborts after the
 * timeout and every waiting rank reports DEADLINE_EXCEEDED. */
static void test_missing_rank_deadline(void** state) {
  (void)state;
  world_t w;
  world_open(&w, 3, 200 * 1000000ull); /* 200 ms */
  bp_tensor_t* t[2] = {tensor(&w, 0, BP_DTYPE_F32, 4), tensor(&w, 1, BP_DTYPE_F32, 4)};
  double t0 = now_s();
  for (int r = 0; r < 2; ++r)
    assert_int_equal(bp_comm_all_reduce(w.comms[r], w.streams[r], t[r], t[r], BP_REDUCE_SUM, NULL), BP_OK);
  for (int r = 0; r < 2; ++r) {
    assert_int_equal(bp_stream_synchronize(w.streams[r]), BP_DEADLINE_EXCEEDED);
    if (!strstr(bp_status_message(), "no progress within 0.200 s")) fail_msg("%s", bp_status_message());
  }
  double took = now_s() - t0;
  assert_true(took >= 0.2 && took < 2.0);
  assert_int_equal(bp_comm_get_async_error(w.comms[2]), BP_DEADLINE_EXCEEDED); /* the world's verdict */
  bp_tensor_release(t[0]);
  bp_tensor_release(t[1]);
  world_close(&w);
}

/* Without libnccl: the vtable has no comm table; the core stages the
 * collectives through host memory, with the same results. */
static void test_no_nccl_host_staged(void** state) {
  (void)state;
  world_t w;
  world_open(&w, 2, 0);
  bp_tensor_t* t[2];
  for (int r = 0; r < 2; ++r) {
    assert_int_equal(bp_comm_tier(w.comms[r]), BP_COMM_TIER_HOST_STAGED);
    t[r] = tensor(&w, r, BP_DTYPE_F32, 33);
    fill(&w, r, t[r]);
  }
  for (int r = 0; r < 2; ++r)
    assert_int_equal(bp_comm_all_reduce(w.comms[r], w.streams[r], t[r], t[r], BP_REDUCE_MAX, NULL), BP_OK);
  sync_all(&w);
  float* got = read_back(&w, 1, t[1]);
  for (int i = 0; i < 33; ++i) {
    float a = value(0, i), b = value(1, i);
    assert_true(got[i] == (a > b ? a : b));
  }
  free(got);
  bp_tensor_release(t[0]);
  bp_tensor_release(t[1]);
  world_close(&w);
}

int main(void) {
  const char* no = getenv("BP_TEST_NO_NCCL");
  if (no && strcmp(no, "1") == 0) {
    const struct CMUnitTest staged[] = {cmocka_unit_test(test_no_nccl_host_staged)};
    return cmocka_run_group_tests(staged, NULL, NULL);
  }
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_collectives_through_nccl),
      cmocka_unit_test(test_one_rank_per_gpu),
      cmocka_unit_test(test_limits_unimplemented),
      cmocka_unit_test(test_mismatch_async_error),
      cmocka_unit_test(test_missing_rank_deadline),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
