/* backplane: value types shared by the plugin ABI and the application API.
 *
 * This header is part of the stable ABI. It depends only on <stdint.h> and
 * <stddef.h>. Every enum that crosses the plugin boundary is carried in a
 * fixed-width integer field; the enum types below only name the values.
 * Values are append-only: never renumbered, never reused.
 */
#ifndef BACKPLANE_TYPES_H_
#define BACKPLANE_TYPES_H_

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ------------------------------------------------------------------------ */
/* Status codes (absl/IREE style). 0 is success. Carried as int32_t.        */
/* ------------------------------------------------------------------------ */
typedef int32_t bp_status_t;

enum bp_status_code {
  BP_OK = 0,
  BP_CANCELLED = 1,
  BP_UNKNOWN = 2,
  BP_INVALID_ARGUMENT = 3,
  BP_DEADLINE_EXCEEDED = 4,
  BP_NOT_FOUND = 5,
  BP_ALREADY_EXISTS = 6,
  BP_PERMISSION_DENIED = 7,
  BP_RESOURCE_EXHAUSTED = 8,
  BP_FAILED_PRECONDITION = 9,
  BP_ABORTED = 10,
  BP_OUT_OF_RANGE = 11,
  BP_UNIMPLEMENTED = 12,
  BP_INTERNAL = 13,
  BP_UNAVAILABLE = 14,
  BP_DATA_LOSS = 15,
  BP_UNAUTHENTICATED = 16,
  BP_DEVICE_LOST = 17,
  /* Not an error: returned by query calls whose work is still pending. */
  BP_NOT_READY = 18,
  /* The device's support query says no for this op at these dtypes, shapes,
   * layouts or attributes (the backend has a kernel for the op, but not for
   * this case). Distinct from UNIMPLEMENTED (no kernel for the op at all); the
   * application reads why with bp_status_support_reason(). */
  BP_UNSUPPORTED = 19,
  BP_STATUS_CODE_COUNT_ = 20
};

/* ------------------------------------------------------------------------ */
/* Element types. Carried as uint32_t. The list is dtypes.def.            */
/* ------------------------------------------------------------------------ */
enum bp_dtype {
  BP_DTYPE_INVALID = 0,
#define BP_DTYPE_X(SUFFIX, value, name, bytes, bits, category) BP_DTYPE_##SUFFIX = value,
#include "backplane/dtypes.def"
  BP_DTYPE_COUNT_ = 27 /* one past the last id in dtypes.def */
};

/* What kind of value a dtype holds (the category column of dtypes.def).
 * Sub-byte and small float formats are storage dtypes: the core accepts
 * them in tensors, copies and views; ops take them only where a plugin
 * declares support (docs/semantics.md, "Element types"). */
enum bp_dtype_category {
  BP_DTYPE_CATEGORY_INVALID = 0,
  BP_DTYPE_CATEGORY_FLOAT = 1,             /* f16 bf16 f32 f64 */
  BP_DTYPE_CATEGORY_INT = 2,               /* signed two's complement, whole bytes */
  BP_DTYPE_CATEGORY_UNSIGNED = 3,          /* unsigned, whole bytes */
  BP_DTYPE_CATEGORY_BOOL = 4,              /* one byte, 0 or 1 */
  BP_DTYPE_CATEGORY_COMPLEX = 5,           /* real and imaginary floats */
  BP_DTYPE_CATEGORY_FP8 = 6,               /* 8-bit floats */
  BP_DTYPE_CATEGORY_SUB_BYTE_INT = 7,      /* signed integers narrower than a byte */
  BP_DTYPE_CATEGORY_SUB_BYTE_UNSIGNED = 8, /* unsigned integers narrower than a byte */
  BP_DTYPE_CATEGORY_SUB_BYTE_FLOAT = 9,    /* fp6, fp4 */
  BP_DTYPE_CATEGORY_SCALE = 10             /* power-of-two block scales (e8m0) */
};

/* Arrays indexed by dtype in ABI structs have this many slots, and dtype
 * masks are uint64_t, so that new dtypes (values below 64) fit without
 * changing any struct layout. */
#define BP_DTYPE_SLOTS 64

/* Bit for dtype d (< BP_DTYPE_SLOTS) in a uint64_t dtype mask. */
#define BP_DTYPE_BIT(d) (UINT64_C(1) << (uint32_t)(d))

