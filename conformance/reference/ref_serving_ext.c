/* References of the serving ops of ABI 1.4 (docs/semantics.md, "Mixture of
 * experts", "Paged KV cache", "Logits processing", "Gated activations"),
 * written as the definitions in fp64:
 *
 *   moe_align_block_size  exact: per expert, its pairs in ascending order,
 *                         then pad values to the block multiple.
 *   grouped_topk          ids exact (scores in fp64; ties to the lower
 *                         index); weights REDUCE over the E terms of the
 *                         softmax sum and the k of the renormalization.
 *   concat_and_cache_mla, gather_cache  exact data movement (signed zeros).
 *   compute_slot_mapping  exact.
 *   gather_logprobs       ids and ranks exact (from the logits' order);
 *                         log-probabilities REDUCE over the V terms of the
 *                         log-sum-exp.
 *   swiglu_oai            TRANS_HARD (a sigmoid), one rounding.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ref.h"

void bpc_gen_moe_align(struct bpc_gen* g);
void bpc_gen_grouped_topk(struct bpc_gen* g);
void bpc_gen_concat_mla(struct bpc_gen* g);
void bpc_gen_gather_cache(struct bpc_gen* g);
void bpc_gen_slot_mapping(struct bpc_gen* g);
void bpc_gen_logprobs(struct bpc_gen* g);
void bpc_gen_swiglu_oai(struct bpc_gen* g);

static int is_index(uint32_t d) { return d == BP_DTYPE_I32 || d == BP_DTYPE_I64; }
static double ld(const bpc_host_tensor_t* t, int64_t i) { return bpc_load(t->dtype, t->data, i).f; }
static int64_t li(const bpc_host_tensor_t* t, int64_t i) { return bpc_load(t->dtype, t->data, i).i; }
static int present(const bpc_host_tensor_t* t) { return t->dtype != BP_DTYPE_INVALID; }

/* ---- moe_align_block_size ------------------------------------------------------------ */

static bp_status_t ref_moe_align(const bpc_case_t* c, const bpc_host_tensor_t* in, bpc_ref_result_t* res) {
  const bpc_host_tensor_t* ids = &in[0];
  const bp_moe_align_attrs_t* a = &c->attrs.moe_align;
  if (ids->rank != 2 || !is_index(ids->dtype) || a->num_experts < 1 || a->block_size < 1)
    return bpc_ref_reject(res, "moe_align_block_size: ids [T, k], num_experts and block_size >= 1");
  int64_t N = ids->numel, E = a->num_experts, BS = a->block_size;
  int64_t blocks = (N + E * (BS - 1) + BS - 1) / BS, P = blocks * BS, one = 1;
  res->num_outputs = 3;
  res->compute_dtype = BP_DTYPE_I32;
  bp_status_t st = bpc_expected_init(&res->out[0], BP_DTYPE_I32, 1, &P, 0);
  if (st == BP_OK) st = bpc_expected_init(&res->out[1], BP_DTYPE_I32, 1, &blocks, 0);
  if (st == BP_OK) st = bpc_expected_init(&res->out[2], BP_DTYPE_I32, 1, &one, 0);
  if (st != BP_OK) return st;
  int64_t *sorted = res->out[0].i, *experts = res->out[1].i, row = 0;
  for (int64_t i = 0; i < P; i++) sorted[i] = N;
  for (int64_t b = 0; b < blocks; b++) experts[b] = -1;
  for (int64_t e = 0; e < E; e++) {
    int64_t first = row;
    for (int64_t j = 0; j < N; j++)
      if (li(ids, j) == e) sorted[row++] = j;
    while (row % BS) row++; /* pad entries keep the value N */
    for (int64_t r = first; r < row; r += BS) experts[r / BS] = e;
  }
  res->out[2].i[0] = row;
  return BP_OK;
}

/* ---- grouped_topk ---------------------------------------------------------------------- */

/* Whether (a, i) ranks before (b, j): larger first, NaN last, the lower
 * index on ties. */
