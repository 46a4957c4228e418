/* backplane core: the per-minor tables of ABI 1 and the minor gate.
 *
 * Extending the ABI in minor N: append N's counts to k_op_count and
 * k_dtype_count (and raise BP_ABI_VERSION_MINOR); for every attribute
 * struct that grew, add {kind, 0, BP_ATTRS_V1_SIZE_<type>, ""} for its
 * first-released size (when it has no entry yet) and {kind, N, new size,
 * "names of the appended fields"}. The gate then refuses, for plugins of older minors, what they
 * cannot know about.
 */
#include "ops/abi_history.h"

#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "ops/ops_internal.h"

/* Op ids and dtype values of each minor, frozen when the minor is
 * released. The newest entry must match the headers. */
#define BP__OP_COUNT_1_0 145u
#define BP__DTYPE_COUNT_1_0 27u
/* 1.1: the fused layers add_rms_norm, add_layer_norm, swiglu, geglu (ids
 * 145..148) and the op family GLU. */
#define BP__OP_COUNT_1_1 149u
#define BP__DTYPE_COUNT_1_1 27u
/* 1.2: quantize, dequantize, quantize_dynamic, scaled_mm, weight_only_mm
 * (ids 149..153), the op family QUANT and the category QUANT; the final
 * exec table (compiled regions, load.c); the serving
 * ops sample, repetition_penalty (ids 154, 155, family SAMPLE),
 * kv_cache_append, paged_attention (ids 156, 157, family PAGED_ATTENTION),
 * qkv_rotary (id 158, family ATTENTION), moe_topk_softmax (id 159, family
 * MOE). */
#define BP__OP_COUNT_1_2 160u
#define BP__DTYPE_COUNT_1_2 27u
/* 1.3: the fused quantizations rms_norm_quant, add_rms_norm_quant,
 * swiglu_quant (ids 160..162, family QUANT); rotary_embedding_pos (163,
 * family ATTENTION); logits_softcap, top_k_top_p_mask (164, 165, family
 * SAMPLE); moe_permute, moe_unpermute, grouped_mm (166..168, family MOE);
 * merge_attn_states, kv_cache_copy_blocks, paged_attention_prefill
 * (169..171, family PAGED_ATTENTION); the weight_only_mm flag
 * BP_QUANTIZE_INT8_ACTIVATIONS (a permission that older plugins ignore:
 * nothing to gate); rejection_sample (172, family SAMPLE). */
#define BP__OP_COUNT_1_3 173u
#define BP__DTYPE_COUNT_1_3 27u
/* 1.4: the serving ops moe_align_block_size, grouped_topk (173, 174, family
 * MOE), per_token_group_quant (175, family QUANT), concat_and_cache_mla,
 * gather_cache, compute_slot_mapping (176..178, family PAGED_ATTENTION),
 * gather_logprobs (179, family SAMPLE), swiglu_oai (180, family GLU),
 * rms_norm_group_quant, swiglu_group_quant (181, 182, family QUANT);
 * bp_quantize_attrs_t.activation (weight_only_mm's epilogue), in the
 * bytes that were reserved0 (k_attr_fields). */
#define BP__OP_COUNT_1_4 183u
#define BP__DTYPE_COUNT_1_4 27u
_Static_assert(BP__OP_COUNT_1_4 == BP_OP_COUNT, "ops.def grew: add its minor to abi_history.c");
_Static_assert(BP__DTYPE_COUNT_1_4 == BP_DTYPE_COUNT_,
               "dtypes grew: add their minor to abi_history.c");
_Static_assert(BP_ABI_VERSION_MINOR == 4, "a new minor: add its counts to abi_history.c");
static const uint32_t k_op_count[BP_ABI_VERSION_MINOR + 1] = {
    BP__OP_COUNT_1_0, BP__OP_COUNT_1_1, BP__OP_COUNT_1_2, BP__OP_COUNT_1_3, BP__OP_COUNT_1_4};
static const uint32_t k_dtype_count[BP_ABI_VERSION_MINOR + 1] = {
    BP__DTYPE_COUNT_1_0, BP__DTYPE_COUNT_1_1, BP__DTYPE_COUNT_1_2, BP__DTYPE_COUNT_1_3,
    BP__DTYPE_COUNT_1_4};
/* No attribute struct has grown since 1.0 (the sentinel entry matches no
 * kind). */
static const bp__attr_growth_t k_attr_growth[] = {{UINT32_MAX, 0, 0, ""}};
/* Fields defined in once-reserved bytes. */
static const bp__attr_field_t k_attr_fields[] = {
    {BP__ATTRS_bp_quantize_attrs_t, 4, (uint32_t)offsetof(bp_quantize_attrs_t, activation),
     (uint32_t)sizeof(((bp_quantize_attrs_t*)0)->activation), "activation"}};

static const bp__abi_history_t k_history = {
    BP_ABI_VERSION_MINOR + 1, k_op_count, k_dtype_count,
    (uint32_t)(sizeof(k_attr_growth) / sizeof(k_attr_growth[0])), k_attr_growth,
    (uint32_t)(sizeof(k_attr_fields) / sizeof(k_attr_fields[0])), k_attr_fields};

