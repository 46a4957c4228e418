/* References of the index family: embedding, embedding_bag,
 * embedding_dense_backward, gather, index, index_put, index_select,
 * masked_scatter and nonzero. Plain loops over dense row-major host data;
 * copies are exact, sums are fp64 with the REDUCE bound.
 *
 * Undefined or failing inputs are rejected (the suite only runs valid
 * cases): index values out of range, offsets that are not a valid CSR start
 * list, duplicate positions in index_put without accumulate (which value
 * lands is unspecified), too few source elements for masked_scatter.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ref.h"

void bpc_gen_index(struct bpc_gen* g);

static int64_t numel(uint32_t rank, const int64_t* sizes) {
  int64_t n = 1;
  for (uint32_t d = 0; d < rank; d++) n *= sizes[d];
  return n;
}

/* Row-major linear index of multi-index idx in a dense tensor of `sizes`. */
static int64_t lin(uint32_t rank, const int64_t* sizes, const int64_t* idx) {
  int64_t l = 0;
  for (uint32_t d = 0; d < rank; d++) l = l * sizes[d] + idx[d];
  return l;
}

static int64_t load_i(const bpc_host_tensor_t* t, int64_t k) { return bpc_load(t->dtype, t->data, k).i; }

/* e[k] = element j of t (same dtype: an exact copy). */
static void put_from(bpc_expected_t* e, int64_t k, const bpc_host_tensor_t* t, int64_t j) {
  bpc_num_t v = bpc_load(t->dtype, t->data, j);
  if (e->f) e->f[k] = v.f;
  else e->i[k] = v.i;
}

static int is_index(uint32_t d) { return d == BP_DTYPE_I32 || d == BP_DTYPE_I64; }

/* ---- gather, index_select, embedding -------------------------------------------- */

static bp_status_t ref_gather(const bpc_case_t* c, const bpc_host_tensor_t* in, bpc_ref_result_t* res) {
  const bpc_host_tensor_t *self = &in[0], *index = &in[1];
  uint32_t r = self->rank ? self->rank : 1;
  if ((index->rank ? index->rank : 1) != r || !is_index(index->dtype)) return bpc_ref_reject(res, "gather: ranks or dtype");
  int64_t dim = c->attrs.dim.dim < 0 ? (int64_t)c->attrs.dim.dim + (int64_t)r : (int64_t)c->attrs.dim.dim;
  if (dim < 0 || dim >= r) return bpc_ref_reject(res, "gather: dim");
  int64_t ss[BP_MAX_RANK] = {1}, is[BP_MAX_RANK] = {1};
  memcpy(ss, self->sizes, sizeof(int64_t) * self->rank);
  memcpy(is, index->sizes, sizeof(int64_t) * index->rank);
  for (uint32_t d = 0; d < r; d++)
    if (d != dim && is[d] > ss[d]) return bpc_ref_reject(res, "gather: index larger than self");
  bp_status_t st = bpc_ref_single_output(res, self->dtype, index->rank, index->sizes, 0, self->dtype);
  if (st != BP_OK) return st;
  bpc_expected_t* e = &res->out[0];
  int64_t idx[BP_MAX_RANK] = {0}, src[BP_MAX_RANK];
  for (int64_t k = 0; k < e->numel; k++) {
    int64_t v = load_i(index, k);
    if (v < 0 || v >= ss[dim]) return bpc_ref_reject(res, "gather: index %lld out of range", (long long)v);
    memcpy(src, idx, sizeof src);
    src[dim] = v;
    put_from(e, k, self, lin(r, ss, src));
    bpc_next_index(r, is, idx);
  }
  return BP_OK;
}

