/* backplane Vulkan plugin: the paged-cache index ops concat_and_cache_mla,
 * gather_cache and compute_slot_mapping (shaders/paged.comp). Dense operands
 * (the support answer sets requires_contiguous). The index values are read
 * on the device, where no error can be raised: a slot, position or block id
 * out of range leaves its element unwritten instead of failing the call
 * (docs/backends/vulkan.md, "Known limits").
 */
#include <string.h>

#include "vk_ops_internal.h"

static int paged_index_dtype(uint32_t dt) { return dt == BP_DTYPE_I32 || dt == BP_DTYPE_I64; }

int vk_paged_supported(struct bpp_device_s* d, const bp_op_call_t* call, char* msg, size_t cap) {
  (void)d;
  /* index operands: compute_slot_mapping all three, the others all but the data */
  for (uint32_t k = 0; k < call->num_inputs; k++) {
    const bp_tensor_desc_t* t = call->inputs[k];
    int is_index = call->op_id == BP_OP_compute_slot_mapping || (call->op_id == BP_OP_concat_and_cache_mla ? k == 3 : k > 0);
    if (t->dtype != BP_DTYPE_INVALID && is_index && !paged_index_dtype(t->dtype)) {
      bp_plugin_format(msg, cap, 0, "index operand %u must be i32 or i64, got %s", k, bp_dtype_name(t->dtype));
      return BP_SUPPORT_DTYPE;
    }
  }
  for (uint32_t k = 0; k < call->num_inputs + call->num_outputs; k++) {
    const bp_tensor_desc_t* t = k < call->num_inputs ? call->inputs[k] : call->outputs[k - call->num_inputs];
    if (bp_desc_numel(t) > INT32_MAX) {
      bp_plugin_format(msg, cap, 0, "more than 2^31 elements");
      return BP_SUPPORT_SIZE;
    }
  }
  return 0;
}

static bp_status_t paged_dense(const bp_op_call_t* call) {
  for (uint32_t k = 0; k < call->num_inputs + call->num_outputs; k++) {
    const bp_tensor_desc_t* t = k < call->num_inputs ? call->inputs[k] : call->outputs[k - call->num_inputs];
    if (t->dtype != BP_DTYPE_INVALID && !vk_desc_dense(t))
      return vk_error(BP_UNIMPLEMENTED, "vulkan: %s takes dense operands (ask with query_support)",
                      bp_kit_op_name(call->op_id));
  }
  return BP_OK;
}

static bp_status_t paged_dispatch(bpp_stream_t s, const bp_op_call_t* call, uint32_t op, const uint32_t* meta,
                                  size_t bytes, uint64_t items) {
  if (items == 0) return BP_OK;
  const bp_tensor_desc_t* reads[4] = {NULL, NULL, NULL, NULL};
  for (uint32_t k = 0; k < call->num_inputs && k < 4; k++)
    if (call->inputs[k]->dtype != BP_DTYPE_INVALID) reads[k] = call->inputs[k];
  return vk_dispatch_operands(s, VK_SHADER_paged, &op, 1, meta, bytes, vk_groups_for(s->dev, (items + 255) / 256),
                              reads, 4, call->outputs, 1);
}

