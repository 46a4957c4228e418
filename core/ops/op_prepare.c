/* backplane core: the first step of bp_op_infer and bp_op_run (see
 * op_run_internal.h): op lookup, operand counts, NULL operands, attributes
 * and input descriptors; and bp_op_infer itself.
 *
 * Threading: thread-safe (no shared state).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ops/op_run_internal.h"

void bp__prep_free(bp__prep_t* p) {
  if (p->in != NULL && p->in != p->stack_in) free(p->in);
  p->in = NULL;
}

void bp__desc_from_tensor(const bp_tensor_t* t, bp_tensor_desc_t* d) {
  memset(d, 0, sizeof(*d));
  d->struct_size = sizeof(*d);
  d->dtype = t->dtype;
  d->rank = t->rank;
  d->byte_offset = t->byte_offset;
  memcpy(d->sizes, t->sizes, sizeof(int64_t) * t->rank);
  memcpy(d->strides, t->strides, sizeof(int64_t) * t->rank);
}

void bp__set_buffer(bp_tensor_desc_t* d, const bp_tensor_t* t) {
  d->buffer = t->buffer->handle;
}

bp_status_t bp__check_tensor(const bp__op_meta_t* op, const bp_tensor_t* t,
                                    const char* kind, const char* name) {
  if (!bp__dtype_valid(t->dtype) || t->rank > BP_MAX_RANK) {
    return bp__error(BP_INVALID_ARGUMENT, "op '%s': %s '%s' is not a valid tensor (dtype %u, rank %u)",
                     op->name, kind, name, t->dtype, t->rank);
  }
  return BP_OK;
}

/* bp__prepare over tensors (inputs) or plain descriptors (descs, strides
 * and offsets taken as given; an absent operand is NULL or has dtype
 * INVALID): exactly one of the two arrays is used. */
static bp_status_t bp__prepare_any(bp__prep_t* p, const char* api, uint32_t op_id,
                                   const bp_tensor_t* const* inputs,
                                   const bp_tensor_desc_t* const* descs, uint32_t num_inputs,
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
  if (inputs == NULL && descs == NULL && num_inputs > 0) {
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
    const bp_tensor_t* t = inputs != NULL ? inputs[i] : NULL;
    const bp_tensor_desc_t* d = descs != NULL ? descs[i] : NULL;
    if (d != NULL && d->dtype == BP_DTYPE_INVALID) d = NULL;
    if (t == NULL && d == NULL) {
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
    if (d != NULL) {
      if (d->struct_size < BP_TENSOR_DESC_V1_SIZE || !bp__dtype_valid(d->dtype) ||
          d->rank > BP_MAX_RANK) {
        return bp__error(BP_INVALID_ARGUMENT,
                         "op '%s': input '%s' is not a valid descriptor (struct_size %u, dtype %u, rank %u)",
                         op->name, bp__op_input_name(op, num_inputs, i, nbuf), d->struct_size,
                         d->dtype, d->rank);
      }
      memset(&p->in[i], 0, sizeof(p->in[i]));
      memcpy(&p->in[i], d, BP_TENSOR_DESC_V1_SIZE);
      p->in[i].struct_size = sizeof(p->in[i]);
      p->in[i].buffer = NULL;
      p->in[i].quant = NULL;
      p->in[i].next = NULL;
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

bp_status_t bp__prepare(bp__prep_t* p, const char* api, uint32_t op_id,
                        const bp_tensor_t* const* inputs, uint32_t num_inputs, const void* attrs,
                        uint32_t num_outputs) {
  return bp__prepare_any(p, api, op_id, inputs, NULL, num_inputs, attrs, num_outputs);
}

/* bp_op_infer and bp_op_infer_desc: one of inputs / descs is used. */
static bp_status_t bp__infer_any(const char* api, uint32_t op_id, const bp_tensor_t* const* inputs,
                                 const bp_tensor_desc_t* const* descs, uint32_t num_inputs,
                                 const void* attrs, bp_tensor_desc_t* const* out_outputs,
                                 uint32_t num_outputs) {
  bp__prep_t p;
  bp_tensor_desc_t hints[BP__MAX_OUTPUTS];
  bp_status_t st = bp__prepare_any(&p, api, op_id, inputs, descs, num_inputs, attrs, num_outputs);
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
    st = bp__out_struct_write(api, "bp_tensor_desc_t", out_outputs[k], &p.x.out[k],
                              sizeof(p.x.out[k]), BP_TENSOR_DESC_V1_SIZE);
    if (st != BP_OK) goto cleanup;
  }
cleanup:
  bp__prep_free(&p);
  return st;
}

bp_status_t bp_op_infer(uint32_t op_id, const bp_tensor_t* const* inputs, uint32_t num_inputs,
                        const void* attrs, bp_tensor_desc_t* const* out_outputs,
                        uint32_t num_outputs) {
  return bp__infer_any("bp_op_infer", op_id, inputs, NULL, num_inputs, attrs, out_outputs,
                       num_outputs);
}

bp_status_t bp_op_infer_desc(uint32_t op_id, const bp_tensor_desc_t* const* inputs,
                             uint32_t num_inputs, const void* attrs,
                             bp_tensor_desc_t* const* out_outputs, uint32_t num_outputs) {
  return bp__infer_any("bp_op_infer_desc", op_id, NULL, inputs, num_inputs, attrs, out_outputs,
                       num_outputs);
}
