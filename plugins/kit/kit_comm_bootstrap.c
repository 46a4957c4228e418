/* backplane plugin kit: the in-process bootstrap (threads of one process).
 *
 * One shared state for all ranks: collective calls deposit a pointer and
 * meet at a barrier with a deadline (BACKPLANE_COMM_TIMEOUT_MS), so a rank
 * that never calls makes the others fail, not hang; send copies the data
 * into a per-pair FIFO and returns, recv takes the oldest message of its
 * (peer, tag).
 */
#define _GNU_SOURCE
#include <stdlib.h>
#include <string.h>

#include "bp_kit_comm.h"
#include "kit_comm_sync.h"

typedef struct msg {
  int32_t from, to, tag;
  uint64_t bytes;
  struct msg* next;
  unsigned char data[];
} msg_t;

typedef struct shared {
  bp_kit_sync_t sync;
  int32_t nranks;
  uint64_t timeout_ns;
  bp_kit_barrier_t barrier;
  bp_status_t broken;
  const void** posted; /* nranks: each rank's pointer for the current call */
  msg_t* messages;     /* FIFO of sends not yet received */
  struct rank_ctx* ranks;
} shared_t;

typedef struct rank_ctx {
  shared_t* sh;
  int32_t rank;
} rank_ctx_t;

/* Posts `p`, waits for all, runs `body` (mu released), waits again. */
static bp_status_t exchange(rank_ctx_t* rc, const void* p,
                            void (*body)(rank_ctx_t*, void*), void* arg) {
  shared_t* sh = rc->sh;
  char msg[128];
  const struct timespec deadline = bp_kit_deadline(sh->timeout_ns);
  pthread_mutex_lock(&sh->sync.mu);
  sh->posted[rc->rank] = p;
  bp_status_t st =
      bp_kit_barrier_wait(&sh->sync, &sh->barrier, rc->rank, &deadline, &sh->broken, msg,
                          sizeof(msg));
  pthread_mutex_unlock(&sh->sync.mu);
  if (st != BP_OK) goto broken;
  body(rc, arg);
  pthread_mutex_lock(&sh->sync.mu);
  st = bp_kit_barrier_wait(&sh->sync, &sh->barrier, rc->rank, &deadline, &sh->broken, msg,
                           sizeof(msg));
  pthread_mutex_unlock(&sh->sync.mu);
  if (st == BP_OK) return BP_OK;
broken:
  pthread_mutex_lock(&sh->sync.mu);
  if (sh->broken == BP_OK) {
    sh->broken = st;
    pthread_cond_broadcast(&sh->sync.cv);
  }
  pthread_mutex_unlock(&sh->sync.mu);
  return st;
}

typedef struct {
  void* recv;
  uint64_t bytes;
} gather_arg_t;
static void gather_body(rank_ctx_t* rc, void* a) {
  gather_arg_t* g = a;
  for (int32_t r = 0; r < rc->sh->nranks; ++r)
    memcpy((unsigned char*)g->recv + (uint64_t)r * g->bytes, rc->sh->posted[r], g->bytes);
}
static bp_status_t bs_allgather(void* ctx, const void* send, void* recv, uint64_t bytes) {
  if ((!send || !recv) && bytes) return BP_INVALID_ARGUMENT;
  gather_arg_t g = {recv, bytes};
  return exchange(ctx, send, gather_body, &g);
}

typedef struct {
  void* data;
  uint64_t bytes;
  int32_t root;
} bcast_arg_t;
static void bcast_body(rank_ctx_t* rc, void* a) {
  bcast_arg_t* b = a;
  if (rc->rank != b->root) memcpy(b->data, rc->sh->posted[b->root], b->bytes);
}
static bp_status_t bs_broadcast(void* ctx, void* data, uint64_t bytes, int32_t root) {
  rank_ctx_t* rc = ctx;
  if ((!data && bytes) || root < 0 || root >= rc->sh->nranks) return BP_INVALID_ARGUMENT;
  bcast_arg_t b = {data, bytes, root};
  return exchange(rc, data, bcast_body, &b);
}

static void nothing(rank_ctx_t* rc, void* a) { (void)rc, (void)a; }
static bp_status_t bs_barrier(void* ctx) { return exchange(ctx, NULL, nothing, NULL); }

