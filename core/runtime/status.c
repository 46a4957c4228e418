/* backplane core: status codes and the per-thread error message.
 *
 * Every API call that fails leaves a message in a thread-local slot; the
 * application reads it with bp_status_message() on the same thread. Plugins
 * report their messages through the host services' report() callback, which
 * writes the same kind of thread-local slot, so no heap object crosses the
 * plugin boundary and concurrent threads never see each other's messages.
 */
#include <stdio.h>
#include <string.h>

#include "internal.h"

/* Messages are bounded: a longer one is cut and ends with "...". */
#define BP__MESSAGE_MAX 1024

/* The message bp_status_message() returns. */
static _Thread_local char tls_message[BP__MESSAGE_MAX];
/* The last message a plugin reported on this thread (report callback), kept
 * apart so bp__plugin_error can prefix it without reading its own output. */
static _Thread_local char tls_plugin_message[BP__MESSAGE_MAX];
static _Thread_local int tls_plugin_reported;
/* Why the last op on this thread was refused (enum bp_support_reason);
 * BP_SUPPORT_OK after any other outcome. */
static _Thread_local uint32_t tls_support_reason;

static void copy_bounded(char* dst, const char* src) {
  size_t n = strlen(src);
  if (n >= BP__MESSAGE_MAX) {
    memcpy(dst, src, BP__MESSAGE_MAX - 4);
    memcpy(dst + BP__MESSAGE_MAX - 4, "...", 4);
  } else {
    memcpy(dst, src, n + 1);
  }
}

static void mark_truncated(char* buf, int written) {
  if (written >= BP__MESSAGE_MAX) memcpy(buf + BP__MESSAGE_MAX - 4, "...", 4);
}

BP_API const char* bp_status_message(void) { return tls_message; }

BP_API const char* bp_status_name(bp_status_t status) {
  switch (status) {
#define BP__STATUS_CASE(code) \
  case BP_##code: return #code;
    BP__STATUS_CASE(OK)
    BP__STATUS_CASE(CANCELLED)
    BP__STATUS_CASE(UNKNOWN)
    BP__STATUS_CASE(INVALID_ARGUMENT)
    BP__STATUS_CASE(DEADLINE_EXCEEDED)
    BP__STATUS_CASE(NOT_FOUND)
    BP__STATUS_CASE(ALREADY_EXISTS)
    BP__STATUS_CASE(PERMISSION_DENIED)
    BP__STATUS_CASE(RESOURCE_EXHAUSTED)
    BP__STATUS_CASE(FAILED_PRECONDITION)
    BP__STATUS_CASE(ABORTED)
    BP__STATUS_CASE(OUT_OF_RANGE)
    BP__STATUS_CASE(UNIMPLEMENTED)
    BP__STATUS_CASE(INTERNAL)
    BP__STATUS_CASE(UNAVAILABLE)
    BP__STATUS_CASE(DATA_LOSS)
    BP__STATUS_CASE(UNAUTHENTICATED)
    BP__STATUS_CASE(DEVICE_LOST)
    BP__STATUS_CASE(NOT_READY)
    BP__STATUS_CASE(UNSUPPORTED)
#undef BP__STATUS_CASE
    default: return "UNKNOWN_STATUS";
  }
}

BP_API void bp_abi_version(uint32_t* out_major, uint32_t* out_minor) {
  if (out_major) *out_major = BP_ABI_VERSION_MAJOR;
  if (out_minor) *out_minor = BP_ABI_VERSION_MINOR;
}

bp_status_t bp__error(bp_status_t status, const char* fmt, ...) {
  tls_support_reason = BP_SUPPORT_OK;
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(tls_message, sizeof(tls_message), fmt, ap);
  va_end(ap);
  if (n < 0) tls_message[0] = '\0';
  mark_truncated(tls_message, n);
  return status;
}

