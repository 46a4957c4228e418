/* The CPU plugin's fast elementwise programs: the per-ISA kernels and the
 * vectorizable f32 exp, tanh and erf (plugins/cpu/cpu_vmath.h) against
 * fp64 and against the eager ops, over every op and compute dtype class a
 * program takes, at sizes around the tile and vector widths (0, 1, odd
 * tails, several tiles, the thread pool), with broadcast, strided, and
 * converting operands, and outputs written in place by the op that makes
 * them (direct stores) next to inputs that share their memory.
 * ctest runs it three times: the CPU's best ISA, BP_CPU_ISA=avx2 and base. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "../../plugins/cpu/cpu_vmath.h"
#include "cpu_fixture.h"
#include "region/region_builder.h"

/* ---- the vector math itself --------------------------------------------- */
static double ulp_f32(double r) {
  double a = fabs(r);
  if (a < 0x1p-126) return 0x1p-149;
  int e;
  frexp(a, &e);
  return ldexp(1.0, e - 24);
}

typedef float (*vm_fn)(float);
typedef double (*ref_fn)(double);

/* Max error in ulps of fn against ref over inputs `x` (n), NaN where the
 * reference is NaN, infinity where it overflows f32. */
static double vm_max_ulps(vm_fn fn, ref_fn ref, const float* x, int64_t n) {
  double worst = 0;
  for (int64_t i = 0; i < n; i++) {
    double r = ref((double)x[i]);
    float g = fn(x[i]);
    if (isnan(r)) {
      if (!isnan(g)) {
        print_error("x = %.9g: got %.9g, expected NaN\n", x[i], g);
        fail();
      }
      continue;
    }
    float rf = (float)r;
    if (isinf(rf)) {
      if (g != rf) {
        print_error("x = %.9g: got %.9g, expected %g\n", x[i], g, rf);
        fail();
      }
      continue;
    }
    double u = fabs((double)g - r) / ulp_f32(r);
    if (u > worst) worst = u;
  }
  return worst;
}

static uint32_t lcg(uint32_t* s) {
  *s = *s * 1664525u + 1013904223u;
  return *s;
}

/* Dense sweeps over each function's interesting range plus random bit
 * patterns (every exponent, subnormals, infinities, NaNs): within the
 * conformance suite's TRANS class (4 ulp for f32). */
static void test_vmath_accuracy(void** state) {
  (void)state;
  /* Fewer points under valgrind (its fmaf is a slow call per lane). */
  const int64_t N = getenv("BP_UNDER_VALGRIND") ? 1 << 13 : 1 << 18;
  float* x = malloc((size_t)N * sizeof *x);
  assert_non_null(x);
  struct {
    vm_fn fn;
    ref_fn ref;
    double lo, hi;
    const char* name;
  } fns[] = {{cpu_vm_expf, exp, -106, 90, "exp"},
             {cpu_vm_tanhf, tanh, -10, 10, "tanh"},
             {cpu_vm_erff, erf, -5, 5, "erf"}};
  for (size_t f = 0; f < sizeof fns / sizeof fns[0]; f++) {
    double worst = 0;
    for (int pass = 0; pass < 3; pass++) {
      uint32_t seed = 7u + (uint32_t)pass;
      for (int64_t i = 0; i < N; i++) {
        double t = (double)i / N;
        if (pass == 0) x[i] = (float)(fns[f].lo + (fns[f].hi - fns[f].lo) * t);
        else if (pass == 1) x[i] = (float)(-1.0 + 2.0 * t); /* around 0, each branch boundary */
        else x[i] = cpu_vm_float(lcg(&seed));
      }
      double u = vm_max_ulps(fns[f].fn, fns[f].ref, x, N);
      if (u > worst) worst = u;
    }
    if (worst > 4.0) print_error("%s: %.3f ulp\n", fns[f].name, worst);
    assert_true(worst <= 4.0);
  }
  free(x);
  /* Exact special values. */
  assert_true(cpu_vm_expf(0.0f) == 1.0f && cpu_vm_expf(-INFINITY) == 0.0f);
  assert_true(isinf(cpu_vm_expf(INFINITY)) && isinf(cpu_vm_expf(88.73f)) && cpu_vm_expf(88.72f) < INFINITY);
  assert_true(cpu_vm_expf(-103.0f) > 0.0f && cpu_vm_expf(-104.5f) == 0.0f);
  assert_true(isnan(cpu_vm_expf(NAN)) && isnan(cpu_vm_tanhf(NAN)) && isnan(cpu_vm_erff(NAN)));
  assert_true(cpu_vm_tanhf(INFINITY) == 1.0f && cpu_vm_tanhf(-INFINITY) == -1.0f);
  assert_true(cpu_vm_erff(INFINITY) == 1.0f && cpu_vm_erff(-INFINITY) == -1.0f);
  assert_true(signbit(cpu_vm_tanhf(-0.0f)) && cpu_vm_tanhf(-0.0f) == 0.0f);
  assert_true(signbit(cpu_vm_erff(-0.0f)) && cpu_vm_erff(-0.0f) == 0.0f);
  assert_true(cpu_vm_tanhf(1e-30f) == 1e-30f && cpu_vm_erff(1e-40f) > 0.0f);
}

