/* The expected facts of every dtype, written out by hand from the formats'
 * specifications (OCP 8-bit FP, OCP MX v1.0, IEEE 754), so that the tests of
 * the core (bp_dtype_*) and of the plugin helpers check one contract that
 * does not come from dtypes.def itself. */
#ifndef BP_TESTS_DTYPE_EXPECT_H_
#define BP_TESTS_DTYPE_EXPECT_H_

#include "backplane/types.h"

typedef struct bp_test_dtype {
  uint32_t dtype;
  const char* name;
  uint32_t bytes, bits, category;
} bp_test_dtype_t;

#define C_(x) BP_DTYPE_CATEGORY_##x
static const bp_test_dtype_t bp_test_dtypes[] = {
    {BP_DTYPE_F32, "f32", 4, 32, C_(FLOAT)},
    {BP_DTYPE_F16, "f16", 2, 16, C_(FLOAT)},
    {BP_DTYPE_BF16, "bf16", 2, 16, C_(FLOAT)},
    {BP_DTYPE_F64, "f64", 8, 64, C_(FLOAT)},
    {BP_DTYPE_I8, "i8", 1, 8, C_(INT)},
    {BP_DTYPE_U8, "u8", 1, 8, C_(UNSIGNED)},
    {BP_DTYPE_I16, "i16", 2, 16, C_(INT)},
    {BP_DTYPE_I32, "i32", 4, 32, C_(INT)},
    {BP_DTYPE_I64, "i64", 8, 64, C_(INT)},
    {BP_DTYPE_BOOL, "bool", 1, 8, C_(BOOL)},
    {BP_DTYPE_C64, "c64", 8, 64, C_(COMPLEX)},
    {BP_DTYPE_F8E4M3FN, "float8_e4m3fn", 1, 8, C_(FP8)},
    {BP_DTYPE_F8E5M2, "float8_e5m2", 1, 8, C_(FP8)},
    {BP_DTYPE_U16, "u16", 2, 16, C_(UNSIGNED)},
    {BP_DTYPE_U32, "u32", 4, 32, C_(UNSIGNED)},
    {BP_DTYPE_U64, "u64", 8, 64, C_(UNSIGNED)},
    {BP_DTYPE_C128, "c128", 16, 128, C_(COMPLEX)},
    {BP_DTYPE_F8E4M3FNUZ, "float8_e4m3fnuz", 1, 8, C_(FP8)},
    {BP_DTYPE_F8E5M2FNUZ, "float8_e5m2fnuz", 1, 8, C_(FP8)},
    {BP_DTYPE_F8E8M0FNU, "float8_e8m0fnu", 1, 8, C_(SCALE)},
    {BP_DTYPE_F6E2M3FN, "float6_e2m3fn", 1, 6, C_(SUB_BYTE_FLOAT)},
    {BP_DTYPE_F6E3M2FN, "float6_e3m2fn", 1, 6, C_(SUB_BYTE_FLOAT)},
    {BP_DTYPE_F4E2M1FN, "float4_e2m1fn", 1, 4, C_(SUB_BYTE_FLOAT)},
    {BP_DTYPE_I4, "i4", 1, 4, C_(SUB_BYTE_INT)},
    {BP_DTYPE_U4, "u4", 1, 4, C_(SUB_BYTE_UNSIGNED)},
    {BP_DTYPE_I2, "i2", 1, 2, C_(SUB_BYTE_INT)},
};
#undef C_
enum { BP_TEST_NUM_DTYPES = sizeof bp_test_dtypes / sizeof bp_test_dtypes[0] };

/* Values no dtype has: the contract answers "invalid", 0, 0, INVALID. */
static const uint32_t bp_test_bad_dtypes[] = {BP_DTYPE_INVALID, BP_DTYPE_COUNT_, 31, 32, 64,
                                              255, 1000, 0x7fffffffu, 0xffffffffu};

/* Checks the bp_dtype_* functions in scope (the core's or the plugin
 * helpers') against the table and the answer for bad values. CMocka. */
#define BP_TEST_CHECK_DTYPE_FACTS()                                                   \
  do {                                                                                \
    for (size_t i_ = 0; i_ < BP_TEST_NUM_DTYPES; ++i_) {                              \
      const bp_test_dtype_t* e_ = &bp_test_dtypes[i_];                                \
      assert_string_equal(bp_dtype_name(e_->dtype), e_->name);                        \
      assert_int_equal(bp_dtype_size(e_->dtype), e_->bytes);                          \
      assert_int_equal(bp_dtype_bits(e_->dtype), e_->bits);                           \
      assert_int_equal(bp_dtype_category(e_->dtype), e_->category);                   \
    }                                                                                 \
    for (size_t i_ = 0; i_ < sizeof bp_test_bad_dtypes / sizeof bp_test_bad_dtypes[0]; \
         ++i_) {                                                                      \
      uint32_t d_ = bp_test_bad_dtypes[i_];                                           \
      assert_string_equal(bp_dtype_name(d_), "invalid");                              \
      assert_int_equal(bp_dtype_size(d_), 0);                                         \
      assert_int_equal(bp_dtype_bits(d_), 0);                                         \
      assert_int_equal(bp_dtype_category(d_), BP_DTYPE_CATEGORY_INVALID);             \
    }                                                                                 \
  } while (0)

#endif /* BP_TESTS_DTYPE_EXPECT_H_ */
