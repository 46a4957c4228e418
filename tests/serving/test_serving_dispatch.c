/* MoE dispatch and the paged-cache serving ops through the public API on
 * cpu:0, checked against each other and against dense arithmetic (what the
 * conformance cases, one op at a time, cannot show):
 *  - moe_permute -> grouped_mm -> moe_unpermute equals the dense MoE layer
 *    sum_r w[t, r] * (x[t] @ W[e]^T + b[e]), with experts not local to this
 *    rank skipped; weight-only (uint4 with zero points) grouped_mm equals
 *    weight_only_mm on each expert, bit for bit;
 *  - paged_attention_prefill equals paged_attention (decode) row by row, each
 *    query row being a decode step at its own position (with and without a
 *    sliding window), and padding rows are zero;
 *  - merge_attn_states of two halves of a softmax equals the whole, an empty
 *    part (lse -inf) leaves the other unchanged;
 *  - kv_cache_copy_blocks in place, and the value errors every kernel raises
 *    on the stream (offsets, inverse rows, lengths, block ids). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ops_fixture.h"
#include "serving_util.h"

static bp_stream_t* g_stream;

static uint64_t g_rng = 0x9E3779B97F4A7C15ull;
#define frand(lo, hi) srv_frand(&g_rng, (lo), (hi))
#define cpu_tensor(...) srv_tensor(g_stream, __VA_ARGS__)
#define read_back(t, out, bytes) srv_read(g_stream, (t), (out), (bytes))

/* ---- MoE ------------------------------------------------------------------------ */

enum { MT = 37, MK = 2, MH = 24, ME = 6, MN = 20 };

static void test_moe_pipeline_equals_dense(void** state) {
  (void)state;
  static float x[MT][MH], w[ME][MN][MH], b[ME][MN], rw[MT][MK];
  static int64_t ids[MT][MK];
  for (int t = 0; t < MT; t++) {
    for (int i = 0; i < MH; i++) x[t][i] = frand(-1, 1);
    for (int r = 0; r < MK; r++) {
      rw[t][r] = frand(0, 1);
      ids[t][r] = (int64_t)(frand(0, 1) * (ME + 1)) - (t % 5 == 0); /* -1 and E: not local */
    }
  }
  for (int e = 0; e < ME; e++)
    for (int n = 0; n < MN; n++) {
      b[e][n] = frand(-1, 1);
      for (int i = 0; i < MH; i++) w[e][n][i] = frand(-1, 1);
    }
  int64_t xs[2] = {MT, MH}, is[2] = {MT, MK}, ws[3] = {ME, MN, MH}, bs[2] = {ME, MN};
  bp_tensor_t *perm = NULL, *offs = NULL, *inv = NULL, *y = NULL, *out = NULL;
  bp_moe_permute_attrs_t pa = {sizeof pa, ME, 0, 0};
  assert_ok(bp_op_moe_permute(g_stream, cpu_tensor(BP_DTYPE_F32, 2, xs, x),
                              cpu_tensor(BP_DTYPE_I64, 2, is, ids), &pa, &perm, &offs, &inv));
  ops_track(perm), ops_track(offs), ops_track(inv);
  assert_ok(bp_op_grouped_mm(g_stream, perm, cpu_tensor(BP_DTYPE_F32, 3, ws, w), offs,
                             cpu_tensor(BP_DTYPE_F32, 2, bs, b), NULL, NULL, NULL, &y));
  ops_track(y);
  assert_ok(bp_op_moe_unpermute(g_stream, y, inv, cpu_tensor(BP_DTYPE_F32, 2, is, rw), NULL, &out));
  ops_track(out);
  static float got_perm[MT * MK][MH], got[MT][MN];
  int64_t got_off[ME + 1], got_inv[MT][MK];
  read_back(perm, got_perm, sizeof got_perm);
  read_back(offs, got_off, sizeof got_off);
  read_back(inv, got_inv, sizeof got_inv);
  read_back(out, got, sizeof got);
  /* offsets count each expert's slots; inverse rows hold their token */
  int64_t count[ME] = {0}, local = 0;
  for (int t = 0; t < MT; t++)
    for (int r = 0; r < MK; r++)
      if (ids[t][r] >= 0 && ids[t][r] < ME) count[ids[t][r]]++, local++;
  assert_int_equal(got_off[0], 0);
  for (int e = 0; e < ME; e++) assert_int_equal(got_off[e + 1] - got_off[e], count[e]);
  assert_true(local < MT * MK); /* the case holds slots that are not local */
  for (int t = 0; t < MT; t++) {
    for (int r = 0; r < MK; r++) {
      int64_t e = ids[t][r], row = got_inv[t][r];
      if (e < 0 || e >= ME) {
        assert_int_equal(row, -1);
        continue;
      }
      assert_true(row >= got_off[e] && row < got_off[e + 1]);
      assert_memory_equal(got_perm[row], x[t], sizeof x[t]);
    }
  }
  for (int64_t row = local; row < MT * MK; row++)
    for (int i = 0; i < MH; i++) assert_true(got_perm[row][i] == 0.0f);
  for (int t = 0; t < MT; t++) {
    for (int n = 0; n < MN; n++) {
      double want = 0.0;
      for (int r = 0; r < MK; r++) {
        int64_t e = ids[t][r];
        if (e < 0 || e >= ME) continue;
        double dot = b[e][n];
        for (int i = 0; i < MH; i++) dot += (double)x[t][i] * w[e][n][i];
        want += rw[t][r] * dot;
      }
      if (fabs(got[t][n] - want) > 1e-5 * (1.0 + fabs(want))) {
        print_error("token %d, feature %d: %.9g, dense %.9g\n", t, n, got[t][n], want);
        fail();
      }
    }
  }
}

