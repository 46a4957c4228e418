/* Case generators of the per-token-group quantizations
 * (reference/ref_group_quant.c): every input dtype x code dtype (i8,
 * float8_e4m3fn, float8_e5m2) over DeepSeek's groups of 128, small odd
 * groups (24 of 72, 1), column-major scales, UE8M0 scales, both together,
 * a larger eps, rows of zeros (the eps floor), 3-d inputs, no rows, and
 * for per_token_group_quant special values (NaN / inf groups, subnormals,
 * the dtype's limits). rms_norm_group_quant with and without a weight (f32
 * for half inputs) and an explicit norm eps; swiglu_group_quant over
 * [gate | up] rows.
 */
#include <stdio.h>
#include <string.h>

#include "cases_internal.h"

#define COUNT(a) (sizeof(a) / sizeof((a)[0]))

void bpc_gen_group_quant(bpc_gen_t* g);

static const uint32_t kFloats[] = {BP_DTYPE_F32, BP_DTYPE_F64, BP_DTYPE_F16, BP_DTYPE_BF16};
static const uint32_t kCodes[] = {BP_DTYPE_F8E4M3FN, BP_DTYPE_I8, BP_DTYPE_F8E5M2};

void bpc_gen_group_quant(bpc_gen_t* g) {
  enum { CM = BP_GROUP_QUANT_COLUMN_MAJOR, UE = BP_GROUP_QUANT_SCALE_UE8M0 };
  static const struct {
    const char* axis;
    bpc_shape_t s; /* the quantized row's shape (swiglu: its input has twice the last dim) */
    uint32_t G, flags;
    double eps, lo, hi;
    uint32_t values;
    int weight, quick;
  } specs[] = {
      {"g128", {2, {7, 256}}, 128, 0, 0.0, -6, 6, BPC_V_RANDOM, 1, 1},
      {"g24_odd", {2, {5, 72}}, 24, 0, 0.0, -3, 3, BPC_V_RANDOM, 0, 0},
      {"col_major", {2, {9, 128}}, 32, CM, 0.0, -20, 20, BPC_V_RANDOM, 1, 1},
      {"ue8m0", {2, {6, 256}}, 128, UE, 0.0, -5, 5, BPC_V_RANDOM, 0, 1},
      {"col_major_ue8m0", {3, {2, 3, 64}}, 16, CM | UE, 0.0, -2, 2, BPC_V_RANDOM, 1, 0},
      {"g1", {2, {3, 10}}, 1, 0, 0.0, -1, 1, BPC_V_RANDOM, 0, 0},
      {"zeros_eps", {2, {4, 64}}, 32, 0, 1e-3, 0, 0.4, BPC_V_RANDOM | BPC_V_INTEGRAL, 0, 0},
      {"special", {2, {6, 48}}, 8, 0, 0.0, 0, 0, BPC_V_SPECIAL | BPC_V_NONFINITE, 0, 1},
      {"no_rows", {2, {0, 64}}, 32, CM, 0.0, -1, 1, BPC_V_RANDOM, 0, 0},
  };
  int norm = g->op == BP_OP_rms_norm_group_quant, glu = g->op == BP_OP_swiglu_group_quant;
  for (size_t t = 0; t < COUNT(kFloats); t++) {
    for (size_t q = 0; q < COUNT(kCodes); q++) {
      for (size_t k = 0; k < COUNT(specs); k++) {
        if (g->quick && !specs[k].quick) continue;
        if (q > 0 && !specs[k].quick) continue; /* the other code dtypes: the main cases */
        if (specs[k].values != BPC_V_RANDOM && g->op != BP_OP_per_token_group_quant &&
            !(specs[k].values & BPC_V_INTEGRAL))
          continue; /* special values: through the plain quantizer only */
        char label[BPC_DTYPE_LABEL_MAX];
        snprintf(label, sizeof label, "%s->%s", bpc_dtype_name(kFloats[t]), bpc_dtype_name(kCodes[q]));
        bpc_case_t* c = bpc_gen_new(g, label, specs[k].axis, 0);
        if (!c) return;
        bpc_shape_t s = specs[k].s;
        if (glu) s.sizes[s.rank - 1] *= 2;
        c->num_inputs = norm ? 2 : 1;
        c->num_outputs = 2;
        bpc_operand_set(&c->in[0], kFloats[t], s, 0, specs[k].values, specs[k].lo, specs[k].hi);
        if (norm) {
          uint32_t wd = kFloats[t] == BP_DTYPE_F16 || kFloats[t] == BP_DTYPE_BF16 ? BP_DTYPE_F32 : kFloats[t];
          if (specs[k].weight) bpc_operand_set(&c->in[1], wd, S1(s.sizes[s.rank - 1]), 0, BPC_V_RANDOM, -2, 2);
          else bpc_operand_set(&c->in[1], BP_DTYPE_INVALID, S0(), 0, 0, 0, 0);
        }
        for (int o = 0; o < 2; o++) bpc_operand_set(&c->out[o], BP_DTYPE_INVALID, S0(), 0, 0, 0, 0);
        c->has_attrs = 1;
        bp_group_quant_attrs_t* a = &c->attrs.group_quant;
        memset(a, 0, sizeof *a);
        a->struct_size = sizeof *a;
        a->qdtype = kCodes[q];
        a->group_size = specs[k].G;
        a->flags = specs[k].flags;
        a->eps = specs[k].eps;
        if (norm && k == 2) a->norm_eps = 1e-5;
      }
    }
  }
}
