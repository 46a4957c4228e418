/* backplane CPU plugin: the reduce_ext kernel family -- max.dim, min.dim,
 * var, cumsum, sort, topk and logsumexp.
 *
 * Values are processed in one of two domains: double for floating dtypes
 * (every f16/bf16/f32/f64 value is exact in it) and int64 for integers and
 * bool. Single-dim ops (max.dim, min.dim, cumsum, sort, topk) walk rows
 * along the dim; var and logsumexp walk the reduced dims of each output in
 * two passes (mean or max first). Work is split over rows / outputs on the
 * pool. Sorting is a stable merge sort (docs/semantics.md, "Sorting"): NaN
 * sorts above +inf, -0 and +0 compare equal and keep their order.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cpu_kernels.h"

#define RX_GRAIN 16384 /* input elements per parallel chunk, at least */

/* ---- sorting ----------------------------------------------------------------- */
typedef struct kv_f64 {
  double k;
  int64_t i;
} kv_f64_t;
typedef struct kv_i64 {
  int64_t k;
  int64_t i;
} kv_i64_t;

/* "a sorts before b" for each domain and direction. NaN is the largest. */
#define RX_LT_F64(a, b) (!isnan(a) && (isnan(b) || (a) < (b)))
#define RX_LT_I64(a, b) ((a) < (b))
#define RX_ASC_F64(a, b) RX_LT_F64(a, b)
#define RX_DESC_F64(a, b) RX_LT_F64(b, a)
#define RX_ASC_I64(a, b) RX_LT_I64(a, b)
#define RX_DESC_I64(a, b) RX_LT_I64(b, a)

/* Stable merge sort of n pairs (insertion-sorted runs of 16, then
 * bottom-up merges through tmp). */
#define RX_DEFINE_SORT(NAME, KV, BEFORE)                                        \
  static void NAME(KV* restrict v, KV* restrict tmp, int64_t n) {               \
    const int64_t run = 16;                                                     \
    for (int64_t s = 0; s < n; s += run) {                                      \
      int64_t e = s + run < n ? s + run : n;                                    \
      for (int64_t i = s + 1; i < e; i++) {                                     \
        KV x = v[i];                                                            \
        int64_t j = i;                                                          \
        while (j > s && BEFORE(x.k, v[j - 1].k)) {                              \
          v[j] = v[j - 1];                                                      \
          j--;                                                                  \
        }                                                                       \
        v[j] = x;                                                               \
      }                                                                         \
    }                                                                           \
    KV* src = v;                                                                \
    KV* dst = tmp;                                                              \
    for (int64_t w = run; w < n; w *= 2) {                                      \
      for (int64_t s = 0; s < n; s += 2 * w) {                                  \
        int64_t m = s + w < n ? s + w : n, e = s + 2 * w < n ? s + 2 * w : n;   \
        int64_t i = s, j = m, o = s;                                            \
        while (i < m && j < e) dst[o++] = BEFORE(src[j].k, src[i].k) ? src[j++] : src[i++]; \
        while (i < m) dst[o++] = src[i++];                                      \
        while (j < e) dst[o++] = src[j++];                                      \
      }                                                                         \
      KV* t = src;                                                              \
      src = dst;                                                                \
      dst = t;                                                                  \
    }                                                                           \
    if (src != v) memcpy(v, src, (size_t)n * sizeof *v);                        \
  }
RX_DEFINE_SORT(sort_asc_f64, kv_f64_t, RX_ASC_F64)
RX_DEFINE_SORT(sort_desc_f64, kv_f64_t, RX_DESC_F64)
RX_DEFINE_SORT(sort_asc_i64, kv_i64_t, RX_ASC_I64)
RX_DEFINE_SORT(sort_desc_i64, kv_i64_t, RX_DESC_I64)