bp_status_t bp__plugin_error(const bp_plugin_t* plugin, bp_status_t status, const char* what) {
  const char* name = (plugin && plugin->name) ? plugin->name : "plugin";
  int n;
  if (tls_plugin_reported && tls_plugin_message[0] != '\0') {
    n = snprintf(tls_message, sizeof(tls_message), "%s: %s: %s", name, what, tls_plugin_message);
  } else {
    n = snprintf(tls_message, sizeof(tls_message), "%s: %s: %s (the plugin reported no message)",
                 name, what, bp_status_name(status));
  }
  mark_truncated(tls_message, n);
  tls_plugin_reported = 0;
  tls_plugin_message[0] = '\0';
  return status;
}

BP_API bp_status_t bp_status_set_message(bp_status_t status, const char* message) {
  return bp__error(status, "%s", message != NULL ? message : "");
}

void bp__set_support_reason(uint32_t reason) { tls_support_reason = reason; }

BP_API uint32_t bp_status_support_reason(void) { return tls_support_reason; }

BP_API const char* bp_support_reason_name(uint32_t reason) {
  static const char* const names[] = {"ok",        "op",        "dtype", "rank", "layout",
                                      "attribute", "size",      "device"};
  return reason < sizeof(names) / sizeof(names[0]) ? names[reason] : "unknown";
}

void bp__clear_error(void) {
  tls_support_reason = BP_SUPPORT_OK;
  tls_message[0] = '\0';
  tls_plugin_message[0] = '\0';
  tls_plugin_reported = 0;
}

/* ---- host services ------------------------------------------------------ */

/* Called by plugins on whatever thread is about to return an error. The
 * message is copied (bounded); it also becomes the thread's current message
 * so an error the core passes through unchanged still explains itself. */
static void host_report(void* host_ctx, bp_status_t status, const char* message) {
  (void)host_ctx;
  (void)status;
  /* Plugin text is untrusted: cleaned before it reaches a message. */
  bp__text_clean(message ? message : "", tls_plugin_message, sizeof(tls_plugin_message));
  tls_plugin_reported = 1;
  copy_bounded(tls_message, tls_plugin_message);
}

static void host_log(void* host_ctx, int32_t level, const char* message) {
  (void)host_ctx;
  if (level < BP_LOG_ERROR) level = BP_LOG_ERROR;
  if (level > BP_LOG_DEBUG) level = BP_LOG_DEBUG;
  if (!bp__log_enabled(level)) return;
  char clean[BP__MESSAGE_MAX];
  bp__log(level, "%s", bp__text_clean(message ? message : "", clean, sizeof(clean)));
}

static int32_t host_log_enabled(void* host_ctx, int32_t level) {
  (void)host_ctx;
  return bp__log_enabled(level) ? 1 : 0;
}

/* An error outside any call: host_ctx is the plugin (bp_plugin_t.host).
 * Forwards to the context's error callback with the device it names, or
 * logs it when the application set none. */
static void host_async_error(void* host_ctx, bpp_device_t handle, bp_status_t status,
                             const char* message) {
  const bp_plugin_t* plugin = host_ctx;
  if (plugin == NULL) return;
  bp_device_t* device = NULL;
  for (uint32_t i = 0; i < plugin->device_count && handle != NULL; ++i) {
    if (plugin->devices[i] != NULL && plugin->devices[i]->handle == handle) {
      device = plugin->devices[i];
    }
  }
  const bp_context_t* context = plugin->context;
  char text[BP__MESSAGE_MAX], clean[BP__MESSAGE_MAX];
  /* Plugin text is untrusted: cleaned before the application sees it. */
  snprintf(text, sizeof(text), "%s: %s", device ? device->name : plugin->name,
           bp__text_clean(message ? message : "", clean, sizeof(clean)));
  if (context != NULL && context->error_callback != NULL) {
    context->error_callback(context->error_user_data, device, status, text);
  } else {
    bp__log(BP_LOG_ERROR, "asynchronous error %s: %s", bp_status_name(status), text);
  }
}

static const bp_host_services_t host_services = {
    .struct_size = sizeof(bp_host_services_t),
    .reserved0 = 0,
    .host_ctx = NULL,
    .report = host_report,
    .log = host_log,
    .log_enabled = host_log_enabled,
    .async_error = host_async_error,
};

const bp_host_services_t* bp__host_services(void) { return &host_services; }
