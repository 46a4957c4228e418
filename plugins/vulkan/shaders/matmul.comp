#version 460
// backplane Vulkan plugin: batched matmul C = alpha * A @ B (+ beta * bias),
// tiled through shared memory: 64x64 output tiles, 16x16 threads with 4x4
// outputs each, K in steps of 16. Any strides (transposed views are read
// in place). CT_F32 accumulates in float (f32, f16, bf16), CT_F64 in
// double, CT_I64 in int64 (wrapping).
//
// Metadata: 0-1 A, 2-3 B, 4-5 C, 6-7 bias addresses; 8 M, 9 N, 10 K,
// 11 batch; int64 strides: 12 a_bs, 14 a_rs, 16 a_cs, 18 b_bs, 20 b_rs,
// 22 b_cs, 24 c_bs, 26 c_rs, 28 c_cs, 30 bias_rs, 32 bias_cs; 34 alpha,
// 36 beta (double); 38 alpha, 40 beta (int64).
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"
#if defined(MM_VEC) || defined(MM_PANEL)
// The CPU kernels' operands: A, B and a bias row as 16-byte texels of
// R32G32B32A32_UINT views (one format for every texel binding), C through
// storage buffer 0, as vec4s when N % 4 == 0, else float by float.
layout(set = 0, binding = 8) uniform utextureBuffer ta;
layout(set = 0, binding = 9) uniform utextureBuffer tb;
layout(set = 0, binding = 10) uniform utextureBuffer tbias;
vec4 fetch(utextureBuffer t, uint i) { return uintBitsToFloat(texelFetch(t, int(i))); }
layout(set = 0, binding = 0, std430) buffer MC { vec4 v[]; } mc;
layout(set = 0, binding = 0, std430) buffer MC1 { float v[]; } mc1;
#endif
#ifdef MM_VEC
// The register-blocked f32 kernel (MM_VEC, with CT_F32), for CPU
// implementations of Vulkan: row-major f32 A [B,M,K'] and B [B,K',N'] with
// K' and N' multiples of 4, read as 16-byte texels of uniform texel buffers
// (bindings 8 and 9); C [B,M,N] (dense f32, N <= N') written through
// storage buffer 0. The launcher passes operands in place when they are
// dense f32 with K and N multiples of 4, and otherwise has
// matmul_pack.comp copy them into its workspace first, zero-padded to K'
// and N' (any strides that way).
//
// No shared memory and no barriers: each invocation computes an MM_RB x
// (4 MM_CB) block of C in registers, K in steps of 4. CPU implementations
// run a workgroup as SIMD lanes of one thread: a texel fetch becomes vector
// loads, where storage-buffer reads and per-lane shared-memory reads become
// per-lane loops; the large block is what amortises the loads. Rows and
// columns past the edges are clamped on load and skipped on store.
// Accumulates in float in k order, like the tiled kernel.
//
// Specialization constant 0, addmm's epilogue: 1 stores alpha A @ B, 2
// alpha A @ B + beta bias for a dense f32 bias row of N (N % 4 == 0) read as
// texels (binding 10), one per column texel of the block.
//
// Metadata: 8 M, 9 N', 10 K', 14 N, 16 alpha, 17 beta (float).
#define MM_RB 32u
#define MM_CB 4u
layout(local_size_x = 8) in;
layout(constant_id = 0) const uint SC_EPILOGUE = 0;

