/* A fake NCCL (libnccl.so.2's entry points) in the fake CUDA driver's
 * library, so its collectives run in the fake streams' order over the
 * fake's host memory. The plugin opens it through BP_NCCL_PATH.
 *
 * Ranks are communicators of this process (threads); the collectives
 * themselves are the plugin kit's in-process engine (bp_kit_comm.h), run
 * as a job on each rank's stream: a collective returns once enqueued, and
 * the stream's worker blocks in the engine until every rank's job has
 * arrived. Groups (ncclGroupStart/End, per thread) issue one job per
 * (communicator, stream) with its calls, so send/recv pairs cannot
 * deadlock. Errors the engine finds (calls that disagree across ranks, an
 * abort) become the communicator's asynchronous error
 * (ncclCommGetAsyncError: ncclInvalidUsage, ncclRemoteError) with the
 * engine's message in ncclGetLastError, as a real NCCL reports them; like
 * the real one, the fake never times out by itself (the plugin's watchdog
 * aborts). Every buffer must lie in a live allocation of the fake driver.
 */
#define _GNU_SOURCE
#include <cuda.h>
#include <nccl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bp_kit_comm.h"

#define FAKE_EXPORT __attribute__((visibility("default")))

CUresult fake_cuda_enter(const char* name);
int fake_cuda_range_ok(const char* name, const void* p, size_t n);
void fake_cuda_misuse(const char* what);
CUresult fake_cuda_enqueue_call(const char* name, CUstream h, void (*fn)(void*), void* user,
                                size_t size, const void* key);

#define COMM_MAGIC 0x4e43434cu
#define FAKE_NCCL_MAX_GROUP 256 /* calls per group */

struct ncclComm {
  uint32_t magic;
  int rank, nranks;
  bp_kit_comm_t* kc;
  pthread_mutex_t mu;
  pthread_cond_t idle;
  int pending;          /* jobs enqueued and not yet run */
  ncclResult_t async;   /* sticky */
  char last_error[256];
};

static ncclResult_t enter(const char* name) {
  return fake_cuda_enter(name) == CUDA_SUCCESS ? ncclSuccess : ncclUnhandledCudaError;
}

static int comm_ok(const char* name, ncclComm_t c) {
  if (c && c->magic == COMM_MAGIC) return 1;
  char m[128];
  snprintf(m, sizeof m, "%s: unknown or destroyed communicator", name);
  fake_cuda_misuse(m);
  return 0;
}

/* ---- unique ids and the rendezvous of ncclCommInitRank ------------------- */
typedef struct world {
  struct world* next;
  ncclUniqueId id;
  int nranks, created;
  void* shared;
  bp_bootstrap_t* bs;
} world_t;
static pthread_mutex_t g_world_mu = PTHREAD_MUTEX_INITIALIZER;
static world_t* g_worlds;
static uint64_t g_next_id;

FAKE_EXPORT ncclResult_t ncclGetVersion(int* v) {
  if (!v) return ncclInvalidArgument;
  *v = NCCL_VERSION(2, 28, 0);
  return ncclSuccess;
}

FAKE_EXPORT ncclResult_t ncclGetUniqueId(ncclUniqueId* id) {
  ncclResult_t r = enter("ncclGetUniqueId");
  if (r != ncclSuccess) return r;
  if (!id) return ncclInvalidArgument;
  memset(id, 0, sizeof *id);
  pthread_mutex_lock(&g_world_mu);
  uint64_t n = ++g_next_id;
  pthread_mutex_unlock(&g_world_mu);
  snprintf(id->internal, sizeof id->internal, "fake-nccl-%llu", (unsigned long long)n);
  return ncclSuccess;
}

