/* backplane gpu_common: reductions, softmax and norms on the row kernel.
 *
 * Each op maps its input's dims to rows (the kept dims: one output
 * position each) and cols (the reduced or normalized dims), with every
 * operand's strides over both (kernels/rows.cl, bp_gpu_row_args_t). One
 * work-group per row. Floating compute accumulates in double where the
 * device has f64 (the kernel's BP_ACC_F), integer compute in int64.
 */
#include <float.h>
#include <string.h>

#include "bp_gpu_ops.h"
#include "bp_kit.h"

int bp__gpu_rows_implemented(uint32_t op) {
  switch (op) {
    case BP_OP_sum: case BP_OP_mean: case BP_OP_prod: case BP_OP_amax: case BP_OP_amin: case BP_OP_any:
    case BP_OP_argmax: case BP_OP_argmin: case BP_OP_max_dim: case BP_OP_min_dim: case BP_OP_var:
    case BP_OP_logsumexp: case BP_OP_softmax: case BP_OP_log_softmax: case BP_OP_layer_norm:
    case BP_OP_rms_norm: case BP_OP_add_rms_norm: case BP_OP_add_layer_norm: case BP_OP_cumsum:
      return 1;
    default:
      return 0;
  }
}

static int is_reduction(uint32_t op) {
  switch (op) {
    case BP_OP_sum: case BP_OP_mean: case BP_OP_prod: case BP_OP_amax: case BP_OP_amin: case BP_OP_any:
    case BP_OP_argmax: case BP_OP_argmin: case BP_OP_max_dim: case BP_OP_min_dim: case BP_OP_var:
    case BP_OP_logsumexp:
      return 1;
    default:
      return 0;
  }
}

/* Ops whose math is floating whatever the input. */
static int float_math(uint32_t op) {
  return op == BP_OP_mean || op == BP_OP_var || op == BP_OP_logsumexp || (!is_reduction(op) && op != BP_OP_cumsum);
}

/* The set of reduced (col) dims of the input, as a bit mask; -1 when a
 * dim is out of range. */
static int64_t col_mask(const bp_op_call_t* call) {
  uint32_t op = call->op_id, rank = call->inputs[0]->rank;
  int64_t wrap = rank ? (int64_t)rank : 1;
  uint32_t mask = 0;
  if (is_reduction(op)) {
    const bp_reduce_attrs_t* a = call->attrs;
    if (!a || (a->flags & BP_REDUCE_ALL_DIMS) || a->num_dims == 0) return rank ? (int64_t)((1u << rank) - 1u) : 0;
    for (int32_t i = 0; i < a->num_dims && i < BP_MAX_RANK; i++) {
      int64_t d = a->dims[i] < 0 ? a->dims[i] + wrap : a->dims[i];
      if (d < 0 || d >= wrap) return -1;
      if (rank) mask |= 1u << d;
    }
    return mask;
  }
  if (op == BP_OP_cumsum) {
    int64_t d = ((const bp_dim_attrs_t*)call->attrs)->dim;
    d = d < 0 ? d + wrap : d;
    if (d < 0 || d >= wrap) return -1;
    return rank ? (int64_t)(1u << d) : 0;
  }
  if (op == BP_OP_softmax || op == BP_OP_log_softmax) {
    int64_t d = ((const bp_softmax_attrs_t*)call->attrs)->dim;
    d = d < 0 ? d + wrap : d;
    if (d < 0 || d >= wrap) return -1;
    return rank ? (int64_t)(1u << d) : 0;
  }
  uint32_t nr = 1;
  if (op == BP_OP_layer_norm || op == BP_OP_add_layer_norm)
    nr = ((const bp_layer_norm_attrs_t*)call->attrs)->normalized_rank;
  else if (call->attrs)
    nr = ((const bp_rms_norm_attrs_t*)call->attrs)->normalized_rank;
  if (nr > rank) return -1;
  for (uint32_t d = rank - nr; d < rank; d++) mask |= 1u << d;
  return mask;
}

