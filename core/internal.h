/* backplane core: internal object layouts and helpers shared by core/.
 *
 * Not installed. Names with the bp__ prefix are internal to libbackplane
 * (hidden visibility).
 */
#ifndef BACKPLANE_CORE_INTERNAL_H_
#define BACKPLANE_CORE_INTERNAL_H_

#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>

#include "backplane/backplane.h"
#include "backplane/plugin.h"

#define BP__HIDDEN __attribute__((visibility("hidden")))

/* ------------------------------------------------------------------------ */
/* Errors and logging (core/runtime/status.c, core/runtime/log.c)            */
/* ------------------------------------------------------------------------ */
/* Sets the calling thread's message and returns `status`. */
BP__HIDDEN bp_status_t bp__error(bp_status_t status, const char* fmt, ...)
    __attribute__((format(printf, 2, 3)));
/* Returns BP_INVALID_ARGUMENT from the enclosing function, with the message
 * "<fn>: argument '<arg>' is NULL", when the pointer `arg` is NULL. Checks
 * one argument, so the message names exactly the one that was NULL. Use it
 * only where nothing needs releasing yet: it returns at once. */
#define BP__REQUIRE_ARG(fn, arg)                                                      \
  do {                                                                                \
    if (!(arg))                                                                       \
      return bp__error(BP_INVALID_ARGUMENT, "%s: argument '%s' is NULL", (fn), #arg); \
  } while (0)
/* After a plugin call failed: keeps the plugin's reported message (or a
 * generic one when it reported none), prefixed with "<plugin>: <what>: ". */
BP__HIDDEN bp_status_t bp__plugin_error(const bp_plugin_t* plugin, bp_status_t status,
                                        const char* what);
/* Clears the calling thread's message (called at the start of API calls
 * that go into a plugin, so a stale report is never attributed). */
BP__HIDDEN void bp__clear_error(void);
/* Records why an op was refused (enum bp_support_reason) for
 * bp_status_support_reason(); call right after the bp__error that returns
 * BP_UNSUPPORTED (or UNIMPLEMENTED for a missing kernel). */
BP__HIDDEN void bp__set_support_reason(uint32_t reason);
/* The host services table handed to every plugin. */
BP__HIDDEN const bp_host_services_t* bp__host_services(void);
/* Copies the library's out-struct `src` (src_size bytes, starting with its
 * uint32_t struct_size) into the caller's `dst`, whose struct_size (left
 * unchanged) says how many bytes the caller owns: writes only within them
 * and zeroes the caller's bytes past src_size. INVALID_ARGUMENT, naming `fn`
 * and `type`, when the caller's size is below first_size (the first
 * released size of the struct) or above 4096 (not a struct size: an
 * uninitialized struct_size). core/runtime/out_struct.c */
BP__HIDDEN bp_status_t bp__out_struct_write(const char* fn, const char* type, void* dst,
                                            const void* src, size_t src_size, size_t first_size);

BP__HIDDEN void bp__log(int32_t level, const char* fmt, ...) __attribute__((format(printf, 2, 3)));
BP__HIDDEN int bp__log_enabled(int32_t level);

/* Copies untrusted text (from a plugin: names, versions, reports, log lines;
 * or from a manifest or the environment) into `out` of `size` bytes for a
 * message or log line: bytes outside printable ASCII (control characters,
 * escape sequences, CR/LF, DEL, every byte of non-ASCII or invalid UTF-8)
 * become \xNN, and text that does not fit ends with "...". Returns `out`.
 * NULL becomes "(null)". (core/runtime/text.c) */
BP__HIDDEN const char* bp__text_clean(const char* text, char* out, size_t size);
/* bp__text_clean of a fixed char array a plugin filled (device properties,
 * support messages), in place; also terminates it. */
BP__HIDDEN void bp__text_clean_array(char* text, size_t size);

/* Environment variables (core/runtime/env.c). 0 or 1; unset or empty gives
 * `dflt`; anything else gives `dflt` and one warning that names the variable,
 * the value and `meaning_of_default` (what is done instead). */
BP__HIDDEN int bp__env_flag(const char* name, int dflt, const char* meaning_of_default);

/* ------------------------------------------------------------------------ */
/* Plugin call notes (core/runtime/crash.c)                                  */
/* ------------------------------------------------------------------------ */
/* The plugin call the calling thread is inside, for the crash report: set
 * around every call into a plugin (three stores and three loads, no
 * function call), read by the signal handler of bp_crash_report_install.
 * Strings are borrowed: the plugin's name (lives as long as the plugin), a
 * literal slot name, the op's name or NULL. Initial-exec TLS, so a signal
 * handler reads it without a call into the dynamic linker. */
typedef struct bp__call_note {
  const char* plugin;
  const char* slot;
  const char* op;
} bp__call_note_t;
BP__HIDDEN extern __thread bp__call_note_t bp__call_note __attribute__((tls_model("initial-exec")));

/* BP__NOTE_CALL(plugin, slot, op, expr): evaluates `expr` (a call into the
 * plugin returning a value) with the note set, restores the previous note
 * (calls nest: a host function may call into another plugin), yields the
 * value. BP__NOTE_CALL_VOID for calls returning void. */
#define BP__NOTE_CALL(plugin_, slot_, op_, expr_)                              \
  __extension__({                                                             \
    bp__call_note_t bp__prev_note_ = bp__call_note;                           \
    bp__call_note = (bp__call_note_t){(plugin_)->name, (slot_), (op_)};       \
    __typeof__(expr_) bp__note_result_ = (expr_);                             \
    bp__call_note = bp__prev_note_;                                           \
    bp__note_result_;                                                         \
  })
#define BP__NOTE_CALL_VOID(plugin_, slot_, expr_)                             \
  do {                                                                        \
    bp__call_note_t bp__prev_note_ = bp__call_note;                           \
    bp__call_note = (bp__call_note_t){(plugin_)->name, (slot_), NULL};        \
    (expr_);                                                                  \
    bp__call_note = bp__prev_note_;                                           \
  } while (0)
/* Calls core-table slot `slot` of `plugin` with the note set. */
#define BP__CORE_CALL(plugin_, slot_, ...) \
  BP__NOTE_CALL(plugin_, #slot_, NULL, (plugin_)->core.slot_(__VA_ARGS__))
#define BP__CORE_CALL_VOID(plugin_, slot_, ...) \
  BP__NOTE_CALL_VOID(plugin_, #slot_, (plugin_)->core.slot_(__VA_ARGS__))
/* Remembers the code range of a plugin library just loaded, so a crash on a
 * thread of the plugin's own (no call note) is still attributed; forgets it
 * before dlclose. */
BP__HIDDEN void bp__crash_note_library(const bp_plugin_t* plugin, void* library);
BP__HIDDEN void bp__crash_forget_library(const bp_plugin_t* plugin);
/* Installs the crash report when BACKPLANE_CRASH_REPORT=1 (context creation). */
BP__HIDDEN void bp__crash_report_from_env(void);

/* ------------------------------------------------------------------------ */
/* Objects                                                                   */
/* ------------------------------------------------------------------------ */
struct bp_plugin {
  bp_context_t* context; /* owner (not retained) */
  char* name;
  char* path;
  char* version;
  char* vendor;
  uint32_t state;          /* enum bp_plugin_state */
  bp_status_t reason_code;
  char* reason;
  void* library;           /* dlopen handle, NULL when skipped before load */
  uint32_t abi_major, abi_minor; /* agreed */
  /* Tables copied from the plugin, zero-extended to this header's size, so
   * a slot the plugin's (older, smaller) table lacks reads as NULL. */
  bpp_core_table_t core;
  bpp_op_table_t ops;
  bpp_caps_table_t caps;
  bpp_exec_table_t exec;
  bpp_comm_table_t comm;
  int has_caps, has_exec, has_comm;
  bp_plugin_vtable_t vtable; /* points at the copies above */
  /* The services handed to this plugin: the core's, with host_ctx = this
   * plugin (async_error finds the device and context through it). */
  bp_host_services_t host;
  bpp_instance_t instance;
  uint32_t device_count;
  bp_device_t** devices;
  int abandoned; /* instance_create timed out and still runs: never dlclose */
};

struct bp_device {
  bp_plugin_t* plugin;     /* owner */
  uint32_t index;          /* within the plugin */
  bpp_device_t handle;
  char name[BP_MAX_NAME];  /* "<plugin>:<index>" */
  bp_device_properties_t props;
  uint32_t num_spaces;
  bp_memory_space_info_t spaces[BP_MEMORY_KIND_COUNT_ * 2];
};

struct bp_context {
  atomic_int refcount;
  pthread_mutex_t lock; /* guards plugin/device arrays during registration */
  uint32_t plugin_count, plugin_capacity;
  bp_plugin_t** plugins;
  uint32_t device_count, device_capacity;
  bp_device_t** devices;
  /* Application hooks (bp_context_options_t); fixed after creation. */
  bp_error_callback_t error_callback;
  void* error_user_data;
  bp_trace_begin_fn trace_begin;
  bp_trace_end_fn trace_end;
  void* trace_user_data;
  uint32_t instance_create_timeout_ms; /* 0: no bound (loader/instance_create.c) */
  int sync_each_op; /* BP_CONTEXT_SYNC_EACH_OP or BACKPLANE_SYNC=1; fixed at creation */
};

struct bp_buffer {
  atomic_int refcount;
  bp_device_t* device;
  bpp_buffer_t handle;
  uint64_t size;
  uint32_t memory_space; /* index in the device's spaces */
  /* Streams that used the buffer since allocation; the final release waits
   * for them before freeing (guarded by `lock`). */
  pthread_mutex_t lock;
  uint32_t num_users;
  bp_stream_t* users[8];
};

struct bp_stream {
  atomic_int refcount;
  bp_device_t* device;
  bpp_stream_t handle;
  uint32_t queue; /* enum bp_queue_kind */
  /* The first error a plugin reported to a synchronize the core made on
   * the application's behalf (a buffer's last release, a drain after a
   * failed transfer): kept until the stream's next synchronize or query
   * returns it, once, so releasing operands early loses no kernel error.
   * Guarded by kept_lock: releases run on any thread. */
  pthread_mutex_t kept_lock;
  bp_status_t kept_status;
  char kept_message[512];
};

struct bp_event {
  atomic_int refcount;
  bp_device_t* device;
  bpp_event_t handle;
  uint32_t flags;
  atomic_int recorded;
};

struct bp_tensor {
  atomic_int refcount;
  bp_buffer_t* buffer; /* retained */
  uint32_t dtype;
  uint32_t rank;
  int64_t sizes[BP_MAX_RANK];
  int64_t strides[BP_MAX_RANK];
  uint64_t byte_offset;
  /* The core allocated the buffer for this tensor (bp_tensor_create*, op
   * outputs), so bp_tensor_resize may replace it when it must grow. */
  int core_allocated;
};

/* ------------------------------------------------------------------------ */
/* Cross-file helpers                                                        */
/* ------------------------------------------------------------------------ */
/* Records that `stream` uses `buffer` (core/runtime/buffer.c). */
BP__HIDDEN void bp__buffer_note_use(bp_buffer_t* buffer, bp_stream_t* stream);
/* After a blocking helper failed while stream work may still use host memory
 * it is about to free or return: waits until the stream is idle (retrying a
 * synchronize that reports a sticky error), keeping the thread's message.
 * 1 when drained; 0 when not, and then the memory must not be freed. */
BP__HIDDEN int bp__stream_drain(bp_stream_t* stream);
/* Synchronizes `stream` for the core itself (`why` says for what, in the
 * kept message); an error is kept for the application (struct bp_stream).
 * Returns the plugin's status. Leaves the thread's status message alone. */
BP__HIDDEN bp_status_t bp__stream_sync_for_core(bp_stream_t* stream, const char* why);
/* `status`, unless an error is kept on `stream`: then that one, with its
 * message set, and `status` (when it is an error, with the message already
 * set) is kept in its place for the next call. */
BP__HIDDEN bp_status_t bp__stream_take_kept(bp_stream_t* stream, bp_status_t status);
/* Keeps `status` and `message` on `stream` (unless an error is kept
 * already) for its next synchronize or query: how work the core runs in a
 * host function on another plugin's stream reports its error. Any thread. */
BP__HIDDEN void bp__stream_keep_error(bp_stream_t* stream, bp_status_t status,
                                      const char* message);
/* Asks the plugin to import `desc` (kind-specific checks done) and wraps
 * the handle; the memory space is checked here. */
BP__HIDDEN bp_status_t bp__buffer_import_checked(bp_device_t* device,
                                                 const bp_external_buffer_desc_t* desc,
                                                 const char* api, bp_buffer_t** out_buffer);
/* The DLPACK kind of bp_buffer_import / bp_buffer_export (runtime/dlpack.c). */
BP__HIDDEN bp_status_t bp__buffer_import_dlpack(bp_device_t* device,
                                                const bp_external_buffer_desc_t* desc,
                                                bp_buffer_t** out_buffer);
BP__HIDDEN bp_status_t bp__buffer_export_dlpack(bp_buffer_t* buffer,
                                                bp_external_buffer_desc_t* out);
/* Checked arithmetic (core/runtime/arith.c): nonzero on overflow. */
BP__HIDDEN int bp__mul_overflow_i64(int64_t a, int64_t b, int64_t* out);
BP__HIDDEN int bp__add_overflow_i64(int64_t a, int64_t b, int64_t* out);
BP__HIDDEN int bp__add_overflow_u64(uint64_t a, uint64_t b, uint64_t* out);
/* Product of `rank` sizes (each >= 0); nonzero on overflow. 1 for rank 0;
 * 0 when any size is 0, even if the others would overflow. */
BP__HIDDEN int bp__numel(uint32_t rank, const int64_t* sizes, int64_t* out);
/* numel elements of `dtype` in bytes, fitting in int64; nonzero on overflow,
 * a negative count or an invalid dtype. */
BP__HIDDEN int bp__nbytes(uint32_t dtype, int64_t numel, uint64_t* out);
/* Nonzero when [offset, offset + size) does not fit in [0, total) (overflow
 * included). */
BP__HIDDEN int bp__range_outside(uint64_t offset, uint64_t size, uint64_t total);
/* Byte span [lo, hi) touched by a tensor descriptor; nonzero on overflow. An
 * empty tensor touches nothing (lo == hi). */
BP__HIDDEN int bp__tensor_span(uint32_t dtype, uint32_t rank, const int64_t* sizes,
                               const int64_t* strides, uint64_t byte_offset, uint64_t* out_lo,
                               uint64_t* out_hi);

#endif /* BACKPLANE_CORE_INTERNAL_H_ */
