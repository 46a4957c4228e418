/* References of the quantization family (QUANT): quantize, dequantize,
 * quantize_dynamic, scaled_mm, weight_only_mm (docs/semantics.md,
 * "Quantization"). Values are fp64 over the exact inputs; codes are decoded
 * here independently of any plugin helper (fp4 e2m1 and e8m0 included).
 *
 * Tolerances follow the quantization step: a code passes when it is the
 * nearest code to the exact x / scale (+ zero point), or one as near up to
 * a relative 2^-20 of the quotient (a device dividing in f32 may land on
 * the other side of a tie). quantize and quantize_dynamic use that checker;
 * quantize_dynamic checks its scales (f32/f16/bf16: within one ulp of
 * amax / qmax; e8m0: exactly the OCP MX exponent) and its codes against
 * the scales the device returned. dequantize is CR (one rounding of
 * (q - zp) * scale); the matmuls are REDUCE with the length of k.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "../cases_internal.h"
#include "ref.h"

void bpc_gen_quant(struct bpc_gen* g);

/* ---- codes -------------------------------------------------------------------- */

static int q4(uint32_t q) { return q == BP_DTYPE_I4 || q == BP_DTYPE_U4 || q == BP_DTYPE_F4E2M1FN; }
static int qint(uint32_t q) {
  return q == BP_DTYPE_I8 || q == BP_DTYPE_U8 || q == BP_DTYPE_I4 || q == BP_DTYPE_U4;
}
static void qrange(uint32_t q, int* lo, int* hi) {
  *lo = q == BP_DTYPE_I8 ? -128 : q == BP_DTYPE_I4 ? -8 : 0;
  *hi = q == BP_DTYPE_I8 ? 127 : q == BP_DTYPE_U8 ? 255 : q == BP_DTYPE_I4 ? 7 : 15;
}
static double qfmax(uint32_t q) {
  return q == BP_DTYPE_F8E4M3FN ? 448.0 : q == BP_DTYPE_F8E5M2 ? 57344.0 : 6.0;
}
static double e2m1_value(uint32_t c) {
  static const double mag[8] = {0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0};
  return (c & 8u) ? -mag[c & 7u] : mag[c & 7u];
}
static double e8m0_value(uint32_t c) { return c == 0xFFu ? NAN : ldexp(1.0, (int)c - 127); }

/* Value of a code (no scale, no zero point; ref.h). */
double bpc_quant_decode(uint32_t q, uint32_t c) {
  switch (q) {
    case BP_DTYPE_I8: return (double)(int8_t)c;
    case BP_DTYPE_I4: return (double)((int)(c ^ 8u) - 8);
    case BP_DTYPE_U8: case BP_DTYPE_U4: return (double)c;
    case BP_DTYPE_F8E4M3FN: return bpc_f8e4m3_to_f64((uint8_t)c);
    case BP_DTYPE_F8E5M2: return bpc_f8e5m2_to_f64((uint8_t)c);
    default: return e2m1_value(c & 15u);
  }
}
static double qdecode(uint32_t q, uint32_t c) { return bpc_quant_decode(q, c); }

/* Nearest-even fp4 e2m1 value, saturating (NaN gives +0). */
static double e2m1_round(double v) {
  if (isnan(v)) return 0.0;
  double a = fabs(v) > 6.0 ? 6.0 : fabs(v), best = 0.0;
  int bi = 0;
  for (int i = 1; i < 8; i++) {
    double d = fabs(e2m1_value((uint32_t)i) - a), db = fabs(best - a);
    if (d < db || (d == db && (i & 1) == 0 && (bi & 1))) best = e2m1_value((uint32_t)i), bi = i;
  }
  return v < 0 ? -best : best;
}

/* The code-domain target of x / s + zp and its round-to-nearest value:
 * ints: clamp(rne(t)); floats: the nearest value (saturating or not). */
static double qround(uint32_t q, double t, int saturate) {
  if (qint(q)) {
    int lo, hi;
    qrange(q, &lo, &hi);
    double r = nearbyint(t);
    return r < lo ? lo : r > hi ? hi : r;
  }
  if (q == BP_DTYPE_F4E2M1FN) return e2m1_round(t);
  if (saturate && !isnan(t)) t = t > qfmax(q) ? qfmax(q) : t < -qfmax(q) ? -qfmax(q) : t;
  return bpc_round_to_dtype(t, q);
}

