/* References of the fused quantizations (family QUANT): rms_norm_quant,
 * add_rms_norm_quant, swiglu_quant (docs/semantics.md, "Fused
 * quantization"). The layer's result y is fp64 over the exact inputs
 * (residual_out rounded once to the input dtype first, as the op stores it
 * and normalizes it).
 *
 * Checks (check_fused_quant): residual_out exactly (one rounding of
 * input + residual); a static scale_out equal to the given scale; a dynamic
 * one within a relative 2^-16 (+ one f32 ulp) of min(amax(y), scale_ub) /
 * qmax, the room of a device computing y in f32; then every code against
 * the scale the device returned: a nearest code to y / scale, up to a
 * relative 2^-16 of the quotient for f32 compute (2^-40 for f64), so a
 * code may differ by one step only where y / scale lies that close to a
 * rounding boundary.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../cases_internal.h"
#include "ref.h"

void bpc_gen_fused_quant(struct bpc_gen* g);

static double fq_qmax(uint32_t q) {
  return q == BP_DTYPE_I8 ? 127.0 : q == BP_DTYPE_F8E4M3FN ? 448.0 : 57344.0;
}
static double fq_dtype_eps(uint32_t d) {
  return d == BP_DTYPE_F64 ? 0x1p-52 : d == BP_DTYPE_F16 ? 0x1p-10 : d == BP_DTYPE_BF16 ? 0x1p-7 : 0x1p-23;
}

/* Operand positions of op: weight, static scale; outputs: residual_out,
 * scale_out. */
typedef struct fq_layout {
  int add, glu;
  uint32_t wi, si, ro, so;
} fq_layout_t;

static fq_layout_t fq_layout(uint32_t op) {
  fq_layout_t l;
  l.add = op == BP_OP_add_rms_norm_quant;
  l.glu = op == BP_OP_swiglu_quant;
  l.wi = l.add ? 2 : 1;
  l.si = l.glu ? 1 : l.add ? 3 : 2;
  l.ro = 1;
  l.so = l.add ? 2 : 1;
  return l;
}

/* y (m per row) in fp64 for every row; residual_out's rounded values into
 * z when `add`. Returns the number of rows, -1 without memory. */
static int64_t fq_compute(const bpc_case_t* c, const bpc_host_tensor_t* in, double** out_y, double** out_z) {
  fq_layout_t l = fq_layout(c->op_id);
  const bpc_host_tensor_t* x = &in[0];
  const bp_fused_quant_attrs_t* a = &c->attrs.fused_quant;
  int64_t n = x->sizes[x->rank - 1], m = l.glu ? n / 2 : n, rows = n ? x->numel / n : 0;
  double* y = malloc((size_t)(rows * m > 0 ? rows * m : 1) * sizeof(double));
  double* z = malloc((size_t)(x->numel > 0 ? x->numel : 1) * sizeof(double));
  if (!y || !z) {
    free(y), free(z);
    return -1;
  }
  double eps = !l.glu && a->eps > 0.0 ? a->eps : fq_dtype_eps(x->dtype);
  for (int64_t r = 0; r < rows; r++) {
    double* zr = z + r * n;
    for (int64_t i = 0; i < n; i++) {
      double v = bpc_load(x->dtype, x->data, r * n + i).f;
      if (l.add) v = bpc_round_to_dtype(v + bpc_load(in[1].dtype, in[1].data, r * n + i).f, x->dtype);
      zr[i] = v;
    }
    if (l.glu) {
      for (int64_t i = 0; i < m; i++) y[r * m + i] = zr[i] / (1.0 + exp(-zr[i])) * zr[m + i];
      continue;
    }
    double ss = 0.0;
    for (int64_t i = 0; i < n; i++) ss += zr[i] * zr[i];
    double inv = 1.0 / sqrt(ss / (double)n + eps);
    const bpc_host_tensor_t* w = &in[l.wi];
    for (int64_t i = 0; i < n; i++)
      y[r * m + i] = zr[i] * inv * (w->dtype != BP_DTYPE_INVALID ? bpc_load(w->dtype, w->data, i).f : 1.0);
  }
  *out_y = y;
  *out_z = z;
  return rows;
}

