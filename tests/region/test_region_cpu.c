/* Compiled regions and elementwise programs on cpu:0 through the public
 * API (backplane/region.h): results against eager ops, refusals with
 * reasons, claims, saved bytes, and bad input. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#define XXH_INLINE_ALL /* xxHash header only: nothing to link */
#include <xxhash.h>

#include <cmocka.h>

#include "cpu_fixture.h"
#include "region/region_builder.h"
#include "region/region_compile.h"

#define NOATTR NULL

static float frand(uint32_t* s) {
  *s = *s * 1664525u + 1013904223u;
  return (float)((*s >> 8) & 0xffff) / 32768.0f - 1.0f;
}
static void fill(float* x, int64_t n, uint32_t seed) {
  for (int64_t i = 0; i < n; i++) x[i] = frand(&seed);
}

/* Runs `r` with args and a workspace when it asks for one. */
static void launch_ok(bp_region_t* r, const bp_tensor_t* const* args, uint32_t n) {
  bp_region_info_t info = {.struct_size = sizeof info};
  assert_int_equal(bp_region_get_info(r, &info), BP_OK);
  bp_buffer_t* ws = NULL;
  if (info.workspace_bytes) assert_int_equal(bp_buffer_allocate(g_dev, 0, info.workspace_bytes, &ws), BP_OK);
  bp_status_t st = bp_region_launch(g_stream, r, args, n, ws);
  if (st != BP_OK) print_error("launch: %s\n", bp_status_message());
  assert_int_equal(st, BP_OK);
  assert_int_equal(bp_stream_synchronize(g_stream), BP_OK);
  bp_buffer_release(ws);
}

/* ---- elementwise programs --------------------------------------------------- */
/* The 8-op chain: sigmoid(max(|-(relu(x*y + 0.5) - y)|, x)). */
static const bp_scalar_t k_half = {.kind = BP_SCALAR_FLOAT, .v.f = 0.5};
static bp_ew_instr_t g_chain[11];
static bp_ew_program_t chain_program(void) {
  int k = 0;
  g_chain[k++] = rb_ins(BP_EW_LOAD_INPUT, 0, 0, 0, 0, 0);
  g_chain[k++] = rb_ins(BP_EW_LOAD_INPUT, 1, 1, 0, 0, 0);
  g_chain[k++] = rb_ins(BP_EW_LOAD_CONST, 2, 0, 0, 0, 0);
  g_chain[k++] = rb_ins(BP_OP_mul, 3, 0, 1, 0, 0);
  g_chain[k++] = rb_ins(BP_OP_add, 3, 3, 2, 0, 0);
  g_chain[k++] = rb_ins(BP_OP_relu, 3, 3, 0, 0, 0);
  g_chain[k++] = rb_ins(BP_OP_sub, 3, 3, 1, 0, 0);
  g_chain[k++] = rb_ins(BP_OP_neg, 3, 3, 0, 0, 0);
  g_chain[k++] = rb_ins(BP_OP_abs, 3, 3, 0, 0, 0);
  g_chain[k++] = rb_ins(BP_OP_maximum, 3, 3, 0, 0, 0);
  g_chain[k++] = rb_ins(BP_OP_sigmoid, 3, 3, 0, 0, 0);
  static bp_ew_instr_t all[12];
  memcpy(all, g_chain, sizeof g_chain);
  all[11] = rb_ins(BP_EW_STORE, 0, 0, 3, 0, 0);
  return rb_program(all, 12, 4, 2, 1, &k_half, 1, BP_DTYPE_F32);
}

/* The same chain as eager ops. */
static bp_tensor_t* chain_eager(bp_tensor_t* x, bp_tensor_t* y) {
  bp_tensor_t *t[8] = {0};
  bp_binary_attrs_t half = {.struct_size = sizeof half, .flags = BP_BINARY_OTHER_IS_SCALAR, .scalar = k_half};
  assert_int_equal(bp_op_mul(g_stream, x, y, NULL, &t[0]), BP_OK);
  assert_int_equal(bp_op_add(g_stream, t[0], NULL, &half, &t[1]), BP_OK);
  assert_int_equal(bp_op_relu(g_stream, t[1], NULL, &t[2]), BP_OK);
  assert_int_equal(bp_op_sub(g_stream, t[2], y, NULL, &t[3]), BP_OK);
  assert_int_equal(bp_op_neg(g_stream, t[3], NULL, &t[4]), BP_OK);
  assert_int_equal(bp_op_abs(g_stream, t[4], NULL, &t[5]), BP_OK);
  assert_int_equal(bp_op_maximum(g_stream, t[5], x, NULL, &t[6]), BP_OK);
  assert_int_equal(bp_op_sigmoid(g_stream, t[6], NULL, &t[7]), BP_OK);
  for (int i = 0; i < 7; i++) bp_tensor_release(t[i]);
  return fx_track(t[7]);
}

static void test_program_chain_matches_eager(void** state) {
  (void)state;
  enum { M = 300, N = 37 };
  static float x[M * N], y[M * N], got[M * N], want[M * N];
  fill(x, M * N, 1);
  fill(y, M * N, 2);
  bp_tensor_t* tx = FX_T(F32, x, M, N);
  bp_tensor_t* ty = FX_T(F32, y, M, N);
  bp_tensor_t* out = FX_T(F32, NULL, M, N);
  bp_ew_program_t prog = chain_program();
  const bp_tensor_t* ins[2] = {tx, ty};
  assert_int_equal(bp_ew_program_run(g_stream, &prog, ins, 2, &out, 1), BP_OK);
  fx_read(out, got, M * N, 4);
  fx_read(chain_eager(tx, ty), want, M * N, 4);
  fx_assert_close(got, want, M * N, 1e-6);

  /* The same program as a compiled EW_PROGRAM region. */
  rb_t b;
  rb_init(&b);
  RB_V(&b, F32, M, N);
  RB_V(&b, F32, M, N);
  RB_V(&b, F32, M, N);
  bp_region_t* r = compile_ok(rb_desc(&b, BP_REGION_EW_PROGRAM, 3, 2, &prog));
  bp_tensor_t* out2 = FX_T(F32, NULL, M, N);
  const bp_tensor_t* args[3] = {tx, ty, out2};
  launch_ok(r, args, 3);
  fx_read(out2, got, M * N, 4);
  fx_assert_close(got, want, M * N, 1e-6);
  bp_region_release(r);
}

/* Programs of every arity over several dtype classes, with broadcasting,
 * converting loads and stores; checked against plain C. */