static int before(double a, int64_t i, double b, int64_t j) {
  if (isnan(a) || isnan(b)) return isnan(b) && (!isnan(a) || i < j);
  return a > b || (a == b && i < j);
}

/* The best of v[0..n) whose mask entry is 1; -1 when none. */
static int64_t best_of(const double* v, const uint8_t* ok, int64_t n) {
  int64_t best = -1;
  for (int64_t i = 0; i < n; i++)
    if (ok[i] && (best < 0 || before(v[i], i, v[best], best))) best = i;
  return best;
}

static bp_status_t ref_grouped_topk(const bpc_case_t* c, const bpc_host_tensor_t* in, bpc_ref_result_t* res) {
  const bpc_host_tensor_t *x = &in[0], *bias = &in[1];
  const bp_grouped_topk_attrs_t* a = &c->attrs.grouped_topk;
  if (x->rank != 2) return bpc_ref_reject(res, "grouped_topk: gating_output [T, E]");
  int64_t T = x->sizes[0], E = x->sizes[1], G = a->num_expert_group ? a->num_expert_group : 1;
  int64_t kg = a->topk_group ? a->topk_group : G, k = a->top_k, per = E / G;
  if (E % G || kg > G || k < 1 || k > kg * per) return bpc_ref_reject(res, "grouped_topk: group sizes");
  int64_t s2[2] = {T, k};
  uint32_t wd = x->dtype == BP_DTYPE_F64 ? BP_DTYPE_F64 : BP_DTYPE_F32;
  res->num_outputs = 2;
  res->compute_dtype = BP_DTYPE_F64;
  bp_status_t st = bpc_expected_init(&res->out[0], wd, 2, s2, 1);
  if (st == BP_OK) st = bpc_expected_init(&res->out[1], BP_DTYPE_I32, 2, s2, 0);
  if (st != BP_OK) return st;
  double* s = malloc(sizeof(double) * (size_t)(2 * E + G + 1));
  uint8_t* ok = malloc((size_t)(E + G + 1));
  if (!s || !ok) {
    free(s), free(ok);
    return BP_RESOURCE_EXHAUSTED;
  }
  double *choice = s + E, *gs = choice + E;
  uint8_t* gok = ok + E;
  double rsf = a->routed_scaling_factor != 0.0 ? a->routed_scaling_factor : 1.0;
  for (int64_t t = 0; t < T; t++) {
    const int64_t base = t * E;
    if (a->scoring_func == BP_MOE_SCORING_SIGMOID) {
      for (int64_t e = 0; e < E; e++) s[e] = 1.0 / (1.0 + exp(-ld(x, base + e)));
    } else {
      double m = -INFINITY, z = 0.0;
      for (int64_t e = 0; e < E; e++) m = fmax(m, ld(x, base + e));
      for (int64_t e = 0; e < E; e++) z += exp(ld(x, base + e) - m);
      for (int64_t e = 0; e < E; e++) s[e] = exp(ld(x, base + e) - m) / z;
    }
    for (int64_t e = 0; e < E; e++) choice[e] = s[e] + (present(bias) ? ld(bias, e) : 0.0);
    for (int64_t q = 0; q < G; q++) {
      memset(ok, 1, (size_t)per);
      int64_t b0 = best_of(choice + q * per, ok, per);
      gs[q] = choice[q * per + b0];
      if (present(bias) && per > 1) {
        ok[b0] = 0;
        gs[q] += choice[q * per + best_of(choice + q * per, ok, per)];
      }
    }
    memset(gok, 1, (size_t)G);
    memset(ok, 0, (size_t)E);
    for (int64_t r = 0; r < kg; r++) { /* kept groups: their experts become choosable */
      int64_t q = best_of(gs, gok, G);
      gok[q] = 0;
      memset(ok + q * per, 1, (size_t)per);
    }
    double sum = 0.0;
    for (int64_t r = 0; r < k; r++) {
      int64_t e = best_of(choice, ok, E);
      ok[e] = 0;
      res->out[1].i[t * k + r] = e;
      sum += s[e];
    }
    for (int64_t r = 0; r < k; r++) {
      double w = s[res->out[1].i[t * k + r]];
      w = (a->renormalize ? w / sum : w) * rsf;
      res->out[0].f[t * k + r] = w;
      res->out[0].mag[t * k + r] = fabs(w);
      res->out[0].nterms[t * k + r] = (double)(E + k) + 8.0;
    }
  }
  free(s), free(ok);
  return BP_OK;
}

