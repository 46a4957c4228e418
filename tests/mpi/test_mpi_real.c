/* The MPI plugin against the real Open MPI, one process per rank:
 *   mpirun --allow-run-as-root --oversubscribe -np 4 test_mpi_real
 * Drives the plugin's comm table (bp_plugin_vtable) on host pointers and
 * on its own streams and buffers: every collective, every numeric dtype
 * and reduction, sizes 0, 1, 7 and 1000, in place and out of place,
 * against exact references (mpi_test_values.h); then split, groups,
 * mismatches, a timeout and an abort. Every rank runs every test; a
 * failure on any rank fails mpirun. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <pthread.h>

#include <cmocka.h>
#include <mpi.h>

#include "backplane/plugin.h"
#include "bp_mpi_bootstrap.h"
#include "mpi_test_context.h"
#include "mpi_test_values.h"

static struct {
  void* ctx;
  const bp_plugin_vtable_t* vt;
  const bpp_comm_table_t* cm;
  bpp_instance_t inst;
  bpp_device_t dev;
  bp_bootstrap_t boot;
  bpp_comm_t comm;
  int rank, size;
} E;

static const int64_t k_sizes[] = {0, 1, 7, 1000};
#define NSIZES (sizeof k_sizes / sizeof k_sizes[0])

static bpp_comm_t make_comm(uint64_t timeout_ns) {
  bp_comm_create_info_t info = {.struct_size = sizeof info, .timeout_ns = timeout_ns,
                                .bootstrap = &E.boot};
  bpp_comm_t c = NULL;
  assert_int_equal(E.cm->comm_create(E.dev, &info, &c), BP_OK);
  assert_non_null(c);
  return c;
}

static int setup(void** state) {
  (void)state;
  MPI_Comm_rank(MPI_COMM_WORLD, &E.rank);
  MPI_Comm_size(MPI_COMM_WORLD, &E.size);
  if (!(E.vt = mpi_test_open(&E.ctx))) return -1;
  E.cm = E.vt->comm;
  bpp_instance_create_info_t ii = {.struct_size = sizeof ii};
  if (!E.cm || E.vt->core->instance_create(&ii, &E.inst) != BP_OK ||
      E.vt->core->device_open(E.inst, 0, &E.dev) != BP_OK || bp_mpi_bootstrap_create(&E.boot))
    return -1;
  E.comm = make_comm(0);
  return 0;
}

static int teardown(void** state) {
  (void)state;
  E.cm->comm_destroy(E.comm);
  E.vt->core->device_close(E.dev);
  E.vt->core->instance_destroy(E.inst);
  bp_mpi_bootstrap_destroy(&E.boot);
  mpi_test_close(E.ctx);
  return 0;
}

static void* fill(uint32_t dtype, uint64_t n, uint64_t first) {
  unsigned char* p = malloc(n * bp_dtype_size(dtype) + 16);
  for (uint64_t i = 0; i < n; i++) tv_set(dtype, p, i, tv_value(dtype, E.rank, first + i));
  return p;
}

static void* sentinel(uint32_t dtype, uint64_t n) {
  unsigned char* p = malloc(n * bp_dtype_size(dtype) + 16);
  memset(p, 0x5a, n * bp_dtype_size(dtype) + 16);
  return p;
}

#define EXPECT(dt, p, i, want)                                                                  \
  do {                                                                                          \
    double got_ = tv_get((dt), (p), (i)), want_ = (want);                                       \
    if (got_ != want_) {                                                                        \
      fprintf(stderr, "rank %d: %s element %llu: got %g, want %g (%s:%d)\n", E.rank,            \
              bp_dtype_name(dt), (unsigned long long)(i), got_, want_, __FILE__, __LINE__);     \
      fail();                                                                                   \
    }                                                                                           \
  } while (0)

/* One case: a dtype, a reduction (SUM only for moves), a size and in
 * place or not. */
typedef struct tcase {
  uint32_t dt, op;
  int64_t n;
  int inplace;
} tcase_t;

/* Runs fn over every dtype, reduction (or none), size and placement. */
static void each_case(int reductions, void (*fn)(const tcase_t*)) {
  for (size_t d = 0; d < TEST_DTYPE_COUNT; d++)
    for (uint32_t op = BP_REDUCE_SUM; op <= (reductions ? BP_REDUCE_AVG : BP_REDUCE_SUM); op++)
      for (size_t s = 0; s < NSIZES; s++)
        for (int inplace = 0; inplace < 2; inplace++) {
          tcase_t c = {k_test_dtypes[d], op, k_sizes[s], inplace};
          fn(&c);
        }
}

