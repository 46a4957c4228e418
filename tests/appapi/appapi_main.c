#include "appapi.h"

int main(void) {
  if (ops_fixture_setup() != 0 || g_cpu == NULL) return 1;
  int failed = 0;
  failed += run_growth_tests();
  bp_context_release(g_ctx);
  return failed;
}
