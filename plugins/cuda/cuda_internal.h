/* The CUDA plugin's objects and shared helpers (internal).
 *
 * Ownership: the instance owns the driver library and the symbol table;
 * a device holds a reference on its primary context (released at close);
 * buffers, streams and events belong to one device and are freed by the
 * core before the device is closed.
 * Threading: every entry point may run on any thread, so each pushes the
 * device's primary context around its driver calls (cuda_ctx_push/pop)
 * instead of assuming a current context. Streams are externally
 * synchronized (the ABI); a device's lost state is atomic.
 */
#ifndef BP_CUDA_INTERNAL_H_
#define BP_CUDA_INTERNAL_H_

#include <pthread.h>
#include <stdint.h>

#include "bp_kit.h"
#include "cuda_symbols.h"

/* The plugin's version (negotiation, saved regions). */
#define CUDA_PLUGIN_VERSION "0.1.0"

/* Memory spaces, in the order device_memory_spaces lists them. */
enum cuda_space { CUDA_SPACE_DEVICE = 0, CUDA_SPACE_PINNED = 1, CUDA_SPACE_MANAGED = 2 };
#define CUDA_SPACE_COUNT 3u
#define CUDA_DEVICE_ALIGN 256u  /* cuMemAlloc's guarantee */
#define CUDA_HOST_ALIGN 4096u   /* cuMemHostAlloc returns whole pages */

struct bpp_instance_s {
  cuda_symbols_t cu;
  void* lib;
  int driver_version; /* cuDriverGetVersion: 1000 * major + 10 * minor */
  int device_count;
  /* 1: host functions run on a plugin thread while the stream waits on a
   * flag (cuStreamWaitValue32); 0: the driver's callback blocks instead. */
  int hostfn_wait_value;
  struct cuda_blas* blas; /* cuda_blas.h; NULL: no cuBLASLt (matmul unsupported) */
  char blas_reason[320];  /* why blas is NULL */
  /* NVRTC (cuda_nvrtc.h), opened at the first fused program under
   * nvrtc_mu; NULL then: fused programs interpreted, nvrtc_reason says why. */
  pthread_mutex_t nvrtc_mu;
  int nvrtc_tried;
  struct cuda_nvrtc* nvrtc;
  char nvrtc_reason[320];
};

struct bpp_device_s {
  bpp_instance_t inst;
  const cuda_symbols_t* cu;
  uint32_t index;
  CUdevice dev;
  CUcontext ctx; /* the primary context, retained */
  char name[128];
  int cc_major, cc_minor;
  int sm_count;
  uint64_t total_mem;
  int managed;           /* CU_DEVICE_ATTRIBUTE_MANAGED_MEMORY */
  int prio_least, prio_greatest; /* cuCtxGetStreamPriorityRange */
  /* Stream-ordered pool (cuMemAllocFromPoolAsync on alloc_stream, which
   * the allocation synchronizes) when the driver has pools; else plain
   * cuMemAlloc. */
  CUmemoryPool pool;
  CUstream alloc_stream;
  pthread_mutex_t alloc_mu; /* alloc_stream is shared by every thread */
  uint64_t used[CUDA_SPACE_COUNT]; /* bytes, atomic */
  /* BP_OK until a sticky context error; then DEVICE_LOST for every call,
   * with lost_msg (written once, before `lost` is set). */
  int lost;
  char lost_msg[256];
  pthread_mutex_t lost_mu;
  void* lt;      /* cublasLtHandle_t, NULL without cuBLASLt */
  void* kernels; /* cuda_kernels.c's module cache, NULL without the module API */
  void* ewgen;   /* cuda_ewgen.c's generated kernels, NULL until the first */
  /* Recycled CUevents (cuda_event_pool.c): [0] without timing, [1] with. */
  struct bp_gpu_event_pool* events[2];
};

