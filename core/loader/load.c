/* backplane core: loading one plugin library.
 *
 * dlopen -> negotiate -> validate the reply and tables -> copy the tables
 * (zero-extended) -> instance_create -> open every device. A failure at any
 * step undoes the steps before it and records the plugin as skipped with
 * the reason; nothing a plugin returns is trusted before it is checked, and
 * a NULL slot is never called.
 *
 * Reason codes for skipped plugins:
 *   NOT_FOUND            the library file does not exist
 *   INVALID_ARGUMENT     the library path is not a regular file
 *   PERMISSION_DENIED    the library or its folder fails the trust policy
 *                        (core/loader/file.c) or cannot be opened
 *   FAILED_PRECONDITION  dlopen failed, no entry point, or the plugin broke
 *                        the ABI (version, reply, tables, NULL handles)
 *   UNIMPLEMENTED        a required core slot is NULL
 *   ALREADY_EXISTS       another plugin with the same backend name was first
 *   anything else        what negotiate/instance_create/device_* returned
 *                        (UNAVAILABLE when the vendor stack is missing)
 */
#include <ctype.h>
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "loader.h"

/* First released sizes (ABI 1.0) of the tables, from plugin.h: readers
 * accept >= these. */
#define BP__VTABLE_V1_SIZE BP_PLUGIN_VTABLE_V1_SIZE
#define BP__CORE_TABLE_V1_SIZE BPP_CORE_TABLE_V1_SIZE
#define BP__OP_TABLE_V1_SIZE BPP_OP_TABLE_V1_SIZE
#define BP__CAPS_TABLE_V1_SIZE BPP_CAPS_TABLE_V1_SIZE
#define BP__EXEC_TABLE_V1_SIZE BPP_EXEC_TABLE_V1_SIZE
#define BP__COMM_TABLE_V1_SIZE BPP_COMM_TABLE_V1_SIZE

/* A plugin claiming more devices than this is treated as broken. */
#define BP__MAX_DEVICES_PER_PLUGIN 4096u

static char* dup_or_empty(const char* s) { return strdup(s ? s : ""); }

static const char* base_name(const char* path) {
  const char* slash = strrchr(path, '/');
  return slash ? slash + 1 : path;
}

/* Copies a plugin table of `size` bytes (its struct_size) into `local` of
 * `local_size` bytes: zero-extended when the plugin's is older (smaller),
 * truncated when it is newer (bigger), so we never read past either. */
static void copy_table(void* local, size_t local_size, const void* table, uint32_t size) {
  memset(local, 0, local_size);
  memcpy(local, table, size < local_size ? size : local_size);
  *(uint32_t*)local = (uint32_t)(size < local_size ? size : local_size);
}

/* Releases what loading made (devices, instance, library) but keeps the
 * plugin's identity for the skipped record. */
static void plugin_unload(bp_plugin_t* plugin) {
  for (uint32_t i = plugin->device_count; i > 0; --i) bp__device_destroy(plugin->devices[i - 1]);
  free(plugin->devices);
  plugin->devices = NULL;
  plugin->device_count = 0;
  if (plugin->instance && plugin->core.instance_destroy)
    BP__CORE_CALL_VOID(plugin, instance_destroy, plugin->instance);
  plugin->instance = NULL;
  bp__crash_forget_library(plugin);
  /* An abandoned instance_create still runs the library's code. */
  if (plugin->library && !plugin->abandoned) dlclose(plugin->library);
  plugin->library = NULL;
  memset(&plugin->core, 0, sizeof(plugin->core));
  memset(&plugin->ops, 0, sizeof(plugin->ops));
  memset(&plugin->caps, 0, sizeof(plugin->caps));
  memset(&plugin->exec, 0, sizeof(plugin->exec));
  memset(&plugin->comm, 0, sizeof(plugin->comm));
  memset(&plugin->vtable, 0, sizeof(plugin->vtable));
  plugin->has_caps = plugin->has_exec = plugin->has_comm = 0;
}

/* Marks `plugin` skipped with the thread's current message as the reason
 * (without a leading "<name>: ", which the record already carries), adds it
 * to the context, and leaves a message naming the plugin. */
