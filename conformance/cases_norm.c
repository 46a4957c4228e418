/* Case generators of the norm family: batch_norm, group_norm (+ backward),
 * layer_norm (+ backward), rms_norm, their residual-add forms and
 * cross_entropy. Every op runs over
 * f32, f64, f16 and bf16 (and the mixed form: f32 parameters of a half
 * input), special values, empty inputs, odd sizes, each attribute mode,
 * and offset / strided / transposed inputs and outputs. */
#include <stdio.h>
#include <string.h>

#include "cases_internal.h"

void bpc_gen_norm(bpc_gen_t* g);

#define COUNT(a) (sizeof(a) / sizeof((a)[0]))

static const uint32_t kFloats[] = {BP_DTYPE_F32, BP_DTYPE_F64, BP_DTYPE_F16, BP_DTYPE_BF16};

/* One case shape: the input shape, its layout, the outputs' layout, value
 * kind, which optional parameters are present (bit per input index) and an
 * op-specific mode (attribute variant). */
typedef struct norm_spec {
  const char* axis;
  int variant;
  bpc_shape_t s;
  uint32_t lin, lout;
  uint32_t values;
  uint32_t params; /* bit i: optional input i present */
  int mode;
  int quick;
} norm_spec_t;

/* Input values: random in [-3, 3] (or [lo, hi]), or specials with inf/NaN. */
static void set_values(bpc_operand_t* o, uint32_t d, bpc_shape_t s, uint32_t layout, uint32_t values,
                       double lo, double hi) {
  if (values == BPC_V_SPECIAL) {
    bpc_operand_set(o, d, s, layout, BPC_V_SPECIAL | BPC_V_NONFINITE, -100.0, 100.0);
  } else {
    bpc_operand_set(o, d, s, layout, BPC_V_RANDOM, lo, hi);
  }
}

static bpc_case_t* new_case(bpc_gen_t* g, uint32_t d, int mixed, const norm_spec_t* v, uint32_t nin) {
  char label[BPC_DTYPE_LABEL_MAX];
  snprintf(label, sizeof label, "%s%s", bpc_dtype_name(d), mixed ? "+f32" : "");
  bpc_case_t* c = bpc_gen_new(g, label, v->axis, v->variant);
  if (!c) return NULL;
  c->num_inputs = nin;
  c->num_outputs = 3;
  for (uint32_t k = 0; k < 3; k++) bpc_operand_set(&c->out[k], BP_DTYPE_INVALID, S0(), v->lout, 0, 0, 0);
  c->has_attrs = 1;
  return c;
}

static bpc_shape_t vec(int64_t n) { return S1(n); }

/* Runs `fn` for every dtype (and the mixed form of the halves) over specs. */
typedef void (*norm_case_fn)(bpc_gen_t* g, uint32_t d, int mixed, const norm_spec_t* v);

static void for_all(bpc_gen_t* g, const norm_spec_t* v, size_t n, norm_case_fn fn) {
  for (size_t t = 0; t < COUNT(kFloats); t++) {
    for (size_t j = 0; j < n; j++) {
      if (g->quick && !v[j].quick) continue;
      fn(g, kFloats[t], 0, &v[j]);
    }
  }
  /* mixed type: f32 parameters of a half input, one case per half dtype */
  for (size_t t = 2; t < COUNT(kFloats); t++) fn(g, kFloats[t], 1, &v[0]);
}

/* ---- batch_norm ------------------------------------------------------------------ */
/* mode: 0 training with running stats, 1 training without (no_stats),
 * 2 eval (no_training). */
