#version 460
// backplane Vulkan plugin: grouped_topk (docs/semantics.md, "grouped_topk"):
// DeepSeek-V2/V3 routing. One workgroup of 64 lanes per token: the scores
// s_e (softmax or sigmoid, double), c_e = s_e + bias_e, the group scores
// (max c_e, or with a bias the sum of the two largest), the topk_group best
// groups (kept flags in shared memory), then the top_k experts of the kept
// groups by c_e, each the best ordered after the previous one (NaN last,
// ties to the lower index); weights s_id, renormalized and scaled, rounded
// once. At most MAX_G groups and MAX_K experts per token (the support answer).
//
// Metadata: 0-1 gating [T, E], 2-3 bias (0: none), 4-5 weights [T, k],
// 6-7 ids [T, k] (i32); 8 T, 9 E, 10 k, 11 G, 12 topk_group, 13 sigmoid,
// 14 renormalize, 15 bias dtype, 16 weights dtype, 18-19 scaling (f64).
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"
layout(local_size_x = 64) in;
layout(constant_id = 0) const uint SC_DT = 1;

#include "wg_reduce.glsl"

#define MAX_G 1024u
#define MAX_K 256u
const uint NO_IDX = 0xffffffffu;
shared bool s_kept[MAX_G];
shared uint s_sel[MAX_K];
shared double s_v[64];
shared uint s_i[64];

uint64_t g_row;
double g_m, g_z;

// a (index i) before b (index j): larger first, NaN last, ties to the lower index.
bool before(double a, uint i, double b, uint j) {
  if (j == NO_IDX) return i != NO_IDX;
  if (i == NO_IDX) return false;
  if (isnan(a) || isnan(b)) return !isnan(a) || (isnan(b) && i < j);
  return a > b || (a == b && i < j);
}

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

double score(uint e) {
  double x = load_f64(M64(0u), int64_t(g_row) + int64_t(e), SC_DT);
  return M(13u) != 0u ? 1.0lf / (1.0lf + exp_d(-x)) : exp_d(x - g_m) / g_z;
}

double choice(uint e) {
  double s = score(e);
  return M64(2u) != 0ul ? s + load_f64(M64(2u), int64_t(e), M(15u)) : s;
}

void main() {
  uint T = M(8u), E = M(9u), k = M(10u), G = M(11u), keep = M(12u), lane = gl_LocalInvocationID.x;
  uint per = E / G;
  bool bias = M64(2u) != 0ul;
  for (uint t = gl_WorkGroupID.x; t < T; t += gl_NumWorkGroups.x) {
    g_row = uint64_t(t) * uint64_t(E);
    g_m = 0.0lf;
    g_z = 1.0lf;
    if (M(13u) == 0u) { // softmax: the row's max (of the non-NaN logits) and sum
      double m = -1.0lf / 0.0lf;
      for (uint e = lane; e < E; e += 64u) {
        double x = load_f64(M64(0u), int64_t(g_row) + int64_t(e), SC_DT);
        if (!isnan(x)) m = max(m, x);
      }
      g_m = reduce_max(m);
      double z = 0.0lf;
      for (uint e = lane; e < E; e += 64u) z += exp_d(load_f64(M64(0u), int64_t(g_row) + int64_t(e), SC_DT) - g_m);
      g_z = reduce_sum(z);
    }
    // group scores, then the kept groups
    for (uint q = lane; q < G; q += 64u) s_kept[q] = false;
    barrier();
    double pv = 0.0lf;
    uint pq = NO_IDX;
    for (uint r = 0u; r < keep; r++) {
      double bv = 0.0lf;
      uint bq = NO_IDX;
      for (uint q = lane; q < G; q += 64u) {
        double a = 0.0lf, b = 0.0lf; // the largest and second largest c_e of the group (NaN last)
        uint ia = NO_IDX, ib = NO_IDX;
        for (uint e = q * per; e < (q + 1u) * per; e++) {
          double c = choice(e);
          if (before(c, e, a, ia)) { b = a; ib = ia; a = c; ia = e; }
          else if (before(c, e, b, ib)) { b = c; ib = e; }
        }
        double gs = bias && G > 1u ? a + b : a;
        if ((pq == NO_IDX || before(pv, pq, gs, q)) && before(gs, q, bv, bq)) { bv = gs; bq = q; }
      }
      reduce_first(bv, bq);
      if (lane == 0u && bq != NO_IDX) s_kept[bq] = true;
      pv = bv;
      pq = bq;
    }
    barrier();
    // the top_k experts of the kept groups
    pq = NO_IDX;
    double wsum = 0.0lf;
    for (uint r = 0u; r < k; r++) {
      double bv = 0.0lf;
      uint be = NO_IDX;
      for (uint e = lane; e < E; e += 64u) {
        if (!s_kept[e / per]) continue;
        double c = choice(e);
        if ((pq == NO_IDX || before(pv, pq, c, e)) && before(c, e, bv, be)) { bv = c; be = e; }
      }
      reduce_first(bv, be);
      pv = bv;
      pq = be;
      if (lane == 0u) s_sel[r] = be;
      if (be != NO_IDX) wsum += score(be);
    }
    barrier();
    double scale = MF64(18u);
    for (uint r = lane; r < k; r += 64u) {
      uint e = s_sel[r];
      double w = e == NO_IDX ? 0.0lf : score(e);
      if (M(14u) != 0u) w /= wsum;
      store_f64(M64(4u), int64_t(t) * int64_t(k) + int64_t(r), M(16u), w * scale);
      store_i32(M64(6u), int64_t(t) * int64_t(k) + int64_t(r), DT_I32, e == NO_IDX ? -1 : int(e));
    }
    barrier();
  }
}
