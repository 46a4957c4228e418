/* backplane CPU plugin: the shape kernel family: pad (constant, reflect,
 * replicate, circular), flip and repeat.
 *
 * All three are one gather: output dim d at index j reads input index
 * map_d[j] (or the pad value when map_d[j] < 0), so out[j0..jn] =
 * in[map_0[j0], ..., map_n[jn]]. The maps are built per op from the
 * semantics (docs/semantics.md, "Shape ops"); the engine walks the output
 * row by row (the innermost dim), splits each row's map once into runs
 * (input step +1, -1 or 0, or the pad value) and copies runs with plain
 * element loops (memcpy where both sides are contiguous). Rows are split over
 * the thread pool. The dtype never changes, so elements move as raw bytes.
 */
#include <stdlib.h>
#include <string.h>

#include "cpu_kernels.h"

#define SHAPE_GRAIN 16384 /* output elements per parallel chunk, at least */

/* A run of the innermost dim: output [o, o + n) reads input index i0 + t *
 * step (t < n), or the pad value when step == SHAPE_CONST. */
#define SHAPE_CONST INT64_MIN
typedef struct shape_run {
  int64_t o, n, i0, step;
} shape_run_t;

typedef struct shape_job {
  uint32_t rank;                /* output rank (>= 1 here: 0-d becomes [1]) */
  int64_t sizes[BP_MAX_RANK];   /* output sizes */
  int64_t ostr[BP_MAX_RANK];    /* output strides (elements) */
  int64_t istr[BP_MAX_RANK];    /* input strides per output dim (0: a new dim) */
  const int64_t* map[BP_MAX_RANK];
  shape_run_t* runs;            /* runs of the innermost dim */
  int64_t nruns;
  unsigned char* out;
  const unsigned char* in;
  uint32_t esize;
  _Alignas(8) unsigned char value[8]; /* the pad value in the output dtype */
} shape_job_t;

/* Element copies by size: one loop per element size, generated. */
#define SHAPE_SIZES(X) X(1, uint8_t) X(2, uint16_t) X(4, uint32_t) X(8, uint64_t)

static void run_copy(const shape_job_t* j, unsigned char* orow, const unsigned char* irow,
                     const shape_run_t* r) {
  const int64_t os = j->ostr[j->rank - 1], is = j->istr[j->rank - 1];
  switch (j->esize) {
#define SHAPE__CASE(S, T)                                                        \
  case S: {                                                                      \
    T* o = (T*)orow + r->o * os;                                                 \
    if (r->step == SHAPE_CONST) {                                                \
      T v;                                                                       \
      memcpy(&v, j->value, S);                                                   \
      for (int64_t t = 0; t < r->n; t++) o[t * os] = v;                          \
    } else if (r->step == 1 && os == 1 && is == 1) {                             \
      memcpy(o, (const T*)irow + r->i0, (size_t)r->n * S);                       \
    } else {                                                                     \
      const T* i = (const T*)irow + r->i0 * is;                                  \
      const int64_t st = r->step * is;                                           \
      for (int64_t t = 0; t < r->n; t++) o[t * os] = i[t * st];                  \
    }                                                                            \
    break;                                                                       \
  }
    SHAPE_SIZES(SHAPE__CASE)
#undef SHAPE__CASE
    default: break;
  }
}