/* ---- programs against eager ops ------------------------------------------- */
enum { TOL_EXACT = 0, TOL_TRANS = 1, TOL_ACT = 2 };
typedef struct op_case {
  uint32_t op, nin, aux;
  int tol;         /* TOL_EXACT: bit for bit; TOL_TRANS: 8 ulp; TOL_ACT: + |x| 2^-21 */
  int bool_result; /* the eager op's output is bool */
} op_case_t;

/* Every op a float program takes (cpu_ew_program_kernel). exp, tanh and erf
 * and the ops built on them (sigmoid, silu, gelu, mish) differ from libm's
 * within the tolerance; every other op rounds exactly as the eager kernel.
 * TOL_ACT: gelu's 1 + erf cancels for negative x in both forms. */
static const op_case_t k_ops[] = {
    {BP_OP_abs, 1, 0, 0, 0}, {BP_OP_acos, 1, 0, 0, 0}, {BP_OP_acosh, 1, 0, 0, 0},
    {BP_OP_asin, 1, 0, 0, 0}, {BP_OP_asinh, 1, 0, 0, 0}, {BP_OP_atan, 1, 0, 0, 0},
    {BP_OP_atanh, 1, 0, 0, 0}, {BP_OP_ceil, 1, 0, 0, 0}, {BP_OP_cos, 1, 0, 0, 0},
    {BP_OP_cosh, 1, 0, 0, 0}, {BP_OP_erf, 1, 0, TOL_TRANS, 0}, {BP_OP_exp, 1, 0, TOL_TRANS, 0},
    {BP_OP_expm1, 1, 0, 0, 0}, {BP_OP_floor, 1, 0, 0, 0}, {BP_OP_log, 1, 0, 0, 0},
    {BP_OP_log10, 1, 0, 0, 0}, {BP_OP_log1p, 1, 0, 0, 0}, {BP_OP_log2, 1, 0, 0, 0},
    {BP_OP_neg, 1, 0, 0, 0}, {BP_OP_reciprocal, 1, 0, 0, 0}, {BP_OP_relu, 1, 0, 0, 0},
    {BP_OP_round, 1, 0, 0, 0}, {BP_OP_rsqrt, 1, 0, 0, 0}, {BP_OP_sigmoid, 1, 0, TOL_TRANS, 0},
    {BP_OP_sign, 1, 0, 0, 0}, {BP_OP_sin, 1, 0, 0, 0}, {BP_OP_sinh, 1, 0, 0, 0},
    {BP_OP_sqrt, 1, 0, 0, 0}, {BP_OP_tan, 1, 0, 0, 0}, {BP_OP_tanh, 1, 0, TOL_TRANS, 0},
    {BP_OP_trunc, 1, 0, 0, 0}, {BP_OP_logical_not, 1, 0, 0, 1}, {BP_OP_isinf, 1, 0, 0, 1},
    {BP_OP_isnan, 1, 0, 0, 1}, {BP_OP_gelu, 1, BP_GELU_NONE, TOL_ACT, 0},
    {BP_OP_gelu, 1, BP_GELU_TANH, TOL_ACT, 0}, {BP_OP_silu, 1, 0, TOL_TRANS, 0},
    {BP_OP_hardsigmoid, 1, 0, 0, 0}, {BP_OP_hardswish, 1, 0, 0, 0}, {BP_OP_mish, 1, 0, TOL_TRANS, 0},
    {BP_OP_add, 2, 0, 0, 0}, {BP_OP_sub, 2, 0, 0, 0}, {BP_OP_mul, 2, 0, 0, 0},
    {BP_OP_div, 2, BP_ROUNDING_NONE, 0, 0}, {BP_OP_div, 2, BP_ROUNDING_TRUNC, 0, 0},
    {BP_OP_div, 2, BP_ROUNDING_FLOOR, 0, 0}, {BP_OP_atan2, 2, 0, 0, 0}, {BP_OP_fmod, 2, 0, 0, 0},
    {BP_OP_remainder, 2, 0, 0, 0}, {BP_OP_pow, 2, 0, 0, 0}, {BP_OP_maximum, 2, 0, 0, 0},
    {BP_OP_minimum, 2, 0, 0, 0}, {BP_OP_eq, 2, 0, 0, 1}, {BP_OP_ne, 2, 0, 0, 1},
    {BP_OP_lt, 2, 0, 0, 1}, {BP_OP_le, 2, 0, 0, 1}, {BP_OP_gt, 2, 0, 0, 1},
    {BP_OP_ge, 2, 0, 0, 1}, {BP_OP_logical_and, 2, 0, 0, 1}, {BP_OP_logical_or, 2, 0, 0, 1},
    {BP_OP_logical_xor, 2, 0, 0, 1}, {BP_OP_where, 3, 0, 0, 0}, {BP_OP_addcmul, 3, 0, 0, 0},
    {BP_OP_clamp_tensor, 3, 0, 0, 0},
};

