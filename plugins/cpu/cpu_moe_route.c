/* backplane CPU plugin: expert routing and the block layout of fused MoE
 * (docs/semantics.md, "Mixture of experts"):
 *
 *   moe_align_block_size  the T * k (token, slot) pairs j = t * k + r of
 *                         topk_ids sorted by expert (stable: ascending j
 *                         within an expert), each expert's run padded with
 *                         the value T * k to a multiple of block_size;
 *                         expert_ids names each block's expert (-1 past the
 *                         padded total), num_tokens_post_pad that total.
 *                         A counting sort: O(T * k + E + P), one thread
 *                         (it is a few microseconds next to the GEMMs).
 *   grouped_topk          DeepSeek-V2/V3 routing per token: scores (softmax
 *                         or sigmoid), + bias for choosing, group scores
 *                         (the max, or with a bias the sum of the top 2),
 *                         the best topk_group groups, the best top_k experts
 *                         inside them; weights are the unbiased scores,
 *                         renormalized and scaled on request. Scores in
 *                         double; ties go to the lower index, NaN ranks
 *                         last. Tokens spread over the pool; each ranking
 *                         is one pass that keeps the best k so far.
 *
 * Operands are dense (the support answer asks the core to pack others).
 */
#include <math.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "cpu_kernels.h"

/* ---- moe_align_block_size ------------------------------------------------------------ */

static bp_status_t exec_moe_align(const bp_op_call_t* call) {
  const bp_moe_align_attrs_t* a = call->attrs;
  const bp_tensor_desc_t* ids = call->inputs[0];
  int64_t N = ids->sizes[0] * ids->sizes[1], E = a->num_experts, BS = a->block_size;
  int32_t* sorted = (int32_t*)(void*)cpu_desc_ptr(call->outputs[0]);
  int32_t* experts = (int32_t*)(void*)cpu_desc_ptr(call->outputs[1]);
  int32_t* total = (int32_t*)(void*)cpu_desc_ptr(call->outputs[2]);
  int64_t P = bp_desc_numel(call->outputs[0]), blocks = bp_desc_numel(call->outputs[1]);
  int64_t* cursor = calloc((size_t)E + 1, sizeof(int64_t));
  if (!cursor) return cpu_error(BP_RESOURCE_EXHAUSTED, "cpu: moe_align_block_size: no memory for %lld experts", (long long)E);
  for (int64_t j = 0; j < N; j++) {
    int64_t e = cpu_index_at(ids, j);
    if (e >= 0 && e < E) cursor[e + 1]++;
  }
  /* cursor[e]: the first row of expert e, its run padded to BS */
  for (int64_t e = 0; e < E; e++) cursor[e + 1] = cursor[e] + (cursor[e + 1] + BS - 1) / BS * BS;
  int64_t padded = cursor[E];
  for (int64_t b = 0; b < blocks; b++) experts[b] = -1;
  for (int64_t e = 0; e < E; e++)
    for (int64_t b = cursor[e] / BS; b < cursor[e + 1] / BS; b++) experts[b] = (int32_t)e;
  for (int64_t i = 0; i < P; i++) sorted[i] = (int32_t)N;
  for (int64_t j = 0; j < N; j++) {
    int64_t e = cpu_index_at(ids, j);
    if (e >= 0 && e < E) sorted[cursor[e]++] = (int32_t)j;
  }
  *total = (int32_t)padded;
  free(cursor);
  return BP_OK;
}

/* ---- grouped_topk -------------------------------------------------------------------- */

typedef struct gtk_job {
  const bp_op_call_t* call;
  const bp_grouped_topk_attrs_t* a;
  int64_t E, G, per, kg;
  _Atomic int failed;
} gtk_job_t;

/* Whether (a, i) ranks before (b, j): larger first, NaN last, ties to the
 * lower index. */
static int gtk_before(double a, int64_t i, double b, int64_t j) {
  if (a != a || b != b) return b != b && (a == a || i < j);
  return a > b || (a == b && i < j);
}

/* The best k entries of v[0..n) in rank order into top[0..k) (skip[i] != 0:
 * left out; skip may be NULL); returns how many there were (< k when fewer
 * are left). One pass: each entry is compared with the k-th best so far
 * and only one that ranks before it is inserted, so the pass costs about n
 * comparisons where k scans for the best would cost k n. */
static int64_t gtk_topk(const double* v, const uint8_t* skip, int64_t n, int64_t k, int64_t* top) {
  int64_t cnt = 0;
  for (int64_t i = 0; i < n; i++) {
    if (skip && skip[i]) continue;
    if (cnt == k && !gtk_before(v[i], i, v[top[k - 1]], top[k - 1])) continue;
    int64_t p = cnt < k ? cnt++ : k - 1;
    for (; p > 0 && gtk_before(v[i], i, v[top[p - 1]], top[p - 1]); p--) top[p] = top[p - 1];
    top[p] = i;
  }
  return cnt;
}

