/* backplane CPU plugin, attention family: linear (GEMM into the output, then
 * one fused pass for bias and activation), rotary_embedding, cdist and
 * pdist. Calls were validated by cpu_launch_op; these kernels re-check the
 * shapes they index with.
 */
#include <math.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "cpu_attention.h"

/* Stride of the rows when the leading rank - 1 dims of t collapse into one
 * (size-1 dims ignored); 0 when they do not. */
static int att_rows_stride(const bp_tensor_desc_t* t, int64_t* out_rs) {
  int64_t rs = t->rank ? t->sizes[t->rank - 1] : 1, expect = -1;
  for (uint32_t d = t->rank - 1; d-- > 0;) {
    if (t->sizes[d] == 1) continue;
    if (expect >= 0 && t->strides[d] != expect) return 0;
    if (expect < 0) rs = t->strides[d];
    expect = t->strides[d] * t->sizes[d];
  }
  *out_rs = rs;
  return 1;
}

/* Element offset of row `row` (row-major over the leading rank - 1 dims of
 * `sizes`) for a layout with `strides`. */
static int64_t att_row_offset(uint32_t rank, const int64_t* sizes, const int64_t* strides,
                              int64_t row) {
  int64_t off = 0;
  for (uint32_t d = rank - 1; d-- > 0;) {
    off += (row % sizes[d]) * strides[d];
    row /= sizes[d];
  }
  return off;
}

/* ---- linear ------------------------------------------------------------------ */

