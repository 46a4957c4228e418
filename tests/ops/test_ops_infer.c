/* Shape and dtype inference (bp_op_infer): promotion, broadcasting,
 * reductions, matmul, cat, creation, attributes and operand checks. */
#include <float.h>

#include "ops_fixture.h"

static bp_status_t infer(uint32_t op, const bp_tensor_t* const* in, uint32_t n, const void* attrs,
                         bp_tensor_desc_t* out, uint32_t nout) {
  memset(out, 0, sizeof(*out) * nout);
  return ops_infer(op, in, n, attrs, out, nout);
}
#define INFER(op, attrs, out, ...)                                                      \
  infer(BP_OP_##op, (const bp_tensor_t*[]){__VA_ARGS__},                                \
        (uint32_t)(sizeof((const bp_tensor_t*[]){__VA_ARGS__}) / sizeof(bp_tensor_t*)), \
        (attrs), (out), (uint32_t)(sizeof(out) / sizeof((out)[0])))

static bp_binary_attrs_t scalar_other(uint32_t kind, double f, int64_t i) {
  bp_binary_attrs_t a = {.struct_size = sizeof(a), .flags = BP_BINARY_OTHER_IS_SCALAR};
  a.scalar.kind = kind;
  if (kind == BP_SCALAR_FLOAT) a.scalar.v.f = f;
  else if (kind == BP_SCALAR_BOOL) a.scalar.v.b = (uint64_t)i;
  else a.scalar.v.i = i;
  return a;
}

/* ---- promotion (docs/semantics.md examples) ------------------------------------- */

static void test_promotion_examples(void** state) {
  (void)state;
  bp_tensor_desc_t o[1];
  bp_binary_attrs_t a = scalar_other(BP_SCALAR_FLOAT, 2.5, 0);
  assert_ok(INFER(add, &a, o, T(I32, 3), NULL)); /* i32 + 2.5 -> f32 */
  assert_desc(&o[0], F32, 3);
  a = scalar_other(BP_SCALAR_INT, 0, 1000);
  assert_ok(INFER(add, &a, o, T(U8, 3), NULL)); /* u8 + 1000 -> u8 */
  assert_desc(&o[0], U8, 3);
  assert_ok(INFER(add, NULL, o, T(F16, 3), T0(F64))); /* f16 + f64 0-d -> f16 */
  assert_desc(&o[0], F16, 3);
  a = scalar_other(BP_SCALAR_INT, 0, 3);
  assert_ok(INFER(add, &a, o, T(BOOL, 3), NULL)); /* bool + 3 -> i64 */
  assert_desc(&o[0], I64, 3);
  assert_ok(INFER(add, NULL, o, T(I32, 3), T0(I64))); /* i32 + i64 0-d -> i32 */
  assert_desc(&o[0], I32, 3);
  assert_ok(INFER(add, NULL, o, T(I32, 3), T0(F64))); /* higher category 0-d wins */
  assert_desc(&o[0], F64, 3);
  a = scalar_other(BP_SCALAR_BOOL, 0, 1);
  assert_ok(INFER(add, &a, o, T(BOOL, 3), NULL));
  assert_desc(&o[0], BOOL, 3);
  assert_ok(INFER(mul, &a, o, T(I16, 3), NULL));
  assert_desc(&o[0], I16, 3);
}

static void test_promote_types_table(void** state) {
  (void)state;
  static const struct { uint32_t a, b, want; } cases[] = {
      {BP_DTYPE_U8, BP_DTYPE_I8, BP_DTYPE_I16},     {BP_DTYPE_U8, BP_DTYPE_I16, BP_DTYPE_I16},
      {BP_DTYPE_I32, BP_DTYPE_I64, BP_DTYPE_I64},   {BP_DTYPE_I64, BP_DTYPE_F16, BP_DTYPE_F16},
      {BP_DTYPE_F16, BP_DTYPE_BF16, BP_DTYPE_F32},  {BP_DTYPE_BF16, BP_DTYPE_F64, BP_DTYPE_F64},
      {BP_DTYPE_BOOL, BP_DTYPE_U8, BP_DTYPE_U8},    {BP_DTYPE_BOOL, BP_DTYPE_BOOL, BP_DTYPE_BOOL},
      {BP_DTYPE_I8, BP_DTYPE_BF16, BP_DTYPE_BF16},  {BP_DTYPE_F32, BP_DTYPE_F16, BP_DTYPE_F32},
      {BP_DTYPE_C64, BP_DTYPE_F32, BP_DTYPE_C64},   {BP_DTYPE_I16, BP_DTYPE_I8, BP_DTYPE_I16},
  };
  for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); ++i) {
    bp_tensor_desc_t o[1];
    int64_t s = 2;
    const bp_tensor_t* in[2] = {ops_tensor(g_fake, cases[i].a, 1, &s),
                                ops_tensor(g_fake, cases[i].b, 1, &s)};
    assert_ok(infer(BP_OP_maximum, in, 2, NULL, o, 1));
    assert_string_equal(bp_dtype_name(o[0].dtype), bp_dtype_name(cases[i].want));
    const bp_tensor_t* swapped[2] = {in[1], in[0]};
    assert_ok(infer(BP_OP_maximum, swapped, 2, NULL, o, 1));
    assert_string_equal(bp_dtype_name(o[0].dtype), bp_dtype_name(cases[i].want));
  }
}