/* ------------------------------------------------------------------------ */
/* Scalars (attributes such as alpha, fill values, clamp bounds).           */
/* ------------------------------------------------------------------------ */
enum bp_scalar_kind {
  BP_SCALAR_NONE = 0, /* absent (an optional scalar that was not given) */
  BP_SCALAR_FLOAT = 1,
  BP_SCALAR_INT = 2,
  BP_SCALAR_BOOL = 3
};

typedef struct bp_scalar {
  uint32_t kind; /* enum bp_scalar_kind */
  uint32_t reserved0;
  union {
    double f;
    int64_t i;
    uint64_t b; /* 0 or 1 */
  } v;
} bp_scalar_t;

/* ------------------------------------------------------------------------ */
/* Limits.                                                                  */
/* ------------------------------------------------------------------------ */
#define BP_MAX_RANK 8
#define BP_MAX_NAME 128

/* ------------------------------------------------------------------------ */
/* Device kinds, memory spaces. Carried as uint32_t.                        */
/* ------------------------------------------------------------------------ */
enum bp_device_kind {
  BP_DEVICE_KIND_UNKNOWN = 0,
  BP_DEVICE_KIND_CPU = 1,
  BP_DEVICE_KIND_GPU = 2,
  BP_DEVICE_KIND_INTEGRATED_GPU = 3,
  BP_DEVICE_KIND_ACCELERATOR = 4,
  BP_DEVICE_KIND_VIRTUAL = 5 /* software emulation (e.g. lavapipe, PoCL) */
};

enum bp_memory_kind {
  BP_MEMORY_DEVICE = 0,        /* device-local; may or may not be host visible */
  BP_MEMORY_HOST_PINNED = 1,   /* page-locked host memory the device can DMA */
  BP_MEMORY_HOST_PAGEABLE = 2, /* ordinary host memory */
  BP_MEMORY_MANAGED = 3,       /* migrates on demand between host and device */
  BP_MEMORY_KIND_COUNT_ = 4
};

enum bp_memory_flags {
  BP_MEMORY_FLAG_HOST_VISIBLE = 1u << 0,  /* buffer_map works */
  BP_MEMORY_FLAG_HOST_COHERENT = 1u << 1, /* no flush needed after host writes */
  BP_MEMORY_FLAG_DEVICE_LOCAL = 1u << 2,
  /* Buffers of this space can be exported (bp_buffer_export, OPAQUE_FD):
   * each gets its own exportable allocation (VkExportMemoryAllocateInfo),
   * so a backend offers such a space beside its suballocated ones. */
  BP_MEMORY_FLAG_EXPORTABLE = 1u << 3
};

enum bp_log_level {
  BP_LOG_ERROR = 0,
  BP_LOG_WARN = 1,
  BP_LOG_INFO = 2,
  BP_LOG_DEBUG = 3
};

/* How a plugin's collectives run (bp_plugin_info_t.comm_tier). */
enum bp_comm_tier { BP_COMM_TIER_NATIVE = 1, BP_COMM_TIER_HOST_STAGED = 2 };

/* Reductions of collectives (all_reduce, reduce, reduce_scatter).
 * Integers wrap on SUM and PROD; AVG divides the sum by the rank count
 * (integers: toward zero). Equivalent to ncclSum ... ncclAvg. */
enum bp_reduce_op {
  BP_REDUCE_SUM = 0, BP_REDUCE_PROD = 1, BP_REDUCE_MIN = 2, BP_REDUCE_MAX = 3, BP_REDUCE_AVG = 4
};

/* ------------------------------------------------------------------------ */
/* Layout pins: C11 _Static_assert or C++11 static_assert, on 64-bit hosts.  */
/* ------------------------------------------------------------------------ */
#if UINTPTR_MAX == 0xFFFFFFFFFFFFFFFFu && defined(__cplusplus) && __cplusplus >= 201103L
#define BP_STATIC_ASSERT(cond, msg) static_assert(cond, msg)
#define BP_ABI_PINNED 1
#elif UINTPTR_MAX == 0xFFFFFFFFFFFFFFFFu && defined(__STDC_VERSION__) && \
    __STDC_VERSION__ >= 201112L
#define BP_STATIC_ASSERT(cond, msg) _Static_assert(cond, msg)
#define BP_ABI_PINNED 1
#else
#define BP_ABI_PINNED 0
#endif

