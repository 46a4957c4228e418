/* backplane core: the context (plugin registry and device list).
 *
 * Threading: the plugin and device arrays change only under context->lock
 * (registration). Plugins and devices, once added, are never removed before
 * the context is destroyed, so borrowed pointers stay valid for its life.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"
#include "loader/loader.h"

/* First released size of bp_context_options_t (ABI 1.0). */
#define BP__CONTEXT_OPTIONS_V1_SIZE (offsetof(bp_context_options_t, disable) + sizeof(const char*))

static void context_lock(const bp_context_t* context) {
  pthread_mutex_lock((pthread_mutex_t*)&context->lock);
}
static void context_unlock(const bp_context_t* context) {
  pthread_mutex_unlock((pthread_mutex_t*)&context->lock);
}

static void context_destroy(bp_context_t* context) {
  /* Reverse order of creation: the last plugin loaded goes first. */
  for (uint32_t i = context->plugin_count; i > 0; --i) bp__plugin_destroy(context->plugins[i - 1]);
  free(context->plugins);
  free(context->devices);
  pthread_mutex_destroy(&context->lock);
  free(context);
}

/* The bound on instance_create: the option when given, else
 * BACKPLANE_INSTANCE_CREATE_TIMEOUT_MS, else none (0). */
static uint32_t instance_create_timeout(const bp_context_options_t* options) {
  if (options && options->struct_size >= offsetof(bp_context_options_t, instance_create_timeout_ms) +
                                             sizeof(options->instance_create_timeout_ms) &&
      options->instance_create_timeout_ms)
    return options->instance_create_timeout_ms;
  const char* v = getenv("BACKPLANE_INSTANCE_CREATE_TIMEOUT_MS");
  if (!v || !*v) return 0;
  char* end = NULL;
  errno = 0;
  unsigned long ms = strtoul(v, &end, 10);
  if (errno || *end || *v == '-' || ms > UINT32_MAX) {
    bp__log(BP_LOG_WARN, "BACKPLANE_INSTANCE_CREATE_TIMEOUT_MS='%s' is not a number of "
            "milliseconds; instance_create is not bounded", v);
    return 0;
  }
  return (uint32_t)ms;
}

BP_API bp_status_t bp_context_create(const bp_context_options_t* options,
                                     bp_context_t** out_context) {
  bp__clear_error();
  bp_status_t status = BP_OK;
  bp_context_t* context = NULL;
  BP__REQUIRE_ARG("bp_context_create", out_context);
  if (options && options->struct_size < BP__CONTEXT_OPTIONS_V1_SIZE) {
    return bp__error(BP_INVALID_ARGUMENT,
                     "bp_context_create: options->struct_size is %u, expected at least %zu "
                     "(set it to sizeof(bp_context_options_t))",
                     options->struct_size, (size_t)BP__CONTEXT_OPTIONS_V1_SIZE);
  }
  const uint32_t known_flags = BP_CONTEXT_NO_DISCOVERY | BP_CONTEXT_SYNC_EACH_OP;
  if (options && (options->flags & ~known_flags)) {
    return bp__error(BP_INVALID_ARGUMENT, "bp_context_create: unknown flags 0x%x in options->flags",
                     options->flags & ~known_flags);
  }
  context = calloc(1, sizeof(*context));
  if (!context) return bp__error(BP_RESOURCE_EXHAUSTED, "bp_context_create: out of memory");
  atomic_init(&context->refcount, 1);
  /* Hooks appended to the options: read only when the caller's struct has
   * them. */
#define BP__HAS_OPTION(field) \
  (options && options->struct_size >= offsetof(bp_context_options_t, field) + sizeof(options->field))
  if (BP__HAS_OPTION(error_user_data)) {
    context->error_callback = options->error_callback;
    context->error_user_data = options->error_user_data;
  }
  if (BP__HAS_OPTION(trace_user_data)) {
    context->trace_begin = options->trace_begin;
    context->trace_end = options->trace_end;
    context->trace_user_data = options->trace_user_data;
  }
#undef BP__HAS_OPTION
  const char* sync_env = getenv("BACKPLANE_SYNC");
  context->sync_each_op = (options && (options->flags & BP_CONTEXT_SYNC_EACH_OP)) ||
                          (sync_env && sync_env[0] != '\0' && strcmp(sync_env, "0") != 0);
  if (context->sync_each_op)
    bp__log(BP_LOG_INFO, "every op synchronizes its stream (%s)",
            options && (options->flags & BP_CONTEXT_SYNC_EACH_OP) ? "BP_CONTEXT_SYNC_EACH_OP"
                                                                  : "BACKPLANE_SYNC");
  if (pthread_mutex_init(&context->lock, NULL) != 0) {
    free(context);
    return bp__error(BP_INTERNAL, "bp_context_create: pthread_mutex_init failed");
  }

  bp__crash_report_from_env();
  context->instance_create_timeout_ms = instance_create_timeout(options);
  if (options && (options->flags & BP_CONTEXT_NO_DISCOVERY)) {
    bp__log(BP_LOG_DEBUG, "discovery skipped (BP_CONTEXT_NO_DISCOVERY)");
  } else {
    context_lock(context);
    status = bp__loader_discover(context, options);
    context_unlock(context);
    if (status != BP_OK) goto cleanup;
  }
  bp__log(BP_LOG_DEBUG, "context ready: %u plugin(s) seen, %u device(s)", context->plugin_count,
          context->device_count);
  bp__clear_error();
  *out_context = context;
  context = NULL;

cleanup:
  if (context) {
    /* Keep the failure's message across the teardown. */
    char saved[1024];
    strncpy(saved, bp_status_message(), sizeof(saved) - 1);
    saved[sizeof(saved) - 1] = '\0';
    context_destroy(context);
    bp__error(status, "%s", saved);
  }
  return status;
}

