/* bp-bench suite "vs_raw": a CUDA device through backplane against the raw
 * CUDA driver and cuBLASLt on the same GPU, measured in the same run.
 *
 * The suite opens libcuda.so.1 itself (BP_CUDA_DRIVER_PATH as for the
 * plugin; dlopen, cuda.h for types only), finds the GPU whose UUID the
 * backplane device reports and uses its primary context. Each repetition
 * times the backplane figure and its raw baseline back to back; figures
 * are medians of ctx->reps repetitions (--quick: small sizes). Targets are
 * issue 15's:
 *
 *  1. f32 add over 256M elements (12 bytes each) against cuMemcpyDtoD of
 *     1 GiB (8 bytes per float: read + write): GB/s, ratio >= 0.85.
 *  2. GEMM 8192^3, bf16 and f32 (fp32 compute, no TF32), through bp_op_mm
 *     against cublasLtMatmul called directly with the same types and the
 *     heuristic's first algorithm: GFLOP/s, ratio >= 0.95.
 *  3. softmax (last dim) and layer_norm over 16384 x 16384 f32 against the
 *     copy bandwidth of figure 1 (8 bytes per element both): ratio >= 0.7.
 *  4. dispatch: 200 one-element bp_op_add against 200 cuLaunchKernel of a
 *     one-thread add (hand-written PTX below), each burst closed by one
 *     synchronize: microseconds per op, at most 1.5x the raw figure.
 *  5. an 8-op chain on 4096 f32 as one compiled GRAPH region (one CUDA
 *     graph launch per run) against the 8 ops eagerly (bench_region_dispatch.c):
 *     runs/s, reported.
 *  6. single-rank collectives through the plugin (NCCL), each checked
 *     exactly, and all_reduce of 64 MiB against a device copy
 *     (bench_comm_single.c): reported.
 *
 * A backplane figure whose op the device lacks is skipped with the
 * reason (bpb_unsupported); a raw baseline that cannot run (no cuBLASLt,
 * a driver call failing) is skipped naming the call. On a device that is
 * not a CUDA device the suite says so and runs nothing.
 * Threading: single-threaded, like the rest of bp-bench.
 */
#define _GNU_SOURCE
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"

#ifndef BP_BENCH_HAVE_CUDA

void bpb_suite_vs_raw(bpb_ctx_t* ctx) {
  (void)ctx;
  printf("suite vs_raw: not built (bp-bench was built without cuda.h and cublasLt.h)\n");
}

#else /* BP_BENCH_HAVE_CUDA */

#include <cublasLt.h>
#include <cuda.h>
#include <dlfcn.h>

/* ---- the raw side: its own small symbol tables ----------------------------- */
#define VR_CU(X)                                                                          \
  X(cuInit) X(cuDeviceGetCount) X(cuDeviceGet) X(cuDeviceGetUuid_v2)                      \
  X(cuDevicePrimaryCtxRetain) X(cuDevicePrimaryCtxRelease_v2) X(cuCtxPushCurrent_v2)      \
  X(cuCtxPopCurrent_v2) X(cuMemAlloc_v2) X(cuMemFree_v2) X(cuMemcpyDtoDAsync_v2)          \
  X(cuMemsetD32Async) X(cuStreamCreateWithPriority) X(cuStreamDestroy_v2)                 \
  X(cuStreamSynchronize) X(cuEventCreate) X(cuEventDestroy_v2) X(cuEventRecord)           \
  X(cuEventSynchronize)
/* Only the dispatch figure needs these (it is skipped without them). */
#define VR_CU_KERNEL(X) X(cuModuleLoadData) X(cuModuleUnload) X(cuModuleGetFunction) X(cuLaunchKernel)
#define VR_LT(X)                                                                          \
  X(cublasLtCreate) X(cublasLtDestroy) X(cublasLtMatmulDescCreate)                        \
  X(cublasLtMatmulDescDestroy) X(cublasLtMatrixLayoutCreate) X(cublasLtMatrixLayoutDestroy) \
  X(cublasLtMatmulPreferenceCreate) X(cublasLtMatmulPreferenceDestroy)                    \
  X(cublasLtMatmulPreferenceSetAttribute) X(cublasLtMatmulAlgoGetHeuristic) X(cublasLtMatmul)
