/* libbackplane_graph: attribute structs in the text format.
 *
 * One table of fields per attribute struct of ops.h (name, kind, offset,
 * element count); printing and parsing both walk it, so the text form of
 * every op's attributes comes from one place. A struct added to ops.h
 * without a table here fails to compile (the op table names it).
 */
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "graph_internal.h"

enum bpg_kind { K_U32, K_I32, K_I64, K_U64, K_F64, K_SC, K_DT };

typedef struct bpg_field {
  const char* name;
  uint8_t kind;
  uint8_t count; /* array elements (1: a plain field) */
  uint16_t offset;
} bpg_field_t;

#define F1(T, f, K) {#f, K, 1, (uint16_t)offsetof(T, f)},
#define FA(T, f, K) {#f, K, (uint8_t)(sizeof(((T*)0)->f) / sizeof(((T*)0)->f[0])), (uint16_t)offsetof(T, f)},
#define FIELDS(T, ...) static const bpg_field_t bpg_fields_##T[] = {__VA_ARGS__ {NULL, 0, 0, 0}};

FIELDS(bp_no_attrs_t)
FIELDS(bp_clamp_attrs_t, F1(bp_clamp_attrs_t, min, K_SC) F1(bp_clamp_attrs_t, max, K_SC))
FIELDS(bp_elu_attrs_t, F1(bp_elu_attrs_t, alpha, K_F64) F1(bp_elu_attrs_t, scale, K_F64)
       F1(bp_elu_attrs_t, input_scale, K_F64))
FIELDS(bp_gelu_attrs_t, F1(bp_gelu_attrs_t, approximate, K_U32))
FIELDS(bp_hardtanh_attrs_t, F1(bp_hardtanh_attrs_t, min_val, K_F64)
       F1(bp_hardtanh_attrs_t, max_val, K_F64))
FIELDS(bp_leaky_relu_attrs_t, F1(bp_leaky_relu_attrs_t, negative_slope, K_F64))
FIELDS(bp_softplus_attrs_t, F1(bp_softplus_attrs_t, beta, K_F64)
       F1(bp_softplus_attrs_t, threshold, K_F64))
FIELDS(bp_binary_attrs_t, F1(bp_binary_attrs_t, flags, K_U32) F1(bp_binary_attrs_t, scalar, K_SC)
       F1(bp_binary_attrs_t, alpha, K_SC) F1(bp_binary_attrs_t, rounding_mode, K_U32))
FIELDS(bp_reduce_attrs_t, F1(bp_reduce_attrs_t, flags, K_U32) F1(bp_reduce_attrs_t, num_dims, K_I32)
       FA(bp_reduce_attrs_t, dims, K_I32) F1(bp_reduce_attrs_t, dtype, K_DT)
       F1(bp_reduce_attrs_t, correction, K_F64))
FIELDS(bp_dim_attrs_t, F1(bp_dim_attrs_t, dim, K_I32) F1(bp_dim_attrs_t, dtype, K_DT))
FIELDS(bp_dims_attrs_t, F1(bp_dims_attrs_t, num_dims, K_U32) FA(bp_dims_attrs_t, dims, K_I64))
FIELDS(bp_sort_attrs_t, F1(bp_sort_attrs_t, dim, K_I32) F1(bp_sort_attrs_t, descending, K_U32)
       F1(bp_sort_attrs_t, stable, K_U32))
FIELDS(bp_topk_attrs_t, F1(bp_topk_attrs_t, dim, K_I32) F1(bp_topk_attrs_t, k, K_I64)
       F1(bp_topk_attrs_t, largest, K_U32) F1(bp_topk_attrs_t, sorted, K_U32))
FIELDS(bp_addmm_attrs_t, F1(bp_addmm_attrs_t, beta, K_SC) F1(bp_addmm_attrs_t, alpha, K_SC))
FIELDS(bp_cdist_attrs_t, F1(bp_cdist_attrs_t, compute_mode, K_I32) F1(bp_cdist_attrs_t, p, K_F64))
FIELDS(bp_linear_attrs_t, F1(bp_linear_attrs_t, activation, K_U32))
FIELDS(bp_conv_attrs_t, F1(bp_conv_attrs_t, spatial_dims, K_U32) FA(bp_conv_attrs_t, stride, K_I64)
       FA(bp_conv_attrs_t, padding, K_I64) FA(bp_conv_attrs_t, dilation, K_I64)
       FA(bp_conv_attrs_t, output_padding, K_I64) F1(bp_conv_attrs_t, groups, K_I64)
       F1(bp_conv_attrs_t, transposed, K_U32) F1(bp_conv_attrs_t, output_mask, K_U32))
