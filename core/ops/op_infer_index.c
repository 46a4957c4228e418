/* backplane core: inference rules of the index family -- advanced indexing
 * (index, index_put), masked_scatter, nonzero, embedding_bag and
 * embedding_dense_backward. (embedding, gather and index_select live in
 * op_infer_nn.c and op_infer_data.c.)
 *
 * Data-dependent checks (index values in range, enough source elements for
 * masked_scatter, offsets of embedding_bag) belong to the kernels: they fail
 * the stream with OUT_OF_RANGE. Everything decidable from shapes, dtypes and
 * attributes is checked here.
 */
#include <stdio.h>
#include <string.h>

#include "ops/ops_internal.h"

static int bp__is_index_dtype(uint32_t d) { return d == BP_DTYPE_I32 || d == BP_DTYPE_I64; }

/* ---- advanced indexing ---------------------------------------------------------- */

/* Geometry of self[indices] (PyTorch advanced indexing): the index tensors
 * broadcast together to shape B; absent entries (and dims past the list)
 * are full slices. When the indexed dims are adjacent, B replaces them in
 * place; otherwise B comes first, followed by the sliced dims in order. */
typedef struct bp__adv_index {
  uint32_t out_rank;
  int64_t out_sizes[BP_MAX_RANK];
} bp__adv_index_t;

/* Inputs [1, 1 + count) are the list. */
static bp_status_t bp__adv_index_shape(bp__infer_t* x, uint32_t count, bp__adv_index_t* g) {
  const bp_tensor_desc_t* self = &x->in[0];
  char n[64], s0[192];
  if (count > self->rank) {
    return bp__infer_fail(x, "too many indices (%u) for a tensor of rank %u", count, self->rank);
  }
  uint32_t brank = 0, nidx = 0, first = 0, last = 0;
  int64_t bsizes[BP_MAX_RANK];
  int adjacent = 1;
  for (uint32_t k = 0; k < count; ++k) {
    const bp_tensor_desc_t* t = &x->in[1 + k];
    if (t->dtype == BP_DTYPE_INVALID) continue; /* a full slice */
    const char* name = bp__op_input_name(x->op, x->num_inputs, 1 + k, n);
    if (t->dtype == BP_DTYPE_BOOL || t->dtype == BP_DTYPE_U8) {
      return bp__infer_fail(x,
                            "index '%s' is a %s mask: mask indices give a data-dependent shape; "
                            "pass the columns of nonzero(mask) as index tensors",
                            name, bp_dtype_name(t->dtype));
    }
    if (!bp__is_index_dtype(t->dtype)) {
      return bp__infer_fail(x, "index '%s' has dtype %s; expected i64 or i32", name,
                            bp_dtype_name(t->dtype));
    }
    if (nidx == 0) {
      first = k;
    } else if (k != last + 1) {
      adjacent = 0;
    }
    last = k;
    /* Broadcast into B (right-aligned, size 1 expands). */
    uint32_t r = brank > t->rank ? brank : t->rank;
    int64_t merged[BP_MAX_RANK];
    for (uint32_t d = 0; d < r; ++d) {
      int64_t a = d + brank >= r ? bsizes[d + brank - r] : 1;
      int64_t b = d + t->rank >= r ? t->sizes[d + t->rank - r] : 1;
      if (a != b && a != 1 && b != 1) {
        char s1[192];
        return bp__infer_fail(x, "index '%s' of shape %s does not broadcast with the other "
                                 "indices (shape so far %s)",
                              name, bp__shape_str(t->rank, t->sizes, s0, sizeof(s0)),
                              bp__shape_str(brank, bsizes, s1, sizeof(s1)));
      }
      merged[d] = a == 1 ? b : a;
    }
    brank = r;
    memcpy(bsizes, merged, sizeof(int64_t) * r);
    ++nidx;
  }
  if (nidx == 0) { /* only full slices: a copy of self */
    g->out_rank = self->rank;
    memcpy(g->out_sizes, self->sizes, sizeof(int64_t) * self->rank);
    return BP_OK;
  }
  uint32_t rest = self->rank - nidx;
  if (brank + rest > BP_MAX_RANK) {
    return bp__infer_fail(x, "the result would have rank %u (more than %d)", brank + rest,
                          BP_MAX_RANK);
  }
  uint32_t o = 0;
  if (adjacent) {
    for (uint32_t d = 0; d < first; ++d) g->out_sizes[o++] = self->sizes[d];
    for (uint32_t d = 0; d < brank; ++d) g->out_sizes[o++] = bsizes[d];
    for (uint32_t d = last + 1; d < self->rank; ++d) g->out_sizes[o++] = self->sizes[d];
  } else {
    for (uint32_t d = 0; d < brank; ++d) g->out_sizes[o++] = bsizes[d];
    for (uint32_t d = 0; d < self->rank; ++d) {
      int indexed = d < count && x->in[1 + d].dtype != BP_DTYPE_INVALID;
      if (!indexed) g->out_sizes[o++] = self->sizes[d];
    }
  }
  g->out_rank = o;
  return BP_OK;
}

