/* backplane core: inference rules of convolution, convolution_backward and
 * col2im (aten.convolution, aten.convolution_backward, aten.col2im).
 *
 * The checks and their order follow PyTorch's check_shape_forward and
 * col2im_shape_check; every size computation is overflow-checked, so absurd
 * attributes are an INVALID_ARGUMENT, never a wrapped size.
 */
#include <stdio.h>
#include <string.h>

#include "ops/ops_internal.h"

/* Convolution geometry of one call, shared by the forward and backward
 * rules. */
typedef struct bp__conv_shape {
  uint32_t nsp; /* spatial dims */
  uint32_t dtype;
  int64_t out[BP_MAX_RANK]; /* forward output shape, rank nsp + 2 */
  int64_t out_channels;     /* bias length */
} bp__conv_shape_t;

/* "(a, b, c)" of n values. */
static const char* bp__tuple_str(const int64_t* v, uint32_t n, char* buf, size_t cap) {
  size_t k = (size_t)snprintf(buf, cap, "(");
  for (uint32_t i = 0; i < n && k < cap; ++i) {
    k += (size_t)snprintf(buf + k, cap - k, "%s%lld", i ? ", " : "", (long long)v[i]);
  }
  if (k < cap) snprintf(buf + k, cap - k, ")");
  return buf;
}

static bp_status_t bp__conv_float(bp__infer_t* x, uint32_t i) {
  char n[64];
  uint32_t d = x->in[i].dtype;
  if (!bp__dtype_is_float(d)) {
    return bp__infer_fail(x,
                          "input '%s' has dtype %s; a floating dtype (f32, f64, f16, bf16) "
                          "is required",
                          bp__op_input_name(x->op, x->num_inputs, i, n), bp_dtype_name(d));
  }
  return BP_OK;
}

/* Same dtype as input `ref` (PyTorch: "Input type (...) and weight type
 * (...) should be the same"). */
static bp_status_t bp__conv_same_dtype(bp__infer_t* x, uint32_t ref, uint32_t i) {
  if (x->in[i].dtype != x->in[ref].dtype) {
    char n0[64], n1[64];
    return bp__infer_fail(
        x, "input '%s' has dtype %s and input '%s' has %s; they must be the same",
        bp__op_input_name(x->op, x->num_inputs, ref, n0), bp_dtype_name(x->in[ref].dtype),
        bp__op_input_name(x->op, x->num_inputs, i, n1), bp_dtype_name(x->in[i].dtype));
  }
  return BP_OK;
}

/* a*b and a+b into *r; nonzero on int64 overflow. */
static int bp__mul(int64_t a, int64_t b, int64_t* r) {
  return __builtin_mul_overflow(a, b, r);
}
static int bp__add(int64_t a, int64_t b, int64_t* r) {
  return __builtin_add_overflow(a, b, r);
}

/* Checks input `iin`, weight `iw` and optional bias `ib` (UINT32_MAX: none)
 * against the attributes; fills *g with the forward output shape. */
