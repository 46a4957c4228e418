/* bp-bench suite "serving": paged decode attention against the copy loop.
 *
 * paged_attention reads every cached key and value row once per call (one
 * query token per sequence), so its figure is the bandwidth of the KV bytes
 * read, divided by the copy loop's bandwidth (bytes read + written, all
 * cores) measured interleaved in the same run (bpb_time_vs_copy, medians).
 *   - 32 sequences x 2048 tokens, 32 heads x 128, block 16 (the issue's
 *     shape): 2 GiB of f32 cache, 1 GiB of f16, far above the last-level
 *     cache (300 MiB on the machines measured), against a 512 MiB copy;
 *   - 32 sequences x 256 tokens, 8 kv heads (GQA 4): 64 MiB of f32 cache,
 *     cache-resident, against a copy of the same size.
 * Block tables are a random permutation of the blocks (no two neighbouring
 * tokens' blocks adjacent in memory), context lengths all full.
 */
#include <stdio.h>
#include <stdlib.h>

#include "bench.h"

typedef struct paged_run {
  const bp_tensor_t *q, *kc, *vc, *table, *lens;
  bp_tensor_t* out;
} paged_run_t;

static bp_status_t run_paged(bpb_ctx_t* ctx, void* user) {
  paged_run_t* r = user;
  return bp_op_paged_attention(ctx->stream, r->q, r->kc, r->vc, r->table, r->lens, NULL, NULL,
                               &r->out);
}

/* A [rank, sizes] tensor of `dtype` with random values (f32 drawn, then cast). */
static bp_tensor_t* random_of(bpb_ctx_t* ctx, uint32_t dtype, uint32_t rank, const int64_t* sizes,
                              unsigned seed) {
  bp_tensor_t* f = bpb_tensor_random(ctx, rank, sizes, seed);
  if (dtype == BP_DTYPE_F32) return f;
  bp_tensor_t* t = NULL;
  bp_cast_attrs_t a = {sizeof a, dtype};
  BPB_CHECK(bp_op_to_copy(ctx->stream, f, &a, &t));
  BPB_CHECK(bp_stream_synchronize(ctx->stream));
  bp_tensor_release(f);
  return t;
}

static void paged_case(bpb_ctx_t* ctx, uint32_t dtype, int64_t seqs, int64_t len, int64_t heads,
                       int64_t kv_heads, int64_t copy_floats, const char* where, double target) {
  const int64_t D = 128, BS = 16, mb = len / BS, nb = seqs * mb;
  int64_t qs[3] = {seqs, heads, D}, cs[4] = {nb, BS, kv_heads, D}, ts[2] = {seqs, mb}, ls[1] = {seqs};
  int32_t* table = malloc(sizeof(int32_t) * (size_t)nb);
  int32_t* lens = malloc(sizeof(int32_t) * (size_t)seqs);
  if (!table || !lens) {
    fprintf(stderr, "serving: out of host memory\n");
    exit(1);
  }
  for (int64_t i = 0; i < nb; i++) table[i] = (int32_t)i;
  uint64_t s = 0x9E3779B97F4A7C15ull;
  for (int64_t i = nb - 1; i > 0; i--) { /* Fisher-Yates */
    s ^= s << 13, s ^= s >> 7, s ^= s << 17;
    int64_t j = (int64_t)(s % (uint64_t)(i + 1));
    int32_t t = table[i];
    table[i] = table[j];
    table[j] = t;
  }
  for (int64_t i = 0; i < seqs; i++) lens[i] = (int32_t)len;
  paged_run_t r = {0};
  r.q = random_of(ctx, dtype, 3, qs, 31);
  r.kc = random_of(ctx, dtype, 4, cs, 32);
  r.vc = random_of(ctx, dtype, 4, cs, 33);
  bp_tensor_t* tt = bpb_tensor(ctx, BP_DTYPE_I32, 2, ts);
  bp_tensor_t* lt = bpb_tensor(ctx, BP_DTYPE_I32, 1, ls);
  BPB_CHECK(bp_tensor_write(ctx->stream, tt, table, sizeof(int32_t) * (uint64_t)nb));
  BPB_CHECK(bp_tensor_write(ctx->stream, lt, lens, sizeof(int32_t) * (uint64_t)seqs));
  BPB_CHECK(bp_stream_synchronize(ctx->stream));
  r.table = tt;
  r.lens = lt;
  float* src = bpb_alloc(sizeof(float) * (size_t)copy_floats);
  float* dst = bpb_alloc(sizeof(float) * (size_t)copy_floats);
  bpb_fill_random(src, (size_t)copy_floats, 34);
  double kv = 2.0 * (double)(nb * BS * kv_heads * D) * (double)bp_dtype_size(dtype);
  char name[192];
  snprintf(name, sizeof name,
           "paged_attention %s cache %lld seqs x %lld tokens, %lld/%lld heads x 128, block 16 "
           "(%.0f MiB, %s): KV bytes read",
           bp_dtype_name(dtype), (long long)seqs, (long long)len, (long long)heads,
           (long long)kv_heads, kv / (1 << 20), where);
  double t_op, t_copy;
  if (bpb_time_vs_copy(ctx, run_paged, &r, src, dst, (size_t)copy_floats, name, &t_op, &t_copy)) {
    double copy_bw = 2.0 * sizeof(float) * (double)copy_floats / t_copy;
    printf("%s: %.2f ms, %.1f GB/s; copy loop %.1f GB/s (medians)\n", name, t_op * 1e3,
           kv / t_op / 1e9, copy_bw / 1e9);
    bpb_add_figure(&(bpb_figure_t){name, "GB/s", kv / t_op / 1e9, copy_bw / 1e9,
                                   "copy loop (read + write), same run", target, 0});
  }
  free(src);
  free(dst);
  free(table);
  free(lens);
  if (r.out) bp_tensor_release(r.out);
  bp_tensor_release((bp_tensor_t*)r.q);
  bp_tensor_release((bp_tensor_t*)r.kc);
  bp_tensor_release((bp_tensor_t*)r.vc);
  bp_tensor_release(tt);
  bp_tensor_release(lt);
}

void bpb_suite_serving(bpb_ctx_t* ctx) {
  int64_t big_len = ctx->quick ? 128 : 2048, small_len = ctx->quick ? 64 : 256;
  int64_t big_copy = ctx->quick ? (INT64_C(1) << 22) : (INT64_C(1) << 27); /* 512 MiB */
  paged_case(ctx, BP_DTYPE_F32, 32, big_len, 32, 32, big_copy, "not cache-resident", 0.7);
  paged_case(ctx, BP_DTYPE_F16, 32, big_len, 32, 32, big_copy, "not cache-resident", 0.7);
  /* 64 MiB of KV against a copy of 8M floats (32 MiB read + 32 MiB written) */
  paged_case(ctx, BP_DTYPE_F32, 32, small_len, 32, 8, ctx->quick ? (INT64_C(1) << 20) : (INT64_C(1) << 23),
             "cache-resident", 0.0);
}
