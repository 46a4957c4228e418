/* backplane core: validation of region descriptions (bp_region_desc_t).
 *
 * A region comes from the application (the graph compiler); before a
 * plugin sees it, every count, id and descriptor is checked, each node's
 * attributes are filled to this header's size (defaults, enum values) and
 * its output dtypes and shapes are checked by the op's own inference rule,
 * so a plugin gets the same guarantees as for an eager op call.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "exec/exec_internal.h"

/* Bounds that keep every count and allocation sane. */
#define BP__REGION_MAX_VALUES (1u << 20)
#define BP__REGION_MAX_NODES (1u << 18)
#define BP__REGION_MAX_NODE_OPERANDS 4096u

void bp__support_set(bp_support_t* out, uint32_t supported, uint32_t reason, const char* fmt,
                     ...) {
  memset(out, 0, sizeof(*out));
  out->struct_size = sizeof(*out);
  out->supported = supported;
  out->reason = reason;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(out->message, sizeof(out->message), fmt, ap);
  va_end(ap);
}

void bp__region_checked_free(bp__region_checked_t* c) {
  free(c->values);
  free(c->value_ptrs);
  free(c->nodes);
  free(c->node_ptrs);
  free(c->ids);
  free(c->attrs);
  free((void*)c->program.instrs);
  memset(c, 0, sizeof(*c));
}

static bp_status_t check_value(const char* api, const bp_tensor_desc_t* v, uint32_t id,
                               bp_tensor_desc_t* out) {
  if (v == NULL) return bp__error(BP_INVALID_ARGUMENT, "%s: value %u is NULL", api, id);
  if (v->struct_size < BP_TENSOR_DESC_V1_SIZE || v->struct_size > 4096)
    return bp__error(BP_INVALID_ARGUMENT, "%s: value %u has struct_size %u (expected >= %u)", api,
                     id, v->struct_size, BP_TENSOR_DESC_V1_SIZE);
  char dbuf[32];
  if (!bp__dtype_valid(v->dtype))
    return bp__error(BP_INVALID_ARGUMENT, "%s: value %u has invalid dtype %s", api, id,
                     bp__dtype_str(v->dtype, dbuf));
  if (v->rank > BP_MAX_RANK)
    return bp__error(BP_INVALID_ARGUMENT, "%s: value %u has rank %u (at most %d)", api, id,
                     v->rank, BP_MAX_RANK);
  if (v->layout != BP_LAYOUT_STRIDED || v->quant != NULL)
    return bp__error(BP_INVALID_ARGUMENT,
                     "%s: value %u is not a plain strided tensor (regions take strided values)",
                     api, id);
  for (uint32_t d = 0; d < v->rank; ++d)
    if (v->sizes[d] < 0)
      return bp__error(BP_INVALID_ARGUMENT, "%s: value %u has size %lld in dim %u", api, id,
                       (long long)v->sizes[d], d);
  int64_t numel;
  uint64_t bytes;
  if (bp__numel(v->rank, v->sizes, &numel) || bp__nbytes(v->dtype, numel, &bytes))
    return bp__error(BP_INVALID_ARGUMENT, "%s: value %u is too large (its byte size overflows)",
                     api, id);
  char name[32];
  snprintf(name, sizeof(name), "value %u", id);
  return bp__desc_dense(out, v->dtype, v->rank, v->sizes, api, name);
}

