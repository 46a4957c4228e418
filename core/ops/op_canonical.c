/* backplane core: calls that run as another op, so that every backend
 * gives PyTorch's results without each one special-casing them.
 *
 * pow.Tensor_Scalar with an exponent of 0.5 or -0.5 runs as sqrt or rsqrt.
 * PyTorch's kernel does the same, and the two differ from IEEE pow on
 * special values: pow(-inf, 0.5) = +inf but sqrt(-inf) = NaN;
 * pow(-0.0, 0.5) = +0.0 but sqrt(-0.0) = -0.0; pow(-inf, -0.5) = +0.0 but
 * rsqrt(-inf) = NaN; pow(-0.0, -0.5) = +inf but rsqrt(-0.0) = -inf.
 * PyTorch's CPU kernel does not special-case f16 (it takes std::pow there),
 * so f16 stays pow. The exponents -2 and 3 (1 / (x * x), x * x * x) are
 * the plugins' business: they are one kernel, not one op (cpu_ew.c,
 * vk_ops.c); 2 and -1 give IEEE pow's results. Output dtype and shape are
 * the same either way (a floating scalar exponent makes the result floating,
 * as unary_float does), so bp_op_infer needs no rewrite. Complex inputs
 * stay pow.
 *
 * Threading: thread-safe (no shared state).
 */
#include "ops/op_run_internal.h"

void bp__op_canonicalize(uint32_t* op_id, const bp_tensor_t* const** inputs, uint32_t* num_inputs,
                         const void** attrs) {
  if (*op_id != BP_OP_pow || *num_inputs != 2 || *inputs == NULL || (*inputs)[0] == NULL) return;
  const bp_binary_attrs_t* a = *attrs;
  if (a == NULL || a->struct_size < BP_ATTRS_V1_SIZE_bp_binary_attrs_t) return;
  if (a->flags != BP_BINARY_OTHER_IS_SCALAR || a->scalar.kind != BP_SCALAR_FLOAT) return;
  uint32_t dt = (*inputs)[0]->dtype;
  if (bp__dtype_is_complex(dt) || dt == BP_DTYPE_F16) return;
  double e = a->scalar.v.f;
  if (e != 0.5 && e != -0.5) return;
  *op_id = e > 0 ? BP_OP_sqrt : BP_OP_rsqrt;
  *num_inputs = 1;
  *attrs = NULL;
}
