/* Versioning through the real host: plugins built against the frozen 1.0
 * headers, the 1.1-shaped ones (every struct, descriptor and table grown)
 * and the current ones load and run exactly alike: same negotiated minor,
 * same results for add and for cat (a list operand), memory spaces and
 * fusion patterns read at the plugin's stride. A plugin written in C++
 * loads too. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <cmocka.h>

#include "backplane/backplane.h"
#include "backplane/plugin.h"

/* The minor a plugin agrees on with this host: min(host, plugin); only the
 * plugin built against the frozen 1.0 headers is older than the host. */
static uint32_t agreed_minor(const char* name) {
  /* the minor a plugin built against each header copy agrees on: the
   * lower of its own and this host's */
  if (strcmp(name, "abi_v1_0") == 0) return 0u;
  if (strcmp(name, "abi_v1_1") == 0) return BP_ABI_VERSION_MINOR < 1 ? BP_ABI_VERSION_MINOR : 1u;
  return (uint32_t)BP_ABI_VERSION_MINOR;
}

static bp_context_t* load(const char* file, const char* name, bp_device_t** out_dev) {
  bp_context_options_t options = {.struct_size = sizeof(options), .flags = BP_CONTEXT_NO_DISCOVERY};
  bp_context_t* ctx = NULL;
  assert_int_equal(bp_context_create(&options, &ctx), BP_OK);
  char path[4096];
  snprintf(path, sizeof(path), "%s/%s", BP_ABI_PLUGIN_DIR, file);
  bp_plugin_t* plugin = NULL;
  assert_int_equal(bp_context_register_plugin(ctx, path, &plugin), BP_OK);
  bp_plugin_info_t info = {.struct_size = sizeof(info)};
  assert_int_equal(bp_plugin_get_info(plugin, &info), BP_OK);
  assert_string_equal(info.name, name);
  assert_int_equal(info.abi_major, 1);
  assert_int_equal(info.abi_minor, agreed_minor(name));
  assert_int_equal(bp_plugin_device(plugin, 0, out_dev), BP_OK);
  return ctx;
}

static bp_tensor_t* vec(bp_stream_t* s, bp_device_t* dev, const float* v, int64_t n) {
  bp_tensor_t* t = NULL;
  assert_int_equal(bp_tensor_create(dev, BP_DTYPE_F32, 1, &n, &t), BP_OK);
  assert_int_equal(bp_tensor_write(s, t, v, sizeof(float) * (uint64_t)n), BP_OK);
  return t;
}

static void run_plugin(const char* file, const char* name) {
  bp_device_t* dev = NULL;
  bp_context_t* ctx = load(file, name, &dev);
  assert_true(bp_device_properties(dev)->dtype_mask & BP_DTYPE_BIT(BP_DTYPE_F32));
  /* Two memory spaces, each entry where this library's stride puts it. */
  bp_memory_space_info_t spaces[3];
  uint32_t count = 0;
  assert_int_equal(bp_device_memory_spaces(dev, 3, sizeof(spaces[0]), spaces, &count), BP_OK);
  assert_int_equal(count, 2);
  assert_int_equal(spaces[0].kind, BP_MEMORY_DEVICE);
  assert_int_equal(spaces[1].kind, BP_MEMORY_HOST_PINNED);
  assert_int_equal(spaces[1].alignment_bytes, 16);
  /* Fusion: patterns at the plugin's stride, the opcode bit set of any size. */
  bp_fusion_caps_t caps = {.struct_size = sizeof(caps)};
  assert_int_equal(bp_device_query_fusion(dev, &caps), BP_OK);
  assert_int_equal(caps.num_patterns, 2);
  assert_true(caps.pattern_stride >= BP_FUSED_PATTERN_V1_SIZE);
  const bp_fused_pattern_t* p1 =
      (const bp_fused_pattern_t*)(const void*)((const char*)caps.patterns + caps.pattern_stride);
  assert_int_equal(caps.patterns->op_id, BP_OP_addcmul);
  assert_int_equal(p1->op_id, BP_OP_lerp);
  assert_true(p1->dtype_mask & BP_DTYPE_BIT(BP_DTYPE_F16));
  assert_true(caps.ew_opcode_words * 64 > BP_OP_add);
  assert_true(caps.ew_opcode_mask[BP_OP_add / 64] & (UINT64_C(1) << (BP_OP_add % 64)));

  bp_stream_t* s = NULL;
  assert_int_equal(bp_stream_create(dev, NULL, &s), BP_OK);
  const float av[5] = {1, 2, 3, 4, 5}, bv[5] = {10, 20, 30, 40, 50};
  bp_tensor_t* a = vec(s, dev, av, 5);
  bp_tensor_t* b = vec(s, dev, bv, 5);
  bp_tensor_t* sum = NULL;
  bp_binary_attrs_t at = {.struct_size = sizeof(at), .alpha = {.kind = BP_SCALAR_FLOAT, .v.f = 2.0}};
  assert_int_equal(bp_op_add(s, a, b, &at, &sum), BP_OK);
  float got[10];
  assert_int_equal(bp_tensor_read(s, sum, got, 5 * sizeof(float)), BP_OK);
  for (int i = 0; i < 5; ++i) assert_true(got[i] == av[i] + 2 * bv[i]);
  /* cat of three views: the list travels with list_begin / list_count. */
  bp_tensor_t *v0 = NULL, *v1 = NULL, *cat = NULL;
  assert_int_equal(bp_tensor_slice(a, 0, 0, 2, 1, &v0), BP_OK);
  assert_int_equal(bp_tensor_slice(b, 0, 0, 3, 1, &v1), BP_OK);
  const bp_tensor_t* list[3] = {v0, v1, a};
  bp_dim_attrs_t dim = {.struct_size = sizeof(dim)};
  assert_int_equal(bp_op_cat(s, list, 3, &dim, &cat), BP_OK);
  assert_int_equal(bp_tensor_read(s, cat, got, sizeof(got)), BP_OK);
  const float want[10] = {1, 2, 10, 20, 30, 1, 2, 3, 4, 5};
  assert_int_equal(bp_tensor_numel(cat), 10);
  for (int i = 0; i < 10; ++i) assert_true(got[i] == want[i]);
  bp_tensor_release(v0);
  bp_tensor_release(v1);
  bp_tensor_release(cat);
  bp_tensor_release(sum);
  bp_tensor_release(a);
  bp_tensor_release(b);
  bp_stream_release(s);
  bp_context_release(ctx);
}

static void test_plugin_of_1_0(void** state) {
  (void)state;
  run_plugin("libbp_abi_plugin_v1_0.so", "abi_v1_0");
}
static void test_plugin_of_1_1(void** state) {
  (void)state;
  run_plugin("libbp_abi_plugin_v1_1.so", "abi_v1_1");
}
static void test_plugin_of_today(void** state) {
  (void)state;
  run_plugin("libbp_abi_plugin_current.so", "abi_current");
}
static void test_cxx_plugin(void** state) {
  (void)state;
  bp_device_t* dev = NULL;
  bp_context_t* ctx = load("libbp_abi_cxx_plugin.so", "cxx", &dev);
  assert_string_equal(bp_device_properties(dev)->name, "C++ device");
  bp_context_release(ctx);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_plugin_of_1_0),
      cmocka_unit_test(test_plugin_of_1_1),
      cmocka_unit_test(test_plugin_of_today),
#ifdef BP_ABI_HAVE_CXX
      cmocka_unit_test(test_cxx_plugin),
#endif
  };
  return cmocka_run_group_tests_name("abi_versions", tests, NULL, NULL);
}
