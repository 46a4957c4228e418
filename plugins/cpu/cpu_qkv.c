/* backplane CPU plugin: qkv_rotary -- the fused QKV projection of a
 * transformer layer with the rotary embedding applied to q and k
 * (docs/semantics.md, "qkv_rotary"; vLLM's QKVParallelLinear followed by
 * rotary_embedding with a cos_sin_cache):
 *
 *   y = input @ weight^T + bias            [T, (H + 2 Hkv) * D]
 *   q, k, v = the three column ranges of y, as [T, heads, D]
 *   q, k: the first R dims of every head rotated by the angle of the
 *         token's position (cos = cache[pos, :R/2], sin = cache[pos, R/2:]),
 *         halves (GPT-NeoX) or pairs (GPT-J).
 *
 * The projection is one GEMM (cpu_gemm: OpenBLAS when built with it) into
 * a compute-type buffer (f32; f64 for f64; f16 / bf16 operands are widened
 * first), then one pass per token adds the bias, rotates and rounds once
 * into q, k and v. Operands are dense (the support answer asks the core to
 * pack others). Threading: runs on a stream worker; the GEMM and the token
 * pass use the pool.
 *
 * rotary_embedding_pos (vLLM's rotary_embedding(positions, query, key,
 * head_size, cos_sin_cache, is_neox)) is the same rotation over given
 * query and key heads, each head loaded, rotated and stored once; an
 * output may be its input (in place).
 */
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "cpu_kernels.h"

typedef struct qkv_job {
  const bp_op_call_t* call;
  const bp_qkv_rotary_attrs_t* a;
  int64_t T, N, D, R, H, Hkv;
  void* y; /* [T, N] compute type */
  _Atomic int failed;
} qkv_job_t;

