/* NCCL: loading, communicators' errors and the streams' watchdog (see
 * cuda_nccl.h). The collectives are in cuda_nccl_coll.c.
 *
 * NCCL reports failures asynchronously (ncclCommGetAsyncError) and never
 * times out: a missing rank hangs its peers' kernels. So a stream that ran
 * NCCL work is synchronized by polling (cuStreamQuery, then each of its
 * communicators' asynchronous error); a communicator without progress for
 * its timeout since its last collective is aborted (ncclCommAbort wakes
 * its kernels) and reports DEADLINE_EXCEEDED. Ranks of one world in this
 * process share that verdict (a peer aborted by the watchdog is seen by
 * NCCL as a remote error), so every waiting rank reports the same status,
 * as the ABI asks.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cuda_nccl_internal.h"

/* ---- loading --------------------------------------------------------------- */
#define BP_KIT_SYMBOL_TABLE nccl_symbols_t
#define NCCL_SYM_REQ(name) {#name, offsetof(nccl_symbols_t, name), 1},
#define NCCL_SYM_OPT(name) {#name, offsetof(nccl_symbols_t, name), 0},
static const bp_kit_symbol_t k_nccl_symbols[] = {NCCL_SYMBOLS(NCCL_SYM_REQ, NCCL_SYM_OPT)};
#undef BP_KIT_SYMBOL_TABLE

static pthread_mutex_t g_load_mu = PTHREAD_MUTEX_INITIALIZER;
static nccl_symbols_t g_nccl;
static int g_loaded;
static char g_reason[400];

const nccl_symbols_t* cuda_nccl(const char** out_reason) {
  pthread_mutex_lock(&g_load_mu);
  if (!g_loaded) {
    const char* path = getenv("BP_NCCL_PATH");
    const char* names[1] = {path && *path ? path : "libnccl.so.2"};
    char why[320];
    void* lib = NULL;
    if (bp_kit_library_open(names, 1, &lib, why, sizeof why) != BP_OK) {
      snprintf(g_reason, sizeof g_reason, "no NCCL (%s)", why);
    } else if (bp_kit_symbols_load(&g_nccl, k_nccl_symbols, BP_KIT_COUNT(k_nccl_symbols),
                                   bp_kit_dlsym, lib, names[0], g_reason, sizeof g_reason) != BP_OK) {
      bp_kit_library_close(lib);
    } else {
      g_loaded = 1; /* kept for the process: NCCL's threads outlive communicators */
    }
  }
  const nccl_symbols_t* nc = g_loaded ? &g_nccl : NULL;
  if (out_reason) *out_reason = g_reason;
  pthread_mutex_unlock(&g_load_mu);
  return nc;
}

/* ---- errors ------------------------------------------------------------------ */
bp_status_t cuda_nccl_status_of(ncclResult_t r) {
  switch (r) {
    case ncclSuccess: return BP_OK;
    case ncclInvalidArgument:
    case ncclInvalidUsage: return BP_INVALID_ARGUMENT;
    case ncclRemoteError: return BP_UNAVAILABLE;
    case ncclInProgress: return BP_NOT_READY;
    default: return BP_INTERNAL;
  }
}

void cuda_nccl_text(struct bpp_comm_s* c, ncclResult_t r, const char* what, char* buf, size_t cap) {
  const nccl_symbols_t* nc = c->nc;
  const char* last = nc->ncclGetLastError && c->comm ? nc->ncclGetLastError(c->comm) : NULL;
  snprintf(buf, cap, "cuda: %s: %s (%d)%s%s", what, nc->ncclGetErrorString(r), (int)r,
           last && *last ? ": " : "", last && *last ? last : "");
}

bp_status_t cuda_nccl_fail(struct bpp_comm_s* c, ncclResult_t r, const char* what) {
  char msg[BP_PLUGIN_MSG_CAP];
  cuda_nccl_text(c, r, what, msg, sizeof msg);
  return bp_kit_error(cuda_nccl_status_of(r), "%s", msg);
}

uint64_t cuda_nccl_now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* ---- worlds: ranks of one communicator in this process ------------------------ */
static pthread_mutex_t g_world_mu = PTHREAD_MUTEX_INITIALIZER;
static cuda_nccl_world_t* g_worlds;

cuda_nccl_world_t* cuda_nccl_world_get(const ncclUniqueId* id) {
  pthread_mutex_lock(&g_world_mu);
  cuda_nccl_world_t* w = g_worlds;
  while (w && memcmp(&w->id, id, sizeof *id)) w = w->next;
  if (!w && (w = calloc(1, sizeof *w)) != NULL) {
    w->id = *id;
    w->next = g_worlds;
    g_worlds = w;
  }
  if (w) w->refs++;
  pthread_mutex_unlock(&g_world_mu);
  return w;
}

void cuda_nccl_world_put(cuda_nccl_world_t* w) {
  if (!w) return;
  pthread_mutex_lock(&g_world_mu);
  if (--w->refs == 0) {
    for (cuda_nccl_world_t** p = &g_worlds; *p; p = &(*p)->next)
      if (*p == w) {
        *p = w->next;
        break;
      }
    free(w);
  }
  pthread_mutex_unlock(&g_world_mu);
}

/* The world's verdict, once set, is every rank's. */
static bp_status_t world_verdict(cuda_nccl_world_t* w, char* msg, size_t cap) {
  pthread_mutex_lock(&g_world_mu);
  bp_status_t st = w->status;
  if (st) snprintf(msg, cap, "%s", w->msg);
  pthread_mutex_unlock(&g_world_mu);
  return st;
}
void cuda_nccl_world_set(cuda_nccl_world_t* w, bp_status_t st, const char* msg) {
  pthread_mutex_lock(&g_world_mu);
  if (!w->status) {
    w->status = st;
    snprintf(w->msg, sizeof w->msg, "%s", msg);
  }
  pthread_mutex_unlock(&g_world_mu);
}

