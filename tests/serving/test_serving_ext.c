/* The serving ops of ABI 1.4 through the public API on cpu:0, checked
 * against each other and against older ops (what the conformance cases,
 * one op at a time, cannot show), and their errors:
 *  - moe_align_block_size's layout holds every local (token, slot) pair
 *    once, in blocks of one expert, and its unpadded runs are moe_permute's
 *    expert offsets;
 *  - grouped_topk with one group and softmax scores is moe_topk_softmax;
 *  - per_token_group_quant over whole rows is quantize_dynamic per token,
 *    its column-major scales are the row-major ones transposed, UE8M0
 *    scales are powers of two, and dequantize round-trips within half a
 *    step; rms_norm_group_quant and swiglu_group_quant equal rms_norm /
 *    swiglu then per_token_group_quant within one code step;
 *  - compute_slot_mapping -> concat_and_cache_mla (in place) ->
 *    gather_cache returns each sequence's [kv_c | k_pe] rows;
 *  - gather_logprobs equals log_softmax gathered, with ranks;
 *  - value errors fail the stream before any write, rule errors name the
 *    operand.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ops_fixture.h"
#include "serving_util.h"

static bp_stream_t* g_stream;

static uint64_t g_rng = 0x2545F4914F6CDD1Dull;
#define frand(lo, hi) srv_frand(&g_rng, (lo), (hi))
#define cpu_tensor(...) srv_tensor(g_stream, __VA_ARGS__)
#define read_back(t, out, bytes) srv_read(g_stream, (t), (out), (bytes))

/* ---- moe_align_block_size ----------------------------------------------------------- */

enum { AT = 41, AK = 3, AE = 7, ABS = 4 };

static void test_moe_align_layout(void** state) {
  (void)state;
  int32_t ids[AT * AK];
  for (int j = 0; j < AT * AK; j++) ids[j] = (int32_t)(frand(0, 1) * (AE + 1)) - (j % 9 == 0); /* -1, E: not local */
  int64_t is[2] = {AT, AK};
  bp_tensor_t* tid = cpu_tensor(BP_DTYPE_I32, 2, is, ids);
  bp_moe_align_attrs_t a = {sizeof a, AE, ABS, 0};
  bp_tensor_t *sorted = NULL, *experts = NULL, *total = NULL;
  assert_ok(bp_op_moe_align_block_size(g_stream, tid, &a, &sorted, &experts, &total));
  ops_track(sorted), ops_track(experts), ops_track(total);
  enum { P = (AT * AK + AE * (ABS - 1) + ABS - 1) / ABS * ABS };
  assert_int_equal(bp_tensor_numel(sorted), P);
  int32_t s[P], e[P / ABS], n;
  read_back(sorted, s, sizeof s);
  read_back(experts, e, sizeof e);
  read_back(total, &n, sizeof n);
  assert_true(n % ABS == 0 && n <= P);
  int seen[AT * AK] = {0}, local = 0;
  for (int j = 0; j < AT * AK; j++) local += ids[j] >= 0 && ids[j] < AE;
  for (int i = 0; i < P; i++) {
    if (i >= n) { /* past the padded total: pad values, no expert */
      assert_int_equal(s[i], AT * AK);
      if (i % ABS == 0) assert_int_equal(e[i / ABS], -1);
      continue;
    }
    if (s[i] == AT * AK) continue; /* padding inside an expert's last block */
    assert_true(s[i] >= 0 && s[i] < AT * AK);
    assert_int_equal(ids[s[i]], e[i / ABS]);
    seen[s[i]]++;
  }
  int count = 0;
  for (int j = 0; j < AT * AK; j++) count += seen[j], assert_true(seen[j] == (ids[j] >= 0 && ids[j] < AE));
  assert_int_equal(count, local);
  /* the unpadded runs are moe_permute's expert offsets */
  float h[AT];
  for (int t = 0; t < AT; t++) h[t] = (float)t;
  bp_moe_permute_attrs_t pa = {sizeof pa, AE, 0, 0};
  bp_tensor_t *perm = NULL, *offs = NULL, *inv = NULL;
  assert_ok(bp_op_moe_permute(g_stream, cpu_tensor(BP_DTYPE_F32, 2, (int64_t[2]){AT, 1}, h), tid, &pa, &perm, &offs,
                              &inv));
  ops_track(perm), ops_track(offs), ops_track(inv);
  int64_t off[AE + 1];
  read_back(offs, off, sizeof off);
  for (int x = 0, i = 0; x < AE; x++) {
    int run = 0;
    while (i < n && e[i / ABS] != x) i += ABS;
    for (; i < n && e[i / ABS] == x; i++) run += s[i] != AT * AK;
    assert_int_equal(run, off[x + 1] - off[x]);
  }
  /* rule errors */
  bp_tensor_t* o3[3] = {NULL, NULL, NULL};
  a.block_size = 0;
  assert_status(bp_op_moe_align_block_size(g_stream, tid, &a, &o3[0], &o3[1], &o3[2]), BP_INVALID_ARGUMENT,
                "attrs.block_size = 0");
  a.block_size = ABS;
  assert_status(bp_op_moe_align_block_size(g_stream, cpu_tensor(BP_DTYPE_F32, 2, is, NULL), &a, &o3[0], &o3[1],
                                           &o3[2]),
                BP_INVALID_ARGUMENT, "input 'topk_ids' is f32 [41, 3]; expected i32 or i64 [tokens, top_k]");
}

