/* backplane plugin kit: collectives between processes of one machine over a
 * shared-memory segment (kit_comm_shm.h).
 *
 * Segment layout (offsets fixed by the rank count and the sizes in the
 * head, which rank 0 writes before anyone else maps it):
 *   head          magic, sizes, the bell (futex word), the broken state
 *   rank[n]       barrier epoch, pid, the call header of each rank
 *   counts[n][2n] all_to_allv send and recv counts of each rank
 *   chan[n][n]    byte-stream state of the channel src -> dst
 *   ring[n][n]    the channels' ring buffers (chan_bytes each)
 *   slot[n]       the data slots (slot_bytes each)
 * Collectives run in rounds: each rank copies its part of the round into
 * its own slot, a barrier, each rank reads what it needs from the peers'
 * slots into its output, a barrier (all_reduce by reduce-scatter +
 * all-gather has a third step: the reduced chunks go into the second half
 * of the slot). A barrier is "every rank's epoch reached mine"; waits spin
 * briefly, then sleep on the bell, which every state change rings.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <linux/futex.h>
#include <sched.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "bp_plugin_common.h"
#include "kit_comm_shm.h"
#include "kit_comm_sync.h"

#define SHM_MAGIC 0x6270736d6d6f6331ull /* "bpsmmoc1" */
#define DEFAULT_SLOT_BYTES (4u << 20)
#define CHAN_BYTES (256u << 10)
#define MSG_HEADER 16u
/* Messages a sender may have in a channel before the receiver acked them
 * (the acknowledgement ring holds twice as many statuses). */
#define MAX_IN_FLIGHT 32u
#define ACK_RING 64u
#define LIVENESS_NS 20000000ll /* a waiter checks its peers' processes this often */

typedef struct shm_head {
  uint64_t magic;
  int32_t nranks;
  int32_t pad;
  uint64_t slot_bytes;
  uint64_t chan_bytes;
  uint64_t total_bytes;
  _Atomic uint32_t bell;
  _Atomic uint32_t waiters;
  _Atomic int32_t breaking; /* 1 once some rank writes broken_msg */
  _Atomic int32_t broken;   /* bp_status_t, BP_OK while usable */
  char broken_msg[256];
} shm_head_t;

typedef struct shm_rank {
  _Alignas(64) _Atomic uint64_t epoch;
  int64_t pid;
  uint64_t pid_ns; /* inode of the process's PID namespace (0: unknown) */
  /* The header of this rank's current collective (valid from its barrier
   * A to the next barrier): the call without its pointers. */
  bp_kit_coll_t call;
  uint64_t max_block; /* all_to_allv: the largest block this rank sends */
  int32_t local_status;
  char local_msg[256];
} shm_rank_t;

typedef struct shm_chan {
  _Alignas(64) _Atomic uint64_t head; /* bytes written by the sender */
  _Alignas(64) _Atomic uint64_t tail; /* bytes consumed by the receiver */
  _Atomic uint64_t acked;             /* messages the receiver finished */
  int32_t status[ACK_RING];           /* their verdicts, by message index */
} shm_chan_t;

/* A send of the current group, written into its channel as the ring has
 * room (during any wait of this rank). */
typedef struct pending_send {
  const bp_kit_coll_t* call;
  uint64_t seq;     /* message index on its channel */
  uint64_t written; /* bytes of header + payload written */
  uint64_t total;
  unsigned char header[MSG_HEADER];
} pending_send_t;

struct bp_kit_shm {
  unsigned char* base;
  size_t map_bytes;
  shm_head_t* head;
  shm_rank_t* ranks;
  uint64_t* counts;
  shm_chan_t* chans;
  unsigned char* rings;
  unsigned char* slots;
  int32_t n, rank;
  uint64_t timeout_ns;
  uint64_t epoch;     /* barriers this rank has entered */
  uint64_t calls;     /* collectives, for messages */
  uint64_t* sent;     /* n: messages this rank sent to each peer */
  uint64_t* recvd;    /* n: messages this rank received from each peer */
  const void** src;   /* n: the inputs of one reduction */
  bp_kit_coll_t* peer_calls; /* n: headers as calls, for the agreement check */
  pending_send_t* sends;
  uint32_t nsends, cap_sends;
  /* Compressed calls: n peer pointers each, and the f32 sums (cap_acc
   * floats, grown on demand). */
  const int8_t** peer_codes;
  const float** peer_scales;
  float* acc;
  uint64_t cap_acc;
  struct timespec last_liveness;
  /* n: whether this rank watches peer q's process: it shares this
   * process's PID namespace (a pid from another one means nothing here;
   * such a peer is left to the timeout). */
  uint8_t* watch;
};

/* ------------------------------------------------------------------------ */
/* The bell, breaking, waiting                                               */
/* ------------------------------------------------------------------------ */
static void ring_bell(bp_kit_shm_t* s) {
  atomic_fetch_add(&s->head->bell, 1);
  if (atomic_load(&s->head->waiters))
    syscall(SYS_futex, &s->head->bell, FUTEX_WAKE, INT32_MAX, NULL, NULL, 0);
}

/* The first error wins; every waiter of every process wakes. */
static void shm_break(bp_kit_shm_t* s, bp_status_t status, const char* msg) {
  int32_t expected = 0;
  if (atomic_compare_exchange_strong(&s->head->breaking, &expected, 1)) {
    snprintf(s->head->broken_msg, sizeof(s->head->broken_msg), "%s", msg);
    atomic_store_explicit(&s->head->broken, (int32_t)status, memory_order_release);
  }
  ring_bell(s);
}

static bp_status_t broken_status(bp_kit_shm_t* s) {
  return (bp_status_t)atomic_load_explicit(&s->head->broken, memory_order_acquire);
}

static int64_t ns_until(const struct timespec* deadline) {
  struct timespec now;
  clock_gettime(CLOCK_MONOTONIC, &now);
  return (int64_t)(deadline->tv_sec - now.tv_sec) * 1000000000ll +
         (deadline->tv_nsec - now.tv_nsec);
}

/* Whether process `pid` is gone (or a zombie: exited, not yet reaped). */
static int process_gone(int64_t pid) {
  if (pid <= 0) return 0;
  char path[64], buf[256];
  snprintf(path, sizeof(path), "/proc/%lld/stat", (long long)pid);
  FILE* f = fopen(path, "r");
  if (!f) return errno == ENOENT;
  const size_t got = fread(buf, 1, sizeof(buf) - 1, f);
  fclose(f);
  buf[got] = '\0';
  const char* close = strrchr(buf, ')');
  return close && close[1] == ' ' && (close[2] == 'Z' || close[2] == 'X');
}

