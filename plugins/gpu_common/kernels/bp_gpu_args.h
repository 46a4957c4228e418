/* backplane GPU kernels: the argument blocks of every kernel family.
 *
 * Shared by the kernels and by the host code that packs them
 * (plugins/gpu_common), so both sides agree on the layout: only the
 * fixed-width types of bp_gpu_portability.h, 8-byte fields first, no
 * pointers. Each kernel takes its operands as global byte pointers
 * followed by one pointer to its argument block in global memory:
 *
 *   kernel void bp_<family>_<variant>(global uchar* op0, ..., global uchar* opN-1,
 *                                     global const bp_gpu_<family>_args_t* args)
 *
 * Byte offsets of the operands are in the block, so a plugin binds whole
 * buffers (cl_mem, CUdeviceptr, hipDeviceptr_t). Unused operand pointers
 * are bound to any valid buffer (the first operand's).
 */
#ifndef BP_GPU_ARGS_H_
#define BP_GPU_ARGS_H_

#include "bp_gpu_portability.h"

#define BP_GPU_MAX_RANK 8

/* ---- elementwise programs (ew.cl) -------------------------------------- */
#define BP_GPU_EW_MAX_OPERANDS 8 /* inputs + outputs */
#define BP_GPU_EW_MAX_INSTR 32
#define BP_GPU_EW_MAX_CONST 16
#define BP_GPU_EW_MAX_REGS 16

/* Opcodes beyond enum bp_ew_opcode (0x1000..0x1003) and op ids. */
#define BP_GPU_EW_INDEX 0x2000u    /* r[dst] = linear element index */
#define BP_GPU_EW_ELU 0x2001u      /* x > 0 ? x*r[b] : expm1(x*r[c]) * const[aux] * r[b] */
#define BP_GPU_EW_SOFTPLUS 0x2002u /* beta r[b], threshold r[c] */
#define BP_GPU_EW_LEAKY 0x2003u    /* slope r[b] */
#define BP_GPU_EW_BNOT 0x2004u     /* logical not of a bool register */
#define BP_GPU_EW_LERP 0x2005u     /* x + z*(y-x), computed from the nearer end */

typedef struct bp_gpu_ew_args {
  bp_i64 numel;                  /* elements of the output shape */
  bp_i64 sizes[BP_GPU_MAX_RANK]; /* output shape, `rank` dims */
  bp_i64 byte_offset[BP_GPU_EW_MAX_OPERANDS];
  /* In elements, per operand (inputs then outputs); broadcast dims 0. */
  bp_i64 strides[BP_GPU_EW_MAX_OPERANDS][BP_GPU_MAX_RANK];
  /* Constants as raw 64 bits: double for floating compute dtypes, int64
   * for integer ones. */
  bp_i64 consts[BP_GPU_EW_MAX_CONST];
  bp_u32 dtypes[BP_GPU_EW_MAX_OPERANDS];
  bp_u32 rank, nin, nout, ninstr;
  bp_u32 contiguous; /* 1: every operand dense, element i at index i */
  bp_u32 cdt;        /* compute dtype (enum bp_dtype) */
  /* Instruction k: opcode, dst | a << 8 | b << 16 | c << 24, aux, 0. */
  bp_u32 instrs[BP_GPU_EW_MAX_INSTR][4];
} bp_gpu_ew_args_t;

/* ---- row kernels: reductions, softmax, norms (rows.cl) ------------------ */
/* The index space is rows x cols: a row is one output position (the kept
 * dims), its cols the reduced or normalized dims. Each operand has strides
 * over both; outputs of reductions have col strides 0. */
#define BP_GPU_ROW_MAX_OPERANDS 6
#define BP_GPU_ROW_WG 64 /* work-group size: one group per row */

/* Row ops beyond op ids. */
#define BP_GPU_ROW_ALL 0x3000u /* all(): 1 when every element is nonzero */

typedef struct bp_gpu_row_args {
  bp_i64 nrows, ncols;
  bp_i64 row_sizes[BP_GPU_MAX_RANK];
  bp_i64 col_sizes[BP_GPU_MAX_RANK];
  bp_i64 byte_offset[BP_GPU_ROW_MAX_OPERANDS];
  bp_i64 row_strides[BP_GPU_ROW_MAX_OPERANDS][BP_GPU_MAX_RANK];
  bp_i64 col_strides[BP_GPU_ROW_MAX_OPERANDS][BP_GPU_MAX_RANK];
  double p0; /* eps (norms), correction (var) */
  double p1; /* 1: mean divides the sum by ncols (mean); std: take sqrt */
  bp_u32 dtypes[BP_GPU_ROW_MAX_OPERANDS];
  bp_u32 row_rank, col_rank;
  bp_u32 op; /* op id (sum ... logsumexp, softmax, layer_norm ...) */
  bp_u32 nops;
  /* Operand roles, by op: reductions in, out[, indices]; softmax in, out;
   * layer_norm in, weight, bias, out, mean, rstd; rms_norm in, weight, out;
   * add_rms_norm in, residual, weight, out, residual_out; add_layer_norm
   * in, residual, weight, bias, out, residual_out. Absent optional operands
   * have dtype 0. */
  bp_u32 flags;
  bp_u32 reserved0;
} bp_gpu_row_args_t;

