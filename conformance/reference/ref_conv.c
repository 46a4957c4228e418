/* References of the conv family: convolution, convolution_backward and
 * col2im. Plain fp64 loops over dense inputs, written as the definition:
 *
 *   convolution      out[n, o, y] = bias[o] + sum_{c, k} in[n, c, x] * w[o, c, k]
 *                    with x = y * stride - padding + k * dilation inside the
 *                    input (c over o's group);
 *   transposed       out[n, o, x] = bias[o] + sum_{c, k} in[n, c, y] * w[c, o, k]
 *                    over the same relation with the roles of x and y swapped;
 *   backward         every term t = in * w of the forward sum contributes
 *                    dout * w to grad_input, dout * in to grad_weight; dout
 *                    summed over batch and space is grad_bias;
 *   col2im           out[n, c, x] = sum of the column entries whose kernel
 *                    position and block put them at x.
 *
 * Each output element records its number of terms (nterms) and the sum of
 * their magnitudes (mag) for the REDUCE-class bound.
 */
#include <math.h>
#include <string.h>

#include "ref.h"

void bpc_gen_conv(struct bpc_gen* g);
void bpc_gen_col2im(struct bpc_gen* g);

enum { RSP = 3 };

/* One convolution: input [N, C, in...], weight, output [N, O, out...]. */
typedef struct rconv {
  uint32_t nsp;
  int transposed;
  int64_t n, c, o, groups, cg, og;
  int64_t in[RSP], out[RSP], k[RSP], s[RSP], p[RSP], d[RSP];
  int64_t in_n, out_n, kk;
} rconv_t;

static int is_conv_dtype(uint32_t d) {
  return d == BP_DTYPE_F32 || d == BP_DTYPE_F64 || d == BP_DTYPE_F16 || d == BP_DTYPE_BF16;
}

/* Geometry of a valid convolution, or a rejection. */
static bp_status_t rconv_make(const bp_conv_attrs_t* a, const bpc_host_tensor_t* x,
                              const bpc_host_tensor_t* w, const bpc_host_tensor_t* b, rconv_t* g,
                              bpc_ref_result_t* res) {
  memset(g, 0, sizeof *g);
  if (!is_conv_dtype(x->dtype) || w->dtype != x->dtype ||
      (b && b->dtype != BP_DTYPE_INVALID && b->dtype != x->dtype))
    return bpc_ref_reject(res, "conv: operands must share one floating dtype");
  if (w->rank < 3 || w->rank > 5 || x->rank != w->rank)
    return bpc_ref_reject(res, "conv: input and weight must both be [N, C, 1..3 spatial dims]");
  g->nsp = w->rank - 2;
  if (a->spatial_dims != 0 && a->spatial_dims != g->nsp)
    return bpc_ref_reject(res, "conv: spatial_dims");
  g->transposed = a->transposed != 0;
  g->groups = a->groups;
  if (g->groups <= 0 || w->sizes[0] % g->groups != 0) return bpc_ref_reject(res, "conv: groups");
  g->n = x->sizes[0];
  g->c = x->sizes[1];
  if (!g->transposed) {
    g->o = w->sizes[0];
    g->cg = w->sizes[1];
    g->og = g->o / g->groups;
    if (g->c != g->cg * g->groups) return bpc_ref_reject(res, "conv: input channels");
  } else {
    g->og = w->sizes[1];
    g->o = g->og * g->groups;
    g->cg = g->c / g->groups;
    if (g->c != w->sizes[0]) return bpc_ref_reject(res, "conv: input channels");
  }
  if (b && b->dtype != BP_DTYPE_INVALID && (b->rank != 1 || b->sizes[0] != g->o))
    return bpc_ref_reject(res, "conv: bias must be [O]");
  int empty_spatial = 0;
  for (uint32_t j = 0; j < g->nsp; j++) empty_spatial |= x->sizes[2 + j] == 0;
  if (g->n != 0 && (g->c == 0 ? g->o != 0 : empty_spatial))
    return bpc_ref_reject(res,
                          "conv: an empty input needs a zero batch (or zero channels and outputs)");
  g->in_n = g->out_n = g->kk = 1;
  for (uint32_t i = 0; i < RSP; i++) {
    int real = i >= RSP - g->nsp;
    uint32_t j = i - (RSP - g->nsp);
    g->in[i] = real ? x->sizes[2 + j] : 1;
    g->k[i] = real ? w->sizes[2 + j] : 1;
    g->s[i] = real ? a->stride[j] : 1;
    g->p[i] = real ? a->padding[j] : 0;
    g->d[i] = real ? a->dilation[j] : 1;
    int64_t op = real ? a->output_padding[j] : 0;
    if (g->s[i] < 1 || g->d[i] < 1 || g->p[i] < 0 || op < 0 || g->k[i] < 1)
      return bpc_ref_reject(res, "conv: kernel/stride/dilation/padding out of range");
    int64_t ext = g->d[i] * (g->k[i] - 1) + 1;
    if (!g->transposed) {
      if (g->in[i] + 2 * g->p[i] < ext)
        return bpc_ref_reject(res, "conv: kernel larger than the padded input");
      g->out[i] = (g->in[i] + 2 * g->p[i] - ext) / g->s[i] + 1;
    } else {
      if (op >= g->s[i] && op >= g->d[i])
        return bpc_ref_reject(res, "conv: output_padding too large");
      g->out[i] = (g->in[i] - 1) * g->s[i] - 2 * g->p[i] + ext + op;
      if (g->out[i] < 1) return bpc_ref_reject(res, "conv: output size too small");
    }
    g->in_n *= g->in[i];
    g->out_n *= g->out[i];
    g->kk *= g->k[i];
  }
  return BP_OK;
}

