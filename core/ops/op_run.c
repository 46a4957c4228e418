/* backplane core: bp_op_infer and bp_op_run -- validation, inference,
 * output allocation, support check, packing for plugins that need dense
 * inputs, and dispatch to the plugin's launch slot.
 *
 * Threading: thread-safe; the stream is externally synchronized (the caller
 * does not enqueue on it from two threads at once). bp_op_run is
 * stream-ordered: it returns once the plugin has enqueued the work.
 *
 * Hot path: with every output given and no packing, bp_op_run keeps all
 * descriptors and the attribute struct on the stack and does not allocate.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ops/ops_internal.h"

/* Inputs whose descriptors live on the stack; longer tensor lists use the heap. */
#define BP__STACK_INPUTS 16

typedef struct bp__prep {
  const bp__op_meta_t* op;
  uint32_t num_inputs;
  bp__attrs_storage_t attrs;
  bp__infer_t x;
  bp_tensor_desc_t* in; /* stack_in or heap */
  /* in_ptr[i] == &in[i]: the pointer array plugins receive. Shares in's
   * heap block when in is on the heap. */
  const bp_tensor_desc_t** in_ptr;
  bp_tensor_desc_t stack_in[BP__STACK_INPUTS];
  const bp_tensor_desc_t* stack_in_ptr[BP__STACK_INPUTS];
} bp__prep_t;

static void bp__prep_free(bp__prep_t* p) {
  if (p->in != NULL && p->in != p->stack_in) free(p->in);
  p->in = NULL;
}

static void bp__desc_from_tensor(const bp_tensor_t* t, bp_tensor_desc_t* d) {
  memset(d, 0, sizeof(*d));
  d->struct_size = sizeof(*d);
  d->dtype = t->dtype;
  d->rank = t->rank;
  d->byte_offset = t->byte_offset;
  memcpy(d->sizes, t->sizes, sizeof(int64_t) * t->rank);
  memcpy(d->strides, t->strides, sizeof(int64_t) * t->rank);
}

static bp_status_t bp__check_tensor(const bp__op_meta_t* op, const bp_tensor_t* t,
                                    const char* kind, const char* name) {
  if (!bp__dtype_valid(t->dtype) || t->rank > BP_MAX_RANK) {
    return bp__error(BP_INVALID_ARGUMENT, "op '%s': %s '%s' is not a valid tensor (dtype %u, rank %u)",
                     op->name, kind, name, t->dtype, t->rank);
  }
  return BP_OK;
}

/* Shared by bp_op_infer and bp_op_run: op lookup, operand counts, NULL
 * operands, attributes, input descriptors (buffers NULL). */
