/* backplane CPU plugin: the random kernel family: rand, randn, randperm and
 * dropout, drawn from the shared Philox-4x32-10 word stream (bp_philox.h).
 *
 * Element i (row-major index of the output) uses fixed words of the stream
 * of (attrs.seed, attrs.offset), so results do not depend on the thread
 * count or on how the range is split (docs/semantics.md, "Random"):
 *  - f32, f16, bf16: word i; f64: words 2i (low half) and 2i + 1 (high);
 *  - rand: the top (significand + 1) bits as k * 2^-bits in [0, 1);
 *  - randn: Box-Muller on the pair (2m, 2m + 1) of 24-bit (53-bit for f64)
 *    uniforms u, v: r = sqrt(-2 log(1 - u)), z_2m = r cos(2 pi v),
 *    z_2m+1 = r sin(2 pi v), computed in double and rounded once;
 *  - dropout: keep element i when its uniform (as randn's) is >= p;
 *  - randperm: sort 0..n-1 by the 64-bit keys (words 2i, 2i + 1), ties by
 *    index.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "bp_philox.h"
#include "cpu_kernels.h"

#define RAND_GRAIN 8192
#define RAND_TWO_PI 6.283185307179586476925

typedef struct rand_job {
  uint32_t op;
  const bp_random_attrs_t* a;
  bp_nd_layout_t L; /* operand 0: out; dropout: 1 mask, 2 input */
  unsigned char* base[3];
  uint32_t dtype;   /* output dtype */
  int wide;         /* f64: 64-bit uniforms */
  int unit_bits;    /* rand's bits per value */
  double scale;     /* dropout: 1 / (1 - p), 0 when p == 1 */
} rand_job_t;

/* Uniforms of elements [first, first + n) with `bits` bits from 32-bit
 * words (narrow) or 64-bit word pairs (wide). */
static void uniforms(const rand_job_t* j, int64_t first, int64_t n, int bits, double* u) {
  uint32_t w[2 * (CPU_BLOCK + 2)];
  if (j->wide) {
    bp_philox_words(j->a->seed, j->a->offset, 2 * (uint64_t)first, 2 * n, w);
    for (int64_t k = 0; k < n; k++) {
      uint64_t v = (uint64_t)w[2 * k] | (uint64_t)w[2 * k + 1] << 32;
      u[k] = bp_philox_u64_to_unit(v, bits);
    }
  } else {
    bp_philox_words(j->a->seed, j->a->offset, (uint64_t)first, n, w);
    for (int64_t k = 0; k < n; k++) u[k] = bp_philox_u32_to_unit(w[k], bits);
  }
}

/* Values of elements [first, first + n) (n <= CPU_BLOCK) in double. */
static void values(const rand_job_t* j, int64_t first, int64_t n, double* v) {
  if (j->op == BP_OP_rand) {
    uniforms(j, first, n, j->unit_bits, v);
    return;
  }
  /* randn: whole pairs around [first, first + n). */
  const int bits = j->wide ? 53 : 24;
  int64_t p0 = first & ~(int64_t)1, np = first + n - p0;
  np += np & 1;
  double u[CPU_BLOCK + 2];
  uniforms(j, p0, np, bits, u);
  for (int64_t k = 0; k < n; k++) {
    int64_t e = first + k, q = (e - p0) & ~(int64_t)1;
    double r = sqrt(-2.0 * log(1.0 - u[q])); /* 1 - u > 0: no log(0) */
    double t = RAND_TWO_PI * u[q + 1];
    v[k] = (e & 1) ? r * sin(t) : r * cos(t);
  }
}