/* The world of `id`, made by its first rank; NULL on a size mismatch. */
static world_t* world_join(const ncclUniqueId* id, int nranks) {
  pthread_mutex_lock(&g_world_mu);
  world_t* w = g_worlds;
  while (w && memcmp(&w->id, id, sizeof *id)) w = w->next;
  if (!w && (w = calloc(1, sizeof *w)) != NULL) {
    w->id = *id;
    w->nranks = nranks;
    w->bs = calloc((size_t)nranks, sizeof *w->bs);
    if (!w->bs || bp_kit_local_bootstrap_create(nranks, w->bs, &w->shared) != BP_OK) {
      free(w->bs);
      free(w);
      w = NULL;
    } else {
      w->next = g_worlds;
      g_worlds = w;
    }
  } else if (w && w->nranks != nranks) {
    w = NULL;
  }
  pthread_mutex_unlock(&g_world_mu);
  return w;
}

/* The last rank out frees the world's bootstrap. */
static void world_leave(world_t* w) {
  pthread_mutex_lock(&g_world_mu);
  int last = ++w->created == w->nranks;
  if (last)
    for (world_t** p = &g_worlds; *p; p = &(*p)->next)
      if (*p == w) {
        *p = w->next;
        break;
      }
  pthread_mutex_unlock(&g_world_mu);
  if (!last) return;
  bp_kit_local_bootstrap_destroy(w->shared);
  free(w->bs);
  free(w);
}

static ncclComm_t comm_new(bp_kit_comm_t* kc) {
  ncclComm_t c = calloc(1, sizeof *c);
  if (!c) return NULL;
  c->magic = COMM_MAGIC;
  c->kc = kc;
  c->rank = bp_kit_comm_rank(kc);
  c->nranks = bp_kit_comm_size(kc);
  pthread_mutex_init(&c->mu, NULL);
  pthread_cond_init(&c->idle, NULL);
  return c;
}

FAKE_EXPORT ncclResult_t ncclCommInitRank(ncclComm_t* out, int nranks, ncclUniqueId id, int rank) {
  ncclResult_t r = enter("ncclCommInitRank");
  if (r != ncclSuccess) return r;
  if (!out || nranks < 1 || rank < 0 || rank >= nranks) return ncclInvalidArgument;
  world_t* w = world_join(&id, nranks);
  if (!w) return ncclInvalidUsage;
  bp_kit_comm_t* kc = NULL;
  bp_kit_comm_error_t err = {{0}};
  bp_status_t st = bp_kit_comm_create(&w->bs[rank], 0, &kc, &err);
  world_leave(w);
  if (st != BP_OK) return ncclSystemError;
  if (!(*out = comm_new(kc))) {
    bp_kit_comm_destroy(kc);
    return ncclSystemError;
  }
  return ncclSuccess;
}

FAKE_EXPORT ncclResult_t ncclCommSplit(ncclComm_t c, int color, int key, ncclComm_t* out,
                                       ncclConfig_t* config) {
  (void)config;
  ncclResult_t r = enter("ncclCommSplit");
  if (r != ncclSuccess) return r;
  if (!comm_ok("ncclCommSplit", c) || !out) return ncclInvalidArgument;
  bp_kit_comm_t* kc = NULL;
  bp_kit_comm_error_t err = {{0}};
  if (bp_kit_comm_split(c->kc, color, key, 0, &kc, &err) != BP_OK) {
    snprintf(c->last_error, sizeof c->last_error, "%s", err.text);
    return ncclInvalidUsage;
  }
  *out = NULL;
  if (kc && !(*out = comm_new(kc))) {
    bp_kit_comm_destroy(kc);
    return ncclSystemError;
  }
  return ncclSuccess;
}

/* Waits for the communicator's jobs, then frees it. */
static void comm_free(ncclComm_t c) {
  pthread_mutex_lock(&c->mu);
  while (c->pending) pthread_cond_wait(&c->idle, &c->mu);
  pthread_mutex_unlock(&c->mu);
  bp_kit_comm_destroy(c->kc);
  c->magic = 0;
  pthread_mutex_destroy(&c->mu);
  pthread_cond_destroy(&c->idle);
  free(c);
}

FAKE_EXPORT ncclResult_t ncclCommDestroy(ncclComm_t c) {
  ncclResult_t r = enter("ncclCommDestroy");
  if (r != ncclSuccess) return r;
  if (!comm_ok("ncclCommDestroy", c)) return ncclInvalidArgument;
  comm_free(c);
  return ncclSuccess;
}