/* The per-token pass in compute type T_ (float or double). */
#define QKV_PASS(T_, SFX, KT)                                                                   \
  static void qkv_rotate_##SFX(T_* y, const T_* c, const T_* s, int64_t R, int interleaved) {  \
    int64_t h = R / 2;                                                                          \
    for (int64_t i = 0; i < h; i++) {                                                           \
      int64_t i1 = interleaved ? 2 * i : i, i2 = interleaved ? 2 * i + 1 : i + h;              \
      T_ x1 = y[i1], x2 = y[i2];                                                                \
      y[i1] = x1 * c[i] - x2 * s[i];                                                            \
      y[i2] = x2 * c[i] + x1 * s[i];                                                            \
    }                                                                                           \
  }                                                                                             \
  /* cos and sin of position `pos` (row pos of the [max_pos, R] cache) */                     \
  static void qkv_angles_##SFX(const bp_tensor_desc_t* cs, int64_t pos, int64_t R, T_* c, T_* s) { \
    size_t ces = bp_dtype_size(cs->dtype);                                                      \
    const unsigned char* row = cpu_desc_ptr(cs) + (size_t)(pos * R) * ces;                      \
    cpu_load[KT](c, row, 1, R / 2, cs->dtype);                                                  \
    cpu_load[KT](s, row + (size_t)(R / 2) * ces, 1, R / 2, cs->dtype);                          \
  }                                                                                             \
  static void qkv_run_##SFX(void* ctx, int64_t begin, int64_t end) {                            \
    qkv_job_t* j = ctx;                                                                         \
    const bp_op_call_t* call = j->call;                                                         \
    const bp_tensor_desc_t *bias = call->inputs[2], *cs = call->inputs[4];                      \
    int has_bias = bias->dtype != BP_DTYPE_INVALID;                                             \
    size_t bes = has_bias ? bp_dtype_size(bias->dtype) : 0;                                     \
    T_ cosv[QKV_CHUNK], sinv[QKV_CHUNK], b[QKV_CHUNK];                                          \
    for (int64_t t = begin; t < end; t++) {                                                     \
      T_* y = (T_*)j->y + t * j->N;                                                             \
      qkv_angles_##SFX(cs, cpu_index_at(call->inputs[3], t), j->R, cosv, sinv);                 \
      for (int64_t hd = 0; hd < j->H + 2 * j->Hkv; hd++) {                                      \
        T_* yh = y + hd * j->D;                                                                 \
        for (int64_t d0 = 0; has_bias && d0 < j->D; d0 += QKV_CHUNK) {                  \
          int64_t n = j->D - d0 < QKV_CHUNK ? j->D - d0 : QKV_CHUNK;            \
          cpu_load[KT](b, cpu_desc_ptr(bias) + (size_t)(hd * j->D + d0) * bes, 1, n,            \
                       bias->dtype);                                                            \
          for (int64_t d = 0; d < n; d++) yh[d0 + d] += b[d];                                   \
        }                                                                                       \
        if (hd < j->H + j->Hkv) qkv_rotate_##SFX(yh, cosv, sinv, j->R, j->a->interleaved != 0); \
        int which = hd < j->H ? 0 : hd < j->H + j->Hkv ? 1 : 2;                                 \
        int64_t hh = which == 0 ? hd : which == 1 ? hd - j->H : hd - j->H - j->Hkv;             \
        int64_t nh = which == 0 ? j->H : j->Hkv;                                                \
        const bp_tensor_desc_t* o = call->outputs[which];                                       \
        size_t oes = bp_dtype_size(o->dtype);                                                   \
        cpu_store[KT](cpu_desc_ptr(o) + (size_t)((t * nh + hh) * j->D) * oes, 1, yh, j->D,      \
                      o->dtype);                                                                \
      }                                                                                         \
    }                                                                                           \
  }                                                                                             \
  /* rotary_embedding_pos: every head of query (output 0) and key (output 1) */                 \
  static void rope_run_##SFX(void* ctx, int64_t begin, int64_t end) {                           \
    qkv_job_t* j = ctx;                                                                         \
    const bp_op_call_t* call = j->call;                                                         \
    T_ cosv[QKV_CHUNK], sinv[QKV_CHUNK];                                                        \
    T_* head = malloc(sizeof(T_) * (size_t)j->D);                                               \
    if (!head) {                                                                                \
      atomic_store(&j->failed, 1);                                                              \
      return;                                                                                   \
    }                                                                                           \
    for (int64_t t = begin; t < end; t++) {                                                     \
      qkv_angles_##SFX(call->inputs[3], cpu_index_at(call->inputs[2], t), j->R, cosv, sinv);    \
      for (int which = 0; which < 2; which++) {                                                 \
        const bp_tensor_desc_t *in = call->inputs[which], *o = call->outputs[which];            \
        int64_t nh = which ? j->Hkv : j->H;                                                     \
        size_t ies = bp_dtype_size(in->dtype), oes = bp_dtype_size(o->dtype);                   \
        for (int64_t hh = 0; hh < nh; hh++) {                                                   \
          size_t off = (size_t)((t * nh + hh) * j->D);                                          \
          cpu_load[KT](head, cpu_desc_ptr(in) + off * ies, 1, j->D, in->dtype);                 \
          qkv_rotate_##SFX(head, cosv, sinv, j->R, j->a->interleaved != 0);                     \
          cpu_store[KT](cpu_desc_ptr(o) + off * oes, 1, head, j->D, o->dtype);                  \
        }                                                                                       \
      }                                                                                         \
    }                                                                                           \
    free(head);                                                                                 \
  }
/* Rotary tables and bias chunks up to this many elements live on the stack. */
#define QKV_CHUNK 1024
QKV_PASS(float, f32, CPU_KT_F32)
QKV_PASS(double, f64, CPU_KT_F64)

/* A dense compute-type copy of a dense descriptor (NULL on no memory). */
static void* qkv_widen(const bp_tensor_desc_t* d, int kt) {
  int64_t n = bp_desc_numel(d);
  void* p = malloc((size_t)(n > 0 ? n : 1) * cpu_kt_size[kt]);
  if (p) cpu_load[kt](p, cpu_desc_ptr(d), 1, n, d->dtype);
  return p;
}

/* Every position in [0, maxpos), checked before anything is written. */
static bp_status_t qkv_check_positions(const bp_op_call_t* call, const bp_tensor_desc_t* p, int64_t T,
                                       int64_t maxpos) {
  for (int64_t t = 0; t < T; t++) {
    int64_t pos = cpu_index_at(p, t);
    if (pos < 0 || pos >= maxpos) {
      return cpu_error(BP_OUT_OF_RANGE, "cpu: %s: positions[%lld] = %lld is outside the "
                                        "cos_sin_cache's %lld positions",
                       cpu_op_name(call->op_id), (long long)t, (long long)pos, (long long)maxpos);
    }
  }
  return BP_OK;
}

/* rotary_embedding_pos(query, key, positions, cos_sin_cache): each head
 * loaded in the compute type, rotated and stored once (in place when an
 * output is its input). */
