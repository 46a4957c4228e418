/* bp-bench suite "matmul". */
#include <stdio.h>

#include "bench.h"

void bpb_suite_matmul(bpb_ctx_t* ctx) {
  (void)ctx;
  printf("suite matmul: no figures yet\n");
}
