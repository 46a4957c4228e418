/* The fused quantizations (rms_norm_quant, add_rms_norm_quant,
 * swiglu_quant) through the public API (docs/semantics.md, "Fused
 * quantization"): their shape and dtype rules, and on cpu:0 for f32 inputs
 * the same codes, scales and residual as the unfused ops in sequence
 * (rms_norm / add_rms_norm / swiglu, then quantize or quantize_dynamic),
 * bit for bit; scale_ub clamping. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ops_fixture.h"

static bp_stream_t* g_stream;

static bp_tensor_t* cpu_f32(uint32_t rank, const int64_t* sizes, const float* data) {
  bp_tensor_t* t = ops_tensor(g_cpu, BP_DTYPE_F32, rank, sizes);
  uint64_t n = sizeof(float);
  for (uint32_t d = 0; d < rank; d++) n *= (uint64_t)sizes[d];
  assert_ok(bp_tensor_write(g_stream, t, data, n));
  return t;
}

static void* read_all(const bp_tensor_t* t) {
  bp_tensor_desc_t d = {.struct_size = sizeof d};
  assert_ok(bp_tensor_get_desc(t, &d));
  uint64_t n = bp_dtype_size(d.dtype);
  for (uint32_t k = 0; k < d.rank; k++) n *= (uint64_t)d.sizes[k];
  void* p = malloc(n ? n : 1);
  assert_non_null(p);
  assert_ok(bp_tensor_read(g_stream, t, p, n));
  assert_ok(bp_stream_synchronize(g_stream));
  return p;
}

/* The two tensors hold the same bytes. */
static void assert_same(const bp_tensor_t* a, const bp_tensor_t* b, uint64_t bytes, const char* what) {
  void *pa = read_all(a), *pb = read_all(b);
  if (memcmp(pa, pb, bytes) != 0) {
    const unsigned char *x = pa, *y = pb;
    uint64_t i = 0;
    while (x[i] == y[i]) i++;
    print_error("%s: byte %llu differs (%u vs %u)\n", what, (unsigned long long)i, x[i], y[i]);
    free(pa), free(pb);
    fail();
  }
  free(pa), free(pb);
}

static float* random_f32(int64_t n, uint64_t seed, float lo, float hi) {
  float* v = malloc(sizeof(float) * (size_t)n);
  assert_non_null(v);
  for (int64_t i = 0; i < n; i++) {
    seed ^= seed << 13, seed ^= seed >> 7, seed ^= seed << 17;
    v[i] = lo + (hi - lo) * (float)((seed >> 11) & 0xFFFFFF) / (float)0x1000000;
  }
  return v;
}

#define ROWS 6
#define COLS 300

/* rms_norm_quant == quantize(_dynamic)(rms_norm(x, w)): dynamic i8 and
 * static e4m3fn (saturating). */
static void test_rms_norm_quant_is_the_composition(void** state) {
  (void)state;
  int64_t xs[2] = {ROWS, COLS}, ws[1] = {COLS}, ss[1] = {1};
  float *x = random_f32(ROWS * COLS, 3, -3.0f, 3.0f), *w = random_f32(COLS, 5, 0.5f, 1.5f);
  float sv = 0.004f; /* |y| up to ~2.5: e4m3fn saturates past 448 * 0.004 */
  bp_tensor_t *tx = cpu_f32(2, xs, x), *tw = cpu_f32(1, ws, w), *ts = cpu_f32(1, ss, &sv);
  bp_tensor_t *y = NULL, *codes = NULL, *scale = NULL, *ref = NULL, *ref_scale = NULL;
  assert_ok(bp_op_rms_norm(g_stream, tx, tw, NULL, &y));
  ops_track(y);
  for (int stat = 0; stat < 2; stat++) {
    uint32_t q = stat ? BP_DTYPE_F8E4M3FN : BP_DTYPE_I8;
    codes = scale = ref = ref_scale = NULL; /* new outputs */
    bp_fused_quant_attrs_t fa = {.struct_size = sizeof fa, .qdtype = q};
    assert_ok(bp_op_rms_norm_quant(g_stream, tx, tw, stat ? ts : NULL, &fa, &codes, &scale));
    ops_track(codes), ops_track(scale);
    bp_quantize_attrs_t qa = {.struct_size = sizeof qa, .qdtype = q, .axis = -1};
    if (stat) {
      assert_ok(bp_op_quantize(g_stream, y, ts, NULL, &qa, &ref));
      ops_track(ref);
      float* s = read_all(scale);
      for (int r = 0; r < ROWS; r++) assert_true(s[r] == sv);
      free(s);
    } else {
      assert_ok(bp_op_quantize_dynamic(g_stream, y, &qa, &ref, &ref_scale));
      ops_track(ref), ops_track(ref_scale);
      assert_same(scale, ref_scale, sizeof(float) * ROWS, "dynamic scales");
    }
    assert_same(codes, ref, ROWS * COLS, stat ? "static e4m3fn codes" : "dynamic i8 codes");
  }
  free(x), free(w);
}

