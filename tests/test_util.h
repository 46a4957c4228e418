/* Helpers shared by the unit tests. Include after <cmocka.h>: the helpers
 * assert, so a failure fails the calling test. */
#ifndef BP_TESTS_TEST_UTIL_H_
#define BP_TESTS_TEST_UTIL_H_

#include <string.h>

#include "backplane/backplane.h"

/* A context that discovers no plugins (only bp_context_register_plugin adds
 * them). Never NULL; the caller releases it with bp_context_release. */
static inline bp_context_t* bp_test_context_bare(void) {
  bp_context_options_t o;
  memset(&o, 0, sizeof(o));
  o.struct_size = sizeof(o);
  o.flags = BP_CONTEXT_NO_DISCOVERY;
  bp_context_t* ctx = NULL;
  assert_int_equal(bp_context_create(&o, &ctx), BP_OK);
  assert_non_null(ctx);
  return ctx;
}

#endif /* BP_TESTS_TEST_UTIL_H_ */
