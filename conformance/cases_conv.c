/* Case generators of the conv family: convolution, convolution_backward
 * (one table of geometries: 1-d, 2-d, 3-d, stride, padding, dilation,
 * groups, depthwise, 1x1, transposed with output_padding, empty batch (with
 * and without channels), layouts, special values) and col2im. */
#include <stdio.h>
#include <string.h>

#include "cases_internal.h"

void bpc_gen_conv(bpc_gen_t* g);
void bpc_gen_col2im(bpc_gen_t* g);

#define COUNT(a) (sizeof(a) / sizeof((a)[0]))
#define L_C BPC_LAYOUT_CONTIG
#define L_O BPC_LAYOUT_OFFSET
#define L_T BPC_LAYOUT_TRANSPOSED
#define L_S BPC_LAYOUT_STRIDED

static const uint32_t kFloats[] = {BP_DTYPE_F32, BP_DTYPE_F64, BP_DTYPE_F16, BP_DTYPE_BF16};

typedef struct conv_spec {
  const char* axis;
  uint32_t nsp;
  int64_t n, c, o, groups;
  int64_t in[3], k[3], s[3], p[3], d[3], op[3];
  int transposed, bias;
  uint32_t lx, lw, lb, ly; /* layouts: input (grad_output for backward), weight, bias, output */
  int special;             /* special values in the input */
  int quick;               /* in --quick runs; also the set run for f16 and bf16 */
} conv_spec_t;