/* Inputs in [-6, 6] with special values every 61st element. */
static void fill_values(double* x, int64_t n, uint32_t seed) {
  static const double specials[] = {0.0, -0.0, INFINITY, -INFINITY, NAN, 1e-40, -3e-39, 100.0,
                                    -100.0, 0.5, 1.0, -1.0, 89.0, -105.0, 0.875, -0.625};
  for (int64_t i = 0; i < n; i++) {
    if (i % 61 == 7) x[i] = specials[(i / 61) % (sizeof specials / sizeof specials[0])];
    else x[i] = (double)(lcg(&seed) >> 8) / (double)(1u << 24) * 12.0 - 6.0;
  }
}

/* A tensor of dtype (F32 or F64; BOOL: nonzero) holding the values. */
static bp_tensor_t* values_tensor(uint32_t dtype, const double* v, int64_t n) {
  void* buf = malloc((size_t)(n ? n : 1) * 8);
  assert_non_null(buf);
  for (int64_t i = 0; i < n; i++) {
    if (dtype == BP_DTYPE_F32) ((float*)buf)[i] = (float)v[i];
    else if (dtype == BP_DTYPE_F64) ((double*)buf)[i] = v[i];
    else ((uint8_t*)buf)[i] = v[i] > 0.0;
  }
  bp_tensor_t* t = fx_tensor(dtype, n ? buf : NULL, 1, (int64_t[]){n});
  free(buf);
  return t;
}

/* Element i of a host copy of dtype as double. */
static double at(const void* p, uint32_t dtype, int64_t i) {
  if (dtype == BP_DTYPE_F32) return ((const float*)p)[i];
  if (dtype == BP_DTYPE_F64) return ((const double*)p)[i];
  return ((const uint8_t*)p)[i];
}

static int same_bits(double g, double w, uint32_t dtype) {
  if (isnan(g) || isnan(w)) return isnan(g) && isnan(w);
  if (g != w) return 0;
  return dtype == BP_DTYPE_BOOL || signbit(g) == signbit(w);
}