static void test_output_dtype_rules(void** state) {
  (void)state;
  bp_tensor_desc_t o[1];
  assert_ok(INFER(div, NULL, o, T(I32, 2), T(I32, 2))); /* true division */
  assert_desc(&o[0], F32, 2);
  bp_binary_attrs_t floor = {.struct_size = sizeof(floor), .rounding_mode = BP_ROUNDING_FLOOR};
  assert_ok(INFER(div, &floor, o, T(I32, 2), T(I32, 2)));
  assert_desc(&o[0], I32, 2);
  assert_ok(INFER(atan2, NULL, o, T(I64, 2), T(I64, 2)));
  assert_desc(&o[0], F32, 2);
  assert_ok(INFER(lt, NULL, o, T(F32, 2), T(I64, 2)));
  assert_desc(&o[0], BOOL, 2);
  assert_ok(INFER(logical_and, NULL, o, T(F32, 2), T(I64, 2)));
  assert_desc(&o[0], BOOL, 2);
  assert_ok(INFER(sqrt, NULL, o, T(I32, 2)));
  assert_desc(&o[0], F32, 2);
  assert_ok(INFER(sqrt, NULL, o, T(BF16, 2)));
  assert_desc(&o[0], BF16, 2);
  assert_ok(INFER(floor, NULL, o, T(I16, 2)));
  assert_desc(&o[0], I16, 2);
  assert_ok(INFER(isnan, NULL, o, T(F16, 2)));
  assert_desc(&o[0], BOOL, 2);
  assert_ok(INFER(where, NULL, o, T(BOOL, 2, 1), T(I32, 3), T0(F32)));
  assert_desc(&o[0], F32, 2, 3);
  bp_cast_attrs_t cast = {.struct_size = sizeof(cast), .dtype = BP_DTYPE_F8E4M3FN};
  assert_ok(INFER(to_copy, &cast, o, T(F32, 2, 2)));
  assert_desc(&o[0], F8E4M3FN, 2, 2);
  bp_clamp_attrs_t clamp = {.struct_size = sizeof(clamp), .min = {.kind = BP_SCALAR_FLOAT}};
  assert_ok(INFER(clamp, &clamp, o, T(I32, 4)));
  assert_desc(&o[0], F32, 4);
}

static void test_dtype_rejections(void** state) {
  (void)state;
  bp_tensor_desc_t o[1];
  assert_status(INFER(add, NULL, o, T(F8E4M3FN, 2), T(F8E4M3FN, 2)), BP_INVALID_ARGUMENT,
                "are storage only");
  assert_status(INFER(sub, NULL, o, T(BOOL, 2), T(BOOL, 2)), BP_INVALID_ARGUMENT,
                "bool operand");
  assert_status(INFER(neg, NULL, o, T(BOOL, 2)), BP_INVALID_ARGUMENT, "neg is not defined");
  assert_status(INFER(bitwise_and, NULL, o, T(F32, 2), T(I32, 2)), BP_INVALID_ARGUMENT,
                "only integer and bool");
  assert_status(INFER(bitwise_not, NULL, o, T(F16, 2)), BP_INVALID_ARGUMENT, "f16");
  assert_status(INFER(where, NULL, o, T(F32, 2), T(F32, 2), T(F32, 2)), BP_INVALID_ARGUMENT,
                "'condition'");
  bp_binary_attrs_t a = {.struct_size = sizeof(a), .alpha = {.kind = BP_SCALAR_FLOAT}};
  assert_status(INFER(add, &a, o, T(I32, 2), T(I32, 2)), BP_INVALID_ARGUMENT, "attrs.alpha");
  assert_status(INFER(add, NULL, o, T(C64, 2), T(F64, 2)), BP_INVALID_ARGUMENT,
                "no common dtype");
}

/* ---- broadcasting ------------------------------------------------------------------ */

static void test_broadcasting(void** state) {
  (void)state;
  bp_tensor_desc_t o[1];
  assert_ok(INFER(add, NULL, o, T(F32, 2, 3), T(F32, 3)));
  assert_desc(&o[0], F32, 2, 3);
  assert_ok(INFER(add, NULL, o, T(F32, 4, 1, 3), T(F32, 2, 1)));
  assert_desc(&o[0], F32, 4, 2, 3);
  assert_ok(INFER(add, NULL, o, T(F32, 0, 3), T(F32, 1, 3)));
  assert_desc(&o[0], F32, 0, 3);
  assert_ok(INFER(add, NULL, o, T0(F32), T0(F32)));
  assert_desc0(&o[0], F32);
  assert_status(INFER(add, NULL, o, T(F32, 2, 3), T(F32, 4)), BP_INVALID_ARGUMENT,
                "shapes [2, 3] (self) and [4] (other) are not broadcastable (dim 1: 3 vs 4)");
  assert_status(INFER(add, NULL, o, T(F32, 0), T(F32, 2)), BP_INVALID_ARGUMENT,
                "not broadcastable");
  assert_status(INFER(where, NULL, o, T(BOOL, 5), T(F32, 2, 1), T(F32, 3)),
                BP_INVALID_ARGUMENT, "(condition)");
}

/* ---- reductions -------------------------------------------------------------------- */

static bp_reduce_attrs_t dims(uint32_t flags, int32_t n, int32_t d0, int32_t d1) {
  bp_reduce_attrs_t a = {.struct_size = sizeof(a), .flags = flags, .num_dims = n,
                         .dims = {d0, d1}, .correction = 1.0};
  return a;
}