static bp_status_t bp__prepare(bp__prep_t* p, const char* api, uint32_t op_id,
                               const bp_tensor_t* const* inputs, uint32_t num_inputs,
                               const void* attrs, uint32_t num_outputs) {
  p->in = NULL;
  const bp__op_meta_t* op = bp__op_meta(op_id);
  if (op == NULL) {
    return bp__error(BP_INVALID_ARGUMENT, "%s: unknown op id %u (valid: 1..%u)", api, op_id,
                     BP_OP_COUNT - 1);
  }
  p->op = op;
  p->num_inputs = num_inputs;
  uint32_t fixed = (uint32_t)op->num_before + op->num_after;
  if (op->has_list ? num_inputs < fixed : num_inputs != fixed) {
    return bp__error(BP_INVALID_ARGUMENT, "op '%s' takes %s%u input%s, got %u", op->name,
                     op->has_list ? "at least " : "", fixed, fixed == 1 ? "" : "s", num_inputs);
  }
  if (num_outputs != op->num_outputs) {
    return bp__error(BP_INVALID_ARGUMENT, "op '%s' has %u output%s, got num_outputs = %u",
                     op->name, op->num_outputs, op->num_outputs == 1 ? "" : "s", num_outputs);
  }
  if (inputs == NULL && num_inputs > 0) {
    return bp__error(BP_INVALID_ARGUMENT, "op '%s': inputs is NULL", op->name);
  }
  const void* filled;
  bp_status_t st = bp__attrs_fill(op, attrs, &p->attrs, &filled);
  if (st != BP_OK) return st;

  /* Fixed inputs that may be NULL: opt_ names, and `self` of a binary op
   * whose self is the scalar. */
  uint32_t may_be_null = bp__op_optional_mask(op_id);
  if (op->attrs_kind == BP__ATTRS_bp_binary_attrs_t &&
      (p->attrs.m_bp_binary_attrs_t.flags & BP_BINARY_SELF_IS_SCALAR)) {
    may_be_null |= 1u;
  }
  uint32_t list_end = num_inputs - op->num_after;

  if (num_inputs <= BP__STACK_INPUTS) {
    p->in = p->stack_in;
    p->in_ptr = p->stack_in_ptr;
  } else {
    p->in = malloc((sizeof(bp_tensor_desc_t) + sizeof(bp_tensor_desc_t*)) * num_inputs);
    if (p->in == NULL) {
      return bp__error(BP_RESOURCE_EXHAUSTED, "op '%s': out of host memory for %u descriptors",
                       op->name, num_inputs);
    }
    p->in_ptr = (const bp_tensor_desc_t**)(void*)(p->in + num_inputs);
  }
  for (uint32_t i = 0; i < num_inputs; ++i) {
    char nbuf[64];
    p->in_ptr[i] = &p->in[i];
    const bp_tensor_t* t = inputs[i];
    if (t == NULL) {
      /* Position among the fixed inputs (list entries: see below). */
      int in_list = op->has_list && i >= op->num_before && i < list_end;
      uint32_t fixed_index = i < op->num_before ? i : op->num_before + (i - list_end);
      /* List entries are required, except in the index lists of index and
       * index_put, where NULL is a full slice (aten's Tensor?[] indices). */
      int list_may_be_null = op->id == BP_OP_index || op->id == BP_OP_index_put;
      if (in_list ? !list_may_be_null : !(may_be_null & (1u << fixed_index))) {
        return bp__error(BP_INVALID_ARGUMENT, "op '%s': input '%s' is NULL but required",
                         op->name, bp__op_input_name(op, num_inputs, i, nbuf));
      }
      memset(&p->in[i], 0, sizeof(p->in[i]));
      p->in[i].struct_size = sizeof(p->in[i]);
      p->in[i].dtype = BP_DTYPE_INVALID;
      continue;
    }
    st = bp__check_tensor(op, t, "input", bp__op_input_name(op, num_inputs, i, nbuf));
    if (st != BP_OK) return st;
    bp__desc_from_tensor(t, &p->in[i]);
  }
  memset(&p->x, 0, sizeof(p->x));
  p->x.op = op;
  p->x.num_inputs = num_inputs;
  p->x.in = p->in;
  p->x.attrs = filled;
  return BP_OK;
}

bp_status_t bp_op_infer(uint32_t op_id, const bp_tensor_t* const* inputs, uint32_t num_inputs,
                        const void* attrs, bp_tensor_desc_t* const* out_outputs,
                        uint32_t num_outputs) {
  bp__prep_t p;
  bp_tensor_desc_t hints[BP__MAX_OUTPUTS];
  bp_status_t st = bp__prepare(&p, "bp_op_infer", op_id, inputs, num_inputs, attrs, num_outputs);
  if (st != BP_OK) goto cleanup;
  if (out_outputs == NULL) {
    st = bp__error(BP_INVALID_ARGUMENT, "op '%s': out_outputs is NULL", p.op->name);
    goto cleanup;
  }
  /* Each output descriptor is the caller's own struct, sized by its
   * struct_size (growth rule). A valid dtype in it is a request: creation ops
   * then take the dtype and shape from it. */
  int any_hint = 0;
  for (uint32_t k = 0; k < num_outputs; ++k) {
    const bp_tensor_desc_t* h = out_outputs[k];
    if (h == NULL || h->struct_size < BP_TENSOR_DESC_V1_SIZE) {
      st = bp__error(BP_INVALID_ARGUMENT,
                     "op '%s': out_outputs[%u] is %s (set struct_size to sizeof(bp_tensor_desc_t))",
                     p.op->name, k, h == NULL ? "NULL" : "smaller than a bp_tensor_desc_t");
      goto cleanup;
    }
    memset(&hints[k], 0, sizeof(hints[k]));
    memcpy(&hints[k], h, BP_TENSOR_DESC_V1_SIZE);
    if (bp__dtype_valid(h->dtype) && h->rank <= BP_MAX_RANK) {
      any_hint = 1;
    } else {
      memset(&hints[k], 0, sizeof(hints[k]));
    }
  }
  p.x.given = any_hint ? hints : NULL;
  st = bp__op_infer_descs(&p.x);
  if (st != BP_OK) goto cleanup;
  for (uint32_t k = 0; k < num_outputs; ++k) {
    st = bp__out_struct_write("bp_op_infer", "bp_tensor_desc_t", out_outputs[k], &p.x.out[k],
                              sizeof(p.x.out[k]), BP_TENSOR_DESC_V1_SIZE);
    if (st != BP_OK) goto cleanup;
  }
cleanup:
  bp__prep_free(&p);
  return st;
}

