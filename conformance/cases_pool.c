/* Case generators of the pool family: avg_pool, avg_pool2d_backward,
 * adaptive_avg_pool, adaptive_avg_pool2d_backward, max_pool_with_indices,
 * max_pool2d_with_indices_backward, grid_sampler_2d, upsample_bilinear2d and
 * upsample_nearest2d. */
#include <stdio.h>
#include <string.h>

#include "cases_internal.h"

void bpc_gen_pool(bpc_gen_t* g);

#define COUNT(a) (sizeof(a) / sizeof((a)[0]))

static const uint32_t kFloats[] = {BP_DTYPE_F32, BP_DTYPE_F64, BP_DTYPE_F16, BP_DTYPE_BF16};
static const uint32_t kAvgTypes[] = {BP_DTYPE_F32, BP_DTYPE_F64, BP_DTYPE_F16, BP_DTYPE_BF16,
                                     BP_DTYPE_I64};
static const uint32_t kMaxTypes[] = {BP_DTYPE_F32, BP_DTYPE_F64, BP_DTYPE_F16, BP_DTYPE_BF16,
                                     BP_DTYPE_I8,  BP_DTYPE_U8,  BP_DTYPE_I16, BP_DTYPE_I32,
                                     BP_DTYPE_I64};

/* Values of a pooled operand: floats in [-10, 10] (specials: finite ones
 * within +-1e4 plus inf and NaN, so that sums do not overflow in f32);
 * i64 sums stay far from overflow. */
static void pool_values(uint32_t d, int special, uint32_t* values, double* lo, double* hi) {
  *values = BPC_V_RANDOM;
  *lo = *hi = 0.0;
  if (special && bpc_dtype_is_float(d)) {
    *values = BPC_V_SPECIAL | BPC_V_NONFINITE;
    *lo = -1e4;
    *hi = 1e4;
  } else if (d == BP_DTYPE_I64) {
    *lo = -1000;
    *hi = 1000;
  } else if (special) {
    *values = BPC_V_SPECIAL;
  }
}

/* ---- fixed-window pooling ------------------------------------------------------ */
typedef struct pool_spec {
  const char* axis;
  int variant;
  bpc_shape_t s;
  uint32_t sd; /* spatial dims */
  int64_t k[3], st[3], pad[3], dil[3];
  uint32_t ceil, cip;
  int64_t divisor;
  uint32_t lin, lout;
  int special;
  int quick;
} pool_spec_t;

static void set_pool_attrs(bpc_case_t* c, const pool_spec_t* p) {
  bp_pool_attrs_t* a = &c->attrs.pool;
  c->has_attrs = 1;
  a->struct_size = sizeof *a;
  a->spatial_dims = p->sd;
  for (uint32_t k = 0; k < p->sd; k++) {
    a->kernel[k] = p->k[k];
    a->stride[k] = p->st[k];
    a->padding[k] = p->pad[k];
    a->dilation[k] = p->dil[k] ? p->dil[k] : 1;
  }
  a->ceil_mode = p->ceil;
  a->count_include_pad = p->cip;
  a->divisor_override = p->divisor;
  /* A spec stride of 0 (and divisor 0) means "not given" (PyTorch's None). */
  a->has_stride = p->st[0] != 0;
  if (!a->has_stride) memset(a->stride, 0, sizeof a->stride);
  a->has_divisor_override = p->divisor != 0;
}

/* The forward output shape (PyTorch's pooling_output_shape). */
static bpc_shape_t pool_out_shape(const pool_spec_t* p) {
  bpc_shape_t o = p->s;
  for (uint32_t k = 0; k < p->sd; k++) {
    int64_t in = p->s.sizes[p->s.rank - p->sd + k];
    int64_t st = p->st[k] ? p->st[k] : p->k[k], dil = p->dil[k] ? p->dil[k] : 1;
    int64_t num = in + 2 * p->pad[k] - dil * (p->k[k] - 1) - 1 + (p->ceil ? st - 1 : 0);
    int64_t q = num >= 0 ? num / st : -((-num + st - 1) / st);
    int64_t out = q + 1;
    if (p->ceil && (out - 1) * st >= in + p->pad[k]) out--;
    o.sizes[p->s.rank - p->sd + k] = out;
  }
  return o;
}