/* ---- reductions ------------------------------------------------------------ */
static void all_reduce_case(const tcase_t* c) {
  uint32_t dt = c->dt;
  void* send = fill(dt, (uint64_t)c->n, 0);
  void* recv = c->inplace ? send : sentinel(dt, (uint64_t)c->n);
  bp_tensor_desc_t sd = bp_mpi_host_desc(send, dt, c->n), rd = bp_mpi_host_desc(recv, dt, c->n);
  assert_int_equal(E.cm->all_reduce(E.comm, NULL, &sd, &rd, c->op, NULL), BP_OK);
  for (int64_t i = 0; i < c->n; i++) EXPECT(dt, recv, i, tv_reduce(dt, c->op, E.size, i));
  if (!c->inplace) free(recv);
  free(send);
}
static void test_all_reduce(void** state) { each_case(1, all_reduce_case); }

static void reduce_case(const tcase_t* c) {
  uint32_t dt = c->dt;
  int root = E.size - 1;
  bp_collective_options_t o = {.struct_size = sizeof o, .root = root};
  void* send = fill(dt, (uint64_t)c->n, 0);
  void* recv = c->inplace ? send : sentinel(dt, (uint64_t)c->n);
  bp_tensor_desc_t sd = bp_mpi_host_desc(send, dt, c->n), rd = bp_mpi_host_desc(recv, dt, c->n);
  assert_int_equal(E.cm->reduce(E.comm, NULL, &sd, &rd, c->op, &o), BP_OK);
  for (int64_t i = 0; i < c->n; i++) {
    if (E.rank == root) EXPECT(dt, recv, i, tv_reduce(dt, c->op, E.size, i));
    else if (!c->inplace) assert_int_equal(((unsigned char*)recv)[0], 0x5a); /* untouched */
  }
  if (!c->inplace) free(recv);
  free(send);
}
static void test_reduce(void** state) { each_case(1, reduce_case); }

static void reduce_scatter_case(const tcase_t* c) {
  uint32_t dt = c->dt;
  int64_t n = c->n;
  size_t es = bp_dtype_size(dt);
  void* send = fill(dt, (uint64_t)(n * E.size), 0);
  /* In place: recv is this rank's block of send (NCCL's rule). */
  void* recv = c->inplace ? (char*)send + (size_t)(E.rank * n) * es : sentinel(dt, (uint64_t)n);
  bp_tensor_desc_t sd = bp_mpi_host_desc(send, dt, n * E.size), rd = bp_mpi_host_desc(recv, dt, n);
  assert_int_equal(E.cm->reduce_scatter(E.comm, NULL, &sd, &rd, c->op, NULL), BP_OK);
  for (int64_t i = 0; i < n; i++)
    EXPECT(dt, recv, i, tv_reduce(dt, c->op, E.size, (uint64_t)(E.rank * n + i)));
  if (!c->inplace) free(recv);
  free(send);
}
static void test_reduce_scatter(void** state) { each_case(1, reduce_scatter_case); }

/* ---- moves ---------------------------------------------------------------- */
static void moves_case(const tcase_t* c) {
  uint32_t dt = c->dt;
  int64_t n = c->n;
  int inplace = c->inplace, root = 1 % E.size;
  size_t es = bp_dtype_size(dt);
  bp_collective_options_t o = {.struct_size = sizeof o, .root = root};
  /* broadcast: the root's values reach every rank */
  void* send = fill(dt, (uint64_t)n, 0);
  void* recv = inplace ? send : sentinel(dt, (uint64_t)n);
  bp_tensor_desc_t sd = bp_mpi_host_desc(send, dt, n), rd = bp_mpi_host_desc(recv, dt, n);
  assert_int_equal(E.cm->broadcast(E.comm, NULL, &sd, &rd, &o), BP_OK);
  for (int64_t i = 0; i < n; i++) EXPECT(dt, recv, i, tv_value(dt, root, (uint64_t)i));
  if (!inplace) free(recv);
  free(send);
  /* all_gather: rank r's block at r * n */
  unsigned char* all = sentinel(dt, (uint64_t)(n * E.size));
  send = inplace ? all + (size_t)(E.rank * n) * es : fill(dt, (uint64_t)n, 0);
  if (inplace)
    for (int64_t i = 0; i < n; i++) tv_set(dt, send, i, tv_value(dt, E.rank, i));
  sd = bp_mpi_host_desc(send, dt, n);
  rd = bp_mpi_host_desc(all, dt, n * E.size);
  assert_int_equal(E.cm->all_gather(E.comm, NULL, &sd, &rd, NULL), BP_OK);
  for (int r = 0; r < E.size; r++)
    for (int64_t i = 0; i < n; i++) EXPECT(dt, all, r * n + i, tv_value(dt, r, i));
  if (!inplace) free(send);
  free(all);
  /* all_to_all: block p of rank q lands as block q on rank p */
  send = fill(dt, (uint64_t)(n * E.size), 0);
  recv = inplace ? send : sentinel(dt, (uint64_t)(n * E.size));
  sd = bp_mpi_host_desc(send, dt, n * E.size);
  rd = bp_mpi_host_desc(recv, dt, n * E.size);
  assert_int_equal(E.cm->all_to_all(E.comm, NULL, &sd, &rd, NULL), BP_OK);
  for (int q = 0; q < E.size; q++)
    for (int64_t i = 0; i < n; i++)
      EXPECT(dt, recv, q * n + i, tv_value(dt, q, (uint64_t)(E.rank * n + i)));
  if (!inplace) free(recv);
  free(send);
}
static void test_broadcast_and_gather(void** state) { each_case(0, moves_case); }

