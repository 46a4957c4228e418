/* backplane core: capability queries -- op support and fusion.
 *
 * Thread-safe. The plugin's answers are pure (the same question gets the
 * same answer for the device's lifetime); nothing here blocks on streams.
 */
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "ops/abi_history.h"
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

static const char* bp__layout_name(uint32_t layout) {
  static const char* const names[BP_LAYOUT_COUNT_] = {"strided", "block_scaled",
                                                      "group_quantized"};
  return layout < BP_LAYOUT_COUNT_ ? names[layout] : "unknown";
}

/* A descriptor an application handed in: well formed, or INVALID_ARGUMENT
 * naming what is wrong. */
static bp_status_t bp__desc_check(const bp_tensor_desc_t* d, const char* kind, uint32_t index) {
  const char* api = "bp_device_query_support";
  if (d == NULL) return bp__error(BP_INVALID_ARGUMENT, "%s: %s %u is NULL", api, kind, index);
  if (d->struct_size < BP_TENSOR_DESC_V1_SIZE)
    return bp__error(BP_INVALID_ARGUMENT, "%s: %s %u has struct_size %u (expected >= %u)", api,
                     kind, index, d->struct_size, BP_TENSOR_DESC_V1_SIZE);
  if (d->layout >= BP_LAYOUT_COUNT_)
    return bp__error(BP_INVALID_ARGUMENT, "%s: %s %u has unknown layout %u", api, kind, index,
                     d->layout);
  if (d->bit_offset > 7)
    return bp__error(BP_INVALID_ARGUMENT, "%s: %s %u has bit_offset %u (0..7)", api, kind, index,
                     d->bit_offset);
  if (d->layout == BP_LAYOUT_STRIDED) {
    if (d->quant != NULL)
      return bp__error(BP_INVALID_ARGUMENT, "%s: %s %u is strided but has a quantization", api,
                       kind, index);
    return BP_OK;
  }
  const bp_quant_desc_t* q = d->quant;
  const char* what = NULL;
  if (q == NULL) what = "has no quantization descriptor";
  else if (q->struct_size < BP_QUANT_DESC_V1_SIZE) what = "has a quantization struct_size too small";
  else if (q->block_size == 0) what = "has block_size 0";
  else if (q->axis >= d->rank) what = "has a quantization axis outside its rank";
  else if (q->scales == NULL) what = "has no scales";
  else if (d->layout == BP_LAYOUT_BLOCK_SCALED && q->zero_points != NULL)
    what = "is block-scaled but has zero points";
  if (what != NULL)
    return bp__error(BP_INVALID_ARGUMENT, "%s: %s %u (layout %s) %s", api, kind, index,
                     bp__layout_name(d->layout), what);
  return BP_OK;
}

/* 1 (with `out` filled) when the device did not declare the layout of `d`. */
static int bp__layout_refused(const bp_device_t* device, const bp_tensor_desc_t* d,
                              const char* kind, uint32_t index, bp_support_t* out) {
  if (d->layout == BP_LAYOUT_STRIDED || (device->props.layout_mask & BP_LAYOUT_BIT(d->layout)))
    return 0;
  memset(out, 0, sizeof(*out));
  out->struct_size = sizeof(*out);
  out->reason = BP_SUPPORT_LAYOUT;
  snprintf(out->message, sizeof(out->message),
           "backend '%s' does not declare the %s layout (%s %u)", device->plugin->name,
           bp__layout_name(d->layout), kind, index);
  return 1;
}

int bp__abi_gate_plugin(const bp_plugin_t* plugin, const bp__op_meta_t* op,
                        const bp_op_call_t* call, bp_support_t* out) {
  if (plugin->abi_minor == BP_ABI_VERSION_MINOR) return 0; /* never newer (load.c) */
  uint32_t reason = BP_SUPPORT_OP;
  char msg[sizeof(out->message)];
  if (!bp__abi_gate(bp__abi_history(), plugin->abi_minor, op->attrs_kind, op->name, call, &reason,
                    msg, sizeof(msg))) {
    return 0;
  }
  bp__support_no(out, reason, "%s%s", msg, "");
  return 1;
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
  if (bp__abi_gate_plugin(plugin, op, call, out)) return BP_OK;
  if (plugin->caps.query_support == NULL) {
    bp__support_no(out, BP_SUPPORT_OP,
                   "backend '%s' declares no capabilities (no support query) for op '%s'",
                   plugin->name, op->name);
    return BP_OK;
  }
  bp__clear_error();
  bp_status_t st = BP__NOTE_CALL(plugin, "query_support", NULL,
                                 plugin->caps.query_support(device->handle, call, out));
  if (st != BP_OK) {
    char what[96];
    snprintf(what, sizeof(what), "support query for op '%s'", op->name);
    return bp__plugin_error(plugin, st, what);
  }
  out->struct_size = sizeof(*out);
  bp__text_clean_array(out->message, sizeof(out->message));
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
  /* The plugin gets a call of this header's size with the list operand's
   * position taken from ops.def, after the descriptors are checked. */
  bp_op_call_t checked;
  memset(&checked, 0, sizeof(checked));
  memcpy(&checked, call, BP_OP_CALL_V1_SIZE);
  checked.struct_size = sizeof(checked);
  const bp__op_meta_t* op = bp__op_meta(call->op_id);
  if (op != NULL) {
    uint32_t fixed = (uint32_t)op->num_before + op->num_after;
    if (op->has_list ? call->num_inputs < fixed : call->num_inputs != fixed) {
      return bp__error(BP_INVALID_ARGUMENT, "bp_device_query_support: op '%s' takes %s%u inputs, got %u",
                       op->name, op->has_list ? "at least " : "", fixed, call->num_inputs);
    }
    bp__op_call_set_list(&checked, op);
  }
  /* Plugins always see a filled attribute struct (ops.h): NULL means the
   * op's defaults, an older caller's smaller struct is completed. */
  bp__attrs_storage_t attrs_storage;
  if (op != NULL) {
    const void* filled = NULL;
    bp_status_t ast = bp__attrs_fill(op, call->attrs, &attrs_storage, &filled);
    if (ast != BP_OK) return ast;
    checked.attrs = filled;
  }
  bp_support_t answer;
  int refused = 0;
  for (uint32_t i = 0; i < call->num_inputs + call->num_outputs; ++i) {
    int is_in = i < call->num_inputs;
    const bp_tensor_desc_t* d = is_in ? call->inputs[i] : call->outputs[i - call->num_inputs];
    uint32_t index = is_in ? i : i - call->num_inputs;
    bp_status_t st = bp__desc_check(d, is_in ? "input" : "output", index);
    if (st != BP_OK) return st;
    if (!refused && bp__layout_refused(device, d, is_in ? "input" : "output", index, &answer))
      refused = 1;
  }
  if (refused) {
    *out_support = answer;
    return BP_OK;
  }
  bp_status_t st = bp__query_support_checked(device, &checked, &answer);
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
    bp_status_t st =
        BP__NOTE_CALL(plugin, "query_fusion", NULL, plugin->caps.query_fusion(device->handle, &caps));
    if (st != BP_OK) return bp__plugin_error(plugin, st, "fusion query");
    caps.struct_size = sizeof(caps);
    if (caps.patterns == NULL) caps.num_patterns = 0;
  }
  return bp__out_struct_write("bp_device_query_fusion", "bp_fusion_caps_t", out_caps, &caps,
                              sizeof(caps), BP__FUSION_CAPS_V1_SIZE);
}
