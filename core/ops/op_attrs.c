/* backplane core: attribute structs -- defaults (what NULL means), older
 * callers' smaller structs, and validation of enum fields.
 *
 * Defaults are the values documented next to each field in ops.h.
 */
#include <stdint.h>
#include <string.h>

#include "ops/ops_internal.h"

/* Non-zero defaults per attribute struct (designated initializers). */
#define BP__ONE {.kind = BP_SCALAR_NONE} /* scalars whose NONE means 1 */
#define BP__DEFAULTS_bp_no_attrs_t
#define BP__DEFAULTS_bp_clamp_attrs_t
#define BP__DEFAULTS_bp_elu_attrs_t .alpha = 1.0, .scale = 1.0, .input_scale = 1.0,
#define BP__DEFAULTS_bp_gelu_attrs_t .approximate = BP_GELU_NONE,
#define BP__DEFAULTS_bp_hardtanh_attrs_t .min_val = -1.0, .max_val = 1.0,
#define BP__DEFAULTS_bp_leaky_relu_attrs_t .negative_slope = 0.01,
#define BP__DEFAULTS_bp_softplus_attrs_t .beta = 1.0, .threshold = 20.0,
#define BP__DEFAULTS_bp_binary_attrs_t .alpha = BP__ONE, .rounding_mode = BP_ROUNDING_NONE,
#define BP__DEFAULTS_bp_reduce_attrs_t .flags = BP_REDUCE_ALL_DIMS, .correction = 1.0,
#define BP__DEFAULTS_bp_dim_attrs_t .dim = 0, .dtype = BP_DTYPE_INVALID,
#define BP__DEFAULTS_bp_dims_attrs_t
#define BP__DEFAULTS_bp_sort_attrs_t .dim = -1,
#define BP__DEFAULTS_bp_topk_attrs_t .dim = -1, .largest = 1, .sorted = 1,
#define BP__DEFAULTS_bp_addmm_attrs_t .beta = BP__ONE, .alpha = BP__ONE,
#define BP__DEFAULTS_bp_cdist_attrs_t .p = 2.0,
#define BP__DEFAULTS_bp_linear_attrs_t .activation = BP_ACTIVATION_NONE,
#define BP__DEFAULTS_bp_conv_attrs_t                                             \
  .stride = {1, 1, 1}, .dilation = {1, 1, 1}, .groups = 1, .output_mask = 7,
#define BP__DEFAULTS_bp_pool_attrs_t .dilation = {1, 1, 1}, .count_include_pad = 1,
#define BP__DEFAULTS_bp_adaptive_pool_attrs_t
#define BP__DEFAULTS_bp_col2im_attrs_t .dilation = {1, 1}, .stride = {1, 1},
#define BP__DEFAULTS_bp_grid_sampler_attrs_t
#define BP__DEFAULTS_bp_upsample_attrs_t
#define BP__DEFAULTS_bp_softmax_attrs_t .dim = -1,
#define BP__DEFAULTS_bp_batch_norm_attrs_t .training = 1, .momentum = 0.1, .eps = 1e-5,
#define BP__DEFAULTS_bp_group_norm_attrs_t .output_mask = 7, .eps = 1e-5,
#define BP__DEFAULTS_bp_layer_norm_attrs_t .normalized_rank = 1, .eps = 1e-5, .output_mask = 7,
#define BP__DEFAULTS_bp_rms_norm_attrs_t .normalized_rank = 1,
#define BP__DEFAULTS_bp_embedding_attrs_t .padding_idx = -1,
#define BP__DEFAULTS_bp_index_put_attrs_t
#define BP__DEFAULTS_bp_scatter_attrs_t .include_self = 1,
#define BP__DEFAULTS_bp_slice_attrs_t .end = INT64_MAX, .step = 1,
#define BP__DEFAULTS_bp_cast_attrs_t
#define BP__DEFAULTS_bp_pad_attrs_t .mode = BP_PAD_CONSTANT,
#define BP__DEFAULTS_bp_fill_attrs_t
#define BP__DEFAULTS_bp_arange_attrs_t                                           \
  .start = {.kind = BP_SCALAR_INT, .v.i = 0}, .step = {.kind = BP_SCALAR_INT, .v.i = 1},
