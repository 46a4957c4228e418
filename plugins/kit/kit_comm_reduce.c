/* backplane plugin kit: the element-wise reductions of collectives.
 *
 * One macro generates the loop of every (C type, op): sources are combined
 * in rank order into a stack block, then stored, so dst may alias any
 * source. Integers wrap on SUM and PROD (computed in the unsigned type of
 * the same width); their AVG sums in 64 bits and divides toward zero.
 * Floats: MIN and MAX propagate NaN (as torch.minimum); f16, bf16 and the
 * fp8 formats accumulate in f32 and round once at the end.
 */
#include <math.h>
#include <string.h>

#include "bp_kit_comm.h"
#include "bp_plugin_common.h"
#include "kit_comm_floats.h"

#define BLOCK 512

#define OP_SUM(a, b) ((a) + (b))
#define OP_PROD(a, b) ((a) * (b))
#define OP_MIN_INT(a, b) ((b) < (a) ? (b) : (a))
#define OP_MAX_INT(a, b) ((b) > (a) ? (b) : (a))
#define OP_MIN_FLT(a, b) ((a) != (a) ? (a) : ((b) != (b) || (b) < (a)) ? (b) : (a))
#define OP_MAX_FLT(a, b) ((a) != (a) ? (a) : ((b) != (b) || (b) > (a)) ? (b) : (a))

/* Combines `n` arrays of T with OP (in the arithmetic type A) into dst. */
#define DEFINE_COMBINE(NAME, T, A, OP)                                                  \
  static void NAME(void* dst, const void* const* src, uint32_t n, uint64_t count) {     \
    A acc[BLOCK];                                                                         \
    for (uint64_t b = 0; b < count; b += BLOCK) {                                         \
      const uint64_t m = count - b < BLOCK ? count - b : BLOCK;                           \
      const T* s0 = (const T*)src[0] + b;                                                 \
      for (uint64_t i = 0; i < m; ++i) acc[i] = (A)s0[i];                                 \
      for (uint32_t j = 1; j < n; ++j) {                                                  \
        const T* s = (const T*)src[j] + b;                                                \
        for (uint64_t i = 0; i < m; ++i) acc[i] = OP(acc[i], (A)s[i]);                    \
      }                                                                                   \
      T* d = (T*)dst + b;                                                                 \
      for (uint64_t i = 0; i < m; ++i) d[i] = (T)acc[i];                                  \
    }                                                                                     \
  }

/* X(suffix, T, unsigned twin U, 64-bit accumulator of AVG) */
#define INT_TYPES(X)                      \
  X(i8, int8_t, uint8_t, int64_t)         \
  X(u8, uint8_t, uint8_t, uint64_t)       \
  X(i16, int16_t, uint16_t, int64_t)      \
  X(u16, uint16_t, uint16_t, uint64_t)    \
  X(i32, int32_t, uint32_t, int64_t)      \
  X(u32, uint32_t, uint32_t, uint64_t)    \
  X(i64, int64_t, uint64_t, int64_t)      \
  X(u64, uint64_t, uint64_t, uint64_t)

