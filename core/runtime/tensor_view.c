/* Views: new tensor objects over the same buffer with a new descriptor.
 * They never copy data; every view retains the buffer. Rules follow
 * PyTorch (negative dims wrap, Python slicing, view's stride
 * compatibility). */
#include <string.h>

#include "internal.h"
#include "runtime/tensor_internal.h"

/* A descriptor under construction. */
typedef struct view_desc {
  uint32_t rank;
  int64_t sizes[BP_MAX_RANK];
  int64_t strides[BP_MAX_RANK];
  uint64_t byte_offset;
} view_desc_t;

static void desc_of(const bp_tensor_t* t, view_desc_t* v) {
  memset(v, 0, sizeof(*v));
  v->rank = t->rank;
  memcpy(v->sizes, t->sizes, sizeof(v->sizes));
  memcpy(v->strides, t->strides, sizeof(v->strides));
  v->byte_offset = t->byte_offset;
}

/* Every view is made here, and checked here against the invariants every
 * tensor keeps (whatever the view function computed): sizes and strides
 * valid, the byte size numel * element size fits in int64, and every element
 * lies inside the buffer. So a view can never describe more bytes than
 * later size computations (bp_tensor_read/write, ops) can hold. */
/* Set while bp_view_infer_desc runs a view function over a descriptor
 * (the calling thread only): make_view writes the view here, checked as a
 * view of a buffer of unknown size, instead of making a tensor. */
static _Thread_local view_desc_t* view_capture;

static bp_status_t make_view(const char* fn, bp_tensor_t* t, const view_desc_t* v,
                             bp_tensor_t** out) {
  bp_status_t status = bp__tensor_check_shape(fn, t->dtype, v->rank, v->sizes, v->strides);
  if (view_capture != NULL) {
    if (status == BP_OK) *view_capture = *v;
    return status;
  }
  if (status == BP_OK)
    status = bp__tensor_check_span(fn, t->buffer, t->dtype, v->rank, v->sizes, v->strides,
                                   v->byte_offset);
  if (status != BP_OK) return status;
  return bp__tensor_wrap(t->buffer, t->dtype, v->rank, v->sizes, v->strides, v->byte_offset, out);
}

/* Wraps a possibly negative dim into [0, rank). `rank` is the number of
 * valid positions (rank + 1 for unsqueeze). */
static bp_status_t wrap_dim(const char* fn, int64_t dim, int64_t rank, int64_t* out) {
  int64_t d = dim < 0 ? dim + rank : dim;
  if (rank <= 0 || d < 0 || d >= rank)
    return bp__error(BP_INVALID_ARGUMENT, "%s: dim %lld out of range for %lld dims", fn,
                     (long long)dim, (long long)rank);
  *out = d;
  return BP_OK;
}

/* byte_offset + elements * elemsize (elements may be negative). */
static bp_status_t shift_offset(const char* fn, const bp_tensor_t* t, int64_t elements,
                                uint64_t* inout_offset) {
  int64_t bytes = 0, result = 0;
  if (bp__mul_overflow_i64(elements, (int64_t)bp_dtype_size(t->dtype), &bytes) ||
      bp__add_overflow_i64((int64_t)*inout_offset, bytes, &result) || result < 0)
    return bp__error(BP_OUT_OF_RANGE, "%s: the view's byte offset is out of range", fn);
  *inout_offset = (uint64_t)result;
  return BP_OK;
}

/* Clears the message and checks the tensor and output arguments. Pass them
 * by their public parameter names (t, out): the message quotes them. */
#define CHECK_ARGS(fn, t, out) \
  do {                         \
    bp__clear_error();         \
    BP__REQUIRE_ARG(fn, t);    \
    BP__REQUIRE_ARG(fn, out);  \
  } while (0)

/* CHECK_ARGS for the views of one existing dim: also wraps `dim` into *d. */
static bp_status_t check_dim_args(const char* fn, bp_tensor_t* t, bp_tensor_t** out, int64_t dim,
                                  int64_t* d) {
  CHECK_ARGS(fn, t, out);
  return wrap_dim(fn, dim, t->rank, d);
}

