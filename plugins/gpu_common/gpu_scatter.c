/* backplane gpu_common: the scatter family.
 *
 * select_scatter and slice_scatter are two copies (out = self, then the
 * selected or sliced view of out = src, converted), both elementwise
 * programs. scatter, scatter_add and scatter_reduce copy self to out, then
 * run the line kernel (kernels/scatter.cl) over the index; kv_cache_append
 * is the same kernel over the cache's slots. Unlike the CPU
 * plugin, the kernel cannot fail the call on an index outside
 * [0, self.size(dim)) (the values are on the device): such elements are
 * skipped (docs/backends/opencl.md).
 */
#include <string.h>

#include "bp_gpu_ops.h"
#include "bp_kit.h"

_Static_assert(BP_GPU_SC_NONE == BP_SCATTER_NONE && BP_GPU_SC_SUM == BP_SCATTER_SUM &&
                   BP_GPU_SC_PROD == BP_SCATTER_PROD && BP_GPU_SC_MEAN == BP_SCATTER_MEAN &&
                   BP_GPU_SC_AMAX == BP_SCATTER_AMAX && BP_GPU_SC_AMIN == BP_SCATTER_AMIN,
               "scatter.cl's reduction codes follow enum bp_scatter_reduce");

static int is_slice(uint32_t op) { return op == BP_OP_select_scatter || op == BP_OP_slice_scatter; }

int bp__gpu_scatter_implemented(uint32_t op) {
  return is_slice(op) || op == BP_OP_scatter || op == BP_OP_scatter_add || op == BP_OP_scatter_reduce ||
         op == BP_OP_kv_cache_append;
}

/* kv_cache_append's caches [NB, BS, H, D] seen as [NB * BS, H, D] (the
 * slots); 0 when the block dims do not merge. */
static int slot_view(const bp_tensor_desc_t* cache, bp_tensor_desc_t* out) {
  if (cache->rank != 4 || (cache->sizes[0] > 1 && cache->strides[0] != cache->sizes[1] * cache->strides[1])) return 0;
  *out = *cache;
  out->rank = 3;
  out->sizes[0] = cache->sizes[0] * cache->sizes[1];
  for (uint32_t d = 1; d < 3; d++) {
    out->sizes[d] = cache->sizes[d + 1];
    out->strides[d] = cache->strides[d + 1];
  }
  out->strides[0] = cache->strides[1];
  return 1;
}

static int kv_supported(const bp_op_call_t* call, char* msg, size_t cap) {
  const bp_tensor_desc_t* const* in = call->inputs;
  const bp_tensor_desc_t* slots = in[4];
  bp_tensor_desc_t v;
  for (uint32_t c = 0; c < 2; c++) {
    const bp_tensor_desc_t *cache = in[c], *x = in[2 + c], *o = call->outputs[c];
    if (x->dtype != cache->dtype || o->dtype != cache->dtype || !slot_view(cache, &v) || !slot_view(o, &v) ||
        x->rank != 3 || x->sizes[0] != slots->sizes[0]) {
      bp_plugin_format(msg, cap, 0, "caches [blocks, block_size, heads, dim] with mergeable block dims, "
                                    "tokens [T, heads, dim] of their dtype");
      return BP_SUPPORT_LAYOUT;
    }
  }
  if ((slots->dtype != BP_DTYPE_I64 && slots->dtype != BP_DTYPE_I32) || slots->rank != 1) {
    bp_plugin_format(msg, cap, 0, "slot_mapping must be 1-d i32 or i64");
    return BP_SUPPORT_DTYPE;
  }
  return 0;
}

static int64_t wrap_dim(int32_t dim, uint32_t rank) {
  int64_t w = rank ? (int64_t)rank : 1;
  int64_t d = dim < 0 ? dim + w : dim;
  return d < 0 || d >= w ? -1 : d;
}

