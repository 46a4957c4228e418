/* backplane CPU plugin: the index kernel family -- embedding, embedding_bag,
 * embedding_dense_backward, gather, index, index_put, index_select,
 * masked_scatter and nonzero.
 *
 * Every kernel validates the index values it will use before it writes
 * anything: an index out of range fails the stream with OUT_OF_RANGE and a
 * message naming the value and the bound, and the outputs stay untouched.
 * Data movement copies element bytes (no conversion: outputs have their
 * source's dtype), so one loop serves every dtype. Operands have arbitrary
 * strides (elements) and byte offsets.
 *
 * Threading: kernels run on a stream worker; the pure gathers and the
 * embedding reductions split their output over cpu_parallel_for. index_put,
 * masked_scatter and nonzero run serially (their order is their meaning).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cpu_kernels.h"

/* ---- small helpers ----------------------------------------------------------------- */

/* A descriptor with rank >= 1: 0-d tensors act as [1] (PyTorch's
 * ensure_nonempty_dim). */
typedef struct nd {
  uint32_t rank;
  int64_t sizes[BP_MAX_RANK];
  int64_t strides[BP_MAX_RANK];
  unsigned char* base;
  uint32_t dtype, es;
} nd_t;

static void nd_from(nd_t* n, const bp_tensor_desc_t* d) {
  n->rank = d->rank ? d->rank : 1;
  n->sizes[0] = 1;
  n->strides[0] = 0;
  for (uint32_t k = 0; k < d->rank; k++) {
    n->sizes[k] = d->sizes[k];
    n->strides[k] = d->strides[k];
  }
  n->base = cpu_desc_ptr(d);
  n->dtype = d->dtype;
  n->es = bp_dtype_size(d->dtype);
}

static int64_t numel_of(uint32_t rank, const int64_t* sizes) {
  int64_t n = 1;
  for (uint32_t k = 0; k < rank; k++) n *= sizes[k];
  return n;
}

static inline void next_index(uint32_t rank, const int64_t* sizes, int64_t* idx) {
  for (uint32_t k = rank; k-- > 0;) {
    if (++idx[k] < sizes[k]) return;
    idx[k] = 0;
  }
}

static void unravel(int64_t lin, uint32_t rank, const int64_t* sizes, int64_t* idx) {
  for (uint32_t k = rank; k-- > 0;) {
    idx[k] = sizes[k] ? lin % sizes[k] : 0;
    lin = sizes[k] ? lin / sizes[k] : 0;
  }
}

static inline int64_t dot(const int64_t* idx, const int64_t* strides, uint32_t rank) {
  int64_t off = 0;
  for (uint32_t k = 0; k < rank; k++) off += idx[k] * strides[k];
  return off;
}

/* Index value (i32 or i64) at element offset `off`. */
static inline int64_t ld_index(const unsigned char* base, uint32_t dtype, int64_t off) {
  if (dtype == BP_DTYPE_I32) {
    int32_t v;
    memcpy(&v, base + off * 4, 4);
    return v;
  }
  int64_t v;
  memcpy(&v, base + off * 8, 8);
  return v;
}

static inline void st_i64(unsigned char* base, uint32_t dtype, int64_t off, int64_t v) {
  if (dtype == BP_DTYPE_I32) {
    int32_t w = (int32_t)v;
    memcpy(base + off * 4, &w, 4);
  } else {
    memcpy(base + off * 8, &v, 8);
  }
}

/* Copies one element of `es` bytes (1, 2, 4 or 8). */
static inline void copy_elem(unsigned char* d, const unsigned char* s, uint32_t es) {
  switch (es) {
    case 1: *d = *s; break;
    case 2: memcpy(d, s, 2); break;
    case 4: memcpy(d, s, 4); break;
    default: memcpy(d, s, 8); break;
  }
}

/* d += s in dtype (floats round once per add, as PyTorch's +=; integers
 * wrap; bool is logical or). */
static void add_elem(uint32_t dtype, unsigned char* d, const unsigned char* s) {
  switch (dtype) {
#define ADD_NATIVE(D, T)          \
  case D: {                       \
    T a, b;                       \
    memcpy(&a, d, sizeof a);      \
    memcpy(&b, s, sizeof b);      \
    a = (T)(a + b);               \
    memcpy(d, &a, sizeof a);      \
    break;                        \
  }
#define ADD_WRAP(D, T, U)                    \
  case D: {                                  \
    T a, b;                                  \
    memcpy(&a, d, sizeof a);                 \
    memcpy(&b, s, sizeof b);                 \
    a = (T)(U)((U)a + (U)b);                 \
    memcpy(d, &a, sizeof a);                 \
    break;                                   \
  }
#define ADD_HALF(D, TO, FROM)                       \
  case D: {                                         \
    uint16_t a, b;                                  \
    memcpy(&a, d, 2);                               \
    memcpy(&b, s, 2);                               \
    a = FROM(TO(a) + TO(b));                        \
    memcpy(d, &a, 2);                               \
    break;                                          \
  }
    ADD_NATIVE(BP_DTYPE_F32, float)
    ADD_NATIVE(BP_DTYPE_F64, double)
    ADD_WRAP(BP_DTYPE_I8, int8_t, uint8_t)
    ADD_WRAP(BP_DTYPE_U8, uint8_t, uint8_t)
    ADD_WRAP(BP_DTYPE_I16, int16_t, uint16_t)
    ADD_WRAP(BP_DTYPE_I32, int32_t, uint32_t)
    ADD_WRAP(BP_DTYPE_I64, int64_t, uint64_t)
    ADD_HALF(BP_DTYPE_F16, bp_f16_to_f32, bp_f32_to_f16)
    ADD_HALF(BP_DTYPE_BF16, bp_bf16_to_f32, bp_f32_to_bf16)
#undef ADD_NATIVE
#undef ADD_WRAP
#undef ADD_HALF
    case BP_DTYPE_BOOL: *d = (uint8_t)((*d != 0) | (*s != 0)); break;
    default: break; /* excluded by supported_index */
  }
}

