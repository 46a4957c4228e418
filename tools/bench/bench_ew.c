/* bp-bench suite "ew". */
#include <stdio.h>

#include "bench.h"

void bpb_suite_ew(bpb_ctx_t* ctx) {
  (void)ctx;
  printf("suite ew: no figures yet\n");
}
