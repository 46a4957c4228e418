/* backplane core: typed functions for the ATen overloads whose first
 * operand is a Scalar (aten.pow.Scalar), so an application states the
 * scalar explicitly instead of passing a NULL tensor and a flag. They fill
 * bp_binary_attrs_t (BP_BINARY_SELF_IS_SCALAR) and run the op's entry
 * point, which plugins see unchanged. */
#include "ops/ops_internal.h"

bp_status_t bp_op_pow_scalar(bp_stream_t* stream, const bp_scalar_t* self,
                             const bp_tensor_t* exponent, bp_tensor_t** out) {
  bp__clear_error();
  BP__REQUIRE_ARG("bp_op_pow_scalar", self);
  if (self->kind == BP_SCALAR_NONE) {
    return bp__error(BP_INVALID_ARGUMENT,
                     "bp_op_pow_scalar: 'self' has kind BP_SCALAR_NONE; give the base");
  }
  bp_binary_attrs_t attrs = {.struct_size = sizeof(attrs),
                             .flags = BP_BINARY_SELF_IS_SCALAR,
                             .scalar = *self,
                             .alpha = {.kind = BP_SCALAR_NONE}};
  return bp_op_pow(stream, NULL, exponent, &attrs, out);
}
