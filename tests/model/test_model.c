/* Model test of streams, events and copies: random race-free programs of
 * ops (add, mul, fill), copies (same device, across devices of one plugin
 * and across plugins, host <-> device), event records and waits, run from
 * several threads over cpu devices (BP_CPU_DEVICES=4) and vulkan:0 when
 * present, then every buffer and every device-to-host copy is compared with
 * the sequential interpretation (model_program.c).
 *
 * Environment:
 *   BP_MODEL_SEED=S           first program seed (default 1); program i uses S + i
 *   BP_MODEL_PROGRAMS=N       programs to run (default 2000)
 *   BP_MODEL_VULKAN_EVERY=K   every K-th program includes vulkan:0 (default 4;
 *                             0: never)
 * A failure prints the seed, the program and the first mismatch; rerun it
 * alone with BP_MODEL_SEED=<seed> BP_MODEL_PROGRAMS=1 (and
 * BP_MODEL_VULKAN_EVERY=1 when the program used vulkan).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backplane/backplane.h"
#include "model_program.h"

enum { MAX_POOL_STREAMS = MODEL_MAX_STREAMS, MAX_POOL_EVENTS = MODEL_MAX_STEPS };

/* Objects reused by every program (all work drains between programs). */
typedef struct pool {
  bp_context_t* ctx;
  uint32_t num_devices;      /* cpu devices, then vulkan:0 when present */
  uint32_t num_cpu;
  bp_device_t* devices[MODEL_MAX_DEVICES];
  const char* names[MODEL_MAX_DEVICES];
  bp_buffer_t* buffers[MODEL_MAX_BUFFERS];
  bp_tensor_t* tensors[MODEL_MAX_BUFFERS];
  bp_stream_t* setup[MODEL_MAX_DEVICES]; /* initial writes and final reads */
  bp_stream_t* streams[MODEL_MAX_DEVICES][MAX_POOL_STREAMS];
  bp_event_t* events[MODEL_MAX_DEVICES][MAX_POOL_EVENTS];
} pool_t;

/* One run of one program. */
typedef struct run {
  const model_program_t* p;
  pool_t* pool;
  const uint32_t* device_map; /* program device -> pool device */
  bp_stream_t* streams[MODEL_MAX_STREAMS];
  bp_event_t* events[MODEL_MAX_STEPS];
  float host[MODEL_MAX_STEPS][MODEL_ELEMS]; /* D2H destinations */
  pthread_mutex_t mu;
  pthread_cond_t cv;
  int recorded[MODEL_MAX_STEPS]; /* the record of event i was enqueued */
  int failed;
  char error[512];
} run_t;

static void run_fail(run_t* r, const char* fmt, ...) __attribute__((format(printf, 2, 3)));
static void run_fail(run_t* r, const char* fmt, ...) {
  va_list ap;
  pthread_mutex_lock(&r->mu);
  if (!r->failed) {
    va_start(ap, fmt);
    vsnprintf(r->error, sizeof r->error, fmt, ap);
    va_end(ap);
    r->failed = 1;
  }
  pthread_cond_broadcast(&r->cv);
  pthread_mutex_unlock(&r->mu);
}

static bp_status_t run_step(run_t* r, uint32_t index) {
  const model_step_t* st = &r->p->steps[index];
  bp_stream_t* s = r->streams[st->stream];
  bp_tensor_t* const* t = r->pool->tensors;
  bp_buffer_t* const* b = r->pool->buffers;
  switch (st->kind) {
    case STEP_ADD:
    case STEP_MUL: {
      const bp_tensor_t* in[2] = {t[st->a], t[st->b]};
      bp_tensor_t* out[1] = {t[st->out]};
      return bp_op_run(s, st->kind == STEP_ADD ? BP_OP_add : BP_OP_mul, in, 2, NULL, out, 1);
    }
    case STEP_FILL: {
      bp_fill_attrs_t attrs = {.struct_size = sizeof attrs};
      attrs.value.kind = BP_SCALAR_FLOAT;
      attrs.value.v.f = st->value;
      bp_tensor_t* out[1] = {t[st->out]};
      return bp_op_run(s, BP_OP_fill, NULL, 0, &attrs, out, 1);
    }
    case STEP_COPY:
      return bp_copy_buffer(s, b[st->a], st->soff * 4ull, b[st->out], st->doff * 4ull, st->n * 4ull);
    case STEP_H2D: return bp_copy_host_to_buffer(s, st->data, b[st->out], st->doff * 4ull, st->n * 4ull);
    case STEP_D2H: return bp_copy_buffer_to_host(s, b[st->a], st->soff * 4ull, r->host[index], st->n * 4ull);
    case STEP_RECORD: {
      bp_status_t status = bp_event_record(r->events[st->event], s);
      pthread_mutex_lock(&r->mu);
      r->recorded[st->event] = 1;
      pthread_cond_broadcast(&r->cv);
      pthread_mutex_unlock(&r->mu);
      return status;
    }
    case STEP_WAIT: {
      /* The record comes earlier in global order, maybe on another thread:
       * wait until it was enqueued, so the wait is for that record. */
      pthread_mutex_lock(&r->mu);
      while (!r->recorded[st->event] && !r->failed) pthread_cond_wait(&r->cv, &r->mu);
      int failed = r->failed;
      pthread_mutex_unlock(&r->mu);
      return failed ? BP_ABORTED : bp_stream_wait_event(s, r->events[st->event]);
    }
    case STEP_SYNC: return bp_stream_synchronize(s);
    default: return BP_INTERNAL;
  }
}