bp_status_t vk_launch_paged(bpp_stream_t s, const bp_op_call_t* call) {
  bp_status_t st = paged_dense(call);
  if (st) return st;
  const bp_tensor_desc_t* const* in = call->inputs;
  const bp_tensor_desc_t* out = call->outputs[0];
  const char* name = bp_kit_op_name(call->op_id);
  uint32_t meta[20];
  memset(meta, 0, sizeof meta);
  if (call->op_id == BP_OP_concat_and_cache_mla) {
    const bp_tensor_desc_t *kv = in[0], *pe = in[1], *cache = in[2], *slot = in[3];
    if (kv->rank != 2 || pe->rank != 2 || cache->rank != 3 || slot->rank != 1)
      return vk_error(BP_INVALID_ARGUMENT, "vulkan: %s: kv_c [T, L], k_pe [T, R], kv_cache [NB, BS, L + R]", name);
    if (vk_desc_addr(out) != vk_desc_addr(cache) && (st = vk_ew_copy(s, out, cache))) return st;
    vk_meta64(&meta[0], vk_desc_addr(kv));
    vk_meta64(&meta[2], vk_desc_addr(pe));
    vk_meta64(&meta[4], vk_desc_addr(slot));
    vk_meta64(&meta[6], vk_desc_addr(out));
    meta[8] = (uint32_t)slot->sizes[0];
    meta[9] = (uint32_t)kv->sizes[1];
    meta[10] = (uint32_t)pe->sizes[1];
    meta[11] = (uint32_t)(cache->sizes[0] * cache->sizes[1]);
    meta[12] = slot->dtype;
    meta[13] = cache->dtype;
    return paged_dispatch(s, call, 0, meta, sizeof meta, (uint64_t)meta[8] * (meta[9] + meta[10]));
  }
  if (call->op_id == BP_OP_gather_cache) {
    const bp_tensor_desc_t *src = in[0], *bt = in[1], *cu = in[2];
    const bp_tensor_desc_t* ss = call->num_inputs > 3 && in[3]->dtype != BP_DTYPE_INVALID ? in[3] : NULL;
    if (src->rank < 2 || bt->rank != 2 || cu->rank != 1 || out->rank + 1 != src->rank)
      return vk_error(BP_INVALID_ARGUMENT, "vulkan: %s: src_cache [NB, BS, ...], block_table [B, MB], dst [N, ...]", name);
    uint64_t row = 1;
    for (uint32_t d = 2; d < src->rank; d++) row *= (uint64_t)src->sizes[d];
    vk_meta64(&meta[0], vk_desc_addr(src));
    vk_meta64(&meta[2], vk_desc_addr(bt));
    vk_meta64(&meta[4], vk_desc_addr(cu));
    vk_meta64(&meta[6], vk_desc_addr(out));
    if (ss) vk_meta64(&meta[8], vk_desc_addr(ss));
    meta[10] = (uint32_t)bt->sizes[0];
    meta[11] = (uint32_t)bt->sizes[1];
    meta[12] = (uint32_t)out->sizes[0];
    meta[13] = (uint32_t)src->sizes[1];
    meta[14] = (uint32_t)row;
    meta[15] = bt->dtype;
    meta[16] = cu->dtype;
    meta[17] = ss ? ss->dtype : 0u;
    meta[18] = (uint32_t)src->sizes[0];
    meta[19] = src->dtype;
    return paged_dispatch(s, call, 1, meta, sizeof meta, (uint64_t)meta[12] * row);
  }
  const bp_slot_mapping_attrs_t* a = call->attrs;
  const bp_tensor_desc_t *bt = in[0], *qsl = in[1], *pos = in[2];
  if (!a || a->block_size == 0 || bt->rank != 2 || qsl->rank != 1 || pos->rank != 1)
    return vk_error(BP_INVALID_ARGUMENT, "vulkan: %s: needs block_size >= 1, block_tables [S, MB], positions [T]", name);
  vk_meta64(&meta[0], vk_desc_addr(bt));
  vk_meta64(&meta[2], vk_desc_addr(qsl));
  vk_meta64(&meta[4], vk_desc_addr(pos));
  vk_meta64(&meta[6], vk_desc_addr(out));
  meta[8] = (uint32_t)bt->sizes[0];
  meta[9] = (uint32_t)bt->sizes[1];
  meta[10] = (uint32_t)pos->sizes[0];
  meta[11] = a->block_size;
  meta[12] = bt->dtype;
  meta[13] = qsl->dtype;
  meta[14] = pos->dtype;
  return paged_dispatch(s, call, 2, meta, sizeof meta, meta[10]);
}
