/* backplane core, operator front end: private declarations shared by the
 * files of core/ops. Everything per-op here is generated from ops.def.
 *
 * Threading: the op table is immutable after first use; every function here
 * is thread-safe and keeps no state beyond its arguments.
 */
#ifndef BACKPLANE_CORE_OPS_INTERNAL_H_
#define BACKPLANE_CORE_OPS_INTERNAL_H_

#include "internal.h"

/* ------------------------------------------------------------------------ */
/* Operand-layout expansion helpers.                                         */
/*                                                                           */
/* ops.def writes operands as BP_IN2(self, opt_other) or BP_OUT1(out); the   */
/* markers in backplane.h turn those into "KIND_, names...". Each helper     */
/* below takes that list (already expanded) and dispatches on KIND_.         */
/* ------------------------------------------------------------------------ */
#define BP__OPS_DISPATCH(helper, ...) BP__OPS_DISPATCH_(helper, __VA_ARGS__)
#define BP__OPS_DISPATCH_(helper, kind, ...) helper##kind(__VA_ARGS__)

/* Fixed inputs before the list (all fixed inputs when there is no list). */
#define BP__NUM_BEFORE(...) BP__OPS_DISPATCH(BP__NB_, __VA_ARGS__)
#define BP__NB_IN0_(...) 0
#define BP__NB_IN1_(...) 1
#define BP__NB_IN2_(...) 2
#define BP__NB_IN3_(...) 3
#define BP__NB_IN4_(...) 4
#define BP__NB_IN5_(...) 5
#define BP__NB_IN6_(...) 6
#define BP__NB_INV_(...) 0
#define BP__NB_IN1V_(...) 1
#define BP__NB_IN1V1_(...) 1

/* 1 when the operands contain one tensor list. */
#define BP__HAS_LIST(...) BP__OPS_DISPATCH(BP__HL_, __VA_ARGS__)
#define BP__HL_IN0_(...) 0
#define BP__HL_IN1_(...) 0
#define BP__HL_IN2_(...) 0
#define BP__HL_IN3_(...) 0
#define BP__HL_IN4_(...) 0
#define BP__HL_IN5_(...) 0
#define BP__HL_IN6_(...) 0
#define BP__HL_INV_(...) 1
#define BP__HL_IN1V_(...) 1
#define BP__HL_IN1V1_(...) 1

/* Fixed inputs after the list. */
#define BP__NUM_AFTER(...) BP__OPS_DISPATCH(BP__NA_, __VA_ARGS__)
#define BP__NA_IN0_(...) 0
#define BP__NA_IN1_(...) 0
#define BP__NA_IN2_(...) 0
#define BP__NA_IN3_(...) 0
#define BP__NA_IN4_(...) 0
#define BP__NA_IN5_(...) 0
#define BP__NA_IN6_(...) 0
#define BP__NA_INV_(...) 0
#define BP__NA_IN1V_(...) 0
#define BP__NA_IN1V1_(...) 1

#define BP__NUM_OUTPUTS(...) BP__OPS_DISPATCH(BP__NO_, __VA_ARGS__)
#define BP__NO_OUT1_(...) 1
#define BP__NO_OUT2_(...) 2
#define BP__NO_OUT3_(...) 3
#define BP__NO_OUT4_(...) 4

/* Names as a NULL-terminated initializer list: fixed inputs in order, then
 * the list's name (bp_op_info_t.input_names). */
#define BP__IN_NAMES(...) BP__OPS_DISPATCH(BP__INN_, __VA_ARGS__)
#define BP__INN_IN0_(x) NULL
#define BP__INN_IN1_(a) #a, NULL
#define BP__INN_IN2_(a, b) #a, #b, NULL
#define BP__INN_IN3_(a, b, c) #a, #b, #c, NULL
#define BP__INN_IN4_(a, b, c, d) #a, #b, #c, #d, NULL
#define BP__INN_IN5_(a, b, c, d, e) #a, #b, #c, #d, #e, NULL
#define BP__INN_IN6_(a, b, c, d, e, f) #a, #b, #c, #d, #e, #f, NULL
#define BP__INN_INV_(l) #l, NULL
#define BP__INN_IN1V_(a, l) #a, #l, NULL
#define BP__INN_IN1V1_(a, l, b) #a, #b, #l, NULL

