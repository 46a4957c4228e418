/* backplane Vulkan plugin: op launches, support answers, fusion caps.
 *
 * Elementwise ops (the UNARY_EW, BINARY_EW, COMPARE and TERNARY_EW families)
 * and the copy-like ops become elementwise programs through
 * plugins/gpu_common's lowering (shared by every GPU plugin), run by this
 * plugin's kernel (vk_ew.c); the other families live in vk_kernels.c. query_support answers from the same tables the
 * launches use, so "supported" holds exactly for what runs.
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "vk_ops_internal.h"

/* Ops by kernel family (ops.def). */
static int is_ew_op(uint32_t op) { return bp_op_is_elementwise(op); }
static int is_copy_op(uint32_t op) {
  uint32_t f = bp_op_family(op);
  return f == BP_OP_FAMILY_COPY || f == BP_OP_FAMILY_SHAPE || f == BP_OP_FAMILY_CREATION;
}
/* f64 registers lack these (the double-precision helpers are not accurate
 * to f64's own tolerance for them). */
static int f32_only(uint32_t op, const void* attrs) {
  switch (op) {
    case BP_OP_sin: case BP_OP_cos: case BP_OP_tan: case BP_OP_asin: case BP_OP_acos:
    case BP_OP_atan: case BP_OP_atan2: case BP_OP_erf: case BP_OP_pow: case BP_OP_log1p:
    case BP_OP_asinh: case BP_OP_atanh: case BP_OP_fmod: case BP_OP_remainder: case BP_OP_softplus:
      return 1;
    case BP_OP_div:
      return attrs && ((const bp_binary_attrs_t*)attrs)->rounding_mode == BP_ROUNDING_FLOOR;
    case BP_OP_gelu:
      return !attrs || ((const bp_gelu_attrs_t*)attrs)->approximate != BP_GELU_TANH;
    default:
      return 0;
  }
}

/* The lowering and support rules of plugins/gpu_common, with this
 * plugin's kernel (shaders/ew.comp) running the programs. */
static bp_status_t ew_hook(void* ctx, const bp_gpu_ew_t* p) { return vk_ew_launch((bpp_stream_t)ctx, p); }
static bp_status_t no_kernel(void* ctx, const bp_gpu_launch_t* l) {
  (void)ctx;
  return vk_error(BP_INTERNAL, "vulkan: gpu_common kernel program %u is not built into this plugin", l->program);
}
static bp_gpu_device_caps_t gpu_caps(struct bpp_device_s* d) {
  bp_gpu_device_caps_t c;
  memset(&c, 0, sizeof c);
  c.dtype_mask = vk_compute_dtype_mask(d);
  c.max_groups = 65535;
  c.ew_launch = ew_hook;
  return c;
}

/* What this plugin's shaders add to gpu_common's rules: f64 functions
 * without an accurate GLSL form, and sin/cos/tan's argument range. */
static int ew_supported(struct bpp_device_s* d, const bp_op_call_t* call, char* msg, size_t cap) {
  uint32_t op = call->op_id;
  bp_gpu_device_caps_t caps = gpu_caps(d);
  int reason = bp__gpu_ew_supported(&caps, call, msg, cap);
  if (reason) return reason;
  if (call->compute_dtype == BP_DTYPE_F64 && f32_only(op, call->attrs)) {
    bp_plugin_format(msg, cap, 0, "f64 has no accurate GLSL implementation of this function");
    return BP_SUPPORT_DTYPE;
  }
  if (op == BP_OP_sin || op == BP_OP_cos || op == BP_OP_tan) {
    /* The argument reduction is exact for |x| < 2^32: inputs whose dtype
     * bounds them (f16, integers up to 32 bits) only. */
    for (uint32_t k = 0; k < call->num_inputs; k++) {
      uint32_t dt = call->inputs[k]->dtype;
      if (dt == BP_DTYPE_F32 || dt == BP_DTYPE_BF16 || dt == BP_DTYPE_F64 || dt == BP_DTYPE_I64) {
        bp_plugin_format(msg, cap, 0, "%s inputs may exceed the |x| < 2^32 range of the argument reduction",
                         bp_dtype_name(dt));
        return BP_SUPPORT_DTYPE;
      }
    }
  }
  return 0;
}
static int copy_supported(struct bpp_device_s* d, const bp_op_call_t* call, char* msg, size_t cap) {
  bp_gpu_device_caps_t caps = gpu_caps(d);
  return bp__gpu_copy_supported(&caps, call, msg, cap);
}
static bp_status_t launch_ew_op(bpp_stream_t s, const bp_op_call_t* call) {
  bp_gpu_device_caps_t caps = gpu_caps(s->dev);
  return bp__gpu_ew_run(&caps, call, no_kernel, s);
}
static bp_status_t launch_copy_op(bpp_stream_t s, const bp_op_call_t* call) {
  bp_gpu_device_caps_t caps = gpu_caps(s->dev);
  return bp__gpu_copy_run(&caps, call, no_kernel, s);
}

