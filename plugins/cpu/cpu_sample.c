/* backplane CPU plugin: the sampling family -- sample (greedy, temperature,
 * top-k, top-p over rows of logits), repetition_penalty, and the logits
 * processors top_k_top_p_mask (the kept set of sample, with min-p, as a
 * -inf mask) and logits_softcap, and rejection_sample (speculative
 * decoding's verification of draft tokens). The rules are
 * docs/semantics.md's "Sampling"; in short, for a row l[0..V) and t > 0:
 *
 *   m    = max of the non-NaN logits (none, or -inf: the row yields -1)
 *   w_i  = exp((l_i - m) / t)   (1 where l_i == m, 0 for NaN)
 *   top-k keeps l_i >= the k-th largest non-NaN logit (ties kept);
 *   top-p keeps, of those, l_i whose mass above it, sum_{l_j > l_i} w_j,
 *         is < top_p * (their total);
 *   u    = (word r of Philox(seed, offset) >> 8) * 2^-24 for row r;
 *   out  = the first kept i (vocabulary order) where the running sum of
 *          kept w passes u * (their total).
 * The thresholds come from a weighted quickselect (expected O(V), no sort);
 * sums accumulate in double. Every row is independent and draws its own
 * word, so results do not depend on threads. Threading: runs on a stream
 * worker; rows spread over the pool, each chunk with its own scratch.
 *
 * The support answer asks the core for dense operands (cpu_ops.c);
 * exec refuses others.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "bp_philox.h"
#include "cpu_kernels.h"

/* Rows per task: about this many logits. */
#define SMP_GRAIN 16384

/* ---- weighted selection ------------------------------------------------------ */

/* The smallest value x of v[0..n) such that the weight of the entries
 * greater than x is < limit (limit > 0; the maximum always qualifies). v and
 * w are permuted. Three-way partitions around a middle pivot: expected
 * O(n). */
static double smp_select(double* v, double* w, int64_t n, double limit) {
  double acc = 0.0, best = INFINITY;
  int64_t lo = 0, hi = n;
  while (lo < hi) {
    double pivot = v[lo + (hi - lo) / 2];
    /* [lo, gt) > pivot, [gt, i) == pivot, [lt, hi) < pivot */
    int64_t gt = lo, i = lo, lt = hi;
    double wg = 0.0, we = 0.0;
    while (i < lt) {
      double x = v[i], y = w[i];
      if (x > pivot) {
        v[i] = v[gt], w[i] = w[gt];
        v[gt] = x, w[gt] = y;
        gt++, i++;
        wg += y;
      } else if (x < pivot) {
        lt--;
        v[i] = v[lt], w[i] = w[lt];
        v[lt] = x, w[lt] = y;
      } else {
        we += y;
        i++;
      }
    }
    if (acc + wg < limit) { /* pivot qualifies: look among smaller values */
      best = pivot;
      acc += wg + we;
      lo = lt;
    } else { /* the answer is greater than the pivot */
      hi = gt;
    }
  }
  return best;
}

/* ---- sample ---------------------------------------------------------------------- */

typedef struct smp_job {
  const bp_op_call_t* call;
  const bp_sample_attrs_t* a;
  int64_t V;
  _Atomic int failed;
} smp_job_t;

/* The kept set of a row l[0..V) whose largest non-NaN logit is m (finite
 * or +inf), at temperature t: the logits l_i >= the returned threshold.
 * wt[i] gets w_i = exp((l_i - m) / t) (1 where l_i == m) inside the top-k
 * and min-p sets, else 0. min-p keeps w_i >= min_p (p_i >= min_p * p_max).
 * Scratch s holds 2V doubles. */
