/* backplane CPU plugin: the fused elementwise ops that Core ATen decomposes
 * (hardswish, hardsigmoid, softplus, mish, addcmul, lerp). They are
 * ordinary kernels of the elementwise driver (cpu_ew.c): one pass over
 * memory instead of the decomposition's several. */
#include "cpu_internal.h"

static int supported_fused_ew(const bp_op_call_t* call, char* msg, size_t cap) {
  return cpu_ew_supported(call, msg, cap);
}

const cpu_family_t cpu_family_fused_ew = {
    "fused_ew",
    CPU_FAMILY_OPS(BP_OP_hardswish, BP_OP_hardsigmoid, BP_OP_softplus, BP_OP_mish, BP_OP_addcmul,
                   BP_OP_lerp),
    cpu_exec_elementwise,
    supported_fused_ew,
    0,
};
