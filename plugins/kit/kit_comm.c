/* backplane plugin kit: the in-process collective engine (bp_kit_comm.h).
 *
 * A world is shared by its ranks and freed by the last one to leave. One
 * mutex guards its barrier, its call slots and its mailboxes; data moves
 * outside the lock, between barriers that order it:
 *   barrier A  every rank has published its call (slots[r]);
 *              all ranks check the calls against each other;
 *   phase 1    each rank writes its share (reading peers' inputs);
 *   barrier B  every share is written;
 *   phase 2    all_reduce only: each rank copies the other ranks' chunks;
 *   barrier C  no rank reads another's buffers any more.
 * Point-to-point calls use per-pair FIFO mailboxes instead: a send posts a
 * message and waits until the receiver has copied it.
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bp_kit_comm.h"
#include "bp_plugin_common.h"
#include "kit_comm_shm.h"
#include "kit_comm_sync.h"

typedef struct p2p_msg {
  const void* data;
  uint64_t count;
  uint32_t dtype;
  int done;
  bp_status_t status; /* set by the receiver on a mismatch */
  struct p2p_msg* next;
} p2p_msg_t;

typedef struct slot {
  const bp_kit_coll_t* call; /* this rank's call, valid until barrier C */
  const void* send;          /* the input peers read (a copy for all_to_all overlaps) */
  /* Compressed calls: this rank's encoded input, and (all_reduce) its
   * encoded chunk of the result. */
  const int8_t* codes;
  const float* scales;
  const int8_t* out_codes;
  const float* out_scales;
  bp_status_t local_status;  /* this rank's own check */
  char local_msg[256];
} slot_t;

typedef struct world {
  bp_kit_sync_t sync;
  int sync_ready;
  int32_t nranks;
  int32_t refs; /* under sync.mu */
  uint64_t timeout_ns;
  bp_kit_barrier_t barrier;
  bp_status_t broken; /* under sync.mu; BP_OK while usable */
  char broken_msg[256];
  slot_t* slots;            /* nranks */
  p2p_msg_t** mail_head;    /* nranks * nranks, index src * nranks + dst */
  p2p_msg_t** mail_tail;
  int32_t* split_color;     /* nranks, for bp_kit_comm_split */
  int32_t* split_key;
  struct world** split_new;
} world_t;

struct bp_kit_comm {
  world_t* w;        /* the in-process world, or NULL when: */
  bp_kit_shm_t* shm; /* the ranks span processes (kit_comm_shm.c) */
  int32_t rank;
  uint64_t one_shot_max; /* all_reduce bytes that run one-shot (link PEER) */
  uint64_t calls;   /* collectives issued by this rank, for messages */
  const void** src; /* nranks: the inputs of a reduction */
  /* Scratch of compressed calls, grown on demand: codes and scales of the
   * input and of the result chunk, the f32 sum of a chunk. */
  int8_t* codes;
  float* scales;
  int8_t* out_codes;
  float* out_scales;
  float* acc;
  uint64_t cap_elems, cap_scales, cap_acc;
  const int8_t** peer_codes; /* nranks */
  const float** peer_scales;
  unsigned char* small; /* one_shot_max bytes: a copy of a small all_reduce input */
};

/* all_reduce up to one_shot_max bytes runs one-shot: every rank reduces
 * the whole vector from copies of the inputs (two barriers); larger ones
 * run reduce-scatter + all-gather (three barriers, 1/n of the reduction
 * work per rank). Latency against bandwidth, as NCCL's one-shot and ring;
 * the crossover depends on the link (bp_kit_comm_one_shot_max): ranks of
 * one process read each other's buffers directly (BP_KIT_LINK_PEER). */
#define ONE_SHOT_CAP (1u << 20)

const char* bp_kit_coll_kind_name(uint32_t kind) {
  static const char* const names[] = {"?",          "all_reduce", "broadcast", "reduce",
                                      "all_gather", "reduce_scatter", "all_to_all",
                                      "all_to_allv", "send", "recv", "barrier"};
  return kind < sizeof(names) / sizeof(names[0]) ? names[kind] : "?";
}

bp_status_t bp_kit_comm_fail(bp_kit_comm_error_t* err, bp_status_t status, const char* fmt,
                             ...) {
  if (err) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err->text, sizeof(err->text), fmt, ap);
    va_end(ap);
  }
  return status;
}

/* ------------------------------------------------------------------------ */
/* Worlds                                                                    */
/* ------------------------------------------------------------------------ */
static void world_free(world_t* w) {
  if (!w) return;
  if (w->sync_ready) bp_kit_sync_destroy(&w->sync);
  free(w->barrier.arrived);
  free(w->slots);
  free(w->mail_head);
  free(w->mail_tail);
  free(w->split_color);
  free(w->split_key);
  free(w->split_new);
  free(w);
}

static world_t* world_new(int32_t nranks, uint64_t timeout_ns) {
  world_t* w = calloc(1, sizeof(*w));
  if (!w) return NULL;
  const size_t n = (size_t)nranks;
  w->nranks = nranks;
  w->refs = nranks;
  w->timeout_ns = timeout_ns;
  w->barrier.n = nranks;
  w->barrier.arrived = calloc(n, 1);
  w->slots = calloc(n, sizeof(slot_t));
  w->mail_head = calloc(n * n, sizeof(p2p_msg_t*));
  w->mail_tail = calloc(n * n, sizeof(p2p_msg_t*));
  w->split_color = calloc(n, sizeof(int32_t));
  w->split_key = calloc(n, sizeof(int32_t));
  w->split_new = calloc(n, sizeof(world_t*));
  w->sync_ready = w->barrier.arrived && w->slots && w->mail_head && w->mail_tail &&
                  w->split_color && w->split_key && w->split_new &&
                  bp_kit_sync_init(&w->sync) == 0;
  if (!w->sync_ready) {
    world_free(w);
    return NULL;
  }
  return w;
}

/* Breaks the world (mu held): the first error wins. */
static void world_break(world_t* w, bp_status_t status, const char* msg) {
  if (w->broken != BP_OK) return;
  w->broken = status;
  snprintf(w->broken_msg, sizeof(w->broken_msg), "%s", msg);
  pthread_cond_broadcast(&w->sync.cv);
}

