/* backplane plugin kit: the op-info table generated from ops.def, and call
 * checks. See bp_kit_ops.h. */
#include <stdio.h>
#include <string.h>

#include "bp_kit_ops.h"
#include "bp_kit_plugin.h"

/* Inputs expand to two initializers: the count (-1: a variadic list) and
 * the names, "self,opt_other", to find the optional (opt_) operands. */
#define BP_IN0() "", 0
#define BP_IN1(a) #a, 1
#define BP_IN2(a, b) #a "," #b, 2
#define BP_IN3(a, b, c) #a "," #b "," #c, 3
#define BP_IN4(a, b, c, d) #a "," #b "," #c "," #d, 4
#define BP_IN5(a, b, c, d, e) #a "," #b "," #c "," #d "," #e, 5
#define BP_IN6(a, b, c, d, e, f) #a "," #b "," #c "," #d "," #e "," #f, 6
#define BP_INV(l) #l, -1
#define BP_IN1V(a, l) #a "," #l, -1
#define BP_IN1V1(a, l, b) #a "," #l "," #b, -1
#define BP_OUT1(a) 1
#define BP_OUT2(a, b) 2
#define BP_OUT3(a, b, c) 3
#define BP_OUT4(a, b, c, d) 4

/* bp_no_attrs_t carries nothing: size 0 marks "no attributes expected". */
#define BP_OP(id, name, cat, fam, ins, outs, attrs, rule, aten)                          \
  [id] = {#name, ins, outs, BP_OP_CATEGORY_##cat, BP_OP_FAMILY_##fam,                    \
          __builtin_types_compatible_p(attrs, bp_no_attrs_t) ? 0 : sizeof(attrs)},
static const bp_kit_op_info_t k_ops[BP_OP_COUNT] = {
#include "backplane/ops.def"
};
#undef BP_OP

const bp_kit_op_info_t* bp_kit_op_info(uint32_t op) {
  return op < BP_OP_COUNT && k_ops[op].name ? &k_ops[op] : NULL;
}

const char* bp_kit_op_name(uint32_t op) {
  const bp_kit_op_info_t* m = bp_kit_op_info(op);
  return m ? m->name : "unknown";
}

int bp_kit_op_input_optional(uint32_t op, uint32_t i) {
  const bp_kit_op_info_t* m = bp_kit_op_info(op);
  if (!m) return 0;
  /* index and index_put: absent list entries are full slices. */
  if ((op == BP_OP_index || op == BP_OP_index_put) && i >= 1) return 1;
  /* Binary ops take a scalar in place of self or other (attrs flags). */
  if (m->attrs_size == sizeof(bp_binary_attrs_t) && i < 2 &&
      (m->category == BP_OP_CATEGORY_BINARY || m->category == BP_OP_CATEGORY_LOGICAL))
    return 1;
  const char* p = m->input_names;
  for (uint32_t k = 0; k < i && p; k++) {
    p = strchr(p, ',');
    if (p) p++;
  }
  return p && strncmp(p, "opt_", 4) == 0;
}

static bp_status_t check_operand(uint32_t op, const bp_tensor_desc_t* d,
                                 int is_input, uint32_t i, bp_kit_buffer_size_fn buffer_size) {
  /* Cheap checks first; the operand's name is formatted only on failure. */
  if (!d)
    return BP_KIT_ERROR(BP_INVALID_ARGUMENT, "%s: %s %u: NULL descriptor pointer",
                        bp_kit_op_name(op), is_input ? "input" : "output", i);
  if (d->struct_size >= BP_TENSOR_DESC_V1_SIZE && d->dtype == BP_DTYPE_INVALID && is_input &&
      bp_kit_op_input_optional(op, i))
    return BP_OK;
  char msg[BP_PLUGIN_MSG_CAP];
  bp_status_t st = BP_OK;
  if (d->struct_size >= BP_TENSOR_DESC_V1_SIZE && d->dtype != BP_DTYPE_INVALID && d->buffer) {
    uint64_t bytes = buffer_size ? buffer_size(d->buffer) : UINT64_MAX;
    st = bp_plugin_check_desc(d, bytes, "", msg, sizeof msg);
    if (st == BP_OK) return BP_OK;
  }
  const char* what = is_input ? "input" : "output";
  const char* name = bp_kit_op_name(op);
  if (d->struct_size < BP_TENSOR_DESC_V1_SIZE)
    return BP_KIT_ERROR(BP_INVALID_ARGUMENT, "%s: %s %u: descriptor struct_size %u < %u",
                        name, what, i, d->struct_size, BP_TENSOR_DESC_V1_SIZE);
  if (d->dtype == BP_DTYPE_INVALID)
    return BP_KIT_ERROR(BP_INVALID_ARGUMENT, "%s: %s %u is absent (dtype INVALID) but required",
                        name, what, i);
  if (!d->buffer)
    return BP_KIT_ERROR(BP_INVALID_ARGUMENT, "%s: %s %u has a NULL buffer", name, what, i);
  return BP_KIT_ERROR(st, "%s: %s %u%s", name, what, i, msg);
}

