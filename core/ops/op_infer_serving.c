/* backplane core: inference rules of the serving ops -- sampling (sample,
 * repetition_penalty) and the paged KV cache (kv_cache_append,
 * paged_attention). Layouts follow vLLM (docs/semantics.md, "Sampling" and
 * "Paged KV cache"):
 *
 *   key_cache, value_cache  [num_blocks, block_size, num_kv_heads, head_size]
 *                           (the flash layout of reshape_and_cache_flash)
 *   slot_mapping            [tokens]: slot = block * block_size + offset;
 *                           negative = padding, skipped
 *   block_tables            [seqs, max_blocks_per_seq]
 *   context_lens            [seqs]
 *
 * Only descriptors are seen here: values (slots past the cache, block ids
 * past num_blocks, lengths past the table) are checked by the kernels,
 * which fail the stream with INVALID_ARGUMENT / OUT_OF_RANGE.
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "ops/ops_internal.h"

static int srv_is_index(uint32_t d) { return d == BP_DTYPE_I32 || d == BP_DTYPE_I64; }

/* Input i: a floating dtype (f16, bf16, f32, f64). */
static bp_status_t srv_float(bp__infer_t* x, uint32_t i) {
  char n[64];
  uint32_t d = x->in[i].dtype;
  if (bp__dtype_is_float(d)) return BP_OK;
  return bp__infer_fail(x, "input '%s' has dtype %s; a floating dtype (f16, bf16, f32, f64) is "
                           "required",
                        bp__op_input_name(x->op, x->num_inputs, i, n), bp_dtype_name(d));
}

/* Input i: i32 or i64 ids. */
static bp_status_t srv_index(bp__infer_t* x, uint32_t i) {
  char n[64];
  uint32_t d = x->in[i].dtype;
  if (srv_is_index(d)) return BP_OK;
  return bp__infer_fail(x, "input '%s' has dtype %s; i32 or i64 is required",
                        bp__op_input_name(x->op, x->num_inputs, i, n), bp_dtype_name(d));
}

/* Input i has exactly `rank` dims. */
static bp_status_t srv_rank(bp__infer_t* x, uint32_t i, uint32_t rank, const char* layout) {
  char n[64], s[192];
  const bp_tensor_desc_t* t = &x->in[i];
  if (t->rank == rank) return BP_OK;
  return bp__infer_fail(x, "input '%s' has shape %s; expected rank %u %s",
                        bp__op_input_name(x->op, x->num_inputs, i, n),
                        bp__shape_str(t->rank, t->sizes, s, sizeof(s)), rank, layout);
}

/* Dim `dim` of input i equals `want` (`what` names the size). */
static bp_status_t srv_dim(bp__infer_t* x, uint32_t i, uint32_t dim, int64_t want,
                           const char* what) {
  char n[64], s[192];
  const bp_tensor_desc_t* t = &x->in[i];
  if (t->sizes[dim] == want) return BP_OK;
  return bp__infer_fail(x, "input '%s' has shape %s; dim %u must be %lld (%s)",
                        bp__op_input_name(x->op, x->num_inputs, i, n),
                        bp__shape_str(t->rank, t->sizes, s, sizeof(s)), dim, (long long)want,
                        what);
}

/* ---- sampling -------------------------------------------------------------- */

/* Logits [..., V], V >= 1. */
static bp_status_t srv_logits(bp__infer_t* x) {
  char s[192];
  const bp_tensor_desc_t* l = &x->in[0];
  bp_status_t st = srv_float(x, 0);
  if (st != BP_OK) return st;
  if (l->rank == 0 || l->sizes[l->rank - 1] == 0) {
    return bp__infer_fail(x, "input 'logits' has shape %s; its last dim is the vocabulary and "
                             "must hold at least one entry",
                          bp__shape_str(l->rank, l->sizes, s, sizeof(s)));
  }
  return BP_OK;
}

