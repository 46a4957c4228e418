/* decode_tiny: a tiny randomly initialised transformer decodes a few tokens
 * the way a serving engine runs one sequence, and is checked against the
 * same model computed densely on the host.
 *
 * The model (seeded weights, nothing trained): 2 layers, d_model 128, 4 query
 * heads of 32 sharing 2 kv heads (GQA), a SwiGLU MLP of 256, vocabulary 512,
 * rotary embeddings (GPT-NeoX style), RMSNorm. Every linear weight is
 * quantized to int4 in groups of 32 along the input (symmetric, scale =
 * amax / 7 per group, codes -8..7, two per byte, low nibble first).
 *
 * The served run, on the device named by argv[1] (default cpu:0):
 *   embedding -> per layer: rms_norm / add_rms_norm, qkv_rotary (one
 *   projection with the rotary embedding; it takes float weights, so it gets
 *   the dequantized int4 values), kv_cache_append into a paged cache (blocks
 *   of 16 in a shuffled block table), paged_attention_prefill for the prompt
 *   and paged_attention for each decoded token, weight_only_mm (int4, group
 *   32) for the output, gate/up, down and vocabulary projections, swiglu ->
 *   add_rms_norm -> logits -> sample (temperature 0.8, top-p 0.9, a fixed
 *   Philox seed, the step as the counter offset).
 *
 * The reference: the same model (the same dequantized weights) in double on
 * the host, with dense attention over all cached positions. Checks:
 *   - logits: |served - reference| <= LOGIT_TOL = 1e-4 for every logit of
 *     every step (the logits are O(1); the served run's f32 accumulation
 *     differs from double by at most 2e-6 here, docs/ops.md, "Example");
 *   - tokens: the sample op run on the reference logits (same seed and
 *     offset) picks the same token, unless the reference decision is within
 *     the tolerance of a tie: the row's uniform within DELTA of a boundary of
 *     the cumulative distribution, or a top-p boundary within DELTA of top_p,
 *     where DELTA = exp(2 * LOGIT_TOL / temperature) - 1 bounds how far a
 *     logit error of LOGIT_TOL can move a normalized cumulative weight. Such
 *     steps are reported, not failed. Both runs continue with the served token.
 * Prints per-token timings (prompt, then each decode step, device synchronized).
 * Exit status 0 when every check holds.
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <backplane/backplane.h>

#include "bp_philox.h"

enum {
  LAYERS = 2, DM = 128, NH = 4, NKV = 2, HD = 32, FF = 256, VOCAB = 512, GROUP = 32,
  QKV = (NH + 2 * NKV) * HD, BS = 16, NBLK = 8, MAXPOS = 64, PROMPT = 6, STEPS = 8,
};
static const int32_t k_table[MAXPOS / BS] = {5, 2, 7, 0}; /* the sequence's blocks */
#define LOGIT_TOL 1e-4
#define TEMPERATURE 0.8
#define TOP_P 0.9
#define SEED 0x5EEDull
#define EPS 1e-6

#define TRY(expr)                                                                        \
  do {                                                                                   \
    bp_status_t st_ = (expr);                                                            \
    if (st_ != BP_OK) {                                                                  \
      fprintf(stderr, "%s:%d: %s: %s: %s\n", __FILE__, __LINE__, #expr, bp_status_name(st_), \
              bp_status_message());                                                      \
      exit(1);                                                                           \
    }                                                                                    \
  } while (0)

/* ---- weights ------------------------------------------------------------------------ */

static uint64_t g_rng = 0x243F6A8885A308D3ull;
static float frand(void) { /* uniform in [-1, 1) */
  g_rng ^= g_rng << 13, g_rng ^= g_rng >> 7, g_rng ^= g_rng << 17;
  return (float)((g_rng >> 11) * 0x1.0p-52) - 1.0f;
}

/* An int4 linear weight [n, k]: the codes packed [n, k / 2], the group
 * scales [n, k / GROUP] and the dequantized values [n, k] (both runs' model). */
typedef struct qlinear {
  int n, k;
  uint8_t* codes;
  float *scales, *deq;
} qlinear_t;

