/* References of the serving ops: sample, repetition_penalty (family
 * SAMPLE), kv_cache_append and paged_attention (family PAGED_ATTENTION),
 * written as the definitions of docs/semantics.md in fp64.
 *
 * qkv_rotary is the projection then the rotation, in fp64 (class REDUCE over
 * the hidden size, the rotation's two terms in the magnitude).
 *
 * sample is counter-based like the random ops, but its rule fixes which
 * token a row yields (the row's Philox word, inverse CDF in vocabulary
 * order), so the reference predicts every token. The checker accepts the
 * device's token when it is in the kept set and its CDF interval holds the
 * row's uniform, both within a rounding margin (the device sums weights in
 * its own order and precision); rows whose top-p boundary lies within the
 * margin only need a kept token. It then judges the distribution on its own:
 * the probability integral transform of the chosen tokens (randomized within
 * the token's interval) must be uniform (Kolmogorov-Smirnov distance below
 * 2.2 / sqrt(n), as the random ops' check) when 200 or more rows sample.
 * The Philox-4x32-10 stream is re-implemented here from its definition, so
 * the reference shares no code with any plugin.
 */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ref.h"

void bpc_gen_sample(struct bpc_gen* g);
void bpc_gen_penalty(struct bpc_gen* g);
void bpc_gen_kv_cache_append(struct bpc_gen* g);
void bpc_gen_paged_attention(struct bpc_gen* g);
void bpc_gen_qkv_rotary(struct bpc_gen* g);
void bpc_gen_moe_topk(struct bpc_gen* g);

static int is_float4(uint32_t d) {
  return d == BP_DTYPE_F32 || d == BP_DTYPE_F64 || d == BP_DTYPE_F16 || d == BP_DTYPE_BF16;
}
static int is_index(uint32_t d) { return d == BP_DTYPE_I32 || d == BP_DTYPE_I64; }
static double ld(const bpc_host_tensor_t* t, int64_t i) { return bpc_load(t->dtype, t->data, i).f; }
static int64_t li(const bpc_host_tensor_t* t, int64_t i) { return bpc_load(t->dtype, t->data, i).i; }

/* ---- Philox-4x32-10 (Salmon et al., SC'11), word n of (seed, offset) ---------- */
uint32_t bpc_philox_word(uint64_t seed, uint64_t offset, uint64_t n) {
  uint64_t ctr = offset + n / 4;
  uint32_t c[4] = {(uint32_t)ctr, (uint32_t)(ctr >> 32), 0, 0};
  uint32_t k0 = (uint32_t)seed, k1 = (uint32_t)(seed >> 32);
  for (int r = 0; r < 10; r++) {
    uint64_t p0 = (uint64_t)0xD2511F53u * c[0], p1 = (uint64_t)0xCD9E8D57u * c[2];
    uint32_t n0 = (uint32_t)(p1 >> 32) ^ c[1] ^ k0, n2 = (uint32_t)(p0 >> 32) ^ c[3] ^ k1;
    c[1] = (uint32_t)p1;
    c[3] = (uint32_t)p0;
    c[0] = n0;
    c[2] = n2;
    k0 += 0x9E3779B9u;
    k1 += 0xBB67AE85u;
  }
  return c[n % 4];
}

/* ---- sample ------------------------------------------------------------------------ */

/* What the rule says about one row. w[i] > 0 marks a kept token with its
 * weight (a kept token whose weight underflows can never be drawn). */
typedef struct srow {
  int64_t pick;   /* the token the rule yields; -1: none */
  int greedy;
  int ambiguous;  /* a top-p decision within the margin */
  double u, total, eps;
} srow_t;

static int cmp_desc(const void* a, const void* b) {
  double x = *(const double*)a, y = *(const double*)b;
  return (x < y) - (x > y);
}

/* Row `row` of logits l[0..V): fills w[0..V) (0 = not kept) and *r; the
 * scratch s holds 2V doubles (sorted values, then (value, weight) pairs). */
