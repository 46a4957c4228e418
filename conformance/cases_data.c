/* Case generators of data movement and creation: to_copy, copy, clone, cat,
 * fill, arange. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "cases_internal.h"

#define COUNT(a) (sizeof(a) / sizeof((a)[0]))

/* Every dtype the suite stores (c64 is left to the fft ops). */
static const uint32_t kAll[] = {BP_DTYPE_F32, BP_DTYPE_F64, BP_DTYPE_F16, BP_DTYPE_BF16,
                                BP_DTYPE_I8, BP_DTYPE_U8, BP_DTYPE_I16, BP_DTYPE_I32,
                                BP_DTYPE_I64, BP_DTYPE_BOOL, BP_DTYPE_F8E4M3FN, BP_DTYPE_F8E5M2};

/* Float -> integer casts of NaN, inf and out-of-range values are undefined:
 * such sources keep only values whose truncation fits the target. */
static void cast_range(uint32_t from, uint32_t to, double* lo, double* hi, uint32_t* values) {
  *lo = *hi = 0.0;
  if (bpc_dtype_is_float(from) && bpc_dtype_is_int(to)) {
    bpc_int_range_of(to, lo, hi);
    if (*values == BPC_V_RANDOM) {
      if (*lo < -100.0) *lo = -100.0;
      if (*hi > 100.0) *hi = 100.0;
    }
  }
}

static void gen_to_copy(bpc_gen_t* g) {
  for (size_t a = 0; a < COUNT(kAll); a++) {
    for (size_t b = 0; b < COUNT(kAll); b++) {
      uint32_t from = kAll[a], to = kAll[b];
      char label[BPC_DTYPE_LABEL_MAX];
      snprintf(label, sizeof label, "%s->%s", bpc_dtype_name(from), bpc_dtype_name(to));
      struct { const char* axis; bpc_shape_t s; uint32_t lin, lout, values; int quick; } v[] = {
          {"special", S1(48), 0, 0, BPC_V_SPECIAL, 1},
          {"random", S1(257), 0, 0, BPC_V_RANDOM, 0},
          {"strided", S2(5, 6), BPC_LAYOUT_STRIDED, BPC_LAYOUT_TRANSPOSED, BPC_V_RANDOM, 0},
      };
      for (size_t j = 0; j < COUNT(v); j++) {
        if (g->quick && !v[j].quick) continue;
        bpc_case_t* c = bpc_gen_new(g, label, v[j].axis, 0);
        if (!c) return;
        c->num_inputs = 1;
        uint32_t values = v[j].values;
        double lo, hi;
        cast_range(from, to, &lo, &hi, &values);
        bpc_operand_set(&c->in[0], from, v[j].s, v[j].lin, values, lo, hi);
        bpc_operand_set(&c->out[0], BP_DTYPE_INVALID, S0(), v[j].lout, 0, 0, 0);
        c->has_attrs = 1;
        c->attrs.cast.struct_size = sizeof c->attrs.cast;
        c->attrs.cast.dtype = to;
      }
    }
  }
}

static void gen_copy(bpc_gen_t* g) {
  static const struct { uint32_t self, src; } kPairs[] = {
      {BP_DTYPE_F32, BP_DTYPE_F32}, {BP_DTYPE_F32, BP_DTYPE_I32},  {BP_DTYPE_F16, BP_DTYPE_F32},
      {BP_DTYPE_I8, BP_DTYPE_F64},  {BP_DTYPE_BOOL, BP_DTYPE_F32}, {BP_DTYPE_BF16, BP_DTYPE_F8E4M3FN},
      {BP_DTYPE_I64, BP_DTYPE_U8},  {BP_DTYPE_F8E5M2, BP_DTYPE_F16}, {BP_DTYPE_U8, BP_DTYPE_I16},
  };
  for (size_t k = 0; k < COUNT(kPairs); k++) {
    char label[BPC_DTYPE_LABEL_MAX];
    snprintf(label, sizeof label, "%s<-%s", bpc_dtype_name(kPairs[k].self), bpc_dtype_name(kPairs[k].src));
    struct { const char* axis; bpc_shape_t self, src; uint32_t lsrc, lout; int quick; } v[] = {
        {"same_shape", S2(3, 4), S2(3, 4), 0, 0, 1},
        {"broadcast", S2(3, 4), S1(4), 0, BPC_LAYOUT_STRIDED, 1},
        {"broadcast_0d", S3(2, 3, 4), S0(), 0, BPC_LAYOUT_OFFSET, 0},
        {"strided", S2(6, 5), S2(6, 5), BPC_LAYOUT_STRIDED, BPC_LAYOUT_TRANSPOSED, 0},
        {"empty", S2(0, 4), S1(4), 0, 0, 0},
    };
    for (size_t j = 0; j < COUNT(v); j++) {
      if (g->quick && !v[j].quick) continue;
      bpc_case_t* c = bpc_gen_new(g, label, v[j].axis, 0);
      if (!c) return;
      c->num_inputs = 2;
      uint32_t values = BPC_V_SPECIAL;
      double lo, hi;
      cast_range(kPairs[k].src, kPairs[k].self, &lo, &hi, &values);
      bpc_operand_set(&c->in[0], kPairs[k].self, v[j].self, 0, BPC_V_RANDOM, 0, 0);
      bpc_operand_set(&c->in[1], kPairs[k].src, v[j].src, v[j].lsrc, values, lo, hi);
      bpc_operand_set(&c->out[0], BP_DTYPE_INVALID, S0(), v[j].lout, 0, 0, 0);
    }
  }
}