static void qlinear_init(qlinear_t* q, int n, int k) {
  q->n = n, q->k = k;
  q->codes = calloc((size_t)n * k / 2, 1);
  q->scales = malloc(sizeof(float) * (size_t)n * (k / GROUP));
  q->deq = malloc(sizeof(float) * (size_t)n * k);
  if (!q->codes || !q->scales || !q->deq) exit(1);
  float w[GROUP], amp = 1.0f / sqrtf((float)k) * 1.7f;
  for (int r = 0; r < n; r++) {
    for (int g = 0; g < k / GROUP; g++) {
      float amax = 0.0f;
      for (int i = 0; i < GROUP; i++) w[i] = frand() * amp, amax = fmaxf(amax, fabsf(w[i]));
      float s = amax > 0.0f ? amax / 7.0f : 1.0f;
      q->scales[r * (k / GROUP) + g] = s;
      for (int i = 0; i < GROUP; i++) {
        int c = (int)lrintf(w[i] / s), col = g * GROUP + i;
        c = c < -8 ? -8 : c > 7 ? 7 : c;
        q->deq[(size_t)r * k + col] = (float)c * s;
        q->codes[((size_t)r * k + col) / 2] |= (uint8_t)((c & 0xF) << (col % 2 ? 4 : 0));
      }
    }
  }
}

static void qlinear_free(qlinear_t* q) {
  free(q->codes), free(q->scales), free(q->deq);
}

typedef struct model {
  float emb[VOCAB][DM], norm1[LAYERS][DM], norm2[LAYERS][DM], normf[DM];
  qlinear_t qkv[LAYERS], o[LAYERS], gate_up[LAYERS], down[LAYERS], head;
  float cos_sin[MAXPOS][HD]; /* cos for i < HD / 2, then sin */
} model_t;

static void model_init(model_t* m) {
  for (int v = 0; v < VOCAB; v++)
    for (int i = 0; i < DM; i++) m->emb[v][i] = frand();
  for (int l = 0; l < LAYERS; l++) {
    for (int i = 0; i < DM; i++) m->norm1[l][i] = 1.0f + 0.1f * frand(), m->norm2[l][i] = 1.0f + 0.1f * frand();
    qlinear_init(&m->qkv[l], QKV, DM);
    qlinear_init(&m->o[l], DM, NH * HD);
    qlinear_init(&m->gate_up[l], 2 * FF, DM);
    qlinear_init(&m->down[l], DM, FF);
  }
  for (int i = 0; i < DM; i++) m->normf[i] = 1.0f + 0.1f * frand();
  qlinear_init(&m->head, VOCAB, DM);
  for (int p = 0; p < MAXPOS; p++) {
    for (int i = 0; i < HD / 2; i++) {
      double a = p * pow(10000.0, -2.0 * i / HD);
      m->cos_sin[p][i] = (float)cos(a), m->cos_sin[p][HD / 2 + i] = (float)sin(a);
    }
  }
}

/* ---- the served run ----------------------------------------------------------------- */

typedef struct served {
  bp_device_t* dev;
  bp_stream_t* s;
  bp_tensor_t *emb, *norm1[LAYERS], *norm2[LAYERS], *normf, *cos_sin, *table;
  bp_tensor_t *qkv[LAYERS], *codes[LAYERS][3], *scales[LAYERS][3], *head_codes, *head_scales;
  bp_tensor_t *kc[LAYERS], *vc[LAYERS];
} served_t;

static bp_tensor_t* upload(served_t* r, uint32_t dtype, uint32_t rank, const int64_t* sizes,
                           const void* data) {
  bp_tensor_t* t = NULL;
  int64_t n = 1;
  for (uint32_t d = 0; d < rank; d++) n *= sizes[d];
  TRY(bp_tensor_create(r->dev, dtype, rank, sizes, &t));
  TRY(bp_tensor_write(r->s, t, data, (uint64_t)n * bp_dtype_size(dtype)));
  return t;
}

static void upload_q(served_t* r, const qlinear_t* q, bp_tensor_t** codes, bp_tensor_t** scales) {
  int64_t cs[2] = {q->n, q->k / 2}, ss[2] = {q->n, q->k / GROUP};
  *codes = upload(r, BP_DTYPE_U8, 2, cs, q->codes);
  *scales = upload(r, BP_DTYPE_F32, 2, ss, q->scales);
}

