/* Running a batch of calls: count and header exchange, posting the
 * nonblocking MPI calls, polling them against the deadline and aborts,
 * and post-processing (mpi_internal.h gives the steps).
 *
 * Cost: every collective pays one MPI_Iallgather of a 128-byte header
 * record (nranks * 128 bytes gathered) before its data moves, except an
 * all_reduce of at most 64 bytes, whose data travels in the record, and a
 * barrier, which is the exchange; all_to_allv also an
 * MPI_Ialltoall of its counts. docs/backends/mpi.md measures it.
 */
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bp_kit.h"
#include "bp_kit_comm.h"
#include "mpi_internal.h"

/* A header record: 8 int64 fields, then BP_MPI_FUSED_BYTES of payload.
 * Every collective exchanges records of this one size, so ranks that
 * disagree about a call still exchange matching messages. */
#define HDR 16 /* int64 per record */
#define H_PAYLOAD 8
#define BP_MPI_FUSED_BYTES ((HDR - H_PAYLOAD) * 8u)
/* Up to this many ranks (BP_MPI_HEADER_P2P_MAX, default 8), records go by
 * point to point (one round of n - 1 messages each way); above, by
 * MPI_Iallgather (log2 n rounds). */
#define BP_MPI_HEADER_TAG 1
static int p2p_max(void) {
  static int cached = -1;
  int v = __atomic_load_n(&cached, __ATOMIC_RELAXED);
  if (v < 0) {
    uint64_t u = 8;
    (void)bp_plugin_parse_uint(bp_kit_host(), "BP_MPI_HEADER_P2P_MAX",
                               getenv("BP_MPI_HEADER_P2P_MAX"), 0, 1u << 20, 8, &u);
    v = (int)u;
    __atomic_store_n(&cached, v, __ATOMIC_RELAXED);
  }
  return v;
}
enum { H_KIND, H_DTYPE, H_COUNT, H_ROP, H_ROOT, H_OK, H_COMP };

/* A small all_reduce travels inside its header record and is reduced
 * locally, in rank order, on every rank (MPI_Reduce_local): one exchange
 * instead of two. A barrier is its header exchange alone (an allgather
 * completes on no rank before every rank has entered it). */
static int fused(const bp_mpi_op_t* op) {
  return op->kind == BP_MPI_ALL_REDUCE && !op->comp &&
         op->count * bp_dtype_size(op->dtype) <= BP_MPI_FUSED_BYTES;
}

uint64_t bp_mpi_now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

const char* bp_mpi_kind_name(uint32_t kind) {
  static const char* const k[] = {"?", "all_reduce", "broadcast", "reduce", "all_gather",
                                  "reduce_scatter", "all_to_all", "all_to_allv", "send", "recv",
                                  "barrier", "comm_split"};
  return kind < sizeof k / sizeof k[0] ? k[kind] : "?";
}

void bp_mpi_comm_break(struct bpp_comm_s* comm, bp_status_t status, const char* msg) {
  pthread_mutex_lock(&comm->lock);
  int expected = BP_OK;
  if (atomic_compare_exchange_strong(&comm->error, &expected, (int)status))
    snprintf(comm->error_msg, sizeof comm->error_msg, "%s", msg);
  pthread_mutex_unlock(&comm->lock);
}

/* The broken communicator's error, for a call that finds it. */
static bp_status_t broken(struct bpp_comm_s* comm, const char* what, uint64_t seq) {
  pthread_mutex_lock(&comm->lock);
  bp_status_t st = (bp_status_t)atomic_load(&comm->error);
  bp_status_t r = bp_kit_error(st, "mpi: %s (call %llu): the communicator is broken: %s", what,
                               (unsigned long long)seq, comm->error_msg);
  pthread_mutex_unlock(&comm->lock);
  return r;
}