static void rand_range(void* ctx, int64_t begin, int64_t end) {
  const rand_job_t* j = ctx;
  bp_nd_cursor_t c;
  bp_nd_cursor_init(&c, &j->L, begin);
  const int64_t last = j->L.ndim - 1;
  const int64_t es = bp_dtype_size(j->dtype);
  double v[CPU_BLOCK];
  for (int64_t i = begin; i < end;) {
    int64_t n = bp_nd_row_left(&c, &j->L);
    if (n > end - i) n = end - i;
    if (n > CPU_BLOCK) n = CPU_BLOCK;
    unsigned char* o = j->base[0] + c.off[0] * es;
    if (j->op == BP_OP_dropout) {
      const int kt = j->wide ? CPU_KT_F64 : CPU_KT_F32;
      double x[CPU_BLOCK];
      uint8_t keep[CPU_BLOCK];
      uniforms(j, i, n, j->wide ? 53 : 24, v);
      cpu_load[CPU_KT_F64](x, j->base[2] + c.off[2] * es, j->L.strides[2][last], n, j->dtype);
      if (kt == CPU_KT_F32) { /* PyTorch: (x * mask) * scale in the input's opmath */
        float xf[CPU_BLOCK];
        for (int64_t k = 0; k < n; k++) {
          keep[k] = v[k] >= j->a->p;
          xf[k] = ((float)x[k] * (float)keep[k]) * (float)j->scale;
        }
        cpu_store[CPU_KT_F32](o, j->L.strides[0][last], xf, n, j->dtype);
      } else {
        for (int64_t k = 0; k < n; k++) {
          keep[k] = v[k] >= j->a->p;
          x[k] = (x[k] * (double)keep[k]) * j->scale;
        }
        cpu_store[CPU_KT_F64](o, j->L.strides[0][last], x, n, j->dtype);
      }
      cpu_store[CPU_KT_BOOL](j->base[1] + c.off[1], j->L.strides[1][last], keep, n, BP_DTYPE_BOOL);
    } else {
      values(j, i, n, v);
      cpu_store[CPU_KT_F64](o, j->L.strides[0][last], v, n, j->dtype);
    }
    bp_nd_cursor_advance(&c, &j->L, n);
    i += n;
  }
}

/* ---- randperm ------------------------------------------------------------ */
typedef struct perm_key {
  uint64_t key;
  int64_t index;
} perm_key_t;

static int perm_cmp(const void* a, const void* b) {
  const perm_key_t *x = a, *y = b;
  if (x->key != y->key) return x->key < y->key ? -1 : 1;
  return x->index < y->index ? -1 : x->index > y->index;
}

/* Largest n whose values 0..n-1 the dtype holds exactly (PyTorch's
 * randperm check). */
static int64_t perm_limit(uint32_t d) {
  switch (d) {
    case BP_DTYPE_F16: return 2048;
    case BP_DTYPE_BF16: return 256;
    case BP_DTYPE_F32: return INT64_C(1) << 24;
    case BP_DTYPE_F64: return INT64_C(1) << 53;
    case BP_DTYPE_I8: return 128;
    case BP_DTYPE_U8: return 256;
    case BP_DTYPE_I16: return 32768;
    case BP_DTYPE_I32: return INT64_C(1) << 31;
    default: return INT64_MAX;
  }
}

static bp_status_t exec_randperm(const bp_op_call_t* call) {
  const bp_tensor_desc_t* out = call->outputs[0];
  const bp_random_attrs_t* a = call->attrs;
  if (out->rank != 1)
    return cpu_error(BP_INVALID_ARGUMENT, "cpu: randperm: output rank %u, expected 1", out->rank);
  int64_t n = out->sizes[0];
  if (n > perm_limit(out->dtype))
    return cpu_error(BP_INVALID_ARGUMENT, "cpu: randperm: n = %lld is too large for dtype %s",
                     (long long)n, bp_dtype_name(out->dtype));
  if (n == 0) return BP_OK;
  bp_status_t st = BP_OK;
  perm_key_t* keys = NULL;
  int64_t* idx = NULL;
  if ((uint64_t)n > SIZE_MAX / (2 * sizeof(perm_key_t)) ||
      !(keys = malloc((size_t)n * sizeof *keys)) || !(idx = malloc((size_t)n * sizeof *idx))) {
    st = cpu_error(BP_RESOURCE_EXHAUSTED, "cpu: randperm: no memory for %lld keys", (long long)n);
    goto cleanup;
  }
  uint32_t w[2 * CPU_BLOCK];
  for (int64_t i = 0; i < n; i += CPU_BLOCK) {
    int64_t m = n - i < CPU_BLOCK ? n - i : CPU_BLOCK;
    bp_philox_words(a->seed, a->offset, 2 * (uint64_t)i, 2 * m, w);
    for (int64_t k = 0; k < m; k++) {
      keys[i + k].key = (uint64_t)w[2 * k] | (uint64_t)w[2 * k + 1] << 32;
      keys[i + k].index = i + k;
    }
  }
  qsort(keys, (size_t)n, sizeof *keys, perm_cmp);
  for (int64_t i = 0; i < n; i++) idx[i] = keys[i].index;
  unsigned char* o = cpu_desc_ptr(out);
  const int64_t es = bp_dtype_size(out->dtype);
  for (int64_t i = 0; i < n; i += CPU_BLOCK) {
    int64_t m = n - i < CPU_BLOCK ? n - i : CPU_BLOCK;
    cpu_store[CPU_KT_I64](o + i * out->strides[0] * es, out->strides[0], idx + i, m, out->dtype);
  }
cleanup:
  free(keys);
  free(idx);
  return st;
}