/* Weight-only grouped_mm (int4, groups of 32, u8 zero points) equals
 * weight_only_mm run on each expert's rows and codes, bit for bit. */
static void test_grouped_int4_equals_weight_only_mm(void** state) {
  (void)state;
  enum { QM = 23, QK = 96, QN = 10, QE = 3, QG = QK / 32 };
  static float x[QM][QK], sc[QE][QN][QG], bias[QE][QN];
  static uint8_t codes[QE][QN][QK / 2], zp[QE][QN][QG];
  for (int i = 0; i < QM * QK; i++) (&x[0][0])[i] = frand(-1, 1);
  for (int e = 0; e < QE; e++)
    for (int n = 0; n < QN; n++) {
      bias[e][n] = frand(-1, 1);
      for (int g = 0; g < QG; g++) sc[e][n][g] = frand(0.01f, 0.1f), zp[e][n][g] = (uint8_t)(frand(0, 16));
      for (int k = 0; k < QK / 2; k++) codes[e][n][k] = (uint8_t)frand(0, 256);
    }
  int64_t off[QE + 1] = {0, 9, 9, 21}; /* an empty expert; rows 21, 22 outside */
  bp_quantize_attrs_t a = {.struct_size = sizeof a, .qdtype = BP_DTYPE_U4, .axis = -1, .block_size = 32};
  int64_t xs[2] = {QM, QK}, cs[3] = {QE, QN, QK / 2}, ss[3] = {QE, QN, QG}, bs[2] = {QE, QN},
          os[1] = {QE + 1};
  bp_tensor_t* y = NULL;
  assert_ok(bp_op_grouped_mm(g_stream, cpu_tensor(BP_DTYPE_F32, 2, xs, x),
                             cpu_tensor(BP_DTYPE_U8, 3, cs, codes), cpu_tensor(BP_DTYPE_I64, 1, os, off),
                             cpu_tensor(BP_DTYPE_F32, 2, bs, bias), cpu_tensor(BP_DTYPE_F32, 3, ss, sc),
                             cpu_tensor(BP_DTYPE_U8, 3, ss, zp), &a, &y));
  ops_track(y);
  static float got[QM][QN];
  read_back(y, got, sizeof got);
  for (int e = 0; e < QE; e++) {
    int64_t m = off[e + 1] - off[e];
    if (m == 0) continue;
    int64_t exs[2] = {m, QK}, ecs[2] = {QN, QK / 2}, ess[2] = {QN, QG}, ebs[1] = {QN};
    bp_tensor_t* ye = NULL;
    assert_ok(bp_op_weight_only_mm(g_stream, cpu_tensor(BP_DTYPE_F32, 2, exs, x[off[e]]),
                                   cpu_tensor(BP_DTYPE_U8, 2, ecs, codes[e]),
                                   cpu_tensor(BP_DTYPE_F32, 2, ess, sc[e]),
                                   cpu_tensor(BP_DTYPE_U8, 2, ess, zp[e]),
                                   cpu_tensor(BP_DTYPE_F32, 1, ebs, bias[e]), &a, &ye));
    ops_track(ye);
    float want[QM][QN];
    read_back(ye, want, sizeof(float) * (size_t)(m * QN));
    assert_memory_equal(got[off[e]], want, sizeof(float) * (size_t)(m * QN));
  }
  for (int r = (int)off[QE]; r < QM; r++)
    for (int n = 0; n < QN; n++) assert_true(got[r][n] == 0.0f);
  /* codes without a scale, a scale of the wrong group count */
  bp_tensor_t* o = NULL;
  assert_status(bp_op_grouped_mm(g_stream, cpu_tensor(BP_DTYPE_F32, 2, xs, NULL),
                                 cpu_tensor(BP_DTYPE_U8, 3, cs, NULL), cpu_tensor(BP_DTYPE_I64, 1, os, NULL),
                                 NULL, NULL, NULL, &a, &o),
                BP_INVALID_ARGUMENT, "need 'opt_scale'");
  int64_t bad[3] = {QE, QN, QG + 1};
  assert_status(bp_op_grouped_mm(g_stream, cpu_tensor(BP_DTYPE_F32, 2, xs, NULL),
                                 cpu_tensor(BP_DTYPE_U8, 3, cs, NULL), cpu_tensor(BP_DTYPE_I64, 1, os, NULL),
                                 NULL, cpu_tensor(BP_DTYPE_F32, 3, bad, NULL), NULL, &a, &o),
                BP_INVALID_ARGUMENT, "(groups of 32 along K = 96)");
}