/* Checks every value of index tensor `t` against [-bound, bound) (negative
 * values wrap) or [0, bound). */
static bp_status_t check_indices(const bp_op_call_t* call, const nd_t* t, int64_t bound,
                                 int allow_negative, uint32_t dim, const char* what) {
  int64_t n = numel_of(t->rank, t->sizes);
  int64_t idx[BP_MAX_RANK] = {0};
  int64_t lo = allow_negative ? -bound : 0;
  for (int64_t i = 0; i < n; i++) {
    int64_t v = ld_index(t->base, t->dtype, dot(idx, t->strides, t->rank));
    if (v < lo || v >= bound) {
      return cpu_error(BP_OUT_OF_RANGE,
                       "cpu: %s: %s: index %lld is out of bounds for dimension %u with size %lld",
                       cpu_op_name(call->op_id), what, (long long)v, dim, (long long)bound);
    }
    next_index(t->rank, t->sizes, idx);
  }
  return BP_OK;
}

/* ---- advanced-indexing geometry (index, index_put) ----------------------------------- */

/* Output dim k of self[indices] is self dim role[k] (>= 0) or broadcast
 * index dim -1 - role[k]. Indexed self dims d read their index tensor at
 * istr[d] (strides broadcast over the index shape B). */
typedef struct adv {
  uint32_t out_rank;
  int64_t out_sizes[BP_MAX_RANK];
  int role[BP_MAX_RANK];
  uint32_t brank;
  int64_t bsizes[BP_MAX_RANK];
  uint32_t self_rank;
  int64_t self_sizes[BP_MAX_RANK];
  int indexed[BP_MAX_RANK];
  nd_t idx[BP_MAX_RANK];
  int64_t istr[BP_MAX_RANK][BP_MAX_RANK];
} adv_t;

/* Inputs [1, 1 + count) of the call are the list; sizes were validated by
 * the core, so this only recomputes the geometry. */
static bp_status_t adv_init(adv_t* g, const bp_op_call_t* call, uint32_t count) {
  const bp_tensor_desc_t* self = call->inputs[0];
  const uint32_t list = call->list_begin; /* the indices: inputs[list .. list + count) */
  memset(g, 0, sizeof *g);
  g->self_rank = self->rank;
  memcpy(g->self_sizes, self->sizes, sizeof(int64_t) * self->rank);
  if (count > self->rank)
    return cpu_error(BP_INVALID_ARGUMENT, "cpu: %s: %u indices for rank %u",
                     cpu_op_name(call->op_id), count, self->rank);
  uint32_t nidx = 0, first = 0, last = 0;
  int adjacent = 1;
  for (uint32_t k = 0; k < count; k++) {
    const bp_tensor_desc_t* t = call->inputs[list + k];
    if (t->dtype == BP_DTYPE_INVALID) continue;
    if (nidx == 0) first = k;
    else if (k != last + 1) adjacent = 0;
    last = k;
    nidx++;
    g->indexed[k] = 1;
    nd_from(&g->idx[k], t);
    if (t->rank > g->brank) {
      uint32_t shift = t->rank - g->brank;
      memmove(g->bsizes + shift, g->bsizes, sizeof(int64_t) * g->brank);
      for (uint32_t d = 0; d < shift; d++) g->bsizes[d] = 1;
      g->brank = t->rank;
    }
    for (uint32_t d = 0; d < t->rank; d++) {
      int64_t s = t->sizes[d];
      int64_t* b = &g->bsizes[g->brank - t->rank + d];
      if (*b == 1) *b = s;
      else if (s != 1 && s != *b)
        return cpu_error(BP_INVALID_ARGUMENT, "cpu: %s: index shapes do not broadcast",
                         cpu_op_name(call->op_id));
    }
  }
  for (uint32_t k = 0; k < count; k++) {
    if (!g->indexed[k]) continue;
    const bp_tensor_desc_t* t = call->inputs[1 + k];
    for (uint32_t b = 0; b < g->brank; b++) {
      int td = (int)b - (int)(g->brank - t->rank);
      g->istr[k][b] = td < 0 || t->sizes[td] == 1 ? 0 : t->strides[td];
    }
  }
  uint32_t o = 0;
  if (nidx == 0) {
    for (uint32_t d = 0; d < self->rank; d++) g->role[o++] = (int)d;
  } else if (adjacent) {
    for (uint32_t d = 0; d < first; d++) g->role[o++] = (int)d;
    for (uint32_t b = 0; b < g->brank; b++) g->role[o++] = -1 - (int)b;
    for (uint32_t d = last + 1; d < self->rank; d++) g->role[o++] = (int)d;
  } else {
    for (uint32_t b = 0; b < g->brank; b++) g->role[o++] = -1 - (int)b;
    for (uint32_t d = 0; d < self->rank; d++)
      if (!g->indexed[d]) g->role[o++] = (int)d;
  }
  g->out_rank = o;
  for (uint32_t k = 0; k < o; k++)
    g->out_sizes[k] = g->role[k] >= 0 ? self->sizes[g->role[k]] : g->bsizes[-1 - g->role[k]];
  return BP_OK;
}

