/* backplane CPU plugin: what the row-wise quantizations share -- the fused
 * quantizations (cpu_fused_quant.c) and the per-token-group ones
 * (cpu_group_quant.c). Both read a row once, keep the layer's result y
 * (rms_norm's, or silu(gate) * up) in a row buffer in the compute type
 * (f32; f64 for f64 inputs), then store the codes of y / scale.
 *
 * The row steps are pure and run on any thread; the launch helpers run on
 * a stream worker and spread the rows over the pool.
 */
#ifndef BP_CPU_QUANT_ROWS_H_
#define BP_CPU_QUANT_ROWS_H_

#include "cpu_kernels.h"

/* Rows per parallel task: about this many input elements. */
#define CPU_QROWS_GRAIN 16384

/* Row steps in compute type f32 / f64:
 *   rms:      y[0..n) = x * (1 / sqrt(mean(x^2) + eps)) (* w when w != NULL)
 *   silu_mul: y[0..h) = silu(x[i]) * x[h + i] (x holds [gate | up])
 *   amax:     max |y[0..n)|, NaN when one is NaN (quantize_dynamic's rule)
 *   codes:    c[i] = the q code of y[i] / s, divided in double as quantize
 *             divides (so the codes equal quantize's of y); s == 0 gives the
 *             code of 0. q is i8, float8_e4m3fn or float8_e5m2; `sat`
 *             clamps float codes at +-max (i8 always clamps). */
#define CPU__QROW_DECLS(T, SFX)                                                                     \
  CPU_HIDDEN void cpu_qrow_rms_##SFX(const T* x, T* restrict y, int64_t n, const T* w, double eps); \
  CPU_HIDDEN void cpu_qrow_silu_mul_##SFX(const T* x, T* restrict y, int64_t h);                     \
  CPU_HIDDEN double cpu_qrow_amax_##SFX(const T* y, int64_t n);                                      \
  CPU_HIDDEN void cpu_qrow_codes_##SFX(const T* y, uint8_t* restrict c, int64_t m, uint32_t q, double s, int sat);
CPU__QROW_DECLS(float, f32)
CPU__QROW_DECLS(double, f64)

/* The largest code magnitude of code dtype q (the scale is amax / it). */
static inline double cpu_qrows_qmax(uint32_t q) {
  return q == BP_DTYPE_I8 ? 127.0 : q == BP_DTYPE_F8E4M3FN ? 448.0 : 57344.0; /* else float8_e5m2 */
}

/* Input i when the call has it and it is present, else NULL. */
static inline const bp_tensor_desc_t* cpu_qrows_opt_input(const bp_op_call_t* call, uint32_t i) {
  return i < call->num_inputs && call->inputs[i]->dtype != BP_DTYPE_INVALID ? call->inputs[i] : NULL;
}

/* The optional per-column weight wd ([n], any floating dtype; NULL: none)
 * in compute type kt into *out_w (NULL when wd is NULL; else malloc'ed,
 * the caller frees it). RESOURCE_EXHAUSTED when memory runs out. */
CPU_HIDDEN bp_status_t cpu_qrows_load_weight(const bp_op_call_t* call, const bp_tensor_desc_t* wd, int kt,
                                             int64_t n, void** out_w);

/* Runs fn(job, begin, end) over `rows` rows of n input elements on the pool
 * (about CPU_QROWS_GRAIN elements a task); a task that cannot get its row
 * buffer sets *failed, which turns into RESOURCE_EXHAUSTED here. */
CPU_HIDDEN bp_status_t cpu_qrows_parallel(const bp_op_call_t* call, int64_t rows, int64_t n, cpu_range_fn fn,
                                          void* job, _Atomic int* failed);

/* The support answer of both families, for code dtype `qdtype` (their
 * attrs.qdtype): the kernels read floating inputs (f16, bf16, f32, f64),
 * write codes of an 8-bit code dtype (i8, float8_e4m3fn, float8_e5m2) that
 * is qdtype, f32 scales (the last output) and floating extra outputs.
 * Layouts: dense (the family is dense: the core packs other operands). */
CPU_HIDDEN int cpu_qrows_supported(const bp_op_call_t* call, uint32_t qdtype, char* msg, size_t cap);

#endif /* BP_CPU_QUANT_ROWS_H_ */
