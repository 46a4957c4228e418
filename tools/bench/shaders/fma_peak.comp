// Arithmetic ceiling of the device: FMA chains held in registers, no memory
// traffic but one store per invocation. The vk_raw suite's "device FMA
// ceiling" figure.
//
// Each invocation runs `iters` loop iterations; each iteration advances
// FMA_ACCS independent vec4 accumulators by FMA_DEPTH dependent fma() each,
// that is FMA_ACCS * FMA_DEPTH * 4 lanes * 2 flops. The accumulators are
// independent so that an FMA's latency hides behind the others; the trip
// count and the multiplier/addend come from push constants so that the
// compiler can fold neither the loop nor the arithmetic; the sum of the
// accumulators is stored so that the chains are not dead code. With m close
// to 1 and a small, the values stay finite and normal (no denormal slow
// paths).
//
// Why a depth: CPU drivers (lavapipe) run invocations as SIMD lanes and
// write a loop-carried value back under the lanes' execution mask, a blend
// per accumulator per iteration; several fma() per write amortise it. On
// lavapipe (256-bit AVX2), 4 accumulators x depth 8 (16 vector registers
// of chains) measured about twice 24 accumulators x depth 1 and 8 x 1.
// The build picks the shape (tools/CMakeLists.txt). lavapipe (Mesa 22.3)
// lowers fma() to a multiply and an add, so there this is the ceiling of
// separate multiply-adds.
#version 450
layout(local_size_x = 64) in;

#ifndef FMA_ACCS
#define FMA_ACCS 4
#endif
#ifndef FMA_DEPTH
#define FMA_DEPTH 8
#endif

layout(std430, binding = 0) writeonly buffer O { vec4 v[]; } o;

layout(push_constant) uniform Push {
  uint iters; // loop trip count
  float m;    // multiplier, near 1
  float a;    // addend, small
} p;

// FMA_EACH(X) expands X(i) for every accumulator i.
#if FMA_ACCS == 2
#define FMA_EACH(X) X(0) X(1)
#elif FMA_ACCS == 4
#define FMA_EACH(X) X(0) X(1) X(2) X(3)
#elif FMA_ACCS == 8
#define FMA_EACH(X) X(0) X(1) X(2) X(3) X(4) X(5) X(6) X(7)
#elif FMA_ACCS == 16
#define FMA_EACH(X) X(0) X(1) X(2) X(3) X(4) X(5) X(6) X(7) \
                    X(8) X(9) X(10) X(11) X(12) X(13) X(14) X(15)
#elif FMA_ACCS == 24
#define FMA_EACH(X) X(0) X(1) X(2) X(3) X(4) X(5) X(6) X(7) \
                    X(8) X(9) X(10) X(11) X(12) X(13) X(14) X(15) \
                    X(16) X(17) X(18) X(19) X(20) X(21) X(22) X(23)
#else
#error FMA_ACCS must be 2, 4, 8, 16 or 24
#endif

// FMA_DEPTH dependent fma() per accumulator per iteration.
#define FMA_1(x) fma(x, m, a)
#define FMA_2(x) FMA_1(FMA_1(x))
#define FMA_4(x) FMA_2(FMA_2(x))
#define FMA_8(x) FMA_4(FMA_4(x))
#define FMA_16(x) FMA_8(FMA_8(x))
#define FMA_32(x) FMA_16(FMA_16(x))
#if FMA_DEPTH == 1
#define FMA_CHAIN(x) FMA_1(x)
#elif FMA_DEPTH == 2
#define FMA_CHAIN(x) FMA_2(x)
#elif FMA_DEPTH == 4
#define FMA_CHAIN(x) FMA_4(x)
#elif FMA_DEPTH == 8
#define FMA_CHAIN(x) FMA_8(x)
#elif FMA_DEPTH == 16
#define FMA_CHAIN(x) FMA_16(x)
#elif FMA_DEPTH == 32
#define FMA_CHAIN(x) FMA_32(x)
#else
#error FMA_DEPTH must be 1, 2, 4, 8, 16 or 32
#endif

#define FMA_DECL(i) vec4 acc##i = seed + vec4(float(i) * 0.125);
#define FMA_STEP(i) acc##i = FMA_CHAIN(acc##i);
#define FMA_SUM(i) sum += acc##i;

void main() {
  uint gid = (gl_WorkGroupID.y * gl_NumWorkGroups.x + gl_WorkGroupID.x) * 64u + gl_LocalInvocationID.x;
  vec4 seed = vec4(float(gid & 1023u) * 1e-3, 0.25, 0.5, 0.75);
  vec4 m = vec4(p.m);
  vec4 a = vec4(p.a);
  FMA_EACH(FMA_DECL)
  for (uint k = 0u; k < p.iters; k++) {
    FMA_EACH(FMA_STEP)
  }
  vec4 sum = vec4(0.0);
  FMA_EACH(FMA_SUM)
  o.v[gid] = sum;
}