static bp_status_t ref_index_select(const bpc_case_t* c, const bpc_host_tensor_t* in, bpc_ref_result_t* res) {
  const bpc_host_tensor_t *self = &in[0], *index = &in[1];
  uint32_t r = self->rank ? self->rank : 1;
  if (index->rank > 1 || !is_index(index->dtype)) return bpc_ref_reject(res, "index_select: index");
  int64_t dim = c->attrs.dim.dim < 0 ? (int64_t)c->attrs.dim.dim + (int64_t)r : (int64_t)c->attrs.dim.dim;
  if (dim < 0 || dim >= r) return bpc_ref_reject(res, "index_select: dim");
  int64_t ss[BP_MAX_RANK] = {1}, os[BP_MAX_RANK] = {1};
  memcpy(ss, self->sizes, sizeof(int64_t) * self->rank);
  memcpy(os, ss, sizeof os);
  os[dim] = index->numel;
  if (self->rank == 0 && index->numel != 1) return bpc_ref_reject(res, "index_select: 0-d self");
  bp_status_t st = bpc_ref_single_output(res, self->dtype, self->rank, os, 0, self->dtype);
  if (st != BP_OK) return st;
  bpc_expected_t* e = &res->out[0];
  int64_t idx[BP_MAX_RANK] = {0}, src[BP_MAX_RANK];
  for (int64_t k = 0; k < e->numel; k++) {
    int64_t v = load_i(index, idx[dim]);
    if (v < 0 || v >= ss[dim]) return bpc_ref_reject(res, "index_select: index %lld out of range", (long long)v);
    memcpy(src, idx, sizeof src);
    src[dim] = v;
    put_from(e, k, self, lin(r, ss, src));
    bpc_next_index(r, os, idx);
  }
  return BP_OK;
}

static bp_status_t ref_embedding(const bpc_case_t* c, const bpc_host_tensor_t* in, bpc_ref_result_t* res) {
  (void)c;
  const bpc_host_tensor_t *w = &in[0], *ind = &in[1];
  if (w->rank != 2 || !is_index(ind->dtype) || ind->rank + 1 > BP_MAX_RANK) return bpc_ref_reject(res, "embedding: shapes");
  int64_t os[BP_MAX_RANK];
  memcpy(os, ind->sizes, sizeof(int64_t) * ind->rank);
  os[ind->rank] = w->sizes[1];
  bp_status_t st = bpc_ref_single_output(res, w->dtype, ind->rank + 1, os, 0, w->dtype);
  if (st != BP_OK) return st;
  bpc_expected_t* e = &res->out[0];
  for (int64_t i = 0; i < ind->numel; i++) {
    int64_t v = load_i(ind, i);
    if (v < 0 || v >= w->sizes[0]) return bpc_ref_reject(res, "embedding: index %lld out of range", (long long)v);
    for (int64_t j = 0; j < w->sizes[1]; j++) put_from(e, i * w->sizes[1] + j, w, v * w->sizes[1] + j);
  }
  return BP_OK;
}

/* ---- advanced indexing ------------------------------------------------------------ */

/* self[indices] for the list in[1 .. 1 + count): for every element of the
 * result, the linear index into self (or -1 after a rejection). */
typedef struct adv_ref {
  uint32_t rank;
  int64_t sizes[BP_MAX_RANK];
  int64_t* src; /* numel entries, malloc'd */
} adv_ref_t;