/* ---- aliasing ------------------------------------------------------------------- */

static int bp__same_layout(const bp_tensor_desc_t* a, const bp_tensor_desc_t* b) {
  return a->byte_offset == b->byte_offset && bp_dtype_size(a->dtype) == bp_dtype_size(b->dtype) &&
         bp__shape_equal(a->rank, a->sizes, b->rank, b->sizes) &&
         memcmp(a->strides, b->strides, sizeof(int64_t) * a->rank) == 0;
}

/* Ops that may write an output over an input with the identical layout:
 * elementwise ops, and the PyTorch in-place updates of `self`. */
static int bp__op_allows_inplace(const bp__op_meta_t* op, uint32_t input) {
  bp__infer_fn f = op->infer;
  if (f == bp__infer_unary_same || f == bp__infer_unary_float || f == bp__infer_unary_bool ||
      f == bp__infer_unary_bitwise || f == bp__infer_unary_clamp || f == bp__infer_clamp_tensor ||
      f == bp__infer_binary_arith || f == bp__infer_binary_div || f == bp__infer_binary_float ||
      f == bp__infer_binary_compare || f == bp__infer_binary_bool ||
      f == bp__infer_binary_bitwise || f == bp__infer_where || f == bp__infer_ternary_arith ||
      f == bp__infer_cast || f == bp__infer_copy) {
    return 1;
  }
  switch (op->id) {
    case BP_OP_index_put: case BP_OP_masked_scatter: case BP_OP_scatter:
    case BP_OP_scatter_add: case BP_OP_scatter_reduce: case BP_OP_select_scatter:
    case BP_OP_slice_scatter:
      return input == 0;
    default:
      return 0;
  }
}

/* Nonzero when two distinct elements of `d` share memory (an expanded view). */
static int bp__self_overlapping(const bp_tensor_desc_t* d) {
  int64_t sizes[BP_MAX_RANK], strides[BP_MAX_RANK];
  uint32_t n = 0;
  for (uint32_t i = 0; i < d->rank; ++i) {
    if (d->sizes[i] == 0) return 0;
    if (d->sizes[i] == 1) continue;
    int64_t s = d->strides[i] < 0 ? -d->strides[i] : d->strides[i];
    uint32_t j = n++;
    while (j > 0 && strides[j - 1] > s) { /* insertion sort by stride */
      strides[j] = strides[j - 1];
      sizes[j] = sizes[j - 1];
      --j;
    }
    strides[j] = s;
    sizes[j] = d->sizes[i];
  }
  int64_t extent = 1; /* elements spanned by the dims so far */
  for (uint32_t i = 0; i < n; ++i) {
    if (strides[i] < extent) return 1;
    extent = strides[i] * (sizes[i] - 1) + extent;
  }
  return 0;
}

static int bp__spans_intersect(const bp_tensor_t* a, const bp_tensor_t* b) {
  uint64_t alo, ahi, blo, bhi;
  if (a->buffer != b->buffer) return 0;
  if (bp__tensor_span(a->dtype, a->rank, a->sizes, a->strides, a->byte_offset, &alo, &ahi) ||
      bp__tensor_span(b->dtype, b->rank, b->sizes, b->strides, b->byte_offset, &blo, &bhi)) {
    return 1; /* cannot happen after the span checks; be safe */
  }
  return alo < ahi && blo < bhi && alo < bhi && blo < ahi;
}

/* ---- run --------------------------------------------------------------------------- */

/* Placement and bounds of one operand. */
static bp_status_t bp__check_placement(const bp__op_meta_t* op, const bp_stream_t* stream,
                                       const bp_tensor_t* t, const char* kind,
                                       const char* name) {
  const bp_buffer_t* buf = t->buffer;
  if (buf == NULL) {
    return bp__error(BP_INVALID_ARGUMENT, "op '%s': %s '%s' has no buffer", op->name, kind, name);
  }
  if (buf->device != stream->device) {
    return bp__error(BP_INVALID_ARGUMENT,
                     "op '%s': %s '%s' is on device '%s' but the stream is on device '%s'",
                     op->name, kind, name, buf->device ? buf->device->name : "?",
                     stream->device->name);
  }
  uint64_t lo, hi;
  if (bp__tensor_span(t->dtype, t->rank, t->sizes, t->strides, t->byte_offset, &lo, &hi) ||
      hi > buf->size) {
    return bp__error(BP_OUT_OF_RANGE,
                     "op '%s': %s '%s' reaches outside its buffer of %llu bytes", op->name, kind,
                     name, (unsigned long long)buf->size);
  }
  return BP_OK;
}

