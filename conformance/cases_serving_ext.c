/* Case generators of the serving ops of ABI 1.4 (reference/ref_serving_ext.c).
 *
 * moe_align_block_size: DeepSeek-like 256 experts of block 64 (most
 *   experts empty), Mixtral-like 8 of block 16, block size 1 (no padding),
 *   ids not local (-1 and E), one token and none, i32 and i64 ids.
 * grouped_topk: DeepSeek-V3 (256 experts, 8 groups, 4 kept, top 8,
 *   sigmoid, correction bias, renormalized, scaled 2.5), DeepSeek-V2 (160 /
 *   8 / 3, top 6, softmax, scaled 16), one group (plain top-k), ties
 *   (integer logits), one token and none.
 * concat_and_cache_mla: DeepSeek's 512 + 64 row over blocks of 16, odd
 *   sizes, padding slots (negative), block size 1, i32 and i64 slots, no
 *   tokens; rows move as bytes (special values).
 * gather_cache: sequences of random lengths (some empty), with and without
 *   seq_starts (unaligned), rows of one dim and of two, padding rows past
 *   the last offset (zero), block size 1.
 * compute_slot_mapping: random positions in random block tables, padding
 *   tokens past query_start_loc[S], a sequence of no tokens, block size 1.
 * gather_logprobs: 0, 1, 5 and 20 log-probabilities, a vocabulary of 1,
 *   ties (integer logits: ids and ranks by the lower id), a long row, k = V.
 * swiglu_oai: GPT-OSS's alpha and limit (and the defaults), values past the
 *   limit on both sides, no clamp (limit inf), odd widths, special values.
 */
#include <math.h>
#include <string.h>

#include "cases_internal.h"

#define COUNT(a) (sizeof(a) / sizeof((a)[0]))

void bpc_gen_moe_align(bpc_gen_t* g);
void bpc_gen_grouped_topk(bpc_gen_t* g);
void bpc_gen_concat_mla(bpc_gen_t* g);
void bpc_gen_gather_cache(bpc_gen_t* g);
void bpc_gen_slot_mapping(bpc_gen_t* g);
void bpc_gen_logprobs(bpc_gen_t* g);
void bpc_gen_swiglu_oai(bpc_gen_t* g);

static const uint32_t kFloats[] = {BP_DTYPE_F32, BP_DTYPE_F64, BP_DTYPE_F16, BP_DTYPE_BF16};

static void outputs_inferred(bpc_case_t* c) {
  for (uint32_t o = 0; o < c->num_outputs; o++) bpc_operand_set(&c->out[o], BP_DTYPE_INVALID, S0(), 0, 0, 0, 0);
}

/* ---- moe_align_block_size ------------------------------------------------------------ */

void bpc_gen_moe_align(bpc_gen_t* g) {
  static const struct {
    const char* axis;
    int64_t T, k, E, BS, lo, hi;
    uint32_t ids;
    int quick;
  } specs[] = {
      {"deepseek_256_b64", 37, 8, 256, 64, 0, 255, BP_DTYPE_I32, 1},
      {"mixtral_8_b16", 45, 2, 8, 16, 0, 7, BP_DTYPE_I64, 1},
      {"block_1", 13, 3, 5, 1, 0, 4, BP_DTYPE_I32, 0},
      {"not_local", 20, 2, 6, 4, -1, 6, BP_DTYPE_I64, 1},
      {"one_token", 1, 4, 16, 8, 0, 15, BP_DTYPE_I32, 0},
      {"no_tokens", 0, 2, 4, 16, 0, 3, BP_DTYPE_I64, 0},
  };
  for (size_t k = 0; k < COUNT(specs); k++) {
    if (g->quick && !specs[k].quick) continue;
    bpc_case_t* c = bpc_gen_new(g, bpc_dtype_name(specs[k].ids), specs[k].axis, 0);
    if (!c) return;
    c->num_inputs = 1;
    c->num_outputs = 3;
    bpc_operand_set(&c->in[0], specs[k].ids, S2(specs[k].T, specs[k].k), 0, BPC_V_RANDOM, (double)specs[k].lo,
                    (double)specs[k].hi + 0.5);
    outputs_inferred(c);
    c->has_attrs = 1;
    bp_moe_align_attrs_t* a = &c->attrs.moe_align;
    memset(a, 0, sizeof *a);
    a->struct_size = sizeof *a;
    a->num_experts = (uint32_t)specs[k].E;
    a->block_size = (uint32_t)specs[k].BS;
  }
}

