/* backplane CPU plugin: the f32 query-block tile of scaled_dot_product_attention
 * in AVX-512 (cpu_attention.c runs the items and owns the masks).
 *
 * One item's ATT_TILE_Q queries are the 16-float lanes of four zmm
 * registers, so every step vectorizes across queries, whatever the head
 * sizes E and Ev are:
 *   - qt, the queries transposed and scaled: qt[e * Q + r] = q[r][e] * scale;
 *   - st, a key block's scores transposed: st[c * Q + r] = qt[., r] . k[c];
 *     6 keys x 64 queries are 24 accumulators, each step one broadcast of
 *     k[c][e] per key against the four query vectors of qt[e];
 *   - the online softmax runs down st's columns: the running maximum m[r],
 *     the sum l[r] and the rescale corr[r] are vectors over r, no
 *     horizontal reductions;
 *   - acct, the output accumulator transposed (acct[d * Q + r]): 6 value
 *     columns x 64 queries per register tile, scaled by corr[r] on load,
 *     then one broadcast of v[c][d] per column against st's row c.
 * OpenBLAS's small-matrix path did the same two products per 64 x 64 key
 * block at about a third of the plugin's large-GEMM rate. Queries past the
 * item's last row are zero lanes: computed, never stored.
 */
#include "cpu_attention.h"
#include "cpu_vmath.h"

#if CPU_VM_X86

#define ATT_TILE_TARGET __attribute__((target("avx512f,fma,prefer-vector-width=512")))
#define ATT_TILE_INLINE ATT_TILE_TARGET static inline __attribute__((always_inline))

typedef float att_v16 __attribute__((vector_size(64)));
typedef int32_t att_i16 __attribute__((vector_size(64)));
enum { ATT_TILE_V = ATT_TILE_Q / 16, ATT_TILE_N = 6 /* keys or value columns per register tile */ };

int cpu_att_tile_available(void) { return cpu_vm_isa(cpu_isa_cap()) >= 2; }

/* Both products of the tile as one register-tiled kernel: for rows n < N
 * (ATT_TILE_Q floats apart in out),
 *   out[n][.] = (init ? out[n][.] * init[.] : 0) + sum over s < steps of a(n, s) * b[s][.]
 * with a(n, s) = a[n * a_n + s * a_s] broadcast and b's rows ATT_TILE_Q
 * floats apart: N x 4 accumulators, 4 loads of b and N broadcasts a step. */
ATT_TILE_INLINE void att_bcast_n(const float* restrict a, int64_t a_n, int64_t a_s, const float* restrict b,
                                 int64_t steps, float* restrict out, const float* restrict init, const int N,
                                 const int guarded) {
  att_v16 acc[ATT_TILE_N][ATT_TILE_V];
  for (int n = 0; n < N; n++)
    for (int t = 0; t < ATT_TILE_V; t++)
      acc[n][t] = init ? ((const att_v16*)(const void*)(out + n * ATT_TILE_Q))[t] * ((const att_v16*)(const void*)init)[t]
                       : (att_v16){0};
  for (int64_t s = 0; s < steps; s++) {
    const att_v16* bs = (const att_v16*)(const void*)(b + s * ATT_TILE_Q);
    att_i16 keep[ATT_TILE_V];
    for (int t = 0; t < ATT_TILE_V; t++) keep[t] = guarded ? (att_i16)bs[t] != (int32_t)0x80000000 : (att_i16){0};
    for (int n = 0; n < N; n++) {
      float an = a[n * a_n + s * a_s];
      for (int t = 0; t < ATT_TILE_V; t++)
        acc[n][t] += guarded ? (att_v16)((att_i16)(an * bs[t]) & keep[t]) : an * bs[t];
    }
  }
  for (int n = 0; n < N; n++)
    for (int t = 0; t < ATT_TILE_V; t++) ((att_v16*)(void*)(out + n * ATT_TILE_Q))[t] = acc[n][t];
}

/* att_bcast_n over `rows` rows, ATT_TILE_N at a time; G: guarded (a
 * constant, so that the fast loop keeps its FMAs). */
#define ATT_BCAST(NAME, G)                                                                                   \
  ATT_TILE_TARGET static void NAME(const float* a, int64_t a_n, int64_t a_s, const float* b, int64_t steps,   \
                                   float* out, const float* init, int64_t rows) {                            \
    int64_t n = 0;                                                                                           \
    for (; n + ATT_TILE_N <= rows; n += ATT_TILE_N)                                                          \
      att_bcast_n(a + n * a_n, a_n, a_s, b, steps, out + n * ATT_TILE_Q, init, ATT_TILE_N, G);               \
    const float* an = a + n * a_n;                                                                           \
    float* on = out + n * ATT_TILE_Q;                                                                        \
    switch (rows - n) {                                                                                      \
      case 5: att_bcast_n(an, a_n, a_s, b, steps, on, init, 5, G); break;                                    \
      case 4: att_bcast_n(an, a_n, a_s, b, steps, on, init, 4, G); break;                                    \
      case 3: att_bcast_n(an, a_n, a_s, b, steps, on, init, 3, G); break;                                    \
      case 2: att_bcast_n(an, a_n, a_s, b, steps, on, init, 2, G); break;                                    \
      case 1: att_bcast_n(an, a_n, a_s, b, steps, on, init, 1, G); break;                                    \
      default: break;                                                                                        \
    }                                                                                                        \
  }