struct bpp_buffer_s {
  bpp_device_t dev;
  uint32_t space;
  CUdeviceptr ptr;  /* first byte of the buffer (after alignment padding) */
  CUdeviceptr base; /* what the allocator returned */
  void* host;       /* pinned / managed: the host address of `ptr`; else NULL */
  void* host_base;  /* pinned: what cuMemHostAlloc returned */
  uint64_t size;
  uint64_t reserved; /* bytes counted in dev->used[space] */
  int pooled;        /* from the pool: freed with cuMemFreeAsync */
};

/* A host function waiting to run on the stream's plugin thread. */
typedef struct cuda_hostfn_job {
  struct cuda_hostfn_job* next;
  bpp_stream_t stream;
  bp_host_func_t fn;
  void* user;
  uint32_t seq;  /* wait-value mode: the flag value that releases the stream */
  int done;      /* blocking mode: set under stream->mu when fn returned */
} cuda_hostfn_job_t;

/* The NCCL communicators used on a stream since its last synchronize
 * (referenced), which its synchronize watches (cuda_nccl.c). */
#define CUDA_STREAM_MAX_COMMS 8
typedef struct cuda_nccl_watch {
  uint32_t n;
  struct bpp_comm_s* comms[CUDA_STREAM_MAX_COMMS];
} cuda_nccl_watch_t;

struct bpp_stream_s {
  bpp_device_t dev;
  CUstream s;
  /* Host functions (cuda_hostfn.c): a plugin thread per stream, started at
   * the first one, runs them in order. */
  pthread_mutex_t mu;
  pthread_cond_t cv;      /* the thread waits for jobs */
  pthread_cond_t done_cv; /* blocking mode: the callback waits for its job */
  pthread_t thread;
  int thread_started;
  int stop;
  cuda_hostfn_job_t *head, *tail;
  uint32_t* flag;       /* pinned, mapped: the last released sequence number */
  CUdeviceptr flag_dev; /* its device address */
  uint32_t next_seq;
  /* The first failed host function's status, sticky until reported. */
  bp_status_t error;
  char error_msg[BP_PLUGIN_MSG_CAP];
  /* cuBLASLt workspace, allocated at the stream's first GEMM. */
  CUdeviceptr gemm_ws;
  size_t gemm_ws_size;
  /* Argument block of the shared kernels, allocated at the first launch. */
  CUdeviceptr args_dev;
  cuda_nccl_watch_t nccl;
};

struct bpp_event_s {
  bpp_device_t dev;
  CUevent e;
  uint32_t flags; /* enum bp_event_flags */
};

/* ---- errors (cuda_error.c) ---------------------------------------------- */
/* BP_OK for CUDA_SUCCESS; else maps `r` to a status, reports "cuda: <what>:
 * CUDA_ERROR_X (n): <text>" and, for sticky context errors, marks `dev`
 * lost (DEVICE_LOST from then on, announced once through async_error).
 * `dev` may be NULL (instance-level calls). */
bp_status_t cuda_fail(bpp_device_t dev, CUresult r, const char* what);
#define CUDA_CHECK(dev, call, what) \
  do {                              \
    CUresult cuda_r_ = (call);      \
    if (cuda_r_ != CUDA_SUCCESS) return cuda_fail((dev), cuda_r_, (what)); \
  } while (0)
/* The status a CUresult maps to (no report). */
bp_status_t cuda_status_of(CUresult r);
/* Nonzero for errors that leave the context unusable (700, 714..719, ...). */
int cuda_error_is_sticky(CUresult r);
/* "CUDA_ERROR_X (n): text" into buf. */
void cuda_error_text(const cuda_symbols_t* cu, CUresult r, char* buf, size_t cap);
/* DEVICE_LOST (reported with the saved message) once the device is lost. */
bp_status_t cuda_device_check_alive(bpp_device_t dev);

/* ---- context (cuda_device.c) ------------------------------------------- */
/* Makes dev's primary context current on this thread for the calls that
 * follow; every successful push is matched by one pop. */
bp_status_t cuda_ctx_push(bpp_device_t dev);
void cuda_ctx_pop(bpp_device_t dev);

