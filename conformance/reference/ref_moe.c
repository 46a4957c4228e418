/* References of the mixture-of-experts dispatch ops: moe_permute,
 * moe_unpermute and grouped_mm (family MOE), written as the definitions of
 * docs/semantics.md ("Mixture of experts") in fp64.
 *
 * moe_permute is data movement (exact, signed zeros kept); moe_unpermute is
 * a weighted sum of k rows (class REDUCE over k terms); grouped_mm is a
 * matmul per expert (class REDUCE over K + 1 terms, bias included) over the
 * float weights or the dequantized int8 / int4 codes.
 * Rows outside every expert's range are zero in both permuted and
 * grouped_mm outputs.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ref.h"

void bpc_gen_moe_permute(struct bpc_gen* g);
void bpc_gen_moe_unpermute(struct bpc_gen* g);
void bpc_gen_grouped_mm(struct bpc_gen* g);

static int is_index(uint32_t d) { return d == BP_DTYPE_I32 || d == BP_DTYPE_I64; }
static double ld(const bpc_host_tensor_t* t, int64_t i) { return bpc_load(t->dtype, t->data, i).f; }
static int64_t li(const bpc_host_tensor_t* t, int64_t i) { return bpc_load(t->dtype, t->data, i).i; }

/* ---- moe_permute ------------------------------------------------------------------- */

static bp_status_t ref_moe_permute(const bpc_case_t* c, const bpc_host_tensor_t* in,
                                   bpc_ref_result_t* res) {
  const bpc_host_tensor_t *h = &in[0], *ids = &in[1];
  int64_t E = c->attrs.moe_permute.num_experts;
  if (h->rank != 2 || ids->rank != 2 || !is_index(ids->dtype) || E < 1 ||
      ids->sizes[0] != h->sizes[0]) {
    return bpc_ref_reject(res, "moe_permute: hidden [T, H], ids [T, k], num_experts >= 1");
  }
  int64_t T = h->sizes[0], H = h->sizes[1], k = ids->sizes[1], N = T * k;
  int64_t ps[2] = {N, H}, os[1] = {E + 1};
  res->num_outputs = 3;
  res->compute_dtype = h->dtype;
  bp_status_t st = bpc_expected_init(&res->out[0], h->dtype, 2, ps, 0);
  if (st == BP_OK) st = bpc_expected_init(&res->out[1], BP_DTYPE_I64, 1, os, 0);
  if (st == BP_OK) st = bpc_expected_init(&res->out[2], BP_DTYPE_I64, 2, ids->sizes, 0);
  if (st != BP_OK) return st;
  bpc_expected_t *p = &res->out[0], *off = &res->out[1], *inv = &res->out[2];
  int64_t row = 0;
  for (int64_t e = 0; e < E; e++) {
    off->i[e] = row;
    for (int64_t j = 0; j < N; j++) { /* within an expert: (token, slot) order */
      if (li(ids, j) != e) continue;
      inv->i[j] = row;
      for (int64_t x = 0; x < H; x++) p->f[row * H + x] = ld(h, (j / k) * H + x);
      row++;
    }
  }
  off->i[E] = row;
  for (int64_t j = 0; j < N; j++) {
    if (li(ids, j) < 0 || li(ids, j) >= E) inv->i[j] = -1;
  }
  return BP_OK; /* rows past off[E] stay zero (calloc) */
}

/* ---- moe_unpermute ----------------------------------------------------------------- */

static bp_status_t ref_moe_unpermute(const bpc_case_t* c, const bpc_host_tensor_t* in,
                                     bpc_ref_result_t* res) {
  const bpc_host_tensor_t *p = &in[0], *inv = &in[1];
  const bpc_host_tensor_t* w = c->num_inputs > 2 && in[2].dtype != BP_DTYPE_INVALID ? &in[2] : NULL;
  if (p->rank != 2 || inv->rank != 2 || !is_index(inv->dtype)) {
    return bpc_ref_reject(res, "moe_unpermute: permuted [N, H], inverse [T, k]");
  }
  int64_t N = p->sizes[0], H = p->sizes[1], T = inv->sizes[0], k = inv->sizes[1];
  for (int64_t j = 0; j < T * k; j++) {
    if (li(inv, j) >= N) return bpc_ref_reject(res, "an inverse row past the permuted rows");
  }
  int64_t os[2] = {T, H};
  bp_status_t st = bpc_ref_single_output(res, p->dtype, 2, os, 1,
                                         p->dtype == BP_DTYPE_F64 ? BP_DTYPE_F64 : BP_DTYPE_F32);
  if (st != BP_OK) return st;
  bpc_expected_t* e = &res->out[0];
  for (int64_t t = 0; t < T; t++) {
    for (int64_t x = 0; x < H; x++) {
      double acc = 0.0, mag = 0.0;
      for (int64_t r = 0; r < k; r++) {
        int64_t src = li(inv, t * k + r);
        if (src < 0) continue;
        double v = (w ? ld(w, t * k + r) : 1.0) * ld(p, src * H + x);
        acc += v;
        mag += fabs(v);
      }
      e->f[t * H + x] = acc;
      e->mag[t * H + x] = mag;
      e->nterms[t * H + x] = (double)k + 2.0;
    }
  }
  return BP_OK;
}

