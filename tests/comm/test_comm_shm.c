/* The kit's shared-memory engine across processes (plugins/kit/
 * kit_comm_shm.c): forked ranks meet through the TCP bootstrap and run
 * every collective through a segment with small slots (64 KiB: many
 * rounds) and checked results; a send/recv ring larger than a channel;
 * split; a mismatch fails every rank and leaves the communicator usable;
 * a rank that never calls makes the others fail with DEADLINE_EXCEEDED
 * naming it; a rank whose process dies is detected long before the
 * timeout; the link tier moves the one-shot threshold; compressed
 * all_reduce, all_gather and reduce_scatter bit for bit as the in-process
 * engine's.
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
#include <math.h>
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

/* Runs `body` on `size` forked ranks; every rank must exit with 0. */
static void expect_ranks_pass(int size, int (*body)(int, int)) {
  int codes[8];
  run_ranks(size, body, codes);
  expect_all_zero(codes, size);
}

static void test_shm_every_collective_four_processes(void** state) {
  (void)state;
  expect_ranks_pass(4, collectives_main);
}

static void test_shm_every_collective_three_processes(void** state) {
  (void)state;
  expect_ranks_pass(3, collectives_main);
}

/* ---- compressed payloads across processes -------------------------------- */
/* Element i of rank r's input of a compressed call: varied magnitudes. */
static float qvalue(int r, uint64_t i) {
  return (float)(sin((double)i * 0.37 + r) * (double)(1 + i % 13));
}

typedef struct ref_job {
  bp_bootstrap_t* bs;
  bp_kit_coll_t call;
  bp_status_t st;
} ref_job_t;

static void* ref_rank(void* arg) {
  ref_job_t* j = arg;
  bp_kit_comm_t* c = NULL;
  bp_kit_comm_error_t e;
  j->st = bp_kit_comm_create(j->bs, 20ull * 1000000000ull, &c, &e);
  if (j->st == BP_OK) j->st = bp_kit_comm_run(c, &j->call, 1, &e);
  bp_kit_comm_destroy(c);
  return NULL;
}

/* Rank `me`'s output of `call` from the in-process engine (n threads of
 * this process, inputs qvalue), into out: 0 or an exit code. */
static int in_process_output(bp_kit_coll_t call, int n, int me, uint64_t in_n, uint64_t out_n,
                             float* out) {
  bp_bootstrap_t bs[4];
  ref_job_t jobs[4];
  pthread_t t[4];
  float* bufs[8] = {NULL};
  void* shared = NULL;
  if (n > 4 || bp_kit_local_bootstrap_create(n, bs, &shared) != BP_OK) return 200;
  for (int r = 0; r < n; ++r) {
    bufs[2 * r] = malloc(sizeof(float) * in_n + 1);
    bufs[2 * r + 1] = malloc(sizeof(float) * out_n + 1);
    for (uint64_t i = 0; i < in_n; ++i) bufs[2 * r][i] = qvalue(r, i);
    jobs[r] = (ref_job_t){.bs = &bs[r], .call = call};
    jobs[r].call.send = bufs[2 * r];
    jobs[r].call.recv = bufs[2 * r + 1];
    pthread_create(&t[r], NULL, ref_rank, &jobs[r]);
  }
  int rc = 0;
  for (int r = 0; r < n; ++r) {
    pthread_join(t[r], NULL);
    if (jobs[r].st != BP_OK) rc = 201;
  }
  memcpy(out, bufs[2 * me + 1], sizeof(float) * out_n);
  for (int r = 0; r < 2 * n; ++r) free(bufs[r]);
  bp_kit_local_bootstrap_destroy(shared);
  return rc;
}

/* One compressed call across the processes (64 KiB slots: several rounds),
 * in place when asked, checked bit for bit against the in-process engine
 * (its bounds are test_comm's): the same blocks, the same sums. */