/* ---- streams and host functions (cuda_hostfn.c) ------------------------- */
bp_status_t cuda_hostfn_enqueue(bpp_stream_t stream, bp_host_func_t fn, void* user);
/* Stops the stream's host-function thread (after its queue drained). */
void cuda_hostfn_stop(bpp_stream_t stream);
/* The stream's sticky host-function error, cleared once returned. */
bp_status_t cuda_stream_take_error(bpp_stream_t stream);

/* ---- NCCL's watchdog (cuda_nccl.c; built with NCCL only) ------------------ */
/* Stream synchronize with NCCL work on it: polls the stream and the
 * communicators' asynchronous errors; a communicator that makes no
 * progress within its timeout is aborted (DEADLINE_EXCEEDED, which every
 * rank of its world in this process reports); an asynchronous error is
 * the status with NCCL's message. Context pushed by the caller. */
bp_status_t cuda_nccl_stream_sync(bpp_stream_t stream);
/* After a query found the stream idle: the communicators' errors. */
bp_status_t cuda_nccl_stream_check(bpp_stream_t stream);
/* Drops the stream's references (stream destroy). */
void cuda_nccl_stream_release(bpp_stream_t stream);

/* ---- tables ---------------------------------------------------------------*/
extern const bpp_core_table_t cuda_core_table;
/* Memory and copies (cuda_memory.c). */
bp_status_t cuda_device_memory_spaces(bpp_device_t device, uint32_t capacity, uint32_t elem_size,
                                      bp_memory_space_info_t* out, uint32_t* out_count);
bp_status_t cuda_device_memory_usage(bpp_device_t device, uint32_t space, uint64_t* out_used,
                                     uint64_t* out_budget);
bp_status_t cuda_buffer_allocate(bpp_device_t device, const bp_buffer_alloc_info_t* info,
                                 bpp_buffer_t* out);
void cuda_buffer_release(bpp_buffer_t buffer);
bp_status_t cuda_buffer_map(bpp_buffer_t buffer, uint64_t offset, uint64_t size, void** out_ptr);
bp_status_t cuda_buffer_unmap(bpp_buffer_t buffer);
bp_status_t cuda_copy_h2d(bpp_stream_t stream, const void* src, bpp_buffer_t dst, uint64_t dst_off,
                          uint64_t size);
bp_status_t cuda_copy_d2h(bpp_stream_t stream, bpp_buffer_t src, uint64_t src_off, void* dst,
                          uint64_t size);
bp_status_t cuda_copy_d2d(bpp_stream_t stream, bpp_buffer_t src, uint64_t src_off,
                          bpp_buffer_t dst, uint64_t dst_off, uint64_t size);
bp_status_t cuda_copy_peer(bpp_stream_t stream, bpp_buffer_t src, uint64_t src_off,
                           bpp_buffer_t dst, uint64_t dst_off, uint64_t size);
bp_status_t cuda_buffer_fill(bpp_stream_t stream, bpp_buffer_t buffer, uint64_t offset,
                             uint64_t size, const void* pattern, uint32_t pattern_size);
/* Streams and events (cuda_stream.c). */
bp_status_t cuda_stream_create(bpp_device_t device, const bp_stream_create_info_t* info,
                               bpp_stream_t* out);
void cuda_stream_destroy(bpp_stream_t stream);
bp_status_t cuda_stream_synchronize(bpp_stream_t stream);
bp_status_t cuda_stream_query(bpp_stream_t stream);
bp_status_t cuda_event_create(bpp_device_t device, const bp_event_create_info_t* info,
                              bpp_event_t* out);
void cuda_event_destroy(bpp_event_t event);
bp_status_t cuda_event_record(bpp_event_t event, bpp_stream_t stream);
bp_status_t cuda_stream_wait_event(bpp_stream_t stream, bpp_event_t event);
bp_status_t cuda_event_query(bpp_event_t event);
bp_status_t cuda_event_synchronize(bpp_event_t event);
bp_status_t cuda_event_elapsed_ns(bpp_event_t start, bpp_event_t end, uint64_t* out_ns);

#endif /* BP_CUDA_INTERNAL_H_ */
