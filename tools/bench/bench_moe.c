/* bp-bench suite "moe": the MoE dispatch and paged prefill ops against the
 * dense ops they replace, measured alternately in the same run (medians of
 * the per-round ratios, 5 rounds of ctx->reps runs each):
 *   - grouped_mm over 8 experts (2048 rows in uneven groups, 1024 -> 1024,
 *     f32) against one mm of all 2048 rows by one 1024 x 1024 weight: the
 *     same flops, so the ratio mm / grouped_mm says what the per-expert
 *     split costs (1.0: nothing);
 *   - paged_attention_prefill of 4 sequences x 512 new tokens (16 heads x
 *     128, f32, blocks of 16 in a shuffled table) against causal
 *     scaled_dot_product_attention on the same dense [4, 16, 512, 128]
 *     tensors: the ratio sdpa / prefill (1.0: the paged layout costs
 *     nothing);
 *   - swiglu_oai (GPT-OSS's clamped SwiGLU over interleaved gate / up) of
 *     [1024, 2 x 2880] f32 against swiglu at the same shapes: the ratio
 *     swiglu / swiglu_oai (1.0: the clamp and the interleave cost nothing);
 *   - grouped_topk (softmax scores, one group: plain top-k routing) of
 *     [4096, 256] f32 logits, top 8, against moe_topk_softmax at the same
 *     shapes: the ratio moe_topk_softmax / grouped_topk (1.0: as fast).
 */
#include <stdio.h>
#include <stdlib.h>

#include "bench.h"

#define MOE_ROUNDS 5

typedef struct moe_pair {
  bpb_run_fn op, base;
  const bp_tensor_t* t[8];
  bp_tensor_t *out_op, *out_base;
} moe_pair_t;

static bp_status_t run_grouped(bpb_ctx_t* ctx, void* user) {
  moe_pair_t* p = user;
  return bp_op_grouped_mm(ctx->stream, p->t[0], p->t[1], p->t[2], NULL, NULL, NULL, NULL, &p->out_op);
}

static bp_status_t run_mm(bpb_ctx_t* ctx, void* user) {
  moe_pair_t* p = user;
  return bp_op_mm(ctx->stream, p->t[0], p->t[3], NULL, &p->out_base);
}

static bp_status_t run_prefill(bpb_ctx_t* ctx, void* user) {
  moe_pair_t* p = user;
  return bp_op_paged_attention_prefill(ctx->stream, p->t[0], p->t[1], p->t[2], p->t[3], p->t[4],
                                       p->t[5], NULL, &p->out_op);
}

static bp_status_t run_sdpa(bpb_ctx_t* ctx, void* user) {
  moe_pair_t* p = user;
  bp_sdpa_attrs_t a = {sizeof a, 1, 0.0, 0, 0};
  return bp_op_scaled_dot_product_attention(ctx->stream, p->t[6], p->t[6], p->t[6], NULL, &a,
                                            &p->out_base);
}

static bp_status_t run_swiglu_oai(bpb_ctx_t* ctx, void* user) {
  moe_pair_t* p = user;
  bp_swiglu_oai_attrs_t a = {sizeof a, 0, 0.0, 0.0};
  return bp_op_swiglu_oai(ctx->stream, p->t[0], &a, &p->out_op);
}

static bp_status_t run_swiglu(bpb_ctx_t* ctx, void* user) {
  moe_pair_t* p = user;
  return bp_op_swiglu(ctx->stream, p->t[0], NULL, &p->out_base);
}

static bp_status_t run_grouped_topk(bpb_ctx_t* ctx, void* user) {
  moe_pair_t* p = user;
  bp_grouped_topk_attrs_t a = {sizeof a, 8, 1, 1, BP_MOE_SCORING_SOFTMAX, 1, 0.0};
  bp_tensor_t* ids = NULL;
  bp_status_t st = bp_op_grouped_topk(ctx->stream, p->t[0], NULL, &a, &p->out_op, &ids);
  bp_tensor_release(ids);
  return st;
}

static bp_status_t run_topk_softmax(bpb_ctx_t* ctx, void* user) {
  moe_pair_t* p = user;
  bp_moe_topk_attrs_t a = {sizeof a, 8, 1, 0};
  bp_tensor_t* ids = NULL;
  bp_status_t st = bp_op_moe_topk_softmax(ctx->stream, p->t[0], &a, &p->out_base, &ids);
  bp_tensor_release(ids);
  return st;
}

/* Alternating rounds; the median of base / op and the medians of both. */
static void moe_figure(bpb_ctx_t* ctx, moe_pair_t* p, const char* name, const char* base_name) {
  double ratio[MOE_ROUNDS], t_op[MOE_ROUNDS], t_base[MOE_ROUNDS];
  for (int r = 0; r < MOE_ROUNDS; r++) {
    t_op[r] = bpb_time(ctx, p->op, p);
    t_base[r] = bpb_time(ctx, p->base, p);
    ratio[r] = t_base[r] / t_op[r];
  }
  double q = bpb_median(ratio, MOE_ROUNDS), op = bpb_median(t_op, MOE_ROUNDS);
  double base = bpb_median(t_base, MOE_ROUNDS);
  printf("%s: %.2f ms; %s %.2f ms; ratio %.2f (median of %d rounds)\n", name, op * 1e3, base_name,
         base * 1e3, q, MOE_ROUNDS);
  bpb_add_figure(&(bpb_figure_t){name, "x", q, 1.0, base_name, 0.0, 0});
}

static void release_pair(moe_pair_t* p) {
  for (int i = 0; i < 8; i++) bp_tensor_release((bp_tensor_t*)p->t[i]);
  bp_tensor_release(p->out_op);
  bp_tensor_release(p->out_base);
}

