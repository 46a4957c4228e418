/* backplane CPU plugin: the quantized matmuls of the QUANT family.
 *
 * scaled_mm (ONNX MatMulInteger, torch._int_mm / _scaled_mm):
 *   i8/u8: the exact int32 product of (a - a_zp) and (b - b_zp): through
 *   AVX-512 VNNI where the CPU has it (cpu_qmm_x86.c), else int32 GEMM on
 *   widened copies. fp8: both decoded to f32 (exact) and multiplied by the
 *   f32 GEMM (f32 accumulation, as torch._scaled_mm on CPU).
 *   The epilogue out = act(scale_a[m] * scale_b[n] * acc + bias[n]) runs in
 *   double and rounds once to the output dtype.
 * weight_only_mm (GPTQ / AWQ / MatMulNBits): out = act(x @ dequant(w)^T + bias)
 *   (act: attrs.activation, ABI 1.4, in double on the f32 rows as they are
 *   stored),
 *   w [n, k] codes with per-group scale and zero point. Rows of w are
 *   decoded into a k-element row buffer per thread (never a full-size
 *   temporary) and dotted with every row of x in f32; shapes and dtypes
 *   cpu_qmm_wq_fits accepts take the AVX-512 path that decodes in
 *   registers (cpu_qmm_x86.c); with BP_QUANTIZE_INT8_ACTIVATIONS, 4-bit
 *   codes meet x quantized to int8 per block of 32 in integer dot products
 *   (AVX-512 VNNI), the other paths ignore the flag (they are exact in f32).
 * Operands are dense (the family asks the core for contiguous operands).
 */
#include <math.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "cpu_kernels.h"
#include "cpu_qmm.h"
#include "cpu_quant.h"

/* ---- epilogue ------------------------------------------------------------------- */

/* enum bp_activation of v, in double (scaled_mm's and weight_only_mm's epilogue). */
double cpu_qmm_act(uint32_t act, double v) {
  switch (act) {
    case BP_ACTIVATION_RELU: return v > 0 ? v : 0.0;
    case BP_ACTIVATION_GELU_ERF: return CPU_ACT_GELU(double, v);
    case BP_ACTIVATION_GELU_TANH: return CPU_ACT_GELU_TANH(double, v);
    case BP_ACTIVATION_SILU: return CPU_ACT_SILU(double, v);
    case BP_ACTIVATION_SIGMOID: return 1.0 / (1.0 + exp(-v));
    case BP_ACTIVATION_TANH: return tanh(v);
    default: return v;
  }
}

/* A scale or bias operand as `n` doubles (one element broadcasts); NULL
 * input gives `dflt` everywhere. */
static double* vec_load(const bp_op_call_t* call, uint32_t i, int64_t n, double dflt) {
  double* v = malloc((size_t)(n > 0 ? n : 1) * sizeof(double));
  if (!v) return NULL;
  const bp_tensor_desc_t* d = i < call->num_inputs ? call->inputs[i] : NULL;
  if (!d || d->dtype == BP_DTYPE_INVALID) {
    for (int64_t j = 0; j < n; j++) v[j] = dflt;
  } else if (bp_desc_numel(d) == 1 && n != 1) {
    double one;
    cpu_load[CPU_KT_F64](&one, cpu_desc_ptr(d), 1, 1, d->dtype);
    for (int64_t j = 0; j < n; j++) v[j] = one;
  } else {
    cpu_load[CPU_KT_F64](v, cpu_desc_ptr(d), 1, n, d->dtype);
  }
  return v;
}

typedef struct epi_job {
  const bp_op_call_t* call;
  const int32_t* ci; /* integer accumulators, or */
  const float* cf;   /* f32 ones */
  const double *sa, *sb, *bias;
  uint32_t act;
  int64_t n;
  _Atomic int failed;
} epi_job_t;