#define DEFINE_INT(S, T, U, W)                          \
  DEFINE_COMBINE(sum_##S, T, U, OP_SUM)                 \
  DEFINE_COMBINE(prod_##S, T, U, OP_PROD)               \
  DEFINE_COMBINE(min_##S, T, T, OP_MIN_INT)             \
  DEFINE_COMBINE(max_##S, T, T, OP_MAX_INT)             \
  static void avg_##S(void* dst, const void* const* src, uint32_t n, uint64_t count) { \
    for (uint64_t i = 0; i < count; ++i) {                                             \
      W s = 0;                                                                          \
      for (uint32_t j = 0; j < n; ++j) s = (W)(s + (W)((const T*)src[j])[i]);           \
      ((T*)dst)[i] = (T)(s / (W)n);                                                     \
    }                                                                                   \
  }
INT_TYPES(DEFINE_INT)

#define FLOAT_TYPES(X) X(f32, float) X(f64, double)
#define DEFINE_FLOAT(S, T)                      \
  DEFINE_COMBINE(sum_##S, T, T, OP_SUM)         \
  DEFINE_COMBINE(prod_##S, T, T, OP_PROD)       \
  DEFINE_COMBINE(min_##S, T, T, OP_MIN_FLT)     \
  DEFINE_COMBINE(max_##S, T, T, OP_MAX_FLT)
FLOAT_TYPES(DEFINE_FLOAT)

typedef void (*combine_fn)(void* dst, const void* const* src, uint32_t n, uint64_t count);

/* Narrow floats: widen BLOCK elements of each source to f32, combine,
 * narrow once. */
static void reduce_narrow(uint32_t dtype, uint32_t op, void* dst, const void* const* src,
                          uint32_t n, uint64_t count) {
  float acc[BLOCK], col[BLOCK];
  const void* blocks[2] = {acc, col};
  const combine_fn fn = op == BP_REDUCE_PROD ? prod_f32
                        : op == BP_REDUCE_MIN ? min_f32
                        : op == BP_REDUCE_MAX ? max_f32
                                              : sum_f32;
  for (uint64_t b = 0; b < count; b += BLOCK) {
    const uint64_t m = count - b < BLOCK ? count - b : BLOCK;
    for (uint64_t i = 0; i < m; ++i) acc[i] = bp_kit_comm_load_f32(dtype, src[0], b + i);
    for (uint32_t j = 1; j < n; ++j) {
      for (uint64_t i = 0; i < m; ++i) col[i] = bp_kit_comm_load_f32(dtype, src[j], b + i);
      fn(acc, blocks, 2, m);
    }
    for (uint64_t i = 0; i < m; ++i)
      bp_kit_comm_store_f32(dtype, dst, b + i, op == BP_REDUCE_AVG ? acc[i] / (float)n : acc[i]);
  }
}

static combine_fn native_fn(uint32_t dtype, uint32_t op) {
  switch (dtype) {
#define CASE_INT(S, T, U, W)                                              \
  case BP_DTYPE_##S##_ID:                                                 \
    return op == BP_REDUCE_SUM ? sum_##S : op == BP_REDUCE_PROD ? prod_##S \
         : op == BP_REDUCE_MIN ? min_##S : op == BP_REDUCE_MAX ? max_##S : avg_##S;
#define BP_DTYPE_i8_ID BP_DTYPE_I8
#define BP_DTYPE_u8_ID BP_DTYPE_U8
#define BP_DTYPE_i16_ID BP_DTYPE_I16
#define BP_DTYPE_u16_ID BP_DTYPE_U16
#define BP_DTYPE_i32_ID BP_DTYPE_I32
#define BP_DTYPE_u32_ID BP_DTYPE_U32
#define BP_DTYPE_i64_ID BP_DTYPE_I64
#define BP_DTYPE_u64_ID BP_DTYPE_U64
#define BP_DTYPE_f32_ID BP_DTYPE_F32
#define BP_DTYPE_f64_ID BP_DTYPE_F64
    INT_TYPES(CASE_INT)
#define CASE_FLOAT(S, T)                                                    \
  case BP_DTYPE_##S##_ID:                                                   \
    return op == BP_REDUCE_PROD ? prod_##S : op == BP_REDUCE_MIN ? min_##S \
         : op == BP_REDUCE_MAX ? max_##S : sum_##S;
    FLOAT_TYPES(CASE_FLOAT)
    default: return NULL;
  }
}

int bp_kit_comm_can_reduce(uint32_t dtype) {
  const uint32_t c = bp_dtype_category(dtype);
  return c == BP_DTYPE_CATEGORY_FLOAT || c == BP_DTYPE_CATEGORY_INT ||
         c == BP_DTYPE_CATEGORY_UNSIGNED || c == BP_DTYPE_CATEGORY_FP8;
}

static void scale_float(uint32_t dtype, void* dst, uint64_t count, uint32_t n) {
  if (dtype == BP_DTYPE_F32)
    for (uint64_t i = 0; i < count; ++i) ((float*)dst)[i] /= (float)n;
  else
    for (uint64_t i = 0; i < count; ++i) ((double*)dst)[i] /= (double)n;
}

void bp_kit_comm_reduce(uint32_t dtype, uint32_t op, void* dst, const void* const* src,
                        uint32_t n, uint64_t count) {
  if (count == 0 || n == 0) return;
  combine_fn fn = native_fn(dtype, op);
  if (!fn) {
    reduce_narrow(dtype, op, dst, src, n, count);
    return;
  }
  fn(dst, src, n, count);
  if (op == BP_REDUCE_AVG && (dtype == BP_DTYPE_F32 || dtype == BP_DTYPE_F64))
    scale_float(dtype, dst, count, n);
}

uint64_t bp_kit_coll_bytes(uint32_t dtype, uint64_t count) {
  return count * (uint64_t)bp_dtype_size(dtype);
}