static void sample_row(const bp_sample_attrs_t* a, uint32_t dtype, const double* l, int64_t V,
                       int64_t row, double* w, double* s, srow_t* r) {
  memset(r, 0, sizeof *r);
  r->pick = -1;
  r->eps = dtype == BP_DTYPE_F64 ? 1e-9 : 1e-5 + 1e-7 * (double)V;
  double m = -INFINITY;
  int64_t best = -1, n = 0;
  for (int64_t i = 0; i < V; i++) {
    w[i] = 0.0;
    if (isnan(l[i])) continue;
    s[n++] = l[i];
    if (best < 0 || l[i] > m) m = l[i], best = i;
  }
  r->greedy = a->temperature == 0.0;
  if (r->greedy || best < 0) {
    r->pick = best;
    return;
  }
  if (m == -INFINITY) return;
  qsort(s, (size_t)n, sizeof(double), cmp_desc);
  double tk = -INFINITY;
  if (a->top_k > 0 && (int64_t)a->top_k < n) tk = s[a->top_k - 1];
  double z = 0.0;
  for (int64_t i = 0; i < V; i++) {
    if (!(l[i] >= tk)) continue;
    w[i] = l[i] == m ? 1.0 : exp((l[i] - m) / a->temperature);
    z += w[i];
  }
  if (a->top_p > 0.0 && a->top_p < 1.0) {
    /* the kept values in descending order with their weights: the mass
     * above a value is the sum over the strictly greater ones */
    double limit = a->top_p * z, run = 0.0, *pairs = s;
    int64_t np = 0;
    for (int64_t i = 0; i < V; i++) {
      if (l[i] >= tk) pairs[2 * np] = l[i], pairs[2 * np + 1] = w[i], np++;
    }
    qsort(pairs, (size_t)np, 2 * sizeof(double), cmp_desc);
    double cut = -INFINITY; /* smallest kept value */
    for (int64_t k = 0; k < np;) {
      int64_t e = k;
      double grp = 0.0;
      while (e < np && pairs[2 * e] == pairs[2 * k]) grp += pairs[2 * e + 1], e++;
      if (fabs(run - limit) <= r->eps * z) r->ambiguous = 1;
      if (run < limit) cut = pairs[2 * k];
      run += grp;
      k = e;
    }
    for (int64_t i = 0; i < V; i++) {
      if (w[i] != 0.0 && !(l[i] >= cut)) w[i] = 0.0;
    }
  }
  for (int64_t i = 0; i < V; i++) r->total += w[i];
  r->u = (double)(bpc_philox_word(a->seed, a->offset, (uint64_t)row) >> 8) * 0x1p-24;
  double target = r->u * r->total, run = 0.0;
  for (int64_t i = 0; i < V; i++) {
    if (w[i] == 0.0) continue;
    run += w[i];
    r->pick = i;
    if (run > target) break;
  }
}

static bp_status_t ref_sample(const bpc_case_t* c, const bpc_host_tensor_t* in,
                              bpc_ref_result_t* res) {
  const bpc_host_tensor_t* x = &in[0];
  const bp_sample_attrs_t* a = &c->attrs.sample;
  if (!is_float4(x->dtype) || x->rank == 0 || x->sizes[x->rank - 1] < 1) {
    return bpc_ref_reject(res, "sample needs floating logits [..., V >= 1]");
  }
  if (!(a->temperature >= 0.0) || !(a->top_p >= 0.0 && a->top_p <= 1.0)) {
    return bpc_ref_reject(res, "temperature < 0 or top_p outside [0, 1]");
  }
  int64_t V = x->sizes[x->rank - 1];
  bp_status_t st = bpc_ref_single_output(res, BP_DTYPE_I64, x->rank - 1, x->sizes, 0,
                                         x->dtype == BP_DTYPE_F64 ? BP_DTYPE_F64 : BP_DTYPE_F32);
  if (st != BP_OK) return st;
  double* buf = malloc(sizeof(double) * 4 * (size_t)V);
  if (!buf) return BP_RESOURCE_EXHAUSTED;
  bpc_expected_t* e = &res->out[0];
  for (int64_t r = 0; r < e->numel; r++) {
    for (int64_t i = 0; i < V; i++) buf[i] = ld(x, r * V + i);
    srow_t info;
    sample_row(a, x->dtype, buf, V, r, buf + V, buf + 2 * V, &info);
    e->i[r] = info.pick;
  }
  free(buf);
  return BP_OK;
}

