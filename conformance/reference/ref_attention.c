/* References of the attention family: scaled_dot_product_attention, linear,
 * rotary_embedding, cdist and pdist. Plain fp64 loops over dense inputs,
 * written as the definitions (docs/semantics.md):
 *
 *   sdpa     s_j = scale * q . k_j (+ additive mask), masked keys (causal
 *            j > i, bool mask false, score -inf) do not take part;
 *            out = sum_j softmax(s)_j v_j; a row with every key masked is 0;
 *   linear   out = act(input @ weight^T + bias);
 *   rotary   out = x * cos + rotate(x) * sin (rotate-half or GPT-J pairs);
 *   cdist    out[.., i, j] = ||x1_i - x2_j||_p, pdist the pairs i < j.
 *
 * Every floating output element records a magnitude (mag) and a term count
 * (nterms) for the REDUCE-class bound c * nterms * u * mag: the sum of the
 * |terms| and the conditioning of the formula (softmax: the scores' size,
 * the euclidean mm path of cdist: its cancellation).
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ref.h"

void bpc_gen_sdpa(struct bpc_gen* g);
void bpc_gen_linear(struct bpc_gen* g);
void bpc_gen_rotary(struct bpc_gen* g);
void bpc_gen_dist(struct bpc_gen* g);

static int is_float4(uint32_t d) {
  return d == BP_DTYPE_F32 || d == BP_DTYPE_F64 || d == BP_DTYPE_F16 || d == BP_DTYPE_BF16;
}

/* Unit roundoff of the compute dtype: f16 / bf16 compute in f32. */
static double unit_roundoff(uint32_t d) { return d == BP_DTYPE_F64 ? 0x1.0p-53 : 0x1.0p-24; }

static double ld(const bpc_host_tensor_t* t, int64_t i) { return bpc_load(t->dtype, t->data, i).f; }

static int same_shape(const bpc_host_tensor_t* a, const bpc_host_tensor_t* b) {
  return a->rank == b->rank && memcmp(a->sizes, b->sizes, sizeof(int64_t) * a->rank) == 0;
}

/* Dense index in t of the batch multi-index idx (rank br) followed by the
 * trailing `tail` indices in tidx: t's dims align right, size-1 dims
 * broadcast; at batch dim gdim (-1: none) a smaller size s takes idx / (B / s)
 * (grouped-query heads). */
static int64_t bidx(const bpc_host_tensor_t* t, uint32_t br, const int64_t* bsz, const int64_t* idx,
                    uint32_t tail, const int64_t* tidx, int gdim) {
  int64_t lin = 0;
  uint32_t tb = t->rank > tail ? t->rank - tail : 0;
  uint32_t tt = t->rank - tb; /* trailing dims t has (<= tail) */
  for (uint32_t d = 0; d < tb; d++) {
    uint32_t bd = d + br - tb;
    int64_t s = t->sizes[d], k = s == 1 ? 0 : idx[bd];
    if ((int)bd == gdim && s != bsz[bd] && s != 1) k = idx[bd] / (bsz[bd] / s);
    lin = lin * s + k;
  }
  for (uint32_t d = 0; d < tt; d++) {
    int64_t s = t->sizes[tb + d];
    lin = lin * s + (s == 1 ? 0 : tidx[tail - tt + d]);
  }
  return lin;
}

/* Broadcast batch dims (all but the last `tail`) of the present tensors of
 * ts; with gqa the last batch dim is ts[0]'s and the others must divide it. */
