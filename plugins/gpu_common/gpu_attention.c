/* backplane gpu_common: scaled_dot_product_attention on the attention
 * kernel (kernels/attention.cl). The output's batch dims (all but the last
 * two) are the index space; query, key, value and mask get strides over
 * them right-aligned (size 1 or missing: stride 0), and with enable_gqa
 * the heads dim (-3) of key and value is addressed by the query head
 * divided by the group size (docs/semantics.md, op 135). Shapes were
 * checked by the core; support answers dtypes and ranks.
 */
#include <math.h>
#include <string.h>

#include "bp_gpu_ops.h"
#include "bp_kit.h"

int bp__gpu_attention_implemented(uint32_t op) { return op == BP_OP_scaled_dot_product_attention; }

static const bp_tensor_desc_t* mask_of(const bp_op_call_t* call) {
  return call->num_inputs > 3 && call->inputs[3] && call->inputs[3]->dtype != BP_DTYPE_INVALID ? call->inputs[3]
                                                                                                : NULL;
}

int bp__gpu_attention_supported(const bp_gpu_device_caps_t* caps, const bp_op_call_t* call, char* msg,
                                size_t cap) {
  if (!bp__gpu_dtypes_ok(caps, call, msg, cap)) return BP_SUPPORT_DTYPE;
  const bp_tensor_desc_t *q = call->inputs[0], *k = call->inputs[1], *v = call->inputs[2], *o = call->outputs[0];
  const bp_tensor_desc_t* m = mask_of(call);
  if (!bp_dtype_is_float(q->dtype) || k->dtype != q->dtype || v->dtype != q->dtype || o->dtype != q->dtype ||
      (m && m->dtype != BP_DTYPE_BOOL && m->dtype != q->dtype)) {
    bp_plugin_format(msg, cap, 0, "query, key, value and out of one floating dtype; a bool or like mask");
    return BP_SUPPORT_DTYPE;
  }
  if (!call->attrs || q->rank < 2 || k->rank < 2 || v->rank < 2 || o->rank < 2) {
    bp_plugin_format(msg, cap, 0, "operands of rank >= 2 and attributes");
    return BP_SUPPORT_RANK;
  }
  return 0;
}

/* Strides of `t` over the output's `nb` batch dims (its own leading
 * rank - `inner` dims, right-aligned; size 1 or missing: 0). */
static void batch_strides(const bp_tensor_desc_t* t, uint32_t inner, uint32_t nb, bp_i64* out) {
  uint32_t tb = t->rank > inner ? t->rank - inner : 0;
  for (uint32_t d = 0; d < nb; d++) {
    out[d] = 0;
    if (d + tb < nb) continue;
    uint32_t td = d + tb - nb;
    out[d] = t->sizes[td] == 1 ? 0 : t->strides[td];
  }
}

bp_status_t bp__gpu_attention_run(const bp_gpu_device_caps_t* caps, const bp_op_call_t* call,
                                  bp_gpu_launch_fn launch, void* ctx) {
  const bp_sdpa_attrs_t* at = call->attrs;
  const bp_tensor_desc_t* m = mask_of(call);
  const bp_tensor_desc_t* ops[5] = {call->inputs[0], call->inputs[1], call->inputs[2], m, call->outputs[0]};
  const bp_tensor_desc_t *q = ops[0], *k = ops[1], *v = ops[2], *o = ops[4];
  bp_gpu_launch_t l;
  memset(&l, 0, sizeof l);
  bp_gpu_sdpa_args_t* a = &l.args.sdpa;
  a->L = q->sizes[q->rank - 2];
  a->E = q->sizes[q->rank - 1];
  a->S = k->sizes[k->rank - 2];
  a->Ev = v->sizes[v->rank - 1];
  a->batch_rank = o->rank - 2;
  a->nbatch = 1;
  for (uint32_t d = 0; d < a->batch_rank; d++) {
    a->batch_sizes[d] = o->sizes[d];
    a->nbatch *= o->sizes[d];
  }
  a->gqa_dim = BP_GPU_MAX_RANK;
  a->gqa_group[0] = a->gqa_group[1] = 1;
  if (at->enable_gqa && a->batch_rank > 0) {
    int64_t hq = o->sizes[o->rank - 3];
    a->gqa_dim = a->batch_rank - 1;
    a->gqa_group[0] = k->rank >= 3 && k->sizes[k->rank - 3] > 0 ? hq / k->sizes[k->rank - 3] : hq;
    a->gqa_group[1] = v->rank >= 3 && v->sizes[v->rank - 3] > 0 ? hq / v->sizes[v->rank - 3] : hq;
    if (a->gqa_group[0] < 1) a->gqa_group[0] = 1;
    if (a->gqa_group[1] < 1) a->gqa_group[1] = 1;
  }
  for (uint32_t t = 0; t < 5; t++) {
    const bp_tensor_desc_t* x = ops[t];
    l.operands[t] = x;
    if (!x) continue;
    batch_strides(x, 2, a->batch_rank, a->batch_strides[t]);
    /* Rows and columns; the mask's may be missing or of size 1. */
    a->row_stride[t] = x->rank >= 2 && x->sizes[x->rank - 2] != 1 ? x->strides[x->rank - 2] : 0;
    a->col_stride[t] = x->rank >= 1 && x->sizes[x->rank - 1] != 1 ? x->strides[x->rank - 1] : 0;
    a->byte_offset[t] = (int64_t)x->byte_offset;
    a->dtypes[t] = x->dtype;
  }
  a->mask_kind = !m ? 0u : m->dtype == BP_DTYPE_BOOL ? 1u : 2u;
  a->causal = at->is_causal != 0;
  /* scale 0 means 1/sqrt(E); with E == 0 every score is 0. */
  a->scale = a->E == 0 ? 0.0 : at->scale != 0 ? at->scale : 1.0 / sqrt((double)a->E);
  if (a->nbatch == 0 || a->L == 0 || a->Ev == 0) return BP_OK;
  l.program = q->dtype == BP_DTYPE_F64 ? BP_GPU_PROGRAM_sdpa_f64 : BP_GPU_PROGRAM_sdpa_f32;
  l.num_operands = 5;
  const uint64_t items = (uint64_t)(a->nbatch * a->L * ((a->Ev + BP_GPU_SDPA_COLS - 1) / BP_GPU_SDPA_COLS));
  bp__gpu_grid_1d(caps, (items + 63) / 64, 64, &l);
  l.args_size = sizeof *a;
  return launch(ctx, &l);
}