/* Rank r sends c(r, p) elements to rank p. */
static uint64_t vcount(int r, int p) { return (uint64_t)((r + 2 * p) % 3) * 5u + (uint64_t)p; }

static void test_all_to_allv(void** state) {
  int n = E.size;
  uint64_t sc[64], sdp[64], rc[64], rdp[64], stot = 0, rtot = 0;
  for (int p = 0; p < n; p++) {
    sc[p] = vcount(E.rank, p);
    sdp[p] = stot;
    stot += sc[p];
    rc[p] = vcount(p, E.rank);
    rdp[p] = rtot + 1; /* a gap before each block */
    rtot += rc[p] + 1;
  }
  uint32_t dt = BP_DTYPE_I32;
  int32_t* send = fill(dt, stot, 0);
  int32_t* recv = sentinel(dt, rtot);
  bp_tensor_desc_t sd = bp_mpi_host_desc(send, dt, (int64_t)stot), rd = bp_mpi_host_desc(recv, dt, (int64_t)rtot);
  assert_int_equal(E.cm->all_to_allv(E.comm, NULL, &sd, sc, sdp, &rd, rc, rdp, NULL), BP_OK);
  for (int q = 0; q < n; q++) {
    uint64_t qoff = 0; /* where q's block for this rank starts in q's send */
    for (int p = 0; p < E.rank; p++) qoff += vcount(q, p);
    for (uint64_t i = 0; i < rc[q]; i++) EXPECT(dt, recv, rdp[q] + i, tv_value(dt, q, qoff + i));
    assert_int_equal(((unsigned char*)&recv[rdp[q] - 1])[0], 0x5a); /* the gap */
  }
  /* In place (one buffer for both): the blocks land, the gaps keep what
   * they held. */
  uint64_t len = stot > rtot ? stot : rtot;
  int32_t* both = fill(dt, len, 0);
  int32_t* before = fill(dt, len, 0);
  sd = bp_mpi_host_desc(both, dt, (int64_t)stot);
  rd = bp_mpi_host_desc(both, dt, (int64_t)rtot);
  assert_int_equal(E.cm->all_to_allv(E.comm, NULL, &sd, sc, sdp, &rd, rc, rdp, NULL), BP_OK);
  for (int q = 0; q < n; q++) {
    uint64_t qoff = 0;
    for (int p = 0; p < E.rank; p++) qoff += vcount(q, p);
    for (uint64_t i = 0; i < rc[q]; i++) EXPECT(dt, both, rdp[q] + i, tv_value(dt, q, qoff + i));
    assert_int_equal(both[rdp[q] - 1], before[rdp[q] - 1]);
  }
  free(both);
  free(before);
  sd = bp_mpi_host_desc(send, dt, (int64_t)stot);
  /* Counts that disagree between a pair fail on every rank. */
  if (E.rank == 0 && n > 1) rc[1] += 1;
  rd = bp_mpi_host_desc(recv, dt, (int64_t)rtot + 1);
  assert_int_equal(E.cm->all_to_allv(E.comm, NULL, &sd, sc, sdp, &rd, rc, rdp, NULL),
                   n > 1 ? BP_INVALID_ARGUMENT : BP_OK);
  free(send);
  free(recv);
}

static void test_send_recv_group_and_barrier(void** state) {
  int n = E.size, next = (E.rank + 1) % n, prev = (E.rank + n - 1) % n;
  uint32_t dt = BP_DTYPE_F64;
  double* out = fill(dt, 333, 0);
  double* in = sentinel(dt, 333);
  bp_tensor_desc_t od = bp_mpi_host_desc(out, dt, 333), id = bp_mpi_host_desc(in, dt, 333);
  bp_collective_options_t to = {.struct_size = sizeof to, .peer = next};
  bp_collective_options_t from = {.struct_size = sizeof from, .peer = prev};
  /* A ring: every rank sends and receives; one by one it could deadlock,
   * in a (nested) group it completes. */
  assert_int_equal(E.cm->group_begin(), BP_OK);
  assert_int_equal(E.cm->group_begin(), BP_OK);
  assert_int_equal(E.cm->send(E.comm, NULL, &od, &to), BP_OK);
  assert_int_equal(E.cm->recv(E.comm, NULL, &id, &from), BP_OK);
  assert_int_equal(E.cm->group_end(), BP_OK);
  for (int i = 0; i < 333; i++) assert_int_equal(((unsigned char*)in)[0], 0x5a); /* not yet */
  assert_int_equal(E.cm->group_end(), BP_OK);
  for (int i = 0; i < 333; i++) EXPECT(dt, in, i, tv_value(dt, prev, i));
  assert_int_equal(E.cm->group_end(), BP_FAILED_PRECONDITION);
  assert_int_equal(E.cm->barrier(E.comm, NULL), BP_OK);
  free(out);
  free(in);
}

