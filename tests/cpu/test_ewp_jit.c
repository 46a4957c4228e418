/* The CPU plugin's machine-code loops for elementwise programs
 * (plugins/cpu/cpu_ewp_jit.c), compiled into this test and called
 * directly: every op against the f32 kernels' rules bit for bit on special
 * values (NaN, signed zeros, infinities, subnormals), a long chain over
 * all 29 registers with constants, a broadcast input and two outputs,
 * both store kinds, and the programs the JIT must refuse. Where the CPU
 * has no AVX-512 (or valgrind hides it) every compile must refuse. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "../../plugins/cpu/cpu_ewp_jit.h"

/* The plugin's ISA cap (cpu_ew.c): this test takes the CPU's best. */
int cpu_isa_cap(void) { return 2; }

/* Orders the streaming stores before the checks read them. */
static void store_fence(void) {
#if defined(__x86_64__)
  __builtin_ia32_sfence();
#endif
}

enum { N = 1024 + 64 }; /* a multiple of 16 */

static const float k_specials[] = {0.0f, -0.0f, INFINITY, -INFINITY, NAN, -NAN, 1e-40f, -3e-39f,
                                   1.0f, -1.0f, 0.5f, -2.5f, 3.0e38f, -3.0e38f, 1.17549435e-38f, 7.0f};
enum { NSPEC = sizeof k_specials / sizeof k_specials[0] };

/* x and y cover every pair of specials, then pseudo-random values. */
static void fill(float* x, float* y) {
  uint32_t s = 12345;
  for (int i = 0; i < N; i++) {
    if (i < NSPEC * NSPEC) {
      x[i] = k_specials[i / NSPEC];
      y[i] = k_specials[i % NSPEC];
    } else {
      s = s * 1664525u + 1013904223u;
      x[i] = (float)(s >> 8) / (float)(1u << 24) * 20.0f - 10.0f;
      s = s * 1664525u + 1013904223u;
      y[i] = (float)(s >> 8) / (float)(1u << 24) * 20.0f - 10.0f;
    }
  }
}

/* The f32 kernels' rules (plugins/cpu/cpu_ew.c). */
static float ref_op(uint32_t op, float x, float y) {
  switch (op) {
    case BP_OP_add: return x + y;
    case BP_OP_sub: return x - y;
    case BP_OP_mul: return x * y;
    case BP_OP_div: return x / y;
    case BP_OP_sqrt: return sqrtf(x);
    case BP_OP_reciprocal: return 1.0f / x;
    case BP_OP_relu: return x < 0 ? 0.0f : x;
    case BP_OP_abs: return fabsf(x);
    case BP_OP_neg: return -x;
    case BP_OP_maximum: return isnan(x) ? x : (isnan(y) ? y : (x > y ? x : y));
    case BP_OP_minimum: return isnan(x) ? x : (isnan(y) ? y : (x < y ? x : y));
    default: fail_msg("op %u has no reference here", op);
  }
  return 0;
}

static void assert_same(float got, float want, const char* what, int i) {
  uint32_t g, w;
  memcpy(&g, &got, 4);
  memcpy(&w, &want, 4);
  int ok = isnan(got) || isnan(want) ? isnan(got) && isnan(want) : g == w;
  if (!ok) fail_msg("%s, element %d: got %.9g (0x%08x), want %.9g (0x%08x)", what, i, got, g, want, w);
}

static cpu_ewp_jit_instr_t ins(uint32_t opcode, uint8_t dst, uint8_t a, uint8_t b) {
  return (cpu_ewp_jit_instr_t){opcode, dst, {a, b, 0}, a};
}

static const uint32_t k_binary[] = {BP_OP_add, BP_OP_sub, BP_OP_mul, BP_OP_div, BP_OP_maximum, BP_OP_minimum};
static const uint32_t k_unary[] = {BP_OP_sqrt, BP_OP_reciprocal, BP_OP_relu, BP_OP_abs, BP_OP_neg};

/* Each op alone, both store kinds, registers above 15 (the EVEX high bits)
 * and the same register as source and destination. */