/* act(x) per enum bp_activation, for floating T (math functions with suffix M). */
#define ATT_ACT_FN(SFX, T, M)                                                               \
  static inline T att_act_##SFX(T x, uint32_t a) {                                          \
    switch (a) {                                                                            \
      case BP_ACTIVATION_RELU: return x < 0 ? (T)0 : x;                                     \
      case BP_ACTIVATION_GELU_ERF: return (T)0.5 * x * ((T)1 + erf##M(x * (T)M_SQRT1_2));   \
      case BP_ACTIVATION_GELU_TANH:                                                         \
        return (T)0.5 * x *                                                                 \
               ((T)1 + tanh##M((T)0.7978845608028654 * (x + (T)0.044715 * x * x * x)));     \
      case BP_ACTIVATION_SILU: return x / ((T)1 + exp##M(-x));                              \
      case BP_ACTIVATION_SIGMOID: return (T)1 / ((T)1 + exp##M(-x));                       \
      case BP_ACTIVATION_TANH: return tanh##M(x);                                           \
      default: return x;                                                                    \
    }                                                                                       \
  }
ATT_ACT_FN(f32, float, f)
ATT_ACT_FN(f64, double, )
/* Integers take NONE and RELU only (the rule rejects the others). */
static inline int64_t att_act_i64(int64_t x, uint32_t a) {
  return a == BP_ACTIVATION_RELU && x < 0 ? 0 : x;
}

/* The value an integer of `dtype` holds after wrap-around (two's
 * complement); floating values pass through. Applied before the activation,
 * so relu sees what input @ weight^T + bias stores. */
static inline int64_t att_wrap_i64(int64_t x, uint32_t dtype) {
  switch (dtype) {
    case BP_DTYPE_I8: return (int8_t)x;
    case BP_DTYPE_U8: return (uint8_t)x;
    case BP_DTYPE_I16: return (int16_t)x;
    case BP_DTYPE_I32: return (int32_t)x;
    default: return x;
  }
}
#define att_wrap_f32(x, dtype) (x)
#define att_wrap_f64(x, dtype) (x)

typedef struct lin_job {
  const bp_tensor_desc_t *bias, *out;
  int64_t bias_strides[BP_MAX_RANK];
  const unsigned char* c; /* GEMM result: row m at c + m * c_rs elements of cdt */
  int64_t c_rs, c_cs, N;
  uint32_t cdt, act;
  /* f32 only: the activation as the elementwise-program kernel of the
   * CPU's best ISA (vectorized exp, tanh, erf: cpu_vmath.h), or NULL for
   * the scalar form below. */
  cpu_ew_fn act_fn;
  cpu_kparams_t act_params;
  /* C is the output itself (kernel dtype, unit column stride) and the bias,
   * if any, is of that dtype with unit stride: rows update in place. */
  int dense;
} lin_job_t;

/* The elementwise op (and gelu's approximation) of an activation. */
static int lin_act_op(uint32_t act, uint32_t* out_op, uint32_t* out_aux) {
  *out_aux = 0;
  switch (act) {
    case BP_ACTIVATION_RELU: *out_op = BP_OP_relu; return 1;
    case BP_ACTIVATION_GELU_ERF: *out_op = BP_OP_gelu; return 1;
    case BP_ACTIVATION_GELU_TANH: *out_op = BP_OP_gelu; *out_aux = BP_GELU_TANH; return 1;
    case BP_ACTIVATION_SILU: *out_op = BP_OP_silu; return 1;
    case BP_ACTIVATION_SIGMOID: *out_op = BP_OP_sigmoid; return 1;
    case BP_ACTIVATION_TANH: *out_op = BP_OP_tanh; return 1;
    default: return 0;
  }
}

/* Rows [rb, re): out = act(C + bias), in kernel type KT (T). */
#define ATT_LIN_EPILOGUE(SFX, T, KT)                                                          \
  static void lin_rows_##SFX(void* ctx, int64_t rb, int64_t re) {                             \
    const lin_job_t* j = ctx;                                                                 \
    const bp_tensor_desc_t* o = j->out;                                                      \
    T row[CPU_BLOCK], bias[CPU_BLOCK], act[CPU_BLOCK];                                        \
    size_t ces = bp_dtype_size(j->cdt), oes = bp_dtype_size(o->dtype);                        \
    int64_t ocs = o->strides[o->rank - 1];                                                    \
    for (int64_t r = rb; r < re; r++) {                                                       \
      unsigned char* op = att_at(o, att_row_offset(o->rank, o->sizes, o->strides, r));       \
      const unsigned char* bp = j->bias ? att_at(j->bias, att_row_offset(o->rank, o->sizes,   \
                                                                          j->bias_strides, r)) \
                                        : NULL;                                               \
      int64_t bcs = j->bias_strides[o->rank - 1];                                             \
      if (j->dense) { /* C is the output row: update it in place */                           \
        T* restrict out = (T*)(void*)op;                                                      \
        const T* restrict b = (const T*)(const void*)bp;                                      \
        for (int64_t c0 = 0; c0 < j->N; c0 += CPU_BLOCK) {                                    \
          int64_t n = j->N - c0 < CPU_BLOCK ? j->N - c0 : CPU_BLOCK;                          \
          if (j->act_fn) {                                                                    \
            for (int64_t c = 0; c < n; c++) row[c] = out[c0 + c] + (b ? b[c0 + c] : 0);       \
            const void* act_in[1] = {row};                                                    \
            j->act_fn(out + c0, act_in, n, &j->act_params);                                   \
          } else if (j->act != BP_ACTIVATION_NONE) {                                          \
            for (int64_t c = 0; c < n; c++)                                                   \
              out[c0 + c] = att_act_##SFX(att_wrap_##SFX(out[c0 + c] + (b ? b[c0 + c] : 0),   \
                                                         o->dtype), j->act);                  \
          } else if (b) {                                                                     \
            for (int64_t c = 0; c < n; c++) out[c0 + c] += b[c0 + c];                         \
          }                                                                                   \
        }                                                                                     \
        continue;                                                                             \
      }                                                                                       \
      for (int64_t c0 = 0; c0 < j->N; c0 += CPU_BLOCK) {                                      \
        int64_t n = j->N - c0 < CPU_BLOCK ? j->N - c0 : CPU_BLOCK;                            \
        cpu_load[KT](row, j->c + (r * j->c_rs + c0 * j->c_cs) * (int64_t)ces, j->c_cs, n,     \
                     j->cdt);                                                                 \
        if (bp) {                                                                             \
          cpu_load[KT](bias, bp + c0 * bcs * (int64_t)bp_dtype_size(j->bias->dtype), bcs, n,  \
                       j->bias->dtype);                                                       \
          for (int64_t c = 0; c < n; c++) row[c] += bias[c];                                  \
        }                                                                                     \
        const T* res = row;                                                                   \
        if (j->act_fn) {                                                                      \
          const void* act_in[1] = {row};                                                      \
          j->act_fn(act, act_in, n, &j->act_params);                                          \
          res = act;                                                                          \
        } else if (j->act != BP_ACTIVATION_NONE) {                                            \
          for (int64_t c = 0; c < n; c++)                                                     \
            row[c] = att_act_##SFX(att_wrap_##SFX(row[c], o->dtype), j->act);                 \
        }                                                                                     \
        cpu_store[KT](op + c0 * ocs * (int64_t)oes, ocs, res, n, o->dtype);                   \
      }                                                                                       \
    }                                                                                         \
  }
