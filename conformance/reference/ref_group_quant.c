/* References of the per-token-group quantizations (family QUANT):
 * per_token_group_quant, rms_norm_group_quant, swiglu_group_quant
 * (docs/semantics.md, "Group quantization"). The layer's result y is fp64
 * over the exact inputs (the row itself, rms_norm's, silu(gate) * up).
 *
 * Checks (check_group_quant), per group of G elements of a row:
 *  - the scale: max(amax(y), eps) / qmax rounded once to f32 (within one
 *    f32 ulp; for the fused ops also within a relative 2^-16, the room of a
 *    device computing y in f32); UE8M0: the power of two at or above that
 *    (either neighbour where the relative room straddles one); NaN for a
 *    group holding NaN, inf for one holding inf; read from [groups, rows]
 *    for column-major scales;
 *  - every code against the scale the device returned: a nearest code to
 *    y / scale, saturating, up to a relative 2^-16 of the quotient (2^-40
 *    for f64 inputs), so a code may differ by one step only where the
 *    quotient lies that close to a rounding boundary; i8 NaN quotients
 *    give 0.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ref.h"

void bpc_gen_group_quant(struct bpc_gen* g);

static double gq_qmax(uint32_t q) { return q == BP_DTYPE_I8 ? 127.0 : q == BP_DTYPE_F8E4M3FN ? 448.0 : 57344.0; }
static double gq_dtype_eps(uint32_t d) {
  return d == BP_DTYPE_F64 ? 0x1p-52 : d == BP_DTYPE_F16 ? 0x1p-10 : d == BP_DTYPE_BF16 ? 0x1p-7 : 0x1p-23;
}

/* y (m per row) in fp64 for every row; the row count, -1 without memory. */
static int64_t gq_compute(const bpc_case_t* c, const bpc_host_tensor_t* in, int64_t* out_m, double** out_y) {
  const bpc_host_tensor_t* x = &in[0];
  int norm = c->op_id == BP_OP_rms_norm_group_quant, glu = c->op_id == BP_OP_swiglu_group_quant;
  int64_t n = x->sizes[x->rank - 1], m = glu ? n / 2 : n, rows = n ? x->numel / n : 0;
  double* y = malloc((size_t)(rows * m > 0 ? rows * m : 1) * sizeof(double));
  if (!y) return -1;
  const bp_group_quant_attrs_t* a = &c->attrs.group_quant;
  double eps = a->norm_eps > 0.0 ? a->norm_eps : gq_dtype_eps(x->dtype);
  for (int64_t r = 0; r < rows; r++) {
    const int64_t base = r * n;
    if (glu) {
      for (int64_t i = 0; i < m; i++) {
        double g = bpc_load(x->dtype, x->data, base + i).f;
        y[r * m + i] = g / (1.0 + exp(-g)) * bpc_load(x->dtype, x->data, base + m + i).f;
      }
      continue;
    }
    double inv = 1.0;
    if (norm) {
      double ss = 0.0;
      for (int64_t i = 0; i < n; i++) ss += pow(bpc_load(x->dtype, x->data, base + i).f, 2);
      inv = 1.0 / sqrt(ss / (double)n + eps);
    }
    for (int64_t i = 0; i < n; i++) {
      double w = norm && in[1].dtype != BP_DTYPE_INVALID ? bpc_load(in[1].dtype, in[1].data, i).f : 1.0;
      y[r * m + i] = bpc_load(x->dtype, x->data, base + i).f * inv * w;
    }
  }
  *out_m = m;
  *out_y = y;
  return rows;
}

static bp_status_t ref_group_quant(const bpc_case_t* c, const bpc_host_tensor_t* in, bpc_ref_result_t* res) {
  const bpc_host_tensor_t* x = &in[0];
  const bp_group_quant_attrs_t* a = &c->attrs.group_quant;
  int glu = c->op_id == BP_OP_swiglu_group_quant;
  uint32_t q = a->qdtype;
  if (q != BP_DTYPE_I8 && q != BP_DTYPE_F8E4M3FN && q != BP_DTYPE_F8E5M2) return bpc_ref_reject(res, "qdtype");
  if (x->rank == 0 || a->group_size < 1) return bpc_ref_reject(res, "rows and groups");
  int64_t sizes[BP_MAX_RANK], m = x->sizes[x->rank - 1] / (glu ? 2 : 1), rows = 1;
  if (m % a->group_size) return bpc_ref_reject(res, "the row is not a multiple of group_size");
  memcpy(sizes, x->sizes, sizeof sizes);
  for (uint32_t d = 0; d + 1 < x->rank; d++) rows *= x->sizes[d];
  sizes[x->rank - 1] = m;
  res->num_outputs = 2;
  res->compute_dtype = x->dtype == BP_DTYPE_F64 ? BP_DTYPE_F64 : BP_DTYPE_F32;
  bp_status_t st = bpc_expected_init(&res->out[0], q, x->rank, sizes, 0);
  if (st != BP_OK) return st;
  int64_t groups = m / a->group_size;
  if (a->flags & BP_GROUP_QUANT_COLUMN_MAJOR) {
    int64_t cs[2] = {groups, rows};
    return bpc_expected_init(&res->out[1], BP_DTYPE_F32, 2, cs, 0);
  }
  sizes[x->rank - 1] = groups;
  return bpc_expected_init(&res->out[1], BP_DTYPE_F32, x->rank, sizes, 0); /* values: check_group_quant */
}