static bp_status_t finish_skipped(bp_context_t* context, bp_plugin_t* plugin, bp_status_t code,
                                  bp_plugin_t** out_plugin) {
  const char* msg = bp_status_message();
  size_t name_len = strlen(plugin->name);
  if (strncmp(msg, plugin->name, name_len) == 0 && msg[name_len] == ':' && msg[name_len + 1] == ' ')
    msg += name_len + 2;
  char* reason = strdup(msg);
  plugin_unload(plugin);
  plugin->state = BP_PLUGIN_SKIPPED;
  plugin->reason_code = code;
  plugin->reason = reason;
  int quiet = code == BP_UNAVAILABLE || code == BP_ALREADY_EXISTS;
  bp__log(quiet ? BP_LOG_INFO : BP_LOG_WARN, "plugin '%s' (%s) skipped: %s [%s]", plugin->name,
          plugin->path, reason ? reason : "out of memory", bp_status_name(code));
  bp_status_t add = bp__context_add_plugin(context, plugin);
  if (add != BP_OK) {
    *out_plugin = NULL;
    return add;
  }
  *out_plugin = plugin;
  return bp__error(code, "plugin '%s' skipped: %s", plugin->name, reason ? reason : "");
}

bp_status_t bp__loader_record_skipped(bp_context_t* context, const char* name, const char* path,
                                      bp_status_t code, const char* reason,
                                      bp_plugin_t** out_plugin) {
  *out_plugin = NULL;
  bp_plugin_t* plugin = calloc(1, sizeof(*plugin));
  if (!plugin) return bp__error(BP_RESOURCE_EXHAUSTED, "out of memory recording a plugin");
  plugin->name = dup_or_empty(name);
  plugin->path = dup_or_empty(path);
  plugin->version = dup_or_empty(NULL);
  plugin->vendor = dup_or_empty(NULL);
  if (!plugin->name || !plugin->path || !plugin->version || !plugin->vendor) {
    bp__plugin_destroy(plugin);
    return bp__error(BP_RESOURCE_EXHAUSTED, "out of memory recording a plugin");
  }
  bp__error(code, "%s", reason);
  return finish_skipped(context, plugin, code, out_plugin);
}

/* Checks the negotiation reply and copies the plugin's identity. */
static bp_status_t check_reply(bp_plugin_t* plugin, const bp__load_request_t* request,
                               const bp_negotiate_reply_t* reply) {
  if (reply->struct_size < BP_NEGOTIATE_REPLY_V1_SIZE)
    return bp__error(BP_FAILED_PRECONDITION,
                     "negotiation reply struct_size is %u, smaller than the first released size %u",
                     reply->struct_size, BP_NEGOTIATE_REPLY_V1_SIZE);
  if (reply->abi_major != BP_ABI_VERSION_MAJOR)
    return bp__error(BP_FAILED_PRECONDITION,
                     "plugin speaks ABI major %u, this library speaks %d.%d (major versions must "
                     "match)",
                     reply->abi_major, BP_ABI_VERSION_MAJOR, BP_ABI_VERSION_MINOR);
  if (reply->abi_minor > BP_ABI_VERSION_MINOR)
    return bp__error(BP_FAILED_PRECONDITION,
                     "plugin answered ABI %u.%u, newer than the %d.%d offered (the agreed minor "
                     "must be min(host, plugin))",
                     reply->abi_major, reply->abi_minor, BP_ABI_VERSION_MAJOR,
                     BP_ABI_VERSION_MINOR);
  char shown[96];
  if (!bp__backend_name_valid(reply->name))
    return bp__error(BP_FAILED_PRECONDITION,
                     "plugin answered an invalid backend name '%s' (1-63 characters of [a-z0-9_])",
                     bp__text_clean(reply->name, shown, sizeof(shown)));
  if (request->expected_name && strcmp(request->expected_name, reply->name) != 0)
    return bp__error(
        BP_FAILED_PRECONDITION, "manifest '%s' names backend '%s' but the library answers '%s'",
        request->manifest_path ? request->manifest_path : "", request->expected_name, reply->name);
  /* Version and vendor are free text from the plugin: cleaned here, at the
   * boundary, like every plugin string (the name was validated above). */
  char clean_version[96], clean_vendor[160];
  char* name = strdup(reply->name);
  char* version = strdup(reply->version ? bp__text_clean(reply->version, clean_version,
                                                         sizeof(clean_version))
                                        : "");
  char* vendor = strdup(
      reply->vendor ? bp__text_clean(reply->vendor, clean_vendor, sizeof(clean_vendor)) : "");
  if (!name || !version || !vendor) {
    free(name);
    free(version);
    free(vendor);
    return bp__error(BP_RESOURCE_EXHAUSTED, "out of memory");
  }
  free(plugin->name);
  free(plugin->version);
  free(plugin->vendor);
  plugin->name = name;
  plugin->version = version;
  plugin->vendor = vendor;
  return BP_OK;
}

