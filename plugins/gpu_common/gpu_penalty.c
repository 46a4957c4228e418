/* backplane gpu_common: repetition_penalty on the penalty kernel
 * (kernels/penalty.cl): logits [..., V] and tokens [..., L] share their
 * leading dims (the rows); the output is like the logits.
 */
#include <string.h>

#include "bp_gpu_ops.h"
#include "bp_kit.h"

int bp__gpu_penalty_implemented(uint32_t op) { return op == BP_OP_repetition_penalty; }

int bp__gpu_penalty_supported(const bp_gpu_device_caps_t* caps, const bp_op_call_t* call, char* msg, size_t cap) {
  if (!bp__gpu_dtypes_ok(caps, call, msg, cap)) return BP_SUPPORT_DTYPE;
  const bp_tensor_desc_t *in = call->inputs[0], *tok = call->inputs[1], *out = call->outputs[0];
  if (!bp_dtype_is_float(in->dtype) || out->dtype != in->dtype ||
      (tok->dtype != BP_DTYPE_I32 && tok->dtype != BP_DTYPE_I64)) {
    bp_plugin_format(msg, cap, 0, "floating logits and output of one dtype, i32/i64 tokens");
    return BP_SUPPORT_DTYPE;
  }
  if (!call->attrs || in->rank < 1 || tok->rank != in->rank || out->rank != in->rank) {
    bp_plugin_format(msg, cap, 0, "logits [..., V] and tokens [..., L] of one rank");
    return BP_SUPPORT_RANK;
  }
  for (uint32_t d = 0; d + 1 < in->rank; d++)
    if (tok->sizes[d] != in->sizes[d]) {
      bp_plugin_format(msg, cap, 0, "tokens' leading dims differ from the logits'");
      return BP_SUPPORT_RANK;
    }
  return 0;
}

bp_status_t bp__gpu_penalty_run(const bp_gpu_device_caps_t* caps, const bp_op_call_t* call,
                                bp_gpu_launch_fn launch, void* ctx) {
  const bp_tensor_desc_t* ops[3] = {call->inputs[0], call->inputs[1], call->outputs[0]};
  const bp_penalty_attrs_t* at = call->attrs;
  bp_gpu_launch_t l;
  memset(&l, 0, sizeof l);
  bp_gpu_penalty_args_t* a = &l.args.penalty;
  uint32_t last = ops[0]->rank - 1;
  a->V = ops[0]->sizes[last];
  a->L = ops[1]->sizes[last];
  a->nrows = 1;
  a->row_rank = last;
  for (uint32_t d = 0; d < last; d++) {
    a->row_sizes[d] = ops[0]->sizes[d];
    a->nrows *= ops[0]->sizes[d];
  }
  for (uint32_t k = 0; k < 3; k++) {
    for (uint32_t d = 0; d < last; d++) a->row_strides[k][d] = ops[k]->strides[d];
    a->col_stride[k] = ops[k]->strides[last];
    a->byte_offset[k] = (int64_t)ops[k]->byte_offset;
    a->dtypes[k] = ops[k]->dtype;
    l.operands[k] = ops[k];
  }
  a->repetition = at->repetition == 0.0 ? 1.0 : at->repetition;
  a->presence = at->presence;
  a->frequency = at->frequency;
  if (a->nrows == 0 || a->V == 0) return BP_OK;
  l.program = BP_GPU_PROGRAM_penalty;
  l.num_operands = 3;
  bp__gpu_grid_1d(caps, ((uint64_t)(a->nrows * a->V) + 255) / 256, 256, &l);
  l.args_size = sizeof *a;
  return launch(ctx, &l);
}
