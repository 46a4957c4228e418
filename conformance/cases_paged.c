/* Case generators of the serving attention ops added to the paged KV cache
 * family.
 *
 * merge_attn_states: lse values of either part larger, odd head sizes, one
 *   token, special lse values (inf and -inf: an empty part; NaN; both
 *   empty), an f32 lse for half outputs and a half lse.
 * kv_cache_copy_blocks: distinct blocks (no destination is a source), one
 *   pair, no pairs, block size 1, i32 and i64 mappings.
 * paged_attention_prefill: pure prefill (no cached prefix), chunked prefill
 *   over a prefix, GQA and MQA, odd head sizes, padding rows past the last
 *   sequence (zero), a sequence of no new tokens, block size 1, a sliding
 *   window, an explicit scale.
 */
#include <string.h>

#include "cases_internal.h"

void bpc_gen_merge_attn_states(bpc_gen_t* g);
void bpc_gen_kv_cache_copy_blocks(bpc_gen_t* g);
void bpc_gen_paged_prefill(bpc_gen_t* g);

/* ---- merge_attn_states ------------------------------------------------------------ */

typedef struct merge_row {
  bpc_row_t row;
  int64_t T, H, D;
  uint32_t lse_values;
  double lo, hi;
  int same_lse_dtype; /* the lse in the output dtype (not run for f32, where it is the default) */
} merge_row_t;

static int merge_skip(const void* row, uint32_t dtype) {
  return ((const merge_row_t*)row)->same_lse_dtype && dtype == BP_DTYPE_F32;
}

static void merge_fill(bpc_case_t* c, const void* row, const bpc_table_at_t* at) {
  const merge_row_t* r = row;
  uint32_t ld = r->same_lse_dtype ? at->dtype : at->dtype == BP_DTYPE_F64 ? BP_DTYPE_F64 : BP_DTYPE_F32;
  bpc_shape_t os = S3(r->T, r->H, r->D), ls = S2(r->H, r->T);
  for (int i = 0; i < 4; i += 2) {
    bpc_operand_set(&c->in[i], at->dtype, os, 0, BPC_V_RANDOM, -2, 2);
    bpc_operand_set(&c->in[i + 1], ld, ls, 0, r->lse_values, r->lo, r->hi);
  }
}

void bpc_gen_merge_attn_states(bpc_gen_t* g) {
  static const merge_row_t rows[] = {
      {{"random", 1}, 7, 4, 16, BPC_V_RANDOM, -3, 6, 0},
      {{"odd_head", 0}, 5, 3, 13, BPC_V_RANDOM, -20, 20, 0},
      {{"one_token", 0}, 1, 8, 64, BPC_V_RANDOM, 0, 2, 0},
      {{"empty_parts", 1}, 9, 4, 8, BPC_V_SPECIAL | BPC_V_NONFINITE, -50, 50, 0},
      {{"lse_like_output", 0}, 6, 2, 8, BPC_V_RANDOM, -3, 6, 1},
  };
  bpc_gen_table(g, &(bpc_table_t){BPC_ROWS(rows), BPC_FLOAT_DTYPES, .row_skip = merge_skip, .num_inputs = 4,
                                  .num_outputs = 2, .fill = merge_fill});
}

/* ---- kv_cache_copy_blocks --------------------------------------------------------- */

typedef struct copy_blocks_row {
  bpc_row_t row;
  int64_t nb, bs, h, d, P;
  uint32_t ids;
} copy_blocks_row_t;

static void copy_blocks_fill(bpc_case_t* c, const void* row, const bpc_table_at_t* at) {
  const copy_blocks_row_t* r = row;
  bpc_shape_t cs = S4(r->nb, r->bs, r->h, r->d);
  for (int i = 0; i < 2; i++) bpc_operand_set(&c->in[i], at->dtype, cs, 0, BPC_V_SPECIAL | BPC_V_NONFINITE, 0, 0);
  /* 2P distinct blocks: no destination is a source or repeated */
  bpc_operand_set(&c->in[2], r->ids, S2(r->P, 2), 0, BPC_V_DISTINCT, 0, (double)(r->nb - 1));
}

