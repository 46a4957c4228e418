/* backplane CPU plugin: elementwise ops (unary, binary, where, clamp) and the
 * copy-like ops (to_copy, copy, clone, cat, fill, arange).
 *
 * Kernels are generated from the op lists below, one list per kernel-type
 * class (floating, integer, bool), instantiated for every kernel type of the
 * class. Each kernel is a plain loop over contiguous arrays the compiler
 * vectorizes. One driver runs them over any layout: it collapses the
 * iteration space, walks it in rows, hands contiguous same-dtype operands to
 * the kernel directly and stages the others through small converting
 * buffers (load -> kernel -> store). Rows are split over the thread pool.
 */
#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cpu_kernels.h"
#include "cpu_vmath.h"

#include <tgmath.h> /* type-generic math: exp(x) is expf for float x */


/* Kernel ids: op ids, plus variants selected by attributes. */
enum {
#define BP_OP(id, name, ...) CPU_K_##name = id,
#include "backplane/ops.def"
#undef BP_OP
  CPU_K_gelu_tanh = BP_OP_ID_END_,
  CPU_K_div_trunc,
  CPU_K_div_floor,
  CPU_K_pow_sq_recip, /* pow.Tensor_Scalar(x, -2): 1 / (x * x), as PyTorch */
  CPU_K_pow_cube,     /* pow.Tensor_Scalar(x, 3): x * x * x, as PyTorch */
  CPU_K_COUNT
};

/* ---- scalar helpers -------------------------------------------------- */
/* Python-style floor division and remainder, as PyTorch's CPU kernels. */
#define CPU__FLOAT_HELPERS(T, SFX)                                              \
  static inline T div_floor_##SFX(T a, T b) {                                   \
    if (b == 0) return a / b;                                                   \
    T mod = fmod(a, b);                                                         \
    T div = (a - mod) / b;                                                      \
    if (mod != 0 && ((b < 0) != (mod < 0))) div -= 1;                           \
    if (div == 0) return copysign((T)0, a / b);                                 \
    T fl = floor(div);                                                          \
    if (div - fl > (T)0.5) fl += 1;                                             \
    return fl;                                                                  \
  }                                                                             \
  static inline T remainder_##SFX(T a, T b) {                                   \
    T m = fmod(a, b);                                                           \
    if (m != 0 && ((b < 0) != (m < 0))) m += b;                                 \
    return m;                                                                   \
  }
CPU__FLOAT_HELPERS(float, f32)
CPU__FLOAT_HELPERS(double, f64)
#define CPU_GF(fn, x, y) _Generic((x), float: fn##_f32, default: fn##_f64)(x, y)

/* Integer helpers in int64 (results wrap to the kernel type). Division by
 * zero is undefined in the semantics; it gives 0 here rather than a trap,
 * and INT_MIN / -1 wraps. */
static inline int64_t idiv_trunc(int64_t a, int64_t b) {
  if (b == 0) return 0;
  if (b == -1) return (int64_t)(0 - (uint64_t)a);
  return a / b;
}
static inline int64_t idiv_floor(int64_t a, int64_t b) {
  if (b == 0) return 0;
  if (b == -1) return (int64_t)(0 - (uint64_t)a);
  int64_t q = a / b;
  if (a % b != 0 && ((a < 0) != (b < 0))) q--;
  return q;
}
static inline int64_t ifmod(int64_t a, int64_t b) { return (b == 0 || b == -1) ? 0 : a % b; }
static inline int64_t iremainder(int64_t a, int64_t b) {
  if (b == 0 || b == -1) return 0;
  int64_t r = a % b;
  if (r != 0 && ((r < 0) != (b < 0))) r += b;
  return r;
}
static inline int64_t ipow(int64_t base, int64_t e) {
  if (e < 0) return base == 1 ? 1 : base == -1 ? ((e & 1) ? -1 : 1) : 0;
  uint64_t r = 1, b = (uint64_t)base;
  while (e) {
    if (e & 1) r *= b;
    b *= b;
    e >>= 1;
  }
  return (int64_t)r;
}

/* NaN-propagating bounds: a NaN value or a NaN bound gives NaN. */
#define CPU_FMAX(a, b) (((a) < (b) || isnan(b)) ? (b) : (a))
#define CPU_FMIN(a, b) (((a) > (b) || isnan(b)) ? (b) : (a))
#define CPU_IMAX(a, b) ((a) < (b) ? (b) : (a))
#define CPU_IMIN(a, b) ((a) > (b) ? (b) : (a))
/* Optional bounds (clamp_tensor): `has` is 0 when the bound is absent. */
#define CPU_FMAXO(a, b, has) (((has) && ((a) < (b) || isnan(b))) ? (b) : (a))
#define CPU_FMINO(a, b, has) (((has) && ((a) > (b) || isnan(b))) ? (b) : (a))
#define CPU_IMAXO(a, b, has) (((has) && (a) < (b)) ? (b) : (a))
#define CPU_IMINO(a, b, has) (((has) && (a) > (b)) ? (b) : (a))
#define PF(k) ((T)p->f[k])
#define PI(k) ((T)p->i[k])

/* ---- op lists ---------------------------------------------------------
 * X(K, C type, kernel id, result type, expression). Unary expressions use
 * x; binary x, y; ternary x, y, z. The result type is T or uint8_t (bool).
 */