static void batch_norm_case(bpc_gen_t* g, uint32_t d, int mixed, const norm_spec_t* v) {
  bpc_case_t* c = new_case(g, d, mixed, v, 5);
  if (!c) return;
  uint32_t pd = mixed ? BP_DTYPE_F32 : d;
  int64_t C = v->s.sizes[1];
  set_values(&c->in[0], d, v->s, v->lin, v->values, -3.0, 3.0);
  if (v->params & 2) bpc_operand_set(&c->in[1], pd, vec(C), 0, BPC_V_RANDOM, -2.0, 2.0);
  if (v->params & 4) bpc_operand_set(&c->in[2], pd, vec(C), BPC_LAYOUT_STRIDED, BPC_V_RANDOM, -2.0, 2.0);
  if (v->mode != 1) {
    bpc_operand_set(&c->in[3], pd, vec(C), BPC_LAYOUT_OFFSET, BPC_V_RANDOM, -1.0, 1.0);
    bpc_operand_set(&c->in[4], pd, vec(C), 0, BPC_V_RANDOM, 0.25, 2.0);
  }
  bp_batch_norm_attrs_t* a = &c->attrs.batch_norm;
  a->struct_size = sizeof *a;
  a->training = v->mode != 2;
  a->momentum = 0.1;
  a->eps = v->variant == 7 ? 0.5 : 1e-5;
}

static void gen_batch_norm(bpc_gen_t* g) {
  const norm_spec_t v[] = {
      {"train", 0, S4(2, 3, 4, 5), 0, 0, BPC_V_RANDOM, 6, 0, 1},
      {"train", 1, S2(7, 3), 0, 0, BPC_V_RANDOM, 6, 0, 0},
      {"train_no_stats", 0, S3(4, 5, 6), 0, 0, BPC_V_RANDOM, 6, 1, 1},
      {"train_no_params", 0, S3(3, 2, 9), 0, 0, BPC_V_RANDOM, 0, 0, 0},
      {"train_long", 0, S3(16, 2, 129), 0, 0, BPC_V_RANDOM, 6, 1, 0},
      {"train_layouts", 0, S4(2, 3, 3, 5), BPC_LAYOUT_TRANSPOSED, BPC_LAYOUT_STRIDED, BPC_V_RANDOM, 6, 0, 1},
      {"train_layouts", 1, S3(3, 4, 5), BPC_LAYOUT_STRIDED, BPC_LAYOUT_OFFSET, BPC_V_RANDOM, 2, 1, 0},
      {"train_eps", 7, S3(5, 3, 4), 0, 0, BPC_V_RANDOM, 6, 0, 0},
      {"train_special", 0, S3(2, 4, 8), 0, 0, BPC_V_SPECIAL, 6, 0, 0},
      {"eval", 0, S4(2, 3, 4, 5), 0, 0, BPC_V_RANDOM, 6, 2, 1},
      {"eval_no_params", 0, S2(6, 5), 0, 0, BPC_V_RANDOM, 0, 2, 0},
      {"eval_layouts", 0, S3(3, 4, 5), BPC_LAYOUT_TRANSPOSED, BPC_LAYOUT_OFFSET, BPC_V_RANDOM, 2, 2, 0},
      {"eval_special", 0, S2(24, 3), 0, 0, BPC_V_SPECIAL, 6, 2, 0},
      {"eval_empty", 0, S3(0, 3, 4), 0, 0, BPC_V_RANDOM, 6, 2, 0},
  };
  for_all(g, v, COUNT(v), batch_norm_case);
}

/* ---- group_norm and its backward ------------------------------------------------- */
/* mode: number of groups; variant of the backward: output_mask. */
static void group_attrs(bpc_case_t* c, const norm_spec_t* v, uint32_t mask) {
  bp_group_norm_attrs_t* a = &c->attrs.group_norm;
  a->struct_size = sizeof *a;
  a->n = v->s.sizes[0];
  a->c = v->s.sizes[1];
  a->hxw = 1;
  for (uint32_t k = 2; k < v->s.rank; k++) a->hxw *= v->s.sizes[k];
  a->group = v->mode;
  a->eps = 1e-5;
  a->output_mask = mask;
}

static void group_norm_case(bpc_gen_t* g, uint32_t d, int mixed, const norm_spec_t* v) {
  bpc_case_t* c = new_case(g, d, mixed, v, 3);
  if (!c) return;
  uint32_t pd = mixed ? BP_DTYPE_F32 : d;
  int64_t C = v->s.sizes[1];
  set_values(&c->in[0], d, v->s, v->lin, v->values, -3.0, 3.0);
  if (v->params & 2) bpc_operand_set(&c->in[1], pd, vec(C), BPC_LAYOUT_STRIDED, BPC_V_RANDOM, -2.0, 2.0);
  if (v->params & 4) bpc_operand_set(&c->in[2], pd, vec(C), 0, BPC_V_RANDOM, -2.0, 2.0);
  group_attrs(c, v, 7);
}