static void fail(bpc_check_t* out, const char* fmt, ...) __attribute__((format(printf, 2, 3)));
static void fail(bpc_check_t* out, const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(out->message, sizeof out->message, fmt, ap);
  va_end(ap);
  out->status = BPC_FAIL;
}

static int cmp_asc(const void* a, const void* b) {
  double x = *(const double*)a, y = *(const double*)b;
  return (x > y) - (x < y);
}

static void check_sample(const bpc_case_t* c, const bpc_host_tensor_t* in,
                         const bpc_ref_result_t* ref, const void* const* got,
                         const bpc_tolerance_t* tol, bpc_check_t* out) {
  (void)tol;
  const bpc_host_tensor_t* x = &in[0];
  const int64_t* g = got[0];
  int64_t rows = ref->out[0].numel, V = x->sizes[x->rank - 1];
  memset(out, 0, sizeof *out);
  out->status = BPC_PASS;
  out->worst_index = -1;
  out->max_ulps = -1;
  double* buf = malloc(sizeof(double) * 4 * (size_t)V);
  double* pit = malloc(sizeof(double) * (size_t)(rows > 0 ? rows : 1));
  if (!buf || !pit) {
    free(buf);
    free(pit);
    fail(out, "out of host memory");
    return;
  }
  bpc_rng_t rng;
  bpc_rng_seed(&rng, c->seed ^ UINT64_C(0x5A3F1E));
  int64_t npit = 0, exact = 0;
  for (int64_t r = 0; r < rows && out->status == BPC_PASS; r++) {
    for (int64_t i = 0; i < V; i++) buf[i] = ld(x, r * V + i);
    double* w = buf + V;
    srow_t info;
    sample_row(&c->attrs.sample, x->dtype, buf, V, r, w, buf + 2 * V, &info);
    int64_t t = g[r];
    if (info.greedy || info.pick < 0) {
      if (t != info.pick) fail(out, "row %lld: token %lld; expected %lld", (long long)r, (long long)t, (long long)info.pick);
      continue;
    }
    if (t < 0 || t >= V || w[t] == 0.0) {
      /* a token dropped by a top-p decision within the margin is allowed */
      if (!(info.ambiguous && t >= 0 && t < V && !isnan(buf[t]))) {
        fail(out, "row %lld: token %lld is not in the kept set (expected %lld)", (long long)r,
             (long long)t, (long long)info.pick);
      }
      continue;
    }
    double below = 0.0;
    for (int64_t i = 0; i < t; i++) below += w[i];
    double target = info.u * info.total, slack = info.eps * info.total;
    if (!info.ambiguous && (target < below - slack || target > below + w[t] + slack)) {
      fail(out, "row %lld: token %lld, but the row's uniform %.9g selects token %lld", (long long)r,
           (long long)t, info.u, (long long)info.pick);
      continue;
    }
    exact += t == info.pick;
    pit[npit++] = (below + bpc_rng_uniform(&rng, 0.0, 1.0) * w[t]) / info.total;
  }
  if (out->status == BPC_PASS && npit >= 200) {
    qsort(pit, (size_t)npit, sizeof(double), cmp_asc);
    double d = 0.0;
    for (int64_t k = 0; k < npit; k++) {
      double f = pit[k] < 0 ? 0 : pit[k] > 1 ? 1 : pit[k];
      double lo = f - (double)k / (double)npit, hi = (double)(k + 1) / (double)npit - f;
      if (lo > d) d = lo;
      if (hi > d) d = hi;
    }
    double limit = 2.2 / sqrt((double)npit) + 1e-3;
    if (d > limit) fail(out, "chosen tokens' PIT: KS distance %.4f > %.4f over %lld rows", d, limit, (long long)npit);
  }
  if (out->status == BPC_PASS) {
    snprintf(out->message, sizeof out->message, "%lld of %lld sampled rows pick the predicted token",
             (long long)exact, (long long)npit);
  }
  free(buf);
  free(pit);
}

