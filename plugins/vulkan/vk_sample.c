/* backplane Vulkan plugin: sample (shaders/sample.comp): greedy,
 * temperature, top-k and top-p over rows of logits, one workgroup per row,
 * counter-based like the CPU plugin (the same Philox word per row and the
 * same rule, docs/semantics.md "Sampling"). Any layout: the leading dims
 * index rows through their strides, the last dim through its stride. The
 * shader computes in double: devices without shaderFloat64 answer
 * unsupported.
 */
#include <string.h>

#include "vk_ops_internal.h"

static void sample_put64(uint32_t* w, const void* v) { memcpy(w, v, 8); }

bp_status_t vk_launch_sample(bpp_stream_t s, const bp_op_call_t* call) {
  const bp_tensor_desc_t *in = call->inputs[0], *out = call->outputs[0];
  const bp_sample_attrs_t* a = call->attrs;
  if (!a || in->rank == 0 || in->rank > 9 || out->rank + 1 != in->rank || out->dtype != BP_DTYPE_I64)
    return vk_error(BP_INVALID_ARGUMENT, "vulkan: sample: needs attrs, logits [..., V] and an i64 output [...]");
  uint64_t rows = 1, v = (uint64_t)in->sizes[in->rank - 1];
  for (uint32_t d = 0; d + 1 < in->rank; d++) rows *= (uint64_t)in->sizes[d];
  if (rows == 0) return BP_OK;
  if (rows > UINT32_MAX || v == 0 || v >= UINT32_MAX)
    return vk_error(BP_UNIMPLEMENTED, "vulkan: sample: %llu rows of %llu logits is too large",
                    (unsigned long long)rows, (unsigned long long)v);
  uint32_t meta[60];
  memset(meta, 0, sizeof meta);
  vk_meta64(&meta[0], vk_desc_addr(in));
  meta[2] = (uint32_t)rows;
  meta[3] = (uint32_t)v;
  meta[4] = in->rank - 1;
  meta[5] = a->top_k;
  vk_meta64(&meta[6], vk_desc_addr(out));
  sample_put64(&meta[8], &a->temperature);
  sample_put64(&meta[10], &a->top_p);
  vk_meta64(&meta[12], a->seed);
  vk_meta64(&meta[14], a->offset);
  sample_put64(&meta[16], &in->strides[in->rank - 1]);
  for (uint32_t d = 0; d + 1 < in->rank; d++) {
    meta[20 + d] = (uint32_t)in->sizes[d];
    sample_put64(&meta[28 + 2 * d], &in->strides[d]);
    sample_put64(&meta[44 + 2 * d], &out->strides[d]);
  }
  uint32_t spec[1] = {in->dtype};
  VkPipeline pipe;
  bp_status_t st = vk_pipeline_get(s->dev, VK_SHADER_sample, spec, 1, &pipe);
  if (st) return st;
  vk_access_t acc[2];
  vk_access_of(in, 0, &acc[0]);
  vk_access_of(out, 1, &acc[1]);
  uint32_t maxg = s->dev->feat.max_wg_count[0] ? s->dev->feat.max_wg_count[0] : 65535;
  if (maxg > 65535) maxg = 65535;
  uint32_t groups = rows < maxg ? (uint32_t)rows : maxg;
  return vk_stream_dispatch(s, pipe, meta, sizeof meta, 0, groups, 1, 1, acc, 2);
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
