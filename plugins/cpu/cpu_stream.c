/* backplane CPU plugin: streams, events, stream-ordered copies and op launch.
 *
 * A stream is an in-order queue served by one worker thread. Commands live
 * in a bounded ring of fixed-size slots: enqueueing copies the op call, its
 * tensor descriptors and its attributes into a slot by value (no allocation,
 * except for tensor lists longer than CPU_CMD_INLINE_DESCS) and publishes it
 * by bumping an atomic head: no lock on the hot path. An idle worker polls
 * briefly before it sleeps, and the producer signals it only when it sleeps.
 * A full ring blocks the producer until the worker frees a slot.
 *
 * Errors raised by commands are sticky: the first one is kept (with its
 * message) and returned by the next stream_synchronize / stream_query, then
 * cleared. Events capture the stream's error when they complete.
 */
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cpu_internal.h"

#define CPU_RING_SLOTS 256u
#define CPU_CMD_INLINE_DESCS 8u
#define CPU_MAX_OPERANDS 4096u
/* Polls of an idle worker before it sleeps (a few tens of microseconds). */
#define CPU_IDLE_SPINS 1000

static inline void cpu_relax(void) {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  __asm__ __volatile__("yield");
#endif
}

enum cpu_cmd_kind { CMD_OP, CMD_COPY, CMD_FILL, CMD_HOST_FUNC, CMD_RECORD, CMD_WAIT };

typedef struct cpu_cmd {
  uint32_t kind;
  union {
    struct { void* dst; const void* src; uint64_t size; } copy;
    struct { unsigned char* dst; uint64_t size; uint32_t psize; unsigned char pattern[8]; } fill;
    struct { bp_host_func_t fn; void* user; } host;
    struct { struct bpp_event_s* ev; uint64_t gen; } event;
  } u;
  bp_op_call_t call;               /* pointers retargeted to the slot */
  bp_tensor_desc_t* heap_descs;    /* only for long tensor lists; freed by the worker */
  bp_tensor_desc_t descs[CPU_CMD_INLINE_DESCS];
  cpu_attrs_storage_t attrs;
} cpu_cmd_t;

struct bpp_stream_s {
  struct bpp_device_s* device;
  pthread_mutex_t mu;
  pthread_cond_t work_cv; /* producer -> worker: work arrived / stop */
  pthread_cond_t done_cv; /* worker -> waiters: a command completed */
  pthread_t thread;
  cpu_cmd_t* ring;
  /* The ring is single-producer (the stream is externally synchronized) and
   * single-consumer (the worker): head and tail move without the mutex. The
   * mutex and the condition variables are used only to sleep and wake, with
   * the sleeping/waiters flags as the handshake (sequentially consistent
   * atomics on both sides, so a wake-up cannot be lost). */
  _Atomic uint64_t head; /* commands enqueued; written by the producer */
  _Atomic uint64_t tail; /* commands completed; written by the worker */
  atomic_int sleeping;   /* the worker waits on work_cv */
  atomic_int waiters;    /* threads wait on done_cv for tail to advance */
  atomic_int stop;
  bp_status_t err; /* first error not yet reported */
  char err_msg[CPU_MSG_CAP];
};

struct bpp_event_s {
  pthread_mutex_t mu;
  pthread_cond_t cv;
  uint64_t recorded;  /* records enqueued */
  uint64_t completed; /* newest record that ran */
  uint64_t ts_ns;     /* CLOCK_MONOTONIC when it ran */
  bp_status_t status; /* the stream's error at that point */
  char msg[CPU_MSG_CAP];
};

static uint64_t now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* ------------------------------------------------------------------------ */
/* Parallel memcpy                                                           */
/* ------------------------------------------------------------------------ */
typedef struct { unsigned char* dst; const unsigned char* src; } memcpy_job_t;
static void memcpy_range(void* ctx, int64_t b, int64_t e) {
  memcpy_job_t* j = ctx;
  memcpy(j->dst + b, j->src + b, (size_t)(e - b));
}
void cpu_memcpy(void* dst, const void* src, uint64_t size) {
  if (size == 0 || dst == src) return;
  if (size < (1u << 20)) {
    memcpy(dst, src, size);
    return;
  }
  memcpy_job_t j = {dst, src};
  cpu_parallel_for((int64_t)size, 256 << 10, memcpy_range, &j);
}