#define BP__OUT_NAMES(...) BP__OPS_DISPATCH(BP__OUTN_, __VA_ARGS__)
#define BP__OUTN_OUT1_(a) #a, NULL
#define BP__OUTN_OUT2_(a, b) #a, #b, NULL
#define BP__OUTN_OUT3_(a, b, c) #a, #b, #c, NULL
#define BP__OUTN_OUT4_(a, b, c, d) #a, #b, #c, #d, NULL

/* Most operands and outputs any op has (ops.def: BP_IN6, BP_OUT4). */
#define BP__MAX_FIXED_INPUTS 6
#define BP__MAX_OUTPUTS 4

/* ------------------------------------------------------------------------ */
/* Attribute struct kinds (one per BP_ATTRS_TYPES entry).                    */
/* ------------------------------------------------------------------------ */
enum bp__attrs_kind {
#define BP__ATTRS_ENUM(t) BP__ATTRS_##t,
  BP_ATTRS_TYPES(BP__ATTRS_ENUM)
#undef BP__ATTRS_ENUM
  BP__ATTRS_KIND_COUNT_
};

/* Storage large enough for any attribute struct (bp_op_run keeps the filled
 * struct on the stack). */
typedef union bp__attrs_storage {
#define BP__ATTRS_MEMBER(t) t m_##t;
  BP_ATTRS_TYPES(BP__ATTRS_MEMBER)
#undef BP__ATTRS_MEMBER
} bp__attrs_storage_t;

/* ------------------------------------------------------------------------ */
/* Op metadata.                                                              */
/* ------------------------------------------------------------------------ */
typedef struct bp__infer bp__infer_t;
typedef bp_status_t (*bp__infer_fn)(bp__infer_t* x);

typedef struct bp__op_meta {
  uint32_t id;
  uint32_t category; /* enum bp_op_category */
  const char* name;
  const char* category_name;
  const char* aten;
  const char* rule;
  uint8_t num_before, has_list, num_after, num_outputs;
  uint32_t attrs_kind; /* enum bp__attrs_kind */
  uint32_t attrs_size; /* 0 for bp_no_attrs_t */
  const char* const* input_names;  /* fixed inputs, then the list's name */
  const char* const* output_names;
  bp__infer_fn infer;
} bp__op_meta_t;

/* Metadata of a valid op id (1..BP_OP_COUNT-1), else NULL. */
BP__HIDDEN const bp__op_meta_t* bp__op_meta(uint32_t op_id);
/* Bit i: fixed input i may be NULL (its name starts with "opt_"). */
BP__HIDDEN uint32_t bp__op_optional_mask(uint32_t op_id);

/* Name of flat input `index` for messages ("self", "tensors[2]"), without
 * the opt_ prefix. `buf` holds at least 64 bytes. */
BP__HIDDEN const char* bp__op_input_name(const bp__op_meta_t* op, uint32_t num_inputs,
                                         uint32_t index, char* buf);
/* Output name (outputs are never optional). */
BP__HIDDEN const char* bp__op_output_name(const bp__op_meta_t* op, uint32_t index);

/* ------------------------------------------------------------------------ */
/* Attributes (op_attrs.c).                                                  */
/* ------------------------------------------------------------------------ */
/* Fills `storage` from the caller's attrs: NULL means every default; a
 * struct smaller than this header's (an older caller) is copied over the
 * defaults up to its struct_size. Validates enum fields. *out_attrs is the
 * filled struct (inside storage), or NULL for ops without attributes. */
BP__HIDDEN bp_status_t bp__attrs_fill(const bp__op_meta_t* op, const void* attrs,
                                      bp__attrs_storage_t* storage, const void** out_attrs);

/* ------------------------------------------------------------------------ */
/* dtypes and promotion (promote.c).                                         */
/* ------------------------------------------------------------------------ */
BP__HIDDEN int bp__dtype_valid(uint32_t dtype);
BP__HIDDEN int bp__dtype_is_float(uint32_t dtype); /* f16 bf16 f32 f64 */
BP__HIDDEN int bp__dtype_is_int(uint32_t dtype);   /* u8 i8 i16 i32 i64 (not bool) */
BP__HIDDEN int bp__dtype_is_complex(uint32_t dtype);
BP__HIDDEN int bp__dtype_is_storage_only(uint32_t dtype); /* fp8, e8m0, fp6, fp4, sub-byte ints */
/* A printable name, also for invalid values ("dtype(99)"); buf >= 32 bytes. */
BP__HIDDEN const char* bp__dtype_str(uint32_t dtype, char* buf);