const bp__abi_history_t* bp__abi_history(void) { return &k_history; }

/* The size the attribute struct of `kind` had at `minor`; 0 when it has
 * not grown (nothing to check). */
static uint32_t bp__attrs_size_at(const bp__abi_history_t* h, uint32_t kind, uint32_t minor) {
  uint32_t size = 0, best_minor = 0;
  int found = 0;
  for (uint32_t i = 0; i < h->num_attr_growth; ++i) {
    const bp__attr_growth_t* g = &h->attr_growth[i];
    if (g->attrs_kind != kind || g->minor > minor) continue;
    if (!found || g->minor >= best_minor) {
      size = g->size;
      best_minor = g->minor;
      found = 1;
    }
  }
  return size;
}

static int bp__gate_dtype(const bp__abi_history_t* h, uint32_t plugin_minor, const char* op_name,
                          const char* kind, uint32_t index, const bp_tensor_desc_t* d,
                          char* msg, size_t cap) {
  if (d == NULL || d->dtype < h->dtype_count[plugin_minor]) return 0;
  const char* name = bp_dtype_name(d->dtype);
  snprintf(msg, cap,
           "op '%s': %s %u has dtype %s (%u), newer than the backend's ABI 1.%u (the host "
           "speaks 1.%u)",
           op_name, kind, index, name ? name : "?", d->dtype, plugin_minor, h->num_minors - 1);
  return 1;
}

int bp__abi_gate(const bp__abi_history_t* h, uint32_t plugin_minor, uint32_t attrs_kind,
                 const char* op_name, const bp_op_call_t* call, uint32_t* out_reason, char* msg,
                 size_t cap) {
  uint32_t host_minor = h->num_minors - 1;
  if (plugin_minor >= host_minor) return 0;
  if (call->op_id >= h->op_count[plugin_minor]) {
    uint32_t since = plugin_minor + 1;
    while (since < host_minor && call->op_id >= h->op_count[since]) ++since;
    *out_reason = BP_SUPPORT_OP;
    snprintf(msg, cap,
             "op '%s' (id %u) was added in ABI 1.%u; the backend negotiated ABI 1.%u (the host "
             "speaks 1.%u)",
             op_name, call->op_id, since, plugin_minor, host_minor);
    return 1;
  }
  for (uint32_t i = 0; i < call->num_inputs; ++i) {
    if (bp__gate_dtype(h, plugin_minor, op_name, "input", i, call->inputs[i], msg, cap)) {
      *out_reason = BP_SUPPORT_DTYPE;
      return 1;
    }
  }
  for (uint32_t k = 0; k < call->num_outputs; ++k) {
    if (bp__gate_dtype(h, plugin_minor, op_name, "output", k, call->outputs[k], msg, cap)) {
      *out_reason = BP_SUPPORT_DTYPE;
      return 1;
    }
  }
  if (call->attrs == NULL) return 0;
  uint32_t size;
  memcpy(&size, call->attrs, sizeof(size));
  const unsigned char* bytes = (const unsigned char*)call->attrs;
  for (uint32_t i = 0; i < h->num_attr_fields; ++i) {
    const bp__attr_field_t* f = &h->attr_fields[i];
    if (f->attrs_kind != attrs_kind || f->minor <= plugin_minor || f->offset + f->size > size) continue;
    for (uint32_t b = f->offset; b < f->offset + f->size; ++b) {
      if (bytes[b] == 0) continue;
      *out_reason = BP_SUPPORT_ATTRIBUTE;
      snprintf(msg, cap,
               "op '%s': attribute field '%s' (defined in ABI 1.%u in bytes reserved before) has "
               "a non-default value; the backend negotiated ABI 1.%u (the host speaks 1.%u)",
               op_name, f->name, f->minor, plugin_minor, host_minor);
      return 1;
    }
  }
  uint32_t old_size = bp__attrs_size_at(h, attrs_kind, plugin_minor);
  if (old_size == 0) return 0;
  for (uint32_t b = old_size; b < size; ++b) {
    if (bytes[b] == 0) continue;
    /* The minor that appended byte b: the first growth past plugin_minor
     * whose size covers it. */
    const bp__attr_growth_t* added = NULL;
    for (uint32_t i = 0; i < h->num_attr_growth; ++i) {
      const bp__attr_growth_t* g = &h->attr_growth[i];
      if (g->attrs_kind != attrs_kind || g->minor <= plugin_minor || b >= g->size) continue;
      if (added == NULL || g->minor < added->minor) added = g;
    }
    *out_reason = BP_SUPPORT_ATTRIBUTE;
    snprintf(msg, cap,
             "op '%s': attribute field '%s' (added in ABI 1.%u) has a non-default value; the "
             "backend negotiated ABI 1.%u (the host speaks 1.%u)",
             op_name, added ? added->fields : "?", added ? added->minor : host_minor,
             plugin_minor, host_minor);
    return 1;
  }
  return 0;
}
