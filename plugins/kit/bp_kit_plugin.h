/* backplane plugin kit: negotiation, errors, logging, support answers and
 * bounded copy-out into caller-sized structs.
 *
 * Part of the installed plugin kit (backplane::plugin_kit, headers under
 * include/backplane/kit/). Not part of the ABI: a static library linked
 * into each plugin, so every plugin has its own copy of the state below
 * (the host services pointer, the negotiated minor, the per-thread error
 * slot).
 */
#ifndef BACKPLANE_KIT_PLUGIN_H_
#define BACKPLANE_KIT_PLUGIN_H_

#include <stddef.h>
#include <stdint.h>

#include "backplane/plugin.h"
#include "bp_plugin_common.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ------------------------------------------------------------------------ */
/* Negotiation                                                               */
/* ------------------------------------------------------------------------ */
/* What a plugin answers in negotiation. Strings and the vtable are static. */
typedef struct bp_kit_plugin_info {
  const char* name;    /* backend name, [a-z0-9_] */
  const char* version; /* plugin version string */
  const char* vendor;
  /* Returns the root table; called once per negotiation (may finish lazy
   * table setup, e.g. fill launch slots under pthread_once). */
  const bp_plugin_vtable_t* (*get_vtable)(void);
} bp_kit_plugin_info_t;

/* Checks the request and reply sizes, keeps the host services (used by
 * bp_kit_error and bp_kit_log), refuses another major with
 * FAILED_PRECONDITION (reported through the host), and answers
 * minor = min(host's, plugin's). Thread-compatible: the host calls
 * negotiation once per library load. */
bp_status_t bp_kit_negotiate(const bp_kit_plugin_info_t* info, const bp_negotiate_request_t* request,
                             bp_negotiate_reply_t* reply);

/* Defines the plugin's one exported symbol, bp_plugin_negotiate, answering
 * with `info` (a const bp_kit_plugin_info_t*). Use once per plugin. */
#define BP_KIT_PLUGIN_ENTRY(info)                                                     \
  BP_PLUGIN_EXPORT bp_status_t bp_plugin_negotiate(const bp_negotiate_request_t* req, \
                                                   bp_negotiate_reply_t* reply) {     \
    return bp_kit_negotiate((info), req, reply);                                      \
  }

/* The host services of the last successful negotiation (NULL before). */
const bp_host_services_t* bp_kit_host(void);
/* The agreed ABI minor (0 before negotiation). */
uint16_t bp_kit_abi_minor(void);

/* ------------------------------------------------------------------------ */
/* Errors and logging                                                        */
/* ------------------------------------------------------------------------ */
/* Formats the message into the calling thread's error slot and returns
 * `status`. On threads that answer plugin calls the message also goes to
 * host->report; on stream worker threads (bp_plugin_set_worker_thread) it
 * is only kept, for the stream's sticky error (bp_plugin_last_error). */
bp_status_t bp_kit_error(bp_status_t status, const char* fmt, ...)
    __attribute__((format(printf, 2, 3)));
/* bp_kit_error with the backend's name in front ("cpu: ..."). */
#define BP_KIT_ERROR(status, fmt, ...) \
  bp_kit_error((status), "%s: " fmt, bp_kit_name(), ##__VA_ARGS__)
/* The backend name negotiation answered ("plugin" before). */
const char* bp_kit_name(void);
/* Sends a log line at `level` (enum bp_log_level) to the host, formatting
 * only when the host would print it. */
void bp_kit_log(int level, const char* fmt, ...) __attribute__((format(printf, 2, 3)));

/* ------------------------------------------------------------------------ */
/* Answers into caller-sized structs                                         */
/* ------------------------------------------------------------------------ */
/* Copies the first min(out's struct_size, size) bytes of `src` (a struct
 * whose first member is uint32_t struct_size) into `out` and sets out's
 * struct_size to the bytes written. A caller that leaves struct_size 0 gets
 * the whole struct. Never reads or writes past either size. Returns the
 * bytes written. */
size_t bp_kit_copy_out(void* out, const void* src, size_t size);
/* Writes entry `index` of an out-array whose entries the caller spaces
 * `element_size` bytes apart (its sizeof, larger or smaller than ours, e.g.
 * device_memory_spaces): copies at most element_size bytes of `src` (`size`
 * bytes, a struct starting with struct_size) and sets that entry's
 * struct_size to the bytes written. */
void bp_kit_put_entry(void* array, uint32_t element_size, uint32_t index, const void* src,
                      size_t size);

/* Fills `out` (caller-sized, see bp_kit_copy_out) with a support answer:
 * supported when reason == BP_SUPPORT_OK (no formatting then: it is on every
 * dispatch's path), else the reason and the formatted message. Returns
 * BP_OK (the query itself succeeded). */
bp_status_t bp_kit_support_answer(bp_support_t* out, uint32_t reason, const char* fmt, ...)
    __attribute__((format(printf, 3, 4)));

#ifdef __cplusplus
}
#endif
#endif /* BACKPLANE_KIT_PLUGIN_H_ */