FIELDS(bp_pool_attrs_t, F1(bp_pool_attrs_t, spatial_dims, K_U32) FA(bp_pool_attrs_t, kernel, K_I64)
       FA(bp_pool_attrs_t, stride, K_I64) FA(bp_pool_attrs_t, padding, K_I64)
       FA(bp_pool_attrs_t, dilation, K_I64) F1(bp_pool_attrs_t, ceil_mode, K_U32)
       F1(bp_pool_attrs_t, count_include_pad, K_U32) F1(bp_pool_attrs_t, divisor_override, K_I64)
       F1(bp_pool_attrs_t, has_stride, K_U32) F1(bp_pool_attrs_t, has_divisor_override, K_U32))
FIELDS(bp_adaptive_pool_attrs_t, F1(bp_adaptive_pool_attrs_t, spatial_dims, K_U32)
       FA(bp_adaptive_pool_attrs_t, output_size, K_I64))
FIELDS(bp_col2im_attrs_t, FA(bp_col2im_attrs_t, output_size, K_I64) FA(bp_col2im_attrs_t, kernel, K_I64)
       FA(bp_col2im_attrs_t, dilation, K_I64) FA(bp_col2im_attrs_t, padding, K_I64)
       FA(bp_col2im_attrs_t, stride, K_I64))
FIELDS(bp_grid_sampler_attrs_t, F1(bp_grid_sampler_attrs_t, interpolation, K_U32)
       F1(bp_grid_sampler_attrs_t, padding_mode, K_U32) F1(bp_grid_sampler_attrs_t, align_corners, K_U32))
FIELDS(bp_upsample_attrs_t, F1(bp_upsample_attrs_t, align_corners, K_U32)
       FA(bp_upsample_attrs_t, output_size, K_I64) FA(bp_upsample_attrs_t, scale, K_F64)
       F1(bp_upsample_attrs_t, has_output_size, K_U32) F1(bp_upsample_attrs_t, has_scale, K_U32))
FIELDS(bp_softmax_attrs_t, F1(bp_softmax_attrs_t, dim, K_I32) F1(bp_softmax_attrs_t, half_to_float, K_U32))
FIELDS(bp_batch_norm_attrs_t, F1(bp_batch_norm_attrs_t, training, K_U32)
       F1(bp_batch_norm_attrs_t, momentum, K_F64) F1(bp_batch_norm_attrs_t, eps, K_F64))
FIELDS(bp_group_norm_attrs_t, F1(bp_group_norm_attrs_t, output_mask, K_U32)
       F1(bp_group_norm_attrs_t, n, K_I64) F1(bp_group_norm_attrs_t, c, K_I64)
       F1(bp_group_norm_attrs_t, hxw, K_I64) F1(bp_group_norm_attrs_t, group, K_I64)
       F1(bp_group_norm_attrs_t, eps, K_F64))
FIELDS(bp_layer_norm_attrs_t, F1(bp_layer_norm_attrs_t, normalized_rank, K_U32)
       FA(bp_layer_norm_attrs_t, normalized_shape, K_I64) F1(bp_layer_norm_attrs_t, eps, K_F64)
       F1(bp_layer_norm_attrs_t, output_mask, K_U32))
FIELDS(bp_rms_norm_attrs_t, F1(bp_rms_norm_attrs_t, normalized_rank, K_U32)
       F1(bp_rms_norm_attrs_t, eps, K_F64))
FIELDS(bp_embedding_attrs_t, F1(bp_embedding_attrs_t, mode, K_U32)
       F1(bp_embedding_attrs_t, padding_idx, K_I64) F1(bp_embedding_attrs_t, num_weights, K_I64)
       F1(bp_embedding_attrs_t, scale_grad_by_freq, K_U32)
       F1(bp_embedding_attrs_t, include_last_offset, K_U32))
FIELDS(bp_index_put_attrs_t, F1(bp_index_put_attrs_t, accumulate, K_U32))
FIELDS(bp_scatter_attrs_t, F1(bp_scatter_attrs_t, dim, K_I32) F1(bp_scatter_attrs_t, reduce, K_U32)
       F1(bp_scatter_attrs_t, include_self, K_U32) F1(bp_scatter_attrs_t, value, K_SC))
