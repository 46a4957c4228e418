/* backplane GPU kernels: pooling (avg_pool, max_pool_with_indices,
 * adaptive_avg_pool, their 2-d backward ops, 2-d upsampling), one
 * work-item per output element
 * (bp_gpu_pool_args_t).
 *
 * Windows, divisors and the scan order are the CPU plugin's (PyTorch's
 * cpu_avg_pool / cpu_max_pool / cpu_adaptive_avg_pool): avg sums the
 * clipped window in the compute type and divides by the window counting
 * padding (count_include_pad), the clipped window, or divisor_override;
 * max scans d, h, w in order and anything greater, and every NaN,
 * replaces; adaptive windows run floor(o * in / out) to
 * ceil((o + 1) * in / out). Upsampling follows the CPU plugin's
 * nearest_index / linear_index step by step in the compute type (no
 * contraction into fused multiply-adds, so neighbours match bit for bit).
 * Variants (kernels.def): CT_F32 (f32, f16, bf16 in f32), CT_F64, CT_I64
 * (integers). Entry points: bp_pool_f32, bp_pool_f64, bp_pool_i64
 * (in, out, indices, args).
 */
#ifdef BP_GPU_DEVICE
#pragma OPENCL FP_CONTRACT OFF
#endif
#if defined(CT_F64)
#define CT double
#define POOL_NAME bp_pool_f64
#define LOWEST (-(CT)INFINITY)
#elif defined(CT_I64)
#define CT bp_i64
#define POOL_NAME bp_pool_i64
#define LOWEST ((bp_i64)0x8000000000000000ul)
#else
#define CT float
#define POOL_NAME bp_pool_f32
#define LOWEST (-(CT)INFINITY)
#endif

#ifdef CT_I64
#define LOADC(base, off, i, dt) bp_load_i((base), (off), (i), (dt))
#define STOREC(base, off, i, dt, v) bp_store_i((base), (off), (i), (dt), (v))
#define CT_ISNAN(v) 0
/* x / d where d may be -1 (INT64_MIN / -1 traps; the plugin wraps). */
#define CT_DIV(x, d) ((d) == -1 ? (CT)(0 - (bp_u64)(x)) : (x) / (CT)(d))
#else
#define LOADC(base, off, i, dt) ((CT)bp_load_f((base), (off), (i), (dt)))
#define STOREC(base, off, i, dt, v) bp_store_f((base), (off), (i), (dt), (BP_ACC_F)(v))
#define CT_ISNAN(v) isnan(v)
#define CT_DIV(x, d) ((x) / (CT)(d))
#endif

/* The input window [lo, hi) of output position o per dim, and the
 * window's size counting padding (pd): adaptive windows run
 * floor(o * in / out) to ceil((o + 1) * in / out), avg windows are
 * clipped to the input. */
BP_INLINE void avg_window(BP_GLOBAL const bp_gpu_pool_args_t* A, int adaptive, const bp_i64* o, bp_i64* lo,
                          bp_i64* hi, bp_i64* pd) {
  for (int j = 0; j < 3; j++) {
    if (adaptive) {
      lo[j] = o[j] * A->in[j] / A->out[j];
      hi[j] = ((o[j] + 1) * A->in[j] + A->out[j] - 1) / A->out[j];
      pd[j] = hi[j] - lo[j];
      continue;
    }
    const bp_i64 s = o[j] * A->st[j] - A->pad[j];
    bp_i64 e = s + A->k[j];
    if (e > A->in[j] + A->pad[j]) e = A->in[j] + A->pad[j];
    pd[j] = e - s;
    lo[j] = s < 0 ? 0 : s;
    hi[j] = e > A->in[j] ? A->in[j] : e;
  }
}

/* The divisor of an avg window: divisor_override, the padded window
 * (count_include_pad; adaptive: the window), or the clipped window. */
BP_INLINE bp_i64 avg_divisor(BP_GLOBAL const bp_gpu_pool_args_t* A, int adaptive, const bp_i64* lo,
                             const bp_i64* hi, const bp_i64* pd) {
  if (!adaptive && A->divisor) return A->divisor;
  if (adaptive || A->count_include_pad) return pd[0] * pd[1] * pd[2];
  return (hi[0] - lo[0]) * (hi[1] - lo[1]) * (hi[2] - lo[2]);
}

/* The backward ops, one work-item per grad_input element (op0 grad_output,
 * op1 grad_input, op2 indices): it sums, in output order, what each output
 * position gave it (the CPU plugin adds the same terms in the same order). */
