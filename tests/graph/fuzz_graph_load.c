/* libFuzzer target: the graph compiler's readers. Input that starts with
 * the executable magic goes to bp_graph_exec_load_bytes twice: as given,
 * and with its header's size and checksum made right (so mutations reach
 * the payload's reader, the device checks, the parser and the build);
 * anything else goes to bp_graph_parse and, when it parses, through print
 * and parse again (the round trip must hold). Any crash, leak or sanitizer
 * report is a finding. Built with clang-15 -fsanitize=fuzzer,address,undefined
 * (tests/graph/CMakeLists.txt); ctest runs it for a bounded time. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#define XXH_INLINE_ALL /* xxHash header only: nothing to link */
#include <xxhash.h>

#include "backplane/graph.h"

static bp_context_t* g_ctx;

/* The file's checksum (docs/graph.md): XXH3-64 of the payload. */
static uint64_t file_checksum(const uint8_t* p, size_t n) { return (uint64_t)XXH3_64bits(p, n); }

int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (g_ctx == NULL && bp_context_create(NULL, &g_ctx) != BP_OK) abort();
  if (size >= 8 && memcmp(data, "BPGRAPHX", 8) == 0) {
    bp_graph_exec_t* x = NULL;
    if (bp_graph_exec_load_bytes(g_ctx, data, size, &x) == BP_OK) bp_graph_exec_release(x);
    if (size >= 40) {
      uint8_t* m = malloc(size);
      if (m == NULL) return 0;
      memcpy(m, data, size);
      uint64_t payload = size - 40, sum = file_checksum(m + 40, payload);
      memcpy(m + 24, &payload, 8);
      memcpy(m + 32, &sum, 8);
      x = NULL;
      if (bp_graph_exec_load_bytes(g_ctx, m, size, &x) == BP_OK) bp_graph_exec_release(x);
      free(m);
    }
    return 0;
  }
  bp_graph_t* g = NULL;
  if (bp_graph_parse((const char*)data, size, &g) != BP_OK) return 0;
  char* a = NULL;
  size_t an = 0;
  if (bp_graph_print(g, &a, &an) == BP_OK) {
    bp_graph_t* g2 = NULL;
    if (bp_graph_parse(a, an, &g2) != BP_OK) abort(); /* printed text must parse */
    char* b = NULL;
    size_t bn = 0;
    if (bp_graph_print(g2, &b, &bn) != BP_OK || bn != an || memcmp(a, b, an) != 0) abort(); /* exact round trip */
    bp_graph_text_free(b);
    bp_graph_release(g2);
  }
  bp_graph_text_free(a);
  bp_graph_release(g);
  return 0;
}