/* 1 when code value g is acceptable for target t, up to a relative `rel`
 * of t (see the header; ref.h). */
int bpc_quant_code_ok(uint32_t q, double t, double g, int saturate, double rel) {
  double r = qround(q, t, saturate);
  if (isnan(r) || isnan(g)) return isnan(r) && isnan(g);
  if (g == r) return 1;
  if (isinf(r) || isinf(g) || isinf(t)) return 0;
  double tc = t;
  if (qint(q)) {
    int lo, hi;
    qrange(q, &lo, &hi);
    if (g < lo || g > hi) return 0;
  } else if (saturate || q == BP_DTYPE_F4E2M1FN) {
    tc = t > qfmax(q) ? qfmax(q) : t < -qfmax(q) ? -qfmax(q) : t;
  }
  return fabs(g - tc) <= fabs(r - tc) + rel * fabs(tc);
}
static int qaccept(uint32_t q, double t, double g, int saturate) {
  return bpc_quant_code_ok(q, t, g, saturate, 0x1p-20);
}

/* Code i of a stored row. */
static uint32_t qget(const uint8_t* p, int64_t i, int four) {
  return four ? (uint32_t)(p[i >> 1] >> ((i & 1) * 4)) & 15u : p[i];
}

/* ---- granularity ---------------------------------------------------------------- */

/* Index of the scale of logical element `lin` (multi-index idx). */
static int64_t scale_index(const bp_quantize_attrs_t* a, uint32_t rank, const int64_t* sizes,
                           const int64_t* idx, const bpc_host_tensor_t* s) {
  if (a->block_size == 0 && s->numel == 1) return 0;
  uint32_t axis = a->axis < 0 ? (uint32_t)(a->axis + (int32_t)rank) : (uint32_t)a->axis;
  if (a->block_size == 0) return idx[axis];
  int64_t lin = 0;
  for (uint32_t d = 0; d < rank; d++) {
    int64_t extent = d == axis ? (sizes[d] + a->block_size - 1) / a->block_size : sizes[d];
    int64_t i = d == axis ? idx[d] / a->block_size : idx[d];
    lin = lin * extent + i;
  }
  return lin;
}

static bp_status_t check_attrs(const bpc_case_t* c, bpc_ref_result_t* res) {
  uint32_t q = c->attrs.quantize.qdtype;
  if (!qint(q) && q != BP_DTYPE_F8E4M3FN && q != BP_DTYPE_F8E5M2 && q != BP_DTYPE_F4E2M1FN)
    return bpc_ref_reject(res, "qdtype %u is not a quantized dtype", q);
  return BP_OK;
}

/* ---- quantize ---------------------------------------------------------------------- */

static bp_status_t ref_quantize(const bpc_case_t* c, const bpc_host_tensor_t* in, bpc_ref_result_t* res) {
  const bp_quantize_attrs_t* a = &c->attrs.quantize;
  bp_status_t st = check_attrs(c, res);
  if (st != BP_OK) return st;
  const bpc_host_tensor_t *x = &in[0], *s = &in[1], *z = &in[2];
  uint32_t q = a->qdtype;
  int64_t sizes[BP_MAX_RANK];
  memcpy(sizes, x->sizes, sizeof sizes);
  uint32_t od = q;
  if (q4(q)) {
    if (x->rank == 0 || x->sizes[x->rank - 1] % 2) return bpc_ref_reject(res, "odd last dim");
    sizes[x->rank - 1] /= 2;
    od = BP_DTYPE_U8;
  }
  st = bpc_ref_single_output(res, od, x->rank, sizes, 0, BP_DTYPE_F32);
  if (st != BP_OK) return st;
  bpc_expected_t* e = &res->out[0];
  /* Expected codes (the checker re-derives acceptance from the inputs). */
  int64_t idx[BP_MAX_RANK] = {0};
  int sat = !(a->flags & BP_QUANTIZE_NO_SATURATE);
  for (int64_t i = 0; i < x->numel; i++) {
    int64_t si = scale_index(a, x->rank, x->sizes, idx, s);
    double zp = z->dtype != BP_DTYPE_INVALID ? bpc_load(z->dtype, z->data, si).f : 0.0;
    double t = bpc_load(x->dtype, x->data, i).f / bpc_load(s->dtype, s->data, si).f;
    double r = qround(q, isnan(t) && qint(q) ? 0.0 : t + (qint(q) ? zp : 0.0), sat);
    if (isnan(t) && qint(q)) r = zp;
    if (e->f) e->f[i] = r;
    else if (!q4(q)) e->i[i] = (int64_t)r & (q == BP_DTYPE_U8 ? 0xFF : -1);
    else {
      (void)0; /* packed bytes: compared by the checker */
    }
    bpc_next_index(x->rank, x->sizes, idx);
  }
  if (q4(q))
    for (int64_t i = 0; i < e->numel; i++) e->i[i] = 0;
  return BP_OK;
}

