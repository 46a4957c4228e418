/* backplane CPU plugin: streams and op launch.
 *
 * Streams and events are the plugin kit's in-order queues (bp_kit_stream.h):
 * one worker thread per stream runs the ops this file enqueues and the
 * copies of the kit's host-memory slots (bp_kit_host.h, through cpu_memcpy);
 * the kernels fan out over the global pool (cpu_pool.c). Errors raised by
 * commands are sticky and come back at the next synchronize or query.
 */
#include <string.h>

#include "cpu_internal.h"

#define CPU_MAX_OPERANDS 4096u

/* ------------------------------------------------------------------------ */
/* Parallel memcpy                                                           */
/* ------------------------------------------------------------------------ */
typedef struct { unsigned char* dst; const unsigned char* src; } memcpy_job_t;
static void memcpy_range(void* ctx, int64_t b, int64_t e) {
  memcpy_job_t* j = ctx;
  memcpy(j->dst + b, j->src + b, (size_t)(e - b));
}
/* Every copy slot has memmove semantics (docs/ABI.md section 8). */
void cpu_memcpy(void* dst, const void* src, uint64_t size) {
  if (size == 0 || dst == src) return;
  const uintptr_t d = (uintptr_t)dst, s = (uintptr_t)src;
  if (d < s + size && s < d + size) {
    /* Overlapping ranges (a copy within one buffer, or host memory mapped
     * from the buffer): one memmove on this thread, since chunks copied in
     * parallel would read bytes another chunk already overwrote. */
    memmove(dst, src, size);
    return;
  }
  if (size < (1u << 20)) {
    memcpy(dst, src, size);
    return;
  }
  memcpy_job_t j = {dst, src};
  cpu_parallel_for((int64_t)size, 256 << 10, memcpy_range, &j);
}

/* ------------------------------------------------------------------------ */
/* Streams                                                                   */
/* ------------------------------------------------------------------------ */
static bp_status_t exec_op(bpp_device_t device, const bp_op_call_t* call) {
  (void)device;
  return cpu_exec_op(call);
}

static const bp_kit_queue_t k_queue = {.exec = exec_op, .copy = cpu_memcpy};

bp_status_t cpu_stream_create(bpp_device_t device, const bp_stream_create_info_t* info,
                              bpp_stream_t* out) {
  return bp_kit_stream_create(&k_queue, device, info, out);
}

/* ------------------------------------------------------------------------ */
/* Op launch                                                                 */
/* ------------------------------------------------------------------------ */
/* The core validated the call (docs/ABI.md, "Trust boundary"): only a
 * checked build (BP_PLUGIN_CHECKS, or without NDEBUG) walks it again. */
bp_status_t cpu_launch_op(bpp_stream_t s, const bp_op_call_t* call) {
  BP_PLUGIN_DEBUG_CHECK(s ? BP_OK : cpu_error(BP_INVALID_ARGUMENT, "cpu: launch: NULL stream"));
  BP_PLUGIN_DEBUG_CHECK(bp_kit_call_check(call, CPU_MAX_OPERANDS, bp_kit_host_buffer_size));
  if (!cpu_op_implemented(call->op_id))
    return cpu_error(BP_UNIMPLEMENTED, "cpu: op %s (id %u) has no CPU kernel",
                     cpu_op_name(call->op_id), call->op_id);
  return bp_kit_stream_enqueue_op(s, call);
}
