/* bp_tensor_item (aten._local_scalar_dense): a blocking read of a tensor
 * with one element into a bp_scalar_t, decoding the narrow float formats on
 * the host. */
#include <math.h>
#include <string.h>

#include "internal.h"

/* A binary float of 1 sign, exp_bits exponent and man_bits mantissa bits
 * (IEEE layout, bias 2^(exp_bits-1) - 1) as a double, exactly. fn_style:
 * the OCP "fn" encodings (e4m3fn) with no infinity, where only the all-ones
 * exponent and mantissa is NaN. */
static double decode_float(uint32_t bits, int exp_bits, int man_bits, int fn_style) {
  const uint32_t man_mask = (UINT32_C(1) << man_bits) - 1;
  const uint32_t exp_max = (UINT32_C(1) << exp_bits) - 1;
  const int bias = (1 << (exp_bits - 1)) - 1;
  const int negative = (bits >> (exp_bits + man_bits)) & 1;
  const uint32_t e = (bits >> man_bits) & exp_max;
  const uint32_t m = bits & man_mask;
  double v;
  if (e == exp_max && (!fn_style || m == man_mask)) {
    v = (!fn_style && m == 0) ? INFINITY : NAN;
  } else if (e == 0) {
    v = ldexp((double)m, 1 - bias - man_bits);
  } else {
    v = ldexp((double)(m | (man_mask + 1)), (int)e - bias - man_bits);
  }
  return negative ? -v : v;
}

/* The element's bytes (little-endian host order, as bp_tensor_read gives
 * them) as a scalar. */
static bp_status_t to_scalar(uint32_t dtype, const unsigned char* p, bp_scalar_t* out) {
  union {
    float f32;
    double f64;
    int8_t i8;
    uint8_t u8;
    int16_t i16;
    uint16_t u16;
    int32_t i32;
    int64_t i64;
    unsigned char raw[16]; /* the widest element (c128) */
  } u;
  memcpy(&u, p, bp_dtype_size(dtype));
  memset(out, 0, sizeof(*out));
  out->kind = BP_SCALAR_FLOAT;
  switch (dtype) {
    case BP_DTYPE_F32: out->v.f = u.f32; return BP_OK;
    case BP_DTYPE_F64: out->v.f = u.f64; return BP_OK;
    case BP_DTYPE_F16: out->v.f = decode_float(u.u16, 5, 10, 0); return BP_OK;
    case BP_DTYPE_BF16: out->v.f = decode_float(u.u16, 8, 7, 0); return BP_OK;
    case BP_DTYPE_F8E5M2: out->v.f = decode_float(u.u8, 5, 2, 0); return BP_OK;
    case BP_DTYPE_F8E4M3FN: out->v.f = decode_float(u.u8, 4, 3, 1); return BP_OK;
    default: break;
  }
  out->kind = BP_SCALAR_INT;
  switch (dtype) {
    case BP_DTYPE_I8: out->v.i = u.i8; return BP_OK;
    case BP_DTYPE_U8: out->v.i = u.u8; return BP_OK;
    case BP_DTYPE_I16: out->v.i = u.i16; return BP_OK;
    case BP_DTYPE_I32: out->v.i = u.i32; return BP_OK;
    case BP_DTYPE_I64: out->v.i = u.i64; return BP_OK;
    case BP_DTYPE_BOOL:
      out->kind = BP_SCALAR_BOOL;
      out->v.b = u.u8 != 0;
      return BP_OK;
    default: break;
  }
  out->kind = BP_SCALAR_NONE;
  return bp__error(BP_INVALID_ARGUMENT, "bp_tensor_item: dtype %s has no bp_scalar_t kind",
                   bp_dtype_name(dtype));
}

bp_status_t bp_tensor_item(bp_stream_t* stream, const bp_tensor_t* t, bp_scalar_t* out_value) {
  static const char fn[] = "bp_tensor_item";
  unsigned char bytes[16];
  bp_scalar_t value;
  bp__clear_error();
  BP__REQUIRE_ARG(fn, stream);
  BP__REQUIRE_ARG(fn, t);
  BP__REQUIRE_ARG(fn, out_value);
  const int64_t numel = bp_tensor_numel(t);
  if (numel != 1)
    return bp__error(BP_INVALID_ARGUMENT,
                     "%s: a tensor with %lld elements cannot be read as one scalar", fn,
                     (long long)numel);
  const size_t esize = bp_dtype_size(t->dtype);
  if (esize == 0 || esize > sizeof(bytes))
    return bp__error(BP_INVALID_ARGUMENT, "%s: invalid dtype %u", fn, t->dtype);
  /* Reject before the blocking read what cannot be a scalar. */
  memset(bytes, 0, sizeof(bytes));
  bp_status_t status = to_scalar(t->dtype, bytes, &value);
  if (status != BP_OK) return status;
  status = bp_tensor_read(stream, t, bytes, esize);
  if (status != BP_OK) return status;
  (void)to_scalar(t->dtype, bytes, &value);
  *out_value = value;
  return BP_OK;
}
