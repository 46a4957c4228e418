/* backplane: operator ids and attribute structs (part of the stable ABI).
 *
 * Depends only on <stdint.h>, <stddef.h> and backplane's own ABI headers.
 * The op list itself lives in ops.def (the single source of truth).
 *
 * Attribute structs:
 *  - start with `uint32_t struct_size` (the caller's sizeof);
 *  - only grow at the end; a callee accepts struct_size >= the first released
 *    size (BP_ATTRS_V1_SIZE_<type>) and never reads past struct_size;
 *  - the application may pass NULL for "all defaults"; the core always hands
 *    plugins a filled struct, never NULL (ops with bp_no_attrs_t get NULL).
 *  - enums inside are fixed-width integers; unknown values are rejected with
 *    BP_INVALID_ARGUMENT by the core before any plugin sees them.
 */
#ifndef BACKPLANE_OPS_H_
#define BACKPLANE_OPS_H_

#include "backplane/types.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ------------------------------------------------------------------------ */
/* Op ids, generated from ops.def.                                          */
/* ------------------------------------------------------------------------ */
enum bp_op_id {
  BP_OP_INVALID = 0,
#define BP_OP(id, name, cat, fam, ins, outs, attrs, rule, aten) BP_OP_##name = id,
#include "backplane/ops.def"
#undef BP_OP
  BP_OP_ID_END_
};
/* Number of launch slots a plugin built against this header provides
 * (ids 0..BP_OP_COUNT-1; slot 0 is always NULL). */
#define BP_OP_COUNT ((uint32_t)BP_OP_ID_END_)

enum bp_op_category {
  BP_OP_CATEGORY_UNARY = 1,
  BP_OP_CATEGORY_BINARY = 2,
  BP_OP_CATEGORY_LOGICAL = 3,
  BP_OP_CATEGORY_REDUCTION = 4,
  BP_OP_CATEGORY_MATMUL = 5,
  BP_OP_CATEGORY_CONV_POOL = 6,
  BP_OP_CATEGORY_NORM = 7,
  BP_OP_CATEGORY_INDEX = 8,
  BP_OP_CATEGORY_SHAPE = 9,
  BP_OP_CATEGORY_CREATION = 10,
  BP_OP_CATEGORY_RANDOM = 11,
  BP_OP_CATEGORY_FFT = 12,
  BP_OP_CATEGORY_FUSED = 13,
  BP_OP_CATEGORY_QUANT = 14 /* quantization and quantized matmuls */
};

/* Kernel families (the family column of ops.def): ops one kernel file or
 * one generic kernel runs. Append-only, like the ids. */
enum bp_op_family {
  BP_OP_FAMILY_INVALID = 0, /* not an op id */
  BP_OP_FAMILY_UNARY_EW = 1,   /* one tensor in, elementwise */
  BP_OP_FAMILY_BINARY_EW = 2,  /* two tensors (or a tensor and a scalar), elementwise */
  BP_OP_FAMILY_COMPARE = 3,    /* binary comparisons, bool out */
  BP_OP_FAMILY_TERNARY_EW = 4, /* three operands, elementwise (where, lerp, ...) */
  BP_OP_FAMILY_REDUCE = 5,     /* one output, reduced dims */
  BP_OP_FAMILY_REDUCE_EXT = 6, /* values and indices, variance, scans, sorting */
  BP_OP_FAMILY_MATMUL = 7,
  BP_OP_FAMILY_DISTANCE = 8,   /* cdist, pdist */
  BP_OP_FAMILY_CONV = 9,
  BP_OP_FAMILY_POOL = 10,
  BP_OP_FAMILY_RESAMPLE = 11,  /* grid sampling, upsampling */
  BP_OP_FAMILY_SOFTMAX = 12,
  BP_OP_FAMILY_NORM = 13,
  BP_OP_FAMILY_LOSS = 14,
  BP_OP_FAMILY_INDEX = 15,     /* gathers, embedding, nonzero */
  BP_OP_FAMILY_SCATTER = 16,
  BP_OP_FAMILY_COPY = 17,      /* to_copy, copy, clone, cat */
  BP_OP_FAMILY_SHAPE = 18,     /* pad, flip, repeat */
  BP_OP_FAMILY_CREATION = 19,
  BP_OP_FAMILY_RANDOM = 20,
  BP_OP_FAMILY_FFT = 21,
  BP_OP_FAMILY_ATTENTION = 22,
  BP_OP_FAMILY_GLU = 23,       /* gated activations: act(first half of the last dim) * second half */
  BP_OP_FAMILY_QUANT = 24,     /* quantize, dequantize, quantized matmuls */
  BP_OP_FAMILY_SAMPLE = 25,    /* token sampling from logits rows, logit penalties */
  BP_OP_FAMILY_PAGED_ATTENTION = 26, /* KV cache in fixed-size blocks: append, attention */
  BP_OP_FAMILY_MOE = 27,       /* mixture of experts: routing, permutation, grouped GEMM */
  BP_OP_FAMILY_COUNT_ = 28
};

/* The family of op id `op`; BP_OP_FAMILY_INVALID for 0 and ids past the
 * table. Pure; a switch the compiler turns into a table. */
static inline uint32_t bp_op_family(uint32_t op) {
  switch (op) {
#define BP_OP(id, name, cat, fam, ins, outs, attrs, rule, aten) \
  case id:                                                      \
    return BP_OP_FAMILY_##fam;
#include "backplane/ops.def"
#undef BP_OP
    default:
      return BP_OP_FAMILY_INVALID;
  }
}
/* Nonzero for the elementwise families (unary, binary, compare, ternary). */
static inline int bp_op_is_elementwise(uint32_t op) {
  uint32_t f = bp_op_family(op);
  return f == BP_OP_FAMILY_UNARY_EW || f == BP_OP_FAMILY_BINARY_EW ||
         f == BP_OP_FAMILY_COMPARE || f == BP_OP_FAMILY_TERNARY_EW;
}

