/* backplane OpenCL plugin: shared declarations.
 *
 * Objects: one instance (the loaded ICD loader and its symbol table), one
 * context per platform, one backplane device per OpenCL device; buffers
 * are cl_mem objects; streams are in-order command queues with profiling;
 * events are markers; host functions run on a per-stream thread between a
 * marker and a user event the queue waits on. Kernels come from the one GPU
 * kernel source (plugins/gpu_common) embedded as OpenCL C text and built
 * lazily, one program per kernels.def line, on first use.
 */
#ifndef BP_OCL_INTERNAL_H_
#define BP_OCL_INTERNAL_H_

#include <pthread.h>
#include <stdint.h>

#include "bp_gpu_heap.h"
#include "bp_gpu_ops.h"
#include "bp_kit.h"
#include "ocl_symbols.h"

#define OCL_HIDDEN __attribute__((visibility("hidden")))
#define OCL_MAX_DEVICES 16
#define BP_OPENCL_PLUGIN_VERSION "0.1.0"

/* A built kernel of one program (lazy; `mu` serializes argument setting
 * and enqueueing, since cl_kernel arguments are shared state). */
typedef struct ocl_kernel {
  pthread_mutex_t mu;
  cl_program program;
  cl_kernel kernel;
  int state; /* 0 not built, 1 built, -1 failed (status in `err`) */
  bp_status_t err;
  char err_msg[256];
} ocl_kernel_t;

/* Counts of the generated-kernel cache of a device (ocl_ewgen.c). */
typedef struct ocl_ewgen_stats {
  uint64_t hits;       /* launches that found their kernel built */
  uint64_t builds;     /* kernels built from source */
  uint64_t disk_loads; /* kernels loaded from the on-disk cache */
  uint64_t failures;   /* programs that fell back to the interpreter */
} ocl_ewgen_stats_t;
#define OCL_EWGEN_MAX 256 /* generated programs kept per device */

struct bpp_instance_s {
  void* lib;
  ocl_symbols_t cl;
  uint32_t ndevices;
  struct bpp_device_s* devices[OCL_MAX_DEVICES];
  cl_context contexts[OCL_MAX_DEVICES]; /* one per platform, owned */
  uint32_t ncontexts;
  uint64_t budget_override; /* bytes, 0: none (option budget_mb) */
  pthread_mutex_t mu;        /* runtime start */
  int runtime_started;       /* this process has called into OpenCL */
  int runtime_ready;         /* 0 not yet, 1 started, -1 failed */
  bp_status_t runtime_err;
  char runtime_msg[BP_PLUGIN_MSG_CAP];
};

struct bpp_device_s {
  struct bpp_instance_s* inst;
  const ocl_symbols_t* cl;
  uint32_t platform_index, device_index; /* where discovery found it */
  cl_platform_id platform; /* set when the runtime starts */
  cl_device_id id;
  cl_context ctx;
  cl_command_queue aux_queue; /* maps and unmaps */
  pthread_mutex_t aux_mu;
  bp_device_properties_t props;
  bp_gpu_device_caps_t caps;
  int host_unified; /* CL_DEVICE_HOST_UNIFIED_MEMORY */
  uint64_t budget;  /* bytes */
  uint64_t used;    /* atomic */
  uint64_t max_alloc;
  char cache_key[384]; /* device, driver and plugin versions (program cache) */
  ocl_kernel_t kernels[BP_GPU_PROGRAM_COUNT];
  /* Generated elementwise kernels (ocl_ewgen.c), under ewgen_mu. */
  pthread_mutex_t ewgen_mu;
  struct ocl_ewgen_entry* ewgen[OCL_EWGEN_MAX];
  uint32_t ewgen_count;
  ocl_ewgen_stats_t ewgen_stats;
  /* Suballocation per memory space (set when the runtime starts): small
   * buffers are sub-buffers of large blocks (ocl_memory.c). */
  bp_gpu_heap_t* heap[2];
  struct ocl_heap_ctx {
    struct bpp_device_s* dev;
    uint32_t space;
  } heap_ctx[2];
};

