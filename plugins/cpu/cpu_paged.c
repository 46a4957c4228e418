/* backplane CPU plugin: the paged KV cache family -- kv_cache_append and
 * paged_attention (docs/semantics.md, "Paged KV cache"; vLLM's
 * reshape_and_cache_flash and paged attention over the flash layout):
 *
 *   key_cache, value_cache [num_blocks, block_size, num_kv_heads, head_size]
 *   token t of sequence s lives in block block_tables[s, t / block_size],
 *   row t % block_size.
 *
 * paged_attention reads the cache in place, block by block (never a dense
 * gathered copy). One work item is (sequence, a run of adjacent kv heads --
 * all of them unless that leaves fewer than 4 items per thread): the G =
 * num_heads / num_kv_heads query heads of each kv head are scored together,
 * so each key and value row is read once per call, as one contiguous run per
 * token. Two passes: scores from the key rows, then a softmax per head,
 * then the weighted sum of the value rows, both passes over groups of W
 * tokens (16-lane AVX-512 or 8-lane AVX2 / portable vectors, chosen at run
 * time under BP_CPU_ISA; halves converted in registers by F16C /
 * vcvtph2ps): W accumulators per query row whose lane sums one tree of
 * pairings reduces (PA_SUMS8 / PA_SUMS16), and each output vector loaded
 * and stored once per group. A context's last partial group goes one token
 * at a time. f16 / bf16 / f32 compute in f32 (rounded once on store), f64
 * in f64. Items run in parallel on the pool.
 *
 * Values the core cannot see are checked here before anything is written:
 * a slot past the cache, a context length past the block table or negative,
 * a block id past num_blocks fail the call (OUT_OF_RANGE / INVALID_ARGUMENT).
 * Operands are dense (the support answer asks the core to pack others).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cpu_kernels.h"
#include "cpu_vmath.h"

/* ---- kv_cache_append ------------------------------------------------------------ */

static bp_status_t exec_kv_cache_append(const bp_op_call_t* call) {
  const bp_tensor_desc_t* const* in = call->inputs;
  const bp_tensor_desc_t* const* out = call->outputs;
  const bp_tensor_desc_t* slots = in[4];
  int64_t nb = in[0]->sizes[0], bs = in[0]->sizes[1];
  int64_t T = in[2]->sizes[0], cap = nb * bs;
  for (int64_t t = 0; t < T; t++) {
    int64_t slot = cpu_index_at(slots, t);
    if (slot >= cap) {
      return cpu_error(BP_OUT_OF_RANGE, "cpu: kv_cache_append: slot_mapping[%lld] = %lld is past "
                                        "the cache's %lld slots (%lld blocks of %lld)",
                       (long long)t, (long long)slot, (long long)cap, (long long)nb, (long long)bs);
    }
  }
  size_t row = (size_t)(in[0]->sizes[2] * in[0]->sizes[3]) * bp_dtype_size(in[0]->dtype);
  for (int c = 0; c < 2; c++) {
    unsigned char* dst = cpu_desc_ptr(out[c]);
    if (dst != cpu_desc_ptr(in[c])) cpu_memcpy(dst, cpu_desc_ptr(in[c]), (uint64_t)cap * row);
    const unsigned char* src = cpu_desc_ptr(in[2 + c]);
    for (int64_t t = 0; t < T; t++) { /* in token order: a repeated slot keeps the last */
      int64_t slot = cpu_index_at(slots, t);
      if (slot >= 0) memcpy(dst + (size_t)slot * row, src + (size_t)t * row, row);
    }
  }
  return BP_OK;
}

/* ---- paged_attention ------------------------------------------------------------ */

typedef struct pa_job {
  const bp_op_call_t* call;
  int64_t S, H, Hkv, G, D, NB, BS, MB, max_n;
  int64_t chunk;   /* kv heads per work item (adjacent in a cache row) */
  int64_t nchunks; /* ceil(Hkv / chunk) */
  int64_t window;
  double scale;
  const float* alibi; /* NULL: none */
  _Atomic int failed;
} pa_job_t;

