/* Case generators of the random family: rand, randn, randperm and dropout.
 * Sizes of 4096 and more carry the statistical checks; small, empty and
 * 0-d outputs check ranges and shapes; strided, transposed and offset
 * outputs check that elements land where they belong. Seeds and offsets
 * are fixed per case.
 */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "cases_internal.h"

void bpc_gen_random(bpc_gen_t* g);

#define COUNT(a) (sizeof(a) / sizeof((a)[0]))

static const uint32_t kFloats[] = {BP_DTYPE_F32, BP_DTYPE_F64, BP_DTYPE_F16, BP_DTYPE_BF16};

typedef struct rnd_spec {
  const char* axis;
  bpc_shape_t s;
  uint32_t layout; /* of the output (dropout: of the input too) */
  uint64_t seed, offset;
  double p;
  uint32_t train;
  int quick;
} rnd_spec_t;

static bpc_case_t* random_case(bpc_gen_t* g, uint32_t d, const rnd_spec_t* s, int variant) {
  bpc_case_t* c = bpc_gen_new(g, bpc_dtype_name(d), s->axis, variant);
  if (!c) return NULL;
  c->has_attrs = 1;
  bp_random_attrs_t* a = &c->attrs.random;
  a->struct_size = sizeof *a;
  a->seed = s->seed;
  a->offset = s->offset;
  a->p = s->p;
  a->train = s->train;
  if (g->op == BP_OP_dropout) {
    c->num_inputs = 1;
    c->num_outputs = 2;
    uint32_t values = variant == 1 ? BPC_V_SPECIAL | BPC_V_NONFINITE : BPC_V_RANDOM;
    bpc_operand_set(&c->in[0], d, s->s, s->layout, values, variant == 1 ? -1e3 : 0, variant == 1 ? 1e3 : 0);
    bpc_operand_set(&c->out[0], BP_DTYPE_INVALID, S0(), s->layout, 0, 0, 0);
    bpc_operand_set(&c->out[1], BP_DTYPE_INVALID, S0(), s->layout == BPC_LAYOUT_TRANSPOSED ? 0 : s->layout, 0, 0, 0);
  } else {
    c->num_inputs = 0;
    bpc_operand_set(&c->out[0], d, s->s, s->layout, 0, 0, 0);
  }
  return c;
}

void bpc_gen_random(bpc_gen_t* g) {
  const uint32_t T = BPC_LAYOUT_TRANSPOSED, ST = BPC_LAYOUT_STRIDED, OF = BPC_LAYOUT_OFFSET;
  if (g->op == BP_OP_randperm) {
    static const uint32_t kDt[] = {BP_DTYPE_I64, BP_DTYPE_I32, BP_DTYPE_I16, BP_DTYPE_I8,
                                   BP_DTYPE_U8,  BP_DTYPE_F32, BP_DTYPE_F64, BP_DTYPE_F16,
                                   BP_DTYPE_BF16};
    for (size_t k = 0; k < COUNT(kDt); k++) {
      int64_t n = kDt[k] == BP_DTYPE_I8 ? 128 : kDt[k] == BP_DTYPE_U8 || kDt[k] == BP_DTYPE_BF16 ? 256
                  : kDt[k] == BP_DTYPE_F16 ? 2048 : 5000;
      rnd_spec_t s = {"n", S1(n), 0, 11 + k, 0, 0, 1, 1};
      if (!g->quick || k < 3) random_case(g, kDt[k], &s, 0);
    }
    const rnd_spec_t v[] = {
        {"empty", S1(0), 0, 1, 0, 0, 1, 0}, {"one", S1(1), 0, 2, 0, 0, 1, 0},
        {"two", S1(2), 0, 3, 5, 0, 1, 0},   {"small", S1(33), OF, 4, 0, 0, 1, 1},
        {"strided", S1(1000), ST, 5, 77, 0, 1, 1}, {"large", S1(100000), 0, 6, 0, 0, 1, 0},
    };
    for (size_t k = 0; k < COUNT(v); k++) {
      if (g->quick && !v[k].quick) continue;
      random_case(g, BP_DTYPE_I64, &v[k], 0);
    }
    return;
  }
  if (g->op == BP_OP_dropout) {
    const rnd_spec_t v[] = {
        {"half", S1(4096), 0, 1, 0, 0.5, 1, 1},
        {"p0.1", S2(64, 65), T, 2, 3, 0.1, 1, 1},
        {"p0.9", S2(70, 64), ST, 3, 0, 0.9, 1, 0},
        {"p0", S1(2000), 0, 4, 0, 0.0, 1, 0},
        {"p1", S1(2000), OF, 5, 0, 1.0, 1, 0},
        {"eval", S2(40, 50), ST, 6, 0, 0.5, 0, 1},
        {"0d", S0(), 0, 7, 0, 0.5, 1, 0},
        {"empty", S2(0, 3), 0, 8, 0, 0.5, 1, 0},
        {"odd", S3(3, 5, 7), OF, 9, 1, 0.3, 1, 0},
    };
    for (size_t t = 0; t < COUNT(kFloats); t++) {
      for (size_t k = 0; k < COUNT(v); k++) {
        if (g->quick && !v[k].quick) continue;
        if (t > 0 && k > 1 && k != 5) continue;
        random_case(g, kFloats[t], &v[k], 0);
      }
      random_case(g, kFloats[t], &v[0], 1); /* specials: inf and NaN through the mask */
    }
    return;
  }
  const rnd_spec_t v[] = {
      {"stats", S1(4096), 0, 1, 0, 0, 1, 1},
      {"stats_offset", S1(5003), 0, 1, 1024, 0, 1, 0},
      {"other_seed", S2(80, 81), T, 0xdeadbeefcafeULL, 7, 0, 1, 1},
      {"strided", S2(65, 66), ST, 3, 0, 0, 1, 0},
      {"offset", S3(9, 10, 11), OF, 4, 2, 0, 1, 0},
      {"odd", S1(7), 0, 5, 0, 0, 1, 0},
      {"0d", S0(), 0, 6, 0, 0, 1, 0},
      {"empty", S2(0, 5), 0, 7, 0, 0, 1, 0},
  };
  for (size_t t = 0; t < COUNT(kFloats); t++) {
    for (size_t k = 0; k < COUNT(v); k++) {
      if (g->quick && !v[k].quick) continue;
      if (t > 0 && k > 2) continue;
      random_case(g, kFloats[t], &v[k], 0);
    }
  }
}
