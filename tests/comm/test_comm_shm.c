/* The kit's shared-memory engine across processes (plugins/kit/
 * kit_comm_shm.c): forked ranks meet through the TCP bootstrap and run
 * every collective through a segment with small slots (64 KiB: many
 * rounds) and checked results; a send/recv ring larger than a channel;
 * split; a mismatch fails every rank and leaves the communicator usable;
 * a rank that never calls makes the others fail with DEADLINE_EXCEEDED
 * naming it; a rank whose process dies is detected long before the
 * timeout; the link tier moves the one-shot threshold.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "backplane/comm.h"
#include "bp_kit_comm.h"
#include "kit_comm_shm.h"

static int g_port;

static void set_env(int rank, int size) {
  char v[32];
  snprintf(v, sizeof v, "%d", rank);
  setenv("BACKPLANE_RANK", v, 1);
  snprintf(v, sizeof v, "%d", size);
  setenv("BACKPLANE_WORLD_SIZE", v, 1);
  snprintf(v, sizeof v, "%d", g_port);
  setenv("BACKPLANE_MASTER_PORT", v, 1);
  setenv("BACKPLANE_MASTER_ADDR", "127.0.0.1", 1);
  setenv("BACKPLANE_COMM_SHM_SLOT_KB", "64", 1);
}

/* Makes this process's rank: 0 or an exit code. */
static int make_rank(int rank, int size, uint64_t timeout_ns, bp_bootstrap_t** b,
                     bp_kit_comm_t** c) {
  set_env(rank, size);
  bp_comm_options_t o = {.struct_size = sizeof o, .timeout_ns = 20ull * 1000000000ull};
  if (bp_bootstrap_create_env(&o, b) != BP_OK) return 10;
  bp_kit_comm_error_t e;
  if (bp_kit_comm_create(*b, timeout_ns, c, &e) != BP_OK) {
    fprintf(stderr, "rank %d: %s\n", rank, e.text);
    return 11;
  }
  return 0;
}

static bp_status_t run1(bp_kit_comm_t* c, bp_kit_coll_t call, bp_kit_comm_error_t* e) {
  return bp_kit_comm_run(c, &call, 1, e);
}

#define CHECK(cond, code)                                                    \
  do {                                                                       \
    if (!(cond)) {                                                           \
      fprintf(stderr, "rank %d: check failed at line %d\n", rank, __LINE__); \
      return (code);                                                         \
    }                                                                        \
  } while (0)

/* Element i of rank r's input: small integers, so float sums are exact. */
static float value(int r, uint64_t i) { return (float)((int)(i % 97) - 40 + 3 * r); }

