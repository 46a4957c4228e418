/* Case generators of the scatter family: scatter, scatter_add,
 * scatter_reduce (every reduction, with and without self), select_scatter
 * and slice_scatter. Index values are drawn in [0, self.size(dim)), so
 * duplicates occur (the scatter checker accepts any of them).
 */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "cases_internal.h"

void bpc_gen_scatter(bpc_gen_t* g);
void bpc_gen_slice_scatter(bpc_gen_t* g);

#define COUNT(a) (sizeof(a) / sizeof((a)[0]))

static const uint32_t kAll[] = {BP_DTYPE_F32, BP_DTYPE_F64, BP_DTYPE_F16, BP_DTYPE_BF16,
                                BP_DTYPE_I8,  BP_DTYPE_U8,  BP_DTYPE_I16, BP_DTYPE_I32,
                                BP_DTYPE_I64, BP_DTYPE_BOOL};

typedef struct sc_spec {
  const char* axis;
  int variant;
  bpc_shape_t self, index, src; /* src rank 0 and size -1: absent (value form) */
  int32_t dim;
  uint32_t lself, lindex, lsrc, lout;
  uint32_t values; /* of self and src */
  int quick;
} sc_spec_t;

static const char* kReduceNames[] = {"none", "sum", "prod", "mean", "amax", "amin"};

static void scatter_case(bpc_gen_t* g, uint32_t d, const sc_spec_t* s, uint32_t reduce,
                         int include_self, int value_form) {
  char axis[48];
  if (g->op == BP_OP_scatter_add) snprintf(axis, sizeof axis, "%s", s->axis);
  else if (g->op == BP_OP_scatter && reduce == BP_SCATTER_NONE)
    snprintf(axis, sizeof axis, "%s%s", s->axis, value_form ? "_value" : "");
  else snprintf(axis, sizeof axis, "%s_%s%s", s->axis, kReduceNames[reduce], include_self ? "" : "_noself");
  bpc_case_t* c = bpc_gen_new(g, bpc_dtype_name(d), axis, s->variant);
  if (!c) return;
  int fl = bpc_dtype_is_float(d);
  double lo = 0, hi = 0;
  uint32_t values = s->values;
  if (values == BPC_V_SPECIAL) {
    values |= BPC_V_NONFINITE;
    lo = fl ? -100 : 0;
    hi = fl ? 100 : 0;
  } else if (reduce == BP_SCATTER_PROD) {
    lo = fl ? -2 : -3; /* short products of small factors */
    hi = fl ? 2 : 3;
    if (d == BP_DTYPE_U8) lo = 0;
  }
  uint32_t rank = s->self.rank ? s->self.rank : 1;
  int64_t dim = s->dim < 0 ? s->dim + (int64_t)rank : s->dim;
  int64_t size = s->self.rank ? s->self.sizes[dim] : 1;
  c->num_inputs = 3;
  bpc_operand_set(&c->in[0], d, s->self, s->lself, values, lo, hi);
  bpc_operand_set(&c->in[1], BP_DTYPE_I64, s->index, s->lindex, BPC_V_RANDOM, 0.0, (double)size - 0.5);
  if (value_form) bpc_operand_set(&c->in[2], BP_DTYPE_INVALID, S0(), 0, 0, 0, 0);
  else bpc_operand_set(&c->in[2], d, s->src, s->lsrc, values, lo, hi);
  bpc_operand_set(&c->out[0], BP_DTYPE_INVALID, S0(), s->lout, 0, 0, 0);
  c->has_attrs = 1;
  bp_scatter_attrs_t* a = &c->attrs.scatter;
  a->struct_size = sizeof *a;
  a->dim = s->dim;
  a->reduce = reduce;
  a->include_self = (uint32_t)include_self;
  if (value_form) a->value = fl ? bpc_sf(-1.5) : d == BP_DTYPE_BOOL ? bpc_sb(1) : bpc_si(7);
}

