/* A fake cuBLASLt, in the same library as the fake driver (the plugin
 * opens it through BP_CUBLASLT_PATH): descriptors are plain records, the
 * heuristic checks the shapes and offers one algorithm, and cublasLtMatmul
 * checks every pointer range against the driver's allocations and then
 * computes D = epilogue(alpha op(A) op(B) + beta C + bias) with naive loops
 * in double, in stream order on the fake driver's stream. Epilogues as
 * cuBLASLt documents them: RELU max(x, 0) (NaN kept), GELU the tanh form.
 */
#include <cublasLt.h>
#include <cuda.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bp_plugin_common.h" /* f16 / bf16 conversions (header-only part) */

#define FAKE_EXPORT __attribute__((visibility("default")))

/* Half conversions of fake_kernel_host.h (kernels run as host C). */
float fk_f16_to_f32(uint16_t h);
uint16_t fk_f32_to_f16(float f);
float fk_f16_to_f32(uint16_t h) { return bp_f16_to_f32(h); }
uint16_t fk_f32_to_f16(float f) { return bp_f32_to_f16(f); }

int fake_cuda_initialized(void);
int fake_cuda_range_ok(const char* name, const void* p, size_t n);
void fake_cuda_count(const char* name);
CUresult fake_cuda_enqueue_call(const char* name, CUstream h, void (*fn)(void*), void* user,
                                size_t size, const void* key);
void fake_cuda_misuse(const char* what);

#define MAGIC_HANDLE 0x4c54484eu
#define MAGIC_DESC 0x4c544445u
#define MAGIC_LAYOUT 0x4c544c41u
#define MAGIC_PREF 0x4c545052u
#define FAKE_ALGO 0x616c676fu

typedef struct { uint32_t magic; } fake_handle_t;
typedef struct {
  uint32_t magic;
  int compute, scale, transa, transb;
  uint32_t epilogue;
  const void* bias;
} fake_desc_t;
typedef struct {
  uint32_t magic;
  int type;
  uint64_t rows, cols;
  int64_t ld;
  int32_t batch;
  int64_t stride;
} fake_layout_t;
typedef struct {
  uint32_t magic;
  uint64_t ws;
} fake_pref_t;

#define CHECK(cond, what)          \
  do {                             \
    if (!(cond)) {                 \
      fake_cuda_misuse(what);      \
      return CUBLAS_STATUS_INVALID_VALUE; \
    }                              \
  } while (0)

/* Every descriptor starts with its magic; freed ones lose it. */
static void* obj_new(size_t size, uint32_t magic) {
  uint32_t* p = calloc(1, size);
  if (p) *p = magic;
  return p;
}
static cublasStatus_t obj_free(void* p, uint32_t magic, const char* what) {
  CHECK(p && *(uint32_t*)p == magic, what);
  *(uint32_t*)p = 0;
  free(p);
  return CUBLAS_STATUS_SUCCESS;
}