static void test_reductions(void** state) {
  (void)state;
  bp_tensor_desc_t o[1], o2[2];
  bp_tensor_t* x = T(F32, 2, 3, 4);
  bp_reduce_attrs_t a = dims(0, 1, 1, 0);
  assert_ok(INFER(sum, &a, o, x));
  assert_desc(&o[0], F32, 2, 4);
  a = dims(BP_REDUCE_KEEPDIM, 1, 1, 0);
  assert_ok(INFER(sum, &a, o, x));
  assert_desc(&o[0], F32, 2, 1, 4);
  a = dims(0, 2, -1, 0);
  assert_ok(INFER(sum, &a, o, x));
  assert_desc(&o[0], F32, 3);
  assert_ok(INFER(sum, NULL, o, x)); /* defaults: all dims */
  assert_desc0(&o[0], F32);
  assert_ok(INFER(sum, NULL, o, T(I32, 5))); /* integers accumulate in i64 */
  assert_desc0(&o[0], I64);
  assert_ok(INFER(prod, NULL, o, T(BOOL, 5)));
  assert_desc0(&o[0], I64);
  a = dims(0, 2, 1, -2);
  assert_status(INFER(sum, &a, o, x), BP_INVALID_ARGUMENT, "dim 1 appears more than once");
  a = dims(0, 1, 3, 0);
  assert_status(INFER(sum, &a, o, x), BP_INVALID_ARGUMENT, "dim 3 is out of range for rank 3");
  a = dims(BP_REDUCE_ALL_DIMS, 1, 0, 0);
  assert_status(INFER(sum, &a, o, x), BP_INVALID_ARGUMENT, "BP_REDUCE_ALL_DIMS");
  a = dims(0, 1, -1, 0);
  assert_ok(INFER(sum, &a, o, T0(F64))); /* a 0-d tensor accepts dim -1 */
  assert_desc0(&o[0], F64);

  assert_status(INFER(mean, NULL, o, T(I32, 3)), BP_INVALID_ARGUMENT, "floating");
  a = dims(BP_REDUCE_ALL_DIMS, 0, 0, 0);
  a.dtype = BP_DTYPE_F64;
  assert_ok(INFER(mean, &a, o, T(I32, 3)));
  assert_desc0(&o[0], F64);

  /* amax has no identity: an empty reduced dim is an error unless the output is empty. */
  bp_tensor_t* empty = T(F32, 0, 3);
  a = dims(0, 1, 0, 0);
  assert_status(INFER(amax, &a, o, empty), BP_INVALID_ARGUMENT, "dim 0 of size 0");
  a = dims(0, 1, 1, 0);
  assert_ok(INFER(amax, &a, o, empty));
  assert_desc(&o[0], F32, 0);
  a = dims(0, 1, 0, 0);
  assert_ok(INFER(sum, &a, o, empty)); /* sum of nothing is 0 */
  assert_desc(&o[0], F32, 3);

  a = dims(0, 1, 1, 0);
  assert_ok(INFER(argmax, &a, o, x));
  assert_desc(&o[0], I64, 2, 4);
  assert_ok(INFER(argmax, NULL, o, x));
  assert_desc0(&o[0], I64);
  a = dims(0, 2, 0, 1);
  assert_status(INFER(argmax, &a, o, x), BP_INVALID_ARGUMENT, "one dim");

  assert_status(INFER(max_dim, NULL, o2, x), BP_INVALID_ARGUMENT, "exactly one dim");
  a = dims(BP_REDUCE_KEEPDIM, 1, -1, 0);
  assert_ok(INFER(max_dim, &a, o2, x));
  assert_desc(&o2[0], F32, 2, 3, 1);
  assert_desc(&o2[1], I64, 2, 3, 1);
  a = dims(0, 1, 0, 0);
  a.dtype = BP_DTYPE_F64;
  assert_status(INFER(amin, &a, o, x), BP_INVALID_ARGUMENT, "attrs.dtype");
}

/* ---- matmul ----------------------------------------------------------------------- */

static void test_matmul(void** state) {
  (void)state;
  bp_tensor_desc_t o[1];
  assert_ok(INFER(mm, NULL, o, T(F32, 2, 3), T(F32, 3, 4)));
  assert_desc(&o[0], F32, 2, 4);
  assert_status(INFER(mm, NULL, o, T(F32, 2, 3), T(F32, 4, 5)), BP_INVALID_ARGUMENT,
                "shapes [2, 3] ('self') and [4, 5] ('mat2') cannot be multiplied");
  assert_status(INFER(mm, NULL, o, T(F32, 2, 3), T(F16, 3, 4)), BP_INVALID_ARGUMENT,
                "no promotion");
  assert_status(INFER(mm, NULL, o, T(F32, 2, 3, 1), T(F32, 3, 4)), BP_INVALID_ARGUMENT,
                "must have rank 2");
  assert_ok(INFER(bmm, NULL, o, T(F16, 5, 2, 3), T(F16, 5, 3, 7)));
  assert_desc(&o[0], F16, 5, 2, 7);
  assert_status(INFER(bmm, NULL, o, T(F16, 5, 2, 3), T(F16, 4, 3, 7)), BP_INVALID_ARGUMENT,
                "cannot be multiplied");
  assert_ok(INFER(addmm, NULL, o, T(F32, 4), T(F32, 2, 3), T(F32, 3, 4)));
  assert_desc(&o[0], F32, 2, 4);
  assert_status(INFER(addmm, NULL, o, T(F32, 3), T(F32, 2, 3), T(F32, 3, 4)),
                BP_INVALID_ARGUMENT, "does not broadcast to [2, 4]");
  assert_ok(INFER(linear, NULL, o, T(F32, 8, 2, 3), T(F32, 5, 3), NULL));
  assert_desc(&o[0], F32, 8, 2, 5);
}

