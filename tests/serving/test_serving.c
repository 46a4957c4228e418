/* Serving ops through the public API on cpu:0: what the conformance cases do
 * not reach -- two runs of sample agree bit for bit and a new offset draws
 * anew, greedy is the first maximum, paged_attention equals
 * scaled_dot_product_attention over the gathered cache (GQA, sliding
 * window), kv_cache_append in place and out of place, and the errors the
 * kernels raise on the stream for values the core cannot see. */
#include <math.h>
#include <stdlib.h>

#include "ops_fixture.h"
#include "serving_util.h"

static bp_stream_t* g_stream;

static uint64_t g_rng = 88172645463325252ull;
#define frand(lo, hi) srv_frand(&g_rng, (lo), (hi))
#define cpu_tensor(...) srv_tensor(g_stream, __VA_ARGS__)
#define read_back srv_read

/* ---- sample ------------------------------------------------------------------ */

enum { ROWS = 512, VOCAB = 100 };

static void sample_once(const bp_tensor_t* logits, const bp_sample_attrs_t* a, int64_t* out) {
  bp_tensor_t* tok = NULL;
  assert_ok(bp_op_sample(g_stream, logits, a, &tok));
  ops_track(tok);
  read_back(g_stream, tok, out, sizeof(int64_t) * ROWS);
}

static void test_sample_deterministic(void** state) {
  (void)state;
  float* x = malloc(sizeof(float) * ROWS * VOCAB);
  int64_t *t0 = malloc(sizeof(int64_t) * ROWS * 3), *t1 = t0 + ROWS, *t2 = t1 + ROWS;
  assert_non_null(x);
  assert_non_null(t0);
  for (int i = 0; i < ROWS * VOCAB; i++) x[i] = frand(-2.0f, 2.0f);
  int64_t xs[2] = {ROWS, VOCAB};
  bp_tensor_t* logits = cpu_tensor(BP_DTYPE_F32, 2, xs, x);
  bp_sample_attrs_t a = {sizeof a, 20, 0.8, 0.9, 1234, 0};
  sample_once(logits, &a, t0);
  sample_once(logits, &a, t1);
  a.offset += ROWS / 4; /* the next call's fresh words */
  sample_once(logits, &a, t2);
  int differ = 0;
  for (int r = 0; r < ROWS; r++) {
    assert_true(t0[r] >= 0 && t0[r] < VOCAB);
    assert_int_equal(t0[r], t1[r]);
    differ += t0[r] != t2[r];
  }
  /* with top-20 of 100 spread logits, most rows keep several tokens */
  assert_true(differ > ROWS / 4);
  free(x);
  free(t0);
}

static void test_sample_greedy_first_max(void** state) {
  (void)state;
  /* row 0: max 3 at 1 and 3 -> 1; row 1: NaN skipped -> 2; row 2: all NaN -> -1 */
  float x[3][4] = {{0, 3, 1, 3}, {NAN, -1, 2, 1}, {NAN, NAN, NAN, NAN}};
  int64_t xs[2] = {3, 4}, got[3];
  bp_tensor_t* logits = cpu_tensor(BP_DTYPE_F32, 2, xs, x);
  bp_sample_attrs_t a = {sizeof a, 0, 0.0, 0.0, 1, 0};
  bp_tensor_t* tok = NULL;
  assert_ok(bp_op_sample(g_stream, logits, &a, &tok));
  ops_track(tok);
  read_back(g_stream, tok, got, sizeof got);
  assert_int_equal(got[0], 1);
  assert_int_equal(got[1], 2);
  assert_int_equal(got[2], -1);
  /* top_k 1 at any temperature is greedy too */
  a.temperature = 1.5;
  a.top_k = 1;
  tok = NULL;
  assert_ok(bp_op_sample(g_stream, logits, &a, &tok));
  ops_track(tok);
  read_back(g_stream, tok, got, sizeof got);
  assert_int_equal(got[1], 2);
}

