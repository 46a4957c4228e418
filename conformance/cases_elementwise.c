/* Case generators of the elementwise ops (unary, binary, where). */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "cases_internal.h"

static const uint32_t kFloats[] = {BP_DTYPE_F32, BP_DTYPE_F64, BP_DTYPE_F16, BP_DTYPE_BF16};
static const uint32_t kInts[] = {BP_DTYPE_I8, BP_DTYPE_U8, BP_DTYPE_I16, BP_DTYPE_I32, BP_DTYPE_I64};
#define COUNT(a) (sizeof(a) / sizeof((a)[0]))

/* Which dtype groups an op's cases cover. */
enum { DT_FLOAT = 1, DT_INT = 2, DT_BOOL = 4, DT_I32_ONLY = 8 };

static uint32_t collect_dtypes(uint32_t groups, uint32_t* out) {
  uint32_t n = 0;
  if (groups & DT_FLOAT) for (size_t k = 0; k < COUNT(kFloats); k++) out[n++] = kFloats[k];
  if (groups & DT_INT) for (size_t k = 0; k < COUNT(kInts); k++) out[n++] = kInts[k];
  if (groups & DT_I32_ONLY) out[n++] = BP_DTYPE_I32;
  if (groups & DT_BOOL) out[n++] = BP_DTYPE_BOOL;
  return n;
}

/* ---- unary --------------------------------------------------------------- */
/* Random-value domain of a unary op (inside its mathematical domain; the
 * special-value cases cover the outside). */
static void unary_domain(uint32_t op, double* lo, double* hi) {
  *lo = -10.0;
  *hi = 10.0;
  switch (op) {
    case BP_OP_acos: case BP_OP_asin: *lo = -1.0; *hi = 1.0; break;
    case BP_OP_atanh: *lo = -0.99; *hi = 0.99; break;
    case BP_OP_acosh: *lo = 1.0; *hi = 20.0; break;
    case BP_OP_log: case BP_OP_log10: case BP_OP_log2: case BP_OP_sqrt: case BP_OP_rsqrt:
      *lo = 0.001; *hi = 100.0; break;
    case BP_OP_log1p: *lo = -0.99; *hi = 100.0; break;
    case BP_OP_exp: case BP_OP_expm1: *lo = -12.0; *hi = 12.0; break;
    case BP_OP_tan: *lo = -1.5; *hi = 1.5; break;
    default: break;
  }
}

static uint32_t unary_groups(uint32_t op, const char* rule) {
  if (op == BP_OP_hardtanh) return DT_FLOAT;
  if (strcmp(rule, "unary_float") == 0) return DT_FLOAT | DT_I32_ONLY;
  if (strcmp(rule, "unary_bitwise") == 0) return DT_INT | DT_BOOL;
  if (strcmp(rule, "unary_bool") == 0) return DT_FLOAT | DT_INT | DT_BOOL;
  return DT_FLOAT | DT_INT; /* unary_same, unary_clamp, clamp_tensor */
}

