/* Case generators of the attention family: scaled_dot_product_attention,
 * linear, rotary_embedding, cdist and pdist. Sizes stay small (the
 * references are naive fp64 loops); the long sdpa cases cross the CPU
 * kernel's query and key blocks. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "cases_internal.h"

#define COUNT(a) (sizeof(a) / sizeof((a)[0]))

void bpc_gen_sdpa(bpc_gen_t* g);
void bpc_gen_linear(bpc_gen_t* g);
void bpc_gen_rotary(bpc_gen_t* g);
void bpc_gen_dist(bpc_gen_t* g);

static const uint32_t kFloats[] = {BP_DTYPE_F32, BP_DTYPE_F64, BP_DTYPE_F16, BP_DTYPE_BF16};

static void no_output(bpc_case_t* c, uint32_t layout) {
  bpc_operand_set(&c->out[0], BP_DTYPE_INVALID, S0(), layout, 0, 0, 0);
}

/* ---- scaled_dot_product_attention ---------------------------------------------- */
enum { M_NONE = 0, M_BOOL, M_BOOL_SPARSE, M_FLOAT, M_FLOAT_SPECIAL };

typedef struct sdpa_spec {
  const char* axis;
  bpc_shape_t q, k, v, m;
  int mask, causal, gqa, all_dtypes, quick;
  double scale;
  uint32_t lq, lk, lv, lout, qvalues;
  uint32_t vvalues; /* special values in v: masked keys must not pass them on */
} sdpa_spec_t;