/* ------------------------------------------------------------------------ */
/* Opaque plugin-owned handles (plugin.h gives them meaning).               */
/* ------------------------------------------------------------------------ */
typedef struct bpp_instance_s* bpp_instance_t;
typedef struct bpp_device_s* bpp_device_t;
typedef struct bpp_buffer_s* bpp_buffer_t;
typedef struct bpp_stream_s* bpp_stream_t;
typedef struct bpp_event_s* bpp_event_t;
typedef struct bpp_executable_s* bpp_executable_t;
typedef struct bpp_comm_s* bpp_comm_t;
/* The plugin's root table; complete in plugin.h. */
typedef struct bp_plugin_vtable_s bp_plugin_vtable_t; /* tag differs from the function bp_plugin_vtable (C++ -Wshadow) */

/* Every `next` pointer in an ABI struct heads a chain of extension structs,
 * each starting with this header. A reader walks the chain and ignores the
 * types it does not know (type values are append-only, assigned in these
 * headers). No extension types exist in ABI 1.0. */
typedef struct bp_chain_header {
  uint32_t struct_size;
  uint32_t type;
  const void* next;
} bp_chain_header_t;
#define BP_CHAIN_HEADER_V1_SIZE 16u

/* ------------------------------------------------------------------------ */
/* Tensor descriptors.                                                      */
/* ------------------------------------------------------------------------ */
/* How the elements of a tensor are stored. Carried as uint32_t. */
enum bp_tensor_layout {
  BP_LAYOUT_STRIDED = 0, /* plain elements at sizes/strides */
  /* Block-scaled (OCP MX, NVFP4): value = element * scale of its block;
   * one scale per `block_size` consecutive elements along `axis` (MX: 32,
   * scales E8M0; NVFP4: 16, scales F8E4M3FN). quant is required. */
  BP_LAYOUT_BLOCK_SCALED = 1,
  /* Group-quantized (GPTQ/AWQ style): value = (element - zero_point) *
   * scale of its group of `block_size` elements along `axis`. quant is
   * required; zero_points may be absent (symmetric). */
  BP_LAYOUT_GROUP_QUANTIZED = 2,
  BP_LAYOUT_COUNT_ = 3
};
/* Bit for layout l in bp_device_properties_t.layout_mask. */
#define BP_LAYOUT_BIT(l) (UINT32_C(1) << (uint32_t)(l))

typedef struct bp_tensor_desc bp_tensor_desc_t;

/* Quantization of a BLOCK_SCALED or GROUP_QUANTIZED tensor. The scale and
 * zero-point tensors have the data's rank and sizes except along `axis`,
 * where they have ceil(sizes[axis] / block_size) entries. */
typedef struct bp_quant_desc {
  uint32_t struct_size;
  uint32_t axis;       /* dimension the blocks / groups run along */
  uint32_t block_size; /* elements per scale (the group size); > 0 */
  uint32_t reserved0;
  const bp_tensor_desc_t* scales;      /* required */
  const bp_tensor_desc_t* zero_points; /* GROUP_QUANTIZED only; NULL: symmetric */
  const void* next;
} bp_quant_desc_t;
#define BP_QUANT_DESC_V1_SIZE 40u

/* A tensor as a plugin sees it: no ownership, no reference counts.
 * Sub-byte dtypes (4, 2 and 6 bits, and fp4) are packed densely in bits:
 * element x lies at bit byte_offset * 8 + bit_offset + (sum x_i * strides_i)
 * * bits, low bits first. */
struct bp_tensor_desc {
  uint32_t struct_size;
  uint32_t dtype; /* enum bp_dtype; INVALID marks an absent optional operand */
  uint32_t rank;  /* 0..BP_MAX_RANK */
  uint32_t flags; /* reserved, 0 */
  bpp_buffer_t buffer;  /* NULL in support/cost queries and when absent */
  uint64_t byte_offset; /* of element [0,...,0] from the buffer start */
  int64_t sizes[BP_MAX_RANK];
  int64_t strides[BP_MAX_RANK]; /* in elements; may be 0 (broadcast) */
  uint32_t layout;     /* enum bp_tensor_layout */
  uint32_t bit_offset; /* sub-byte dtypes: 0..7, see above; 0 otherwise */
  const bp_quant_desc_t* quant; /* BLOCK_SCALED / GROUP_QUANTIZED; else NULL */
  const void* next;
};
#define BP_TENSOR_DESC_V1_SIZE 184u

