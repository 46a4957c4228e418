/* backplane core: the typed op functions (bp_op_add, bp_op_cat, ...),
 * generated from ops.def. Each one flattens its operands (a tensor list
 * expands in place) and calls bp_op_run; output pointers follow
 * bp_op_run's rule (*out == NULL: a new tensor is stored there).
 *
 * This file includes no libc header that declares names ops.def uses as
 * parameters (index, sin, cos...); the flattening lives in op_run.c.
 */
#include "ops/ops_internal.h"

/* Operand arrays per layout: before_, list_, list_count_, list_name_, after_. */
#define BP__FN_IN(...) BP__OPS_DISPATCH(BP__FNI_, __VA_ARGS__)
#define BP__FNI_NOLIST_(n, ...)                                      \
  const bp_tensor_t* const before_[] = {__VA_ARGS__};                \
  const uint32_t num_before_ = n;                                    \
  const bp_tensor_t* const* const list_ = NULL;                      \
  const uint32_t list_count_ = 0;                                    \
  const char* const list_name_ = NULL;                               \
  const bp_tensor_t* const* const after_ = NULL;                     \
  const uint32_t num_after_ = 0;
#define BP__FNI_IN0_(x) BP__FNI_NOLIST_(0, NULL)
#define BP__FNI_IN1_(a) BP__FNI_NOLIST_(1, a)
#define BP__FNI_IN2_(a, b) BP__FNI_NOLIST_(2, a, b)
#define BP__FNI_IN3_(a, b, c) BP__FNI_NOLIST_(3, a, b, c)
#define BP__FNI_IN4_(a, b, c, d) BP__FNI_NOLIST_(4, a, b, c, d)
#define BP__FNI_IN5_(a, b, c, d, e) BP__FNI_NOLIST_(5, a, b, c, d, e)
#define BP__FNI_IN6_(a, b, c, d, e, f) BP__FNI_NOLIST_(6, a, b, c, d, e, f)
#define BP__FNI_LIST_(nb, bef, l, na, aft)                           \
  const bp_tensor_t* const before_[] = {bef};                        \
  const uint32_t num_before_ = nb;                                   \
  const bp_tensor_t* const* const list_ = l;                         \
  const uint32_t list_count_ = l##_count;                            \
  const char* const list_name_ = #l;                                 \
  const bp_tensor_t* const after_[] = {aft};                         \
  const uint32_t num_after_ = na;
#define BP__FNI_INV_(l) BP__FNI_LIST_(0, NULL, l, 0, NULL)
#define BP__FNI_IN1V_(a, l) BP__FNI_LIST_(1, a, l, 0, NULL)
#define BP__FNI_IN1V1_(a, l, b) BP__FNI_LIST_(1, a, l, 1, b)

#define BP__FN_OUT(...) BP__OPS_DISPATCH(BP__FNO_, __VA_ARGS__)
#define BP__FNO_OUT1_(a) bp_tensor_t** const out_ptrs_[] = {a};
#define BP__FNO_OUT2_(a, b) bp_tensor_t** const out_ptrs_[] = {a, b};
#define BP__FNO_OUT3_(a, b, c) bp_tensor_t** const out_ptrs_[] = {a, b, c};
#define BP__FNO_OUT4_(a, b, c, d) bp_tensor_t** const out_ptrs_[] = {a, b, c, d};

#define BP_OP(id, name, cat, fam, ins, outs, attrs_t, rule, aten)                                  \
  bp_status_t bp_op_##name(bp_stream_t* stream, BP__SIG_P(ins) const attrs_t* attrs,         \
                           BP__SIG_P(outs)) {                                               \
    BP__FN_IN(ins)                                                                          \
    BP__FN_OUT(outs)                                                                        \
    return bp__op_call(stream, id, before_, num_before_, list_, list_count_, list_name_,    \
                       after_, num_after_, attrs, out_ptrs_, BP__NUM_OUTPUTS(outs));        \
  }
#include "backplane/ops.def"
#undef BP_OP
