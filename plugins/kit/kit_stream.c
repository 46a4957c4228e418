/* backplane plugin kit: stream queues and events. See bp_kit_stream.h.
 *
 * The ring is single-producer (the stream is externally synchronized) and
 * single-consumer (the worker): head and tail move without the mutex. The
 * mutex and the condition variables are used only to sleep and wake, with
 * the sleeping flag and the waiters' wake_at as the handshake (sequentially
 * consistent atomics on both sides, so a wake-up cannot be lost). An idle
 * worker polls briefly before it sleeps, so a producer issuing ops back to
 * back finds it awake and pays no futex wake-up (about a microsecond) per
 * op. A thread waiting for command N is woken once, when N completes, not
 * at every command before it: each futex wake-up there puts a third thread
 * on cores the worker and the CPU pool fill, which under a hypervisor cost
 * a decode step's small ops a tenth of their time.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bp_kit_ops.h"
#include "bp_kit_plugin.h"
#include "bp_kit_stream.h"

#define KIT_RING_SLOTS 256u
/* Polls of an idle worker before it sleeps (a few tens of microseconds). */
#define KIT_IDLE_SPINS 1000

static inline void cpu_relax(void) {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  __asm__ __volatile__("yield");
#endif
}

enum kit_cmd_kind { CMD_OP, CMD_COPY, CMD_FILL, CMD_HOST_FUNC, CMD_RECORD, CMD_WAIT };

/* Largest attribute struct: what a ring slot stores by value. */
typedef union kit_attrs_storage {
#define KIT__ATTR_MEMBER(T) T T##_;
  BP_ATTRS_TYPES(KIT__ATTR_MEMBER)
#undef KIT__ATTR_MEMBER
} kit_attrs_storage_t;

typedef struct kit_cmd {
  uint32_t kind;
  union {
    struct { void* dst; const void* src; uint64_t size; } copy;
    struct { unsigned char* dst; uint64_t size; uint32_t psize; unsigned char pattern[8]; } fill;
    struct { bp_host_func_t fn; void* user; } host;
    struct { struct bpp_event_s* ev; uint64_t gen; } event;
  } u;
  bp_op_call_t call;            /* pointers retargeted to the slot */
  /* Long tensor lists: descriptors then their pointers, one block freed by
   * the worker. */
  bp_tensor_desc_t* heap_descs;
  bp_tensor_desc_t descs[BP_KIT_CMD_INLINE_DESCS];
  const bp_tensor_desc_t* desc_ptrs[BP_KIT_CMD_INLINE_DESCS]; /* call.inputs/outputs */
  kit_attrs_storage_t attrs;
} kit_cmd_t;

struct bpp_stream_s {
  const bp_kit_queue_t* queue;
  bpp_device_t device;
  pthread_mutex_t mu;
  pthread_cond_t work_cv; /* producer -> worker: work arrived / stop */
  pthread_cond_t done_cv; /* worker -> waiters: a command completed */
  pthread_t thread;
  kit_cmd_t* ring;
  _Atomic uint64_t head; /* commands enqueued; written by the producer */
  _Atomic uint64_t tail; /* commands completed; written by the worker */
  atomic_int sleeping;   /* the worker waits on work_cv */
  int waiters;           /* threads waiting on done_cv (under mu) */
  _Atomic uint64_t wake_at; /* the smallest tail a waiter needs; UINT64_MAX: none */
  atomic_int stop;
  bp_status_t err; /* first error not yet reported (under mu) */
  char err_msg[BP_PLUGIN_MSG_CAP];
};

struct bpp_event_s {
  pthread_mutex_t mu;
  pthread_cond_t cv;
  uint64_t recorded;  /* records enqueued */
  uint64_t completed; /* newest record that ran */
  uint64_t ts_ns;     /* CLOCK_MONOTONIC when it ran */
  bp_status_t status; /* the stream's error at that point */
  char msg[BP_PLUGIN_MSG_CAP];
};

static uint64_t now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* ------------------------------------------------------------------------ */
/* Worker                                                                    */
/* ------------------------------------------------------------------------ */
static void complete_record(struct bpp_stream_s* s, struct bpp_event_s* ev, uint64_t gen) {
  pthread_mutex_lock(&s->mu);
  bp_status_t serr = s->err;
  char msg[BP_PLUGIN_MSG_CAP];
  memcpy(msg, s->err_msg, sizeof msg);
  pthread_mutex_unlock(&s->mu);
  pthread_mutex_lock(&ev->mu);
  if (gen > ev->completed) {
    ev->completed = gen;
    ev->ts_ns = now_ns();
    ev->status = serr;
    memcpy(ev->msg, msg, sizeof msg);
  }
  pthread_cond_broadcast(&ev->cv);
  pthread_mutex_unlock(&ev->mu);
}

