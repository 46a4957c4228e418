/* backplane Vulkan plugin: a row's layer result quantized per group
 * (shaders/norm_quant.comp, docs/semantics.md "Fused quantization" and
 * "Group quantization"): rms_norm_quant, add_rms_norm_quant, swiglu_quant
 * (one group per row, static or dynamic scale) and per_token_group_quant,
 * rms_norm_group_quant, swiglu_group_quant (groups of G elements). Codes
 * are i8, float8_e4m3fn or float8_e5m2 bytes; the plugin declares no fp8
 * storage, but these kernels only write the codes as bytes, so the support
 * answer accepts the code output's fp8 dtype here. Operands are dense (the
 * support answer sets requires_contiguous). The kernel computes in double
 * and int64: devices without shaderFloat64 or shaderInt64 answer
 * unsupported.
 */
#include <string.h>

#include "vk_ops_internal.h"

/* Where the operands of one op are (-1: absent). */
typedef struct nq_layout {
  uint32_t layer; /* norm_quant.comp's SC_LAYER: 0 identity, 1 rms_norm, 2 silu(gate) * up */
  int group;      /* attrs are bp_group_quant_attrs_t (else bp_fused_quant_attrs_t) */
  int res, weight, scale; /* inputs: residual, weight, static scale */
  int res_out, scales;    /* outputs */
} nq_layout_t;

static int nq_layout(uint32_t op, nq_layout_t* l) {
  static const struct {
    uint32_t op;
    nq_layout_t l;
  } k_ops[] = {
      {BP_OP_rms_norm_quant, {1, 0, -1, 1, 2, -1, 1}},
      {BP_OP_add_rms_norm_quant, {1, 0, 1, 2, 3, 1, 2}},
      {BP_OP_swiglu_quant, {2, 0, -1, -1, 1, -1, 1}},
      {BP_OP_per_token_group_quant, {0, 1, -1, -1, -1, -1, 1}},
      {BP_OP_rms_norm_group_quant, {1, 1, -1, 1, -1, -1, 1}},
      {BP_OP_swiglu_group_quant, {2, 1, -1, -1, -1, -1, 1}},
  };
  for (size_t i = 0; i < sizeof k_ops / sizeof k_ops[0]; i++)
    if (k_ops[i].op == op) {
      if (l) *l = k_ops[i].l;
      return 1;
    }
  return 0;
}

int vk_norm_quant_op(uint32_t op) { return nq_layout(op, NULL); }

static const bp_tensor_desc_t* nq_opt(const bp_tensor_desc_t* const* t, uint32_t count, int i) {
  return i >= 0 && (uint32_t)i < count && t[i]->dtype != BP_DTYPE_INVALID ? t[i] : NULL;
}

static uint32_t nq_qdtype(const bp_op_call_t* call, const nq_layout_t* l) {
  if (!call->attrs) return BP_DTYPE_INVALID;
  return l->group ? ((const bp_group_quant_attrs_t*)call->attrs)->qdtype
                  : ((const bp_fused_quant_attrs_t*)call->attrs)->qdtype;
}

/* A float dtype with storage on this device (fp8 never: no fp8 data). */
static int nq_float_ok(struct bpp_device_s* d, uint32_t dt) {
  return bp_dtype_is_float(dt) && !bp_dtype_is_fp8(dt) && dt < 64 && (d->props.dtype_mask & BP_DTYPE_BIT(dt));
}

int vk_norm_quant_supported(struct bpp_device_s* d, const bp_op_call_t* call, char* msg, size_t cap) {
  nq_layout_t l;
  if (!nq_layout(call->op_id, &l) || call->num_outputs <= (uint32_t)l.scales || call->num_inputs < 1) {
    bp_plugin_format(msg, cap, 0, "missing operands");
    return BP_SUPPORT_OP;
  }
  uint32_t q = nq_qdtype(call, &l);
  if (q != BP_DTYPE_I8 && q != BP_DTYPE_F8E4M3FN && q != BP_DTYPE_F8E5M2) {
    bp_plugin_format(msg, cap, 0, "codes of %s: i8, float8_e4m3fn or float8_e5m2 only", bp_dtype_name(q));
    return BP_SUPPORT_DTYPE;
  }
  const bp_tensor_desc_t* in = call->inputs[0];
  const bp_tensor_desc_t* res = nq_opt(call->inputs, call->num_inputs, l.res);
  const bp_tensor_desc_t* w = nq_opt(call->inputs, call->num_inputs, l.weight);
  const bp_tensor_desc_t* sc = nq_opt(call->inputs, call->num_inputs, l.scale);
  const bp_tensor_desc_t* ro = nq_opt(call->outputs, call->num_outputs, l.res_out);
  if (!nq_float_ok(d, in->dtype) || (w && !nq_float_ok(d, w->dtype))) {
    bp_plugin_format(msg, cap, 0, "input %s, weight %s: f32, f16, bf16 or f64 only", bp_dtype_name(in->dtype),
                     w ? bp_dtype_name(w->dtype) : "none");
    return BP_SUPPORT_DTYPE;
  }
  if ((res && res->dtype != in->dtype) || (ro && ro->dtype != in->dtype)) {
    bp_plugin_format(msg, cap, 0, "residual and residual_out must have the input's dtype %s", bp_dtype_name(in->dtype));
    return BP_SUPPORT_DTYPE;
  }
  if ((sc && sc->dtype != BP_DTYPE_F32) || call->outputs[0]->dtype != q ||
      call->outputs[l.scales]->dtype != BP_DTYPE_F32) {
    bp_plugin_format(msg, cap, 0, "codes must be %s, scales f32", bp_dtype_name(q));
    return BP_SUPPORT_DTYPE;
  }
  if (!d->feat.f64 || !d->feat.i64) {
    bp_plugin_format(msg, cap, 0, "the kernel computes in double and int64 (shaderFloat64, shaderInt64)");
    return BP_SUPPORT_DEVICE;
  }
  if (in->rank > 0 && (bp_desc_numel(in) > INT32_MAX || in->sizes[in->rank - 1] > INT32_MAX)) {
    bp_plugin_format(msg, cap, 0, "more than 2^31 elements");
    return BP_SUPPORT_SIZE;
  }
  return 0;
}

