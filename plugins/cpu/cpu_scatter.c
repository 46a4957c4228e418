/* backplane CPU plugin: the scatter kernel family: scatter (src and value
 * forms, reduce none / sum / prod), scatter_add, scatter_reduce (sum, prod,
 * mean, amax, amin; include_self), select_scatter and slice_scatter.
 *
 * scatter*: out starts as a copy of self in a dense working array of double
 * (floating dtypes) or int64 (integers, bool); then every index element
 * combines src (or the value) into its target and the array is stored to
 * out with one rounding. Index elements that differ outside `dim` have
 * different targets, so the lines along `dim` run in parallel and each line
 * runs in order (duplicates: the last write wins; sums accumulate in index
 * order). Index values are all checked before anything is written: a value
 * outside [0, self.size(dim)) fails the call with OUT_OF_RANGE.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cpu_kernels.h"

#define SCATTER_GRAIN 64 /* lines per parallel chunk, at least */

/* A tensor seen with the scatter's rank (0-d tensors as [1]). */
typedef struct sc_view {
  int64_t sizes[BP_MAX_RANK];
  int64_t strides[BP_MAX_RANK];
} sc_view_t;

typedef struct sc_job {
  uint32_t rank, dim, reduce, is_float;
  sc_view_t index, src, self; /* self: the dense working array */
  const unsigned char* index_base; /* int64 */
  const void* src_work;            /* dense src in the working type; NULL: value */
  union { double f; int64_t i; } value;
  void* work;                      /* double or int64, dense over self */
  int64_t* count;                  /* mean: elements per target */
  int64_t lines;                   /* index elements / index.size(dim) */
  int phase;                       /* 0: identity fill (include_self = 0), 1: combine */
} sc_job_t;

static void view_of(const bp_tensor_desc_t* t, uint32_t rank, sc_view_t* v) {
  for (uint32_t d = 0; d < rank; d++) {
    v->sizes[d] = t->rank ? t->sizes[d] : 1;
    v->strides[d] = t->rank ? t->strides[d] : 0;
  }
}

static void dense_view(const int64_t* sizes, uint32_t rank, sc_view_t* v) {
  int64_t s = 1;
  for (uint32_t d = rank; d-- > 0;) {
    v->sizes[d] = sizes[d];
    v->strides[d] = s;
    s *= sizes[d];
  }
}

/* Two's complement wrap of v to an integer dtype (PyTorch integer
 * arithmetic wraps in the tensor's dtype). */
static int64_t wrap_int(int64_t v, uint32_t dtype) {
  switch (dtype) {
    case BP_DTYPE_I8: return (int8_t)v;
    case BP_DTYPE_U8: return (uint8_t)v;
    case BP_DTYPE_I16: return (int16_t)v;
    case BP_DTYPE_I32: return (int32_t)v;
    case BP_DTYPE_BOOL: return v != 0;
    default: return v;
  }
}

/* One combine step; x is the target, v the incoming value. NaN propagates
 * through amax/amin as in PyTorch. */
#define SC_COMBINE_F(x, v, r)                                        \
  switch (r) {                                                       \
    case BP_SCATTER_NONE: x = v; break;                              \
    case BP_SCATTER_SUM: case BP_SCATTER_MEAN: x += v; break;        \
    case BP_SCATTER_PROD: x *= v; break;                             \
    case BP_SCATTER_AMAX: if (isnan(v) || v > x) x = v; break;       \
    case BP_SCATTER_AMIN: if (isnan(v) || v < x) x = v; break;       \
    default: break;                                                  \
  }
#define SC_COMBINE_I(x, v, r)                                                  \
  switch (r) {                                                                 \
    case BP_SCATTER_NONE: x = v; break;                                        \
    case BP_SCATTER_SUM: case BP_SCATTER_MEAN: x = (int64_t)((uint64_t)x + (uint64_t)v); break; \
    case BP_SCATTER_PROD: x = (int64_t)((uint64_t)x * (uint64_t)v); break;     \
    case BP_SCATTER_AMAX: if (v > x) x = v; break;                             \
    case BP_SCATTER_AMIN: if (v < x) x = v; break;                             \
    default: break;                                                            \
  }

