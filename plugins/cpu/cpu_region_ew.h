/* backplane CPU plugin: compiled elementwise programs (cpu_region_ew.c),
 * the engine under launch_ew_program and the EW_PROGRAM, EPILOGUE and
 * elementwise GRAPH regions. */
#ifndef BP_CPU_REGION_EW_H_
#define BP_CPU_REGION_EW_H_

#include "cpu_kernels.h"

/* Limits declared in query_fusion. */
#define CPU_EWP_MAX_INPUTS 16u
#define CPU_EWP_MAX_OUTPUTS 8u
#define CPU_EWP_MAX_REGISTERS 32u
#define CPU_EWP_MAX_INSTRS 128u

/* A program resolved once: kernel pointers and parameters per instruction,
 * physical register buffers assigned (an instruction never writes a
 * buffer it reads), constants pre-broadcast to a tile. May run on many
 * threads at once: only its cache of machine-code loops (cpu_ewp_jit.h)
 * changes after compiling, under its own lock. */
typedef struct cpu_ewp cpu_ewp_t;

/* Compiles `program` (already checked for structure by the core, or by
 * the caller). 0 with *out set; else an enum bp_support_reason with the
 * reason in msg, or -1 for out of memory. */
CPU_HIDDEN int cpu_ewp_compile(const bp_ew_program_t* program, cpu_ewp_t** out, char* msg,
                               size_t cap);
CPU_HIDDEN void cpu_ewp_free(cpu_ewp_t* p);
/* Runs the program: outputs (one shape) from inputs broadcast to it, tile
 * by tile (CPU_EWP_TILE elements in L1-resident registers), over the pool.
 * Descriptors are host memory (buffers resolved). An input that shares
 * memory with an output is copied tile by tile before any store. */
CPU_HIDDEN bp_status_t cpu_ewp_run(const cpu_ewp_t* p, const bp_tensor_desc_t* const* inputs,
                                   const bp_tensor_desc_t* const* outputs);
/* The bit set of op ids usable in programs (query_fusion's
 * ew_opcode_mask) and its word count. */
CPU_HIDDEN const uint64_t* cpu_ewp_opcode_mask(uint32_t* out_words);
/* Compute dtypes programs take (query_fusion's ew_dtype_mask). */
CPU_HIDDEN uint64_t cpu_ewp_dtype_mask(void);

/* The caps-table slot: compiles the program and enqueues one run. */
CPU_HIDDEN bp_status_t cpu_launch_ew_program(bpp_stream_t stream, const bp_ew_program_t* program,
                                             uint32_t num_inputs,
                                             const bp_tensor_desc_t* const* inputs,
                                             uint32_t num_outputs,
                                             const bp_tensor_desc_t* const* outputs);

#endif /* BP_CPU_REGION_EW_H_ */