/* The inode of this process's PID namespace (0: unknown). */
static uint64_t pid_namespace(void) {
  struct stat st;
  return stat("/proc/self/ns/pid", &st) == 0 ? (uint64_t)st.st_ino : 0;
}

/* Breaks the communicator when a peer's process is gone. */
static void check_peers(bp_kit_shm_t* s, const char* what) {
  for (int32_t q = 0; q < s->n; ++q) {
    if (q == s->rank || !s->watch[q] || !process_gone(s->ranks[q].pid)) continue;
    char msg[256];
    snprintf(msg, sizeof(msg), "%s: rank %d (process %lld) exited; the communicator is broken",
             what, q, (long long)s->ranks[q].pid);
    shm_break(s, BP_ABORTED, msg);
    return;
  }
}

static void progress_sends(bp_kit_shm_t* s);

/* Waits until ready(s, arg), the deadline (which breaks the communicator
 * with `missing` describing who is late), a broken communicator or a dead
 * peer. Pending sends of this rank advance meanwhile. */
static bp_status_t shm_wait(bp_kit_shm_t* s, int (*ready)(bp_kit_shm_t*, const void*),
                            const void* arg,
                            void (*missing)(bp_kit_shm_t*, const void*, char*, size_t),
                            const struct timespec* deadline, const char* what,
                            bp_kit_comm_error_t* err) {
  for (uint32_t spin = 0;; ++spin) {
    if (s->nsends) progress_sends(s);
    const uint32_t bell = atomic_load(&s->head->bell);
    if (ready(s, arg)) return BP_OK;
    const bp_status_t b = broken_status(s);
    if (b != BP_OK) return bp_kit_comm_fail(err, b, "%s", s->head->broken_msg);
    if (spin < 64) {
      if (spin >= 16) sched_yield();
      continue;
    }
    const int64_t left = ns_until(deadline);
    if (left <= 0) {
      if (ready(s, arg)) return BP_OK;
      char late[160] = "";
      if (missing) missing(s, arg, late, sizeof(late));
      char msg[256];
      snprintf(msg, sizeof(msg), "%s: rank %d timed out%s%s after %.3f s; the communicator is "
               "broken", what, s->rank, late[0] ? " waiting for " : "", late,
               (double)s->timeout_ns / 1e9);
      shm_break(s, BP_DEADLINE_EXCEEDED, msg);
      return bp_kit_comm_fail(err, broken_status(s), "%s", s->head->broken_msg);
    }
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    const int64_t since = (int64_t)(now.tv_sec - s->last_liveness.tv_sec) * 1000000000ll +
                          (now.tv_nsec - s->last_liveness.tv_nsec);
    if (since >= LIVENESS_NS) {
      s->last_liveness = now;
      check_peers(s, what);
      continue; /* re-check ready first: a peer may have finished, then exited */
    }
    const int64_t nap = left < LIVENESS_NS ? left : LIVENESS_NS;
    struct timespec rel = {(time_t)(nap / 1000000000ll), (long)(nap % 1000000000ll)};
    atomic_fetch_add(&s->head->waiters, 1);
    if (!ready(s, arg) && broken_status(s) == BP_OK)
      syscall(SYS_futex, &s->head->bell, FUTEX_WAIT, bell, &rel, NULL, 0);
    atomic_fetch_sub(&s->head->waiters, 1);
  }
}

/* ------------------------------------------------------------------------ */
/* Barrier                                                                   */
/* ------------------------------------------------------------------------ */
static int all_arrived(bp_kit_shm_t* s, const void* arg) {
  const uint64_t epoch = *(const uint64_t*)arg;
  for (int32_t q = 0; q < s->n; ++q)
    if (atomic_load_explicit(&s->ranks[q].epoch, memory_order_acquire) < epoch) return 0;
  return 1;
}

static void who_is_late(bp_kit_shm_t* s, const void* arg, char* out, size_t cap) {
  const uint64_t epoch = *(const uint64_t*)arg;
  size_t len = (size_t)snprintf(out, cap, "rank(s)");
  for (int32_t q = 0; q < s->n && len < cap; ++q)
    if (atomic_load(&s->ranks[q].epoch) < epoch)
      len += (size_t)snprintf(out + len, cap - len, " %d", q);
}

static bp_status_t shm_barrier(bp_kit_shm_t* s, const struct timespec* deadline,
                               const char* what, bp_kit_comm_error_t* err) {
  const uint64_t epoch = ++s->epoch;
  atomic_store_explicit(&s->ranks[s->rank].epoch, epoch, memory_order_release);
  ring_bell(s);
  return shm_wait(s, all_arrived, &epoch, who_is_late, deadline, what, err);
}

/* ------------------------------------------------------------------------ */
/* Segment                                                                   */
/* ------------------------------------------------------------------------ */
static size_t align64(size_t x) { return (x + 63u) & ~(size_t)63u; }

typedef struct layout {
  size_t ranks, counts, chans, rings, slots, total;
} layout_t;

static layout_t layout_of(int32_t n, uint64_t slot_bytes, uint64_t chan_bytes) {
  const size_t un = (size_t)n;
  layout_t l;
  l.ranks = align64(sizeof(shm_head_t));
  l.counts = align64(l.ranks + un * sizeof(shm_rank_t));
  l.chans = align64(l.counts + un * 2 * un * sizeof(uint64_t));
  l.rings = align64(l.chans + un * un * sizeof(shm_chan_t));
  l.slots = align64(l.rings + un * un * (size_t)chan_bytes);
  l.total = l.slots + un * (size_t)slot_bytes;
  return l;
}

static uint64_t slot_bytes_from_env(int32_t n) {
  uint64_t bytes = DEFAULT_SLOT_BYTES;
  const char* v = getenv("BACKPLANE_COMM_SHM_SLOT_KB");
  if (v && *v) {
    char* end = NULL;
    unsigned long long kb = strtoull(v, &end, 10);
    if (end && *end == '\0' && kb > 0 && kb <= (1ull << 22)) bytes = (uint64_t)kb << 10;
  }
  /* At least 64 bytes per rank and per element of the widest dtype. */
  const uint64_t least = (uint64_t)n * 64u * 16u;
  bytes = bytes < least ? least : bytes;
  return (bytes + 63u) & ~(uint64_t)63u;
}

