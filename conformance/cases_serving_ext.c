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

void bpc_gen_moe_align(bpc_gen_t* g);
void bpc_gen_grouped_topk(bpc_gen_t* g);
void bpc_gen_concat_mla(bpc_gen_t* g);
void bpc_gen_gather_cache(bpc_gen_t* g);
void bpc_gen_slot_mapping(bpc_gen_t* g);
void bpc_gen_logprobs(bpc_gen_t* g);
void bpc_gen_swiglu_oai(bpc_gen_t* g);

/* ---- moe_align_block_size ------------------------------------------------------------ */

typedef struct align_row {
  bpc_row_t row;
  int64_t T, k, E, BS, lo, hi;
  uint32_t ids;
} align_row_t;

static uint32_t align_dtype(const void* row) { return ((const align_row_t*)row)->ids; }

static void align_fill(bpc_case_t* c, const void* row, const bpc_table_at_t* at) {
  const align_row_t* r = row;
  bpc_operand_set(&c->in[0], at->dtype, S2(r->T, r->k), 0, BPC_V_RANDOM, (double)r->lo, (double)r->hi + 0.5);
  bp_moe_align_attrs_t* a = BPC_CASE_ATTRS(c, moe_align);
  a->num_experts = (uint32_t)r->E;
  a->block_size = (uint32_t)r->BS;
}

void bpc_gen_moe_align(bpc_gen_t* g) {
  static const align_row_t rows[] = {
      {{"deepseek_256_b64", 1}, 37, 8, 256, 64, 0, 255, BP_DTYPE_I32},
      {{"mixtral_8_b16", 1}, 45, 2, 8, 16, 0, 7, BP_DTYPE_I64},
      {{"block_1", 0}, 13, 3, 5, 1, 0, 4, BP_DTYPE_I32},
      {{"not_local", 1}, 20, 2, 6, 4, -1, 6, BP_DTYPE_I64},
      {{"one_token", 0}, 1, 4, 16, 8, 0, 15, BP_DTYPE_I32},
      {{"no_tokens", 0}, 0, 2, 4, 16, 0, 3, BP_DTYPE_I64},
  };
  bpc_gen_table(g, &(bpc_table_t){BPC_ROWS(rows), .row_dtype = align_dtype, .num_inputs = 1, .num_outputs = 3,
                                  .fill = align_fill});
}

/* ---- grouped_topk ---------------------------------------------------------------------- */

typedef struct gtk_row {
  bpc_row_t row;
  int64_t T, E;
  uint32_t G, kg, k, scoring, renorm;
  double rsf;
  int bias, ties;
} gtk_row_t;

static void gtk_fill(bpc_case_t* c, const void* row, const bpc_table_at_t* at) {
  const gtk_row_t* r = row;
  bpc_operand_set(&c->in[0], at->dtype, S2(r->T, r->E), 0, r->ties ? BPC_V_RANDOM | BPC_V_INTEGRAL : BPC_V_RANDOM,
                  r->ties ? -2 : -4, r->ties ? 2 : 4);
  if (r->bias) bpc_operand_set(&c->in[1], at->dtype, S1(r->E), 0, BPC_V_RANDOM, -0.5, 0.5);
  else bpc_operand_set(&c->in[1], BP_DTYPE_INVALID, S0(), 0, 0, 0, 0);
  bp_grouped_topk_attrs_t* a = BPC_CASE_ATTRS(c, grouped_topk);
  a->top_k = r->k;
  a->num_expert_group = r->G;
  a->topk_group = r->kg;
  a->scoring_func = r->scoring;
  a->renormalize = r->renorm;
  a->routed_scaling_factor = r->rsf;
}