void bpc_gen_scatter(bpc_gen_t* g) {
  const sc_spec_t basic = {"basic", 0, S2(5, 7), S2(3, 7), S2(4, 8), 0, 0, 0, 0, 0, BPC_V_RANDOM, 1};
  const sc_spec_t axes[] = {
      {"dim1", 0, S2(4, 6), S2(4, 3), S2(4, 5), 1, 0, 0, 0, 0, BPC_V_RANDOM, 1},
      {"neg_dim", 0, S3(3, 4, 5), S3(2, 3, 4), S3(3, 4, 4), -1, 0, 0, 0, 0, BPC_V_RANDOM, 0},
      {"dups", 0, S1(6), S1(40), S1(41), 0, 0, 0, 0, 0, BPC_V_RANDOM, 1},
      {"0d", 0, S0(), S0(), S0(), 0, 0, 0, 0, 0, BPC_V_RANDOM, 0},
      {"empty_index", 0, S2(5, 7), S2(0, 7), S2(4, 8), 0, 0, 0, 0, 0, BPC_V_RANDOM, 0},
      {"empty_self", 0, S2(3, 0), S2(2, 0), S2(2, 0), 1, 0, 0, 0, 0, BPC_V_RANDOM, 0},
      {"strided", 0, S2(6, 5), S2(4, 5), S2(5, 6), 0, BPC_LAYOUT_STRIDED, BPC_LAYOUT_STRIDED,
       BPC_LAYOUT_STRIDED, BPC_LAYOUT_STRIDED, BPC_V_RANDOM, 1},
      {"transposed", 0, S2(7, 6), S2(5, 6), S2(6, 6), 1, BPC_LAYOUT_TRANSPOSED, BPC_LAYOUT_TRANSPOSED,
       BPC_LAYOUT_OFFSET, BPC_LAYOUT_TRANSPOSED, BPC_V_RANDOM, 0},
      {"offset", 0, S3(2, 5, 3), S3(2, 4, 3), S3(2, 4, 3), 1, BPC_LAYOUT_OFFSET, BPC_LAYOUT_OFFSET,
       BPC_LAYOUT_OFFSET, BPC_LAYOUT_OFFSET, BPC_V_RANDOM, 0},
      {"special", 0, S2(8, 6), S2(8, 6), S2(8, 6), 0, 0, 0, 0, 0, BPC_V_SPECIAL, 1},
      {"large", 0, S2(64, 97), S2(200, 97), S2(200, 97), 0, 0, 0, 0, 0, BPC_V_RANDOM, 0},
  };
  if (g->op == BP_OP_scatter_reduce) {
    /* Every mode with and without self on f32 and i32; one mode per other dtype. */
    for (uint32_t r = BP_SCATTER_SUM; r <= BP_SCATTER_AMIN; r++) {
      for (int self_in = 1; self_in >= 0; self_in--) {
        scatter_case(g, BP_DTYPE_F32, &basic, r, self_in, 0);
        if (!g->quick || r == BP_SCATTER_MEAN) scatter_case(g, BP_DTYPE_I32, &basic, r, self_in, 0);
      }
    }
    uint32_t r = BP_SCATTER_SUM;
    for (size_t k = 0; k < COUNT(kAll); k++) {
      if (kAll[k] == BP_DTYPE_F32 || kAll[k] == BP_DTYPE_I32) continue;
      uint32_t rr = kAll[k] == BP_DTYPE_BOOL && r == BP_SCATTER_MEAN ? BP_SCATTER_AMAX : r;
      if (!g->quick || k % 2 == 0) scatter_case(g, kAll[k], &basic, rr, (int)(k & 1), 0);
      r = r == BP_SCATTER_AMIN ? BP_SCATTER_SUM : r + 1;
    }
    for (size_t k = 0; k < COUNT(axes); k++) {
      if (g->quick && !axes[k].quick) continue;
      for (uint32_t m = BP_SCATTER_SUM; m <= BP_SCATTER_AMIN; m++) {
        if (m != BP_SCATTER_MEAN && m != (uint32_t)(BP_SCATTER_SUM + k % 5)) continue;
        scatter_case(g, BP_DTYPE_F32, &axes[k], m, (int)(k & 1), 0);
      }
    }
    scatter_case(g, BP_DTYPE_I8, &axes[2], BP_SCATTER_MEAN, 1, 0); /* wrapping sums, floor */
    scatter_case(g, BP_DTYPE_F16, &axes[2], BP_SCATTER_SUM, 1, 0);
    scatter_case(g, BP_DTYPE_BF16, &axes[2], BP_SCATTER_MEAN, 0, 0);
    return;
  }
  for (size_t k = 0; k < COUNT(kAll); k++) {
    scatter_case(g, kAll[k], &basic, BP_SCATTER_NONE, 1, 0);
    if (g->op == BP_OP_scatter && (!g->quick || k < 2)) scatter_case(g, kAll[k], &basic, BP_SCATTER_NONE, 1, 1);
  }
  for (size_t k = 0; k < COUNT(axes); k++) {
    if (g->quick && !axes[k].quick) continue;
    scatter_case(g, BP_DTYPE_F32, &axes[k], BP_SCATTER_NONE, 1, 0);
    if (!g->quick) scatter_case(g, BP_DTYPE_I64, &axes[k], BP_SCATTER_NONE, 1, 0);
  }
  if (g->op == BP_OP_scatter) { /* the scatter.reduce overload: add and multiply */
    scatter_case(g, BP_DTYPE_F32, &basic, BP_SCATTER_SUM, 1, 0);
    scatter_case(g, BP_DTYPE_I32, &basic, BP_SCATTER_PROD, 1, 0);
    scatter_case(g, BP_DTYPE_F64, &axes[2], BP_SCATTER_PROD, 1, 0);
    scatter_case(g, BP_DTYPE_I16, &axes[2], BP_SCATTER_SUM, 1, 1);
  }
}

