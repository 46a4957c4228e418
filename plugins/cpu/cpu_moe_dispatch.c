/* backplane CPU plugin: the mixture-of-experts dispatch ops (docs/semantics.md,
 * "Mixture of experts"):
 *
 *   moe_permute    the T * k (token, slot) rows gathered into expert order
 *                  (within an expert in (token, slot) order), the experts'
 *                  row offsets [E + 1] and each slot's row (inverse); ids
 *                  outside [0, E) are not local: no row, inverse -1, and the
 *                  rows past offsets[E] are zero.
 *   moe_unpermute  out[t] = sum over slots r with inverse[t, r] >= 0 of
 *                  w[t, r] * permuted[inverse[t, r]] (w absent: 1).
 *   grouped_mm     rows [offsets[e], offsets[e + 1]) of input times expert
 *                  e's weight [N, K] transposed (+ bias[e]), through the
 *                  plugin's GEMM (cpu_gemm: OpenBLAS when built with it) once
 *                  per expert; with int8 / int4 codes and scales, through
 *                  weight_only_mm's kernel once per expert (codes decoded in
 *                  registers on AVX-512, never a dequantized copy); rows
 *                  outside every expert are zero.
 *
 * Index values are checked before anything is written (OUT_OF_RANGE /
 * INVALID_ARGUMENT with the offending element). Operands are dense (the
 * support answer asks the core to pack others). Rows move as bytes
 * (permute: NaN payloads and signed zeros kept); sums compute in f32 (f64
 * for f64), rounded once on store.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cpu_kernels.h"
#include "cpu_qmm.h"

/* ---- moe_permute ------------------------------------------------------------------- */

typedef struct perm_job {
  const unsigned char* src;
  unsigned char* dst;
  const int64_t* from; /* token of each permuted row */
  size_t row;          /* bytes per row */
} perm_job_t;

static void perm_rows(void* ctx, int64_t begin, int64_t end) {
  perm_job_t* j = ctx;
  for (int64_t r = begin; r < end; r++) memcpy(j->dst + (size_t)r * j->row, j->src + (size_t)j->from[r] * j->row, j->row);
}

static bp_status_t exec_moe_permute(const bp_op_call_t* call) {
  const bp_moe_permute_attrs_t* a = call->attrs;
  const bp_tensor_desc_t *h = call->inputs[0], *ids = call->inputs[1];
  const bp_tensor_desc_t *po = call->outputs[0], *oo = call->outputs[1], *io = call->outputs[2];
  int64_t T = ids->sizes[0], k = ids->sizes[1], N = T * k, E = a->num_experts;
  int64_t* off = (int64_t*)(void*)cpu_desc_ptr(oo);
  int64_t* inv = (int64_t*)(void*)cpu_desc_ptr(io);
  int64_t* from = malloc(sizeof(int64_t) * (size_t)(N > 0 ? N : 1));
  if (!from) {
    return cpu_error(BP_RESOURCE_EXHAUSTED, "cpu: moe_permute: no memory for %lld rows",
                     (long long)N);
  }
  /* counts into off[e + 1], then exclusive prefix sums: off[e] = first row */
  memset(off, 0, sizeof(int64_t) * (size_t)(E + 1));
  for (int64_t j = 0; j < N; j++) {
    int64_t e = cpu_index_at(ids, j);
    if (e >= 0 && e < E) off[e + 1]++;
  }
  for (int64_t e = 0; e < E; e++) off[e + 1] += off[e];
  /* stable placement: one cursor per expert */
  int64_t* cur = malloc(sizeof(int64_t) * (size_t)E);
  if (!cur) {
    free(from);
    return cpu_error(BP_RESOURCE_EXHAUSTED, "cpu: moe_permute: no memory for %lld experts",
                     (long long)E);
  }
  memcpy(cur, off, sizeof(int64_t) * (size_t)E);
  for (int64_t j = 0; j < N; j++) {
    int64_t e = cpu_index_at(ids, j);
    if (e < 0 || e >= E) {
      inv[j] = -1;
      continue;
    }
    inv[j] = cur[e]++;
    from[inv[j]] = j / k;
  }
  free(cur);
  size_t row = (size_t)h->sizes[1] * bp_dtype_size(h->dtype);
  perm_job_t job = {cpu_desc_ptr(h), cpu_desc_ptr(po), from, row};
  int64_t used = off[E];
  if (row > 0) {
    int64_t grain = (int64_t)(65536 / row) + 1;
    cpu_parallel_for(used, grain, perm_rows, &job);
    memset(cpu_desc_ptr(po) + (size_t)used * row, 0, (size_t)(N - used) * row);
  }
  free(from);
  return BP_OK;
}

/* ---- moe_unpermute ----------------------------------------------------------------- */

typedef struct unperm_job {
  const bp_op_call_t* call;
  int64_t H, k;
  int wide; /* f64 */
  _Atomic int failed;
} unperm_job_t;

