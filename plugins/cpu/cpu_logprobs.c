/* backplane CPU plugin: gather_logprobs (family SAMPLE; docs/semantics.md,
 * "Logits processing"), vLLM's compute_logprobs + gather_logprobs:
 *
 *   lp           = log_softmax(l) over the row: for f16/bf16/f32 logits
 *                  log_softmax's own vectorized f32 row kernel (so the
 *                  values are log_softmax's to the bit), for f64 in double
 *   logprobs[0]  = lp[token], ids[0] = token
 *   logprobs[i]  = lp[id_i] for the num_logprobs largest logits, in
 *                  descending order, ties to the lower id, NaN first (as
 *                  torch.topk ranks NaN above every number)
 *   rank         = #{j : l_j >= l[token]} (vLLM's batched_count_greater_than;
 *                  log_softmax keeps the order, so the logits decide it
 *                  exactly)
 *
 * The order comes from the logits as loaded (exact for every input dtype),
 * so the ids and ranks do not depend on rounding; f16 / bf16 / f32 rows
 * are scanned as f32. Selection keeps a sorted list of the best k (k <=
 * 64: one comparison with the k-th best per logit, most stop there) or
 * sorts the row's ids (larger k). Token ids outside [0, V) fail the call
 * before any write. Threading: rows spread over the pool, each task with
 * its own scratch.
 */
#include <math.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "cpu_kernels.h"

#define LP_GRAIN 65536
#define LP_INSERT_MAX 64

typedef struct lp_job {
  const bp_op_call_t* call;
  int64_t V, k;
  _Atomic int failed;
} lp_job_t;

/* Whether logit a (id i) ranks before b (id j). */
static int lp_before(double a, int64_t i, double b, int64_t j) {
  if (a != a || b != b) return a != a && (b == b || i < j);
  return a > b || (a == b && i < j);
}

static _Thread_local const double* lp_sort_row;
static int lp_cmp(const void* x, const void* y) {
  int64_t i = *(const int64_t*)x, j = *(const int64_t*)y;
  return lp_before(lp_sort_row[i], i, lp_sort_row[j], j) ? -1 : 1;
}

/* The k best ids of l[0..V) (type T) into top[0..k): a sorted list, each
 * logit first compared with the k-th best so far (most leave there), and
 * the number of logits >= l[t] into *rank. k <= LP_INSERT_MAX. */
#define CPU__LP_SCAN(T, SFX)                                                                    \
  static void lp_scan_##SFX(const T* l, int64_t V, int64_t k, int64_t t, int64_t* top,           \
                            int64_t* rank) {                                                    \
    int64_t n = 0, r = 0;                                                                       \
    T lt = l[t];                                                                                \
    for (int64_t i = 0; i < V; i++) r += l[i] >= lt;                                            \
    *rank = r;                                                                                  \
    T thr = -INFINITY;                                                                          \
    for (int64_t i = 0; i < V && k > 0; i++) {                                                  \
      if (n == k && (l[i] < thr || !lp_before(l[i], i, thr, top[k - 1]))) continue;            \
      int64_t p = n < k ? n++ : k - 1;                                                          \
      while (p > 0 && lp_before(l[i], i, l[top[p - 1]], top[p - 1])) top[p] = top[p - 1], p--;  \
      top[p] = i;                                                                               \
      thr = l[top[n - 1]];                                                                      \
    }                                                                                           \
  }
CPU__LP_SCAN(float, f32)
CPU__LP_SCAN(double, f64)

/* k > LP_INSERT_MAX: the row's ids sorted (scratch holds V ids). */
static void lp_sorted(const double* l, int64_t V, int64_t k, int64_t* top, int64_t* scratch) {
  for (int64_t i = 0; i < V; i++) scratch[i] = i;
  lp_sort_row = l;
  qsort(scratch, (size_t)V, sizeof(int64_t), lp_cmp);
  memcpy(top, scratch, sizeof(int64_t) * (size_t)k);
}

/* The log-probabilities of row l[0..V) (double) into lp. */
static void lp_row_f64(const double* l, double* lp, int64_t V) {
  double m = -INFINITY, z = 0.0;
  int nan = 0;
  for (int64_t i = 0; i < V; i++) {
    nan |= l[i] != l[i];
    m = l[i] > m ? l[i] : m;
  }
  for (int64_t i = 0; i < V; i++) z += exp(l[i] - m);
  double lse = nan ? NAN : m == -INFINITY || m == INFINITY ? m : m + log(z);
  for (int64_t i = 0; i < V; i++) lp[i] = l[i] - lse;
}