static void unary_attrs(bpc_case_t* c, uint32_t dtype, int variant) {
  int fl = bpc_dtype_is_float(dtype);
  /* Integer bounds must fit the dtype (PyTorch refuses to wrap them). */
  int64_t neg = dtype == BP_DTYPE_U8 ? 1 : -1;
  switch (c->op_id) {
    case BP_OP_clamp:
      c->has_attrs = 1;
      c->attrs.clamp.struct_size = sizeof c->attrs.clamp;
      if (variant == 1) { /* min only */
        c->attrs.clamp.min = fl ? bpc_sf(-0.5) : bpc_si(3 * neg);
      } else if (variant == 2) { /* min > max: max wins */
        c->attrs.clamp.min = fl ? bpc_sf(2.0) : bpc_si(5);
        c->attrs.clamp.max = fl ? bpc_sf(1.0) : bpc_si(2);
      } else if (variant == 3 && fl) { /* NaN bound: NaN */
        c->attrs.clamp.min = bpc_sf(NAN);
        c->attrs.clamp.max = bpc_sf(1.0);
      } else {
        c->attrs.clamp.min = fl ? bpc_sf(-1.5) : bpc_si(7 * neg);
        c->attrs.clamp.max = fl ? bpc_sf(2.25) : bpc_si(9);
      }
      break;
    case BP_OP_elu:
      c->has_attrs = 1;
      c->attrs.elu.struct_size = sizeof c->attrs.elu;
      c->attrs.elu.alpha = variant ? 0.5 : 1.0;
      c->attrs.elu.scale = variant ? 2.0 : 1.0;
      c->attrs.elu.input_scale = variant ? 0.5 : 1.0;
      break;
    case BP_OP_gelu:
      c->has_attrs = 1;
      c->attrs.gelu.struct_size = sizeof c->attrs.gelu;
      c->attrs.gelu.approximate = variant ? BP_GELU_TANH : BP_GELU_NONE;
      break;
    case BP_OP_hardtanh:
      c->has_attrs = 1;
      c->attrs.hardtanh.struct_size = sizeof c->attrs.hardtanh;
      c->attrs.hardtanh.min_val = variant ? -0.5 : -1.0;
      c->attrs.hardtanh.max_val = variant ? 2.0 : 1.0;
      break;
    case BP_OP_softplus:
      c->has_attrs = 1;
      c->attrs.softplus.struct_size = sizeof c->attrs.softplus;
      c->attrs.softplus.beta = variant ? 2.0 : 1.0;
      c->attrs.softplus.threshold = variant ? 3.0 : 20.0;
      break;
    case BP_OP_leaky_relu:
      c->has_attrs = 1;
      c->attrs.leaky_relu.struct_size = sizeof c->attrs.leaky_relu;
      c->attrs.leaky_relu.negative_slope = variant ? 0.125 : 0.01;
      break;
    default: break;
  }
}

/* One unary case: input shape/layout/values, output layout. */
static void unary_case(bpc_gen_t* g, uint32_t dtype, const char* axis, int variant, bpc_shape_t s,
                      uint32_t in_layout, uint32_t out_layout, uint32_t values) {
  char label[BPC_DTYPE_LABEL_MAX];
  snprintf(label, sizeof label, "%s", bpc_dtype_name(dtype));
  bpc_case_t* c = bpc_gen_new(g, label, axis, variant);
  if (!c) return;
  double lo, hi;
  unary_domain(g->op, &lo, &hi);
  if (values == BPC_V_SPECIAL) lo = hi = 0.0;
  if (!bpc_dtype_is_float(dtype)) { /* integers: their own range, or a small one */
    if (strcmp(bpc_op_entry(g->op)->rule, "unary_float") == 0) {
      lo = ceil(lo); hi = floor(hi);
    } else {
      lo = hi = 0.0;
    }
  }
  c->num_inputs = g->op == BP_OP_clamp_tensor ? 3 : 1;
  bpc_operand_set(&c->in[0], dtype, s, in_layout, values, lo, hi);
  bpc_operand_set(&c->out[0], BP_DTYPE_INVALID, s, out_layout, 0, 0, 0);
  if (g->op == BP_OP_clamp_tensor) {
    /* min broadcast along rows, max a 0-d tensor; variant 1: max absent. */
    bpc_shape_t ms = s.rank ? S1(s.sizes[s.rank - 1]) : S0();
    int fl = bpc_dtype_is_float(dtype);
    bpc_operand_set(&c->in[1], dtype, ms, BPC_LAYOUT_CONTIG, BPC_V_RANDOM, fl ? -3 : -20, fl ? 0 : 0);
    if (variant != 1) bpc_operand_set(&c->in[2], dtype, S0(), BPC_LAYOUT_CONTIG, BPC_V_RANDOM, 1, fl ? 4 : 30);
  }
  unary_attrs(c, dtype, variant);
}