/* sample(logits [..., V]) -> out i64 [...]. */
bp_status_t bp__infer_sample(bp__infer_t* x) {
  const bp_sample_attrs_t* a = x->attrs;
  bp_status_t st = srv_logits(x);
  if (st != BP_OK) return st;
  if (!(a->temperature >= 0.0) || !isfinite(a->temperature)) {
    return bp__infer_fail(x, "attrs.temperature = %g must be finite and >= 0 (0: greedy)",
                          a->temperature);
  }
  if (!(a->top_p >= 0.0 && a->top_p <= 1.0)) {
    return bp__infer_fail(x, "attrs.top_p = %g must be in [0, 1] (0 or 1: no top-p filter)",
                          a->top_p);
  }
  const bp_tensor_desc_t* l = &x->in[0];
  x->compute_dtype = l->dtype == BP_DTYPE_F64 ? BP_DTYPE_F64 : BP_DTYPE_F32;
  return bp__infer_set_out(x, 0, BP_DTYPE_I64, l->rank - 1, l->sizes);
}

/* repetition_penalty(logits [..., V], tokens [..., L]) -> out like logits. */
bp_status_t bp__infer_repetition_penalty(bp__infer_t* x) {
  const bp_penalty_attrs_t* a = x->attrs;
  const bp_tensor_desc_t *l = &x->in[0], *t = &x->in[1];
  char s0[192], s1[192];
  bp_status_t st = srv_logits(x);
  if (st == BP_OK) st = srv_index(x, 1);
  if (st != BP_OK) return st;
  if (t->rank != l->rank || !bp__shape_equal(l->rank - 1, l->sizes, t->rank - 1, t->sizes)) {
    return bp__infer_fail(x, "input 'tokens' has shape %s; expected the leading dims of 'logits' "
                             "%s and one dim of ids",
                          bp__shape_str(t->rank, t->sizes, s0, sizeof(s0)),
                          bp__shape_str(l->rank, l->sizes, s1, sizeof(s1)));
  }
  if (!(a->repetition >= 0.0) || !isfinite(a->repetition)) {
    return bp__infer_fail(x, "attrs.repetition = %g must be finite and > 0 (0 or 1: none)",
                          a->repetition);
  }
  if (!isfinite(a->presence) || !isfinite(a->frequency)) {
    return bp__infer_fail(x, "attrs.presence = %g and attrs.frequency = %g must be finite",
                          a->presence, a->frequency);
  }
  x->compute_dtype = l->dtype == BP_DTYPE_F64 ? BP_DTYPE_F64 : BP_DTYPE_F32;
  return bp__infer_set_out(x, 0, l->dtype, l->rank, l->sizes);
}

/* ---- paged KV cache ---------------------------------------------------------- */

#define SRV_CACHE_LAYOUT "[num_blocks, block_size, num_kv_heads, head_size]"

/* key_cache (input kc) and value_cache (input vc): rank 4, one dtype and
 * shape, floating, block_size and head_size >= 1. */
static bp_status_t srv_caches(bp__infer_t* x, uint32_t kc, uint32_t vc) {
  char s[192];
  bp_status_t st = srv_float(x, kc);
  if (st == BP_OK) st = srv_rank(x, kc, 4, SRV_CACHE_LAYOUT);
  if (st == BP_OK) st = bp__infer_like_input(x, vc, kc);
  if (st != BP_OK) return st;
  const bp_tensor_desc_t* c = &x->in[kc];
  if (c->sizes[1] < 1 || c->sizes[2] < 1 || c->sizes[3] < 1) {
    return bp__infer_fail(x, "input 'key_cache' has shape %s; block_size, num_kv_heads and "
                             "head_size must be >= 1",
                          bp__shape_str(c->rank, c->sizes, s, sizeof(s)));
  }
  return BP_OK;
}

/* kv_cache_append(key_cache, value_cache, key [T, Hkv, D], value [T, Hkv, D],
 * slot_mapping [T]) -> (key_cache_out, value_cache_out), each like its cache;
 * outputs may be the caches themselves (in place). */