/* Checks the codes of `got` (stored like quantize's output) against the
 * targets x / scale (+ zp), with scales from `sv` (per element index). */
static void check_codes(const bpc_case_t* c, const bpc_host_tensor_t* x, const uint8_t* got,
                        const double* sv, const double* zv, bpc_check_t* out) {
  const bp_quantize_attrs_t* a = &c->attrs.quantize;
  uint32_t q = a->qdtype;
  int four = q4(q), sat = !(a->flags & BP_QUANTIZE_NO_SATURATE);
  for (int64_t i = 0; i < x->numel; i++) {
    double xv = bpc_load(x->dtype, x->data, i).f, s = sv[i], zp = zv ? zv[i] : 0.0;
    uint32_t code = qget(got, i, four);
    double g = qdecode(q, code);
    int ok;
    if (qint(q) && isnan(xv / s)) ok = g == zp;
    else if (s == 0.0) ok = g == qround(q, zp, sat);
    else ok = qaccept(q, xv / s + (qint(q) ? zp : 0.0), g, sat);
    if (!ok) {
      out->mismatches++;
      if (out->worst_index < 0) {
        out->worst_index = i;
        snprintf(out->message, sizeof out->message,
                 "element %lld: x = %.9g, scale = %.9g, zero point = %g: code %u (%g) is not a "
                 "nearest code (%g)",
                 (long long)i, xv, s, zp, code, g,
                 qround(q, xv / s + (qint(q) ? zp : 0.0), sat));
      }
    }
  }
  out->status = out->mismatches ? BPC_FAIL : BPC_PASS;
}

static void check_quantize(const bpc_case_t* c, const bpc_host_tensor_t* in, const bpc_ref_result_t* ref,
                           const void* const* got, const bpc_tolerance_t* tol, bpc_check_t* out) {
  (void)ref, (void)tol;
  const bp_quantize_attrs_t* a = &c->attrs.quantize;
  const bpc_host_tensor_t *x = &in[0], *s = &in[1], *z = &in[2];
  memset(out, 0, sizeof *out);
  out->worst_index = -1;
  out->max_ulps = -1;
  double* sv = malloc((size_t)(x->numel > 0 ? x->numel : 1) * sizeof(double));
  double* zv = z->dtype != BP_DTYPE_INVALID ? malloc((size_t)(x->numel > 0 ? x->numel : 1) * sizeof(double)) : NULL;
  if (!sv || (z->dtype != BP_DTYPE_INVALID && !zv)) {
    out->status = BPC_FAIL;
    snprintf(out->message, sizeof out->message, "out of host memory");
    free(sv), free(zv);
    return;
  }
  int64_t idx[BP_MAX_RANK] = {0};
  for (int64_t i = 0; i < x->numel; i++) {
    int64_t si = scale_index(a, x->rank, x->sizes, idx, s);
    sv[i] = bpc_load(s->dtype, s->data, si).f;
    if (zv) zv[i] = bpc_load(z->dtype, z->data, si).f;
    bpc_next_index(x->rank, x->sizes, idx);
  }
  check_codes(c, x, got[0], sv, zv, out);
  free(sv), free(zv);
}

/* ---- dequantize --------------------------------------------------------------------- */

