/* backplane CPU plugin: shared pieces of the pooling family (cpu_pooling.c,
 * cpu_pooling_sample.c). */
#ifndef BP_CPU_POOLING_H_
#define BP_CPU_POOLING_H_

#include "cpu_kernels.h"

/* Kernel element types of the family: f16/bf16 (and u8 for nearest
 * upsampling) compute in f32, integers in i64. */
typedef enum pk_type { PK_F32 = 0, PK_F64 = 1, PK_I64 = 2 } pk_type_t;

/* Storage dtype of a kernel type (F32 -> BP_DTYPE_F32). */
static inline uint32_t pk_dtype(pk_type_t t) {
  return t == PK_F32 ? BP_DTYPE_F32 : t == PK_F64 ? BP_DTYPE_F64 : BP_DTYPE_I64;
}
/* Kernel type of a storage dtype: integers in i64, f64 in f64, the other
 * floating dtypes in f32. */
static inline pk_type_t pk_of(uint32_t dtype) {
  return dtype == BP_DTYPE_F64 ? PK_F64 : bp_dtype_is_int(dtype) ? PK_I64 : PK_F32;
}

/* Kernel-type elements of input `d`, dense row-major: the tensor's own
 * memory when it already is dense in kernel type t (*owned = NULL), else a
 * malloc'd converted copy (*owned = that copy; the caller frees it). *data is
 * NULL for an empty tensor. */
CPU_HIDDEN bp_status_t cpu_pool_input(const bp_tensor_desc_t* d, pk_type_t t, const void** data,
                                      void** owned);
/* Dense kernel-type memory for the results of output `d`: its own memory
 * when dense in t, else a malloc'd staging buffer (*owned). Zero-filled when
 * `zero`. */
CPU_HIDDEN bp_status_t cpu_pool_output(const bp_tensor_desc_t* d, pk_type_t t, int zero,
                                       void** data, void** owned);
/* Converts a staging buffer from cpu_pool_output into `d` (its dtype and
 * strides; rounds to nearest even). Nothing to do when `owned` is NULL. */
CPU_HIDDEN bp_status_t cpu_pool_finish(const bp_tensor_desc_t* d, pk_type_t t, const void* owned);
/* INVALID_ARGUMENT unless `d` has exactly `rank` dims of `sizes`. */
CPU_HIDDEN bp_status_t cpu_pool_expect(const bp_tensor_desc_t* d, uint32_t rank,
                                       const int64_t* sizes, const char* op, const char* what);

/* cpu_pooling_sample.c. */
CPU_HIDDEN bp_status_t cpu_exec_grid_sampler(const bp_op_call_t* call);
CPU_HIDDEN bp_status_t cpu_exec_upsample(const bp_op_call_t* call);

#endif /* BP_CPU_POOLING_H_ */