/* ---- grouped_topk --------------------------------------------------------------------- */

static void test_grouped_topk_one_group_is_topk_softmax(void** state) {
  (void)state;
  enum { T = 33, E = 16, K = 4 };
  float g[T * E], w1[T * K], w2[T * K];
  for (int i = 0; i < T * E; i++) g[i] = frand(-3, 3);
  int64_t gs[2] = {T, E};
  bp_tensor_t* tg = cpu_tensor(BP_DTYPE_F32, 2, gs, g);
  bp_grouped_topk_attrs_t a = {.struct_size = sizeof a, .top_k = K, .renormalize = 1};
  bp_moe_topk_attrs_t b = {sizeof b, K, 1, 0};
  bp_tensor_t *ow = NULL, *oi = NULL, *rw = NULL, *ri = NULL;
  assert_ok(bp_op_grouped_topk(g_stream, tg, NULL, &a, &ow, &oi));
  assert_ok(bp_op_moe_topk_softmax(g_stream, tg, &b, &rw, &ri));
  ops_track(ow), ops_track(oi), ops_track(rw), ops_track(ri);
  int32_t i1[T * K];
  int64_t i2[T * K];
  read_back(ow, w1, sizeof w1);
  read_back(rw, w2, sizeof w2);
  read_back(oi, i1, sizeof i1);
  read_back(ri, i2, sizeof i2);
  for (int i = 0; i < T * K; i++) {
    assert_int_equal(i1[i], i2[i]);
    assert_true(fabsf(w1[i] - w2[i]) <= 1e-6f);
  }
  /* DeepSeek-V3 shape: the kept groups hold every chosen expert */
  enum { E3 = 64, G3 = 8, KG = 3, K3 = 6 };
  float g3[T * E3], bias[E3];
  for (int i = 0; i < T * E3; i++) g3[i] = frand(-4, 4);
  for (int i = 0; i < E3; i++) bias[i] = frand(-0.5f, 0.5f);
  bp_grouped_topk_attrs_t a3 = {sizeof a3, K3, G3, KG, BP_MOE_SCORING_SIGMOID, 1, 2.5};
  bp_tensor_t *w3 = NULL, *id3 = NULL;
  bp_tensor_t* tb = cpu_tensor(BP_DTYPE_F32, 1, (int64_t[1]){E3}, bias);
  assert_ok(bp_op_grouped_topk(g_stream, cpu_tensor(BP_DTYPE_F32, 2, (int64_t[2]){T, E3}, g3), tb, &a3, &w3, &id3));
  ops_track(w3), ops_track(id3);
  float wv[T * K3];
  int32_t iv[T * K3];
  read_back(w3, wv, sizeof wv);
  read_back(id3, iv, sizeof iv);
  for (int t = 0; t < T; t++) {
    float sum = 0;
    int groups = 0;
    for (int r = 0; r < K3; r++) {
      sum += wv[t * K3 + r];
      int fresh = 1;
      for (int q = 0; q < r; q++) fresh &= iv[t * K3 + q] / (E3 / G3) != iv[t * K3 + r] / (E3 / G3);
      groups += fresh;
    }
    assert_true(fabsf(sum - 2.5f) < 1e-5f); /* renormalized, then scaled */
    assert_true(groups <= KG);
  }
  /* rule errors */
  bp_tensor_t *e1 = NULL, *e2 = NULL;
  a3.num_expert_group = 5;
  assert_status(bp_op_grouped_topk(g_stream, tg, NULL, &a3, &e1, &e2), BP_INVALID_ARGUMENT,
                "attrs.num_expert_group = 5 does not divide the 16 experts");
  a3.num_expert_group = G3;
  assert_status(bp_op_grouped_topk(g_stream, tg, tb, &a3, &e1, &e2), BP_INVALID_ARGUMENT,
                "input 'e_score_correction_bias' has shape [64]; dim 0 must be 16");
  a3.top_k = 7;
  assert_status(bp_op_grouped_topk(g_stream, tg, NULL, &a3, &e1, &e2), BP_INVALID_ARGUMENT,
                "attrs.top_k = 7 must be in 1..6");
}