static bp_status_t ref_dequantize(const bpc_case_t* c, const bpc_host_tensor_t* in, bpc_ref_result_t* res) {
  const bp_quantize_attrs_t* a = &c->attrs.quantize;
  bp_status_t st = check_attrs(c, res);
  if (st != BP_OK) return st;
  const bpc_host_tensor_t *x = &in[0], *s = &in[1], *z = &in[2];
  uint32_t q = a->qdtype;
  int four = q4(q);
  int64_t sizes[BP_MAX_RANK];
  memcpy(sizes, x->sizes, sizeof sizes);
  if (four) sizes[x->rank - 1] *= 2;
  uint32_t od = a->dtype ? a->dtype : s->dtype;
  st = bpc_ref_single_output(res, od, x->rank, sizes, 0, BP_DTYPE_F32);
  if (st != BP_OK) return st;
  bpc_expected_t* e = &res->out[0];
  int64_t idx[BP_MAX_RANK] = {0};
  const uint8_t* p = x->data;
  for (int64_t i = 0; i < e->numel; i++) {
    int64_t si = scale_index(a, x->rank, sizes, idx, s);
    double zp = z->dtype != BP_DTYPE_INVALID ? bpc_load(z->dtype, z->data, si).f : 0.0;
    e->f[i] = (qdecode(q, qget(p, i, four)) - zp) * bpc_load(s->dtype, s->data, si).f;
    bpc_next_index(x->rank, sizes, idx);
  }
  return BP_OK;
}

/* ---- quantize_dynamic ---------------------------------------------------------------- */

static double qmax_of(uint32_t q) { return q == BP_DTYPE_I8 ? 127.0 : q == BP_DTYPE_I4 ? 7.0 : qfmax(q); }

static double mx_exponent_scale(uint32_t q, double amax) {
  if (!isfinite(amax)) return NAN;
  if (amax == 0.0) return ldexp(1.0, -127);
  int e;
  (void)frexp(amax, &e);
  int emax = q == BP_DTYPE_F8E4M3FN ? 8 : q == BP_DTYPE_F8E5M2 ? 15 : 2;
  int k = e - 1 - emax;
  return ldexp(1.0, k < -127 ? -127 : k > 127 ? 127 : k);
}

static bp_status_t ref_quantize_dynamic(const bpc_case_t* c, const bpc_host_tensor_t* in, bpc_ref_result_t* res) {
  const bp_quantize_attrs_t* a = &c->attrs.quantize;
  bp_status_t st = check_attrs(c, res);
  if (st != BP_OK) return st;
  const bpc_host_tensor_t* x = &in[0];
  uint32_t q = a->qdtype;
  if (x->rank == 0) return bpc_ref_reject(res, "0-d input");
  int64_t sizes[BP_MAX_RANK], ss[BP_MAX_RANK];
  memcpy(sizes, x->sizes, sizeof sizes);
  memcpy(ss, x->sizes, sizeof ss);
  int64_t k = x->sizes[x->rank - 1];
  int64_t nb = a->block_size ? (k + a->block_size - 1) / a->block_size : 1;
  ss[x->rank - 1] = nb;
  uint32_t od = q4(q) ? BP_DTYPE_U8 : q;
  if (q4(q)) sizes[x->rank - 1] /= 2;
  uint32_t sd = a->dtype ? a->dtype : BP_DTYPE_F32;
  res->num_outputs = 2;
  st = bpc_expected_init(&res->out[0], od, x->rank, sizes, 0);
  if (st == BP_OK) st = bpc_expected_init(&res->out[1], sd, x->rank, ss, 0);
  res->compute_dtype = BP_DTYPE_F32;
  return st; /* values: check_dynamic */
}

