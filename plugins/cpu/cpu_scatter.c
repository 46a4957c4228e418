/* backplane CPU plugin: the scatter kernel family. */
#include "cpu_internal.h"

static bp_status_t exec_scatter(const bp_op_call_t* call) {
  return cpu_error(BP_UNIMPLEMENTED, "cpu: op %s has no CPU kernel", cpu_op_name(call->op_id));
}

static int supported_scatter(const bp_op_call_t* call, char* msg, size_t cap) {
  (void)call, (void)msg, (void)cap;
  return BP_SUPPORT_OP;
}

/* No op yet. */
const cpu_family_t cpu_family_scatter = {"scatter", NULL, 0, exec_scatter, supported_scatter, 0};
