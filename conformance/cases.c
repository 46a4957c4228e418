/* The case list of an op: dispatch to the family generators. Only ops with
 * a reference produce cases. */
#include <string.h>

#include "cases_internal.h"

bp_status_t bpc_cases_generate(uint32_t op_id, int quick, bpc_case_list_t* list) {
  const bpc_op_entry_t* e = bpc_op_entry(op_id);
  if (!e) return BP_INVALID_ARGUMENT;
  if (!e->reference) return BP_OK;
  bpc_gen_t g = {list, op_id, e->name, quick, BP_OK};
  if (e->generate) {
    e->generate(&g);
  } else if (op_id >= BP_OP_abs && op_id <= BP_OP_silu) {
    bpc_gen_unary(&g);
  } else if (op_id >= BP_OP_add && op_id <= BP_OP_ge) {
    bpc_gen_binary(&g);
  } else if (op_id == BP_OP_where) {
    bpc_gen_where(&g);
  } else if (op_id == BP_OP_mm || op_id == BP_OP_bmm || op_id == BP_OP_addmm) {
    bpc_gen_matmul(&g);
  } else if (strcmp(e->category, "REDUCTION") == 0 || op_id == BP_OP_softmax ||
             op_id == BP_OP_log_softmax) {
    bpc_gen_reduce(&g);
  } else {
    bpc_gen_data(&g);
  }
  return g.status;
}