static void pool_case(bpc_gen_t* g, uint32_t d, const pool_spec_t* p) {
  uint32_t op = g->op;
  int backward = op == BP_OP_avg_pool2d_backward || op == BP_OP_max_pool2d_with_indices_backward;
  bpc_case_t* c = bpc_gen_new(g, bpc_dtype_name(d), p->axis, p->variant);
  if (!c) return;
  uint32_t values;
  double lo, hi;
  pool_values(d, p->special, &values, &lo, &hi);
  set_pool_attrs(c, p);
  if (op == BP_OP_max_pool_with_indices) c->num_outputs = 2;
  if (!backward) {
    c->num_inputs = 1;
    bpc_operand_set(&c->in[0], d, p->s, p->lin, values, lo, hi);
  } else {
    bpc_shape_t o = pool_out_shape(p);
    int64_t plane = 1;
    for (uint32_t k = 0; k < p->sd; k++) plane *= p->s.sizes[p->s.rank - p->sd + k];
    c->num_inputs = op == BP_OP_max_pool2d_with_indices_backward ? 3 : 2;
    bpc_operand_set(&c->in[0], d, o, p->lin, values, lo, hi);
    bpc_operand_set(&c->in[1], d, p->s, BPC_LAYOUT_CONTIG, BPC_V_RANDOM, 0, 0);
    if (c->num_inputs == 3) { /* flat plane indices; -1 is skipped */
      bpc_operand_set(&c->in[2], BP_DTYPE_I64, o, p->lin == BPC_LAYOUT_CONTIG ? 0 : BPC_LAYOUT_OFFSET,
                      BPC_V_RANDOM, -1, (double)(plane - 1));
    }
  }
  for (uint32_t k = 0; k < c->num_outputs; k++) bpc_operand_set(&c->out[k], BP_DTYPE_INVALID, S0(), p->lout, 0, 0, 0);
  bpc_gen_keep_if_valid(g, c);
}

#define SH5(a, b, c_, d, e) bpc_shape(5, (int64_t)(a), (int64_t)(b), (int64_t)(c_), (int64_t)(d), (int64_t)(e))