/* ---- grouped_topk ---------------------------------------------------------------------- */

void bpc_gen_grouped_topk(bpc_gen_t* g) {
  static const struct {
    const char* axis;
    int64_t T, E;
    uint32_t G, kg, k, scoring, renorm;
    double rsf;
    int bias, ties, quick;
  } specs[] = {
      {"deepseek_v3", 19, 256, 8, 4, 8, BP_MOE_SCORING_SIGMOID, 1, 2.5, 1, 0, 1},
      {"deepseek_v2", 11, 160, 8, 3, 6, BP_MOE_SCORING_SOFTMAX, 0, 16.0, 0, 0, 1},
      {"one_group_softmax", 23, 64, 1, 1, 6, BP_MOE_SCORING_SOFTMAX, 1, 0.0, 0, 0, 1},
      {"sigmoid_no_bias", 9, 32, 4, 2, 4, BP_MOE_SCORING_SIGMOID, 0, 1.0, 0, 0, 0},
      {"ties", 17, 16, 4, 2, 3, BP_MOE_SCORING_SOFTMAX, 1, 0.0, 0, 1, 1},
      {"all_groups", 5, 24, 3, 0, 5, BP_MOE_SCORING_SIGMOID, 1, 0.0, 1, 0, 0},
      {"one_token", 1, 64, 8, 4, 8, BP_MOE_SCORING_SIGMOID, 1, 2.5, 1, 0, 0},
      {"no_tokens", 0, 16, 4, 2, 2, BP_MOE_SCORING_SOFTMAX, 0, 0.0, 0, 0, 0},
  };
  for (size_t t = 0; t < COUNT(kFloats); t++) {
    for (size_t k = 0; k < COUNT(specs); k++) {
      if (g->quick && !specs[k].quick) continue;
      bpc_case_t* c = bpc_gen_new(g, bpc_dtype_name(kFloats[t]), specs[k].axis, 0);
      if (!c) return;
      c->num_inputs = 2;
      c->num_outputs = 2;
      bpc_operand_set(&c->in[0], kFloats[t], S2(specs[k].T, specs[k].E), 0,
                      specs[k].ties ? BPC_V_RANDOM | BPC_V_INTEGRAL : BPC_V_RANDOM, specs[k].ties ? -2 : -4,
                      specs[k].ties ? 2 : 4);
      if (specs[k].bias) bpc_operand_set(&c->in[1], kFloats[t], S1(specs[k].E), 0, BPC_V_RANDOM, -0.5, 0.5);
      else bpc_operand_set(&c->in[1], BP_DTYPE_INVALID, S0(), 0, 0, 0, 0);
      outputs_inferred(c);
      c->has_attrs = 1;
      bp_grouped_topk_attrs_t* a = &c->attrs.grouped_topk;
      memset(a, 0, sizeof *a);
      a->struct_size = sizeof *a;
      a->top_k = specs[k].k;
      a->num_expert_group = specs[k].G;
      a->topk_group = specs[k].kg;
      a->scoring_func = specs[k].scoring;
      a->renormalize = specs[k].renorm;
      a->routed_scaling_factor = specs[k].rsf;
    }
  }
}

/* ---- concat_and_cache_mla -------------------------------------------------------------- */

