#version 460
// backplane Vulkan plugin: repetition_penalty (docs/semantics.md,
// "repetition_penalty"; vLLM's apply_penalties). Dense operands: logits
// and out [rows, V], tokens [rows, L] (i32 or i64). Two dispatches:
// mode 0 copies the logits into out (skipped in place); mode 1 runs one
// invocation per (row, token slot): the first slot holding an id counts the
// id's occurrences in the row and rewrites out[row, id] once, so no two
// invocations write one element. Values are double and rounded once into
// the output dtype, as on the CPU.
//
// Metadata: 0-1 logits, 2-3 tokens, 4-5 out, 6 rows, 7 V, 8 L, 9 mode,
// 10 logits dtype, 11 tokens dtype, 12-13 repetition, 14-15 presence,
// 16-17 frequency (f64).
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"
layout(local_size_x = 256) in;

void main() {
  uint rows = M(6u), V = M(7u), L = M(8u), dt = M(10u), tdt = M(11u);
  uint stride_n = gl_NumWorkGroups.x * 256u;
  if (M(9u) == 0u) {
    uint64_t n = uint64_t(rows) * uint64_t(V);
    for (uint64_t i = gl_GlobalInvocationID.x; i < n; i += stride_n)
      raw_store(M64(4u), int64_t(i), dt, raw_load(M64(0u), int64_t(i), dt));
    return;
  }
  double rep = MF64(12u), presence = MF64(14u), frequency = MF64(16u);
  if (rep == 0.0lf) rep = 1.0lf;
  uint64_t slots = uint64_t(rows) * uint64_t(L);
  for (uint64_t p = gl_GlobalInvocationID.x; p < slots; p += stride_n) {
    uint64_t r = p / uint64_t(L), j = p % uint64_t(L);
    int64_t base = int64_t(r * uint64_t(L));
    int64_t id = load_i64(M64(2u), base + int64_t(j), tdt);
    if (id < 0l || id >= int64_t(V)) continue; // padding
    bool first = true;
    for (uint64_t k = 0ul; k < j && first; k++) first = load_i64(M64(2u), base + int64_t(k), tdt) != id;
    if (!first) continue;
    double n = 0.0lf;
    for (uint64_t k = j; k < uint64_t(L); k++) n += load_i64(M64(2u), base + int64_t(k), tdt) == id ? 1.0lf : 0.0lf;
    int64_t e = int64_t(r * uint64_t(V)) + id;
    double x = load_f64(M64(0u), e, dt);
    x = x > 0.0lf ? x / rep : x * rep;
    x -= frequency * n + presence;
    store_f64(M64(4u), e, dt, x);
  }
}
