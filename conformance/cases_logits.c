/* Case generators of the serving helpers of ABI 1.3.
 *
 * rotary_embedding_pos: GPT-NeoX and GPT-J styles, [T, H * D] and
 *   [T, H, D] layouts, partial rotary with an odd head size, GQA and MQA,
 *   an f32 cache for half inputs, one token, no tokens.
 * logits_softcap: caps 30 (Gemma 2's final logits) and 50 (its attention
 *   scores), values far past the cap, special values (+-inf, NaN, +-0).
 * top_k_top_p_mask: each filter alone and together, min-p, k >= V, V = 1,
 *   a long vocabulary, ties (integer logits), rows with NaN and +-inf.
 * rejection_sample: random with draft probabilities and without (n-gram
 *   drafts), greedy with and without, one draft, none, V = 2, V = 3001;
 *   f32, f64 and bf16 probabilities, i32 and i64 draft ids.
 */
#include <string.h>

#include "cases_internal.h"

void bpc_gen_rope_pos(bpc_gen_t* g);
void bpc_gen_softcap(bpc_gen_t* g);
void bpc_gen_logits_mask(bpc_gen_t* g);
void bpc_gen_rejection(bpc_gen_t* g);

/* ---- rotary_embedding_pos ---------------------------------------------------------- */

typedef struct rope_row {
  bpc_row_t row;
  int64_t T, H, Hkv, D, R, maxpos;
  uint32_t interleaved;
  int heads_dim, f32_cache;
} rope_row_t;

/* An f32 cos_sin_cache is the case's own dtype for f32 inputs: no case. */
static int rope_skip(const void* row, uint32_t dtype) {
  return ((const rope_row_t*)row)->f32_cache && dtype == BP_DTYPE_F32;
}

static void rope_fill(bpc_case_t* c, const void* row, const bpc_table_at_t* at) {
  const rope_row_t* r = row;
  int64_t T = r->T, D = r->D;
  bpc_shape_t qs = r->heads_dim ? S3(T, r->H, D) : S2(T, r->H * D);
  bpc_shape_t ks = r->heads_dim ? S3(T, r->Hkv, D) : S2(T, r->Hkv * D);
  bpc_operand_set(&c->in[0], at->dtype, qs, 0, BPC_V_RANDOM, -2, 2);
  bpc_operand_set(&c->in[1], at->dtype, ks, 0, BPC_V_RANDOM, -2, 2);
  bpc_operand_set(&c->in[2], at->dtype_index % 2 ? BP_DTYPE_I32 : BP_DTYPE_I64, S1(T), 0, BPC_V_RANDOM, 0,
                  (double)(r->maxpos - 1));
  bpc_operand_set(&c->in[3], r->f32_cache ? BP_DTYPE_F32 : at->dtype, S2(r->maxpos, r->R), 0, BPC_V_RANDOM, -1, 1);
  bp_qkv_rotary_attrs_t* a = BPC_CASE_ATTRS(c, qkv);
  a->num_heads = (uint32_t)r->H;
  a->num_kv_heads = (uint32_t)r->Hkv;
  a->interleaved = r->interleaved;
}

void bpc_gen_rope_pos(bpc_gen_t* g) {
  static const rope_row_t rows[] = {
      {{"neox", 1}, 5, 4, 2, 8, 8, 16, 0, 0, 0},
      {{"gptj", 1}, 5, 4, 2, 8, 8, 16, 1, 0, 0},
      {{"neox_3d", 0}, 4, 4, 4, 16, 16, 9, 0, 1, 0},
      {{"partial_odd_head", 0}, 3, 2, 1, 9, 4, 8, 0, 0, 0},
      {{"partial_gptj_3d", 0}, 4, 4, 2, 16, 6, 12, 1, 1, 0},
      {{"mqa", 0}, 6, 6, 1, 12, 12, 20, 0, 0, 0},
      {{"one_token", 0}, 1, 8, 2, 64, 64, 4, 0, 0, 0},
      {{"no_tokens", 0}, 0, 4, 2, 8, 8, 16, 0, 0, 0},
      {{"f32_cache", 1}, 5, 4, 2, 8, 8, 16, 0, 0, 1},
  };
  bpc_gen_table(g, &(bpc_table_t){BPC_ROWS(rows), BPC_FLOAT_DTYPES, .row_skip = rope_skip, .num_inputs = 4,
                                  .num_outputs = 2, .fill = rope_fill});
}

/* ---- logits_softcap ------------------------------------------------------------------ */

typedef struct cap_row {
  bpc_row_t row;
  double cap, lo, hi;
  uint32_t values;
} cap_row_t;

static void cap_fill(bpc_case_t* c, const void* row, const bpc_table_at_t* at) {
  const cap_row_t* r = row;
  bpc_operand_set(&c->in[0], at->dtype, S2(7, 131), 0, r->values, r->lo, r->hi);
  BPC_CASE_ATTRS(c, softcap)->cap = r->cap;
}

void bpc_gen_softcap(bpc_gen_t* g) {
  static const cap_row_t rows[] = {
      {{"cap30", 1}, 30.0, -60, 60, BPC_V_RANDOM},
      {{"cap50_far", 0}, 50.0, -1000, 1000, BPC_V_RANDOM},
      {{"small", 0}, 30.0, -1, 1, BPC_V_RANDOM},
      {{"special", 1}, 30.0, -1e4, 1e4, BPC_V_SPECIAL | BPC_V_NONFINITE},
  };
  bpc_gen_table(g, &(bpc_table_t){BPC_ROWS(rows), BPC_FLOAT_DTYPES, .num_inputs = 1, .num_outputs = 1,
                                  .fill = cap_fill});
}

