/* backplane: helpers shared by plugins. See bp_plugin_common.h. */
#include "bp_plugin_common.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>

const char* bp_dtype_name(uint32_t dtype) {
  switch (dtype) {
    case BP_DTYPE_F32: return "f32";
    case BP_DTYPE_F16: return "f16";
    case BP_DTYPE_BF16: return "bf16";
    case BP_DTYPE_F64: return "f64";
    case BP_DTYPE_I8: return "i8";
    case BP_DTYPE_U8: return "u8";
    case BP_DTYPE_I16: return "i16";
    case BP_DTYPE_I32: return "i32";
    case BP_DTYPE_I64: return "i64";
    case BP_DTYPE_BOOL: return "bool";
    case BP_DTYPE_C64: return "c64";
    case BP_DTYPE_F8E4M3: return "f8e4m3";
    case BP_DTYPE_F8E5M2: return "f8e5m2";
    default: return "invalid";
  }
}

float bp_f8e4m3_to_f32(uint8_t v) {
  uint32_t exp = (v >> 3) & 0xfu, man = v & 7u;
  float mag;
  if (exp == 0xf && man == 7) return NAN;
  if (exp == 0) mag = (float)man * 0x1p-9f;
  else mag = ldexpf((float)(8u + man), (int)exp - 10);
  return (v & 0x80u) ? -mag : mag;
}

/* Rounds |v| to a binary format with `mbits` stored mantissa bits and
 * exponent bias `bias`; returns the unsigned code (exponent << mbits | man)
 * or UINT32_MAX when the rounded value exceeds exponent `emax`. */
static uint32_t encode_small(double a, int mbits, int bias, int emax) {
  if (a == 0.0) return 0;
  int e;
  (void)frexp(a, &e);
  e -= 1; /* a = m * 2^e, m in [1, 2) */
  int emin = 1 - bias;
  if (e < emin) e = emin;
  double n = ldexp(a, mbits - e); /* exact: scaling by a power of two */
  double r = nearbyint(n);       /* ties to even in the default mode */
  double top = ldexp(1.0, mbits + 1);
  if (r >= top) {
    e++;
    r = ldexp(1.0, mbits);
  }
  if (e > emax) return UINT32_MAX;
  uint32_t q = (uint32_t)r;
  if (q < (1u << mbits)) return q; /* subnormal (e == emin) */
  return ((uint32_t)(e + bias) << mbits) | (q - (1u << mbits));
}

uint16_t bp_f64_to_f16(double v) {
  uint16_t sign = signbit(v) ? 0x8000u : 0;
  if (isnan(v)) return (uint16_t)(sign | 0x7e00u);
  uint32_t c = isinf(v) ? UINT32_MAX : encode_small(fabs(v), 10, 15, 15);
  return (uint16_t)(sign | (c == UINT32_MAX ? 0x7c00u : c));
}

uint16_t bp_f64_to_bf16(double v) {
  uint16_t sign = signbit(v) ? 0x8000u : 0;
  if (isnan(v)) return (uint16_t)(sign | 0x7fc0u);
  uint32_t c = isinf(v) ? UINT32_MAX : encode_small(fabs(v), 7, 127, 127);
  return (uint16_t)(sign | (c == UINT32_MAX ? 0x7f80u : c));
}

uint8_t bp_f64_to_f8e4m3(double v) {
  uint8_t sign = signbit(v) ? 0x80u : 0;
  if (isnan(v) || isinf(v)) return (uint8_t)(sign | 0x7fu);
  uint32_t c = encode_small(fabs(v), 3, 7, 8);
  if (c == UINT32_MAX || c == 0x7fu) return (uint8_t)(sign | 0x7fu); /* 0x7f is NaN */
  return (uint8_t)(sign | c);
}

uint8_t bp_f64_to_f8e5m2(double v) {
  uint8_t sign = signbit(v) ? 0x80u : 0;
  if (isnan(v)) return (uint8_t)(sign | 0x7eu);
  uint32_t c = isinf(v) ? UINT32_MAX : encode_small(fabs(v), 2, 15, 15);
  return (uint8_t)(sign | (c == UINT32_MAX ? 0x7cu : c));
}

