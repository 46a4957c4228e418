/* backplane CPU plugin: internal declarations shared by its sources. */
#ifndef BP_CPU_INTERNAL_H_
#define BP_CPU_INTERNAL_H_

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

#include "backplane/plugin.h"
#include "bp_plugin_common.h"

#define CPU_HIDDEN __attribute__((visibility("hidden")))
#define CPU_MSG_CAP 256

/* ------------------------------------------------------------------------ */
/* Objects                                                                   */
/* ------------------------------------------------------------------------ */
struct bpp_device_s {
  uint32_t index;
  bp_device_properties_t props;
  struct bpp_instance_s* instance; /* owner */
};

struct bpp_instance_s {
  uint32_t device_count;
  struct bpp_device_s* devices;
  /* One budget for every buffer of the instance (cpu_memory.c), bytes. */
  uint64_t memory_budget;
  _Atomic uint64_t memory_used; /* <= memory_budget */
};

struct bpp_buffer_s {
  unsigned char* ptr; /* 64-byte aligned host memory, owned */
  uint64_t size;      /* requested bytes */
  uint64_t reserved;  /* bytes accounted against the instance's memory budget */
  uint32_t kind;
  struct bpp_device_s* device;
};

/* ------------------------------------------------------------------------ */
/* Errors                                                                    */
/* ------------------------------------------------------------------------ */
CPU_HIDDEN extern const bp_host_services_t* cpu_host;
/* Formats the message into the calling thread's error slot and returns
 * `status`. On threads that answer a plugin call (not stream workers) the
 * message also goes to host->report. */
CPU_HIDDEN bp_status_t cpu_error(bp_status_t status, const char* fmt, ...)
    __attribute__((format(printf, 2, 3)));
/* The calling thread's last message (stream workers copy it into the
 * stream's sticky error). */
CPU_HIDDEN const char* cpu_last_error(void);
/* Marks the calling thread as a stream worker: errors are not reported. */
CPU_HIDDEN void cpu_set_worker_thread(int is_worker);

/* ------------------------------------------------------------------------ */
/* Thread pool (cpu_pool.c)                                                  */
/* ------------------------------------------------------------------------ */
typedef void (*cpu_range_fn)(void* ctx, int64_t begin, int64_t end);
/* Starts the global pool (refcounted); threads = online cores - 1. */
CPU_HIDDEN bp_status_t cpu_pool_acquire(void);
CPU_HIDDEN void cpu_pool_release(void);
CPU_HIDDEN uint32_t cpu_pool_threads(void); /* participants incl. the caller */
/* Runs fn over [0, n) split into chunks of at least `grain` items on the
 * pool and the calling thread; returns when all chunks are done. Runs inline
 * when the range is small or the pool is busy with another caller. */
CPU_HIDDEN void cpu_parallel_for(int64_t n, int64_t grain, cpu_range_fn fn, void* ctx);
CPU_HIDDEN uint32_t cpu_online_cores(void);

/* ------------------------------------------------------------------------ */
/* Memory budget (cpu_memory.c)                                              */
/* ------------------------------------------------------------------------ */
/* Physical memory in bytes; 0 when unknown. */
CPU_HIDDEN uint64_t cpu_memory_physical(void);
/* Parses a size with an optional unit (B, K/KiB.., KB.., %) into bytes;
 * 0 when `text` is not a positive size. `physical` scales "%". */
CPU_HIDDEN int cpu_memory_parse_size(const char* text, uint64_t physical, uint64_t* out_bytes);
/* Sets the instance's budget from the "memory_budget" option (NULL: none) or
 * the default; a malformed value is logged as a warning and the default used. */
CPU_HIDDEN void cpu_memory_init(struct bpp_instance_s* inst, const char* options);
/* Accounts `bytes` against the budget; 0 (and the bytes still available)
 * when they do not fit. Thread-safe. */
CPU_HIDDEN int cpu_memory_reserve(struct bpp_instance_s* inst, uint64_t bytes, uint64_t* out_available);
CPU_HIDDEN void cpu_memory_unreserve(struct bpp_instance_s* inst, uint64_t bytes);