static bp_status_t batch_shape(const bpc_host_tensor_t* const* ts, uint32_t n, uint32_t tail, int gqa,
                               uint32_t* br, int64_t* bsz, bpc_ref_result_t* res) {
  uint32_t r = 0;
  for (uint32_t i = 0; i < n; i++)
    if (ts[i]->rank - tail > r) r = ts[i]->rank - tail;
  for (uint32_t k = 0; k < r; k++) {
    int64_t s = 1;
    for (uint32_t i = 0; i < n; i++) {
      uint32_t tb = ts[i]->rank - tail;
      if (k + tb < r) continue;
      int64_t v = ts[i]->sizes[k + tb - r];
      if (gqa && k + 1 == r) {
        if (i == 0) s = v;
        continue;
      }
      if (v == 1) continue;
      if (s != 1 && s != v) return bpc_ref_reject(res, "batch dims do not broadcast");
      s = v;
    }
    bsz[k] = s;
  }
  if (gqa && r > 0) {
    for (uint32_t i = 1; i < n; i++) {
      int64_t h = ts[i]->sizes[ts[i]->rank - tail - 1];
      if (!(h == bsz[r - 1] || h == 1 || (h > 0 && bsz[r - 1] % h == 0)))
        return bpc_ref_reject(res, "enable_gqa: heads do not divide");
    }
  }
  *br = r;
  return BP_OK;
}

/* ---- scaled_dot_product_attention ---------------------------------------------- */
static bp_status_t ref_sdpa(const bpc_case_t* c, const bpc_host_tensor_t* in, bpc_ref_result_t* res) {
  const bp_sdpa_attrs_t* a = &c->attrs.sdpa;
  const bpc_host_tensor_t *q = &in[0], *k = &in[1], *v = &in[2];
  const bpc_host_tensor_t* m = c->num_inputs > 3 && in[3].dtype != BP_DTYPE_INVALID ? &in[3] : NULL;
  uint32_t d = q->dtype;
  uint32_t minr = a->enable_gqa ? 3 : 2;
  if (!is_float4(d) || k->dtype != d || v->dtype != d) return bpc_ref_reject(res, "sdpa: q, k, v share a floating dtype");
  if (q->rank < minr || k->rank < minr || v->rank < minr) return bpc_ref_reject(res, "sdpa: ranks too small");
  int64_t L = q->sizes[q->rank - 2], E = q->sizes[q->rank - 1], S = k->sizes[k->rank - 2];
  int64_t Ev = v->sizes[v->rank - 1];
  if (k->sizes[k->rank - 1] != E || v->sizes[v->rank - 2] != S) return bpc_ref_reject(res, "sdpa: shapes");
  if (m && m->dtype != BP_DTYPE_BOOL && m->dtype != d) return bpc_ref_reject(res, "sdpa: mask dtype");
  if (m && a->is_causal) return bpc_ref_reject(res, "sdpa: mask with is_causal");
  const bpc_host_tensor_t* ts[3] = {q, k, v};
  uint32_t br = 0;
  int64_t sizes[BP_MAX_RANK];
  bp_status_t st = batch_shape(ts, 3, 2, a->enable_gqa != 0, &br, sizes, res);
  if (st != BP_OK) return st;
  if (m) { /* broadcastable to [batch..., L, S] */
    int64_t want[BP_MAX_RANK];
    memcpy(want, sizes, sizeof(int64_t) * br);
    want[br] = L;
    want[br + 1] = S;
    if (m->rank > br + 2) return bpc_ref_reject(res, "sdpa: mask rank");
    for (uint32_t i = 0; i < m->rank; i++)
      if (m->sizes[i] != 1 && m->sizes[i] != want[br + 2 - m->rank + i])
        return bpc_ref_reject(res, "sdpa: mask does not broadcast");
  }
  sizes[br] = L;
  sizes[br + 1] = Ev;
  st = bpc_ref_single_output(res, d, br + 2, sizes, 1, d == BP_DTYPE_F64 ? d : BP_DTYPE_F32);
  if (st != BP_OK) return st;
  bpc_expected_t* e = &res->out[0];
  double scale = a->scale != 0 ? a->scale : 1.0 / sqrt((double)E);
  int gdim = a->enable_gqa ? (int)br - 1 : -1;
  int64_t nb = 1, idx[BP_MAX_RANK] = {0};
  for (uint32_t i = 0; i < br; i++) nb *= sizes[i];
  double* s = malloc(sizeof(double) * (size_t)(2 * S + 1));
  if (!s) return BP_RESOURCE_EXHAUSTED;
  double* amag = s + S;
  for (int64_t b = 0; b < nb; b++, bpc_next_index(br, sizes, idx)) {
    for (int64_t i = 0; i < L; i++) {
      /* scores, their magnitudes, and the row maximum over unmasked keys */
      double mx = -INFINITY, amax = 0.0;
      int row_nan = 0;
      for (int64_t j = 0; j < S; j++) {
        double dot = 0.0, mag = 0.0;
        for (int64_t x = 0; x < E; x++) {
          int64_t tq[2] = {i, x}, tk[2] = {j, x};
          double t = ld(q, bidx(q, br, sizes, idx, 2, tq, -1)) * ld(k, bidx(k, br, sizes, idx, 2, tk, gdim));
          dot += t;
          mag += fabs(t);
        }
        s[j] = E > 0 ? scale * dot : 0.0; /* an empty dot product scores 0 */
        amag[j] = fabs(scale) * mag;
        if (a->is_causal && j > i) s[j] = -INFINITY;
        if (m) {
          int64_t tm[2] = {i, j};
          double mv = ld(m, bidx(m, br, sizes, idx, 2, tm, -1));
          if (m->dtype == BP_DTYPE_BOOL) {
            if (mv == 0.0) s[j] = -INFINITY;
          } else {
            s[j] += mv;
            amag[j] += fabs(mv);
          }
        }
        if (isnan(s[j])) row_nan = 1;
        if (s[j] > mx) mx = s[j];
        if (s[j] != -INFINITY && isfinite(amag[j]) && amag[j] > amax) amax = amag[j];
      }
      double l = 0.0;
      for (int64_t j = 0; j < S && mx != -INFINITY; j++) l += s[j] == -INFINITY ? 0.0 : exp(s[j] - mx);
      for (int64_t cc = 0; cc < Ev; cc++) {
        int64_t oi[BP_MAX_RANK];
        memcpy(oi, idx, sizeof(int64_t) * br);
        oi[br] = i;
        oi[br + 1] = cc;
        int64_t lin = 0;
        for (uint32_t dd = 0; dd < br + 2; dd++) lin = lin * sizes[dd] + oi[dd];
        double acc = 0.0, mag = 0.0;
        if (row_nan) {
          acc = NAN;
        } else if (mx != -INFINITY) {
          for (int64_t j = 0; j < S; j++) {
            if (s[j] == -INFINITY) continue; /* masked keys do not take part */
            int64_t tv[2] = {j, cc};
            double p = exp(s[j] - mx) / l, val = ld(v, bidx(v, br, sizes, idx, 2, tv, gdim));
            acc += p * val;
            mag += fabs(p * val);
          }
        }
        e->f[lin] = acc;
        e->mag[lin] = mag;
        /* S terms of the weighted sum; score errors of (E + 2) u |score|
         * scale every weight by up to twice that. */
        e->nterms[lin] = (double)S + 8.0 + 4.0 * (double)(E + 2) * amax;
      }
    }
  }
  free(s);
  return BP_OK;
}

