/* Case list plumbing and value materialisation (shared by the generators).
 *
 * Values are drawn from a splitmix64 stream seeded by the case id and the
 * operand index, so a case's data is the same on every run and in every
 * process (the runner regenerates cases in its children).
 */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cases_internal.h"

void bpc_case_list_free(bpc_case_list_t* list) {
  free(list->items);
  memset(list, 0, sizeof *list);
}

bpc_case_t* bpc_case_list_append(bpc_case_list_t* list) {
  if (list->count == list->capacity) {
    size_t cap = list->capacity ? list->capacity * 2 : 64;
    bpc_case_t* items = realloc(list->items, cap * sizeof *items);
    if (!items) return NULL;
    list->items = items;
    list->capacity = cap;
  }
  bpc_case_t* c = &list->items[list->count++];
  memset(c, 0, sizeof *c);
  return c;
}

bpc_case_t* bpc_gen_new(bpc_gen_t* g, const char* label, const char* axis, int variant) {
  if (g->status != BP_OK) return NULL;
  bpc_case_t* c = bpc_case_list_append(g->list);
  if (!c) {
    g->status = BP_RESOURCE_EXHAUSTED;
    return NULL;
  }
  c->op_id = g->op;
  c->num_outputs = 1;
  snprintf(c->id, sizeof c->id, "%s/%s/%s/%d", g->name, label, axis, variant);
  snprintf(c->dtype_label, sizeof c->dtype_label, "%s", label);
  c->seed = bpc_hash_string(c->id);
  return c;
}

void bpc_gen_drop_last(bpc_gen_t* g) {
  if (g->list->count > 0) g->list->count--;
}

bpc_shape_t bpc_shape(uint32_t rank, ...) {
  bpc_shape_t s;
  memset(&s, 0, sizeof s);
  s.rank = rank;
  va_list ap;
  va_start(ap, rank);
  for (uint32_t d = 0; d < rank && d < BP_MAX_RANK; d++) s.sizes[d] = va_arg(ap, int64_t);
  va_end(ap);
  return s;
}

void bpc_operand_set(bpc_operand_t* o, uint32_t dtype, bpc_shape_t s, uint32_t layout,
                     uint32_t values, double lo, double hi) {
  memset(o, 0, sizeof *o);
  o->dtype = dtype;
  o->rank = s.rank;
  memcpy(o->sizes, s.sizes, sizeof o->sizes);
  o->layout = layout;
  o->values = values;
  o->lo = lo;
  o->hi = hi;
}

int bpc_gen_keep_if_valid(bpc_gen_t* g, bpc_case_t* c) {
  if (!c) return 0;
  bpc_host_tensor_t in[BPC_MAX_INPUTS];
  void* data[BPC_MAX_INPUTS] = {0};
  memset(in, 0, sizeof in);
  bp_status_t st = BP_OK;
  for (uint32_t k = 0; k < c->num_inputs && st == BP_OK; k++) {
    st = bpc_case_materialize(c, k, &data[k]);
    in[k].dtype = c->in[k].dtype;
    in[k].rank = c->in[k].rank;
    memcpy(in[k].sizes, c->in[k].sizes, sizeof in[k].sizes);
    in[k].numel = 1;
    for (uint32_t d = 0; d < in[k].rank; d++) in[k].numel *= in[k].sizes[d];
    in[k].data = data[k];
  }
  bpc_ref_result_t res;
  int keep = st == BP_OK && bpc_reference_run(c, in, &res) == BP_OK;
  if (keep) bpc_ref_result_free(&res);
  for (uint32_t k = 0; k < c->num_inputs; k++) free(data[k]);
  if (!keep) bpc_gen_drop_last(g);
  return keep;
}

/* ---- special values ------------------------------------------------------ */
static int int_range(uint32_t d, int64_t* lo, int64_t* hi) {
  switch (d) {
    case BP_DTYPE_I8: *lo = INT8_MIN; *hi = INT8_MAX; return 1;
    case BP_DTYPE_U8: *lo = 0; *hi = UINT8_MAX; return 1;
    case BP_DTYPE_I16: *lo = INT16_MIN; *hi = INT16_MAX; return 1;
    case BP_DTYPE_I32: *lo = INT32_MIN; *hi = INT32_MAX; return 1;
    case BP_DTYPE_I64: *lo = INT64_MIN; *hi = INT64_MAX; return 1;
    case BP_DTYPE_BOOL: *lo = 0; *hi = 1; return 1;
    default: return 0;
  }
}

