/* backplane CPU plugin: quantize, dequantize and quantize_dynamic (family
 * QUANT; the matmuls are in cpu_qmm.c). Operands are dense (the family asks
 * the core for contiguous operands). Values are computed in double:
 * x / scale rounds once to the code (the reference's exact quotient), and
 * (q - zp) * scale rounds once to the output dtype. Rows of the last dim
 * run in parallel; a row holds whole bytes of 4-bit codes (even last dim).
 */
#include <math.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "cpu_kernels.h"
#include "cpu_quant.h"

#define QUANT_GRAIN 16384

/* Every element of a small operand (scale, zero point) as double. */
static double* load_all(const bp_tensor_desc_t* d, int64_t* out_n) {
  int64_t n = bp_desc_numel(d);
  double* v = malloc((size_t)(n > 0 ? n : 1) * sizeof(double));
  if (!v) return NULL;
  if (d->dtype == BP_DTYPE_F8E8M0FNU) {
    const uint8_t* p = cpu_desc_ptr(d);
    for (int64_t i = 0; i < n; i++) v[i] = bp_small_float_to_f64(d->dtype, p[i]);
  } else {
    cpu_load[CPU_KT_F64](v, cpu_desc_ptr(d), 1, n, d->dtype);
  }
  *out_n = n;
  return v;
}

/* Where the scale of element (row r, column j) lies (see ops.h). */
typedef struct quant_map {
  int mode;          /* 0 per tensor, 1 per channel, 2 per block */
  int axis_last;     /* the axis is the last dim */
  int64_t last;      /* logical last dim */
  int64_t n_ax;      /* sizes[axis] */
  int64_t inner_r;   /* product of the dims between axis and the last (exclusive) */
  int64_t bs, nb;    /* block size, blocks along axis */
} quant_map_t;

static void quant_map_init(quant_map_t* m, uint32_t rank, const int64_t* sizes,
                           const bp_quantize_attrs_t* a, int64_t scale_numel) {
  memset(m, 0, sizeof *m);
  m->last = rank ? sizes[rank - 1] : 1;
  /* as the core's rule: one element without blocks is per tensor */
  m->mode = a->block_size > 0 ? 2 : scale_numel == 1 ? 0 : 1;
  if (m->mode == 0 || rank == 0) return;
  uint32_t axis = a->axis < 0 ? (uint32_t)(a->axis + (int32_t)rank) : (uint32_t)a->axis;
  m->axis_last = axis == rank - 1;
  m->n_ax = sizes[axis];
  m->inner_r = 1;
  for (uint32_t d = axis + 1; d + 1 < rank; d++) m->inner_r *= sizes[d];
  m->bs = a->block_size > 0 ? a->block_size : 1;
  m->nb = m->n_ax / m->bs + (m->n_ax % m->bs != 0);
}

/* Scale index of column j of row r: base + j * step, or per block of the
 * last axis. Returns base; *step and *blocked describe the column part. */
static int64_t quant_map_row(const quant_map_t* m, int64_t r, int64_t* step, int* blocked_last) {
  *blocked_last = 0;
  *step = 0;
  if (m->mode == 0) return 0;
  if (m->axis_last) {
    if (m->mode == 1) { *step = 1; return 0; }
    *blocked_last = 1;
    return r * m->nb;
  }
  int64_t a = (r / m->inner_r) % m->n_ax;
  if (m->mode == 1) return a;
  int64_t o = r / (m->inner_r * m->n_ax);
  *step = 1;
  return (o * m->nb + a / m->bs) * m->inner_r * m->last + (r % m->inner_r) * m->last;
}

static inline int64_t quant_sidx(const quant_map_t* m, int64_t base, int64_t step, int blocked,
                                 int64_t j) {
  return blocked ? base + j / m->bs : base + j * step;
}

/* ---- quantize / dequantize ---------------------------------------------------------- */