static void check_case(const op_case_t* c, uint32_t cdt, int64_t n) {
  double* v[3];
  bp_tensor_t* in[3];
  for (uint32_t k = 0; k < c->nin; k++) {
    v[k] = malloc((size_t)(n ? n : 1) * sizeof(double));
    assert_non_null(v[k]);
    fill_values(v[k], n, 11u + k * 7u + c->op);
    uint32_t dt = c->op == BP_OP_where && k == 0 ? BP_DTYPE_BOOL : cdt;
    in[k] = values_tensor(dt, v[k], n);
  }
  uint32_t odt = c->bool_result ? BP_DTYPE_BOOL : cdt;
  bp_tensor_t* got_t = fx_tensor(odt, NULL, 1, (int64_t[]){n});
  bp_tensor_t* want_t = fx_tensor(odt, NULL, 1, (int64_t[]){n});
  bp_ew_instr_t p[5];
  uint32_t k = 0;
  for (uint32_t i = 0; i < c->nin; i++) p[k++] = rb_ins(BP_EW_LOAD_INPUT, (uint8_t)i, (uint8_t)i, 0, 0, 0);
  p[k++] = rb_ins(c->op, 3, 0, 1, 2, c->aux);
  p[k++] = rb_ins(BP_EW_STORE, 0, 0, 3, 0, 0);
  bp_ew_program_t prog = rb_program(p, k, 4, c->nin, 1, NULL, 0, cdt);
  const bp_tensor_t* ins[3] = {in[0], c->nin > 1 ? in[1] : NULL, c->nin > 2 ? in[2] : NULL};
  bp_status_t st = bp_ew_program_run(g_stream, &prog, ins, c->nin, &got_t, 1);
  if (st != BP_OK) print_error("op %u aux %u dtype %u: %s\n", c->op, c->aux, cdt, bp_status_message());
  assert_int_equal(st, BP_OK);
  bp_gelu_attrs_t ga = {.struct_size = sizeof ga, .approximate = c->aux};
  bp_binary_attrs_t ba = {.struct_size = sizeof ba, .rounding_mode = c->aux};
  const void* attrs = c->op == BP_OP_gelu ? (const void*)&ga : c->op == BP_OP_div ? (const void*)&ba : NULL;
  st = bp_op_run(g_stream, c->op, ins, c->nin, attrs, &want_t, 1);
  if (st != BP_OK) print_error("eager op %u: %s\n", c->op, bp_status_message());
  assert_int_equal(st, BP_OK);
  size_t es = bp_dtype_size(odt);
  void* got = malloc((size_t)(n ? n : 1) * es);
  void* want = malloc((size_t)(n ? n : 1) * es);
  assert_true(got && want);
  if (n) {
    fx_read(got_t, got, n, es);
    fx_read(want_t, want, n, es);
  }
  for (int64_t i = 0; i < n; i++) {
    double g = at(got, odt, i), w = at(want, odt, i);
    int ok;
    if (c->tol == TOL_EXACT || odt == BP_DTYPE_F64 || isnan(w) || isinf(w)) {
      ok = same_bits(g, w, odt) || (c->tol != TOL_EXACT && fabs(g - w) <= 1e-15 * fabs(w));
    } else {
      double tol = 8.0 * ulp_f32(w) + (c->tol == TOL_ACT ? fabs(v[0][i]) * 0x1p-21 : 0.0);
      ok = fabs(g - w) <= tol;
    }
    if (!ok) {
      print_error("op %u aux %u dtype %u n %lld element %lld (x = %.9g): got %.9g, eager %.9g\n", c->op,
                  c->aux, cdt, (long long)n, (long long)i, v[0][i], g, w);
      fail();
    }
  }
  free(got);
  free(want);
  for (uint32_t i = 0; i < c->nin; i++) free(v[i]);
  fx_release_all(NULL);
}

/* Every op, f32 and f64, at sizes around the tile (1024) and the vector
 * widths, plus one over the thread pool's grain (32768). */
