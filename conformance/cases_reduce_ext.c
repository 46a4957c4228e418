/* Case generators of the reduce_ext family: max.dim, min.dim, var, cumsum,
 * sort, topk and logsumexp. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "cases_internal.h"

void bpc_gen_reduce_ext(bpc_gen_t* g);

#define COUNT(a) (sizeof(a) / sizeof((a)[0]))

static const uint32_t kFloats[] = {BP_DTYPE_F32, BP_DTYPE_F64, BP_DTYPE_F16, BP_DTYPE_BF16};
static const uint32_t kAll[] = {BP_DTYPE_F32, BP_DTYPE_F64, BP_DTYPE_F16, BP_DTYPE_BF16,
                                BP_DTYPE_I8,  BP_DTYPE_U8,  BP_DTYPE_I16, BP_DTYPE_I32,
                                BP_DTYPE_I64, BP_DTYPE_BOOL};

enum { ALL = -100 }; /* reduce every dim (BP_REDUCE_ALL_DIMS) */

/* Where a row of the table applies: every dtype, or only the "main" ones
 * (f32, f16 and i32; bool where the op takes it), so that the case count
 * stays modest. */
enum { EVERY = 0, MAIN = 1 };
static int is_main(uint32_t d) {
  return d == BP_DTYPE_F32 || d == BP_DTYPE_F16 || d == BP_DTYPE_I32 || d == BP_DTYPE_BOOL;
}

typedef struct spec {
  const char* axis;
  int variant;
  bpc_shape_t s;
  int32_t dim;      /* single-dim ops; ALL for var/logsumexp over everything */
  int ndims;        /* var/logsumexp: 0 = use dim; 2 = dims {dim, dim2} */
  int32_t dim2;
  int keepdim;
  uint32_t lin, lout;
  uint32_t values; /* BPC_V_RANDOM or BPC_V_SPECIAL (plus flags) */
  double lo, hi;   /* lo == hi: the default range */
  int where;       /* EVERY or MAIN */
  int quick;
} spec_t;

/* Value kind and range for dtype d: specials keep inf/NaN within a finite
 * range; integral ranges are exact in every dtype (ties). */
static void values_for(const spec_t* v, uint32_t d, uint32_t* values, double* lo, double* hi) {
  *values = v->values;
  *lo = v->lo;
  *hi = v->hi;
  int fl = bpc_dtype_is_float(d);
  if (d == BP_DTYPE_BOOL) { /* bool: 0/1 only */
    *values = BPC_V_RANDOM;
    *lo = *hi = 0;
    return;
  }
  if ((v->values & 3) == BPC_V_SPECIAL) {
    if (fl) {
      if (*lo == *hi) { *lo = -1e4; *hi = 1e4; }
      *values |= BPC_V_NONFINITE;
    } else {
      *lo = *hi = 0; /* integer specials: the dtype's limits */
    }
  }
  if ((v->values & BPC_V_INTEGRAL) && !fl) *values &= ~(uint32_t)BPC_V_INTEGRAL;
  if (!fl && *lo != *hi) { /* clamp to the dtype's range */
    double ilo, ihi;
    bpc_int_range_of(d, &ilo, &ihi);
    if (*lo < ilo) *lo = ilo;
    if (*hi > ihi) *hi = ihi;
    if (*lo >= *hi) *lo = *hi = 0;
  }
}

static bpc_case_t* new_case(bpc_gen_t* g, const char* label, uint32_t d, const spec_t* v, uint32_t nout) {
  bpc_case_t* c = bpc_gen_new(g, label, v->axis, v->variant);
  if (!c) return NULL;
  uint32_t values;
  double lo, hi;
  values_for(v, d, &values, &lo, &hi);
  c->num_inputs = 1;
  c->num_outputs = nout;
  bpc_operand_set(&c->in[0], d, v->s, v->lin, values, lo, hi);
  for (uint32_t k = 0; k < nout; k++) bpc_operand_set(&c->out[k], BP_DTYPE_INVALID, S0(), v->lout, 0, 0, 0);
  c->has_attrs = 1;
  return c;
}

static void set_reduce(bpc_case_t* c, const spec_t* v, double correction) {
  bp_reduce_attrs_t* a = &c->attrs.reduce;
  a->struct_size = sizeof *a;
  a->correction = correction;
  if (v->dim == ALL) {
    a->flags = BP_REDUCE_ALL_DIMS;
  } else {
    a->num_dims = v->ndims == 2 ? 2 : 1;
    a->dims[0] = v->dim;
    a->dims[1] = v->dim2;
  }
  if (v->keepdim) a->flags |= BP_REDUCE_KEEPDIM;
}

