/* Case generators of the quantization family (QUANT).
 *
 * quantize / dequantize: every quantized dtype (i8, u8, i4, u4 packed two
 * per byte, float8_e4m3fn, float8_e5m2, float4_e2m1fn) per tensor, per
 * channel (both axes), per block along the last dim with a tail (16 over
 * 40) and an odd group size (5), blocks along axis 0, zero points for the
 * integer dtypes, scales that push values past the range (saturation),
 * special inputs (NaN, +-inf, +-0) with and without fp8 saturation, f16 /
 * bf16 / f64 inputs and outputs, a 3-d tensor.
 * quantize_dynamic: per token and per block (32 with a tail, odd 7), f32 /
 * bf16 scales, OCP MX e8m0 scales for fp8 and fp4, a zero row.
 * scaled_mm: i8 x i8 -> i32, u8 x i8 and u8 x u8 with zero points, scales
 * per tensor / row / column with bias and activations to f32, bf16, f16;
 * fp8 e4m3fn and e5m2 pairs.
 * weight_only_mm: i4 / u4 packed and i8 / u8 weights, groups 32, 64, 128,
 * an odd group with a tail, per channel, integer and float zero points,
 * batch 1 (decode) and a few rows, f32 / f16 / bf16 activations, bias,
 * and each activation epilogue (ABI 1.4) after the bias.
 */
#include <string.h>

#include "cases_internal.h"

#define COUNT(a) (sizeof(a) / sizeof((a)[0]))

void bpc_gen_quant(bpc_gen_t* g);

static const uint32_t kQ[] = {BP_DTYPE_I8, BP_DTYPE_U8, BP_DTYPE_I4, BP_DTYPE_U4,
                              BP_DTYPE_F8E4M3FN, BP_DTYPE_F8E5M2, BP_DTYPE_F4E2M1FN};

static const char* qname(uint32_t q) {
  switch (q) {
    case BP_DTYPE_I8: return "i8";
    case BP_DTYPE_U8: return "u8";
    case BP_DTYPE_I4: return "i4";
    case BP_DTYPE_U4: return "u4";
    case BP_DTYPE_F8E4M3FN: return "e4m3fn";
    case BP_DTYPE_F8E5M2: return "e5m2";
    default: return "e2m1";
  }
}
static int is_int(uint32_t q) { return q == BP_DTYPE_I8 || q == BP_DTYPE_U8 || q == BP_DTYPE_I4 || q == BP_DTYPE_U4; }
static int is4(uint32_t q) { return q == BP_DTYPE_I4 || q == BP_DTYPE_U4 || q == BP_DTYPE_F4E2M1FN; }
static double qmax(uint32_t q) {
  switch (q) {
    case BP_DTYPE_I8: return 127;
    case BP_DTYPE_U8: return 255;
    case BP_DTYPE_I4: return 7;
    case BP_DTYPE_U4: return 15;
    case BP_DTYPE_F8E4M3FN: return 448;
    case BP_DTYPE_F8E5M2: return 57344;
    default: return 6;
  }
}

static bpc_case_t* qcase(bpc_gen_t* g, uint32_t q, const char* axis, int variant) {
  bpc_case_t* c = bpc_gen_new(g, qname(q), axis, variant);
  if (!c) return NULL;
  c->has_attrs = 1;
  memset(&c->attrs.quantize, 0, sizeof c->attrs.quantize);
  c->attrs.quantize.struct_size = sizeof c->attrs.quantize;
  c->attrs.quantize.qdtype = q;
  c->attrs.quantize.axis = -1;
  c->num_outputs = g->op == BP_OP_quantize_dynamic ? 2 : 1;
  for (uint32_t k = 0; k < c->num_outputs; k++) bpc_operand_set(&c->out[k], BP_DTYPE_INVALID, S0(), 0, 0, 0, 0);
  return c;
}

/* A granularity: the data shape, the scale shape, axis and block size. */
typedef struct qspec {
  const char* axis;
  bpc_shape_t x, s;
  int32_t ax;
  int64_t bs;
  int quick;
} qspec_t;

