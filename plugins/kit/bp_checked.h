/* backplane: checked arithmetic for sizes, strides, byte offsets and byte
 * spans. The one implementation shared by the core (core/runtime/arith.c)
 * and the plugins (through the plugin kit), so a byte size is computed the
 * same, overflow-checked way on both sides of the ABI.
 *
 * Header only, no state, no allocation; thread-safe. Depends only on
 * <stdint.h>. Every function returns nonzero on overflow (or on an input
 * outside its contract) and then leaves its out_ parameters unchanged.
 * Units: sizes and strides are in elements, offsets, spans and `esize` in
 * bytes.
 */
#ifndef BACKPLANE_PLUGIN_COMMON_CHECKED_H_
#define BACKPLANE_PLUGIN_COMMON_CHECKED_H_

#include <stdint.h>

static inline int bp_checked_mul_i64(int64_t a, int64_t b, int64_t* out) {
  return __builtin_mul_overflow(a, b, out);
}

static inline int bp_checked_add_i64(int64_t a, int64_t b, int64_t* out) {
  return __builtin_add_overflow(a, b, out);
}

static inline int bp_checked_add_u64(uint64_t a, uint64_t b, uint64_t* out) {
  return __builtin_add_overflow(a, b, out);
}

/* Product of `rank` sizes (each >= 0). 1 for rank 0; 0 when any size is 0,
 * even if the others would overflow. Nonzero for a negative size. */
static inline int bp_checked_numel(uint32_t rank, const int64_t* sizes, int64_t* out) {
  int64_t n = 1;
  int overflow = 0;
  for (uint32_t d = 0; d < rank; ++d) {
    if (sizes[d] < 0) return 1;
    if (sizes[d] == 0) {
      *out = 0;
      return 0;
    }
    if (!overflow && bp_checked_mul_i64(n, sizes[d], &n)) overflow = 1;
  }
  if (!overflow) *out = n;
  return overflow;
}

/* numel * esize as a byte count that fits in int64 (so it also fits in a
 * uint64_t and, on 64-bit hosts, a size_t). Nonzero for numel < 0 or
 * esize == 0. */
static inline int bp_checked_nbytes(int64_t numel, uint32_t esize, uint64_t* out) {
  int64_t bytes = 0;
  if (numel < 0 || esize == 0 || bp_checked_mul_i64(numel, (int64_t)esize, &bytes)) return 1;
  *out = (uint64_t)bytes;
  return 0;
}

/* Byte size of a dense tensor of `rank` sizes: bp_checked_numel, then
 * bp_checked_nbytes. */
static inline int bp_checked_dense_bytes(uint32_t esize, uint32_t rank, const int64_t* sizes,
                                         uint64_t* out) {
  int64_t numel = 0;
  return bp_checked_numel(rank, sizes, &numel) || bp_checked_nbytes(numel, esize, out);
}

/* Nonzero when [offset, offset + size) does not fit in [0, total). */
static inline int bp_checked_range_outside(uint64_t offset, uint64_t size, uint64_t total) {
  uint64_t end = 0;
  if (bp_checked_add_u64(offset, size, &end)) return 1;
  return end > total;
}

/* Byte span [lo, hi) touched by a tensor (element size `esize`, `rank`
 * sizes and strides in elements, byte offset of element [0,...,0]): from
 * the sum of the negative extents to one element past the sum of the
 * positive ones. An empty tensor touches nothing (lo == hi == offset).
 * Nonzero when any size is negative, any step overflows int64, the offset
 * exceeds INT64_MAX or the span starts below byte 0. */
static inline int bp_checked_span(uint32_t esize, uint32_t rank, const int64_t* sizes,
                                  const int64_t* strides, uint64_t byte_offset, uint64_t* out_lo,
                                  uint64_t* out_hi) {
  int64_t neg = 0, pos = 0;
  if (esize == 0 || byte_offset > (uint64_t)INT64_MAX) return 1;
  for (uint32_t d = 0; d < rank; ++d) {
    if (sizes[d] < 0) return 1;
    if (sizes[d] == 0) {
      *out_lo = byte_offset;
      *out_hi = byte_offset;
      return 0;
    }
  }
  for (uint32_t d = 0; d < rank; ++d) {
    int64_t extent = 0;
    if (bp_checked_mul_i64(sizes[d] - 1, strides[d], &extent)) return 1;
    if (bp_checked_add_i64(extent < 0 ? neg : pos, extent, extent < 0 ? &neg : &pos)) return 1;
  }
  int64_t lo = 0, hi = 0;
  if (bp_checked_add_i64(pos, 1, &hi) || bp_checked_mul_i64(hi, (int64_t)esize, &hi) ||
      bp_checked_mul_i64(neg, (int64_t)esize, &lo) ||
      bp_checked_add_i64(hi, (int64_t)byte_offset, &hi) ||
      bp_checked_add_i64(lo, (int64_t)byte_offset, &lo) || lo < 0)
    return 1;
  *out_lo = (uint64_t)lo;
  *out_hi = (uint64_t)hi;
  return 0;
}

#endif /* BACKPLANE_PLUGIN_COMMON_CHECKED_H_ */