static bp_status_t exec_rope_pos(const bp_op_call_t* call) {
  bp_status_t st = cpu_call_require_dense(call);
  if (st != BP_OK) return st;
  qkv_job_t j = {0};
  j.call = call;
  j.a = call->attrs;
  const bp_tensor_desc_t *q = call->inputs[0], *cs = call->inputs[3];
  j.T = call->inputs[2]->sizes[0];
  j.H = j.a->num_heads;
  j.Hkv = j.a->num_kv_heads;
  j.D = q->rank == 3 ? q->sizes[2] : q->sizes[1] / j.H;
  j.R = cs->sizes[1];
  if (j.R > 2 * QKV_CHUNK) {
    return cpu_error(BP_UNIMPLEMENTED, "cpu: rotary_embedding_pos: rotary dim %lld > %d", (long long)j.R,
                     2 * QKV_CHUNK);
  }
  st = qkv_check_positions(call, call->inputs[2], j.T, cs->sizes[0]);
  if (st != BP_OK || j.T == 0) return st;
  int64_t grain = 65536 / ((j.H + j.Hkv) * j.D > 0 ? (j.H + j.Hkv) * j.D : 1);
  cpu_parallel_for(j.T, grain < 1 ? 1 : grain, q->dtype == BP_DTYPE_F64 ? rope_run_f64 : rope_run_f32, &j);
  if (atomic_load(&j.failed))
    return cpu_error(BP_RESOURCE_EXHAUSTED, "cpu: rotary_embedding_pos: no memory for a head of %lld",
                     (long long)j.D);
  return BP_OK;
}

static bp_status_t exec_qkv(const bp_op_call_t* call) {
  if (call->op_id == BP_OP_rotary_embedding_pos) return exec_rope_pos(call);
  bp_status_t st = cpu_call_require_dense(call);
  if (st != BP_OK) return st;
  qkv_job_t j = {0};
  j.call = call;
  j.a = call->attrs;
  const bp_tensor_desc_t *in = call->inputs[0], *w = call->inputs[1], *cs = call->inputs[4];
  j.T = in->sizes[0];
  j.N = w->sizes[0];
  j.H = j.a->num_heads;
  j.Hkv = j.a->num_kv_heads;
  j.D = j.N / (j.H + 2 * j.Hkv);
  j.R = cs->sizes[1];
  int64_t K = in->sizes[1], maxpos = cs->sizes[0];
  if (j.R > 2 * QKV_CHUNK) {
    return cpu_error(BP_UNIMPLEMENTED, "cpu: qkv_rotary: rotary dim %lld > %d", (long long)j.R,
                     2 * QKV_CHUNK);
  }
  st = qkv_check_positions(call, call->inputs[3], j.T, maxpos);
  if (st != BP_OK) return st;
  if (j.T == 0) return BP_OK;
  int kt = in->dtype == BP_DTYPE_F64 ? CPU_KT_F64 : CPU_KT_F32;
  uint32_t cdt = cpu_kt_dtype[kt];
  void *x = NULL, *wt = NULL;
  j.y = malloc((size_t)(j.T * j.N) * cpu_kt_size[kt]);
  if (j.y && in->dtype != cdt) {
    x = qkv_widen(in, kt);
    wt = qkv_widen(w, kt);
  }
  if (!j.y || (in->dtype != cdt && (!x || !wt))) {
    st = cpu_error(BP_RESOURCE_EXHAUSTED, "cpu: qkv_rotary: no memory for the [%lld, %lld] "
                                          "projection", (long long)j.T, (long long)j.N);
  } else {
    const void* xa = x ? x : cpu_desc_ptr(in);
    const void* wb = wt ? wt : cpu_desc_ptr(w);
    /* y[T, N] = x[T, K] @ w^T: B[k][n] = w[n][k] (row stride 1, column stride K) */
    st = cpu_gemm(cdt, j.T, j.N, K, 1.0, xa, K, 1, wb, 1, K, 0, j.y, j.N, 1);
  }
  free(x);
  free(wt);
  if (st == BP_OK) {
    int64_t grain = 65536 / (j.N > 0 ? j.N : 1);
    cpu_parallel_for(j.T, grain < 1 ? 1 : grain, kt == CPU_KT_F64 ? qkv_run_f64 : qkv_run_f32, &j);
  }
  free(j.y);
  return st;
}

static int supported_qkv(const bp_op_call_t* call, char* msg, size_t cap) {
  (void)call, (void)msg, (void)cap;
  return BP_SUPPORT_OK;
}

const cpu_family_t cpu_family_qkv = {
    "qkv", CPU_FAMILY_OPS(BP_OP_qkv_rotary, BP_OP_rotary_embedding_pos), exec_qkv, supported_qkv, 0,
};
