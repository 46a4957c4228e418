/* bp-bench suite "reduce". */
#include <stdio.h>

#include "bench.h"

void bpb_suite_reduce(bpb_ctx_t* ctx) {
  (void)ctx;
  printf("suite reduce: no figures yet\n");
}