bp_status_t bp__infer_index(bp__infer_t* x) {
  bp__adv_index_t g;
  bp_status_t st = bp__adv_index_shape(x, x->num_inputs - 1, &g);
  if (st != BP_OK) return st;
  x->compute_dtype = x->in[0].dtype;
  return bp__infer_set_out(x, 0, x->in[0].dtype, g.out_rank, g.out_sizes);
}

/* index_put(self, indices, values): out like self; values (self's dtype)
 * broadcast to the shape of self[indices]. */
bp_status_t bp__infer_index_put(bp__infer_t* x) {
  const bp_tensor_desc_t *self = &x->in[0], *values = &x->in[x->num_inputs - 1];
  bp__adv_index_t g;
  bp_status_t st = bp__adv_index_shape(x, x->num_inputs - 2, &g);
  if (st != BP_OK) return st;
  if (values->dtype != self->dtype) {
    return bp__infer_fail(x, "input 'values' has dtype %s but 'self' has %s (index_put needs "
                             "matching dtypes)",
                          bp_dtype_name(values->dtype), bp_dtype_name(self->dtype));
  }
  int ok = values->rank <= g.out_rank;
  for (uint32_t k = 0; ok && k < values->rank; ++k) {
    int64_t v = values->sizes[values->rank - 1 - k];
    ok = v == 1 || v == g.out_sizes[g.out_rank - 1 - k];
  }
  if (!ok) {
    char s0[192], s1[192];
    return bp__infer_fail(x, "shape mismatch: 'values' of shape %s cannot be broadcast to the "
                             "indexing result of shape %s",
                          bp__shape_str(values->rank, values->sizes, s0, sizeof(s0)),
                          bp__shape_str(g.out_rank, g.out_sizes, s1, sizeof(s1)));
  }
  x->compute_dtype = self->dtype;
  return bp__infer_set_out(x, 0, self->dtype, self->rank, self->sizes);
}

/* masked_scatter(self, mask, source): out has the broadcast shape of self and
 * mask (as PyTorch's out-of-place form), self's dtype. */
bp_status_t bp__infer_masked_scatter(bp__infer_t* x) {
  const bp_tensor_desc_t *self = &x->in[0], *mask = &x->in[1], *source = &x->in[2];
  if (mask->dtype != BP_DTYPE_BOOL) {
    return bp__infer_fail(x, "input 'mask' has dtype %s; expected bool", bp_dtype_name(mask->dtype));
  }
  if (source->dtype != self->dtype) {
    return bp__infer_fail(x, "input 'source' has dtype %s but 'self' has %s (expected the same)",
                          bp_dtype_name(source->dtype), bp_dtype_name(self->dtype));
  }
  uint32_t rank;
  int64_t sizes[BP_MAX_RANK];
  bp_status_t st = bp__infer_broadcast(x, 0x3, &rank, sizes);
  if (st != BP_OK) return st;
  x->compute_dtype = self->dtype;
  return bp__infer_set_out(x, 0, self->dtype, rank, sizes);
}

/* nonzero(self) -> out [numel, rank] i64 and count [] i64. The data decide
 * how many rows are real: rows [0, count) hold the coordinates of the nonzero
 * elements in row-major order, the rest hold -1. */
bp_status_t bp__infer_nonzero(bp__infer_t* x) {
  const bp_tensor_desc_t* self = &x->in[0];
  if (self->dtype == BP_DTYPE_C64) {
    return bp__infer_fail(x, "input 'self' has dtype c64, which nonzero does not take");
  }
  int64_t numel = 1;
  for (uint32_t d = 0; d < self->rank; ++d) numel *= self->sizes[d]; /* sizes checked by bp_op_run */
  int64_t sizes[2] = {numel, (int64_t)self->rank};
  x->compute_dtype = BP_DTYPE_I64;
  bp_status_t st = bp__infer_set_out(x, 0, BP_DTYPE_I64, 2, sizes);
  if (st == BP_OK) st = bp__infer_set_out(x, 1, BP_DTYPE_I64, 0, NULL);
  return st;
}

/* ---- embeddings ----------------------------------------------------------------- */

static bp_status_t bp__expect_float(bp__infer_t* x, uint32_t i) {
  if (!bp__dtype_is_float(x->in[i].dtype)) {
    char n[64];
    return bp__infer_fail(x, "input '%s' has dtype %s; expected f32, f64, f16 or bf16",
                          bp__op_input_name(x->op, x->num_inputs, i, n),
                          bp_dtype_name(x->in[i].dtype));
  }
  return BP_OK;
}

