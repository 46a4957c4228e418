/* backplane plugin kit: element i of a float payload as f32 and back, for
 * the collective engine's reductions and block encoding (f32, f64, f16,
 * bf16 and the fp8 formats; narrowing rounds to nearest even). Internal
 * to the kit. */
#ifndef BACKPLANE_KIT_COMM_FLOATS_H_
#define BACKPLANE_KIT_COMM_FLOATS_H_

#include "bp_plugin_common.h"

static inline float bp_kit_comm_load_f32(uint32_t dtype, const void* p, uint64_t i) {
  switch (dtype) {
    case BP_DTYPE_F32: return ((const float*)p)[i];
    case BP_DTYPE_F64: return (float)((const double*)p)[i];
    case BP_DTYPE_F16: return bp_f16_to_f32(((const uint16_t*)p)[i]);
    case BP_DTYPE_BF16: return bp_bf16_to_f32(((const uint16_t*)p)[i]);
    default: return (float)bp_small_float_to_f64(dtype, ((const uint8_t*)p)[i]);
  }
}

static inline void bp_kit_comm_store_f32(uint32_t dtype, void* p, uint64_t i, float v) {
  switch (dtype) {
    case BP_DTYPE_F32: ((float*)p)[i] = v; break;
    case BP_DTYPE_F64: ((double*)p)[i] = v; break;
    case BP_DTYPE_F16: ((uint16_t*)p)[i] = bp_f32_to_f16(v); break;
    case BP_DTYPE_BF16: ((uint16_t*)p)[i] = bp_f32_to_bf16(v); break;
    default: ((uint8_t*)p)[i] = (uint8_t)bp_f64_to_small_float(dtype, (double)v); break;
  }
}

#endif /* BACKPLANE_KIT_COMM_FLOATS_H_ */