#define VR_FIELD(name) __typeof__(&name) name;

typedef struct vr {
  void *cu_lib, *lt_lib;
  struct {
    VR_CU(VR_FIELD)
    VR_CU_KERNEL(VR_FIELD)
    __typeof__(&cuEventElapsedTime_v2) elapsed; /* _v2, or the older export */
  } cu;
  struct { VR_LT(VR_FIELD) } lt;
  int have_lt;
  CUdevice dev;
  CUcontext ctx;
  CUstream s;
  CUevent e0, e1;
} vr_t;

/* One thread adding one float: the smallest kernel a raw launch can run. */
static const char k_add1_ptx[] =
    ".version 7.0\n.target sm_50\n.address_size 64\n"
    ".visible .entry bpb_add1(.param .u64 a, .param .u64 b, .param .u64 c)\n{\n"
    "  .reg .b64 %rd<7>;\n  .reg .f32 %f<4>;\n"
    "  ld.param.u64 %rd1, [a];\n  ld.param.u64 %rd2, [b];\n  ld.param.u64 %rd3, [c];\n"
    "  cvta.to.global.u64 %rd4, %rd1;\n  cvta.to.global.u64 %rd5, %rd2;\n"
    "  cvta.to.global.u64 %rd6, %rd3;\n"
    "  ld.global.f32 %f1, [%rd4];\n  ld.global.f32 %f2, [%rd5];\n"
    "  add.f32 %f3, %f1, %f2;\n  st.global.f32 [%rd6], %f3;\n  ret;\n}\n";

static int vr_sym(void* lib, const char* name, void** out, char* why, size_t cap) {
  *out = dlsym(lib, name);
  if (!*out) snprintf(why, cap, "the library lacks %s", name);
  return *out != NULL;
}

