/* backplane core: inference rule of the fused quantizations (family QUANT):
 * rms_norm_quant, add_rms_norm_quant, swiglu_quant (docs/semantics.md,
 * "Fused quantization").
 *
 *   rms_norm_quant(input [..., n], weight? [n], scale? [1])
 *       -> out [..., n] qdtype, scale_out [..., 1] f32
 *   add_rms_norm_quant(input, residual like input, weight?, scale?)
 *       -> out, residual_out like input, scale_out
 *   swiglu_quant(self [..., 2h], scale?) -> out [..., h] qdtype, scale_out [..., 1]
 *
 * The codes are 8-bit (i8, float8_e4m3fn, float8_e5m2): symmetric scales,
 * one per row, so scale_out feeds scaled_mm's per-row scale_a as it is.
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "ops/ops_internal.h"

/* The static scale (input i): absent, or one f32 element. */
static bp_status_t fq_scale(const bp__infer_t* x, uint32_t i) {
  if (!bp__in_present(x, i)) return BP_OK;
  const bp_tensor_desc_t* s = &x->in[i];
  int64_t n = 1;
  for (uint32_t d = 0; d < s->rank; d++) n *= s->sizes[d];
  if (s->dtype != BP_DTYPE_F32 || n != 1) {
    char sh[192], nb[64];
    return bp__infer_fail(x, "input '%s' is %s %s; a static scale is one f32 element (per tensor)",
                          bp__op_input_name(x->op, x->num_inputs, i, nb), bp_dtype_name(s->dtype),
                          bp__shape_str(s->rank, s->sizes, sh, sizeof sh));
  }
  return BP_OK;
}

static bp_status_t fq_attrs(const bp__infer_t* x, int norm) {
  const bp_fused_quant_attrs_t* a = x->attrs;
  bp_status_t st = bp__infer_quant_code_dtype(x, a->qdtype);
  if (st != BP_OK) return st;
  if (a->flags & ~(uint32_t)BP_QUANTIZE_NO_SATURATE) {
    return bp__infer_fail(x, "attrs.flags = 0x%x has unknown bits 0x%x", a->flags,
                          a->flags & ~(uint32_t)BP_QUANTIZE_NO_SATURATE);
  }
  if (!(a->scale_ub >= 0.0) || !isfinite(a->scale_ub)) {
    return bp__infer_fail(x, "attrs.scale_ub = %g must be finite and >= 0 (0: none)", a->scale_ub);
  }
  if (norm && (!(a->eps >= 0.0) || !isfinite(a->eps))) {
    return bp__infer_fail(x, "attrs.eps = %g must be finite and >= 0 (0: the dtype's epsilon)", a->eps);
  }
  if (!norm && a->eps != 0.0) return bp__infer_fail(x, "attrs.eps = %g is unused by swiglu_quant; set it to 0", a->eps);
  return BP_OK;
}

bp_status_t bp__infer_norm_quant(bp__infer_t* x) {
  const bp_fused_quant_attrs_t* a = x->attrs;
  const bp_tensor_desc_t* in = &x->in[0];
  int add = x->op->id == BP_OP_add_rms_norm_quant, glu = x->op->id == BP_OP_swiglu_quant;
  uint32_t wi = add ? 2 : 1, si = glu ? 1 : add ? 3 : 2;
  int64_t n, m;
  bp_status_t st = fq_attrs(x, !glu);
  if (st == BP_OK) st = bp__infer_float_input(x, 0);
  if (st == BP_OK) st = fq_scale(x, si);
  if (st == BP_OK) st = bp__infer_quant_row(x, glu, &n, &m);
  if (st == BP_OK && add) st = bp__infer_like_input(x, 1, 0);
  if (st == BP_OK && !glu) st = bp__infer_quant_weight(x, wi, n);
  if (st != BP_OK) return st;
  int64_t sizes[BP_MAX_RANK];
  memcpy(sizes, in->sizes, sizeof(int64_t) * in->rank);
  sizes[in->rank - 1] = m;
  x->compute_dtype = in->dtype == BP_DTYPE_F64 ? BP_DTYPE_F64 : BP_DTYPE_F32;
  uint32_t k = 0;
  st = bp__infer_set_out(x, k++, a->qdtype, in->rank, sizes);
  if (st == BP_OK && add) st = bp__infer_set_out(x, k++, in->dtype, in->rank, in->sizes);
  sizes[in->rank - 1] = 1;
  if (st == BP_OK) st = bp__infer_set_out(x, k, BP_DTYPE_F32, in->rank, sizes);
  return st;
}
