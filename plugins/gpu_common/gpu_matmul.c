/* backplane gpu_common: mm, bmm, addmm and linear on the tiled matmul
 * kernel (kernels/matmul.cl): batch, rows and cols of every operand by
 * strides, so transposed and broadcast operands need no copy. Floating
 * dtypes only (f32/f16/bf16 accumulate in f32, f64 in f64).
 */
#include <string.h>

#include "bp_gpu_ops.h"
#include "bp_kit.h"

int bp__gpu_matmul_implemented(uint32_t op) {
  return op == BP_OP_mm || op == BP_OP_bmm || op == BP_OP_addmm || op == BP_OP_linear;
}

/* Merges the leading dims [0, n) of `t` into one of stride *out_stride;
 * 0 when they are not evenly spaced (no single stride walks them). */
static int merge_lead(const bp_tensor_desc_t* t, uint32_t n, int64_t* out_size, int64_t* out_stride) {
  int64_t size = 1, stride = 0;
  for (uint32_t d = n; d-- > 0;) {
    if (t->sizes[d] == 1) continue;
    if (size > 1 && t->strides[d] != stride * size) return 0;
    if (size == 1) stride = t->strides[d];
    size *= t->sizes[d];
  }
  *out_size = size;
  *out_stride = stride;
  return 1;
}

int bp__gpu_matmul_supported(const bp_gpu_device_caps_t* caps, const bp_op_call_t* call, char* msg, size_t cap) {
  if (!bp__gpu_dtypes_ok(caps, call, msg, cap)) return BP_SUPPORT_DTYPE;
  for (uint32_t k = 0; k < call->num_inputs + call->num_outputs; k++) {
    const bp_tensor_desc_t* t = k < call->num_inputs ? call->inputs[k] : call->outputs[k - call->num_inputs];
    if (t->dtype != BP_DTYPE_INVALID && !bp_dtype_is_float(t->dtype)) {
      bp_plugin_format(msg, cap, 0, "%s: the matmul kernel is floating only", bp_dtype_name(t->dtype));
      return BP_SUPPORT_DTYPE;
    }
  }
  if (call->op_id == BP_OP_linear) {
    const bp_linear_attrs_t* a = call->attrs;
    int64_t s, st;
    if (a && a->activation != 0) {
      bp_plugin_format(msg, cap, 0, "activation epilogues are not implemented");
      return BP_SUPPORT_ATTRIBUTE;
    }
    const bp_tensor_desc_t* in = call->inputs[0];
    const bp_tensor_desc_t* out = call->outputs[0];
    const bp_tensor_desc_t* bias = call->num_inputs > 2 ? call->inputs[2] : NULL;
    if (in->rank < 1 || out->rank < 1 || !merge_lead(in, in->rank - 1, &s, &st) ||
        !merge_lead(out, out->rank - 1, &s, &st) ||
        (bias && bias->dtype != BP_DTYPE_INVALID && bias->rank > 1 && !merge_lead(bias, bias->rank - 1, &s, &st))) {
      bp_plugin_format(msg, cap, 0, "leading dims that no single stride walks");
      return BP_SUPPORT_LAYOUT;
    }
  }
  return 0;
}