void bpc_gen_unary(bpc_gen_t* g) {
  uint32_t dts[16];
  uint32_t n = collect_dtypes(unary_groups(g->op, bpc_op_entry(g->op)->rule), dts);
  static const int64_t kLens[] = {1, 3, 17, 1031};
  int attr_variants = (g->op == BP_OP_clamp) ? 4
                    : (g->op == BP_OP_elu || g->op == BP_OP_gelu || g->op == BP_OP_hardtanh ||
                       g->op == BP_OP_leaky_relu || g->op == BP_OP_clamp_tensor ||
                       g->op == BP_OP_softplus) ? 2 : 1;
  for (uint32_t k = 0; k < n; k++) {
    uint32_t d = dts[k];
    unary_case(g, d, "special", 0, S1(67), BPC_LAYOUT_CONTIG, BPC_LAYOUT_CONTIG, BPC_V_SPECIAL);
    for (size_t j = 0; j < COUNT(kLens); j++) {
      if (g->quick && kLens[j] != 17) continue;
      unary_case(g, d, "random", (int)kLens[j], S1(kLens[j]), BPC_LAYOUT_CONTIG, BPC_LAYOUT_CONTIG, BPC_V_RANDOM);
    }
    unary_case(g, d, "strided", 0, S2(5, 9), BPC_LAYOUT_STRIDED, BPC_LAYOUT_STRIDED, BPC_V_RANDOM);
    for (int v = 1; v < attr_variants; v++) {
      unary_case(g, d, "attrs", v, S2(4, 17), BPC_LAYOUT_CONTIG, BPC_LAYOUT_CONTIG,
                 (g->op == BP_OP_clamp && v == 3) ? BPC_V_SPECIAL : BPC_V_RANDOM);
    }
    if (g->quick) continue;
    unary_case(g, d, "empty", 0, S2(0, 5), BPC_LAYOUT_CONTIG, BPC_LAYOUT_CONTIG, BPC_V_RANDOM);
    unary_case(g, d, "0d", 0, S0(), BPC_LAYOUT_CONTIG, BPC_LAYOUT_CONTIG, BPC_V_RANDOM);
    unary_case(g, d, "transposed", 0, S2(6, 7), BPC_LAYOUT_TRANSPOSED, BPC_LAYOUT_CONTIG, BPC_V_RANDOM);
    unary_case(g, d, "out_transposed", 0, S3(2, 3, 5), BPC_LAYOUT_CONTIG, BPC_LAYOUT_TRANSPOSED, BPC_V_RANDOM);
    unary_case(g, d, "offset", 0, S1(33), BPC_LAYOUT_OFFSET, BPC_LAYOUT_OFFSET, BPC_V_SPECIAL);
  }
}

/* ---- binary ------------------------------------------------------------ */
static uint32_t binary_groups(uint32_t op, const char* rule) {
  if (op == BP_OP_add || op == BP_OP_mul) return DT_FLOAT | DT_INT | DT_BOOL;
  if (op == BP_OP_atan2) return DT_FLOAT | DT_I32_ONLY;
  if (strcmp(rule, "binary_bitwise") == 0) return DT_INT | DT_BOOL;
  if (strcmp(rule, "binary_bool") == 0 || strcmp(rule, "binary_compare") == 0) {
    return DT_FLOAT | DT_INT | DT_BOOL;
  }
  return DT_FLOAT | DT_INT;
}

static void binary_attrs_init(bpc_case_t* c) {
  c->has_attrs = 1;
  memset(&c->attrs.binary, 0, sizeof c->attrs.binary);
  c->attrs.binary.struct_size = sizeof c->attrs.binary;
}

/* Value ranges of the two operands for ops with restricted domains on
 * integers (division by zero, negative exponents and INT_MIN / -1 are
 * undefined). */
static void binary_values(uint32_t op, uint32_t dtype, int k, uint32_t* values, double* lo, double* hi) {
  *lo = *hi = 0.0;
  if (bpc_dtype_is_float(dtype) || dtype == BP_DTYPE_BOOL) {
    if (op == BP_OP_pow) { *lo = k ? -4.0 : 0.0; *hi = k ? 4.0 : 10.0; }
    return;
  }
  int divlike = op == BP_OP_div || op == BP_OP_fmod || op == BP_OP_remainder;
  if (divlike) {
    if (k == 0) { *lo = -1000; *hi = 1000; }
    else { *lo = dtype == BP_DTYPE_U8 ? 1 : -50; *hi = 50; *values |= BPC_V_NONZERO; }
    if (dtype == BP_DTYPE_I8 || dtype == BP_DTYPE_U8) { if (k == 0) { *lo = dtype == BP_DTYPE_U8 ? 0 : -127; *hi = 127; } }
  } else if (op == BP_OP_pow) {
    if (k == 0) { *lo = dtype == BP_DTYPE_U8 ? 0 : -4; *hi = 4; }
    else { *lo = 0; *hi = 7; }
  }
}