void bpc_gen_sdpa(bpc_gen_t* g) {
  const sdpa_spec_t v[] = {
      {"basic", S4(2, 3, 5, 8), S4(2, 3, 7, 8), S4(2, 3, 7, 6), S0(), M_NONE, 0, 0, 1, 1, 0, 0, 0, 0, 0, 0, 0},
      {"3d", S3(3, 4, 8), S3(3, 6, 8), S3(3, 6, 8), S0(), M_NONE, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0},
      {"2d", S2(5, 4), S2(7, 4), S2(7, 3), S0(), M_NONE, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0},
      {"causal", S4(2, 3, 6, 8), S4(2, 3, 6, 8), S4(2, 3, 6, 8), S0(), M_NONE, 1, 0, 1, 1, 0, 0, 0, 0, 0, 0, 0},
      {"causal_tall", S3(2, 9, 4), S3(2, 5, 4), S3(2, 5, 3), S0(), M_NONE, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0},
      {"causal_wide", S3(2, 4, 4), S3(2, 9, 4), S3(2, 9, 5), S0(), M_NONE, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0},
      {"bool_mask", S4(2, 2, 5, 8), S4(2, 2, 7, 8), S4(2, 2, 7, 8), S2(5, 7), M_BOOL, 0, 0, 1, 1, 0, 0, 0, 0, 0, 0, 0},
      {"bool_mask_batched", S4(2, 2, 5, 8), S4(2, 2, 7, 8), S4(2, 2, 7, 8), S4(2, 1, 5, 7), M_BOOL, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0},
      /* most rows have every key masked: their output is 0 */
      {"fully_masked_rows", S3(2, 6, 4), S3(2, 5, 4), S3(2, 5, 4), S3(2, 6, 5), M_BOOL_SPARSE, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0},
      {"float_mask", S4(2, 3, 5, 8), S4(2, 3, 7, 8), S4(2, 3, 7, 6), S4(1, 1, 5, 7), M_FLOAT, 0, 0, 1, 1, 0, 0, 0, 0, 0, 0, 0},
      {"float_mask_row", S3(2, 5, 8), S3(2, 7, 8), S3(2, 7, 6), S1(7), M_FLOAT, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0},
      /* -inf, inf and NaN in an additive mask */
      {"float_mask_special", S3(2, 5, 4), S3(2, 6, 4), S3(2, 6, 4), S2(5, 6), M_FLOAT_SPECIAL, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0},
      {"scale", S3(2, 5, 8), S3(2, 7, 8), S3(2, 7, 8), S0(), M_NONE, 0, 0, 0, 0, 0.3, 0, 0, 0, 0, 0, 0},
      {"scale_negative", S3(2, 5, 8), S3(2, 7, 8), S3(2, 7, 8), S0(), M_NONE, 1, 0, 0, 0, -0.5, 0, 0, 0, 0, 0, 0},
      {"gqa", S4(2, 4, 5, 8), S4(2, 2, 7, 8), S4(2, 2, 7, 6), S0(), M_NONE, 0, 1, 0, 1, 0, 0, 0, 0, 0, 0, 0},
      {"gqa_causal", S4(1, 6, 5, 4), S4(1, 3, 5, 4), S4(1, 3, 5, 4), S0(), M_NONE, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0},
      {"broadcast", S4(2, 3, 5, 8), S4(1, 3, 7, 8), S3(3, 7, 8), S0(), M_NONE, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0},
      {"empty_keys", S3(2, 5, 4), S3(2, 0, 4), S3(2, 0, 3), S0(), M_NONE, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0},
      {"empty_queries", S3(2, 0, 4), S3(2, 3, 4), S3(2, 3, 3), S0(), M_NONE, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0},
      {"empty_head_dim", S3(2, 3, 0), S3(2, 4, 0), S3(2, 4, 3), S0(), M_NONE, 0, 0, 0, 0, 0.5, 0, 0, 0, 0, 0, 0},
      {"long", S3(1, 70, 16), S3(1, 300, 16), S3(1, 300, 16), S0(), M_NONE, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0},
      {"long_causal", S3(2, 130, 8), S3(2, 140, 8), S3(2, 140, 8), S0(), M_NONE, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0},
      /* from 32 queries on: the CPU's AVX-512 tile (64 queries a block), head sizes not
       * multiples of its 6-wide register tiles, masks, NaN, views and grouped heads there */
      {"long_tile", S4(1, 2, 97, 20), S4(1, 2, 75, 20), S4(1, 2, 75, 13), S0(), M_NONE, 0, 0, 1, 1, 0, 0, 0, 0, 0, 0, 0},
      {"long_tile_causal", S4(1, 2, 150, 16), S4(1, 2, 150, 16), S4(1, 2, 150, 7), S0(), M_NONE, 1, 0, 1, 0, 0.2, 0, 0,
       0, 0, 0, 0},
      {"long_bool_mask", S3(2, 70, 8), S3(2, 66, 8), S3(2, 66, 5), S3(2, 70, 66), M_BOOL_SPARSE, 0, 0, 1, 0, 0, 0, 0,
       0, 0, 0, 0},
      {"long_float_mask", S3(2, 40, 8), S3(2, 70, 8), S3(2, 70, 8), S2(40, 70), M_FLOAT_SPECIAL, 0, 0, 1, 0, 0, 0, 0,
       0, 0, 0, 0},
      {"long_special", S3(1, 64, 8), S3(1, 70, 8), S3(1, 70, 8), S0(), M_NONE, 1, 0, 0, 0, 0, 0, 0, 0, 0,
       BPC_V_SPECIAL | BPC_V_NONFINITE, 0},
      {"long_strided", S4(1, 2, 65, 8), S4(1, 2, 67, 8), S4(1, 2, 67, 6), S2(65, 67), M_FLOAT, 0, 0, 0, 0, 0,
       BPC_LAYOUT_TRANSPOSED, BPC_LAYOUT_STRIDED, BPC_LAYOUT_OFFSET, BPC_LAYOUT_STRIDED, 0, 0},
      {"masked_nonfinite_values", S3(2, 6, 4), S3(2, 6, 4), S3(2, 6, 4), S0(), M_NONE, 1, 0, 0, 1, 0, 0, 0, 0, 0, 0,
       BPC_V_SPECIAL | BPC_V_NONFINITE},
      {"long_masked_nonfinite_values", S3(2, 70, 8), S3(2, 66, 8), S3(2, 66, 5), S3(2, 70, 66), M_BOOL_SPARSE, 0, 0, 1,
       0, 0, 0, 0, 0, 0, 0, BPC_V_SPECIAL | BPC_V_NONFINITE},
      {"long_causal_nonfinite_values", S3(1, 96, 8), S3(1, 96, 8), S3(1, 96, 8), S0(), M_NONE, 1, 0, 0, 0, 0, 0, 0, 0,
       0, 0, BPC_V_SPECIAL | BPC_V_NONFINITE},
      {"long_gqa_causal", S4(1, 4, 80, 8), S4(1, 2, 90, 8), S4(1, 2, 90, 8), S0(), M_NONE, 1, 1, 0, 0, 0, 0, 0, 0, 0,
       0, 0},
      {"strided", S4(2, 2, 5, 8), S4(2, 2, 7, 8), S4(2, 2, 7, 6), S2(5, 7), M_FLOAT, 0, 0, 0, 1, 0,
       BPC_LAYOUT_TRANSPOSED, BPC_LAYOUT_STRIDED, BPC_LAYOUT_OFFSET, BPC_LAYOUT_STRIDED, 0, 0},
      {"transposed_out", S3(3, 5, 4), S3(3, 6, 4), S3(3, 6, 4), S0(), M_NONE, 1, 0, 0, 0, 0,
       BPC_LAYOUT_STRIDED, BPC_LAYOUT_TRANSPOSED, BPC_LAYOUT_TRANSPOSED, BPC_LAYOUT_TRANSPOSED, 0, 0},
      {"special", S3(2, 5, 8), S3(2, 7, 8), S3(2, 7, 8), S0(), M_NONE, 0, 0, 0, 0, 0, 0, 0, 0, 0,
       BPC_V_SPECIAL | BPC_V_NONFINITE, 0},
  };
  for (size_t t = 0; t < COUNT(kFloats); t++) {
    uint32_t d = kFloats[t];
    for (size_t i = 0; i < COUNT(v); i++) {
      const sdpa_spec_t* s = &v[i];
      if (t > 0 && !s->all_dtypes) continue;
      if (g->quick && !s->quick) continue;
      bpc_case_t* c = bpc_gen_new(g, bpc_dtype_name(d), s->axis, 0);
      if (!c) return;
      c->num_inputs = 4;
      uint32_t qv = s->qvalues ? s->qvalues : BPC_V_RANDOM;
      bpc_operand_set(&c->in[0], d, s->q, s->lq, qv, -2.0, 2.0);
      bpc_operand_set(&c->in[1], d, s->k, s->lk, BPC_V_RANDOM, -2.0, 2.0);
      bpc_operand_set(&c->in[2], d, s->v, s->lv, s->vvalues ? s->vvalues : BPC_V_RANDOM, -3.0, 3.0);
      switch (s->mask) {
        case M_BOOL: bpc_operand_set(&c->in[3], BP_DTYPE_BOOL, s->m, 0, BPC_V_RANDOM, 0, 0); break;
        case M_BOOL_SPARSE:
          bpc_operand_set(&c->in[3], BP_DTYPE_BOOL, s->m, 0, BPC_V_RANDOM | BPC_V_SPARSE, 0, 0);
          break;
        case M_FLOAT: bpc_operand_set(&c->in[3], d, s->m, s->lq, BPC_V_RANDOM, -4.0, 4.0); break;
        case M_FLOAT_SPECIAL:
          bpc_operand_set(&c->in[3], d, s->m, 0, BPC_V_SPECIAL | BPC_V_NONFINITE, -4.0, 4.0);
          break;
        default: break;
      }
      no_output(c, s->lout);
      c->has_attrs = 1;
      c->attrs.sdpa.struct_size = sizeof c->attrs.sdpa;
      c->attrs.sdpa.is_causal = (uint32_t)s->causal;
      c->attrs.sdpa.enable_gqa = (uint32_t)s->gqa;
      c->attrs.sdpa.scale = s->scale;
    }
  }
}