static void test_program_arity_and_dtypes(void** state) {
  (void)state;
  enum { M = 70, N = 33 };
  /* f64 unary: exp. */
  {
    double x[M * N], got[M * N];
    for (int i = 0; i < M * N; i++) x[i] = (i % 17) * 0.25 - 2;
    bp_tensor_t* tx = FX_T(F64, x, M, N);
    bp_tensor_t* o = FX_T(F64, NULL, M, N);
    bp_ew_instr_t p[3] = {rb_ins(BP_EW_LOAD_INPUT, 0, 0, 0, 0, 0), rb_ins(BP_OP_exp, 1, 0, 0, 0, 0),
                          rb_ins(BP_EW_STORE, 0, 0, 1, 0, 0)};
    bp_ew_program_t prog = rb_program(p, 3, 2, 1, 1, NULL, 0, BP_DTYPE_F64);
    const bp_tensor_t* ins[1] = {tx};
    assert_int_equal(bp_ew_program_run(g_stream, &prog, ins, 1, &o, 1), BP_OK);
    fx_read(o, got, M * N, 8);
    for (int i = 0; i < M * N; i++) assert_true(fabs(got[i] - exp(x[i])) <= 1e-15 * exp(x[i]));
  }
  /* i32 binary with a broadcast row: a * b + a. */
  {
    int32_t a[M * N], bb[N], got[M * N];
    for (int i = 0; i < M * N; i++) a[i] = i % 101 - 50;
    for (int j = 0; j < N; j++) bb[j] = j - 7;
    bp_tensor_t* ta = FX_T(I32, a, M, N);
    bp_tensor_t* tb = FX_T(I32, bb, N);
    bp_tensor_t* o = FX_T(I32, NULL, M, N);
    bp_ew_instr_t p[5] = {rb_ins(BP_EW_LOAD_INPUT, 0, 0, 0, 0, 0), rb_ins(BP_EW_LOAD_INPUT, 1, 1, 0, 0, 0),
                          rb_ins(BP_OP_mul, 2, 0, 1, 0, 0), rb_ins(BP_OP_add, 2, 2, 0, 0, 0),
                          rb_ins(BP_EW_STORE, 0, 0, 2, 0, 0)};
    bp_ew_program_t prog = rb_program(p, 5, 3, 2, 1, NULL, 0, BP_DTYPE_I32);
    const bp_tensor_t* ins[2] = {ta, tb};
    assert_int_equal(bp_ew_program_run(g_stream, &prog, ins, 2, &o, 1), BP_OK);
    fx_read(o, got, M * N, 4);
    for (int i = 0; i < M * N; i++) assert_int_equal(got[i], a[i] * bb[i % N] + a[i]);
  }
  /* Ternary where over a comparison, two outputs (max and the mask as u8). */
  {
    float x[M * N], y[M * N], got[M * N];
    uint8_t mask[M * N];
    fill(x, M * N, 3);
    fill(y, M * N, 4);
    bp_tensor_t* tx = FX_T(F32, x, M, N);
    bp_tensor_t* ty = FX_T(F32, y, M, N);
    bp_tensor_t* o = FX_T(F32, NULL, M, N);
    bp_tensor_t* om = FX_T(U8, NULL, M, N);
    bp_ew_instr_t p[6] = {rb_ins(BP_EW_LOAD_INPUT, 0, 0, 0, 0, 0), rb_ins(BP_EW_LOAD_INPUT, 1, 1, 0, 0, 0),
                          rb_ins(BP_OP_gt, 2, 0, 1, 0, 0), rb_ins(BP_OP_where, 3, 2, 0, 1, 0),
                          rb_ins(BP_EW_STORE, 0, 0, 3, 0, 0), rb_ins(BP_EW_STORE, 0, 1, 2, 0, 0)};
    bp_ew_program_t prog = rb_program(p, 6, 4, 2, 2, NULL, 0, BP_DTYPE_F32);
    const bp_tensor_t* ins[2] = {tx, ty};
    bp_tensor_t* outs[2] = {o, om};
    assert_int_equal(bp_ew_program_run(g_stream, &prog, ins, 2, outs, 2), BP_OK);
    fx_read(o, got, M * N, 4);
    fx_read(om, mask, M * N, 1);
    for (int i = 0; i < M * N; i++) {
      assert_true(got[i] == (x[i] > y[i] ? x[i] : y[i]));
      assert_int_equal(mask[i], x[i] > y[i]);
    }
  }
  /* f16 storage computing in f32, a CAST through bf16, an i32 input loaded
   * as f32: out = bf16(h * 2) + i. */
  {
    uint16_t h[M * N], got[M * N];
    int32_t iv[M * N];
    float hf[M * N];
    for (int i = 0; i < M * N; i++) {
      hf[i] = (float)(i % 64) / 8.0f;
      iv[i] = i % 5;
    }
    bp_tensor_t* tf = FX_T(F32, hf, M, N);
    bp_tensor_t* th = FX_T(F16, NULL, M, N);
    assert_int_equal(bp_op_to_copy(g_stream, tf, &(bp_cast_attrs_t){.struct_size = sizeof(bp_cast_attrs_t), .dtype = BP_DTYPE_F16}, &th), BP_OK);
    (void)h;
    bp_tensor_t* ti = FX_T(I32, iv, M, N);
    bp_tensor_t* o = FX_T(F16, NULL, M, N);
    bp_scalar_t two = {.kind = BP_SCALAR_INT, .v.i = 2};
    bp_ew_instr_t p[7] = {rb_ins(BP_EW_LOAD_INPUT, 0, 0, 0, 0, 0), rb_ins(BP_EW_LOAD_CONST, 1, 0, 0, 0, 0),
                          rb_ins(BP_OP_mul, 0, 0, 1, 0, 0), rb_ins(BP_EW_CAST, 0, 0, 0, 0, BP_DTYPE_BF16),
                          rb_ins(BP_EW_LOAD_INPUT, 2, 1, 0, 0, 0), rb_ins(BP_OP_add, 0, 0, 2, 0, 0),
                          rb_ins(BP_EW_STORE, 0, 0, 0, 0, 0)};
    bp_ew_program_t prog = rb_program(p, 7, 3, 2, 1, &two, 1, BP_DTYPE_F16);
    const bp_tensor_t* ins[2] = {th, ti};
    assert_int_equal(bp_ew_program_run(g_stream, &prog, ins, 2, &o, 1), BP_OK);
    bp_tensor_t* of = FX_T(F32, NULL, M, N);
    assert_int_equal(bp_op_to_copy(g_stream, o, &(bp_cast_attrs_t){.struct_size = sizeof(bp_cast_attrs_t), .dtype = BP_DTYPE_F32}, &of), BP_OK);
    float gf[M * N];
    fx_read(of, gf, M * N, 4);
    for (int i = 0; i < M * N; i++) assert_true(gf[i] == hf[i] * 2 + (float)iv[i]); /* all exact */
    (void)got;
  }
  /* bool compute: logical_and then logical_not. */
  {
    uint8_t a[M * N], c[M * N], got[M * N];
    for (int i = 0; i < M * N; i++) {
      a[i] = i % 3 == 0;
      c[i] = i % 2 == 0;
    }
    bp_tensor_t* ta = FX_T(BOOL, a, M, N);
    bp_tensor_t* tc = FX_T(BOOL, c, M, N);
    bp_tensor_t* o = FX_T(BOOL, NULL, M, N);
    bp_ew_instr_t p[5] = {rb_ins(BP_EW_LOAD_INPUT, 0, 0, 0, 0, 0), rb_ins(BP_EW_LOAD_INPUT, 1, 1, 0, 0, 0),
                          rb_ins(BP_OP_logical_and, 0, 0, 1, 0, 0), rb_ins(BP_OP_logical_not, 0, 0, 0, 0, 0),
                          rb_ins(BP_EW_STORE, 0, 0, 0, 0, 0)};
    bp_ew_program_t prog = rb_program(p, 5, 2, 2, 1, NULL, 0, BP_DTYPE_BOOL);
    const bp_tensor_t* ins[2] = {ta, tc};
    assert_int_equal(bp_ew_program_run(g_stream, &prog, ins, 2, &o, 1), BP_OK);
    fx_read(o, got, M * N, 1);
    for (int i = 0; i < M * N; i++) assert_int_equal(got[i], !(a[i] && c[i]));
  }
}

