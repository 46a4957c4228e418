#version 460
// backplane Vulkan plugin: byte-wise pattern fill for offsets, sizes or
// patterns vkCmdFillBuffer cannot take. Metadata: address (2 words), size,
// pattern size, pattern (2 words).
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"
layout(local_size_x = 256) in;
void main() {
  uint64_t base = M64(0u);
  uint size = M(2u), ps = M(3u);
  uint stride_n = gl_NumWorkGroups.x * 256u;
  for (uint i = gl_GlobalInvocationID.x; i < size; i += stride_n) {
    uint k = i % ps;
    uint w = M(4u + k / 4u);
    RU8(base + uint64_t(i)).v = uint8_t((w >> (8u * (k % 4u))) & 255u);
  }
}
