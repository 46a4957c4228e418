/* The case list of an op: dispatch to the family generators. Only ops with
 * a reference produce cases. */
#include "cases_internal.h"

bp_status_t bpc_cases_generate(uint32_t op_id, int quick, bpc_case_list_t* list) {
  const bpc_op_entry_t* e = bpc_op_entry(op_id);
  if (!e) return BP_INVALID_ARGUMENT;
  if (!e->reference) return BP_OK;
  bpc_gen_t g = {list, op_id, e->name, quick, BP_OK};
  if (e->generate) {
    e->generate(&g);
    return g.status;
  }
  /* The core groups (registry.c) have no generator of their own: by the
   * op's kernel family (ops.def). */
  switch (bp_op_family(op_id)) {
    case BP_OP_FAMILY_UNARY_EW: bpc_gen_unary(&g); break;
    case BP_OP_FAMILY_BINARY_EW: case BP_OP_FAMILY_COMPARE: bpc_gen_binary(&g); break;
    case BP_OP_FAMILY_TERNARY_EW: /* clamp_tensor's cases are the unary ones with bounds */
      if (op_id == BP_OP_where) bpc_gen_where(&g);
      else bpc_gen_unary(&g);
      break;
    case BP_OP_FAMILY_MATMUL: bpc_gen_matmul(&g); break;
    case BP_OP_FAMILY_REDUCE: case BP_OP_FAMILY_REDUCE_EXT: case BP_OP_FAMILY_SOFTMAX:
      bpc_gen_reduce(&g);
      break;
    default: bpc_gen_data(&g); break;
  }
  return g.status;
}