bp_status_t bp_mpi_wait(struct bpp_comm_s* comm, bp_mpi_h* reqs, int n, bp_mpi_status_t* statuses,
                        uint64_t start_ns, const char* what, uint64_t seq) {
  uint64_t deadline = start_ns + comm->timeout_ns;
  for (uint64_t it = 0;; it++) {
    if (atomic_load_explicit(&comm->error, memory_order_acquire) != BP_OK)
      return broken(comm, what, seq);
    int flag = 0, rc;
    BP_MPI(rc, MPI_Testall, n, reqs, &flag, statuses);
    if (rc != BP_MPI_SUCCESS) {
      for (int i = 0; statuses && i < n; i++)
        if (statuses[i].error != BP_MPI_SUCCESS) rc = statuses[i].error;
      return bp_mpi_check(rc, what);
    }
    if (flag) return BP_OK;
    if ((it & 31) != 31) continue;
    uint64_t now = bp_mpi_now_ns();
    if (now > deadline) {
      char msg[200];
      snprintf(msg, sizeof msg,
               "%s (call %llu) did not complete within %llu ms: a rank is missing, behind, or "
               "called something else",
               what, (unsigned long long)seq, (unsigned long long)(comm->timeout_ns / 1000000u));
      bp_mpi_comm_break(comm, BP_DEADLINE_EXCEEDED, msg);
      return bp_kit_error(BP_DEADLINE_EXCEEDED, "mpi: %s", msg);
    }
    /* Spin first (latency), then let oversubscribed ranks run. */
    if (now - start_ns > 50000000u) nanosleep(&(struct timespec){0, 20000}, NULL);
    else if (now - start_ns > 1000000u) sched_yield();
  }
}

static uint64_t elem_bytes(const bp_mpi_op_t* op) { return bp_dtype_size(op->dtype); }

static int overlaps(const void* a, uint64_t an, const void* b, uint64_t bn) {
  const unsigned char *x = a, *y = b;
  return an && bn && x < y + bn && y < x + an;
}

/* ---- step 1 and 2: counts and headers ----------------------------------- */
static bp_status_t post_alltoallv_counts(bp_mpi_op_t* op) {
  int n = op->comm->size, rc;
  op->counts_in = calloc((size_t)n, sizeof *op->counts_in);
  if (!op->counts_in) return bp_kit_error(BP_RESOURCE_EXHAUSTED, "mpi: out of host memory");
  BP_MPI(rc, MPI_Ialltoall, op->v, 1, bp_mpi.f.ompi_mpi_int64_t, op->counts_in, 1,
         bp_mpi.f.ompi_mpi_int64_t, op->comm->comm, &op->req[0]);
  op->nreq = rc == BP_MPI_SUCCESS;
  return bp_mpi_check(rc, "MPI_Ialltoall (all_to_allv counts)");
}

static void check_alltoallv_counts(bp_mpi_op_t* op) {
  if (op->local != BP_OK) return;
  const uint64_t* recv_counts = op->v + 2 * op->comm->size;
  for (int p = 0; p < op->comm->size; p++)
    if ((uint64_t)op->counts_in[p] != recv_counts[p]) {
      op->local = BP_INVALID_ARGUMENT;
      snprintf(op->local_msg, sizeof op->local_msg,
               "rank %d sends %lld elements to rank %d, which expects %llu", p,
               (long long)op->counts_in[p], op->comm->rank, (unsigned long long)recv_counts[p]);
      return;
    }
}

