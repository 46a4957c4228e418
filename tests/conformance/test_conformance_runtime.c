/* The runtime cases of the conformance suite, run in-process: every case
 * passes on the CPU plugin (with two devices, so the multi-device cases run)
 * and on the template plugin; a backend whose add is deliberately wrong has
 * its op-based runtime cases scored FAIL while its memory and copy cases
 * still pass; forged cases show the SKIPPED and FAIL paths of the memory
 * checks.
 *
 * The plugins are registered explicitly: the CPU and template plugins from
 * BACKPLANE_TEST_PLUGIN_DIR, the faulty template build from
 * BPC_TEST_FAULTY_DIR (compile definition).
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "conform.h"

typedef struct fixture {
  bp_context_t* ctx;
  bp_device_t* dev;
  bp_stream_t* stream;
  bpc_case_list_t cases;
} fixture_t;

/* Context with one plugin (library `file` in `dir`), its first device, a
 * stream and its runtime cases. */
static void fixture_open(fixture_t* f, const char* dir, const char* file, const char* backend) {
  memset(f, 0, sizeof *f);
  bp_context_options_t co;
  memset(&co, 0, sizeof co);
  co.struct_size = sizeof co;
  co.flags = BP_CONTEXT_NO_DISCOVERY;
  assert_int_equal(bp_context_create(&co, &f->ctx), BP_OK);
  char path[1024];
  snprintf(path, sizeof path, "%s/%s", dir ? dir : ".", file);
  if (bp_context_register_plugin(f->ctx, path, NULL) != BP_OK)
    fail_msg("cannot load %s: %s", path, bp_status_message());
  assert_int_equal(bp_context_find_device(f->ctx, backend, &f->dev), BP_OK);
  assert_int_equal(bp_stream_create(f->dev, NULL, &f->stream), BP_OK);
  bpc_runtime_target_t t;
  assert_int_equal(bpc_runtime_target_query(f->dev, &t), BP_OK);
  assert_true(t.num_spaces >= 1);
  assert_int_equal(bpc_runtime_cases_generate(&t, &f->cases), BP_OK);
  /* The collectives area comes from its own generator (quick set). */
  assert_int_equal(bpc_collective_cases_generate(1, 0, &f->cases), BP_OK);
}

static void fixture_close(fixture_t* f) {
  bpc_case_list_free(&f->cases);
  if (f->stream) bp_stream_release(f->stream);
  if (f->ctx) bp_context_release(f->ctx);
}

static size_t count_area(const bpc_case_list_t* l, uint32_t area) {
  size_t n = 0;
  for (size_t k = 0; k < l->count; k++) n += l->items[k].op_id == BPC_RUNTIME_OP(area);
  return n;
}

/* Runs every case; returns the number that did not PASS (printed). */
static size_t run_all(fixture_t* f) {
  size_t bad = 0;
  for (size_t k = 0; k < f->cases.count; k++) {
    bpc_result_t r;
    bpc_execute_case(f->dev, f->stream, &f->cases.items[k], &r);
    if (r.status != BPC_PASS) {
      fprintf(stderr, "%s: %s: %s\n", f->cases.items[k].id, bpc_status_name(r.status), r.message);
      bad++;
    }
  }
  return bad;
}

static void test_cpu_two_devices_pass(void** state) {
  (void)state;
  setenv("BP_CPU_DEVICES", "2", 1);
  fixture_t f;
  fixture_open(&f, getenv("BACKPLANE_TEST_PLUGIN_DIR"), "libbp_plugin_cpu.so", "cpu");
  unsetenv("BP_CPU_DEVICES");
  /* Three memory spaces, two devices: every area has cases (collectives
   * on the cpu plugin's native comm table). */
  for (uint32_t a = 0; a < BPC_RT_AREA_COUNT_; a++) assert_true(count_area(&f.cases, a) > 0);
  assert_int_equal(run_all(&f), 0);
  fixture_close(&f);
}