/* Value ids of one node: in range, written once, read after written. */
static bp_status_t check_node_ids(const char* api, const bp_region_desc_t* r, uint32_t n,
                                  const bp_region_node_t* node, const bp__op_meta_t* op,
                                  uint8_t* written) {
  uint32_t optional = bp__op_optional_mask(node->op_id);
  for (uint32_t i = 0; i < node->num_inputs; ++i) {
    uint32_t id = node->inputs[i];
    if (id == BP_REGION_VALUE_NONE) {
      int fixed_index = !op->has_list || i < op->num_before
                            ? (int)i
                            : (i >= node->num_inputs - op->num_after
                                   ? (int)(op->num_before + (i - (node->num_inputs - op->num_after)))
                                   : -1);
      if (fixed_index < 0 || fixed_index >= 32 || !(optional & (1u << fixed_index)))
        return bp__error(BP_INVALID_ARGUMENT, "%s: node %u (op '%s'): input %u is absent but not optional",
                         api, n, op->name, i);
      continue;
    }
    if (id >= r->num_values)
      return bp__error(BP_INVALID_ARGUMENT, "%s: node %u (op '%s'): input %u is value %u of %u",
                       api, n, op->name, i, id, r->num_values);
    if (id >= r->num_inputs && !written[id])
      return bp__error(BP_INVALID_ARGUMENT,
                       "%s: node %u (op '%s'): input %u reads value %u before any node writes it "
                       "(nodes must be in topological order)",
                       api, n, op->name, i, id);
  }
  for (uint32_t k = 0; k < node->num_outputs; ++k) {
    uint32_t id = node->outputs[k];
    if (id >= r->num_values)
      return bp__error(BP_INVALID_ARGUMENT, "%s: node %u (op '%s'): output %u is value %u of %u",
                       api, n, op->name, k, id, r->num_values);
    if (id < r->num_inputs)
      return bp__error(BP_INVALID_ARGUMENT,
                       "%s: node %u (op '%s'): output %u writes value %u, an input argument", api,
                       n, op->name, k, id);
    if (written[id])
      return bp__error(BP_INVALID_ARGUMENT, "%s: node %u (op '%s'): value %u is written twice",
                       api, n, op->name, id);
    written[id] = 1;
  }
  return BP_OK;
}

/* Infers the node's outputs from its input values and compares them with
 * the output values; fills the node's attributes and compute dtype. */
static bp_status_t check_node_types(const char* api, bp__region_checked_t* c, uint32_t n,
                                    const bp__op_meta_t* op, const void* attrs,
                                    bp_region_node_t* node) {
  const void* filled = NULL;
  bp_status_t st = bp__attrs_fill(op, attrs, &c->attrs[n], &filled);
  if (st != BP_OK) return st;
  node->attrs = filled;
  bp_tensor_desc_t* in = calloc(node->num_inputs ? node->num_inputs : 1, sizeof(*in));
  if (in == NULL) return bp__error(BP_RESOURCE_EXHAUSTED, "%s: out of memory", api);
  for (uint32_t i = 0; i < node->num_inputs; ++i) {
    uint32_t id = node->inputs[i];
    if (id == BP_REGION_VALUE_NONE) {
      in[i].struct_size = sizeof(in[i]);
      in[i].dtype = BP_DTYPE_INVALID;
    } else {
      in[i] = c->values[id];
    }
  }
  bp__infer_t x;
  memset(&x, 0, sizeof(x));
  x.op = op;
  x.num_inputs = node->num_inputs;
  x.in = in;
  x.attrs = filled;
  st = bp__op_infer_descs(&x);
  free(in);
  if (st != BP_OK) {
    char msg[512];
    snprintf(msg, sizeof(msg), "%s", bp_status_message());
    return bp__error(st, "%s: node %u: %s", api, n, msg);
  }
  for (uint32_t k = 0; k < node->num_outputs; ++k) {
    const bp_tensor_desc_t* want = &x.out[k];
    const bp_tensor_desc_t* got = &c->values[node->outputs[k]];
    if (want->dtype != got->dtype || !bp__shape_equal(want->rank, want->sizes, got->rank, got->sizes)) {
      char s0[192], s1[192];
      return bp__error(BP_INVALID_ARGUMENT,
                       "%s: node %u (op '%s'): output %u (value %u) is %s %s; the op gives %s %s",
                       api, n, op->name, k, node->outputs[k], bp_dtype_name(got->dtype),
                       bp__shape_str(got->rank, got->sizes, s0, sizeof(s0)),
                       bp_dtype_name(want->dtype),
                       bp__shape_str(want->rank, want->sizes, s1, sizeof(s1)));
    }
  }
  if (node->compute_dtype == BP_DTYPE_INVALID) node->compute_dtype = x.compute_dtype;
  else if (!bp__dtype_valid(node->compute_dtype))
    return bp__error(BP_INVALID_ARGUMENT, "%s: node %u (op '%s'): invalid compute dtype %u", api,
                     n, op->name, node->compute_dtype);
  return BP_OK;
}

