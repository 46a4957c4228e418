/* backplane core: dtype facts, generated from include/backplane/dtypes.def.
 *
 * Every function accepts any uint32_t: BP_DTYPE_INVALID and values outside
 * the table answer "invalid" (name "invalid", size 0, bits 0, category
 * BP_DTYPE_CATEGORY_INVALID). Thread-safe: the table is constant. */
#include <string.h>

#include "internal.h"

static const struct {
  const char* name;
  uint8_t bytes;
  uint8_t bits;
  uint8_t category;
} dtype_table[BP_DTYPE_COUNT_] = {
    [BP_DTYPE_INVALID] = {"invalid", 0, 0, BP_DTYPE_CATEGORY_INVALID},
#define BP_DTYPE_X(e, v, n, bytes, bits, cat) \
  [BP_DTYPE_##e] = {n, bytes, bits, BP_DTYPE_CATEGORY_##cat},
#include "backplane/dtypes.def"
};

/* The ids are dense: every value below BP_DTYPE_COUNT_ has a row. */
#define BP_DTYPE_X(e, v, n, bytes, bits, cat) +1
_Static_assert(0
#include "backplane/dtypes.def"
                   == BP_DTYPE_COUNT_ - 1,
               "dtypes.def must list every id from 1 to BP_DTYPE_COUNT_ - 1");

static uint32_t slot(uint32_t dtype) { return dtype < BP_DTYPE_COUNT_ ? dtype : 0; }

BP_API const char* bp_dtype_name(uint32_t dtype) { return dtype_table[slot(dtype)].name; }

BP_API uint32_t bp_dtype_from_name(const char* name) {
  if (!name) return BP_DTYPE_INVALID;
  for (uint32_t d = 1; d < BP_DTYPE_COUNT_; ++d) {
    if (strcmp(dtype_table[d].name, name) == 0) return d;
  }
  return BP_DTYPE_INVALID;
}

BP_API size_t bp_dtype_size(uint32_t dtype) { return dtype_table[slot(dtype)].bytes; }

BP_API uint32_t bp_dtype_bits(uint32_t dtype) { return dtype_table[slot(dtype)].bits; }

BP_API uint32_t bp_dtype_category(uint32_t dtype) { return dtype_table[slot(dtype)].category; }
