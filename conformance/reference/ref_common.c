/* Reference helpers: broadcasting, type promotion, the elementwise loop. */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "ref.h"

void bpc_check_fail(bpc_check_t* out, int64_t index, const char* fmt, ...) {
  out->mismatches++;
  if (out->worst_index >= 0) return;
  out->worst_index = index;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(out->message, sizeof out->message, fmt, ap);
  va_end(ap);
}

bp_status_t bpc_ref_reject(bpc_ref_result_t* res, const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(res->message, sizeof res->message, fmt, ap);
  va_end(ap);
  return BP_INVALID_ARGUMENT;
}

bp_status_t bpc_broadcast(const bpc_host_tensor_t* const* ts, uint32_t n, uint32_t* out_rank,
                          int64_t* out_sizes) {
  uint32_t rank = 0;
  for (uint32_t k = 0; k < n; k++) {
    if (ts[k] && ts[k]->dtype != BP_DTYPE_INVALID && ts[k]->rank > rank) rank = ts[k]->rank;
  }
  for (uint32_t d = 0; d < rank; d++) out_sizes[d] = 1;
  for (uint32_t k = 0; k < n; k++) {
    const bpc_host_tensor_t* t = ts[k];
    if (!t || t->dtype == BP_DTYPE_INVALID) continue;
    for (uint32_t j = 0; j < t->rank; j++) {
      uint32_t d = rank - t->rank + j;
      int64_t s = t->sizes[j];
      if (s == out_sizes[d] || s == 1) continue;
      if (out_sizes[d] != 1) return BP_INVALID_ARGUMENT;
      out_sizes[d] = s;
    }
  }
  *out_rank = rank;
  return BP_OK;
}

int64_t bpc_broadcast_index(const bpc_host_tensor_t* t, uint32_t out_rank, const int64_t* idx) {
  int64_t lin = 0;
  for (uint32_t j = 0; j < t->rank; j++) {
    int64_t i = t->sizes[j] == 1 ? 0 : idx[out_rank - t->rank + j];
    lin = lin * t->sizes[j] + i;
  }
  return lin;
}

int bpc_next_index(uint32_t rank, const int64_t* sizes, int64_t* idx) {
  for (uint32_t d = rank; d-- > 0;) {
    if (++idx[d] < sizes[d]) return 1;
    idx[d] = 0;
  }
  return 0;
}

/* ---- type promotion -------------------------------------------------------- */
static int float_width(uint32_t d) {
  return d == BP_DTYPE_F64 ? 3 : d == BP_DTYPE_F32 ? 2 : 1;
}

static int int_bits(uint32_t d) {
  switch (d) {
    case BP_DTYPE_I8: case BP_DTYPE_U8: return 8;
    case BP_DTYPE_I16: return 16;
    case BP_DTYPE_I32: return 32;
    default: return 64;
  }
}

uint32_t bpc_promote_types(uint32_t a, uint32_t b) {
  if (a == BP_DTYPE_INVALID) return b;
  if (b == BP_DTYPE_INVALID) return a;
  if (a == b) return a;
  int fp8a = a == BP_DTYPE_F8E4M3FN || a == BP_DTYPE_F8E5M2;
  int fp8b = b == BP_DTYPE_F8E4M3FN || b == BP_DTYPE_F8E5M2;
  if (fp8a || fp8b || a == BP_DTYPE_C64 || b == BP_DTYPE_C64) return BP_DTYPE_INVALID;
  if (a == BP_DTYPE_BOOL) return b;
  if (b == BP_DTYPE_BOOL) return a;
  int fa = bpc_dtype_is_float(a), fb = bpc_dtype_is_float(b);
  if (fa && fb) {
    if (float_width(a) == 1 && float_width(b) == 1) return BP_DTYPE_F32; /* f16 + bf16 */
    return float_width(a) >= float_width(b) ? a : b;
  }
  if (fa) return a;
  if (fb) return b;
  /* Two integers: the smallest signed type holding both, unless both are u8. */
  if (a == BP_DTYPE_U8 || b == BP_DTYPE_U8) {
    uint32_t s = a == BP_DTYPE_U8 ? b : a;
    return int_bits(s) > 8 ? s : BP_DTYPE_I16;
  }
  return int_bits(a) >= int_bits(b) ? a : b;
}

void bpc_result_type_init(bpc_result_type_t* rt) {
  rt->dim = rt->zero = rt->wrapped = BP_DTYPE_INVALID;
}

void bpc_result_type_add(bpc_result_type_t* rt, uint32_t dtype, uint32_t group) {
  if (dtype == BP_DTYPE_INVALID) return;
  if (group == BPC_GROUP_WRAPPED) {
    /* A floating wrapped number counts as the default dtype (f32). */
    if (bpc_dtype_is_float(dtype)) dtype = BP_DTYPE_F32;
    rt->wrapped = bpc_promote_types(rt->wrapped, dtype);
  } else if (group == BPC_GROUP_ZERO_DIM) {
    rt->zero = bpc_promote_types(rt->zero, dtype);
  } else {
    rt->dim = bpc_promote_types(rt->dim, dtype);
  }
}