/* ------------------------------------------------------------------------ */
/* Shared attribute enums (carried as uint32_t).                            */
/* ------------------------------------------------------------------------ */
enum bp_rounding_mode { BP_ROUNDING_NONE = 0, BP_ROUNDING_TRUNC = 1, BP_ROUNDING_FLOOR = 2 };
enum bp_activation {
  BP_ACTIVATION_NONE = 0,
  BP_ACTIVATION_RELU = 1,
  BP_ACTIVATION_GELU_ERF = 2,
  BP_ACTIVATION_GELU_TANH = 3,
  BP_ACTIVATION_SILU = 4,
  BP_ACTIVATION_SIGMOID = 5,
  BP_ACTIVATION_TANH = 6
};
enum bp_gelu_approximate { BP_GELU_NONE = 0, BP_GELU_TANH = 1 };
enum bp_scatter_reduce {
  BP_SCATTER_NONE = 0, BP_SCATTER_SUM = 1, BP_SCATTER_PROD = 2,
  BP_SCATTER_MEAN = 3, BP_SCATTER_AMAX = 4, BP_SCATTER_AMIN = 5
};
enum bp_pad_mode { BP_PAD_CONSTANT = 0, BP_PAD_REFLECT = 1, BP_PAD_REPLICATE = 2, BP_PAD_CIRCULAR = 3 };
enum bp_embedding_bag_mode { BP_BAG_SUM = 0, BP_BAG_MEAN = 1, BP_BAG_MAX = 2 };
enum bp_grid_interpolation { BP_GRID_BILINEAR = 0, BP_GRID_NEAREST = 1, BP_GRID_BICUBIC = 2 };
enum bp_grid_padding { BP_GRID_PAD_ZEROS = 0, BP_GRID_PAD_BORDER = 1, BP_GRID_PAD_REFLECTION = 2 };
enum bp_fft_norm { BP_FFT_NORM_NONE = 0, BP_FFT_NORM_ORTHO = 1, BP_FFT_NORM_BY_N = 2 };
enum bp_loss_reduction { BP_LOSS_NONE = 0, BP_LOSS_MEAN = 1, BP_LOSS_SUM = 2 };

/* ------------------------------------------------------------------------ */
/* Attribute structs. Defaults (what NULL means) are given per field.       */
/* ------------------------------------------------------------------------ */
typedef struct bp_no_attrs { uint32_t struct_size; } bp_no_attrs_t;

/* clamp(self, min, max): kind NONE means the bound is absent. */
typedef struct bp_clamp_attrs {
  uint32_t struct_size; uint32_t reserved0;
  bp_scalar_t min; bp_scalar_t max;
} bp_clamp_attrs_t;

typedef struct bp_elu_attrs {
  uint32_t struct_size; uint32_t reserved0;
  double alpha, scale, input_scale; /* 1, 1, 1 */
} bp_elu_attrs_t;

typedef struct bp_gelu_attrs {
  uint32_t struct_size;
  uint32_t approximate; /* enum bp_gelu_approximate; NONE (erf form) */
} bp_gelu_attrs_t;

typedef struct bp_hardtanh_attrs {
  uint32_t struct_size; uint32_t reserved0;
  double min_val, max_val; /* -1, 1 */
} bp_hardtanh_attrs_t;

typedef struct bp_leaky_relu_attrs {
  uint32_t struct_size; uint32_t reserved0;
  double negative_slope; /* 0.01 */
} bp_leaky_relu_attrs_t;

typedef struct bp_softplus_attrs {
  uint32_t struct_size; uint32_t reserved0;
  double beta, threshold; /* 1, 20 */
} bp_softplus_attrs_t;

/* Binary ops. Operands are positional: inputs[0] = self, inputs[1] = other.
 * With BP_BINARY_OTHER_IS_SCALAR the `other` descriptor is absent and
 * `scalar` is the operand (aten .Scalar overloads); with
 * BP_BINARY_SELF_IS_SCALAR `self` is absent (pow.Scalar; applications
 * state it explicitly with bp_op_pow_scalar). A scalar operand takes part in
 * type promotion as a PyTorch "wrapped number". */
enum bp_binary_flags {
  BP_BINARY_OTHER_IS_SCALAR = 1u << 0,
  BP_BINARY_SELF_IS_SCALAR = 1u << 1
};
typedef struct bp_binary_attrs {
  uint32_t struct_size;
  uint32_t flags;         /* enum bp_binary_flags; 0 */
  bp_scalar_t scalar;     /* the scalar operand when a flag says so */
  bp_scalar_t alpha;      /* add/sub/addcmul multiplier, lerp weight; NONE = 1 */
  uint32_t rounding_mode; /* div: enum bp_rounding_mode; NONE */
  uint32_t reserved0;
} bp_binary_attrs_t;

/* Reductions over dims. num_dims == 0 with BP_REDUCE_ALL_DIMS reduces all. */
enum bp_reduce_flags {
  BP_REDUCE_KEEPDIM = 1u << 0,
  BP_REDUCE_ALL_DIMS = 1u << 1 /* dim=None */
};
typedef struct bp_reduce_attrs {
  uint32_t struct_size;
  uint32_t flags;     /* enum bp_reduce_flags; ALL_DIMS */
  int32_t num_dims;
  int32_t dims[BP_MAX_RANK]; /* negative dims count from the end */
  uint32_t dtype;     /* output/accumulation dtype; INVALID = default rule */
  double correction;  /* var: 1 (Bessel) */
} bp_reduce_attrs_t;