/* A strided (transposed) input and an output written in place over an
 * input (a declared donation). */
static void test_program_strided_and_in_place(void** state) {
  (void)state;
  enum { M = 40, N = 50 };
  float x[M * N], y[N * M], got[M * N];
  fill(x, M * N, 5);
  fill(y, M * N, 6);
  bp_tensor_t* tx = FX_T(F32, x, M, N);
  bp_tensor_t* ty = FX_T(F32, y, N, M); /* used as its transpose [M, N] */
  bp_tensor_t* yt = NULL;
  assert_int_equal(bp_tensor_permute(ty, (int64_t[]){1, 0}, &yt), BP_OK);
  fx_track(yt);
  bp_ew_instr_t p[4] = {rb_ins(BP_EW_LOAD_INPUT, 0, 0, 0, 0, 0), rb_ins(BP_EW_LOAD_INPUT, 1, 1, 0, 0, 0),
                        rb_ins(BP_OP_sub, 0, 0, 1, 0, 0), rb_ins(BP_EW_STORE, 0, 0, 0, 0, 0)};
  bp_ew_program_t prog = rb_program(p, 4, 2, 2, 1, NULL, 0, BP_DTYPE_F32);
  rb_t b;
  rb_init(&b);
  RB_V(&b, F32, M, N);
  RB_V(&b, F32, M, N);
  RB_V(&b, F32, M, N);
  bp_region_t* r = compile_ok(rb_desc(&b, BP_REGION_EW_PROGRAM, 3, 2, &prog));
  bp_region_info_t info = {.struct_size = sizeof info};
  assert_int_equal(bp_region_get_info(r, &info), BP_OK);
  int donates = 0;
  for (uint32_t k = 0; k < info.num_aliases; k++)
    donates |= info.aliases[k].output == 2 && info.aliases[k].input == 0;
  assert_true(donates);
  const bp_tensor_t* args[3] = {tx, yt, tx}; /* x -= y^T in place */
  launch_ok(r, args, 3);
  fx_read(tx, got, M * N, 4);
  for (int i = 0; i < M; i++)
    for (int j = 0; j < N; j++) assert_true(got[i * N + j] == x[i * N + j] - y[j * M + i]);
  bp_region_release(r);
  /* Partial overlap: never allowed. An input broadcast to the output's
   * shape: not a donation the region declares. */
  rb_init(&b);
  RB_V(&b, F32, 10);
  RB_V(&b, F32, 10);
  RB_V(&b, F32, 10);
  r = compile_ok(rb_desc(&b, BP_REGION_EW_PROGRAM, 3, 2, &prog));
  bp_tensor_t *lo = NULL, *hi = NULL, *bc = NULL;
  assert_int_equal(bp_tensor_as_strided(tx, 1, (int64_t[]){10}, (int64_t[]){1}, (int64_t[]){0}, &lo), BP_OK);
  assert_int_equal(bp_tensor_as_strided(tx, 1, (int64_t[]){10}, (int64_t[]){1}, (int64_t[]){5}, &hi), BP_OK);
  assert_int_equal(bp_tensor_as_strided(tx, 1, (int64_t[]){10}, (int64_t[]){0}, (int64_t[]){0}, &bc), BP_OK);
  fx_track(lo);
  fx_track(hi);
  fx_track(bc);
  const bp_tensor_t* part[3] = {lo, lo, hi};
  fx_assert_status(bp_region_launch(g_stream, r, part, 3, NULL), BP_INVALID_ARGUMENT, "partially overlaps");
  const bp_tensor_t* self_overlap[3] = {lo, lo, bc};
  fx_assert_status(bp_region_launch(g_stream, r, self_overlap, 3, NULL), BP_INVALID_ARGUMENT, "internally overlapping");
  bp_region_release(r);
  /* An EPILOGUE region declares no donation: its output over an input is refused. */
  rb_init(&b);
  uint32_t va = RB_V(&b, F32, 4, 4), vw = RB_V(&b, F32, 4, 4), vo = RB_V(&b, F32, 4, 4), t = RB_V(&b, F32, 4, 4);
  rb_node(&b, BP_OP_mm, NULL, 2, 1, va, vw, t);
  rb_node(&b, BP_OP_relu, NULL, 1, 1, t, vo);
  r = compile_ok(rb_desc(&b, BP_REGION_EPILOGUE, 3, 2, NULL));
  bp_tensor_t* sq = FX_T(F32, x, 4, 4);
  const bp_tensor_t* same[3] = {sq, sq, sq};
  fx_assert_status(bp_region_launch(g_stream, r, same, 3, NULL), BP_INVALID_ARGUMENT, "not a declared donation");
  bp_region_release(r);
}

/* ---- epilogues, patterns, graphs ----------------------------------------------- */
/* linear + gelu + residual add in one EPILOGUE region against the eager
 * ops; 1100 rows of 1024 are three row blocks (512 rows: 2 MiB of f32). */