/* First token a sequence of length len attends to. */
static int64_t pa_start(const pa_job_t* j, int64_t len) {
  return j->window > 0 && len > j->window ? len - j->window : 0;
}

typedef float pa_v8f __attribute__((vector_size(32)));
typedef uint16_t pa_v8u16 __attribute__((vector_size(16)));
typedef uint32_t pa_v8u32 __attribute__((vector_size(32)));

/* 8 cache elements as f32 lanes, and one element. */
#define PA_LOAD8_F32(p) ({ pa_v8f v_; memcpy(&v_, (p), 32); v_; })
#define PA_LOAD8_BF16(p)                                        \
  ({                                                            \
    pa_v8u16 h_;                                                \
    memcpy(&h_, (p), 16);                                       \
    (pa_v8f)(__builtin_convertvector(h_, pa_v8u32) << 16);      \
  })
#define PA_LOAD8_F16(p)                                                      \
  ({                                                                         \
    float f_[8];                                                             \
    cpu_load[CPU_KT_F32](f_, (const unsigned char*)(p), 1, 8, BP_DTYPE_F16); \
    pa_v8f v_;                                                               \
    memcpy(&v_, f_, 32);                                                     \
    v_;                                                                      \
  })
#define PA_LOAD1_F32(p) (*(const float*)(p))
#define PA_LOAD1_BF16(p) ({ uint32_t b_ = (uint32_t)(*(const uint16_t*)(p)) << 16; float f_; memcpy(&f_, &b_, 4); f_; })
#define PA_LOAD1_F16(p) ({ float f_; cpu_load[CPU_KT_F32](&f_, (const unsigned char*)(p), 1, 1, BP_DTYPE_F16); f_; })

/* The lane sums of W vectors of W lanes as one vector (lane t: the sum of
 * a[t]'s lanes), by a tree of pairings: pairing a and b adds their even
 * and odd lanes, so a's pair sums fill the low half and b's the high half;
 * log2(W) levels leave every vector's sum in its own lane, in order. */
#define PA_PAIR8(a, b)                                                  \
  (__builtin_shufflevector((a), (b), 0, 2, 4, 6, 8, 10, 12, 14) +      \
   __builtin_shufflevector((a), (b), 1, 3, 5, 7, 9, 11, 13, 15))
#define PA_SUMS8(a) \
  PA_PAIR8(PA_PAIR8(PA_PAIR8((a)[0], (a)[1]), PA_PAIR8((a)[2], (a)[3])), \
           PA_PAIR8(PA_PAIR8((a)[4], (a)[5]), PA_PAIR8((a)[6], (a)[7])))

/* rows[i]: where token t + i's row of the item's first kv head starts in
 * cache c (i < W); one block-table lookup per block. */
#define PA_TOKEN_ROWS(rows, c, t, W)                                               \
  do {                                                                             \
    int64_t b_ = (t) / j->BS, o_ = (t) % j->BS;                                    \
    int64_t blk_ = cpu_index_at(call->inputs[3], s * j->MB + b_);                  \
    for (int i_ = 0; i_ < (W); i_++) {                                             \
      if (o_ == j->BS) {                                                           \
        o_ = 0;                                                                    \
        blk_ = cpu_index_at(call->inputs[3], s * j->MB + ++b_);                    \
      }                                                                            \
      rows[i_] = (c) + ((blk_ * j->BS + o_++) * j->Hkv + g0) * D;                  \
    }                                                                              \
  } while (0)

/* One work item in f32 over cache elements ET, in vectors VT of W f32
 * lanes (LOADV: W cache elements as f32 lanes): sequence s, kv heads
 * [g0, g0 + ng) and their ng * G query heads. For every token the item
 * reads the ng kv heads' key (then value) rows, adjacent in the cache row,
 * once. q holds the scaled queries [ng * G, D], sc the scores [ng * G, n],
 * acc the outputs [ng * G, D]. A dot product sums its two accumulators,
 * then halves of lanes pairwise. */
