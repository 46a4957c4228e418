/* Case generators of reductions (sum, mean, prod, any, amax, amin, argmax,
 * argmin), softmax, log_softmax and matmul (mm, bmm, addmm). */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "cases_internal.h"

#define COUNT(a) (sizeof(a) / sizeof((a)[0]))

static const uint32_t kFloats[] = {BP_DTYPE_F32, BP_DTYPE_F64, BP_DTYPE_F16, BP_DTYPE_BF16};
static const uint32_t kNumeric[] = {BP_DTYPE_F32, BP_DTYPE_F64, BP_DTYPE_F16, BP_DTYPE_BF16,
                                    BP_DTYPE_I8,  BP_DTYPE_U8,  BP_DTYPE_I16, BP_DTYPE_I32,
                                    BP_DTYPE_I64, BP_DTYPE_BOOL};

enum { ALL = -100 }; /* marker: reduce all dims (BP_REDUCE_ALL_DIMS) */

typedef struct red_spec {
  const char* axis;
  int variant;
  bpc_shape_t s;
  int ndims;
  int32_t dims[3];
  int keepdim;
  uint32_t lin, lout;
  uint32_t values;
  int quick;
} red_spec_t;

/* What an op's semantics allow (docs/semantics.md, "Reductions"). */
static int is_arg_op(uint32_t op) { return op == BP_OP_argmax || op == BP_OP_argmin; }
/* An identity (0, 1, false): reducing an empty dim is defined. */
static int has_identity(uint32_t op) {
  return op == BP_OP_sum || op == BP_OP_mean || op == BP_OP_prod || op == BP_OP_any;
}
/* attrs.dtype sets the accumulation and output dtype. */
static int takes_dtype(uint32_t op) { return op == BP_OP_sum || op == BP_OP_mean || op == BP_OP_prod; }

/* Value kind and range of a reduction's input. */
static uint32_t reduce_values(const bpc_gen_t* g, uint32_t d, const red_spec_t* r, uint32_t acc_dtype,
                              double* lo, double* hi) {
  uint32_t values = r->values;
  int fl = bpc_dtype_is_float(d);
  *lo = *hi = 0.0;
  if (fl) {
    if (values == BPC_V_SPECIAL) { /* no near-overflow values: accumulation order would matter */
      *lo = -1e4; *hi = 1e4; values |= BPC_V_NONFINITE;
    }
  } else if (is_arg_op(g->op) && d != BP_DTYPE_BOOL) {
    *lo = -3; *hi = 3; /* many ties */
  }
  if (is_arg_op(g->op) && fl && values == BPC_V_RANDOM && r->variant == 1) {
    *lo = -2; *hi = 2; /* ties after rounding in narrow dtypes */
  }
  if (g->op == BP_OP_prod && values == BPC_V_RANDOM) {
    int64_t n = 1; /* factors per output element */
    for (uint32_t k = 0; k < r->s.rank; k++) {
      int reduced = r->ndims == ALL;
      for (int j = 0; j < r->ndims && !reduced; j++) {
        reduced = (uint32_t)((r->dims[j] + (int32_t)r->s.rank) % (int32_t)r->s.rank) == k;
      }
      if (reduced) n *= r->s.sizes[k];
    }
    if (fl && n > 64) { /* long products: factors with E[log x] ~ 0 stay in range */
      *lo = 0.6; *hi = 1.46;
    } else if (fl) {
      *lo = -2; *hi = 2;
    } else if (acc_dtype && bpc_dtype_is_float(acc_dtype)) {
      *lo = -2; *hi = 2; values |= BPC_V_NONZERO; /* +-2^k: exact, no overflow */
    }
  }
  if (g->op == BP_OP_any) values |= BPC_V_SPARSE; /* all-zero rows occur */
  return values;
}

static void reduce_case(bpc_gen_t* g, uint32_t d, const red_spec_t* r, uint32_t acc_dtype) {
  char label[BPC_DTYPE_LABEL_MAX];
  if (acc_dtype) snprintf(label, sizeof label, "%s->%s", bpc_dtype_name(d), bpc_dtype_name(acc_dtype));
  else snprintf(label, sizeof label, "%s", bpc_dtype_name(d));
  bpc_case_t* c = bpc_gen_new(g, label, r->axis, r->variant);
  if (!c) return;
  c->num_inputs = 1;
  double lo, hi;
  uint32_t values = reduce_values(g, d, r, acc_dtype, &lo, &hi);
  bpc_operand_set(&c->in[0], d, r->s, r->lin, values, lo, hi);
  bpc_operand_set(&c->out[0], BP_DTYPE_INVALID, S0(), r->lout, 0, 0, 0);
  c->has_attrs = 1;
  bp_reduce_attrs_t* a = &c->attrs.reduce;
  a->struct_size = sizeof *a;
  a->correction = 1.0;
  a->dtype = acc_dtype;
  if (r->ndims == ALL) {
    a->flags = BP_REDUCE_ALL_DIMS;
  } else {
    a->num_dims = r->ndims;
    for (int k = 0; k < r->ndims; k++) a->dims[k] = r->dims[k];
  }
  if (r->keepdim) a->flags |= BP_REDUCE_KEEPDIM;
}