/* Buffers of the plugin's device and a collective ordered on its stream. */
static void test_stream_ordered(void** state) {
  const bpp_core_table_t* core = E.vt->core;
  bpp_stream_t s = NULL;
  bpp_buffer_t b = NULL;
  bp_stream_create_info_t si = {.struct_size = sizeof si};
  bp_buffer_alloc_info_t ai = {.struct_size = sizeof ai, .size_bytes = 4096 * sizeof(float)};
  assert_int_equal(core->stream_create(E.dev, &si, &s), BP_OK);
  assert_int_equal(core->buffer_allocate(E.dev, &ai, &b), BP_OK);
  float* p = NULL;
  assert_int_equal(core->buffer_map(b, 0, ai.size_bytes, (void**)&p), BP_OK);
  for (int i = 0; i < 4096; i++) p[i] = (float)(E.rank + i);
  bp_tensor_desc_t d = bp_mpi_host_desc(NULL, BP_DTYPE_F32, 4096);
  d.buffer = b;
  d.byte_offset = 0;
  bpp_comm_t c2 = make_comm(0);
  void* reg = NULL;
  assert_int_equal(E.cm->comm_register(c2, b, &reg), BP_OK);
  for (int k = 0; k < 3; k++) assert_int_equal(E.cm->all_reduce(c2, s, &d, &d, BP_REDUCE_SUM, NULL), BP_OK);
  assert_int_equal(core->stream_synchronize(s), BP_OK);
  double base = 0;
  for (int r = 0; r < E.size; r++) base += r;
  double mult = (double)E.size * E.size; /* three sums: x * size^2 after the first */
  for (int i = 0; i < 4096; i += 511) assert_true(p[i] == (float)((base + (double)E.size * i) * mult));
  assert_int_equal(E.cm->comm_deregister(c2, reg), BP_OK);
  assert_int_equal(E.cm->comm_deregister(c2, NULL), BP_INVALID_ARGUMENT);
  E.cm->comm_destroy(c2);
  core->buffer_unmap(b);
  core->buffer_release(b);
  core->stream_destroy(s);
}

/* The application API (comm.h) on mpi:0: the core calls this plugin's
 * table with its own tensors and streams. */
/* bp_comm_create(mpi:0, bootstrap) through the application API, then an
 * all_reduce whose sums are exact. */
static void check_application_api(const bp_bootstrap_t* bootstrap) {
  float out[1000];
  int32_t rank = -1, size = -1;
  uint32_t tier = 0;
  assert_int_equal(mpi_test_app_all_reduce(E.ctx, bootstrap, 1000, out, &rank, &size, &tier),
                   BP_OK);
  assert_int_equal(rank, E.rank);
  assert_int_equal(size, E.size);
  assert_int_equal(tier, BP_COMM_TIER_NATIVE);
  double base = 0;
  for (int r = 0; r < E.size; r++) base += r;
  for (int i = 0; i < 1000; i++) assert_true(out[i] == (float)(base + (double)E.size * i));
}

static void test_application_api(void** state) {
  (void)state;
  check_application_api(&E.boot);
}

/* A NULL bootstrap: the launcher's world from the mpi plugin itself, with
 * no other plugin loaded (as bp-conform --backend mpi asks for it under
 * mpirun). */
static void test_application_api_launcher_world(void** state) {
  (void)state;
  check_application_api(NULL);
}