/* Unset stride / dilation entries (0) mean 1. */
static const conv_spec_t kConv[] = {
    {"1d", 1, 2, 3, 4, 1, {11}, {3}, {1}, {0}, {1}, {0}, 0, 1, L_C, L_C, L_C, L_C, 0, 1},
    {"1d_stride_pad_dil", 1, 1, 4, 6, 1, {17}, {3}, {2}, {2}, {2}, {0}, 0, 1, L_C, L_C, L_C, L_C, 0, 0},
    {"2d", 2, 2, 3, 5, 1, {8, 9}, {3, 3}, {0}, {1, 1}, {0}, {0}, 0, 1, L_C, L_C, L_C, L_C, 0, 1},
    {"2d_stride_dil", 2, 1, 4, 3, 1, {11, 10}, {3, 2}, {2, 3}, {1, 0}, {1, 2}, {0}, 0, 1, L_C, L_C, L_C, L_C, 0, 0},
    {"groups", 2, 2, 6, 6, 3, {7, 7}, {3, 3}, {0}, {1, 1}, {0}, {0}, 0, 1, L_C, L_C, L_C, L_C, 0, 1},
    {"depthwise", 2, 1, 4, 8, 4, {6, 5}, {3, 3}, {2, 2}, {1, 1}, {0}, {0}, 0, 0, L_C, L_C, L_C, L_C, 0, 0},
    {"1x1", 2, 2, 16, 8, 1, {5, 6}, {1, 1}, {0}, {0}, {0}, {0}, 0, 1, L_C, L_C, L_C, L_C, 0, 1},
    /* one image, output channels in blocks of 16: a backend may split the
     * output channels over threads (the CPU plugin's oneDNN path does) */
    {"channel_split", 2, 1, 5, 48, 1, {9, 7}, {3, 3}, {0}, {1, 1}, {0}, {0}, 0, 1, L_C, L_C, L_C, L_C, 0, 0},
    {"1x1_stride", 2, 1, 5, 4, 1, {7, 7}, {1, 1}, {2, 2}, {0}, {0}, {0}, 0, 0, L_C, L_C, L_C, L_C, 0, 0},
    {"1x1_transposed_layout", 2, 2, 6, 4, 2, {4, 5}, {1, 1}, {0}, {0}, {0}, {0}, 0, 1, L_T, L_C, L_C, L_T, 0, 0},
    {"3d", 3, 1, 2, 3, 1, {5, 6, 4}, {2, 3, 2}, {1, 2, 1}, {1, 0, 1}, {0}, {0}, 0, 1, L_C, L_C, L_C, L_C, 0, 1},
    {"no_bias", 2, 2, 3, 4, 1, {6, 6}, {2, 2}, {0}, {0}, {0}, {0}, 0, 0, L_C, L_C, L_C, L_C, 0, 0},
    {"long_k", 2, 1, 64, 4, 1, {5, 5}, {3, 3}, {0}, {1, 1}, {0}, {0}, 0, 1, L_C, L_C, L_C, L_C, 0, 1},
    /* over 1024 output positions: the CPU extracts columns in chunks */
    {"large_image", 2, 1, 64, 2, 1, {38, 38}, {3, 3}, {0}, {0}, {0}, {0}, 0, 1, L_C, L_C, L_C, L_C, 0, 0},
    {"strided", 2, 2, 3, 5, 1, {8, 7}, {3, 3}, {0}, {1, 1}, {0}, {0}, 0, 1, L_S, L_T, L_S, L_S, 0, 1},
    {"offset", 2, 2, 4, 3, 1, {6, 7}, {3, 2}, {1, 2}, {1, 1}, {0}, {0}, 0, 1, L_O, L_O, L_O, L_O, 0, 0},
    {"special", 2, 1, 3, 4, 1, {6, 6}, {3, 3}, {0}, {1, 1}, {0}, {0}, 0, 1, L_C, L_C, L_C, L_C, 1, 1},
    {"empty_batch", 2, 0, 3, 4, 1, {5, 5}, {3, 3}, {0}, {1, 1}, {0}, {0}, 0, 1, L_C, L_C, L_C, L_C, 0, 0},
    {"empty_batch_zero_channels", 2, 0, 0, 3, 1, {4, 4}, {3, 3}, {0}, {0}, {0}, {0}, 0, 1, L_C, L_C, L_C, L_C, 0, 0},
    {"transposed_1d", 1, 2, 4, 3, 1, {7}, {3}, {2}, {1}, {0}, {1}, 1, 1, L_C, L_C, L_C, L_C, 0, 1},
    {"transposed_2d_groups", 2, 2, 4, 4, 2, {5, 4}, {3, 3}, {2, 1}, {1, 1}, {1, 2}, {1, 0}, 1, 1, L_C, L_C, L_C, L_C, 0, 1},
    {"transposed_3d", 3, 1, 3, 2, 1, {3, 4, 3}, {2, 2, 3}, {2, 1, 2}, {0, 1, 1}, {0}, {1, 0, 0}, 1, 0, L_C, L_C, L_C, L_C, 0, 0},
    {"transposed_layouts", 2, 2, 3, 4, 1, {4, 5}, {2, 3}, {2, 2}, {0, 1}, {0}, {0}, 1, 1, L_T, L_S, L_C, L_S, 0, 0},
    {"transposed_special", 2, 1, 3, 2, 1, {4, 4}, {3, 3}, {2, 2}, {1, 1}, {0}, {1, 1}, 1, 1, L_C, L_C, L_C, L_C, 1, 0},
};

static int64_t dflt1(int64_t v) { return v ? v : 1; }

/* Forward output spatial size of dim i. */
static int64_t conv_out_size(const conv_spec_t* s, uint32_t i) {
  int64_t ext = dflt1(s->d[i]) * (s->k[i] - 1) + 1;
  if (s->transposed) return (s->in[i] - 1) * dflt1(s->s[i]) - 2 * s->p[i] + ext + s->op[i];
  return (s->in[i] + 2 * s->p[i] - ext) / dflt1(s->s[i]) + 1;
}

static bpc_shape_t shape_nc(int64_t a, int64_t b, uint32_t nsp, const int64_t* sp) {
  bpc_shape_t r = S2(a, b);
  r.rank = 2 + nsp;
  for (uint32_t i = 0; i < nsp; i++) r.sizes[2 + i] = sp[i];
  return r;
}