static void check_dynamic(const bpc_case_t* c, const bpc_host_tensor_t* in, const bpc_ref_result_t* ref,
                          const void* const* got, const bpc_tolerance_t* tol, bpc_check_t* out) {
  (void)tol;
  const bp_quantize_attrs_t* a = &c->attrs.quantize;
  const bpc_host_tensor_t* x = &in[0];
  uint32_t q = a->qdtype, sd = ref->out[1].dtype;
  memset(out, 0, sizeof *out);
  out->worst_index = -1;
  out->max_ulps = -1;
  int64_t k = x->sizes[x->rank - 1], rows = k ? x->numel / k : 0;
  int64_t bs = a->block_size ? a->block_size : (k ? k : 1), nb = ref->out[1].sizes[x->rank - 1];
  double* sv = malloc((size_t)(x->numel > 0 ? x->numel : 1) * sizeof(double));
  if (!sv) {
    out->status = BPC_FAIL;
    snprintf(out->message, sizeof out->message, "out of host memory");
    return;
  }
  for (int64_t r = 0; r < rows && !out->mismatches; r++) {
    for (int64_t b = 0; b < nb; b++) {
      double amax = 0.0;
      int64_t c0 = b * bs, c1 = c0 + bs < k ? c0 + bs : k;
      for (int64_t j = c0; j < c1; j++) {
        double v = fabs(bpc_load(x->dtype, x->data, r * k + j).f);
        if (isnan(v) || v > amax) amax = isnan(amax) ? amax : v;
      }
      const uint8_t* sp = (const uint8_t*)got[1] + (size_t)(r * nb + b) * bpc_dtype_size(sd);
      double gs, want;
      int ok;
      if (sd == BP_DTYPE_F8E8M0FNU) {
        gs = e8m0_value(*sp);
        want = mx_exponent_scale(q, amax);
        ok = (isnan(gs) && isnan(want)) || gs == want;
      } else {
        gs = bpc_load(sd, sp, 0).f;
        want = amax / qmax_of(q);
        ok = (isnan(gs) && isnan(want)) || fabs(gs - want) <= bpc_ulp(want, sd);
      }
      if (!ok) {
        out->mismatches++;
        out->worst_index = r * nb + b;
        snprintf(out->message, sizeof out->message,
                 "output 1 (scale) of row %lld block %lld: got %.9g, expected %.9g (amax %.9g)",
                 (long long)r, (long long)b, gs, want, amax);
        break;
      }
      for (int64_t j = c0; j < c1; j++) sv[r * k + j] = gs;
    }
  }
  if (!out->mismatches) {
    check_codes(c, x, got[0], sv, NULL, out);
  } else {
    out->status = BPC_FAIL;
  }
  free(sv);
}

/* ---- scaled_mm ----------------------------------------------------------------------- */

static double act(uint32_t k, double v) {
  switch (k) {
    case BP_ACTIVATION_RELU: return v > 0 ? v : 0.0;
    case BP_ACTIVATION_GELU_ERF: return 0.5 * v * (1.0 + erf(v * M_SQRT1_2));
    case BP_ACTIVATION_GELU_TANH: return 0.5 * v * (1.0 + tanh(sqrt(2.0 / M_PI) * (v + 0.044715 * v * v * v)));
    case BP_ACTIVATION_SILU: return v / (1.0 + exp(-v));
    case BP_ACTIVATION_SIGMOID: return 1.0 / (1.0 + exp(-v));
    case BP_ACTIVATION_TANH: return tanh(v);
    default: return v;
  }
}

/* Element j of a scale/bias operand of length n (one element broadcasts;
 * absent: dflt). */
static double vec_at(const bpc_host_tensor_t* t, int64_t j, double dflt) {
  if (t->dtype == BP_DTYPE_INVALID) return dflt;
  return bpc_load(t->dtype, t->data, t->numel == 1 ? 0 : j).f;
}

static bp_status_t ref_scaled_mm(const bpc_case_t* c, const bpc_host_tensor_t* in, bpc_ref_result_t* res) {
  const bp_scaled_mm_attrs_t* a = &c->attrs.scaled_mm;
  const bpc_host_tensor_t *A = &in[0], *B = &in[1];
  if (A->rank != 2 || B->rank != 2 || A->sizes[1] != B->sizes[0]) return bpc_ref_reject(res, "shapes");
  int64_t m = A->sizes[0], k = A->sizes[1], n = B->sizes[1];
  int integer = A->dtype == BP_DTYPE_I8 || A->dtype == BP_DTYPE_U8;
  int epi = in[2].dtype || in[3].dtype || in[4].dtype || a->activation;
  uint32_t od = a->out_dtype ? a->out_dtype : integer && !epi ? BP_DTYPE_I32 : BP_DTYPE_F32;
  int64_t sizes[2] = {m, n};
  bp_status_t st = bpc_ref_single_output(res, od, 2, sizes, od != BP_DTYPE_I32, BP_DTYPE_F32);
  if (st != BP_OK) return st;
  bpc_expected_t* e = &res->out[0];
  for (int64_t i = 0; i < m; i++) {
    for (int64_t j = 0; j < n; j++) {
      double acc = 0.0, mag = 0.0;
      int64_t iacc = 0;
      for (int64_t t = 0; t < k; t++) {
        double av = bpc_load(A->dtype, A->data, i * k + t).f - (integer ? a->a_zero_point : 0);
        double bv = bpc_load(B->dtype, B->data, t * n + j).f - (integer ? a->b_zero_point : 0);
        if (integer) iacc += (int64_t)av * (int64_t)bv;
        acc += av * bv;
        mag += fabs(av * bv);
      }
      if (od == BP_DTYPE_I32) {
        e->i[i * n + j] = (int32_t)(uint32_t)(uint64_t)iacc;
        continue;
      }
      if (integer) acc = (double)iacc;
      double sa = vec_at(&in[2], i, 1.0), sb = vec_at(&in[3], j, 1.0), bias = vec_at(&in[4], j, 0.0);
      e->f[i * n + j] = act(a->activation, sa * sb * acc + bias);
      e->mag[i * n + j] = fabs(sa * sb) * mag + fabs(bias);
      e->nterms[i * n + j] = (double)k + 2.0;
    }
  }
  return BP_OK;
}

