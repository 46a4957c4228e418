/* bp-bench suite "conv". */
#include <stdio.h>

#include "bench.h"

void bpb_suite_conv(bpb_ctx_t* ctx) {
  (void)ctx;
  printf("suite conv: no figures yet\n");
}
