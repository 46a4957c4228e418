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
 *   ALiBi, block sizes 1, 16.
 * qkv_rotary: neox and GPT-J styles, full and partial rotary dims, odd head
 *   sizes past the rotary dim, GQA and MQA, with and without bias, one
 *   token, an f32 cos_sin_cache for half-precision inputs.
 * moe_topk_softmax: k of 1, 2, 8 and all experts, with and without
 *   renormalization, ties (integer logits), one token and none.
 */
#include <string.h>

#include "cases_internal.h"

#define COUNT(a) (sizeof(a) / sizeof((a)[0]))

void bpc_gen_sample(bpc_gen_t* g);
void bpc_gen_penalty(bpc_gen_t* g);
void bpc_gen_kv_cache_append(bpc_gen_t* g);
void bpc_gen_paged_attention(bpc_gen_t* g);
void bpc_gen_qkv_rotary(bpc_gen_t* g);
void bpc_gen_moe_topk(bpc_gen_t* g);

static const uint32_t kFloats[] = {BP_DTYPE_F32, BP_DTYPE_F64, BP_DTYPE_F16, BP_DTYPE_BF16};

/* ---- sample ---------------------------------------------------------------------- */

typedef struct smp_spec {
  const char* axis;
  bpc_shape_t s;
  double temperature, top_p;
  uint32_t top_k;
  uint32_t values;
  double lo, hi;
  int quick;
} smp_spec_t;

void bpc_gen_sample(bpc_gen_t* g) {
  const smp_spec_t specs[] = {
      {"greedy", S2(64, 33), 0.0, 0.0, 0, BPC_V_RANDOM, -4, 4, 1},
      {"temperature", S2(2048, 10), 1.0, 0.0, 0, BPC_V_RANDOM, -3, 3, 1},
      {"cold", S2(2048, 12), 0.5, 0.0, 0, BPC_V_RANDOM, -2, 2, 0},
      {"top_k", S2(2048, 16), 1.0, 0.0, 5, BPC_V_RANDOM, -3, 3, 1},
      {"top_p", S2(2048, 16), 0.8, 0.9, 0, BPC_V_RANDOM, -3, 3, 1},
      {"top_k_top_p", S2(2048, 20), 1.2, 0.7, 8, BPC_V_RANDOM, -3, 3, 0},
      {"k_ge_v", S2(256, 7), 1.0, 0.0, 9, BPC_V_RANDOM, -3, 3, 0},
      {"vocab_1", S2(5, 1), 1.0, 0.5, 3, BPC_V_RANDOM, -3, 3, 0},
      {"long_vocab", S2(3, 50021), 1.0, 0.95, 0, BPC_V_RANDOM, -8, 8, 0},
      {"long_top_k", S2(2, 50021), 0.9, 0.0, 40, BPC_V_RANDOM, -8, 8, 0},
      {"1d", S1(37), 1.0, 0.0, 0, BPC_V_RANDOM, -3, 3, 0},
      {"3d", bpc_shape(3, (int64_t)4, (int64_t)3, (int64_t)24), 1.0, 0.9, 10, BPC_V_RANDOM, -3, 3, 0},
      {"special", S2(64, 6), 1.0, 0.0, 0, BPC_V_SPECIAL | BPC_V_NONFINITE, -1e3, 1e3, 1},
      {"special_greedy", S2(64, 6), 0.0, 0.0, 0, BPC_V_SPECIAL | BPC_V_NONFINITE, -1e3, 1e3, 0},
      {"special_top_p", S2(64, 6), 1.0, 0.5, 2, BPC_V_SPECIAL | BPC_V_NONFINITE, -1e3, 1e3, 0},
  };
  for (size_t t = 0; t < COUNT(kFloats); t++) {
    for (size_t k = 0; k < COUNT(specs); k++) {
      const smp_spec_t* v = &specs[k];
      if (g->quick && !v->quick) continue;
      bpc_case_t* c = bpc_gen_new(g, bpc_dtype_name(kFloats[t]), v->axis, 0);
      if (!c) return;
      c->num_inputs = 1;
      c->num_outputs = 1;
      bpc_operand_set(&c->in[0], kFloats[t], v->s, 0, v->values, v->lo, v->hi);
      bpc_operand_set(&c->out[0], BP_DTYPE_INVALID, S0(), 0, 0, 0, 0);
      c->has_attrs = 1;
      bp_sample_attrs_t* a = &c->attrs.sample;
      memset(a, 0, sizeof *a);
      a->struct_size = sizeof *a;
      a->temperature = v->temperature;
      a->top_p = v->top_p;
      a->top_k = v->top_k;
      a->seed = 0x5EED0000u + k * 7919u + t;
      a->offset = (uint64_t)k * 3u;
    }
  }
}

