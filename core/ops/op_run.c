/* backplane core: bp_op_run, in four steps (op_run_internal.h): validate,
 * plan, launch, finish; and the typed functions' entry.
 *
 * Threading: thread-safe; the stream is externally synchronized (the caller
 * does not enqueue on it from two threads at once). bp_op_run is
 * stream-ordered: it returns once the plugin has enqueued the work.
 *
 * Hot path: with every output given and no packing, bp_op_run keeps all
 * descriptors and the attribute struct on the stack and does not allocate.
 */
#include <stdlib.h>
#include <string.h>

#include "ops/op_run_internal.h"

void bp__run_init(bp__run_t* r, bp_stream_t* stream, uint32_t op_id,
                  const bp_tensor_t* const* inputs, uint32_t num_inputs, const void* attrs,
                  bp_tensor_t** outputs, uint32_t num_outputs) {
  r->stream = stream;
  r->op_id = op_id;
  r->inputs = inputs;
  r->num_inputs = num_inputs;
  r->attrs = attrs;
  r->outputs = outputs;
  r->num_outputs = num_outputs;
  r->p.in = NULL;
  memset(r->outs, 0, sizeof(r->outs));
  memset(r->allocated, 0, sizeof(r->allocated));
  memset(r->temp_out, 0, sizeof(r->temp_out));
  r->temp_in = NULL;
  r->launched = 0;
}

bp_status_t bp_op_run(bp_stream_t* stream, uint32_t op_id, const bp_tensor_t* const* inputs,
                      uint32_t num_inputs, const void* attrs, bp_tensor_t** outputs,
                      uint32_t num_outputs) {
  if (stream == NULL) return bp__error(BP_INVALID_ARGUMENT, "bp_op_run: stream is NULL");
  bp__clear_error();
  if (stream->queue != BP_QUEUE_COMPUTE) {
    return bp__error(BP_INVALID_ARGUMENT,
                     "bp_op_run: op %u on a copy-only stream of %s (create a compute stream)",
                     op_id, stream->device->name);
  }
  bp__op_canonicalize(&op_id, &inputs, &num_inputs, &attrs);
  bp__run_t r;
  bp__run_init(&r, stream, op_id, inputs, num_inputs, attrs, outputs, num_outputs);
  bp_status_t st = bp__run_validate(&r);
  if (st == BP_OK) st = bp__run_plan(&r);
  if (st == BP_OK) st = bp__run_launch(&r);
  bp__run_finish(&r);
  return st;
}

/* ---- typed functions' entry ------------------------------------------------------ */

bp_status_t bp__op_call(bp_stream_t* stream, uint32_t op_id, const bp_tensor_t* const* before,
                        uint32_t num_before, const bp_tensor_t* const* list, uint32_t list_count,
                        const char* list_name, const bp_tensor_t* const* after,
                        uint32_t num_after, const void* attrs, bp_tensor_t** const* out_ptrs,
                        uint32_t num_outputs) {
  const bp__op_meta_t* op = bp__op_meta(op_id);
  bp_tensor_t* outs[BP__MAX_OUTPUTS];
  for (uint32_t k = 0; k < num_outputs; ++k) {
    if (out_ptrs[k] == NULL) {
      return bp__error(BP_INVALID_ARGUMENT, "bp_op_%s: output pointer '%s' is NULL", op->name,
                       bp__op_output_name(op, k));
    }
    outs[k] = *out_ptrs[k];
  }
  bp_status_t st;
  if (list_name == NULL) {
    st = bp_op_run(stream, op_id, before, num_before, attrs, outs, num_outputs);
  } else {
    if (list == NULL && list_count > 0) {
      return bp__error(BP_INVALID_ARGUMENT, "bp_op_%s: '%s' is NULL but %s_count = %u", op->name,
                       list_name, list_name, list_count);
    }
    uint64_t n = (uint64_t)num_before + list_count + num_after;
    if (n > UINT32_MAX) {
      return bp__error(BP_INVALID_ARGUMENT, "bp_op_%s: too many inputs", op->name);
    }
    const bp_tensor_t* small[BP__STACK_INPUTS];
    const bp_tensor_t** flat = n <= BP__STACK_INPUTS ? small : malloc(sizeof(*flat) * n);
    if (flat == NULL) {
      return bp__error(BP_RESOURCE_EXHAUSTED, "bp_op_%s: out of host memory for %llu inputs",
                       op->name, (unsigned long long)n);
    }
    uint32_t j = 0;
    for (uint32_t i = 0; i < num_before; ++i) flat[j++] = before[i];
    for (uint32_t i = 0; i < list_count; ++i) flat[j++] = list[i];
    for (uint32_t i = 0; i < num_after; ++i) flat[j++] = after[i];
    st = bp_op_run(stream, op_id, flat, j, attrs, outs, num_outputs);
    if (flat != small) free(flat);
  }
  if (st == BP_OK) {
    for (uint32_t k = 0; k < num_outputs; ++k) *out_ptrs[k] = outs[k];
  }
  return st;
}
