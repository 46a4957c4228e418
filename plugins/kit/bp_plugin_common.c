/* backplane: helpers shared by plugins. See bp_plugin_common.h. */
#include "bp_plugin_common.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>

const char* bp_dtype_name(uint32_t dtype) {
  switch (dtype) {
#define BP_DTYPE_X(e, v, n, bytes, bits, cat) case BP_DTYPE_##e: return n;
#include "backplane/dtypes.def"
    default: return "invalid";
  }
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

void bp_plugin_logv(const bp_host_services_t* host, int32_t level, const char* fmt, va_list ap) {
  if (!host || host->struct_size < BP_HOST_SERVICES_V1_SIZE || !host->log) return;
  if (host->log_enabled && !host->log_enabled(host->host_ctx, level)) return;
  char buf[1024];
  vsnprintf(buf, sizeof buf, fmt, ap);
  host->log(host->host_ctx, level, buf);
}

void bp_plugin_log(const bp_host_services_t* host, int32_t level, const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  bp_plugin_logv(host, level, fmt, ap);
  va_end(ap);
}

/* A value for a warning: at most 40 bytes (the host cleans control bytes). */
#define BP__SHOWN(text) (int)(strlen(text) > 40 ? 40 : strlen(text)), (text)

int bp_plugin_parse_uint(const bp_host_services_t* host, const char* name, const char* text,
                         uint64_t min, uint64_t max, uint64_t dflt, uint64_t* out) {
  *out = dflt;
  if (!text || !*text) return 0;
  uint64_t v = 0;
  int digits = 0, big = 0;
  const char* p = text;
  for (; *p >= '0' && *p <= '9'; ++p, ++digits) {
    if (v > (UINT64_MAX - 9) / 10) big = 1;
    if (!big) v = v * 10 + (uint64_t)(*p - '0');
  }
  /* The value ends at the end of the text or at an options separator. */
  const int whole = digits > 0 && (*p == '\0' || *p == ';');
  if (whole && (big || v > max)) {
    bp_plugin_log(host, BP_LOG_WARN, "%s='%.*s' is more than the maximum %llu; using %llu", name,
                  BP__SHOWN(text), (unsigned long long)max, (unsigned long long)max);
    *out = max;
    return 0;
  }
  if (!whole || v < min) {
    bp_plugin_log(host, BP_LOG_WARN,
                  "%s='%.*s' is not a whole number from %llu to %llu; using %llu", name,
                  BP__SHOWN(text), (unsigned long long)min, (unsigned long long)max,
                  (unsigned long long)dflt);
    return 0;
  }
  *out = v;
  return 1;
}

int bp_plugin_parse_flag(const bp_host_services_t* host, const char* name, const char* text,
                         int dflt, int* out) {
  *out = dflt;
  if (!text || !*text) return 0;
  if ((text[0] == '0' || text[0] == '1') && (text[1] == '\0' || text[1] == ';')) {
    *out = text[0] == '1';
    return 1;
  }
  bp_plugin_log(host, BP_LOG_WARN, "%s='%.*s' is not 0 or 1; using %d", name, BP__SHOWN(text),
                dflt);
  return 0;
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
  for (uint32_t i = 0; i < d->rank; i++) {
    if (d->sizes[i] < 0)
      return bp_plugin_format(msg, cap, BP_INVALID_ARGUMENT, "%s: negative size %lld in dim %u",
                              what, (long long)d->sizes[i], i);
  }
  uint64_t lo = 0, hi = 0;
  if (bp_checked_span(es, d->rank, d->sizes, d->strides, d->byte_offset, &lo, &hi))
    return bp_plugin_format(msg, cap, BP_OUT_OF_RANGE,
                            "%s: the byte span overflows or starts below byte 0 (offset %llu)",
                            what, (unsigned long long)d->byte_offset);
  if (buffer_bytes == UINT64_MAX || hi == lo) return BP_OK;
  if (hi > buffer_bytes)
    return bp_plugin_format(msg, cap, BP_OUT_OF_RANGE,
                            "%s: elements span bytes [%llu, %llu) outside the buffer of %llu bytes",
                            what, (unsigned long long)lo, (unsigned long long)hi,
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
void bp_plugin_clear_error(void) { tls_msg[0] = '\0'; }

bp_status_t bp_plugin_errorv(const bp_host_services_t* host, bp_status_t status, const char* fmt,
                             va_list ap) {
  vsnprintf(tls_msg, sizeof tls_msg, fmt, ap);
  if (!tls_is_worker) bp_plugin_report(host, status, "%s", tls_msg);
  return status;
}
