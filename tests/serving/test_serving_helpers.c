/* The serving helpers of ABI 1.3 through the public API on cpu:0, what the
 * conformance suite cannot express: rotary_embedding_pos equals qkv_rotary
 * with an identity projection and runs in place; sample over
 * top_k_top_p_mask's output draws the tokens sample draws with the same
 * filters; the logits processors in place; errors on the stream and in
 * the rules. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ops_fixture.h"

static bp_stream_t* g_stream;

static uint64_t g_rng = 0x9E3779B97F4A7C15ull;
static float frand(float lo, float hi) {
  g_rng ^= g_rng << 13, g_rng ^= g_rng >> 7, g_rng ^= g_rng << 17;
  return lo + (hi - lo) * (float)((g_rng >> 11) * 0x1.0p-53);
}

static bp_tensor_t* cpu_tensor(uint32_t dtype, uint32_t rank, const int64_t* sizes, const void* data) {
  bp_tensor_t* t = ops_tensor(g_cpu, dtype, rank, sizes);
  int64_t n = 1;
  for (uint32_t d = 0; d < rank; d++) n *= sizes[d];
  if (data) assert_ok(bp_tensor_write(g_stream, t, data, (uint64_t)n * bp_dtype_size(dtype)));
  return t;
}

static void read_back(const bp_tensor_t* t, void* out, uint64_t bytes) {
  assert_ok(bp_tensor_read(g_stream, t, out, bytes));
  assert_ok(bp_stream_synchronize(g_stream));
}

/* ---- rotary_embedding_pos ------------------------------------------------------ */

enum { T = 7, H = 4, HKV = 2, D = 10, R = 6, MAXPOS = 12 };

/* qkv_rotary with an identity weight rotates the input's columns: q and k
 * must equal rotary_embedding_pos of those columns bit for bit, out of
 * place and in place, for both styles. */
static void test_rope_pos_is_qkv_rotary(void** state) {
  (void)state;
  enum { N = (H + 2 * HKV) * D };
  float* x = malloc(sizeof(float) * T * N);
  float* eye = calloc((size_t)N * N, sizeof(float));
  float* cache = malloc(sizeof(float) * MAXPOS * R);
  float *got = malloc(sizeof(float) * T * N), *want = malloc(sizeof(float) * T * N);
  assert_non_null(x), assert_non_null(eye), assert_non_null(cache), assert_non_null(got), assert_non_null(want);
  for (int i = 0; i < T * N; i++) x[i] = frand(-2, 2);
  for (int i = 0; i < N; i++) eye[i * N + i] = 1.0f;
  for (int i = 0; i < MAXPOS * R; i++) cache[i] = frand(-1, 1);
  float *q = malloc(sizeof(float) * T * H * D), *k = malloc(sizeof(float) * T * HKV * D);
  for (int t = 0; t < T; t++) {
    memcpy(q + t * H * D, x + t * N, sizeof(float) * H * D);
    memcpy(k + t * HKV * D, x + t * N + H * D, sizeof(float) * HKV * D);
  }
  int64_t xs[2] = {T, N}, ws[2] = {N, N}, ps[1] = {T}, cs[2] = {MAXPOS, R};
  int64_t qs[3] = {T, H, D}, ks[2] = {T, HKV * D};
  int32_t pos[T] = {0, 11, 3, 3, 7, 1, 10};
  bp_tensor_t *tx = cpu_tensor(BP_DTYPE_F32, 2, xs, x), *tw = cpu_tensor(BP_DTYPE_F32, 2, ws, eye);
  bp_tensor_t *tp = cpu_tensor(BP_DTYPE_I32, 1, ps, pos), *tc = cpu_tensor(BP_DTYPE_F32, 2, cs, cache);
  for (uint32_t style = 0; style < 2; style++) {
    bp_qkv_rotary_attrs_t a = {sizeof a, H, HKV, style};
    bp_tensor_t *rq = NULL, *rk = NULL, *rv = NULL, *oq = NULL, *ok = NULL;
    assert_ok(bp_op_qkv_rotary(g_stream, tx, tw, NULL, tp, tc, &a, &rq, &rk, &rv));
    ops_track(rq), ops_track(rk), ops_track(rv);
    /* query as [T, H, D], key as [T, HKV * D] */
    bp_tensor_t *tq = cpu_tensor(BP_DTYPE_F32, 3, qs, q), *tk = cpu_tensor(BP_DTYPE_F32, 2, ks, k);
    assert_ok(bp_op_rotary_embedding_pos(g_stream, tq, tk, tp, tc, &a, &oq, &ok));
    ops_track(oq), ops_track(ok);
    read_back(rq, want, sizeof(float) * T * H * D);
    read_back(oq, got, sizeof(float) * T * H * D);
    assert_memory_equal(got, want, sizeof(float) * T * H * D);
    read_back(rk, want, sizeof(float) * T * HKV * D);
    read_back(ok, got, sizeof(float) * T * HKV * D);
    assert_memory_equal(got, want, sizeof(float) * T * HKV * D);
    /* in place: the outputs are the inputs */
    bp_tensor_t *iq = tq, *ik = tk;
    assert_ok(bp_op_rotary_embedding_pos(g_stream, tq, tk, tp, tc, &a, &iq, &ik));
    read_back(tq, got, sizeof(float) * T * H * D);
    read_back(rq, want, sizeof(float) * T * H * D);
    assert_memory_equal(got, want, sizeof(float) * T * H * D);
    read_back(tk, got, sizeof(float) * T * HKV * D);
    read_back(rk, want, sizeof(float) * T * HKV * D);
    assert_memory_equal(got, want, sizeof(float) * T * HKV * D);
  }
  free(x), free(eye), free(cache), free(got), free(want), free(q), free(k);
}