static const qspec_t kSpecs[] = {
    {"per_tensor", {2, {4, 34}}, {1, {1}}, -1, 0, 1},
    {"per_channel_0", {2, {6, 10}}, {1, {6}}, 0, 0, 0},
    {"per_channel_1", {2, {6, 10}}, {1, {10}}, 1, 0, 1},
    {"group16_tail", {2, {3, 40}}, {2, {3, 3}}, -1, 16, 1},
    {"group5_odd", {2, {3, 40}}, {2, {3, 8}}, -1, 5, 0},
    {"block3_axis0", {2, {7, 4}}, {2, {3, 4}}, 0, 3, 0},
    {"3d_block_axis1", {3, {2, 5, 6}}, {3, {2, 2, 6}}, 1, 4, 0},
};

/* quantize (dequant 0) or dequantize (1) over one granularity. */
static void quant_static(bpc_gen_t* g, uint32_t q, const qspec_t* sp, int variant, uint32_t xdt,
                         uint32_t sdt, int zp, uint32_t values) {
  int deq = g->op == BP_OP_dequantize;
  bpc_case_t* c = qcase(g, q, sp->axis, variant);
  if (!c) return;
  c->num_inputs = 3;
  c->attrs.quantize.axis = sp->ax;
  c->attrs.quantize.block_size = sp->bs;
  /* |x / scale| reaches about 1.3 qmax: some values saturate */
  double xmax = 3.0, smin = xmax / (qmax(q) * 1.3), smax = xmax / (qmax(q) * 0.7);
  if (q == BP_DTYPE_U8 || q == BP_DTYPE_U4) smin /= 2, smax /= 2;
  if (deq) {
    bpc_shape_t xs = sp->x;
    if (is4(q)) xs.sizes[xs.rank - 1] /= 2;
    uint32_t cd = is4(q) ? BP_DTYPE_U8 : q;
    if (is_int(q) || is4(q)) bpc_operand_set(&c->in[0], cd, xs, 0, BPC_V_RANDOM | BPC_V_INTEGRAL, is4(q) || q == BP_DTYPE_U8 ? 0 : -128, is4(q) || q == BP_DTYPE_U8 ? 255 : 127);
    else bpc_operand_set(&c->in[0], cd, xs, 0, values, -qmax(q), qmax(q));
    c->attrs.quantize.dtype = xdt == sdt ? BP_DTYPE_INVALID : xdt; /* the output dtype */
  } else if (values == BPC_V_SPECIAL) {
    bpc_operand_set(&c->in[0], xdt, sp->x, 0, BPC_V_SPECIAL | BPC_V_NONFINITE, -1e6, 1e6);
  } else {
    bpc_operand_set(&c->in[0], xdt, sp->x, 0, BPC_V_RANDOM, -xmax, xmax);
  }
  bpc_operand_set(&c->in[1], sdt, sp->s, 0, BPC_V_RANDOM, smin, smax);
  if (zp && is_int(q)) {
    double lo = q == BP_DTYPE_I8 ? -20 : q == BP_DTYPE_I4 ? -3 : 0, hi = q == BP_DTYPE_U8 ? 200 : q == BP_DTYPE_U4 ? 12 : -lo;
    bpc_operand_set(&c->in[2], q == BP_DTYPE_U8 || q == BP_DTYPE_U4 ? BP_DTYPE_U8 : BP_DTYPE_I8, sp->s, 0,
                    BPC_V_RANDOM | BPC_V_INTEGRAL, lo, hi);
  } else {
    bpc_operand_set(&c->in[2], BP_DTYPE_INVALID, S0(), 0, 0, 0, 0);
  }
}

