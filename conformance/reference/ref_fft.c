/* References of the fft family: fft_r2c and fft_c2r as plain O(n^2) DFTs in
 * fp64 (docs/semantics.md, "FFT"):
 *
 *   r2c  X[k] = s * sum_n x[n] exp(-2 pi i sum_d k_d n_d / N_d) over the
 *        listed dims (the last listed keeps N / 2 + 1 frequencies when
 *        onesided);
 *   c2r  the other listed dims first: H = inverse complex DFT (exp(+...));
 *        then each line of the last listed dim, length N = last_dim_size:
 *        x[n] = s * (Re H[0] + 2 sum_{0 < k < N/2} Re(H[k] exp(2 pi i k n / N))
 *                    + (N even) Re H[N/2] (-1)^n);
 *
 * with s = 1, 1 / sqrt(prod N_d) or 1 / prod N_d (attrs.normalization).
 * c64 results are stored as interleaved (re, im) pairs in bpc_expected_t
 * (tolerance.c compares them as two f32 values); the bound uses the sum of
 * the |terms| and the transform length.
 */
#include <complex.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ref.h"

void bpc_gen_fft(struct bpc_gen* g);

/* exp(sign * 2 pi i * num / den), the angle reduced exactly first. */
static double complex root(int sign, int64_t num, int64_t den) {
  num %= den;
  if (num < 0) num += den;
  double a = 2.0 * M_PI * (double)num / (double)den;
  return cos(a) + sign * sin(a) * I;
}

/* Wrapped distinct dims; 0 when invalid. */
static int dims_of(const bp_fft_attrs_t* a, uint32_t rank, uint32_t* dims) {
  if (a->num_dims < 1 || a->num_dims > rank) return 0;
  for (uint32_t i = 0; i < a->num_dims; i++) {
    int64_t d = a->dims[i] < 0 ? a->dims[i] + rank : a->dims[i];
    if (d < 0 || d >= (int64_t)rank) return 0;
    dims[i] = (uint32_t)d;
    for (uint32_t k = 0; k < i; k++)
      if (dims[k] == dims[i]) return 0;
  }
  return 1;
}

static double norm_scale(uint32_t norm, double n) {
  return norm == BP_FFT_NORM_BY_N ? 1.0 / n : norm == BP_FFT_NORM_ORTHO ? 1.0 / sqrt(n) : 1.0;
}

static int64_t lin_of(uint32_t rank, const int64_t* sizes, const int64_t* idx) {
  int64_t lin = 0;
  for (uint32_t d = 0; d < rank; d++) lin = lin * sizes[d] + idx[d];
  return lin;
}

static bp_status_t ref_fft_r2c(const bpc_case_t* c, const bpc_host_tensor_t* in, bpc_ref_result_t* res) {
  const bp_fft_attrs_t* a = &c->attrs.fft;
  const bpc_host_tensor_t* x = &in[0];
  uint32_t dims[BP_MAX_RANK], r = x->rank;
  if (x->dtype != BP_DTYPE_F32 || r < 1 || !dims_of(a, r, dims)) return bpc_ref_reject(res, "fft_r2c: f32 input, valid dims");
  uint32_t nd = a->num_dims, last = dims[nd - 1];
  double n = 1;
  for (uint32_t i = 0; i < nd; i++) {
    if (x->sizes[dims[i]] < 1) return bpc_ref_reject(res, "fft_r2c: empty transform dim");
    n *= (double)x->sizes[dims[i]];
  }
  int64_t osz[BP_MAX_RANK];
  memcpy(osz, x->sizes, sizeof(int64_t) * r);
  if (a->onesided) osz[last] = x->sizes[last] / 2 + 1;
  bp_status_t st = bpc_ref_single_output(res, BP_DTYPE_C64, r, osz, 1, BP_DTYPE_C64);
  if (st != BP_OK) return st;
  bpc_expected_t* e = &res->out[0];
  double s = norm_scale(a->normalization, n);
  int64_t sig[BP_MAX_RANK]; /* the signal subspace: sizes of the listed dims */
  for (uint32_t i = 0; i < nd; i++) sig[i] = x->sizes[dims[i]];
  int64_t o[BP_MAX_RANK] = {0};
  for (int64_t lin = 0; lin < e->numel; lin++, bpc_next_index(r, osz, o)) {
    double complex acc = 0;
    double mag = 0;
    int64_t ni[BP_MAX_RANK] = {0}, src[BP_MAX_RANK];
    do {
      memcpy(src, o, sizeof(int64_t) * r);
      double frac = 0; /* sum_d k_d n_d / N_d, mod 1 */
      for (uint32_t i = 0; i < nd; i++) {
        src[dims[i]] = ni[i];
        frac += (double)((o[dims[i]] * ni[i]) % sig[i]) / (double)sig[i];
      }
      double v = bpc_load(BP_DTYPE_F32, x->data, lin_of(r, x->sizes, src)).f;
      double ph = frac - floor(frac);
      acc += v * (cos(2.0 * M_PI * ph) - sin(2.0 * M_PI * ph) * I);
      mag += fabs(v);
    } while (bpc_next_index(nd, sig, ni));
    e->f[2 * lin] = s * creal(acc);
    e->f[2 * lin + 1] = s * cimag(acc);
    e->mag[2 * lin] = e->mag[2 * lin + 1] = s * mag;
    e->nterms[2 * lin] = e->nterms[2 * lin + 1] = n;
  }
  return BP_OK;
}