bp_status_t bp__infer_kv_cache_append(bp__infer_t* x) {
  bp_status_t st = srv_caches(x, 0, 1);
  const bp_tensor_desc_t* c = &x->in[0];
  char n0[64];
  for (uint32_t i = 2; i < 4 && st == BP_OK; ++i) {
    if (x->in[i].dtype != c->dtype) {
      st = bp__infer_fail(x, "input '%s' has dtype %s; expected %s (the caches' dtype)",
                          bp__op_input_name(x->op, x->num_inputs, i, n0),
                          bp_dtype_name(x->in[i].dtype), bp_dtype_name(c->dtype));
    }
    if (st == BP_OK) st = srv_rank(x, i, 3, "[tokens, num_kv_heads, head_size]");
    if (st == BP_OK) st = srv_dim(x, i, 1, c->sizes[2], "num_kv_heads of the cache");
    if (st == BP_OK) st = srv_dim(x, i, 2, c->sizes[3], "head_size of the cache");
  }
  if (st == BP_OK) st = srv_dim(x, 3, 0, x->in[2].sizes[0], "tokens of 'key'");
  if (st == BP_OK) st = srv_index(x, 4);
  if (st == BP_OK) st = srv_rank(x, 4, 1, "[tokens]");
  if (st == BP_OK) st = srv_dim(x, 4, 0, x->in[2].sizes[0], "tokens of 'key'");
  if (st != BP_OK) return st;
  x->compute_dtype = c->dtype;
  st = bp__infer_set_out(x, 0, c->dtype, c->rank, c->sizes);
  if (st == BP_OK) st = bp__infer_set_out(x, 1, c->dtype, c->rank, c->sizes);
  return st;
}

/* query (input 0, [rows, H, D] as `layout` says) against the caches (inputs 1,
 * 2): floating, the caches' dtype and head_size, H a multiple of num_kv_heads. */
static bp_status_t srv_query_caches(bp__infer_t* x, const char* layout) {
  const bp_tensor_desc_t *q = &x->in[0], *c = &x->in[1];
  char s0[192], s1[192];
  bp_status_t st = srv_float(x, 0);
  if (st == BP_OK) st = srv_rank(x, 0, 3, layout);
  if (st == BP_OK) st = srv_caches(x, 1, 2);
  if (st != BP_OK) return st;
  if (c->dtype != q->dtype) {
    return bp__infer_fail(x, "input 'key_cache' has dtype %s; expected %s (the query's dtype)",
                          bp_dtype_name(c->dtype), bp_dtype_name(q->dtype));
  }
  if (c->sizes[3] != q->sizes[2]) {
    return bp__infer_fail(x, "input 'key_cache' has shape %s but 'query' has %s: head_size differs",
                          bp__shape_str(c->rank, c->sizes, s0, sizeof(s0)),
                          bp__shape_str(q->rank, q->sizes, s1, sizeof(s1)));
  }
  if (q->sizes[1] % c->sizes[2] != 0) {
    return bp__infer_fail(x, "num_heads %lld of 'query' is not a multiple of num_kv_heads %lld of "
                             "the cache (grouped-query attention shares each kv head among "
                             "num_heads / num_kv_heads query heads)",
                          (long long)q->sizes[1], (long long)c->sizes[2]);
  }
  return BP_OK;
}

/* attrs.scale finite and >= 0; the compute dtype and the output like the query. */
static bp_status_t srv_attention_out(bp__infer_t* x) {
  const bp_paged_attention_attrs_t* a = x->attrs;
  const bp_tensor_desc_t* q = &x->in[0];
  if (!(a->scale >= 0.0) || !isfinite(a->scale)) {
    return bp__infer_fail(x, "attrs.scale = %g must be finite and >= 0 (0: 1/sqrt(head_size))",
                          a->scale);
  }
  x->compute_dtype = q->dtype == BP_DTYPE_F64 ? BP_DTYPE_F64 : BP_DTYPE_F32;
  return bp__infer_set_out(x, 0, q->dtype, q->rank, q->sizes);
}

/* paged_attention(query [S, H, D], key_cache, value_cache, block_tables
 * [S, MB], context_lens [S], alibi_slopes? [H] f32) -> out [S, H, D]. */