static void gen_reduce(bpc_gen_t* g) {
  int is_arg = is_arg_op(g->op);
  static const int64_t kLens[] = {1, 3, 17, 255, 1031, 4096};
  /* mean takes floats; sum, prod and any also bool; amax/amin/argmax/argmin
   * are not run on bool. */
  int with_bool = g->op == BP_OP_sum || g->op == BP_OP_prod || g->op == BP_OP_any;
  const uint32_t* dts = g->op == BP_OP_mean ? kFloats : kNumeric;
  size_t n = g->op == BP_OP_mean ? COUNT(kFloats) : COUNT(kNumeric) - (with_bool ? 0 : 1);
  for (size_t k = 0; k < n; k++) {
    uint32_t d = dts[k];
    for (size_t j = 0; j < COUNT(kLens); j++) {
      if (g->quick && kLens[j] != 17 && kLens[j] != 1031) continue;
      red_spec_t r = {"all", (int)kLens[j], S1(kLens[j]), ALL, {0}, 0, 0, 0, BPC_V_RANDOM, 1};
      reduce_case(g, d, &r, 0);
    }
    red_spec_t v[] = {
        {"special", 0, S1(64), ALL, {0}, 0, 0, 0, BPC_V_SPECIAL, 1},
        /* pairs of specials per row: 0 and -0, inf and NaN, opposite subnormals */
        {"special_rows", 0, S2(24, 2), 1, {1}, 0, 0, 0, BPC_V_SPECIAL, 1},
        /* each special with a random partner (for any: mostly zero) */
        {"special_cols", 0, S2(2, 32), 1, {0}, 0, 0, 0, BPC_V_SPECIAL, 0},
        {"dim", 0, S2(6, 7), 1, {0}, 0, 0, 0, BPC_V_RANDOM, 1},
        {"dim", 1, S3(4, 5, 6), 1, {-1}, 1, 0, BPC_LAYOUT_OFFSET, BPC_V_RANDOM, 0},
        {"dims", 0, S3(3, 4, 5), 2, {0, 2}, 0, 0, 0, BPC_V_RANDOM, 0},
        {"dims", 1, S3(3, 4, 5), 2, {2, 0}, 1, 0, BPC_LAYOUT_STRIDED, BPC_V_RANDOM, 0},
        {"all_keepdim", 0, S2(5, 3), ALL, {0}, 1, 0, 0, BPC_V_RANDOM, 0},
        {"empty_dims", 0, S2(5, 3), 0, {0}, 0, 0, 0, BPC_V_RANDOM, 0},
        {"empty", 0, S2(0, 4), 1, {0}, 0, 0, 0, BPC_V_RANDOM, 0},
        {"empty_out", 0, S2(0, 4), 1, {1}, 0, 0, 0, BPC_V_RANDOM, 0},
        {"0d", 0, S0(), ALL, {0}, 0, 0, 0, BPC_V_RANDOM, 0},
        {"strided", 0, S2(9, 13), 1, {1}, 0, BPC_LAYOUT_STRIDED, BPC_LAYOUT_STRIDED, BPC_V_RANDOM, 1},
        {"transposed", 0, S2(8, 6), 1, {0}, 0, BPC_LAYOUT_TRANSPOSED, 0, BPC_V_RANDOM, 0},
        {"ties", 1, S2(7, 40), 1, {1}, 0, 0, 0, BPC_V_RANDOM, 0},
    };
    for (size_t j = 0; j < COUNT(v); j++) {
      if (g->quick && !v[j].quick) continue;
      /* argmax/argmin take one dim or all; ops without an identity reject
       * empty dims; the dim=[] form (all dims) is sum/mean only. */
      if (is_arg && v[j].ndims != ALL && v[j].ndims != 1) continue;
      if (!has_identity(g->op) && strcmp(v[j].axis, "empty") == 0) continue;
      if (g->op != BP_OP_sum && g->op != BP_OP_mean && strcmp(v[j].axis, "empty_dims") == 0) continue;
      if (!is_arg && strcmp(v[j].axis, "ties") == 0) continue;
      reduce_case(g, d, &v[j], 0);
    }
  }
  if (takes_dtype(g->op)) { /* accumulation dtype override (attrs.dtype) */
    red_spec_t r = {"acc_dtype", 0, S1(1031), ALL, {0}, 0, 0, 0, BPC_V_RANDOM, 1};
    reduce_case(g, BP_DTYPE_F16, &r, BP_DTYPE_F32);
    reduce_case(g, BP_DTYPE_BF16, &r, BP_DTYPE_F32);
    if (g->op != BP_OP_mean) reduce_case(g, BP_DTYPE_I32, &r, BP_DTYPE_F64);
    else reduce_case(g, BP_DTYPE_F32, &r, BP_DTYPE_F64);
  }
}