static void served_init(served_t* r, const model_t* m) {
  int64_t es[2] = {VOCAB, DM}, ns[1] = {DM}, cs[2] = {MAXPOS, HD}, qs[2] = {QKV, DM},
          ts[2] = {1, MAXPOS / BS}, kvs[4] = {NBLK, BS, NKV, HD};
  r->emb = upload(r, BP_DTYPE_F32, 2, es, m->emb);
  r->normf = upload(r, BP_DTYPE_F32, 1, ns, m->normf);
  r->cos_sin = upload(r, BP_DTYPE_F32, 2, cs, m->cos_sin);
  r->table = upload(r, BP_DTYPE_I32, 2, ts, k_table);
  static float zeros[NBLK * BS * NKV * HD];
  for (int l = 0; l < LAYERS; l++) {
    r->norm1[l] = upload(r, BP_DTYPE_F32, 1, ns, m->norm1[l]);
    r->norm2[l] = upload(r, BP_DTYPE_F32, 1, ns, m->norm2[l]);
    r->qkv[l] = upload(r, BP_DTYPE_F32, 2, qs, m->qkv[l].deq);
    upload_q(r, &m->o[l], &r->codes[l][0], &r->scales[l][0]);
    upload_q(r, &m->gate_up[l], &r->codes[l][1], &r->scales[l][1]);
    upload_q(r, &m->down[l], &r->codes[l][2], &r->scales[l][2]);
    r->kc[l] = upload(r, BP_DTYPE_F32, 4, kvs, zeros);
    r->vc[l] = upload(r, BP_DTYPE_F32, 4, kvs, zeros);
  }
  upload_q(r, &m->head, &r->head_codes, &r->head_scales);
}

static void rel(bp_tensor_t** t) {
  bp_tensor_release(*t);
  *t = NULL;
}

static void served_release(served_t* r) {
  rel(&r->emb), rel(&r->normf), rel(&r->cos_sin), rel(&r->table);
  rel(&r->head_codes), rel(&r->head_scales);
  for (int l = 0; l < LAYERS; l++) {
    rel(&r->norm1[l]), rel(&r->norm2[l]), rel(&r->qkv[l]), rel(&r->kc[l]), rel(&r->vc[l]);
    for (int i = 0; i < 3; i++) rel(&r->codes[l][i]), rel(&r->scales[l][i]);
  }
}

/* x @ dequant(codes, scales)^T through weight_only_mm (int4, groups of 32). */
static bp_tensor_t* qmm(served_t* r, bp_tensor_t* x, bp_tensor_t* codes, bp_tensor_t* scales) {
  bp_quantize_attrs_t a = {.struct_size = sizeof a, .qdtype = BP_DTYPE_I4, .axis = -1,
                           .block_size = GROUP};
  bp_tensor_t* y = NULL;
  TRY(bp_op_weight_only_mm(r->s, x, codes, scales, NULL, NULL, &a, &y));
  return y;
}

