/* backplane CPU plugin: swiglu_oai (family GLU; docs/semantics.md, "Gated
 * activations"), GPT-OSS's clamped SwiGLU as vLLM's swigluoai_and_mul:
 * the last dim holds interleaved (gate, up) pairs; per pair
 *
 *   g = min(gate, limit), u = clamp(up, -limit, limit)   (NaN stays NaN)
 *   out = (u + 1) * (g * sigmoid(alpha * g))
 *
 * in f32 (f64 for f64), rounded once into the output dtype. The pairs are
 * one flat sequence (rows are dense), processed in blocks of CPU_BLOCK
 * outputs staged through f32 / f64 buffers.
 * Threading: runs on a stream worker; blocks spread over the pool.
 */
#include <math.h>

#include "cpu_kernels.h"


#define OAI_GRAIN 8192

typedef struct oai_job {
  const bp_op_call_t* call;
  double alpha, limit;
} oai_job_t;

/* e^(-alpha g): f64 exp for f64; for f32 the argument is formed in double
 * and expf's result corrected by the part of it that f32 cannot hold
 * (e^(x + d) = e^x (1 + d) to 1e-12 here): an f32 alpha * g alone is ~10
 * ulps of exp at |g| ~ 7, the corrected form within 2 ulps at expf's
 * speed. */
static inline double oai_exp_f64(double alpha, double g) { return exp(-alpha * g); }
static inline float oai_exp_f32(double alpha, float g) {
  double a = -alpha * (double)g;
  float af = (float)a, e = expf(af), d = (float)(a - (double)af);
  return d == d && e < INFINITY ? e + e * d : e; /* inf and NaN arguments as they are */
}

#define CPU__OAI_PAIRS(T, SFX)                                                          \
  static void oai_pairs_##SFX(T* restrict y, const T* restrict x, int64_t n, double alpha, \
                              T limit) {                                                \
    for (int64_t i = 0; i < n; i++) {                                                   \
      T g = x[2 * i], u = x[2 * i + 1];                                                 \
      g = g > limit ? limit : g;                                                        \
      u = u > limit ? limit : u < -limit ? -limit : u;                                  \
      y[i] = (u + (T)1) * (g / ((T)1 + oai_exp_##SFX(alpha, g)));                       \
    }                                                                                   \
  }
CPU__OAI_PAIRS(float, f32)
CPU__OAI_PAIRS(double, f64)

static void oai_run(void* ctx, int64_t begin, int64_t end) {
  oai_job_t* j = ctx;
  const bp_tensor_desc_t *in = j->call->inputs[0], *out = j->call->outputs[0];
  size_t ies = bp_dtype_size(in->dtype), oes = bp_dtype_size(out->dtype);
  union {
    float f[3 * CPU_BLOCK];
    double d[3 * CPU_BLOCK];
  } b;
  for (int64_t i0 = begin; i0 < end; i0 += CPU_BLOCK) {
    int64_t n = end - i0 < CPU_BLOCK ? end - i0 : CPU_BLOCK;
    const unsigned char* src = cpu_desc_ptr(in) + (size_t)(2 * i0) * ies;
    unsigned char* dst = cpu_desc_ptr(out) + (size_t)i0 * oes;
    if (in->dtype == BP_DTYPE_F64) {
      cpu_load[CPU_KT_F64](b.d, src, 1, 2 * n, in->dtype);
      oai_pairs_f64(b.d + 2 * CPU_BLOCK, b.d, n, j->alpha, j->limit);
      cpu_store[CPU_KT_F64](dst, 1, b.d + 2 * CPU_BLOCK, n, out->dtype);
    } else {
      cpu_load[CPU_KT_F32](b.f, src, 1, 2 * n, in->dtype);
      oai_pairs_f32(b.f + 2 * CPU_BLOCK, b.f, n, j->alpha, (float)j->limit);
      cpu_store[CPU_KT_F32](dst, 1, b.f + 2 * CPU_BLOCK, n, out->dtype);
    }
  }
}

static bp_status_t exec_glu_oai(const bp_op_call_t* call) {
  bp_status_t st = cpu_call_require_dense(call);
  if (st != BP_OK) return st;
  const bp_swiglu_oai_attrs_t* a = call->attrs;
  oai_job_t j = {call, a->alpha != 0.0 ? a->alpha : 1.702, a->limit != 0.0 ? a->limit : 7.0};
  int64_t n = bp_desc_numel(call->outputs[0]);
  if (n == 0) return BP_OK;
  cpu_parallel_for(n, OAI_GRAIN, oai_run, &j);
  return BP_OK;
}

static int supported_glu_oai(const bp_op_call_t* call, char* msg, size_t cap) {
  (void)call, (void)msg, (void)cap;
  return BP_SUPPORT_OK;
}

const cpu_family_t cpu_family_glu_oai = {
    "glu_oai", CPU_FAMILY_OPS(BP_OP_swiglu_oai), exec_glu_oai, supported_glu_oai, 0,
};