/* Offset (elements, with `strides` of a tensor shaped like self) of the self
 * element that output element `o` of self[indices] names. Indices were
 * checked, so negative values wrap into range. */
static inline int64_t adv_offset(const adv_t* g, const int64_t* o, const int64_t* strides) {
  int64_t bpos[BP_MAX_RANK];
  int64_t off = 0;
  for (uint32_t k = 0; k < g->out_rank; k++) {
    if (g->role[k] >= 0) off += o[k] * strides[g->role[k]];
    else bpos[-1 - g->role[k]] = o[k];
  }
  for (uint32_t d = 0; d < g->self_rank; d++) {
    if (!g->indexed[d]) continue;
    int64_t v = ld_index(g->idx[d].base, g->idx[d].dtype, dot(bpos, g->istr[d], g->brank));
    if (v < 0) v += g->self_sizes[d];
    off += v * strides[d];
  }
  return off;
}

static bp_status_t adv_check(const bp_op_call_t* call, const adv_t* g) {
  if (numel_of(g->out_rank, g->out_sizes) == 0) return BP_OK; /* nothing is looked up */
  char what[32];
  for (uint32_t d = 0; d < g->self_rank; d++) {
    if (!g->indexed[d]) continue;
    snprintf(what, sizeof what, "indices[%u]", d);
    bp_status_t st = check_indices(call, &g->idx[d], g->self_sizes[d], 1, d, what);
    if (st) return st;
  }
  return BP_OK;
}

/* ---- pure gathers: one parallel loop over the output ---------------------------------- */

enum map_kind { MAP_GATHER, MAP_INDEX_SELECT, MAP_EMBEDDING, MAP_INDEX };

typedef struct map_job {
  int kind;
  uint32_t es;
  nd_t out, src, index;
  uint32_t dim;
  const adv_t* adv;
} map_job_t;

static inline int64_t map_src_offset(const map_job_t* j, const int64_t* o) {
  switch (j->kind) {
    case MAP_GATHER: {
      int64_t v = ld_index(j->index.base, j->index.dtype, dot(o, j->index.strides, j->out.rank));
      int64_t off = 0;
      for (uint32_t k = 0; k < j->src.rank; k++) off += (k == j->dim ? v : o[k]) * j->src.strides[k];
      return off;
    }
    case MAP_INDEX_SELECT: {
      int64_t v = ld_index(j->index.base, j->index.dtype, o[j->dim] * j->index.strides[0]);
      int64_t off = 0;
      for (uint32_t k = 0; k < j->src.rank; k++) off += (k == j->dim ? v : o[k]) * j->src.strides[k];
      return off;
    }
    case MAP_EMBEDDING: {
      uint32_t r = j->out.rank - 1;
      int64_t v = j->index.rank && r ? ld_index(j->index.base, j->index.dtype, dot(o, j->index.strides, r))
                                     : ld_index(j->index.base, j->index.dtype, 0);
      return v * j->src.strides[0] + o[r] * j->src.strides[1];
    }
    default:
      return adv_offset(j->adv, o, j->src.strides);
  }
}

static void map_range(void* ctx, int64_t begin, int64_t end) {
  const map_job_t* j = ctx;
  int64_t o[BP_MAX_RANK];
  unravel(begin, j->out.rank, j->out.sizes, o);
  for (int64_t i = begin; i < end; i++) {
    copy_elem(j->out.base + dot(o, j->out.strides, j->out.rank) * j->es,
              j->src.base + map_src_offset(j, o) * j->es, j->es);
    next_index(j->out.rank, j->out.sizes, o);
  }
}

static void map_run(map_job_t* j) {
  j->es = j->out.es;
  int64_t n = numel_of(j->out.rank, j->out.sizes);
  cpu_parallel_for(n, 16384, map_range, j);
}