/* CHECK_ARGS for the views given a new shape of `rank` sizes. */
static bp_status_t check_shape_args(const char* fn, bp_tensor_t* t, bp_tensor_t** out,
                                    uint32_t rank, const int64_t* sizes) {
  CHECK_ARGS(fn, t, out);
  if (rank > 0) BP__REQUIRE_ARG(fn, sizes);
  if (rank > BP_MAX_RANK)
    return bp__error(BP_INVALID_ARGUMENT, "%s: rank %u exceeds the maximum %d", fn, rank,
                     BP_MAX_RANK);
  return BP_OK;
}

/* CHECK_ARGS for a view with one more dim: wraps `dim` over rank + 1. */
static bp_status_t check_new_dim_args(const char* fn, bp_tensor_t* t, bp_tensor_t** out,
                                      int64_t dim, int64_t* d) {
  CHECK_ARGS(fn, t, out);
  if (t->rank >= BP_MAX_RANK)
    return bp__error(BP_INVALID_ARGUMENT, "%s: the tensor already has the maximum rank %d", fn,
                     BP_MAX_RANK);
  return wrap_dim(fn, dim, (int64_t)t->rank + 1, d);
}

/* Moves the view's start `index` elements along dim d of t. */
static bp_status_t shift_along(const char* fn, const bp_tensor_t* t, int64_t d, int64_t index,
                               view_desc_t* v) {
  int64_t elements = 0;
  if (bp__mul_overflow_i64(index, t->strides[d], &elements))
    return bp__error(BP_OUT_OF_RANGE, "%s: the view's offset overflows", fn);
  return shift_offset(fn, t, elements, &v->byte_offset);
}

/* Removes dim d of t from the view (the dims after it move down). */
static void drop_dim(const bp_tensor_t* t, uint32_t d, view_desc_t* v) {
  for (uint32_t k = d; k + 1 < t->rank; ++k) {
    v->sizes[k] = t->sizes[k + 1];
    v->strides[k] = t->strides[k + 1];
  }
  v->rank = t->rank - 1;
  v->sizes[v->rank] = 0;
  v->strides[v->rank] = 0;
}

bp_status_t bp_tensor_alias(bp_tensor_t* t, bp_tensor_t** out) {
  static const char fn[] = "bp_tensor_alias";
  view_desc_t v;
  CHECK_ARGS(fn, t, out);
  desc_of(t, &v);
  return make_view(fn, t, &v, out);
}

bp_status_t bp_tensor_as_strided(bp_tensor_t* t, uint32_t rank, const int64_t* sizes,
                                 const int64_t* strides, const int64_t* storage_offset_elems,
                                 bp_tensor_t** out) {
  static const char fn[] = "bp_tensor_as_strided";
  bp_status_t status = BP_OK;
  view_desc_t v;
  CHECK_ARGS(fn, t, out);
  if (rank > 0) {
    BP__REQUIRE_ARG(fn, sizes);
    BP__REQUIRE_ARG(fn, strides);
  }
  if ((status = bp__tensor_check_shape(fn, t->dtype, rank, sizes, strides)) != BP_OK) return status;
  if (storage_offset_elems != NULL && *storage_offset_elems < 0)
    return bp__error(BP_INVALID_ARGUMENT, "%s: storage_offset_elems %lld is negative", fn,
                     (long long)*storage_offset_elems);
  memset(&v, 0, sizeof(v));
  v.rank = rank;
  memcpy(v.sizes, sizes, rank * sizeof(int64_t));
  memcpy(v.strides, strides, rank * sizeof(int64_t));
  v.byte_offset = t->byte_offset;
  if (storage_offset_elems != NULL) {
    v.byte_offset = 0;
    if ((status = shift_offset(fn, t, *storage_offset_elems, &v.byte_offset)) != BP_OK)
      return status;
  }
  return make_view(fn, t, &v, out);
}