#define CPU_UNARY_FLOAT(X, K, C)                                                  \
  X(K, C, abs, T, fabs(x)) X(K, C, acos, T, acos(x)) X(K, C, acosh, T, acosh(x))  \
  X(K, C, asin, T, asin(x)) X(K, C, asinh, T, asinh(x)) X(K, C, atan, T, atan(x)) \
  X(K, C, atanh, T, atanh(x)) X(K, C, ceil, T, ceil(x)) X(K, C, cos, T, cos(x))   \
  X(K, C, cosh, T, cosh(x)) X(K, C, erf, T, erf(x)) X(K, C, exp, T, exp(x))       \
  X(K, C, expm1, T, expm1(x)) X(K, C, floor, T, floor(x)) X(K, C, log, T, log(x)) \
  X(K, C, log10, T, log10(x)) X(K, C, log1p, T, log1p(x)) X(K, C, log2, T, log2(x)) \
  X(K, C, neg, T, -x) X(K, C, reciprocal, T, (T)1 / x)                            \
  X(K, C, relu, T, x < 0 ? (T)0 : x) X(K, C, round, T, nearbyint(x))              \
  X(K, C, rsqrt, T, (T)1 / sqrt(x)) X(K, C, sigmoid, T, (T)1 / ((T)1 + exp(-x)))  \
  X(K, C, sign, T, (T)((x > 0) - (x < 0))) X(K, C, sin, T, sin(x))                \
  X(K, C, sinh, T, sinh(x)) X(K, C, sqrt, T, sqrt(x)) X(K, C, tan, T, tan(x))     \
  X(K, C, tanh, T, tanh(x)) X(K, C, trunc, T, trunc(x))                           \
  X(K, C, logical_not, uint8_t, x == 0) X(K, C, isinf, uint8_t, isinf(x) != 0)    \
  X(K, C, isnan, uint8_t, isnan(x) != 0)                                          \
  X(K, C, clamp, T, CPU_FMIN(CPU_FMAX(x, PF(0)), PF(1)))                          \
  X(K, C, elu, T, x > 0 ? x * PF(1) : expm1(x * PF(2)) * PF(0) * PF(1))           \
  X(K, C, gelu, T, CPU_ACT_GELU(T, x)) X(K, C, gelu_tanh, T, CPU_ACT_GELU_TANH(T, x)) \
  X(K, C, hardtanh, T, CPU_FMIN(CPU_FMAX(x, PF(0)), PF(1)))                       \
  X(K, C, leaky_relu, T, x > 0 ? x : x * PF(0)) X(K, C, silu, T, CPU_ACT_SILU(T, x))      \
  X(K, C, hardsigmoid, T, CPU_FMIN(CPU_FMAX(x + (T)3, (T)0), (T)6) / (T)6)        \
  X(K, C, hardswish, T, x * CPU_FMIN(CPU_FMAX(x + (T)3, (T)0), (T)6) / (T)6)      \
  X(K, C, softplus, T, x * PF(0) > PF(1) ? x : log1p(exp(x * PF(0))) / PF(0))     \
  X(K, C, mish, T, x * tanh(x > (T)20 ? x : log1p(exp(x))))

#define CPU_UNARY_INT(X, K, C)                                                    \
  X(K, C, abs, T, (T)(x < 0 ? -x : x)) X(K, C, ceil, T, x) X(K, C, floor, T, x)   \
  X(K, C, round, T, x) X(K, C, trunc, T, x) X(K, C, neg, T, (T)-x)                \
  X(K, C, relu, T, x < 0 ? (T)0 : x) X(K, C, sign, T, (T)((x > 0) - (x < 0)))     \
  X(K, C, bitwise_not, T, (T)~x) X(K, C, logical_not, uint8_t, x == 0)            \
  X(K, C, isinf, uint8_t, 0) X(K, C, isnan, uint8_t, 0)                           \
  X(K, C, clamp, T, (T)CPU_IMIN(CPU_IMAX((int64_t)x, p->i[0]), p->i[1]))          \
  X(K, C, hardtanh, T, (T)CPU_IMIN(CPU_IMAX((int64_t)x, p->i[0]), p->i[1]))

#define CPU_UNARY_BOOL(X, K, C)                                                   \
  X(K, C, abs, T, x) X(K, C, ceil, T, x) X(K, C, floor, T, x) X(K, C, round, T, x) \
  X(K, C, trunc, T, x) X(K, C, relu, T, x) X(K, C, sign, T, x)                    \
  X(K, C, bitwise_not, T, (T)!x) X(K, C, logical_not, uint8_t, !x)                \
  X(K, C, isinf, uint8_t, 0) X(K, C, isnan, uint8_t, 0)

/* Shared by every kernel type: logical ops and comparisons. */
#define CPU_BINARY_ANY(X, K, C)                                                   \
  X(K, C, logical_and, uint8_t, (x != 0) & (y != 0))                              \
  X(K, C, logical_or, uint8_t, (x != 0) | (y != 0))                               \
  X(K, C, logical_xor, uint8_t, (x != 0) != (y != 0))                             \
  X(K, C, eq, uint8_t, x == y) X(K, C, ne, uint8_t, x != y) X(K, C, lt, uint8_t, x < y) \
  X(K, C, le, uint8_t, x <= y) X(K, C, gt, uint8_t, x > y) X(K, C, ge, uint8_t, x >= y)

#define CPU_BINARY_FLOAT(X, K, C)                                                 \
  CPU_BINARY_ANY(X, K, C)                                                         \
  X(K, C, add, T, x + PF(0) * y) X(K, C, sub, T, x - PF(0) * y) X(K, C, mul, T, x * y) \
  X(K, C, div, T, x / y) X(K, C, div_trunc, T, trunc(x / y))                      \
  X(K, C, div_floor, T, CPU_GF(div_floor, x, y)) X(K, C, atan2, T, atan2(x, y))   \
  X(K, C, fmod, T, fmod(x, y)) X(K, C, remainder, T, CPU_GF(remainder, x, y))     \
  X(K, C, pow, T, pow(x, y)) X(K, C, pow_sq_recip, T, ((void)y, (T)1 / (x * x)))             \
  X(K, C, pow_cube, T, ((void)y, x * x * x))                                               \
  X(K, C, maximum, T, isnan(x) ? x : (isnan(y) ? y : (x > y ? x : y)))            \
  X(K, C, minimum, T, isnan(x) ? x : (isnan(y) ? y : (x < y ? x : y)))

#define CPU_BINARY_INT(X, K, C)                                                   \
  CPU_BINARY_ANY(X, K, C)                                                         \
  X(K, C, add, T, (T)(x + PI(0) * y)) X(K, C, sub, T, (T)(x - PI(0) * y))         \
  X(K, C, mul, T, (T)(x * y)) X(K, C, div_trunc, T, (T)idiv_trunc(x, y))          \
  X(K, C, div_floor, T, (T)idiv_floor(x, y)) X(K, C, fmod, T, (T)ifmod(x, y))     \
  X(K, C, remainder, T, (T)iremainder(x, y)) X(K, C, pow, T, (T)ipow(x, y))       \
  X(K, C, maximum, T, x > y ? x : y) X(K, C, minimum, T, x < y ? x : y)           \
  X(K, C, bitwise_and, T, (T)(x & y)) X(K, C, bitwise_or, T, (T)(x | y))          \
  X(K, C, bitwise_xor, T, (T)(x ^ y))