/* ---- linear ---------------------------------------------------------------------- */
static double act(uint32_t a, double x) {
  switch (a) {
    case BP_ACTIVATION_RELU: return x < 0 ? 0.0 : x;
    case BP_ACTIVATION_GELU_ERF: return 0.5 * x * (1.0 + erf(x / sqrt(2.0)));
    case BP_ACTIVATION_GELU_TANH:
      return 0.5 * x * (1.0 + tanh(sqrt(2.0 / M_PI) * (x + 0.044715 * x * x * x)));
    case BP_ACTIVATION_SILU: return x / (1.0 + exp(-x));
    case BP_ACTIVATION_SIGMOID: return 1.0 / (1.0 + exp(-x));
    case BP_ACTIVATION_TANH: return tanh(x);
    default: return x;
  }
}

static bp_status_t ref_linear(const bpc_case_t* c, const bpc_host_tensor_t* in, bpc_ref_result_t* res) {
  const bpc_host_tensor_t *x = &in[0], *w = &in[1];
  const bpc_host_tensor_t* b = c->num_inputs > 2 && in[2].dtype != BP_DTYPE_INVALID ? &in[2] : NULL;
  uint32_t d = x->dtype, an = c->attrs.linear.activation;
  int fl = is_float4(d);
  if (!fl && !bpc_dtype_is_int(d)) return bpc_ref_reject(res, "linear: dtype");
  if (w->dtype != d || (b && b->dtype != d)) return bpc_ref_reject(res, "linear: one dtype");
  if (!fl && an != BP_ACTIVATION_NONE && an != BP_ACTIVATION_RELU) return bpc_ref_reject(res, "linear: int activation");
  if (x->rank < 1 || w->rank != 2 || x->sizes[x->rank - 1] != w->sizes[1]) return bpc_ref_reject(res, "linear: shapes");
  int64_t K = w->sizes[1], N = w->sizes[0], sizes[BP_MAX_RANK];
  memcpy(sizes, x->sizes, sizeof(int64_t) * x->rank);
  sizes[x->rank - 1] = N;
  if (b) {
    if (b->rank > x->rank) return bpc_ref_reject(res, "linear: bias rank");
    for (uint32_t i = 0; i < b->rank; i++)
      if (b->sizes[i] != 1 && b->sizes[i] != sizes[x->rank - b->rank + i]) return bpc_ref_reject(res, "linear: bias");
  }
  bp_status_t st = bpc_ref_single_output(res, d, x->rank, sizes, 1, d);
  if (st != BP_OK) return st;
  bpc_expected_t* e = &res->out[0];
  int64_t idx[BP_MAX_RANK] = {0};
  for (int64_t lin = 0; lin < e->numel; lin++, bpc_next_index(x->rank, sizes, idx)) {
    int64_t row = lin / N, n = idx[x->rank - 1];
    double acc = 0.0, mag = 0.0;
    uint64_t iacc = 0;
    for (int64_t kk = 0; kk < K; kk++) {
      bpc_num_t xv = bpc_load(d, x->data, row * K + kk), wv = bpc_load(d, w->data, n * K + kk);
      acc += xv.f * wv.f;
      mag += fabs(xv.f * wv.f);
      iacc += (uint64_t)xv.i * (uint64_t)wv.i;
    }
    if (b) {
      bpc_num_t bv = bpc_load(d, b->data, bpc_broadcast_index(b, x->rank, idx));
      acc += bv.f;
      mag += fabs(bv.f);
      iacc += (uint64_t)bv.i;
    }
    if (!fl) {
      int64_t y = bpc_wrap_int((int64_t)iacc, d);
      e->i[lin] = an == BP_ACTIVATION_RELU && y < 0 ? 0 : y;
      continue;
    }
    double y = act(an, acc);
    e->f[lin] = y;
    /* |act'| <= 1.2 for every activation; the activation's own rounding is
     * a few ulps of its result. */
    e->mag[lin] = 1.2 * mag + fabs(y);
    e->nterms[lin] = (double)K + 9.0;
  }
  return BP_OK;
}