ATT_LIN_EPILOGUE(f32, float, CPU_KT_F32)
ATT_LIN_EPILOGUE(f64, double, CPU_KT_F64)
ATT_LIN_EPILOGUE(i64, int64_t, CPU_KT_I64)

/* A dense copy of t (cast to dtype) in *owned, as a host descriptor. */
static bp_status_t att_dense(const bp_tensor_desc_t* t, uint32_t dtype, void** owned) {
  int64_t n = 1;
  for (uint32_t d = 0; d < t->rank; d++) n *= t->sizes[d];
  *owned = malloc((size_t)(n > 0 ? n : 1) * bp_dtype_size(dtype));
  if (!*owned)
    return cpu_error(BP_RESOURCE_EXHAUSTED, "cpu: cannot allocate %lld bytes for a packed copy",
                     (long long)(n * (int64_t)bp_dtype_size(dtype)));
  bp_tensor_desc_t dd;
  struct bpp_buffer_s holder;
  cpu_desc_host(&dd, &holder, *owned, dtype, t->rank, t->sizes, NULL);
  return cpu_cast_copy(&dd, t);
}

bp_status_t cpu_att_linear(const bp_op_call_t* call) {
  const bp_tensor_desc_t *in = call->inputs[0], *w = call->inputs[1], *o = call->outputs[0];
  const bp_tensor_desc_t* bias =
      call->num_inputs > 2 && call->inputs[2]->dtype != BP_DTYPE_INVALID ? call->inputs[2] : NULL;
  const bp_linear_attrs_t* a = call->attrs;
  bp_status_t st = BP_OK;
  void *pa = NULL, *pw = NULL, *pc = NULL;
  lin_job_t j;
  memset(&j, 0, sizeof j);
  if (in->rank < 1 || w->rank != 2 || o->rank != in->rank || in->sizes[in->rank - 1] != w->sizes[1] ||
      o->sizes[o->rank - 1] != w->sizes[0] || !a)
    return cpu_error(BP_INVALID_ARGUMENT, "cpu: linear: operand shapes do not match");
  for (uint32_t d = 0; d + 1 < in->rank; d++)
    if (o->sizes[d] != in->sizes[d])
      return cpu_error(BP_INVALID_ARGUMENT, "cpu: linear: output and input leading dims differ");
  if (w->dtype != in->dtype || o->dtype != in->dtype || (bias && bias->dtype != in->dtype))
    return cpu_error(BP_INVALID_ARGUMENT, "cpu: linear: operands must share one dtype");
  int64_t K = w->sizes[1], N = w->sizes[0], M = 1;
  for (uint32_t d = 0; d + 1 < o->rank; d++) M *= o->sizes[d];
  j.bias = bias;
  j.out = o;
  j.N = N;
  j.act = a->activation;
  if (bias && (st = cpu_broadcast_strides(bias, o->rank, o->sizes, j.bias_strides, "linear: bias")))
    return st;
  if (M == 0 || N == 0) return BP_OK;
  /* f16 / bf16 compute in f32 and round once, after the epilogue. */
  uint32_t cdt = in->dtype == BP_DTYPE_F16 || in->dtype == BP_DTYPE_BF16 ? BP_DTYPE_F32 : in->dtype;
  const void* A = cpu_desc_ptr(in);
  const void* W = cpu_desc_ptr(w);
  int64_t a_rs = 0, a_cs = in->strides[in->rank - 1], w_s0 = w->strides[0], w_s1 = w->strides[1];
  if (cdt != in->dtype || !att_rows_stride(in, &a_rs)) {
    if ((st = att_dense(in, cdt, &pa))) goto cleanup;
    A = pa;
    a_rs = K;
    a_cs = 1;
  }
  if (cdt != w->dtype) {
    if ((st = att_dense(w, cdt, &pw))) goto cleanup;
    W = pw;
    w_s0 = K;
    w_s1 = 1;
  }
  int64_t c_rs = 0;
  int direct = cdt == o->dtype && att_rows_stride(o, &c_rs);
  void* C = cpu_desc_ptr(o);
  int64_t c_cs = o->strides[o->rank - 1];
  if (!direct) {
    pc = malloc((size_t)(M * N) * bp_dtype_size(cdt));
    if (!pc) {
      st = cpu_error(BP_RESOURCE_EXHAUSTED, "cpu: linear: cannot allocate the %lldx%lld result",
                     (long long)M, (long long)N);
      goto cleanup;
    }
    C = pc;
    c_rs = N;
    c_cs = 1;
  }
  /* out = input @ weight^T: weight [N, K] read as B[k, n] = W[n, k]. */
  st = cpu_gemm(cdt, M, N, K, 1.0, A, a_rs, a_cs, W, w_s1, w_s0, 0, C, c_rs, c_cs);
  if (st) goto cleanup;
  if (direct && !bias && j.act == BP_ACTIVATION_NONE) goto cleanup;
  j.c = C;
  j.c_rs = c_rs;
  j.c_cs = c_cs;
  j.cdt = cdt;
  uint32_t act_op, act_aux;
  int act_bool;
  if (cdt == BP_DTYPE_F32 && lin_act_op(j.act, &act_op, &act_aux) &&
      cpu_ew_program_kernel(act_op, act_aux, CPU_KT_F32, &j.act_fn, &j.act_params, &act_bool) != 0)
    j.act_fn = NULL;
  int kt_dtype = cdt == BP_DTYPE_F32 || cdt == BP_DTYPE_F64 || cdt == BP_DTYPE_I64;
  j.dense = kt_dtype && direct && c_cs == 1 && (!bias || (bias->dtype == cdt && j.bias_strides[o->rank - 1] == 1));
  int64_t grain = 4096 / (N > 0 ? N : 1) + 1;
  if (cdt == BP_DTYPE_F64)
    cpu_parallel_for(M, grain, lin_rows_f64, &j);
  else if (cdt == BP_DTYPE_F32)
    cpu_parallel_for(M, grain, lin_rows_f32, &j);
  else
    cpu_parallel_for(M, grain, lin_rows_i64, &j);
cleanup:
  free(pa);
  free(pw);
  free(pc);
  return st;
}