#define BP__DEFAULTS_bp_random_attrs_t .train = 1, .p = 0.5,
#define BP__DEFAULTS_bp_fft_attrs_t .onesided = 1,
#define BP__DEFAULTS_bp_sdpa_attrs_t
#define BP__DEFAULTS_bp_rotary_attrs_t
#define BP__DEFAULTS_bp_cross_entropy_attrs_t .reduction = BP_LOSS_MEAN, .ignore_index = -100,
#define BP__DEFAULTS_bp_quantize_attrs_t .axis = -1,
#define BP__DEFAULTS_bp_scaled_mm_attrs_t
#define BP__DEFAULTS_bp_sample_attrs_t .temperature = 1.0,
#define BP__DEFAULTS_bp_penalty_attrs_t .repetition = 1.0,
#define BP__DEFAULTS_bp_paged_attention_attrs_t
#define BP__DEFAULTS_bp_qkv_rotary_attrs_t
#define BP__DEFAULTS_bp_moe_topk_attrs_t .top_k = 1,
#define BP__DEFAULTS_bp_fused_quant_attrs_t
#define BP__DEFAULTS_bp_softcap_attrs_t
#define BP__DEFAULTS_bp_logits_mask_attrs_t
#define BP__DEFAULTS_bp_moe_permute_attrs_t .num_experts = 1,
#define BP__DEFAULTS_bp_rejection_attrs_t
#define BP__DEFAULTS_bp_moe_align_attrs_t .num_experts = 1, .block_size = 1,
#define BP__DEFAULTS_bp_grouped_topk_attrs_t .top_k = 1,
#define BP__DEFAULTS_bp_group_quant_attrs_t .group_size = 128,
#define BP__DEFAULTS_bp_gather_cache_attrs_t
#define BP__DEFAULTS_bp_slot_mapping_attrs_t .block_size = 16,
#define BP__DEFAULTS_bp_logprobs_attrs_t
#define BP__DEFAULTS_bp_swiglu_oai_attrs_t

#define BP__DEFAULT_STRUCT(t) static const t bp__default_##t = {.struct_size = sizeof(t), BP__DEFAULTS_##t};
BP_ATTRS_TYPES(BP__DEFAULT_STRUCT)
#undef BP__DEFAULT_STRUCT

typedef struct bp__attrs_type_info {
  const char* name;
  uint32_t size;
  const void* defaults;
} bp__attrs_type_info_t;

static const bp__attrs_type_info_t bp__attrs_types[BP__ATTRS_KIND_COUNT_] = {
#define BP__TYPE_INFO(t) [BP__ATTRS_##t] = {#t, sizeof(t), &bp__default_##t},
    BP_ATTRS_TYPES(BP__TYPE_INFO)
#undef BP__TYPE_INFO
};

/* Anything larger is not an attribute struct (a caller passed a wrong
 * pointer or an uninitialized struct_size). */
#define BP__ATTRS_MAX_STRUCT_SIZE 4096u

/* ---- validation of enum fields ------------------------------------------ */

static bp_status_t bp__check_enum(const bp__op_meta_t* op, const char* field, uint32_t value,
                                  uint32_t max, const char* enum_name) {
  if (value > max) {
    return bp__error(BP_INVALID_ARGUMENT,
                     "op '%s': attrs.%s = %u is not a valid %s value (0..%u)", op->name, field,
                     value, enum_name, max);
  }
  return BP_OK;
}

static bp_status_t bp__check_scalar(const bp__op_meta_t* op, const char* field,
                                    const bp_scalar_t* s) {
  if (s->kind > BP_SCALAR_BOOL) {
    return bp__error(BP_INVALID_ARGUMENT,
                     "op '%s': attrs.%s.kind = %u is not a valid bp_scalar_kind value (0..3)",
                     op->name, field, s->kind);
  }
  if (s->kind == BP_SCALAR_BOOL && s->v.b > 1) {
    return bp__error(BP_INVALID_ARGUMENT, "op '%s': attrs.%s is a bool scalar with value %llu",
                     op->name, field, (unsigned long long)s->v.b);
  }
  return BP_OK;
}

