#version 460
// backplane Vulkan plugin: copies one f32 matmul operand X [B,R,C] (any
// strides) into dense row-major f32 [B,R',C'] with R' >= R and C' = C
// rounded up to a multiple of 4, zero-padded, for matmul.comp's MM_VEC and
// MM_PANEL kernels. Written through storage buffer 0 as vec4s: texel
// (z R' + row) C'/4 + c4 holds X[z][row][4 c4 .. 4 c4 + 3], or, with rows
// interleaved by 8 (specialization constant 1, R' % 8 == 0; MM_PANEL's A),
// texel ((z R'/8 + row / 8) C'/4 + c4) 8 + row % 8 does.
//
// Invocation x is the texel in the row; workgroups y walk the rows with a
// stride, z is the batch: no integer division by a variable (CPU
// implementations divide lane by lane) and not many workgroups (they start
// them one by one).
//
// Specialization constant 0, how X is read. 1: a transposed view (X's
// transpose is dense row-major, R % 4 == 0 and R' == R; a linear layer's
// x @ W^T), as texels of a uniform texel view of its storage (binding 8):
// texel ((z C + col) R + 4 r4) / 4 holds X[z][4 r4 .. 4 r4 + 3][col], so
// four of them make a 4 x 4 block that is written, transposed, as four
// texels. 2: X dense row-major with C % 4 == 0, as texels of a view of it
// (binding 8). 0: element by element, address-based loads.
//
// Metadata: 0-1 source address; 8 R, 9 C, 10 C'/4, 11 R'; int64 element
// strides: 12 batch, 14 row, 16 column.
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"
layout(local_size_x = 64) in;
layout(constant_id = 0) const uint SC_SOURCE = 0;
layout(constant_id = 1) const uint SC_INTERLEAVE = 0;
layout(set = 0, binding = 8) uniform utextureBuffer src;
layout(set = 0, binding = 0, std430) writeonly buffer Dense { vec4 v[]; } dense;

// The texel index of X[z][row][4 c4 .. 4 c4 + 3] in the packed copy.
uint packed_index(uint z, uint row, uint c4, uint c4n, uint rows_out) {
  if (SC_INTERLEAVE != 0u) return ((z * (rows_out / 8u) + row / 8u) * c4n + c4) * 8u + row % 8u;
  return (z * rows_out + row) * c4n + c4;
}

void main() {
  uint rows = M(8u), cols = M(9u), c4n = M(10u), rows_out = M(11u);
  uint c4 = gl_GlobalInvocationID.x, z = gl_WorkGroupID.z;
  if (c4 >= c4n) return;
  if (SC_SOURCE == 1u) {
    for (uint r4 = gl_WorkGroupID.y; r4 < rows / 4u; r4 += gl_NumWorkGroups.y) {
      vec4 colv[4]; // colv[e] = X[z][4 r4 .. 4 r4 + 3][4 c4 + e]
      [[unroll]] for (uint e = 0u; e < 4u; e++) {
        uint col = 4u * c4 + e;
        colv[e] = col < cols ? uintBitsToFloat(texelFetch(src, int(((z * cols + col) * rows) / 4u + r4))) : vec4(0);
      }
      [[unroll]] for (uint i = 0u; i < 4u; i++)
        dense.v[packed_index(z, 4u * r4 + i, c4, c4n, rows_out)] = vec4(colv[0][i], colv[1][i], colv[2][i], colv[3][i]);
    }
    return;
  }
  if (SC_SOURCE == 2u) {
    for (uint row = gl_WorkGroupID.y; row < rows_out; row += gl_NumWorkGroups.y)
      dense.v[packed_index(z, row, c4, c4n, rows_out)] =
          row < rows ? uintBitsToFloat(texelFetch(src, int((z * rows + row) * c4n + c4))) : vec4(0);
    return;
  }
  uint64_t base = M64(0u);
  int64_t bs = MI64(12u), rs = MI64(14u), cs = MI64(16u);
  for (uint row = gl_WorkGroupID.y; row < rows_out; row += gl_NumWorkGroups.y) {
    int64_t at = int64_t(z) * bs + int64_t(row) * rs;
    vec4 v = vec4(0);
    if (row < rows)
      [[unroll]] for (uint e = 0u; e < 4u; e++)
        if (4u * c4 + e < cols) v[e] = load_f32(base, at + int64_t(4u * c4 + e) * cs, DT_F32);
    dense.v[packed_index(z, row, c4, c4n, rows_out)] = v;
  }
}
