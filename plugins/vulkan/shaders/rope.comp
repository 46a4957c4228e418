#version 460
// backplane Vulkan plugin: rotary_embedding_pos (docs/semantics.md,
// "rotary_embedding_pos"): each head of query and key rotated by the cos
// and sin of its token's position, GPT-NeoX halves or GPT-J pairs, dims
// past the rotary dim R copied. Dense operands; an output may be its input:
// one invocation reads both elements of its pair (or its one element past
// R) and writes them, and no other invocation touches them. Computed in
// double and rounded once. A position outside [0, max positions) leaves
// that token's outputs unwritten (no device-side error; docs/backends/vulkan.md).
//
// Metadata: 0-1 query, 2-3 key, 4-5 positions, 6-7 cos_sin_cache [P, R]
// (cos then sin), 8-9 query_out, 10-11 key_out; 12 T, 13 H, 14 Hkv, 15 D,
// 16 R, 17 interleaved, 18 positions dtype, 19 cache dtype, 20 P.
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"
layout(local_size_x = 256) in;
layout(constant_id = 0) const uint SC_DT = 1;

void main() {
  uint T = M(12u), H = M(13u), Hkv = M(14u), D = M(15u), R = M(16u), half_r = R / 2u;
  uint width = D - half_r, heads = H + Hkv; // items per head: the pairs, then the rest
  uint total = T * heads * width;
  for (uint i = gl_GlobalInvocationID.x; i < total; i += gl_NumWorkGroups.x * 256u) {
    uint w = i % width, th = i / width, head = th % heads, t = th / heads;
    int64_t pos = load_i64(M64(4u), int64_t(t), M(18u));
    if (pos < 0l || pos >= int64_t(M(20u))) continue;
    bool is_q = head < H;
    uint nh = is_q ? H : Hkv, hh = is_q ? head : head - H;
    int64_t base = (int64_t(t) * int64_t(nh) + int64_t(hh)) * int64_t(D);
    uint64_t src = M64(is_q ? 0u : 2u), dst = M64(is_q ? 8u : 10u);
    if (w >= half_r) { // past the rotary dims: copied
      int64_t e = base + int64_t(R + (w - half_r));
      store_f64(dst, e, SC_DT, load_f64(src, e, SC_DT));
      continue;
    }
    bool gptj = M(17u) != 0u;
    int64_t e1 = base + int64_t(gptj ? 2u * w : w), e2 = base + int64_t(gptj ? 2u * w + 1u : w + half_r);
    int64_t row = pos * int64_t(R);
    double c = load_f64(M64(6u), row + int64_t(w), M(19u)), s = load_f64(M64(6u), row + int64_t(half_r + w), M(19u));
    double x1 = load_f64(src, e1, SC_DT), x2 = load_f64(src, e2, SC_DT);
    store_f64(dst, e1, SC_DT, x1 * c - x2 * s);
    store_f64(dst, e2, SC_DT, x2 * c + x1 * s);
  }
}