#define PA_ITEM_F32(SFX, ET, VT, W, LOADV, LOAD1, ATTR, SUMS)                                         \
  ATTR static void pa_item_##SFX(const pa_job_t* j, int64_t s, int64_t g0, int64_t ng,            \
                                 int64_t len, float* q, float* sc, float* acc) {                  \
    const bp_op_call_t* call = j->call;                                                           \
    const int64_t D = j->D, G = j->G, start = pa_start(j, len), n = len - start, R = ng * G;      \
    const ET* qp = (const ET*)(const void*)cpu_desc_ptr(call->inputs[0]) + (s * j->H + g0 * G) * D; \
    const ET* kc = (const ET*)(const void*)cpu_desc_ptr(call->inputs[1]);                          \
    const ET* vc = (const ET*)(const void*)cpu_desc_ptr(call->inputs[2]);                          \
    for (int64_t i = 0; i < R * D; i++) q[i] = LOAD1(qp + i) * (float)j->scale;                   \
    memset(acc, 0, sizeof(float) * (size_t)(R * D));                                              \
    const int64_t DW = D & ~(int64_t)(W - 1);                                                     \
    int64_t tk = start;                                                                           \
    /* W tokens at a time: W accumulators per query row, their sums       \
     * reduced across registers (SUMS) instead of one horizontal sum per token. */                 \
    for (; tk + W <= len; tk += W) {                                                              \
      const ET* kr[W];                                                                            \
      PA_TOKEN_ROWS(kr, kc, tk, W);                                                               \
      for (int64_t r = 0; r < R; r++) {                                                           \
        const float* qi = q + r * D;                                                              \
        const int64_t off = (r / G) * D;                                                          \
        VT a[W];                                                                                  \
        _Pragma("GCC unroll 16") for (int tt = 0; tt < W; tt++) a[tt] = (VT){0};                  \
        for (int64_t d = 0; d < DW; d += W) {                                                     \
          VT qv;                                                                                  \
          memcpy(&qv, qi + d, sizeof qv);                                                         \
          _Pragma("GCC unroll 16") for (int tt = 0; tt < W; tt++) a[tt] += qv * LOADV(kr[tt] + off + d); \
        }                                                                                         \
        VT sv = SUMS(a);                                                                          \
        float* so = sc + r * n + (tk - start);                                                    \
        memcpy(so, &sv, sizeof sv);                                                               \
        for (int tt = 0; (DW < D || j->alibi) && tt < W; tt++) {                                  \
          for (int64_t d = DW; d < D; d++) so[tt] += qi[d] * LOAD1(kr[tt] + off + d);             \
          if (j->alibi) so[tt] += j->alibi[g0 * G + r] * (float)(tk + tt - (len - 1));            \
        }                                                                                         \
      }                                                                                           \
    }                                                                                             \
    for (int64_t t = tk; t < len; t++) {                                                          \
      int64_t blk = cpu_index_at(call->inputs[3], s * j->MB + t / j->BS);                         \
      const ET* krow = kc + ((blk * j->BS + t % j->BS) * j->Hkv + g0) * D;                        \
      for (int64_t r = 0; r < R; r++) {                                                           \
        const float* qi = q + r * D;                                                              \
        const ET* k = krow + (r / G) * D;                                                         \
        VT a0 = {0}, a1 = {0};                                                                    \
        int64_t d = 0;                                                                            \
        for (; d + 2 * W <= DW; d += 2 * W) {                                                     \
          VT q0, q1;                                                                              \
          memcpy(&q0, qi + d, sizeof q0);                                                         \
          memcpy(&q1, qi + d + W, sizeof q1);                                                     \
          a0 += q0 * LOADV(k + d);                                                                \
          a1 += q1 * LOADV(k + d + W);                                                            \
        }                                                                                         \
        for (; d < DW; d += W) {                                                                  \
          VT q0;                                                                                  \
          memcpy(&q0, qi + d, sizeof q0);                                                         \
          a0 += q0 * LOADV(k + d);                                                                \
        }                                                                                         \
        a0 += a1;                                                                                 \
        float lanes[W];                                                                           \
        memcpy(lanes, &a0, sizeof lanes);                                                         \
        for (int h = W / 2; h >= 1; h /= 2)                                                       \
          for (int l = 0; l < h; l++) lanes[l] += lanes[l + h];                                   \
        float v = lanes[0];                                                                       \
        for (; d < D; d++) v += qi[d] * LOAD1(k + d);                                             \
        if (j->alibi) v += j->alibi[g0 * G + r] * (float)(t - (len - 1));                         \
        sc[r * n + (t - start)] = v;                                                              \
      }                                                                                           \
    }                                                                                             \
    for (int64_t r = 0; r < R; r++) {                                                             \
      float* si = sc + r * n;                                                                     \
      float m = -INFINITY, sum = 0.0f;                                                            \
      for (int64_t t = 0; t < n; t++) m = si[t] > m ? si[t] : m;                                  \
      for (int64_t t = 0; t < n; t++) si[t] = cpu_vm_expf(si[t] - m); /* vectorizes */          \
      for (int64_t t = 0; t < n; t++) sum += si[t];                                               \
      float inv = sum > 0.0f ? 1.0f / sum : 0.0f;                                                 \
      for (int64_t t = 0; t < n; t++) si[t] *= inv;                                               \
    }                                                                                             \
    /* W tokens at a time: each output vector loaded and stored once per group. */                 \
    for (tk = start; tk + W <= len; tk += W) {                                                    \
      const ET* vr[W];                                                                            \
      PA_TOKEN_ROWS(vr, vc, tk, W);                                                               \
      for (int64_t r = 0; r < R; r++) {                                                           \
        const int64_t off = (r / G) * D;                                                          \
        const float* pr = sc + r * n + (tk - start);                                              \
        float* ai = acc + r * D;                                                                  \
        for (int64_t d = 0; d < DW; d += W) {                                                     \
          VT av;                                                                                  \
          memcpy(&av, ai + d, sizeof av);                                                         \
          _Pragma("GCC unroll 16") for (int tt = 0; tt < W; tt++) av += pr[tt] * LOADV(vr[tt] + off + d); \
          memcpy(ai + d, &av, sizeof av);                                                         \
        }                                                                                         \
        for (int64_t d = DW; d < D; d++)                                                          \
          for (int tt = 0; tt < W; tt++) ai[d] += pr[tt] * LOAD1(vr[tt] + off + d);               \
      }                                                                                           \
    }                                                                                             \
    for (int64_t t = tk; t < len; t++) {                                                          \
      int64_t blk = cpu_index_at(call->inputs[3], s * j->MB + t / j->BS);                         \
      const ET* vrow = vc + ((blk * j->BS + t % j->BS) * j->Hkv + g0) * D;                        \
      for (int64_t r = 0; r < R; r++) {                                                           \
        const ET* v = vrow + (r / G) * D;                                                         \
        float p = sc[r * n + (t - start)];                                                        \
        float* ai = acc + r * D;                                                                  \
        for (int64_t d = 0; d < DW; d += W) {                                                     \
          VT av;                                                                                  \
          memcpy(&av, ai + d, sizeof av);                                                         \
          av += p * LOADV(v + d);                                                                 \
          memcpy(ai + d, &av, sizeof av);                                                         \
        }                                                                                         \
        for (int64_t d = DW; d < D; d++) ai[d] += p * LOAD1(v + d);                               \
      }                                                                                           \
    }                                                                                             \
  }