typedef struct thread_arg {
  run_t* r;
  uint32_t thread;
} thread_arg_t;

static void* thread_main(void* arg) {
  thread_arg_t* a = arg;
  run_t* r = a->r;
  const model_program_t* p = r->p;
  for (uint32_t i = 0; i < p->num_steps && !r->failed; i++) {
    if (model_stream_thread(p, p->steps[i].stream) != a->thread) continue;
    bp_status_t status = run_step(r, i);
    if (status != BP_OK && status != BP_ABORTED)
      run_fail(r, "step %u: %s: %s", i, bp_status_name(status), bp_status_message());
  }
  /* Drain this thread's streams (they are externally synchronized). */
  for (uint32_t s = 0; s < p->num_streams; s++) {
    if (model_stream_thread(p, s) != a->thread) continue;
    bp_status_t status = bp_stream_synchronize(r->streams[s]);
    if (status != BP_OK) run_fail(r, "stream %u: synchronize: %s: %s", s, bp_status_name(status), bp_status_message());
  }
  return NULL;
}

static void compare(run_t* r, const char* what, uint32_t id, const float* got, const float* want, uint32_t n) {
  for (uint32_t i = 0; i < n; i++)
    if (got[i] != want[i]) {
      run_fail(r, "%s %u element %u: got %g, the sequential model says %g", what, id, i, got[i], want[i]);
      return;
    }
}

/* Writes the initial values, runs the program on its threads, compares. */
static void run_program(pool_t* pool, const model_program_t* p, const uint32_t* device_map) {
  static run_t r; /* large; programs run one at a time */
  memset(&r, 0, sizeof r);
  r.p = p;
  r.pool = pool;
  r.device_map = device_map;
  pthread_mutex_init(&r.mu, NULL);
  pthread_cond_init(&r.cv, NULL);
  uint32_t per_device[MODEL_MAX_DEVICES] = {0}, events_per_device[MODEL_MAX_DEVICES] = {0};
  for (uint32_t s = 0; s < p->num_streams; s++) {
    uint32_t d = device_map[p->stream_device[s]];
    r.streams[s] = pool->streams[d][per_device[d]++];
  }
  for (uint32_t e = 0; e < p->num_events; e++) {
    uint32_t d = device_map[p->stream_device[p->event_stream[e]]];
    r.events[e] = pool->events[d][events_per_device[d]++];
  }
  for (uint32_t b = 0; b < p->num_buffers; b++) {
    uint32_t d = device_map[model_buffer_device(b)];
    assert_int_equal(bp_copy_host_to_buffer(pool->setup[d], p->initial[b], pool->buffers[b], 0,
                                            sizeof p->initial[b]), BP_OK);
  }
  for (uint32_t d = 0; d < pool->num_devices; d++)
    assert_int_equal(bp_stream_synchronize(pool->setup[d]), BP_OK);

  pthread_t threads[MODEL_MAX_THREADS];
  thread_arg_t args[MODEL_MAX_THREADS];
  for (uint32_t t = 0; t < p->num_threads; t++) {
    args[t] = (thread_arg_t){&r, t};
    assert_int_equal(pthread_create(&threads[t], NULL, thread_main, &args[t]), 0);
  }
  for (uint32_t t = 0; t < p->num_threads; t++) pthread_join(threads[t], NULL);

  float got[MODEL_ELEMS];
  for (uint32_t b = 0; b < p->num_buffers && !r.failed; b++) {
    bp_stream_t* s = pool->setup[device_map[model_buffer_device(b)]];
    if (bp_copy_buffer_to_host(s, pool->buffers[b], 0, got, sizeof got) != BP_OK ||
        bp_stream_synchronize(s) != BP_OK)
      run_fail(&r, "reading buffer %u: %s", b, bp_status_message());
    else
      compare(&r, "buffer", b, got, p->final[b], MODEL_ELEMS);
  }
  for (uint32_t i = 0; i < p->num_steps && !r.failed; i++)
    if (p->steps[i].kind == STEP_D2H) compare(&r, "d2h of step", i, r.host[i], p->steps[i].data, p->steps[i].n);
  if (r.failed) {
    const char* names[MODEL_MAX_DEVICES];
    for (uint32_t d = 0; d < p->num_devices; d++) names[d] = pool->names[device_map[d]];
    model_program_print(p, names);
    fail_msg("program seed %llu failed: %s (rerun: BP_MODEL_SEED=%llu BP_MODEL_PROGRAMS=1%s)",
             (unsigned long long)p->seed, r.error, (unsigned long long)p->seed,
             p->num_devices > pool->num_cpu ? " BP_MODEL_VULKAN_EVERY=1" : "");
  }
  pthread_mutex_destroy(&r.mu);
  pthread_cond_destroy(&r.cv);
}

