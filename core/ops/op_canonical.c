/* backplane core: calls that run as another op, so that every backend
 * gives PyTorch's results without each one special-casing them.
 *
 * pow.Tensor_Scalar with an exponent of 0.5 or -0.5 runs as sqrt or rsqrt.
 * PyTorch's kernel does the same, and the two differ from IEEE pow on
 * special values: pow(-inf, 0.5) = +inf but sqrt(-inf) = NaN;
 * pow(-0.0, 0.5) = +0.0 but sqrt(-0.0) = -0.0; pow(-inf, -0.5) = +0.0 but
 * rsqrt(-inf) = NaN; pow(-0.0, -0.5) = +inf but rsqrt(-0.0) = -inf. The
 * exponents PyTorch also special-cases (2, 3, -1, -2) give IEEE pow's
 * results on special values, so they stay pow. Output dtype and shape are
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
  if (bp__dtype_is_complex((*inputs)[0]->dtype)) return;
  double e = a->scalar.v.f;
  if (e != 0.5 && e != -0.5) return;
  *op_id = e > 0 ? BP_OP_sqrt : BP_OP_rsqrt;
  *num_inputs = 1;
  *attrs = NULL;
}
