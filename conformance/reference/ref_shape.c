/* References of the shape family: pad (constant, reflect, replicate,
 * circular), flip and repeat. Exact: every output element is one input
 * element or the pad value (docs/semantics.md, "Shape ops").
 */
#include <string.h>

#include "ref.h"

void bpc_gen_shape(struct bpc_gen* g); /* pad, flip, repeat */

static int64_t lin_index(uint32_t rank, const int64_t* sizes, const int64_t* idx) {
  int64_t k = 0;
  for (uint32_t d = 0; d < rank; d++) k = k * sizes[d] + idx[d];
  return k;
}

/* Input index of output index j in one padded dim (size s, pads before and
 * after); -1 for the pad value. Written from PyTorch's definitions:
 * constant_pad_nd, reflection_pad, replication_pad, _pad_circular. */
static int64_t pad_index(uint32_t mode, int64_t j, int64_t s, int64_t before, int64_t after) {
  int64_t x = j - before; /* position in the input's coordinates */
  if (mode == BP_PAD_CONSTANT) return (x >= 0 && x < s) ? x : -1;
  if (mode == BP_PAD_REPLICATE) return x < 0 ? 0 : (x >= s ? s - 1 : x);
  if (mode == BP_PAD_REFLECT) {
    while (x < 0 || x >= s) x = x < 0 ? -x : 2 * (s - 1) - x;
    return x;
  }
  /* circular: crop the negative pads, then wrap around what is left */
  int64_t lo = before < 0 ? -before : 0, hi = s - (after < 0 ? -after : 0);
  int64_t kept = hi - lo;
  int64_t t = j - (before > 0 ? before : 0); /* position in the kept range */
  while (t < 0) t += kept;
  while (t >= kept) t -= kept;
  return lo + t;
}

static int valid_pads(const bp_pad_attrs_t* a, const bpc_host_tensor_t* t, bpc_ref_result_t* res,
                      int64_t* sizes) {
  if (a->num_pads % 2 || a->num_pads > 2 * t->rank) return bpc_ref_reject(res, "pad count"), 0;
  uint32_t k = a->num_pads / 2;
  if (a->mode != BP_PAD_CONSTANT) {
    if (k < 1 || k > 3 || (t->rank != k + 1 && t->rank != k + 2))
      return bpc_ref_reject(res, "non-constant modes pad 1-3 dims of a (batched) input"), 0;
    for (uint32_t d = t->rank == k + 2 ? 1 : 0; a->mode != BP_PAD_CIRCULAR && d < t->rank; d++)
      if (t->sizes[d] == 0) return bpc_ref_reject(res, "empty non-batch dim"), 0;
  }
  memcpy(sizes, t->sizes, sizeof(int64_t) * t->rank);
  for (uint32_t p = 0; p < k; p++) {
    uint32_t d = t->rank - 1 - p;
    int64_t s = t->sizes[d], b = a->pads[2 * p], e = a->pads[2 * p + 1];
    sizes[d] = s + b + e;
    if (sizes[d] < 0) return bpc_ref_reject(res, "negative output size"), 0;
    if (a->mode == BP_PAD_REFLECT && (b >= s || e >= s)) return bpc_ref_reject(res, "reflect pad >= size"), 0;
    if ((a->mode == BP_PAD_REFLECT || a->mode == BP_PAD_REPLICATE) && sizes[d] < 1)
      return bpc_ref_reject(res, "empty output"), 0;
    if (a->mode == BP_PAD_CIRCULAR) {
      int64_t kept = s - (b < 0 ? -b : 0) - (e < 0 ? -e : 0);
      if (b > kept || e > kept) return bpc_ref_reject(res, "circular pad wraps more than once"), 0;
    }
  }
  return 1;
}

static bp_status_t ref_shape(const bpc_case_t* c, const bpc_host_tensor_t* in, bpc_ref_result_t* res) {
  const bpc_host_tensor_t* t = &in[0];
  if (bpc_dtype_size(t->dtype) == 0) return bpc_ref_reject(res, "dtype not in the suite");
  uint32_t rank = t->rank;
  int64_t sizes[BP_MAX_RANK];
  memcpy(sizes, t->sizes, sizeof sizes);
  uint32_t flip_mask = 0, lead = 0;
  if (c->op_id == BP_OP_pad) {
    if (!valid_pads(&c->attrs.pad, t, res, sizes)) return BP_INVALID_ARGUMENT;
  } else if (c->op_id == BP_OP_flip) {
    const bp_dims_attrs_t* a = &c->attrs.dims;
    int64_t r = rank ? rank : 1;
    for (uint32_t k = 0; k < a->num_dims; k++) {
      int64_t d = a->dims[k] < 0 ? a->dims[k] + r : a->dims[k];
      if (d < 0 || d >= r || (flip_mask >> d) & 1u) return bpc_ref_reject(res, "flip dims");
      flip_mask |= 1u << d;
    }
  } else {
    const bp_dims_attrs_t* a = &c->attrs.dims;
    if (a->num_dims < rank || a->num_dims > BP_MAX_RANK) return bpc_ref_reject(res, "repeat count");
    lead = a->num_dims - rank;
    for (uint32_t d = 0; d < a->num_dims; d++) {
      if (a->dims[d] < 0) return bpc_ref_reject(res, "negative repeat");
      sizes[d] = (d < lead ? 1 : t->sizes[d - lead]) * a->dims[d];
    }
    rank = a->num_dims;
  }
  bp_status_t st = bpc_ref_single_output(res, t->dtype, rank, sizes, 0, t->dtype);
  if (st != BP_OK) return st;
  bpc_expected_t* e = &res->out[0];
  uint32_t vdt = t->dtype;
  bpc_num_t padv = {0, 0, 0};
  if (c->op_id == BP_OP_pad) padv = bpc_convert(bpc_scalar_value(&c->attrs.pad.value, &vdt), vdt, t->dtype);
  int64_t idx[BP_MAX_RANK] = {0}, src[BP_MAX_RANK];
  for (int64_t k = 0; k < e->numel; k++, bpc_next_index(rank, sizes, idx)) {
    int constant = 0;
    for (uint32_t d = 0; d < rank; d++) {
      if (c->op_id == BP_OP_pad) {
        uint32_t p = rank - 1 - d;
        src[d] = p < c->attrs.pad.num_pads / 2
                     ? pad_index(c->attrs.pad.mode, idx[d], t->sizes[d], c->attrs.pad.pads[2 * p],
                                 c->attrs.pad.pads[2 * p + 1])
                     : idx[d];
        if (src[d] < 0) constant = 1;
      } else if (c->op_id == BP_OP_flip) {
        src[d] = (flip_mask >> d) & 1u ? sizes[d] - 1 - idx[d] : idx[d];
      } else if (d >= lead) {
        src[d - lead] = idx[d] % t->sizes[d - lead];
      }
    }
    bpc_num_t v = constant ? padv : bpc_load(t->dtype, t->data, lin_index(t->rank, t->sizes, src));
    if (e->f) e->f[k] = v.f;
    else e->i[k] = v.i;
  }
  return BP_OK;
}

static const bpc_ref_group_t k_groups[] = {
    {ref_shape, BPC_ACC_EXACT, BPC_OPF_SIGNED_ZERO, BPC_OPS(BP_OP_pad, BP_OP_flip, BP_OP_repeat),
     bpc_gen_shape, NULL},
};

const bpc_ref_family_t bpc_ref_family_shape = BPC_FAMILY(shape, k_groups);
