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
 * with b's rows ATT_TILE_Q floats apart and a(n, s) broadcast from rows of
 * keys: KM (key-major, the scores) a(n, s) = rows[n][s], key n's element
 * s; else (the values) a(n, s) = rows[s][d0 + n], key s's element d0 + n.
 * N x 4 accumulators, 4 loads of b and N broadcasts a step. */
ATT_TILE_INLINE void att_bcast_n(const float* const* restrict rows, int64_t d0, const float* restrict b,
                                 int64_t steps, float* restrict out, const float* restrict init, const int N,
                                 const int KM, const int guarded) {
  att_v16 acc[ATT_TILE_N][ATT_TILE_V];
  const float* kr[ATT_TILE_N];
  for (int n = 0; n < N; n++) {
    kr[n] = KM ? rows[n] : NULL;
    for (int t = 0; t < ATT_TILE_V; t++)
      acc[n][t] = init ? ((const att_v16*)(const void*)(out + n * ATT_TILE_Q))[t] * ((const att_v16*)(const void*)init)[t]
                       : (att_v16){0};
  }
  for (int64_t s = 0; s < steps; s++) {
    const att_v16* bs = (const att_v16*)(const void*)(b + s * ATT_TILE_Q);
    const float* vs = KM ? NULL : rows[s] + d0;
    att_i16 keep[ATT_TILE_V];
    for (int t = 0; t < ATT_TILE_V; t++) keep[t] = guarded ? (att_i16)bs[t] != (int32_t)0x80000000 : (att_i16){0};
    for (int n = 0; n < N; n++) {
      float an = KM ? kr[n][s] : vs[n];
      for (int t = 0; t < ATT_TILE_V; t++)
        acc[n][t] += guarded ? (att_v16)((att_i16)(an * bs[t]) & keep[t]) : an * bs[t];
    }
  }
  for (int n = 0; n < N; n++)
    for (int t = 0; t < ATT_TILE_V; t++) ((att_v16*)(void*)(out + n * ATT_TILE_Q))[t] = acc[n][t];
}

/* att_bcast_n over `count` rows of out, ATT_TILE_N at a time; KM and G
 * (guarded) constants, so that the fast loops keep plain FMAs. */
#define ATT_BCAST(NAME, KM, G)                                                                                 \
  ATT_TILE_TARGET static void NAME(const float* const* rows, const float* b, int64_t steps, float* out,        \
                                   const float* init, int64_t count) {                                        \
    int64_t n = 0;                                                                                             \
    for (; n + ATT_TILE_N <= count; n += ATT_TILE_N)                                                           \
      att_bcast_n(KM ? rows + n : rows, KM ? 0 : n, b, steps, out + n * ATT_TILE_Q, init, ATT_TILE_N, KM, G);  \
    const float* const* rn = KM ? rows + n : rows;                                                             \
    float* on = out + n * ATT_TILE_Q;                                                                          \
    int64_t dn = KM ? 0 : n;                                                                                   \
    switch (count - n) {                                                                                       \
      case 5: att_bcast_n(rn, dn, b, steps, on, init, 5, KM, G); break;                                        \
      case 4: att_bcast_n(rn, dn, b, steps, on, init, 4, KM, G); break;                                        \
      case 3: att_bcast_n(rn, dn, b, steps, on, init, 3, KM, G); break;                                        \
      case 2: att_bcast_n(rn, dn, b, steps, on, init, 2, KM, G); break;                                        \
      case 1: att_bcast_n(rn, dn, b, steps, on, init, 1, KM, G); break;                                        \
      default: break;                                                                                          \
    }                                                                                                          \
  }
ATT_BCAST(att_scores_rows, 1, 0)
ATT_BCAST(att_values_rows, 0, 0)
ATT_BCAST(att_values_rows_guarded, 0, 1)

/* st[c][.] = the dot products of key c (row k[c]) with qt's E rows. */
ATT_TILE_TARGET void cpu_att_tile_scores(const float* qt, int64_t E, const float* const* k, int64_t w, float* st) {
  att_scores_rows(k, qt, E, st, NULL, w);
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

/* Nonzero when the rows v[0..w) (n wide) are all finite: the exponent
 * bits, 16 lanes at a time. */
ATT_TILE_TARGET int cpu_att_tile_finite(const float* const* v, int64_t w, int64_t n) {
  uint32_t bad = 0;
  for (int64_t c = 0; c < w; c++) {
    const uint32_t* row = (const uint32_t*)(const void*)v[c];
    for (int64_t d = 0; d < n; d++) bad |= (row[d] & 0x7F800000u) == 0x7F800000u;
  }
  return bad == 0;
}

/* acct[d][.] = acct[d][.] * corr + sum over c of v[c][d] * p[c][.]. */
ATT_TILE_TARGET void cpu_att_tile_pv(const float* p, int64_t w, const float* const* v, int64_t Ev, float* acct,
                                     const float* corr, int guarded) {
  (guarded ? att_values_rows_guarded : att_values_rows)(v, p, w, acct, corr, Ev);
}

#else /* no AVX-512 build: the items take the GEMM path */

int cpu_att_tile_available(void) { return 0; }
void cpu_att_tile_scores(const float* qt, int64_t E, const float* const* k, int64_t w, float* st) {
  (void)qt, (void)E, (void)k, (void)w, (void)st;
}
void cpu_att_tile_softmax(float* st, int64_t w, float* m, float* l, float* corr, int mark) {
  (void)st, (void)w, (void)m, (void)l, (void)corr, (void)mark;
}
int cpu_att_tile_finite(const float* const* v, int64_t w, int64_t n) {
  (void)v, (void)w, (void)n;
  return 1;
}
void cpu_att_tile_pv(const float* p, int64_t w, const float* const* v, int64_t Ev, float* acct, const float* corr,
                     int guarded) {
  (void)p, (void)w, (void)v, (void)Ev, (void)acct, (void)corr, (void)guarded;
}

#endif