/* ---- select_scatter, slice_scatter --------------------------------------------- */
typedef struct sl_spec {
  const char* axis;
  bpc_shape_t self;
  int32_t dim;
  int64_t start, end, step;
  uint32_t lself, lsrc, lout;
  int quick;
} sl_spec_t;

static void slice_case(bpc_gen_t* g, uint32_t d, uint32_t sd, const sl_spec_t* s, int variant) {
  char label[BPC_DTYPE_LABEL_MAX];
  if (sd != d) snprintf(label, sizeof label, "%s<-%s", bpc_dtype_name(d), bpc_dtype_name(sd));
  else snprintf(label, sizeof label, "%s", bpc_dtype_name(d));
  bpc_case_t* c = bpc_gen_new(g, label, s->axis, variant);
  if (!c) return;
  int is_select = g->op == BP_OP_select_scatter;
  int64_t dim = s->dim < 0 ? s->dim + (int64_t)s->self.rank : s->dim;
  int64_t size = s->self.sizes[dim];
  bpc_shape_t src = s->self;
  if (is_select) {
    for (uint32_t k = (uint32_t)dim; k + 1 < src.rank; k++) src.sizes[k] = src.sizes[k + 1];
    src.rank--;
  } else {
    int64_t st = s->start < 0 ? s->start + size : s->start;
    int64_t en = s->end < 0 ? s->end + size : s->end;
    st = st < 0 ? 0 : st > size ? size : st;
    en = en < st ? st : en > size ? size : en;
    src.sizes[dim] = (en - st + s->step - 1) / s->step;
  }
  c->num_inputs = 2;
  bpc_operand_set(&c->in[0], d, s->self, s->lself, BPC_V_RANDOM, 0, 0);
  uint32_t sv = bpc_dtype_is_float(sd) ? BPC_V_SPECIAL | BPC_V_NONFINITE : BPC_V_RANDOM;
  double lo = 0, hi = 0;
  if (sd != d && !bpc_dtype_is_float(d) && bpc_dtype_is_float(sd)) { /* in range of d */
    sv = BPC_V_RANDOM;
    lo = d == BP_DTYPE_U8 || d == BP_DTYPE_BOOL ? 0 : -100;
    hi = 100;
  }
  bpc_operand_set(&c->in[1], sd, src, s->lsrc, sv, lo, hi);
  bpc_operand_set(&c->out[0], BP_DTYPE_INVALID, S0(), s->lout, 0, 0, 0);
  c->has_attrs = 1;
  bp_slice_attrs_t* a = &c->attrs.slice;
  a->struct_size = sizeof *a;
  a->dim = s->dim;
  a->start = s->start;
  a->end = s->end;
  a->step = s->step;
}

