/* GEMM through cuBLASLt: mm, bmm, addmm and linear (bias and relu / gelu
 * epilogues), f32 / f16 / bf16 / f64.
 *
 * backplane's tensors are row-major views; cuBLASLt is column-major. A
 * row-major D[n,m] = A[n,k] B[k,m] is the column-major D^T = B^T A^T, so
 * cuBLASLt's first operand is B's memory and its second A's, with no copy:
 * an operand whose column stride is 1 is a column-major matrix of its
 * transpose (op N), one whose row stride is 1 a column-major matrix as is
 * (op T). The output must have column stride 1. f32 computes in fp32
 * (CUBLAS_COMPUTE_32F, no TF32: the conformance bound is fp32's), f16 and
 * bf16 accumulate in fp32 and round once, f64 in fp64.
 * Threading: the handle is per device (cuBLASLt handles are thread-safe);
 * the workspace is per stream (streams are externally synchronized).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuda_blas.h"

#define CUDA_GEMM_WORKSPACE (32u << 20) /* cuBLASLt's advice for Hopper */

#define BP_CUBLASLT_SYM(name) {#name, offsetof(cublaslt_symbols_t, name), 1},
static const bp_kit_symbol_t k_lt_symbols[] = {CUBLASLT_SYMBOLS(BP_CUBLASLT_SYM)};

void cuda_blas_open(bpp_instance_t inst) {
  const char* env = getenv("BP_CUBLASLT_PATH");
  const char* names[2] = {"libcublasLt.so.13", "libcublasLt.so.12"};
  uint32_t count = 2;
  if (env && *env) names[0] = env, count = 1;
  struct cuda_blas* b = calloc(1, sizeof *b);
  char msg[256];
  if (!b) {
    snprintf(inst->blas_reason, sizeof inst->blas_reason, "no cuBLASLt (out of host memory)");
    return;
  }
  if (bp_kit_library_open(names, count, &b->lib, msg, sizeof msg) != BP_OK) {
    snprintf(inst->blas_reason, sizeof inst->blas_reason, "no cuBLASLt (%s)", msg);
    free(b);
    return;
  }
  if (bp_kit_symbols_load(&b->lt, k_lt_symbols, BP_KIT_COUNT(k_lt_symbols), bp_kit_dlsym, b->lib,
                          names[0], msg, sizeof msg) != BP_OK) {
    snprintf(inst->blas_reason, sizeof inst->blas_reason, "no cuBLASLt (%s)", msg);
    bp_kit_library_close(b->lib);
    free(b);
    return;
  }
  b->version = b->lt.cublasLtGetVersion();
  inst->blas = b;
}

void cuda_blas_close(bpp_instance_t inst) {
  if (!inst->blas) return;
  bp_kit_library_close(inst->blas->lib);
  free(inst->blas);
  inst->blas = NULL;
}

bp_status_t cuda_blas_device_open(bpp_device_t d) {
  if (!d->inst->blas) return BP_OK;
  cublasLtHandle_t h = NULL;
  if (d->inst->blas->lt.cublasLtCreate(&h) != CUBLAS_STATUS_SUCCESS) {
    bp_kit_log(BP_LOG_WARN, "cuda: cublasLtCreate failed on device %u: no GEMM there", d->index);
    return BP_OK;
  }
  d->lt = h;
  return BP_OK;
}

void cuda_blas_device_close(bpp_device_t d) {
  if (d->lt) d->inst->blas->lt.cublasLtDestroy((cublasLtHandle_t)d->lt);
  d->lt = NULL;
}

void cuda_blas_stream_release(bpp_stream_t s) {
  if (s->gemm_ws) s->dev->cu->cuMemFree_v2(s->gemm_ws);
  s->gemm_ws = 0;
}

static const char* lt_status_name(cublasStatus_t st) {
  switch (st) {
    case CUBLAS_STATUS_NOT_INITIALIZED: return "CUBLAS_STATUS_NOT_INITIALIZED";
    case CUBLAS_STATUS_ALLOC_FAILED: return "CUBLAS_STATUS_ALLOC_FAILED";
    case CUBLAS_STATUS_INVALID_VALUE: return "CUBLAS_STATUS_INVALID_VALUE";
    case CUBLAS_STATUS_ARCH_MISMATCH: return "CUBLAS_STATUS_ARCH_MISMATCH";
    case CUBLAS_STATUS_EXECUTION_FAILED: return "CUBLAS_STATUS_EXECUTION_FAILED";
    case CUBLAS_STATUS_NOT_SUPPORTED: return "CUBLAS_STATUS_NOT_SUPPORTED";
    default: return "CUBLAS_STATUS_INTERNAL_ERROR";
  }
}

