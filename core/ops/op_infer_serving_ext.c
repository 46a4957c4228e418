/* backplane core: inference rules of the serving ops of ABI 1.4
 * (docs/semantics.md, "Mixture of experts", "Paged KV cache", "Logits
 * processing", "Gated activations"):
 *
 *   moe_align_block_size(topk_ids [T, k]) -> sorted_token_ids [P] i32,
 *       expert_ids [P / block_size] i32, num_tokens_post_pad [1] i32 with
 *       P = T * k + E * (block_size - 1) rounded up to block_size
 *   grouped_topk(gating_output [T, E], bias? [E]) -> topk_weights [T, k]
 *       f32 (f64 for f64), topk_ids [T, k] i32
 *   concat_and_cache_mla(kv_c [T, L], k_pe [T, R], kv_cache [NB, BS, L + R],
 *       slot_mapping [T]) -> kv_cache_out like kv_cache (may be kv_cache)
 *   gather_cache(src_cache [NB, BS, ...], block_table [B, MB],
 *       cu_seq_lens [B + 1], seq_starts? [B]) -> dst [num_tokens, ...]
 *   compute_slot_mapping(block_tables [S, MB], query_start_loc [S + 1],
 *       positions [T]) -> slot_mapping [T] i64
 *   gather_logprobs(logits [B, V], token_ids [B]) -> logprobs [B, k + 1]
 *       f32 (f64 for f64), logprob_token_ids [B, k + 1] i64, token_ranks
 *       [B] i64
 *   swiglu_oai(self [..., 2h]) -> out [..., h] like self
 *
 * Index tensors are i32 or i64. Only descriptors are seen here: values
 * (slots, block ids, offsets, token ids) are checked by the kernels, which
 * fail the stream with INVALID_ARGUMENT / OUT_OF_RANGE before writing.
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "ops/ops_internal.h"

static int sx_is_index(uint32_t d) { return d == BP_DTYPE_I32 || d == BP_DTYPE_I64; }

/* Input i: a floating dtype; rank `rank` (0: any >= 1) with `layout` named
 * in the message. */
static bp_status_t sx_float(bp__infer_t* x, uint32_t i, uint32_t rank, const char* layout) {
  char n[64], s[192];
  const bp_tensor_desc_t* t = &x->in[i];
  if (bp__dtype_is_float(t->dtype) && (rank ? t->rank == rank : t->rank >= 1)) return BP_OK;
  return bp__infer_fail(x, "input '%s' is %s %s; expected a floating (f16, bf16, f32, f64) %s",
                        bp__op_input_name(x->op, x->num_inputs, i, n), bp_dtype_name(t->dtype),
                        bp__shape_str(t->rank, t->sizes, s, sizeof s), layout);
}

/* Input i: i32 or i64 ids of rank `rank`. */
static bp_status_t sx_index(bp__infer_t* x, uint32_t i, uint32_t rank, const char* layout) {
  char n[64], s[192];
  const bp_tensor_desc_t* t = &x->in[i];
  if (sx_is_index(t->dtype) && t->rank == rank) return BP_OK;
  return bp__infer_fail(x, "input '%s' is %s %s; expected i32 or i64 %s",
                        bp__op_input_name(x->op, x->num_inputs, i, n), bp_dtype_name(t->dtype),
                        bp__shape_str(t->rank, t->sizes, s, sizeof s), layout);
}

/* Dim `dim` of input i equals `want` (`what` names it). */
static bp_status_t sx_dim(bp__infer_t* x, uint32_t i, uint32_t dim, int64_t want, const char* what) {
  char n[64], s[192];
  const bp_tensor_desc_t* t = &x->in[i];
  if (t->sizes[dim] == want) return BP_OK;
  return bp__infer_fail(x, "input '%s' has shape %s; dim %u must be %lld (%s)",
                        bp__op_input_name(x->op, x->num_inputs, i, n),
                        bp__shape_str(t->rank, t->sizes, s, sizeof s), dim, (long long)want, what);
}

/* ---- mixture of experts ------------------------------------------------------------ */