FIELDS(bp_slice_attrs_t, F1(bp_slice_attrs_t, dim, K_I32) F1(bp_slice_attrs_t, start, K_I64)
       F1(bp_slice_attrs_t, end, K_I64) F1(bp_slice_attrs_t, step, K_I64))
FIELDS(bp_cast_attrs_t, F1(bp_cast_attrs_t, dtype, K_DT))
FIELDS(bp_pad_attrs_t, F1(bp_pad_attrs_t, mode, K_U32) F1(bp_pad_attrs_t, num_pads, K_U32)
       FA(bp_pad_attrs_t, pads, K_I64) F1(bp_pad_attrs_t, value, K_SC))
FIELDS(bp_fill_attrs_t, F1(bp_fill_attrs_t, value, K_SC) F1(bp_fill_attrs_t, dtype, K_DT)
       F1(bp_fill_attrs_t, has_shape, K_U32) F1(bp_fill_attrs_t, rank, K_U32)
       FA(bp_fill_attrs_t, sizes, K_I64))
FIELDS(bp_arange_attrs_t, F1(bp_arange_attrs_t, start, K_SC) F1(bp_arange_attrs_t, end, K_SC)
       F1(bp_arange_attrs_t, step, K_SC) F1(bp_arange_attrs_t, dtype, K_DT))
FIELDS(bp_random_attrs_t, F1(bp_random_attrs_t, train, K_U32) F1(bp_random_attrs_t, seed, K_U64)
       F1(bp_random_attrs_t, offset, K_U64) F1(bp_random_attrs_t, p, K_F64)
       F1(bp_random_attrs_t, dtype, K_DT) F1(bp_random_attrs_t, has_shape, K_U32)
       F1(bp_random_attrs_t, rank, K_U32) FA(bp_random_attrs_t, sizes, K_I64))
FIELDS(bp_fft_attrs_t, F1(bp_fft_attrs_t, num_dims, K_U32) FA(bp_fft_attrs_t, dims, K_I64)
       F1(bp_fft_attrs_t, normalization, K_U32) F1(bp_fft_attrs_t, onesided, K_U32)
       F1(bp_fft_attrs_t, last_dim_size, K_I64))
FIELDS(bp_sdpa_attrs_t, F1(bp_sdpa_attrs_t, is_causal, K_U32) F1(bp_sdpa_attrs_t, scale, K_F64)
       F1(bp_sdpa_attrs_t, enable_gqa, K_U32))
FIELDS(bp_rotary_attrs_t, F1(bp_rotary_attrs_t, interleaved, K_U32))
FIELDS(bp_cross_entropy_attrs_t, F1(bp_cross_entropy_attrs_t, reduction, K_U32)
       F1(bp_cross_entropy_attrs_t, ignore_index, K_I64)
       F1(bp_cross_entropy_attrs_t, label_smoothing, K_F64))
FIELDS(bp_quantize_attrs_t, F1(bp_quantize_attrs_t, qdtype, K_DT) F1(bp_quantize_attrs_t, dtype, K_DT)
       F1(bp_quantize_attrs_t, axis, K_I32) F1(bp_quantize_attrs_t, block_size, K_I64)
       F1(bp_quantize_attrs_t, flags, K_U32))
FIELDS(bp_scaled_mm_attrs_t, F1(bp_scaled_mm_attrs_t, out_dtype, K_DT)
       F1(bp_scaled_mm_attrs_t, activation, K_U32) F1(bp_scaled_mm_attrs_t, a_zero_point, K_I32)
       F1(bp_scaled_mm_attrs_t, b_zero_point, K_I32))
FIELDS(bp_sample_attrs_t, F1(bp_sample_attrs_t, top_k, K_U32)
       F1(bp_sample_attrs_t, temperature, K_F64) F1(bp_sample_attrs_t, top_p, K_F64)
       F1(bp_sample_attrs_t, seed, K_U64) F1(bp_sample_attrs_t, offset, K_U64))
FIELDS(bp_penalty_attrs_t, F1(bp_penalty_attrs_t, repetition, K_F64)
       F1(bp_penalty_attrs_t, presence, K_F64) F1(bp_penalty_attrs_t, frequency, K_F64))
FIELDS(bp_paged_attention_attrs_t, F1(bp_paged_attention_attrs_t, sliding_window, K_U32)
       F1(bp_paged_attention_attrs_t, scale, K_F64))
FIELDS(bp_qkv_rotary_attrs_t, F1(bp_qkv_rotary_attrs_t, num_heads, K_U32)
       F1(bp_qkv_rotary_attrs_t, num_kv_heads, K_U32) F1(bp_qkv_rotary_attrs_t, interleaved, K_U32))