static bp_status_t run_cmd(struct bpp_stream_s* s, kit_cmd_t* c) {
  switch (c->kind) {
    case CMD_OP: return s->queue->exec(s->device, &c->call);
    case CMD_COPY:
      if (s->queue->copy) s->queue->copy(c->u.copy.dst, c->u.copy.src, c->u.copy.size);
      else memmove(c->u.copy.dst, c->u.copy.src, c->u.copy.size); /* copies are memmoves */
      return BP_OK;
    case CMD_FILL: {
      uint32_t ps = c->u.fill.psize;
      unsigned char* d = c->u.fill.dst;
      if (ps == 1) {
        memset(d, c->u.fill.pattern[0], c->u.fill.size);
      } else {
        uint64_t n = c->u.fill.size / ps;
        for (uint64_t i = 0; i < n; i++) memcpy(d + i * ps, c->u.fill.pattern, ps);
      }
      return BP_OK;
    }
    case CMD_HOST_FUNC: {
      /* A failed host function poisons the stream like a failed kernel. */
      bp_plugin_clear_error();
      bp_status_t st = c->u.host.fn(c->u.host.user);
      if (st == BP_OK) return BP_OK;
      /* The plugin's own host functions (collectives) leave a message. */
      char said[BP_PLUGIN_MSG_CAP];
      snprintf(said, sizeof said, "%s", bp_plugin_last_error());
      if (said[0]) return bp_kit_error(st, "%s", said);
      return BP_KIT_ERROR(st, "host function failed with status %d", (int)st);
    }
    case CMD_RECORD: complete_record(s, c->u.event.ev, c->u.event.gen); return BP_OK;
    case CMD_WAIT: {
      struct bpp_event_s* ev = c->u.event.ev;
      pthread_mutex_lock(&ev->mu);
      while (ev->completed < c->u.event.gen) pthread_cond_wait(&ev->cv, &ev->mu);
      pthread_mutex_unlock(&ev->mu);
      return BP_OK;
    }
    default: return BP_KIT_ERROR(BP_INTERNAL, "stream: unknown command %u", c->kind);
  }
}

/* Polls `*value` until it differs from `seen` or the spin budget runs out;
 * returns the last value read. */
static uint64_t spin_while_equal(_Atomic uint64_t* value, uint64_t seen, atomic_int* stop) {
  uint64_t v = seen;
  for (int spin = 0; spin < KIT_IDLE_SPINS; ++spin) {
    v = atomic_load_explicit(value, memory_order_acquire);
    if (v != seen || (stop && atomic_load_explicit(stop, memory_order_relaxed))) break;
    cpu_relax();
  }
  return v;
}

static void* stream_main(void* arg) {
  struct bpp_stream_s* s = arg;
  bp_plugin_set_worker_thread(1);
  for (;;) {
    uint64_t t = atomic_load_explicit(&s->tail, memory_order_relaxed);
    if (atomic_load(&s->head) == t && spin_while_equal(&s->head, t, &s->stop) == t) {
      pthread_mutex_lock(&s->mu);
      atomic_store(&s->sleeping, 1);
      while (atomic_load(&s->head) == t && !atomic_load(&s->stop))
        pthread_cond_wait(&s->work_cv, &s->mu);
      atomic_store(&s->sleeping, 0);
      pthread_mutex_unlock(&s->mu);
      if (atomic_load(&s->head) == t) break; /* stop requested and drained */
    }
    kit_cmd_t* c = &s->ring[t % KIT_RING_SLOTS];
    bp_status_t st = run_cmd(s, c);
    free(c->heap_descs);
    c->heap_descs = NULL;
    if (st != BP_OK) {
      pthread_mutex_lock(&s->mu);
      if (s->err == BP_OK) {
        s->err = st;
        snprintf(s->err_msg, sizeof s->err_msg, "%s", bp_plugin_last_error());
      }
      pthread_mutex_unlock(&s->mu);
    }
    atomic_store(&s->tail, t + 1);
    if (t + 1 >= atomic_load(&s->wake_at)) {
      pthread_mutex_lock(&s->mu);
      atomic_store(&s->wake_at, UINT64_MAX); /* waiters still short of theirs set it again */
      pthread_cond_broadcast(&s->done_cv);
      pthread_mutex_unlock(&s->mu);
    }
  }
  return NULL;
}