int bp__gpu_rows_supported(const bp_gpu_device_caps_t* caps, const bp_op_call_t* call, char* msg, size_t cap) {
  if (!bp__gpu_dtypes_ok(caps, call, msg, cap)) return BP_SUPPORT_DTYPE;
  const bp_tensor_desc_t* in = call->inputs[0];
  uint32_t op = call->op_id;
  if (!bp_dtype_is_float(in->dtype) && !bp_dtype_is_valid(in->dtype)) return BP_SUPPORT_DTYPE;
  if (float_math(op) && !bp_dtype_is_float(in->dtype) && !bp_dtype_is_float(call->outputs[0]->dtype)) {
    bp_plugin_format(msg, cap, 0, "needs a floating dtype, got %s", bp_dtype_name(in->dtype));
    return BP_SUPPORT_DTYPE;
  }
  if (!float_math(op) && op != BP_OP_any && op != BP_OP_argmax && op != BP_OP_argmin &&
      call->outputs[0]->dtype == BP_DTYPE_BOOL && in->dtype != BP_DTYPE_BOOL) {
    bp_plugin_format(msg, cap, 0, "bool output of %s input", bp_dtype_name(in->dtype));
    return BP_SUPPORT_DTYPE;
  }
  if (col_mask(call) < 0) {
    bp_plugin_format(msg, cap, 0, "dim out of range");
    return BP_SUPPORT_ATTRIBUTE;
  }
  if (call->num_inputs > 4 || call->num_outputs > 3) return BP_SUPPORT_ATTRIBUTE;
  if (bp_desc_numel(in) > ((int64_t)1 << 40)) {
    bp_plugin_format(msg, cap, 0, "more than 2^40 elements");
    return BP_SUPPORT_SIZE;
  }
  return 0;
}

/* Strides of operand `t` over the row and col dims: `same_rank` operands
 * index with the input's dims; reduced outputs without keepdim with the
 * kept dims in order (cols 0); trailing-shape operands (weight, bias) with
 * the cols in order (rows 0). */
enum { SHAPE_INPUT, SHAPE_REDUCED, SHAPE_TRAILING };
static void bind(bp_gpu_row_args_t* a, uint32_t k, const bp_tensor_desc_t* t, int shape, const uint32_t* rows,
                 uint32_t nrow, const uint32_t* cols, uint32_t ncol) {
  a->dtypes[k] = t ? t->dtype : 0;
  if (!t || t->dtype == BP_DTYPE_INVALID) return;
  a->byte_offset[k] = (int64_t)t->byte_offset;
  for (uint32_t j = 0; j < nrow; j++) {
    if (shape == SHAPE_INPUT) a->row_strides[k][j] = rows[j] < t->rank ? t->strides[rows[j]] : 0;
    else if (shape == SHAPE_REDUCED) a->row_strides[k][j] = j < t->rank ? t->strides[j] : 0;
  }
  for (uint32_t j = 0; j < ncol; j++) {
    if (shape == SHAPE_INPUT) a->col_strides[k][j] = cols[j] < t->rank ? t->strides[cols[j]] : 0;
    else if (shape == SHAPE_TRAILING) {
      /* weight of the normalized shape: its last ncol dims */
      int64_t td = (int64_t)t->rank - (int64_t)ncol + (int64_t)j;
      a->col_strides[k][j] = td >= 0 ? t->strides[td] : 0;
    }
  }
}

static double machine_eps(uint32_t dt) {
  switch (dt) {
    case BP_DTYPE_F16: return 0.0009765625;
    case BP_DTYPE_BF16: return 0.0078125;
    case BP_DTYPE_F64: return DBL_EPSILON;
    default: return FLT_EPSILON;
  }
}