/* ---- rotary_embedding ------------------------------------------------------------- */
static bp_status_t ref_rotary(const bpc_case_t* c, const bpc_host_tensor_t* in, bpc_ref_result_t* res) {
  const bpc_host_tensor_t *x = &in[0], *cs = &in[1], *sn = &in[2];
  uint32_t d = x->dtype;
  if (!is_float4(d) || cs->dtype != d || sn->dtype != d) return bpc_ref_reject(res, "rotary: one floating dtype");
  if (x->rank < 1 || cs->rank < 1 || cs->rank > x->rank || !same_shape(cs, sn))
    return bpc_ref_reject(res, "rotary: shapes");
  int64_t D = x->sizes[x->rank - 1], t = cs->sizes[cs->rank - 1], half = D / 2;
  if (D % 2 || (t != D && t != half)) return bpc_ref_reject(res, "rotary: table width");
  for (uint32_t i = 0; i + 1 < cs->rank; i++)
    if (cs->sizes[i] != 1 && cs->sizes[i] != x->sizes[x->rank - cs->rank + i]) return bpc_ref_reject(res, "rotary: broadcast");
  bp_status_t st = bpc_ref_single_output(res, d, x->rank, x->sizes, 1, d == BP_DTYPE_F64 ? d : BP_DTYPE_F32);
  if (st != BP_OK) return st;
  bpc_expected_t* e = &res->out[0];
  int il = c->attrs.rotary.interleaved != 0;
  int64_t idx[BP_MAX_RANK] = {0};
  for (int64_t lin = 0; lin < e->numel; lin++, bpc_next_index(x->rank, x->sizes, idx)) {
    int64_t pos = idx[x->rank - 1];
    /* pair index i and whether this element is the first of its pair */
    int64_t i = il ? pos / 2 : pos % half;
    int first = il ? pos % 2 == 0 : pos < half;
    int64_t p1 = il ? 2 * i : i, p2 = il ? 2 * i + 1 : i + half;
    int64_t tab = t == D ? pos : i; /* the table entry of this element */
    int64_t ti[BP_MAX_RANK];
    memcpy(ti, idx, sizeof ti);
    ti[x->rank - 1] = tab;
    double cv = ld(cs, bpc_broadcast_index(cs, x->rank, ti)), sv = ld(sn, bpc_broadcast_index(sn, x->rank, ti));
    double x1 = ld(x, lin - pos + p1), x2 = ld(x, lin - pos + p2);
    double a1 = first ? x1 * cv : x2 * cv, a2 = first ? -x2 * sv : x1 * sv;
    e->f[lin] = a1 + a2;
    e->mag[lin] = fabs(a1) + fabs(a2);
    e->nterms[lin] = 3.0;
  }
  return BP_OK;
}