static double smp_threshold(const double* l, int64_t V, uint32_t top_k, double top_p, double min_p,
                            double t, double m, double* s, double* wt) {
  double *v = s, *w = s + V;
  /* top-k threshold over the non-NaN logits */
  double tk = -INFINITY;
  if (top_k > 0 && (int64_t)top_k < V) {
    int64_t n = 0;
    for (int64_t i = 0; i < V; i++) {
      if (l[i] == l[i]) v[n] = l[i], w[n] = 1.0, n++;
    }
    if ((int64_t)top_k < n) tk = smp_select(v, w, n, (double)top_k);
  }
  /* min-p: the smallest logit whose weight reaches min_p (weights grow with
   * the logit, so the kept set is a threshold too) */
  if (min_p > 0.0) {
    double lo = m;
    for (int64_t i = 0; i < V; i++) {
      double x = l[i];
      if (x < lo && (x == m ? 1.0 : exp((x - m) / t)) >= min_p) lo = x;
    }
    if (lo > tk) tk = lo;
  }
  /* weights of the top-k / min-p set */
  double z = 0.0;
  for (int64_t i = 0; i < V; i++) {
    double x = l[i];
    wt[i] = !(x >= tk) ? 0.0 : x == m ? 1.0 : exp((x - m) / t);
    z += wt[i];
  }
  if (!(top_p > 0.0 && top_p < 1.0)) return tk;
  int64_t n = 0;
  for (int64_t i = 0; i < V; i++) {
    if (l[i] >= tk) v[n] = l[i], w[n] = wt[i], n++;
  }
  return smp_select(v, w, n, top_p * z);
}

/* The row's largest non-NaN logit in *m and its first index (-1: none). */
static int64_t smp_max(const double* l, int64_t V, double* m) {
  int64_t best = -1;
  *m = -INFINITY;
  for (int64_t i = 0; i < V; i++) {
    if (l[i] == l[i] && (best < 0 || l[i] > *m)) *m = l[i], best = i;
  }
  return best;
}

/* One row in double: l[0..V) (scratch s holds 3V doubles). */
static int64_t smp_row(const smp_job_t* j, const double* l, double* s, int64_t row) {
  const bp_sample_attrs_t* a = j->a;
  int64_t V = j->V;
  double m;
  int64_t best = smp_max(l, V, &m);
  if (a->temperature == 0.0 || best < 0) return best;
  if (m == -INFINITY) return -1;
  double* wt = s + 2 * V;
  double tp = smp_threshold(l, V, a->top_k, a->top_p, 0.0, a->temperature, m, s, wt);
  double total = 0.0;
  for (int64_t i = 0; i < V; i++) {
    if (l[i] >= tp) total += wt[i];
  }
  uint32_t word;
  bp_philox_words(a->seed, a->offset, (uint64_t)row, 1, &word);
  double target = bp_philox_u32_to_unit(word, 24) * total, run = 0.0;
  int64_t last = -1;
  for (int64_t i = 0; i < V; i++) {
    if (!(l[i] >= tp) || wt[i] == 0.0) continue;
    run += wt[i];
    last = i;
    if (run > target) return i;
  }
  return last; /* rounding left the target at the very end */
}

static void smp_run(void* ctx, int64_t begin, int64_t end) {
  smp_job_t* j = ctx;
  const bp_tensor_desc_t *in = j->call->inputs[0], *out = j->call->outputs[0];
  int64_t V = j->V;
  double* buf = malloc(sizeof(double) * 4 * (size_t)V);
  if (!buf) {
    atomic_store(&j->failed, 1);
    return;
  }
  size_t es = bp_dtype_size(in->dtype);
  int64_t* o = (int64_t*)(void*)cpu_desc_ptr(out);
  for (int64_t r = begin; r < end; r++) {
    cpu_load[CPU_KT_F64](buf, cpu_desc_ptr(in) + (size_t)(r * V) * es, 1, V, in->dtype);
    o[r] = smp_row(j, buf, buf + V, r);
  }
  free(buf);
}

