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

#define COUNT(a) (sizeof(a) / sizeof((a)[0]))

void bpc_gen_merge_attn_states(bpc_gen_t* g);
void bpc_gen_kv_cache_copy_blocks(bpc_gen_t* g);
void bpc_gen_paged_prefill(bpc_gen_t* g);

static const uint32_t kFloats[] = {BP_DTYPE_F32, BP_DTYPE_F64, BP_DTYPE_F16, BP_DTYPE_BF16};

/* ---- merge_attn_states ------------------------------------------------------------ */

void bpc_gen_merge_attn_states(bpc_gen_t* g) {
  static const struct {
    const char* axis;
    int64_t T, H, D;
    uint32_t lse_values;
    double lo, hi;
    int same_lse_dtype, quick;
  } specs[] = {
      {"random", 7, 4, 16, BPC_V_RANDOM, -3, 6, 0, 1},
      {"odd_head", 5, 3, 13, BPC_V_RANDOM, -20, 20, 0, 0},
      {"one_token", 1, 8, 64, BPC_V_RANDOM, 0, 2, 0, 0},
      {"empty_parts", 9, 4, 8, BPC_V_SPECIAL | BPC_V_NONFINITE, -50, 50, 0, 1},
      {"lse_like_output", 6, 2, 8, BPC_V_RANDOM, -3, 6, 1, 0},
  };
  for (size_t t = 0; t < COUNT(kFloats); t++) {
    for (size_t k = 0; k < COUNT(specs); k++) {
      if (g->quick && !specs[k].quick) continue;
      if (specs[k].same_lse_dtype && kFloats[t] == BP_DTYPE_F32) continue;
      bpc_case_t* c = bpc_gen_new(g, bpc_dtype_name(kFloats[t]), specs[k].axis, 0);
      if (!c) return;
      c->num_inputs = 4;
      c->num_outputs = 2;
      uint32_t ld = specs[k].same_lse_dtype ? kFloats[t]
                    : kFloats[t] == BP_DTYPE_F64 ? BP_DTYPE_F64 : BP_DTYPE_F32;
      bpc_shape_t os = S3(specs[k].T, specs[k].H, specs[k].D), ls = S2(specs[k].H, specs[k].T);
      for (int i = 0; i < 4; i += 2) {
        bpc_operand_set(&c->in[i], kFloats[t], os, 0, BPC_V_RANDOM, -2, 2);
        bpc_operand_set(&c->in[i + 1], ld, ls, 0, specs[k].lse_values, specs[k].lo, specs[k].hi);
      }
      for (int o = 0; o < 2; o++) bpc_operand_set(&c->out[o], BP_DTYPE_INVALID, S0(), 0, 0, 0, 0);
    }
  }
}

/* ---- kv_cache_copy_blocks --------------------------------------------------------- */

void bpc_gen_kv_cache_copy_blocks(bpc_gen_t* g) {
  static const struct {
    const char* axis;
    int64_t nb, bs, h, d, P;
    uint32_t ids;
    int quick;
  } specs[] = {
      {"pairs", 12, 4, 2, 8, 4, BP_DTYPE_I64, 1},
      {"one_pair", 3, 16, 1, 5, 1, BP_DTYPE_I32, 1},
      {"no_pairs", 3, 4, 1, 3, 0, BP_DTYPE_I64, 0},
      {"block_1", 20, 1, 3, 7, 10, BP_DTYPE_I32, 0},
  };
  for (size_t t = 0; t < COUNT(kFloats); t++) {
    for (size_t k = 0; k < COUNT(specs); k++) {
      if (g->quick && !specs[k].quick) continue;
      bpc_case_t* c = bpc_gen_new(g, bpc_dtype_name(kFloats[t]), specs[k].axis, 0);
      if (!c) return;
      c->num_inputs = 3;
      c->num_outputs = 2;
      bpc_shape_t cs = S4(specs[k].nb, specs[k].bs, specs[k].h, specs[k].d);
      for (int i = 0; i < 2; i++) {
        bpc_operand_set(&c->in[i], kFloats[t], cs, 0, BPC_V_SPECIAL | BPC_V_NONFINITE, 0, 0);
      }
      /* 2P distinct blocks: no destination is a source or repeated */
      bpc_operand_set(&c->in[2], specs[k].ids, S2(specs[k].P, 2), 0, BPC_V_DISTINCT, 0,
                      (double)(specs[k].nb - 1));
      for (int o = 0; o < 2; o++) bpc_operand_set(&c->out[o], BP_DTYPE_INVALID, S0(), 0, 0, 0, 0);
    }
  }
}