/* Rows [begin, end) of the output (row = all indices but the innermost). */
static void shape_rows(void* ctx, int64_t begin, int64_t end) {
  const shape_job_t* j = ctx;
  const uint32_t outer = j->rank - 1;
  int64_t idx[BP_MAX_RANK] = {0};
  int64_t rem = begin;
  for (uint32_t d = outer; d-- > 0;) {
    idx[d] = rem % j->sizes[d];
    rem /= j->sizes[d];
  }
  const int64_t es = j->esize;
  for (int64_t row = begin; row < end; row++) {
    int64_t ooff = 0, ioff = 0;
    int is_const = 0;
    for (uint32_t d = 0; d < outer; d++) {
      int64_t m = j->map[d][idx[d]];
      ooff += idx[d] * j->ostr[d];
      if (m < 0) is_const = 1;
      else ioff += m * j->istr[d];
    }
    unsigned char* orow = j->out + ooff * es;
    if (is_const) {
      shape_run_t all = {0, j->sizes[outer], 0, SHAPE_CONST};
      run_copy(j, orow, NULL, &all);
    } else {
      const unsigned char* irow = j->in + ioff * es;
      for (int64_t r = 0; r < j->nruns; r++) run_copy(j, orow, irow, &j->runs[r]);
    }
    for (uint32_t d = outer; d-- > 0;) { /* next row */
      if (++idx[d] < j->sizes[d]) break;
      idx[d] = 0;
    }
  }
}

/* Splits the innermost map into runs; *out_runs is malloc'd (n entries at
 * most). */
static bp_status_t make_runs(const int64_t* map, int64_t n, shape_run_t** out_runs,
                             int64_t* out_count) {
  shape_run_t* runs = malloc((size_t)(n > 0 ? n : 1) * sizeof *runs);
  if (!runs) return cpu_error(BP_RESOURCE_EXHAUSTED, "cpu: shape op: no memory for %lld runs", (long long)n);
  int64_t count = 0;
  for (int64_t k = 0; k < n;) {
    shape_run_t r = {k, 1, map[k], map[k] < 0 ? SHAPE_CONST : 1};
    if (k + 1 < n && map[k] >= 0 && map[k + 1] >= 0) {
      int64_t step = map[k + 1] - map[k];
      if (step >= -1 && step <= 1) r.step = step;
    }
    while (k + r.n < n) {
      int64_t m = map[k + r.n];
      int ok = r.step == SHAPE_CONST ? m < 0 : (m >= 0 && m == r.i0 + r.n * r.step);
      if (!ok) break;
      r.n++;
    }
    runs[count++] = r;
    k += r.n;
  }
  *out_runs = runs;
  *out_count = count;
  return BP_OK;
}

/* Source index of output index j for one padded dim of input size s with
 * pads (before, after) (docs/semantics.md, "pad"); -1 for the pad value. */
static int64_t pad_source(uint32_t mode, int64_t j, int64_t s, int64_t before, int64_t after) {
  int64_t x = j - before;
  switch (mode) {
    case BP_PAD_REFLECT:
      if (x < 0) x = -x;
      if (x > s - 1) x = 2 * (s - 1) - x;
      return x;
    case BP_PAD_REPLICATE:
      return x < 0 ? 0 : x > s - 1 ? s - 1 : x;
    case BP_PAD_CIRCULAR: {
      /* Negative pads crop first; the kept range [lo, lo + kept) wraps. */
      int64_t lo = before < 0 ? -before : 0;
      int64_t kept = s - lo - (after < 0 ? -after : 0);
      int64_t t = j - (before > 0 ? before : 0);
      t %= kept;
      if (t < 0) t += kept;
      return lo + t;
    }
    default: /* constant */
      return x >= 0 && x < s ? x : -1;
  }
}

