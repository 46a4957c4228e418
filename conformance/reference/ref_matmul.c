/* References of mm, bmm and addmm: fp64 dot products (exact integer ones
 * with wrap for integer dtypes), with per-element error-bound data.
 */
#include <math.h>
#include <string.h>

#include "ref.h"

bp_status_t bpc_ref_matmul(const bpc_case_t* c, const bpc_host_tensor_t* in, bpc_ref_result_t* res) {
  int is_addmm = c->op_id == BP_OP_addmm;
  int is_bmm = c->op_id == BP_OP_bmm;
  const bpc_host_tensor_t* self = is_addmm ? &in[0] : NULL;
  const bpc_host_tensor_t* A = &in[is_addmm ? 1 : 0];
  const bpc_host_tensor_t* B = &in[is_addmm ? 2 : 1];
  uint32_t want = is_bmm ? 3 : 2;
  uint32_t d = A->dtype;
  if (A->rank != want || B->rank != want) return bpc_ref_reject(res, "matmul: operands must be %u-d", want);
  if (B->dtype != d || (self && self->dtype != d)) return bpc_ref_reject(res, "matmul: operands must share one dtype");
  if (!bpc_dtype_is_int(d) && d != BP_DTYPE_F32 && d != BP_DTYPE_F64 && d != BP_DTYPE_F16 &&
      d != BP_DTYPE_BF16) {
    return bpc_ref_reject(res, "matmul over %s not in the suite", bpc_dtype_name(d));
  }
  int64_t b = is_bmm ? A->sizes[0] : 1;
  uint32_t o = is_bmm ? 1 : 0;
  int64_t n = A->sizes[o], k = A->sizes[o + 1], m = B->sizes[o + 1];
  if (B->sizes[o] != k || (is_bmm && B->sizes[0] != b)) return bpc_ref_reject(res, "matmul: inner sizes differ");
  int64_t sizes[3] = {b, n, m};
  bpc_expected_t* e = &res->out[0];
  bp_status_t st = bpc_ref_single_output(res, d, want, is_bmm ? sizes : sizes + 1, 1, d);
  if (st != BP_OK) return st;
  /* addmm scalars: NONE means 1. */
  double alpha_f = 1.0, beta_f = 1.0;
  int64_t alpha_i = 1, beta_i = 1;
  if (is_addmm) {
    uint32_t da, db;
    bpc_num_t al = bpc_scalar_value(&c->attrs.addmm.alpha, &da);
    bpc_num_t be = bpc_scalar_value(&c->attrs.addmm.beta, &db);
    if (da != BP_DTYPE_INVALID) { alpha_f = al.f; alpha_i = al.i; }
    if (db != BP_DTYPE_INVALID) { beta_f = be.f; beta_i = be.i; }
    if (bpc_dtype_is_int(d) && (da == BP_DTYPE_F64 || db == BP_DTYPE_F64)) {
      return bpc_ref_reject(res, "addmm: floating alpha/beta with integer operands");
    }
    if (self->rank > 2) return bpc_ref_reject(res, "addmm: self must be 0-d, 1-d or 2-d");
    for (uint32_t j = 0; j < self->rank; j++) {
      int64_t want_size = (self->rank == 2 && j == 0) ? n : m;
      if (self->sizes[j] != 1 && self->sizes[j] != want_size) {
        return bpc_ref_reject(res, "addmm: self does not broadcast to [n, m]");
      }
    }
  }
  int fl = bpc_dtype_is_float(d);
  int64_t out_idx[2];
  for (int64_t bb = 0; bb < b; bb++) {
    for (int64_t i = 0; i < n; i++) {
      for (int64_t j = 0; j < m; j++) {
        double acc = 0.0, mag = 0.0;
        uint64_t iacc = 0;
        for (int64_t p = 0; p < k; p++) {
          bpc_num_t x = bpc_load(d, A->data, (bb * n + i) * k + p);
          bpc_num_t y = bpc_load(d, B->data, (bb * k + p) * m + j);
          acc += x.f * y.f;
          mag += fabs(x.f * y.f);
          iacc += (uint64_t)x.i * (uint64_t)y.i;
        }
        int64_t lin = (bb * n + i) * m + j;
        double nterms = (double)k;
        if (is_addmm) {
          out_idx[0] = i;
          out_idx[1] = j;
          bpc_num_t s = bpc_load(d, self->data, bpc_broadcast_index(self, 2, out_idx));
          if (fl) {
            acc = alpha_f * acc;
            mag = fabs(alpha_f) * mag;
            if (beta_f != 0.0) { /* beta == 0 ignores self, NaN included */
              acc += beta_f * s.f;
              mag += fabs(beta_f * s.f);
            }
            nterms += 2.0;
          } else {
            iacc = (uint64_t)alpha_i * iacc + (uint64_t)beta_i * (uint64_t)s.i;
          }
        }
        if (fl) {
          e->f[lin] = acc;
          e->mag[lin] = mag;
          e->nterms[lin] = nterms;
        } else {
          e->i[lin] = bpc_wrap_int((int64_t)iacc, d);
        }
      }
    }
  }
  return BP_OK;
}
