/* Tolerance classes and the comparison of device results with references.
 * The table is documented in conformance/README.md; keep them in sync.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "conform.h"

/* A result within this factor of its limit is a QUALITY_WARNING, not a
 * FAIL (EXACT class excepted). */
#define BPC_WARN_FACTOR 4.0

const char* bpc_status_name(uint32_t s) {
  static const char* const names[BPC_STATUS_COUNT_] = {
      "PASS", "FAIL", "NOT_SUPPORTED", "QUALITY_WARNING", "CRASH", "TIMEOUT", "RESOURCE_ERROR",
      "SKIPPED"};
  return s < BPC_STATUS_COUNT_ ? names[s] : "?";
}

int bpc_status_severity(uint32_t s) {
  switch (s) {
    case BPC_PASS: return 0;
    case BPC_SKIPPED: return 1;
    case BPC_NOT_SUPPORTED: return 2;
    case BPC_RESOURCE_ERROR: return 3;
    case BPC_QUALITY_WARNING: return 4;
    case BPC_TIMEOUT: return 5;
    case BPC_FAIL: return 6;
    case BPC_CRASH: return 7;
    default: return 8;
  }
}

const char* bpc_accuracy_name(uint32_t a) {
  static const char* const names[] = {"EXACT", "CR", "DIVSQRT", "TRANS", "TRANS_HARD", "REDUCE"};
  return a < sizeof names / sizeof names[0] ? names[a] : "?";
}

/* Ulp limits per accuracy class, by output dtype (f64, f32, f16, bf16). */
static const double kUlps[][4] = {
    /* EXACT      */ {0.0, 0.0, 0.0, 0.0},
    /* CR         */ {0.5, 0.5, 1.0, 1.0},
    /* DIVSQRT    */ {1.0, 1.0, 1.0, 1.0},
    /* TRANS      */ {4.0, 4.0, 2.0, 2.0},
    /* TRANS_HARD */ {8.0, 8.0, 2.0, 2.0},
    /* REDUCE     */ {1.0, 1.0, 1.0, 1.0}, /* final rounding term of the bound */
};

bpc_tolerance_t bpc_tolerance_get(uint32_t accuracy, uint32_t out_dtype, int signed_zero) {
  bpc_tolerance_t t;
  memset(&t, 0, sizeof t);
  /* c64 compares as its two f32 components. */
  if (out_dtype == BP_DTYPE_C64) out_dtype = BP_DTYPE_F32;
  t.check_signed_zero = signed_zero;
  if (!bpc_dtype_is_float(out_dtype) || accuracy > BPC_ACC_REDUCE ||
      out_dtype == BP_DTYPE_F8E4M3FN || out_dtype == BP_DTYPE_F8E5M2) {
    t.accuracy = BPC_ACC_EXACT;
    return t;
  }
  int col = out_dtype == BP_DTYPE_F64 ? 0 : out_dtype == BP_DTYPE_F32 ? 1
          : out_dtype == BP_DTYPE_F16 ? 2 : 3;
  t.accuracy = accuracy;
  t.ulps = kUlps[accuracy][col];
  /* f16/bf16 compute and accumulate in f32 (PyTorch opmath). */
  t.unit_roundoff = out_dtype == BP_DTYPE_F64 ? 0x1.0p-53 : 0x1.0p-24;
  t.bound_c = 2.0;
  return t;
}

double bpc_ulp(double x, uint32_t dtype) {
  int mant = bpc_float_mant_bits(dtype);
  int emin = bpc_float_min_exp(dtype);
  int e = emin;
  if (x != 0.0 && isfinite(x)) {
    (void)frexp(x, &e);
    e -= 1;
    if (e < emin) e = emin;
  } else if (isinf(x)) {
    (void)frexp(bpc_float_max(dtype), &e);
    e -= 1;
  }
  return ldexp(1.0, e - mant);
}

/* The value one ulp past the largest finite of dtype (2^(emax+1)): where an
 * infinite result sits for error measurement (OpenCL CTS convention). */
