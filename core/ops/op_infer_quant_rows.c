/* backplane core: the checks that the row quantizations' inference rules
 * share (op_infer_fused_quant.c, op_infer_group_quant.c): symmetric 8-bit
 * codes of rows of the last dim, the floating input, swiglu's [gate | up]
 * halves and rms_norm's weight. Declared in ops_internal.h.
 */
#include "ops/ops_internal.h"

bp_status_t bp__infer_quant_code_dtype(const bp__infer_t* x, uint32_t q) {
  if (q == BP_DTYPE_I8 || q == BP_DTYPE_F8E4M3FN || q == BP_DTYPE_F8E5M2) return BP_OK;
  char b[32];
  return bp__infer_fail(x, "attrs.qdtype %s is not a code dtype of this op (i8, float8_e4m3fn, "
                           "float8_e5m2: symmetric 8-bit codes)",
                        bp__dtype_str(q, b));
}

bp_status_t bp__infer_float_input(const bp__infer_t* x, uint32_t i) {
  if (bp__dtype_is_float(x->in[i].dtype)) return BP_OK;
  char n[64];
  return bp__infer_fail(x, "input '%s' has dtype %s; a floating dtype (f16, bf16, f32, f64) is required",
                        bp__op_input_name(x->op, x->num_inputs, i, n), bp_dtype_name(x->in[i].dtype));
}

bp_status_t bp__infer_quant_row(const bp__infer_t* x, int glu, int64_t* out_n, int64_t* out_m) {
  const bp_tensor_desc_t* in = &x->in[0];
  char n0[64], s0[192];
  if (in->rank == 0) {
    return bp__infer_fail(x, "input '%s' is 0-d; the op runs over rows of its last dim",
                          bp__op_input_name(x->op, x->num_inputs, 0, n0));
  }
  int64_t n = in->sizes[in->rank - 1];
  if (glu && n % 2 != 0) {
    return bp__infer_fail(x, "input 'self' has shape %s; its last dim (%lld) must be even: the gate "
                             "half then the up half",
                          bp__shape_str(in->rank, in->sizes, s0, sizeof s0), (long long)n);
  }
  *out_n = n;
  *out_m = glu ? n / 2 : n;
  return BP_OK;
}

bp_status_t bp__infer_quant_weight(const bp__infer_t* x, uint32_t wi, int64_t n) {
  if (!bp__in_present(x, wi)) return BP_OK;
  const bp_tensor_desc_t* w = &x->in[wi];
  if (w->rank == 1 && w->sizes[0] == n && bp__dtype_is_float(w->dtype)) return BP_OK;
  char nb[64], s1[192];
  return bp__infer_fail(x, "input '%s' is %s %s; expected a floating [%lld] (the normalized dim)",
                        bp__op_input_name(x->op, x->num_inputs, wi, nb), bp_dtype_name(w->dtype),
                        bp__shape_str(w->rank, w->sizes, s1, sizeof s1), (long long)n);
}