/* A position past the cache fails the stream before any write; the rule
 * names bad shapes and dtypes. */
static void test_rope_pos_errors(void** state) {
  (void)state;
  int64_t qs[2] = {2, 8}, ks[2] = {2, 4}, ps[1] = {2}, cs[2] = {6, 4};
  float ones[16] = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1}, back[16];
  bp_tensor_t* q = cpu_tensor(BP_DTYPE_F32, 2, qs, ones);
  bp_tensor_t* k = cpu_tensor(BP_DTYPE_F32, 2, ks, ones);
  bp_tensor_t* pos = cpu_tensor(BP_DTYPE_I64, 1, ps, (int64_t[2]){1, 6});
  float table[24];
  for (int i = 0; i < 24; i++) table[i] = 0.5f;
  bp_tensor_t* cache = cpu_tensor(BP_DTYPE_F32, 2, cs, table); /* [6, 4] */
  assert_ok(bp_stream_synchronize(g_stream));
  bp_qkv_rotary_attrs_t a = {sizeof a, 2, 1, 0};
  bp_stream_t* s = NULL;
  assert_ok(bp_stream_create(g_cpu, NULL, &s));
  bp_tensor_t *oq = q, *ok = k;
  assert_ok(bp_op_rotary_embedding_pos(s, q, k, pos, cache, &a, &oq, &ok));
  assert_status(bp_stream_synchronize(s), BP_OUT_OF_RANGE, "positions[1] = 6 is outside");
  bp_stream_release(s);
  read_back(q, back, sizeof back);
  assert_memory_equal(back, ones, sizeof back); /* nothing written */
  oq = ok = NULL;
  a.num_kv_heads = 2; /* key [2, 4] holds 2 heads of 2, query heads of 4 */
  assert_status(bp_op_rotary_embedding_pos(g_stream, q, k, pos, cache, &a, &oq, &ok), BP_INVALID_ARGUMENT,
                "query's head size 4 differs from key's 2");
  a.num_kv_heads = 3;
  assert_status(bp_op_rotary_embedding_pos(g_stream, q, k, pos, cache, &a, &oq, &ok), BP_INVALID_ARGUMENT,
                "input 'key' has shape [2, 4]; expected [2, 3 * head_size]");
  a.num_kv_heads = 1;
  int64_t big[2] = {6, 6};
  assert_status(bp_op_rotary_embedding_pos(g_stream, q, k, pos, ops_tensor(g_cpu, BP_DTYPE_F32, 2, big), &a, &oq,
                                           &ok),
                BP_INVALID_ARGUMENT, "rotary_dim even, >= 2 and <= the head size 4");
  assert_status(bp_op_rotary_embedding_pos(g_stream, q, k, ops_tensor(g_cpu, BP_DTYPE_F32, 1, ps), cache, &a, &oq,
                                           &ok),
                BP_INVALID_ARGUMENT, "expected i32 or i64 [tokens]");
}

