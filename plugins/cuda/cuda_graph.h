/* A compiled region's launches replayed as one CUDA graph (cuda_graph.c).
 *
 * Ownership: a replay belongs to one executable; it owns the device area
 * holding the argument blocks of its last plan, the instantiated graph and
 * an event recorded after each launch.
 * Threading: launches may come from several threads (each on its own
 * stream); `mu` serializes them. A launch on another stream than the last
 * one waits (on the device) for the last one before overwriting the blocks.
 */
#ifndef BP_CUDA_GRAPH_H_
#define BP_CUDA_GRAPH_H_

#include "cuda_kernels.h"

typedef struct cuda_replay {
  pthread_mutex_t mu;
  bpp_device_t dev;
  cuda_plan_t last;      /* the plan in `area` (and in `exec`), valid when `valid` */
  int valid;
  CUdeviceptr area;      /* argument blocks, CUDA_ARGS_MAX apart (rounded to 256) */
  size_t area_size;
  CUgraphExec exec;      /* NULL until the first capture */
  CUevent done;          /* recorded after each launch */
  bpp_stream_t last_stream;
  int pending;           /* `done` was recorded at least once */
  int eager;             /* no graphs: launches one by one, for eager_reason */
  char eager_reason[256];
  char interpreter_reason[256]; /* why a fused program last ran on the interpreter kernel ("": it did not) */
  /* Counts for tests and logs. */
  uint64_t graph_launches, instantiations, updates;
} cuda_replay_t;

/* Nonzero when the driver has every graph entry point replays need. */
int cuda_graph_available(const cuda_symbols_t* cu);
/* Creates the replay's event (pushes the context itself). Graphs are off
 * with the reason when the driver lacks them or BP_CUDA_NO_GRAPHS=1. */
bp_status_t cuda_replay_init(bpp_device_t dev, cuda_replay_t* replay);
/* Waits for pending launches, then frees everything. */
void cuda_replay_fini(cuda_replay_t* replay);
/* Enqueues `plan` on `stream` as one graph launch (capturing it first when
 * it differs from the last plan) or, without graphs, launch by launch.
 * Takes the plan's records when it keeps them (plan left empty). */
bp_status_t cuda_replay_launch(bpp_stream_t stream, cuda_replay_t* replay, cuda_plan_t* plan);

#endif /* BP_CUDA_GRAPH_H_ */