static void test_moe_errors(void** state) {
  (void)state;
  int64_t xs[2] = {4, 3}, ws[3] = {2, 5, 3}, os[1] = {3}, is[2] = {2, 2};
  bp_tensor_t* x = cpu_tensor(BP_DTYPE_F32, 2, xs, NULL);
  bp_tensor_t* w = cpu_tensor(BP_DTYPE_F32, 3, ws, NULL);
  bp_tensor_t* o = NULL;
  /* rules */
  bp_moe_permute_attrs_t pa = {sizeof pa, 0, 0, 0};
  bp_tensor_t *p = NULL, *off = NULL, *inv = NULL;
  assert_status(bp_op_moe_permute(g_stream, x, cpu_tensor(BP_DTYPE_I64, 2, (int64_t[2]){4, 2}, NULL),
                                  &pa, &p, &off, &inv),
                BP_INVALID_ARGUMENT, "attrs.num_experts = 0 must be >= 1");
  pa.num_experts = 2;
  assert_status(bp_op_moe_permute(g_stream, x, cpu_tensor(BP_DTYPE_F32, 2, (int64_t[2]){4, 2}, NULL),
                                  &pa, &p, &off, &inv),
                BP_INVALID_ARGUMENT, "i32 or i64");
  assert_status(bp_op_grouped_mm(g_stream, x, w, cpu_tensor(BP_DTYPE_I64, 1, (int64_t[1]){2}, NULL),
                                 NULL, NULL, NULL, NULL, &o),
                BP_INVALID_ARGUMENT, "num_experts of 'weight' + 1");
  assert_status(bp_op_grouped_mm(g_stream, x, cpu_tensor(BP_DTYPE_F32, 3, (int64_t[3]){2, 5, 4}, NULL),
                                 cpu_tensor(BP_DTYPE_I64, 1, os, NULL), NULL, NULL, NULL, NULL, &o),
                BP_INVALID_ARGUMENT, "in_features differ");
  /* values, on the stream */
  bp_tensor_t* dec = cpu_tensor(BP_DTYPE_I64, 1, os, (int64_t[3]){0, 3, 2});
  assert_stream_error(bp_op_grouped_mm(s, x, w, dec, NULL, NULL, NULL, NULL, &o), BP_INVALID_ARGUMENT,
                      "expert_offsets[2] = 2 < expert_offsets[1] = 3");
  ops_track(o), o = NULL;
  bp_tensor_t* past = cpu_tensor(BP_DTYPE_I32, 1, os, (int32_t[3]){0, 1, 5});
  assert_stream_error(bp_op_grouped_mm(s, x, w, past, NULL, NULL, NULL, NULL, &o), BP_OUT_OF_RANGE,
                      "span [0, 5], outside the input's 4 rows");
  ops_track(o), o = NULL;
  bp_tensor_t* bad_inv = cpu_tensor(BP_DTYPE_I64, 2, is, (int64_t[4]){0, 1, -1, 4});
  assert_stream_error(bp_op_moe_unpermute(s, x, bad_inv, NULL, NULL, &o), BP_OUT_OF_RANGE,
                      "inverse[1, 1] = 4 is past the 4 permuted rows");
  ops_track(o);
}

