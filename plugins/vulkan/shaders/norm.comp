#version 460
// backplane Vulkan plugin: row-wise normalizations (softmax, log_softmax,
// layer_norm, rms_norm and the add_ forms of the last two: flag 16 first
// writes residual_out = input + residual, rounded to the dtype, and
// normalizes what it stored). One workgroup of 64 lanes per row; a row is the
// set of elements over the normalized dims, the other ("kept") dims index
// rows. Statistics accumulate in double (exp/log from common.glsl), so f32
// results round once.
//
// Metadata: 0-1 input, 2 input dtype, 3 output dtype, 4-5 output, 6 rows,
// 7 row length, 8 kept rank, 9 row rank, 10 op (0 softmax, 1 log_softmax,
// 2 layer_norm, 3 rms_norm), 11 flags (1 weight, 2 bias, 4 mean, 8 rstd,
// 16 residual add),
// 12-13 eps, 14-15 weight, 16 weight dtype, 17 bias dtype, 18-19 bias,
// 20-21 mean, 22-23 rstd, 24 stat dtype; 26.. kept sizes, 34.. kept input
// strides, 50.. kept output strides, 66.. kept stat strides, 82.. row
// sizes, 90.. row input strides, 106.. row output strides, 122.. row weight
// strides, 138.. row bias strides, 154-155 residual, 156-157 residual_out,
// 158.. kept residual strides, 174.. kept residual_out strides, 190.. row
// residual strides, 206.. row residual_out strides (all strides int64).
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"
layout(local_size_x = 64) in;
layout(constant_id = 0) const uint SC_OP = 0;
layout(constant_id = 1) const uint SC_IN_DT = 1;
layout(constant_id = 2) const uint SC_OUT_DT = 1;

#include "wg_reduce.glsl"

int64_t row_off(uint j, uint rrank, uint base) {
  int64_t off = 0l;
  uint r = j;
  for (int d = int(rrank) - 1; d >= 0; d--) {
    uint sz = M(82u + uint(d));
    off += int64_t(r % sz) * MI64(base + 2u * uint(d));
    r /= sz;
  }
  return off;
}

void main() {
  uint rows = M(6u), n = M(7u), krank = M(8u), rrank = M(9u), flags = M(11u);
  uint64_t in_base = M64(0u), out_base = M64(4u);
  uint lane = gl_LocalInvocationID.x;
  double eps = MF64(12u);
  for (uint row = gl_WorkGroupID.x; row < rows; row += gl_NumWorkGroups.x) {
    int64_t ioff = 0l, ooff = 0l, soff = 0l, roff = 0l, zoff = 0l;
    uint rem = row;
    for (int d = int(krank) - 1; d >= 0; d--) {
      uint sz = M(26u + uint(d));
      int64_t idx = int64_t(rem % sz);
      rem /= sz;
      ioff += idx * MI64(34u + 2u * uint(d));
      ooff += idx * MI64(50u + 2u * uint(d));
      soff += idx * MI64(66u + 2u * uint(d));
      roff += idx * MI64(158u + 2u * uint(d));
      zoff += idx * MI64(174u + 2u * uint(d));
    }
    if (SC_OP <= 1u) {
      double mx = -1.0lf / 0.0lf;
      for (uint j = lane; j < n; j += 64u) {
        double x = load_f64(in_base, ioff + row_off(j, rrank, 90u), SC_IN_DT);
        if (!isnan(mx) && (isnan(x) || x > mx)) mx = x;
      }
      mx = reduce_max(mx);
      double sum = 0.0lf;
      bool shift = true; // PyTorch subtracts the max even when it is infinite (NaN rows)
      for (uint j = lane; j < n; j += 64u) {
        double x = load_f64(in_base, ioff + row_off(j, rrank, 90u), SC_IN_DT);
        sum += exp_d(shift ? x - mx : x);
      }
      sum = reduce_sum(sum);
      double lse = log_d(sum);
      for (uint j = lane; j < n; j += 64u) {
        double x = load_f64(in_base, ioff + row_off(j, rrank, 90u), SC_IN_DT);
        double xs = shift ? x - mx : x;
        double y = SC_OP == 0u ? exp_d(xs) / sum : xs - lse;
        store_f64(out_base, ooff + row_off(j, rrank, 106u), SC_OUT_DT, y);
      }
    } else {
      // the row normalized: the input's, or residual_out once written (each
      // lane reads back only the elements it stored itself)
      uint64_t xb = in_base;
      int64_t xoff = ioff;
      uint xs = 90u;
      if ((flags & 16u) != 0u) {
        for (uint j = lane; j < n; j += 64u) {
          double z = load_f64(in_base, ioff + row_off(j, rrank, 90u), SC_IN_DT) +
                     load_f64(M64(154u), roff + row_off(j, rrank, 190u), SC_IN_DT);
          store_f64(M64(156u), zoff + row_off(j, rrank, 206u), SC_IN_DT, z);
        }
        xb = M64(156u);
        xoff = zoff;
        xs = 206u;
      }
      double mean = 0.0lf, var = 0.0lf;
      if (SC_OP == 2u) {
        double s = 0.0lf;
        for (uint j = lane; j < n; j += 64u) s += load_f64(xb, xoff + row_off(j, rrank, xs), SC_IN_DT);
        mean = reduce_sum(s) / double(n);
      }
      double q = 0.0lf;
      for (uint j = lane; j < n; j += 64u) {
        double x = load_f64(xb, xoff + row_off(j, rrank, xs), SC_IN_DT) - mean;
        q += x * x;
      }
      var = reduce_sum(q) / double(n);
      double rstd = 1.0lf / sqrt(var + eps);
      for (uint j = lane; j < n; j += 64u) {
        double x = load_f64(xb, xoff + row_off(j, rrank, xs), SC_IN_DT);
        double y = (x - mean) * rstd;
        if ((flags & 1u) != 0u) y *= load_f64(M64(14u), row_off(j, rrank, 122u), M(16u));
        if ((flags & 2u) != 0u) y += load_f64(M64(18u), row_off(j, rrank, 138u), M(17u));
        store_f64(out_base, ooff + row_off(j, rrank, 106u), SC_OUT_DT, y);
      }
      if (lane == 0u) {
        if ((flags & 4u) != 0u) store_f64(M64(20u), soff, M(24u), mean);
        if ((flags & 8u) != 0u) store_f64(M64(22u), soff, M(24u), rstd);
      }
    }
    barrier();
  }
}
