/* backplane GPU kernels: batched matrix multiply (mm, bmm, addmm, linear).
 *
 * out[b, i, j] = beta * bias[b, i, j] + alpha * sum_k a[b, i, k] * b[b, k, j]
 * over strided operands (bp_gpu_mm_args_t; bias broadcast through stride 0;
 * beta 0 ignores bias, NaN included). Tiled: a work-group of
 * BP_GPU_MM_TILE x BP_GPU_MM_TILE work-items computes one tile of the
 * output, staging tiles of a and b through local memory. NDRange:
 * (tiles of n * TILE, tiles of m * TILE, batch), local (TILE, TILE, 1).
 *
 * Variants (kernels.def): CT_F32 (f32, f16, bf16 operands, f32
 * accumulation) and CT_F64. Entry points: bp_matmul_f32, bp_matmul_f64
 * (a, b, out, bias, args).
 */
#define T BP_GPU_MM_TILE
#if defined(CT_F64)
#define CT double
#define MM_NAME bp_matmul_f64
#else
#define CT float
#define MM_NAME bp_matmul_f32
#endif

BP_INLINE CT mm_load(BP_GLOBAL bp_u8* base, bp_i64 off, bp_i64 i, bp_u32 dt) {
  if (dt == DT_F32) return (CT)BP_ELEM(float, base, off, i);
  return (CT)bp_load_f(base, off, i, dt);
}

BP_KERNEL void MM_NAME(BP_GLOBAL bp_u8* a, BP_GLOBAL bp_u8* b, BP_GLOBAL bp_u8* c,
                       BP_GLOBAL bp_u8* bias, BP_GLOBAL const bp_gpu_mm_args_t* A) {
  BP_LOCAL CT ta[T][T + 1];
  BP_LOCAL CT tb[T][T + 1];
  const bp_u32 lx = BP_LOCAL_ID(0), ly = BP_LOCAL_ID(1);
  const bp_i64 col = BP_GROUP_ID(0) * T + lx, row = BP_GROUP_ID(1) * T + ly;
  const bp_i64 batch = BP_GROUP_ID(2);
  const bp_i64 M = A->m, N = A->n, K = A->k;
  const bp_i64 abase = batch * A->stride_batch[0], bbase = batch * A->stride_batch[1];
  CT acc = (CT)0;
  for (bp_i64 k0 = 0; k0 < K; k0 += T) {
    bp_i64 ka = k0 + lx, kb = k0 + ly;
    ta[ly][lx] = (row < M && ka < K)
                     ? mm_load(a, A->byte_offset[0], abase + row * A->stride_row[0] + ka * A->stride_col[0], A->dtypes[0])
                     : (CT)0;
    tb[ly][lx] = (kb < K && col < N)
                     ? mm_load(b, A->byte_offset[1], bbase + kb * A->stride_row[1] + col * A->stride_col[1], A->dtypes[1])
                     : (CT)0;
    BP_BARRIER();
    for (int kk = 0; kk < T; kk++) acc += ta[ly][kk] * tb[kk][lx];
    BP_BARRIER();
  }
  if (row < M && col < N) {
    CT v = (CT)A->alpha * acc;
    if (A->has_bias && A->beta != 0.0) {
      bp_i64 boff = batch * A->stride_batch[3] + row * A->stride_row[3] + col * A->stride_col[3];
      v += (CT)A->beta * mm_load(bias, A->byte_offset[3], boff, A->dtypes[3]);
    }
    bp_i64 coff = batch * A->stride_batch[2] + row * A->stride_row[2] + col * A->stride_col[2];
    if (A->dtypes[2] == DT_F32) BP_ELEM(float, c, A->byte_offset[2], coff) = (float)v;
    else bp_store_f(c, A->byte_offset[2], coff, A->dtypes[2], (BP_ACC_F)v);
  }
}
