/* backplane plugin kit: negotiation, errors, logging, answers. See
 * bp_kit_plugin.h. */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "bp_kit_plugin.h"

/* Written once by negotiation (before any other call of the plugin), read
 * afterwards from any thread. */
static const bp_host_services_t* g_host;
static uint16_t g_minor;
static const char* g_name;

const bp_host_services_t* bp_kit_host(void) { return g_host; }
uint16_t bp_kit_abi_minor(void) { return g_minor; }
const char* bp_kit_name(void) { return g_name ? g_name : "plugin"; }

bp_status_t bp_kit_negotiate(const bp_kit_plugin_info_t* info, const bp_negotiate_request_t* req,
                             bp_negotiate_reply_t* reply) {
  if (!info || !req || !reply || req->struct_size < BP_NEGOTIATE_REQUEST_V1_SIZE ||
      reply->struct_size < BP_NEGOTIATE_REPLY_V1_SIZE)
    return BP_INVALID_ARGUMENT; /* no host services to report through */
  g_name = info->name;
  if (req->host && req->host->struct_size >= BP_HOST_SERVICES_V1_SIZE) g_host = req->host;
  if (req->abi_major != BP_ABI_VERSION_MAJOR)
    return bp_plugin_report(g_host, BP_FAILED_PRECONDITION,
                            "%s: ABI major %u not supported (plugin speaks %u.%u)", info->name,
                            req->abi_major, BP_ABI_VERSION_MAJOR, BP_ABI_VERSION_MINOR);
  const bp_plugin_vtable_t* vt = info->get_vtable ? info->get_vtable() : NULL;
  if (!vt)
    return bp_plugin_report(g_host, BP_INTERNAL, "%s: the plugin has no vtable", info->name);
  uint16_t ours = BP_ABI_VERSION_MINOR;
  g_minor = req->abi_minor < ours ? req->abi_minor : ours;
  bp_negotiate_reply_t r = {
      .struct_size = BP_NEGOTIATE_REPLY_V1_SIZE,
      .abi_major = BP_ABI_VERSION_MAJOR,
      .abi_minor = g_minor,
      .name = info->name,
      .version = info->version,
      .vendor = info->vendor,
      .vtable = vt,
      .next = NULL,
  };
  memcpy(reply, &r, BP_NEGOTIATE_REPLY_V1_SIZE);
  return BP_OK;
}

bp_status_t bp_kit_error(bp_status_t status, const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  status = bp_plugin_errorv(g_host, status, fmt, ap);
  va_end(ap);
  return status;
}

void bp_kit_log(int level, const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  bp_plugin_logv(g_host, level, fmt, ap);
  va_end(ap);
}

size_t bp_kit_copy_out(void* out, const void* src, size_t size) {
  uint32_t cap;
  memcpy(&cap, out, sizeof cap);
  size_t n = cap && cap < size ? cap : size;
  memcpy(out, src, n);
  uint32_t written = (uint32_t)n;
  if (n >= sizeof written) memcpy(out, &written, sizeof written);
  return n;
}

void bp_kit_put_entry(void* array, uint32_t element_size, uint32_t index, const void* src,
                      size_t size) {
  char* dst = (char*)array + (size_t)index * element_size;
  uint32_t n = element_size < size ? element_size : (uint32_t)size;
  memcpy(dst, src, n);
  memcpy(dst, &n, sizeof n);
}

bp_status_t bp_kit_support_answer(bp_support_t* out, uint32_t reason, const char* fmt, ...) {
  bp_support_t a;
  memset(&a, 0, sizeof a);
  a.struct_size = sizeof a;
  a.supported = reason == BP_SUPPORT_OK;
  a.reason = reason;
  if (reason != BP_SUPPORT_OK) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(a.message, sizeof a.message, fmt, ap);
    va_end(ap);
  }
  bp_kit_copy_out(out, &a, sizeof a);
  return BP_OK;
}
