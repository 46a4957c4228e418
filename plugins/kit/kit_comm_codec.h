/* backplane plugin kit: the vectorized f32 kernels of the collective
 * payload codec (kit_comm_codec.c), one variant per ISA chosen at run
 * time. Internal to the kit; kit_comm_quant.c builds the block codec
 * (bp_kit_comm_encode and the decoders) on them. */
#ifndef BACKPLANE_KIT_COMM_CODEC_H_
#define BACKPLANE_KIT_COMM_CODEC_H_

#include <stdint.h>

typedef struct bp_kit_codec_kernels {
  const char* name; /* "generic", "avx2", "avx512" */
  /* The largest |x[i]| of m floats, as f32 bits (above 0x7f800000: NaN). */
  uint32_t (*absmax_bits)(const float* x, uint64_t m);
  /* c[i] = code of x[i] * inv (comp BP_DTYPE_I8 or BP_DTYPE_F8E4M3FN). */
  void (*encode)(uint32_t comp, const float* x, uint64_t m, float inv, int8_t* c);
  /* out[i] = decode(c[i]) * sc, or out[i] += that when accumulate. */
  void (*decode)(uint32_t comp, const int8_t* c, uint64_t m, float sc, float* out,
                 int accumulate);
} bp_kit_codec_kernels_t;

/* The variant in use (chosen on first use). */
const bp_kit_codec_kernels_t* bp_kit_comm_codec(void);
/* Tests and benchmarks: use variant `name` from now on in this process
 * (NULL: choose again). Returns 0 when this CPU cannot run it or the name
 * is unknown (nothing changes then), 1 otherwise. Not thread-safe against
 * collectives in flight. */
int bp_kit_comm_codec_force(const char* name);

#endif /* BACKPLANE_KIT_COMM_CODEC_H_ */
