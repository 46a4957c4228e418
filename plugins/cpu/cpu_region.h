/* backplane CPU plugin: compiled regions (the exec table).
 *
 * A region compiles into a short list of steps over the region's values:
 *  - PROGRAM: an elementwise program (cpu_region_ew.h) over values;
 *  - GEMM: a matmul / linear / addmm by row blocks, each block's epilogue
 *    program run right after its GEMM while the block is in cache;
 *  - NODE: one op through the plugin's own kernel (cpu_exec_op);
 *  - REDUCE: a reduction prologue: an elementwise program whose result
 *    a sum / mean / amax / amin folds chunk by chunk, never stored
 *    whole (cpu_region_reduce.c).
 * Arguments are the launch's descriptors; temporaries live in the
 * workspace at offsets fixed at compile time. Files: cpu_region.c (the
 * slots), cpu_region_build.c (desc -> steps), cpu_region_run.c,
 * cpu_region_serial.c (bytes), cpu_region_claim.c (region_claim).
 */
#ifndef BP_CPU_REGION_H_
#define BP_CPU_REGION_H_

#include <stdatomic.h>

#include "cpu_region_ew.h"

enum cpu_step_kind { CPU_STEP_PROGRAM = 1, CPU_STEP_GEMM = 2, CPU_STEP_NODE = 3, CPU_STEP_REDUCE = 4 };

typedef struct cpu_step {
  uint32_t kind; /* enum cpu_step_kind */
  /* NODE, GEMM and REDUCE: the op (GEMM: mm, addmm or linear; REDUCE:
   * the reduction, whose input is the program's one output). */
  uint32_t op_id, compute_dtype, list_begin, list_count;
  uint32_t num_inputs, num_outputs;
  uint32_t* inputs;  /* value ids; UINT32_MAX: absent */
  uint32_t* outputs; /* value ids */
  void* attrs;       /* a copy, or NULL */
  /* PROGRAM and GEMM: the program; GEMM's input 0 is the product. */
  cpu_ewp_t* prog;
  uint32_t prog_nin, prog_nout;
  uint32_t prog_in[CPU_EWP_MAX_INPUTS];   /* value ids (GEMM: [0] unused) */
  uint32_t prog_out[CPU_EWP_MAX_OUTPUTS]; /* value ids */
  uint32_t gemm_target; /* GEMM: value the product is written to */
} cpu_step_t;

struct bpp_executable_s {
  atomic_int refs; /* the handle, plus one per launch in flight */
  struct bpp_device_s* device;
  uint32_t kind;
  uint32_t num_values, num_args, num_inputs;
  bp_tensor_desc_t* values; /* dense descriptors (buffer NULL) */
  uint64_t* offsets;        /* temporaries: byte offset in the workspace */
  uint64_t workspace;
  uint32_t num_steps;
  cpu_step_t* steps;
  uint32_t num_aliases;
  bp_region_alias_t* aliases;
  double flops, bytes;
  /* The region as bytes (cpu_region_serial.c), kept for serialize. */
  unsigned char* blob;
  uint64_t blob_size;
};

/* Builds the steps of `region` (checked by the core, or decoded from
 * bytes) into `exe` (device set, everything else zero). 0 on success;
 * else an enum bp_support_reason with msg, or -1 for out of memory.
 * (cpu_region_build.c) */
CPU_HIDDEN int cpu_region_build(const bp_region_desc_t* region, struct bpp_executable_s* exe,
                                char* msg, size_t cap);
/* Frees what cpu_region_build made (not `exe` itself). */
CPU_HIDDEN void cpu_region_clear(struct bpp_executable_s* exe);

/* Runs every step on the calling thread (a stream worker). `args`: the
 * launch's descriptors; `workspace` NULL when none is needed.
 * (cpu_region_run.c) */
CPU_HIDDEN bp_status_t cpu_region_run(const struct bpp_executable_s* exe,
                                      const bp_tensor_desc_t* const* args,
                                      const bp_tensor_desc_t* workspace);

/* Encodes `region` as the plugin's payload (versioned, checksummed,
 * tied to the plugin version and device kind). (cpu_region_serial.c) */
CPU_HIDDEN bp_status_t cpu_region_encode(const bp_region_desc_t* region, unsigned char** out,
                                         uint64_t* out_size);
/* Decodes bytes of cpu_region_encode and builds the executable (the same
 * path as region_compile). DATA_LOSS / FAILED_PRECONDITION with the reason
 * for corrupt or foreign bytes. */
CPU_HIDDEN bp_status_t cpu_region_decode(const unsigned char* data, uint64_t size,
                                         struct bpp_executable_s* exe);

/* Elementwise program over nodes [first, num_nodes) of `region` (a
 * REDUCE step: [first, num_nodes - 1), storing the reduction's input), every
 * node an elementwise op whose attributes fit a program (alpha 1, scalar
 * operands as constants, gelu's approximation and div's rounding as aux).
 * For a GEMM step (op and operands set), program input 0 is the product
 * and the anchor's own bias and activation (linear) or `self` (addmm) come
 * first. Fills the step's program fields. 0, a reason (msg), or -1 for out
 * of memory. (cpu_region_build.c) */
CPU_HIDDEN int cpu_region_nodes_program(const bp_region_desc_t* region, uint32_t first,
                                        cpu_step_t* step, char* msg, size_t cap);
/* The support query for one node of `region` (buffers NULL). */
CPU_HIDDEN bp_status_t cpu_region_node_support(bpp_device_t device, const bp_region_desc_t* region,
                                               const bp_region_node_t* node, bp_support_t* out);
/* Nonzero when `node` can be an instruction of such a program. */
CPU_HIDDEN int cpu_region_node_fusable(const bp_region_node_t* node);
/* Nonzero for the fused ops a PATTERN region runs as one kernel. */
CPU_HIDDEN int cpu_region_is_pattern(uint32_t op);

/* Reduction prologues (cpu_region_reduce.c). Nonzero when `region`'s
 * nodes are elementwise ops whose values stay inside it, then one sum,
 * mean, amax or amin of their result (a temporary read by it alone) into
 * the region's one output. */
CPU_HIDDEN int cpu_region_reduce_shape(const bp_region_desc_t* region);
/* For such a region: 0 when the REDUCE step runs it, else an enum
 * bp_support_reason with the reason in msg (dtype, dims order, empty). */
CPU_HIDDEN int cpu_region_reduce_check(const bp_region_desc_t* region, char* msg, size_t cap);
/* Runs a REDUCE step: `inputs` the program's inputs, `result` the dense
 * descriptor of the program's output (never allocated whole), `out` the
 * reduction's output. On the calling thread and the pool. */
CPU_HIDDEN bp_status_t cpu_region_reduce_run(const cpu_step_t* step, const bp_tensor_desc_t* const* inputs,
                                             const bp_tensor_desc_t* result, const bp_tensor_desc_t* out);

/* The exec table's claim slot (cpu_region_claim.c). */
CPU_HIDDEN bp_status_t cpu_region_claim(bpp_device_t device, const bp_region_desc_t* graph,
                                        uint32_t* out_groups, bp_support_t* const* out_reasons);

CPU_HIDDEN extern const bpp_exec_table_t cpu_exec_table;

#endif /* BP_CPU_REGION_H_ */