/* dtype fields: INVALID (default rule) or a valid dtype. */
static bp_status_t bp__check_dtype(const bp__op_meta_t* op, const char* field, uint32_t dtype,
                                   int required) {
  if (dtype == BP_DTYPE_INVALID && !required) return BP_OK;
  if (!bp__dtype_valid(dtype)) {
    return bp__error(BP_INVALID_ARGUMENT, "op '%s': attrs.%s = %u is not a valid dtype%s",
                     op->name, field, dtype, required ? " (this op needs a target dtype)" : "");
  }
  return BP_OK;
}

static bp_status_t bp__check_count(const bp__op_meta_t* op, const char* field, int64_t value,
                                   int64_t max) {
  if (value < 0 || value > max) {
    return bp__error(BP_INVALID_ARGUMENT, "op '%s': attrs.%s = %lld is out of range (0..%lld)",
                     op->name, field, (long long)value, (long long)max);
  }
  return BP_OK;
}

/* The output shape creation ops may carry: has_shape 0 or 1; with it, a
 * rank up to BP_MAX_RANK and sizes >= 0. */
static bp_status_t bp__check_out_shape(const bp__op_meta_t* op, uint32_t has_shape, uint32_t rank,
                                       const int64_t* sizes) {
  if (has_shape > 1) {
    return bp__error(BP_INVALID_ARGUMENT, "op '%s': attrs.has_shape = %u must be 0 or 1",
                     op->name, has_shape);
  }
  if (!has_shape) return BP_OK;
  if (rank > BP_MAX_RANK) {
    return bp__error(BP_INVALID_ARGUMENT, "op '%s': attrs.rank = %u exceeds the maximum %d",
                     op->name, rank, BP_MAX_RANK);
  }
  for (uint32_t d = 0; d < rank; ++d) {
    if (sizes[d] < 0) {
      return bp__error(BP_INVALID_ARGUMENT, "op '%s': attrs.sizes[%u] = %lld is negative",
                       op->name, d, (long long)sizes[d]);
    }
  }
  return BP_OK;
}

/* An optional field: its has_ flag is 0 or 1, and a field that is not
 * given holds zeros (n int64 values or n doubles), so a value set without
 * its flag is an error rather than silently ignored. */
static bp_status_t bp__check_given(const bp__op_meta_t* op, const char* field, uint32_t has,
                                   uint32_t n, const int64_t* ints, const double* reals) {
  if (has > 1) {
    return bp__error(BP_INVALID_ARGUMENT, "op '%s': attrs.has_%s = %u must be 0 or 1", op->name,
                     field, has);
  }
  for (uint32_t k = 0; !has && k < n; ++k) {
    if ((ints != NULL && ints[k] != 0) || (reals != NULL && reals[k] != 0.0)) {
      return bp__error(BP_INVALID_ARGUMENT,
                       "op '%s': attrs.%s is set but attrs.has_%s is 0 (set it to give the "
                       "value)",
                       op->name, field, field);
    }
  }
  return BP_OK;
}

#define BP__TRY(expr)                   \
  do {                                  \
    bp_status_t st_ = (expr);           \
    if (st_ != BP_OK) return st_;       \
  } while (0)

