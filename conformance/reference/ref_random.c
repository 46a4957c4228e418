/* References of the random family: rand, randn, randperm and dropout.
 *
 * The references only fix the outputs' dtypes and shapes; the checkers
 * judge the values with statistics at fixed thresholds (each far beyond
 * what a correct generator reaches on the suite's fixed seeds: mean and
 * variance within 5 standard errors, a Kolmogorov-Smirnov distance below
 * 2.2 / sqrt(n) plus the dtype's quantisation, a chi-square over 16 bins
 * below 50 for 15 degrees of freedom) and exact properties (range, 1.0
 * never drawn, permutations, dropout's kept values and mask). Bit
 * determinism (same seed and offset, same bits) is a unit test of each
 * backend, since it compares two runs.
 */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ref.h"

void bpc_gen_random(struct bpc_gen* g); /* rand, randn, randperm, dropout */

static bp_status_t ref_random(const bpc_case_t* c, const bpc_host_tensor_t* in,
                              bpc_ref_result_t* res) {
  if (c->op_id == BP_OP_dropout) {
    const bpc_host_tensor_t* x = &in[0];
    if (!bpc_dtype_is_float(x->dtype) || x->dtype == BP_DTYPE_F8E4M3FN || x->dtype == BP_DTYPE_F8E5M2)
      return bpc_ref_reject(res, "dropout takes floating input");
    double p = c->attrs.random.p;
    if (!(p >= 0.0 && p <= 1.0)) return bpc_ref_reject(res, "p outside [0, 1]");
    res->num_outputs = 2;
    res->compute_dtype = x->dtype;
    bp_status_t st = bpc_expected_init(&res->out[0], x->dtype, x->rank, x->sizes, 0);
    if (st == BP_OK) st = bpc_expected_init(&res->out[1], BP_DTYPE_BOOL, x->rank, x->sizes, 0);
    return st;
  }
  const bpc_operand_t* o = &c->out[0];
  int fl = bpc_dtype_is_float(o->dtype) && o->dtype != BP_DTYPE_F8E4M3FN && o->dtype != BP_DTYPE_F8E5M2;
  if (c->op_id == BP_OP_randperm) {
    if (o->rank != 1 || !(fl || bpc_dtype_is_int(o->dtype))) return bpc_ref_reject(res, "randperm output");
  } else if (!fl) {
    return bpc_ref_reject(res, "floating output required");
  }
  return bpc_ref_single_output(res, o->dtype, o->rank, o->sizes, 0, o->dtype);
}

/* ---- statistics ---------------------------------------------------------- */
static int cmp_double(const void* a, const void* b) {
  double x = *(const double*)a, y = *(const double*)b;
  return (x > y) - (x < y);
}

static double normal_cdf(double x) { return 0.5 * erfc(-x / sqrt(2.0)); }
static double unit_cdf(double x) { return x < 0 ? 0 : x > 1 ? 1 : x; }

/* Kolmogorov-Smirnov distance of sorted v[0..n) from cdf. */
static double ks_distance(const double* v, int64_t n, double (*cdf)(double)) {
  double d = 0;
  for (int64_t k = 0; k < n; k++) {
    double f = cdf(v[k]);
    double a = fabs(f - (double)k / (double)n), b = fabs((double)(k + 1) / (double)n - f);
    if (a > d) d = a;
    if (b > d) d = b;
  }
  return d;
}

#define STAT_MIN_N 1000 /* statistics below this size say too little */

static void set_fail(bpc_check_t* out, const char* fmt, ...) __attribute__((format(printf, 2, 3)));
static void set_fail(bpc_check_t* out, const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(out->message, sizeof out->message, fmt, ap);
  va_end(ap);
  out->status = BPC_FAIL;
}