static int skip(const bpc_gen_t* g, const spec_t* v, uint32_t d) {
  return (g->quick && !v->quick) || (v->where == MAIN && !is_main(d));
}

/* ---- max.dim / min.dim ------------------------------------------------------- */
static void gen_max_dim(bpc_gen_t* g) {
  const spec_t v[] = {
      {"dim", 0, S2(6, 7), 0, 0, 0, 0, 0, 0, BPC_V_RANDOM, 0, 0, EVERY, 1},
      {"last_keepdim", 0, S3(4, 5, 6), -1, 0, 0, 1, 0, BPC_LAYOUT_OFFSET, BPC_V_RANDOM, 0, 0, EVERY, 0},
      {"long", 0, S1(1031), 0, 0, 0, 0, 0, 0, BPC_V_RANDOM, 0, 0, EVERY, 0},
      /* pairs of specials per row: 0 and -0, inf and NaN, NaN first or second */
      {"special_rows", 0, S2(24, 2), 1, 0, 0, 0, 0, 0, BPC_V_SPECIAL, 0, 0, EVERY, 1},
      {"special_cols", 0, S2(2, 32), 0, 0, 0, 0, 0, 0, BPC_V_SPECIAL, 0, 0, MAIN, 0},
      {"ties", 0, S2(7, 40), 1, 0, 0, 0, 0, 0, BPC_V_RANDOM | BPC_V_INTEGRAL, -3, 3, EVERY, 1},
      {"strided", 0, S2(9, 13), 1, 0, 0, 0, BPC_LAYOUT_STRIDED, BPC_LAYOUT_STRIDED, BPC_V_RANDOM, 0, 0, MAIN, 0},
      {"transposed", 0, S3(3, 8, 6), 1, 0, 0, 1, BPC_LAYOUT_TRANSPOSED, BPC_LAYOUT_TRANSPOSED, BPC_V_RANDOM, -3, 3, MAIN, 1},
      {"0d", 0, S0(), 0, 0, 0, 0, 0, 0, BPC_V_RANDOM, 0, 0, MAIN, 0},
      {"0d_keepdim", 0, S0(), -1, 0, 0, 1, 0, 0, BPC_V_RANDOM, 0, 0, MAIN, 0},
      {"empty_out", 0, S2(0, 4), 1, 0, 0, 0, 0, 0, BPC_V_RANDOM, 0, 0, MAIN, 0},
      {"len1", 0, S3(2, 1, 5), 1, 0, 0, 0, 0, 0, BPC_V_RANDOM, 0, 0, MAIN, 0},
  };
  for (size_t t = 0; t < COUNT(kAll); t++) {
    for (size_t j = 0; j < COUNT(v); j++) {
      if (skip(g, &v[j], kAll[t])) continue;
      bpc_case_t* c = new_case(g, bpc_dtype_name(kAll[t]), kAll[t], &v[j], 2);
      if (!c) return;
      set_reduce(c, &v[j], 1.0);
    }
  }
}

