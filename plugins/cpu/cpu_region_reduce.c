/* backplane CPU plugin: reduction prologues (cpu_region.h, CPU_STEP_REDUCE).
 *
 * A GRAPH region whose nodes are elementwise ops feeding one last sum,
 * mean, amax or amin (the prologue's result a temporary nothing else
 * reads) runs as one step: the prologue's program writes a chunk of its
 * result (at most CPU_RED_CHUNK elements, cache-resident) into a scratch
 * buffer of the worker and the reduction folds that chunk at once, so the
 * result is never materialized. A chunk is a box of the result's index
 * space (leading indices fixed, a range of one dim, the trailing dims
 * whole), so every program input is a strided view of it. The reduced
 * dims follow every kept dim (size-1 dims aside): a chunk then lies inside
 * the run of one output element (its partial is combined with the run's
 * other chunks in chunk order after the loop: deterministic) or holds
 * whole runs (written at once). f32 chunks fold with the eager kernel's
 * row fold (cpu_reduce.c), partials combine in f64; amax and amin
 * propagate NaN. Compute dtypes f32 and f64.
 */
#include <math.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "cpu_region.h"

#define NONE_ID UINT32_MAX
/* Elements of the prologue's result per chunk: 64 KiB of f32 (L2). */
#define CPU_RED_CHUNK 16384
/* Chunks per parallel task (about CPU_EWP_GRAIN elements). */
#define CPU_RED_GRAIN 2

static int refuse(char* msg, size_t cap, int reason, const char* what, unsigned v) {
  bp_plugin_format(msg, cap, 0, "reduction prologue: %s (%u)", what, v);
  return reason;
}

static int is_prologue_reduction(uint32_t op) {
  return op == BP_OP_sum || op == BP_OP_mean || op == BP_OP_amax || op == BP_OP_amin;
}

/* Bit set of the reduced dims of a node over an input of `rank` (attrs
 * checked by the core: dims in range, not repeated). */
static uint32_t reduced_mask(const bp_reduce_attrs_t* a, uint32_t rank) {
  if (!a || (a->flags & BP_REDUCE_ALL_DIMS) || a->num_dims == 0) return rank ? (1u << rank) - 1 : 0;
  uint32_t mask = 0;
  for (int32_t k = 0; k < a->num_dims && k < BP_MAX_RANK; k++) {
    int32_t d = a->dims[k] < 0 ? a->dims[k] + (int32_t)rank : a->dims[k];
    if (d >= 0 && d < (int32_t)rank) mask |= 1u << d;
  }
  return mask;
}

/* Length of one output element's run: the product of the sizes after the
 * last kept dim of size > 1; 0 when a reduced dim of size > 1 comes
 * before a kept one (the run is not contiguous). */
static int64_t run_length(const bp_tensor_desc_t* src, uint32_t mask) {
  int64_t len = 1;
  int seen_kept = 0;
  for (uint32_t d = src->rank; d-- > 0;) {
    if (src->sizes[d] == 1) continue;
    if (mask & (1u << d)) {
      if (seen_kept) return 0;
      len *= src->sizes[d];
    } else {
      seen_kept = 1;
    }
  }
  return len;
}

int cpu_region_reduce_shape(const bp_region_desc_t* g) {
  if (g->num_nodes < 2) return 0;
  const bp_region_node_t* red = g->nodes[g->num_nodes - 1];
  if (!is_prologue_reduction(red->op_id) || red->num_inputs != 1 || red->num_outputs != 1) return 0;
  uint32_t src = red->inputs[0];
  if (src == NONE_ID || src < g->num_args || red->outputs[0] < g->num_inputs || red->outputs[0] >= g->num_args)
    return 0;
  for (uint32_t n = 0; n + 1 < g->num_nodes; n++) {
    const bp_region_node_t* node = g->nodes[n];
    if (!cpu_region_node_fusable(node) || node->outputs[0] < g->num_args) return 0; /* every value stays inside */
    for (uint32_t i = 0; i < node->num_inputs; i++)
      if (node->inputs[i] == src) return 0; /* the result is read by the reduction alone */
  }
  return 1;
}

int cpu_region_reduce_check(const bp_region_desc_t* g, char* msg, size_t cap) {
  const bp_region_node_t* red = g->nodes[g->num_nodes - 1];
  const bp_tensor_desc_t* src = g->values[red->inputs[0]];
  const bp_tensor_desc_t* out = g->values[red->outputs[0]];
  const bp_reduce_attrs_t* a = red->attrs;
  if (src->dtype != BP_DTYPE_F32 && src->dtype != BP_DTYPE_F64)
    return refuse(msg, cap, BP_SUPPORT_DTYPE, "the prologue's result is not f32 or f64; dtype", src->dtype);
  if (out->dtype != src->dtype || (a && a->dtype != BP_DTYPE_INVALID && a->dtype != src->dtype))
    return refuse(msg, cap, BP_SUPPORT_DTYPE, "the reduction changes the dtype; output dtype", out->dtype);
  int64_t numel = 1;
  for (uint32_t d = 0; d < src->rank; d++) numel *= src->sizes[d];
  if (numel == 0) return refuse(msg, cap, BP_SUPPORT_SIZE, "an empty input runs eagerly; rank", src->rank);
  if (run_length(src, reduced_mask(a, src->rank)) == 0)
    return refuse(msg, cap, BP_SUPPORT_ATTRIBUTE,
                  "the reduced dims must come after every kept dim; reduced dims mask",
                  reduced_mask(a, src->rank));
  return 0;
}

