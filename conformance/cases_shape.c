/* Case generators of the shape family: pad (every mode, 1-3 padded dims,
 * negative pads), flip and repeat, over every dtype, special values, empty
 * and 0-d tensors and non-contiguous inputs and outputs.
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "cases_internal.h"

void bpc_gen_shape(bpc_gen_t* g);

#define COUNT(a) (sizeof(a) / sizeof((a)[0]))

static const uint32_t kAll[] = {BP_DTYPE_F32, BP_DTYPE_F64, BP_DTYPE_F16, BP_DTYPE_BF16,
                                BP_DTYPE_I8,  BP_DTYPE_U8,  BP_DTYPE_I16, BP_DTYPE_I32,
                                BP_DTYPE_I64, BP_DTYPE_BOOL};

typedef struct shp_spec {
  const char* axis;
  bpc_shape_t s;
  uint32_t mode;   /* pad mode */
  uint32_t n;      /* pads or dims */
  int64_t v[2 * BP_MAX_RANK];
  uint32_t lin, lout;
  int quick;
} shp_spec_t;

static void shape_case(bpc_gen_t* g, uint32_t d, const shp_spec_t* s, int variant) {
  static const char* const modes[] = {"constant", "reflect", "replicate", "circular"};
  char axis[48];
  if (g->op == BP_OP_pad) snprintf(axis, sizeof axis, "%s_%s", modes[s->mode], s->axis);
  else snprintf(axis, sizeof axis, "%s", s->axis);
  bpc_case_t* c = bpc_gen_new(g, bpc_dtype_name(d), axis, variant);
  if (!c) return;
  int fl = bpc_dtype_is_float(d);
  c->num_inputs = 1;
  /* Specials in floats: NaN, inf and -0 must move unchanged. */
  bpc_operand_set(&c->in[0], d, s->s, s->lin, fl ? BPC_V_SPECIAL : BPC_V_RANDOM, 0, 0);
  bpc_operand_set(&c->out[0], BP_DTYPE_INVALID, S0(), s->lout, 0, 0, 0);
  c->has_attrs = 1;
  if (g->op == BP_OP_pad) {
    bp_pad_attrs_t* a = &c->attrs.pad;
    a->struct_size = sizeof *a;
    a->mode = s->mode;
    a->num_pads = s->n;
    memcpy(a->pads, s->v, sizeof a->pads);
    if (s->mode == BP_PAD_CONSTANT) {
      if (variant == 1) a->value = fl ? bpc_sf(NAN) : bpc_si(0);
      else a->value = fl ? bpc_sf(-2.5) : d == BP_DTYPE_BOOL ? bpc_sb(1) : bpc_si(5);
    }
  } else {
    bp_dims_attrs_t* a = &c->attrs.dims;
    a->struct_size = sizeof *a;
    a->num_dims = s->n;
    memcpy(a->dims, s->v, sizeof(int64_t) * BP_MAX_RANK);
  }
}

static void gen_list(bpc_gen_t* g, const shp_spec_t* v, size_t n) {
  for (size_t k = 0; k < COUNT(kAll); k++) {
    if (g->quick && k % 2) continue;
    shape_case(g, kAll[k], &v[0], 0);
  }
  for (size_t j = 1; j < n; j++) {
    if (g->quick && !v[j].quick) continue;
    shape_case(g, j % 3 == 2 ? BP_DTYPE_I32 : BP_DTYPE_F32, &v[j], 0);
    if (!g->quick && j % 4 == 1) shape_case(g, BP_DTYPE_BF16, &v[j], 0);
  }
}