/* ---- repetition_penalty -------------------------------------------------------- */

static bp_status_t ref_penalty(const bpc_case_t* c, const bpc_host_tensor_t* in,
                               bpc_ref_result_t* res) {
  const bpc_host_tensor_t *x = &in[0], *t = &in[1];
  const bp_penalty_attrs_t* a = &c->attrs.penalty;
  if (!is_float4(x->dtype) || x->rank == 0 || x->sizes[x->rank - 1] < 1 || !is_index(t->dtype) ||
      t->rank != x->rank) {
    return bpc_ref_reject(res, "repetition_penalty needs floating logits and i32/i64 tokens");
  }
  for (uint32_t d = 0; d + 1 < x->rank; d++) {
    if (t->sizes[d] != x->sizes[d]) return bpc_ref_reject(res, "leading dims differ");
  }
  int64_t V = x->sizes[x->rank - 1], L = t->sizes[t->rank - 1];
  bp_status_t st = bpc_ref_single_output(res, x->dtype, x->rank, x->sizes, 0,
                                         x->dtype == BP_DTYPE_F64 ? BP_DTYPE_F64 : BP_DTYPE_F32);
  if (st != BP_OK) return st;
  bpc_expected_t* e = &res->out[0];
  double rep = a->repetition == 0.0 ? 1.0 : a->repetition;
  for (int64_t k = 0; k < e->numel; k++) {
    int64_t r = k / V, v = k % V, count = 0;
    for (int64_t j = 0; j < L; j++) count += li(t, r * L + j) == v;
    double l = ld(x, k);
    if (count > 0) {
      l = l > 0.0 ? l / rep : l * rep;
      l -= a->frequency * (double)count + a->presence;
    }
    e->f[k] = l;
  }
  return BP_OK;
}

/* ---- kv_cache_append ------------------------------------------------------------- */

static bp_status_t ref_kv_cache_append(const bpc_case_t* c, const bpc_host_tensor_t* in,
                                       bpc_ref_result_t* res) {
  (void)c;
  const bpc_host_tensor_t *kc = &in[0], *key = &in[2], *slots = &in[4];
  if (!is_float4(kc->dtype) || kc->rank != 4 || key->rank != 3 || !is_index(slots->dtype)) {
    return bpc_ref_reject(res, "kv_cache_append: caches [NB, BS, H, D], rows [T, H, D], slots [T]");
  }
  int64_t row = kc->sizes[2] * kc->sizes[3], cap = kc->sizes[0] * kc->sizes[1];
  for (int64_t t = 0; t < key->sizes[0]; t++) {
    if (li(slots, t) >= cap) return bpc_ref_reject(res, "a slot past the cache");
  }
  res->num_outputs = 2;
  res->compute_dtype = kc->dtype;
  for (int o = 0; o < 2; o++) {
    bp_status_t st = bpc_expected_init(&res->out[o], kc->dtype, kc->rank, kc->sizes, 0);
    if (st != BP_OK) return st;
    bpc_expected_t* e = &res->out[o];
    for (int64_t k = 0; k < e->numel; k++) e->f[k] = ld(&in[o], k);
    for (int64_t t = 0; t < key->sizes[0]; t++) {
      int64_t slot = li(slots, t);
      if (slot < 0) continue;
      for (int64_t k = 0; k < row; k++) e->f[slot * row + k] = ld(&in[2 + o], t * row + k);
    }
  }
  return BP_OK;
}

/* ---- paged_attention ------------------------------------------------------------- */