bp_status_t bp_tensor_permute(bp_tensor_t* t, const int64_t* dims, bp_tensor_t** out) {
  static const char fn[] = "bp_tensor_permute";
  bp_status_t status = BP_OK;
  int seen[BP_MAX_RANK] = {0};
  view_desc_t v;
  CHECK_ARGS(fn, t, out);
  if (t->rank > 0) BP__REQUIRE_ARG(fn, dims);
  desc_of(t, &v);
  for (uint32_t i = 0; i < t->rank; ++i) {
    int64_t d = 0;
    if ((status = wrap_dim(fn, dims[i], t->rank, &d)) != BP_OK) return status;
    if (seen[d])
      return bp__error(BP_INVALID_ARGUMENT, "%s: dim %lld repeats; dims must be a permutation", fn,
                       (long long)dims[i]);
    seen[d] = 1;
    v.sizes[i] = t->sizes[d];
    v.strides[i] = t->strides[d];
  }
  return make_view(fn, t, &v, out);
}

bp_status_t bp_tensor_slice(bp_tensor_t* t, int64_t dim, int64_t start, int64_t end, int64_t step,
                            bp_tensor_t** out) {
  static const char fn[] = "bp_tensor_slice";
  int64_t d = 0;
  view_desc_t v;
  bp_status_t status = check_dim_args(fn, t, out, dim, &d);
  if (status != BP_OK) return status;
  if (step <= 0)
    return bp__error(BP_INVALID_ARGUMENT, "%s: step %lld must be positive", fn, (long long)step);
  const int64_t size = t->sizes[d];
  /* Python rules: negative bounds count from the end, then clamp. */
  if (start < 0) start += size;
  if (end < 0) end += size;
  if (start < 0) start = 0;
  if (start > size) start = size;
  if (end < start) end = start;
  if (end > size) end = size;
  desc_of(t, &v);
  v.sizes[d] = end == start ? 0 : (end - start - 1) / step + 1;
  if (bp__mul_overflow_i64(t->strides[d], step, &v.strides[d])) {
    /* The stride of a dim with at most one element is never used. */
    if (v.sizes[d] > 1) return bp__error(BP_OUT_OF_RANGE, "%s: the stride overflows", fn);
    v.strides[d] = t->strides[d];
  }
  if (start > 0 && (status = shift_along(fn, t, d, start, &v)) != BP_OK) return status;
  return make_view(fn, t, &v, out);
}

bp_status_t bp_tensor_select(bp_tensor_t* t, int64_t dim, int64_t index, bp_tensor_t** out) {
  static const char fn[] = "bp_tensor_select";
  int64_t d = 0;
  view_desc_t v;
  bp_status_t status = check_dim_args(fn, t, out, dim, &d);
  if (status != BP_OK) return status;
  const int64_t size = t->sizes[d];
  const int64_t i = index < 0 ? index + size : index;
  if (i < 0 || i >= size)
    return bp__error(BP_OUT_OF_RANGE, "%s: index %lld out of range for dim %lld of size %lld", fn,
                     (long long)index, (long long)d, (long long)size);
  desc_of(t, &v);
  if ((status = shift_along(fn, t, d, i, &v)) != BP_OK) return status;
  drop_dim(t, (uint32_t)d, &v);
  return make_view(fn, t, &v, out);
}