static void gen_softmax(bpc_gen_t* g) {
  for (size_t k = 0; k < COUNT(kFloats); k++) {
    uint32_t d = kFloats[k];
    int half = d == BP_DTYPE_F16 || d == BP_DTYPE_BF16;
    struct { const char* axis; int variant; bpc_shape_t s; int32_t dim; uint32_t h2f; uint32_t lin, lout, values; int quick; } v[] = {
        {"len", 0, S2(3, 1), -1, 0, 0, 0, BPC_V_RANDOM, 0},
        {"len", 1, S2(3, 3), -1, 0, 0, 0, BPC_V_RANDOM, 0},
        {"len", 2, S2(3, 17), -1, 0, 0, 0, BPC_V_RANDOM, 1},
        {"len", 3, S2(3, 255), -1, 0, 0, 0, BPC_V_RANDOM, 0},
        {"len", 4, S2(2, 1031), 1, 0, 0, 0, BPC_V_RANDOM, 1},
        {"dim0", 0, S3(4, 7, 5), 0, 0, 0, 0, BPC_V_RANDOM, 0},
        {"dim1", 0, S3(4, 7, 5), 1, 0, BPC_LAYOUT_TRANSPOSED, BPC_LAYOUT_STRIDED, BPC_V_RANDOM, 1},
        {"special", 0, S2(8, 8), -1, 0, 0, 0, BPC_V_SPECIAL, 1},
        {"0d", 0, S0(), 0, 0, 0, 0, BPC_V_RANDOM, 0},
        {"empty", 0, S2(0, 5), -1, 0, 0, 0, BPC_V_RANDOM, 0},
        {"offset", 0, S2(5, 9), -1, 0, BPC_LAYOUT_OFFSET, BPC_LAYOUT_OFFSET, BPC_V_RANDOM, 0},
        {"half_to_float", 0, S2(6, 33), -1, 1, 0, 0, BPC_V_RANDOM, 1},
    };
    for (size_t j = 0; j < COUNT(v); j++) {
      if (g->quick && !v[j].quick) continue;
      if (v[j].h2f && !half) continue;
      bpc_case_t* c = bpc_gen_new(g, bpc_dtype_name(d), v[j].axis, v[j].variant);
      if (!c) return;
      c->num_inputs = 1;
      uint32_t values = v[j].values;
      double lo = 0, hi = 0;
      if (values == BPC_V_SPECIAL) { lo = -50; hi = 50; values |= BPC_V_NONFINITE; }
      bpc_operand_set(&c->in[0], d, v[j].s, v[j].lin, values, lo, hi);
      bpc_operand_set(&c->out[0], BP_DTYPE_INVALID, S0(), v[j].lout, 0, 0, 0);
      c->has_attrs = 1;
      c->attrs.softmax.struct_size = sizeof c->attrs.softmax;
      c->attrs.softmax.dim = v[j].dim;
      c->attrs.softmax.half_to_float = v[j].h2f;
    }
  }
}

void bpc_gen_reduce(bpc_gen_t* g) {
  if (g->op == BP_OP_softmax || g->op == BP_OP_log_softmax) gen_softmax(g);
  else gen_reduce(g);
}

