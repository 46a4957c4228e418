/* backplane CPU plugin: the fft kernel family (fft_r2c, fft_c2r; aten._fft_r2c
 * and aten._fft_c2r, f32 <-> c64).
 *
 * Multi-dim transforms are separable: one 1-d complex transform per line
 * along each listed dim, in fp64 (twiddles and arithmetic), so results are
 * exact to the c64 / f32 rounding of the output. 1-d plans: mixed radix
 * (recursive decimation in time over the prime factors of n, with a generic
 * radix-p butterfly) when every prime factor is at most ATT_FFT_MAX_RADIX;
 * otherwise Bluestein's chirp-z over a power-of-two mixed-radix transform of
 * length >= 2n - 1. Lines run in parallel on the pool; each worker owns its
 * scratch.
 *
 * r2c: the input lines become complex (imaginary 0), every listed dim is
 * transformed forward, and the last listed dim keeps n / 2 + 1 frequencies
 * when onesided. c2r: the first last_dim_size / 2 + 1 frequencies of the last
 * listed dim are read; the other listed dims are transformed backward
 * (complex), then each last-dim line is extended Hermitian (X[n - k] =
 * conj(X[k]); the imaginary parts of X[0] and, for even n, X[n / 2] are
 * ignored, as pocketfft and cuFFT do) and transformed backward; the real
 * part is the result.
 */
#include <complex.h>
#include <math.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cpu_internal.h"

#define FFT_MAX_RADIX 31
#define FFT_MAX_FACTORS 64

typedef double complex fft_c;

/* A 1-d transform of length n in direction sign (-1 forward, +1 backward). */
typedef struct fft_plan {
  int64_t n;
  int sign;
  int nf;
  int64_t factors[FFT_MAX_FACTORS];
  fft_c* tw; /* tw[i] = exp(sign * 2 pi i * i / n), n entries (mixed radix) */
  /* Bluestein: chirp w[k] = exp(sign * pi i * k^2 / n), the padded length m,
   * the forward transform of the conjugate chirp, and the plans of length m. */
  int bluestein;
  int64_t m;
  fft_c* chirp;
  fft_c* chirp_hat;
  struct fft_plan* sub_fwd;
  struct fft_plan* sub_bwd;
} fft_plan_t;

static void fft_plan_free(fft_plan_t* p) {
  if (!p) return;
  free(p->tw);
  free(p->chirp);
  free(p->chirp_hat);
  fft_plan_free(p->sub_fwd);
  fft_plan_free(p->sub_bwd);
  free(p);
}

/* exp(sign * 2 pi i * num / den) with the angle reduced exactly first. */
static fft_c fft_root(int sign, int64_t num, int64_t den) {
  num %= den;
  if (num < 0) num += den;
  double a = 2.0 * M_PI * (double)num / (double)den;
  return cos(a) + (double)sign * sin(a) * I;
}

static void fft_exec(const fft_plan_t* p, fft_c* x, fft_c* scratch);
static int64_t fft_scratch_len(const fft_plan_t* p);

/* NULL when out of memory. */
static fft_plan_t* fft_plan_new(int64_t n, int sign) {
  fft_plan_t* p = calloc(1, sizeof *p);
  if (!p) return NULL;
  p->n = n;
  p->sign = sign;
  int64_t r = n;
  for (int64_t f = 4; r > 1 && p->nf < FFT_MAX_FACTORS;) {
    if (r % f == 0) {
      p->factors[p->nf++] = f;
      r /= f;
      continue;
    }
    f = f == 4 ? 2 : f == 2 ? 3 : f + 2;
    if (f * f > r) f = r; /* r is prime */
  }
  for (int i = 0; i < p->nf; i++) p->bluestein |= p->factors[i] > FFT_MAX_RADIX;
  if (!p->bluestein) {
    p->tw = malloc(sizeof(fft_c) * (size_t)(n > 0 ? n : 1));
    if (!p->tw) goto fail;
    for (int64_t i = 0; i < n; i++) p->tw[i] = fft_root(sign, i, n);
    return p;
  }
  p->m = 1;
  while (p->m < 2 * n - 1) p->m *= 2;
  p->chirp = malloc(sizeof(fft_c) * (size_t)n);
  p->chirp_hat = calloc((size_t)p->m, sizeof(fft_c));
  p->sub_fwd = fft_plan_new(p->m, -1);
  p->sub_bwd = fft_plan_new(p->m, +1);
  fft_c* scratch = p->sub_fwd ? malloc(sizeof(fft_c) * (size_t)fft_scratch_len(p->sub_fwd)) : NULL;
  if (!p->chirp || !p->chirp_hat || !scratch || !p->sub_bwd) {
    free(scratch);
    goto fail;
  }
  for (int64_t k = 0; k < n; k++) { /* k^2 mod 2n keeps the angle exact */
    int64_t k2 = (int64_t)(((unsigned __int128)k * (unsigned __int128)k) % (unsigned __int128)(2 * n));
    fft_c w = fft_root(sign, k2, 2 * n);
    p->chirp[k] = w;
    p->chirp_hat[k] = conj(w);
    if (k > 0) p->chirp_hat[p->m - k] = conj(w);
  }
  fft_exec(p->sub_fwd, p->chirp_hat, scratch);
  free(scratch);
  return p;
fail:
  fft_plan_free(p);
  return NULL;
}