static void test_sample_bad_input(void** state) {
  (void)state;
  int64_t xs[2] = {2, 5};
  bp_tensor_t* logits = ops_tensor(g_cpu, BP_DTYPE_F32, 2, xs);
  bp_tensor_t* tok = NULL;
  bp_sample_attrs_t a = {sizeof a, 0, 1.0, 1.5, 0, 0};
  assert_status(bp_op_sample(g_stream, logits, &a, &tok), BP_INVALID_ARGUMENT, "attrs.top_p = 1.5");
  a.top_p = 0.5, a.temperature = -1.0;
  assert_status(bp_op_sample(g_stream, logits, &a, &tok), BP_INVALID_ARGUMENT,
                "attrs.temperature = -1");
  a.temperature = 1.0;
  assert_status(bp_op_sample(g_stream, ops_tensor(g_cpu, BP_DTYPE_I32, 2, xs), &a, &tok),
                BP_INVALID_ARGUMENT, "a floating dtype");
  int64_t empty[2] = {2, 0};
  assert_status(bp_op_sample(g_stream, ops_tensor(g_cpu, BP_DTYPE_F32, 2, empty), &a, &tok),
                BP_INVALID_ARGUMENT, "at least one entry");
  int64_t ts[2] = {3, 4};
  bp_penalty_attrs_t p = {sizeof p, 0, 1.2, 0, 0};
  assert_status(bp_op_repetition_penalty(g_stream, logits, ops_tensor(g_cpu, BP_DTYPE_I64, 2, ts),
                                         &p, &tok),
                BP_INVALID_ARGUMENT, "leading dims of 'logits'");
}

/* ---- paged KV cache ------------------------------------------------------------ */

enum { NB = 10, BS = 4, HKV = 2, H = 4, D = 12, S = 2, MB = 5 };

typedef struct paged {
  float kc[NB][BS][HKV][D], vc[NB][BS][HKV][D];
  float q[S][H][D];
  int32_t table[S][MB];
  int32_t lens[S];
} paged_t;

static void paged_fill(paged_t* p) {
  for (size_t i = 0; i < sizeof p->kc / sizeof(float); i++) {
    (&p->kc[0][0][0][0])[i] = frand(-1, 1);
    (&p->vc[0][0][0][0])[i] = frand(-1, 1);
  }
  for (size_t i = 0; i < sizeof p->q / sizeof(float); i++) (&p->q[0][0][0])[i] = frand(-1, 1);
  static const int32_t table[S][MB] = {{7, 2, 9, 0, 0}, {4, 1, 3, 8, 5}};
  memcpy(p->table, table, sizeof table);
  p->lens[0] = 11; /* tail of the third block */
  p->lens[1] = 17;
}

/* Enqueues paged_attention of `p` on stream s; returns the output. */
static bp_tensor_t* paged_launch(bp_stream_t* s, const paged_t* p,
                                 const bp_paged_attention_attrs_t* a) {
  int64_t cs[4] = {NB, BS, HKV, D}, qs[3] = {S, H, D}, ts[2] = {S, MB}, ls[1] = {S};
  const bp_tensor_t* in[5] = {
      cpu_tensor(BP_DTYPE_F32, 3, qs, p->q), cpu_tensor(BP_DTYPE_F32, 4, cs, p->kc),
      cpu_tensor(BP_DTYPE_F32, 4, cs, p->vc), cpu_tensor(BP_DTYPE_I32, 2, ts, p->table),
      cpu_tensor(BP_DTYPE_I32, 1, ls, p->lens)};
  if (s != g_stream) assert_ok(bp_stream_synchronize(g_stream)); /* the writes */
  bp_tensor_t* o = NULL;
  assert_ok(bp_op_paged_attention(s, in[0], in[1], in[2], in[3], in[4], NULL, a, &o));
  return ops_track(o);
}

