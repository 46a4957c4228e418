/* backplane gpu_common: rand, randn and dropout on the random kernel
 * (kernels/random.cl): the CPU plugin's Philox words per element, so rand
 * and dropout give the CPU's bits and randn its values within the device
 * math's ULP bounds. randperm is not here (it sorts the whole stream).
 */
#include <string.h>

#include "bp_gpu_ops.h"
#include "bp_kit.h"

int bp__gpu_random_implemented(uint32_t op) {
  return op == BP_OP_rand || op == BP_OP_randn || op == BP_OP_dropout;
}

int bp__gpu_random_supported(const bp_gpu_device_caps_t* caps, const bp_op_call_t* call, char* msg, size_t cap) {
  if (!bp__gpu_dtypes_ok(caps, call, msg, cap)) return BP_SUPPORT_DTYPE;
  if (!(caps->dtype_mask & BP_DTYPE_BIT(BP_DTYPE_F64))) {
    bp_plugin_format(msg, cap, 0, "the random kernel needs f64 on the device");
    return BP_SUPPORT_DTYPE;
  }
  const bp_tensor_desc_t* out = call->outputs[0];
  if (!bp_dtype_is_float(out->dtype)) {
    bp_plugin_format(msg, cap, 0, "output dtype %s", bp_dtype_name(out->dtype));
    return BP_SUPPORT_DTYPE;
  }
  if (call->op_id == BP_OP_dropout &&
      (call->inputs[0]->dtype != out->dtype || call->outputs[1]->dtype != BP_DTYPE_BOOL ||
       call->inputs[0]->rank != out->rank || call->outputs[1]->rank != out->rank)) {
    bp_plugin_format(msg, cap, 0, "dropout: input and output of one dtype and shape, a bool mask");
    return BP_SUPPORT_DTYPE;
  }
  return call->attrs ? 0 : BP_SUPPORT_ATTRIBUTE;
}

static uint32_t unit_bits(uint32_t d) {
  switch (d) {
    case BP_DTYPE_F64: return 53;
    case BP_DTYPE_F16: return 11;
    case BP_DTYPE_BF16: return 8;
    default: return 24;
  }
}

bp_status_t bp__gpu_random_run(const bp_gpu_device_caps_t* caps, const bp_op_call_t* call,
                               bp_gpu_launch_fn launch, void* ctx) {
  const bp_tensor_desc_t* out = call->outputs[0];
  const bp_random_attrs_t* at = call->attrs;
  bp_gpu_launch_t l;
  memset(&l, 0, sizeof l);
  bp_gpu_random_args_t* a = &l.args.random;
  a->numel = bp_desc_numel(out);
  if (a->numel == 0) return BP_OK;
  const bp_tensor_desc_t* ops[3] = {out, NULL, NULL};
  if (call->op_id == BP_OP_dropout) {
    ops[1] = call->outputs[1];
    ops[2] = call->inputs[0];
    /* evaluation mode: every element kept, scale 1 */
    a->p = at->train ? at->p : 0.0;
    a->scale = 1.0 - a->p == 0.0 ? 0.0 : 1.0 / (1.0 - a->p);
  }
  a->op = call->op_id;
  a->seed = at->seed;
  a->offset = at->offset;
  a->bits = unit_bits(out->dtype);
  a->rank = out->rank;
  for (uint32_t d = 0; d < out->rank; d++) a->sizes[d] = out->sizes[d];
  for (uint32_t k = 0; k < 3; k++) {
    if (!ops[k]) continue;
    for (uint32_t d = 0; d < out->rank; d++) a->strides[k][d] = ops[k]->strides[d];
    a->byte_offset[k] = (int64_t)ops[k]->byte_offset;
    a->dtypes[k] = ops[k]->dtype;
    l.operands[k] = ops[k];
  }
  l.program = BP_GPU_PROGRAM_random;
  l.num_operands = 3;
  bp__gpu_grid_1d(caps, ((uint64_t)a->numel + 255) / 256, 256, &l);
  l.args_size = sizeof *a;
  return launch(ctx, &l);
}