bp_status_t bp_plugin_report(const bp_host_services_t* host, bp_status_t status, const char* fmt,
                             ...) {
  char buf[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(buf, sizeof buf, fmt, ap);
  va_end(ap);
  if (host && host->struct_size >= BP_HOST_SERVICES_V1_SIZE && host->report)
    host->report(host->host_ctx, status, buf);
  return status;
}

bp_status_t bp_plugin_format(char* buf, size_t cap, bp_status_t status, const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  if (cap) vsnprintf(buf, cap, fmt, ap);
  va_end(ap);
  return status;
}

bp_status_t bp_plugin_check_desc(const bp_tensor_desc_t* d, uint64_t buffer_bytes,
                                 const char* what, char* msg, size_t cap) {
  if (d->struct_size < BP_TENSOR_DESC_V1_SIZE)
    return bp_plugin_format(msg, cap, BP_INVALID_ARGUMENT, "%s: descriptor struct_size %u < %u",
                            what, d->struct_size, BP_TENSOR_DESC_V1_SIZE);
  uint32_t es = bp_dtype_size(d->dtype);
  if (!bp_dtype_is_valid(d->dtype) || es == 0)
    return bp_plugin_format(msg, cap, BP_INVALID_ARGUMENT, "%s: unknown dtype %u", what, d->dtype);
  if (d->rank > BP_MAX_RANK)
    return bp_plugin_format(msg, cap, BP_INVALID_ARGUMENT, "%s: rank %u exceeds %d", what, d->rank,
                            BP_MAX_RANK);
  int64_t lo = 0, hi = 0;
  int empty = 0;
  for (uint32_t i = 0; i < d->rank; i++) {
    if (d->sizes[i] < 0)
      return bp_plugin_format(msg, cap, BP_INVALID_ARGUMENT, "%s: negative size %lld in dim %u",
                              what, (long long)d->sizes[i], i);
    if (d->sizes[i] == 0) empty = 1;
  }
  if (empty) return BP_OK;
  for (uint32_t i = 0; i < d->rank; i++) {
    int64_t ext;
    if (__builtin_mul_overflow(d->sizes[i] - 1, d->strides[i], &ext) ||
        __builtin_add_overflow(ext < 0 ? lo : hi, ext, ext < 0 ? &lo : &hi))
      return bp_plugin_format(msg, cap, BP_INVALID_ARGUMENT,
                              "%s: size * stride overflows in dim %u", what, i);
  }
  if (buffer_bytes == UINT64_MAX) return BP_OK;
  /* first byte = offset + lo*es >= 0; end = offset + (hi+1)*es <= bytes */
  __int128 first = (__int128)d->byte_offset + (__int128)lo * es;
  __int128 end = (__int128)d->byte_offset + ((__int128)hi + 1) * es;
  if (first < 0 || end > (__int128)buffer_bytes)
    return bp_plugin_format(msg, cap, BP_OUT_OF_RANGE,
                            "%s: elements span bytes [%lld, %lld) outside the buffer of %llu bytes",
                            what, (long long)first, (long long)end,
                            (unsigned long long)buffer_bytes);
  return BP_OK;
}

void bp_nd_collapse(bp_nd_layout_t* l) {
  int n = 0;
  for (int d = 0; d < l->ndim; d++) { /* drop size-1 dims */
    if (l->sizes[d] == 1) continue;
    l->sizes[n] = l->sizes[d];
    for (int k = 0; k < l->nops; k++) l->strides[k][n] = l->strides[k][d];
    n++;
  }
  if (n == 0) { /* a scalar: one row of one element */
    l->ndim = 1;
    l->sizes[0] = 1;
    for (int k = 0; k < l->nops; k++) l->strides[k][0] = 0;
    return;
  }
  int m = 0;
  for (int d = 1; d < n; d++) {
    int ok = 1;
    for (int k = 0; k < l->nops; k++)
      if (l->strides[k][m] != l->strides[k][d] * l->sizes[d]) ok = 0;
    if (ok) {
      l->sizes[m] *= l->sizes[d];
      for (int k = 0; k < l->nops; k++) l->strides[k][m] = l->strides[k][d];
    } else {
      m++;
      l->sizes[m] = l->sizes[d];
      for (int k = 0; k < l->nops; k++) l->strides[k][m] = l->strides[k][d];
    }
  }
  l->ndim = m + 1;
}

void bp_nd_cursor_init(bp_nd_cursor_t* c, const bp_nd_layout_t* l, int64_t pos) {
  for (int k = 0; k < l->nops; k++) c->off[k] = 0;
  for (int d = l->ndim - 1; d >= 0; d--) {
    int64_t s = l->sizes[d];
    int64_t i = s > 0 ? pos % s : 0;
    pos = s > 0 ? pos / s : 0;
    c->idx[d] = i;
    for (int k = 0; k < l->nops; k++) c->off[k] += i * l->strides[k][d];
  }
}

static _Thread_local char tls_msg[BP_PLUGIN_MSG_CAP];
static _Thread_local int tls_is_worker;

void bp_plugin_set_worker_thread(int is_worker) { tls_is_worker = is_worker; }
const char* bp_plugin_last_error(void) { return tls_msg; }

bp_status_t bp_plugin_errorv(const bp_host_services_t* host, bp_status_t status, const char* fmt,
                             va_list ap) {
  vsnprintf(tls_msg, sizeof tls_msg, fmt, ap);
  if (!tls_is_worker) bp_plugin_report(host, status, "%s", tls_msg);
  return status;
}