void bpc_result_type_add_tensor(bpc_result_type_t* rt, const bpc_host_tensor_t* t) {
  if (!t || t->dtype == BP_DTYPE_INVALID) return;
  bpc_result_type_add(rt, t->dtype, t->rank == 0 ? BPC_GROUP_ZERO_DIM : BPC_GROUP_DIM);
}

/* PyTorch's combine_categories: a lower-priority group matters only when
 * its category is higher. */
static uint32_t combine(uint32_t higher, uint32_t lower) {
  if (higher != BP_DTYPE_INVALID && bpc_dtype_is_float(higher)) return higher;
  if (higher == BP_DTYPE_BOOL || (lower != BP_DTYPE_INVALID && bpc_dtype_is_float(lower))) {
    return bpc_promote_types(higher, lower);
  }
  return higher != BP_DTYPE_INVALID ? higher : lower;
}

uint32_t bpc_result_type_get(const bpc_result_type_t* rt) {
  return combine(rt->dim, combine(rt->zero, rt->wrapped));
}

bp_status_t bpc_ref_single_output(bpc_ref_result_t* res, uint32_t dtype, uint32_t rank,
                                  const int64_t* sizes, int with_bound, uint32_t compute_dtype) {
  bp_status_t st = bpc_expected_init(&res->out[0], dtype, rank, sizes, with_bound);
  if (st != BP_OK) return st;
  res->num_outputs = 1;
  res->compute_dtype = compute_dtype;
  return BP_OK;
}

/* ---- the elementwise loop ------------------------------------------------ */
bp_status_t bpc_ref_elementwise(const bpc_case_t* c, const bpc_ew_operand_t* ops, uint32_t n,
                                uint32_t compute_dtype, uint32_t result_dtype, uint32_t out_dtype,
                                bpc_ew_fn fn, bpc_ref_result_t* res) {
  const bpc_host_tensor_t* ts[BPC_MAX_INPUTS] = {0};
  for (uint32_t k = 0; k < n; k++) ts[k] = ops[k].t;
  uint32_t rank;
  int64_t sizes[BP_MAX_RANK];
  if (bpc_broadcast(ts, n, &rank, sizes) != BP_OK) {
    return bpc_ref_reject(res, "operand shapes do not broadcast");
  }
  bpc_expected_t* e = &res->out[0];
  bp_status_t st = bpc_ref_single_output(res, out_dtype, rank, sizes, 0, compute_dtype);
  if (st != BP_OK) return st;
  int64_t idx[BP_MAX_RANK] = {0};
  for (int64_t k = 0; k < e->numel; k++) {
    bpc_num_t args[BPC_MAX_INPUTS];
    for (uint32_t j = 0; j < n; j++) {
      if (ops[j].t) {
        if (ops[j].t->dtype == BP_DTYPE_INVALID) {
          memset(&args[j], 0, sizeof args[j]);
          continue;
        }
        bpc_num_t v = bpc_load(ops[j].t->dtype, ops[j].t->data, bpc_broadcast_index(ops[j].t, rank, idx));
        args[j] = bpc_convert(v, ops[j].t->dtype, compute_dtype);
      } else {
        args[j] = bpc_convert(ops[j].scalar, ops[j].scalar_dtype, compute_dtype);
      }
    }
    bpc_num_t r = fn(c, args, compute_dtype);
    if (bpc_dtype_is_float(out_dtype) && bpc_dtype_is_float(result_dtype)) {
      e->f[k] = r.f;
      e->mag[k] = r.mag;
    } else {
      bpc_num_t o = bpc_convert(r, result_dtype, out_dtype);
      if (bpc_dtype_is_float(out_dtype)) e->f[k] = o.f;
      else e->i[k] = o.i;
    }
    bpc_next_index(rank, sizes, idx);
  }
  return BP_OK;
}

bp_status_t bpc_ref_reduce_dims(const bp_reduce_attrs_t* a, uint32_t rank, int all_if_empty,
                                uint8_t* mask, bpc_ref_result_t* res) {
  memset(mask, 0, BP_MAX_RANK);
  int all = (a->flags & BP_REDUCE_ALL_DIMS) || (all_if_empty && a->num_dims == 0);
  if (all) {
    for (uint32_t d = 0; d < rank; d++) mask[d] = 1;
    return BP_OK;
  }
  if (a->num_dims < 0 || a->num_dims > BP_MAX_RANK) return bpc_ref_reject(res, "bad num_dims");
  int64_t r = rank == 0 ? 1 : rank; /* a 0-d tensor accepts dim 0 / -1 */
  for (int32_t k = 0; k < a->num_dims; k++) {
    int64_t d = a->dims[k];
    if (d < -r || d >= r) return bpc_ref_reject(res, "dim %lld out of range", (long long)d);
    if (d < 0) d += r;
    if (rank == 0) continue;
    if (mask[d]) return bpc_ref_reject(res, "dim %lld repeated", (long long)d);
    mask[d] = 1;
  }
  return BP_OK;
}