/* ---- cat --------------------------------------------------------------------------- */

static void test_cat(void** state) {
  (void)state;
  bp_tensor_desc_t o[1];
  bp_dim_attrs_t d0 = {.struct_size = sizeof(d0), .dim = 0};
  bp_dim_attrs_t d1 = {.struct_size = sizeof(d1), .dim = -1};
  assert_ok(INFER(cat, &d0, o, T(F32, 2, 3), T(F32, 4, 3)));
  assert_desc(&o[0], F32, 6, 3);
  assert_ok(INFER(cat, &d1, o, T(F32, 2, 3), T(F32, 2, 4)));
  assert_desc(&o[0], F32, 2, 7);
  assert_ok(INFER(cat, &d0, o, T(F32, 0), T(F32, 2, 3), T(F32, 0))); /* legacy skip */
  assert_desc(&o[0], F32, 2, 3);
  assert_ok(INFER(cat, &d0, o, T(I32, 2), T(F16, 3)));
  assert_desc(&o[0], F16, 5);
  assert_ok(INFER(cat, &d0, o, T(F8E5M2, 2), T(F8E5M2, 3)));
  assert_desc(&o[0], F8E5M2, 5);
  assert_status(INFER(cat, &d0, o, T(F8E5M2, 2), T(F32, 3)), BP_INVALID_ARGUMENT,
                "no common dtype");
  assert_status(INFER(cat, &d0, o, T(F32, 2, 3), T(F32, 2, 4)), BP_INVALID_ARGUMENT,
                "tensor 'tensors[1]' of shape [2, 4] does not match 'tensors[0]' of shape [2, 3]");
  assert_status(INFER(cat, &d0, o, T(F32, 2), T0(F32)), BP_INVALID_ARGUMENT,
                "zero-dimensional tensor 'tensors[1]'");
  assert_status(infer(BP_OP_cat, NULL, 0, &d0, o, 1), BP_INVALID_ARGUMENT, "at least one");
}

/* ---- fused layers: add + norm, gated activations ------------------------------------ */

static void test_fused_layer_rules(void** state) {
  (void)state;
  bp_tensor_desc_t o2[2], o[1];
  /* add_rms_norm: out and residual_out like the input; weight of any float dtype */
  assert_ok(INFER(add_rms_norm, NULL, o2, T(F16, 3, 8), T(F16, 3, 8), T(F32, 8)));
  assert_desc(&o2[0], F16, 3, 8);
  assert_desc(&o2[1], F16, 3, 8);
  assert_ok(INFER(add_rms_norm, NULL, o2, T(BF16, 5), T(BF16, 5), NULL));
  assert_desc(&o2[1], BF16, 5);
  assert_status(INFER(add_rms_norm, NULL, o2, T(F32, 3, 8), T(F32, 1, 8), NULL),
                BP_INVALID_ARGUMENT, "input 'residual' has shape [1, 8]; expected [3, 8]");
  assert_status(INFER(add_rms_norm, NULL, o2, T(F32, 3, 8), T(F16, 3, 8), NULL),
                BP_INVALID_ARGUMENT, "input 'residual' has dtype f16; expected f32");
  assert_status(INFER(add_rms_norm, NULL, o2, T(F32, 3, 8), T(F32, 3, 8), T(F32, 3)),
                BP_INVALID_ARGUMENT, "input 'weight' has shape [3]");
  assert_status(INFER(add_rms_norm, NULL, o2, T(I32, 3, 8), T(I32, 3, 8), NULL),
                BP_INVALID_ARGUMENT, "floating");
  bp_rms_norm_attrs_t ra = {.struct_size = sizeof(ra), .normalized_rank = 2, .eps = 1e-6};
  assert_ok(INFER(add_rms_norm, &ra, o2, T(F32, 2, 3, 8), T(F32, 2, 3, 8), T(F32, 3, 8)));
  assert_desc(&o2[0], F32, 2, 3, 8);
  ra.normalized_rank = 4;
  assert_status(INFER(add_rms_norm, &ra, o2, T(F32, 2, 3, 8), T(F32, 2, 3, 8), NULL),
                BP_INVALID_ARGUMENT, "normalized_rank = 4");
  ra.normalized_rank = 1;
  ra.eps = -1.0;
  assert_status(INFER(add_rms_norm, &ra, o2, T(F32, 3, 8), T(F32, 3, 8), NULL),
                BP_INVALID_ARGUMENT, "attrs.eps = -1");

  /* add_layer_norm: layer_norm's parameter rules (mixed f32 for half inputs) */
  assert_ok(INFER(add_layer_norm, NULL, o2, T(F16, 4, 6), T(F16, 4, 6), T(F32, 6), T(F32, 6)));
  assert_desc(&o2[0], F16, 4, 6);
  assert_desc(&o2[1], F16, 4, 6);
  assert_status(INFER(add_layer_norm, NULL, o2, T(F32, 4, 6), T(F32, 4, 6), T(F32, 6), T(F32, 5)),
                BP_INVALID_ARGUMENT, "input 'bias' has shape [5]");
  assert_status(INFER(add_layer_norm, NULL, o2, T(F16, 4, 6), T(F16, 4, 6), T(F64, 6), NULL),
                BP_INVALID_ARGUMENT, "input 'weight' has dtype f64");
  assert_status(INFER(add_layer_norm, NULL, o2, T(F32, 4, 6), T(F32, 6), NULL, NULL),
                BP_INVALID_ARGUMENT, "input 'residual' has shape [6]; expected [4, 6]");

  /* swiglu / geglu: last dim 2H -> H */
  assert_ok(INFER(swiglu, NULL, o, T(F32, 3, 10)));
  assert_desc(&o[0], F32, 3, 5);
  bp_gelu_attrs_t ga = {.struct_size = sizeof(ga), .approximate = BP_GELU_TANH};
  assert_ok(INFER(geglu, &ga, o, T(BF16, 2, 4, 2)));
  assert_desc(&o[0], BF16, 2, 4, 1);
  assert_ok(INFER(geglu, NULL, o, T(F16, 0, 6)));
  assert_desc(&o[0], F16, 0, 3);
  assert_status(INFER(swiglu, NULL, o, T(F32, 3, 7)), BP_INVALID_ARGUMENT,
                "last dim (7) must be even");
  assert_status(INFER(geglu, NULL, o, T0(F32)), BP_INVALID_ARGUMENT, "0-d");
  assert_status(INFER(swiglu, NULL, o, T(I64, 4)), BP_INVALID_ARGUMENT, "floating");
  ga.approximate = 7;
  assert_status(INFER(geglu, &ga, o, T(F32, 4)), BP_INVALID_ARGUMENT, "approximate");
}