static void gen_static(bpc_gen_t* g) {
  for (size_t t = 0; t < COUNT(kQ); t++) {
    uint32_t q = kQ[t];
    for (size_t j = 0; j < COUNT(kSpecs); j++) {
      if (g->quick && !kSpecs[j].quick) continue;
      quant_static(g, q, &kSpecs[j], 0, BP_DTYPE_F32, BP_DTYPE_F32, 0, BPC_V_RANDOM);
      if (is_int(q)) quant_static(g, q, &kSpecs[j], 1, BP_DTYPE_F32, BP_DTYPE_F32, 1, BPC_V_RANDOM);
    }
    /* other float dtypes (input of quantize, output of dequantize; scales) */
    quant_static(g, q, &kSpecs[3], 2, BP_DTYPE_F16, BP_DTYPE_F16, 1, BPC_V_RANDOM);
    quant_static(g, q, &kSpecs[2], 3, BP_DTYPE_BF16, BP_DTYPE_F32, 0, BPC_V_RANDOM);
    if (!g->quick) quant_static(g, q, &kSpecs[0], 4, BP_DTYPE_F64, BP_DTYPE_F64, 1, BPC_V_RANDOM);
    /* special values: NaN, +-inf, +-0, huge */
    quant_static(g, q, &kSpecs[0], 5, BP_DTYPE_F32, BP_DTYPE_F32, 1, BPC_V_SPECIAL);
    if (q == BP_DTYPE_F8E4M3FN || q == BP_DTYPE_F8E5M2) {
      quant_static(g, q, &kSpecs[0], 6, BP_DTYPE_F32, BP_DTYPE_F32, 0, BPC_V_SPECIAL);
      bpc_case_t* c = &g->list->items[g->list->count - 1];
      if (g->status == BP_OK) c->attrs.quantize.flags = BP_QUANTIZE_NO_SATURATE;
    }
  }
}

static void gen_dynamic(bpc_gen_t* g) {
  static const uint32_t kDq[] = {BP_DTYPE_I8, BP_DTYPE_I4, BP_DTYPE_F8E4M3FN, BP_DTYPE_F8E5M2,
                                 BP_DTYPE_F4E2M1FN};
  for (size_t t = 0; t < COUNT(kDq); t++) {
    uint32_t q = kDq[t];
    int fl = !is_int(q);
    struct { const char* axis; bpc_shape_t x; int64_t bs; uint32_t sd; uint32_t xd; uint32_t values; int quick; } v[] = {
        {"per_token", S2(5, 70), 0, BP_DTYPE_F32, BP_DTYPE_F32, BPC_V_RANDOM, 1},
        {"block32_tail", S2(5, 70), 32, BP_DTYPE_F32, BP_DTYPE_F32, BPC_V_RANDOM, 1},
        {"block7_odd", S3(2, 3, 28), 7, BP_DTYPE_BF16, BP_DTYPE_BF16, BPC_V_RANDOM, 0},
        {"mx32", S2(4, 96), 32, fl ? BP_DTYPE_F8E8M0FNU : BP_DTYPE_F16, BP_DTYPE_F32, BPC_V_RANDOM, 1},
        {"mx32_wide", S2(3, 64), 32, fl ? BP_DTYPE_F8E8M0FNU : BP_DTYPE_F32, BP_DTYPE_F16, BPC_V_RANDOM, 0},
        {"zero_rows", S2(3, 16), 0, BP_DTYPE_F32, BP_DTYPE_F32, BPC_V_RANDOM, 0},
    };
    for (size_t j = 0; j < COUNT(v); j++) {
      if (g->quick && !v[j].quick) continue;
      bpc_case_t* c = qcase(g, q, v[j].axis, 0);
      if (!c) return;
      c->num_inputs = 1;
      c->attrs.quantize.block_size = v[j].bs;
      c->attrs.quantize.dtype = v[j].sd;
      double r = j == 4 ? 1000.0 : j == 5 ? 0.0 : 3.0;
      bpc_operand_set(&c->in[0], v[j].xd, v[j].x, 0, v[j].values, -r, r);
    }
  }
}