bp_status_t bp__infer_moe_align_block_size(bp__infer_t* x) {
  const bp_moe_align_attrs_t* a = x->attrs;
  const bp_tensor_desc_t* ids = &x->in[0];
  bp_status_t st = sx_index(x, 0, 2, "[tokens, top_k]");
  if (st != BP_OK) return st;
  if (a->num_experts < 1) return bp__infer_fail(x, "attrs.num_experts = 0; it must be >= 1");
  if (a->block_size < 1) return bp__infer_fail(x, "attrs.block_size = 0; it must be >= 1");
  int64_t n = 0, pad = (int64_t)a->num_experts * ((int64_t)a->block_size - 1);
  if (__builtin_mul_overflow(ids->sizes[0], ids->sizes[1], &n) || n > INT32_MAX ||
      n + pad + (int64_t)a->block_size > INT32_MAX) {
    return bp__infer_fail(x, "tokens * top_k + num_experts * (block_size - 1) overflows the i32 ids "
                             "(tokens %lld, top_k %lld)",
                          (long long)ids->sizes[0], (long long)ids->sizes[1]);
  }
  int64_t bs = a->block_size, blocks = (n + pad + bs - 1) / bs;
  int64_t ps[1] = {blocks * bs}, es[1] = {blocks}, one[1] = {1};
  x->compute_dtype = BP_DTYPE_I32;
  st = bp__infer_set_out(x, 0, BP_DTYPE_I32, 1, ps);
  if (st == BP_OK) st = bp__infer_set_out(x, 1, BP_DTYPE_I32, 1, es);
  if (st == BP_OK) st = bp__infer_set_out(x, 2, BP_DTYPE_I32, 1, one);
  return st;
}

bp_status_t bp__infer_grouped_topk(bp__infer_t* x) {
  const bp_grouped_topk_attrs_t* a = x->attrs;
  const bp_tensor_desc_t* g = &x->in[0];
  bp_status_t st = sx_float(x, 0, 2, "[tokens, num_experts]");
  if (st != BP_OK) return st;
  int64_t E = g->sizes[1];
  uint32_t G = a->num_expert_group ? a->num_expert_group : 1, kg = a->topk_group ? a->topk_group : G;
  if (E < 1) return bp__infer_fail(x, "input 'gating_output' has no experts (dim 1 is 0)");
  if (E % G != 0) {
    return bp__infer_fail(x, "attrs.num_expert_group = %u does not divide the %lld experts", G, (long long)E);
  }
  if (kg > G) return bp__infer_fail(x, "attrs.topk_group = %u must be in 1..%u (num_expert_group)", kg, G);
  int64_t per = E / G;
  if (a->top_k < 1 || (int64_t)a->top_k > per * kg) {
    return bp__infer_fail(x, "attrs.top_k = %u must be in 1..%lld (the experts of the %u kept groups)", a->top_k,
                          (long long)(per * kg), kg);
  }
  if (a->scoring_func > BP_MOE_SCORING_SIGMOID) {
    return bp__infer_fail(x, "attrs.scoring_func = %u is unknown (0: softmax, 1: sigmoid)", a->scoring_func);
  }
  if (a->renormalize > 1) return bp__infer_fail(x, "attrs.renormalize = %u must be 0 or 1", a->renormalize);
  if (!isfinite(a->routed_scaling_factor)) {
    return bp__infer_fail(x, "attrs.routed_scaling_factor = %g must be finite (0: 1)", a->routed_scaling_factor);
  }
  if (bp__in_present(x, 1)) {
    st = sx_float(x, 1, 1, "[num_experts]");
    if (st == BP_OK) st = sx_dim(x, 1, 0, E, "the experts of 'gating_output'");
    if (st != BP_OK) return st;
    if (G > 1 && per < 2) {
      return bp__infer_fail(x, "a group score with e_score_correction_bias sums the group's top 2 experts; "
                               "groups of %lld expert cannot",
                            (long long)per);
    }
  }
  uint32_t wd = g->dtype == BP_DTYPE_F64 ? BP_DTYPE_F64 : BP_DTYPE_F32;
  int64_t s[2] = {g->sizes[0], a->top_k};
  x->compute_dtype = BP_DTYPE_F64;
  st = bp__infer_set_out(x, 0, wd, 2, s);
  if (st == BP_OK) st = bp__infer_set_out(x, 1, BP_DTYPE_I32, 2, s);
  return st;
}

