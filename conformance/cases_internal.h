/* Case generators: shared helpers (internal). */
#ifndef BP_CONFORMANCE_CASES_INTERNAL_H_
#define BP_CONFORMANCE_CASES_INTERNAL_H_

#include "conform.h"

typedef struct bpc_gen {
  bpc_case_list_t* list;
  uint32_t op;
  const char* name;
  int quick;
  bp_status_t status; /* first allocation failure */
} bpc_gen_t;

typedef struct bpc_shape {
  uint32_t rank;
  int64_t sizes[BP_MAX_RANK];
} bpc_shape_t;

/* Appends a zeroed case "op/label/axis/variant" (NULL after a failure). */
bpc_case_t* bpc_gen_new(bpc_gen_t* g, const char* label, const char* axis, int variant);
void bpc_gen_drop_last(bpc_gen_t* g);
/* Keeps the last case only if its reference accepts it (used where a
 * combination of dtypes is valid for some ops only). */
int bpc_gen_keep_if_valid(bpc_gen_t* g, bpc_case_t* c);

/* Table-driven generators (cases_table.c). Each row of a table starts with
 * a bpc_row_t; bpc_gen_table makes, per case dtype (t->dtypes, or the row's
 * own t->row_dtype when dtypes is NULL), per row (quick rows only under
 * --quick; t->row_skip may leave a row out for a dtype) and per variant
 * (t->variants, 0 meaning 1), the case "op/dtype/axis/variant" with
 * t->num_inputs and t->num_outputs operands and the outputs left to
 * inference, then calls t->fill for its inputs and attributes (fill may
 * still give an output a layout or change the input count). */
typedef struct bpc_row {
  const char* axis; /* the case name's axis part */
  int quick;        /* kept under --quick */
} bpc_row_t;
typedef struct bpc_table_at {
  uint32_t dtype;     /* the case dtype */
  size_t dtype_index; /* its position in t->dtypes (0 without) */
  size_t row_index;
  int variant;
} bpc_table_at_t;
typedef struct bpc_table {
  const void* rows;
  size_t num_rows, row_size;
  const uint32_t* dtypes;
  size_t num_dtypes;
  uint32_t (*row_dtype)(const void* row);
  int (*row_skip)(const void* row, uint32_t dtype);
  int variants;
  uint32_t num_inputs, num_outputs;
  void (*fill)(bpc_case_t* c, const void* row, const bpc_table_at_t* at);
} bpc_table_t;
void bpc_gen_table(bpc_gen_t* g, const bpc_table_t* t);
/* The rows of a table (an array), for a bpc_table_t initializer. */
#define BPC_ROWS(a) .rows = (a), .num_rows = sizeof(a) / sizeof((a)[0]), .row_size = sizeof((a)[0])
/* f32, f64, f16, bf16: the dtypes most serving ops run per case. */
#define BPC_NUM_FLOAT_DTYPES 4
extern const uint32_t bpc_float_dtypes[BPC_NUM_FLOAT_DTYPES];
#define BPC_FLOAT_DTYPES .dtypes = bpc_float_dtypes, .num_dtypes = BPC_NUM_FLOAT_DTYPES
/* The attribute struct `member` of case c, zeroed with its struct_size set
 * (a pointer to it). */
#define BPC_CASE_ATTRS(c, member)                                                                 \
  ((c)->has_attrs = 1, memset(&(c)->attrs.member, 0, sizeof((c)->attrs.member)),                  \
   (c)->attrs.member.struct_size = (uint32_t)sizeof((c)->attrs.member), &(c)->attrs.member)

/* bpc_shape(rank, sizes...) -- sizes are int64_t. */
bpc_shape_t bpc_shape(uint32_t rank, ...);
#define S0() bpc_shape(0)
#define S1(a) bpc_shape(1, (int64_t)(a))
#define S2(a, b) bpc_shape(2, (int64_t)(a), (int64_t)(b))
#define S3(a, b, c) bpc_shape(3, (int64_t)(a), (int64_t)(b), (int64_t)(c))
#define S4(a, b, c, d) bpc_shape(4, (int64_t)(a), (int64_t)(b), (int64_t)(c), (int64_t)(d))

void bpc_operand_set(bpc_operand_t* o, uint32_t dtype, bpc_shape_t s, uint32_t layout,
                     uint32_t values, double lo, double hi);
uint32_t bpc_special_values(uint32_t dtype, bpc_num_t* out, uint32_t capacity);
uint32_t bpc_operand_special_count(const bpc_operand_t* o);

bp_scalar_t bpc_sf(double v);
bp_scalar_t bpc_si(int64_t v);
bp_scalar_t bpc_sb(int v);
bp_scalar_t bpc_scalar_like(uint32_t dtype);
void bpc_int_range_of(uint32_t dtype, double* lo, double* hi);

/* Generators by family (cases_*.c). */
void bpc_gen_unary(bpc_gen_t* g);
void bpc_gen_binary(bpc_gen_t* g);
void bpc_gen_where(bpc_gen_t* g);
void bpc_gen_data(bpc_gen_t* g);   /* to_copy, copy, clone, cat, fill, arange */
void bpc_gen_reduce(bpc_gen_t* g); /* sum, mean, prod, any, amax, amin, argmax, argmin,
                                      softmax, log_softmax */
void bpc_gen_matmul(bpc_gen_t* g); /* mm, bmm, addmm */

#endif /* BP_CONFORMANCE_CASES_INTERNAL_H_ */
