/* backplane core: dtype names and sizes. */
#include <string.h>

#include "internal.h"

/* X(enum suffix, name, size in bytes): the one list of dtypes. */
#define BP__DTYPE_LIST(X) \
  X(F32, "f32", 4)        \
  X(F16, "f16", 2)        \
  X(BF16, "bf16", 2)      \
  X(F64, "f64", 8)        \
  X(I8, "i8", 1)          \
  X(U8, "u8", 1)          \
  X(I16, "i16", 2)        \
  X(I32, "i32", 4)        \
  X(I64, "i64", 8)        \
  X(BOOL, "bool", 1)      \
  X(C64, "c64", 8)        \
  X(F8E4M3, "f8e4m3", 1)  \
  X(F8E5M2, "f8e5m2", 1)

static const struct {
  const char* name;
  size_t size;
} dtype_table[BP_DTYPE_COUNT_] = {
#define BP__DTYPE_ENTRY(e, n, s) [BP_DTYPE_##e] = {n, s},
    BP__DTYPE_LIST(BP__DTYPE_ENTRY)
#undef BP__DTYPE_ENTRY
};

BP_API const char* bp_dtype_name(uint32_t dtype) {
  if (dtype == BP_DTYPE_INVALID || dtype >= BP_DTYPE_COUNT_) return NULL;
  return dtype_table[dtype].name;
}

BP_API uint32_t bp_dtype_from_name(const char* name) {
  if (!name) return BP_DTYPE_INVALID;
  for (uint32_t d = 1; d < BP_DTYPE_COUNT_; ++d) {
    if (dtype_table[d].name && strcmp(dtype_table[d].name, name) == 0) return d;
  }
  return BP_DTYPE_INVALID;
}

BP_API size_t bp_dtype_size(uint32_t dtype) {
  if (dtype == BP_DTYPE_INVALID || dtype >= BP_DTYPE_COUNT_) return 0;
  return dtype_table[dtype].size;
}