BP_INLINE void pool_backward(BP_GLOBAL bp_u8* go, BP_GLOBAL bp_u8* gi, BP_GLOBAL bp_u8* indices,
                             BP_GLOBAL const bp_gpu_pool_args_t* A, const bp_i64* base, const bp_i64* i) {
  const bp_i64 flat = (i[0] * A->in[1] + i[1]) * A->in[2] + i[2];
  CT sum = 0;
  for (bp_i64 od = 0; od < A->out[0]; od++)
    for (bp_i64 oh = 0; oh < A->out[1]; oh++)
      for (bp_i64 ow = 0; ow < A->out[2]; ow++) {
        const bp_i64 o[3] = {od, oh, ow};
        const bp_i64 goo = base[0] + od * A->sp_strides[0][0] + oh * A->sp_strides[0][1] + ow * A->sp_strides[0][2];
        if (A->op == OP_max_pool2d_with_indices_backward) {
          const bp_i64 xo = base[2] + od * A->sp_strides[2][0] + oh * A->sp_strides[2][1] + ow * A->sp_strides[2][2];
          if (BP_ELEM(bp_i64, indices, A->byte_offset[2], xo) == flat)
            sum += LOADC(go, A->byte_offset[0], goo, A->dtypes[0]);
          continue;
        }
        const int adaptive = A->op == OP_adaptive_avg_pool2d_backward;
        bp_i64 lo[3], hi[3], pd[3];
        avg_window(A, adaptive, o, lo, hi, pd);
        int inside = 1;
        for (int j = 0; j < 3; j++) inside = inside && lo[j] <= i[j] && i[j] < hi[j];
        if (!inside) continue;
        const bp_i64 div = avg_divisor(A, adaptive, lo, hi, pd);
        sum += CT_DIV(LOADC(go, A->byte_offset[0], goo, A->dtypes[0]), div);
      }
  const bp_i64 gio = base[1] + i[0] * A->sp_strides[1][0] + i[1] * A->sp_strides[1][1] + i[2] * A->sp_strides[1][2];
  STOREC(gi, A->byte_offset[1], gio, A->dtypes[1], sum);
}