typedef struct bp_dim_attrs {
  uint32_t struct_size;
  int32_t dim;    /* 0 */
  uint32_t dtype; /* cumsum output dtype; INVALID = default rule */
  uint32_t reserved0;
} bp_dim_attrs_t;

typedef struct bp_dims_attrs {
  uint32_t struct_size;
  uint32_t num_dims;
  int64_t dims[BP_MAX_RANK]; /* flip: dims; repeat: repeat counts */
} bp_dims_attrs_t;

typedef struct bp_sort_attrs {
  uint32_t struct_size;
  int32_t dim;         /* -1 */
  uint32_t descending; /* 0 */
  uint32_t stable;     /* 0; backplane sorts are always stable */
} bp_sort_attrs_t;

typedef struct bp_topk_attrs {
  uint32_t struct_size;
  int32_t dim;      /* -1 */
  int64_t k;
  uint32_t largest; /* 1 */
  uint32_t sorted;  /* 1 */
} bp_topk_attrs_t;

typedef struct bp_addmm_attrs {
  uint32_t struct_size; uint32_t reserved0;
  bp_scalar_t beta, alpha; /* NONE = 1 */
} bp_addmm_attrs_t;

typedef struct bp_cdist_attrs {
  uint32_t struct_size;
  int32_t compute_mode; /* 0 */
  double p;             /* 2 */
} bp_cdist_attrs_t;

typedef struct bp_linear_attrs {
  uint32_t struct_size;
  uint32_t activation; /* enum bp_activation epilogue; NONE */
} bp_linear_attrs_t;

enum { BP_MAX_SPATIAL = 3 };
typedef struct bp_conv_attrs {
  uint32_t struct_size;
  uint32_t spatial_dims; /* 1, 2 or 3 */
  int64_t stride[BP_MAX_SPATIAL];         /* 1 */
  int64_t padding[BP_MAX_SPATIAL];        /* 0 */
  int64_t dilation[BP_MAX_SPATIAL];       /* 1 */
  int64_t output_padding[BP_MAX_SPATIAL]; /* 0 */
  int64_t groups;                         /* 1 */
  uint32_t transposed;                    /* 0 */
  uint32_t output_mask; /* backward: bit0 input, bit1 weight, bit2 bias; 7 */
} bp_conv_attrs_t;

/* Optional values are explicit: a has_* flag says whether the field is
 * given; a field that is not given must be left 0 (INVALID_ARGUMENT
 * otherwise, so a value is never silently ignored). */
typedef struct bp_pool_attrs {
  uint32_t struct_size;
  uint32_t spatial_dims;
  int64_t kernel[BP_MAX_SPATIAL];
  int64_t stride[BP_MAX_SPATIAL];   /* when has_stride: each > 0 */
  int64_t padding[BP_MAX_SPATIAL];  /* 0 */
  int64_t dilation[BP_MAX_SPATIAL]; /* 1 */
  uint32_t ceil_mode;               /* 0 */
  uint32_t count_include_pad;       /* 1 */
  int64_t divisor_override;         /* avg: when has_divisor_override, != 0 */
  /* 0: stride not given, it equals the kernel (PyTorch's stride=None). The
   * core resolves it: plugins always see has_stride = 1 and the stride. */
  uint32_t has_stride;
  uint32_t has_divisor_override; /* 0: divide by the window (PyTorch's None) */
} bp_pool_attrs_t;

typedef struct bp_adaptive_pool_attrs {
  uint32_t struct_size;
  uint32_t spatial_dims;
  int64_t output_size[BP_MAX_SPATIAL];
} bp_adaptive_pool_attrs_t;

typedef struct bp_col2im_attrs {
  uint32_t struct_size; uint32_t reserved0;
  int64_t output_size[2], kernel[2], dilation[2], padding[2], stride[2];
} bp_col2im_attrs_t;

typedef struct bp_grid_sampler_attrs {
  uint32_t struct_size;
  uint32_t interpolation; /* enum bp_grid_interpolation */
  uint32_t padding_mode;  /* enum bp_grid_padding */
  uint32_t align_corners;
} bp_grid_sampler_attrs_t;

/* upsample_*2d: the output size is given (has_output_size, each > 0) or
 * computed from the scales (has_scale: floor(input * scale)); given scales
 * (each finite and > 0) also set the source-index mapping, as PyTorch's
 * scales_h/scales_w. At least one of the two is given. */
typedef struct bp_upsample_attrs {
  uint32_t struct_size;
  uint32_t align_corners;
  int64_t output_size[2]; /* when has_output_size */
  double scale[2];        /* when has_scale */
  uint32_t has_output_size;
  uint32_t has_scale;
} bp_upsample_attrs_t;

typedef struct bp_softmax_attrs {
  uint32_t struct_size;
  int32_t dim;
  uint32_t half_to_float; /* 0 */
  uint32_t reserved0;
} bp_softmax_attrs_t;

typedef struct bp_batch_norm_attrs {
  uint32_t struct_size;
  uint32_t training; /* 1 */
  double momentum;   /* 0.1 */
  double eps;        /* 1e-5 */
} bp_batch_norm_attrs_t;

typedef struct bp_group_norm_attrs {
  uint32_t struct_size;
  uint32_t output_mask; /* backward: 7 */
  int64_t n, c, hxw, group;
  double eps; /* 1e-5 */
} bp_group_norm_attrs_t;

