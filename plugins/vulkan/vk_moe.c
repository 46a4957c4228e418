/* backplane Vulkan plugin: moe_align_block_size (shaders/moe_align.comp; the
 * layout of vLLM's fused-MoE block GEMM). One workgroup: the experts'
 * offsets live in its shared memory, so at most 4095 experts (the support
 * answer). Dense operands (requires_contiguous).
 */
#include <string.h>

#include "vk_ops_internal.h"

#define VK_MOE_ALIGN_MAX_EXPERTS 4095u /* moe_align.comp's MAX_E */

int vk_moe_align_supported(struct bpp_device_s* d, const bp_op_call_t* call, char* msg, size_t cap) {
  (void)d;
  const bp_moe_align_attrs_t* a = call->attrs;
  uint32_t it = call->inputs[0]->dtype;
  if (it != BP_DTYPE_I32 && it != BP_DTYPE_I64) {
    bp_plugin_format(msg, cap, 0, "topk_ids must be i32 or i64, got %s", bp_dtype_name(it));
    return BP_SUPPORT_DTYPE;
  }
  if (a && a->num_experts > VK_MOE_ALIGN_MAX_EXPERTS) {
    bp_plugin_format(msg, cap, 0, "%u experts: at most %u (one workgroup's shared memory)", a->num_experts,
                     VK_MOE_ALIGN_MAX_EXPERTS);
    return BP_SUPPORT_SIZE;
  }
  return 0;
}

bp_status_t vk_launch_moe_align(bpp_stream_t s, const bp_op_call_t* call) {
  const bp_moe_align_attrs_t* a = call->attrs;
  const bp_tensor_desc_t* ids = call->inputs[0];
  if (!a || a->num_experts == 0 || a->num_experts > VK_MOE_ALIGN_MAX_EXPERTS || a->block_size == 0 ||
      call->num_outputs < 3)
    return vk_error(BP_INVALID_ARGUMENT, "vulkan: moe_align_block_size: needs 1..%u experts and block_size >= 1",
                    VK_MOE_ALIGN_MAX_EXPERTS);
  const bp_tensor_desc_t* ops[4] = {ids, call->outputs[0], call->outputs[1], call->outputs[2]};
  for (int k = 0; k < 4; k++)
    if (!vk_desc_dense(ops[k]))
      return vk_error(BP_UNIMPLEMENTED, "vulkan: moe_align_block_size takes dense operands (ask with query_support)");
  int64_t n = bp_desc_numel(ids), p = bp_desc_numel(call->outputs[0]);
  if (n > INT32_MAX || p > INT32_MAX) return vk_error(BP_UNIMPLEMENTED, "vulkan: moe_align_block_size: too large");
  uint32_t meta[14];
  memset(meta, 0, sizeof meta);
  vk_meta64(&meta[0], vk_desc_addr(ids));
  vk_meta64(&meta[2], vk_desc_addr(call->outputs[0]));
  vk_meta64(&meta[4], vk_desc_addr(call->outputs[1]));
  vk_meta64(&meta[6], vk_desc_addr(call->outputs[2]));
  meta[8] = (uint32_t)n;
  meta[9] = a->num_experts;
  meta[10] = a->block_size;
  meta[11] = (uint32_t)p;
  meta[12] = ids->dtype;
  return vk_dispatch_operands(s, VK_SHADER_moe_align, NULL, 0, meta, sizeof meta, 1, ops, 1, ops + 1, 3);
}

/* grouped_topk (shaders/grouped_topk.comp): one workgroup per token; the
 * kept groups and the selected experts live in its shared memory. */
#define VK_GROUPED_TOPK_MAX_GROUPS 1024u /* grouped_topk.comp's MAX_G */
#define VK_GROUPED_TOPK_MAX_K 256u       /* and MAX_K */