/* ---- rows along one dim --------------------------------------------------- */
/* Operands of the row layout: 0 = input, 1 = output 0, 2 = output 1. */
typedef struct row_job {
  uint32_t op;
  int flt;           /* domain: double (1) or int64 (0) */
  bp_nd_layout_t L;  /* every row's start */
  int64_t rows, len; /* rows, input elements per row */
  int64_t olen;      /* output elements per row (topk: k; max.dim: 1) */
  int64_t st[3];     /* strides along the dim */
  unsigned char* base[3];
  uint32_t dtype[3], es[3];
  int desc;
  _Atomic int failed;
} row_job_t;

static int dom_kt(int flt) { return flt ? CPU_KT_F64 : CPU_KT_I64; }

/* max.dim / min.dim of one row held in the domain buffer. */
typedef union rx_val {
  double f;
  int64_t i;
} rx_val_t;

static void row_extreme(const row_job_t* j, const void* buf, rx_val_t* val, int64_t* idx) {
  int is_max = j->op == BP_OP_max_dim;
  int64_t best = 0;
  if (j->flt) {
    const double* v = buf;
    double b = v[0];
    for (int64_t i = 1; i < j->len && !isnan(b); i++) {
      if (isnan(v[i]) || (is_max ? v[i] > b : v[i] < b)) {
        b = v[i];
        best = i;
      }
    }
    val->f = b;
  } else {
    const int64_t* v = buf;
    int64_t b = v[0];
    for (int64_t i = 1; i < j->len; i++) {
      if (is_max ? v[i] > b : v[i] < b) {
        b = v[i];
        best = i;
      }
    }
    val->i = b;
  }
  *idx = best;
}

/* cumsum of one row: buf holds the inputs in the input's domain; the values
 * are converted to the output dtype first (PyTorch's self.to(dtype)). */
static void row_cumsum(const row_job_t* j, void* buf, void* conv) {
  int in_kt = dom_kt(bp_dtype_is_float(j->dtype[0]));
  int out_kt = dom_kt(j->flt);
  if (j->dtype[0] != j->dtype[1]) {
    cpu_store[in_kt](conv, 1, buf, j->len, j->dtype[1]);
    cpu_load[out_kt](buf, conv, 1, j->len, j->dtype[1]);
  }
  if (j->flt) {
    double* v = buf;
    double s = 0;
    for (int64_t i = 0; i < j->len; i++) v[i] = s += v[i];
  } else {
    int64_t* v = buf;
    uint64_t s = 0; /* wraps like the output's integer arithmetic */
    for (int64_t i = 0; i < j->len; i++) v[i] = (int64_t)(s += (uint64_t)v[i]);
  }
}

/* sort / topk of one row: pairs sorted stably; the first olen go out. */
static void row_sort(const row_job_t* j, void* buf, void* pairs, void* tmp, int64_t* idx) {
  if (j->flt) {
    kv_f64_t* p = pairs;
    double* v = buf;
    for (int64_t i = 0; i < j->len; i++) p[i] = (kv_f64_t){v[i], i};
    if (j->desc) sort_desc_f64(p, tmp, j->len);
    else sort_asc_f64(p, tmp, j->len);
    for (int64_t i = 0; i < j->olen; i++) {
      v[i] = p[i].k;
      idx[i] = p[i].i;
    }
  } else {
    kv_i64_t* p = pairs;
    int64_t* v = buf;
    for (int64_t i = 0; i < j->len; i++) p[i] = (kv_i64_t){v[i], i};
    if (j->desc) sort_desc_i64(p, tmp, j->len);
    else sort_asc_i64(p, tmp, j->len);
    for (int64_t i = 0; i < j->olen; i++) {
      v[i] = p[i].k;
      idx[i] = p[i].i;
    }
  }
}