typedef struct bp_layer_norm_attrs {
  uint32_t struct_size;
  uint32_t normalized_rank; /* trailing dims normalized */
  int64_t normalized_shape[BP_MAX_RANK];
  double eps;           /* 1e-5 */
  uint32_t output_mask; /* backward: 7 */
  uint32_t reserved0;
} bp_layer_norm_attrs_t;

typedef struct bp_rms_norm_attrs {
  uint32_t struct_size;
  uint32_t normalized_rank; /* 1 */
  double eps;               /* 0 = machine epsilon of the input dtype */
} bp_rms_norm_attrs_t;

typedef struct bp_embedding_attrs {
  uint32_t struct_size;
  uint32_t mode;               /* bag: enum bp_embedding_bag_mode */
  int64_t padding_idx;         /* -1 = none */
  int64_t num_weights;         /* dense_backward */
  uint32_t scale_grad_by_freq; /* 0 */
  uint32_t include_last_offset;
} bp_embedding_attrs_t;

typedef struct bp_index_put_attrs {
  uint32_t struct_size;
  uint32_t accumulate; /* 0 */
} bp_index_put_attrs_t;

typedef struct bp_scatter_attrs {
  uint32_t struct_size;
  int32_t dim;
  uint32_t reduce;       /* enum bp_scatter_reduce */
  uint32_t include_self; /* 1 */
  bp_scalar_t value;     /* scatter.value when src is absent */
} bp_scatter_attrs_t;

typedef struct bp_slice_attrs {
  uint32_t struct_size;
  int32_t dim;
  int64_t start; /* select_scatter: the index */
  int64_t end;   /* INT64_MAX = to the end */
  int64_t step;  /* 1 */
} bp_slice_attrs_t;

typedef struct bp_cast_attrs {
  uint32_t struct_size;
  uint32_t dtype; /* target dtype */
} bp_cast_attrs_t;

typedef struct bp_pad_attrs {
  uint32_t struct_size;
  uint32_t mode;     /* enum bp_pad_mode */
  uint32_t num_pads; /* even; pairs (before, after) from the last dim back */
  uint32_t reserved0;
  int64_t pads[2 * BP_MAX_RANK];
  bp_scalar_t value; /* constant mode: 0 */
} bp_pad_attrs_t;

/* Creation ops (fill, arange, rand, randn, randperm) allocate their output
 * like every other op when outputs[0] is NULL: the dtype and shape then come
 * from the attributes below (arange's length from start, end and step). With
 * a given output, attributes that are set must agree with it. */

/* full / full_like / fill.Scalar / scalar_tensor. */
typedef struct bp_fill_attrs {
  uint32_t struct_size; uint32_t reserved0;
  bp_scalar_t value;
  /* For an allocated output: */
  uint32_t dtype;     /* INVALID = from value: bool, i64 for an int, f32 for a float */
  uint32_t has_shape; /* 1: rank and sizes give the output shape; 0: not given */
  uint32_t rank;
  uint32_t reserved1;
  int64_t sizes[BP_MAX_RANK];
} bp_fill_attrs_t;

typedef struct bp_arange_attrs {
  uint32_t struct_size; uint32_t reserved0;
  bp_scalar_t start, end, step; /* 0, required, 1 */
  uint32_t dtype; /* allocated output: INVALID = i64 when start, end and step
                     are integers, else f32 (PyTorch's rule) */
  uint32_t reserved1;
} bp_arange_attrs_t;

/* Counter-based random numbers (Philox-4x32-10): element i of a tensor uses
 * counter (offset + i); same seed and offset give the same bits on the same
 * backend. */
typedef struct bp_random_attrs {
  uint32_t struct_size;
  uint32_t train; /* dropout: 1 */
  uint64_t seed;
  uint64_t offset;
  double p; /* dropout probability */
  /* rand, randn, randperm with an allocated output (dropout: not used, must
   * stay 0): */
  uint32_t dtype;     /* INVALID = f32 (rand, randn), i64 (randperm) */
  uint32_t has_shape; /* 1: rank and sizes give the shape (randperm: [n]) */
  uint32_t rank;
  uint32_t reserved0;
  int64_t sizes[BP_MAX_RANK];
} bp_random_attrs_t;

typedef struct bp_fft_attrs {
  uint32_t struct_size;
  uint32_t num_dims;
  int64_t dims[BP_MAX_RANK];
  uint32_t normalization; /* enum bp_fft_norm */
  uint32_t onesided;      /* r2c: 1 */
  int64_t last_dim_size;  /* c2r */
} bp_fft_attrs_t;

typedef struct bp_sdpa_attrs {
  uint32_t struct_size;
  uint32_t is_causal; /* 0 */
  double scale;       /* 0 = 1/sqrt(head_dim) */
  uint32_t enable_gqa;
  uint32_t reserved0;
} bp_sdpa_attrs_t;

typedef struct bp_rotary_attrs {
  uint32_t struct_size;
  uint32_t interleaved; /* 0: rotate halves (GPT-NeoX); 1: pairs (GPT-J) */
} bp_rotary_attrs_t;

typedef struct bp_cross_entropy_attrs {
  uint32_t struct_size;
  uint32_t reduction;  /* enum bp_loss_reduction; MEAN */
  int64_t ignore_index; /* -100 */
  double label_smoothing;
} bp_cross_entropy_attrs_t;

/* Quantization (docs/semantics.md, "Quantization"). A quantized tensor of
 * 8-bit elements (i8, u8, float8_e4m3fn, float8_e5m2) has that dtype; one
 * of 4-bit elements (i4, u4, float4_e2m1fn) is a u8 tensor holding two per
 * byte along its last dim, element 2j in the low nibble and 2j+1 in the
 * high one (the ONNX / ml_dtypes / PyTorch float4_e2m1fn_x2 order), so its
 * last dim is half the logical one (which must be even).
 * The scale's shape picks the granularity: one element: per tensor; 1-D
 * with sizes[axis] elements and block_size 0: per channel along `axis`;
 * the data's rank with ceil(sizes[axis] / block_size) along `axis` and the
 * data's sizes elsewhere: per block (group) of block_size elements. */