static bp_status_t post_header(bp_mpi_op_t* op) {
  int rc;
  /* The gathered records, then this rank's (MPI reads it until done). */
  op->hdr_all = calloc(((size_t)op->comm->size + 1) * HDR, sizeof *op->hdr_all);
  if (!op->hdr_all) return bp_kit_error(BP_RESOURCE_EXHAUSTED, "mpi: out of host memory");
  op->hdr = op->hdr_all + (size_t)op->comm->size * HDR;
  op->hdr[H_KIND] = op->kind;
  op->hdr[H_DTYPE] = op->dtype;
  /* all_to_allv's counts were checked pairwise (step 1). */
  op->hdr[H_COUNT] = op->kind == BP_MPI_ALL_TO_ALLV ? 0 : (int64_t)op->count;
  op->hdr[H_ROP] = op->rop;
  op->hdr[H_ROOT] = op->root;
  op->hdr[H_OK] = op->local == BP_OK;
  if (op->comp) op->piece_log2 = bp_mpi_piece_log2();
  op->hdr[H_COMP] = (int64_t)op->comp | (int64_t)op->block << 8 | (int64_t)op->piece_log2 << 40;
  if (op->local == BP_OK && fused(op) && op->count)
    memcpy(op->hdr + H_PAYLOAD, op->send, op->count * bp_dtype_size(op->dtype));
  int n = op->comm->size, me = op->comm->rank;
  if (n > 1 && n <= p2p_max()) {
    /* Small communicators: every record straight to every rank, one round
     * of eager messages (tag 1; the plugin's point to point uses tag 0). */
    memcpy(op->hdr_all + (size_t)me * HDR, op->hdr, HDR * sizeof *op->hdr);
    op->hreq = malloc(2u * (size_t)(n - 1) * sizeof *op->hreq);
    if (!op->hreq) return bp_kit_error(BP_RESOURCE_EXHAUSTED, "mpi: out of host memory");
    op->nreq = 0;
    rc = BP_MPI_SUCCESS;
    for (int p = 0; p < n && rc == BP_MPI_SUCCESS; p++)
      if (p != me) {
        BP_MPI(rc, MPI_Irecv, op->hdr_all + (size_t)p * HDR, HDR, bp_mpi.f.ompi_mpi_int64_t, p,
               BP_MPI_HEADER_TAG, op->comm->comm, &op->hreq[op->nreq]);
        op->nreq += rc == BP_MPI_SUCCESS;
      }
    for (int p = 0; p < n && rc == BP_MPI_SUCCESS; p++)
      if (p != me) {
        BP_MPI(rc, MPI_Isend, op->hdr, HDR, bp_mpi.f.ompi_mpi_int64_t, p, BP_MPI_HEADER_TAG,
               op->comm->comm, &op->hreq[op->nreq]);
        op->nreq += rc == BP_MPI_SUCCESS;
      }
    if (rc != BP_MPI_SUCCESS) op->abandoned = 1; /* what was posted may be pending */
    return bp_mpi_check(rc, "MPI_Isend/MPI_Irecv (call header)");
  }
  BP_MPI(rc, MPI_Iallgather, op->hdr, HDR, bp_mpi.f.ompi_mpi_int64_t, op->hdr_all, HDR,
         bp_mpi.f.ompi_mpi_int64_t, op->comm->comm, &op->req[0]);
  op->nreq = rc == BP_MPI_SUCCESS;
  return bp_mpi_check(rc, "MPI_Iallgather (call header)");
}

/* Every rank runs this on the same headers, so every rank decides alike. */
static bp_status_t verify_headers(bp_mpi_op_t* op) {
  const char* what = bp_mpi_kind_name(op->kind);
  unsigned long long seq = (unsigned long long)op->seq;
  if (op->local != BP_OK)
    return bp_kit_error(op->local, "mpi: %s (call %llu): %s", what, seq, op->local_msg);
  for (int r = 0; r < op->comm->size; r++) {
    const int64_t* h = op->hdr_all + (size_t)r * HDR;
    if (!h[H_OK]) {
      return bp_kit_error(BP_INVALID_ARGUMENT,
                          "mpi: %s (call %llu): rank %d's arguments were invalid (its own error "
                          "says why); no rank ran the call",
                          what, seq, r);
    }
  }
  const int64_t* a = op->hdr_all;
  static const char* const field[] = {"call", "dtype", "count", "reduction", "root"};
  for (int r = 1; r < op->comm->size; r++) {
    const int64_t* b = op->hdr_all + (size_t)r * HDR;
    if (a[H_COMP] != b[H_COMP])
      return bp_kit_error(BP_INVALID_ARGUMENT,
                          "mpi: mismatched %s (call %llu): compression %lld (dtype | block << 8 | "
                          "log2 piece << 40) "
                          "on rank 0 and %lld on rank %d; no rank ran the call",
                          what, seq, (long long)a[H_COMP], (long long)b[H_COMP], r);
    for (int f = H_KIND; f <= H_ROOT; f++)
      if (a[f] != b[f]) {
        if (f == H_KIND)
          return bp_kit_error(BP_INVALID_ARGUMENT,
                              "mpi: %s (call %llu): rank 0 called %s, rank %d called %s", what,
                              seq, bp_mpi_kind_name((uint32_t)a[f]), r,
                              bp_mpi_kind_name((uint32_t)b[f]));
        return bp_kit_error(BP_INVALID_ARGUMENT,
                            "mpi: mismatched %s (call %llu): %s is %lld on rank 0 and %lld on "
                            "rank %d; no rank ran the call",
                            what, seq, field[f], (long long)a[f], (long long)b[f], r);
      }
  }
  return BP_OK;
}

