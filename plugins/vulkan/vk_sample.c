/* backplane Vulkan plugin: the sampling family. sample (shaders/sample.comp): greedy,
 * temperature, top-k and top-p over rows of logits, one workgroup per row,
 * and top_k_top_p_mask (the same thresholds with a min-p cut, the logits
 * outside the kept set rewritten to -inf),
 * counter-based like the CPU plugin (the same Philox word per row and the
 * same rule, docs/semantics.md "Sampling"). Any layout: the leading dims
 * index rows through their strides, the last dim through its stride. The
 * shader computes in double: devices without shaderFloat64 answer
 * unsupported. repetition_penalty (shaders/penalty.comp): a copy of the
 * logits, then one rewrite per distinct id of each row's tokens, in double.
 */
#include <string.h>

#include "vk_ops_internal.h"

static void sample_put64(uint32_t* w, const void* v) { memcpy(w, v, 8); }

/* sample and top_k_top_p_mask (sample.comp's SC_MODE 0 and 1). */
bp_status_t vk_launch_sample(bpp_stream_t s, const bp_op_call_t* call) {
  const bp_tensor_desc_t *in = call->inputs[0], *out = call->outputs[0];
  int mask = call->op_id == BP_OP_top_k_top_p_mask;
  const char* name = mask ? "top_k_top_p_mask" : "sample";
  if (!call->attrs || in->rank == 0 || in->rank > 9 ||
      (mask ? out->rank != in->rank || out->dtype != in->dtype : out->rank + 1 != in->rank || out->dtype != BP_DTYPE_I64))
    return vk_error(BP_INVALID_ARGUMENT, "vulkan: %s: needs attrs, logits [..., V] and an output %s", name,
                    mask ? "like the logits" : "i64 [...]");
  uint64_t rows = 1, v = (uint64_t)in->sizes[in->rank - 1];
  for (uint32_t d = 0; d + 1 < in->rank; d++) rows *= (uint64_t)in->sizes[d];
  if (rows == 0 || (mask && v == 0)) return BP_OK;
  if (rows > UINT32_MAX || v == 0 || v >= UINT32_MAX)
    return vk_error(BP_UNIMPLEMENTED, "vulkan: %s: %llu rows of %llu logits is too large", name,
                    (unsigned long long)rows, (unsigned long long)v);
  uint32_t meta[62];
  memset(meta, 0, sizeof meta);
  vk_meta64(&meta[0], vk_desc_addr(in));
  meta[2] = (uint32_t)rows;
  meta[3] = (uint32_t)v;
  meta[4] = in->rank - 1;
  vk_meta64(&meta[6], vk_desc_addr(out));
  if (mask) {
    const bp_logits_mask_attrs_t* a = call->attrs;
    double one = 1.0; /* the logits are taken as already divided by the temperature */
    meta[5] = a->top_k;
    sample_put64(&meta[8], &one);
    sample_put64(&meta[10], &a->top_p);
    sample_put64(&meta[18], &out->strides[out->rank - 1]);
    sample_put64(&meta[60], &a->min_p);
  } else {
    const bp_sample_attrs_t* a = call->attrs;
    meta[5] = a->top_k;
    sample_put64(&meta[8], &a->temperature);
    sample_put64(&meta[10], &a->top_p);
    vk_meta64(&meta[12], a->seed);
    vk_meta64(&meta[14], a->offset);
  }
  sample_put64(&meta[16], &in->strides[in->rank - 1]);
  for (uint32_t d = 0; d + 1 < in->rank; d++) {
    meta[20 + d] = (uint32_t)in->sizes[d];
    sample_put64(&meta[28 + 2 * d], &in->strides[d]);
    sample_put64(&meta[44 + 2 * d], &out->strides[d]);
  }
  uint32_t spec[2] = {in->dtype, mask ? 1u : 0u};
  VkPipeline pipe;
  bp_status_t st = vk_pipeline_get(s->dev, VK_SHADER_sample, spec, 2, &pipe);
  if (st) return st;
  vk_access_t acc[2];
  vk_access_of(in, 0, &acc[0]);
  vk_access_of(out, 1, &acc[1]);
  return vk_stream_dispatch(s, pipe, meta, sizeof meta, 0, vk_groups_for(s->dev, rows), 1, 1, acc, 2);
}

int vk_sample_supported(struct bpp_device_s* d, const bp_op_call_t* call, char* msg, size_t cap) {
  uint32_t dt = call->inputs[0]->dtype;
  if (!bp_dtype_is_float(dt) || bp_dtype_is_fp8(dt)) {
    bp_plugin_format(msg, cap, 0, "%s logits: f32, f16, bf16 or f64 only", bp_dtype_name(dt));
    return BP_SUPPORT_DTYPE;
  }
  if (!d->feat.f64 || !d->feat.i64) {
    bp_plugin_format(msg, cap, 0, "the sampling kernel computes in double and int64 (shaderFloat64, shaderInt64)");
    return BP_SUPPORT_DEVICE;
  }
  if (call->inputs[0]->rank > 9) {
    bp_plugin_format(msg, cap, 0, "logits of rank %u: at most 8 leading dims", call->inputs[0]->rank);
    return BP_SUPPORT_RANK;
  }
  return 0;
}