enum bp_quantize_flags {
  /* fp8 targets: out-of-range values and +-inf give NaN (e4m3fn) or +-inf
   * (e5m2), PyTorch's casts, instead of saturating to +-max (the default,
   * ONNX saturate=1, as every fp8 quantizer does) */
  BP_QUANTIZE_NO_SATURATE = 1u << 0,
  /* weight_only_mm (ABI 1.3): the device may quantize each row of the
   * activations to int8 per block of 32 elements along k (scale amax / 127,
   * round to nearest even) and accumulate integer products (llama.cpp's
   * Q4 x Q8 dot): faster decode, an extra error of at most half a step of
   * x per element (docs/semantics.md, "weight_only_mm"). A device that
   * computes in f32 anyway ignores it */
  BP_QUANTIZE_INT8_ACTIVATIONS = 1u << 1
};
typedef struct bp_quantize_attrs {
  uint32_t struct_size;
  uint32_t qdtype;     /* element dtype of the quantized side (required) */
  /* dequantize: the output dtype (INVALID: the scale's dtype, f32 for an
   * e8m0 scale); quantize_dynamic: the scale output's dtype (INVALID: f32;
   * float8_e8m0fnu: OCP MX power-of-two scales); weight_only_mm and
   * quantize: unused, 0 */
  uint32_t dtype;
  int32_t axis;        /* per-channel / per-block axis; -1 (default): last */
  int64_t block_size;  /* 0: per tensor or per channel; > 0: elements per scale */
  uint32_t flags;      /* enum bp_quantize_flags */
  /* weight_only_mm (ABI 1.4, once reserved0): enum bp_activation applied to
   * x @ w^T + bias before the output is stored; NONE. Other ops: 0 */
  uint32_t activation;
} bp_quantize_attrs_t;

/* scaled_mm: out = act(scale_a[m] * scale_b[n] * sum_k (a[m,k] - a_zero_point)
 * * (b[k,n] - b_zero_point) + bias[n]) with exact int32 accumulation for
 * i8/u8 and f32 for fp8 (ONNX MatMulInteger, torch._int_mm, torch._scaled_mm). */
typedef struct bp_scaled_mm_attrs {
  uint32_t struct_size;
  uint32_t out_dtype;   /* INVALID: i32 for integer inputs without scales, else f32 */
  uint32_t activation;  /* enum bp_activation epilogue; NONE */
  int32_t a_zero_point; /* integer inputs only; 0 */
  int32_t b_zero_point; /* integer inputs only; 0 */
  uint32_t reserved0;
} bp_scaled_mm_attrs_t;

/* sample (ABI 1.2): one token per row of logits [..., V] (docs/semantics.md,
 * "Sampling"). Counter-based like the random ops: row r draws word r of the
 * Philox stream of (seed, offset), so a call consumes ceil(rows / 4)
 * offsets. */
typedef struct bp_sample_attrs {
  uint32_t struct_size;
  uint32_t top_k;     /* 0: no top-k filter (k >= V: none either) */
  double temperature; /* 0: greedy (first maximum; top_k, top_p ignored); > 0 */
  double top_p;       /* nucleus mass in (0, 1); 0 or 1: no top-p filter */
  uint64_t seed;
  uint64_t offset;    /* Philox counter offset */
} bp_sample_attrs_t;

/* repetition_penalty (ABI 1.2): vLLM's penalties over the ids in `tokens`
 * (ids outside [0, V) are padding and ignored). */
typedef struct bp_penalty_attrs {
  uint32_t struct_size;
  uint32_t reserved0;
  double repetition; /* > 0; 1 (or 0, the default): none. A seen id's logit
                        l becomes l / repetition if l > 0, else l * repetition */
  double presence;   /* subtracted once from a seen id's logit; 0: none */
  double frequency;  /* subtracted once per occurrence; 0: none */
} bp_penalty_attrs_t;

/* paged_attention (ABI 1.2): decode attention of one query token per
 * sequence over a KV cache in blocks (docs/semantics.md, "Paged KV cache");
 * paged_attention_prefill (ABI 1.3): causal attention of each sequence's new
 * tokens over the same cache (sliding_window counts keys up to and including
 * the query's position). */
typedef struct bp_paged_attention_attrs {
  uint32_t struct_size;
  uint32_t sliding_window; /* 0: none; W: only the last W keys of each sequence */
  double scale;            /* 0: 1 / sqrt(head_size) */
} bp_paged_attention_attrs_t;

/* qkv_rotary (ABI 1.2): one projection for q, k and v, the rotary embedding
 * applied to q and k (docs/semantics.md, "Paged KV cache"). */
typedef struct bp_qkv_rotary_attrs {
  uint32_t struct_size;
  uint32_t num_heads;    /* query heads H (required) */
  uint32_t num_kv_heads; /* key / value heads; H a multiple of it (required) */
  uint32_t interleaved;  /* 0: rotate halves (GPT-NeoX); 1: pairs (GPT-J) */
} bp_qkv_rotary_attrs_t;

/* moe_topk_softmax (ABI 1.2): the top_k experts of each token by router
 * logit, with their softmax probabilities (docs/semantics.md, "Mixture of
 * experts"). */