/* ---- var and logsumexp ------------------------------------------------------- */
static void gen_var_lse(bpc_gen_t* g) {
  int is_var = g->op == BP_OP_var;
  const spec_t v[] = {
      {"all", 17, S1(17), ALL, 0, 0, 0, 0, 0, BPC_V_RANDOM, 0, 0, EVERY, 1},
      {"all", 1031, S1(1031), ALL, 0, 0, 0, 0, 0, BPC_V_RANDOM, 0, 0, EVERY, 0},
      {"all_keepdim", 0, S2(5, 3), ALL, 0, 0, 1, 0, 0, BPC_V_RANDOM, 0, 0, MAIN, 0},
      {"dim", 0, S2(6, 7), 0, 0, 0, 0, 0, 0, BPC_V_RANDOM, 0, 0, EVERY, 1},
      {"dim", 1, S3(4, 5, 6), -1, 0, 0, 1, 0, BPC_LAYOUT_OFFSET, BPC_V_RANDOM, 0, 0, EVERY, 0},
      {"dims", 0, S3(3, 4, 5), 0, 2, 2, 0, 0, 0, BPC_V_RANDOM, 0, 0, MAIN, 0},
      {"dims", 1, S3(3, 4, 5), 2, 2, 0, 1, BPC_LAYOUT_STRIDED, BPC_LAYOUT_STRIDED, BPC_V_RANDOM, 0, 0, MAIN, 1},
      {"transposed", 0, S2(8, 6), 0, 0, 0, 0, BPC_LAYOUT_TRANSPOSED, 0, BPC_V_RANDOM, 0, 0, MAIN, 0},
      {"special_rows", 0, S2(24, 2), 1, 0, 0, 0, 0, 0, BPC_V_SPECIAL, -50, 50, EVERY, 1},
      {"special_cols", 0, S2(2, 32), 0, 0, 0, 0, 0, 0, BPC_V_SPECIAL, -50, 50, MAIN, 0},
      {"empty", 0, S2(0, 4), 0, 0, 0, 0, 0, 0, BPC_V_RANDOM, 0, 0, MAIN, 0},
      {"empty_out", 0, S2(0, 4), 1, 0, 0, 0, 0, 0, BPC_V_RANDOM, 0, 0, MAIN, 0},
      {"0d", 0, S0(), ALL, 0, 0, 0, 0, 0, BPC_V_RANDOM, 0, 0, MAIN, 0},
      /* var: a large mean over a small spread (cancellation); logsumexp:
       * values whose exp overflows unless shifted by the maximum */
      {"offset_values", 0, S2(4, 33), 1, 0, 0, 0, 0, 0, BPC_V_RANDOM, 1000, 1001, EVERY, 0},
  };
  static const uint32_t kLseInts[] = {BP_DTYPE_I32, BP_DTYPE_I64, BP_DTYPE_U8, BP_DTYPE_BOOL};
  for (size_t t = 0; t < COUNT(kAll); t++) {
    uint32_t d = kAll[t];
    int fl = bpc_dtype_is_float(d);
    if (!fl) { /* var: floating only; logsumexp: a few integer dtypes and bool */
      int ok = 0;
      for (size_t q = 0; q < COUNT(kLseInts); q++) ok |= !is_var && kLseInts[q] == d;
      if (!ok) continue;
    }
    for (size_t j = 0; j < COUNT(v); j++) {
      if (skip(g, &v[j], d)) continue;
      if (!fl && (v[j].variant == 1031 || strcmp(v[j].axis, "offset_values") == 0 ||
                  (v[j].values & 3) == BPC_V_SPECIAL)) {
        continue;
      }
      bpc_case_t* c = new_case(g, bpc_dtype_name(d), d, &v[j], 1);
      if (!c) return;
      set_reduce(c, &v[j], 1.0);
    }
  }
  if (!is_var) return;
  /* correction: 0 (population), 2.5, and divisors max(0, n - c) of zero:
   * inf where the squares sum to more than 0, NaN where they are 0 */
  const struct { const char* axis; bpc_shape_t s; double corr; double lo, hi; } cv[] = {
      {"correction_0", S2(5, 9), 0.0, 0, 0},
      {"correction_2.5", S2(5, 9), 2.5, 0, 0},
      {"n1_correction_1", S2(4, 1), 1.0, 0, 0},
      {"n2_correction_3", S2(6, 2), 3.0, -1, 1},
      {"n3_correction_3", S2(4, 3), 3.0, 0, 0},
  };
  for (size_t t = 0; t < COUNT(kFloats); t++) {
    for (size_t j = 0; j < COUNT(cv); j++) {
      if (g->quick && j > 1) continue;
      spec_t s = {cv[j].axis, 0, cv[j].s, 1, 0, 0, 0, 0, 0, BPC_V_RANDOM, cv[j].lo, cv[j].hi, EVERY, 1};
      /* n2: integral values in [-1, 1] so that some rows are constant */
      if (cv[j].lo != cv[j].hi) s.values |= BPC_V_INTEGRAL;
      bpc_case_t* c = new_case(g, bpc_dtype_name(kFloats[t]), kFloats[t], &s, 1);
      if (!c) return;
      set_reduce(c, &s, cv[j].corr);
    }
  }
}