static void test_epilogue_linear_gelu_residual(void** state) {
  (void)state;
  enum { M = 1100, K = 16, N = 1024 };
  float* x = malloc(sizeof(float) * M * K);
  float* w = malloc(sizeof(float) * N * K);
  float* res = malloc(sizeof(float) * M * N);
  float* got = malloc(sizeof(float) * M * N);
  float* want = malloc(sizeof(float) * M * N);
  static float bias[N];
  fill(x, M * K, 7);
  fill(w, N * K, 8);
  fill(res, M * N, 9);
  fill(bias, N, 10);
  bp_tensor_t* tx = FX_T(F32, x, M, K);
  bp_tensor_t* tw = FX_T(F32, w, N, K);
  bp_tensor_t* tb = FX_T(F32, bias, N);
  bp_tensor_t* tr = FX_T(F32, res, M, N);
  bp_tensor_t* out = FX_T(F32, NULL, M, N);
  rb_t b;
  bp_region_t* r = compile_ok(rb_linear_act_residual(&b, M, K, N, BP_OP_gelu, NOATTR));
  const bp_tensor_t* args[5] = {tx, tw, tb, tr, out};
  launch_ok(r, args, 5);
  fx_read(out, got, M * N, 4);
  bp_tensor_t *l = NULL, *g = NULL, *s = NULL;
  assert_int_equal(bp_op_linear(g_stream, tx, tw, tb, NULL, &l), BP_OK);
  assert_int_equal(bp_op_gelu(g_stream, l, NULL, &g), BP_OK);
  assert_int_equal(bp_op_add(g_stream, g, tr, NULL, &s), BP_OK);
  fx_read(s, want, M * N, 4);
  fx_assert_close(got, want, M * N, 1e-5);
  bp_tensor_release(l);
  bp_tensor_release(g);
  bp_tensor_release(s);
  bp_region_release(r);
  free(x);
  free(w);
  free(res);
  free(got);
  free(want);
}

/* mm + relu with the product kept as an output too; bmm + silu through the
 * node path. */
static void test_epilogue_mm_and_bmm(void** state) {
  (void)state;
  enum { M = 37, K = 19, N = 23 };
  float a[M * K], w[K * N], prod[M * N], got[M * N];
  fill(a, M * K, 11);
  fill(w, K * N, 12);
  bp_tensor_t* ta = FX_T(F32, a, M, K);
  bp_tensor_t* tw = FX_T(F32, w, K, N);
  bp_tensor_t* tp = FX_T(F32, NULL, M, N);
  bp_tensor_t* to = FX_T(F32, NULL, M, N);
  rb_t b;
  rb_init(&b);
  uint32_t va = RB_V(&b, F32, M, K), vw = RB_V(&b, F32, K, N), vp = RB_V(&b, F32, M, N), vo = RB_V(&b, F32, M, N);
  rb_node(&b, BP_OP_mm, NOATTR, 2, 1, va, vw, vp);
  rb_node(&b, BP_OP_relu, NOATTR, 1, 1, vp, vo);
  bp_region_t* r = compile_ok(rb_desc(&b, BP_REGION_EPILOGUE, 4, 2, NULL));
  const bp_tensor_t* args[4] = {ta, tw, tp, to};
  launch_ok(r, args, 4);
  fx_read(tp, prod, M * N, 4);
  fx_read(to, got, M * N, 4);
  for (int i = 0; i < M; i++)
    for (int j = 0; j < N; j++) {
      double s = 0;
      for (int k = 0; k < K; k++) s += (double)a[i * K + k] * w[k * N + j];
      assert_true(fabs(prod[i * N + j] - s) <= 1e-5);
      assert_true(got[i * N + j] == (prod[i * N + j] < 0 ? 0.0f : prod[i * N + j]));
    }
  bp_region_release(r);

  /* bmm: the node path (product into the workspace, then the program). */
  rb_init(&b);
  bp_tensor_t* ba = FX_T(F32, a, 1, M, K);
  bp_tensor_t* bw = FX_T(F32, w, 1, K, N);
  bp_tensor_t* bo = FX_T(F32, NULL, 1, M, N);
  uint32_t xa = RB_V(&b, F32, 1, M, K), xw = RB_V(&b, F32, 1, K, N), xo = RB_V(&b, F32, 1, M, N),
           xt = RB_V(&b, F32, 1, M, N);
  rb_node(&b, BP_OP_bmm, NOATTR, 2, 1, xa, xw, xt);
  rb_node(&b, BP_OP_silu, NOATTR, 1, 1, xt, xo);
  r = compile_ok(rb_desc(&b, BP_REGION_EPILOGUE, 3, 2, NULL));
  bp_region_info_t info = {.struct_size = sizeof info};
  assert_int_equal(bp_region_get_info(r, &info), BP_OK);
  assert_true(info.workspace_bytes >= sizeof(float) * M * N);
  assert_true(info.flops >= 2.0 * M * N * K);
  const bp_tensor_t* bargs[3] = {ba, bw, bo};
  launch_ok(r, bargs, 3);
  fx_read(bo, got, M * N, 4);
  for (int i = 0; i < M * N; i++) {
    float p = prod[i];
    assert_true(fabsf(got[i] - p / (1.0f + expf(-p))) <= 1e-5f);
  }
  bp_region_release(r);
}

/* PATTERN regions: softmax; layer_norm with mean and rstd as temporaries
 * (in the workspace). */
static void test_patterns(void** state) {
  (void)state;
  enum { M = 16, N = 40 };
  float x[M * N], got[M * N], want[M * N];
  fill(x, M * N, 13);
  bp_tensor_t* tx = FX_T(F32, x, M, N);
  bp_tensor_t* o = FX_T(F32, NULL, M, N);
  rb_t b;
  rb_init(&b);
  uint32_t vx = RB_V(&b, F32, M, N), vo = RB_V(&b, F32, M, N);
  bp_softmax_attrs_t sa = {.struct_size = sizeof sa, .dim = -1};
  rb_node(&b, BP_OP_softmax, &sa, 1, 1, vx, vo);
  bp_region_t* r = compile_ok(rb_desc(&b, BP_REGION_PATTERN, 2, 1, NULL));
  const bp_tensor_t* args[2] = {tx, o};
  launch_ok(r, args, 2);
  fx_read(o, got, M * N, 4);
  bp_tensor_t* e = NULL;
  assert_int_equal(bp_op_softmax(g_stream, tx, &sa, &e), BP_OK);
  fx_read(fx_track(e), want, M * N, 4);
  fx_assert_close(got, want, M * N, 1e-6);
  bp_region_release(r);

  rb_init(&b);
  vx = RB_V(&b, F32, M, N);
  vo = RB_V(&b, F32, M, N);
  uint32_t vm = RB_V(&b, F32, M, 1), vs = RB_V(&b, F32, M, 1);
  bp_layer_norm_attrs_t la = {.struct_size = sizeof la, .normalized_rank = 1, .normalized_shape = {N}, .eps = 1e-5};
  rb_node(&b, BP_OP_layer_norm, &la, 3, 3, vx, BP_REGION_VALUE_NONE, BP_REGION_VALUE_NONE, vo, vm, vs);
  r = compile_ok(rb_desc(&b, BP_REGION_PATTERN, 2, 1, NULL));
  bp_region_info_t info = {.struct_size = sizeof info};
  assert_int_equal(bp_region_get_info(r, &info), BP_OK);
  assert_true(info.workspace_bytes >= 2 * sizeof(float) * M);
  launch_ok(r, args, 2);
  fx_read(o, got, M * N, 4);
  for (int i = 0; i < M; i++) {
    double mu = 0, var = 0;
    for (int j = 0; j < N; j++) mu += x[i * N + j];
    mu /= N;
    for (int j = 0; j < N; j++) var += (x[i * N + j] - mu) * (x[i * N + j] - mu);
    var /= N;
    for (int j = 0; j < N; j++)
      assert_true(fabs(got[i * N + j] - (x[i * N + j] - mu) / sqrt(var + 1e-5)) <= 1e-4);
  }
  bp_region_release(r);
}