static void test_program_ops_match_eager(void** state) {
  (void)state;
  static const int64_t sizes[] = {0, 1, 1025, 15, 1023, 3 * 1024 + 17};
  static const uint32_t dts[] = {BP_DTYPE_F32, BP_DTYPE_F64};
  /* Under valgrind the first three sizes (a tail in every vector loop). */
  size_t nsizes = getenv("BP_UNDER_VALGRIND") ? 3 : sizeof sizes / sizeof sizes[0];
  for (size_t c = 0; c < sizeof k_ops / sizeof k_ops[0]; c++)
    for (size_t d = 0; d < 2; d++)
      for (size_t s = 0; s < nsizes; s++) check_case(&k_ops[c], dts[d], sizes[s]);
  static const uint32_t big[] = {BP_OP_gelu, BP_OP_tanh, BP_OP_maximum, BP_OP_where};
  for (size_t c = 0; c < sizeof k_ops / sizeof k_ops[0]; c++)
    for (size_t b = 0; b < sizeof big / sizeof big[0]; b++)
      if (k_ops[c].op == big[b] && k_ops[c].aux == 0) check_case(&k_ops[c], BP_DTYPE_F32, 40000 + 3);
}

/* ---- direct stores ------------------------------------------------------- */
/* out0 = relu(x) written in place by relu and read back by the next op;
 * out1 = out0 * 2 + y (y broadcast from a row); out2 = relu(x) again
 * (stored twice: the second a copy); out3 = f16 store (converting). */
static void test_direct_stores(void** state) {
  (void)state;
  enum { M = 37, N = 1031 }; /* rows longer than a tile, with tails */
  static float x[M * N], y[N], o0[M * N], o1[M * N], o2[M * N], o3f[M * N];
  for (int i = 0; i < M * N; i++) x[i] = (float)((i * 37) % 101) / 10.0f - 5.0f;
  for (int j = 0; j < N; j++) y[j] = (float)(j % 13) - 6.0f;
  bp_tensor_t* tx = FX_T(F32, x, M, N);
  bp_tensor_t* ty = FX_T(F32, y, N);
  bp_tensor_t* t0 = FX_T(F32, NULL, M, N);
  bp_tensor_t* t1 = FX_T(F32, NULL, M, N);
  bp_tensor_t* t2 = FX_T(F32, NULL, M, N);
  bp_tensor_t* t3 = FX_T(F16, NULL, M, N);
  bp_scalar_t two = {.kind = BP_SCALAR_FLOAT, .v.f = 2.0};
  bp_ew_instr_t p[10] = {rb_ins(BP_EW_LOAD_INPUT, 0, 0, 0, 0, 0), rb_ins(BP_OP_relu, 1, 0, 0, 0, 0),
                         rb_ins(BP_EW_STORE, 0, 0, 1, 0, 0),       rb_ins(BP_EW_LOAD_CONST, 2, 0, 0, 0, 0),
                         rb_ins(BP_OP_mul, 3, 1, 2, 0, 0),         rb_ins(BP_EW_LOAD_INPUT, 2, 1, 0, 0, 0),
                         rb_ins(BP_OP_add, 3, 3, 2, 0, 0),         rb_ins(BP_EW_STORE, 0, 1, 3, 0, 0),
                         rb_ins(BP_EW_STORE, 0, 2, 1, 0, 0),       rb_ins(BP_EW_STORE, 0, 3, 3, 0, 0)};
  bp_ew_program_t prog = rb_program(p, 10, 4, 2, 4, &two, 1, BP_DTYPE_F32);
  const bp_tensor_t* ins[2] = {tx, ty};
  bp_tensor_t* outs[4] = {t0, t1, t2, t3};
  assert_int_equal(bp_ew_program_run(g_stream, &prog, ins, 2, outs, 4), BP_OK);
  bp_tensor_t* t3f = FX_T(F32, NULL, M, N);
  assert_int_equal(bp_op_to_copy(g_stream, t3, &(bp_cast_attrs_t){.struct_size = sizeof(bp_cast_attrs_t), .dtype = BP_DTYPE_F32}, &t3f), BP_OK);
  fx_read(t0, o0, M * N, 4);
  fx_read(t1, o1, M * N, 4);
  fx_read(t2, o2, M * N, 4);
  fx_read(t3f, o3f, M * N, 4);
  for (int i = 0; i < M * N; i++) {
    float r = x[i] < 0 ? 0.0f : x[i], w = r * 2.0f + y[i % N];
    assert_true(o0[i] == r);
    assert_true(o2[i] == r);
    assert_true(o1[i] == w);
    assert_true(fabsf(o3f[i] - w) <= fabsf(w) * 0x1p-10f);
  }
  /* A transposed output: the op cannot write it in place; the store
   * scatters. */
  bp_tensor_t* tt = FX_T(F32, NULL, N, M);
  bp_tensor_t* ttv = NULL;
  assert_int_equal(bp_tensor_permute(tt, (int64_t[]){1, 0}, &ttv), BP_OK);
  fx_track(ttv);
  bp_ew_instr_t q[3] = {rb_ins(BP_EW_LOAD_INPUT, 0, 0, 0, 0, 0), rb_ins(BP_OP_neg, 1, 0, 0, 0, 0),
                        rb_ins(BP_EW_STORE, 0, 0, 1, 0, 0)};
  bp_ew_program_t qp = rb_program(q, 3, 2, 1, 1, NULL, 0, BP_DTYPE_F32);
  const bp_tensor_t* qin[1] = {tx};
  assert_int_equal(bp_ew_program_run(g_stream, &qp, qin, 1, &ttv, 1), BP_OK);
  fx_read(tt, o0, M * N, 4);
  for (int i = 0; i < M; i++)
    for (int j = 0; j < N; j++) assert_true(o0[j * M + i] == -x[i * N + j]);
}