#define PA_ITEMS(ISA, ATTR, LOAD8_F16)                                                     \
  PA_ITEM_F32(f32_##ISA, float, pa_v8f, 8, PA_LOAD8_F32, PA_LOAD1_F32, ATTR, PA_SUMS8)     \
  PA_ITEM_F32(bf16_##ISA, uint16_t, pa_v8f, 8, PA_LOAD8_BF16, PA_LOAD1_BF16, ATTR, PA_SUMS8) \
  PA_ITEM_F32(f16_##ISA, uint16_t, pa_v8f, 8, LOAD8_F16, PA_LOAD1_F16, ATTR, PA_SUMS8)
PA_ITEMS(base, , PA_LOAD8_F16)
#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define PA_HAVE_AVX2 1
/* 8 halves through F16C (vcvtph2ps). */
#define PA_LOAD8_F16C(p)                                           \
  ({                                                               \
    __m128i h_;                                                    \
    memcpy(&h_, (p), 16);                                          \
    (pa_v8f)_mm256_cvtph_ps(h_);                                   \
  })
PA_ITEMS(avx2, __attribute__((target("avx2,fma,f16c"))), PA_LOAD8_F16C)

/* AVX-512: 16 lanes; halves convert with the 512-bit vcvtph2ps, bf16 by a
 * shift of the widened halves, 16 at a time. */
typedef float pa_v16f __attribute__((vector_size(64)));
#define PA_LOAD16_F32(p) ({ pa_v16f v_; memcpy(&v_, (p), 64); v_; })
#define PA_LOAD16_F16(p)                                           \
  ({                                                               \
    __m256i h_;                                                    \
    memcpy(&h_, (p), 32);                                          \
    (pa_v16f)_mm512_cvtph_ps(h_);                                  \
  })
#define PA_LOAD16_BF16(p)                                                           \
  ({                                                                                \
    __m256i h_;                                                                     \
    memcpy(&h_, (p), 32);                                                           \
    (pa_v16f)_mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h_), 16)); \
  })