#define CPU_BINARY_BOOL(X, K, C)                                                  \
  CPU_BINARY_ANY(X, K, C)                                                         \
  X(K, C, add, T, (T)(x | y)) X(K, C, mul, T, (T)(x & y))                         \
  X(K, C, maximum, T, (T)(x | y)) X(K, C, minimum, T, (T)(x & y))                 \
  X(K, C, bitwise_and, T, (T)(x & y)) X(K, C, bitwise_or, T, (T)(x | y))          \
  X(K, C, bitwise_xor, T, (T)(x ^ y))

/* addcmul rounds once from opmath (f32 via double, as x + v*y*z with one
 * rounding is what the reference bounds); lerp is PyTorch's two-sided form
 * (exact at weight 0 and 1). */
#define CPU_TERNARY_ANY(X, K, C) X(K, C, where, T, x != 0 ? y : z)
#define CPU_TERNARY_FLOAT(X, K, C)                                                \
  CPU_TERNARY_ANY(X, K, C)                                                        \
  X(K, C, clamp_tensor, T, CPU_FMINO(CPU_FMAXO(x, y, p->i[0]), z, p->i[1]))       \
  X(K, C, addcmul, T, (T)((double)x + p->f[0] * (double)y * (double)z))           \
  X(K, C, lerp, T, fabs(z) < (T)0.5 ? x + z * (y - x) : y - (y - x) * ((T)1 - z))
#define CPU_TERNARY_INT(X, K, C)                                                  \
  CPU_TERNARY_ANY(X, K, C)                                                        \
  X(K, C, clamp_tensor, T, CPU_IMINO(CPU_IMAXO(x, y, p->i[0]), z, p->i[1]))       \
  X(K, C, addcmul, T, (T)((uint64_t)x + (uint64_t)p->i[0] * (uint64_t)y * (uint64_t)z))
#define CPU_TERNARY_BOOL(X, K, C) CPU_TERNARY_ANY(X, K, C)

/* ---- kernel generation ------------------------------------------------ */
/* One kernel k_<name>_<K> over n dense elements of C. IN declares the
 * operand pointers a, b, c; LOAD reads element i into x, y, z. */
#define CPU__KERNEL(K, C, name, R, expr, IN, LOAD)                                  \
  static void k_##name##_##K(void* restrict out_, const void* const* in, int64_t n, \
                             const cpu_kparams_t* p) {                           \
    typedef C T;                                                                 \
    R* restrict o = (R*)out_;                                                    \
    IN                                                                           \
    (void)p;                                                                     \
    for (int64_t i = 0; i < n; i++) {                                            \
      LOAD                                                                       \
      o[i] = (R)(expr);                                                          \
    }                                                                            \
  }
#define CPU__IN1 const T* restrict a = (const T*)in[0];
#define CPU__IN2 CPU__IN1 const T* restrict b = (const T*)in[1];
#define CPU__IN3 CPU__IN2 const T* restrict c = (const T*)in[2];
#define CPU__LOAD1 const T x = a[i]; (void)x;
#define CPU__LOAD2 CPU__LOAD1 const T y = b[i];
#define CPU__LOAD3 CPU__LOAD2 const T z = c[i];
#define CPU__UN(K, C, name, R, expr) CPU__KERNEL(K, C, name, R, expr, CPU__IN1, CPU__LOAD1)
#define CPU__BIN(K, C, name, R, expr) CPU__KERNEL(K, C, name, R, expr, CPU__IN2, CPU__LOAD2)
#define CPU__TER(K, C, name, R, expr) CPU__KERNEL(K, C, name, R, expr, CPU__IN3, CPU__LOAD3)
#define CPU__ENTRY(K, C, name, R, expr) [CPU_K_##name][CPU_KT_##K] = k_##name##_##K,

#define CPU_FLOAT_KT(X) X(F32, float) X(F64, double)
#define CPU_INT_KT(X) X(I8, int8_t) X(U8, uint8_t) X(I16, int16_t) X(I32, int32_t) X(I64, int64_t)
#define CPU_BOOL_KT(X) X(BOOL, uint8_t)

#define CPU__GEN_FLOAT(K, C) CPU_UNARY_FLOAT(CPU__UN, K, C) CPU_BINARY_FLOAT(CPU__BIN, K, C) CPU_TERNARY_FLOAT(CPU__TER, K, C)
#define CPU__GEN_INT(K, C) CPU_UNARY_INT(CPU__UN, K, C) CPU_BINARY_INT(CPU__BIN, K, C) CPU_TERNARY_INT(CPU__TER, K, C)
#define CPU__GEN_BOOL(K, C) CPU_UNARY_BOOL(CPU__UN, K, C) CPU_BINARY_BOOL(CPU__BIN, K, C) CPU_TERNARY_BOOL(CPU__TER, K, C)
CPU_FLOAT_KT(CPU__GEN_FLOAT)
CPU_INT_KT(CPU__GEN_INT)
CPU_BOOL_KT(CPU__GEN_BOOL)

#define CPU__TAB_FLOAT(K, C) CPU_UNARY_FLOAT(CPU__ENTRY, K, C) CPU_BINARY_FLOAT(CPU__ENTRY, K, C) CPU_TERNARY_FLOAT(CPU__ENTRY, K, C)
#define CPU__TAB_INT(K, C) CPU_UNARY_INT(CPU__ENTRY, K, C) CPU_BINARY_INT(CPU__ENTRY, K, C) CPU_TERNARY_INT(CPU__ENTRY, K, C)
#define CPU__TAB_BOOL(K, C) CPU_UNARY_BOOL(CPU__ENTRY, K, C) CPU_BINARY_BOOL(CPU__ENTRY, K, C) CPU_TERNARY_BOOL(CPU__ENTRY, K, C)
static const cpu_ew_fn k_kernels[CPU_K_COUNT][CPU_KT_COUNT] = {
    CPU_FLOAT_KT(CPU__TAB_FLOAT) CPU_INT_KT(CPU__TAB_INT) CPU_BOOL_KT(CPU__TAB_BOOL)};

/* Kernels whose result is bool (uint8_t 0/1) rather than the kernel type. */
static int kernel_result_is_bool(int kid) {
  switch (kid) {
    case CPU_K_logical_not: case CPU_K_isinf: case CPU_K_isnan: case CPU_K_logical_and:
    case CPU_K_logical_or: case CPU_K_logical_xor: case CPU_K_eq: case CPU_K_ne:
    case CPU_K_lt: case CPU_K_le: case CPU_K_gt: case CPU_K_ge:
      return 1;
    default:
      return 0;
  }
}

/* ---- the driver ------------------------------------------------------- */
#define EW_GRAIN 32768

