/* backplane core: compiled regions and elementwise programs (core/exec/).
 * Not installed. */
#ifndef BACKPLANE_CORE_EXEC_INTERNAL_H_
#define BACKPLANE_CORE_EXEC_INTERNAL_H_

#include "internal.h"
#include "ops/ops_internal.h"

/* A compiled region: the plugin's executable plus what the core checks
 * launches against. Immutable after compile; refcount only. */
struct bp_region {
  atomic_int refcount;
  bp_device_t* device;
  bpp_executable_t handle; /* released with the last reference */
  uint32_t kind;
  uint32_t num_args, num_inputs;
  bp_tensor_desc_t* args; /* num_args: dtype, rank, sizes the launch must match */
  bp_region_info_t info;  /* aliases point at `aliases` */
  bp_region_alias_t* aliases;
};

/* A region desc the application handed in, validated and normalized for a
 * plugin: descriptors copied at this header's size (dense strides), nodes
 * with filled attributes (defaults, enums checked) and a compute dtype,
 * shapes and dtypes checked by each op's inference rule. `desc` points into
 * this object. */
typedef struct bp__region_checked {
  bp_region_desc_t desc;
  bp_tensor_desc_t* values;
  const bp_tensor_desc_t** value_ptrs;
  bp_region_node_t* nodes;
  const bp_region_node_t** node_ptrs;
  uint32_t* ids; /* every node's input and output ids, node after node */
  bp__attrs_storage_t* attrs;
  bp_ew_program_t program;
} bp__region_checked_t;

/* Validates `region` (INVALID_ARGUMENT naming the node, operand or value
 * and what is wrong, prefixed with `api`) and fills *out; release with
 * bp__region_checked_free whatever the status. */
BP__HIDDEN bp_status_t bp__region_check(const char* api, const bp_region_desc_t* region,
                                        bp__region_checked_t* out);
BP__HIDDEN void bp__region_checked_free(bp__region_checked_t* c);

/* Validates an elementwise program's structure: struct sizes, limits,
 * operand indices in range, opcodes (LOAD/STORE/CAST or an elementwise op
 * id), compute dtype; every output stored. Does not ask the device. */
BP__HIDDEN bp_status_t bp__ew_program_check(const char* api, const bp_ew_program_t* program,
                                            uint32_t num_inputs, uint32_t num_outputs);
/* A copy of `program` at this header's sizes (instructions copied into
 * `instrs`, which holds program->num_instrs entries). */
BP__HIDDEN void bp__ew_program_copy(const bp_ew_program_t* program, bp_ew_instr_t* instrs,
                                    bp_ew_program_t* out);

/* Operands of one launch (region or program): placement on the stream's
 * device, bounds, no self-overlapping outputs, outputs disjoint, and an
 * output sharing memory with an input only when `may_alias(ctx, output,
 * input)` says so and the layouts are identical. Indices are the
 * launch's argument indices (inputs first). */
typedef int (*bp__may_alias_fn)(const void* ctx, uint32_t output, uint32_t input);
BP__HIDDEN bp_status_t bp__exec_check_operands(const char* api, const bp_stream_t* stream,
                                               const bp_tensor_t* const* args, uint32_t num_inputs,
                                               uint32_t num_args, bp__may_alias_fn may_alias,
                                               const void* ctx);
/* After a launch: every argument's buffer stays alive until `stream` passes it. */
BP__HIDDEN void bp__exec_note_use(bp_stream_t* stream, const bp_tensor_t* const* args,
                                  uint32_t num_args);

/* Wraps a fresh executable: asks its info, copies the aliases (checked
 * against the arguments). Takes ownership of `handle` (released on error).
 * `args`: num_args descriptors (dtype, rank, sizes), copied. */
BP__HIDDEN bp_status_t bp__region_wrap(const char* api, bp_device_t* device, bpp_executable_t handle,
                                       uint32_t kind, uint32_t num_args, uint32_t num_inputs,
                                       const bp_tensor_desc_t* args, bp_region_t** out);

/* Fills a support answer (struct_size = sizeof). */
BP__HIDDEN void bp__support_set(bp_support_t* out, uint32_t supported, uint32_t reason,
                                const char* fmt, ...) __attribute__((format(printf, 4, 5)));

#endif /* BACKPLANE_CORE_EXEC_INTERNAL_H_ */
