/* References of the serving attention ops added to the paged KV cache
 * family: merge_attn_states, kv_cache_copy_blocks and
 * paged_attention_prefill, written as the definitions of docs/semantics.md
 * ("Paged KV cache") in fp64.
 *
 * merge_attn_states: the two partial results weighted by exp(lse - max);
 *   the bound covers the exponentials' error (|lse - max| in the term count)
 *   and the output's magnitude; out_lse is max + log(sum).
 * kv_cache_copy_blocks: exact copies.
 * paged_attention_prefill: per query row, the decode reference's softmax
 *   over the causal key range of its position (class REDUCE, the same bound
 *   as paged_attention).
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ref.h"

void bpc_gen_merge_attn_states(struct bpc_gen* g);
void bpc_gen_kv_cache_copy_blocks(struct bpc_gen* g);
void bpc_gen_paged_prefill(struct bpc_gen* g);

static int is_index(uint32_t d) { return d == BP_DTYPE_I32 || d == BP_DTYPE_I64; }
static double ld(const bpc_host_tensor_t* t, int64_t i) { return bpc_load(t->dtype, t->data, i).f; }
static int64_t li(const bpc_host_tensor_t* t, int64_t i) { return bpc_load(t->dtype, t->data, i).i; }

/* ---- merge_attn_states ------------------------------------------------------------- */

static bp_status_t ref_merge_attn_states(const bpc_case_t* c, const bpc_host_tensor_t* in,
                                         bpc_ref_result_t* res) {
  (void)c;
  const bpc_host_tensor_t *po = &in[0], *pl = &in[1], *so = &in[2], *sl = &in[3];
  if (po->rank != 3 || pl->rank != 2 || pl->sizes[0] != po->sizes[1] || pl->sizes[1] != po->sizes[0]) {
    return bpc_ref_reject(res, "merge_attn_states: outputs [T, H, D], lse [H, T]");
  }
  int64_t T = po->sizes[0], H = po->sizes[1], D = po->sizes[2], ls[2] = {H, T};
  uint32_t wd = po->dtype == BP_DTYPE_F64 ? BP_DTYPE_F64 : BP_DTYPE_F32;
  res->num_outputs = 2;
  res->compute_dtype = wd;
  bp_status_t st = bpc_expected_init(&res->out[0], po->dtype, 3, po->sizes, 1);
  if (st == BP_OK) st = bpc_expected_init(&res->out[1], wd, 2, ls, 1);
  if (st != BP_OK) return st;
  bpc_expected_t *o = &res->out[0], *ol = &res->out[1];
  for (int64_t h = 0; h < H; h++) {
    for (int64_t t = 0; t < T; t++) {
      double p = ld(pl, h * T + t), s = ld(sl, h * T + t);
      p = isinf(p) ? -INFINITY : p; /* vLLM: an infinite lse is an empty part */
      s = isinf(s) ? -INFINITY : s;
      int64_t l = h * T + t;
      double m = p > s ? p : s;
      if (isnan(p) || isnan(s)) {
        ol->f[l] = NAN;
        for (int64_t d = 0; d < D; d++) o->f[(t * H + h) * D + d] = NAN;
        continue;
      }
      if (m == -INFINITY) { /* both parts empty: zeros, lse -inf */
        ol->f[l] = -INFINITY;
        continue;
      }
      double pe = exp(p - m), se = exp(s - m), z = pe + se;
      ol->f[l] = m + log(z);
      ol->mag[l] = fabs(m) + 1.0;
      ol->nterms[l] = 4.0;
      for (int64_t d = 0; d < D; d++) {
        int64_t i = (t * H + h) * D + d;
        double a = ld(po, i) * pe / z, b = ld(so, i) * se / z;
        o->f[i] = a + b;
        o->mag[i] = fabs(a) + fabs(b);
        o->nterms[i] = 6.0 + (m - p < 1e9 ? m - p : 0.0) + (m - s < 1e9 ? m - s : 0.0);
      }
    }
  }
  return BP_OK;
}

/* ---- kv_cache_copy_blocks ---------------------------------------------------------- */