static bp_kit_comm_t* comm_new(world_t* w, int32_t rank) {
  bp_kit_comm_t* c = calloc(1, sizeof(*c));
  if (!c) return NULL;
  c->src = calloc((size_t)w->nranks, sizeof(void*));
  c->peer_codes = calloc((size_t)w->nranks, sizeof(void*));
  c->peer_scales = calloc((size_t)w->nranks, sizeof(void*));
  if (!c->src || !c->peer_codes || !c->peer_scales) {
    free(c->src);
    free(c->peer_codes);
    free(c->peer_scales);
    free(c);
    return NULL;
  }
  c->w = w;
  c->rank = rank;
  c->one_shot_max = bp_kit_comm_one_shot_max(BP_KIT_LINK_PEER, w->nranks);
  if (c->one_shot_max > ONE_SHOT_CAP) c->one_shot_max = ONE_SHOT_CAP;
  return c;
}

/* Barrier of the world (mu held) for call `what`; a timeout breaks it. */
static bp_status_t world_barrier(bp_kit_comm_t* c, const struct timespec* deadline,
                                 const char* what, bp_kit_comm_error_t* err) {
  world_t* w = c->w;
  char msg[200] = "";
  bp_status_t st = bp_kit_barrier_wait(&w->sync, &w->barrier, c->rank, deadline, &w->broken,
                                       msg, sizeof(msg));
  if (st == BP_DEADLINE_EXCEEDED && w->broken == BP_OK) {
    char full[256];
    snprintf(full, sizeof(full), "%s: rank %d %s after %.3f s; the communicator is broken",
             what, c->rank, msg, (double)w->timeout_ns / 1e9);
    world_break(w, BP_DEADLINE_EXCEEDED, full);
  }
  if (st != BP_OK) return bp_kit_comm_fail(err, w->broken != BP_OK ? w->broken : st, "%s", w->broken_msg);
  return BP_OK;
}

bp_status_t bp_kit_comm_create(const bp_bootstrap_t* bs, uint64_t timeout_ns,
                               bp_kit_comm_t** out_comm, bp_kit_comm_error_t* err) {
  if (!out_comm) return bp_kit_comm_fail(err, BP_INVALID_ARGUMENT, "comm_create: NULL out_comm");
  *out_comm = NULL;
  if (!bs || bs->struct_size < BP_BOOTSTRAP_V1_SIZE || !bs->broadcast || !bs->allgather)
    return bp_kit_comm_fail(err, BP_INVALID_ARGUMENT, "comm_create: missing or incomplete bootstrap");
  if (bs->nranks < 1 || bs->rank < 0 || bs->rank >= bs->nranks)
    return bp_kit_comm_fail(err, BP_INVALID_ARGUMENT, "comm_create: rank %d of %d is out of range",
                bs->rank, bs->nranks);
  /* Rank 0 offers its world; the others accept it only from this process. */
  struct {
    int64_t pid;
    uint64_t world;
    uint64_t timeout_ns;
    int32_t nranks;
    int32_t ok;
  } offer;
  memset(&offer, 0, sizeof(offer));
  world_t* mine = NULL;
  if (bs->rank == 0) {
    mine = world_new(bs->nranks, bp_kit_comm_timeout(timeout_ns));
    offer.pid = (int64_t)getpid();
    offer.world = (uint64_t)(uintptr_t)mine;
    offer.timeout_ns = mine ? mine->timeout_ns : 0;
    offer.nranks = bs->nranks;
  }
  bp_status_t st = bs->broadcast(bs->ctx, &offer, sizeof(offer), 0);
  if (st != BP_OK) {
    world_free(mine);
    return bp_kit_comm_fail(err, st, "comm_create: bootstrap broadcast failed (status %d)", (int)st);
  }
  int32_t ok = offer.world != 0 && offer.pid == (int64_t)getpid() && offer.nranks == bs->nranks;
  int32_t* oks = calloc((size_t)bs->nranks, sizeof(int32_t));
  if (!oks) {
    world_free(mine);
    return bp_kit_comm_fail(err, BP_RESOURCE_EXHAUSTED, "comm_create: out of memory");
  }
  st = bs->allgather(bs->ctx, &ok, oks, sizeof(ok));
  int32_t all_ok = st == BP_OK;
  for (int32_t r = 0; all_ok && r < bs->nranks; ++r) all_ok = oks[r];
  free(oks);
  if (!all_ok) {
    world_free(mine);
    if (st != BP_OK)
      return bp_kit_comm_fail(err, st, "comm_create: bootstrap allgather failed");
    if (offer.world == 0)
      return bp_kit_comm_fail(err, BP_RESOURCE_EXHAUSTED, "comm_create: rank 0 could not allocate the world");
    if (offer.nranks != bs->nranks)
      return bp_kit_comm_fail(err, BP_INVALID_ARGUMENT, "comm_create: rank 0 has %d ranks, this bootstrap "
                  "%d", offer.nranks, bs->nranks);
    /* The ranks span processes: the shared-memory engine (every rank
     * takes this path: each saw the same allgather). */
    bp_kit_shm_t* shm = NULL;
    st = bp_kit_shm_create(bs, timeout_ns, &shm, err);
    if (st != BP_OK) return st;
    bp_kit_comm_t* sc = calloc(1, sizeof(*sc));
    if (!sc) {
      bp_kit_shm_destroy(shm);
      return bp_kit_comm_fail(err, BP_RESOURCE_EXHAUSTED, "comm_create: out of memory");
    }
    sc->shm = shm;
    sc->rank = bs->rank;
    sc->one_shot_max = bp_kit_comm_one_shot_max(BP_KIT_LINK_HOST, bs->nranks);
    *out_comm = sc;
    return BP_OK;
  }
  bp_kit_comm_t* c = comm_new((world_t*)(uintptr_t)offer.world, bs->rank);
  if (!c) {
    /* The world keeps a reference for this rank that nobody will drop;
     * peers still work with it and the last leaver frees it. */
    return bp_kit_comm_fail(err, BP_RESOURCE_EXHAUSTED, "comm_create: out of memory");
  }
  *out_comm = c;
  return BP_OK;
}