BP_API void bp_context_retain(bp_context_t* context) {
  if (context) atomic_fetch_add(&context->refcount, 1);
}

BP_API void bp_context_release(bp_context_t* context) {
  if (!context) return;
  if (atomic_fetch_sub(&context->refcount, 1) == 1) context_destroy(context);
}

bp_plugin_t* bp__context_plugin_by_name(const bp_context_t* context, const char* name) {
  for (uint32_t i = 0; i < context->plugin_count; ++i) {
    if (context->plugins[i]->name && strcmp(context->plugins[i]->name, name) == 0)
      return context->plugins[i];
  }
  return NULL;
}

static int grow(void** array, uint32_t* capacity, uint32_t needed, size_t elem) {
  if (needed <= *capacity) return 0;
  uint32_t cap = *capacity ? *capacity : 8;
  while (cap < needed) cap *= 2;
  void* p = realloc(*array, (size_t)cap * elem);
  if (!p) return -1;
  *array = p;
  *capacity = cap;
  return 0;
}

bp_status_t bp__context_add_plugin(bp_context_t* context, bp_plugin_t* plugin) {
  if (grow((void**)&context->plugins, &context->plugin_capacity, context->plugin_count + 1,
           sizeof(bp_plugin_t*)) != 0 ||
      grow((void**)&context->devices, &context->device_capacity,
           context->device_count + plugin->device_count, sizeof(bp_device_t*)) != 0) {
    bp__plugin_destroy(plugin);
    return bp__error(BP_RESOURCE_EXHAUSTED, "out of memory while registering a plugin");
  }
  plugin->context = context;
  context->plugins[context->plugin_count++] = plugin;
  for (uint32_t i = 0; i < plugin->device_count; ++i)
    context->devices[context->device_count++] = plugin->devices[i];
  return BP_OK;
}

BP_API bp_status_t bp_context_register_plugin(bp_context_t* context, const char* path,
                                              bp_plugin_t** out_plugin) {
  bp__clear_error();
  BP__REQUIRE_ARG("bp_context_register_plugin", context);
  if (!path || !*path)
    return bp__error(BP_INVALID_ARGUMENT, "bp_context_register_plugin: path is NULL or empty");
  /* The caller named this file, so a relative path is taken relative to the
   * current directory (unlike discovery, which never looks there), and the
   * select/disable filters do not apply. A manifest (.json) is accepted too. */
  char* resolved = realpath(path, NULL);
  const char* use = resolved ? resolved : path;
  size_t len = strlen(use);
  int is_manifest = len > 5 && strcmp(use + len - 5, ".json") == 0;
  bp_plugin_t* plugin = NULL;
  bp_status_t status;
  bp__manifest_t manifest = {0};

  context_lock(context);
  if (is_manifest) {
    status = bp__manifest_read(use, &manifest);
    if (status != BP_OK) {
      const char* base = strrchr(use, '/');
      char reason[1024];
      strncpy(reason, bp_status_message(), sizeof(reason) - 1);
      reason[sizeof(reason) - 1] = '\0';
      status =
          bp__loader_record_skipped(context, base ? base + 1 : use, use, status, reason, &plugin);
    } else {
      bp__load_request_t request = {manifest.library, use, manifest.name, NULL};
      status = bp__loader_load(context, &request, &plugin);
    }
  } else {
    bp__load_request_t request = {use, NULL, NULL, NULL};
    status = bp__loader_load(context, &request, &plugin);
  }
  context_unlock(context);
  bp__manifest_free(&manifest);
  free(resolved);
  if (status == BP_OK) bp__clear_error();
  if (out_plugin) *out_plugin = plugin;
  return status;
}