void bpc_gen_slice_scatter(bpc_gen_t* g) {
  const int64_t E = INT64_MAX;
  const sl_spec_t sel[] = {
      {"basic", S2(4, 5), 0, 2, E, 1, 0, 0, 0, 1},
      {"neg_index", S2(4, 5), -1, -1, E, 1, 0, 0, 0, 1},
      {"1d", S1(7), 0, 0, E, 1, 0, 0, 0, 0},
      {"3d", S3(3, 4, 5), 1, 3, E, 1, BPC_LAYOUT_TRANSPOSED, BPC_LAYOUT_STRIDED, BPC_LAYOUT_OFFSET, 1},
      {"strided", S3(2, 6, 5), 2, -5, E, 1, BPC_LAYOUT_STRIDED, BPC_LAYOUT_TRANSPOSED, BPC_LAYOUT_STRIDED, 0},
      {"empty", S2(0, 5), 1, 4, E, 1, 0, 0, 0, 0},
  };
  const sl_spec_t sli[] = {
      {"basic", S2(6, 5), 0, 1, 4, 1, 0, 0, 0, 1},
      {"full", S2(6, 5), 1, 0, E, 1, 0, 0, 0, 0},
      {"step", S2(9, 4), 0, 1, E, 3, 0, 0, 0, 1},
      {"negative", S2(8, 5), 0, -6, -1, 2, 0, 0, 0, 0},
      {"clamped", S2(5, 6), 1, -100, 100, 4, 0, 0, 0, 0},
      {"empty_slice", S2(5, 6), 1, 4, 2, 1, 0, 0, 0, 0},
      {"past_end", S2(5, 6), 0, 7, E, 1, 0, 0, 0, 0},
      {"3d", S3(4, 6, 5), -2, 1, 6, 2, BPC_LAYOUT_TRANSPOSED, BPC_LAYOUT_STRIDED, BPC_LAYOUT_OFFSET, 1},
      {"strided", S3(3, 7, 4), 1, 0, 7, 3, BPC_LAYOUT_STRIDED, BPC_LAYOUT_OFFSET, BPC_LAYOUT_STRIDED, 0},
      {"empty", S2(0, 5), 0, 0, E, 1, 0, 0, 0, 0},
  };
  const sl_spec_t* v = g->op == BP_OP_select_scatter ? sel : sli;
  size_t nv = g->op == BP_OP_select_scatter ? COUNT(sel) : COUNT(sli);
  for (size_t k = 0; k < COUNT(kAll); k++) {
    if (g->quick && k % 3 != 0) continue;
    slice_case(g, kAll[k], kAll[k], &v[0], 0);
  }
  for (size_t j = 1; j < nv; j++) {
    if (g->quick && !v[j].quick) continue;
    slice_case(g, BP_DTYPE_F32, BP_DTYPE_F32, &v[j], 0);
    if (!g->quick) slice_case(g, BP_DTYPE_I16, BP_DTYPE_I16, &v[j], 0);
  }
  /* src is converted to self's dtype (copy_ semantics). */
  slice_case(g, BP_DTYPE_F16, BP_DTYPE_F32, &v[0], 1);
  slice_case(g, BP_DTYPE_I32, BP_DTYPE_F64, &v[0], 1);
  slice_case(g, BP_DTYPE_F32, BP_DTYPE_BOOL, &v[0], 1);
  if (!g->quick) slice_case(g, BP_DTYPE_BOOL, BP_DTYPE_I8, &v[0], 1);
}