/* rand and randn. */
static void check_distribution(const bpc_case_t* c, const bpc_host_tensor_t* in,
                               const bpc_ref_result_t* ref, const void* const* got,
                               const bpc_tolerance_t* tol, bpc_check_t* out) {
  (void)in, (void)tol;
  const bpc_expected_t* e = &ref->out[0];
  const int64_t n = e->numel;
  const int is_normal = c->op_id == BP_OP_randn;
  out->status = BPC_PASS;
  out->message[0] = '\0';
  double* v = malloc((size_t)(n > 0 ? n : 1) * sizeof *v);
  if (!v) {
    out->status = BPC_RESOURCE_ERROR;
    snprintf(out->message, sizeof out->message, "suite: out of memory");
    return;
  }
  double sum = 0, sq = 0;
  for (int64_t k = 0; k < n; k++) {
    v[k] = bpc_load(e->dtype, got[0], k).f;
    if (!isfinite(v[k]) || (!is_normal && !(v[k] >= 0.0 && v[k] < 1.0))) {
      set_fail(out, "element [%lld] = %.17g is outside %s", (long long)k, v[k],
               is_normal ? "the finite range" : "[0, 1)");
      goto done;
    }
    sum += v[k];
  }
  if (n < STAT_MIN_N) goto done;
  double mean = sum / (double)n;
  for (int64_t k = 0; k < n; k++) sq += (v[k] - mean) * (v[k] - mean);
  double var = sq / (double)(n - 1);
  double mu = is_normal ? 0.0 : 0.5, sigma2 = is_normal ? 1.0 : 1.0 / 12.0;
  /* Var of the sample variance: (mu4 - sigma^4) / n; mu4 = 3 (normal), 1/80 (uniform). */
  double var_se = sqrt((is_normal ? 2.0 : 1.0 / 80.0 - 1.0 / 144.0) / (double)n);
  if (fabs(mean - mu) > 5.0 * sqrt(sigma2 / (double)n)) {
    set_fail(out, "mean %.6g is more than 5 standard errors from %g (n = %lld)", mean, mu, (long long)n);
    goto done;
  }
  if (fabs(var - sigma2) > 5.0 * var_se) {
    set_fail(out, "variance %.6g is more than 5 standard errors from %.6g (n = %lld)", var, sigma2,
             (long long)n);
    goto done;
  }
  /* Quantisation of narrow dtypes shifts the empirical CDF by up to one step. */
  double slack = e->dtype == BP_DTYPE_BF16 ? 1.0 / 128 : e->dtype == BP_DTYPE_F16 ? 1.0 / 1024 : 0.0;
  qsort(v, (size_t)n, sizeof *v, cmp_double);
  double ks = ks_distance(v, n, is_normal ? normal_cdf : unit_cdf);
  out->max_abs = ks;
  if (ks > 2.2 / sqrt((double)n) + slack) {
    set_fail(out, "Kolmogorov-Smirnov distance %.4g exceeds %.4g (n = %lld)", ks,
             2.2 / sqrt((double)n) + slack, (long long)n);
    goto done;
  }
  if (!is_normal) {
    int64_t bins[16] = {0};
    for (int64_t k = 0; k < n; k++) bins[(int)(v[k] * 16.0)]++;
    double chi = 0, expect = (double)n / 16.0;
    for (int b = 0; b < 16; b++) chi += ((double)bins[b] - expect) * ((double)bins[b] - expect) / expect;
    if (chi > 50.0) set_fail(out, "chi-square over 16 bins %.4g exceeds 50 (n = %lld)", chi, (long long)n);
  }
done:
  free(v);
}

static void check_randperm(const bpc_case_t* c, const bpc_host_tensor_t* in,
                           const bpc_ref_result_t* ref, const void* const* got,
                           const bpc_tolerance_t* tol, bpc_check_t* out) {
  (void)c, (void)in, (void)tol;
  const bpc_expected_t* e = &ref->out[0];
  const int64_t n = e->numel;
  out->status = BPC_PASS;
  out->message[0] = '\0';
  uint8_t* seen = calloc((size_t)(n > 0 ? n : 1), 1);
  if (!seen) {
    out->status = BPC_RESOURCE_ERROR;
    snprintf(out->message, sizeof out->message, "suite: out of memory");
    return;
  }
  int fl = bpc_dtype_is_float(e->dtype);
  int64_t fixed = 0;
  double sxy = 0;
  for (int64_t k = 0; k < n; k++) {
    bpc_num_t g = bpc_load(e->dtype, got[0], k);
    int64_t x = fl ? (int64_t)g.f : g.i;
    if ((fl && (double)x != g.f) || x < 0 || x >= n || seen[x]) {
      set_fail(out, "element [%lld] = %.17g is not a new value in 0..%lld", (long long)k,
               fl ? g.f : (double)g.i, (long long)(n - 1));
      free(seen);
      return;
    }
    seen[x] = 1;
    fixed += x == k;
    sxy += (double)x * (double)k;
  }
  free(seen);
  if (n >= 32) {
    if (fixed == n) {
      set_fail(out, "the identity permutation (n = %lld)", (long long)n);
      return;
    }
    /* Spearman correlation of position and value: ~ N(0, 1/(n-1)). */
    double nn = (double)n, mean = (nn - 1) / 2, var = (nn * nn - 1) / 12;
    double rho = (sxy / nn - mean * mean) / var;
    out->max_abs = fabs(rho);
    if (fabs(rho) > 5.0 / sqrt(nn - 1))
      set_fail(out, "rank correlation %.4g of position and value exceeds %.4g", rho, 5.0 / sqrt(nn - 1));
  }
}