typedef struct bp_moe_topk_attrs {
  uint32_t struct_size;
  uint32_t top_k;       /* experts per token, 1..num_experts (required) */
  uint32_t renormalize; /* 1: the k weights are divided by their sum */
  uint32_t reserved0;
} bp_moe_topk_attrs_t;

/* rms_norm_quant, add_rms_norm_quant, swiglu_quant (ABI 1.3): the fused
 * layer (rms_norm, add_rms_norm, swiglu), then its result y quantized to
 * attrs.qdtype with one scale per row (docs/semantics.md, "Fused
 * quantization"). With opt_scale (one f32 element s, static): codes of
 * y / s, and scale_out [..., 1] holds s for every row; without (dynamic per
 * token): scale_out = min(amax of the row, scale_ub) / qmax (f32), codes of
 * y / scale_out. */
typedef struct bp_fused_quant_attrs {
  uint32_t struct_size;
  uint32_t qdtype;  /* i8, float8_e4m3fn or float8_e5m2 (required) */
  double eps;       /* norms: as rms_norm's (0: the input dtype's epsilon); swiglu_quant: 0 */
  double scale_ub;  /* dynamic: amax clamped to it (vLLM scale_ub); 0: none */
  uint32_t flags;   /* enum bp_quantize_flags */
  uint32_t reserved0;
} bp_fused_quant_attrs_t;

/* logits_softcap (ABI 1.3): out = tanh(logits / cap) * cap (docs/semantics.md,
 * "Logits processing"). */
typedef struct bp_softcap_attrs {
  uint32_t struct_size;
  uint32_t reserved0;
  double cap; /* > 0, finite (required; Gemma 2: 30 for the final logits) */
} bp_softcap_attrs_t;

/* top_k_top_p_mask (ABI 1.3): sample's top-k, top-p and a min-p filter over
 * rows of logits, the logits outside the kept set replaced by -inf
 * (docs/semantics.md, "Logits processing"). */
typedef struct bp_logits_mask_attrs {
  uint32_t struct_size;
  uint32_t top_k; /* 0 (or >= V): no top-k filter */
  double top_p;   /* in [0, 1]; 0 or 1: no top-p filter */
  double min_p;   /* in [0, 1]; keeps p_i >= min_p * max_j p_j; 0: none */
} bp_logits_mask_attrs_t;

/* moe_permute (ABI 1.3): rows of the tokens gathered into expert order
 * from their top-k expert ids (docs/semantics.md, "Mixture of experts"). */
typedef struct bp_moe_permute_attrs {
  uint32_t struct_size;
  uint32_t num_experts; /* E >= 1 (required); ids outside [0, E) are not local */
  uint32_t reserved0;
  uint32_t reserved1;
} bp_moe_permute_attrs_t;

/* rejection_sample (ABI 1.3): speculative decoding's verification of K
 * draft tokens per sequence against the target model's probabilities
 * (docs/semantics.md, "rejection_sample"). Counter-based like sample:
 * sequence b draws words 2Kb .. 2Kb + 2K - 1 of the Philox stream of (seed,
 * offset), so a call consumes ceil(2 K B / 4) offsets. */
typedef struct bp_rejection_attrs {
  uint32_t struct_size;
  uint32_t greedy; /* 1: accept a draft token iff it is the target's argmax */
  uint64_t seed;
  uint64_t offset; /* Philox counter offset */
} bp_rejection_attrs_t;

/* moe_align_block_size (ABI 1.4): the T * k (token, slot) pairs of topk_ids
 * sorted by expert, each expert's run padded to a multiple of block_size
 * with the pad value T * k (docs/semantics.md, "Mixture of experts"). */
typedef struct bp_moe_align_attrs {
  uint32_t struct_size;
  uint32_t num_experts; /* E >= 1 (required); ids outside [0, E) are not local: skipped */
  uint32_t block_size;  /* rows per GEMM block >= 1 (required; vLLM: 16..128) */
  uint32_t reserved0;
} bp_moe_align_attrs_t;

/* grouped_topk (ABI 1.4): DeepSeek-V2/V3 routing (docs/semantics.md,
 * "Mixture of experts"). */
enum bp_moe_scoring { BP_MOE_SCORING_SOFTMAX = 0, BP_MOE_SCORING_SIGMOID = 1 };
typedef struct bp_grouped_topk_attrs {
  uint32_t struct_size;
  uint32_t top_k;            /* experts per token >= 1 (required) */
  uint32_t num_expert_group; /* G, divides E (0 or 1: one group, plain top-k) */
  uint32_t topk_group;       /* groups kept, 1..G (0: all G) */
  uint32_t scoring_func;     /* enum bp_moe_scoring */
  uint32_t renormalize;      /* 1: the k weights are divided by their sum */
  double routed_scaling_factor; /* weights multiplied by it (0: 1) */
} bp_grouped_topk_attrs_t;

/* per_token_group_quant, rms_norm_group_quant, swiglu_group_quant (ABI
 * 1.4): symmetric quantization of each row in groups of group_size
 * elements, one f32 scale per group, scale = max(amax, eps) / qmax
 * (docs/semantics.md, "Group quantization"). */
enum bp_group_quant_flags {
  /* the scale output is [groups, rows] (column-major scales: DeepGEMM's
   * TMA layout) instead of [..., groups] */
  BP_GROUP_QUANT_COLUMN_MAJOR = 1u << 0,
  /* scales rounded up to a power of two (UE8M0: DeepSeek-V3.1, Blackwell
   * DeepGEMM) */
  BP_GROUP_QUANT_SCALE_UE8M0 = 1u << 1
};
typedef struct bp_group_quant_attrs {
  uint32_t struct_size;
  uint32_t qdtype;     /* i8, float8_e4m3fn or float8_e5m2 (required) */
  uint32_t group_size; /* >= 1, divides the row (required; DeepSeek-V3: 128) */
  uint32_t flags;      /* enum bp_group_quant_flags */
  double eps;          /* amax floor; 0: 1e-10 (vLLM's default) */
  double norm_eps;     /* rms_norm_group_quant: as rms_norm's eps (0: the input
                          dtype's epsilon); others: 0 */
} bp_group_quant_attrs_t;

