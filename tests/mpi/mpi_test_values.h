/* Test values and exact references for collectives over every numeric
 * dtype: small integers (-2..2, or 0..3 unsigned) whose sums, products and
 * averages over up to 4 ranks are exact in every dtype, fp8 included, so
 * every reduction order gives the same bits. */
#ifndef BP_TESTS_MPI_TEST_VALUES_H_
#define BP_TESTS_MPI_TEST_VALUES_H_

#include <math.h>
#include <stdint.h>
#include <string.h>

#include "bp_mpi_bootstrap.h" /* bp_mpi_host_desc */
#include "bp_plugin_common.h"

static const uint32_t k_test_dtypes[] = {
    BP_DTYPE_F32, BP_DTYPE_F64, BP_DTYPE_F16, BP_DTYPE_BF16, BP_DTYPE_I8,
    BP_DTYPE_U8, BP_DTYPE_I16, BP_DTYPE_U16, BP_DTYPE_I32, BP_DTYPE_U32,
    BP_DTYPE_I64, BP_DTYPE_U64, BP_DTYPE_F8E4M3FN, BP_DTYPE_F8E5M2, BP_DTYPE_F8E4M3FNUZ,
    BP_DTYPE_F8E5M2FNUZ};
#define TEST_DTYPE_COUNT (sizeof k_test_dtypes / sizeof k_test_dtypes[0])

static inline double tv_get(uint32_t dtype, const void* p, uint64_t i) {
  switch (dtype) {
    case BP_DTYPE_F32: return ((const float*)p)[i];
    case BP_DTYPE_F64: return ((const double*)p)[i];
    case BP_DTYPE_F16: return bp_f16_to_f32(((const uint16_t*)p)[i]);
    case BP_DTYPE_BF16: return bp_bf16_to_f32(((const uint16_t*)p)[i]);
    case BP_DTYPE_I8: return ((const int8_t*)p)[i];
    case BP_DTYPE_U8: return ((const uint8_t*)p)[i];
    case BP_DTYPE_I16: return ((const int16_t*)p)[i];
    case BP_DTYPE_U16: return ((const uint16_t*)p)[i];
    case BP_DTYPE_I32: return ((const int32_t*)p)[i];
    case BP_DTYPE_U32: return ((const uint32_t*)p)[i];
    case BP_DTYPE_I64: return (double)((const int64_t*)p)[i];
    case BP_DTYPE_U64: return (double)((const uint64_t*)p)[i];
    default: return bp_small_float_to_f64(dtype, ((const uint8_t*)p)[i]);
  }
}

static inline void tv_set(uint32_t dtype, void* p, uint64_t i, double v) {
  switch (dtype) {
    case BP_DTYPE_F32: ((float*)p)[i] = (float)v; break;
    case BP_DTYPE_F64: ((double*)p)[i] = v; break;
    case BP_DTYPE_F16: ((uint16_t*)p)[i] = bp_f64_to_f16(v); break;
    case BP_DTYPE_BF16: ((uint16_t*)p)[i] = bp_f64_to_bf16(v); break;
    case BP_DTYPE_I8: ((int8_t*)p)[i] = (int8_t)v; break;
    case BP_DTYPE_U8: ((uint8_t*)p)[i] = (uint8_t)v; break;
    case BP_DTYPE_I16: ((int16_t*)p)[i] = (int16_t)v; break;
    case BP_DTYPE_U16: ((uint16_t*)p)[i] = (uint16_t)v; break;
    case BP_DTYPE_I32: ((int32_t*)p)[i] = (int32_t)v; break;
    case BP_DTYPE_U32: ((uint32_t*)p)[i] = (uint32_t)v; break;
    case BP_DTYPE_I64: ((int64_t*)p)[i] = (int64_t)v; break;
    case BP_DTYPE_U64: ((uint64_t*)p)[i] = (uint64_t)v; break;
    default: ((uint8_t*)p)[i] = (uint8_t)bp_f64_to_small_float(dtype, v); break;
  }
}

/* Rank r's element i. */
static inline double tv_value(uint32_t dtype, int r, uint64_t i) {
  uint64_t k = (uint64_t)r * 7u + i * 3u;
  if (bp_dtype_category(dtype) == BP_DTYPE_CATEGORY_UNSIGNED) return (double)(k % 4u); /* 3^4 < 256 */
  return (double)(k % 5u) - 2.0;
}

/* The exact reduction of element i over ranks 0..n-1 (AVG: integers
 * toward zero, floats exact here). */
static inline double tv_reduce(uint32_t dtype, uint32_t op, int n, uint64_t i) {
  double acc = tv_value(dtype, 0, i);
  for (int r = 1; r < n; r++) {
    double v = tv_value(dtype, r, i);
    switch (op) {
      case BP_REDUCE_PROD: acc *= v; break;
      case BP_REDUCE_MIN: acc = v < acc ? v : acc; break;
      case BP_REDUCE_MAX: acc = v > acc ? v : acc; break;
      default: acc += v; break;
    }
  }
  if (op == BP_REDUCE_AVG) {
    int is_int = bp_dtype_category(dtype) == BP_DTYPE_CATEGORY_INT ||
                 bp_dtype_category(dtype) == BP_DTYPE_CATEGORY_UNSIGNED;
    acc = is_int ? trunc(acc / n) : acc / n;
  }
  return acc;
}

#endif /* BP_TESTS_MPI_TEST_VALUES_H_ */