static void rows_run(void* ctx, int64_t b, int64_t e) {
  row_job_t* j = ctx;
  size_t n = (size_t)(j->len > 0 ? j->len : 1);
  int sorting = j->op == BP_OP_sort || j->op == BP_OP_topk;
  void* buf = malloc(n * 8);
  int64_t* idx = malloc(n * sizeof *idx);
  void* pairs = sorting ? malloc(n * 16) : NULL;
  void* tmp = sorting || j->op == BP_OP_cumsum ? malloc(n * 16) : NULL;
  if (!buf || !idx || (sorting && !pairs) || ((sorting || j->op == BP_OP_cumsum) && !tmp)) {
    atomic_store(&j->failed, 1);
    goto cleanup;
  }
  int kt = dom_kt(j->flt);
  int in_kt = j->op == BP_OP_cumsum ? dom_kt(bp_dtype_is_float(j->dtype[0])) : kt;
  bp_nd_cursor_t c;
  bp_nd_cursor_init(&c, &j->L, b);
  for (int64_t r = b; r < e; r++) {
    const unsigned char* src = j->base[0] + c.off[0] * (int64_t)j->es[0];
    unsigned char* d0 = j->base[1] + c.off[1] * (int64_t)j->es[1];
    unsigned char* d1 = j->base[2] ? j->base[2] + c.off[2] * (int64_t)j->es[2] : NULL;
    cpu_load[in_kt](buf, src, j->st[0], j->len, j->dtype[0]);
    switch (j->op) {
      case BP_OP_max_dim:
      case BP_OP_min_dim: {
        rx_val_t val;
        int64_t at;
        row_extreme(j, buf, &val, &at);
        cpu_store[kt](d0, 1, &val, 1, j->dtype[1]);
        cpu_store[CPU_KT_I64](d1, 1, &at, 1, BP_DTYPE_I64);
        break;
      }
      case BP_OP_cumsum:
        row_cumsum(j, buf, tmp);
        cpu_store[kt](d0, j->st[1], buf, j->len, j->dtype[1]);
        break;
      default:
        row_sort(j, buf, pairs, tmp, idx);
        cpu_store[kt](d0, j->st[1], buf, j->olen, j->dtype[1]);
        cpu_store[CPU_KT_I64](d1, j->st[2], idx, j->olen, BP_DTYPE_I64);
        break;
    }
    bp_nd_cursor_advance(&c, &j->L, 1);
  }
cleanup:
  free(buf);
  free(idx);
  free(pairs);
  free(tmp);
}

