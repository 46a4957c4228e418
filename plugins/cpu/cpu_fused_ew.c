/* backplane CPU plugin: the fused_ew kernel family. */
#include "cpu_internal.h"

static bp_status_t exec_fused_ew(const bp_op_call_t* call) {
  return cpu_error(BP_UNIMPLEMENTED, "cpu: op %s has no CPU kernel", cpu_op_name(call->op_id));
}

static int supported_fused_ew(const bp_op_call_t* call, char* msg, size_t cap) {
  (void)call, (void)msg, (void)cap;
  return BP_SUPPORT_OP;
}

/* No op yet. */
const cpu_family_t cpu_family_fused_ew = {"fused_ew", NULL, 0, exec_fused_ew, supported_fused_ew, 0};