/* Wakes every rank blocked in a collective of the world, then frees the
 * communicator (the handle is gone afterwards, as in NCCL). */
FAKE_EXPORT ncclResult_t ncclCommAbort(ncclComm_t c) {
  ncclResult_t r = enter("ncclCommAbort");
  if (r != ncclSuccess) return r;
  if (!comm_ok("ncclCommAbort", c)) return ncclInvalidArgument;
  bp_kit_comm_abort(c->kc);
  comm_free(c);
  return ncclSuccess;
}

FAKE_EXPORT ncclResult_t ncclCommGetAsyncError(ncclComm_t c, ncclResult_t* out) {
  if (!comm_ok("ncclCommGetAsyncError", c) || !out) return ncclInvalidArgument;
  pthread_mutex_lock(&c->mu);
  *out = c->async;
  pthread_mutex_unlock(&c->mu);
  return ncclSuccess;
}

FAKE_EXPORT const char* ncclGetLastError(ncclComm_t c) {
  return c && c->magic == COMM_MAGIC ? c->last_error : "";
}

FAKE_EXPORT const char* ncclGetErrorString(ncclResult_t r) {
  switch (r) {
    case ncclSuccess: return "no error";
    case ncclUnhandledCudaError: return "unhandled cuda error (run with NCCL_DEBUG=INFO for details)";
    case ncclSystemError: return "unhandled system error (run with NCCL_DEBUG=INFO for details)";
    case ncclInternalError: return "internal error - please report this issue to the NCCL developers";
    case ncclInvalidArgument: return "invalid argument (run with NCCL_DEBUG=WARN for details)";
    case ncclInvalidUsage: return "invalid usage (run with NCCL_DEBUG=WARN for details)";
    case ncclRemoteError: return "remote process exited or there was a network error";
    case ncclInProgress: return "NCCL operation in progress";
    default: return "unknown result code";
  }
}

FAKE_EXPORT ncclResult_t ncclCommCount(const ncclComm_t c, int* n) {
  if (!comm_ok("ncclCommCount", c) || !n) return ncclInvalidArgument;
  *n = c->nranks;
  return ncclSuccess;
}
FAKE_EXPORT ncclResult_t ncclCommUserRank(const ncclComm_t c, int* rank) {
  if (!comm_ok("ncclCommUserRank", c) || !rank) return ncclInvalidArgument;
  *rank = c->rank;
  return ncclSuccess;
}

FAKE_EXPORT ncclResult_t ncclCommRegister(const ncclComm_t c, void* p, size_t n, void** handle) {
  ncclResult_t r = enter("ncclCommRegister");
  if (r != ncclSuccess) return r;
  if (!comm_ok("ncclCommRegister", c) || !handle || !fake_cuda_range_ok("ncclCommRegister", p, n))
    return ncclInvalidArgument;
  *handle = malloc(1);
  return *handle ? ncclSuccess : ncclSystemError;
}
FAKE_EXPORT ncclResult_t ncclCommDeregister(const ncclComm_t c, void* handle) {
  if (!comm_ok("ncclCommDeregister", c) || !handle) return ncclInvalidArgument;
  free(handle);
  return ncclSuccess;
}

/* ---- collectives ----------------------------------------------------------- */
typedef struct job {
  ncclComm_t comm;
  uint32_t n;
  bp_kit_coll_t calls[FAKE_NCCL_MAX_GROUP];
} job_t;

static void run_job(void* arg) {
  job_t* j = arg;
  ncclComm_t c = j->comm;
  bp_kit_comm_error_t err = {{0}};
  pthread_mutex_lock(&c->mu);
  int broken = c->async != ncclSuccess;
  pthread_mutex_unlock(&c->mu);
  bp_status_t st = broken ? BP_ABORTED : bp_kit_comm_run(c->kc, j->calls, j->n, &err);
  pthread_mutex_lock(&c->mu);
  if (st != BP_OK && c->async == ncclSuccess) {
    c->async = st == BP_INVALID_ARGUMENT || st == BP_UNIMPLEMENTED ? ncclInvalidUsage : ncclRemoteError;
    snprintf(c->last_error, sizeof c->last_error, "%s", err.text);
  }
  if (--c->pending == 0) pthread_cond_broadcast(&c->idle);
  pthread_mutex_unlock(&c->mu);
}