static bp_status_t ref_fft_c2r(const bpc_case_t* c, const bpc_host_tensor_t* in, bpc_ref_result_t* res) {
  const bp_fft_attrs_t* a = &c->attrs.fft;
  const bpc_host_tensor_t* x = &in[0];
  uint32_t dims[BP_MAX_RANK], r = x->rank;
  if (x->dtype != BP_DTYPE_C64 || r < 1 || !dims_of(a, r, dims)) return bpc_ref_reject(res, "fft_c2r: c64 input, valid dims");
  uint32_t nd = a->num_dims, last = dims[nd - 1];
  int64_t N = a->last_dim_size, half = N / 2 + 1;
  if (N < 1 || x->sizes[last] < half) return bpc_ref_reject(res, "fft_c2r: last_dim_size");
  int64_t hs[BP_MAX_RANK], osz[BP_MAX_RANK], hn = 1;
  double n = (double)N;
  for (uint32_t d = 0; d < r; d++) {
    hs[d] = d == last ? half : x->sizes[d];
    osz[d] = d == last ? N : x->sizes[d];
    hn *= hs[d];
  }
  for (uint32_t i = 0; i + 1 < nd; i++) {
    if (x->sizes[dims[i]] < 1) return bpc_ref_reject(res, "fft_c2r: empty transform dim");
    n *= (double)x->sizes[dims[i]];
  }
  bp_status_t st = bpc_ref_single_output(res, BP_DTYPE_F32, r, osz, 1, BP_DTYPE_F32);
  if (st != BP_OK || hn == 0) return st;
  /* H and its magnitudes over the half spectrum; dims before the last one
   * are transformed one at a time (a separable DFT). */
  double complex* h = malloc(sizeof(double complex) * (size_t)hn);
  double complex* t = malloc(sizeof(double complex) * (size_t)hn);
  double* hm = malloc(sizeof(double) * (size_t)hn);
  double* tm = malloc(sizeof(double) * (size_t)hn);
  if (!h || !t || !hm || !tm) {
    free(h), free(t), free(hm), free(tm);
    return BP_RESOURCE_EXHAUSTED;
  }
  int64_t idx[BP_MAX_RANK] = {0};
  for (int64_t lin = 0; lin < hn; lin++, bpc_next_index(r, hs, idx)) {
    int64_t src = lin_of(r, x->sizes, idx);
    const float* p = (const float*)x->data + 2 * src;
    h[lin] = (double)p[0] + (double)p[1] * I;
    hm[lin] = fabs((double)p[0]) + fabs((double)p[1]);
  }
  for (uint32_t i = 0; i + 1 < nd; i++) {
    uint32_t dd = dims[i];
    int64_t L = hs[dd];
    memset(idx, 0, sizeof idx);
    for (int64_t lin = 0; lin < hn; lin++, bpc_next_index(r, hs, idx)) {
      double complex acc = 0;
      double mag = 0;
      int64_t j[BP_MAX_RANK];
      memcpy(j, idx, sizeof j);
      for (int64_t m = 0; m < L; m++) {
        j[dd] = m;
        int64_t sl = lin_of(r, hs, j);
        acc += h[sl] * root(+1, idx[dd] * m, L);
        mag += hm[sl];
      }
      t[lin] = acc;
      tm[lin] = mag;
    }
    memcpy(h, t, sizeof(double complex) * (size_t)hn);
    memcpy(hm, tm, sizeof(double) * (size_t)hn);
  }
  bpc_expected_t* e = &res->out[0];
  double s = norm_scale(a->normalization, n);
  memset(idx, 0, sizeof idx);
  for (int64_t lin = 0; lin < e->numel; lin++, bpc_next_index(r, osz, idx)) {
    int64_t j[BP_MAX_RANK];
    memcpy(j, idx, sizeof j);
    int64_t pos = idx[last];
    double acc = 0, mag = 0;
    for (int64_t k = 0; k < half; k++) {
      j[last] = k;
      int64_t sl = lin_of(r, hs, j);
      int edge = k == 0 || (N % 2 == 0 && k == N / 2);
      double w = edge ? 1.0 : 2.0;
      if (edge) acc += creal(h[sl]) * creal(root(+1, k * pos, N));
      else acc += w * creal(h[sl] * root(+1, k * pos, N));
      mag += w * hm[sl];
    }
    e->f[lin] = s * acc;
    e->mag[lin] = s * mag;
    e->nterms[lin] = n;
  }
  free(h), free(t), free(hm), free(tm);
  return BP_OK;
}

static const bpc_ref_group_t k_groups[] = {
    {ref_fft_r2c, BPC_ACC_REDUCE, 0, BPC_OPS(BP_OP_fft_r2c), bpc_gen_fft, NULL},
    {ref_fft_c2r, BPC_ACC_REDUCE, 0, BPC_OPS(BP_OP_fft_c2r), bpc_gen_fft, NULL},
};

const bpc_ref_family_t bpc_ref_family_fft = BPC_FAMILY(fft, k_groups);