/* PyTorch promote_types; BP_DTYPE_INVALID when the pair does not promote
 * (fp8 with anything but itself, c64 with f64). INVALID with x gives x. */
BP__HIDDEN uint32_t bp__promote_types(uint32_t a, uint32_t b);

/* PyTorch result_type over three priority groups. */
typedef struct bp__result_type {
  uint32_t dim_result;     /* tensors with rank >= 1 */
  uint32_t zero_result;    /* 0-d tensors */
  uint32_t wrapped_result; /* scalars */
  uint32_t saw_storage_only;        /* a storage-only (fp8, sub-byte) operand took part */
  uint32_t failed;         /* two operands did not promote */
} bp__result_type_t;

BP__HIDDEN void bp__result_type_init(bp__result_type_t* rt);
BP__HIDDEN void bp__result_type_add_tensor(bp__result_type_t* rt, const bp_tensor_desc_t* t);
BP__HIDDEN void bp__result_type_add_scalar(bp__result_type_t* rt, const bp_scalar_t* s);
/* The combined dtype (INVALID when nothing was added or promotion failed). */
BP__HIDDEN uint32_t bp__result_type_get(const bp__result_type_t* rt);

/* ------------------------------------------------------------------------ */
/* Shapes (shape.c).                                                         */
/* ------------------------------------------------------------------------ */
/* Dense row-major descriptor: dtype, rank, sizes, strides; buffer NULL,
 * offset 0. INVALID_ARGUMENT when a size is negative or the byte size
 * overflows int64 (the message names the op and the output). */
BP__HIDDEN bp_status_t bp__desc_dense(bp_tensor_desc_t* d, uint32_t dtype, uint32_t rank,
                                      const int64_t* sizes, const char* op, const char* output);
/* Nonzero when the descriptor is dense row-major (size-1 dims ignored). */
BP__HIDDEN int bp__desc_is_contiguous(const bp_tensor_desc_t* d);
/* Formats "[2, 3]" into buf (>= 8 * 22 bytes suffices; use 192). */
BP__HIDDEN const char* bp__shape_str(uint32_t rank, const int64_t* sizes, char* buf, size_t cap);
BP__HIDDEN int bp__shape_equal(uint32_t ra, const int64_t* a, uint32_t rb, const int64_t* b);

/* ------------------------------------------------------------------------ */
/* Inference (op_infer_*.c).                                                 */
/* ------------------------------------------------------------------------ */
struct bp__infer {
  const bp__op_meta_t* op;
  uint32_t num_inputs;
  /* Flat inputs (a list expanded in place); dtype INVALID = absent. */
  const bp_tensor_desc_t* in;
  const void* attrs; /* filled attribute struct; NULL for bp_no_attrs_t */
  /* Creation ops: the outputs the caller gave (dtype INVALID = not given);
   * NULL when none were given. */
  const bp_tensor_desc_t* given;
  /* Results. */
  bp_tensor_desc_t out[BP__MAX_OUTPUTS];
  uint32_t compute_dtype;
};

/* Validates and infers: fills x->out[0..num_outputs) and x->compute_dtype.
 * Shared by bp_op_infer and bp_op_run. */
BP__HIDDEN bp_status_t bp__op_infer_descs(bp__infer_t* x);

/* Every rule named in ops.def. */
#define BP__RULE_DECL(rule) BP__HIDDEN bp_status_t bp__infer_##rule(bp__infer_t* x);
#define BP_OP(id, name, cat, fam, ins, outs, attrs_t, rule, aten) BP__RULE_DECL(rule)
#include "backplane/ops.def"
#undef BP_OP

/* Helpers for rule implementations (op_infer_common.c). */
/* Present input i (dtype != INVALID). */
static inline int bp__in_present(const bp__infer_t* x, uint32_t i) {
  return i < x->num_inputs && x->in[i].dtype != BP_DTYPE_INVALID;
}
/* INVALID_ARGUMENT "op '<name>': <message>". */
BP__HIDDEN bp_status_t bp__infer_fail(const bp__infer_t* x, const char* fmt, ...)
    __attribute__((format(printf, 2, 3)));