void bp_kit_comm_destroy(bp_kit_comm_t* c) {
  if (!c) return;
  if (c->shm) {
    bp_kit_shm_destroy(c->shm);
    free(c);
    return;
  }
  world_t* w = c->w;
  pthread_mutex_lock(&w->sync.mu);
  const int last = --w->refs == 0;
  pthread_mutex_unlock(&w->sync.mu);
  if (last) world_free(w);
  free(c->src);
  free(c->codes);
  free(c->scales);
  free(c->out_codes);
  free(c->out_scales);
  free(c->acc);
  free(c->peer_codes);
  free(c->peer_scales);
  free(c->small);
  free(c);
}

int32_t bp_kit_comm_rank(const bp_kit_comm_t* c) { return c ? c->rank : -1; }
int32_t bp_kit_comm_size(const bp_kit_comm_t* c) {
  return !c ? 0 : c->shm ? bp_kit_shm_size(c->shm) : c->w->nranks;
}
uint64_t bp_kit_comm_one_shot_bytes(const bp_kit_comm_t* c) { return c ? c->one_shot_max : 0; }

void bp_kit_comm_abort(bp_kit_comm_t* c) {
  if (!c) return;
  if (c->shm) {
    bp_kit_shm_abort(c->shm);
    return;
  }
  pthread_mutex_lock(&c->w->sync.mu);
  char msg[96];
  snprintf(msg, sizeof(msg), "the communicator was aborted (by rank %d)", c->rank);
  world_break(c->w, BP_ABORTED, msg);
  pthread_mutex_unlock(&c->w->sync.mu);
}

bp_status_t bp_kit_comm_status(bp_kit_comm_t* c, bp_kit_comm_error_t* err) {
  if (!c) return bp_kit_comm_fail(err, BP_INVALID_ARGUMENT, "NULL communicator");
  if (c->shm) return bp_kit_shm_status(c->shm, err);
  pthread_mutex_lock(&c->w->sync.mu);
  bp_status_t st = c->w->broken;
  if (st != BP_OK) bp_kit_comm_fail(err, st, "%s", c->w->broken_msg);
  pthread_mutex_unlock(&c->w->sync.mu);
  return st;
}

bp_status_t bp_kit_comm_split(bp_kit_comm_t* c, int32_t color, int32_t key, uint64_t timeout_ns,
                              bp_kit_comm_t** out_comm, bp_kit_comm_error_t* err) {
  if (!c || !out_comm) return bp_kit_comm_fail(err, BP_INVALID_ARGUMENT, "comm_split: NULL argument");
  *out_comm = NULL;
  if (color < 0 && color != BP_COMM_SPLIT_NO_COLOR)
    return bp_kit_comm_fail(err, BP_INVALID_ARGUMENT, "comm_split: color %d is negative (only "
                "BP_COMM_SPLIT_NO_COLOR may be)", color);
  if (c->shm) {
    bp_kit_shm_t* shm = NULL;
    bp_status_t st = bp_kit_shm_split(c->shm, c, color, key, timeout_ns, &shm, err);
    if (st != BP_OK || !shm) return st;
    bp_kit_comm_t* sc = calloc(1, sizeof(*sc));
    if (!sc) {
      bp_kit_shm_destroy(shm);
      return bp_kit_comm_fail(err, BP_RESOURCE_EXHAUSTED, "comm_split: out of memory");
    }
    sc->shm = shm;
    sc->rank = bp_kit_shm_rank(shm);
    sc->one_shot_max = bp_kit_comm_one_shot_max(BP_KIT_LINK_HOST, bp_kit_shm_size(shm));
    *out_comm = sc;
    return BP_OK;
  }
  world_t* w = c->w;
  const struct timespec deadline = bp_kit_deadline(w->timeout_ns);
  pthread_mutex_lock(&w->sync.mu);
  w->split_color[c->rank] = color;
  w->split_key[c->rank] = key;
  w->split_new[c->rank] = NULL;
  bp_status_t st = world_barrier(c, &deadline, "comm_split", err);
  /* Members of a color in (key, old rank) order; the first creates. */
  int32_t size = 0, my_index = 0, leader = -1;
  if (st == BP_OK && color != BP_COMM_SPLIT_NO_COLOR) {
    for (int32_t r = 0; r < w->nranks; ++r) {
      if (w->split_color[r] != color) continue;
      if (leader < 0) leader = r;
      ++size;
      if (w->split_key[r] < key || (w->split_key[r] == key && r < c->rank)) ++my_index;
    }
    if (leader == c->rank) {
      /* The world's lock is held: allocation only, nothing blocks. */
      w->split_new[c->rank] = world_new(size, bp_kit_comm_timeout(timeout_ns));
    }
  }
  if (st == BP_OK) st = world_barrier(c, &deadline, "comm_split", err);
  world_t* nw = (st == BP_OK && leader >= 0) ? w->split_new[leader] : NULL;
  if (st == BP_OK) st = world_barrier(c, &deadline, "comm_split", err);
  pthread_mutex_unlock(&w->sync.mu);
  if (st != BP_OK) return st;
  if (color == BP_COMM_SPLIT_NO_COLOR) return BP_OK;
  if (!nw) return bp_kit_comm_fail(err, BP_RESOURCE_EXHAUSTED, "comm_split: out of memory");
  *out_comm = comm_new(nw, my_index);
  if (!*out_comm) return bp_kit_comm_fail(err, BP_RESOURCE_EXHAUSTED, "comm_split: out of memory");
  return BP_OK;
}

/* ------------------------------------------------------------------------ */
/* Checks                                                                    */
/* ------------------------------------------------------------------------ */
static int is_reduction(uint32_t kind) {
  return kind == BP_KIT_COLL_ALL_REDUCE || kind == BP_KIT_COLL_REDUCE ||
         kind == BP_KIT_COLL_REDUCE_SCATTER;
}
static int has_root(uint32_t kind) {
  return kind == BP_KIT_COLL_BROADCAST || kind == BP_KIT_COLL_REDUCE;
}