/* Opens the driver on the GPU with `uuid`; 0 with the reason otherwise. */
static int vr_open(vr_t* v, const uint8_t* uuid, char* why, size_t cap) {
  memset(v, 0, sizeof *v);
  const char* path = getenv("BP_CUDA_DRIVER_PATH");
  v->cu_lib = dlopen(path && *path ? path : "libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!v->cu_lib) return snprintf(why, cap, "cannot load libcuda.so.1: %s", dlerror()), 0;
#define VR_LOAD_CU(name) if (!vr_sym(v->cu_lib, #name, (void**)&v->cu.name, why, cap)) return 0;
  VR_CU(VR_LOAD_CU)
  char missing[128];
#define VR_LOAD_OPT(name) vr_sym(v->cu_lib, #name, (void**)&v->cu.name, missing, sizeof missing);
  VR_CU_KERNEL(VR_LOAD_OPT)
  v->cu.elapsed = (__typeof__(v->cu.elapsed))dlsym(v->cu_lib, "cuEventElapsedTime_v2");
  if (!v->cu.elapsed) v->cu.elapsed = (__typeof__(v->cu.elapsed))dlsym(v->cu_lib, "cuEventElapsedTime");
  if (!v->cu.elapsed) return snprintf(why, cap, "the library lacks cuEventElapsedTime"), 0;
  int n = 0;
  if (v->cu.cuInit(0) || v->cu.cuDeviceGetCount(&n))
    return snprintf(why, cap, "cuInit failed"), 0;
  for (int i = 0; i < n; ++i) {
    CUuuid u;
    if (!v->cu.cuDeviceGet(&v->dev, i) && !v->cu.cuDeviceGetUuid_v2(&u, v->dev) &&
        !memcmp(u.bytes, uuid, 16))
      break;
    if (i == n - 1) return snprintf(why, cap, "no GPU with the device's UUID"), 0;
  }
  if (v->cu.cuDevicePrimaryCtxRetain(&v->ctx, v->dev) || v->cu.cuCtxPushCurrent_v2(v->ctx))
    return snprintf(why, cap, "cannot make the primary context current"), 0;
  if (v->cu.cuStreamCreateWithPriority(&v->s, CU_STREAM_NON_BLOCKING, 0) ||
      v->cu.cuEventCreate(&v->e0, CU_EVENT_DEFAULT) || v->cu.cuEventCreate(&v->e1, CU_EVENT_DEFAULT))
    return snprintf(why, cap, "cuStreamCreate / cuEventCreate failed"), 0;
  const char* lt = getenv("BP_CUBLASLT_PATH");
  v->lt_lib = dlopen(lt && *lt ? lt : "libcublasLt.so.13", RTLD_NOW | RTLD_LOCAL);
  if (!v->lt_lib && !(lt && *lt)) v->lt_lib = dlopen("libcublasLt.so.12", RTLD_NOW | RTLD_LOCAL);
  v->have_lt = v->lt_lib != NULL;
  char ignore[128];
#define VR_LOAD_LT(name) \
  if (v->have_lt && !vr_sym(v->lt_lib, #name, (void**)&v->lt.name, ignore, sizeof ignore)) v->have_lt = 0;
  VR_LT(VR_LOAD_LT)
  return 1;
}

static void vr_close(vr_t* v) {
  if (v->e0) v->cu.cuEventDestroy_v2(v->e0);
  if (v->e1) v->cu.cuEventDestroy_v2(v->e1);
  if (v->s) v->cu.cuStreamDestroy_v2(v->s);
  if (v->ctx) {
    CUcontext c;
    v->cu.cuCtxPopCurrent_v2(&c);
    v->cu.cuDevicePrimaryCtxRelease_v2(v->dev);
  }
  if (v->lt_lib) dlclose(v->lt_lib);
  if (v->cu_lib) dlclose(v->cu_lib);
}

/* Seconds between the two events around work enqueued by the caller. */
static double vr_elapsed(vr_t* v) {
  float ms = 0;
  v->cu.cuEventSynchronize(v->e1);
  if (v->cu.elapsed(&ms, v->e0, v->e1)) return NAN;
  return ms * 1e-3;
}

/* ---- backplane side -------------------------------------------------------- */
typedef struct bp_run {
  uint32_t op;
  bp_tensor_t *a, *b, *w, *bias, *out, *s1, *s2;
  const void* attrs;
  int count; /* back-to-back launches per run */
} bp_run_t;

static bp_status_t run_bp(bpb_ctx_t* ctx, void* user) {
  bp_run_t* r = user;
  bp_status_t st = BP_OK;
  for (int i = 0; i < r->count && st == BP_OK; ++i) switch (r->op) {
      case BP_OP_add: st = bp_op_add(ctx->stream, r->a, r->b, NULL, &r->out); break;
      case BP_OP_mm: st = bp_op_mm(ctx->stream, r->a, r->b, NULL, &r->out); break;
      case BP_OP_softmax: st = bp_op_softmax(ctx->stream, r->a, r->attrs, &r->out); break;
      default:
        st = bp_op_layer_norm(ctx->stream, r->a, r->w, r->bias, r->attrs, &r->out, &r->s1, &r->s2);
    }
  return st;
}

/* Seconds of one run + synchronize; the first call (warm-up) says whether
 * the device runs the op at all. */
static double bp_time_once(bpb_ctx_t* ctx, bp_run_t* r) {
  double t0 = bpb_now();
  BPB_CHECK(run_bp(ctx, r));
  BPB_CHECK(bp_stream_synchronize(ctx->stream));
  return bpb_now() - t0;
}

static void bp_run_release(bp_run_t* r) {
  bp_tensor_t* all[] = {r->a, r->b, r->w, r->bias, r->out, r->s1, r->s2};
  for (size_t i = 0; i < sizeof all / sizeof all[0]; ++i)
    if (all[i]) bp_tensor_release(all[i]);
}

/* A dense tensor of `dtype` (f32 or bf16) with random values. */
static bp_tensor_t* random_tensor(bpb_ctx_t* ctx, uint32_t dtype, int64_t rows, int64_t cols,
                                  unsigned seed) {
  if (dtype == BP_DTYPE_F32) return bpb_tensor_random(ctx, 2, (int64_t[]){rows, cols}, seed);
  size_t n = (size_t)(rows * cols);
  float* f = bpb_alloc(n * sizeof(float));
  uint16_t* h = bpb_alloc(n * sizeof(uint16_t));
  bpb_fill_random(f, n, seed);
  for (size_t i = 0; i < n; ++i) {
    uint32_t u;
    memcpy(&u, &f[i], 4);
    h[i] = (uint16_t)(u >> 16);
  }
  bp_tensor_t* t = bpb_tensor(ctx, dtype, 2, (int64_t[]){rows, cols});
  BPB_CHECK(bp_tensor_write(ctx->stream, t, h, n * sizeof(uint16_t)));
  BPB_CHECK(bp_stream_synchronize(ctx->stream));
  free(f);
  free(h);
  return t;
}

/* ---- figures 1 and 3: bandwidth against cuMemcpyDtoD ------------------------- */
/* Raw copy of n floats: seconds (events), NAN when a call fails. */
static double raw_copy_s(vr_t* v, CUdeviceptr src, CUdeviceptr dst, size_t n) {
  if (v->cu.cuEventRecord(v->e0, v->s) ||
      v->cu.cuMemcpyDtoDAsync_v2(dst, src, n * sizeof(float), v->s) ||
      v->cu.cuEventRecord(v->e1, v->s))
    return NAN;
  return vr_elapsed(v);
}

/* One bandwidth figure: `r` moves `bytes_per_elem` x n bytes per run. */
static void figure_bandwidth(bpb_ctx_t* ctx, vr_t* v, bp_run_t* r, size_t n,
                             double bytes_per_elem, const char* name, double target) {
  CUdeviceptr src = 0, dst = 0;
  if (v->cu.cuMemAlloc_v2(&src, n * sizeof(float)) || v->cu.cuMemAlloc_v2(&dst, n * sizeof(float))) {
    printf("suite vs_raw: figure '%s' skipped (cuMemAlloc of the baseline failed)\n", name);
    goto done;
  }
  v->cu.cuMemsetD32Async(src, 0x3f800000u, n, v->s); /* 1.0f */
  if (bpb_unsupported(run_bp(ctx, r), name)) goto done;
  BPB_CHECK(bp_stream_synchronize(ctx->stream));
  double t_bp[BPB_MAX_REPS], t_raw[BPB_MAX_REPS];
  for (int i = 0; i < ctx->reps; ++i) {
    t_bp[i] = bp_time_once(ctx, r);
    t_raw[i] = raw_copy_s(v, src, dst, n);
    if (isnan(t_raw[i])) {
      printf("suite vs_raw: figure '%s' skipped (cuMemcpyDtoDAsync failed)\n", name);
      goto done;
    }
  }
  bpb_add_figure(&(bpb_figure_t){name, "GB/s", bytes_per_elem * (double)n / bpb_median(t_bp, ctx->reps) / 1e9,
                                 8.0 * (double)n / bpb_median(t_raw, ctx->reps) / 1e9,
                                 "cuMemcpyDtoD, same GPU, same run", target, 0});
done:
  v->cu.cuStreamSynchronize(v->s);
  if (src) v->cu.cuMemFree_v2(src);
  if (dst) v->cu.cuMemFree_v2(dst);
}

/* ---- figure 2: GEMM against cublasLtMatmul ------------------------------------ */
/* Seconds of one raw cuBLASLt GEMM of n^3 in `dtype` (fp32 compute), or
 * NAN with the failing call in `why`. Column-major and square: the same
 * work as backplane's row-major product. */
static double raw_gemm_s(vr_t* v, uint32_t dtype, int64_t n, CUdeviceptr a, CUdeviceptr b,
                         CUdeviceptr c, CUdeviceptr ws, size_t ws_size, const char** why) {
  cudaDataType t = dtype == BP_DTYPE_BF16 ? CUDA_R_16BF : CUDA_R_32F;
  cublasLtHandle_t h = NULL;
  cublasLtMatmulDesc_t op = NULL;
  cublasLtMatrixLayout_t l = NULL;
  cublasLtMatmulPreference_t pref = NULL;
  cublasLtMatmulHeuristicResult_t heur;
  int found = 0;
  double s = NAN;
  float alpha = 1.0f, beta = 0.0f;
  uint64_t wsb = ws_size;
  *why = "cublasLtCreate";
  if (v->lt.cublasLtCreate(&h)) goto done;
  *why = "cublasLtMatmulDescCreate";
  if (v->lt.cublasLtMatmulDescCreate(&op, CUBLAS_COMPUTE_32F, CUDA_R_32F)) goto done;
  *why = "cublasLtMatrixLayoutCreate";
  if (v->lt.cublasLtMatrixLayoutCreate(&l, t, (uint64_t)n, (uint64_t)n, n)) goto done;
  *why = "cublasLtMatmulPreference";
  if (v->lt.cublasLtMatmulPreferenceCreate(&pref) ||
      v->lt.cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                                                 &wsb, sizeof wsb))
    goto done;
  *why = "cublasLtMatmulAlgoGetHeuristic";
  if (v->lt.cublasLtMatmulAlgoGetHeuristic(h, op, l, l, l, l, pref, 1, &heur, &found) || !found)
    goto done;
  *why = "cublasLtMatmul";
  const void *pa = (const void*)(uintptr_t)a, *pb = (const void*)(uintptr_t)b;
  void* pc = (void*)(uintptr_t)c;
  if (v->lt.cublasLtMatmul(h, op, &alpha, pa, l, pb, l, &beta, pc, l, pc, l, &heur.algo,
                           (void*)(uintptr_t)ws, ws_size, (cudaStream_t)v->s)) /* warm-up */
    goto done;
  if (v->cu.cuEventRecord(v->e0, v->s) ||
      v->lt.cublasLtMatmul(h, op, &alpha, pa, l, pb, l, &beta, pc, l, pc, l, &heur.algo,
                           (void*)(uintptr_t)ws, ws_size, (cudaStream_t)v->s) ||
      v->cu.cuEventRecord(v->e1, v->s))
    goto done;
  s = vr_elapsed(v);
  *why = NULL;
done:
  if (pref) v->lt.cublasLtMatmulPreferenceDestroy(pref);
  if (l) v->lt.cublasLtMatrixLayoutDestroy(l);
  if (op) v->lt.cublasLtMatmulDescDestroy(op);
  if (h) v->lt.cublasLtDestroy(h);
  return s;
}

static void figure_gemm(bpb_ctx_t* ctx, vr_t* v, uint32_t dtype, const char* dev) {
  int64_t n = ctx->quick ? 128 : 8192;
  char name[160];
  snprintf(name, sizeof name, "%s GEMM %lld^3: %s through backplane vs cublasLt directly",
           dtype == BP_DTYPE_BF16 ? "bf16" : "f32", (long long)n, dev);
  if (!v->have_lt) {
    printf("suite vs_raw: figure '%s' skipped (no cuBLASLt to call directly)\n", name);
    return;
  }
  size_t esize = dtype == BP_DTYPE_BF16 ? 2 : 4, bytes = (size_t)(n * n) * esize;
  size_t ws_size = 32u << 20;
  CUdeviceptr a = 0, b = 0, c = 0, ws = 0;
  bp_run_t r = {.op = BP_OP_mm, .count = 1};
  if (v->cu.cuMemAlloc_v2(&a, bytes) || v->cu.cuMemAlloc_v2(&b, bytes) ||
      v->cu.cuMemAlloc_v2(&c, bytes) || v->cu.cuMemAlloc_v2(&ws, ws_size)) {
    printf("suite vs_raw: figure '%s' skipped (cuMemAlloc failed)\n", name);
    goto done;
  }
  v->cu.cuMemsetD32Async(a, dtype == BP_DTYPE_BF16 ? 0x3c003c00u : 0x3c000000u, bytes / 4, v->s);
  v->cu.cuMemsetD32Async(b, dtype == BP_DTYPE_BF16 ? 0x3c003c00u : 0x3c000000u, bytes / 4, v->s);
  r.a = random_tensor(ctx, dtype, n, n, 21);
  r.b = random_tensor(ctx, dtype, n, n, 22);
  if (bpb_unsupported(run_bp(ctx, &r), name)) goto done;
  BPB_CHECK(bp_stream_synchronize(ctx->stream));
  double t_bp[BPB_MAX_REPS], t_raw[BPB_MAX_REPS];
  for (int i = 0; i < ctx->reps; ++i) {
    t_bp[i] = bp_time_once(ctx, &r);
    const char* why = NULL;
    t_raw[i] = raw_gemm_s(v, dtype, n, a, b, c, ws, ws_size, &why);
    if (why) {
      printf("suite vs_raw: figure '%s' skipped (%s failed)\n", name, why);
      goto done;
    }
  }
  double flops = 2.0 * (double)n * (double)n * (double)n;
  bpb_add_figure(&(bpb_figure_t){name, "GFLOP/s", flops / bpb_median(t_bp, ctx->reps) / 1e9,
                                 flops / bpb_median(t_raw, ctx->reps) / 1e9,
                                 "cublasLtMatmul, fp32 compute, same run", 0.95, 0});
done:
  v->cu.cuStreamSynchronize(v->s);
  bp_run_release(&r);
  CUdeviceptr all[] = {a, b, c, ws};
  for (int i = 0; i < 4; ++i)
    if (all[i]) v->cu.cuMemFree_v2(all[i]);
}

/* ---- figure 4: dispatch of a one-element add ---------------------------------- */
static void figure_dispatch(bpb_ctx_t* ctx, vr_t* v, const char* dev) {
  enum { OPS = 200 };
  char name[192];
  snprintf(name, sizeof name,
           "dispatch per tiny op (%d one-element adds): %s through backplane vs raw cuLaunchKernel",
           OPS, dev);
  CUmodule mod = NULL;
  CUfunction fn = NULL;
  CUdeviceptr buf = 0;
  bp_run_t r = {.op = BP_OP_add, .count = OPS};
  if (!v->cu.cuModuleLoadData || !v->cu.cuModuleGetFunction || !v->cu.cuLaunchKernel ||
      !v->cu.cuModuleUnload) {
    printf("suite vs_raw: figure '%s' skipped (the driver lacks the module entry points)\n", name);
    return;
  }
  if (v->cu.cuModuleLoadData(&mod, k_add1_ptx) || v->cu.cuModuleGetFunction(&fn, mod, "bpb_add1") ||
      v->cu.cuMemAlloc_v2(&buf, 3 * sizeof(float))) {
    printf("suite vs_raw: figure '%s' skipped (cuModuleLoadData / cuMemAlloc failed)\n", name);
    goto done;
  }
  r.a = bpb_tensor_random(ctx, 1, (int64_t[]){1}, 31);
  r.b = bpb_tensor_random(ctx, 1, (int64_t[]){1}, 32);
  if (bpb_unsupported(run_bp(ctx, &r), name)) goto done;
  BPB_CHECK(bp_stream_synchronize(ctx->stream));
  CUdeviceptr pa = buf, pb = buf + 4, pc = buf + 8;
  void* args[] = {&pa, &pb, &pc};
  double t_bp[BPB_MAX_REPS], t_raw[BPB_MAX_REPS];
  for (int i = 0; i < ctx->reps; ++i) {
    t_bp[i] = bp_time_once(ctx, &r);
    double t0 = bpb_now();
    for (int k = 0; k < OPS; ++k)
      if (v->cu.cuLaunchKernel(fn, 1, 1, 1, 1, 1, 1, 0, v->s, args, NULL)) {
        printf("suite vs_raw: figure '%s' skipped (cuLaunchKernel failed)\n", name);
        goto done;
      }
    v->cu.cuStreamSynchronize(v->s);
    t_raw[i] = bpb_now() - t0;
  }
  double raw_us = bpb_median(t_raw, ctx->reps) / OPS * 1e6;
  bpb_add_figure(&(bpb_figure_t){name, "us", bpb_median(t_bp, ctx->reps) / OPS * 1e6, raw_us,
                                 "cuLaunchKernel of a one-thread add, same run",
                                 1.5 * raw_us, 1});
done:
  bp_run_release(&r);
  if (buf) v->cu.cuMemFree_v2(buf);
  if (mod) v->cu.cuModuleUnload(mod);
}

void bpb_suite_vs_raw(bpb_ctx_t* ctx) {
  const char* dev = bp_device_name(ctx->device);
  if (strncmp(dev, "cuda:", 5) != 0) {
    printf("suite vs_raw: skipped (%s is not a CUDA device; the suite measures cuda:N)\n", dev);
    return;
  }
  vr_t v;
  char why[256] = "";
  if (!vr_open(&v, bp_device_properties(ctx->device)->uuid, why, sizeof why)) {
    printf("suite vs_raw: skipped (raw CUDA: %s)\n", why);
    vr_close(&v);
    return;
  }
  char name[192];
  /* 1: f32 add, 256M elements */
  size_t n = ctx->quick ? (size_t)1 << 20 : (size_t)256 << 20;
  bp_run_t add = {.op = BP_OP_add, .count = 1};
  add.a = bpb_tensor_random(ctx, 1, (int64_t[]){(int64_t)n}, 1);
  add.b = bpb_tensor_random(ctx, 1, (int64_t[]){(int64_t)n}, 2);
  snprintf(name, sizeof name, "f32 add %zuM: %s through backplane vs cuMemcpyDtoD bandwidth",
           n >> 20, dev);
  figure_bandwidth(ctx, &v, &add, n, 12.0, name, 0.85);
  bp_run_release(&add);
  /* 2: GEMM */
  figure_gemm(ctx, &v, BP_DTYPE_BF16, dev);
  figure_gemm(ctx, &v, BP_DTYPE_F32, dev);
  /* 3: softmax and layer_norm over rows x rows */
  int64_t rows = ctx->quick ? 1024 : 16384;
  bp_softmax_attrs_t sa = {.struct_size = sizeof sa, .dim = 1};
  bp_layer_norm_attrs_t ln = {.struct_size = sizeof ln, .normalized_rank = 1,
                              .normalized_shape = {rows}, .eps = 1e-5, .output_mask = 7};
  for (int k = 0; k < 2; ++k) {
    bp_run_t r = {.op = k ? BP_OP_layer_norm : BP_OP_softmax, .count = 1,
                  .attrs = k ? (const void*)&ln : (const void*)&sa};
    r.a = bpb_tensor_random(ctx, 2, (int64_t[]){rows, rows}, 41);
    if (k) {
      r.w = bpb_tensor_random(ctx, 1, &rows, 42);
      r.bias = bpb_tensor_random(ctx, 1, &rows, 43);
    }
    snprintf(name, sizeof name, "%s f32 [%lld, %lld]: %s bandwidth vs cuMemcpyDtoD",
             k ? "layer_norm" : "softmax", (long long)rows, (long long)rows, dev);
    figure_bandwidth(ctx, &v, &r, (size_t)(rows * rows), 8.0, name, 0.7);
    bp_run_release(&r);
  }
  /* 4: dispatch */
  figure_dispatch(ctx, &v, dev);
  vr_close(&v);
  /* 5: a compiled 8-op region (one CUDA graph launch) vs the 8 ops eagerly */
  bpb_region_dispatch(ctx);
  /* 6: single-rank collectives (NCCL), checked, and all_reduce vs a copy */
  bpb_comm_single(ctx);
}

#endif /* BP_BENCH_HAVE_CUDA */