/* Builds the row layout of a single-dim op and runs it. */
static bp_status_t exec_rows(const bp_op_call_t* call, int64_t dim_attr, int64_t olen_attr) {
  uint32_t op = call->op_id;
  const char* name = cpu_op_name(op);
  const bp_tensor_desc_t* in = call->inputs[0];
  const bp_tensor_desc_t* o0 = call->outputs[0];
  const bp_tensor_desc_t* o1 = call->num_outputs > 1 ? call->outputs[1] : NULL;
  int reduce = op == BP_OP_max_dim || op == BP_OP_min_dim;
  int keep = reduce && (((const bp_reduce_attrs_t*)call->attrs)->flags & BP_REDUCE_KEEPDIM);
  int64_t rank = in->rank ? in->rank : 1;
  if (dim_attr < -rank || dim_attr >= rank)
    return cpu_error(BP_INVALID_ARGUMENT, "cpu: %s: dim %lld out of range for rank %u", name,
                     (long long)dim_attr, in->rank);
  uint32_t dim = (uint32_t)(dim_attr < 0 ? dim_attr + rank : dim_attr);
  int64_t len = in->rank ? in->sizes[dim] : 1;
  int64_t olen = reduce ? 1 : op == BP_OP_topk ? olen_attr : len;
  if (olen < 0 || olen > len)
    return cpu_error(BP_INVALID_ARGUMENT, "cpu: %s: k = %lld out of range for a dim of %lld", name,
                     (long long)olen, (long long)len);
  uint32_t orank = reduce && !keep && in->rank ? in->rank - 1 : in->rank;
  for (uint32_t k = 0; k < call->num_outputs; k++) {
    const bp_tensor_desc_t* o = call->outputs[k];
    int bad = o->rank != orank;
    for (uint32_t d = 0, od = 0; d < in->rank && !bad; d++) {
      if (d == dim && reduce && !keep) continue;
      bad = o->sizes[od++] != (d == dim ? olen : in->sizes[d]);
    }
    if (bad)
      return cpu_error(BP_INVALID_ARGUMENT, "cpu: %s: output %u has the wrong shape for the input",
                       name, k);
  }
  if (o1 && o1->dtype != BP_DTYPE_I64)
    return cpu_error(BP_INVALID_ARGUMENT, "cpu: %s: indices must be i64, got %s", name,
                     bp_dtype_name(o1->dtype));
  row_job_t* j = calloc(1, sizeof *j);
  if (!j) return cpu_error(BP_RESOURCE_EXHAUSTED, "cpu: %s: out of memory", name);
  bp_status_t st = BP_OK;
  j->op = op;
  j->flt = bp_dtype_is_float(op == BP_OP_cumsum ? o0->dtype : in->dtype);
  j->len = len;
  j->olen = olen;
  j->desc = op == BP_OP_sort ? ((const bp_sort_attrs_t*)call->attrs)->descending != 0
          : op == BP_OP_topk ? ((const bp_topk_attrs_t*)call->attrs)->largest != 0 : 0;
  const bp_tensor_desc_t* ops[3] = {in, o0, o1};
  for (int k = 0; k < 3; k++) {
    if (!ops[k]) continue;
    j->base[k] = cpu_desc_ptr(ops[k]);
    j->dtype[k] = ops[k]->dtype;
    j->es[k] = (uint32_t)bp_dtype_size(ops[k]->dtype);
  }
  j->L.nops = 3;
  j->rows = 1;
  for (uint32_t d = 0, od = 0; d < in->rank; d++) {
    int64_t so[2] = {0, 0};
    if (!(d == dim && reduce && !keep)) {
      so[0] = o0->strides[od];
      so[1] = o1 ? o1->strides[od] : 0;
      od++;
    }
    if (d == dim) {
      j->st[0] = in->strides[d];
      j->st[1] = so[0];
      j->st[2] = so[1];
      continue;
    }
    j->L.sizes[j->L.ndim] = in->sizes[d];
    j->L.strides[0][j->L.ndim] = in->strides[d];
    j->L.strides[1][j->L.ndim] = so[0];
    j->L.strides[2][j->L.ndim] = so[1];
    j->L.ndim++;
    j->rows *= in->sizes[d];
  }
  if (j->rows == 0 || (len == 0 && !reduce)) goto cleanup; /* nothing to write */
  if (len == 0) {
    st = cpu_error(BP_INVALID_ARGUMENT, "cpu: %s: cannot reduce an empty dim", name);
    goto cleanup;
  }
  if (j->L.ndim == 0) j->L.sizes[j->L.ndim++] = 1; /* 0-d or 1-d: one row */
  bp_nd_collapse(&j->L);
  int64_t grain = RX_GRAIN / len;
  cpu_parallel_for(j->rows, grain < 1 ? 1 : grain, rows_run, j);
  if (atomic_load(&j->failed))
    st = cpu_error(BP_RESOURCE_EXHAUSTED, "cpu: %s: cannot allocate row buffers of %lld elements",
                   name, (long long)len);
cleanup:
  free(j);
  return st;
}

/* ---- var and logsumexp -------------------------------------------------------- */
typedef struct red_job {
  uint32_t op;
  bp_nd_layout_t K; /* kept dims: 0 = output, 1 = input */
  bp_nd_layout_t R; /* reduced dims: 0 = input */
  int64_t nk, nr;
  const unsigned char* in;
  uint32_t in_dtype, in_es;
  unsigned char* out;
  uint32_t out_dtype, out_es;
  double correction;
} red_job_t;

/* Pass kinds over one output's reduced elements. */
enum { PASS_SUM, PASS_MAX, PASS_SQDEV, PASS_SUMEXP };

typedef struct pass_acc {
  double a; /* sum / max / sum of squares / sum of exp */
  int nan;
} pass_acc_t;

