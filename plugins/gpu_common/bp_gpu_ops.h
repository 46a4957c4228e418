/* backplane gpu_common: ops lowered to launches of the one kernel source.
 *
 * Shared by every GPU plugin (OpenCL now; CUDA, HIP, Level Zero next). An
 * op call becomes one or more launches (bp_gpu_launch_t): a program of
 * kernels.def, the tensors whose buffers it binds, the NDRange and its
 * argument block (bp_gpu_args.h). The plugin supplies only the API: a
 * callback that binds the buffers, uploads the argument block and enqueues
 * the kernel (clEnqueueNDRangeKernel, cuLaunchKernel, ...). Support
 * answers come from the same code as the launches, so "supported" holds
 * exactly for what runs.
 *
 * Host C only, no API calls. Thread-safe: no state beyond the caller's.
 */
#ifndef BP_GPU_OPS_H_
#define BP_GPU_OPS_H_

#include <stddef.h>
#include <stdint.h>

#include "backplane/plugin.h"
#include "bp_gpu_kernels.h"
#include "kernels/bp_gpu_args.h"

#ifdef __cplusplus
extern "C" {
#endif

struct bp_gpu_ew;

/* What the lowering needs to know about a device. */
typedef struct bp_gpu_device_caps {
  uint64_t dtype_mask;     /* BP_DTYPE_BIT(d) of dtypes the device stores and computes */
  uint32_t max_group_size; /* work-items per group (>= 256 expected) */
  uint32_t reserved0;
  uint64_t max_groups;     /* groups per launch in dimension 0 */
  /* Optional: runs an elementwise program with the plugin's own kernel
   * (the Vulkan plugin's GLSL interpreter) instead of packing it for
   * kernels/ew.cl; `ctx` is the launch context the lowering was given. */
  bp_status_t (*ew_launch)(void* ctx, const struct bp_gpu_ew* program);
} bp_gpu_device_caps_t;

#define BP_GPU_LAUNCH_MAX_OPERANDS 8

typedef struct bp_gpu_launch {
  uint32_t program;      /* enum bp_gpu_program */
  uint32_t num_operands; /* buffers bound before the argument block */
  /* Operand k's buffer (its descriptor's `buffer`); NULL binds operand 0's
   * (an unused slot: every declared pointer must be a valid buffer). */
  const bp_tensor_desc_t* operands[BP_GPU_LAUNCH_MAX_OPERANDS];
  uint64_t global[3]; /* work-items per dimension (multiples of local) */
  uint32_t local[3];  /* work-group size */
  uint32_t args_size; /* bytes of `args` to upload */
  union {
    bp_gpu_ew_args_t ew;
    bp_gpu_row_args_t row;
    bp_gpu_mm_args_t mm;
    bp_gpu_index_args_t index;
    bp_gpu_sort_args_t sort;
    bp_gpu_scatter_args_t scatter;
    bp_gpu_pool_args_t pool;
    bp_gpu_random_args_t random;
    bp_gpu_penalty_args_t penalty;
    bp_gpu_sdpa_args_t sdpa;
  } args;
} bp_gpu_launch_t;

/* Enqueues one launch; returns its status (with the message through the
 * plugin's bp_kit_error). */
typedef bp_status_t (*bp_gpu_launch_fn)(void* ctx, const bp_gpu_launch_t* launch);

/* Nonzero when `op` has a lowering here (any dtype). */
int bp_gpu_op_implemented(uint32_t op);

/* 0 when the call runs on a device with `caps`, else a bp_support_reason
 * with the reason in msg. Pure; buffers may be NULL. */
int bp_gpu_op_supported(const bp_gpu_device_caps_t* caps, const bp_op_call_t* call, char* msg,
                        size_t cap);

/* Lowers a checked call (the core validated shapes; support said yes) and
 * enqueues its launches in order through `launch`. UNIMPLEMENTED for what
 * bp_gpu_op_supported refuses. */
bp_status_t bp_gpu_op_run(const bp_gpu_device_caps_t* caps, const bp_op_call_t* call,
                          bp_gpu_launch_fn launch, void* ctx);

/* Elementwise programs of the graph compiler (caps table slots). */
bp_status_t bp_gpu_ew_program_run(const bp_gpu_device_caps_t* caps, const bp_ew_program_t* program,
                                  uint32_t num_inputs, const bp_tensor_desc_t* const* inputs,
                                  uint32_t num_outputs, const bp_tensor_desc_t* const* outputs,
                                  bp_gpu_launch_fn launch, void* ctx);
/* Fills `out` (caller-sized) with what the interpreter kernel runs. */
bp_status_t bp_gpu_fusion_caps(const bp_gpu_device_caps_t* caps, bp_fusion_caps_t* out);

/* Compiled EW_PROGRAM regions (gpu_region.c), for the plugins' exec
 * tables: BP_SUPPORT_OK when `program` fits the declared fusion `caps`
 * (limits, compute dtype, fusable opcodes), else the reason with the
 * message in msg. */
int bp_gpu_ew_program_fits(const bp_fusion_caps_t* caps, const bp_ew_program_t* program, char* msg,
                           size_t cap);
/* The outputs that may take an input's memory (same shape and element
 * size: each work-item reads its inputs before it writes the outputs at
 * the same index). `out` has room for num_args * num_args records;
 * returns how many were written. */
uint32_t bp_gpu_ew_region_aliases(const bp_region_desc_t* region, bp_region_alias_t* out);

/* ---- building blocks (used by the lowering files and the unit tests) -- */

/* An elementwise program under construction (on the stack; not
 * thread-safe). Overflowing a limit sets `overflow`; launching it then
 * fails with INTERNAL. */
typedef struct bp_gpu_ew {
  uint32_t cdt; /* compute dtype */
  uint32_t ninstr, nin, nout, nconst, nregs;
  int overflow;
  bp_ew_instr_t ins[BP_GPU_EW_MAX_INSTR];
  union {
    double f;
    int64_t i;
  } consts[BP_GPU_EW_MAX_CONST];
  const bp_tensor_desc_t* in[BP_GPU_EW_MAX_OPERANDS];
  const bp_tensor_desc_t* out[BP_GPU_EW_MAX_OPERANDS];
} bp_gpu_ew_t;

void bp_gpu_ew_init(bp_gpu_ew_t* p, uint32_t cdt);
uint32_t bp_gpu_ew_input(bp_gpu_ew_t* p, const bp_tensor_desc_t* d);
uint32_t bp_gpu_ew_output(bp_gpu_ew_t* p, const bp_tensor_desc_t* d);
uint8_t bp_gpu_ew_const_f(bp_gpu_ew_t* p, double f);
uint8_t bp_gpu_ew_const_i(bp_gpu_ew_t* p, int64_t i);
uint8_t bp_gpu_ew_const_scalar(bp_gpu_ew_t* p, const bp_scalar_t* s, double dflt);
uint8_t bp_gpu_ew_load_const(bp_gpu_ew_t* p, uint8_t konst);
uint8_t bp_gpu_ew_load_input(bp_gpu_ew_t* p, uint32_t input);
uint8_t bp_gpu_ew_op(bp_gpu_ew_t* p, uint32_t opc, uint8_t a, uint8_t b, uint8_t c, uint32_t aux);
void bp_gpu_ew_emit(bp_gpu_ew_t* p, uint32_t opc, uint8_t dst, uint8_t a, uint8_t b, uint8_t c,
                    uint32_t aux);
void bp_gpu_ew_store(bp_gpu_ew_t* p, uint32_t output, uint8_t reg);
/* A program's iteration space: its first output's shape with broadcast
 * strides per operand (inputs then outputs, in elements), size-1 dims
 * dropped and dims contiguous for every operand merged (dense operands of
 * one shape become one dim: `contiguous`). numel 0: nothing to run. */
typedef struct bp_gpu_ew_space {
  int64_t numel;
  int32_t rank;
  int32_t contiguous;
  uint32_t nops;
  uint32_t reserved0;
  int64_t sizes[BP_MAX_RANK];
  int64_t strides[BP_GPU_EW_MAX_OPERANDS][BP_MAX_RANK];
  const bp_tensor_desc_t* operands[BP_GPU_EW_MAX_OPERANDS];
} bp_gpu_ew_space_t;
/* INVALID_ARGUMENT for operands that do not broadcast to the output or a
 * program without outputs; INTERNAL for an overflowed program. */
bp_status_t bp_gpu_ew_space(const bp_gpu_ew_t* p, bp_gpu_ew_space_t* out);

/* Packs the program over its first output's shape (broadcast strides,
 * size-1 dims dropped, dims contiguous for every operand merged) into
 * `l`. *out_empty is set when the output has no elements (nothing to
 * launch). INVALID_ARGUMENT for operands that do not broadcast; INTERNAL
 * for an overflowed program. */
bp_status_t bp_gpu_ew_pack(const bp_gpu_device_caps_t* caps, const bp_gpu_ew_t* p,
                           bp_gpu_launch_t* l, int* out_empty);
/* Packs and launches. */
bp_status_t bp_gpu_ew_launch(const bp_gpu_device_caps_t* caps, const bp_gpu_ew_t* p,
                             bp_gpu_launch_fn launch, void* ctx);
/* Generated elementwise kernels (gpu_ew_gen.c), for the plugins that
 * compile at run time (the OpenCL compiler, NVRTC): the source of one
 * straight-line kernel named bp_gpu_ew_gen_kernel(a->cdt), with the
 * interpreter's signature and argument block, for the packed program `a`.
 * The complete program text is BP_GPU_EW_GEN_PREFIX, then the embedded
 * source of kernels.def program bp_gpu_ew_variant(a->cdt) (the ew.cl
 * helpers the kernel calls), then this text; it compiles as OpenCL C and
 * as CUDA C++ (bp_gpu_portability.h). Writes at most cap bytes (NUL
 * included) and the length in *out_len; OUT_OF_RANGE when cap is too small
 * (then *out_len says what is needed), INVALID_ARGUMENT for a program
 * naming a register, operand or opcode that does not exist, UNIMPLEMENTED
 * for a compute dtype without a variant. Pure. The kernel's name is
 * "bp_ew_gen_" + the variant's dtype (bp_ew_gen_f32 runs what bp_ew_f32
 * would), NULL for a compute dtype without a variant. */
#define BP_GPU_EW_GEN_PREFIX "#define BP_EW_GENERATED 1\n"
const char* bp_gpu_ew_gen_kernel(uint32_t cdt);
/* The complete program text (malloc'd, NUL-terminated, *out_size bytes
 * with the NUL) over `variant_source`, the embedded text of program
 * bp_gpu_ew_variant(a->cdt); NULL with the error set. */
char* bp_gpu_ew_gen_program(const bp_gpu_ew_args_t* a, const char* variant_source, size_t* out_size);
int bp_gpu_ew_variant(uint32_t cdt);
bp_status_t bp_gpu_ew_gen_source(const bp_gpu_ew_args_t* a, char* out, size_t cap, size_t* out_len);
/* FNV-1a 64 of `data`, continuing from h (0 starts). Cache keys. */
uint64_t bp_gpu_text_hash(uint64_t h, const void* data, size_t n);

/* dst = src (broadcast, converted to dst's dtype). */
bp_status_t bp_gpu_ew_copy(const bp_gpu_device_caps_t* caps, const bp_tensor_desc_t* dst,
                           const bp_tensor_desc_t* src, bp_gpu_launch_fn launch, void* ctx);

/* Family lowerings (gpu_ew_ops.c, gpu_rows.c, gpu_matmul.c, gpu_index.c, gpu_sort.c,
 * gpu_scatter.c, gpu_pool.c, gpu_rotary.c, gpu_random.c, gpu_penalty.c, gpu_attention.c):
 * *_supported return 0 or a reason; *_run lower and launch. */
int bp__gpu_ew_supported(const bp_gpu_device_caps_t* caps, const bp_op_call_t* call, char* msg, size_t cap);
bp_status_t bp__gpu_ew_run(const bp_gpu_device_caps_t* caps, const bp_op_call_t* call,
                           bp_gpu_launch_fn launch, void* ctx);
int bp__gpu_copy_supported(const bp_gpu_device_caps_t* caps, const bp_op_call_t* call, char* msg, size_t cap);
bp_status_t bp__gpu_copy_run(const bp_gpu_device_caps_t* caps, const bp_op_call_t* call,
                             bp_gpu_launch_fn launch, void* ctx);
/* implemented / supported / run of the families with kernels of their own. */
#define BP__GPU_FAMILY(name)                                                                              \
  int bp__gpu_##name##_implemented(uint32_t op);                                                          \
  int bp__gpu_##name##_supported(const bp_gpu_device_caps_t* caps, const bp_op_call_t* call, char* msg, size_t cap); \
  bp_status_t bp__gpu_##name##_run(const bp_gpu_device_caps_t* caps, const bp_op_call_t* call,              \
                                   bp_gpu_launch_fn launch, void* ctx);
BP__GPU_FAMILY(rows)
BP__GPU_FAMILY(matmul)
BP__GPU_FAMILY(index)
BP__GPU_FAMILY(sort)
BP__GPU_FAMILY(scatter)
BP__GPU_FAMILY(pool)
BP__GPU_FAMILY(rotary)
BP__GPU_FAMILY(random)
BP__GPU_FAMILY(penalty)
BP__GPU_FAMILY(attention)
#undef BP__GPU_FAMILY

/* A 1-d NDRange of `groups` groups of `local` work-items, at most
 * caps->max_groups groups (the kernels loop over the rest). */
void bp__gpu_grid_1d(const bp_gpu_device_caps_t* caps, uint64_t groups, uint32_t local, bp_gpu_launch_t* l);

/* 1 when every present operand's dtype is in the device's mask; else 0
 * with the reason in msg. */
int bp__gpu_dtypes_ok(const bp_gpu_device_caps_t* caps, const bp_op_call_t* call, char* msg, size_t cap);

#ifdef __cplusplus
}
#endif
#endif /* BP_GPU_OPS_H_ */
