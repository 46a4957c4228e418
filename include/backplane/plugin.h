/* backplane: THE stable plugin ABI.
 *
 * A plugin is a shared library that exports exactly one symbol,
 * BP_PLUGIN_ENTRY_NAME, of type bp_plugin_negotiate_fn. Everything else is
 * reached through the function tables it returns. docs/ABI.md states every
 * rule in one place; the short form:
 *
 *  Versioning  The host passes the newest ABI it speaks; the plugin answers
 *              with the agreed version: major equal, minor = min(host,
 *              plugin). Each side then uses only what that minor defines.
 *  Structs     Every ABI struct starts with uint32_t struct_size (the
 *              writer's sizeof). Readers accept struct_size >= the first
 *              released size and never read past struct_size. Out-structs
 *              are sized by the caller; the callee writes only within it.
 *              `next` pointers chain extensions (NULL when none).
 *  Arrays      No array of a growable struct is indexed at the reader's
 *              sizeof: descriptors travel as arrays of pointers (each with
 *              its struct_size), small records with an explicit stride.
 *  Gate        The core never hands a plugin an op, dtype or non-default
 *              attribute field newer than the minor it negotiated.
 *  Tables      Append-only; slots are never reordered or reused. A NULL slot
 *              or one past the table's struct_size means "not implemented":
 *              the core turns it into BP_UNIMPLEMENTED, never a call.
 *  Enums       Cross as fixed-width integers; unknown values are rejected
 *              with BP_INVALID_ARGUMENT.
 *  Errors      Every call returns a bp_status_t. Before returning an error
 *              the plugin calls host->report(...) with a message naming what
 *              was wrong (and the vendor code, e.g. "CUDA_ERROR_ILLEGAL_ADDRESS
 *              (700)"). No heap object crosses the boundary. A plugin never
 *              aborts, exits, asserts or longjmps across the boundary.
 *  Ownership   Handles (bpp_*) are opaque and owned by the plugin. The core
 *              wraps them in ref-counted application objects and releases
 *              each exactly once, after every use has been retired.
 *  Threading   Every call is thread-safe unless a parameter is marked
 *              "externally synchronized": then the caller guarantees no two
 *              calls use that object at once (a stream, mainly). Host
 *              callbacks (host_func, report, log) may be called from any
 *              thread.
 *  Strings     UTF-8, NUL-terminated. Returned strings are owned by the
 *              plugin and live as long as the object that returned them.
 *
 * This header depends only on <stdint.h>, <stddef.h> and backplane's own ABI
 * headers (types.h, ops.h, ops.def).
 */
#ifndef BACKPLANE_PLUGIN_H_
#define BACKPLANE_PLUGIN_H_

#include "backplane/ops.h"
#include "backplane/types.h"