/* ---- step 3: the data ------------------------------------------------------ */
/* A fused all_reduce: recv = record 0 op record 1 op ... (rank order). */
static bp_status_t reduce_records(bp_mpi_op_t* op) {
  bp_mpi_h type, mop;
  uint32_t mult;
  bp_status_t st = bp_mpi_types(op->dtype, (int)op->rop, &type, &mop, &mult);
  if (st != BP_OK) return st;
  int cnt = (int)(op->count * mult), rc = BP_MPI_SUCCESS;
  size_t bytes = op->count * bp_dtype_size(op->dtype);
  if (!bytes) return BP_OK;
  memcpy(op->recv, op->hdr_all + H_PAYLOAD, bytes);
  for (int r = 1; r < op->comm->size && rc == BP_MPI_SUCCESS; r++)
    BP_MPI(rc, MPI_Reduce_local, op->hdr_all + (size_t)r * HDR + H_PAYLOAD, op->recv, cnt, type,
           mop);
  return bp_mpi_check(rc, "all_reduce: MPI_Reduce_local");
}

static bp_status_t post_data(bp_mpi_op_t* op) {
  struct bpp_comm_s* c = op->comm;
  int rop = (op->kind == BP_MPI_ALL_REDUCE || op->kind == BP_MPI_REDUCE ||
             op->kind == BP_MPI_REDUCE_SCATTER)
                ? (int)op->rop
                : -1;
  bp_mpi_h type = NULL, mop = NULL;
  uint32_t mult = 1;
  bp_status_t st = BP_OK;
  if (fused(op)) return reduce_records(op);
  if (op->kind == BP_MPI_BARRIER) return BP_OK; /* the header exchange was the barrier */
  if (op->kind != BP_MPI_SPLIT &&
      (st = bp_mpi_types(op->dtype, rop, &type, &mop, &mult)) != BP_OK)
    return st;
  int cnt = (int)(op->count * mult), n = c->size, rc = BP_MPI_SUCCESS;
  uint64_t eb = elem_bytes(op), bytes = op->count * eb;
  const void* sb = op->send;
  void* rb = op->recv;
  op->nreq = 0;
  if (op->comp) return bp_mpi_post_compressed(op);
  switch (op->kind) {
    case BP_MPI_ALL_REDUCE:
      if (sb == rb) sb = BP_MPI_IN_PLACE;
      BP_MPI(rc, MPI_Iallreduce, sb, rb, cnt, type, mop, c->comm, &op->req[0]);
      break;
    case BP_MPI_REDUCE:
      if (c->rank == op->root && sb == rb) sb = BP_MPI_IN_PLACE;
      BP_MPI(rc, MPI_Ireduce, sb, rb, cnt, type, mop, op->root, c->comm, &op->req[0]);
      break;
    case BP_MPI_BROADCAST:
      if (c->rank == op->root && sb != rb && bytes) memmove(rb, sb, bytes);
      BP_MPI(rc, MPI_Ibcast, rb, cnt, type, op->root, c->comm, &op->req[0]);
      break;
    case BP_MPI_ALL_GATHER:
      if (sb == op->recv + (uint64_t)c->rank * bytes) sb = BP_MPI_IN_PLACE;
      else if (overlaps(sb, bytes, rb, bytes * n) && !(rb = op->tmp = malloc(bytes * n)))
        return bp_kit_error(BP_RESOURCE_EXHAUSTED, "mpi: out of host memory");
      BP_MPI(rc, MPI_Iallgather, sb, cnt, type, rb, cnt, type, c->comm, &op->req[0]);
      break;
    case BP_MPI_REDUCE_SCATTER:
      if (overlaps(sb, bytes * n, rb, bytes) && !(rb = op->tmp = malloc(bytes)))
        return bp_kit_error(BP_RESOURCE_EXHAUSTED, "mpi: out of host memory");
      BP_MPI(rc, MPI_Ireduce_scatter_block, sb, rb, cnt, type, mop, c->comm, &op->req[0]);
      break;
    case BP_MPI_ALL_TO_ALL:
      if (sb == rb) sb = BP_MPI_IN_PLACE;
      else if (overlaps(sb, bytes * n, rb, bytes * n) && !(rb = op->tmp = malloc(bytes * n)))
        return bp_kit_error(BP_RESOURCE_EXHAUSTED, "mpi: out of host memory");
      BP_MPI(rc, MPI_Ialltoall, sb, cnt, type, rb, cnt, type, c->comm, &op->req[0]);
      break;
    case BP_MPI_ALL_TO_ALLV: {
      /* op->count: the receive extent in elements (validation). */
      uint64_t sext = 0;
      for (int p = 0; p < n; p++)
        if (op->v[p] && op->v[n + p] + op->v[p] > sext) sext = op->v[n + p] + op->v[p];
      if (overlaps(sb, sext * eb, rb, bytes)) {
        if (!(rb = op->tmp = malloc(bytes)))
          return bp_kit_error(BP_RESOURCE_EXHAUSTED, "mpi: out of host memory");
        memcpy(rb, op->recv, bytes); /* what lies between the blocks stays */
      }
      op->iv = malloc(4u * (size_t)n * sizeof *op->iv);
      if (!op->iv) return bp_kit_error(BP_RESOURCE_EXHAUSTED, "mpi: out of host memory");
      for (int i = 0; i < 4 * n; i++) op->iv[i] = (int)(op->v[i] * mult);
      BP_MPI(rc, MPI_Ialltoallv, sb, op->iv, op->iv + n, type, rb, op->iv + 2 * n, op->iv + 3 * n,
             type, c->comm, &op->req[0]);
      break;
    }
    case BP_MPI_SEND:
      BP_MPI(rc, MPI_Isend, sb, cnt, type, op->root, 0, c->comm, &op->req[0]);
      break;
    case BP_MPI_RECV:
      BP_MPI(rc, MPI_Irecv, rb, cnt, type, op->root, 0, c->comm, &op->req[0]);
      break;
    default: return BP_OK; /* comm_split: headers only */
  }
  op->nreq = rc == BP_MPI_SUCCESS;
  return bp_mpi_check(rc, bp_mpi_kind_name(op->kind));
}