void bpc_gen_concat_mla(bpc_gen_t* g) {
  static const struct {
    const char* axis;
    int64_t T, L, R, NB, BS, slot_lo;
    uint32_t slots, values;
    int quick;
  } specs[] = {
      {"deepseek_512_64", 9, 512, 64, 4, 16, 0, BP_DTYPE_I64, BPC_V_RANDOM, 1},
      {"odd_sizes", 7, 13, 5, 5, 3, 0, BP_DTYPE_I32, BPC_V_RANDOM, 1},
      {"padding", 12, 16, 8, 3, 8, -4, BP_DTYPE_I64, BPC_V_RANDOM, 1},
      {"block_1", 6, 8, 4, 10, 1, 0, BP_DTYPE_I32, BPC_V_RANDOM, 0},
      {"special", 8, 24, 8, 2, 8, 0, BP_DTYPE_I64, BPC_V_SPECIAL | BPC_V_NONFINITE, 0},
      {"no_tokens", 0, 16, 8, 2, 4, 0, BP_DTYPE_I64, BPC_V_RANDOM, 0},
  };
  for (size_t t = 0; t < COUNT(kFloats); t++) {
    for (size_t k = 0; k < COUNT(specs); k++) {
      if (g->quick && !specs[k].quick) continue;
      bpc_case_t* c = bpc_gen_new(g, bpc_dtype_name(kFloats[t]), specs[k].axis, 0);
      if (!c) return;
      c->num_inputs = 4;
      c->num_outputs = 1;
      int64_t T = specs[k].T, W = specs[k].L + specs[k].R, cap = specs[k].NB * specs[k].BS;
      double lo = specs[k].values == BPC_V_RANDOM ? -4 : 0, hi = specs[k].values == BPC_V_RANDOM ? 4 : 0;
      bpc_operand_set(&c->in[0], kFloats[t], S2(T, specs[k].L), 0, specs[k].values, lo, hi);
      bpc_operand_set(&c->in[1], kFloats[t], S2(T, specs[k].R), 0, specs[k].values, lo, hi);
      bpc_operand_set(&c->in[2], kFloats[t], S3(specs[k].NB, specs[k].BS, W), 0, BPC_V_RANDOM, -1, 1);
      /* distinct slots: the result does not depend on the order of writes */
      bpc_operand_set(&c->in[3], specs[k].slots, S1(T), 0, BPC_V_DISTINCT, (double)specs[k].slot_lo,
                      (double)(cap - 1));
      outputs_inferred(c);
    }
  }
}

/* ---- gather_cache ---------------------------------------------------------------------- */