bp_status_t bp_kit_coll_check(const bp_kit_comm_t* c, const bp_kit_coll_t* call,
                              bp_kit_comm_error_t* err) {
  if (!c || !call) return bp_kit_comm_fail(err, BP_INVALID_ARGUMENT, "NULL communicator or call");
  const int32_t n = bp_kit_comm_size(c);
  const char* name = bp_kit_coll_kind_name(call->kind);
  if (call->kind < BP_KIT_COLL_ALL_REDUCE || call->kind > BP_KIT_COLL_BARRIER)
    return bp_kit_comm_fail(err, BP_INVALID_ARGUMENT, "unknown collective kind %u", call->kind);
  if (call->kind == BP_KIT_COLL_BARRIER) return BP_OK;
  if (bp_dtype_size(call->dtype) == 0)
    return bp_kit_comm_fail(err, BP_INVALID_ARGUMENT, "%s: dtype %u is not a whole-byte dtype", name,
                call->dtype);
  if (is_reduction(call->kind)) {
    if (call->op > BP_REDUCE_AVG)
      return bp_kit_comm_fail(err, BP_INVALID_ARGUMENT, "%s: unknown reduction %u", name, call->op);
    if (!bp_kit_comm_can_reduce(call->dtype))
      return bp_kit_comm_fail(err, BP_UNIMPLEMENTED, "%s: cannot reduce dtype %s", name,
                  bp_dtype_name(call->dtype));
  }
  if (call->compression) {
    const int kind_ok = call->kind == BP_KIT_COLL_ALL_REDUCE ||
                        call->kind == BP_KIT_COLL_ALL_GATHER ||
                        call->kind == BP_KIT_COLL_REDUCE_SCATTER;
    if (!kind_ok)
      return bp_kit_comm_fail(err, BP_INVALID_ARGUMENT, "%s: payload compression applies to all_reduce, "
                  "all_gather and reduce_scatter only", name);
    if (!bp_kit_comm_can_compress(call->dtype, call->compression))
      return bp_kit_comm_fail(err, BP_UNIMPLEMENTED, "%s: cannot compress %s to dtype %u (i8 or "
                  "float8_e4m3fn blocks of f32, f16, bf16, f64)", name,
                  bp_dtype_name(call->dtype), call->compression);
    if (is_reduction(call->kind) && call->op != BP_REDUCE_SUM && call->op != BP_REDUCE_AVG)
      return bp_kit_comm_fail(err, BP_UNIMPLEMENTED, "%s: compressed reductions are SUM and AVG", name);
    if (call->block == 0 || call->block > (1u << 24))
      return bp_kit_comm_fail(err, BP_INVALID_ARGUMENT, "%s: compression block %u (1 to 2^24)", name,
                  call->block);
  }
  if ((has_root(call->kind) || call->kind == BP_KIT_COLL_SEND ||
       call->kind == BP_KIT_COLL_RECV) &&
      (call->root < 0 || call->root >= n))
    return bp_kit_comm_fail(err, BP_INVALID_ARGUMENT, "%s: %s %d is out of range for %d ranks", name,
                has_root(call->kind) ? "root" : "peer", call->root, n);
  if ((call->kind == BP_KIT_COLL_SEND || call->kind == BP_KIT_COLL_RECV) &&
      call->root == c->rank)
    return bp_kit_comm_fail(err, BP_INVALID_ARGUMENT, "%s: rank %d names itself as the peer", name,
                c->rank);
  if (call->kind == BP_KIT_COLL_ALL_TO_ALLV &&
      (!call->send_counts || !call->send_displs || !call->recv_counts || !call->recv_displs))
    return bp_kit_comm_fail(err, BP_INVALID_ARGUMENT, "all_to_allv: NULL counts or displacements");
  uint64_t total = call->count;
  if (call->kind == BP_KIT_COLL_ALL_GATHER || call->kind == BP_KIT_COLL_REDUCE_SCATTER ||
      call->kind == BP_KIT_COLL_ALL_TO_ALL) {
    if (call->count > UINT64_MAX / (uint64_t)n)
      return bp_kit_comm_fail(err, BP_OUT_OF_RANGE, "%s: %llu elements per rank overflow", name,
                  (unsigned long long)call->count);
    total = call->count * (uint64_t)n;
  }
  if (total > (UINT64_MAX >> 4) / bp_dtype_size(call->dtype))
    return bp_kit_comm_fail(err, BP_OUT_OF_RANGE, "%s: %llu elements overflow a byte size", name,
                (unsigned long long)total);
  return BP_OK;
}

/* The same verdict on every rank: the first rank whose call disagrees with
 * rank 0's (or failed its own check), described identically. */
bp_status_t bp_kit_coll_agree(int32_t n, const bp_kit_coll_t* (*get)(const void* user, int32_t r,
                                                                      bp_status_t* status,
                                                                      const char** msg),
                              const void* user, const char* what, bp_kit_comm_error_t* err) {
  for (int32_t r = 0; r < n; ++r) {
    bp_status_t st;
    const char* msg;
    get(user, r, &st, &msg);
    if (st != BP_OK) return bp_kit_comm_fail(err, st, "%s: rank %d: %s", what, r, msg);
  }
  bp_status_t st0;
  const char* msg0;
  const bp_kit_coll_t* a = get(user, 0, &st0, &msg0);
  for (int32_t r = 1; r < n; ++r) {
    const bp_kit_coll_t* b = get(user, r, &st0, &msg0);
    if (a->kind != b->kind)
      return bp_kit_comm_fail(err, BP_INVALID_ARGUMENT, "%s: mismatch: rank 0 called %s, rank %d called %s",
                  what, bp_kit_coll_kind_name(a->kind), r, bp_kit_coll_kind_name(b->kind));
    if (a->kind == BP_KIT_COLL_BARRIER) continue;
    if (a->dtype != b->dtype)
      return bp_kit_comm_fail(err, BP_INVALID_ARGUMENT, "%s: mismatch: rank 0 passed %s, rank %d passed %s",
                  what, bp_dtype_name(a->dtype), r, bp_dtype_name(b->dtype));
    if (a->kind != BP_KIT_COLL_ALL_TO_ALLV && a->count != b->count)
      return bp_kit_comm_fail(err, BP_INVALID_ARGUMENT,
                  "%s: mismatch: rank 0 passed %llu elements, rank %d passed %llu", what,
                  (unsigned long long)a->count, r, (unsigned long long)b->count);
    if (is_reduction(a->kind) && a->op != b->op)
      return bp_kit_comm_fail(err, BP_INVALID_ARGUMENT, "%s: mismatch: rank 0 reduces with op %u, rank %d "
                  "with op %u", what, a->op, r, b->op);
    if (a->compression != b->compression || (a->compression && a->block != b->block))
      return bp_kit_comm_fail(err, BP_INVALID_ARGUMENT, "%s: mismatch: rank 0 compresses to %u in blocks of "
                  "%u, rank %d to %u in blocks of %u", what, a->compression, a->block, r,
                  b->compression, b->block);
    if (has_root(a->kind) && a->root != b->root)
      return bp_kit_comm_fail(err, BP_INVALID_ARGUMENT, "%s: mismatch: rank 0 names root %d, rank %d "
                  "names root %d", what, a->root, r, b->root);
  }
  if (a->kind == BP_KIT_COLL_ALL_TO_ALLV)
    for (int32_t p = 0; p < n; ++p)
      for (int32_t q = 0; q < n; ++q) {
        const uint64_t sent = get(user, p, &st0, &msg0)->send_counts[q];
        const uint64_t expected = get(user, q, &st0, &msg0)->recv_counts[p];
        if (sent != expected)
          return bp_kit_comm_fail(err, BP_INVALID_ARGUMENT,
                      "%s: mismatch: rank %d sends %llu elements to rank %d, which expects "
                      "%llu", what, p, (unsigned long long)sent, q,
                      (unsigned long long)expected);
      }
  return BP_OK;
}

