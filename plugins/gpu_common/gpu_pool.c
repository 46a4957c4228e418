/* backplane gpu_common: avg_pool, max_pool_with_indices, adaptive_avg_pool,
 * their 2-d backward ops, upsample_nearest2d and upsample_bilinear2d on the
 * pooling kernel (kernels/pool.cl). The backward ops gather: each
 * grad_input element sums what the output positions gave it, in output
 * order (deterministic, no atomics). Unlike the CPU plugin, max pooling's
 * backward cannot fail on an index outside its plane (the values are on
 * the device): such an index contributes nowhere.
 *
 * The leading dims (batch, channels) are planes with their own strides per
 * operand; the last 1-3 dims are the spatial [D, H, W] (missing dims of
 * size 1). Output sizes come from the output descriptor (the core computed
 * them from the attributes). Dtypes as the CPU plugin (PyTorch's CPU):
 * avg_pool floating or int64, max pooling floating or integer, adaptive
 * and upsampling floating (nearest of u8, which the CPU plugin takes, is
 * refused: its results on PoCL were wrong and the cause is not found yet).
 */
#include <string.h>

#include "bp_gpu_ops.h"
#include "bp_kit.h"

static int is_backward(uint32_t op) {
  return op == BP_OP_avg_pool2d_backward || op == BP_OP_max_pool2d_with_indices_backward ||
         op == BP_OP_adaptive_avg_pool2d_backward;
}
/* Backward ops gather per grad_input element over every output position:
 * refused past this many (input plane x output plane) pairs. */
#define POOL_BACKWARD_MAX_PAIRS ((int64_t)1 << 26)

static int is_upsample(uint32_t op) { return op == BP_OP_upsample_nearest2d || op == BP_OP_upsample_bilinear2d; }

int bp__gpu_pool_implemented(uint32_t op) {
  return op == BP_OP_avg_pool || op == BP_OP_max_pool_with_indices || op == BP_OP_adaptive_avg_pool ||
         is_upsample(op) || is_backward(op);
}

static uint32_t spatial_dims(const bp_op_call_t* call) {
  if (is_upsample(call->op_id) || call->op_id == BP_OP_adaptive_avg_pool2d_backward) return 2;
  return call->op_id == BP_OP_adaptive_avg_pool ? ((const bp_adaptive_pool_attrs_t*)call->attrs)->spatial_dims
                                                : ((const bp_pool_attrs_t*)call->attrs)->spatial_dims;
}

int bp__gpu_pool_supported(const bp_gpu_device_caps_t* caps, const bp_op_call_t* call, char* msg, size_t cap) {
  if (!bp__gpu_dtypes_ok(caps, call, msg, cap)) return BP_SUPPORT_DTYPE;
  uint32_t op = call->op_id;
  int bwd = is_backward(op);
  const bp_tensor_desc_t *x = call->inputs[bwd ? 1 : 0], *y = call->outputs[0];
  uint32_t d = x->dtype;
  int fl = bp_dtype_is_float(d);
  int ok = op == BP_OP_avg_pool || op == BP_OP_avg_pool2d_backward ? fl || d == BP_DTYPE_I64
           : op == BP_OP_max_pool_with_indices ? fl || bp_dtype_is_int(d)
           : fl;
  for (uint32_t k = 0; k < call->num_inputs; k++)
    ok = ok && call->inputs[k]->dtype == (op == BP_OP_max_pool2d_with_indices_backward && k == 2 ? BP_DTYPE_I64 : d);
  if (!ok || y->dtype != d ||
      (op == BP_OP_max_pool_with_indices && call->outputs[1]->dtype != BP_DTYPE_I64)) {
    bp_plugin_format(msg, cap, 0, "%s is not supported (PyTorch CPU does not take it either)", bp_dtype_name(d));
    return BP_SUPPORT_DTYPE;
  }
  if (!call->attrs && op != BP_OP_adaptive_avg_pool2d_backward) return BP_SUPPORT_ATTRIBUTE;
  uint32_t s = spatial_dims(call);
  if (s < 1 || s > 3 || (x->rank != s + 1 && x->rank != s + 2) || y->rank != x->rank ||
      (is_upsample(op) && x->rank != 4) || (bwd && s != 2) || (bwd && call->inputs[0]->rank != x->rank)) {
    bp_plugin_format(msg, cap, 0, "rank %u input for %u spatial dims", x->rank, s);
    return BP_SUPPORT_RANK;
  }
  if (bwd) {
    const bp_tensor_desc_t* go = call->inputs[0];
    uint32_t h = x->rank - 2;
    int64_t in_plane = x->sizes[h] * x->sizes[h + 1], out_plane = go->sizes[h] * go->sizes[h + 1];
    if (in_plane * out_plane > POOL_BACKWARD_MAX_PAIRS) {
      bp_plugin_format(msg, cap, 0, "planes of %lld x %lld positions (the gather kernel takes %lld pairs)",
                       (long long)in_plane, (long long)out_plane, (long long)POOL_BACKWARD_MAX_PAIRS);
      return BP_SUPPORT_SIZE;
    }
  }
  return 0;
}