/* ------------------------------------------------------------------------ */
/* Devices and memory spaces.                                               */
/* ------------------------------------------------------------------------ */
/* Device flags (bp_device_properties_t.flags). */
enum bp_device_flags {
  BP_DEVICE_FLAG_DENORMALS_PRESERVED = 1u << 0, /* no flush-to-zero */
  BP_DEVICE_FLAG_CORRECTLY_ROUNDED = 1u << 1,   /* div and sqrt, f32 */
  BP_DEVICE_FLAG_UNIFIED_MEMORY = 1u << 2,      /* device memory is host memory */
  BP_DEVICE_FLAG_TIMESTAMPS = 1u << 3,          /* event elapsed time works */
  BP_DEVICE_FLAG_PEER_COPY = 1u << 4            /* copy_peer to same-plugin devices */
};

typedef struct bp_device_properties_s { /* tag differs from bp_device_properties() */
  uint32_t struct_size;
  uint32_t kind; /* enum bp_device_kind */
  char name[BP_MAX_NAME];
  char vendor[64];
  char driver_version[64];
  uint8_t uuid[16]; /* stable fingerprint of the physical device; 0 unknown */
  uint64_t memory_bytes;
  uint32_t compute_units;
  uint32_t subgroup_size; /* SIMD width / warp / wavefront; 1 for scalar CPU */
  uint64_t dtype_mask;    /* BP_DTYPE_BIT(d) for dtypes with native storage */
  uint32_t flags;         /* enum bp_device_flags */
  /* BP_LAYOUT_BIT(l) for the tensor layouts the device takes; the core
   * refuses other layouts before any plugin call. STRIDED is implied. */
  uint32_t layout_mask;
  /* Throughput figures; 0 means unknown (the compiler then assumes a low
   * default and says so in its placement report). */
  double peak_ops_per_s[BP_DTYPE_SLOTS]; /* FLOP/s (integer ops/s) per dtype */
  double memory_bandwidth_bytes_per_s;
  double host_link_bandwidth_bytes_per_s; /* host <-> device */
  double launch_overhead_ns;              /* per op, submission to start */
} bp_device_properties_t;
#define BP_DEVICE_PROPERTIES_V1_SIZE 848u

/* One memory space of a device. Buffers are allocated in a space by its
 * index in the device's list (space 0 is the default, device-local one);
 * a device may list several spaces of one kind (two device-local heaps). */
typedef struct bp_memory_space_info {
  uint32_t struct_size;
  uint32_t kind;  /* enum bp_memory_kind */
  uint32_t flags; /* enum bp_memory_flags */
  uint32_t reserved0;
  uint64_t capacity_bytes;
  uint64_t alignment_bytes; /* of every buffer start */
} bp_memory_space_info_t;
#define BP_MEMORY_SPACE_INFO_V1_SIZE 32u

/* ------------------------------------------------------------------------ */
/* Op calls and support answers (queried by applications and plugins).      */
/* ------------------------------------------------------------------------ */
/* One operator call. Inputs and outputs are positional as listed in ops.def;
 * a list operand (cat's tensors, index's indices) expands in place at
 * inputs[list_begin .. list_begin + list_count). Fixed operands appended to
 * an op in a later minor come after every existing operand, so a plugin
 * that reads the list through list_begin/list_count never takes them for
 * list entries. inputs and outputs are arrays of pointers: each descriptor
 * carries its own struct_size and may be larger than the reader's. An
 * absent optional operand points to a descriptor with dtype INVALID. The
 * core has already validated shapes, dtypes, aliasing and the attributes. */
typedef struct bp_op_call {
  uint32_t struct_size;
  uint32_t op_id; /* enum bp_op_id */
  uint32_t num_inputs;
  uint32_t num_outputs;
  /* Elementwise and reduction ops: the dtype the math is done in (PyTorch's
   * common dtype after type promotion, or the accumulation dtype). Inputs
   * are converted to it on load, results to the output dtype on store. */
  uint32_t compute_dtype;
  uint32_t list_begin; /* index in inputs of the list operand's first tensor */
  uint32_t list_count; /* tensors in the list operand; 0 when the op has none */
  uint32_t reserved0;
  const bp_tensor_desc_t* const* inputs;
  const bp_tensor_desc_t* const* outputs;
  const void* attrs; /* the op's attribute struct, or NULL (bp_no_attrs_t) */
  const void* next;
} bp_op_call_t;
#define BP_OP_CALL_V1_SIZE 64u

enum bp_support_reason {
  BP_SUPPORT_OK = 0,
  BP_SUPPORT_OP = 1,        /* the op is not implemented at all */
  BP_SUPPORT_DTYPE = 2,
  BP_SUPPORT_RANK = 3,
  BP_SUPPORT_LAYOUT = 4,    /* strides/offset (see requires_contiguous) or tensor layout */
  BP_SUPPORT_ATTRIBUTE = 5, /* an attribute value (mode, flag) */
  BP_SUPPORT_SIZE = 6,      /* a dimension or total size over a limit */
  BP_SUPPORT_DEVICE = 7     /* this device lacks a feature (e.g. fp64) */
};