/* ---- step 5 ------------------------------------------------------------- */
static bp_status_t finish(bp_mpi_op_t* op, const bp_mpi_status_t* status) {
  struct bpp_comm_s* c = op->comm;
  if (op->comp) return bp_mpi_finish_compressed(op);
  uint64_t eb = elem_bytes(op), bytes = op->count * eb;
  if (op->kind == BP_MPI_RECV && status->ucount != bytes)
    return bp_kit_error(BP_INVALID_ARGUMENT,
                        "mpi: recv (from rank %d): %zu bytes arrived, %llu expected", op->root,
                        status->ucount, (unsigned long long)bytes);
  if (op->tmp && bytes) {
    uint64_t n = op->kind == BP_MPI_ALL_GATHER || op->kind == BP_MPI_ALL_TO_ALL ? (uint64_t)c->size
                                                                                 : 1;
    memcpy(op->recv, op->tmp, bytes * n);
  }
  int avg = op->rop == BP_REDUCE_AVG &&
            (op->kind == BP_MPI_ALL_REDUCE || op->kind == BP_MPI_REDUCE_SCATTER ||
             (op->kind == BP_MPI_REDUCE && c->rank == op->root));
  if (avg) bp_mpi_divide(op->dtype, op->recv, op->count, c->size);
  return BP_OK;
}

