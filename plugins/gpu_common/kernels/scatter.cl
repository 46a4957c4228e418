/* backplane GPU kernels: scatter with a reduction (scatter, scatter_add,
 * scatter_reduce), one work-item per line (bp_gpu_scatter_args_t).
 *
 * For each distinct target of its line (first occurrence in index order)
 * the work-item combines, in index order, self's value (include_self) and
 * every src element (or the value) aimed at it, then stores the target
 * once: floating dtypes accumulate in double (BP_ACC_F), integers in int64
 * with two's complement wrap, mean divides by the count (integers: floor
 * division of the wrapped sum), amax/amin let NaN through, reduce none
 * keeps the last element. Indices outside [0, target_size) are skipped.
 * O(along^2) index reads per line: the lines of model code are short.
 * kv_cache_append is a scatter too (reduce none over the cache's slots).
 * Entry point: bp_scatter (index, src, out, args).
 */

BP_INLINE bp_i64 sc_wrap(bp_i64 v, bp_u32 dt) {
  switch (dt) {
    case DT_I8: return (bp_i8)v;
    case DT_U8: return (bp_u8)v;
    case DT_I16: return (bp_i16)v;
    case DT_I32: return (bp_i32)v;
    case DT_BOOL: return v != 0;
  }
  return v;
}

BP_INLINE bp_i64 sc_index(BP_GLOBAL bp_u8* index, BP_GLOBAL const bp_gpu_scatter_args_t* A, bp_i64 off,
                          bp_i64 k) {
  return bp_load_i(index, A->byte_offset[0], off + k * A->strides[0][A->dim], A->dtypes[0]);
}

BP_KERNEL void bp_scatter(BP_GLOBAL bp_u8* index, BP_GLOBAL bp_u8* src, BP_GLOBAL bp_u8* out,
                          BP_GLOBAL const bp_gpu_scatter_args_t* A) {
  const bp_u32 odt = A->dtypes[2], sdt = A->dtypes[1], dim = A->dim, r = A->reduce;
  const int is_f = odt == DT_F32 || odt == DT_F16 || odt == DT_BF16 || odt == DT_F64;
  for (bp_i64 line = BP_GLOBAL_ID(0); line < A->lines; line += BP_GLOBAL_SIZE(0)) {
    bp_i64 ioff = 0, soff = 0, ooff = 0, rem = line;
    for (int d = (int)A->rank - 1; d >= 0; d--) {
      if ((bp_u32)d == dim) continue;
      const bp_i64 c = rem % A->sizes[d];
      rem /= A->sizes[d];
      ioff += c * A->strides[0][d];
      soff += c * A->strides[1][d];
      ooff += c * A->strides[2][d];
    }
    for (bp_i64 k = 0; k < A->along; k++) {
      const bp_i64 t = sc_index(index, A, ioff, k);
      if (t < 0 || t >= A->target_size) continue;
      int seen = 0;
      for (bp_i64 j = 0; j < k && !seen; j++) seen = sc_index(index, A, ioff, j) == t;
      if (seen) continue; /* combined with its first occurrence */
      const bp_i64 to = ooff + t * A->strides[2][dim];
      bp_i64 cnt = A->include_self ? 1 : 0;
      if (is_f) {
        BP_ACC_F x = A->include_self ? bp_load_f(out, A->byte_offset[2], to, odt)
                     : r == BP_GPU_SC_PROD ? (BP_ACC_F)1
                     : r == BP_GPU_SC_AMAX ? -(BP_ACC_F)INFINITY
                     : r == BP_GPU_SC_AMIN ? (BP_ACC_F)INFINITY : (BP_ACC_F)0;
        for (bp_i64 j = k; j < A->along; j++) {
          if (sc_index(index, A, ioff, j) != t) continue;
          const BP_ACC_F v = sdt ? bp_load_f(src, A->byte_offset[1], soff + j * A->strides[1][dim], sdt)
                                 : (BP_ACC_F)A->value_f;
          switch (r) {
            case BP_GPU_SC_SUM: case BP_GPU_SC_MEAN: x += v; break;
            case BP_GPU_SC_PROD: x *= v; break;
            case BP_GPU_SC_AMAX: if (isnan(v) || v > x) x = v; break;
            case BP_GPU_SC_AMIN: if (isnan(v) || v < x) x = v; break;
            default: x = v; break;
          }
          cnt++;
        }
        if (r == BP_GPU_SC_MEAN) x /= (BP_ACC_F)cnt;
        bp_store_f(out, A->byte_offset[2], to, odt, x);
      } else {
        bp_i64 x = A->include_self ? bp_load_i(out, A->byte_offset[2], to, odt)
                   : r == BP_GPU_SC_PROD ? 1
                   : r == BP_GPU_SC_AMAX ? (bp_i64)0x8000000000000000ul
                   : r == BP_GPU_SC_AMIN ? (bp_i64)0x7ffffffffffffffful : 0;
        for (bp_i64 j = k; j < A->along; j++) {
          if (sc_index(index, A, ioff, j) != t) continue;
          const bp_i64 v = sdt ? bp_load_i(src, A->byte_offset[1], soff + j * A->strides[1][dim], sdt)
                               : A->value_i;
          switch (r) {
            case BP_GPU_SC_SUM: case BP_GPU_SC_MEAN: x = (bp_i64)((bp_u64)x + (bp_u64)v); break;
            case BP_GPU_SC_PROD: x = (bp_i64)((bp_u64)x * (bp_u64)v); break;
            case BP_GPU_SC_AMAX: if (v > x) x = v; break;
            case BP_GPU_SC_AMIN: if (v < x) x = v; break;
            default: x = v; break;
          }
          cnt++;
        }
        if (r == BP_GPU_SC_MEAN) {
          x = sc_wrap(x, odt);
          bp_i64 q = x / cnt;
          if (x % cnt != 0 && x < 0) q--; /* floor division */
          x = q;
        }
        bp_store_i(out, A->byte_offset[2], to, odt, x);
      }
    }
  }
}