bp_status_t bp__infer_paged_attention(bp__infer_t* x) {
  const bp_tensor_desc_t* q = &x->in[0];
  bp_status_t st = srv_query_caches(x, "[seqs, num_heads, head_size]");
  if (st == BP_OK) st = srv_index(x, 3);
  if (st == BP_OK) st = srv_rank(x, 3, 2, "[seqs, max_blocks_per_seq]");
  if (st == BP_OK) st = srv_dim(x, 3, 0, q->sizes[0], "seqs of 'query'");
  if (st == BP_OK) st = srv_index(x, 4);
  if (st == BP_OK) st = srv_rank(x, 4, 1, "[seqs]");
  if (st == BP_OK) st = srv_dim(x, 4, 0, q->sizes[0], "seqs of 'query'");
  if (st == BP_OK && bp__in_present(x, 5)) {
    if (x->in[5].dtype != BP_DTYPE_F32) {
      st = bp__infer_fail(x, "input 'opt_alibi_slopes' has dtype %s; f32 is required",
                          bp_dtype_name(x->in[5].dtype));
    }
    if (st == BP_OK) st = srv_rank(x, 5, 1, "[num_heads]");
    if (st == BP_OK) st = srv_dim(x, 5, 0, q->sizes[1], "num_heads of 'query'");
  }
  if (st != BP_OK) return st;
  return srv_attention_out(x);
}

/* ---- fused QKV projection with rotary embedding ------------------------------- */

/* qkv_rotary(input [T, hidden], weight [(H + 2 Hkv) * D, hidden], bias?
 * [(H + 2 Hkv) * D], positions [T] i32/i64, cos_sin_cache [max_pos, R])
 * -> q [T, H, D], k [T, Hkv, D], v [T, Hkv, D]; R even, R <= D. */
bp_status_t bp__infer_qkv_rotary(bp__infer_t* x) {
  const bp_qkv_rotary_attrs_t* a = x->attrs;
  const bp_tensor_desc_t *in = &x->in[0], *w = &x->in[1], *cs = &x->in[4];
  char s0[192];
  bp_status_t st = srv_float(x, 0);
  if (st == BP_OK) st = srv_rank(x, 0, 2, "[tokens, hidden]");
  if (st == BP_OK) st = srv_rank(x, 1, 2, "[(num_heads + 2 num_kv_heads) * head_size, hidden]");
  if (st != BP_OK) return st;
  if (w->dtype != in->dtype) {
    return bp__infer_fail(x, "input 'weight' has dtype %s; expected %s (the input's)",
                          bp_dtype_name(w->dtype), bp_dtype_name(in->dtype));
  }
  if (a->num_heads < 1 || a->num_kv_heads < 1 || a->num_heads % a->num_kv_heads != 0) {
    return bp__infer_fail(x, "attrs.num_heads = %u and attrs.num_kv_heads = %u: both >= 1 and "
                             "num_heads a multiple of num_kv_heads",
                          a->num_heads, a->num_kv_heads);
  }
  int64_t heads = (int64_t)a->num_heads + 2 * (int64_t)a->num_kv_heads;
  if (w->sizes[0] % heads != 0 || w->sizes[0] == 0) {
    return bp__infer_fail(x, "input 'weight' has shape %s; dim 0 must be (num_heads + 2 "
                             "num_kv_heads) = %lld times the head size",
                          bp__shape_str(w->rank, w->sizes, s0, sizeof(s0)), (long long)heads);
  }
  int64_t D = w->sizes[0] / heads;
  st = srv_dim(x, 1, 1, in->sizes[1], "hidden of 'input'");
  if (st == BP_OK && bp__in_present(x, 2)) {
    if (x->in[2].dtype != in->dtype) {
      st = bp__infer_fail(x, "input 'opt_bias' has dtype %s; expected %s",
                          bp_dtype_name(x->in[2].dtype), bp_dtype_name(in->dtype));
    }
    if (st == BP_OK) st = srv_rank(x, 2, 1, "[(num_heads + 2 num_kv_heads) * head_size]");
    if (st == BP_OK) st = srv_dim(x, 2, 0, w->sizes[0], "rows of 'weight'");
  }
  if (st == BP_OK) st = srv_index(x, 3);
  if (st == BP_OK) st = srv_rank(x, 3, 1, "[tokens]");
  if (st == BP_OK) st = srv_dim(x, 3, 0, in->sizes[0], "tokens of 'input'");
  if (st == BP_OK) st = srv_float(x, 4);
  if (st == BP_OK) st = srv_rank(x, 4, 2, "[max_positions, rotary_dim] (cos half, then sin half)");
  if (st != BP_OK) return st;
  if (cs->dtype != in->dtype && cs->dtype != BP_DTYPE_F32) {
    return bp__infer_fail(x, "input 'cos_sin_cache' has dtype %s; expected %s or f32",
                          bp_dtype_name(cs->dtype), bp_dtype_name(in->dtype));
  }
  if (cs->sizes[1] % 2 != 0 || cs->sizes[1] < 2 || cs->sizes[1] > D) {
    return bp__infer_fail(x, "input 'cos_sin_cache' has shape %s; its rotary dim must be even, "
                             ">= 2 and <= the head size %lld",
                          bp__shape_str(cs->rank, cs->sizes, s0, sizeof(s0)), (long long)D);
  }
  x->compute_dtype = in->dtype == BP_DTYPE_F64 ? BP_DTYPE_F64 : BP_DTYPE_F32;
  int64_t T = in->sizes[0];
  int64_t qs[3] = {T, a->num_heads, D}, ks[3] = {T, a->num_kv_heads, D};
  st = bp__infer_set_out(x, 0, in->dtype, 3, qs);
  if (st == BP_OK) st = bp__infer_set_out(x, 1, in->dtype, 3, ks);
  if (st == BP_OK) st = bp__infer_set_out(x, 2, in->dtype, 3, ks);
  return st;
}