/* ---- logits processors ------------------------------------------------------------ */

enum { ROWS = 256, VOCAB = 50 };

/* sample (temperature 1, no filters) over the masked logits draws exactly
 * the tokens of sample with the mask's top-k and top-p on the originals. */
static void test_mask_then_sample_is_filtered_sample(void** state) {
  (void)state;
  float* l = malloc(sizeof(float) * ROWS * VOCAB);
  assert_non_null(l);
  for (int i = 0; i < ROWS * VOCAB; i++) l[i] = frand(-3, 3);
  int64_t ls[2] = {ROWS, VOCAB};
  bp_tensor_t* logits = cpu_tensor(BP_DTYPE_F32, 2, ls, l);
  int64_t want[ROWS], got[ROWS];
  const struct { uint32_t k; double p; } filters[] = {{7, 0.0}, {0, 0.75}, {12, 0.6}};
  for (size_t f = 0; f < sizeof filters / sizeof filters[0]; f++) {
    bp_sample_attrs_t sa = {.struct_size = sizeof sa, .top_k = filters[f].k, .temperature = 1.0,
                            .top_p = filters[f].p, .seed = 42, .offset = 7};
    bp_tensor_t *tok = NULL, *masked = NULL, *tok2 = NULL;
    assert_ok(bp_op_sample(g_stream, logits, &sa, &tok));
    ops_track(tok);
    bp_logits_mask_attrs_t ma = {.struct_size = sizeof ma, .top_k = filters[f].k, .top_p = filters[f].p};
    assert_ok(bp_op_top_k_top_p_mask(g_stream, logits, &ma, &masked));
    ops_track(masked);
    sa.top_k = 0, sa.top_p = 0.0;
    assert_ok(bp_op_sample(g_stream, masked, &sa, &tok2));
    ops_track(tok2);
    read_back(tok, want, sizeof want);
    read_back(tok2, got, sizeof got);
    assert_memory_equal(got, want, sizeof want);
  }
  free(l);
}

/* Both processors write over their input; min_p keeps p >= min_p * p_max;
 * softcap bounds the logits by the cap. */
static void test_processors_in_place(void** state) {
  (void)state;
  float l[2][4] = {{0.0f, -1.0f, 2.0f, 1.5f}, {100.0f, -100.0f, 0.5f, NAN}}, out[2][4];
  int64_t ls[2] = {2, 4};
  bp_tensor_t* t = cpu_tensor(BP_DTYPE_F32, 2, ls, l);
  bp_tensor_t* o = t;
  bp_logits_mask_attrs_t ma = {.struct_size = sizeof ma, .min_p = 0.2};
  assert_ok(bp_op_top_k_top_p_mask(g_stream, t, &ma, &o));
  read_back(t, out, sizeof out);
  /* row 0: exp(l - 2) >= 0.2 keeps 2 and 1.5 (e^-0.5 = 0.61); 0 (e^-2 = 0.135) goes */
  assert_true(out[0][0] == -INFINITY && out[0][1] == -INFINITY && out[0][2] == 2.0f && out[0][3] == 1.5f);
  /* row 1: only the max; NaN is never kept */
  assert_true(out[1][0] == 100.0f && out[1][1] == -INFINITY && out[1][2] == -INFINITY && out[1][3] == -INFINITY);
  bp_tensor_t* s = cpu_tensor(BP_DTYPE_F32, 2, ls, l);
  o = s;
  bp_softcap_attrs_t ca = {.struct_size = sizeof ca, .cap = 30.0};
  assert_ok(bp_op_logits_softcap(g_stream, s, &ca, &o));
  read_back(s, out, sizeof out);
  for (int i = 0; i < 3; i++) {
    float x = l[1][i], want = (float)(tanh((double)x / 30.0) * 30.0);
    assert_true(fabsf(out[1][i] - want) <= 1e-5f * fabsf(want) + 1e-30f);
    assert_true(fabsf(out[1][i]) < 30.0f);
  }
  assert_true(out[0][0] == 0.0f && isnan(out[1][3]));
  ca.cap = 0.0;
  o = NULL;
  assert_status(bp_op_logits_softcap(g_stream, s, &ca, &o), BP_INVALID_ARGUMENT, "attrs.cap = 0 must be finite and > 0");
  ma.min_p = -0.5;
  assert_status(bp_op_top_k_top_p_mask(g_stream, s, &ma, &o), BP_INVALID_ARGUMENT, "attrs.min_p = -0.5");
  ma.min_p = 0.0, ma.top_p = 2.0;
  assert_status(bp_op_top_k_top_p_mask(g_stream, s, &ma, &o), BP_INVALID_ARGUMENT, "attrs.top_p = 2");
  int64_t empty[2] = {2, 0};
  ma.top_p = 0.5;
  assert_status(bp_op_top_k_top_p_mask(g_stream, ops_tensor(g_cpu, BP_DTYPE_F32, 2, empty), &ma, &o),
                BP_INVALID_ARGUMENT, "must hold at least one entry");
}

