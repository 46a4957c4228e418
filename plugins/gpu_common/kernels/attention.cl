/* backplane GPU kernels: scaled_dot_product_attention (bp_gpu_sdpa_args_t).
 *
 * One work-item per (batch, query row, chunk of BP_GPU_SDPA_COLS value
 * columns): it walks the keys once with an online softmax (flash-attention
 * style: a running maximum m and sum l; when m grows, l and the
 * accumulators are rescaled by exp(m_old - m_new)), so memory per item is
 * O(BP_GPU_SDPA_COLS) whatever L and S. Scores are scale * (q_i . k_j)
 * plus an additive mask; a bool mask or the causal triangle (j > i) drops
 * a key, as does a -inf score: its value row is never read. A NaN or +inf
 * score makes the row NaN; a row without keys gives 0 (docs/semantics.md).
 * Batch dims broadcast through stride 0; with GQA the key and value heads
 * coordinate is the query head's divided by gqa_group.
 *
 * Variants (kernels.def): CT_F32 (f32, f16, bf16 operands computed in f32,
 * rounded once on store) and CT_F64. Entry points: bp_sdpa_f32,
 * bp_sdpa_f64 (query, key, value, mask, out, args).
 */
#if defined(CT_F64)
#define CT double
#define SDPA_NAME bp_sdpa_f64
#else
#define CT float
#define SDPA_NAME bp_sdpa_f32
#endif
#define NC BP_GPU_SDPA_COLS

BP_INLINE CT at_load(BP_GLOBAL bp_u8* base, bp_i64 off, bp_i64 i, bp_u32 dt) {
  if (dt == DT_F32) return (CT)BP_ELEM(float, base, off, i);
  return (CT)bp_load_f(base, off, i, dt);
}

BP_KERNEL void SDPA_NAME(BP_GLOBAL bp_u8* q, BP_GLOBAL bp_u8* k, BP_GLOBAL bp_u8* v, BP_GLOBAL bp_u8* mask,
                         BP_GLOBAL bp_u8* out, BP_GLOBAL const bp_gpu_sdpa_args_t* A) {
  const bp_i64 nch = (A->Ev + NC - 1) / NC, L = A->L;
  const bp_i64 total = A->nbatch * L * nch;
  for (bp_i64 g = BP_GLOBAL_ID(0); g < total; g += BP_GLOBAL_SIZE(0)) {
    const bp_i64 ch = g % nch, i = (g / nch) % L;
    bp_i64 off[5] = {0, 0, 0, 0, 0}, rem = g / (nch * L);
    for (int d = (int)A->batch_rank - 1; d >= 0; d--) {
      const bp_i64 c = rem % A->batch_sizes[d];
      rem /= A->batch_sizes[d];
      const int heads = d == (int)A->gqa_dim;
      off[0] += c * A->batch_strides[0][d];
      off[1] += (heads ? c / A->gqa_group[0] : c) * A->batch_strides[1][d];
      off[2] += (heads ? c / A->gqa_group[1] : c) * A->batch_strides[2][d];
      off[3] += c * A->batch_strides[3][d];
      off[4] += c * A->batch_strides[4][d];
    }
    const bp_i64 c0 = ch * NC;
    const int nc = (int)(A->Ev - c0 < NC ? A->Ev - c0 : NC);
    const bp_i64 qrow = off[0] + i * A->row_stride[0];
    const bp_i64 mrow = off[3] + i * A->row_stride[3];
    CT acc[NC];
    for (int t = 0; t < NC; t++) acc[t] = (CT)0;
    CT m = -(CT)INFINITY, l = (CT)0;
    int bad = 0;
    const bp_i64 S = A->causal && i + 1 < A->S ? i + 1 : A->S;
    for (bp_i64 j = 0; j < S && !bad; j++) {
      if (A->mask_kind == 1u &&
          bp_load_i(mask, A->byte_offset[3], mrow + j * A->col_stride[3], A->dtypes[3]) == 0)
        continue;
      const bp_i64 krow = off[1] + j * A->row_stride[1];
      CT s = (CT)0;
      for (bp_i64 e = 0; e < A->E; e++)
        s += at_load(q, A->byte_offset[0], qrow + e * A->col_stride[0], A->dtypes[0]) *
             at_load(k, A->byte_offset[1], krow + e * A->col_stride[1], A->dtypes[1]);
      s *= (CT)A->scale;
      if (A->mask_kind == 2u) s += at_load(mask, A->byte_offset[3], mrow + j * A->col_stride[3], A->dtypes[3]);
      if (isnan(s) || s == (CT)INFINITY) {
        bad = 1;
        break;
      }
      if (s == -(CT)INFINITY) continue;
      const CT mn = s > m ? s : m;
      const CT corr = exp(m - mn), p = exp(s - mn);
      l = l * corr + p;
      const bp_i64 vrow = off[2] + j * A->row_stride[2];
      for (int t = 0; t < nc; t++)
        acc[t] = acc[t] * corr + p * at_load(v, A->byte_offset[2], vrow + (c0 + t) * A->col_stride[2], A->dtypes[2]);
      m = mn;
    }
    const bp_i64 orow = off[4] + i * A->row_stride[4];
    for (int t = 0; t < nc; t++) {
      const CT r = bad ? (CT)NAN : (l > (CT)0 ? acc[t] / l : (CT)0);
      bp_store_f(out, A->byte_offset[4], orow + (c0 + t) * A->col_stride[4], A->dtypes[4], (BP_ACC_F)r);
    }
  }
}
