/* backplane GPU kernels: repetition_penalty, one work-item per logit
 * (bp_gpu_penalty_args_t). A logit whose id occurs c > 0 times among its
 * row's tokens becomes (l > 0 ? l / repetition : l * repetition)
 * - (frequency * c + presence), in double, rounded once (the CPU plugin's
 * formula); ids outside [0, V) (padding) count nowhere; other logits are
 * copied. O(L) token reads per logit. Entry point: bp_penalty (logits,
 * tokens, out, args).
 */
#ifdef BP_GPU_DEVICE
#pragma OPENCL FP_CONTRACT OFF /* the CPU's roundings: no fused multiply-add */
#endif
BP_KERNEL void bp_penalty(BP_GLOBAL bp_u8* logits, BP_GLOBAL bp_u8* tokens, BP_GLOBAL bp_u8* out,
                          BP_GLOBAL const bp_gpu_penalty_args_t* A) {
  const bp_i64 total = A->nrows * A->V;
  for (bp_i64 g = BP_GLOBAL_ID(0); g < total; g += BP_GLOBAL_SIZE(0)) {
    const bp_i64 row = g / A->V, v = g % A->V;
    bp_i64 off[3] = {0, 0, 0}, rem = row;
    for (int d = (int)A->row_rank - 1; d >= 0; d--) {
      const bp_i64 c = rem % A->row_sizes[d];
      rem /= A->row_sizes[d];
      for (int k = 0; k < 3; k++) off[k] += c * A->row_strides[k][d];
    }
    bp_i64 count = 0;
    for (bp_i64 k = 0; k < A->L; k++)
      count += bp_load_i(tokens, A->byte_offset[1], off[1] + k * A->col_stride[1], A->dtypes[1]) == v;
    BP_ACC_F x = bp_load_f(logits, A->byte_offset[0], off[0] + v * A->col_stride[0], A->dtypes[0]);
    if (count > 0) {
      x = x > 0 ? x / A->repetition : x * A->repetition;
      x -= A->frequency * (BP_ACC_F)count + A->presence;
    }
    bp_store_f(out, A->byte_offset[2], off[2] + v * A->col_stride[2], A->dtypes[2], x);
  }
}
