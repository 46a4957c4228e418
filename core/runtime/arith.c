/* Checked integer arithmetic for sizes, strides and byte offsets. */
#include "internal.h"

int bp__mul_overflow_i64(int64_t a, int64_t b, int64_t* out) {
  return __builtin_mul_overflow(a, b, out);
}

int bp__add_overflow_i64(int64_t a, int64_t b, int64_t* out) {
  return __builtin_add_overflow(a, b, out);
}

int bp__add_overflow_u64(uint64_t a, uint64_t b, uint64_t* out) {
  return __builtin_add_overflow(a, b, out);
}

int bp__numel(uint32_t rank, const int64_t* sizes, int64_t* out) {
  int64_t n = 1;
  int overflow = 0;
  for (uint32_t d = 0; d < rank; ++d) {
    if (sizes[d] == 0) {
      /* An empty dim makes the product 0 whatever the others are. */
      *out = 0;
      return 0;
    }
    if (!overflow && bp__mul_overflow_i64(n, sizes[d], &n)) overflow = 1;
  }
  if (!overflow) *out = n;
  return overflow;
}

int bp__range_outside(uint64_t offset, uint64_t size, uint64_t total) {
  uint64_t end = 0;
  if (bp__add_overflow_u64(offset, size, &end)) return 1;
  return end > total;
}

/* Span of the elements: from the sum of the negative extents to one element
 * past the sum of the positive extents, in bytes, relative to byte_offset. */
int bp__tensor_span(uint32_t dtype, uint32_t rank, const int64_t* sizes, const int64_t* strides,
                    uint64_t byte_offset, uint64_t* out_lo, uint64_t* out_hi) {
  int64_t esize = (int64_t)bp_dtype_size(dtype);
  int64_t neg = 0, pos = 0;
  if (esize <= 0 || rank > BP_MAX_RANK || byte_offset > (uint64_t)INT64_MAX) return 1;
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
    if (bp__mul_overflow_i64(sizes[d] - 1, strides[d], &extent)) return 1;
    if (extent < 0) {
      if (bp__add_overflow_i64(neg, extent, &neg)) return 1;
    } else {
      if (bp__add_overflow_i64(pos, extent, &pos)) return 1;
    }
  }
  int64_t lo = 0, hi = 0;
  if (bp__add_overflow_i64(pos, 1, &hi) || bp__mul_overflow_i64(hi, esize, &hi) ||
      bp__mul_overflow_i64(neg, esize, &lo) ||
      bp__add_overflow_i64(hi, (int64_t)byte_offset, &hi) ||
      bp__add_overflow_i64(lo, (int64_t)byte_offset, &lo) || lo < 0)
    return 1;
  *out_lo = (uint64_t)lo;
  *out_hi = (uint64_t)hi;
  return 0;
}
