// c[0] = a[0] + b[0] in a single invocation: the raw-Vulkan baseline of the
// vk_raw suite's "submission overhead per tiny op" figure (one dispatch of
// one workgroup of one invocation; the work is negligible, so the time
// measured is submission and completion).
#version 450
layout(local_size_x = 1) in;

layout(std430, binding = 0) readonly buffer A { float v[]; } a;
layout(std430, binding = 1) readonly buffer B { float v[]; } b;
layout(std430, binding = 2) writeonly buffer C { float v[]; } c;

void main() { c.v[0] = a.v[0] + b.v[0]; }