/* ---- paged attention: prefill vs decode ------------------------------------------ */

enum { NB = 12, BS = 4, HKV = 2, H = 4, D = 16, MB = 5, PS = 2, PT = 16 };

typedef struct pcase {
  float kc[NB][BS][HKV][D], vc[NB][BS][HKV][D], q[PT][H][D];
  int32_t table[PS][MB];
  int32_t qsl[PS + 1], lens[PS];
} pcase_t;

static void pcase_fill(pcase_t* p) {
  for (int i = 0; i < NB * BS * HKV * D; i++) {
    (&p->kc[0][0][0][0])[i] = frand(-1, 1);
    (&p->vc[0][0][0][0])[i] = frand(-1, 1);
  }
  for (int i = 0; i < PT * H * D; i++) (&p->q[0][0][0])[i] = frand(-1, 1);
  /* sequence 0: 13 tokens, 5 new (chunked over a prefix); sequence 1: 9, all
   * new (pure prefill); rows 14, 15 pad */
  int32_t table[PS][MB] = {{7, 2, 9, 0, 11}, {4, 10, 1, 6, 3}};
  memcpy(p->table, table, sizeof table);
  p->qsl[0] = 0, p->qsl[1] = 5, p->qsl[2] = 14;
  p->lens[0] = 13, p->lens[1] = 9;
}