bp_status_t bp_tensor_expand(bp_tensor_t* t, uint32_t rank, const int64_t* sizes,
                             bp_tensor_t** out) {
  static const char fn[] = "bp_tensor_expand";
  view_desc_t v;
  bp_status_t status = check_shape_args(fn, t, out, rank, sizes);
  if (status != BP_OK) return status;
  if (rank < t->rank)
    return bp__error(BP_INVALID_ARGUMENT,
                     "%s: %u sizes given for a tensor of rank %u; expand cannot remove dims", fn,
                     rank, t->rank);
  memset(&v, 0, sizeof(v));
  v.rank = rank;
  v.byte_offset = t->byte_offset;
  const uint32_t lead = rank - t->rank;
  for (uint32_t i = 0; i < rank; ++i) {
    if (i < lead) {
      if (sizes[i] < 0)
        return bp__error(BP_INVALID_ARGUMENT, "%s: size %lld of new leading dim %u must be >= 0",
                         fn, (long long)sizes[i], i);
      v.sizes[i] = sizes[i];
      v.strides[i] = 0;
      continue;
    }
    const int64_t old = t->sizes[i - lead];
    if (sizes[i] == -1 || sizes[i] == old) {
      v.sizes[i] = old;
      v.strides[i] = t->strides[i - lead];
    } else if (sizes[i] < 0) {
      return bp__error(BP_INVALID_ARGUMENT, "%s: size %lld of dim %u is invalid", fn,
                       (long long)sizes[i], i);
    } else if (old == 1) {
      v.sizes[i] = sizes[i];
      v.strides[i] = 0;
    } else {
      return bp__error(BP_INVALID_ARGUMENT,
                       "%s: size %lld of dim %u must match the existing size %lld "
                       "(only size-1 dims expand)",
                       fn, (long long)sizes[i], i, (long long)old);
    }
  }
  /* make_view refuses a shape whose byte size overflows (the element count
   * alone may fit: 2^62 f32 elements are 2^64 bytes). */
  return make_view(fn, t, &v, out);
}

/* PyTorch's computeStride: strides for viewing (old sizes, old strides) as
 * `new_sizes` without copying, or nonzero when the layout does not allow
 * it. Dims of the old shape merge into chunks that are contiguous with each
 * other; each chunk must map onto whole dims of the new shape. */
static int compute_view_strides(uint32_t old_rank, const int64_t* old_sizes,
                                const int64_t* old_strides, int64_t numel, uint32_t new_rank,
                                const int64_t* new_sizes, int64_t* new_strides) {
  if (old_rank == 0) {
    for (uint32_t d = 0; d < new_rank; ++d) new_strides[d] = 1;
    return 0;
  }
  if (numel == 0) {
    int same = old_rank == new_rank;
    for (uint32_t d = 0; same && d < old_rank; ++d) same = old_sizes[d] == new_sizes[d];
    if (same) {
      memcpy(new_strides, old_strides, old_rank * sizeof(int64_t));
      return 0;
    }
    return bp__dense_strides(new_rank, new_sizes, new_strides);
  }
  int64_t view_d = (int64_t)new_rank - 1;
  int64_t chunk_base_stride = old_strides[old_rank - 1];
  int64_t tensor_numel = 1;
  int64_t view_numel = 1;
  for (int64_t tensor_d = (int64_t)old_rank - 1; tensor_d >= 0; tensor_d--) {
    int64_t chunk_stride = 0;
    if (bp__mul_overflow_i64(tensor_numel, old_sizes[tensor_d], &tensor_numel) ||
        bp__mul_overflow_i64(tensor_numel, chunk_base_stride, &chunk_stride))
      return 1;
    if (tensor_d == 0 ||
        (old_sizes[tensor_d - 1] != 1 && old_strides[tensor_d - 1] != chunk_stride)) {
      while (view_d >= 0 && (view_numel < tensor_numel || new_sizes[view_d] == 1)) {
        if (bp__mul_overflow_i64(view_numel, chunk_base_stride, &new_strides[view_d]) ||
            bp__mul_overflow_i64(view_numel, new_sizes[view_d], &view_numel))
          return 1;
        view_d--;
      }
      if (view_numel != tensor_numel) return 1;
      if (tensor_d > 0) {
        chunk_base_stride = old_strides[tensor_d - 1];
        tensor_numel = 1;
        view_numel = 1;
      }
    }
  }
  return view_d != -1;
}