/* GRAPH regions: all elementwise (one program), and mixed (node by node,
 * temporaries in the workspace). */
static void test_graphs(void** state) {
  (void)state;
  enum { M = 8, N = 30 };
  float x[M * N], y[M * N], got[M * N], want[M * N];
  fill(x, M * N, 14);
  fill(y, M * N, 15);
  bp_tensor_t* tx = FX_T(F32, x, M, N);
  bp_tensor_t* ty = FX_T(F32, y, M, N);
  bp_tensor_t* o = FX_T(F32, NULL, M, N);
  rb_t b;
  rb_init(&b);
  uint32_t vx = RB_V(&b, F32, M, N), vy = RB_V(&b, F32, M, N), vo = RB_V(&b, F32, M, N),
           t0 = RB_V(&b, F32, M, N);
  bp_softmax_attrs_t sa = {.struct_size = sizeof sa, .dim = 1};
  rb_node(&b, BP_OP_softmax, &sa, 1, 1, vx, t0);
  rb_node(&b, BP_OP_mul, NOATTR, 2, 1, t0, vy, vo);
  bp_region_t* r = compile_ok(rb_desc(&b, BP_REGION_GRAPH, 3, 2, NULL));
  const bp_tensor_t* args[3] = {tx, ty, o};
  launch_ok(r, args, 3);
  fx_read(o, got, M * N, 4);
  bp_tensor_t *s = NULL, *m = NULL;
  assert_int_equal(bp_op_softmax(g_stream, tx, &sa, &s), BP_OK);
  assert_int_equal(bp_op_mul(g_stream, s, ty, NULL, &m), BP_OK);
  fx_read(m, want, M * N, 4);
  fx_assert_close(got, want, M * N, 1e-6);
  bp_tensor_release(s);
  bp_tensor_release(m);
  bp_region_release(r);

  /* x*y, tanh, then x - that, as a graph of elementwise nodes. */
  rb_init(&b);
  vx = RB_V(&b, F32, M, N);
  vy = RB_V(&b, F32, M, N);
  vo = RB_V(&b, F32, M, N);
  t0 = RB_V(&b, F32, M, N);
  uint32_t t1 = RB_V(&b, F32, M, N);
  rb_node(&b, BP_OP_mul, NOATTR, 2, 1, vx, vy, t0);
  rb_node(&b, BP_OP_tanh, NOATTR, 1, 1, t0, t1);
  rb_node(&b, BP_OP_sub, NOATTR, 2, 1, vx, t1, vo);
  r = compile_ok(rb_desc(&b, BP_REGION_GRAPH, 3, 2, NULL));
  bp_region_info_t info = {.struct_size = sizeof info};
  assert_int_equal(bp_region_get_info(r, &info), BP_OK);
  assert_int_equal(info.workspace_bytes, 0); /* all in registers */
  launch_ok(r, args, 3);
  fx_read(o, got, M * N, 4);
  for (int i = 0; i < M * N; i++) want[i] = x[i] - tanhf(x[i] * y[i]);
  fx_assert_close(got, want, M * N, 1e-6);
  bp_region_release(r);
}

/* ---- refusals and claims --------------------------------------------------------- */
static void test_refusals_have_reasons(void** state) {
  (void)state;
  rb_t b;
  rb_init(&b);
  uint32_t vx = RB_V(&b, F32, 4, 5), vo = RB_V(&b, F32, 4, 5);
  bp_reduce_attrs_t ca = {.struct_size = sizeof ca};
  (void)ca;
  rb_node(&b, BP_OP_abs, NOATTR, 1, 1, vx, vo);
  bp_region_t* r = (bp_region_t*)1;
  bp_support_t why = {.struct_size = sizeof why};
  fx_assert_status(bp_region_compile(g_dev, rb_desc(&b, BP_REGION_PATTERN, 2, 1, NULL), &why, &r),
                   BP_UNIMPLEMENTED, "not a fused pattern");
  assert_null(r);
  assert_int_equal(why.supported, 0);
  assert_int_equal(why.reason, BP_SUPPORT_OP);
  assert_non_null(strstr(why.message, "not a fused pattern"));
  assert_int_equal(bp_status_support_reason(), BP_SUPPORT_OP);

  /* An epilogue the CPU does not fuse (leaky_relu's slope is an attribute). */
  rb_init(&b);
  uint32_t va = RB_V(&b, F32, 4, 3), vw = RB_V(&b, F32, 3, 5), vo2 = RB_V(&b, F32, 4, 5), t = RB_V(&b, F32, 4, 5);
  bp_leaky_relu_attrs_t lr = {.struct_size = sizeof lr, .negative_slope = 0.2};
  rb_node(&b, BP_OP_mm, NOATTR, 2, 1, va, vw, t);
  rb_node(&b, BP_OP_leaky_relu, &lr, 1, 1, t, vo2);
  fx_assert_status(bp_region_compile(g_dev, rb_desc(&b, BP_REGION_EPILOGUE, 3, 2, NULL), &why, &r),
                   BP_UNIMPLEMENTED, "refused the region");
  assert_int_equal(why.supported, 0);
  assert_true(why.reason != BP_SUPPORT_OK);
}

static void test_claim_groups_cpu(void** state) {
  (void)state;
  rb_t b;
  rb_init(&b);
  uint32_t va = RB_V(&b, F32, 8, 4), vw = RB_V(&b, F32, 4, 6), vb = RB_V(&b, F32, 6), vo = RB_V(&b, F32, 8, 6);
  uint32_t t0 = RB_V(&b, F32, 8, 6), t1 = RB_V(&b, F32, 8, 6), t2 = RB_V(&b, F32, 8, 6), t3 = RB_V(&b, F32, 8, 6);
  bp_softmax_attrs_t sa = {.struct_size = sizeof sa, .dim = 1};
  rb_node(&b, BP_OP_mm, NOATTR, 2, 1, va, vw, t0);     /* 0 */
  rb_node(&b, BP_OP_add, NOATTR, 2, 1, t0, vb, t1);    /* 1: joins 0 */
  rb_node(&b, BP_OP_relu, NOATTR, 1, 1, t1, t2);       /* 2: joins 0 */
  rb_node(&b, BP_OP_softmax, &sa, 1, 1, t2, t3);       /* 3: own group */
  rb_node(&b, BP_OP_mul, NOATTR, 2, 1, t3, t2, vo);    /* 4: not with 0 (convexity through 3) */
  uint32_t groups[5];
  bp_support_t rs[5];
  bp_support_t* rp[5];
  for (int i = 0; i < 5; i++) {
    rs[i].struct_size = sizeof rs[i];
    rp[i] = &rs[i];
  }
  assert_int_equal(bp_device_claim_region(g_dev, rb_desc(&b, BP_REGION_GRAPH, 4, 3, NULL), groups, rp), BP_OK);
  assert_true(groups[0] != 0);
  assert_int_equal(groups[1], groups[0]);
  assert_int_equal(groups[2], groups[0]);
  assert_true(groups[3] != 0 && groups[3] != groups[0]);
  assert_true(groups[4] != 0 && groups[4] != groups[0] && groups[4] != groups[3]);
  for (int i = 0; i < 5; i++) assert_int_equal(rs[i].supported, 1);
  /* A claim is offered GRAPH regions only. */
  fx_assert_status(bp_device_claim_region(g_dev, rb_desc(&b, BP_REGION_EPILOGUE, 4, 3, NULL), groups, rp),
                   BP_INVALID_ARGUMENT, "GRAPH");
}