FIELDS(bp_moe_topk_attrs_t, F1(bp_moe_topk_attrs_t, top_k, K_U32)
       F1(bp_moe_topk_attrs_t, renormalize, K_U32))
FIELDS(bp_fused_quant_attrs_t, F1(bp_fused_quant_attrs_t, qdtype, K_DT)
       F1(bp_fused_quant_attrs_t, eps, K_F64) F1(bp_fused_quant_attrs_t, scale_ub, K_F64)
       F1(bp_fused_quant_attrs_t, flags, K_U32))
FIELDS(bp_softcap_attrs_t, F1(bp_softcap_attrs_t, cap, K_F64))
FIELDS(bp_logits_mask_attrs_t, F1(bp_logits_mask_attrs_t, top_k, K_U32)
       F1(bp_logits_mask_attrs_t, top_p, K_F64) F1(bp_logits_mask_attrs_t, min_p, K_F64))
FIELDS(bp_moe_permute_attrs_t, F1(bp_moe_permute_attrs_t, num_experts, K_U32))
FIELDS(bp_rejection_attrs_t, F1(bp_rejection_attrs_t, greedy, K_U32) F1(bp_rejection_attrs_t, seed, K_U64)
       F1(bp_rejection_attrs_t, offset, K_U64))
FIELDS(bp_moe_align_attrs_t, F1(bp_moe_align_attrs_t, num_experts, K_U32)
       F1(bp_moe_align_attrs_t, block_size, K_U32))
FIELDS(bp_grouped_topk_attrs_t, F1(bp_grouped_topk_attrs_t, top_k, K_U32)
       F1(bp_grouped_topk_attrs_t, num_expert_group, K_U32) F1(bp_grouped_topk_attrs_t, topk_group, K_U32)
       F1(bp_grouped_topk_attrs_t, scoring_func, K_U32) F1(bp_grouped_topk_attrs_t, renormalize, K_U32)
       F1(bp_grouped_topk_attrs_t, routed_scaling_factor, K_F64))
FIELDS(bp_group_quant_attrs_t, F1(bp_group_quant_attrs_t, qdtype, K_DT)
       F1(bp_group_quant_attrs_t, group_size, K_U32) F1(bp_group_quant_attrs_t, flags, K_U32)
       F1(bp_group_quant_attrs_t, eps, K_F64) F1(bp_group_quant_attrs_t, norm_eps, K_F64))
FIELDS(bp_gather_cache_attrs_t, F1(bp_gather_cache_attrs_t, num_tokens, K_I64))
FIELDS(bp_slot_mapping_attrs_t, F1(bp_slot_mapping_attrs_t, block_size, K_U32))
FIELDS(bp_logprobs_attrs_t, F1(bp_logprobs_attrs_t, num_logprobs, K_U32))
FIELDS(bp_swiglu_oai_attrs_t, F1(bp_swiglu_oai_attrs_t, alpha, K_F64) F1(bp_swiglu_oai_attrs_t, limit, K_F64))

static const bpg_field_t* bpg_fields(uint32_t op) {
  switch (op) {
#define BP_OP(id, name, cat, fam, ins, outs, attrs_t, rule, aten) \
  case id:                                                        \
    return bpg_fields_##attrs_t;
#include "backplane/ops.def"
#undef BP_OP
    default:
      return NULL;
  }
}

/* ---- a growing string -------------------------------------------------- */
void bpg_sbuf_printf(bpg_sbuf_t* s, const char* fmt, ...) {
  if (s->oom) return;
  for (;;) {
    va_list ap;
    va_start(ap, fmt);
    size_t room = s->cap - s->len;
    int n = vsnprintf(s->p ? s->p + s->len : NULL, s->p ? room : 0, fmt, ap);
    va_end(ap);
    if (n < 0) {
      s->oom = 1;
      return;
    }
    if (s->p != NULL && (size_t)n < room) {
      s->len += (size_t)n;
      return;
    }
    size_t ncap = s->cap ? s->cap * 2 : 256;
    while (ncap < s->len + (size_t)n + 1) ncap *= 2;
    char* p = realloc(s->p, ncap);
    if (p == NULL) {
      s->oom = 1;
      return;
    }
    s->p = p;
    s->cap = ncap;
  }
}

