/* bp-bench suite "attention". */
#include <stdio.h>

#include "bench.h"

void bpb_suite_attention(bpb_ctx_t* ctx) {
  (void)ctx;
  printf("suite attention: no figures yet\n");
}
