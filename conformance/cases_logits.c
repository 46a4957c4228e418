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

#define COUNT(a) (sizeof(a) / sizeof((a)[0]))

void bpc_gen_rope_pos(bpc_gen_t* g);
void bpc_gen_softcap(bpc_gen_t* g);
void bpc_gen_logits_mask(bpc_gen_t* g);
void bpc_gen_rejection(bpc_gen_t* g);

static const uint32_t kFloats[] = {BP_DTYPE_F32, BP_DTYPE_F64, BP_DTYPE_F16, BP_DTYPE_BF16};

/* ---- rotary_embedding_pos ---------------------------------------------------------- */

void bpc_gen_rope_pos(bpc_gen_t* g) {
  static const struct {
    const char* axis;
    int64_t T, H, Hkv, D, R, maxpos;
    uint32_t interleaved;
    int heads_dim, f32_cache, quick;
  } specs[] = {
      {"neox", 5, 4, 2, 8, 8, 16, 0, 0, 0, 1},
      {"gptj", 5, 4, 2, 8, 8, 16, 1, 0, 0, 1},
      {"neox_3d", 4, 4, 4, 16, 16, 9, 0, 1, 0, 0},
      {"partial_odd_head", 3, 2, 1, 9, 4, 8, 0, 0, 0, 0},
      {"partial_gptj_3d", 4, 4, 2, 16, 6, 12, 1, 1, 0, 0},
      {"mqa", 6, 6, 1, 12, 12, 20, 0, 0, 0, 0},
      {"one_token", 1, 8, 2, 64, 64, 4, 0, 0, 0, 0},
      {"no_tokens", 0, 4, 2, 8, 8, 16, 0, 0, 0, 0},
      {"f32_cache", 5, 4, 2, 8, 8, 16, 0, 0, 1, 1},
  };
  for (size_t t = 0; t < COUNT(kFloats); t++) {
    for (size_t k = 0; k < COUNT(specs); k++) {
      if (g->quick && !specs[k].quick) continue;
      if (specs[k].f32_cache && kFloats[t] == BP_DTYPE_F32) continue;
      bpc_case_t* c = bpc_gen_new(g, bpc_dtype_name(kFloats[t]), specs[k].axis, 0);
      if (!c) return;
      c->num_inputs = 4;
      c->num_outputs = 2;
      int64_t T = specs[k].T, D = specs[k].D;
      bpc_shape_t qs = specs[k].heads_dim ? S3(T, specs[k].H, D) : S2(T, specs[k].H * D);
      bpc_shape_t ks = specs[k].heads_dim ? S3(T, specs[k].Hkv, D) : S2(T, specs[k].Hkv * D);
      bpc_operand_set(&c->in[0], kFloats[t], qs, 0, BPC_V_RANDOM, -2, 2);
      bpc_operand_set(&c->in[1], kFloats[t], ks, 0, BPC_V_RANDOM, -2, 2);
      bpc_operand_set(&c->in[2], t % 2 ? BP_DTYPE_I32 : BP_DTYPE_I64, S1(T), 0, BPC_V_RANDOM, 0,
                      (double)(specs[k].maxpos - 1));
      bpc_operand_set(&c->in[3], specs[k].f32_cache ? BP_DTYPE_F32 : kFloats[t], S2(specs[k].maxpos, specs[k].R),
                      0, BPC_V_RANDOM, -1, 1);
      for (int o = 0; o < 2; o++) bpc_operand_set(&c->out[o], BP_DTYPE_INVALID, S0(), 0, 0, 0, 0);
      c->has_attrs = 1;
      bp_qkv_rotary_attrs_t* a = &c->attrs.qkv;
      memset(a, 0, sizeof *a);
      a->struct_size = sizeof *a;
      a->num_heads = (uint32_t)specs[k].H;
      a->num_kv_heads = (uint32_t)specs[k].Hkv;
      a->interleaved = specs[k].interleaved;
    }
  }
}

/* ---- logits_softcap ------------------------------------------------------------------ */

void bpc_gen_softcap(bpc_gen_t* g) {
  static const struct {
    const char* axis;
    double cap, lo, hi;
    uint32_t values;
    int quick;
  } specs[] = {
      {"cap30", 30.0, -60, 60, BPC_V_RANDOM, 1},
      {"cap50_far", 50.0, -1000, 1000, BPC_V_RANDOM, 0},
      {"small", 30.0, -1, 1, BPC_V_RANDOM, 0},
      {"special", 30.0, -1e4, 1e4, BPC_V_SPECIAL | BPC_V_NONFINITE, 1},
  };
  for (size_t t = 0; t < COUNT(kFloats); t++) {
    for (size_t k = 0; k < COUNT(specs); k++) {
      if (g->quick && !specs[k].quick) continue;
      bpc_case_t* c = bpc_gen_new(g, bpc_dtype_name(kFloats[t]), specs[k].axis, 0);
      if (!c) return;
      c->num_inputs = 1;
      c->num_outputs = 1;
      bpc_operand_set(&c->in[0], kFloats[t], S2(7, 131), 0, specs[k].values, specs[k].lo, specs[k].hi);
      bpc_operand_set(&c->out[0], BP_DTYPE_INVALID, S0(), 0, 0, 0, 0);
      c->has_attrs = 1;
      memset(&c->attrs.softcap, 0, sizeof c->attrs.softcap);
      c->attrs.softcap.struct_size = sizeof c->attrs.softcap;
      c->attrs.softcap.cap = specs[k].cap;
    }
  }
}

/* ---- top_k_top_p_mask ---------------------------------------------------------------- */