bp_status_t vk_launch_norm_quant(bpp_stream_t s, const bp_op_call_t* call) {
  nq_layout_t l;
  if (!nq_layout(call->op_id, &l) || !call->attrs || call->num_outputs <= (uint32_t)l.scales)
    return vk_error(BP_INVALID_ARGUMENT, "vulkan: op %u: not a fused or group quantization with attrs", call->op_id);
  const bp_tensor_desc_t *in = call->inputs[0], *out = call->outputs[0], *scales = call->outputs[l.scales];
  const bp_tensor_desc_t* res = nq_opt(call->inputs, call->num_inputs, l.res);
  const bp_tensor_desc_t* w = nq_opt(call->inputs, call->num_inputs, l.weight);
  const bp_tensor_desc_t* sc = nq_opt(call->inputs, call->num_inputs, l.scale);
  const bp_tensor_desc_t* ro = nq_opt(call->outputs, call->num_outputs, l.res_out);
  const char* name = bp_kit_op_name(call->op_id);
  if (in->rank == 0 || (l.res >= 0 && (!res || !ro)))
    return vk_error(BP_INVALID_ARGUMENT, "vulkan: %s: needs an input with rows (and residual operands)", name);
  const bp_tensor_desc_t* ops[6] = {in, res, w, sc, out, ro};
  for (int k = 0; k < 6; k++)
    if (ops[k] && !vk_desc_dense(ops[k]))
      return vk_error(BP_UNIMPLEMENTED, "vulkan: %s takes dense operands (ask with query_support)", name);
  uint64_t n = (uint64_t)in->sizes[in->rank - 1], m = l.layer == 2 ? n / 2 : n;
  uint64_t g = m, rows = n ? (uint64_t)bp_desc_numel(in) / n : 0;
  uint32_t flags = 0, q;
  double norm_eps = 0.0, floor = 0.0, ub = 0.0;
  if (l.group) {
    const bp_group_quant_attrs_t* a = call->attrs;
    q = a->qdtype;
    g = a->group_size;
    if (g == 0 || m % g)
      return vk_error(BP_INVALID_ARGUMENT, "vulkan: %s: group_size %u does not divide rows of %llu", name,
                      a->group_size, (unsigned long long)m);
    flags |= 16u; /* always saturating */
    if (a->flags & BP_GROUP_QUANT_COLUMN_MAJOR) flags |= 4u;
    if (a->flags & BP_GROUP_QUANT_SCALE_UE8M0) flags |= 8u;
    floor = a->eps > 0.0 ? a->eps : 1e-10;
    norm_eps = a->norm_eps > 0.0 ? a->norm_eps : vk_dtype_eps(in->dtype);
  } else {
    const bp_fused_quant_attrs_t* a = call->attrs;
    q = a->qdtype;
    if (!(a->flags & BP_QUANTIZE_NO_SATURATE)) flags |= 16u;
    norm_eps = a->eps > 0.0 ? a->eps : vk_dtype_eps(in->dtype);
    ub = a->scale_ub;
    rows = (uint64_t)bp_desc_numel(scales); /* rows even when they are empty */
  }
  if ((l.layer == 2 && n % 2) || out->dtype != q)
    return vk_error(BP_INVALID_ARGUMENT, "vulkan: %s: an even row for the gated form and %s codes", name,
                    bp_dtype_name(q));
  if (rows == 0) return BP_OK;
  if (w) flags |= 1u;
  if (res) flags |= 2u;
  if (sc) flags |= 32u;
  uint32_t meta[30];
  memset(meta, 0, sizeof meta);
  vk_meta64(&meta[0], vk_desc_addr(in));
  if (res) vk_meta64(&meta[2], vk_desc_addr(res));
  if (w) vk_meta64(&meta[4], vk_desc_addr(w));
  vk_meta64(&meta[6], vk_desc_addr(out));
  if (ro) vk_meta64(&meta[8], vk_desc_addr(ro));
  vk_meta64(&meta[10], vk_desc_addr(scales));
  if (sc) vk_meta64(&meta[12], vk_desc_addr(sc));
  meta[14] = (uint32_t)rows;
  meta[15] = (uint32_t)n;
  meta[16] = (uint32_t)m;
  meta[17] = (uint32_t)g;
  meta[18] = flags;
  meta[19] = w ? w->dtype : 0u;
  double qmax = q == BP_DTYPE_I8 ? 127.0 : q == BP_DTYPE_F8E4M3FN ? 448.0 : 57344.0;
  memcpy(&meta[20], &norm_eps, 8);
  memcpy(&meta[22], &floor, 8);
  memcpy(&meta[24], &ub, 8);
  memcpy(&meta[26], &qmax, 8);
  meta[28] = m ? (uint32_t)(m / g) : 1u;
  uint32_t spec[3] = {l.layer, in->dtype, q};
  const bp_tensor_desc_t* reads[4] = {in, res, w, sc};
  const bp_tensor_desc_t* writes[3] = {ro, out, scales};
  return vk_dispatch_operands(s, VK_SHADER_norm_quant, spec, 3, meta, sizeof meta, vk_groups_for(s->dev, rows), reads, 4,
                              writes, 3);
}
