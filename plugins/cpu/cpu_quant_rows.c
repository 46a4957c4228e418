/* backplane CPU plugin: the row steps, launch and support answer that the
 * fused and the per-token-group quantizations share (cpu_quant_rows.h).
 */
#include "cpu_quant_rows.h"

#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cpu_quant.h"

#define QROW_LANES 16

/* max |y[0..n)| of f32 values, NaN when one is NaN, 4 lanes at a time on the
 * bits (|y| as bits is ordered like the values; GCC vector extensions). */
typedef uint32_t qrow_v4u __attribute__((vector_size(16)));

double cpu_qrow_amax_f32(const float* y, int64_t n) {
  qrow_v4u m = {0}, nan = {0};
  int64_t i = 0;
  for (; i + 4 <= n; i += 4) {
    qrow_v4u u;
    memcpy(&u, y + i, sizeof u);
    u &= 0x7FFFFFFFu;
    nan |= (qrow_v4u)(u > 0x7F800000u);
    m = ((qrow_v4u)(u > m) & u) | (~(qrow_v4u)(u > m) & m);
  }
  uint32_t best = 0, any = 0;
  for (int k = 0; k < 4; k++) best = m[k] > best ? m[k] : best, any |= nan[k];
  for (; i < n; i++) {
    uint32_t u;
    memcpy(&u, y + i, 4);
    u &= 0x7FFFFFFFu;
    any |= u > 0x7F800000u;
    best = u > best ? u : best;
  }
  float f;
  memcpy(&f, &best, 4);
  return any ? NAN : (double)f;
}

double cpu_qrow_amax_f64(const double* y, int64_t n) {
  double a = 0.0;
  for (int64_t i = 0; i < n; i++) {
    double v = fabs(y[i]);
    if (v != v) return NAN;
    a = v > a ? v : a;
  }
  return a;
}

#include <tgmath.h> /* exp (in CPU_ACT_SILU), sqrt, nearbyint in the type of x */

#define CPU__QROW_STEPS(T, SFX)                                                                   \
  void cpu_qrow_rms_##SFX(const T* x, T* restrict y, int64_t n, const T* w, double eps) {         \
    T acc[QROW_LANES] = {0};                                                                      \
    int64_t i = 0;                                                                                \
    for (; i + QROW_LANES <= n; i += QROW_LANES)                                                  \
      for (int k = 0; k < QROW_LANES; k++) acc[k] += x[i + k] * x[i + k];                         \
    for (; i < n; i++) acc[0] += x[i] * x[i];                                                     \
    T ss = 0;                                                                                     \
    for (int k = 0; k < QROW_LANES; k++) ss += acc[k];                                            \
    T r = (T)(1.0 / sqrt((double)(ss / (T)n) + eps));                                             \
    if (w)                                                                                        \
      for (i = 0; i < n; i++) y[i] = x[i] * r * w[i];                                             \
    else                                                                                          \
      for (i = 0; i < n; i++) y[i] = x[i] * r;                                                    \
  }                                                                                               \
  void cpu_qrow_silu_mul_##SFX(const T* x, T* restrict y, int64_t h) {                            \
    for (int64_t i = 0; i < h; i++) {                                                             \
      T g = x[i];                                                                                 \
      y[i] = CPU_ACT_SILU(T, g) * x[h + i];                                                       \
    }                                                                                             \
  }                                                                                               \
  void cpu_qrow_codes_##SFX(const T* y, uint8_t* restrict c, int64_t m, uint32_t q, double s, int sat) { \
    if (s == 0.0) {                                                                               \
      memset(c, (int)cpu_q_encode(q, 0.0, 0, sat), (size_t)m);                                    \
      return;                                                                                     \
    }                                                                                             \
    if (q == BP_DTYPE_I8) { /* cpu_q_encode's i8 rule, inlined */                                 \
      for (int64_t i = 0; i < m; i++) {                                                           \
        double t = nearbyint((double)y[i] / s);                                                   \
        int v = t != t ? 0 : t < -128 ? -128 : t > 127 ? 127 : (int)t;                            \
        c[i] = (uint8_t)(int8_t)v;                                                                \
      }                                                                                           \
      return;                                                                                     \
    }                                                                                             \
    for (int64_t i = 0; i < m; i++) c[i] = (uint8_t)cpu_q_encode(q, (double)y[i] / s, 0, sat);   \
  }
CPU__QROW_STEPS(float, f32)
CPU__QROW_STEPS(double, f64)

bp_status_t cpu_qrows_load_weight(const bp_op_call_t* call, const bp_tensor_desc_t* wd, int kt, int64_t n,
                                  void** out_w) {
  *out_w = NULL;
  if (!wd) return BP_OK;
  void* w = malloc((size_t)n * cpu_kt_size[kt]);
  if (!w) return cpu_error(BP_RESOURCE_EXHAUSTED, "cpu: %s: no memory for the weight", cpu_op_name(call->op_id));
  cpu_load[kt](w, cpu_desc_ptr(wd), 1, n, wd->dtype);
  *out_w = w;
  return BP_OK;
}

bp_status_t cpu_qrows_parallel(const bp_op_call_t* call, int64_t rows, int64_t n, cpu_range_fn fn, void* job,
                               _Atomic int* failed) {
  int64_t grain = n > 0 ? CPU_QROWS_GRAIN / n : 1;
  cpu_parallel_for(rows, grain < 1 ? 1 : grain, fn, job);
  if (atomic_load(failed))
    return cpu_error(BP_RESOURCE_EXHAUSTED, "cpu: %s: no memory for a row of %lld elements",
                     cpu_op_name(call->op_id), (long long)n);
  return BP_OK;
}

static int qrows_code_dtype(uint32_t q) {
  return q == BP_DTYPE_I8 || q == BP_DTYPE_F8E4M3FN || q == BP_DTYPE_F8E5M2;
}

int cpu_qrows_supported(const bp_op_call_t* call, uint32_t qdtype, char* msg, size_t cap) {
  if (!qrows_code_dtype(qdtype)) {
    snprintf(msg, cap, "attrs.qdtype %s is not i8, float8_e4m3fn or float8_e5m2", bp_dtype_name(qdtype));
    return BP_SUPPORT_DTYPE;
  }
  for (uint32_t i = 0; i < call->num_inputs; i++) {
    uint32_t d = call->inputs[i]->dtype;
    if (d != BP_DTYPE_INVALID && !bp_dtype_is_float(d)) {
      snprintf(msg, cap, "input %u is %s; the kernels read f16, bf16, f32 or f64", i, bp_dtype_name(d));
      return BP_SUPPORT_DTYPE;
    }
  }
  uint32_t last = call->num_outputs - 1;
  if (call->outputs[0]->dtype != qdtype) {
    snprintf(msg, cap, "the codes are %s, attrs.qdtype is %s", bp_dtype_name(call->outputs[0]->dtype),
             bp_dtype_name(qdtype));
    return BP_SUPPORT_DTYPE;
  }
  if (last == 0 || call->outputs[last]->dtype != BP_DTYPE_F32) {
    snprintf(msg, cap, "the scales are %s; the kernels write f32",
             last ? bp_dtype_name(call->outputs[last]->dtype) : "missing");
    return BP_SUPPORT_DTYPE;
  }
  for (uint32_t k = 1; k < last; k++) {
    uint32_t d = call->outputs[k]->dtype;
    if (!bp_dtype_is_float(d)) {
      snprintf(msg, cap, "output %u is %s; the kernels write f16, bf16, f32 or f64", k, bp_dtype_name(d));
      return BP_SUPPORT_DTYPE;
    }
  }
  return BP_SUPPORT_OK;
}
