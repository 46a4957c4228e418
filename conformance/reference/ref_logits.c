/* References of the serving helpers of ABI 1.3 (docs/semantics.md,
 * "Logits processing" and "rotary_embedding_pos"):
 *
 * rotary_embedding_pos: fp64 rotation of the first R dims of every query
 *   and key head by the cache row of the token's position (REDUCE over the
 *   two products, with their magnitudes); dims past R are copied (exact).
 * logits_softcap: tanh(x / cap) * cap in long double, rounded to fp64
 *   (TRANS).
 * top_k_top_p_mask: the kept set of sample's rule at temperature 1 with
 *   min-p, in fp64. The checker (check_mask) wants every output either the
 *   input logit (kept) or -inf (masked); an element may go either way only
 *   where its own decision lies within rounding of a boundary: its mass
 *   above within 1e-5 + 1e-7 V of top_p * (the kept mass) (1e-9 for f64),
 *   or its weight within that margin of min_p. Top-k decisions compare
 *   logits only and are exact.
 * rejection_sample: check_rejection follows the device's output: each
 *   acceptance needs p / q >= u and each rejection p / q < u (either within
 *   1e-6, 1e-12 for f64, of the boundary), a rejected position the token
 *   whose CDF interval over max(p - q, 0) holds the second uniform (same
 *   margin of the mass), -1 after it, the bonus token after K acceptances;
 *   greedy: the argmax at each position.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../cases_internal.h"
#include "ref.h"

void bpc_gen_rope_pos(struct bpc_gen* g);
void bpc_gen_softcap(struct bpc_gen* g);
void bpc_gen_logits_mask(struct bpc_gen* g);
void bpc_gen_rejection(struct bpc_gen* g);

static int lg_float(uint32_t d) {
  return d == BP_DTYPE_F32 || d == BP_DTYPE_F64 || d == BP_DTYPE_F16 || d == BP_DTYPE_BF16;
}
static double ld(const bpc_host_tensor_t* t, int64_t i) { return bpc_load(t->dtype, t->data, i).f; }

/* ---- rotary_embedding_pos ------------------------------------------------------------ */

static bp_status_t ref_rope_pos(const bpc_case_t* c, const bpc_host_tensor_t* in, bpc_ref_result_t* res) {
  const bp_qkv_rotary_attrs_t* a = &c->attrs.qkv;
  const bpc_host_tensor_t *pos = &in[2], *cs = &in[3];
  if (!lg_float(in[0].dtype) || pos->rank != 1 || cs->rank != 2 || a->num_heads < 1 || a->num_kv_heads < 1)
    return bpc_ref_reject(res, "rotary_embedding_pos: query, key [T, heads * D], positions [T], cache [P, R]");
  int64_t T = pos->sizes[0], R = cs->sizes[1], half = R / 2;
  res->num_outputs = 2;
  res->compute_dtype = in[0].dtype == BP_DTYPE_F64 ? BP_DTYPE_F64 : BP_DTYPE_F32;
  for (int o = 0; o < 2; o++) {
    const bpc_host_tensor_t* x = &in[o];
    int64_t nh = o ? a->num_kv_heads : a->num_heads;
    int64_t D = x->rank == 3 ? x->sizes[2] : x->rank == 2 ? x->sizes[1] / nh : 0;
    if (R % 2 || R > D) return bpc_ref_reject(res, "rotary_embedding_pos: R even and <= head size");
    bp_status_t st = bpc_expected_init(&res->out[o], x->dtype, x->rank, x->sizes, 1);
    if (st != BP_OK) return st;
    bpc_expected_t* e = &res->out[o];
    for (int64_t t = 0; t < T; t++) {
      int64_t p = bpc_load(pos->dtype, pos->data, t).i;
      if (p < 0 || p >= cs->sizes[0]) return bpc_ref_reject(res, "a position outside the cache");
      for (int64_t h = 0; h < nh; h++) {
        int64_t base = (t * nh + h) * D;
        for (int64_t d = 0; d < D; d++) {
          e->f[base + d] = ld(x, base + d);
          e->mag[base + d] = fabs(e->f[base + d]);
          e->nterms[base + d] = 1.0;
        }
        for (int64_t i = 0; i < half; i++) {
          int64_t i1 = a->interleaved ? 2 * i : i, i2 = a->interleaved ? 2 * i + 1 : i + half;
          double cv = ld(cs, p * R + i), sv = ld(cs, p * R + half + i);
          double x1 = ld(x, base + i1), x2 = ld(x, base + i2);
          e->f[base + i1] = x1 * cv - x2 * sv;
          e->f[base + i2] = x2 * cv + x1 * sv;
          e->mag[base + i1] = fabs(x1 * cv) + fabs(x2 * sv);
          e->mag[base + i2] = fabs(x2 * cv) + fabs(x1 * sv);
          e->nterms[base + i1] = e->nterms[base + i2] = 2.0;
        }
      }
    }
  }
  return BP_OK;
}