typedef struct ew_job {
  cpu_ew_fn fn; /* NULL: a cast (the loaded input is the result) */
  cpu_kparams_t params;
  int kt, rkt;  /* kernel type of inputs / of the result */
  int nin;
  int copy_bytes; /* same dtype in and out, no kernel: move bytes */
  bp_nd_layout_t L; /* operand 0 = output, 1..nin = inputs */
  unsigned char* base[BP_ND_MAX_OPS];
  uint32_t dtype[BP_ND_MAX_OPS];
  uint32_t esize[BP_ND_MAX_OPS];
  _Alignas(8) unsigned char konst[BP_ND_MAX_OPS][CPU_KT_MAX_BYTES]; /* scalar operands */
} ew_job_t;

static void copy_strided(unsigned char* d, int64_t ds, const unsigned char* s, int64_t ss,
                         int64_t n, uint32_t es) {
  if (ds == 1 && ss == 1) {
    memcpy(d, s, (size_t)(n * es));
    return;
  }
  switch (es) {
#define CPU__CP(T)                                                           \
  for (int64_t i = 0; i < n; i++) ((T*)d)[i * ds] = ((const T*)s)[i * ss];  \
  break;
    case 1: CPU__CP(uint8_t)
    case 2: CPU__CP(uint16_t)
    case 4: CPU__CP(uint32_t)
    case 8: CPU__CP(uint64_t)
#undef CPU__CP
    default:
      for (int64_t i = 0; i < n; i++) memcpy(d + i * ds * es, s + i * ss * es, es);
  }
}

static void ew_row(const ew_job_t* j, const bp_nd_cursor_t* c, int64_t n) {
  const int last = j->L.ndim - 1;
  unsigned char* ptr[BP_ND_MAX_OPS];
  int64_t st[BP_ND_MAX_OPS];
  int direct[BP_ND_MAX_OPS];
  int all_direct = 1;
  for (int k = 0; k <= j->nin; k++) {
    ptr[k] = j->base[k] + c->off[k] * (int64_t)j->esize[k];
    st[k] = j->L.strides[k][last];
  }
  if (j->copy_bytes) {
    copy_strided(ptr[0], st[0], ptr[1], st[1], n, j->esize[0]);
    return;
  }
  for (int k = 1; k <= j->nin; k++) {
    direct[k] = j->dtype[k] == cpu_kt_dtype[j->kt] && st[k] == 1;
    all_direct &= direct[k];
  }
  direct[0] = j->fn && j->dtype[0] == cpu_kt_dtype[j->rkt] && st[0] == 1;
  all_direct &= direct[0];
  if (all_direct) { /* the fast path: one vectorized call over the row */
    const void* in[3] = {ptr[1], j->nin > 1 ? ptr[2] : NULL, j->nin > 2 ? ptr[3] : NULL};
    j->fn(ptr[0], in, n, &j->params);
    return;
  }
  if (!j->fn && st[0] == 1 && j->dtype[0] == cpu_kt_dtype[j->kt]) {
    /* a cast into the kernel type's own dtype: convert straight into the output */
    cpu_load[j->kt](ptr[0], ptr[1], st[1], n, j->dtype[1]);
    return;
  }
  _Alignas(64) unsigned char buf[BP_ND_MAX_OPS][CPU_BLOCK * CPU_KT_MAX_BYTES];
  for (int64_t o = 0; o < n; o += CPU_BLOCK) {
    int64_t cnt = n - o < CPU_BLOCK ? n - o : CPU_BLOCK;
    const void* in[3] = {NULL, NULL, NULL};
    for (int k = 1; k <= j->nin; k++) {
      if (direct[k]) {
        in[k - 1] = ptr[k] + o * (int64_t)j->esize[k];
      } else {
        cpu_load[j->kt](buf[k], ptr[k] + o * st[k] * (int64_t)j->esize[k], st[k], cnt, j->dtype[k]);
        in[k - 1] = buf[k];
      }
    }
    unsigned char* out0 = ptr[0] + o * st[0] * (int64_t)j->esize[0];
    if (!j->fn) {
      cpu_store[j->kt](out0, st[0], in[0], cnt, j->dtype[0]);
    } else if (direct[0]) {
      j->fn(out0, in, cnt, &j->params);
    } else {
      j->fn(buf[0], in, cnt, &j->params);
      cpu_store[j->rkt](out0, st[0], buf[0], cnt, j->dtype[0]);
    }
  }
}

static void ew_range(void* ctx, int64_t begin, int64_t end) {
  const ew_job_t* j = ctx;
  bp_nd_cursor_t c;
  bp_nd_cursor_init(&c, &j->L, begin);
  for (int64_t pos = begin; pos < end;) {
    int64_t n = bp_nd_row_left(&c, &j->L);
    if (n > end - pos) n = end - pos;
    ew_row(j, &c, n);
    bp_nd_cursor_advance(&c, &j->L, n);
    pos += n;
  }
}

/* Sets up the output as operand 0. */
static void job_output(ew_job_t* j, const bp_tensor_desc_t* out) {
  j->L.ndim = (int)out->rank;
  for (uint32_t d = 0; d < out->rank; d++) {
    j->L.sizes[d] = out->sizes[d];
    j->L.strides[0][d] = out->sizes[d] == 1 ? 0 : out->strides[d];
  }
  j->base[0] = cpu_desc_ptr(out);
  j->dtype[0] = out->dtype;
  j->esize[0] = bp_dtype_size(out->dtype);
}

/* Input k (1-based) from a descriptor broadcast to the output. */
static bp_status_t job_input(ew_job_t* j, int k, const bp_tensor_desc_t* in, const bp_tensor_desc_t* out,
                             const char* what) {
  bp_status_t st = cpu_broadcast_strides(in, out->rank, out->sizes, j->L.strides[k], what);
  if (st) return st;
  j->base[k] = cpu_desc_ptr(in);
  j->dtype[k] = in->dtype;
  j->esize[k] = bp_dtype_size(in->dtype);
  return BP_OK;
}

/* Input k as a constant of kernel type kt (scalar operands, absent bounds). */
static void job_const(ew_job_t* j, int k, int kt, const bp_scalar_t* s) {
  memset(j->konst[k], 0, CPU_KT_MAX_BYTES);
  if (s) cpu_scalar_to_kt(s, kt, j->konst[k]);
  for (int d = 0; d < BP_MAX_RANK; d++) j->L.strides[k][d] = 0;
  j->base[k] = j->konst[k];
  j->dtype[k] = cpu_kt_dtype[kt];
  j->esize[k] = cpu_kt_size[kt];
}