uint32_t bpc_special_values(uint32_t dtype, bpc_num_t* out, uint32_t capacity) {
  uint32_t n = 0;
#define PUSH_F(x) do { if (n < capacity) { out[n].f = (x); out[n].i = 0; out[n].mag = 0; } n++; } while (0)
#define PUSH_I(x) do { if (n < capacity) { out[n].i = (x); out[n].f = (double)(x); out[n].mag = 0; } n++; } while (0)
  if (bpc_dtype_is_float(dtype)) {
    int mant = bpc_float_mant_bits(dtype), emin = bpc_float_min_exp(dtype);
    double max = bpc_float_max(dtype);
    double min_normal = ldexp(1.0, emin), min_sub = ldexp(1.0, emin - mant);
    PUSH_F(0.0); PUSH_F(-0.0); PUSH_F(1.0); PUSH_F(-1.0); PUSH_F(0.5); PUSH_F(-2.5);
    PUSH_F(3.0); PUSH_F(INFINITY); PUSH_F(-INFINITY); PUSH_F(NAN);
    PUSH_F(min_sub); PUSH_F(-min_sub); PUSH_F(min_normal - min_sub); PUSH_F(min_normal);
    PUSH_F(-min_normal); PUSH_F(max); PUSH_F(-max); PUSH_F(0.5 * max);
    PUSH_F(bpc_round_to_dtype(0.001, dtype)); PUSH_F(3.140625); PUSH_F(100.0); PUSH_F(-7.5);
  } else {
    int64_t lo = 0, hi = 0;
    if (!int_range(dtype, &lo, &hi)) return 0;
    if (dtype == BP_DTYPE_BOOL) {
      PUSH_I(0); PUSH_I(1);
    } else {
      PUSH_I(0); PUSH_I(1); PUSH_I(hi); PUSH_I(hi - 1); PUSH_I(2); PUSH_I(100);
      if (lo < 0) { PUSH_I(-1); PUSH_I(lo); PUSH_I(lo + 1); PUSH_I(-2); PUSH_I(-100); }
      else { PUSH_I(128); PUSH_I(127); }
    }
  }
#undef PUSH_F
#undef PUSH_I
  return n;
}

/* BPC_V_DISTINCT: numel integers of [lo, hi] without repeats, in random
 * order (a partial Fisher-Yates shuffle of the range). */
static bp_status_t distinct_values(bpc_rng_t* rng, const bpc_operand_t* o, int64_t numel,
                                   uint8_t* data) {
  int64_t lo = (int64_t)ceil(o->lo), hi = (int64_t)floor(o->hi);
  if (bpc_dtype_is_float(o->dtype) || hi - lo + 1 < numel || hi - lo >= (INT64_C(1) << 24)) {
    return BP_INVALID_ARGUMENT;
  }
  int64_t n = hi - lo + 1;
  int64_t* pool = malloc(sizeof(int64_t) * (size_t)n);
  if (!pool) return BP_RESOURCE_EXHAUSTED;
  for (int64_t k = 0; k < n; k++) pool[k] = lo + k;
  for (int64_t i = 0; i < numel; i++) {
    int64_t r = bpc_rng_int(rng, i, n - 1), t = pool[i];
    pool[i] = pool[r];
    pool[r] = t;
    bpc_num_t v = {(double)pool[i], pool[i], 0.0};
    bpc_store(o->dtype, data, i, v, BP_DTYPE_I64);
  }
  free(pool);
  return BP_OK;
}

static int cmp_i64(const void* a, const void* b) {
  int64_t x = *(const int64_t*)a, y = *(const int64_t*)b;
  return (x > y) - (x < y);
}

/* BPC_V_OFFSETS: numel nondecreasing integers of [lo, hi], the first lo and
 * the last hi (the inner ones drawn, then sorted). */
