/* backplane CPU plugin: mm, bmm, addmm.
 *
 * f32 / f64 go to cblas_sgemm / cblas_dgemm when OpenBLAS is available
 * (transposed views are passed as transposes, other layouts are packed);
 * f16 / bf16 convert to f32 and use the f32 path; integers, and f32 / f64
 * without BLAS, use the cache-blocked kernel below (4-row register tile,
 * parallel over row blocks). addmm writes beta * self first and then
 * accumulates alpha * A @ B into the output (beta = 0 ignores self).
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cpu_kernels.h"

#ifdef BP_CPU_HAVE_CBLAS
#include <cblas.h>
#endif

/* A 2-d view: element (r, c) at base + (r * rs + c * cs) * es. */
typedef struct mat {
  unsigned char* base;
  int64_t rows, cols, rs, cs;
  uint32_t dtype;
} mat_t;

static mat_t mat_of(const bp_tensor_desc_t* d, int64_t batch, int batched) {
  mat_t m;
  int o = batched ? 1 : 0;
  m.dtype = d->dtype;
  m.rows = d->sizes[o];
  m.cols = d->sizes[o + 1];
  m.rs = d->strides[o];
  m.cs = d->strides[o + 1];
  m.base = cpu_desc_ptr(d) + (batched ? batch * d->strides[0] * (int64_t)bp_dtype_size(d->dtype) : 0);
  /* Strides of size-1 dims are irrelevant: pick ones that let BLAS read
   * the view in place. */
  if (m.cols <= 1) m.cs = (m.rs == 1 && m.rows > 1) ? m.rows : 1;
  if (m.rows <= 1) m.rs = m.cs == 1 ? (m.cols > 1 ? m.cols : 1) : 1;
  return m;
}

/* Copies m (cast) into a dense row-major buffer of dtype `dtype`. */
static bp_status_t pack(const mat_t* m, void* dst, uint32_t dtype) {
  bp_tensor_desc_t sd, dd;
  struct bpp_buffer_s sh, dh;
  int64_t sizes[2] = {m->rows, m->cols}, strides[2] = {m->rs, m->cs};
  cpu_desc_host(&sd, &sh, m->base, m->dtype, 2, sizes, strides);
  cpu_desc_host(&dd, &dh, dst, dtype, 2, sizes, NULL);
  return cpu_cast_copy(&dd, &sd);
}

/* Writes src (broadcast to m's shape, cast) into m. */
static bp_status_t fill_from(const mat_t* m, const bp_tensor_desc_t* src) {
  bp_tensor_desc_t dd;
  struct bpp_buffer_s dh;
  int64_t sizes[2] = {m->rows, m->cols}, strides[2] = {m->rs, m->cs};
  cpu_desc_host(&dd, &dh, m->base, m->dtype, 2, sizes, strides);
  return cpu_cast_copy(&dd, src);
}

/* ---- blocked C kernel ---------------------------------------------------
 * C[n x m] = beta * C + alpha * A[n x k] @ B[k x m], all dense row-major.
 * Rows of C are split over the pool in blocks of 4-row tiles; each tile
 * keeps 4 accumulator rows for a strip of NC columns while streaming K. */
#define GEMM_NC 256
#define GEMM_MR 4