/* ---- concat_and_cache_mla, gather_cache ----------------------------------------------- */

static bp_status_t ref_concat_mla(const bpc_case_t* c, const bpc_host_tensor_t* in, bpc_ref_result_t* res) {
  (void)c;
  const bpc_host_tensor_t *kv = &in[0], *pe = &in[1], *cache = &in[2], *slots = &in[3];
  if (kv->rank != 2 || pe->rank != 2 || cache->rank != 3 || cache->sizes[2] != kv->sizes[1] + pe->sizes[1])
    return bpc_ref_reject(res, "concat_and_cache_mla: kv_c [T, L], k_pe [T, R], kv_cache [NB, BS, L + R]");
  int64_t T = kv->sizes[0], L = kv->sizes[1], R = pe->sizes[1], W = L + R, cap = cache->sizes[0] * cache->sizes[1];
  bp_status_t st = bpc_ref_single_output(res, cache->dtype, 3, cache->sizes, 0, cache->dtype);
  if (st != BP_OK) return st;
  double* e = res->out[0].f;
  for (int64_t i = 0; i < cache->numel; i++) e[i] = ld(cache, i);
  for (int64_t t = 0; t < T; t++) {
    int64_t slot = li(slots, t);
    if (slot >= cap) return bpc_ref_reject(res, "a slot past the cache");
    if (slot < 0) continue;
    for (int64_t i = 0; i < L; i++) e[slot * W + i] = ld(kv, t * L + i);
    for (int64_t i = 0; i < R; i++) e[slot * W + L + i] = ld(pe, t * R + i);
  }
  return BP_OK;
}

static bp_status_t ref_gather_cache(const bpc_case_t* c, const bpc_host_tensor_t* in, bpc_ref_result_t* res) {
  const bpc_host_tensor_t *src = &in[0], *bt = &in[1], *cu = &in[2], *starts = &in[3];
  int64_t N = c->attrs.gather_cache.num_tokens;
  if (src->rank < 3 || bt->rank != 2 || cu->numel != bt->sizes[0] + 1 || N < 0)
    return bpc_ref_reject(res, "gather_cache: src [NB, BS, ...], block_table [B, MB], cu_seq_lens [B + 1]");
  int64_t NB = src->sizes[0], BS = src->sizes[1], B = bt->sizes[0], MB = bt->sizes[1];
  int64_t D = NB > 0 ? src->numel / (NB * BS) : 0, sizes[BP_MAX_RANK];
  sizes[0] = N;
  for (uint32_t d = 2; d < src->rank; d++) sizes[d - 1] = src->sizes[d];
  bp_status_t st = bpc_ref_single_output(res, src->dtype, src->rank - 1, sizes, 0, src->dtype);
  if (st != BP_OK) return st;
  for (int64_t b = 0; b < B; b++) {
    int64_t r0 = li(cu, b), len = li(cu, b + 1) - r0, p0 = present(starts) ? li(starts, b) : 0;
    if (r0 < 0 || len < 0 || r0 + len > N) return bpc_ref_reject(res, "cu_seq_lens outside [0, num_tokens]");
    for (int64_t i = 0; i < len; i++) {
      int64_t p = p0 + i;
      if (p / BS >= MB) return bpc_ref_reject(res, "a position past the block table");
      int64_t blk = li(bt, b * MB + p / BS);
      if (blk < 0 || blk >= NB) return bpc_ref_reject(res, "a block id outside the cache");
      for (int64_t x = 0; x < D; x++) res->out[0].f[(r0 + i) * D + x] = ld(src, ((blk * BS) + p % BS) * D + x);
    }
  }
  return BP_OK; /* rows outside the offsets stay zero (calloc) */
}