#define PA_AVX512 __attribute__((target("avx512f,avx512bw,avx512vl,f16c,fma")))
#define PA_PAIR16(a, b)                                                                                \
  (__builtin_shufflevector((a), (b), 0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30) +      \
   __builtin_shufflevector((a), (b), 1, 3, 5, 7, 9, 11, 13, 15, 17, 19, 21, 23, 25, 27, 29, 31))
#define PA_QUAD16(a, i) PA_PAIR16(PA_PAIR16((a)[i], (a)[i + 1]), PA_PAIR16((a)[i + 2], (a)[i + 3]))
#define PA_SUMS16(a) \
  PA_PAIR16(PA_PAIR16(PA_QUAD16(a, 0), PA_QUAD16(a, 4)), PA_PAIR16(PA_QUAD16(a, 8), PA_QUAD16(a, 12)))
PA_ITEM_F32(f32_avx512, float, pa_v16f, 16, PA_LOAD16_F32, PA_LOAD1_F32, PA_AVX512, PA_SUMS16)
PA_ITEM_F32(bf16_avx512, uint16_t, pa_v16f, 16, PA_LOAD16_BF16, PA_LOAD1_BF16, PA_AVX512, PA_SUMS16)
PA_ITEM_F32(f16_avx512, uint16_t, pa_v16f, 16, PA_LOAD16_F16, PA_LOAD1_F16, PA_AVX512, PA_SUMS16)
#endif

/* f64: plain loops in double (same item shape). */
static void pa_item_f64(const pa_job_t* j, int64_t s, int64_t g0, int64_t ng, int64_t len,
                        double* q, double* sc, double* acc) {
  const bp_op_call_t* call = j->call;
  const int64_t D = j->D, G = j->G, start = pa_start(j, len), n = len - start, R = ng * G;
  const double* qp = (const double*)(const void*)cpu_desc_ptr(call->inputs[0]) + (s * j->H + g0 * G) * D;
  const double* kc = (const double*)(const void*)cpu_desc_ptr(call->inputs[1]);
  const double* vc = (const double*)(const void*)cpu_desc_ptr(call->inputs[2]);
  for (int64_t i = 0; i < R * D; i++) q[i] = qp[i] * j->scale;
  memset(acc, 0, sizeof(double) * (size_t)(R * D));
  for (int64_t t = start; t < len; t++) {
    int64_t row = (cpu_index_at(call->inputs[3], s * j->MB + t / j->BS) * j->BS + t % j->BS) * j->Hkv + g0;
    for (int64_t r = 0; r < R; r++) {
      double v = 0.0;
      for (int64_t d = 0; d < D; d++) v += q[r * D + d] * kc[(row + r / G) * D + d];
      if (j->alibi) v += j->alibi[g0 * G + r] * (double)(t - (len - 1));
      sc[r * n + (t - start)] = v;
    }
  }
  for (int64_t r = 0; r < R; r++) {
    double *si = sc + r * n, m = -INFINITY, sum = 0.0;
    for (int64_t t = 0; t < n; t++) m = si[t] > m ? si[t] : m;
    for (int64_t t = 0; t < n; t++) sum += si[t] = exp(si[t] - m);
    for (int64_t t = 0; t < n; t++) si[t] = sum > 0.0 ? si[t] / sum : 0.0;
  }
  for (int64_t t = start; t < len; t++) {
    int64_t row = (cpu_index_at(call->inputs[3], s * j->MB + t / j->BS) * j->BS + t % j->BS) * j->Hkv + g0;
    for (int64_t r = 0; r < R; r++) {
      for (int64_t d = 0; d < D; d++) acc[r * D + d] += sc[r * n + (t - start)] * vc[(row + r / G) * D + d];
    }
  }
}

