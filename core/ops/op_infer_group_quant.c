/* backplane core: inference rule of the per-token-group quantizations
 * (family QUANT): per_token_group_quant, rms_norm_group_quant,
 * swiglu_group_quant (docs/semantics.md, "Group quantization").
 *
 *   per_token_group_quant(self [..., n]) -> out [..., n] qdtype, scale
 *   rms_norm_group_quant(input [..., n], weight? [n]) -> out, scale
 *   swiglu_group_quant(self [..., 2h]) -> out [..., h] qdtype, scale
 *
 * scale is f32 [..., m / G] for an output row of m elements in groups of
 * G = attrs.group_size, or [m / G, rows] with BP_GROUP_QUANT_COLUMN_MAJOR
 * (rows = the product of the leading dims).
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "ops/ops_internal.h"

#define GQ_FLAGS ((uint32_t)(BP_GROUP_QUANT_COLUMN_MAJOR | BP_GROUP_QUANT_SCALE_UE8M0))

static bp_status_t gq_attrs(const bp__infer_t* x, int norm) {
  const bp_group_quant_attrs_t* a = x->attrs;
  bp_status_t st = bp__infer_quant_code_dtype(x, a->qdtype);
  if (st != BP_OK) return st;
  if (a->group_size < 1) return bp__infer_fail(x, "attrs.group_size = 0; it must be >= 1 (DeepSeek-V3: 128)");
  if (a->flags & ~GQ_FLAGS) {
    return bp__infer_fail(x, "attrs.flags = 0x%x has unknown bits 0x%x", a->flags, a->flags & ~GQ_FLAGS);
  }
  if (!(a->eps >= 0.0) || !isfinite(a->eps)) {
    return bp__infer_fail(x, "attrs.eps = %g must be finite and >= 0 (0: 1e-10)", a->eps);
  }
  if (norm && (!(a->norm_eps >= 0.0) || !isfinite(a->norm_eps))) {
    return bp__infer_fail(x, "attrs.norm_eps = %g must be finite and >= 0 (0: the dtype's epsilon)",
                          a->norm_eps);
  }
  if (!norm && a->norm_eps != 0.0) {
    return bp__infer_fail(x, "attrs.norm_eps = %g is unused by %s; set it to 0", a->norm_eps, x->op->name);
  }
  return BP_OK;
}

/* Shared by the three ops: codes like the (halved for swiglu) input, scales
 * per group. */
static bp_status_t gq_infer(bp__infer_t* x, int norm, int glu) {
  const bp_group_quant_attrs_t* a = x->attrs;
  const bp_tensor_desc_t* in = &x->in[0];
  const char* name = norm ? "input" : "self";
  char s0[192];
  int64_t n, m;
  bp_status_t st = gq_attrs(x, norm);
  if (st == BP_OK) st = bp__infer_float_input(x, 0);
  if (st == BP_OK) st = bp__infer_quant_row(x, glu, &n, &m);
  if (st != BP_OK) return st;
  if (m % a->group_size != 0) {
    return bp__infer_fail(x, "input '%s' has shape %s; the quantized row of %lld elements must be a multiple of "
                             "attrs.group_size = %u",
                          name, bp__shape_str(in->rank, in->sizes, s0, sizeof s0), (long long)m, a->group_size);
  }
  if (norm) {
    st = bp__infer_quant_weight(x, 1, n);
    if (st != BP_OK) return st;
  }
  int64_t sizes[BP_MAX_RANK], rows = 1;
  memcpy(sizes, in->sizes, sizeof(int64_t) * in->rank);
  for (uint32_t d = 0; d + 1 < in->rank; d++) rows *= in->sizes[d];
  sizes[in->rank - 1] = m;
  x->compute_dtype = in->dtype == BP_DTYPE_F64 ? BP_DTYPE_F64 : BP_DTYPE_F32;
  st = bp__infer_set_out(x, 0, a->qdtype, in->rank, sizes);
  if (st != BP_OK) return st;
  int64_t groups = m / a->group_size;
  if (a->flags & BP_GROUP_QUANT_COLUMN_MAJOR) {
    int64_t cs[2] = {groups, rows};
    return bp__infer_set_out(x, 1, BP_DTYPE_F32, 2, cs);
  }
  sizes[in->rank - 1] = groups;
  return bp__infer_set_out(x, 1, BP_DTYPE_F32, in->rank, sizes);
}

bp_status_t bp__infer_per_token_group_quant(bp__infer_t* x) { return gq_infer(x, 0, 0); }

bp_status_t bp__infer_group_quant_fused(bp__infer_t* x) {
  int norm = x->op->id == BP_OP_rms_norm_group_quant;
  return gq_infer(x, norm, !norm);
}