/* ------------------------------------------------------------------------ */
/* Worker                                                                    */
/* ------------------------------------------------------------------------ */
static bp_status_t run_cmd(struct bpp_stream_s* s, cpu_cmd_t* c) {
  switch (c->kind) {
    case CMD_OP: return cpu_exec_op(&c->call);
    case CMD_COPY: cpu_memcpy(c->u.copy.dst, c->u.copy.src, c->u.copy.size); return BP_OK;
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
    case CMD_HOST_FUNC: c->u.host.fn(c->u.host.user); return BP_OK;
    case CMD_RECORD: {
      struct bpp_event_s* ev = c->u.event.ev;
      pthread_mutex_lock(&s->mu);
      bp_status_t serr = s->err;
      char msg[CPU_MSG_CAP];
      memcpy(msg, s->err_msg, sizeof msg);
      pthread_mutex_unlock(&s->mu);
      pthread_mutex_lock(&ev->mu);
      if (c->u.event.gen > ev->completed) {
        ev->completed = c->u.event.gen;
        ev->ts_ns = now_ns();
        ev->status = serr;
        memcpy(ev->msg, msg, sizeof msg);
      }
      pthread_cond_broadcast(&ev->cv);
      pthread_mutex_unlock(&ev->mu);
      return BP_OK;
    }
    case CMD_WAIT: {
      struct bpp_event_s* ev = c->u.event.ev;
      pthread_mutex_lock(&ev->mu);
      while (ev->completed < c->u.event.gen) pthread_cond_wait(&ev->cv, &ev->mu);
      pthread_mutex_unlock(&ev->mu);
      return BP_OK;
    }
    default: return cpu_error(BP_INTERNAL, "cpu: unknown stream command %u", c->kind);
  }
}

/* Polls `*value` (an atomic counter) until it differs from `seen` or the
 * spin budget runs out; returns the last value read. */
static uint64_t spin_while_equal(_Atomic uint64_t* value, uint64_t seen, atomic_int* stop) {
  uint64_t v = seen;
  for (int spin = 0; spin < CPU_IDLE_SPINS; ++spin) {
    v = atomic_load_explicit(value, memory_order_acquire);
    if (v != seen || (stop && atomic_load_explicit(stop, memory_order_relaxed))) break;
    cpu_relax();
  }
  return v;
}

static void* stream_main(void* arg) {
  struct bpp_stream_s* s = arg;
  cpu_set_worker_thread(1);
  for (;;) {
    uint64_t t = atomic_load_explicit(&s->tail, memory_order_relaxed);
    if (atomic_load(&s->head) == t) {
      /* Idle: poll a little while before sleeping, so that a producer
       * issuing ops back to back finds the worker awake and pays no futex
       * wake-up (about a microsecond) per op. */
      if (spin_while_equal(&s->head, t, &s->stop) == t) {
        pthread_mutex_lock(&s->mu);
        atomic_store(&s->sleeping, 1);
        while (atomic_load(&s->head) == t && !atomic_load(&s->stop))
          pthread_cond_wait(&s->work_cv, &s->mu);
        atomic_store(&s->sleeping, 0);
        pthread_mutex_unlock(&s->mu);
        if (atomic_load(&s->head) == t) break; /* stop requested and drained */
      }
    }
    cpu_cmd_t* c = &s->ring[t % CPU_RING_SLOTS];
    bp_status_t st = run_cmd(s, c);
    free(c->heap_descs);
    c->heap_descs = NULL;
    if (st != BP_OK) {
      pthread_mutex_lock(&s->mu);
      if (s->err == BP_OK) {
        s->err = st;
        snprintf(s->err_msg, sizeof s->err_msg, "%s", cpu_last_error());
      }
      pthread_mutex_unlock(&s->mu);
    }
    atomic_store(&s->tail, t + 1);
    if (atomic_load(&s->waiters)) {
      pthread_mutex_lock(&s->mu);
      pthread_cond_broadcast(&s->done_cv);
      pthread_mutex_unlock(&s->mu);
    }
  }
  return NULL;
}