static void mm_case(bpc_gen_t* g, const char* label, const char* axis, uint32_t ad, uint32_t bd,
                    int64_t m, int64_t k, int64_t n, int sa, int sb, int bias, uint32_t act,
                    uint32_t od, int32_t za, int32_t zb) {
  bpc_case_t* c = bpc_gen_new(g, label, axis, 0);
  if (!c) return;
  c->has_attrs = 1;
  memset(&c->attrs.scaled_mm, 0, sizeof c->attrs.scaled_mm);
  c->attrs.scaled_mm.struct_size = sizeof c->attrs.scaled_mm;
  c->attrs.scaled_mm.out_dtype = od;
  c->attrs.scaled_mm.activation = act;
  c->attrs.scaled_mm.a_zero_point = za;
  c->attrs.scaled_mm.b_zero_point = zb;
  c->num_inputs = 5;
  c->num_outputs = 1;
  int ia = ad == BP_DTYPE_I8 || ad == BP_DTYPE_U8;
  double alo = ia ? (ad == BP_DTYPE_U8 ? 0 : -128) : -400, ahi = ia ? (ad == BP_DTYPE_U8 ? 255 : 127) : 400;
  double blo = ia ? (bd == BP_DTYPE_U8 ? 0 : -128) : -400, bhi = ia ? (bd == BP_DTYPE_U8 ? 255 : 127) : 400;
  if (bd == BP_DTYPE_F8E5M2) blo = -3000, bhi = 3000;
  bpc_operand_set(&c->in[0], ad, S2(m, k), 0, BPC_V_RANDOM | (ia ? BPC_V_INTEGRAL : 0), alo, ahi);
  bpc_operand_set(&c->in[1], bd, S2(k, n), 0, BPC_V_RANDOM | (ia ? BPC_V_INTEGRAL : 0), blo, bhi);
  bpc_shape_t ss[3] = {S1(1), S2(m, 1), S1(m)};
  bpc_shape_t sbs[3] = {S1(1), S2(1, n), S1(n)};
  if (sa) bpc_operand_set(&c->in[2], BP_DTYPE_F32, ss[sa - 1], 0, BPC_V_RANDOM, 1e-4, 1e-3);
  else bpc_operand_set(&c->in[2], BP_DTYPE_INVALID, S0(), 0, 0, 0, 0);
  if (sb) bpc_operand_set(&c->in[3], BP_DTYPE_F32, sbs[sb - 1], 0, BPC_V_RANDOM, 1e-3, 1e-2);
  else bpc_operand_set(&c->in[3], BP_DTYPE_INVALID, S0(), 0, 0, 0, 0);
  if (bias) bpc_operand_set(&c->in[4], bias == 2 ? BP_DTYPE_BF16 : BP_DTYPE_F32, S1(n), 0, BPC_V_RANDOM, -2, 2);
  else bpc_operand_set(&c->in[4], BP_DTYPE_INVALID, S0(), 0, 0, 0, 0);
  bpc_operand_set(&c->out[0], BP_DTYPE_INVALID, S0(), 0, 0, 0, 0);
}