/* Scratch elements fft_exec needs for plan p. */
static int64_t fft_scratch_len(const fft_plan_t* p) {
  if (!p->bluestein) return p->n + FFT_MAX_RADIX;
  return p->m + fft_scratch_len(p->sub_fwd);
}

/* out[k] = sum_j in[j * is] * tw^(j * k * step) for the sub-problem of
 * length n = product of factors[f..], tw the plan's n_total roots. */
static void fft_rec(const fft_plan_t* p, int f, int64_t n, const fft_c* in, int64_t is, fft_c* out,
                    int64_t step, fft_c* tmp) {
  if (n == 1) {
    out[0] = in[0];
    return;
  }
  const int64_t r = p->factors[f], m = n / r;
  for (int64_t q = 0; q < r; q++) fft_rec(p, f + 1, m, in + q * is, is * r, out + q * m, step * r, tmp);
  /* Butterflies: X[k + s m] = sum_q Y_q[k] w_n^(q (k + s m)). */
  for (int64_t k = 0; k < m; k++) {
    for (int64_t q = 0; q < r; q++) tmp[q] = out[q * m + k];
    if (r == 2) {
      fft_c t = tmp[1] * p->tw[(k * step) % p->n];
      out[k] = tmp[0] + t;
      out[k + m] = tmp[0] - t;
      continue;
    }
    for (int64_t s = 0; s < r; s++) {
      int64_t kk = k + s * m;
      fft_c acc = tmp[0];
      for (int64_t q = 1; q < r; q++) acc += tmp[q] * p->tw[(q * kk % n) * step % p->n];
      out[kk] = acc;
    }
  }
}

/* x (n elements) <- its transform; scratch has fft_scratch_len(p) elements. */
static void fft_exec(const fft_plan_t* p, fft_c* x, fft_c* scratch) {
  const int64_t n = p->n;
  if (n <= 1) return;
  if (!p->bluestein) {
    fft_c* out = scratch;
    fft_c* tmp = scratch + n;
    fft_rec(p, 0, n, x, 1, out, 1, tmp);
    memcpy(x, out, sizeof(fft_c) * (size_t)n);
    return;
  }
  /* X[k] = w[k] * sum_j (x[j] w[j]) conj(w[k - j]): a circular convolution of
   * length m. */
  fft_c* a = scratch;
  fft_c* sub = scratch + p->m;
  for (int64_t j = 0; j < n; j++) a[j] = x[j] * p->chirp[j];
  for (int64_t j = n; j < p->m; j++) a[j] = 0;
  fft_exec(p->sub_fwd, a, sub);
  for (int64_t j = 0; j < p->m; j++) a[j] *= p->chirp_hat[j];
  fft_exec(p->sub_bwd, a, sub);
  for (int64_t k = 0; k < n; k++) x[k] = a[k] * p->chirp[k] / (double)p->m;
}

/* ---- lines over a work array ------------------------------------------------- */
/* The work array is dense row-major complex over `sizes`; a pass transforms
 * every line along dim `dim`. */
typedef struct fft_pass {
  fft_c* work;
  uint32_t rank;
  int64_t sizes[BP_MAX_RANK];
  uint32_t dim;
  int64_t len, inner; /* line length; stride between its elements */
  const fft_plan_t* plan;
  /* c2r's last pass: each line of len = n / 2 + 1 stored frequencies is
   * extended Hermitian to n, transformed, and its n real results packed
   * back into the line (0: a plain complex pass). */
  int hermitian;
  _Atomic int failed;
} fft_pass_t;