typedef struct quant_job {
  const bp_op_call_t* call;
  const bp_quantize_attrs_t* a;
  quant_map_t map;
  const double* scale;
  const double* zp; /* NULL: 0 */
  int64_t last;
  _Atomic int failed;
} quant_job_t;

static void quantize_rows(void* ctx, int64_t begin, int64_t end) {
  quant_job_t* j = ctx;
  const bp_tensor_desc_t *in = j->call->inputs[0], *out = j->call->outputs[0];
  uint32_t q = j->a->qdtype;
  int four = cpu_q_is_4bit(q), sat = !(j->a->flags & BP_QUANTIZE_NO_SATURATE);
  double* x = malloc((size_t)(j->last > 0 ? j->last : 1) * sizeof(double));
  if (!x) { atomic_store(&j->failed, 1); return; }
  size_t ies = bp_dtype_size(in->dtype);
  int64_t row_bytes = four ? j->last / 2 : j->last;
  for (int64_t r = begin; r < end; r++) {
    cpu_load[CPU_KT_F64](x, cpu_desc_ptr(in) + (size_t)(r * j->last) * ies, 1, j->last, in->dtype);
    uint8_t* y = cpu_desc_ptr(out) + r * row_bytes;
    int64_t step;
    int blocked;
    int64_t base = quant_map_row(&j->map, r, &step, &blocked);
    for (int64_t c = 0; c < j->last; c++) {
      int64_t s = quant_sidx(&j->map, base, step, blocked, c);
      int zp = j->zp ? (int)j->zp[s] : 0;
      uint32_t code = cpu_q_encode(q, x[c] / j->scale[s], zp, sat);
      if (!four) y[c] = (uint8_t)code;
      else if (c & 1) y[c >> 1] = (uint8_t)(y[c >> 1] | (code << 4));
      else y[c >> 1] = (uint8_t)code;
    }
  }
  free(x);
}

static void dequantize_rows(void* ctx, int64_t begin, int64_t end) {
  quant_job_t* j = ctx;
  const bp_tensor_desc_t *in = j->call->inputs[0], *out = j->call->outputs[0];
  uint32_t q = j->a->qdtype;
  int four = cpu_q_is_4bit(q);
  double* v = malloc((size_t)(j->last > 0 ? j->last : 1) * sizeof(double));
  if (!v) { atomic_store(&j->failed, 1); return; }
  size_t oes = bp_dtype_size(out->dtype);
  int64_t row_bytes = four ? j->last / 2 : j->last;
  for (int64_t r = begin; r < end; r++) {
    const uint8_t* x = cpu_desc_ptr(in) + r * row_bytes;
    int64_t step;
    int blocked;
    int64_t base = quant_map_row(&j->map, r, &step, &blocked);
    for (int64_t c = 0; c < j->last; c++) {
      int64_t s = quant_sidx(&j->map, base, step, blocked, c);
      double zp = j->zp ? j->zp[s] : 0.0;
      v[c] = (cpu_q_decode(q, cpu_q_get(x, c, four)) - zp) * j->scale[s];
    }
    cpu_store[CPU_KT_F64](cpu_desc_ptr(out) + (size_t)(r * j->last) * oes, 1, v, j->last, out->dtype);
  }
  free(v);
}