#define CPU__GEMM(SFX, T, ACC)                                                           \
  typedef struct gemm_##SFX {                                                            \
    const T* a; const T* b; T* c;                                                        \
    int64_t n, m, k;                                                                     \
    ACC alpha, beta;                                                                     \
  } gemm_##SFX##_t;                                                                      \
  static void gemm_tiles_##SFX(void* ctx, int64_t tb, int64_t te) {                      \
    const gemm_##SFX##_t* g = ctx;                                                       \
    ACC acc[GEMM_MR][GEMM_NC];                                                           \
    for (int64_t t = tb; t < te; t++) {                                                  \
      int64_t i0 = t * GEMM_MR, mr = g->n - i0 < GEMM_MR ? g->n - i0 : GEMM_MR;          \
      for (int64_t j0 = 0; j0 < g->m; j0 += GEMM_NC) {                                   \
        int64_t nc = g->m - j0 < GEMM_NC ? g->m - j0 : GEMM_NC;                          \
        memset(acc, 0, sizeof acc);                                                      \
        for (int64_t p = 0; p < g->k; p++) {                                             \
          const T* restrict brow = g->b + p * g->m + j0;                                 \
          for (int64_t r = 0; r < mr; r++) {                                             \
            ACC av = (ACC)g->a[(i0 + r) * g->k + p];                                     \
            ACC* restrict cr = acc[r];                                                   \
            for (int64_t j = 0; j < nc; j++) cr[j] += av * (ACC)brow[j];                 \
          }                                                                              \
        }                                                                                \
        for (int64_t r = 0; r < mr; r++) {                                               \
          T* restrict crow = g->c + (i0 + r) * g->m + j0;                                \
          if (g->beta == 0)                                                              \
            for (int64_t j = 0; j < nc; j++) crow[j] = (T)(g->alpha * acc[r][j]);        \
          else                                                                           \
            for (int64_t j = 0; j < nc; j++)                                             \
              crow[j] = (T)(g->beta * (ACC)crow[j] + g->alpha * acc[r][j]);              \
        }                                                                                \
      }                                                                                  \
    }                                                                                    \
  }                                                                                      \
  static void gemm_run_##SFX(const void* a, const void* b, void* c, int64_t n, int64_t m, \
                             int64_t k, ACC alpha, ACC beta) {                           \
    gemm_##SFX##_t g = {a, b, c, n, m, k, alpha, beta};                                  \
    int64_t tiles = (n + GEMM_MR - 1) / GEMM_MR;                                         \
    int64_t work = m * k > 0 ? m * k : 1;                                                \
    int64_t grain = 65536 / work > 0 ? 65536 / work : 1;                                 \
    cpu_parallel_for(tiles, grain, gemm_tiles_##SFX, &g);                                \
  }
/* X(suffix, element type, accumulator type, dtype) */
#define CPU_GEMM_FLOAT_TYPES(X) X(f32, float, float, BP_DTYPE_F32) X(f64, double, double, BP_DTYPE_F64)
#define CPU_GEMM_INT_TYPES(X)                                                     \
  X(i8, int8_t, int64_t, BP_DTYPE_I8) X(u8, uint8_t, int64_t, BP_DTYPE_U8)        \
  X(i16, int16_t, int64_t, BP_DTYPE_I16) X(i32, int32_t, int64_t, BP_DTYPE_I32)   \
  X(i64, int64_t, int64_t, BP_DTYPE_I64)
#define CPU__GEMM_GEN(SFX, T, ACC, D) CPU__GEMM(SFX, T, ACC)
CPU_GEMM_INT_TYPES(CPU__GEMM_GEN)
#ifndef BP_CPU_HAVE_CBLAS
CPU_GEMM_FLOAT_TYPES(CPU__GEMM_GEN)
#endif

/* Dense row-major C = beta*C + alpha*A@B in `dtype` (f32, f64 or an integer). */
static void gemm_dense(uint32_t dtype, const void* a, const void* b, void* c, int64_t n, int64_t m,
                       int64_t k, const bp_scalar_t* alpha, const bp_scalar_t* beta_or_null) {
  double af = cpu_scalar_f64(alpha, 1), bf = beta_or_null ? cpu_scalar_f64(beta_or_null, 1) : 0;
  int64_t ai = cpu_scalar_i64(alpha, 1), bi = beta_or_null ? cpu_scalar_i64(beta_or_null, 1) : 0;
  switch (dtype) {
#ifdef BP_CPU_HAVE_CBLAS
    case BP_DTYPE_F32:
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)n, (int)m, (int)k, (float)af, a,
                  (int)k, b, (int)m, (float)bf, c, (int)m);
      return;
    case BP_DTYPE_F64:
      cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)n, (int)m, (int)k, af, a, (int)k,
                  b, (int)m, bf, c, (int)m);
      return;
#else
    case BP_DTYPE_F32: gemm_run_f32(a, b, c, n, m, k, (float)af, (float)bf); return;
    case BP_DTYPE_F64: gemm_run_f64(a, b, c, n, m, k, af, bf); return;
#endif
#define CPU__GEMM_INT_CASE(SFX, T, ACC, D) \
  case D: gemm_run_##SFX(a, b, c, n, m, k, (ACC)ai, (ACC)bi); return;
    CPU_GEMM_INT_TYPES(CPU__GEMM_INT_CASE)
    default: return;
  }
}

#ifdef BP_CPU_HAVE_CBLAS
/* Order and transposition that let BLAS read m in place, or 0. */
static int blas_layout(const mat_t* m, int col_major, int* trans, int* ld) {
  int64_t r = m->rows > 1 ? m->rows : 1, c = m->cols > 1 ? m->cols : 1;
  int64_t rs = m->rs, cs = m->cs;
  if (col_major) { /* a column-major view of m is the row-major view of m^T */
    int64_t t = rs; rs = cs; cs = t;
    t = r; r = c; c = t;
  }
  if (cs == 1 && rs >= c && rs <= INT32_MAX) { *trans = 0; *ld = (int)rs; return 1; }
  if (rs == 1 && cs >= r && cs <= INT32_MAX) { *trans = 1; *ld = (int)cs; return 1; }
  return 0;
}

/* C = alpha * A @ B + beta * C for f32/f64 views, in place when BLAS can
 * address every operand, else through packed copies. */