static void gen_pool(bpc_gen_t* g) {
  uint32_t op = g->op;
  int is_max = op == BP_OP_max_pool_with_indices || op == BP_OP_max_pool2d_with_indices_backward;
  int only2d = op == BP_OP_avg_pool2d_backward || op == BP_OP_max_pool2d_with_indices_backward;
  const pool_spec_t v[] = {
      {"2d", 0, S4(2, 3, 7, 9), 2, {3, 3}, {2, 2}, {1, 1}, {0}, 0, 1, 0, 0, 0, 0, 1},
      {"2d_ceil", 0, S4(1, 2, 8, 7), 2, {3, 2}, {2, 2}, {1, 1}, {0}, 1, 0, 0, 0, 0, 0, 1},
      {"2d_ceil", 1, S4(1, 2, 6, 6), 2, {2, 2}, {2, 2}, {1, 1}, {0}, 1, 1, 0, 0, 0, 0, 0},
      {"2d_overlap", 0, S4(2, 2, 6, 6), 2, {3, 3}, {1, 1}, {0, 0}, {0}, 0, 1, 0, 0, 0, 0, 0},
      {"2d_divisor", 0, S4(2, 2, 6, 7), 2, {2, 3}, {1, 2}, {1, 1}, {0}, 0, 1, 5, 0, 0, 0, 0},
      {"2d_divisor", 1, S4(1, 2, 5, 5), 2, {3, 3}, {2, 2}, {1, 1}, {0}, 1, 0, -3, 0, 0, 0, 0},
      {"2d_dilation", 0, S4(1, 3, 9, 10), 2, {3, 2}, {2, 1}, {1, 1}, {2, 3}, 0, 1, 0, 0, 0, 0, 1},
      {"2d_dilation_ceil", 0, S4(2, 1, 10, 9), 2, {2, 3}, {3, 2}, {1, 1}, {2, 2}, 1, 1, 0, 0, 0, 0, 0},
      {"2d_unbatched", 0, S3(3, 5, 5), 2, {2, 2}, {0, 0}, {0, 0}, {0}, 0, 1, 0, 0, 0, 0, 1},
      {"2d_odd", 0, S4(1, 1, 17, 19), 2, {5, 4}, {3, 2}, {2, 1}, {0}, 1, 0, 0, 0, 0, 0, 0},
      {"special", 0, S4(2, 2, 8, 8), 2, {2, 2}, {2, 2}, {0, 0}, {0}, 0, 1, 0, 0, 0, 1, 1},
      {"special", 1, S4(1, 2, 7, 7), 2, {3, 3}, {2, 2}, {1, 1}, {0}, 1, 0, 0, 0, 0, 1, 0},
      {"empty_batch", 0, S4(0, 3, 5, 5), 2, {2, 2}, {2, 2}, {0, 0}, {0}, 0, 1, 0, 0, 0, 0, 0},
      {"strided", 0, S4(2, 2, 7, 8), 2, {3, 3}, {2, 2}, {1, 1}, {0}, 0, 1, 0, BPC_LAYOUT_STRIDED, BPC_LAYOUT_STRIDED, 0, 1},
      {"transposed", 0, S4(2, 3, 6, 5), 2, {2, 2}, {1, 1}, {1, 1}, {0}, 0, 0, 0, BPC_LAYOUT_TRANSPOSED, BPC_LAYOUT_OFFSET, 0, 0},
      {"offset", 0, S4(1, 4, 5, 6), 2, {3, 2}, {1, 2}, {0, 1}, {0}, 1, 1, 0, BPC_LAYOUT_OFFSET, BPC_LAYOUT_TRANSPOSED, 0, 0},
      {"1d", 0, S3(2, 4, 11), 1, {3}, {2}, {1}, {0}, 1, 0, 0, 0, 0, 0, 1},
      {"1d_unbatched", 0, S2(3, 10), 1, {4}, {0}, {2}, {0}, 0, 1, 0, BPC_LAYOUT_TRANSPOSED, 0, 0, 0},
      {"3d", 0, SH5(1, 2, 5, 6, 7), 3, {2, 3, 3}, {2, 2, 1}, {1, 1, 0}, {0}, 1, 1, 0, 0, 0, 0, 1},
      {"3d", 1, SH5(2, 1, 4, 5, 6), 3, {2, 2, 3}, {1, 2, 2}, {0, 1, 1}, {2, 1, 1}, 0, 0, 0, BPC_LAYOUT_STRIDED, 0, 0, 0},
      {"3d_unbatched", 0, S4(2, 4, 4, 5), 3, {2, 2, 2}, {0, 0, 0}, {0, 0, 0}, {0}, 0, 1, 7, 0, BPC_LAYOUT_OFFSET, 0, 0},
      {"3d_special", 0, SH5(1, 2, 4, 4, 4), 3, {2, 2, 2}, {2, 2, 2}, {0, 0, 0}, {0}, 0, 1, 0, 0, 0, 1, 0},
  };
  const uint32_t* dts = is_max ? kMaxTypes : kAvgTypes;
  size_t nd = is_max ? COUNT(kMaxTypes) : COUNT(kAvgTypes);
  if (op == BP_OP_max_pool2d_with_indices_backward) {
    dts = kFloats;
    nd = COUNT(kFloats);
  }
  for (size_t t = 0; t < nd; t++) {
    uint32_t d = dts[t];
    int wide = d == BP_DTYPE_F32 || d == BP_DTYPE_F64; /* every case; others the main ones */
    for (size_t j = 0; j < COUNT(v); j++) {
      const pool_spec_t* p = &v[j];
      if (g->quick && !p->quick) continue;
      if (!wide && !p->quick && (strncmp(p->axis, "special", 7) != 0 || d == BP_DTYPE_I8 ||
                                 d == BP_DTYPE_I16 || d == BP_DTYPE_I32)) {
        continue;
      }
      if (only2d && p->sd != 2) continue;
      if (is_max && p->sd == 1) continue;
      if (!is_max && p->dil[0] > 1) continue;
      pool_case(g, d, p);
    }
  }
}

