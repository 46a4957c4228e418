/* Dispatch (bp_op_run and the typed functions) against the CPU plugin and
 * the kernel-less fake host plugin; support and fusion queries. */
#include "ops_fixture.h"

static bp_stream_t* g_stream; /* on cpu:0 */

static int group_setup(void** state) {
  (void)state;
  if (g_cpu == NULL) {
    print_error("the CPU plugin did not load: dispatch tests cannot run\n");
    return -1;
  }
  return bp_stream_create(g_cpu, NULL, &g_stream) == BP_OK ? 0 : -1;
}

static int group_teardown(void** state) {
  (void)state;
  bp_stream_release(g_stream);
  return 0;
}

static bp_tensor_t* cpu_f32(const float* data, int64_t n) {
  bp_tensor_t* t = ops_tensor(g_cpu, BP_DTYPE_F32, 1, &n);
  if (data != NULL) assert_ok(bp_tensor_write(g_stream, t, data, sizeof(float) * (uint64_t)n));
  return t;
}

static void read_f32(const bp_tensor_t* t, float* out, int64_t n) {
  assert_ok(bp_stream_synchronize(g_stream));
  assert_ok(bp_tensor_read(g_stream, t, out, sizeof(float) * (uint64_t)n));
}

static void test_add_allocates_output(void** state) {
  (void)state;
  const float a[4] = {1, 2, 3, 4}, b[4] = {10, 20, 30, 40};
  bp_tensor_t* out = NULL;
  assert_ok(bp_op_add(g_stream, cpu_f32(a, 4), cpu_f32(b, 4), NULL, &out));
  assert_non_null(out);
  ops_track(out);
  assert_int_equal(bp_tensor_dtype(out), BP_DTYPE_F32);
  assert_int_equal(bp_tensor_rank(out), 1);
  assert_int_equal(bp_tensor_sizes(out)[0], 4);
  float r[4];
  read_f32(out, r, 4);
  for (int i = 0; i < 4; ++i) assert_float_equal(r[i], a[i] + b[i], 0.0);
}

static void test_add_given_output_and_alpha(void** state) {
  (void)state;
  const float a[3] = {1, 2, 3}, b[3] = {1, 1, 1};
  bp_tensor_t* given = cpu_f32(NULL, 3);
  bp_tensor_t* out = given;
  bp_binary_attrs_t attrs = {.struct_size = sizeof(attrs),
                             .alpha = {.kind = BP_SCALAR_FLOAT, .v.f = 0.5}};
  assert_ok(bp_op_add(g_stream, cpu_f32(a, 3), cpu_f32(b, 3), &attrs, &out));
  assert_ptr_equal(out, given); /* written in place, no new reference */
  float r[3];
  read_f32(given, r, 3);
  for (int i = 0; i < 3; ++i) assert_float_equal(r[i], a[i] + 0.5f * b[i], 0.0);
}

static void test_add_in_place(void** state) {
  (void)state;
  const float a[3] = {1, 2, 3}, b[3] = {4, 5, 6};
  bp_tensor_t* self = cpu_f32(a, 3);
  bp_tensor_t* out = self;
  assert_ok(bp_op_add(g_stream, self, cpu_f32(b, 3), NULL, &out));
  assert_ptr_equal(out, self);
  float r[3];
  read_f32(self, r, 3);
  for (int i = 0; i < 3; ++i) assert_float_equal(r[i], a[i] + b[i], 0.0);
}