static void fft_lines(void* ctx, int64_t lb, int64_t le) {
  fft_pass_t* ps = ctx;
  const int64_t n = ps->plan->n, len = ps->len, inner = ps->inner;
  fft_c* buf = malloc(sizeof(fft_c) * (size_t)(n + fft_scratch_len(ps->plan)));
  if (!buf) {
    atomic_store(&ps->failed, 1);
    return;
  }
  fft_c* scratch = buf + n;
  for (int64_t l = lb; l < le; l++) {
    fft_c* base = ps->work + (l / inner) * inner * len + l % inner;
    if (!ps->hermitian) {
      for (int64_t i = 0; i < n; i++) buf[i] = base[i * inner];
    } else { /* len = n / 2 + 1 stored values; output written back in place below */
      buf[0] = creal(base[0]);
      for (int64_t k = 1; k < len; k++) {
        buf[k] = base[k * inner];
        if (n - k > k) buf[n - k] = conj(base[k * inner]);
      }
      if (n % 2 == 0) buf[n / 2] = creal(base[(n / 2) * inner]);
    }
    fft_exec(ps->plan, buf, scratch);
    if (!ps->hermitian) {
      for (int64_t i = 0; i < n; i++) base[i * inner] = buf[i];
    } else {
      /* The n real results replace the line: two per complex slot (slot
       * i / 2, part i % 2; a complex is laid out as two doubles). */
      for (int64_t i = 0; i < len; i++) base[i * inner] = 0;
      for (int64_t i = 0; i < n; i++) {
        double* slot = (double*)(void*)&base[(i / 2) * inner];
        slot[i % 2] = creal(buf[i]);
      }
    }
  }
  free(buf);
}

static bp_status_t fft_run_pass(fft_pass_t* ps) {
  int64_t lines = 1;
  ps->inner = 1;
  for (uint32_t d = 0; d < ps->rank; d++) {
    if (d != ps->dim) lines *= ps->sizes[d];
    if (d > ps->dim) ps->inner *= ps->sizes[d];
  }
  ps->len = ps->sizes[ps->dim];
  if (lines == 0) return BP_OK;
  cpu_parallel_for(lines, 1 + 4096 / (ps->plan->n + 1), fft_lines, ps);
  if (atomic_load(&ps->failed)) return cpu_error(BP_RESOURCE_EXHAUSTED, "cpu: fft: out of memory");
  return BP_OK;
}

/* ---- the ops ------------------------------------------------------------------ */

/* Visits every element of `sizes` (row-major), giving its linear index and
 * its element offset for `strides`. */
#define FFT_FOR_EACH(rank, sizes, strides, lin, off, ...)                      \
  do {                                                                         \
    int64_t idx_[BP_MAX_RANK] = {0}, total_ = 1;                               \
    for (uint32_t d_ = 0; d_ < (rank); d_++) total_ *= (sizes)[d_];            \
    int64_t off = 0;                                                           \
    for (int64_t lin = 0; lin < total_; lin++) {                               \
      __VA_ARGS__;                                                             \
      for (uint32_t d_ = (rank); d_-- > 0;) {                                  \
        off += (strides)[d_];                                                  \
        if (++idx_[d_] < (sizes)[d_]) break;                                   \
        off -= (strides)[d_] * (sizes)[d_];                                    \
        idx_[d_] = 0;                                                          \
      }                                                                        \
    }                                                                          \
  } while (0)

static double fft_scale(uint32_t norm, double n) {
  if (norm == BP_FFT_NORM_BY_N) return 1.0 / n;
  if (norm == BP_FFT_NORM_ORTHO) return 1.0 / sqrt(n);
  return 1.0;
}

/* Wrapped, distinct dims of attrs for a tensor of rank r; 0 when invalid. */
static int fft_dims(const bp_fft_attrs_t* a, uint32_t r, uint32_t* dims) {
  if (!a || a->num_dims < 1 || a->num_dims > r) return 0;
  for (uint32_t i = 0; i < a->num_dims; i++) {
    int64_t d = a->dims[i] < 0 ? a->dims[i] + r : a->dims[i];
    if (d < 0 || d >= (int64_t)r) return 0;
    dims[i] = (uint32_t)d;
    for (uint32_t k = 0; k < i; k++)
      if (dims[k] == dims[i]) return 0;
  }
  return 1;
}