static void bp__set_buffer(bp_tensor_desc_t* d, const bp_tensor_t* t) {
  d->buffer = t->buffer->handle;
}

/* Enqueues the plugin's copy kernel: dst (same shape) <- src. */
static bp_status_t bp__launch_copy(bp_plugin_t* plugin, bp_stream_t* stream,
                                   const bp__op_meta_t* op, const bp_tensor_desc_t* dst,
                                   const bp_tensor_desc_t* src) {
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

bp_status_t bp_op_run(bp_stream_t* stream, uint32_t op_id, const bp_tensor_t* const* inputs,
                      uint32_t num_inputs, const void* attrs, bp_tensor_t** outputs,
                      uint32_t num_outputs) {
  bp__prep_t p;
  p.in = NULL;
  bp_tensor_t* outs[BP__MAX_OUTPUTS] = {NULL};      /* given or allocated */
  bp_tensor_t* allocated[BP__MAX_OUTPUTS] = {NULL}; /* released on failure */
  bp_tensor_desc_t out_desc[BP__MAX_OUTPUTS];
  const bp_tensor_desc_t* out_ptr[BP__MAX_OUTPUTS];
  bp_tensor_desc_t given[BP__MAX_OUTPUTS];
  /* Dense temporaries: packed inputs, and outputs computed densely then
   * copied into the caller's strided outputs. */
  bp_tensor_t* temp_in_small[BP__STACK_INPUTS];
  bp_tensor_t** temp_in = NULL;
  bp_tensor_t* temp_out[BP__MAX_OUTPUTS] = {NULL};
  int launched = 0;
  bp_status_t st;
  char nbuf[64];

  if (stream == NULL) return bp__error(BP_INVALID_ARGUMENT, "bp_op_run: stream is NULL");
  bp__clear_error();
  if (stream->queue != BP_QUEUE_COMPUTE) {
    return bp__error(BP_INVALID_ARGUMENT,
                     "bp_op_run: op %u on a copy-only stream of %s (create a compute stream)",
                     op_id, stream->device->name);
  }
  st = bp__prepare(&p, "bp_op_run", op_id, inputs, num_inputs, attrs, num_outputs);
  if (st != BP_OK) goto cleanup;
  const bp__op_meta_t* op = p.op;
  bp_device_t* device = stream->device;
  bp_plugin_t* plugin = device->plugin;

  for (uint32_t i = 0; i < num_inputs; ++i) {
    if (inputs[i] == NULL) continue;
    st = bp__check_placement(op, stream, inputs[i], "input",
                             bp__op_input_name(op, num_inputs, i, nbuf));
    if (st != BP_OK) goto cleanup;
  }
  if (outputs == NULL) {
    st = bp__error(BP_INVALID_ARGUMENT, "op '%s': outputs is NULL", op->name);
    goto cleanup;
  }
  for (uint32_t k = 0; k < num_outputs; ++k) {
    bp_tensor_t* t = outputs[k];
    outs[k] = t;
    memset(&given[k], 0, sizeof(given[k]));
    if (t == NULL) continue;
    const char* name = bp__op_output_name(op, k);
    st = bp__check_tensor(op, t, "output", name);
    if (st == BP_OK) st = bp__check_placement(op, stream, t, "output", name);
    if (st != BP_OK) goto cleanup;
    bp__desc_from_tensor(t, &given[k]);
  }
  p.x.given = given;
  st = bp__op_infer_descs(&p.x);
  if (st != BP_OK) goto cleanup;

  /* Given outputs: matching dtype and shape, no self-overlap, no overlap with
   * each other, and inputs only as exact in-place aliases. */
  for (uint32_t k = 0; k < num_outputs; ++k) {
    if (outs[k] == NULL) continue;
    const bp_tensor_desc_t* want = &p.x.out[k];
    const char* name = bp__op_output_name(op, k);
    if (given[k].dtype != want->dtype ||
        !bp__shape_equal(given[k].rank, given[k].sizes, want->rank, want->sizes)) {
      char s0[192], s1[192];
      st = bp__error(BP_INVALID_ARGUMENT,
                     "op '%s': output '%s' has dtype %s and shape %s; expected %s and %s",
                     op->name, name, bp_dtype_name(given[k].dtype),
                     bp__shape_str(given[k].rank, given[k].sizes, s0, sizeof(s0)),
                     bp_dtype_name(want->dtype),
                     bp__shape_str(want->rank, want->sizes, s1, sizeof(s1)));
      goto cleanup;
    }
    if (bp__self_overlapping(&given[k])) {
      st = bp__error(BP_INVALID_ARGUMENT,
                     "op '%s': output '%s' has internally overlapping elements (an expanded "
                     "view) and cannot be written",
                     op->name, name);
      goto cleanup;
    }
    for (uint32_t j = 0; j < k; ++j) {
      if (outs[j] != NULL && bp__spans_intersect(outs[j], outs[k])) {
        st = bp__error(BP_INVALID_ARGUMENT, "op '%s': outputs '%s' and '%s' overlap", op->name,
                       bp__op_output_name(op, j), name);
        goto cleanup;
      }
    }
    for (uint32_t i = 0; i < num_inputs; ++i) {
      if (inputs[i] == NULL || !bp__spans_intersect(inputs[i], outs[k])) continue;
      if (bp__same_layout(&p.in[i], &given[k]) && bp__op_allows_inplace(op, i)) continue;
      st = bp__error(BP_INVALID_ARGUMENT, "op '%s': output '%s' %s input '%s'", op->name, name,
                     bp__same_layout(&p.in[i], &given[k]) ? "aliases (op cannot run in place)"
                                                          : "partially overlaps",
                     bp__op_input_name(op, num_inputs, i, nbuf));
      goto cleanup;
    }
  }

  if (plugin->ops.launch_count <= op_id || plugin->ops.launch[op_id] == NULL) {
    st = bp__error(BP_UNIMPLEMENTED, "backend '%s' has no kernel for op '%s'", plugin->name,
                   op->name);
    bp__set_support_reason(BP_SUPPORT_OP);
    goto cleanup;
  }

  for (uint32_t k = 0; k < num_outputs; ++k) {
    out_desc[k] = outs[k] != NULL ? given[k] : p.x.out[k];
    out_ptr[k] = &out_desc[k];
  }
  bp_op_call_t call;
  memset(&call, 0, sizeof(call));
  call.struct_size = sizeof(call);
  call.op_id = op_id;
  call.num_inputs = num_inputs;
  call.num_outputs = num_outputs;
  call.compute_dtype = p.x.compute_dtype;
  bp__op_call_set_list(&call, op);
  call.inputs = p.in_ptr;
  call.outputs = out_ptr;
  call.attrs = p.x.attrs;

  int requires_contiguous = 0;
  if (plugin->abi_minor != BP_ABI_VERSION_MINOR) { /* older: gate by minor */
    bp_support_t refusal;
    if (bp__abi_gate_plugin(plugin, op, &call, &refusal)) {
      st = bp__error(BP_UNSUPPORTED, "backend '%s' does not support op '%s' here (%s): %s",
                     plugin->name, op->name, bp_support_reason_name(refusal.reason),
                     refusal.message);
      bp__set_support_reason(refusal.reason);
      goto cleanup;
    }
  }
  if (plugin->caps.query_support != NULL) {
    bp_support_t support;
    st = bp__query_support_checked(device, &call, &support);
    if (st != BP_OK) goto cleanup;
    if (!support.supported) {
      st = bp__error(BP_UNSUPPORTED, "backend '%s' does not support op '%s' here (%s): %s",
                     plugin->name, op->name, bp_support_reason_name(support.reason),
                     support.message);
      bp__set_support_reason(support.reason);
      goto cleanup;
    }
    requires_contiguous = support.requires_contiguous != 0;
  }

  for (uint32_t k = 0; k < num_outputs; ++k) {
    if (outs[k] != NULL) continue;
    const bp_tensor_desc_t* d = &p.x.out[k];
    st = bp_tensor_create(device, d->dtype, d->rank, d->sizes, &allocated[k]);
    if (st != BP_OK) goto cleanup;
    outs[k] = allocated[k];
  }
  for (uint32_t i = 0; i < num_inputs; ++i) {
    if (inputs[i] != NULL) bp__set_buffer(&p.in[i], inputs[i]);
  }
  for (uint32_t k = 0; k < num_outputs; ++k) {
    bp__desc_from_tensor(outs[k], &out_desc[k]);
    bp__set_buffer(&out_desc[k], outs[k]);
  }

  if (requires_contiguous) {
    temp_in = num_inputs <= BP__STACK_INPUTS ? temp_in_small
                                             : calloc(num_inputs, sizeof(bp_tensor_t*));
    if (temp_in == NULL) {
      st = bp__error(BP_RESOURCE_EXHAUSTED, "op '%s': out of host memory", op->name);
      goto cleanup;
    }
    memset(temp_in, 0, sizeof(bp_tensor_t*) * (num_inputs < 1 ? 1 : num_inputs));
    for (uint32_t i = 0; i < num_inputs; ++i) {
      if (inputs[i] == NULL || bp__desc_is_contiguous(&p.in[i])) continue;
      st = bp_tensor_create(device, p.in[i].dtype, p.in[i].rank, p.in[i].sizes, &temp_in[i]);
      if (st != BP_OK) goto cleanup;
      bp_tensor_desc_t dense;
      bp__desc_from_tensor(temp_in[i], &dense);
      bp__set_buffer(&dense, temp_in[i]);
      st = bp__launch_copy(plugin, stream, op, &dense, &p.in[i]);
      launched = 1;
      if (st != BP_OK) goto cleanup;
      p.in[i] = dense;
    }
    for (uint32_t k = 0; k < num_outputs; ++k) {
      if (bp__desc_is_contiguous(&out_desc[k])) continue;
      st = bp_tensor_create(device, out_desc[k].dtype, out_desc[k].rank, out_desc[k].sizes,
                            &temp_out[k]);
      if (st != BP_OK) goto cleanup;
      bp__desc_from_tensor(temp_out[k], &out_desc[k]);
      bp__set_buffer(&out_desc[k], temp_out[k]);
    }
  }

  const bp_context_t* ctx = plugin->context;
  if (ctx->trace_begin != NULL) ctx->trace_begin(ctx->trace_user_data, op_id, device, stream);
  bp__clear_error();
  st = BP__NOTE_CALL(plugin, "launch", op->name, plugin->ops.launch[op_id](stream->handle, &call));
  launched = 1;
  if (ctx->trace_end != NULL) ctx->trace_end(ctx->trace_user_data, op_id, device, stream, st);
  if (st != BP_OK) {
    char what[96];
    snprintf(what, sizeof(what), "op '%s'", op->name);
    st = bp__plugin_error(plugin, st, what);
    goto cleanup;
  }
  for (uint32_t k = 0; k < num_outputs; ++k) {
    if (temp_out[k] == NULL) continue;
    bp_tensor_desc_t real;
    bp__desc_from_tensor(outs[k], &real);
    bp__set_buffer(&real, outs[k]);
    st = bp__launch_copy(plugin, stream, op, &real, &out_desc[k]);
    if (st != BP_OK) goto cleanup;
  }
  for (uint32_t k = 0; k < num_outputs; ++k) outputs[k] = outs[k];
  for (uint32_t k = 0; k < num_outputs; ++k) allocated[k] = NULL; /* now the caller's */

cleanup:
  if (launched) {
    /* Buffers stay alive until the enqueued work has completed. */
    for (uint32_t i = 0; i < num_inputs; ++i) {
      if (inputs[i] != NULL) bp__buffer_note_use(inputs[i]->buffer, stream);
      if (temp_in != NULL && temp_in[i] != NULL) bp__buffer_note_use(temp_in[i]->buffer, stream);
    }
    for (uint32_t k = 0; k < num_outputs; ++k) {
      if (outs[k] != NULL) bp__buffer_note_use(outs[k]->buffer, stream);
      if (temp_out[k] != NULL) bp__buffer_note_use(temp_out[k]->buffer, stream);
    }
  }
  if (temp_in != NULL) {
    for (uint32_t i = 0; i < num_inputs; ++i) {
      if (temp_in[i] != NULL) bp_tensor_release(temp_in[i]);
    }
    if (temp_in != temp_in_small) free(temp_in);
  }
  for (uint32_t k = 0; k < BP__MAX_OUTPUTS; ++k) {
    if (temp_out[k] != NULL) bp_tensor_release(temp_out[k]);
    if (allocated[k] != NULL) bp_tensor_release(allocated[k]);
  }
  bp__prep_free(&p);
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