ATT_BCAST(att_bcast, 0)
ATT_BCAST(att_bcast_guarded, 1)

/* st[c][.] = the dot products of key c with qt's E rows. */
ATT_TILE_TARGET void cpu_att_tile_scores(const float* qt, int64_t E, const float* k, int64_t k_rs, int64_t w,
                                         float* st) {
  att_bcast(k, k_rs, 1, qt, E, st, NULL, w);
}

/* The online softmax over one key block: rows 0..w of st become the block's
 * weights exp(s - m_new); m, l move on and corr gets exp(m_old - m_new) per
 * query. A NaN score makes its query's maximum, and so its output, NaN. A
 * query whose scores are all -inf so far keeps m = -inf and weights of 0
 * (it subtracts 0 instead of -inf). `mark`: masked (-inf) scores get the
 * weight -0.0, which the guarded P @ V skips. */
ATT_TILE_TARGET void cpu_att_tile_softmax(float* restrict st, int64_t w, float* restrict m, float* restrict l,
                                          float* restrict corr, int mark) {
  float mx[ATT_TILE_Q], sub[ATT_TILE_Q], sum[ATT_TILE_Q];
  int32_t nan[ATT_TILE_Q];
  for (int r = 0; r < ATT_TILE_Q; r++) {
    mx[r] = m[r];
    nan[r] = 0;
    sum[r] = 0.0f;
  }
  for (int64_t c = 0; c < w; c++) {
    const float* row = st + c * ATT_TILE_Q;
    for (int r = 0; r < ATT_TILE_Q; r++) {
      mx[r] = row[r] > mx[r] ? row[r] : mx[r];
      nan[r] |= row[r] != row[r];
    }
  }
  for (int r = 0; r < ATT_TILE_Q; r++) {
    float mn = nan[r] ? NAN : mx[r];
    sub[r] = mn == -INFINITY ? 0.0f : mn;
    corr[r] = cpu_vm_expf(m[r] - sub[r]);
    m[r] = mn;
  }
  for (int64_t c = 0; c < w; c++) {
    float* row = st + c * ATT_TILE_Q;
    if (mark) {
      for (int r = 0; r < ATT_TILE_Q; r++) {
        float p = cpu_vm_expf(row[r] - sub[r]);
        sum[r] += p;
        row[r] = row[r] == -INFINITY ? -0.0f : p; /* the mark of a masked key */
      }
    } else {
      for (int r = 0; r < ATT_TILE_Q; r++) {
        float p = cpu_vm_expf(row[r] - sub[r]);
        sum[r] += p;
        row[r] = p;
      }
    }
  }
  for (int r = 0; r < ATT_TILE_Q; r++) l[r] = l[r] * corr[r] + sum[r];
}

/* Nonzero when rows 0..w of v (n wide) are all finite: the exponent bits,
 * 16 lanes at a time. */
ATT_TILE_TARGET int cpu_att_tile_finite(const float* v, int64_t v_rs, int64_t w, int64_t n) {
  uint32_t bad = 0;
  for (int64_t c = 0; c < w; c++) {
    const uint32_t* row = (const uint32_t*)(const void*)(v + c * v_rs);
    for (int64_t d = 0; d < n; d++) bad |= (row[d] & 0x7F800000u) == 0x7F800000u;
  }
  return bad == 0;
}

/* acct[d][.] = acct[d][.] * corr + sum over c of v[c][d] * p[c][.]. */
ATT_TILE_TARGET void cpu_att_tile_pv(const float* p, int64_t w, const float* v, int64_t v_rs, int64_t Ev,
                                     float* acct, const float* corr, int guarded) {
  (guarded ? att_bcast_guarded : att_bcast)(v, 1, v_rs, p, w, acct, corr, Ev);
}

#else /* no AVX-512 build: the items take the GEMM path */

int cpu_att_tile_available(void) { return 0; }
void cpu_att_tile_scores(const float* qt, int64_t E, const float* k, int64_t k_rs, int64_t w, float* st) {
  (void)qt, (void)E, (void)k, (void)k_rs, (void)w, (void)st;
}
void cpu_att_tile_softmax(float* st, int64_t w, float* m, float* l, float* corr, int mark) {
  (void)st, (void)w, (void)m, (void)l, (void)corr, (void)mark;
}
int cpu_att_tile_finite(const float* v, int64_t v_rs, int64_t w, int64_t n) {
  (void)v, (void)v_rs, (void)w, (void)n;
  return 1;
}
void cpu_att_tile_pv(const float* p, int64_t w, const float* v, int64_t v_rs, int64_t Ev, float* acct,
                     const float* corr, int guarded) {
  (void)p, (void)w, (void)v, (void)v_rs, (void)Ev, (void)acct, (void)corr, (void)guarded;
}

#endif