static void epilogue_rows(void* ctx, int64_t begin, int64_t end) {
  epi_job_t* j = ctx;
  const bp_tensor_desc_t* out = j->call->outputs[0];
  double* row = malloc((size_t)(j->n > 0 ? j->n : 1) * sizeof(double));
  if (!row) { atomic_store(&j->failed, 1); return; }
  size_t oes = bp_dtype_size(out->dtype);
  for (int64_t m = begin; m < end; m++) {
    for (int64_t c = 0; c < j->n; c++) {
      double acc = j->ci ? (double)j->ci[m * j->n + c] : (double)j->cf[m * j->n + c];
      row[c] = cpu_qmm_act(j->act, j->sa[m] * j->sb[c] * acc + j->bias[c]);
    }
    cpu_store[CPU_KT_F64](cpu_desc_ptr(out) + (size_t)(m * j->n) * oes, 1, row, j->n, out->dtype);
  }
  free(row);
}

/* weight_only_mm's activation over rows [begin, end) of its f32 result
 * (cf, written in place; the kernels added the bias). */
static void act_rows(void* ctx, int64_t begin, int64_t end) {
  epi_job_t* j = ctx;
  float* y = (float*)j->cf;
  for (int64_t i = begin * j->n; i < end * j->n; i++) y[i] = (float)cpu_qmm_act(j->act, y[i]);
}

/* ---- scaled_mm -------------------------------------------------------------------- */

/* (a - zp) widened to i32, or fp8 decoded to f32, densely. */
static void widen(const bp_tensor_desc_t* d, int zp, void* dst, int64_t n) {
  const uint8_t* p = cpu_desc_ptr(d);
  if (d->dtype == BP_DTYPE_I8 || d->dtype == BP_DTYPE_U8) {
    int32_t* o = dst;
    for (int64_t i = 0; i < n; i++) o[i] = (d->dtype == BP_DTYPE_I8 ? (int32_t)(int8_t)p[i] : (int32_t)p[i]) - zp;
  } else {
    float* o = dst;
    for (int64_t i = 0; i < n; i++) o[i] = (float)bp_small_float_to_f64(d->dtype, p[i]);
  }
}

bp_status_t cpu_exec_scaled_mm(const bp_op_call_t* call) {
  const bp_scaled_mm_attrs_t* a = call->attrs;
  const bp_tensor_desc_t *A = call->inputs[0], *B = call->inputs[1], *out = call->outputs[0];
  int64_t m = A->sizes[0], k = A->sizes[1], n = B->sizes[1];
  int integer = A->dtype == BP_DTYPE_I8 || A->dtype == BP_DTYPE_U8;
  bp_status_t st = BP_OK;
  void *aw = NULL, *bw = NULL, *acc = NULL;
  double *sa = NULL, *sb = NULL, *bias = NULL;
  if (m == 0 || n == 0) return BP_OK;
  int direct = out->dtype == BP_DTYPE_I32; /* the accumulators are the output */
  acc = direct ? cpu_desc_ptr(out) : malloc((size_t)(m * n) * 4);
  if (!acc) goto oom;
  if (integer && cpu_qmm_vnni_available() && B->dtype == BP_DTYPE_I8 && a->b_zero_point == 0) {
    st = cpu_qmm_s8_gemm_vnni(cpu_desc_ptr(A), A->dtype == BP_DTYPE_U8, a->a_zero_point,
                              (const int8_t*)cpu_desc_ptr(B), m, n, k, acc);
    if (st != BP_OK) goto done;
  } else {
    size_t es = 4;
    aw = malloc((size_t)(m * k > 0 ? m * k : 1) * es);
    bw = malloc((size_t)(k * n > 0 ? k * n : 1) * es);
    if (!aw || !bw) goto oom;
    widen(A, integer ? a->a_zero_point : 0, aw, m * k);
    widen(B, integer ? a->b_zero_point : 0, bw, k * n);
    st = cpu_gemm(integer ? BP_DTYPE_I32 : BP_DTYPE_F32, m, n, k, 1.0, aw, k, 1, bw, n, 1, 0, acc, n, 1);
    if (st != BP_OK) goto done;
  }
  if (!direct) {
    sa = vec_load(call, 2, m, 1.0);
    sb = vec_load(call, 3, n, 1.0);
    bias = vec_load(call, 4, n, 0.0);
    if (!sa || !sb || !bias) goto oom;
    epi_job_t j = {call, integer ? acc : NULL, integer ? NULL : acc, sa, sb, bias, a->activation, n, 0};
    int64_t grain = 16384 / n;
    cpu_parallel_for(m, grain < 1 ? 1 : grain, epilogue_rows, &j);
    if (atomic_load(&j.failed)) goto oom;
  }
  goto done;
oom:
  st = cpu_error(BP_RESOURCE_EXHAUSTED, "cpu: scaled_mm: out of memory for %lld x %lld x %lld",
                 (long long)m, (long long)n, (long long)k);
done:
  if (!direct) free(acc);
  free(aw), free(bw), free(sa), free(sb), free(bias);
  return st;
}