/* Blocks until command number `target` completed (tail >= target). Called
 * without the mutex. */
static void wait_tail(struct bpp_stream_s* s, uint64_t target) {
  if (atomic_load(&s->tail) >= target) return;
  for (int spin = 0; spin < KIT_IDLE_SPINS; ++spin) {
    if (atomic_load_explicit(&s->tail, memory_order_acquire) >= target) return;
    cpu_relax();
  }
  pthread_mutex_lock(&s->mu);
  s->waiters++;
  for (;;) {
    /* wake_at first, tail after: the worker stores tail, then reads wake_at */
    if (target < atomic_load(&s->wake_at)) atomic_store(&s->wake_at, target);
    if (atomic_load(&s->tail) >= target) break;
    pthread_cond_wait(&s->done_cv, &s->mu);
  }
  if (--s->waiters == 0) atomic_store(&s->wake_at, UINT64_MAX);
  pthread_mutex_unlock(&s->mu);
}

/* Returns the free slot at the head (waiting while the ring is full). Only
 * the stream's single producer calls it. */
static kit_cmd_t* begin_cmd(struct bpp_stream_s* s, uint32_t kind) {
  uint64_t h = atomic_load_explicit(&s->head, memory_order_relaxed);
  if (h >= KIT_RING_SLOTS) wait_tail(s, h - KIT_RING_SLOTS + 1);
  kit_cmd_t* c = &s->ring[h % KIT_RING_SLOTS];
  c->kind = kind;
  c->heap_descs = NULL;
  return c;
}

/* Publishes the slot filled since begin_cmd and wakes a sleeping worker. */
static void end_cmd(struct bpp_stream_s* s) {
  atomic_store(&s->head, atomic_load_explicit(&s->head, memory_order_relaxed) + 1);
  if (atomic_load(&s->sleeping)) {
    pthread_mutex_lock(&s->mu);
    pthread_cond_signal(&s->work_cv);
    pthread_mutex_unlock(&s->mu);
  }
}

/* ------------------------------------------------------------------------ */
/* Streams                                                                   */
/* ------------------------------------------------------------------------ */
bp_status_t bp_kit_stream_create(const bp_kit_queue_t* queue, bpp_device_t device,
                                 const bp_stream_create_info_t* info, bpp_stream_t* out) {
  bp_status_t st = BP_OK;
  if (out) *out = NULL;
  if (!queue || !queue->exec || !device || !info || !out)
    return BP_KIT_ERROR(BP_INVALID_ARGUMENT, "stream_create: NULL argument");
  if (info->struct_size < BP_STREAM_CREATE_INFO_V1_SIZE)
    return BP_KIT_ERROR(BP_INVALID_ARGUMENT, "stream_create: info struct_size %u < %u",
                        info->struct_size, BP_STREAM_CREATE_INFO_V1_SIZE);
  if (info->queue > BP_QUEUE_COPY)
    return BP_KIT_ERROR(BP_INVALID_ARGUMENT, "stream_create: unknown queue kind %u", info->queue);
  if (info->flags != 0)
    return BP_KIT_ERROR(BP_INVALID_ARGUMENT, "stream_create: unknown flags 0x%x", info->flags);
  struct bpp_stream_s* s = calloc(1, sizeof *s);
  if (!s) return BP_KIT_ERROR(BP_RESOURCE_EXHAUSTED, "stream_create: out of host memory");
  s->ring = aligned_alloc(64, sizeof(kit_cmd_t) * KIT_RING_SLOTS);
  if (!s->ring) {
    st = BP_KIT_ERROR(BP_RESOURCE_EXHAUSTED, "stream_create: cannot allocate a %zu-byte ring",
                      sizeof(kit_cmd_t) * KIT_RING_SLOTS);
    goto cleanup;
  }
  s->queue = queue;
  s->device = device;
  pthread_mutex_init(&s->mu, NULL);
  pthread_cond_init(&s->work_cv, NULL);
  pthread_cond_init(&s->done_cv, NULL);
  atomic_init(&s->wake_at, UINT64_MAX);
  if (pthread_create(&s->thread, NULL, stream_main, s) != 0) {
    pthread_mutex_destroy(&s->mu);
    pthread_cond_destroy(&s->work_cv);
    pthread_cond_destroy(&s->done_cv);
    st = BP_KIT_ERROR(BP_RESOURCE_EXHAUSTED, "stream_create: cannot start the worker thread");
    goto cleanup;
  }
  *out = s;
  s = NULL;
cleanup:
  if (s) free(s->ring);
  free(s);
  return st;
}