/* Copies of transposed 2-d views (after collapsing): a row of the output
 * reads a column of the input, so both are walked in square tiles that
 * stay in L1. Parallel over tile rows. */
#define EW_TILE 32

static void transpose_rows(void* ctx, int64_t begin, int64_t end) {
  const ew_job_t* j = ctx;
  const int64_t rows = j->L.sizes[0], cols = j->L.sizes[1];
  const int64_t os0 = j->L.strides[0][0], os1 = j->L.strides[0][1];
  const int64_t is0 = j->L.strides[1][0], is1 = j->L.strides[1][1];
  const uint32_t es = j->esize[0];
  /* Each tile is read column by column (contiguous in the input) into a
   * local buffer, then written row by row (contiguous in the output). */
  _Alignas(64) unsigned char tile[EW_TILE * EW_TILE * CPU_KT_MAX_BYTES];
  for (int64_t t = begin; t < end; t++) {
    int64_t r0 = t * EW_TILE, nr = rows - r0 < EW_TILE ? rows - r0 : EW_TILE;
    for (int64_t c0 = 0; c0 < cols; c0 += EW_TILE) {
      int64_t nc = cols - c0 < EW_TILE ? cols - c0 : EW_TILE;
      for (int64_t c = 0; c < nc; c++) {
        const unsigned char* sp = j->base[1] + (r0 * is0 + (c0 + c) * is1) * (int64_t)es;
        copy_strided(tile + c * (int64_t)es, EW_TILE, sp, is0, nr, es);
      }
      for (int64_t r = 0; r < nr; r++) {
        unsigned char* d = j->base[0] + ((r0 + r) * os0 + c0 * os1) * (int64_t)es;
        memcpy(d, tile + r * EW_TILE * (int64_t)es, (size_t)(nc * (int64_t)es));
      }
    }
  }
}

/* Nonzero when a same-dtype copy is a 2-d transpose worth tiling. */
static int is_transpose_copy(const ew_job_t* j) {
  if (!j->copy_bytes || j->L.ndim != 2) return 0;
  int64_t os1 = j->L.strides[0][1], is1 = j->L.strides[1][1];
  int64_t is0 = j->L.strides[1][0];
  return os1 == 1 && (is1 > 8 || is1 < -8) && (is0 == 1 || is0 == -1) &&
         j->L.sizes[0] >= EW_TILE && j->L.sizes[1] >= EW_TILE;
}

static void job_run(ew_job_t* j) {
  j->L.nops = j->nin + 1;
  int64_t numel = 1;
  for (int d = 0; d < j->L.ndim; d++) numel *= j->L.sizes[d];
  if (numel == 0) return;
  bp_nd_collapse(&j->L);
  if (is_transpose_copy(j)) {
    int64_t tiles = (j->L.sizes[0] + EW_TILE - 1) / EW_TILE;
    cpu_parallel_for(tiles, numel < EW_GRAIN ? tiles : 1, transpose_rows, j);
    return;
  }
  if (numel < EW_GRAIN) ew_range(j, 0, numel);
  else cpu_parallel_for(numel, EW_GRAIN, ew_range, j);
}

/* ---- elementwise ops ------------------------------------------------- */
static int ew_num_inputs(uint32_t op) {
  switch (bp_op_family(op)) {
    case BP_OP_FAMILY_TERNARY_EW: return 3;
    case BP_OP_FAMILY_BINARY_EW: case BP_OP_FAMILY_COMPARE: return 2;
    default: return 1;
  }
}

/* Kernel id for a call (variants by attribute). */
static int ew_kernel_id(const bp_op_call_t* call) {
  uint32_t op = call->op_id;
  if (op == BP_OP_gelu && call->attrs &&
      ((const bp_gelu_attrs_t*)call->attrs)->approximate == BP_GELU_TANH)
    return CPU_K_gelu_tanh;
  if (op == BP_OP_div && call->attrs) {
    uint32_t m = ((const bp_binary_attrs_t*)call->attrs)->rounding_mode;
    if (m == BP_ROUNDING_TRUNC) return CPU_K_div_trunc;
    if (m == BP_ROUNDING_FLOOR) return CPU_K_div_floor;
  }
  int pf = bp_pow_product_form(call); /* PyTorch's 1 / (x * x) and x * x * x */
  if (pf) return pf == 3 ? CPU_K_pow_cube : CPU_K_pow_sq_recip;
  return (int)op;
}

/* Kernel type for a call: the compute dtype's; ops that only exist for
 * floating types fall back to the output's (integer input to sin -> f32). */
static int ew_kernel_type(const bp_op_call_t* call, int kid) {
  uint32_t cd = call->compute_dtype;
  if (!bp_dtype_is_valid(cd) || cd == BP_DTYPE_C64 || bp_dtype_is_fp8(cd)) {
    cd = BP_DTYPE_INVALID; /* not given: the first present input's dtype */
    for (uint32_t i = 0; i < call->num_inputs && !cd; i++) cd = call->inputs[i]->dtype;
    if (!cd) cd = call->outputs[0]->dtype;
  }
  int kt = cpu_kt_natural(cd);
  if (!k_kernels[kid][kt] && bp_dtype_is_float(call->outputs[0]->dtype))
    kt = cpu_kt_natural(call->outputs[0]->dtype);
  if (!k_kernels[kid][kt] && kernel_result_is_bool(kid)) kt = CPU_KT_F64;
  return kt;
}

int cpu_ew_supported(const bp_op_call_t* call, char* msg, size_t cap) {
  uint32_t op = call->op_id;
  int kid = ew_kernel_id(call);
  for (uint32_t i = 0; i < call->num_inputs; i++)
    if (bp_dtype_is_fp8(call->inputs[i]->dtype)) {
      bp_plugin_format(msg, cap, 0, "fp8 is a storage type (no arithmetic)");
      return BP_SUPPORT_DTYPE;
    }
  if (bp_dtype_is_fp8(call->outputs[0]->dtype)) {
    bp_plugin_format(msg, cap, 0, "fp8 output is a storage type (no arithmetic)");
    return BP_SUPPORT_DTYPE;
  }
  if ((uint32_t)ew_num_inputs(op) != call->num_inputs) {
    bp_plugin_format(msg, cap, 0, "expects %d inputs", ew_num_inputs(op));
    return BP_SUPPORT_ATTRIBUTE;
  }
  int kt = ew_kernel_type(call, kid);
  if (!k_kernels[kid][kt]) {
    bp_plugin_format(msg, cap, 0, "no kernel for compute dtype %s",
                     bp_dtype_name(call->compute_dtype ? call->compute_dtype : cpu_kt_dtype[kt]));
    return BP_SUPPORT_DTYPE;
  }
  return 0;
}