/* ---- quantization (docs/semantics.md, "Quantization") ------------------------------ */

static void test_quant_rules(void** state) {
  (void)state;
  bp_tensor_desc_t o[1], o2[2];
  bp_quantize_attrs_t q = {.struct_size = sizeof(q), .qdtype = BP_DTYPE_I4, .axis = -1, .block_size = 16};
  /* i4 packs two per byte along the last dim: u8 [3, 20] for [3, 40] */
  assert_ok(INFER(quantize, &q, o, T(F32, 3, 40), T(F32, 3, 3), T(I8, 3, 3)));
  assert_desc(&o[0], U8, 3, 20);
  assert_ok(INFER(dequantize, &q, o, T(U8, 3, 20), T(F16, 3, 3), NULL));
  assert_desc(&o[0], F16, 3, 40);
  assert_status(INFER(quantize, &q, o, T(F32, 3, 39), T(F32, 3, 3), NULL), BP_INVALID_ARGUMENT,
                "must be even");
  assert_status(INFER(quantize, &q, o, T(F32, 3, 40), T(F32, 3, 2), NULL), BP_INVALID_ARGUMENT,
                "blocks of 16 along axis 1");
  assert_status(INFER(quantize, &q, o, T(F32, 3, 40), T(F32, 3, 3), T(U8, 3, 3)),
                BP_INVALID_ARGUMENT, "needs i8");
  /* per channel along axis 0; fp8 keeps its dtype and takes no zero point */
  q.qdtype = BP_DTYPE_F8E4M3FN, q.block_size = 0, q.axis = 0;
  assert_ok(INFER(quantize, &q, o, T(F32, 6, 10), T(F32, 6), NULL));
  assert_desc(&o[0], F8E4M3FN, 6, 10);
  assert_status(INFER(quantize, &q, o, T(F32, 6, 10), T(F32, 10), NULL), BP_INVALID_ARGUMENT,
                "per channel along axis 0");
  assert_status(INFER(quantize, &q, o, T(F32, 6, 10), T(F32, 6), T(I8, 6)), BP_INVALID_ARGUMENT,
                "zero point needs an integer");
  assert_status(INFER(dequantize, &q, o, T(U8, 6, 10), T(F32, 6), NULL), BP_INVALID_ARGUMENT,
                "is stored as float8_e4m3fn");
  q.qdtype = BP_DTYPE_F16;
  assert_status(INFER(quantize, &q, o, T(F32, 6), T(F32, 1), NULL), BP_INVALID_ARGUMENT,
                "not a quantized element dtype");
  q.qdtype = BP_DTYPE_I8, q.flags = 8;
  assert_status(INFER(quantize, &q, o, T(F32, 6), T(F32, 1), NULL), BP_INVALID_ARGUMENT,
                "unknown bits");
  /* dynamic: MX scales over blocks of 32 (a tail block), e8m0 only for float codes */
  bp_quantize_attrs_t d = {.struct_size = sizeof(d), .qdtype = BP_DTYPE_F4E2M1FN, .axis = -1,
                           .block_size = 32, .dtype = BP_DTYPE_F8E8M0FNU};
  assert_ok(INFER(quantize_dynamic, &d, o2, T(BF16, 4, 70)));
  assert_desc(&o2[0], U8, 4, 35);
  assert_desc(&o2[1], F8E8M0FNU, 4, 3);
  d.qdtype = BP_DTYPE_I8;
  assert_status(INFER(quantize_dynamic, &d, o2, T(F32, 4, 70)), BP_INVALID_ARGUMENT, "MX");
  d.qdtype = BP_DTYPE_U8, d.dtype = 0;
  assert_status(INFER(quantize_dynamic, &d, o2, T(F32, 4, 70)), BP_INVALID_ARGUMENT, "unsigned");
  /* scaled_mm: i32 without an epilogue, f32 with one; fp8 pairs; shapes */
  bp_scaled_mm_attrs_t m = {.struct_size = sizeof(m)};
  assert_ok(INFER(scaled_mm, &m, o, T(I8, 5, 7), T(I8, 7, 3), NULL, NULL, NULL));
  assert_desc(&o[0], I32, 5, 3);
  assert_ok(INFER(scaled_mm, &m, o, T(U8, 5, 7), T(I8, 7, 3), T(F32, 5, 1), T(F32, 3), NULL));
  assert_desc(&o[0], F32, 5, 3);
  assert_ok(INFER(scaled_mm, &m, o, T(F8E4M3FN, 5, 7), T(F8E5M2, 7, 3), T(F32, 1), T(F32, 1), NULL));
  assert_desc(&o[0], F32, 5, 3);
  assert_status(INFER(scaled_mm, &m, o, T(I8, 5, 7), T(F8E5M2, 7, 3), NULL, NULL, NULL),
                BP_INVALID_ARGUMENT, "must both be i8/u8 or both fp8");
  assert_status(INFER(scaled_mm, &m, o, T(I8, 5, 7), T(I8, 6, 3), NULL, NULL, NULL),
                BP_INVALID_ARGUMENT, "must be [m, k] and [k, n]");
  assert_status(INFER(scaled_mm, &m, o, T(I8, 5, 7), T(I8, 7, 3), T(F32, 1, 5), NULL, NULL),
                BP_INVALID_ARGUMENT, "input 'scale_a' has shape [1, 5]");
  m.out_dtype = BP_DTYPE_I32;
  assert_status(INFER(scaled_mm, &m, o, T(I8, 5, 7), T(I8, 7, 3), T(F32, 1), NULL, NULL),
                BP_INVALID_ARGUMENT, "i32 output");
  m.out_dtype = 0, m.a_zero_point = 300;
  assert_status(INFER(scaled_mm, &m, o, T(U8, 5, 7), T(I8, 7, 3), NULL, NULL, NULL),
                BP_INVALID_ARGUMENT, "a_zero_point = 300");
  /* weight_only_mm: packed i4 [n, k/2], group scales [n, ceil(k/g)] */
  bp_quantize_attrs_t w = {.struct_size = sizeof(w), .qdtype = BP_DTYPE_U4, .axis = -1, .block_size = 32};
  assert_ok(INFER(weight_only_mm, &w, o, T(BF16, 2, 3, 96), T(U8, 10, 48), T(F16, 10, 3),
                  T(U8, 10, 3), T(F32, 10)));
  assert_desc(&o[0], BF16, 2, 3, 10);
  assert_status(INFER(weight_only_mm, &w, o, T(F32, 96), T(U8, 10, 96), T(F16, 10, 3), NULL, NULL),
                BP_INVALID_ARGUMENT, "has k = 96");
  assert_status(INFER(weight_only_mm, &w, o, T(F32, 96), T(U8, 10, 48), T(F16, 10, 4), NULL, NULL),
                BP_INVALID_ARGUMENT, "groups of 32");
  assert_status(INFER(weight_only_mm, &w, o, T(F32, 96), T(I8, 10, 48), T(F16, 10, 3), NULL, NULL),
                BP_INVALID_ARGUMENT, "is stored as u8");
  w.qdtype = BP_DTYPE_F8E4M3FN;
  assert_status(INFER(weight_only_mm, &w, o, T(F32, 96), T(F8E4M3FN, 10, 96), T(F16, 10, 3), NULL, NULL),
                BP_INVALID_ARGUMENT, "not a quantized element dtype");
}