static bp_status_t exec_gather(const bp_op_call_t* call) {
  const bp_dim_attrs_t* a = call->attrs;
  map_job_t j;
  memset(&j, 0, sizeof j);
  j.kind = MAP_GATHER;
  nd_from(&j.src, call->inputs[0]);
  nd_from(&j.index, call->inputs[1]);
  nd_from(&j.out, call->outputs[0]);
  int64_t dim = a->dim < 0 ? a->dim + (int64_t)j.src.rank : a->dim;
  if (dim < 0 || dim >= (int64_t)j.src.rank || j.index.rank != j.src.rank || j.out.rank != j.src.rank)
    return cpu_error(BP_INVALID_ARGUMENT, "cpu: gather: bad dim %d or ranks", a->dim);
  j.dim = (uint32_t)dim;
  bp_status_t st = check_indices(call, &j.index, j.src.sizes[j.dim], 0, j.dim, "index");
  if (st) return st;
  map_run(&j);
  return BP_OK;
}

static bp_status_t exec_index_select(const bp_op_call_t* call) {
  const bp_dim_attrs_t* a = call->attrs;
  map_job_t j;
  memset(&j, 0, sizeof j);
  j.kind = MAP_INDEX_SELECT;
  nd_from(&j.src, call->inputs[0]);
  nd_from(&j.index, call->inputs[1]);
  nd_from(&j.out, call->outputs[0]);
  int64_t dim = a->dim < 0 ? a->dim + (int64_t)j.src.rank : a->dim;
  if (dim < 0 || dim >= (int64_t)j.src.rank || j.index.rank != 1 || j.out.rank != j.src.rank)
    return cpu_error(BP_INVALID_ARGUMENT, "cpu: index_select: bad dim %d or ranks", a->dim);
  j.dim = (uint32_t)dim;
  bp_status_t st = check_indices(call, &j.index, j.src.sizes[j.dim], 0, j.dim, "index");
  if (st) return st;
  map_run(&j);
  return BP_OK;
}

/* Embedding rows that are contiguous in weight and out: one memcpy each. */
typedef struct rows_job {
  const map_job_t* j;
  int64_t row_bytes;
} rows_job_t;

static void rows_range(void* ctx, int64_t begin, int64_t end) {
  const rows_job_t* r = ctx;
  const map_job_t* j = r->j;
  uint32_t ir = j->index.rank;
  int64_t i[BP_MAX_RANK], o[BP_MAX_RANK + 1] = {0};
  unravel(begin, ir, j->index.sizes, i);
  for (int64_t e = begin; e < end; e++) {
    memcpy(o, i, sizeof(int64_t) * ir);
    int64_t v = ld_index(j->index.base, j->index.dtype, dot(i, j->index.strides, ir));
    memcpy(j->out.base + dot(o, j->out.strides, ir + 1) * j->es,
           j->src.base + v * j->src.strides[0] * j->es, (size_t)r->row_bytes);
    next_index(ir, j->index.sizes, i);
  }
}

static bp_status_t exec_embedding(const bp_op_call_t* call) {
  map_job_t j;
  memset(&j, 0, sizeof j);
  j.kind = MAP_EMBEDDING;
  nd_from(&j.src, call->inputs[0]);
  j.index.base = cpu_desc_ptr(call->inputs[1]);
  j.index.dtype = call->inputs[1]->dtype;
  j.index.rank = call->inputs[1]->rank; /* 0-d indices stay rank 0 here */
  memcpy(j.index.sizes, call->inputs[1]->sizes, sizeof(int64_t) * j.index.rank);
  memcpy(j.index.strides, call->inputs[1]->strides, sizeof(int64_t) * j.index.rank);
  nd_from(&j.out, call->outputs[0]);
  if (j.src.rank != 2 || j.out.rank != j.index.rank + 1)
    return cpu_error(BP_INVALID_ARGUMENT, "cpu: embedding: bad ranks");
  nd_t idx;
  nd_from(&idx, call->inputs[1]);
  bp_status_t st = check_indices(call, &idx, j.src.sizes[0], 0, 0, "indices");
  if (st) return st;
  int64_t dim = j.src.sizes[1];
  if (dim > 1 && j.src.strides[1] == 1 && j.out.strides[j.out.rank - 1] == 1) {
    j.es = j.out.es;
    rows_job_t r = {&j, dim * (int64_t)j.es};
    cpu_parallel_for(numel_of(j.index.rank, j.index.sizes), 16384 / dim + 1, rows_range, &r);
    return BP_OK;
  }
  map_run(&j);
  return BP_OK;
}

static bp_status_t exec_index_op(const bp_op_call_t* call) {
  adv_t* g = malloc(sizeof *g);
  if (!g) return cpu_error(BP_RESOURCE_EXHAUSTED, "cpu: index: out of host memory");
  bp_status_t st = adv_init(g, call, call->list_count);
  if (st == BP_OK) st = adv_check(call, g);
  if (st == BP_OK) {
    map_job_t j;
    memset(&j, 0, sizeof j);
    j.kind = MAP_INDEX;
    j.adv = g;
    nd_from(&j.src, call->inputs[0]);
    nd_from(&j.out, call->outputs[0]);
    j.out.rank = g->out_rank;
    memcpy(j.out.sizes, g->out_sizes, sizeof(int64_t) * g->out_rank);
    memcpy(j.out.strides, call->outputs[0]->strides, sizeof(int64_t) * g->out_rank);
    map_run(&j);
  }
  free(g);
  return st;
}