void main() {
  uint M_ = M(8u), N_ = M(9u), K_ = M(10u), NC = M(14u);
  uint n4 = N_ / 4u, k4 = K_ / 4u;
  uint nbn = (n4 + MM_CB - 1u) / MM_CB, blocks = ((M_ + MM_RB - 1u) / MM_RB) * nbn;
  uint inv = gl_GlobalInvocationID.x;
  if (inv >= blocks) return;
  uint bz = gl_WorkGroupID.y;
  uint row0 = (inv / nbn) * MM_RB, tc0 = (inv % nbn) * MM_CB;
  uint a0 = bz * M_ * k4, b0 = bz * K_ * n4;
  uint arow[MM_RB];
  uint bcol[MM_CB];
  [[unroll]] for (uint i = 0u; i < MM_RB; i++) arow[i] = a0 + min(row0 + i, M_ - 1u) * k4;
  [[unroll]] for (uint j = 0u; j < MM_CB; j++) bcol[j] = b0 + min(tc0 + j, n4 - 1u);
  vec4 acc[MM_RB][MM_CB];
  [[unroll]] for (uint i = 0u; i < MM_RB; i++)
    [[unroll]] for (uint j = 0u; j < MM_CB; j++) acc[i][j] = vec4(0);
  for (uint kq = 0u; kq < k4; kq++) {
    vec4 bv[4][MM_CB];
    [[unroll]] for (uint r = 0u; r < 4u; r++)
      [[unroll]] for (uint j = 0u; j < MM_CB; j++) bv[r][j] = fetch(tb, bcol[j] + (kq * 4u + r) * n4);
    [[unroll]] for (uint i = 0u; i < MM_RB; i++) {
      vec4 a = fetch(ta, arow[i] + kq);
      [[unroll]] for (uint j = 0u; j < MM_CB; j++) {
        acc[i][j] = fma(vec4(a.x), bv[0][j], acc[i][j]);
        acc[i][j] = fma(vec4(a.y), bv[1][j], acc[i][j]);
        acc[i][j] = fma(vec4(a.z), bv[2][j], acc[i][j]);
        acc[i][j] = fma(vec4(a.w), bv[3][j], acc[i][j]);
      }
    }
  }
  vec4 bias[MM_CB];
  [[unroll]] for (uint j = 0u; j < MM_CB; j++)
    bias[j] = SC_EPILOGUE == 2u ? MF32(17u) * fetch(tbias, bcol[j] - b0) : vec4(0);
  [[unroll]] for (uint i = 0u; i < MM_RB; i++)
    [[unroll]] for (uint j = 0u; j < MM_CB; j++) {
      uint row = row0 + i, c = (tc0 + j) * 4u;
      vec4 v = SC_EPILOGUE != 0u ? MF32(16u) * acc[i][j] + bias[j] : acc[i][j];
      if (NC == N_) {
        if (row < M_ && c < NC) mc.v[((bz * M_ + row) * NC + c) / 4u] = v;
      } else if (row < M_) {
        [[unroll]] for (uint e = 0u; e < 4u; e++)
          if (c + e < NC) mc1.v[(bz * M_ + row) * NC + c + e] = v[e];
      }
    }
}
#elif defined(MM_PANEL)
// The panel f32 kernel (MM_PANEL, with CT_F32), for large products on CPU
// implementations of Vulkan. Invocations are rows of C: lane l of a
// workgroup of R rows owns row R x + l and the 16 columns 16 y .. 16 y + 15,
// as four vec4 accumulators. One dispatch covers SC_KC values of k from k0:
// the workgroup first copies B's panel [SC_KC, 16] into shared memory, then
// runs the k loop fully unrolled. With no loop or branch around them the
// panel's reads have constant offsets, which CPU implementations turn into
// one scalar load broadcast to all lanes (folded into the multiply), where
// any per-lane read is a call or a loop over lanes; each lane's A values
// come four k at a time from one texel fetch. The host walks K in chunks of
// SC_KC: every chunk but the first adds to the C the previous one stored.
//
// A is packed by matmul_pack.comp into rows interleaved by 8 (texel
// ((z Mr + r / 8) K'/4 + k / 4) 8 + r % 8 holds A[z][r][k .. k + 3], Mr =
// M'/8), so that the lanes of one SIMD group fetch 128 consecutive bytes; B
// is row-major [K', N'] texels, read in place or packed (as for MM_VEC).
// Rows and columns past the edges are clamped on load and skipped on
// store. Accumulates in float in k order.
//
// Specialization constants: 0 addmm's epilogue (as MM_VEC, applied by the
// last chunk), 1 SC_KC (a multiple of 4; SC_KC x 64 bytes of shared
// memory), 2 the workgroup's rows (a multiple of 8).
// Metadata: 8 M, 9 N', 10 K', 11 k0, 12 flags (1 first chunk, 2 last
// chunk), 13 M'/8, 14 N, 16 alpha, 17 beta (float).
layout(local_size_x_id = 2) in;
layout(constant_id = 0) const uint SC_EPILOGUE = 0;
layout(constant_id = 1) const uint SC_KC = 512;
shared vec4 panel[SC_KC * 4u]; // panel[k * 4 + j] = B[k0 + k][16 y + 4 j .. + 3]