static bp_status_t bp__conv_forward_shape(bp__infer_t* x, uint32_t iin, uint32_t iw, uint32_t ib,
                                          bp__conv_shape_t* g) {
  const bp_conv_attrs_t* a = x->attrs;
  const bp_tensor_desc_t* in = &x->in[iin];
  const bp_tensor_desc_t* w = &x->in[iw];
  char n0[64], n1[64], s0[192], s1[192];
  bp_status_t st = bp__conv_float(x, iin);
  if (st == BP_OK) st = bp__conv_same_dtype(x, iin, iw);
  if (st == BP_OK && ib != UINT32_MAX && bp__in_present(x, ib))
    st = bp__conv_same_dtype(x, iin, ib);
  if (st != BP_OK) return st;
  if (w->rank < 3 || w->rank > 2 + BP_MAX_SPATIAL) {
    return bp__infer_fail(x,
                          "input '%s' must have 3, 4 or 5 dims (1-d, 2-d or 3-d convolution), "
                          "got shape %s",
                          bp__op_input_name(x->op, x->num_inputs, iw, n0),
                          bp__shape_str(w->rank, w->sizes, s0, sizeof(s0)));
  }
  uint32_t nsp = w->rank - 2;
  if (a->spatial_dims != 0 && a->spatial_dims != nsp) {
    return bp__infer_fail(x, "attrs.spatial_dims = %u but '%s' of shape %s has %u spatial dims",
                          a->spatial_dims, bp__op_input_name(x->op, x->num_inputs, iw, n0),
                          bp__shape_str(w->rank, w->sizes, s0, sizeof(s0)), nsp);
  }
  if (a->groups <= 0) {
    return bp__infer_fail(x, "attrs.groups = %lld; non-positive groups is not supported",
                          (long long)a->groups);
  }
  for (uint32_t d = 0; d < nsp; ++d) {
    if (a->padding[d] < 0) {
      return bp__infer_fail(x, "attrs.padding[%u] = %lld; negative padding is not supported", d,
                            (long long)a->padding[d]);
    }
    if (a->output_padding[d] < 0) {
      return bp__infer_fail(x,
                            "attrs.output_padding[%u] = %lld; negative output_padding is not "
                            "supported",
                            d, (long long)a->output_padding[d]);
    }
    if (a->stride[d] <= 0) {
      return bp__infer_fail(x, "attrs.stride[%u] = %lld; non-positive stride is not supported", d,
                            (long long)a->stride[d]);
    }
    if (a->dilation[d] <= 0) {
      return bp__infer_fail(x, "attrs.dilation[%u] = %lld; dilation should be greater than zero", d,
                            (long long)a->dilation[d]);
    }
  }
  for (uint32_t d = 0; d < nsp; ++d) {
    if (w->sizes[d + 2] <= 0) {
      return bp__infer_fail(x, "kernel size should be greater than zero, but got weight of size %s",
                            bp__shape_str(w->rank, w->sizes, s0, sizeof(s0)));
    }
  }
  if (in->rank != w->rank) {
    return bp__infer_fail(x,
                          "expected %u-dimensional input for %u-dimensional weight %s, but got "
                          "%u-dimensional input of size %s instead",
                          w->rank, w->rank, bp__shape_str(w->rank, w->sizes, s0, sizeof(s0)),
                          in->rank, bp__shape_str(in->rank, in->sizes, s1, sizeof(s1)));
  }
  int64_t groups = a->groups;
  if (w->sizes[0] < groups) {
    return bp__infer_fail(x,
                          "given groups=%lld, expected weight to be at least %lld at dimension "
                          "0, but got weight of size %s instead",
                          (long long)groups, (long long)groups,
                          bp__shape_str(w->rank, w->sizes, s0, sizeof(s0)));
  }
  if (w->sizes[0] % groups != 0) {
    return bp__infer_fail(x,
                          "given groups=%lld, expected weight to be divisible by %lld at "
                          "dimension 0, but got weight of size %s instead",
                          (long long)groups, (long long)groups,
                          bp__shape_str(w->rank, w->sizes, s0, sizeof(s0)));
  }
  int64_t out_channels, in_channels;
  if (!a->transposed) {
    out_channels = w->sizes[0];
    if (bp__mul(w->sizes[1], groups, &in_channels)) in_channels = -1;
  } else {
    in_channels = w->sizes[0];
    if (bp__mul(w->sizes[1], groups, &out_channels)) {
      return bp__infer_fail(x, "weight size %lld times groups %lld overflows",
                            (long long)w->sizes[1], (long long)groups);
    }
  }
  if (in->sizes[1] != in_channels) {
    return bp__infer_fail(x,
                          "given groups=%lld, %sweight of size %s, expected input %s to have "
                          "%lld channels, but got %lld channels instead",
                          (long long)groups, a->transposed ? "transposed=1, " : "",
                          bp__shape_str(w->rank, w->sizes, s0, sizeof(s0)),
                          bp__shape_str(in->rank, in->sizes, s1, sizeof(s1)),
                          (long long)in_channels, (long long)in->sizes[1]);
  }
  if (ib != UINT32_MAX && bp__in_present(x, ib)) {
    const bp_tensor_desc_t* b = &x->in[ib];
    if (b->rank != 1 || b->sizes[0] != out_channels) {
      return bp__infer_fail(x,
                            "given weight of size %s, expected '%s' to be 1-dimensional with "
                            "%lld elements, but got shape %s instead",
                            bp__shape_str(w->rank, w->sizes, s0, sizeof(s0)),
                            bp__op_input_name(x->op, x->num_inputs, ib, n1),
                            (long long)out_channels,
                            bp__shape_str(b->rank, b->sizes, s1, sizeof(s1)));
    }
  }
  /* PyTorch sends inputs with a zero batch or zero channels to its "empty"
   * path, which can only produce an empty output, and rejects other empty
   * inputs. */
  int empty_spatial = 0;
  for (uint32_t d = 0; d < nsp; ++d) empty_spatial |= in->sizes[d + 2] == 0;
  if (in->sizes[0] != 0 && in->sizes[1] != 0 && empty_spatial) {
    return bp__infer_fail(x,
                          "only zero batch or zero channel inputs are supported, but got input "
                          "shape %s",
                          bp__shape_str(in->rank, in->sizes, s0, sizeof(s0)));
  }
  if (in->sizes[0] != 0 && in->sizes[1] == 0 && out_channels != 0) {
    return bp__infer_fail(x,
                          "input of shape %s has no channels: only an empty output (batch 0 "
                          "or 0 output channels) is defined",
                          bp__shape_str(in->rank, in->sizes, s0, sizeof(s0)));
  }
  g->nsp = nsp;
  g->dtype = in->dtype;
  g->out_channels = out_channels;
  g->out[0] = in->sizes[0];
  g->out[1] = out_channels;
  int64_t padded[BP_MAX_SPATIAL], kernel[BP_MAX_SPATIAL], outs[BP_MAX_SPATIAL];
  int too_small = 0, overflow = 0;
  for (uint32_t d = 0; d < nsp; ++d) {
    int64_t i = in->sizes[d + 2], k = w->sizes[d + 2], t;
    /* Extent of the dilated kernel: dilation * (k - 1) + 1. */
    overflow |= bp__mul(a->dilation[d], k - 1, &t) || bp__add(t, 1, &kernel[d]);
    overflow |= bp__mul(a->padding[d], 2, &t) || bp__add(i, t, &padded[d]);
    if (overflow) break;
    if (!a->transposed) {
      /* (in + 2p - dilated kernel) / stride + 1 */
      outs[d] = padded[d] < kernel[d] ? 0 : (padded[d] - kernel[d]) / a->stride[d] + 1;
      too_small |= padded[d] < kernel[d];
    } else {
      /* (in - 1) * stride - 2p + dilated kernel + output_padding */
      int64_t o;
      overflow |= bp__mul(i - 1, a->stride[d], &o) || bp__mul(a->padding[d], 2, &t) ||
                  __builtin_sub_overflow(o, t, &o) || bp__add(o, kernel[d], &o) ||
                  bp__add(o, a->output_padding[d], &o);
      outs[d] = o;
      too_small |= o < 1;
      if (a->output_padding[d] >= a->stride[d] && a->output_padding[d] >= a->dilation[d]) {
        return bp__infer_fail(x,
                              "output padding must be smaller than either stride or dilation, "
                              "but got output_padding[%u] = %lld, stride[%u] = %lld, "
                              "dilation[%u] = %lld",
                              d, (long long)a->output_padding[d], d, (long long)a->stride[d], d,
                              (long long)a->dilation[d]);
      }
    }
  }
  if (overflow) return bp__infer_fail(x, "the attributes make an output size overflow int64");
  if (too_small && !a->transposed) {
    return bp__infer_fail(x,
                          "calculated padded input size per channel: %s. Kernel size: %s. "
                          "Kernel size can't be greater than actual input size",
                          bp__tuple_str(padded, nsp, s0, sizeof(s0)),
                          bp__tuple_str(kernel, nsp, s1, sizeof(s1)));
  }
  if (too_small) {
    return bp__infer_fail(x,
                          "given input size per channel: %s. Calculated output size per "
                          "channel: %s. Output size is too small",
                          bp__tuple_str(in->sizes + 2, nsp, s0, sizeof(s0)),
                          bp__tuple_str(outs, nsp, s1, sizeof(s1)));
  }
  memcpy(g->out + 2, outs, sizeof(int64_t) * nsp);
  return BP_OK;
}