static void rconv_out_shape(const rconv_t* g, int64_t* sizes) {
  sizes[0] = g->n;
  sizes[1] = g->o;
  for (uint32_t j = 0; j < g->nsp; j++) sizes[2 + j] = g->out[RSP - g->nsp + j];
}

/* Calls fn for every term of the forward sums: flat indices of the input
 * element, the weight element and the output element it multiplies into. */
typedef void (*rconv_term_fn)(void* ctx, int64_t xi, int64_t wi, int64_t yi);

static void rconv_terms(const rconv_t* g, rconv_term_fn fn, void* ctx) {
  /* "small" positions q run over the side the kernel is anchored on (the
   * output of a convolution, the input of a transposed one); the big
   * position is q * s - p + k * d. */
  const int64_t* small = g->transposed ? g->in : g->out;
  const int64_t* big = g->transposed ? g->out : g->in;
  int64_t small_n = g->transposed ? g->in_n : g->out_n;
  for (int64_t n = 0; n < g->n; n++)
    for (int64_t grp = 0; grp < g->groups; grp++)
      for (int64_t ci = 0; ci < g->cg; ci++)
        for (int64_t oi = 0; oi < g->og; oi++)
          for (int64_t q = 0; q < small_n; q++)
            for (int64_t kp = 0; kp < g->kk; kp++) {
              int64_t qi[RSP], ki[RSP], big_lin = 0, ok = 1;
              int64_t qr = q, kr = kp;
              for (int i = RSP - 1; i >= 0; i--) {
                qi[i] = qr % small[i];
                qr /= small[i];
                ki[i] = kr % g->k[i];
                kr /= g->k[i];
              }
              for (int i = 0; i < RSP; i++) {
                int64_t pos = qi[i] * g->s[i] - g->p[i] + ki[i] * g->d[i];
                ok &= pos >= 0 && pos < big[i];
                big_lin = big_lin * big[i] + pos;
              }
              if (!ok) continue;
              int64_t c = grp * g->cg + ci, o = grp * g->og + oi;
              int64_t xi, wi, yi;
              if (!g->transposed) {
                xi = (n * g->c + c) * g->in_n + big_lin;
                wi = (o * g->cg + ci) * g->kk + kp;
                yi = (n * g->o + o) * g->out_n + q;
              } else {
                xi = (n * g->c + c) * g->in_n + q;
                wi = (c * g->og + oi) * g->kk + kp;
                yi = (n * g->o + o) * g->out_n + big_lin;
              }
              fn(ctx, xi, wi, yi);
            }
}