/* ---- rotary_embedding ------------------------------------------------------------ */

typedef struct rot_job {
  const bp_tensor_desc_t *x, *cs, *sn, *o;
  int64_t t_strides[BP_MAX_RANK]; /* cos / sin broadcast to [..., S, t] (same shape) */
  int64_t s_strides[BP_MAX_RANK];
  int64_t D, t;
  int interleaved;
  _Atomic int failed; /* a worker could not allocate its row buffers */
} rot_job_t;

/* Rows [rb, re) of the output: out = x * cos + rotate(x) * sin. */
#define ATT_ROT_KERNEL(SFX, T, KT)                                                            \
  static void rot_rows_##SFX(void* ctx, int64_t rb, int64_t re) {                             \
    rot_job_t* j = ctx;                                                                       \
    const bp_tensor_desc_t *x = j->x, *o = j->o;                                              \
    uint32_t r = x->rank;                                                                     \
    const int64_t D = j->D, t = j->t, half = D / 2, full = t == D;                            \
    T* buf = malloc(sizeof(T) * (size_t)(2 * D + 2 * t + 1));                                 \
    if (!buf) {                                                                               \
      atomic_store(&j->failed, 1);                                                            \
      return;                                                                                 \
    }                                                                                         \
    T *xv = buf, *ov = xv + D, *cv = ov + D, *sv = cv + t;                                    \
    size_t tes = bp_dtype_size(j->cs->dtype);                                                 \
    for (int64_t row = rb; row < re; row++) {                                                 \
      cpu_load[KT](xv, att_at(x, att_row_offset(r, x->sizes, x->strides, row)),               \
                   x->strides[r - 1], D, x->dtype);                                           \
      int64_t coff = att_row_offset(r, x->sizes, j->t_strides, row);                          \
      int64_t soff = att_row_offset(r, x->sizes, j->s_strides, row);                          \
      cpu_load[KT](cv, cpu_desc_ptr(j->cs) + coff * (int64_t)tes, j->t_strides[r - 1], t,     \
                   j->cs->dtype);                                                             \
      cpu_load[KT](sv, cpu_desc_ptr(j->sn) + soff * (int64_t)tes, j->s_strides[r - 1], t,     \
                   j->sn->dtype);                                                             \
      for (int64_t i = 0; i < half; i++) {                                                    \
        /* the pair (i1, i2) rotates by the angle of table entries (k1, k2) */               \
        int64_t i1 = j->interleaved ? 2 * i : i, i2 = j->interleaved ? 2 * i + 1 : i + half;  \
        int64_t k1 = full ? i1 : i, k2 = full ? i2 : i;                                       \
        T x1 = xv[i1], x2 = xv[i2];                                                           \
        ov[i1] = x1 * cv[k1] - x2 * sv[k1];                                                   \
        ov[i2] = x2 * cv[k2] + x1 * sv[k2];                                                   \
      }                                                                                       \
      cpu_store[KT](att_at(o, att_row_offset(r, o->sizes, o->strides, row)),                  \
                    o->strides[r - 1], ov, D, o->dtype);                                      \
    }                                                                                         \
    free(buf);                                                                                \
  }