static void group_norm_backward_case(bpc_gen_t* g, uint32_t d, int mixed, const norm_spec_t* v) {
  bpc_case_t* c = new_case(g, d, mixed, v, 5);
  if (!c) return;
  uint32_t pd = mixed ? BP_DTYPE_F32 : d;
  int64_t C = v->s.sizes[1];
  bpc_shape_t ss = S2(v->s.sizes[0], v->mode);
  set_values(&c->in[0], d, v->s, v->lout == BPC_LAYOUT_STRIDED ? BPC_LAYOUT_OFFSET : 0, BPC_V_RANDOM, -2.0, 2.0);
  set_values(&c->in[1], d, v->s, v->lin, v->values, -3.0, 3.0);
  bpc_operand_set(&c->in[2], pd, ss, 0, BPC_V_RANDOM, -1.0, 1.0);
  bpc_operand_set(&c->in[3], pd, ss, BPC_LAYOUT_TRANSPOSED, BPC_V_RANDOM, 0.5, 2.0);
  if (v->params & 16) bpc_operand_set(&c->in[4], pd, vec(C), 0, BPC_V_RANDOM, -2.0, 2.0);
  group_attrs(c, v, (uint32_t)(v->variant & 7));
}

static void gen_group_norm(bpc_gen_t* g) {
  const norm_spec_t v[] = {
      {"groups", 7, S4(2, 6, 3, 3), 0, 0, BPC_V_RANDOM, 0x16, 3, 1},
      {"groups", 3, S3(3, 4, 5), 0, 0, BPC_V_RANDOM, 0x16, 2, 0},
      {"one_group", 7, S3(2, 5, 7), 0, 0, BPC_V_RANDOM, 0x16, 1, 0},
      {"group_per_channel", 7, S3(2, 4, 9), 0, 0, BPC_V_RANDOM, 0x16, 4, 0},
      {"no_params", 1, S4(2, 4, 2, 3), 0, 0, BPC_V_RANDOM, 0, 2, 0},
      {"long", 7, S3(2, 4, 517), 0, 0, BPC_V_RANDOM, 0x16, 2, 0},
      {"hxw1", 5, S2(3, 6), 0, 0, BPC_V_RANDOM, 0x16, 3, 0},
      {"layouts", 6, S4(2, 4, 3, 5), BPC_LAYOUT_TRANSPOSED, BPC_LAYOUT_STRIDED, BPC_V_RANDOM, 0x16, 2, 1},
      {"layouts", 2, S3(3, 6, 4), BPC_LAYOUT_STRIDED, BPC_LAYOUT_OFFSET, BPC_V_RANDOM, 0x16, 3, 0},
      {"special", 7, S3(2, 4, 8), 0, 0, BPC_V_SPECIAL, 0x16, 2, 0},
      {"empty_batch", 7, S3(0, 4, 5), 0, 0, BPC_V_RANDOM, 0x16, 2, 0},
  };
  for_all(g, v, COUNT(v),
          g->op == BP_OP_group_norm ? group_norm_case : group_norm_backward_case);
}

/* ---- layer_norm, its backward, rms_norm ------------------------------------------ */
/* mode: normalized rank; variant 9 sets a large eps, variant 8 passes
 * normalized_shape as zeros (take the input's sizes). */
static void layer_attrs(bpc_case_t* c, const norm_spec_t* v, uint32_t mask) {
  bp_layer_norm_attrs_t* a = &c->attrs.layer_norm;
  a->struct_size = sizeof *a;
  a->normalized_rank = (uint32_t)v->mode;
  for (int k = 0; k < v->mode; k++) {
    a->normalized_shape[k] = v->variant == 8 ? 0 : v->s.sizes[v->s.rank - (uint32_t)v->mode + (uint32_t)k];
  }
  a->eps = v->variant == 9 ? 0.25 : 1e-5;
  a->output_mask = mask;
}

static bpc_shape_t trailing(const bpc_shape_t* s, int nr) {
  bpc_shape_t t = S0();
  t.rank = (uint32_t)nr;
  for (int k = 0; k < nr; k++) t.sizes[k] = s->sizes[s->rank - (uint32_t)nr + (uint32_t)k];
  return t;
}