/* Buffers of abandoned requests (a deadline, an abort, an MPI error while
 * pending): MPI may still read or write them when the peers arrive. The
 * communicator keeps them with their requests; comm_destroy frees those
 * whose requests completed (bp_mpi_comm_reap) and leaves the rest here,
 * reachable, until this plugin finalizes MPI. */
static pthread_mutex_t g_parked_lock = PTHREAD_MUTEX_INITIALIZER;
static bp_mpi_parked_t* g_parked;
static uint32_t g_nparked, g_capparked;

/* Appends to a growing array; on no memory the entry is left to the
 * process (never freed while MPI might use it). */
static void parked_push(bp_mpi_parked_t** list, uint32_t* n, uint32_t* cap,
                        const bp_mpi_parked_t* p) {
  if (*n == *cap) {
    uint32_t c = *cap ? 2 * *cap : 8;
    bp_mpi_parked_t* grown = realloc(*list, c * sizeof *grown);
    if (!grown) return;
    *list = grown;
    *cap = c;
  }
  (*list)[(*n)++] = *p;
}

static void parked_free(bp_mpi_parked_t* p) {
  for (int i = 0; i < 5; i++) free(p->buf[i]);
  free(p->hreq);
}

void bp_mpi_comm_reap(struct bpp_comm_s* comm) {
  for (uint32_t i = 0; i < comm->nparked; i++) {
    bp_mpi_parked_t* p = &comm->parked[i];
    int flag = 0, rc;
    BP_MPI(rc, MPI_Testall, p->nreq, p->hreq ? p->hreq : p->req, &flag, NULL);
    if (rc != BP_MPI_SUCCESS || flag) {
      parked_free(p);
      continue;
    }
    pthread_mutex_lock(&g_parked_lock);
    parked_push(&g_parked, &g_nparked, &g_capparked, p);
    pthread_mutex_unlock(&g_parked_lock);
  }
  free(comm->parked);
  comm->parked = NULL;
  comm->nparked = comm->capparked = 0;
}

void bp_mpi_parked_release(void) {
  pthread_mutex_lock(&g_parked_lock);
  for (uint32_t i = 0; i < g_nparked; i++) parked_free(&g_parked[i]);
  free(g_parked);
  g_parked = NULL;
  g_nparked = g_capparked = 0;
  pthread_mutex_unlock(&g_parked_lock);
}

void bp_mpi_op_free(bp_mpi_op_t* op) {
  if (op->abandoned && op->nreq > 0) {
    bp_mpi_parked_t p = {.req = {op->req[0], op->req[1]},
                         .hreq = op->hreq,
                         .nreq = op->nreq,
                         .buf = {op->v, op->hdr_all, op->counts_in, op->iv, op->tmp}};
    pthread_mutex_lock(&op->comm->lock);
    parked_push(&op->comm->parked, &op->comm->nparked, &op->comm->capparked, &p);
    pthread_mutex_unlock(&op->comm->lock);
  } else {
    free(op->hreq);
    free(op->v);
    free(op->hdr_all);
    free(op->counts_in);
    free(op->iv);
    if (op->comp && op->tmp) bp_mpi_scratch_give(op->comm, op->tmp, op->tmp_cap);
    else free(op->tmp);
  }
  op->nreq = 0;
  op->hreq = NULL;
  op->hdr = NULL;
  op->v = NULL;
  op->hdr_all = NULL;
  op->counts_in = NULL;
  op->iv = NULL;
  op->tmp = NULL;
}