/* paged_attention of `p` on cpu:0 into out [S, H, D]. */
static void paged_run(const paged_t* p, const bp_paged_attention_attrs_t* a, float* out) {
  read_back(g_stream, paged_launch(g_stream, p, a), out, sizeof(float) * S * H * D);
}

/* The same attention by sdpa over each sequence's gathered keys and values
 * (the window's tokens only), GQA through enable_gqa. */
static void sdpa_run(const paged_t* p, uint32_t window, float* out) {
  for (int s = 0; s < S; s++) {
    int L = p->lens[s], first = window && L > (int)window ? L - (int)window : 0, n = L - first;
    float* k = malloc(sizeof(float) * HKV * (size_t)n * D);
    float* v = malloc(sizeof(float) * HKV * (size_t)n * D);
    assert_non_null(k);
    assert_non_null(v);
    for (int g = 0; g < HKV; g++) {
      for (int t = first; t < L; t++) {
        int b = p->table[s][t / BS];
        memcpy(k + ((size_t)g * n + (t - first)) * D, p->kc[b][t % BS][g], sizeof(float) * D);
        memcpy(v + ((size_t)g * n + (t - first)) * D, p->vc[b][t % BS][g], sizeof(float) * D);
      }
    }
    int64_t qs[4] = {1, H, 1, D}, ks[4] = {1, HKV, n, D};
    bp_sdpa_attrs_t a = {sizeof a, 0, 0.0, 1, 0};
    bp_tensor_t* o = NULL;
    assert_ok(bp_op_scaled_dot_product_attention(g_stream, cpu_tensor(BP_DTYPE_F32, 4, qs, p->q[s]),
                                                  cpu_tensor(BP_DTYPE_F32, 4, ks, k),
                                                  cpu_tensor(BP_DTYPE_F32, 4, ks, v), NULL, &a, &o));
    ops_track(o);
    read_back(g_stream, o, out + (size_t)s * H * D, sizeof(float) * H * D);
    free(k);
    free(v);
  }
}

static void check_paged_vs_sdpa(uint32_t window) {
  paged_t* p = malloc(sizeof *p);
  float got[S * H * D], want[S * H * D];
  assert_non_null(p);
  paged_fill(p);
  bp_paged_attention_attrs_t a = {sizeof a, window, 0.0};
  paged_run(p, &a, got);
  sdpa_run(p, window, want);
  for (int i = 0; i < S * H * D; i++) {
    if (fabsf(got[i] - want[i]) > 2e-6f) {
      print_error("element %d: paged %.9g, sdpa %.9g\n", i, got[i], want[i]);
      fail();
    }
  }
  free(p);
}

static void test_paged_attention_equals_sdpa(void** state) {
  (void)state;
  check_paged_vs_sdpa(0);
}

static void test_paged_attention_window_equals_sdpa(void** state) {
  (void)state;
  check_paged_vs_sdpa(6);
}

/* Appends tokens at slots {5, -1, 17} (the -1 is padding) into zeroed
 * caches; `inplace`: the outputs are the caches. */