static void check_prefill_vs_decode(uint32_t window) {
  pcase_t* p = malloc(sizeof *p);
  assert_non_null(p);
  pcase_fill(p);
  int64_t cs[4] = {NB, BS, HKV, D}, qs[3] = {PT, H, D}, ts[2] = {PS, MB}, ls[1] = {PS},
          qls[1] = {PS + 1};
  bp_tensor_t* kc = cpu_tensor(BP_DTYPE_F32, 4, cs, p->kc);
  bp_tensor_t* vc = cpu_tensor(BP_DTYPE_F32, 4, cs, p->vc);
  bp_paged_attention_attrs_t a = {sizeof a, window, 0.0};
  bp_tensor_t* o = NULL;
  assert_ok(bp_op_paged_attention_prefill(
      g_stream, cpu_tensor(BP_DTYPE_F32, 3, qs, p->q), kc, vc,
      cpu_tensor(BP_DTYPE_I32, 2, ts, p->table), cpu_tensor(BP_DTYPE_I32, 1, qls, p->qsl),
      cpu_tensor(BP_DTYPE_I32, 1, ls, p->lens), &a, &o));
  ops_track(o);
  static float got[PT][H][D];
  read_back(o, got, sizeof got);
  for (int s = 0; s < PS; s++) {
    int qn = p->qsl[s + 1] - p->qsl[s];
    int64_t q1[3] = {1, H, D}, t1[2] = {1, MB}, l1[1] = {1};
    for (int i = 0; i < qn; i++) {
      int row = p->qsl[s] + i;
      int32_t len = p->lens[s] - qn + i + 1; /* the decode step at this row's position */
      bp_tensor_t* dq = NULL;
      assert_ok(bp_op_paged_attention(g_stream, cpu_tensor(BP_DTYPE_F32, 3, q1, p->q[row]), kc, vc,
                                      cpu_tensor(BP_DTYPE_I32, 2, t1, p->table[s]),
                                      cpu_tensor(BP_DTYPE_I32, 1, l1, &len), NULL, &a, &dq));
      ops_track(dq);
      float want[H][D];
      read_back(dq, want, sizeof want);
      for (int h = 0; h < H; h++)
        for (int d = 0; d < D; d++)
          if (fabsf(got[row][h][d] - want[h][d]) > 2e-6f) {
            print_error("row %d head %d dim %d: prefill %.9g, decode %.9g\n", row, h, d,
                        got[row][h][d], want[h][d]);
            fail();
          }
    }
  }
  for (int row = p->qsl[PS]; row < PT; row++)
    for (int i = 0; i < H * D; i++) assert_true((&got[row][0][0])[i] == 0.0f);
  free(p);
}

static void test_prefill_equals_decode(void** state) {
  (void)state;
  check_prefill_vs_decode(0);
}

static void test_prefill_window_equals_decode(void** state) {
  (void)state;
  check_prefill_vs_decode(4);
}

static void test_prefill_errors(void** state) {
  (void)state;
  pcase_t* p = malloc(sizeof *p);
  assert_non_null(p);
  pcase_fill(p);
  int64_t cs[4] = {NB, BS, HKV, D}, qs[3] = {PT, H, D}, ts[2] = {PS, MB}, ls[1] = {PS},
          qls[1] = {PS + 1};
  bp_tensor_t* kc = cpu_tensor(BP_DTYPE_F32, 4, cs, p->kc);
  bp_tensor_t* q = cpu_tensor(BP_DTYPE_F32, 3, qs, p->q);
  bp_tensor_t* tab = cpu_tensor(BP_DTYPE_I32, 2, ts, p->table);
  bp_tensor_t* qsl = cpu_tensor(BP_DTYPE_I32, 1, qls, p->qsl);
  bp_tensor_t* o = NULL;
  p->lens[0] = 4; /* fewer than its 5 new rows */
  assert_stream_error(bp_op_paged_attention_prefill(s, q, kc, kc, tab, qsl,
                                                    cpu_tensor(BP_DTYPE_I32, 1, ls, p->lens),
                                                    NULL, &o),
                      BP_OUT_OF_RANGE, "seq_lens[0] = 4 must hold the sequence's 5 new rows");
  ops_track(o), o = NULL;
  p->lens[0] = 13;
  p->table[1][2] = NB; /* read by length 9 */
  assert_stream_error(bp_op_paged_attention_prefill(s, q, kc, kc,
                                                    cpu_tensor(BP_DTYPE_I32, 2, ts, p->table), qsl,
                                                    cpu_tensor(BP_DTYPE_I32, 1, ls, p->lens),
                                                    NULL, &o),
                      BP_OUT_OF_RANGE, "block_tables[1, 2] = 12 is outside the cache's 12 blocks");
  ops_track(o), o = NULL;
  int32_t dec[3] = {0, 9, 5};
  assert_stream_error(bp_op_paged_attention_prefill(s, q, kc, kc, tab,
                                                    cpu_tensor(BP_DTYPE_I32, 1, qls, dec),
                                                    cpu_tensor(BP_DTYPE_I32, 1, ls, p->lens),
                                                    NULL, &o),
                      BP_INVALID_ARGUMENT, "query_start_loc[2] < query_start_loc[1]");
  ops_track(o), o = NULL;
  assert_status(bp_op_paged_attention_prefill(g_stream, q, kc, kc, tab,
                                              cpu_tensor(BP_DTYPE_I32, 1, ls, NULL),
                                              cpu_tensor(BP_DTYPE_I32, 1, ls, p->lens), NULL, &o),
                BP_INVALID_ARGUMENT, "seqs of 'block_tables' + 1");
  free(p);
}