void bpc_gen_gather_cache(bpc_gen_t* g) {
  static const struct {
    const char* axis;
    int64_t B, BS, tokens, num_tokens, start_max, D0, D1;
    uint32_t idx;
    int starts, quick;
  } specs[] = {
      {"mla_576", 4, 16, 50, 50, 0, 576, 0, BP_DTYPE_I32, 0, 1},
      {"seq_starts", 3, 8, 29, 29, 13, 24, 0, BP_DTYPE_I64, 1, 1},
      {"heads_2d", 5, 4, 23, 23, 0, 3, 10, BP_DTYPE_I32, 0, 0},
      {"padding_rows", 3, 16, 20, 32, 5, 40, 0, BP_DTYPE_I64, 1, 1},
      {"block_1", 2, 1, 9, 9, 3, 7, 0, BP_DTYPE_I32, 1, 0},
      {"no_tokens", 2, 8, 0, 0, 0, 16, 0, BP_DTYPE_I64, 0, 0},
  };
  for (size_t t = 0; t < COUNT(kFloats); t++) {
    for (size_t k = 0; k < COUNT(specs); k++) {
      if (g->quick && !specs[k].quick) continue;
      bpc_case_t* c = bpc_gen_new(g, bpc_dtype_name(kFloats[t]), specs[k].axis, 0);
      if (!c) return;
      int64_t B = specs[k].B, BS = specs[k].BS;
      /* any sequence may hold every token after its start: blocks enough */
      int64_t MB = (specs[k].tokens + specs[k].start_max + BS - 1) / BS + 1, NB = B * MB + 3;
      c->num_inputs = 4;
      c->num_outputs = 1;
      bpc_shape_t cs = specs[k].D1 ? S4(NB, BS, specs[k].D0, specs[k].D1) : S3(NB, BS, specs[k].D0);
      bpc_operand_set(&c->in[0], kFloats[t], cs, 0, BPC_V_RANDOM, -3, 3);
      bpc_operand_set(&c->in[1], specs[k].idx, S2(B, MB), 0, BPC_V_DISTINCT, 0, (double)(NB - 1));
      bpc_operand_set(&c->in[2], specs[k].idx, S1(B + 1), 0, BPC_V_OFFSETS, 0, (double)specs[k].tokens);
      if (specs[k].starts) {
        bpc_operand_set(&c->in[3], specs[k].idx, S1(B), 0, BPC_V_RANDOM, 0, (double)specs[k].start_max + 0.5);
      } else {
        bpc_operand_set(&c->in[3], BP_DTYPE_INVALID, S0(), 0, 0, 0, 0);
      }
      outputs_inferred(c);
      c->has_attrs = 1;
      bp_gather_cache_attrs_t* a = &c->attrs.gather_cache;
      memset(a, 0, sizeof *a);
      a->struct_size = sizeof *a;
      a->num_tokens = specs[k].num_tokens;
    }
  }
}

/* ---- compute_slot_mapping -------------------------------------------------------------- */

void bpc_gen_slot_mapping(bpc_gen_t* g) {
  static const struct {
    const char* axis;
    int64_t S, MB, NB, BS, T, valid;
    uint32_t idx;
    int quick;
  } specs[] = {
      {"decode_and_prefill", 6, 8, 64, 16, 40, 40, BP_DTYPE_I32, 1},
      {"padding_tokens", 4, 5, 30, 8, 32, 25, BP_DTYPE_I64, 1},
      {"block_1", 3, 12, 40, 1, 10, 10, BP_DTYPE_I32, 0},
      {"one_seq", 1, 3, 9, 32, 7, 7, BP_DTYPE_I64, 0},
      {"no_tokens", 2, 4, 8, 16, 0, 0, BP_DTYPE_I64, 0},
  };
  for (size_t k = 0; k < COUNT(specs); k++) {
    if (g->quick && !specs[k].quick) continue;
    bpc_case_t* c = bpc_gen_new(g, bpc_dtype_name(specs[k].idx), specs[k].axis, 0);
    if (!c) return;
    c->num_inputs = 3;
    c->num_outputs = 1;
    uint32_t d = specs[k].idx;
    bpc_operand_set(&c->in[0], d, S2(specs[k].S, specs[k].MB), 0, BPC_V_RANDOM, 0, (double)specs[k].NB - 0.5);
    bpc_operand_set(&c->in[1], d, S1(specs[k].S + 1), 0, BPC_V_OFFSETS, 0, (double)specs[k].valid);
    bpc_operand_set(&c->in[2], d, S1(specs[k].T), 0, BPC_V_RANDOM, 0,
                    (double)(specs[k].MB * specs[k].BS) - 0.5);
    outputs_inferred(c);
    c->has_attrs = 1;
    bp_slot_mapping_attrs_t* a = &c->attrs.slot_mapping;
    memset(a, 0, sizeof *a);
    a->struct_size = sizeof *a;
    a->block_size = (uint32_t)specs[k].BS;
  }
}

/* ---- gather_logprobs ------------------------------------------------------------------- */