static CUresult enqueue(const char* name, ncclComm_t c, CUstream s, const bp_kit_coll_t* calls,
                        uint32_t n) {
  job_t* j = calloc(1, sizeof *j);
  if (!j) return CUDA_ERROR_OUT_OF_MEMORY;
  j->comm = c;
  j->n = n;
  memcpy(j->calls, calls, sizeof *calls * n);
  pthread_mutex_lock(&c->mu);
  c->pending++;
  pthread_mutex_unlock(&c->mu);
  CUresult r = fake_cuda_enqueue_call(name, s, run_job, j, sizeof *j, NULL);
  if (r != CUDA_SUCCESS) {
    pthread_mutex_lock(&c->mu);
    if (--c->pending == 0) pthread_cond_broadcast(&c->idle);
    pthread_mutex_unlock(&c->mu);
  }
  return r;
}

/* Group items of the calling thread. */
typedef struct item {
  bp_kit_group_key_t key;
  bp_kit_coll_t call;
} item_t;
static __thread int t_depth;
static __thread item_t t_items[FAKE_NCCL_MAX_GROUP];
static __thread uint32_t t_nitems;

static uint32_t dtype_of(ncclDataType_t t) {
  switch (t) {
    case ncclInt8: return BP_DTYPE_I8;
    case ncclUint8: return BP_DTYPE_U8;
    case ncclInt32: return BP_DTYPE_I32;
    case ncclUint32: return BP_DTYPE_U32;
    case ncclInt64: return BP_DTYPE_I64;
    case ncclUint64: return BP_DTYPE_U64;
    case ncclFloat16: return BP_DTYPE_F16;
    case ncclFloat32: return BP_DTYPE_F32;
    case ncclFloat64: return BP_DTYPE_F64;
    case ncclBfloat16: return BP_DTYPE_BF16;
    case ncclFloat8e4m3: return BP_DTYPE_F8E4M3FN;
    case ncclFloat8e5m2: return BP_DTYPE_F8E5M2;
    default: return BP_DTYPE_INVALID;
  }
}

/* Checks and issues (or, inside a group, queues) one call. */
static ncclResult_t collective(const char* name, ncclComm_t c, cudaStream_t stream, uint32_t kind,
                               const void* send, size_t send_n, void* recv, size_t recv_n,
                               size_t count, ncclDataType_t type, ncclRedOp_t op, int root) {
  ncclResult_t r = enter(name);
  if (r != ncclSuccess) return r;
  if (!comm_ok(name, c)) return ncclInvalidArgument;
  uint32_t dt = dtype_of(type);
  uint64_t esz = bp_kit_coll_bytes(dt, 1);
  if (!dt || (int)op < 0 || op > ncclAvg) return ncclInvalidArgument;
  if ((send_n && !fake_cuda_range_ok(name, send, send_n * esz)) ||
      (recv_n && !fake_cuda_range_ok(name, recv, recv_n * esz)))
    return ncclInvalidArgument;
  static const uint32_t k_ops[] = {BP_REDUCE_SUM, BP_REDUCE_PROD, BP_REDUCE_MAX, BP_REDUCE_MIN,
                                   BP_REDUCE_AVG};
  bp_kit_coll_t call = {.kind = kind, .dtype = dt, .op = k_ops[op], .root = root, .count = count,
                        .send = send, .recv = recv};
  if (t_depth > 0) {
    if (t_nitems == FAKE_NCCL_MAX_GROUP) return ncclInvalidUsage;
    t_items[t_nitems++] = (item_t){{c, stream}, call};
    return ncclSuccess;
  }
  return enqueue(name, c, (CUstream)stream, &call, 1) == CUDA_SUCCESS ? ncclSuccess
                                                                        : ncclUnhandledCudaError;
}

