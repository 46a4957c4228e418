/* backplane gpu_common: what every GPU plugin's exec table checks of an
 * EW_PROGRAM region (see bp_gpu_ops.h). Host C only; pure. */
#include <stdio.h>
#include <string.h>

#include "bp_gpu_ops.h"
#include "bp_kit.h"

int bp_gpu_ew_program_fits(const bp_fusion_caps_t* caps, const bp_ew_program_t* p, char* msg,
                           size_t cap) {
  if (!caps->ew_max_instrs) {
    snprintf(msg, cap, "no elementwise kernel on this device");
    return BP_SUPPORT_DEVICE;
  }
  if (p->num_instrs > caps->ew_max_instrs || p->num_registers > caps->ew_max_registers ||
      p->num_inputs > caps->ew_max_inputs || p->num_outputs > caps->ew_max_outputs) {
    snprintf(msg, cap, "the program exceeds the elementwise kernel's limits (%u instructions, "
             "%u registers, %u inputs, %u outputs)", caps->ew_max_instrs, caps->ew_max_registers,
             caps->ew_max_inputs, caps->ew_max_outputs);
    return BP_SUPPORT_SIZE;
  }
  if (!(caps->ew_dtype_mask & BP_DTYPE_BIT(p->compute_dtype))) {
    snprintf(msg, cap, "the program's compute dtype is not one this device runs");
    return BP_SUPPORT_DTYPE;
  }
  for (uint32_t i = 0; i < p->num_instrs; i++) {
    uint32_t o = BP_EW_INSTR_AT(p, i)->opcode;
    if (o >= BP_EW_LOAD_INPUT && o <= BP_EW_CAST) continue;
    if (o / 64 >= caps->ew_opcode_words || !(caps->ew_opcode_mask[o / 64] & (1ull << (o % 64)))) {
      snprintf(msg, cap, "instruction %u's op (%s) is not fusable on this device", i,
               bp_kit_op_name(o));
      return BP_SUPPORT_OP;
    }
  }
  return BP_SUPPORT_OK;
}

uint32_t bp_gpu_ew_region_aliases(const bp_region_desc_t* r, bp_region_alias_t* out) {
  uint32_t n = 0;
  for (uint32_t o = r->num_inputs; o < r->num_args; o++)
    for (uint32_t i = 0; i < r->num_inputs; i++) {
      const bp_tensor_desc_t *a = r->values[o], *b = r->values[i];
      if (a->rank == b->rank && bp_dtype_size(a->dtype) == bp_dtype_size(b->dtype) &&
          memcmp(a->sizes, b->sizes, sizeof(int64_t) * a->rank) == 0)
        out[n++] = (bp_region_alias_t){o, i};
    }
  return n;
}