/* Runs complex passes over `dims` (skipping `skip`, or none with -1). */
static bp_status_t fft_passes(fft_c* work, uint32_t rank, const int64_t* sizes, const uint32_t* dims,
                              uint32_t nd, int skip, int sign) {
  bp_status_t st = BP_OK;
  for (uint32_t i = 0; i < nd && !st; i++) {
    if ((int)dims[i] == skip || sizes[dims[i]] <= 1) continue;
    fft_pass_t ps;
    memset(&ps, 0, sizeof ps);
    ps.work = work;
    ps.rank = rank;
    memcpy(ps.sizes, sizes, sizeof(int64_t) * rank);
    ps.dim = dims[i];
    fft_plan_t* plan = fft_plan_new(sizes[dims[i]], sign);
    if (!plan) return cpu_error(BP_RESOURCE_EXHAUSTED, "cpu: fft: cannot plan length %lld",
                                (long long)sizes[dims[i]]);
    ps.plan = plan;
    st = fft_run_pass(&ps);
    fft_plan_free(plan);
  }
  return st;
}

static bp_status_t fft_r2c(const bp_op_call_t* call) {
  const bp_fft_attrs_t* a = call->attrs;
  const bp_tensor_desc_t *in = call->inputs[0], *o = call->outputs[0];
  uint32_t dims[BP_MAX_RANK], r = in->rank;
  if (in->dtype != BP_DTYPE_F32 || o->dtype != BP_DTYPE_C64 || o->rank != r || !fft_dims(a, r, dims))
    return cpu_error(BP_INVALID_ARGUMENT, "cpu: fft_r2c: bad operands or dims");
  uint32_t last = dims[a->num_dims - 1];
  double n = 1;
  int64_t numel = 1;
  for (uint32_t d = 0; d < r; d++) {
    int64_t want = d == last && a->onesided ? in->sizes[d] / 2 + 1 : in->sizes[d];
    if (o->sizes[d] != want) return cpu_error(BP_INVALID_ARGUMENT, "cpu: fft_r2c: output shape");
    numel *= in->sizes[d];
  }
  for (uint32_t i = 0; i < a->num_dims; i++) n *= (double)in->sizes[dims[i]];
  if (numel == 0) return BP_OK;
  fft_c* work = malloc(sizeof(fft_c) * (size_t)numel);
  if (!work) return cpu_error(BP_RESOURCE_EXHAUSTED, "cpu: fft_r2c: out of memory");
  const float* src = (const float*)(void*)cpu_desc_ptr(in);
  FFT_FOR_EACH(r, in->sizes, in->strides, lin, off, work[lin] = src[off]);
  bp_status_t st = fft_passes(work, r, in->sizes, dims, a->num_dims, -1, -1);
  if (!st) {
    double s = fft_scale(a->normalization, n);
    float* dst = (float*)(void*)cpu_desc_ptr(o);
    int64_t ocols = o->sizes[last], icols = in->sizes[last], inner = 1;
    for (uint32_t d = last + 1; d < r; d++) inner *= in->sizes[d];
    /* output element lin (over o's shape) reads work at the same index with
     * dim `last` widened back to the input's length */
    FFT_FOR_EACH(r, o->sizes, o->strides, lin, off, {
      int64_t outer = lin / (ocols * inner), k = (lin / inner) % ocols, rest = lin % inner;
      fft_c v = work[(outer * icols + k) * inner + rest] * s;
      dst[2 * off] = (float)creal(v);
      dst[2 * off + 1] = (float)cimag(v);
    });
  }
  free(work);
  return st;
}