static void pass_block(int pass, pass_acc_t* acc, const double* restrict v, int64_t n, double c) {
  switch (pass) {
    case PASS_SUM: {
      double s0 = 0, s1 = 0;
      int64_t i = 0;
      for (; i + 2 <= n; i += 2) s0 += v[i], s1 += v[i + 1];
      if (i < n) s0 += v[i];
      acc->a += s0 + s1;
      break;
    }
    case PASS_MAX:
      for (int64_t i = 0; i < n; i++) {
        if (isnan(v[i])) acc->nan = 1;
        else if (v[i] > acc->a) acc->a = v[i];
      }
      break;
    case PASS_SQDEV:
      for (int64_t i = 0; i < n; i++) acc->a += (v[i] - c) * (v[i] - c);
      break;
    default:
      for (int64_t i = 0; i < n; i++) acc->a += exp(v[i] - c);
      break;
  }
}

static pass_acc_t red_pass(const red_job_t* j, int64_t koff, int pass, double c) {
  pass_acc_t acc = {pass == PASS_MAX ? -INFINITY : 0.0, 0};
  if (j->nr == 0) return acc;
  bp_nd_cursor_t cur;
  bp_nd_cursor_init(&cur, &j->R, 0);
  union {
    double f[CPU_BLOCK];
    int64_t i[CPU_BLOCK];
  } buf;
  const int last = j->R.ndim - 1;
  for (int64_t pos = 0; pos < j->nr;) {
    int64_t n = bp_nd_row_left(&cur, &j->R);
    int64_t s = j->R.strides[0][last];
    const unsigned char* row = j->in + (koff + cur.off[0]) * (int64_t)j->in_es;
    for (int64_t o = 0; o < n; o += CPU_BLOCK) {
      int64_t cnt = n - o < CPU_BLOCK ? n - o : CPU_BLOCK;
      int kt = bp_dtype_is_float(j->in_dtype) ? CPU_KT_F64 : CPU_KT_I64;
      cpu_load[kt](&buf, row + o * s * (int64_t)j->in_es, s, cnt, j->in_dtype);
      if (kt == CPU_KT_I64) { /* logsumexp of integers: as doubles */
        for (int64_t i = 0; i < cnt; i++) {
          int64_t x = buf.i[i];
          buf.f[i] = (double)x;
        }
      }
      pass_block(pass, &acc, buf.f, cnt, c);
    }
    bp_nd_cursor_advance(&cur, &j->R, n);
    pos += n;
  }
  return acc;
}

static void red_outputs(void* ctx, int64_t b, int64_t e) {
  const red_job_t* j = ctx;
  bp_nd_cursor_t c;
  bp_nd_cursor_init(&c, &j->K, b);
  for (int64_t k = b; k < e; k++) {
    double r;
    if (j->op == BP_OP_var) {
      /* Two passes: the mean, then the squared deviations (exact enough in
       * double that no compensation is needed). */
      double mean = red_pass(j, c.off[1], PASS_SUM, 0).a / (double)j->nr;
      double m2 = j->nr ? red_pass(j, c.off[1], PASS_SQDEV, mean).a : 0.0;
      double div = (double)j->nr - j->correction;
      r = m2 / (div > 0 ? div : 0.0);
    } else {
      pass_acc_t mx = red_pass(j, c.off[1], PASS_MAX, 0);
      double shift = isinf(mx.a) ? 0.0 : mx.a;
      r = mx.nan ? NAN : log(red_pass(j, c.off[1], PASS_SUMEXP, shift).a) + shift;
    }
    cpu_store[CPU_KT_F64](j->out + c.off[0] * (int64_t)j->out_es, 1, &r, 1, j->out_dtype);
    bp_nd_cursor_advance(&c, &j->K, 1);
  }
}