/* ---- rejection_sample ------------------------------------------------------------ */

enum { RB = 4000, RK = 3, RV = 5 };

static bp_tensor_t* rej_run(const int64_t* drafts, const float* target, const float* draft_probs,
                            const int64_t* bonus, const bp_rejection_attrs_t* a, int64_t b) {
  int64_t ds[2] = {b, RK}, ps[3] = {b, RK, RV}, bs[1] = {b};
  bp_tensor_t* out = NULL;
  assert_ok(bp_op_rejection_sample(g_stream, cpu_tensor(BP_DTYPE_I64, 2, ds, drafts),
                                   cpu_tensor(BP_DTYPE_F32, 3, ps, target), cpu_tensor(BP_DTYPE_I64, 1, bs, bonus),
                                   draft_probs ? cpu_tensor(BP_DTYPE_F32, 3, ps, draft_probs) : NULL, a, &out));
  return ops_track(out);
}

/* Draft probabilities equal to the target's accept every draft (p / q = 1
 * >= u): the drafts, then the bonus token. Greedy keeps the drafts that are
 * the argmax and replaces the first that is not. */
static void test_rejection_accepts_and_greedy(void** state) {
  (void)state;
  enum { B = 8 };
  int64_t drafts[B * RK], bonus[B], out[B * (RK + 1)];
  float p[B * RK * RV];
  for (int i = 0; i < B * RK * RV; i++) p[i] = frand(0.01f, 1.0f);
  for (int i = 0; i < B * RK; i++) drafts[i] = (int64_t)(frand(0, 1) * RV) % RV;
  for (int b = 0; b < B; b++) bonus[b] = 100 + b;
  bp_rejection_attrs_t a = {.struct_size = sizeof a, .seed = 5};
  read_back(rej_run(drafts, p, p, bonus, &a, B), out, sizeof out);
  for (int b = 0; b < B; b++) {
    for (int i = 0; i < RK; i++) assert_int_equal(out[b * (RK + 1) + i], drafts[b * RK + i]);
    assert_int_equal(out[b * (RK + 1) + RK], bonus[b]);
  }
  /* greedy: drafts 0 and 1 are the argmax, draft 2 is not */
  for (int b = 0; b < B; b++)
    for (int i = 0; i < RK; i++) {
      int64_t am = 0;
      for (int j = 1; j < RV; j++)
        if (p[(b * RK + i) * RV + j] > p[(b * RK + i) * RV + am]) am = j;
      drafts[b * RK + i] = i < 2 ? am : (am + 1) % RV;
    }
  a.greedy = 1;
  read_back(rej_run(drafts, p, NULL, bonus, &a, B), out, sizeof out);
  for (int b = 0; b < B; b++) {
    assert_int_equal(out[b * (RK + 1) + 0], drafts[b * RK + 0]);
    assert_int_equal(out[b * (RK + 1) + 1], drafts[b * RK + 1]);
    assert_int_equal(out[b * (RK + 1) + 2], (drafts[b * RK + 2] + RV - 1) % RV);
    assert_int_equal(out[b * (RK + 1) + 3], -1);
  }
}