/* ------------------------------------------------------------------------ */
/* Streams and events (cpu_stream.c)                                         */
/* ------------------------------------------------------------------------ */
CPU_HIDDEN bp_status_t cpu_stream_create(bpp_device_t device, uint32_t flags, bpp_stream_t* out);
CPU_HIDDEN void cpu_stream_destroy(bpp_stream_t stream);
CPU_HIDDEN bp_status_t cpu_stream_synchronize(bpp_stream_t stream);
CPU_HIDDEN bp_status_t cpu_stream_query(bpp_stream_t stream);
CPU_HIDDEN bp_status_t cpu_stream_host_func(bpp_stream_t s, bp_host_func_t fn, void* user);
CPU_HIDDEN bp_status_t cpu_event_create(bpp_device_t device, uint32_t flags, bpp_event_t* out);
CPU_HIDDEN void cpu_event_destroy(bpp_event_t event);
CPU_HIDDEN bp_status_t cpu_event_record(bpp_event_t event, bpp_stream_t stream);
CPU_HIDDEN bp_status_t cpu_stream_wait_event(bpp_stream_t stream, bpp_event_t event);
CPU_HIDDEN bp_status_t cpu_event_query(bpp_event_t event);
CPU_HIDDEN bp_status_t cpu_event_synchronize(bpp_event_t event);
CPU_HIDDEN bp_status_t cpu_event_elapsed_ns(bpp_event_t a, bpp_event_t b, uint64_t* out_ns);
CPU_HIDDEN bp_status_t cpu_copy_h2d(bpp_stream_t s, const void* src, bpp_buffer_t dst,
                                    uint64_t dst_off, uint64_t size);
CPU_HIDDEN bp_status_t cpu_copy_d2h(bpp_stream_t s, bpp_buffer_t src, uint64_t src_off, void* dst,
                                    uint64_t size);
CPU_HIDDEN bp_status_t cpu_copy_d2d(bpp_stream_t s, bpp_buffer_t src, uint64_t src_off,
                                    bpp_buffer_t dst, uint64_t dst_off, uint64_t size);
CPU_HIDDEN bp_status_t cpu_buffer_fill(bpp_stream_t s, bpp_buffer_t buf, uint64_t off,
                                       uint64_t size, const void* pattern, uint32_t psize);
/* The launch slot of every implemented op: validates, copies the call into
 * the stream's ring and returns. */
CPU_HIDDEN bp_status_t cpu_launch_op(bpp_stream_t stream, const bp_op_call_t* call);
/* Parallel memcpy (large sizes split over the pool). */
CPU_HIDDEN void cpu_memcpy(void* dst, const void* src, uint64_t size);
/* BP_OK when [off, off + size) lies inside buffer `b` (overflow-safe); else
 * INVALID_ARGUMENT (NULL b) or OUT_OF_RANGE, with a message naming `what`. */
CPU_HIDDEN bp_status_t cpu_check_range(const char* what, bpp_buffer_t b, uint64_t off,
                                       uint64_t size);

/* ------------------------------------------------------------------------ */
/* Op metadata and execution (cpu_ops.c and kernel files)                    */
/* ------------------------------------------------------------------------ */
/* Largest attribute struct: what a ring slot stores by value. */
typedef union cpu_attrs_storage {
#define CPU__ATTR_MEMBER(T) T T##_;
  BP_ATTRS_TYPES(CPU__ATTR_MEMBER)
#undef CPU__ATTR_MEMBER
} cpu_attrs_storage_t;

/* Fixed operand counts from ops.def (-1: a tensor list). */
CPU_HIDDEN int cpu_op_num_inputs(uint32_t op);
CPU_HIDDEN int cpu_op_num_outputs(uint32_t op);
CPU_HIDDEN size_t cpu_op_attrs_size(uint32_t op); /* 0 for bp_no_attrs_t */
CPU_HIDDEN const char* cpu_op_name(uint32_t op);
/* Nonzero for ops with a launch slot. */
CPU_HIDDEN int cpu_op_implemented(uint32_t op);
/* Nonzero when input i of op may be absent (opt_ operand or scalar form). */
CPU_HIDDEN int cpu_op_input_optional(uint32_t op, uint32_t i);

/* Runs one op synchronously on the calling thread (a stream worker). The
 * call was validated by cpu_launch_op. */
CPU_HIDDEN bp_status_t cpu_exec_op(const bp_op_call_t* call);