static bp_status_t exec_quant_rows(const bp_op_call_t* call, int dequant) {
  quant_job_t j;
  memset(&j, 0, sizeof j);
  j.call = call;
  j.a = call->attrs;
  const bp_tensor_desc_t* in = call->inputs[0];
  const bp_tensor_desc_t* logical = dequant ? call->outputs[0] : in;
  int64_t ns = 0, nz = 0;
  double* scale = load_all(call->inputs[1], &ns);
  double* zp = NULL;
  if (call->num_inputs > 2 && call->inputs[2]->dtype != BP_DTYPE_INVALID)
    zp = load_all(call->inputs[2], &nz);
  bp_status_t st = BP_OK;
  if (!scale || (call->num_inputs > 2 && call->inputs[2]->dtype != BP_DTYPE_INVALID && !zp)) {
    st = cpu_error(BP_RESOURCE_EXHAUSTED, "cpu: %s: out of memory", cpu_op_name(call->op_id));
    goto done;
  }
  j.scale = scale;
  j.zp = zp;
  quant_map_init(&j.map, logical->rank, logical->sizes, j.a, ns);
  j.last = logical->rank ? logical->sizes[logical->rank - 1] : 1;
  int64_t numel = bp_desc_numel(logical);
  int64_t rows = j.last > 0 ? numel / j.last : 0;
  if (rows > 0) {
    int64_t grain = QUANT_GRAIN / (j.last > 0 ? j.last : 1);
    cpu_parallel_for(rows, grain < 1 ? 1 : grain, dequant ? dequantize_rows : quantize_rows, &j);
  }
  if (atomic_load(&j.failed))
    st = cpu_error(BP_RESOURCE_EXHAUSTED, "cpu: %s: out of memory for a row", cpu_op_name(call->op_id));
done:
  free(scale);
  free(zp);
  return st;
}

/* ---- quantize_dynamic ------------------------------------------------------------- */

/* OCP MX: the block scale is 2^(floor(log2(amax)) - emax of the element
 * format), clamped to e8m0's range; amax 0 gives 2^-127; inf or NaN the NaN
 * scale. */
static double mx_scale(uint32_t q, double amax) {
  if (!isfinite(amax)) return NAN;
  if (amax == 0.0) return ldexp(1.0, -127);
  int e;
  (void)frexp(amax, &e); /* amax = f * 2^e, f in [0.5, 1): floor(log2) = e - 1 */
  int emax = q == BP_DTYPE_F8E4M3FN ? 8 : q == BP_DTYPE_F8E5M2 ? 15 : 2;
  int s = e - 1 - emax;
  s = s < -127 ? -127 : s > 127 ? 127 : s;
  return ldexp(1.0, s);
}

typedef struct dyn_job {
  const bp_op_call_t* call;
  const bp_quantize_attrs_t* a;
  int64_t last, bs, nb;
  _Atomic int failed;
} dyn_job_t;

static void dynamic_rows(void* ctx, int64_t begin, int64_t end) {
  dyn_job_t* j = ctx;
  const bp_tensor_desc_t *in = j->call->inputs[0], *out = j->call->outputs[0],
                         *so = j->call->outputs[1];
  uint32_t q = j->a->qdtype, sd = so->dtype;
  int four = cpu_q_is_4bit(q), sat = !(j->a->flags & BP_QUANTIZE_NO_SATURATE);
  double qmax = cpu_q_is_int(q) ? (q == BP_DTYPE_I8 ? 127.0 : 7.0) : cpu_q_float_max(q);
  double* x = malloc((size_t)(j->last > 0 ? j->last : 1) * sizeof(double));
  if (!x) { atomic_store(&j->failed, 1); return; }
  size_t ies = bp_dtype_size(in->dtype), ses = bp_dtype_size(sd);
  int64_t row_bytes = four ? j->last / 2 : j->last;
  for (int64_t r = begin; r < end; r++) {
    cpu_load[CPU_KT_F64](x, cpu_desc_ptr(in) + (size_t)(r * j->last) * ies, 1, j->last, in->dtype);
    uint8_t* y = cpu_desc_ptr(out) + r * row_bytes;
    for (int64_t b = 0; b < j->nb; b++) {
      int64_t c0 = b * j->bs, c1 = c0 + j->bs < j->last ? c0 + j->bs : j->last;
      double amax = 0.0;
      for (int64_t c = c0; c < c1; c++) {
        double v = fabs(x[c]);
        if (isnan(v) || v > amax) amax = isnan(amax) ? amax : v;
      }
      double s; /* the stored scale's value: codes use what dequantize reads */
      unsigned char* sp = cpu_desc_ptr(so) + (size_t)(r * j->nb + b) * ses;
      if (sd == BP_DTYPE_F8E8M0FNU) {
        s = mx_scale(q, amax);
        *sp = (uint8_t)bp_f64_to_small_float(sd, s);
      } else {
        double exact = amax / qmax;
        cpu_store[CPU_KT_F64](sp, 1, &exact, 1, sd);
        cpu_load[CPU_KT_F64](&s, sp, 1, 1, sd);
      }
      for (int64_t c = c0; c < c1; c++) {
        uint32_t code = s == 0.0 ? cpu_q_encode(q, 0.0, 0, sat) : cpu_q_encode(q, x[c] / s, 0, sat);
        if (!four) y[c] = (uint8_t)code;
        else if (c & 1) y[c >> 1] = (uint8_t)(y[c >> 1] | (code << 4));
        else y[c >> 1] = (uint8_t)code;
      }
    }
  }
  free(x);
}