static int is_collective(const bp_mpi_op_t* op) {
  return op->kind != BP_MPI_SEND && op->kind != BP_MPI_RECV;
}

#define KEEP(expr)                        \
  do {                                    \
    bp_status_t s_ = (expr);              \
    if (s_ != BP_OK && first == BP_OK) first = s_; \
  } while (0)

/* Waits every op's posted requests; ops already failed are skipped. */
static void wait_all(bp_mpi_op_t* ops, uint32_t n, bp_status_t* per, uint64_t t0,
                     bp_mpi_status_t* statuses) {
  for (uint32_t i = 0; i < n; i++) {
    if (per[i] != BP_OK || !ops[i].nreq) continue;
    bp_mpi_op_t* op = &ops[i];
    per[i] = bp_mpi_wait(op->comm, op->hreq ? op->hreq : op->req, op->nreq,
                         op->hreq ? NULL : statuses + 2 * i, t0, bp_mpi_kind_name(op->kind),
                         op->seq);
    if (per[i] != BP_OK) {
      op->abandoned = 1; /* its requests may be pending */
      continue;
    }
    op->nreq = 0;
    free(op->hreq);
    op->hreq = NULL;
  }
}

bp_status_t bp_mpi_batch_run(bp_mpi_op_t* ops, uint32_t n) {
  uint64_t t0 = bp_mpi_now_ns();
  bp_status_t first = BP_OK;
  bp_status_t* per = calloc(n ? n : 1, sizeof *per);
  bp_mpi_status_t* statuses = calloc(2u * (n ? n : 1), sizeof *statuses);
  if (!per || !statuses) {
    free(per);
    free(statuses);
    return bp_kit_error(BP_RESOURCE_EXHAUSTED, "mpi: out of host memory");
  }
  for (uint32_t i = 0; i < n; i++) {
    bp_mpi_op_t* op = &ops[i];
    op->seq = atomic_fetch_add(&op->comm->calls, 1) + 1;
    op->start_ns = t0;
    if (atomic_load(&op->comm->error) != BP_OK)
      per[i] = broken(op->comm, bp_mpi_kind_name(op->kind), op->seq);
    else if (op->kind == BP_MPI_ALL_TO_ALLV)
      per[i] = post_alltoallv_counts(op);
  }
  wait_all(ops, n, per, t0, statuses);
  for (uint32_t i = 0; i < n; i++) {
    if (per[i] != BP_OK) continue;
    if (ops[i].kind == BP_MPI_ALL_TO_ALLV) check_alltoallv_counts(&ops[i]);
    if (is_collective(&ops[i])) per[i] = post_header(&ops[i]);
    else if (ops[i].local != BP_OK)
      per[i] = bp_kit_error(ops[i].local, "mpi: %s: %s", bp_mpi_kind_name(ops[i].kind),
                            ops[i].local_msg);
  }
  wait_all(ops, n, per, t0, statuses);
  /* Every rank sees the same headers: a bad collective stops the batch on
   * every rank before any data moves. */
  int go = 1;
  for (uint32_t i = 0; i < n; i++) {
    if (per[i] == BP_OK && is_collective(&ops[i])) per[i] = verify_headers(&ops[i]);
    if (per[i] != BP_OK && is_collective(&ops[i])) go = 0;
  }
  for (uint32_t i = 0; i < n && go; i++)
    if (per[i] == BP_OK) per[i] = post_data(&ops[i]);
  wait_all(ops, n, per, t0, statuses);
  for (uint32_t i = 0; i < n; i++) {
    if (per[i] == BP_OK && go) per[i] = finish(&ops[i], &statuses[2 * i]);
    KEEP(per[i]);
  }
  if (!go && first == BP_OK) first = bp_kit_error(BP_INVALID_ARGUMENT, "mpi: group not run");
  free(per);
  free(statuses);
  return first;
}