void bpg_sbuf_double(bpg_sbuf_t* s, double v) {
  if (isnan(v)) {
    bpg_sbuf_printf(s, "nan");
    return;
  }
  if (isinf(v)) {
    bpg_sbuf_printf(s, v < 0 ? "-inf" : "inf");
    return;
  }
  char buf[40];
  for (int prec = 1; prec <= 17; ++prec) {
    snprintf(buf, sizeof(buf), "%.*g", prec, v);
    if (strtod(buf, NULL) == v) break;
  }
  /* A float always shows it is one: 2 prints as 2.0. */
  if (strpbrk(buf, ".en") == NULL) strcat(buf, ".0");
  bpg_sbuf_printf(s, "%s", buf);
}

static int bpg_elem_zero(const bpg_field_t* f, const char* p) {
  switch (f->kind) {
    case K_U32: case K_I32: case K_DT: return *(const uint32_t*)p == 0;
    case K_I64: case K_U64: return *(const uint64_t*)p == 0;
    case K_F64: {
      uint64_t bits;
      memcpy(&bits, p, 8);
      return bits == 0; /* -0.0 is printed */
    }
    default: return ((const bp_scalar_t*)p)->kind == BP_SCALAR_NONE;
  }
}

static size_t bpg_elem_size(uint8_t kind) {
  switch (kind) {
    case K_U32: case K_I32: case K_DT: return 4;
    case K_I64: case K_U64: case K_F64: return 8;
    default: return sizeof(bp_scalar_t);
  }
}

static void bpg_elem_print(bpg_sbuf_t* s, const bpg_field_t* f, const char* p) {
  switch (f->kind) {
    case K_U32: bpg_sbuf_printf(s, "%" PRIu32, *(const uint32_t*)p); break;
    case K_I32: bpg_sbuf_printf(s, "%" PRId32, *(const int32_t*)p); break;
    case K_I64: bpg_sbuf_printf(s, "%" PRId64, *(const int64_t*)p); break;
    case K_U64: bpg_sbuf_printf(s, "%" PRIu64, *(const uint64_t*)p); break;
    case K_DT: {
      uint32_t d = *(const uint32_t*)p;
      if (bp_dtype_size(d) != 0) bpg_sbuf_printf(s, "%s", bp_dtype_name(d));
      else bpg_sbuf_printf(s, "%" PRIu32, d);
      break;
    }
    case K_F64: {
      double d;
      memcpy(&d, p, 8);
      bpg_sbuf_double(s, d);
      break;
    }
    default: {
      const bp_scalar_t* sc = (const bp_scalar_t*)(const void*)p;
      if (sc->kind == BP_SCALAR_FLOAT) bpg_sbuf_double(s, sc->v.f);
      else if (sc->kind == BP_SCALAR_INT) bpg_sbuf_printf(s, "%" PRId64, sc->v.i);
      else if (sc->kind == BP_SCALAR_BOOL) bpg_sbuf_printf(s, sc->v.b ? "true" : "false");
      else bpg_sbuf_printf(s, "none");
      break;
    }
  }
}

void bpg_attrs_print(bpg_sbuf_t* s, uint32_t op, const void* attrs) {
  if (bpg_is_view(op)) {
    bpg_view_params_print(s, op, attrs);
    return;
  }
  const bpg_field_t* fields = bpg_fields(op);
  if (attrs == NULL || fields == NULL) return;
  bpg_sbuf_printf(s, " {");
  int first = 1;
  for (const bpg_field_t* f = fields; f->name != NULL; ++f) {
    const char* base = (const char*)attrs + f->offset;
    size_t es = bpg_elem_size(f->kind);
    int last = -1;
    for (int i = 0; i < f->count; ++i) {
      if (!bpg_elem_zero(f, base + es * (size_t)i)) last = i;
    }
    if (last < 0) continue;
    bpg_sbuf_printf(s, "%s%s=", first ? "" : ", ", f->name);
    first = 0;
    if (f->count == 1) {
      bpg_elem_print(s, f, base);
      continue;
    }
    bpg_sbuf_printf(s, "[");
    for (int i = 0; i <= last; ++i) {
      if (i) bpg_sbuf_printf(s, ", ");
      bpg_elem_print(s, f, base + es * (size_t)i);
    }
    bpg_sbuf_printf(s, "]");
  }
  bpg_sbuf_printf(s, "}");
}

