/* Case generators: the one loop of the table-driven generators
 * (cases_internal.h, bpc_gen_table): per case dtype, per table row (quick
 * rows only under --quick), per variant, a case "op/dtype/axis/variant"
 * with the op's operand counts and outputs left to inference; the op's
 * fill function sets its inputs and attributes (and may give an output a
 * layout, or change the input count, after the defaults).
 */
#include "cases_internal.h"

const uint32_t bpc_float_dtypes[BPC_NUM_FLOAT_DTYPES] = {BP_DTYPE_F32, BP_DTYPE_F64, BP_DTYPE_F16,
                                                         BP_DTYPE_BF16};

void bpc_gen_table(bpc_gen_t* g, const bpc_table_t* t) {
  size_t num_dtypes = t->dtypes ? t->num_dtypes : 1;
  int variants = t->variants > 0 ? t->variants : 1;
  for (size_t d = 0; d < num_dtypes; d++) {
    for (size_t k = 0; k < t->num_rows; k++) {
      const void* row = (const char*)t->rows + k * t->row_size;
      const bpc_row_t* head = row;
      if (g->quick && !head->quick) continue;
      uint32_t dtype = t->dtypes ? t->dtypes[d] : t->row_dtype(row);
      if (t->row_skip && t->row_skip(row, dtype)) continue;
      for (int v = 0; v < variants; v++) {
        bpc_case_t* c = bpc_gen_new(g, bpc_dtype_name(dtype), head->axis, v);
        if (!c) return;
        c->num_inputs = t->num_inputs;
        c->num_outputs = t->num_outputs;
        for (uint32_t o = 0; o < c->num_outputs; o++) bpc_operand_set(&c->out[o], BP_DTYPE_INVALID, S0(), 0, 0, 0, 0);
        bpc_table_at_t at = {dtype, d, k, v};
        t->fill(c, row, &at);
      }
    }
  }
}