static bp_status_t exec_var_lse(const bp_op_call_t* call) {
  uint32_t op = call->op_id;
  const char* name = cpu_op_name(op);
  const bp_tensor_desc_t* in = call->inputs[0];
  const bp_tensor_desc_t* out = call->outputs[0];
  const bp_reduce_attrs_t* a = call->attrs;
  uint32_t mask = 0;
  if ((a->flags & BP_REDUCE_ALL_DIMS) || a->num_dims == 0) {
    mask = in->rank ? (uint32_t)((1ull << in->rank) - 1) : 0;
  } else {
    if (a->num_dims < 0 || a->num_dims > BP_MAX_RANK)
      return cpu_error(BP_INVALID_ARGUMENT, "cpu: %s: num_dims %d", name, a->num_dims);
    for (int k = 0; k < a->num_dims; k++) {
      int64_t d = a->dims[k] < 0 ? a->dims[k] + (int64_t)in->rank : a->dims[k];
      if (in->rank == 0 && (a->dims[k] == 0 || a->dims[k] == -1)) continue;
      if (d < 0 || d >= (int64_t)in->rank || (mask & (1u << d)))
        return cpu_error(BP_INVALID_ARGUMENT, "cpu: %s: dim %d invalid or repeated for rank %u",
                         name, a->dims[k], in->rank);
      mask |= 1u << d;
    }
  }
  int keep = (a->flags & BP_REDUCE_KEEPDIM) != 0;
  uint32_t want = keep ? in->rank : in->rank - (uint32_t)__builtin_popcount(mask);
  if (out->rank != want)
    return cpu_error(BP_INVALID_ARGUMENT, "cpu: %s: output rank %u, expected %u", name, out->rank, want);
  red_job_t j;
  memset(&j, 0, sizeof j);
  j.op = op;
  j.in = cpu_desc_ptr(in);
  j.in_dtype = in->dtype;
  j.in_es = (uint32_t)bp_dtype_size(in->dtype);
  j.out = cpu_desc_ptr(out);
  j.out_dtype = out->dtype;
  j.out_es = (uint32_t)bp_dtype_size(out->dtype);
  j.correction = a->correction;
  j.K.nops = 2;
  j.R.nops = 1;
  j.nk = j.nr = 1;
  for (uint32_t d = 0, od = 0; d < in->rank; d++) {
    if (mask & (1u << d)) {
      j.R.sizes[j.R.ndim] = in->sizes[d];
      j.R.strides[0][j.R.ndim++] = in->strides[d];
      j.nr *= in->sizes[d];
      if (keep) {
        if (out->sizes[od] != 1)
          return cpu_error(BP_INVALID_ARGUMENT, "cpu: %s: kept dim %u has size %lld, not 1", name,
                           od, (long long)out->sizes[od]);
        od++;
      }
      continue;
    }
    if (out->sizes[od] != in->sizes[d])
      return cpu_error(BP_INVALID_ARGUMENT, "cpu: %s: output size %lld in dim %u, input %lld", name,
                       (long long)out->sizes[od], od, (long long)in->sizes[d]);
    j.K.sizes[j.K.ndim] = in->sizes[d];
    j.K.strides[0][j.K.ndim] = out->strides[od];
    j.K.strides[1][j.K.ndim++] = in->strides[d];
    j.nk *= in->sizes[d];
    od++;
  }
  if (j.nk == 0) return BP_OK;
  if (j.K.ndim == 0) j.K.sizes[j.K.ndim++] = 1;
  if (j.R.ndim == 0) j.R.sizes[j.R.ndim++] = 1;
  bp_nd_collapse(&j.K);
  bp_nd_collapse(&j.R);
  if (j.nr == 0) j.R.sizes[0] = 0;
  int64_t grain = j.nr > 0 ? RX_GRAIN / j.nr : RX_GRAIN;
  cpu_parallel_for(j.nk, grain < 1 ? 1 : grain, red_outputs, &j);
  return BP_OK;
}