int bp__gpu_scatter_supported(const bp_gpu_device_caps_t* caps, const bp_op_call_t* call, char* msg, size_t cap) {
  if (!bp__gpu_dtypes_ok(caps, call, msg, cap)) return BP_SUPPORT_DTYPE;
  const bp_tensor_desc_t *self = call->inputs[0], *out = call->outputs[0];
  if (call->op_id == BP_OP_kv_cache_append) return kv_supported(call, msg, cap);
  if (!call->attrs) return BP_SUPPORT_ATTRIBUTE;
  if (is_slice(call->op_id)) {
    if (out->rank == 0 || out->rank != self->rank ||
        wrap_dim(((const bp_slice_attrs_t*)call->attrs)->dim, out->rank) < 0) {
      bp_plugin_format(msg, cap, 0, "self and out need the same rank > 0 and dim in range");
      return BP_SUPPORT_RANK;
    }
    return 0;
  }
  const bp_tensor_desc_t* index = call->inputs[1];
  const bp_tensor_desc_t* src = call->num_inputs > 2 && call->inputs[2]->dtype ? call->inputs[2] : NULL;
  if (index->dtype != BP_DTYPE_I64 || out->dtype != self->dtype || (src && src->dtype != self->dtype)) {
    bp_plugin_format(msg, cap, 0, "index must be int64 and self, src and out of one dtype");
    return BP_SUPPORT_DTYPE;
  }
  const bp_scatter_attrs_t* a = call->attrs;
  if (a->reduce > BP_SCATTER_AMIN || wrap_dim(a->dim, self->rank) < 0 ||
      (index->rank != self->rank && (index->rank > 1 || self->rank > 1)) || (src && src->rank != index->rank)) {
    bp_plugin_format(msg, cap, 0, "reduction, dim or operand ranks out of range");
    return BP_SUPPORT_ATTRIBUTE;
  }
  return 0;
}

/* The selected (select_scatter) or sliced view of out; *out_empty when the
 * slice has no elements. */
static bp_status_t slice_view(const bp_op_call_t* call, bp_tensor_desc_t* view, int* out_empty) {
  const bp_tensor_desc_t* out = call->outputs[0];
  const bp_slice_attrs_t* a = call->attrs;
  int64_t dim = wrap_dim(a->dim, out->rank);
  const int64_t size = out->sizes[dim], es = (int64_t)bp_dtype_size(out->dtype);
  *view = *out;
  *out_empty = 0;
  if (call->op_id == BP_OP_select_scatter) {
    int64_t i = a->start < 0 ? a->start + size : a->start;
    if (i < 0 || i >= size)
      return BP_KIT_ERROR(BP_INVALID_ARGUMENT, "select_scatter: index %lld out of range", (long long)a->start);
    view->byte_offset += (uint64_t)(i * out->strides[dim] * es);
    for (uint32_t d = (uint32_t)dim; d + 1 < out->rank; d++) {
      view->sizes[d] = out->sizes[d + 1];
      view->strides[d] = out->strides[d + 1];
    }
    view->rank--;
    return BP_OK;
  }
  if (a->step <= 0) return BP_KIT_ERROR(BP_INVALID_ARGUMENT, "slice_scatter: step %lld", (long long)a->step);
  int64_t start = a->start < 0 ? a->start + size : a->start;
  int64_t end = a->end < 0 ? a->end + size : a->end;
  start = start < 0 ? 0 : start > size ? size : start;
  end = end < start ? start : end > size ? size : end;
  int64_t len = (end - start) / a->step + ((end - start) % a->step != 0);
  *out_empty = len == 0;
  view->byte_offset += (uint64_t)(start * out->strides[dim] * es);
  view->sizes[dim] = len;
  view->strides[dim] = out->strides[dim] * a->step;
  return BP_OK;
}

/* The value form's scalar, wrapped to an integer dtype as the CPU does. */
static int64_t wrap_value(const bp_scalar_t* s, uint32_t dtype) {
  int64_t v = s->kind == BP_SCALAR_FLOAT ? (int64_t)s->v.f : s->kind == BP_SCALAR_INT ? s->v.i
              : s->kind == BP_SCALAR_BOOL ? (int64_t)(s->v.b != 0) : 0;
  switch (dtype) {
    case BP_DTYPE_I8: return (int8_t)v;
    case BP_DTYPE_U8: return (uint8_t)v;
    case BP_DTYPE_I16: return (int16_t)v;
    case BP_DTYPE_I32: return (int32_t)v;
    case BP_DTYPE_BOOL: return s->kind == BP_SCALAR_FLOAT ? s->v.f != 0.0 : v != 0;
    default: return v;
  }
}

/* Launches the line kernel: out (already holding self) combined with src
 * (or `value`) at index, along `dim`; index, src and out have one rank
 * (0-d as [1]). */