/* The core's fallback for a plugin without region_claim (the template:
 * add and relu in f32): every supported node its own group. */
static void test_claim_fallback_template(void** state) {
  (void)state;
  bp_device_t* tdev = NULL;
  if (bp_context_find_device(g_ctx, "template:0", &tdev) != BP_OK) {
    print_error("the template plugin is not loaded: %s\n", bp_status_message());
    fail();
  }
  rb_t b;
  rb_init(&b);
  uint32_t vx = RB_V(&b, F32, 4, 4), vo = RB_V(&b, F32, 4, 4), t0 = RB_V(&b, F32, 4, 4), t1 = RB_V(&b, F32, 4, 4);
  rb_node(&b, BP_OP_add, NOATTR, 2, 1, vx, vx, t0);
  rb_node(&b, BP_OP_relu, NOATTR, 1, 1, t0, t1);
  rb_node(&b, BP_OP_mul, NOATTR, 2, 1, t1, vx, vo);
  uint32_t groups[3];
  bp_support_t rs[3];
  bp_support_t* rp[3] = {&rs[0], &rs[1], &rs[2]};
  for (int i = 0; i < 3; i++) rs[i].struct_size = sizeof rs[i];
  assert_int_equal(bp_device_claim_region(tdev, rb_desc(&b, BP_REGION_GRAPH, 2, 1, NULL), groups, rp), BP_OK);
  assert_int_equal(groups[0], 1);
  assert_int_equal(groups[1], 2);
  assert_int_equal(groups[2], 0);
  assert_int_equal(rs[2].supported, 0);
  assert_int_equal(rs[2].reason, BP_SUPPORT_OP);
  assert_non_null(strstr(rs[2].message, "mul"));
  /* ... and no compiled regions: refused with reason DEVICE. */
  bp_region_t* r = NULL;
  bp_support_t why = {.struct_size = sizeof why};
  fx_assert_status(bp_region_compile(tdev, rb_desc(&b, BP_REGION_GRAPH, 2, 1, NULL), &why, &r),
                   BP_UNIMPLEMENTED, "no exec table");
  assert_int_equal(why.reason, BP_SUPPORT_DEVICE);
  /* and no cost estimates. */
  bp_tensor_desc_t d = b.vals[0];
  const bp_tensor_desc_t* dp[3] = {&d, &d, &d};
  bp_op_call_t call = {.struct_size = sizeof call, .op_id = BP_OP_add, .num_inputs = 2, .num_outputs = 1,
                       .compute_dtype = BP_DTYPE_F32, .inputs = dp, .outputs = dp + 2};
  bp_cost_estimate_t ce = {.struct_size = sizeof ce};
  fx_assert_status(bp_device_estimate_cost(tdev, &call, &ce), BP_UNIMPLEMENTED, "no cost estimates");
  assert_int_equal(bp_device_estimate_cost(g_dev, &call, &ce), BP_OK);
  assert_true(ce.time_ns > 0);
}

/* ---- saved bytes ------------------------------------------------------------------- */
/* Rewrites the core header's checksum (as bp_region_serialize computes it:
 * XXH3-64 of bytes 0..184 seeding the one of bytes 192..end). */
static void reseal(unsigned char* p, uint64_t size) {
  uint64_t h = (uint64_t)XXH3_64bits(p, 184);
  h = (uint64_t)XXH3_64bits_withSeed(p + 192, (size_t)(size - 192), h);
  memcpy(p + 184, &h, 8);
}

static void test_serialize_round_trip_and_rejects(void** state) {
  (void)state;
  enum { M = 20, N = 9 };
  float x[M * N], y[M * N], got[M * N], want[M * N];
  fill(x, M * N, 16);
  fill(y, M * N, 17);
  bp_tensor_t* tx = FX_T(F32, x, M, N);
  bp_tensor_t* ty = FX_T(F32, y, M, N);
  bp_tensor_t* o = FX_T(F32, NULL, M, N);
  rb_t b;
  rb_init(&b);
  uint32_t vx = RB_V(&b, F32, M, N), vy = RB_V(&b, F32, M, N), vo = RB_V(&b, F32, M, N), t0 = RB_V(&b, F32, M, N);
  bp_gelu_attrs_t ga = {.struct_size = sizeof ga, .approximate = BP_GELU_TANH};
  rb_node(&b, BP_OP_gelu, &ga, 1, 1, vx, t0);
  rb_node(&b, BP_OP_div, NOATTR, 2, 1, t0, vy, vo);
  bp_region_t* r = compile_ok(rb_desc(&b, BP_REGION_GRAPH, 3, 2, NULL));
  uint64_t size = 0;
  assert_int_equal(bp_region_serialize(r, NULL, 0, &size), BP_OK);
  unsigned char* bytes = malloc(size);
  unsigned char* bad = malloc(size);
  fx_assert_status(bp_region_serialize(r, bytes, size - 1, &size), BP_RESOURCE_EXHAUSTED, "needed");
  assert_int_equal(bp_region_serialize(r, bytes, size, &size), BP_OK);
  bp_region_t* r2 = NULL;
  assert_int_equal(bp_region_deserialize(g_dev, bytes, size, &r2), BP_OK);
  assert_int_equal(bp_region_num_args(r2), 3);
  assert_int_equal(bp_region_num_inputs(r2), 2);
  const bp_tensor_t* args[3] = {tx, ty, o};
  launch_ok(r2, args, 3);
  fx_read(o, got, M * N, 4);
  launch_ok(r, args, 3);
  fx_read(o, want, M * N, 4);
  assert_memory_equal(got, want, sizeof got);
  bp_region_release(r2);

  /* Every single flipped byte is caught (checksum), never trusted. */
  for (uint64_t i = 0; i < size; i += 7) {
    memcpy(bad, bytes, size);
    bad[i] ^= 0x5a;
    r2 = NULL;
    bp_status_t st = bp_region_deserialize(g_dev, bad, size, &r2);
    assert_true(st == BP_DATA_LOSS || st == BP_FAILED_PRECONDITION);
    assert_null(r2);
  }
  memcpy(bad, bytes, size);
  bad[size - 3] ^= 1;
  fx_assert_status(bp_region_deserialize(g_dev, bad, size, &r2), BP_DATA_LOSS, "checksum");
  fx_assert_status(bp_region_deserialize(g_dev, bytes, size - 5, &r2), BP_DATA_LOSS, "truncated");
  fx_assert_status(bp_region_deserialize(g_dev, bytes, 100, &r2), BP_DATA_LOSS, "truncated");
  memcpy(bad, bytes, size);
  bad[0] = 'X';
  fx_assert_status(bp_region_deserialize(g_dev, bad, size, &r2), BP_DATA_LOSS, "magic");
  /* Foreign bytes with a valid checksum: another backend, another device. */
  memcpy(bad, bytes, size);
  memcpy(bad + 32, "vulkan", 7);
  reseal(bad, size);
  fx_assert_status(bp_region_deserialize(g_dev, bad, size, &r2), BP_FAILED_PRECONDITION, "saved for backend 'vulkan'");
  memcpy(bad, bytes, size);
  memcpy(bad + 112, "another device", 15);
  reseal(bad, size);
  fx_assert_status(bp_region_deserialize(g_dev, bad, size, &r2), BP_FAILED_PRECONDITION, "saved for device");
  /* The plugin's own checks behind a valid core header: its payload
   * truncated or corrupted, then resealed. */
  uint64_t payload_at = 192 + 3 * 72;
  memcpy(bad, bytes, size);
  bad[payload_at + 60] ^= 0x11;
  reseal(bad, size);
  fx_assert_status(bp_region_deserialize(g_dev, bad, size, &r2), BP_DATA_LOSS, "cpu: region bytes");
  memcpy(bad, bytes, size);
  memcpy(bad + payload_at + 16, "9.9.9", 6);
  reseal(bad, size);
  fx_assert_status(bp_region_deserialize(g_dev, bad, size, &r2), BP_FAILED_PRECONDITION, "plugin version");
  free(bytes);
  free(bad);
  bp_region_release(r);
}