static bp_tensor_t* index_tensor(bpb_ctx_t* ctx, uint32_t dtype, uint32_t rank, const int64_t* sizes,
                               const void* data, size_t bytes) {
  bp_tensor_t* t = bpb_tensor(ctx, dtype, rank, sizes);
  BPB_CHECK(bp_tensor_write(ctx->stream, t, data, bytes));
  return t;
}

static void grouped_case(bpb_ctx_t* ctx) {
  const int64_t M = ctx->quick ? 256 : 2048, K = ctx->quick ? 128 : 1024, N = K, E = 8;
  int64_t xs[2] = {M, K}, ws[3] = {E, N, K}, ds[2] = {K, N}, os[1] = {E + 1}, off[9];
  for (int64_t e = 0; e <= E; e++) off[e] = M * e * (e + 1) / (E * (E + 1)); /* uneven groups */
  moe_pair_t p = {run_grouped, run_mm, {0}, NULL, NULL};
  p.t[0] = bpb_tensor_random(ctx, 2, xs, 41);
  p.t[1] = bpb_tensor_random(ctx, 3, ws, 42);
  p.t[2] = index_tensor(ctx, BP_DTYPE_I64, 1, os, off, sizeof off);
  p.t[3] = bpb_tensor_random(ctx, 2, ds, 43);
  BPB_CHECK(bp_stream_synchronize(ctx->stream));
  char name[160];
  snprintf(name, sizeof name, "grouped_mm f32 %lld rows over %lld experts, %lld -> %lld: mm / grouped_mm",
           (long long)M, (long long)E, (long long)K, (long long)N);
  moe_figure(ctx, &p, name, "one mm of all rows, same run");
  release_pair(&p);
}

static void prefill_case(bpb_ctx_t* ctx) {
  const int64_t S = 4, L = ctx->quick ? 64 : 512, H = 16, D = 128, BS = 16, MB = L / BS, NB = S * MB;
  int64_t qs[3] = {S * L, H, D}, cs[4] = {NB, BS, H, D}, ts[2] = {S, MB}, ls[1] = {S},
          qls[1] = {S + 1}, dense[4] = {S, H, L, D};
  int32_t* table = malloc(sizeof(int32_t) * (size_t)NB);
  int32_t lens[4], qsl[5];
  if (!table) {
    fprintf(stderr, "moe: out of host memory\n");
    exit(1);
  }
  for (int64_t i = 0; i < NB; i++) table[i] = (int32_t)((i * 7 + 3) % NB); /* 7 is prime to NB */
  for (int i = 0; i < S; i++) lens[i] = (int32_t)L, qsl[i] = (int32_t)(i * L);
  qsl[S] = (int32_t)(S * L);
  moe_pair_t p = {run_prefill, run_sdpa, {0}, NULL, NULL};
  p.t[0] = bpb_tensor_random(ctx, 3, qs, 51);
  p.t[1] = bpb_tensor_random(ctx, 4, cs, 52);
  p.t[2] = bpb_tensor_random(ctx, 4, cs, 53);
  p.t[3] = index_tensor(ctx, BP_DTYPE_I32, 2, ts, table, sizeof(int32_t) * (size_t)NB);
  p.t[4] = index_tensor(ctx, BP_DTYPE_I32, 1, qls, qsl, sizeof qsl);
  p.t[5] = index_tensor(ctx, BP_DTYPE_I32, 1, ls, lens, sizeof lens);
  p.t[6] = bpb_tensor_random(ctx, 4, dense, 54);
  BPB_CHECK(bp_stream_synchronize(ctx->stream));
  char name[160];
  snprintf(name, sizeof name, "paged_attention_prefill f32 %lld seqs x %lld tokens, %lld heads x 128: "
           "sdpa / prefill", (long long)S, (long long)L, (long long)H);
  moe_figure(ctx, &p, name, "causal sdpa on dense tensors, same run");
  free(table);
  release_pair(&p);
}

static void swiglu_oai_case(bpb_ctx_t* ctx) {
  const int64_t T = ctx->quick ? 64 : 1024, H = 2880;
  int64_t xs[2] = {T, 2 * H};
  moe_pair_t p = {run_swiglu_oai, run_swiglu, {0}, NULL, NULL};
  p.t[0] = bpb_tensor_random(ctx, 2, xs, 61);
  BPB_CHECK(bp_stream_synchronize(ctx->stream));
  char name[160];
  snprintf(name, sizeof name, "swiglu_oai f32 [%lld, %lld]: swiglu / swiglu_oai", (long long)T, (long long)(2 * H));
  moe_figure(ctx, &p, name, "swiglu at the same shapes, same run");
  release_pair(&p);
}

static void grouped_topk_case(bpb_ctx_t* ctx) {
  const int64_t T = ctx->quick ? 256 : 4096, E = 256;
  int64_t gs[2] = {T, E};
  moe_pair_t p = {run_grouped_topk, run_topk_softmax, {0}, NULL, NULL};
  p.t[0] = bpb_tensor_random(ctx, 2, gs, 62);
  BPB_CHECK(bp_stream_synchronize(ctx->stream));
  char name[160];
  snprintf(name, sizeof name, "grouped_topk f32 [%lld, %lld] softmax, top 8, one group: moe_topk_softmax / grouped_topk",
           (long long)T, (long long)E);
  moe_figure(ctx, &p, name, "moe_topk_softmax at the same shapes, same run");
  release_pair(&p);
}

void bpb_suite_moe(bpb_ctx_t* ctx) {
  if (!ctx->is_cpu) {
    printf("moe: skipped (the cpu plugin's kernels only)\n");
    return;
  }
  grouped_case(ctx);
  prefill_case(ctx);
  swiglu_oai_case(ctx);
  grouped_topk_case(ctx);
}
