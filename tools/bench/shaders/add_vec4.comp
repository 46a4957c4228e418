// c = a + b over f32, four elements per invocation: the raw-Vulkan baseline
// of the vk_raw suite's "f32 add" figure.
//
// a and b are read through uniform texel buffers (textureBuffer views of
// format R32G32B32A32_SFLOAT, one vec4 texel per invocation) and c is
// written as a plain storage buffer: the fastest form measured on a CPU
// driver (lavapipe). Measured there as well: 64, 128 or 256 invocations per
// workgroup run alike (32 is slower), and several texels per invocation
// (a loop) are slower than one.
//
// The host dispatches ceil(n4 / 64) workgroups, folded into rows (x by y)
// when x alone would exceed maxComputeWorkGroupCount[0]; invocations past
// n4 do nothing. `base` offsets the index into c (the a and b views already
// start at the chunk, see bench_vk_raw.c).
#version 450
#extension GL_EXT_samplerless_texture_functions : require
layout(local_size_x = 64) in;

layout(binding = 0) uniform textureBuffer a;
layout(binding = 1) uniform textureBuffer b;
layout(std430, binding = 2) writeonly buffer C { vec4 v[]; } c;

layout(push_constant) uniform Push {
  uint n4;   // vec4 texels in this chunk
  uint base; // index of the chunk's first vec4 in c
} p;

void main() {
  uint i = (gl_WorkGroupID.y * gl_NumWorkGroups.x + gl_WorkGroupID.x) * 64u + gl_LocalInvocationID.x;
  if (i < p.n4) c.v[p.base + i] = texelFetch(a, int(i)) + texelFetch(b, int(i));
}
