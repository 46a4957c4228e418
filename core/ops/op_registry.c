/* backplane core: the op table, generated from ops.def, and op metadata
 * queries (bp_op_get_info, bp_op_from_name).
 *
 * The table is static and immutable; the optional-input masks are computed
 * once (pthread_once) from the opt_ name prefix. All functions are
 * thread-safe.
 */
#include <stdio.h>
#include <string.h>

#include "ops/ops_internal.h"

/* Per-op name arrays. */
#define BP_OP(id, name, cat, fam, ins, outs, attrs_t, rule, aten)                         \
  static const char* const bp__in_names_##name[] = {BP__IN_NAMES(ins)};             \
  static const char* const bp__out_names_##name[] = {BP__OUT_NAMES(outs)};
#include "backplane/ops.def"
#undef BP_OP

static const bp__op_meta_t bp__op_table[BP_OP_COUNT] = {
#define BP_OP(id_, name_, cat_, fam_, ins, outs, attrs_t, rule_, aten_)                       \
  [id_] = {                                                                             \
      .id = id_,                                                                        \
      .category = BP_OP_CATEGORY_##cat_,                                                \
      .name = #name_,                                                                   \
      .category_name = #cat_,                                                           \
      .aten = aten_,                                                                    \
      .rule = #rule_,                                                                   \
      .num_before = BP__NUM_BEFORE(ins),                                                \
      .has_list = BP__HAS_LIST(ins),                                                    \
      .num_after = BP__NUM_AFTER(ins),                                                  \
      .num_outputs = BP__NUM_OUTPUTS(outs),                                             \
      .attrs_kind = BP__ATTRS_##attrs_t,                                                \
      .attrs_size = BP__ATTRS_##attrs_t == BP__ATTRS_bp_no_attrs_t ? 0 : sizeof(attrs_t), \
      .input_names = bp__in_names_##name_,                                              \
      .output_names = bp__out_names_##name_,                                            \
      .infer = bp__infer_##rule_,                                                       \
  },
#include "backplane/ops.def"
#undef BP_OP
};

/* ids must equal the enum (a gap or duplicate would leave a hole). */
#define BP_OP(id, name, cat, fam, ins, outs, attrs_t, rule, aten) \
  _Static_assert(BP_OP_##name == id, "op id of " #name);     \
  _Static_assert(BP__NUM_BEFORE(ins) + BP__NUM_AFTER(ins) <= BP__MAX_FIXED_INPUTS, #name);
#include "backplane/ops.def"
#undef BP_OP

static uint32_t bp__optional_masks[BP_OP_COUNT];
static pthread_once_t bp__masks_once = PTHREAD_ONCE_INIT;

static void bp__masks_init(void) {
  for (uint32_t id = 1; id < BP_OP_COUNT; ++id) {
    const bp__op_meta_t* op = &bp__op_table[id];
    uint32_t fixed = (uint32_t)op->num_before + op->num_after;
    uint32_t mask = 0;
    for (uint32_t i = 0; i < fixed; ++i) {
      if (strncmp(op->input_names[i], "opt_", 4) == 0) mask |= 1u << i;
    }
    bp__optional_masks[id] = mask;
  }
}

const bp__op_meta_t* bp__op_meta(uint32_t op_id) {
  if (op_id == BP_OP_INVALID || op_id >= BP_OP_COUNT || bp__op_table[op_id].name == NULL) {
    return NULL;
  }
  return &bp__op_table[op_id];
}

uint32_t bp__op_optional_mask(uint32_t op_id) {
  pthread_once(&bp__masks_once, bp__masks_init);
  return op_id < BP_OP_COUNT ? bp__optional_masks[op_id] : 0;
}

static const char* bp__strip_opt(const char* name) {
  return strncmp(name, "opt_", 4) == 0 ? name + 4 : name;
}

const char* bp__op_input_name(const bp__op_meta_t* op, uint32_t num_inputs, uint32_t index,
                              char* buf) {
  if (!op->has_list) {
    return index < op->num_before ? bp__strip_opt(op->input_names[index]) : "?";
  }
  uint32_t fixed = (uint32_t)op->num_before + op->num_after;
  uint32_t list_count = num_inputs >= fixed ? num_inputs - fixed : 0;
  if (index < op->num_before) return bp__strip_opt(op->input_names[index]);
  if (index < op->num_before + list_count) {
    snprintf(buf, 64, "%s[%u]", op->input_names[fixed], index - op->num_before);
    return buf;
  }
  uint32_t after = index - op->num_before - list_count;
  return after < op->num_after ? bp__strip_opt(op->input_names[op->num_before + after]) : "?";
}

const char* bp__op_output_name(const bp__op_meta_t* op, uint32_t index) {
  /* Outputs are never optional: their names have no opt_ prefix. */
  return index < op->num_outputs ? op->output_names[index] : "?";
}

bp_status_t bp_op_get_info(uint32_t op_id, bp_op_info_t* out_info) {
  if (out_info == NULL) return bp__error(BP_INVALID_ARGUMENT, "bp_op_get_info: out_info is NULL");
  const bp__op_meta_t* op = bp__op_meta(op_id);
  if (op == NULL) {
    return bp__error(BP_INVALID_ARGUMENT, "bp_op_get_info: unknown op id %u (valid: 1..%u)",
                     op_id, BP_OP_COUNT - 1);
  }
  bp_op_info_t info;
  memset(&info, 0, sizeof(info));
  info.struct_size = sizeof(info);
  info.op_id = op->id;
  info.name = op->name;
  info.category = op->category_name;
  info.aten = op->aten;
  info.rule = op->rule;
  info.num_fixed_inputs_before = op->num_before;
  info.has_list = op->has_list;
  info.num_fixed_inputs_after = op->num_after;
  info.num_outputs = op->num_outputs;
  info.attrs_size = op->attrs_size;
  info.optional_mask = bp__op_optional_mask(op_id);
  info.input_names = op->input_names;
  info.output_names = op->output_names;
  return bp__out_struct_write("bp_op_get_info", "bp_op_info_t", out_info, &info, sizeof(info),
                              BP_OP_INFO_V1_SIZE);
}

uint32_t bp_op_from_name(const char* name) {
  if (name == NULL) return BP_OP_INVALID;
  for (uint32_t id = 1; id < BP_OP_COUNT; ++id) {
    if (bp__op_table[id].name != NULL && strcmp(bp__op_table[id].name, name) == 0) return id;
  }
  return BP_OP_INVALID;
}