bp_status_t bp__gpu_pool_run(const bp_gpu_device_caps_t* caps, const bp_op_call_t* call, bp_gpu_launch_fn launch,
                             void* ctx) {
  uint32_t op = call->op_id;
  int bwd = is_backward(op);
  /* x: the forward's input (self), y: its output (grad_output) */
  const bp_tensor_desc_t *x = call->inputs[bwd ? 1 : 0], *y = bwd ? call->inputs[0] : call->outputs[0];
  const bp_tensor_desc_t* ind = op == BP_OP_max_pool_with_indices ? call->outputs[1]
                                : op == BP_OP_max_pool2d_with_indices_backward ? call->inputs[2] : NULL;
  uint32_t s = spatial_dims(call), np = x->rank - s;
  bp_gpu_launch_t l;
  memset(&l, 0, sizeof l);
  bp_gpu_pool_args_t* a = &l.args.pool;
  /* kernel operands: forward in, out, indices; backward grad_output,
   * grad_input, indices */
  const bp_tensor_desc_t* ops[3] = {bwd ? y : x, bwd ? call->outputs[0] : y, ind};
  a->total = bp_desc_numel(ops[1]);
  if (a->total == 0) return BP_OK;
  a->op = op;
  a->plane_rank = np;
  for (uint32_t d = 0; d < np; d++) a->plane_sizes[d] = x->sizes[d];
  for (uint32_t k = 0; k < 3; k++) {
    if (!ops[k]) continue;
    for (uint32_t d = 0; d < np; d++) a->plane_strides[k][d] = ops[k]->strides[d];
    for (uint32_t j = 0; j < s; j++) a->sp_strides[k][3 - s + j] = ops[k]->strides[np + j];
    a->byte_offset[k] = (int64_t)ops[k]->byte_offset;
    a->dtypes[k] = ops[k]->dtype;
    l.operands[k] = ops[k];
  }
  for (int j = 0; j < 3; j++) a->in[j] = a->out[j] = a->k[j] = a->st[j] = a->dil[j] = 1;
  for (uint32_t j = 0; j < s; j++) {
    a->in[3 - s + j] = x->sizes[np + j];
    a->out[3 - s + j] = y->sizes[np + j];
    if (x->sizes[np + j] <= 0)
      return BP_KIT_ERROR(BP_INVALID_ARGUMENT, "%s: empty spatial dim", bp_kit_op_name(op));
  }
  if (is_upsample(op)) {
    const bp_upsample_attrs_t* ua = call->attrs;
    int ac = ua->align_corners != 0, f64 = x->dtype == BP_DTYPE_F64;
    a->align_corners = (uint32_t)ac;
    for (int j = 1; j < 3; j++) {
      /* the CPU plugin's scale in its compute type: 1 / scale when given,
       * else in / out; align_corners (bilinear): (in - 1) / (out - 1) */
      double given = ua->has_scale ? ua->scale[j - 1] : 0.0;
      int64_t n = a->in[j], m = a->out[j];
      if (op == BP_OP_upsample_bilinear2d && ac)
        a->scale[j] = m > 1 ? (f64 ? (double)(n - 1) / (double)(m - 1) : (double)((float)(n - 1) / (float)(m - 1)))
                            : 0.0;
      else if (given > 0)
        a->scale[j] = f64 ? 1.0 / given : (double)(float)(1.0 / given);
      else
        a->scale[j] = f64 ? (double)n / (double)m : (double)((float)n / (float)m);
    }
  } else if (op != BP_OP_adaptive_avg_pool && op != BP_OP_adaptive_avg_pool2d_backward) {
    const bp_pool_attrs_t* pa = call->attrs;
    for (uint32_t j = 0; j < s; j++) {
      int i = 3 - (int)s + (int)j;
      a->k[i] = pa->kernel[j];
      a->st[i] = pa->stride[j];
      a->pad[i] = pa->padding[j];
      int avg = op == BP_OP_avg_pool || op == BP_OP_avg_pool2d_backward;
      a->dil[i] = avg ? 1 : pa->dilation[j];
      if (a->k[i] <= 0 || a->st[i] <= 0 || a->dil[i] <= 0 || a->pad[i] < 0 || a->pad[i] > a->k[i] / 2 ||
          (avg && pa->dilation[j] != 1 && pa->dilation[j] != 0))
        return BP_KIT_ERROR(BP_INVALID_ARGUMENT, "%s: invalid kernel, stride, padding or dilation",
                            bp_kit_op_name(op));
    }
    a->count_include_pad = pa->count_include_pad != 0;
    a->divisor = pa->has_divisor_override ? pa->divisor_override : 0;
  }
  l.program = x->dtype == BP_DTYPE_F64 ? BP_GPU_PROGRAM_pool_f64
              : bp_dtype_is_float(x->dtype) ? BP_GPU_PROGRAM_pool_f32 : BP_GPU_PROGRAM_pool_i64;
  l.num_operands = 3;
  bp__gpu_grid_1d(caps, ((uint64_t)a->total + 63) / 64, 64, &l);
  l.args_size = sizeof *a;
  return launch(ctx, &l);
}