static bp_status_t offsets_values(bpc_rng_t* rng, const bpc_operand_t* o, int64_t numel,
                                  uint8_t* data) {
  int64_t lo = (int64_t)ceil(o->lo), hi = (int64_t)floor(o->hi);
  if (bpc_dtype_is_float(o->dtype) || hi < lo) return BP_INVALID_ARGUMENT;
  int64_t* v = malloc(sizeof(int64_t) * (size_t)numel);
  if (!v) return BP_RESOURCE_EXHAUSTED;
  for (int64_t i = 0; i < numel; i++) v[i] = i == 0 ? lo : i == numel - 1 ? hi : bpc_rng_int(rng, lo, hi);
  qsort(v, (size_t)numel, sizeof(int64_t), cmp_i64);
  for (int64_t i = 0; i < numel; i++) {
    bpc_num_t n = {(double)v[i], v[i], 0.0};
    bpc_store(o->dtype, data, i, n, BP_DTYPE_I64);
  }
  free(v);
  return BP_OK;
}

/* Specials of an operand after its range filter. */
static uint32_t operand_specials(const bpc_operand_t* o, bpc_num_t* out, uint32_t capacity) {
  bpc_num_t all[64];
  uint32_t n = bpc_special_values(o->dtype, all, 64), m = 0;
  int fl = bpc_dtype_is_float(o->dtype);
  for (uint32_t k = 0; k < n; k++) {
    double v = fl ? bpc_round_to_dtype(all[k].f, o->dtype) : (double)all[k].i;
    if (o->lo < o->hi) {
      int nonfinite = !isfinite(v);
      if (nonfinite && !(o->values & BPC_V_NONFINITE)) continue;
      if (!nonfinite && (v < o->lo || v > o->hi)) continue;
    }
    if ((o->values & BPC_V_NONZERO) && v == 0.0) continue;
    if (m < capacity) out[m] = all[k];
    m++;
  }
  return m;
}

uint32_t bpc_operand_special_count(const bpc_operand_t* o) {
  bpc_num_t tmp[64];
  return operand_specials(o, tmp, 64);
}

static bpc_num_t random_value(bpc_rng_t* rng, const bpc_operand_t* o, uint32_t* out_from) {
  bpc_num_t v = {0.0, 0, 0.0};
  uint32_t d = o->dtype;
  for (int tries = 0; tries < 64; tries++) {
    if (d == BP_DTYPE_BOOL) {
      v.i = (int64_t)(bpc_rng_next(rng) & 1u);
      *out_from = BP_DTYPE_I64;
    } else if (bpc_dtype_is_float(d)) {
      double lo = o->lo, hi = o->hi;
      if (!(lo < hi)) { lo = -10.0; hi = 10.0; }
      double max = bpc_float_max(d); /* never overflow the dtype by drawing */
      if (lo < -max) lo = -max;
      if (hi > max) hi = max;
      v.f = bpc_rng_uniform(rng, lo, hi);
      if (o->values & BPC_V_INTEGRAL) v.f = (double)bpc_rng_int(rng, (int64_t)ceil(lo), (int64_t)floor(hi));
      *out_from = BP_DTYPE_F64;
      double r = bpc_round_to_dtype(v.f, d);
      if (o->lo < o->hi && (r < o->lo || r > o->hi)) continue; /* rounded out of range */
    } else {
      int64_t lo, hi;
      (void)int_range(d, &lo, &hi);
      if (o->lo < o->hi) {
        double l = ceil(o->lo), h = floor(o->hi);
        if (l > (double)lo) lo = (int64_t)l;
        if (h < (double)hi) hi = (int64_t)h;
      }
      v.i = bpc_rng_int(rng, lo, hi);
      *out_from = BP_DTYPE_I64;
    }
    v.f = *out_from == BP_DTYPE_I64 ? (double)v.i : v.f;
    if (!(o->values & BPC_V_NONZERO) || bpc_round_to_dtype(v.f, d) != 0.0) break;
  }
  return v;
}