typedef struct bp_support {
  uint32_t struct_size;
  uint32_t supported;           /* 1 or 0 */
  uint32_t reason;              /* enum bp_support_reason */
  uint32_t requires_contiguous; /* supported only if the core packs inputs densely */
  char message[256];
} bp_support_t;
#define BP_SUPPORT_V1_SIZE 272u

/* Epilogues a plugin fuses onto matmul / convolution, and prologues onto
 * reductions (bit flags). */
enum bp_epilogue_flags {
  BP_EPILOGUE_BIAS = 1u << 0,
  BP_EPILOGUE_RELU = 1u << 1,
  BP_EPILOGUE_GELU = 1u << 2,
  BP_EPILOGUE_SILU = 1u << 3,
  BP_EPILOGUE_RESIDUAL_ADD = 1u << 4,
  BP_EPILOGUE_CAST = 1u << 5,
  BP_EPILOGUE_EW_PROGRAM = 1u << 6 /* any elementwise program */
};

typedef struct bp_fused_pattern {
  uint32_t struct_size;
  uint32_t op_id;      /* a FUSED-category op, e.g. BP_OP_layer_norm */
  uint64_t dtype_mask; /* dtypes it runs fused */
} bp_fused_pattern_t;
#define BP_FUSED_PATTERN_V1_SIZE 16u

/* Declared fusion. Pointers are to plugin-owned data that lives as long as
 * the device. Arrays of structs carry their element stride, so the structs
 * may grow: pattern k is at (const char*)patterns + k * pattern_stride. */
typedef struct bp_fusion_caps {
  uint32_t struct_size;
  /* Elementwise programs (0 in max_instrs: none). */
  uint32_t ew_max_inputs;
  uint32_t ew_max_outputs;
  uint32_t ew_max_instrs;
  uint32_t ew_max_registers;
  uint32_t matmul_epilogues;    /* enum bp_epilogue_flags */
  uint32_t conv_epilogues;
  uint32_t reduction_prologues; /* BP_EPILOGUE_EW_PROGRAM etc. on the input */
  uint64_t ew_dtype_mask;       /* compute dtypes */
  /* Op ids usable in programs: bit (i % 64) of word i / 64 is op id i;
   * ids at or past 64 * ew_opcode_words are not usable. */
  uint32_t ew_opcode_words;
  uint32_t num_patterns;  /* entries in `patterns` */
  const uint64_t* ew_opcode_mask;
  uint32_t pattern_stride; /* bytes from one pattern to the next */
  uint32_t reserved0;
  const bp_fused_pattern_t* patterns;
  const void* next;
} bp_fusion_caps_t;
#define BP_FUSION_CAPS_V1_SIZE 80u

/* ------------------------------------------------------------------------ */
/* Cost estimates, elementwise programs and compiled regions (shared by the  */
/* plugin ABI's caps and exec tables and the application API).               */
/* ------------------------------------------------------------------------ */
typedef struct bp_cost_estimate {
  uint32_t struct_size;
  uint32_t confidence; /* 0 guess .. 100 measured */
  double time_ns;
  double flops;
  double bytes; /* memory traffic */
} bp_cost_estimate_t;
#define BP_COST_ESTIMATE_V1_SIZE 32u

/* Elementwise programs: a register bytecode run by one generic kernel. */
enum bp_ew_opcode {
  BP_EW_LOAD_INPUT = 0x1000, /* r[dst] = input[a] (broadcast, cast to compute dtype) */
  BP_EW_LOAD_CONST = 0x1001, /* r[dst] = constants[a] */
  BP_EW_STORE = 0x1002,      /* output[a] = r[b], cast to the output's dtype */
  BP_EW_CAST = 0x1003        /* r[dst] = r[a] rounded through dtype aux */
  /* Any other value is an elementwise op id (UNARY, BINARY, LOGICAL
   * categories, where, clamp): r[dst] = op(r[a], r[b], r[c]). */
};

/* A plain record: programs are arrays of them, read at `instr_stride`, so
 * fields may be appended in a later minor. */
typedef struct bp_ew_instr {
  uint32_t opcode; /* enum bp_ew_opcode or an op id */
  uint8_t dst, a, b, c; /* register / input / output / constant indices */
  uint32_t aux;    /* CAST: dtype; ops: rounding mode etc. */
} bp_ew_instr_t;
#define BP_EW_INSTR_V1_SIZE 12u

