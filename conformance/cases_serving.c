/* Case generators of the serving ops.
 *
 * sample: f32, f64, f16, bf16 logits; greedy, plain temperature, top-k,
 *   top-p, both, k >= V; 2048-row cases carry the distribution check, a
 *   vocabulary of 1, long rows (a 50k vocabulary), 1-d and 3-d logits,
 *   rows with NaN / inf / all -inf.
 * repetition_penalty: repeats, padding ids (negative, >= V), i32 and i64
 *   ids, no ids, each penalty alone and together.
 * kv_cache_append: distinct slots with padding (negative), one token, no
 *   tokens, odd head sizes, i32 and i64 slots.
 * paged_attention: GQA ratios 1, 2, 4 and MQA, odd head sizes, lengths 1
 *   and the tail of the last block, a length-0 sequence, sliding window,
 *   ALiBi, block sizes 1, 5, 16, contexts of up to 100 tokens.
 * qkv_rotary: neox and GPT-J styles, full and partial rotary dims, odd head
 *   sizes past the rotary dim, GQA and MQA, with and without bias, one
 *   token, an f32 cos_sin_cache for half-precision inputs.
 * moe_topk_softmax: k of 1, 2, 8 and all experts, with and without
 *   renormalization, ties (integer logits), one token and none.
 */
#include <string.h>

#include "cases_internal.h"

void bpc_gen_sample(bpc_gen_t* g);
void bpc_gen_penalty(bpc_gen_t* g);
void bpc_gen_kv_cache_append(bpc_gen_t* g);
void bpc_gen_paged_attention(bpc_gen_t* g);
void bpc_gen_qkv_rotary(bpc_gen_t* g);
void bpc_gen_moe_topk(bpc_gen_t* g);

/* ---- sample ---------------------------------------------------------------------- */

typedef struct smp_row {
  bpc_row_t row;
  bpc_shape_t s;
  double temperature, top_p;
  uint32_t top_k;
  uint32_t values;
  double lo, hi;
} smp_row_t;

static void smp_fill(bpc_case_t* c, const void* row, const bpc_table_at_t* at) {
  const smp_row_t* r = row;
  bpc_operand_set(&c->in[0], at->dtype, r->s, 0, r->values, r->lo, r->hi);
  bp_sample_attrs_t* a = BPC_CASE_ATTRS(c, sample);
  a->temperature = r->temperature;
  a->top_p = r->top_p;
  a->top_k = r->top_k;
  a->seed = 0x5EED0000u + at->row_index * 7919u + at->dtype_index;
  a->offset = (uint64_t)at->row_index * 3u;
}

void bpc_gen_sample(bpc_gen_t* g) {
  const smp_row_t rows[] = {
      {{"greedy", 1}, S2(64, 33), 0.0, 0.0, 0, BPC_V_RANDOM, -4, 4},
      {{"temperature", 1}, S2(2048, 10), 1.0, 0.0, 0, BPC_V_RANDOM, -3, 3},
      {{"cold", 0}, S2(2048, 12), 0.5, 0.0, 0, BPC_V_RANDOM, -2, 2},
      {{"top_k", 1}, S2(2048, 16), 1.0, 0.0, 5, BPC_V_RANDOM, -3, 3},
      {{"top_p", 1}, S2(2048, 16), 0.8, 0.9, 0, BPC_V_RANDOM, -3, 3},
      {{"top_k_top_p", 0}, S2(2048, 20), 1.2, 0.7, 8, BPC_V_RANDOM, -3, 3},
      {{"k_ge_v", 0}, S2(256, 7), 1.0, 0.0, 9, BPC_V_RANDOM, -3, 3},
      {{"vocab_1", 0}, S2(5, 1), 1.0, 0.5, 3, BPC_V_RANDOM, -3, 3},
      {{"long_vocab", 0}, S2(3, 50021), 1.0, 0.95, 0, BPC_V_RANDOM, -8, 8},
      {{"long_top_k", 0}, S2(2, 50021), 0.9, 0.0, 40, BPC_V_RANDOM, -8, 8},
      {{"1d", 0}, S1(37), 1.0, 0.0, 0, BPC_V_RANDOM, -3, 3},
      {{"3d", 0}, bpc_shape(3, (int64_t)4, (int64_t)3, (int64_t)24), 1.0, 0.9, 10, BPC_V_RANDOM, -3, 3},
      {{"special", 1}, S2(64, 6), 1.0, 0.0, 0, BPC_V_SPECIAL | BPC_V_NONFINITE, -1e3, 1e3},
      {{"special_greedy", 0}, S2(64, 6), 0.0, 0.0, 0, BPC_V_SPECIAL | BPC_V_NONFINITE, -1e3, 1e3},
      {{"special_top_p", 0}, S2(64, 6), 1.0, 0.5, 2, BPC_V_SPECIAL | BPC_V_NONFINITE, -1e3, 1e3},
  };
  bpc_gen_table(g, &(bpc_table_t){BPC_ROWS(rows), BPC_FLOAT_DTYPES, .num_inputs = 1, .num_outputs = 1,
                                  .fill = smp_fill});
}