bp_status_t bpc_case_materialize(const bpc_case_t* c, uint32_t k, void** out_data) {
  *out_data = NULL;
  if (k >= c->num_inputs || k >= BPC_MAX_INPUTS) return BP_INVALID_ARGUMENT;
  const bpc_operand_t* o = &c->in[k];
  if (o->dtype == BP_DTYPE_INVALID) return BP_OK;
  size_t esize = bpc_dtype_size(o->dtype);
  if (esize == 0) return BP_INVALID_ARGUMENT;
  int64_t numel = 1;
  for (uint32_t d = 0; d < o->rank; d++) numel *= o->sizes[d];
  /* A c64 operand draws its values as 2 * numel f32 components (re, im). */
  bpc_operand_t as_f32;
  if (o->dtype == BP_DTYPE_C64) {
    as_f32 = *o;
    as_f32.dtype = BP_DTYPE_F32;
    o = &as_f32;
    esize = 4;
    numel *= 2;
  }
  if (numel == 0) return BP_OK;
  uint8_t* data = malloc((size_t)numel * esize);
  if (!data) return BP_RESOURCE_EXHAUSTED;
  bpc_rng_t rng;
  bpc_rng_seed(&rng, c->seed ^ ((uint64_t)(k + 1) * UINT64_C(0x9E3779B97F4A7C15)));
  /* Special operands enumerate the cross product of their specials: operand
   * j takes digit j of the element index in base m. */
  bpc_num_t specials[64];
  uint32_t m = 0;
  int64_t period = 1, limit = 1;
  if ((o->values & 3u) == BPC_V_SPECIAL) {
    m = operand_specials(o, specials, 64);
    if (m > 64) m = 64;
    uint32_t nspecial = 0, before = 0;
    for (uint32_t j = 0; j < c->num_inputs; j++) {
      if (c->in[j].dtype != BP_DTYPE_INVALID && (c->in[j].values & 3u) == BPC_V_SPECIAL) {
        if (j < k) before++;
        nspecial++;
      }
    }
    for (uint32_t j = 0; j < before; j++) period *= m ? m : 1;
    for (uint32_t j = 0; j < nspecial; j++) limit *= m ? m : 1;
  }
  if ((o->values & 3u) == BPC_V_DISTINCT || (o->values & 3u) == BPC_V_OFFSETS) {
    bp_status_t st = (o->values & 3u) == BPC_V_DISTINCT ? distinct_values(&rng, o, numel, data)
                                                        : offsets_values(&rng, o, numel, data);
    if (st != BP_OK) free(data);
    else *out_data = data;
    return st;
  }
  for (int64_t i = 0; i < numel; i++) {
    bpc_num_t v;
    uint32_t from;
    if (m > 0 && i < limit) {
      v = specials[(i / period) % m];
      from = bpc_dtype_is_float(o->dtype) ? BP_DTYPE_F64 : BP_DTYPE_I64;
    } else {
      v = random_value(&rng, o, &from);
      if ((o->values & BPC_V_SPARSE) && (bpc_rng_next(&rng) & 15u) != 0) {
        v.f = 0.0;
        v.i = 0;
      }
    }
    bpc_store(o->dtype, data, i, v, from);
  }
  *out_data = data;
  return BP_OK;
}

/* ---- attribute helpers ------------------------------------------------------ */
/* A zeroed scalar (all bytes, padding included) of `kind`. */
static bp_scalar_t scalar_of_kind(uint32_t kind) {
  bp_scalar_t s;
  memset(&s, 0, sizeof s);
  s.kind = kind;
  return s;
}

bp_scalar_t bpc_sf(double v) {
  bp_scalar_t s = scalar_of_kind(BP_SCALAR_FLOAT);
  s.v.f = v;
  return s;
}

bp_scalar_t bpc_si(int64_t v) {
  bp_scalar_t s = scalar_of_kind(BP_SCALAR_INT);
  s.v.i = v;
  return s;
}

bp_scalar_t bpc_sb(int v) {
  bp_scalar_t s = scalar_of_kind(BP_SCALAR_BOOL);
  s.v.b = v != 0;
  return s;
}

/* A scalar of the same category as dtype: 2.5 / 3 / true. */
bp_scalar_t bpc_scalar_like(uint32_t dtype) {
  if (bpc_dtype_is_float(dtype)) return bpc_sf(2.5);
  if (dtype == BP_DTYPE_BOOL) return bpc_sb(1);
  return bpc_si(3);
}

void bpc_int_range_of(uint32_t dtype, double* lo, double* hi) {
  int64_t l = 0, h = 0;
  if (!int_range(dtype, &l, &h)) {
    *lo = -1e300;
    *hi = 1e300;
    return;
  }
  *lo = (double)l;
  /* Largest double not above h (2^63 - 1 rounds up to 2^63). */
  *hi = dtype == BP_DTYPE_I64 ? 9.2e18 : (double)h;
}