/* ---- cdist, pdist -------------------------------------------------------------------- */
static double dist(const bpc_host_tensor_t* t1, int64_t o1, const bpc_host_tensor_t* t2, int64_t o2,
                   int64_t M, double p, double* sq1, double* sq2) {
  double acc = 0.0;
  *sq1 = *sq2 = 0.0;
  for (int64_t i = 0; i < M; i++) {
    double a = ld(t1, o1 + i), b = ld(t2, o2 + i), df = fabs(a - b);
    *sq1 += a * a;
    *sq2 += b * b;
    if (p == 0.0) acc += a - b != 0.0;
    else if (isinf(p)) acc = (isnan(df) || isnan(acc)) ? NAN : (df > acc ? df : acc);
    else acc += pow(df, p);
  }
  if (p != 0.0 && !isinf(p) && p != 1.0) acc = pow(acc, 1.0 / p);
  return acc;
}

/* Fills one distance: value and bound data. mm: the euclidean mm path. */
static void put_dist(bpc_expected_t* e, int64_t lin, double dv, double sq, int64_t M, double p, int mm,
                     double u) {
  e->f[lin] = dv;
  if (p == 0.0) return; /* a count: exact */
  if (mm) {
    /* |a|^2 + |b|^2 - 2 a.b loses (M + 2) u (|a|^2 + |b|^2) twice over;
     * the root turns an error err of d^2 into err / (d + sqrt(err)); the
     * clamp to 1e-30 adds 1e-15. Expressed as c * n * u * mag with n = 1. */
    double err = 2.0 * (double)(M + 2) * u * sq;
    double derr = (isfinite(dv) ? err / (dv + sqrt(err)) : 0.0) + 1e-15;
    e->mag[lin] = 4.0 * derr / (2.0 * u) + dv;
    e->nterms[lin] = 1.0;
    return;
  }
  e->mag[lin] = dv;
  e->nterms[lin] = ((double)M + 4.0) * (p < 1.0 ? 1.0 / p : 1.0) + 4.0;
}