int vk_grouped_topk_supported(struct bpp_device_s* d, const bp_op_call_t* call, char* msg, size_t cap) {
  const bp_grouped_topk_attrs_t* a = call->attrs;
  const bp_tensor_desc_t* g = call->inputs[0];
  const bp_tensor_desc_t* b = call->num_inputs > 1 && call->inputs[1]->dtype != BP_DTYPE_INVALID ? call->inputs[1] : NULL;
  if (!bp_dtype_is_float(g->dtype) || bp_dtype_is_fp8(g->dtype) || (b && (!bp_dtype_is_float(b->dtype) || bp_dtype_is_fp8(b->dtype)))) {
    bp_plugin_format(msg, cap, 0, "gating %s: f32, f16, bf16 or f64 only", bp_dtype_name(g->dtype));
    return BP_SUPPORT_DTYPE;
  }
  if (!d->feat.f64 || !d->feat.i64) {
    bp_plugin_format(msg, cap, 0, "the kernel computes in double and int64 (shaderFloat64, shaderInt64)");
    return BP_SUPPORT_DEVICE;
  }
  if (a && (a->num_expert_group > VK_GROUPED_TOPK_MAX_GROUPS || a->top_k > VK_GROUPED_TOPK_MAX_K)) {
    bp_plugin_format(msg, cap, 0, "%u groups, top %u: at most %u groups and top %u (one workgroup's shared memory)",
                     a->num_expert_group, a->top_k, VK_GROUPED_TOPK_MAX_GROUPS, VK_GROUPED_TOPK_MAX_K);
    return BP_SUPPORT_SIZE;
  }
  return 0;
}

bp_status_t vk_launch_grouped_topk(bpp_stream_t s, const bp_op_call_t* call) {
  const bp_grouped_topk_attrs_t* a = call->attrs;
  const bp_tensor_desc_t* g = call->inputs[0];
  const bp_tensor_desc_t* b = call->num_inputs > 1 && call->inputs[1]->dtype != BP_DTYPE_INVALID ? call->inputs[1] : NULL;
  const bp_tensor_desc_t *w = call->outputs[0], *ids = call->outputs[1];
  uint32_t G = a && a->num_expert_group > 1 ? a->num_expert_group : 1u;
  if (!a || g->rank != 2 || a->top_k == 0 || a->top_k > VK_GROUPED_TOPK_MAX_K || G > VK_GROUPED_TOPK_MAX_GROUPS ||
      g->sizes[1] % G || g->sizes[1] > INT32_MAX || g->sizes[0] > INT32_MAX)
    return vk_error(BP_INVALID_ARGUMENT, "vulkan: grouped_topk: needs attrs, gating [T, E] with G | E, 1 <= top_k <= %u",
                    VK_GROUPED_TOPK_MAX_K);
  const bp_tensor_desc_t* ops[4] = {g, b, w, ids};
  for (int k = 0; k < 4; k++)
    if (ops[k] && !vk_desc_dense(ops[k]))
      return vk_error(BP_UNIMPLEMENTED, "vulkan: grouped_topk takes dense operands (ask with query_support)");
  if (g->sizes[0] == 0) return BP_OK;
  uint32_t meta[20];
  memset(meta, 0, sizeof meta);
  vk_meta64(&meta[0], vk_desc_addr(g));
  if (b) vk_meta64(&meta[2], vk_desc_addr(b));
  vk_meta64(&meta[4], vk_desc_addr(w));
  vk_meta64(&meta[6], vk_desc_addr(ids));
  meta[8] = (uint32_t)g->sizes[0];
  meta[9] = (uint32_t)g->sizes[1];
  meta[10] = a->top_k;
  meta[11] = G;
  meta[12] = a->topk_group && a->topk_group < G ? a->topk_group : G;
  meta[13] = a->scoring_func == BP_MOE_SCORING_SIGMOID;
  meta[14] = a->renormalize != 0;
  meta[15] = b ? b->dtype : 0u;
  meta[16] = w->dtype;
  double scale = a->routed_scaling_factor != 0.0 ? a->routed_scaling_factor : 1.0;
  memcpy(&meta[18], &scale, 8);
  uint32_t spec[1] = {g->dtype};
  return vk_dispatch_operands(s, VK_SHADER_grouped_topk, spec, 1, meta, sizeof meta,
                              vk_groups_for(s->dev, (uint64_t)g->sizes[0]), ops, 2, ops + 2, 2);
}