/* Runs tokens [T] at positions pos0.. through the model; the last row's logits. */
static void served_forward(served_t* r, const int64_t* tokens, int T, int pos0, float* logits) {
  int64_t ids_s[1] = {T}, one[1] = {1}, qsl_s[1] = {2};
  int64_t pos[PROMPT], slots[PROMPT];
  for (int i = 0; i < T; i++) {
    pos[i] = pos0 + i;
    slots[i] = (int64_t)k_table[pos[i] / BS] * BS + pos[i] % BS;
  }
  bp_tensor_t* ids = upload(r, BP_DTYPE_I64, 1, ids_s, tokens);
  bp_tensor_t* positions = upload(r, BP_DTYPE_I64, 1, ids_s, pos);
  bp_tensor_t* slot_map = upload(r, BP_DTYPE_I64, 1, ids_s, slots);
  int32_t len = pos0 + T, qsl[2] = {0, T};
  bp_tensor_t* lens = upload(r, BP_DTYPE_I32, 1, one, &len);
  bp_tensor_t* starts = upload(r, BP_DTYPE_I32, 1, qsl_s, qsl);
  bp_embedding_attrs_t ea = {.struct_size = sizeof ea, .padding_idx = -1};
  bp_rms_norm_attrs_t na = {sizeof na, 1, EPS};
  bp_qkv_rotary_attrs_t ra = {sizeof ra, NH, NKV, 0};
  bp_paged_attention_attrs_t pa = {sizeof pa, 0, 0.0};
  bp_tensor_t *x = NULL, *h = NULL, *res = NULL, *delta = NULL;
  TRY(bp_op_embedding(r->s, r->emb, ids, &ea, &x));
  for (int l = 0; l < LAYERS; l++) {
    if (l == 0) {
      TRY(bp_op_rms_norm(r->s, x, r->norm1[0], &na, &h));
      res = x, x = NULL;
    } else {
      bp_tensor_t* res2 = NULL;
      TRY(bp_op_add_rms_norm(r->s, delta, res, r->norm1[l], &na, &h, &res2));
      rel(&delta), rel(&res), res = res2;
    }
    bp_tensor_t *q = NULL, *k = NULL, *v = NULL, *attn = NULL, *attn2d = NULL;
    TRY(bp_op_qkv_rotary(r->s, h, r->qkv[l], NULL, positions, r->cos_sin, &ra, &q, &k, &v));
    rel(&h);
    TRY(bp_op_kv_cache_append(r->s, r->kc[l], r->vc[l], k, v, slot_map, NULL, &r->kc[l], &r->vc[l]));
    if (T > 1) {
      TRY(bp_op_paged_attention_prefill(r->s, q, r->kc[l], r->vc[l], r->table, starts, lens, &pa, &attn));
    } else {
      TRY(bp_op_paged_attention(r->s, q, r->kc[l], r->vc[l], r->table, lens, NULL, &pa, &attn));
    }
    int64_t as[2] = {T, NH * HD};
    TRY(bp_tensor_view(attn, 2, as, &attn2d));
    delta = qmm(r, attn2d, r->codes[l][0], r->scales[l][0]);
    rel(&q), rel(&k), rel(&v), rel(&attn), rel(&attn2d);
    bp_tensor_t *res2 = NULL, *gu = NULL, *act = NULL;
    TRY(bp_op_add_rms_norm(r->s, delta, res, r->norm2[l], &na, &h, &res2));
    rel(&delta), rel(&res), res = res2;
    gu = qmm(r, h, r->codes[l][1], r->scales[l][1]);
    TRY(bp_op_swiglu(r->s, gu, NULL, &act));
    delta = qmm(r, act, r->codes[l][2], r->scales[l][2]);
    rel(&h), rel(&gu), rel(&act);
  }
  bp_tensor_t *res2 = NULL, *out = NULL;
  TRY(bp_op_add_rms_norm(r->s, delta, res, r->normf, &na, &h, &res2));
  out = qmm(r, h, r->head_codes, r->head_scales);
  float* all = malloc(sizeof(float) * (size_t)T * VOCAB);
  if (!all) exit(1);
  TRY(bp_tensor_read(r->s, out, all, sizeof(float) * (size_t)T * VOCAB));
  TRY(bp_stream_synchronize(r->s));
  memcpy(logits, all + (size_t)(T - 1) * VOCAB, sizeof(float) * VOCAB);
  free(all);
  rel(&delta), rel(&res), rel(&res2), rel(&h), rel(&out);
  rel(&ids), rel(&positions), rel(&slot_map), rel(&lens), rel(&starts);
}

/* One token from a row of logits by the sample op (the step is the offset). */
static int64_t sample_row(served_t* r, const float* logits, int step) {
  int64_t ls[2] = {1, VOCAB}, tok = -1;
  bp_tensor_t *l = upload(r, BP_DTYPE_F32, 2, ls, logits), *t = NULL;
  bp_sample_attrs_t a = {sizeof a, 0, TEMPERATURE, TOP_P, SEED, (uint64_t)step};
  TRY(bp_op_sample(r->s, l, &a, &t));
  TRY(bp_tensor_read(r->s, t, &tok, sizeof tok));
  TRY(bp_stream_synchronize(r->s));
  rel(&l), rel(&t);
  return tok;
}

/* ---- the host reference (double, dense attention) --------------------------------------- */

typedef struct ref {
  double k[LAYERS][MAXPOS][NKV][HD], v[LAYERS][MAXPOS][NKV][HD];
} ref_t;

static void rms(const double* x, const float* w, double* y) {
  double ss = 0.0;
  for (int i = 0; i < DM; i++) ss += x[i] * x[i];
  double inv = 1.0 / sqrt(ss / DM + EPS);
  for (int i = 0; i < DM; i++) y[i] = x[i] * inv * w[i];
}

static void matvec(const qlinear_t* q, const double* x, double* y) {
  for (int n = 0; n < q->n; n++) {
    double acc = 0.0;
    for (int k = 0; k < q->k; k++) acc += (double)q->deq[(size_t)n * q->k + k] * x[k];
    y[n] = acc;
  }
}