/* ---- index_put ---------------------------------------------------------------------- */

static bp_status_t exec_index_put(const bp_op_call_t* call) {
  const bp_index_put_attrs_t* a = call->attrs;
  const bp_tensor_desc_t* self = call->inputs[0];
  /* values: the fixed operand right after the index list. */
  const uint32_t vi = call->list_begin + call->list_count;
  if (vi >= call->num_inputs)
    return cpu_error(BP_INVALID_ARGUMENT, "cpu: index_put: 'values' is absent");
  const bp_tensor_desc_t* values = call->inputs[vi];
  const bp_tensor_desc_t* out = call->outputs[0];
  if (values->dtype != out->dtype)
    return cpu_error(BP_INVALID_ARGUMENT, "cpu: index_put: 'values' is absent or not of %s",
                     bp_dtype_name(out->dtype));
  adv_t* g = malloc(sizeof *g);
  if (!g) return cpu_error(BP_RESOURCE_EXHAUSTED, "cpu: index_put: out of host memory");
  bp_status_t st = adv_init(g, call, call->list_count);
  if (st == BP_OK) st = adv_check(call, g);
  if (st == BP_OK) st = cpu_cast_copy(out, self); /* a no-op when run in place */
  if (st == BP_OK) {
    int64_t vstr[BP_MAX_RANK];
    for (uint32_t k = 0; k < g->out_rank; k++) {
      int vd = (int)k - (int)(g->out_rank - values->rank);
      vstr[k] = vd < 0 || values->sizes[vd] == 1 ? 0 : values->strides[vd];
    }
    uint32_t es = bp_dtype_size(out->dtype);
    unsigned char* ob = cpu_desc_ptr(out);
    const unsigned char* vb = cpu_desc_ptr(values);
    int64_t n = numel_of(g->out_rank, g->out_sizes);
    int64_t o[BP_MAX_RANK] = {0};
    /* Serial, in row-major order of the indexing result: with accumulate
     * duplicates add in that order; without, the last write wins. */
    for (int64_t i = 0; i < n; i++) {
      unsigned char* d = ob + adv_offset(g, o, out->strides) * es;
      const unsigned char* s = vb + dot(o, vstr, g->out_rank) * es;
      if (a->accumulate) add_elem(out->dtype, d, s);
      else copy_elem(d, s, es);
      next_index(g->out_rank, g->out_sizes, o);
    }
  }
  free(g);
  return st;
}

/* ---- masked_scatter ---------------------------------------------------------------------- */

static bp_status_t exec_masked_scatter(const bp_op_call_t* call) {
  const bp_tensor_desc_t *self = call->inputs[0], *mask = call->inputs[1],
                         *source = call->inputs[2], *out = call->outputs[0];
  uint32_t rank = out->rank;
  int64_t mstr[BP_MAX_RANK];
  for (uint32_t k = 0; k < rank; k++) {
    int md = (int)k - (int)(rank - mask->rank);
    mstr[k] = md < 0 || mask->sizes[md] == 1 ? 0 : mask->strides[md];
  }
  const unsigned char* mb = cpu_desc_ptr(mask);
  int64_t n = numel_of(rank, out->sizes), ones = 0;
  int64_t o[BP_MAX_RANK] = {0};
  for (int64_t i = 0; i < n; i++) {
    ones += mb[dot(o, mstr, rank)] != 0;
    next_index(rank, out->sizes, o);
  }
  int64_t srcn = numel_of(source->rank, source->sizes);
  if (ones > srcn)
    return cpu_error(BP_OUT_OF_RANGE,
                     "cpu: masked_scatter: the mask has %lld true elements but 'source' has only "
                     "%lld elements",
                     (long long)ones, (long long)srcn);
  bp_status_t st = cpu_cast_copy(out, self);
  if (st) return st;
  uint32_t es = bp_dtype_size(out->dtype);
  unsigned char* ob = cpu_desc_ptr(out);
  const unsigned char* sb = cpu_desc_ptr(source);
  int64_t si[BP_MAX_RANK] = {0};
  memset(o, 0, sizeof o);
  for (int64_t i = 0; i < n; i++) {
    if (mb[dot(o, mstr, rank)]) {
      copy_elem(ob + dot(o, out->strides, rank) * es,
                sb + dot(si, source->strides, source->rank) * es, es);
      next_index(source->rank, source->sizes, si);
    }
    next_index(rank, out->sizes, o);
  }
  return BP_OK;
}

/* ---- nonzero ---------------------------------------------------------------------------- */

static int elem_nonzero(const unsigned char* p, uint32_t dtype, uint32_t es) {
  switch (dtype) {
    case BP_DTYPE_F32: { float v; memcpy(&v, p, 4); return v != 0.0f; }
    case BP_DTYPE_F64: { double v; memcpy(&v, p, 8); return v != 0.0; }
    case BP_DTYPE_F16: case BP_DTYPE_BF16: { uint16_t v; memcpy(&v, p, 2); return (v & 0x7fffu) != 0; }
    default: break; /* integers and bool: any set bit */
  }
  for (uint32_t b = 0; b < es; b++)
    if (p[b]) return 1;
  return 0;
}