/* An output over an input read later in the program (launch_ew_program
 * copies such inputs tile by tile before any store): out0 = -x is made
 * before input 1 (the same memory as out0) is loaded; out1 = in1 * 2 must
 * see in1's old values, so out0 cannot be written in place early. */
static void test_direct_store_after_overlapping_input(void** state) {
  (void)state;
  enum { N = 5000 };
  static float x[N], z[N], o0[N], o1[N];
  for (int i = 0; i < N; i++) {
    x[i] = (float)i;
    z[i] = (float)(3 * i + 1);
  }
  bp_tensor_t* tx = FX_T(F32, x, N);
  bp_tensor_t* tz = FX_T(F32, z, N);
  bp_tensor_t* t1 = FX_T(F32, NULL, N);
  bp_ew_instr_t p[6] = {rb_ins(BP_EW_LOAD_INPUT, 0, 0, 0, 0, 0), rb_ins(BP_OP_neg, 1, 0, 0, 0, 0),
                        rb_ins(BP_EW_STORE, 0, 0, 1, 0, 0),       rb_ins(BP_EW_LOAD_INPUT, 2, 1, 0, 0, 0),
                        rb_ins(BP_OP_add, 3, 2, 2, 0, 0),         rb_ins(BP_EW_STORE, 0, 1, 3, 0, 0)};
  bp_ew_program_t prog = rb_program(p, 6, 4, 2, 2, NULL, 0, BP_DTYPE_F32);
  const bp_tensor_t* ins[2] = {tx, tz};
  bp_tensor_t* outs[2] = {tz, t1}; /* out0 over input 1 */
  assert_int_equal(bp_ew_program_run(g_stream, &prog, ins, 2, outs, 2), BP_OK);
  fx_read(tz, o0, N, 4);
  fx_read(t1, o1, N, 4);
  for (int i = 0; i < N; i++) {
    assert_true(o0[i] == -x[i]);
    if (o1[i] != 2.0f * z[i]) print_error("element %d: got %g, expected %g\n", i, o1[i], 2.0f * z[i]);
    assert_true(o1[i] == 2.0f * z[i]);
  }
}

/* The 8-op chain of bp-bench (mul, add of a constant, relu, sub, mul, abs,
 * maximum, minimum with a constant) as an EW_PROGRAM region over a size
 * that spans the pool, with a scalar input broadcast (rank 0) for the
 * second constant, and in place over x (a declared donation). */
