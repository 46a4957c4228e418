/* backplane CPU plugin: elementwise programs compiled to machine code.
 *
 * The tiled interpreter (cpu_region_ew.c) runs each op of a program as one
 * kernel call over a tile held in L1: every op reads and writes its tile,
 * so an 8-op chain is bound by L1 stores rather than memory. For f32
 * programs made only of the ops below, this module emits one x86-64
 * AVX-512 loop instead: each program register is a zmm register, an
 * iteration loads 16 elements of every input, runs the whole program in
 * registers and stores 16 elements of every output, and nothing else
 * touches memory.
 *
 * Ops: add, sub, mul, div (no rounding mode), neg, abs, relu, reciprocal,
 * sqrt, maximum, minimum; LOAD_INPUT, LOAD_CONST and STORE. Each rounds
 * exactly as the interpreter's f32 kernel does (one IEEE operation; NaN
 * rules of maximum, minimum and relu as cpu_ew.c states them), so the two
 * paths agree bit for bit. Programs with other ops, casts, more than 29
 * registers or more than 6 operands stay on the interpreter.
 *
 * The loop takes inputs that are contiguous (stride 1) or broadcast
 * (stride 0) along the row, one variant per broadcast pattern, and writes
 * outputs with ordinary or streaming stores (two entry points per
 * variant). x86-64 with AVX-512F only; BP_CPU_JIT=0 turns it off (and
 * BP_CPU_ISA below avx512), BP_CPU_JIT=always compiles programs launched
 * once at any size. Code pages are written, then made read-only
 * and executable (never writable and executable at once); where the
 * system refuses executable mappings, the interpreter runs. */
#ifndef BP_CPU_EWP_JIT_H_
#define BP_CPU_EWP_JIT_H_

#include <stdint.h>

#include "cpu_kernels.h"

/* Max operands (outputs + inputs) and registers of a compiled loop. */
#define CPU_EWP_JIT_MAX_OPERANDS 6u
#define CPU_EWP_JIT_MAX_REGISTERS 29u

/* One program instruction as the JIT reads it: opcode (a BP_OP_* id or a
 * BP_EW_* pseudo-op), destination register, sources, operand index
 * (LOAD_INPUT: input, LOAD_CONST: constant, STORE: output). */
typedef struct cpu_ewp_jit_instr {
  uint32_t opcode;
  uint8_t dst, src[3], index;
} cpu_ewp_jit_instr_t;

/* Runs the program over nbytes / 4 elements (nbytes a multiple of 64):
 * ptr[k] is operand k's first element (outputs first, then inputs, as
 * cpu_ewp_run orders them); contiguous operands advance by 4 bytes per
 * element, broadcast ones stay. Streaming entries need every output
 * 64-byte aligned and leave the stores unfenced (the caller fences). */
typedef void (*cpu_ewp_jit_fn)(unsigned char* const* ptr, int64_t nbytes);

typedef struct cpu_ewp_jit cpu_ewp_jit_t;

/* 1 when instruction opcode/aux can be compiled (before any other check). */
CPU_HIDDEN int cpu_ewp_jit_op_ok(uint32_t opcode, uint32_t aux);
/* 1 when the JIT may run here: AVX-512F, BP_CPU_ISA, BP_CPU_JIT. */
CPU_HIDDEN int cpu_ewp_jit_enabled(void);
/* 1 under BP_CPU_JIT=always: programs launched once are compiled at any
 * size (tests; by default only large ones are). */
CPU_HIDDEN int cpu_ewp_jit_always(void);

/* Compiles the loop for a program of ninstr instructions with nout
 * outputs and nin inputs, f32 constants consts[], for the inputs whose bit
 * is set in bcast_mask read broadcast. NULL when it cannot (see above) or
 * out of memory: the caller interprets. Thread-safe; the result is
 * immutable. */
CPU_HIDDEN cpu_ewp_jit_t* cpu_ewp_jit_compile(const cpu_ewp_jit_instr_t* ins, uint32_t ninstr,
                                              uint32_t nout, uint32_t nin, const float* consts,
                                              uint32_t nconst, uint32_t bcast_mask);
CPU_HIDDEN cpu_ewp_jit_fn cpu_ewp_jit_entry(const cpu_ewp_jit_t* jit, int streaming);
CPU_HIDDEN void cpu_ewp_jit_free(cpu_ewp_jit_t* jit);

#endif /* BP_CPU_EWP_JIT_H_ */