static void gen_scaled_mm(bpc_gen_t* g) {
  const uint32_t I8 = BP_DTYPE_I8, U8 = BP_DTYPE_U8, E4 = BP_DTYPE_F8E4M3FN, E5 = BP_DTYPE_F8E5M2;
  mm_case(g, "i8", "int_mm", I8, I8, 7, 37, 9, 0, 0, 0, 0, 0, 0, 0);
  mm_case(g, "i8", "int_mm_large", I8, I8, 33, 515, 70, 0, 0, 0, 0, 0, 0, 0);
  mm_case(g, "u8+i8", "zero_points", U8, I8, 5, 64, 17, 0, 0, 0, 0, 0, 128, 0);
  mm_case(g, "u8", "zero_points_both", U8, U8, 6, 19, 8, 0, 0, 0, 0, 0, 100, 131);
  mm_case(g, "i8+u8", "zero_b", I8, U8, 4, 40, 33, 0, 0, 0, 0, 0, -5, 128);
  mm_case(g, "i8", "row_col_bias_relu", I8, I8, 9, 48, 20, 2, 2, 1, BP_ACTIVATION_RELU, 0, 0, 0);
  mm_case(g, "i8", "tensor_scales_bf16", I8, I8, 4, 32, 16, 1, 1, 0, 0, BP_DTYPE_BF16, 0, 0);
  mm_case(g, "i8", "silu_f16", I8, I8, 3, 70, 5, 3, 3, 2, BP_ACTIVATION_SILU, BP_DTYPE_F16, 0, 0);
  mm_case(g, "i8", "gelu", I8, I8, 8, 33, 31, 1, 3, 1, BP_ACTIVATION_GELU_TANH, 0, 3, 0);
  mm_case(g, "e4m3fn", "scaled", E4, E4, 6, 40, 10, 1, 1, 0, 0, 0, 0, 0);
  mm_case(g, "e4m3fn", "rowwise_bf16", E4, E4, 7, 64, 24, 2, 2, 1, 0, BP_DTYPE_BF16, 0, 0);
  mm_case(g, "e4m3fn+e5m2", "mixed", E4, E5, 5, 33, 9, 3, 3, 0, BP_ACTIVATION_GELU_ERF, 0, 0, 0);
  mm_case(g, "e5m2", "unscaled", E5, E5, 4, 16, 4, 0, 0, 0, 0, 0, 0, 0);
}

static void wo_case_act(bpc_gen_t* g, uint32_t q, const char* axis, uint32_t xd, int64_t m, int64_t k,
                        int64_t n, int64_t gs, int zp, int bias, uint32_t act) {
  bpc_case_t* c = qcase(g, q, axis, 0);
  if (!c) return;
  c->num_inputs = 5;
  c->attrs.quantize.block_size = gs;
  c->attrs.quantize.activation = act;
  int64_t groups = gs ? (k + gs - 1) / gs : 1;
  bpc_operand_set(&c->in[0], xd, m == 1 ? S1(k) : S2(m, k), 0, BPC_V_RANDOM, -2, 2);
  uint32_t wd = is4(q) ? BP_DTYPE_U8 : q;
  int full = is4(q) || q == BP_DTYPE_U8;
  bpc_operand_set(&c->in[1], wd, S2(n, is4(q) ? k / 2 : k), 0, BPC_V_RANDOM | BPC_V_INTEGRAL,
                  full ? 0 : -128, full ? 255 : 127);
  bpc_operand_set(&c->in[2], BP_DTYPE_F32, gs ? S2(n, groups) : S1(n), 0, BPC_V_RANDOM, 0.001, 0.02);
  if (zp == 1) {
    uint32_t zd = q == BP_DTYPE_U4 || q == BP_DTYPE_U8 ? BP_DTYPE_U8 : BP_DTYPE_I8;
    double hi = q == BP_DTYPE_U4 ? 15 : q == BP_DTYPE_U8 ? 255 : 3;
    bpc_operand_set(&c->in[3], zd, gs ? S2(n, groups) : S1(n), 0, BPC_V_RANDOM | BPC_V_INTEGRAL,
                    zd == BP_DTYPE_U8 ? 0 : -3, hi);
  } else if (zp == 2) {
    bpc_operand_set(&c->in[3], BP_DTYPE_F32, gs ? S2(n, groups) : S1(n), 0, BPC_V_RANDOM, -2, 10);
  } else {
    bpc_operand_set(&c->in[3], BP_DTYPE_INVALID, S0(), 0, 0, 0, 0);
  }
  if (bias) bpc_operand_set(&c->in[4], BP_DTYPE_F32, S1(n), 0, BPC_V_RANDOM, -1, 1);
  else bpc_operand_set(&c->in[4], BP_DTYPE_INVALID, S0(), 0, 0, 0, 0);
}