typedef struct bp_ew_program {
  uint32_t struct_size;
  uint32_t num_instrs;
  uint32_t num_registers;
  uint32_t num_inputs;
  uint32_t num_outputs;
  uint32_t num_constants;
  uint32_t compute_dtype; /* dtype of registers */
  uint32_t instr_stride;  /* bytes from one instruction to the next (>= 12) */
  const bp_ew_instr_t* instrs; /* instruction k at (const char*)instrs + k * instr_stride */
  const bp_scalar_t* constants;
  const void* next;
} bp_ew_program_t;
#define BP_EW_PROGRAM_V1_SIZE 56u
/* Instruction k of `program`, whatever the writer's instruction size. */
#define BP_EW_INSTR_AT(program, k) \
  ((const bp_ew_instr_t*)(const void*)((const char*)(program)->instrs + \
                                       (size_t)(k) * (program)->instr_stride))

/* What a region describes (bp_region_desc_t.kind). Carried as uint32_t. */
enum bp_region_kind {
  /* `program` over the arguments: program input k is argument k, output k
   * is argument num_inputs + k; no nodes. */
  BP_REGION_EW_PROGRAM = 1,
  /* nodes[0] is an mm, bmm, addmm, linear or convolution node (the
   * anchor); the nodes after it are elementwise ops over its result and
   * the region's arguments (bias add, activation, residual add, cast). */
  BP_REGION_EPILOGUE = 2,
  /* One node of a fused op (softmax, layer_norm, rms_norm, attention, ...)
   * that the plugin may run as one kernel. */
  BP_REGION_PATTERN = 3,
  /* Any convex subgraph of ops (nodes in topological order). region_claim
   * is offered regions of this kind. */
  BP_REGION_GRAPH = 4,
  BP_REGION_KIND_COUNT_ = 5
};

/* Value id of an absent optional operand in bp_region_node_t.inputs. */
#define BP_REGION_VALUE_NONE UINT32_MAX

/* One op of a region: an op call over value ids instead of descriptors. */
typedef struct bp_region_node {
  uint32_t struct_size;
  uint32_t op_id; /* enum bp_op_id */
  uint32_t num_inputs, num_outputs;
  /* As bp_op_call_t.compute_dtype: the dtype the node's math is done in;
   * 0 (INVALID) lets the op's promotion rule decide. */
  uint32_t compute_dtype;
  uint32_t list_begin, list_count; /* as in bp_op_call_t */
  uint32_t reserved0;
  const uint32_t* inputs;  /* value ids; BP_REGION_VALUE_NONE: absent */
  const uint32_t* outputs; /* value ids */
  const void* attrs;       /* the op's attribute struct, or NULL */
  const void* next;
} bp_region_node_t;
#define BP_REGION_NODE_V1_SIZE 64u

/* A region to claim or compile. Values 0..num_args-1 are the region's
 * arguments, in the order launch passes them: num_inputs inputs, then the
 * outputs; ids from num_args up are temporaries internal to the region.
 * Values give dtypes, ranks and sizes (buffers NULL; strides are ignored:
 * launch takes any in-bounds strides). Everything is read only during the
 * call. */
typedef struct bp_region_desc {
  uint32_t struct_size;
  uint32_t kind; /* enum bp_region_kind */
  uint32_t num_values;
  uint32_t num_args;
  uint32_t num_inputs; /* the first num_inputs arguments are inputs */
  uint32_t num_nodes;
  uint32_t flags; /* reserved, 0 */
  uint32_t reserved0;
  const bp_tensor_desc_t* const* values; /* num_values descriptors */
  const bp_region_node_t* const* nodes;  /* topological order */
  const bp_ew_program_t* program;        /* EW_PROGRAM only; else NULL */
  const void* next;
} bp_region_desc_t;
#define BP_REGION_DESC_V1_SIZE 64u

/* Donation: output argument `output` may be launched in the very same
 * memory as input argument `input` (same buffer, offset and strides); the
 * region then reads each input element before it writes the output
 * element over it. A plain record: arrays of it are read at a stride. */
typedef struct bp_region_alias {
  uint32_t output; /* argument index (>= num_inputs) */
  uint32_t input;  /* argument index (< num_inputs) */
} bp_region_alias_t;
#define BP_REGION_ALIAS_V1_SIZE 8u

/* What a compiled region needs and costs. Out-struct: the caller sets
 * struct_size. */