static bp_status_t adv_build(const bpc_host_tensor_t* in, uint32_t count, adv_ref_t* a, bpc_ref_result_t* res) {
  const bpc_host_tensor_t* self = &in[0];
  memset(a, 0, sizeof *a);
  if (count > self->rank) return bpc_ref_reject(res, "index: too many indices");
  const bpc_host_tensor_t* ts[BP_MAX_RANK];
  uint32_t nts = 0, first = 0, last = 0;
  int adjacent = 1;
  for (uint32_t k = 0; k < count; k++) {
    const bpc_host_tensor_t* t = &in[1 + k];
    if (t->dtype == BP_DTYPE_INVALID) continue;
    if (!is_index(t->dtype)) return bpc_ref_reject(res, "index: index dtype %s", bpc_dtype_name(t->dtype));
    if (nts && k != last + 1) adjacent = 0;
    if (!nts) first = k;
    last = k;
    ts[nts++] = t;
  }
  uint32_t brank = 0;
  int64_t bs[BP_MAX_RANK];
  if (nts && bpc_broadcast(ts, nts, &brank, bs) != BP_OK) return bpc_ref_reject(res, "index: indices do not broadcast");
  /* Result dims: which self dim (>= 0) or broadcast dim (-1 - b) each is. */
  int role[2 * BP_MAX_RANK];
  uint32_t r = 0;
  int indexed[BP_MAX_RANK] = {0};
  for (uint32_t k = 0; k < count; k++) indexed[k] = in[1 + k].dtype != BP_DTYPE_INVALID;
  if (nts == 0) {
    for (uint32_t d = 0; d < self->rank; d++) role[r++] = (int)d;
  } else if (adjacent) {
    for (uint32_t d = 0; d < first; d++) role[r++] = (int)d;
    for (uint32_t b = 0; b < brank; b++) role[r++] = -1 - (int)b;
    for (uint32_t d = last + 1; d < self->rank; d++) role[r++] = (int)d;
  } else {
    for (uint32_t b = 0; b < brank; b++) role[r++] = -1 - (int)b;
    for (uint32_t d = 0; d < self->rank; d++)
      if (!indexed[d]) role[r++] = (int)d;
  }
  if (r > BP_MAX_RANK) return bpc_ref_reject(res, "index: result rank %u", r);
  a->rank = r;
  for (uint32_t k = 0; k < r; k++) a->sizes[k] = role[k] >= 0 ? self->sizes[role[k]] : bs[-1 - role[k]];
  int64_t n = numel(r, a->sizes);
  a->src = malloc(sizeof(int64_t) * (size_t)(n > 0 ? n : 1));
  if (!a->src) return BP_RESOURCE_EXHAUSTED;
  int64_t o[BP_MAX_RANK] = {0}, bpos[BP_MAX_RANK] = {0}, s[BP_MAX_RANK];
  for (int64_t k = 0; k < n; k++) {
    for (uint32_t j = 0; j < r; j++) {
      if (role[j] >= 0) s[role[j]] = o[j];
      else bpos[-1 - role[j]] = o[j];
    }
    for (uint32_t d = 0; d < count; d++) {
      if (!indexed[d]) continue;
      const bpc_host_tensor_t* t = &in[1 + d];
      int64_t v = load_i(t, bpc_broadcast_index(t, brank, bpos));
      if (v < -self->sizes[d] || v >= self->sizes[d]) {
        free(a->src);
        a->src = NULL;
        return bpc_ref_reject(res, "index: %lld out of range for size %lld", (long long)v, (long long)self->sizes[d]);
      }
      s[d] = v < 0 ? v + self->sizes[d] : v;
    }
    a->src[k] = lin(self->rank, self->sizes, s);
    bpc_next_index(r, a->sizes, o);
  }
  return BP_OK;
}

static bp_status_t ref_index(const bpc_case_t* c, const bpc_host_tensor_t* in, bpc_ref_result_t* res) {
  adv_ref_t a;
  bp_status_t st = adv_build(in, c->num_inputs - 1, &a, res);
  if (st != BP_OK) return st;
  st = bpc_ref_single_output(res, in[0].dtype, a.rank, a.sizes, 0, in[0].dtype);
  if (st == BP_OK)
    for (int64_t k = 0; k < res->out[0].numel; k++) put_from(&res->out[0], k, &in[0], a.src[k]);
  free(a.src);
  return st;
}

/* Accumulating writes: sums in fp64 from self's value, in the order of the
 * result's elements; integers wrap, bool is logical or. */
