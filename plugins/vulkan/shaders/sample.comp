#version 460
// backplane Vulkan plugin: sample (greedy, temperature, top-k, top-p over
// rows of logits; docs/semantics.md, "Sampling"). One workgroup of 64 lanes
// per row. The top-k and top-p thresholds are found by bisection over
// order-preserving integer keys of the logits (32-bit keys of the f32 value
// for f32/f16/bf16, 64-bit for f64): each step is one pass over the row
// summing the weight above a key, so no sort and no scratch memory. Weights
// and sums are double (exp_d from common.glsl), as on the CPU. The draw is
// the rule's inverse CDF in vocabulary order: lanes own contiguous chunks,
// a scan of the chunk sums finds the lane whose chunk holds the target.
// Row r draws word r of the Philox-4x32-10 stream of (seed, offset).
// SC_MODE 1 is top_k_top_p_mask: the same thresholds (temperature 1) and a
// min-p cut on the weights, then every logit outside the kept set becomes
// -inf (no draw); the output may be the input (each lane rewrites only the
// elements it read last).
//
// Metadata: 0-1 logits, 2 rows, 3 V, 4 kept rank, 5 top_k, 6-7 out (i64;
// mask: logits' dtype), 8-9 temperature (f64), 10-11 top_p (f64), 12-13
// seed, 14-15 offset, 16-17 last-dim stride (int64), 18-19 the output's
// last-dim stride (mask), 20.. kept sizes (8), 28.. kept logits strides
// (int64), 44.. kept out strides (int64), 60-61 min_p (f64; mask).
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"
layout(local_size_x = 64) in;
layout(constant_id = 0) const uint SC_DT = 1;
layout(constant_id = 1) const uint SC_MODE = 0; // 0 sample, 1 top_k_top_p_mask

const uint NO_IDX = 0xffffffffu;
shared double s_d[64];
shared uint s_u[64];

double wg_sum(double v) {
  uint lane = gl_LocalInvocationID.x;
  s_d[lane] = v;
  barrier();
  for (uint w = 32u; w > 0u; w >>= 1) {
    if (lane < w) s_d[lane] += s_d[lane + w];
    barrier();
  }
  double r = s_d[0];
  barrier();
  return r;
}

uint wg_min(uint v) {
  uint lane = gl_LocalInvocationID.x;
  s_u[lane] = v;
  barrier();
  for (uint w = 32u; w > 0u; w >>= 1) {
    if (lane < w) s_u[lane] = min(s_u[lane], s_u[lane + w]);
    barrier();
  }
  uint r = s_u[0];
  barrier();
  return r;
}

// The first maximum of the non-NaN values: (value, index), index NO_IDX if none.
void wg_argmax(inout double v, inout uint idx) {
  uint lane = gl_LocalInvocationID.x;
  s_d[lane] = v;
  s_u[lane] = idx;
  barrier();
  for (uint w = 32u; w > 0u; w >>= 1) {
    if (lane < w) {
      uint ib = s_u[lane + w], ia = s_u[lane];
      double b = s_d[lane + w], a = s_d[lane];
      if (ib != NO_IDX && (ia == NO_IDX || b > a || (b == a && ib < ia))) {
        s_d[lane] = b;
        s_u[lane] = ib;
      }
    }
    barrier();
  }
  v = s_d[0];
  idx = s_u[0];
  barrier();
}

// Order-preserving key of a non-NaN logit (-0 and +0 alike).
uint64_t okey(double x) {
  if (x == 0.0lf) x = 0.0lf;
  if (SC_DT == DT_F64) {
    uint64_t u = packUint2x32(unpackDouble2x32(x));
    return (u >> 63) != 0ul ? ~u : (u | 0x8000000000000000ul);
  }
  uint u = floatBitsToUint(float(x));
  return uint64_t((u >> 31) != 0u ? ~u : (u | 0x80000000u));
}

uint philox_word(uint64_t seed, uint64_t offset, uint64_t n) {
  uint64_t ctr = offset + n / 4ul;
  uint c0 = uint(ctr), c1 = uint(ctr >> 32), c2 = 0u, c3 = 0u;
  uint k0 = uint(seed), k1 = uint(seed >> 32);
  for (int r = 0; r < 10; r++) {
    uint hi0, lo0, hi1, lo1;
    umulExtended(0xD2511F53u, c0, hi0, lo0);
    umulExtended(0xCD9E8D57u, c2, hi1, lo1);
    uint n0 = hi1 ^ c1 ^ k0, n2 = hi0 ^ c3 ^ k1;
    c1 = lo1;
    c3 = lo0;
    c0 = n0;
    c2 = n2;
    k0 += 0x9E3779B9u;
    k1 += 0xBB67AE85u;
  }
  uint w = uint(n % 4ul);
  return w == 0u ? c0 : w == 1u ? c1 : w == 2u ? c2 : c3;
}

uint64_t g_base;
int64_t g_off, g_st;
uint g_v;
double g_m, g_t, g_minp;

double logit(uint j) { return load_f64(g_base, g_off + int64_t(j) * g_st, SC_DT); }

// Weight of a token kept by top-k (key >= tk): exp((l - m) / t), 1 at the
// max; 0 below the min-p cut (mask).
double weight(double x, uint64_t tk) {
  if (isnan(x) || okey(x) < tk) return 0.0lf;
  double w = x == g_m ? 1.0lf : exp_d((x - g_m) / g_t);
  return SC_MODE == 1u && w < g_minp ? 0.0lf : w;
}