/* ---- group quantization ---------------------------------------------------------------- */

enum { QR = 6, QH = 256, QG = 64 };

static bp_group_quant_attrs_t gq_attrs(uint32_t q, uint32_t g, uint32_t flags) {
  bp_group_quant_attrs_t a = {sizeof a, q, g, flags, 0.0, 0.0};
  return a;
}

static void test_group_quant_forms(void** state) {
  (void)state;
  float x[QR * QH];
  for (int i = 0; i < QR * QH; i++) x[i] = frand(-8, 8) * (float)(1 + i / QH);
  int64_t xs[2] = {QR, QH};
  bp_tensor_t* tx = cpu_tensor(BP_DTYPE_F32, 2, xs, x);
  /* whole rows: quantize_dynamic per token, bytes and scales */
  bp_group_quant_attrs_t a = gq_attrs(BP_DTYPE_F8E4M3FN, QH, 0);
  bp_quantize_attrs_t d = {sizeof d, BP_DTYPE_F8E4M3FN, 0, -1, 0, 0, 0};
  bp_tensor_t *q1 = NULL, *s1 = NULL, *q2 = NULL, *s2 = NULL;
  assert_ok(bp_op_per_token_group_quant(g_stream, tx, &a, &q1, &s1));
  assert_ok(bp_op_quantize_dynamic(g_stream, tx, &d, &q2, &s2));
  ops_track(q1), ops_track(s1), ops_track(q2), ops_track(s2);
  uint8_t c1[QR * QH], c2[QR * QH];
  float f1[QR * QH], f2[QR * QH];
  read_back(q1, c1, sizeof c1);
  read_back(q2, c2, sizeof c2);
  read_back(s1, f1, sizeof(float) * QR);
  read_back(s2, f2, sizeof(float) * QR);
  assert_memory_equal(c1, c2, sizeof c1);
  assert_memory_equal(f1, f2, sizeof(float) * QR);
  /* groups: column-major scales are the row-major ones transposed */
  for (uint32_t q = 0; q < 3; q++) {
    uint32_t qd = q == 0 ? BP_DTYPE_F8E4M3FN : q == 1 ? BP_DTYPE_I8 : BP_DTYPE_F8E5M2;
    bp_group_quant_attrs_t r = gq_attrs(qd, QG, 0), c = gq_attrs(qd, QG, BP_GROUP_QUANT_COLUMN_MAJOR);
    bp_tensor_t *qr = NULL, *sr = NULL, *qc = NULL, *sc = NULL;
    assert_ok(bp_op_per_token_group_quant(g_stream, tx, &r, &qr, &sr));
    assert_ok(bp_op_per_token_group_quant(g_stream, tx, &c, &qc, &sc));
    ops_track(qr), ops_track(sr), ops_track(qc), ops_track(sc);
    int64_t d0 = 0, d1 = 0;
    assert_ok(bp_tensor_size(sc, 0, &d0));
    assert_ok(bp_tensor_size(sc, 1, &d1));
    assert_int_equal(d0, QH / QG);
    assert_int_equal(d1, QR);
    read_back(qr, c1, sizeof c1);
    read_back(qc, c2, sizeof c2);
    assert_memory_equal(c1, c2, sizeof c1);
    read_back(sr, f1, sizeof(float) * QR * (QH / QG));
    read_back(sc, f2, sizeof(float) * QR * (QH / QG));
    for (int row = 0; row < QR; row++)
      for (int g = 0; g < QH / QG; g++) assert_true(f1[row * (QH / QG) + g] == f2[g * QR + row]);
    /* dequantize round-trips within half a step (the scale's) */
    bp_quantize_attrs_t dq = {sizeof dq, qd, BP_DTYPE_F32, -1, QG, 0, 0};
    bp_tensor_t* y = NULL;
    assert_ok(bp_op_dequantize(g_stream, qr, sr, NULL, &dq, &y));
    ops_track(y);
    read_back(y, f2, sizeof f2);
    for (int i = 0; i < QR * QH; i++) {
      float s = f1[(i / QH) * (QH / QG) + (i % QH) / QG];
      double step = qd == BP_DTYPE_I8 ? s : s * ldexp(1.0, (int)floor(log2(fabs(x[i] / s) + 1e-30)) - (q == 2 ? 2 : 3));
      assert_true(fabs(f2[i] - x[i]) <= 0.5 * fmax(step, s * (q == 0 ? 0x1p-9 : q == 2 ? 0x1p-16 : 1.0)) * (1 + 1e-5));
    }
  }
  /* UE8M0: powers of two at or above amax / 448 */
  bp_group_quant_attrs_t u = gq_attrs(BP_DTYPE_F8E4M3FN, QG, BP_GROUP_QUANT_SCALE_UE8M0);
  bp_tensor_t *qu = NULL, *su = NULL;
  assert_ok(bp_op_per_token_group_quant(g_stream, tx, &u, &qu, &su));
  ops_track(qu), ops_track(su);
  read_back(su, f1, sizeof(float) * QR * (QH / QG));
  for (int i = 0; i < QR * (QH / QG); i++) {
    float amax = 0;
    for (int k = 0; k < QG; k++) amax = fmaxf(amax, fabsf(x[(i / (QH / QG)) * QH + (i % (QH / QG)) * QG + k]));
    int e;
    assert_true(frexpf(f1[i], &e) == 0.5f);
    assert_true(f1[i] >= amax / 448.0f && f1[i] < 2.0f * amax / 448.0f);
  }
  /* rule errors */
  bp_tensor_t *o1 = NULL, *o2 = NULL;
  a = gq_attrs(BP_DTYPE_F8E4M3FN, 96, 0);
  assert_status(bp_op_per_token_group_quant(g_stream, tx, &a, &o1, &o2), BP_INVALID_ARGUMENT,
                "the quantized row of 256 elements must be a multiple of attrs.group_size = 96");
  a = gq_attrs(BP_DTYPE_U8, QG, 0);
  assert_status(bp_op_per_token_group_quant(g_stream, tx, &a, &o1, &o2), BP_INVALID_ARGUMENT,
                "attrs.qdtype u8 is not a code dtype of this op");
  a = gq_attrs(BP_DTYPE_I8, QG, 4);
  assert_status(bp_op_per_token_group_quant(g_stream, tx, &a, &o1, &o2), BP_INVALID_ARGUMENT,
                "attrs.flags = 0x4 has unknown bits 0x4");
  a = gq_attrs(BP_DTYPE_I8, QG, 0);
  a.norm_eps = 1e-6;
  assert_status(bp_op_per_token_group_quant(g_stream, tx, &a, &o1, &o2), BP_INVALID_ARGUMENT,
                "attrs.norm_eps = 1e-06 is unused by per_token_group_quant");
}