struct bpp_buffer_s {
  struct bpp_device_s* dev;
  cl_mem mem;        /* a sub-buffer of sub.block, or a buffer of its own */
  bp_gpu_alloc_t sub; /* sub.block NULL: not suballocated */
  uint64_t size;
  uint32_t space;
  void* mapped; /* buffer_map's pointer while mapped (whole buffer) */
};

/* Creates the device's heaps (the runtime is started); 0 or a status. */
bp_status_t ocl_heaps_create(struct bpp_device_s* d);
void ocl_heaps_destroy(struct bpp_device_s* d);

/* A host function waiting on the stream's helper thread. */
typedef struct ocl_host_job {
  struct ocl_host_job* next;
  cl_event marker;  /* the stream reached the point */
  cl_event release; /* user event the queue waits on; set after fn returns */
  bp_host_func_t fn;
  void* user;
} ocl_host_job_t;

struct bpp_stream_s {
  struct bpp_device_s* dev;
  cl_command_queue q;
  pthread_mutex_t mu; /* err, jobs */
  pthread_cond_t cv;
  bp_status_t err; /* first error not yet reported */
  char err_msg[BP_PLUGIN_MSG_CAP];
  ocl_host_job_t *head, *tail;
  cl_event last; /* the last command enqueued (in order: its completion is the stream's) */
  int thread_started, stop;
  pthread_t thread;
};

struct bpp_event_s {
  struct bpp_device_s* dev;
  pthread_mutex_t mu;
  cl_event ev; /* marker of the last record, or NULL */
  uint32_t flags;
};

/* "CL_OUT_OF_RESOURCES (-5)" */
OCL_HIDDEN const char* ocl_error_name(cl_int err);
/* bp_kit_error with the call and the OpenCL error name; the status is
 * RESOURCE_EXHAUSTED for allocation failures, else INTERNAL. */
OCL_HIDDEN bp_status_t ocl_fail(const char* what, cl_int err);

/* Kernels (ocl_program.c): the built kernel of a program, building it on
 * first use. */
OCL_HIDDEN bp_status_t ocl_kernel_get(struct bpp_device_s* dev, uint32_t program, ocl_kernel_t** out);
OCL_HIDDEN void ocl_kernels_release(struct bpp_device_s* dev);
/* The embedded text of kernels.def program `program` (< BP_GPU_PROGRAM_COUNT). */
OCL_HIDDEN const bp_gpu_blob_t* ocl_program_blob(uint32_t program);
/* Builds program `name` from OpenCL C `text` (`size` bytes) or loads it from
 * the on-disk cache (*out_from_disk, optional), then creates `kernel`. */
OCL_HIDDEN bp_status_t ocl_program_build(struct bpp_device_s* dev, const char* name, const char* text, size_t size,
                                         const char* kernel, ocl_kernel_t* k, int* out_from_disk);
/* Generated elementwise kernels (ocl_ewgen.c): the built kernel of the
 * packed program `a` (built on first use, kept per device), or an error
 * (the caller runs the interpreter). Off with BP_OPENCL_EW_GENERATE=0. */
OCL_HIDDEN int ocl_ewgen_enabled(void);
OCL_HIDDEN bp_status_t ocl_ewgen_kernel(struct bpp_device_s* dev, const bp_gpu_ew_args_t* a, ocl_kernel_t** out);
OCL_HIDDEN void ocl_ewgen_release(struct bpp_device_s* dev);
OCL_HIDDEN void ocl_ewgen_stats(struct bpp_device_s* dev, ocl_ewgen_stats_t* out);

/* Ops (ocl_ops.c). */
OCL_HIDDEN bp_status_t ocl_launch_op(bpp_stream_t s, const bp_op_call_t* call);
OCL_HIDDEN bp_status_t ocl_query_support(bpp_device_t d, const bp_op_call_t* call, bp_support_t* out);
OCL_HIDDEN bp_status_t ocl_query_fusion(bpp_device_t d, bp_fusion_caps_t* out);
OCL_HIDDEN bp_status_t ocl_launch_ew_program(bpp_stream_t s, const bp_ew_program_t* prog, uint32_t num_inputs,
                                             const bp_tensor_desc_t* const* inputs, uint32_t num_outputs,
                                             const bp_tensor_desc_t* const* outputs);

