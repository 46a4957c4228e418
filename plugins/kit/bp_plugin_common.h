/* backplane: helpers shared by plugins (not part of the ABI).
 *
 * - dtype facts (sizes, bits, categories, names) from dtypes.def;
 * - f16 / bf16 / small float (fp8, fp6, fp4, e8m0) conversions, round to
 *   nearest even;
 * - error reporting through the host's report callback;
 * - N-d strided iteration: dimension collapsing and a row cursor.
 *
 * Everything here is thread-safe (no global state) and allocation-free.
 */
#ifndef BACKPLANE_PLUGIN_COMMON_H_
#define BACKPLANE_PLUGIN_COMMON_H_

#include <stdarg.h>
#include <stdint.h>
#include <string.h>

#include "backplane/plugin.h"
#include "bp_checked.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ------------------------------------------------------------------------ */
/* dtypes                                                                    */
/* ------------------------------------------------------------------------ */
/* Facts from include/backplane/dtypes.def, with the core's contract
 * (backplane.h): every uint32_t is accepted; BP_DTYPE_INVALID and unknown
 * values give size 0, bits 0, category BP_DTYPE_CATEGORY_INVALID and the
 * name "invalid" (never NULL). */
static inline uint32_t bp_dtype_size(uint32_t dtype) {
  switch (dtype) {
#define BP_DTYPE_X(e, v, n, bytes, bits, cat) case BP_DTYPE_##e: return bytes;
#include "backplane/dtypes.def"
    default: return 0;
  }
}
static inline uint32_t bp_dtype_bits(uint32_t dtype) {
  switch (dtype) {
#define BP_DTYPE_X(e, v, n, bytes, bits, cat) case BP_DTYPE_##e: return bits;
#include "backplane/dtypes.def"
    default: return 0;
  }
}
static inline uint32_t bp_dtype_category(uint32_t dtype) {
  switch (dtype) {
#define BP_DTYPE_X(e, v, n, bytes, bits, cat) case BP_DTYPE_##e: return BP_DTYPE_CATEGORY_##cat;
#include "backplane/dtypes.def"
    default: return BP_DTYPE_CATEGORY_INVALID;
  }
}
const char* bp_dtype_name(uint32_t dtype);

static inline int bp_dtype_is_valid(uint32_t d) {
  return bp_dtype_category(d) != BP_DTYPE_CATEGORY_INVALID;
}
/* f16 bf16 f32 f64 */
static inline int bp_dtype_is_float(uint32_t d) {
  return bp_dtype_category(d) == BP_DTYPE_CATEGORY_FLOAT;
}
/* Every 8-bit float format (e4m3fn, e5m2, e4m3fnuz, e5m2fnuz). */
static inline int bp_dtype_is_fp8(uint32_t d) { return bp_dtype_category(d) == BP_DTYPE_CATEGORY_FP8; }
/* The integer dtypes ops compute in: i8 u8 i16 i32 i64. */
static inline int bp_dtype_is_int(uint32_t d) {
  return d == BP_DTYPE_I8 || d == BP_DTYPE_U8 || d == BP_DTYPE_I16 || d == BP_DTYPE_I32 ||
         d == BP_DTYPE_I64;
}

/* The product form PyTorch's CPU pow.Tensor_Scalar takes for this call:
 * -2 (1 / (x * x)) or 3 (x * x * x) in f32, f64 and bf16; 0 for IEEE pow
 * (f16, integers, a tensor exponent, any other exponent). The two differ
 * from pow where x * x overflows (1e20^-2 is 0, not a subnormal).
 * docs/semantics.md, pow. */
static inline int bp_pow_product_form(const bp_op_call_t* call) {
  const bp_binary_attrs_t* a = (const bp_binary_attrs_t*)call->attrs;
  uint32_t cd = call->compute_dtype;
  if (call->op_id != BP_OP_pow || a == NULL || a->flags != BP_BINARY_OTHER_IS_SCALAR ||
      !bp_dtype_is_float(cd) || cd == BP_DTYPE_F16)
    return 0;
  double e = a->scalar.kind == BP_SCALAR_FLOAT ? a->scalar.v.f
             : a->scalar.kind == BP_SCALAR_INT ? (double)a->scalar.v.i : 0.0;
  return e == -2.0 ? -2 : e == 3.0 ? 3 : 0;
}

/* ------------------------------------------------------------------------ */
/* Small floating formats. Encoders round to nearest even.                  */
/* ------------------------------------------------------------------------ */
static inline uint32_t bp__f32_bits(float f) { uint32_t u; memcpy(&u, &f, 4); return u; }
static inline float bp__bits_f32(uint32_t u) { float f; memcpy(&f, &u, 4); return f; }

static inline float bp_f16_to_f32(uint16_t h) {
  uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
  uint32_t exp = (h >> 10) & 0x1fu, man = h & 0x3ffu;
  if (exp == 0x1f) return bp__bits_f32(sign | 0x7f800000u | (man << 13));
  if (exp == 0) {
    float f = (float)man * 0x1p-24f; /* exact: subnormal or zero */
    return sign ? -f : f;
  }
  return bp__bits_f32(sign | ((exp + 112u) << 23) | (man << 13));
}