FAKE_EXPORT ncclResult_t ncclAllReduce(const void* s, void* d, size_t n, ncclDataType_t t,
                                       ncclRedOp_t op, ncclComm_t c, cudaStream_t st) {
  return collective("ncclAllReduce", c, st, BP_KIT_COLL_ALL_REDUCE, s, n, d, n, n, t, op, 0);
}
FAKE_EXPORT ncclResult_t ncclBroadcast(const void* s, void* d, size_t n, ncclDataType_t t, int root,
                                       ncclComm_t c, cudaStream_t st) {
  int me = c && c->magic == COMM_MAGIC ? c->rank : -1;
  return collective("ncclBroadcast", c, st, BP_KIT_COLL_BROADCAST, s, me == root ? n : 0, d, n, n,
                    t, ncclSum, root);
}
FAKE_EXPORT ncclResult_t ncclReduce(const void* s, void* d, size_t n, ncclDataType_t t,
                                    ncclRedOp_t op, int root, ncclComm_t c, cudaStream_t st) {
  int me = c && c->magic == COMM_MAGIC ? c->rank : -1;
  return collective("ncclReduce", c, st, BP_KIT_COLL_REDUCE, s, n, d, me == root ? n : 0, n, t, op,
                    root);
}
FAKE_EXPORT ncclResult_t ncclAllGather(const void* s, void* d, size_t n, ncclDataType_t t,
                                       ncclComm_t c, cudaStream_t st) {
  size_t all = c && c->magic == COMM_MAGIC ? n * (size_t)c->nranks : 0;
  return collective("ncclAllGather", c, st, BP_KIT_COLL_ALL_GATHER, s, n, d, all, n, t, ncclSum, 0);
}
FAKE_EXPORT ncclResult_t ncclReduceScatter(const void* s, void* d, size_t n, ncclDataType_t t,
                                           ncclRedOp_t op, ncclComm_t c, cudaStream_t st) {
  size_t all = c && c->magic == COMM_MAGIC ? n * (size_t)c->nranks : 0;
  return collective("ncclReduceScatter", c, st, BP_KIT_COLL_REDUCE_SCATTER, s, all, d, n, n, t, op,
                    0);
}
FAKE_EXPORT ncclResult_t ncclSend(const void* s, size_t n, ncclDataType_t t, int peer, ncclComm_t c,
                                  cudaStream_t st) {
  return collective("ncclSend", c, st, BP_KIT_COLL_SEND, s, n, NULL, 0, n, t, ncclSum, peer);
}
FAKE_EXPORT ncclResult_t ncclRecv(void* d, size_t n, ncclDataType_t t, int peer, ncclComm_t c,
                                  cudaStream_t st) {
  return collective("ncclRecv", c, st, BP_KIT_COLL_RECV, NULL, 0, d, n, n, t, ncclSum, peer);
}

FAKE_EXPORT ncclResult_t ncclGroupStart(void) {
  ncclResult_t r = enter("ncclGroupStart");
  if (r != ncclSuccess) return r;
  if (t_depth++ == 0) t_nitems = 0;
  return ncclSuccess;
}

static bp_status_t issue(void* user, const uint32_t* idx, uint32_t k) {
  (void)user;
  bp_kit_coll_t calls[FAKE_NCCL_MAX_GROUP];
  for (uint32_t i = 0; i < k; ++i) calls[i] = t_items[idx[i]].call;
  const item_t* head = &t_items[idx[0]];
  return enqueue("ncclGroupEnd", (ncclComm_t)(uintptr_t)head->key.comm,
                 (CUstream)(uintptr_t)head->key.stream, calls, k) == CUDA_SUCCESS ? BP_OK
                                                                                 : BP_INTERNAL;
}

FAKE_EXPORT ncclResult_t ncclGroupEnd(void) {
  ncclResult_t r = enter("ncclGroupEnd");
  if (r != ncclSuccess) return r;
  if (t_depth == 0) return ncclInvalidUsage;
  if (--t_depth > 0) return ncclSuccess;
  uint32_t n = t_nitems;
  t_nitems = 0;
  return bp_kit_group_for_each(t_items, n, sizeof(item_t), issue, NULL) == BP_OK
             ? ncclSuccess
             : ncclUnhandledCudaError;
}