/* ---- paged caches -------------------------------------------------------------------- */

bp_status_t bp__infer_concat_and_cache_mla(bp__infer_t* x) {
  const bp_tensor_desc_t *kv = &x->in[0], *pe = &x->in[1], *c = &x->in[2];
  char s0[192], s1[192];
  bp_status_t st = sx_float(x, 0, 2, "[tokens, kv_lora_rank]");
  if (st == BP_OK) st = sx_float(x, 1, 2, "[tokens, rope_dim]");
  if (st == BP_OK) st = sx_dim(x, 1, 0, kv->sizes[0], "tokens of 'kv_c'");
  if (st == BP_OK) st = sx_float(x, 2, 3, "[num_blocks, block_size, kv_lora_rank + rope_dim]");
  if (st == BP_OK) st = sx_index(x, 3, 1, "[tokens]");
  if (st == BP_OK) st = sx_dim(x, 3, 0, kv->sizes[0], "tokens of 'kv_c'");
  if (st != BP_OK) return st;
  if (pe->dtype != kv->dtype || c->dtype != kv->dtype) {
    return bp__infer_fail(x, "inputs 'kv_c', 'k_pe' and 'kv_cache' are %s, %s and %s; they must share one dtype",
                          bp_dtype_name(kv->dtype), bp_dtype_name(pe->dtype), bp_dtype_name(c->dtype));
  }
  if (c->sizes[1] < 1 || c->sizes[2] != kv->sizes[1] + pe->sizes[1]) {
    return bp__infer_fail(x, "input 'kv_cache' has shape %s; expected [num_blocks, block_size >= 1, %lld] "
                             "(kv_c's %lld + k_pe's %lld per row; kv_c %s)",
                          bp__shape_str(c->rank, c->sizes, s0, sizeof s0),
                          (long long)(kv->sizes[1] + pe->sizes[1]), (long long)kv->sizes[1],
                          (long long)pe->sizes[1], bp__shape_str(kv->rank, kv->sizes, s1, sizeof s1));
  }
  x->compute_dtype = c->dtype;
  return bp__infer_set_out(x, 0, c->dtype, c->rank, c->sizes);
}

bp_status_t bp__infer_gather_cache(bp__infer_t* x) {
  const bp_gather_cache_attrs_t* a = x->attrs;
  const bp_tensor_desc_t *c = &x->in[0], *bt = &x->in[1];
  char s0[192];
  bp_status_t st = sx_float(x, 0, 0, "[num_blocks, block_size, ...]");
  if (st == BP_OK && (c->rank < 3 || c->sizes[1] < 1)) {
    st = bp__infer_fail(x, "input 'src_cache' has shape %s; expected [num_blocks, block_size >= 1, entry...] "
                           "(rank >= 3)",
                        bp__shape_str(c->rank, c->sizes, s0, sizeof s0));
  }
  if (st == BP_OK) st = sx_index(x, 1, 2, "[batch, max_blocks_per_seq]");
  if (st == BP_OK) st = sx_index(x, 2, 1, "[batch + 1]");
  if (st == BP_OK) st = sx_dim(x, 2, 0, bt->sizes[0] + 1, "batch of 'block_table' + 1");
  if (st == BP_OK && bp__in_present(x, 3)) {
    st = sx_index(x, 3, 1, "[batch]");
    if (st == BP_OK) st = sx_dim(x, 3, 0, bt->sizes[0], "batch of 'block_table'");
  }
  if (st != BP_OK) return st;
  if (a->num_tokens < 0) {
    return bp__infer_fail(x, "attrs.num_tokens = %lld must be >= 0 (the rows of dst)", (long long)a->num_tokens);
  }
  int64_t sizes[BP_MAX_RANK];
  sizes[0] = a->num_tokens;
  for (uint32_t d = 2; d < c->rank; d++) sizes[d - 1] = c->sizes[d];
  x->compute_dtype = c->dtype;
  return bp__infer_set_out(x, 0, c->dtype, c->rank - 1, sizes);
}

