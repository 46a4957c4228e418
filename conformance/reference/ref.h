/* Shared helpers of the reference implementations (internal). */
#ifndef BP_CONFORMANCE_REF_H_
#define BP_CONFORMANCE_REF_H_

#include "../conform.h"

/* Rejects the case: the reference follows docs/semantics.md and refuses
 * what it leaves undefined or invalid. */
bp_status_t bpc_ref_reject(bpc_ref_result_t* res, const char* fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* An op checker's mismatch: counts it and keeps the first one's index and
 * message. */
void bpc_check_fail(bpc_check_t* out, int64_t index, const char* fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Allocates the result's single output res->out[0] (see bpc_expected_init)
 * and records the dtype the reference computed in. */
bp_status_t bpc_ref_single_output(bpc_ref_result_t* res, uint32_t dtype, uint32_t rank,
                                  const int64_t* sizes, int with_bound, uint32_t compute_dtype);

/* Broadcast shapes of n tensors (absent ones skipped) into rank/sizes. */
bp_status_t bpc_broadcast(const bpc_host_tensor_t* const* ts, uint32_t n, uint32_t* out_rank,
                          int64_t* out_sizes);
/* Linear index into dense tensor t of the output element at index idx
 * (rank out_rank), honouring broadcasting (right-aligned, size-1 dims). */
int64_t bpc_broadcast_index(const bpc_host_tensor_t* t, uint32_t out_rank, const int64_t* idx);
/* Advances a row-major multi-index; returns 0 after the last element. */
int bpc_next_index(uint32_t rank, const int64_t* sizes, int64_t* idx);

/* PyTorch result_type over operands of three priority groups. */
enum bpc_operand_group { BPC_GROUP_DIM = 0, BPC_GROUP_ZERO_DIM = 1, BPC_GROUP_WRAPPED = 2 };
typedef struct bpc_result_type {
  uint32_t dim, zero, wrapped;
} bpc_result_type_t;
void bpc_result_type_init(bpc_result_type_t* rt);
void bpc_result_type_add(bpc_result_type_t* rt, uint32_t dtype, uint32_t group);
void bpc_result_type_add_tensor(bpc_result_type_t* rt, const bpc_host_tensor_t* t);
uint32_t bpc_result_type_get(const bpc_result_type_t* rt);

/* An elementwise operand: a tensor, or a scalar (t == NULL). */
typedef struct bpc_ew_operand {
  const bpc_host_tensor_t* t;
  bpc_num_t scalar;
  uint32_t scalar_dtype;
} bpc_ew_operand_t;

/* Elementwise function: args are already converted to the compute dtype;
 * the result is expressed in `result_dtype` (see bpc_ref_elementwise). */
typedef bpc_num_t (*bpc_ew_fn)(const bpc_case_t* c, const bpc_num_t* args, uint32_t compute_dtype);

/* Runs fn over the broadcast shape of the tensor operands. Floating results
 * of a floating result_dtype are kept unrounded (the checker rounds); other
 * results are converted from result_dtype to out_dtype. */
bp_status_t bpc_ref_elementwise(const bpc_case_t* c, const bpc_ew_operand_t* ops, uint32_t n,
                                uint32_t compute_dtype, uint32_t result_dtype, uint32_t out_dtype,
                                bpc_ew_fn fn, bpc_ref_result_t* res);

/* Reduced-dims mask from bp_reduce_attrs_t (dims may be negative;
 * repeated dims rejected). all_if_empty: num_dims == 0 reduces everything. */
bp_status_t bpc_ref_reduce_dims(const bp_reduce_attrs_t* a, uint32_t rank, int all_if_empty,
                                uint8_t* mask, bpc_ref_result_t* res);

/* A paged KV cache seen by the references of paged_attention and
 * paged_attention_prefill (ref_serving.c). */
typedef struct bpc_paged {
  const bpc_host_tensor_t *q, *kc, *vc, *bt; /* query, caches, block_tables */
  int64_t D, BS, Hkv, MB;
  double scale;
} bpc_paged_t;
/* One query row (elements [row0, row0 + D) of q and of e) against kv head gk
 * of sequence s's tokens [start, end), with ALiBi slope * (t - (end - 1))
 * (0: none): the softmax-weighted values, their magnitudes and paged
 * attention's term counts. sc holds 2 * end doubles. */
void bpc_ref_paged_row(const bpc_paged_t* p, int64_t row0, int64_t gk, int64_t s, int64_t start,
                       int64_t end, double slope, double* sc, bpc_expected_t* e);

/* The families, one per file. */
bp_status_t bpc_ref_unary(const bpc_case_t* c, const bpc_host_tensor_t* in, bpc_ref_result_t* res);
bp_status_t bpc_ref_clamp_tensor(const bpc_case_t* c, const bpc_host_tensor_t* in,
                                 bpc_ref_result_t* res);
bp_status_t bpc_ref_binary(const bpc_case_t* c, const bpc_host_tensor_t* in, bpc_ref_result_t* res);
bp_status_t bpc_ref_where(const bpc_case_t* c, const bpc_host_tensor_t* in, bpc_ref_result_t* res);
bp_status_t bpc_ref_to_copy(const bpc_case_t* c, const bpc_host_tensor_t* in, bpc_ref_result_t* res);
bp_status_t bpc_ref_copy(const bpc_case_t* c, const bpc_host_tensor_t* in, bpc_ref_result_t* res);
bp_status_t bpc_ref_clone(const bpc_case_t* c, const bpc_host_tensor_t* in, bpc_ref_result_t* res);
bp_status_t bpc_ref_cat(const bpc_case_t* c, const bpc_host_tensor_t* in, bpc_ref_result_t* res);
bp_status_t bpc_ref_fill(const bpc_case_t* c, const bpc_host_tensor_t* in, bpc_ref_result_t* res);
bp_status_t bpc_ref_arange(const bpc_case_t* c, const bpc_host_tensor_t* in, bpc_ref_result_t* res);
/* sum, mean, prod, any */
bp_status_t bpc_ref_sum(const bpc_case_t* c, const bpc_host_tensor_t* in, bpc_ref_result_t* res);
/* amax, amin */
bp_status_t bpc_ref_amax(const bpc_case_t* c, const bpc_host_tensor_t* in, bpc_ref_result_t* res);
/* argmax, argmin */
bp_status_t bpc_ref_argmax(const bpc_case_t* c, const bpc_host_tensor_t* in, bpc_ref_result_t* res);
/* softmax, log_softmax */
bp_status_t bpc_ref_softmax(const bpc_case_t* c, const bpc_host_tensor_t* in, bpc_ref_result_t* res);
bp_status_t bpc_ref_matmul(const bpc_case_t* c, const bpc_host_tensor_t* in, bpc_ref_result_t* res);

/* Quantized codes (ref_quant.c): the value of code c of 8- or 4-bit dtype q
 * (no scale, no zero point), and whether code value g is a nearest code to
 * the target t (x / scale + zero point) up to a relative `rel` of t. */
double bpc_quant_decode(uint32_t q, uint32_t c);
int bpc_quant_code_ok(uint32_t q, double t, double g, int saturate, double rel);

/* Word n of the Philox-4x32-10 stream of (seed, offset), the random ops'
 * counter-based stream (ref_serving.c). */
uint32_t bpc_philox_word(uint64_t seed, uint64_t offset, uint64_t n);

#endif /* BP_CONFORMANCE_REF_H_ */