bp_status_t bp__gpu_matmul_run(const bp_gpu_device_caps_t* caps, const bp_op_call_t* call,
                               bp_gpu_launch_fn launch, void* ctx) {
  (void)caps;
  uint32_t op = call->op_id;
  bp_gpu_launch_t l;
  memset(&l, 0, sizeof l);
  bp_gpu_mm_args_t* a = &l.args.mm;
  const bp_tensor_desc_t *A, *B, *C = call->outputs[0], *bias = NULL;
  a->alpha = 1.0;
  a->beta = 1.0;
  int64_t m = 0, n = 0, k = 0, batch = 1;
  if (op == BP_OP_linear) {
    /* out[..., n] = in[..., k] @ weight[n, k]^T + bias[n] */
    A = call->inputs[0];
    B = call->inputs[1];
    bias = call->num_inputs > 2 && call->inputs[2]->dtype != BP_DTYPE_INVALID ? call->inputs[2] : NULL;
    int64_t st_a = 0, st_c = 0, mc = 0;
    merge_lead(A, A->rank - 1, &m, &st_a);
    merge_lead(C, C->rank - 1, &mc, &st_c);
    k = A->sizes[A->rank - 1];
    n = B->sizes[0];
    a->stride_row[0] = st_a;
    a->stride_col[0] = A->strides[A->rank - 1];
    a->stride_row[1] = B->strides[1]; /* b[k, n] = weight[n, k] */
    a->stride_col[1] = B->strides[0];
    a->stride_row[2] = st_c;
    a->stride_col[2] = C->strides[C->rank - 1];
    if (bias) {
      /* bias broadcasts to [m, n]: a scalar, a row [n], or the output's
       * shape (leading dims merged like the output's). */
      int64_t bs = 1, bst = 0;
      if (bias->rank > 1) merge_lead(bias, bias->rank - 1, &bs, &bst);
      a->stride_row[3] = bs > 1 ? bst : 0;
      a->stride_col[3] = bias->rank && bias->sizes[bias->rank - 1] != 1 ? bias->strides[bias->rank - 1] : 0;
    }
  } else {
    uint32_t base = op == BP_OP_addmm ? 1 : 0;
    A = call->inputs[base];
    B = call->inputs[base + 1];
    int bt = op == BP_OP_bmm;
    if (bt) {
      batch = A->sizes[0];
      a->stride_batch[0] = A->strides[0];
      a->stride_batch[1] = B->strides[0];
      a->stride_batch[2] = C->strides[0];
    }
    m = A->sizes[bt];
    k = A->sizes[bt + 1];
    n = B->sizes[bt + 1];
    a->stride_row[0] = A->strides[bt];
    a->stride_col[0] = A->strides[bt + 1];
    a->stride_row[1] = B->strides[bt];
    a->stride_col[1] = B->strides[bt + 1];
    a->stride_row[2] = C->strides[bt];
    a->stride_col[2] = C->strides[bt + 1];
    if (op == BP_OP_addmm) {
      const bp_addmm_attrs_t* at = call->attrs;
      bias = call->inputs[0];
      /* self broadcasts to [m, n] (right-aligned). */
      a->stride_row[3] = bias->rank == 2 && bias->sizes[0] != 1 ? bias->strides[0] : 0;
      a->stride_col[3] = bias->rank >= 1 && bias->sizes[bias->rank - 1] != 1 ? bias->strides[bias->rank - 1] : 0;
      if (at) {
        a->beta = bp_kit_scalar_f64(&at->beta, 1.0);
        a->alpha = bp_kit_scalar_f64(&at->alpha, 1.0);
      }
    }
  }
  if (m == 0 || n == 0 || batch == 0) return BP_OK;
  a->m = m;
  a->n = n;
  a->k = k;
  a->batch = batch;
  const bp_tensor_desc_t* ops[4] = {A, B, C, bias};
  for (uint32_t i = 0; i < 4; i++) {
    l.operands[i] = ops[i];
    a->dtypes[i] = ops[i] ? ops[i]->dtype : 0;
    a->byte_offset[i] = ops[i] ? (int64_t)ops[i]->byte_offset : 0;
  }
  a->has_bias = bias != NULL;
  int f64 = A->dtype == BP_DTYPE_F64 || B->dtype == BP_DTYPE_F64 || C->dtype == BP_DTYPE_F64;
  l.program = f64 ? BP_GPU_PROGRAM_matmul_f64 : BP_GPU_PROGRAM_matmul_f32;
  l.num_operands = 4;
  l.global[0] = (uint64_t)((n + BP_GPU_MM_TILE - 1) / BP_GPU_MM_TILE) * BP_GPU_MM_TILE;
  l.global[1] = (uint64_t)((m + BP_GPU_MM_TILE - 1) / BP_GPU_MM_TILE) * BP_GPU_MM_TILE;
  l.global[2] = (uint64_t)batch;
  l.local[0] = l.local[1] = BP_GPU_MM_TILE;
  l.local[2] = 1;
  l.args_size = sizeof *a;
  return launch(ctx, &l);
}