/* ---- paged_attention_prefill ------------------------------------------------------ */

void bpc_gen_paged_prefill(bpc_gen_t* g) {
  static const struct {
    const char* axis;
    int64_t T, last, S, H, Hkv, D, NB, BS, MB;
    double len_lo, len_hi;
    uint32_t window;
    double scale;
    uint32_t ids;
    int quick;
  } specs[] = {
      /* T query rows, the sequences' rows end at `last` (rows past it pad) */
      {"prefill", 12, 12, 1, 4, 2, 16, 6, 4, 3, 12, 12, 0, 0, BP_DTYPE_I32, 1},
      {"chunked", 14, 14, 3, 4, 2, 13, 24, 4, 8, 14, 32, 0, 0, BP_DTYPE_I64, 1},
      {"gqa4_padded", 20, 15, 2, 8, 2, 32, 20, 16, 4, 15, 64, 0, 0, BP_DTYPE_I32, 0},
      {"mqa", 9, 9, 2, 6, 1, 8, 12, 4, 5, 9, 20, 0, 0, BP_DTYPE_I32, 0},
      {"block_1", 6, 6, 2, 4, 4, 9, 40, 1, 20, 6, 20, 0, 0, BP_DTYPE_I64, 0},
      {"sliding_window", 16, 16, 2, 4, 2, 16, 24, 4, 10, 16, 40, 5, 0, BP_DTYPE_I32, 1},
      {"scale", 8, 8, 2, 2, 1, 24, 10, 8, 3, 8, 24, 0, 0.3, BP_DTYPE_I64, 0},
      {"no_new_tokens", 5, 5, 4, 2, 2, 8, 16, 4, 6, 5, 24, 0, 0, BP_DTYPE_I32, 0},
  };
  for (size_t t = 0; t < COUNT(kFloats); t++) {
    for (size_t k = 0; k < COUNT(specs); k++) {
      if (g->quick && !specs[k].quick) continue;
      bpc_case_t* c = bpc_gen_new(g, bpc_dtype_name(kFloats[t]), specs[k].axis, 0);
      if (!c) return;
      c->num_inputs = 6;
      c->num_outputs = 1;
      int64_t S = specs[k].S, H = specs[k].H, D = specs[k].D;
      bpc_shape_t cs = S4(specs[k].NB, specs[k].BS, specs[k].Hkv, D);
      bpc_operand_set(&c->in[0], kFloats[t], S3(specs[k].T, H, D), 0, BPC_V_RANDOM, -2, 2);
      for (int i = 1; i < 3; i++) bpc_operand_set(&c->in[i], kFloats[t], cs, 0, BPC_V_RANDOM, -2, 2);
      bpc_operand_set(&c->in[3], specs[k].ids, S2(S, specs[k].MB), 0, BPC_V_RANDOM, 0,
                      (double)(specs[k].NB - 1));
      bpc_operand_set(&c->in[4], specs[k].ids, S1(S + 1), 0, BPC_V_OFFSETS, 0,
                      (double)specs[k].last);
      /* every length holds the sequence's new rows: at least `last` */
      bpc_operand_set(&c->in[5], specs[k].ids, S1(S), 0, BPC_V_RANDOM, specs[k].len_lo,
                      specs[k].len_hi == specs[k].len_lo ? specs[k].len_hi + 0.5 : specs[k].len_hi);
      bpc_operand_set(&c->out[0], BP_DTYPE_INVALID, S0(), 0, 0, 0, 0);
      c->has_attrs = 1;
      bp_paged_attention_attrs_t* a = &c->attrs.paged;
      memset(a, 0, sizeof *a);
      a->struct_size = sizeof *a;
      a->sliding_window = specs[k].window;
      a->scale = specs[k].scale;
    }
  }
}
