/* dtypes and reductions as MPI sees them (mpi_internal.h: bp_mpi_types).
 *
 * f32, f64 and the 8..64-bit integers map to MPI's predefined types and
 * ops; c64 and c128 to MPI_C_FLOAT_COMPLEX / MPI_C_DOUBLE_COMPLEX (sum and
 * product only). f16, bf16 and the four fp8 formats have no MPI type: they
 * travel as MPI_UINT16_T / MPI_UINT8_T under user ops (MPI_Op_create, one
 * per dtype and reduction, made on first use) that widen both operands to
 * f64 (exact), combine, and round back once: every pairwise step of MPI's
 * reduction is correctly rounded in the dtype. AVG is SUM followed by
 * bp_mpi_divide.
 */
#include <stdio.h>
#include <string.h>

#include "bp_kit.h"
#include "mpi_internal.h"

/* ---- low-precision floats through f64 ----------------------------------- */
static double lowp_load(uint32_t dtype, const void* p, uint64_t i) {
  switch (dtype) {
    case BP_DTYPE_F16: return bp_f16_to_f32(((const uint16_t*)p)[i]);
    case BP_DTYPE_BF16: return bp_bf16_to_f32(((const uint16_t*)p)[i]);
    default: return bp_small_float_to_f64(dtype, ((const uint8_t*)p)[i]);
  }
}

static void lowp_store(uint32_t dtype, void* p, uint64_t i, double v) {
  switch (dtype) {
    case BP_DTYPE_F16: ((uint16_t*)p)[i] = bp_f64_to_f16(v); break;
    case BP_DTYPE_BF16: ((uint16_t*)p)[i] = bp_f64_to_bf16(v); break;
    default: ((uint8_t*)p)[i] = (uint8_t)bp_f64_to_small_float(dtype, v); break;
  }
}

/* inout[i] = inout[i] (op) in[i]; NaN propagates through min and max. */
static void lowp_reduce(uint32_t dtype, int rop, const void* in, void* inout, int n) {
  for (uint64_t i = 0; i < (uint64_t)n; i++) {
    double a = lowp_load(dtype, in, i), b = lowp_load(dtype, inout, i), r;
    switch (rop) {
      case BP_REDUCE_PROD: r = a * b; break;
      case BP_REDUCE_MIN: r = (a < b || a != a) ? a : b; break;
      case BP_REDUCE_MAX: r = (a > b || a != a) ? a : b; break;
      default: r = a + b; break;
    }
    lowp_store(dtype, inout, i, r);
  }
}

#define BP_MPI_LOWP_DTYPES(X) X(F16) X(BF16) X(F8E4M3FN) X(F8E5M2) X(F8E4M3FNUZ) X(F8E5M2FNUZ)
#define BP_MPI_USER_FN(D, R)                                                      \
  static void user_##D##_##R(void* in, void* inout, int* len, bp_mpi_h* type) {   \
    (void)type;                                                                   \
    lowp_reduce(BP_DTYPE_##D, R, in, inout, *len);                                \
  }
#define BP_MPI_USER_FNS(D) \
  BP_MPI_USER_FN(D, 0) BP_MPI_USER_FN(D, 1) BP_MPI_USER_FN(D, 2) BP_MPI_USER_FN(D, 3)
BP_MPI_LOWP_DTYPES(BP_MPI_USER_FNS)
#define BP_MPI_USER_ROW(D) [BP_DTYPE_##D] = {user_##D##_0, user_##D##_1, user_##D##_2, user_##D##_3},
static const bp_mpi_user_fn k_user_fns[BP_DTYPE_SLOTS][4] = {BP_MPI_LOWP_DTYPES(BP_MPI_USER_ROW)};

static bp_status_t user_op(uint32_t dtype, int rop, bp_mpi_h* out) {
  bp_status_t st = BP_OK;
  pthread_mutex_lock(&bp_mpi.lock);
  if (!bp_mpi.user_ops[dtype][rop]) {
    int rc;
    BP_MPI(rc, MPI_Op_create, k_user_fns[dtype][rop], 1, &bp_mpi.user_ops[dtype][rop]);
    st = bp_mpi_check(rc, "MPI_Op_create");
  }
  *out = bp_mpi.user_ops[dtype][rop];
  pthread_mutex_unlock(&bp_mpi.lock);
  return st;
}

/* ---- the mapping ---------------------------------------------------------- */
/* Native types: X(dtype, C type, Open MPI object). */
#define BP_MPI_INTS(X)                                \
  X(I8, int8_t, ompi_mpi_int8_t, int64_t)                      \
  X(U8, uint8_t, ompi_mpi_uint8_t, uint64_t)                    \
  X(I16, int16_t, ompi_mpi_int16_t, int64_t)                   \
  X(U16, uint16_t, ompi_mpi_uint16_t, uint64_t)                 \
  X(I32, int32_t, ompi_mpi_int32_t, int64_t)                   \
  X(U32, uint32_t, ompi_mpi_uint32_t, uint64_t)                 \
  X(I64, int64_t, ompi_mpi_int64_t, int64_t)                   \
  X(U64, uint64_t, ompi_mpi_uint64_t, uint64_t)
#define BP_MPI_NATIVE(X) X(F32, float, ompi_mpi_float, double) X(F64, double, ompi_mpi_double, double) BP_MPI_INTS(X)