/* Rejects fp8 operands for every op but the storage ops (to_copy, copy,
 * clone, cat, fill). */
BP__HIDDEN bp_status_t bp__infer_reject_storage_only(const bp__infer_t* x);
/* Broadcasts the present inputs whose bit is set in `mask` (PyTorch rules:
 * right-aligned, size 1 expands). */
BP__HIDDEN bp_status_t bp__infer_broadcast(const bp__infer_t* x, uint32_t mask,
                                           uint32_t* out_rank, int64_t* out_sizes);
/* Input j must have exactly input i's dtype and shape (a residual). */
BP__HIDDEN bp_status_t bp__infer_like_input(const bp__infer_t* x, uint32_t j, uint32_t i);
/* Normalizes dim against rank (rank 0 accepts 0 and -1, as PyTorch). */
BP__HIDDEN bp_status_t bp__infer_wrap_dim(const bp__infer_t* x, int64_t dim, uint32_t rank,
                                          const char* what, uint32_t* out_dim);
/* The row quantizations (op_infer_quant_rows.c): q is a symmetric 8-bit
 * code dtype (i8, float8_e4m3fn, float8_e5m2); input i is floating (f16,
 * bf16, f32, f64); input 0 has rows of n = its last dim, m = n (or n / 2
 * for the [gate | up] halves of swiglu when `glu`, n even) quantized
 * elements; the present weight wi is a floating [n]. */
BP__HIDDEN bp_status_t bp__infer_quant_code_dtype(const bp__infer_t* x, uint32_t q);
BP__HIDDEN bp_status_t bp__infer_float_input(const bp__infer_t* x, uint32_t i);
BP__HIDDEN bp_status_t bp__infer_quant_row(const bp__infer_t* x, int glu, int64_t* out_n, int64_t* out_m);
BP__HIDDEN bp_status_t bp__infer_quant_weight(const bp__infer_t* x, uint32_t wi, int64_t n);
/* Sets x->out[k] dense. */
BP__HIDDEN bp_status_t bp__infer_set_out(bp__infer_t* x, uint32_t k, uint32_t dtype,
                                         uint32_t rank, const int64_t* sizes);

/* ------------------------------------------------------------------------ */
/* Typed functions (op_functions.c) go through this (op_run.c): flattens    */
/* before + list + after, checks the output pointers, runs the op and writes */
/* new output references back through out_ptrs on success. list_name is    */
/* NULL for ops without a list.                                              */
/* ------------------------------------------------------------------------ */
BP__HIDDEN bp_status_t bp__op_call(bp_stream_t* stream, uint32_t op_id,
                                   const bp_tensor_t* const* before, uint32_t num_before,
                                   const bp_tensor_t* const* list, uint32_t list_count,
                                   const char* list_name, const bp_tensor_t* const* after,
                                   uint32_t num_after, const void* attrs,
                                   bp_tensor_t** const* out_ptrs, uint32_t num_outputs);

/* ------------------------------------------------------------------------ */
/* Support (support.c).                                                      */
/* ------------------------------------------------------------------------ */
/* Asks the device's plugin whether it runs `call` (buffers may be NULL).
 * Fills *out (struct_size set here) and returns BP_OK for every answer;
 * fails only when the plugin's query itself fails. A missing launch slot or
 * caps table answers supported = 0, reason BP_SUPPORT_OP. */
BP__HIDDEN bp_status_t bp__query_support_checked(const bp_device_t* device,
                                                 const bp_op_call_t* call, bp_support_t* out);
/* Refuses (1, with `out` filled: supported = 0, a reason and a message) a
 * call the plugin's negotiated minor does not define (abi_history.h).
 * 0 when it may be handed over. Costs one comparison for a plugin of the
 * host's minor. */
BP__HIDDEN int bp__abi_gate_plugin(const bp_plugin_t* plugin, const bp__op_meta_t* op,
                                   const bp_op_call_t* call, bp_support_t* out);

/* Sets list_begin / list_count of a call whose num_inputs is set. */
static inline void bp__op_call_set_list(bp_op_call_t* call, const bp__op_meta_t* op) {
  call->list_begin = op->has_list ? op->num_before : 0;
  call->list_count = op->has_list ? call->num_inputs - op->num_before - op->num_after : 0;
}

#endif /* BACKPLANE_CORE_OPS_INTERNAL_H_ */