ATT_ROT_KERNEL(f32, float, CPU_KT_F32)
ATT_ROT_KERNEL(f64, double, CPU_KT_F64)

bp_status_t cpu_att_rotary(const bp_op_call_t* call) {
  rot_job_t j;
  memset(&j, 0, sizeof j);
  j.x = call->inputs[0];
  j.cs = call->inputs[1];
  j.sn = call->inputs[2];
  j.o = call->outputs[0];
  const bp_rotary_attrs_t* a = call->attrs;
  const bp_tensor_desc_t* x = j.x;
  if (!a || x->rank < 1 || j.o->rank != x->rank || j.cs->rank < 1 || j.sn->rank != j.cs->rank)
    return cpu_error(BP_INVALID_ARGUMENT, "cpu: rotary_embedding: operand ranks do not match");
  for (uint32_t d = 0; d < x->rank; d++)
    if (j.o->sizes[d] != x->sizes[d])
      return cpu_error(BP_INVALID_ARGUMENT, "cpu: rotary_embedding: output shape differs from input's");
  j.D = x->sizes[x->rank - 1];
  j.t = j.cs->sizes[j.cs->rank - 1];
  j.interleaved = a->interleaved != 0;
  if (j.D % 2 != 0 || (j.t != j.D && j.t != j.D / 2) ||
      j.sn->sizes[j.sn->rank - 1] != j.t)
    return cpu_error(BP_INVALID_ARGUMENT, "cpu: rotary_embedding: bad cos/sin table width");
  int64_t want[BP_MAX_RANK], rows = 1;
  memcpy(want, x->sizes, sizeof(int64_t) * x->rank);
  want[x->rank - 1] = j.t;
  bp_status_t st = cpu_broadcast_strides(j.cs, x->rank, want, j.t_strides, "rotary_embedding: cos");
  if (!st) st = cpu_broadcast_strides(j.sn, x->rank, want, j.s_strides, "rotary_embedding: sin");
  if (st) return st;
  for (uint32_t d = 0; d + 1 < x->rank; d++) rows *= x->sizes[d];
  if (rows == 0 || j.D == 0) return BP_OK;
  int64_t grain = 4096 / j.D + 1;
  if (x->dtype == BP_DTYPE_F64)
    cpu_parallel_for(rows, grain, rot_rows_f64, &j);
  else
    cpu_parallel_for(rows, grain, rot_rows_f32, &j);
  if (atomic_load(&j.failed))
    return cpu_error(BP_RESOURCE_EXHAUSTED, "cpu: rotary_embedding: out of memory");
  return BP_OK;
}

