/* The test groups of test_appapi (one file each). */
#ifndef BACKPLANE_TESTS_APPAPI_H_
#define BACKPLANE_TESTS_APPAPI_H_

#include "ops_fixture.h"

int run_growth_tests(void);

#endif /* BACKPLANE_TESTS_APPAPI_H_ */