static bp_status_t exec_shape(const bp_op_call_t* call) {
  const bp_tensor_desc_t *in = call->inputs[0], *out = call->outputs[0];
  shape_job_t j;
  memset(&j, 0, sizeof j);
  bp_status_t st = BP_OK;
  int64_t* maps = NULL;
  if (in->dtype != out->dtype)
    return cpu_error(BP_INVALID_ARGUMENT, "cpu: %s: output dtype %s differs from the input's %s",
                     cpu_op_name(call->op_id), bp_dtype_name(out->dtype), bp_dtype_name(in->dtype));
  int64_t numel = bp_desc_numel(out);
  if (numel == 0) return BP_OK;
  /* Rank 0 runs as [1]. */
  j.rank = out->rank ? out->rank : 1;
  const uint32_t lead = out->rank > in->rank ? out->rank - in->rank : 0; /* repeat's new dims */
  int64_t total = 0;
  for (uint32_t d = 0; d < j.rank; d++) {
    j.sizes[d] = out->rank ? out->sizes[d] : 1;
    j.ostr[d] = out->rank ? out->strides[d] : 0;
    j.istr[d] = out->rank && d >= lead ? in->strides[d - lead] : 0;
    total += j.sizes[d];
  }
  maps = malloc((size_t)total * sizeof *maps);
  if (!maps) {
    st = cpu_error(BP_RESOURCE_EXHAUSTED, "cpu: %s: no memory for index maps", cpu_op_name(call->op_id));
    goto cleanup;
  }
  uint32_t flipped = 0;
  if (call->op_id == BP_OP_flip) {
    const bp_dims_attrs_t* a = call->attrs;
    for (uint32_t k = 0; k < a->num_dims; k++) {
      int64_t d = a->dims[k] < 0 ? a->dims[k] + (int64_t)(out->rank ? out->rank : 1) : a->dims[k];
      if (d >= 0 && d < BP_MAX_RANK) flipped |= 1u << d;
    }
  }
  const bp_pad_attrs_t* pa = call->op_id == BP_OP_pad ? call->attrs : NULL;
  int64_t* m = maps;
  for (uint32_t d = 0; d < j.rank; d++) {
    int64_t n = j.sizes[d];
    int64_t s = d >= lead && out->rank ? in->sizes[d - lead] : 1;
    uint32_t p = j.rank - 1 - d; /* pad pair index of dim d */
    for (int64_t k = 0; k < n; k++) {
      if (pa && out->rank && p < pa->num_pads / 2) {
        m[k] = pad_source(pa->mode, k, s, pa->pads[2 * p], pa->pads[2 * p + 1]);
      } else if (call->op_id == BP_OP_repeat) {
        m[k] = d < lead ? 0 : k % s;
      } else {
        m[k] = (flipped >> d) & 1u ? n - 1 - k : k;
      }
    }
    j.map[d] = m;
    m += n;
  }
  j.esize = bp_dtype_size(out->dtype);
  j.out = cpu_desc_ptr(out);
  j.in = bp_desc_numel(in) ? cpu_desc_ptr(in) : NULL;
  if (pa) {
    /* The pad value in the output dtype (cast rules of to_copy). */
    int kt = pa->value.kind == BP_SCALAR_FLOAT ? CPU_KT_F64
             : pa->value.kind == BP_SCALAR_BOOL ? CPU_KT_BOOL : CPU_KT_I64;
    _Alignas(8) unsigned char v[8];
    cpu_scalar_to_kt(&pa->value, kt, v);
    cpu_store[kt](j.value, 1, v, 1, out->dtype);
  }
  st = make_runs(j.map[j.rank - 1], j.sizes[j.rank - 1], &j.runs, &j.nruns);
  if (st) goto cleanup;
  int64_t rows = numel / j.sizes[j.rank - 1];
  int64_t grain = SHAPE_GRAIN / j.sizes[j.rank - 1];
  if (grain < 1) grain = 1;
  if (numel < SHAPE_GRAIN) shape_rows(&j, 0, rows);
  else cpu_parallel_for(rows, grain, shape_rows, &j);
cleanup:
  free(j.runs);
  free(maps);
  return st;
}

static int supported_shape(const bp_op_call_t* call, char* msg, size_t cap) {
  uint32_t d = call->inputs[0]->dtype;
  if (bp_dtype_is_fp8(d)) {
    bp_plugin_format(msg, cap, 0, "fp8 is a storage type");
    return BP_SUPPORT_DTYPE;
  }
  return BP_SUPPORT_OK;
}

const cpu_family_t cpu_family_shape = {
    "shape", CPU_FAMILY_OPS(BP_OP_pad, BP_OP_flip, BP_OP_repeat), exec_shape, supported_shape, 0};