static bp_status_t scatter_launch(const bp_gpu_device_caps_t* caps, const bp_tensor_desc_t* index,
                                  const bp_tensor_desc_t* src, const bp_tensor_desc_t* out, uint32_t dim,
                                  uint32_t reduce, int include_self, const bp_scalar_t* value,
                                  bp_gpu_launch_fn launch, void* ctx) {
  bp_gpu_launch_t l;
  memset(&l, 0, sizeof l);
  bp_gpu_scatter_args_t* a = &l.args.scatter;
  a->rank = out->rank ? out->rank : 1;
  a->dim = dim;
  a->reduce = reduce;
  a->include_self = (uint32_t)include_self;
  a->target_size = out->rank ? out->sizes[dim] : 1;
  const bp_tensor_desc_t* ops[3] = {index, src, out};
  for (uint32_t k = 0; k < 3; k++) {
    const bp_tensor_desc_t* t = ops[k];
    if (!t) continue;
    for (uint32_t d = 0; d < a->rank; d++) a->strides[k][d] = t->rank ? t->strides[d] : 0;
    a->byte_offset[k] = (int64_t)t->byte_offset;
    a->dtypes[k] = t->dtype;
    l.operands[k] = t;
  }
  for (uint32_t d = 0; d < a->rank; d++) a->sizes[d] = index->rank ? index->sizes[d] : 1;
  a->along = a->sizes[a->dim];
  if (a->along == 0) return BP_OK;
  a->lines = bp_desc_numel(index) / a->along;
  if (value) {
    a->value_f = value->kind == BP_SCALAR_FLOAT ? value->v.f
                 : value->kind == BP_SCALAR_INT ? (double)value->v.i
                 : value->kind == BP_SCALAR_BOOL ? (double)(value->v.b != 0) : 0.0;
    a->value_i = wrap_value(value, out->dtype);
  }
  l.program = BP_GPU_PROGRAM_scatter;
  l.num_operands = 3;
  bp__gpu_grid_1d(caps, ((uint64_t)a->lines + 63) / 64, 64, &l);
  l.args_size = sizeof *a;
  return launch(ctx, &l);
}

/* kv_cache_append: each cache copied to its output, then token t's rows
 * written at slot_mapping[t] (a scatter without reduction along the slots;
 * tokens in order, so a repeated slot keeps the last; negative slots are
 * padding). Unlike the CPU plugin, a slot past the cache cannot fail the
 * call (the values are on the device): it is skipped. */
static bp_status_t kv_run(const bp_gpu_device_caps_t* caps, const bp_op_call_t* call, bp_gpu_launch_fn launch,
                          void* ctx) {
  const bp_tensor_desc_t* slots = call->inputs[4];
  for (uint32_t c = 0; c < 2; c++) {
    const bp_tensor_desc_t *x = call->inputs[2 + c], *o = call->outputs[c];
    bp_status_t st = bp_gpu_ew_copy(caps, o, call->inputs[c], launch, ctx);
    if (st) return st;
    bp_tensor_desc_t ov, iv = *x;
    slot_view(o, &ov);
    /* the index: slot_mapping[t] at every (t, h, d) */
    iv.dtype = slots->dtype;
    iv.byte_offset = slots->byte_offset;
    iv.buffer = slots->buffer;
    iv.strides[0] = slots->strides[0];
    iv.strides[1] = iv.strides[2] = 0;
    if (bp_desc_numel(x) == 0) continue;
    st = scatter_launch(caps, &iv, x, &ov, 0, BP_SCATTER_NONE, 1, NULL, launch, ctx);
    if (st) return st;
  }
  return BP_OK;
}

bp_status_t bp__gpu_scatter_run(const bp_gpu_device_caps_t* caps, const bp_op_call_t* call,
                                bp_gpu_launch_fn launch, void* ctx) {
  const bp_tensor_desc_t *self = call->inputs[0], *out = call->outputs[0];
  if (bp_desc_numel(out) == 0) return BP_OK;
  bp_status_t st;
  if (is_slice(call->op_id)) {
    bp_tensor_desc_t view;
    int empty;
    st = slice_view(call, &view, &empty);
    if (st) return st;
    if (view.rank != call->inputs[1]->rank)
      return BP_KIT_ERROR(BP_INVALID_ARGUMENT, "%s: src rank %u, expected %u", bp_kit_op_name(call->op_id),
                          call->inputs[1]->rank, view.rank);
    st = bp_gpu_ew_copy(caps, out, self, launch, ctx);
    if (st || empty) return st;
    return bp_gpu_ew_copy(caps, &view, call->inputs[1], launch, ctx);
  }
  if (call->op_id == BP_OP_kv_cache_append) return kv_run(caps, call, launch, ctx);
  const bp_tensor_desc_t* index = call->inputs[1];
  const bp_tensor_desc_t* src = call->num_inputs > 2 && call->inputs[2]->dtype ? call->inputs[2] : NULL;
  const bp_scatter_attrs_t* at = call->attrs;
  st = bp_gpu_ew_copy(caps, out, self, launch, ctx);
  if (st || bp_desc_numel(index) == 0) return st;
  uint32_t reduce = call->op_id == BP_OP_scatter_add ? BP_SCATTER_SUM : at->reduce;
  int include_self = call->op_id != BP_OP_scatter_reduce || at->include_self;
  return scatter_launch(caps, index, src, out, (uint32_t)wrap_dim(at->dim, self->rank), reduce, include_self,
                        src ? NULL : &at->value, launch, ctx);
}
