/* backplane core: shape helpers for the op front end (dense descriptors,
 * contiguity, formatting).
 */
#include <stdio.h>
#include <string.h>

#include "ops/ops_internal.h"

bp_status_t bp__desc_dense(bp_tensor_desc_t* d, uint32_t dtype, uint32_t rank,
                           const int64_t* sizes, const char* op, const char* output) {
  if (rank > BP_MAX_RANK) {
    return bp__error(BP_INVALID_ARGUMENT, "op '%s': output '%s' would have rank %u (max %d)", op, output,
                     rank, BP_MAX_RANK);
  }
  int64_t numel = 1;
  for (uint32_t i = 0; i < rank; ++i) {
    if (sizes[i] < 0) {
      return bp__error(BP_INVALID_ARGUMENT, "op '%s': output '%s' would have negative size %lld in dim %u",
                       op, output, (long long)sizes[i], i);
    }
    if (bp__mul_overflow_i64(numel, sizes[i], &numel)) {
      return bp__error(BP_INVALID_ARGUMENT, "op '%s': output '%s': element count overflows int64", op,
                       output);
    }
  }
  int64_t bytes;
  int64_t elem = (int64_t)bp_dtype_size(dtype);
  if (bp__mul_overflow_i64(numel, elem > 0 ? elem : 1, &bytes)) {
    return bp__error(BP_INVALID_ARGUMENT, "op '%s': output '%s': byte size overflows int64", op,
                     output);
  }
  memset(d, 0, sizeof(*d));
  d->struct_size = sizeof(*d);
  d->dtype = dtype;
  d->rank = rank;
  int64_t stride = 1;
  for (uint32_t i = rank; i-- > 0;) {
    d->sizes[i] = sizes[i];
    d->strides[i] = stride;
    /* Cannot overflow: the running product is bounded by numel. */
    stride *= sizes[i] > 1 ? sizes[i] : 1;
  }
  return BP_OK;
}

int bp__desc_is_contiguous(const bp_tensor_desc_t* d) {
  int64_t expected = 1;
  for (uint32_t i = d->rank; i-- > 0;) {
    if (d->sizes[i] == 0) return 1;
    if (d->sizes[i] == 1) continue;
    if (d->strides[i] != expected) return 0;
    expected *= d->sizes[i];
  }
  return 1;
}

const char* bp__shape_str(uint32_t rank, const int64_t* sizes, char* buf, size_t cap) {
  size_t n = 0;
  n += (size_t)snprintf(buf + n, cap - n, "[");
  for (uint32_t i = 0; i < rank && i < BP_MAX_RANK && n < cap; ++i) {
    n += (size_t)snprintf(buf + n, cap - n, i ? ", %lld" : "%lld", (long long)sizes[i]);
  }
  if (n < cap) snprintf(buf + n, cap - n, "]");
  return buf;
}

int bp__shape_equal(uint32_t ra, const int64_t* a, uint32_t rb, const int64_t* b) {
  if (ra != rb) return 0;
  for (uint32_t i = 0; i < ra; ++i) {
    if (a[i] != b[i]) return 0;
  }
  return 1;
}
