/* backplane GPU kernels: gathers (gather, index_select, embedding).
 *
 * One work-item per output element (grid-stride loop): the element's
 * coordinates map through per-operand strides (bp_gpu_index_args_t); the
 * index operand's value times src_dim_stride is added to the source
 * offset. Negative indices count from the end; an index outside
 * [-size, size) writes 0 instead of reading out of bounds. Elements move
 * as raw bits (source and output share the dtype; esize from dtypes[0]).
 * Entry point: bp_index (src, index, out, args).
 */
BP_KERNEL void bp_index(BP_GLOBAL bp_u8* src, BP_GLOBAL bp_u8* index, BP_GLOBAL bp_u8* out,
                        BP_GLOBAL const bp_gpu_index_args_t* A) {
  const bp_u32 es = dt_size(A->dtypes[0]);
  for (bp_i64 o = BP_GLOBAL_ID(0); o < A->numel; o += BP_GLOBAL_SIZE(0)) {
    bp_i64 so = 0, io = 0, oo = 0, rem = o;
    for (int d = (int)A->rank - 1; d >= 0; d--) {
      bp_i64 c = rem % A->sizes[d];
      rem /= A->sizes[d];
      so += c * A->strides[0][d];
      io += c * A->strides[1][d];
      oo += c * A->strides[2][d];
    }
    bp_i64 v = bp_load_i(index, A->byte_offset[1], io, A->dtypes[1]);
    if (v < 0) v += A->src_dim_size;
    const int ok = v >= 0 && v < A->src_dim_size;
    so += v * A->src_dim_stride;
    BP_GLOBAL bp_u8* s = src + A->byte_offset[0];
    BP_GLOBAL bp_u8* d = out + A->byte_offset[2];
    switch (es) {
      case 1u: ((BP_GLOBAL bp_u8*)d)[oo] = ok ? ((BP_GLOBAL bp_u8*)s)[so] : 0; break;
      case 2u: ((BP_GLOBAL bp_u16*)d)[oo] = ok ? ((BP_GLOBAL bp_u16*)s)[so] : 0; break;
      case 4u: ((BP_GLOBAL bp_u32*)d)[oo] = ok ? ((BP_GLOBAL bp_u32*)s)[so] : 0; break;
      default: ((BP_GLOBAL bp_u64*)d)[oo] = ok ? ((BP_GLOBAL bp_u64*)s)[so] : 0; break;
    }
  }
}