/* Support answer for one call (query_support). */
CPU_HIDDEN bp_status_t cpu_query_support(bpp_device_t device, const bp_op_call_t* call,
                                         bp_support_t* out);
CPU_HIDDEN bp_status_t cpu_estimate_cost(bpp_device_t device, const bp_op_call_t* call,
                                         bp_cost_estimate_t* out);

/* Host pointer of element [0..0] of a descriptor. */
static inline unsigned char* cpu_desc_ptr(const bp_tensor_desc_t* d) {
  return ((struct bpp_buffer_s*)d->buffer)->ptr + d->byte_offset;
}

/* A kernel family: the ops one file runs, its executor and its support
 * check. Each family file defines one `const cpu_family_t cpu_family_<name>`;
 * cpu_ops.c lists them (CPU_FAMILIES). An op belongs to one family. */
typedef struct cpu_family {
  const char* name;
  const uint16_t* ops; /* op ids */
  uint32_t num_ops;
  /* Runs one validated call on a stream worker (see cpu_exec_op). */
  bp_status_t (*exec)(const bp_op_call_t* call);
  /* 0 when `call` (buffers may be NULL) runs here, else an enum
   * bp_support_reason with the reason in msg. The common checks (op known,
   * dtypes valid, no c64 unless allow_c64, rank <= BP_MAX_RANK) are done. */
  int (*supported)(const bp_op_call_t* call, char* msg, size_t cap);
  int allow_c64; /* the family handles c64 operands itself */
} cpu_family_t;

#define CPU_FAMILY_OPS(...)          \
  (const uint16_t[]){__VA_ARGS__}, \
      (uint32_t)(sizeof((const uint16_t[]){__VA_ARGS__}) / sizeof(uint16_t))

/* Family of op (NULL: none). */
CPU_HIDDEN const cpu_family_t* cpu_op_family(uint32_t op);

/* Kernel families (cpu_ew.c, cpu_reduce.c, cpu_gemm.c). */
CPU_HIDDEN bp_status_t cpu_exec_elementwise(const bp_op_call_t* call);
CPU_HIDDEN bp_status_t cpu_exec_copy_like(const bp_op_call_t* call); /* to_copy copy clone cat fill arange */
CPU_HIDDEN bp_status_t cpu_exec_reduce(const bp_op_call_t* call);
CPU_HIDDEN bp_status_t cpu_exec_softmax(const bp_op_call_t* call);
CPU_HIDDEN bp_status_t cpu_exec_matmul(const bp_op_call_t* call);
/* C[m,n] = alpha * A[m,k] @ B[k,n] (+ C when accumulate) on host memory,
 * all three of `dtype` (f32, f64, f16, bf16, integers), strides in elements
 * per row and column (any layout; BLAS reads transposed views in place).
 * f32/f64 go through OpenBLAS when built with it, else the blocked kernel;
 * runs on the calling thread plus BLAS's or the pool's threads. Equivalent
 * to cblas_sgemm with beta 0 or 1. */
CPU_HIDDEN bp_status_t cpu_gemm(uint32_t dtype, int64_t m, int64_t n, int64_t k, double alpha,
                                const void* a, int64_t a_rs, int64_t a_cs, const void* b,
                                int64_t b_rs, int64_t b_cs, int accumulate, void* c, int64_t c_rs,
                                int64_t c_cs);
/* Support checks per family: BP_OK or a reason (out filled). */
CPU_HIDDEN int cpu_ew_supported(const bp_op_call_t* call, char* msg, size_t cap);

/* Copies src (broadcast to dst's shape, cast to dst's dtype) into dst.
 * Both are host descriptors (buffers resolved). Used by copy-like ops and by
 * matmul for packing. */
CPU_HIDDEN bp_status_t cpu_cast_copy(const bp_tensor_desc_t* dst, const bp_tensor_desc_t* src);
/* A descriptor over raw host memory (buffer field points at a stack
 * bpp_buffer_s the caller owns). */
CPU_HIDDEN void cpu_desc_host(bp_tensor_desc_t* d, struct bpp_buffer_s* holder, void* ptr,
                              uint32_t dtype, uint32_t rank, const int64_t* sizes,
                              const int64_t* strides);

#endif /* BP_CPU_INTERNAL_H_ */