static void unperm_run(void* ctx, int64_t begin, int64_t end) {
  unperm_job_t* j = ctx;
  const bp_op_call_t* call = j->call;
  const bp_tensor_desc_t *p = call->inputs[0], *inv = call->inputs[1], *out = call->outputs[0];
  const bp_tensor_desc_t* w = call->num_inputs > 2 && call->inputs[2]->dtype != BP_DTYPE_INVALID
                                  ? call->inputs[2] : NULL;
  size_t cs = j->wide ? sizeof(double) : sizeof(float), es = bp_dtype_size(p->dtype);
  int kt = j->wide ? CPU_KT_F64 : CPU_KT_F32;
  unsigned char* buf = malloc(cs * (size_t)(2 * j->H + j->k));
  if (!buf) {
    atomic_store(&j->failed, 1);
    return;
  }
  void *acc = buf, *tmp = buf + cs * (size_t)j->H, *wt = buf + 2 * cs * (size_t)j->H;
  for (int64_t t = begin; t < end; t++) {
    memset(acc, 0, cs * (size_t)j->H);
    if (w) cpu_load[kt](wt, cpu_desc_ptr(w) + (size_t)(t * j->k) * bp_dtype_size(w->dtype), 1, j->k, w->dtype);
    for (int64_t r = 0; r < j->k; r++) {
      int64_t src = cpu_index_at(inv, t * j->k + r);
      if (src < 0) continue;
      cpu_load[kt](tmp, cpu_desc_ptr(p) + (size_t)(src * j->H) * es, 1, j->H, p->dtype);
      if (j->wide) {
        double s = w ? ((double*)wt)[r] : 1.0, *ac = acc;
        const double* x = tmp;
        for (int64_t i = 0; i < j->H; i++) ac[i] += s * x[i];
      } else {
        float s = w ? ((float*)wt)[r] : 1.0f, *ac = acc;
        const float* x = tmp;
        for (int64_t i = 0; i < j->H; i++) ac[i] += s * x[i];
      }
    }
    cpu_store[kt](cpu_desc_ptr(out) + (size_t)(t * j->H) * bp_dtype_size(out->dtype), 1, acc, j->H,
                  out->dtype);
  }
  free(buf);
}

static bp_status_t exec_moe_unpermute(const bp_op_call_t* call) {
  const bp_tensor_desc_t *p = call->inputs[0], *inv = call->inputs[1];
  int64_t N = p->sizes[0], T = inv->sizes[0], k = inv->sizes[1];
  for (int64_t j = 0; j < T * k; j++) {
    int64_t src = cpu_index_at(inv, j);
    if (src >= N) {
      return cpu_error(BP_OUT_OF_RANGE, "cpu: moe_unpermute: inverse[%lld, %lld] = %lld is past "
                                        "the %lld permuted rows",
                       (long long)(j / k), (long long)(j % k), (long long)src, (long long)N);
    }
  }
  unperm_job_t j = {0};
  j.call = call;
  j.H = p->sizes[1];
  j.k = k;
  j.wide = call->outputs[0]->dtype == BP_DTYPE_F64;
  if (T == 0 || j.H == 0) return BP_OK;
  int64_t grain = 16384 / (j.H * (k > 0 ? k : 1)) + 1;
  cpu_parallel_for(T, grain, unperm_run, &j);
  if (atomic_load(&j.failed)) {
    return cpu_error(BP_RESOURCE_EXHAUSTED, "cpu: moe_unpermute: no memory for a row of %lld",
                     (long long)j.H);
  }
  return BP_OK;
}

/* ---- grouped_mm -------------------------------------------------------------------- */

/* Expert e's rows [r0, r0 + m) through weight_only_mm: the same kernel on
 * descriptors of the expert's slices (codes, scales, zero points, bias) and
 * of the rows (input and output). */
static bp_status_t grouped_quant_expert(const bp_op_call_t* call, int64_t e, int64_t r0, int64_t m) {
  const bp_tensor_desc_t* const* in = call->inputs;
  const bp_tensor_desc_t* out = call->outputs[0];
  int64_t K = in[0]->sizes[1], N = in[1]->sizes[1], KB = in[1]->sizes[2], G = in[4]->sizes[2];
  bp_tensor_desc_t x = *in[0], w = *in[1], s = *in[4], z = *in[5], b = *in[3], o = *out;
  x.sizes[0] = m;
  x.byte_offset += (uint64_t)(r0 * K) * bp_dtype_size(x.dtype);
  o.sizes[0] = m;
  o.byte_offset += (uint64_t)(r0 * N) * bp_dtype_size(o.dtype);
  bp_tensor_desc_t* per_expert[4] = {&w, &s, &z, &b};
  const int64_t inner[4] = {KB, G, G, 1};
  for (int i = 0; i < 4; i++) { /* [E, N, inner] -> [N, inner]; bias [E, N] -> [N] */
    bp_tensor_desc_t* d = per_expert[i];
    if (d->dtype == BP_DTYPE_INVALID) continue;
    d->byte_offset += (uint64_t)(e * N * inner[i]) * bp_dtype_size(d->dtype);
    d->rank = i == 3 ? 1 : 2;
    d->sizes[0] = N, d->sizes[1] = inner[i];
    d->strides[0] = i == 3 ? 1 : inner[i], d->strides[1] = 1;
  }
  const bp_tensor_desc_t* ins[5] = {&x, &w, &s, &z, &b};
  const bp_tensor_desc_t* outs[1] = {&o};
  bp_op_call_t sub = *call;
  sub.op_id = BP_OP_weight_only_mm;
  sub.num_inputs = 5;
  sub.inputs = ins;
  sub.outputs = outs;
  return cpu_exec_weight_only_mm(&sub);
}

