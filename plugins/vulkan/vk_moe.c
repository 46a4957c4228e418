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