/* ---- linear ---------------------------------------------------------------------- */
void bpc_gen_linear(bpc_gen_t* g) {
  static const uint32_t kActs[] = {BP_ACTIVATION_NONE,      BP_ACTIVATION_RELU,
                                   BP_ACTIVATION_GELU_ERF,  BP_ACTIVATION_GELU_TANH,
                                   BP_ACTIVATION_SILU,      BP_ACTIVATION_SIGMOID,
                                   BP_ACTIVATION_TANH};
  static const char* const kActNames[] = {"none", "relu", "gelu", "gelu_tanh", "silu", "sigmoid", "tanh"};
  struct {
    const char* axis;
    bpc_shape_t x, w, b;
    int has_bias;
    uint32_t lx, lw, lout;
    int quick;
  } v[] = {
      {"2d", S2(4, 6), S2(5, 6), S1(5), 1, 0, 0, 0, 1},
      {"3d", S3(2, 3, 7), S2(4, 7), S1(4), 1, 0, 0, 0, 0},
      {"1d", S1(6), S2(3, 6), S1(3), 1, 0, 0, 0, 0},
      {"no_bias", S2(4, 6), S2(5, 6), S0(), 0, 0, 0, 0, 1},
      {"bias_scalar", S2(4, 6), S2(5, 6), S1(1), 1, 0, 0, 0, 0},
      {"bias_full", S3(2, 3, 4), S2(5, 4), S3(2, 3, 5), 1, 0, 0, 0, 0},
      {"long_k", S2(3, 300), S2(4, 300), S1(4), 1, 0, 0, 0, 0},
      {"k0", S2(3, 0), S2(4, 0), S1(4), 1, 0, 0, 0, 0},
      {"m0", S2(0, 5), S2(4, 5), S1(4), 1, 0, 0, 0, 0},
      {"transposed", S2(5, 7), S2(6, 7), S1(6), 1, BPC_LAYOUT_TRANSPOSED, BPC_LAYOUT_STRIDED,
       BPC_LAYOUT_TRANSPOSED, 1},
      {"strided_3d", S3(2, 3, 5), S2(4, 5), S1(4), 1, BPC_LAYOUT_STRIDED, BPC_LAYOUT_OFFSET,
       BPC_LAYOUT_STRIDED, 0},
  };
  static const uint32_t kDt[] = {BP_DTYPE_F32, BP_DTYPE_F64, BP_DTYPE_F16, BP_DTYPE_BF16,
                                 BP_DTYPE_I32, BP_DTYPE_I64, BP_DTYPE_I8};
  for (size_t t = 0; t < COUNT(kDt); t++) {
    uint32_t d = kDt[t];
    int fl = bpc_dtype_is_float(d);
    for (size_t i = 0; i < COUNT(v); i++) {
      if (g->quick && !v[i].quick) continue;
      if (t > 0 && i > 3 && i != 9) continue; /* the shape axes in f32 only */
      for (size_t a = 0; a < COUNT(kActs); a++) {
        if (!fl && a > 1) continue;
        /* every activation on the first shape; none and one other elsewhere;
         * relu without a bias in every dtype (the epilogue with no bias to add) */
        int plain_relu = !v[i].has_bias && a == 1;
        if (!plain_relu && i > 0 && a != 0 && a != (i % (COUNT(kActs) - 1)) + 1) continue;
        if (!plain_relu && t > 0 && fl && i > 0 && a != 0) continue;
        char axis[48];
        snprintf(axis, sizeof axis, "%s_%s", v[i].axis, kActNames[a]);
        bpc_case_t* c = bpc_gen_new(g, bpc_dtype_name(d), axis, 0);
        if (!c) return;
        c->num_inputs = 3;
        double lo = fl ? -2.0 : -8.0, hi = fl ? 2.0 : 8.0;
        bpc_operand_set(&c->in[0], d, v[i].x, v[i].lx, BPC_V_RANDOM, lo, hi);
        bpc_operand_set(&c->in[1], d, v[i].w, v[i].lw, BPC_V_RANDOM, lo, hi);
        if (v[i].has_bias) bpc_operand_set(&c->in[2], d, v[i].b, 0, BPC_V_RANDOM, lo, hi);
        no_output(c, v[i].lout);
        c->has_attrs = 1;
        c->attrs.linear.struct_size = sizeof c->attrs.linear;
        c->attrs.linear.activation = kActs[a];
      }
    }
  }
}