static bp_status_t check_nodes(const char* api, const bp_region_desc_t* r,
                               bp__region_checked_t* c) {
  if (r->nodes == NULL) return bp__error(BP_INVALID_ARGUMENT, "%s: region has %u nodes but nodes is NULL", api, r->num_nodes);
  size_t total_ids = 0;
  for (uint32_t n = 0; n < r->num_nodes; ++n) {
    const bp_region_node_t* node = r->nodes[n];
    if (node == NULL) return bp__error(BP_INVALID_ARGUMENT, "%s: node %u is NULL", api, n);
    if (node->struct_size < BP_REGION_NODE_V1_SIZE || node->struct_size > 4096)
      return bp__error(BP_INVALID_ARGUMENT, "%s: node %u has struct_size %u (expected >= %u)", api,
                       n, node->struct_size, BP_REGION_NODE_V1_SIZE);
    if (node->num_inputs > BP__REGION_MAX_NODE_OPERANDS || node->num_outputs > BP__MAX_OUTPUTS)
      return bp__error(BP_INVALID_ARGUMENT, "%s: node %u has %u inputs and %u outputs", api, n,
                       node->num_inputs, node->num_outputs);
    if ((node->num_inputs && node->inputs == NULL) || (node->num_outputs && node->outputs == NULL))
      return bp__error(BP_INVALID_ARGUMENT, "%s: node %u has a NULL input or output id array",
                       api, n);
    total_ids += (size_t)node->num_inputs + node->num_outputs;
  }
  c->nodes = calloc(r->num_nodes, sizeof(*c->nodes));
  c->node_ptrs = calloc(r->num_nodes, sizeof(*c->node_ptrs));
  c->attrs = calloc(r->num_nodes, sizeof(*c->attrs));
  c->ids = calloc(total_ids ? total_ids : 1, sizeof(*c->ids));
  uint8_t* written = calloc(r->num_values, 1);
  bp_status_t st = BP_OK;
  if (!c->nodes || !c->node_ptrs || !c->attrs || !c->ids || !written) {
    st = bp__error(BP_RESOURCE_EXHAUSTED, "%s: out of memory for %u nodes", api, r->num_nodes);
    goto done;
  }
  uint32_t* ids = c->ids;
  for (uint32_t n = 0; n < r->num_nodes && st == BP_OK; ++n) {
    const bp_region_node_t* src = r->nodes[n];
    const bp__op_meta_t* op = bp__op_meta(src->op_id);
    if (op == NULL) {
      st = bp__error(BP_INVALID_ARGUMENT, "%s: node %u has unknown op id %u", api, n, src->op_id);
      break;
    }
    uint32_t fixed = (uint32_t)op->num_before + op->num_after;
    if ((op->has_list ? src->num_inputs < fixed : src->num_inputs != fixed) ||
        src->num_outputs != op->num_outputs) {
      st = bp__error(BP_INVALID_ARGUMENT, "%s: node %u (op '%s') has %u inputs and %u outputs; the op takes %s%u and %u",
                     api, n, op->name, src->num_inputs, src->num_outputs,
                     op->has_list ? "at least " : "", fixed, op->num_outputs);
      break;
    }
    bp_region_node_t* node = &c->nodes[n];
    memcpy(node, src, BP_REGION_NODE_V1_SIZE);
    node->struct_size = sizeof(*node);
    node->next = NULL;
    memcpy(ids, src->inputs, sizeof(uint32_t) * src->num_inputs);
    memcpy(ids + src->num_inputs, src->outputs, sizeof(uint32_t) * src->num_outputs);
    node->inputs = ids;
    node->outputs = ids + src->num_inputs;
    ids += src->num_inputs + src->num_outputs;
    bp_op_call_t tmp = {.num_inputs = node->num_inputs};
    bp__op_call_set_list(&tmp, op);
    node->list_begin = tmp.list_begin;
    node->list_count = tmp.list_count;
    st = check_node_ids(api, r, n, node, op, written);
    if (st == BP_OK) st = check_node_types(api, c, n, op, src->attrs, node);
    c->node_ptrs[n] = node;
  }
  for (uint32_t v = r->num_inputs; v < r->num_args && st == BP_OK; ++v)
    if (!written[v])
      st = bp__error(BP_INVALID_ARGUMENT, "%s: output argument %u (value %u) is written by no node",
                     api, v - r->num_inputs, v);
done:
  free(written);
  return st;
}