/* Accumulates value into expected element i (sum, |terms|, count). */
static void acc(bpc_expected_t* e, int64_t i, double v) {
  e->f[i] += v;
  e->mag[i] += fabs(v);
  e->nterms[i] += 1.0;
}

typedef struct fwd_ctx {
  const bpc_host_tensor_t *x, *w;
  bpc_expected_t* y;
} fwd_ctx_t;

static void fwd_term(void* ctx, int64_t xi, int64_t wi, int64_t yi) {
  fwd_ctx_t* f = ctx;
  acc(f->y, yi, bpc_load(f->x->dtype, f->x->data, xi).f * bpc_load(f->w->dtype, f->w->data, wi).f);
}

static bp_status_t ref_convolution(const bpc_case_t* c, const bpc_host_tensor_t* in,
                                   bpc_ref_result_t* res) {
  const bpc_host_tensor_t *x = &in[0], *w = &in[1], *b = &in[2];
  rconv_t g;
  bp_status_t st = rconv_make(&c->attrs.conv, x, w, b, &g, res);
  if (st != BP_OK) return st;
  int64_t sizes[BP_MAX_RANK];
  rconv_out_shape(&g, sizes);
  st = bpc_ref_single_output(res, x->dtype, g.nsp + 2, sizes, 1, x->dtype);
  if (st != BP_OK) return st;
  bpc_expected_t* y = &res->out[0];
  if (b->dtype != BP_DTYPE_INVALID) {
    for (int64_t i = 0; i < y->numel; i++)
      acc(y, i, bpc_load(b->dtype, b->data, (i / g.out_n) % g.o).f);
  }
  fwd_ctx_t f = {x, w, y};
  rconv_terms(&g, fwd_term, &f);
  return BP_OK;
}

typedef struct bwd_ctx {
  const bpc_host_tensor_t *dy, *x, *w;
  bpc_expected_t *dx, *dw; /* NULL when not requested */
} bwd_ctx_t;

static void bwd_term(void* ctx, int64_t xi, int64_t wi, int64_t yi) {
  bwd_ctx_t* b = ctx;
  double dy = bpc_load(b->dy->dtype, b->dy->data, yi).f;
  if (b->dx) acc(b->dx, xi, dy * bpc_load(b->w->dtype, b->w->data, wi).f);
  if (b->dw) acc(b->dw, wi, dy * bpc_load(b->x->dtype, b->x->data, xi).f);
}

/* Outputs not requested by output_mask are [0] (PyTorch: undefined). */
static bp_status_t ref_convolution_backward(const bpc_case_t* c, const bpc_host_tensor_t* in,
                                            bpc_ref_result_t* res) {
  const bp_conv_attrs_t* a = &c->attrs.conv;
  const bpc_host_tensor_t *dy = &in[0], *x = &in[1], *w = &in[2];
  rconv_t g;
  bp_status_t st = rconv_make(a, x, w, NULL, &g, res);
  if (st != BP_OK) return st;
  int64_t ysz[BP_MAX_RANK];
  rconv_out_shape(&g, ysz);
  if (dy->dtype != x->dtype || dy->rank != g.nsp + 2 ||
      memcmp(dy->sizes, ysz, sizeof(int64_t) * dy->rank) != 0 || a->output_mask > 7)
    return bpc_ref_reject(
        res, "convolution_backward: grad_output must have the output's shape and dtype");
  static const int64_t zero[1] = {0};
  uint32_t m = a->output_mask;
  res->num_outputs = 3;
  res->compute_dtype = x->dtype;
  st = bpc_expected_init(&res->out[0], x->dtype, (m & 1u) ? x->rank : 1, (m & 1u) ? x->sizes : zero,
                         1);
  if (st == BP_OK)
    st = bpc_expected_init(&res->out[1], x->dtype, (m & 2u) ? w->rank : 1,
                           (m & 2u) ? w->sizes : zero, 1);
  if (st == BP_OK) st = bpc_expected_init(&res->out[2], x->dtype, 1, (m & 4u) ? &g.o : zero, 1);
  if (st != BP_OK) return st;
  bwd_ctx_t b = {dy, x, w, (m & 1u) ? &res->out[0] : NULL, (m & 2u) ? &res->out[1] : NULL};
  if (b.dx || b.dw) rconv_terms(&g, bwd_term, &b);
  if (m & 4u) {
    for (int64_t i = 0; i < dy->numel; i++)
      acc(&res->out[2], (i / g.out_n) % g.o, bpc_load(dy->dtype, dy->data, i).f);
  }
  return BP_OK;
}

