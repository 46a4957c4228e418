/* backplane CPU plugin: swiglu_oai (family GLU; docs/semantics.md, "Gated
 * activations"), GPT-OSS's clamped SwiGLU as vLLM's swigluoai_and_mul:
 * the last dim holds interleaved (gate, up) pairs; per pair
 *
 *   g = min(gate, limit), u = clamp(up, -limit, limit)   (NaN stays NaN)
 *   out = (u + 1) * (g * sigmoid(alpha * g))
 *
 * in f32 (f64 for f64), rounded once into the output dtype. The pairs are
 * one flat sequence (rows are dense), processed in blocks of CPU_BLOCK
 * outputs; f32 operands are read and written in place, others staged
 * through f32 / f64 buffers. On CPUs with AVX2 and FMA (BP_CPU_ISA not
 * "base") the f32 pairs run vectorized (AVX2, or AVX-512 where the CPU has
 * it): e^(-alpha g) from cpu_vmath.h's straight-line exp, its argument
 * carried as an exact f32 pair by FMA.
 * Threading: runs on a stream worker; blocks spread over the pool.
 */
#include <math.h>

#include "cpu_kernels.h"
#include "cpu_vmath.h"


#define OAI_GRAIN 8192

typedef struct oai_job {
  const bp_op_call_t* call;
  double alpha, limit;
  void (*pairs_f32)(float* restrict y, const float* restrict x, int64_t n, double alpha, float limit);
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

typedef void (*oai_pairs_f32_fn)(float* restrict y, const float* restrict x, int64_t n, double alpha, float limit);

#if CPU_VM_X86
/* The f32 pairs per CPU_VM_ISAS (AVX2 + FMA, AVX-512), branch-free so that
 * the loop vectorizes.
 * alpha = ah + al (two floats); ah g = p + pe exactly (pe by FMA), so
 * -alpha g = -(p + lo) with lo = al g + pe to ~2^-48 relative, and
 * e^(-alpha g) = e^-p (1 - lo) (|lo| < 2^-20 here: the dropped lo^2 / 2 is
 * far below an ulp). cpu_vm_expf is within 4 ulps; sigmoid's division and
 * the products add 3 roundings: within the op's TRANS_HARD class (8 ulps).
 * Infinite and NaN arguments keep e^-p (lo is NaN there). */
#define CPU__OAI_VM_PAIRS(ISA, LEVEL, TARGET)                                                            \
  __attribute__((target(TARGET))) static void oai_pairs_f32_##ISA(float* restrict y, const float* restrict x, \
                                                                  int64_t n, double alpha, float limit) {     \
    const float ah = (float)alpha, al = (float)(alpha - (double)ah);                                      \
    for (int64_t i = 0; i < n; i++) {                                                                     \
      float g = x[2 * i], u = x[2 * i + 1];                                                               \
      g = g > limit ? limit : g;                                                                          \
      u = u > limit ? limit : u < -limit ? -limit : u;                                                    \
      float p = ah * g, lo = fmaf(al, g, fmaf(ah, g, -p));                                                \
      float e = cpu_vm_expf(-p);                                                                          \
      float ec = fmaf(e, -lo, e);                                                                         \
      e = lo == lo && e < INFINITY ? ec : e;                                                              \
      y[i] = (u + 1.0f) * (g / (1.0f + e));                                                               \
    }                                                                                                     \
  }
CPU_VM_ISAS(CPU__OAI_VM_PAIRS)
#define CPU__OAI_VM_TAB(ISA, LEVEL, TARGET) [LEVEL - 1] = oai_pairs_f32_##ISA,
static const oai_pairs_f32_fn k_pairs_vm[] = {CPU_VM_ISAS(CPU__OAI_VM_TAB)};
#endif

/* The widest f32 pair kernel this CPU runs under BP_CPU_ISA. */
static oai_pairs_f32_fn oai_pairs_f32_best(void) {
#if CPU_VM_X86
  int isa = cpu_vm_isa(cpu_isa_cap());
  if (isa > 0) return k_pairs_vm[isa - 1];
#endif
  return oai_pairs_f32;
}

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
    if (in->dtype == BP_DTYPE_F32 && out->dtype == BP_DTYPE_F32) {
      j->pairs_f32((float*)(void*)dst, (const float*)(const void*)src, n, j->alpha, (float)j->limit);
    } else if (in->dtype == BP_DTYPE_F64) {
      cpu_load[CPU_KT_F64](b.d, src, 1, 2 * n, in->dtype);
      oai_pairs_f64(b.d + 2 * CPU_BLOCK, b.d, n, j->alpha, j->limit);
      cpu_store[CPU_KT_F64](dst, 1, b.d + 2 * CPU_BLOCK, n, out->dtype);
    } else {
      cpu_load[CPU_KT_F32](b.f, src, 1, 2 * n, in->dtype);
      j->pairs_f32(b.f + 2 * CPU_BLOCK, b.f, n, j->alpha, (float)j->limit);
      cpu_store[CPU_KT_F32](dst, 1, b.f + 2 * CPU_BLOCK, n, out->dtype);
    }
  }
}

static bp_status_t exec_glu_oai(const bp_op_call_t* call) {
  bp_status_t st = cpu_call_require_dense(call);
  if (st != BP_OK) return st;
  const bp_swiglu_oai_attrs_t* a = call->attrs;
  oai_job_t j = {call, a->alpha != 0.0 ? a->alpha : 1.702, a->limit != 0.0 ? a->limit : 7.0, oai_pairs_f32_best()};
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