bpp_device_t bp_kit_stream_device(bpp_stream_t s) { return s ? s->device : NULL; }

void bp_kit_stream_destroy(bpp_stream_t s) {
  if (!s) return;
  pthread_mutex_lock(&s->mu);
  atomic_store(&s->stop, 1);
  pthread_cond_signal(&s->work_cv);
  pthread_mutex_unlock(&s->mu);
  pthread_join(s->thread, NULL);
  pthread_mutex_destroy(&s->mu);
  pthread_cond_destroy(&s->work_cv);
  pthread_cond_destroy(&s->done_cv);
  free(s->ring);
  free(s);
}

/* Takes and clears the sticky error (called with s->mu held); reports it
 * on the calling thread. */
static bp_status_t take_error(struct bpp_stream_s* s) {
  bp_status_t st = s->err;
  if (st != BP_OK) {
    char msg[BP_PLUGIN_MSG_CAP];
    memcpy(msg, s->err_msg, sizeof msg);
    s->err = BP_OK;
    s->err_msg[0] = 0;
    pthread_mutex_unlock(&s->mu);
    BP_KIT_ERROR(st, "%s", msg);
    pthread_mutex_lock(&s->mu);
  }
  return st;
}

bp_status_t bp_kit_stream_synchronize(bpp_stream_t s) {
  if (!s) return BP_KIT_ERROR(BP_INVALID_ARGUMENT, "stream_synchronize: NULL stream");
  wait_tail(s, atomic_load_explicit(&s->head, memory_order_relaxed));
  pthread_mutex_lock(&s->mu);
  bp_status_t st = take_error(s);
  pthread_mutex_unlock(&s->mu);
  return st;
}

bp_status_t bp_kit_stream_query(bpp_stream_t s) {
  if (!s) return BP_KIT_ERROR(BP_INVALID_ARGUMENT, "stream_query: NULL stream");
  pthread_mutex_lock(&s->mu);
  bp_status_t st = take_error(s);
  if (st == BP_OK && atomic_load(&s->tail) != atomic_load(&s->head)) st = BP_NOT_READY;
  pthread_mutex_unlock(&s->mu);
  return st;
}

bp_status_t bp_kit_stream_enqueue_host_func(bpp_stream_t s, bp_host_func_t fn, void* user) {
  if (!s || !fn)
    return BP_KIT_ERROR(BP_INVALID_ARGUMENT, "stream_enqueue_host_func: NULL %s",
                        s ? "function" : "stream");
  kit_cmd_t* c = begin_cmd(s, CMD_HOST_FUNC);
  c->u.host.fn = fn;
  c->u.host.user = user;
  end_cmd(s);
  return BP_OK;
}

bp_status_t bp_kit_stream_enqueue_copy(bpp_stream_t s, void* dst, const void* src, uint64_t size) {
  if (!s || ((!dst || !src) && size))
    return BP_KIT_ERROR(BP_INVALID_ARGUMENT, "copy: NULL %s", s ? "pointer" : "stream");
  if (size == 0) return BP_OK;
  kit_cmd_t* c = begin_cmd(s, CMD_COPY);
  c->u.copy.dst = dst;
  c->u.copy.src = src;
  c->u.copy.size = size;
  end_cmd(s);
  return BP_OK;
}

bp_status_t bp_kit_stream_enqueue_fill(bpp_stream_t s, void* dst, uint64_t size,
                                       const void* pattern, uint32_t psize) {
  if (!s || !pattern || (!dst && size))
    return BP_KIT_ERROR(BP_INVALID_ARGUMENT, "buffer_fill: NULL %s", s ? "pattern" : "stream");
  if (psize != 1 && psize != 2 && psize != 4 && psize != 8)
    return BP_KIT_ERROR(BP_INVALID_ARGUMENT, "buffer_fill: pattern size %u is not 1, 2, 4 or 8",
                        psize);
  if (size % psize)
    return BP_KIT_ERROR(BP_INVALID_ARGUMENT,
                        "buffer_fill: size %llu is not a multiple of the %u-byte pattern",
                        (unsigned long long)size, psize);
  if (size == 0) return BP_OK;
  kit_cmd_t* c = begin_cmd(s, CMD_FILL);
  c->u.fill.dst = dst;
  c->u.fill.size = size;
  c->u.fill.psize = psize;
  memcpy(c->u.fill.pattern, pattern, psize);
  end_cmd(s);
  return BP_OK;
}

