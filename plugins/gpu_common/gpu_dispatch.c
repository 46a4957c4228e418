/* backplane gpu_common: op calls to kernel families (the kernel table).
 *
 * Family by ops.def (bp_op_family): elementwise families, copies, shapes
 * and creation become elementwise programs; reductions, softmax and norms
 * run on the row kernel; mm/bmm/addmm/linear on the tiled matmul; gathers
 * on the index kernel; sort/topk on the rank kernel; scatters and pooling
 * on theirs; scaled_dot_product_attention on the attention kernel;
 * swiglu/geglu and rotary_embedding are programs over views of their
 * input. k_families below is the routing table.
 */
#include <string.h>

#include "bp_gpu_ops.h"
#include "bp_kit.h"

static int is_copy_op(uint32_t op) {
  uint32_t f = bp_op_family(op);
  return f == BP_OP_FAMILY_COPY || f == BP_OP_FAMILY_SHAPE || f == BP_OP_FAMILY_CREATION;
}
static int is_glu(uint32_t op) { return op == BP_OP_swiglu || op == BP_OP_geglu; }
static int is_ew(uint32_t op) { return bp_op_is_elementwise(op); }

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

/* The lowering families, in the order they are asked (the first whose
 * `implemented` holds takes the op). */
typedef struct gpu_family {
  int (*implemented)(uint32_t op);
  int (*supported)(const bp_gpu_device_caps_t* caps, const bp_op_call_t* call, char* msg, size_t cap);
  bp_status_t (*run)(const bp_gpu_device_caps_t* caps, const bp_op_call_t* call, bp_gpu_launch_fn launch,
                     void* ctx);
} gpu_family_t;

static const gpu_family_t k_families[] = {
    {is_ew, bp__gpu_ew_supported, bp__gpu_ew_run},
    {is_copy_op, bp__gpu_copy_supported, bp__gpu_copy_run},
    {is_glu, glu_supported, glu_run},
    {bp__gpu_rows_implemented, bp__gpu_rows_supported, bp__gpu_rows_run},
    {bp__gpu_matmul_implemented, bp__gpu_matmul_supported, bp__gpu_matmul_run},
    {bp__gpu_index_implemented, bp__gpu_index_supported, bp__gpu_index_run},
    {bp__gpu_sort_implemented, bp__gpu_sort_supported, bp__gpu_sort_run},
    {bp__gpu_scatter_implemented, bp__gpu_scatter_supported, bp__gpu_scatter_run},
    {bp__gpu_pool_implemented, bp__gpu_pool_supported, bp__gpu_pool_run},
    {bp__gpu_rotary_implemented, bp__gpu_rotary_supported, bp__gpu_rotary_run},
    {bp__gpu_random_implemented, bp__gpu_random_supported, bp__gpu_random_run},
    {bp__gpu_penalty_implemented, bp__gpu_penalty_supported, bp__gpu_penalty_run},
    {bp__gpu_attention_implemented, bp__gpu_attention_supported, bp__gpu_attention_run},
};

static const gpu_family_t* family_of(uint32_t op) {
  if (bp_op_family(op) == BP_OP_FAMILY_INVALID) return NULL; /* 0 or past the table */
  for (size_t k = 0; k < sizeof k_families / sizeof k_families[0]; k++)
    if (k_families[k].implemented(op)) return &k_families[k];
  return NULL;
}

int bp_gpu_op_implemented(uint32_t op) { return family_of(op) != NULL; }

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
  return family_of(op)->supported(caps, call, msg, cap);
}

bp_status_t bp_gpu_op_run(const bp_gpu_device_caps_t* caps, const bp_op_call_t* call, bp_gpu_launch_fn launch,
                          void* ctx) {
  char msg[200];
  msg[0] = 0;
  int reason = bp_gpu_op_supported(caps, call, msg, sizeof msg);
  if (reason) return BP_KIT_ERROR(BP_UNIMPLEMENTED, "%s: %s", bp_kit_op_name(call->op_id), msg);
  return family_of(call->op_id)->run(caps, call, launch, ctx);
}
