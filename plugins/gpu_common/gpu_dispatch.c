/* backplane gpu_common: op calls to kernel families (the kernel table).
 *
 * Family by ops.def (bp_op_family): elementwise families, copies, shapes
 * and creation become elementwise programs; reductions, softmax and norms
 * run on the row kernel; mm/bmm/addmm/linear on the tiled matmul; gathers
 * on the index kernel; swiglu/geglu are programs over the two halves of
 * their input.
 */
#include <string.h>

#include "bp_gpu_ops.h"
#include "bp_kit.h"

static int is_copy_op(uint32_t op) {
  uint32_t f = bp_op_family(op);
  return f == BP_OP_FAMILY_COPY || f == BP_OP_FAMILY_SHAPE || f == BP_OP_FAMILY_CREATION;
}
static int is_glu(uint32_t op) { return op == BP_OP_swiglu || op == BP_OP_geglu; }

int bp_gpu_op_implemented(uint32_t op) {
  if (bp_op_family(op) == BP_OP_FAMILY_INVALID) return 0; /* 0 or past the table */
  return bp_op_is_elementwise(op) || is_copy_op(op) || is_glu(op) || bp__gpu_rows_implemented(op) ||
         bp__gpu_matmul_implemented(op) || bp__gpu_index_implemented(op);
}

static int glu_supported(const bp_gpu_device_caps_t* caps, const bp_op_call_t* call, char* msg, size_t cap) {
  if (!bp__gpu_dtypes_ok(caps, call, msg, cap)) return BP_SUPPORT_DTYPE;
  const bp_tensor_desc_t* in = call->inputs[0];
  if (!bp_dtype_is_float(in->dtype) || in->rank == 0 || in->sizes[in->rank - 1] % 2) {
    bp_plugin_format(msg, cap, 0, "needs a floating input with an even last dim");
    return BP_SUPPORT_DTYPE;
  }
  return 0;
}

/* out = act(x[..., :h]) * x[..., h:] */
static bp_status_t glu_run(const bp_gpu_device_caps_t* caps, const bp_op_call_t* call, bp_gpu_launch_fn launch,
                           void* ctx) {
  const bp_tensor_desc_t* in = call->inputs[0];
  bp_tensor_desc_t lo = *in, hi = *in;
  uint32_t last = in->rank - 1;
  int64_t h = in->sizes[last] / 2;
  lo.sizes[last] = hi.sizes[last] = h;
  hi.byte_offset += (uint64_t)(h * in->strides[last] * (int64_t)bp_dtype_size(in->dtype));
  uint32_t cdt = in->dtype == BP_DTYPE_F64 ? BP_DTYPE_F64 : BP_DTYPE_F32;
  bp_gpu_ew_t p;
  bp_gpu_ew_init(&p, cdt);
  uint8_t a = bp_gpu_ew_load_input(&p, bp_gpu_ew_input(&p, &lo));
  uint8_t b = bp_gpu_ew_load_input(&p, bp_gpu_ew_input(&p, &hi));
  uint8_t act = call->op_id == BP_OP_swiglu
                    ? bp_gpu_ew_op(&p, BP_OP_silu, a, 0, 0, 0)
                    : bp_gpu_ew_op(&p, BP_OP_gelu, a, 0, 0,
                                   call->attrs ? ((const bp_gelu_attrs_t*)call->attrs)->approximate : 0);
  bp_gpu_ew_store(&p, bp_gpu_ew_output(&p, call->outputs[0]), bp_gpu_ew_op(&p, BP_OP_mul, act, b, 0, 0));
  return bp_gpu_ew_launch(caps, &p, launch, ctx);
}

int bp_gpu_op_supported(const bp_gpu_device_caps_t* caps, const bp_op_call_t* call, char* msg, size_t cap) {
  uint32_t op = call->op_id;
  if (!bp_gpu_op_implemented(op)) {
    bp_plugin_format(msg, cap, 0, "no GPU kernel for %s", bp_kit_op_name(op));
    return BP_SUPPORT_OP;
  }
  for (uint32_t k = 0; k < call->num_inputs + call->num_outputs; k++) {
    const bp_tensor_desc_t* t = k < call->num_inputs ? call->inputs[k] : call->outputs[k - call->num_inputs];
    if (!t) {
      bp_plugin_format(msg, cap, 0, "operand %u is NULL", k);
      return BP_SUPPORT_ATTRIBUTE;
    }
    if (t->dtype != BP_DTYPE_INVALID && t->rank > BP_MAX_RANK) {
      bp_plugin_format(msg, cap, 0, "rank %u > %d", t->rank, BP_MAX_RANK);
      return BP_SUPPORT_RANK;
    }
    if (t->dtype != BP_DTYPE_INVALID && (t->layout != 0 || t->quant)) {
      bp_plugin_format(msg, cap, 0, "only the plain strided layout");
      return BP_SUPPORT_LAYOUT;
    }
  }
  if (bp_op_is_elementwise(op)) return bp__gpu_ew_supported(caps, call, msg, cap);
  if (is_copy_op(op)) return bp__gpu_copy_supported(caps, call, msg, cap);
  if (is_glu(op)) return glu_supported(caps, call, msg, cap);
  if (bp__gpu_rows_implemented(op)) return bp__gpu_rows_supported(caps, call, msg, cap);
  if (bp__gpu_matmul_implemented(op)) return bp__gpu_matmul_supported(caps, call, msg, cap);
  return bp__gpu_index_supported(caps, call, msg, cap);
}

bp_status_t bp_gpu_op_run(const bp_gpu_device_caps_t* caps, const bp_op_call_t* call, bp_gpu_launch_fn launch,
                          void* ctx) {
  char msg[200];
  msg[0] = 0;
  int reason = bp_gpu_op_supported(caps, call, msg, sizeof msg);
  if (reason) return BP_KIT_ERROR(BP_UNIMPLEMENTED, "%s: %s", bp_kit_op_name(call->op_id), msg);
  uint32_t op = call->op_id;
  if (bp_op_is_elementwise(op)) return bp__gpu_ew_run(caps, call, launch, ctx);
  if (is_copy_op(op)) return bp__gpu_copy_run(caps, call, launch, ctx);
  if (is_glu(op)) return glu_run(caps, call, launch, ctx);
  if (bp__gpu_rows_implemented(op)) return bp__gpu_rows_run(caps, call, launch, ctx);
  if (bp__gpu_matmul_implemented(op)) return bp__gpu_matmul_run(caps, call, launch, ctx);
  return bp__gpu_index_run(caps, call, launch, ctx);
}