void bpc_ref_paged_row(const bpc_paged_t* p, int64_t row0, int64_t gk, int64_t s, int64_t start,
                       int64_t end, double slope, double* sc, bpc_expected_t* e) {
  const int64_t D = p->D, BS = p->BS, MB = p->MB;
  double* amag = sc + end;
  double mx = -INFINITY, amax = 0.0;
  for (int64_t t = start; t < end; t++) {
    int64_t row = (li(p->bt, s * MB + t / BS) * BS + t % BS) * p->Hkv + gk;
    double dot = 0.0, mag = 0.0;
    for (int64_t d = 0; d < D; d++) {
      double v = ld(p->q, row0 + d) * ld(p->kc, row * D + d);
      dot += v;
      mag += fabs(v);
    }
    sc[t] = p->scale * dot + slope * (double)(t - (end - 1));
    amag[t] = p->scale * mag + fabs(slope * (double)(t - (end - 1)));
    if (sc[t] > mx) mx = sc[t];
    if (amag[t] > amax) amax = amag[t];
  }
  double l = 0.0;
  for (int64_t t = start; t < end; t++) l += exp(sc[t] - mx);
  for (int64_t d = 0; d < D; d++) {
    double acc = 0.0, mag = 0.0;
    for (int64_t t = start; t < end; t++) {
      int64_t row = (li(p->bt, s * MB + t / BS) * BS + t % BS) * p->Hkv + gk;
      double v = exp(sc[t] - mx) / l * ld(p->vc, row * D + d);
      acc += v;
      mag += fabs(v);
    }
    e->f[row0 + d] = acc;
    e->mag[row0 + d] = mag;
    e->nterms[row0 + d] = (double)(end - start) + 8.0 + 4.0 * (double)(D + 2) * amax;
  }
}

static bp_status_t ref_paged_attention(const bpc_case_t* c, const bpc_host_tensor_t* in,
                                       bpc_ref_result_t* res) {
  const bpc_host_tensor_t *q = &in[0], *kc = &in[1], *vc = &in[2], *bt = &in[3], *cl = &in[4];
  const bpc_host_tensor_t* al = c->num_inputs > 5 && in[5].dtype != BP_DTYPE_INVALID ? &in[5] : NULL;
  const bp_paged_attention_attrs_t* a = &c->attrs.paged;
  if (!is_float4(q->dtype) || q->rank != 3 || kc->rank != 4 || bt->rank != 2 ||
      !is_index(bt->dtype) || !is_index(cl->dtype)) {
    return bpc_ref_reject(res, "paged_attention: query [S, H, D], caches [NB, BS, Hkv, D]");
  }
  int64_t S = q->sizes[0], H = q->sizes[1], D = q->sizes[2];
  int64_t NB = kc->sizes[0], BS = kc->sizes[1], Hkv = kc->sizes[2], MB = bt->sizes[1];
  if (Hkv < 1 || H % Hkv != 0) return bpc_ref_reject(res, "num_heads is not a multiple of num_kv_heads");
  bp_status_t st = bpc_ref_single_output(res, q->dtype, 3, q->sizes, 1,
                                         q->dtype == BP_DTYPE_F64 ? BP_DTYPE_F64 : BP_DTYPE_F32);
  if (st != BP_OK) return st;
  bpc_expected_t* e = &res->out[0];
  double scale = a->scale > 0.0 ? a->scale : 1.0 / sqrt((double)D);
  int64_t maxn = MB * BS;
  double* sc = malloc(sizeof(double) * (size_t)(2 * (maxn > 0 ? maxn : 1)));
  if (!sc) return BP_RESOURCE_EXHAUSTED;
  for (int64_t s = 0; s < S && st == BP_OK; s++) {
    int64_t len = li(cl, s);
    if (len < 0 || len > maxn) {
      st = bpc_ref_reject(res, "context length outside the table");
      break;
    }
    int64_t start = a->sliding_window > 0 && len > (int64_t)a->sliding_window ? len - a->sliding_window : 0;
    for (int64_t b = start / BS; b * BS < len; b++) {
      int64_t blk = li(bt, s * MB + b);
      if (blk < 0 || blk >= NB) st = bpc_ref_reject(res, "block id outside the cache");
    }
    const bpc_paged_t pg = {q, kc, vc, bt, D, BS, Hkv, MB, scale};
    for (int64_t h = 0; h < H && st == BP_OK; h++) {
      bpc_ref_paged_row(&pg, (s * H + h) * D, h / (H / Hkv), s, start, len, al ? ld(al, h) : 0.0, sc,
                        e);
    }
  }
  free(sc);
  return st;
}