static int collectives_main(int rank, int n) {
  bp_bootstrap_t* b = NULL;
  bp_kit_comm_t* c = NULL;
  int rc = make_rank(rank, n, 20ull * 1000000000ull, &b, &c);
  if (rc) return rc;
  bp_kit_comm_error_t e;
  CHECK(bp_kit_comm_rank(c) == rank && bp_kit_comm_size(c) == n, 12);
  /* all_reduce SUM of 100003 f32 (3 rounds of 8 KiB elements at 64 KiB
   * slots) in place, and one small (one-shot) all_reduce out of place. */
  const uint64_t big = 100003;
  float* x = malloc(sizeof(float) * big);
  for (uint64_t i = 0; i < big; ++i) x[i] = value(rank, i);
  CHECK(run1(c, (bp_kit_coll_t){.kind = BP_KIT_COLL_ALL_REDUCE, .dtype = BP_DTYPE_F32,
                                .op = BP_REDUCE_SUM, .count = big, .send = x, .recv = x},
             &e) == BP_OK, 20);
  for (uint64_t i = 0; i < big; ++i) {
    float want = 0;
    for (int r = 0; r < n; ++r) want += value(r, i);
    CHECK(x[i] == want, 21);
  }
  int32_t small_in[5], small_out[5];
  for (int i = 0; i < 5; ++i) small_in[i] = rank * 10 + i;
  CHECK(run1(c, (bp_kit_coll_t){.kind = BP_KIT_COLL_ALL_REDUCE, .dtype = BP_DTYPE_I32,
                                .op = BP_REDUCE_MAX, .count = 5, .send = small_in,
                                .recv = small_out}, &e) == BP_OK, 22);
  for (int i = 0; i < 5; ++i) CHECK(small_out[i] == (n - 1) * 10 + i, 23);
  /* broadcast from the last rank, 70001 i16 (3 rounds). */
  const uint64_t bn = 70001;
  int16_t* bc = malloc(sizeof(int16_t) * bn);
  for (uint64_t i = 0; i < bn; ++i) bc[i] = rank == n - 1 ? (int16_t)(i * 7) : -1;
  CHECK(run1(c, (bp_kit_coll_t){.kind = BP_KIT_COLL_BROADCAST, .dtype = BP_DTYPE_I16,
                                .root = n - 1, .count = bn, .send = bc, .recv = bc}, &e) == BP_OK,
        30);
  for (uint64_t i = 0; i < bn; ++i) CHECK(bc[i] == (int16_t)(i * 7), 31);
  /* reduce AVG of f64 to rank 1. */
  double din[1000], dout[1000];
  for (int i = 0; i < 1000; ++i) din[i] = rank + i;
  CHECK(run1(c, (bp_kit_coll_t){.kind = BP_KIT_COLL_REDUCE, .dtype = BP_DTYPE_F64,
                                .op = BP_REDUCE_AVG, .root = 1, .count = 1000, .send = din,
                                .recv = dout}, &e) == BP_OK, 40);
  if (rank == 1)
    for (int i = 0; i < 1000; ++i) CHECK(dout[i] == i + (n - 1) / 2.0, 41);
  /* all_gather of 20000 u8 per rank (2 rounds), in place. */
  const uint64_t gn = 20000;
  uint8_t* g = malloc(gn * (size_t)n);
  for (uint64_t i = 0; i < gn; ++i) g[(uint64_t)rank * gn + i] = (uint8_t)(rank * 31 + i);
  CHECK(run1(c, (bp_kit_coll_t){.kind = BP_KIT_COLL_ALL_GATHER, .dtype = BP_DTYPE_U8,
                                .count = gn, .send = g + (uint64_t)rank * gn, .recv = g},
             &e) == BP_OK, 50);
  for (int r = 0; r < n; ++r)
    for (uint64_t i = 0; i < gn; ++i) CHECK(g[(uint64_t)r * gn + i] == (uint8_t)(r * 31 + i), 51);
  /* reduce_scatter SUM of i64, 5000 per rank (several rounds). */
  const uint64_t rn = 5000;
  int64_t* rs = malloc(sizeof(int64_t) * rn * (size_t)n);
  int64_t* ro = malloc(sizeof(int64_t) * rn);
  for (uint64_t i = 0; i < rn * (uint64_t)n; ++i) rs[i] = (int64_t)(i * 3 + (uint64_t)rank);
  CHECK(run1(c, (bp_kit_coll_t){.kind = BP_KIT_COLL_REDUCE_SCATTER, .dtype = BP_DTYPE_I64,
                                .op = BP_REDUCE_SUM, .count = rn, .send = rs, .recv = ro},
             &e) == BP_OK, 60);
  for (uint64_t i = 0; i < rn; ++i) {
    const uint64_t k = (uint64_t)rank * rn + i;
    CHECK(ro[i] == (int64_t)(k * 3 * (uint64_t)n) + (int64_t)(n * (n - 1) / 2), 61);
  }
  /* all_to_all in place: block q of rank r holds r * 1000 + q. */
  const uint64_t an = 3001;
  int32_t* a = malloc(sizeof(int32_t) * an * (size_t)n);
  for (int q = 0; q < n; ++q)
    for (uint64_t i = 0; i < an; ++i) a[(uint64_t)q * an + i] = rank * 1000 + q + (int32_t)i;
  CHECK(run1(c, (bp_kit_coll_t){.kind = BP_KIT_COLL_ALL_TO_ALL, .dtype = BP_DTYPE_I32,
                                .count = an, .send = a, .recv = a}, &e) == BP_OK, 70);
  for (int q = 0; q < n; ++q)
    for (uint64_t i = 0; i < an; ++i)
      CHECK(a[(uint64_t)q * an + i] == q * 1000 + rank + (int32_t)i, 71);
  /* all_to_allv: rank r sends (r + q) * 997 elements to rank q. */
  uint64_t sc[8], sd[8], rcn[8], rd[8], stot = 0, rtot = 0;
  for (int q = 0; q < n; ++q) {
    sc[q] = (uint64_t)(rank + q) * 997;
    sd[q] = stot;
    stot += sc[q];
    rcn[q] = (uint64_t)(q + rank) * 997;
    rd[q] = rtot;
    rtot += rcn[q];
  }
  float* vs = malloc(sizeof(float) * (stot + 1));
  float* vr = malloc(sizeof(float) * (rtot + 1));
  for (int q = 0; q < n; ++q)
    for (uint64_t i = 0; i < sc[q]; ++i) vs[sd[q] + i] = (float)(rank * 100000 + q * 10000) + (float)i;
  CHECK(run1(c, (bp_kit_coll_t){.kind = BP_KIT_COLL_ALL_TO_ALLV, .dtype = BP_DTYPE_F32,
                                .send = vs, .recv = vr, .send_counts = sc, .send_displs = sd,
                                .recv_counts = rcn, .recv_displs = rd}, &e) == BP_OK, 80);
  for (int q = 0; q < n; ++q)
    for (uint64_t i = 0; i < rcn[q]; ++i)
      CHECK(vr[rd[q] + i] == (float)(q * 100000 + rank * 10000) + (float)i, 81);
  /* A ring of 300 KiB messages (more than a 256 KiB channel) in a group,
   * sends listed first: both directions stream through the rings. */
  const uint64_t pn = 300 * 256;
  int32_t* ps = malloc(sizeof(int32_t) * pn);
  int32_t* pr = malloc(sizeof(int32_t) * pn);
  for (uint64_t i = 0; i < pn; ++i) ps[i] = rank * 7 + (int32_t)i;
  bp_kit_coll_t ring[2] = {
      {.kind = BP_KIT_COLL_SEND, .dtype = BP_DTYPE_I32, .root = (rank + 1) % n, .count = pn,
       .send = ps},
      {.kind = BP_KIT_COLL_RECV, .dtype = BP_DTYPE_I32, .root = (rank + n - 1) % n, .count = pn,
       .recv = pr}};
  CHECK(bp_kit_comm_run(c, ring, 2, &e) == BP_OK, 90);
  for (uint64_t i = 0; i < pn; ++i) CHECK(pr[i] == ((rank + n - 1) % n) * 7 + (int32_t)i, 91);
  CHECK(run1(c, (bp_kit_coll_t){.kind = BP_KIT_COLL_BARRIER}, &e) == BP_OK, 95);
  /* Split by parity, reversed order by key: an all_reduce in each half. */
  bp_kit_comm_t* half = NULL;
  CHECK(bp_kit_comm_split(c, rank % 2, -rank, 0, &half, &e) == BP_OK && half, 100);
  int32_t one = rank, sum = 0, want = 0;
  for (int r = rank % 2; r < n; r += 2) want += r;
  CHECK(run1(half, (bp_kit_coll_t){.kind = BP_KIT_COLL_ALL_REDUCE, .dtype = BP_DTYPE_I32,
                                   .op = BP_REDUCE_SUM, .count = 1, .send = &one, .recv = &sum},
             &e) == BP_OK && sum == want, 101);
  CHECK(bp_kit_comm_rank(half) == (n - 1 - rank) / 2, 102);
  bp_kit_comm_destroy(half);
  free(x);
  free(bc);
  free(g);
  free(rs);
  free(ro);
  free(a);
  free(vs);
  free(vr);
  free(ps);
  free(pr);
  bp_kit_comm_destroy(c);
  bp_bootstrap_destroy(b);
  return 0;
}