/* ---- cumsum ------------------------------------------------------------------ */
static void gen_cumsum(bpc_gen_t* g) {
  const spec_t v[] = {
      {"len", 17, S1(17), 0, 0, 0, 0, 0, 0, BPC_V_RANDOM, 0, 0, EVERY, 1},
      {"len", 1031, S1(1031), 0, 0, 0, 0, 0, 0, BPC_V_RANDOM, 0, 0, EVERY, 0},
      {"dim0", 0, S2(6, 7), 0, 0, 0, 0, 0, 0, BPC_V_RANDOM, 0, 0, EVERY, 1},
      {"last", 0, S3(4, 5, 6), -1, 0, 0, 0, 0, BPC_LAYOUT_OFFSET, BPC_V_RANDOM, 0, 0, MAIN, 0},
      {"middle", 0, S3(4, 5, 6), 1, 0, 0, 0, BPC_LAYOUT_TRANSPOSED, BPC_LAYOUT_STRIDED, BPC_V_RANDOM, 0, 0, MAIN, 1},
      {"strided", 0, S2(9, 13), 1, 0, 0, 0, BPC_LAYOUT_STRIDED, BPC_LAYOUT_TRANSPOSED, BPC_V_RANDOM, 0, 0, MAIN, 0},
      {"special", 0, S2(4, 16), 1, 0, 0, 0, 0, 0, BPC_V_SPECIAL, 0, 0, EVERY, 1},
      {"0d", 0, S0(), 0, 0, 0, 0, 0, 0, BPC_V_RANDOM, 0, 0, MAIN, 0},
      {"empty", 0, S2(0, 4), 1, 0, 0, 0, 0, 0, BPC_V_RANDOM, 0, 0, MAIN, 0},
      {"empty_dim", 0, S2(3, 0), 1, 0, 0, 0, 0, 0, BPC_V_RANDOM, 0, 0, MAIN, 0},
  };
  for (size_t t = 0; t < COUNT(kAll); t++) {
    for (size_t j = 0; j < COUNT(v); j++) {
      if (skip(g, &v[j], kAll[t])) continue;
      bpc_case_t* c = new_case(g, bpc_dtype_name(kAll[t]), kAll[t], &v[j], 1);
      if (!c) return;
      c->attrs.dim.struct_size = sizeof c->attrs.dim;
      c->attrs.dim.dim = v[j].dim;
    }
  }
  /* attrs.dtype: the input is converted to it first, then summed in it */
  const struct { uint32_t in, out; double lo, hi; } dv[] = {
      {BP_DTYPE_F16, BP_DTYPE_F32, 0, 0},  {BP_DTYPE_BF16, BP_DTYPE_F64, 0, 0},
      {BP_DTYPE_F32, BP_DTYPE_F16, 0, 0},  {BP_DTYPE_I32, BP_DTYPE_F64, 0, 0},
      {BP_DTYPE_F32, BP_DTYPE_I32, -100, 100}, {BP_DTYPE_I64, BP_DTYPE_I16, 0, 0},
      {BP_DTYPE_BOOL, BP_DTYPE_I32, 0, 0}, {BP_DTYPE_U8, BP_DTYPE_I8, 0, 0},
  };
  for (size_t j = 0; j < COUNT(dv); j++) {
    if (g->quick && j > 3) continue;
    char label[BPC_DTYPE_LABEL_MAX];
    snprintf(label, sizeof label, "%s->%s", bpc_dtype_name(dv[j].in), bpc_dtype_name(dv[j].out));
    spec_t s = {"dtype", 0, S2(5, 40), -1, 0, 0, 0, 0, 0, BPC_V_RANDOM, dv[j].lo, dv[j].hi, EVERY, 1};
    bpc_case_t* c = new_case(g, label, dv[j].in, &s, 1);
    if (!c) return;
    c->attrs.dim.struct_size = sizeof c->attrs.dim;
    c->attrs.dim.dim = -1;
    c->attrs.dim.dtype = dv[j].out;
  }
}