/* ---- mixture of experts ---------------------------------------------------------- */

/* moe_topk_softmax(router_logits [T, E]) -> weights [T, k] (f32; f64 for
 * f64 logits), ids [T, k] i64. */
bp_status_t bp__infer_moe_topk_softmax(bp__infer_t* x) {
  const bp_moe_topk_attrs_t* a = x->attrs;
  const bp_tensor_desc_t* l = &x->in[0];
  bp_status_t st = srv_float(x, 0);
  if (st == BP_OK) st = srv_rank(x, 0, 2, "[tokens, num_experts]");
  if (st != BP_OK) return st;
  if (a->top_k < 1 || (int64_t)a->top_k > l->sizes[1]) {
    return bp__infer_fail(x, "attrs.top_k = %u must be in 1..%lld (the number of experts)",
                          a->top_k, (long long)l->sizes[1]);
  }
  uint32_t wd = l->dtype == BP_DTYPE_F64 ? BP_DTYPE_F64 : BP_DTYPE_F32;
  x->compute_dtype = wd;
  int64_t s[2] = {l->sizes[0], a->top_k};
  st = bp__infer_set_out(x, 0, wd, 2, s);
  if (st == BP_OK) st = bp__infer_set_out(x, 1, BP_DTYPE_I64, 2, s);
  return st;
}

/* moe_permute, moe_unpermute, grouped_mm: ids outside [0, E) are not local
 * (expert parallelism: skipped, inverse -1); the kernels check values. */
/* moe_permute(hidden_states [T, H], topk_ids [T, k] i32/i64) -> permuted
 * [T * k, H] like hidden_states, expert_offsets [E + 1] i64, inverse [T, k]
 * i64. */
bp_status_t bp__infer_moe_permute(bp__infer_t* x) {
  const bp_moe_permute_attrs_t* a = x->attrs;
  const bp_tensor_desc_t *h = &x->in[0], *ids = &x->in[1];
  bp_status_t st = srv_float(x, 0);
  if (st == BP_OK) st = srv_rank(x, 0, 2, "[tokens, hidden]");
  if (st == BP_OK) st = srv_index(x, 1);
  if (st == BP_OK) st = srv_rank(x, 1, 2, "[tokens, top_k]");
  if (st == BP_OK) st = srv_dim(x, 1, 0, h->sizes[0], "tokens of 'hidden_states'");
  if (st != BP_OK) return st;
  if (a->num_experts < 1) {
    return bp__infer_fail(x, "attrs.num_experts = %u must be >= 1", a->num_experts);
  }
  int64_t rows = 0;
  if (__builtin_mul_overflow(ids->sizes[0], ids->sizes[1], &rows)) {
    return bp__infer_fail(x, "tokens * top_k overflows");
  }
  int64_t ps[2] = {rows, h->sizes[1]}, os[1] = {(int64_t)a->num_experts + 1};
  x->compute_dtype = h->dtype;
  st = bp__infer_set_out(x, 0, h->dtype, 2, ps);
  if (st == BP_OK) st = bp__infer_set_out(x, 1, BP_DTYPE_I64, 1, os);
  if (st == BP_OK) st = bp__infer_set_out(x, 2, BP_DTYPE_I64, 2, ids->sizes);
  return st;
}