/* ---- compute_slot_mapping -------------------------------------------------------------- */

static bp_status_t ref_slot_mapping(const bpc_case_t* c, const bpc_host_tensor_t* in, bpc_ref_result_t* res) {
  const bpc_host_tensor_t *bt = &in[0], *qsl = &in[1], *pos = &in[2];
  int64_t BS = c->attrs.slot_mapping.block_size;
  if (bt->rank != 2 || qsl->numel != bt->sizes[0] + 1 || pos->rank != 1 || BS < 1)
    return bpc_ref_reject(res, "compute_slot_mapping: block_tables [S, MB], query_start_loc [S + 1], positions [T]");
  int64_t S = bt->sizes[0], MB = bt->sizes[1], T = pos->sizes[0];
  bp_status_t st = bpc_ref_single_output(res, BP_DTYPE_I64, 1, pos->sizes, 0, BP_DTYPE_I64);
  if (st != BP_OK) return st;
  for (int64_t t = 0; t < T; t++) res->out[0].i[t] = -1;
  for (int64_t s = 0; s < S; s++) {
    for (int64_t t = li(qsl, s); t < li(qsl, s + 1); t++) {
      int64_t p = li(pos, t);
      if (p < 0 || p / BS >= MB) return bpc_ref_reject(res, "a position past the block table");
      res->out[0].i[t] = li(bt, s * MB + p / BS) * BS + p % BS;
    }
  }
  return BP_OK;
}

/* ---- gather_logprobs ------------------------------------------------------------------- */

/* Whether logit a (id i) ranks before b (id j): NaN first (torch.topk),
 * then larger, the lower id on ties. */
static int lp_before(double a, int64_t i, double b, int64_t j) {
  if (isnan(a) || isnan(b)) return isnan(a) && (!isnan(b) || i < j);
  return a > b || (a == b && i < j);
}

static bp_status_t ref_logprobs(const bpc_case_t* c, const bpc_host_tensor_t* in, bpc_ref_result_t* res) {
  const bpc_host_tensor_t *x = &in[0], *tok = &in[1];
  int64_t k = c->attrs.logprobs.num_logprobs;
  if (x->rank != 2 || x->sizes[1] < 1 || k > x->sizes[1]) return bpc_ref_reject(res, "gather_logprobs: logits [B, V]");
  int64_t B = x->sizes[0], V = x->sizes[1], s2[2] = {B, k + 1};
  uint32_t wd = x->dtype == BP_DTYPE_F64 ? BP_DTYPE_F64 : BP_DTYPE_F32;
  res->num_outputs = 3;
  res->compute_dtype = wd;
  bp_status_t st = bpc_expected_init(&res->out[0], wd, 2, s2, 1);
  if (st == BP_OK) st = bpc_expected_init(&res->out[1], BP_DTYPE_I64, 2, s2, 0);
  if (st == BP_OK) st = bpc_expected_init(&res->out[2], BP_DTYPE_I64, 1, &B, 0);
  if (st != BP_OK) return st;
  uint8_t* taken = malloc((size_t)V);
  if (!taken) return BP_RESOURCE_EXHAUSTED;
  for (int64_t b = 0; b < B; b++) {
    const int64_t base = b * V;
    int64_t t = li(tok, b);
    if (t < 0 || t >= V) {
      free(taken);
      return bpc_ref_reject(res, "a token id outside the vocabulary");
    }
    double m = -INFINITY, z = 0.0, lt = ld(x, base + t);
    int nan = 0;
    for (int64_t i = 0; i < V; i++) nan |= isnan(ld(x, base + i)), m = fmax(m, ld(x, base + i));
    for (int64_t i = 0; i < V; i++) z += exp(ld(x, base + i) - m);
    double lse = nan ? NAN : isinf(m) ? m : m + log(z);
    int64_t rank = 0;
    for (int64_t i = 0; i < V; i++) rank += ld(x, base + i) >= lt;
    res->out[2].i[b] = rank;
    memset(taken, 0, (size_t)V);
    for (int64_t r = 0; r <= k; r++) {
      int64_t id = t;
      if (r > 0) { /* the r-th best not yet listed */
        id = -1;
        for (int64_t i = 0; i < V; i++)
          if (!taken[i] && (id < 0 || lp_before(ld(x, base + i), i, ld(x, base + id), id))) id = i;
        taken[id] = 1;
      }
      res->out[1].i[b * (k + 1) + r] = id;
      res->out[0].f[b * (k + 1) + r] = ld(x, base + id) - lse;
      res->out[0].mag[b * (k + 1) + r] = fabs(ld(x, base + id)) + fabs(lse);
      res->out[0].nterms[b * (k + 1) + r] = (double)V + 4.0;
    }
  }
  free(taken);
  return BP_OK;
}

