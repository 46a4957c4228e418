/* Random race-free stream programs and their sequential interpretation
 * (see model_program.h). */
#include "model_program.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

/* Largest magnitude a value may take (exact in f32 and in every backend). */
#define MODEL_VALUE_LIMIT 1048576.0f

typedef struct rng {
  uint64_t s;
} rng_t;

/* splitmix64: good enough for test programs, reproducible everywhere. */
static uint64_t rng_next(rng_t* r) {
  uint64_t z = (r->s += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}
static uint32_t rng_below(rng_t* r, uint32_t n) { return (uint32_t)(rng_next(r) % n); }
static float rng_small(rng_t* r) { return (float)((int)rng_below(r, 17) - 8); }

/* Generation state: vector clocks per stream, last accesses per buffer. */
typedef struct gen {
  model_program_t* p;
  rng_t rng;
  uint32_t clock[MODEL_MAX_STREAMS][MODEL_MAX_STREAMS]; /* clock[s][x]: s is ordered after x's first clock[s][x] steps */
  uint32_t writer[MODEL_MAX_BUFFERS];       /* stream of the last write, or UINT32_MAX */
  uint32_t write_pos[MODEL_MAX_BUFFERS];    /* its position on that stream (1-based) */
  uint32_t read_pos[MODEL_MAX_BUFFERS][MODEL_MAX_STREAMS]; /* newest read per stream since that write */
  float cur[MODEL_MAX_BUFFERS][MODEL_ELEMS];
} gen_t;

static model_step_t* append(gen_t* g, uint32_t kind, uint32_t stream) {
  model_program_t* p = g->p;
  model_step_t* st = &p->steps[p->num_steps++];
  memset(st, 0, sizeof *st);
  st->kind = kind;
  st->stream = stream;
  g->clock[stream][stream]++;
  return st;
}

/* Orders `stream` after everything `other` enqueued so far: an event
 * recorded on `other`, waited on by `stream`. */
static void order_after(gen_t* g, uint32_t stream, uint32_t other) {
  model_program_t* p = g->p;
  uint32_t ev = p->num_events++;
  p->event_stream[ev] = other;
  append(g, STEP_RECORD, other)->event = ev;
  append(g, STEP_WAIT, stream)->event = ev;
  for (uint32_t x = 0; x < p->num_streams; x++)
    if (g->clock[other][x] > g->clock[stream][x]) g->clock[stream][x] = g->clock[other][x];
}

static int ordered(const gen_t* g, uint32_t stream, uint32_t other, uint32_t pos) {
  return other == stream || g->clock[stream][other] >= pos;
}

/* Inserts the event pairs that order an access of `buffer` by `stream`
 * after the conflicting earlier ones. */
static void order_access(gen_t* g, uint32_t stream, uint32_t buffer, int writes) {
  uint32_t w = g->writer[buffer];
  if (w != UINT32_MAX && !ordered(g, stream, w, g->write_pos[buffer])) order_after(g, stream, w);
  if (!writes) return;
  for (uint32_t x = 0; x < g->p->num_streams; x++) {
    uint32_t r = g->read_pos[buffer][x];
    if (r && !ordered(g, stream, x, r)) order_after(g, stream, x);
  }
}

/* Records the access (after the step was appended). */
static void note_access(gen_t* g, uint32_t stream, uint32_t buffer, int writes) {
  uint32_t pos = g->clock[stream][stream];
  if (writes) {
    g->writer[buffer] = stream;
    g->write_pos[buffer] = pos;
    memset(g->read_pos[buffer], 0, sizeof g->read_pos[buffer]);
  } else {
    g->read_pos[buffer][stream] = pos;
  }
}

/* A buffer of device `dev`, other than `not_a` and `not_b`. */
static uint32_t pick_buffer(gen_t* g, uint32_t dev, uint32_t not_a, uint32_t not_b) {
  for (;;) {
    uint32_t b = dev * MODEL_BUFS_PER_DEVICE + rng_below(&g->rng, MODEL_BUFS_PER_DEVICE);
    if (b != not_a && b != not_b) return b;
  }
}

static void gen_op(gen_t* g, uint32_t s) {
  uint32_t dev = g->p->stream_device[s];
  uint32_t kind = STEP_ADD + rng_below(&g->rng, 3);
  uint32_t out = pick_buffer(g, dev, UINT32_MAX, UINT32_MAX);
  uint32_t a = pick_buffer(g, dev, out, UINT32_MAX), b = pick_buffer(g, dev, out, UINT32_MAX);
  float result[MODEL_ELEMS], value = rng_small(&g->rng);
  for (uint32_t i = 0; i < MODEL_ELEMS; i++) {
    float x = kind == STEP_ADD ? g->cur[a][i] + g->cur[b][i]
              : kind == STEP_MUL ? g->cur[a][i] * g->cur[b][i] : value;
    if (fabsf(x) > MODEL_VALUE_LIMIT) kind = STEP_FILL; /* keep values exact */
    result[i] = x;
  }
  if (kind == STEP_FILL)
    for (uint32_t i = 0; i < MODEL_ELEMS; i++) result[i] = value;
  if (kind != STEP_FILL) {
    order_access(g, s, a, 0);
    order_access(g, s, b, 0);
  }
  order_access(g, s, out, 1);
  model_step_t* st = append(g, kind, s);
  st->a = a;
  st->b = b;
  st->out = out;
  st->value = value;
  if (kind != STEP_FILL) {
    note_access(g, s, a, 0);
    note_access(g, s, b, 0);
  }
  note_access(g, s, out, 1);
  memcpy(g->cur[out], result, sizeof result);
}

static void pick_range(gen_t* g, uint32_t* soff, uint32_t* doff, uint32_t* n) {
  *n = 1 + rng_below(&g->rng, MODEL_ELEMS);
  *soff = rng_below(&g->rng, MODEL_ELEMS - *n + 1);
  *doff = rng_below(&g->rng, MODEL_ELEMS - *n + 1);
}

/* A copy between a buffer of the stream's device and one of any device
 * (the stream's device is the source or the destination at random). */
static void gen_copy(gen_t* g, uint32_t s) {
  uint32_t dev = g->p->stream_device[s], other = rng_below(&g->rng, g->p->num_devices);
  uint32_t near = pick_buffer(g, dev, UINT32_MAX, UINT32_MAX);
  uint32_t far = pick_buffer(g, other, near, UINT32_MAX);
  int stream_on_src = (int)rng_below(&g->rng, 2);
  uint32_t src = stream_on_src ? near : far, dst = stream_on_src ? far : near;
  uint32_t soff, doff, n;
  pick_range(g, &soff, &doff, &n);
  order_access(g, s, src, 0);
  order_access(g, s, dst, 1);
  model_step_t* st = append(g, STEP_COPY, s);
  st->a = src;
  st->out = dst;
  st->soff = soff;
  st->doff = doff;
  st->n = n;
  note_access(g, s, src, 0);
  note_access(g, s, dst, 1);
  memmove(&g->cur[dst][doff], &g->cur[src][soff], n * sizeof(float));
}

static void gen_host_copy(gen_t* g, uint32_t s) {
  uint32_t dev = g->p->stream_device[s];
  uint32_t buf = pick_buffer(g, dev, UINT32_MAX, UINT32_MAX);
  uint32_t soff, doff, n;
  pick_range(g, &soff, &doff, &n);
  int upload = (int)rng_below(&g->rng, 2);
  order_access(g, s, buf, upload);
  model_step_t* st = append(g, upload ? STEP_H2D : STEP_D2H, s);
  st->n = n;
  if (upload) {
    st->out = buf;
    st->doff = doff;
    for (uint32_t i = 0; i < n; i++) st->data[i] = rng_small(&g->rng);
    memcpy(&g->cur[buf][doff], st->data, n * sizeof(float));
  } else {
    st->a = buf;
    st->soff = soff;
    memcpy(st->data, &g->cur[buf][soff], n * sizeof(float));
  }
  note_access(g, s, buf, upload);
}

void model_program_generate(model_program_t* p, uint64_t seed, uint32_t num_devices) {
  static gen_t g; /* large; the generator runs on one thread */
  memset(&g, 0, sizeof g);
  memset(p, 0, sizeof *p);
  g.p = p;
  g.rng.s = seed;
  p->seed = seed;
  p->num_devices = num_devices;
  p->num_threads = 1 + rng_below(&g.rng, MODEL_MAX_THREADS);
  p->num_streams = p->num_threads * (1 + rng_below(&g.rng, MODEL_STREAMS_PER_THREAD));
  if (p->num_streams < 2) p->num_streams = 2;
  for (uint32_t s = 0; s < p->num_streams; s++) p->stream_device[s] = rng_below(&g.rng, num_devices);
  /* The last device (the other plugin, when there is one) gets a stream. */
  p->stream_device[rng_below(&g.rng, p->num_streams)] = num_devices - 1;
  p->num_buffers = num_devices * MODEL_BUFS_PER_DEVICE;
  for (uint32_t b = 0; b < p->num_buffers; b++) {
    g.writer[b] = UINT32_MAX;
    for (uint32_t i = 0; i < MODEL_ELEMS; i++) p->initial[b][i] = rng_small(&g.rng);
  }
  memcpy(g.cur, p->initial, sizeof g.cur);
  uint32_t target = 12 + rng_below(&g.rng, 28);
  /* Each generated step adds at most 2 event pairs per buffer access plus
   * itself; stop well before the step array could overflow. */
  while (target-- && p->num_steps + 2 * 2 * MODEL_MAX_STREAMS + 1 < MODEL_MAX_STEPS) {
    uint32_t s = rng_below(&g.rng, p->num_streams);
    uint32_t dice = rng_below(&g.rng, 100);
    if (dice < 35) {
      gen_op(&g, s);
    } else if (dice < 70) {
      gen_copy(&g, s);
    } else if (dice < 82) {
      gen_host_copy(&g, s);
    } else if (dice < 95) {
      order_after(&g, s, rng_below(&g.rng, p->num_streams)); /* extra event traffic */
    } else {
      append(&g, STEP_SYNC, s);
    }
  }
  memcpy(p->final, g.cur, sizeof p->final);
}

void model_program_print(const model_program_t* p, const char* const* device_names) {
  static const char* const names[] = {"add", "mul", "fill", "copy", "h2d", "d2h", "record", "wait", "sync"};
  fprintf(stderr, "program seed %llu: %u threads, %u streams\n", (unsigned long long)p->seed,
          p->num_threads, p->num_streams);
  for (uint32_t s = 0; s < p->num_streams; s++)
    fprintf(stderr, "  stream %u: thread %u, %s\n", s, model_stream_thread(p, s),
            device_names[p->stream_device[s]]);
  for (uint32_t i = 0; i < p->num_steps; i++) {
    const model_step_t* st = &p->steps[i];
    fprintf(stderr, "  %3u s%u %-6s", i, st->stream, names[st->kind]);
    switch (st->kind) {
      case STEP_ADD:
      case STEP_MUL: fprintf(stderr, " b%u = b%u, b%u", st->out, st->a, st->b); break;
      case STEP_FILL: fprintf(stderr, " b%u = %g", st->out, st->value); break;
      case STEP_COPY:
        fprintf(stderr, " b%u[%u..+%u) = b%u[%u..)", st->out, st->doff, st->n, st->a, st->soff);
        break;
      case STEP_H2D: fprintf(stderr, " b%u[%u..+%u) = host", st->out, st->doff, st->n); break;
      case STEP_D2H: fprintf(stderr, " host = b%u[%u..+%u)", st->a, st->soff, st->n); break;
      case STEP_RECORD:
      case STEP_WAIT: fprintf(stderr, " e%u", st->event); break;
      default: break;
    }
    fprintf(stderr, "\n");
  }
}