/* col2im(self [N?, C * kh * kw, L]) -> [N?, C, oh, ow]. */
static bp_status_t ref_col2im(const bpc_case_t* c, const bpc_host_tensor_t* in,
                              bpc_ref_result_t* res) {
  const bp_col2im_attrs_t* a = &c->attrs.col2im;
  const bpc_host_tensor_t* x = &in[0];
  if (!is_conv_dtype(x->dtype) || (x->rank != 2 && x->rank != 3))
    return bpc_ref_reject(res, "col2im: a floating 2-d or 3-d input is required");
  int batched = x->rank == 3;
  int64_t blocks[2];
  for (int j = 0; j < 2; j++) {
    if (a->kernel[j] < 1 || a->stride[j] < 1 || a->dilation[j] < 1 || a->padding[j] < 0 ||
        a->output_size[j] < 1)
      return bpc_ref_reject(res, "col2im: attributes out of range");
    int64_t span = a->output_size[j] + 2 * a->padding[j] - a->dilation[j] * (a->kernel[j] - 1) - 1;
    if (span < 0) return bpc_ref_reject(res, "col2im: no sliding block fits");
    blocks[j] = span / a->stride[j] + 1;
  }
  int64_t kk = a->kernel[0] * a->kernel[1];
  int64_t n = batched ? x->sizes[0] : 1, rows = x->sizes[batched], len = x->sizes[batched + 1];
  if (rows == 0 || rows % kk != 0 || len != blocks[0] * blocks[1])
    return bpc_ref_reject(res, "col2im: input does not match the attributes");
  int64_t ch = rows / kk, oh = a->output_size[0], ow = a->output_size[1];
  int64_t sizes[4] = {n, ch, oh, ow};
  bp_status_t st = bpc_ref_single_output(res, x->dtype, batched ? 4 : 3,
                                         batched ? sizes : sizes + 1, 1, x->dtype);
  if (st != BP_OK) return st;
  bpc_expected_t* e = &res->out[0];
  for (int64_t b = 0; b < n; b++)
    for (int64_t cc = 0; cc < ch; cc++)
      for (int64_t ki = 0; ki < a->kernel[0]; ki++)
        for (int64_t kj = 0; kj < a->kernel[1]; kj++)
          for (int64_t bh = 0; bh < blocks[0]; bh++)
            for (int64_t bw = 0; bw < blocks[1]; bw++) {
              int64_t yy = bh * a->stride[0] - a->padding[0] + ki * a->dilation[0];
              int64_t xx = bw * a->stride[1] - a->padding[1] + kj * a->dilation[1];
              if (yy < 0 || yy >= oh || xx < 0 || xx >= ow) continue;
              int64_t src =
                  ((b * ch + cc) * kk + ki * a->kernel[1] + kj) * len + bh * blocks[1] + bw;
              acc(e, ((b * ch + cc) * oh + yy) * ow + xx, bpc_load(x->dtype, x->data, src).f);
            }
  return BP_OK;
}

static const bpc_ref_group_t k_groups[] = {
    {ref_convolution, BPC_ACC_REDUCE, 0, BPC_OPS(BP_OP_convolution), bpc_gen_conv, NULL},
    {ref_convolution_backward, BPC_ACC_REDUCE, 0, BPC_OPS(BP_OP_convolution_backward), bpc_gen_conv,
     NULL},
    {ref_col2im, BPC_ACC_REDUCE, 0, BPC_OPS(BP_OP_col2im), bpc_gen_col2im, NULL},
};

const bpc_ref_family_t bpc_ref_family_conv = BPC_FAMILY(conv, k_groups);