static bp_status_t exec_nonzero(const bp_op_call_t* call) {
  const bp_tensor_desc_t *self = call->inputs[0], *out = call->outputs[0], *cnt = call->outputs[1];
  uint32_t rank = self->rank, es = bp_dtype_size(self->dtype);
  const unsigned char* sb = cpu_desc_ptr(self);
  unsigned char* ob = cpu_desc_ptr(out);
  int64_t n = numel_of(rank, self->sizes), count = 0;
  int64_t i[BP_MAX_RANK] = {0};
  for (int64_t e = 0; e < n; e++) {
    if (elem_nonzero(sb + dot(i, self->strides, rank) * es, self->dtype, es)) {
      for (uint32_t d = 0; d < rank; d++)
        st_i64(ob, BP_DTYPE_I64, count * out->strides[0] + d * out->strides[1], i[d]);
      count++;
    }
    next_index(rank, self->sizes, i);
  }
  /* Rows past the count hold -1, so the whole output is defined. */
  for (int64_t r = count; r < n; r++)
    for (uint32_t d = 0; d < rank; d++) st_i64(ob, BP_DTYPE_I64, r * out->strides[0] + d * out->strides[1], -1);
  st_i64(cpu_desc_ptr(cnt), BP_DTYPE_I64, 0, count);
  return BP_OK;
}

/* ---- embedding_bag ------------------------------------------------------------------------ */

typedef struct bag_job {
  const bp_embedding_attrs_t* a;
  nd_t w, idx, off, psw, out, o2b, bsz, maxi;
  int has_psw;
  int64_t n, bags, dim;
} bag_job_t;

static inline int64_t bag_begin(const bag_job_t* j, int64_t b) {
  return ld_index(j->off.base, j->off.dtype, b * j->off.strides[0]);
}
static inline int64_t bag_end(const bag_job_t* j, int64_t b) {
  int64_t noff = j->off.sizes[0];
  return b + 1 < noff ? ld_index(j->off.base, j->off.dtype, (b + 1) * j->off.strides[0]) : j->n;
}

/* Bags [begin, end): accumulate in f64 over column blocks of CPU_BLOCK. */
static void bag_range(void* ctx, int64_t begin, int64_t end) {
  const bag_job_t* j = ctx;
  const bp_embedding_attrs_t* a = j->a;
  double acc[CPU_BLOCK], row[CPU_BLOCK];
  int64_t arg[CPU_BLOCK];
  double wgt;
  for (int64_t b = begin; b < end; b++) {
    int64_t lo = bag_begin(j, b), hi = bag_end(j, b), count = 0;
    for (int64_t i = lo; i < hi; i++)
      if (ld_index(j->idx.base, j->idx.dtype, i * j->idx.strides[0]) != a->padding_idx) count++;
    for (int64_t c0 = 0; c0 < j->dim || (c0 == 0 && j->dim == 0); c0 += CPU_BLOCK) {
      int64_t nc = j->dim - c0 < CPU_BLOCK ? j->dim - c0 : CPU_BLOCK;
      int first = 1;
      for (int64_t c = 0; c < nc; c++) acc[c] = 0.0, arg[c] = 0;
      for (int64_t i = lo; i < hi; i++) {
        int64_t v = ld_index(j->idx.base, j->idx.dtype, i * j->idx.strides[0]);
        if (v == a->padding_idx) continue;
        cpu_load[CPU_KT_F64](row, j->w.base + (v * j->w.strides[0] + c0 * j->w.strides[1]) * j->w.es,
                             j->w.strides[1], nc, j->w.dtype);
        if (a->mode == BP_BAG_MAX) {
          /* The first maximum wins (strict >), NaN only from the first row. */
          for (int64_t c = 0; c < nc; c++)
            if (first || row[c] > acc[c]) acc[c] = row[c], arg[c] = v;
        } else {
          if (j->has_psw)
            cpu_load[CPU_KT_F64](&wgt, j->psw.base + i * j->psw.strides[0] * j->psw.es, 0, 1, j->psw.dtype);
          else wgt = 1.0;
          for (int64_t c = 0; c < nc; c++) acc[c] += wgt * row[c];
        }
        first = 0;
      }
      if (a->mode == BP_BAG_MEAN && count > 0)
        for (int64_t c = 0; c < nc; c++) acc[c] /= (double)count;
      cpu_store[CPU_KT_F64](j->out.base + (b * j->out.strides[0] + c0 * j->out.strides[1]) * j->out.es,
                            j->out.strides[1], acc, nc, j->out.dtype);
      if (a->mode == BP_BAG_MAX)
        for (int64_t c = 0; c < nc; c++)
          st_i64(j->maxi.base, j->maxi.dtype, b * j->maxi.strides[0] + (c0 + c) * j->maxi.strides[1], arg[c]);
      if (j->dim == 0) break;
    }
    st_i64(j->bsz.base, j->bsz.dtype, b * j->bsz.strides[0], count);
    if (a->mode != BP_BAG_MAX) st_i64(j->maxi.base, j->maxi.dtype, b * j->maxi.strides[0], 0);
  }
}