static void conv_case(bpc_gen_t* g, uint32_t d, const conv_spec_t* s, uint32_t mask, int variant) {
  int backward = g->op == BP_OP_convolution_backward;
  bpc_case_t* c = bpc_gen_new(g, bpc_dtype_name(d), s->axis, variant);
  if (!c) return;
  int64_t out_sp[3];
  for (uint32_t i = 0; i < s->nsp; i++) out_sp[i] = conv_out_size(s, i);
  bpc_shape_t xs = shape_nc(s->n, s->c, s->nsp, s->in);
  bpc_shape_t ys = shape_nc(s->n, s->o, s->nsp, out_sp);
  bpc_shape_t ws = s->transposed ? shape_nc(s->c, s->o / s->groups, s->nsp, s->k)
                                 : shape_nc(s->o, s->groups ? s->c / s->groups : 0, s->nsp, s->k);
  uint32_t xv = BPC_V_RANDOM;
  double xlo = -1.0, xhi = 1.0;
  if (s->special) {
    xv = BPC_V_SPECIAL | BPC_V_NONFINITE;
    xlo = -100.0;
    xhi = 100.0;
  }
  if (!backward) {
    c->num_inputs = 3;
    bpc_operand_set(&c->in[0], d, xs, s->lx, xv, xlo, xhi);
    bpc_operand_set(&c->in[1], d, ws, s->lw, BPC_V_RANDOM, -1.0, 1.0);
    if (s->bias) bpc_operand_set(&c->in[2], d, S1(s->o), s->lb, BPC_V_RANDOM, -1.0, 1.0);
    bpc_operand_set(&c->out[0], BP_DTYPE_INVALID, S0(), s->ly, 0, 0, 0);
  } else {
    /* grad_output takes the input's layout slot, the input the bias's. */
    c->num_inputs = 3;
    c->num_outputs = 3;
    bpc_operand_set(&c->in[0], d, ys, s->lx, BPC_V_RANDOM, -1.0, 1.0);
    bpc_operand_set(&c->in[1], d, xs, s->lb, BPC_V_RANDOM, -1.0, 1.0);
    bpc_operand_set(&c->in[2], d, ws, s->lw, BPC_V_RANDOM, -1.0, 1.0);
    bpc_operand_set(&c->out[0], BP_DTYPE_INVALID, S0(), s->ly, 0, 0, 0);
    bpc_operand_set(&c->out[1], BP_DTYPE_INVALID, S0(), s->ly == L_S ? L_T : s->ly, 0, 0, 0);
    bpc_operand_set(&c->out[2], BP_DTYPE_INVALID, S0(), s->lb, 0, 0, 0);
  }
  c->has_attrs = 1;
  bp_conv_attrs_t* a = &c->attrs.conv;
  a->struct_size = sizeof *a;
  a->spatial_dims = variant == 1 ? 0 : s->nsp; /* variant 1: inferred from the weight */
  for (uint32_t i = 0; i < BP_MAX_SPATIAL; i++) {
    a->stride[i] = i < s->nsp ? dflt1(s->s[i]) : 1;
    a->padding[i] = i < s->nsp ? s->p[i] : 0;
    a->dilation[i] = i < s->nsp ? dflt1(s->d[i]) : 1;
    a->output_padding[i] = i < s->nsp ? s->op[i] : 0;
  }
  a->groups = s->groups;
  a->transposed = (uint32_t)s->transposed;
  a->output_mask = mask;
}

void bpc_gen_conv(bpc_gen_t* g) {
  int backward = g->op == BP_OP_convolution_backward;
  for (size_t t = 0; t < COUNT(kFloats); t++) {
    uint32_t d = kFloats[t];
    int half = d == BP_DTYPE_F16 || d == BP_DTYPE_BF16;
    for (size_t j = 0; j < COUNT(kConv); j++) {
      const conv_spec_t* s = &kConv[j];
      if ((g->quick || half) && !s->quick) continue;
      if (backward && s->special) continue; /* gradients of inf/NaN: nothing new */
      conv_case(g, d, s, 7, 0);
      if (d != BP_DTYPE_F32) continue;
      if (!backward && j == 0) conv_case(g, d, s, 7, 1);
      if (backward && !g->quick && (strcmp(s->axis, "2d") == 0 || strcmp(s->axis, "transposed_1d") == 0 ||
                                    strcmp(s->axis, "groups") == 0)) {
        /* output_mask subsets: one gradient at a time, and input+bias. */
        static const uint32_t masks[] = {1, 2, 4, 5};
        for (size_t m = 0; m < COUNT(masks); m++) conv_case(g, d, s, masks[m], 2 + (int)m);
      }
    }
  }
}

