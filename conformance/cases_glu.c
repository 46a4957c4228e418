/* Case generators of the gated activations (family GLU): swiglu and geglu
 * over f32, f64, f16 and bf16. The last dim holds [gate | up]: odd halves
 * (tails of vector loops), a long row, rows enough to spread over threads,
 * special values, an empty batch and an empty last dim, 1-d and 3-d inputs,
 * offset / strided / transposed inputs and outputs; geglu in both gelu
 * forms (erf and tanh). */
#include <string.h>

#include "cases_internal.h"

void bpc_gen_glu(bpc_gen_t* g);

typedef struct glu_row {
  bpc_row_t row;
  bpc_shape_t s;
  uint32_t lin, lout;
  uint32_t values;
} glu_row_t;

/* Variant 1: geglu's tanh form. */
static void glu_fill(bpc_case_t* c, const void* row, const bpc_table_at_t* at) {
  const glu_row_t* r = row;
  if (r->values == BPC_V_SPECIAL) {
    bpc_operand_set(&c->in[0], at->dtype, r->s, r->lin, BPC_V_SPECIAL | BPC_V_NONFINITE, -100.0, 100.0);
  } else {
    bpc_operand_set(&c->in[0], at->dtype, r->s, r->lin, BPC_V_RANDOM, -6.0, 6.0);
  }
  bpc_operand_set(&c->out[0], BP_DTYPE_INVALID, S0(), r->lout, 0, 0, 0);
  if (c->op_id == BP_OP_geglu) {
    BPC_CASE_ATTRS(c, gelu)->approximate = at->variant ? BP_GELU_TANH : BP_GELU_NONE;
  }
}

void bpc_gen_glu(bpc_gen_t* g) {
  static const glu_row_t rows[] = {
      {{"rows", 1}, {2, {3, 34}}, 0, 0, BPC_V_RANDOM},
      {{"1d", 0}, {1, {2}}, 0, 0, BPC_V_RANDOM},
      {{"3d", 0}, {3, {2, 3, 16}}, 0, 0, BPC_V_RANDOM},
      {{"long", 0}, {2, {2, 2062}}, 0, 0, BPC_V_RANDOM},
      {{"many_rows", 0}, {2, {257, 96}}, 0, 0, BPC_V_RANDOM},
      {{"special", 1}, {2, {4, 64}}, 0, 0, BPC_V_SPECIAL},
      {{"offset", 0}, {2, {5, 14}}, BPC_LAYOUT_OFFSET, BPC_LAYOUT_OFFSET, BPC_V_RANDOM},
      {{"strided", 1}, {3, {3, 4, 10}}, BPC_LAYOUT_STRIDED, BPC_LAYOUT_OFFSET, BPC_V_RANDOM},
      {{"transposed", 0}, {2, {6, 12}}, BPC_LAYOUT_TRANSPOSED, BPC_LAYOUT_STRIDED, BPC_V_RANDOM},
      {{"out_transposed", 0}, {3, {2, 5, 8}}, 0, BPC_LAYOUT_TRANSPOSED, BPC_V_RANDOM},
      {{"empty_rows", 0}, {2, {0, 8}}, 0, 0, BPC_V_RANDOM},
      {{"empty_last", 0}, {2, {3, 0}}, 0, 0, BPC_V_RANDOM},
  };
  bpc_gen_table(g, &(bpc_table_t){BPC_ROWS(rows), BPC_FLOAT_DTYPES, .variants = g->op == BP_OP_geglu ? 2 : 1,
                                  .num_inputs = 1, .num_outputs = 1, .fill = glu_fill});
}