static void sc_lines(void* ctx, int64_t begin, int64_t end) {
  const sc_job_t* j = ctx;
  const uint32_t rank = j->rank, dim = j->dim;
  const int64_t along = j->index.sizes[dim];
  for (int64_t line = begin; line < end; line++) {
    /* Offsets of the line's first element (dim index 0). */
    int64_t rem = line, ioff = 0, soff = 0, woff = 0;
    for (uint32_t d = rank; d-- > 0;) {
      if (d == dim) continue;
      int64_t k = rem % j->index.sizes[d];
      rem /= j->index.sizes[d];
      ioff += k * j->index.strides[d];
      soff += k * j->src.strides[d];
      woff += k * j->self.strides[d];
    }
    for (int64_t k = 0; k < along; k++) {
      int64_t t;
      memcpy(&t, j->index_base + (ioff + k * j->index.strides[dim]) * 8, 8);
      int64_t w = woff + t * j->self.strides[dim];
      int64_t s = soff + k * j->src.strides[dim];
      if (j->phase == 0) { /* identity of the reduction; mean counts restart */
        if (j->is_float) {
          double* x = (double*)j->work + w;
          *x = j->reduce == BP_SCATTER_PROD ? 1.0 : j->reduce == BP_SCATTER_AMAX ? -INFINITY
               : j->reduce == BP_SCATTER_AMIN ? INFINITY : 0.0;
        } else {
          int64_t* x = (int64_t*)j->work + w;
          *x = j->reduce == BP_SCATTER_PROD ? 1 : j->reduce == BP_SCATTER_AMAX ? INT64_MIN
               : j->reduce == BP_SCATTER_AMIN ? INT64_MAX : 0;
        }
        if (j->count) j->count[w] = 0;
        continue;
      }
      if (j->is_float) {
        double v = j->src_work ? ((const double*)j->src_work)[s] : j->value.f;
        double* x = (double*)j->work + w;
        SC_COMBINE_F(*x, v, j->reduce)
      } else {
        int64_t v = j->src_work ? ((const int64_t*)j->src_work)[s] : j->value.i;
        int64_t* x = (int64_t*)j->work + w;
        SC_COMBINE_I(*x, v, j->reduce)
      }
      if (j->count) j->count[w]++;
    }
  }
}

/* Every index value in [0, size); else OUT_OF_RANGE naming the first bad one. */
static bp_status_t check_indices(const sc_job_t* j, const char* op, int64_t size) {
  int64_t idx[BP_MAX_RANK] = {0};
  int64_t n = 1;
  for (uint32_t d = 0; d < j->rank; d++) n *= j->index.sizes[d];
  for (int64_t e = 0; e < n; e++) {
    int64_t off = 0, t;
    for (uint32_t d = 0; d < j->rank; d++) off += idx[d] * j->index.strides[d];
    memcpy(&t, j->index_base + off * 8, 8);
    if (t < 0 || t >= size) {
      char pos[8 * 24] = "";
      size_t at = 0;
      for (uint32_t d = 0; d < j->rank && at < sizeof pos; d++)
        at += (size_t)snprintf(pos + at, sizeof pos - at, "%s%lld", d ? ", " : "", (long long)idx[d]);
      return cpu_error(BP_OUT_OF_RANGE,
                       "cpu: %s: index %lld is out of bounds for dimension %u with size %lld (at index[%s])",
                       op, (long long)t, j->dim, (long long)size, pos);
    }
    for (uint32_t d = j->rank; d-- > 0;) {
      if (++idx[d] < j->index.sizes[d]) break;
      idx[d] = 0;
    }
  }
  return BP_OK;
}