typedef struct bp_region_info {
  uint32_t struct_size;
  uint32_t num_aliases;        /* entries in `aliases` */
  uint64_t workspace_bytes;    /* scratch launch needs; 0: none */
  uint64_t workspace_alignment; /* of the workspace's start; a power of two, or 0: any */
  /* The plugin's estimate for one launch at the compiled sizes (0: none). */
  double time_ns;
  double flops;
  double bytes; /* memory traffic */
  uint32_t cost_confidence; /* 0 guess .. 100 measured */
  uint32_t alias_stride;    /* bytes from one alias record to the next */
  /* Owned by the executable (plugin side) or the region (application
   * side); valid as long as it. */
  const bp_region_alias_t* aliases;
  const void* next;
} bp_region_info_t;
#define BP_REGION_INFO_V1_SIZE 72u

/* ------------------------------------------------------------------------ */
/* Streams and events: creation parameters.                                 */
/* ------------------------------------------------------------------------ */
enum bp_queue_kind {
  BP_QUEUE_COMPUTE = 0, /* ops and copies */
  BP_QUEUE_COPY = 1     /* copies and fills only (a DMA engine where one exists) */
};

typedef struct bp_stream_create_info {
  uint32_t struct_size;
  uint32_t queue;   /* enum bp_queue_kind */
  int32_t priority; /* 0 normal, > 0 higher, < 0 lower; a hint clamped to the device's range */
  uint32_t flags;   /* reserved, 0 */
  const void* next;
} bp_stream_create_info_t;
#define BP_STREAM_CREATE_INFO_V1_SIZE 24u

enum bp_event_flags {
  BP_EVENT_TIMING = 1u << 0,    /* event_elapsed_ns works on it */
  BP_EVENT_EXPORTABLE = 1u << 1 /* event_export works on it (interprocess, other runtimes) */
};

typedef struct bp_event_create_info {
  uint32_t struct_size;
  uint32_t flags; /* enum bp_event_flags */
  const void* next;
} bp_event_create_info_t;
#define BP_EVENT_CREATE_INFO_V1_SIZE 16u

/* ------------------------------------------------------------------------ */
/* External memory and events: handed over without a copy.                  */
/* ------------------------------------------------------------------------ */
enum bp_external_kind {
  BP_EXTERNAL_NONE = 0,
  /* Buffers: host memory used in place (cuMemHostRegister). Import wraps
   * [host_pointer + offset_bytes, + size_bytes) without a copy; the memory
   * stays owned by the application and must stay valid until the buffer is
   * freed (its last reference dropped and its work done). Export returns the
   * buffer's host address in host_pointer, valid while the buffer lives. */
  BP_EXTERNAL_HOST_POINTER = 1,
  /* Buffers: a DLPack DLManagedTensor* (dlpack.h; the unversioned struct of
   * DLPack 0.6 to 0.8). Import: the buffer is the tensor's bytes from
   * data + byte_offset (the core fills size_bytes with their extent and
   * offset_bytes with byte_offset before the plugin sees the desc); on
   * success the buffer owns the tensor and calls its deleter once, when it
   * is freed. Export: a DLManagedTensor viewing the whole buffer as 1-D
   * uint8 that the receiver owns. Between core and plugin that tensor only
   * borrows the buffer: the host calls its deleter before buffer_release;
   * the application's copy holds a buffer reference its deleter drops. */
  BP_EXTERNAL_DLPACK = 2,
  /* Buffers and events: a POSIX file descriptor of an opaque driver handle
   * (VK_EXTERNAL_*_HANDLE_TYPE_OPAQUE_FD_BIT, cudaIpc*, hipIpc*). Import
   * takes ownership of the fd on success; export returns a new fd. */
  BP_EXTERNAL_OPAQUE_FD = 3,
  BP_EXTERNAL_DMA_BUF_FD = 4, /* buffers: Linux dma-buf */
  BP_EXTERNAL_SYNC_FD = 5     /* events: Linux sync file */
};

typedef struct bp_external_buffer_desc {
  uint32_t struct_size;
  uint32_t kind;         /* enum bp_external_kind */
  uint64_t size_bytes;   /* import: bytes to use (> 0); export: filled */
  uint64_t offset_bytes; /* of the buffer within the external memory */
  void* host_pointer;    /* HOST_POINTER */
  void* dlpack;          /* DLPACK: DLManagedTensor* */
  int64_t fd;            /* *_FD kinds; -1 otherwise */
  uint32_t memory_space; /* import: space the memory counts against */
  uint32_t flags;        /* reserved, 0 */
  const void* next;
} bp_external_buffer_desc_t;
#define BP_EXTERNAL_BUFFER_DESC_V1_SIZE 64u