typedef void (*pa_item_f32_fn)(const pa_job_t*, int64_t, int64_t, int64_t, int64_t, float*,
                               float*, float*);

static pa_item_f32_fn pa_pick(uint32_t dtype) {
#ifdef PA_HAVE_AVX2
  int cap = cpu_isa_cap(); /* BP_CPU_ISA */
  if (cap >= 2 && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
      __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("f16c") &&
      __builtin_cpu_supports("fma")) {
    return dtype == BP_DTYPE_F32 ? pa_item_f32_avx512 : dtype == BP_DTYPE_BF16 ? pa_item_bf16_avx512 : pa_item_f16_avx512;
  }
  if (cap >= 1 && __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") &&
      __builtin_cpu_supports("f16c")) {
    return dtype == BP_DTYPE_F32 ? pa_item_f32_avx2 : dtype == BP_DTYPE_BF16 ? pa_item_bf16_avx2 : pa_item_f16_avx2;
  }
#endif
  return dtype == BP_DTYPE_F32 ? pa_item_f32_base : dtype == BP_DTYPE_BF16 ? pa_item_bf16_base : pa_item_f16_base;
}

static void pa_run(void* ctx, int64_t begin, int64_t end) {
  pa_job_t* j = ctx;
  const bp_op_call_t* call = j->call;
  const bp_tensor_desc_t* out = call->outputs[0];
  int wide = out->dtype == BP_DTYPE_F64;
  size_t cs = wide ? sizeof(double) : sizeof(float);
  size_t rows = (size_t)(j->chunk * j->G);
  size_t n_q = rows * (size_t)j->D, n_sc = rows * (size_t)(j->max_n > 0 ? j->max_n : 1);
  unsigned char* buf = malloc(cs * (2 * n_q + n_sc));
  if (!buf) {
    atomic_store(&j->failed, 1);
    return;
  }
  pa_item_f32_fn item = wide ? NULL : pa_pick(out->dtype);
  size_t oes = bp_dtype_size(out->dtype);
  for (int64_t w = begin; w < end; w++) {
    int64_t s = w / j->nchunks, g0 = (w % j->nchunks) * j->chunk;
    int64_t ng = j->Hkv - g0 < j->chunk ? j->Hkv - g0 : j->chunk;
    int64_t len = cpu_index_at(call->inputs[4], s);
    void *q = buf, *acc = buf + cs * n_q, *sc = buf + 2 * cs * n_q;
    if (wide) {
      pa_item_f64(j, s, g0, ng, len, q, sc, acc);
    } else {
      item(j, s, g0, ng, len, q, sc, acc);
    }
    unsigned char* o = cpu_desc_ptr(out) + (size_t)((s * j->H + g0 * j->G) * j->D) * oes;
    cpu_store[wide ? CPU_KT_F64 : CPU_KT_F32](o, 1, acc, ng * j->G * j->D, out->dtype);
  }
  free(buf);
}