static double overflow_point(uint32_t dtype) {
  double m = bpc_float_max(dtype);
  if (dtype == BP_DTYPE_F8E4M3FN) return m + bpc_ulp(m, dtype); /* 480: fn has no inf */
  int e;
  (void)frexp(m, &e);
  return ldexp(1.0, e);
}

double bpc_ulp_error(double got, double ref, uint32_t dtype) {
  if (isnan(ref) || isnan(got)) return (isnan(ref) && isnan(got)) ? 0.0 : INFINITY;
  if (isinf(ref)) return got == ref ? 0.0 : INFINITY;
  double max = bpc_float_max(dtype);
  double ulp_max = bpc_ulp(max, dtype);
  if (isinf(got)) {
    if (signbit(got) != signbit(ref)) return INFINITY;
    /* The exact result overflows on rounding: infinity is right. */
    if (isinf(bpc_round_to_dtype(ref, dtype))) return 0.0;
    return (overflow_point(dtype) - fabs(ref)) / ulp_max;
  }
  if (fabs(ref) > max) {
    if (signbit(got) != signbit(ref)) return INFINITY;
    return (fabs(ref) - fabs(got)) / ulp_max;
  }
  return fabs(got - ref) / bpc_ulp(ref, dtype);
}

bp_status_t bpc_expected_init(bpc_expected_t* e, uint32_t dtype, uint32_t rank,
                              const int64_t* sizes, int with_bound) {
  memset(e, 0, sizeof *e);
  if (rank > BP_MAX_RANK) return BP_INVALID_ARGUMENT;
  e->dtype = dtype;
  e->rank = rank;
  e->numel = 1;
  for (uint32_t d = 0; d < rank; d++) {
    if (sizes[d] < 0) return BP_INVALID_ARGUMENT;
    e->sizes[d] = sizes[d];
    e->numel *= sizes[d];
  }
  size_t n = (size_t)(e->numel > 0 ? e->numel : 1);
  if (dtype == BP_DTYPE_C64) n *= 2; /* f, mag, nterms per component: re, im */
  if (bpc_dtype_is_float(dtype) || dtype == BP_DTYPE_C64) {
    e->f = calloc(n, sizeof(double));
    e->mag = calloc(n, sizeof(double));
    if (with_bound) e->nterms = calloc(n, sizeof(double));
    if (!e->f || !e->mag || (with_bound && !e->nterms)) goto fail;
  } else {
    e->i = calloc(n, sizeof(int64_t));
    if (!e->i) goto fail;
  }
  return BP_OK;
fail:
  bpc_expected_free(e);
  return BP_RESOURCE_EXHAUSTED;
}

void bpc_expected_free(bpc_expected_t* e) {
  free(e->f);
  free(e->i);
  free(e->mag);
  free(e->nterms);
  e->f = e->mag = e->nterms = NULL;
  e->i = NULL;
}

/* Error of one floating element, in units of its allowance (<= 1 passes).
 * The allowance is ulps * ulp(ref) plus, where the reference gave an error
 * scale, bound_c * n * u * mag (n = nterms, or 1 for elementwise ops whose
 * natural error is absolute, e.g. gelu's 0.5*x*(1+erf)). */
static double float_error(const bpc_tolerance_t* t, uint32_t dtype, double got, double ref,
                          double mag, double n) {
  double rr = bpc_round_to_dtype(ref, dtype);
  if (t->accuracy == BPC_ACC_EXACT) {
    if (isnan(rr) || isnan(got)) return (isnan(rr) && isnan(got)) ? 0.0 : INFINITY;
    if (got != rr) return INFINITY;
    if (t->check_signed_zero && got == 0.0 && signbit(got) != signbit(rr)) return INFINITY;
    return 0.0;
  }
  /* A zero where the exact result is subnormal: accepted on devices that
   * flush denormals, and for transcendental functions everywhere (their
   * usual formulas, e.g. 1 / (1 + exp(-x)), overflow an intermediate). */
  int subnormal = isfinite(rr) && fabs(ref) < ldexp(1.0, bpc_float_min_exp(dtype));
  if (got == 0.0 && subnormal &&
      (t->flush_denormals_ok || t->accuracy == BPC_ACC_TRANS || t->accuracy == BPC_ACC_TRANS_HARD)) {
    return 0.0;
  }
  if (t->check_signed_zero && got == 0.0 && rr == 0.0 && signbit(got) != signbit(rr)) {
    return INFINITY;
  }
  double ulp_err = bpc_ulp_error(got, ref, dtype);
  if (ulp_err == 0.0) return 0.0;
  if (!isfinite(ulp_err) && !(isfinite(got) && isfinite(ref))) return ulp_err;
  double extra = 0.0;
  if (mag > 0.0 && isfinite(mag)) extra = t->bound_c * (n > 0.0 ? n : 1.0) * t->unit_roundoff * mag;
  double ulp = bpc_ulp(ref, dtype);
  double allow = t->ulps * ulp + extra;
  if (!(allow > 0.0)) return INFINITY;
  if (isinf(got)) return ulp_err / (t->ulps > 0.0 ? t->ulps : 1.0); /* near overflow */
  return fabs(got - ref) / allow;
}

