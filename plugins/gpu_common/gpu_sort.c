/* backplane gpu_common: sort, topk and moe_topk_softmax on the rank kernel
 * (kernels/sort.cl).
 *
 * Rows are the positions of every dim but the sorted one; each operand
 * (input, values, indices) has its own strides over them and along the
 * sorted dim. topk keeps the first k ranks (sorted or not, the output is in
 * rank order, which is one of the orders unsorted topk allows).
 * moe_topk_softmax is topk (largest, ties to the lower expert) of each
 * token's router logits writing softmax probabilities as the values.
 */
#include <string.h>

#include "bp_gpu_ops.h"
#include "bp_kit.h"

/* Longest row the rank kernel takes: each element compares with its whole
 * row, so the work grows with the square of the row. */
#define SORT_MAX_COLS ((int64_t)1 << 17)

/* moe_topk_softmax renormalizes with O(E^2) work per element. */
#define MOE_MAX_EXPERTS 1024

int bp__gpu_sort_implemented(uint32_t op) {
  return op == BP_OP_sort || op == BP_OP_topk || op == BP_OP_moe_topk_softmax;
}

static int moe_supported(const bp_op_call_t* call, char* msg, size_t cap) {
  const bp_tensor_desc_t *in = call->inputs[0], *w = call->outputs[0], *ids = call->outputs[1];
  if (!bp_dtype_is_float(in->dtype) || !bp_dtype_is_float(w->dtype) ||
      (ids->dtype != BP_DTYPE_I64 && ids->dtype != BP_DTYPE_I32)) {
    bp_plugin_format(msg, cap, 0, "floating logits and weights, i32/i64 ids");
    return BP_SUPPORT_DTYPE;
  }
  const bp_moe_topk_attrs_t* a = call->attrs;
  if (!a || in->rank != 2 || w->rank != 2 || ids->rank != 2 || a->top_k < 1 || a->top_k > in->sizes[1]) {
    bp_plugin_format(msg, cap, 0, "router logits [T, E] and top_k in 1..E");
    return BP_SUPPORT_ATTRIBUTE;
  }
  if (in->sizes[1] > MOE_MAX_EXPERTS) {
    bp_plugin_format(msg, cap, 0, "%lld experts (the rank kernel takes %d)", (long long)in->sizes[1], MOE_MAX_EXPERTS);
    return BP_SUPPORT_SIZE;
  }
  return 0;
}

static int64_t sort_dim(const bp_op_call_t* call) {
  if (call->op_id == BP_OP_moe_topk_softmax) return 1;
  int32_t dim = call->op_id == BP_OP_sort ? ((const bp_sort_attrs_t*)call->attrs)->dim
                                          : ((const bp_topk_attrs_t*)call->attrs)->dim;
  int64_t wrap = call->inputs[0]->rank ? (int64_t)call->inputs[0]->rank : 1;
  int64_t d = dim < 0 ? dim + wrap : dim;
  return d < 0 || d >= wrap ? -1 : d;
}

int bp__gpu_sort_supported(const bp_gpu_device_caps_t* caps, const bp_op_call_t* call, char* msg, size_t cap) {
  if (!bp__gpu_dtypes_ok(caps, call, msg, cap)) return BP_SUPPORT_DTYPE;
  if (call->op_id == BP_OP_moe_topk_softmax) return moe_supported(call, msg, cap);
  const bp_tensor_desc_t *in = call->inputs[0], *val = call->outputs[0], *idx = call->outputs[1];
  if (val->dtype != in->dtype || idx->dtype != BP_DTYPE_I64 || bp_dtype_size(in->dtype) == 0 ||
      bp_dtype_size(in->dtype) > 8) {
    bp_plugin_format(msg, cap, 0, "values must have the input's dtype and indices int64");
    return BP_SUPPORT_DTYPE;
  }
  if (!call->attrs || sort_dim(call) < 0) {
    bp_plugin_format(msg, cap, 0, "dim out of range");
    return BP_SUPPORT_ATTRIBUTE;
  }
  int64_t n = in->rank ? in->sizes[sort_dim(call)] : 1;
  if (n > SORT_MAX_COLS) {
    bp_plugin_format(msg, cap, 0, "rows of %lld elements (the rank kernel takes at most %lld)", (long long)n,
                     (long long)SORT_MAX_COLS);
    return BP_SUPPORT_SIZE;
  }
  return 0;
}

bp_status_t bp__gpu_sort_run(const bp_gpu_device_caps_t* caps, const bp_op_call_t* call, bp_gpu_launch_fn launch,
                             void* ctx) {
  const bp_tensor_desc_t* ops[3] = {call->inputs[0], call->outputs[0], call->outputs[1]};
  const bp_tensor_desc_t* in = ops[0];
  int64_t dim = sort_dim(call);
  if (dim < 0) return BP_KIT_ERROR(BP_INVALID_ARGUMENT, "%s: dim out of range", bp_kit_op_name(call->op_id));
  bp_gpu_launch_t l;
  memset(&l, 0, sizeof l);
  bp_gpu_sort_args_t* a = &l.args.sort;
  a->ncols = in->rank ? in->sizes[dim] : 1;
  if (call->op_id == BP_OP_moe_topk_softmax) {
    const bp_moe_topk_attrs_t* m = call->attrs;
    a->k = m->top_k;
    a->descending = 1;
    a->moe = m->renormalize ? 2 : 1;
  } else {
    a->k = call->op_id == BP_OP_topk ? ((const bp_topk_attrs_t*)call->attrs)->k : a->ncols;
    a->descending = call->op_id == BP_OP_topk ? ((const bp_topk_attrs_t*)call->attrs)->largest != 0
                                              : ((const bp_sort_attrs_t*)call->attrs)->descending != 0;
  }
  if (a->k < 0 || a->k > a->ncols)
    return BP_KIT_ERROR(BP_INVALID_ARGUMENT, "%s: k %lld out of range", bp_kit_op_name(call->op_id), (long long)a->k);
  a->nrows = 1;
  for (uint32_t d = 0; d < in->rank; d++) {
    if ((int64_t)d == dim) continue;
    a->row_sizes[a->row_rank] = in->sizes[d];
    for (uint32_t k = 0; k < 3; k++) a->row_strides[k][a->row_rank] = ops[k]->strides[d];
    a->row_rank++;
    a->nrows *= in->sizes[d];
  }
  for (uint32_t k = 0; k < 3; k++) {
    a->col_stride[k] = in->rank ? ops[k]->strides[dim] : 0;
    a->byte_offset[k] = (int64_t)ops[k]->byte_offset;
    a->dtypes[k] = ops[k]->dtype;
    l.operands[k] = ops[k];
  }
  if (a->nrows == 0 || a->k == 0) return BP_OK;
  l.program = BP_GPU_PROGRAM_sort;
  l.num_operands = 3;
  uint64_t total = (uint64_t)a->nrows * (uint64_t)a->ncols;
  bp__gpu_grid_1d(caps, (total + 63) / 64, 64, &l);
  l.args_size = sizeof *a;
  return launch(ctx, &l);
}