static bp_status_t exec_sample(const bp_op_call_t* call) {
  const bp_tensor_desc_t *in = call->inputs[0], *out = call->outputs[0];
  smp_job_t j = {0};
  j.call = call;
  j.a = call->attrs;
  j.V = in->rank ? in->sizes[in->rank - 1] : 0;
  if (!j.a || j.V < 1 || out->dtype != BP_DTYPE_I64) {
    return cpu_error(BP_INVALID_ARGUMENT, "cpu: sample: needs attrs, logits [..., V >= 1] and an "
                                          "i64 output");
  }
  int64_t rows = bp_desc_numel(out);
  if (rows == 0) return BP_OK;
  int64_t grain = SMP_GRAIN / j.V;
  cpu_parallel_for(rows, grain < 1 ? 1 : grain, smp_run, &j);
  if (atomic_load(&j.failed)) {
    return cpu_error(BP_RESOURCE_EXHAUSTED, "cpu: sample: no memory for a row of %lld logits",
                     (long long)j.V);
  }
  return BP_OK;
}

/* ---- repetition_penalty ------------------------------------------------------ */

typedef struct pen_job {
  const bp_op_call_t* call;
  const bp_penalty_attrs_t* a;
  int64_t V, L;
  _Atomic int failed;
} pen_job_t;

static void pen_run(void* ctx, int64_t begin, int64_t end) {
  pen_job_t* j = ctx;
  const bp_tensor_desc_t *tok = j->call->inputs[1], *out = j->call->outputs[0];
  const bp_penalty_attrs_t* a = j->a;
  uint32_t* count = calloc((size_t)j->V, sizeof(uint32_t));
  if (!count) {
    atomic_store(&j->failed, 1);
    return;
  }
  double rep = a->repetition == 0.0 ? 1.0 : a->repetition;
  size_t es = bp_dtype_size(out->dtype);
  for (int64_t r = begin; r < end; r++) {
    unsigned char* row = cpu_desc_ptr(out) + (size_t)(r * j->V) * es;
    for (int64_t k = 0; k < j->L; k++) {
      int64_t id = cpu_index_at(tok, r * j->L + k);
      if (id >= 0 && id < j->V) count[id]++;
    }
    for (int64_t k = 0; k < j->L; k++) {
      int64_t id = cpu_index_at(tok, r * j->L + k);
      if (id < 0 || id >= j->V || count[id] == 0) continue; /* padding, or done */
      double x;
      cpu_load[CPU_KT_F64](&x, row + (size_t)id * es, 1, 1, out->dtype);
      x = x > 0.0 ? x / rep : x * rep;
      x -= a->frequency * (double)count[id] + a->presence;
      cpu_store[CPU_KT_F64](row + (size_t)id * es, 1, &x, 1, out->dtype);
      count[id] = 0;
    }
  }
  free(count);
}

static bp_status_t exec_penalty(const bp_op_call_t* call) {
  const bp_tensor_desc_t *in = call->inputs[0], *tok = call->inputs[1], *out = call->outputs[0];
  pen_job_t j = {0};
  j.call = call;
  j.a = call->attrs;
  j.V = in->rank ? in->sizes[in->rank - 1] : 0;
  j.L = tok->rank ? tok->sizes[tok->rank - 1] : 0;
  if (!j.a || j.V < 1 || out->dtype != in->dtype ||
      (tok->dtype != BP_DTYPE_I32 && tok->dtype != BP_DTYPE_I64)) {
    return cpu_error(BP_INVALID_ARGUMENT, "cpu: repetition_penalty: needs attrs, logits [..., V "
                                          ">= 1], i32/i64 tokens and an output like the logits");
  }
  int64_t n = bp_desc_numel(out);
  if (n == 0) return BP_OK;
  cpu_memcpy(cpu_desc_ptr(out), cpu_desc_ptr(in), (uint64_t)n * bp_dtype_size(in->dtype));
  if (j.L == 0) return BP_OK;
  int64_t rows = n / j.V, grain = SMP_GRAIN / (j.L + 1);
  cpu_parallel_for(rows, grain < 1 ? 1 : grain, pen_run, &j);
  if (atomic_load(&j.failed)) {
    return cpu_error(BP_RESOURCE_EXHAUSTED, "cpu: repetition_penalty: no memory for %lld counts",
                     (long long)j.V);
  }
  return BP_OK;
}

