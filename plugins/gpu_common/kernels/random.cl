/* backplane GPU kernels: rand, randn and dropout from the shared Philox
 * stream (bp_philox.h, in the prelude), one work-item per output element
 * (bp_gpu_random_args_t), drawing the CPU plugin's words:
 *  - f32, f16, bf16: word i; f64: words 2i (low half) and 2i + 1 (high);
 *  - rand: the top `bits` bits as k * 2^-bits (exact: same values as the
 *    CPU plugin, bit for bit);
 *  - randn: Box-Muller on the pair (2m, 2m + 1) of 24-bit (53-bit for f64)
 *    uniforms in double, rounded once (the device's log, sqrt, sin and cos:
 *    within their ULP bounds of the CPU's);
 *  - dropout: keep element i when its uniform is >= p; out = (x * keep) *
 *    scale in f32 (f64 for f64), the mask as bool (same bits as the CPU).
 * Needs f64 (the uniforms are doubles). Entry point: bp_random (out, mask,
 * input, args).
 */
#include "bp_philox.h"

/* The uniform of element e with `bits` bits (wide: a 64-bit word pair). */
BP_INLINE double rnd_unit(BP_GLOBAL const bp_gpu_random_args_t* A, bp_i64 e, int wide, int bits) {
  uint32_t w[2];
  if (wide) {
    bp_philox_words(A->seed, A->offset, 2 * (uint64_t)e, 2, w);
    return bp_philox_u64_to_unit((uint64_t)w[0] | (uint64_t)w[1] << 32, bits);
  }
  bp_philox_words(A->seed, A->offset, (uint64_t)e, 1, w);
  return bp_philox_u32_to_unit(w[0], bits);
}

BP_KERNEL void bp_random(BP_GLOBAL bp_u8* out, BP_GLOBAL bp_u8* mask, BP_GLOBAL bp_u8* input,
                         BP_GLOBAL const bp_gpu_random_args_t* A) {
  const bp_u32 dt = A->dtypes[0];
  const int wide = dt == DT_F64;
  for (bp_i64 e = BP_GLOBAL_ID(0); e < A->numel; e += BP_GLOBAL_SIZE(0)) {
    bp_i64 off[3] = {0, 0, 0}, rem = e;
    for (int d = (int)A->rank - 1; d >= 0; d--) {
      const bp_i64 c = rem % A->sizes[d];
      rem /= A->sizes[d];
      for (int k = 0; k < 3; k++) off[k] += c * A->strides[k][d];
    }
    double v;
    if (A->op == OP_rand) {
      v = rnd_unit(A, e, wide, (int)A->bits);
    } else if (A->op == OP_randn) {
      const int bits = wide ? 53 : 24;
      const bp_i64 m = e & ~(bp_i64)1;
      const double u = rnd_unit(A, m, wide, bits), w = rnd_unit(A, m + 1, wide, bits);
      const double r = sqrt(-2.0 * log(1.0 - u)); /* 1 - u > 0: no log(0) */
      const double t = 6.283185307179586476925 * w;
      v = (e & 1) ? r * sin(t) : r * cos(t);
    } else { /* dropout */
      const double u = rnd_unit(A, e, wide, wide ? 53 : 24);
      const int keep = u >= A->p;
      const double x = bp_load_f(input, A->byte_offset[2], off[2], A->dtypes[2]);
      if (wide) v = (x * (double)keep) * A->scale;
      else v = (double)(((float)x * (float)keep) * (float)A->scale);
      BP_ELEM(bp_u8, mask, A->byte_offset[1], off[1]) = (bp_u8)keep;
    }
    bp_store_f(out, A->byte_offset[0], off[0], dt, v);
  }
}
