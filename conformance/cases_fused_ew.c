/* Case generators of the fused ternary elementwise ops: addcmul and lerp
 * (the fused unary ones use bpc_gen_unary). */
#include <stdio.h>
#include <string.h>

#include "cases_internal.h"

#define COUNT(a) (sizeof(a) / sizeof((a)[0]))

void bpc_gen_fused_ternary(struct bpc_gen* g);

typedef struct tern_spec {
  const char* axis;
  bpc_shape_t s0, s1, s2;
  uint32_t l0, l1, lout;
  uint32_t values;
  int scalar_weight; /* lerp: weight from attrs.alpha */
  int quick;
} tern_spec_t;

static void tern_case(bpc_gen_t* g, uint32_t d, const tern_spec_t* t, int variant) {
  bpc_case_t* c = bpc_gen_new(g, bpc_dtype_name(d), t->axis, variant);
  if (!c) return;
  int fl = bpc_dtype_is_float(d);
  int lerp = g->op == BP_OP_lerp;
  c->num_inputs = 3;
  double lo = fl ? 0.0 : -20.0, hi = fl ? 0.0 : 20.0;
  bpc_operand_set(&c->in[0], d, t->s0, t->l0, t->values, lo, hi);
  bpc_operand_set(&c->in[1], d, t->s1, t->l1, t->values == BPC_V_SPECIAL ? BPC_V_RANDOM : t->values,
                  lo, hi);
  if (lerp && t->scalar_weight) {
    c->in[2].dtype = BP_DTYPE_INVALID;
  } else if (lerp) { /* weights on both sides of 0.5, and the ends */
    bpc_operand_set(&c->in[2], d, t->s2, BPC_LAYOUT_CONTIG, BPC_V_RANDOM, -0.25, 1.25);
  } else {
    bpc_operand_set(&c->in[2], d, t->s2, BPC_LAYOUT_CONTIG, BPC_V_RANDOM, lo, hi);
  }
  bpc_operand_set(&c->out[0], BP_DTYPE_INVALID, S0(), t->lout, 0, 0, 0);
  c->has_attrs = 1;
  memset(&c->attrs.binary, 0, sizeof c->attrs.binary);
  c->attrs.binary.struct_size = sizeof c->attrs.binary;
  if (lerp && t->scalar_weight) c->attrs.binary.alpha = bpc_sf(variant ? 0.75 : 0.25);
  else if (!lerp && variant) c->attrs.binary.alpha = fl ? bpc_sf(-0.5) : bpc_si(3);
}

void bpc_gen_fused_ternary(struct bpc_gen* g) {
  static const uint32_t kFloat[] = {BP_DTYPE_F32, BP_DTYPE_F64, BP_DTYPE_F16, BP_DTYPE_BF16};
  static const uint32_t kInt[] = {BP_DTYPE_I32, BP_DTYPE_I64, BP_DTYPE_U8, BP_DTYPE_I8};
  const tern_spec_t specs[] = {
      {"special", S1(64), S1(64), S1(64), 0, 0, 0, BPC_V_SPECIAL, 0, 1},
      {"random", S1(1031), S1(1031), S1(1031), 0, 0, 0, BPC_V_RANDOM, 0, 0},
      {"broadcast", S2(3, 4), S2(3, 1), S1(4), 0, 0, 0, BPC_V_RANDOM, 0, 1},
      {"strided", S2(5, 6), S2(5, 6), S2(5, 6), BPC_LAYOUT_STRIDED, BPC_LAYOUT_TRANSPOSED,
       BPC_LAYOUT_STRIDED, BPC_V_RANDOM, 0, 1},
      {"offset", S1(21), S1(21), S1(21), BPC_LAYOUT_OFFSET, BPC_LAYOUT_OFFSET, BPC_LAYOUT_OFFSET,
       BPC_V_RANDOM, 0, 0},
      {"0d", S0(), S0(), S0(), 0, 0, 0, BPC_V_RANDOM, 0, 0},
      {"empty", S2(0, 3), S1(3), S1(3), 0, 0, 0, BPC_V_RANDOM, 0, 0},
      {"attrs", S2(4, 9), S2(4, 9), S2(4, 9), 0, 0, 0, BPC_V_RANDOM, 0, 1},
      {"scalar_weight", S2(4, 9), S2(4, 9), S0(), 0, 0, 0, BPC_V_RANDOM, 1, 1},
  };
  for (int pass = 0; pass < 2; pass++) {
    const uint32_t* dts = pass ? kInt : kFloat;
    size_t nd = pass ? COUNT(kInt) : COUNT(kFloat);
    if (pass && g->op == BP_OP_lerp) break;
    for (size_t k = 0; k < nd; k++) {
      for (size_t j = 0; j < COUNT(specs); j++) {
        if (g->quick && !specs[j].quick) continue;
        if (specs[j].scalar_weight && g->op != BP_OP_lerp) continue;
        if (pass && specs[j].values == BPC_V_SPECIAL) continue;
        int variants = strcmp(specs[j].axis, "attrs") == 0 || specs[j].scalar_weight ? 2 : 1;
        for (int v = 0; v < variants; v++) tern_case(g, dts[k], &specs[j], v);
      }
    }
  }
  /* Type promotion across the three operands. */
  static const struct { uint32_t d0, d1, d2; const char* label; } kMixed[] = {
      {BP_DTYPE_F16, BP_DTYPE_F32, BP_DTYPE_F16, "f16+f32+f16"},
      {BP_DTYPE_I32, BP_DTYPE_F32, BP_DTYPE_I32, "i32+f32+i32"},
      {BP_DTYPE_BF16, BP_DTYPE_BF16, BP_DTYPE_F64, "bf16+bf16+f64"},
  };
  for (size_t k = 0; k < COUNT(kMixed); k++) {
    bpc_case_t* c = bpc_gen_new(g, kMixed[k].label, "promote", 0);
    if (!c) return;
    c->num_inputs = 3;
    bpc_operand_set(&c->in[0], kMixed[k].d0, S2(3, 7), 0, BPC_V_RANDOM, -8, 8);
    bpc_operand_set(&c->in[1], kMixed[k].d1, S2(3, 7), 0, BPC_V_RANDOM, -8, 8);
    bpc_operand_set(&c->in[2], kMixed[k].d2, S2(3, 7), 0, BPC_V_RANDOM, 0, 1);
    bpc_operand_set(&c->out[0], BP_DTYPE_INVALID, S0(), 0, 0, 0, 0);
    c->has_attrs = 1;
    memset(&c->attrs.binary, 0, sizeof c->attrs.binary);
    c->attrs.binary.struct_size = sizeof c->attrs.binary;
    bpc_gen_keep_if_valid(g, c);
  }
}
