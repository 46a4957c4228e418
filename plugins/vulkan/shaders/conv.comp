#version 460
// backplane Vulkan plugin: direct 2-d convolution (groups, stride, padding,
// dilation, bias), average pooling and max pooling with indices, NCHW with
// any strides. One invocation per output element. CT_F32 accumulates in
// float (f32, f16, bf16), CT_F64 in double.
//
// Metadata: 0-1 input, 2-3 weight, 4-5 bias, 6-7 output, 8-9 indices;
// 10 N, 11 C, 12 H, 13 W, 14 O (channels out), 15 OH, 16 OW, 17 KH, 18 KW,
// 19 sh, 20 sw, 21 ph, 22 pw, 23 dh, 24 dw, 25 groups, 26 flags (1 count
// padding, 2 bias), 27 divisor override, 28 outputs; int64 strides:
// 30 input (4), 38 weight (4), 46 output (4), 54 indices (4), 62 bias.
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"
layout(local_size_x = 256) in;
layout(constant_id = 0) const uint SC_KIND = 0; // 0 conv, 1 avg pool, 2 max pool
layout(constant_id = 1) const uint SC_IN_DT = 1;
layout(constant_id = 2) const uint SC_W_DT = 1;
layout(constant_id = 3) const uint SC_OUT_DT = 1;

#ifdef CT_F64
#define CT double
#define LOAD load_f64
#else
#define CT float
#define LOAD load_f32
#endif

void main() {
  int C = int(M(11u)), H = int(M(12u)), W = int(M(13u)), O = int(M(14u));
  int OH = int(M(15u)), OW = int(M(16u)), KH = int(M(17u)), KW = int(M(18u));
  int sh = int(M(19u)), sw = int(M(20u)), ph = int(M(21u)), pw = int(M(22u));
  int dh = int(M(23u)), dw = int(M(24u)), groups = int(M(25u));
  uint flags = M(26u), total = M(28u);
  uint64_t inp = M64(0u), outp = M64(6u);
  int64_t is0 = MI64(30u), is1 = MI64(32u), is2 = MI64(34u), is3 = MI64(36u);
  for (uint e = gl_GlobalInvocationID.x; e < total; e += gl_NumWorkGroups.x * 256u) {
    int ow = int(e % uint(OW));
    int oh = int((e / uint(OW)) % uint(OH));
    int oc = int((e / uint(OW * OH)) % uint(O));
    int n = int(e / uint(OW * OH * O));
    int64_t ooff = int64_t(n) * MI64(46u) + int64_t(oc) * MI64(48u) + int64_t(oh) * MI64(50u) + int64_t(ow) * MI64(52u);
    if (SC_KIND == 0u) {
      int cpg = C / groups, opg = O / groups;
      int g = oc / opg;
      CT acc = CT(0);
      uint64_t wp = M64(2u);
      for (int ci = 0; ci < cpg; ci++) {
        int c = g * cpg + ci;
        for (int kh = 0; kh < KH; kh++) {
          int h = oh * sh - ph + kh * dh;
          if (h < 0 || h >= H) continue;
          for (int kw = 0; kw < KW; kw++) {
            int w = ow * sw - pw + kw * dw;
            if (w < 0 || w >= W) continue;
            CT x = LOAD(inp, int64_t(n) * is0 + int64_t(c) * is1 + int64_t(h) * is2 + int64_t(w) * is3, SC_IN_DT);
            CT k = LOAD(wp, int64_t(oc) * MI64(38u) + int64_t(ci) * MI64(40u) + int64_t(kh) * MI64(42u) + int64_t(kw) * MI64(44u), SC_W_DT);
            acc += x * k;
          }
        }
      }
      if ((flags & 2u) != 0u) acc += LOAD(M64(4u), int64_t(oc) * MI64(62u), SC_W_DT);
      store_f64(outp, ooff, SC_OUT_DT, double(acc));
    } else if (SC_KIND == 1u) {
      int c = oc;
      int hs = oh * sh - ph, ws = ow * sw - pw;
      int he = min(hs + KH, H + ph), we = min(ws + KW, W + pw);
      int pool = (he - hs) * (we - ws);
      hs = max(hs, 0); ws = max(ws, 0);
      he = min(he, H); we = min(we, W);
      CT acc = CT(0);
      for (int h = hs; h < he; h++)
        for (int w = ws; w < we; w++)
          acc += LOAD(inp, int64_t(n) * is0 + int64_t(c) * is1 + int64_t(h) * is2 + int64_t(w) * is3, SC_IN_DT);
      int div = int(M(27u));
      if (div == 0) div = (flags & 1u) != 0u ? pool : (he - hs) * (we - ws);
      store_f64(outp, ooff, SC_OUT_DT, double(acc) / double(div));
    } else {
      int c = oc;
      int hs = oh * sh - ph, ws = ow * sw - pw;
      CT best = CT(-1.0 / 0.0);
      int64_t bi = -1l;
      for (int kh = 0; kh < KH; kh++) {
        int h = hs + kh * dh;
        if (h < 0 || h >= H) continue;
        for (int kw = 0; kw < KW; kw++) {
          int w = ws + kw * dw;
          if (w < 0 || w >= W) continue;
          CT v = LOAD(inp, int64_t(n) * is0 + int64_t(c) * is1 + int64_t(h) * is2 + int64_t(w) * is3, SC_IN_DT);
          if (bi < 0l || v > best || isnan(v)) { best = v; bi = int64_t(h) * int64_t(W) + int64_t(w); }
        }
      }
      store_f64(outp, ooff, SC_OUT_DT, double(best));
      int64_t ioff = int64_t(n) * MI64(54u) + int64_t(oc) * MI64(56u) + int64_t(oh) * MI64(58u) + int64_t(ow) * MI64(60u);
      store_i64(M64(8u), ioff, DT_I64, bi < 0l ? 0l : bi);
    }
  }
}