static uint64_t env_u64(const char* name, uint64_t dflt) {
  const char* v = getenv(name);
  return v && *v ? strtoull(v, NULL, 10) : dflt;
}

static int pool_setup(void** state) {
  static pool_t pool;
  memset(&pool, 0, sizeof pool);
  if (bp_context_create(NULL, &pool.ctx) != BP_OK) {
    fprintf(stderr, "bp_context_create: %s\n", bp_status_message());
    return -1;
  }
  static const char* const specs[] = {"cpu:0", "cpu:1", "cpu:2", "cpu:3", "vulkan:0"};
  for (uint32_t i = 0; i < sizeof specs / sizeof specs[0]; i++) {
    bp_device_t* dev = NULL;
    if (bp_context_find_device(pool.ctx, specs[i], &dev) != BP_OK) continue;
    if (i < 4) pool.num_cpu++;
    pool.names[pool.num_devices] = specs[i];
    pool.devices[pool.num_devices++] = dev;
  }
  if (pool.num_cpu < 2) {
    fprintf(stderr, "the model test needs at least 2 cpu devices (BP_CPU_DEVICES=4)\n");
    return -1;
  }
  for (uint32_t d = 0; d < pool.num_devices; d++) {
    bp_device_t* dev = pool.devices[d];
    if (bp_stream_create(dev, NULL, &pool.setup[d]) != BP_OK) return -1;
    for (uint32_t k = 0; k < MAX_POOL_STREAMS; k++)
      if (bp_stream_create(dev, NULL, &pool.streams[d][k]) != BP_OK) return -1;
    for (uint32_t k = 0; k < MAX_POOL_EVENTS; k++)
      if (bp_event_create(dev, NULL, &pool.events[d][k]) != BP_OK) return -1;
    for (uint32_t k = 0; k < MODEL_BUFS_PER_DEVICE; k++) {
      uint32_t b = d * MODEL_BUFS_PER_DEVICE + k;
      int64_t size = MODEL_ELEMS;
      if (bp_buffer_allocate(dev, 0, MODEL_ELEMS * sizeof(float), &pool.buffers[b]) != BP_OK ||
          bp_tensor_from_buffer(pool.buffers[b], BP_DTYPE_F32, 1, &size, NULL, 0, &pool.tensors[b]) != BP_OK) {
        fprintf(stderr, "buffer on %s: %s\n", pool.names[d], bp_status_message());
        return -1;
      }
    }
  }
  *state = &pool;
  return 0;
}

static int pool_teardown(void** state) {
  pool_t* pool = *state;
  for (uint32_t d = 0; d < pool->num_devices; d++) {
    for (uint32_t k = 0; k < MODEL_BUFS_PER_DEVICE; k++) {
      bp_tensor_release(pool->tensors[d * MODEL_BUFS_PER_DEVICE + k]);
      bp_buffer_release(pool->buffers[d * MODEL_BUFS_PER_DEVICE + k]);
    }
    for (uint32_t k = 0; k < MAX_POOL_EVENTS; k++) bp_event_release(pool->events[d][k]);
    for (uint32_t k = 0; k < MAX_POOL_STREAMS; k++) bp_stream_release(pool->streams[d][k]);
    bp_stream_release(pool->setup[d]);
  }
  bp_context_release(pool->ctx);
  return 0;
}

/* Runs the programs; a program with vulkan maps its last device to it. */
static void test_random_programs(void** state) {
  pool_t* pool = *state;
  uint64_t seed = env_u64("BP_MODEL_SEED", 1), count = env_u64("BP_MODEL_PROGRAMS", 2000);
  uint64_t vulkan_every = env_u64("BP_MODEL_VULKAN_EVERY", 4);
  int have_vulkan = pool->num_devices > pool->num_cpu;
  static model_program_t program;
  uint64_t with_vulkan = 0;
  for (uint64_t i = 0; i < count; i++) {
    int vk = have_vulkan && vulkan_every && (seed + i) % vulkan_every == 0;
    uint32_t map[MODEL_MAX_DEVICES], n = pool->num_cpu;
    for (uint32_t d = 0; d < n; d++) map[d] = d;
    if (vk) map[n++] = pool->num_cpu;
    model_program_generate(&program, seed + i, n);
    run_program(pool, &program, map);
    with_vulkan += (uint64_t)vk;
  }
  printf("model: %llu programs passed (%llu with vulkan:0, seeds %llu..%llu)\n",
         (unsigned long long)count, (unsigned long long)with_vulkan, (unsigned long long)seed,
         (unsigned long long)(seed + count - 1));
}

int main(void) {
  setenv("BP_CPU_DEVICES", "4", 0);
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_random_programs),
  };
  return cmocka_run_group_tests(tests, pool_setup, pool_teardown);
}