static void test_partial_overlap_rejected(void** state) {
  (void)state;
  bp_tensor_t* base = cpu_f32(NULL, 5);
  bp_tensor_t *lo = NULL, *hi = NULL;
  assert_ok(bp_tensor_slice(base, 0, 0, 4, 1, &lo));
  ops_track(lo);
  assert_ok(bp_tensor_slice(base, 0, 1, 5, 1, &hi));
  ops_track(hi);
  bp_tensor_t* out = hi;
  assert_status(bp_op_add(g_stream, lo, cpu_f32(NULL, 4), NULL, &out), BP_INVALID_ARGUMENT,
                "output 'out' partially overlaps input 'self'");
  assert_ptr_equal(out, hi);
  /* An op that is not elementwise cannot run in place even on an exact alias. */
  int64_t sq[2] = {2, 2};
  bp_tensor_t* m = ops_tensor(g_cpu, BP_DTYPE_F32, 2, sq);
  bp_tensor_t* mo = m;
  assert_status(bp_op_mm(g_stream, m, ops_tensor(g_cpu, BP_DTYPE_F32, 2, sq), NULL, &mo),
                BP_INVALID_ARGUMENT, "aliases (op cannot run in place) input 'self'");
  /* An expanded output would write one element twice. */
  bp_tensor_t* one = cpu_f32(NULL, 1);
  bp_tensor_t* wide = NULL;
  int64_t four = 4;
  assert_ok(bp_tensor_expand(one, 1, &four, &wide));
  ops_track(wide);
  bp_tensor_t* wo = wide;
  assert_status(bp_op_neg(g_stream, cpu_f32(NULL, 4), NULL, &wo), BP_INVALID_ARGUMENT,
                "internally overlapping");
}

static void test_wrong_output_rejected(void** state) {
  (void)state;
  bp_tensor_t* out = cpu_f32(NULL, 5);
  bp_tensor_t* o = out;
  assert_status(bp_op_add(g_stream, cpu_f32(NULL, 4), cpu_f32(NULL, 4), NULL, &o),
                BP_INVALID_ARGUMENT, "output 'out' has dtype f32 and shape [5]; expected f32 and [4]");
  assert_status(bp_op_add(g_stream, cpu_f32(NULL, 4), cpu_f32(NULL, 4), NULL, NULL),
                BP_INVALID_ARGUMENT, "output pointer 'out' is NULL");
  assert_status(bp_op_add(NULL, cpu_f32(NULL, 4), cpu_f32(NULL, 4), NULL, &o),
                BP_INVALID_ARGUMENT, "stream is NULL");
}

static void test_other_device_rejected(void** state) {
  (void)state;
  int64_t n = 4;
  bp_tensor_t* remote = ops_tensor(g_fake, BP_DTYPE_F32, 1, &n);
  bp_tensor_t* out = NULL;
  assert_status(bp_op_add(g_stream, cpu_f32(NULL, 4), remote, NULL, &out), BP_INVALID_ARGUMENT,
                "input 'other' is on device 'fake_host_a:0' but the stream is on device 'cpu:0'");
  assert_null(out);
}

static void test_unsupported_dtype(void** state) {
  (void)state;
  int64_t n = 4;
  bp_tensor_t* a = ops_tensor(g_cpu, BP_DTYPE_C64, 1, &n);
  bp_tensor_t* out = NULL;
  assert_status(bp_op_add(g_stream, a, a, NULL, &out), BP_UNSUPPORTED, "c64");
  assert_int_equal(bp_status_support_reason(), BP_SUPPORT_DTYPE);
  assert_string_equal(bp_support_reason_name(bp_status_support_reason()), "dtype");
  assert_null(out); /* nothing allocated is left behind */

  /* The support query gives the same answer without running anything. */
  bp_tensor_desc_t in[2] = {{.struct_size = sizeof(in[0])}}, o;
  assert_ok(bp_tensor_get_desc(a, &in[0]));
  in[0].buffer = NULL;
  in[1] = in[0];
  o = in[0];
  bp_op_call_t call = {.struct_size = sizeof(call), .op_id = BP_OP_add, .num_inputs = 2,
                       .num_outputs = 1, .compute_dtype = BP_DTYPE_C64,
                       .inputs = (const bp_tensor_desc_t* const[]){&in[0], &in[1]},
                       .outputs = (const bp_tensor_desc_t* const[]){&o}};
  bp_binary_attrs_t attrs = {.struct_size = sizeof(attrs)};
  call.attrs = &attrs;
  bp_support_t s = {.struct_size = sizeof(s)};
  assert_ok(bp_device_query_support(g_cpu, &call, &s));
  assert_int_equal(s.supported, 0);
  assert_int_equal(s.reason, BP_SUPPORT_DTYPE);
  assert_non_null(strstr(s.message, "c64"));
  in[0].dtype = in[1].dtype = o.dtype = call.compute_dtype = BP_DTYPE_F32;
  assert_ok(bp_device_query_support(g_cpu, &call, &s));
  assert_int_equal(s.supported, 1);
  bp_support_t small = {.struct_size = 8};
  assert_status(bp_device_query_support(g_cpu, &call, &small), BP_INVALID_ARGUMENT,
                "struct_size");
}