/* ---- matmul (matmul.cl) ------------------------------------------------ */
#define BP_GPU_MM_TILE 16

typedef struct bp_gpu_mm_args {
  bp_i64 m, n, k, batch;
  bp_i64 byte_offset[4];          /* a, b, c (out), bias */
  bp_i64 stride_batch[4];         /* elements */
  bp_i64 stride_row[4];           /* a: m, b: k, c: m, bias: m */
  bp_i64 stride_col[4];           /* a: k, b: n, c: n, bias: n */
  double alpha, beta;             /* out = beta * bias + alpha * (a @ b) */
  bp_u32 dtypes[4];
  bp_u32 has_bias;
  bp_u32 reserved0;
} bp_gpu_mm_args_t;

/* ---- gathers (index.cl) -------------------------------------------------- */
/* gather, index_select and embedding alike: output element p reads
 * src[sum_d p_d * strides[0][d] + index[p] * src_dim_stride], where
 * index[p] = index operand at sum_d p_d * strides[1][d] (the plugin zeroes
 * the src stride of the indexed dim and the index strides of dims the
 * index does not vary over). Elements move as raw bits. */
typedef struct bp_gpu_index_args {
  bp_i64 numel;                    /* output elements */
  bp_i64 sizes[BP_GPU_MAX_RANK];   /* output shape */
  bp_i64 byte_offset[3];           /* src, index, out */
  bp_i64 strides[3][BP_GPU_MAX_RANK]; /* per operand over the output's dims */
  bp_i64 src_dim_stride;           /* stride of the indexed dim in src */
  bp_i64 src_dim_size;             /* its size: negative indices count from the end;
                                      outside [-size, size) the element is 0 */
  bp_u32 dtypes[3];
  bp_u32 rank;
  bp_u32 reserved0;
} bp_gpu_index_args_t;

/* ---- sorts (sort.cl) ------------------------------------------------------ */
/* sort and topk alike: a row is every position of the other dims, its cols
 * the sorted dim. Each element's rank in its row (how many elements sort
 * before it; equal elements keep their index order, NaN sorts above +inf)
 * is its output position; ranks >= k write nothing. Operands: in, values,
 * indices (int64). Row strides per operand over the kept dims. */
typedef struct bp_gpu_sort_args {
  bp_i64 nrows, ncols, k;
  bp_i64 row_sizes[BP_GPU_MAX_RANK];
  bp_i64 row_strides[3][BP_GPU_MAX_RANK];
  bp_i64 col_stride[3];
  bp_i64 byte_offset[3];
  bp_u32 dtypes[3];
  bp_u32 row_rank;
  bp_u32 descending; /* 1: largest first */
  /* moe_topk_softmax: 1 the values are the softmax probabilities of the
   * row (in double), 2 also renormalized over the top k; 0 sort/topk */
  bp_u32 moe;
} bp_gpu_sort_args_t;

/* ---- scatters (scatter.cl) ----------------------------------------------- */
/* scatter, scatter_add, scatter_reduce into `out` (already a copy of self).
 * A line is one position of the index's dims other than `dim`; index
 * elements of different lines have different targets, so one work-item
 * owns a line and combines its elements in index order, accumulating each
 * target in double / int64 and storing it once (the CPU plugin's order and
 * rounding). Operands: index (int64 or int32), src (dtype 0: the value form), out;
 * strides over the index's dims. */
/* enum bp_scatter_reduce's values (ops.h; gpu_scatter.c checks them). */
#define BP_GPU_SC_NONE 0u
#define BP_GPU_SC_SUM 1u
#define BP_GPU_SC_PROD 2u
#define BP_GPU_SC_MEAN 3u
#define BP_GPU_SC_AMAX 4u
#define BP_GPU_SC_AMIN 5u

typedef struct bp_gpu_scatter_args {
  bp_i64 lines;       /* index elements / index.size(dim) */
  bp_i64 along;       /* index.size(dim) */
  bp_i64 target_size; /* out.size(dim): indices outside [0, it) are skipped */
  bp_i64 sizes[BP_GPU_MAX_RANK]; /* index shape */
  bp_i64 strides[3][BP_GPU_MAX_RANK];
  bp_i64 byte_offset[3];
  double value_f; /* value form, floating out */
  bp_i64 value_i; /* value form, integer out (wrapped to its dtype) */
  bp_u32 dtypes[3];
  bp_u32 rank, dim;
  bp_u32 reduce;       /* enum bp_scatter_reduce */
  bp_u32 include_self; /* 0: targets start from the reduction's identity */
  bp_u32 reserved0;
} bp_gpu_scatter_args_t;