/* ---- grouped_mm -------------------------------------------------------------------- */

/* Expert e's weight at (n, k): the float weight, or the dequantized code
 * (codes[e, n, k] - zero_point[e, n, k / g]) * scale[e, n, k / g] with 4-bit
 * codes two per byte, low nibble first. */
static double gmm_weight(const bpc_case_t* c, const bpc_host_tensor_t* in, int64_t e, int64_t n,
                         int64_t k) {
  const bpc_host_tensor_t *w = &in[1], *s = &in[4], *z = &in[5];
  int64_t N = w->sizes[1], KB = w->sizes[2];
  if (s->dtype == BP_DTYPE_INVALID) return ld(w, (e * N + n) * KB + k);
  const bp_quantize_attrs_t* a = &c->attrs.quantize;
  int four = a->qdtype == BP_DTYPE_I4 || a->qdtype == BP_DTYPE_U4;
  double code;
  if (four) {
    int64_t byte = li(w, (e * N + n) * KB + k / 2), nib = k % 2 ? (byte >> 4) & 15 : byte & 15;
    code = (double)(a->qdtype == BP_DTYPE_I4 && nib >= 8 ? nib - 16 : nib);
  } else {
    code = (double)li(w, (e * N + n) * KB + k);
  }
  int64_t G = s->sizes[2], gi = (e * N + n) * G + (a->block_size > 0 ? k / a->block_size : 0);
  return (code - (z->dtype != BP_DTYPE_INVALID ? ld(z, gi) : 0.0)) * ld(s, gi);
}

static bp_status_t ref_grouped_mm(const bpc_case_t* c, const bpc_host_tensor_t* in,
                                  bpc_ref_result_t* res) {
  const bpc_host_tensor_t *x = &in[0], *w = &in[1], *off = &in[2];
  const bpc_host_tensor_t* b = in[3].dtype != BP_DTYPE_INVALID ? &in[3] : NULL;
  if (x->rank != 2 || w->rank != 3 || off->rank != 1 || !is_index(off->dtype) ||
      off->sizes[0] != w->sizes[0] + 1) {
    return bpc_ref_reject(res, "grouped_mm: input [M, K], weight [E, N, K], offsets [E + 1]");
  }
  int64_t M = x->sizes[0], K = x->sizes[1], E = w->sizes[0], N = w->sizes[1];
  if (li(off, 0) < 0 || li(off, E) > M) return bpc_ref_reject(res, "offsets outside [0, M]");
  for (int64_t e = 0; e < E; e++) {
    if (li(off, e + 1) < li(off, e)) return bpc_ref_reject(res, "decreasing offsets");
  }
  int64_t os[2] = {M, N};
  bp_status_t st = bpc_ref_single_output(res, x->dtype, 2, os, 1,
                                         x->dtype == BP_DTYPE_F64 ? BP_DTYPE_F64 : BP_DTYPE_F32);
  if (st != BP_OK) return st;
  bpc_expected_t* o = &res->out[0];
  for (int64_t e = 0; e < E; e++) {
    for (int64_t m = li(off, e); m < li(off, e + 1); m++) {
      for (int64_t n = 0; n < N; n++) {
        double acc = b ? ld(b, e * N + n) : 0.0, mag = fabs(acc);
        for (int64_t q = 0; q < K; q++) {
          double v = ld(x, m * K + q) * gmm_weight(c, in, e, n, q);
          acc += v;
          mag += fabs(v);
        }
        o->f[m * N + n] = acc;
        o->mag[m * N + n] = mag;
        o->nterms[m * N + n] = (double)K + 1.0;
      }
    }
  }
  return BP_OK; /* rows outside [off[0], off[E]) stay zero */
}

static const bpc_ref_group_t k_groups[] = {
    {ref_moe_permute, BPC_ACC_EXACT, BPC_OPF_SIGNED_ZERO, BPC_OPS(BP_OP_moe_permute),
     bpc_gen_moe_permute, NULL},
    {ref_moe_unpermute, BPC_ACC_REDUCE, 0, BPC_OPS(BP_OP_moe_unpermute), bpc_gen_moe_unpermute,
     NULL},
    {ref_grouped_mm, BPC_ACC_REDUCE, 0, BPC_OPS(BP_OP_grouped_mm), bpc_gen_grouped_mm, NULL},
};

const bpc_ref_family_t bpc_ref_family_moe = BPC_FAMILY(moe, k_groups);