static bp_status_t lt_fail(cublasStatus_t st, const char* what) {
  bp_status_t s = st == CUBLAS_STATUS_NOT_SUPPORTED || st == CUBLAS_STATUS_ARCH_MISMATCH
                      ? BP_UNIMPLEMENTED
                  : st == CUBLAS_STATUS_INVALID_VALUE ? BP_INVALID_ARGUMENT
                  : st == CUBLAS_STATUS_ALLOC_FAILED  ? BP_RESOURCE_EXHAUSTED
                  : st == CUBLAS_STATUS_NOT_INITIALIZED ? BP_UNAVAILABLE
                                                        : BP_INTERNAL;
  return bp_kit_error(s, "cuda: %s: %s (%d)", what, lt_status_name(st), (int)st);
}

/* ---- the problem ------------------------------------------------------------ */
/* One operand as a column-major cuBLASLt matrix (see the top comment). */
typedef struct lt_mat {
  uint64_t rows, cols; /* of the stored column-major matrix */
  int64_t ld;
  int trans;           /* cublasOperation_t to apply */
  int64_t batch_stride; /* elements */
  uint64_t byte_offset;
  bpp_buffer_t buffer;
} lt_mat_t;

typedef struct gemm {
  uint32_t dtype;
  uint64_t n, m, k, batch;
  lt_mat_t a, b, c, d; /* cuBLASLt's A (= our B), B (= our A), C, D */
  int has_c;           /* addmm with a full self */
  const bp_tensor_desc_t* bias; /* a vector of m (linear's bias, addmm's broadcast self) */
  uint32_t epilogue;   /* cublasLtEpilogue_t */
  double alpha, beta;
} gemm_t;

/* The stored matrix of a row-major logical r x c operand with strides
 * (sr, sc), as cuBLASLt's operand for the product's column-major form:
 * row-major storage gives its transpose as is (op N), column-major
 * storage gives it transposed (op T). 0 when neither stride is 1. */
static int lt_view(int64_t r, int64_t c, int64_t sr, int64_t sc, lt_mat_t* out) {
  if (c <= 1) sc = 1;
  if (r <= 1) sr = c > 1 ? c : 1;
  if (sc == 1 && sr >= (c > 1 ? c : 1)) {
    *out = (lt_mat_t){.rows = (uint64_t)c, .cols = (uint64_t)r, .ld = sr, .trans = CUBLAS_OP_N};
    return 1;
  }
  if (sr == 1 && sc >= (r > 1 ? r : 1)) {
    *out = (lt_mat_t){.rows = (uint64_t)r, .cols = (uint64_t)c, .ld = sc, .trans = CUBLAS_OP_T};
    return 1;
  }
  return 0;
}

/* Leading dims [0, upto) of `t` merge into one of size *rows with stride
 * *stride (row-major nesting); 0 if they do not. */
static int merge_rows(const bp_tensor_desc_t* t, uint32_t upto, int64_t* rows, int64_t* stride) {
  int64_t n = 1, st = 0;
  for (uint32_t i = 0; i < upto; ++i) n *= t->sizes[i];
  *rows = n;
  if (upto == 0) return *stride = 0, 1;
  st = t->strides[upto - 1];
  for (uint32_t i = upto - 1; i > 0; --i)
    if (t->sizes[i - 1] > 1 && t->strides[i - 1] != t->strides[i] * t->sizes[i]) return 0;
  *stride = st;
  return 1;
}

static double scalar_or(const bp_scalar_t* s, double dflt) {
  if (s->kind == BP_SCALAR_FLOAT) return s->v.f;
  if (s->kind == BP_SCALAR_INT) return (double)s->v.i;
  if (s->kind == BP_SCALAR_BOOL) return (double)s->v.b;
  return dflt;
}

#define WHY(reason, ...) (snprintf(why, cap, __VA_ARGS__), (reason))