/* ---- logits_softcap -------------------------------------------------------------------- */

static bp_status_t ref_softcap(const bpc_case_t* c, const bpc_host_tensor_t* in, bpc_ref_result_t* res) {
  const bpc_host_tensor_t* x = &in[0];
  double cap = c->attrs.softcap.cap;
  if (!lg_float(x->dtype) || x->rank == 0 || !(cap > 0.0) || !isfinite(cap))
    return bpc_ref_reject(res, "logits_softcap: floating logits [..., V], cap > 0");
  bp_status_t st = bpc_ref_single_output(res, x->dtype, x->rank, x->sizes, 0,
                                         x->dtype == BP_DTYPE_F64 ? BP_DTYPE_F64 : BP_DTYPE_F32);
  if (st != BP_OK) return st;
  /* long double: x / cap of a tiny f64 x stays normal (fp64 would lose its
   * bits to a subnormal quotient) */
  for (int64_t i = 0; i < x->numel; i++)
    res->out[0].f[i] = (double)(tanhl((long double)ld(x, i) / (long double)cap) * (long double)cap);
  return BP_OK;
}

/* ---- top_k_top_p_mask ------------------------------------------------------------------ */

/* The decision of each element of row l[0..V): 1 kept, 0 masked, 2 either
 * (within `margin` of a boundary). */
static void mask_row(const double* l, int64_t V, const bp_logits_mask_attrs_t* a, double margin, double* w,
                     uint8_t* keep) {
  double m = -INFINITY;
  int any = 0;
  for (int64_t i = 0; i < V; i++)
    if (l[i] == l[i] && (!any || l[i] > m)) m = l[i], any = 1;
  if (!any || m == -INFINITY) {
    for (int64_t i = 0; i < V; i++) keep[i] = 0;
    return;
  }
  /* top-k: l_i >= the k-th largest non-NaN logit (count those above) */
  for (int64_t i = 0; i < V; i++) {
    keep[i] = l[i] == l[i];
    if (keep[i] && a->top_k > 0) {
      int64_t above = 0;
      for (int64_t j = 0; j < V; j++) above += l[j] > l[i];
      keep[i] = above < (int64_t)a->top_k;
    }
    w[i] = !keep[i] ? 0.0 : l[i] == m ? 1.0 : exp(l[i] - m);
    if (keep[i] && a->min_p > 0.0 && w[i] < a->min_p) keep[i] = fabs(w[i] - a->min_p) <= margin ? 2 : 0;
    if (!keep[i]) w[i] = 0.0;
  }
  if (!(a->top_p > 0.0 && a->top_p < 1.0)) return;
  double z = 0.0;
  for (int64_t i = 0; i < V; i++) z += w[i];
  for (int64_t i = 0; i < V; i++) {
    if (!keep[i]) continue;
    double above = 0.0;
    for (int64_t j = 0; j < V; j++)
      if (keep[j] && l[j] > l[i]) above += w[j];
    double d = above - a->top_p * z;
    if (fabs(d) <= margin * z) keep[i] = 2;
    else if (d > 0) keep[i] = keep[i] == 2 ? 2 : 0;
  }
}

static bp_status_t ref_mask(const bpc_case_t* c, const bpc_host_tensor_t* in, bpc_ref_result_t* res) {
  const bpc_host_tensor_t* x = &in[0];
  const bp_logits_mask_attrs_t* a = &c->attrs.logits_mask;
  if (!lg_float(x->dtype) || x->rank == 0 || x->sizes[x->rank - 1] < 1)
    return bpc_ref_reject(res, "top_k_top_p_mask: floating logits [..., V >= 1]");
  if (!(a->top_p >= 0.0 && a->top_p <= 1.0) || !(a->min_p >= 0.0 && a->min_p <= 1.0))
    return bpc_ref_reject(res, "top_p and min_p in [0, 1]");
  res->compute_dtype = x->dtype == BP_DTYPE_F64 ? BP_DTYPE_F64 : BP_DTYPE_F32;
  return bpc_ref_single_output(res, x->dtype, x->rank, x->sizes, 0, res->compute_dtype); /* check_mask */
}