/* ---- other rules -------------------------------------------------------------------- */

static void test_misc_rules(void** state) {
  (void)state;
  bp_tensor_desc_t o[1], o3[3];
  assert_ok(INFER(softmax, NULL, o, T(F32, 2, 5)));
  assert_desc(&o[0], F32, 2, 5);
  bp_softmax_attrs_t sm = {.struct_size = sizeof(sm), .dim = 1, .half_to_float = 1};
  assert_ok(INFER(softmax, &sm, o, T(F16, 2, 5)));
  assert_desc(&o[0], F32, 2, 5);
  assert_status(INFER(softmax, &sm, o, T(F32, 2, 5)), BP_INVALID_ARGUMENT, "half_to_float");
  assert_status(INFER(softmax, NULL, o, T(I64, 2, 5)), BP_INVALID_ARGUMENT, "floating");
  sm.dim = 2;
  assert_status(INFER(softmax, &sm, o, T(F16, 2, 5)), BP_INVALID_ARGUMENT, "out of range");

  assert_ok(INFER(layer_norm, NULL, o3, T(F32, 4, 6), T(F32, 6), NULL));
  assert_desc(&o3[0], F32, 4, 6);
  assert_desc(&o3[1], F32, 4, 1);
  assert_status(INFER(layer_norm, NULL, o3, T(F32, 4, 6), T(F32, 5), NULL), BP_INVALID_ARGUMENT,
                "'weight'");

  bp_tensor_desc_t o2[2];
  bp_topk_attrs_t tk = {.struct_size = sizeof(tk), .dim = -1, .k = 2, .largest = 1};
  assert_ok(INFER(topk, &tk, o2, T(F32, 3, 5)));
  assert_desc(&o2[0], F32, 3, 2);
  assert_desc(&o2[1], I64, 3, 2);
  tk.k = 6;
  assert_status(INFER(topk, &tk, o2, T(F32, 3, 5)), BP_INVALID_ARGUMENT, "attrs.k = 6");

  assert_ok(INFER(embedding, NULL, o, T(F16, 10, 4), T(I64, 2, 3)));
  assert_desc(&o[0], F16, 2, 3, 4);
  bp_dim_attrs_t d1 = {.struct_size = sizeof(d1), .dim = 1};
  assert_ok(INFER(index_select, &d1, o, T(F32, 3, 5), T(I32, 7)));
  assert_desc(&o[0], F32, 3, 7);
  bp_pad_attrs_t pad = {.struct_size = sizeof(pad), .num_pads = 4, .pads = {1, 2, -1, 0}};
  assert_ok(INFER(pad, &pad, o, T(F32, 3, 5)));
  assert_desc(&o[0], F32, 2, 8);
  bp_dims_attrs_t rep = {.struct_size = sizeof(rep), .num_dims = 3, .dims = {2, 1, 3}};
  assert_ok(INFER(repeat, &rep, o, T(F32, 4, 5)));
  assert_desc(&o[0], F32, 2, 4, 15);
  assert_ok(INFER(scaled_dot_product_attention, NULL, o, T(F32, 2, 8, 5, 16),
                  T(F32, 2, 8, 7, 16), T(F32, 2, 8, 7, 32), T(BOOL, 5, 7)));
  assert_desc(&o[0], F32, 2, 8, 5, 32);
  assert_ok(INFER(copy, NULL, o, T(F16, 2, 3), T(I32, 3)));
  assert_desc(&o[0], F16, 2, 3);
  assert_status(INFER(copy, NULL, o, T(F16, 3), T(I32, 2, 3)), BP_INVALID_ARGUMENT,
                "does not broadcast");
}