/* ---- adaptive average pooling ------------------------------------------------------ */
static void gen_adaptive(bpc_gen_t* g) {
  int backward = g->op == BP_OP_adaptive_avg_pool2d_backward;
  const struct {
    const char* axis;
    int variant;
    bpc_shape_t s;
    uint32_t sd;
    int64_t o[3];
    uint32_t lin, lout;
    int special, quick;
  } v[] = {
      {"2d", 0, S4(2, 3, 7, 9), 2, {3, 4}, 0, 0, 0, 1},
      {"2d", 1, S4(1, 2, 10, 10), 2, {5, 5}, 0, 0, 0, 0},
      {"2d_global", 0, S4(2, 3, 5, 6), 2, {1, 1}, 0, 0, 0, 0},
      {"2d_upsample", 0, S4(1, 2, 3, 5), 2, {5, 7}, 0, 0, 0, 1},
      {"2d_unbatched", 0, S3(3, 6, 7), 2, {4, 3}, BPC_LAYOUT_TRANSPOSED, 0, 0, 0},
      {"2d_empty_out", 0, S4(2, 3, 4, 4), 2, {0, 3}, 0, 0, 0, 0},
      {"empty_batch", 0, S4(0, 3, 4, 4), 2, {2, 2}, 0, 0, 0, 0},
      {"special", 0, S4(2, 2, 8, 8), 2, {4, 3}, 0, 0, 1, 1},
      {"strided", 0, S4(2, 2, 9, 7), 2, {4, 3}, BPC_LAYOUT_STRIDED, BPC_LAYOUT_STRIDED, 0, 1},
      {"offset", 0, S4(1, 3, 5, 8), 2, {2, 3}, BPC_LAYOUT_OFFSET, BPC_LAYOUT_TRANSPOSED, 0, 0},
      {"1d", 0, S3(2, 3, 10), 1, {4}, 0, 0, 0, 1},
      {"1d_unbatched", 0, S2(3, 7), 1, {3}, 0, BPC_LAYOUT_OFFSET, 0, 0},
      {"3d", 0, SH5(1, 2, 5, 6, 7), 3, {2, 3, 4}, 0, 0, 0, 1},
      {"3d_unbatched", 0, S4(2, 4, 5, 3), 3, {3, 2, 2}, BPC_LAYOUT_STRIDED, 0, 0, 0},
  };
  for (size_t t = 0; t < COUNT(kFloats); t++) {
    uint32_t d = kFloats[t];
    int wide = d == BP_DTYPE_F32 || d == BP_DTYPE_F64;
    for (size_t j = 0; j < COUNT(v); j++) {
      if (g->quick && !v[j].quick) continue;
      if (!wide && !v[j].quick) continue;
      if (backward && (v[j].sd != 2 || v[j].o[0] == 0)) continue;
      bpc_case_t* c = bpc_gen_new(g, bpc_dtype_name(d), v[j].axis, v[j].variant);
      if (!c) return;
      uint32_t values;
      double lo, hi;
      pool_values(d, v[j].special, &values, &lo, &hi);
      bpc_shape_t o = v[j].s;
      for (uint32_t k = 0; k < v[j].sd; k++) o.sizes[o.rank - v[j].sd + k] = v[j].o[k];
      if (backward) {
        c->num_inputs = 2;
        bpc_operand_set(&c->in[0], d, o, v[j].lin, values, lo, hi);
        bpc_operand_set(&c->in[1], d, v[j].s, BPC_LAYOUT_CONTIG, BPC_V_RANDOM, 0, 0);
      } else {
        c->num_inputs = 1;
        bpc_operand_set(&c->in[0], d, v[j].s, v[j].lin, values, lo, hi);
        c->has_attrs = 1;
        c->attrs.adaptive_pool.struct_size = sizeof c->attrs.adaptive_pool;
        c->attrs.adaptive_pool.spatial_dims = v[j].sd;
        for (uint32_t k = 0; k < v[j].sd; k++) c->attrs.adaptive_pool.output_size[k] = v[j].o[k];
      }
      bpc_operand_set(&c->out[0], BP_DTYPE_INVALID, S0(), v[j].lout, 0, 0, 0);
      bpc_gen_keep_if_valid(g, c);
    }
  }
}

