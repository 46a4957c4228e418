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