bp_status_t bp_tensor_view(bp_tensor_t* t, uint32_t rank, const int64_t* sizes, bp_tensor_t** out) {
  static const char fn[] = "bp_tensor_view";
  int64_t infer = -1, known = 1, numel = bp_tensor_numel(t);
  view_desc_t v;
  bp_status_t status = check_shape_args(fn, t, out, rank, sizes);
  if (status != BP_OK) return status;
  memset(&v, 0, sizeof(v));
  v.rank = rank;
  v.byte_offset = t->byte_offset;
  for (uint32_t i = 0; i < rank; ++i) {
    v.sizes[i] = sizes[i];
    if (sizes[i] == -1) {
      if (infer >= 0) return bp__error(BP_INVALID_ARGUMENT, "%s: only one size may be -1", fn);
      infer = i;
    } else if (sizes[i] < 0) {
      return bp__error(BP_INVALID_ARGUMENT, "%s: size %lld of dim %u is invalid", fn,
                       (long long)sizes[i], i);
    } else if (bp__mul_overflow_i64(known, sizes[i], &known)) {
      return bp__error(BP_INVALID_ARGUMENT, "%s: the element count overflows", fn);
    }
  }
  if (infer >= 0) {
    if (known == 0)
      return bp__error(BP_INVALID_ARGUMENT,
                       "%s: cannot infer the -1 size of dim %lld: the other sizes multiply to 0",
                       fn, (long long)infer);
    if (numel % known != 0)
      return bp__error(BP_INVALID_ARGUMENT,
                       "%s: shape is invalid for %lld elements (the known sizes multiply to %lld)",
                       fn, (long long)numel, (long long)known);
    v.sizes[infer] = numel / known;
  } else if (known != numel) {
    return bp__error(BP_INVALID_ARGUMENT, "%s: shape has %lld elements but the tensor has %lld", fn,
                     (long long)known, (long long)numel);
  }
  if (compute_view_strides(t->rank, t->sizes, t->strides, numel, v.rank, v.sizes, v.strides))
    return bp__error(BP_INVALID_ARGUMENT,
                     "%s: the tensor's strides are incompatible with the requested shape "
                     "(it spans non-contiguous memory); make it contiguous first",
                     fn);
  return make_view(fn, t, &v, out);
}

bp_status_t bp_tensor_squeeze(bp_tensor_t* t, int64_t dim, bp_tensor_t** out) {
  static const char fn[] = "bp_tensor_squeeze";
  bp_status_t status = BP_OK;
  int64_t d = 0;
  view_desc_t v;
  CHECK_ARGS(fn, t, out);
  desc_of(t, &v);
  if (t->rank == 0) {
    /* As PyTorch: a 0-d tensor accepts dim 0 or -1 and stays as it is. */
    if (dim != 0 && dim != -1)
      return bp__error(BP_INVALID_ARGUMENT, "%s: dim %lld out of range for a 0-d tensor", fn,
                       (long long)dim);
    return make_view(fn, t, &v, out);
  }
  if ((status = wrap_dim(fn, dim, t->rank, &d)) != BP_OK) return status;
  if (t->sizes[d] == 1) drop_dim(t, (uint32_t)d, &v);
  return make_view(fn, t, &v, out);
}

bp_status_t bp_tensor_squeeze_dims(bp_tensor_t* t, uint32_t num_dims, const int64_t* dims,
                                   bp_tensor_t** out) {
  static const char fn[] = "bp_tensor_squeeze_dims";
  int drop[BP_MAX_RANK] = {0};
  view_desc_t v;
  CHECK_ARGS(fn, t, out);
  if (num_dims > 0) BP__REQUIRE_ARG(fn, dims);
  /* As PyTorch: a 0-d tensor takes dims 0 or -1 (each at most once). */
  const int64_t positions = t->rank == 0 ? 1 : (int64_t)t->rank;
  if (num_dims > (uint32_t)positions)
    return bp__error(BP_INVALID_ARGUMENT, "%s: %u dims given for a tensor of rank %u", fn,
                     num_dims, t->rank);
  for (uint32_t i = 0; i < num_dims; ++i) {
    int64_t d = 0;
    bp_status_t status = wrap_dim(fn, dims[i], positions, &d);
    if (status != BP_OK) return status;
    if (drop[d] != 0)
      return bp__error(BP_INVALID_ARGUMENT, "%s: dim %lld appears more than once in dims", fn,
                       (long long)d);
    drop[d] = 1;
  }
  desc_of(t, &v);
  /* Keep every dim not listed, and listed dims whose size is not 1. */
  uint32_t r = 0;
  for (uint32_t k = 0; k < t->rank; ++k) {
    if (drop[k] && t->sizes[k] == 1) continue;
    v.sizes[r] = t->sizes[k];
    v.strides[r] = t->strides[k];
    ++r;
  }
  for (uint32_t k = r; k < BP_MAX_RANK; ++k) v.sizes[k] = v.strides[k] = 0;
  v.rank = r;
  return make_view(fn, t, &v, out);
}