static int compressed_case(bp_kit_comm_t* c, int rank, int n, uint32_t kind, uint32_t comp,
                           uint32_t block, uint64_t count, uint32_t op, int in_place) {
  const uint64_t in_n = kind == BP_KIT_COLL_REDUCE_SCATTER ? count * (uint64_t)n : count;
  const uint64_t out_n = kind == BP_KIT_COLL_ALL_GATHER ? count * (uint64_t)n : count;
  const uint64_t room = in_n > out_n ? in_n : out_n;
  float* buf = malloc(sizeof(float) * room);
  float* out = malloc(sizeof(float) * room);
  float* want = malloc(sizeof(float) * out_n);
  /* In place: the input where the output keeps it (all_gather: this
   * rank's block; reduce_scatter and all_reduce: the start). */
  float* in = in_place && kind == BP_KIT_COLL_ALL_GATHER ? buf + (uint64_t)rank * count : buf;
  for (uint64_t i = 0; i < in_n; ++i) in[i] = qvalue(rank, i);
  const bp_kit_coll_t call = {.kind = kind, .dtype = BP_DTYPE_F32, .op = op, .count = count,
                              .compression = comp, .block = block};
  bp_kit_coll_t mine = call;
  mine.send = in;
  mine.recv = in_place ? buf : out;
  bp_kit_comm_error_t e;
  int rc = run1(c, mine, &e) == BP_OK ? 0 : 1;
  if (rc) fprintf(stderr, "rank %d: kind %u comp %u: %s\n", rank, kind, comp, e.text);
  if (!rc) rc = in_process_output(call, n, rank, in_n, out_n, want);
  if (!rc && memcmp(mine.recv, want, sizeof(float) * out_n) != 0) rc = 2;
  free(buf);
  free(out);
  free(want);
  return rc;
}

/* A block larger than a round's part (2^16 elements, 64 KiB slots): each
 * round quantizes its piece of the block; the result is within the bound
 * of docs/collectives.md for the whole block, and the same on every rank. */
static int compressed_big_block(bp_kit_comm_t* c, int rank, int n) {
  const uint64_t count = 70001, block = 1u << 16;
  float* x = malloc(sizeof(float) * count);
  float* all = malloc(sizeof(float) * count * (uint64_t)n);
  for (uint64_t i = 0; i < count; ++i) x[i] = qvalue(rank, i);
  bp_kit_comm_error_t e;
  int rc = run1(c, (bp_kit_coll_t){.kind = BP_KIT_COLL_ALL_REDUCE, .dtype = BP_DTYPE_F32,
                                   .op = BP_REDUCE_SUM, .count = count, .send = x, .recv = x,
                                   .compression = BP_DTYPE_I8, .block = (uint32_t)block},
               &e) == BP_OK ? 0 : 1;
  for (uint64_t b0 = 0; !rc && b0 < count; b0 += block) {
    const uint64_t end = b0 + block < count ? b0 + block : count;
    double amax = 0;
    for (int q = 0; q < n; ++q)
      for (uint64_t i = b0; i < end; ++i) amax = fmax(amax, fabs(qvalue(q, i)));
    for (uint64_t i = b0; i < end && !rc; ++i) {
      double exact = 0;
      for (int q = 0; q < n; ++q) exact += qvalue(q, i);
      if (fabs(x[i] - exact) > 2.0 * n * amax / 254.0 * 1.0001 + 1e-6) rc = 3;
    }
  }
  if (!rc)
    rc = run1(c, (bp_kit_coll_t){.kind = BP_KIT_COLL_ALL_GATHER, .dtype = BP_DTYPE_F32,
                                 .count = count, .send = x, .recv = all}, &e) == BP_OK ? 0 : 4;
  for (int q = 0; q < n && !rc; ++q)
    if (memcmp(all + (uint64_t)q * count, x, sizeof(float) * count) != 0) rc = 5;
  free(x);
  free(all);
  return rc;
}