/* Memory (ocl_memory.c). */
OCL_HIDDEN bp_status_t ocl_buffer_allocate(bpp_device_t d, const bp_buffer_alloc_info_t* info, bpp_buffer_t* out);
OCL_HIDDEN void ocl_buffer_release(bpp_buffer_t b);
OCL_HIDDEN bp_status_t ocl_buffer_map(bpp_buffer_t b, uint64_t offset, uint64_t size, void** out_ptr);
OCL_HIDDEN bp_status_t ocl_buffer_unmap(bpp_buffer_t b);
OCL_HIDDEN bp_status_t ocl_copy_h2d(bpp_stream_t s, const void* src, bpp_buffer_t dst, uint64_t off, uint64_t size);
OCL_HIDDEN bp_status_t ocl_copy_d2h(bpp_stream_t s, bpp_buffer_t src, uint64_t off, void* dst, uint64_t size);
OCL_HIDDEN bp_status_t ocl_copy_d2d(bpp_stream_t s, bpp_buffer_t src, uint64_t soff, bpp_buffer_t dst,
                                    uint64_t doff, uint64_t size);
OCL_HIDDEN bp_status_t ocl_buffer_fill(bpp_stream_t s, bpp_buffer_t b, uint64_t off, uint64_t size,
                                       const void* pattern, uint32_t pattern_size);

/* Streams and events (ocl_stream.c). */
OCL_HIDDEN bp_status_t ocl_stream_create(bpp_device_t d, const bp_stream_create_info_t* info, bpp_stream_t* out);
OCL_HIDDEN void ocl_stream_destroy(bpp_stream_t s);
OCL_HIDDEN bp_status_t ocl_stream_synchronize(bpp_stream_t s);
OCL_HIDDEN bp_status_t ocl_stream_query(bpp_stream_t s);
OCL_HIDDEN bp_status_t ocl_stream_enqueue_host_func(bpp_stream_t s, bp_host_func_t fn, void* user);
OCL_HIDDEN bp_status_t ocl_event_create(bpp_device_t d, const bp_event_create_info_t* info, bpp_event_t* out);
OCL_HIDDEN void ocl_event_destroy(bpp_event_t e);
OCL_HIDDEN bp_status_t ocl_event_record(bpp_event_t e, bpp_stream_t s);
OCL_HIDDEN bp_status_t ocl_stream_wait_event(bpp_stream_t s, bpp_event_t e);
OCL_HIDDEN bp_status_t ocl_event_query(bpp_event_t e);
OCL_HIDDEN bp_status_t ocl_event_synchronize(bpp_event_t e);
OCL_HIDDEN bp_status_t ocl_event_elapsed_ns(bpp_event_t start, bpp_event_t end, uint64_t* out_ns);
/* Keeps `ev` (owned: the caller's reference moves here) as the stream's
 * last command, releasing the previous one. NULL is ignored. */
OCL_HIDDEN void ocl_stream_track(bpp_stream_t s, cl_event ev);
/* Records `st` (message from the calling thread's last error) as the
 * stream's sticky error unless one is pending. */
OCL_HIDDEN void ocl_stream_poison(bpp_stream_t s, bp_status_t st);

/* Discovery (ocl_discover.c): fills inst->devices, or returns UNAVAILABLE
 * with the reason in msg. ocl_runtime_ready starts OpenCL in this process
 * (once; every device of the instance) before a device's first use. */
OCL_HIDDEN bp_status_t ocl_discover(struct bpp_instance_s* inst, char* msg, size_t cap);
OCL_HIDDEN bp_status_t ocl_runtime_ready(struct bpp_device_s* d);
OCL_HIDDEN void ocl_device_free(struct bpp_device_s* d);

/* The plugin's tables (ocl_plugin.c). */
OCL_HIDDEN const bp_plugin_vtable_t* ocl_vtable(void);

#endif /* BP_OCL_INTERNAL_H_ */