/* ---- merge_attn_states ------------------------------------------------------------ */

enum { AT = 3, AH = 2, AD = 8, AN = 11 };

/* Softmax-weighted sum of v over keys [k0, k1) with scores sc: out, lse. */
static void partial(const double sc[AN], const double v[AN][AD], int k0, int k1, float* out,
                    float* lse) {
  double m = -INFINITY, z = 0.0, acc[AD] = {0};
  for (int k = k0; k < k1; k++) m = fmax(m, sc[k]);
  for (int k = k0; k < k1; k++) {
    double e = exp(sc[k] - m);
    z += e;
    for (int d = 0; d < AD; d++) acc[d] += e * v[k][d];
  }
  for (int d = 0; d < AD; d++) out[d] = k1 > k0 ? (float)(acc[d] / z) : 0.0f;
  *lse = k1 > k0 ? (float)(m + log(z)) : -INFINITY;
}

static void test_merge_attn_states(void** state) {
  (void)state;
  float po[AT][AH][AD], so[AT][AH][AD], full[AT][AH][AD], pl[AH][AT], sl[AH][AT], fl[AH][AT];
  for (int t = 0; t < AT; t++) {
    for (int h = 0; h < AH; h++) {
      double sc[AN], v[AN][AD];
      for (int k = 0; k < AN; k++) {
        sc[k] = frand(-4, 4);
        for (int d = 0; d < AD; d++) v[k][d] = frand(-1, 1);
      }
      int split = t == 2 ? AN : 4 + h; /* token 2: an empty suffix */
      partial(sc, v, 0, split, po[t][h], &pl[h][t]);
      partial(sc, v, split, AN, so[t][h], &sl[h][t]);
      partial(sc, v, 0, AN, full[t][h], &fl[h][t]);
    }
  }
  int64_t os[3] = {AT, AH, AD}, ls[2] = {AH, AT};
  bp_tensor_t *o = NULL, *ol = NULL;
  assert_ok(bp_op_merge_attn_states(g_stream, cpu_tensor(BP_DTYPE_F32, 3, os, po),
                                    cpu_tensor(BP_DTYPE_F32, 2, ls, pl),
                                    cpu_tensor(BP_DTYPE_F32, 3, os, so),
                                    cpu_tensor(BP_DTYPE_F32, 2, ls, sl), NULL, &o, &ol));
  ops_track(o), ops_track(ol);
  float got[AT][AH][AD], gl[AH][AT];
  read_back(o, got, sizeof got);
  read_back(ol, gl, sizeof gl);
  for (int t = 0; t < AT; t++) {
    for (int h = 0; h < AH; h++) {
      assert_true(fabsf(gl[h][t] - fl[h][t]) <= 1e-5f * (1.0f + fabsf(fl[h][t])));
      for (int d = 0; d < AD; d++) {
        assert_true(fabsf(got[t][h][d] - full[t][h][d]) <= 1e-5f);
        if (t == 2) assert_true(got[t][h][d] == po[t][h][d]); /* empty suffix: the prefix */
      }
    }
  }
}

