#version 460
// backplane Vulkan plugin: reductions (sum, mean, prod, amax, amin, any,
// argmax, argmin) over any set of dims of a strided tensor. One workgroup
// per output element: 64 lanes stride over the reduced elements, then a
// tree combine in shared memory (fixed order: results are deterministic).
// CT_F64: floating compute dtypes accumulate in double; CT_I64: integers
// and bool accumulate in int64 (wrapping like PyTorch).
//
// Metadata: 0-1 input address, 2 input dtype, 3 output dtype, 4-5 output
// address, 6 outputs, 7 reduced count, 8 kept rank, 9 reduced rank,
// 12..19 kept sizes, 20.. kept input strides (i64 x8), 36.. kept output
// strides (i64 x8), 52..59 reduced sizes, 60.. reduced input strides.
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"
layout(local_size_x = 64) in;
// 0 sum 1 mean 2 prod 3 amax 4 amin 5 any 6 argmax 7 argmin 8 logsumexp
// 9 max_dim 10 min_dim (values and indices; words 76-77 the indices'
// address, 78.. their kept strides)
layout(constant_id = 0) const uint SC_OP = 0;
layout(constant_id = 1) const uint SC_IN_DT = 1;
layout(constant_id = 2) const uint SC_OUT_DT = 1;

#ifdef CT_F64
#define ACC double
#define LOAD load_f64
#define STORE store_f64
bool isnan_acc(ACC v) { return isnan(v); }
#else
#define ACC int64_t
#define LOAD load_i64
#define STORE store_i64
bool isnan_acc(ACC v) { return false; }
#endif

shared ACC s_val[64];
shared int64_t s_idx[64];

// max_dim / min_dim combine like argmax / argmin.
uint comb_op() { return SC_OP == 9u ? 6u : SC_OP == 10u ? 7u : SC_OP; }

ACC identity() {
  switch (comb_op()) {
    case 2u: return ACC(1);
#ifdef CT_F64
    case 3u: case 6u: return -1.0lf / 0.0lf;
    case 4u: case 7u: return 1.0lf / 0.0lf;
#else
    case 3u: case 6u: return ACC(-9223372036854775807l - 1l);
    case 4u: case 7u: return ACC(9223372036854775807l);
#endif
  }
  return ACC(0);
}

// Combine (a, ia) with (b, ib); b comes later in element order.
void combine(inout ACC a, inout int64_t ia, ACC b, int64_t ib) {
  switch (comb_op()) {
    case 0u: case 1u: a += b; return;
    case 2u: a *= b; return;
    case 5u: a = (a != ACC(0) || isnan_acc(a) || b != ACC(0) || isnan_acc(b)) ? ACC(1) : ACC(0); return;
    case 3u: if (isnan_acc(a)) return; if (isnan_acc(b) || b > a) a = b; return;
    case 4u: if (isnan_acc(a)) return; if (isnan_acc(b) || b < a) a = b; return;
    case 6u: case 7u: {
      if (ib < 0l) return;
      if (ia < 0l) { a = b; ia = ib; return; }
      bool an = isnan_acc(a), bn = isnan_acc(b);
      bool take;
      if (an || bn) take = bn && (!an || ib < ia);
      else if (b == a) take = ib < ia;
      else take = comb_op() == 6u ? b > a : b < a;
      if (take) { a = b; ia = ib; }
      return;
    }
  }
}

