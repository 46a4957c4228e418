// backplane Vulkan plugin: sums and maxima over a workgroup of 64 lanes
// (one row per workgroup: norm.comp, norm_quant.comp). Every lane gets the
// result; call from uniform control flow (barriers inside).
shared double s_a[64];
shared double s_b[64];

double reduce_sum(double v) {
  uint lane = gl_LocalInvocationID.x;
  s_a[lane] = v;
  barrier();
  for (uint w = 32u; w > 0u; w >>= 1) {
    if (lane < w) s_a[lane] += s_a[lane + w];
    barrier();
  }
  double r = s_a[0];
  barrier();
  return r;
}

// The maximum, NaN winning (a NaN in any lane gives NaN).
double reduce_max(double v) {
  uint lane = gl_LocalInvocationID.x;
  s_b[lane] = v;
  barrier();
  for (uint w = 32u; w > 0u; w >>= 1) {
    if (lane < w) {
      double a = s_b[lane], b = s_b[lane + w];
      if (!isnan(a) && (isnan(b) || b > a)) s_b[lane] = b;
    }
    barrier();
  }
  double r = s_b[0];
  barrier();
  return r;
}
