/* backplane core: shared pieces of shape/dtype inference, the dispatch to
 * the rule of each op (through the op table built from ops.def), and the
 * rules not implemented yet.
 */
#include <stdio.h>
#include <string.h>

#include "ops/ops_internal.h"

bp_status_t bp__infer_fail(const bp__infer_t* x, const char* fmt, ...) {
  char msg[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof(msg), fmt, ap);
  va_end(ap);
  return bp__error(BP_INVALID_ARGUMENT, "op '%s': %s", x->op->name, msg);
}

static int bp__op_allows_storage_only(uint32_t op_id) {
  /* docs/semantics.md: fp8, fp6, fp4, e8m0 and sub-byte ints are storage types. */
  /* The quantization family's rules check their dtypes themselves. */
  return op_id == BP_OP_to_copy || op_id == BP_OP_copy || op_id == BP_OP_clone ||
         op_id == BP_OP_cat || op_id == BP_OP_fill || bp_op_family(op_id) == BP_OP_FAMILY_QUANT;
}

bp_status_t bp__infer_reject_storage_only(const bp__infer_t* x) {
  if (bp__op_allows_storage_only(x->op->id)) return BP_OK;
  char nbuf[64];
  for (uint32_t i = 0; i < x->num_inputs; ++i) {
    if (bp__dtype_is_storage_only(x->in[i].dtype)) {
      return bp__infer_fail(x,
                            "input '%s' has dtype %s; fp8 and sub-byte dtypes are storage only "
                            "(cast with to_copy before arithmetic)",
                            bp__op_input_name(x->op, x->num_inputs, i, nbuf),
                            bp_dtype_name(x->in[i].dtype));
    }
  }
  return BP_OK;
}

bp_status_t bp__infer_like_input(const bp__infer_t* x, uint32_t j, uint32_t i) {
  const bp_tensor_desc_t *a = &x->in[j], *b = &x->in[i];
  char n0[64], n1[64], s0[192], s1[192];
  if (a->dtype != b->dtype) {
    return bp__infer_fail(x, "input '%s' has dtype %s; expected %s (the dtype of '%s')",
                          bp__op_input_name(x->op, x->num_inputs, j, n0), bp_dtype_name(a->dtype),
                          bp_dtype_name(b->dtype), bp__op_input_name(x->op, x->num_inputs, i, n1));
  }
  if (!bp__shape_equal(a->rank, a->sizes, b->rank, b->sizes)) {
    return bp__infer_fail(x, "input '%s' has shape %s; expected %s (the shape of '%s', no broadcasting)",
                          bp__op_input_name(x->op, x->num_inputs, j, n0),
                          bp__shape_str(a->rank, a->sizes, s0, sizeof(s0)),
                          bp__shape_str(b->rank, b->sizes, s1, sizeof(s1)),
                          bp__op_input_name(x->op, x->num_inputs, i, n1));
  }
  return BP_OK;
}

bp_status_t bp__infer_broadcast(const bp__infer_t* x, uint32_t mask, uint32_t* out_rank,
                                int64_t* out_sizes) {
  uint32_t rank = 0;
  int64_t sizes[BP_MAX_RANK];
  uint32_t first = UINT32_MAX; /* input that set the shape so far, for messages */
  for (uint32_t i = 0; i < x->num_inputs && i < 32; ++i) {
    if (!(mask & (1u << i)) || !bp__in_present(x, i)) continue;
    const bp_tensor_desc_t* t = &x->in[i];
    if (first == UINT32_MAX) {
      rank = t->rank;
      memcpy(sizes, t->sizes, sizeof(int64_t) * rank);
      first = i;
      continue;
    }
    uint32_t r = rank > t->rank ? rank : t->rank;
    int64_t merged[BP_MAX_RANK];
    for (uint32_t k = 0; k < r; ++k) {
      /* Right-aligned: dim k of the result is dim k-(r-rank) of the shape so far. */
      int64_t a = k + rank >= r ? sizes[k + rank - r] : 1;
      int64_t b = k + t->rank >= r ? t->sizes[k + t->rank - r] : 1;
      if (a == b || b == 1) {
        merged[k] = a;
      } else if (a == 1) {
        merged[k] = b;
      } else {
        char n1[64], n2[64], s1[192], s2[192];
        return bp__infer_fail(
            x, "shapes %s (%s) and %s (%s) are not broadcastable (dim %u: %lld vs %lld)",
            bp__shape_str(rank, sizes, s1, sizeof(s1)),
            bp__op_input_name(x->op, x->num_inputs, first, n1),
            bp__shape_str(t->rank, t->sizes, s2, sizeof(s2)),
            bp__op_input_name(x->op, x->num_inputs, i, n2), k, (long long)a, (long long)b);
      }
    }
    rank = r;
    memcpy(sizes, merged, sizeof(int64_t) * r);
  }
  *out_rank = rank;
  memcpy(out_sizes, sizes, sizeof(int64_t) * rank);
  return BP_OK;
}

bp_status_t bp__infer_wrap_dim(const bp__infer_t* x, int64_t dim, uint32_t rank, const char* what,
                               uint32_t* out_dim) {
  int64_t r = rank == 0 ? 1 : (int64_t)rank;
  if (dim < -r || dim >= r) {
    return bp__infer_fail(x, "%s %lld is out of range for rank %u (expected %lld..%lld)", what,
                          (long long)dim, rank, (long long)-r, (long long)(r - 1));
  }
  *out_dim = (uint32_t)(dim < 0 ? dim + r : dim);
  return BP_OK;
}

bp_status_t bp__infer_set_out(bp__infer_t* x, uint32_t k, uint32_t dtype, uint32_t rank,
                              const int64_t* sizes) {
  return bp__desc_dense(&x->out[k], dtype, rank, sizes, x->op->name,
                        bp__op_output_name(x->op, k));
}

bp_status_t bp__op_infer_descs(bp__infer_t* x) {
  x->compute_dtype = BP_DTYPE_INVALID;
  bp_status_t st = bp__infer_reject_storage_only(x);
  if (st != BP_OK) return st;
  return x->op->infer(x);
}
