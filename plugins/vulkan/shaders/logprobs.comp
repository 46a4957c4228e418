#version 460
// backplane Vulkan plugin: gather_logprobs (docs/semantics.md,
// "gather_logprobs"): per row of logits [B, V], lse = m + log(sum exp(l -
// m)) in double, the given token's log-probability and rank (#{j : l_j >=
// l[token]}), then the k best logits in order (NaN first as torch.topk,
// then larger, the lower id on ties) with their log-probabilities. One
// workgroup of 64 lanes per row; the r-th best is the best element ordered
// after the (r-1)-th (one pass over the row and one reduction per column:
// O(k V), no sort, no scratch memory). A token id outside [0, V) leaves the
// row's outputs unwritten (no device-side error; docs/backends/vulkan.md).
//
// Metadata: 0-1 logits (dense), 2-3 token ids, 4-5 logprobs [B, k + 1],
// 6-7 ids [B, k + 1] (i64), 8-9 ranks [B] (i64); 10 B, 11 V, 12 k,
// 13 token dtype, 14 logprobs dtype (f32 or f64).
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"
layout(local_size_x = 64) in;
layout(constant_id = 0) const uint SC_DT = 1;

#include "wg_reduce.glsl"

const uint NO_IDX = 0xffffffffu;
shared double s_v[64];
shared uint s_i[64];

// Whether logit a (id i) comes before b (id j): NaN first, then larger,
// the lower id on ties (ids NO_IDX: none, last).
bool before(double a, uint i, double b, uint j) {
  if (j == NO_IDX) return i != NO_IDX;
  if (i == NO_IDX) return false;
  if (isnan(a) || isnan(b)) return isnan(a) && (!isnan(b) || i < j);
  return a > b || (a == b && i < j);
}

// The first in order of every lane's (v, idx); every lane gets it.
void reduce_first(inout double v, inout uint idx) {
  uint lane = gl_LocalInvocationID.x;
  s_v[lane] = v;
  s_i[lane] = idx;
  barrier();
  for (uint w = 32u; w > 0u; w >>= 1) {
    if (lane < w && before(s_v[lane + w], s_i[lane + w], s_v[lane], s_i[lane])) {
      s_v[lane] = s_v[lane + w];
      s_i[lane] = s_i[lane + w];
    }
    barrier();
  }
  v = s_v[0];
  idx = s_i[0];
  barrier();
}

void main() {
  uint B = M(10u), V = M(11u), k = M(12u);
  uint lane = gl_LocalInvocationID.x;
  uint odt = M(14u);
  for (uint row = gl_WorkGroupID.x; row < B; row += gl_NumWorkGroups.x) {
    int64_t base = int64_t(row) * int64_t(V);
    int64_t tok = load_i64(M64(2u), int64_t(row), M(13u));
    if (tok < 0l || tok >= int64_t(V)) {
      barrier();
      continue; // uniform: every lane read the same id
    }
    double m = -1.0lf / 0.0lf, nan = 0.0lf;
    for (uint j = lane; j < V; j += 64u) {
      double x = load_f64(M64(0u), base + int64_t(j), SC_DT);
      if (isnan(x)) nan = 1.0lf;
      else m = max(m, x);
    }
    m = reduce_max(m);
    nan = reduce_sum(nan);
    double lt = load_f64(M64(0u), base + tok, SC_DT), z = 0.0lf, rank = 0.0lf;
    for (uint j = lane; j < V; j += 64u) {
      double x = load_f64(M64(0u), base + int64_t(j), SC_DT);
      z += exp_d(x - m);
      if (x >= lt) rank += 1.0lf;
    }
    z = reduce_sum(z);
    rank = reduce_sum(rank);
    double lse = nan > 0.0lf ? 0.0lf / 0.0lf : isinf(m) ? m : m + log_d(z);
    int64_t out0 = int64_t(row) * int64_t(k + 1u);
    if (lane == 0u) {
      store_i64(M64(8u), int64_t(row), DT_I64, int64_t(rank));
      store_i64(M64(6u), out0, DT_I64, tok);
      store_f64(M64(4u), out0, odt, lt - lse);
    }
    double pv = 0.0lf;
    uint pi = NO_IDX; // the previous column's element (none yet)
    for (uint r = 1u; r <= k; r++) {
      double bv = 0.0lf;
      uint bi = NO_IDX;
      for (uint j = lane; j < V; j += 64u) {
        double x = load_f64(M64(0u), base + int64_t(j), SC_DT);
        if ((pi == NO_IDX || before(pv, pi, x, j)) && before(x, j, bv, bi)) {
          bv = x;
          bi = j;
        }
      }
      reduce_first(bv, bi);
      pv = bv;
      pi = bi;
      if (lane == 0u) {
        store_i64(M64(6u), out0 + int64_t(r), DT_I64, int64_t(bi));
        store_f64(M64(4u), out0 + int64_t(r), odt, bv - lse);
      }
    }
    barrier();
  }
}