static bp_status_t ref_index_put(const bpc_case_t* c, const bpc_host_tensor_t* in, bpc_ref_result_t* res) {
  const bpc_host_tensor_t *self = &in[0], *values = &in[c->num_inputs - 1];
  int acc = c->attrs.index_put.accumulate != 0;
  if (values->dtype != self->dtype) return bpc_ref_reject(res, "index_put: dtypes differ");
  adv_ref_t a;
  bp_status_t st = adv_build(in, c->num_inputs - 2, &a, res);
  if (st != BP_OK) return st;
  /* values must broadcast to the indexing result (one way). */
  if (values->rank > a.rank) st = bpc_ref_reject(res, "index_put: values rank");
  for (uint32_t k = 0; st == BP_OK && k < values->rank; k++) {
    int64_t v = values->sizes[values->rank - 1 - k];
    if (v != 1 && v != a.sizes[a.rank - 1 - k]) st = bpc_ref_reject(res, "index_put: values shape");
  }
  int64_t n = numel(a.rank, a.sizes);
  int64_t* writes = NULL;
  /* PyTorch's CPU kernel adds with the output dtype's `+=`, rounding to
   * f16/bf16 after every add; the REDUCE bound assumes f32 accumulation, so
   * each add counts as many terms as the unit roundoffs differ. */
  double per_add = self->dtype == BP_DTYPE_F16 ? 0x1.0p13 : self->dtype == BP_DTYPE_BF16 ? 0x1.0p16 : 1.0;
  if (st == BP_OK) st = bpc_ref_single_output(res, self->dtype, self->rank, self->sizes, acc, self->dtype);
  if (st == BP_OK && !(writes = calloc((size_t)(self->numel > 0 ? self->numel : 1), sizeof(int64_t))))
    st = BP_RESOURCE_EXHAUSTED;
  if (st == BP_OK) {
    bpc_expected_t* e = &res->out[0];
    for (int64_t k = 0; k < self->numel; k++) {
      put_from(e, k, self, k);
      if (e->mag) e->mag[k] = fabs(e->f[k]);
      if (e->nterms) e->nterms[k] = 1.0;
    }
    int64_t o[BP_MAX_RANK] = {0};
    for (int64_t k = 0; k < n && st == BP_OK; k++) {
      int64_t dst = a.src[k];
      bpc_num_t v = bpc_load(values->dtype, values->data, bpc_broadcast_index(values, a.rank, o));
      if (++writes[dst] > 1 && !acc) {
        st = bpc_ref_reject(res, "index_put: duplicate position without accumulate (unspecified)");
      } else if (!acc) {
        if (e->f) e->f[dst] = v.f;
        else e->i[dst] = v.i;
      } else if (e->f) {
        e->f[dst] += v.f;
        e->mag[dst] += fabs(v.f);
        e->nterms[dst] += per_add;
      } else if (self->dtype == BP_DTYPE_BOOL) {
        e->i[dst] = (e->i[dst] != 0) || (v.i != 0);
      } else {
        e->i[dst] = bpc_wrap_int((int64_t)((uint64_t)e->i[dst] + (uint64_t)v.i), self->dtype);
      }
      bpc_next_index(a.rank, a.sizes, o);
    }
  }
  free(writes);
  free(a.src);
  return st;
}

/* ---- masked_scatter, nonzero --------------------------------------------------------- */

static bp_status_t ref_masked_scatter(const bpc_case_t* c, const bpc_host_tensor_t* in, bpc_ref_result_t* res) {
  (void)c;
  const bpc_host_tensor_t *self = &in[0], *mask = &in[1], *source = &in[2];
  if (mask->dtype != BP_DTYPE_BOOL || source->dtype != self->dtype) return bpc_ref_reject(res, "masked_scatter: dtypes");
  const bpc_host_tensor_t* ts[2] = {self, mask};
  uint32_t r;
  int64_t s[BP_MAX_RANK];
  if (bpc_broadcast(ts, 2, &r, s) != BP_OK) return bpc_ref_reject(res, "masked_scatter: shapes");
  bp_status_t st = bpc_ref_single_output(res, self->dtype, r, s, 0, self->dtype);
  if (st != BP_OK) return st;
  bpc_expected_t* e = &res->out[0];
  int64_t idx[BP_MAX_RANK] = {0}, next = 0;
  for (int64_t k = 0; k < e->numel; k++) {
    if (load_i(mask, bpc_broadcast_index(mask, r, idx))) {
      if (next >= source->numel) return bpc_ref_reject(res, "masked_scatter: source too small");
      put_from(e, k, source, next++);
    } else {
      put_from(e, k, self, bpc_broadcast_index(self, r, idx));
    }
    bpc_next_index(r, s, idx);
  }
  return BP_OK;
}

/* Rows [0, count) are the coordinates of the nonzero elements (row-major);
 * rows past count hold -1. */
static bp_status_t ref_nonzero(const bpc_case_t* c, const bpc_host_tensor_t* in, bpc_ref_result_t* res) {
  (void)c;
  const bpc_host_tensor_t* self = &in[0];
  int64_t os[2] = {self->numel, self->rank};
  res->num_outputs = 2;
  res->compute_dtype = BP_DTYPE_I64;
  bp_status_t st = bpc_expected_init(&res->out[0], BP_DTYPE_I64, 2, os, 0);
  if (st == BP_OK) st = bpc_expected_init(&res->out[1], BP_DTYPE_I64, 0, NULL, 0);
  if (st != BP_OK) return st;
  int64_t idx[BP_MAX_RANK] = {0}, count = 0;
  for (int64_t k = 0; k < res->out[0].numel; k++) res->out[0].i[k] = -1;
  for (int64_t k = 0; k < self->numel; k++) {
    bpc_num_t v = bpc_load(self->dtype, self->data, k);
    int nz = bpc_dtype_is_float(self->dtype) ? v.f != 0.0 || isnan(v.f) : v.i != 0;
    if (nz) {
      for (uint32_t d = 0; d < self->rank; d++) res->out[0].i[count * self->rank + d] = idx[d];
      count++;
    }
    bpc_next_index(self->rank, self->sizes, idx);
  }
  res->out[1].i[0] = count;
  return BP_OK;
}