/* ---- repetition_penalty ------------------------------------------------------- */

void bpc_gen_penalty(bpc_gen_t* g) {
  static const struct {
    const char* axis;
    double rep, presence, frequency;
    uint32_t ids;
    int64_t L;
    int quick;
  } specs[] = {
      {"repetition", 1.3, 0.0, 0.0, BP_DTYPE_I64, 24, 1},
      {"presence", 0.0, 0.5, 0.0, BP_DTYPE_I64, 24, 0},
      {"frequency", 1.0, 0.0, 0.25, BP_DTYPE_I32, 24, 0},
      {"all", 1.7, 0.4, 0.3, BP_DTYPE_I32, 40, 1},
      {"below_one", 0.8, 0.0, 0.0, BP_DTYPE_I64, 8, 0},
      {"no_ids", 1.3, 0.5, 0.5, BP_DTYPE_I64, 0, 0},
  };
  for (size_t t = 0; t < COUNT(kFloats); t++) {
    for (size_t k = 0; k < COUNT(specs); k++) {
      if (g->quick && !specs[k].quick) continue;
      for (int v = 0; v < 2; v++) { /* 2-d rows, then 1-d */
        bpc_case_t* c = bpc_gen_new(g, bpc_dtype_name(kFloats[t]), specs[k].axis, v);
        if (!c) return;
        c->num_inputs = 2;
        c->num_outputs = 1;
        bpc_shape_t ls = v ? S1(50) : S2(6, 50), ts = v ? S1(specs[k].L) : S2(6, specs[k].L);
        bpc_operand_set(&c->in[0], kFloats[t], ls, 0, BPC_V_RANDOM, -5, 5);
        bpc_operand_set(&c->in[1], specs[k].ids, ts, 0, BPC_V_RANDOM, -3, 55);
        bpc_operand_set(&c->out[0], BP_DTYPE_INVALID, S0(), 0, 0, 0, 0);
        c->has_attrs = 1;
        bp_penalty_attrs_t* a = &c->attrs.penalty;
        memset(a, 0, sizeof *a);
        a->struct_size = sizeof *a;
        a->repetition = specs[k].rep;
        a->presence = specs[k].presence;
        a->frequency = specs[k].frequency;
      }
    }
  }
}

/* ---- kv_cache_append ------------------------------------------------------------ */

void bpc_gen_kv_cache_append(bpc_gen_t* g) {
  static const struct {
    const char* axis;
    int64_t nb, bs, h, d, T;
    uint32_t slots;
    int quick;
  } specs[] = {
      {"decode", 6, 4, 2, 8, 5, BP_DTYPE_I64, 1},
      {"prefill", 8, 16, 2, 5, 70, BP_DTYPE_I32, 1},
      {"one_token", 3, 4, 1, 3, 1, BP_DTYPE_I64, 0},
      {"no_tokens", 3, 4, 1, 3, 0, BP_DTYPE_I64, 0},
      {"block_1", 20, 1, 3, 7, 9, BP_DTYPE_I32, 0},
  };
  for (size_t t = 0; t < COUNT(kFloats); t++) {
    for (size_t k = 0; k < COUNT(specs); k++) {
      if (g->quick && !specs[k].quick) continue;
      bpc_case_t* c = bpc_gen_new(g, bpc_dtype_name(kFloats[t]), specs[k].axis, 0);
      if (!c) return;
      c->num_inputs = 5;
      c->num_outputs = 2;
      bpc_shape_t cs = S4(specs[k].nb, specs[k].bs, specs[k].h, specs[k].d);
      bpc_shape_t rs = S3(specs[k].T, specs[k].h, specs[k].d);
      for (int i = 0; i < 2; i++) bpc_operand_set(&c->in[i], kFloats[t], cs, 0, BPC_V_RANDOM, -4, 4);
      for (int i = 2; i < 4; i++) bpc_operand_set(&c->in[i], kFloats[t], rs, 0, BPC_V_RANDOM, -4, 4);
      /* distinct slots; the negative ones (up to 3) are padding */
      bpc_operand_set(&c->in[4], specs[k].slots, S1(specs[k].T), 0, BPC_V_DISTINCT, -3,
                      (double)(specs[k].nb * specs[k].bs - 1));
      for (int o = 0; o < 2; o++) bpc_operand_set(&c->out[o], BP_DTYPE_INVALID, S0(), 0, 0, 0, 0);
    }
  }
}

