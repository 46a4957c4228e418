/* Helpers shared by the quantization tests: a xorshift generator and
 * exact stores of small floats in f32, f16 or bf16. Header-only (static
 * functions); needs cmocka.h (through ops_fixture.h) first. */
#ifndef BP_TESTS_QUANT_FIXTURE_H_
#define BP_TESTS_QUANT_FIXTURE_H_

#include <stdint.h>
#include <string.h>

static inline uint64_t next(uint64_t* s) {
  *s ^= *s << 13, *s ^= *s >> 7, *s ^= *s << 17;
  return *s;
}

/* v (a normal number that f16 / bf16 represent exactly, or 0) stored as
 * `dtype` at p[i]. */
static inline void store_exact(void* p, uint32_t dtype, int64_t i, float v) {
  uint32_t b;
  memcpy(&b, &v, 4);
  if (dtype == BP_DTYPE_F32) {
    ((float*)p)[i] = v;
  } else if (dtype == BP_DTYPE_BF16) {
    assert_int_equal(b & 0xFFFFu, 0);
    ((uint16_t*)p)[i] = (uint16_t)(b >> 16);
  } else { /* f16 */
    uint32_t sign = (b >> 16) & 0x8000u, e = (b >> 23) & 0xFFu, mant = b & 0x7FFFFFu;
    assert_int_equal(mant & 0x1FFFu, 0);
    ((uint16_t*)p)[i] = v == 0.0f ? (uint16_t)sign : (uint16_t)(sign | ((e - 112u) << 10) | (mant >> 13));
  }
}

#endif /* BP_TESTS_QUANT_FIXTURE_H_ */