void bpc_gen_logprobs(bpc_gen_t* g) {
  static const struct {
    const char* axis;
    int64_t B, V;
    uint32_t k, values;
    double lo, hi;
    int quick;
  } specs[] = {
      {"top5", 16, 300, 5, BPC_V_RANDOM, -8, 8, 1},
      {"top20", 7, 1000, 20, BPC_V_RANDOM, -10, 10, 1},
      {"sampled_only", 9, 77, 0, BPC_V_RANDOM, -5, 5, 0},
      {"ties", 12, 40, 6, BPC_V_RANDOM | BPC_V_INTEGRAL, -2, 2, 1},
      {"vocab_1", 4, 1, 1, BPC_V_RANDOM, -3, 3, 0},
      {"k_is_v", 3, 90, 90, BPC_V_RANDOM, -6, 6, 0},
      {"long_row", 2, 32000, 8, BPC_V_RANDOM, -12, 12, 0},
      {"no_rows", 0, 10, 2, BPC_V_RANDOM, -1, 1, 0},
  };
  for (size_t t = 0; t < COUNT(kFloats); t++) {
    for (size_t k = 0; k < COUNT(specs); k++) {
      if (g->quick && !specs[k].quick) continue;
      bpc_case_t* c = bpc_gen_new(g, bpc_dtype_name(kFloats[t]), specs[k].axis, 0);
      if (!c) return;
      c->num_inputs = 2;
      c->num_outputs = 3;
      bpc_operand_set(&c->in[0], kFloats[t], S2(specs[k].B, specs[k].V), 0, specs[k].values, specs[k].lo,
                      specs[k].hi);
      bpc_operand_set(&c->in[1], t % 2 ? BP_DTYPE_I32 : BP_DTYPE_I64, S1(specs[k].B), 0, BPC_V_RANDOM, 0,
                      (double)specs[k].V - 0.5);
      outputs_inferred(c);
      c->has_attrs = 1;
      bp_logprobs_attrs_t* a = &c->attrs.logprobs;
      memset(a, 0, sizeof *a);
      a->struct_size = sizeof *a;
      a->num_logprobs = specs[k].k;
    }
  }
}

/* ---- swiglu_oai ------------------------------------------------------------------------ */

void bpc_gen_swiglu_oai(bpc_gen_t* g) {
  static const struct {
    const char* axis;
    bpc_shape_t s;
    double alpha, limit, lo, hi;
    uint32_t values;
    int quick;
  } specs[] = {
      {"gpt_oss", {2, {9, 128}}, 1.702, 7.0, -12, 12, BPC_V_RANDOM, 1},
      {"defaults", {3, {2, 5, 34}}, 0.0, 0.0, -10, 10, BPC_V_RANDOM, 1},
      {"no_clamp", {2, {7, 18}}, 1.0, INFINITY, -6, 6, BPC_V_RANDOM, 0},
      {"tight_limit", {1, {50}}, 2.0, 0.5, -3, 3, BPC_V_RANDOM, 0},
      {"special", {2, {6, 22}}, 1.702, 7.0, 0, 0, BPC_V_SPECIAL | BPC_V_NONFINITE, 1},
      {"no_rows", {2, {0, 8}}, 1.702, 7.0, -1, 1, BPC_V_RANDOM, 0},
  };
  for (size_t t = 0; t < COUNT(kFloats); t++) {
    for (size_t k = 0; k < COUNT(specs); k++) {
      if (g->quick && !specs[k].quick) continue;
      bpc_case_t* c = bpc_gen_new(g, bpc_dtype_name(kFloats[t]), specs[k].axis, 0);
      if (!c) return;
      c->num_inputs = 1;
      c->num_outputs = 1;
      bpc_operand_set(&c->in[0], kFloats[t], specs[k].s, 0, specs[k].values, specs[k].lo, specs[k].hi);
      outputs_inferred(c);
      c->has_attrs = 1;
      bp_swiglu_oai_attrs_t* a = &c->attrs.swiglu_oai;
      memset(a, 0, sizeof *a);
      a->struct_size = sizeof *a;
      a->alpha = specs[k].alpha;
      a->limit = specs[k].limit;
    }
  }
}