static void check_append(int inplace) {
  enum { T = 3, ROW = HKV * D };
  static float zeros[NB * BS * ROW];
  float key[T][ROW], val[T][ROW];
  for (int t = 0; t < T; t++) {
    for (int i = 0; i < ROW; i++) key[t][i] = (float)(100 * t + i), val[t][i] = -(float)(100 * t + i);
  }
  int64_t slots[T] = {5, -1, 17};
  int64_t cs[4] = {NB, BS, HKV, D}, rs[3] = {T, HKV, D}, ss[1] = {T};
  bp_tensor_t* kc = cpu_tensor(BP_DTYPE_F32, 4, cs, zeros);
  bp_tensor_t* vc = cpu_tensor(BP_DTYPE_F32, 4, cs, zeros);
  bp_tensor_t *ko = inplace ? kc : NULL, *vo = inplace ? vc : NULL;
  assert_ok(bp_op_kv_cache_append(g_stream, kc, vc, cpu_tensor(BP_DTYPE_F32, 3, rs, key),
                                  cpu_tensor(BP_DTYPE_F32, 3, rs, val),
                                  cpu_tensor(BP_DTYPE_I64, 1, ss, slots), NULL, &ko, &vo));
  if (!inplace) ops_track(ko), ops_track(vo);
  float* got = malloc(sizeof zeros);
  assert_non_null(got);
  for (int c = 0; c < 2; c++) {
    read_back(g_stream, c ? vo : ko, got, sizeof zeros);
    for (int slot = 0; slot < NB * BS; slot++) {
      const float* want = slot == 5 ? (c ? val[0] : key[0]) : slot == 17 ? (c ? val[2] : key[2]) : NULL;
      for (int i = 0; i < ROW; i++) assert_true(got[slot * ROW + i] == (want ? want[i] : 0.0f));
    }
    if (!inplace) { /* the inputs are untouched */
      read_back(g_stream, c ? vc : kc, got, sizeof zeros);
      for (int i = 0; i < NB * BS * ROW; i++) assert_true(got[i] == 0.0f);
    }
  }
  free(got);
}

static void test_kv_cache_append_in_place(void** state) {
  (void)state;
  check_append(1);
}

static void test_kv_cache_append_out_of_place(void** state) {
  (void)state;
  check_append(0);
}

static void test_kv_cache_append_errors(void** state) {
  (void)state;
  int64_t cs[4] = {NB, BS, HKV, D}, rs[3] = {2, HKV, D}, ss[1] = {2};
  static float zeros[NB * BS * HKV * D];
  bp_tensor_t* kc = cpu_tensor(BP_DTYPE_F32, 4, cs, zeros);
  bp_tensor_t* vc = cpu_tensor(BP_DTYPE_F32, 4, cs, zeros);
  bp_tensor_t* key = cpu_tensor(BP_DTYPE_F32, 3, rs, NULL);
  bp_tensor_t* val = cpu_tensor(BP_DTYPE_F32, 3, rs, NULL);
  assert_ok(bp_tensor_write(g_stream, key, (float[2 * HKV * D]){1}, sizeof(float) * 2 * HKV * D));
  assert_ok(bp_tensor_write(g_stream, val, (float[2 * HKV * D]){1}, sizeof(float) * 2 * HKV * D));
  /* a key cache written into the value cache's place */
  bp_tensor_t *ko = vc, *vo = NULL;
  assert_status(bp_op_kv_cache_append(g_stream, kc, vc, key, val,
                                      cpu_tensor(BP_DTYPE_I64, 1, ss, (int64_t[2]){0, 1}), NULL,
                                      &ko, &vo),
                BP_INVALID_ARGUMENT, "aliases");
  /* wrong head count, slot dtype */
  int64_t bad[3] = {2, HKV + 1, D};
  ko = kc, vo = vc;
  assert_status(bp_op_kv_cache_append(g_stream, kc, vc, cpu_tensor(BP_DTYPE_F32, 3, bad, NULL),
                                      cpu_tensor(BP_DTYPE_F32, 3, bad, NULL),
                                      cpu_tensor(BP_DTYPE_I64, 1, ss, NULL), NULL, &ko, &vo),
                BP_INVALID_ARGUMENT, "num_kv_heads of the cache");
  assert_status(bp_op_kv_cache_append(g_stream, kc, vc, key, val,
                                      cpu_tensor(BP_DTYPE_F32, 1, ss, NULL), NULL, &ko, &vo),
                BP_INVALID_ARGUMENT, "i32 or i64");
  /* a slot past the cache fails the stream; nothing is written */
  bp_tensor_t* past = cpu_tensor(BP_DTYPE_I64, 1, ss, (int64_t[2]){3, NB * BS});
  assert_ok(bp_stream_synchronize(g_stream));
  bp_stream_t* s = NULL;
  assert_ok(bp_stream_create(g_cpu, NULL, &s));
  assert_ok(bp_op_kv_cache_append(s, kc, vc, key, val, past, NULL, &ko, &vo));
  assert_status(bp_stream_synchronize(s), BP_OUT_OF_RANGE, "slot_mapping[1] = 40 is past");
  bp_stream_release(s);
  float got[NB * BS * HKV * D];
  read_back(g_stream, kc, got, sizeof got);
  for (size_t i = 0; i < sizeof got / sizeof got[0]; i++) assert_true(got[i] == 0.0f);
}