BP_KERNEL void POOL_NAME(BP_GLOBAL bp_u8* in, BP_GLOBAL bp_u8* out, BP_GLOBAL bp_u8* indices,
                         BP_GLOBAL const bp_gpu_pool_args_t* A) {
  const int backward = A->op == OP_avg_pool2d_backward || A->op == OP_max_pool2d_with_indices_backward ||
                       A->op == OP_adaptive_avg_pool2d_backward;
  /* the iterated plane: the output's, or grad_input's (the input plane) */
  const bp_i64 oplane = backward ? A->in[0] * A->in[1] * A->in[2] : A->out[0] * A->out[1] * A->out[2];
  for (bp_i64 g = BP_GLOBAL_ID(0); g < A->total; g += BP_GLOBAL_SIZE(0)) {
    const bp_i64 p = g / oplane, q = g % oplane;
    bp_i64 base[3] = {0, 0, 0}, rem = p;
    for (int d = (int)A->plane_rank - 1; d >= 0; d--) {
      const bp_i64 c = rem % A->plane_sizes[d];
      rem /= A->plane_sizes[d];
      for (int k = 0; k < 3; k++) base[k] += c * A->plane_strides[k][d];
    }
    if (backward) {
      const bp_i64 i[3] = {q / (A->in[1] * A->in[2]), (q / A->in[2]) % A->in[1], q % A->in[2]};
      pool_backward(in, out, indices, A, base, i);
      continue;
    }
    const bp_i64 o[3] = {q / (A->out[1] * A->out[2]), (q / A->out[2]) % A->out[1], q % A->out[2]};
    const bp_i64 oo = base[1] + o[0] * A->sp_strides[1][0] + o[1] * A->sp_strides[1][1] + o[2] * A->sp_strides[1][2];
    bp_i64 lo[3], hi[3], pd[3];
    if (A->op == OP_upsample_nearest2d || A->op == OP_upsample_bilinear2d) {
#ifndef CT_I64
      /* source rows / cols lo, hi and the weight of hi (dims 1 and 2) */
      CT lam[3];
      for (int j = 1; j < 3; j++) {
        const CT sc = (CT)A->scale[j];
        const bp_i64 n = A->in[j];
        if (A->op == OP_upsample_nearest2d) {
          const bp_i64 f = (bp_i64)floor((float)(sc * (CT)o[j]));
          lo[j] = hi[j] = f < n - 1 ? f : n - 1;
          lam[j] = 0;
        } else if (A->out[j] == n) {
          lo[j] = hi[j] = o[j];
          lam[j] = 0;
        } else {
          CT src = A->align_corners ? sc * (CT)o[j] : sc * ((CT)o[j] + (CT)0.5) - (CT)0.5;
          if (!A->align_corners && src < 0) src = 0;
          const bp_i64 f = (bp_i64)floor((float)src);
          lo[j] = f < n - 1 ? f : n - 1;
          CT l = src - (CT)lo[j];
          lam[j] = l < 0 ? (CT)0 : l > 1 ? (CT)1 : l;
          hi[j] = lo[j] + (lo[j] < n - 1 ? 1 : 0);
        }
      }
      const bp_i64 s1 = A->sp_strides[0][1], s2 = A->sp_strides[0][2];
      const bp_i64 r0 = base[0] + lo[1] * s1, r1 = base[0] + hi[1] * s1;
      CT v;
      if (A->op == OP_upsample_nearest2d) {
        v = LOADC(in, A->byte_offset[0], r0 + lo[2] * s2, A->dtypes[0]);
      } else {
        const CT a = 1 - lam[1], b = lam[1], w0 = 1 - lam[2], w1 = lam[2];
        const CT x00 = LOADC(in, A->byte_offset[0], r0 + lo[2] * s2, A->dtypes[0]);
        const CT x01 = LOADC(in, A->byte_offset[0], r0 + hi[2] * s2, A->dtypes[0]);
        const CT x10 = LOADC(in, A->byte_offset[0], r1 + lo[2] * s2, A->dtypes[0]);
        const CT x11 = LOADC(in, A->byte_offset[0], r1 + hi[2] * s2, A->dtypes[0]);
        v = a * (w0 * x00 + w1 * x01) + b * (w0 * x10 + w1 * x11);
      }
      STOREC(out, A->byte_offset[1], oo, A->dtypes[1], v);
#endif
      continue;
    }
    if (A->op == OP_max_pool_with_indices) {
      for (int j = 0; j < 3; j++) {
        bp_i64 s = o[j] * A->st[j] - A->pad[j];
        const bp_i64 e = s + (A->k[j] - 1) * A->dil[j] + 1;
        while (s < 0) s += A->dil[j];
        lo[j] = s;
        hi[j] = e > A->in[j] ? A->in[j] : e;
      }
      bp_i64 best = (lo[0] * A->in[1] + lo[1]) * A->in[2] + lo[2];
      CT m = LOWEST;
      for (bp_i64 id = lo[0]; id < hi[0]; id += A->dil[0])
        for (bp_i64 ih = lo[1]; ih < hi[1]; ih += A->dil[1])
          for (bp_i64 iw = lo[2]; iw < hi[2]; iw += A->dil[2]) {
            const bp_i64 io = base[0] + id * A->sp_strides[0][0] + ih * A->sp_strides[0][1] + iw * A->sp_strides[0][2];
            const CT v = LOADC(in, A->byte_offset[0], io, A->dtypes[0]);
            if (v > m || CT_ISNAN(v)) {
              m = v;
              best = (id * A->in[1] + ih) * A->in[2] + iw;
            }
          }
      STOREC(out, A->byte_offset[1], oo, A->dtypes[1], m);
      const bp_i64 xo = base[2] + o[0] * A->sp_strides[2][0] + o[1] * A->sp_strides[2][1] + o[2] * A->sp_strides[2][2];
      BP_ELEM(bp_i64, indices, A->byte_offset[2], xo) = best;
      continue;
    }
    const int adaptive = A->op == OP_adaptive_avg_pool;
    avg_window(A, adaptive, o, lo, hi, pd);
    if (lo[0] >= hi[0] || lo[1] >= hi[1] || lo[2] >= hi[2]) {
      STOREC(out, A->byte_offset[1], oo, A->dtypes[1], (CT)0);
      continue;
    }
    const bp_i64 div = avg_divisor(A, adaptive, lo, hi, pd);
    CT sum = 0;
    for (bp_i64 id = lo[0]; id < hi[0]; id++)
      for (bp_i64 ih = lo[1]; ih < hi[1]; ih++)
        for (bp_i64 iw = lo[2]; iw < hi[2]; iw++) {
          const bp_i64 io = base[0] + id * A->sp_strides[0][0] + ih * A->sp_strides[0][1] + iw * A->sp_strides[0][2];
          sum += LOADC(in, A->byte_offset[0], io, A->dtypes[0]);
        }
    STOREC(out, A->byte_offset[1], oo, A->dtypes[1], CT_DIV(sum, div));
  }
}