static void copy_desc(bp_tensor_desc_t* dst, const bp_tensor_desc_t* src) {
  size_t n = src->struct_size < sizeof *dst ? src->struct_size : sizeof *dst;
  memcpy(dst, src, n);
  if (n < sizeof *dst) memset((char*)dst + n, 0, sizeof *dst - n);
  dst->struct_size = sizeof *dst;
  dst->next = NULL; /* the caller's chain lives only during the launch */
}

bp_status_t bp_kit_stream_enqueue_op(bpp_stream_t s, const bp_op_call_t* call) {
  if (!s || !call) return BP_KIT_ERROR(BP_INVALID_ARGUMENT, "launch: NULL %s", s ? "call" : "stream");
  const bp_kit_op_info_t* m = bp_kit_op_info(call->op_id);
  size_t asz = m && call->attrs ? m->attrs_size : 0;
  uint32_t total = call->num_inputs + call->num_outputs;
  if (call->list_begin > call->num_inputs || call->list_count > call->num_inputs - call->list_begin)
    return BP_KIT_ERROR(BP_INVALID_ARGUMENT, "%s: list operand [%u, +%u) outside the %u inputs",
                        bp_kit_op_name(call->op_id), call->list_begin, call->list_count,
                        call->num_inputs);
  bp_tensor_desc_t* heap = NULL;
  if (total > BP_KIT_CMD_INLINE_DESCS) {
    heap = malloc((sizeof(bp_tensor_desc_t) + sizeof(bp_tensor_desc_t*)) * total);
    if (!heap)
      return BP_KIT_ERROR(BP_RESOURCE_EXHAUSTED, "%s: out of host memory for %u descriptors",
                          bp_kit_op_name(call->op_id), total);
  }
  kit_cmd_t* c = begin_cmd(s, CMD_OP);
  bp_tensor_desc_t* d = heap ? heap : c->descs;
  const bp_tensor_desc_t** p = heap ? (const bp_tensor_desc_t**)(void*)(heap + total) : c->desc_ptrs;
  c->heap_descs = heap;
  for (uint32_t i = 0; i < call->num_inputs; i++) copy_desc(&d[i], call->inputs[i]);
  for (uint32_t i = 0; i < call->num_outputs; i++)
    copy_desc(&d[call->num_inputs + i], call->outputs[i]);
  for (uint32_t i = 0; i < total; i++) p[i] = &d[i];
  if (asz) memcpy(&c->attrs, call->attrs, asz);
  c->call = (bp_op_call_t){
      .struct_size = sizeof(bp_op_call_t),
      .op_id = call->op_id,
      .num_inputs = call->num_inputs,
      .num_outputs = call->num_outputs,
      .compute_dtype = call->compute_dtype,
      .list_begin = call->list_begin,
      .list_count = call->list_count,
      .inputs = p,
      .outputs = p + call->num_inputs,
      .attrs = asz ? (const void*)&c->attrs : NULL,
  };
  end_cmd(s);
  return BP_OK;
}

/* ------------------------------------------------------------------------ */
/* Events                                                                    */
/* ------------------------------------------------------------------------ */
bp_status_t bp_kit_event_create(bpp_device_t device, const bp_event_create_info_t* info,
                                bpp_event_t* out) {
  if (out) *out = NULL;
  if (!device || !info || !out)
    return BP_KIT_ERROR(BP_INVALID_ARGUMENT, "event_create: NULL argument");
  if (info->struct_size < BP_EVENT_CREATE_INFO_V1_SIZE)
    return BP_KIT_ERROR(BP_INVALID_ARGUMENT, "event_create: info struct_size %u < %u",
                        info->struct_size, BP_EVENT_CREATE_INFO_V1_SIZE);
  if (info->flags & BP_EVENT_EXPORTABLE)
    return BP_KIT_ERROR(BP_UNIMPLEMENTED, "event_create: exportable events are not supported");
  if (info->flags & ~(uint32_t)BP_EVENT_TIMING)
    return BP_KIT_ERROR(BP_INVALID_ARGUMENT, "event_create: unknown flags 0x%x", info->flags);
  struct bpp_event_s* e = calloc(1, sizeof *e);
  if (!e) return BP_KIT_ERROR(BP_RESOURCE_EXHAUSTED, "event_create: out of host memory");
  pthread_mutex_init(&e->mu, NULL);
  pthread_cond_init(&e->cv, NULL);
  *out = e;
  return BP_OK;
}