/* The add_ forms: input 1 is the residual (the input's dtype and shape; an
 * offset layout on odd variants, random values beside special inputs), the
 * parameters move up by one, and the outputs are out and residual_out. */
static uint32_t add_residual(bpc_case_t* c, uint32_t d, const norm_spec_t* v, double lo, double hi) {
  c->num_outputs = 2;
  set_values(&c->in[1], d, v->s, (v->variant & 1) ? BPC_LAYOUT_OFFSET : v->lin,
             v->values == BPC_V_SPECIAL ? BPC_V_RANDOM : v->values, lo, hi);
  return 1;
}

static void layer_norm_case(bpc_gen_t* g, uint32_t d, int mixed, const norm_spec_t* v) {
  int add = g->op == BP_OP_add_layer_norm;
  bpc_case_t* c = new_case(g, d, mixed, v, add ? 4 : 3);
  if (!c) return;
  uint32_t pd = mixed ? BP_DTYPE_F32 : d;
  bpc_shape_t ps = trailing(&v->s, v->mode);
  double lo = v->variant == 5 ? 100.0 : -3.0, hi = v->variant == 5 ? 104.0 : 3.0; /* offset mean */
  set_values(&c->in[0], d, v->s, v->lin, v->values, lo, hi);
  uint32_t k = add ? add_residual(c, d, v, -3.0, 3.0) : 0;
  if (v->params & 2) bpc_operand_set(&c->in[1 + k], pd, ps, BPC_LAYOUT_OFFSET, BPC_V_RANDOM, -2.0, 2.0);
  if (v->params & 4) bpc_operand_set(&c->in[2 + k], pd, ps, v->lin, BPC_V_RANDOM, -2.0, 2.0);
  layer_attrs(c, v, 7);
}

static void layer_norm_backward_case(bpc_gen_t* g, uint32_t d, int mixed, const norm_spec_t* v) {
  bpc_case_t* c = new_case(g, d, mixed, v, 6);
  if (!c) return;
  uint32_t pd = mixed ? BP_DTYPE_F32 : d;
  bpc_shape_t ps = trailing(&v->s, v->mode), ss = v->s;
  for (int k = 0; k < v->mode; k++) ss.sizes[ss.rank - 1 - (uint32_t)k] = 1;
  set_values(&c->in[0], d, v->s, v->lin == BPC_LAYOUT_TRANSPOSED ? BPC_LAYOUT_STRIDED : 0, BPC_V_RANDOM, -2.0, 2.0);
  set_values(&c->in[1], d, v->s, v->lin, v->values, -3.0, 3.0);
  bpc_operand_set(&c->in[2], pd, ss, 0, BPC_V_RANDOM, -1.0, 1.0);
  bpc_operand_set(&c->in[3], pd, ss, BPC_LAYOUT_OFFSET, BPC_V_RANDOM, 0.5, 2.0);
  if (v->params & 2) bpc_operand_set(&c->in[4], pd, ps, 0, BPC_V_RANDOM, -2.0, 2.0);
  if (v->params & 4) bpc_operand_set(&c->in[5], pd, ps, 0, BPC_V_RANDOM, -2.0, 2.0);
  /* the mask cycles through the variants */
  static const uint32_t kMasks[] = {7, 1, 6, 2, 4, 3, 5, 7, 7, 7};
  layer_attrs(c, v, kMasks[v->variant % 10]);
}

static void rms_norm_case(bpc_gen_t* g, uint32_t d, int mixed, const norm_spec_t* v) {
  int add = g->op == BP_OP_add_rms_norm;
  bpc_case_t* c = new_case(g, d, mixed, v, add ? 3 : 2);
  if (!c) return;
  c->num_outputs = 1;
  uint32_t pd = mixed ? BP_DTYPE_F32 : d;
  set_values(&c->in[0], d, v->s, v->lin, v->values, -3.0, 3.0);
  uint32_t k = add ? add_residual(c, d, v, -3.0, 3.0) : 0;
  if (v->params & 2) bpc_operand_set(&c->in[1 + k], pd, trailing(&v->s, v->mode), BPC_LAYOUT_STRIDED, BPC_V_RANDOM, -2.0, 2.0);
  bp_rms_norm_attrs_t* a = &c->attrs.rms_norm;
  a->struct_size = sizeof *a;
  a->normalized_rank = (uint32_t)v->mode;
  a->eps = v->variant == 9 ? 0.25 : v->variant == 1 ? 1e-6 : 0.0; /* 0: finfo(dtype).eps */
}

