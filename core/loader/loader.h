/* backplane core: the plugin loader (manifests, discovery, dlopen,
 * negotiation, table validation).
 *
 * Not installed. Everything here runs with the context's lock held by the
 * caller (core/runtime/context.c), so the plugin and device arrays only
 * change under that lock.
 */
#ifndef BACKPLANE_CORE_LOADER_H_
#define BACKPLANE_CORE_LOADER_H_

#include "internal.h"

/* ---- manifests (manifest.c) -------------------------------------------- */
typedef struct bp__manifest {
  char* name;    /* backend name, validated [a-z0-9_] */
  char* library; /* absolute, or relative to the manifest's folder resolved */
  uint32_t abi_major, abi_minor;
} bp__manifest_t;

/* Parses the manifest at `path`. On failure returns the reason code with
 * the reason in the thread's message (bp_status_message), and leaves
 * *out_manifest zeroed. */
BP__HIDDEN bp_status_t bp__manifest_read(const char* path, bp__manifest_t* out_manifest);
BP__HIDDEN void bp__manifest_free(bp__manifest_t* manifest);
/* Nonzero when `name` is a valid backend name: 1..63 chars of [a-z0-9_]. */
BP__HIDDEN int bp__backend_name_valid(const char* name);

/* ---- files and the trust policy (file.c) -------------------------------- */
/* Opens a plugin file (`what`: "manifest", "library") that must be a regular
 * file that passes the trust policy (see file.c); *out_fd is the caller's.
 * NOT_FOUND, INVALID_ARGUMENT (not a regular file), PERMISSION_DENIED (the
 * policy or the file system), with the message. Never blocks on a FIFO. */
BP__HIDDEN bp_status_t bp__loader_open_file(const char* path, const char* what, int* out_fd);
/* The trust policy for a folder searched for manifests: PERMISSION_DENIED
 * when every user may write to it (unless insecure plugins are allowed). */
BP__HIDDEN bp_status_t bp__loader_check_folder(const char* path);

/* ---- name filters (discover.c) ----------------------------------------- */
typedef struct bp__filter {
  char* select;              /* comma list, or NULL = everything */
  char* disable;             /* comma list, or NULL = nothing */
  const char* select_origin; /* "BACKPLANE_PLUGINS" or "options.select" */
} bp__filter_t;

/* Nonzero when `name` appears in the comma list `list` (spaces ignored). */
BP__HIDDEN int bp__name_in_list(const char* list, const char* name);

/* ---- loading one plugin (load.c) --------------------------------------- */
typedef struct bp__load_request {
  const char* library_path;   /* what to dlopen */
  const char* manifest_path;  /* the manifest it came from, or NULL */
  const char* expected_name;  /* the manifest's name, or NULL */
  const bp__filter_t* filter; /* applied after negotiation when the name
                                 was not known before; NULL = none */
} bp__load_request_t;

/* Loads one plugin into `context` and records it: on success as loaded
 * (devices appended to the context), on failure as skipped with the reason.
 * Returns BP_OK or the skip reason code (message in the thread's slot);
 * *out_plugin is the recorded plugin, or NULL when the plugin was filtered
 * out or was the same file as one already recorded. */
BP__HIDDEN bp_status_t bp__loader_load(bp_context_t* context, const bp__load_request_t* request,
                                       bp_plugin_t** out_plugin);

/* Calls the plugin's instance_create with the call note set; with
 * `timeout_ms` > 0 on a helper thread, giving up after that long with
 * BP_DEADLINE_EXCEEDED (the thread is abandoned and plugin->abandoned set,
 * so the library is never unloaded) (instance_create.c). On failure the
 * message names the plugin. */
BP__HIDDEN bp_status_t bp__loader_instance_create(bp_plugin_t* plugin,
                                                  const bpp_instance_create_info_t* info,
                                                  uint32_t timeout_ms, bpp_instance_t* out_instance);

/* Records a plugin that never got as far as loading (bad manifest,
 * duplicate). Copies the strings. Returns `code` and leaves the message. */
BP__HIDDEN bp_status_t bp__loader_record_skipped(bp_context_t* context, const char* name,
                                                 const char* path, bp_status_t code,
                                                 const char* reason, bp_plugin_t** out_plugin);

/* ---- discovery (discover.c) -------------------------------------------- */
/* Runs the whole search (BACKPLANE_PLUGIN_PATH, options->plugin_path, the
 * folder beside libbackplane, the install folder) and loads what it finds.
 * Never fails because a plugin failed; fails only for a selected backend that
 * could not be loaded or was not found, or for out-of-memory. */
BP__HIDDEN bp_status_t bp__loader_discover(bp_context_t* context,
                                           const bp_context_options_t* options);

/* ---- context internals (core/runtime/context.c, plugin.c, device.c) ---- */
/* The plugin named `name` in the context, or NULL. Caller holds the lock. */
BP__HIDDEN bp_plugin_t* bp__context_plugin_by_name(const bp_context_t* context, const char* name);
/* Appends `plugin` (and its devices when loaded) to the context. On
 * failure (out of memory) the plugin is destroyed. */
BP__HIDDEN bp_status_t bp__context_add_plugin(bp_context_t* context, bp_plugin_t* plugin);
/* Frees a plugin: closes its devices, destroys its instance, dlcloses. */
BP__HIDDEN void bp__plugin_destroy(bp_plugin_t* plugin);
/* Creates the device object for index `index` of a plugin whose instance
 * is up; opens it and caches its properties and memory spaces. */
BP__HIDDEN bp_status_t bp__device_create(bp_plugin_t* plugin, uint32_t index,
                                         bp_device_t** out_device);
BP__HIDDEN void bp__device_destroy(bp_device_t* device);

#endif /* BACKPLANE_CORE_LOADER_H_ */