static void test_template_pass(void** state) {
  (void)state;
  fixture_t f;
  fixture_open(&f, getenv("BACKPLANE_TEST_PLUGIN_DIR"), "libbp_plugin_template.so", "template");
  /* One device: no multi-device cases; collectives host-staged. */
  assert_int_equal(count_area(&f.cases, BPC_RT_MULTI_DEVICE), 0);
  assert_true(count_area(&f.cases, BPC_RT_COLLECTIVES) > 0);
  assert_true(count_area(&f.cases, BPC_RT_STREAM_ORDER) > 0);
  assert_int_equal(run_all(&f), 0);
  fixture_close(&f);
}

/* The faulty template adds 1 to the first output element of every add. */
static void test_wrong_add_fails(void** state) {
  (void)state;
  fixture_t f;
  fixture_open(&f, BPC_TEST_FAULTY_DIR, "libbp_faulty_wrong.so", "faulty_wrong");
  size_t failed = 0;
  for (size_t k = 0; k < f.cases.count; k++) {
    const bpc_case_t* c = &f.cases.items[k];
    bpc_result_t r;
    bpc_execute_case(f.dev, f.stream, c, &r);
    /* Collectives use no op: they pass on the faulty plugin too. */
    int op_based = strcmp(c->dtype_label, "f32") == 0 &&
                   c->op_id != BPC_RUNTIME_OP(BPC_RT_COLLECTIVES);
    int refusal = c->op_id == BPC_RUNTIME_OP(BPC_RT_ERRORS); /* add never runs */
    if (op_based && !refusal) {
      if (r.status != BPC_FAIL) fail_msg("%s: %s, expected FAIL", c->id, bpc_status_name(r.status));
      assert_non_null(strstr(r.message, "element 0"));
      failed++;
    } else if (r.status != BPC_PASS) {
      fail_msg("%s: %s (%s), expected PASS", c->id, bpc_status_name(r.status), r.message);
    }
  }
  assert_true(failed >= 5);
  fixture_close(&f);
}

static const bpc_case_t* find_case(const fixture_t* f, const char* id) {
  for (size_t k = 0; k < f->cases.count; k++) {
    if (strcmp(f->cases.items[k].id, id) == 0) return &f->cases.items[k];
  }
  fail_msg("no case %s", id);
  return NULL;
}

static void test_forged_memory_cases(void** state) {
  (void)state;
  fixture_t f;
  fixture_open(&f, getenv("BACKPLANE_TEST_PLUGIN_DIR"), "libbp_plugin_template.so", "template");
  bpc_case_t c = *find_case(&f, "runtime/memory/device/over_capacity");
  bpc_result_t r;
  /* A request within the capacity is granted: the refusal check FAILs. */
  c.rt_args[0] = 4096;
  bpc_execute_case(f.dev, f.stream, &c, &r);
  assert_int_equal(r.status, BPC_FAIL);
  assert_non_null(strstr(r.message, "succeeded"));
  /* No capacity known: SKIPPED with the reason. */
  c.rt_args[0] = 0;
  bpc_execute_case(f.dev, f.stream, &c, &r);
  assert_int_equal(r.status, BPC_SKIPPED);
  assert_non_null(strstr(r.message, "capacity"));
  /* A memory space the device lacks: allocation is refused with
   * INVALID_ARGUMENT, not RESOURCE_EXHAUSTED: FAIL naming both. */
  c = *find_case(&f, "runtime/memory/device/over_capacity");
  c.rt_memory_space = 7;
  bpc_execute_case(f.dev, f.stream, &c, &r);
  assert_int_equal(r.status, BPC_FAIL);
  assert_non_null(strstr(r.message, "expected RESOURCE_EXHAUSTED"));
  /* A malformed case is a FAIL of the suite, not a crash. */
  c.rt_check = 999;
  bpc_execute_case(f.dev, f.stream, &c, &r);
  assert_int_equal(r.status, BPC_FAIL);
  fixture_close(&f);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_cpu_two_devices_pass),
      cmocka_unit_test(test_template_pass),
      cmocka_unit_test(test_wrong_add_fails),
      cmocka_unit_test(test_forged_memory_cases),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