static void gen_layer_norm(bpc_gen_t* g) {
  const norm_spec_t v[] = {
      {"rows", 0, S2(3, 17), 0, 0, BPC_V_RANDOM, 6, 1, 1},
      {"rows", 1, S3(2, 3, 8), 0, 0, BPC_V_RANDOM, 6, 1, 0},
      {"len1", 2, S2(4, 1), 0, 0, BPC_V_RANDOM, 6, 1, 0},
      {"long", 3, S2(2, 1031), 0, 0, BPC_V_RANDOM, 6, 1, 1},
      {"weight_only", 4, S2(5, 9), 0, 0, BPC_V_RANDOM, 2, 1, 0},
      {"offset_mean", 5, S2(4, 64), 0, 0, BPC_V_RANDOM, 6, 1, 0},
      {"no_params", 6, S2(5, 9), 0, 0, BPC_V_RANDOM, 0, 1, 0},
      {"normalized_rank2", 0, S3(2, 3, 5), 0, 0, BPC_V_RANDOM, 6, 2, 1},
      {"normalized_zeros", 8, S3(2, 3, 5), 0, 0, BPC_V_RANDOM, 6, 2, 0},
      {"eps", 9, S2(3, 6), 0, 0, BPC_V_RANDOM, 6, 1, 0},
      {"all_dims", 0, S2(4, 6), 0, 0, BPC_V_RANDOM, 6, 2, 0},
      {"1d", 1, S1(13), 0, 0, BPC_V_RANDOM, 6, 1, 0},
      {"transposed", 0, S2(6, 10), BPC_LAYOUT_TRANSPOSED, BPC_LAYOUT_STRIDED, BPC_V_RANDOM, 6, 1, 1},
      {"strided", 1, S3(3, 4, 5), BPC_LAYOUT_STRIDED, BPC_LAYOUT_OFFSET, BPC_V_RANDOM, 6, 2, 0},
      {"offset", 2, S2(5, 7), BPC_LAYOUT_OFFSET, BPC_LAYOUT_TRANSPOSED, BPC_V_RANDOM, 6, 1, 0},
      {"special", 0, S2(8, 8), 0, 0, BPC_V_SPECIAL, 6, 1, 0},
      {"empty_rows", 0, S2(0, 8), 0, 0, BPC_V_RANDOM, 6, 1, 0},
      /* add_ forms only: rows of an LLM's hidden size, past the CPU kernel's
       * non-temporal-store threshold (2^21 elements) */
      {"large", 1, S2(512, 4096), 0, 0, BPC_V_RANDOM, 2, 1, 0},
  };
  int add = g->op == BP_OP_add_layer_norm || g->op == BP_OP_add_rms_norm;
  norm_case_fn fn = g->op == BP_OP_layer_norm || g->op == BP_OP_add_layer_norm ? layer_norm_case
                  : g->op == BP_OP_rms_norm || g->op == BP_OP_add_rms_norm     ? rms_norm_case
                                                                                : layer_norm_backward_case;
  for_all(g, v, COUNT(v) - (add ? 0 : 1), fn);
}

/* ---- cross_entropy ------------------------------------------------------------------ */
/* params bit 2: class weights; mode: reduction; variant bit 0: ignore_index
 * hits (index 1), bit 1: label smoothing 0.2. */