static int native_type_known(uint32_t dtype) {
  switch (dtype) {
#define BP_MPI_KNOWN_CASE(D, T, obj, W) case BP_DTYPE_##D:
    BP_MPI_NATIVE(BP_MPI_KNOWN_CASE)
#undef BP_MPI_KNOWN_CASE
    case BP_DTYPE_C64:
    case BP_DTYPE_C128: return 1;
    default: return 0;
  }
}

static bp_mpi_h native_type(uint32_t dtype) {
  switch (dtype) {
#define BP_MPI_TYPE_CASE(D, T, obj, W) case BP_DTYPE_##D: return bp_mpi.f.obj;
    BP_MPI_NATIVE(BP_MPI_TYPE_CASE)
#undef BP_MPI_TYPE_CASE
    case BP_DTYPE_C64: return bp_mpi.f.ompi_mpi_c_float_complex;
    case BP_DTYPE_C128: return bp_mpi.f.ompi_mpi_c_double_complex;
    default: return NULL;
  }
}

const char* bp_mpi_reduce_support(uint32_t dtype, int rop, bp_status_t* out_status) {
  uint32_t bytes = bp_dtype_size(dtype);
  *out_status = BP_UNIMPLEMENTED;
  if (!bytes || bp_dtype_bits(dtype) != 8u * bytes) return "sub-byte dtypes are not supported";
  if (rop < 0) return NULL;
  *out_status = BP_INVALID_ARGUMENT;
  if (rop > BP_REDUCE_AVG) return "unknown reduction";
  if (dtype < BP_DTYPE_SLOTS && k_user_fns[dtype][0]) return NULL;
  int complex = dtype == BP_DTYPE_C64 || dtype == BP_DTYPE_C128;
  if (complex && (rop == BP_REDUCE_MIN || rop == BP_REDUCE_MAX))
    return "min and max of complex numbers are not defined";
  *out_status = BP_UNIMPLEMENTED;
  return native_type_known(dtype) ? NULL : "no reduction over this dtype (bool, e8m0)";
}

bp_status_t bp_mpi_types(uint32_t dtype, int rop, bp_mpi_h* out_type, bp_mpi_h* out_op,
                         uint32_t* out_mult) {
  *out_op = NULL;
  *out_mult = 1;
  uint32_t bytes = bp_dtype_size(dtype), bits = bp_dtype_bits(dtype);
  if (!bytes || bits != 8u * bytes)
    return bp_kit_error(BP_UNIMPLEMENTED, "mpi: dtype %s is not whole bytes per element",
                        bp_dtype_name(dtype));
  if (rop < 0) { /* a move: any type of the element's size */
    switch (bytes) {
      case 1: *out_type = bp_mpi.f.ompi_mpi_uint8_t; return BP_OK;
      case 2: *out_type = bp_mpi.f.ompi_mpi_uint16_t; return BP_OK;
      case 4: *out_type = bp_mpi.f.ompi_mpi_uint32_t; return BP_OK;
      default:
        *out_type = bp_mpi.f.ompi_mpi_uint64_t;
        *out_mult = bytes / 8u;
        return BP_OK;
    }
  }
  if (rop > BP_REDUCE_AVG)
    return bp_kit_error(BP_INVALID_ARGUMENT, "mpi: unknown reduction %d", rop);
  int base = rop == BP_REDUCE_AVG ? BP_REDUCE_SUM : rop;
  if (k_user_fns[dtype][0]) {
    *out_type = bytes == 2 ? bp_mpi.f.ompi_mpi_uint16_t : bp_mpi.f.ompi_mpi_uint8_t;
    return user_op(dtype, base, out_op);
  }
  *out_type = native_type(dtype);
  if (!*out_type)
    return bp_kit_error(BP_UNIMPLEMENTED, "mpi: no reduction over %s", bp_dtype_name(dtype));
  int complex = dtype == BP_DTYPE_C64 || dtype == BP_DTYPE_C128;
  if (complex && (base == BP_REDUCE_MIN || base == BP_REDUCE_MAX))
    return bp_kit_error(BP_INVALID_ARGUMENT, "mpi: min and max of %s are not defined",
                        bp_dtype_name(dtype));
  bp_mpi_h ops[4] = {bp_mpi.f.ompi_mpi_op_sum, bp_mpi.f.ompi_mpi_op_prod, bp_mpi.f.ompi_mpi_op_min,
                     bp_mpi.f.ompi_mpi_op_max};
  *out_op = ops[base];
  return BP_OK;
}

void bp_mpi_divide(uint32_t dtype, void* p, uint64_t n, int by) {
  switch (dtype) {
    case BP_DTYPE_F32:
      for (uint64_t i = 0; i < n; i++) ((float*)p)[i] /= (float)by;
      return;
    case BP_DTYPE_C64:
      for (uint64_t i = 0; i < 2 * n; i++) ((float*)p)[i] /= (float)by;
      return;
    case BP_DTYPE_F64:
      for (uint64_t i = 0; i < n; i++) ((double*)p)[i] /= by;
      return;
    case BP_DTYPE_C128:
      for (uint64_t i = 0; i < 2 * n; i++) ((double*)p)[i] /= by;
      return;
#define BP_MPI_DIV_INT(D, T, obj, W)                          \
  case BP_DTYPE_##D:                                          \
    for (uint64_t i = 0; i < n; i++) ((T*)p)[i] = (T)((W)((T*)p)[i] / (W)by); \
    return;
      BP_MPI_INTS(BP_MPI_DIV_INT)
#undef BP_MPI_DIV_INT
    default:
      for (uint64_t i = 0; i < n; i++) lowp_store(dtype, p, i, lowp_load(dtype, p, i) / by);
      return;
  }
}