/* ---- running ------------------------------------------------------------ */
typedef struct red_job {
  const cpu_step_t* s;
  const bp_tensor_desc_t* const* in; /* the program's inputs */
  const bp_tensor_desc_t* out;       /* the reduction's output */
  uint32_t dtype, esize;
  int rank;                          /* of the prologue's result (>= 1) */
  int64_t sizes[BP_MAX_RANK];
  int q;                             /* the dim a chunk takes a range of */
  int64_t c, cq;                     /* range length on q; ranges per q-run */
  int64_t slab;                      /* elements after dim q (one step along q) */
  int64_t run;                       /* elements per output element */
  int within_run;                    /* 1: a chunk lies inside one run */
  double* part;                      /* within_run: per chunk */
  atomic_int failed;                 /* a bp_status_t of a chunk, or 0 */
} red_job_t;

static double fold_identity(uint32_t op) {
  return op == BP_OP_amax ? -INFINITY : op == BP_OP_amin ? INFINITY : 0.0;
}

static double combine(uint32_t op, double a, double b) {
  if (op == BP_OP_sum || op == BP_OP_mean) return a + b;
  if (a != a || b != b) return NAN;
  return op == BP_OP_amax ? (b > a ? b : a) : (b < a ? b : a);
}

/* f32: the eager kernel's row fold, so both agree to the bit per row. */
static double fold_f32(uint32_t op, const float* x, int64_t n, double acc) {
  int nan = 0;
  cpu_reduce_row_f32(op, x, n, &acc, &nan);
  return nan ? NAN : acc;
}

/* f64: eight independent lanes (no reassociation needed to vectorize). */
static double fold_f64(uint32_t op, const double* x, int64_t n, double acc) {
  double lane[8];
  for (int k = 0; k < 8; k++) lane[k] = fold_identity(op);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    for (int k = 0; k < 8; k++) lane[k] = combine(op, lane[k], x[i + k]);
  for (; i < n; i++) acc = combine(op, acc, x[i]);
  for (int k = 0; k < 8; k++) acc = combine(op, acc, lane[k]);
  return acc;
}

static double fold(const red_job_t* j, const unsigned char* p, int64_t n, double acc) {
  return j->dtype == BP_DTYPE_F32 ? fold_f32(j->s->op_id, (const float*)(const void*)p, n, acc)
                                  : fold_f64(j->s->op_id, (const double*)(const void*)p, n, acc);
}

/* Writes output element `row` (row-major over the output's sizes). */
static void put(const red_job_t* j, int64_t row, double acc) {
  if (j->s->op_id == BP_OP_mean) acc /= (double)j->run;
  const bp_tensor_desc_t* o = j->out;
  int64_t off = 0, rem = row;
  for (uint32_t d = o->rank; d-- > 0;) {
    off += (rem % o->sizes[d]) * o->strides[d];
    rem /= o->sizes[d];
  }
  unsigned char* p = cpu_desc_ptr(o) + off * (int64_t)j->esize;
  if (j->dtype == BP_DTYPE_F32) *(float*)(void*)p = (float)acc;
  else *(double*)(void*)p = acc;
}

/* Program input k as a view of chunk (idx on dims < q, [i0, i0 + cnt) on q). */
static void input_view(const red_job_t* j, const bp_tensor_desc_t* d, const int64_t* idx, int64_t i0,
                       int64_t cnt, bp_tensor_desc_t* v) {
  *v = *d;
  int align = j->rank - (int)d->rank;
  int64_t off = 0;
  uint32_t r = 0;
  for (int dd = 0; dd < j->rank; dd++) {
    int di = dd - align;
    if (di < 0) continue;
    int bcast = d->sizes[di] == 1;
    if (dd < j->q) {
      if (!bcast) off += idx[dd] * d->strides[di];
      continue;
    }
    v->sizes[r] = dd == j->q && !bcast ? cnt : d->sizes[di];
    v->strides[r] = d->strides[di];
    if (dd == j->q && !bcast) off += i0 * d->strides[di];
    r++;
  }
  v->rank = r;
  v->byte_offset = d->byte_offset + (uint64_t)(off * (int64_t)bp_dtype_size(d->dtype));
}