static void test_backend_without_kernels(void** state) {
  (void)state;
  bp_stream_t* fs = NULL;
  assert_ok(bp_stream_create(g_fake, NULL, &fs));
  int64_t n = 4;
  bp_tensor_t* a = ops_tensor(g_fake, BP_DTYPE_F32, 1, &n);
  bp_tensor_t* out = NULL;
  assert_status(bp_op_add(fs, a, a, NULL, &out), BP_UNIMPLEMENTED,
                "backend 'fake_host_a' has no kernel for op 'add'");
  assert_int_equal(bp_status_support_reason(), BP_SUPPORT_OP);
  assert_null(out);
  /* Any later call resets the reason. */
  assert_int_equal(bp_stream_synchronize(fs), BP_OK);
  assert_int_equal(bp_status_support_reason(), BP_SUPPORT_OK);
  bp_stream_release(fs);

  bp_tensor_desc_t d = {.struct_size = sizeof(d)};
  assert_ok(bp_tensor_get_desc(a, &d));
  d.buffer = NULL;
  bp_op_call_t call = {.struct_size = sizeof(call), .op_id = BP_OP_neg, .num_inputs = 1,
                       .num_outputs = 1, .compute_dtype = BP_DTYPE_F32,
                       .inputs = (const bp_tensor_desc_t* const[]){&d},
                       .outputs = (const bp_tensor_desc_t* const[]){&d}};
  bp_support_t s = {.struct_size = sizeof(s), .supported = 1};
  assert_ok(bp_device_query_support(g_fake, &call, &s));
  assert_int_equal(s.supported, 0);
  assert_int_equal(s.reason, BP_SUPPORT_OP);
  assert_non_null(strstr(s.message, "no kernel for op 'neg'"));

  bp_fusion_caps_t caps;
  memset(&caps, 0xff, sizeof(caps));
  caps.struct_size = sizeof(caps);
  assert_ok(bp_device_query_fusion(g_fake, &caps));
  assert_int_equal(caps.ew_max_instrs, 0);
  assert_int_equal(caps.num_patterns, 0);
  assert_null(caps.patterns);
}

static void test_cat_typed_list(void** state) {
  (void)state;
  const float a[2] = {1, 2}, b[3] = {3, 4, 5};
  const bp_tensor_t* list[2] = {cpu_f32(a, 2), cpu_f32(b, 3)};
  bp_tensor_t* out = NULL;
  bp_dim_attrs_t attrs = {.struct_size = sizeof(attrs), .dim = 0};
  assert_ok(bp_op_cat(g_stream, list, 2, &attrs, &out));
  ops_track(out);
  assert_int_equal(bp_tensor_sizes(out)[0], 5);
  float r[5];
  read_f32(out, r, 5);
  for (int i = 0; i < 5; ++i) assert_float_equal(r[i], (float)(i + 1), 0.0);
  assert_status(bp_op_cat(g_stream, NULL, 2, &attrs, &out), BP_INVALID_ARGUMENT,
                "'tensors' is NULL");
}

static void test_generic_run_counts(void** state) {
  (void)state;
  bp_tensor_t* outs[1] = {NULL};
  const bp_tensor_t* in[3] = {cpu_f32(NULL, 2), cpu_f32(NULL, 2), cpu_f32(NULL, 2)};
  assert_status(bp_op_run(g_stream, BP_OP_add, in, 3, NULL, outs, 1), BP_INVALID_ARGUMENT,
                "takes 2 inputs, got 3");
  assert_status(bp_op_run(g_stream, BP_OP_add, in, 2, NULL, NULL, 1), BP_INVALID_ARGUMENT,
                "outputs is NULL");
  assert_null(outs[0]);
}

/* The dtypes added after f8e5m2 are storage dtypes: tensors, strided reads
 * and writes and views work; ops the CPU plugin does not declare for them
 * are refused cleanly (UNSUPPORTED, or INVALID_ARGUMENT for arithmetic on
 * storage-only dtypes), never run. */