static bp_status_t exec_embedding_bag(const bp_op_call_t* call) {
  bag_job_t j;
  memset(&j, 0, sizeof j);
  j.a = call->attrs;
  nd_from(&j.w, call->inputs[0]);
  nd_from(&j.idx, call->inputs[1]);
  nd_from(&j.off, call->inputs[2]);
  j.has_psw = call->inputs[3]->dtype != BP_DTYPE_INVALID;
  if (j.has_psw) nd_from(&j.psw, call->inputs[3]);
  nd_from(&j.out, call->outputs[0]);
  nd_from(&j.o2b, call->outputs[1]);
  nd_from(&j.bsz, call->outputs[2]);
  nd_from(&j.maxi, call->outputs[3]);
  j.n = call->inputs[1]->sizes[0];
  j.bags = call->outputs[0]->sizes[0];
  j.dim = call->inputs[0]->sizes[1];
  int64_t noff = call->inputs[2]->sizes[0];
  /* Offsets: start at 0, never decrease, never pass n; with
   * include_last_offset the last one is n (CSR form). */
  int64_t prev = 0;
  for (int64_t b = 0; b < noff; b++) {
    int64_t v = ld_index(j.off.base, j.off.dtype, b * j.off.strides[0]);
    int bad = (b == 0 && v != 0) || v < prev || v > j.n ||
              (j.a->include_last_offset && b == noff - 1 && v != j.n);
    if (bad)
      return cpu_error(BP_OUT_OF_RANGE,
                       "cpu: embedding_bag: offsets[%lld] = %lld is invalid (offsets start at 0, "
                       "never decrease and end at most at %lld indices%s)",
                       (long long)b, (long long)v, (long long)j.n,
                       j.a->include_last_offset ? "; the last one equals it" : "");
    prev = v;
  }
  bp_status_t st = check_indices(call, &j.idx, j.w.sizes[0], 0, 0, "indices");
  if (st) return st;
  /* offset2bag[i]: the last bag that starts at or before i. */
  int64_t b = 0;
  for (int64_t i = 0; i < j.n; i++) {
    while (b + 1 < noff && ld_index(j.off.base, j.off.dtype, (b + 1) * j.off.strides[0]) <= i) b++;
    st_i64(j.o2b.base, j.o2b.dtype, i * j.o2b.strides[0], b);
  }
  cpu_parallel_for(j.bags, 16, bag_range, &j);
  return BP_OK;
}

/* ---- embedding_dense_backward --------------------------------------------------------------- */

typedef struct ebw_job {
  const bp_embedding_attrs_t* a;
  nd_t grad, out;
  const int64_t* start; /* CSR over weight rows: positions start[r]..start[r+1] */
  const int64_t* pos;   /* flat positions into indices (row-major) */
  int64_t dim;
  uint32_t irank;
  int64_t isizes[BP_MAX_RANK];
} ebw_job_t;

static void ebw_range(void* ctx, int64_t begin, int64_t end) {
  const ebw_job_t* j = ctx;
  double acc[CPU_BLOCK], row[CPU_BLOCK];
  int64_t gi[BP_MAX_RANK + 1];
  for (int64_t r = begin; r < end; r++) {
    int64_t cnt = j->start[r + 1] - j->start[r];
    int skip = r == j->a->padding_idx;
    double scale = j->a->scale_grad_by_freq && cnt > 0 ? 1.0 / (double)cnt : 1.0;
    for (int64_t c0 = 0; c0 < j->dim; c0 += CPU_BLOCK) {
      int64_t nc = j->dim - c0 < CPU_BLOCK ? j->dim - c0 : CPU_BLOCK;
      for (int64_t c = 0; c < nc; c++) acc[c] = 0.0;
      for (int64_t p = j->start[r]; !skip && p < j->start[r + 1]; p++) {
        unravel(j->pos[p], j->irank, j->isizes, gi);
        gi[j->irank] = c0;
        int64_t off = dot(gi, j->grad.strides, j->irank + 1);
        cpu_load[CPU_KT_F64](row, j->grad.base + off * j->grad.es, j->grad.strides[j->irank], nc,
                             j->grad.dtype);
        for (int64_t c = 0; c < nc; c++) acc[c] += row[c];
      }
      for (int64_t c = 0; c < nc; c++) acc[c] *= scale;
      cpu_store[CPU_KT_F64](j->out.base + (r * j->out.strides[0] + c0 * j->out.strides[1]) * j->out.es,
                            j->out.strides[1], acc, nc, j->out.dtype);
    }
  }
}