static void test_chain_region_in_place(void** state) {
  (void)state;
  enum { N = 70001 };
  float* x = malloc(N * sizeof *x);
  float* y = malloc(N * sizeof *y);
  float* got = malloc(N * sizeof *got);
  assert_true(x && y && got);
  uint32_t s = 3;
  for (int i = 0; i < N; i++) {
    x[i] = (float)(lcg(&s) >> 8) / (float)(1u << 24) * 4.0f - 2.0f;
    y[i] = (float)(lcg(&s) >> 8) / (float)(1u << 24) * 4.0f - 2.0f;
  }
  float two = 2.0f;
  bp_tensor_t* tx = FX_T(F32, x, N);
  bp_tensor_t* ty = FX_T(F32, y, N);
  bp_tensor_t* tc = fx_tensor(BP_DTYPE_F32, &two, 0, NULL);
  bp_scalar_t half = {.kind = BP_SCALAR_FLOAT, .v.f = 0.5};
  bp_ew_instr_t p[13] = {
      rb_ins(BP_EW_LOAD_INPUT, 0, 0, 0, 0, 0), rb_ins(BP_EW_LOAD_INPUT, 1, 1, 0, 0, 0),
      rb_ins(BP_EW_LOAD_CONST, 2, 0, 0, 0, 0), rb_ins(BP_EW_LOAD_INPUT, 3, 2, 0, 0, 0),
      rb_ins(BP_OP_mul, 4, 0, 1, 0, 0),        rb_ins(BP_OP_add, 4, 4, 2, 0, 0),
      rb_ins(BP_OP_relu, 4, 4, 0, 0, 0),       rb_ins(BP_OP_sub, 4, 4, 1, 0, 0),
      rb_ins(BP_OP_mul, 4, 4, 0, 0, 0),        rb_ins(BP_OP_abs, 4, 4, 0, 0, 0),
      rb_ins(BP_OP_maximum, 4, 4, 0, 0, 0),    rb_ins(BP_OP_minimum, 4, 4, 3, 0, 0),
      rb_ins(BP_EW_STORE, 0, 0, 4, 0, 0)};
  bp_ew_program_t prog = rb_program(p, 13, 5, 3, 1, &half, 1, BP_DTYPE_F32);
  rb_t b;
  rb_init(&b);
  RB_V(&b, F32, N);
  RB_V(&b, F32, N);
  rb_value(&b, BP_DTYPE_F32, 0, NULL);
  RB_V(&b, F32, N);
  bp_region_t* r = NULL;
  bp_support_t why = {.struct_size = sizeof why};
  assert_int_equal(bp_region_compile(g_dev, rb_desc(&b, BP_REGION_EW_PROGRAM, 4, 3, &prog), &why, &r), BP_OK);
  const bp_tensor_t* args[4] = {tx, ty, tc, tx};
  assert_int_equal(bp_region_launch(g_stream, r, args, 4, NULL), BP_OK);
  fx_read(tx, got, N, 4);
  for (int i = 0; i < N; i++) {
    float t = x[i] * y[i] + 0.5f;
    t = t < 0 ? 0.0f : t;
    t = fabsf((t - y[i]) * x[i]);
    t = t > x[i] ? t : x[i];
    t = t < 2.0f ? t : 2.0f;
    assert_true(got[i] == t);
  }
  bp_region_release(r);
  free(x);
  free(y);
  free(got);
}

/* ---- epilogues ------------------------------------------------------------ */
static void fill_f32(float* x, int64_t n, uint32_t seed) {
  for (int64_t i = 0; i < n; i++) x[i] = (float)(lcg(&seed) >> 8) / (float)(1u << 24) * 4.0f - 2.0f;
}

/* linear + bias + gelu (tanh form) + residual, and addmm (self a bias row)
 * + silu, as EPILOGUE regions at sizes that leave vector and tile tails
 * (one row, one column, more rows than a GEMM row block of 1030 columns:
 * 2 MiB / 4120 B = 508 rows), against the eager ops. */
