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
#include "kit_comm_floats.h"



int bp_kit_comm_can_compress(uint32_t dtype, uint32_t compression) {
  return (compression == BP_DTYPE_I8 || compression == BP_DTYPE_F8E4M3FN) &&
         (dtype == BP_DTYPE_F32 || dtype == BP_DTYPE_F16 || dtype == BP_DTYPE_BF16 ||
          dtype == BP_DTYPE_F64);
}

uint64_t bp_kit_comm_scale_count(uint64_t count, uint32_t block) {
  return (count + block - 1) / block;
}

static float decode_one(uint32_t compression, int8_t code, float scale) {
  if (compression == BP_DTYPE_I8) return (float)code * scale;
  return bp_f8e4m3fn_to_f32((uint8_t)code) * scale;
}

void bp_kit_comm_encode(uint32_t dtype, uint32_t compression, uint32_t block, const void* src,
                        uint64_t first, uint64_t count, int8_t* codes, float* scales) {
  for (uint64_t b = 0; b < count; b += block) {
    const uint64_t m = count - b < block ? count - b : block;
    float amax = 0.0f;
    if (dtype == BP_DTYPE_F32) {
      /* On |x| as bits, integer order is float order, Inf is 0x7f800000
       * and every NaN is above it: an integer max that vectorizes. */
      const uint32_t* x = (const uint32_t*)((const float*)src + first + b);
      uint32_t top_bits = 0;
      for (uint64_t i = 0; i < m; ++i) {
        const uint32_t a = x[i] & 0x7fffffffu;
        top_bits = a > top_bits ? a : top_bits;
      }
      amax = top_bits > 0x7f800000u ? NAN : bp__bits_f32(top_bits);
    } else {
      for (uint64_t i = 0; i < m; ++i) {
        const float a = fabsf(bp_kit_comm_load_f32(dtype, src, first + b + i));
        if (a != a) {
          amax = NAN;
          break;
        }
        if (a > amax) amax = a;
      }
    }
    int8_t* c = codes + b;
    if (!(amax > 0.0f) || !isfinite(amax)) {
      /* Zeros encode as zeros; a block holding NaN or Inf decodes to NaN
       * throughout (its scale is NaN): the error is visible, not hidden. */
      scales[b / block] = (amax == 0.0f) ? 0.0f : NAN;
      memset(c, 0, (size_t)m);
      continue;
    }
    const int is_i8 = compression == BP_DTYPE_I8;
    const float top = is_i8 ? 127.0f : 448.0f, inv = top / amax;
    scales[b / block] = amax / top;
    if (is_i8 && dtype == BP_DTYPE_F32) {
      /* The hot path, written to vectorize: |x * inv| <= 127 already, so
       * no clamp; ties round away from zero. */
      const float* x = (const float*)src + first + b;
      for (uint64_t i = 0; i < m; ++i) {
        const float y = x[i] * inv;
        c[i] = (int8_t)(int32_t)(y + (y >= 0.0f ? 0.5f : -0.5f));
      }
      continue;
    }
    for (uint64_t i = 0; i < m; ++i) {
      const float x = bp_kit_comm_load_f32(dtype, src, first + b + i) * inv;
      if (is_i8) {
        const float q = x + (x >= 0.0f ? 0.5f : -0.5f);
        c[i] = (int8_t)(int32_t)(q > 127.0f ? 127.0f : q < -127.0f ? -127.0f : q);
      } else {
        c[i] = (int8_t)bp_f64_to_f8e4m3fn((double)x);
      }
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
   * added to it), ranks in order. */
  enum { TILE = 2048 };
  for (uint64_t t = 0; t < count; t += TILE) {
    const uint64_t tn = count - t < TILE ? count - t : TILE;
    float* tile = acc + t;
    for (uint64_t i = 0; i < tn; ++i) tile[i] = 0.0f;
    for (uint32_t q = 0; q < n; ++q) {
      const int8_t* cq = codes[q];
      const float* sq = scales[q];
      if (compression == BP_DTYPE_I8) {
        FOR_BLOCK_SEGMENTS(first + t, tn, block, {
          const float sc = sq[blk_];
          const int8_t* src = cq + seg_;
          float* dst = tile + (seg_ - first - t);
          for (uint64_t i = 0; i < len_; ++i) dst[i] += (float)src[i] * sc;
        })
      } else {
        FOR_BLOCK_SEGMENTS(first + t, tn, block, {
          const float sc = sq[blk_];
          for (uint64_t i = 0; i < len_; ++i)
            tile[seg_ - first - t + i] += decode_one(compression, cq[seg_ + i], sc);
        })
      }
    }
  }
}

void bp_kit_comm_decode(uint32_t dtype, uint32_t compression, uint32_t block,
                        const int8_t* codes, const float* scales, uint64_t first, uint64_t count,
                        void* dst, uint64_t dst_first) {
  if (compression == BP_DTYPE_I8 && dtype == BP_DTYPE_F32) {
    float* out = (float*)dst + dst_first;
    FOR_BLOCK_SEGMENTS(first, count, block, {
      const float sc = scales[blk_];
      const int8_t* src = codes + seg_;
      float* o = out + (seg_ - first);
      for (uint64_t i = 0; i < len_; ++i) o[i] = (float)src[i] * sc;
    })
    return;
  }
  for (uint64_t i = 0; i < count; ++i) {
    const uint64_t e = first + i;
    bp_kit_comm_store_f32(dtype, dst, dst_first + i,
                          decode_one(compression, codes[e], scales[e / block]));
  }
}

void bp_kit_comm_store_floats(uint32_t dtype, const float* src, uint64_t count, void* dst,
                              uint64_t dst_first) {
  for (uint64_t i = 0; i < count; ++i) bp_kit_comm_store_f32(dtype, dst, dst_first + i, src[i]);
}