static int compressed_main(int rank, int n) {
  bp_bootstrap_t* b = NULL;
  bp_kit_comm_t* c = NULL;
  int rc = make_rank(rank, n, 20ull * 1000000000ull, &b, &c);
  if (rc) return rc;
  const uint32_t i8 = BP_DTYPE_I8, e4 = BP_DTYPE_F8E4M3FN;
  CHECK(compressed_case(c, rank, n, BP_KIT_COLL_ALL_REDUCE, i8, 256, 100003, BP_REDUCE_SUM, 0) == 0, 20);
  CHECK(compressed_case(c, rank, n, BP_KIT_COLL_ALL_REDUCE, e4, 32, 50001, BP_REDUCE_AVG, 1) == 0, 21);
  CHECK(compressed_case(c, rank, n, BP_KIT_COLL_ALL_REDUCE, i8, 64, 7, BP_REDUCE_SUM, 0) == 0, 22);
  CHECK(compressed_case(c, rank, n, BP_KIT_COLL_ALL_GATHER, i8, 64, 150001, 0, 1) == 0, 30);
  CHECK(compressed_case(c, rank, n, BP_KIT_COLL_ALL_GATHER, e4, 256, 1000, 0, 0) == 0, 31);
  CHECK(compressed_case(c, rank, n, BP_KIT_COLL_REDUCE_SCATTER, e4, 128, 20001, BP_REDUCE_SUM, 0) == 0, 40);
  CHECK(compressed_case(c, rank, n, BP_KIT_COLL_REDUCE_SCATTER, i8, 256, 513, BP_REDUCE_AVG, 1) == 0, 41);
  CHECK(compressed_case(c, rank, n, BP_KIT_COLL_ALL_REDUCE, i8, 256, 0, BP_REDUCE_SUM, 0) == 0, 42);
  CHECK(compressed_big_block(c, rank, n) == 0, 50);
  /* Refused before anything moves, on every rank alike: PROD. */
  float f[8] = {0};
  bp_kit_comm_error_t e;
  CHECK(run1(c, (bp_kit_coll_t){.kind = BP_KIT_COLL_ALL_REDUCE, .dtype = BP_DTYPE_F32,
                                .op = BP_REDUCE_PROD, .count = 8, .send = f, .recv = f,
                                .compression = i8, .block = 256}, &e) == BP_UNIMPLEMENTED, 60);
  bp_kit_comm_destroy(c);
  bp_bootstrap_destroy(b);
  return 0;
}

static void test_shm_compressed_four_processes(void** state) {
  (void)state;
  expect_ranks_pass(4, compressed_main);
}

static void test_shm_compressed_three_processes(void** state) {
  (void)state;
  expect_ranks_pass(3, compressed_main);
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
  expect_ranks_pass(3, mismatch_main);
}

static double seconds_since(const struct timespec* t0) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)(t.tv_sec - t0->tv_sec) + (double)(t.tv_nsec - t0->tv_nsec) / 1e9;
}

/* Rank 2 lives but never calls: the others fail after 0.3 s naming it.
 * Rank 2 stays 4 s and the bound is 3 s, so that only the timeout (not
 * rank 2 leaving) can end the barrier in time, with room for valgrind on a
 * loaded 2-core machine (it took over 1.2 s there once). */
static int missing_main(int rank, int n) {
  bp_bootstrap_t* b = NULL;
  bp_kit_comm_t* c = NULL;
  int rc = make_rank(rank, n, 300ull * 1000000ull, &b, &c);
  if (rc) return rc;
  if (rank == 2) {
    usleep(4000 * 1000);
  } else {
    struct timespec t0;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    bp_kit_comm_error_t e;
    bp_status_t st = run1(c, (bp_kit_coll_t){.kind = BP_KIT_COLL_BARRIER}, &e);
    const double took = seconds_since(&t0);
    CHECK(st == BP_DEADLINE_EXCEEDED && strstr(e.text, "rank(s) 2") && took < 3.0, 20);
    /* Broken from then on, with the same message. */
    CHECK(bp_kit_comm_status(c, &e) == BP_DEADLINE_EXCEEDED, 21);
  }
  bp_kit_comm_destroy(c);
  bp_bootstrap_destroy(b);
  return 0;
}

static void test_shm_missing_rank_times_out(void** state) {
  (void)state;
  expect_ranks_pass(3, missing_main);
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
  expect_ranks_pass(3, abort_main);
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
  expect_ranks_pass(4, tier_main);
}

int main(void) {
  g_port = 20000 + (int)(getpid() % 10000) * 4 + 1;
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_shm_every_collective_four_processes),
      cmocka_unit_test(test_shm_every_collective_three_processes),
      cmocka_unit_test(test_shm_compressed_four_processes),
      cmocka_unit_test(test_shm_compressed_three_processes),
      cmocka_unit_test(test_shm_mismatch_fails_every_rank),
      cmocka_unit_test(test_shm_missing_rank_times_out),
      cmocka_unit_test(test_shm_dead_peer_is_detected),
      cmocka_unit_test(test_shm_abort_wakes_peers),
      cmocka_unit_test(test_link_tier_moves_one_shot_threshold),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