static void test_epilogue_odd_sizes(void** state) {
  (void)state;
  static const int64_t shapes[][2] = {{1, 1}, {7, 17}, {515, 33}, {600, 1030}};
  enum { K = 9 };
  for (size_t c = 0; c < sizeof shapes / sizeof shapes[0]; c++) {
    const int64_t M = shapes[c][0], N = shapes[c][1];
    float* x = malloc(sizeof(float) * (size_t)(M * K));
    float* w = malloc(sizeof(float) * (size_t)(N * K));
    float* bias = malloc(sizeof(float) * (size_t)N);
    float* res = malloc(sizeof(float) * (size_t)(M * N));
    float* got = malloc(sizeof(float) * (size_t)(M * N));
    float* want = malloc(sizeof(float) * (size_t)(M * N));
    assert_true(x && w && bias && res && got && want);
    fill_f32(x, M * K, 1);
    fill_f32(w, N * K, 2);
    fill_f32(bias, N, 3);
    fill_f32(res, M * N, 4);
    bp_tensor_t* tx = FX_T(F32, x, M, K);
    bp_tensor_t* tw = FX_T(F32, w, N, K);
    bp_tensor_t* twt = NULL;
    bp_tensor_t* tb = FX_T(F32, bias, N);
    bp_tensor_t* tr = FX_T(F32, res, M, N);
    bp_tensor_t* out = FX_T(F32, NULL, M, N);
    bp_gelu_attrs_t tanh_form = {.struct_size = sizeof tanh_form, .approximate = BP_GELU_TANH};
    rb_t b;
    bp_region_t* r = NULL;
    bp_support_t why = {.struct_size = sizeof why};
    assert_int_equal(bp_region_compile(g_dev, rb_linear_act_residual(&b, M, K, N, BP_OP_gelu, &tanh_form), &why, &r),
                     BP_OK);
    const bp_tensor_t* args[5] = {tx, tw, tb, tr, out};
    assert_int_equal(bp_region_launch(g_stream, r, args, 5, NULL), BP_OK);
    fx_read(out, got, M * N, 4);
    bp_region_release(r);
    /* Eager: the results stay tracked until fx_release_all. */
    bp_tensor_t* e[3] = {NULL, NULL, NULL};
    assert_int_equal(bp_op_linear(g_stream, tx, tw, tb, NULL, &e[0]), BP_OK);
    assert_int_equal(bp_op_gelu(g_stream, fx_track(e[0]), &tanh_form, &e[1]), BP_OK);
    assert_int_equal(bp_op_add(g_stream, fx_track(e[1]), tr, NULL, &e[2]), BP_OK);
    fx_read(fx_track(e[2]), want, M * N, 4);
    fx_assert_close(got, want, M * N, 1e-5);

    /* addmm(bias row, x, w^T) + silu. */
    assert_int_equal(bp_tensor_permute(tw, (int64_t[]){1, 0}, &twt), BP_OK); /* a strided [K, N] view */
    fx_track(twt);
    rb_init(&b);
    uint32_t vb = RB_V(&b, F32, N), vx = RB_V(&b, F32, M, K), vwt = RB_V(&b, F32, K, N), vo = RB_V(&b, F32, M, N),
             t0 = RB_V(&b, F32, M, N);
    rb_node(&b, BP_OP_addmm, NULL, 3, 1, vb, vx, vwt, t0);
    rb_node(&b, BP_OP_silu, NULL, 1, 1, t0, vo);
    assert_int_equal(bp_region_compile(g_dev, rb_desc(&b, BP_REGION_EPILOGUE, 4, 3, NULL), &why, &r), BP_OK);
    const bp_tensor_t* args2[4] = {tb, tx, twt, out};
    assert_int_equal(bp_region_launch(g_stream, r, args2, 4, NULL), BP_OK);
    fx_read(out, got, M * N, 4);
    bp_region_release(r);
    e[0] = e[1] = NULL;
    assert_int_equal(bp_op_addmm(g_stream, tb, tx, twt, NULL, &e[0]), BP_OK);
    assert_int_equal(bp_op_silu(g_stream, fx_track(e[0]), NULL, &e[1]), BP_OK);
    fx_read(fx_track(e[1]), want, M * N, 4);
    fx_assert_close(got, want, M * N, 1e-5);
    fx_release_all(NULL);
    free(x);
    free(w);
    free(bias);
    free(res);
    free(got);
    free(want);
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {
#define T(f) cmocka_unit_test_teardown(f, fx_release_all)
      T(test_vmath_accuracy),
      T(test_program_ops_match_eager),
      T(test_direct_stores),
      T(test_direct_store_after_overlapping_input),
      T(test_chain_region_in_place),
      T(test_epilogue_odd_sizes),
#undef T
  };
  return cmocka_run_group_tests(tests, fx_setup, fx_teardown);
}