/* ---- rotary_embedding ------------------------------------------------------------- */
void bpc_gen_rotary(bpc_gen_t* g) {
  struct {
    const char* axis;
    bpc_shape_t x, t;
    uint32_t lx, lt, lout;
    int all_dtypes, quick;
  } v[] = {
      {"half_tables", S4(2, 3, 5, 8), S2(5, 4), 0, 0, 0, 1, 1},
      {"full_tables", S4(2, 3, 5, 8), S2(5, 8), 0, 0, 0, 1, 0},
      {"batched_tables", S4(2, 3, 5, 8), S4(2, 1, 5, 8), 0, 0, 0, 0, 0},
      {"head_tables", S3(3, 5, 6), S3(1, 5, 3), 0, 0, 0, 0, 0},
      {"1d", S1(6), S1(3), 0, 0, 0, 0, 0},
      {"odd_seq", S3(2, 7, 10), S2(7, 5), 0, 0, 0, 0, 0},
      {"empty", S3(2, 0, 4), S2(0, 2), 0, 0, 0, 0, 0},
      {"strided", S3(2, 5, 8), S2(5, 4), BPC_LAYOUT_STRIDED, BPC_LAYOUT_TRANSPOSED,
       BPC_LAYOUT_STRIDED, 0, 1},
      {"transposed", S3(2, 5, 8), S2(5, 8), BPC_LAYOUT_TRANSPOSED, BPC_LAYOUT_OFFSET,
       BPC_LAYOUT_TRANSPOSED, 0, 0},
  };
  for (size_t t = 0; t < COUNT(kFloats); t++) {
    uint32_t d = kFloats[t];
    for (size_t i = 0; i < COUNT(v); i++) {
      if (t > 0 && !v[i].all_dtypes) continue;
      if (g->quick && !v[i].quick) continue;
      for (int il = 0; il < 2; il++) {
        bpc_case_t* c = bpc_gen_new(g, bpc_dtype_name(d), v[i].axis, il);
        if (!c) return;
        c->num_inputs = 3;
        bpc_operand_set(&c->in[0], d, v[i].x, v[i].lx, BPC_V_RANDOM, -3.0, 3.0);
        bpc_operand_set(&c->in[1], d, v[i].t, v[i].lt, BPC_V_RANDOM, -1.0, 1.0);
        bpc_operand_set(&c->in[2], d, v[i].t, v[i].lt, BPC_V_RANDOM, -1.0, 1.0);
        no_output(c, v[i].lout);
        c->has_attrs = 1;
        c->attrs.rotary.struct_size = sizeof c->attrs.rotary;
        c->attrs.rotary.interleaved = (uint32_t)il;
      }
    }
  }
}

