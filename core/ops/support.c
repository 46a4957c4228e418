/* backplane core: capability queries -- op support and fusion.
 *
 * Thread-safe. The plugin's answers are pure (the same question gets the
 * same answer for the device's lifetime); nothing here blocks on streams.
 */
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "ops/ops_internal.h"

/* First released sizes of the out-structs the application sizes. */
#define BP__SUPPORT_V1_SIZE (offsetof(bp_support_t, message) + sizeof(((bp_support_t*)0)->message))
#define BP__FUSION_CAPS_V1_SIZE (offsetof(bp_fusion_caps_t, patterns) + sizeof(void*))

static void bp__support_no(bp_support_t* out, uint32_t reason, const char* fmt, const char* a,
                           const char* b) {
  out->supported = 0;
  out->reason = reason;
  out->requires_contiguous = 0;
  snprintf(out->message, sizeof(out->message), fmt, a, b);
}

bp_status_t bp__query_support_checked(const bp_device_t* device, const bp_op_call_t* call,
                                      bp_support_t* out) {
  const bp_plugin_t* plugin = device->plugin;
  memset(out, 0, sizeof(*out));
  out->struct_size = sizeof(*out);
  const bp__op_meta_t* op = bp__op_meta(call->op_id);
  if (op == NULL) {
    char id[16];
    snprintf(id, sizeof(id), "%u", call->op_id);
    bp__support_no(out, BP_SUPPORT_OP, "unknown op id %s%s", id, "");
    return BP_OK;
  }
  if (plugin->ops.launch_count <= call->op_id || plugin->ops.launch == NULL ||
      plugin->ops.launch[call->op_id] == NULL) {
    bp__support_no(out, BP_SUPPORT_OP, "backend '%s' has no kernel for op '%s'", plugin->name,
                   op->name);
    return BP_OK;
  }
  if (plugin->caps.query_support == NULL) {
    bp__support_no(out, BP_SUPPORT_OP,
                   "backend '%s' declares no capabilities (no support query) for op '%s'",
                   plugin->name, op->name);
    return BP_OK;
  }
  bp__clear_error();
  bp_status_t st = plugin->caps.query_support(device->handle, call, out);
  if (st != BP_OK) {
    char what[96];
    snprintf(what, sizeof(what), "support query for op '%s'", op->name);
    return bp__plugin_error(plugin, st, what);
  }
  out->struct_size = sizeof(*out);
  out->message[sizeof(out->message) - 1] = '\0';
  out->supported = out->supported ? 1 : 0;
  if (!out->supported && out->reason == BP_SUPPORT_OK) out->reason = BP_SUPPORT_OP;
  return BP_OK;
}

bp_status_t bp_device_query_support(const bp_device_t* device, const bp_op_call_t* call,
                                    bp_support_t* out_support) {
  BP__REQUIRE_ARG("bp_device_query_support", device);
  BP__REQUIRE_ARG("bp_device_query_support", call);
  BP__REQUIRE_ARG("bp_device_query_support", out_support);
  if (call->struct_size < BP_OP_CALL_V1_SIZE) {
    return bp__error(BP_INVALID_ARGUMENT,
                     "bp_device_query_support: call->struct_size = %u (expected >= %u)",
                     call->struct_size, BP_OP_CALL_V1_SIZE);
  }
  uint32_t caller_size = out_support->struct_size;
  if (caller_size < BP__SUPPORT_V1_SIZE) {
    return bp__out_struct_write("bp_device_query_support", "bp_support_t", out_support, NULL, 0,
                                BP__SUPPORT_V1_SIZE);
  }
  if ((call->num_inputs > 0 && call->inputs == NULL) ||
      (call->num_outputs > 0 && call->outputs == NULL)) {
    return bp__error(BP_INVALID_ARGUMENT,
                     "bp_device_query_support: call has %u inputs and %u outputs but a NULL "
                     "descriptor array",
                     call->num_inputs, call->num_outputs);
  }
  bp_support_t answer;
  bp_status_t st = bp__query_support_checked(device, call, &answer);
  if (st != BP_OK) return st;
  return bp__out_struct_write("bp_device_query_support", "bp_support_t", out_support, &answer,
                              sizeof(answer), BP__SUPPORT_V1_SIZE);
}

bp_status_t bp_device_query_fusion(const bp_device_t* device, bp_fusion_caps_t* out_caps) {
  BP__REQUIRE_ARG("bp_device_query_fusion", device);
  BP__REQUIRE_ARG("bp_device_query_fusion", out_caps);
  if (out_caps->struct_size < BP__FUSION_CAPS_V1_SIZE) {
    return bp__out_struct_write("bp_device_query_fusion", "bp_fusion_caps_t", out_caps, NULL, 0,
                                BP__FUSION_CAPS_V1_SIZE);
  }
  const bp_plugin_t* plugin = device->plugin;
  bp_fusion_caps_t caps;
  memset(&caps, 0, sizeof(caps));
  caps.struct_size = sizeof(caps);
  if (plugin->caps.query_fusion != NULL) {
    bp__clear_error();
    bp_status_t st = plugin->caps.query_fusion(device->handle, &caps);
    if (st != BP_OK) return bp__plugin_error(plugin, st, "fusion query");
    caps.struct_size = sizeof(caps);
    if (caps.patterns == NULL) caps.num_patterns = 0;
  }
  return bp__out_struct_write("bp_device_query_fusion", "bp_fusion_caps_t", out_caps, &caps,
                              sizeof(caps), BP__FUSION_CAPS_V1_SIZE);
}