static void red_chunks(void* ctx, int64_t begin, int64_t end) {
  red_job_t* j = ctx;
  const cpu_step_t* s = j->s;
  unsigned char* scratch = aligned_alloc(64, (size_t)CPU_RED_CHUNK * j->esize);
  if (!scratch) {
    int none = 0;
    atomic_compare_exchange_strong(&j->failed, &none, (int)BP_RESOURCE_EXHAUSTED);
    return;
  }
  struct bpp_buffer_s holder;
  for (int64_t ch = begin; ch < end && !atomic_load_explicit(&j->failed, memory_order_relaxed); ch++) {
    int64_t outer = ch / j->cq, i0 = (ch % j->cq) * j->c;
    int64_t cnt = j->sizes[j->q] - i0 < j->c ? j->sizes[j->q] - i0 : j->c;
    int64_t idx[BP_MAX_RANK], rem = outer;
    for (int d = j->q; d-- > 0;) {
      idx[d] = rem % j->sizes[d];
      rem /= j->sizes[d];
    }
    bp_tensor_desc_t views[CPU_EWP_MAX_INPUTS], res;
    const bp_tensor_desc_t* vp[CPU_EWP_MAX_INPUTS];
    for (uint32_t k = 0; k < s->prog_nin; k++) {
      input_view(j, j->in[k], idx, i0, cnt, &views[k]);
      vp[k] = &views[k];
    }
    int64_t rsizes[BP_MAX_RANK], rstrides[BP_MAX_RANK], st = 1;
    uint32_t rr = (uint32_t)(j->rank - j->q);
    for (uint32_t d = rr; d-- > 0;) {
      rsizes[d] = d == 0 ? cnt : j->sizes[j->q + (int)d];
      rstrides[d] = st;
      st *= rsizes[d];
    }
    cpu_desc_host(&res, &holder, scratch, j->dtype, rr, rsizes, rstrides);
    const bp_tensor_desc_t* rp = &res;
    bp_status_t status = cpu_ewp_run(s->prog, vp, &rp);
    if (status != BP_OK) {
      int none = 0;
      atomic_compare_exchange_strong(&j->failed, &none, (int)status);
      break;
    }
    int64_t n = cnt * j->slab; /* elements in the chunk */
    if (j->within_run) {
      j->part[ch] = fold(j, scratch, n, fold_identity(s->op_id));
      continue;
    }
    int64_t first = (outer * j->sizes[j->q] + i0) * j->slab / j->run;
    for (int64_t r = 0; r < n / j->run; r++)
      put(j, first + r, fold(j, scratch + (size_t)(r * j->run) * j->esize, j->run, fold_identity(s->op_id)));
  }
  free(scratch);
}

bp_status_t cpu_region_reduce_run(const cpu_step_t* s, const bp_tensor_desc_t* const* inputs,
                                  const bp_tensor_desc_t* result, const bp_tensor_desc_t* out) {
  red_job_t j;
  memset(&j, 0, sizeof j);
  j.s = s;
  j.in = inputs;
  j.out = out;
  j.dtype = result->dtype;
  j.esize = (uint32_t)bp_dtype_size(result->dtype);
  j.rank = result->rank ? (int)result->rank : 1;
  int64_t numel = 1;
  for (int d = 0; d < j.rank; d++) {
    j.sizes[d] = result->rank ? result->sizes[d] : 1;
    numel *= j.sizes[d];
  }
  j.run = run_length(result, reduced_mask(s->attrs, result->rank));
  if (numel == 0 || j.run == 0)
    return cpu_error(BP_INTERNAL, "cpu: reduction prologue: %lld elements, runs of %lld", (long long)numel,
                     (long long)j.run);
  /* The chunk: the first dim q whose trailing product fits, a range of it. */
  int64_t tail = numel;
  j.q = 0;
  while (tail / j.sizes[j.q] > CPU_RED_CHUNK) {
    tail /= j.sizes[j.q];
    j.q++;
  }
  j.slab = tail / j.sizes[j.q];
  j.c = CPU_RED_CHUNK / j.slab;
  if (j.c < 1) j.c = 1;
  if (j.c > j.sizes[j.q]) j.c = j.sizes[j.q];
  j.cq = (j.sizes[j.q] + j.c - 1) / j.c;
  int64_t nchunks = numel / tail * j.cq;
  /* A chunk smaller than a run lies inside one (the run's dims include
   * every dim after q); else it holds whole runs (they divide the slab). */
  j.within_run = j.run > j.c * j.slab;
  if (j.within_run) {
    j.part = malloc(sizeof(double) * (size_t)nchunks);
    if (!j.part) return cpu_error(BP_RESOURCE_EXHAUSTED, "cpu: reduction prologue: out of memory for %lld partials",
                                  (long long)nchunks);
  }
  if (nchunks <= CPU_RED_GRAIN) red_chunks(&j, 0, nchunks);
  else cpu_parallel_for(nchunks, CPU_RED_GRAIN, red_chunks, &j);
  bp_status_t st = (bp_status_t)atomic_load(&j.failed);
  if (st == BP_OK && j.within_run) {
    int64_t per_run = nchunks / (numel / j.run);
    for (int64_t r = 0; r < numel / j.run; r++) {
      double acc = fold_identity(s->op_id);
      for (int64_t k = 0; k < per_run; k++) acc = combine(s->op_id, acc, j.part[r * per_run + k]);
      put(&j, r, acc);
    }
  }
  free(j.part);
  if (st == BP_RESOURCE_EXHAUSTED) return cpu_error(st, "cpu: reduction prologue: out of memory for a chunk");
  return st;
}
