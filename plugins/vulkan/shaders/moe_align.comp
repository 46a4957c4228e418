#version 460
// backplane Vulkan plugin: moe_align_block_size (docs/semantics.md,
// "moe_align_block_size"): the (token, slot) pairs j = t * k + r sorted by
// expert (ascending j within one), each expert's run padded with T * k to a
// multiple of BS; experts without pairs take no block; ids outside [0, E)
// skipped. One workgroup of 256 lanes: lanes count experts' pairs into
// shared memory, lane 0 turns the padded counts into offsets, then lanes
// write their experts' runs, pads and blocks (disjoint ranges, no ordering).
// O(E * T * k / 256) id reads; at most MAX_E experts (the support answer).
//
// Metadata: 0-1 topk_ids, 2-3 sorted_token_ids (i32, P), 4-5 expert_ids
// (i32, P / BS), 6-7 num_tokens_post_pad (i32, 1); 8 pairs N = T * k,
// 9 E, 10 BS, 11 P, 12 ids dtype.
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"
layout(local_size_x = 256) in;

#define MAX_E 4095u
shared uint s_off[MAX_E + 1u]; // padded counts, then exclusive offsets (s_off[E]: the total)

uint count_of(uint e) {
  uint n = M(8u), c = 0u;
  for (uint j = 0u; j < n; j++)
    if (load_i64(M64(0u), int64_t(j), M(12u)) == int64_t(e)) c++;
  return c;
}

void main() {
  uint n = M(8u), E = M(9u), bs = M(10u), P = M(11u), lane = gl_LocalInvocationID.x;
  for (uint e = lane; e < E; e += 256u) s_off[e] = (count_of(e) + bs - 1u) / bs * bs;
  barrier();
  if (lane == 0u) {
    uint run = 0u;
    for (uint e = 0u; e < E; e++) {
      uint pc = s_off[e];
      s_off[e] = run;
      run += pc;
    }
    s_off[E] = run;
  }
  barrier();
  uint total = s_off[E];
  uint64_t sorted = M64(2u), blocks = M64(4u);
  for (uint e = lane; e < E; e += 256u) {
    uint off = s_off[e], end = s_off[e + 1u], c = off;
    for (uint j = 0u; j < n; j++)
      if (load_i64(M64(0u), int64_t(j), M(12u)) == int64_t(e)) store_i32(sorted, int64_t(c++), DT_I32, int(j));
    for (; c < end; c++) store_i32(sorted, int64_t(c), DT_I32, int(n));
    for (uint b = off / bs; b < end / bs; b++) store_i32(blocks, int64_t(b), DT_I32, int(e));
  }
  for (uint i = total + lane; i < P; i += 256u) store_i32(sorted, int64_t(i), DT_I32, int(n));
  for (uint b = total / bs + lane; b < P / bs; b += 256u) store_i32(blocks, int64_t(b), DT_I32, -1);
  if (lane == 0u) store_i32(M64(6u), 0l, DT_I32, int(total));
}