/* paged_attention with one bad value on its own stream: the message. */
static void paged_error(const paged_t* p, bp_status_t code, const char* needle) {
  bp_stream_t* s = NULL;
  assert_ok(bp_stream_create(g_cpu, NULL, &s));
  (void)paged_launch(s, p, NULL);
  assert_status(bp_stream_synchronize(s), code, needle);
  bp_stream_release(s);
}

static void test_paged_attention_errors(void** state) {
  (void)state;
  paged_t* p = malloc(sizeof *p);
  assert_non_null(p);
  paged_fill(p);
  assert_ok(bp_stream_synchronize(g_stream));
  p->lens[1] = MB * BS + 1;
  paged_error(p, BP_OUT_OF_RANGE, "context_lens[1] = 21 is past the block table's 5 blocks");
  p->lens[1] = -2;
  paged_error(p, BP_INVALID_ARGUMENT, "context_lens[1] = -2 is negative");
  p->lens[1] = 17;
  p->table[0][2] = NB; /* used by length 11 */
  paged_error(p, BP_OUT_OF_RANGE, "block_tables[0, 2] = 10 is outside the cache's 10 blocks");
  p->table[0][2] = 9;
  p->table[0][3] = -7; /* past the length: never read */
  float out[S * H * D];
  paged_run(p, NULL, out);
  /* shapes: heads not a multiple of kv heads, head size */
  int64_t cs[4] = {NB, BS, 3, D}, qs[3] = {S, H, D}, ts[2] = {S, MB}, ls[1] = {S};
  bp_tensor_t* o = NULL;
  assert_status(bp_op_paged_attention(g_stream, ops_tensor(g_cpu, BP_DTYPE_F32, 3, qs),
                                      ops_tensor(g_cpu, BP_DTYPE_F32, 4, cs),
                                      ops_tensor(g_cpu, BP_DTYPE_F32, 4, cs),
                                      ops_tensor(g_cpu, BP_DTYPE_I32, 2, ts),
                                      ops_tensor(g_cpu, BP_DTYPE_I32, 1, ls), NULL, NULL, &o),
                BP_INVALID_ARGUMENT, "not a multiple of num_kv_heads 3");
  int64_t ts_bad[2] = {S + 1, MB};
  cs[2] = HKV;
  assert_status(bp_op_paged_attention(g_stream, ops_tensor(g_cpu, BP_DTYPE_F32, 3, qs),
                                      ops_tensor(g_cpu, BP_DTYPE_F32, 4, cs),
                                      ops_tensor(g_cpu, BP_DTYPE_F32, 4, cs),
                                      ops_tensor(g_cpu, BP_DTYPE_I32, 2, ts_bad),
                                      ops_tensor(g_cpu, BP_DTYPE_I32, 1, ls), NULL, NULL, &o),
                BP_INVALID_ARGUMENT, "seqs of 'query'");
  free(p);
}


/* qkv_rotary: a position past the cache fails the stream before any write;
 * a weight whose rows do not split into heads is refused by the rule. */