/* Equivalent to the F16C vcvtps2ph instruction with round-to-nearest-even. */
static inline uint16_t bp_f32_to_f16(float f) {
  uint32_t x = bp__f32_bits(f);
  uint16_t sign = (uint16_t)((x >> 16) & 0x8000u);
  x &= 0x7fffffffu;
  if (x >= 0x7f800000u) return (uint16_t)(sign | 0x7c00u | (x > 0x7f800000u ? 0x200u : 0u));
  if (x >= 0x477ff000u) return (uint16_t)(sign | 0x7c00u); /* >= 65520 rounds to inf */
  if (x < 0x38800000u) { /* below 2^-14: subnormal half; the scaling is exact */
    float a = bp__bits_f32(x) * 0x1p24f;
    uint32_t q = (uint32_t)a;
    float rem = a - (float)q;
    if (rem > 0.5f || (rem == 0.5f && (q & 1u))) q++;
    return (uint16_t)(sign | q);
  }
  x += 0xc8000fffu + ((x >> 13) & 1u);
  return (uint16_t)(sign | (x >> 13));
}

static inline float bp_bf16_to_f32(uint16_t b) { return bp__bits_f32((uint32_t)b << 16); }
static inline uint16_t bp_f32_to_bf16(float f) {
  uint32_t x = bp__f32_bits(f);
  if ((x & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((x >> 16) | 0x40u); /* quiet NaN */
  x += 0x7fffu + ((x >> 16) & 1u);
  return (uint16_t)(x >> 16);
}

float bp_f8e4m3fn_to_f32(uint8_t v);
static inline float bp_f8e5m2_to_f32(uint8_t v) { return bp_f16_to_f32((uint16_t)(v << 8)); }

/* From double, single rounding (no double rounding through f32). e4m3fn has
 * no infinity: overflow and inf give NaN; e5m2 overflows to inf. */
uint16_t bp_f64_to_f16(double v);
uint16_t bp_f64_to_bf16(double v);
uint8_t bp_f64_to_f8e4m3fn(double v);
uint8_t bp_f64_to_f8e5m2(double v);

/* Every small float format by dtype: the fp8 formats, float8_e8m0fnu,
 * float6_e2m3fn, float6_e3m2fn and float4_e2m1fn (encodings in the low bits
 * of `code`). Decoding is exact. Encoding rounds to nearest, ties to even;
 * what has no encoding (docs/semantics.md, "Element types"):
 *  - e4m3fn: overflow and +-inf give NaN (sign kept); e5m2: +-inf;
 *  - e4m3fnuz, e5m2fnuz: overflow, +-inf and NaN give the one NaN (0x80);
 *    zero and negative underflow give +0 (there is no -0);
 *  - e8m0fnu (powers of two 2^-127..2^127, no sign, no zero): NaN, +-inf,
 *    negative values and overflow give NaN (0xff); zero and anything below
 *    2^-127 give 2^-127 (0x00);
 *  - fp6, fp4 (no infinity, no NaN): overflow and +-inf saturate to +-max;
 *    NaN gives +0.
 * bp_small_float_to_f64 returns NaN and bp_f64_to_small_float 0 for a dtype
 * that is not a small float format. */
int bp_dtype_is_small_float(uint32_t dtype);
double bp_small_float_to_f64(uint32_t dtype, uint32_t code);
uint32_t bp_f64_to_small_float(uint32_t dtype, double v);

/* ------------------------------------------------------------------------ */
/* Errors                                                                    */
/* ------------------------------------------------------------------------ */
/* Debug-only checks (docs/ABI.md, "Trust boundary"): the core validates
 * every call before a plugin sees it, so checks that would only protect the
 * plugin if the core were bypassed go in BP_PLUGIN_DEBUG_CHECK(expr). It
 * evaluates `expr` (a bp_status_t) and returns it from the calling function
 * when it is not BP_OK, in builds with BP_PLUGIN_CHECKS defined or without
 * NDEBUG; elsewhere it compiles to nothing (`expr` is still type-checked). */
#if defined(BP_PLUGIN_CHECKS) || !defined(NDEBUG)
#define BP_PLUGIN_CHECKS_ENABLED 1
#else
#define BP_PLUGIN_CHECKS_ENABLED 0
#endif
#define BP_PLUGIN_DEBUG_CHECK(expr)               \
  do {                                            \
    if (BP_PLUGIN_CHECKS_ENABLED) {               \
      bp_status_t bp_check_status_ = (expr);      \
      if (bp_check_status_ != BP_OK) return bp_check_status_; \
    }                                             \
  } while (0)

/* Formats the message, passes it to host->report (when the host provides
 * one) and returns `status`. `host` may be NULL. */
bp_status_t bp_plugin_report(const bp_host_services_t* host, bp_status_t status, const char* fmt,
                             ...) __attribute__((format(printf, 3, 4)));

/* Logs through host->log when the host has it and enables `level`. */
void bp_plugin_logv(const bp_host_services_t* host, int32_t level, const char* fmt, va_list ap);
void bp_plugin_log(const bp_host_services_t* host, int32_t level, const char* fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Settings from environment variables and BACKPLANE_<NAME>_OPTIONS: a value
 * that is set but malformed is never mapped silently. `name` names the
 * setting in the warning ("BP_CPU_DEVICES", "options devices"); `text` is
 * its value, NULL or "" when unset (then *out = dflt, no warning).
 * bp_plugin_parse_uint takes a whole decimal number in [min, max]; a number
 * above max becomes max, anything else (sign, junk, empty digits, below
 * min) becomes dflt, each with one warning through host->log naming the
 * setting, the value and what is used instead. Returns 1 when `text` was
 * used as given, else 0. bp_plugin_parse_flag takes "0" or "1". */
int bp_plugin_parse_uint(const bp_host_services_t* host, const char* name, const char* text,
                         uint64_t min, uint64_t max, uint64_t dflt, uint64_t* out);
int bp_plugin_parse_flag(const bp_host_services_t* host, const char* name, const char* text,
                         int dflt, int* out);

/* The calling thread's error slot, one per plugin library (each links its
 * own copy of this static library): bp_plugin_error formats the message
 * into it and returns `status`; on threads that answer a plugin call it
 * also goes to host->report, on stream worker threads (marked with
 * bp_plugin_set_worker_thread) it is only kept, for the stream's sticky
 * error. */
#define BP_PLUGIN_MSG_CAP 256
bp_status_t bp_plugin_errorv(const bp_host_services_t* host, bp_status_t status, const char* fmt,
                             va_list ap);
const char* bp_plugin_last_error(void);
/* Empties the calling thread's last message (before a call whose own
 * message, if any, is wanted). */
void bp_plugin_clear_error(void);
void bp_plugin_set_worker_thread(int is_worker);
/* Formats into `buf` (always NUL-terminated); returns `status`. */
bp_status_t bp_plugin_format(char* buf, size_t cap, bp_status_t status, const char* fmt, ...)
    __attribute__((format(printf, 4, 5)));

/* Checks one descriptor a launch received: struct_size, dtype, rank, sizes
 * and that every element lies inside [0, buffer_bytes) (when buffer_bytes is
 * not UINT64_MAX). Writes a message naming `what` on failure. */
bp_status_t bp_plugin_check_desc(const bp_tensor_desc_t* d, uint64_t buffer_bytes,
                                 const char* what, char* msg, size_t msg_cap);

/* Number of elements; 0 when any size is 0. */
static inline int64_t bp_desc_numel(const bp_tensor_desc_t* d) {
  int64_t n = 1;
  for (uint32_t i = 0; i < d->rank; i++) n *= d->sizes[i];
  return n;
}

/* ------------------------------------------------------------------------ */
/* N-d strided iteration                                                     */
/* ------------------------------------------------------------------------ */
#define BP_ND_MAX_OPS 4

/* A shared iteration space for up to BP_ND_MAX_OPS operands. Dims are
 * ordered outermost first; strides are in elements and may be 0 or
 * negative. */
typedef struct bp_nd_layout {
  int ndim;
  int nops;
  int64_t sizes[BP_MAX_RANK];
  int64_t strides[BP_ND_MAX_OPS][BP_MAX_RANK];
} bp_nd_layout_t;

/* Drops size-1 dims and merges neighbours that are contiguous for every
 * operand (stride[d] == stride[d+1] * size[d+1]). Leaves at least one dim. */
void bp_nd_collapse(bp_nd_layout_t* l);

/* Position inside a layout: index per dim and element offset per operand. */
typedef struct bp_nd_cursor {
  int64_t idx[BP_MAX_RANK];
  int64_t off[BP_ND_MAX_OPS];
} bp_nd_cursor_t;

/* Places the cursor at linear (row-major) element `pos`. */
void bp_nd_cursor_init(bp_nd_cursor_t* c, const bp_nd_layout_t* l, int64_t pos);

/* Elements left in the current innermost row. */
static inline int64_t bp_nd_row_left(const bp_nd_cursor_t* c, const bp_nd_layout_t* l) {
  return l->sizes[l->ndim - 1] - c->idx[l->ndim - 1];
}

/* Moves `count` elements forward (count <= bp_nd_row_left). */
static inline void bp_nd_cursor_advance(bp_nd_cursor_t* c, const bp_nd_layout_t* l, int64_t count) {
  int d = l->ndim - 1;
  for (int k = 0; k < l->nops; k++) c->off[k] += count * l->strides[k][d];
  c->idx[d] += count;
  while (d > 0 && c->idx[d] == l->sizes[d]) {
    for (int k = 0; k < l->nops; k++) c->off[k] -= l->sizes[d] * l->strides[k][d];
    c->idx[d] = 0;
    d--;
    c->idx[d]++;
    for (int k = 0; k < l->nops; k++) c->off[k] += l->strides[k][d];
  }
}

#ifdef __cplusplus
}
#endif
#endif /* BACKPLANE_PLUGIN_COMMON_H_ */
