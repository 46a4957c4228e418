/* backplane plugin kit: per-op metadata generated from ops.def, and the
 * checks of a launched call against it.
 *
 * The table is built at compile time from include/backplane/ops.def (the
 * single source of truth), so a plugin never hand-writes operand counts,
 * attribute sizes or names. Immutable; thread-safe.
 */
#ifndef BACKPLANE_KIT_OPS_H_
#define BACKPLANE_KIT_OPS_H_

#include <stddef.h>
#include <stdint.h>

#include "backplane/plugin.h"
#include "bp_plugin_common.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct bp_kit_op_info {
  const char* name;        /* "add"; NULL for ids ops.def leaves unused */
  const char* input_names; /* "self,opt_other": comma-separated, opt_ marks optional */
  int8_t num_inputs;       /* -1: a tensor list (at least one input) */
  int8_t num_outputs;
  uint8_t category;        /* enum bp_op_category */
  uint8_t family;          /* enum bp_op_family: the kernel family that runs it */
  uint16_t attrs_size;     /* bytes of the attribute struct; 0: no attributes */
} bp_kit_op_info_t;

/* Metadata of op `op`, or NULL for 0, unused ids and ids >= BP_OP_COUNT. */
const bp_kit_op_info_t* bp_kit_op_info(uint32_t op);
/* The op's name, or "unknown". */
const char* bp_kit_op_name(uint32_t op);
/* Nonzero when input `i` of `op` may be absent (dtype INVALID): an opt_
 * operand, a list entry of index/index_put, or the self/other of a binary
 * op that has a scalar form. */
int bp_kit_op_input_optional(uint32_t op, uint32_t i);

/* Checks a launched call against the op's metadata: struct_size, op id,
 * operand counts (`max_operands` bounds tensor lists), operand arrays, each
 * descriptor (bp_plugin_check_desc against the size `buffer_size` reports
 * for its buffer; absent optional inputs are skipped), and the attribute
 * struct_size. On failure reports through bp_kit_error with the operand's
 * name, and returns INVALID_ARGUMENT or
 * OUT_OF_RANGE. Per the trust boundary the core validated the call already:
 * plugins run this in debug builds, or where they want a second line of
 * defence (the CPU plugin does). */
typedef uint64_t (*bp_kit_buffer_size_fn)(bpp_buffer_t buffer);
bp_status_t bp_kit_call_check(const bp_op_call_t* call, uint32_t max_operands,
                              bp_kit_buffer_size_fn buffer_size);

/* A scalar attribute as a double (int and bool converted); `dflt` when it
 * is not given (kind NONE). */
static inline double bp_kit_scalar_f64(const bp_scalar_t* s, double dflt) {
  switch (s->kind) {
    case BP_SCALAR_FLOAT: return s->v.f;
    case BP_SCALAR_INT: return (double)s->v.i;
    case BP_SCALAR_BOOL: return (double)s->v.b;
    default: return dflt;
  }
}

/* An iteration layout (bp_nd_layout_t) over the dims of `out`, with `out`
 * as operand 0 and every other operand's strides 0. */
void bp_kit_nd_layout_init(bp_nd_layout_t* l, int nops, const bp_tensor_desc_t* out);
/* Sets operand k to `in` broadcast against `out` (right-aligned, PyTorch
 * rules: stride 0 in the leading dims `in` lacks and where its size is 1). */
void bp_kit_nd_layout_bind(bp_nd_layout_t* l, int k, const bp_tensor_desc_t* out,
                           const bp_tensor_desc_t* in);

#ifdef __cplusplus
}
#endif
#endif /* BACKPLANE_KIT_OPS_H_ */