/* ---- qkv_rotary ---------------------------------------------------------------- */

static bp_status_t ref_qkv_rotary(const bpc_case_t* c, const bpc_host_tensor_t* in,
                                  bpc_ref_result_t* res) {
  const bpc_host_tensor_t *x = &in[0], *w = &in[1], *cs = &in[4], *pos = &in[3];
  const bpc_host_tensor_t* b = in[2].dtype != BP_DTYPE_INVALID ? &in[2] : NULL;
  const bp_qkv_rotary_attrs_t* a = &c->attrs.qkv;
  if (!is_float4(x->dtype) || x->rank != 2 || w->rank != 2 || cs->rank != 2 || a->num_kv_heads < 1 ||
      a->num_heads % a->num_kv_heads != 0) {
    return bpc_ref_reject(res, "qkv_rotary: input [T, hidden], weight [(H + 2 Hkv) D, hidden]");
  }
  int64_t T = x->sizes[0], K = x->sizes[1], N = w->sizes[0], H = a->num_heads, Hkv = a->num_kv_heads;
  int64_t D = N / (H + 2 * Hkv), R = cs->sizes[1], half = R / 2;
  if (D * (H + 2 * Hkv) != N || R % 2 || R > D) return bpc_ref_reject(res, "qkv_rotary: shapes");
  res->num_outputs = 3;
  res->compute_dtype = x->dtype == BP_DTYPE_F64 ? BP_DTYPE_F64 : BP_DTYPE_F32;
  int64_t qs[3] = {T, H, D}, ks[3] = {T, Hkv, D};
  for (int o = 0; o < 3; o++) {
    bp_status_t st = bpc_expected_init(&res->out[o], x->dtype, 3, o ? ks : qs, 1);
    if (st != BP_OK) return st;
  }
  double* y = malloc(sizeof(double) * 2 * (size_t)(N > 0 ? N : 1));
  if (!y) return BP_RESOURCE_EXHAUSTED;
  double* mag = y + N;
  for (int64_t t = 0; t < T; t++) {
    int64_t p = li(pos, t);
    if (p < 0 || p >= cs->sizes[0]) {
      free(y);
      return bpc_ref_reject(res, "a position outside the cache");
    }
    for (int64_t n = 0; n < N; n++) {
      double acc = b ? ld(b, n) : 0.0, m = b ? fabs(ld(b, n)) : 0.0;
      for (int64_t k = 0; k < K; k++) {
        double v = ld(x, t * K + k) * ld(w, n * K + k);
        acc += v;
        m += fabs(v);
      }
      y[n] = acc;
      mag[n] = m;
    }
    for (int64_t hd = 0; hd < H + 2 * Hkv; hd++) {
      double *yh = y + hd * D, *mh = mag + hd * D;
      if (hd < H + Hkv) {
        for (int64_t i = 0; i < half; i++) {
          int64_t i1 = a->interleaved ? 2 * i : i, i2 = a->interleaved ? 2 * i + 1 : i + half;
          double cv = ld(cs, p * R + i), sv = ld(cs, p * R + half + i);
          double x1 = yh[i1], x2 = yh[i2], m1 = mh[i1], m2 = mh[i2];
          yh[i1] = x1 * cv - x2 * sv;
          yh[i2] = x2 * cv + x1 * sv;
          mh[i1] = m1 * fabs(cv) + m2 * fabs(sv);
          mh[i2] = m2 * fabs(cv) + m1 * fabs(sv);
        }
      }
      int o = hd < H ? 0 : hd < H + Hkv ? 1 : 2;
      int64_t hh = o == 0 ? hd : o == 1 ? hd - H : hd - H - Hkv, nh = o == 0 ? H : Hkv;
      for (int64_t d = 0; d < D; d++) {
        int64_t lin = (t * nh + hh) * D + d;
        res->out[o].f[lin] = yh[d];
        res->out[o].mag[lin] = mh[d];
        res->out[o].nterms[lin] = (double)K + 4.0;
      }
    }
  }
  free(y);
  return BP_OK;
}