bp_status_t cpu_exec_elementwise(const bp_op_call_t* call) {
  uint32_t op = call->op_id;
  const bp_tensor_desc_t* out = call->outputs[0];
  ew_job_t j;
  memset(&j, 0, sizeof j);
  char msg[160];
  int reason = cpu_ew_supported(call, msg, sizeof msg);
  if (reason)
    return cpu_error(reason == BP_SUPPORT_DTYPE ? BP_UNIMPLEMENTED : BP_INVALID_ARGUMENT,
                     "cpu: %s: %s", cpu_op_name(op), msg);
  int kid = ew_kernel_id(call);
  j.kt = ew_kernel_type(call, kid);
  j.rkt = kernel_result_is_bool(kid) ? CPU_KT_BOOL : j.kt;
  j.fn = k_kernels[kid][j.kt];
  j.nin = ew_num_inputs(op);
  job_output(&j, out);
  uint32_t flags = 0;
  const bp_binary_attrs_t* ba = NULL;
  if ((j.nin == 2 || op == BP_OP_addcmul || op == BP_OP_lerp) && call->attrs) {
    ba = call->attrs;
    flags = j.nin == 2 ? ba->flags : 0;
  }
  static const char* const what[3] = {"input 0", "input 1", "input 2"};
  for (int k = 0; k < j.nin; k++) {
    const bp_tensor_desc_t* in = call->inputs[k];
    int scalar_here = (k == 0 && (flags & BP_BINARY_SELF_IS_SCALAR)) ||
                      (k == 1 && (flags & BP_BINARY_OTHER_IS_SCALAR));
    bp_status_t st;
    if (scalar_here) {
      job_const(&j, k + 1, j.kt, &ba->scalar);
    } else if (in->dtype == BP_DTYPE_INVALID && op == BP_OP_lerp && k == 2 && ba) {
      job_const(&j, k + 1, j.kt, &ba->alpha); /* lerp.Scalar: the weight */
    } else if (in->dtype == BP_DTYPE_INVALID) {
      if (op != BP_OP_clamp_tensor || k == 0)
        return cpu_error(BP_INVALID_ARGUMENT, "cpu: %s: %s is absent without a scalar flag",
                         cpu_op_name(op), what[k]);
      job_const(&j, k + 1, j.kt, NULL); /* absent bound: masked by params */
    } else if ((st = job_input(&j, k + 1, in, out, what[k]))) {
      return st;
    }
  }
  /* Attribute parameters. */
  switch (op) {
    case BP_OP_add:
    case BP_OP_sub:
      j.params.f[0] = cpu_scalar_f64(&ba->alpha, 1.0);
      j.params.i[0] = cpu_scalar_i64(&ba->alpha, 1);
      break;
    case BP_OP_clamp: {
      const bp_clamp_attrs_t* a = call->attrs;
      j.params.f[0] = cpu_scalar_f64(&a->min, -INFINITY);
      j.params.f[1] = cpu_scalar_f64(&a->max, INFINITY);
      j.params.i[0] = cpu_scalar_i64(&a->min, INT64_MIN);
      j.params.i[1] = cpu_scalar_i64(&a->max, INT64_MAX);
      break;
    }
    case BP_OP_clamp_tensor:
      j.params.i[0] = call->inputs[1]->dtype != BP_DTYPE_INVALID;
      j.params.i[1] = call->inputs[2]->dtype != BP_DTYPE_INVALID;
      break;
    case BP_OP_elu: {
      const bp_elu_attrs_t* a = call->attrs;
      j.params.f[0] = a->alpha;
      j.params.f[1] = a->scale;
      j.params.f[2] = a->input_scale;
      break;
    }
    case BP_OP_hardtanh: {
      const bp_hardtanh_attrs_t* a = call->attrs;
      j.params.f[0] = a->min_val;
      j.params.f[1] = a->max_val;
      j.params.i[0] = (int64_t)a->min_val;
      j.params.i[1] = (int64_t)a->max_val;
      break;
    }
    case BP_OP_leaky_relu:
      j.params.f[0] = ((const bp_leaky_relu_attrs_t*)call->attrs)->negative_slope;
      break;
    case BP_OP_softplus: {
      const bp_softplus_attrs_t* a = call->attrs;
      j.params.f[0] = a->beta;
      j.params.f[1] = a->threshold;
      break;
    }
    case BP_OP_addcmul:
      j.params.f[0] = cpu_scalar_f64(&ba->alpha, 1.0);
      j.params.i[0] = cpu_scalar_i64(&ba->alpha, 1);
      break;
    default:
      break;
  }
  job_run(&j);
  return BP_OK;
}

/* ---- kernels for compiled elementwise programs ---------------------- */
static cpu_ew_fn ew_isa_kernel(int kid, int kt);

int cpu_ew_program_kernel(uint32_t op, uint32_t aux, int kt, cpu_ew_fn* out_fn,
                          cpu_kparams_t* out_params, int* out_result_bool) {
  memset(out_params, 0, sizeof *out_params);
  int kid = (int)op;
  switch (op) {
    case BP_OP_gelu:
      if (aux > BP_GELU_TANH) return BP_SUPPORT_ATTRIBUTE;
      if (aux == BP_GELU_TANH) kid = CPU_K_gelu_tanh;
      break;
    case BP_OP_div:
      if (aux == BP_ROUNDING_TRUNC) kid = CPU_K_div_trunc;
      else if (aux == BP_ROUNDING_FLOOR) kid = CPU_K_div_floor;
      else if (aux != BP_ROUNDING_NONE) return BP_SUPPORT_ATTRIBUTE;
      break;
    case BP_OP_add: case BP_OP_sub: case BP_OP_addcmul: /* alpha / value 1 */
      out_params->f[0] = 1.0;
      out_params->i[0] = 1;
      break;
    case BP_OP_clamp_tensor: /* both bounds are registers */
      out_params->i[0] = out_params->i[1] = 1;
      break;
    /* Ops whose attributes (bounds, slopes) have no place in a program. */
    case BP_OP_clamp: case BP_OP_elu: case BP_OP_hardtanh: case BP_OP_leaky_relu:
    case BP_OP_softplus: case BP_OP_lerp:
      return BP_SUPPORT_ATTRIBUTE;
    default:
      if (aux != 0) return BP_SUPPORT_ATTRIBUTE;
      break;
  }
  if (!bp_op_is_elementwise(op) || kt < 0 || kt >= CPU_KT_COUNT)
    return BP_SUPPORT_OP;
  if (!k_kernels[kid][kt]) return BP_SUPPORT_DTYPE;
  cpu_ew_fn isa = ew_isa_kernel(kid, kt);
  *out_fn = isa ? isa : k_kernels[kid][kt];
  *out_result_bool = kernel_result_is_bool(kid);
  return 0;
}