#ifdef __cplusplus
extern "C" {
#endif

#define BP_ABI_VERSION_MAJOR 1
#define BP_ABI_VERSION_MINOR 4

#define BP_PLUGIN_ENTRY_NAME "bp_plugin_negotiate"

#if defined(_WIN32)
#define BP_PLUGIN_EXPORT __declspec(dllexport)
#else
#define BP_PLUGIN_EXPORT __attribute__((visibility("default")))
#endif


/* ======================================================================== */
/* Host services: what the core gives every plugin.                         */
/* ======================================================================== */

typedef struct bp_host_services {
  uint32_t struct_size;
  uint32_t reserved0;
  void* host_ctx; /* pass back unchanged */
  /* Records the message for the error the calling thread is about to
   * return. Thread-safe. The host copies `message`. */
  void (*report)(void* host_ctx, bp_status_t status, const char* message);
  /* Logs a line. Thread-safe. `level` is enum bp_log_level. */
  void (*log)(void* host_ctx, int32_t level, const char* message);
  /* Nonzero when `level` would be printed; lets plugins skip formatting. */
  int32_t (*log_enabled)(void* host_ctx, int32_t level);
  /* Reports an error found outside any call (a fault in stream work, a lost
   * device) as soon as the plugin sees it, in addition to the sticky stream
   * error. `device` may be NULL when the whole instance is affected. Any
   * thread; the host copies `message` and returns quickly. */
  void (*async_error)(void* host_ctx, bpp_device_t device, bp_status_t status,
                      const char* message);
} bp_host_services_t;
#define BP_HOST_SERVICES_V1_SIZE 48u

/* ======================================================================== */
/* Negotiation: the single exported entry point.                            */
/* ======================================================================== */

typedef struct bp_negotiate_request {
  uint32_t struct_size;
  uint16_t abi_major; /* newest ABI the host speaks */
  uint16_t abi_minor;
  const bp_host_services_t* host; /* valid until the library is unloaded */
  const void* next;
} bp_negotiate_request_t;
#define BP_NEGOTIATE_REQUEST_V1_SIZE 24u

typedef struct bp_negotiate_reply {
  uint32_t struct_size; /* set by the host: how much the plugin may write */
  uint16_t abi_major;   /* agreed version */
  uint16_t abi_minor;
  const char* name;     /* backend name, e.g. "cpu"; lowercase, [a-z0-9_] */
  const char* version;  /* plugin version string */
  const char* vendor;
  const bp_plugin_vtable_t* vtable; /* static; valid until unload */
  const void* next;
} bp_negotiate_reply_t;
#define BP_NEGOTIATE_REPLY_V1_SIZE 48u

/* Returns BP_OK and fills `reply`, or BP_FAILED_PRECONDITION when the major
 * versions differ (after reporting why). Must not allocate device resources:
 * that is instance_create's job. Thread-compatible: the host calls it once. */
typedef bp_status_t (*bp_plugin_negotiate_fn)(const bp_negotiate_request_t* request,
                                              bp_negotiate_reply_t* reply);

/* ======================================================================== */
/* Plain data shared by the tables.                                         */
/* ======================================================================== */


typedef struct bp_buffer_alloc_info {
  uint32_t struct_size;
  uint32_t memory_space; /* index in device_memory_spaces' list */
  uint64_t size_bytes;   /* > 0 */
  uint64_t alignment;    /* 0 = the space's default; else a power of two */
  const void* next;
} bp_buffer_alloc_info_t;
#define BP_BUFFER_ALLOC_INFO_V1_SIZE 32u

typedef struct bpp_instance_create_info {
  uint32_t struct_size;
  uint32_t flags;      /* reserved, 0 */
  const char* options; /* "key=value;key=value" from BACKPLANE_<NAME>_OPTIONS, or NULL */
  const void* next;
} bpp_instance_create_info_t;
#define BPP_INSTANCE_CREATE_INFO_V1_SIZE 24u

/* ======================================================================== */
/* Core table: instance, devices, memory, copies, streams, events.          */
/* ======================================================================== */
/* A host function enqueued on a stream. A status other than BP_OK poisons
 * the stream: it becomes the stream's sticky error (as a failed kernel's
 * would), returned by the next synchronize or query. */
typedef bp_status_t (*bp_host_func_t)(void* user_data);

typedef struct bpp_core_table {
  uint32_t struct_size;
  uint32_t reserved0;

  /* Creates the plugin instance: opens the vendor library (dlopen), checks
   * versions, enumerates hardware. BP_UNAVAILABLE (with the library name,
   * dlerror text or driver version in the message) when the vendor stack is
   * missing; the host then records the plugin as skipped. */
  bp_status_t (*instance_create)(const bpp_instance_create_info_t* info,
                                 bpp_instance_t* out_instance);
  void (*instance_destroy)(bpp_instance_t instance);

  bp_status_t (*device_count)(bpp_instance_t instance, uint32_t* out_count);
  bp_status_t (*device_open)(bpp_instance_t instance, uint32_t index, bpp_device_t* out_device);
  void (*device_close)(bpp_device_t device);
  /* `props->struct_size` is set by the caller. */
  bp_status_t (*device_get_properties)(bpp_device_t device, bp_device_properties_t* props);
  /* Fills up to `capacity` entries, `element_size` bytes apart (the
   * caller's sizeof(bp_memory_space_info_t), >= its V1 size); writes at
   * most element_size bytes of each and sets each entry's struct_size to
   * what it wrote. *out_count is the total available. Space 0 is the
   * default device-local space. */
  bp_status_t (*device_memory_spaces)(bpp_device_t device, uint32_t capacity,
                                      uint32_t element_size, bp_memory_space_info_t* out_spaces,
                                      uint32_t* out_count);
  /* Current use and budget of one memory space (index as above), bytes. */
  bp_status_t (*device_memory_usage)(bpp_device_t device, uint32_t memory_space,
                                     uint64_t* out_used, uint64_t* out_budget);

  /* Buffers. Allocation failing for lack of memory is BP_RESOURCE_EXHAUSTED
   * with the requested and available sizes in the message. */
  bp_status_t (*buffer_allocate)(bpp_device_t device, const bp_buffer_alloc_info_t* info,
                                 bpp_buffer_t* out_buffer);
  /* Frees the buffer. The core calls it only after all stream work using the
   * buffer has completed. */
  void (*buffer_release)(bpp_buffer_t buffer);
  /* Host pointer to [offset, offset+size) of a HOST_VISIBLE buffer. The
   * pointer stays valid until buffer_unmap. Equivalent to vkMapMemory. */
  bp_status_t (*buffer_map)(bpp_buffer_t buffer, uint64_t offset, uint64_t size, void** out_ptr);
  bp_status_t (*buffer_unmap)(bpp_buffer_t buffer);

  /* Stream-ordered copies; `stream` is externally synchronized. A host
   * pointer must stay valid and unchanged until the stream passes the copy
   * (equivalent to cuMemcpyHtoDAsync / cuMemcpyDtoHAsync / cuMemcpyAsync). */
  bp_status_t (*copy_host_to_device)(bpp_stream_t stream, const void* src, bpp_buffer_t dst,
                                     uint64_t dst_offset, uint64_t size);
  bp_status_t (*copy_device_to_host)(bpp_stream_t stream, bpp_buffer_t src, uint64_t src_offset,
                                     void* dst, uint64_t size);
  bp_status_t (*copy_device_to_device)(bpp_stream_t stream, bpp_buffer_t src, uint64_t src_offset,
                                       bpp_buffer_t dst, uint64_t dst_offset, uint64_t size);
  /* Copy to a buffer of another device of the same plugin (NULL: the core
   * stages through pinned host memory). Equivalent to cuMemcpyPeerAsync. */
  bp_status_t (*copy_peer)(bpp_stream_t stream, bpp_buffer_t src, uint64_t src_offset,
                           bpp_buffer_t dst, uint64_t dst_offset, uint64_t size);
  /* Repeats a 1, 2, 4 or 8 byte pattern over [offset, offset+size).
   * Equivalent to cuMemsetD32Async / vkCmdFillBuffer. */
  bp_status_t (*buffer_fill)(bpp_stream_t stream, bpp_buffer_t buffer, uint64_t offset,
                             uint64_t size, const void* pattern, uint32_t pattern_size);

  /* Streams: in-order queues. A request the device cannot honour (a queue
   * kind it lacks, unknown flags) is refused with BP_UNIMPLEMENTED or
   * BP_INVALID_ARGUMENT and a message; priority is a hint. */
  bp_status_t (*stream_create)(bpp_device_t device, const bp_stream_create_info_t* info,
                               bpp_stream_t* out_stream);
  /* Waits for pending work, then frees. */
  void (*stream_destroy)(bpp_stream_t stream);
  /* Blocks until all work enqueued so far finished; returns the first error
   * of that work (sticky until reported once). */
  bp_status_t (*stream_synchronize)(bpp_stream_t stream);
  /* BP_OK when idle, BP_NOT_READY when work is pending, else the error. */
  bp_status_t (*stream_query)(bpp_stream_t stream);
  /* Calls fn(user_data) on some host thread once the stream reaches this
   * point; later work on the stream waits until fn returns. fn must not call
   * into this stream. A failed fn poisons the stream (bp_host_func_t).
   * Equivalent to cuLaunchHostFunc. The core bridges cross-plugin event
   * waits with it. */
  bp_status_t (*stream_enqueue_host_func)(bpp_stream_t stream, bp_host_func_t fn, void* user_data);

  /* Events: recorded on a stream, waited on by another stream of the same
   * plugin. Equivalent to cuEventRecord / cuStreamWaitEvent. */
  bp_status_t (*event_create)(bpp_device_t device, const bp_event_create_info_t* info,
                              bpp_event_t* out_event);
  void (*event_destroy)(bpp_event_t event);
  bp_status_t (*event_record)(bpp_event_t event, bpp_stream_t stream);
  bp_status_t (*stream_wait_event)(bpp_stream_t stream, bpp_event_t event);
  /* BP_OK when complete, BP_NOT_READY when pending, else the error of the
   * work it follows. */
  bp_status_t (*event_query)(bpp_event_t event);
  bp_status_t (*event_synchronize)(bpp_event_t event);
  /* Time between two completed events recorded with timing, nanoseconds. */
  bp_status_t (*event_elapsed_ns)(bpp_event_t start, bpp_event_t end, uint64_t* out_ns);

  /* External memory and events (enum bp_external_kind says who owns what).
   * NULL slots, and kinds a plugin lacks, are BP_UNIMPLEMENTED. */
  bp_status_t (*buffer_import)(bpp_device_t device, const bp_external_buffer_desc_t* desc,
                               bpp_buffer_t* out_buffer);
  /* `out->struct_size` and `out->kind` are set by the caller. */
  bp_status_t (*buffer_export)(bpp_buffer_t buffer, bp_external_buffer_desc_t* out);
  bp_status_t (*event_import)(bpp_device_t device, const bp_external_event_desc_t* desc,
                              bpp_event_t* out_event);
  bp_status_t (*event_export)(bpp_event_t event, bp_external_event_desc_t* out);
} bpp_core_table_t;
#define BPP_CORE_TABLE_V1_SIZE 272u

/* ======================================================================== */
/* Op table: one launch slot per op id.                                     */
/* ======================================================================== */


/* Enqueues the op on `stream` (externally synchronized). Returns after
 * enqueueing; errors found while running surface at the next synchronize.
 * `call` and everything it points to (descriptors, attrs) are valid only
 * during this call: a plugin that runs the op later copies what it needs.
 * Buffers stay alive until the work completes (the core guarantees it). */
typedef bp_status_t (*bpp_op_launch_fn)(bpp_stream_t stream, const bp_op_call_t* call);

typedef struct bpp_op_table {
  uint32_t struct_size;
  uint32_t launch_count; /* entries in `launch`; ids >= launch_count: not implemented */
  const bpp_op_launch_fn* launch; /* indexed by op id; NULL = not implemented */
} bpp_op_table_t;
#define BPP_OP_TABLE_V1_SIZE 16u

/* ======================================================================== */
/* Capabilities: support, cost, fusion.                                     */
/* ======================================================================== */

/* bp_cost_estimate_t, bp_ew_instr_t and bp_ew_program_t are in types.h. */

typedef struct bpp_caps_table {
  uint32_t struct_size;
  uint32_t reserved0;
  /* Pure, cheap, cacheable: the same question gets the same answer for the
   * lifetime of the device. `call` buffers are NULL. A "supported" answer is
   * a promise the conformance suite checks. */
  bp_status_t (*query_support)(bpp_device_t device, const bp_op_call_t* call, bp_support_t* out);
  /* Optional (NULL: the compiler uses a roofline from the properties). */
  bp_status_t (*estimate_cost)(bpp_device_t device, const bp_op_call_t* call,
                               bp_cost_estimate_t* out);
  /* `out->struct_size` is set by the caller. */
  bp_status_t (*query_fusion)(bpp_device_t device, bp_fusion_caps_t* out);
  /* Runs an elementwise program: output[k][i] from inputs broadcast to the
   * outputs' shape. Operands are arrays of descriptor pointers. Stream
   * externally synchronized. */
  bp_status_t (*launch_ew_program)(bpp_stream_t stream, const bp_ew_program_t* program,
                                   uint32_t num_inputs, const bp_tensor_desc_t* const* inputs,
                                   uint32_t num_outputs, const bp_tensor_desc_t* const* outputs);
} bpp_caps_table_t;
#define BPP_CAPS_TABLE_V1_SIZE 40u

/* ======================================================================== */
/* Compiled regions (executables).                                          */
/* ======================================================================== */
/* Compiled regions. Final since ABI 1.2 (docs/ABI.md section 12): a table
 * under BPP_EXEC_TABLE_V1_SIZE (the provisional draft of 1.0 and 1.1) is
 * ignored with a warning, and every op still runs through eager launch.
 * The region structs (bp_region_desc_t, bp_region_node_t, bp_region_info_t)
 * are in types.h. Thread-safe, except that `stream` is externally
 * synchronized. Descriptors and regions are valid only during a call. */
typedef struct bpp_exec_table {
  uint32_t struct_size;
  uint32_t reserved0;
  /* The graph-level capability question (ONNX Runtime's GetCapability):
   * `graph` (kind GRAPH) is offered whole; for each node n the plugin
   * writes out_groups[n] = the group it takes the node in (1, 2, ...: nodes
   * of one group it would compile and run as one region; a group is convex
   * and its nodes need not be adjacent in `graph`), or 0 for a node it does
   * not take, with out_reasons[n] saying why (struct_size set by the
   * caller; the plugin fills only the 0 entries). Pure and cheap, like
   * query_support. */
  bp_status_t (*region_claim)(bpp_device_t device, const bp_region_desc_t* graph,
                              uint32_t* out_groups, bp_support_t* const* out_reasons);
  /* Compiles a region. A refusal is BP_UNIMPLEMENTED with `out_refusal`
   * (struct_size set by the caller) filled; the compiler then falls back
   * to smaller regions. The executable depends on nothing the call passed. */
  bp_status_t (*region_compile)(bpp_device_t device, const bp_region_desc_t* region,
                                bp_support_t* out_refusal, bpp_executable_t* out_executable);
  /* Workspace, aliasing (donation) and cost of a compiled region;
   * `out->struct_size` is set by the caller. */
  bp_status_t (*executable_get_info)(bpp_executable_t executable, bp_region_info_t* out);
  /* Enqueues one run on `stream` (externally synchronized, a stream of the
   * executable's device). args: num_args descriptors with the compiled
   * dtypes and sizes, any in-bounds strides (the core checked them);
   * workspace: a U8 rank-1 descriptor of at least workspace_bytes, or NULL
   * when the executable needs none. Outputs overlap inputs only as the
   * executable's aliases allow. */
  bp_status_t (*executable_launch)(bpp_stream_t stream, bpp_executable_t executable,
                                   uint32_t num_args, const bp_tensor_desc_t* const* args,
                                   const bp_tensor_desc_t* workspace);
  /* May be called while launched work is pending: the plugin keeps what
   * that work needs until it completes. */
  void (*executable_release)(bpp_executable_t executable);
  /* Two-call pattern: data NULL returns the size in *out_size. The bytes
   * carry the plugin's own version and checksum. */
  bp_status_t (*executable_serialize)(bpp_executable_t executable, void* data,
                                      uint64_t capacity, uint64_t* out_size);
  /* Rejects corrupt or truncated data with BP_DATA_LOSS and data from
   * another plugin, plugin version or device with BP_FAILED_PRECONDITION,
   * each with a message saying why; never trusts the bytes. */
  bp_status_t (*executable_deserialize)(bpp_device_t device, const void* data, uint64_t size,
                                        bpp_executable_t* out_executable);
} bpp_exec_table_t;
#define BPP_EXEC_TABLE_V1_SIZE 64u

/* ======================================================================== */
/* Collectives.                                                             */
/* ======================================================================== */

/* Out-of-band bootstrap provided by the host (in-process threads, TCP or
 * MPI). All functions block; all ranks must call the collective ones in
 * the same order. Thread-compatible: one rank's calls come from one thread
 * at a time. */
typedef struct bp_bootstrap {
  uint32_t struct_size;
  int32_t rank;
  int32_t nranks;
  uint32_t reserved0;
  void* ctx;
  /* recv has nranks * bytes; rank r's send lands at recv + r * bytes. */
  bp_status_t (*allgather)(void* ctx, const void* send, void* recv, uint64_t bytes);
  bp_status_t (*broadcast)(void* ctx, void* data, uint64_t bytes, int32_t root);
  bp_status_t (*barrier)(void* ctx);
  bp_status_t (*send)(void* ctx, int32_t peer, const void* data, uint64_t bytes, int32_t tag);
  bp_status_t (*recv)(void* ctx, int32_t peer, void* data, uint64_t bytes, int32_t tag);
} bp_bootstrap_t;
#define BP_BOOTSTRAP_V1_SIZE 64u

/* enum bp_reduce_op (SUM..AVG) is in types.h. */

/* comm_split's color for a rank that joins no new communicator (it gets
 * NULL). Equivalent to NCCL_SPLIT_NOCOLOR and MPI_UNDEFINED. */
#define BP_COMM_SPLIT_NO_COLOR (-1)

typedef struct bp_comm_create_info {
  uint32_t struct_size;
  uint32_t flags; /* reserved, 0 */
  /* A collective whose peers do not all arrive within this time fails
   * with DEADLINE_EXCEEDED and breaks the communicator (every later call
   * fails the same way until it is destroyed): a missing rank is an error,
   * never a hang. 0: the default (BACKPLANE_COMM_TIMEOUT_MS, else 300 s). */
  uint64_t timeout_ns;
  /* Used only during the call. NULL asks for the launcher's world (the
   * processes of an `mpirun`), which only a plugin that has one provides;
   * others answer INVALID_ARGUMENT. */
  const bp_bootstrap_t* bootstrap;
  const void* next;
} bp_comm_create_info_t;
#define BP_COMM_CREATE_INFO_V1_SIZE 32u

typedef struct bp_collective_options {
  uint32_t struct_size;
  /* Payload compression of all_reduce, all_gather and reduce_scatter:
   * BP_DTYPE_I8 or BP_DTYPE_F8E4M3FN blocks with one f32 scale per
   * `compression_block` elements (docs/collectives.md gives the error
   * bound), or BP_DTYPE_INVALID (0) for none. A plugin without it answers
   * UNIMPLEMENTED. */
  uint32_t compression;
  int32_t root; /* broadcast, reduce: the root rank */
  int32_t peer; /* send, recv: the other rank */
  uint32_t compression_block; /* elements per scale; 0 = 256 */
  uint32_t reserved0;
  const void* next;
} bp_collective_options_t;
#define BP_COLLECTIVE_OPTIONS_V1_SIZE 32u

/* bpp_comm_table_t.flags */
enum bpp_comm_flags {
  /* Collectives accept stream == NULL: the call then runs to completion on
   * the calling thread, and every descriptor names host memory of any
   * plugin (buffer NULL, byte_offset = the host address). This is how the
   * core reaches buffers and streams of another plugin with this plugin's
   * communicator (an MPI communicator next to a device plugin, host-staged
   * collectives): it calls such a communicator from a host function on
   * the device plugin's stream. */
  BPP_COMM_HOST_POINTERS = 1u << 0
};

/* Collectives. A communicator is one rank on one device. Every call is
 * stream-ordered on `stream` (a stream of the communicator's device,
 * externally synchronized) and is matched across ranks by call order.
 * Tensors are dense (contiguous descriptors); send and recv have the same
 * dtype. Mismatched calls across ranks (kind, count, dtype, op, root) fail
 * with INVALID_ARGUMENT on every rank, a missing rank with
 * DEADLINE_EXCEEDED (bp_comm_create_info_t.timeout_ns); neither hangs.
 * Equivalents in docs/collectives.md: NCCL and RCCL (ncclAllReduce ...),
 * oneCCL, MPI. */
typedef struct bpp_comm_table {
  uint32_t struct_size;
  uint32_t tier;  /* enum bp_comm_tier */
  uint32_t flags; /* enum bpp_comm_flags */
  uint32_t reserved0;
  /* Makes the calling rank's communicator on `device`; blocks until all
   * ranks of the bootstrap have called it. ncclCommInitRank. */
  bp_status_t (*comm_create)(bpp_device_t device, const bp_comm_create_info_t* info,
                             bpp_comm_t* out_comm);
  /* Ranks with the same color form a new communicator, ordered by key then
   * by old rank; collective over `comm`. BP_COMM_SPLIT_NO_COLOR: this rank
   * joins none and gets NULL. ncclCommSplit, MPI_Comm_split. */
  bp_status_t (*comm_split)(bpp_comm_t comm, int32_t color, int32_t key,
                            const bp_comm_create_info_t* info, bpp_comm_t* out_comm);
  /* Waits for the communicator's enqueued work, then frees it. */
  void (*comm_destroy)(bpp_comm_t comm);
  /* Fails every pending and later call on `comm` with ABORTED and wakes
   * every rank of it blocked in a collective; then only comm_destroy is
   * useful. Thread-safe, any thread. ncclCommAbort. */
  bp_status_t (*comm_abort)(bpp_comm_t comm);
  /* The error that broke the communicator (a timeout, an abort, a failed
   * peer), BP_OK while none has; the message through host services'
   * report. Thread-safe, does not block. ncclCommGetAsyncError. */
  bp_status_t (*comm_get_async_error)(bpp_comm_t comm);
  /* Registers a buffer for repeated collectives (zero-copy or pinned
   * paths); out_handle is the plugin's. ncclCommRegister. */
  bp_status_t (*comm_register)(bpp_comm_t comm, bpp_buffer_t buffer, void** out_handle);
  bp_status_t (*comm_deregister)(bpp_comm_t comm, void* handle);

  bp_status_t (*all_reduce)(bpp_comm_t comm, bpp_stream_t stream, const bp_tensor_desc_t* send,
                            const bp_tensor_desc_t* recv, uint32_t op,
                            const bp_collective_options_t* options);
  /* recv is written on every rank; send is read on the root only. */
  bp_status_t (*broadcast)(bpp_comm_t comm, bpp_stream_t stream, const bp_tensor_desc_t* send,
                           const bp_tensor_desc_t* recv, const bp_collective_options_t* options);
  /* recv is written on the root only. */
  bp_status_t (*reduce)(bpp_comm_t comm, bpp_stream_t stream, const bp_tensor_desc_t* send,
                        const bp_tensor_desc_t* recv, uint32_t op,
                        const bp_collective_options_t* options);
  /* recv holds nranks * numel(send) elements, rank r's at r * numel(send). */
  bp_status_t (*all_gather)(bpp_comm_t comm, bpp_stream_t stream, const bp_tensor_desc_t* send,
                            const bp_tensor_desc_t* recv, const bp_collective_options_t* options);
  /* send holds nranks * numel(recv) elements; rank r gets the reduction of
   * every rank's block r. */
  bp_status_t (*reduce_scatter)(bpp_comm_t comm, bpp_stream_t stream,
                                const bp_tensor_desc_t* send, const bp_tensor_desc_t* recv,
                                uint32_t op, const bp_collective_options_t* options);
  /* send and recv hold nranks equal blocks; block p of send goes to rank
   * p, where it lands as block r (r = this rank). */
  bp_status_t (*all_to_all)(bpp_comm_t comm, bpp_stream_t stream, const bp_tensor_desc_t* send,
                            const bp_tensor_desc_t* recv, const bp_collective_options_t* options);
  /* MPI_Alltoallv: nranks counts and displacements each, in elements of
   * the flat send and recv tensors; send_counts[p] on this rank equals
   * recv_counts[r] on rank p. */
  bp_status_t (*all_to_allv)(bpp_comm_t comm, bpp_stream_t stream, const bp_tensor_desc_t* send,
                             const uint64_t* send_counts, const uint64_t* send_displs,
                             const bp_tensor_desc_t* recv, const uint64_t* recv_counts,
                             const uint64_t* recv_displs, const bp_collective_options_t* options);
  /* Point to point with options->peer; matched in order per pair of ranks.
   * A send and a recv between the same two ranks in either order need a
   * group (below), as in NCCL. */
  bp_status_t (*send)(bpp_comm_t comm, bpp_stream_t stream, const bp_tensor_desc_t* data,
                      const bp_collective_options_t* options);
  bp_status_t (*recv)(bpp_comm_t comm, bpp_stream_t stream, const bp_tensor_desc_t* data,
                      const bp_collective_options_t* options);
  bp_status_t (*barrier)(bpp_comm_t comm, bpp_stream_t stream);
  /* Groups belong to the calling thread and span every communicator of
   * the plugin (ncclGroupStart/End): calls between them are issued
   * together at group_end, so one thread may drive several ranks, and
   * send/recv pairs that would deadlock one by one complete. Groups nest;
   * the outermost group_end issues. */
  bp_status_t (*group_begin)(void);
  bp_status_t (*group_end)(void);
  /* This rank's index and the rank count (ncclCommUserRank/Count): the
   * core asks after comm_split, where only the plugin knows them. */
  bp_status_t (*comm_info)(bpp_comm_t comm, int32_t* out_rank, int32_t* out_size);
} bpp_comm_table_t;
#define BPP_COMM_TABLE_V1_SIZE 176u

/* ======================================================================== */
/* The root table returned by negotiation.                                  */
/* ======================================================================== */
struct bp_plugin_vtable_s {
  uint32_t struct_size;
  uint32_t reserved0;
  const bpp_core_table_t* core; /* required */
  const bpp_op_table_t* ops;    /* NULL: no ops */
  const bpp_caps_table_t* caps; /* NULL: nothing supported, no fusion */
  const bpp_exec_table_t* exec; /* NULL: no compiled regions */
  const bpp_comm_table_t* comm; /* NULL: host-staged collectives only */
};
#define BP_PLUGIN_VTABLE_V1_SIZE 48u

/* ======================================================================== */
/* Layout pins: these sizes and offsets are frozen for ABI 1.0 (C11 and     */
/* C++11, 64-bit; see types.h for the plain data).                          */
/* ======================================================================== */
#if BP_ABI_PINNED
BP_STATIC_ASSERT(sizeof(bp_host_services_t) == BP_HOST_SERVICES_V1_SIZE, "host services layout");
BP_STATIC_ASSERT(sizeof(bp_negotiate_request_t) == BP_NEGOTIATE_REQUEST_V1_SIZE, "request layout");
BP_STATIC_ASSERT(sizeof(bp_negotiate_reply_t) == BP_NEGOTIATE_REPLY_V1_SIZE, "reply layout");
BP_STATIC_ASSERT(sizeof(bp_buffer_alloc_info_t) == BP_BUFFER_ALLOC_INFO_V1_SIZE, "alloc info");
BP_STATIC_ASSERT(sizeof(bpp_instance_create_info_t) == BPP_INSTANCE_CREATE_INFO_V1_SIZE,
                 "instance create info");
BP_STATIC_ASSERT(offsetof(bpp_core_table_t, instance_create) == 8, "core table head");
BP_STATIC_ASSERT(offsetof(bpp_core_table_t, event_elapsed_ns) == 8 + 28 * sizeof(void*),
                 "core table slots");
BP_STATIC_ASSERT(sizeof(bpp_core_table_t) == BPP_CORE_TABLE_V1_SIZE, "core table size");
BP_STATIC_ASSERT(sizeof(bpp_op_table_t) == BPP_OP_TABLE_V1_SIZE, "op table layout");
BP_STATIC_ASSERT(sizeof(bpp_caps_table_t) == BPP_CAPS_TABLE_V1_SIZE, "caps table layout");
BP_STATIC_ASSERT(sizeof(bpp_exec_table_t) == BPP_EXEC_TABLE_V1_SIZE, "exec table layout");
BP_STATIC_ASSERT(sizeof(bpp_comm_table_t) == BPP_COMM_TABLE_V1_SIZE, "comm table layout");
BP_STATIC_ASSERT(sizeof(bp_plugin_vtable_t) == BP_PLUGIN_VTABLE_V1_SIZE, "vtable layout");
BP_STATIC_ASSERT(sizeof(bp_collective_options_t) == BP_COLLECTIVE_OPTIONS_V1_SIZE,
                 "collective options layout");
BP_STATIC_ASSERT(sizeof(bp_bootstrap_t) == BP_BOOTSTRAP_V1_SIZE, "bootstrap layout");
BP_STATIC_ASSERT(sizeof(bp_comm_create_info_t) == BP_COMM_CREATE_INFO_V1_SIZE,
                 "comm create info layout");
#endif

#ifdef __cplusplus
}
#endif
#endif /* BACKPLANE_PLUGIN_H_ */