static bp_status_t exec_quantize_dynamic(const bp_op_call_t* call) {
  dyn_job_t j;
  memset(&j, 0, sizeof j);
  j.call = call;
  j.a = call->attrs;
  const bp_tensor_desc_t* in = call->inputs[0];
  j.last = in->sizes[in->rank - 1];
  j.bs = j.a->block_size > 0 ? j.a->block_size : (j.last > 0 ? j.last : 1);
  j.nb = j.a->block_size > 0 ? j.last / j.bs + (j.last % j.bs != 0) : 1;
  int64_t numel = bp_desc_numel(in);
  int64_t rows = j.last > 0 ? numel / j.last : bp_desc_numel(call->outputs[1]);
  if (j.last == 0) {
    /* empty rows: amax 0 */
    const bp_tensor_desc_t* so = call->outputs[1];
    for (int64_t r = 0; r < rows; r++) {
      double s = so->dtype == BP_DTYPE_F8E8M0FNU ? ldexp(1.0, -127) : 0.0;
      if (so->dtype == BP_DTYPE_F8E8M0FNU) cpu_desc_ptr(so)[r] = (uint8_t)bp_f64_to_small_float(so->dtype, s);
      else cpu_store[CPU_KT_F64](cpu_desc_ptr(so) + (size_t)r * bp_dtype_size(so->dtype), 1, &s, 1, so->dtype);
    }
    return BP_OK;
  }
  if (rows > 0) {
    int64_t grain = QUANT_GRAIN / j.last;
    cpu_parallel_for(rows, grain < 1 ? 1 : grain, dynamic_rows, &j);
  }
  if (atomic_load(&j.failed))
    return cpu_error(BP_RESOURCE_EXHAUSTED, "cpu: quantize_dynamic: out of memory for a row");
  return BP_OK;
}

/* ---- family ------------------------------------------------------------------------- */

CPU_HIDDEN bp_status_t cpu_exec_scaled_mm(const bp_op_call_t* call);
CPU_HIDDEN bp_status_t cpu_exec_weight_only_mm(const bp_op_call_t* call);

static bp_status_t exec_quant(const bp_op_call_t* call) {
  switch (call->op_id) {
    case BP_OP_quantize: return exec_quant_rows(call, 0);
    case BP_OP_dequantize: return exec_quant_rows(call, 1);
    case BP_OP_quantize_dynamic: return exec_quantize_dynamic(call);
    case BP_OP_scaled_mm: return cpu_exec_scaled_mm(call);
    case BP_OP_weight_only_mm: return cpu_exec_weight_only_mm(call);
    default: break;
  }
  return cpu_error(BP_UNIMPLEMENTED, "cpu: op %u is not a quantization op", call->op_id);
}

static int supported_quant(const bp_op_call_t* call, char* msg, size_t cap) {
  (void)call, (void)msg, (void)cap;
  return BP_SUPPORT_OK; /* the core's rules leave nothing the kernels lack */
}

const cpu_family_t cpu_family_quant = {
    "quant",
    CPU_FAMILY_OPS(BP_OP_quantize, BP_OP_dequantize, BP_OP_quantize_dynamic, BP_OP_scaled_mm,
                   BP_OP_weight_only_mm),
    exec_quant, supported_quant, 0,
};
