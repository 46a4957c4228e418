/* backplane core: inference rules of the serving helpers added in ABI 1.3
 * (docs/semantics.md, "Logits processing" and "rotary_embedding_pos"):
 *
 *   rotary_embedding_pos(query [T, H*D] or [T, H, D], key [T, Hkv*D] or
 *       [T, Hkv, D], positions [T] i32/i64, cos_sin_cache [max_pos, R])
 *       -> query_out like query, key_out like key (each may be written
 *          over its input)
 *   logits_softcap(logits) -> out like logits
 *   top_k_top_p_mask(logits [..., V]) -> out like logits
 *   rejection_sample(draft_token_ids, target_probs, bonus_token_ids,
 *       draft_probs?) -> out [B, K + 1] i64
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "ops/ops_internal.h"

static bp_status_t lg_float(const bp__infer_t* x, uint32_t i) {
  if (bp__dtype_is_float(x->in[i].dtype)) return BP_OK;
  char n[64];
  return bp__infer_fail(x, "input '%s' has dtype %s; a floating dtype (f16, bf16, f32, f64) is required",
                        bp__op_input_name(x->op, x->num_inputs, i, n), bp_dtype_name(x->in[i].dtype));
}

/* Input i holds `heads` heads of the same size: [T, heads * D] or
 * [T, heads, D]; *out_d gets D. */
static bp_status_t lg_heads(const bp__infer_t* x, uint32_t i, int64_t T, uint32_t heads, int64_t* out_d) {
  const bp_tensor_desc_t* t = &x->in[i];
  char n[64], s[192];
  const char* name = bp__op_input_name(x->op, x->num_inputs, i, n);
  int ok = (t->rank == 2 || t->rank == 3) && t->sizes[0] == T;
  if (ok && t->rank == 2) ok = t->sizes[1] % heads == 0 && t->sizes[1] > 0;
  if (ok && t->rank == 3) ok = t->sizes[1] == heads && t->sizes[2] > 0;
  if (!ok) {
    return bp__infer_fail(x, "input '%s' has shape %s; expected [%lld, %u * head_size] or [%lld, %u, "
                             "head_size]",
                          name, bp__shape_str(t->rank, t->sizes, s, sizeof s), (long long)T, heads,
                          (long long)T, heads);
  }
  *out_d = t->rank == 2 ? t->sizes[1] / heads : t->sizes[2];
  return BP_OK;
}

bp_status_t bp__infer_rotary_embedding_pos(bp__infer_t* x) {
  const bp_qkv_rotary_attrs_t* a = x->attrs;
  const bp_tensor_desc_t *q = &x->in[0], *k = &x->in[1], *p = &x->in[2], *cs = &x->in[3];
  char s0[192];
  bp_status_t st = lg_float(x, 0);
  if (st != BP_OK) return st;
  if (k->dtype != q->dtype) {
    return bp__infer_fail(x, "input 'key' has dtype %s; expected %s (the query's)", bp_dtype_name(k->dtype),
                          bp_dtype_name(q->dtype));
  }
  if (a->num_heads < 1 || a->num_kv_heads < 1) {
    return bp__infer_fail(x, "attrs.num_heads = %u and attrs.num_kv_heads = %u must both be >= 1",
                          a->num_heads, a->num_kv_heads);
  }
  if (p->rank != 1 || (p->dtype != BP_DTYPE_I32 && p->dtype != BP_DTYPE_I64)) {
    return bp__infer_fail(x, "input 'positions' is %s %s; expected i32 or i64 [tokens]",
                          bp_dtype_name(p->dtype), bp__shape_str(p->rank, p->sizes, s0, sizeof s0));
  }
  int64_t T = p->sizes[0], dq, dk;
  st = lg_heads(x, 0, T, a->num_heads, &dq);
  if (st == BP_OK) st = lg_heads(x, 1, T, a->num_kv_heads, &dk);
  if (st != BP_OK) return st;
  if (dq != dk) {
    return bp__infer_fail(x, "query's head size %lld differs from key's %lld", (long long)dq, (long long)dk);
  }
  st = lg_float(x, 3);
  if (st != BP_OK) return st;
  if (cs->dtype != q->dtype && cs->dtype != BP_DTYPE_F32) {
    return bp__infer_fail(x, "input 'cos_sin_cache' has dtype %s; expected %s or f32",
                          bp_dtype_name(cs->dtype), bp_dtype_name(q->dtype));
  }
  if (cs->rank != 2 || cs->sizes[1] % 2 != 0 || cs->sizes[1] < 2 || cs->sizes[1] > dq) {
    return bp__infer_fail(x, "input 'cos_sin_cache' has shape %s; expected [max_positions, rotary_dim] "
                             "(cos half, then sin half) with rotary_dim even, >= 2 and <= the head size "
                             "%lld",
                          bp__shape_str(cs->rank, cs->sizes, s0, sizeof s0), (long long)dq);
  }
  x->compute_dtype = q->dtype == BP_DTYPE_F64 ? BP_DTYPE_F64 : BP_DTYPE_F32;
  st = bp__infer_set_out(x, 0, q->dtype, q->rank, q->sizes);
  if (st == BP_OK) st = bp__infer_set_out(x, 1, k->dtype, k->rank, k->sizes);
  return st;
}