typedef struct bp_external_event_desc {
  uint32_t struct_size;
  uint32_t kind;  /* OPAQUE_FD (semaphore) or SYNC_FD */
  int64_t fd;
  uint64_t value; /* timeline semaphores: the value that means "signaled"; else 0 */
  const void* next;
} bp_external_event_desc_t;
#define BP_EXTERNAL_EVENT_DESC_V1_SIZE 32u

#if BP_ABI_PINNED
BP_STATIC_ASSERT(sizeof(bp_scalar_t) == 16, "bp_scalar_t layout");
BP_STATIC_ASSERT(sizeof(bp_quant_desc_t) == BP_QUANT_DESC_V1_SIZE, "quant desc layout");
BP_STATIC_ASSERT(sizeof(bp_tensor_desc_t) == BP_TENSOR_DESC_V1_SIZE, "tensor desc layout");
BP_STATIC_ASSERT(offsetof(bp_tensor_desc_t, sizes) == 32, "tensor desc sizes offset");
BP_STATIC_ASSERT(offsetof(bp_tensor_desc_t, layout) == 160, "tensor desc layout offset");
BP_STATIC_ASSERT(offsetof(bp_device_properties_t, peak_ops_per_s) == 312,
                 "device properties layout");
BP_STATIC_ASSERT(sizeof(bp_device_properties_t) == BP_DEVICE_PROPERTIES_V1_SIZE,
                 "device properties size");
BP_STATIC_ASSERT(sizeof(bp_memory_space_info_t) == BP_MEMORY_SPACE_INFO_V1_SIZE,
                 "memory space layout");
BP_STATIC_ASSERT(sizeof(bp_op_call_t) == BP_OP_CALL_V1_SIZE, "op call layout");
BP_STATIC_ASSERT(offsetof(bp_op_call_t, inputs) == 32, "op call inputs offset");
BP_STATIC_ASSERT(sizeof(bp_support_t) == BP_SUPPORT_V1_SIZE, "support layout");
BP_STATIC_ASSERT(sizeof(bp_fused_pattern_t) == BP_FUSED_PATTERN_V1_SIZE, "pattern layout");
BP_STATIC_ASSERT(sizeof(bp_fusion_caps_t) == BP_FUSION_CAPS_V1_SIZE, "fusion caps layout");
BP_STATIC_ASSERT(sizeof(bp_cost_estimate_t) == BP_COST_ESTIMATE_V1_SIZE, "cost layout");
BP_STATIC_ASSERT(sizeof(bp_ew_instr_t) == BP_EW_INSTR_V1_SIZE, "ew instr layout");
BP_STATIC_ASSERT(sizeof(bp_ew_program_t) == BP_EW_PROGRAM_V1_SIZE, "ew program layout");
BP_STATIC_ASSERT(sizeof(bp_region_node_t) == BP_REGION_NODE_V1_SIZE, "region node layout");
BP_STATIC_ASSERT(offsetof(bp_region_node_t, inputs) == 32, "region node inputs offset");
BP_STATIC_ASSERT(sizeof(bp_region_desc_t) == BP_REGION_DESC_V1_SIZE, "region desc layout");
BP_STATIC_ASSERT(offsetof(bp_region_desc_t, values) == 32, "region desc values offset");
BP_STATIC_ASSERT(sizeof(bp_region_alias_t) == BP_REGION_ALIAS_V1_SIZE, "region alias layout");
BP_STATIC_ASSERT(sizeof(bp_region_info_t) == BP_REGION_INFO_V1_SIZE, "region info layout");
BP_STATIC_ASSERT(sizeof(bp_stream_create_info_t) == BP_STREAM_CREATE_INFO_V1_SIZE,
                 "stream create info layout");
BP_STATIC_ASSERT(sizeof(bp_event_create_info_t) == BP_EVENT_CREATE_INFO_V1_SIZE,
                 "event create info layout");
BP_STATIC_ASSERT(sizeof(bp_external_buffer_desc_t) == BP_EXTERNAL_BUFFER_DESC_V1_SIZE,
                 "external buffer layout");
BP_STATIC_ASSERT(sizeof(bp_external_event_desc_t) == BP_EXTERNAL_EVENT_DESC_V1_SIZE,
                 "external event layout");
#endif

#ifdef __cplusplus
}
#endif
#endif /* BACKPLANE_TYPES_H_ */