static void run_ranks(int size, int (*body)(int, int), int* codes) {
  pid_t pids[8];
  for (int r = 0; r < size; ++r) {
    pids[r] = fork();
    assert_true(pids[r] >= 0);
    if (pids[r] == 0) _exit(body(r, size));
  }
  for (int r = 0; r < size; ++r) {
    int status = 0;
    assert_int_equal(waitpid(pids[r], &status, 0), pids[r]);
    codes[r] = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  }
  g_port += 1; /* the next test's world */
}

static void expect_all_zero(const int* codes, int n) {
  for (int r = 0; r < n; ++r)
    if (codes[r] != 0) fail_msg("rank %d failed with code %d", r, codes[r]);
}

static void test_shm_every_collective_four_processes(void** state) {
  (void)state;
  int codes[4];
  run_ranks(4, collectives_main, codes);
  expect_all_zero(codes, 4);
}

static void test_shm_every_collective_three_processes(void** state) {
  (void)state;
  int codes[3];
  run_ranks(3, collectives_main, codes);
  expect_all_zero(codes, 3);
}

/* Rank 2 passes another count: every rank fails with INVALID_ARGUMENT
 * naming it; the next all_reduce works. */
static int mismatch_main(int rank, int n) {
  bp_bootstrap_t* b = NULL;
  bp_kit_comm_t* c = NULL;
  int rc = make_rank(rank, n, 20ull * 1000000000ull, &b, &c);
  if (rc) return rc;
  float x[40] = {0}, y[40];
  bp_kit_comm_error_t e;
  bp_status_t st = run1(c, (bp_kit_coll_t){.kind = BP_KIT_COLL_ALL_REDUCE, .dtype = BP_DTYPE_F32,
                                           .op = BP_REDUCE_SUM, .count = rank == 2 ? 40 : 30,
                                           .send = x, .recv = y}, &e);
  CHECK(st == BP_INVALID_ARGUMENT && strstr(e.text, "mismatch") && strstr(e.text, "rank 2"), 20);
  for (int i = 0; i < 40; ++i) x[i] = 1.0f;
  CHECK(run1(c, (bp_kit_coll_t){.kind = BP_KIT_COLL_ALL_REDUCE, .dtype = BP_DTYPE_F32,
                                .op = BP_REDUCE_SUM, .count = 40, .send = x, .recv = y},
             &e) == BP_OK && y[39] == (float)n, 21);
  bp_kit_comm_destroy(c);
  bp_bootstrap_destroy(b);
  return 0;
}