/* ---- copy-like ops ----------------------------------------------------- */
static int is_fp8_or_c64(uint32_t d) { return bp_dtype_is_fp8(d) || d == BP_DTYPE_C64; }

bp_status_t cpu_cast_copy(const bp_tensor_desc_t* dst, const bp_tensor_desc_t* src) {
  ew_job_t j;
  memset(&j, 0, sizeof j);
  if (src->dtype == BP_DTYPE_C64 || dst->dtype == BP_DTYPE_C64)
    return cpu_error(BP_UNIMPLEMENTED, "cpu: c64 copies are not supported");
  j.nin = 1;
  j.kt = j.rkt = cpu_kt_natural(src->dtype);
  job_output(&j, dst);
  bp_status_t st = job_input(&j, 1, src, dst, "source");
  if (st) return st;
  j.copy_bytes = src->dtype == dst->dtype;
  job_run(&j);
  return BP_OK;
}

void cpu_desc_host(bp_tensor_desc_t* d, struct bpp_buffer_s* holder, void* ptr, uint32_t dtype,
                   uint32_t rank, const int64_t* sizes, const int64_t* strides) {
  memset(d, 0, sizeof *d);
  memset(holder, 0, sizeof *holder);
  holder->ptr = ptr;
  holder->size = UINT64_MAX;
  d->struct_size = sizeof *d;
  d->dtype = dtype;
  d->rank = rank;
  d->buffer = (bpp_buffer_t)holder;
  for (uint32_t i = 0; i < rank; i++) {
    d->sizes[i] = sizes[i];
    d->strides[i] = strides ? strides[i] : 0;
  }
  if (!strides) { /* contiguous */
    int64_t s = 1;
    for (uint32_t i = rank; i-- > 0;) {
      d->strides[i] = s;
      s *= sizes[i];
    }
  }
}

typedef struct arange_job {
  unsigned char* base;
  int64_t stride;
  uint32_t dtype;
  int exact_int;
  double f0, fstep;
  int64_t i0, istep;
} arange_job_t;

static void arange_range(void* ctx, int64_t b, int64_t e) {
  const arange_job_t* a = ctx;
  uint32_t es = bp_dtype_size(a->dtype);
  union { double f[CPU_BLOCK]; int64_t i[CPU_BLOCK]; } buf;
  for (int64_t o = b; o < e; o += CPU_BLOCK) {
    int64_t n = e - o < CPU_BLOCK ? e - o : CPU_BLOCK;
    unsigned char* dst = a->base + o * a->stride * (int64_t)es;
    if (a->exact_int) {
      for (int64_t k = 0; k < n; k++) buf.i[k] = (int64_t)((uint64_t)a->i0 + (uint64_t)(o + k) * (uint64_t)a->istep);
      cpu_store[CPU_KT_I64](dst, a->stride, buf.i, n, a->dtype);
    } else {
      for (int64_t k = 0; k < n; k++) buf.f[k] = a->f0 + (double)(o + k) * a->fstep;
      cpu_store[CPU_KT_F64](dst, a->stride, buf.f, n, a->dtype);
    }
  }
}

bp_status_t cpu_exec_copy_like(const bp_op_call_t* call) {
  const bp_tensor_desc_t* out = call->outputs[0];
  switch (call->op_id) {
    case BP_OP_to_copy:
    case BP_OP_clone:
      if (call->inputs[0]->rank != out->rank)
        return cpu_error(BP_INVALID_ARGUMENT, "cpu: %s: input rank %u != output rank %u",
                         cpu_op_name(call->op_id), call->inputs[0]->rank, out->rank);
      return cpu_cast_copy(out, call->inputs[0]);
    case BP_OP_copy:
      return cpu_cast_copy(out, call->inputs[1]);
    case BP_OP_fill: {
      const bp_fill_attrs_t* a = call->attrs;
      ew_job_t j;
      memset(&j, 0, sizeof j);
      j.nin = 1;
      j.kt = j.rkt = a->value.kind == BP_SCALAR_FLOAT ? CPU_KT_F64
                     : a->value.kind == BP_SCALAR_BOOL ? CPU_KT_BOOL : CPU_KT_I64;
      job_output(&j, out);
      job_const(&j, 1, j.kt, &a->value);
      job_run(&j);
      return BP_OK;
    }
    case BP_OP_cat: {
      const bp_dim_attrs_t* a = call->attrs;
      int64_t dim = a->dim < 0 ? a->dim + (int64_t)out->rank : a->dim;
      if (out->rank == 0 || dim < 0 || dim >= (int64_t)out->rank)
        return cpu_error(BP_INVALID_ARGUMENT, "cpu: cat: dim %d out of range for rank %u", a->dim, out->rank);
      int64_t at = 0;
      for (uint32_t i = call->list_begin; i < call->list_begin + call->list_count; i++) {
        const bp_tensor_desc_t* in = call->inputs[i];
        if (in->rank == 1 && in->sizes[0] == 0 && out->rank != 1) continue; /* legacy skip */
        if (in->rank != out->rank)
          return cpu_error(BP_INVALID_ARGUMENT, "cpu: cat: input %u has rank %u, output %u", i, in->rank, out->rank);
        for (uint32_t d = 0; d < out->rank; d++)
          if ((int64_t)d != dim && in->sizes[d] != out->sizes[d])
            return cpu_error(BP_INVALID_ARGUMENT, "cpu: cat: input %u size %lld in dim %u, output %lld", i,
                             (long long)in->sizes[d], d, (long long)out->sizes[d]);
        if (at + in->sizes[dim] > out->sizes[dim])
          return cpu_error(BP_INVALID_ARGUMENT, "cpu: cat: inputs exceed the output's size %lld in dim %lld",
                           (long long)out->sizes[dim], (long long)dim);
        bp_tensor_desc_t piece = *out;
        piece.sizes[dim] = in->sizes[dim];
        piece.byte_offset = out->byte_offset + (uint64_t)(at * out->strides[dim] * (int64_t)bp_dtype_size(out->dtype));
        at += in->sizes[dim];
        if (in->sizes[dim] == 0) continue;
        bp_status_t st = cpu_cast_copy(&piece, in);
        if (st) return st;
      }
      if (at != out->sizes[dim])
        return cpu_error(BP_INVALID_ARGUMENT, "cpu: cat: inputs cover %lld of %lld in dim %lld",
                         (long long)at, (long long)out->sizes[dim], (long long)dim);
      return BP_OK;
    }
    case BP_OP_arange: {
      const bp_arange_attrs_t* a = call->attrs;
      if (out->rank != 1)
        return cpu_error(BP_INVALID_ARGUMENT, "cpu: arange: output rank %u, expected 1", out->rank);
      if (is_fp8_or_c64(out->dtype) || out->dtype == BP_DTYPE_BOOL)
        return cpu_error(BP_UNIMPLEMENTED, "cpu: arange: %s output", bp_dtype_name(out->dtype));
      arange_job_t j = {
          .base = cpu_desc_ptr(out),
          .stride = out->strides[0],
          .dtype = out->dtype,
          .exact_int = !bp_dtype_is_float(out->dtype) && a->start.kind != BP_SCALAR_FLOAT &&
                       a->step.kind != BP_SCALAR_FLOAT,
          .f0 = cpu_scalar_f64(&a->start, 0),
          .fstep = cpu_scalar_f64(&a->step, 1),
          .i0 = cpu_scalar_i64(&a->start, 0),
          .istep = cpu_scalar_i64(&a->step, 1),
      };
      int64_t n = out->sizes[0];
      if (n < EW_GRAIN) arange_range(&j, 0, n);
      else cpu_parallel_for(n, EW_GRAIN, arange_range, &j);
      return BP_OK;
    }
    default:
      return cpu_error(BP_UNIMPLEMENTED, "cpu: op %s is not a copy", cpu_op_name(call->op_id));
  }
}