/* The fused forms equal their two steps within one code step (the fused
 * op keeps the layer's result in f32, the unfused path rounds nothing
 * either here: f32 in, f32 between). */
static void test_group_quant_fused_equal_two_steps(void** state) {
  (void)state;
  float x[QR * 2 * QH], w[QH];
  for (int i = 0; i < QR * 2 * QH; i++) x[i] = frand(-3, 3);
  for (int i = 0; i < QH; i++) w[i] = frand(0.5f, 1.5f);
  bp_group_quant_attrs_t a = gq_attrs(BP_DTYPE_I8, QG, 0);
  for (int op = 0; op < 2; op++) {
    bp_tensor_t *tx = cpu_tensor(BP_DTYPE_F32, 2, (int64_t[2]){QR, op ? 2 * QH : QH}, x), *y = NULL;
    bp_tensor_t *qf = NULL, *sf = NULL, *qu = NULL, *su = NULL;
    if (op == 0) {
      bp_rms_norm_attrs_t r = {.struct_size = sizeof r, .normalized_rank = 1};
      bp_tensor_t* tw = cpu_tensor(BP_DTYPE_F32, 1, (int64_t[1]){QH}, w);
      assert_ok(bp_op_rms_norm_group_quant(g_stream, tx, tw, &a, &qf, &sf));
      assert_ok(bp_op_rms_norm(g_stream, tx, tw, &r, &y));
    } else {
      assert_ok(bp_op_swiglu_group_quant(g_stream, tx, &a, &qf, &sf));
      assert_ok(bp_op_swiglu(g_stream, tx, NULL, &y));
    }
    ops_track(y), ops_track(qf), ops_track(sf);
    assert_ok(bp_op_per_token_group_quant(g_stream, y, &a, &qu, &su));
    ops_track(qu), ops_track(su);
    int8_t cf[QR * QH], cu[QR * QH];
    float fs[QR * QH / QG], us[QR * QH / QG];
    read_back(qf, cf, sizeof cf);
    read_back(qu, cu, sizeof cu);
    read_back(sf, fs, sizeof fs);
    read_back(su, us, sizeof us);
    for (int i = 0; i < QR * QH / QG; i++) assert_true(fabsf(fs[i] - us[i]) <= 1e-5f * us[i]);
    for (int i = 0; i < QR * QH; i++) assert_true(abs(cf[i] - cu[i]) <= 1);
  }
  bp_tensor_t *o1 = NULL, *o2 = NULL;
  assert_status(bp_op_swiglu_group_quant(g_stream, cpu_tensor(BP_DTYPE_F32, 2, (int64_t[2]){2, 2 * QG + 1}, NULL), &a,
                                         &o1, &o2),
                BP_INVALID_ARGUMENT, "its last dim (129) must be even");
}