bp_status_t vk_launch_penalty(bpp_stream_t s, const bp_op_call_t* call) {
  const bp_tensor_desc_t *in = call->inputs[0], *tok = call->inputs[1], *out = call->outputs[0];
  const bp_penalty_attrs_t* a = call->attrs;
  if (!a || in->rank == 0 || tok->rank == 0 || out->dtype != in->dtype)
    return vk_error(BP_INVALID_ARGUMENT, "vulkan: repetition_penalty: needs attrs, logits [..., V], tokens [..., L]");
  if (!vk_desc_dense(in) || !vk_desc_dense(tok) || !vk_desc_dense(out))
    return vk_error(BP_UNIMPLEMENTED, "vulkan: repetition_penalty takes dense operands (ask with query_support)");
  uint64_t v = (uint64_t)in->sizes[in->rank - 1], l = (uint64_t)tok->sizes[tok->rank - 1];
  uint64_t rows = v ? (uint64_t)bp_desc_numel(in) / v : 0;
  if (rows == 0) return BP_OK;
  if (rows * v > UINT32_MAX || rows * l > UINT32_MAX)
    return vk_error(BP_UNIMPLEMENTED, "vulkan: repetition_penalty: %llu rows of %llu logits is too large",
                    (unsigned long long)rows, (unsigned long long)v);
  uint32_t meta[18];
  memset(meta, 0, sizeof meta);
  vk_meta64(&meta[0], vk_desc_addr(in));
  vk_meta64(&meta[2], vk_desc_addr(tok));
  vk_meta64(&meta[4], vk_desc_addr(out));
  meta[6] = (uint32_t)rows;
  meta[7] = (uint32_t)v;
  meta[8] = (uint32_t)l;
  meta[10] = in->dtype;
  meta[11] = tok->dtype;
  sample_put64(&meta[12], &a->repetition);
  sample_put64(&meta[14], &a->presence);
  sample_put64(&meta[16], &a->frequency);
  VkPipeline pipe;
  bp_status_t st = vk_pipeline_get(s->dev, VK_SHADER_penalty, NULL, 0, &pipe);
  if (st) return st;
  vk_access_t acc[3];
  vk_access_of(in, 0, &acc[0]);
  vk_access_of(out, 1, &acc[1]);
  if (vk_desc_addr(in) != vk_desc_addr(out)) { /* mode 0: out = logits */
    uint64_t g = (rows * v + 255) / 256;
    st = vk_stream_dispatch(s, pipe, meta, sizeof meta, 0, vk_groups_for(s->dev, g), 1, 1, acc, 2);
    if (st || l == 0) return st;
  }
  meta[9] = 1u;
  vk_access_of(tok, 0, &acc[2]);
  uint64_t g = (rows * l + 255) / 256;
  if (g == 0) return BP_OK;
  return vk_stream_dispatch(s, pipe, meta, sizeof meta, 0, vk_groups_for(s->dev, g), 1, 1, acc, 3);
}

/* gather_logprobs (shaders/logprobs.comp): dense operands; logits [B, V],
 * token ids [B] i32/i64. */
bp_status_t vk_launch_logprobs(bpp_stream_t s, const bp_op_call_t* call) {
  const bp_tensor_desc_t *in = call->inputs[0], *tok = call->inputs[1];
  const bp_logprobs_attrs_t* a = call->attrs;
  if (!a || in->rank != 2 || tok->rank != 1 || call->num_outputs < 3 || a->num_logprobs > in->sizes[1])
    return vk_error(BP_INVALID_ARGUMENT, "vulkan: gather_logprobs: needs attrs, logits [B, V], token ids [B], k <= V");
  const bp_tensor_desc_t* ops[5] = {in, tok, call->outputs[0], call->outputs[1], call->outputs[2]};
  for (int k = 0; k < 5; k++)
    if (!vk_desc_dense(ops[k]))
      return vk_error(BP_UNIMPLEMENTED, "vulkan: gather_logprobs takes dense operands (ask with query_support)");
  uint64_t rows = (uint64_t)in->sizes[0], v = (uint64_t)in->sizes[1];
  if (rows == 0) return BP_OK;
  if (rows > INT32_MAX || v == 0 || v > INT32_MAX)
    return vk_error(BP_UNIMPLEMENTED, "vulkan: gather_logprobs: %llu rows of %llu logits", (unsigned long long)rows,
                    (unsigned long long)v);
  uint32_t meta[16];
  memset(meta, 0, sizeof meta);
  vk_meta64(&meta[0], vk_desc_addr(in));
  vk_meta64(&meta[2], vk_desc_addr(tok));
  vk_meta64(&meta[4], vk_desc_addr(call->outputs[0]));
  vk_meta64(&meta[6], vk_desc_addr(call->outputs[1]));
  vk_meta64(&meta[8], vk_desc_addr(call->outputs[2]));
  meta[10] = (uint32_t)rows;
  meta[11] = (uint32_t)v;
  meta[12] = a->num_logprobs;
  meta[13] = tok->dtype;
  meta[14] = call->outputs[0]->dtype;
  uint32_t spec[1] = {in->dtype};
  return vk_dispatch_operands(s, VK_SHADER_logprobs, spec, 1, meta, sizeof meta, vk_groups_for(s->dev, rows), ops, 2,
                              ops + 2, 3);
}

int vk_logprobs_supported(struct bpp_device_s* d, const bp_op_call_t* call, char* msg, size_t cap) {
  uint32_t it = call->inputs[1]->dtype, od = call->outputs[0]->dtype;
  if (it != BP_DTYPE_I32 && it != BP_DTYPE_I64) {
    bp_plugin_format(msg, cap, 0, "token ids must be i32 or i64, got %s", bp_dtype_name(it));
    return BP_SUPPORT_DTYPE;
  }
  if (od != BP_DTYPE_F32 && od != BP_DTYPE_F64) {
    bp_plugin_format(msg, cap, 0, "log-probabilities of %s: f32 or f64 only", bp_dtype_name(od));
    return BP_SUPPORT_DTYPE;
  }
  return vk_sample_supported(d, call, msg, cap); /* the logits' rule */
}