static bp_status_t bp__expect_index(bp__infer_t* x, uint32_t i, uint32_t rank) {
  char n[64];
  const char* name = bp__op_input_name(x->op, x->num_inputs, i, n);
  if (!bp__is_index_dtype(x->in[i].dtype)) {
    return bp__infer_fail(x, "input '%s' has dtype %s; expected i32 or i64", name,
                          bp_dtype_name(x->in[i].dtype));
  }
  if (rank != UINT32_MAX && x->in[i].rank != rank) {
    return bp__infer_fail(x, "input '%s' must have rank %u, got %u", name, rank, x->in[i].rank);
  }
  return BP_OK;
}

/* _embedding_bag(weight [V, D], indices [n], offsets [B or B+1],
 * per_sample_weights [n]?) -> out [B, D] (weight's dtype), offset2bag [n],
 * bag_size [B], max_indices [B, D] (MAX) or [B] (SUM, MEAN); the last three
 * in the promoted dtype of indices and offsets. */
bp_status_t bp__infer_embedding_bag(bp__infer_t* x) {
  const bp_embedding_attrs_t* a = x->attrs;
  const bp_tensor_desc_t *w = &x->in[0], *idx = &x->in[1], *off = &x->in[2];
  bp_status_t st = bp__expect_float(x, 0);
  if (st == BP_OK) st = bp__expect_index(x, 1, 1);
  if (st == BP_OK) st = bp__expect_index(x, 2, 1);
  if (st != BP_OK) return st;
  if (w->rank != 2) {
    return bp__infer_fail(x, "input 'weight' must have rank 2, got %u", w->rank);
  }
  if (bp__in_present(x, 3)) {
    const bp_tensor_desc_t* psw = &x->in[3];
    if (a->mode != BP_BAG_SUM) {
      return bp__infer_fail(x, "per_sample_weights are only supported for mode sum (got mode %u)",
                            a->mode);
    }
    if (psw->dtype != w->dtype) {
      return bp__infer_fail(x, "input 'per_sample_weights' has dtype %s; expected %s (weight's)",
                            bp_dtype_name(psw->dtype), bp_dtype_name(w->dtype));
    }
    if (psw->rank != 1 || psw->sizes[0] != idx->sizes[0]) {
      char s[192];
      return bp__infer_fail(x, "input 'per_sample_weights' has shape %s; expected [%lld] (one "
                               "weight per index)",
                            bp__shape_str(psw->rank, psw->sizes, s, sizeof(s)),
                            (long long)idx->sizes[0]);
    }
  }
  int64_t bags = off->sizes[0] - (a->include_last_offset ? 1 : 0);
  if (bags < 0) {
    return bp__infer_fail(x, "include_last_offset needs at least one offset, got none");
  }
  uint32_t id = bp__promote_types(idx->dtype, off->dtype);
  int64_t out[2] = {bags, w->sizes[1]};
  x->compute_dtype = w->dtype;
  st = bp__infer_set_out(x, 0, w->dtype, 2, out);
  if (st == BP_OK) st = bp__infer_set_out(x, 1, id, 1, idx->sizes);
  if (st == BP_OK) st = bp__infer_set_out(x, 2, id, 1, &bags);
  if (st == BP_OK) st = bp__infer_set_out(x, 3, id, a->mode == BP_BAG_MAX ? 2 : 1, out);
  return st;
}

/* embedding_dense_backward(grad_output [*idx, D], indices [*idx]) ->
 * grad_weight [num_weights, D]. */
bp_status_t bp__infer_embedding_dense_backward(bp__infer_t* x) {
  const bp_embedding_attrs_t* a = x->attrs;
  const bp_tensor_desc_t *g = &x->in[0], *idx = &x->in[1];
  bp_status_t st = bp__expect_float(x, 0);
  if (st == BP_OK) st = bp__expect_index(x, 1, UINT32_MAX);
  if (st != BP_OK) return st;
  if (a->num_weights < 0) {
    return bp__infer_fail(x, "attrs.num_weights = %lld must be >= 0", (long long)a->num_weights);
  }
  if (g->rank != idx->rank + 1 || !bp__shape_equal(idx->rank, idx->sizes, idx->rank, g->sizes)) {
    char s0[192], s1[192];
    return bp__infer_fail(x, "input 'grad_output' has shape %s; expected the indices' shape %s "
                             "plus the embedding dim",
                          bp__shape_str(g->rank, g->sizes, s0, sizeof(s0)),
                          bp__shape_str(idx->rank, idx->sizes, s1, sizeof(s1)));
  }
  int64_t sizes[2] = {a->num_weights, g->sizes[g->rank - 1]};
  x->compute_dtype = g->dtype;
  return bp__infer_set_out(x, 0, g->dtype, 2, sizes);
}