/* ---- grid_sampler_2d ------------------------------------------------------------- */
static void grid_case(bpc_gen_t* g, uint32_t d, const char* axis, int variant, bpc_shape_t in,
                      bpc_shape_t grid, uint32_t interp, uint32_t pad, uint32_t ac, uint32_t lin,
                      uint32_t lgrid, uint32_t lout, double range, int special, uint32_t grid_flags) {
  bpc_case_t* c = bpc_gen_new(g, bpc_dtype_name(d), axis, variant);
  if (!c) return;
  c->num_inputs = 2;
  uint32_t values = BPC_V_RANDOM;
  double lo = 0, hi = 0;
  if (special) { /* nearest copies specials; the weighted modes see finite ones */
    values = BPC_V_SPECIAL;
    if (interp != BP_GRID_NEAREST) { lo = -1e4; hi = 1e4; }
  }
  bpc_operand_set(&c->in[0], d, in, lin, values, lo, hi);
  bpc_operand_set(&c->in[1], d, grid, lgrid, BPC_V_RANDOM | grid_flags, -range, range);
  bpc_operand_set(&c->out[0], BP_DTYPE_INVALID, S0(), lout, 0, 0, 0);
  c->has_attrs = 1;
  bp_grid_sampler_attrs_t* a = &c->attrs.grid_sampler;
  a->struct_size = sizeof *a;
  a->interpolation = interp;
  a->padding_mode = pad;
  a->align_corners = ac;
  bpc_gen_keep_if_valid(g, c);
}