static bp_status_t exec_scatter_reduce(const bp_op_call_t* call) {
  const bp_tensor_desc_t *self = call->inputs[0], *index = call->inputs[1];
  const bp_tensor_desc_t* src = call->num_inputs > 2 && call->inputs[2]->dtype != BP_DTYPE_INVALID
                                    ? call->inputs[2] : NULL;
  const bp_tensor_desc_t* out = call->outputs[0];
  const bp_scatter_attrs_t* a = call->attrs;
  const char* name = cpu_op_name(call->op_id);
  bp_status_t st = BP_OK;
  sc_job_t j;
  memset(&j, 0, sizeof j);
  void* src_work = NULL;
  if (index->dtype != BP_DTYPE_I64 || out->dtype != self->dtype || (src && src->dtype != self->dtype))
    return cpu_error(BP_INVALID_ARGUMENT, "cpu: %s: dtypes self %s, index %s, out %s", name,
                     bp_dtype_name(self->dtype), bp_dtype_name(index->dtype), bp_dtype_name(out->dtype));
  j.rank = self->rank ? self->rank : 1;
  int64_t dim = a->dim < 0 ? a->dim + (int64_t)j.rank : a->dim;
  if (dim < 0 || dim >= (int64_t)j.rank)
    return cpu_error(BP_INVALID_ARGUMENT, "cpu: %s: dim %d out of range", name, a->dim);
  j.dim = (uint32_t)dim;
  j.reduce = call->op_id == BP_OP_scatter_add ? BP_SCATTER_SUM : a->reduce;
  j.is_float = bp_dtype_is_float(self->dtype);
  const uint32_t wdt = j.is_float ? BP_DTYPE_F64 : BP_DTYPE_I64;
  int64_t numel = bp_desc_numel(out);
  if (numel == 0) return BP_OK;
  /* out = self, through the working array. */
  int64_t wsizes[BP_MAX_RANK];
  for (uint32_t d = 0; d < j.rank; d++) wsizes[d] = self->rank ? self->sizes[d] : 1;
  dense_view(wsizes, j.rank, &j.self);
  struct bpp_buffer_s wholder, sholder;
  bp_tensor_desc_t wdesc, sdesc;
  j.work = malloc((size_t)numel * 8);
  if (!j.work) {
    st = cpu_error(BP_RESOURCE_EXHAUSTED, "cpu: %s: no memory for %lld elements", name, (long long)numel);
    goto cleanup;
  }
  cpu_desc_host(&wdesc, &wholder, j.work, wdt, self->rank, self->sizes, NULL);
  st = cpu_cast_copy(&wdesc, self);
  if (st) goto cleanup;
  int64_t inumel = bp_desc_numel(index);
  if (inumel > 0) {
    if (index->rank != self->rank && (index->rank > 1 || self->rank > 1)) {
      st = cpu_error(BP_INVALID_ARGUMENT, "cpu: %s: index rank %u, self rank %u", name, index->rank, self->rank);
      goto cleanup;
    }
    view_of(index, j.rank, &j.index);
    j.index_base = cpu_desc_ptr(index);
    st = check_indices(&j, name, j.self.sizes[j.dim]);
    if (st) goto cleanup;
    if (src) {
      int64_t snumel = bp_desc_numel(src);
      src_work = malloc((size_t)snumel * 8);
      if (!src_work) {
        st = cpu_error(BP_RESOURCE_EXHAUSTED, "cpu: %s: no memory for src", name);
        goto cleanup;
      }
      cpu_desc_host(&sdesc, &sholder, src_work, wdt, src->rank, src->sizes, NULL);
      st = cpu_cast_copy(&sdesc, src);
      if (st) goto cleanup;
      int64_t ssz[BP_MAX_RANK];
      for (uint32_t d = 0; d < j.rank; d++) ssz[d] = src->rank ? src->sizes[d] : 1;
      dense_view(ssz, j.rank, &j.src);
      j.src_work = src_work;
    } else if (j.is_float) {
      j.value.f = cpu_scalar_f64(&a->value, 0.0);
    } else {
      int64_t v = cpu_scalar_i64(&a->value, 0);
      j.value.i = wrap_int(self->dtype == BP_DTYPE_BOOL && a->value.kind == BP_SCALAR_FLOAT
                               ? a->value.v.f != 0.0 : v, self->dtype);
    }
    if (j.reduce == BP_SCATTER_MEAN) {
      j.count = malloc((size_t)numel * sizeof *j.count);
      if (!j.count) {
        st = cpu_error(BP_RESOURCE_EXHAUSTED, "cpu: %s: no memory for counts", name);
        goto cleanup;
      }
      for (int64_t k = 0; k < numel; k++) j.count[k] = 1;
    }
    j.lines = inumel / j.index.sizes[j.dim];
    int64_t grain = SCATTER_GRAIN;
    int include_self = call->op_id != BP_OP_scatter_reduce || a->include_self;
    for (j.phase = include_self ? 1 : 0; j.phase < 2; j.phase++) {
      if (inumel < 4096) sc_lines(&j, 0, j.lines);
      else cpu_parallel_for(j.lines, grain, sc_lines, &j);
    }
    if (j.count) { /* mean: divide by the count; targets nobody wrote keep self */
      for (int64_t k = 0; k < numel; k++) {
        int64_t c = j.count[k] ? j.count[k] : 1;
        if (j.is_float) {
          ((double*)j.work)[k] /= (double)c;
        } else {
          int64_t x = wrap_int(((int64_t*)j.work)[k], self->dtype);
          int64_t q = x / c;
          if (x % c != 0 && x < 0) q--; /* floor division */
          ((int64_t*)j.work)[k] = q;
        }
      }
    }
  }
  st = cpu_cast_copy(out, &wdesc);
cleanup:
  free(j.work);
  free(j.count);
  free(src_work);
  return st;
}