/* ---- family entry points ---------------------------------------------------- */
static bp_status_t exec_reduce_ext(const bp_op_call_t* call) {
  uint32_t op = call->op_id;
  const bp_tensor_desc_t* in = call->inputs[0];
  for (uint32_t k = 0; k < call->num_outputs; k++)
    if (bp_dtype_is_fp8(call->outputs[k]->dtype))
      return cpu_error(BP_UNIMPLEMENTED, "cpu: %s: fp8 output", cpu_op_name(op));
  if (bp_dtype_is_fp8(in->dtype))
    return cpu_error(BP_UNIMPLEMENTED, "cpu: %s: fp8 input", cpu_op_name(op));
  switch (op) {
    case BP_OP_max_dim:
    case BP_OP_min_dim: {
      const bp_reduce_attrs_t* a = call->attrs;
      if ((a->flags & BP_REDUCE_ALL_DIMS) || a->num_dims != 1)
        return cpu_error(BP_INVALID_ARGUMENT, "cpu: %s: needs exactly one dim", cpu_op_name(op));
      if (in->dtype != call->outputs[0]->dtype)
        return cpu_error(BP_INVALID_ARGUMENT, "cpu: %s: values dtype %s differs from the input's %s",
                         cpu_op_name(op), bp_dtype_name(call->outputs[0]->dtype), bp_dtype_name(in->dtype));
      return exec_rows(call, a->dims[0], 0);
    }
    case BP_OP_cumsum: return exec_rows(call, ((const bp_dim_attrs_t*)call->attrs)->dim, 0);
    case BP_OP_sort:
    case BP_OP_topk: {
      if (in->dtype != call->outputs[0]->dtype)
        return cpu_error(BP_INVALID_ARGUMENT, "cpu: %s: values dtype %s differs from the input's %s",
                         cpu_op_name(op), bp_dtype_name(call->outputs[0]->dtype), bp_dtype_name(in->dtype));
      if (op == BP_OP_sort) return exec_rows(call, ((const bp_sort_attrs_t*)call->attrs)->dim, 0);
      const bp_topk_attrs_t* a = call->attrs;
      return exec_rows(call, a->dim, a->k);
    }
    case BP_OP_var:
    case BP_OP_logsumexp:
      if (!bp_dtype_is_float(call->outputs[0]->dtype))
        return cpu_error(BP_INVALID_ARGUMENT, "cpu: %s: output %s is not floating", cpu_op_name(op),
                         bp_dtype_name(call->outputs[0]->dtype));
      if (op == BP_OP_var && !bp_dtype_is_float(in->dtype))
        return cpu_error(BP_INVALID_ARGUMENT, "cpu: var: input %s is not floating", bp_dtype_name(in->dtype));
      return exec_var_lse(call);
    default:
      return cpu_error(BP_UNIMPLEMENTED, "cpu: op %s has no CPU kernel", cpu_op_name(op));
  }
}

static int supported_reduce_ext(const bp_op_call_t* call, char* msg, size_t cap) {
  for (uint32_t k = 0; k < call->num_inputs + call->num_outputs; k++) {
    const bp_tensor_desc_t* d = k < call->num_inputs ? call->inputs[k] : call->outputs[k - call->num_inputs];
    if (bp_dtype_is_fp8(d->dtype)) {
      snprintf(msg, cap, "fp8 is a storage type");
      return BP_SUPPORT_DTYPE;
    }
  }
  uint32_t op = call->op_id;
  if ((op == BP_OP_var || op == BP_OP_logsumexp) && !bp_dtype_is_float(call->outputs[0]->dtype)) {
    snprintf(msg, cap, "output %s is not floating", bp_dtype_name(call->outputs[0]->dtype));
    return BP_SUPPORT_DTYPE;
  }
  return BP_SUPPORT_OK;
}

/* Every dtype but fp8 (storage only) and c64 (not ordered). */
const cpu_family_t cpu_family_reduce_ext = {
    "reduce_ext",
    CPU_FAMILY_OPS(BP_OP_max_dim, BP_OP_min_dim, BP_OP_var, BP_OP_cumsum, BP_OP_sort, BP_OP_topk,
                   BP_OP_logsumexp),
    exec_reduce_ext, supported_reduce_ext, 0};
