/* backplane GPU kernels: device helpers shared by every kernel file
 * (loads and stores of every dtype through a compute type). Device only. */
#ifndef BP_GPU_COMMON_H_
#define BP_GPU_COMMON_H_

#include "bp_gpu_portability.h"
#include "bp_gpu_args.h"
#include "bp_gpu_ids.h"

/* Element `i` of type T at byte offset `off` of `base`. */
#define BP_ELEM(T, base, off, i) (((BP_GLOBAL T*)((base) + (off)))[(i)])

BP_INLINE float bp_bf16_to_f32(bp_u16 b) { return BP_AS_F32(((bp_u32)b) << 16); }
/* Round to nearest even; NaN stays a (quiet) NaN. */
BP_INLINE bp_u16 bp_f32_to_bf16(float f) {
  bp_u32 u = BP_AS_U32(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return (bp_u16)((u >> 16) | 0x40u);
  u += 0x7fffu + ((u >> 16) & 1u);
  return (bp_u16)(u >> 16);
}

BP_INLINE float bp_round_f16(float v) {
  bp_u16 h;
  BP_STORE_HALF_RTE(v, (half*)&h, 0);
  return BP_LOAD_HALF((const half*)&h, 0);
}

BP_INLINE bp_u32 dt_size(bp_u32 dt) {
  switch (dt) {
    case DT_F32: case DT_I32: return 4u;
    case DT_F16: case DT_BF16: case DT_I16: return 2u;
    case DT_F64: case DT_I64: return 8u;
  }
  return 1u;
}

/* Loads as double / int64 (any dtype), for accumulation and conversions. */
#ifdef BP_HAS_F64
#define BP_ACC_F double
#else
#define BP_ACC_F float
#endif

BP_INLINE BP_ACC_F bp_load_f(BP_GLOBAL bp_u8* base, bp_i64 off, bp_i64 i, bp_u32 dt) {
  switch (dt) {
    case DT_F32: return (BP_ACC_F)BP_ELEM(float, base, off, i);
    case DT_F16: return (BP_ACC_F)BP_LOAD_HALF((BP_GLOBAL half*)(base + off), i);
    case DT_BF16: return (BP_ACC_F)bp_bf16_to_f32(BP_ELEM(bp_u16, base, off, i));
#ifdef BP_HAS_F64
    case DT_F64: return BP_ELEM(double, base, off, i);
#endif
    case DT_I8: return (BP_ACC_F)BP_ELEM(bp_i8, base, off, i);
    case DT_U8: case DT_BOOL: return (BP_ACC_F)BP_ELEM(bp_u8, base, off, i);
    case DT_I16: return (BP_ACC_F)BP_ELEM(bp_i16, base, off, i);
    case DT_I32: return (BP_ACC_F)BP_ELEM(bp_i32, base, off, i);
    case DT_I64: return (BP_ACC_F)BP_ELEM(bp_i64, base, off, i);
  }
  return (BP_ACC_F)0;
}

BP_INLINE bp_i64 bp_load_i(BP_GLOBAL bp_u8* base, bp_i64 off, bp_i64 i, bp_u32 dt) {
  switch (dt) {
    case DT_I8: return BP_ELEM(bp_i8, base, off, i);
    case DT_U8: case DT_BOOL: return BP_ELEM(bp_u8, base, off, i);
    case DT_I16: return BP_ELEM(bp_i16, base, off, i);
    case DT_I32: return BP_ELEM(bp_i32, base, off, i);
    case DT_I64: return BP_ELEM(bp_i64, base, off, i);
    case DT_F32: return (bp_i64)BP_ELEM(float, base, off, i);
    case DT_F16: return (bp_i64)BP_LOAD_HALF((BP_GLOBAL half*)(base + off), i);
    case DT_BF16: return (bp_i64)bp_bf16_to_f32(BP_ELEM(bp_u16, base, off, i));
#ifdef BP_HAS_F64
    case DT_F64: return (bp_i64)BP_ELEM(double, base, off, i);
#endif
  }
  return 0;
}

/* Float to integer as C does for in-range values; NaN and out-of-range
 * values give what the conversion gives (PyTorch leaves them undefined). */
BP_INLINE void bp_store_f(BP_GLOBAL bp_u8* base, bp_i64 off, bp_i64 i, bp_u32 dt, BP_ACC_F v) {
  switch (dt) {
    case DT_F32: BP_ELEM(float, base, off, i) = (float)v; return;
    case DT_F16: BP_STORE_HALF_RTE((float)v, (BP_GLOBAL half*)(base + off), i); return;
    case DT_BF16: BP_ELEM(bp_u16, base, off, i) = bp_f32_to_bf16((float)v); return;
#ifdef BP_HAS_F64
    case DT_F64: BP_ELEM(double, base, off, i) = v; return;
#endif
    case DT_BOOL: BP_ELEM(bp_u8, base, off, i) = (v != (BP_ACC_F)0 || isnan(v)) ? 1 : 0; return;
    case DT_I8: BP_ELEM(bp_i8, base, off, i) = (bp_i8)(bp_i64)v; return;
    case DT_U8: BP_ELEM(bp_u8, base, off, i) = (bp_u8)(bp_i64)v; return;
    case DT_I16: BP_ELEM(bp_i16, base, off, i) = (bp_i16)(bp_i64)v; return;
    case DT_I32: BP_ELEM(bp_i32, base, off, i) = (bp_i32)(bp_i64)v; return;
    case DT_I64: BP_ELEM(bp_i64, base, off, i) = (bp_i64)v; return;
  }
}

BP_INLINE void bp_store_i(BP_GLOBAL bp_u8* base, bp_i64 off, bp_i64 i, bp_u32 dt, bp_i64 v) {
  switch (dt) {
    case DT_BOOL: BP_ELEM(bp_u8, base, off, i) = v != 0 ? 1 : 0; return;
    case DT_I8: BP_ELEM(bp_i8, base, off, i) = (bp_i8)v; return;
    case DT_U8: BP_ELEM(bp_u8, base, off, i) = (bp_u8)v; return;
    case DT_I16: BP_ELEM(bp_i16, base, off, i) = (bp_i16)v; return;
    case DT_I32: BP_ELEM(bp_i32, base, off, i) = (bp_i32)v; return;
    case DT_I64: BP_ELEM(bp_i64, base, off, i) = v; return;
    case DT_F32: BP_ELEM(float, base, off, i) = (float)v; return;
    case DT_F16: BP_STORE_HALF_RTE((float)v, (BP_GLOBAL half*)(base + off), i); return;
    case DT_BF16: BP_ELEM(bp_u16, base, off, i) = bp_f32_to_bf16((float)v); return;
#ifdef BP_HAS_F64
    case DT_F64: BP_ELEM(double, base, off, i) = (double)v; return;
#endif
  }
}

/* Offset (in elements) of linear index `lin` of a shape, for one operand's
 * strides. */
BP_INLINE bp_i64 bp_offset_of(bp_i64 lin, bp_u32 rank, BP_GLOBAL const bp_i64* sizes,
                              BP_GLOBAL const bp_i64* strides) {
  bp_i64 off = 0;
  for (int d = (int)rank - 1; d >= 0; d--) {
    bp_i64 sz = sizes[d];
    bp_i64 c = lin % sz;
    lin /= sz;
    off += c * strides[d];
  }
  return off;
}

#endif /* BP_GPU_COMMON_H_ */
