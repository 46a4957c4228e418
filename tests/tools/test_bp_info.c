/* bp-info --json: schema and the CPU plugin's devices (BP_CPU_DEVICES). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "backplane/plugin.h"

/* Runs bp-info with `env` (e.g. "BP_CPU_DEVICES=4 ") and parses its JSON. */
static cJSON* run_bp_info(const char* env, const char* args) {
  char cmd[1024];
  snprintf(cmd, sizeof cmd, "env %s '%s' %s", env, BP_INFO_PATH, args);
  FILE* p = popen(cmd, "r");
  assert_non_null(p);
  static char buf[1 << 20];
  size_t n = fread(buf, 1, sizeof buf - 1, p);
  buf[n] = '\0';
  assert_int_equal(pclose(p), 0);
  cJSON* root = cJSON_Parse(buf);
  assert_non_null(root);
  return root;
}

static const cJSON* find_plugin(const cJSON* root, const char* name) {
  const cJSON* plugins = cJSON_GetObjectItemCaseSensitive(root, "plugins");
  assert_true(cJSON_IsArray(plugins));
  const cJSON* p;
  cJSON_ArrayForEach(p, plugins) {
    const cJSON* n = cJSON_GetObjectItemCaseSensitive(p, "name");
    if (cJSON_IsString(n) && !strcmp(n->valuestring, name)) return p;
  }
  return NULL;
}

static void check_cpu_devices(const char* env, int expected) {
  cJSON* root = run_bp_info(env, "--json");
  const cJSON* abi = cJSON_GetObjectItemCaseSensitive(root, "abi");
  assert_true(cJSON_IsString(abi));
  char want[16];
  snprintf(want, sizeof want, "%d.%d", BP_ABI_VERSION_MAJOR, BP_ABI_VERSION_MINOR);
  assert_string_equal(abi->valuestring, want);
  const cJSON* cpu = find_plugin(root, "cpu");
  assert_non_null(cpu);
  const char* keys[] = {"name", "path", "status", "reason", "abi"};
  for (size_t i = 0; i < sizeof keys / sizeof *keys; ++i)
    assert_true(cJSON_IsString(cJSON_GetObjectItemCaseSensitive(cpu, keys[i])));
  assert_string_equal(cJSON_GetObjectItemCaseSensitive(cpu, "status")->valuestring, "loaded");
  /* The negotiated version: the host's minor for a plugin of this tree. */
  assert_string_equal(cJSON_GetObjectItemCaseSensitive(cpu, "abi")->valuestring, abi->valuestring);
  const cJSON* minor = cJSON_GetObjectItemCaseSensitive(cpu, "abi_minor");
  assert_true(cJSON_IsNumber(minor));
  assert_int_equal(minor->valueint, BP_ABI_VERSION_MINOR);
  const cJSON* devices = cJSON_GetObjectItemCaseSensitive(cpu, "devices");
  assert_true(cJSON_IsArray(devices));
  assert_int_equal(cJSON_GetArraySize(devices), expected);
  const cJSON* d;
  cJSON_ArrayForEach(d, devices) {
    assert_true(cJSON_IsString(cJSON_GetObjectItemCaseSensitive(d, "name")));
    const cJSON* kind = cJSON_GetObjectItemCaseSensitive(d, "kind");
    assert_true(cJSON_IsString(kind));
    assert_string_equal(kind->valuestring, "cpu");
    const cJSON* mem = cJSON_GetObjectItemCaseSensitive(d, "memory_bytes");
    assert_true(cJSON_IsNumber(mem));
    assert_true(mem->valuedouble > 0);
  }
  cJSON_Delete(root);
}

static void test_cpu_one_device_by_default(void** state) {
  (void)state;
  check_cpu_devices("-u BP_CPU_DEVICES", 1);
}

static void test_cpu_four_devices(void** state) {
  (void)state;
  check_cpu_devices("BP_CPU_DEVICES=4", 4);
}