static void wo_case(bpc_gen_t* g, uint32_t q, const char* axis, uint32_t xd, int64_t m, int64_t k,
                    int64_t n, int64_t gs, int zp, int bias) {
  wo_case_act(g, q, axis, xd, m, k, n, gs, zp, bias, BP_ACTIVATION_NONE);
}

static void gen_weight_only(bpc_gen_t* g) {
  const uint32_t I4 = BP_DTYPE_I4, U4 = BP_DTYPE_U4, I8 = BP_DTYPE_I8, U8 = BP_DTYPE_U8;
  const uint32_t F32 = BP_DTYPE_F32, F16 = BP_DTYPE_F16, BF16 = BP_DTYPE_BF16;
  wo_case(g, I4, "decode_g32", F32, 1, 256, 20, 32, 0, 0);
  wo_case(g, U4, "decode_g128_zp", F32, 1, 512, 9, 128, 1, 1);
  wo_case(g, U4, "rows_g64_zp", F32, 3, 192, 12, 64, 1, 0);
  wo_case(g, I4, "rows_g64_float_zp", BF16, 5, 128, 7, 64, 2, 1);
  wo_case(g, U4, "g5_odd_tail", F32, 2, 42, 6, 5, 1, 0);
  wo_case(g, I4, "per_channel", F16, 4, 64, 10, 0, 0, 1);
  wo_case(g, I8, "int8_per_channel", F32, 1, 300, 11, 0, 0, 1);
  wo_case(g, U8, "int8_g32_zp", BF16, 3, 96, 5, 32, 1, 0);
  wo_case(g, I8, "int8_decode_g128_zp", F32, 1, 512, 13, 128, 1, 1);
  wo_case(g, I8, "int8_per_channel_256", F32, 2, 256, 6, 0, 0, 0);
  if (!g->quick) wo_case(g, U4, "decode_g32_large", F32, 1, 2048, 64, 32, 1, 1);
  /* n a multiple of 4 from 64 on: a block's 4 rows come from the 4 quarters of w */
  wo_case(g, U4, "decode_g128_zp_quarters", F32, 1, 512, 68, 128, 1, 1);
  wo_case(g, I4, "rows_g64_float_zp_quarters", F32, 3, 256, 64, 64, 2, 1);
  wo_case(g, I8, "int8_g32_zp_quarters", F32, 2, 128, 72, 32, 1, 1);
  /* symmetric int4 in groups of 128 (GPTQ's symmetric form): the per-group
   * tables without zero points */
  wo_case(g, I4, "decode_g128_sym_quarters", F32, 1, 512, 68, 128, 0, 0);
  /* the activation epilogue (ABI 1.4), after the bias */
  wo_case_act(g, U4, "decode_g128_zp_bias_gelu", F32, 1, 512, 13, 128, 1, 1, BP_ACTIVATION_GELU_TANH);
  wo_case_act(g, I4, "rows_g64_silu_bf16", BF16, 3, 128, 9, 64, 2, 1, BP_ACTIVATION_SILU);
  wo_case_act(g, I4, "g5_odd_tail_gelu_erf", F16, 2, 42, 6, 5, 0, 1, BP_ACTIVATION_GELU_ERF);
  wo_case_act(g, I8, "int8_per_channel_relu", F32, 2, 96, 7, 0, 1, 1, BP_ACTIVATION_RELU);
  wo_case_act(g, U8, "int8_g32_sigmoid", F32, 1, 64, 5, 32, 0, 0, BP_ACTIVATION_SIGMOID);
  wo_case_act(g, U4, "rows_g128_tanh", F32, 4, 256, 6, 128, 0, 1, BP_ACTIVATION_TANH);
}

void bpc_gen_quant(bpc_gen_t* g) {
  switch (g->op) {
    case BP_OP_quantize: case BP_OP_dequantize: gen_static(g); break;
    case BP_OP_quantize_dynamic: gen_dynamic(g); break;
    case BP_OP_scaled_mm: gen_scaled_mm(g); break;
    case BP_OP_weight_only_mm: gen_weight_only(g); break;
    default: break;
  }
}