BP_API uint32_t bp_context_plugin_count(const bp_context_t* context) {
  if (!context) return 0;
  context_lock(context);
  uint32_t n = context->plugin_count;
  context_unlock(context);
  return n;
}

BP_API bp_status_t bp_context_plugin(const bp_context_t* context, uint32_t index,
                                     bp_plugin_t** out_plugin) {
  bp__clear_error();
  BP__REQUIRE_ARG("bp_context_plugin", context);
  BP__REQUIRE_ARG("bp_context_plugin", out_plugin);
  bp_status_t status = BP_OK;
  context_lock(context);
  if (index >= context->plugin_count) {
    status = bp__error(BP_OUT_OF_RANGE, "bp_context_plugin: index %u out of range (%u plugins)",
                       index, context->plugin_count);
  } else {
    *out_plugin = context->plugins[index];
  }
  context_unlock(context);
  return status;
}

BP_API bp_status_t bp_context_find_plugin(const bp_context_t* context, const char* name,
                                          bp_plugin_t** out_plugin) {
  bp__clear_error();
  BP__REQUIRE_ARG("bp_context_find_plugin", context);
  BP__REQUIRE_ARG("bp_context_find_plugin", name);
  BP__REQUIRE_ARG("bp_context_find_plugin", out_plugin);
  bp_status_t status = BP_OK;
  context_lock(context);
  bp_plugin_t* plugin = bp__context_plugin_by_name(context, name);
  if (!plugin) {
    status = bp__error(BP_NOT_FOUND,
                       "no plugin named '%s' was found (see BACKPLANE_LOG=debug for the search, "
                       "and BACKPLANE_PLUGINS/BACKPLANE_DISABLE for filters)",
                       name);
  } else if (plugin->state != BP_PLUGIN_LOADED) {
    status = bp__error(plugin->reason_code, "plugin '%s' was skipped: %s", name,
                       plugin->reason ? plugin->reason : "");
  } else {
    *out_plugin = plugin;
  }
  context_unlock(context);
  return status;
}

BP_API uint32_t bp_context_device_count(const bp_context_t* context) {
  if (!context) return 0;
  context_lock(context);
  uint32_t n = context->device_count;
  context_unlock(context);
  return n;
}

BP_API bp_status_t bp_context_device(const bp_context_t* context, uint32_t index,
                                     bp_device_t** out_device) {
  bp__clear_error();
  BP__REQUIRE_ARG("bp_context_device", context);
  BP__REQUIRE_ARG("bp_context_device", out_device);
  bp_status_t status = BP_OK;
  context_lock(context);
  if (index >= context->device_count) {
    status = bp__error(BP_OUT_OF_RANGE, "bp_context_device: index %u out of range (%u devices)",
                       index, context->device_count);
  } else {
    *out_device = context->devices[index];
  }
  context_unlock(context);
  return status;
}

BP_API bp_status_t bp_context_find_device(const bp_context_t* context, const char* spec,
                                          bp_device_t** out_device) {
  bp__clear_error();
  BP__REQUIRE_ARG("bp_context_find_device", context);
  BP__REQUIRE_ARG("bp_context_find_device", spec);
  BP__REQUIRE_ARG("bp_context_find_device", out_device);
  char name[BP_MAX_NAME];
  uint32_t index = 0;
  const char* colon = strchr(spec, ':');
  size_t name_len = colon ? (size_t)(colon - spec) : strlen(spec);
  if (name_len == 0 || name_len >= sizeof(name))
    return bp__error(BP_INVALID_ARGUMENT,
                     "bp_context_find_device: '%s' is not a device name (\"cpu\" or \"cpu:1\")",
                     spec);
  memcpy(name, spec, name_len);
  name[name_len] = '\0';
  if (colon) {
    const char* digits = colon + 1;
    char* end = NULL;
    errno = 0;
    unsigned long v = (*digits >= '0' && *digits <= '9') ? strtoul(digits, &end, 10) : 0;
    if (!end || *end != '\0' || errno != 0 || v > UINT32_MAX)
      return bp__error(BP_INVALID_ARGUMENT,
                       "bp_context_find_device: '%s' has a bad device index (\"cpu:1\")", spec);
    index = (uint32_t)v;
  }
  bp_plugin_t* plugin = NULL;
  bp_status_t status = bp_context_find_plugin(context, name, &plugin);
  if (status != BP_OK) return status;
  if (index >= plugin->device_count)
    return bp__error(BP_NOT_FOUND, "bp_context_find_device: '%s': plugin '%s' has %u device(s)",
                     spec, name, plugin->device_count);
  *out_device = plugin->devices[index];
  return BP_OK;
}
