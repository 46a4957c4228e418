/* References of the fused elementwise ops: hardswish, hardsigmoid, softplus
 * and mish (through the unary reference of ref_elementwise.c), addcmul and
 * lerp (here). fp64, then the checker rounds. */
#include <math.h>
#include <string.h>

#include "../cases_internal.h"
#include "ref.h"

/* self + value * tensor1 * tensor2; lerp: self + weight * (end - self). The
 * error scale is the size of the terms (the kernels round each step). */
static bpc_num_t ternary_fn(const bpc_case_t* c, const bpc_num_t* v, uint32_t cd) {
  bpc_num_t r = {0.0, 0, 0.0};
  int fl = bpc_dtype_is_float(cd);
  const bp_binary_attrs_t* at = &c->attrs.binary;
  if (c->op_id == BP_OP_addcmul) {
    uint32_t vd;
    bpc_num_t value = bpc_scalar_value(&at->alpha, &vd);
    if (vd == BP_DTYPE_INVALID) value = (bpc_num_t){1.0, 1, 0.0}, vd = BP_DTYPE_I64;
    if (fl) {
      double k = bpc_dtype_is_float(vd) ? value.f : (double)value.i;
      r.f = v[0].f + k * v[1].f * v[2].f;
      r.mag = fabs(v[0].f) + fabs(k * v[1].f * v[2].f);
    } else {
      uint64_t k = (uint64_t)value.i;
      r.i = bpc_wrap_int((int64_t)((uint64_t)v[0].i + k * (uint64_t)v[1].i * (uint64_t)v[2].i), cd);
      r.f = (double)r.i;
    }
    return r;
  }
  double x = v[0].f, y = v[1].f, w = v[2].f;
  /* PyTorch's two-sided form: exact at both ends, and its inf/NaN pattern. */
  r.f = fabs(w) < 0.5 ? x + w * (y - x) : y - (y - x) * (1.0 - w);
  r.mag = fabs(x) + fabs(w) * (fabs(y) + fabs(x));
  return r;
}

static bp_status_t ref_ternary(const bpc_case_t* c, const bpc_host_tensor_t* in,
                               bpc_ref_result_t* res) {
  const bp_binary_attrs_t* at = &c->attrs.binary;
  bpc_ew_operand_t ops[3];
  memset(ops, 0, sizeof ops);
  bpc_result_type_t rt;
  bpc_result_type_init(&rt);
  for (int k = 0; k < 3; k++) {
    if (in[k].dtype == BP_DTYPE_INVALID) {
      if (c->op_id != BP_OP_lerp || k != 2) return bpc_ref_reject(res, "operand %d missing", k);
      ops[k].scalar = bpc_scalar_value(&at->alpha, &ops[k].scalar_dtype);
      if (ops[k].scalar_dtype == BP_DTYPE_INVALID) return bpc_ref_reject(res, "lerp: no weight");
      bpc_result_type_add(&rt, ops[k].scalar_dtype, BPC_GROUP_WRAPPED);
      continue;
    }
    uint32_t d = in[k].dtype;
    if (d == BP_DTYPE_C64 || d == BP_DTYPE_F8E4M3FN || d == BP_DTYPE_F8E5M2)
      return bpc_ref_reject(res, "no arithmetic on %s", bpc_dtype_name(d));
    ops[k].t = &in[k];
    bpc_result_type_add_tensor(&rt, &in[k]);
  }
  uint32_t cd = bpc_result_type_get(&rt);
  if (cd == BP_DTYPE_BOOL) return bpc_ref_reject(res, "not defined for bool");
  if (c->op_id == BP_OP_lerp && !bpc_dtype_is_float(cd))
    return bpc_ref_reject(res, "lerp needs floating operands");
  if (c->op_id == BP_OP_addcmul && !bpc_dtype_is_float(cd) && at->alpha.kind == BP_SCALAR_FLOAT)
    return bpc_ref_reject(res, "addcmul: floating value with an integer result");
  return bpc_ref_elementwise(c, ops, 3, cd, cd, cd, ternary_fn, res);
}

void bpc_gen_fused_ternary(struct bpc_gen* g);

static const bpc_ref_group_t k_groups[] = {
    {bpc_ref_unary, BPC_ACC_DIVSQRT, 0, BPC_OPS(BP_OP_hardsigmoid, BP_OP_hardswish),
     bpc_gen_unary, NULL},
    {bpc_ref_unary, BPC_ACC_TRANS_HARD, 0, BPC_OPS(BP_OP_softplus, BP_OP_mish), bpc_gen_unary,
     NULL},
    {ref_ternary, BPC_ACC_DIVSQRT, 0, BPC_OPS(BP_OP_addcmul, BP_OP_lerp), bpc_gen_fused_ternary,
     NULL},
};

const bpc_ref_family_t bpc_ref_family_fused_ew = BPC_FAMILY(fused_ew, k_groups);