static void gtk_run(void* ctx, int64_t begin, int64_t end) {
  gtk_job_t* j = ctx;
  const bp_op_call_t* call = j->call;
  const bp_grouped_topk_attrs_t* a = j->a;
  const bp_tensor_desc_t *g = call->inputs[0], *w = call->outputs[0];
  const bp_tensor_desc_t* bias = call->num_inputs > 1 && call->inputs[1]->dtype != BP_DTYPE_INVALID ? call->inputs[1] : NULL;
  int64_t E = j->E, G = j->G, per = j->per, k = a->top_k;
  size_t es = bp_dtype_size(g->dtype);
  /* s: scores, c: choice scores, b: bias, gs: group scores, o: weights;
   * top: ranked indices (experts, groups or a group's best two) */
  int64_t ntop = k > G ? k : G < 2 ? 2 : G;
  double* buf = malloc(sizeof(double) * (size_t)(3 * E + G + k));
  int64_t* top = malloc(sizeof(int64_t) * (size_t)ntop);
  uint8_t* out = malloc((size_t)E);
  if (!buf || !top || !out) {
    free(buf), free(top), free(out);
    atomic_store(&j->failed, 1);
    return;
  }
  double *s = buf, *c = s + E, *b = c + E, *gs = b + E, *o = gs + G;
  if (bias) cpu_load[CPU_KT_F64](b, cpu_desc_ptr(bias), 1, E, bias->dtype);
  double rsf = a->routed_scaling_factor != 0.0 ? a->routed_scaling_factor : 1.0;
  int two = bias && per > 1; /* a group scores the sum of its best two */
  for (int64_t t = begin; t < end; t++) {
    cpu_load[CPU_KT_F64](s, cpu_desc_ptr(g) + (size_t)(t * E) * es, 1, E, g->dtype);
    if (a->scoring_func == BP_MOE_SCORING_SIGMOID) {
      for (int64_t e = 0; e < E; e++) s[e] = 1.0 / (1.0 + exp(-s[e]));
    } else {
      double m = -INFINITY, z = 0.0;
      for (int64_t e = 0; e < E; e++) m = s[e] > m ? s[e] : m;
      for (int64_t e = 0; e < E; e++) z += (s[e] = exp(s[e] - m));
      for (int64_t e = 0; e < E; e++) s[e] /= z;
    }
    if (bias)
      for (int64_t e = 0; e < E; e++) c[e] = s[e] + b[e];
    else
      memcpy(c, s, sizeof(double) * (size_t)E);
    /* group scores: the best choice score, or the sum of the best two */
    for (int64_t q = 0; q < G; q++) {
      gtk_topk(c + q * per, NULL, per, two ? 2 : 1, top);
      gs[q] = c[q * per + top[0]];
      if (two) gs[q] += c[q * per + top[1]];
    }
    /* groups not kept: their experts are out of the choice */
    memset(out, 1, (size_t)E);
    if (j->kg == G) {
      memset(out, 0, (size_t)E);
    } else {
      gtk_topk(gs, NULL, G, j->kg, top);
      for (int64_t r = 0; r < j->kg; r++) memset(out + top[r] * per, 0, (size_t)per);
    }
    gtk_topk(c, out, E, k, top);
    double sum = 0.0;
    int32_t* ids = (int32_t*)(void*)cpu_desc_ptr(call->outputs[1]) + t * k;
    for (int64_t r = 0; r < k; r++) {
      ids[r] = (int32_t)top[r];
      sum += (o[r] = s[top[r]]);
    }
    for (int64_t r = 0; r < k; r++) o[r] = (a->renormalize ? o[r] / sum : o[r]) * rsf;
    cpu_store[CPU_KT_F64](cpu_desc_ptr(w) + (size_t)(t * k) * bp_dtype_size(w->dtype), 1, o, k, w->dtype);
  }
  free(buf), free(top), free(out);
}

static bp_status_t exec_grouped_topk(const bp_op_call_t* call) {
  gtk_job_t j = {0};
  j.call = call;
  j.a = call->attrs;
  const bp_tensor_desc_t* g = call->inputs[0];
  j.E = g->sizes[1];
  j.G = j.a->num_expert_group ? j.a->num_expert_group : 1;
  j.kg = j.a->topk_group ? j.a->topk_group : j.G;
  j.per = j.E / j.G;
  int64_t T = g->sizes[0];
  if (T == 0) return BP_OK;
  int64_t grain = 4096 / (j.E > 0 ? j.E : 1);
  cpu_parallel_for(T, grain < 1 ? 1 : grain, gtk_run, &j);
  if (atomic_load(&j.failed))
    return cpu_error(BP_RESOURCE_EXHAUSTED, "cpu: grouped_topk: no memory for %lld experts", (long long)j.E);
  return BP_OK;
}

/* ---- family -------------------------------------------------------------------- */

static bp_status_t exec_moe_route(const bp_op_call_t* call) {
  bp_status_t st = cpu_call_require_dense(call);
  if (st != BP_OK) return st;
  if (call->op_id == BP_OP_moe_align_block_size) return exec_moe_align(call);
  return exec_grouped_topk(call);
}

static int supported_moe_route(const bp_op_call_t* call, char* msg, size_t cap) {
  (void)call, (void)msg, (void)cap;
  return BP_SUPPORT_OK;
}

const cpu_family_t cpu_family_moe_route = {
    "moe_route", CPU_FAMILY_OPS(BP_OP_moe_align_block_size, BP_OP_grouped_topk), exec_moe_route,
    supported_moe_route, 0,
};