static void check_mask(const bpc_case_t* c, const bpc_host_tensor_t* in, const bpc_ref_result_t* ref,
                       const void* const* got, const bpc_tolerance_t* tol, bpc_check_t* out) {
  (void)ref, (void)tol;
  const bpc_host_tensor_t* x = &in[0];
  int64_t V = x->sizes[x->rank - 1], rows = V > 0 ? x->numel / V : 0;
  double margin = x->dtype == BP_DTYPE_F64 ? 1e-9 : 1e-5 + 1e-7 * (double)V;
  memset(out, 0, sizeof *out);
  out->worst_index = -1;
  out->max_ulps = -1;
  double* l = malloc(sizeof(double) * 2 * (size_t)V);
  uint8_t* keep = malloc((size_t)V);
  if (!l || !keep) {
    free(l), free(keep);
    out->status = BPC_FAIL;
    snprintf(out->message, sizeof out->message, "out of host memory");
    return;
  }
  for (int64_t r = 0; r < rows; r++) {
    for (int64_t i = 0; i < V; i++) l[i] = ld(x, r * V + i);
    mask_row(l, V, &c->attrs.logits_mask, margin, l + V, keep);
    for (int64_t i = 0; i < V; i++) {
      double g = bpc_load(x->dtype, got[0], r * V + i).f;
      int kept = g == l[i], masked = g == -INFINITY;
      int ok = keep[i] == 2 ? kept || masked : keep[i] ? kept : masked;
      if (ok) continue;
      out->mismatches++;
      if (out->worst_index < 0) {
        out->worst_index = r * V + i;
        snprintf(out->message, sizeof out->message,
                 "row %lld, logit %lld = %.9g: got %.9g, expected %s", (long long)r, (long long)i, l[i], g,
                 keep[i] ? "the logit (kept)" : "-inf (masked)");
      }
    }
  }
  out->status = out->mismatches ? BPC_FAIL : BPC_PASS;
  free(l), free(keep);
}

/* ---- rejection_sample ------------------------------------------------------------- */

static bp_status_t ref_rejection(const bpc_case_t* c, const bpc_host_tensor_t* in, bpc_ref_result_t* res) {
  const bpc_host_tensor_t *d = &in[0], *t = &in[1];
  if (d->rank != 2 || t->rank != 3 || !lg_float(t->dtype) || t->sizes[2] < 1)
    return bpc_ref_reject(res, "rejection_sample: drafts [B, K], target_probs [B, K, V]");
  for (int64_t k = 0; k < d->numel; k++) {
    int64_t id = bpc_load(d->dtype, d->data, k).i;
    if (id < 0 || id >= t->sizes[2]) return bpc_ref_reject(res, "a draft token outside the vocabulary");
  }
  (void)c;
  int64_t os[2] = {d->sizes[0], d->sizes[1] + 1};
  return bpc_ref_single_output(res, BP_DTYPE_I64, 2, os, 0, BP_DTYPE_F64); /* check_rejection */
}

/* Row i of sequence b of a [B, K, V] tensor as doubles. */
static void rej_row(const bpc_host_tensor_t* t, int64_t b, int64_t i, double* out) {
  int64_t K = t->sizes[1], V = t->sizes[2];
  for (int64_t j = 0; j < V; j++) out[j] = ld(t, (b * K + i) * V + j);
}

/* Whether the device's token g at position i of sequence b is a valid
 * recovered token (rejection there): inside the CDF interval of u2 over
 * max(p - q, 0) within `margin` of the total, or the argmax when that is 0. */
static int rej_recovered_ok(const double* p, const double* q, int64_t V, int64_t d, double u2, double margin,
                            int64_t g) {
  double total = 0.0, before = 0.0;
  for (int64_t j = 0; j < V; j++) {
    double r = q ? p[j] - q[j] : j == d ? 0.0 : p[j];
    r = r > 0.0 ? r : 0.0;
    if (j < g) before += r;
    total += r;
  }
  if (g < 0 || g >= V) return 0;
  if (!(total > 0.0)) {
    int64_t am = 0;
    for (int64_t j = 1; j < V; j++)
      if (p[j] > p[am]) am = j;
    return g == am;
  }
  double rg = q ? p[g] - q[g] : g == d ? 0.0 : p[g];
  if (!(rg > 0.0)) return 0;
  double target = u2 * total;
  return before <= target + margin * total && before + rg >= target - margin * total;
}