/* select_scatter / slice_scatter: out = self, then the selection or slice
 * of out = src (converted to self's dtype). */
static bp_status_t exec_slice_scatter(const bp_op_call_t* call) {
  const bp_tensor_desc_t *self = call->inputs[0], *src = call->inputs[1];
  const bp_tensor_desc_t* out = call->outputs[0];
  const bp_slice_attrs_t* a = call->attrs;
  const char* name = cpu_op_name(call->op_id);
  if (out->rank == 0 || out->rank != self->rank)
    return cpu_error(BP_INVALID_ARGUMENT, "cpu: %s: self rank %u, out rank %u", name, self->rank, out->rank);
  int64_t dim = a->dim < 0 ? a->dim + (int64_t)out->rank : a->dim;
  if (dim < 0 || dim >= (int64_t)out->rank)
    return cpu_error(BP_INVALID_ARGUMENT, "cpu: %s: dim %d out of range", name, a->dim);
  if (bp_desc_numel(out) == 0) return BP_OK;
  bp_status_t st = cpu_cast_copy(out, self);
  if (st) return st;
  const int64_t size = out->sizes[dim], es = bp_dtype_size(out->dtype);
  bp_tensor_desc_t view = *out;
  if (call->op_id == BP_OP_select_scatter) {
    int64_t i = a->start < 0 ? a->start + size : a->start;
    if (i < 0 || i >= size)
      return cpu_error(BP_INVALID_ARGUMENT, "cpu: %s: index %lld out of range", name, (long long)a->start);
    view.byte_offset += (uint64_t)(i * out->strides[dim] * es);
    for (uint32_t d = (uint32_t)dim; d + 1 < out->rank; d++) {
      view.sizes[d] = out->sizes[d + 1];
      view.strides[d] = out->strides[d + 1];
    }
    view.rank--;
  } else {
    if (a->step <= 0) return cpu_error(BP_INVALID_ARGUMENT, "cpu: %s: step %lld", name, (long long)a->step);
    int64_t start = a->start < 0 ? a->start + size : a->start;
    int64_t end = a->end < 0 ? a->end + size : a->end;
    start = start < 0 ? 0 : start > size ? size : start;
    end = end < start ? start : end > size ? size : end;
    int64_t len = (end - start) / a->step + ((end - start) % a->step != 0);
    if (len == 0) return BP_OK;
    view.byte_offset += (uint64_t)(start * out->strides[dim] * es);
    view.sizes[dim] = len;
    view.strides[dim] = out->strides[dim] * a->step;
  }
  if (view.rank != src->rank)
    return cpu_error(BP_INVALID_ARGUMENT, "cpu: %s: src rank %u, expected %u", name, src->rank, view.rank);
  return cpu_cast_copy(&view, src);
}

static bp_status_t exec_scatter(const bp_op_call_t* call) {
  if (call->op_id == BP_OP_select_scatter || call->op_id == BP_OP_slice_scatter)
    return exec_slice_scatter(call);
  return exec_scatter_reduce(call);
}

static int supported_scatter(const bp_op_call_t* call, char* msg, size_t cap) {
  for (uint32_t k = 0; k < call->num_inputs; k++) {
    if (bp_dtype_is_fp8(call->inputs[k]->dtype)) {
      bp_plugin_format(msg, cap, 0, "fp8 is a storage type");
      return BP_SUPPORT_DTYPE;
    }
  }
  return BP_SUPPORT_OK;
}

const cpu_family_t cpu_family_scatter = {
    "scatter",
    CPU_FAMILY_OPS(BP_OP_scatter, BP_OP_scatter_add, BP_OP_scatter_reduce, BP_OP_select_scatter,
                   BP_OP_slice_scatter),
    exec_scatter, supported_scatter, 0};