static const bp_kit_coll_t* slot_call(const void* user, int32_t r, bp_status_t* status,
                                      const char** msg) {
  const slot_t* slot = &((const world_t*)user)->slots[r];
  *status = slot->local_status;
  *msg = slot->local_msg;
  return slot->call;
}

/* ------------------------------------------------------------------------ */
/* Collectives                                                               */
/* ------------------------------------------------------------------------ */
void bp_kit_comm_chunk(uint64_t count, int32_t n, int32_t r, uint64_t* begin, uint64_t* len) {
  const uint64_t base = count / (uint64_t)n, extra = count % (uint64_t)n;
  const uint64_t ur = (uint64_t)r;
  *begin = ur * base + (ur < extra ? ur : extra);
  *len = base + (ur < extra ? 1 : 0);
}

static const unsigned char* at(const void* p, uint64_t elems, uint64_t esize) {
  return (const unsigned char*)p + elems * esize;
}

/* Reduces `len` elements at offset `src_off` of every rank's input, in
 * rank order, into dst. */
static void reduce_range(bp_kit_comm_t* c, const bp_kit_coll_t* me, void* dst,
                         uint64_t src_off, uint64_t len) {
  world_t* w = c->w;
  const uint64_t es = bp_dtype_size(me->dtype);
  for (int32_t q = 0; q < w->nranks; ++q) c->src[q] = at(w->slots[q].send, src_off, es);
  bp_kit_comm_reduce(me->dtype, me->op, dst, c->src, (uint32_t)w->nranks, len);
}

/* ---- compressed calls (kit_comm_quant.c) ---- */
static int grow_scratch(bp_kit_comm_t* c, uint64_t elems, uint64_t ns, uint64_t acc) {
  if (elems > c->cap_elems) {
    int8_t* a = realloc(c->codes, (size_t)elems);
    if (a) c->codes = a;
    int8_t* b = realloc(c->out_codes, (size_t)elems);
    if (b) c->out_codes = b;
    if (!a || !b) return 0;
    c->cap_elems = elems;
  }
  if (ns > c->cap_scales) {
    float* d = realloc(c->scales, sizeof(float) * (size_t)ns);
    if (d) c->scales = d;
    float* e = realloc(c->out_scales, sizeof(float) * (size_t)ns);
    if (e) c->out_scales = e;
    if (!d || !e) return 0;
    c->cap_scales = ns;
  }
  if (acc > c->cap_acc) {
    float* f = realloc(c->acc, sizeof(float) * (size_t)acc);
    if (!f) return 0;
    c->acc = f;
    c->cap_acc = acc;
  }
  return 1;
}

/* The elements [b, e) of chunk r of `count` elements: whole blocks (the
 * compressed all_reduce's share of rank r, in both engines). */
void bp_kit_comm_block_chunk(uint64_t count, uint32_t block, int32_t n, int32_t r, uint64_t* b,
                             uint64_t* e) {
  const uint64_t nb = bp_kit_comm_scale_count(count, block);
  uint64_t bb, bl;
  bp_kit_comm_chunk(nb, n, r, &bb, &bl);
  /* A rank past the last block (more ranks than blocks) gets [count, count). */
  *b = bb * block < count ? bb * block : count;
  *e = (bb + bl) * block < count ? (bb + bl) * block : count;
}

static void phase1_compressed(bp_kit_comm_t* c, const bp_kit_coll_t* me) {
  world_t* w = c->w;
  const int32_t r = c->rank, n = w->nranks;
  /* reduce_scatter: segment r of every rank, its blocks counted from the
   * segment's start (as across processes). */
  const int rs = me->kind == BP_KIT_COLL_REDUCE_SCATTER;
  const uint64_t seg_codes = rs ? (uint64_t)r * me->count : 0;
  const uint64_t seg_scales = rs ? (uint64_t)r * bp_kit_comm_scale_count(me->count, me->block) : 0;
  for (int32_t q = 0; q < n; ++q) {
    c->peer_codes[q] = w->slots[q].codes + seg_codes;
    c->peer_scales[q] = w->slots[q].scales + seg_scales;
  }
  if (me->kind == BP_KIT_COLL_ALL_GATHER) {
    for (int32_t q = 0; q < n; ++q)
      bp_kit_comm_decode(me->dtype, me->compression, me->block, c->peer_codes[q],
                         c->peer_scales[q], 0, me->count, me->recv, (uint64_t)q * me->count);
    return;
  }
  uint64_t b = 0, e = me->count;
  if (me->kind == BP_KIT_COLL_ALL_REDUCE)
    bp_kit_comm_block_chunk(me->count, me->block, n, r, &b, &e);
  bp_kit_comm_decode_sum(me->compression, me->block, c->peer_codes, c->peer_scales,
                         (uint32_t)n, b, e - b, c->acc);
  if (me->op == BP_REDUCE_AVG)
    for (uint64_t i = 0; i < e - b; ++i) c->acc[i] /= (float)n;
  if (me->kind == BP_KIT_COLL_REDUCE_SCATTER) {
    bp_kit_comm_store_floats(me->dtype, c->acc, e - b, me->recv, 0);
    return;
  }
  /* all_reduce: the chunk travels encoded again; every rank, this one
   * included, takes the decoded values, so all agree bit for bit. */
  bp_kit_comm_encode(BP_DTYPE_F32, me->compression, me->block, c->acc, 0, e - b,
                     c->out_codes + b, c->out_scales + b / me->block);
  bp_kit_comm_decode(me->dtype, me->compression, me->block, c->out_codes, c->out_scales, b,
                     e - b, me->recv, b);
}

