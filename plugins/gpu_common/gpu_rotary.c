/* backplane gpu_common: rotary_embedding as one elementwise program.
 *
 * The input's last dim holds D/2 pairs (x1, x2): its two halves (GPT-NeoX)
 * or its even and odd elements (GPT-J, `interleaved`). Each pair rotates by
 * the angle of its cos/sin table entries: the tables are D wide (one entry
 * per element, viewed like the input) or D/2 wide (one per pair), and
 * broadcast over the input's leading dims. The program reads the pair
 * halves as strided views and writes both output halves:
 *   out1 = x1 * cos1 - x2 * sin1,  out2 = x2 * cos2 + x1 * sin2
 * in f32 (f64 for f64 inputs), rounded once on store.
 */
#include <string.h>

#include "bp_gpu_ops.h"
#include "bp_kit.h"

int bp__gpu_rotary_implemented(uint32_t op) { return op == BP_OP_rotary_embedding; }

int bp__gpu_rotary_supported(const bp_gpu_device_caps_t* caps, const bp_op_call_t* call, char* msg, size_t cap) {
  if (!bp__gpu_dtypes_ok(caps, call, msg, cap)) return BP_SUPPORT_DTYPE;
  const bp_tensor_desc_t *x = call->inputs[0], *cs = call->inputs[1], *sn = call->inputs[2];
  for (uint32_t k = 0; k < 3; k++)
    if (!bp_dtype_is_float(call->inputs[k]->dtype) || !bp_dtype_is_float(call->outputs[0]->dtype)) {
      bp_plugin_format(msg, cap, 0, "needs floating operands");
      return BP_SUPPORT_DTYPE;
    }
  if (!call->attrs || x->rank < 1 || cs->rank < 1 || sn->rank != cs->rank) {
    bp_plugin_format(msg, cap, 0, "operand ranks do not match");
    return BP_SUPPORT_RANK;
  }
  int64_t D = x->sizes[x->rank - 1], t = cs->sizes[cs->rank - 1];
  if (D % 2 || (t != D && t != D / 2) || sn->sizes[sn->rank - 1] != t) {
    bp_plugin_format(msg, cap, 0, "cos/sin tables must be D or D/2 wide for an even D");
    return BP_SUPPORT_ATTRIBUTE;
  }
  return 0;
}

/* The first (`second` 0) or second member of each pair along the last dim. */
static bp_tensor_desc_t pair_view(const bp_tensor_desc_t* t, int interleaved, int second) {
  bp_tensor_desc_t v = *t;
  uint32_t last = t->rank - 1;
  int64_t half = t->sizes[last] / 2, st = t->strides[last];
  v.sizes[last] = half;
  if (interleaved) v.strides[last] = 2 * st;
  int64_t skip = second ? (interleaved ? st : half * st) : 0;
  v.byte_offset += (uint64_t)(skip * (int64_t)bp_dtype_size(t->dtype));
  return v;
}

bp_status_t bp__gpu_rotary_run(const bp_gpu_device_caps_t* caps, const bp_op_call_t* call,
                               bp_gpu_launch_fn launch, void* ctx) {
  const bp_tensor_desc_t *x = call->inputs[0], *cs = call->inputs[1], *sn = call->inputs[2];
  const bp_tensor_desc_t* out = call->outputs[0];
  int il = ((const bp_rotary_attrs_t*)call->attrs)->interleaved != 0;
  int full = cs->sizes[cs->rank - 1] == x->sizes[x->rank - 1];
  bp_tensor_desc_t x1 = pair_view(x, il, 0), x2 = pair_view(x, il, 1);
  bp_tensor_desc_t o1 = pair_view(out, il, 0), o2 = pair_view(out, il, 1);
  bp_tensor_desc_t c1 = full ? pair_view(cs, il, 0) : *cs, c2 = full ? pair_view(cs, il, 1) : *cs;
  bp_tensor_desc_t s1 = full ? pair_view(sn, il, 0) : *sn, s2 = full ? pair_view(sn, il, 1) : *sn;
  bp_gpu_ew_t p;
  bp_gpu_ew_init(&p, x->dtype == BP_DTYPE_F64 ? BP_DTYPE_F64 : BP_DTYPE_F32);
  uint8_t a = bp_gpu_ew_load_input(&p, bp_gpu_ew_input(&p, &x1));
  uint8_t b = bp_gpu_ew_load_input(&p, bp_gpu_ew_input(&p, &x2));
  uint8_t rc1 = bp_gpu_ew_load_input(&p, bp_gpu_ew_input(&p, &c1));
  uint8_t rs1 = bp_gpu_ew_load_input(&p, bp_gpu_ew_input(&p, &s1));
  uint8_t rc2 = full ? bp_gpu_ew_load_input(&p, bp_gpu_ew_input(&p, &c2)) : rc1;
  uint8_t rs2 = full ? bp_gpu_ew_load_input(&p, bp_gpu_ew_input(&p, &s2)) : rs1;
  uint8_t r1 = bp_gpu_ew_op(&p, BP_OP_sub, bp_gpu_ew_op(&p, BP_OP_mul, a, rc1, 0, 0),
                            bp_gpu_ew_op(&p, BP_OP_mul, b, rs1, 0, 0), 0, 0);
  uint8_t r2 = bp_gpu_ew_op(&p, BP_OP_add, bp_gpu_ew_op(&p, BP_OP_mul, b, rc2, 0, 0),
                            bp_gpu_ew_op(&p, BP_OP_mul, a, rs2, 0, 0), 0, 0);
  bp_gpu_ew_store(&p, bp_gpu_ew_output(&p, &o1), r1);
  bp_gpu_ew_store(&p, bp_gpu_ew_output(&p, &o2), r2);
  return bp_gpu_ew_launch(caps, &p, launch, ctx);
}