static bp_status_t ref_dist(const bpc_case_t* c, const bpc_host_tensor_t* in, bpc_ref_result_t* res) {
  const bp_cdist_attrs_t* a = &c->attrs.cdist;
  int is_cdist = c->op_id == BP_OP_cdist;
  const bpc_host_tensor_t *x1 = &in[0], *x2 = is_cdist ? &in[1] : &in[0];
  uint32_t d = x1->dtype;
  double p = a->p, u = unit_roundoff(d);
  if (!is_float4(d) || x2->dtype != d) return bpc_ref_reject(res, "dist: one floating dtype");
  if (!(p >= 0.0)) return bpc_ref_reject(res, "dist: p < 0");
  if (!is_cdist) {
    if (x1->rank != 2) return bpc_ref_reject(res, "pdist: 2-d input");
    int64_t N = x1->sizes[0], M = x1->sizes[1], pairs = N > 1 ? N * (N - 1) / 2 : 0;
    bp_status_t st = bpc_ref_single_output(res, d, 1, &pairs, 1, d == BP_DTYPE_F64 ? d : BP_DTYPE_F32);
    if (st != BP_OK) return st;
    int64_t lin = 0;
    for (int64_t i = 0; i < N; i++)
      for (int64_t j = i + 1; j < N; j++, lin++) {
        double s1, s2, dv = dist(x1, i * M, x1, j * M, M, p, &s1, &s2);
        put_dist(&res->out[0], lin, dv, s1 + s2, M, p, 0, u);
      }
    return BP_OK;
  }
  if (x1->rank < 2 || x2->rank < 2 || x1->sizes[x1->rank - 1] != x2->sizes[x2->rank - 1])
    return bpc_ref_reject(res, "cdist: shapes");
  if (a->compute_mode < 0 || a->compute_mode > 2) return bpc_ref_reject(res, "cdist: compute_mode");
  const bpc_host_tensor_t* ts[2] = {x1, x2};
  uint32_t br = 0;
  int64_t sizes[BP_MAX_RANK];
  bp_status_t st = batch_shape(ts, 2, 2, 0, &br, sizes, res);
  if (st != BP_OK) return st;
  int64_t P = x1->sizes[x1->rank - 2], R = x2->sizes[x2->rank - 2], M = x1->sizes[x1->rank - 1];
  sizes[br] = P;
  sizes[br + 1] = R;
  st = bpc_ref_single_output(res, d, br + 2, sizes, 1, d == BP_DTYPE_F64 ? d : BP_DTYPE_F32);
  if (st != BP_OK) return st;
  int mm = p == 2.0 && (a->compute_mode == 1 || (a->compute_mode == 0 && (P > 25 || R > 25)));
  int64_t nb = 1, idx[BP_MAX_RANK] = {0};
  for (uint32_t i = 0; i < br; i++) nb *= sizes[i];
  int64_t lin = 0;
  for (int64_t b = 0; b < nb; b++, bpc_next_index(br, sizes, idx))
    for (int64_t i = 0; i < P; i++)
      for (int64_t j = 0; j < R; j++, lin++) {
        int64_t t1[2] = {i, 0}, t2[2] = {j, 0};
        double s1, s2;
        double dv = dist(x1, bidx(x1, br, sizes, idx, 2, t1, -1), x2, bidx(x2, br, sizes, idx, 2, t2, -1),
                         M, p, &s1, &s2);
        put_dist(&res->out[0], lin, dv, s1 + s2, M, p, mm, u);
      }
  return BP_OK;
}

static const bpc_ref_group_t k_groups[] = {
    {ref_sdpa, BPC_ACC_REDUCE, 0, BPC_OPS(BP_OP_scaled_dot_product_attention), bpc_gen_sdpa, NULL},
    {ref_linear, BPC_ACC_REDUCE, 0, BPC_OPS(BP_OP_linear), bpc_gen_linear, NULL},
    {ref_rotary, BPC_ACC_REDUCE, 0, BPC_OPS(BP_OP_rotary_embedding), bpc_gen_rotary, NULL},
    {ref_dist, BPC_ACC_REDUCE, 0, BPC_OPS(BP_OP_cdist, BP_OP_pdist), bpc_gen_dist, NULL},
};

const bpc_ref_family_t bpc_ref_family_attention = BPC_FAMILY(attention, k_groups);