static void gen_clone(bpc_gen_t* g) {
  for (size_t k = 0; k < COUNT(kAll); k++) {
    const char* dn = bpc_dtype_name(kAll[k]);
    struct { const char* axis; bpc_shape_t s; uint32_t lin, lout, values; int quick; } v[] = {
        {"special", S1(37), 0, 0, BPC_V_SPECIAL, 1},
        {"transposed", S3(3, 4, 5), BPC_LAYOUT_TRANSPOSED, 0, BPC_V_RANDOM, 1},
        {"strided", S2(7, 3), BPC_LAYOUT_STRIDED, BPC_LAYOUT_STRIDED, BPC_V_RANDOM, 0},
        {"offset", S1(1031), BPC_LAYOUT_OFFSET, BPC_LAYOUT_OFFSET, BPC_V_RANDOM, 0},
        {"empty", S2(4, 0), 0, 0, BPC_V_RANDOM, 0},
        {"0d", S0(), 0, 0, BPC_V_RANDOM, 0},
    };
    for (size_t j = 0; j < COUNT(v); j++) {
      if (g->quick && !v[j].quick) continue;
      bpc_case_t* c = bpc_gen_new(g, dn, v[j].axis, 0);
      if (!c) return;
      c->num_inputs = 1;
      bpc_operand_set(&c->in[0], kAll[k], v[j].s, v[j].lin, v[j].values, 0, 0);
      bpc_operand_set(&c->out[0], BP_DTYPE_INVALID, S0(), v[j].lout, 0, 0, 0);
    }
  }
}

static void gen_cat(bpc_gen_t* g) {
  for (size_t k = 0; k < COUNT(kAll) + 3; k++) {
    /* The last three rows mix dtypes (promotion). */
    uint32_t d0 = k < COUNT(kAll) ? kAll[k] : k == COUNT(kAll) ? BP_DTYPE_I32 : k == COUNT(kAll) + 1 ? BP_DTYPE_F16 : BP_DTYPE_U8;
    uint32_t d1 = k < COUNT(kAll) ? kAll[k] : k == COUNT(kAll) ? BP_DTYPE_F16 : k == COUNT(kAll) + 1 ? BP_DTYPE_BF16 : BP_DTYPE_I8;
    char label[BPC_DTYPE_LABEL_MAX];
    if (d0 == d1) snprintf(label, sizeof label, "%s", bpc_dtype_name(d0));
    else snprintf(label, sizeof label, "%s+%s", bpc_dtype_name(d0), bpc_dtype_name(d1));
    struct { const char* axis; int n; bpc_shape_t s[3]; int32_t dim; uint32_t l1, lout; int quick; } v[] = {
        {"dim0", 2, {S2(2, 3), S2(4, 3), S0()}, 0, 0, 0, 1},
        {"dim1", 3, {S2(2, 3), S2(2, 5), S2(2, 1)}, 1, BPC_LAYOUT_STRIDED, 0, 0},
        {"dim_neg", 2, {S3(2, 3, 4), S3(2, 3, 2), S0()}, -1, BPC_LAYOUT_TRANSPOSED, BPC_LAYOUT_STRIDED, 0},
        {"legacy_empty", 3, {S1(0), S2(2, 3), S2(1, 3)}, 0, 0, BPC_LAYOUT_OFFSET, 0},
        {"empty_part", 2, {S2(3, 0), S2(3, 4), S0()}, 1, 0, 0, 0},
    };
    for (size_t j = 0; j < COUNT(v); j++) {
      if (g->quick && !v[j].quick) continue;
      bpc_case_t* c = bpc_gen_new(g, label, v[j].axis, 0);
      if (!c) return;
      c->num_inputs = (uint32_t)v[j].n;
      for (int t = 0; t < v[j].n; t++) {
        bpc_operand_set(&c->in[t], t == 1 ? d1 : d0, v[j].s[t], t == 1 ? v[j].l1 : 0,
                        t == 0 ? BPC_V_SPECIAL : BPC_V_RANDOM, 0, 0);
      }
      bpc_operand_set(&c->out[0], BP_DTYPE_INVALID, S0(), v[j].lout, 0, 0, 0);
      c->has_attrs = 1;
      c->attrs.dim.struct_size = sizeof c->attrs.dim;
      c->attrs.dim.dim = v[j].dim;
      if (d0 != d1) bpc_gen_keep_if_valid(g, c);
    }
  }
}