static void check_rejection(const bpc_case_t* c, const bpc_host_tensor_t* in, const bpc_ref_result_t* ref,
                            const void* const* got, const bpc_tolerance_t* tol, bpc_check_t* out) {
  (void)ref, (void)tol;
  const bp_rejection_attrs_t* a = &c->attrs.rejection;
  const bpc_host_tensor_t *dr = &in[0], *t = &in[1], *bonus = &in[2], *qt = &in[3];
  int64_t B = dr->sizes[0], K = dr->sizes[1], V = t->sizes[2];
  double margin = t->dtype == BP_DTYPE_F64 ? 1e-12 : 1e-6;
  const int64_t* o = got[0];
  memset(out, 0, sizeof *out);
  out->worst_index = -1;
  out->max_ulps = -1;
  double* p = malloc(sizeof(double) * 2 * (size_t)V);
  if (!p) {
    out->status = BPC_FAIL;
    snprintf(out->message, sizeof out->message, "out of host memory");
    return;
  }
  double* q = qt->dtype != BP_DTYPE_INVALID ? p + V : NULL;
  for (int64_t b = 0; b < B && !out->mismatches; b++) {
    const int64_t* ob = o + b * (K + 1);
    const char* why = NULL;
    int64_t i = 0;
    for (; i < K && !why; i++) {
      int64_t d = bpc_load(dr->dtype, dr->data, b * K + i).i, g = ob[i];
      rej_row(t, b, i, p);
      if (q) rej_row(qt, b, i, q);
      int next_kept = ob[i + 1] != -1;
      if (a->greedy) {
        int64_t am = 0;
        for (int64_t j = 1; j < V; j++)
          if (p[j] > p[am]) am = j;
        if (g != am) why = "not the target's argmax";
        else if (am != d) break;
        continue;
      }
      double qd = q ? q[d] : 1.0, u = (double)(bpc_philox_word(a->seed, a->offset, (uint64_t)(2 * K * b + 2 * i)) >> 8) * 0x1p-24;
      double ratio = qd > 0.0 ? p[d] / qd : -INFINITY;
      int may_accept = qd > 0.0 && ratio >= u - margin, may_reject = !(qd > 0.0) || ratio < u + margin;
      if (g == d && next_kept && may_accept) continue; /* accepted */
      double u2 = (double)(bpc_philox_word(a->seed, a->offset, (uint64_t)(2 * K * b + 2 * i + 1)) >> 8) * 0x1p-24;
      if (!may_reject) why = "a rejection where p / q >= u";
      else if (!rej_recovered_ok(p, q, V, d, u2, margin, g)) why = "not the recovered token of the row's uniform";
      else break;
    }
    if (!why && i == K && ob[K] != bpc_load(bonus->dtype, bonus->data, b).i) why = "the bonus token expected";
    for (int64_t k = i + 1; !why && k <= K; k++)
      if (ob[k] != -1) why = "-1 expected after a rejection";
    if (why) {
      out->mismatches++;
      out->worst_index = b;
      snprintf(out->message, sizeof out->message, "sequence %lld, position %lld: got %lld, %s", (long long)b,
               (long long)(i < K ? i : K), (long long)ob[i < K ? i : K], why);
    }
  }
  out->status = out->mismatches ? BPC_FAIL : BPC_PASS;
  free(p);
}

static const bpc_ref_group_t k_groups[] = {
    {ref_rope_pos, BPC_ACC_REDUCE, 0, BPC_OPS(BP_OP_rotary_embedding_pos), bpc_gen_rope_pos, NULL},
    {ref_softcap, BPC_ACC_TRANS, BPC_OPF_SIGNED_ZERO, BPC_OPS(BP_OP_logits_softcap), bpc_gen_softcap, NULL},
    {ref_mask, BPC_ACC_EXACT, 0, BPC_OPS(BP_OP_top_k_top_p_mask), bpc_gen_logits_mask, check_mask},
    {ref_rejection, BPC_ACC_EXACT, 0, BPC_OPS(BP_OP_rejection_sample), bpc_gen_rejection, check_rejection},
};

const bpc_ref_family_t bpc_ref_family_logits = BPC_FAMILY(logits, k_groups);