/* ---- dispatch ------------------------------------------------------------ */
static int mant_bits(uint32_t d) {
  switch (d) {
    case BP_DTYPE_F64: return 52;
    case BP_DTYPE_F16: return 10;
    case BP_DTYPE_BF16: return 7;
    default: return 23;
  }
}

static bp_status_t exec_random(const bp_op_call_t* call) {
  if (call->op_id == BP_OP_randperm) return exec_randperm(call);
  const bp_tensor_desc_t* out = call->outputs[0];
  rand_job_t j;
  memset(&j, 0, sizeof j);
  j.op = call->op_id;
  j.a = call->attrs;
  j.dtype = out->dtype;
  if (!bp_dtype_is_float(j.dtype))
    return cpu_error(BP_INVALID_ARGUMENT, "cpu: %s: output dtype %s is not floating",
                     cpu_op_name(j.op), bp_dtype_name(j.dtype));
  j.wide = j.dtype == BP_DTYPE_F64;
  j.unit_bits = mant_bits(j.dtype) + 1;
  int64_t numel = bp_desc_numel(out);
  const bp_tensor_desc_t* ops[3] = {out, NULL, NULL};
  j.L.nops = 1;
  if (j.op == BP_OP_dropout) {
    const bp_tensor_desc_t* in = call->inputs[0];
    const bp_tensor_desc_t* mask = call->outputs[1];
    if (in->dtype != j.dtype || mask->dtype != BP_DTYPE_BOOL)
      return cpu_error(BP_INVALID_ARGUMENT, "cpu: dropout: dtypes %s -> %s, %s", bp_dtype_name(in->dtype),
                       bp_dtype_name(j.dtype), bp_dtype_name(mask->dtype));
    /* Evaluation mode: the same formula with every element kept and scale 1. */
    static const bp_random_attrs_t keep_all = {.struct_size = sizeof(bp_random_attrs_t)};
    if (!j.a->train) j.a = &keep_all;
    double p1m = 1.0 - j.a->p;
    j.scale = p1m == 0.0 ? 0.0 : 1.0 / p1m;
    ops[1] = mask;
    ops[2] = in;
    j.L.nops = 3;
  }
  if (numel == 0) return BP_OK;
  j.L.ndim = out->rank ? (int)out->rank : 1;
  for (int d = 0; d < j.L.ndim; d++) {
    j.L.sizes[d] = out->rank ? out->sizes[d] : 1;
    for (int k = 0; k < j.L.nops; k++) j.L.strides[k][d] = out->rank ? ops[k]->strides[d] : 0;
  }
  for (int k = 0; k < j.L.nops; k++) j.base[k] = cpu_desc_ptr(ops[k]);
  bp_nd_collapse(&j.L);
  if (numel < RAND_GRAIN) rand_range(&j, 0, numel);
  else cpu_parallel_for(numel, RAND_GRAIN, rand_range, &j);
  return BP_OK;
}

static int supported_random(const bp_op_call_t* call, char* msg, size_t cap) {
  uint32_t d = call->outputs[0]->dtype;
  if (call->op_id == BP_OP_randperm ? !(bp_dtype_is_float(d) || bp_dtype_is_int(d))
                                    : !bp_dtype_is_float(d)) {
    bp_plugin_format(msg, cap, 0, "output dtype %s", bp_dtype_name(d));
    return BP_SUPPORT_DTYPE;
  }
  return BP_SUPPORT_OK;
}

const cpu_family_t cpu_family_random = {
    "random", CPU_FAMILY_OPS(BP_OP_dropout, BP_OP_rand, BP_OP_randn, BP_OP_randperm),
    exec_random, supported_random, 0};
