/* backplane CPU plugin: internal declarations shared by its sources. */
#ifndef BP_CPU_INTERNAL_H_
#define BP_CPU_INTERNAL_H_

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

#include "backplane/plugin.h"
#include "bp_kit.h"
#include "bp_kit_host.h" /* struct bpp_buffer_s: host memory */

#define CPU_HIDDEN __attribute__((visibility("hidden")))
/* The plugin's version (negotiation reply; saved regions carry it). */
#define CPU_PLUGIN_VERSION "0.1.0"

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
  /* One budget for every buffer of the instance (cpu_memory.c). */
  bp_kit_host_budget_t budget;
};


/* ------------------------------------------------------------------------ */
/* Errors and op metadata: the plugin kit's (bp_kit_plugin.h, bp_kit_ops.h)  */
/* ------------------------------------------------------------------------ */
/* Formats the message into the calling thread's error slot and returns
 * `status`; on threads that answer a plugin call (not stream workers) the
 * message also goes to the host. */
#define cpu_error(...) bp_kit_error(__VA_ARGS__)
#define cpu_op_name(op) bp_kit_op_name(op)

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
/* The ISA cap of BP_CPU_ISA=base|avx2|avx512 (0, 1, 2; 2 when unset or
 * unknown): kernels chosen at run time by CPUID take no variant above it
 * (cpu_ew.c reads it once per process). */
CPU_HIDDEN int cpu_isa_cap(void);
CPU_HIDDEN uint32_t cpu_online_cores(void);
/* OpenBLAS's kernels re-chosen when it fell back to Prescott (cpu_blas_core.c). */
CPU_HIDDEN void cpu_blas_core_init(void);

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
/* Buffers reserve their bytes in inst->budget (bp_kit_host_buffer_allocate). */

/* Memory spaces of every device: 0 device, 1 pinned, 2 pageable (all the
 * same host memory). */
#define CPU_MEMORY_SPACES 3u

/* ------------------------------------------------------------------------ */
/* External memory (cpu_external.c): host pointers and DLPack; the slots.    */
/* ------------------------------------------------------------------------ */
CPU_HIDDEN bp_status_t cpu_buffer_import(bpp_device_t device, const bp_external_buffer_desc_t* desc,
                                         bpp_buffer_t* out_buffer);
CPU_HIDDEN bp_status_t cpu_buffer_export(bpp_buffer_t buffer, bp_external_buffer_desc_t* out);

/* ------------------------------------------------------------------------ */
/* Streams and launch (cpu_stream.c); the other stream, event, buffer and   */
/* copy slots are the kit's (BP_KIT_STREAM_SLOTS, BP_KIT_HOST_MEMORY_SLOTS). */
/* ------------------------------------------------------------------------ */
CPU_HIDDEN bp_status_t cpu_stream_create(bpp_device_t device, const bp_stream_create_info_t* info,
                                         bpp_stream_t* out);
/* The launch slot of every implemented op: checks the call, copies it into
 * the stream's queue and returns. */
CPU_HIDDEN bp_status_t cpu_launch_op(bpp_stream_t stream, const bp_op_call_t* call);
/* Parallel memcpy (large sizes split over the pool). */
CPU_HIDDEN void cpu_memcpy(void* dst, const void* src, uint64_t size);

/* ------------------------------------------------------------------------ */
/* Op metadata and execution (cpu_ops.c and kernel files)                    */
/* ------------------------------------------------------------------------ */
/* Nonzero for ops with a launch slot. */
CPU_HIDDEN int cpu_op_implemented(uint32_t op);

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
/* log_softmax of one dense f32 row of n > 0 into y (may be x), the
 * vectorized kernel of log_softmax (the CPU's best ISA; cpu_reduce.c). */
CPU_HIDDEN void cpu_log_softmax_row_f32(const float* x, float* y, int64_t n);
/* Folds n dense f32 values into *acc as sum / mean (a sum) / amax / amin
 * do (cpu_reduce.c's row kernel: f32 lanes over blocks, blocks in f64);
 * *nan set when a NaN was read (amax / amin; *acc then meaningless). */
CPU_HIDDEN void cpu_reduce_row_f32(uint32_t op, const float* x, int64_t n, double* acc, int* nan);
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
