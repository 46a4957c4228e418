/* backplane core: bp_op_run's launch step (op_run_internal.h): the kernel,
 * the copies out of dense temporaries, and finish, which keeps buffers alive
 * for enqueued work and releases what the call held.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ops/op_run_internal.h"

/* Enqueues the plugin's copy kernel: dst (same shape) <- src. */
bp_status_t bp__launch_copy(bp_plugin_t* plugin, bp_stream_t* stream, const bp__op_meta_t* op,
                            const bp_tensor_desc_t* dst, const bp_tensor_desc_t* src) {
  if (plugin->ops.launch_count <= BP_OP_copy || plugin->ops.launch[BP_OP_copy] == NULL) {
    return bp__error(BP_UNIMPLEMENTED,
                     "backend '%s' needs dense operands for op '%s' but has no kernel for op "
                     "'copy'",
                     plugin->name, op->name);
  }
  const bp_tensor_desc_t* ins[2] = {dst, src};
  bp_op_call_t call;
  memset(&call, 0, sizeof(call));
  call.struct_size = sizeof(call);
  call.op_id = BP_OP_copy;
  call.num_inputs = 2;
  call.num_outputs = 1;
  call.compute_dtype = dst->dtype;
  call.inputs = ins;
  call.outputs = &dst;
  bp__clear_error();
  bp_status_t st = BP__NOTE_CALL(plugin, "launch", "copy",
                                 plugin->ops.launch[BP_OP_copy](stream->handle, &call));
  if (st != BP_OK) {
    char what[96];
    snprintf(what, sizeof(what), "copy to pack operands of op '%s'", op->name);
    return bp__plugin_error(plugin, st, what);
  }
  return BP_OK;
}

/* The synchronous debug mode (BP_CONTEXT_SYNC_EACH_OP, BACKPLANE_SYNC=1):
 * waits for the op and names it when the stream reports an error. Earlier
 * ops were waited for the same way, so the error is this op's. */
static bp_status_t bp__run_sync(bp__run_t* r) {
  const bp_plugin_t* plugin = r->plugin;
  if (plugin->core.stream_synchronize == NULL) return BP_OK; /* nothing to wait with */
  bp__clear_error();
  bp_status_t st = BP__CORE_CALL(plugin, stream_synchronize, r->stream->handle);
  if (st == BP_OK) return BP_OK;
  char what[BP_MAX_NAME + 160];
  snprintf(what, sizeof(what),
           "op '%s' (id %u) on device '%s' failed while running (stream synchronized after "
           "it: BACKPLANE_SYNC)",
           r->p.op->name, r->op_id, r->device->name);
  return bp__plugin_error(plugin, st, what);
}

bp_status_t bp__run_launch(bp__run_t* r) {
  const bp__op_meta_t* op = r->p.op;
  const bp_context_t* ctx = r->plugin->context;
  if (ctx->trace_begin != NULL)
    ctx->trace_begin(ctx->trace_user_data, r->op_id, r->device, r->stream);
  bp__clear_error();
  bp_status_t st = BP__NOTE_CALL(r->plugin, "launch", op->name,
                                 r->plugin->ops.launch[r->op_id](r->stream->handle, &r->call));
  r->launched = 1;
  if (ctx->trace_end != NULL)
    ctx->trace_end(ctx->trace_user_data, r->op_id, r->device, r->stream, st);
  if (st != BP_OK) {
    char what[96];
    snprintf(what, sizeof(what), "op '%s'", op->name);
    return bp__plugin_error(r->plugin, st, what);
  }
  for (uint32_t k = 0; k < r->num_outputs; ++k) {
    if (r->temp_out[k] == NULL) continue;
    bp_tensor_desc_t real;
    bp__desc_from_tensor(r->outs[k], &real);
    bp__set_buffer(&real, r->outs[k]);
    st = bp__launch_copy(r->plugin, r->stream, op, &real, &r->out_desc[k]);
    if (st != BP_OK) return st;
  }
  if (r->plugin->context->sync_each_op && (st = bp__run_sync(r)) != BP_OK) return st;
  for (uint32_t k = 0; k < r->num_outputs; ++k) r->outputs[k] = r->outs[k];
  for (uint32_t k = 0; k < r->num_outputs; ++k) r->allocated[k] = NULL; /* now the caller's */
  return BP_OK;
}

void bp__run_finish(bp__run_t* r) {
  if (r->launched) {
    /* Buffers stay alive until the enqueued work has completed. */
    for (uint32_t i = 0; i < r->num_inputs; ++i) {
      if (r->inputs[i] != NULL) bp__buffer_note_use(r->inputs[i]->buffer, r->stream);
      if (r->temp_in != NULL && r->temp_in[i] != NULL)
        bp__buffer_note_use(r->temp_in[i]->buffer, r->stream);
    }
    for (uint32_t k = 0; k < r->num_outputs; ++k) {
      if (r->outs[k] != NULL) bp__buffer_note_use(r->outs[k]->buffer, r->stream);
      if (r->temp_out[k] != NULL) bp__buffer_note_use(r->temp_out[k]->buffer, r->stream);
    }
  }
  if (r->temp_in != NULL) {
    for (uint32_t i = 0; i < r->num_inputs; ++i) {
      if (r->temp_in[i] != NULL) bp_tensor_release(r->temp_in[i]);
    }
    if (r->temp_in != r->temp_in_small) free(r->temp_in);
  }
  for (uint32_t k = 0; k < BP__MAX_OUTPUTS; ++k) {
    if (r->temp_out[k] != NULL) bp_tensor_release(r->temp_out[k]);
    if (r->allocated[k] != NULL) bp_tensor_release(r->allocated[k]);
  }
  bp__prep_free(&r->p);
}