/* ---- weight_only_mm ------------------------------------------------------------------ */

static bp_status_t ref_weight_only_mm(const bpc_case_t* c, const bpc_host_tensor_t* in, bpc_ref_result_t* res) {
  const bp_quantize_attrs_t* a = &c->attrs.quantize;
  const bpc_host_tensor_t *X = &in[0], *W = &in[1], *S = &in[2], *Z = &in[3], *bias = &in[4];
  uint32_t q = a->qdtype;
  int four = q4(q);
  int64_t k = X->sizes[X->rank - 1], n = W->sizes[0], m = k ? X->numel / k : 0;
  int64_t g = a->block_size ? a->block_size : (k ? k : 1), groups = (k + g - 1) / g;
  if (groups == 0) groups = 1;
  int64_t sizes[BP_MAX_RANK];
  memcpy(sizes, X->sizes, sizeof sizes);
  sizes[X->rank - 1] = n;
  bp_status_t st = bpc_ref_single_output(res, X->dtype, X->rank, sizes, 1, BP_DTYPE_F32);
  if (st != BP_OK) return st;
  bpc_expected_t* e = &res->out[0];
  int64_t row_bytes = four ? k / 2 : k;
  const uint8_t* w = W->data;
  for (int64_t i = 0; i < m; i++) {
    for (int64_t j = 0; j < n; j++) {
      double acc = 0.0, mag = 0.0;
      for (int64_t t = 0; t < k; t++) {
        int64_t gi = j * groups + t / g;
        double zp = Z->dtype != BP_DTYPE_INVALID ? bpc_load(Z->dtype, Z->data, gi).f : 0.0;
        double code = four ? qdecode(q, qget(w + j * row_bytes, t, 1))
                           : bpc_load(W->dtype, W->data, j * k + t).f;
        double wv = (code - zp) * bpc_load(S->dtype, S->data, gi).f;
        double p = bpc_load(X->dtype, X->data, i * k + t).f * wv;
        acc += p;
        mag += fabs(p);
      }
      double b = vec_at(bias, j, 0.0);
      e->f[i * n + j] = act(a->activation, acc + b);
      e->mag[i * n + j] = mag + fabs(b);
      e->nterms[i * n + j] = (double)k + 2.0;
    }
  }
  return BP_OK;
}

static const bpc_ref_group_t k_groups[] = {
    {ref_quantize, BPC_ACC_EXACT, 0, BPC_OPS(BP_OP_quantize), bpc_gen_quant, check_quantize},
    {ref_dequantize, BPC_ACC_CR, 0, BPC_OPS(BP_OP_dequantize), bpc_gen_quant, NULL},
    {ref_quantize_dynamic, BPC_ACC_EXACT, 0, BPC_OPS(BP_OP_quantize_dynamic), bpc_gen_quant, check_dynamic},
    {ref_scaled_mm, BPC_ACC_REDUCE, 0, BPC_OPS(BP_OP_scaled_mm), bpc_gen_quant, NULL},
    {ref_weight_only_mm, BPC_ACC_REDUCE, 0, BPC_OPS(BP_OP_weight_only_mm), bpc_gen_quant, NULL},
};

const bpc_ref_family_t bpc_ref_family_quant = BPC_FAMILY(quant, k_groups);