/* moe_unpermute(permuted [N, H], inverse [T, k] i32/i64, topk_weights? [T, k])
 * -> out [T, H] like permuted. */
bp_status_t bp__infer_moe_unpermute(bp__infer_t* x) {
  const bp_tensor_desc_t *p = &x->in[0], *inv = &x->in[1];
  char s0[192], s1[192];
  bp_status_t st = srv_float(x, 0);
  if (st == BP_OK) st = srv_rank(x, 0, 2, "[rows, hidden]");
  if (st == BP_OK) st = srv_index(x, 1);
  if (st == BP_OK) st = srv_rank(x, 1, 2, "[tokens, top_k]");
  if (st == BP_OK && bp__in_present(x, 2)) {
    const bp_tensor_desc_t* w = &x->in[2];
    st = srv_float(x, 2);
    if (st == BP_OK && !bp__shape_equal(w->rank, w->sizes, inv->rank, inv->sizes)) {
      st = bp__infer_fail(x, "input 'opt_topk_weights' has shape %s; expected the shape of "
                             "'inverse' %s",
                          bp__shape_str(w->rank, w->sizes, s0, sizeof(s0)),
                          bp__shape_str(inv->rank, inv->sizes, s1, sizeof(s1)));
    }
  }
  if (st != BP_OK) return st;
  int64_t os[2] = {inv->sizes[0], p->sizes[1]};
  x->compute_dtype = p->dtype == BP_DTYPE_F64 ? BP_DTYPE_F64 : BP_DTYPE_F32;
  return bp__infer_set_out(x, 0, p->dtype, 2, os);
}

/* grouped_mm, weight-only form (scale present): attrs.qdtype i8/u8 codes
 * [E, N, K] or i4/u4 two per byte [E, N, K / 2] (u8), scale [E, N, groups]
 * f32/f16/bf16 (groups of attrs.block_size along K; 0: one per channel),
 * zero point like the scale (its dtype, i8 or u8); *out_n = N. */
static bp_status_t srv_grouped_quant(bp__infer_t* x, int64_t K, int64_t* out_n) {
  const bp_quantize_attrs_t* a = x->attrs;
  const bp_tensor_desc_t *w = &x->in[1], *s = &x->in[4];
  char s0[192], s1[192];
  uint32_t q = a->qdtype;
  int four = q == BP_DTYPE_I4 || q == BP_DTYPE_U4;
  if (!(four || q == BP_DTYPE_I8 || q == BP_DTYPE_U8)) {
    return bp__infer_fail(x, "attrs.qdtype %s: weight-only grouped_mm takes i8, u8, i4 or u4 codes",
                          bp_dtype_name(q));
  }
  uint32_t stored = four ? BP_DTYPE_U8 : q;
  if (w->dtype != stored || w->sizes[2] * (four ? 2 : 1) != K) {
    return bp__infer_fail(x, "input 'weight' has shape %s and dtype %s; %s codes of K = %lld are "
                             "stored as %s [num_experts, out_features, %lld]",
                          bp__shape_str(w->rank, w->sizes, s0, sizeof(s0)), bp_dtype_name(w->dtype),
                          bp_dtype_name(q), (long long)K, bp_dtype_name(stored),
                          (long long)(four ? K / 2 : K));
  }
  if (a->block_size < 0) {
    return bp__infer_fail(x, "attrs.block_size = %lld is negative", (long long)a->block_size);
  }
  if (a->activation != BP_ACTIVATION_NONE) {
    return bp__infer_fail(x, "attrs.activation = %u: grouped_mm takes no activation; set it to 0",
                          a->activation);
  }
  int64_t groups = a->block_size > 0 ? (K + a->block_size - 1) / a->block_size : 1;
  int64_t want[3] = {w->sizes[0], w->sizes[1], groups > 0 ? groups : 1};
  if (!(s->dtype == BP_DTYPE_F32 || s->dtype == BP_DTYPE_F16 || s->dtype == BP_DTYPE_BF16) ||
      !bp__shape_equal(s->rank, s->sizes, 3, want)) {
    return bp__infer_fail(x, "input 'opt_scale' has shape %s and dtype %s; expected f32, f16 or "
                             "bf16 %s (groups of %lld along K = %lld)",
                          bp__shape_str(s->rank, s->sizes, s0, sizeof(s0)), bp_dtype_name(s->dtype),
                          bp__shape_str(3, want, s1, sizeof(s1)),
                          (long long)(a->block_size > 0 ? a->block_size : K), (long long)K);
  }
  if (bp__in_present(x, 5)) {
    const bp_tensor_desc_t* z = &x->in[5];
    if ((z->dtype != s->dtype && z->dtype != BP_DTYPE_I8 && z->dtype != BP_DTYPE_U8) ||
        !bp__shape_equal(z->rank, z->sizes, s->rank, s->sizes)) {
      return bp__infer_fail(x, "input 'opt_zero_point' has shape %s and dtype %s; expected the "
                               "scale's shape %s and its dtype, i8 or u8",
                            bp__shape_str(z->rank, z->sizes, s0, sizeof(s0)),
                            bp_dtype_name(z->dtype), bp__shape_str(s->rank, s->sizes, s1, sizeof(s1)));
    }
  }
  *out_n = w->sizes[1];
  return BP_OK;
}