static bp_status_t check_program_region(const char* api, const bp_region_desc_t* r,
                                        bp__region_checked_t* c) {
  if (r->num_nodes != 0)
    return bp__error(BP_INVALID_ARGUMENT, "%s: an EW_PROGRAM region has no nodes (got %u)", api,
                     r->num_nodes);
  if (r->program == NULL)
    return bp__error(BP_INVALID_ARGUMENT, "%s: an EW_PROGRAM region needs a program", api);
  if (r->num_values != r->num_args)
    return bp__error(BP_INVALID_ARGUMENT,
                     "%s: an EW_PROGRAM region has no temporaries (%u values, %u arguments)", api,
                     r->num_values, r->num_args);
  uint32_t nout = r->num_args - r->num_inputs;
  bp_status_t st = bp__ew_program_check(api, r->program, r->num_inputs, nout);
  if (st != BP_OK) return st;
  const bp_tensor_desc_t* o0 = &c->values[r->num_inputs];
  for (uint32_t k = 1; k < nout; ++k) {
    const bp_tensor_desc_t* o = &c->values[r->num_inputs + k];
    if (!bp__shape_equal(o->rank, o->sizes, o0->rank, o0->sizes))
      return bp__error(BP_INVALID_ARGUMENT, "%s: program output %u's shape differs from output 0's", api, k);
  }
  for (uint32_t i = 0; i < r->num_inputs; ++i) {
    const bp_tensor_desc_t* in = &c->values[i];
    int ok = in->rank <= o0->rank;
    for (uint32_t d = 0; ok && d < in->rank; ++d) {
      int64_t s = in->sizes[in->rank - 1 - d], t = o0->sizes[o0->rank - 1 - d];
      ok = s == t || s == 1;
    }
    if (!ok) {
      char s0[192], s1[192];
      return bp__error(BP_INVALID_ARGUMENT, "%s: program input %u of shape %s does not broadcast to the outputs' %s",
                       api, i, bp__shape_str(in->rank, in->sizes, s0, sizeof(s0)),
                       bp__shape_str(o0->rank, o0->sizes, s1, sizeof(s1)));
    }
  }
  bp_ew_instr_t* instrs = calloc(r->program->num_instrs ? r->program->num_instrs : 1, sizeof(*instrs));
  if (instrs == NULL) return bp__error(BP_RESOURCE_EXHAUSTED, "%s: out of memory", api);
  bp__ew_program_copy(r->program, instrs, &c->program);
  c->desc.program = &c->program;
  return BP_OK;
}