bp_status_t bp__infer_compute_slot_mapping(bp__infer_t* x) {
  const bp_slot_mapping_attrs_t* a = x->attrs;
  const bp_tensor_desc_t *bt = &x->in[0], *pos = &x->in[2];
  bp_status_t st = sx_index(x, 0, 2, "[seqs, max_blocks_per_seq]");
  if (st == BP_OK) st = sx_index(x, 1, 1, "[seqs + 1]");
  if (st == BP_OK) st = sx_dim(x, 1, 0, bt->sizes[0] + 1, "seqs of 'block_tables' + 1");
  if (st == BP_OK) st = sx_index(x, 2, 1, "[tokens]");
  if (st != BP_OK) return st;
  if (a->block_size < 1) return bp__infer_fail(x, "attrs.block_size = 0; it must be >= 1");
  x->compute_dtype = BP_DTYPE_I64;
  return bp__infer_set_out(x, 0, BP_DTYPE_I64, 1, pos->sizes);
}

/* ---- log-probabilities, clamped SwiGLU ------------------------------------------------ */

bp_status_t bp__infer_gather_logprobs(bp__infer_t* x) {
  const bp_logprobs_attrs_t* a = x->attrs;
  const bp_tensor_desc_t* l = &x->in[0];
  bp_status_t st = sx_float(x, 0, 2, "[batch, vocab]");
  if (st == BP_OK) st = sx_index(x, 1, 1, "[batch]");
  if (st == BP_OK) st = sx_dim(x, 1, 0, l->sizes[0], "batch of 'logits'");
  if (st != BP_OK) return st;
  if (l->sizes[1] < 1) return bp__infer_fail(x, "input 'logits' has an empty vocabulary (dim 1 is 0)");
  if ((int64_t)a->num_logprobs > l->sizes[1]) {
    return bp__infer_fail(x, "attrs.num_logprobs = %u must be in 0..%lld (the vocabulary)", a->num_logprobs,
                          (long long)l->sizes[1]);
  }
  uint32_t wd = l->dtype == BP_DTYPE_F64 ? BP_DTYPE_F64 : BP_DTYPE_F32;
  int64_t s[2] = {l->sizes[0], (int64_t)a->num_logprobs + 1};
  x->compute_dtype = wd;
  st = bp__infer_set_out(x, 0, wd, 2, s);
  if (st == BP_OK) st = bp__infer_set_out(x, 1, BP_DTYPE_I64, 2, s);
  if (st == BP_OK) st = bp__infer_set_out(x, 2, BP_DTYPE_I64, 1, l->sizes);
  return st;
}

bp_status_t bp__infer_swiglu_oai(bp__infer_t* x) {
  const bp_swiglu_oai_attrs_t* a = x->attrs;
  const bp_tensor_desc_t* in = &x->in[0];
  char s[192];
  bp_status_t st = sx_float(x, 0, 0, "[..., 2 * hidden] (rank >= 1)");
  if (st != BP_OK) return st;
  int64_t last = in->sizes[in->rank - 1];
  if (last % 2 != 0) {
    return bp__infer_fail(x, "input 'self' has shape %s; its last dim (%lld) must be even: interleaved (gate, "
                             "up) pairs",
                          bp__shape_str(in->rank, in->sizes, s, sizeof s), (long long)last);
  }
  if (!(a->alpha >= 0.0) || !isfinite(a->alpha)) {
    return bp__infer_fail(x, "attrs.alpha = %g must be finite and >= 0 (0: 1.702)", a->alpha);
  }
  if (!(a->limit >= 0.0)) return bp__infer_fail(x, "attrs.limit = %g must be >= 0 (0: 7, inf: no clamp)", a->limit);
  int64_t sizes[BP_MAX_RANK];
  memcpy(sizes, in->sizes, sizeof(int64_t) * in->rank);
  sizes[in->rank - 1] = last / 2;
  x->compute_dtype = in->dtype == BP_DTYPE_F64 ? BP_DTYPE_F64 : BP_DTYPE_F32;
  return bp__infer_set_out(x, 0, in->dtype, in->rank, sizes);
}