/* grouped_mm(input [M, K], weight [E, N, K] (or codes, see above),
 * expert_offsets [E + 1] i32/i64, bias? [E, N], scale?, zero_point?) ->
 * out [M, N] like input. */
bp_status_t bp__infer_grouped_mm(bp__infer_t* x) {
  const bp_quantize_attrs_t* a = x->attrs;
  const bp_tensor_desc_t *in = &x->in[0], *w = &x->in[1];
  char s0[192], s1[192];
  int quant = bp__in_present(x, 4);
  bp_status_t st = srv_float(x, 0);
  if (st == BP_OK) st = srv_rank(x, 0, 2, "[rows, in_features]");
  if (st == BP_OK) st = srv_rank(x, 1, 3, "[num_experts, out_features, in_features]");
  if (st != BP_OK) return st;
  int64_t K = in->sizes[1], N = w->sizes[1];
  if (quant) {
    if (in->dtype == BP_DTYPE_F64) {
      return bp__infer_fail(x, "input 'input' has dtype f64; weight-only grouped_mm takes f32, "
                               "f16 or bf16");
    }
    st = srv_grouped_quant(x, K, &N);
  } else if (a->qdtype != BP_DTYPE_INVALID || bp__in_present(x, 5)) {
    st = bp__infer_fail(x, "attrs.qdtype and 'opt_zero_point' need 'opt_scale' (weight-only "
                           "codes); float weights take neither");
  } else if (w->dtype != in->dtype) {
    st = bp__infer_fail(x, "input 'weight' has dtype %s; expected %s (the input's dtype)",
                        bp_dtype_name(w->dtype), bp_dtype_name(in->dtype));
  } else if (w->sizes[2] != K) {
    st = bp__infer_fail(x, "input 'weight' has shape %s but 'input' has %s: in_features differ",
                        bp__shape_str(w->rank, w->sizes, s0, sizeof(s0)),
                        bp__shape_str(in->rank, in->sizes, s1, sizeof(s1)));
  }
  if (st == BP_OK) st = srv_index(x, 2);
  if (st == BP_OK) st = srv_rank(x, 2, 1, "[num_experts + 1]");
  if (st == BP_OK) st = srv_dim(x, 2, 0, w->sizes[0] + 1, "num_experts of 'weight' + 1");
  if (st == BP_OK && bp__in_present(x, 3)) {
    const bp_tensor_desc_t* b = &x->in[3];
    if (b->dtype != in->dtype) {
      st = bp__infer_fail(x, "input 'opt_bias' has dtype %s; expected %s (the input's dtype)",
                          bp_dtype_name(b->dtype), bp_dtype_name(in->dtype));
    }
    if (st == BP_OK) st = srv_rank(x, 3, 2, "[num_experts, out_features]");
    if (st == BP_OK) st = srv_dim(x, 3, 0, w->sizes[0], "num_experts of 'weight'");
    if (st == BP_OK) st = srv_dim(x, 3, 1, N, "out_features of 'weight'");
  }
  if (st != BP_OK) return st;
  int64_t os[2] = {in->sizes[0], N};
  x->compute_dtype = in->dtype == BP_DTYPE_F64 ? BP_DTYPE_F64 : BP_DTYPE_F32;
  return bp__infer_set_out(x, 0, in->dtype, 2, os);
}