static void test_each_op(void** state) {
  (void)state;
  if (!cpu_ewp_jit_enabled()) skip();
  _Alignas(64) static float x[N], y[N], out[N];
  fill(x, y);
  const uint8_t regs[][3] = {{0, 1, 2}, {17, 22, 28}, {5, 6, 6}, {20, 9, 20}}; /* x, y, result */
  for (size_t r = 0; r < sizeof regs / sizeof regs[0]; r++)
    for (int u = 0; u < 2; u++) {
      const uint32_t* ops = u ? k_unary : k_binary;
      size_t nops = u ? sizeof k_unary / sizeof k_unary[0] : sizeof k_binary / sizeof k_binary[0];
      for (size_t o = 0; o < nops; o++)
        for (int streaming = 0; streaming < 2; streaming++) {
          uint8_t rx = regs[r][0], ry = regs[r][1], rd = regs[r][2];
          cpu_ewp_jit_instr_t p[4] = {ins(BP_EW_LOAD_INPUT, rx, 0, 0), ins(BP_EW_LOAD_INPUT, ry, 1, 0),
                                      ins(ops[o], rd, rx, ry), ins(BP_EW_STORE, 0, 0, rd)};
          cpu_ewp_jit_t* jit = cpu_ewp_jit_compile(p, 4, 1, 2, NULL, 0, 0);
          assert_non_null(jit);
          unsigned char* ptr[3] = {(unsigned char*)out, (unsigned char*)x, (unsigned char*)y};
          memset(out, 0xAB, sizeof out);
          cpu_ewp_jit_entry(jit, streaming)(ptr, N * 4);
          store_fence();
          for (int i = 0; i < N; i++) {
            char what[64];
            snprintf(what, sizeof what, "op %u regs %zu streaming %d", ops[o], r, streaming);
            assert_same(out[i], ref_op(ops[o], x[i], u ? 0.0f : y[i]), what, i);
          }
          cpu_ewp_jit_free(jit);
        }
    }
}

/* A 40-instruction chain over every register the loop may use, two
 * constants, y broadcast from one element, and two outputs; run over 0, 16
 * and N elements (the row ends exactly: the caller owns tails). */
static void test_long_chain(void** state) {
  (void)state;
  if (!cpu_ewp_jit_enabled()) skip();
  _Alignas(64) static float x[N], y[N], o0[N], o1[N];
  fill(x, y);
  for (int i = 0; i < N; i++) x[i] = isfinite(x[i]) ? x[i] : 1.5f;
  const float consts[2] = {0.25f, -3.0f};
  cpu_ewp_jit_instr_t p[64];
  uint32_t n = 0;
  p[n++] = ins(BP_EW_LOAD_INPUT, 0, 0, 0);
  p[n++] = ins(BP_EW_LOAD_INPUT, 1, 1, 0); /* broadcast */
  p[n++] = ins(BP_EW_LOAD_CONST, 2, 0, 0);
  p[n++] = ins(BP_EW_LOAD_CONST, 3, 1, 0);
  /* r[k] = op(r[k-1], r[k-2]) through k = 4..28, cycling the ops */
  static const uint32_t cyc[] = {BP_OP_add, BP_OP_mul, BP_OP_maximum, BP_OP_sub, BP_OP_relu, BP_OP_abs,
                                 BP_OP_minimum, BP_OP_neg, BP_OP_div, BP_OP_sqrt, BP_OP_reciprocal};
  for (uint8_t k = 4; k < CPU_EWP_JIT_MAX_REGISTERS; k++)
    p[n++] = ins(cyc[k % (sizeof cyc / sizeof cyc[0])], k, (uint8_t)(k - 1), (uint8_t)(k - 2));
  p[n++] = ins(BP_OP_add, 0, 28, 0);
  p[n++] = ins(BP_EW_STORE, 0, 0, 0);
  p[n++] = ins(BP_EW_STORE, 0, 1, 27);
  cpu_ewp_jit_t* jit = cpu_ewp_jit_compile(p, n, 2, 2, consts, 2, 2u /* input 1 broadcast */);
  assert_non_null(jit);
  const int64_t sizes[] = {0, 16, N};
  for (int streaming = 0; streaming < 2; streaming++)
    for (size_t s = 0; s < 3; s++) {
      memset(o0, 0, sizeof o0);
      memset(o1, 0, sizeof o1);
      unsigned char* ptr[4] = {(unsigned char*)o0, (unsigned char*)o1, (unsigned char*)x,
                               (unsigned char*)&y[5]};
      cpu_ewp_jit_entry(jit, streaming)(ptr, sizes[s] * 4);
      store_fence();
      for (int i = 0; i < N; i++) {
        float r[CPU_EWP_JIT_MAX_REGISTERS] = {x[i], y[5], consts[0], consts[1]};
        for (int k = 4; k < (int)CPU_EWP_JIT_MAX_REGISTERS; k++)
          r[k] = ref_op(cyc[k % (sizeof cyc / sizeof cyc[0])], r[k - 1], r[k - 2]);
        float want0 = r[28] + r[0], want1 = r[27];
        if (i >= sizes[s]) want0 = want1 = 0.0f; /* untouched past the row */
        assert_same(o0[i], want0, "output 0", i);
        assert_same(o1[i], want1, "output 1", i);
      }
    }
  cpu_ewp_jit_free(jit);
}

