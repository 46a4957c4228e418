/* backplane CPU plugin: f32 exp, tanh and erf as straight-line arithmetic
 * (no calls, no tables; branches are selects), so that a loop over them
 * vectorizes at any vector width. cpu_ew.c compiles the float program
 * kernels again per ISA with these in place of libm's scalar functions.
 *
 * Accuracy (tests/region checks it against the fp64 functions over a
 * sweep that includes tiny, huge, subnormal, infinite and NaN inputs):
 * within the conformance suite's TRANS class (4 ulp for f32). exp
 * overflows to inf above 88.72 and flushes to 0 below -103.97 with
 * subnormal results rounded once; NaN stays NaN; signs of zero are kept
 * by tanh and erf.
 */
#ifndef BP_CPU_VMATH_H_
#define BP_CPU_VMATH_H_

#include <math.h>
#include <stdint.h>
#include <string.h>

/* Always inlined, also into kernels compiled with other floating-point
 * options (no-trapping-math lets the vectorizer run both sides of a select
 * in AVX2 code). */
#if defined(__GNUC__)
#define CPU_VM_INLINE static inline __attribute__((always_inline))
#else
#define CPU_VM_INLINE static inline
#endif

CPU_VM_INLINE uint32_t cpu_vm_bits(float x) {
  uint32_t i;
  memcpy(&i, &x, sizeof i);
  return i;
}
CPU_VM_INLINE float cpu_vm_float(uint32_t i) {
  float x;
  memcpy(&x, &i, sizeof x);
  return x;
}

/* e^x: Cephes' degree-7 polynomial on r = x - n ln2 (|r| <= ln2/2, ln2 in
 * two parts), scaled by 2^n as two normal powers of two. n is read from
 * the bits of a rounded float, so no lane ever converts NaN to an integer;
 * the clamp keeps n in [-150, 129], where both halves are normal. */
CPU_VM_INLINE float cpu_vm_expf(float x) {
  float xc = x < -104.0f ? -104.0f : x;
  xc = xc > 89.0f ? 89.0f : xc;
  const float shifter = 12582912.0f; /* 1.5 * 2^23: adding it rounds to an integer */
  float t = fmaf(xc, 1.44269504088896341f, shifter);
  float n = t - shifter;
  float r = fmaf(n, -0.693359375f, xc);
  r = fmaf(n, 2.12194440e-4f, r);
  float p = fmaf(r, 1.9875691500e-4f, 1.3981999507e-3f);
  p = fmaf(p, r, 8.3334519073e-3f);
  p = fmaf(p, r, 4.1665795894e-2f);
  p = fmaf(p, r, 1.6666665459e-1f);
  p = fmaf(p, r, 5.0000001201e-1f);
  p = fmaf(p, r * r, r) + 1.0f;
  uint32_t k = cpu_vm_bits(t) - cpu_vm_bits(shifter);
  uint32_t k1 = (uint32_t)((int32_t)k >> 1), k2 = k - k1;
  return p * cpu_vm_float((k1 + 127u) << 23) * cpu_vm_float((k2 + 127u) << 23);
}

/* tanh: Cephes' odd polynomial below |x| = 0.625, else 1 - 2 / (e^2|x| + 1)
 * with the sign of x (1 once e^2|x| overflows). */
CPU_VM_INLINE float cpu_vm_tanhf(float x) {
  float a = fabsf(x), z = x * x;
  float s = fmaf(-5.70498872745e-3f, z, 2.06390887954e-2f);
  s = fmaf(s, z, -5.37397155531e-2f);
  s = fmaf(s, z, 1.33314422036e-1f);
  s = fmaf(s, z, -3.33332819422e-1f);
  s = copysignf(fmaf(s * z, x, x), x); /* tanh(-0) = -0 */
  float e = cpu_vm_expf(2.0f * a);
  float l = copysignf(1.0f - 2.0f / (e + 1.0f), x);
  return a < 0.625f ? s : l;
}

/* erf: below |x| = 0.875 the Taylor series of erf in x^2 (ten terms, the
 * rest under 1e-9); above it 1 - e^-x^2 Q(t) with t = 1 / (1 + |x|/2) and
 * Q a degree-7 Chebyshev fit of erfc(x) e^(x^2) on [0.875, 4] (error
 * 1.5e-10); 1 from |x| = 4 on (erfc(4) is under half an ulp of 1). */
CPU_VM_INLINE float cpu_vm_erff(float x) {
  float a = fabsf(x), z = x * x;
  float s = -1.6365844691234924e-07f;
  s = fmaf(s, z, 1.6462114365889246e-06f);
  s = fmaf(s, z, -1.492565035840625e-05f);
  s = fmaf(s, z, 1.2055332981789664e-04f);
  s = fmaf(s, z, -8.5483270234508522e-04f);
  s = fmaf(s, z, 5.2239776254421879e-03f);
  s = fmaf(s, z, -2.6866170645131252e-02f);
  s = fmaf(s, z, 1.1283791670955126e-01f);
  s = fmaf(s, z, -3.7612638903183754e-01f);
  s = fmaf(s, z, 1.1283791670955126f);
  s = s * x;
  float t = 1.0f / fmaf(0.5f, a, 1.0f);
  float q = 1.209079969e-01f;
  q = fmaf(q, t, -4.767785412e-01f);
  q = fmaf(q, t, 5.717289395e-01f);
  q = fmaf(q, t, -1.106585948e-01f);
  q = fmaf(q, t, 3.512832365e-01f);
  q = fmaf(q, t, 2.586686920e-01f);
  q = fmaf(q, t, 2.850762434e-01f);
  q = fmaf(q, t, -1.653191724e-04f);
  float l = a >= 4.0f ? 1.0f : 1.0f - cpu_vm_expf(-z) * q;
  l = copysignf(l, x);
  return a < 0.875f ? s : l;
}

/* The ISAs that code built on these functions is compiled for, widest
 * last: X(name, level, target) with level as BP_CPU_ISA counts it
 * (cpu_isa_cap(): 1 avx2, 2 avx512) and the target string of GCC's
 * target attribute. CPU_VM_X86 says whether this compiler builds them. */
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define CPU_VM_X86 1
#else
#define CPU_VM_X86 0
#endif
#define CPU_VM_ISAS(X) \
  X(avx2, 1, "avx2,fma") X(avx512, 2, "avx512f,avx512dq,avx512vl,avx512bw,fma,prefer-vector-width=512")

/* The widest level of CPU_VM_ISAS this CPU runs, no wider than cap (pass
 * cpu_isa_cap()); 0 when none (run the scalar code). */
static inline int cpu_vm_isa(int cap) {
#if CPU_VM_X86
  __builtin_cpu_init();
  int best = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512dq") &&
                     __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512bw") &&
                     __builtin_cpu_supports("fma")
                 ? 2
             : __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") ? 1
                                                                               : 0;
  return cap < best ? cap : best;
#else
  (void)cap;
  return 0;
#endif
}

#endif /* BP_CPU_VMATH_H_ */