/* ---- kv_cache_copy_blocks --------------------------------------------------------- */

static void test_copy_blocks_in_place(void** state) {
  (void)state;
  enum { CB = 6, ROW = 2 * 3 };
  float k[CB][ROW], v[CB][ROW];
  for (int b = 0; b < CB; b++)
    for (int i = 0; i < ROW; i++) k[b][i] = (float)(10 * b + i), v[b][i] = -(float)(10 * b + i);
  int64_t cs[4] = {CB, 2, 1, 3}, ms[2] = {2, 2};
  bp_tensor_t* kc = cpu_tensor(BP_DTYPE_F32, 4, cs, k);
  bp_tensor_t* vc = cpu_tensor(BP_DTYPE_F32, 4, cs, v);
  bp_tensor_t *ko = kc, *vo = vc;
  assert_ok(bp_op_kv_cache_copy_blocks(g_stream, kc, vc,
                                       cpu_tensor(BP_DTYPE_I64, 2, ms, (int64_t[4]){1, 4, 1, 0}),
                                       NULL, &ko, &vo));
  assert_ptr_equal(ko, kc);
  float gk[CB][ROW], gv[CB][ROW];
  read_back(kc, gk, sizeof gk);
  read_back(vc, gv, sizeof gv);
  for (int b = 0; b < CB; b++) {
    int from = b == 4 || b == 0 ? 1 : b;
    for (int i = 0; i < ROW; i++) assert_true(gk[b][i] == k[from][i] && gv[b][i] == v[from][i]);
  }
  /* a destination that is another pair's source, a block past the cache */
  bp_tensor_t *k2 = NULL, *v2 = NULL;
  assert_stream_error(bp_op_kv_cache_copy_blocks(s, kc, vc,
                                                 cpu_tensor(BP_DTYPE_I32, 2, ms, (int32_t[4]){1, 2, 2, 3}),
                                                 NULL, &k2, &v2),
                      BP_INVALID_ARGUMENT, "destination block 2 (pair 0) is also a source");
  ops_track(k2), ops_track(v2), k2 = v2 = NULL;
  assert_stream_error(bp_op_kv_cache_copy_blocks(s, kc, vc,
                                                 cpu_tensor(BP_DTYPE_I32, 2, ms, (int32_t[4]){1, 2, 6, 3}),
                                                 NULL, &k2, &v2),
                      BP_OUT_OF_RANGE, "block_mapping[1, 0] = 6 is outside the cache's 6 blocks");
  ops_track(k2), ops_track(v2);
}

int main(void) {
  if (ops_fixture_setup() != 0 || g_cpu == NULL) return 1;
  if (bp_stream_create(g_cpu, NULL, &g_stream) != BP_OK) return 1;
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_teardown(test_moe_pipeline_equals_dense, ops_release_all),
      cmocka_unit_test_teardown(test_grouped_int4_equals_weight_only_mm, ops_release_all),
      cmocka_unit_test_teardown(test_moe_errors, ops_release_all),
      cmocka_unit_test_teardown(test_prefill_equals_decode, ops_release_all),
      cmocka_unit_test_teardown(test_prefill_window_equals_decode, ops_release_all),
      cmocka_unit_test_teardown(test_prefill_errors, ops_release_all),
      cmocka_unit_test_teardown(test_merge_attn_states, ops_release_all),
      cmocka_unit_test_teardown(test_copy_blocks_in_place, ops_release_all),
  };
  int failed = cmocka_run_group_tests_name("serving_dispatch", tests, NULL, NULL);
  bp_stream_release(g_stream);
  bp_context_release(g_ctx);
  return failed;
}