static void shm_free(bp_kit_shm_t* s) {
  if (!s) return;
  if (s->base) munmap(s->base, s->map_bytes);
  free(s->sent);
  free(s->recvd);
  free(s->src);
  free(s->peer_calls);
  free(s->sends);
  free(s->watch);
  free(s->peer_codes);
  free(s->peer_scales);
  free(s->acc);
  free(s);
}

static bp_kit_shm_t* shm_attach(unsigned char* base, size_t bytes, int32_t rank,
                                uint64_t timeout_ns) {
  bp_kit_shm_t* s = calloc(1, sizeof(*s));
  if (!s) return NULL;
  s->base = base;
  s->map_bytes = bytes;
  s->head = (shm_head_t*)base;
  s->n = s->head->nranks;
  s->rank = rank;
  s->timeout_ns = timeout_ns;
  const layout_t l = layout_of(s->n, s->head->slot_bytes, s->head->chan_bytes);
  s->ranks = (shm_rank_t*)(base + l.ranks);
  s->counts = (uint64_t*)(base + l.counts);
  s->chans = (shm_chan_t*)(base + l.chans);
  s->rings = base + l.rings;
  s->slots = base + l.slots;
  const size_t un = (size_t)s->n;
  s->sent = calloc(un, sizeof(uint64_t));
  s->recvd = calloc(un, sizeof(uint64_t));
  s->src = calloc(un, sizeof(void*));
  s->peer_calls = calloc(un, sizeof(bp_kit_coll_t));
  s->watch = calloc(un, 1);
  s->peer_codes = calloc(un, sizeof(*s->peer_codes));
  s->peer_scales = calloc(un, sizeof(*s->peer_scales));
  if (!s->sent || !s->recvd || !s->src || !s->peer_calls || !s->watch || !s->peer_codes ||
      !s->peer_scales) {
    s->base = NULL; /* the caller unmaps it */
    shm_free(s);
    return NULL;
  }
  clock_gettime(CLOCK_MONOTONIC, &s->last_liveness);
  return s;
}