/* ---- errors ------------------------------------------------------------------ */
static void test_mismatch_fails_everywhere(void** state) {
  float buf[16] = {0};
  int64_t n = 5 + (E.rank == E.size - 1);
  bp_tensor_desc_t d = bp_mpi_host_desc(buf, BP_DTYPE_F32, n);
  bp_status_t want = E.size > 1 ? BP_INVALID_ARGUMENT : BP_OK;
  assert_int_equal(E.cm->all_reduce(E.comm, NULL, &d, &d, BP_REDUCE_SUM, NULL), want);
  d = bp_mpi_host_desc(buf, E.rank == 0 ? BP_DTYPE_I32 : BP_DTYPE_F32, 4);
  assert_int_equal(E.cm->all_reduce(E.comm, NULL, &d, &d, BP_REDUCE_SUM, NULL), want);
  /* One rank's invalid arguments fail the call on every rank. */
  bp_tensor_desc_t bad = bp_mpi_host_desc(buf, BP_DTYPE_F32, 4);
  if (E.rank == 0) bad.strides[0] = 2;
  assert_int_equal(E.cm->all_reduce(E.comm, NULL, &bad, &bad, BP_REDUCE_SUM, NULL),
                   E.rank == 0 ? BP_INVALID_ARGUMENT : want);
  bp_collective_options_t o = {.struct_size = sizeof o, .root = E.rank == 0 ? 0 : E.size - 1};
  d = bp_mpi_host_desc(buf, BP_DTYPE_F32, 4);
  assert_int_equal(E.cm->broadcast(E.comm, NULL, &d, &d, &o), want);
  /* The communicator still works. */
  for (int i = 0; i < 4; i++) buf[i] = 1.0f;
  assert_int_equal(E.cm->all_reduce(E.comm, NULL, &d, &d, BP_REDUCE_SUM, NULL), BP_OK);
  assert_true(buf[3] == (float)E.size);
  assert_int_equal(E.cm->comm_get_async_error(E.comm), BP_OK);
  /* Too many elements for MPI's int counts. */
  d = bp_mpi_host_desc(buf, BP_DTYPE_F32, (int64_t)1 << 31);
  assert_int_equal(E.cm->all_reduce(E.comm, NULL, &d, &d, BP_REDUCE_SUM, NULL), BP_OUT_OF_RANGE);
  assert_int_equal(E.cm->all_reduce(NULL, NULL, &d, &d, BP_REDUCE_SUM, NULL), BP_INVALID_ARGUMENT);
}

/* Compressed all_reduce (int8 and fp8 blocks): within the bound of the
 * inputs' encodings plus the sum's (docs/collectives.md: 2n x A_b / 254,
 * or 2n x A_b (1/16 + 1/458752) for e4m3fn), the same on every rank; a
 * mismatched compression fails everywhere; broadcast refuses it. */
static float cvalue(int r, int i) { return (float)((i % 13) - 6) * 0.37f + (float)r * 0.11f; }
static void test_compressed_all_reduce(void** state) {
  (void)state;
  enum { N = 1000, BLOCK = 64 };
  static const uint32_t comps[] = {BP_DTYPE_I8, BP_DTYPE_F8E4M3FN};
  for (int k = 0; k < 2; ++k) {
    float buf[N], first[N];
    for (int i = 0; i < N; ++i) buf[i] = cvalue(E.rank, i);
    bp_tensor_desc_t d = bp_mpi_host_desc(buf, BP_DTYPE_F32, N);
    bp_collective_options_t o = {.struct_size = sizeof o, .compression = comps[k],
                                 .compression_block = BLOCK};
    assert_int_equal(E.cm->all_reduce(E.comm, NULL, &d, &d, BP_REDUCE_SUM, &o), BP_OK);
    for (int i = 0; i < N; ++i) {
      double exact = 0, amax = 0;
      for (int r = 0; r < E.size; ++r) {
        exact += cvalue(r, i);
        for (int j = i / BLOCK * BLOCK; j < (i / BLOCK + 1) * BLOCK && j < N; ++j) {
          const double a = cvalue(r, j) < 0 ? -cvalue(r, j) : cvalue(r, j);
          if (a > amax) amax = a;
        }
      }
      const double per = comps[k] == BP_DTYPE_I8 ? amax / 254.0 : amax * (1.0 / 16 + 1.0 / 458752);
      const double err = buf[i] - exact;
      const double bound = 2.0 * E.size * per * 1.0001 + 1e-6;
      if (err > bound || -err > bound)
        fail_msg("rank %d comp %u [%d]: got %g, exact %g", E.rank, comps[k], i, buf[i], exact);
    }
    /* Every rank holds the same values: rank 0's, broadcast. */
    memcpy(first, buf, sizeof buf);
    bp_tensor_desc_t f = bp_mpi_host_desc(first, BP_DTYPE_F32, N);
    bp_collective_options_t root0 = {.struct_size = sizeof root0, .root = 0};
    assert_int_equal(E.cm->broadcast(E.comm, NULL, &f, &f, &root0), BP_OK);
    assert_memory_equal(first, buf, sizeof buf);
  }
  /* Ranks disagreeing on the block fail together; broadcast refuses it. */
  float small[300] = {0};
  bp_tensor_desc_t d = bp_mpi_host_desc(small, BP_DTYPE_F32, 300);
  bp_collective_options_t o = {.struct_size = sizeof o, .compression = BP_DTYPE_I8,
                               .compression_block = E.rank == 0 ? 32 : 64};
  assert_int_equal(E.cm->all_reduce(E.comm, NULL, &d, &d, BP_REDUCE_SUM, &o),
                   E.size > 1 ? BP_INVALID_ARGUMENT : BP_OK);
  o.compression_block = 64;
  assert_int_equal(E.cm->broadcast(E.comm, NULL, &d, &d, &o), BP_INVALID_ARGUMENT);
  assert_int_equal(E.cm->comm_get_async_error(E.comm), BP_OK);
}