/* ---- top_k_top_p_mask ---------------------------------------------------------------- */

typedef struct mask_row {
  bpc_row_t row;
  int64_t rows, V;
  uint32_t top_k;
  double top_p, min_p;
  uint32_t values;
  double lo, hi;
} mask_row_t;

static void mask_fill(bpc_case_t* c, const void* row, const bpc_table_at_t* at) {
  const mask_row_t* r = row;
  bpc_operand_set(&c->in[0], at->dtype, S2(r->rows, r->V), 0, r->values, r->lo, r->hi);
  bp_logits_mask_attrs_t* a = BPC_CASE_ATTRS(c, logits_mask);
  a->top_k = r->top_k;
  a->top_p = r->top_p;
  a->min_p = r->min_p;
}

void bpc_gen_logits_mask(bpc_gen_t* g) {
  static const mask_row_t rows[] = {
      {{"top_k", 1}, 16, 40, 5, 0.0, 0.0, BPC_V_RANDOM, -3, 3},
      {{"top_p", 1}, 16, 40, 0, 0.8, 0.0, BPC_V_RANDOM, -3, 3},
      {{"min_p", 1}, 16, 40, 0, 0.0, 0.1, BPC_V_RANDOM, -3, 3},
      {{"all_three", 0}, 16, 64, 10, 0.7, 0.05, BPC_V_RANDOM, -3, 3},
      {{"none", 0}, 4, 33, 0, 0.0, 0.0, BPC_V_RANDOM, -3, 3},
      {{"k_ge_v", 0}, 8, 7, 9, 0.9, 0.0, BPC_V_RANDOM, -3, 3},
      {{"vocab_1", 0}, 5, 1, 3, 0.5, 0.5, BPC_V_RANDOM, -3, 3},
      {{"long_vocab", 0}, 2, 2003, 50, 0.95, 0.01, BPC_V_RANDOM, -8, 8},
      {{"ties", 1}, 32, 12, 3, 0.6, 0.0, BPC_V_RANDOM | BPC_V_INTEGRAL, -2, 2},
      {{"special", 0}, 32, 6, 2, 0.5, 0.2, BPC_V_SPECIAL | BPC_V_NONFINITE, -1e3, 1e3},
  };
  bpc_gen_table(g, &(bpc_table_t){BPC_ROWS(rows), BPC_FLOAT_DTYPES, .num_inputs = 1, .num_outputs = 1,
                                  .fill = mask_fill});
}

/* ---- rejection_sample ---------------------------------------------------------------- */

typedef struct rej_row {
  bpc_row_t row;
  int64_t B, K, V;
  uint32_t greedy;
  int draft_probs;
} rej_row_t;

/* Probabilities: random rows in [0, 1) scaled to sum to 1 are left to the
 * reference (the rule does not need normalized rows; vLLM's are). Draft
 * ids cover the vocabulary; a near-copy draft (draft_probs close to the
 * target's) accepts most tokens, an independent one rejects many. */
static void rej_fill(bpc_case_t* c, const void* row, const bpc_table_at_t* at) {
  const rej_row_t* r = row;
  int64_t B = r->B, K = r->K, V = r->V;
  size_t t = at->dtype_index;
  bpc_operand_set(&c->in[0], t == 1 ? BP_DTYPE_I32 : BP_DTYPE_I64, S2(B, K), 0, BPC_V_RANDOM | BPC_V_INTEGRAL, 0,
                  (double)(V - 1));
  /* small vocabularies: probabilities around 1 / V make both outcomes common */
  bpc_operand_set(&c->in[1], at->dtype, S3(B, K, V), 0, BPC_V_RANDOM, 0, 2.0 / (double)V);
  bpc_operand_set(&c->in[2], BP_DTYPE_I64, S1(B), 0, BPC_V_RANDOM | BPC_V_INTEGRAL, 0, (double)(V - 1));
  if (r->draft_probs) bpc_operand_set(&c->in[3], at->dtype, S3(B, K, V), 0, BPC_V_RANDOM, 0, 2.0 / (double)V);
  else bpc_operand_set(&c->in[3], BP_DTYPE_INVALID, S0(), 0, 0, 0, 0);
  bp_rejection_attrs_t* a = BPC_CASE_ATTRS(c, rejection);
  a->greedy = r->greedy;
  a->seed = 1234 + at->row_index;
  a->offset = 3 * t;
}

void bpc_gen_rejection(bpc_gen_t* g) {
  static const rej_row_t rows[] = {
      {{"random", 1}, 64, 4, 16, 0, 1},
      {{"ngram", 1}, 64, 3, 12, 0, 0},
      {{"greedy", 1}, 32, 5, 9, 1, 0},
      {{"greedy_probs", 0}, 16, 2, 30, 1, 1},
      {{"one_draft", 0}, 128, 1, 5, 0, 1},
      {{"no_drafts", 0}, 8, 0, 7, 0, 1},
      {{"vocab_2", 0}, 8, 3, 2, 0, 1},
      {{"long_vocab", 0}, 4, 3, 3001, 0, 1},
  };
  static const uint32_t probs[] = {BP_DTYPE_F32, BP_DTYPE_F64, BP_DTYPE_BF16};
  bpc_gen_table(g, &(bpc_table_t){BPC_ROWS(rows), .dtypes = probs, .num_dtypes = 3, .num_inputs = 4,
                                  .num_outputs = 1, .fill = rej_fill});
}
