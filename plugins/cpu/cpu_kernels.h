/* backplane CPU plugin: kernel types, conversions between storage dtypes and
 * kernel types, shared by the kernel families. */
#ifndef BP_CPU_KERNELS_H_
#define BP_CPU_KERNELS_H_

#include "cpu_internal.h"

/* Kernel (compute) types: the C types loops run in. f16/bf16/fp8 compute in
 * f32 ("opmath"); bool computes in uint8_t holding 0 or 1. */
#define CPU_KTYPES(X)                                                             \
  X(F32, float, BP_DTYPE_F32) X(F64, double, BP_DTYPE_F64) X(I8, int8_t, BP_DTYPE_I8) \
  X(U8, uint8_t, BP_DTYPE_U8) X(I16, int16_t, BP_DTYPE_I16) X(I32, int32_t, BP_DTYPE_I32) \
  X(I64, int64_t, BP_DTYPE_I64) X(BOOL, uint8_t, BP_DTYPE_BOOL)

typedef enum cpu_ktype {
#define CPU__KT_ENUM(K, T, D) CPU_KT_##K,
  CPU_KTYPES(CPU__KT_ENUM)
#undef CPU__KT_ENUM
  CPU_KT_COUNT
} cpu_ktype_t;

/* Largest kernel element (double / int64_t). */
#define CPU_KT_MAX_BYTES 8
/* Elements per staging block in strided / converting loops. */
#define CPU_BLOCK 256

/* Storage dtype whose bytes equal kernel type kt (F32 -> BP_DTYPE_F32). */
CPU_HIDDEN extern const uint32_t cpu_kt_dtype[CPU_KT_COUNT];
CPU_HIDDEN extern const uint32_t cpu_kt_size[CPU_KT_COUNT];
/* Nonzero for the dtypes the CPU kernels load and store (the others are
 * storage the plugin holds but no op takes). */
CPU_HIDDEN int cpu_dtype_has_kernels(uint32_t dtype);
/* Kernel type that holds every value of dtype exactly (f16 -> F32). */
CPU_HIDDEN int cpu_kt_natural(uint32_t dtype);
static inline int cpu_kt_is_float(int kt) { return kt == CPU_KT_F32 || kt == CPU_KT_F64; }

/* Converting gathers and scatters. Strides are in elements (0 broadcasts).
 * load: dst[i] = (kt) src[i * stride] for a source of `src_dtype`.
 * store: dst[i * stride] = (dst_dtype) src[i] for kernel-type values. */
typedef void (*cpu_load_fn)(void* dst, const unsigned char* src, int64_t stride, int64_t n,
                            uint32_t src_dtype);
typedef void (*cpu_store_fn)(unsigned char* dst, int64_t stride, const void* src, int64_t n,
                             uint32_t dst_dtype);
CPU_HIDDEN extern const cpu_load_fn cpu_load[CPU_KT_COUNT];
CPU_HIDDEN extern const cpu_store_fn cpu_store[CPU_KT_COUNT];

/* A scalar attribute converted to kernel type kt, written into out (8 bytes). */
CPU_HIDDEN void cpu_scalar_to_kt(const bp_scalar_t* s, int kt, void* out);
static inline double cpu_scalar_f64(const bp_scalar_t* s, double dflt) {
  switch (s->kind) {
    case BP_SCALAR_FLOAT: return s->v.f;
    case BP_SCALAR_INT: return (double)s->v.i;
    case BP_SCALAR_BOOL: return s->v.b ? 1.0 : 0.0;
    default: return dflt;
  }
}
static inline int64_t cpu_scalar_i64(const bp_scalar_t* s, int64_t dflt) {
  switch (s->kind) {
    case BP_SCALAR_FLOAT: return (int64_t)s->v.f;
    case BP_SCALAR_INT: return s->v.i;
    case BP_SCALAR_BOOL: return s->v.b ? 1 : 0;
    default: return dflt;
  }
}

/* A dense elementwise kernel: out[i] = f(in[0][i], in[1][i], in[2][i]) for
 * i < n, all in one kernel type; params carry attribute values. */
typedef struct cpu_kparams {
  double f[4];
  int64_t i[4];
} cpu_kparams_t;
typedef void (*cpu_ew_fn)(void* restrict out, const void* const* in, int64_t n,
                          const cpu_kparams_t* p);
/* The kernel of elementwise op `op` as a program instruction (aux: gelu's
 * approximation, div's rounding mode) in kernel type kt: 0 with fn,
 * params and whether the result is bool (uint8_t 0/1), else an enum
 * bp_support_reason. (cpu_ew.c) */
CPU_HIDDEN int cpu_ew_program_kernel(uint32_t op, uint32_t aux, int kt, cpu_ew_fn* out_fn,
                                     cpu_kparams_t* out_params, int* out_result_bool);

/* Fills a layout slot for operand k from a descriptor broadcast to the
 * output's `rank`/`sizes` (right-aligned, size-1 dims get stride 0). */
CPU_HIDDEN bp_status_t cpu_broadcast_strides(const bp_tensor_desc_t* in, uint32_t rank,
                                             const int64_t* sizes, int64_t* out_strides,
                                             const char* what);

/* Layout of dims [from, to) of `sizes` over the given descriptors' strides
 * (NULL entries get stride 0), collapsed; at least one dim. */
CPU_HIDDEN void cpu_sub_layout(bp_nd_layout_t* l, const bp_tensor_desc_t* const* ds, int nops,
                               const int64_t* sizes, uint32_t from, uint32_t to);

/* Activations shared by the elementwise kernels and the gated ones (GLU);
 * with <tgmath.h> they run in the type of x. */
#define CPU_SQRT1_2 0.70710678118654752440
#define CPU_SQRT_2_OVER_PI 0.79788456080286535588
#define CPU_ACT_SILU(T, x) ((x) / ((T)1 + exp(-(x))))
#define CPU_ACT_GELU(T, x) ((T)0.5 * (x) * ((T)1 + erf((x) * (T)CPU_SQRT1_2)))
#define CPU_ACT_GELU_TANH(T, x) \
  ((T)0.5 * (x) * ((T)1 + tanh((T)CPU_SQRT_2_OVER_PI * ((x) + (T)0.044715 * (x) * (x) * (x)))))

/* Machine epsilon of a floating dtype (torch.finfo(dtype).eps): rms_norm's
 * eps 0. */
static inline double cpu_dtype_eps(uint32_t d) {
  switch (d) {
    case BP_DTYPE_F64: return 0x1.0p-52;
    case BP_DTYPE_F16: return 0x1.0p-10;
    case BP_DTYPE_BF16: return 0x1.0p-7;
    default: return 0x1.0p-23;
  }
}

/* BP_OK when every operand of `call` is dense row-major (empty ones count),
 * else INVALID_ARGUMENT naming the operand. For the families whose support
 * answer asks the core to pack operands (cpu_ops.c, serving_dense). */
CPU_HIDDEN bp_status_t cpu_call_require_dense(const bp_op_call_t* call);

/* Element k of a dense i32 or i64 index tensor. */
static inline int64_t cpu_index_at(const bp_tensor_desc_t* t, int64_t k) {
  const unsigned char* p = cpu_desc_ptr(t);
  return t->dtype == BP_DTYPE_I32 ? ((const int32_t*)(const void*)p)[k]
                                  : ((const int64_t*)(const void*)p)[k];
}

#endif /* BP_CPU_KERNELS_H_ */