static void cross_entropy_case(bpc_gen_t* g, uint32_t d, int mixed, const norm_spec_t* v) {
  if (mixed) return; /* no mixed form: weight has the logits' dtype */
  bpc_case_t* c = new_case(g, d, 0, v, 3);
  if (!c) return;
  c->num_outputs = 1;
  uint32_t cdim = v->s.rank == 1 ? 0 : 1;
  int64_t C = v->s.sizes[cdim];
  bpc_shape_t ts = S0();
  for (uint32_t k = 0; k < v->s.rank; k++) {
    if (k != cdim) ts.sizes[ts.rank++] = v->s.sizes[k];
  }
  set_values(&c->in[0], d, v->s, v->lin, v->values, -4.0, 4.0);
  bpc_operand_set(&c->in[1], BP_DTYPE_I64, ts, v->lin == BPC_LAYOUT_TRANSPOSED ? BPC_LAYOUT_STRIDED : 0,
                  BPC_V_RANDOM, 0.0, (double)(C - 1));
  if (v->params & 4) bpc_operand_set(&c->in[2], d, vec(C), BPC_LAYOUT_OFFSET, BPC_V_RANDOM, 0.25, 2.0);
  bp_cross_entropy_attrs_t* a = &c->attrs.cross_entropy;
  a->struct_size = sizeof *a;
  a->reduction = (uint32_t)v->mode;
  a->ignore_index = (v->variant & 1) ? 1 : -100;
  a->label_smoothing = (v->variant & 2) ? 0.2 : 0.0;
}

static void gen_cross_entropy(bpc_gen_t* g) {
  const norm_spec_t v[] = {
      {"mean", 0, S2(5, 7), 0, 0, BPC_V_RANDOM, 0, BP_LOSS_MEAN, 1},
      {"mean", 1, S2(9, 4), 0, 0, BPC_V_RANDOM, 0, BP_LOSS_MEAN, 0},
      {"mean_weight", 1, S2(9, 4), 0, 0, BPC_V_RANDOM, 4, BP_LOSS_MEAN, 1},
      {"mean_weight", 3, S3(3, 5, 4), 0, 0, BPC_V_RANDOM, 4, BP_LOSS_MEAN, 0},
      {"mean_smooth", 2, S2(6, 10), 0, 0, BPC_V_RANDOM, 0, BP_LOSS_MEAN, 1},
      {"sum", 0, S2(5, 7), 0, 0, BPC_V_RANDOM, 4, BP_LOSS_SUM, 0},
      {"sum", 3, S2(8, 5), 0, 0, BPC_V_RANDOM, 4, BP_LOSS_SUM, 0},
      {"none", 0, S2(5, 7), 0, BPC_LAYOUT_STRIDED, BPC_V_RANDOM, 0, BP_LOSS_NONE, 1},
      {"none", 3, S3(2, 6, 5), 0, BPC_LAYOUT_OFFSET, BPC_V_RANDOM, 4, BP_LOSS_NONE, 0},
      {"spatial", 0, S4(2, 3, 4, 5), 0, 0, BPC_V_RANDOM, 4, BP_LOSS_MEAN, 0},
      {"unbatched", 0, S1(11), 0, 0, BPC_V_RANDOM, 0, BP_LOSS_MEAN, 0},
      {"unbatched", 2, S1(11), 0, 0, BPC_V_RANDOM, 4, BP_LOSS_NONE, 0},
      {"long", 2, S2(3, 1031), 0, 0, BPC_V_RANDOM, 0, BP_LOSS_MEAN, 0},
      {"transposed", 1, S2(7, 6), BPC_LAYOUT_TRANSPOSED, 0, BPC_V_RANDOM, 4, BP_LOSS_NONE, 0},
      {"strided", 3, S3(3, 4, 3), BPC_LAYOUT_STRIDED, BPC_LAYOUT_TRANSPOSED, BPC_V_RANDOM, 4, BP_LOSS_NONE, 0},
      {"special", 0, S2(8, 8), 0, 0, BPC_V_SPECIAL, 0, BP_LOSS_NONE, 0},
      {"empty_mean", 0, S2(0, 5), 0, 0, BPC_V_RANDOM, 0, BP_LOSS_MEAN, 0},
      {"empty_sum", 0, S2(0, 5), 0, 0, BPC_V_RANDOM, 0, BP_LOSS_SUM, 0},
  };
  for_all(g, v, COUNT(v), cross_entropy_case);
}

void bpc_gen_norm(bpc_gen_t* g) {
  switch (g->op) {
    case BP_OP_batch_norm: gen_batch_norm(g); break;
    case BP_OP_group_norm:
    case BP_OP_group_norm_backward: gen_group_norm(g); break;
    case BP_OP_cross_entropy: gen_cross_entropy(g); break;
    default: gen_layer_norm(g); break;
  }
}