static void phase2_compressed(bp_kit_comm_t* c, const bp_kit_coll_t* me) {
  world_t* w = c->w;
  for (int32_t q = 0; q < w->nranks; ++q) {
    if (q == c->rank) continue;
    uint64_t b, e;
    bp_kit_comm_block_chunk(me->count, me->block, w->nranks, q, &b, &e);
    bp_kit_comm_decode(me->dtype, me->compression, me->block, w->slots[q].out_codes,
                       w->slots[q].out_scales, b, e - b, me->recv, b);
  }
}

static int one_shot(const bp_kit_comm_t* c, const bp_kit_coll_t* me) {
  return me->kind == BP_KIT_COLL_ALL_REDUCE && !me->compression &&
         bp_kit_coll_bytes(me->dtype, me->count) <= c->one_shot_max;
}

/* In place (the root's broadcast, this rank's all_gather block) the
 * bytes are already there, and peers are reading them: no self-copy,
 * which would be a write racing with their reads. */
static void copy_unless_same(void* dst, const void* src, uint64_t bytes) {
  if (dst != src && bytes) memmove(dst, src, bytes);
}

/* Phase 1: this rank's share. */
static void phase1(bp_kit_comm_t* c, const bp_kit_coll_t* me) {
  world_t* w = c->w;
  const int32_t r = c->rank, n = w->nranks;
  const uint64_t es = bp_dtype_size(me->dtype);
  uint64_t b, len;
  switch (me->kind) {
    case BP_KIT_COLL_ALL_REDUCE:
      if (one_shot(c, me)) {
        reduce_range(c, me, me->recv, 0, me->count);
        break;
      }
      bp_kit_comm_chunk(me->count, n, r, &b, &len);
      reduce_range(c, me, (unsigned char*)me->recv + b * es, b, len);
      break;
    case BP_KIT_COLL_REDUCE: {
      bp_kit_comm_chunk(me->count, n, r, &b, &len);
      void* root_recv = w->slots[me->root].call->recv;
      reduce_range(c, me, (unsigned char*)root_recv + b * es, b, len);
      break;
    }
    case BP_KIT_COLL_REDUCE_SCATTER:
      reduce_range(c, me, me->recv, (uint64_t)r * me->count, me->count);
      break;
    case BP_KIT_COLL_BROADCAST:
      copy_unless_same(me->recv, w->slots[me->root].send, me->count * es);
      break;
    case BP_KIT_COLL_ALL_GATHER:
      for (int32_t q = 0; q < n; ++q)
        copy_unless_same((unsigned char*)me->recv + (uint64_t)q * me->count * es,
                         w->slots[q].send, me->count * es);
      break;
    case BP_KIT_COLL_ALL_TO_ALL:
      for (int32_t q = 0; q < n; ++q)
        memcpy((unsigned char*)me->recv + (uint64_t)q * me->count * es,
               at(w->slots[q].send, (uint64_t)r * me->count, es), me->count * es);
      break;
    case BP_KIT_COLL_ALL_TO_ALLV:
      for (int32_t q = 0; q < n; ++q) {
        const bp_kit_coll_t* peer = w->slots[q].call;
        memcpy((unsigned char*)me->recv + me->recv_displs[q] * es,
               at(w->slots[q].send, peer->send_displs[r], es), me->recv_counts[q] * es);
      }
      break;
    default:
      break;
  }
}

/* Phase 2 (all_reduce): the other ranks' chunks. */
static void phase2(world_t* w, int32_t r, const bp_kit_coll_t* me) {
  const uint64_t es = bp_dtype_size(me->dtype);
  for (int32_t q = 0; q < w->nranks; ++q) {
    if (q == r) continue;
    uint64_t b, len;
    bp_kit_comm_chunk(me->count, w->nranks, q, &b, &len);
    memcpy((unsigned char*)me->recv + b * es, at(w->slots[q].call->recv, b, es), len * es);
  }
}

/* all_to_all(v) reads peers' inputs while they write their outputs: an
 * input overlapping this rank's output is copied first. */
uint64_t bp_kit_coll_extent(const bp_kit_coll_t* call, int32_t n, const uint64_t* counts,
                            const uint64_t* displs) {
  if (call->kind == BP_KIT_COLL_ALL_TO_ALL) return call->count * (uint64_t)n;
  uint64_t end = 0;
  for (int32_t q = 0; q < n; ++q)
    if (displs[q] + counts[q] > end) end = displs[q] + counts[q];
  return end;
}