/* ---- bad input ------------------------------------------------------------------------ */
static void test_bad_regions(void** state) {
  (void)state;
  bp_region_t* r = NULL;
  rb_t b;
  rb_init(&b);
  uint32_t vx = RB_V(&b, F32, 4, 5), vo = RB_V(&b, F32, 4, 5);
  rb_node(&b, BP_OP_relu, NOATTR, 1, 1, vx, vo);
  const bp_region_desc_t* d = rb_desc(&b, BP_REGION_GRAPH, 2, 1, NULL);
  fx_assert_status(bp_region_compile(NULL, d, NULL, &r), BP_INVALID_ARGUMENT, "device");
  fx_assert_status(bp_region_compile(g_dev, NULL, NULL, &r), BP_INVALID_ARGUMENT, "region");
  fx_assert_status(bp_region_compile(g_dev, d, NULL, NULL), BP_INVALID_ARGUMENT, "out");
  b.ids[0][0] = 7; /* value out of range */
  fx_assert_status(bp_region_compile(g_dev, d, NULL, &r), BP_INVALID_ARGUMENT, "input 0 is value 7 of 2");
  b.ids[0][0] = vx;
  b.ids[0][1] = vx; /* writes an input */
  fx_assert_status(bp_region_compile(g_dev, d, NULL, &r), BP_INVALID_ARGUMENT, "an input argument");
  b.ids[0][1] = vo;
  b.vals[vo].sizes[1] = 6; /* the op gives [4, 5] */
  fx_assert_status(bp_region_compile(g_dev, d, NULL, &r), BP_INVALID_ARGUMENT, "the op gives");
  b.vals[vo].sizes[1] = 5;
  b.vals[vx].dtype = 99;
  fx_assert_status(bp_region_compile(g_dev, d, NULL, &r), BP_INVALID_ARGUMENT, "invalid dtype");
  b.vals[vx].dtype = BP_DTYPE_F32;
  b.desc.kind = 77;
  fx_assert_status(bp_region_compile(g_dev, d, NULL, &r), BP_INVALID_ARGUMENT, "unknown region kind");
  b.desc.kind = BP_REGION_GRAPH;
  b.nodes[0].num_inputs = 2;
  fx_assert_status(bp_region_compile(g_dev, d, NULL, &r), BP_INVALID_ARGUMENT, "the op takes");
  b.nodes[0].num_inputs = 1;
  /* A temporary read before any node writes it. */
  rb_init(&b);
  vx = RB_V(&b, F32, 4);
  vo = RB_V(&b, F32, 4);
  uint32_t t = RB_V(&b, F32, 4);
  rb_node(&b, BP_OP_relu, NOATTR, 1, 1, t, vo);
  fx_assert_status(bp_region_compile(g_dev, rb_desc(&b, BP_REGION_GRAPH, 2, 1, NULL), NULL, &r),
                   BP_INVALID_ARGUMENT, "topological");
  /* An output argument no node writes. */
  rb_init(&b);
  vx = RB_V(&b, F32, 4);
  vo = RB_V(&b, F32, 4);
  uint32_t v2 = RB_V(&b, F32, 4);
  rb_node(&b, BP_OP_relu, NOATTR, 1, 1, vx, vo);
  fx_assert_status(bp_region_compile(g_dev, rb_desc(&b, BP_REGION_GRAPH, 3, 1, NULL), NULL, &r),
                   BP_INVALID_ARGUMENT, "written by no node");
  (void)v2;
  /* Malformed programs. */
  bp_ew_instr_t p[2] = {rb_ins(BP_EW_LOAD_INPUT, 0, 0, 0, 0, 0), rb_ins(BP_EW_STORE, 0, 0, 1, 0, 0)};
  bp_ew_program_t prog = rb_program(p, 2, 2, 1, 1, NULL, 0, BP_DTYPE_F32);
  rb_init(&b);
  RB_V(&b, F32, 4);
  RB_V(&b, F32, 4);
  fx_assert_status(bp_region_compile(g_dev, rb_desc(&b, BP_REGION_EW_PROGRAM, 2, 1, &prog), NULL, &r),
                   BP_INVALID_ARGUMENT, "no earlier instruction wrote");
  p[1] = rb_ins(0x7777, 1, 0, 0, 0, 0);
  fx_assert_status(bp_region_compile(g_dev, rb_desc(&b, BP_REGION_EW_PROGRAM, 2, 1, &prog), NULL, &r),
                   BP_INVALID_ARGUMENT, "opcode 0x7777");
  p[1] = rb_ins(BP_EW_STORE, 0, 3, 0, 0, 0);
  fx_assert_status(bp_region_compile(g_dev, rb_desc(&b, BP_REGION_EW_PROGRAM, 2, 1, &prog), NULL, &r),
                   BP_INVALID_ARGUMENT, "output index");
  assert_null(r);
}