/* ---- paged_attention ------------------------------------------------------------ */

void bpc_gen_paged_attention(bpc_gen_t* g) {
  static const struct {
    const char* axis;
    int64_t S, H, Hkv, D, NB, BS, MB;
    double len_lo, len_hi;
    uint32_t window;
    int alibi;
    uint32_t ids;
    int quick;
  } specs[] = {
      {"mha", 3, 4, 4, 16, 12, 4, 5, 1, 20, 0, 0, BP_DTYPE_I32, 1},
      {"gqa2_odd_head", 4, 4, 2, 13, 10, 4, 6, 1, 24, 0, 0, BP_DTYPE_I32, 1},
      {"gqa4", 2, 8, 2, 32, 16, 16, 3, 17, 48, 0, 0, BP_DTYPE_I64, 0},
      {"mqa", 3, 6, 1, 8, 9, 4, 4, 1, 16, 0, 0, BP_DTYPE_I32, 0},
      {"length_1", 4, 2, 1, 8, 6, 4, 2, 1, 1, 0, 0, BP_DTYPE_I32, 1},
      {"length_0", 3, 2, 2, 8, 6, 4, 2, 0, 0, 0, 0, BP_DTYPE_I32, 0},
      {"block_1", 2, 4, 2, 9, 40, 1, 30, 1, 30, 0, 0, BP_DTYPE_I64, 0},
      {"sliding_window", 3, 4, 2, 16, 20, 4, 8, 10, 32, 7, 0, BP_DTYPE_I32, 1},
      {"alibi", 3, 4, 4, 16, 12, 4, 5, 1, 20, 0, 1, BP_DTYPE_I32, 1},
      {"alibi_window_gqa", 2, 8, 2, 24, 16, 8, 4, 9, 32, 12, 1, BP_DTYPE_I64, 0},
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
      bpc_operand_set(&c->in[0], kFloats[t], S3(S, H, D), 0, BPC_V_RANDOM, -2, 2);
      for (int i = 1; i < 3; i++) bpc_operand_set(&c->in[i], kFloats[t], cs, 0, BPC_V_RANDOM, -2, 2);
      bpc_operand_set(&c->in[3], specs[k].ids, S2(S, specs[k].MB), 0, BPC_V_RANDOM, 0,
                      (double)(specs[k].NB - 1));
      bpc_operand_set(&c->in[4], specs[k].ids, S1(S), 0, BPC_V_RANDOM, specs[k].len_lo,
                      specs[k].len_hi == specs[k].len_lo ? specs[k].len_hi + 0.5 : specs[k].len_hi);
      if (specs[k].alibi) {
        bpc_operand_set(&c->in[5], BP_DTYPE_F32, S1(H), 0, BPC_V_RANDOM, -1, -0.01);
      } else {
        bpc_operand_set(&c->in[5], BP_DTYPE_INVALID, S0(), 0, 0, 0, 0);
      }
      bpc_operand_set(&c->out[0], BP_DTYPE_INVALID, S0(), 0, 0, 0, 0);
      c->has_attrs = 1;
      bp_paged_attention_attrs_t* a = &c->attrs.paged;
      memset(a, 0, sizeof *a);
      a->struct_size = sizeof *a;
      a->sliding_window = specs[k].window;
    }
  }
}

/* ---- qkv_rotary ---------------------------------------------------------------- */