/* ---- dispatch ------------------------------------------------------------ */
int vk_op_implemented(uint32_t op) {
  return op > 0 && op < BP_OP_COUNT && (is_ew_op(op) || is_copy_op(op) || vk_kernels_implemented(op));
}

bp_status_t vk_launch_op(bpp_stream_t s, const bp_op_call_t* call) {
  if (!s || !call) return vk_error(BP_INVALID_ARGUMENT, "vulkan: launch: NULL argument");
  if (call->struct_size < BP_OP_CALL_V1_SIZE || !call->outputs || call->num_outputs < 1 ||
      (call->num_inputs && !call->inputs) || call->list_begin > call->num_inputs ||
      call->list_count > call->num_inputs - call->list_begin)
    return vk_error(BP_INVALID_ARGUMENT, "vulkan: launch: malformed op call");
  uint32_t op = call->op_id;
  char msg[200];
  msg[0] = 0;
  int reason;
  if (is_ew_op(op)) reason = ew_supported(s->dev, call, msg, sizeof msg);
  else if (is_copy_op(op)) reason = copy_supported(s->dev, call, msg, sizeof msg);
  else if (vk_kernels_implemented(op)) reason = vk_kernels_supported(s->dev, call, msg, sizeof msg);
  else return vk_error(BP_UNIMPLEMENTED, "vulkan: op %u has no Vulkan kernel", op);
  if (reason) return vk_error(BP_UNIMPLEMENTED, "vulkan: op %u: %s", op, msg);
  for (uint32_t k = 0; k < call->num_inputs + call->num_outputs; k++) {
    const bp_tensor_desc_t* t = k < call->num_inputs ? call->inputs[k] : call->outputs[k - call->num_inputs];
    if (t->dtype == BP_DTYPE_INVALID) continue;
    bp_status_t st = vk_check_desc(t, k < call->num_inputs ? "input" : "output");
    if (st) return st;
    BP_PLUGIN_DEBUG_CHECK(((struct bpp_buffer_s*)t->buffer)->dev == s->dev
                              ? BP_OK
                              : vk_error(BP_INVALID_ARGUMENT, "vulkan: op %u: an operand lives on another device", op));
  }
  if (is_ew_op(op)) return launch_ew_op(s, call);
  if (is_copy_op(op)) return launch_copy_op(s, call);
  switch (op) {
    case BP_OP_sum: case BP_OP_mean: case BP_OP_prod: case BP_OP_amax: case BP_OP_amin:
    case BP_OP_any: case BP_OP_argmax: case BP_OP_argmin:
    case BP_OP_logsumexp: case BP_OP_max_dim: case BP_OP_min_dim:
      return vk_launch_reduce(s, call);
    case BP_OP_softmax: case BP_OP_log_softmax: case BP_OP_layer_norm: case BP_OP_rms_norm:
    case BP_OP_add_layer_norm: case BP_OP_add_rms_norm:
      return vk_launch_norm(s, call);
    case BP_OP_swiglu: case BP_OP_geglu:
      return vk_launch_glu(s, call);
    case BP_OP_swiglu_oai:
      return vk_launch_swiglu_oai(s, call);
    case BP_OP_logits_softcap:
      return vk_launch_softcap(s, call);
    case BP_OP_mm: case BP_OP_bmm: case BP_OP_addmm:
      return vk_launch_matmul(s, call);
    case BP_OP_gather: case BP_OP_index_select: case BP_OP_embedding:
      return vk_launch_index(s, call);
    case BP_OP_quantize: case BP_OP_dequantize:
      return vk_launch_quant(s, call);
    case BP_OP_sample: case BP_OP_top_k_top_p_mask:
      return vk_launch_sample(s, call);
    case BP_OP_repetition_penalty:
      return vk_launch_penalty(s, call);
    case BP_OP_rotary_embedding_pos:
      return vk_launch_rope(s, call);
    case BP_OP_gather_logprobs:
      return vk_launch_logprobs(s, call);
    case BP_OP_concat_and_cache_mla: case BP_OP_gather_cache: case BP_OP_compute_slot_mapping:
      return vk_launch_paged(s, call);
    case BP_OP_moe_align_block_size:
      return vk_launch_moe_align(s, call);
    case BP_OP_grouped_topk:
      return vk_launch_grouped_topk(s, call);
    default:
      if (vk_norm_quant_op(op)) return vk_launch_norm_quant(s, call);
      return vk_launch_conv_pool(s, call);
  }
}