static void test_bad_launches(void** state) {
  (void)state;
  enum { N = 12 };
  float x[N];
  fill(x, N, 18);
  bp_tensor_t* tx = FX_T(F32, x, N);
  bp_tensor_t* o = FX_T(F32, NULL, N);
  bp_tensor_t* o_wrong = FX_T(F32, NULL, N + 1);
  bp_tensor_t* o_i32 = FX_T(I32, NULL, N);
  rb_t b;
  rb_init(&b);
  uint32_t vx = RB_V(&b, F32, N), vo = RB_V(&b, F32, N);
  rb_node(&b, BP_OP_exp, NOATTR, 1, 1, vx, vo);
  bp_region_t* r = compile_ok(rb_desc(&b, BP_REGION_GRAPH, 2, 1, NULL));
  const bp_tensor_t* args[2] = {tx, o};
  fx_assert_status(bp_region_launch(NULL, r, args, 2, NULL), BP_INVALID_ARGUMENT, "stream");
  fx_assert_status(bp_region_launch(g_stream, NULL, args, 2, NULL), BP_INVALID_ARGUMENT, "region");
  fx_assert_status(bp_region_launch(g_stream, r, NULL, 2, NULL), BP_INVALID_ARGUMENT, "args is NULL");
  fx_assert_status(bp_region_launch(g_stream, r, args, 1, NULL), BP_INVALID_ARGUMENT, "takes 2 arguments");
  const bp_tensor_t* nul[2] = {tx, NULL};
  fx_assert_status(bp_region_launch(g_stream, r, nul, 2, NULL), BP_INVALID_ARGUMENT, "output 0 is NULL");
  const bp_tensor_t* wrong[2] = {tx, o_wrong};
  fx_assert_status(bp_region_launch(g_stream, r, wrong, 2, NULL), BP_INVALID_ARGUMENT, "compiled for");
  const bp_tensor_t* wrong_dt[2] = {tx, o_i32};
  fx_assert_status(bp_region_launch(g_stream, r, wrong_dt, 2, NULL), BP_INVALID_ARGUMENT, "compiled for");
  /* A stream of another device. */
  bp_device_t* d1 = NULL;
  assert_int_equal(bp_context_find_device(g_ctx, "cpu:1", &d1), BP_OK);
  bp_stream_t* s1 = NULL;
  assert_int_equal(bp_stream_create(d1, NULL, &s1), BP_OK);
  fx_assert_status(bp_region_launch(s1, r, args, 2, NULL), BP_INVALID_ARGUMENT, "compiled for device 'cpu:0'");
  bp_tensor_t* t1 = NULL;
  assert_int_equal(bp_tensor_create(d1, BP_DTYPE_F32, 1, (int64_t[]){N}, &t1), BP_OK);
  const bp_tensor_t* other_dev[2] = {t1, o};
  fx_assert_status(bp_region_launch(g_stream, r, other_dev, 2, NULL), BP_INVALID_ARGUMENT, "is on device 'cpu:1'");
  bp_ew_instr_t p[3] = {rb_ins(BP_EW_LOAD_INPUT, 0, 0, 0, 0, 0), rb_ins(BP_OP_exp, 1, 0, 0, 0, 0),
                        rb_ins(BP_EW_STORE, 0, 0, 1, 0, 0)};
  bp_ew_program_t prog = rb_program(p, 3, 2, 1, 1, NULL, 0, BP_DTYPE_F32);
  const bp_tensor_t* in1[1] = {t1};
  fx_assert_status(bp_ew_program_run(g_stream, &prog, in1, 1, &o, 1), BP_INVALID_ARGUMENT, "is on device 'cpu:1'");
  const bp_tensor_t* in0[1] = {tx};
  fx_assert_status(bp_ew_program_run(g_stream, &prog, in0, 1, &o_wrong, 1), BP_INVALID_ARGUMENT, "has shape");
  fx_assert_status(bp_ew_program_run(g_stream, NULL, in0, 1, &o, 1), BP_INVALID_ARGUMENT, "program");
  fx_assert_status(bp_ew_program_run(g_stream, &prog, in0, 2, &o, 1), BP_INVALID_ARGUMENT, "takes 1 inputs");
  bp_tensor_release(t1);
  bp_stream_release(s1);
  /* A workspace the region needs but did not get. */
  rb_init(&b);
  vx = RB_V(&b, F32, 3, 4);
  vo = RB_V(&b, F32, 3, 4);
  uint32_t t = RB_V(&b, F32, 3, 4);
  bp_softmax_attrs_t sa = {.struct_size = sizeof sa, .dim = 1};
  rb_node(&b, BP_OP_softmax, &sa, 1, 1, vx, t);
  rb_node(&b, BP_OP_softmax, &sa, 1, 1, t, vo);
  bp_region_t* rw = compile_ok(rb_desc(&b, BP_REGION_GRAPH, 2, 1, NULL));
  bp_tensor_t* a = FX_T(F32, NULL, 3, 4);
  bp_tensor_t* c = FX_T(F32, NULL, 3, 4);
  const bp_tensor_t* wargs[2] = {a, c};
  fx_assert_status(bp_region_launch(g_stream, rw, wargs, 2, NULL), BP_INVALID_ARGUMENT, "needs a workspace");
  bp_buffer_t* small = NULL;
  assert_int_equal(bp_buffer_allocate(g_dev, 0, 8, &small), BP_OK);
  fx_assert_status(bp_region_launch(g_stream, rw, wargs, 2, small), BP_INVALID_ARGUMENT, "workspace");
  bp_buffer_release(small);
  bp_region_release(rw);
  bp_region_info_t info = {.struct_size = 8};
  fx_assert_status(bp_region_get_info(r, &info), BP_INVALID_ARGUMENT, "bp_region_info_t");
  bp_region_release(r);
}

static int setup_two_devices(void** state) {
  setenv("BP_CPU_DEVICES", "2", 1);
  return fx_setup(state);
}

int main(void) {
  const struct CMUnitTest tests[] = {
#define T(f) cmocka_unit_test_teardown(f, fx_release_all)
      T(test_program_chain_matches_eager),
      T(test_program_arity_and_dtypes),
      T(test_program_strided_and_in_place),
      T(test_epilogue_linear_gelu_residual),
      T(test_epilogue_mm_and_bmm),
      T(test_patterns),
      T(test_graphs),
      T(test_refusals_have_reasons),
      T(test_claim_groups_cpu),
      T(test_claim_fallback_template),
      T(test_serialize_round_trip_and_rejects),
      T(test_bad_regions),
      T(test_bad_launches),
#undef T
  };
  return cmocka_run_group_tests(tests, setup_two_devices, fx_teardown);
}
