/* backplane core: bp_op_run's validate step (op_run_internal.h): placement
 * and bounds of every operand, shape/dtype inference, the given outputs
 * (shape, dtype, overlap, aliasing) and the plugin's kernel slot. Nothing
 * is enqueued or allocated here.
 */
#include <stdio.h>
#include <string.h>

#include "ops/op_run_internal.h"

/* ---- aliasing ------------------------------------------------------------------- */

int bp__same_layout(const bp_tensor_desc_t* a, const bp_tensor_desc_t* b) {
  return a->byte_offset == b->byte_offset && bp_dtype_size(a->dtype) == bp_dtype_size(b->dtype) &&
         bp__shape_equal(a->rank, a->sizes, b->rank, b->sizes) &&
         memcmp(a->strides, b->strides, sizeof(int64_t) * a->rank) == 0;
}

/* Ops that may write output `output` over input `input` with the identical
 * layout: elementwise ops, the PyTorch in-place updates of `self`, the KV
 * cache update of each cache, the rotary embedding of query and key, and
 * the logits processors. */
static int bp__op_allows_inplace(const bp__op_meta_t* op, uint32_t input, uint32_t output) {
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
    case BP_OP_kv_cache_append: case BP_OP_rotary_embedding_pos:
    case BP_OP_kv_cache_copy_blocks:
      return input == output;
    case BP_OP_concat_and_cache_mla: /* the cache (input 2) into kv_cache_out */
      return input == 2 && output == 0;
    case BP_OP_logits_softcap: case BP_OP_top_k_top_p_mask:
      return 1;
    default:
      return 0;
  }
}

/* Nonzero when two distinct elements of `d` share memory (an expanded view). */
int bp__self_overlapping(const bp_tensor_desc_t* d) {
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

int bp__spans_intersect(const bp_tensor_t* a, const bp_tensor_t* b) {
  uint64_t alo, ahi, blo, bhi;
  if (a->buffer != b->buffer) return 0;
  if (bp__tensor_span(a->dtype, a->rank, a->sizes, a->strides, a->byte_offset, &alo, &ahi) ||
      bp__tensor_span(b->dtype, b->rank, b->sizes, b->strides, b->byte_offset, &blo, &bhi)) {
    return 1; /* cannot happen after the span checks; be safe */
  }
  return alo < ahi && blo < bhi && alo < bhi && blo < ahi;
}

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

bp_status_t bp__run_validate(bp__run_t* r) {
  char nbuf[64];
  bp_status_t st = bp__prepare(&r->p, "bp_op_run", r->op_id, r->inputs, r->num_inputs, r->attrs,
                               r->num_outputs);
  if (st != BP_OK) return st;
  const bp__op_meta_t* op = r->p.op;
  r->device = r->stream->device;
  r->plugin = r->device->plugin;

  for (uint32_t i = 0; i < r->num_inputs; ++i) {
    if (r->inputs[i] == NULL) continue;
    st = bp__check_placement(op, r->stream, r->inputs[i], "input",
                             bp__op_input_name(op, r->num_inputs, i, nbuf));
    if (st != BP_OK) return st;
  }
  if (r->outputs == NULL) {
    return bp__error(BP_INVALID_ARGUMENT, "op '%s': outputs is NULL", op->name);
  }
  for (uint32_t k = 0; k < r->num_outputs; ++k) {
    bp_tensor_t* t = r->outputs[k];
    r->outs[k] = t;
    memset(&r->given[k], 0, sizeof(r->given[k]));
    if (t == NULL) continue;
    const char* name = bp__op_output_name(op, k);
    st = bp__check_tensor(op, t, "output", name);
    if (st == BP_OK) st = bp__check_placement(op, r->stream, t, "output", name);
    if (st != BP_OK) return st;
    bp__desc_from_tensor(t, &r->given[k]);
  }
  r->p.x.given = r->given;
  st = bp__op_infer_descs(&r->p.x);
  if (st != BP_OK) return st;

  /* Given outputs: matching dtype and shape, no self-overlap, no overlap with
   * each other, and inputs only as exact in-place aliases. */
  for (uint32_t k = 0; k < r->num_outputs; ++k) {
    if (r->outs[k] == NULL) continue;
    const bp_tensor_desc_t* want = &r->p.x.out[k];
    const bp_tensor_desc_t* given = &r->given[k];
    const char* name = bp__op_output_name(op, k);
    if (given->dtype != want->dtype ||
        !bp__shape_equal(given->rank, given->sizes, want->rank, want->sizes)) {
      char s0[192], s1[192];
      return bp__error(BP_INVALID_ARGUMENT,
                       "op '%s': output '%s' has dtype %s and shape %s; expected %s and %s",
                       op->name, name, bp_dtype_name(given->dtype),
                       bp__shape_str(given->rank, given->sizes, s0, sizeof(s0)),
                       bp_dtype_name(want->dtype),
                       bp__shape_str(want->rank, want->sizes, s1, sizeof(s1)));
    }
    if (bp__self_overlapping(given)) {
      return bp__error(BP_INVALID_ARGUMENT,
                       "op '%s': output '%s' has internally overlapping elements (an expanded "
                       "view) and cannot be written",
                       op->name, name);
    }
    for (uint32_t j = 0; j < k; ++j) {
      if (r->outs[j] != NULL && bp__spans_intersect(r->outs[j], r->outs[k])) {
        return bp__error(BP_INVALID_ARGUMENT, "op '%s': outputs '%s' and '%s' overlap", op->name,
                         bp__op_output_name(op, j), name);
      }
    }
    for (uint32_t i = 0; i < r->num_inputs; ++i) {
      if (r->inputs[i] == NULL || !bp__spans_intersect(r->inputs[i], r->outs[k])) continue;
      int same = bp__same_layout(&r->p.in[i], given);
      if (same && bp__op_allows_inplace(op, i, k)) continue;
      return bp__error(BP_INVALID_ARGUMENT, "op '%s': output '%s' %s input '%s'", op->name, name,
                       same ? "aliases (op cannot run in place)" : "partially overlaps",
                       bp__op_input_name(op, r->num_inputs, i, nbuf));
    }
  }

  if (r->plugin->ops.launch_count <= r->op_id || r->plugin->ops.launch[r->op_id] == NULL) {
    st = bp__error(BP_UNIMPLEMENTED, "backend '%s' has no kernel for op '%s'", r->plugin->name,
                   op->name);
    bp__set_support_reason(BP_SUPPORT_OP);
    return st;
  }
  return BP_OK;
}