/* add_rms_norm_quant == add_rms_norm, then quantize_dynamic of out;
 * residual_out identical. */
static void test_add_rms_norm_quant_is_the_composition(void** state) {
  (void)state;
  int64_t xs[2] = {ROWS, COLS};
  float *x = random_f32(ROWS * COLS, 7, -3.0f, 3.0f), *r = random_f32(ROWS * COLS, 9, -3.0f, 3.0f);
  bp_tensor_t *tx = cpu_f32(2, xs, x), *tr = cpu_f32(2, xs, r);
  bp_tensor_t *out = NULL, *res = NULL, *codes = NULL, *res_q = NULL, *scale = NULL, *ref = NULL, *ref_scale = NULL;
  bp_fused_quant_attrs_t fa = {.struct_size = sizeof fa, .qdtype = BP_DTYPE_F8E5M2, .eps = 1e-6};
  bp_rms_norm_attrs_t ra = {.struct_size = sizeof ra, .normalized_rank = 1, .eps = 1e-6};
  assert_ok(bp_op_add_rms_norm(g_stream, tx, tr, NULL, &ra, &out, &res));
  ops_track(out), ops_track(res);
  assert_ok(bp_op_add_rms_norm_quant(g_stream, tx, tr, NULL, NULL, &fa, &codes, &res_q, &scale));
  ops_track(codes), ops_track(res_q), ops_track(scale);
  bp_quantize_attrs_t qa = {.struct_size = sizeof qa, .qdtype = BP_DTYPE_F8E5M2, .axis = -1};
  assert_ok(bp_op_quantize_dynamic(g_stream, out, &qa, &ref, &ref_scale));
  ops_track(ref), ops_track(ref_scale);
  assert_same(res_q, res, sizeof(float) * ROWS * COLS, "residual_out");
  assert_same(scale, ref_scale, sizeof(float) * ROWS, "scales");
  assert_same(codes, ref, ROWS * COLS, "e5m2 codes");
  free(x), free(r);
}

/* swiglu_quant == quantize_dynamic(swiglu(x)); with scale_ub under the
 * rows' amax every scale is scale_ub / 127. */
static void test_swiglu_quant_is_the_composition(void** state) {
  (void)state;
  int64_t xs[2] = {ROWS, 2 * COLS};
  float* x = random_f32(ROWS * 2 * COLS, 11, -4.0f, 4.0f);
  bp_tensor_t *tx = cpu_f32(2, xs, x), *y = NULL, *codes = NULL, *scale = NULL, *ref = NULL, *ref_scale = NULL;
  assert_ok(bp_op_swiglu(g_stream, tx, NULL, &y));
  ops_track(y);
  bp_fused_quant_attrs_t fa = {.struct_size = sizeof fa, .qdtype = BP_DTYPE_I8};
  assert_ok(bp_op_swiglu_quant(g_stream, tx, NULL, &fa, &codes, &scale));
  ops_track(codes), ops_track(scale);
  bp_quantize_attrs_t qa = {.struct_size = sizeof qa, .qdtype = BP_DTYPE_I8, .axis = -1};
  assert_ok(bp_op_quantize_dynamic(g_stream, y, &qa, &ref, &ref_scale));
  ops_track(ref), ops_track(ref_scale);
  assert_same(scale, ref_scale, sizeof(float) * ROWS, "scales");
  assert_same(codes, ref, ROWS * COLS, "i8 codes");

  fa.scale_ub = 1.0; /* every row's amax is far above 1 */
  codes = scale = NULL;
  assert_ok(bp_op_swiglu_quant(g_stream, tx, NULL, &fa, &codes, &scale));
  ops_track(codes), ops_track(scale);
  float* s = read_all(scale);
  int8_t* c = read_all(codes);
  int saturated = 0;
  for (int r = 0; r < ROWS; r++) assert_true(s[r] == (float)(1.0 / 127.0));
  for (int i = 0; i < ROWS * COLS; i++) saturated += c[i] == 127 || c[i] == -128;
  assert_true(saturated > 0);
  free(s), free(c), free(x);
}

