/* The application API's out-structs follow the plugin ABI's growth rule: a
 * caller built against the first released header (struct_size = the first
 * released size) and one built against a later, larger header both work;
 * the library writes only within the caller's struct_size, zeroes the
 * fields it does not know and leaves struct_size as the caller set it. */
#include "appapi.h"

#define GUARD 0xA5
#define EXTRA 16 /* bytes a later header appended */
#define SLACK 48 /* guard bytes past the caller's struct */

typedef bp_status_t (*fill_fn)(void* out);

static bp_plugin_t* cpu_plugin(void) { return bp_device_plugin(g_cpu); }
static bp_status_t fill_plugin_info(void* out) { return bp_plugin_get_info(cpu_plugin(), out); }
static bp_status_t fill_fusion(void* out) { return bp_device_query_fusion(g_cpu, out); }
static bp_status_t fill_op_info(void* out) { return bp_op_get_info(BP_OP_add, out); }
static bp_status_t fill_support(void* out) {
  int64_t n = 4;
  bp_tensor_desc_t d = {.struct_size = sizeof(d), .dtype = BP_DTYPE_F32, .rank = 1, .sizes = {n},
                        .strides = {1}};
  bp_tensor_desc_t ins[2] = {d, d};
  bp_binary_attrs_t attrs = {.struct_size = sizeof(attrs)};
  bp_op_call_t call = {.struct_size = sizeof(call), .op_id = BP_OP_add, .num_inputs = 2,
                       .num_outputs = 1, .compute_dtype = BP_DTYPE_F32,
                       .inputs = (const bp_tensor_desc_t* const[]){&ins[0], &ins[1]},
                       .outputs = (const bp_tensor_desc_t* const[]){&d}, .attrs = &attrs};
  return bp_device_query_support(g_cpu, &call, out);
}

static bp_tensor_t* g_desc_tensor;
static bp_status_t fill_desc(void* out) { return bp_tensor_get_desc(g_desc_tensor, out); }

static void set_size(unsigned char* buf, uint32_t size) { memcpy(buf, &size, sizeof(size)); }
static uint32_t get_size(const unsigned char* buf) {
  uint32_t s;
  memcpy(&s, buf, sizeof(s));
  return s;
}
static void assert_bytes(const unsigned char* p, size_t n, unsigned char v) {
  for (size_t i = 0; i < n; ++i) {
    if (p[i] != v) {
      print_error("byte %zu is 0x%02x, expected 0x%02x\n", i, p[i], v);
      fail();
    }
  }
}

/* One out-struct API at the first released size, below it and grown.
 * Bytes [4, cmp) are compared with a plain call's answer. */
static void check_growth(fill_fn fill, size_t v1, size_t cur, size_t cmp) {
  uint64_t ref_store[512], store[512];
  unsigned char* ref = (unsigned char*)ref_store;
  unsigned char* buf = (unsigned char*)store;
  assert_true(cur + EXTRA + SLACK <= sizeof(store));
  assert_true(v1 <= cur);
  memset(ref, 0, cur);
  set_size(ref, (uint32_t)cur);
  assert_ok(fill(ref));

  /* Below the first released size: refused, nothing written. */
  memset(buf, GUARD, sizeof(store));
  set_size(buf, (uint32_t)v1 - 4);
  assert_status(fill(buf), BP_INVALID_ARGUMENT, "struct_size");
  assert_bytes(buf + 4, sizeof(store) - 4, GUARD);

  /* The first released size: its fields, nothing past it. */
  memset(buf, GUARD, sizeof(store));
  set_size(buf, (uint32_t)v1);
  assert_ok(fill(buf));
  assert_int_equal(get_size(buf), v1);
  assert_memory_equal(buf + 4, ref + 4, (cmp < v1 ? cmp : v1) - 4);
  assert_bytes(buf + v1, sizeof(store) - v1, GUARD);

  /* A later, larger header: our fields, zeros for the ones we do not know,
   * nothing past the caller's struct. */
  memset(buf, GUARD, sizeof(store));
  set_size(buf, (uint32_t)(cur + EXTRA));
  assert_ok(fill(buf));
  assert_int_equal(get_size(buf), cur + EXTRA);
  assert_memory_equal(buf + 4, ref + 4, cmp - 4);
  assert_bytes(buf + cur, EXTRA, 0);
  assert_bytes(buf + cur + EXTRA, sizeof(store) - cur - EXTRA, GUARD);
}

static void test_plugin_info_growth(void** state) {
  (void)state;
  check_growth(fill_plugin_info, BP_PLUGIN_INFO_V1_SIZE, sizeof(bp_plugin_info_t),
               sizeof(bp_plugin_info_t));
  bp_plugin_info_t info = {.struct_size = BP_PLUGIN_INFO_V1_SIZE};
  assert_ok(bp_plugin_get_info(cpu_plugin(), &info));
  assert_string_equal(info.name, "cpu");
  assert_int_equal(info.state, BP_PLUGIN_LOADED);
}

static void test_fusion_growth(void** state) {
  (void)state;
  check_growth(fill_fusion, offsetof(bp_fusion_caps_t, patterns) + sizeof(void*),
               sizeof(bp_fusion_caps_t), sizeof(bp_fusion_caps_t));
}