bp_status_t bp_tensor_unsqueeze(bp_tensor_t* t, int64_t dim, bp_tensor_t** out) {
  static const char fn[] = "bp_tensor_unsqueeze";
  int64_t d = 0;
  view_desc_t v;
  bp_status_t status = check_new_dim_args(fn, t, out, dim, &d);
  if (status != BP_OK) return status;
  desc_of(t, &v);
  for (uint32_t k = t->rank; k > (uint32_t)d; --k) {
    v.sizes[k] = t->sizes[k - 1];
    v.strides[k] = t->strides[k - 1];
  }
  v.sizes[d] = 1;
  /* As PyTorch: the stride the dim would have in a tensor of this layout. */
  if ((uint32_t)d >= t->rank) {
    v.strides[d] = 1;
  } else if (bp__mul_overflow_i64(t->sizes[d], t->strides[d], &v.strides[d])) {
    return bp__error(BP_OUT_OF_RANGE, "%s: the new dim's stride overflows", fn);
  }
  v.rank = t->rank + 1;
  return make_view(fn, t, &v, out);
}

bp_status_t bp_tensor_diagonal(bp_tensor_t* t, int64_t offset, int64_t dim1, int64_t dim2,
                               bp_tensor_t** out) {
  static const char fn[] = "bp_tensor_diagonal";
  bp_status_t status = BP_OK;
  int64_t d1 = 0, d2 = 0, diag = 0;
  view_desc_t v;
  CHECK_ARGS(fn, t, out);
  if (t->rank < 2)
    return bp__error(BP_INVALID_ARGUMENT, "%s: the tensor has rank %u; diagonal needs at least 2",
                     fn, t->rank);
  if ((status = wrap_dim(fn, dim1, t->rank, &d1)) != BP_OK ||
      (status = wrap_dim(fn, dim2, t->rank, &d2)) != BP_OK)
    return status;
  if (d1 == d2)
    return bp__error(BP_INVALID_ARGUMENT, "%s: dim1 and dim2 must differ (both are %lld)", fn,
                     (long long)d1);
  const int64_t n1 = t->sizes[d1], n2 = t->sizes[d2];
  if (offset >= 0) {
    diag = n2 - offset < n1 ? n2 - offset : n1;
  } else {
    diag = n1 + offset < n2 ? n1 + offset : n2;
  }
  if (diag < 0) diag = 0;
  desc_of(t, &v);
  if (diag > 0) {
    int64_t elements = 0;
    if (offset >= 0 ? bp__mul_overflow_i64(offset, t->strides[d2], &elements)
                    : bp__mul_overflow_i64(-offset, t->strides[d1], &elements))
      return bp__error(BP_OUT_OF_RANGE, "%s: the view's offset overflows", fn);
    if ((status = shift_offset(fn, t, elements, &v.byte_offset)) != BP_OK) return status;
  }
  uint32_t r = 0;
  for (uint32_t k = 0; k < t->rank; ++k) {
    if (k == (uint32_t)d1 || k == (uint32_t)d2) continue;
    v.sizes[r] = t->sizes[k];
    v.strides[r] = t->strides[k];
    ++r;
  }
  v.sizes[r] = diag;
  if (bp__add_overflow_i64(t->strides[d1], t->strides[d2], &v.strides[r]))
    return bp__error(BP_OUT_OF_RANGE, "%s: the diagonal's stride overflows", fn);
  v.rank = r + 1;
  for (uint32_t k = v.rank; k < BP_MAX_RANK; ++k) v.sizes[k] = v.strides[k] = 0;
  return make_view(fn, t, &v, out);
}

/* The view functions themselves run over a tensor without a buffer whose
 * descriptor is `input`; make_view captures the result. */
