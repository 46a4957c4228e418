/* The control API of the fake CUDA driver (fake_libcuda.so.1).
 *
 * Tests dlopen the same library the plugin opens (BP_CUDA_DRIVER_PATH:
 * one handle, one state) and dlsym FAKE_CUDA_CONTROL_SYMBOL. Settings made
 * before the plugin's instance is created (device count, cuInit's result,
 * memory size, pools) apply at its cuInit.
 */
#ifndef BP_FAKE_CUDA_H_
#define BP_FAKE_CUDA_H_

#include <cuda.h>
#include <stdint.h>

#define FAKE_CUDA_CONTROL_SYMBOL "fake_cuda_control"

/* One recorded cuLaunchKernel. */
typedef struct fake_cuda_launch {
  char name[64];
  unsigned grid[3], block[3];
  unsigned shared_bytes;
  int nparams;
  uint64_t params[16]; /* the parameter values (all 8-byte pointers here) */
} fake_cuda_launch_t;

typedef struct fake_cuda_control {
  /* Back to the defaults: 1 device, 64 MiB each, compute capability 9.0
   * (FAKE_CUDA_CC), pools on, no failures,
   * no delay; clears the misuse record and the sticky error. Only while
   * no stream of the fake exists. */
  void (*reset)(void);
  void (*set_devices)(int count);
  void (*set_memory)(uint64_t bytes_per_device);
  void (*set_init_error)(CUresult r); /* what cuInit returns */
  void (*set_pools)(int on);          /* CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED */
  /* The nth call (1 = the next) of `entry` (an exported name, e.g.
   * "cuMemAlloc_v2") returns `r`. One rule at a time. */
  void (*fail_call)(const char* entry, int nth, CUresult r);
  /* The next stream command that executes fails with `r`, which stays the
   * context's error: every later call returns it (an ILLEGAL_ADDRESS). */
  void (*make_sticky)(CUresult r);
  /* Each stream command waits this long before it runs (ordering checks). */
  void (*set_delay_us)(unsigned us);
  /* Misuse the fake saw (double free, unknown handle, a CUDA call inside a
   * host function, no current context, out-of-range address, ...). */
  int (*misuse_count)(void);
  const char* (*last_misuse)(void);
  /* Calls of an entry point since the last reset. */
  uint64_t (*call_count)(const char* entry);
  /* The priority the last cuStreamCreateWithPriority asked for. */
  int (*last_stream_priority)(void);
  /* Live allocations (device, pinned, managed) and streams. */
  uint64_t (*live_allocations)(void);
  uint64_t (*live_streams)(void);
  /* The last cuLaunchKernel and the number of launches so far. */
  void (*last_launch)(fake_cuda_launch_t* out, uint64_t* count);
  /* Graphs and instantiated graphs alive (fake_graph.c). */
  uint64_t (*live_graphs)(void);
  /* The devices' compute capability, 10 * major + minor (default 90, or
   * FAKE_CUDA_CC); applies at the plugin's next device_open. */
  void (*set_compute_capability)(int cc);
  /* What the last successful cuModuleLoadDataEx took: "ptx" or
   * "cubin sm_<n>" (empty after reset). */
  void (*last_image)(char* out, size_t cap);
  /* Events created and not yet destroyed (all devices). */
  uint64_t (*live_events)(void);
} fake_cuda_control_t;

typedef const fake_cuda_control_t* (*fake_cuda_control_fn)(void);

#endif /* BP_FAKE_CUDA_H_ */
