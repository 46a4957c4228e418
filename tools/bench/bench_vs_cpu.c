/* bp-bench suite "vs_cpu". */
#include <stdio.h>

#include "bench.h"

void bpb_suite_vs_cpu(bpb_ctx_t* ctx) {
  (void)ctx;
  printf("suite vs_cpu: no figures yet\n");
}