void bpc_check_values(const bpc_tolerance_t* tol, const bpc_expected_t* e, const void* got_dense,
                      bpc_check_t* out) {
  memset(out, 0, sizeof *out);
  out->status = BPC_PASS;
  out->max_ulps = -1.0;
  out->worst_index = -1;
  double worst = 0.0;
  /* c64: 2 * numel f32 components (re, im interleaved, as e->f holds them). */
  uint32_t vdt = e->dtype == BP_DTYPE_C64 ? BP_DTYPE_F32 : e->dtype;
  int64_t count = e->dtype == BP_DTYPE_C64 ? 2 * e->numel : e->numel;
  int is_float = bpc_dtype_is_float(vdt);
  if (is_float && tol->accuracy != BPC_ACC_EXACT) out->max_ulps = 0.0;
  for (int64_t k = 0; k < count; k++) {
    bpc_num_t g = bpc_load(vdt, got_dense, k);
    double err;
    if (is_float) {
      double mag = e->mag ? e->mag[k] : 0.0;
      double n = e->nterms ? e->nterms[k] : 1.0;
      err = float_error(tol, vdt, g.f, e->f[k], mag, n);
      double rr = bpc_round_to_dtype(e->f[k], vdt);
      if (isfinite(g.f) && isfinite(rr) && fabs(g.f - e->f[k]) > out->max_abs) {
        out->max_abs = fabs(g.f - e->f[k]);
      }
      if (tol->accuracy != BPC_ACC_EXACT) {
        double u = bpc_ulp_error(g.f, e->f[k], vdt);
        if (u > out->max_ulps) out->max_ulps = u;
      }
    } else {
      err = g.i == e->i[k] ? 0.0 : INFINITY;
      if (err != 0.0 && llabs(g.i - e->i[k]) > out->max_abs) out->max_abs = (double)llabs(g.i - e->i[k]);
    }
    if (err > 1.0 + 1e-9) {
      out->mismatches++;
      if (err > worst || out->worst_index < 0) {
        worst = err;
        out->worst_index = k;
      }
    }
  }
  if (out->mismatches == 0) return;
  int warn = tol->accuracy != BPC_ACC_EXACT && worst <= BPC_WARN_FACTOR;
  out->status = warn ? BPC_QUALITY_WARNING : BPC_FAIL;
  int64_t k = out->worst_index;
  bpc_num_t g = bpc_load(vdt, got_dense, k);
  if (is_float) {
    snprintf(out->message, sizeof out->message,
             "%lld of %lld %s outside %s tolerance; worst [%lld]: got %.17g, expected %.17g "
             "(%.3g x allowance)",
             (long long)out->mismatches, (long long)count,
             e->dtype == BP_DTYPE_C64 ? "components (re, im)" : "elements",
             bpc_accuracy_name(tol->accuracy), (long long)k, g.f, e->f[k], worst);
  } else {
    snprintf(out->message, sizeof out->message,
             "%lld of %lld elements differ; first worst [%lld]: got %lld, expected %lld",
             (long long)out->mismatches, (long long)e->numel, (long long)k, (long long)g.i,
             (long long)e->i[k]);
  }
}