/* ---- repetition_penalty ------------------------------------------------------- */

typedef struct pen_row {
  bpc_row_t row;
  double rep, presence, frequency;
  uint32_t ids;
  int64_t L;
} pen_row_t;

/* variant 0: 2-d rows, 1: 1-d */
static void pen_fill(bpc_case_t* c, const void* row, const bpc_table_at_t* at) {
  const pen_row_t* r = row;
  int v = at->variant;
  bpc_shape_t ls = v ? S1(50) : S2(6, 50), ts = v ? S1(r->L) : S2(6, r->L);
  bpc_operand_set(&c->in[0], at->dtype, ls, 0, BPC_V_RANDOM, -5, 5);
  bpc_operand_set(&c->in[1], r->ids, ts, 0, BPC_V_RANDOM, -3, 55);
  bp_penalty_attrs_t* a = BPC_CASE_ATTRS(c, penalty);
  a->repetition = r->rep;
  a->presence = r->presence;
  a->frequency = r->frequency;
}

void bpc_gen_penalty(bpc_gen_t* g) {
  static const pen_row_t rows[] = {
      {{"repetition", 1}, 1.3, 0.0, 0.0, BP_DTYPE_I64, 24},
      {{"presence", 0}, 0.0, 0.5, 0.0, BP_DTYPE_I64, 24},
      {{"frequency", 0}, 1.0, 0.0, 0.25, BP_DTYPE_I32, 24},
      {{"all", 1}, 1.7, 0.4, 0.3, BP_DTYPE_I32, 40},
      {{"below_one", 0}, 0.8, 0.0, 0.0, BP_DTYPE_I64, 8},
      {{"no_ids", 0}, 1.3, 0.5, 0.5, BP_DTYPE_I64, 0},
  };
  bpc_gen_table(g, &(bpc_table_t){BPC_ROWS(rows), BPC_FLOAT_DTYPES, .variants = 2, .num_inputs = 2,
                                  .num_outputs = 1, .fill = pen_fill});
}

/* ---- kv_cache_append ------------------------------------------------------------ */

typedef struct kv_row {
  bpc_row_t row;
  int64_t nb, bs, h, d, T;
  uint32_t slots;
} kv_row_t;

static void kv_fill(bpc_case_t* c, const void* row, const bpc_table_at_t* at) {
  const kv_row_t* r = row;
  bpc_shape_t cs = S4(r->nb, r->bs, r->h, r->d);
  bpc_shape_t rs = S3(r->T, r->h, r->d);
  for (int i = 0; i < 2; i++) bpc_operand_set(&c->in[i], at->dtype, cs, 0, BPC_V_RANDOM, -4, 4);
  for (int i = 2; i < 4; i++) bpc_operand_set(&c->in[i], at->dtype, rs, 0, BPC_V_RANDOM, -4, 4);
  /* distinct slots; the negative ones (up to 3) are padding */
  bpc_operand_set(&c->in[4], r->slots, S1(r->T), 0, BPC_V_DISTINCT, -3, (double)(r->nb * r->bs - 1));
}

void bpc_gen_kv_cache_append(bpc_gen_t* g) {
  static const kv_row_t rows[] = {
      {{"decode", 1}, 6, 4, 2, 8, 5, BP_DTYPE_I64},
      {{"prefill", 1}, 8, 16, 2, 5, 70, BP_DTYPE_I32},
      {{"one_token", 0}, 3, 4, 1, 3, 1, BP_DTYPE_I64},
      {{"no_tokens", 0}, 3, 4, 1, 3, 0, BP_DTYPE_I64},
      {{"block_1", 0}, 20, 1, 3, 7, 9, BP_DTYPE_I32},
  };
  bpc_gen_table(g, &(bpc_table_t){BPC_ROWS(rows), BPC_FLOAT_DTYPES, .num_inputs = 5, .num_outputs = 2,
                                  .fill = kv_fill});
}