FAKE_EXPORT size_t cublasLtGetVersion(void) { return 130000; }
FAKE_EXPORT cublasStatus_t cublasLtCreate(cublasLtHandle_t* h) {
  fake_cuda_count("cublasLtCreate");
  if (!fake_cuda_initialized()) return CUBLAS_STATUS_NOT_INITIALIZED;
  fake_handle_t* p = obj_new(sizeof *p, MAGIC_HANDLE);
  if (!p) return CUBLAS_STATUS_ALLOC_FAILED;
  *h = (cublasLtHandle_t)p;
  return CUBLAS_STATUS_SUCCESS;
}
FAKE_EXPORT cublasStatus_t cublasLtDestroy(cublasLtHandle_t h) {
  return obj_free(h, MAGIC_HANDLE, "cublasLtDestroy: bad handle");
}
FAKE_EXPORT cublasStatus_t cublasLtMatmulDescCreate(cublasLtMatmulDesc_t* out,
                                                    cublasComputeType_t compute,
                                                    cudaDataType_t scale) {
  fake_desc_t* d = obj_new(sizeof *d, MAGIC_DESC);
  if (!d) return CUBLAS_STATUS_ALLOC_FAILED;
  *d = (fake_desc_t){.magic = MAGIC_DESC, .compute = compute, .scale = scale,
                     .epilogue = CUBLASLT_EPILOGUE_DEFAULT};
  *out = (cublasLtMatmulDesc_t)d;
  return CUBLAS_STATUS_SUCCESS;
}
FAKE_EXPORT cublasStatus_t cublasLtMatmulDescDestroy(cublasLtMatmulDesc_t h) {
  return obj_free(h, MAGIC_DESC, "cublasLtMatmulDescDestroy: bad descriptor");
}
FAKE_EXPORT cublasStatus_t cublasLtMatmulDescSetAttribute(cublasLtMatmulDesc_t h,
                                                          cublasLtMatmulDescAttributes_t a,
                                                          const void* buf, size_t size) {
  fake_desc_t* d = (fake_desc_t*)h;
  CHECK(d && d->magic == MAGIC_DESC && buf, "cublasLtMatmulDescSetAttribute: bad descriptor");
  switch (a) {
    case CUBLASLT_MATMUL_DESC_TRANSA: CHECK(size == 4, "TRANSA size"); memcpy(&d->transa, buf, 4); break;
    case CUBLASLT_MATMUL_DESC_TRANSB: CHECK(size == 4, "TRANSB size"); memcpy(&d->transb, buf, 4); break;
    case CUBLASLT_MATMUL_DESC_EPILOGUE: CHECK(size == 4, "EPILOGUE size"); memcpy(&d->epilogue, buf, 4); break;
    case CUBLASLT_MATMUL_DESC_BIAS_POINTER: CHECK(size == sizeof(void*), "BIAS size"); memcpy(&d->bias, buf, size); break;
    default: return CUBLAS_STATUS_INVALID_VALUE;
  }
  return CUBLAS_STATUS_SUCCESS;
}
FAKE_EXPORT cublasStatus_t cublasLtMatrixLayoutCreate(cublasLtMatrixLayout_t* out, cudaDataType t,
                                                      uint64_t rows, uint64_t cols, int64_t ld) {
  fake_layout_t* l = obj_new(sizeof *l, MAGIC_LAYOUT);
  if (!l) return CUBLAS_STATUS_ALLOC_FAILED;
  *l = (fake_layout_t){.magic = MAGIC_LAYOUT, .type = t, .rows = rows, .cols = cols, .ld = ld,
                       .batch = 1};
  *out = (cublasLtMatrixLayout_t)l;
  return CUBLAS_STATUS_SUCCESS;
}
FAKE_EXPORT cublasStatus_t cublasLtMatrixLayoutDestroy(cublasLtMatrixLayout_t h) {
  return obj_free(h, MAGIC_LAYOUT, "cublasLtMatrixLayoutDestroy: bad layout");
}
FAKE_EXPORT cublasStatus_t cublasLtMatrixLayoutSetAttribute(cublasLtMatrixLayout_t h,
                                                            cublasLtMatrixLayoutAttribute_t a,
                                                            const void* buf, size_t size) {
  fake_layout_t* l = (fake_layout_t*)h;
  CHECK(l && l->magic == MAGIC_LAYOUT && buf, "cublasLtMatrixLayoutSetAttribute: bad layout");
  if (a == CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT && size == 4) memcpy(&l->batch, buf, 4);
  else if (a == CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET && size == 8) memcpy(&l->stride, buf, 8);
  else return CUBLAS_STATUS_INVALID_VALUE;
  return CUBLAS_STATUS_SUCCESS;
}
FAKE_EXPORT cublasStatus_t cublasLtMatmulPreferenceCreate(cublasLtMatmulPreference_t* out) {
  fake_pref_t* p = obj_new(sizeof *p, MAGIC_PREF);
  if (!p) return CUBLAS_STATUS_ALLOC_FAILED;
  *out = (cublasLtMatmulPreference_t)p;
  return CUBLAS_STATUS_SUCCESS;
}
FAKE_EXPORT cublasStatus_t cublasLtMatmulPreferenceDestroy(cublasLtMatmulPreference_t h) {
  return obj_free(h, MAGIC_PREF, "cublasLtMatmulPreferenceDestroy: bad preference");
}
FAKE_EXPORT cublasStatus_t cublasLtMatmulPreferenceSetAttribute(cublasLtMatmulPreference_t h,
                                                                cublasLtMatmulPreferenceAttributes_t a,
                                                                const void* buf, size_t size) {
  fake_pref_t* p = (fake_pref_t*)h;
  CHECK(p && p->magic == MAGIC_PREF && buf, "cublasLtMatmulPreferenceSetAttribute: bad preference");
  if (a == CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES && size == 8) memcpy(&p->ws, buf, 8);
  else if (a >= CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES &&
           a <= CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES && size == 4) {
    uint32_t v;
    memcpy(&v, buf, 4);
    CHECK(v && !(v & (v - 1)), "alignment preference not a power of two");
  } else {
    return CUBLAS_STATUS_INVALID_VALUE;
  }
  return CUBLAS_STATUS_SUCCESS;
}

static int esize(int t) {
  return t == CUDA_R_64F ? 8 : t == CUDA_R_32F ? 4 : t == CUDA_R_16F || t == CUDA_R_16BF ? 2 : 0;
}

