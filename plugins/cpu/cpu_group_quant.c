/* backplane CPU plugin: the per-token-group quantizations (family QUANT) --
 * per_token_group_quant, rms_norm_group_quant, swiglu_group_quant
 * (docs/semantics.md, "Group quantization"). vLLM's
 * per_token_group_quant_fp8 / _int8, rms_norm_per_block_quant and
 * silu_mul_per_token_group_quant_fp8.
 *
 * One pass per row: the row is read once, the layer's result y (the row
 * itself, rms_norm's, or silu(gate) * up) stays in a row buffer in the
 * compute type (f32; f64 for f64 inputs); then per group of G elements
 * amax, scale = fl32(max(amax, eps) / qmax) (UE8M0: the power of two at or
 * above it) and the codes of y / scale, rounded to nearest even
 * (saturating). float8_e4m3fn codes of f32 rows come from a bit-level
 * rounding (no double round trip); the others, the layer and amax from the
 * row steps shared with the fused quantizations (cpu_quant_rows.h).
 * Operands are dense (the core packs them: the family is dense). Threading: runs on a stream worker; rows are
 * spread over the pool.
 */
#include <math.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "cpu_kernels.h"
#include "cpu_quant.h"
#include "cpu_quant_rows.h"

typedef struct gq_job {
  const bp_op_call_t* call;
  const bp_group_quant_attrs_t* a;
  int kt;        /* CPU_KT_F32 or CPU_KT_F64 */
  int norm, glu;
  int64_t n;     /* input elements per row (2h for swiglu_group_quant) */
  int64_t m;     /* output elements per row */
  int64_t rows;
  const void* w; /* rms weight in the compute type; NULL: none */
  double eps, norm_eps, qmax;
  _Atomic int failed;
} gq_job_t;

/* float8_e4m3fn codes of f32 values (round to nearest even, saturating at
 * +-448; NaN 0x7F), from the bits, 4 lanes at a time (GCC vector
 * extensions, SSE2 in the baseline build: the selects are masks, no libm):
 *   |v| >= 448 (inf included): 0x7E; below 2^-6: subnormal steps of 2^-9,
 *   rounded by the 1.5 * 2^23 trick; else the mantissa rounded to 3 bits
 *   (ties to even) and the exponent rebased (f32 bias 127, e4m3 7). */
typedef float gq_v4f __attribute__((vector_size(16)));
typedef uint32_t gq_v4u __attribute__((vector_size(16)));
typedef int32_t gq_v4i __attribute__((vector_size(16)));
typedef uint8_t gq_v4b __attribute__((vector_size(4)));

static gq_v4u gq_e4m3_v4(gq_v4f v) {
  gq_v4u b = (gq_v4u)v, u = b & 0x7FFFFFFFu, sign = (b >> 24) & 0x80u;
  gq_v4f a = (gq_v4f)u * 512.0f; /* |v| 2^9, exact */
  gq_v4f r = (a + 0x1.8p23f) - 0x1.8p23f; /* round to an integer, ties to even */
  gq_v4u sub = (gq_v4u)__builtin_convertvector(r, gq_v4i);
  gq_v4u nrm = ((u + 0x7FFFFu + ((u >> 20) & 1u)) >> 20) - (120u << 3);
  gq_v4u c = (gq_v4u)(u < 0x3C800000u) & sub;
  c |= ~(gq_v4u)(u < 0x3C800000u) & nrm;
  c = ((gq_v4u)(u >= 0x43E00000u) & 0x7Eu) | (~(gq_v4u)(u >= 0x43E00000u) & c);
  c = ((gq_v4u)(u > 0x7F800000u) & 0x7Fu) | (~(gq_v4u)(u > 0x7F800000u) & c);
  return c | ((gq_v4u)(u <= 0x7F800000u) & sign);
}

static uint8_t gq_e4m3(float v) {
  gq_v4f x = {v};
  return (uint8_t)gq_e4m3_v4(x)[0];
}

/* Codes of y[0..n) / s (times inv = 1 / s when `pow2`: exact) into c. */
static void gq_e4m3_row(const float* restrict y, uint8_t* restrict c, int64_t n, float s, float inv, int pow2) {
  int64_t i = 0;
  for (; i + 4 <= n; i += 4) {
    gq_v4f v;
    memcpy(&v, y + i, sizeof v);
    v = pow2 ? v * inv : v / s;
    gq_v4b q = __builtin_convertvector(gq_e4m3_v4(v), gq_v4b);
    memcpy(c + i, &q, 4);
  }
  for (; i < n; i++) c[i] = gq_e4m3(pow2 ? y[i] * inv : y[i] / s);
}

/* The scale of a group whose amax is `amax` (NaN when the group holds NaN). */
static float gq_scale(const gq_job_t* j, double amax) {
  if (amax != amax) return NAN;
  float s = (float)((amax > j->eps ? amax : j->eps) / j->qmax);
  if ((j->a->flags & BP_GROUP_QUANT_SCALE_UE8M0) && s > 0.0f && isfinite(s)) {
    int e;
    float m = frexpf(s, &e); /* s = m 2^e, m in [0.5, 1) */
    s = ldexpf(1.0f, m == 0.5f ? e - 1 : e);
  }
  return s;
}

/* The layer's result y[0..m) of the row x (compute type f32 or f64). */
#define CPU__GQ_LAYER(T, SFX)                                                      \
  static void gq_layer_##SFX(const gq_job_t* j, const T* x, T* restrict y) {       \
    if (j->glu)                                                                    \
      cpu_qrow_silu_mul_##SFX(x, y, j->m);                                         \
    else if (j->norm)                                                              \
      cpu_qrow_rms_##SFX(x, y, j->n, j->w, j->norm_eps);                           \
    else                                                                           \
      memcpy(y, x, sizeof(T) * (size_t)j->m);                                      \
  }