static void test_skipped_plugin_has_reason(void** state) {
  (void)state;
  /* A corrupt manifest on the plugin path is listed as skipped with a reason. */
  char dir[] = "/tmp/bp_info_test_XXXXXX";
  assert_non_null(mkdtemp(dir));
  char path[600];
  snprintf(path, sizeof path, "%s/broken.json", dir);
  FILE* f = fopen(path, "w");
  assert_non_null(f);
  fputs("{ this is not json", f);
  fclose(f);
  char env[700];
  snprintf(env, sizeof env, "BACKPLANE_PLUGIN_PATH=%s", dir);
  cJSON* root = run_bp_info(env, "--json");
  const cJSON* plugins = cJSON_GetObjectItemCaseSensitive(root, "plugins");
  int skipped = 0;
  const cJSON* p;
  cJSON_ArrayForEach(p, plugins) {
    const cJSON* status = cJSON_GetObjectItemCaseSensitive(p, "status");
    if (cJSON_IsString(status) && !strcmp(status->valuestring, "skipped")) {
      const cJSON* reason = cJSON_GetObjectItemCaseSensitive(p, "reason");
      assert_true(cJSON_IsString(reason));
      assert_true(strlen(reason->valuestring) > 0);
      /* Vendor plugins without their driver here (cuda) are skipped too. */
      if (strstr(reason->valuestring, "broken.json")) ++skipped;
    }
  }
  assert_int_equal(skipped, 1);
  /* The CPU plugin still loads beside the broken one. */
  const cJSON* cpu = find_plugin(root, "cpu");
  assert_non_null(cpu);
  assert_string_equal(cJSON_GetObjectItemCaseSensitive(cpu, "status")->valuestring, "loaded");
  cJSON_Delete(root);
  remove(path);
  rmdir(dir);
}

/* --ops --json: every op with id, name, category and a supported object
 * keyed by device; the template plugin runs exactly add and relu (its
 * kernels), the CPU plugin at least every elementwise op. */
static void test_ops_json(void** state) {
  (void)state;
  cJSON* root = run_bp_info("-u BP_CPU_DEVICES", "--ops --json");
  const cJSON* ops = cJSON_GetObjectItemCaseSensitive(root, "ops");
  assert_true(cJSON_IsArray(ops));
  assert_true(cJSON_GetArraySize(ops) >= 144);
  int template_ops = 0, cpu_ops = 0, last_id = 0;
  const cJSON* op;
  cJSON_ArrayForEach(op, ops) {
    const cJSON* id = cJSON_GetObjectItemCaseSensitive(op, "id");
    const cJSON* name = cJSON_GetObjectItemCaseSensitive(op, "name");
    assert_true(cJSON_IsNumber(id));
    assert_true(id->valueint > last_id);
    last_id = id->valueint;
    assert_true(cJSON_IsString(name));
    assert_true(cJSON_IsString(cJSON_GetObjectItemCaseSensitive(op, "category")));
    const cJSON* sup = cJSON_GetObjectItemCaseSensitive(op, "supported");
    assert_true(cJSON_IsObject(sup));
    const cJSON* cpu = cJSON_GetObjectItemCaseSensitive(sup, "cpu:0");
    const cJSON* tpl = cJSON_GetObjectItemCaseSensitive(sup, "template:0");
    assert_true(cJSON_IsBool(cpu));
    assert_true(cJSON_IsBool(tpl));
    if (cJSON_IsTrue(tpl)) {
      ++template_ops;
      assert_true(!strcmp(name->valuestring, "add") || !strcmp(name->valuestring, "relu"));
    }
    if (cJSON_IsTrue(cpu)) ++cpu_ops;
    if (id->valueint <= 65) assert_true(cJSON_IsTrue(cpu)); /* abs .. where */
    if (cJSON_IsFalse(tpl)) { /* an unsupported op says why */
      const cJSON* why = cJSON_GetObjectItemCaseSensitive(
          cJSON_GetObjectItemCaseSensitive(op, "reasons"), "template:0");
      assert_true(cJSON_IsString(why));
      assert_true(strlen(why->valuestring) > 0);
    }
  }
  assert_int_equal(template_ops, 2);
  assert_true(cpu_ops >= 80);
  cJSON_Delete(root);
}

/* The CUDA plugin, where it is built, loads without a driver and is listed
 * as skipped with the reason (a missing driver named as such). */
static void test_cuda_without_driver(void** state) {
  (void)state;
  cJSON* root = run_bp_info("BP_CUDA_DRIVER_PATH=/nonexistent/libcuda.so.1", "--json");
  const cJSON* cuda = find_plugin(root, "cuda");
  if (cuda) {
    assert_string_equal(cJSON_GetObjectItemCaseSensitive(cuda, "status")->valuestring, "skipped");
    assert_string_equal(cJSON_GetObjectItemCaseSensitive(cuda, "reason_code")->valuestring,
                        "UNAVAILABLE");
    assert_non_null(strstr(cJSON_GetObjectItemCaseSensitive(cuda, "reason")->valuestring,
                           "no CUDA driver (cannot load /nonexistent/libcuda.so.1"));
  }
  cJSON_Delete(root);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_cpu_one_device_by_default),
      cmocka_unit_test(test_cpu_four_devices),
      cmocka_unit_test(test_skipped_plugin_has_reason),
      cmocka_unit_test(test_ops_json),
      cmocka_unit_test(test_cuda_without_driver),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