/* ---- sort and topk ------------------------------------------------------------- */
static void gen_sort(bpc_gen_t* g) {
  int is_topk = g->op == BP_OP_topk;
  const spec_t v[] = {
      {"len", 17, S1(17), 0, 0, 0, 0, 0, 0, BPC_V_RANDOM, 0, 0, EVERY, 1},
      {"len", 1031, S1(1031), -1, 0, 0, 0, 0, 0, BPC_V_RANDOM, 0, 0, MAIN, 0},
      {"rows", 0, S2(5, 33), -1, 0, 0, 0, 0, BPC_LAYOUT_OFFSET, BPC_V_RANDOM, 0, 0, EVERY, 0},
      {"middle", 0, S3(4, 9, 6), 1, 0, 0, 0, BPC_LAYOUT_TRANSPOSED, BPC_LAYOUT_STRIDED, BPC_V_RANDOM, 0, 0, MAIN, 1},
      {"strided", 0, S2(9, 13), 0, 0, 0, 0, BPC_LAYOUT_STRIDED, BPC_LAYOUT_TRANSPOSED, BPC_V_RANDOM, 0, 0, MAIN, 0},
      /* NaN, +-inf, -0 and +0 (stable among themselves), subnormals */
      {"special", 0, S2(4, 40), 1, 0, 0, 0, 0, 0, BPC_V_SPECIAL, 0, 0, EVERY, 1},
      {"ties", 0, S2(6, 40), -1, 0, 0, 0, 0, 0, BPC_V_RANDOM | BPC_V_INTEGRAL, -3, 3, EVERY, 1},
      {"0d", 0, S0(), 0, 0, 0, 0, 0, 0, BPC_V_RANDOM, 0, 0, MAIN, 0},
      {"empty", 0, S2(0, 5), 1, 0, 0, 0, 0, 0, BPC_V_RANDOM, 0, 0, MAIN, 0},
      {"empty_dim", 0, S2(3, 0), 1, 0, 0, 0, 0, 0, BPC_V_RANDOM, 0, 0, MAIN, 0},
  };
  for (size_t t = 0; t < COUNT(kAll); t++) {
    uint32_t d = kAll[t];
    if (is_topk && d == BP_DTYPE_BOOL) continue; /* not defined in PyTorch */
    for (size_t j = 0; j < COUNT(v); j++) {
      if (skip(g, &v[j], d)) continue;
      int64_t len = v[j].s.rank ? v[j].s.sizes[(v[j].dim + (int32_t)v[j].s.rank) % (int32_t)v[j].s.rank] : 1;
      /* sort: ascending, then descending (variant + 1); topk: k values and
       * orders vary with the row of the table */
      for (int m = 0; m < 2; m++) {
        if (m == 1 && g->quick) continue;
        spec_t s = v[j];
        s.variant = v[j].variant * 10 + m;
        bpc_case_t* c = new_case(g, bpc_dtype_name(d), d, &s, 2);
        if (!c) return;
        if (!is_topk) {
          c->attrs.sort.struct_size = sizeof c->attrs.sort;
          c->attrs.sort.dim = v[j].dim;
          c->attrs.sort.descending = (uint32_t)m;
          c->attrs.sort.stable = (uint32_t)(j & 1);
        } else {
          bp_topk_attrs_t* a = &c->attrs.topk;
          a->struct_size = sizeof *a;
          a->dim = v[j].dim;
          a->largest = m == 0;
          a->sorted = 1;
          int64_t ks[] = {1, len < 5 ? len : 5, len, len / 2};
          a->k = ks[(j + (size_t)m) % 4];
          if (len == 0) a->k = 0;
          if (strcmp(v[j].axis, "rows") == 0 && m == 1) a->sorted = 0;
        }
      }
    }
  }
  if (!is_topk) return;
  /* k = 0 and unsorted output */
  spec_t s = {"k0", 0, S2(3, 7), -1, 0, 0, 0, 0, 0, BPC_V_RANDOM, 0, 0, EVERY, 1};
  bpc_case_t* c = new_case(g, "f32", BP_DTYPE_F32, &s, 2);
  if (!c) return;
  c->attrs.topk = (bp_topk_attrs_t){.struct_size = sizeof(bp_topk_attrs_t), .dim = -1, .k = 0, .largest = 1, .sorted = 1};
  s.axis = "unsorted";
  s.values = BPC_V_RANDOM | BPC_V_INTEGRAL;
  s.lo = -3;
  s.hi = 3;
  c = new_case(g, "f32", BP_DTYPE_F32, &s, 2);
  if (!c) return;
  c->attrs.topk = (bp_topk_attrs_t){.struct_size = sizeof(bp_topk_attrs_t), .dim = -1, .k = 4, .largest = 0, .sorted = 0};
}

void bpc_gen_reduce_ext(bpc_gen_t* g) {
  switch (g->op) {
    case BP_OP_max_dim: case BP_OP_min_dim: gen_max_dim(g); break;
    case BP_OP_var: case BP_OP_logsumexp: gen_var_lse(g); break;
    case BP_OP_cumsum: gen_cumsum(g); break;
    case BP_OP_sort: case BP_OP_topk: gen_sort(g); break;
    default: break;
  }
}