/* Lengths within the table, used block ids within the cache. */
static bp_status_t pa_check(pa_job_t* j) {
  const bp_op_call_t* call = j->call;
  for (int64_t s = 0; s < j->S; s++) {
    int64_t len = cpu_index_at(call->inputs[4], s);
    if (len < 0) {
      return cpu_error(BP_INVALID_ARGUMENT, "cpu: paged_attention: context_lens[%lld] = %lld is "
                                            "negative", (long long)s, (long long)len);
    }
    if (len > j->MB * j->BS) {
      return cpu_error(BP_OUT_OF_RANGE, "cpu: paged_attention: context_lens[%lld] = %lld is past "
                                        "the block table's %lld blocks of %lld tokens",
                       (long long)s, (long long)len, (long long)j->MB, (long long)j->BS);
    }
    int64_t start = pa_start(j, len);
    for (int64_t b = start / j->BS; b * j->BS < len; b++) {
      int64_t blk = cpu_index_at(call->inputs[3], s * j->MB + b);
      if (blk < 0 || blk >= j->NB) {
        return cpu_error(BP_OUT_OF_RANGE, "cpu: paged_attention: block_tables[%lld, %lld] = %lld "
                                          "is outside the cache's %lld blocks",
                         (long long)s, (long long)b, (long long)blk, (long long)j->NB);
      }
    }
    if (len - start > j->max_n) j->max_n = len - start;
  }
  return BP_OK;
}

static bp_status_t exec_paged_attention(const bp_op_call_t* call) {
  const bp_paged_attention_attrs_t* a = call->attrs;
  const bp_tensor_desc_t *q = call->inputs[0], *kc = call->inputs[1];
  pa_job_t j = {0};
  j.call = call;
  j.S = q->sizes[0], j.H = q->sizes[1], j.D = q->sizes[2];
  j.NB = kc->sizes[0], j.BS = kc->sizes[1], j.Hkv = kc->sizes[2];
  j.MB = call->inputs[3]->sizes[1];
  j.G = j.H / j.Hkv;
  j.window = a ? a->sliding_window : 0;
  j.scale = a && a->scale > 0.0 ? a->scale : 1.0 / sqrt((double)j.D);
  const bp_tensor_desc_t* al = call->num_inputs > 5 ? call->inputs[5] : NULL;
  j.alibi = al && al->dtype != BP_DTYPE_INVALID ? (const float*)(const void*)cpu_desc_ptr(al) : NULL;
  bp_status_t st = pa_check(&j);
  if (st != BP_OK || j.S * j.H * j.D == 0) return st;
  /* kv heads per item: all of a cache row's (one contiguous read per
   * token), split while there are fewer than 4 items per thread */
  int64_t threads = cpu_pool_threads();
  j.chunk = j.Hkv;
  while (j.chunk > 1 && j.S * ((j.Hkv + j.chunk - 1) / j.chunk) < 4 * threads) j.chunk = (j.chunk + 1) / 2;
  j.nchunks = (j.Hkv + j.chunk - 1) / j.chunk;
  cpu_parallel_for(j.S * j.nchunks, 1, pa_run, &j);
  if (atomic_load(&j.failed)) {
    return cpu_error(BP_RESOURCE_EXHAUSTED, "cpu: paged_attention: no memory for %lld scores",
                     (long long)(j.chunk * j.G * j.max_n));
  }
  return BP_OK;
}

/* ---- family -------------------------------------------------------------------- */

static bp_status_t exec_paged(const bp_op_call_t* call) {
  bp_status_t st = cpu_call_require_dense(call);
  if (st != BP_OK) return st;
  return call->op_id == BP_OP_kv_cache_append ? exec_kv_cache_append(call)
                                              : exec_paged_attention(call);
}

static int supported_paged(const bp_op_call_t* call, char* msg, size_t cap) {
  (void)call, (void)msg, (void)cap;
  return BP_SUPPORT_OK;
}

const cpu_family_t cpu_family_paged = {
    "paged", CPU_FAMILY_OPS(BP_OP_kv_cache_append, BP_OP_paged_attention), exec_paged,
    supported_paged, 0,
};
