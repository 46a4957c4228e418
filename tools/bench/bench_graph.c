/* bp-bench suite "graph": compiled execution against eager ops. The
 * suite runs each part in turn; every part lives in its own file
 * (bench_graph_<part>.c) and records its own figures.
 * BP_BENCH_GRAPH_PARTS (comma-separated: regions, compiler) runs only
 * the parts it names; unset or empty runs both. */
#include <stdlib.h>
#include <string.h>

#include "bench.h"

static int part_selected(const char* name) {
  const char* list = getenv("BP_BENCH_GRAPH_PARTS");
  if (!list || !*list) return 1;
  size_t len = strlen(name);
  for (const char* p = list; *p;) {
    size_t n = strcspn(p, ",");
    if (n == len && strncmp(p, name, len) == 0) return 1;
    p += n + (p[n] == ',');
  }
  return 0;
}

void bpb_suite_graph(bpb_ctx_t* ctx) {
  if (part_selected("regions")) bpb_graph_regions(ctx); /* bench_graph_regions.c: compiled regions */
  if (part_selected("compiler")) bpb_graph_compiler(ctx); /* bench_graph_compiler.c: the graph compiler */
}
