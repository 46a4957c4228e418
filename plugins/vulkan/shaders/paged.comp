#version 460
// backplane Vulkan plugin: paged-cache index ops (docs/semantics.md, "Paged
// KV cache"), one invocation per element moved (rows move as raw bits):
//  SC_OP 0 concat_and_cache_mla: cache row slot_mapping[t] = [kv_c[t] |
//    k_pe[t]]; negative slots skipped; a slot repeated later is left to the
//    last token that names it (each invocation looks ahead).
//  SC_OP 1 gather_cache: dst[cu[b] + i] = src[block_table[b, p / BS], p % BS]
//    with p = seq_starts[b] + i; rows outside [cu[0], cu[B]) zero.
//  SC_OP 2 compute_slot_mapping: slot of token t = block_tables[s, p / BS] *
//    BS + p % BS for its sequence s (query_start_loc), -1 outside them.
// Dense operands. Index values that are out of range leave the element
// unwritten: no error is raised on the device (docs/backends/vulkan.md).
//
// Metadata (op 0): 0-1 kv_c, 2-3 k_pe, 4-5 slot_mapping, 6-7 cache_out;
//   8 T, 9 L, 10 R, 11 slots (NB * BS), 12 slot dtype, 13 element dtype.
// (op 1): 0-1 src, 2-3 block_table, 4-5 cu_seq_lens, 6-7 dst, 8-9
//   seq_starts (0: none); 10 B, 11 MB, 12 N, 13 BS, 14 row elements E,
//   15 table dtype, 16 cu dtype, 17 starts dtype, 18 NB, 19 element dtype.
// (op 2): 0-1 block_tables, 2-3 query_start_loc, 4-5 positions, 6-7 out
//   (i64); 8 S, 9 MB, 10 T, 11 BS, 12 table dtype, 13 offsets dtype,
//   14 positions dtype.
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"
layout(local_size_x = 256) in;
layout(constant_id = 0) const uint SC_OP = 0;

// The sequence b with off[b] <= x < off[b + 1] among n sequences, or -1.
int find_seq(uint64_t off, uint dt, uint n, int64_t x) {
  if (n == 0u || x < load_i64(off, 0l, dt) || x >= load_i64(off, int64_t(n), dt)) return -1;
  uint lo = 0u, hi = n - 1u; // off[lo] <= x < off[hi + 1]
  while (lo < hi) {
    uint mid = (lo + hi + 1u) / 2u;
    if (load_i64(off, int64_t(mid), dt) <= x) lo = mid;
    else hi = mid - 1u;
  }
  return int(lo);
}

void mla(uint i) {
  uint L = M(9u), W = L + M(10u), T = M(8u);
  uint t = i / W, e = i % W, sdt = M(12u), dt = M(13u);
  int64_t slot = load_i64(M64(4u), int64_t(t), sdt);
  if (slot < 0l || slot >= int64_t(M(11u))) return;
  for (uint t2 = t + 1u; t2 < T; t2++)
    if (load_i64(M64(4u), int64_t(t2), sdt) == slot) return; // a later token wins
  uint64_t v = e < L ? raw_load(M64(0u), int64_t(t) * int64_t(L) + int64_t(e), dt)
                     : raw_load(M64(2u), int64_t(t) * int64_t(W - L) + int64_t(e - L), dt);
  raw_store(M64(6u), slot * int64_t(W) + int64_t(e), dt, v);
}

void gather(uint i) {
  uint E = M(14u), n = i / E, e = i % E, bs = M(13u), dt = M(19u);
  int b = find_seq(M64(4u), M(16u), M(10u), int64_t(n));
  if (b < 0) {
    raw_store(M64(6u), int64_t(i), dt, 0ul);
    return;
  }
  int64_t p = int64_t(n) - load_i64(M64(4u), int64_t(b), M(16u));
  if (M64(8u) != 0ul) p += load_i64(M64(8u), int64_t(b), M(17u));
  if (p < 0l || p / int64_t(bs) >= int64_t(M(11u))) return;
  int64_t blk = load_i64(M64(2u), int64_t(b) * int64_t(M(11u)) + p / int64_t(bs), M(15u));
  if (blk < 0l || blk >= int64_t(M(18u))) return;
  int64_t row = blk * int64_t(bs) + p % int64_t(bs);
  raw_store(M64(6u), int64_t(i), dt, raw_load(M64(0u), row * int64_t(E) + int64_t(e), dt));
}

void slots(uint t) {
  uint bs = M(11u), mb = M(9u);
  int s = find_seq(M64(2u), M(13u), M(8u), int64_t(t));
  if (s < 0) {
    store_i64(M64(6u), int64_t(t), DT_I64, -1l);
    return;
  }
  int64_t p = load_i64(M64(4u), int64_t(t), M(14u));
  if (p < 0l || p / int64_t(bs) >= int64_t(mb)) return;
  int64_t blk = load_i64(M64(0u), int64_t(s) * int64_t(mb) + p / int64_t(bs), M(12u));
  if (blk < 0l) return;
  store_i64(M64(6u), int64_t(t), DT_I64, blk * int64_t(bs) + p % int64_t(bs));
}

void main() {
  uint total = SC_OP == 0u ? M(8u) * (M(9u) + M(10u)) : SC_OP == 1u ? M(12u) * M(14u) : M(10u);
  for (uint i = gl_GlobalInvocationID.x; i < total; i += gl_NumWorkGroups.x * 256u) {
    if (SC_OP == 0u) mla(i);
    else if (SC_OP == 1u) gather(i);
    else slots(i);
  }
}