/* ---- paged_attention ------------------------------------------------------------ */

typedef struct pa_row {
  bpc_row_t row;
  int64_t S, H, Hkv, D, NB, BS, MB;
  double len_lo, len_hi;
  uint32_t window;
  int alibi;
  uint32_t ids;
} pa_row_t;

static void pa_fill(bpc_case_t* c, const void* row, const bpc_table_at_t* at) {
  const pa_row_t* r = row;
  int64_t S = r->S, H = r->H, D = r->D;
  bpc_shape_t cs = S4(r->NB, r->BS, r->Hkv, D);
  bpc_operand_set(&c->in[0], at->dtype, S3(S, H, D), 0, BPC_V_RANDOM, -2, 2);
  for (int i = 1; i < 3; i++) bpc_operand_set(&c->in[i], at->dtype, cs, 0, BPC_V_RANDOM, -2, 2);
  bpc_operand_set(&c->in[3], r->ids, S2(S, r->MB), 0, BPC_V_RANDOM, 0, (double)(r->NB - 1));
  bpc_operand_set(&c->in[4], r->ids, S1(S), 0, BPC_V_RANDOM, r->len_lo,
                  r->len_hi == r->len_lo ? r->len_hi + 0.5 : r->len_hi);
  if (r->alibi) bpc_operand_set(&c->in[5], BP_DTYPE_F32, S1(H), 0, BPC_V_RANDOM, -1, -0.01);
  else bpc_operand_set(&c->in[5], BP_DTYPE_INVALID, S0(), 0, 0, 0, 0);
  bp_paged_attention_attrs_t* a = BPC_CASE_ATTRS(c, paged);
  a->sliding_window = r->window;
}

void bpc_gen_paged_attention(bpc_gen_t* g) {
  static const pa_row_t rows[] = {
      {{"mha", 1}, 3, 4, 4, 16, 12, 4, 5, 1, 20, 0, 0, BP_DTYPE_I32},
      {{"gqa2_odd_head", 1}, 4, 4, 2, 13, 10, 4, 6, 1, 24, 0, 0, BP_DTYPE_I32},
      {{"gqa4", 0}, 2, 8, 2, 32, 16, 16, 3, 17, 48, 0, 0, BP_DTYPE_I64},
      {{"mqa", 0}, 3, 6, 1, 8, 9, 4, 4, 1, 16, 0, 0, BP_DTYPE_I32},
      {{"length_1", 1}, 4, 2, 1, 8, 6, 4, 2, 1, 1, 0, 0, BP_DTYPE_I32},
      {{"length_0", 0}, 3, 2, 2, 8, 6, 4, 2, 0, 0, 0, 0, BP_DTYPE_I32},
      {{"block_1", 0}, 2, 4, 2, 9, 40, 1, 30, 1, 30, 0, 0, BP_DTYPE_I64},
      {{"sliding_window", 1}, 3, 4, 2, 16, 20, 4, 8, 10, 32, 7, 0, BP_DTYPE_I32},
      {{"alibi", 1}, 3, 4, 4, 16, 12, 4, 5, 1, 20, 0, 1, BP_DTYPE_I32},
      {{"alibi_window_gqa", 0}, 2, 8, 2, 24, 16, 8, 4, 9, 32, 12, 1, BP_DTYPE_I64},
      /* contexts of several groups of 16 tokens (the CPU scores and sums them 16 or 8
       * at a time), groups across blocks of 5, a head size with a tail past 16 */
      {{"long_context", 0}, 2, 8, 2, 64, 24, 16, 6, 40, 96, 0, 0, BP_DTYPE_I32},
      {{"long_block_5_alibi", 0}, 2, 4, 4, 20, 30, 5, 20, 50, 100, 0, 1, BP_DTYPE_I64},
  };
  bpc_gen_table(g, &(bpc_table_t){BPC_ROWS(rows), BPC_FLOAT_DTYPES, .num_inputs = 6, .num_outputs = 1,
                                  .fill = pa_fill});
}

/* ---- qkv_rotary ---------------------------------------------------------------- */

typedef struct qkv_row {
  bpc_row_t row;
  int64_t T, hidden, H, Hkv, D, R, maxpos;
  uint32_t interleaved;
  int bias, f32_cache;
} qkv_row_t;

/* An f32 cos_sin_cache is the case's own dtype for f32 inputs: no case. */
static int qkv_skip(const void* row, uint32_t dtype) {
  return ((const qkv_row_t*)row)->f32_cache && dtype == BP_DTYPE_F32;
}