typedef struct bin_spec {
  uint32_t d0, d1;
  bpc_shape_t s0, s1;
  uint32_t l0, l1, lout;
  uint32_t values;
} bin_spec_t;

static bpc_case_t* binary_case(bpc_gen_t* g, const char* label, const char* axis, int variant,
                               const bin_spec_t* s) {
  bpc_case_t* c = bpc_gen_new(g, label, axis, variant);
  if (!c) return NULL;
  c->num_inputs = 2;
  binary_attrs_init(c);
  uint32_t dts[2] = {s->d0, s->d1};
  bpc_shape_t shapes[2] = {s->s0, s->s1};
  uint32_t lays[2] = {s->l0, s->l1};
  for (int k = 0; k < 2; k++) {
    uint32_t values = s->values;
    double lo, hi;
    binary_values(g->op, dts[k], k, &values, &lo, &hi);
    if ((values & 3u) == BPC_V_SPECIAL && !(values & BPC_V_NONZERO) && lo == hi) lo = hi = 0.0;
    bpc_operand_set(&c->in[k], dts[k], shapes[k], lays[k], values, lo, hi);
  }
  bpc_operand_set(&c->out[0], BP_DTYPE_INVALID, S0(), s->lout, 0, 0, 0);
  return c;
}

static int binary_div_like(uint32_t op) {
  return op == BP_OP_div || op == BP_OP_fmod || op == BP_OP_remainder;
}

