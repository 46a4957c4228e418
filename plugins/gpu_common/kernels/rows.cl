/* backplane GPU kernels: row kernels (reductions, softmax, norms).
 *
 * The index space is rows x cols (bp_gpu_row_args_t): one work-group of
 * BP_GPU_ROW_WG work-items per row; each work-item walks the row's cols
 * with a stride of the group size, then the group combines the partial
 * results through local memory. Passes over a row (max, then sum of exp,
 * then the writes) reuse the same partition of cols, so a work-item reads
 * back only what it wrote itself. Barriers are few and never inside loops:
 * drivers that compile work-groups into loops over work-items (PoCL) take
 * minutes over barriers in loops.
 *
 * Variants (kernels.def), one op family each to keep programs small:
 * ROWS_REDUCE with CT_F (floating compute: accumulation in double where
 * the device has it) or CT_I (int64): sum, mean, prod, amax, amin, any,
 * all, argmax, argmin, max_dim, min_dim (and var with CT_F);
 * ROWS_SOFTMAX: softmax, log_softmax, logsumexp; ROWS_NORM: layer_norm,
 * rms_norm and their residual-add forms.
 * Entry points: bp_rows_reduce_f, bp_rows_reduce_i, bp_rows_softmax,
 * bp_rows_norm (op0 .. op5, args).
 */
#define WG BP_GPU_ROW_WG
#if defined(ROWS_SOFTMAX)
#define CT_F 1
#define ROWS_NAME bp_rows_softmax
#elif defined(ROWS_NORM)
#define CT_F 1
#define ROWS_NAME bp_rows_norm
#elif defined(CT_F)
#define ROWS_NAME bp_rows_reduce_f
#else
#define ROWS_NAME bp_rows_reduce_i
#endif
#ifdef CT_F
#define IS_FLOAT 1
#define ACC BP_ACC_F
#define LOADV bp_load_f
#define STOREV bp_store_f
#define ACC_LOWEST (-(ACC)INFINITY)
#define ACC_HIGHEST ((ACC)INFINITY)
#define IS_NAN(v) isnan(v)
#else
#define ACC bp_i64
#define LOADV bp_load_i
#define STOREV bp_store_i
#define ACC_LOWEST ((bp_i64)0x8000000000000000ul)
#define ACC_HIGHEST ((bp_i64)0x7ffffffffffffffful)
#define IS_NAN(v) 0
#endif

enum { K_SUM, K_PROD, K_MAX, K_MIN, K_ANY, K_ALL };

BP_INLINE ACC combine(int kind, ACC a, ACC b) {
  switch (kind) {
    case K_SUM: return a + b;
    case K_PROD: return a * b;
    case K_MAX: return IS_NAN(a) ? a : (IS_NAN(b) ? b : (a > b ? a : b));
    case K_MIN: return IS_NAN(a) ? a : (IS_NAN(b) ? b : (a < b ? a : b));
    case K_ANY: return (a != (ACC)0 || b != (ACC)0) ? (ACC)1 : (ACC)0;
    case K_ALL: return (a != (ACC)0 && b != (ACC)0) ? (ACC)1 : (ACC)0;
  }
  return a;
}

/* The group's combination of every work-item's `v` (all work-items get
 * it): work-item 0 combines the WG partials in order. */
BP_INLINE ACC group_reduce(BP_LOCAL ACC* sh, ACC v, int kind) {
  const bp_u32 lid = BP_LOCAL_ID(0);
  sh[lid] = v;
  BP_BARRIER();
  if (lid == 0) {
    ACC r = sh[0];
    for (bp_u32 i = 1; i < WG; i++) r = combine(kind, r, sh[i]);
    sh[WG] = r;
  }
  BP_BARRIER();
  ACC r = sh[WG];
  BP_BARRIER();
  return r;
}

/* group_reduce(K_MAX) written out: LLVM 15's inliner (in PoCL) crashes on
 * a kernel that calls group_reduce with two different kinds. */