/* ---- top_k_top_p_mask, logits_softcap ---------------------------------------- */

typedef struct lgt_job {
  const bp_op_call_t* call;
  int64_t V;
  _Atomic int failed;
} lgt_job_t;

/* top_k_top_p_mask: each row's kept logits copied, the others -inf (the
 * kept set of sample at temperature 1, with min-p). */
static void mask_run(void* ctx, int64_t begin, int64_t end) {
  lgt_job_t* j = ctx;
  const bp_tensor_desc_t *in = j->call->inputs[0], *out = j->call->outputs[0];
  const bp_logits_mask_attrs_t* a = j->call->attrs;
  int64_t V = j->V;
  double* buf = malloc(sizeof(double) * 4 * (size_t)V);
  if (!buf) {
    atomic_store(&j->failed, 1);
    return;
  }
  size_t es = bp_dtype_size(in->dtype);
  for (int64_t r = begin; r < end; r++) {
    double* l = buf;
    cpu_load[CPU_KT_F64](l, cpu_desc_ptr(in) + (size_t)(r * V) * es, 1, V, in->dtype);
    double m, tp = INFINITY;
    if (smp_max(l, V, &m) >= 0 && m > -INFINITY)
      tp = smp_threshold(l, V, a->top_k, a->top_p, a->min_p, 1.0, m, buf + V, buf + 3 * V);
    for (int64_t i = 0; i < V; i++) l[i] = l[i] >= tp ? l[i] : -INFINITY;
    cpu_store[CPU_KT_F64](cpu_desc_ptr(out) + (size_t)(r * V) * es, 1, l, V, out->dtype);
  }
  free(buf);
}

/* logits_softcap: tanh(x / cap) * cap in f32 (f64 for f64), blocks of
 * CPU_BLOCK elements. Where |x / cap| < 2^-12 (2^-27 for f64) the result is
 * x itself to the last bit (tanh(y) = y (1 - y^2 / 3 ...)), which also keeps
 * tiny x from losing bits to a subnormal x / cap. */
static void softcap_run(void* ctx, int64_t begin, int64_t end) {
  lgt_job_t* j = ctx;
  const bp_tensor_desc_t *in = j->call->inputs[0], *out = j->call->outputs[0];
  double cap = ((const bp_softcap_attrs_t*)j->call->attrs)->cap;
  size_t es = bp_dtype_size(in->dtype);
  union {
    float f[CPU_BLOCK];
    double d[CPU_BLOCK];
  } b;
  for (int64_t i0 = begin; i0 < end; i0 += CPU_BLOCK) {
    int64_t n = end - i0 < CPU_BLOCK ? end - i0 : CPU_BLOCK;
    const unsigned char* src = cpu_desc_ptr(in) + (size_t)i0 * es;
    unsigned char* dst = cpu_desc_ptr(out) + (size_t)i0 * es;
    if (in->dtype == BP_DTYPE_F64) {
      cpu_load[CPU_KT_F64](b.d, src, 1, n, in->dtype);
      for (int64_t i = 0; i < n; i++)
        b.d[i] = fabs(b.d[i]) < cap * 0x1p-27 ? b.d[i] : tanh(b.d[i] / cap) * cap;
      cpu_store[CPU_KT_F64](dst, 1, b.d, n, out->dtype);
    } else {
      float c = (float)cap;
      cpu_load[CPU_KT_F32](b.f, src, 1, n, in->dtype);
      for (int64_t i = 0; i < n; i++)
        b.f[i] = fabsf(b.f[i]) < c * 0x1p-12f ? b.f[i] : tanhf(b.f[i] / c) * c;
      cpu_store[CPU_KT_F32](dst, 1, b.f, n, out->dtype);
    }
  }
}