/* ---- embedding_bag, embedding_dense_backward -------------------------------------------- */

static bp_status_t ref_embedding_bag(const bpc_case_t* c, const bpc_host_tensor_t* in, bpc_ref_result_t* res) {
  const bp_embedding_attrs_t* a = &c->attrs.embedding;
  const bpc_host_tensor_t *w = &in[0], *ind = &in[1], *off = &in[2], *psw = &in[3];
  int has_psw = psw->dtype != BP_DTYPE_INVALID;
  if (w->rank != 2 || ind->rank != 1 || off->rank != 1 || !is_index(ind->dtype) || !is_index(off->dtype) ||
      !bpc_dtype_is_float(w->dtype) || (has_psw && a->mode != BP_BAG_SUM))
    return bpc_ref_reject(res, "embedding_bag: operands");
  int64_t n = ind->numel, noff = off->numel, D = w->sizes[1];
  int64_t bags = noff - (a->include_last_offset ? 1 : 0);
  if (bags < 0) return bpc_ref_reject(res, "embedding_bag: no offsets");
  for (int64_t b = 0; b < noff; b++) {
    int64_t v = load_i(off, b);
    if ((b == 0 && v != 0) || (b > 0 && v < load_i(off, b - 1)) || v > n ||
        (a->include_last_offset && b == noff - 1 && v != n))
      return bpc_ref_reject(res, "embedding_bag: offsets are not a CSR start list");
  }
  for (int64_t i = 0; i < n; i++)
    if (load_i(ind, i) < 0 || load_i(ind, i) >= w->sizes[0]) return bpc_ref_reject(res, "embedding_bag: index out of range");
  uint32_t id = bpc_promote_types(ind->dtype, off->dtype);
  int64_t os[2] = {bags, D};
  res->num_outputs = 4;
  res->compute_dtype = w->dtype;
  bp_status_t st = bpc_expected_init(&res->out[0], w->dtype, 2, os, 1);
  if (st == BP_OK) st = bpc_expected_init(&res->out[1], id, 1, &n, 0);
  if (st == BP_OK) st = bpc_expected_init(&res->out[2], id, 1, &bags, 0);
  if (st == BP_OK) st = bpc_expected_init(&res->out[3], id, a->mode == BP_BAG_MAX ? 2 : 1, os, 0);
  if (st != BP_OK) return st;
  bpc_expected_t *out = &res->out[0], *o2b = &res->out[1], *bsz = &res->out[2], *maxi = &res->out[3];
  for (int64_t i = 0; i < n; i++) {
    int64_t b = 0;
    for (int64_t k = 0; k < noff; k++)
      if (load_i(off, k) <= i) b = k;
    o2b->i[i] = b;
  }
  for (int64_t b = 0; b < bags; b++) {
    int64_t lo = load_i(off, b), hi = b + 1 < noff ? load_i(off, b + 1) : n, count = 0;
    for (int64_t j = 0; j < D; j++) {
      double* f = &out->f[b * D + j];
      int first = 1;
      count = 0;
      out->nterms[b * D + j] = 1.0;
      for (int64_t i = lo; i < hi; i++) {
        int64_t v = load_i(ind, i);
        if (v == a->padding_idx) continue;
        count++;
        double x = bpc_load(w->dtype, w->data, v * D + j).f;
        if (a->mode == BP_BAG_MAX) {
          if (first || x > *f) {
            *f = x;
            maxi->i[b * D + j] = v;
            out->mag[b * D + j] = fabs(x);
          }
        } else {
          double s = has_psw ? bpc_load(psw->dtype, psw->data, i).f : 1.0;
          *f += s * x;
          out->mag[b * D + j] += fabs(s * x);
          out->nterms[b * D + j] += 1.0;
        }
        first = 0;
      }
      if (a->mode == BP_BAG_MEAN && count > 0) {
        *f /= (double)count;
        out->mag[b * D + j] /= (double)count;
        out->nterms[b * D + j] += 1.0;
      }
    }
    if (D == 0)
      for (int64_t i = lo; i < hi; i++) count += load_i(ind, i) != a->padding_idx;
    bsz->i[b] = count;
  }
  return BP_OK;
}