void bpc_gen_logits_mask(bpc_gen_t* g) {
  static const struct {
    const char* axis;
    int64_t rows, V;
    uint32_t top_k;
    double top_p, min_p;
    uint32_t values;
    double lo, hi;
    int quick;
  } specs[] = {
      {"top_k", 16, 40, 5, 0.0, 0.0, BPC_V_RANDOM, -3, 3, 1},
      {"top_p", 16, 40, 0, 0.8, 0.0, BPC_V_RANDOM, -3, 3, 1},
      {"min_p", 16, 40, 0, 0.0, 0.1, BPC_V_RANDOM, -3, 3, 1},
      {"all_three", 16, 64, 10, 0.7, 0.05, BPC_V_RANDOM, -3, 3, 0},
      {"none", 4, 33, 0, 0.0, 0.0, BPC_V_RANDOM, -3, 3, 0},
      {"k_ge_v", 8, 7, 9, 0.9, 0.0, BPC_V_RANDOM, -3, 3, 0},
      {"vocab_1", 5, 1, 3, 0.5, 0.5, BPC_V_RANDOM, -3, 3, 0},
      {"long_vocab", 2, 2003, 50, 0.95, 0.01, BPC_V_RANDOM, -8, 8, 0},
      {"ties", 32, 12, 3, 0.6, 0.0, BPC_V_RANDOM | BPC_V_INTEGRAL, -2, 2, 1},
      {"special", 32, 6, 2, 0.5, 0.2, BPC_V_SPECIAL | BPC_V_NONFINITE, -1e3, 1e3, 0},
  };
  for (size_t t = 0; t < COUNT(kFloats); t++) {
    for (size_t k = 0; k < COUNT(specs); k++) {
      if (g->quick && !specs[k].quick) continue;
      bpc_case_t* c = bpc_gen_new(g, bpc_dtype_name(kFloats[t]), specs[k].axis, 0);
      if (!c) return;
      c->num_inputs = 1;
      c->num_outputs = 1;
      bpc_operand_set(&c->in[0], kFloats[t], S2(specs[k].rows, specs[k].V), 0, specs[k].values, specs[k].lo,
                      specs[k].hi);
      bpc_operand_set(&c->out[0], BP_DTYPE_INVALID, S0(), 0, 0, 0, 0);
      c->has_attrs = 1;
      bp_logits_mask_attrs_t* a = &c->attrs.logits_mask;
      memset(a, 0, sizeof *a);
      a->struct_size = sizeof *a;
      a->top_k = specs[k].top_k;
      a->top_p = specs[k].top_p;
      a->min_p = specs[k].min_p;
    }
  }
}

/* ---- rejection_sample ---------------------------------------------------------------- */

/* Probabilities: random rows in [0, 1) scaled to sum to 1 are left to the
 * reference (the rule does not need normalized rows; vLLM's are). Draft
 * ids cover the vocabulary; a near-copy draft (draft_probs close to the
 * target's) accepts most tokens, an independent one rejects many. */
void bpc_gen_rejection(bpc_gen_t* g) {
  static const struct {
    const char* axis;
    int64_t B, K, V;
    uint32_t greedy;
    int draft_probs, quick;
  } specs[] = {
      {"random", 64, 4, 16, 0, 1, 1},
      {"ngram", 64, 3, 12, 0, 0, 1},
      {"greedy", 32, 5, 9, 1, 0, 1},
      {"greedy_probs", 16, 2, 30, 1, 1, 0},
      {"one_draft", 128, 1, 5, 0, 1, 0},
      {"no_drafts", 8, 0, 7, 0, 1, 0},
      {"vocab_2", 8, 3, 2, 0, 1, 0},
      {"long_vocab", 4, 3, 3001, 0, 1, 0},
  };
  static const uint32_t probs[] = {BP_DTYPE_F32, BP_DTYPE_F64, BP_DTYPE_BF16};
  for (size_t t = 0; t < COUNT(probs); t++) {
    for (size_t k = 0; k < COUNT(specs); k++) {
      if (g->quick && !specs[k].quick) continue;
      bpc_case_t* c = bpc_gen_new(g, bpc_dtype_name(probs[t]), specs[k].axis, 0);
      if (!c) return;
      int64_t B = specs[k].B, K = specs[k].K, V = specs[k].V;
      c->num_inputs = 4;
      c->num_outputs = 1;
      bpc_operand_set(&c->in[0], t == 1 ? BP_DTYPE_I32 : BP_DTYPE_I64, S2(B, K), 0, BPC_V_RANDOM | BPC_V_INTEGRAL, 0,
                      (double)(V - 1));
      /* small vocabularies: probabilities around 1 / V make both outcomes common */
      bpc_operand_set(&c->in[1], probs[t], S3(B, K, V), 0, BPC_V_RANDOM, 0, 2.0 / (double)V);
      bpc_operand_set(&c->in[2], BP_DTYPE_I64, S1(B), 0, BPC_V_RANDOM | BPC_V_INTEGRAL, 0, (double)(V - 1));
      if (specs[k].draft_probs) bpc_operand_set(&c->in[3], probs[t], S3(B, K, V), 0, BPC_V_RANDOM, 0, 2.0 / (double)V);
      else bpc_operand_set(&c->in[3], BP_DTYPE_INVALID, S0(), 0, 0, 0, 0);
      bpc_operand_set(&c->out[0], BP_DTYPE_INVALID, S0(), 0, 0, 0, 0);
      c->has_attrs = 1;
      bp_rejection_attrs_t* a = &c->attrs.rejection;
      memset(a, 0, sizeof *a);
      a->struct_size = sizeof *a;
      a->greedy = specs[k].greedy;
      a->seed = 1234 + k;
      a->offset = 3 * t;
    }
  }
}
