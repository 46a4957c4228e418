/* backplane Vulkan plugin: rotary_embedding_pos (shaders/rope.comp; vLLM's
 * rotary_embedding(positions, query, key, head_size, cos_sin_cache,
 * is_neox)). Dense operands (the support answer sets requires_contiguous);
 * each output may be its input. Positions are read on the device, so one
 * outside the cache is not reported: that token's outputs are left as they
 * were (docs/backends/vulkan.md, "Known limits").
 */
#include <string.h>

#include "vk_ops_internal.h"

static int rope_float_ok(struct bpp_device_s* d, uint32_t dt) {
  return bp_dtype_is_float(dt) && (vk_compute_dtype_mask(d) & BP_DTYPE_BIT(dt));
}

int vk_rope_supported(struct bpp_device_s* d, const bp_op_call_t* call, char* msg, size_t cap) {
  const bp_tensor_desc_t *q = call->inputs[0], *pos = call->inputs[2], *cs = call->inputs[3];
  if (!rope_float_ok(d, q->dtype) || (cs->dtype != q->dtype && cs->dtype != BP_DTYPE_F32)) {
    bp_plugin_format(msg, cap, 0, "query %s, cache %s: f32, f16, bf16 or f64 with a cache of that dtype or f32",
                     bp_dtype_name(q->dtype), bp_dtype_name(cs->dtype));
    return BP_SUPPORT_DTYPE;
  }
  if (pos->dtype != BP_DTYPE_I32 && pos->dtype != BP_DTYPE_I64) {
    bp_plugin_format(msg, cap, 0, "positions must be i32 or i64, got %s", bp_dtype_name(pos->dtype));
    return BP_SUPPORT_DTYPE;
  }
  if (!d->feat.f64 || !d->feat.i64) {
    bp_plugin_format(msg, cap, 0, "the kernel computes in double and int64 (shaderFloat64, shaderInt64)");
    return BP_SUPPORT_DEVICE;
  }
  if (bp_desc_numel(q) + bp_desc_numel(call->inputs[1]) > INT32_MAX) {
    bp_plugin_format(msg, cap, 0, "more than 2^31 elements");
    return BP_SUPPORT_SIZE;
  }
  return 0;
}

bp_status_t vk_launch_rope(bpp_stream_t s, const bp_op_call_t* call) {
  const bp_qkv_rotary_attrs_t* a = call->attrs;
  const bp_tensor_desc_t *q = call->inputs[0], *k = call->inputs[1], *pos = call->inputs[2], *cs = call->inputs[3];
  const bp_tensor_desc_t *qo = call->outputs[0], *ko = call->outputs[1];
  if (!a || a->num_heads == 0 || a->num_kv_heads == 0 || q->rank < 2 || cs->rank != 2 || pos->rank != 1)
    return vk_error(BP_INVALID_ARGUMENT, "vulkan: rotary_embedding_pos: needs attrs with heads, query [T, ...], "
                                         "positions [T] and a cache [P, R]");
  const bp_tensor_desc_t* ops[6] = {q, k, pos, cs, qo, ko};
  for (int i = 0; i < 6; i++)
    if (!vk_desc_dense(ops[i]))
      return vk_error(BP_UNIMPLEMENTED, "vulkan: rotary_embedding_pos takes dense operands (ask with query_support)");
  uint64_t T = (uint64_t)pos->sizes[0], H = a->num_heads, Hkv = a->num_kv_heads;
  uint64_t D = q->rank == 3 ? (uint64_t)q->sizes[2] : (uint64_t)q->sizes[1] / H, R = (uint64_t)cs->sizes[1];
  if (R % 2 || R > D)
    return vk_error(BP_INVALID_ARGUMENT, "vulkan: rotary_embedding_pos: rotary dim %llu odd or past the head size %llu",
                    (unsigned long long)R, (unsigned long long)D);
  uint64_t total = T * (H + Hkv) * (D - R / 2);
  if (total == 0) return BP_OK;
  if (total > INT32_MAX || (uint64_t)cs->sizes[0] > UINT32_MAX)
    return vk_error(BP_UNIMPLEMENTED, "vulkan: rotary_embedding_pos: too large");
  uint32_t meta[22];
  memset(meta, 0, sizeof meta);
  vk_meta64(&meta[0], vk_desc_addr(q));
  vk_meta64(&meta[2], vk_desc_addr(k));
  vk_meta64(&meta[4], vk_desc_addr(pos));
  vk_meta64(&meta[6], vk_desc_addr(cs));
  vk_meta64(&meta[8], vk_desc_addr(qo));
  vk_meta64(&meta[10], vk_desc_addr(ko));
  meta[12] = (uint32_t)T;
  meta[13] = (uint32_t)H;
  meta[14] = (uint32_t)Hkv;
  meta[15] = (uint32_t)D;
  meta[16] = (uint32_t)R;
  meta[17] = a->interleaved ? 1u : 0u;
  meta[18] = pos->dtype;
  meta[19] = cs->dtype;
  meta[20] = (uint32_t)cs->sizes[0];
  uint32_t spec[1] = {q->dtype};
  return vk_dispatch_operands(s, VK_SHADER_rope, spec, 1, meta, sizeof meta, vk_groups_for(s->dev, (total + 255) / 256),
                              ops, 4, ops + 4, 2);
}