/* The largest |cvalue(r, j)| of block `blk` of `block` elements (of n). */
static double block_amax(int r, int blk, int block, int n) {
  double amax = 0;
  for (int j = blk * block; j < (blk + 1) * block && j < n; ++j) {
    const double a = cvalue(r, j) < 0 ? -cvalue(r, j) : cvalue(r, j);
    if (a > amax) amax = a;
  }
  return amax;
}

/* Compressed all_gather (each rank's block within A_b / 254 of its input)
 * and reduce_scatter SUM (within n A_b / 254), with a tail block. */
static void test_compressed_gather_and_scatter(void** state) {
  (void)state;
  enum { M = 300, BLOCK = 64 };
  const int n = E.size;
  float* in = malloc(sizeof(float) * M * (size_t)n);
  float* out = malloc(sizeof(float) * M * (size_t)n);
  for (int i = 0; i < M; ++i) in[i] = cvalue(E.rank, i);
  bp_collective_options_t o = {.struct_size = sizeof o, .compression = BP_DTYPE_I8,
                               .compression_block = BLOCK};
  bp_tensor_desc_t sd = bp_mpi_host_desc(in, BP_DTYPE_F32, M);
  bp_tensor_desc_t rd = bp_mpi_host_desc(out, BP_DTYPE_F32, (int64_t)M * n);
  assert_int_equal(E.cm->all_gather(E.comm, NULL, &sd, &rd, &o), BP_OK);
  for (int r = 0; r < n; ++r)
    for (int i = 0; i < M; ++i) {
      const double err = out[r * M + i] - cvalue(r, i);
      const double bound = block_amax(r, i / BLOCK, BLOCK, M) / 254.0 * 1.0001 + 1e-7;
      if (err > bound || -err > bound)
        fail_msg("all_gather rank %d [%d][%d]: got %g, exact %g", E.rank, r, i, out[r * M + i],
                 cvalue(r, i));
    }
  /* reduce_scatter: rank r's input is n blocks of M, block q holding
   * cvalue(r, q * M + i). */
  for (int i = 0; i < M * n; ++i) in[i] = cvalue(E.rank, i);
  sd = bp_mpi_host_desc(in, BP_DTYPE_F32, (int64_t)M * n);
  rd = bp_mpi_host_desc(out, BP_DTYPE_F32, M);
  assert_int_equal(E.cm->reduce_scatter(E.comm, NULL, &sd, &rd, BP_REDUCE_SUM, &o), BP_OK);
  for (int i = 0; i < M; ++i) {
    const int g = E.rank * M + i;
    double exact = 0, amax = 0;
    for (int r = 0; r < n; ++r) {
      exact += cvalue(r, g);
      /* The block is counted from the start of this rank's part. */
      double a = 0;
      for (int j = E.rank * M + i / BLOCK * BLOCK; j < E.rank * M + (i / BLOCK + 1) * BLOCK &&
                                                   j < (E.rank + 1) * M; ++j) {
        const double v = cvalue(r, j) < 0 ? -cvalue(r, j) : cvalue(r, j);
        if (v > a) a = v;
      }
      if (a > amax) amax = a;
    }
    const double err = out[i] - exact, bound = n * amax / 254.0 * 1.0001 + 1e-6;
    if (err > bound || -err > bound)
      fail_msg("reduce_scatter rank %d [%d]: got %g, exact %g", E.rank, i, out[i], exact);
  }
  free(in);
  free(out);
}

/* The compressed pipeline (plugins/mpi/mpi_compress.c) on communicators
 * of 4, 3 and 2 ranks (world, then splits), odd sizes with tail blocks,
 * pieces of 16 elements (BACKPLANE_MPI_COMPRESS_PIECE=4, blocks of 8:
 * dozens of pieces in flight) against the same calls in one piece: the
 * same bits, since pieces are whole blocks quantized as before and sums
 * keep rank order. In place and out of place; ranks that disagree on the
 * piece fail together. */
static void compressed_calls(bpp_comm_t c, int n, uint32_t comp, int in_place, float* out) {
  enum { N = 517, BLOCK = 8 };
  const int me = E.rank;
  float* in = malloc(sizeof(float) * N * 4);
  for (int i = 0; i < N * n; ++i) in[i] = cvalue(me, i) * (i % 7 == 3 ? 9.0f : 1.0f);
  bp_collective_options_t o = {.struct_size = sizeof o, .compression = comp,
                               .compression_block = BLOCK};
  /* all_reduce of N, then all_gather of N per rank, then reduce_scatter of
   * N per rank: out[0 .. N), out[N .. N + N n), out[N + N n .. + N). */
  float* ar = out;
  memcpy(ar, in, sizeof(float) * N);
  bp_tensor_desc_t a = bp_mpi_host_desc(in, BP_DTYPE_F32, N), ra = bp_mpi_host_desc(ar, BP_DTYPE_F32, N);
  assert_int_equal(E.cm->all_reduce(c, NULL, in_place ? &ra : &a, &ra, BP_REDUCE_SUM, &o), BP_OK);
  float* ag = out + N;
  bp_tensor_desc_t g = bp_mpi_host_desc(in, BP_DTYPE_F32, N),
                   rg = bp_mpi_host_desc(ag, BP_DTYPE_F32, (int64_t)N * n);
  assert_int_equal(E.cm->all_gather(c, NULL, &g, &rg, &o), BP_OK);
  float* rs = out + N + N * n;
  bp_tensor_desc_t s = bp_mpi_host_desc(in, BP_DTYPE_F32, (int64_t)N * n),
                   rr = bp_mpi_host_desc(rs, BP_DTYPE_F32, N);
  assert_int_equal(E.cm->reduce_scatter(c, NULL, &s, &rr, BP_REDUCE_AVG, &o), BP_OK);
  free(in);
}