/* ---- col2im ---------------------------------------------------------------- */
typedef struct col2im_spec {
  const char* axis;
  int batched;
  int64_t n, c, out[2], k[2], s[2], p[2], d[2];
  uint32_t lin, lout;
  int quick;
} col2im_spec_t;

static const col2im_spec_t kCol2im[] = {
    {"overlap", 1, 2, 3, {6, 5}, {2, 2}, {1, 1}, {0, 0}, {1, 1}, L_C, L_C, 1},
    {"stride_pad_dil", 1, 1, 2, {9, 8}, {3, 2}, {2, 1}, {1, 2}, {2, 1}, L_C, L_C, 1},
    {"unbatched", 0, 1, 4, {5, 5}, {3, 3}, {1, 1}, {1, 1}, {1, 1}, L_C, L_C, 1},
    {"no_overlap", 1, 2, 2, {6, 6}, {2, 3}, {2, 3}, {0, 0}, {1, 1}, L_C, L_C, 0},
    {"1x1", 1, 1, 5, {4, 3}, {1, 1}, {1, 1}, {0, 0}, {1, 1}, L_C, L_C, 0},
    {"empty_batch", 1, 0, 3, {5, 4}, {2, 2}, {1, 1}, {0, 0}, {1, 1}, L_C, L_C, 0},
    {"strided", 1, 2, 2, {7, 6}, {3, 2}, {2, 2}, {1, 0}, {1, 1}, L_S, L_T, 1},
    {"offset", 0, 1, 3, {6, 7}, {2, 3}, {1, 2}, {1, 1}, {2, 1}, L_O, L_O, 0},
    {"transposed", 1, 1, 2, {5, 6}, {2, 2}, {1, 1}, {0, 1}, {1, 1}, L_T, L_S, 0},
};

void bpc_gen_col2im(bpc_gen_t* g) {
  for (size_t t = 0; t < COUNT(kFloats); t++) {
    uint32_t d = kFloats[t];
    int half = d == BP_DTYPE_F16 || d == BP_DTYPE_BF16;
    for (size_t j = 0; j < COUNT(kCol2im); j++) {
      const col2im_spec_t* s = &kCol2im[j];
      if ((g->quick || half) && !s->quick) continue;
      bpc_case_t* c = bpc_gen_new(g, bpc_dtype_name(d), s->axis, 0);
      if (!c) return;
      int64_t blocks = 1;
      for (int i = 0; i < 2; i++)
        blocks *= (s->out[i] + 2 * s->p[i] - s->d[i] * (s->k[i] - 1) - 1) / s->s[i] + 1;
      int64_t rows = s->c * s->k[0] * s->k[1];
      c->num_inputs = 1;
      bpc_operand_set(&c->in[0], d, s->batched ? S3(s->n, rows, blocks) : S2(rows, blocks), s->lin,
                      BPC_V_RANDOM, -1.0, 1.0);
      bpc_operand_set(&c->out[0], BP_DTYPE_INVALID, S0(), s->lout, 0, 0, 0);
      c->has_attrs = 1;
      bp_col2im_attrs_t* a = &c->attrs.col2im;
      a->struct_size = sizeof *a;
      for (int i = 0; i < 2; i++) {
        a->output_size[i] = s->out[i];
        a->kernel[i] = s->k[i];
        a->stride[i] = s->s[i];
        a->padding[i] = s->p[i];
        a->dilation[i] = s->d[i];
      }
    }
  }
}
