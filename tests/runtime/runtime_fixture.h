/* Shared fixture of the runtime tests: a context with the two fake host
 * plugins (fake_host_a, fake_host_b; two devices each) and one stream per
 * device. */
#ifndef BACKPLANE_TESTS_RUNTIME_FIXTURE_H_
#define BACKPLANE_TESTS_RUNTIME_FIXTURE_H_

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <string.h>

#include "backplane/backplane.h"

typedef struct fixture {
  bp_context_t* ctx;
  bp_plugin_t* pa;
  bp_plugin_t* pb;
  bp_device_t* a0;
  bp_device_t* a1;
  bp_device_t* b0;
  bp_device_t* b1;
  bp_stream_t* sa0;
  bp_stream_t* sa1;
  bp_stream_t* sb0;
} fixture_t;

int fixture_setup(void** state);
int fixture_teardown(void** state);
/* Releases the fixture's references without checking that nothing else
 * holds the context. */
int fixture_teardown_keep(void* state);

/* Bytes the fake plugin has allocated on a device in one memory kind. */
uint64_t fake_used_bytes(bp_device_t* device, uint32_t memory_space);

/* Asserts the status and that the thread's message contains `needle`. */
#define assert_status_msg(expr, code, needle)                                                  \
  do {                                                                                         \
    bp_status_t st_ = (expr);                                                                  \
    if (st_ != (code))                                                                         \
      print_error("status %d (%s): %s\n", (int)st_, bp_status_name(st_), bp_status_message()); \
    assert_int_equal(st_, (code));                                                             \
    if (!strstr(bp_status_message(), (needle)))                                                \
      print_error("message \"%s\" lacks \"%s\"\n", bp_status_message(), (needle));             \
    assert_non_null(strstr(bp_status_message(), (needle)));                                    \
  } while (0)

#define assert_ok(expr)                                                                        \
  do {                                                                                         \
    bp_status_t st_ = (expr);                                                                  \
    if (st_ != BP_OK)                                                                          \
      print_error("status %d (%s): %s\n", (int)st_, bp_status_name(st_), bp_status_message()); \
    assert_int_equal(st_, BP_OK);                                                              \
  } while (0)

#define FIXTURE_TEST(fn) cmocka_unit_test_setup_teardown(fn, fixture_setup, fixture_teardown)

#endif