static void test_compressed_pipeline(void** state) {
  (void)state;
  enum { N = 517, TOTAL = N + N * 4 + N };
  float* one = malloc(sizeof(float) * TOTAL);
  float* many = malloc(sizeof(float) * TOTAL);
  /* world (4 ranks), then ranks 0-2 (3) and ranks 0-1 (2). */
  for (int shape = 0; shape < 3; ++shape) {
    const int members = shape == 0 ? E.size : shape == 1 ? 3 : 2;
    if (E.size < members) continue;
    bpp_comm_t sub = E.comm;
    if (shape > 0) {
      const int color = E.rank < members ? 0 : BP_COMM_SPLIT_NO_COLOR;
      assert_int_equal(E.cm->comm_split(E.comm, color, E.rank, NULL, &sub), BP_OK);
      if (!sub) continue;
    }
    for (int k = 0; k < 2; ++k) {
      const uint32_t comp = k ? BP_DTYPE_F8E4M3FN : BP_DTYPE_I8;
      for (int in_place = 0; in_place < 2; ++in_place) {
        memset(one, 0, sizeof(float) * TOTAL);
        memset(many, 0, sizeof(float) * TOTAL);
        setenv("BACKPLANE_MPI_COMPRESS_PIECE", "24", 1);
        compressed_calls(sub, members, comp, in_place, one);
        setenv("BACKPLANE_MPI_COMPRESS_PIECE", "4", 1);
        compressed_calls(sub, members, comp, in_place, many);
        unsetenv("BACKPLANE_MPI_COMPRESS_PIECE");
        const int used = N + N * members + N;
        for (int i = 0; i < used; ++i)
          if (memcmp(&one[i], &many[i], sizeof(float)) != 0)
            fail_msg("rank %d of %d, comp %u, in place %d: [%d] is %a in pieces, %a in one",
                     E.rank, members, comp, in_place, i, many[i], one[i]);
        /* Within the bound (the sum against the exact one, loosely: the
         * exact bound is checked by the tests above). */
        double exact = 0;
        for (int r = 0; r < members; ++r) exact += cvalue(r, 5) * 1.0;
        assert_true(fabs(many[5] - exact) < 0.2 * members);
      }
    }
    /* Ranks that disagree on the piece fail together, before data moves. */
    float x[64] = {0};
    bp_tensor_desc_t d = bp_mpi_host_desc(x, BP_DTYPE_F32, 64);
    bp_collective_options_t o = {.struct_size = sizeof o, .compression = BP_DTYPE_I8,
                                 .compression_block = 8};
    setenv("BACKPLANE_MPI_COMPRESS_PIECE", E.rank == 0 ? "5" : "6", 1);
    assert_int_equal(E.cm->all_reduce(sub, NULL, &d, &d, BP_REDUCE_SUM, &o),
                     members > 1 ? BP_INVALID_ARGUMENT : BP_OK);
    unsetenv("BACKPLANE_MPI_COMPRESS_PIECE");
    assert_int_equal(E.cm->all_reduce(sub, NULL, &d, &d, BP_REDUCE_SUM, &o), BP_OK);
    if (shape > 0) E.cm->comm_destroy(sub);
  }
  free(one);
  free(many);
}

