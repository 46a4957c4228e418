/* backplane CPU plugin: the mixture-of-experts family -- moe_topk_softmax,
 * vLLM's topk_softmax routing (docs/semantics.md, "Mixture of experts"):
 * per token, the top_k experts by router logit (ties: the lower expert id
 * first; softmax is monotone, so this is the order of the probabilities),
 * their softmax probabilities over all experts, optionally renormalized to
 * sum to 1. f16/bf16/f32 logits compute in f32 (exp, sum in double), f64 in
 * f64. Tokens run in parallel on the pool; operands are dense (the support
 * answer asks the core to pack others).
 */
#include <math.h>
#include <stdlib.h>

#include "cpu_kernels.h"

typedef struct moe_job {
  const bp_op_call_t* call;
  int64_t E, k;
  int renorm;
  _Atomic int failed;
} moe_job_t;

static void moe_run(void* ctx, int64_t begin, int64_t end) {
  moe_job_t* j = ctx;
  const bp_tensor_desc_t *in = j->call->inputs[0], *wo = j->call->outputs[0];
  double* l = malloc(sizeof(double) * (size_t)j->E);
  unsigned char* taken = calloc((size_t)j->E, 1);
  double* w = malloc(sizeof(double) * (size_t)j->k);
  if (!l || !taken || !w) {
    atomic_store(&j->failed, 1);
    free(l), free(taken), free(w);
    return;
  }
  int64_t* ids = (int64_t*)(void*)cpu_desc_ptr(j->call->outputs[1]);
  size_t es = bp_dtype_size(in->dtype), wes = bp_dtype_size(wo->dtype);
  for (int64_t t = begin; t < end; t++) {
    cpu_load[CPU_KT_F64](l, cpu_desc_ptr(in) + (size_t)(t * j->E) * es, 1, j->E, in->dtype);
    double m = -INFINITY, z = 0.0, sel = 0.0;
    for (int64_t e = 0; e < j->E; e++) m = l[e] > m ? l[e] : m;
    for (int64_t e = 0; e < j->E; e++) z += exp(l[e] - m);
    for (int64_t r = 0; r < j->k; r++) {
      int64_t best = -1;
      for (int64_t e = 0; e < j->E; e++) {
        if (!taken[e] && (best < 0 || l[e] > l[best])) best = e;
      }
      taken[best] = 1;
      ids[t * j->k + r] = best;
      w[r] = exp(l[best] - m) / z;
      sel += w[r];
    }
    for (int64_t r = 0; r < j->k; r++) {
      taken[ids[t * j->k + r]] = 0;
      if (j->renorm) w[r] /= sel;
    }
    cpu_store[CPU_KT_F64](cpu_desc_ptr(wo) + (size_t)(t * j->k) * wes, 1, w, j->k, wo->dtype);
  }
  free(l), free(taken), free(w);
}

static bp_status_t exec_moe(const bp_op_call_t* call) {
  bp_status_t st = cpu_call_require_dense(call);
  if (st != BP_OK) return st;
  const bp_moe_topk_attrs_t* a = call->attrs;
  const bp_tensor_desc_t* in = call->inputs[0];
  moe_job_t j = {0};
  j.call = call;
  j.E = in->sizes[1];
  j.k = a->top_k;
  j.renorm = a->renormalize != 0;
  if (in->sizes[0] == 0) return BP_OK;
  int64_t grain = 4096 / (j.E > 0 ? j.E : 1);
  cpu_parallel_for(in->sizes[0], grain < 1 ? 1 : grain, moe_run, &j);
  if (atomic_load(&j.failed)) {
    return cpu_error(BP_RESOURCE_EXHAUSTED, "cpu: moe_topk_softmax: no memory for %lld experts",
                     (long long)j.E);
  }
  return BP_OK;
}

static int supported_moe(const bp_op_call_t* call, char* msg, size_t cap) {
  (void)call, (void)msg, (void)cap;
  return BP_SUPPORT_OK;
}

const cpu_family_t cpu_family_moe = {
    "moe", CPU_FAMILY_OPS(BP_OP_moe_topk_softmax), exec_moe, supported_moe, 0,
};