/* gather_cache (ABI 1.4): paged cache rows of each sequence into a dense
 * [num_tokens, ...] tensor (docs/semantics.md, "Paged KV cache"). */
typedef struct bp_gather_cache_attrs {
  uint32_t struct_size;
  uint32_t reserved0;
  int64_t num_tokens; /* rows of dst >= 0 (required): cu_seq_lens[B] <= it; rows past it are zero */
} bp_gather_cache_attrs_t;

/* compute_slot_mapping (ABI 1.4): slot = block_tables[s, p / block_size] *
 * block_size + p % block_size for each token at position p of sequence s
 * (docs/semantics.md, "Paged KV cache"). */
typedef struct bp_slot_mapping_attrs {
  uint32_t struct_size;
  uint32_t block_size; /* >= 1 (required) */
  uint32_t reserved0;
  uint32_t reserved1;
} bp_slot_mapping_attrs_t;

/* gather_logprobs (ABI 1.4): log_softmax of each row, the log-probability
 * and rank of one token per row, and the num_logprobs most likely tokens
 * (docs/semantics.md, "Logits processing"). */
typedef struct bp_logprobs_attrs {
  uint32_t struct_size;
  uint32_t num_logprobs; /* k >= 0, <= V */
  uint32_t reserved0;
  uint32_t reserved1;
} bp_logprobs_attrs_t;

/* swiglu_oai (ABI 1.4): GPT-OSS's clamped SwiGLU over interleaved
 * (gate, up) pairs (docs/semantics.md, "Gated activations"). */
typedef struct bp_swiglu_oai_attrs {
  uint32_t struct_size;
  uint32_t reserved0;
  double alpha; /* sigmoid slope; 0: 1.702 */
  double limit; /* gate <= limit, |up| <= limit; 0: 7 (GPT-OSS); +inf: no clamp */
} bp_swiglu_oai_attrs_t;

/* Every attribute struct, for generated code (sizes, static asserts). */
#define BP_ATTRS_TYPES(X)                                                     \
  X(bp_no_attrs_t) X(bp_clamp_attrs_t) X(bp_elu_attrs_t) X(bp_gelu_attrs_t)   \
  X(bp_hardtanh_attrs_t) X(bp_leaky_relu_attrs_t) X(bp_softplus_attrs_t)      \
  X(bp_binary_attrs_t) X(bp_reduce_attrs_t) X(bp_dim_attrs_t)                 \
  X(bp_dims_attrs_t) X(bp_sort_attrs_t) X(bp_topk_attrs_t)                    \
  X(bp_addmm_attrs_t) X(bp_cdist_attrs_t) X(bp_linear_attrs_t)                \
  X(bp_conv_attrs_t) X(bp_pool_attrs_t) X(bp_adaptive_pool_attrs_t)           \
  X(bp_col2im_attrs_t) X(bp_grid_sampler_attrs_t) X(bp_upsample_attrs_t)      \
  X(bp_softmax_attrs_t) X(bp_batch_norm_attrs_t) X(bp_group_norm_attrs_t)     \
  X(bp_layer_norm_attrs_t) X(bp_rms_norm_attrs_t) X(bp_embedding_attrs_t)     \
  X(bp_index_put_attrs_t) X(bp_scatter_attrs_t) X(bp_slice_attrs_t)           \
  X(bp_cast_attrs_t) X(bp_pad_attrs_t) X(bp_fill_attrs_t)                     \
  X(bp_arange_attrs_t) X(bp_random_attrs_t) X(bp_fft_attrs_t)                 \
  X(bp_sdpa_attrs_t) X(bp_rotary_attrs_t) X(bp_cross_entropy_attrs_t)        \
  X(bp_quantize_attrs_t) X(bp_scaled_mm_attrs_t) X(bp_sample_attrs_t)        \
  X(bp_penalty_attrs_t) X(bp_paged_attention_attrs_t) X(bp_qkv_rotary_attrs_t)  \
  X(bp_moe_topk_attrs_t) X(bp_fused_quant_attrs_t) X(bp_softcap_attrs_t)          \
  X(bp_logits_mask_attrs_t) X(bp_moe_permute_attrs_t) X(bp_rejection_attrs_t)        \
  X(bp_moe_align_attrs_t) X(bp_grouped_topk_attrs_t) X(bp_group_quant_attrs_t)         \
  X(bp_gather_cache_attrs_t) X(bp_slot_mapping_attrs_t) X(bp_logprobs_attrs_t)       \
  X(bp_swiglu_oai_attrs_t)

/* First released size of each attribute struct (ABI 1.0, or the minor that
 * added it): a reader accepts struct_size >= it. Fields appended later default to zero. */