static bp_status_t ref_kv_cache_copy_blocks(const bpc_case_t* c, const bpc_host_tensor_t* in,
                                            bpc_ref_result_t* res) {
  (void)c;
  const bpc_host_tensor_t *kc = &in[0], *map = &in[2];
  if (kc->rank != 4 || map->rank != 2 || map->sizes[1] != 2 || !is_index(map->dtype)) {
    return bpc_ref_reject(res, "kv_cache_copy_blocks: caches [NB, BS, H, D], mapping [P, 2]");
  }
  int64_t NB = kc->sizes[0], blk = kc->sizes[1] * kc->sizes[2] * kc->sizes[3], P = map->sizes[0];
  for (int64_t i = 0; i < 2 * P; i++) {
    if (li(map, i) < 0 || li(map, i) >= NB) return bpc_ref_reject(res, "a block outside the cache");
  }
  for (int64_t i = 0; i < P; i++) {
    for (int64_t j = 0; j < P; j++) {
      if (li(map, 2 * j) == li(map, 2 * i + 1) || (j != i && li(map, 2 * j + 1) == li(map, 2 * i + 1))) {
        return bpc_ref_reject(res, "a destination that is a source or another pair's destination");
      }
    }
  }
  res->num_outputs = 2;
  res->compute_dtype = kc->dtype;
  for (int o = 0; o < 2; o++) {
    bp_status_t st = bpc_expected_init(&res->out[o], kc->dtype, 4, kc->sizes, 0);
    if (st != BP_OK) return st;
    bpc_expected_t* e = &res->out[o];
    for (int64_t i = 0; i < e->numel; i++) e->f[i] = ld(&in[o], i);
    for (int64_t p = 0; p < P; p++) {
      int64_t src = li(map, 2 * p), dst = li(map, 2 * p + 1);
      for (int64_t i = 0; i < blk; i++) e->f[dst * blk + i] = ld(&in[o], src * blk + i);
    }
  }
  return BP_OK;
}

/* ---- paged_attention_prefill ------------------------------------------------------- */

static bp_status_t ref_paged_prefill(const bpc_case_t* c, const bpc_host_tensor_t* in,
                                     bpc_ref_result_t* res) {
  const bpc_host_tensor_t *q = &in[0], *kc = &in[1], *vc = &in[2], *bt = &in[3], *qsl = &in[4],
                          *sl = &in[5];
  const bp_paged_attention_attrs_t* a = &c->attrs.paged;
  if (q->rank != 3 || kc->rank != 4 || bt->rank != 2 || qsl->rank != 1 ||
      qsl->sizes[0] != bt->sizes[0] + 1 || kc->sizes[2] < 1 || q->sizes[1] % kc->sizes[2] != 0) {
    return bpc_ref_reject(res, "paged_attention_prefill: query [T, H, D], caches, tables");
  }
  int64_t T = q->sizes[0], H = q->sizes[1], D = q->sizes[2], S = bt->sizes[0];
  int64_t NB = kc->sizes[0], BS = kc->sizes[1], Hkv = kc->sizes[2], MB = bt->sizes[1];
  if (li(qsl, 0) < 0 || li(qsl, S) > T) return bpc_ref_reject(res, "query_start_loc outside [0, T]");
  for (int64_t s = 0; s < S; s++) {
    int64_t qn = li(qsl, s + 1) - li(qsl, s), len = li(sl, s);
    if (qn < 0 || len < qn || len > MB * BS) {
      return bpc_ref_reject(res, "a sequence's lengths outside its table");
    }
    for (int64_t b = 0; b * BS < len; b++) {
      if (li(bt, s * MB + b) < 0 || li(bt, s * MB + b) >= NB) {
        return bpc_ref_reject(res, "block id outside the cache");
      }
    }
  }
  bp_status_t st = bpc_ref_single_output(res, q->dtype, 3, q->sizes, 1,
                                         q->dtype == BP_DTYPE_F64 ? BP_DTYPE_F64 : BP_DTYPE_F32);
  if (st != BP_OK) return st;
  bpc_expected_t* e = &res->out[0];
  double scale = a->scale > 0.0 ? a->scale : 1.0 / sqrt((double)D);
  int64_t maxn = MB * BS;
  double* sc = malloc(sizeof(double) * (size_t)(2 * (maxn > 0 ? maxn : 1)));
  if (!sc) return BP_RESOURCE_EXHAUSTED;
  const bpc_paged_t pg = {q, kc, vc, bt, D, BS, Hkv, MB, scale};
  for (int64_t s = 0; s < S; s++) {
    int64_t q0 = li(qsl, s), qn = li(qsl, s + 1) - q0, len = li(sl, s);
    for (int64_t i = 0; i < qn; i++) {
      int64_t pos = len - qn + i, end = pos + 1;
      int64_t start = a->sliding_window > 0 && end > (int64_t)a->sliding_window ? end - a->sliding_window : 0;
      for (int64_t h = 0; h < H; h++) {
        bpc_ref_paged_row(&pg, ((q0 + i) * H + h) * D, h / (H / Hkv), s, start, end, 0.0, sc, e);
      }
    }
  }
  free(sc);
  return BP_OK; /* rows outside [qsl[0], qsl[S]) stay zero */
}

static const bpc_ref_group_t k_groups[] = {
    {ref_merge_attn_states, BPC_ACC_REDUCE, 0, BPC_OPS(BP_OP_merge_attn_states),
     bpc_gen_merge_attn_states, NULL},
    {ref_kv_cache_copy_blocks, BPC_ACC_EXACT, BPC_OPF_SIGNED_ZERO,
     BPC_OPS(BP_OP_kv_cache_copy_blocks), bpc_gen_kv_cache_copy_blocks, NULL},
    {ref_paged_prefill, BPC_ACC_REDUCE, 0, BPC_OPS(BP_OP_paged_attention_prefill),
     bpc_gen_paged_prefill, NULL},
};

const bpc_ref_family_t bpc_ref_family_paged = BPC_FAMILY(paged, k_groups);