void bpc_gen_shape(bpc_gen_t* g) {
  const uint32_t C = BP_PAD_CONSTANT, RF = BP_PAD_REFLECT, RP = BP_PAD_REPLICATE, CI = BP_PAD_CIRCULAR;
  const uint32_t T = BPC_LAYOUT_TRANSPOSED, ST = BPC_LAYOUT_STRIDED, OF = BPC_LAYOUT_OFFSET;
  if (g->op == BP_OP_pad) {
    const shp_spec_t v[] = {
        {"2d", S2(3, 5), C, 4, {1, 2, 2, 0}, 0, 0, 1},
        {"1d", S1(7), C, 2, {2, 3}, 0, 0, 0},
        {"crop", S2(3, 5), C, 4, {1, -2, -1, 0}, 0, 0, 1},
        {"crop_empty", S2(3, 5), C, 2, {-3, -2}, 0, 0, 0},
        {"3d", S3(2, 3, 4), C, 6, {1, 0, 0, 2, 1, 1}, T, ST, 1},
        {"leading", S4(2, 3, 2, 3), C, 2, {0, 3}, ST, OF, 0},
        {"zero", S2(3, 5), C, 4, {0, 0, 0, 0}, OF, T, 0},
        {"empty", S2(0, 4), C, 4, {1, 1, 2, 0}, 0, 0, 0},
        {"0d", S0(), C, 0, {0}, 0, 0, 0},
        {"1d", S2(3, 6), RF, 2, {2, 5}, 0, 0, 1},
        {"2d", S3(2, 4, 5), RF, 4, {3, 1, 2, 3}, T, ST, 1},
        {"3d", S4(2, 3, 4, 5), RF, 6, {4, 1, 0, 3, 2, 1}, OF, 0, 0},
        {"batched", S4(2, 2, 4, 5), RF, 4, {1, 4, 0, 3}, 0, 0, 0},
        {"negative", S2(3, 6), RF, 2, {-2, 4}, 0, 0, 0},
        {"1d", S2(3, 6), RP, 2, {3, 7}, 0, 0, 1},
        {"2d", S3(2, 4, 5), RP, 4, {6, 0, 1, 9}, ST, T, 1},
        {"3d", S4(1, 3, 2, 4), RP, 6, {1, 2, 3, 1, 0, 2}, 0, OF, 0},
        {"single", S3(2, 1, 1), RP, 4, {2, 2, 1, 3}, 0, 0, 0},
        {"negative", S2(3, 6), RP, 2, {2, -3}, 0, 0, 0},
        {"1d", S2(3, 6), CI, 2, {6, 2}, 0, 0, 1},
        {"2d", S3(2, 4, 5), CI, 4, {3, 5, 4, 1}, T, ST, 1},
        {"3d", S4(2, 3, 4, 5), CI, 6, {1, 2, 0, 4, 3, 0}, 0, 0, 0},
        {"negative", S2(3, 7), CI, 2, {-2, 3}, 0, 0, 0},
    };
    gen_list(g, v, COUNT(v));
    /* NaN / zero pad values, and specials moving through every mode. */
    shape_case(g, BP_DTYPE_F32, &v[0], 1);
    shape_case(g, BP_DTYPE_F16, &v[0], 1);
    shape_case(g, BP_DTYPE_I64, &v[2], 1);
    return;
  }
  if (g->op == BP_OP_flip) {
    const shp_spec_t v[] = {
        {"dim0", S2(5, 7), 0, 1, {0}, 0, 0, 1},
        {"dim1", S2(5, 7), 0, 1, {1}, 0, 0, 1},
        {"both", S2(5, 7), 0, 2, {1, 0}, T, 0, 1},
        {"neg", S3(3, 4, 5), 0, 2, {-1, -3}, ST, T, 1},
        {"none", S2(4, 3), 0, 0, {0}, 0, OF, 0},
        {"middle", S4(2, 3, 4, 5), 0, 1, {2}, OF, ST, 0},
        {"1d", S1(1031), 0, 1, {0}, 0, 0, 0},
        {"0d", S0(), 0, 1, {0}, 0, 0, 0},
        {"empty", S2(0, 3), 0, 1, {0}, 0, 0, 0},
        {"large", S2(130, 257), 0, 2, {0, 1}, 0, 0, 0},
    };
    gen_list(g, v, COUNT(v));
    return;
  }
  const shp_spec_t v[] = {
      {"basic", S2(3, 4), 0, 2, {2, 3}, 0, 0, 1},
      {"ones", S2(3, 4), 0, 2, {1, 1}, OF, 0, 0},
      {"leading", S2(4, 5), 0, 3, {2, 1, 3}, T, 0, 1},
      {"leading2", S2(2, 3), 0, 4, {2, 3, 1, 2}, 0, ST, 1},
      {"zero", S2(3, 4), 0, 2, {0, 2}, 0, 0, 0},
      {"0d", S0(), 0, 2, {3, 2}, 0, 0, 0},
      {"0d_none", S0(), 0, 0, {0}, 0, 0, 0},
      {"1d", S1(5), 0, 1, {4}, ST, OF, 0},
      {"empty", S2(0, 3), 0, 2, {2, 2}, 0, 0, 0},
      {"3d", S3(2, 3, 4), 0, 3, {2, 1, 3}, ST, T, 0},
      {"large", S2(33, 65), 0, 2, {3, 9}, 0, 0, 0},
  };
  gen_list(g, v, COUNT(v));
}