/* Fills `g` from the call; BP_SUPPORT_OK or a reason with `why`. */
static uint32_t gemm_plan(bpp_device_t dev, const bp_op_call_t* call, gemm_t* g, char* why,
                          size_t cap) {
  memset(g, 0, sizeof *g);
  uint32_t op = call->op_id;
  if (op != BP_OP_mm && op != BP_OP_bmm && op != BP_OP_addmm && op != BP_OP_linear)
    return WHY(BP_SUPPORT_OP, "cuda: %s: no CUDA kernel for it yet", bp_kit_op_name(op));
  if (!dev->inst->blas) return WHY(BP_SUPPORT_OP, "cuda: %s", dev->inst->blas_reason);
  if (!dev->lt) return WHY(BP_SUPPORT_DEVICE, "cuda: cublasLtCreate failed on this device");
  const bp_tensor_desc_t* out = call->outputs[0];
  const bp_tensor_desc_t *x = call->inputs[op == BP_OP_addmm ? 1 : 0],
                         *w = call->inputs[op == BP_OP_addmm ? 2 : 1];
  g->dtype = out->dtype;
  if (g->dtype != BP_DTYPE_F32 && g->dtype != BP_DTYPE_F16 && g->dtype != BP_DTYPE_BF16 &&
      g->dtype != BP_DTYPE_F64)
    return WHY(BP_SUPPORT_DTYPE, "cuda: cuBLASLt GEMM takes f32, f16, bf16 and f64, not %s",
               bp_dtype_name(g->dtype));
  if (x->dtype != g->dtype || w->dtype != g->dtype)
    return WHY(BP_SUPPORT_DTYPE, "cuda: operands of one dtype only");
  g->alpha = 1.0;
  g->beta = 0.0;
  g->batch = 1;
  int64_t xr, xs, or_, os;
  lt_mat_t xa, wb, dd;
  if (op == BP_OP_linear) {
    if (x->rank < 1 || w->rank != 2 || out->rank != x->rank)
      return WHY(BP_SUPPORT_RANK, "cuda: linear: input [.., K], weight [N, K]");
    uint32_t xl = x->rank - 1;
    if (!merge_rows(x, xl, &xr, &xs) || !merge_rows(out, xl, &or_, &os))
      return WHY(BP_SUPPORT_LAYOUT, "cuda: linear: leading dims do not merge into rows");
    g->n = (uint64_t)xr;
    g->k = (uint64_t)x->sizes[xl];
    g->m = (uint64_t)w->sizes[0];
    if (!lt_view(xr, x->sizes[xl], xs, x->strides[xl], &xa) ||
        /* weight^T: [K, N] with strides swapped */
        !lt_view(w->sizes[1], w->sizes[0], w->strides[1], w->strides[0], &wb) ||
        !lt_view(or_, out->sizes[xl], os, out->strides[xl], &dd))
      return WHY(BP_SUPPORT_LAYOUT, "cuda: linear: an operand has no unit stride");
    const bp_linear_attrs_t* la = call->attrs;
    uint32_t act = la ? la->activation : BP_ACTIVATION_NONE;
    const bp_tensor_desc_t* bias = call->inputs[2];
    int has_bias = bias && bias->dtype != BP_DTYPE_INVALID;
    if (has_bias) {
      if (bias->dtype != g->dtype) return WHY(BP_SUPPORT_DTYPE, "cuda: linear: bias dtype");
      for (uint32_t i = 0; i + 1 < bias->rank; ++i)
        if (bias->sizes[i] > 1 && bias->strides[i] != 0)
          return WHY(BP_SUPPORT_LAYOUT, "cuda: linear: a bias that varies over rows (cuBLASLt's "
                                        "bias is one vector of N)");
      if (bias->rank == 0 || (uint64_t)bias->sizes[bias->rank - 1] != g->m ||
          (g->m > 1 && bias->strides[bias->rank - 1] != 1))
        return WHY(BP_SUPPORT_LAYOUT, "cuda: linear: the bias must be a dense vector of N");
      g->bias = bias;
    }
    switch (act) {
      case BP_ACTIVATION_NONE: g->epilogue = has_bias ? CUBLASLT_EPILOGUE_BIAS : CUBLASLT_EPILOGUE_DEFAULT; break;
      case BP_ACTIVATION_RELU: g->epilogue = has_bias ? CUBLASLT_EPILOGUE_RELU_BIAS : CUBLASLT_EPILOGUE_RELU; break;
      case BP_ACTIVATION_GELU_TANH: g->epilogue = has_bias ? CUBLASLT_EPILOGUE_GELU_BIAS : CUBLASLT_EPILOGUE_GELU; break;
      default:
        return WHY(BP_SUPPORT_ATTRIBUTE,
                   "cuda: linear: cuBLASLt has epilogues for relu and tanh-gelu only");
    }
  } else {
    uint32_t r = op == BP_OP_bmm ? 3 : 2, o = r - 2;
    if (x->rank != r || w->rank != r || out->rank != r)
      return WHY(BP_SUPPORT_RANK, "cuda: %s: rank %u operands", bp_kit_op_name(op), r);
    g->n = (uint64_t)x->sizes[o];
    g->k = (uint64_t)x->sizes[o + 1];
    g->m = (uint64_t)w->sizes[o + 1];
    if (!lt_view(x->sizes[o], x->sizes[o + 1], x->strides[o], x->strides[o + 1], &xa) ||
        !lt_view(w->sizes[o], w->sizes[o + 1], w->strides[o], w->strides[o + 1], &wb) ||
        !lt_view(out->sizes[o], out->sizes[o + 1], out->strides[o], out->strides[o + 1], &dd))
      return WHY(BP_SUPPORT_LAYOUT, "cuda: %s: an operand has no unit stride",
                 bp_kit_op_name(op));
    if (op == BP_OP_bmm) {
      g->batch = (uint64_t)x->sizes[0];
      xa.batch_stride = x->strides[0];
      wb.batch_stride = w->strides[0];
      dd.batch_stride = out->strides[0];
    }
    g->epilogue = CUBLASLT_EPILOGUE_DEFAULT;
    if (op == BP_OP_addmm) {
      const bp_addmm_attrs_t* aa = call->attrs;
      g->alpha = aa ? scalar_or(&aa->alpha, 1.0) : 1.0;
      g->beta = aa ? scalar_or(&aa->beta, 1.0) : 1.0;
      const bp_tensor_desc_t* self = call->inputs[0];
      if (self->dtype != g->dtype) return WHY(BP_SUPPORT_DTYPE, "cuda: addmm: self dtype");
      int64_t s_r = self->rank == 2 ? self->sizes[0] : 1;
      int64_t s_c = self->rank >= 1 ? self->sizes[self->rank - 1] : 1;
      int64_t s_sr = self->rank == 2 ? self->strides[0] : 0;
      int64_t s_sc = self->rank >= 1 ? self->strides[self->rank - 1] : 0;
      /* A row of m (broadcast over the n rows) or a full [n, m]. */
      int row_ok = self->rank >= 1 && (uint64_t)s_c == g->m && (s_c <= 1 || s_sc == 1);
      int bcast = s_r == 1 || s_sr == 0;
      int full = (uint64_t)s_r == g->n && s_sr != 0;
      if (g->beta == 0.0) {
        /* self is not read */
      } else if (!row_ok || (!bcast && !full)) {
        return WHY(BP_SUPPORT_LAYOUT, "cuda: addmm: self must be [n, m] or a row of m");
      } else if (bcast && g->n > 1) {
        if (g->beta != 1.0)
          return WHY(BP_SUPPORT_ATTRIBUTE, "cuda: addmm: a broadcast self needs beta = 1 "
                                           "(cuBLASLt's bias epilogue)");
        g->bias = self;
        g->epilogue = CUBLASLT_EPILOGUE_BIAS;
        g->beta = 0.0;
      } else {
        if (!lt_view(s_r, s_c, s_sr, s_sc, &g->c) || g->c.trans != CUBLAS_OP_N)
          return WHY(BP_SUPPORT_LAYOUT, "cuda: addmm: self needs a unit column stride");
        g->c.buffer = self->buffer;
        g->c.byte_offset = self->byte_offset;
        g->has_c = 1;
      }
    }
  }
  if (dd.trans != CUBLAS_OP_N)
    return WHY(BP_SUPPORT_LAYOUT, "cuda: the output needs a unit column stride");
  if (g->k == 0 && g->n * g->m * g->batch != 0)
    return WHY(BP_SUPPORT_SIZE, "cuda: an empty inner dimension (k = 0) is not run by cuBLASLt");
  /* cuBLASLt's A is our B (w), its B our A (x). */
  g->a = wb;
  g->a.buffer = w->buffer;
  g->a.byte_offset = w->byte_offset;
  g->b = xa;
  g->b.buffer = x->buffer;
  g->b.byte_offset = x->byte_offset;
  g->d = dd;
  g->d.buffer = out->buffer;
  g->d.byte_offset = out->byte_offset;
  return BP_SUPPORT_OK;
}