/* ---- pooling (pool.cl) ---------------------------------------------------- */
/* avg_pool, max_pool_with_indices, adaptive_avg_pool, upsample_nearest2d
 * and upsample_bilinear2d over 1-3 spatial dims seen as [D, H, W] (missing dims of size 1, stride 0). One work-item
 * per output element: `planes` (the leading dims) x out[0] x out[1] x
 * out[2]. Operands: in, out, indices (max pooling; flat index in the input
 * plane, (d * H + h) * W + w). The 2-d backward ops iterate over
 * grad_input instead: operands grad_output, grad_input, indices (max);
 * in/out are still the forward's input and output spatial sizes. */
typedef struct bp_gpu_pool_args {
  bp_i64 total; /* elements iterated (output, or grad_input for backward ops) */
  bp_i64 plane_sizes[BP_GPU_MAX_RANK];
  bp_i64 plane_strides[3][BP_GPU_MAX_RANK];
  bp_i64 sp_strides[3][3];
  bp_i64 in[3], out[3], k[3], st[3], pad[3], dil[3];
  bp_i64 byte_offset[3];
  bp_i64 divisor;  /* avg: divisor_override, 0 = none */
  double scale[3]; /* upsampling: source index per output index, in the compute type */
  bp_u32 dtypes[3];
  bp_u32 plane_rank;
  bp_u32 op; /* op id */
  bp_u32 count_include_pad;
  bp_u32 align_corners;
  bp_u32 reserved0;
} bp_gpu_pool_args_t;

/* ---- random ops (random.cl) ----------------------------------------------- */
/* rand, randn and dropout: element i (row-major index of the output) draws
 * words of the Philox stream of (seed, offset) as the CPU plugin does
 * (plugins/kit/bp_philox.h, docs/semantics.md "Random"). Operands: out,
 * mask (dropout, bool), input (dropout). */
typedef struct bp_gpu_random_args {
  bp_i64 numel;
  bp_i64 sizes[BP_GPU_MAX_RANK]; /* output shape */
  bp_i64 strides[3][BP_GPU_MAX_RANK];
  bp_i64 byte_offset[3];
  bp_u64 seed, offset;
  double p;     /* dropout: elements whose uniform is below p are dropped */
  double scale; /* dropout: 1 / (1 - p), 0 when p is 1 */
  bp_u32 dtypes[3];
  bp_u32 rank;
  bp_u32 op;   /* op id */
  bp_u32 bits; /* rand: random bits per value (significand + 1) */
} bp_gpu_random_args_t;

/* ---- repetition_penalty (penalty.cl) ---------------------------------------- */
/* One work-item per logit: rows are the leading dims of logits and tokens
 * (strides per operand: logits, tokens, out), V the vocabulary, L the
 * tokens per row. */
typedef struct bp_gpu_penalty_args {
  bp_i64 nrows, V, L;
  bp_i64 row_sizes[BP_GPU_MAX_RANK];
  bp_i64 row_strides[3][BP_GPU_MAX_RANK];
  bp_i64 col_stride[3];
  bp_i64 byte_offset[3];
  double repetition, presence, frequency;
  bp_u32 dtypes[3];
  bp_u32 row_rank;
} bp_gpu_penalty_args_t;

/* ---- scaled_dot_product_attention (attention.cl) ------------------------ */
/* One work-item per (batch, query row, chunk of BP_GPU_SDPA_COLS value
 * columns). Operands: query, key, value, mask, out (the mask slot unused
 * when mask_kind is 0). Batch dims are the output's (all but the last
 * two), with each operand's strides over them (0: broadcast); rows and
 * columns: q [L, E], k [S, E], v [S, Ev], mask [L, S], out [L, Ev]. */
#define BP_GPU_SDPA_COLS 32
typedef struct bp_gpu_sdpa_args {
  bp_i64 L, S, E, Ev;
  bp_i64 nbatch; /* product of batch_sizes */
  bp_i64 batch_sizes[BP_GPU_MAX_RANK];
  bp_i64 batch_strides[5][BP_GPU_MAX_RANK];
  bp_i64 row_stride[5], col_stride[5];
  bp_i64 byte_offset[5];
  bp_i64 gqa_group[2]; /* query heads per key head, per value head */
  double scale;
  bp_u32 dtypes[5];
  bp_u32 batch_rank;
  bp_u32 causal;    /* key j > query i dropped */
  bp_u32 mask_kind; /* 0 none, 1 bool (false drops), 2 added to the scores */
  bp_u32 gqa_dim;   /* the heads' batch dim (key/value coordinates / gqa_group), or BP_GPU_MAX_RANK */
  bp_u32 reserved0;
} bp_gpu_sdpa_args_t;

#endif /* BP_GPU_ARGS_H_ */
