/* The test groups of test_appapi (one file each). */
#ifndef BACKPLANE_TESTS_APPAPI_H_
#define BACKPLANE_TESTS_APPAPI_H_

#include "ops_fixture.h"

/* A stream on cpu:0 for a test group (group setup and teardown). */
extern bp_stream_t* g_stream;
int appapi_stream_setup(void** state);
int appapi_stream_teardown(void** state);

int run_growth_tests(void);
int run_view_tests(void);
int run_empty_tests(void);
int run_status_tests(void);
int run_creation_tests(void);
int run_optional_tests(void);

#endif /* BACKPLANE_TESTS_APPAPI_H_ */