static bp_status_t bp__attrs_validate(const bp__op_meta_t* op, const bp__attrs_storage_t* s) {
  switch (op->attrs_kind) {
    case BP__ATTRS_bp_clamp_attrs_t:
      BP__TRY(bp__check_scalar(op, "min", &s->m_bp_clamp_attrs_t.min));
      BP__TRY(bp__check_scalar(op, "max", &s->m_bp_clamp_attrs_t.max));
      break;
    case BP__ATTRS_bp_gelu_attrs_t:
      BP__TRY(bp__check_enum(op, "approximate", s->m_bp_gelu_attrs_t.approximate, BP_GELU_TANH,
                             "bp_gelu_approximate"));
      break;
    case BP__ATTRS_bp_binary_attrs_t: {
      const bp_binary_attrs_t* a = &s->m_bp_binary_attrs_t;
      const uint32_t known = BP_BINARY_OTHER_IS_SCALAR | BP_BINARY_SELF_IS_SCALAR;
      if (a->flags & ~known) {
        return bp__error(BP_INVALID_ARGUMENT, "op '%s': attrs.flags = 0x%x has unknown bits 0x%x",
                         op->name, a->flags, a->flags & ~known);
      }
      if (a->flags == known) {
        return bp__error(BP_INVALID_ARGUMENT,
                         "op '%s': attrs.flags sets both BP_BINARY_OTHER_IS_SCALAR and "
                         "BP_BINARY_SELF_IS_SCALAR",
                         op->name);
      }
      BP__TRY(bp__check_scalar(op, "scalar", &a->scalar));
      BP__TRY(bp__check_scalar(op, "alpha", &a->alpha));
      BP__TRY(bp__check_enum(op, "rounding_mode", a->rounding_mode, BP_ROUNDING_FLOOR,
                             "bp_rounding_mode"));
      if (a->rounding_mode != BP_ROUNDING_NONE && op->id != BP_OP_div) {
        return bp__error(BP_INVALID_ARGUMENT,
                         "op '%s': attrs.rounding_mode = %u is only meaningful for div",
                         op->name, a->rounding_mode);
      }
      if (a->flags != 0 && a->scalar.kind == BP_SCALAR_NONE) {
        return bp__error(BP_INVALID_ARGUMENT,
                         "op '%s': attrs.flags says an operand is a scalar but attrs.scalar.kind "
                         "is BP_SCALAR_NONE",
                         op->name);
      }
      break;
    }
    case BP__ATTRS_bp_reduce_attrs_t: {
      const bp_reduce_attrs_t* a = &s->m_bp_reduce_attrs_t;
      const uint32_t known = BP_REDUCE_KEEPDIM | BP_REDUCE_ALL_DIMS;
      if (a->flags & ~known) {
        return bp__error(BP_INVALID_ARGUMENT, "op '%s': attrs.flags = 0x%x has unknown bits 0x%x",
                         op->name, a->flags, a->flags & ~known);
      }
      BP__TRY(bp__check_count(op, "num_dims", a->num_dims, BP_MAX_RANK));
      BP__TRY(bp__check_dtype(op, "dtype", a->dtype, 0));
      break;
    }
    case BP__ATTRS_bp_dim_attrs_t:
      BP__TRY(bp__check_dtype(op, "dtype", s->m_bp_dim_attrs_t.dtype, 0));
      break;
    case BP__ATTRS_bp_dims_attrs_t:
      BP__TRY(bp__check_count(op, "num_dims", s->m_bp_dims_attrs_t.num_dims, BP_MAX_RANK));
      break;
    case BP__ATTRS_bp_addmm_attrs_t:
      BP__TRY(bp__check_scalar(op, "beta", &s->m_bp_addmm_attrs_t.beta));
      BP__TRY(bp__check_scalar(op, "alpha", &s->m_bp_addmm_attrs_t.alpha));
      break;
    case BP__ATTRS_bp_linear_attrs_t:
      BP__TRY(bp__check_enum(op, "activation", s->m_bp_linear_attrs_t.activation,
                             BP_ACTIVATION_TANH, "bp_activation"));
      break;
    case BP__ATTRS_bp_conv_attrs_t:
      BP__TRY(bp__check_count(op, "spatial_dims", s->m_bp_conv_attrs_t.spatial_dims,
                              BP_MAX_SPATIAL));
      break;
    case BP__ATTRS_bp_pool_attrs_t: {
      const bp_pool_attrs_t* a = &s->m_bp_pool_attrs_t;
      BP__TRY(bp__check_count(op, "spatial_dims", a->spatial_dims, BP_MAX_SPATIAL));
      BP__TRY(bp__check_given(op, "stride", a->has_stride, 3, a->stride, NULL));
      BP__TRY(bp__check_given(op, "divisor_override", a->has_divisor_override, 1,
                              &a->divisor_override, NULL));
      for (uint32_t k = 0; a->has_stride && k < a->spatial_dims; ++k) {
        if (a->stride[k] <= 0) {
          return bp__error(BP_INVALID_ARGUMENT,
                           "op '%s': attrs.stride[%u] = %lld must be > 0 (leave has_stride 0 "
                           "for a stride equal to the kernel)",
                           op->name, k, (long long)a->stride[k]);
        }
      }
      if (a->has_divisor_override && a->divisor_override == 0) {
        return bp__error(BP_INVALID_ARGUMENT,
                         "op '%s': attrs.divisor_override = 0 is given (has_divisor_override) "
                         "but must not be zero",
                         op->name);
      }
      break;
    }
    case BP__ATTRS_bp_upsample_attrs_t: {
      const bp_upsample_attrs_t* a = &s->m_bp_upsample_attrs_t;
      BP__TRY(bp__check_given(op, "output_size", a->has_output_size, 2, a->output_size, NULL));
      BP__TRY(bp__check_given(op, "scale", a->has_scale, 2, NULL, a->scale));
      break;
    }
    case BP__ATTRS_bp_adaptive_pool_attrs_t:
      BP__TRY(bp__check_count(op, "spatial_dims", s->m_bp_adaptive_pool_attrs_t.spatial_dims,
                              BP_MAX_SPATIAL));
      break;
    case BP__ATTRS_bp_grid_sampler_attrs_t:
      BP__TRY(bp__check_enum(op, "interpolation", s->m_bp_grid_sampler_attrs_t.interpolation,
                             BP_GRID_BICUBIC, "bp_grid_interpolation"));
      BP__TRY(bp__check_enum(op, "padding_mode", s->m_bp_grid_sampler_attrs_t.padding_mode,
                             BP_GRID_PAD_REFLECTION, "bp_grid_padding"));
      break;
    case BP__ATTRS_bp_layer_norm_attrs_t:
      BP__TRY(bp__check_count(op, "normalized_rank", s->m_bp_layer_norm_attrs_t.normalized_rank,
                              BP_MAX_RANK));
      break;
    case BP__ATTRS_bp_rms_norm_attrs_t:
      BP__TRY(bp__check_count(op, "normalized_rank", s->m_bp_rms_norm_attrs_t.normalized_rank,
                              BP_MAX_RANK));
      break;
    case BP__ATTRS_bp_embedding_attrs_t:
      BP__TRY(bp__check_enum(op, "mode", s->m_bp_embedding_attrs_t.mode, BP_BAG_MAX,
                             "bp_embedding_bag_mode"));
      break;
    case BP__ATTRS_bp_scatter_attrs_t:
      BP__TRY(bp__check_enum(op, "reduce", s->m_bp_scatter_attrs_t.reduce, BP_SCATTER_AMIN,
                             "bp_scatter_reduce"));
      BP__TRY(bp__check_scalar(op, "value", &s->m_bp_scatter_attrs_t.value));
      break;
    case BP__ATTRS_bp_cast_attrs_t:
      BP__TRY(bp__check_dtype(op, "dtype", s->m_bp_cast_attrs_t.dtype, 1));
      break;
    case BP__ATTRS_bp_pad_attrs_t: {
      const bp_pad_attrs_t* a = &s->m_bp_pad_attrs_t;
      BP__TRY(bp__check_enum(op, "mode", a->mode, BP_PAD_CIRCULAR, "bp_pad_mode"));
      BP__TRY(bp__check_count(op, "num_pads", a->num_pads, 2 * BP_MAX_RANK));
      if (a->num_pads % 2 != 0) {
        return bp__error(BP_INVALID_ARGUMENT, "op '%s': attrs.num_pads = %u must be even",
                         op->name, a->num_pads);
      }
      BP__TRY(bp__check_scalar(op, "value", &a->value));
      break;
    }
    case BP__ATTRS_bp_fill_attrs_t: {
      const bp_fill_attrs_t* a = &s->m_bp_fill_attrs_t;
      BP__TRY(bp__check_scalar(op, "value", &a->value));
      BP__TRY(bp__check_dtype(op, "dtype", a->dtype, 0));
      BP__TRY(bp__check_out_shape(op, a->has_shape, a->rank, a->sizes));
      break;
    }
    case BP__ATTRS_bp_arange_attrs_t:
      BP__TRY(bp__check_scalar(op, "start", &s->m_bp_arange_attrs_t.start));
      BP__TRY(bp__check_scalar(op, "end", &s->m_bp_arange_attrs_t.end));
      BP__TRY(bp__check_scalar(op, "step", &s->m_bp_arange_attrs_t.step));
      BP__TRY(bp__check_dtype(op, "dtype", s->m_bp_arange_attrs_t.dtype, 0));
      break;
    case BP__ATTRS_bp_random_attrs_t: {
      const bp_random_attrs_t* a = &s->m_bp_random_attrs_t;
      if (!(a->p >= 0.0 && a->p <= 1.0)) {
        return bp__error(BP_INVALID_ARGUMENT, "op '%s': attrs.p = %g is not in [0, 1]",
                         op->name, a->p);
      }
      BP__TRY(bp__check_dtype(op, "dtype", a->dtype, 0));
      BP__TRY(bp__check_out_shape(op, a->has_shape, a->rank, a->sizes));
      if (op->id == BP_OP_dropout && (a->has_shape || a->dtype != BP_DTYPE_INVALID)) {
        return bp__error(BP_INVALID_ARGUMENT,
                         "op '%s': attrs.has_shape and attrs.dtype are for rand, randn and "
                         "randperm; dropout's outputs follow its input",
                         op->name);
      }
      break;
    }
    case BP__ATTRS_bp_fft_attrs_t:
      BP__TRY(bp__check_count(op, "num_dims", s->m_bp_fft_attrs_t.num_dims, BP_MAX_RANK));
      BP__TRY(bp__check_enum(op, "normalization", s->m_bp_fft_attrs_t.normalization,
                             BP_FFT_NORM_BY_N, "bp_fft_norm"));
      break;
    case BP__ATTRS_bp_cross_entropy_attrs_t:
      BP__TRY(bp__check_enum(op, "reduction", s->m_bp_cross_entropy_attrs_t.reduction,
                             BP_LOSS_SUM, "bp_loss_reduction"));
      break;
    default:
      break;
  }
  return BP_OK;
}