void bpc_gen_kv_cache_copy_blocks(bpc_gen_t* g) {
  static const copy_blocks_row_t rows[] = {
      {{"pairs", 1}, 12, 4, 2, 8, 4, BP_DTYPE_I64},
      {{"one_pair", 1}, 3, 16, 1, 5, 1, BP_DTYPE_I32},
      {{"no_pairs", 0}, 3, 4, 1, 3, 0, BP_DTYPE_I64},
      {{"block_1", 0}, 20, 1, 3, 7, 10, BP_DTYPE_I32},
  };
  bpc_gen_table(g, &(bpc_table_t){BPC_ROWS(rows), BPC_FLOAT_DTYPES, .num_inputs = 3, .num_outputs = 2,
                                  .fill = copy_blocks_fill});
}

/* ---- paged_attention_prefill ------------------------------------------------------ */

typedef struct prefill_row {
  bpc_row_t row;
  /* T query rows, the sequences' rows end at `last` (rows past it pad) */
  int64_t T, last, S, H, Hkv, D, NB, BS, MB;
  double len_lo, len_hi;
  uint32_t window;
  double scale;
  uint32_t ids;
} prefill_row_t;

static void prefill_fill(bpc_case_t* c, const void* row, const bpc_table_at_t* at) {
  const prefill_row_t* r = row;
  bpc_shape_t cs = S4(r->NB, r->BS, r->Hkv, r->D);
  bpc_operand_set(&c->in[0], at->dtype, S3(r->T, r->H, r->D), 0, BPC_V_RANDOM, -2, 2);
  for (int i = 1; i < 3; i++) bpc_operand_set(&c->in[i], at->dtype, cs, 0, BPC_V_RANDOM, -2, 2);
  bpc_operand_set(&c->in[3], r->ids, S2(r->S, r->MB), 0, BPC_V_RANDOM, 0, (double)(r->NB - 1));
  bpc_operand_set(&c->in[4], r->ids, S1(r->S + 1), 0, BPC_V_OFFSETS, 0, (double)r->last);
  /* every length holds the sequence's new rows: at least `last` */
  bpc_operand_set(&c->in[5], r->ids, S1(r->S), 0, BPC_V_RANDOM, r->len_lo,
                  r->len_hi == r->len_lo ? r->len_hi + 0.5 : r->len_hi);
  bp_paged_attention_attrs_t* a = BPC_CASE_ATTRS(c, paged);
  a->sliding_window = r->window;
  a->scale = r->scale;
}

void bpc_gen_paged_prefill(bpc_gen_t* g) {
  static const prefill_row_t rows[] = {
      {{"prefill", 1}, 12, 12, 1, 4, 2, 16, 6, 4, 3, 12, 12, 0, 0, BP_DTYPE_I32},
      {{"chunked", 1}, 14, 14, 3, 4, 2, 13, 24, 4, 8, 14, 32, 0, 0, BP_DTYPE_I64},
      {{"gqa4_padded", 0}, 20, 15, 2, 8, 2, 32, 20, 16, 4, 15, 64, 0, 0, BP_DTYPE_I32},
      {{"mqa", 0}, 9, 9, 2, 6, 1, 8, 12, 4, 5, 9, 20, 0, 0, BP_DTYPE_I32},
      {{"block_1", 0}, 6, 6, 2, 4, 4, 9, 40, 1, 20, 6, 20, 0, 0, BP_DTYPE_I64},
      {{"sliding_window", 1}, 16, 16, 2, 4, 2, 16, 24, 4, 10, 16, 40, 5, 0, BP_DTYPE_I32},
      {{"scale", 0}, 8, 8, 2, 2, 1, 24, 10, 8, 3, 8, 24, 0, 0.3, BP_DTYPE_I64},
      {{"no_new_tokens", 0}, 5, 5, 4, 2, 2, 8, 16, 4, 6, 5, 24, 0, 0, BP_DTYPE_I32},
      /* several query tiles and key chunks per sequence (the CPU's tile path: 64 query
       * lanes, keys in chunks of 64 with the online softmax between them) */
      {{"long", 0}, 150, 150, 2, 4, 2, 16, 40, 16, 15, 150, 240, 0, 0, BP_DTYPE_I32},
      {{"long_window_block_5", 0}, 100, 100, 1, 2, 1, 8, 50, 5, 40, 100, 200, 70, 0, BP_DTYPE_I64},
  };
  bpc_gen_table(g, &(bpc_table_t){BPC_ROWS(rows), BPC_FLOAT_DTYPES, .num_inputs = 6, .num_outputs = 1,
                                  .fill = prefill_fill});
}