void bpc_gen_binary(bpc_gen_t* g) {
  uint32_t dts[16];
  uint32_t n = collect_dtypes(binary_groups(g->op, bpc_op_entry(g->op)->rule), dts);
  static const int64_t kLens[] = {1, 17, 1031};
  for (uint32_t k = 0; k < n; k++) {
    uint32_t d = dts[k];
    const char* dn = bpc_dtype_name(d);
    int fl = bpc_dtype_is_float(d);
    int int_div = binary_div_like(g->op) && !fl && d != BP_DTYPE_BOOL;
    bin_spec_t s = {d, d, S1(17), S1(17), 0, 0, 0, BPC_V_RANDOM};
    /* Special values: the full cross product of both operands' specials
     * (integer division ops keep their restricted ranges instead). */
    if (!int_div && !(g->op == BP_OP_pow && !fl)) {
      bpc_operand_t probe;
      bpc_operand_set(&probe, d, S0(), 0, BPC_V_SPECIAL, 0, 0);
      uint32_t m = bpc_operand_special_count(&probe);
      s.s0 = s.s1 = S1((int64_t)m * m);
      s.values = BPC_V_SPECIAL;
      binary_case(g, dn, "special", 0, &s);
      s.values = BPC_V_RANDOM;
    }
    for (size_t j = 0; j < COUNT(kLens); j++) {
      if (g->quick && kLens[j] != 17) continue;
      s.s0 = s.s1 = S1(kLens[j]);
      binary_case(g, dn, "random", (int)kLens[j], &s);
    }
    s.s0 = S3(3, 1, 5); s.s1 = S2(4, 1);
    binary_case(g, dn, "broadcast", 0, &s);
    /* Scalar operand (aten .Scalar overloads). */
    s.s0 = S2(3, 7);
    bpc_case_t* c = binary_case(g, dn, "scalar", 0, &s);
    if (c) {
      c->attrs.binary.flags = BP_BINARY_OTHER_IS_SCALAR;
      c->attrs.binary.scalar = bpc_scalar_like(d);
      if (g->op == BP_OP_pow && !fl) c->attrs.binary.scalar = bpc_si(3);
      if (binary_div_like(g->op) && d == BP_DTYPE_BOOL) c->attrs.binary.scalar = bpc_sb(1);
      c->in[1].dtype = BP_DTYPE_INVALID;
      bpc_gen_keep_if_valid(g, c);
    }
    if (g->op == BP_OP_pow && fl) {
      /* Exponents 0.5 and -0.5 over every special value: PyTorch computes
       * them as sqrt and rsqrt (docs/semantics.md, pow). */
      static const double kHalf[2] = {0.5, -0.5};
      bpc_operand_t probe;
      bpc_operand_set(&probe, d, S0(), 0, BPC_V_SPECIAL, 0, 0);
      for (int h = 0; h < 2; h++) {
        s.s0 = s.s1 = S1(bpc_operand_special_count(&probe));
        s.values = BPC_V_SPECIAL;
        c = binary_case(g, dn, h ? "scalar_rsqrt" : "scalar_sqrt", 0, &s);
        if (c) {
          c->attrs.binary.flags = BP_BINARY_OTHER_IS_SCALAR;
          c->attrs.binary.scalar = bpc_sf(kHalf[h]);
          c->in[1].dtype = BP_DTYPE_INVALID;
          bpc_gen_keep_if_valid(g, c);
        }
      }
      s.values = BPC_V_RANDOM;
      /* Exponent -2 is 1 / (x * x) in PyTorch (not f16): where x * x
       * overflows the result is 0, not IEEE pow's subnormal. Magnitudes
       * drawn around the overflow threshold of the compute precision. */
      double t = d == BP_DTYPE_F64 ? 1.34e154 : d == BP_DTYPE_F16 ? 256.0 : 1.84e19;
      s.s0 = S1(64);
      c = binary_case(g, dn, "scalar_sq_recip", 0, &s);
      if (c) {
        bpc_operand_set(&c->in[0], d, S1(64), 0, BPC_V_RANDOM, -4.0 * t, 4.0 * t);
        c->attrs.binary.flags = BP_BINARY_OTHER_IS_SCALAR;
        c->attrs.binary.scalar = bpc_sf(-2.0);
        c->in[1].dtype = BP_DTYPE_INVALID;
        bpc_gen_keep_if_valid(g, c);
      }
    }
    if (g->op == BP_OP_pow) { /* pow.Scalar: the base is the scalar */
      s.s1 = S2(3, 7);
      c = binary_case(g, dn, "scalar_self", 0, &s);
      if (c) {
        c->attrs.binary.flags = BP_BINARY_SELF_IS_SCALAR;
        c->attrs.binary.scalar = fl ? bpc_sf(2.5) : bpc_si(2);
        c->in[0].dtype = BP_DTYPE_INVALID;
        bpc_gen_keep_if_valid(g, c);
      }
    }
    if ((g->op == BP_OP_add || g->op == BP_OP_sub) && d != BP_DTYPE_BOOL) {
      s.s0 = s.s1 = S2(4, 9);
      c = binary_case(g, dn, "alpha", 0, &s);
      if (c) c->attrs.binary.alpha = fl ? bpc_sf(-2.0) : bpc_si(3);
    }
    if (g->op == BP_OP_div && d != BP_DTYPE_BOOL) {
      for (uint32_t mode = BP_ROUNDING_TRUNC; mode <= BP_ROUNDING_FLOOR; mode++) {
        s.s0 = s.s1 = S1(fl ? 0 : 67);
        s.values = fl ? BPC_V_SPECIAL : BPC_V_RANDOM;
        if (fl) {
          bpc_operand_t probe;
          bpc_operand_set(&probe, d, S0(), 0, BPC_V_SPECIAL, 0, 0);
          uint32_t m = bpc_operand_special_count(&probe);
          s.s0 = s.s1 = S1((int64_t)m * m);
        }
        c = binary_case(g, dn, mode == BP_ROUNDING_TRUNC ? "trunc" : "floor", 0, &s);
        if (c) c->attrs.binary.rounding_mode = mode;
        s.values = BPC_V_RANDOM;
        s.s0 = s.s1 = S1(fl ? 1031 : 255);
        c = binary_case(g, dn, mode == BP_ROUNDING_TRUNC ? "trunc" : "floor", 1, &s);
        if (c) c->attrs.binary.rounding_mode = mode;
      }
    }
    s.s0 = S2(7, 3); s.s1 = S2(7, 3); s.l0 = BPC_LAYOUT_STRIDED; s.lout = BPC_LAYOUT_STRIDED;
    binary_case(g, dn, "strided", 0, &s);
    s.l0 = s.l1 = s.lout = BPC_LAYOUT_CONTIG;
    if (g->quick) continue;
    s.s0 = S0(); s.s1 = S2(3, 4);
    binary_case(g, dn, "broadcast_0d", 0, &s);
    s.s0 = S2(2, 3); s.s1 = S0();
    binary_case(g, dn, "broadcast_0d", 1, &s);
    s.s0 = S2(0, 4); s.s1 = S1(4);
    binary_case(g, dn, "empty", 0, &s);
    s.s0 = S0(); s.s1 = S0();
    binary_case(g, dn, "0d", 0, &s);
    s.s0 = S2(5, 6); s.s1 = S2(5, 6); s.l0 = BPC_LAYOUT_TRANSPOSED; s.l1 = BPC_LAYOUT_STRIDED;
    s.lout = BPC_LAYOUT_TRANSPOSED;
    binary_case(g, dn, "transposed", 0, &s);
    s.s0 = S1(29); s.s1 = S1(29); s.l0 = s.l1 = s.lout = BPC_LAYOUT_OFFSET;
    binary_case(g, dn, "offset", 0, &s);
    s.l0 = s.l1 = s.lout = BPC_LAYOUT_CONTIG;
  }
  /* Type promotion: mixed dtypes, 0-d tensors and wrapped scalars. Each
   * combination is kept only where the op accepts it. */
  static const struct { uint32_t d0, d1; int zero_dim; const char* label; } kMixed[] = {
      {BP_DTYPE_I32, BP_DTYPE_F16, 0, "i32+f16"},    {BP_DTYPE_U8, BP_DTYPE_I8, 0, "u8+i8"},
      {BP_DTYPE_F16, BP_DTYPE_BF16, 0, "f16+bf16"},  {BP_DTYPE_BOOL, BP_DTYPE_F32, 0, "bool+f32"},
      {BP_DTYPE_I16, BP_DTYPE_I64, 0, "i16+i64"},    {BP_DTYPE_F32, BP_DTYPE_F64, 0, "f32+f64"},
      {BP_DTYPE_I32, BP_DTYPE_F64, 1, "i32+f64_0d"}, {BP_DTYPE_F16, BP_DTYPE_F64, 1, "f16+f64_0d"},
      {BP_DTYPE_I32, BP_DTYPE_I64, 1, "i32+i64_0d"}, {BP_DTYPE_U8, BP_DTYPE_BOOL, 0, "u8+bool"},
  };
  for (size_t k = 0; k < COUNT(kMixed); k++) {
    if (g->quick && k % 3 != 0) continue;
    bin_spec_t s = {kMixed[k].d0, kMixed[k].d1, S2(3, 11), kMixed[k].zero_dim ? S0() : S2(3, 11),
                    0, 0, 0, BPC_V_RANDOM};
    bpc_case_t* c = binary_case(g, kMixed[k].label, "promote", 0, &s);
    if (c && kMixed[k].zero_dim) {
      c->in[1].values |= BPC_V_INTEGRAL;
      c->in[1].lo = 1; /* nonzero: also a valid divisor */
      c->in[1].hi = 8;
    }
    bpc_gen_keep_if_valid(g, c);
  }
  static const struct { uint32_t d; const char* label; } kWrapped[] = {
      {BP_DTYPE_U8, "u8+int_scalar"},
      {BP_DTYPE_I32, "i32+float_scalar"},
      {BP_DTYPE_BOOL, "bool+int_scalar"},
      {BP_DTYPE_F16, "f16+float_scalar"},
  };
  for (size_t k = 0; k < COUNT(kWrapped); k++) {
    bin_spec_t s = {kWrapped[k].d, kWrapped[k].d, S1(19), S1(19), 0, 0, 0, BPC_V_RANDOM};
    bpc_case_t* c = binary_case(g, kWrapped[k].label, "promote", 0, &s);
    if (!c) continue;
    c->attrs.binary.flags = BP_BINARY_OTHER_IS_SCALAR;
    c->in[1].dtype = BP_DTYPE_INVALID;
    switch (k) {
      case 0: c->attrs.binary.scalar = bpc_si(binary_div_like(g->op) ? 7 : 1000); break; /* u8 wraps */
      case 1: c->attrs.binary.scalar = bpc_sf(2.5); break;
      case 2: c->attrs.binary.scalar = bpc_si(3); break;
      default: c->attrs.binary.scalar = bpc_sf(-0.75); break;
    }
    if (g->op == BP_OP_pow && k != 1 && k != 3) c->attrs.binary.scalar = bpc_si(2);
    bpc_gen_keep_if_valid(g, c);
  }
}