/* op(X) is rows x cols of the result's view; checks the shapes. */
static int shape_ok(const fake_desc_t* d, const fake_layout_t* a, const fake_layout_t* b,
                    const fake_layout_t* c, const fake_layout_t* dd) {
  uint64_t m = d->transa ? a->cols : a->rows, k = d->transa ? a->rows : a->cols;
  uint64_t kb = d->transb ? b->cols : b->rows, n = d->transb ? b->rows : b->cols;
  const fake_layout_t* all[4] = {a, b, c, dd};
  for (int i = 0; i < 4; ++i)
    if (!all[i] || all[i]->magic != MAGIC_LAYOUT || all[i]->ld < (int64_t)all[i]->rows ||
        all[i]->ld < 1 || all[i]->type != dd->type || all[i]->batch != dd->batch)
      return 0;
  return esize(dd->type) && k == kb && c->rows == m && c->cols == n && dd->rows == m &&
         dd->cols == n && ((d->compute == CUBLAS_COMPUTE_64F) == (dd->type == CUDA_R_64F));
}

FAKE_EXPORT cublasStatus_t cublasLtMatmulAlgoGetHeuristic(
    cublasLtHandle_t h, cublasLtMatmulDesc_t op, cublasLtMatrixLayout_t a, cublasLtMatrixLayout_t b,
    cublasLtMatrixLayout_t c, cublasLtMatrixLayout_t d, cublasLtMatmulPreference_t pref,
    int requested, cublasLtMatmulHeuristicResult_t results[], int* count) {
  fake_cuda_count("cublasLtMatmulAlgoGetHeuristic");
  const fake_desc_t* desc = (const fake_desc_t*)op;
  CHECK(h && ((fake_handle_t*)h)->magic == MAGIC_HANDLE, "heuristic: bad handle");
  CHECK(desc && desc->magic == MAGIC_DESC, "heuristic: bad descriptor");
  CHECK(pref && ((fake_pref_t*)pref)->magic == MAGIC_PREF, "heuristic: bad preference");
  CHECK(requested >= 1 && results && count, "heuristic: no room for results");
  if (!shape_ok(desc, (fake_layout_t*)a, (fake_layout_t*)b, (fake_layout_t*)c, (fake_layout_t*)d)) {
    fake_cuda_misuse("cublasLtMatmulAlgoGetHeuristic: inconsistent shapes, lds or types");
    return CUBLAS_STATUS_INVALID_VALUE;
  }
  memset(&results[0], 0, sizeof results[0]);
  results[0].algo.data[0] = FAKE_ALGO;
  results[0].state = CUBLAS_STATUS_SUCCESS;
  *count = 1;
  return CUBLAS_STATUS_SUCCESS;
}

typedef struct job {
  fake_desc_t desc;
  fake_layout_t l[4];
  const char *a, *b, *c;
  char* d;
  const char* bias;
  double alpha, beta;
} job_t;

static double load(int t, const char* p, uint64_t i) {
  switch (t) {
    case CUDA_R_64F: { double v; memcpy(&v, p + 8 * i, 8); return v; }
    case CUDA_R_32F: { float v; memcpy(&v, p + 4 * i, 4); return v; }
    case CUDA_R_16F: { uint16_t v; memcpy(&v, p + 2 * i, 2); return bp_f16_to_f32(v); }
    default: { uint16_t v; memcpy(&v, p + 2 * i, 2); return bp_bf16_to_f32(v); }
  }
}
static void store(int t, char* p, uint64_t i, double x) {
  switch (t) {
    case CUDA_R_64F: memcpy(p + 8 * i, &x, 8); break;
    case CUDA_R_32F: { float v = (float)x; memcpy(p + 4 * i, &v, 4); break; }
    case CUDA_R_16F: { uint16_t v = bp_f32_to_f16((float)x); memcpy(p + 2 * i, &v, 2); break; }
    default: { uint16_t v = bp_f32_to_bf16((float)x); memcpy(p + 2 * i, &v, 2); break; }
  }
}
/* Element (i, j) of op(X) for layout l (column-major storage). */
static double at(const fake_layout_t* l, const char* base, int trans, int64_t batch, uint64_t i,
                 uint64_t j) {
  uint64_t r = trans ? j : i, c = trans ? i : j;
  return load(l->type, base, (uint64_t)(batch * l->stride) + c * (uint64_t)l->ld + r);
}