/* ---- moe_topk_softmax ------------------------------------------------------------- */

static bp_status_t ref_moe_topk(const bpc_case_t* c, const bpc_host_tensor_t* in,
                                bpc_ref_result_t* res) {
  const bpc_host_tensor_t* x = &in[0];
  const bp_moe_topk_attrs_t* a = &c->attrs.moe_topk;
  if (!is_float4(x->dtype) || x->rank != 2 || a->top_k < 1 || (int64_t)a->top_k > x->sizes[1]) {
    return bpc_ref_reject(res, "moe_topk_softmax: logits [T, E], 1 <= top_k <= E");
  }
  int64_t T = x->sizes[0], E = x->sizes[1], k = a->top_k, s[2] = {T, k};
  uint32_t wd = x->dtype == BP_DTYPE_F64 ? BP_DTYPE_F64 : BP_DTYPE_F32;
  res->num_outputs = 2;
  res->compute_dtype = wd;
  bp_status_t st = bpc_expected_init(&res->out[0], wd, 2, s, 1);
  if (st == BP_OK) st = bpc_expected_init(&res->out[1], BP_DTYPE_I64, 2, s, 0);
  if (st != BP_OK) return st;
  for (int64_t t = 0; t < T; t++) {
    double m = -INFINITY, z = 0.0, sel = 0.0;
    for (int64_t e = 0; e < E; e++) m = fmax(m, ld(x, t * E + e));
    for (int64_t e = 0; e < E; e++) z += exp(ld(x, t * E + e) - m);
    for (int64_t r = 0; r < k; r++) {
      /* the r-th largest logit, ties by the lower id: count those before */
      int64_t best = -1;
      for (int64_t e = 0; e < E; e++) {
        int64_t rank = 0;
        for (int64_t f = 0; f < E; f++) {
          double lf = ld(x, t * E + f), le = ld(x, t * E + e);
          rank += lf > le || (lf == le && f < e);
        }
        if (rank == r) best = e;
      }
      res->out[1].i[t * k + r] = best;
      res->out[0].f[t * k + r] = exp(ld(x, t * E + best) - m) / z;
      sel += res->out[0].f[t * k + r];
    }
    for (int64_t r = 0; r < k; r++) {
      double p = res->out[0].f[t * k + r];
      if (a->renormalize) res->out[0].f[t * k + r] = p / sel;
      res->out[0].mag[t * k + r] = fabs(res->out[0].f[t * k + r]);
      res->out[0].nterms[t * k + r] = (double)E + 8.0 + 4.0 * (m - ld(x, t * E + res->out[1].i[t * k + r]));
    }
  }
  return BP_OK;
}

static const bpc_ref_group_t k_groups[] = {
    {ref_sample, BPC_ACC_EXACT, 0, BPC_OPS(BP_OP_sample), bpc_gen_sample, check_sample},
    {ref_penalty, BPC_ACC_DIVSQRT, 0, BPC_OPS(BP_OP_repetition_penalty), bpc_gen_penalty, NULL},
    {ref_kv_cache_append, BPC_ACC_EXACT, 0, BPC_OPS(BP_OP_kv_cache_append),
     bpc_gen_kv_cache_append, NULL},
    {ref_paged_attention, BPC_ACC_REDUCE, 0, BPC_OPS(BP_OP_paged_attention),
     bpc_gen_paged_attention, NULL},
    {ref_qkv_rotary, BPC_ACC_REDUCE, 0, BPC_OPS(BP_OP_qkv_rotary), bpc_gen_qkv_rotary, NULL},
    {ref_moe_topk, BPC_ACC_REDUCE, 0, BPC_OPS(BP_OP_moe_topk_softmax), bpc_gen_moe_topk, NULL},
};

const bpc_ref_family_t bpc_ref_family_serving = BPC_FAMILY(serving, k_groups);