static bp_status_t blas_gemm(const mat_t* A, const mat_t* B, const mat_t* C, double alpha,
                             double beta) {
  bp_status_t st = BP_OK;
  int f64 = C->dtype == BP_DTYPE_F64;
  size_t es = f64 ? 8 : 4;
  void *pa = NULL, *pb = NULL, *pc = NULL;
  int ta = 0, tb = 0, lda = 1, ldb = 1, tc = 0, ldc = 1, col = 0;
  if (!blas_layout(C, 0, &tc, &ldc) || tc) {
    col = 1;
    if (!blas_layout(C, 1, &tc, &ldc) || tc) col = -1; /* C needs a temporary */
  }
  int order_col = col == 1;
  mat_t a = *A, b = *B, c = *C;
  if (col == -1) {
    pc = malloc((size_t)(C->rows * C->cols) * es);
    if (!pc) goto oom;
    if (beta != 0 && (st = pack(C, pc, C->dtype))) goto cleanup;
    c.base = pc; c.rs = C->cols; c.cs = 1;
    ldc = (int)(C->cols > 1 ? C->cols : 1);
  }
  if (!blas_layout(&a, order_col, &ta, &lda)) {
    if (!(pa = malloc((size_t)(A->rows * A->cols) * es))) goto oom;
    if ((st = pack(A, pa, A->dtype))) goto cleanup;
    a.base = pa; a.rs = A->cols > 1 ? A->cols : 1; a.cs = 1;
    blas_layout(&a, order_col, &ta, &lda);
  }
  if (!blas_layout(&b, order_col, &tb, &ldb)) {
    if (!(pb = malloc((size_t)(B->rows * B->cols) * es))) goto oom;
    if ((st = pack(B, pb, B->dtype))) goto cleanup;
    b.base = pb; b.rs = B->cols > 1 ? B->cols : 1; b.cs = 1;
    blas_layout(&b, order_col, &tb, &ldb);
  }
  {
    enum CBLAS_ORDER o = order_col ? CblasColMajor : CblasRowMajor;
    enum CBLAS_TRANSPOSE xa = ta ? CblasTrans : CblasNoTrans, xb = tb ? CblasTrans : CblasNoTrans;
    int n = (int)A->rows, m = (int)B->cols, k = (int)A->cols;
    if (f64)
      cblas_dgemm(o, xa, xb, n, m, k, alpha, (const double*)a.base, lda, (const double*)b.base, ldb,
                  beta, (double*)c.base, ldc);
    else
      cblas_sgemm(o, xa, xb, n, m, k, (float)alpha, (const float*)a.base, lda, (const float*)b.base,
                  ldb, (float)beta, (float*)c.base, ldc);
  }
  if (pc) {
    bp_tensor_desc_t sd;
    struct bpp_buffer_s sh;
    int64_t sizes[2] = {C->rows, C->cols};
    cpu_desc_host(&sd, &sh, pc, C->dtype, 2, sizes, NULL);
    st = fill_from(C, &sd);
  }
  goto cleanup;
oom:
  st = cpu_error(BP_RESOURCE_EXHAUSTED, "cpu: matmul: cannot allocate packing buffers");
cleanup:
  free(pa);
  free(pb);
  free(pc);
  return st;
}
#endif

/* One matrix product into C, with C already holding beta * self when
 * has_beta (else C's contents are ignored). */
static bp_status_t mm_one(const mat_t* A, const mat_t* B, const mat_t* C, const bp_scalar_t* alpha,
                          int has_beta) {
  bp_status_t st = BP_OK;
  int64_t n = A->rows, k = A->cols, m = B->cols;
  if (n == 0 || m == 0) return BP_OK;
  static const bp_scalar_t one = {.kind = BP_SCALAR_INT, .v.i = 1};
  if (k == 0) { /* empty sum: C = beta * self (already there) or 0 */
    if (has_beta) return BP_OK;
    bp_tensor_desc_t zd;
    struct bpp_buffer_s zh;
    int64_t zero = 0;
    int64_t sz[1] = {1};
    cpu_desc_host(&zd, &zh, &zero, BP_DTYPE_I64, 0, sz, NULL);
    return fill_from(C, &zd);
  }
  if (n > INT32_MAX || m > INT32_MAX || k > INT32_MAX)
    return cpu_error(BP_INVALID_ARGUMENT, "cpu: matmul: dimension over 2^31");
#ifdef BP_CPU_HAVE_CBLAS
  if (C->dtype == BP_DTYPE_F32 || C->dtype == BP_DTYPE_F64)
    return blas_gemm(A, B, C, cpu_scalar_f64(alpha, 1), has_beta ? 1.0 : 0.0);
#endif
  /* Dense row-major path in the compute dtype (f16/bf16 compute in f32). */
  uint32_t cdt = bp_dtype_is_float(C->dtype) && C->dtype != BP_DTYPE_F64 ? BP_DTYPE_F32 : C->dtype;
  size_t es = bp_dtype_size(cdt);
  void* pa = malloc((size_t)(n * k) * es);
  void* pb = malloc((size_t)(k * m) * es);
  void* pc = malloc((size_t)(n * m) * es);
  if (!pa || !pb || !pc) {
    st = cpu_error(BP_RESOURCE_EXHAUSTED, "cpu: matmul: cannot allocate %lld bytes of packing buffers",
                   (long long)((n * k + k * m + n * m) * (int64_t)es));
    goto cleanup;
  }
  if ((st = pack(A, pa, cdt)) || (st = pack(B, pb, cdt))) goto cleanup;
  if (has_beta && (st = pack(C, pc, cdt))) goto cleanup;
  gemm_dense(cdt, pa, pb, pc, n, m, k, alpha, has_beta ? &one : NULL);
  {
    bp_tensor_desc_t sd;
    struct bpp_buffer_s sh;
    int64_t sizes[2] = {n, m};
    cpu_desc_host(&sd, &sh, pc, cdt, 2, sizes, NULL);
    st = fill_from(C, &sd);
  }
cleanup:
  free(pa);
  free(pb);
  free(pc);
  return st;
}