static void rope(const model_t* m, int pos, double* head) {
  for (int i = 0; i < HD / 2; i++) {
    double c = m->cos_sin[pos][i], s = m->cos_sin[pos][HD / 2 + i], a = head[i], b = head[HD / 2 + i];
    head[i] = a * c - b * s;
    head[HD / 2 + i] = b * c + a * s;
  }
}

/* One token at position pos; its K, V join the dense cache. */
static void ref_forward(const model_t* m, ref_t* r, int64_t token, int pos, double* logits) {
  double x[DM], h[DM], y[QKV], attn[NH * HD], o[DM], gu[2 * FF], act[FF], dn[DM], sc[MAXPOS];
  for (int i = 0; i < DM; i++) x[i] = m->emb[token][i];
  for (int l = 0; l < LAYERS; l++) {
    rms(x, m->norm1[l], h);
    matvec(&m->qkv[l], h, y);
    for (int hh = 0; hh < NH + NKV; hh++) rope(m, pos, y + hh * HD);
    memcpy(r->k[l][pos], y + NH * HD, sizeof(double) * NKV * HD);
    memcpy(r->v[l][pos], y + (NH + NKV) * HD, sizeof(double) * NKV * HD);
    for (int hh = 0; hh < NH; hh++) {
      int g = hh / (NH / NKV);
      double mx = -INFINITY, z = 0.0;
      for (int t = 0; t <= pos; t++) {
        double d = 0.0;
        for (int i = 0; i < HD; i++) d += y[hh * HD + i] * r->k[l][t][g][i];
        sc[t] = d / sqrt((double)HD);
        mx = fmax(mx, sc[t]);
      }
      for (int t = 0; t <= pos; t++) z += sc[t] = exp(sc[t] - mx);
      for (int i = 0; i < HD; i++) {
        double acc = 0.0;
        for (int t = 0; t <= pos; t++) acc += sc[t] / z * r->v[l][t][g][i];
        attn[hh * HD + i] = acc;
      }
    }
    matvec(&m->o[l], attn, o);
    for (int i = 0; i < DM; i++) x[i] += o[i];
    rms(x, m->norm2[l], h);
    matvec(&m->gate_up[l], h, gu);
    for (int i = 0; i < FF; i++) act[i] = gu[i] / (1.0 + exp(-gu[i])) * gu[FF + i];
    matvec(&m->down[l], act, dn);
    for (int i = 0; i < DM; i++) x[i] += dn[i];
  }
  rms(x, m->normf, h);
  matvec(&m->head, h, logits);
}

/* ---- the sampling rule on the reference logits -------------------------------------- */

/* Whether the sample rule (docs/semantics.md, "sample") could yield `tok` from
 * logits within `delta` of the reference's normalized weights: tokens whose
 * top-p mass above them is within delta of top_p may be kept or dropped, and
 * tok's interval of the kept tokens' cumulative weights (bounded over those
 * choices) must come within delta of the row's uniform. *out_margin: the
 * reference decision's distance from a tie (top-p or cumulative boundary). */
static int reachable(const double* l, int step, int64_t tok, double delta, double* out_margin) {
  double m = -INFINITY, w[VOCAB], above[VOCAB], total = 0.0;
  for (int i = 0; i < VOCAB; i++) m = fmax(m, l[i]);
  for (int i = 0; i < VOCAB; i++) total += w[i] = exp((l[i] - m) / TEMPERATURE);
  double sure = 0.0, maybe = 0.0, margin = INFINITY; /* kept masses: surely, possibly */
  for (int i = 0; i < VOCAB; i++) {
    above[i] = 0.0;
    for (int j = 0; j < VOCAB; j++) above[i] += l[j] > l[i] ? w[j] : 0.0;
    above[i] /= total;
    margin = fmin(margin, fabs(above[i] - TOP_P));
    sure += above[i] < TOP_P - delta ? w[i] : 0.0;
    maybe += above[i] < TOP_P + delta ? w[i] : 0.0;
  }
  uint32_t word = 0;
  bp_philox_words(SEED, (uint64_t)step, 0, 1, &word);
  double u = bp_philox_u32_to_unit(word, 24), c = 0.0, lo_sure = 0.0, lo_maybe = 0.0, kept = 0.0;
  for (int i = 0; i < VOCAB; i++) kept += above[i] < TOP_P ? w[i] : 0.0;
  for (int i = 0; i < VOCAB; i++) { /* the reference's own cumulative boundaries */
    if (above[i] >= TOP_P) continue;
    c += w[i];
    margin = fmin(margin, fabs(c / kept - u));
  }
  *out_margin = margin;
  if (tok < 0 || tok >= VOCAB || !(above[tok] < TOP_P + delta)) return 0;
  for (int i = 0; i < tok; i++) {
    lo_sure += above[i] < TOP_P - delta ? w[i] : 0.0;
    lo_maybe += above[i] < TOP_P + delta ? w[i] : 0.0;
  }
  double lo = lo_sure / maybe, hi = (lo_maybe + w[tok]) / sure;
  return u >= lo - delta && u < hi + delta;
}