/* Rank 0: a fresh segment named `name` (unlinked again once all mapped). */
static unsigned char* segment_create(const char* name, int32_t n, size_t* out_bytes) {
  const uint64_t slot = slot_bytes_from_env(n);
  const layout_t l = layout_of(n, slot, CHAN_BYTES);
  int fd = shm_open(name, O_RDWR | O_CREAT | O_EXCL, 0600);
  if (fd < 0) return NULL;
  void* p = MAP_FAILED;
  if (ftruncate(fd, (off_t)l.total) == 0)
    p = mmap(NULL, l.total, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  close(fd);
  if (p == MAP_FAILED) {
    shm_unlink(name);
    return NULL;
  }
  shm_head_t* h = p;
  h->nranks = n;
  h->slot_bytes = slot;
  h->chan_bytes = CHAN_BYTES;
  h->total_bytes = l.total;
  atomic_store(&h->broken, 0);
  h->magic = SHM_MAGIC;
  *out_bytes = l.total;
  return p;
}

static unsigned char* segment_open(const char* name, int32_t n, size_t* out_bytes) {
  int fd = shm_open(name, O_RDWR, 0600);
  if (fd < 0) return NULL;
  struct stat st;
  void* p = MAP_FAILED;
  if (fstat(fd, &st) == 0 && (size_t)st.st_size >= sizeof(shm_head_t))
    p = mmap(NULL, (size_t)st.st_size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  close(fd);
  if (p == MAP_FAILED) return NULL;
  const shm_head_t* h = p;
  if (h->magic != SHM_MAGIC || h->nranks != n || h->total_bytes != (uint64_t)st.st_size) {
    munmap(p, (size_t)st.st_size);
    return NULL;
  }
  *out_bytes = (size_t)st.st_size;
  return p;
}

/* This machine: the kernel's boot id (a segment name means nothing on
 * another machine, even one with the same host name). */
static void machine_id(char* out, size_t cap) {
  memset(out, 0, cap);
  FILE* f = fopen("/proc/sys/kernel/random/boot_id", "r");
  if (f) {
    if (!fgets(out, (int)cap, f)) out[0] = '\0';
    fclose(f);
  }
  if (!out[0]) gethostname(out, cap - 1);
}

/* Every rank of `bs` (or of a split: `n` members, this one `rank`) maps
 * the segment that `leader`'s offer names. */
typedef struct offer {
  char name[64];
  char machine[64];
  int32_t nranks;
  int32_t ok;
} offer_t;

static void offer_make(offer_t* o, int32_t n) {
  static _Atomic uint32_t counter;
  memset(o, 0, sizeof(*o));
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  snprintf(o->name, sizeof(o->name), "/backplane-comm-%ld-%u-%lx", (long)getpid(),
           atomic_fetch_add(&counter, 1), (unsigned long)(t.tv_nsec ^ (long)t.tv_sec));
  machine_id(o->machine, sizeof(o->machine));
  o->nranks = n;
}

/* Maps the offered segment and says whether it worked. */
static bp_kit_shm_t* offer_accept(const offer_t* o, int32_t rank, int is_leader,
                                  unsigned char* created, size_t created_bytes,
                                  uint64_t timeout_ns) {
  char here[64];
  machine_id(here, sizeof(here));
  if (!o->ok || memcmp(here, o->machine, sizeof(here)) != 0) return NULL;
  size_t bytes = created_bytes;
  unsigned char* base = is_leader ? created : segment_open(o->name, o->nranks, &bytes);
  if (!base) return NULL;
  bp_kit_shm_t* s = shm_attach(base, bytes, rank, timeout_ns);
  if (!s) {
    if (!is_leader) munmap(base, bytes);
    return NULL;
  }
  s->ranks[rank].pid = (int64_t)getpid();
  s->ranks[rank].pid_ns = pid_namespace();
  return s;
}


/* Once every rank has mapped the segment (and written its pid): the peers
 * in this process's PID namespace are watched. */
static void watch_peers(bp_kit_shm_t* s) {
  const uint64_t mine = s->ranks[s->rank].pid_ns;
  for (int32_t q = 0; q < s->n; ++q)
    s->watch[q] = q != s->rank && mine != 0 && s->ranks[q].pid_ns == mine;
}

bp_status_t bp_kit_shm_create(const bp_bootstrap_t* bs, uint64_t timeout_ns,
                              bp_kit_shm_t** out_shm, bp_kit_comm_error_t* err) {
  *out_shm = NULL;
  offer_t o;
  memset(&o, 0, sizeof(o));
  unsigned char* created = NULL;
  size_t created_bytes = 0;
  if (bs->rank == 0) {
    offer_make(&o, bs->nranks);
    created = segment_create(o.name, bs->nranks, &created_bytes);
    o.ok = created != NULL;
  }
  bp_status_t st = bs->broadcast(bs->ctx, &o, sizeof(o), 0);
  if (st != BP_OK) {
    if (created) {
      munmap(created, created_bytes);
      shm_unlink(o.name);
    }
    return bp_kit_comm_fail(err, st, "comm_create: bootstrap broadcast failed (status %d)", (int)st);
  }
  const uint64_t tmo = bp_kit_comm_timeout(timeout_ns);
  bp_kit_shm_t* s = offer_accept(&o, bs->rank, bs->rank == 0, created, created_bytes, tmo);
  int32_t mine = s != NULL, *oks = calloc((size_t)bs->nranks, sizeof(int32_t));
  st = oks ? bs->allgather(bs->ctx, &mine, oks, sizeof(mine)) : BP_RESOURCE_EXHAUSTED;
  int32_t all = st == BP_OK, first_bad = -1;
  for (int32_t r = 0; all && r < bs->nranks; ++r)
    if (!oks[r]) {
      all = 0;
      first_bad = r;
    }
  free(oks);
  if (bs->rank == 0 && o.ok) shm_unlink(o.name); /* every rank mapped it, or gave up */
  if (!all) {
    if (s) shm_free(s);
    else if (created) munmap(created, created_bytes);
    if (st != BP_OK) return bp_kit_comm_fail(err, st, "comm_create: bootstrap allgather failed");
    if (!o.ok)
      return bp_kit_comm_fail(err, BP_RESOURCE_EXHAUSTED, "comm_create: rank 0 could not create a shared "
                  "memory segment (%s) for %d ranks", o.name, bs->nranks);
    return bp_kit_comm_fail(err, BP_UNIMPLEMENTED, "comm_create: the ranks span processes and rank %d "
                "cannot map rank 0's shared memory (another machine?); use the mpi plugin "
                "across machines", first_bad);
  }
  watch_peers(s);
  *out_shm = s;
  return BP_OK;
}

void bp_kit_shm_destroy(bp_kit_shm_t* s) { shm_free(s); }
int32_t bp_kit_shm_rank(const bp_kit_shm_t* s) { return s->rank; }
int32_t bp_kit_shm_size(const bp_kit_shm_t* s) { return s->n; }

void bp_kit_shm_abort(bp_kit_shm_t* s) {
  char msg[96];
  snprintf(msg, sizeof(msg), "the communicator was aborted (by rank %d)", s->rank);
  shm_break(s, BP_ABORTED, msg);
}

bp_status_t bp_kit_shm_status(bp_kit_shm_t* s, bp_kit_comm_error_t* err) {
  const bp_status_t st = broken_status(s);
  if (st != BP_OK) bp_kit_comm_fail(err, st, "%s", s->head->broken_msg);
  return st;
}

/* ------------------------------------------------------------------------ */
/* Collectives                                                               */
/* ------------------------------------------------------------------------ */
static unsigned char* slot_of(bp_kit_shm_t* s, int32_t q) {
  return s->slots + (size_t)q * (size_t)s->head->slot_bytes;
}
static uint64_t* counts_of(bp_kit_shm_t* s, int32_t q) {
  return s->counts + (size_t)q * 2u * (size_t)s->n;
}

static const bp_kit_coll_t* peer_call(const void* user, int32_t r, bp_status_t* status,
                                      const char** msg) {
  const bp_kit_shm_t* s = user;
  const shm_rank_t* h = &s->ranks[r];
  bp_kit_coll_t* c = &s->peer_calls[r];
  *c = h->call;
  c->send_counts = s->counts + (size_t)r * 2u * (size_t)s->n;
  c->recv_counts = c->send_counts + s->n;
  *status = (bp_status_t)h->local_status;
  *msg = h->local_msg;
  return c;
}

static uint64_t min_u64(uint64_t a, uint64_t b) { return a < b ? a : b; }
/* memcpy that accepts the NULL buffers of empty tensors. */
static void cpy(void* dst, const void* src, uint64_t bytes) {
  if (bytes) memcpy(dst, src, (size_t)bytes);
}
/* Elements of a block of `count` in the round that starts at `off`. */
static uint64_t round_len(uint64_t count, uint64_t off, uint64_t seg) {
  return count > off ? min_u64(count - off, seg) : 0;
}

typedef struct plan {
  uint64_t seg;    /* elements per round (per block for block-wise kinds) */
  uint64_t total;  /* elements to move (per block) */
  int one_shot;    /* all_reduce: every rank reduces the whole round */
} plan_t;

static plan_t plan_of(const bp_kit_shm_t* s, const bp_kit_coll_t* c, uint64_t max_block) {
  const uint64_t es = bp_dtype_size(c->dtype) ? bp_dtype_size(c->dtype) : 1;
  const uint64_t slot = s->head->slot_bytes, n = (uint64_t)s->n;
  plan_t p = {slot / es, c->count, 0};
  switch (c->kind) {
    case BP_KIT_COLL_ALL_REDUCE:
      p.seg = slot / 2 / es; /* inputs in the first half, reduced chunks in the second */
      p.one_shot = c->count * es <= bp_kit_comm_one_shot_max(BP_KIT_LINK_HOST, s->n);
      break;
    case BP_KIT_COLL_REDUCE_SCATTER:
    case BP_KIT_COLL_ALL_TO_ALL: p.seg = slot / (n * es); break;
    case BP_KIT_COLL_ALL_TO_ALLV:
      p.seg = slot / (n * es);
      p.total = max_block;
      break;
    case BP_KIT_COLL_BARRIER: p.total = 0; break;
    default: break;
  }
  return p;
}

/* Step 1 of a round: this rank's part into its own slot. */
static void round_publish(bp_kit_shm_t* s, const bp_kit_coll_t* c, const void* input,
                          const plan_t* p, uint64_t off) {
  const uint64_t es = bp_dtype_size(c->dtype), n = (uint64_t)s->n;
  unsigned char* mine = slot_of(s, s->rank);
  const unsigned char* in = input;
  switch (c->kind) {
    case BP_KIT_COLL_ALL_REDUCE:
    case BP_KIT_COLL_REDUCE:
    case BP_KIT_COLL_ALL_GATHER:
      cpy(mine, in + off * es, round_len(c->count, off, p->seg) * es);
      break;
    case BP_KIT_COLL_BROADCAST:
      if (s->rank == c->root) cpy(mine, in + off * es, round_len(c->count, off, p->seg) * es);
      break;
    case BP_KIT_COLL_REDUCE_SCATTER:
    case BP_KIT_COLL_ALL_TO_ALL: {
      const uint64_t len = round_len(c->count, off, p->seg);
      for (uint64_t q = 0; q < n; ++q)
        cpy(mine + q * len * es, in + (q * c->count + off) * es, len * es);
      break;
    }
    case BP_KIT_COLL_ALL_TO_ALLV:
      for (uint64_t q = 0; q < n; ++q)
        cpy(mine + q * p->seg * es, in + (c->send_displs[q] + off) * es,
               round_len(c->send_counts[q], off, p->seg) * es);
      break;
    default: break;
  }
}

static void reduce_from_slots(bp_kit_shm_t* s, const bp_kit_coll_t* c, void* dst,
                              uint64_t slot_off, uint64_t len) {
  const uint64_t es = bp_dtype_size(c->dtype);
  for (int32_t q = 0; q < s->n; ++q) s->src[q] = slot_of(s, q) + slot_off * es;
  bp_kit_comm_reduce(c->dtype, c->op, dst, s->src, (uint32_t)s->n, len);
}

/* Step 2 of a round: read the peers' slots. Returns whether the round has
 * a step 3 (all_reduce by reduce-scatter + all-gather). */
static int round_consume(bp_kit_shm_t* s, const bp_kit_coll_t* c, const plan_t* p,
                         uint64_t off) {
  const uint64_t es = bp_dtype_size(c->dtype), n = (uint64_t)s->n, r = (uint64_t)s->rank;
  unsigned char* out = c->recv;
  switch (c->kind) {
    case BP_KIT_COLL_ALL_REDUCE: {
      const uint64_t len = round_len(c->count, off, p->seg);
      if (p->one_shot) {
        reduce_from_slots(s, c, out + off * es, 0, len);
        return 0;
      }
      uint64_t b, l;
      bp_kit_comm_chunk(len, s->n, s->rank, &b, &l);
      unsigned char* half = slot_of(s, s->rank) + p->seg * es;
      reduce_from_slots(s, c, half + b * es, b, l);
      return 1;
    }
    case BP_KIT_COLL_REDUCE:
      if (s->rank == c->root)
        reduce_from_slots(s, c, out + off * es, 0, round_len(c->count, off, p->seg));
      return 0;
    case BP_KIT_COLL_BROADCAST: {
      const uint64_t len = round_len(c->count, off, p->seg);
      if (s->rank != c->root)
        cpy(out + off * es, slot_of(s, c->root), len * es);
      else if (len && c->recv != c->send)
        memmove(out + off * es, (const unsigned char*)c->send + off * es, len * es);
      return 0;
    }
    case BP_KIT_COLL_ALL_GATHER: {
      const uint64_t len = round_len(c->count, off, p->seg);
      for (uint64_t q = 0; q < n; ++q) {
        unsigned char* dst = out + (q * c->count + off) * es;
        const unsigned char* src = slot_of(s, (int32_t)q);
        if (len && dst != (const unsigned char*)c->send + off * es) cpy(dst, src, len * es);
      }
      return 0;
    }
    case BP_KIT_COLL_REDUCE_SCATTER: {
      const uint64_t len = round_len(c->count, off, p->seg);
      reduce_from_slots(s, c, out + off * es, r * len, len);
      return 0;
    }
    case BP_KIT_COLL_ALL_TO_ALL: {
      const uint64_t len = round_len(c->count, off, p->seg);
      for (uint64_t q = 0; q < n; ++q)
        cpy(out + (q * c->count + off) * es, slot_of(s, (int32_t)q) + r * len * es,
               len * es);
      return 0;
    }
    case BP_KIT_COLL_ALL_TO_ALLV:
      for (uint64_t q = 0; q < n; ++q)
        cpy(out + (c->recv_displs[q] + off) * es, slot_of(s, (int32_t)q) + r * p->seg * es,
               round_len(c->recv_counts[q], off, p->seg) * es);
      return 0;
    default: return 0;
  }
}

/* Step 3 (all_reduce): every owner's reduced chunk into the output. */
static void round_gather(bp_kit_shm_t* s, const bp_kit_coll_t* c, const plan_t* p,
                         uint64_t off) {
  const uint64_t es = bp_dtype_size(c->dtype);
  const uint64_t len = round_len(c->count, off, p->seg);
  unsigned char* out = (unsigned char*)c->recv + off * es;
  for (int32_t q = 0; q < s->n; ++q) {
    uint64_t b, l;
    bp_kit_comm_chunk(len, s->n, q, &b, &l);
    cpy(out + b * es, slot_of(s, q) + (p->seg + b) * es, l * es);
  }
}

/* all_to_all(v) inputs that overlap the output are copied first (later
 * rounds read what earlier rounds overwrote). */
static bp_status_t input_copy(bp_kit_shm_t* s, const bp_kit_coll_t* c, void** out_copy,
                              bp_kit_comm_error_t* err) {
  *out_copy = NULL;
  if (c->kind != BP_KIT_COLL_ALL_TO_ALL && c->kind != BP_KIT_COLL_ALL_TO_ALLV) return BP_OK;
  const uint64_t es = bp_dtype_size(c->dtype);
  const uint64_t in = bp_kit_coll_extent(c, s->n, c->send_counts, c->send_displs) * es;
  const uint64_t out = bp_kit_coll_extent(c, s->n, c->recv_counts, c->recv_displs) * es;
  const uintptr_t i0 = (uintptr_t)c->send, o0 = (uintptr_t)c->recv;
  if (!in || !out || i0 >= o0 + out || o0 >= i0 + in) return BP_OK;
  *out_copy = malloc(in);
  if (!*out_copy) return bp_kit_comm_fail(err, BP_RESOURCE_EXHAUSTED, "out of memory copying the input");
  memcpy(*out_copy, c->send, in);
  return BP_OK;
}

static void publish_header(bp_kit_shm_t* s, const bp_kit_coll_t* c, bp_status_t local,
                           const char* msg) {
  shm_rank_t* h = &s->ranks[s->rank];
  h->call = (bp_kit_coll_t){.kind = c->kind, .dtype = c->dtype, .op = c->op, .root = c->root,
                            .count = c->count, .compression = c->compression,
                            .block = c->block};
  h->local_status = (int32_t)local;
  snprintf(h->local_msg, sizeof(h->local_msg), "%s", local != BP_OK ? msg : "");
  h->max_block = 0;
  uint64_t* counts = counts_of(s, s->rank);
  if (c->kind == BP_KIT_COLL_ALL_TO_ALLV && local == BP_OK) {
    for (int32_t q = 0; q < s->n; ++q) {
      counts[q] = c->send_counts[q];
      counts[s->n + q] = c->recv_counts[q];
      if (c->send_counts[q] > h->max_block) h->max_block = c->send_counts[q];
    }
  }
}

static unsigned char* slot_of_user(void* user, int32_t r) { return slot_of(user, r); }

/* A compressed call's plan and scratch (kit_comm_shm_quant.c). */
static bp_status_t qround_prepare(bp_kit_shm_t* s, const bp_kit_coll_t* call,
                                  bp_kit_qround_t* q, bp_kit_comm_error_t* err) {
  *q = (bp_kit_qround_t){.call = call, .n = s->n, .rank = s->rank,
                         .plan = bp_kit_qplan(call, s->n, s->head->slot_bytes),
                         .slot = slot_of_user, .user = s, .peer_codes = s->peer_codes,
                         .peer_scales = s->peer_scales};
  if (call->kind != BP_KIT_COLL_ALL_GATHER && q->plan.seg > s->cap_acc) {
    float* acc = realloc(s->acc, sizeof(float) * (size_t)q->plan.seg);
    if (!acc) return bp_kit_comm_fail(err, BP_RESOURCE_EXHAUSTED, "out of memory for the compression");
    s->acc = acc;
    s->cap_acc = q->plan.seg;
  }
  q->acc = s->acc;
  return BP_OK;
}

/* The steps of a round, compressed (q non-NULL) or not. */
static void step_publish(bp_kit_shm_t* s, const bp_kit_coll_t* c, const void* input,
                         const plan_t* p, const bp_kit_qround_t* q, uint64_t off) {
  if (q)
    bp_kit_qround_publish(q, input, off);
  else
    round_publish(s, c, input, p, off);
}
static int step_consume(bp_kit_shm_t* s, const bp_kit_coll_t* c, const plan_t* p,
                        const bp_kit_qround_t* q, uint64_t off) {
  return q ? bp_kit_qround_consume(q, off) : round_consume(s, c, p, off);
}
static void step_gather(bp_kit_shm_t* s, const bp_kit_coll_t* c, const plan_t* p,
                        const bp_kit_qround_t* q, uint64_t off) {
  if (q)
    bp_kit_qround_gather(q, off);
  else
    round_gather(s, c, p, off);
}

static bp_status_t run_collective(bp_kit_shm_t* s, const bp_kit_comm_t* comm,
                                  const bp_kit_coll_t* call, bp_kit_comm_error_t* err) {
  char what[64];
  snprintf(what, sizeof(what), "%s #%llu", bp_kit_coll_kind_name(call->kind),
           (unsigned long long)s->calls);
  bp_kit_comm_error_t local;
  local.text[0] = '\0';
  bp_status_t local_status = bp_kit_coll_check(comm, call, &local);
  bp_kit_qround_t qround;
  const bp_kit_qround_t* q = NULL;
  if (local_status == BP_OK && call->compression) {
    local_status = qround_prepare(s, call, &qround, &local);
    q = &qround;
  }
  void* copy = NULL;
  if (local_status == BP_OK) local_status = input_copy(s, call, &copy, &local);
  const void* input = copy ? copy : call->send;
  const struct timespec deadline = bp_kit_deadline(s->timeout_ns);
  publish_header(s, call, local_status, local.text);
  plan_t p = plan_of(s, call, 0);
  if (q) p = (plan_t){.seg = q->plan.seg, .total = call->count, .one_shot = 0};
  if (local_status == BP_OK) step_publish(s, call, input, &p, q, 0);
  bp_status_t st = shm_barrier(s, &deadline, what, err); /* A: headers and round 0 */
  if (st == BP_OK) {
    const bp_status_t verdict = bp_kit_coll_agree(s->n, peer_call, s, what, err);
    if (verdict != BP_OK) {
      /* Nobody rewrites a header before every rank has read them. */
      st = shm_barrier(s, &deadline, what, NULL);
      free(copy);
      return st == BP_OK ? verdict : st;
    }
  }
  if (st == BP_OK && call->kind == BP_KIT_COLL_ALL_TO_ALLV) {
    uint64_t max_block = 0;
    for (int32_t r = 0; r < s->n; ++r)
      if (s->ranks[r].max_block > max_block) max_block = s->ranks[r].max_block;
    p = plan_of(s, call, max_block);
  }
  for (uint64_t off = 0; st == BP_OK; off += p.seg) {
    if (off > 0) {
      step_publish(s, call, input, &p, q, off);
      st = shm_barrier(s, &deadline, what, err);
      if (st != BP_OK) break;
    }
    const int third = step_consume(s, call, &p, q, off);
    st = shm_barrier(s, &deadline, what, err);
    if (st == BP_OK && third) {
      step_gather(s, call, &p, q, off);
      st = shm_barrier(s, &deadline, what, err);
    }
    if (off + p.seg >= p.total) break;
  }
  free(copy);
  return st;
}

/* ------------------------------------------------------------------------ */
/* Point to point: byte streams, one per ordered pair                        */
/* ------------------------------------------------------------------------ */
static shm_chan_t* chan_of(bp_kit_shm_t* s, int32_t from, int32_t to) {
  return &s->chans[(size_t)from * (size_t)s->n + (size_t)to];
}
static unsigned char* ring_of(bp_kit_shm_t* s, int32_t from, int32_t to) {
  return s->rings + ((size_t)from * (size_t)s->n + (size_t)to) * (size_t)s->head->chan_bytes;
}

/* Writes what fits of each pending send, in order per channel. */
static void progress_sends(bp_kit_shm_t* s) {
  const uint64_t cap = s->head->chan_bytes;
  int moved = 0;
  for (uint32_t i = 0; i < s->nsends; ++i) {
    pending_send_t* m = &s->sends[i];
    if (m->written == m->total) continue;
    int blocked = 0; /* an earlier unfinished send to the same peer goes first */
    for (uint32_t j = 0; j < i && !blocked; ++j)
      blocked = s->sends[j].call->root == m->call->root && s->sends[j].written < s->sends[j].total;
    if (blocked) continue;
    shm_chan_t* ch = chan_of(s, s->rank, m->call->root);
    if (m->seq >= atomic_load_explicit(&ch->acked, memory_order_acquire) + MAX_IN_FLIGHT)
      continue;
    unsigned char* ring = ring_of(s, s->rank, m->call->root);
    const uint64_t head = atomic_load_explicit(&ch->head, memory_order_relaxed);
    const uint64_t tail = atomic_load_explicit(&ch->tail, memory_order_acquire);
    uint64_t room = cap - (head - tail), pos = head;
    while (room && m->written < m->total) {
      const unsigned char* src;
      uint64_t avail;
      if (m->written < MSG_HEADER) {
        src = m->header + m->written;
        avail = MSG_HEADER - m->written;
      } else {
        src = (const unsigned char*)m->call->send + (m->written - MSG_HEADER);
        avail = m->total - m->written;
      }
      const uint64_t at = pos % cap;
      uint64_t k = min_u64(min_u64(avail, room), cap - at);
      memcpy(ring + at, src, k);
      pos += k;
      room -= k;
      m->written += k;
    }
    if (pos != head) {
      atomic_store_explicit(&ch->head, pos, memory_order_release);
      moved = 1;
    }
  }
  if (moved) ring_bell(s);
}

typedef struct chan_want {
  shm_chan_t* ch;
  uint64_t bytes; /* head - tail at least this */
  uint64_t acked; /* or: acked above this (sends) */
  int32_t peer;
} chan_want_t;

static int chan_has_bytes(bp_kit_shm_t* s, const void* arg) {
  (void)s;
  const chan_want_t* w = arg;
  return atomic_load_explicit(&w->ch->head, memory_order_acquire) -
             atomic_load_explicit(&w->ch->tail, memory_order_relaxed) >= w->bytes;
}
static int chan_acked(bp_kit_shm_t* s, const void* arg) {
  (void)s;
  const chan_want_t* w = arg;
  return atomic_load_explicit(&w->ch->acked, memory_order_acquire) > w->acked;
}
static void name_peer(bp_kit_shm_t* s, const void* arg, char* out, size_t cap) {
  (void)s;
  snprintf(out, cap, "rank %d", ((const chan_want_t*)arg)->peer);
}

/* Copies `bytes` of the channel from `from` into dst (NULL: discards). */
static bp_status_t chan_read(bp_kit_shm_t* s, int32_t from, unsigned char* dst, uint64_t bytes,
                             const struct timespec* deadline, const char* what,
                             bp_kit_comm_error_t* err) {
  shm_chan_t* ch = chan_of(s, from, s->rank);
  const unsigned char* ring = ring_of(s, from, s->rank);
  const uint64_t cap = s->head->chan_bytes;
  while (bytes) {
    chan_want_t w = {ch, 1, 0, from};
    bp_status_t st = shm_wait(s, chan_has_bytes, &w, name_peer, deadline, what, err);
    if (st != BP_OK) return st;
    const uint64_t tail = atomic_load_explicit(&ch->tail, memory_order_relaxed);
    const uint64_t avail = atomic_load_explicit(&ch->head, memory_order_acquire) - tail;
    uint64_t k = min_u64(min_u64(avail, bytes), cap - tail % cap);
    if (dst) {
      memcpy(dst, ring + tail % cap, k);
      dst += k;
    }
    bytes -= k;
    atomic_store_explicit(&ch->tail, tail + k, memory_order_release);
    ring_bell(s);
  }
  return BP_OK;
}

static bp_status_t run_recv(bp_kit_shm_t* s, const bp_kit_coll_t* call,
                            const struct timespec* deadline, bp_kit_comm_error_t* err) {
  char what[64];
  snprintf(what, sizeof(what), "recv from rank %d", call->root);
  unsigned char header[MSG_HEADER];
  bp_status_t st = chan_read(s, call->root, header, MSG_HEADER, deadline, what, err);
  if (st != BP_OK) return st;
  uint64_t count;
  uint32_t dtype;
  memcpy(&count, header, 8);
  memcpy(&dtype, header + 8, 4);
  const int match = dtype == call->dtype && count == call->count;
  st = chan_read(s, call->root, match ? call->recv : NULL, bp_kit_coll_bytes(dtype, count),
                 deadline, what, err);
  if (st != BP_OK) return st;
  if (!match)
    st = bp_kit_comm_fail(err, BP_INVALID_ARGUMENT, "recv from rank %d: it sent %llu %s elements, this "
              "rank expects %llu %s", call->root, (unsigned long long)count,
              bp_dtype_name(dtype), (unsigned long long)call->count, bp_dtype_name(call->dtype));
  shm_chan_t* ch = chan_of(s, call->root, s->rank);
  const uint64_t seq = s->recvd[call->root]++;
  ch->status[seq % ACK_RING] = match ? BP_OK : BP_INVALID_ARGUMENT;
  atomic_store_explicit(&ch->acked, seq + 1, memory_order_release);
  ring_bell(s);
  return st;
}

static bp_status_t finish_send(bp_kit_shm_t* s, const pending_send_t* m,
                               const struct timespec* deadline, bp_kit_comm_error_t* err) {
  char what[64];
  snprintf(what, sizeof(what), "send to rank %d", m->call->root);
  chan_want_t w = {chan_of(s, s->rank, m->call->root), 0, m->seq, m->call->root};
  bp_status_t st = shm_wait(s, chan_acked, &w, name_peer, deadline, what, err);
  if (st != BP_OK) return st;
  if (w.ch->status[m->seq % ACK_RING] != BP_OK)
    return bp_kit_comm_fail(err, BP_INVALID_ARGUMENT, "send to rank %d: %llu %s elements, the receiver "
                "expected a different count or dtype", m->call->root,
                (unsigned long long)m->call->count, bp_dtype_name(m->call->dtype));
  return BP_OK;
}

static bp_status_t post_sends(bp_kit_shm_t* s, const bp_kit_coll_t* calls, uint32_t n,
                              bp_kit_comm_error_t* err) {
  uint32_t k = 0;
  for (uint32_t i = 0; i < n; ++i) k += calls[i].kind == BP_KIT_COLL_SEND;
  if (k > s->cap_sends) {
    pending_send_t* p = realloc(s->sends, sizeof(pending_send_t) * k);
    if (!p) return bp_kit_comm_fail(err, BP_RESOURCE_EXHAUSTED, "comm_run: out of memory");
    s->sends = p;
    s->cap_sends = k;
  }
  s->nsends = 0;
  for (uint32_t i = 0; i < n; ++i) {
    if (calls[i].kind != BP_KIT_COLL_SEND) continue;
    pending_send_t* m = &s->sends[s->nsends++];
    memset(m, 0, sizeof(*m));
    m->call = &calls[i];
    m->seq = s->sent[calls[i].root]++;
    m->total = MSG_HEADER + bp_kit_coll_bytes(calls[i].dtype, calls[i].count);
    memcpy(m->header, &calls[i].count, 8);
    memcpy(m->header + 8, &calls[i].dtype, 4);
  }
  progress_sends(s);
  return BP_OK;
}

bp_status_t bp_kit_shm_run(bp_kit_shm_t* s, const bp_kit_comm_t* c, const bp_kit_coll_t* calls,
                           uint32_t n, bp_kit_comm_error_t* err) {
  for (uint32_t i = 0; i < n; ++i) {
    if (calls[i].kind != BP_KIT_COLL_SEND && calls[i].kind != BP_KIT_COLL_RECV) continue;
    bp_status_t st = bp_kit_coll_check(c, &calls[i], err);
    if (st != BP_OK) return st; /* nothing posted yet: peers time out on their side */
  }
  const bp_status_t b = broken_status(s);
  if (b != BP_OK) return bp_kit_comm_fail(err, b, "%s", s->head->broken_msg);
  bp_status_t first = post_sends(s, calls, n, err);
  if (first != BP_OK) return first;
  const struct timespec deadline = bp_kit_deadline(s->timeout_ns);
  bp_kit_comm_error_t e;
  for (uint32_t i = 0; i < n; ++i) {
    bp_status_t st = BP_OK;
    if (calls[i].kind == BP_KIT_COLL_SEND) continue;
    if (calls[i].kind == BP_KIT_COLL_RECV) {
      st = run_recv(s, &calls[i], &deadline, &e);
    } else {
      ++s->calls;
      st = run_collective(s, c, &calls[i], &e);
    }
    if (st != BP_OK && first == BP_OK) {
      first = st;
      if (err) *err = e;
    }
  }
  for (uint32_t i = 0; i < s->nsends; ++i) {
    bp_status_t st = finish_send(s, &s->sends[i], &deadline, &e);
    if (st != BP_OK && first == BP_OK) {
      first = st;
      if (err) *err = e;
    }
  }
  s->nsends = 0;
  return first;
}

/* ------------------------------------------------------------------------ */
/* Split                                                                     */
/* ------------------------------------------------------------------------ */
/* An all_gather of `bytes` per rank through the engine itself. */
static bp_status_t gather_bytes(bp_kit_shm_t* s, const bp_kit_comm_t* c, const void* mine,
                                void* all, uint64_t bytes, bp_kit_comm_error_t* err) {
  bp_kit_coll_t g = {.kind = BP_KIT_COLL_ALL_GATHER, .dtype = BP_DTYPE_U8, .count = bytes,
                     .send = mine, .recv = all};
  return bp_kit_shm_run(s, c, &g, 1, err);
}

bp_status_t bp_kit_shm_split(bp_kit_shm_t* s, const bp_kit_comm_t* c, int32_t color, int32_t key,
                             uint64_t timeout_ns, bp_kit_shm_t** out_shm,
                             bp_kit_comm_error_t* err) {
  *out_shm = NULL;
  typedef struct member {
    int32_t color, key;
    offer_t offer; /* the leader's (first rank of its color) */
  } member_t;
  member_t* all = calloc((size_t)s->n, sizeof(member_t));
  if (!all) return bp_kit_comm_fail(err, BP_RESOURCE_EXHAUSTED, "comm_split: out of memory");
  member_t me = {.color = color, .key = key};
  bp_status_t st = gather_bytes(s, c, &me, all, sizeof(member_t), err);
  int32_t size = 0, index = 0, leader = -1;
  for (int32_t r = 0; st == BP_OK && color != BP_COMM_SPLIT_NO_COLOR && r < s->n; ++r) {
    if (all[r].color != color) continue;
    if (leader < 0) leader = r;
    ++size;
    if (all[r].key < key || (all[r].key == key && r < s->rank)) ++index;
  }
  /* Leaders create; then everyone learns their leader's offer. */
  unsigned char* created = NULL;
  size_t created_bytes = 0;
  if (st == BP_OK && leader == s->rank) {
    offer_make(&me.offer, size);
    created = segment_create(me.offer.name, size, &created_bytes);
    me.offer.ok = created != NULL;
  }
  if (st == BP_OK) st = gather_bytes(s, c, &me, all, sizeof(member_t), err);
  bp_kit_shm_t* mine = NULL;
  if (st == BP_OK && leader >= 0)
    mine = offer_accept(&all[leader].offer, index, leader == s->rank, created, created_bytes,
                        bp_kit_comm_timeout(timeout_ns));
  int32_t ok = leader < 0 || mine != NULL;
  int32_t* oks = calloc((size_t)s->n, sizeof(int32_t));
  if (st == BP_OK)
    st = oks ? gather_bytes(s, c, &ok, oks, sizeof(ok), err)
             : bp_kit_comm_fail(err, BP_RESOURCE_EXHAUSTED, "comm_split: out of memory");
  if (leader == s->rank && me.offer.ok) shm_unlink(me.offer.name);
  int32_t all_ok = st == BP_OK;
  for (int32_t r = 0; all_ok && r < s->n; ++r) all_ok = oks[r];
  free(oks);
  free(all);
  if (!all_ok) {
    if (mine) shm_free(mine);
    else if (created) munmap(created, created_bytes);
    return st != BP_OK ? st : bp_kit_comm_fail(err, BP_RESOURCE_EXHAUSTED, "comm_split: a new shared "
                                   "memory segment could not be created or mapped");
  }
  if (mine) watch_peers(mine);
  *out_shm = mine;
  return BP_OK;
}
