#include "appapi.h"

bp_stream_t* g_stream;

int appapi_stream_setup(void** state) {
  (void)state;
  return bp_stream_create(g_cpu, NULL, &g_stream) == BP_OK ? 0 : -1;
}

int appapi_stream_teardown(void** state) {
  (void)state;
  bp_stream_release(g_stream);
  g_stream = NULL;
  return 0;
}

int main(void) {
  if (ops_fixture_setup() != 0 || g_cpu == NULL) return 1;
  int failed = 0;
  failed += run_growth_tests();
  failed += run_view_tests();
  failed += run_empty_tests();
  failed += run_status_tests();
  failed += run_creation_tests();
  failed += run_optional_tests();
  bp_context_release(g_ctx);
  return failed;
}