/* ---- matmul -------------------------------------------------------------- */
void bpc_gen_matmul(bpc_gen_t* g) {
  static const uint32_t kDt[] = {BP_DTYPE_F32, BP_DTYPE_F64, BP_DTYPE_F16, BP_DTYPE_BF16,
                                 BP_DTYPE_I32, BP_DTYPE_I64};
  int is_bmm = g->op == BP_OP_bmm, is_addmm = g->op == BP_OP_addmm;
  struct { const char* axis; int64_t b, n, k, m; uint32_t la, lb, lout, values; int quick; } v[] = {
      {"tiny", 1, 1, 1, 1, 0, 0, 0, BPC_V_RANDOM, 1},
      {"odd", 2, 3, 17, 5, 0, 0, 0, BPC_V_RANDOM, 1},
      {"medium", 2, 16, 33, 8, 0, 0, BPC_LAYOUT_OFFSET, BPC_V_RANDOM, 0},
      {"large", 1, 64, 64, 64, 0, 0, 0, BPC_V_RANDOM, 0},
      {"long_k", 1, 4, 1031, 3, 0, 0, 0, BPC_V_RANDOM, 0},
      {"k0", 2, 3, 0, 4, 0, 0, 0, BPC_V_RANDOM, 0},
      {"n0", 1, 0, 5, 3, 0, 0, 0, BPC_V_RANDOM, 0},
      {"transposed_a", 2, 7, 9, 6, BPC_LAYOUT_TRANSPOSED, 0, 0, BPC_V_RANDOM, 1},
      {"transposed_b", 2, 7, 9, 6, 0, BPC_LAYOUT_TRANSPOSED, BPC_LAYOUT_STRIDED, BPC_V_RANDOM, 0},
      {"strided", 2, 5, 6, 7, BPC_LAYOUT_STRIDED, BPC_LAYOUT_STRIDED, BPC_LAYOUT_TRANSPOSED, BPC_V_RANDOM, 0},
      {"special", 1, 6, 8, 5, 0, 0, 0, BPC_V_SPECIAL, 0},
  };
  for (size_t t = 0; t < COUNT(kDt); t++) {
    uint32_t d = kDt[t];
    int fl = bpc_dtype_is_float(d);
    for (size_t j = 0; j < COUNT(v); j++) {
      if (g->quick && !v[j].quick) continue;
      if (!is_bmm && v[j].b == 0) continue;
      int nvar = is_addmm ? 3 : 1;
      for (int var = 0; var < nvar; var++) {
        if (is_addmm && var > 0 && strcmp(v[j].axis, "odd") != 0 && strcmp(v[j].axis, "special") != 0) continue;
        bpc_case_t* c = bpc_gen_new(g, bpc_dtype_name(d), v[j].axis, var);
        if (!c) return;
        uint32_t values = v[j].values;
        double lo = fl ? -1.0 : -8.0, hi = fl ? 1.0 : 8.0;
        if (values == BPC_V_SPECIAL) {
          values |= BPC_V_NONFINITE;
          lo = -100.0;
          hi = 100.0;
        }
        int64_t b = v[j].b;
        bpc_shape_t sa = is_bmm ? S3(b, v[j].n, v[j].k) : S2(v[j].n, v[j].k);
        bpc_shape_t sb = is_bmm ? S3(b, v[j].k, v[j].m) : S2(v[j].k, v[j].m);
        uint32_t first = is_addmm ? 1 : 0;
        c->num_inputs = first + 2;
        bpc_operand_set(&c->in[first], d, sa, v[j].la, values, lo, hi);
        bpc_operand_set(&c->in[first + 1], d, sb, v[j].lb, BPC_V_RANDOM, lo, hi);
        bpc_operand_set(&c->out[0], BP_DTYPE_INVALID, S0(), v[j].lout, 0, 0, 0);
        if (is_addmm) {
          /* self: [n, m]; var 1: [m] with alpha/beta; var 2: [1, m] with beta 0
           * and NaN in self (ignored). */
          bpc_shape_t ss = var == 0 ? S2(v[j].n, v[j].m) : var == 1 ? S1(v[j].m) : S2(1, v[j].m);
          uint32_t sv = var == 2 && fl ? BPC_V_SPECIAL : BPC_V_RANDOM;
          bpc_operand_set(&c->in[0], d, ss, 0, sv, sv == BPC_V_SPECIAL ? 0 : lo, sv == BPC_V_SPECIAL ? 0 : hi);
          c->has_attrs = 1;
          c->attrs.addmm.struct_size = sizeof c->attrs.addmm;
          if (var == 1) {
            c->attrs.addmm.alpha = fl ? bpc_sf(0.5) : bpc_si(2);
            c->attrs.addmm.beta = fl ? bpc_sf(-2.0) : bpc_si(-3);
          } else if (var == 2) {
            c->attrs.addmm.beta = fl ? bpc_sf(0.0) : bpc_si(0);
          }
        }
      }
    }
  }
}
