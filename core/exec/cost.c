/* backplane core: the plugins' cost estimates (bp_device_estimate_cost).
 * Thread-safe; pure. */
#include <string.h>

#include "exec/exec_internal.h"

#define BP__COST_FIRST_SIZE (offsetof(bp_cost_estimate_t, bytes) + sizeof(double))

bp_status_t bp_device_estimate_cost(const bp_device_t* device, const bp_op_call_t* call,
                                    bp_cost_estimate_t* out) {
  const char* api = "bp_device_estimate_cost";
  BP__REQUIRE_ARG(api, device);
  BP__REQUIRE_ARG(api, call);
  BP__REQUIRE_ARG(api, out);
  if (out->struct_size < BP__COST_FIRST_SIZE || out->struct_size > 4096)
    return bp__out_struct_write(api, "bp_cost_estimate_t", out, NULL, 0, BP__COST_FIRST_SIZE);
  if (call->struct_size < BP_OP_CALL_V1_SIZE)
    return bp__error(BP_INVALID_ARGUMENT, "%s: call->struct_size = %u (expected >= %u)", api,
                     call->struct_size, BP_OP_CALL_V1_SIZE);
  const bp__op_meta_t* op = bp__op_meta(call->op_id);
  if (op == NULL) return bp__error(BP_INVALID_ARGUMENT, "%s: unknown op id %u", api, call->op_id);
  if ((call->num_inputs > 0 && call->inputs == NULL) || call->num_outputs == 0 || call->outputs == NULL)
    return bp__error(BP_INVALID_ARGUMENT, "%s: call has NULL descriptor arrays", api);
  for (uint32_t i = 0; i < call->num_inputs + call->num_outputs; ++i) {
    const bp_tensor_desc_t* d = i < call->num_inputs ? call->inputs[i] : call->outputs[i - call->num_inputs];
    if (d == NULL || d->struct_size < BP_TENSOR_DESC_V1_SIZE || d->rank > BP_MAX_RANK)
      return bp__error(BP_INVALID_ARGUMENT, "%s: descriptor %u is NULL or malformed", api, i);
  }
  const bp_plugin_t* plugin = device->plugin;
  if (plugin->caps.estimate_cost == NULL) {
    bp_status_t st = bp__error(BP_UNIMPLEMENTED, "%s: backend '%s' gives no cost estimates", api, plugin->name);
    bp__set_support_reason(BP_SUPPORT_DEVICE);
    return st;
  }
  bp_support_t gate;
  if (bp__abi_gate_plugin(plugin, op, call, &gate))
    return bp__error(BP_UNIMPLEMENTED, "%s: %s", api, gate.message);
  bp_op_call_t checked;
  memset(&checked, 0, sizeof(checked));
  memcpy(&checked, call, BP_OP_CALL_V1_SIZE);
  checked.struct_size = sizeof(checked);
  checked.next = NULL;
  bp_cost_estimate_t est;
  memset(&est, 0, sizeof(est));
  est.struct_size = sizeof(est);
  bp__clear_error();
  bp_status_t st = BP__NOTE_CALL(plugin, "estimate_cost", op->name,
                                 plugin->caps.estimate_cost(device->handle, &checked, &est));
  if (st != BP_OK) return bp__plugin_error(plugin, st, "cost estimate");
  est.struct_size = sizeof(est);
  if (est.confidence > 100) est.confidence = 100;
  return bp__out_struct_write(api, "bp_cost_estimate_t", out, &est, sizeof(est), BP__COST_FIRST_SIZE);
}