/* ---- cdist, pdist ------------------------------------------------------------------ */

/* The p-norm distance of two rows (fp64): p = 0 counts differing entries
 * (NaN differs), p = inf takes the largest |difference| (NaN propagates). */
static double att_dist(const double* a, const double* b, int64_t m, double p) {
  double acc = 0.0;
  if (p == 0.0) {
    for (int64_t i = 0; i < m; i++) acc += a[i] - b[i] != 0.0;
  } else if (isinf(p)) {
    for (int64_t i = 0; i < m; i++) {
      double d = fabs(a[i] - b[i]);
      if (d != d) return d;
      acc = d > acc ? d : acc;
    }
  } else if (p == 1.0) {
    for (int64_t i = 0; i < m; i++) acc += fabs(a[i] - b[i]);
  } else if (p == 2.0) {
    for (int64_t i = 0; i < m; i++) acc += (a[i] - b[i]) * (a[i] - b[i]);
    acc = sqrt(acc);
  } else {
    for (int64_t i = 0; i < m; i++) acc += pow(fabs(a[i] - b[i]), p);
    acc = pow(acc, 1.0 / p);
  }
  return acc;
}

typedef struct dist_job {
  const bp_tensor_desc_t *x1, *x2, *o;
  att_batch_t batch;
  int64_t P, R, M;
  double p;
  _Atomic int failed;
} dist_job_t;

/* Row r of a 2-d slice: `base` element offset, row/column strides. */
static void att_load_row_f64(double* dst, const bp_tensor_desc_t* t, int64_t base, int64_t row,
                             int64_t m) {
  uint32_t r = t->rank;
  cpu_load[CPU_KT_F64](dst, att_at(t, base + row * t->strides[r - 2]), t->strides[r - 1], m,
                       t->dtype);
}

/* cdist without the mm path: items are (batch, row of x1). */
static void cdist_rows(void* ctx, int64_t ub, int64_t ue) {
  dist_job_t* j = ctx;
  double* buf = malloc(sizeof(double) * (size_t)(2 * j->M + j->R + 1));
  if (!buf) {
    atomic_store(&j->failed, 1);
    return;
  }
  double *a = buf, *b = a + j->M, *res = b + j->M;
  const bp_tensor_desc_t* o = j->o;
  for (int64_t u = ub; u < ue; u++) {
    int64_t bi = u / j->P, i = u % j->P;
    int64_t o1 = att_batch_offset(j->x1, 2, &j->batch, bi, -1);
    int64_t o2 = att_batch_offset(j->x2, 2, &j->batch, bi, -1);
    int64_t oo = att_batch_offset(o, 2, &j->batch, bi, -1) + i * o->strides[o->rank - 2];
    att_load_row_f64(a, j->x1, o1, i, j->M);
    for (int64_t k = 0; k < j->R; k++) {
      att_load_row_f64(b, j->x2, o2, k, j->M);
      res[k] = att_dist(a, b, j->M, j->p);
    }
    cpu_store[CPU_KT_F64](att_at(o, oo), o->strides[o->rank - 1], res, j->R, o->dtype);
  }
  free(buf);
}