static void test_qkv_rotary_errors(void** state) {
  (void)state;
  int64_t xs[2] = {2, 8}, ws[2] = {(4 + 2 * 2) * 4, 8}, ps[1] = {2}, cs[2] = {6, 4};
  bp_tensor_t* x = cpu_tensor(BP_DTYPE_F32, 2, xs, (float[16]){1});
  bp_tensor_t* w = cpu_tensor(BP_DTYPE_F32, 2, ws, NULL);
  bp_tensor_t* pos = cpu_tensor(BP_DTYPE_I64, 1, ps, (int64_t[2]){1, 6});
  bp_tensor_t* cache = cpu_tensor(BP_DTYPE_F32, 2, cs, NULL);
  assert_ok(bp_stream_synchronize(g_stream));
  bp_qkv_rotary_attrs_t a = {sizeof a, 4, 2, 0};
  bp_stream_t* s = NULL;
  assert_ok(bp_stream_create(g_cpu, NULL, &s));
  bp_tensor_t *q = NULL, *k = NULL, *v = NULL;
  assert_ok(bp_op_qkv_rotary(s, x, w, NULL, pos, cache, &a, &q, &k, &v));
  ops_track(q), ops_track(k), ops_track(v);
  assert_status(bp_stream_synchronize(s), BP_OUT_OF_RANGE, "positions[1] = 6 is outside");
  bp_stream_release(s);
  int64_t bad[2] = {33, 8};
  q = k = v = NULL;
  assert_status(bp_op_qkv_rotary(g_stream, x, ops_tensor(g_cpu, BP_DTYPE_F32, 2, bad), NULL, pos,
                                 cache, &a, &q, &k, &v),
                BP_INVALID_ARGUMENT, "must be (num_heads + 2 num_kv_heads) = 8 times");
  a.num_kv_heads = 3;
  assert_status(bp_op_qkv_rotary(g_stream, x, w, NULL, pos, cache, &a, &q, &k, &v),
                BP_INVALID_ARGUMENT, "num_heads a multiple of num_kv_heads");
}

/* moe_topk_softmax: top_k outside 1..E is refused by the rule. */
static void test_moe_topk_bad_k(void** state) {
  (void)state;
  int64_t ls[2] = {3, 4};
  bp_tensor_t* l = ops_tensor(g_cpu, BP_DTYPE_F32, 2, ls);
  bp_tensor_t *w = NULL, *ids = NULL;
  bp_moe_topk_attrs_t a = {sizeof a, 5, 1, 0};
  assert_status(bp_op_moe_topk_softmax(g_stream, l, &a, &w, &ids), BP_INVALID_ARGUMENT,
                "attrs.top_k = 5 must be in 1..4");
  a.top_k = 0;
  assert_status(bp_op_moe_topk_softmax(g_stream, l, &a, &w, &ids), BP_INVALID_ARGUMENT,
                "attrs.top_k = 0");
}

int main(void) {
  if (ops_fixture_setup() != 0 || g_cpu == NULL) return 1;
  if (bp_stream_create(g_cpu, NULL, &g_stream) != BP_OK) return 1;
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_teardown(test_sample_deterministic, ops_release_all),
      cmocka_unit_test_teardown(test_sample_greedy_first_max, ops_release_all),
      cmocka_unit_test_teardown(test_sample_bad_input, ops_release_all),
      cmocka_unit_test_teardown(test_paged_attention_equals_sdpa, ops_release_all),
      cmocka_unit_test_teardown(test_paged_attention_window_equals_sdpa, ops_release_all),
      cmocka_unit_test_teardown(test_kv_cache_append_in_place, ops_release_all),
      cmocka_unit_test_teardown(test_kv_cache_append_out_of_place, ops_release_all),
      cmocka_unit_test_teardown(test_kv_cache_append_errors, ops_release_all),
      cmocka_unit_test_teardown(test_paged_attention_errors, ops_release_all),
      cmocka_unit_test_teardown(test_qkv_rotary_errors, ops_release_all),
      cmocka_unit_test_teardown(test_moe_topk_bad_k, ops_release_all),
  };
  int failed = cmocka_run_group_tests_name("serving", tests, NULL, NULL);
  bp_stream_release(g_stream);
  bp_context_release(g_ctx);
  return failed;
}
