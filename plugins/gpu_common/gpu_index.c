/* backplane gpu_common: gather, index_select and embedding on the one
 * gather kernel (kernels/index.cl). Each op sets the source strides over
 * the output's dims (0 on the indexed dim), the index strides (0 where the
 * index does not vary) and the stride of the indexed source dim.
 */
#include <string.h>

#include "bp_gpu_ops.h"
#include "bp_kit.h"

int bp__gpu_index_implemented(uint32_t op) {
  return op == BP_OP_gather || op == BP_OP_index_select || op == BP_OP_embedding;
}

int bp__gpu_index_supported(const bp_gpu_device_caps_t* caps, const bp_op_call_t* call, char* msg, size_t cap) {
  if (!bp__gpu_dtypes_ok(caps, call, msg, cap)) return BP_SUPPORT_DTYPE;
  const bp_tensor_desc_t* src = call->inputs[0];
  const bp_tensor_desc_t* idx = call->inputs[1];
  const bp_tensor_desc_t* out = call->outputs[0];
  if (idx->dtype != BP_DTYPE_I64 && idx->dtype != BP_DTYPE_I32) {
    bp_plugin_format(msg, cap, 0, "%s indices", bp_dtype_name(idx->dtype));
    return BP_SUPPORT_DTYPE;
  }
  if (src->dtype != out->dtype || bp_dtype_size(src->dtype) == 0 || bp_dtype_size(src->dtype) > 8) {
    bp_plugin_format(msg, cap, 0, "source and output dtypes differ");
    return BP_SUPPORT_DTYPE;
  }
  if (call->op_id == BP_OP_embedding) {
    if (src->rank != 2 || out->rank != idx->rank + 1 || out->rank > BP_MAX_RANK) {
      bp_plugin_format(msg, cap, 0, "embedding needs a 2-d weight");
      return BP_SUPPORT_RANK;
    }
  } else if (src->rank != out->rank) {
    bp_plugin_format(msg, cap, 0, "source rank %u, output rank %u", src->rank, out->rank);
    return BP_SUPPORT_RANK;
  }
  return 0;
}

bp_status_t bp__gpu_index_run(const bp_gpu_device_caps_t* caps, const bp_op_call_t* call,
                              bp_gpu_launch_fn launch, void* ctx) {
  const bp_tensor_desc_t* src = call->inputs[0];
  const bp_tensor_desc_t* idx = call->inputs[1];
  const bp_tensor_desc_t* out = call->outputs[0];
  bp_gpu_launch_t l;
  memset(&l, 0, sizeof l);
  bp_gpu_index_args_t* a = &l.args.index;
  int64_t numel = 1;
  for (uint32_t d = 0; d < out->rank; d++) {
    a->sizes[d] = out->sizes[d];
    a->strides[2][d] = out->strides[d];
    numel *= out->sizes[d];
  }
  if (numel == 0) return BP_OK;
  a->numel = numel;
  a->rank = out->rank;
  if (call->op_id == BP_OP_embedding) {
    /* out[i..., j] = weight[idx[i...], j] */
    for (uint32_t d = 0; d < idx->rank; d++) a->strides[1][d] = idx->strides[d];
    a->strides[0][out->rank - 1] = src->strides[1];
    a->src_dim_stride = src->strides[0];
    a->src_dim_size = src->sizes[0];
  } else {
    int64_t dim = ((const bp_dim_attrs_t*)call->attrs)->dim;
    int64_t wrap = out->rank ? (int64_t)out->rank : 1;
    if (dim < 0) dim += wrap;
    if (dim < 0 || dim >= wrap)
      return BP_KIT_ERROR(BP_INVALID_ARGUMENT, "%s: dim out of range", bp_kit_op_name(call->op_id));
    for (uint32_t d = 0; d < out->rank; d++) {
      a->strides[0][d] = (int64_t)d == dim ? 0 : src->strides[d];
      if (call->op_id == BP_OP_gather) a->strides[1][d] = d < idx->rank ? idx->strides[d] : 0;
      else a->strides[1][d] = (int64_t)d == dim && idx->rank ? idx->strides[0] : 0;
    }
    a->src_dim_stride = src->rank ? src->strides[dim] : 0;
    a->src_dim_size = src->rank ? src->sizes[dim] : 1;
  }
  const bp_tensor_desc_t* ops[3] = {src, idx, out};
  for (uint32_t k = 0; k < 3; k++) {
    l.operands[k] = ops[k];
    a->byte_offset[k] = (int64_t)ops[k]->byte_offset;
    a->dtypes[k] = ops[k]->dtype;
  }
  l.program = BP_GPU_PROGRAM_index;
  l.num_operands = 3;
  bp__gpu_grid_1d(caps, ((uint64_t)numel + 255) / 256, 256, &l);
  l.args_size = sizeof *a;
  return launch(ctx, &l);
}
