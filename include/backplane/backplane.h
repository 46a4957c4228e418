/* backplane: the application API (umbrella header).
 *
 * Conventions (docs/ARCHITECTURE.md has the long form):
 *  - Every function that can fail returns bp_status_t (BP_OK == 0). On
 *    failure bp_status_message() returns a message for the calling thread
 *    that names what was wrong; results go to out_ parameters and are left
 *    untouched on failure, and partial work is released.
 *  - Objects are reference counted: the create and allocate calls return a reference
 *    the caller owns; *_retain adds one, *_release drops one. Objects handed
 *    out as "borrowed" live as long as their owner (devices and plugins live
 *    as long as the context).
 *  - Thread safety: all functions are thread-safe except that a stream is
 *    externally synchronized: no two threads may enqueue on the same stream
 *    at once.
 *  - Stream-ordered calls return once the work is enqueued; blocking calls
 *    say so.
 */
#ifndef BACKPLANE_BACKPLANE_H_
#define BACKPLANE_BACKPLANE_H_

/* The application API sees only the plain types both sides share
 * (types.h) and the op ids and attributes (ops.h). Code that needs the
 * plugin tables (tools, tests, plugins) includes backplane/plugin.h. */
#include "backplane/ops.h"
#include "backplane/types.h"

#ifdef __cplusplus
extern "C" {
#endif

#if defined(_WIN32)
#define BP_API
#else
#define BP_API __attribute__((visibility("default")))
#endif

typedef struct bp_context bp_context_t;
typedef struct bp_plugin bp_plugin_t;
typedef struct bp_device bp_device_t;
typedef struct bp_buffer bp_buffer_t;
typedef struct bp_stream bp_stream_t;
typedef struct bp_event bp_event_t;
typedef struct bp_tensor bp_tensor_t;

/* ------------------------------------------------------------------------ */
/* Status, version, logging                                                  */
/* ------------------------------------------------------------------------ */

/* Message of the last error returned on this thread ("" after success).
 * Valid until the next backplane call on this thread. */
BP_API const char* bp_status_message(void);
/* Sets this thread's message (what bp_status_message() returns next) and
 * returns `status`: libraries layered on the core (libbackplane_graph)
 * report their errors through the same slot. message NULL: "". */
BP_API bp_status_t bp_status_set_message(bp_status_t status, const char* message);
/* "OK", "INVALID_ARGUMENT", ...; "UNKNOWN_STATUS" for values out of range. */
BP_API const char* bp_status_name(bp_status_t status);
/* Why the last op run on this thread was refused before dispatch (enum
 * bp_support_reason): after BP_UNSUPPORTED (the device's support query said
 * no: DTYPE, RANK, LAYOUT, ATTRIBUTE, SIZE, DEVICE, ...) and after
 * BP_UNIMPLEMENTED for a backend with no kernel for the op (OP).
 * BP_SUPPORT_OK after any other outcome. Like bp_status_message(), valid
 * until the next backplane call on this thread. */
BP_API uint32_t bp_status_support_reason(void);
/* "op", "dtype", "rank", "layout", "attribute", "size", "device"; "ok" for
 * BP_SUPPORT_OK, "unknown" out of range. */
BP_API const char* bp_support_reason_name(uint32_t reason);
/* The plugin ABI version this library speaks (newest it offers plugins). */
BP_API void bp_abi_version(uint32_t* out_major, uint32_t* out_minor);

/* Log level: BACKPLANE_LOG=error|warn|info|debug, or this call. Lines go to
 * stderr as "backplane[<level>] <message>". */
BP_API void bp_log_set_level(int32_t level);

/* Crash report: on SIGSEGV, SIGBUS, SIGILL, SIGFPE or SIGABRT the process
 * writes one line to stderr, "backplane: <signal>: crashed inside plugin
 * <name> in slot <slot> (op <op>)" (or "not inside a plugin call"), then
 * the signal takes the action installed before (the default one unless the
 * application or a sanitizer had its own). The core notes, per thread,
 * which plugin slot it is calling; a crash on a plugin's own thread is
 * attributed by the code address. The handler only reads and write(2)s.
 * Process-wide and idempotent; the tools call it, applications opt in with
 * this call or BACKPLANE_CRASH_REPORT=1 (read at bp_context_create). Not
 * reported: a stack overflow (the handler has no stack of its own). */
BP_API bp_status_t bp_crash_report_install(void);

/* ------------------------------------------------------------------------ */
/* dtypes                                                                    */
/* ------------------------------------------------------------------------ */
/* Facts from include/backplane/dtypes.def. Any uint32_t is accepted:
 * BP_DTYPE_INVALID and unknown values give "invalid", 0 bytes, 0 bits and
 * BP_DTYPE_CATEGORY_INVALID (never NULL, never a crash). */
BP_API const char* bp_dtype_name(uint32_t dtype);     /* "f32", "float8_e4m3fn", ... */
BP_API uint32_t bp_dtype_from_name(const char* name); /* BP_DTYPE_INVALID if unknown */
BP_API size_t bp_dtype_size(uint32_t dtype);  /* bytes per element in the plain layout */
BP_API uint32_t bp_dtype_bits(uint32_t dtype); /* value width: 4 for i4, 32 for f32 */
BP_API uint32_t bp_dtype_category(uint32_t dtype); /* enum bp_dtype_category */

/* ------------------------------------------------------------------------ */
/* Context: loads plugins, owns devices.                                     */
/* ------------------------------------------------------------------------ */
enum bp_context_flags {
  /* Do not discover plugins (manifests, BACKPLANE_PLUGIN_PATH, the build
   * tree); only bp_context_register_plugin adds them. */
  BP_CONTEXT_NO_DISCOVERY = 1u << 0,
  /* Debug: synchronize the stream after every op, so that an error the
   * kernel finds while running is returned by that op's call, with the op's
   * name and id, the device and the plugin's message, instead of by a later
   * synchronize. Slow: every op waits for the device. The environment
   * variable BACKPLANE_SYNC=1 turns it on for every context. */
  BP_CONTEXT_SYNC_EACH_OP = 1u << 1
};

/* Called when a plugin reports an error outside any call (a fault found
 * while stream work ran, a lost device). `device` is NULL when a whole
 * plugin is affected. May be called from any thread, also concurrently; it
 * must return quickly and must not release the context. `message` is valid
 * during the call. */
typedef void (*bp_error_callback_t)(void* user_data, bp_device_t* device, bp_status_t status,
                                    const char* message);
/* Tracing hooks around every op dispatch, whatever the backend: begin is
 * called on the calling thread right before the op is handed to the plugin
 * (after validation), end right after the plugin's launch returns (the work
 * may still be running: pair with events for device time). Called on the
 * thread that called bp_op_run / bp_op_<name>, concurrently from several
 * threads when several threads run ops. */
typedef void (*bp_trace_begin_fn)(void* user_data, uint32_t op_id, bp_device_t* device,
                                  bp_stream_t* stream);
typedef void (*bp_trace_end_fn)(void* user_data, uint32_t op_id, bp_device_t* device,
                                bp_stream_t* stream, bp_status_t status);

typedef struct bp_context_options {
  uint32_t struct_size;
  uint32_t flags;          /* enum bp_context_flags */
  const char* plugin_path; /* extra folders (':'-separated) searched first; NULL */
  const char* select;      /* comma list of backend names to load; NULL = all
                              (BACKPLANE_PLUGINS overrides when set) */
  const char* disable;     /* comma list never to load (BACKPLANE_DISABLE) */
  bp_error_callback_t error_callback; /* NULL: errors are only logged */
  void* error_user_data;
  bp_trace_begin_fn trace_begin; /* NULL: no tracing */
  bp_trace_end_fn trace_end;
  void* trace_user_data;
  /* Longest wait for one plugin's instance_create, in milliseconds; 0: the
   * environment's BACKPLANE_INSTANCE_CREATE_TIMEOUT_MS, else no limit. A
   * plugin whose instance_create has not returned by then is recorded as
   * skipped with BP_DEADLINE_EXCEEDED; the thread running it is abandoned
   * (it stays blocked in the plugin, whose library is never unloaded).
   * Read only when struct_size covers it. */
  uint32_t instance_create_timeout_ms;
  uint32_t reserved0;
} bp_context_options_t;

/* Discovers and loads plugins. Plugins that fail to load are recorded with
 * their reason, not fatal -- unless `select` names them: then creation fails
 * with that plugin's reason. options may be NULL. */
BP_API bp_status_t bp_context_create(const bp_context_options_t* options, bp_context_t** out_context);
BP_API void bp_context_retain(bp_context_t* context);
BP_API void bp_context_release(bp_context_t* context);

/* Loads one plugin library by path (explicit registration). A plugin that
 * fails is recorded as skipped and the call returns its reason. out_plugin
 * (borrowed) may be NULL. */
BP_API bp_status_t bp_context_register_plugin(bp_context_t* context, const char* path,
                                              bp_plugin_t** out_plugin);

/* ------------------------------------------------------------------------ */
/* Plugins (borrowed; live as long as the context)                           */
/* ------------------------------------------------------------------------ */
enum bp_plugin_state { BP_PLUGIN_LOADED = 1, BP_PLUGIN_SKIPPED = 2 };

typedef struct bp_plugin_info {
  uint32_t struct_size;
  uint32_t state;        /* enum bp_plugin_state */
  const char* name;      /* backend name, or the file name when unknown */
  const char* path;      /* library path */
  const char* version;   /* plugin's version string, "" when skipped early */
  const char* vendor;
  bp_status_t reason_code; /* BP_OK when loaded */
  const char* reason;      /* why skipped; "" when loaded */
  uint32_t abi_major;      /* agreed version (0 when not negotiated) */
  uint32_t abi_minor;
  uint32_t device_count;
  uint32_t comm_tier;      /* enum bp_comm_tier */
} bp_plugin_info_t;
/* First released size of bp_plugin_info_t. Out-structs of the application
 * API follow the plugin ABI's growth rule: the caller sets struct_size to
 * its sizeof; the library accepts any size from the first released one up,
 * writes only within it (zeroing fields it does not know) and leaves
 * struct_size as the caller set it. */
#define BP_PLUGIN_INFO_V1_SIZE (offsetof(bp_plugin_info_t, comm_tier) + sizeof(uint32_t))

/* All plugins seen, loaded and skipped, in discovery order. */
BP_API uint32_t bp_context_plugin_count(const bp_context_t* context);
BP_API bp_status_t bp_context_plugin(const bp_context_t* context, uint32_t index,
                                     bp_plugin_t** out_plugin);
/* NOT_FOUND when no plugin has that name; the plugin's reason code when it
 * was skipped (so asking for a backend by name explains its absence). */
BP_API bp_status_t bp_context_find_plugin(const bp_context_t* context, const char* name,
                                          bp_plugin_t** out_plugin);
BP_API bp_status_t bp_plugin_get_info(const bp_plugin_t* plugin, bp_plugin_info_t* out_info);
/* The plugin's tables at the agreed version (for tools and tests; the type
 * is complete in backplane/plugin.h). */
BP_API const bp_plugin_vtable_t* bp_plugin_vtable(const bp_plugin_t* plugin);

/* ------------------------------------------------------------------------ */
/* Devices (borrowed; live as long as the context)                           */
/* ------------------------------------------------------------------------ */
/* Devices of all loaded plugins, plugin by plugin. */
BP_API uint32_t bp_context_device_count(const bp_context_t* context);
BP_API bp_status_t bp_context_device(const bp_context_t* context, uint32_t index,
                                     bp_device_t** out_device);
/* "cpu", "cpu:1", "vulkan:0" (backend name, optional index). */
BP_API bp_status_t bp_context_find_device(const bp_context_t* context, const char* spec,
                                          bp_device_t** out_device);
BP_API bp_status_t bp_plugin_device(const bp_plugin_t* plugin, uint32_t index,
                                    bp_device_t** out_device);
BP_API bp_plugin_t* bp_device_plugin(const bp_device_t* device);
/* "cpu:0" style name, stable for the context's life. */
BP_API const char* bp_device_name(const bp_device_t* device);
/* Cached properties (queried once at load). */
BP_API const bp_device_properties_t* bp_device_properties(const bp_device_t* device);
/* Fills up to `capacity` entries, `element_size` bytes apart (the caller's
 * sizeof(bp_memory_space_info_t)); each entry's struct_size says how much
 * was written. *out_count is the total. The index of an entry is the
 * `memory_space` bp_buffer_allocate takes; 0 is the default device-local
 * space. */
BP_API bp_status_t bp_device_memory_spaces(const bp_device_t* device, uint32_t capacity,
                                           uint32_t element_size,
                                           bp_memory_space_info_t* out_spaces,
                                           uint32_t* out_count);
/* Index of the first memory space of `kind` (enum bp_memory_kind);
 * NOT_FOUND when the device has none. */
BP_API bp_status_t bp_device_find_memory_space(const bp_device_t* device, uint32_t kind,
                                               uint32_t* out_space);

/* Support query for one op at given operand descriptors (buffers ignored).
 * Pure and cached per device. Never fails for well-formed input: an op the
 * plugin lacks answers supported=0, reason=BP_SUPPORT_OP. */
BP_API bp_status_t bp_device_query_support(const bp_device_t* device, const bp_op_call_t* call,
                                           bp_support_t* out_support);
BP_API bp_status_t bp_device_query_fusion(const bp_device_t* device, bp_fusion_caps_t* out_caps);

/* ------------------------------------------------------------------------ */
/* Buffers                                                                   */
/* ------------------------------------------------------------------------ */
/* A buffer of size_bytes bytes in memory space `memory_space` (an index
 * from bp_device_memory_spaces; 0 is the default device-local space). Size
 * 0 is valid: a zero-size buffer (no byte can be copied, mapped or addressed
 * through it), which is all an empty tensor needs. */
BP_API bp_status_t bp_buffer_allocate(bp_device_t* device, uint32_t memory_space,
                                      uint64_t size_bytes, bp_buffer_t** out_buffer);
BP_API void bp_buffer_retain(bp_buffer_t* buffer);
/* The device memory is freed once the last reference is gone and all work
 * enqueued through the core that uses the buffer has completed. */
BP_API void bp_buffer_release(bp_buffer_t* buffer);
BP_API uint64_t bp_buffer_size(const bp_buffer_t* buffer);
BP_API bp_device_t* bp_buffer_device(const bp_buffer_t* buffer);
BP_API bp_status_t bp_buffer_map(bp_buffer_t* buffer, uint64_t offset, uint64_t size,
                                 void** out_ptr);
BP_API bp_status_t bp_buffer_unmap(bp_buffer_t* buffer);
/* Wraps external memory (enum bp_external_kind says who owns what) in a
 * buffer without a copy. BP_UNIMPLEMENTED when the backend lacks it. */
BP_API bp_status_t bp_buffer_import(bp_device_t* device, const bp_external_buffer_desc_t* desc,
                                    bp_buffer_t** out_buffer);
/* Exports a buffer as `out->kind` (set by the caller with struct_size). */
BP_API bp_status_t bp_buffer_export(bp_buffer_t* buffer, bp_external_buffer_desc_t* out);

/* ------------------------------------------------------------------------ */
/* Streams and events                                                        */
/* ------------------------------------------------------------------------ */
/* `info` NULL: a compute stream of normal priority. A queue kind or flag
 * the backend cannot honour is refused with a message. */
BP_API bp_status_t bp_stream_create(bp_device_t* device, const bp_stream_create_info_t* info,
                                    bp_stream_t** out_stream);
BP_API void bp_stream_retain(bp_stream_t* stream);
BP_API void bp_stream_release(bp_stream_t* stream);
BP_API bp_device_t* bp_stream_device(const bp_stream_t* stream);
/* Blocking. Returns the first error of the enqueued work, including one
 * that a buffer's last release found while waiting for the work (kept on the
 * stream until a synchronize or query returns it, once). */
BP_API bp_status_t bp_stream_synchronize(bp_stream_t* stream);
/* BP_OK idle, BP_NOT_READY busy, else the error. */
BP_API bp_status_t bp_stream_query(bp_stream_t* stream);
/* bp_stream_synchronize that gives up after `timeout_ns` nanoseconds with
 * BP_DEADLINE_EXCEEDED; the work stays enqueued and valid (query, wait or
 * synchronize again later). Polls the plugin's stream_query, sleeping up to
 * 1 ms between polls. Releasing a stream (or the last buffer it used)
 * still waits for its work, however long that takes. */
BP_API bp_status_t bp_stream_synchronize_timeout(bp_stream_t* stream, uint64_t timeout_ns);

/* `info` NULL: no timing, not exportable. */
BP_API bp_status_t bp_event_create(bp_device_t* device, const bp_event_create_info_t* info,
                                   bp_event_t** out_event);
BP_API void bp_event_retain(bp_event_t* event);
BP_API void bp_event_release(bp_event_t* event);
BP_API bp_status_t bp_event_record(bp_event_t* event, bp_stream_t* stream);
/* Later work on `stream` waits for `event`. Works across devices and
 * plugins: same plugin uses the plugin's wait; otherwise the core enqueues a
 * host function on `stream` that waits for the event. */
BP_API bp_status_t bp_stream_wait_event(bp_stream_t* stream, bp_event_t* event);
BP_API bp_status_t bp_event_query(bp_event_t* event);
BP_API bp_status_t bp_event_synchronize(bp_event_t* event);
/* bp_event_synchronize that gives up after `timeout_ns` nanoseconds with
 * BP_DEADLINE_EXCEEDED; the event stays pending and valid. */
BP_API bp_status_t bp_event_wait_timeout(bp_event_t* event, uint64_t timeout_ns);
BP_API bp_status_t bp_event_elapsed_ns(bp_event_t* start, bp_event_t* end, uint64_t* out_ns);
/* Events shared with other processes or runtimes (semaphores, sync fds);
 * BP_UNIMPLEMENTED when the backend lacks them. Export needs an event
 * created with BP_EVENT_EXPORTABLE. */
BP_API bp_status_t bp_event_import(bp_device_t* device, const bp_external_event_desc_t* desc,
                                   bp_event_t** out_event);
BP_API bp_status_t bp_event_export(bp_event_t* event, bp_external_event_desc_t* out);

/* ------------------------------------------------------------------------ */
/* Copies                                                                    */
/* ------------------------------------------------------------------------ */
/* Stream-ordered; `src` must stay valid until the stream passes the copy. */
BP_API bp_status_t bp_copy_host_to_buffer(bp_stream_t* stream, const void* src, bp_buffer_t* dst,
                                          uint64_t dst_offset, uint64_t size);
BP_API bp_status_t bp_copy_buffer_to_host(bp_stream_t* stream, bp_buffer_t* src,
                                          uint64_t src_offset, void* dst, uint64_t size);
/* Any two buffers. Same device: stream-ordered on `stream`. Two devices of
 * one plugin: the plugin's peer copy when it has one. Otherwise staged
 * through host memory; then the call blocks until the copy is done. `stream`
 * must belong to the source or the destination device. */
BP_API bp_status_t bp_copy_buffer(bp_stream_t* stream, bp_buffer_t* src, uint64_t src_offset,
                                  bp_buffer_t* dst, uint64_t dst_offset, uint64_t size);

/* ------------------------------------------------------------------------ */
/* Tensors: a buffer reference plus a descriptor. Views share the buffer.    */
/* ------------------------------------------------------------------------ */
/* New dense row-major tensor in a fresh device buffer (contents undefined). */
BP_API bp_status_t bp_tensor_create(bp_device_t* device, uint32_t dtype, uint32_t rank,
                                    const int64_t* sizes, bp_tensor_t** out_tensor);
/* Fresh buffer just large enough for the given strides (>= 0). */
BP_API bp_status_t bp_tensor_create_strided(bp_device_t* device, uint32_t dtype, uint32_t rank,
                                            const int64_t* sizes, const int64_t* strides,
                                            bp_tensor_t** out_tensor);
/* A tensor over an existing buffer; strides NULL = dense. Fails with
 * OUT_OF_RANGE if any element would lie outside the buffer. */
BP_API bp_status_t bp_tensor_from_buffer(bp_buffer_t* buffer, uint32_t dtype, uint32_t rank,
                                         const int64_t* sizes, const int64_t* strides,
                                         uint64_t byte_offset, bp_tensor_t** out_tensor);
BP_API void bp_tensor_retain(bp_tensor_t* tensor);
BP_API void bp_tensor_release(bp_tensor_t* tensor);

BP_API uint32_t bp_tensor_dtype(const bp_tensor_t* t);
BP_API uint32_t bp_tensor_rank(const bp_tensor_t* t);
BP_API const int64_t* bp_tensor_sizes(const bp_tensor_t* t);   /* rank entries */
BP_API const int64_t* bp_tensor_strides(const bp_tensor_t* t); /* elements */
BP_API int64_t bp_tensor_numel(const bp_tensor_t* t);
/* Offset of element [0,...,0] from the start of the buffer, in bytes. */
BP_API uint64_t bp_tensor_byte_offset(const bp_tensor_t* t);
BP_API int bp_tensor_is_contiguous(const bp_tensor_t* t);
BP_API bp_buffer_t* bp_tensor_buffer(const bp_tensor_t* t); /* borrowed */
BP_API bp_device_t* bp_tensor_device(const bp_tensor_t* t);
/* The plugin-facing descriptor of the tensor, written within
 * out_desc->struct_size (set by the caller, >= BP_TENSOR_DESC_V1_SIZE; the
 * growth rule of bp_plugin_info_t). */
BP_API bp_status_t bp_tensor_get_desc(const bp_tensor_t* t, bp_tensor_desc_t* out_desc);

/* Views: new tensor objects over the same buffer (out_ owns a reference). */
BP_API bp_status_t bp_tensor_alias(bp_tensor_t* t, bp_tensor_t** out);
/* storage_offset_elems: where element [0,...,0] lies, in elements from the
 * start of t's buffer (PyTorch's storage_offset); NULL keeps t's offset. */
BP_API bp_status_t bp_tensor_as_strided(bp_tensor_t* t, uint32_t rank, const int64_t* sizes,
                                        const int64_t* strides,
                                        const int64_t* storage_offset_elems, bp_tensor_t** out);
BP_API bp_status_t bp_tensor_permute(bp_tensor_t* t, const int64_t* dims, bp_tensor_t** out);
BP_API bp_status_t bp_tensor_slice(bp_tensor_t* t, int64_t dim, int64_t start, int64_t end,
                                   int64_t step, bp_tensor_t** out); /* Python slicing rules */
BP_API bp_status_t bp_tensor_select(bp_tensor_t* t, int64_t dim, int64_t index, bp_tensor_t** out);
BP_API bp_status_t bp_tensor_expand(bp_tensor_t* t, uint32_t rank, const int64_t* sizes,
                                    bp_tensor_t** out); /* -1 keeps a size */
BP_API bp_status_t bp_tensor_view(bp_tensor_t* t, uint32_t rank, const int64_t* sizes,
                                  bp_tensor_t** out); /* one -1 inferred; needs compatible strides */
BP_API bp_status_t bp_tensor_squeeze(bp_tensor_t* t, int64_t dim, bp_tensor_t** out);
/* aten.squeeze.dims: drops each listed dim whose size is 1 (others stay);
 * dims wrap, may not repeat; num_dims 0 gives an alias. */
BP_API bp_status_t bp_tensor_squeeze_dims(bp_tensor_t* t, uint32_t num_dims, const int64_t* dims,
                                          bp_tensor_t** out);
BP_API bp_status_t bp_tensor_unsqueeze(bp_tensor_t* t, int64_t dim, bp_tensor_t** out);
BP_API bp_status_t bp_tensor_diagonal(bp_tensor_t* t, int64_t offset, int64_t dim1, int64_t dim2,
                                      bp_tensor_t** out);

/* Metadata with PyTorch's rules (aten.sym_size.int, aten.sym_stride.int,
 * aten.sym_storage_offset): dim wraps (-1 is the last dim); a stride is in
 * elements; the storage offset is in elements from the start of the buffer
 * (bp_tensor_byte_offset / dtype size). */
BP_API bp_status_t bp_tensor_size(const bp_tensor_t* t, int64_t dim, int64_t* out_size);
BP_API bp_status_t bp_tensor_stride(const bp_tensor_t* t, int64_t dim, int64_t* out_stride);
BP_API bp_status_t bp_tensor_storage_offset(const bp_tensor_t* t, int64_t* out_elems);

/* aten.resize_: gives t (in place) the dense row-major shape `sizes`,
 * keeping its storage offset. When the buffer is too small for it, the
 * buffer grows as PyTorch's storage does: only for a tensor the core
 * allocated (bp_tensor_create*, an op's output) whose buffer nothing else
 * references (no views, no other buffer reference): a new buffer of the
 * needed size is allocated, the old bytes are copied into it on `stream`
 * (stream-ordered; the rest is uninitialized) and t moves to it. Otherwise
 * FAILED_PRECONDITION. The one call that changes a tensor: t is externally
 * synchronized (no other thread may use it during the call). `stream` may be
 * NULL when the buffer need not grow. */
BP_API bp_status_t bp_tensor_resize(bp_stream_t* stream, bp_tensor_t* t, uint32_t rank,
                                    const int64_t* sizes);

/* aten._local_scalar_dense (.item()): blocking read of a tensor with
 * exactly one element (any rank) into a scalar: floating dtypes as
 * BP_SCALAR_FLOAT (exactly, in double), integers as BP_SCALAR_INT, bool as
 * BP_SCALAR_BOOL; c64 has no scalar kind (INVALID_ARGUMENT). Synchronizes
 * `stream` first, so the value is the one after all enqueued work. */
BP_API bp_status_t bp_tensor_item(bp_stream_t* stream, const bp_tensor_t* t,
                                  bp_scalar_t* out_value);

/* Blocking helpers: write host data (dense, row-major, the tensor's dtype,
 * `size` bytes == numel * dtype size) into the tensor honouring its strides,
 * and read the tensor into dense host memory. Both synchronize `stream`. */
BP_API bp_status_t bp_tensor_write(bp_stream_t* stream, bp_tensor_t* t, const void* src,
                                   uint64_t size);
BP_API bp_status_t bp_tensor_read(bp_stream_t* stream, const bp_tensor_t* t, void* dst,
                                  uint64_t size);

/* DLPack hand-over without a copy. The DLManagedTensor (dlpack.h, the
 * unversioned struct of DLPack 0.6 to 0.8) travels as void*, so this header
 * needs no dlpack.h.
 * Import: a tensor over the producer's memory with its dtype, sizes and
 * strides. On success the tensor's buffer owns `dl_managed_tensor` and calls
 * its deleter exactly once, when the buffer is freed; on failure the caller
 * still owns it. The device's backend must reach the memory (the CPU backend
 * takes kDLCPU). What a tensor cannot represent (lanes != 1, negative
 * strides, sub-byte dtypes, an element start misaligned for its dtype) is
 * INVALID_ARGUMENT naming the field.
 * Export: a new DLManagedTensor* viewing t (dtype, sizes, strides,
 * byte_offset) that the caller owns; it holds a reference on t's buffer
 * that its deleter (call it exactly once) drops. UNIMPLEMENTED when the
 * backend's memory has no DLPack form. */
BP_API bp_status_t bp_tensor_from_dlpack(bp_device_t* device, void* dl_managed_tensor,
                                         bp_tensor_t** out_tensor);
BP_API bp_status_t bp_tensor_to_dlpack(bp_tensor_t* t, void** out_dl_managed_tensor);

/* ------------------------------------------------------------------------ */
/* Operators                                                                 */
/* ------------------------------------------------------------------------ */
typedef struct bp_op_info {
  uint32_t struct_size;
  uint32_t op_id;
  const char* name;       /* "add" */
  const char* category;   /* "BINARY" */
  const char* aten;       /* "aten.add.Tensor aten.add.Scalar" */
  const char* rule;       /* shape/dtype rule name */
  uint32_t num_fixed_inputs_before; /* fixed tensors before the list (or all) */
  uint32_t has_list;      /* one tensor-list operand */
  uint32_t num_fixed_inputs_after;  /* fixed tensors after the list */
  uint32_t num_outputs;
  uint32_t attrs_size;    /* sizeof the attribute struct (0 when none) */
  uint32_t optional_mask; /* bit i: fixed input i may be NULL (opt_ names) */
  const char* const* input_names;  /* fixed inputs, then the list's name */
  const char* const* output_names;
} bp_op_info_t;
/* First released size of bp_op_info_t (growth rule: see bp_plugin_info_t). */
#define BP_OP_INFO_V1_SIZE (offsetof(bp_op_info_t, output_names) + sizeof(const char* const*))

BP_API bp_status_t bp_op_get_info(uint32_t op_id, bp_op_info_t* out_info);

/* The Core ATen overloads served by core functions instead of a plugin entry
 * point (views, metadata queries, allocation): ops.def's BP_VIEW table. */
typedef struct bp_view_info {
  uint32_t struct_size;
  uint32_t index;
  const char* name;     /* "squeeze_dims" */
  const char* aten;     /* "aten.squeeze.dims" (space-separated overloads) */
  const char* function; /* "bp_tensor_squeeze_dims": the public function */
  const char* note;     /* how it maps, one line */
} bp_view_info_t;
/* First released size of bp_view_info_t (growth rule: see bp_plugin_info_t). */
#define BP_VIEW_INFO_V1_SIZE (offsetof(bp_view_info_t, note) + sizeof(const char*))
/* Indices of the view table (bp_view_get_info), in ops.def's order. */
enum bp_view_id {
#define BP_OP(...)
#define BP_VIEW(name, aten, function, note) BP_VIEW_##name,
#include "backplane/ops.def"
#undef BP_VIEW
#undef BP_OP
  BP_VIEW_COUNT_
};
/* The descriptor view `view` (BP_VIEW_alias, permute, slice, select,
 * squeeze, squeeze_dims, unsqueeze, view, expand) gives over a tensor
 * described by `input`, by the view function's own rules, without a
 * tensor (a graph compiler's inference). args are the function's integer
 * arguments in order: permute: the dims (input rank entries); slice: dim,
 * start, end, step; select: dim, index; squeeze, unsqueeze: dim; view,
 * expand: the sizes, squeeze_dims: the dims (num_args entries each).
 * out_desc->struct_size is set by the caller; its sizes, strides and
 * byte_offset are written. UNIMPLEMENTED for another view. */
BP_API bp_status_t bp_view_infer_desc(uint32_t view, const bp_tensor_desc_t* input,
                                      const int64_t* args, uint32_t num_args,
                                      bp_tensor_desc_t* out_desc);
BP_API uint32_t bp_view_count(void);
/* OUT_OF_RANGE for index >= bp_view_count(). Strings are static. */
BP_API bp_status_t bp_view_get_info(uint32_t index, bp_view_info_t* out_info);
BP_API uint32_t bp_op_from_name(const char* name); /* BP_OP_INVALID if unknown */

/* Shape and dtype inference without running: fills each *out_outputs[k]
 * (dtype, rank, sizes, dense strides; buffer NULL). `inputs` is the flat
 * operand list (a list operand expanded in place; NULL for an absent
 * optional). out_outputs is an array of num_outputs pointers, each to a
 * descriptor whose struct_size the caller set (>= BP_TENSOR_DESC_V1_SIZE):
 * the library writes only within it, so descriptors of any header version
 * work. A descriptor that already holds a valid dtype is a request for
 * creation ops (their dtype and shape); leave it zeroed otherwise. */
BP_API bp_status_t bp_op_infer(uint32_t op_id, const bp_tensor_t* const* inputs,
                               uint32_t num_inputs, const void* attrs,
                               bp_tensor_desc_t* const* out_outputs, uint32_t num_outputs);

/* bp_op_infer over plain descriptors instead of tensors (no device needed:
 * the graph compiler infers whole graphs with it). inputs[i] NULL, or a
 * descriptor whose dtype is BP_DTYPE_INVALID, is an absent optional
 * operand; sizes, strides and byte_offset are read as given, buffer and
 * quant are ignored. Same rules and messages as bp_op_infer. */
BP_API bp_status_t bp_op_infer_desc(uint32_t op_id, const bp_tensor_desc_t* const* inputs,
                                    uint32_t num_inputs, const void* attrs,
                                    bp_tensor_desc_t* const* out_outputs, uint32_t num_outputs);

/* Runs one op on `stream`'s device, generic form. Before dispatch it asks
 * the device: BP_UNIMPLEMENTED when the backend has no kernel for the op,
 * BP_UNSUPPORTED when its support query says no for this case; both name
 * the reason in the message and in bp_status_support_reason(). `inputs` as for
 * bp_op_infer. outputs[k] == NULL: the core allocates a dense tensor and
 * stores a new reference there; otherwise outputs[k] is written in place
 * (shape and dtype must match the inferred ones). Validates everything
 * (operand count, dtypes, shapes, broadcasting, strides inside buffers,
 * overlapping outputs, device placement, attribute values) and checks the
 * device's support before dispatch. Stream-ordered. */
BP_API bp_status_t bp_op_run(bp_stream_t* stream, uint32_t op_id, const bp_tensor_t* const* inputs,
                             uint32_t num_inputs, const void* attrs, bp_tensor_t** outputs,
                             uint32_t num_outputs);

/* Typed functions, one per op, generated from ops.def:
 *   bp_status_t bp_op_<name>(bp_stream_t* stream, <inputs>, const <attrs>* attrs,
 *                            bp_tensor_t** <output>...);
 * Inputs are `const bp_tensor_t*` (opt_ ones may be NULL); a list operand is
 * `const bp_tensor_t* const* <name>, uint32_t <name>_count`. Output
 * pointers follow bp_op_run's rule (*out == NULL: allocated for you). */
#define BP__SIG_P(...) BP__SIG_P_(__VA_ARGS__)
#define BP__SIG_P_(kind, ...) BP__SIG_P_##kind(__VA_ARGS__)
#define BP__SIG_P_IN0_(x)
#define BP__SIG_P_IN1_(a) const bp_tensor_t* a,
#define BP__SIG_P_IN2_(a, b) const bp_tensor_t* a, const bp_tensor_t* b,
#define BP__SIG_P_IN3_(a, b, c) const bp_tensor_t* a, const bp_tensor_t* b, const bp_tensor_t* c,
#define BP__SIG_P_IN4_(a, b, c, d) BP__SIG_P_IN3_(a, b, c) const bp_tensor_t* d,
#define BP__SIG_P_IN5_(a, b, c, d, e) BP__SIG_P_IN4_(a, b, c, d) const bp_tensor_t* e,
#define BP__SIG_P_IN6_(a, b, c, d, e, f) BP__SIG_P_IN5_(a, b, c, d, e) const bp_tensor_t* f,
#define BP__SIG_P_INV_(l) const bp_tensor_t* const* l, uint32_t l##_count,
#define BP__SIG_P_IN1V_(a, l) const bp_tensor_t* a, BP__SIG_P_INV_(l)
#define BP__SIG_P_IN1V1_(a, l, b) BP__SIG_P_IN1V_(a, l) const bp_tensor_t* b,
#define BP__SIG_P_OUT1_(a) bp_tensor_t** a
#define BP__SIG_P_OUT2_(a, b) bp_tensor_t** a, bp_tensor_t** b
#define BP__SIG_P_OUT3_(a, b, c) BP__SIG_P_OUT2_(a, b), bp_tensor_t** c
#define BP__SIG_P_OUT4_(a, b, c, d) BP__SIG_P_OUT3_(a, b, c), bp_tensor_t** d

/* Operand-list markers used by ops.def; expanded by the BP__* helpers. */
#define BP_IN0() IN0_, _
#define BP_IN1(a) IN1_, a
#define BP_IN2(a, b) IN2_, a, b
#define BP_IN3(a, b, c) IN3_, a, b, c
#define BP_IN4(a, b, c, d) IN4_, a, b, c, d
#define BP_IN5(a, b, c, d, e) IN5_, a, b, c, d, e
#define BP_IN6(a, b, c, d, e, f) IN6_, a, b, c, d, e, f
#define BP_INV(l) INV_, l
#define BP_IN1V(a, l) IN1V_, a, l
#define BP_IN1V1(a, l, b) IN1V1_, a, l, b
#define BP_OUT1(a) OUT1_, a
#define BP_OUT2(a, b) OUT2_, a, b
#define BP_OUT3(a, b, c) OUT3_, a, b, c
#define BP_OUT4(a, b, c, d) OUT4_, a, b, c, d

#define BP_OP(id, name, cat, fam, ins, outs, attrs_t, rule, aten)                 \
  BP_API bp_status_t bp_op_##name(bp_stream_t* stream, BP__SIG_P(ins) const attrs_t* attrs, \
                                  BP__SIG_P(outs));
#include "backplane/ops.def"
#undef BP_OP

/* aten.pow.Scalar: self ** exponent with a scalar base, stated explicitly
 * (the generic form is bp_op_pow with a NULL self and
 * BP_BINARY_SELF_IS_SCALAR). The scalar promotes as a PyTorch wrapped
 * number; *out follows bp_op_run's rule. */
BP_API bp_status_t bp_op_pow_scalar(bp_stream_t* stream, const bp_scalar_t* self,
                                    const bp_tensor_t* exponent, bp_tensor_t** out);

#ifdef __cplusplus
}
#endif
/* Compiled regions, elementwise programs, cost estimates. */
#include "backplane/region.h"
#endif /* BACKPLANE_BACKPLANE_H_ */
