/* backplane plugin kit: in-order stream queues with a completion thread,
 * and events on top of them.
 *
 * For plugins whose work runs on host threads (the CPU plugin, the
 * template, a driver whose calls block): the kit owns `struct bpp_stream_s`
 * and `struct bpp_event_s`, so these functions have the ABI's signatures
 * and go straight into the core table (BP_KIT_STREAM_SLOTS). A plugin that
 * uses them does not define those two structs itself.
 *
 * A stream is an in-order queue served by one worker thread. Commands live
 * in a bounded ring of fixed-size slots: enqueueing copies the op call, its
 * descriptors and its attributes by value (no allocation except for tensor
 * lists longer than BP_KIT_CMD_INLINE_DESCS) and publishes the slot with an
 * atomic counter: no lock on the hot path. A full ring blocks the producer.
 *
 * Errors of executed work are sticky: the first one (status and message) is
 * kept and returned by the next stream_synchronize / stream_query, then
 * cleared. An event captures its stream's error when it completes; a
 * stream that waits on an event runs after the event's record.
 *
 * Threading: the ABI's rule (enqueues on one stream are externally
 * synchronized); synchronize/query and every event call are thread-safe.
 * A host function that returns an error poisons the stream (its status is
 * the sticky error). The executor and host functions run on the stream's
 * worker thread, which
 * is marked with bp_plugin_set_worker_thread(1).
 */
#ifndef BACKPLANE_KIT_STREAM_H_
#define BACKPLANE_KIT_STREAM_H_

#include <stdint.h>

#include "backplane/plugin.h"

#ifdef __cplusplus
extern "C" {
#endif

#define BP_KIT_CMD_INLINE_DESCS 8u

/* How a plugin runs the work of its streams. Static; shared by streams. */
typedef struct bp_kit_queue {
  /* Runs one op call (copied by bp_kit_stream_enqueue_op) on the worker;
   * returns its status, with the message from bp_kit_error. */
  bp_status_t (*exec)(bpp_device_t device, const bp_op_call_t* call);
  /* Copies host memory (NULL: memmove). The ranges may overlap: every copy
   * slot has memmove semantics (docs/ABI.md section 8). The CPU plugin
   * splits large non-overlapping copies over its thread pool. */
  void (*copy)(void* dst, const void* src, uint64_t size);
} bp_kit_queue_t;

/* Creates a stream of `device` served by a new worker thread. Takes both
 * queue kinds (a copy stream is the same queue; the core sends it no ops)
 * and any priority (a hint a host thread has no use for); refuses unknown
 * queue kinds and flags with INVALID_ARGUMENT. */
bp_status_t bp_kit_stream_create(const bp_kit_queue_t* queue, bpp_device_t device,
                                 const bp_stream_create_info_t* info, bpp_stream_t* out_stream);
/* The device the stream was created for. */
bpp_device_t bp_kit_stream_device(bpp_stream_t stream);

/* ABI slots (bpp_core_table_t): */
void bp_kit_stream_destroy(bpp_stream_t stream); /* drains the queue first */
bp_status_t bp_kit_stream_synchronize(bpp_stream_t stream);
bp_status_t bp_kit_stream_query(bpp_stream_t stream);
bp_status_t bp_kit_stream_enqueue_host_func(bpp_stream_t stream, bp_host_func_t fn, void* user);
/* Timing events work; exportable ones are UNIMPLEMENTED (host queues have
 * no semaphore to share). */
bp_status_t bp_kit_event_create(bpp_device_t device, const bp_event_create_info_t* info,
                                bpp_event_t* out_event);
void bp_kit_event_destroy(bpp_event_t event);
bp_status_t bp_kit_event_record(bpp_event_t event, bpp_stream_t stream);
bp_status_t bp_kit_stream_wait_event(bpp_stream_t stream, bpp_event_t event);
bp_status_t bp_kit_event_query(bpp_event_t event);
bp_status_t bp_kit_event_synchronize(bpp_event_t event);
bp_status_t bp_kit_event_elapsed_ns(bpp_event_t start, bpp_event_t end, uint64_t* out_ns);

/* Designated initializers of those slots, for a plugin's core table. */
#define BP_KIT_STREAM_SLOTS                                    \
  .stream_destroy = bp_kit_stream_destroy,                     \
  .stream_synchronize = bp_kit_stream_synchronize,             \
  .stream_query = bp_kit_stream_query,                         \
  .stream_enqueue_host_func = bp_kit_stream_enqueue_host_func, \
  .event_create = bp_kit_event_create,                         \
  .event_destroy = bp_kit_event_destroy,                       \
  .event_record = bp_kit_event_record,                         \
  .stream_wait_event = bp_kit_stream_wait_event,               \
  .event_query = bp_kit_event_query,                           \
  .event_synchronize = bp_kit_event_synchronize,               \
  .event_elapsed_ns = bp_kit_event_elapsed_ns

/* Stream-ordered work on host memory. Arguments are not checked beyond
 * NULL: the caller checked the ranges. size 0 enqueues nothing. */
bp_status_t bp_kit_stream_enqueue_copy(bpp_stream_t stream, void* dst, const void* src,
                                       uint64_t size);
/* Repeats the `pattern_size`-byte pattern (1, 2, 4 or 8; size a multiple of
 * it) over [dst, dst + size). */
bp_status_t bp_kit_stream_enqueue_fill(bpp_stream_t stream, void* dst, uint64_t size,
                                       const void* pattern, uint32_t pattern_size);
/* Copies `call` (descriptors, and attributes at the size ops.def gives the
 * op) into the queue; the queue's exec runs it later in stream order. The
 * call must have been checked (bp_kit_call_check, or the core's
 * validation). RESOURCE_EXHAUSTED when a long tensor list cannot be
 * copied. */
bp_status_t bp_kit_stream_enqueue_op(bpp_stream_t stream, const bp_op_call_t* call);

#ifdef __cplusplus
}
#endif
#endif /* BACKPLANE_KIT_STREAM_H_ */