static void qkv_fill(bpc_case_t* c, const void* row, const bpc_table_at_t* at) {
  const qkv_row_t* r = row;
  int64_t N = (r->H + 2 * r->Hkv) * r->D;
  bpc_operand_set(&c->in[0], at->dtype, S2(r->T, r->hidden), 0, BPC_V_RANDOM, -1, 1);
  bpc_operand_set(&c->in[1], at->dtype, S2(N, r->hidden), 0, BPC_V_RANDOM, -1, 1);
  if (r->bias) bpc_operand_set(&c->in[2], at->dtype, S1(N), 0, BPC_V_RANDOM, -1, 1);
  else bpc_operand_set(&c->in[2], BP_DTYPE_INVALID, S0(), 0, 0, 0, 0);
  bpc_operand_set(&c->in[3], BP_DTYPE_I64, S1(r->T), 0, BPC_V_RANDOM, 0, (double)(r->maxpos - 1));
  bpc_operand_set(&c->in[4], r->f32_cache ? BP_DTYPE_F32 : at->dtype, S2(r->maxpos, r->R), 0, BPC_V_RANDOM, -1, 1);
  bp_qkv_rotary_attrs_t* a = BPC_CASE_ATTRS(c, qkv);
  a->num_heads = (uint32_t)r->H;
  a->num_kv_heads = (uint32_t)r->Hkv;
  a->interleaved = r->interleaved;
}

void bpc_gen_qkv_rotary(bpc_gen_t* g) {
  static const qkv_row_t rows[] = {
      {{"neox", 1}, 5, 24, 4, 2, 8, 8, 16, 0, 1, 0},
      {{"gptj", 1}, 5, 24, 4, 2, 8, 8, 16, 1, 1, 0},
      {{"partial_odd_head", 0}, 3, 17, 2, 1, 9, 4, 8, 0, 0, 0},
      {{"partial_gptj", 0}, 4, 32, 4, 4, 16, 6, 12, 1, 1, 0},
      {{"mqa", 0}, 6, 40, 6, 1, 12, 12, 20, 0, 1, 0},
      {{"one_token", 0}, 1, 64, 8, 2, 16, 16, 4, 0, 1, 0},
      {{"f32_cache", 1}, 5, 24, 4, 2, 8, 8, 16, 0, 1, 1},
  };
  bpc_gen_table(g, &(bpc_table_t){BPC_ROWS(rows), BPC_FLOAT_DTYPES, .row_skip = qkv_skip, .num_inputs = 5,
                                  .num_outputs = 3, .fill = qkv_fill});
}

/* ---- moe_topk_softmax ------------------------------------------------------------ */

typedef struct moe_row {
  bpc_row_t row;
  int64_t T, E;
  uint32_t k, renorm, values;
} moe_row_t;

static void moe_fill(bpc_case_t* c, const void* row, const bpc_table_at_t* at) {
  const moe_row_t* r = row;
  int ties = r->values == BPC_V_INTEGRAL;
  bpc_operand_set(&c->in[0], at->dtype, S2(r->T, r->E), 0, r->values, ties ? -2 : -4, ties ? 2 : 4);
  bp_moe_topk_attrs_t* a = BPC_CASE_ATTRS(c, moe_topk);
  a->top_k = r->k;
  a->renormalize = r->renorm;
}

void bpc_gen_moe_topk(bpc_gen_t* g) {
  static const moe_row_t rows[] = {
      {{"top2_renorm", 1}, 33, 8, 2, 1, BPC_V_RANDOM},
      {{"top2", 0}, 33, 8, 2, 0, BPC_V_RANDOM},
      {{"top1", 0}, 17, 16, 1, 0, BPC_V_RANDOM},
      {{"top8_of_64", 1}, 9, 64, 8, 1, BPC_V_RANDOM},
      {{"all", 0}, 5, 6, 6, 1, BPC_V_RANDOM},
      {{"ties", 1}, 40, 8, 3, 1, BPC_V_INTEGRAL},
      {{"one_token", 0}, 1, 60, 4, 1, BPC_V_RANDOM},
      {{"no_tokens", 0}, 0, 8, 2, 1, BPC_V_RANDOM},
  };
  bpc_gen_table(g, &(bpc_table_t){BPC_ROWS(rows), BPC_FLOAT_DTYPES, .num_inputs = 1, .num_outputs = 2,
                                  .fill = moe_fill});
}