// The smallest key K in [lo, hi] with (weight of keys > K) < limit; unit:
// every non-NaN logit weighs 1 (top-k), else its weight above tk (top-p).
uint64_t bisect(uint64_t lo, uint64_t hi, double limit, bool unit, uint64_t tk) {
  uint lane = gl_LocalInvocationID.x;
  while (lo < hi) {
    uint64_t mid = lo + (hi - lo) / 2ul;
    double f = 0.0lf;
    for (uint j = lane; j < g_v; j += 64u) {
      double x = logit(j);
      if (isnan(x) || okey(x) <= mid) continue;
      f += unit ? 1.0lf : weight(x, tk);
    }
    f = wg_sum(f);
    if (f < limit) hi = mid;
    else lo = mid + 1ul;
  }
  return hi;
}

// The smallest key a token must reach to be kept by top-k and then top-p
// (the row's largest non-NaN logit g_m is finite or +inf).
uint64_t top_k_top_p_key(uint top_k, double top_p, uint nonnan) {
  uint lane = gl_LocalInvocationID.x;
  uint64_t top = okey(g_m), tk = 0ul;
  double n = wg_sum(double(nonnan));
  if (top_k > 0u && double(top_k) < n) tk = bisect(0ul, top, double(top_k), true, 0ul);
  if (!(top_p > 0.0lf && top_p < 1.0lf)) return tk;
  double z = 0.0lf;
  for (uint j = lane; j < g_v; j += 64u) z += weight(logit(j), tk);
  z = wg_sum(z);
  return bisect(tk, top, top_p * z, false, tk);
}

void main() {
  uint rows = M(2u), krank = M(4u), top_k = M(5u);
  uint lane = gl_LocalInvocationID.x;
  double top_p = MF64(10u);
  g_v = M(3u);
  g_t = MF64(8u);
  g_base = M64(0u);
  g_st = MI64(16u);
  g_minp = SC_MODE == 1u ? MF64(60u) : 0.0lf;
  for (uint row = gl_WorkGroupID.x; row < rows; row += gl_NumWorkGroups.x) {
    int64_t ooff = 0l;
    g_off = 0l;
    uint rem = row;
    for (int d = int(krank) - 1; d >= 0; d--) {
      uint sz = M(20u + uint(d));
      int64_t idx = int64_t(rem % sz);
      rem /= sz;
      g_off += idx * MI64(28u + 2u * uint(d));
      ooff += idx * MI64(44u + 2u * uint(d));
    }
    double bv = 0.0lf;
    uint bi = NO_IDX;
    uint nonnan = 0u;
    for (uint j = lane; j < g_v; j += 64u) {
      double x = logit(j);
      if (isnan(x)) continue;
      nonnan++;
      if (bi == NO_IDX || x > bv) {
        bv = x;
        bi = j;
      }
    }
    wg_argmax(bv, bi);
    g_m = bv;
    if (SC_MODE == 1u) {
      // kept: key >= the thresholds' and weight >= min_p; a row without a
      // finite or +inf maximum keeps nothing but -inf
      bool any = bi != NO_IDX && (!isinf(g_m) || g_m > 0.0lf);
      uint64_t tp = any ? top_k_top_p_key(top_k, top_p, nonnan) : 0ul;
      int64_t ost = MI64(18u);
      for (uint j = lane; j < g_v; j += 64u) {
        double x = logit(j);
        bool kept = any && !isnan(x) && okey(x) >= tp && weight(x, tp) >= g_minp;
        store_f64(M64(6u), ooff + int64_t(j) * ost, SC_DT, kept ? x : -1.0lf / 0.0lf);
      }
      barrier();
      continue;
    }
    int64_t pick = bi == NO_IDX ? -1l : int64_t(bi);
    if (g_t != 0.0lf && bi != NO_IDX) {
      pick = -1l;
      if (!isinf(g_m) || g_m > 0.0lf) {
        uint64_t tp = top_k_top_p_key(top_k, top_p, nonnan);
        // chunk sums, their exclusive scan, then the chunk holding the target
        uint chunk = (g_v + 63u) / 64u, begin = min(g_v, lane * chunk), end = min(g_v, begin + chunk);
        double csum = 0.0lf;
        uint last = NO_IDX;
        for (uint j = begin; j < end; j++) {
          double w = weight(logit(j), tp);
          csum += w;
          if (w > 0.0lf) last = j;
        }
        s_d[lane] = csum;
        barrier();
        double prefix = 0.0lf, total = 0.0lf;
        for (uint l = 0u; l < 64u; l++) {
          if (l == lane) prefix = total;
          total += s_d[l];
        }
        barrier();
        uint64_t seed = M64(12u), offset = M64(14u);
        double u = double(philox_word(seed, offset, uint64_t(row)) >> 8) * (1.0lf / 16777216.0lf);
        double target = u * total;
        uint cand = NO_IDX;
        if (csum > 0.0lf && prefix <= target && target < prefix + csum) {
          double run = prefix;
          for (uint j = begin; j < end && cand == NO_IDX; j++) {
            double w = weight(logit(j), tp);
            if (w == 0.0lf) continue;
            run += w;
            if (run > target) cand = j;
          }
          if (cand == NO_IDX) cand = last;
        }
        cand = wg_min(cand);
        // rounding left the target at the very end: the last kept token
        uint mx = wg_min(last == NO_IDX ? NO_IDX : NO_IDX - 1u - last); // max via min
        uint lastk = mx == NO_IDX ? NO_IDX : NO_IDX - 1u - mx;
        if (cand == NO_IDX && lastk != NO_IDX) cand = lastk;
        if (cand != NO_IDX) pick = int64_t(cand);
      }
    }
    if (lane == 0u) store_i64(M64(6u), ooff, DT_I64, pick);
    barrier();
  }
}
