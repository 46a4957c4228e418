/* Region tests' helper: compiles a region on the fixture's cpu:0 and
 * requires success. Include after <cmocka.h> and cpu_fixture.h.
 * Header-only. */
#ifndef BP_TESTS_REGION_COMPILE_H_
#define BP_TESTS_REGION_COMPILE_H_

/* Compiles `d` on cpu:0 (must succeed). */
static inline bp_region_t* compile_ok(const bp_region_desc_t* d) {
  bp_region_t* r = NULL;
  bp_support_t why = {.struct_size = sizeof why};
  bp_status_t st = bp_region_compile(g_dev, d, &why, &r);
  if (st != BP_OK) print_error("compile: %s (%s)\n", bp_status_message(), why.message);
  assert_int_equal(st, BP_OK);
  assert_int_equal(why.supported, 1);
  return r;
}

#endif /* BP_TESTS_REGION_COMPILE_H_ */