/* What the JIT refuses: ops without an encoding here, registers past 28,
 * more than 6 operands, operand indices out of range. Without AVX-512,
 * everything. */
static void test_refusals(void** state) {
  (void)state;
  cpu_ewp_jit_instr_t ok[3] = {ins(BP_EW_LOAD_INPUT, 0, 0, 0), ins(BP_OP_neg, 1, 0, 0), ins(BP_EW_STORE, 0, 0, 1)};
  cpu_ewp_jit_t* jit = cpu_ewp_jit_compile(ok, 3, 1, 1, NULL, 0, 0);
  assert_int_equal(jit != NULL, cpu_ewp_jit_enabled());
  cpu_ewp_jit_free(jit);
  assert_false(cpu_ewp_jit_op_ok(BP_OP_exp, 0));
  assert_false(cpu_ewp_jit_op_ok(BP_OP_div, 1)); /* a rounding mode */
  assert_false(cpu_ewp_jit_op_ok(BP_EW_CAST, 0));
  assert_true(cpu_ewp_jit_op_ok(BP_OP_div, 0) == 1);
  cpu_ewp_jit_instr_t exp_op[3] = {ins(BP_EW_LOAD_INPUT, 0, 0, 0), ins(BP_OP_exp, 1, 0, 0),
                                   ins(BP_EW_STORE, 0, 0, 1)};
  assert_null(cpu_ewp_jit_compile(exp_op, 3, 1, 1, NULL, 0, 0));
  cpu_ewp_jit_instr_t high[3] = {ins(BP_EW_LOAD_INPUT, 0, 0, 0), ins(BP_OP_neg, 29, 0, 0),
                                 ins(BP_EW_STORE, 0, 0, 29)};
  assert_null(cpu_ewp_jit_compile(high, 3, 1, 1, NULL, 0, 0));
  assert_null(cpu_ewp_jit_compile(ok, 3, 1, 6, NULL, 0, 0)); /* 7 operands */
  cpu_ewp_jit_instr_t bad_in[3] = {ins(BP_EW_LOAD_INPUT, 0, 3, 0), ins(BP_OP_neg, 1, 0, 0),
                                   ins(BP_EW_STORE, 0, 0, 1)};
  assert_null(cpu_ewp_jit_compile(bad_in, 3, 1, 1, NULL, 0, 0));
  cpu_ewp_jit_instr_t bad_const[3] = {ins(BP_EW_LOAD_CONST, 0, 2, 0), ins(BP_OP_neg, 1, 0, 0),
                                      ins(BP_EW_STORE, 0, 0, 1)};
  float c[2] = {1, 2};
  assert_null(cpu_ewp_jit_compile(bad_const, 3, 1, 0, c, 2, 0));
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_each_op),
      cmocka_unit_test(test_long_chain),
      cmocka_unit_test(test_refusals),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