void main() {
  uint nout = M(6u), nred = M(7u), krank = M(8u), rrank = M(9u);
  uint64_t in_base = M64(0u), out_base = M64(4u);
  uint lane = gl_LocalInvocationID.x;
  for (uint o = gl_WorkGroupID.x; o < nout; o += gl_NumWorkGroups.x) {
    int64_t ioff = 0l, ooff = 0l, xoff = 0l;
    uint rem = o;
    for (int d = int(krank) - 1; d >= 0; d--) {
      uint sz = M(12u + uint(d));
      uint idx = rem % sz;
      rem /= sz;
      ioff += int64_t(idx) * MI64(20u + 2u * uint(d));
      ooff += int64_t(idx) * MI64(36u + 2u * uint(d));
      if (SC_OP >= 9u) xoff += int64_t(idx) * MI64(78u + 2u * uint(d));
    }
#ifdef CT_F64
    if (SC_OP == 8u) {
      // logsumexp: max, then log(sum exp(x - max)) + max (max shifted by 0
      // when infinite, as PyTorch does).
      double m = -1.0lf / 0.0lf;
      int64_t unused = 0l;
      for (uint j = lane; j < nred; j += 64u) {
        int64_t off = ioff;
        uint r = j;
        for (int d = int(rrank) - 1; d >= 0; d--) {
          uint sz = M(52u + uint(d));
          off += int64_t(r % sz) * MI64(60u + 2u * uint(d));
          r /= sz;
        }
        double x = LOAD(in_base, off, SC_IN_DT);
        if (!isnan(m) && (isnan(x) || x > m)) m = x;
      }
      s_val[lane] = m;
      barrier();
      for (uint w = 32u; w > 0u; w >>= 1) {
        if (lane < w) {
          double a = s_val[lane], b = s_val[lane + w];
          if (!isnan(a) && (isnan(b) || b > a)) s_val[lane] = b;
        }
        barrier();
      }
      double mx = s_val[0];
      barrier();
      double shift = isinf(mx) ? 0.0lf : mx;
      double sum = 0.0lf;
      for (uint j = lane; j < nred; j += 64u) {
        int64_t off = ioff;
        uint r = j;
        for (int d = int(rrank) - 1; d >= 0; d--) {
          uint sz = M(52u + uint(d));
          off += int64_t(r % sz) * MI64(60u + 2u * uint(d));
          r /= sz;
        }
        sum += exp_d(LOAD(in_base, off, SC_IN_DT) - shift);
      }
      s_val[lane] = sum;
      barrier();
      for (uint w = 32u; w > 0u; w >>= 1) {
        if (lane < w) s_val[lane] += s_val[lane + w];
        barrier();
      }
      if (lane == 0u) STORE(out_base, ooff, SC_OUT_DT, isnan(mx) ? mx : log_d(s_val[0]) + shift);
      barrier();
      continue;
    }
#endif
    ACC acc = identity();
    int64_t aidx = -1l;
    for (uint j = lane; j < nred; j += 64u) {
      int64_t off = ioff;
      uint r = j;
      for (int d = int(rrank) - 1; d >= 0; d--) {
        uint sz = M(52u + uint(d));
        off += int64_t(r % sz) * MI64(60u + 2u * uint(d));
        r /= sz;
      }
      ACC v = LOAD(in_base, off, SC_IN_DT);
#ifndef CT_F64
      if (SC_IN_DT == DT_BOOL && (SC_OP == 0u || SC_OP == 1u)) v = v != ACC(0) ? ACC(1) : ACC(0);
#endif
      combine(acc, aidx, v, int64_t(j));
    }
    s_val[lane] = acc;
    s_idx[lane] = aidx;
    barrier();
    for (uint w = 32u; w > 0u; w >>= 1) {
      if (lane < w) {
        ACC a = s_val[lane];
        int64_t ia = s_idx[lane];
        combine(a, ia, s_val[lane + w], s_idx[lane + w]);
        s_val[lane] = a;
        s_idx[lane] = ia;
      }
      barrier();
    }
    if (lane == 0u) {
      ACC v = s_val[0];
      if (SC_OP == 6u || SC_OP == 7u) {
        store_i64(out_base, ooff, SC_OUT_DT, s_idx[0] < 0l ? 0l : s_idx[0]);
      } else if (SC_OP >= 9u) {
        STORE(out_base, ooff, SC_OUT_DT, v);
        store_i64(M64(76u), xoff, DT_I64, s_idx[0] < 0l ? 0l : s_idx[0]);
      } else {
#ifdef CT_F64
        if (SC_OP == 1u) v = v / double(nred);
#endif
        STORE(out_base, ooff, SC_OUT_DT, v);
      }
    }
    barrier();
  }
}