static void test_shm_mismatch_fails_every_rank(void** state) {
  (void)state;
  int codes[3];
  run_ranks(3, mismatch_main, codes);
  expect_all_zero(codes, 3);
}

static double seconds_since(const struct timespec* t0) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)(t.tv_sec - t0->tv_sec) + (double)(t.tv_nsec - t0->tv_nsec) / 1e9;
}

/* Rank 2 lives but never calls: the others fail after 0.3 s naming it. */
static int missing_main(int rank, int n) {
  bp_bootstrap_t* b = NULL;
  bp_kit_comm_t* c = NULL;
  int rc = make_rank(rank, n, 300ull * 1000000ull, &b, &c);
  if (rc) return rc;
  if (rank == 2) {
    usleep(1500 * 1000);
  } else {
    struct timespec t0;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    bp_kit_comm_error_t e;
    bp_status_t st = run1(c, (bp_kit_coll_t){.kind = BP_KIT_COLL_BARRIER}, &e);
    const double took = seconds_since(&t0);
    CHECK(st == BP_DEADLINE_EXCEEDED && strstr(e.text, "rank(s) 2") && took < 1.2, 20);
    /* Broken from then on, with the same message. */
    CHECK(bp_kit_comm_status(c, &e) == BP_DEADLINE_EXCEEDED, 21);
  }
  bp_kit_comm_destroy(c);
  bp_bootstrap_destroy(b);
  return 0;
}

static void test_shm_missing_rank_times_out(void** state) {
  (void)state;
  int codes[3];
  run_ranks(3, missing_main, codes);
  expect_all_zero(codes, 3);
}

/* Rank 1 dies without a word: the others' all_reduce (timeout 60 s)
 * fails with ABORTED naming it within a second. */
static int crash_main(int rank, int n) {
  bp_bootstrap_t* b = NULL;
  bp_kit_comm_t* c = NULL;
  int rc = make_rank(rank, n, 60ull * 1000000000ull, &b, &c);
  if (rc) return rc;
  if (rank == 1) _exit(0);
  struct timespec t0;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  float x[4096] = {0};
  bp_kit_comm_error_t e;
  bp_status_t st = run1(c, (bp_kit_coll_t){.kind = BP_KIT_COLL_ALL_REDUCE, .dtype = BP_DTYPE_F32,
                                           .op = BP_REDUCE_SUM, .count = 4096, .send = x,
                                           .recv = x}, &e);
  CHECK(st == BP_ABORTED && strstr(e.text, "rank 1") && strstr(e.text, "exited") &&
            seconds_since(&t0) < 5.0, 20);
  bp_kit_comm_destroy(c);
  bp_bootstrap_destroy(b);
  return 0;
}

static void test_shm_dead_peer_is_detected(void** state) {
  (void)state;
  int codes[3];
  run_ranks(3, crash_main, codes);
  assert_int_equal(codes[0], 0);
  assert_int_equal(codes[2], 0);
}