BP_INLINE ACC group_max(BP_LOCAL ACC* sh, ACC v) {
  const bp_u32 lid = BP_LOCAL_ID(0);
  sh[lid] = v;
  BP_BARRIER();
  if (lid == 0) {
    ACC r = sh[0];
    for (bp_u32 i = 1; i < WG; i++) r = IS_NAN(r) ? r : (IS_NAN(sh[i]) || sh[i] > r ? sh[i] : r);
    sh[WG] = r;
  }
  BP_BARRIER();
  ACC r = sh[WG];
  BP_BARRIER();
  return r;
}

/* argmax / argmin: the first index of the extreme value; a NaN beats any
 * number (its first occurrence). `better` is 1 when (v, i) wins over
 * (bv, bi); index -1 marks no element. */
BP_INLINE int better(int want_max, ACC v, bp_i64 i, ACC bv, bp_i64 bi) {
  if (i < 0) return 0; /* a work-item that saw no col */
  if (bi < 0) return 1;
  if (IS_NAN(bv)) return IS_NAN(v) && i < bi;
  if (IS_NAN(v)) return 1;
  if (v == bv) return i < bi;
  return want_max ? v > bv : v < bv;
}
BP_INLINE void group_argreduce(BP_LOCAL ACC* sh, BP_LOCAL bp_i64* shi, int want_max, ACC* v,
                               bp_i64* idx) {
  const bp_u32 lid = BP_LOCAL_ID(0);
  sh[lid] = *v;
  shi[lid] = *idx;
  BP_BARRIER();
  if (lid == 0) {
    for (bp_u32 i = 1; i < WG; i++)
      if (better(want_max, sh[i], shi[i], sh[0], shi[0])) {
        sh[0] = sh[i];
        shi[0] = shi[i];
      }
  }
  BP_BARRIER();
  *v = sh[0];
  *idx = shi[0];
  BP_BARRIER();
}

/* `v` converted to dtype dt and back (cumsum's conversion of its input). */
BP_INLINE ACC round_to(ACC v, bp_u32 dt) {
  switch (dt) {
#ifdef IS_FLOAT
    case DT_F32: return (ACC)(float)v;
    case DT_F16: return (ACC)bp_round_f16((float)v);
    case DT_BF16: return (ACC)bp_bf16_to_f32(bp_f32_to_bf16((float)v));
#else
    case DT_I8: return (ACC)(bp_i8)v;
    case DT_U8: return (ACC)(bp_u8)v;
    case DT_I16: return (ACC)(bp_i16)v;
    case DT_I32: return (ACC)(bp_i32)v;
    case DT_BOOL: return v != 0 ? 1 : 0;
#endif
  }
  return v;
}

/* Element offset of operand k at col c (row part in `roff`). */
BP_INLINE bp_i64 col_off(BP_GLOBAL const bp_gpu_row_args_t* A, bp_u32 k, bp_i64 roff, bp_i64 c) {
  bp_i64 off = roff;
  for (int d = (int)A->col_rank - 1; d >= 0; d--) {
    bp_i64 sz = A->col_sizes[d];
    off += (c % sz) * A->col_strides[k][d];
    c /= sz;
  }
  return off;
}

#define LD(k, eoff) LOADV(ops[k], A->byte_offset[k], (eoff), A->dtypes[k])
#define ST(k, eoff, v) STOREV(ops[k], A->byte_offset[k], (eoff), A->dtypes[k], (v))