static double pow2_at_or_above(double s) {
  if (!(s > 0.0) || isinf(s)) return s;
  int e;
  double f = frexp(s, &e);
  return ldexp(1.0, f == 0.5 ? e - 1 : e);
}

/* Whether the device's scale gs is right for a group of amax `amax`. */
static int gq_scale_ok(const bp_group_quant_attrs_t* a, double amax, double gs, double rel) {
  double eps = a->eps > 0.0 ? a->eps : 1e-10, qmax = gq_qmax(a->qdtype);
  if (isnan(amax)) return isnan(gs);
  double want = (amax > eps ? amax : eps) / qmax;
  if (isinf(want)) return gs == want;
  double w32 = bpc_round_to_dtype(want, BP_DTYPE_F32);
  double lo = fmin(w32, want) * (1.0 - rel) - bpc_ulp(want, BP_DTYPE_F32);
  double hi = fmax(w32, want) * (1.0 + rel) + bpc_ulp(want, BP_DTYPE_F32);
  if (a->flags & BP_GROUP_QUANT_SCALE_UE8M0) return gs == pow2_at_or_above(lo) || gs == pow2_at_or_above(hi);
  return gs >= lo && gs <= hi;
}

static void check_group_quant(const bpc_case_t* c, const bpc_host_tensor_t* in, const bpc_ref_result_t* ref,
                              const void* const* got, const bpc_tolerance_t* tol, bpc_check_t* out) {
  (void)tol;
  const bp_group_quant_attrs_t* a = &c->attrs.group_quant;
  uint32_t q = a->qdtype;
  int fused = c->op_id != BP_OP_per_token_group_quant, col = (a->flags & BP_GROUP_QUANT_COLUMN_MAJOR) != 0;
  double rel = in[0].dtype == BP_DTYPE_F64 ? 0x1p-40 : 0x1p-16;
  memset(out, 0, sizeof *out);
  out->worst_index = -1;
  out->max_ulps = -1;
  double* y = NULL;
  int64_t m = 0, rows = gq_compute(c, in, &m, &y);
  if (rows < 0) {
    out->status = BPC_FAIL;
    snprintf(out->message, sizeof out->message, "out of host memory");
    return;
  }
  int64_t G = a->group_size, groups = m / G;
  (void)ref;
  for (int64_t r = 0; r < rows && !out->mismatches; r++) {
    for (int64_t gi = 0; gi < groups && !out->mismatches; gi++) {
      const double* yg = y + r * m + gi * G;
      double amax = 0.0;
      for (int64_t i = 0; i < G; i++) {
        double v = fabs(yg[i]);
        if (isnan(v) || v > amax) amax = isnan(amax) ? amax : v;
      }
      int64_t si = col ? gi * rows + r : r * groups + gi;
      double gs = bpc_load(BP_DTYPE_F32, got[1], si).f;
      if (!gq_scale_ok(a, amax, gs, fused ? rel : 0.0)) {
        bpc_check_fail(out, si, "scale of row %lld group %lld: got %.9g for amax %.9g (eps %g, qmax %g%s)", (long long)r,
                (long long)gi, gs, amax, a->eps > 0.0 ? a->eps : 1e-10, gq_qmax(q),
                a->flags & BP_GROUP_QUANT_SCALE_UE8M0 ? ", UE8M0" : "");
        break;
      }
      for (int64_t i = 0; i < G; i++) {
        int64_t at = r * m + gi * G + i;
        double t = yg[i] / gs, g = bpc_quant_decode(q, ((const uint8_t*)got[0])[at]);
        int ok;
        if (gs == 0.0) ok = g == 0.0;
        else if (q == BP_DTYPE_I8 && isnan(t)) ok = g == 0.0;
        else ok = bpc_quant_code_ok(q, t, g, 1, rel);
        if (!ok) {
          bpc_check_fail(out, at, "code %lld: %g is not a nearest code to y / scale = %.9g (y %.9g, scale %.9g)",
                  (long long)at, g, t, yg[i], gs);
          break;
        }
      }
    }
  }
  out->status = out->mismatches ? BPC_FAIL : BPC_PASS;
  free(y);
}

static const bpc_ref_group_t k_groups[] = {
    {ref_group_quant, BPC_ACC_EXACT, 0,
     BPC_OPS(BP_OP_per_token_group_quant, BP_OP_rms_norm_group_quant, BP_OP_swiglu_group_quant),
     bpc_gen_group_quant, check_group_quant},
};

const bpc_ref_family_t bpc_ref_family_group_quant = BPC_FAMILY(group_quant, k_groups);