/* ---- capabilities ---------------------------------------------------------- */
#define answer bp_kit_support_answer

bp_status_t vk_query_support(bpp_device_t d, const bp_op_call_t* call, bp_support_t* out) {
  if (!d || !call || !out) return vk_error(BP_INVALID_ARGUMENT, "vulkan: query_support: NULL argument");
  if (call->struct_size < BP_OP_CALL_V1_SIZE)
    return vk_error(BP_INVALID_ARGUMENT, "vulkan: query_support: op call struct_size %u < %u", call->struct_size,
                    BP_OP_CALL_V1_SIZE);
  uint32_t op = call->op_id;
  if (bp_op_family(op) == BP_OP_FAMILY_INVALID) return answer(out, BP_SUPPORT_OP, "op id %u is unknown", op);
  if (!vk_op_implemented(op)) return answer(out, BP_SUPPORT_OP, "op %u has no Vulkan kernel", op);
  if (call->num_outputs < 1 || !call->outputs || (call->num_inputs && !call->inputs))
    return vk_error(BP_INVALID_ARGUMENT, "vulkan: query_support: op %u: missing operands", op);
  for (uint32_t k = 0; k < call->num_inputs + call->num_outputs; k++) {
    const bp_tensor_desc_t* t = k < call->num_inputs ? call->inputs[k] : call->outputs[k - call->num_inputs];
    if (t->dtype == BP_DTYPE_INVALID) continue;
    if (!bp_dtype_is_valid(t->dtype))
      return vk_error(BP_INVALID_ARGUMENT, "vulkan: query_support: op %u: unknown dtype %u", op, t->dtype);
    if (t->rank > BP_MAX_RANK) return answer(out, BP_SUPPORT_RANK, "rank %u > %d", t->rank, BP_MAX_RANK);
  }
  char msg[200];
  msg[0] = 0;
  int reason;
  if (is_ew_op(op)) reason = ew_supported(d, call, msg, sizeof msg);
  else if (is_copy_op(op)) reason = copy_supported(d, call, msg, sizeof msg);
  else reason = vk_kernels_supported(d, call, msg, sizeof msg);
  if (reason) return answer(out, (uint32_t)reason, "vulkan: op %u: %s", op, msg);
  bp_status_t st = answer(out, BP_SUPPORT_OK, "%s", "");
  if (bp_op_family(op) == BP_OP_FAMILY_QUANT || op == BP_OP_repetition_penalty || op == BP_OP_rotary_embedding_pos ||
      op == BP_OP_gather_logprobs || op == BP_OP_concat_and_cache_mla || op == BP_OP_gather_cache ||
      op == BP_OP_compute_slot_mapping || op == BP_OP_moe_align_block_size ||
      op == BP_OP_grouped_topk)
    out->requires_contiguous = 1; /* dense kernels */
  return st;
}

bp_status_t vk_query_fusion(bpp_device_t d, bp_fusion_caps_t* out) {
  if (!d || !out) return vk_error(BP_INVALID_ARGUMENT, "vulkan: query_fusion: NULL argument");
  bp_gpu_device_caps_t caps = gpu_caps(d);
  return bp_gpu_fusion_caps(&caps, out);
}

bp_status_t vk_launch_ew_program(bpp_stream_t s, const bp_ew_program_t* prog, uint32_t num_inputs,
                                 const bp_tensor_desc_t* const* inputs, uint32_t num_outputs,
                                 const bp_tensor_desc_t* const* outputs) {
  if (!s || !prog) return vk_error(BP_INVALID_ARGUMENT, "vulkan: launch_ew_program: NULL argument");
  /* The f64 functions this plugin's shaders lack (the rest is checked by
   * gpu_common). */
  if (prog->struct_size >= BP_EW_PROGRAM_V1_SIZE && prog->compute_dtype == BP_DTYPE_F64 && prog->instrs &&
      prog->instr_stride >= BP_EW_INSTR_V1_SIZE && prog->num_instrs <= BP_GPU_EW_MAX_INSTR)
    for (uint32_t i = 0; i < prog->num_instrs; i++) {
      const bp_ew_instr_t* in = BP_EW_INSTR_AT(prog, i);
      if (in->opcode < BP_OP_COUNT && (f32_only(in->opcode, NULL) || (in->opcode == BP_OP_div && in->aux == BP_ROUNDING_FLOOR)))
        return vk_error(BP_UNIMPLEMENTED, "vulkan: launch_ew_program: instruction %u: op %u in f64", i, in->opcode);
    }
  bp_gpu_device_caps_t caps = gpu_caps(s->dev);
  return bp_gpu_ew_program_run(&caps, prog, num_inputs, inputs, num_outputs, outputs, no_kernel, s);
}
