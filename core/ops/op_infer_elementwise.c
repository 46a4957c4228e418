/* backplane core: inference rules of elementwise ops (unary, binary,
 * comparison, where, clamp, ternary), per docs/semantics.md.
 */
#include <stdio.h>
#include <string.h>

#include "ops/ops_internal.h"

/* ---- unary ---------------------------------------------------------------- */

static bp_status_t bp__unary(bp__infer_t* x, uint32_t out_dtype, uint32_t compute_dtype) {
  x->compute_dtype = compute_dtype;
  return bp__infer_set_out(x, 0, out_dtype, x->in[0].rank, x->in[0].sizes);
}

bp_status_t bp__infer_unary_same(bp__infer_t* x) {
  uint32_t d = x->in[0].dtype;
  if (d == BP_DTYPE_BOOL && x->op->id == BP_OP_neg) {
    return bp__infer_fail(x, "neg is not defined for bool (use logical_not)");
  }
  if (bp__dtype_is_complex(d)) {
    if (x->op->id == BP_OP_abs) return bp__unary(x, BP_DTYPE_F32, d);
    if (x->op->id != BP_OP_neg) return bp__infer_fail(x, "not defined for complex input c64");
  }
  return bp__unary(x, d, d);
}

bp_status_t bp__infer_unary_float(bp__infer_t* x) {
  uint32_t d = x->in[0].dtype;
  uint32_t out = (bp__dtype_is_float(d) || bp__dtype_is_complex(d)) ? d : BP_DTYPE_F32;
  return bp__unary(x, out, out);
}

bp_status_t bp__infer_unary_bool(bp__infer_t* x) {
  return bp__unary(x, BP_DTYPE_BOOL, x->in[0].dtype);
}

bp_status_t bp__infer_unary_bitwise(bp__infer_t* x) {
  uint32_t d = x->in[0].dtype;
  if (!bp__dtype_is_int(d) && d != BP_DTYPE_BOOL) {
    return bp__infer_fail(x, "input 'self' has dtype %s; only integer and bool inputs are allowed",
                          bp_dtype_name(d));
  }
  return bp__unary(x, d, d);
}

bp_status_t bp__infer_unary_clamp(bp__infer_t* x) {
  const bp_clamp_attrs_t* a = x->attrs;
  if (a->min.kind == BP_SCALAR_NONE && a->max.kind == BP_SCALAR_NONE) {
    return bp__infer_fail(x, "at least one of attrs.min and attrs.max must be given");
  }
  bp__result_type_t rt;
  bp__result_type_init(&rt);
  bp__result_type_add_tensor(&rt, &x->in[0]);
  if (a->min.kind != BP_SCALAR_NONE) bp__result_type_add_scalar(&rt, &a->min);
  if (a->max.kind != BP_SCALAR_NONE) bp__result_type_add_scalar(&rt, &a->max);
  uint32_t d = bp__result_type_get(&rt);
  if (d == BP_DTYPE_BOOL) return bp__infer_fail(x, "clamp is not defined for bool");
  return bp__unary(x, d, d);
}

/* ---- promotion of several operands ----------------------------------------- */

/* Promotes the present inputs whose bit is set in `mask`, plus `scalar` when
 * not NULL; fails with a message naming the operands' dtypes. */
static bp_status_t bp__promote_inputs(const bp__infer_t* x, uint32_t mask,
                                      const bp_scalar_t* scalar, uint32_t* out_dtype) {
  bp__result_type_t rt;
  bp__result_type_init(&rt);
  for (uint32_t i = 0; i < x->num_inputs && i < 32; ++i) {
    if ((mask & (1u << i)) && bp__in_present(x, i)) bp__result_type_add_tensor(&rt, &x->in[i]);
  }
  if (scalar != NULL) bp__result_type_add_scalar(&rt, scalar);
  uint32_t d = bp__result_type_get(&rt);
  if (d == BP_DTYPE_INVALID) {
    char list[256];
    size_t n = 0;
    list[0] = '\0';
    for (uint32_t i = 0; i < x->num_inputs && i < 32 && n < sizeof(list); ++i) {
      if (!(mask & (1u << i)) || !bp__in_present(x, i)) continue;
      char dbuf[32];
      n += (size_t)snprintf(list + n, sizeof(list) - n, "%s%s", n ? ", " : "",
                            bp__dtype_str(x->in[i].dtype, dbuf));
    }
    return bp__infer_fail(x, "operand dtypes (%s) have no common dtype", list);
  }
  *out_dtype = d;
  return BP_OK;
}