/* ---- attention states, cache maintenance, paged prefill ----------------------- */

/* merge_attn_states(prefix_output [T, H, D], prefix_lse [H, T], suffix_output
 * like prefix_output, suffix_lse [H, T]) -> out like prefix_output, out_lse
 * [H, T] f32 (f64 for f64 outputs). */
bp_status_t bp__infer_merge_attn_states(bp__infer_t* x) {
  const bp_tensor_desc_t* o = &x->in[0];
  bp_status_t st = srv_float(x, 0);
  if (st == BP_OK) st = srv_rank(x, 0, 3, "[tokens, num_heads, head_size]");
  if (st == BP_OK) st = bp__infer_like_input(x, 2, 0);
  for (uint32_t i = 1; i < 4 && st == BP_OK; i += 2) {
    st = srv_float(x, i);
    if (st == BP_OK) st = srv_rank(x, i, 2, "[num_heads, tokens]");
    if (st == BP_OK) st = srv_dim(x, i, 0, o->sizes[1], "num_heads of the outputs");
    if (st == BP_OK) st = srv_dim(x, i, 1, o->sizes[0], "tokens of the outputs");
  }
  if (st != BP_OK) return st;
  uint32_t ld = o->dtype == BP_DTYPE_F64 ? BP_DTYPE_F64 : BP_DTYPE_F32;
  int64_t ls[2] = {o->sizes[1], o->sizes[0]};
  x->compute_dtype = ld;
  st = bp__infer_set_out(x, 0, o->dtype, 3, o->sizes);
  if (st == BP_OK) st = bp__infer_set_out(x, 1, ld, 2, ls);
  return st;
}

/* kv_cache_copy_blocks(key_cache, value_cache, block_mapping [P, 2] i32/i64
 * (source, destination)) -> (key_cache_out, value_cache_out), each like its
 * cache; outputs may be the caches themselves (in place). */
bp_status_t bp__infer_kv_cache_copy_blocks(bp__infer_t* x) {
  bp_status_t st = srv_caches(x, 0, 1);
  if (st == BP_OK) st = srv_index(x, 2);
  if (st == BP_OK) st = srv_rank(x, 2, 2, "[pairs, 2] (source block, destination block)");
  if (st == BP_OK) st = srv_dim(x, 2, 1, 2, "a source and a destination block");
  if (st != BP_OK) return st;
  const bp_tensor_desc_t* c = &x->in[0];
  x->compute_dtype = c->dtype;
  st = bp__infer_set_out(x, 0, c->dtype, c->rank, c->sizes);
  if (st == BP_OK) st = bp__infer_set_out(x, 1, c->dtype, c->rank, c->sizes);
  return st;
}

/* paged_attention_prefill(query [T, H, D], key_cache, value_cache,
 * block_tables [S, MB], query_start_loc [S + 1], seq_lens [S]) -> out
 * [T, H, D]. */
bp_status_t bp__infer_paged_attention_prefill(bp__infer_t* x) {
  bp_status_t st = srv_query_caches(x, "[tokens, num_heads, head_size]");
  if (st != BP_OK) return st;
  const bp_tensor_desc_t* bt = &x->in[3];
  st = srv_index(x, 3);
  if (st == BP_OK) st = srv_rank(x, 3, 2, "[seqs, max_blocks_per_seq]");
  if (st == BP_OK) st = srv_index(x, 4);
  if (st == BP_OK) st = srv_rank(x, 4, 1, "[seqs + 1]");
  if (st == BP_OK) st = srv_dim(x, 4, 0, bt->sizes[0] + 1, "seqs of 'block_tables' + 1");
  if (st == BP_OK) st = srv_index(x, 5);
  if (st == BP_OK) st = srv_rank(x, 5, 1, "[seqs]");
  if (st == BP_OK) st = srv_dim(x, 5, 0, bt->sizes[0], "seqs of 'block_tables'");
  if (st != BP_OK) return st;
  return srv_attention_out(x);
}