static bp_status_t bs_send(void* ctx, int32_t peer, const void* data, uint64_t bytes,
                           int32_t tag) {
  rank_ctx_t* rc = ctx;
  shared_t* sh = rc->sh;
  if (peer < 0 || peer >= sh->nranks || (!data && bytes) || bytes > (UINT64_MAX >> 2))
    return BP_INVALID_ARGUMENT;
  msg_t* m = malloc(sizeof(msg_t) + (size_t)bytes);
  if (!m) return BP_RESOURCE_EXHAUSTED;
  m->from = rc->rank;
  m->to = peer;
  m->tag = tag;
  m->bytes = bytes;
  m->next = NULL;
  if (bytes) memcpy(m->data, data, (size_t)bytes);
  pthread_mutex_lock(&sh->sync.mu);
  msg_t** pp = &sh->messages;
  while (*pp) pp = &(*pp)->next;
  *pp = m;
  pthread_cond_broadcast(&sh->sync.cv);
  pthread_mutex_unlock(&sh->sync.mu);
  return BP_OK;
}

static bp_status_t bs_recv(void* ctx, int32_t peer, void* data, uint64_t bytes, int32_t tag) {
  rank_ctx_t* rc = ctx;
  shared_t* sh = rc->sh;
  if (peer < 0 || peer >= sh->nranks || (!data && bytes)) return BP_INVALID_ARGUMENT;
  const struct timespec deadline = bp_kit_deadline(sh->timeout_ns);
  pthread_mutex_lock(&sh->sync.mu);
  for (;;) {
    msg_t** pp = &sh->messages;
    while (*pp && !((*pp)->from == peer && (*pp)->to == rc->rank && (*pp)->tag == tag))
      pp = &(*pp)->next;
    if (*pp) {
      msg_t* m = *pp;
      *pp = m->next;
      pthread_mutex_unlock(&sh->sync.mu);
      bp_status_t st = m->bytes == bytes ? BP_OK : BP_INVALID_ARGUMENT;
      if (st == BP_OK && bytes) memcpy(data, m->data, (size_t)bytes);
      free(m);
      return st;
    }
    if (sh->broken != BP_OK || bp_kit_sync_wait(&sh->sync, &deadline)) break;
  }
  bp_status_t st = sh->broken != BP_OK ? sh->broken : BP_DEADLINE_EXCEEDED;
  pthread_mutex_unlock(&sh->sync.mu);
  return st;
}

bp_status_t bp_kit_local_bootstrap_create(int32_t nranks, bp_bootstrap_t* bootstraps,
                                          void** out_shared) {
  if (!bootstraps || !out_shared || nranks < 1 || nranks > (1 << 20))
    return BP_INVALID_ARGUMENT;
  *out_shared = NULL;
  shared_t* sh = calloc(1, sizeof(*sh));
  if (!sh) return BP_RESOURCE_EXHAUSTED;
  sh->nranks = nranks;
  sh->timeout_ns = bp_kit_comm_timeout(0);
  sh->barrier.n = nranks;
  sh->barrier.arrived = calloc((size_t)nranks, 1);
  sh->posted = calloc((size_t)nranks, sizeof(void*));
  sh->ranks = calloc((size_t)nranks, sizeof(rank_ctx_t));
  if (!sh->barrier.arrived || !sh->posted || !sh->ranks || bp_kit_sync_init(&sh->sync) != 0) {
    free(sh->barrier.arrived);
    free(sh->posted);
    free(sh->ranks);
    free(sh);
    return BP_RESOURCE_EXHAUSTED;
  }
  for (int32_t r = 0; r < nranks; ++r) {
    sh->ranks[r].sh = sh;
    sh->ranks[r].rank = r;
    bp_bootstrap_t* b = &bootstraps[r];
    memset(b, 0, sizeof(*b));
    b->struct_size = sizeof(*b);
    b->rank = r;
    b->nranks = nranks;
    b->ctx = &sh->ranks[r];
    b->allgather = bs_allgather;
    b->broadcast = bs_broadcast;
    b->barrier = bs_barrier;
    b->send = bs_send;
    b->recv = bs_recv;
  }
  *out_shared = sh;
  return BP_OK;
}

void bp_kit_local_bootstrap_destroy(void* shared) {
  shared_t* sh = shared;
  if (!sh) return;
  while (sh->messages) {
    msg_t* m = sh->messages;
    sh->messages = m->next;
    free(m);
  }
  bp_kit_sync_destroy(&sh->sync);
  free(sh->barrier.arrived);
  free(sh->posted);
  free(sh->ranks);
  free(sh);
}