/* Parses one element from [*pp, end); advances *pp. 0 or -1. */
static int bpg_elem_parse(const bpg_field_t* f, char* dst, const char* tok, char* err, size_t cap) {
  char* end = NULL;
  errno = 0;
  switch (f->kind) {
    case K_DT: {
      uint32_t d = bp_dtype_from_name(tok);
      if (d == BP_DTYPE_INVALID) {
        snprintf(err, cap, "'%s' is not a dtype", tok);
        return -1;
      }
      memcpy(dst, &d, 4);
      return 0;
    }
    case K_F64: {
      double d = strtod(tok, &end);
      if (end == tok || *end != '\0') break;
      memcpy(dst, &d, 8);
      return 0;
    }
    case K_SC: {
      bp_scalar_t sc;
      memset(&sc, 0, sizeof(sc));
      if (strcmp(tok, "true") == 0 || strcmp(tok, "false") == 0) {
        sc.kind = BP_SCALAR_BOOL;
        sc.v.b = tok[0] == 't';
      } else if (strcmp(tok, "none") == 0) {
        sc.kind = BP_SCALAR_NONE;
      } else if (strpbrk(tok, ".eEn") != NULL || strstr(tok, "inf") != NULL) {
        sc.kind = BP_SCALAR_FLOAT;
        sc.v.f = strtod(tok, &end);
        if (end == tok || *end != '\0') break;
      } else {
        sc.kind = BP_SCALAR_INT;
        sc.v.i = strtoll(tok, &end, 10);
        if (end == tok || *end != '\0' || errno) break;
      }
      memcpy(dst, &sc, sizeof(sc));
      return 0;
    }
    case K_U64: {
      if (tok[0] == '-') break;
      unsigned long long v = strtoull(tok, &end, 10);
      if (end == tok || *end != '\0' || errno) break;
      uint64_t u = v;
      memcpy(dst, &u, 8);
      return 0;
    }
    default: {
      long long v = strtoll(tok, &end, 10);
      if (end == tok || *end != '\0' || errno) break;
      if (f->kind == K_U32 && (v < 0 || v > UINT32_MAX)) break;
      if (f->kind == K_I32 && (v < INT32_MIN || v > INT32_MAX)) break;
      if (f->kind == K_I64) {
        int64_t x = v;
        memcpy(dst, &x, 8);
      } else {
        uint32_t x = (uint32_t)v;
        memcpy(dst, &x, 4);
      }
      return 0;
    }
  }
  snprintf(err, cap, "'%s' is not a valid value for attribute '%s'", tok, f->name);
  return -1;
}

int bpg_attrs_set(uint32_t op, void* attrs, const char* key, const char* val, char* err,
                  size_t err_cap) {
  if (bpg_is_view(op)) return bpg_view_params_set(op, attrs, key, val, err, err_cap);
  const bpg_field_t* fields = bpg_fields(op);
  const bpg_field_t* f = NULL;
  for (const bpg_field_t* it = fields; it != NULL && it->name != NULL; ++it) {
    if (strcmp(it->name, key) == 0) f = it;
  }
  if (f == NULL) {
    bp_op_info_t info = {.struct_size = sizeof(info)};
    bp_op_get_info(op, &info);
    snprintf(err, err_cap, "op '%s' has no attribute '%s'", info.name ? info.name : "?", key);
    return -2;
  }
  char* dst = (char*)attrs + f->offset;
  size_t es = bpg_elem_size(f->kind);
  if (f->count == 1) {
    if (val[0] == '[') {
      snprintf(err, err_cap, "attribute '%s' takes one value, not a list", key);
      return -1;
    }
    return bpg_elem_parse(f, dst, val, err, err_cap);
  }
  if (val[0] != '[') {
    snprintf(err, err_cap, "attribute '%s' takes a list [..]", key);
    return -1;
  }
  char tok[64];
  const char* p = val + 1;
  int i = 0;
  while (*p == ' ') ++p;
  if (*p == ']') return 0;
  for (;;) {
    size_t n = 0;
    while (*p && *p != ',' && *p != ']' && *p != ' ' && n + 1 < sizeof(tok)) tok[n++] = *p++;
    tok[n] = '\0';
    while (*p == ' ') ++p;
    if (i >= f->count) {
      snprintf(err, err_cap, "attribute '%s' takes at most %d values", key, f->count);
      return -1;
    }
    if (bpg_elem_parse(f, dst + es * (size_t)i, tok, err, err_cap) != 0) return -1;
    ++i;
    if (*p == ',') {
      ++p;
      while (*p == ' ') ++p;
      continue;
    }
    if (*p == ']' && p[1] == '\0') return 0;
    snprintf(err, err_cap, "attribute '%s': malformed list", key);
    return -1;
  }
}