static bp_status_t exec_logits(const bp_op_call_t* call) {
  const bp_tensor_desc_t* in = call->inputs[0];
  lgt_job_t j = {0};
  j.call = call;
  j.V = in->rank ? in->sizes[in->rank - 1] : 0;
  int64_t n = bp_desc_numel(in);
  if (!call->attrs || j.V < 1) {
    return cpu_error(BP_INVALID_ARGUMENT, "cpu: %s: needs attrs and logits [..., V >= 1]",
                     cpu_op_name(call->op_id));
  }
  if (n == 0) return BP_OK;
  if (call->op_id == BP_OP_logits_softcap) {
    cpu_parallel_for(n, SMP_GRAIN, softcap_run, &j);
    return BP_OK;
  }
  int64_t grain = SMP_GRAIN / j.V;
  cpu_parallel_for(n / j.V, grain < 1 ? 1 : grain, mask_run, &j);
  if (atomic_load(&j.failed)) {
    return cpu_error(BP_RESOURCE_EXHAUSTED, "cpu: top_k_top_p_mask: no memory for a row of %lld logits",
                     (long long)j.V);
  }
  return BP_OK;
}

/* ---- rejection_sample ------------------------------------------------------------ */

typedef struct rej_job {
  const bp_op_call_t* call;
  const bp_rejection_attrs_t* a;
  int64_t K, V;
  _Atomic int failed;
} rej_job_t;

/* The first maximum of the non-NaN values of p[0..V) (0 when none). */
static int64_t rej_argmax(const double* p, int64_t V) {
  int64_t best = 0;
  double m = -INFINITY;
  for (int64_t j = 0; j < V; j++)
    if (p[j] > m) m = p[j], best = j;
  return best;
}

/* Sequence b: accept drafts while p(d) / q(d) >= u, then the recovered
 * token from max(p - q, 0) (q absent: p without the draft token) by inverse
 * CDF, or the bonus token after K acceptances. */
static void rej_run(void* ctx, int64_t begin, int64_t end) {
  rej_job_t* j = ctx;
  const bp_op_call_t* call = j->call;
  const bp_tensor_desc_t *drafts = call->inputs[0], *tp = call->inputs[1], *bonus = call->inputs[2];
  const bp_tensor_desc_t* qp = call->inputs[3]->dtype != BP_DTYPE_INVALID ? call->inputs[3] : NULL;
  int64_t K = j->K, V = j->V;
  size_t es = bp_dtype_size(tp->dtype);
  double* p = malloc(sizeof(double) * 2 * (size_t)V);
  uint32_t* words = malloc(sizeof(uint32_t) * (size_t)(2 * K > 0 ? 2 * K : 1));
  if (!p || !words) {
    free(p), free(words);
    atomic_store(&j->failed, 1);
    return;
  }
  double* q = p + V;
  for (int64_t b = begin; b < end; b++) {
    int64_t* o = (int64_t*)(void*)cpu_desc_ptr(call->outputs[0]) + b * (K + 1);
    for (int64_t i = 0; i <= K; i++) o[i] = -1;
    if (!j->a->greedy && K > 0) bp_philox_words(j->a->seed, j->a->offset, (uint64_t)(2 * K * b), 2 * K, words);
    int64_t i = 0;
    for (; i < K; i++) {
      int64_t d = cpu_index_at(drafts, b * K + i);
      size_t row = (size_t)((b * K + i) * V) * es;
      cpu_load[CPU_KT_F64](p, cpu_desc_ptr(tp) + row, 1, V, tp->dtype);
      if (j->a->greedy) {
        int64_t am = rej_argmax(p, V);
        o[i] = am;
        if (am != d) break;
        continue;
      }
      if (qp) cpu_load[CPU_KT_F64](q, cpu_desc_ptr(qp) + row, 1, V, qp->dtype);
      double qd = qp ? q[d] : 1.0;
      if (qd > 0.0 && p[d] / qd >= bp_philox_u32_to_unit(words[2 * i], 24)) {
        o[i] = d;
        continue;
      }
      /* rejected: the recovered token */
      double total = 0.0;
      for (int64_t k = 0; k < V; k++) {
        double r = qp ? p[k] - q[k] : k == d ? 0.0 : p[k];
        p[k] = r > 0.0 ? r : 0.0; /* NaN counts as 0 */
        total += p[k];
      }
      int64_t pick = -1;
      if (total > 0.0) {
        double target = bp_philox_u32_to_unit(words[2 * i + 1], 24) * total, run = 0.0;
        for (int64_t k = 0; k < V && pick < 0; k++) {
          if (p[k] == 0.0) continue;
          run += p[k];
          if (run > target) pick = k;
        }
        for (int64_t k = V; pick < 0 && k-- > 0;) /* rounding left the target at the end */
          if (p[k] > 0.0) pick = k;
      } else {
        cpu_load[CPU_KT_F64](p, cpu_desc_ptr(tp) + row, 1, V, tp->dtype);
        pick = rej_argmax(p, V);
      }
      o[i] = pick;
      break;
    }
    if (i == K) o[K] = cpu_index_at(bonus, b);
  }
  free(p), free(words);
}