static bp_status_t exec_grouped_mm(const bp_op_call_t* call) {
  const bp_tensor_desc_t *x = call->inputs[0], *w = call->inputs[1], *offs = call->inputs[2];
  const bp_tensor_desc_t* b = call->inputs[3]->dtype != BP_DTYPE_INVALID ? call->inputs[3] : NULL;
  const bp_tensor_desc_t* out = call->outputs[0];
  int64_t M = x->sizes[0], K = x->sizes[1], E = w->sizes[0], N = w->sizes[1];
  int quant = call->inputs[4]->dtype != BP_DTYPE_INVALID;
  int64_t first = cpu_index_at(offs, 0), last = cpu_index_at(offs, E);
  if (first < 0 || last > M) {
    return cpu_error(BP_OUT_OF_RANGE, "cpu: grouped_mm: expert_offsets span [%lld, %lld], "
                                      "outside the input's %lld rows",
                     (long long)first, (long long)last, (long long)M);
  }
  for (int64_t e = 0; e < E; e++) {
    if (cpu_index_at(offs, e + 1) < cpu_index_at(offs, e)) {
      return cpu_error(BP_INVALID_ARGUMENT, "cpu: grouped_mm: expert_offsets[%lld] = %lld < "
                                            "expert_offsets[%lld] = %lld (offsets must not "
                                            "decrease)",
                       (long long)(e + 1), (long long)cpu_index_at(offs, e + 1), (long long)e,
                       (long long)cpu_index_at(offs, e));
    }
  }
  size_t es = bp_dtype_size(out->dtype), orow = (size_t)N * es;
  unsigned char* o = cpu_desc_ptr(out);
  const unsigned char *xp = cpu_desc_ptr(x), *wp = cpu_desc_ptr(w);
  memset(o, 0, (size_t)first * orow);
  memset(o + (size_t)last * orow, 0, (size_t)(M - last) * orow);
  for (int64_t e = 0; e < E; e++) {
    int64_t r0 = cpu_index_at(offs, e), m = cpu_index_at(offs, e + 1) - r0;
    if (m == 0) continue;
    if (quant) {
      bp_status_t st = grouped_quant_expert(call, e, r0, m);
      if (st != BP_OK) return st;
      continue;
    }
    unsigned char* c = o + (size_t)r0 * orow;
    if (b) { /* the bias first, accumulated onto: one rounding of the sum */
      for (int64_t r = 0; r < m; r++) memcpy(c + (size_t)r * orow, cpu_desc_ptr(b) + (size_t)e * orow, orow);
    }
    /* B[k, n] = weight[e, n, k]: the transposed view, read in place */
    bp_status_t st = cpu_gemm(out->dtype, m, N, K, 1.0, xp + (size_t)(r0 * K) * es, K, 1,
                              wp + (size_t)(e * N * K) * es, 1, K, b != NULL, c, N, 1);
    if (st != BP_OK) return st;
  }
  return BP_OK;
}

/* ---- family -------------------------------------------------------------------- */

static bp_status_t exec_moe_dispatch(const bp_op_call_t* call) {
  bp_status_t st = cpu_call_require_dense(call);
  if (st != BP_OK) return st;
  switch (call->op_id) {
    case BP_OP_moe_permute: return exec_moe_permute(call);
    case BP_OP_moe_unpermute: return exec_moe_unpermute(call);
    default: return exec_grouped_mm(call);
  }
}

static int supported_moe_dispatch(const bp_op_call_t* call, char* msg, size_t cap) {
  (void)call, (void)msg, (void)cap;
  return BP_SUPPORT_OK;
}

const cpu_family_t cpu_family_moe_dispatch = {
    "moe_dispatch", CPU_FAMILY_OPS(BP_OP_moe_permute, BP_OP_moe_unpermute, BP_OP_grouped_mm),
    exec_moe_dispatch, supported_moe_dispatch, 0,
};