bp_status_t bp__gpu_rows_run(const bp_gpu_device_caps_t* caps, const bp_op_call_t* call,
                             bp_gpu_launch_fn launch, void* ctx) {
  const bp_tensor_desc_t* in = call->inputs[0];
  uint32_t op = call->op_id;
  int64_t mask = col_mask(call);
  if (mask < 0) return BP_KIT_ERROR(BP_INVALID_ARGUMENT, "%s: dim out of range", bp_kit_op_name(op));
  bp_gpu_launch_t l;
  memset(&l, 0, sizeof l);
  bp_gpu_row_args_t* a = &l.args.row;
  uint32_t rows[BP_MAX_RANK], cols[BP_MAX_RANK], nrow = 0, ncol = 0;
  int64_t nrows = 1, ncols = 1;
  for (uint32_t d = 0; d < in->rank; d++) {
    if (mask & (1 << d)) {
      cols[ncol] = d;
      a->col_sizes[ncol++] = in->sizes[d];
      ncols *= in->sizes[d];
    } else {
      rows[nrow] = d;
      a->row_sizes[nrow++] = in->sizes[d];
      nrows *= in->sizes[d];
    }
  }
  if (nrows == 0) return BP_OK;
  if (ncols == 0 && !is_reduction(op)) return BP_OK; /* nothing to write (cumsum too) */
  /* Empty reductions: sum 0, prod 1, any false, mean and var NaN, logsumexp
   * -inf (the kernel's arithmetic gives each); the rest have no value. */
  if (ncols == 0 && op != BP_OP_sum && op != BP_OP_prod && op != BP_OP_any && op != BP_OP_mean && op != BP_OP_var &&
      op != BP_OP_logsumexp)
    return BP_KIT_ERROR(BP_INVALID_ARGUMENT, "%s of an empty dim", bp_kit_op_name(op));
  a->nrows = nrows;
  a->ncols = ncols;
  a->row_rank = nrow;
  a->col_rank = ncol;
  a->op = op;
  int keep = 0;
  if (is_reduction(op) && call->attrs) keep = (((const bp_reduce_attrs_t*)call->attrs)->flags & BP_REDUCE_KEEPDIM) != 0;
  /* A reduced output of the input's rank indexes with the input's dims. */
  if (is_reduction(op) && call->outputs[0]->rank == in->rank && in->rank > 0) keep = 1;
  bind(a, 0, in, SHAPE_INPUT, rows, nrow, cols, ncol);
  uint32_t nops = 1;
  switch (op) {
    case BP_OP_softmax: case BP_OP_log_softmax: case BP_OP_cumsum:
      bind(a, 1, call->outputs[0], SHAPE_INPUT, rows, nrow, cols, ncol);
      nops = 2;
      break;
    case BP_OP_layer_norm: {
      const bp_layer_norm_attrs_t* at = call->attrs;
      bind(a, 1, call->num_inputs > 1 ? call->inputs[1] : NULL, SHAPE_TRAILING, rows, nrow, cols, ncol);
      bind(a, 2, call->num_inputs > 2 ? call->inputs[2] : NULL, SHAPE_TRAILING, rows, nrow, cols, ncol);
      bind(a, 3, call->outputs[0], SHAPE_INPUT, rows, nrow, cols, ncol);
      for (uint32_t k = 1; k < 3; k++) {
        const bp_tensor_desc_t* t = call->num_outputs > k ? call->outputs[k] : NULL;
        bind(a, 3 + k, t, t && t->rank == in->rank ? SHAPE_INPUT : SHAPE_REDUCED, rows, nrow, cols, 0);
      }
      a->p0 = at->eps;
      nops = 6;
      break;
    }
    case BP_OP_add_layer_norm: {
      const bp_layer_norm_attrs_t* at = call->attrs;
      bind(a, 1, call->inputs[1], SHAPE_INPUT, rows, nrow, cols, ncol);
      bind(a, 2, call->num_inputs > 2 ? call->inputs[2] : NULL, SHAPE_TRAILING, rows, nrow, cols, ncol);
      bind(a, 3, call->num_inputs > 3 ? call->inputs[3] : NULL, SHAPE_TRAILING, rows, nrow, cols, ncol);
      bind(a, 4, call->outputs[0], SHAPE_INPUT, rows, nrow, cols, ncol);
      bind(a, 5, call->outputs[1], SHAPE_INPUT, rows, nrow, cols, ncol);
      a->p0 = at->eps;
      nops = 6;
      break;
    }
    case BP_OP_rms_norm: case BP_OP_add_rms_norm: {
      const bp_rms_norm_attrs_t* at = call->attrs;
      uint32_t add = op == BP_OP_add_rms_norm;
      if (add) bind(a, 1, call->inputs[1], SHAPE_INPUT, rows, nrow, cols, ncol);
      bind(a, 1 + add, call->num_inputs > 1 + add ? call->inputs[1 + add] : NULL, SHAPE_TRAILING, rows, nrow, cols,
           ncol);
      bind(a, 2 + add, call->outputs[0], SHAPE_INPUT, rows, nrow, cols, ncol);
      if (add) bind(a, 4, call->outputs[1], SHAPE_INPUT, rows, nrow, cols, ncol);
      a->p0 = at && at->eps > 0 ? at->eps : machine_eps(in->dtype);
      nops = 3 + 2 * add;
      break;
    }
    default: /* reductions: values[, indices] */
      for (uint32_t k = 0; k < call->num_outputs && k < 2; k++)
        bind(a, 1 + k, call->outputs[k], keep ? SHAPE_INPUT : SHAPE_REDUCED, rows, nrow, cols, 0);
      nops = 1 + (call->num_outputs < 2 ? call->num_outputs : 2);
      if (op == BP_OP_var) a->p0 = ((const bp_reduce_attrs_t*)call->attrs)->correction;
      break;
  }
  a->nops = nops;
  int fl = bp_dtype_is_float(in->dtype) || bp_dtype_is_float(call->outputs[0]->dtype) || float_math(op);
  if ((op == BP_OP_argmax || op == BP_OP_argmin) && !bp_dtype_is_float(in->dtype)) fl = 0;
  /* cumsum converts its input to the output dtype first: the output decides. */
  if (op == BP_OP_cumsum) fl = bp_dtype_is_float(call->outputs[0]->dtype);
  if (op == BP_OP_softmax || op == BP_OP_log_softmax || op == BP_OP_logsumexp) l.program = BP_GPU_PROGRAM_rows_softmax;
  else if (!is_reduction(op) && op != BP_OP_cumsum) l.program = BP_GPU_PROGRAM_rows_norm;
  else l.program = fl ? BP_GPU_PROGRAM_rows_reduce_f : BP_GPU_PROGRAM_rows_reduce_i;
  l.num_operands = BP_GPU_ROW_MAX_OPERANDS;
  l.operands[0] = in;
  /* Operand k's buffer: inputs then outputs in the roles above. */
  const bp_tensor_desc_t* roles[BP_GPU_ROW_MAX_OPERANDS] = {0};
  switch (op) {
    case BP_OP_layer_norm:
      roles[1] = call->num_inputs > 1 ? call->inputs[1] : NULL;
      roles[2] = call->num_inputs > 2 ? call->inputs[2] : NULL;
      roles[3] = call->outputs[0];
      roles[4] = call->num_outputs > 1 ? call->outputs[1] : NULL;
      roles[5] = call->num_outputs > 2 ? call->outputs[2] : NULL;
      break;
    case BP_OP_add_layer_norm:
      for (uint32_t k = 1; k < 4; k++) roles[k] = call->num_inputs > k ? call->inputs[k] : NULL;
      roles[4] = call->outputs[0];
      roles[5] = call->outputs[1];
      break;
    case BP_OP_rms_norm: case BP_OP_add_rms_norm: {
      uint32_t add = op == BP_OP_add_rms_norm;
      for (uint32_t k = 1; k < 2 + add; k++) roles[k] = call->num_inputs > k ? call->inputs[k] : NULL;
      roles[2 + add] = call->outputs[0];
      if (add) roles[4] = call->outputs[1];
      break;
    }
    default:
      for (uint32_t k = 0; k < call->num_outputs && k < 2; k++) roles[1 + k] = call->outputs[k];
      break;
  }
  for (uint32_t k = 1; k < BP_GPU_ROW_MAX_OPERANDS; k++)
    l.operands[k] = roles[k] && roles[k]->dtype != BP_DTYPE_INVALID ? roles[k] : NULL;
  /* One group per row (the kernel has no loop over rows). */
  l.global[0] = (uint64_t)nrows * BP_GPU_ROW_WG;
  l.global[1] = l.global[2] = 1;
  l.local[0] = BP_GPU_ROW_WG;
  l.local[1] = l.local[2] = 1;
  l.args_size = sizeof *a;
  return launch(ctx, &l);
}