static void gen_fill(bpc_gen_t* g) {
  for (size_t k = 0; k < COUNT(kAll); k++) {
    uint32_t d = kAll[k];
    const char* dn = bpc_dtype_name(d);
    bp_scalar_t vals[8];
    int nv = 0;
    if (bpc_dtype_is_float(d)) {
      vals[nv++] = bpc_sf(0.5); vals[nv++] = bpc_sf(-0.0); vals[nv++] = bpc_sf(INFINITY);
      vals[nv++] = bpc_sf(NAN); vals[nv++] = bpc_sf(1e5); vals[nv++] = bpc_si(-3);
    } else if (d == BP_DTYPE_BOOL) {
      vals[nv++] = bpc_sb(1); vals[nv++] = bpc_sb(0);
    } else {
      vals[nv++] = bpc_si(d == BP_DTYPE_U8 ? 255 : -1); vals[nv++] = bpc_si(127);
      vals[nv++] = bpc_sf(2.0);
    }
    static const struct { const char* axis; int rank; int64_t s0, s1; uint32_t layout; } kShapes[] = {
        {"dense", 1, 17, 0, BPC_LAYOUT_CONTIG},  {"strided", 2, 3, 5, BPC_LAYOUT_STRIDED},
        {"0d", 0, 0, 0, BPC_LAYOUT_OFFSET},      {"empty", 1, 0, 0, BPC_LAYOUT_CONTIG},
        {"large", 1, 4099, 0, BPC_LAYOUT_OFFSET},
    };
    for (int vi = 0; vi < nv; vi++) {
      for (size_t j = 0; j < COUNT(kShapes); j++) {
        if (g->quick && j != 1) continue;
        bpc_case_t* c = bpc_gen_new(g, dn, kShapes[j].axis, vi);
        if (!c) return;
        c->num_inputs = 0;
        bpc_shape_t s = kShapes[j].rank == 0 ? S0() : kShapes[j].rank == 1 ? S1(kShapes[j].s0)
                                                                           : S2(kShapes[j].s0, kShapes[j].s1);
        bpc_operand_set(&c->out[0], d, s, kShapes[j].layout, 0, 0, 0);
        c->has_attrs = 1;
        c->attrs.fill.struct_size = sizeof c->attrs.fill;
        c->attrs.fill.value = vals[vi];
      }
    }
  }
}

static void gen_arange(bpc_gen_t* g) {
  static const struct { uint32_t d; int fl; double a, b, s; } kRanges[] = {
      {BP_DTYPE_F32, 0, 0, 10, 1},      {BP_DTYPE_F32, 1, -1.5, 2.5, 0.25},
      {BP_DTYPE_F64, 1, 0, 1, 0.1},     {BP_DTYPE_F64, 1, 5, -5, -0.75},
      {BP_DTYPE_F16, 1, 0, 64, 2},      {BP_DTYPE_BF16, 1, -8, 8, 0.5},
      {BP_DTYPE_I32, 0, -5, 17, 3},     {BP_DTYPE_I64, 0, 10, -10, -3},
      {BP_DTYPE_I8, 0, 0, 100, 7},      {BP_DTYPE_U8, 0, 0, 250, 10},
      {BP_DTYPE_I16, 0, -300, 300, 11}, {BP_DTYPE_F32, 1, 0, 1000.5, 0.5},
  };
  static const uint32_t kLayouts[] = {BPC_LAYOUT_CONTIG, BPC_LAYOUT_STRIDED, BPC_LAYOUT_OFFSET};
  for (size_t k = 0; k < COUNT(kRanges); k++) {
    for (size_t j = 0; j < COUNT(kLayouts); j++) {
      if (g->quick && j != 1) continue;
      bpc_case_t* c = bpc_gen_new(g, bpc_dtype_name(kRanges[k].d), bpc_layout_name(kLayouts[j]), (int)k);
      if (!c) return;
      c->num_inputs = 0;
      bp_arange_attrs_t* a = &c->attrs.arange;
      c->has_attrs = 1;
      a->struct_size = sizeof *a;
      int64_t len;
      if (kRanges[k].fl) {
        a->start = bpc_sf(kRanges[k].a);
        a->end = bpc_sf(kRanges[k].b);
        a->step = bpc_sf(kRanges[k].s);
        len = (int64_t)ceil((kRanges[k].b - kRanges[k].a) / kRanges[k].s);
      } else {
        int64_t s0 = (int64_t)kRanges[k].a, e = (int64_t)kRanges[k].b, st = (int64_t)kRanges[k].s;
        a->start = bpc_si(s0);
        a->end = bpc_si(e);
        a->step = bpc_si(st);
        len = (e - s0) / st + (((e - s0) % st) != 0);
      }
      bpc_operand_set(&c->out[0], kRanges[k].d, S1(len), kLayouts[j], 0, 0, 0);
    }
  }
}

void bpc_gen_data(bpc_gen_t* g) {
  switch (g->op) {
    case BP_OP_to_copy: gen_to_copy(g); break;
    case BP_OP_copy: gen_copy(g); break;
    case BP_OP_clone: gen_clone(g); break;
    case BP_OP_cat: gen_cat(g); break;
    case BP_OP_fill: gen_fill(g); break;
    case BP_OP_arange: gen_arange(g); break;
    default: break;
  }
}