static void test_storage_dtypes(void** state) {
  (void)state;
  const uint32_t storage[] = {BP_DTYPE_U16,        BP_DTYPE_U32,        BP_DTYPE_U64,
                              BP_DTYPE_C128,       BP_DTYPE_F8E4M3FNUZ, BP_DTYPE_F8E5M2FNUZ,
                              BP_DTYPE_F8E8M0FNU,  BP_DTYPE_F6E2M3FN,   BP_DTYPE_F6E3M2FN,
                              BP_DTYPE_F4E2M1FN,   BP_DTYPE_I4,         BP_DTYPE_U4,
                              BP_DTYPE_I2};
  for (size_t k = 0; k < sizeof storage / sizeof storage[0]; ++k) {
    uint32_t dt = storage[k];
    size_t es = bp_dtype_size(dt);
    int64_t sizes[2] = {3, 4};
    uint8_t src[3 * 4 * 16], got[3 * 4 * 16], want[3 * 4 * 16];
    for (size_t i = 0; i < sizeof src; ++i) src[i] = (uint8_t)(i * 7 + k);
    bp_tensor_t* t = ops_tensor(g_cpu, dt, 2, sizes);
    assert_ok(bp_tensor_write(g_stream, t, src, 12 * es));
    assert_ok(bp_tensor_read(g_stream, t, got, 12 * es));
    assert_memory_equal(got, src, 12 * es);
    /* A transposed view reads element (j, i) of the original at (i, j). */
    bp_tensor_t* tt = NULL;
    const int64_t perm[2] = {1, 0};
    assert_ok(bp_tensor_permute(t, perm, &tt));
    ops_track(tt);
    assert_int_equal(bp_tensor_dtype(tt), dt);
    assert_ok(bp_tensor_read(g_stream, tt, got, 12 * es));
    for (int i = 0; i < 4; ++i)
      for (int j = 0; j < 3; ++j) memcpy(want + (i * 3 + j) * es, src + (j * 4 + i) * es, es);
    assert_memory_equal(got, want, 12 * es);
    /* Ops: refused with a status, the output left alone. */
    bp_tensor_t* out = NULL;
    bp_status_t st = bp_op_add(g_stream, t, t, NULL, &out);
    if (st != BP_UNSUPPORTED && st != BP_INVALID_ARGUMENT)
      fail_msg("add on %s: status %d", bp_dtype_name(dt), st);
    assert_null(out);
    bp_cast_attrs_t cast = {.struct_size = sizeof cast, .dtype = dt};
    st = bp_op_to_copy(g_stream, cpu_f32(NULL, 4), &cast, &out);
    assert_int_equal(st, BP_UNSUPPORTED);
    assert_null(out);
  }
  /* fp8 e4m3fnuz is storage only: arithmetic says so by name. */
  int64_t n = 4;
  bp_tensor_t* f8 = ops_tensor(g_cpu, BP_DTYPE_F8E4M3FNUZ, 1, &n);
  bp_tensor_t* out = NULL;
  assert_status(bp_op_add(g_stream, f8, f8, NULL, &out), BP_INVALID_ARGUMENT,
                "has dtype float8_e4m3fnuz; fp8 and sub-byte dtypes are storage only");
}

int run_run_tests(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_teardown(test_add_allocates_output, ops_release_all),
      cmocka_unit_test_teardown(test_add_given_output_and_alpha, ops_release_all),
      cmocka_unit_test_teardown(test_add_in_place, ops_release_all),
      cmocka_unit_test_teardown(test_partial_overlap_rejected, ops_release_all),
      cmocka_unit_test_teardown(test_wrong_output_rejected, ops_release_all),
      cmocka_unit_test_teardown(test_other_device_rejected, ops_release_all),
      cmocka_unit_test_teardown(test_unsupported_dtype, ops_release_all),
      cmocka_unit_test_teardown(test_backend_without_kernels, ops_release_all),
      cmocka_unit_test_teardown(test_cat_typed_list, ops_release_all),
      cmocka_unit_test_teardown(test_generic_run_counts, ops_release_all),
      cmocka_unit_test_teardown(test_storage_dtypes, ops_release_all),
  };
  return cmocka_run_group_tests_name("ops_run", tests, group_setup, group_teardown);
}