static void test_split(void** state) {
  int color = E.rank == E.size - 1 && E.size > 1 ? BP_COMM_SPLIT_NO_COLOR : E.rank % 2;
  bpp_comm_t sub = (bpp_comm_t)1;
  assert_int_equal(E.cm->comm_split(E.comm, color, -E.rank, NULL, &sub), BP_OK);
  if (color == BP_COMM_SPLIT_NO_COLOR) {
    assert_null(sub);
    return;
  }
  assert_non_null(sub);
  int members = 0, pos = 0; /* key -rank: ordered by descending old rank */
  for (int r = 0; r < E.size; r++)
    if (!(r == E.size - 1 && E.size > 1) && r % 2 == color) members++;
  for (int r = E.rank + 1; r < E.size; r++)
    if (!(r == E.size - 1 && E.size > 1) && r % 2 == color) pos++;
  int32_t v[2] = {1, E.rank}, w[2] = {0, 0};
  bp_tensor_desc_t sd = bp_mpi_host_desc(v, BP_DTYPE_I32, 2), rd = bp_mpi_host_desc(w, BP_DTYPE_I32, 2);
  assert_int_equal(E.cm->all_reduce(sub, NULL, &sd, &rd, BP_REDUCE_SUM, NULL), BP_OK);
  assert_int_equal(w[0], members);
  /* Its rank 0 has the highest old rank: a broadcast from 0 shows it. */
  bp_collective_options_t o = {.struct_size = sizeof o, .root = 0};
  int32_t who = E.rank;
  bp_tensor_desc_t bd = bp_mpi_host_desc(&who, BP_DTYPE_I32, 1);
  assert_int_equal(E.cm->broadcast(sub, NULL, &bd, &bd, &o), BP_OK);
  if (pos == 0) assert_int_equal(who, E.rank);
  else assert_true(who > E.rank);
  E.cm->comm_destroy(sub);
}

static void test_timeout_breaks_the_communicator(void** state) {
  if (E.size < 2) skip();
  bpp_comm_t c = make_comm(300u * 1000000u);
  if (E.rank != 0) { /* rank 0 does not arrive in time */
    uint64_t t0 = (uint64_t)time(NULL);
    assert_int_equal(E.cm->barrier(c, NULL), BP_DEADLINE_EXCEEDED);
    assert_true((uint64_t)time(NULL) - t0 < 10);
    assert_int_equal(E.cm->comm_get_async_error(c), BP_DEADLINE_EXCEEDED);
    assert_int_equal(E.cm->barrier(c, NULL), BP_DEADLINE_EXCEEDED); /* broken for good */
  }
  MPI_Barrier(MPI_COMM_WORLD);
  /* Late, rank 0 completes the exchange the others abandoned (they keep
   * its buffers until comm_destroy sees it done). */
  if (E.rank == 0) assert_int_equal(E.cm->barrier(c, NULL), BP_OK);
  MPI_Barrier(MPI_COMM_WORLD);
  E.cm->comm_destroy(c);
}

static void* abort_later(void* c) {
  struct timespec ts = {0, 100 * 1000000};
  nanosleep(&ts, NULL);
  E.cm->comm_abort(c);
  return NULL;
}

static void test_abort_wakes_a_waiting_call(void** state) {
  if (E.size < 2) skip();
  bpp_comm_t c = make_comm(0); /* the default, 300 s: only the abort ends the wait */
  float x = 1;
  bp_tensor_desc_t d = bp_mpi_host_desc(&x, BP_DTYPE_F32, 1);
  if (E.rank == 1) {
    pthread_t t;
    pthread_create(&t, NULL, abort_later, c);
    assert_int_equal(E.cm->all_reduce(c, NULL, &d, &d, BP_REDUCE_SUM, NULL), BP_ABORTED);
    pthread_join(t, NULL);
    assert_int_equal(E.cm->comm_get_async_error(c), BP_ABORTED);
    assert_int_equal(E.cm->barrier(c, NULL), BP_ABORTED);
  }
  MPI_Barrier(MPI_COMM_WORLD);
  /* The others arrive after the abort: the exchange rank 1 abandoned still
   * completes in MPI, with rank 1's value. */
  if (E.rank != 1) {
    assert_int_equal(E.cm->all_reduce(c, NULL, &d, &d, BP_REDUCE_SUM, NULL), BP_OK);
    assert_true(x == (float)E.size);
  }
  MPI_Barrier(MPI_COMM_WORLD);
  E.cm->comm_destroy(c);
}

int main(void) {
  int provided = 0;
  MPI_Init_thread(NULL, NULL, MPI_THREAD_MULTIPLE, &provided);
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_all_reduce),
      cmocka_unit_test(test_reduce),
      cmocka_unit_test(test_reduce_scatter),
      cmocka_unit_test(test_broadcast_and_gather),
      cmocka_unit_test(test_all_to_allv),
      cmocka_unit_test(test_send_recv_group_and_barrier),
      cmocka_unit_test(test_stream_ordered),
      cmocka_unit_test(test_application_api),
      cmocka_unit_test(test_application_api_launcher_world),
      cmocka_unit_test(test_mismatch_fails_everywhere),
      cmocka_unit_test(test_compressed_all_reduce),
      cmocka_unit_test(test_compressed_gather_and_scatter),
      cmocka_unit_test(test_compressed_pipeline),
      cmocka_unit_test(test_split),
      cmocka_unit_test(test_timeout_breaks_the_communicator),
      cmocka_unit_test(test_abort_wakes_a_waiting_call),
  };
  int failed = cmocka_run_group_tests(tests, setup, teardown);
  /* A failure on one rank must not leave the others waiting. */
  int any = 0;
  MPI_Allreduce(&failed, &any, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  MPI_Finalize();
  return any ? 1 : 0;
}