void main() {
  uint M_ = M(8u), N_ = M(9u), K_ = M(10u), k0 = M(11u), flags = M(12u), mr = M(13u), NC = M(14u);
  uint n4 = N_ / 4u, k4 = K_ / 4u, lanes = gl_WorkGroupSize.x;
  uint lid = gl_LocalInvocationID.x, bz = gl_WorkGroupID.z;
  uint row = gl_WorkGroupID.x * lanes + lid, rc = min(row, 8u * mr - 1u);
  uint c40 = gl_WorkGroupID.y * 4u;
  uint a0 = ((bz * mr + rc / 8u) * k4 + k0 / 4u) * 8u + rc % 8u;
  uint b0 = (bz * K_ + k0) * n4;
  [[unroll]] for (uint t = 0u; t < (SC_KC * 4u + lanes - 1u) / lanes; t++) {
    uint idx = lid + t * lanes;
    if (idx < SC_KC * 4u) panel[idx] = fetch(tb, b0 + (idx / 4u) * n4 + min(c40 + idx % 4u, n4 - 1u));
  }
  uint c_row = (bz * M_ + row) * NC;
  vec4 acc[4];
  [[unroll]] for (uint j = 0u; j < 4u; j++) {
    uint c = (c40 + j) * 4u;
    acc[j] = vec4(0);
    if ((flags & 1u) == 0u && row < M_) {
      if (NC % 4u == 0u) {
        if (c < NC) acc[j] = mc.v[(c_row + c) / 4u];
      } else {
        [[unroll]] for (uint e = 0u; e < 4u; e++)
          if (c + e < NC) acc[j][e] = mc1.v[c_row + c + e];
      }
    }
  }
  barrier();
  [[unroll]] for (uint kq = 0u; kq < SC_KC / 4u; kq++) {
    vec4 a = fetch(ta, a0 + kq * 8u);
    [[unroll]] for (uint r = 0u; r < 4u; r++)
      [[unroll]] for (uint j = 0u; j < 4u; j++) acc[j] = fma(vec4(a[r]), panel[(kq * 4u + r) * 4u + j], acc[j]);
  }
  if (row >= M_) return;
  [[unroll]] for (uint j = 0u; j < 4u; j++) {
    uint c = (c40 + j) * 4u;
    vec4 v = acc[j];
    if ((flags & 2u) != 0u && SC_EPILOGUE != 0u) {
      v *= MF32(16u);
      if (SC_EPILOGUE == 2u) v += MF32(17u) * fetch(tbias, min(c40 + j, n4 - 1u));
    }
    if (NC % 4u == 0u) {
      if (c < NC) mc.v[(c_row + c) / 4u] = v;
    } else {
      [[unroll]] for (uint e = 0u; e < 4u; e++)
        if (c + e < NC) mc1.v[c_row + c + e] = v[e];
    }
  }
}
#else
layout(local_size_x = 16, local_size_y = 16) in;
layout(constant_id = 0) const uint SC_A_DT = 1;
layout(constant_id = 1) const uint SC_B_DT = 1;
layout(constant_id = 2) const uint SC_C_DT = 1;
layout(constant_id = 3) const uint SC_BIAS_DT = 0;
layout(constant_id = 4) const uint SC_SCALED = 0; // alpha != 1 or bias present