static bp_status_t infer(uint32_t op, const bp_tensor_t* const* in, uint32_t n, const void* attrs,
                         bp_tensor_desc_t* out, uint32_t nout) {
  memset(out, 0, sizeof(*out) * nout);
  return ops_infer(op, in, n, attrs, out, nout);
}

/* Shape, dtype and attribute errors name the operand or field. */
static void test_fused_quant_rules(void** state) {
  (void)state;
  bp_tensor_desc_t o2[2], o3[3];
  bp_fused_quant_attrs_t a = {.struct_size = sizeof a, .qdtype = BP_DTYPE_F8E4M3FN};
#define INF(op, out, ...)                                                                  \
  infer(BP_OP_##op, (const bp_tensor_t*[]){__VA_ARGS__},                                   \
        (uint32_t)(sizeof((const bp_tensor_t*[]){__VA_ARGS__}) / sizeof(bp_tensor_t*)), &a, \
        (out), (uint32_t)(sizeof(out) / sizeof((out)[0])))
  assert_ok(INF(rms_norm_quant, o2, T(BF16, 2, 3, 8), T(F32, 8), T(F32, 1)));
  assert_desc(&o2[0], F8E4M3FN, 2, 3, 8);
  assert_desc(&o2[1], F32, 2, 3, 1);
  assert_ok(INF(add_rms_norm_quant, o3, T(F16, 4, 8), T(F16, 4, 8), NULL, NULL));
  assert_desc(&o3[1], F16, 4, 8);
  assert_desc(&o3[2], F32, 4, 1);
  assert_ok(INF(swiglu_quant, o2, T(F32, 5, 16), NULL));
  assert_desc(&o2[0], F8E4M3FN, 5, 8);
  assert_status(INF(swiglu_quant, o2, T(F32, 5, 15), NULL), BP_INVALID_ARGUMENT, "must be even");
  assert_status(INF(rms_norm_quant, o2, T(F32, 3, 8), T(F32, 7), NULL), BP_INVALID_ARGUMENT,
                "input 'weight' is f32 [7]; expected a floating [8]");
  assert_status(INF(rms_norm_quant, o2, T(F32, 3, 8), NULL, T(F32, 3)), BP_INVALID_ARGUMENT,
                "input 'scale' is f32 [3]; a static scale is one f32 element");
  assert_status(INF(rms_norm_quant, o2, T(F32, 3, 8), NULL, T(F16, 1)), BP_INVALID_ARGUMENT,
                "a static scale is one f32 element");
  assert_status(INF(add_rms_norm_quant, o3, T(F32, 3, 8), T(F32, 8), NULL, NULL), BP_INVALID_ARGUMENT,
                "input 'residual' has shape [8]; expected [3, 8]");
  assert_status(INF(rms_norm_quant, o2, T(I32, 3, 8), NULL, NULL), BP_INVALID_ARGUMENT, "floating");
  assert_status(INF(rms_norm_quant, o2, T0(F32), NULL, NULL), BP_INVALID_ARGUMENT, "is 0-d");
  a.qdtype = BP_DTYPE_U8;
  assert_status(INF(rms_norm_quant, o2, T(F32, 3, 8), NULL, NULL), BP_INVALID_ARGUMENT,
                "attrs.qdtype u8 is not a code dtype");
  a.qdtype = BP_DTYPE_I8;
  a.eps = 1e-5;
  assert_status(INF(swiglu_quant, o2, T(F32, 5, 16), NULL), BP_INVALID_ARGUMENT, "attrs.eps = 1e-05 is unused");
  a.eps = -1.0;
  assert_status(INF(rms_norm_quant, o2, T(F32, 3, 8), NULL, NULL), BP_INVALID_ARGUMENT, "attrs.eps = -1");
  a.eps = 0.0;
  a.scale_ub = NAN;
  assert_status(INF(rms_norm_quant, o2, T(F32, 3, 8), NULL, NULL), BP_INVALID_ARGUMENT, "attrs.scale_ub");
  a.scale_ub = 0.0;
  a.flags = 8;
  assert_status(INF(rms_norm_quant, o2, T(F32, 3, 8), NULL, NULL), BP_INVALID_ARGUMENT, "unknown bits 0x8");
#undef INF
}