static bp_status_t ref_fused_quant(const bpc_case_t* c, const bpc_host_tensor_t* in, bpc_ref_result_t* res) {
  fq_layout_t l = fq_layout(c->op_id);
  const bpc_host_tensor_t* x = &in[0];
  uint32_t q = c->attrs.fused_quant.qdtype;
  if (q != BP_DTYPE_I8 && q != BP_DTYPE_F8E4M3FN && q != BP_DTYPE_F8E5M2)
    return bpc_ref_reject(res, "qdtype %u is not i8 or fp8", q);
  if (x->rank == 0 || (l.glu && x->sizes[x->rank - 1] % 2))
    return bpc_ref_reject(res, "rows of the last dim (even for swiglu_quant)");
  int64_t sizes[BP_MAX_RANK];
  memcpy(sizes, x->sizes, sizeof sizes);
  if (l.glu) sizes[x->rank - 1] /= 2;
  res->num_outputs = l.add ? 3 : 2;
  res->compute_dtype = x->dtype == BP_DTYPE_F64 ? BP_DTYPE_F64 : BP_DTYPE_F32;
  bp_status_t st = bpc_expected_init(&res->out[0], q, x->rank, sizes, 0);
  if (st == BP_OK && l.add) st = bpc_expected_init(&res->out[l.ro], x->dtype, x->rank, x->sizes, 0);
  sizes[x->rank - 1] = 1;
  if (st == BP_OK) st = bpc_expected_init(&res->out[l.so], BP_DTYPE_F32, x->rank, sizes, 0);
  return st; /* values: check_fused_quant */
}

static void check_fused_quant(const bpc_case_t* c, const bpc_host_tensor_t* in, const bpc_ref_result_t* ref,
                              const void* const* got, const bpc_tolerance_t* tol, bpc_check_t* out) {
  (void)ref, (void)tol;
  fq_layout_t l = fq_layout(c->op_id);
  const bp_fused_quant_attrs_t* a = &c->attrs.fused_quant;
  const bpc_host_tensor_t* x = &in[0];
  uint32_t q = a->qdtype;
  int sat = !(a->flags & BP_QUANTIZE_NO_SATURATE);
  double rel = x->dtype == BP_DTYPE_F64 ? 0x1p-40 : 0x1p-16;
  memset(out, 0, sizeof *out);
  out->worst_index = -1;
  out->max_ulps = -1;
  double *y = NULL, *z = NULL;
  int64_t rows = fq_compute(c, in, &y, &z);
  if (rows < 0) {
    out->status = BPC_FAIL;
    snprintf(out->message, sizeof out->message, "out of host memory");
    return;
  }
  int64_t n = x->sizes[x->rank - 1], m = l.glu ? n / 2 : n;
  if (l.add)
    for (int64_t i = 0; i < x->numel; i++) {
      double g = bpc_load(x->dtype, got[l.ro], i).f;
      if (!(g == z[i] || (isnan(g) && isnan(z[i]))))
        bpc_check_fail(out, i, "residual_out element %lld: got %.9g, expected %.9g (input + residual rounded once)", (long long)i, g, z[i]);
    }
  const bpc_host_tensor_t* sin = &in[l.si];
  for (int64_t r = 0; r < rows && !out->mismatches; r++) {
    double gs = bpc_load(BP_DTYPE_F32, got[l.so], r).f, want;
    if (sin->dtype != BP_DTYPE_INVALID) {
      want = bpc_load(sin->dtype, sin->data, 0).f;
      if (!(gs == want)) bpc_check_fail(out, r, "scale_out of row %lld: got %.9g, expected the static scale %.9g", (long long)r, gs, want);
    } else {
      double amax = 0.0;
      for (int64_t i = 0; i < m; i++) {
        double v = fabs(y[r * m + i]);
        if (isnan(v) || v > amax) amax = isnan(amax) ? amax : v;
      }
      if (a->scale_ub > 0.0 && amax > a->scale_ub) amax = a->scale_ub;
      want = amax / fq_qmax(q);
      int ok = (isnan(gs) && isnan(want)) || fabs(gs - want) <= rel * fabs(want) + bpc_ulp(want, BP_DTYPE_F32);
      if (!ok) bpc_check_fail(out, r, "scale_out of row %lld: got %.9g, expected %.9g (amax / qmax, amax %.9g)", (long long)r, gs, want, amax);
    }
    for (int64_t i = 0; i < m && !out->mismatches; i++) {
      double t = y[r * m + i] / gs, g = bpc_quant_decode(q, ((const uint8_t*)got[0])[r * m + i]);
      int ok;
      if (gs == 0.0) ok = g == 0.0;
      else if (q == BP_DTYPE_I8 && isnan(t)) ok = g == 0.0;
      else ok = bpc_quant_code_ok(q, t, g, sat, rel);
      if (!ok) bpc_check_fail(out, r * m + i, "code %lld: %g is not a nearest code to y / scale = %.9g (scale %.9g)", (long long)(r * m + i), g, t, gs);
    }
  }
  out->status = out->mismatches ? BPC_FAIL : BPC_PASS;
  free(y), free(z);
}

static const bpc_ref_group_t k_groups[] = {
    {ref_fused_quant, BPC_ACC_EXACT, 0,
     BPC_OPS(BP_OP_rms_norm_quant, BP_OP_add_rms_norm_quant, BP_OP_swiglu_quant), bpc_gen_fused_quant,
     check_fused_quant},
};

const bpc_ref_family_t bpc_ref_family_fused_quant = BPC_FAMILY(fused_quant, k_groups);