/* convolution(input [N, C, *], weight, bias?) -> [N, O, *out]. */
bp_status_t bp__infer_convolution(bp__infer_t* x) {
  bp__conv_shape_t g;
  bp_status_t st = bp__conv_forward_shape(x, 0, 1, 2, &g);
  if (st != BP_OK) return st;
  x->compute_dtype = g.dtype;
  return bp__infer_set_out(x, 0, g.dtype, g.nsp + 2, g.out);
}

/* convolution_backward(grad_output, input, weight) -> grad_input (input's
 * shape), grad_weight (weight's shape), grad_bias [O]; an output whose
 * output_mask bit is clear is [0]. grad_output must have the forward
 * output's shape. */
bp_status_t bp__infer_convolution_backward(bp__infer_t* x) {
  bp__conv_shape_t g;
  bp_status_t st = bp__conv_forward_shape(x, 1, 2, UINT32_MAX, &g);
  if (st == BP_OK) st = bp__conv_same_dtype(x, 1, 0);
  if (st != BP_OK) return st;
  const bp_conv_attrs_t* a = x->attrs;
  if (a->output_mask > 7) {
    return bp__infer_fail(x,
                          "attrs.output_mask = %u; only bits 0 (grad_input), 1 (grad_weight) "
                          "and 2 (grad_bias) exist",
                          a->output_mask);
  }
  const bp_tensor_desc_t* go = &x->in[0];
  if (!bp__shape_equal(go->rank, go->sizes, g.nsp + 2, g.out)) {
    char s0[192], s1[192];
    return bp__infer_fail(x,
                          "input 'grad_output' has shape %s; the convolution's output has "
                          "shape %s",
                          bp__shape_str(go->rank, go->sizes, s0, sizeof(s0)),
                          bp__shape_str(g.nsp + 2, g.out, s1, sizeof(s1)));
  }
  /* An output whose output_mask bit is clear is [0] (PyTorch returns an
   * undefined tensor there). */
  static const int64_t zero[1] = {0};
  uint32_t m = a->output_mask;
  x->compute_dtype = g.dtype;
  st = (m & 1u) ? bp__infer_set_out(x, 0, g.dtype, x->in[1].rank, x->in[1].sizes)
                : bp__infer_set_out(x, 0, g.dtype, 1, zero);
  if (st == BP_OK) {
    st = (m & 2u) ? bp__infer_set_out(x, 1, g.dtype, x->in[2].rank, x->in[2].sizes)
                  : bp__infer_set_out(x, 1, g.dtype, 1, zero);
  }
  if (st == BP_OK) {
    st = (m & 4u) ? bp__infer_set_out(x, 2, g.dtype, 1, &g.out_channels)
                  : bp__infer_set_out(x, 2, g.dtype, 1, zero);
  }
  return st;
}