bp_status_t cpu_exec_matmul(const bp_op_call_t* call) {
  uint32_t op = call->op_id;
  const char* name = cpu_op_name(op);
  const bp_tensor_desc_t* out = &call->outputs[0];
  const bp_tensor_desc_t* a = &call->inputs[op == BP_OP_addmm ? 1 : 0];
  const bp_tensor_desc_t* b = &call->inputs[op == BP_OP_addmm ? 2 : 1];
  int batched = op == BP_OP_bmm;
  uint32_t r = batched ? 3 : 2;
  if (a->rank != r || b->rank != r || out->rank != r)
    return cpu_error(BP_INVALID_ARGUMENT, "cpu: %s: ranks %u, %u -> %u, expected %u", name, a->rank,
                     b->rank, out->rank, r);
  if (a->dtype != out->dtype || b->dtype != out->dtype ||
      (op == BP_OP_addmm && call->inputs[0].dtype != out->dtype))
    return cpu_error(BP_INVALID_ARGUMENT, "cpu: %s: operands must share one dtype", name);
  if (out->dtype == BP_DTYPE_BOOL || bp_dtype_is_fp8(out->dtype) || out->dtype == BP_DTYPE_C64)
    return cpu_error(BP_UNIMPLEMENTED, "cpu: %s: %s is not supported", name, bp_dtype_name(out->dtype));
  int o = batched ? 1 : 0;
  if ((batched && (a->sizes[0] != b->sizes[0] || a->sizes[0] != out->sizes[0])) ||
      a->sizes[o + 1] != b->sizes[o] || out->sizes[o] != a->sizes[o] || out->sizes[o + 1] != b->sizes[o + 1])
    return cpu_error(BP_INVALID_ARGUMENT, "cpu: %s: shapes do not match", name);
  bp_scalar_t alpha = {.kind = BP_SCALAR_INT, .v.i = 1};
  int has_beta = 0;
  if (op == BP_OP_addmm) {
    const bp_addmm_attrs_t* at = call->attrs;
    if (at->alpha.kind != BP_SCALAR_NONE) alpha = at->alpha;
    double beta = cpu_scalar_f64(&at->beta, 1.0);
    if (beta != 0) {
      /* out = beta * self (broadcast), computed through the elementwise path. */
      mat_t c = mat_of(out, 0, 0);
      bp_status_t st = fill_from(&c, &call->inputs[0]);
      if (st) return st;
      if (beta != 1) {
        bp_binary_attrs_t ma = {.struct_size = sizeof ma, .flags = BP_BINARY_OTHER_IS_SCALAR,
                                .scalar = at->beta};
        bp_tensor_desc_t ins[2] = {*out, *out};
        ins[1].dtype = BP_DTYPE_INVALID;
        ins[1].buffer = NULL;
        bp_op_call_t mc = {.struct_size = sizeof mc, .op_id = BP_OP_mul, .num_inputs = 2,
                           .num_outputs = 1, .compute_dtype = out->dtype, .inputs = ins,
                           .outputs = out, .attrs = &ma};
        if ((st = cpu_exec_elementwise(&mc))) return st;
      }
      has_beta = 1;
    }
  }
  int64_t nb = batched ? out->sizes[0] : 1;
  for (int64_t i = 0; i < nb; i++) {
    mat_t A = mat_of(a, i, batched), B = mat_of(b, i, batched), C = mat_of(out, i, batched);
    bp_status_t st = mm_one(&A, &B, &C, &alpha, has_beta);
    if (st) return st;
  }
  return BP_OK;
}