bp_status_t bp_kit_call_check(const bp_op_call_t* call, uint32_t max_operands,
                              bp_kit_buffer_size_fn buffer_size) {
  bp_status_t st;
  if (!call) return BP_KIT_ERROR(BP_INVALID_ARGUMENT, "launch: NULL call");
  if (call->struct_size < BP_OP_CALL_V1_SIZE)
    return BP_KIT_ERROR(BP_INVALID_ARGUMENT, "launch: op call struct_size %u < %u",
                        call->struct_size, BP_OP_CALL_V1_SIZE);
  uint32_t op = call->op_id;
  const bp_kit_op_info_t* m = bp_kit_op_info(op);
  if (!m)
    return BP_KIT_ERROR(BP_INVALID_ARGUMENT, "launch: op id %u out of range [1, %u)",
                        op, BP_OP_COUNT);
  int nin = m->num_inputs, nout = m->num_outputs;
  if ((nin >= 0 && call->num_inputs != (uint32_t)nin) || (nin < 0 && call->num_inputs == 0))
    return BP_KIT_ERROR(BP_INVALID_ARGUMENT, "%s: %u inputs given, expected %s%d",
                        m->name, call->num_inputs, nin < 0 ? "at least " : "", nin < 0 ? 1 : nin);
  if (call->num_inputs > max_operands)
    return BP_KIT_ERROR(BP_INVALID_ARGUMENT, "%s: %u inputs given, at most %u supported",
                        m->name, call->num_inputs, max_operands);
  if (call->num_outputs != (uint32_t)nout)
    return BP_KIT_ERROR(BP_INVALID_ARGUMENT, "%s: %u outputs given, expected %d",
                        m->name, call->num_outputs, nout);
  if ((call->num_inputs && !call->inputs) || !call->outputs)
    return BP_KIT_ERROR(BP_INVALID_ARGUMENT, "%s: NULL operand array", m->name);
  for (uint32_t i = 0; i < call->num_inputs; i++)
    if ((st = check_operand(op, call->inputs[i], 1, i, buffer_size))) return st;
  for (uint32_t i = 0; i < call->num_outputs; i++)
    if ((st = check_operand(op, call->outputs[i], 0, i, buffer_size))) return st;
  if (m->attrs_size) {
    if (!call->attrs)
      return BP_KIT_ERROR(BP_INVALID_ARGUMENT, "%s: NULL attributes", m->name);
    uint32_t given;
    memcpy(&given, call->attrs, sizeof given);
    if (given < m->attrs_size)
      return BP_KIT_ERROR(BP_INVALID_ARGUMENT, "%s: attribute struct_size %u < %u",
                          m->name, given, (unsigned)m->attrs_size);
  }
  return BP_OK;
}

void bp_kit_nd_layout_init(bp_nd_layout_t* l, int nops, const bp_tensor_desc_t* out) {
  memset(l, 0, sizeof *l);
  l->ndim = (int)out->rank;
  l->nops = nops;
  for (uint32_t d = 0; d < out->rank; ++d) {
    l->sizes[d] = out->sizes[d];
    l->strides[0][d] = out->strides[d];
  }
}

void bp_kit_nd_layout_bind(bp_nd_layout_t* l, int k, const bp_tensor_desc_t* out,
                           const bp_tensor_desc_t* in) {
  uint32_t lead = out->rank - in->rank;
  for (uint32_t d = 0; d < out->rank; ++d)
    l->strides[k][d] = d < lead || in->sizes[d - lead] == 1 ? 0 : in->strides[d - lead];
}
