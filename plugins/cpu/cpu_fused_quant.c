/* backplane CPU plugin: the fused quantizations (family QUANT) --
 * rms_norm_quant, add_rms_norm_quant, swiglu_quant (docs/semantics.md,
 * "Fused quantization"). Equivalent to vLLM's rms_norm_static_fp8_quant,
 * fused_add_rms_norm_static_fp8_quant, rms_norm_dynamic_per_token_quant and
 * silu_and_mul_quant.
 *
 * One pass per row: the row is read once (input, residual or [gate | up]),
 * the layer's result y stays in a row buffer in the compute type (f32; f64
 * for f64 inputs) and is never rounded to the input dtype; the codes of
 * y / scale and the row's scale are written. residual_out is stored first
 * and the norm runs over the values it stores (as add_rms_norm). The row
 * steps are shared with the group quantizations (cpu_quant_rows.h).
 * Operands are dense (the core packs them: the family is dense). Threading:
 * runs on a stream worker; rows are spread over the pool.
 */
#include <math.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "cpu_kernels.h"
#include "cpu_quant.h"
#include "cpu_quant_rows.h"

typedef struct fq_job {
  const bp_op_call_t* call;
  const bp_fused_quant_attrs_t* a;
  int kt;              /* CPU_KT_F32 or CPU_KT_F64 */
  int add, glu;
  int64_t n;           /* input elements per row (2h for swiglu_quant) */
  int64_t m;           /* output elements per row */
  const void* w;       /* weight in the compute type; NULL: none */
  double eps;
  double scale;        /* static scale; NAN when dynamic */
  double qmax;
  const bp_tensor_desc_t *in, *res, *out, *res_out, *scale_out;
  _Atomic int failed;
} fq_job_t;

static void fq_run(void* ctx, int64_t begin, int64_t end) {
  fq_job_t* j = ctx;
  int f64 = j->kt == CPU_KT_F64;
  size_t ks = cpu_kt_size[j->kt];
  size_t ies = bp_dtype_size(j->in->dtype);
  uint32_t q = j->a->qdtype;
  int sat = !(j->a->flags & BP_QUANTIZE_NO_SATURATE);
  /* x: the row (n), r: the residual (n), y: the result (m) */
  unsigned char* buf = malloc((size_t)(2 * j->n + j->m) * ks);
  if (!buf) {
    atomic_store(&j->failed, 1);
    return;
  }
  unsigned char *x = buf, *r = buf + (size_t)j->n * ks, *y = r + (size_t)j->n * ks;
  for (int64_t row = begin; row < end; row++) {
    size_t off = (size_t)(row * j->n) * ies;
    cpu_load[j->kt](x, cpu_desc_ptr(j->in) + off, 1, j->n, j->in->dtype);
    if (j->add) {
      cpu_load[j->kt](r, cpu_desc_ptr(j->res) + off, 1, j->n, j->res->dtype);
      if (f64) for (int64_t i = 0; i < j->n; i++) ((double*)x)[i] += ((const double*)r)[i];
      else for (int64_t i = 0; i < j->n; i++) ((float*)x)[i] += ((const float*)r)[i];
      unsigned char* ro = cpu_desc_ptr(j->res_out) + off;
      cpu_store[j->kt](ro, 1, x, j->n, j->res_out->dtype);
      /* the norm sees the stored (rounded) sum */
      if (j->res_out->dtype != cpu_kt_dtype[j->kt]) cpu_load[j->kt](x, ro, 1, j->n, j->res_out->dtype);
    }
    if (j->glu) {
      if (f64) cpu_qrow_silu_mul_f64((const double*)x, (double*)y, j->m);
      else cpu_qrow_silu_mul_f32((const float*)x, (float*)y, j->m);
    } else if (f64) {
      cpu_qrow_rms_f64((const double*)x, (double*)y, j->n, j->w, j->eps);
    } else {
      cpu_qrow_rms_f32((const float*)x, (float*)y, j->n, j->w, j->eps);
    }
    double s = j->scale;
    float* so = (float*)(void*)cpu_desc_ptr(j->scale_out) + row;
    if (isnan(s)) {
      double amax = f64 ? cpu_qrow_amax_f64((const double*)y, j->m) : cpu_qrow_amax_f32((const float*)y, j->m);
      if (j->a->scale_ub > 0.0 && amax > j->a->scale_ub) amax = j->a->scale_ub;
      *so = (float)(amax / j->qmax);
      s = *so; /* codes use the scale dequantization reads */
    } else {
      *so = (float)s;
    }
    uint8_t* c = cpu_desc_ptr(j->out) + row * j->m;
    if (f64) cpu_qrow_codes_f64((const double*)y, c, j->m, q, s, sat);
    else cpu_qrow_codes_f32((const float*)y, c, j->m, q, s, sat);
  }
  free(buf);
}

static bp_status_t exec_fused_quant(const bp_op_call_t* call) {
  bp_status_t st = cpu_call_require_dense(call);
  if (st != BP_OK) return st;
  fq_job_t j;
  memset(&j, 0, sizeof j);
  j.call = call;
  j.a = call->attrs;
  j.add = call->op_id == BP_OP_add_rms_norm_quant;
  j.glu = call->op_id == BP_OP_swiglu_quant;
  uint32_t wi = j.add ? 2 : 1, si = j.glu ? 1 : j.add ? 3 : 2;
  j.in = call->inputs[0];
  j.res = j.add ? call->inputs[1] : NULL;
  j.out = call->outputs[0];
  j.res_out = j.add ? call->outputs[1] : NULL;
  j.scale_out = call->outputs[j.add ? 2 : 1];
  j.kt = j.in->dtype == BP_DTYPE_F64 ? CPU_KT_F64 : CPU_KT_F32;
  j.n = j.in->sizes[j.in->rank - 1];
  j.m = j.glu ? j.n / 2 : j.n;
  j.qmax = cpu_qrows_qmax(j.a->qdtype);
  j.eps = j.a->eps > 0.0 ? j.a->eps : cpu_dtype_eps(j.in->dtype);
  const bp_tensor_desc_t* sd = cpu_qrows_opt_input(call, si);
  j.scale = sd ? (double)*(const float*)(const void*)cpu_desc_ptr(sd) : NAN;
  int64_t rows = bp_desc_numel(j.scale_out);
  if (rows == 0) return BP_OK;
  if (j.m == 0) {
    /* empty rows: amax 0, the scale 0 (dynamic) or the static one */
    for (int64_t r = 0; r < rows; r++)
      ((float*)(void*)cpu_desc_ptr(j.scale_out))[r] = sd ? (float)j.scale : 0.0f;
    return BP_OK;
  }
  void* w = NULL;
  const bp_tensor_desc_t* wd = j.glu ? NULL : cpu_qrows_opt_input(call, wi);
  st = cpu_qrows_load_weight(call, wd, j.kt, j.n, &w);
  if (st != BP_OK) return st;
  j.w = w;
  st = cpu_qrows_parallel(call, rows, j.n, fq_run, &j, &j.failed);
  free(w);
  return st;
}

static int supported_fused_quant(const bp_op_call_t* call, char* msg, size_t cap) {
  const bp_fused_quant_attrs_t* a = call->attrs;
  return cpu_qrows_supported(call, a ? a->qdtype : BP_DTYPE_INVALID, msg, cap);
}

const cpu_family_t cpu_family_fused_quant = {
    "fused_quant",
    CPU_FAMILY_OPS(BP_OP_rms_norm_quant, BP_OP_add_rms_norm_quant, BP_OP_swiglu_quant),
    exec_fused_quant, supported_fused_quant, 0,
};
