/* Compiled regions of the CUDA plugin (internal): cuda_region.c (the exec
 * table), cuda_region_serial.c (bytes), cuda_graph.c (the replay).
 *
 * Ownership: an executable owns copies of everything the region desc
 * lent (values, nodes and their attribute structs, the program).
 * Threading: immutable after compile except `replay` (its own lock).
 */
#ifndef BP_CUDA_REGION_H_
#define BP_CUDA_REGION_H_

#include "cuda_graph.h"

#define CUDA_NODE_MAX_OPERANDS 64u

/* One op of a node region, over value ids. */
typedef struct cuda_node {
  uint32_t op_id, num_inputs, num_outputs, compute_dtype, list_begin, list_count;
  uint32_t* ids; /* inputs then outputs; BP_REGION_VALUE_NONE: absent */
  void* attrs;   /* a copy of the attribute struct, or NULL */
} cuda_node_t;

struct bpp_executable_s {
  bpp_device_t dev;
  uint32_t kind; /* enum bp_region_kind */
  uint32_t num_values, num_args, num_inputs;
  bp_tensor_desc_t* values; /* dense descriptors, buffer NULL */
  uint64_t* offsets;        /* temporaries: byte offset in the workspace */
  uint64_t workspace;       /* bytes */
  /* EW_PROGRAM */
  bp_ew_program_t prog;
  bp_ew_instr_t* instrs;
  bp_scalar_t* consts;
  /* GRAPH, EPILOGUE, PATTERN */
  uint32_t num_nodes;
  cuda_node_t* nodes;
  uint32_t num_aliases;
  bp_region_alias_t* aliases;
  int replay_ready;
  cuda_replay_t replay;
};

bp_status_t cuda_region_compile(bpp_device_t dev, const bp_region_desc_t* region,
                                bp_support_t* out_refusal, bpp_executable_t* out);
void cuda_exe_free(struct bpp_executable_s* exe);
bp_status_t cuda_region_serialize(bpp_executable_t exe, void* data, uint64_t capacity,
                                  uint64_t* out_size);
bp_status_t cuda_region_deserialize(bpp_device_t dev, const void* data, uint64_t size,
                                    bpp_executable_t* out);

extern const bpp_exec_table_t cuda_exec_table;

#endif /* BP_CUDA_REGION_H_ */