static bp_status_t exec_rejection(const bp_op_call_t* call) {
  rej_job_t j = {0};
  j.call = call;
  j.a = call->attrs;
  const bp_tensor_desc_t *drafts = call->inputs[0], *tp = call->inputs[1];
  int64_t B = drafts->sizes[0];
  j.K = drafts->sizes[1];
  j.V = tp->sizes[2];
  for (int64_t k = 0; k < B * j.K; k++) {
    int64_t d = cpu_index_at(drafts, k);
    if (d < 0 || d >= j.V) {
      return cpu_error(BP_OUT_OF_RANGE, "cpu: rejection_sample: draft_token_ids[%lld][%lld] = %lld is outside "
                                        "the vocabulary of %lld",
                       (long long)(k / j.K), (long long)(k % j.K), (long long)d, (long long)j.V);
    }
  }
  if (B == 0) return BP_OK;
  int64_t grain = SMP_GRAIN / (j.K * j.V > 0 ? j.K * j.V : 1);
  cpu_parallel_for(B, grain < 1 ? 1 : grain, rej_run, &j);
  if (atomic_load(&j.failed))
    return cpu_error(BP_RESOURCE_EXHAUSTED, "cpu: rejection_sample: no memory for a row of %lld", (long long)j.V);
  return BP_OK;
}

/* ---- family -------------------------------------------------------------------- */

static bp_status_t exec_sampling(const bp_op_call_t* call) {
  bp_status_t st = cpu_call_require_dense(call);
  if (st != BP_OK) return st;
  switch (call->op_id) {
    case BP_OP_sample: return exec_sample(call);
    case BP_OP_repetition_penalty: return exec_penalty(call);
    case BP_OP_rejection_sample: return exec_rejection(call);
    default: return exec_logits(call);
  }
}

static int supported_sampling(const bp_op_call_t* call, char* msg, size_t cap) {
  (void)call, (void)msg, (void)cap;
  return BP_SUPPORT_OK;
}

const cpu_family_t cpu_family_sample = {
    "sample",
    CPU_FAMILY_OPS(BP_OP_sample, BP_OP_repetition_penalty, BP_OP_logits_softcap, BP_OP_top_k_top_p_mask,
                   BP_OP_rejection_sample),
    exec_sampling,
    supported_sampling, 0,
};