/* ---- swiglu_oai ------------------------------------------------------------------------ */

static bp_status_t ref_swiglu_oai(const bpc_case_t* c, const bpc_host_tensor_t* in, bpc_ref_result_t* res) {
  const bpc_host_tensor_t* x = &in[0];
  const bp_swiglu_oai_attrs_t* a = &c->attrs.swiglu_oai;
  if (x->rank == 0 || x->sizes[x->rank - 1] % 2) return bpc_ref_reject(res, "swiglu_oai: [..., 2h]");
  int64_t sizes[BP_MAX_RANK];
  memcpy(sizes, x->sizes, sizeof sizes);
  sizes[x->rank - 1] /= 2;
  uint32_t cd = x->dtype == BP_DTYPE_F64 ? BP_DTYPE_F64 : BP_DTYPE_F32;
  bp_status_t st = bpc_ref_single_output(res, x->dtype, x->rank, sizes, 0, cd);
  if (st != BP_OK) return st;
  double alpha = a->alpha != 0.0 ? a->alpha : 1.702, limit = a->limit != 0.0 ? a->limit : 7.0;
  for (int64_t i = 0; i < res->out[0].numel; i++) {
    double g = ld(x, 2 * i), u = ld(x, 2 * i + 1);
    g = g > limit ? limit : g;
    u = u > limit ? limit : u < -limit ? -limit : u;
    res->out[0].f[i] = (u + 1.0) * (g / (1.0 + exp(-alpha * g)));
  }
  return BP_OK;
}

#define SZ BPC_OPF_SIGNED_ZERO
static const bpc_ref_group_t k_groups[] = {
    {ref_moe_align, BPC_ACC_EXACT, 0, BPC_OPS(BP_OP_moe_align_block_size), bpc_gen_moe_align, NULL},
    {ref_grouped_topk, BPC_ACC_REDUCE, 0, BPC_OPS(BP_OP_grouped_topk), bpc_gen_grouped_topk, NULL},
    {ref_concat_mla, BPC_ACC_EXACT, SZ, BPC_OPS(BP_OP_concat_and_cache_mla), bpc_gen_concat_mla, NULL},
    {ref_gather_cache, BPC_ACC_EXACT, SZ, BPC_OPS(BP_OP_gather_cache), bpc_gen_gather_cache, NULL},
    {ref_slot_mapping, BPC_ACC_EXACT, 0, BPC_OPS(BP_OP_compute_slot_mapping), bpc_gen_slot_mapping, NULL},
    {ref_logprobs, BPC_ACC_REDUCE, 0, BPC_OPS(BP_OP_gather_logprobs), bpc_gen_logprobs, NULL},
    {ref_swiglu_oai, BPC_ACC_TRANS_HARD, 0, BPC_OPS(BP_OP_swiglu_oai), bpc_gen_swiglu_oai, NULL},
};
#undef SZ

const bpc_ref_family_t bpc_ref_family_serving_ext = BPC_FAMILY(serving_ext, k_groups);