bp_status_t bp__attrs_fill(const bp__op_meta_t* op, const void* attrs,
                           bp__attrs_storage_t* storage, const void** out_attrs) {
  const bp__attrs_type_info_t* type = &bp__attrs_types[op->attrs_kind];
  uint32_t given = 0;
  if (attrs != NULL) {
    memcpy(&given, attrs, sizeof(given));
    if (given < sizeof(uint32_t) || given > BP__ATTRS_MAX_STRUCT_SIZE) {
      return bp__error(BP_INVALID_ARGUMENT,
                       "op '%s': attrs->struct_size = %u is not a valid size for %s (expected "
                       "%u; set it to sizeof)",
                       op->name, given, type->name, type->size);
    }
  }
  if (op->attrs_size == 0) {
    /* Ops without attributes accept a bp_no_attrs_t (or NULL) and hand the
     * plugin NULL. */
    *out_attrs = NULL;
    return BP_OK;
  }
  memcpy(storage, type->defaults, type->size);
  if (attrs != NULL) {
    /* Older callers: copy what they have; newer callers: what we know. */
    memcpy(storage, attrs, given < type->size ? given : type->size);
  }
  memcpy(storage, &type->size, sizeof(uint32_t)); /* plugins see this header's size */
  bp_status_t st = bp__attrs_validate(op, storage);
  if (st != BP_OK) return st;
  if (op->attrs_kind == BP__ATTRS_bp_pool_attrs_t) {
    /* Plugins see the resolved stride: PyTorch's default is the kernel. */
    bp_pool_attrs_t* a = &storage->m_bp_pool_attrs_t;
    for (uint32_t k = 0; !a->has_stride && k < a->spatial_dims; ++k) a->stride[k] = a->kernel[k];
    a->has_stride = 1;
  }
  *out_attrs = storage;
  return BP_OK;
}