/* cpu:0's support answer for the row quantizations (fused and per group):
 * what the kernels read and write, dense operands packed by the core. */
static void test_row_quant_support_answer(void** state) {
  (void)state;
  bp_tensor_desc_t x = {.struct_size = sizeof x, .dtype = BP_DTYPE_BF16, .rank = 2, .sizes = {4, 16},
                        .strides = {16, 1}};
  bp_tensor_desc_t codes = x, scale = x, none = {.struct_size = sizeof none}; /* absent */
  codes.dtype = BP_DTYPE_F8E4M3FN;
  scale.dtype = BP_DTYPE_F32, scale.sizes[1] = 1, scale.strides[0] = 1;
  bp_fused_quant_attrs_t fa = {.struct_size = sizeof fa, .qdtype = BP_DTYPE_F8E4M3FN};
  bp_group_quant_attrs_t ga = {.struct_size = sizeof ga, .qdtype = BP_DTYPE_F8E4M3FN, .group_size = 16};
  const void* attrs[2] = {&fa, &ga};
  const uint32_t ops[2] = {BP_OP_rms_norm_quant, BP_OP_per_token_group_quant}, inputs[2] = {3, 1};
  for (int k = 0; k < 2; k++) {
    bp_op_call_t call = {.struct_size = sizeof call, .op_id = ops[k], .num_inputs = inputs[k], .num_outputs = 2,
                         .inputs = (const bp_tensor_desc_t* const[]){&x, &none, &none},
                         .outputs = (const bp_tensor_desc_t* const[]){&codes, &scale}, .attrs = attrs[k]};
    bp_support_t s = {.struct_size = sizeof s};
    assert_ok(bp_device_query_support(g_cpu, &call, &s));
    assert_int_equal(s.supported, 1);
    assert_int_equal(s.requires_contiguous, 1);
    struct {
      bp_tensor_desc_t* d;
      uint32_t dtype;
      const char* says;
    } bad[] = {{&codes, BP_DTYPE_U8, "the codes are u8"},
               {&scale, BP_DTYPE_F16, "the scales are f16"},
               {&x, BP_DTYPE_I32, "input 0 is i32"}};
    for (size_t b = 0; b < sizeof bad / sizeof bad[0]; b++) {
      uint32_t keep = bad[b].d->dtype;
      bad[b].d->dtype = bad[b].dtype;
      assert_ok(bp_device_query_support(g_cpu, &call, &s));
      assert_int_equal(s.supported, 0);
      assert_int_equal(s.reason, BP_SUPPORT_DTYPE);
      assert_non_null(strstr(s.message, bad[b].says));
      bad[b].d->dtype = keep;
    }
  }
}

int main(void) {
  if (ops_fixture_setup() != 0 || g_cpu == NULL) return 1;
  if (bp_stream_create(g_cpu, NULL, &g_stream) != BP_OK) return 1;
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_teardown(test_rms_norm_quant_is_the_composition, ops_release_all),
      cmocka_unit_test_teardown(test_add_rms_norm_quant_is_the_composition, ops_release_all),
      cmocka_unit_test_teardown(test_swiglu_quant_is_the_composition, ops_release_all),
      cmocka_unit_test_teardown(test_fused_quant_rules, ops_release_all),
      cmocka_unit_test_teardown(test_row_quant_support_answer, ops_release_all),
  };
  int failed = cmocka_run_group_tests_name("fused_quant", tests, NULL, NULL);
  bp_stream_release(g_stream);
  bp_context_release(g_ctx);
  return failed;
}
