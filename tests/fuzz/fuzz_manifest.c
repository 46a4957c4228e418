/* libFuzzer target: one plugin manifest per input, registered on a fresh
 * context (no discovery). The invariant checked on top of the sanitizers:
 * every manifest ends with a loaded plugin or with a status and a non-empty
 * message free of control characters.
 *
 * The input is written to <temp folder>/case.json; a link to the good fake
 * plugin sits beside it, so "library": "libbp_fake_good.so" loads. */
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "backplane/backplane.h"

static char g_dir[64];
static char g_case[128];

static void cleanup(void) {
  char link[128];
  snprintf(link, sizeof(link), "%s/libbp_fake_good.so", g_dir);
  unlink(link);
  unlink(g_case);
  rmdir(g_dir);
}

int LLVMFuzzerInitialize(int* argc, char*** argv) {
  (void)argc;
  (void)argv;
  snprintf(g_dir, sizeof(g_dir), "/tmp/bp_fuzz_manifest_XXXXXX");
  if (!mkdtemp(g_dir)) abort();
  char link[128];
  snprintf(link, sizeof(link), "%s/libbp_fake_good.so", g_dir);
  if (symlink(BP_FUZZ_FAKE_GOOD, link) != 0) abort();
  snprintf(g_case, sizeof(g_case), "%s/case.json", g_dir);
  /* The plugin is instrumented too: pin it so the loader's dlclose never
   * unmaps coverage counters libFuzzer still reads. */
  if (!dlopen(BP_FUZZ_FAKE_GOOD, RTLD_NOW | RTLD_NODELETE)) abort();
  atexit(cleanup);
  bp_log_set_level(BP_LOG_ERROR);
  return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  FILE* fp = fopen(g_case, "wb");
  if (!fp) abort();
  if (size > 0 && fwrite(data, 1, size, fp) != size) abort();
  if (fclose(fp) != 0) abort();

  bp_context_options_t o;
  memset(&o, 0, sizeof(o));
  o.struct_size = sizeof(o);
  o.flags = BP_CONTEXT_NO_DISCOVERY;
  bp_context_t* ctx = NULL;
  if (bp_context_create(&o, &ctx) != BP_OK) abort();
  bp_plugin_t* plugin = NULL;
  bp_status_t st = bp_context_register_plugin(ctx, g_case, &plugin);
  if (st == BP_OK && plugin == NULL) abort();
  if (st != BP_OK) {
    const char* msg = bp_status_message();
    if (msg[0] == '\0') abort();
    for (const unsigned char* p = (const unsigned char*)msg; *p; ++p)
      if (*p < 0x20 || *p == 0x7f) abort();
  }
  bp_context_release(ctx);
  return 0;
}