bp_status_t bp__region_check(const char* api, const bp_region_desc_t* r, bp__region_checked_t* c) {
  memset(c, 0, sizeof(*c));
  if (r == NULL) return bp__error(BP_INVALID_ARGUMENT, "%s: region is NULL", api);
  if (r->struct_size < BP_REGION_DESC_V1_SIZE || r->struct_size > 4096)
    return bp__error(BP_INVALID_ARGUMENT, "%s: region struct_size %u (expected >= %u)", api,
                     r->struct_size, BP_REGION_DESC_V1_SIZE);
  if (r->kind == 0 || r->kind >= BP_REGION_KIND_COUNT_)
    return bp__error(BP_INVALID_ARGUMENT, "%s: unknown region kind %u", api, r->kind);
  if (r->flags != 0)
    return bp__error(BP_INVALID_ARGUMENT, "%s: region flags 0x%x (reserved, 0)", api, r->flags);
  if (r->num_values > BP__REGION_MAX_VALUES || r->num_nodes > BP__REGION_MAX_NODES)
    return bp__error(BP_INVALID_ARGUMENT, "%s: region has %u values and %u nodes (limits %u, %u)",
                     api, r->num_values, r->num_nodes, BP__REGION_MAX_VALUES, BP__REGION_MAX_NODES);
  if (r->num_inputs > r->num_args || r->num_args > r->num_values ||
      (r->kind != BP_REGION_GRAPH && r->num_args == r->num_inputs))
    return bp__error(BP_INVALID_ARGUMENT,
                     "%s: region has %u values, %u arguments and %u inputs (need inputs <= "
                     "arguments <= values, and at least one output)",
                     api, r->num_values, r->num_args, r->num_inputs);
  if (r->num_values > 0 && r->values == NULL)
    return bp__error(BP_INVALID_ARGUMENT, "%s: region has %u values but values is NULL", api,
                     r->num_values);
  c->values = calloc(r->num_values ? r->num_values : 1, sizeof(*c->values));
  c->value_ptrs = calloc(r->num_values ? r->num_values : 1, sizeof(*c->value_ptrs));
  if (!c->values || !c->value_ptrs) return bp__error(BP_RESOURCE_EXHAUSTED, "%s: out of memory", api);
  for (uint32_t v = 0; v < r->num_values; ++v) {
    bp_status_t st = check_value(api, r->values[v], v, &c->values[v]);
    if (st != BP_OK) return st;
    c->value_ptrs[v] = &c->values[v];
  }
  memcpy(&c->desc, r, BP_REGION_DESC_V1_SIZE);
  c->desc.struct_size = sizeof(c->desc);
  c->desc.values = c->value_ptrs;
  c->desc.nodes = NULL;
  c->desc.program = NULL;
  c->desc.next = NULL;
  if (r->kind == BP_REGION_EW_PROGRAM) return check_program_region(api, r, c);
  if (r->program != NULL)
    return bp__error(BP_INVALID_ARGUMENT, "%s: only EW_PROGRAM regions carry a program", api);
  if (r->num_nodes == 0) return bp__error(BP_INVALID_ARGUMENT, "%s: the region has no nodes", api);
  if (r->kind == BP_REGION_PATTERN && r->num_nodes != 1)
    return bp__error(BP_INVALID_ARGUMENT, "%s: a PATTERN region has one node (got %u)", api,
                     r->num_nodes);
  bp_status_t st = check_nodes(api, r, c);
  if (st != BP_OK) return st;
  c->desc.nodes = c->node_ptrs;
  if (r->kind == BP_REGION_EPILOGUE) {
    uint32_t a = c->nodes[0].op_id;
    if (a != BP_OP_mm && a != BP_OP_addmm && a != BP_OP_linear && a != BP_OP_bmm &&
        a != BP_OP_convolution)
      return bp__error(BP_INVALID_ARGUMENT,
                       "%s: an EPILOGUE region starts with mm, bmm, addmm, linear or convolution "
                       "(got '%s')",
                       api, bp__op_meta(a)->name);
  }
  return BP_OK;
}
