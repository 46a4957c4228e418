/* Checked integer arithmetic for sizes, strides and byte offsets: the core's
 * names for the one implementation in plugins/kit/bp_checked.h, which the
 * plugins share. */
#include "bp_checked.h"
#include "internal.h"

int bp__mul_overflow_i64(int64_t a, int64_t b, int64_t* out) {
  return bp_checked_mul_i64(a, b, out);
}

int bp__add_overflow_i64(int64_t a, int64_t b, int64_t* out) {
  return bp_checked_add_i64(a, b, out);
}

int bp__add_overflow_u64(uint64_t a, uint64_t b, uint64_t* out) {
  return bp_checked_add_u64(a, b, out);
}

int bp__numel(uint32_t rank, const int64_t* sizes, int64_t* out) {
  return bp_checked_numel(rank, sizes, out);
}

int bp__nbytes(uint32_t dtype, int64_t numel, uint64_t* out) {
  return bp_checked_nbytes(numel, (uint32_t)bp_dtype_size(dtype), out);
}

int bp__range_outside(uint64_t offset, uint64_t size, uint64_t total) {
  return bp_checked_range_outside(offset, size, total);
}

int bp__tensor_span(uint32_t dtype, uint32_t rank, const int64_t* sizes, const int64_t* strides,
                    uint64_t byte_offset, uint64_t* out_lo, uint64_t* out_hi) {
  if (rank > BP_MAX_RANK) return 1;
  return bp_checked_span((uint32_t)bp_dtype_size(dtype), rank, sizes, strides, byte_offset, out_lo,
                         out_hi);
}