/* n-gram drafts (no draft probabilities) whose target probability is 0.3
 * are accepted at rate 0.3; a rejected position holds a recovered token
 * other than the draft, then -1. A draft id outside the vocabulary fails
 * the stream. */
static void test_rejection_rate_and_errors(void** state) {
  (void)state;
  int64_t* drafts = malloc(sizeof(int64_t) * RB * RK);
  int64_t* bonus = malloc(sizeof(int64_t) * RB);
  int64_t* out = malloc(sizeof(int64_t) * RB * (RK + 1));
  float* p = malloc(sizeof(float) * RB * RK * RV);
  assert_non_null(drafts), assert_non_null(bonus), assert_non_null(out), assert_non_null(p);
  for (int i = 0; i < RB * RK; i++) {
    drafts[i] = 2;
    for (int j = 0; j < RV; j++) p[i * RV + j] = j == 2 ? 0.3f : 0.175f;
  }
  for (int b = 0; b < RB; b++) bonus[b] = 7;
  bp_rejection_attrs_t a = {.struct_size = sizeof a, .seed = 99, .offset = 4};
  read_back(rej_run(drafts, p, NULL, bonus, &a, RB), out, sizeof(int64_t) * RB * (RK + 1));
  int accepted = 0;
  for (int b = 0; b < RB; b++) {
    const int64_t* o = out + b * (RK + 1);
    accepted += o[0] == 2;
    if (o[0] != 2) {
      assert_true(o[0] >= 0 && o[0] < RV);
      for (int i = 1; i <= RK; i++) assert_int_equal(o[i], -1);
    }
  }
  /* binomial(4000, 0.3): sd 29 */
  assert_true(accepted > 1200 - 120 && accepted < 1200 + 120);
  drafts[5] = RV;
  bp_stream_t* s = NULL;
  assert_ok(bp_stream_create(g_cpu, NULL, &s));
  int64_t ds[2] = {RB, RK}, ps[3] = {RB, RK, RV}, bs[1] = {RB};
  bp_tensor_t *td = cpu_tensor(BP_DTYPE_I64, 2, ds, drafts), *tp = cpu_tensor(BP_DTYPE_F32, 3, ps, p);
  bp_tensor_t *tb = cpu_tensor(BP_DTYPE_I64, 1, bs, bonus), *o2 = NULL;
  assert_ok(bp_stream_synchronize(g_stream));
  assert_ok(bp_op_rejection_sample(s, td, tp, tb, NULL, &a, &o2));
  ops_track(o2);
  assert_status(bp_stream_synchronize(s), BP_OUT_OF_RANGE, "draft_token_ids[1][2] = 5 is outside the vocabulary of 5");
  bp_stream_release(s);
  o2 = NULL;
  int64_t bad[3] = {RB, RK + 1, RV};
  assert_status(bp_op_rejection_sample(g_stream, td, ops_tensor(g_cpu, BP_DTYPE_F32, 3, bad), tb, NULL, &a, &o2),
                BP_INVALID_ARGUMENT, "input 'target_probs' has shape [4000, 4, 5]; expected [4000, 3, vocab >= 1]");
  a.greedy = 2;
  assert_status(bp_op_rejection_sample(g_stream, td, tp, tb, NULL, &a, &o2), BP_INVALID_ARGUMENT,
                "attrs.greedy = 2");
  free(drafts), free(bonus), free(out), free(p);
}

int main(void) {
  if (ops_fixture_setup() != 0 || g_cpu == NULL) return 1;
  if (bp_stream_create(g_cpu, NULL, &g_stream) != BP_OK) return 1;
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_teardown(test_rope_pos_is_qkv_rotary, ops_release_all),
      cmocka_unit_test_teardown(test_rope_pos_errors, ops_release_all),
      cmocka_unit_test_teardown(test_mask_then_sample_is_filtered_sample, ops_release_all),
      cmocka_unit_test_teardown(test_processors_in_place, ops_release_all),
      cmocka_unit_test_teardown(test_rejection_accepts_and_greedy, ops_release_all),
      cmocka_unit_test_teardown(test_rejection_rate_and_errors, ops_release_all),
  };
  int failed = cmocka_run_group_tests_name("serving_helpers", tests, NULL, NULL);
  bp_stream_release(g_stream);
  bp_context_release(g_ctx);
  return failed;
}