static bp_status_t exec_embedding_dense_backward(const bp_op_call_t* call) {
  const bp_embedding_attrs_t* a = call->attrs;
  const bp_tensor_desc_t *grad = call->inputs[0], *ind = call->inputs[1];
  nd_t idx;
  nd_from(&idx, ind);
  int64_t nw = a->num_weights, n = numel_of(ind->rank, ind->sizes);
  bp_status_t st = check_indices(call, &idx, nw, 0, 0, "indices");
  if (st || grad->sizes[grad->rank - 1] == 0) return st; /* an empty result needs no pass */
  int64_t* start = calloc((size_t)nw + 2, sizeof(int64_t));
  int64_t* pos = malloc((size_t)(n > 0 ? n : 1) * sizeof(int64_t));
  if (!start || !pos) {
    free(start);
    free(pos);
    return cpu_error(BP_RESOURCE_EXHAUSTED, "cpu: embedding_dense_backward: out of host memory");
  }
  /* Counting sort of the positions by weight row (stable: row-major order). */
  int64_t i[BP_MAX_RANK] = {0};
  for (int64_t e = 0; e < n; e++) {
    start[ld_index(idx.base, idx.dtype, dot(i, idx.strides, idx.rank)) + 2]++;
    next_index(idx.rank, idx.sizes, i);
  }
  for (int64_t r = 2; r < nw + 2; r++) start[r] += start[r - 1];
  memset(i, 0, sizeof i);
  for (int64_t e = 0; e < n; e++) {
    int64_t v = ld_index(idx.base, idx.dtype, dot(i, idx.strides, idx.rank));
    pos[start[v + 1]++] = e;
    next_index(idx.rank, idx.sizes, i);
  }
  ebw_job_t j;
  memset(&j, 0, sizeof j);
  j.a = a;
  j.grad.base = cpu_desc_ptr(grad);
  j.grad.dtype = grad->dtype;
  j.grad.es = bp_dtype_size(grad->dtype);
  memcpy(j.grad.strides, grad->strides, sizeof(int64_t) * grad->rank);
  nd_from(&j.out, call->outputs[0]);
  j.start = start;
  j.pos = pos;
  j.dim = grad->sizes[grad->rank - 1];
  j.irank = ind->rank;
  memcpy(j.isizes, ind->sizes, sizeof(int64_t) * ind->rank);
  cpu_parallel_for(nw, 64, ebw_range, &j);
  free(start);
  free(pos);
  return BP_OK;
}

/* ---- family ------------------------------------------------------------------------------- */

static bp_status_t exec_index(const bp_op_call_t* call) {
  switch (call->op_id) {
    case BP_OP_embedding: return exec_embedding(call);
    case BP_OP_embedding_bag: return exec_embedding_bag(call);
    case BP_OP_embedding_dense_backward: return exec_embedding_dense_backward(call);
    case BP_OP_gather: return exec_gather(call);
    case BP_OP_index: return exec_index_op(call);
    case BP_OP_index_put: return exec_index_put(call);
    case BP_OP_index_select: return exec_index_select(call);
    case BP_OP_masked_scatter: return exec_masked_scatter(call);
    case BP_OP_nonzero: return exec_nonzero(call);
    default:
      return cpu_error(BP_UNIMPLEMENTED, "cpu: op %s has no CPU kernel", cpu_op_name(call->op_id));
  }
}

static int is_index_dtype(uint32_t d) { return d == BP_DTYPE_I32 || d == BP_DTYPE_I64; }

/* The core's shape rules ran before; this answers for dtypes only. Data
 * movement takes every storage dtype but c64 (refused by the common check)
 * and fp8 (storage only, refused by the core); the reductions take floats. */
static int supported_index(const bp_op_call_t* call, char* msg, size_t cap) {
  for (uint32_t k = 0; k < call->num_inputs + call->num_outputs; k++) {
    const bp_tensor_desc_t* d = k < call->num_inputs ? call->inputs[k] : call->outputs[k - call->num_inputs];
    if (bp_dtype_is_fp8(d->dtype)) {
      snprintf(msg, cap, "fp8 operands are storage only");
      return BP_SUPPORT_DTYPE;
    }
  }
  uint32_t op = call->op_id;
  if (op == BP_OP_embedding_bag || op == BP_OP_embedding_dense_backward) {
    uint32_t d = call->outputs[0]->dtype;
    if (!bp_dtype_is_float(d)) {
      snprintf(msg, cap, "%s output: floating dtypes only", bp_dtype_name(d));
      return BP_SUPPORT_DTYPE;
    }
  }
  if (op == BP_OP_index || op == BP_OP_index_put) {
    uint32_t end = call->list_begin + call->list_count;
    for (uint32_t k = call->list_begin; k < end && k < call->num_inputs; k++) {
      uint32_t d = call->inputs[k]->dtype;
      if (d != BP_DTYPE_INVALID && !is_index_dtype(d)) {
        snprintf(msg, cap, "index %u has dtype %s; i32 or i64 only", k - 1, bp_dtype_name(d));
        return BP_SUPPORT_DTYPE;
      }
    }
  }
  return BP_SUPPORT_OK;
}

const cpu_family_t cpu_family_index = {
    "index",
    CPU_FAMILY_OPS(BP_OP_embedding, BP_OP_embedding_bag, BP_OP_embedding_dense_backward,
                   BP_OP_gather, BP_OP_index, BP_OP_index_put, BP_OP_index_select,
                   BP_OP_masked_scatter, BP_OP_nonzero),
    exec_index, supported_index, 0};