BP_KERNEL void ROWS_NAME(BP_GLOBAL bp_u8* o0, BP_GLOBAL bp_u8* o1, BP_GLOBAL bp_u8* o2,
                         BP_GLOBAL bp_u8* o3, BP_GLOBAL bp_u8* o4, BP_GLOBAL bp_u8* o5,
                         BP_GLOBAL const bp_gpu_row_args_t* A) {
  BP_LOCAL ACC sh[WG + 1];
  BP_LOCAL bp_i64 shi[WG];
  BP_GLOBAL bp_u8* ops[BP_GPU_ROW_MAX_OPERANDS] = {o0, o1, o2, o3, o4, o5};
  const bp_u32 lid = BP_LOCAL_ID(0), op = A->op;
  const bp_i64 ncols = A->ncols;
  {
    const bp_i64 row = BP_GROUP_ID(0); /* one group per row: no loop around barriers */
    bp_i64 roff[BP_GPU_ROW_MAX_OPERANDS];
    for (bp_u32 k = 0; k < A->nops; k++) roff[k] = 0;
    bp_i64 rem = row;
    for (int d = (int)A->row_rank - 1; d >= 0; d--) {
      bp_i64 c = rem % A->row_sizes[d];
      rem /= A->row_sizes[d];
      for (bp_u32 k = 0; k < A->nops; k++) roff[k] += c * A->row_strides[k][d];
    }
    switch (op) {
#ifdef ROWS_REDUCE
      case OP_sum: case OP_mean: case OP_prod: case OP_amax: case OP_amin: case OP_any:
      case BP_GPU_ROW_ALL: {
        int kind = op == OP_prod ? K_PROD : op == OP_amax ? K_MAX : op == OP_amin ? K_MIN
                 : op == OP_any ? K_ANY : op == BP_GPU_ROW_ALL ? K_ALL : K_SUM;
        ACC acc = kind == K_PROD || kind == K_ALL ? (ACC)1 : kind == K_MAX ? ACC_LOWEST
                : kind == K_MIN ? ACC_HIGHEST : (ACC)0;
        for (bp_i64 c = lid; c < ncols; c += WG) {
          ACC x = LD(0, col_off(A, 0, roff[0], c));
          if (kind == K_ANY || kind == K_ALL) x = (x != (ACC)0 || IS_NAN(x)) ? (ACC)1 : (ACC)0;
          acc = combine(kind, acc, x);
        }
        acc = group_reduce(sh, acc, kind);
#ifdef IS_FLOAT
        if (op == OP_mean) acc = acc / (ACC)ncols;
#endif
        if (lid == 0) ST(1, roff[1], acc);
        break;
      }
      case OP_argmax: case OP_argmin: case OP_max_dim: case OP_min_dim: {
        int want_max = op == OP_argmax || op == OP_max_dim;
        ACC best = (ACC)0;
        bp_i64 bi = -1;
        for (bp_i64 c = lid; c < ncols; c += WG) {
          ACC x = LD(0, col_off(A, 0, roff[0], c));
          if (better(want_max, x, c, best, bi)) {
            best = x;
            bi = c;
          }
        }
        group_argreduce(sh, shi, want_max, &best, &bi);
        if (lid == 0) {
          if (op == OP_argmax || op == OP_argmin) {
            bp_store_i(ops[1], A->byte_offset[1], roff[1], A->dtypes[1], bi);
          } else {
            ST(1, roff[1], best);
            bp_store_i(ops[2], A->byte_offset[2], roff[2], A->dtypes[2], bi);
          }
        }
        break;
      }
      case OP_cumsum: {
        /* Sequential along the row by one work-item (no barrier); each
         * value is converted to the output dtype first (PyTorch's
         * self.to(dtype)), sums accumulate in the accumulator type and
         * wrap or round on store. */
        if (lid == 0) {
          ACC acc = (ACC)0;
          for (bp_i64 c = 0; c < ncols; c++) {
            acc += round_to(LD(0, col_off(A, 0, roff[0], c)), A->dtypes[1]);
            ST(1, col_off(A, 1, roff[1], c), acc);
          }
        }
        break;
      }
#ifdef IS_FLOAT
      case OP_var: {
        ACC s = 0;
        for (bp_i64 c = lid; c < ncols; c += WG) s += LD(0, col_off(A, 0, roff[0], c));
        ACC mean = group_reduce(sh, s, K_SUM) / (ACC)ncols;
        ACC q = 0;
        for (bp_i64 c = lid; c < ncols; c += WG) {
          ACC d = LD(0, col_off(A, 0, roff[0], c)) - mean;
          q += d * d;
        }
        q = group_reduce(sh, q, K_SUM);
        /* PyTorch divides by max(0, n - correction): inf (NaN for 0 / 0)
         * when the correction leaves no degree of freedom. */
        ACC dof = (ACC)ncols - (ACC)A->p0;
        ACC v = q / (dof > (ACC)0 ? dof : (ACC)0);
        if (A->p1 != 0.0) v = sqrt(v);
        if (lid == 0) ST(1, roff[1], v);
        break;
      }
#endif
#endif
#ifdef ROWS_SOFTMAX
      case OP_logsumexp: case OP_softmax: case OP_log_softmax: {
        ACC m = ACC_LOWEST;
        for (bp_i64 c = lid; c < ncols; c += WG) m = combine(K_MAX, m, LD(0, col_off(A, 0, roff[0], c)));
        m = group_max(sh, m);
        /* logsumexp of a row whose max is infinite shifts by 0 (-inf stays
         * -inf, +inf stays +inf); softmax shifts by the max whatever it is
         * (an infinite max makes NaN, as PyTorch's does). */
        ACC shift = op == OP_logsumexp && isinf(m) ? (ACC)0 : m;
        ACC s = 0;
        for (bp_i64 c = lid; c < ncols; c += WG) s += exp(LD(0, col_off(A, 0, roff[0], c)) - shift);
        s = group_reduce(sh, s, K_SUM);
        if (op == OP_logsumexp) {
          if (lid == 0) ST(1, roff[1], isinf(m) && m > (ACC)0 ? m : shift + log(s));
        } else {
          ACC ls = log(s);
          for (bp_i64 c = lid; c < ncols; c += WG) {
            ACC x = LD(0, col_off(A, 0, roff[0], c)) - shift;
            ST(1, col_off(A, 1, roff[1], c), op == OP_softmax ? exp(x) / s : x - ls);
          }
        }
        break;
      }
#endif
#ifdef ROWS_NORM
      case OP_layer_norm: case OP_add_layer_norm: case OP_rms_norm: case OP_add_rms_norm: {
        /* Operands: input[, residual], weight[, bias], out[, mean, rstd |
         * residual_out]. */
        const int add = op == OP_add_layer_norm || op == OP_add_rms_norm;
        const int rms = op == OP_rms_norm || op == OP_add_rms_norm;
        const bp_u32 kw = add ? 2u : 1u;
        const bp_u32 kb = rms ? 0u : kw + 1u; /* 0: none */
        const bp_u32 ko = rms ? kw + 1u : kw + 2u;
        /* The summed input is read back from residual_out (rounded to its
         * dtype, as the unfused ops would). */
        const bp_u32 kin = add ? ko + 1u : 0u;
        if (add) {
          for (bp_i64 c = lid; c < ncols; c += WG) {
            ACC h = LD(0, col_off(A, 0, roff[0], c)) + LD(1, col_off(A, 1, roff[1], c));
            ST(kin, col_off(A, kin, roff[kin], c), h);
          }
        }
        ACC mean = 0;
        if (!rms) {
          ACC s = 0;
          for (bp_i64 c = lid; c < ncols; c += WG) s += LD(kin, col_off(A, kin, roff[kin], c));
          mean = group_reduce(sh, s, K_SUM) / (ACC)ncols;
        }
        ACC q = 0;
        for (bp_i64 c = lid; c < ncols; c += WG) {
          ACC d = LD(kin, col_off(A, kin, roff[kin], c)) - mean;
          q += d * d;
        }
        q = group_reduce(sh, q, K_SUM);
        ACC rstd = (ACC)1 / sqrt(q / (ACC)ncols + (ACC)A->p0);
        for (bp_i64 c = lid; c < ncols; c += WG) {
          ACC y = (LD(kin, col_off(A, kin, roff[kin], c)) - mean) * rstd;
          if (A->dtypes[kw]) y *= LD(kw, col_off(A, kw, roff[kw], c));
          if (kb && A->dtypes[kb]) y += LD(kb, col_off(A, kb, roff[kb], c));
          ST(ko, col_off(A, ko, roff[ko], c), y);
        }
        if (op == OP_layer_norm && lid == 0) {
          if (A->dtypes[4]) ST(4, roff[4], mean);
          if (A->dtypes[5]) ST(5, roff[5], rstd);
        }
        break;
      }
#endif
    }
  }
}