/* ---- cdist, pdist -------------------------------------------------------------------- */
void bpc_gen_dist(bpc_gen_t* g) {
  static const double kP[] = {2.0, 0.0, 1.0, 3.0, 0.5, INFINITY};
  static const char* const kPNames[] = {"p2", "p0", "p1", "p3", "p0.5", "pinf"};
  int cd = g->op == BP_OP_cdist;
  struct {
    const char* axis;
    bpc_shape_t x1, x2;
    int mode;
    uint32_t l1, l2, lout, values;
    int all_p, all_dtypes, quick;
  } vc[] = {
      {"small", S2(4, 5), S2(6, 5), 0, 0, 0, 0, 0, 1, 1, 1},
      {"batched", S3(2, 4, 3), S3(2, 5, 3), 0, 0, 0, 0, 0, 0, 0, 0},
      {"broadcast", S4(2, 1, 4, 5), S3(3, 6, 5), 0, 0, 0, 0, 0, 0, 0, 0},
      {"mm_auto", S2(30, 6), S2(7, 6), 0, 0, 0, 0, 0, 0, 1, 1},
      {"mm_forced", S3(2, 5, 4), S3(2, 6, 4), 1, 0, 0, 0, 0, 0, 1, 0},
      {"mm_never", S2(30, 6), S2(27, 6), 2, 0, 0, 0, 0, 0, 0, 0},
      {"mm_duplicate_rows", S2(3, 4), S2(3, 4), 1, 0, 0, 0, BPC_V_INTEGRAL, 0, 0, 0},
      {"empty_cols", S2(3, 0), S2(4, 0), 0, 0, 0, 0, 0, 0, 0, 0},
      {"empty_rows", S2(0, 3), S2(4, 3), 0, 0, 0, 0, 0, 0, 0, 0},
      {"strided", S3(2, 4, 5), S3(2, 6, 5), 0, BPC_LAYOUT_STRIDED, BPC_LAYOUT_TRANSPOSED,
       BPC_LAYOUT_TRANSPOSED, 0, 1, 0, 1},
      {"special", S2(6, 4), S2(5, 4), 2, 0, 0, 0, BPC_V_SPECIAL | BPC_V_NONFINITE, 1, 0, 0},
  };
  struct {
    const char* axis;
    bpc_shape_t x;
    uint32_t l, lout, values;
    int all_p, all_dtypes, quick;
  } vp[] = {
      {"small", S2(7, 5), 0, 0, 0, 1, 1, 1},
      {"one_row", S2(1, 5), 0, 0, 0, 0, 0, 0},
      {"no_rows", S2(0, 5), 0, 0, 0, 0, 0, 0},
      {"empty_cols", S2(4, 0), 0, 0, 0, 0, 0, 0},
      {"long", S2(40, 3), 0, 0, 0, 0, 0, 0},
      {"strided", S2(6, 4), BPC_LAYOUT_TRANSPOSED, BPC_LAYOUT_STRIDED, 0, 1, 0, 1},
      {"special", S2(8, 3), 0, 0, BPC_V_SPECIAL | BPC_V_NONFINITE, 1, 0, 0},
  };
  size_t n = cd ? COUNT(vc) : COUNT(vp);
  for (size_t t = 0; t < COUNT(kFloats); t++) {
    uint32_t d = kFloats[t];
    for (size_t i = 0; i < n; i++) {
      int all_p = cd ? vc[i].all_p : vp[i].all_p, all_dt = cd ? vc[i].all_dtypes : vp[i].all_dtypes;
      int quick = cd ? vc[i].quick : vp[i].quick;
      if (t > 0 && !all_dt) continue;
      if (g->quick && !quick) continue;
      for (size_t pi = 0; pi < COUNT(kP); pi++) {
        if (!all_p && pi > 0) continue;
        if (t > 0 && pi > 2) continue;
        bpc_case_t* c = bpc_gen_new(g, bpc_dtype_name(d), cd ? vc[i].axis : vp[i].axis, (int)pi);
        if (!c) return;
        snprintf(c->id + strlen(c->id), sizeof c->id - strlen(c->id), "_%s", kPNames[pi]);
        uint32_t values = cd ? vc[i].values : vp[i].values;
        double lo = -3.0, hi = 3.0;
        if (values & BPC_V_INTEGRAL) { /* equal rows: d = 0 where the mm path cancels */
          values = BPC_V_RANDOM | BPC_V_INTEGRAL;
          lo = 0.0;
          hi = 1.0;
        }
        if (cd) {
          c->num_inputs = 2;
          bpc_operand_set(&c->in[0], d, vc[i].x1, vc[i].l1, values, lo, hi);
          bpc_operand_set(&c->in[1], d, vc[i].x2, vc[i].l2, values & ~BPC_V_NONFINITE, lo, hi);
          no_output(c, vc[i].lout);
        } else {
          c->num_inputs = 1;
          bpc_operand_set(&c->in[0], d, vp[i].x, vp[i].l, values, lo, hi);
          no_output(c, vp[i].lout);
        }
        c->has_attrs = 1;
        c->attrs.cdist.struct_size = sizeof c->attrs.cdist;
        c->attrs.cdist.p = kP[pi];
        c->attrs.cdist.compute_mode = cd ? vc[i].mode : 0;
      }
    }
  }
}