static void check_dropout(const bpc_case_t* c, const bpc_host_tensor_t* in,
                          const bpc_ref_result_t* ref, const void* const* got,
                          const bpc_tolerance_t* tol, bpc_check_t* out) {
  (void)tol;
  const bpc_host_tensor_t* x = &in[0];
  const uint32_t dt = x->dtype;
  const int64_t n = ref->out[0].numel;
  const double p = c->attrs.random.p;
  const int train = c->attrs.random.train != 0;
  const double scale = !train ? 1.0 : p == 1.0 ? 0.0 : 1.0 / (1.0 - p);
  out->status = BPC_PASS;
  out->message[0] = '\0';
  int64_t kept = 0;
  for (int64_t k = 0; k < n; k++) {
    double xv = bpc_load(dt, x->data, k).f;
    double g = bpc_load(dt, got[0], k).f;
    int64_t m = bpc_load(BP_DTYPE_BOOL, got[1], k).i;
    if (m != 0 && m != 1) {
      set_fail(out, "mask [%lld] holds byte %lld, not a bool", (long long)k, (long long)m);
      return;
    }
    if (!train && !m) {
      set_fail(out, "evaluation mode dropped element [%lld]", (long long)k);
      return;
    }
    kept += m;
    /* PyTorch: out = (x * mask) * scale. */
    double want = (xv * (double)m) * scale;
    int ok;
    if (isnan(want)) ok = isnan(g);
    else if (want == 0.0) ok = g == 0.0 && signbit(g) == signbit(want);
    else if (!train || scale == 1.0) ok = g == want;
    else ok = fabs(g - want) <= 2.0 * bpc_ulp(want, dt) || (isinf(g) && isinf(bpc_round_to_dtype(want, dt)) && signbit(g) == signbit(want));
    if (!ok) {
      set_fail(out, "element [%lld]: x = %.9g, mask %lld, got %.9g, expected %.9g", (long long)k, xv,
               (long long)m, g, want);
      return;
    }
  }
  if (!train || p == 0.0) {
    if (kept != n) set_fail(out, "%lld of %lld elements dropped with p = %g", (long long)(n - kept), (long long)n, p);
    return;
  }
  if (p == 1.0) {
    if (kept != 0) set_fail(out, "%lld elements kept with p = 1", (long long)kept);
    return;
  }
  if (n >= STAT_MIN_N) {
    double frac = (double)kept / (double)n, se = sqrt(p * (1.0 - p) / (double)n);
    out->max_abs = fabs(frac - (1.0 - p));
    if (fabs(frac - (1.0 - p)) > 5.0 * se)
      set_fail(out, "kept fraction %.5g is more than 5 standard errors from %.5g (n = %lld)", frac,
               1.0 - p, (long long)n);
  }
}

static const bpc_ref_group_t k_groups[] = {
    {ref_random, BPC_ACC_EXACT, 0, BPC_OPS(BP_OP_rand, BP_OP_randn), bpc_gen_random, check_distribution},
    {ref_random, BPC_ACC_EXACT, 0, BPC_OPS(BP_OP_randperm), bpc_gen_random, check_randperm},
    {ref_random, BPC_ACC_EXACT, 0, BPC_OPS(BP_OP_dropout), bpc_gen_random, check_dropout},
};

const bpc_ref_family_t bpc_ref_family_random = BPC_FAMILY(random, k_groups);