/* Blocks until the worker completed command number `target` (tail >=
 * target). Called without the mutex. */
static void wait_tail(struct bpp_stream_s* s, uint64_t target) {
  if (atomic_load(&s->tail) >= target) return;
  for (int spin = 0; spin < CPU_IDLE_SPINS; ++spin) {
    if (atomic_load_explicit(&s->tail, memory_order_acquire) >= target) return;
    cpu_relax();
  }
  pthread_mutex_lock(&s->mu);
  atomic_fetch_add(&s->waiters, 1);
  while (atomic_load(&s->tail) < target) pthread_cond_wait(&s->done_cv, &s->mu);
  atomic_fetch_sub(&s->waiters, 1);
  pthread_mutex_unlock(&s->mu);
}

/* Returns the free slot at the head (waiting while the ring is full). Only
 * the stream's single producer calls it. */
static cpu_cmd_t* begin_cmd(struct bpp_stream_s* s, uint32_t kind) {
  uint64_t h = atomic_load_explicit(&s->head, memory_order_relaxed);
  if (h >= CPU_RING_SLOTS) wait_tail(s, h - CPU_RING_SLOTS + 1);
  cpu_cmd_t* c = &s->ring[h % CPU_RING_SLOTS];
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
bp_status_t cpu_stream_create(bpp_device_t device, uint32_t flags, bpp_stream_t* out) {
  bp_status_t st = BP_OK;
  struct bpp_stream_s* s = NULL;
  if (!device || !out) return cpu_error(BP_INVALID_ARGUMENT, "cpu: stream_create: NULL argument");
  *out = NULL;
  s = calloc(1, sizeof *s);
  if (!s) {
    st = cpu_error(BP_RESOURCE_EXHAUSTED, "cpu: stream_create: out of memory");
    goto cleanup;
  }
  s->ring = aligned_alloc(64, sizeof(cpu_cmd_t) * CPU_RING_SLOTS);
  if (!s->ring) {
    st = cpu_error(BP_RESOURCE_EXHAUSTED, "cpu: stream_create: cannot allocate a %zu-byte ring",
                   sizeof(cpu_cmd_t) * CPU_RING_SLOTS);
    goto cleanup;
  }
  s->device = device;
  pthread_mutex_init(&s->mu, NULL);
  pthread_cond_init(&s->work_cv, NULL);
  pthread_cond_init(&s->done_cv, NULL);
  if (pthread_create(&s->thread, NULL, stream_main, s) != 0) {
    pthread_mutex_destroy(&s->mu);
    pthread_cond_destroy(&s->work_cv);
    pthread_cond_destroy(&s->done_cv);
    st = cpu_error(BP_RESOURCE_EXHAUSTED, "cpu: stream_create: cannot start the worker thread");
    goto cleanup;
  }
  *out = s;
  s = NULL;
cleanup:
  if (s) free(s->ring);
  free(s);
  return st;
}

void cpu_stream_destroy(bpp_stream_t s) {
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

/* Takes and clears the sticky error (called with s->mu held). */
static bp_status_t take_error(struct bpp_stream_s* s) {
  bp_status_t st = s->err;
  if (st != BP_OK) {
    char msg[CPU_MSG_CAP];
    memcpy(msg, s->err_msg, sizeof msg);
    s->err = BP_OK;
    s->err_msg[0] = 0;
    pthread_mutex_unlock(&s->mu);
    cpu_error(st, "%s", msg);
    pthread_mutex_lock(&s->mu);
  }
  return st;
}

bp_status_t cpu_stream_synchronize(bpp_stream_t s) {
  if (!s) return cpu_error(BP_INVALID_ARGUMENT, "cpu: stream_synchronize: NULL stream");
  wait_tail(s, atomic_load_explicit(&s->head, memory_order_relaxed));
  pthread_mutex_lock(&s->mu);
  bp_status_t st = take_error(s);
  pthread_mutex_unlock(&s->mu);
  return st;
}

bp_status_t cpu_stream_query(bpp_stream_t s) {
  if (!s) return cpu_error(BP_INVALID_ARGUMENT, "cpu: stream_query: NULL stream");
  pthread_mutex_lock(&s->mu);
  bp_status_t st = take_error(s);
  if (st == BP_OK && atomic_load(&s->tail) != atomic_load(&s->head)) st = BP_NOT_READY;
  pthread_mutex_unlock(&s->mu);
  return st;
}

bp_status_t cpu_stream_host_func(bpp_stream_t s, bp_host_func_t fn, void* user) {
  if (!s || !fn) return cpu_error(BP_INVALID_ARGUMENT, "cpu: stream_enqueue_host_func: NULL %s",
                                  s ? "function" : "stream");
  cpu_cmd_t* c = begin_cmd(s, CMD_HOST_FUNC);
  c->u.host.fn = fn;
  c->u.host.user = user;
  end_cmd(s);
  return BP_OK;
}

/* ------------------------------------------------------------------------ */
/* Copies and fills                                                          */
/* ------------------------------------------------------------------------ */
bp_status_t cpu_check_range(const char* what, bpp_buffer_t b, uint64_t off, uint64_t size) {
  if (!b) return cpu_error(BP_INVALID_ARGUMENT, "cpu: %s: NULL buffer", what);
  if (off > b->size || size > b->size - off)
    return cpu_error(BP_OUT_OF_RANGE,
                     "cpu: %s: range [%llu, +%llu) exceeds the buffer of %llu bytes", what,
                     (unsigned long long)off, (unsigned long long)size,
                     (unsigned long long)b->size);
  return BP_OK;
}

static bp_status_t enqueue_copy(bpp_stream_t s, void* dst, const void* src, uint64_t size) {
  if (size == 0) return BP_OK;
  cpu_cmd_t* c = begin_cmd(s, CMD_COPY);
  c->u.copy.dst = dst;
  c->u.copy.src = src;
  c->u.copy.size = size;
  end_cmd(s);
  return BP_OK;
}

bp_status_t cpu_copy_h2d(bpp_stream_t s, const void* src, bpp_buffer_t dst, uint64_t dst_off,
                         uint64_t size) {
  bp_status_t st;
  if (!s || (!src && size)) return cpu_error(BP_INVALID_ARGUMENT, "cpu: copy_host_to_device: NULL %s", s ? "source" : "stream");
  if ((st = cpu_check_range("copy_host_to_device destination", dst, dst_off, size))) return st;
  return enqueue_copy(s, dst->ptr + dst_off, src, size);
}

bp_status_t cpu_copy_d2h(bpp_stream_t s, bpp_buffer_t src, uint64_t src_off, void* dst,
                         uint64_t size) {
  bp_status_t st;
  if (!s || (!dst && size)) return cpu_error(BP_INVALID_ARGUMENT, "cpu: copy_device_to_host: NULL %s", s ? "destination" : "stream");
  if ((st = cpu_check_range("copy_device_to_host source", src, src_off, size))) return st;
  return enqueue_copy(s, dst, src->ptr + src_off, size);
}

bp_status_t cpu_copy_d2d(bpp_stream_t s, bpp_buffer_t src, uint64_t src_off, bpp_buffer_t dst,
                         uint64_t dst_off, uint64_t size) {
  bp_status_t st;
  if (!s) return cpu_error(BP_INVALID_ARGUMENT, "cpu: copy_device_to_device: NULL stream");
  if ((st = cpu_check_range("copy source", src, src_off, size))) return st;
  if ((st = cpu_check_range("copy destination", dst, dst_off, size))) return st;
  return enqueue_copy(s, dst->ptr + dst_off, src->ptr + src_off, size);
}

bp_status_t cpu_buffer_fill(bpp_stream_t s, bpp_buffer_t buf, uint64_t off, uint64_t size,
                            const void* pattern, uint32_t psize) {
  bp_status_t st;
  if (!s || !pattern) return cpu_error(BP_INVALID_ARGUMENT, "cpu: buffer_fill: NULL %s", s ? "pattern" : "stream");
  if (psize != 1 && psize != 2 && psize != 4 && psize != 8)
    return cpu_error(BP_INVALID_ARGUMENT, "cpu: buffer_fill: pattern size %u is not 1, 2, 4 or 8", psize);
  if (size % psize)
    return cpu_error(BP_INVALID_ARGUMENT, "cpu: buffer_fill: size %llu is not a multiple of the %u-byte pattern",
                     (unsigned long long)size, psize);
  if ((st = cpu_check_range("buffer_fill", buf, off, size))) return st;
  if (size == 0) return BP_OK;
  cpu_cmd_t* c = begin_cmd(s, CMD_FILL);
  c->u.fill.dst = buf->ptr + off;
  c->u.fill.size = size;
  c->u.fill.psize = psize;
  memcpy(c->u.fill.pattern, pattern, psize);
  end_cmd(s);
  return BP_OK;
}

/* ------------------------------------------------------------------------ */
/* Events                                                                    */
/* ------------------------------------------------------------------------ */
bp_status_t cpu_event_create(bpp_device_t device, uint32_t flags, bpp_event_t* out) {
  if (!device || !out) return cpu_error(BP_INVALID_ARGUMENT, "cpu: event_create: NULL argument");
  struct bpp_event_s* e = calloc(1, sizeof *e);
  *out = NULL;
  if (!e) return cpu_error(BP_RESOURCE_EXHAUSTED, "cpu: event_create: out of memory");
  pthread_mutex_init(&e->mu, NULL);
  pthread_cond_init(&e->cv, NULL);
  *out = e;
  return BP_OK;
}

void cpu_event_destroy(bpp_event_t e) {
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

bp_status_t cpu_event_record(bpp_event_t e, bpp_stream_t s) {
  if (!e || !s) return cpu_error(BP_INVALID_ARGUMENT, "cpu: event_record: NULL %s", e ? "stream" : "event");
  pthread_mutex_lock(&e->mu);
  uint64_t gen = ++e->recorded;
  pthread_mutex_unlock(&e->mu);
  cpu_cmd_t* c = begin_cmd(s, CMD_RECORD);
  c->u.event.ev = e;
  c->u.event.gen = gen;
  end_cmd(s);
  return BP_OK;
}

bp_status_t cpu_stream_wait_event(bpp_stream_t s, bpp_event_t e) {
  if (!e || !s) return cpu_error(BP_INVALID_ARGUMENT, "cpu: stream_wait_event: NULL %s", e ? "stream" : "event");
  pthread_mutex_lock(&e->mu);
  uint64_t gen = e->recorded; /* waits for the newest record enqueued so far */
  pthread_mutex_unlock(&e->mu);
  if (gen == 0) return BP_OK; /* never recorded: nothing to wait for */
  cpu_cmd_t* c = begin_cmd(s, CMD_WAIT);
  c->u.event.ev = e;
  c->u.event.gen = gen;
  end_cmd(s);
  return BP_OK;
}

static bp_status_t event_status(struct bpp_event_s* e) {
  /* called with e->mu held, after completion */
  if (e->status != BP_OK) cpu_error(e->status, "%s", e->msg);
  return e->status;
}

bp_status_t cpu_event_query(bpp_event_t e) {
  if (!e) return cpu_error(BP_INVALID_ARGUMENT, "cpu: event_query: NULL event");
  pthread_mutex_lock(&e->mu);
  bp_status_t st = e->completed < e->recorded ? BP_NOT_READY : event_status(e);
  pthread_mutex_unlock(&e->mu);
  return st;
}

bp_status_t cpu_event_synchronize(bpp_event_t e) {
  if (!e) return cpu_error(BP_INVALID_ARGUMENT, "cpu: event_synchronize: NULL event");
  pthread_mutex_lock(&e->mu);
  uint64_t target = e->recorded;
  while (e->completed < target) pthread_cond_wait(&e->cv, &e->mu);
  bp_status_t st = event_status(e);
  pthread_mutex_unlock(&e->mu);
  return st;
}

bp_status_t cpu_event_elapsed_ns(bpp_event_t a, bpp_event_t b, uint64_t* out_ns) {
  if (!a || !b || !out_ns) return cpu_error(BP_INVALID_ARGUMENT, "cpu: event_elapsed_ns: NULL argument");
  uint64_t ta, tb;
  int ra, rb, da, db;
  pthread_mutex_lock(&a->mu);
  ta = a->ts_ns; ra = a->recorded > 0; da = a->completed >= a->recorded;
  pthread_mutex_unlock(&a->mu);
  pthread_mutex_lock(&b->mu);
  tb = b->ts_ns; rb = b->recorded > 0; db = b->completed >= b->recorded;
  pthread_mutex_unlock(&b->mu);
  if (!ra || !rb)
    return cpu_error(BP_FAILED_PRECONDITION, "cpu: event_elapsed_ns: the %s event was never recorded",
                     ra ? "end" : "start");
  if (!da || !db) return BP_NOT_READY;
  if (tb < ta)
    return cpu_error(BP_FAILED_PRECONDITION, "cpu: event_elapsed_ns: the end event completed %llu ns before the start event",
                     (unsigned long long)(ta - tb));
  *out_ns = tb - ta;
  return BP_OK;
}

/* ------------------------------------------------------------------------ */
/* Op launch                                                                 */
/* ------------------------------------------------------------------------ */
static bp_status_t check_operand(uint32_t op, const bp_tensor_desc_t* d, int is_input, uint32_t i) {
  /* Cheap checks first; the operand's name is formatted only on failure. */
  if (d->struct_size >= BP_TENSOR_DESC_V1_SIZE && d->dtype == BP_DTYPE_INVALID && is_input &&
      cpu_op_input_optional(op, i))
    return BP_OK;
  char what[96], msg[CPU_MSG_CAP];
  bp_status_t st = BP_OK;
  if (d->struct_size >= BP_TENSOR_DESC_V1_SIZE && d->dtype != BP_DTYPE_INVALID && d->buffer) {
    st = bp_plugin_check_desc(d, ((struct bpp_buffer_s*)d->buffer)->size, "", msg, sizeof msg);
    if (st == BP_OK) return BP_OK;
  }
  snprintf(what, sizeof what, "cpu: %s: %s %u", cpu_op_name(op), is_input ? "input" : "output", i);
  if (d->struct_size < BP_TENSOR_DESC_V1_SIZE)
    return cpu_error(BP_INVALID_ARGUMENT, "%s: descriptor struct_size %u < %u", what,
                     d->struct_size, BP_TENSOR_DESC_V1_SIZE);
  if (d->dtype == BP_DTYPE_INVALID)
    return cpu_error(BP_INVALID_ARGUMENT, "%s is absent (dtype INVALID) but required", what);
  if (!d->buffer) return cpu_error(BP_INVALID_ARGUMENT, "%s has a NULL buffer", what);
  return cpu_error(st, "%s%s", what, msg);
}

static void copy_desc(bp_tensor_desc_t* dst, const bp_tensor_desc_t* src) {
  size_t n = src->struct_size < sizeof *dst ? src->struct_size : sizeof *dst;
  memcpy(dst, src, n);
  if (n < sizeof *dst) memset((char*)dst + n, 0, sizeof *dst - n);
  dst->struct_size = sizeof *dst;
}

bp_status_t cpu_launch_op(bpp_stream_t s, const bp_op_call_t* call) {
  bp_status_t st = BP_OK;
  if (!s || !call) return cpu_error(BP_INVALID_ARGUMENT, "cpu: launch: NULL %s", s ? "call" : "stream");
  if (call->struct_size < BP_OP_CALL_V1_SIZE)
    return cpu_error(BP_INVALID_ARGUMENT, "cpu: launch: op call struct_size %u < %u",
                     call->struct_size, BP_OP_CALL_V1_SIZE);
  uint32_t op = call->op_id;
  if (bp_op_family(op) == BP_OP_FAMILY_INVALID)
    return cpu_error(BP_INVALID_ARGUMENT, "cpu: launch: op id %u out of range [1, %u)", op, BP_OP_COUNT);
  if (!cpu_op_implemented(op))
    return cpu_error(BP_UNIMPLEMENTED, "cpu: op %s (id %u) has no CPU kernel", cpu_op_name(op), op);
  int nin = cpu_op_num_inputs(op), nout = cpu_op_num_outputs(op);
  if ((nin >= 0 && call->num_inputs != (uint32_t)nin) || (nin < 0 && call->num_inputs == 0))
    return cpu_error(BP_INVALID_ARGUMENT, "cpu: %s: %u inputs given, expected %s%d",
                     cpu_op_name(op), call->num_inputs, nin < 0 ? "at least " : "",
                     nin < 0 ? 1 : nin);
  if (call->num_inputs > CPU_MAX_OPERANDS)
    return cpu_error(BP_INVALID_ARGUMENT, "cpu: %s: %u inputs given, at most %u supported",
                     cpu_op_name(op), call->num_inputs, CPU_MAX_OPERANDS);
  if (call->num_outputs != (uint32_t)nout)
    return cpu_error(BP_INVALID_ARGUMENT, "cpu: %s: %u outputs given, expected %d", cpu_op_name(op),
                     call->num_outputs, nout);
  if ((call->num_inputs && !call->inputs) || !call->outputs)
    return cpu_error(BP_INVALID_ARGUMENT, "cpu: %s: NULL operand array", cpu_op_name(op));
  for (uint32_t i = 0; i < call->num_inputs; i++)
    if ((st = check_operand(op, &call->inputs[i], 1, i))) return st;
  for (uint32_t i = 0; i < call->num_outputs; i++)
    if ((st = check_operand(op, &call->outputs[i], 0, i))) return st;
  size_t asz = cpu_op_attrs_size(op);
  if (asz) {
    if (!call->attrs)
      return cpu_error(BP_INVALID_ARGUMENT, "cpu: %s: NULL attributes", cpu_op_name(op));
    uint32_t given;
    memcpy(&given, call->attrs, sizeof given);
    if (given < asz)
      return cpu_error(BP_INVALID_ARGUMENT, "cpu: %s: attribute struct_size %u < %zu",
                       cpu_op_name(op), given, asz);
  }
  uint32_t total = call->num_inputs + call->num_outputs;
  bp_tensor_desc_t* heap = NULL;
  if (total > CPU_CMD_INLINE_DESCS) {
    heap = malloc(sizeof(bp_tensor_desc_t) * total);
    if (!heap) return cpu_error(BP_RESOURCE_EXHAUSTED, "cpu: %s: out of memory for %u descriptors",
                                cpu_op_name(op), total);
  }
  cpu_cmd_t* c = begin_cmd(s, CMD_OP);
  bp_tensor_desc_t* d = heap ? heap : c->descs;
  c->heap_descs = heap;
  for (uint32_t i = 0; i < call->num_inputs; i++) copy_desc(&d[i], &call->inputs[i]);
  for (uint32_t i = 0; i < call->num_outputs; i++) copy_desc(&d[call->num_inputs + i], &call->outputs[i]);
  if (asz) memcpy(&c->attrs, call->attrs, asz);
  c->call = (bp_op_call_t){
      .struct_size = sizeof(bp_op_call_t),
      .op_id = op,
      .num_inputs = call->num_inputs,
      .num_outputs = call->num_outputs,
      .compute_dtype = call->compute_dtype,
      .inputs = d,
      .outputs = d + call->num_inputs,
      .attrs = asz ? (const void*)&c->attrs : NULL,
  };
  end_cmd(s);
  return BP_OK;
}
