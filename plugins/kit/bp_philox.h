/* backplane: the counter-based random generator every plugin shares
 * (Philox-4x32-10, Salmon et al., "Parallel random numbers: as easy as
 * 1, 2, 3", SC'11; the generator of cuRAND's Philox, PyTorch's CUDA and
 * JAX). Header-only, allocation-free, thread-safe (no state).
 *
 * The word stream of a (seed, offset) pair: word n (n = 0, 1, ...) is word
 * n % 4 of the Philox block with
 *   key     = (seed & 0xffffffff, seed >> 32)
 *   counter = (c & 0xffffffff, c >> 32, 0, 0),  c = offset + n / 4 (mod 2^64).
 * So word n depends on (seed, offset, n) only: the same call gives the same
 * bits whatever the thread count or chunking, and `offset` advances by one
 * per four words. How ops draw their values from the stream (which words an
 * element uses) is documented with the ops (docs/semantics.md, "Random").
 */
#ifndef BACKPLANE_PHILOX_H_
#define BACKPLANE_PHILOX_H_

#if defined(__OPENCL_C_VERSION__) || defined(__OPENCL_VERSION__)
/* Also part of the GPU kernels' prelude (cmake/BpGpuKernels.cmake), so the
 * kernels draw the very same stream: the fixed-width names in OpenCL C. */
typedef uint uint32_t;
typedef ulong uint64_t;
typedef long int64_t;
#define UINT64_C(x) x##UL
#elif defined(__CUDACC_RTC__)
/* NVRTC (no system headers): the generated kernels' prelude. */
typedef unsigned int uint32_t;
typedef unsigned long long uint64_t;
typedef long long int64_t;
#define UINT64_C(x) x##ULL
#else
#include <stdint.h>
#endif

#define BP_PHILOX_M0 0xD2511F53u
#define BP_PHILOX_M1 0xCD9E8D57u
#define BP_PHILOX_W0 0x9E3779B9u /* golden ratio */
#define BP_PHILOX_W1 0xBB67AE85u /* sqrt(3) - 1 */

/* One Philox-4x32-10 block: out = philox(counter, key). */
static inline void bp_philox4x32_10(const uint32_t counter[4], const uint32_t key[2],
                                    uint32_t out[4]) {
  uint32_t c0 = counter[0], c1 = counter[1], c2 = counter[2], c3 = counter[3];
  uint32_t k0 = key[0], k1 = key[1];
  for (int r = 0; r < 10; r++) {
    uint64_t p0 = (uint64_t)BP_PHILOX_M0 * c0, p1 = (uint64_t)BP_PHILOX_M1 * c2;
    uint32_t n0 = (uint32_t)(p1 >> 32) ^ c1 ^ k0, n2 = (uint32_t)(p0 >> 32) ^ c3 ^ k1;
    c1 = (uint32_t)p1;
    c3 = (uint32_t)p0;
    c0 = n0;
    c2 = n2;
    k0 += BP_PHILOX_W0;
    k1 += BP_PHILOX_W1;
  }
  out[0] = c0;
  out[1] = c1;
  out[2] = c2;
  out[3] = c3;
}

/* Words [first, first + count) of the stream of (seed, offset) into out. */
static inline void bp_philox_words(uint64_t seed, uint64_t offset, uint64_t first, int64_t count,
                                   uint32_t* out) {
  const uint32_t key[2] = {(uint32_t)seed, (uint32_t)(seed >> 32)};
  int64_t k = 0;
  while (k < count) {
    uint64_t n = first + (uint64_t)k;
    uint64_t c = offset + n / 4;
    const uint32_t ctr[4] = {(uint32_t)c, (uint32_t)(c >> 32), 0u, 0u};
    uint32_t block[4];
    bp_philox4x32_10(ctr, key, block);
    for (uint32_t w = (uint32_t)(n % 4); w < 4 && k < count; w++) out[k++] = block[w];
  }
}

#if !(defined(__OPENCL_C_VERSION__) || defined(__OPENCL_VERSION__)) || defined(BP_HAS_F64)
/* Uniform values in [0, 1) with `bits` random bits (1..32 from a 32-bit
 * word, 33..64 from a 64-bit pair): k * 2^-bits, exact in any floating type
 * whose significand holds `bits` bits, so 1.0 never appears. */
static inline double bp_philox_u32_to_unit(uint32_t w, int bits) {
  return (double)(w >> (32 - bits)) * (1.0 / (double)(UINT64_C(1) << bits));
}
static inline double bp_philox_u64_to_unit(uint64_t w, int bits) {
  return (double)(w >> (64 - bits)) * (1.0 / (double)(UINT64_C(1) << bits));
}
#endif

#endif /* BACKPLANE_PHILOX_H_ */