static bp_status_t bp__elementwise_out(bp__infer_t* x, uint32_t mask, uint32_t out_dtype,
                                       uint32_t compute_dtype) {
  uint32_t rank;
  int64_t sizes[BP_MAX_RANK];
  bp_status_t st = bp__infer_broadcast(x, mask, &rank, sizes);
  if (st != BP_OK) return st;
  x->compute_dtype = compute_dtype;
  return bp__infer_set_out(x, 0, out_dtype, rank, sizes);
}

bp_status_t bp__infer_clamp_tensor(bp__infer_t* x) {
  if (!bp__in_present(x, 1) && !bp__in_present(x, 2)) {
    return bp__infer_fail(x, "at least one of inputs 'min' and 'max' must be given");
  }
  uint32_t d;
  bp_status_t st = bp__promote_inputs(x, 0x7, NULL, &d);
  if (st != BP_OK) return st;
  if (d == BP_DTYPE_BOOL) return bp__infer_fail(x, "clamp is not defined for bool");
  return bp__elementwise_out(x, 0x7, d, d);
}

/* ---- binary ------------------------------------------------------------------ */

/* Operand presence against the scalar flags, then the promoted dtype. */
static bp_status_t bp__binary_promote(bp__infer_t* x, uint32_t* out_promoted) {
  const bp_binary_attrs_t* a = x->attrs;
  int self_scalar = (a->flags & BP_BINARY_SELF_IS_SCALAR) != 0;
  int other_scalar = (a->flags & BP_BINARY_OTHER_IS_SCALAR) != 0;
  if (self_scalar && bp__in_present(x, 0)) {
    return bp__infer_fail(x, "input 'self' must be NULL with BP_BINARY_SELF_IS_SCALAR");
  }
  if (!self_scalar && !bp__in_present(x, 0)) {
    return bp__infer_fail(x, "input 'self' is NULL (set BP_BINARY_SELF_IS_SCALAR to pass a "
                             "scalar)");
  }
  if (other_scalar && bp__in_present(x, 1)) {
    return bp__infer_fail(x, "input 'other' must be NULL with BP_BINARY_OTHER_IS_SCALAR");
  }
  if (!other_scalar && !bp__in_present(x, 1)) {
    return bp__infer_fail(x, "input 'other' is NULL (set BP_BINARY_OTHER_IS_SCALAR to pass a "
                             "scalar)");
  }
  return bp__promote_inputs(x, 0x3, a->flags ? &a->scalar : NULL, out_promoted);
}

static int bp__binary_has_bool_operand(const bp__infer_t* x) {
  const bp_binary_attrs_t* a = x->attrs;
  return x->in[0].dtype == BP_DTYPE_BOOL || x->in[1].dtype == BP_DTYPE_BOOL ||
         (a->flags != 0 && a->scalar.kind == BP_SCALAR_BOOL);
}

bp_status_t bp__infer_binary_arith(bp__infer_t* x) {
  const bp_binary_attrs_t* a = x->attrs;
  uint32_t d;
  bp_status_t st = bp__binary_promote(x, &d);
  if (st != BP_OK) return st;
  if (x->op->id == BP_OP_sub && bp__binary_has_bool_operand(x)) {
    return bp__infer_fail(x, "subtraction with a bool operand is not supported (use "
                             "logical_xor or bitwise_not)");
  }
  if (a->alpha.kind == BP_SCALAR_FLOAT && !bp__dtype_is_float(d) && !bp__dtype_is_complex(d)) {
    return bp__infer_fail(x, "attrs.alpha is a floating scalar but the result dtype is %s",
                          bp_dtype_name(d));
  }
  if (a->alpha.kind == BP_SCALAR_BOOL && d != BP_DTYPE_BOOL) {
    return bp__infer_fail(x, "attrs.alpha is a bool scalar but the result dtype is %s",
                          bp_dtype_name(d));
  }
  return bp__elementwise_out(x, 0x3, d, d);
}

