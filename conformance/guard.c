/* Buffer images with guard bands.
 *
 * Every operand lives in its own buffer: BPC_GUARD_BYTES of guard, the
 * elements at their layout's strides (gaps between strided elements are
 * guard too), BPC_GUARD_BYTES of guard. After an op the whole buffer is read
 * back; any guard byte that changed is an out-of-bounds write.
 */
#include <stdlib.h>
#include <string.h>

#include "conform.h"

const char* bpc_layout_name(uint32_t layout) {
  static const char* const names[BPC_LAYOUT_KIND_COUNT_] = {"contig", "offset", "transposed",
                                                            "strided"};
  return layout < BPC_LAYOUT_KIND_COUNT_ ? names[layout] : "?";
}

bp_status_t bpc_layout_make(uint32_t dtype, uint32_t rank, const int64_t* sizes, uint32_t kind,
                            bpc_layout_t* out) {
  size_t esize = bpc_dtype_size(dtype);
  if (esize == 0 || rank > BP_MAX_RANK || kind >= BPC_LAYOUT_KIND_COUNT_) {
    return BP_INVALID_ARGUMENT;
  }
  memset(out, 0, sizeof *out);
  out->dtype = dtype;
  out->rank = rank;
  out->numel = 1;
  for (uint32_t d = 0; d < rank; d++) {
    if (sizes[d] < 0 || sizes[d] > (INT64_C(1) << 32)) return BP_INVALID_ARGUMENT;
    out->sizes[d] = sizes[d];
    out->numel *= sizes[d];
  }
  /* STRIDED: a slice with step 2 of every dim of a dense parent twice as
   * large, so gaps sit between elements and between rows. */
  int64_t step = kind == BPC_LAYOUT_STRIDED ? 2 : 1;
  int64_t acc = 1;
  if (kind == BPC_LAYOUT_TRANSPOSED) {
    for (uint32_t d = 0; d < rank; d++) { /* first dim fastest */
      out->strides[d] = acc;
      acc *= sizes[d] > 0 ? sizes[d] : 1;
    }
  } else {
    for (uint32_t d = rank; d-- > 0;) {
      out->strides[d] = acc * step;
      acc *= (sizes[d] > 0 ? sizes[d] : 1) * step;
    }
  }
  /* Span of the elements in bytes: last element's offset + one element. */
  uint64_t span = 0;
  if (out->numel > 0) {
    int64_t last = 0;
    for (uint32_t d = 0; d < rank; d++) last += (sizes[d] - 1) * out->strides[d];
    span = (uint64_t)(last + 1) * esize;
  }
  out->byte_offset = BPC_GUARD_BYTES + (kind == BPC_LAYOUT_OFFSET ? 3u * esize : 0u);
  out->buffer_size = out->byte_offset + span + BPC_GUARD_BYTES;
  return BP_OK;
}

uint8_t bpc_guard_byte(uint64_t offset) { return (uint8_t)(0xA5u ^ (uint8_t)(offset * 7u)); }

void bpc_image_fill_guard(uint8_t* image, uint64_t size) {
  for (uint64_t k = 0; k < size; k++) image[k] = bpc_guard_byte(k);
}

/* Calls fn(element index, byte offset) for every element in row-major order. */
#define BPC_FOR_EACH_ELEMENT(layout, k, off, body)                                       \
  do {                                                                                   \
    int64_t idx_[BP_MAX_RANK] = {0};                                                     \
    size_t esize_ = bpc_dtype_size((layout)->dtype);                                     \
    for (int64_t k = 0; k < (layout)->numel; k++) {                                      \
      int64_t eoff_ = 0;                                                                 \
      for (uint32_t d_ = 0; d_ < (layout)->rank; d_++) eoff_ += idx_[d_] * (layout)->strides[d_]; \
      uint64_t off = (layout)->byte_offset + (uint64_t)eoff_ * esize_;                   \
      body;                                                                              \
      for (uint32_t d_ = (layout)->rank; d_-- > 0;) {                                    \
        if (++idx_[d_] < (layout)->sizes[d_]) break;                                     \
        idx_[d_] = 0;                                                                    \
      }                                                                                  \
    }                                                                                    \
  } while (0)

void bpc_image_scatter(const bpc_layout_t* layout, uint8_t* image, const void* dense) {
  const uint8_t* src = (const uint8_t*)dense;
  BPC_FOR_EACH_ELEMENT(layout, k, off, memcpy(image + off, src + (size_t)k * esize_, esize_));
}

void bpc_image_gather(const bpc_layout_t* layout, const uint8_t* image, void* dense) {
  uint8_t* dst = (uint8_t*)dense;
  BPC_FOR_EACH_ELEMENT(layout, k, off, memcpy(dst + (size_t)k * esize_, image + off, esize_));
}

int bpc_guard_check(const bpc_layout_t* layout, const uint8_t* image, uint64_t* out_offset) {
  /* Mark element bytes, then every unmarked byte must hold the pattern. */
  uint8_t* mask = calloc((size_t)layout->buffer_size ? (size_t)layout->buffer_size : 1, 1);
  int bad = 0;
  if (!mask) { /* cannot check precisely: compare only the outer bands */
    for (uint64_t k = 0; k < BPC_GUARD_BYTES && !bad; k++) {
      if (image[k] != bpc_guard_byte(k)) { *out_offset = k; bad = 1; }
    }
    return bad;
  }
  BPC_FOR_EACH_ELEMENT(layout, k, off, memset(mask + off, 1, esize_));
  for (uint64_t k = 0; k < layout->buffer_size; k++) {
    if (!mask[k] && image[k] != bpc_guard_byte(k)) {
      *out_offset = k;
      bad = 1;
      break;
    }
  }
  free(mask);
  return bad;
}