/* Abort from one rank wakes the others at once. */
static int abort_main(int rank, int n) {
  bp_bootstrap_t* b = NULL;
  bp_kit_comm_t* c = NULL;
  int rc = make_rank(rank, n, 60ull * 1000000000ull, &b, &c);
  if (rc) return rc;
  bp_kit_comm_error_t e;
  if (rank == 0) {
    usleep(100 * 1000);
    bp_kit_comm_abort(c);
  } else {
    CHECK(run1(c, (bp_kit_coll_t){.kind = BP_KIT_COLL_BARRIER}, &e) == BP_ABORTED &&
              strstr(e.text, "aborted"), 20);
  }
  bp_kit_comm_destroy(c);
  bp_bootstrap_destroy(b);
  return 0;
}

static void test_shm_abort_wakes_peers(void** state) {
  (void)state;
  int codes[3];
  run_ranks(3, abort_main, codes);
  expect_all_zero(codes, 3);
}

/* The tier moves the algorithm: a slower barrier (processes through
 * shared memory, HOST) runs larger all_reduces one-shot than ranks of one
 * process (PEER); fewer ranks, larger too. */
static int tier_main(int rank, int n) {
  bp_bootstrap_t* b = NULL;
  bp_kit_comm_t* c = NULL;
  int rc = make_rank(rank, n, 20ull * 1000000000ull, &b, &c);
  if (rc) return rc;
  CHECK(bp_kit_comm_one_shot_bytes(c) == bp_kit_comm_one_shot_max(BP_KIT_LINK_HOST, n), 20);
  bp_kit_comm_destroy(c);
  bp_bootstrap_destroy(b);
  return 0;
}

static void* local_rank(void* arg) {
  bp_bootstrap_t* bs = arg;
  bp_kit_comm_t* c = NULL;
  bp_kit_comm_error_t e;
  uint64_t got = 0;
  if (bp_kit_comm_create(bs, 0, &c, &e) == BP_OK) got = bp_kit_comm_one_shot_bytes(c);
  bp_kit_comm_destroy(c);
  return (void*)(uintptr_t)got;
}

static void test_link_tier_moves_one_shot_threshold(void** state) {
  (void)state;
  assert_true(bp_kit_comm_one_shot_max(BP_KIT_LINK_HOST, 4) >
              bp_kit_comm_one_shot_max(BP_KIT_LINK_PEER, 4));
  assert_true(bp_kit_comm_one_shot_max(BP_KIT_LINK_NETWORK, 4) >
              bp_kit_comm_one_shot_max(BP_KIT_LINK_HOST, 4));
  assert_true(bp_kit_comm_one_shot_max(BP_KIT_LINK_PEER, 2) >
              bp_kit_comm_one_shot_max(BP_KIT_LINK_PEER, 4));
  /* The crossover a B n / (n - 1)^2 with a = 2 us, B = 8 GB/s, n = 4. */
  assert_int_equal(bp_kit_comm_one_shot_max(BP_KIT_LINK_PEER, 4), 7111);
  /* Ranks in one process use PEER's threshold... */
  bp_bootstrap_t bs[4];
  void* shared = NULL;
  assert_int_equal(bp_kit_local_bootstrap_create(4, bs, &shared), BP_OK);
  pthread_t t[4];
  for (int r = 0; r < 4; ++r) pthread_create(&t[r], NULL, local_rank, &bs[r]);
  for (int r = 0; r < 4; ++r) {
    void* got = NULL;
    pthread_join(t[r], &got);
    assert_int_equal((uintptr_t)got, bp_kit_comm_one_shot_max(BP_KIT_LINK_PEER, 4));
  }
  bp_kit_local_bootstrap_destroy(shared);
  /* ...ranks in several processes HOST's. */
  int codes[4];
  run_ranks(4, tier_main, codes);
  expect_all_zero(codes, 4);
}

int main(void) {
  g_port = 20000 + (int)(getpid() % 10000) * 4 + 1;
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_shm_every_collective_four_processes),
      cmocka_unit_test(test_shm_every_collective_three_processes),
      cmocka_unit_test(test_shm_mismatch_fails_every_rank),
      cmocka_unit_test(test_shm_missing_rank_times_out),
      cmocka_unit_test(test_shm_dead_peer_is_detected),
      cmocka_unit_test(test_shm_abort_wakes_peers),
      cmocka_unit_test(test_link_tier_moves_one_shot_threshold),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