uint32_t cuda_gemm_support(bpp_device_t dev, const bp_op_call_t* call, char* why, size_t cap) {
  gemm_t g;
  why[0] = 0;
  return gemm_plan(dev, call, &g, why, cap);
}

/* ---- the launch ---------------------------------------------------------------- */
static cudaDataType lt_type(uint32_t dtype) {
  switch (dtype) {
    case BP_DTYPE_F16: return CUDA_R_16F;
    case BP_DTYPE_BF16: return CUDA_R_16BF;
    case BP_DTYPE_F64: return CUDA_R_64F;
    default: return CUDA_R_32F;
  }
}

static uint32_t align_of(CUdeviceptr p) {
  uint32_t a = 256;
  while (a > 1 && p % a) a /= 2;
  return a;
}

typedef struct lt_call {
  cublasLtMatmulDesc_t op;
  cublasLtMatrixLayout_t l[4];
  cublasLtMatmulPreference_t pref;
} lt_call_t;

static void lt_call_free(const cublaslt_symbols_t* lt, lt_call_t* c) {
  if (c->pref) lt->cublasLtMatmulPreferenceDestroy(c->pref);
  for (int i = 0; i < 4; ++i)
    if (c->l[i]) lt->cublasLtMatrixLayoutDestroy(c->l[i]);
  if (c->op) lt->cublasLtMatmulDescDestroy(c->op);
}