/* ---- main ---------------------------------------------------------------------------- */

static double now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1e3 + ts.tv_nsec * 1e-6;
}

int main(int argc, char** argv) {
  static model_t m;
  static ref_t ref;
  served_t r = {0};
  bp_context_t* ctx = NULL;
  TRY(bp_context_create(NULL, &ctx));
  TRY(bp_context_find_device(ctx, argc > 1 ? argv[1] : "cpu:0", &r.dev));
  TRY(bp_stream_create(r.dev, NULL, &r.s));
  model_init(&m);
  served_init(&r, &m);
  int64_t tokens[PROMPT + STEPS];
  for (int i = 0; i < PROMPT; i++) tokens[i] = (int64_t)(37 * i + 11) % VOCAB;
  const double delta = exp(2.0 * LOGIT_TOL / TEMPERATURE) - 1.0;
  double worst = 0.0, ref_logits[VOCAB];
  float logits[VOCAB], ref_f[VOCAB];
  int failed = 0, ties = 0, n = PROMPT;
  printf("decode_tiny on %s: %d layers, d_model %d, %d heads / %d kv heads, vocab %d, int4 "
         "group %d\n", bp_device_name(r.dev), LAYERS, DM, NH, NKV, VOCAB, GROUP);
  for (int step = 0; step < STEPS; step++) {
    double t0 = now_ms();
    if (step == 0) served_forward(&r, tokens, PROMPT, 0, logits);
    else served_forward(&r, tokens + n - 1, 1, n - 1, logits);
    double t1 = now_ms();
    for (int p = step == 0 ? 0 : n - 1; p < n; p++) ref_forward(&m, &ref, tokens[p], p, ref_logits);
    double err = 0.0;
    for (int i = 0; i < VOCAB; i++) {
      err = fmax(err, fabs(logits[i] - ref_logits[i]));
      ref_f[i] = (float)ref_logits[i];
    }
    worst = fmax(worst, err);
    int64_t tok = sample_row(&r, logits, step), want = sample_row(&r, ref_f, step);
    double margin = 0.0;
    int near = reachable(ref_logits, step, tok, delta, &margin);
    const char* verdict = "ok";
    double own = 0.0; /* the host rule must reach the op's own reference token */
    if (!reachable(ref_logits, step, want, 0.0, &own)) verdict = "RULE MISMATCH", failed = 1;
    else if (!(err <= LOGIT_TOL)) verdict = "LOGITS DIFFER", failed = 1;
    else if (tok != want && !near) verdict = "TOKEN DIFFERS", failed = 1;
    else if (tok != want) verdict = "tie (accepted)", ties++;
    printf("%s %2d: %7.3f ms  token %3lld (reference %3lld)  max |logit error| %.2e  tie "
           "margin %.2e  %s\n", step == 0 ? "prompt" : "token ", step == 0 ? PROMPT : step,
           t1 - t0, (long long)tok, (long long)want, err, margin, verdict);
    tokens[n++] = tok;
  }
  printf("%s: %d tokens decoded, max |logit error| %.2e (tolerance %.0e), %d near-tie token "
         "differences\n", failed ? "FAIL" : "PASS", STEPS, worst, LOGIT_TOL, ties);
  served_release(&r);
  for (int l = 0; l < LAYERS; l++) {
    qlinear_free(&m.qkv[l]), qlinear_free(&m.o[l]), qlinear_free(&m.gate_up[l]), qlinear_free(&m.down[l]);
  }
  qlinear_free(&m.head);
  bp_stream_release(r.s);
  bp_context_release(ctx);
  return failed;
}