static void gen_grid(bpc_gen_t* g) {
  static const char* const kInterp[] = {"bilinear", "nearest", "bicubic"};
  static const char* const kPad[] = {"zeros", "border", "reflection"};
  for (size_t t = 0; t < COUNT(kFloats); t++) {
    uint32_t d = kFloats[t];
    int wide = d == BP_DTYPE_F32 || d == BP_DTYPE_F64;
    for (uint32_t im = 0; im < 3; im++) {
      for (uint32_t pm = 0; pm < 3; pm++) {
        for (uint32_t ac = 0; ac < 2; ac++) {
          int variant = (int)ac;
          if (!wide && (pm != im || ac)) continue; /* halves: one padding mode per interpolation */
          if (g->quick && (ac || (pm != 0 && pm != im))) continue;
          char axis[48];
          snprintf(axis, sizeof axis, "%s_%s", kInterp[im], kPad[pm]);
          /* coordinates up to 1.5 leave the image on every side */
          grid_case(g, d, axis, variant, S4(2, 3, 5, 7), S4(2, 4, 6, 2), im, pm, ac, 0, 0, 0, 1.5, 0, 0);
        }
      }
    }
    if (g->quick && !wide) continue;
    grid_case(g, d, "special_nearest", 0, S4(1, 2, 6, 6), S4(1, 5, 5, 2), BP_GRID_NEAREST,
              BP_GRID_PAD_ZEROS, 1, 0, 0, 0, 1.0, 1, 0);
    grid_case(g, d, "special_bilinear", 0, S4(1, 2, 6, 6), S4(1, 5, 5, 2), BP_GRID_BILINEAR,
              BP_GRID_PAD_BORDER, 0, 0, 0, 0, 1.2, 1, 0);
    /* integral grid values land on pixel halves: nearest rounds half to even */
    for (uint32_t ac = 0; ac < 2 && wide; ac++) {
      grid_case(g, d, "nearest_half", (int)ac, S4(1, 2, 4, 2), S4(1, 3, 3, 2), BP_GRID_NEAREST,
                BP_GRID_PAD_ZEROS, ac, 0, 0, 0, 1.0, 0, BPC_V_INTEGRAL);
    }
    if (g->quick) continue;
    grid_case(g, d, "far", 0, S4(1, 2, 4, 3), S4(1, 6, 6, 2), BP_GRID_BILINEAR,
              BP_GRID_PAD_REFLECTION, 0, 0, 0, 0, 7.0, 0, 0);
    grid_case(g, d, "far", 1, S4(1, 2, 4, 3), S4(1, 6, 6, 2), BP_GRID_BICUBIC,
              BP_GRID_PAD_REFLECTION, 1, 0, 0, 0, 7.0, 0, 0);
    grid_case(g, d, "far", 2, S4(1, 1, 1, 5), S4(1, 3, 6, 2), BP_GRID_NEAREST,
              BP_GRID_PAD_REFLECTION, 1, 0, 0, 0, 4.0, 0, 0);
    grid_case(g, d, "strided", 0, S4(2, 3, 6, 5), S4(2, 3, 4, 2), BP_GRID_BILINEAR,
              BP_GRID_PAD_ZEROS, 0, BPC_LAYOUT_STRIDED, BPC_LAYOUT_STRIDED, BPC_LAYOUT_STRIDED, 1.1, 0, 0);
    grid_case(g, d, "transposed", 0, S4(2, 3, 6, 5), S4(2, 3, 4, 2), BP_GRID_BICUBIC,
              BP_GRID_PAD_BORDER, 1, BPC_LAYOUT_TRANSPOSED, BPC_LAYOUT_TRANSPOSED, BPC_LAYOUT_OFFSET, 1.1, 0, 0);
    grid_case(g, d, "offset", 0, S4(1, 4, 5, 5), S4(1, 3, 3, 2), BP_GRID_NEAREST,
              BP_GRID_PAD_BORDER, 0, BPC_LAYOUT_OFFSET, BPC_LAYOUT_OFFSET, BPC_LAYOUT_TRANSPOSED, 1.1, 0, 0);
    grid_case(g, d, "empty_grid", 0, S4(2, 3, 4, 4), S4(2, 0, 3, 2), BP_GRID_BILINEAR,
              BP_GRID_PAD_ZEROS, 0, 0, 0, 0, 1.0, 0, 0);
    grid_case(g, d, "empty_batch", 0, S4(0, 3, 4, 4), S4(0, 2, 3, 2), BP_GRID_BICUBIC,
              BP_GRID_PAD_ZEROS, 0, 0, 0, 0, 1.0, 0, 0);
  }
}

