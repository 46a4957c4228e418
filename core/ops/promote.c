/* backplane core: dtype categories and PyTorch type promotion
 * (docs/semantics.md, "Type promotion").
 */
#include <stdio.h>

#include "ops/ops_internal.h"

int bp__dtype_valid(uint32_t dtype) { return bp_dtype_category(dtype) != BP_DTYPE_CATEGORY_INVALID; }
int bp__dtype_is_float(uint32_t d) { return bp_dtype_category(d) == BP_DTYPE_CATEGORY_FLOAT; }
int bp__dtype_is_int(uint32_t d) {
  return d == BP_DTYPE_U8 || d == BP_DTYPE_I8 || d == BP_DTYPE_I16 || d == BP_DTYPE_I32 ||
         d == BP_DTYPE_I64;
}
int bp__dtype_is_complex(uint32_t d) { return d == BP_DTYPE_C64; }
int bp__dtype_is_storage_only(uint32_t d) {
  switch (bp_dtype_category(d)) {
    case BP_DTYPE_CATEGORY_FP8: case BP_DTYPE_CATEGORY_SCALE:
    case BP_DTYPE_CATEGORY_SUB_BYTE_INT: case BP_DTYPE_CATEGORY_SUB_BYTE_UNSIGNED:
    case BP_DTYPE_CATEGORY_SUB_BYTE_FLOAT:
      return 1;
    default:
      return 0;
  }
}

const char* bp__dtype_str(uint32_t dtype, char* buf) {
  const char* name = bp_dtype_name(dtype);
  if (name != NULL) return name;
  snprintf(buf, 32, "dtype(%u)", dtype);
  return buf;
}

/* promote_types for the real dtypes, as PyTorch's table
 * (c10/core/ScalarType.cpp). Rows and columns follow enum bp_dtype from F32
 * to BOOL. */
enum { BP__PROMOTE_FIRST = BP_DTYPE_F32, BP__PROMOTE_LAST = BP_DTYPE_BOOL };
#define f4 BP_DTYPE_F32
#define f2 BP_DTYPE_F16
#define bf BP_DTYPE_BF16
#define f8 BP_DTYPE_F64
#define i1 BP_DTYPE_I8
#define u1 BP_DTYPE_U8
#define i2 BP_DTYPE_I16
#define i4 BP_DTYPE_I32
#define i8 BP_DTYPE_I64
#define b1 BP_DTYPE_BOOL
static const uint8_t bp__promote_table[10][10] = {
    /*          f4  f2  bf  f8  i1  u1  i2  i4  i8  b1 */
    /* f4 */ {f4, f4, f4, f8, f4, f4, f4, f4, f4, f4},
    /* f2 */ {f4, f2, f4, f8, f2, f2, f2, f2, f2, f2},
    /* bf */ {f4, f4, bf, f8, bf, bf, bf, bf, bf, bf},
    /* f8 */ {f8, f8, f8, f8, f8, f8, f8, f8, f8, f8},
    /* i1 */ {f4, f2, bf, f8, i1, i2, i2, i4, i8, i1},
    /* u1 */ {f4, f2, bf, f8, i2, u1, i2, i4, i8, u1},
    /* i2 */ {f4, f2, bf, f8, i2, i2, i2, i4, i8, i2},
    /* i4 */ {f4, f2, bf, f8, i4, i4, i4, i4, i8, i4},
    /* i8 */ {f4, f2, bf, f8, i8, i8, i8, i8, i8, i8},
    /* b1 */ {f4, f2, bf, f8, i1, u1, i2, i4, i8, b1},
};
#undef f4
#undef f2
#undef bf
#undef f8
#undef i1
#undef u1
#undef i2
#undef i4
#undef i8
#undef b1

static int bp__promotable(uint32_t d) {
  return (d >= BP__PROMOTE_FIRST && d <= BP__PROMOTE_LAST) || d == BP_DTYPE_C64;
}

uint32_t bp__promote_types(uint32_t a, uint32_t b) {
  if (a == BP_DTYPE_INVALID) return b;
  if (b == BP_DTYPE_INVALID) return a;
  if (a == b) return a; /* fp8 with itself (cat), c64 with c64, u32 with u32 */
  /* Storage dtypes, u16/u32/u64 and c128 promote with nothing but themselves
   * (as in PyTorch, which has no promotion rule for them either). */
  if (!bp__promotable(a) || !bp__promotable(b)) return BP_DTYPE_INVALID;
  if (bp__dtype_is_complex(a) || bp__dtype_is_complex(b)) {
    /* c64 with f64 would need c128, which backplane does not have. */
    return (a == BP_DTYPE_F64 || b == BP_DTYPE_F64) ? BP_DTYPE_INVALID : BP_DTYPE_C64;
  }
  return bp__promote_table[a - BP__PROMOTE_FIRST][b - BP__PROMOTE_FIRST];
}

void bp__result_type_init(bp__result_type_t* rt) {
  rt->dim_result = rt->zero_result = rt->wrapped_result = BP_DTYPE_INVALID;
  rt->saw_storage_only = 0;
  rt->failed = 0;
}

static void bp__rt_merge(bp__result_type_t* rt, uint32_t* slot, uint32_t dtype) {
  if (bp__dtype_is_storage_only(dtype)) rt->saw_storage_only = 1;
  uint32_t r = bp__promote_types(*slot, dtype);
  if (r == BP_DTYPE_INVALID) rt->failed = 1;
  *slot = r;
}

void bp__result_type_add_tensor(bp__result_type_t* rt, const bp_tensor_desc_t* t) {
  bp__rt_merge(rt, t->rank == 0 ? &rt->zero_result : &rt->dim_result, t->dtype);
}

void bp__result_type_add_scalar(bp__result_type_t* rt, const bp_scalar_t* s) {
  /* A wrapped number takes the default dtype of its category. */
  uint32_t d = s->kind == BP_SCALAR_FLOAT ? BP_DTYPE_F32
               : s->kind == BP_SCALAR_BOOL ? BP_DTYPE_BOOL
                                           : BP_DTYPE_I64;
  bp__rt_merge(rt, &rt->wrapped_result, d);
}

/* PyTorch's combine_categories (aten/src/ATen/native/TypeProperties.cpp):
 * the lower-priority group only counts when its category is higher. */
static uint32_t bp__combine_categories(uint32_t higher, uint32_t lower) {
  if (bp__dtype_is_complex(higher)) return higher;
  if (bp__dtype_is_complex(lower)) return bp__dtype_is_float(higher) ? BP_DTYPE_C64 : lower;
  if (bp__dtype_is_float(higher)) return higher;
  if (higher == BP_DTYPE_BOOL || bp__dtype_is_float(lower)) {
    return bp__promote_types(higher, lower);
  }
  if (higher != BP_DTYPE_INVALID) return higher;
  return lower;
}

uint32_t bp__result_type_get(const bp__result_type_t* rt) {
  if (rt->failed) return BP_DTYPE_INVALID;
  return bp__combine_categories(rt->dim_result,
                                bp__combine_categories(rt->zero_result, rt->wrapped_result));
}