/* ---- per-ISA program kernels --------------------------------------------
 * The floating kernels again, compiled for AVX2+FMA and for AVX-512, for
 * elementwise programs (cpu_ew_program_kernel; eager ops keep the kernels
 * above). In these variants f32 exp, tanh and erf are cpu_vmath.h's
 * straight-line forms, so that the activations (sigmoid, silu, gelu, tanh)
 * vectorize as the arithmetic does; f64 keeps libm. Contraction stays off:
 * the arithmetic rounds exactly as the base kernels do.
 * BP_CPU_ISA=base|avx2|avx512 caps the variant chosen (default: the best
 * the CPU has). */
static int g_isa_cap = -1;
static pthread_once_t g_isa_cap_once = PTHREAD_ONCE_INIT;
static void isa_cap_init(void) {
  const char* cap = getenv("BP_CPU_ISA");
  int want = 2;
  if (cap && *cap) {
    want = strcmp(cap, "base") == 0 ? 0 : strcmp(cap, "avx2") == 0 ? 1 : strcmp(cap, "avx512") == 0 ? 2 : -1;
    if (want < 0) {
      bp_plugin_log(bp_kit_host(), BP_LOG_WARN, "BP_CPU_ISA='%.40s' is not base, avx2 or avx512; using the CPU's best",
                    cap);
      want = 2;
    }
  }
  g_isa_cap = want;
}

int cpu_isa_cap(void) {
  pthread_once(&g_isa_cap_once, isa_cap_init);
  return g_isa_cap;
}

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#undef exp
#undef tanh
#undef erf
static inline double ew_exp_f64(double x) { return (exp)(x); }
static inline double ew_tanh_f64(double x) { return (tanh)(x); }
static inline double ew_erf_f64(double x) { return (erf)(x); }
#define exp(x) _Generic((x), float: cpu_vm_expf, default: ew_exp_f64)(x)
#define tanh(x) _Generic((x), float: cpu_vm_tanhf, default: ew_tanh_f64)(x)
#define erf(x) _Generic((x), float: cpu_vm_erff, default: ew_erf_f64)(x)

/* Kernel-type names for the variants' tables ([CPU_KT_F32_avx2] is F32). */
#define CPU__ISAS(X) X(avx2, "avx2,fma") X(avx512, "avx512f,avx512dq,avx512vl,avx512bw,fma,prefer-vector-width=512")
#define CPU__ISA_KT(ISA, TARGET) enum { CPU_KT_F32_##ISA = CPU_KT_F32, CPU_KT_F64_##ISA = CPU_KT_F64 };
CPU__ISAS(CPU__ISA_KT)

#pragma GCC push_options
#pragma GCC optimize("fp-contract=off")
#pragma GCC target("avx2,fma")
CPU__GEN_FLOAT(F32_avx2, float)
CPU__GEN_FLOAT(F64_avx2, double)
#pragma GCC pop_options
#pragma GCC push_options
#pragma GCC optimize("fp-contract=off")
#pragma GCC target("avx512f,avx512dq,avx512vl,avx512bw,fma,prefer-vector-width=512")
CPU__GEN_FLOAT(F32_avx512, float)
CPU__GEN_FLOAT(F64_avx512, double)
#pragma GCC pop_options

static const cpu_ew_fn k_kernels_isa[2][CPU_K_COUNT][CPU_KT_COUNT] = {
    {CPU__TAB_FLOAT(F32_avx2, float) CPU__TAB_FLOAT(F64_avx2, double)},
    {CPU__TAB_FLOAT(F32_avx512, float) CPU__TAB_FLOAT(F64_avx512, double)}};

/* 0: base kernels, 1: AVX2, 2: AVX-512; the CPU's best, capped by BP_CPU_ISA. */
static int g_isa = -1;
static pthread_once_t g_isa_once = PTHREAD_ONCE_INIT;
static void isa_init(void) { g_isa = cpu_vm_isa(cpu_isa_cap()); }

static cpu_ew_fn ew_isa_kernel(int kid, int kt) {
  pthread_once(&g_isa_once, isa_init);
  return g_isa > 0 ? k_kernels_isa[g_isa - 1][kid][kt] : NULL;
}
#else
static cpu_ew_fn ew_isa_kernel(int kid, int kt) {
  (void)kid, (void)kt;
  return NULL;
}
#endif