static void lp_run(void* ctx, int64_t begin, int64_t end) {
  lp_job_t* j = ctx;
  const bp_op_call_t* call = j->call;
  const bp_tensor_desc_t *lg = call->inputs[0], *tok = call->inputs[1], *lo = call->outputs[0];
  int64_t V = j->V, k = j->k;
  int f64 = lg->dtype == BP_DTYPE_F64, sorted = k > LP_INSERT_MAX;
  /* l: the row in double (f64 rows, or the order when sorting); lp: its
   * log-probabilities; f, g: an f32 row and its log-probabilities */
  double* l = malloc(sizeof(double) * (size_t)(2 * V + k + 1));
  float* f = f64 ? NULL : malloc(sizeof(float) * (size_t)(2 * V));
  int64_t* ids = malloc(sizeof(int64_t) * (size_t)(V + k + 1));
  if (!l || !ids || (!f64 && !f)) {
    free(l), free(f), free(ids);
    atomic_store(&j->failed, 1);
    return;
  }
  double *lp = l + V, *o = lp + V;
  float* g = f ? f + V : NULL;
  int64_t* top = ids + V;
  size_t es = bp_dtype_size(lg->dtype);
  for (int64_t r = begin; r < end; r++) {
    const unsigned char* src = cpu_desc_ptr(lg) + (size_t)(r * V) * es;
    int64_t t = cpu_index_at(tok, r), rank = 0;
    if (f64 || sorted) cpu_load[CPU_KT_F64](l, src, 1, V, lg->dtype);
    if (f64) {
      lp_row_f64(l, lp, V);
    } else {
      cpu_load[CPU_KT_F32](f, src, 1, V, lg->dtype); /* exact for f16, bf16, f32 */
      cpu_log_softmax_row_f32(f, g, V);
    }
    if (sorted) {
      lp_scan_f64(l, V, 0, t, top + 1, &rank);
      lp_sorted(l, V, k, top + 1, ids);
    } else if (f64) {
      lp_scan_f64(l, V, k, t, top + 1, &rank);
    } else {
      lp_scan_f32(f, V, k, t, top + 1, &rank);
    }
    top[0] = t;
    for (int64_t i = 0; i <= k; i++) o[i] = f64 ? lp[top[i]] : (double)g[top[i]];
    cpu_store[CPU_KT_F64](cpu_desc_ptr(lo) + (size_t)(r * (k + 1)) * bp_dtype_size(lo->dtype), 1, o, k + 1,
                          lo->dtype);
    memcpy((int64_t*)(void*)cpu_desc_ptr(call->outputs[1]) + r * (k + 1), top, sizeof(int64_t) * (size_t)(k + 1));
    ((int64_t*)(void*)cpu_desc_ptr(call->outputs[2]))[r] = rank;
  }
  free(l), free(f), free(ids);
}

static bp_status_t exec_gather_logprobs(const bp_op_call_t* call) {
  bp_status_t st = cpu_call_require_dense(call);
  if (st != BP_OK) return st;
  const bp_logprobs_attrs_t* a = call->attrs;
  const bp_tensor_desc_t *lg = call->inputs[0], *tok = call->inputs[1];
  lp_job_t j = {0};
  j.call = call;
  j.V = lg->sizes[1];
  j.k = a->num_logprobs;
  int64_t B = lg->sizes[0];
  for (int64_t b = 0; b < B; b++) {
    int64_t t = cpu_index_at(tok, b);
    if (t < 0 || t >= j.V) {
      return cpu_error(BP_OUT_OF_RANGE, "cpu: gather_logprobs: token_ids[%lld] = %lld is outside the vocabulary "
                                        "of %lld",
                       (long long)b, (long long)t, (long long)j.V);
    }
  }
  if (B == 0) return BP_OK;
  int64_t grain = LP_GRAIN / j.V;
  cpu_parallel_for(B, grain < 1 ? 1 : grain, lp_run, &j);
  if (atomic_load(&j.failed))
    return cpu_error(BP_RESOURCE_EXHAUSTED, "cpu: gather_logprobs: no memory for a row of %lld", (long long)j.V);
  return BP_OK;
}

static int supported_logprobs(const bp_op_call_t* call, char* msg, size_t cap) {
  (void)call, (void)msg, (void)cap;
  return BP_SUPPORT_OK;
}

const cpu_family_t cpu_family_logprobs = {
    "logprobs", CPU_FAMILY_OPS(BP_OP_gather_logprobs), exec_gather_logprobs, supported_logprobs, 0,
};
