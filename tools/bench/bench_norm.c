/* bp-bench suite "norm". */
#include <stdio.h>

#include "bench.h"

void bpb_suite_norm(bpb_ctx_t* ctx) {
  (void)ctx;
  printf("suite norm: no figures yet\n");
}