bp_status_t bp__infer_binary_div(bp__infer_t* x) {
  const bp_binary_attrs_t* a = x->attrs;
  uint32_t d;
  bp_status_t st = bp__binary_promote(x, &d);
  if (st != BP_OK) return st;
  if (a->rounding_mode == BP_ROUNDING_NONE) {
    if (!bp__dtype_is_float(d) && !bp__dtype_is_complex(d)) d = BP_DTYPE_F32;
  } else if (bp__dtype_is_complex(d)) {
    return bp__infer_fail(x, "attrs.rounding_mode is not defined for complex operands");
  }
  return bp__elementwise_out(x, 0x3, d, d);
}

/* The binary rules whose result follows from the promoted dtype alone. */
enum bp__binary_rule {
  BP__BINARY_FLOAT,   /* floating result: integer and bool operands compute in f32 */
  BP__BINARY_COMPARE, /* bool result; complex operands only for eq and ne */
  BP__BINARY_BOOL,    /* bool result */
  BP__BINARY_BITWISE  /* integer or bool operands, result of their dtype */
};

static bp_status_t bp__binary_rule(bp__infer_t* x, enum bp__binary_rule rule) {
  uint32_t d;
  bp_status_t st = bp__binary_promote(x, &d);
  if (st != BP_OK) return st;
  uint32_t result = d;
  switch (rule) {
    case BP__BINARY_FLOAT:
      if (!bp__dtype_is_float(d) && !bp__dtype_is_complex(d)) result = d = BP_DTYPE_F32;
      break;
    case BP__BINARY_COMPARE:
      if (bp__dtype_is_complex(d) && x->op->id != BP_OP_eq && x->op->id != BP_OP_ne) {
        return bp__infer_fail(x, "ordering comparisons are not defined for complex operands");
      }
      result = BP_DTYPE_BOOL;
      break;
    case BP__BINARY_BOOL:
      result = BP_DTYPE_BOOL;
      break;
    case BP__BINARY_BITWISE:
      if (!bp__dtype_is_int(d) && d != BP_DTYPE_BOOL) {
        return bp__infer_fail(x,
                              "operands promote to %s; only integer and bool operands are allowed",
                              bp_dtype_name(d));
      }
      break;
  }
  return bp__elementwise_out(x, 0x3, result, d);
}

bp_status_t bp__infer_binary_float(bp__infer_t* x) { return bp__binary_rule(x, BP__BINARY_FLOAT); }
bp_status_t bp__infer_binary_compare(bp__infer_t* x) {
  return bp__binary_rule(x, BP__BINARY_COMPARE);
}
bp_status_t bp__infer_binary_bool(bp__infer_t* x) { return bp__binary_rule(x, BP__BINARY_BOOL); }
bp_status_t bp__infer_binary_bitwise(bp__infer_t* x) {
  return bp__binary_rule(x, BP__BINARY_BITWISE);
}

/* ---- where, ternary ------------------------------------------------------------- */

bp_status_t bp__infer_where(bp__infer_t* x) {
  uint32_t c = x->in[0].dtype;
  if (c != BP_DTYPE_BOOL && c != BP_DTYPE_U8) {
    return bp__infer_fail(x, "input 'condition' has dtype %s; expected bool (or u8)",
                          bp_dtype_name(c));
  }
  uint32_t d;
  bp_status_t st = bp__promote_inputs(x, 0x6, NULL, &d);
  if (st != BP_OK) return st;
  return bp__elementwise_out(x, 0x7, d, d);
}

/* addcmul(self, tensor1, tensor2) and lerp(self, end, weight or attrs.alpha). */
bp_status_t bp__infer_ternary_arith(bp__infer_t* x) {
  const bp_binary_attrs_t* a = x->attrs;
  if (a->flags != 0) {
    return bp__infer_fail(x, "attrs.flags must be 0 (all operands are tensors)");
  }
  uint32_t d;
  bp_status_t st = bp__promote_inputs(x, 0x7, NULL, &d);
  if (st != BP_OK) return st;
  if (x->op->id == BP_OP_lerp) {
    if (!bp__dtype_is_float(d) && !bp__dtype_is_complex(d)) {
      return bp__infer_fail(x, "lerp needs floating operands, got %s", bp_dtype_name(d));
    }
    if (!bp__in_present(x, 2) && a->alpha.kind == BP_SCALAR_NONE) {
      return bp__infer_fail(x, "give input 'weight' or attrs.alpha (the scalar weight)");
    }
  }
  if (d == BP_DTYPE_BOOL) return bp__infer_fail(x, "not defined for bool operands");
  return bp__elementwise_out(x, 0x7, d, d);
}