static void test_creation(void** state) {
  (void)state;
  bp_tensor_desc_t o[1];
  assert_status(infer(BP_OP_fill, NULL, 0, NULL, o, 1), BP_INVALID_ARGUMENT, "pass outputs[0]");
  o[0] = (bp_tensor_desc_t){.struct_size = sizeof(o[0]), .dtype = BP_DTYPE_BF16, .rank = 2,
                            .sizes = {3, 4}};
  assert_ok(ops_infer(BP_OP_fill, NULL, 0, NULL, o, 1));
  assert_desc(&o[0], BF16, 3, 4);

  bp_arange_attrs_t ar = {.struct_size = sizeof(ar),
                          .start = {.kind = BP_SCALAR_INT, .v.i = 0},
                          .end = {.kind = BP_SCALAR_INT, .v.i = 10},
                          .step = {.kind = BP_SCALAR_INT, .v.i = 3}};
  o[0] = (bp_tensor_desc_t){.struct_size = sizeof(o[0]), .dtype = BP_DTYPE_I64, .rank = 1,
                            .sizes = {4}};
  assert_ok(ops_infer(BP_OP_arange, NULL, 0, &ar, o, 1));
  assert_desc(&o[0], I64, 4);
  o[0].sizes[0] = 5;
  assert_status(ops_infer(BP_OP_arange, NULL, 0, &ar, o, 1), BP_INVALID_ARGUMENT,
                "has 5 elements but the range has 4");
  ar.step.v.i = 0;
  o[0].sizes[0] = 4;
  assert_status(ops_infer(BP_OP_arange, NULL, 0, &ar, o, 1), BP_INVALID_ARGUMENT,
                "must not be zero");
  ar.step = (bp_scalar_t){.kind = BP_SCALAR_FLOAT, .v.f = -0.5};
  assert_status(ops_infer(BP_OP_arange, NULL, 0, &ar, o, 1), BP_INVALID_ARGUMENT,
                "wrong sign");
  ar.start = (bp_scalar_t){.kind = BP_SCALAR_FLOAT, .v.f = 1.0};
  ar.end = (bp_scalar_t){.kind = BP_SCALAR_FLOAT, .v.f = -0.25};
  o[0].dtype = BP_DTYPE_F32;
  o[0].sizes[0] = 3; /* 1.0, 0.5, 0.0 */
  assert_ok(ops_infer(BP_OP_arange, NULL, 0, &ar, o, 1));
  assert_desc(&o[0], F32, 3);
  o[0] = (bp_tensor_desc_t){.struct_size = sizeof(o[0]), .dtype = BP_DTYPE_I32, .rank = 1,
                            .sizes = {4}};
  assert_status(ops_infer(BP_OP_rand, NULL, 0, NULL, o, 1), BP_INVALID_ARGUMENT, "floating");
}

/* ---- attributes --------------------------------------------------------------------- */