/* ---- weight_only_mm --------------------------------------------------------------- */

typedef struct wo_job {
  const bp_op_call_t* call;
  const bp_quantize_attrs_t* a;
  const float* x; /* [m, k] f32 */
  float* y;       /* [m, n] f32 */
  const double *s, *z, *bias; /* [n, groups], [n, groups] or NULL, [n] */
  int64_t m, n, k, g, groups;
  _Atomic int failed;
} wo_job_t;

static void wo_rows(void* ctx, int64_t begin, int64_t end) {
  wo_job_t* j = ctx;
  uint32_t q = j->a->qdtype;
  int four = cpu_q_is_4bit(q);
  const uint8_t* w = cpu_desc_ptr(j->call->inputs[1]);
  int64_t row_bytes = four ? j->k / 2 : j->k;
  float* wr = malloc((size_t)(j->k > 0 ? j->k : 1) * sizeof(float));
  if (!wr) { atomic_store(&j->failed, 1); return; }
  for (int64_t r = begin; r < end; r++) {
    const uint8_t* wrow = w + r * row_bytes;
    for (int64_t c = 0; c < j->k; c++) {
      int64_t gi = r * j->groups + c / j->g;
      double z = j->z ? j->z[gi] : 0.0;
      wr[c] = (float)((cpu_q_decode(q, cpu_q_get(wrow, c, four)) - z) * j->s[gi]);
    }
    for (int64_t mm = 0; mm < j->m; mm++) {
      const float* xr = j->x + mm * j->k;
      float acc = 0.0f;
      for (int64_t c = 0; c < j->k; c++) acc += xr[c] * wr[c];
      j->y[mm * j->n + r] = acc + (j->bias ? (float)j->bias[r] : 0.0f);
    }
  }
  free(wr);
}

