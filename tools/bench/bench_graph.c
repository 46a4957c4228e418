/* bp-bench suite "graph": compiled execution against eager ops. The
 * suite runs each part in turn; every part lives in its own file
 * (bench_graph_<part>.c) and records its own figures. */
#include "bench.h"

void bpb_suite_graph(bpb_ctx_t* ctx) {
  bpb_graph_regions(ctx);  /* bench_graph_regions.c: compiled regions */
  bpb_graph_compiler(ctx); /* bench_graph_compiler.c: the graph compiler */
}