/* Validates the vtable and copies every table into the plugin record. */
static bp_status_t take_tables(bp_plugin_t* plugin, const bp_plugin_vtable_t* vtable) {
  if (!vtable) return bp__error(BP_FAILED_PRECONDITION, "negotiation returned a NULL vtable");
  if (vtable->struct_size < BP__VTABLE_V1_SIZE)
    return bp__error(BP_FAILED_PRECONDITION, "vtable struct_size is %u, expected at least %u",
                     vtable->struct_size, BP__VTABLE_V1_SIZE);
  bp_plugin_vtable_t v;
  copy_table(&v, sizeof(v), vtable, vtable->struct_size);
  if (!v.core) return bp__error(BP_FAILED_PRECONDITION, "vtable has no core table");
  if (v.core->struct_size < BP__CORE_TABLE_V1_SIZE)
    return bp__error(BP_FAILED_PRECONDITION,
                     "core table struct_size is %u, smaller than the first released size %zu",
                     v.core->struct_size, (size_t)BP__CORE_TABLE_V1_SIZE);
    /* X(field, local copy, first size, flag or NULL) for the optional tables. */
#define BP__OPTIONAL_TABLES(X)                                     \
  X(ops, plugin->ops, BP__OP_TABLE_V1_SIZE, NULL)                  \
  X(caps, plugin->caps, BP__CAPS_TABLE_V1_SIZE, &plugin->has_caps) \
  X(exec, plugin->exec, BP__EXEC_TABLE_V1_SIZE, &plugin->has_exec) \
  X(comm, plugin->comm, BP__COMM_TABLE_V1_SIZE, &plugin->has_comm)
#define BP__CHECK_TABLE(field, local, min, flag)                                                  \
  if (v.field && v.field->struct_size < (min))                                                    \
    return bp__error(BP_FAILED_PRECONDITION,                                                      \
                     #field " table struct_size is %u, smaller than the first released size %zu", \
                     v.field->struct_size, (size_t)(min));
  /* The comm table was provisional until collectives were implemented
   * (docs/ABI.md section 17); a table of that draft (120 bytes) is
   * ignored, so the plugin still loads and gets host-staged collectives. */
  if (v.comm && v.comm->struct_size < BP__COMM_TABLE_V1_SIZE) {
    bp__log(BP_LOG_WARN,
            "comm table struct_size is %u, from the provisional draft (final: %zu): ignored, "
            "collectives are host-staged",
            v.comm->struct_size, (size_t)BP__COMM_TABLE_V1_SIZE);
    v.comm = NULL;
  }
  /* Likewise the exec table until ABI 1.2 made it final (docs/ABI.md
   * section 12): a draft table (48 bytes) is ignored, every op still runs
   * through eager launch. */
  if (v.exec && v.exec->struct_size < BP__EXEC_TABLE_V1_SIZE) {
    bp__log(BP_LOG_WARN,
            "exec table struct_size is %u, from the provisional draft (final: %zu): ignored, "
            "no compiled regions",
            v.exec->struct_size, (size_t)BP__EXEC_TABLE_V1_SIZE);
    v.exec = NULL;
  }
  BP__OPTIONAL_TABLES(BP__CHECK_TABLE)
#undef BP__CHECK_TABLE
  if (v.ops && v.ops->launch_count > 0 && !v.ops->launch)
    return bp__error(BP_FAILED_PRECONDITION, "op table has launch_count %u and a NULL launch array",
                     v.ops->launch_count);

  if (v.comm && v.comm->tier != BP_COMM_TIER_NATIVE && v.comm->tier != BP_COMM_TIER_HOST_STAGED)
    return bp__error(BP_FAILED_PRECONDITION, "comm table has unknown tier %u", v.comm->tier);
  if (v.comm && (v.comm->flags & ~(uint32_t)BPP_COMM_HOST_POINTERS) != 0)
    return bp__error(BP_FAILED_PRECONDITION, "comm table has unknown flags 0x%x", v.comm->flags);

  copy_table(&plugin->core, sizeof(plugin->core), v.core, v.core->struct_size);
#define BP__COPY_TABLE(field, local, min, flag)                         \
  if (v.field) {                                                        \
    copy_table(&(local), sizeof(local), v.field, v.field->struct_size); \
    int* f_ = (flag);                                                   \
    if (f_) *f_ = 1;                                                    \
  }
  BP__OPTIONAL_TABLES(BP__COPY_TABLE)
#undef BP__COPY_TABLE
#undef BP__OPTIONAL_TABLES

  /* Required core slots: without them there is no device to use. */
#define BP__REQUIRED_SLOTS(X) \
  X(instance_create) X(device_count) X(device_open) X(device_get_properties)
#define BP__CHECK_SLOT(slot) \
  if (!plugin->core.slot) return bp__error(BP_UNIMPLEMENTED, "core table lacks " #slot);
  BP__REQUIRED_SLOTS(BP__CHECK_SLOT)
#undef BP__CHECK_SLOT
#undef BP__REQUIRED_SLOTS

  memset(&plugin->vtable, 0, sizeof(plugin->vtable));
  plugin->vtable.struct_size = sizeof(plugin->vtable);
  plugin->vtable.core = &plugin->core;
  plugin->vtable.ops = v.ops ? &plugin->ops : NULL;
  plugin->vtable.caps = plugin->has_caps ? &plugin->caps : NULL;
  plugin->vtable.exec = plugin->has_exec ? &plugin->exec : NULL;
  plugin->vtable.comm = plugin->has_comm ? &plugin->comm : NULL;
  return BP_OK;
}

/* instance_create with BACKPLANE_<NAME>_OPTIONS (bounded by the context's
 * timeout), then every device. */
static bp_status_t start_instance(const bp_context_t* context, bp_plugin_t* plugin) {
  char env_name[96];
  size_t n = (size_t)snprintf(env_name, sizeof(env_name), "BACKPLANE_%s_OPTIONS", plugin->name);
  for (size_t i = 0; i < n && i < sizeof(env_name); ++i)
    env_name[i] = (char)toupper((unsigned char)env_name[i]);
  bpp_instance_create_info_t info;
  memset(&info, 0, sizeof(info));
  info.struct_size = sizeof(info);
  info.options = getenv(env_name);
  if (info.options)
    bp__log(BP_LOG_DEBUG, "plugin '%s': options from %s: '%s'", plugin->name, env_name,
            info.options);

  bpp_instance_t instance = NULL;
  bp_status_t status =
      bp__loader_instance_create(plugin, &info, context->instance_create_timeout_ms, &instance);
  if (status != BP_OK) return status;
  if (!instance)
    return bp__error(BP_FAILED_PRECONDITION, "instance_create returned OK and a NULL instance");
  plugin->instance = instance;

  uint32_t count = 0;
  bp__clear_error();
  status = BP__CORE_CALL(plugin, device_count, instance, &count);
  if (status != BP_OK) return bp__plugin_error(plugin, status, "device_count");
  if (count > BP__MAX_DEVICES_PER_PLUGIN)
    return bp__error(BP_FAILED_PRECONDITION, "device_count answered %u (more than %u)", count,
                     BP__MAX_DEVICES_PER_PLUGIN);
  bp__log(BP_LOG_DEBUG, "plugin '%s': %u device(s)", plugin->name, count);
  if (count > 0) {
    plugin->devices = calloc(count, sizeof(bp_device_t*));
    if (!plugin->devices) return bp__error(BP_RESOURCE_EXHAUSTED, "out of memory");
  }
  for (uint32_t i = 0; i < count; ++i) {
    status = bp__device_create(plugin, i, &plugin->devices[i]);
    if (status != BP_OK) return status;
    plugin->device_count = i + 1;
  }
  return BP_OK;
}

bp_status_t bp__loader_load(bp_context_t* context, const bp__load_request_t* request,
                            bp_plugin_t** out_plugin) {
  bp_status_t status = BP_OK;
  *out_plugin = NULL;
  const char* path = request->library_path;
  bp_plugin_t* plugin = calloc(1, sizeof(*plugin));
  if (!plugin) return bp__error(BP_RESOURCE_EXHAUSTED, "out of memory loading '%s'", path);
  plugin->name = strdup(request->expected_name ? request->expected_name : base_name(path));
  plugin->path = strdup(path);
  plugin->version = dup_or_empty(NULL);
  plugin->vendor = dup_or_empty(NULL);
  if (!plugin->name || !plugin->path || !plugin->version || !plugin->vendor) {
    bp__plugin_destroy(plugin);
    return bp__error(BP_RESOURCE_EXHAUSTED, "out of memory loading '%s'", path);
  }

  if (request->expected_name) {
    const bp_plugin_t* first = bp__context_plugin_by_name(context, request->expected_name);
    if (first) {
      status = bp__error(BP_ALREADY_EXISTS, "duplicate of %s", first->path);
      goto skipped;
    }
  }
  /* Regular file and trust policy first: dlopen would block forever on a
   * FIFO and would load a file anyone may have replaced. */
  int fd = -1;
  if ((status = bp__loader_open_file(path, "library", &fd)) != BP_OK) {
    if (request->manifest_path) {
      char msg[1024];
      snprintf(msg, sizeof(msg), "%s", bp_status_message());
      bp__error(status, "%s (named by manifest '%s')", msg, request->manifest_path);
    }
    goto skipped;
  }
  close(fd);

  bp__log(BP_LOG_DEBUG, "dlopen '%s'", path);
  dlerror();
  plugin->library = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  if (!plugin->library) {
    const char* err = dlerror();
    status = bp__error(BP_FAILED_PRECONDITION, "dlopen failed: %s", err ? err : "unknown error");
    goto skipped;
  }
  bp_plugin_negotiate_fn negotiate;
  *(void**)&negotiate = dlsym(plugin->library, BP_PLUGIN_ENTRY_NAME);
  if (!negotiate) {
    status =
        bp__error(BP_FAILED_PRECONDITION,
                  "'%s' does not export " BP_PLUGIN_ENTRY_NAME " (not a backplane plugin)", path);
    goto skipped;
  }

  bp_negotiate_request_t req;
  memset(&req, 0, sizeof(req));
  req.struct_size = sizeof(req);
  req.abi_major = BP_ABI_VERSION_MAJOR;
  req.abi_minor = BP_ABI_VERSION_MINOR;
  plugin->host = *bp__host_services();
  plugin->host.host_ctx = plugin;
  req.host = &plugin->host;
  bp_negotiate_reply_t reply;
  memset(&reply, 0, sizeof(reply));
  reply.struct_size = sizeof(reply);
  bp__clear_error();
  status = BP__NOTE_CALL(plugin, "negotiate", NULL, negotiate(&req, &reply));
  if (status != BP_OK) {
    bp__plugin_error(plugin, status, "negotiation");
    goto skipped;
  }
  status = check_reply(plugin, request, &reply);
  if (status != BP_OK) goto skipped;
  bp__crash_note_library(plugin, plugin->library);
  bp__log(BP_LOG_DEBUG, "plugin '%s': negotiated ABI %u.%u (offered %d.%d), version '%s'",
          plugin->name, reply.abi_major, reply.abi_minor, BP_ABI_VERSION_MAJOR,
          BP_ABI_VERSION_MINOR, plugin->version);

  /* A library named directly (no manifest) tells its name only now. */
  if (!request->expected_name) {
    const bp__filter_t* filter = request->filter;
    if (filter && ((filter->select && !bp__name_in_list(filter->select, plugin->name)) ||
                   (filter->disable && bp__name_in_list(filter->disable, plugin->name)))) {
      bp__log(BP_LOG_DEBUG, "plugin '%s' (%s) filtered out by select/disable", plugin->name, path);
      bp__plugin_destroy(plugin);
      return BP_OK;
    }
    const bp_plugin_t* first = bp__context_plugin_by_name(context, plugin->name);
    if (first) {
      status = bp__error(BP_ALREADY_EXISTS, "duplicate of %s", first->path);
      goto skipped;
    }
  }
  plugin->abi_major = reply.abi_major;
  plugin->abi_minor = reply.abi_minor;

  status = take_tables(plugin, reply.vtable);
  if (status != BP_OK) goto skipped;
  status = start_instance(context, plugin);
  if (status != BP_OK) goto skipped;

  plugin->state = BP_PLUGIN_LOADED;
  plugin->reason_code = BP_OK;
  bp__log(BP_LOG_DEBUG, "plugin '%s' loaded from '%s' (ABI %u.%u, version '%s', %u device(s))",
          plugin->name, path, plugin->abi_major, plugin->abi_minor, plugin->version,
          plugin->device_count);
  status = bp__context_add_plugin(context, plugin);
  if (status == BP_OK) *out_plugin = plugin;
  return status;

skipped:
  return finish_skipped(context, plugin, status, out_plugin);
}