void bpc_gen_grouped_topk(bpc_gen_t* g) {
  static const gtk_row_t rows[] = {
      {{"deepseek_v3", 1}, 19, 256, 8, 4, 8, BP_MOE_SCORING_SIGMOID, 1, 2.5, 1, 0},
      {{"deepseek_v2", 1}, 11, 160, 8, 3, 6, BP_MOE_SCORING_SOFTMAX, 0, 16.0, 0, 0},
      {{"one_group_softmax", 1}, 23, 64, 1, 1, 6, BP_MOE_SCORING_SOFTMAX, 1, 0.0, 0, 0},
      {{"sigmoid_no_bias", 0}, 9, 32, 4, 2, 4, BP_MOE_SCORING_SIGMOID, 0, 1.0, 0, 0},
      {{"ties", 1}, 17, 16, 4, 2, 3, BP_MOE_SCORING_SOFTMAX, 1, 0.0, 0, 1},
      {{"all_groups", 0}, 5, 24, 3, 0, 5, BP_MOE_SCORING_SIGMOID, 1, 0.0, 1, 0},
      {{"one_token", 0}, 1, 64, 8, 4, 8, BP_MOE_SCORING_SIGMOID, 1, 2.5, 1, 0},
      {{"no_tokens", 0}, 0, 16, 4, 2, 2, BP_MOE_SCORING_SOFTMAX, 0, 0.0, 0, 0},
  };
  bpc_gen_table(g, &(bpc_table_t){BPC_ROWS(rows), BPC_FLOAT_DTYPES, .num_inputs = 2, .num_outputs = 2,
                                  .fill = gtk_fill});
}

/* ---- concat_and_cache_mla -------------------------------------------------------------- */

typedef struct mla_row {
  bpc_row_t row;
  int64_t T, L, R, NB, BS, slot_lo;
  uint32_t slots, values;
} mla_row_t;

static void mla_fill(bpc_case_t* c, const void* row, const bpc_table_at_t* at) {
  const mla_row_t* r = row;
  int64_t T = r->T, W = r->L + r->R, cap = r->NB * r->BS;
  double lo = r->values == BPC_V_RANDOM ? -4 : 0, hi = r->values == BPC_V_RANDOM ? 4 : 0;
  bpc_operand_set(&c->in[0], at->dtype, S2(T, r->L), 0, r->values, lo, hi);
  bpc_operand_set(&c->in[1], at->dtype, S2(T, r->R), 0, r->values, lo, hi);
  bpc_operand_set(&c->in[2], at->dtype, S3(r->NB, r->BS, W), 0, BPC_V_RANDOM, -1, 1);
  /* distinct slots: the result does not depend on the order of writes */
  bpc_operand_set(&c->in[3], r->slots, S1(T), 0, BPC_V_DISTINCT, (double)r->slot_lo, (double)(cap - 1));
}

void bpc_gen_concat_mla(bpc_gen_t* g) {
  static const mla_row_t rows[] = {
      {{"deepseek_512_64", 1}, 9, 512, 64, 4, 16, 0, BP_DTYPE_I64, BPC_V_RANDOM},
      {{"odd_sizes", 1}, 7, 13, 5, 5, 3, 0, BP_DTYPE_I32, BPC_V_RANDOM},
      {{"padding", 1}, 12, 16, 8, 3, 8, -4, BP_DTYPE_I64, BPC_V_RANDOM},
      {{"block_1", 0}, 6, 8, 4, 10, 1, 0, BP_DTYPE_I32, BPC_V_RANDOM},
      {{"special", 0}, 8, 24, 8, 2, 8, 0, BP_DTYPE_I64, BPC_V_SPECIAL | BPC_V_NONFINITE},
      {{"no_tokens", 0}, 0, 16, 8, 2, 4, 0, BP_DTYPE_I64, BPC_V_RANDOM},
  };
  bpc_gen_table(g, &(bpc_table_t){BPC_ROWS(rows), BPC_FLOAT_DTYPES, .num_inputs = 4, .num_outputs = 1,
                                  .fill = mla_fill});
}

/* ---- gather_cache ---------------------------------------------------------------------- */

typedef struct gc_row {
  bpc_row_t row;
  int64_t B, BS, tokens, num_tokens, start_max, D0, D1;
  uint32_t idx;
  int starts;
} gc_row_t;

