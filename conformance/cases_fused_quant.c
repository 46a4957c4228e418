/* Case generators of the fused quantizations (rms_norm_quant,
 * add_rms_norm_quant, swiglu_quant).
 *
 * Every input dtype (f32, f64, f16, bf16) with i8, float8_e4m3fn and
 * float8_e5m2 codes; static scales that push |y / scale| past the code
 * range (saturation) and the same without saturation (fp8 NaN / inf);
 * dynamic per-token scales, with scale_ub clamping amax; with and without
 * a weight, an f32 weight for half inputs, an explicit eps; odd row
 * lengths, 3-d inputs, one long row, no rows; special values (NaN, +-inf,
 * zeros) through dynamic scales.
 */
#include <stdio.h>
#include <string.h>

#include "cases_internal.h"

#define COUNT(a) (sizeof(a) / sizeof((a)[0]))

void bpc_gen_fused_quant(bpc_gen_t* g);

static const uint32_t kFloats[] = {BP_DTYPE_F32, BP_DTYPE_F64, BP_DTYPE_F16, BP_DTYPE_BF16};
static const uint32_t kCodes[] = {BP_DTYPE_I8, BP_DTYPE_F8E4M3FN, BP_DTYPE_F8E5M2};

static const char* code_name(uint32_t q) {
  return q == BP_DTYPE_I8 ? "i8" : q == BP_DTYPE_F8E4M3FN ? "e4m3fn" : "e5m2";
}
static double code_max(uint32_t q) {
  return q == BP_DTYPE_I8 ? 127.0 : q == BP_DTYPE_F8E4M3FN ? 448.0 : 57344.0;
}

typedef struct fq_spec {
  const char* axis;
  bpc_shape_t x;       /* input shape (swiglu: [.., 2h]) */
  int stat;            /* static scale */
  int weight;          /* 0 none, 1 input dtype, 2 f32 */
  uint32_t flags;
  double scale_ub, eps;
  uint32_t values;
  int quick;
} fq_spec_t;

static void fq_case(bpc_gen_t* g, uint32_t dt, uint32_t q, const fq_spec_t* sp) {
  int add = g->op == BP_OP_add_rms_norm_quant, glu = g->op == BP_OP_swiglu_quant;
  char label[48];
  snprintf(label, sizeof label, "%s->%s", bpc_dtype_name(dt), code_name(q));
  bpc_case_t* c = bpc_gen_new(g, label, sp->axis, 0);
  if (!c) return;
  uint32_t wi = add ? 2 : 1, si = glu ? 1 : add ? 3 : 2;
  c->num_inputs = glu ? 2 : add ? 4 : 3;
  c->num_outputs = add ? 3 : 2;
  /* norms: |y| <= about 1.7 (uniform rows, weights near 1); swiglu over
   * [-4, 4]: |y| <= about 16 */
  double x = glu ? 4.0 : 3.0, ymax = glu ? 16.0 : 1.8;
  if (sp->values == BPC_V_SPECIAL) bpc_operand_set(&c->in[0], dt, sp->x, 0, BPC_V_SPECIAL | BPC_V_NONFINITE, -1e4, 1e4);
  else bpc_operand_set(&c->in[0], dt, sp->x, 0, BPC_V_RANDOM, -x, x);
  if (add) bpc_operand_set(&c->in[1], dt, sp->x, 0, BPC_V_RANDOM, -x, x);
  if (!glu) {
    if (sp->weight) bpc_operand_set(&c->in[wi], sp->weight == 2 ? BP_DTYPE_F32 : dt, S1(sp->x.sizes[sp->x.rank - 1]), 0, BPC_V_RANDOM, 0.5, 1.5);
    else bpc_operand_set(&c->in[wi], BP_DTYPE_INVALID, S0(), 0, 0, 0, 0);
  }
  /* a static scale that sends the largest |y| to about 1.3 qmax */
  double s = ymax / (code_max(q) * 1.3);
  if (sp->stat) bpc_operand_set(&c->in[si], BP_DTYPE_F32, S1(1), 0, BPC_V_RANDOM, s, s * 1.2);
  else bpc_operand_set(&c->in[si], BP_DTYPE_INVALID, S0(), 0, 0, 0, 0);
  for (uint32_t k = 0; k < c->num_outputs; k++) bpc_operand_set(&c->out[k], BP_DTYPE_INVALID, S0(), 0, 0, 0, 0);
  c->has_attrs = 1;
  bp_fused_quant_attrs_t* a = &c->attrs.fused_quant;
  memset(a, 0, sizeof *a);
  a->struct_size = sizeof *a;
  a->qdtype = q;
  a->flags = sp->flags;
  a->scale_ub = sp->scale_ub;
  a->eps = glu ? 0.0 : sp->eps;
}

void bpc_gen_fused_quant(bpc_gen_t* g) {
  int glu = g->op == BP_OP_swiglu_quant;
  const fq_spec_t specs[] = {
      {"static", S2(7, glu ? 96 : 64), 1, 1, 0, 0, 0, BPC_V_RANDOM, 1},
      {"dynamic", S2(7, glu ? 96 : 64), 0, 1, 0, 0, 0, BPC_V_RANDOM, 1},
      {"static_no_saturate", S2(4, glu ? 34 : 17), 1, 1, BP_QUANTIZE_NO_SATURATE, 0, 0, BPC_V_RANDOM, 0},
      {"dynamic_3d_odd", S3(2, 3, glu ? 66 : 33), 0, 0, 0, 0, 1e-6, BPC_V_RANDOM, 0},
      {"dynamic_f32_weight", S2(5, glu ? 40 : 20), 0, 2, 0, 0, 0, BPC_V_RANDOM, 0},
      {"dynamic_scale_ub", S2(6, glu ? 48 : 24), 0, 1, 0, glu ? 4.0 : 0.5, 0, BPC_V_RANDOM, 0},
      {"long_row", S2(2, glu ? 8192 : 4096), 0, 1, 0, 0, 0, BPC_V_RANDOM, 0},
      {"special", S2(8, glu ? 32 : 16), 0, 1, 0, 0, 0, BPC_V_SPECIAL, 0},
      {"no_rows", S2(0, glu ? 16 : 8), 0, 1, 0, 0, 0, BPC_V_RANDOM, 0},
  };
  for (size_t t = 0; t < COUNT(kFloats); t++)
    for (size_t k = 0; k < COUNT(kCodes); k++)
      for (size_t i = 0; i < COUNT(specs); i++) {
        if (g->quick && !specs[i].quick) continue;
        /* an f32 weight is the mixed-precision form of half inputs only */
        if (specs[i].weight == 2 && kFloats[t] != BP_DTYPE_F16 && kFloats[t] != BP_DTYPE_BF16) continue;
        fq_case(g, kFloats[t], kCodes[k], &specs[i]);
      }
}
