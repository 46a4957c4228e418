/* backplane plugin kit: block quantization of collective payloads
 * (bp_collective_options_t.compression).
 *
 * A payload of floats becomes one code per element (int8, or fp8 e4m3fn)
 * and one f32 scale per block of `block` elements: scale = amax / 127
 * (int8, round to nearest with ties away from zero, codes in [-127, 127])
 * or amax / 448 (e4m3fn,
 * round to nearest even, no saturation needed). A block of zeros has scale
 * 0. Decoding multiplies back. The error of one encode/decode is at most
 * amax / 254 per element for int8 and |x| / 16 (plus amax * 2^-9 / 448 for
 * subnormal codes) for e4m3fn; docs/collectives.md gives the bound of each
 * collective.
 */
#include <math.h>
#include <string.h>

#include "bp_kit_comm.h"
#include "bp_plugin_common.h"
#include "kit_comm_codec.h"
#include "kit_comm_floats.h"



int bp_kit_comm_can_compress(uint32_t dtype, uint32_t compression) {
  return (compression == BP_DTYPE_I8 || compression == BP_DTYPE_F8E4M3FN) &&
         (dtype == BP_DTYPE_F32 || dtype == BP_DTYPE_F16 || dtype == BP_DTYPE_BF16 ||
          dtype == BP_DTYPE_F64);
}

uint64_t bp_kit_comm_scale_count(uint64_t count, uint32_t block) {
  return (count + block - 1) / block;
}

/* Conversion tiles of the dtypes other than f32 (stack buffers). */
enum { CODEC_TILE = 1024 };

/* f32 copies of elements [at, at + m) of src, m <= CODEC_TILE. */
static const float* as_f32(uint32_t dtype, const void* src, uint64_t at, uint64_t m,
                           float* tile) {
  if (dtype == BP_DTYPE_F32) return (const float*)src + at;
  for (uint64_t i = 0; i < m; ++i) tile[i] = bp_kit_comm_load_f32(dtype, src, at + i);
  return tile;
}

/* The largest |x| of a block as f32 bits (NaN above 0x7f800000). */
static uint32_t block_absmax(const bp_kit_codec_kernels_t* k, uint32_t dtype, const void* src,
                             uint64_t at, uint64_t m) {
  if (dtype == BP_DTYPE_F32) return k->absmax_bits((const float*)src + at, m);
  float tile[CODEC_TILE];
  uint32_t top = 0;
  for (uint64_t t = 0; t < m; t += CODEC_TILE) {
    const uint64_t tn = m - t < CODEC_TILE ? m - t : CODEC_TILE;
    const uint32_t a = k->absmax_bits(as_f32(dtype, src, at + t, tn, tile), tn);
    top = a > top ? a : top;
  }
  return top;
}

void bp_kit_comm_encode(uint32_t dtype, uint32_t compression, uint32_t block, const void* src,
                        uint64_t first, uint64_t count, int8_t* codes, float* scales) {
  const bp_kit_codec_kernels_t* k = bp_kit_comm_codec();
  const float top = compression == BP_DTYPE_I8 ? 127.0f : 448.0f;
  float tile[CODEC_TILE];
  for (uint64_t b = 0; b < count; b += block) {
    const uint64_t m = count - b < block ? count - b : block;
    const uint32_t abits = block_absmax(k, dtype, src, first + b, m);
    int8_t* c = codes + b;
    if (abits == 0 || abits >= 0x7f800000u) {
      /* Zeros encode as zeros; a block holding NaN or Inf decodes to NaN
       * throughout (its scale is NaN): the error is visible, not hidden. */
      scales[b / block] = abits == 0 ? 0.0f : NAN;
      memset(c, 0, (size_t)m);
      continue;
    }
    const float amax = bp__bits_f32(abits);
    scales[b / block] = amax / top;
    /* Below 2^-100, top / amax could overflow to Inf: the block is scaled
     * up by 2^64 first (exact), and the inverse taken of the scaled amax. */
    const int tiny = abits < 0x0d800000u;
    const float inv = tiny ? top / (amax * 0x1p64f) : top / amax, pre = tiny ? 0x1p64f : 1.0f;
    for (uint64_t t = 0; t < m; t += CODEC_TILE) {
      const uint64_t tn = m - t < CODEC_TILE ? m - t : CODEC_TILE;
      const float* x = as_f32(dtype, src, first + b + t, tn, tile);
      if (pre != 1.0f) {
        for (uint64_t i = 0; i < tn; ++i) tile[i] = x[i] * pre;
        x = tile;
      }
      k->encode(compression, x, tn, inv, c + t);
    }
  }
}

/* Calls body(seg_first, seg_len, scale index) for the pieces of
 * [first, first + count) that lie in one block each. */
#define FOR_BLOCK_SEGMENTS(first, count, block, BODY)                         \
  for (uint64_t e_ = (first); e_ < (first) + (count);) {                      \
    const uint64_t blk_ = e_ / (block);                                        \
    const uint64_t end_ = (blk_ + 1) * (block) < (first) + (count)            \
                              ? (blk_ + 1) * (block) : (first) + (count);     \
    const uint64_t seg_ = e_, len_ = end_ - e_;                               \
    BODY;                                                                      \
    e_ = end_;                                                                 \
  }

void bp_kit_comm_decode_sum(uint32_t compression, uint32_t block, const int8_t* const* codes,
                            const float* const* scales, uint32_t n, uint64_t first,
                            uint64_t count, float* acc) {
  /* Tile by tile (a tile stays in cache while every rank's codes are
   * added to it), ranks in order, each decoded and added in one pass. */
  enum { TILE = 2048 };
  const bp_kit_codec_kernels_t* k = bp_kit_comm_codec();
  for (uint64_t t = 0; t < count; t += TILE) {
    const uint64_t tn = count - t < TILE ? count - t : TILE;
    float* tile = acc + t;
    memset(tile, 0, sizeof(float) * (size_t)tn);
    for (uint32_t q = 0; q < n; ++q) {
      const int8_t* cq = codes[q];
      const float* sq = scales[q];
      FOR_BLOCK_SEGMENTS(first + t, tn, block, {
        k->decode(compression, cq + seg_, len_, sq[blk_], tile + (seg_ - first - t), 1);
      })
    }
  }
}

void bp_kit_comm_decode(uint32_t dtype, uint32_t compression, uint32_t block,
                        const int8_t* codes, const float* scales, uint64_t first, uint64_t count,
                        void* dst, uint64_t dst_first) {
  const bp_kit_codec_kernels_t* k = bp_kit_comm_codec();
  if (dtype == BP_DTYPE_F32) {
    float* out = (float*)dst + dst_first;
    FOR_BLOCK_SEGMENTS(first, count, block, {
      k->decode(compression, codes + seg_, len_, scales[blk_], out + (seg_ - first), 0);
    })
    return;
  }
  float tile[CODEC_TILE];
  for (uint64_t t = 0; t < count; t += CODEC_TILE) {
    const uint64_t tn = count - t < CODEC_TILE ? count - t : CODEC_TILE;
    FOR_BLOCK_SEGMENTS(first + t, tn, block, {
      k->decode(compression, codes + seg_, len_, scales[blk_], tile + (seg_ - first - t), 0);
    })
    bp_kit_comm_store_floats(dtype, tile, tn, dst, dst_first + t);
  }
}

void bp_kit_comm_store_floats(uint32_t dtype, const float* src, uint64_t count, void* dst,
                              uint64_t dst_first) {
  for (uint64_t i = 0; i < count; ++i) bp_kit_comm_store_f32(dtype, dst, dst_first + i, src[i]);
}