bp_status_t bp_view_infer_desc(uint32_t view, const bp_tensor_desc_t* input, const int64_t* args,
                               uint32_t num_args, bp_tensor_desc_t* out_desc) {
  static const char fn[] = "bp_view_infer_desc";
  bp__clear_error();
  BP__REQUIRE_ARG(fn, input);
  BP__REQUIRE_ARG(fn, out_desc);
  if (num_args > 0) BP__REQUIRE_ARG(fn, args);
  if (input->struct_size < BP_TENSOR_DESC_V1_SIZE || out_desc->struct_size < BP_TENSOR_DESC_V1_SIZE)
    return bp__error(BP_INVALID_ARGUMENT, "%s: a descriptor's struct_size is below %u", fn,
                     BP_TENSOR_DESC_V1_SIZE);
  bp_status_t status =
      bp__tensor_check_shape(fn, input->dtype, input->rank, input->sizes, input->strides);
  if (status != BP_OK) return status;
  bp_tensor_t t;
  memset(&t, 0, sizeof(t));
  atomic_init(&t.refcount, 1);
  t.dtype = input->dtype;
  t.rank = input->rank;
  memcpy(t.sizes, input->sizes, sizeof(int64_t) * input->rank);
  memcpy(t.strides, input->strides, sizeof(int64_t) * input->rank);
  t.byte_offset = input->byte_offset;
  bp_tensor_t* unused = NULL;
  view_desc_t v;
  memset(&v, 0, sizeof(v));
  const uint32_t want[] = {
      [BP_VIEW_alias] = 0,  [BP_VIEW_permute] = t.rank, [BP_VIEW_slice] = 4,
      [BP_VIEW_select] = 2, [BP_VIEW_squeeze] = 1,      [BP_VIEW_unsqueeze] = 1,
  };
  int by_count = view == BP_VIEW_view || view == BP_VIEW_expand || view == BP_VIEW_squeeze_dims;
  int fixed = view < sizeof(want) / sizeof(want[0]) &&
              (view == BP_VIEW_alias || view == BP_VIEW_permute || view == BP_VIEW_slice ||
               view == BP_VIEW_select || view == BP_VIEW_squeeze || view == BP_VIEW_unsqueeze);
  if (!by_count && !fixed)
    return bp__error(BP_UNIMPLEMENTED, "%s: view %u has no descriptor form", fn, view);
  if (fixed && num_args != want[view])
    return bp__error(BP_INVALID_ARGUMENT, "%s: view %u takes %u arguments, got %u", fn, view,
                     want[view], num_args);
  view_capture = &v;
  switch (view) {
    case BP_VIEW_alias: status = bp_tensor_alias(&t, &unused); break;
    case BP_VIEW_permute: status = bp_tensor_permute(&t, args, &unused); break;
    case BP_VIEW_slice: status = bp_tensor_slice(&t, args[0], args[1], args[2], args[3], &unused); break;
    case BP_VIEW_select: status = bp_tensor_select(&t, args[0], args[1], &unused); break;
    case BP_VIEW_squeeze: status = bp_tensor_squeeze(&t, args[0], &unused); break;
    case BP_VIEW_unsqueeze: status = bp_tensor_unsqueeze(&t, args[0], &unused); break;
    case BP_VIEW_view: status = bp_tensor_view(&t, num_args, args, &unused); break;
    case BP_VIEW_expand: status = bp_tensor_expand(&t, num_args, args, &unused); break;
    default: status = bp_tensor_squeeze_dims(&t, num_args, args, &unused); break;
  }
  view_capture = NULL;
  if (status != BP_OK) return status;
  out_desc->dtype = input->dtype;
  out_desc->rank = v.rank;
  memset(out_desc->sizes, 0, sizeof(out_desc->sizes));
  memset(out_desc->strides, 0, sizeof(out_desc->strides));
  memcpy(out_desc->sizes, v.sizes, sizeof(int64_t) * v.rank);
  memcpy(out_desc->strides, v.strides, sizeof(int64_t) * v.rank);
  out_desc->byte_offset = v.byte_offset;
  out_desc->buffer = input->buffer;
  out_desc->layout = input->layout;
  return BP_OK;
}