static bp_status_t fft_c2r(const bp_op_call_t* call) {
  const bp_fft_attrs_t* a = call->attrs;
  const bp_tensor_desc_t *in = call->inputs[0], *o = call->outputs[0];
  uint32_t dims[BP_MAX_RANK], r = in->rank;
  if (in->dtype != BP_DTYPE_C64 || o->dtype != BP_DTYPE_F32 || o->rank != r || !fft_dims(a, r, dims))
    return cpu_error(BP_INVALID_ARGUMENT, "cpu: fft_c2r: bad operands or dims");
  uint32_t last = dims[a->num_dims - 1];
  int64_t N = a->last_dim_size, half = N / 2 + 1;
  if (N < 1 || in->sizes[last] < half)
    return cpu_error(BP_INVALID_ARGUMENT, "cpu: fft_c2r: last_dim_size does not fit the input");
  int64_t hs[BP_MAX_RANK], numel = 1;
  double n = 1;
  for (uint32_t d = 0; d < r; d++) {
    hs[d] = d == last ? half : in->sizes[d];
    int64_t want = d == last ? N : in->sizes[d];
    if (o->sizes[d] != want) return cpu_error(BP_INVALID_ARGUMENT, "cpu: fft_c2r: output shape");
    numel *= hs[d];
  }
  for (uint32_t i = 0; i < a->num_dims; i++) n *= (double)(dims[i] == last ? N : in->sizes[dims[i]]);
  if (numel == 0) return BP_OK;
  /* The work array holds the half spectrum; N reals of a line fit its
   * half = N / 2 + 1 complex slots (2 * half >= N). */
  fft_c* work = malloc(sizeof(fft_c) * (size_t)numel);
  if (!work) return cpu_error(BP_RESOURCE_EXHAUSTED, "cpu: fft_c2r: out of memory");
  const float* src = (const float*)(void*)cpu_desc_ptr(in);
  FFT_FOR_EACH(r, hs, in->strides, lin, off, work[lin] = src[2 * off] + src[2 * off + 1] * I);
  bp_status_t st = fft_passes(work, r, hs, dims, a->num_dims, (int)last, +1);
  fft_plan_t* plan = NULL;
  if (!st && !(plan = fft_plan_new(N, +1)))
    st = cpu_error(BP_RESOURCE_EXHAUSTED, "cpu: fft_c2r: cannot plan length %lld", (long long)N);
  if (!st) {
    fft_pass_t ps;
    memset(&ps, 0, sizeof ps);
    ps.work = work;
    ps.rank = r;
    memcpy(ps.sizes, hs, sizeof(int64_t) * r);
    ps.dim = last;
    ps.plan = plan;
    ps.hermitian = 1;
    st = fft_run_pass(&ps);
  }
  if (!st) {
    double s = fft_scale(a->normalization, n);
    float* dst = (float*)(void*)cpu_desc_ptr(o);
    int64_t inner = 1;
    for (uint32_t d = last + 1; d < r; d++) inner *= hs[d];
    FFT_FOR_EACH(r, o->sizes, o->strides, lin, off, {
      int64_t outer = lin / (N * inner), i = (lin / inner) % N, rest = lin % inner;
      const double* slot = (const double*)(const void*)&work[(outer * half + i / 2) * inner + rest];
      dst[off] = (float)(slot[i % 2] * s);
    });
  }
  fft_plan_free(plan);
  free(work);
  return st;
}

static bp_status_t exec_fft(const bp_op_call_t* call) {
  if (!call->attrs) return cpu_error(BP_INVALID_ARGUMENT, "cpu: fft: no attrs");
  if (call->op_id == BP_OP_fft_r2c) return fft_r2c(call);
  if (call->op_id == BP_OP_fft_c2r) return fft_c2r(call);
  return cpu_error(BP_UNIMPLEMENTED, "cpu: op %s is not in the fft family", cpu_op_name(call->op_id));
}

static int supported_fft(const bp_op_call_t* call, char* msg, size_t cap) {
  int r2c = call->op_id == BP_OP_fft_r2c;
  uint32_t in = call->num_inputs ? call->inputs[0]->dtype : BP_DTYPE_INVALID;
  uint32_t want_in = r2c ? BP_DTYPE_F32 : BP_DTYPE_C64, want_out = r2c ? BP_DTYPE_C64 : BP_DTYPE_F32;
  if (in == want_in && call->outputs[0]->dtype == want_out) return 0;
  snprintf(msg, cap, "%s -> %s (takes %s -> %s)", bp_dtype_name(in) ? bp_dtype_name(in) : "?",
           bp_dtype_name(call->outputs[0]->dtype) ? bp_dtype_name(call->outputs[0]->dtype) : "?",
           bp_dtype_name(want_in), bp_dtype_name(want_out));
  return BP_SUPPORT_DTYPE;
}

const cpu_family_t cpu_family_fft = {"fft", CPU_FAMILY_OPS(BP_OP_fft_r2c, BP_OP_fft_c2r), exec_fft,
                                     supported_fft, 1};