static bp_status_t run_collective(bp_kit_comm_t* c, const bp_kit_coll_t* call,
                                  bp_kit_comm_error_t* err) {
  world_t* w = c->w;
  char what[64];
  snprintf(what, sizeof(what), "%s #%llu", bp_kit_coll_kind_name(call->kind),
           (unsigned long long)c->calls);
  slot_t* s = &w->slots[c->rank];
  bp_kit_comm_error_t local;
  bp_status_t local_status = bp_kit_coll_check(c, call, &local);
  void* copy = NULL;
  const void* input = call->send;
  if (local_status == BP_OK &&
      (call->kind == BP_KIT_COLL_ALL_TO_ALL || call->kind == BP_KIT_COLL_ALL_TO_ALLV)) {
    const uint64_t es = bp_dtype_size(call->dtype);
    const uint64_t in_bytes = bp_kit_coll_extent(call, w->nranks, call->send_counts, call->send_displs) * es;
    const uint64_t out_bytes = bp_kit_coll_extent(call, w->nranks, call->recv_counts, call->recv_displs) * es;
    const uintptr_t i0 = (uintptr_t)call->send, o0 = (uintptr_t)call->recv;
    if (in_bytes && out_bytes && i0 < o0 + out_bytes && o0 < i0 + in_bytes) {
      copy = malloc(in_bytes);
      if (copy)
        memcpy(copy, call->send, in_bytes);
      else
        local_status = bp_kit_comm_fail(&local, BP_RESOURCE_EXHAUSTED, "out of memory copying the input");
      input = copy;
    }
  }
  if (local_status == BP_OK && one_shot(c, call)) {
    /* Peers read this copy while this rank writes its output in place. */
    if (!c->small) c->small = malloc(c->one_shot_max ? c->one_shot_max : 1);
    if (!c->small)
      local_status = bp_kit_comm_fail(&local, BP_RESOURCE_EXHAUSTED, "out of memory");
    else {
      const uint64_t bytes = bp_kit_coll_bytes(call->dtype, call->count);
      if (bytes) memcpy(c->small, call->send, bytes);
      input = c->small;
    }
  }
  if (local_status == BP_OK && call->compression) {
    /* Encode this rank's input (peers decode it after barrier A). */
    /* reduce_scatter: n segments, each in blocks from its start. */
    const uint64_t segs = call->kind == BP_KIT_COLL_REDUCE_SCATTER ? (uint64_t)w->nranks : 1;
    const uint64_t seg_scales = bp_kit_comm_scale_count(call->count, call->block);
    const uint64_t in = call->count * segs;
    const uint64_t acc = call->kind == BP_KIT_COLL_ALL_GATHER ? 0 : call->count;
    if (!grow_scratch(c, in ? in : 1, seg_scales * segs + 1, acc ? acc : 1))
      local_status = bp_kit_comm_fail(&local, BP_RESOURCE_EXHAUSTED, "out of memory for the compression");
    else
      for (uint64_t q = 0; q < segs; ++q)
        bp_kit_comm_encode(call->dtype, call->compression, call->block, call->send,
                           q * call->count, call->count, c->codes + q * call->count,
                           c->scales + q * seg_scales);
  }
  const struct timespec deadline = bp_kit_deadline(w->timeout_ns);
  pthread_mutex_lock(&w->sync.mu);
  s->call = call;
  s->send = input;
  s->codes = c->codes;
  s->scales = c->scales;
  s->out_codes = c->out_codes;
  s->out_scales = c->out_scales;
  s->local_status = local_status;
  snprintf(s->local_msg, sizeof(s->local_msg), "%s", local_status ? local.text : "");
  bp_status_t st = world_barrier(c, &deadline, what, err); /* A */
  bp_status_t verdict = st == BP_OK ? bp_kit_coll_agree(w->nranks, slot_call, w, what, err) : st;
  pthread_mutex_unlock(&w->sync.mu);
  if (st == BP_OK) {
    /* Barrier B also keeps every slot unchanged until all ranks checked. */
    if (verdict == BP_OK) {
      if (call->compression)
        phase1_compressed(c, call);
      else
        phase1(c, call);
    }
    pthread_mutex_lock(&w->sync.mu);
    st = world_barrier(c, &deadline, what, verdict == BP_OK ? err : NULL); /* B */
    pthread_mutex_unlock(&w->sync.mu);
    if (verdict != BP_OK) st = verdict;
    if (st == BP_OK && call->kind == BP_KIT_COLL_ALL_REDUCE && !one_shot(c, call)) {
      if (call->compression)
        phase2_compressed(c, call);
      else
        phase2(w, c->rank, call);
      pthread_mutex_lock(&w->sync.mu);
      st = world_barrier(c, &deadline, what, err); /* C */
      pthread_mutex_unlock(&w->sync.mu);
    }
  }
  free(copy);
  return st;
}

/* ------------------------------------------------------------------------ */
/* Point to point                                                            */
/* ------------------------------------------------------------------------ */
static void post_send(world_t* w, int32_t from, const bp_kit_coll_t* call, p2p_msg_t* m) {
  memset(m, 0, sizeof(*m));
  m->data = call->send;
  m->count = call->count;
  m->dtype = call->dtype;
  const size_t box = (size_t)from * (size_t)w->nranks + (size_t)call->root;
  pthread_mutex_lock(&w->sync.mu);
  if (w->mail_tail[box])
    w->mail_tail[box]->next = m;
  else
    w->mail_head[box] = m;
  w->mail_tail[box] = m;
  pthread_cond_broadcast(&w->sync.cv);
  pthread_mutex_unlock(&w->sync.mu);
}

/* Waits (mu held) for `cond`; a timeout breaks the world. */
#define WAIT_FOR(c, cond, deadline, what, err, st)                                      \
  do {                                                                                   \
    while (!(cond) && (c)->w->broken == BP_OK) {                                         \
      if (bp_kit_sync_wait(&(c)->w->sync, (deadline)) && !(cond)) {                      \
        char m_[200];                                                                    \
        snprintf(m_, sizeof(m_), "%s: rank %d timed out after %.3f s; the communicator " \
                 "is broken", (what), (c)->rank, (double)(c)->w->timeout_ns / 1e9);      \
        world_break((c)->w, BP_DEADLINE_EXCEEDED, m_);                                   \
      }                                                                                  \
    }                                                                                    \
    (st) = (cond) ? BP_OK : bp_kit_comm_fail((err), (c)->w->broken, "%s", (c)->w->broken_msg);       \
  } while (0)

/* Waits until the receiver took `m`; a posted message is never left
 * behind: on a broken world it is unlinked first. */
static bp_status_t finish_send(bp_kit_comm_t* c, const bp_kit_coll_t* call, p2p_msg_t* m,
                               const struct timespec* deadline, bp_kit_comm_error_t* err) {
  world_t* w = c->w;
  char what[64];
  snprintf(what, sizeof(what), "send to rank %d", call->root);
  bp_status_t st;
  pthread_mutex_lock(&w->sync.mu);
  WAIT_FOR(c, m->done, deadline, what, err, st);
  if (!m->done) { /* unlink */
    const size_t box = (size_t)c->rank * (size_t)w->nranks + (size_t)call->root;
    p2p_msg_t** pp = &w->mail_head[box];
    p2p_msg_t* prev = NULL;
    while (*pp && *pp != m) {
      prev = *pp;
      pp = &(*pp)->next;
    }
    if (*pp) {
      *pp = m->next;
      if (w->mail_tail[box] == m) w->mail_tail[box] = prev;
    } else {
      /* The receiver took it and is copying: `m` lives on this thread's
       * stack, so wait for the copy to end whatever the world's state. */
      while (!m->done) pthread_cond_wait(&w->sync.cv, &w->sync.mu);
    }
  } else if (m->status != BP_OK) {
    st = bp_kit_comm_fail(err, m->status, "send to rank %d: %llu %s elements, the receiver expected a "
              "different count or dtype", call->root, (unsigned long long)m->count,
              bp_dtype_name(m->dtype));
  }
  pthread_mutex_unlock(&w->sync.mu);
  return st;
}