static void gc_fill(bpc_case_t* c, const void* row, const bpc_table_at_t* at) {
  const gc_row_t* r = row;
  int64_t B = r->B, BS = r->BS;
  /* any sequence may hold every token after its start: blocks enough */
  int64_t MB = (r->tokens + r->start_max + BS - 1) / BS + 1, NB = B * MB + 3;
  bpc_shape_t cs = r->D1 ? S4(NB, BS, r->D0, r->D1) : S3(NB, BS, r->D0);
  bpc_operand_set(&c->in[0], at->dtype, cs, 0, BPC_V_RANDOM, -3, 3);
  bpc_operand_set(&c->in[1], r->idx, S2(B, MB), 0, BPC_V_DISTINCT, 0, (double)(NB - 1));
  bpc_operand_set(&c->in[2], r->idx, S1(B + 1), 0, BPC_V_OFFSETS, 0, (double)r->tokens);
  if (r->starts) bpc_operand_set(&c->in[3], r->idx, S1(B), 0, BPC_V_RANDOM, 0, (double)r->start_max + 0.5);
  else bpc_operand_set(&c->in[3], BP_DTYPE_INVALID, S0(), 0, 0, 0, 0);
  bp_gather_cache_attrs_t* a = BPC_CASE_ATTRS(c, gather_cache);
  a->num_tokens = r->num_tokens;
}

void bpc_gen_gather_cache(bpc_gen_t* g) {
  static const gc_row_t rows[] = {
      {{"mla_576", 1}, 4, 16, 50, 50, 0, 576, 0, BP_DTYPE_I32, 0},
      {{"seq_starts", 1}, 3, 8, 29, 29, 13, 24, 0, BP_DTYPE_I64, 1},
      {{"heads_2d", 0}, 5, 4, 23, 23, 0, 3, 10, BP_DTYPE_I32, 0},
      {{"padding_rows", 1}, 3, 16, 20, 32, 5, 40, 0, BP_DTYPE_I64, 1},
      {{"block_1", 0}, 2, 1, 9, 9, 3, 7, 0, BP_DTYPE_I32, 1},
      {{"no_tokens", 0}, 2, 8, 0, 0, 0, 16, 0, BP_DTYPE_I64, 0},
  };
  bpc_gen_table(g, &(bpc_table_t){BPC_ROWS(rows), BPC_FLOAT_DTYPES, .num_inputs = 4, .num_outputs = 1,
                                  .fill = gc_fill});
}

/* ---- compute_slot_mapping -------------------------------------------------------------- */

typedef struct slot_row {
  bpc_row_t row;
  int64_t S, MB, NB, BS, T, valid;
  uint32_t idx;
} slot_row_t;

static uint32_t slot_dtype(const void* row) { return ((const slot_row_t*)row)->idx; }

static void slot_fill(bpc_case_t* c, const void* row, const bpc_table_at_t* at) {
  const slot_row_t* r = row;
  uint32_t d = at->dtype;
  bpc_operand_set(&c->in[0], d, S2(r->S, r->MB), 0, BPC_V_RANDOM, 0, (double)r->NB - 0.5);
  bpc_operand_set(&c->in[1], d, S1(r->S + 1), 0, BPC_V_OFFSETS, 0, (double)r->valid);
  bpc_operand_set(&c->in[2], d, S1(r->T), 0, BPC_V_RANDOM, 0, (double)(r->MB * r->BS) - 0.5);
  bp_slot_mapping_attrs_t* a = BPC_CASE_ATTRS(c, slot_mapping);
  a->block_size = (uint32_t)r->BS;
}

void bpc_gen_slot_mapping(bpc_gen_t* g) {
  static const slot_row_t rows[] = {
      {{"decode_and_prefill", 1}, 6, 8, 64, 16, 40, 40, BP_DTYPE_I32},
      {{"padding_tokens", 1}, 4, 5, 30, 8, 32, 25, BP_DTYPE_I64},
      {{"block_1", 0}, 3, 12, 40, 1, 10, 10, BP_DTYPE_I32},
      {{"one_seq", 0}, 1, 3, 9, 32, 7, 7, BP_DTYPE_I64},
      {{"no_tokens", 0}, 2, 4, 8, 16, 0, 0, BP_DTYPE_I64},
  };
  bpc_gen_table(g, &(bpc_table_t){BPC_ROWS(rows), .row_dtype = slot_dtype, .num_inputs = 3, .num_outputs = 1,
                                  .fill = slot_fill});
}