static bp_status_t ref_embedding_dense_backward(const bpc_case_t* c, const bpc_host_tensor_t* in,
                                                bpc_ref_result_t* res) {
  const bp_embedding_attrs_t* a = &c->attrs.embedding;
  const bpc_host_tensor_t *g = &in[0], *ind = &in[1];
  if (!bpc_dtype_is_float(g->dtype) || !is_index(ind->dtype) || g->rank != ind->rank + 1 || a->num_weights < 0)
    return bpc_ref_reject(res, "embedding_dense_backward: operands");
  int64_t V = a->num_weights, D = g->sizes[g->rank - 1];
  int64_t os[2] = {V, D};
  for (int64_t i = 0; i < ind->numel; i++)
    if (load_i(ind, i) < 0 || load_i(ind, i) >= V) return bpc_ref_reject(res, "embedding_dense_backward: index out of range");
  bp_status_t st = bpc_ref_single_output(res, g->dtype, 2, os, 1, g->dtype);
  if (st != BP_OK) return st;
  bpc_expected_t* e = &res->out[0];
  for (int64_t r = 0; r < V; r++) {
    if (r == a->padding_idx) continue;
    int64_t cnt = 0;
    for (int64_t i = 0; i < ind->numel; i++) cnt += load_i(ind, i) == r;
    double scale = a->scale_grad_by_freq && cnt ? 1.0 / (double)cnt : 1.0;
    for (int64_t j = 0; j < D; j++) {
      e->nterms[r * D + j] = 2.0;
      for (int64_t i = 0; i < ind->numel; i++) {
        if (load_i(ind, i) != r) continue;
        double x = bpc_load(g->dtype, g->data, i * D + j).f * scale;
        e->f[r * D + j] += x;
        e->mag[r * D + j] += fabs(x);
        e->nterms[r * D + j] += 1.0;
      }
    }
  }
  return BP_OK;
}

/* ---- registry ------------------------------------------------------------------------ */

static bp_status_t ref_index_family(const bpc_case_t* c, const bpc_host_tensor_t* in, bpc_ref_result_t* res) {
  switch (c->op_id) {
    case BP_OP_embedding: return ref_embedding(c, in, res);
    case BP_OP_gather: return ref_gather(c, in, res);
    case BP_OP_index: return ref_index(c, in, res);
    case BP_OP_index_select: return ref_index_select(c, in, res);
    case BP_OP_masked_scatter: return ref_masked_scatter(c, in, res);
    case BP_OP_nonzero: return ref_nonzero(c, in, res);
    case BP_OP_index_put: return ref_index_put(c, in, res);
    case BP_OP_embedding_bag: return ref_embedding_bag(c, in, res);
    case BP_OP_embedding_dense_backward: return ref_embedding_dense_backward(c, in, res);
    default: return bpc_ref_reject(res, "not an index op");
  }
}

static const bpc_ref_group_t k_groups[] = {
    {ref_index_family, BPC_ACC_EXACT, BPC_OPF_SIGNED_ZERO,
     BPC_OPS(BP_OP_embedding, BP_OP_gather, BP_OP_index, BP_OP_index_select, BP_OP_masked_scatter,
             BP_OP_nonzero),
     bpc_gen_index, NULL},
    /* Accumulating index_put adds in the output dtype (rounding per add). */
    {ref_index_family, BPC_ACC_REDUCE, 0, BPC_OPS(BP_OP_index_put), bpc_gen_index, NULL},
    {ref_index_family, BPC_ACC_REDUCE, 0,
     BPC_OPS(BP_OP_embedding_bag, BP_OP_embedding_dense_backward), bpc_gen_index, NULL},
};

const bpc_ref_family_t bpc_ref_family_index = BPC_FAMILY(index, k_groups);