static void test_support_growth(void** state) {
  (void)state;
  /* The message is compared up to its terminator (a supported answer has
   * an empty one; the bytes after it are the plugin's). */
  check_growth(fill_support, offsetof(bp_support_t, message) + sizeof(((bp_support_t*)0)->message),
               sizeof(bp_support_t), offsetof(bp_support_t, message) + 1);
  bp_support_t s = {.struct_size = sizeof(s)};
  assert_ok(fill_support(&s));
  assert_int_equal(s.supported, 1);
}

static void test_op_info_growth(void** state) {
  (void)state;
  check_growth(fill_op_info, BP_OP_INFO_V1_SIZE, sizeof(bp_op_info_t), sizeof(bp_op_info_t));
  bp_op_info_t info = {.struct_size = BP_OP_INFO_V1_SIZE};
  assert_ok(bp_op_get_info(BP_OP_add, &info));
  assert_string_equal(info.name, "add");
}

static void test_tensor_desc_growth(void** state) {
  (void)state;
  g_desc_tensor = T(F32, 3, 4);
  check_growth(fill_desc, BP_TENSOR_DESC_V1_SIZE, sizeof(bp_tensor_desc_t),
               sizeof(bp_tensor_desc_t));
  bp_tensor_desc_t d = {.struct_size = BP_TENSOR_DESC_V1_SIZE};
  assert_ok(bp_tensor_get_desc(g_desc_tensor, &d));
  assert_int_equal(d.sizes[1], 4);
  assert_int_equal(d.strides[0], 4);
  assert_status(bp_tensor_get_desc(NULL, &d), BP_INVALID_ARGUMENT, "'t'");
}

/* A struct_size no struct has (an uninitialized field) is refused before
 * anything is written, rather than zeroed up to. */
static void test_garbage_struct_size(void** state) {
  (void)state;
  uint64_t store[8];
  memset(store, GUARD, sizeof(store));
  set_size((unsigned char*)store, 0xA5A5A5A5u);
  bp_plugin_info_t* info = (bp_plugin_info_t*)(void*)store;
  assert_status(bp_plugin_get_info(cpu_plugin(), info), BP_INVALID_ARGUMENT, "not a struct size");
  assert_bytes((const unsigned char*)store + 4, sizeof(store) - 4, GUARD);
}

/* bp_op_infer's outputs are the caller's own descriptors, each sized by its
 * struct_size: a first-release descriptor and a grown one side by side. */
typedef struct grown_desc {
  bp_tensor_desc_t d;
  uint64_t later[EXTRA / 8];
} grown_desc_t;

static void test_infer_growth(void** state) {
  (void)state;
  struct {
    bp_tensor_desc_t v1;
    unsigned char guard[SLACK];
  } a;
  struct {
    grown_desc_t g;
    unsigned char guard[SLACK];
  } b;
  memset(&a, GUARD, sizeof(a));
  memset(&b, GUARD, sizeof(b));
  a.v1.struct_size = BP_TENSOR_DESC_V1_SIZE;
  a.v1.dtype = BP_DTYPE_INVALID;
  b.g.d.struct_size = sizeof(grown_desc_t);
  b.g.d.dtype = BP_DTYPE_INVALID;
  bp_sort_attrs_t attrs = {.struct_size = sizeof(attrs), .dim = -1};
  bp_tensor_desc_t* outs[2] = {&a.v1, &b.g.d};
  assert_ok(bp_op_infer(BP_OP_sort, (const bp_tensor_t*[]){T(F32, 3, 5)}, 1, &attrs, outs, 2));
  assert_int_equal(a.v1.struct_size, BP_TENSOR_DESC_V1_SIZE);
  assert_int_equal(a.v1.dtype, BP_DTYPE_F32);
  assert_int_equal(a.v1.rank, 2);
  assert_int_equal(a.v1.sizes[1], 5);
  assert_int_equal(a.v1.strides[0], 5);
  assert_bytes(a.guard, SLACK, GUARD);
  assert_int_equal(b.g.d.struct_size, sizeof(grown_desc_t));
  assert_int_equal(b.g.d.dtype, BP_DTYPE_I64);
  assert_int_equal(b.g.d.sizes[0], 3);
  assert_bytes((const unsigned char*)b.g.later, EXTRA, 0);
  assert_bytes(b.guard, SLACK, GUARD);

  /* Too small, or missing: refused. */
  a.v1.struct_size = 8;
  assert_status(bp_op_infer(BP_OP_sort, (const bp_tensor_t*[]){T(F32, 3)}, 1, &attrs, outs, 2),
                BP_INVALID_ARGUMENT, "out_outputs[0]");
  a.v1.struct_size = BP_TENSOR_DESC_V1_SIZE;
  outs[1] = NULL;
  assert_status(bp_op_infer(BP_OP_sort, (const bp_tensor_t*[]){T(F32, 3)}, 1, &attrs, outs, 2),
                BP_INVALID_ARGUMENT, "out_outputs[1] is NULL");
}

int run_growth_tests(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_teardown(test_plugin_info_growth, ops_release_all),
      cmocka_unit_test_teardown(test_fusion_growth, ops_release_all),
      cmocka_unit_test_teardown(test_support_growth, ops_release_all),
      cmocka_unit_test_teardown(test_op_info_growth, ops_release_all),
      cmocka_unit_test_teardown(test_infer_growth, ops_release_all),
      cmocka_unit_test_teardown(test_tensor_desc_growth, ops_release_all),
      cmocka_unit_test_teardown(test_garbage_struct_size, ops_release_all),
  };
  return cmocka_run_group_tests_name("growth", tests, NULL, NULL);
}