/* Logits [..., V] with V >= 1, floating. */
static bp_status_t lg_logits(bp__infer_t* x) {
  const bp_tensor_desc_t* l = &x->in[0];
  bp_status_t st = lg_float(x, 0);
  if (st != BP_OK) return st;
  if (l->rank == 0 || l->sizes[l->rank - 1] == 0) {
    char s[192];
    return bp__infer_fail(x, "input 'logits' has shape %s; its last dim is the vocabulary and must "
                             "hold at least one entry",
                          bp__shape_str(l->rank, l->sizes, s, sizeof s));
  }
  x->compute_dtype = l->dtype == BP_DTYPE_F64 ? BP_DTYPE_F64 : BP_DTYPE_F32;
  return bp__infer_set_out(x, 0, l->dtype, l->rank, l->sizes);
}

bp_status_t bp__infer_logits_softcap(bp__infer_t* x) {
  const bp_softcap_attrs_t* a = x->attrs;
  if (!(a->cap > 0.0) || !isfinite(a->cap)) {
    return bp__infer_fail(x, "attrs.cap = %g must be finite and > 0", a->cap);
  }
  return lg_logits(x);
}

bp_status_t bp__infer_top_k_top_p_mask(bp__infer_t* x) {
  const bp_logits_mask_attrs_t* a = x->attrs;
  if (!(a->top_p >= 0.0 && a->top_p <= 1.0)) {
    return bp__infer_fail(x, "attrs.top_p = %g must be in [0, 1] (0 or 1: no top-p filter)", a->top_p);
  }
  if (!(a->min_p >= 0.0 && a->min_p <= 1.0)) {
    return bp__infer_fail(x, "attrs.min_p = %g must be in [0, 1] (0: no min-p filter)", a->min_p);
  }
  return lg_logits(x);
}

static int lg_index(uint32_t d) { return d == BP_DTYPE_I32 || d == BP_DTYPE_I64; }

/* rejection_sample(draft_token_ids [B, K] i32/i64, target_probs [B, K, V],
 * bonus_token_ids [B] i32/i64, draft_probs? like target_probs)
 * -> out [B, K + 1] i64. */
bp_status_t bp__infer_rejection_sample(bp__infer_t* x) {
  const bp_rejection_attrs_t* a = x->attrs;
  const bp_tensor_desc_t *d = &x->in[0], *t = &x->in[1], *bonus = &x->in[2];
  char s0[192], s1[192];
  if (a->greedy > 1) return bp__infer_fail(x, "attrs.greedy = %u must be 0 or 1", a->greedy);
  if (d->rank != 2 || !lg_index(d->dtype)) {
    return bp__infer_fail(x, "input 'draft_token_ids' is %s %s; expected i32 or i64 [batch, num_draft]",
                          bp_dtype_name(d->dtype), bp__shape_str(d->rank, d->sizes, s0, sizeof s0));
  }
  bp_status_t st = lg_float(x, 1);
  if (st != BP_OK) return st;
  if (t->rank != 3 || t->sizes[0] != d->sizes[0] || t->sizes[1] != d->sizes[1] || t->sizes[2] < 1) {
    return bp__infer_fail(x, "input 'target_probs' has shape %s; expected [%lld, %lld, vocab >= 1] (one row "
                             "per draft token)",
                          bp__shape_str(t->rank, t->sizes, s0, sizeof s0), (long long)d->sizes[0],
                          (long long)d->sizes[1]);
  }
  if (bonus->rank != 1 || bonus->sizes[0] != d->sizes[0] || !lg_index(bonus->dtype)) {
    return bp__infer_fail(x, "input 'bonus_token_ids' is %s %s; expected i32 or i64 [%lld]",
                          bp_dtype_name(bonus->dtype), bp__shape_str(bonus->rank, bonus->sizes, s0, sizeof s0),
                          (long long)d->sizes[0]);
  }
  if (bp__in_present(x, 3)) {
    const bp_tensor_desc_t* q = &x->in[3];
    if (q->dtype != t->dtype || !bp__shape_equal(q->rank, q->sizes, t->rank, t->sizes)) {
      return bp__infer_fail(x, "input 'draft_probs' is %s %s; expected %s %s (the target's)", bp_dtype_name(q->dtype),
                            bp__shape_str(q->rank, q->sizes, s0, sizeof s0), bp_dtype_name(t->dtype),
                            bp__shape_str(t->rank, t->sizes, s1, sizeof s1));
    }
  }
  if (d->sizes[1] > INT64_MAX - 1) return bp__infer_fail(x, "num_draft overflows");
  int64_t os[2] = {d->sizes[0], d->sizes[1] + 1};
  x->compute_dtype = BP_DTYPE_F64;
  return bp__infer_set_out(x, 0, BP_DTYPE_I64, 2, os);
}