/* Floor division (PyTorch div_rtn) for a positive divisor. */
static int64_t bp__div_floor(int64_t a, int64_t b) {
  int64_t q = a / b;
  return (a % b != 0 && a < 0) ? q - 1 : q;
}

/* col2im(self [N, C*kh*kw, L] or [C*kh*kw, L]) -> [N, C, oh, ow] or
 * [C, oh, ow]. */
bp_status_t bp__infer_col2im(bp__infer_t* x) {
  const bp_col2im_attrs_t* a = x->attrs;
  const bp_tensor_desc_t* in = &x->in[0];
  char s0[192], s1[192], s2[192], s3[192], s4[192];
  bp_status_t st = bp__conv_float(x, 0);
  if (st != BP_OK) return st;
  const int64_t *k = a->kernel, *s = a->stride, *d = a->dilation, *p = a->padding,
                *o = a->output_size;
  if (k[0] <= 0 || k[1] <= 0) {
    return bp__infer_fail(x, "kernel size should be greater than zero, but got kernel %s",
                          bp__tuple_str(k, 2, s0, sizeof(s0)));
  }
  if (s[0] <= 0 || s[1] <= 0) {
    return bp__infer_fail(x, "stride should be greater than zero, but got stride %s",
                          bp__tuple_str(s, 2, s0, sizeof(s0)));
  }
  if (d[0] <= 0 || d[1] <= 0) {
    return bp__infer_fail(x, "dilation should be greater than zero, but got dilation %s",
                          bp__tuple_str(d, 2, s0, sizeof(s0)));
  }
  if (p[0] < 0 || p[1] < 0) {
    return bp__infer_fail(x, "padding should be non-negative, but got padding %s",
                          bp__tuple_str(p, 2, s0, sizeof(s0)));
  }
  int batched = in->rank == 3;
  if (!((in->rank == 2 && in->sizes[0] != 0 && in->sizes[1] != 0) ||
        (batched && in->sizes[1] != 0 && in->sizes[2] != 0))) {
    return bp__infer_fail(x,
                          "expected a 2-d or 3-d (batch mode) input with possibly 0 batch size "
                          "and non-zero other dims, but got shape %s",
                          bp__shape_str(in->rank, in->sizes, s0, sizeof(s0)));
  }
  int64_t planes = in->sizes[batched], length = in->sizes[batched + 1], kk, blocks[2];
  int overflow = bp__mul(k[0], k[1], &kk);
  for (int j = 0; j < 2 && !overflow; ++j) {
    int64_t t, u, v;
    overflow |= bp__mul(p[j], 2, &t) || bp__add(o[j], t, &t) || bp__mul(d[j], k[j] - 1, &u) ||
                __builtin_sub_overflow(t, u, &v) || __builtin_sub_overflow(v, 1, &v);
    if (!overflow) blocks[j] = bp__div_floor(v, s[j]) + 1;
  }
  int64_t nblocks = 0;
  if (!overflow) overflow = bp__mul(blocks[0], blocks[1], &nblocks);
  if (overflow) return bp__infer_fail(x, "the attributes make a size overflow int64");
  if (planes % kk != 0) {
    return bp__infer_fail(x,
                          "expected size of input's dimension %d to be divisible by the "
                          "product of kernel_size, but got input.size(%d)=%lld and kernel_size=%s",
                          batched, batched, (long long)planes, bp__tuple_str(k, 2, s0, sizeof(s0)));
  }
  if (length != nblocks || blocks[0] < 1 || blocks[1] < 1 || o[0] < 1 || o[1] < 1) {
    bp__tuple_str(o, 2, s0, sizeof(s0));
    bp__tuple_str(k, 2, s1, sizeof(s1));
    bp__tuple_str(d, 2, s2, sizeof(s2));
    bp__tuple_str(p, 2, s3, sizeof(s3));
    bp__tuple_str(s, 2, s4, sizeof(s4));
    if (length != nblocks) {
      return bp__infer_fail(x,
                            "given output_size=%s, kernel_size=%s, dilation=%s, padding=%s, "
                            "stride=%s, expected size of input's dimension %d to match the "
                            "calculated number of sliding blocks %lld * %lld = %lld, but got "
                            "input.size(%d)=%lld",
                            s0, s1, s2, s3, s4, batched + 1, (long long)blocks[0],
                            (long long)blocks[1], (long long)nblocks, batched + 1,
                            (long long)length);
    }
    if (blocks[0] < 1 || blocks[1] < 1) {
      return bp__infer_fail(x,
                            "given output_size=%s, kernel_size=%s, dilation=%s, padding=%s, "
                            "stride=%s, calculated shape of the array of sliding blocks as "
                            "(%lld, %lld), which is too small (non-positive)",
                            s0, s1, s2, s3, s4, (long long)blocks[0], (long long)blocks[1]);
    }
    return bp__infer_fail(x,
                          "expected output spatial size to be positive, but got "
                          "output_size=%s",
                          s0);
  }
  int64_t sizes[4];
  uint32_t r = 0;
  if (batched) sizes[r++] = in->sizes[0];
  sizes[r++] = planes / kk;
  sizes[r++] = o[0];
  sizes[r++] = o[1];
  x->compute_dtype = in->dtype;
  return bp__infer_set_out(x, 0, in->dtype, r, sizes);
}
