/* backplane core: inference rule of the gated activations (family GLU:
 * swiglu, geglu). The last dim of `self` holds [gate | up], 2H elements;
 * the output has H there (vLLM's silu_and_mul / gelu_and_mul layout).
 */
#include <stdio.h>
#include <string.h>

#include "ops/ops_internal.h"

bp_status_t bp__infer_glu(bp__infer_t* x) {
  const bp_tensor_desc_t* in = &x->in[0];
  char s[192];
  if (!bp__dtype_is_float(in->dtype)) {
    return bp__infer_fail(x, "input 'self' has dtype %s; a floating dtype is required",
                          bp_dtype_name(in->dtype));
  }
  if (in->rank == 0) {
    return bp__infer_fail(x, "input 'self' is 0-d; its last dim must hold the gate and up halves");
  }
  int64_t last = in->sizes[in->rank - 1];
  if (last % 2 != 0) {
    return bp__infer_fail(x,
                          "input 'self' has shape %s; its last dim (%lld) must be even: the gate "
                          "half then the up half",
                          bp__shape_str(in->rank, in->sizes, s, sizeof(s)), (long long)last);
  }
  int64_t sizes[BP_MAX_RANK];
  memcpy(sizes, in->sizes, sizeof(int64_t) * in->rank);
  sizes[in->rank - 1] = last / 2;
  x->compute_dtype = in->dtype;
  return bp__infer_set_out(x, 0, in->dtype, in->rank, sizes);
}