static cublasStatus_t layout(const cublaslt_symbols_t* lt, cudaDataType t, const lt_mat_t* m,
                             uint64_t batch, cublasLtMatrixLayout_t* out) {
  cublasStatus_t st = lt->cublasLtMatrixLayoutCreate(out, t, m->rows, m->cols, m->ld);
  if (st == CUBLAS_STATUS_SUCCESS && batch > 1) {
    int32_t count = (int32_t)batch;
    int64_t stride = m->batch_stride;
    st = lt->cublasLtMatrixLayoutSetAttribute(*out, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &count,
                                              sizeof count);
    if (st == CUBLAS_STATUS_SUCCESS)
      st = lt->cublasLtMatrixLayoutSetAttribute(*out, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET,
                                                &stride, sizeof stride);
  }
  return st;
}

static CUdeviceptr addr(const lt_mat_t* m) { return m->buffer->ptr + m->byte_offset; }

bp_status_t cuda_gemm_launch(bpp_stream_t s, const bp_op_call_t* call) {
  bpp_device_t d = s->dev;
  gemm_t g;
  char why[256];
  if (gemm_plan(d, call, &g, why, sizeof why) != BP_SUPPORT_OK)
    return bp_kit_error(BP_UNIMPLEMENTED, "%s", why);
  if (g.n == 0 || g.m == 0 || g.batch == 0) return BP_OK;
  bp_status_t st = cuda_device_check_alive(d);
  if (st != BP_OK || (st = cuda_ctx_push(d)) != BP_OK) return st;
  const cublaslt_symbols_t* lt = &d->inst->blas->lt;
  if (!s->gemm_ws) {
    size_t want = CUDA_GEMM_WORKSPACE;
    if (d->total_mem && want > d->total_mem / 16) want = (size_t)(d->total_mem / 16);
    CUresult r = d->cu->cuMemAlloc_v2(&s->gemm_ws, want);
    if (r != CUDA_SUCCESS) {
      s->gemm_ws = 0;
      cuda_ctx_pop(d);
      return cuda_fail(d, r, "GEMM workspace");
    }
    s->gemm_ws_size = want;
  }
  cudaDataType t = lt_type(g.dtype);
  int f64 = g.dtype == BP_DTYPE_F64;
  lt_call_t c = {0};
  cublasStatus_t ls = lt->cublasLtMatmulDescCreate(&c.op, f64 ? CUBLAS_COMPUTE_64F : CUBLAS_COMPUTE_32F,
                                                   f64 ? CUDA_R_64F : CUDA_R_32F);
  int32_t ta = g.a.trans, tb = g.b.trans, epi = (int32_t)g.epilogue;
  if (ls == CUBLAS_STATUS_SUCCESS)
    ls = lt->cublasLtMatmulDescSetAttribute(c.op, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof ta);
  if (ls == CUBLAS_STATUS_SUCCESS)
    ls = lt->cublasLtMatmulDescSetAttribute(c.op, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof tb);
  if (ls == CUBLAS_STATUS_SUCCESS)
    ls = lt->cublasLtMatmulDescSetAttribute(c.op, CUBLASLT_MATMUL_DESC_EPILOGUE, &epi, sizeof epi);
  CUdeviceptr bias = g.bias ? g.bias->buffer->ptr + g.bias->byte_offset : 0;
  if (ls == CUBLAS_STATUS_SUCCESS && g.bias) {
    const void* bp = (const void*)(uintptr_t)bias;
    ls = lt->cublasLtMatmulDescSetAttribute(c.op, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bp, sizeof bp);
  }
  /* C: self for addmm, else D (never read with beta = 0). */
  lt_mat_t cm = g.has_c ? g.c : g.d;
  cm.batch_stride = g.d.batch_stride;
  if (ls == CUBLAS_STATUS_SUCCESS) ls = layout(lt, t, &g.a, g.batch, &c.l[0]);
  if (ls == CUBLAS_STATUS_SUCCESS) ls = layout(lt, t, &g.b, g.batch, &c.l[1]);
  if (ls == CUBLAS_STATUS_SUCCESS) ls = layout(lt, t, &cm, g.batch, &c.l[2]);
  if (ls == CUBLAS_STATUS_SUCCESS) ls = layout(lt, t, &g.d, g.batch, &c.l[3]);
  uint64_t ws = s->gemm_ws_size;
  uint32_t al[4] = {align_of(addr(&g.a)), align_of(addr(&g.b)), align_of(addr(&cm)),
                    align_of(addr(&g.d))};
  if (ls == CUBLAS_STATUS_SUCCESS) ls = lt->cublasLtMatmulPreferenceCreate(&c.pref);
  if (ls == CUBLAS_STATUS_SUCCESS)
    ls = lt->cublasLtMatmulPreferenceSetAttribute(c.pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                                                  &ws, sizeof ws);
  for (int i = 0; i < 4 && ls == CUBLAS_STATUS_SUCCESS; ++i)
    ls = lt->cublasLtMatmulPreferenceSetAttribute(
        c.pref, (cublasLtMatmulPreferenceAttributes_t)(CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES + i),
        &al[i], sizeof al[i]);
  cublasLtMatmulHeuristicResult_t heur;
  int found = 0;
  if (ls == CUBLAS_STATUS_SUCCESS)
    ls = lt->cublasLtMatmulAlgoGetHeuristic((cublasLtHandle_t)d->lt, c.op, c.l[0], c.l[1], c.l[2],
                                            c.l[3], c.pref, 1, &heur, &found);
  if (ls == CUBLAS_STATUS_SUCCESS && found == 0) ls = CUBLAS_STATUS_NOT_SUPPORTED;
  if (ls == CUBLAS_STATUS_SUCCESS) {
    float af = (float)g.alpha, bf = (float)g.beta;
    const void* alpha = f64 ? (const void*)&g.alpha : (const void*)&af;
    const void* beta = f64 ? (const void*)&g.beta : (const void*)&bf;
    ls = lt->cublasLtMatmul((cublasLtHandle_t)d->lt, c.op, alpha,
                            (const void*)(uintptr_t)addr(&g.a), c.l[0],
                            (const void*)(uintptr_t)addr(&g.b), c.l[1], beta,
                            (const void*)(uintptr_t)addr(&cm), c.l[2],
                            (void*)(uintptr_t)addr(&g.d), c.l[3], &heur.algo,
                            (void*)(uintptr_t)s->gemm_ws, s->gemm_ws_size, (cudaStream_t)s->s);
  }
  lt_call_free(lt, &c);
  cuda_ctx_pop(d);
  return ls == CUBLAS_STATUS_SUCCESS ? BP_OK : lt_fail(ls, "cuBLASLt GEMM");
}