CPU__GQ_LAYER(float, f32)
CPU__GQ_LAYER(double, f64)

/* The codes and scales of each group of the row's result y (s_out[gi *
 * s_step]: group gi's scale). float8_e4m3fn codes of f32 rows come from
 * gq_e4m3_row; the others from the shared row encoder. */
static void gq_codes(const gq_job_t* j, const void* y, uint8_t* restrict c, float* s_out, int64_t s_step) {
  int f64 = j->kt == CPU_KT_F64;
  uint32_t q = j->a->qdtype;
  int64_t G = j->a->group_size;
  for (int64_t g0 = 0, gi = 0; g0 < j->m; g0 += G, gi++) {
    if (f64) {
      const double* yd = (const double*)y + g0;
      float s = gq_scale(j, cpu_qrow_amax_f64(yd, G));
      s_out[gi * s_step] = s;
      cpu_qrow_codes_f64(yd, c + g0, G, q, s, 1);
      continue;
    }
    const float* yf = (const float*)y + g0;
    float s = gq_scale(j, cpu_qrow_amax_f32(yf, G));
    s_out[gi * s_step] = s;
    if (s != 0.0f && q == BP_DTYPE_F8E4M3FN) {
      /* 1 / s is exact for a UE8M0 scale; else y / s */
      gq_e4m3_row(yf, c + g0, G, s, 1.0f / s, (j->a->flags & BP_GROUP_QUANT_SCALE_UE8M0) != 0);
    } else {
      cpu_qrow_codes_f32(yf, c + g0, G, q, s, 1);
    }
  }
}

static void gq_run(void* ctx, int64_t begin, int64_t end) {
  gq_job_t* j = ctx;
  const bp_op_call_t* call = j->call;
  const bp_tensor_desc_t *in = call->inputs[0], *out = call->outputs[0], *sc = call->outputs[1];
  size_t ks = cpu_kt_size[j->kt], ies = bp_dtype_size(in->dtype);
  int col = (j->a->flags & BP_GROUP_QUANT_COLUMN_MAJOR) != 0;
  int64_t groups = j->m / j->a->group_size;
  unsigned char* buf = malloc((size_t)(j->n + j->m) * ks);
  if (!buf) {
    atomic_store(&j->failed, 1);
    return;
  }
  unsigned char *x = buf, *y = buf + (size_t)j->n * ks;
  float* so = (float*)(void*)cpu_desc_ptr(sc);
  for (int64_t r = begin; r < end; r++) {
    cpu_load[j->kt](x, cpu_desc_ptr(in) + (size_t)(r * j->n) * ies, 1, j->n, in->dtype);
    uint8_t* c = cpu_desc_ptr(out) + r * j->m;
    /* row-major scales [rows, groups]; column-major [groups, rows] */
    float* s = col ? so + r : so + r * groups;
    int64_t step = col ? j->rows : 1;
    if (j->kt == CPU_KT_F64) gq_layer_f64(j, (const double*)(void*)x, (double*)(void*)y);
    else gq_layer_f32(j, (const float*)(void*)x, (float*)(void*)y);
    gq_codes(j, y, c, s, step);
  }
  free(buf);
}

static bp_status_t exec_group_quant(const bp_op_call_t* call) {
  bp_status_t st = cpu_call_require_dense(call);
  if (st != BP_OK) return st;
  gq_job_t j;
  memset(&j, 0, sizeof j);
  j.call = call;
  j.a = call->attrs;
  const bp_tensor_desc_t* in = call->inputs[0];
  if (!j.a || in->rank < 1 || j.a->group_size < 1) {
    return cpu_error(BP_INVALID_ARGUMENT, "cpu: %s: needs attrs with group_size >= 1 and rows",
                     cpu_op_name(call->op_id));
  }
  j.norm = call->op_id == BP_OP_rms_norm_group_quant;
  j.glu = call->op_id == BP_OP_swiglu_group_quant;
  j.kt = in->dtype == BP_DTYPE_F64 ? CPU_KT_F64 : CPU_KT_F32;
  j.n = in->sizes[in->rank - 1];
  j.m = j.glu ? j.n / 2 : j.n;
  j.rows = j.n ? bp_desc_numel(in) / j.n : 0;
  j.qmax = cpu_qrows_qmax(j.a->qdtype);
  j.eps = j.a->eps > 0.0 ? j.a->eps : 1e-10;
  j.norm_eps = j.a->norm_eps > 0.0 ? j.a->norm_eps : cpu_dtype_eps(in->dtype);
  if (j.rows == 0 || j.m == 0) return BP_OK;
  void* w = NULL;
  const bp_tensor_desc_t* wd = j.norm ? cpu_qrows_opt_input(call, 1) : NULL;
  st = cpu_qrows_load_weight(call, wd, j.kt, j.n, &w);
  if (st != BP_OK) return st;
  j.w = w;
  st = cpu_qrows_parallel(call, j.rows, j.n, gq_run, &j, &j.failed);
  free(w);
  return st;
}

static int supported_group_quant(const bp_op_call_t* call, char* msg, size_t cap) {
  const bp_group_quant_attrs_t* a = call->attrs;
  return cpu_qrows_supported(call, a ? a->qdtype : BP_DTYPE_INVALID, msg, cap);
}

const cpu_family_t cpu_family_group_quant = {
    "group_quant",
    CPU_FAMILY_OPS(BP_OP_per_token_group_quant, BP_OP_rms_norm_group_quant, BP_OP_swiglu_group_quant),
    exec_group_quant, supported_group_quant, 0,
};