/* ---- MLA cache: slot mapping, concat, gather ----------------------------------------- */

enum { MS = 3, MBS = 4, MMB = 4, MNB = 16, ML = 10, MR = 3 };

static void test_mla_cache_round_trip(void** state) {
  (void)state;
  /* sequences of 5, 0 and 7 tokens at positions 2.., 0.., 6..; block tables of distinct blocks */
  int32_t qsl[MS + 1] = {0, 5, 5, 12}, bt[MS * MMB], pos[14];
  int32_t starts[MS] = {2, 0, 6}, cu[MS + 1] = {0, 5, 5, 12};
  for (int i = 0; i < MS * MMB; i++) bt[i] = (i * 5 + 3) % MNB;
  for (int s = 0; s < MS; s++)
    for (int t = qsl[s]; t < qsl[s + 1]; t++) pos[t] = starts[s] + (t - qsl[s]);
  pos[12] = pos[13] = 0; /* padding tokens past query_start_loc[S] */
  bp_slot_mapping_attrs_t sa = {sizeof sa, MBS, 0, 0};
  bp_tensor_t* tbt = cpu_tensor(BP_DTYPE_I32, 2, (int64_t[2]){MS, MMB}, bt);
  bp_tensor_t *slots = NULL, *out = NULL, *dst = NULL;
  assert_ok(bp_op_compute_slot_mapping(g_stream, tbt, cpu_tensor(BP_DTYPE_I32, 1, (int64_t[1]){MS + 1}, qsl),
                                       cpu_tensor(BP_DTYPE_I32, 1, (int64_t[1]){14}, pos), &sa, &slots));
  ops_track(slots);
  int64_t sl[14];
  read_back(slots, sl, sizeof sl);
  assert_int_equal(sl[12], -1), assert_int_equal(sl[13], -1);
  /* the cache, written in place */
  float kv[14 * ML], pe[14 * MR], cache[MNB * MBS * (ML + MR)];
  for (int i = 0; i < 14 * ML; i++) kv[i] = frand(-1, 1);
  (void)sl;
  for (int i = 0; i < 14 * MR; i++) pe[i] = frand(-1, 1);
  for (int i = 0; i < MNB * MBS * (ML + MR); i++) cache[i] = 99.0f;
  bp_tensor_t* tc = cpu_tensor(BP_DTYPE_F32, 3, (int64_t[3]){MNB, MBS, ML + MR}, cache);
  out = tc;
  assert_ok(bp_op_concat_and_cache_mla(g_stream, cpu_tensor(BP_DTYPE_F32, 2, (int64_t[2]){14, ML}, kv),
                                       cpu_tensor(BP_DTYPE_F32, 2, (int64_t[2]){14, MR}, pe), tc, slots, NULL, &out));
  assert_ptr_equal(out, tc);
  /* gathered back from each sequence's start */
  bp_gather_cache_attrs_t ga = {sizeof ga, 0, 14};
  assert_ok(bp_op_gather_cache(g_stream, tc, tbt, cpu_tensor(BP_DTYPE_I32, 1, (int64_t[1]){MS + 1}, cu),
                               cpu_tensor(BP_DTYPE_I32, 1, (int64_t[1]){MS}, starts), &ga, &dst));
  ops_track(dst);
  float got[14 * (ML + MR)];
  read_back(dst, got, sizeof got);
  for (int t = 0; t < 14; t++)
    for (int i = 0; i < ML + MR; i++) {
      float want = t >= 12 ? 0.0f : i < ML ? kv[t * ML + i] : pe[t * MR + i - ML];
      assert_true(got[t * (ML + MR) + i] == want);
    }
  /* value errors fail the stream and write nothing */
  float before[MNB * MBS * (ML + MR)], after[MNB * MBS * (ML + MR)];
  read_back(tc, before, sizeof before);
  bp_tensor_t* o = tc;
  assert_stream_error(bp_op_concat_and_cache_mla(s, cpu_tensor(BP_DTYPE_F32, 2, (int64_t[2]){1, ML}, kv),
                                                 cpu_tensor(BP_DTYPE_F32, 2, (int64_t[2]){1, MR}, pe), tc,
                                                 cpu_tensor(BP_DTYPE_I64, 1, (int64_t[1]){1}, (int64_t[1]){64}), NULL,
                                                 &o),
                      BP_OUT_OF_RANGE, "slot_mapping[0] = 64 is past the cache's 64 slots");
  read_back(tc, after, sizeof after);
  assert_memory_equal(before, after, sizeof before);
  bp_tensor_t* d2 = NULL;
  assert_stream_error(bp_op_gather_cache(s, tc, tbt, cpu_tensor(BP_DTYPE_I32, 1, (int64_t[1]){MS + 1},
                                                                (int32_t[MS + 1]){0, 6, 5, 12}),
                                         NULL, &ga, &d2),
                      BP_INVALID_ARGUMENT, "cu_seq_lens[2] = 5; the offsets must be nondecreasing");
  ops_track(d2), d2 = NULL;
  assert_stream_error(bp_op_gather_cache(s, tc, tbt, cpu_tensor(BP_DTYPE_I32, 1, (int64_t[1]){MS + 1},
                                                                (int32_t[MS + 1]){0, 14, 14, 14}),
                                         cpu_tensor(BP_DTYPE_I32, 1, (int64_t[1]){MS}, (int32_t[MS]){6, 0, 0}), &ga,
                                         &d2),
                      BP_OUT_OF_RANGE, "sequence 0 reads positions 6..19; the block table holds 4 blocks of 4");
  ops_track(d2), d2 = NULL;
  pos[3] = MMB * MBS;
  bp_tensor_t* s2 = NULL;
  assert_stream_error(bp_op_compute_slot_mapping(s, tbt, cpu_tensor(BP_DTYPE_I32, 1, (int64_t[1]){MS + 1}, qsl),
                                                 cpu_tensor(BP_DTYPE_I32, 1, (int64_t[1]){14}, pos), &sa, &s2),
                      BP_OUT_OF_RANGE, "token 3 of sequence 0 at position 16: past the sequence's block table");
  ops_track(s2);
  /* rule errors */
  o = NULL;
  assert_status(bp_op_concat_and_cache_mla(g_stream, cpu_tensor(BP_DTYPE_F32, 2, (int64_t[2]){1, ML}, NULL),
                                           cpu_tensor(BP_DTYPE_F32, 2, (int64_t[2]){1, MR + 1}, NULL), tc,
                                           cpu_tensor(BP_DTYPE_I64, 1, (int64_t[1]){1}, NULL), NULL, &o),
                BP_INVALID_ARGUMENT, "input 'kv_cache' has shape [16, 4, 13]; expected [num_blocks, block_size >= 1, 14]");
  ga.num_tokens = -1;
  assert_status(bp_op_gather_cache(g_stream, tc, tbt, cpu_tensor(BP_DTYPE_I32, 1, (int64_t[1]){MS + 1}, cu), NULL,
                                   &ga, &d2),
                BP_INVALID_ARGUMENT, "attrs.num_tokens = -1 must be >= 0");
}