/* ---- where ------------------------------------------------------------------ */
void bpc_gen_where(bpc_gen_t* g) {
  uint32_t dts[16];
  uint32_t n = collect_dtypes(DT_FLOAT | DT_INT | DT_BOOL, dts);
  for (uint32_t k = 0; k < n; k++) {
    uint32_t d = dts[k];
    const char* dn = bpc_dtype_name(d);
    struct { const char* axis; bpc_shape_t c, a, b; uint32_t lc, la, lout, values; int quick; } v[] = {
        {"special", S1(64), S1(64), S1(64), 0, 0, 0, BPC_V_SPECIAL, 1},
        {"random", S1(1031), S1(1031), S1(1031), 0, 0, 0, BPC_V_RANDOM, 0},
        {"broadcast", S2(3, 1), S2(1, 4), S0(), 0, 0, 0, BPC_V_RANDOM, 1},
        {"strided", S2(4, 5), S2(4, 5), S2(4, 5), BPC_LAYOUT_STRIDED, BPC_LAYOUT_TRANSPOSED,
         BPC_LAYOUT_STRIDED, BPC_V_RANDOM, 1},
        {"empty", S2(0, 3), S1(3), S1(3), 0, 0, 0, BPC_V_RANDOM, 0},
        {"offset", S1(21), S1(21), S1(21), BPC_LAYOUT_OFFSET, BPC_LAYOUT_OFFSET, BPC_LAYOUT_OFFSET,
         BPC_V_RANDOM, 0},
    };
    for (size_t j = 0; j < COUNT(v); j++) {
      if (g->quick && !v[j].quick) continue;
      bpc_case_t* c = bpc_gen_new(g, dn, v[j].axis, 0);
      if (!c) return;
      c->num_inputs = 3;
      bpc_operand_set(&c->in[0], BP_DTYPE_BOOL, v[j].c, v[j].lc, BPC_V_RANDOM, 0, 0);
      bpc_operand_set(&c->in[1], d, v[j].a, v[j].la, v[j].values, 0, 0);
      bpc_operand_set(&c->in[2], d, v[j].b, BPC_LAYOUT_CONTIG, v[j].values == BPC_V_SPECIAL ? BPC_V_RANDOM : v[j].values, 0, 0);
      bpc_operand_set(&c->out[0], BP_DTYPE_INVALID, S0(), v[j].lout, 0, 0, 0);
    }
  }
  static const struct { uint32_t cd, d0, d1; int zd; const char* label; } kMixed[] = {
      {BP_DTYPE_U8, BP_DTYPE_F32, BP_DTYPE_F32, 0, "u8cond+f32"},
      {BP_DTYPE_BOOL, BP_DTYPE_F16, BP_DTYPE_F32, 0, "f16+f32"},
      {BP_DTYPE_BOOL, BP_DTYPE_I32, BP_DTYPE_F64, 1, "i32+f64_0d"},
      {BP_DTYPE_BOOL, BP_DTYPE_U8, BP_DTYPE_I8, 0, "u8+i8"},
  };
  for (size_t k = 0; k < COUNT(kMixed); k++) {
    bpc_case_t* c = bpc_gen_new(g, kMixed[k].label, "promote", 0);
    if (!c) return;
    c->num_inputs = 3;
    bpc_operand_set(&c->in[0], kMixed[k].cd, S2(5, 6), 0, BPC_V_RANDOM, 0, kMixed[k].cd == BP_DTYPE_U8 ? 3 : 0);
    bpc_operand_set(&c->in[1], kMixed[k].d0, S2(5, 6), 0, BPC_V_RANDOM, 0, 0);
    bpc_operand_set(&c->in[2], kMixed[k].d1, kMixed[k].zd ? S0() : S2(5, 6), 0,
                    kMixed[k].zd ? BPC_V_INTEGRAL : BPC_V_RANDOM, kMixed[k].zd ? -8 : 0, kMixed[k].zd ? 8 : 0);
    bpc_operand_set(&c->out[0], BP_DTYPE_INVALID, S0(), 0, 0, 0, 0);
    bpc_gen_keep_if_valid(g, c);
  }
}