/* ---- communicators' state ---------------------------------------------------- */
void cuda_nccl_comm_unref(struct bpp_comm_s* c) {
  if (atomic_fetch_sub(&c->refs, 1) != 1) return;
  cuda_nccl_world_put(c->world);
  pthread_mutex_destroy(&c->mu);
  free(c);
}

/* Breaks `c` with `st` (first cause wins) and aborts its NCCL
 * communicator, which wakes its kernels. c->mu held. */
void cuda_nccl_break_locked(struct bpp_comm_s* c, bp_status_t st, const char* msg) {
  if (!c->broken) {
    c->broken = st;
    snprintf(c->broken_msg, sizeof c->broken_msg, "%s", msg);
  }
  if (c->comm) {
    c->nc->ncclCommAbort(c->comm);
    c->comm = NULL;
  }
}

bp_status_t cuda_nccl_comm_poll(struct bpp_comm_s* c, uint64_t now_ns) {
  char msg[256];
  pthread_mutex_lock(&c->mu);
  bp_status_t st = c->broken;
  if (!st && (st = world_verdict(c->world, msg, sizeof msg)) != BP_OK) {
    cuda_nccl_break_locked(c, st, msg);
  } else if (!st && c->comm) {
    ncclResult_t a = ncclSuccess;
    if (c->nc->ncclCommGetAsyncError(c->comm, &a) == ncclSuccess && a != ncclSuccess &&
        a != ncclInProgress) {
      cuda_nccl_text(c, a, "asynchronous error", msg, sizeof msg);
      st = cuda_nccl_status_of(a);
      cuda_nccl_break_locked(c, st, msg);
    } else if (now_ns && c->in_flight && now_ns - c->last_ns > c->timeout_ns) {
      snprintf(msg, sizeof msg, "cuda: a collective of rank %d of %d made no progress within "
               "%.3f s (a rank missing?); the communicator is aborted", c->rank, c->size,
               (double)c->timeout_ns / 1e9);
      st = BP_DEADLINE_EXCEEDED;
      cuda_nccl_world_set(c->world, st, msg);
      cuda_nccl_break_locked(c, st, msg);
    }
  }
  if (st) snprintf(msg, sizeof msg, "%s", c->broken_msg);
  pthread_mutex_unlock(&c->mu);
  return st ? bp_kit_error(st, "%s", msg) : BP_OK;
}

/* ---- the streams' watchdog ------------------------------------------------------ */
void cuda_nccl_watch_add(bpp_stream_t s, struct bpp_comm_s* c) {
  cuda_nccl_watch_t* w = &s->nccl;
  for (uint32_t i = 0; i < w->n; ++i)
    if (w->comms[i] == c) return;
  if (w->n == CUDA_STREAM_MAX_COMMS) return; /* its errors still reach comm_get_async_error */
  atomic_fetch_add(&c->refs, 1);
  w->comms[w->n++] = c;
}

void cuda_nccl_stream_release(bpp_stream_t s) {
  for (uint32_t i = 0; i < s->nccl.n; ++i) {
    pthread_mutex_lock(&s->nccl.comms[i]->mu);
    s->nccl.comms[i]->in_flight = 0;
    pthread_mutex_unlock(&s->nccl.comms[i]->mu);
    cuda_nccl_comm_unref(s->nccl.comms[i]);
  }
  s->nccl.n = 0;
}

bp_status_t cuda_nccl_stream_check(bpp_stream_t s) {
  bp_status_t first = BP_OK;
  for (uint32_t i = 0; i < s->nccl.n; ++i) {
    bp_status_t st = cuda_nccl_comm_poll(s->nccl.comms[i], 0);
    if (!first) first = st;
  }
  cuda_nccl_stream_release(s);
  return first;
}

bp_status_t cuda_nccl_stream_sync(bpp_stream_t s) {
  const cuda_symbols_t* cu = s->dev->cu;
  bp_status_t first = BP_OK;
  uint64_t aborted_at = 0, grace = 0;
  long sleep_ns = 20000;
  for (;;) {
    CUresult r = cu->cuStreamQuery(s->s);
    if (r == CUDA_SUCCESS) break;
    if (r != CUDA_ERROR_NOT_READY) {
      cuda_nccl_stream_release(s);
      return cuda_fail(s->dev, r, "cuStreamQuery");
    }
    uint64_t now = cuda_nccl_now_ns();
    for (uint32_t i = 0; i < s->nccl.n; ++i) {
      bp_status_t st = cuda_nccl_comm_poll(s->nccl.comms[i], now);
      if (st && !first) {
        first = st;
        aborted_at = now;
        grace = s->nccl.comms[i]->timeout_ns;
      }
    }
    if (aborted_at && now - aborted_at > grace) {
      /* An aborted communicator's kernels should have ended by now. */
      cuda_nccl_stream_release(s);
      return bp_kit_error(first, "cuda: the stream did not drain within %.3f s after its "
                          "communicator was aborted", (double)grace / 1e9);
    }
    struct timespec ts = {0, sleep_ns};
    nanosleep(&ts, NULL);
    if (sleep_ns < 1000000) sleep_ns *= 2;
  }
  bp_status_t st = cuda_nccl_stream_check(s);
  return first ? first : st;
}