/* The euclidean mm path, as PyTorch's _euclidean_dist: sqrt(clamp_min(
 * |a|^2 + |b|^2 - 2 a.b, 1e-30)) with a.b from one GEMM per batch, in the
 * compute type T (f32 for f32/f16/bf16, f64 for f64). */
#define ATT_CDIST_MM(SFX, T, KT, DT)                                                          \
  static bp_status_t cdist_mm_##SFX(dist_job_t* j) {                                          \
    const int64_t P = j->P, R = j->R, M = j->M;                                               \
    const bp_tensor_desc_t *x1 = j->x1, *x2 = j->x2, *o = j->o;                              \
    size_t es1 = bp_dtype_size(x1->dtype), es2 = bp_dtype_size(x2->dtype);                    \
    T* buf = malloc(sizeof(T) * (size_t)(P * M + R * M + P * R + P + R + 1));                 \
    if (!buf) return cpu_error(BP_RESOURCE_EXHAUSTED, "cpu: cdist: out of memory");           \
    T *A = buf, *B = A + P * M, *G = B + R * M, *n1 = G + P * R, *n2 = n1 + P;                \
    bp_status_t st = BP_OK;                                                                   \
    for (int64_t bi = 0; bi < j->batch.count && !st; bi++) {                                  \
      unsigned char* p1 = att_at(x1, att_batch_offset(x1, 2, &j->batch, bi, -1));             \
      unsigned char* p2 = att_at(x2, att_batch_offset(x2, 2, &j->batch, bi, -1));             \
      for (int64_t i = 0; i < P; i++)                                                         \
        cpu_load[KT](A + i * M, p1 + i * x1->strides[x1->rank - 2] * (int64_t)es1,            \
                     x1->strides[x1->rank - 1], M, x1->dtype);                                \
      for (int64_t i = 0; i < R; i++)                                                         \
        cpu_load[KT](B + i * M, p2 + i * x2->strides[x2->rank - 2] * (int64_t)es2,            \
                     x2->strides[x2->rank - 1], M, x2->dtype);                                \
      for (int64_t i = 0; i < P + R; i++) {                                                   \
        const T* v = i < P ? A + i * M : B + (i - P) * M;                                     \
        T s = 0;                                                                              \
        for (int64_t c = 0; c < M; c++) s += v[c] * v[c];                                     \
        n1[i] = s; /* n2 = n1 + P continues the array */                                     \
      }                                                                                       \
      st = cpu_gemm(DT, P, R, M, -2.0, A, M, 1, B, 1, M, 0, G, R, 1);                         \
      unsigned char* po = att_at(o, att_batch_offset(o, 2, &j->batch, bi, -1));               \
      for (int64_t i = 0; i < P && !st; i++) {                                                \
        T* g = G + i * R;                                                                     \
        for (int64_t k = 0; k < R; k++) {                                                     \
          T d2 = n1[i] + n2[k] + g[k];                                                        \
          g[k] = (T)sqrt(d2 > (T)1e-30 ? d2 : (T)1e-30);                                      \
          if (d2 != d2) g[k] = d2;                                                            \
        }                                                                                     \
        cpu_store[KT](po + i * o->strides[o->rank - 2] * (int64_t)bp_dtype_size(o->dtype),    \
                      o->strides[o->rank - 1], g, R, o->dtype);                               \
      }                                                                                       \
    }                                                                                         \
    free(buf);                                                                                \
    return st;                                                                                \
  }
ATT_CDIST_MM(f32, float, CPU_KT_F32, BP_DTYPE_F32)
ATT_CDIST_MM(f64, double, CPU_KT_F64, BP_DTYPE_F64)