#define BP_ATTRS_V1_SIZE_bp_no_attrs_t 4u
#define BP_ATTRS_V1_SIZE_bp_clamp_attrs_t 40u
#define BP_ATTRS_V1_SIZE_bp_elu_attrs_t 32u
#define BP_ATTRS_V1_SIZE_bp_gelu_attrs_t 8u
#define BP_ATTRS_V1_SIZE_bp_hardtanh_attrs_t 24u
#define BP_ATTRS_V1_SIZE_bp_leaky_relu_attrs_t 16u
#define BP_ATTRS_V1_SIZE_bp_softplus_attrs_t 24u
#define BP_ATTRS_V1_SIZE_bp_binary_attrs_t 48u
#define BP_ATTRS_V1_SIZE_bp_reduce_attrs_t 56u
#define BP_ATTRS_V1_SIZE_bp_dim_attrs_t 16u
#define BP_ATTRS_V1_SIZE_bp_dims_attrs_t 72u
#define BP_ATTRS_V1_SIZE_bp_sort_attrs_t 16u
#define BP_ATTRS_V1_SIZE_bp_topk_attrs_t 24u
#define BP_ATTRS_V1_SIZE_bp_addmm_attrs_t 40u
#define BP_ATTRS_V1_SIZE_bp_cdist_attrs_t 16u
#define BP_ATTRS_V1_SIZE_bp_linear_attrs_t 8u
#define BP_ATTRS_V1_SIZE_bp_conv_attrs_t 120u
#define BP_ATTRS_V1_SIZE_bp_pool_attrs_t 128u
#define BP_ATTRS_V1_SIZE_bp_adaptive_pool_attrs_t 32u
#define BP_ATTRS_V1_SIZE_bp_col2im_attrs_t 88u
#define BP_ATTRS_V1_SIZE_bp_grid_sampler_attrs_t 16u
#define BP_ATTRS_V1_SIZE_bp_upsample_attrs_t 48u
#define BP_ATTRS_V1_SIZE_bp_softmax_attrs_t 16u
#define BP_ATTRS_V1_SIZE_bp_batch_norm_attrs_t 24u
#define BP_ATTRS_V1_SIZE_bp_group_norm_attrs_t 48u
#define BP_ATTRS_V1_SIZE_bp_layer_norm_attrs_t 88u
#define BP_ATTRS_V1_SIZE_bp_rms_norm_attrs_t 16u
#define BP_ATTRS_V1_SIZE_bp_embedding_attrs_t 32u
#define BP_ATTRS_V1_SIZE_bp_index_put_attrs_t 8u
#define BP_ATTRS_V1_SIZE_bp_scatter_attrs_t 32u
#define BP_ATTRS_V1_SIZE_bp_slice_attrs_t 32u
#define BP_ATTRS_V1_SIZE_bp_cast_attrs_t 8u
#define BP_ATTRS_V1_SIZE_bp_pad_attrs_t 160u
#define BP_ATTRS_V1_SIZE_bp_fill_attrs_t 104u
#define BP_ATTRS_V1_SIZE_bp_arange_attrs_t 64u
#define BP_ATTRS_V1_SIZE_bp_random_attrs_t 112u
#define BP_ATTRS_V1_SIZE_bp_fft_attrs_t 88u
#define BP_ATTRS_V1_SIZE_bp_sdpa_attrs_t 24u
#define BP_ATTRS_V1_SIZE_bp_rotary_attrs_t 8u
#define BP_ATTRS_V1_SIZE_bp_cross_entropy_attrs_t 24u
#define BP_ATTRS_V1_SIZE_bp_quantize_attrs_t 32u   /* ABI 1.2 */
#define BP_ATTRS_V1_SIZE_bp_scaled_mm_attrs_t 24u  /* ABI 1.2 */
#define BP_ATTRS_V1_SIZE_bp_sample_attrs_t 40u          /* ABI 1.2 */
#define BP_ATTRS_V1_SIZE_bp_penalty_attrs_t 32u         /* ABI 1.2 */
#define BP_ATTRS_V1_SIZE_bp_paged_attention_attrs_t 16u /* ABI 1.2 */
#define BP_ATTRS_V1_SIZE_bp_qkv_rotary_attrs_t 16u      /* ABI 1.2 */
#define BP_ATTRS_V1_SIZE_bp_moe_topk_attrs_t 16u        /* ABI 1.2 */
#define BP_ATTRS_V1_SIZE_bp_fused_quant_attrs_t 32u     /* ABI 1.3 */
#define BP_ATTRS_V1_SIZE_bp_softcap_attrs_t 16u         /* ABI 1.3 */
#define BP_ATTRS_V1_SIZE_bp_logits_mask_attrs_t 24u     /* ABI 1.3 */
#define BP_ATTRS_V1_SIZE_bp_moe_permute_attrs_t 16u     /* ABI 1.3 */
#define BP_ATTRS_V1_SIZE_bp_rejection_attrs_t 24u       /* ABI 1.3 */
#define BP_ATTRS_V1_SIZE_bp_moe_align_attrs_t 16u       /* ABI 1.4 */
#define BP_ATTRS_V1_SIZE_bp_grouped_topk_attrs_t 32u    /* ABI 1.4 */
#define BP_ATTRS_V1_SIZE_bp_group_quant_attrs_t 32u     /* ABI 1.4 */
#define BP_ATTRS_V1_SIZE_bp_gather_cache_attrs_t 16u    /* ABI 1.4 */
#define BP_ATTRS_V1_SIZE_bp_slot_mapping_attrs_t 16u    /* ABI 1.4 */
#define BP_ATTRS_V1_SIZE_bp_logprobs_attrs_t 16u        /* ABI 1.4 */
#define BP_ATTRS_V1_SIZE_bp_swiglu_oai_attrs_t 24u      /* ABI 1.4 */
#if BP_ABI_PINNED
#define BP__ATTRS_PIN(t) BP_STATIC_ASSERT(sizeof(t) == BP_ATTRS_V1_SIZE_##t, #t " layout");
BP_ATTRS_TYPES(BP__ATTRS_PIN)
#undef BP__ATTRS_PIN
#endif

#ifdef __cplusplus
}
#endif
#endif /* BACKPLANE_OPS_H_ */
