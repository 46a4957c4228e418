#version 460
// backplane Vulkan plugin: gather-like indexing (gather, index_select,
// embedding). Each output element reads src at its own coordinates mapped
// through per-dim strides, plus index[...] times the gathered dim's stride.
// Elements move as raw bits (source and output share the dtype). An index
// out of [-size, size) writes zero instead of reading out of bounds.
//
// Metadata: 0-1 src, 4-5 out, 6-7 index addresses; 9 rank, 10 numel,
// 11 gathered dim size, 12 gathered stride (i64), 14..21 out sizes,
// 22.. out strides, 38.. src strides, 54.. index strides (i64 x8 each).
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"
layout(local_size_x = 256) in;
layout(constant_id = 0) const uint SC_ESIZE = 4;
layout(constant_id = 1) const uint SC_IDX_DT = 9;

void main() {
  uint rank = M(9u), numel = M(10u);
  int64_t dimsize = int64_t(M(11u));
  uint64_t src = M64(0u), outp = M64(4u), idxp = M64(6u);
  for (uint o = gl_GlobalInvocationID.x; o < numel; o += gl_NumWorkGroups.x * 256u) {
    int64_t ooff = 0l, soff = 0l, ioff = 0l;
    uint rem = o;
    for (int d = int(rank) - 1; d >= 0; d--) {
      uint sz = M(14u + uint(d));
      int64_t c = int64_t(rem % sz);
      rem /= sz;
      ooff += c * MI64(22u + 2u * uint(d));
      soff += c * MI64(38u + 2u * uint(d));
      ioff += c * MI64(54u + 2u * uint(d));
    }
    int64_t v = load_i64(idxp, ioff, SC_IDX_DT);
    if (v < 0l) v += dimsize;
    bool ok = v >= 0l && v < dimsize;
    soff += v * MI64(12u);
    switch (SC_ESIZE) {
      case 1u: RU8(elem_addr(outp, ooff, 1u)).v = ok ? RU8(elem_addr(src, soff, 1u)).v : uint8_t(0); break;
      case 2u: RU16(elem_addr(outp, ooff, 2u)).v = ok ? RU16(elem_addr(src, soff, 2u)).v : uint16_t(0); break;
      case 4u: RI32(elem_addr(outp, ooff, 4u)).v = ok ? RI32(elem_addr(src, soff, 4u)).v : 0; break;
      default: RI64(elem_addr(outp, ooff, 8u)).v = ok ? RI64(elem_addr(src, soff, 8u)).v : 0l; break;
    }
  }
}