/* ---- gather_logprobs ------------------------------------------------------------------- */

typedef struct lp_row {
  bpc_row_t row;
  int64_t B, V;
  uint32_t k, values;
  double lo, hi;
} lp_row_t;

static void lp_fill(bpc_case_t* c, const void* row, const bpc_table_at_t* at) {
  const lp_row_t* r = row;
  bpc_operand_set(&c->in[0], at->dtype, S2(r->B, r->V), 0, r->values, r->lo, r->hi);
  bpc_operand_set(&c->in[1], at->dtype_index % 2 ? BP_DTYPE_I32 : BP_DTYPE_I64, S1(r->B), 0, BPC_V_RANDOM, 0,
                  (double)r->V - 0.5);
  bp_logprobs_attrs_t* a = BPC_CASE_ATTRS(c, logprobs);
  a->num_logprobs = r->k;
}

void bpc_gen_logprobs(bpc_gen_t* g) {
  static const lp_row_t rows[] = {
      {{"top5", 1}, 16, 300, 5, BPC_V_RANDOM, -8, 8},
      {{"top20", 1}, 7, 1000, 20, BPC_V_RANDOM, -10, 10},
      {{"sampled_only", 0}, 9, 77, 0, BPC_V_RANDOM, -5, 5},
      {{"ties", 1}, 12, 40, 6, BPC_V_RANDOM | BPC_V_INTEGRAL, -2, 2},
      {{"vocab_1", 0}, 4, 1, 1, BPC_V_RANDOM, -3, 3},
      {{"k_is_v", 0}, 3, 90, 90, BPC_V_RANDOM, -6, 6},
      {{"long_row", 0}, 2, 32000, 8, BPC_V_RANDOM, -12, 12},
      {{"no_rows", 0}, 0, 10, 2, BPC_V_RANDOM, -1, 1},
  };
  bpc_gen_table(g, &(bpc_table_t){BPC_ROWS(rows), BPC_FLOAT_DTYPES, .num_inputs = 2, .num_outputs = 3,
                                  .fill = lp_fill});
}

/* ---- swiglu_oai ------------------------------------------------------------------------ */

typedef struct oai_row {
  bpc_row_t row;
  bpc_shape_t s;
  double alpha, limit, lo, hi;
  uint32_t values;
} oai_row_t;

static void oai_fill(bpc_case_t* c, const void* row, const bpc_table_at_t* at) {
  const oai_row_t* r = row;
  bpc_operand_set(&c->in[0], at->dtype, r->s, 0, r->values, r->lo, r->hi);
  bp_swiglu_oai_attrs_t* a = BPC_CASE_ATTRS(c, swiglu_oai);
  a->alpha = r->alpha;
  a->limit = r->limit;
}

void bpc_gen_swiglu_oai(bpc_gen_t* g) {
  static const oai_row_t rows[] = {
      {{"gpt_oss", 1}, {2, {9, 128}}, 1.702, 7.0, -12, 12, BPC_V_RANDOM},
      {{"defaults", 1}, {3, {2, 5, 34}}, 0.0, 0.0, -10, 10, BPC_V_RANDOM},
      {{"no_clamp", 0}, {2, {7, 18}}, 1.0, INFINITY, -6, 6, BPC_V_RANDOM},
      {{"tight_limit", 0}, {1, {50}}, 2.0, 0.5, -3, 3, BPC_V_RANDOM},
      {{"special", 1}, {2, {6, 22}}, 1.702, 7.0, 0, 0, BPC_V_SPECIAL | BPC_V_NONFINITE},
      {{"no_rows", 0}, {2, {0, 8}}, 1.702, 7.0, -1, 1, BPC_V_RANDOM},
  };
  bpc_gen_table(g, &(bpc_table_t){BPC_ROWS(rows), BPC_FLOAT_DTYPES, .num_inputs = 1, .num_outputs = 1,
                                  .fill = oai_fill});
}
