/* backplane GPU kernels: stable sorts by rank (sort, topk).
 *
 * One work-item per element (grid-stride loop over rows x cols): it counts
 * the elements of its row that sort before it, which is its position in
 * the sorted row, and writes its value and index there. The order is the
 * CPU plugin's stable merge sort: ascending or descending, NaN above +inf,
 * -0 and +0 equal, equal keys in index order. O(cols) work per element:
 * meant for the rows of model code (vocabulary-sized rows at most); the
 * host refuses longer rows. No barriers, no local memory, no scratch.
 * Values move as raw bits (values and input share the dtype); indices
 * are stored in their operand's dtype. moe_topk_softmax (A->moe) writes
 * instead each top-k element's softmax probability over its row in double
 * (the CPU plugin's exp(l - max) / sum), divided by the top k's sum when
 * renormalizing. Entry point: bp_sort (in, values, indices, args).
 */

/* "a sorts before b" ascending; NaN is the largest. */
BP_INLINE int sort_lt_f(BP_ACC_F a, BP_ACC_F b) { return !isnan(a) && (isnan(b) || a < b); }

/* The rank of element i of a floating row (elements at `s0` strides). */
BP_INLINE bp_i64 sort_rank_f(BP_GLOBAL bp_u8* in, BP_GLOBAL const bp_gpu_sort_args_t* A, bp_i64 off, bp_i64 i) {
  const bp_i64 s0 = A->col_stride[0];
  const BP_ACC_F x = bp_load_f(in, A->byte_offset[0], off + i * s0, A->dtypes[0]);
  bp_i64 rank = 0;
  for (bp_i64 j = 0; j < A->ncols; j++) {
    if (j == i) continue;
    const BP_ACC_F y = bp_load_f(in, A->byte_offset[0], off + j * s0, A->dtypes[0]);
    const int before = A->descending ? sort_lt_f(x, y) : sort_lt_f(y, x);
    const int after = A->descending ? sort_lt_f(y, x) : sort_lt_f(x, y);
    rank += before || (!after && j < i);
  }
  return rank;
}

/* moe_topk_softmax's weight of element i (rank < k) of its row. */
BP_INLINE BP_ACC_F moe_weight(BP_GLOBAL bp_u8* in, BP_GLOBAL const bp_gpu_sort_args_t* A, bp_i64 off, bp_i64 i) {
  const bp_i64 s0 = A->col_stride[0];
  BP_ACC_F m = -(BP_ACC_F)INFINITY, z = 0, sel = 0;
  for (bp_i64 j = 0; j < A->ncols; j++) {
    const BP_ACC_F y = bp_load_f(in, A->byte_offset[0], off + j * s0, A->dtypes[0]);
    m = y > m ? y : m;
  }
  for (bp_i64 j = 0; j < A->ncols; j++) z += exp(bp_load_f(in, A->byte_offset[0], off + j * s0, A->dtypes[0]) - m);
  const BP_ACC_F w = exp(bp_load_f(in, A->byte_offset[0], off + i * s0, A->dtypes[0]) - m) / z;
  if (A->moe < 2) return w;
  for (bp_i64 j = 0; j < A->ncols; j++)
    if (sort_rank_f(in, A, off, j) < A->k) sel += exp(bp_load_f(in, A->byte_offset[0], off + j * s0, A->dtypes[0]) - m) / z;
  return w / sel;
}

BP_KERNEL void bp_sort(BP_GLOBAL bp_u8* in, BP_GLOBAL bp_u8* values, BP_GLOBAL bp_u8* indices,
                       BP_GLOBAL const bp_gpu_sort_args_t* A) {
  const bp_u32 dt = A->dtypes[0];
  const int is_f = dt == DT_F32 || dt == DT_F16 || dt == DT_BF16 || dt == DT_F64;
  const bp_u32 es = dt_size(dt);
  const bp_i64 n = A->ncols;
  const bp_i64 total = A->nrows * n;
  for (bp_i64 g = BP_GLOBAL_ID(0); g < total; g += BP_GLOBAL_SIZE(0)) {
    const bp_i64 row = g / n, i = g % n;
    bp_i64 off[3] = {0, 0, 0};
    bp_i64 rem = row;
    for (int d = (int)A->row_rank - 1; d >= 0; d--) {
      const bp_i64 c = rem % A->row_sizes[d];
      rem /= A->row_sizes[d];
      for (int k = 0; k < 3; k++) off[k] += c * A->row_strides[k][d];
    }
    const bp_i64 s0 = A->col_stride[0];
    bp_i64 rank = 0;
    if (is_f) {
      rank = sort_rank_f(in, A, off[0], i);
    } else {
      const bp_i64 x = bp_load_i(in, A->byte_offset[0], off[0] + i * s0, dt);
      for (bp_i64 j = 0; j < n; j++) {
        if (j == i) continue;
        const bp_i64 y = bp_load_i(in, A->byte_offset[0], off[0] + j * s0, dt);
        const int before = A->descending ? y > x : y < x;
        rank += before || (y == x && j < i);
      }
    }
    if (rank >= A->k) continue;
    const bp_i64 xo = off[2] + rank * A->col_stride[2];
    if (A->moe) {
      bp_store_f(values, A->byte_offset[1], off[1] + rank * A->col_stride[1], A->dtypes[1], moe_weight(in, A, off[0], i));
      bp_store_i(indices, A->byte_offset[2], xo, A->dtypes[2], i);
      continue;
    }
    const bp_i64 so = off[0] + i * s0, vo = off[1] + rank * A->col_stride[1];
    BP_GLOBAL bp_u8* s = in + A->byte_offset[0];
    BP_GLOBAL bp_u8* v = values + A->byte_offset[1];
    switch (es) {
      case 1u: ((BP_GLOBAL bp_u8*)v)[vo] = ((BP_GLOBAL bp_u8*)s)[so]; break;
      case 2u: ((BP_GLOBAL bp_u16*)v)[vo] = ((BP_GLOBAL bp_u16*)s)[so]; break;
      case 4u: ((BP_GLOBAL bp_u32*)v)[vo] = ((BP_GLOBAL bp_u32*)s)[so]; break;
      default: ((BP_GLOBAL bp_u64*)v)[vo] = ((BP_GLOBAL bp_u64*)s)[so]; break;
    }
    bp_store_i(indices, A->byte_offset[2], xo, A->dtypes[2], i);
  }
}