/* ---- upsampling ---------------------------------------------------------------- */
static void gen_upsample(bpc_gen_t* g) {
  int nearest = g->op == BP_OP_upsample_nearest2d;
  const struct {
    const char* axis;
    int variant;
    bpc_shape_t s;
    int64_t o[2];
    double sc[2];
    uint32_t ac;
    uint32_t lin, lout;
    int special, quick;
  } v[] = {
      {"size", 0, S4(2, 3, 5, 7), {11, 9}, {0, 0}, 0, 0, 0, 0, 1},
      {"size_ac", 0, S4(2, 3, 5, 7), {11, 9}, {0, 0}, 1, 0, 0, 0, 1},
      {"down", 0, S4(1, 2, 9, 8), {4, 3}, {0, 0}, 0, 0, 0, 0, 1},
      {"down_ac", 0, S4(1, 2, 9, 8), {4, 1}, {0, 0}, 1, 0, 0, 0, 0},
      {"same", 0, S4(1, 2, 4, 6), {4, 6}, {0, 0}, 0, 0, 0, 0, 0},
      {"double", 0, S4(1, 2, 4, 3), {8, 6}, {0, 0}, 0, 0, 0, 0, 0},
      {"scale", 0, S4(2, 2, 5, 6), {0, 0}, {2.0, 1.5}, 0, 0, 0, 0, 1},
      {"scale", 1, S4(1, 3, 7, 5), {0, 0}, {0.5, 2.7}, 0, 0, 0, 0, 0},
      {"scale", 2, S4(1, 2, 5, 5), {0, 0}, {2.1, 1.3}, 1, 0, 0, 0, 0},
      {"size_and_scale", 0, S4(1, 2, 5, 6), {9, 13}, {1.7, 2.3}, 0, 0, 0, 0, 0},
      {"size_and_scale", 1, S4(1, 2, 5, 5), {5, 10}, {1.5, 2.1}, 0, 0, 0, 0, 0},
      {"special", 0, S4(1, 2, 6, 6), {10, 9}, {0, 0}, 0, 0, 0, 1, 1},
      {"empty_batch", 0, S4(0, 2, 4, 4), {6, 6}, {0, 0}, 0, 0, 0, 0, 0},
      {"strided", 0, S4(2, 2, 6, 5), {9, 8}, {0, 0}, 1, BPC_LAYOUT_STRIDED, BPC_LAYOUT_STRIDED, 0, 1},
      {"transposed", 0, S4(2, 3, 4, 5), {7, 7}, {0, 0}, 0, BPC_LAYOUT_TRANSPOSED, BPC_LAYOUT_OFFSET, 0, 0},
      {"offset", 0, S4(1, 3, 5, 4), {3, 9}, {0, 0}, 0, BPC_LAYOUT_OFFSET, BPC_LAYOUT_TRANSPOSED, 0, 0},
      {"one_pixel", 0, S4(1, 2, 1, 1), {3, 4}, {0, 0}, 1, 0, 0, 0, 0},
  };
  static const uint32_t kNearest[] = {BP_DTYPE_F32, BP_DTYPE_F64, BP_DTYPE_F16, BP_DTYPE_BF16,
                                      BP_DTYPE_U8};
  const uint32_t* dts = nearest ? kNearest : kFloats;
  size_t nd = nearest ? COUNT(kNearest) : COUNT(kFloats);
  for (size_t t = 0; t < nd; t++) {
    uint32_t d = dts[t];
    int wide = d == BP_DTYPE_F32 || d == BP_DTYPE_F64;
    for (size_t j = 0; j < COUNT(v); j++) {
      if (g->quick && !v[j].quick) continue;
      if (!wide && !v[j].quick) continue;
      if (nearest && v[j].ac) continue;
      bpc_case_t* c = bpc_gen_new(g, bpc_dtype_name(d), v[j].axis, v[j].variant);
      if (!c) return;
      c->num_inputs = 1;
      uint32_t values = BPC_V_RANDOM;
      double lo = 0, hi = 0;
      if (v[j].special) {
        values = BPC_V_SPECIAL;
        if (!nearest) { lo = -1e4; hi = 1e4; } /* weights times inf are NaN: finite specials */
      }
      bpc_operand_set(&c->in[0], d, v[j].s, v[j].lin, values, lo, hi);
      bpc_operand_set(&c->out[0], BP_DTYPE_INVALID, S0(), v[j].lout, 0, 0, 0);
      c->has_attrs = 1;
      bp_upsample_attrs_t* a = &c->attrs.upsample;
      a->struct_size = sizeof *a;
      a->align_corners = v[j].ac;
      a->output_size[0] = v[j].o[0];
      a->output_size[1] = v[j].o[1];
      a->scale[0] = v[j].sc[0];
      a->scale[1] = v[j].sc[1];
      a->has_output_size = v[j].o[0] != 0 || v[j].o[1] != 0;
      a->has_scale = v[j].sc[0] != 0.0 || v[j].sc[1] != 0.0;
      bpc_gen_keep_if_valid(g, c);
    }
  }
}

void bpc_gen_pool(bpc_gen_t* g) {
  switch (g->op) {
    case BP_OP_adaptive_avg_pool:
    case BP_OP_adaptive_avg_pool2d_backward: gen_adaptive(g); break;
    case BP_OP_grid_sampler_2d: gen_grid(g); break;
    case BP_OP_upsample_bilinear2d:
    case BP_OP_upsample_nearest2d: gen_upsample(g); break;
    default: gen_pool(g); break;
  }
}
