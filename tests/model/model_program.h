/* Random stream programs and their sequential interpretation, for the
 * model test (test_model.c).
 *
 * A program is one global list of steps. Each step runs on one stream, and
 * each stream belongs to one host thread; the threads enqueue their steps in
 * global order. The generator makes every program race-free: before a step
 * touches a buffer that another stream touched in a conflicting way (a write
 * against any access) without being ordered after it, it inserts an event
 * record on that stream and a wait on the step's stream (vector clocks
 * decide). So the result of running the program concurrently must equal
 * the sequential interpretation in global order, which the generator
 * computes as it goes (model.buffers after the last step; each
 * device-to-host copy keeps the values it must read).
 *
 * Every event is recorded exactly once per program, and a wait is enqueued
 * only after its record was enqueued (the executing thread waits for that
 * on the host), so waits are deterministic.
 *
 * Values are small integers stored as f32, so every backend computes them
 * exactly (the generator keeps |value| <= 2^20).
 */
#ifndef BP_TESTS_MODEL_PROGRAM_H_
#define BP_TESTS_MODEL_PROGRAM_H_

#include <stdint.h>

enum {
  MODEL_MAX_DEVICES = 8,
  MODEL_BUFS_PER_DEVICE = 4,
  MODEL_MAX_BUFFERS = MODEL_MAX_DEVICES * MODEL_BUFS_PER_DEVICE,
  MODEL_MAX_THREADS = 4,
  MODEL_STREAMS_PER_THREAD = 2,
  MODEL_MAX_STREAMS = MODEL_MAX_THREADS * MODEL_STREAMS_PER_THREAD,
  MODEL_ELEMS = 64, /* f32 elements per buffer */
  MODEL_MAX_STEPS = 512
};

enum model_step_kind {
  STEP_ADD,    /* out = a + b */
  STEP_MUL,    /* out = a * b */
  STEP_FILL,   /* out[:] = value */
  STEP_COPY,   /* bp_copy_buffer: dst[doff..+n) = src[soff..+n) (any two devices) */
  STEP_H2D,    /* dst[doff..+n) = host data */
  STEP_D2H,    /* host slot = src[soff..+n) */
  STEP_RECORD, /* record event `event` on the stream */
  STEP_WAIT,   /* the stream waits for event `event` */
  STEP_SYNC    /* bp_stream_synchronize */
};

typedef struct model_step {
  uint32_t kind;
  uint32_t stream; /* index into model_program_t.stream_device */
  uint32_t a, b, out; /* buffers (ops); COPY: a = src, out = dst; H2D: out; D2H: a */
  uint32_t soff, doff, n; /* elements */
  uint32_t event;   /* RECORD / WAIT */
  float value;      /* FILL */
  float data[MODEL_ELEMS]; /* H2D source; D2H expected values */
} model_step_t;

typedef struct model_program {
  uint64_t seed;
  uint32_t num_devices;   /* devices the program may use: 0..num_devices-1 */
  uint32_t num_threads;
  uint32_t num_streams;   /* stream i belongs to thread i % num_threads */
  uint32_t stream_device[MODEL_MAX_STREAMS];
  uint32_t num_buffers;   /* buffer i lives on device i / MODEL_BUFS_PER_DEVICE */
  uint32_t num_events;
  uint32_t event_stream[MODEL_MAX_STEPS]; /* the stream that records event i */
  uint32_t num_steps;
  model_step_t steps[MODEL_MAX_STEPS];
  float initial[MODEL_MAX_BUFFERS][MODEL_ELEMS];
  float final[MODEL_MAX_BUFFERS][MODEL_ELEMS]; /* sequential interpretation */
} model_program_t;

/* Fills `p` with a random program over `num_devices` devices (at most
 * MODEL_MAX_DEVICES) drawn from `seed`: the same seed and device count give
 * the same program. */
void model_program_generate(model_program_t* p, uint64_t seed, uint32_t num_devices);

/* Writes a readable listing of the program (one line per step). */
void model_program_print(const model_program_t* p, const char* const* device_names);

static inline uint32_t model_buffer_device(uint32_t buffer) { return buffer / MODEL_BUFS_PER_DEVICE; }
static inline uint32_t model_stream_thread(const model_program_t* p, uint32_t stream) {
  return stream % p->num_threads;
}

#endif /* BP_TESTS_MODEL_PROGRAM_H_ */
