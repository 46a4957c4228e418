/* Case generators of the gated activations (family GLU): swiglu and geglu
 * over f32, f64, f16 and bf16. The last dim holds [gate | up]: odd halves
 * (tails of vector loops), a long row, rows enough to spread over threads,
 * special values, an empty batch and an empty last dim, 1-d and 3-d inputs,
 * offset / strided / transposed inputs and outputs; geglu in both gelu
 * forms (erf and tanh). */
#include <string.h>

#include "cases_internal.h"

#define COUNT(a) (sizeof(a) / sizeof((a)[0]))

void bpc_gen_glu(bpc_gen_t* g);

typedef struct glu_spec {
  const char* axis;
  bpc_shape_t s;
  uint32_t lin, lout;
  uint32_t values;
  int quick;
} glu_spec_t;

static void glu_case(bpc_gen_t* g, uint32_t d, const glu_spec_t* v, int tanh_form) {
  bpc_case_t* c = bpc_gen_new(g, bpc_dtype_name(d), v->axis, tanh_form);
  if (!c) return;
  c->num_inputs = 1;
  c->num_outputs = 1;
  if (v->values == BPC_V_SPECIAL) {
    bpc_operand_set(&c->in[0], d, v->s, v->lin, BPC_V_SPECIAL | BPC_V_NONFINITE, -100.0, 100.0);
  } else {
    bpc_operand_set(&c->in[0], d, v->s, v->lin, BPC_V_RANDOM, -6.0, 6.0);
  }
  bpc_operand_set(&c->out[0], BP_DTYPE_INVALID, S0(), v->lout, 0, 0, 0);
  if (g->op == BP_OP_geglu) {
    c->has_attrs = 1;
    memset(&c->attrs.gelu, 0, sizeof c->attrs.gelu);
    c->attrs.gelu.struct_size = sizeof c->attrs.gelu;
    c->attrs.gelu.approximate = tanh_form ? BP_GELU_TANH : BP_GELU_NONE;
  }
}

void bpc_gen_glu(bpc_gen_t* g) {
  static const uint32_t kFloats[] = {BP_DTYPE_F32, BP_DTYPE_F64, BP_DTYPE_F16, BP_DTYPE_BF16};
  const glu_spec_t specs[] = {
      {"rows", S2(3, 34), 0, 0, BPC_V_RANDOM, 1},
      {"1d", S1(2), 0, 0, BPC_V_RANDOM, 0},
      {"3d", S3(2, 3, 16), 0, 0, BPC_V_RANDOM, 0},
      {"long", S2(2, 2062), 0, 0, BPC_V_RANDOM, 0},
      {"many_rows", S2(257, 96), 0, 0, BPC_V_RANDOM, 0},
      {"special", S2(4, 64), 0, 0, BPC_V_SPECIAL, 1},
      {"offset", S2(5, 14), BPC_LAYOUT_OFFSET, BPC_LAYOUT_OFFSET, BPC_V_RANDOM, 0},
      {"strided", S3(3, 4, 10), BPC_LAYOUT_STRIDED, BPC_LAYOUT_OFFSET, BPC_V_RANDOM, 1},
      {"transposed", S2(6, 12), BPC_LAYOUT_TRANSPOSED, BPC_LAYOUT_STRIDED, BPC_V_RANDOM, 0},
      {"out_transposed", S3(2, 5, 8), 0, BPC_LAYOUT_TRANSPOSED, BPC_V_RANDOM, 0},
      {"empty_rows", S2(0, 8), 0, 0, BPC_V_RANDOM, 0},
      {"empty_last", S2(3, 0), 0, 0, BPC_V_RANDOM, 0},
  };
  int forms = g->op == BP_OP_geglu ? 2 : 1;
  for (size_t t = 0; t < COUNT(kFloats); t++) {
    for (size_t j = 0; j < COUNT(specs); j++) {
      if (g->quick && !specs[j].quick) continue;
      for (int f = 0; f < forms; f++) glu_case(g, kFloats[t], &specs[j], f);
    }
  }
}