void bp_kit_event_destroy(bpp_event_t e) {
  if (!e) return;
  /* The core releases events after their last use retired; waiting here
   * only guards against a record still in flight. */
  pthread_mutex_lock(&e->mu);
  while (e->completed < e->recorded) pthread_cond_wait(&e->cv, &e->mu);
  pthread_mutex_unlock(&e->mu);
  pthread_mutex_destroy(&e->mu);
  pthread_cond_destroy(&e->cv);
  free(e);
}

bp_status_t bp_kit_event_record(bpp_event_t e, bpp_stream_t s) {
  if (!e || !s)
    return BP_KIT_ERROR(BP_INVALID_ARGUMENT, "event_record: NULL %s", e ? "stream" : "event");
  pthread_mutex_lock(&e->mu);
  uint64_t gen = ++e->recorded;
  pthread_mutex_unlock(&e->mu);
  kit_cmd_t* c = begin_cmd(s, CMD_RECORD);
  c->u.event.ev = e;
  c->u.event.gen = gen;
  end_cmd(s);
  return BP_OK;
}

bp_status_t bp_kit_stream_wait_event(bpp_stream_t s, bpp_event_t e) {
  if (!e || !s)
    return BP_KIT_ERROR(BP_INVALID_ARGUMENT, "stream_wait_event: NULL %s", e ? "stream" : "event");
  pthread_mutex_lock(&e->mu);
  uint64_t gen = e->recorded; /* waits for the newest record enqueued so far */
  pthread_mutex_unlock(&e->mu);
  if (gen == 0) return BP_OK; /* never recorded: nothing to wait for */
  kit_cmd_t* c = begin_cmd(s, CMD_WAIT);
  c->u.event.ev = e;
  c->u.event.gen = gen;
  end_cmd(s);
  return BP_OK;
}

/* Called with e->mu held, after completion. */
static bp_status_t event_status(struct bpp_event_s* e) {
  if (e->status != BP_OK) BP_KIT_ERROR(e->status, "%s", e->msg);
  return e->status;
}

bp_status_t bp_kit_event_query(bpp_event_t e) {
  if (!e) return BP_KIT_ERROR(BP_INVALID_ARGUMENT, "event_query: NULL event");
  pthread_mutex_lock(&e->mu);
  bp_status_t st = e->completed < e->recorded ? BP_NOT_READY : event_status(e);
  pthread_mutex_unlock(&e->mu);
  return st;
}

bp_status_t bp_kit_event_synchronize(bpp_event_t e) {
  if (!e) return BP_KIT_ERROR(BP_INVALID_ARGUMENT, "event_synchronize: NULL event");
  pthread_mutex_lock(&e->mu);
  uint64_t target = e->recorded;
  while (e->completed < target) pthread_cond_wait(&e->cv, &e->mu);
  bp_status_t st = event_status(e);
  pthread_mutex_unlock(&e->mu);
  return st;
}

bp_status_t bp_kit_event_elapsed_ns(bpp_event_t a, bpp_event_t b, uint64_t* out_ns) {
  if (!a || !b || !out_ns)
    return BP_KIT_ERROR(BP_INVALID_ARGUMENT, "event_elapsed_ns: NULL argument");
  uint64_t ta, tb;
  int ra, rb, da, db;
  pthread_mutex_lock(&a->mu);
  ta = a->ts_ns, ra = a->recorded > 0, da = a->completed >= a->recorded;
  pthread_mutex_unlock(&a->mu);
  pthread_mutex_lock(&b->mu);
  tb = b->ts_ns, rb = b->recorded > 0, db = b->completed >= b->recorded;
  pthread_mutex_unlock(&b->mu);
  if (!ra || !rb)
    return BP_KIT_ERROR(BP_FAILED_PRECONDITION, "event_elapsed_ns: the %s event was never recorded",
                        ra ? "end" : "start");
  if (!da || !db) return BP_NOT_READY;
  if (tb < ta)
    return BP_KIT_ERROR(BP_FAILED_PRECONDITION,
                        "event_elapsed_ns: the end event completed %llu ns before the start event",
                        (unsigned long long)(ta - tb));
  *out_ns = tb - ta;
  return BP_OK;
}
