/* Prints the bp-conform arguments of the ops the fake driver can run for
 * the CUDA plugin: the runtime area, the cuBLASLt ops, and every op the
 * shared kernels lower except the row kernels' (rows.cl has no host C
 * build; see fake_kernels.c). */
#include <stdio.h>

#include "bp_gpu_ops.h"
#include "bp_kit.h"

int main(void) {
  printf("--op runtime --op mm --op bmm --op addmm --op linear");
  for (uint32_t op = 1; op < BP_OP_COUNT; ++op)
    if (bp_gpu_op_implemented(op) && !bp__gpu_rows_implemented(op) &&
        op != BP_OP_mm && op != BP_OP_bmm && op != BP_OP_addmm && op != BP_OP_linear)
      printf(" --op %s", bp_kit_op_name(op));
  printf("\n");
  return 0;
}