#if defined(CT_F32)
#define CT float
#define CT4 vec4
#define LOAD load_f32
#define STORE store_f32
#elif defined(CT_F64)
#define CT double
#define CT4 dvec4
#define LOAD load_f64
#define STORE store_f64
#else
#define CT int64_t
#define CT4 i64vec4
#define LOAD load_i64
#define STORE store_i64
#endif

shared CT As[16][65];
shared CT Bs[16][65];

void main() {
  uint M_ = M(8u), N_ = M(9u), K_ = M(10u);
  uint64_t A = M64(0u), B = M64(2u), C = M64(4u);
  int64_t a_rs = MI64(14u), a_cs = MI64(16u), b_rs = MI64(20u), b_cs = MI64(22u);
  uint tx = gl_LocalInvocationID.x, ty = gl_LocalInvocationID.y, tid = ty * 16u + tx;
  uint bm = gl_WorkGroupID.y * 64u, bn = gl_WorkGroupID.x * 64u, bz = gl_WorkGroupID.z;
  int64_t a0 = int64_t(bz) * MI64(12u), b0 = int64_t(bz) * MI64(18u);
  // Accumulators as four vectors (rows ty + 16 i, columns tx + 16 j): no
  // arrays, so they stay in registers even where loops are not unrolled.
  CT4 acc0 = CT4(0), acc1 = CT4(0), acc2 = CT4(0), acc3 = CT4(0);
  for (uint k0 = 0u; k0 < K_; k0 += 16u) {
    for (uint l = 0u; l < 4u; l++) {
      uint e = tid + l * 256u;
      uint mm = e >> 4, kk = e & 15u;
      uint gm = bm + mm, gk = k0 + kk;
      As[kk][mm] = (gm < M_ && gk < K_) ? LOAD(A, a0 + int64_t(gm) * a_rs + int64_t(gk) * a_cs, SC_A_DT) : CT(0);
      uint kb = e >> 6, nn = e & 63u;
      uint gn = bn + nn, gkb = k0 + kb;
      Bs[kb][nn] = (gn < N_ && gkb < K_) ? LOAD(B, b0 + int64_t(gkb) * b_rs + int64_t(gn) * b_cs, SC_B_DT) : CT(0);
    }
    barrier();
    for (uint kk = 0u; kk < 16u; kk++) {
      CT4 b = CT4(Bs[kk][tx], Bs[kk][tx + 16u], Bs[kk][tx + 32u], Bs[kk][tx + 48u]);
      acc0 += As[kk][ty] * b;
      acc1 += As[kk][ty + 16u] * b;
      acc2 += As[kk][ty + 32u] * b;
      acc3 += As[kk][ty + 48u] * b;
    }
    barrier();
  }
  int64_t c0 = int64_t(bz) * MI64(24u), c_rs = MI64(26u), c_cs = MI64(28u);
  for (uint i = 0u; i < 4u; i++) {
    uint gm = bm + ty + 16u * i;
    if (gm >= M_) continue;
    CT4 row = i == 0u ? acc0 : i == 1u ? acc1 : i == 2u ? acc2 : acc3;
    for (uint j = 0u; j < 4u; j++) {
      uint gn = bn + tx + 16u * j;
      if (gn >= N_) continue;
      CT v = row[j];
      if (SC_SCALED != 0u) {
#if defined(CT_I64)
        v = v * MI64(38u);
        if (SC_BIAS_DT != 0u) v += MI64(40u) * load_i64(M64(6u), int64_t(gm) * MI64(30u) + int64_t(gn) * MI64(32u), SC_BIAS_DT);
#else
        v = CT(double(v) * MF64(34u));
        double beta = MF64(36u);
        if (SC_BIAS_DT != 0u && beta != 0.0lf)
          v = CT(double(v) + beta * load_f64(M64(6u), int64_t(gm) * MI64(30u) + int64_t(gn) * MI64(32u), SC_BIAS_DT));
#endif
      }
      STORE(C, c0 + int64_t(gm) * c_rs + int64_t(gn) * c_cs, SC_C_DT, v);
    }
  }
}
#endif