bp_status_t cpu_att_cdist(const bp_op_call_t* call) {
  const bp_cdist_attrs_t* a = call->attrs;
  dist_job_t j;
  memset(&j, 0, sizeof j);
  j.x1 = call->inputs[0];
  j.x2 = call->inputs[1];
  j.o = call->outputs[0];
  if (!a || j.x1->rank < 2 || j.x2->rank < 2 || j.o->rank < 2)
    return cpu_error(BP_INVALID_ARGUMENT, "cpu: cdist: operands need rank >= 2");
  att_batch_of(j.o, 2, &j.batch);
  j.P = j.x1->sizes[j.x1->rank - 2];
  j.R = j.x2->sizes[j.x2->rank - 2];
  j.M = j.x1->sizes[j.x1->rank - 1];
  j.p = a->p;
  if (j.x2->sizes[j.x2->rank - 1] != j.M || j.o->sizes[j.o->rank - 2] != j.P ||
      j.o->sizes[j.o->rank - 1] != j.R || !att_batch_fits(j.x1, 2, &j.batch, -1) ||
      !att_batch_fits(j.x2, 2, &j.batch, -1) || !(j.p >= 0))
    return cpu_error(BP_INVALID_ARGUMENT, "cpu: cdist: operand shapes or p do not match");
  if (j.batch.count == 0 || j.P == 0 || j.R == 0) return BP_OK;
  int mm = j.p == 2.0 && (a->compute_mode == 1 || (a->compute_mode == 0 && (j.P > 25 || j.R > 25)));
  if (mm) return j.o->dtype == BP_DTYPE_F64 ? cdist_mm_f64(&j) : cdist_mm_f32(&j);
  cpu_parallel_for(j.batch.count * j.P, 1 + 65536 / (j.R * (j.M + 1)), cdist_rows, &j);
  if (atomic_load(&j.failed)) return cpu_error(BP_RESOURCE_EXHAUSTED, "cpu: cdist: out of memory");
  return BP_OK;
}

/* pdist: item i computes the pairs (i, k > i), stored at
 * i * N - i * (i + 1) / 2 + (k - i - 1). */
static void pdist_rows(void* ctx, int64_t ib, int64_t ie) {
  dist_job_t* j = ctx;
  const int64_t N = j->P, M = j->M;
  double* buf = malloc(sizeof(double) * (size_t)(2 * M + N + 1));
  if (!buf) {
    atomic_store(&j->failed, 1);
    return;
  }
  double *a = buf, *b = a + M, *res = b + M;
  const bp_tensor_desc_t* o = j->o;
  for (int64_t i = ib; i < ie; i++) {
    att_load_row_f64(a, j->x1, 0, i, M);
    for (int64_t k = i + 1; k < N; k++) {
      att_load_row_f64(b, j->x1, 0, k, M);
      res[k - i - 1] = att_dist(a, b, M, j->p);
    }
    int64_t first = i * N - i * (i + 1) / 2;
    cpu_store[CPU_KT_F64](att_at(o, first * o->strides[0]), o->strides[0], res, N - i - 1,
                          o->dtype);
  }
  free(buf);
}

bp_status_t cpu_att_pdist(const bp_op_call_t* call) {
  const bp_cdist_attrs_t* a = call->attrs;
  dist_job_t j;
  memset(&j, 0, sizeof j);
  j.x1 = call->inputs[0];
  j.o = call->outputs[0];
  if (!a || j.x1->rank != 2 || j.o->rank != 1 || !(a->p >= 0))
    return cpu_error(BP_INVALID_ARGUMENT, "cpu: pdist: self must be 2-d, out 1-d, p >= 0");
  j.P = j.x1->sizes[0];
  j.M = j.x1->sizes[1];
  j.p = a->p;
  if (j.o->sizes[0] != (j.P > 1 ? j.P * (j.P - 1) / 2 : 0))
    return cpu_error(BP_INVALID_ARGUMENT, "cpu: pdist: output has %lld elements, expected N(N-1)/2",
                     (long long)j.o->sizes[0]);
  if (j.P < 2) return BP_OK;
  cpu_parallel_for(j.P - 1, 1 + 65536 / (j.P * (j.M + 1)), pdist_rows, &j);
  if (atomic_load(&j.failed)) return cpu_error(BP_RESOURCE_EXHAUSTED, "cpu: pdist: out of memory");
  return BP_OK;
}