bp_status_t cpu_exec_weight_only_mm(const bp_op_call_t* call) {
  const bp_quantize_attrs_t* a = call->attrs;
  const bp_tensor_desc_t *X = call->inputs[0], *W = call->inputs[1], *out = call->outputs[0];
  wo_job_t j;
  memset(&j, 0, sizeof j);
  j.call = call;
  j.a = a;
  j.k = X->sizes[X->rank - 1];
  j.n = W->sizes[0];
  j.m = j.k > 0 ? bp_desc_numel(X) / j.k : bp_desc_numel(out) / (j.n > 0 ? j.n : 1);
  j.g = a->block_size > 0 ? a->block_size : (j.k > 0 ? j.k : 1);
  j.groups = j.k / j.g + (j.k % j.g != 0);
  if (j.groups == 0) j.groups = 1;
  bp_status_t st = BP_OK;
  float *xw = NULL, *y = NULL;
  double *s = NULL, *z = NULL, *bias = NULL;
  if (j.m == 0 || j.n == 0) return BP_OK;
  /* f32 activations are read in place (dense: the front end's layout);
   * other dtypes through an f32 copy. No bias: NULL, not a row of zeros
   * (a decode call's prologue is serial, ahead of its parallel part). */
  const float* x = X->dtype == BP_DTYPE_F32 ? (const float*)cpu_desc_ptr(X) : NULL;
  if (!x) x = xw = malloc((size_t)(j.m * j.k > 0 ? j.m * j.k : 1) * sizeof(float));
  y = out->dtype == BP_DTYPE_F32 ? (float*)cpu_desc_ptr(out) : malloc((size_t)(j.m * j.n) * sizeof(float));
  int has_bias = call->num_inputs > 4 && call->inputs[4]->dtype != BP_DTYPE_INVALID;
  if (has_bias) bias = vec_load(call, 4, j.n, 0.0);
  const bp_tensor_desc_t *S = call->inputs[2], *Z = call->inputs[3];
  int bits = cpu_q_is_4bit(a->qdtype) ? 4 : 8;
  int fast = cpu_qmm_avx512_available() && cpu_qmm_wq_fits(bits, j.k, j.g, S->dtype, Z->dtype);
  if (!fast) { /* the portable path reads scales and zero points as double */
    s = vec_load(call, 2, j.n * j.groups, 1.0);
    z = Z->dtype != BP_DTYPE_INVALID ? vec_load(call, 3, j.n * j.groups, 0.0) : NULL;
  }
  if (!x || !y || (has_bias && !bias) || (!fast && (!s || (Z->dtype != BP_DTYPE_INVALID && !z)))) {
    st = cpu_error(BP_RESOURCE_EXHAUSTED, "cpu: weight_only_mm: out of memory");
    goto done;
  }
  if (xw) cpu_load[CPU_KT_F32](xw, cpu_desc_ptr(X), 1, j.m * j.k, X->dtype);
  j.x = x, j.y = y, j.s = s, j.z = z, j.bias = bias;
  if (fast && bits == 4 && (a->flags & BP_QUANTIZE_INT8_ACTIVATIONS)) {
    st = cpu_qmm_wq_gemv_q8(cpu_desc_ptr(W), a->qdtype == BP_DTYPE_I4, x, j.m, j.n, j.k, j.g,
                            cpu_desc_ptr(S), S->dtype,
                            Z->dtype != BP_DTYPE_INVALID ? cpu_desc_ptr(Z) : NULL, Z->dtype, bias, y);
  } else if (fast) {
    st = cpu_qmm_wq_gemv_avx512(cpu_desc_ptr(W), bits,
                                a->qdtype == BP_DTYPE_I4 || a->qdtype == BP_DTYPE_I8, x, j.m, j.n, j.k, j.g,
                                cpu_desc_ptr(S), S->dtype,
                                Z->dtype != BP_DTYPE_INVALID ? cpu_desc_ptr(Z) : NULL, Z->dtype,
                                bias, y);
  } else {
    int64_t grain = 65536 / (j.k * (j.m < 8 ? j.m : 8) + 1);
    cpu_parallel_for(j.n, grain < 1 ? 1 : grain, wo_rows, &j);
    if (atomic_load(&j.failed)) st = cpu_error(BP_RESOURCE_EXHAUSTED, "cpu: weight_only_mm: out of memory");
  }
  if (st == BP_OK && a->activation != BP_ACTIVATION_NONE) { /* the epilogue, on rows still in cache */
    epi_job_t ej = {.act = a->activation, .n = j.n};
    ej.cf = y;
    cpu_parallel_for(j.m, 1 + 16384 / (j.n > 0 ? j.n : 1), act_rows, &ej);
  }
  if (st == BP_OK && out->dtype != BP_DTYPE_F32)
    cpu_store[CPU_KT_F32](cpu_desc_ptr(out), 1, y, j.m * j.n, out->dtype);
done:
  free(xw), free(s), free(z), free(bias);
  if (out->dtype != BP_DTYPE_F32) free(y);
  return st;
}