static bp_status_t run_recv(bp_kit_comm_t* c, const bp_kit_coll_t* call,
                            const struct timespec* deadline, bp_kit_comm_error_t* err) {
  world_t* w = c->w;
  const size_t box = (size_t)call->root * (size_t)w->nranks + (size_t)c->rank;
  char what[64];
  snprintf(what, sizeof(what), "recv from rank %d", call->root);
  bp_status_t st;
  pthread_mutex_lock(&w->sync.mu);
  WAIT_FOR(c, w->mail_head[box] != NULL, deadline, what, err, st);
  p2p_msg_t* m = st == BP_OK ? w->mail_head[box] : NULL;
  if (m) {
    w->mail_head[box] = m->next;
    if (!m->next) w->mail_tail[box] = NULL;
  }
  pthread_mutex_unlock(&w->sync.mu);
  if (!m) return st;
  if (m->dtype != call->dtype || m->count != call->count) {
    st = bp_kit_comm_fail(err, BP_INVALID_ARGUMENT, "recv from rank %d: it sent %llu %s elements, this "
              "rank expects %llu %s", call->root, (unsigned long long)m->count,
              bp_dtype_name(m->dtype), (unsigned long long)call->count,
              bp_dtype_name(call->dtype));
  } else {
    memmove(call->recv, m->data, bp_kit_coll_bytes(call->dtype, call->count));
  }
  pthread_mutex_lock(&w->sync.mu);
  m->status = st == BP_OK ? BP_OK : BP_INVALID_ARGUMENT;
  m->done = 1;
  pthread_cond_broadcast(&w->sync.cv);
  pthread_mutex_unlock(&w->sync.mu);
  return st;
}

/* ------------------------------------------------------------------------ */
/* Groups                                                                    */
/* ------------------------------------------------------------------------ */
bp_status_t bp_kit_comm_run(bp_kit_comm_t* c, const bp_kit_coll_t* calls, uint32_t n,
                            bp_kit_comm_error_t* err) {
  if (!c || (n && !calls)) return bp_kit_comm_fail(err, BP_INVALID_ARGUMENT, "comm_run: NULL argument");
  if (c->shm) return bp_kit_shm_run(c->shm, c, calls, n, err);
  uint32_t sends = 0;
  for (uint32_t i = 0; i < n; ++i) {
    if (calls[i].kind != BP_KIT_COLL_SEND && calls[i].kind != BP_KIT_COLL_RECV) continue;
    bp_status_t st = bp_kit_coll_check(c, &calls[i], err);
    if (st != BP_OK) return st; /* nothing posted yet: peers time out on their side */
    sends += calls[i].kind == BP_KIT_COLL_SEND;
  }
  p2p_msg_t stack_msgs[8];
  p2p_msg_t* msgs = sends <= 8 ? stack_msgs : malloc(sizeof(p2p_msg_t) * sends);
  if (!msgs) return bp_kit_comm_fail(err, BP_RESOURCE_EXHAUSTED, "comm_run: out of memory");
  const struct timespec deadline = bp_kit_deadline(c->w->timeout_ns);
  uint32_t k = 0;
  for (uint32_t i = 0; i < n; ++i)
    if (calls[i].kind == BP_KIT_COLL_SEND) post_send(c->w, c->rank, &calls[i], &msgs[k++]);
  bp_status_t first = BP_OK;
  bp_kit_comm_error_t e;
  for (uint32_t i = 0; i < n; ++i) {
    bp_status_t st = BP_OK;
    if (calls[i].kind == BP_KIT_COLL_SEND) continue;
    if (calls[i].kind == BP_KIT_COLL_RECV) {
      st = run_recv(c, &calls[i], &deadline, &e);
    } else {
      ++c->calls;
      st = run_collective(c, &calls[i], &e);
    }
    if (st != BP_OK && first == BP_OK) {
      first = st;
      if (err) *err = e;
    }
  }
  k = 0;
  for (uint32_t i = 0; i < n; ++i) {
    if (calls[i].kind != BP_KIT_COLL_SEND) continue;
    bp_status_t st = finish_send(c, &calls[i], &msgs[k++], &deadline, &e);
    if (st != BP_OK && first == BP_OK) {
      first = st;
      if (err) *err = e;
    }
  }
  if (msgs != stack_msgs) free(msgs);
  return first;
}

bp_status_t bp_kit_group_for_each(const void* items, uint32_t n, size_t stride,
                                  bp_status_t (*issue)(void* user, const uint32_t* idx,
                                                       uint32_t k),
                                  void* user) {
  if (n == 0) return BP_OK;
  uint32_t* idx = malloc(sizeof(uint32_t) * n);
  uint8_t* done = calloc(n, 1);
  bp_status_t first = (!idx || !done) ? BP_RESOURCE_EXHAUSTED : BP_OK;
  const unsigned char* base = items;
  for (uint32_t i = 0; first != BP_RESOURCE_EXHAUSTED && i < n; ++i) {
    if (done[i]) continue;
    const bp_kit_group_key_t* ki = (const void*)(base + i * stride);
    uint32_t k = 0;
    for (uint32_t j = i; j < n; ++j) {
      const bp_kit_group_key_t* kj = (const void*)(base + j * stride);
      if (!done[j] && kj->comm == ki->comm && kj->stream == ki->stream) {
        idx[k++] = j;
        done[j] = 1;
      }
    }
    bp_status_t st = issue(user, idx, k);
    if (st != BP_OK && first == BP_OK) first = st;
  }
  free(idx);
  free(done);
  return first;
}