/* ---- gather_logprobs, swiglu_oai -------------------------------------------------------- */

static void test_logprobs_and_swiglu_oai(void** state) {
  (void)state;
  enum { B = 5, V = 50, K = 4 };
  float l[B * V], lsm[B * V], lp[B * (K + 1)];
  int64_t tok[B] = {0, 49, 7, 7, 20}, ids[B * (K + 1)], ranks[B];
  for (int i = 0; i < B * V; i++) l[i] = (float)(int)frand(-5, 5); /* integer logits: ties */
  bp_tensor_t* tl = cpu_tensor(BP_DTYPE_F32, 2, (int64_t[2]){B, V}, l);
  bp_tensor_t* tt = cpu_tensor(BP_DTYPE_I64, 1, (int64_t[1]){B}, tok);
  bp_logprobs_attrs_t a = {sizeof a, K, 0, 0};
  bp_softmax_attrs_t sm = {sizeof sm, -1, 0, 0};
  bp_tensor_t *o0 = NULL, *o1 = NULL, *o2 = NULL, *ref = NULL;
  assert_ok(bp_op_gather_logprobs(g_stream, tl, tt, &a, &o0, &o1, &o2));
  assert_ok(bp_op_log_softmax(g_stream, tl, &sm, &ref));
  ops_track(o0), ops_track(o1), ops_track(o2), ops_track(ref);
  read_back(o0, lp, sizeof lp);
  read_back(o1, ids, sizeof ids);
  read_back(o2, ranks, sizeof ranks);
  read_back(ref, lsm, sizeof lsm);
  for (int b = 0; b < B; b++) {
    assert_int_equal(ids[b * (K + 1)], tok[b]);
    int rank = 0;
    for (int v = 0; v < V; v++) rank += l[b * V + v] >= l[b * V + tok[b]];
    assert_int_equal(ranks[b], rank);
    for (int r = 0; r <= K; r++) {
      int64_t id = ids[b * (K + 1) + r];
      assert_true(fabsf(lp[b * (K + 1) + r] - lsm[b * V + id]) <= 2e-6f);
      if (r > 1) { /* descending, ties by the lower id */
        int64_t prev = ids[b * (K + 1) + r - 1];
        assert_true(l[b * V + prev] > l[b * V + id] || (l[b * V + prev] == l[b * V + id] && prev < id));
      }
    }
  }
  tok[2] = V;
  bp_tensor_t* tbad = cpu_tensor(BP_DTYPE_I64, 1, (int64_t[1]){B}, tok);
  o0 = o1 = o2 = NULL;
  assert_stream_error(bp_op_gather_logprobs(s, tl, tbad, &a, &o0, &o1, &o2), BP_OUT_OF_RANGE,
                      "token_ids[2] = 50 is outside the vocabulary of 50");
  ops_track(o0), ops_track(o1), ops_track(o2), o0 = o1 = o2 = NULL;
  a.num_logprobs = V + 1;
  assert_status(bp_op_gather_logprobs(g_stream, tl, tt, &a, &o0, &o1, &o2), BP_INVALID_ARGUMENT,
                "attrs.num_logprobs = 51 must be in 0..50");
  /* swiglu_oai: clamps, then (up + 1) * gate * sigmoid(alpha * gate) */
  float x[8] = {10.0f, 10.0f, -1.0f, -10.0f, 0.5f, 2.0f, -30.0f, 0.0f}, y[4];
  bp_swiglu_oai_attrs_t sa = {sizeof sa, 0, 0.0, 0.0};
  bp_tensor_t* tx = cpu_tensor(BP_DTYPE_F32, 2, (int64_t[2]){1, 8}, x);
  bp_tensor_t* ty = NULL;
  assert_ok(bp_op_swiglu_oai(g_stream, tx, &sa, &ty));
  ops_track(ty);
  read_back(ty, y, sizeof y);
  for (int i = 0; i < 4; i++) {
    double g = fmin(x[2 * i], 7.0), u = fmax(fmin(x[2 * i + 1], 7.0), -7.0);
    double want = (u + 1) * g / (1 + exp(-1.702 * g));
    assert_true(fabs(y[i] - want) <= 1e-6 * fabs(want) + 1e-30);
  }
  ty = NULL;
  sa.limit = -1;
  assert_status(bp_op_swiglu_oai(g_stream, tx, &sa, &ty), BP_INVALID_ARGUMENT, "attrs.limit = -1 must be >= 0");
  sa.limit = 0;
  assert_status(bp_op_swiglu_oai(g_stream, cpu_tensor(BP_DTYPE_F32, 2, (int64_t[2]){1, 7}, NULL), &sa, &ty),
                BP_INVALID_ARGUMENT, "its last dim (7) must be even");
}

int main(void) {
  if (ops_fixture_setup() != 0 || g_cpu == NULL) return 1;
  if (bp_stream_create(g_cpu, NULL, &g_stream) != BP_OK) return 1;
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_teardown(test_moe_align_layout, ops_release_all),
      cmocka_unit_test_teardown(test_grouped_topk_one_group_is_topk_softmax, ops_release_all),
      cmocka_unit_test_teardown(test_group_quant_forms, ops_release_all),
      cmocka_unit_test_teardown(test_group_quant_fused_equal_two_steps, ops_release_all),
      cmocka_unit_test_teardown(test_mla_cache_round_trip, ops_release_all),
      cmocka_unit_test_teardown(test_logprobs_and_swiglu_oai, ops_release_all),
  };
  int failed = cmocka_run_group_tests_name("serving_ext", tests, NULL, NULL);
  bp_stream_release(g_stream);
  bp_context_release(g_ctx);
  return failed;
}
