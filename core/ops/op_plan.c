/* backplane core: bp_op_run's plan step (op_run_internal.h): the call the
 * plugin will see, its support answer, the outputs the core allocates, and
 * dense temporaries for plugins that need contiguous operands (inputs are
 * packed here with the plugin's copy kernel; outputs are computed into
 * temporaries that the launch step copies back).
 */
#include <stdlib.h>
#include <string.h>

#include "ops/op_run_internal.h"

/* Packs every strided input into a dense temporary and points the kernel's
 * outputs at dense temporaries where the real ones are strided. */
static bp_status_t bp__plan_dense(bp__run_t* r) {
  const bp__op_meta_t* op = r->p.op;
  uint32_t n = r->num_inputs;
  r->temp_in = n <= BP__STACK_INPUTS ? r->temp_in_small : calloc(n, sizeof(bp_tensor_t*));
  if (r->temp_in == NULL) {
    return bp__error(BP_RESOURCE_EXHAUSTED, "op '%s': out of host memory", op->name);
  }
  memset(r->temp_in, 0, sizeof(bp_tensor_t*) * (n < 1 ? 1 : n));
  for (uint32_t i = 0; i < n; ++i) {
    bp_tensor_desc_t* in = &r->p.in[i];
    if (r->inputs[i] == NULL || bp__desc_is_contiguous(in)) continue;
    bp_status_t st = bp_tensor_create(r->device, in->dtype, in->rank, in->sizes, &r->temp_in[i]);
    if (st != BP_OK) return st;
    bp_tensor_desc_t dense;
    bp__desc_from_tensor(r->temp_in[i], &dense);
    bp__set_buffer(&dense, r->temp_in[i]);
    st = bp__launch_copy(r->plugin, r->stream, op, &dense, in);
    r->launched = 1;
    if (st != BP_OK) return st;
    *in = dense;
  }
  for (uint32_t k = 0; k < r->num_outputs; ++k) {
    bp_tensor_desc_t* out = &r->out_desc[k];
    if (bp__desc_is_contiguous(out)) continue;
    bp_status_t st = bp_tensor_create(r->device, out->dtype, out->rank, out->sizes,
                                      &r->temp_out[k]);
    if (st != BP_OK) return st;
    bp__desc_from_tensor(r->temp_out[k], out);
    bp__set_buffer(out, r->temp_out[k]);
  }
  return BP_OK;
}

bp_status_t bp__run_plan(bp__run_t* r) {
  const bp__op_meta_t* op = r->p.op;
  bp_status_t st;
  for (uint32_t k = 0; k < r->num_outputs; ++k) {
    r->out_desc[k] = r->outs[k] != NULL ? r->given[k] : r->p.x.out[k];
    r->out_ptr[k] = &r->out_desc[k];
  }
  bp_op_call_t* call = &r->call;
  memset(call, 0, sizeof(*call));
  call->struct_size = sizeof(*call);
  call->op_id = r->op_id;
  call->num_inputs = r->num_inputs;
  call->num_outputs = r->num_outputs;
  call->compute_dtype = r->p.x.compute_dtype;
  bp__op_call_set_list(call, op);
  call->inputs = r->p.in_ptr;
  call->outputs = r->out_ptr;
  call->attrs = r->p.x.attrs;

  int requires_contiguous = 0;
  if (r->plugin->abi_minor != BP_ABI_VERSION_MINOR) { /* older: gate by minor */
    bp_support_t refusal;
    if (bp__abi_gate_plugin(r->plugin, op, call, &refusal)) {
      st = bp__error(BP_UNSUPPORTED, "backend '%s' does not support op '%s' here (%s): %s",
                     r->plugin->name, op->name, bp_support_reason_name(refusal.reason),
                     refusal.message);
      bp__set_support_reason(refusal.reason);
      return st;
    }
  }
  if (r->plugin->caps.query_support != NULL) {
    bp_support_t support;
    st = bp__query_support_checked(r->device, call, &support);
    if (st != BP_OK) return st;
    if (!support.supported) {
      st = bp__error(BP_UNSUPPORTED, "backend '%s' does not support op '%s' here (%s): %s",
                     r->plugin->name, op->name, bp_support_reason_name(support.reason),
                     support.message);
      bp__set_support_reason(support.reason);
      return st;
    }
    requires_contiguous = support.requires_contiguous != 0;
  }

  for (uint32_t k = 0; k < r->num_outputs; ++k) {
    if (r->outs[k] != NULL) continue;
    const bp_tensor_desc_t* d = &r->p.x.out[k];
    st = bp_tensor_create(r->device, d->dtype, d->rank, d->sizes, &r->allocated[k]);
    if (st != BP_OK) return st;
    r->outs[k] = r->allocated[k];
  }
  for (uint32_t i = 0; i < r->num_inputs; ++i) {
    if (r->inputs[i] != NULL) bp__set_buffer(&r->p.in[i], r->inputs[i]);
  }
  for (uint32_t k = 0; k < r->num_outputs; ++k) {
    bp__desc_from_tensor(r->outs[k], &r->out_desc[k]);
    bp__set_buffer(&r->out_desc[k], r->outs[k]);
  }
  return requires_contiguous ? bp__plan_dense(r) : BP_OK;
}