static void run_matmul(void* arg) {
  job_t* jb = arg;
  const fake_layout_t *la = &jb->l[0], *lb = &jb->l[1], *lc = &jb->l[2], *ld = &jb->l[3];
  uint64_t m = ld->rows, n = ld->cols, k = jb->desc.transa ? la->rows : la->cols;
  uint32_t ep = jb->desc.epilogue;
  for (int64_t bt = 0; bt < ld->batch; ++bt)
    for (uint64_t j = 0; j < n; ++j)
      for (uint64_t i = 0; i < m; ++i) {
        double acc = 0;
        for (uint64_t p = 0; p < k; ++p)
          acc += at(la, jb->a, jb->desc.transa, bt, i, p) * at(lb, jb->b, jb->desc.transb, bt, p, j);
        double v = jb->alpha * acc;
        if (jb->beta != 0.0) v += jb->beta * at(lc, jb->c, 0, bt, i, j);
        if (ep & CUBLASLT_EPILOGUE_BIAS) v += load(ld->type, jb->bias, i);
        if ((ep & CUBLASLT_EPILOGUE_RELU) && v < 0) v = 0;
        if (ep & CUBLASLT_EPILOGUE_GELU)
          v = 0.5 * v * (1 + tanh(0.7978845608028654 * (v + 0.044715 * v * v * v)));
        store(ld->type, jb->d, (uint64_t)(bt * ld->stride) + j * (uint64_t)ld->ld + i, v);
      }
}

static size_t span(const fake_layout_t* l) {
  return (size_t)(((uint64_t)(l->batch - 1) * (uint64_t)l->stride + (l->cols - 1) * (uint64_t)l->ld +
                   l->rows) * (uint64_t)esize(l->type));
}

FAKE_EXPORT cublasStatus_t cublasLtMatmul(cublasLtHandle_t h, cublasLtMatmulDesc_t op,
                                          const void* alpha, const void* A, cublasLtMatrixLayout_t a,
                                          const void* B, cublasLtMatrixLayout_t b, const void* beta,
                                          const void* C, cublasLtMatrixLayout_t c, void* D,
                                          cublasLtMatrixLayout_t d, const cublasLtMatmulAlgo_t* algo,
                                          void* ws, size_t ws_size, cudaStream_t stream) {
  fake_cuda_count("cublasLtMatmul");
  const fake_desc_t* desc = (const fake_desc_t*)op;
  CHECK(h && ((fake_handle_t*)h)->magic == MAGIC_HANDLE, "cublasLtMatmul: bad handle");
  CHECK(desc && desc->magic == MAGIC_DESC, "cublasLtMatmul: bad descriptor");
  CHECK(algo && algo->data[0] == FAKE_ALGO, "cublasLtMatmul: algo not from the heuristic");
  CHECK(alpha && beta, "cublasLtMatmul: NULL alpha or beta");
  const fake_layout_t *la = (fake_layout_t*)a, *lb = (fake_layout_t*)b, *lc = (fake_layout_t*)c,
                      *ldd = (fake_layout_t*)d;
  CHECK(shape_ok(desc, la, lb, lc, ldd), "cublasLtMatmul: inconsistent shapes, lds or types");
  job_t* jb = calloc(1, sizeof *jb);
  if (!jb) return CUBLAS_STATUS_ALLOC_FAILED;
  jb->desc = *desc;
  jb->l[0] = *la, jb->l[1] = *lb, jb->l[2] = *lc, jb->l[3] = *ldd;
  jb->a = A, jb->b = B, jb->c = C, jb->d = D, jb->bias = desc->bias;
  if (desc->scale == CUDA_R_64F) {
    memcpy(&jb->alpha, alpha, 8);
    memcpy(&jb->beta, beta, 8);
  } else {
    float af, bf;
    memcpy(&af, alpha, 4);
    memcpy(&bf, beta, 4);
    jb->alpha = af, jb->beta = bf;
  }
  int ok = fake_cuda_range_ok("cublasLtMatmul A", A, span(la)) &&
           fake_cuda_range_ok("cublasLtMatmul B", B, span(lb)) &&
           (jb->beta == 0.0 || fake_cuda_range_ok("cublasLtMatmul C", C, span(lc))) &&
           fake_cuda_range_ok("cublasLtMatmul D", D, span(ldd)) &&
           (!(desc->epilogue & CUBLASLT_EPILOGUE_BIAS) ||
            fake_cuda_range_ok("cublasLtMatmul bias", desc->bias,
                               ldd->rows * (size_t)esize(ldd->type))) &&
           (!ws_size || fake_cuda_range_ok("cublasLtMatmul workspace", ws, ws_size));
  if (!ok) {
    free(jb);
    return CUBLAS_STATUS_INVALID_VALUE;
  }
  return fake_cuda_enqueue_call("cublasLtMatmul", (CUstream)stream, run_matmul, jb, sizeof *jb, NULL) == CUDA_SUCCESS
             ? CUBLAS_STATUS_SUCCESS
             : CUBLAS_STATUS_EXECUTION_FAILED;
}