void bpc_gen_qkv_rotary(bpc_gen_t* g) {
  static const struct {
    const char* axis;
    int64_t T, hidden, H, Hkv, D, R, maxpos;
    uint32_t interleaved;
    int bias, f32_cache, quick;
  } specs[] = {
      {"neox", 5, 24, 4, 2, 8, 8, 16, 0, 1, 0, 1},
      {"gptj", 5, 24, 4, 2, 8, 8, 16, 1, 1, 0, 1},
      {"partial_odd_head", 3, 17, 2, 1, 9, 4, 8, 0, 0, 0, 0},
      {"partial_gptj", 4, 32, 4, 4, 16, 6, 12, 1, 1, 0, 0},
      {"mqa", 6, 40, 6, 1, 12, 12, 20, 0, 1, 0, 0},
      {"one_token", 1, 64, 8, 2, 16, 16, 4, 0, 1, 0, 0},
      {"f32_cache", 5, 24, 4, 2, 8, 8, 16, 0, 1, 1, 1},
  };
  for (size_t t = 0; t < COUNT(kFloats); t++) {
    for (size_t k = 0; k < COUNT(specs); k++) {
      if (g->quick && !specs[k].quick) continue;
      if (specs[k].f32_cache && kFloats[t] == BP_DTYPE_F32) continue;
      bpc_case_t* c = bpc_gen_new(g, bpc_dtype_name(kFloats[t]), specs[k].axis, 0);
      if (!c) return;
      c->num_inputs = 5;
      c->num_outputs = 3;
      int64_t N = (specs[k].H + 2 * specs[k].Hkv) * specs[k].D;
      bpc_operand_set(&c->in[0], kFloats[t], S2(specs[k].T, specs[k].hidden), 0, BPC_V_RANDOM, -1, 1);
      bpc_operand_set(&c->in[1], kFloats[t], S2(N, specs[k].hidden), 0, BPC_V_RANDOM, -1, 1);
      if (specs[k].bias) bpc_operand_set(&c->in[2], kFloats[t], S1(N), 0, BPC_V_RANDOM, -1, 1);
      else bpc_operand_set(&c->in[2], BP_DTYPE_INVALID, S0(), 0, 0, 0, 0);
      bpc_operand_set(&c->in[3], BP_DTYPE_I64, S1(specs[k].T), 0, BPC_V_RANDOM, 0,
                      (double)(specs[k].maxpos - 1));
      bpc_operand_set(&c->in[4], specs[k].f32_cache ? BP_DTYPE_F32 : kFloats[t],
                      S2(specs[k].maxpos, specs[k].R), 0, BPC_V_RANDOM, -1, 1);
      for (int o = 0; o < 3; o++) bpc_operand_set(&c->out[o], BP_DTYPE_INVALID, S0(), 0, 0, 0, 0);
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

/* ---- moe_topk_softmax ------------------------------------------------------------ */

void bpc_gen_moe_topk(bpc_gen_t* g) {
  static const struct {
    const char* axis;
    int64_t T, E;
    uint32_t k, renorm, values;
    int quick;
  } specs[] = {
      {"top2_renorm", 33, 8, 2, 1, BPC_V_RANDOM, 1},
      {"top2", 33, 8, 2, 0, BPC_V_RANDOM, 0},
      {"top1", 17, 16, 1, 0, BPC_V_RANDOM, 0},
      {"top8_of_64", 9, 64, 8, 1, BPC_V_RANDOM, 1},
      {"all", 5, 6, 6, 1, BPC_V_RANDOM, 0},
      {"ties", 40, 8, 3, 1, BPC_V_INTEGRAL, 1},
      {"one_token", 1, 60, 4, 1, BPC_V_RANDOM, 0},
      {"no_tokens", 0, 8, 2, 1, BPC_V_RANDOM, 0},
  };
  for (size_t t = 0; t < COUNT(kFloats); t++) {
    for (size_t k = 0; k < COUNT(specs); k++) {
      if (g->quick && !specs[k].quick) continue;
      bpc_case_t* c = bpc_gen_new(g, bpc_dtype_name(kFloats[t]), specs[k].axis, 0);
      if (!c) return;
      c->num_inputs = 1;
      c->num_outputs = 2;
      bpc_operand_set(&c->in[0], kFloats[t], S2(specs[k].T, specs[k].E), 0, specs[k].values,
                      specs[k].values == BPC_V_INTEGRAL ? -2 : -4, specs[k].values == BPC_V_INTEGRAL ? 2 : 4);
      for (int o = 0; o < 2; o++) bpc_operand_set(&c->out[o], BP_DTYPE_INVALID, S0(), 0, 0, 0, 0);
      c->has_attrs = 1;
      bp_moe_topk_attrs_t* a = &c->attrs.moe_topk;
      memset(a, 0, sizeof *a);
      a->struct_size = sizeof *a;
      a->top_k = specs[k].k;
      a->renormalize = specs[k].renorm;
    }
  }
}