static void test_attrs(void** state) {
  (void)state;
  bp_tensor_desc_t o[1];
  bp_gelu_attrs_t g = {.struct_size = sizeof(g), .approximate = 7};
  assert_status(INFER(gelu, &g, o, T(F32, 2)), BP_INVALID_ARGUMENT,
                "attrs.approximate = 7 is not a valid bp_gelu_approximate");
  g.approximate = BP_GELU_TANH;
  assert_ok(INFER(gelu, &g, o, T(F32, 2)));
  bp_binary_attrs_t b = {.struct_size = sizeof(b), .rounding_mode = 9};
  assert_status(INFER(div, &b, o, T(F32, 2), T(F32, 2)), BP_INVALID_ARGUMENT,
                "attrs.rounding_mode = 9");
  b.rounding_mode = BP_ROUNDING_TRUNC;
  assert_status(INFER(add, &b, o, T(F32, 2), T(F32, 2)), BP_INVALID_ARGUMENT,
                "only meaningful for div");
  b = (bp_binary_attrs_t){.struct_size = sizeof(b), .flags = 0x10};
  assert_status(INFER(add, &b, o, T(F32, 2), T(F32, 2)), BP_INVALID_ARGUMENT, "unknown bits");
  b = (bp_binary_attrs_t){.struct_size = sizeof(b), .alpha = {.kind = 9}};
  assert_status(INFER(add, &b, o, T(F32, 2), T(F32, 2)), BP_INVALID_ARGUMENT,
                "attrs.alpha.kind = 9");
  b = (bp_binary_attrs_t){.struct_size = 0};
  assert_status(INFER(add, &b, o, T(F32, 2), T(F32, 2)), BP_INVALID_ARGUMENT, "struct_size = 0");
  b.struct_size = 1u << 30;
  assert_status(INFER(add, &b, o, T(F32, 2), T(F32, 2)), BP_INVALID_ARGUMENT, "struct_size");

  /* An older caller's smaller struct: fields past its struct_size are not read. */
  bp_reduce_attrs_t r = {.struct_size = (uint32_t)offsetof(bp_reduce_attrs_t, dtype),
                         .flags = BP_REDUCE_KEEPDIM, .num_dims = 1, .dims = {0},
                         .dtype = 999};
  assert_ok(INFER(sum, &r, o, T(F32, 2, 3)));
  assert_desc(&o[0], F32, 1, 3);
  r.struct_size = sizeof(r);
  assert_status(INFER(sum, &r, o, T(F32, 2, 3)), BP_INVALID_ARGUMENT,
                "attrs.dtype = 999 is not a valid dtype");

  bp_cast_attrs_t c = {.struct_size = sizeof(c), .dtype = BP_DTYPE_F16};
  assert_ok(INFER(to_copy, &c, o, T(F32, 2)));
  assert_desc(&o[0], F16, 2);
  assert_status(INFER(to_copy, NULL, o, T(F32, 2)), BP_INVALID_ARGUMENT, "attrs.dtype");
  bp_pad_attrs_t pad = {.struct_size = sizeof(pad), .num_pads = 3};
  assert_status(INFER(pad, &pad, o, T(F32, 4)), BP_INVALID_ARGUMENT, "must be even");
  bp_linear_attrs_t lin = {.struct_size = sizeof(lin), .activation = 42};
  assert_status(INFER(linear, &lin, o, T(F32, 2, 3), T(F32, 4, 3), NULL), BP_INVALID_ARGUMENT,
                "attrs.activation = 42");
}

/* ---- operands ------------------------------------------------------------------------ */

static void test_operand_checks(void** state) {
  (void)state;
  bp_tensor_desc_t o[1], o2[2];
  assert_status(INFER(add, NULL, o, NULL, T(F32, 2)), BP_INVALID_ARGUMENT,
                "input 'self' is NULL but required");
  assert_status(INFER(add, NULL, o, T(F32, 2), NULL), BP_INVALID_ARGUMENT,
                "input 'other' is NULL");
  assert_status(INFER(add, NULL, o, T(F32, 2), T(F32, 2), T(F32, 2)), BP_INVALID_ARGUMENT,
                "op 'add' takes 2 inputs, got 3");
  assert_status(INFER(add, NULL, o2, T(F32, 2), T(F32, 2)), BP_INVALID_ARGUMENT,
                "num_outputs = 2");
  assert_status(infer(9999, NULL, 0, NULL, o, 1), BP_INVALID_ARGUMENT, "unknown op id 9999");
  assert_status(INFER(cat, NULL, o, T(F32, 2), NULL), BP_INVALID_ARGUMENT,
                "input 'tensors[1]' is NULL");
  bp_binary_attrs_t a = scalar_other(BP_SCALAR_INT, 0, 1);
  assert_status(INFER(add, &a, o, T(F32, 2), T(F32, 2)), BP_INVALID_ARGUMENT,
                "must be NULL with BP_BINARY_OTHER_IS_SCALAR");
  bp_binary_attrs_t s = {.struct_size = sizeof(s), .flags = BP_BINARY_SELF_IS_SCALAR,
                         .scalar = {.kind = BP_SCALAR_FLOAT, .v.f = 2.0}};
  assert_ok(INFER(pow, &s, o, NULL, T(I32, 3))); /* pow(2.0, tensor) */
  assert_desc(&o[0], F32, 3);
  assert_ok(INFER(clamp_tensor, NULL, o, T(F32, 2, 3), NULL, T(F32, 3)));
  assert_desc(&o[0], F32, 2, 3);
  assert_status(INFER(clamp_tensor, NULL, o, T(F32, 2, 3), NULL, NULL), BP_INVALID_ARGUMENT,
                "at least one");
  assert_status(ops_infer(BP_OP_abs, (const bp_tensor_t*[]){T(F32, 2)}, 1, NULL, NULL, 1),
                BP_INVALID_ARGUMENT, "out_outputs");
}

int run_infer_tests(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_teardown(test_promotion_examples, ops_release_all),
      cmocka_unit_test_teardown(test_promote_types_table, ops_release_all),
      cmocka_unit_test_teardown(test_output_dtype_rules, ops_release_all),
      cmocka_unit_test_teardown(test_dtype_rejections, ops_release_all),
      cmocka_unit_test_teardown(test_broadcasting, ops_release_all),
      cmocka_unit_test_teardown(test_reductions, ops_release_all),
      cmocka_unit_test_teardown(test_matmul, ops_release_all),
      cmocka_unit_test_teardown(test_quant_rules, ops_release_all),
      cmocka_unit_test_teardown(test_cat, ops_release_all),
      cmocka_unit_test_teardown(test_misc_rules, ops_release_all),
      cmocka_unit_test_teardown(test_fused_layer_rules, ops_release_all),
      cmocka_unit_test_teardown(test_creation, ops_release_all),
      cmocka_unit_test_teardown(test_attrs, ops_release_all),
      cmocka_unit_test_teardown(test_operand_checks, ops_release_all),
  };
  return cmocka_run_group_tests_name("ops_infer", tests, NULL, NULL);
}
