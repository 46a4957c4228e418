/* backplane CPU plugin: the serving attention ops around the paged KV cache
 * (docs/semantics.md, "Paged KV cache"; layouts as cpu_paged.c):
 *
 *   merge_attn_states        vLLM's merge of two partial attention results
 *                            by their log-sum-exp ([H, T] lse).
 *   kv_cache_copy_blocks     vLLM's copy_blocks: block pairs (source,
 *                            destination) copied in both caches, in place or
 *                            into new caches.
 *   paged_attention_prefill  causal attention of each sequence's new query
 *                            rows (query_start_loc, flash_attn_varlen's
 *                            cu_seqlens_q) over its cached keys, read in place
 *                            block by block (never a dense gathered copy).
 *
 * paged_attention_prefill: one work item is (sequence, kv head, a tile of
 * query rows); the G = num_heads / num_kv_heads query heads of the kv head
 * and the tile's rows share each key and value row. On CPUs with AVX-512
 * (f32, f16, bf16; BP_CPU_ISA caps it) a tile is ATT_TILE_Q / G rows, the
 * lanes of the attention tile of cpu_attention_tile.c: keys in chunks of
 * 64 gathered from the block table as runs of adjacent tokens, scored and
 * summed in place (f32 caches) or converted per run, an online softmax
 * between chunks. Elsewhere (and f64) a tile is 16 rows: scores by dot
 * products in 8-lane vectors (an AVX2 + FMA variant chosen at run time), a
 * softmax per row, then the weighted sum of the value rows. f32 compute
 * (f64 for f64), rounded once on store. Rows outside [query_start_loc[0],
 * query_start_loc[S]) are zero.
 *
 * Values the core cannot see are checked before anything is written.
 * Operands are dense (the support answer asks the core to pack others).
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cpu_attention.h" /* the f32 query tile */
#include "cpu_kernels.h"

/* ---- merge_attn_states ------------------------------------------------------------- */

typedef struct merge_job {
  const bp_op_call_t* call;
  const double *pl, *sl; /* the lse inputs as [H, T] doubles */
  int64_t T, H, D;
  _Atomic int failed;
} merge_job_t;

static void merge_run(void* ctx, int64_t begin, int64_t end) {
  merge_job_t* j = ctx;
  const bp_op_call_t* call = j->call;
  const bp_tensor_desc_t *po = call->inputs[0], *so = call->inputs[2];
  const bp_tensor_desc_t *out = call->outputs[0], *olse = call->outputs[1];
  size_t es = bp_dtype_size(po->dtype);
  double* buf = malloc(sizeof(double) * 3 * (size_t)(j->D > 0 ? j->D : 1));
  if (!buf) {
    atomic_store(&j->failed, 1);
    return;
  }
  double *a = buf, *b = buf + j->D, *o = buf + 2 * j->D;
  for (int64_t t = begin; t < end; t++) {
    for (int64_t h = 0; h < j->H; h++) {
      double p = j->pl[h * j->T + t], s = j->sl[h * j->T + t], lse;
      p = isinf(p) ? -INFINITY : p; /* an infinite lse is an empty part (vLLM) */
      s = isinf(s) ? -INFINITY : s;
      size_t at = (size_t)((t * j->H + h) * j->D);
      if (isnan(p) || isnan(s)) {
        lse = NAN;
        for (int64_t d = 0; d < j->D; d++) o[d] = NAN;
      } else if (p == -INFINITY && s == -INFINITY) { /* both empty */
        lse = -INFINITY;
        memset(o, 0, sizeof(double) * (size_t)j->D);
      } else {
        double m = p > s ? p : s, pe = exp(p - m), se = exp(s - m), z = pe + se;
        double wp = pe / z, ws = se / z;
        lse = m + log(z);
        cpu_load[CPU_KT_F64](a, cpu_desc_ptr(po) + at * es, 1, j->D, po->dtype);
        cpu_load[CPU_KT_F64](b, cpu_desc_ptr(so) + at * es, 1, j->D, so->dtype);
        for (int64_t d = 0; d < j->D; d++) o[d] = a[d] * wp + b[d] * ws;
      }
      cpu_store[CPU_KT_F64](cpu_desc_ptr(out) + at * es, 1, o, j->D, out->dtype);
      cpu_store[CPU_KT_F64](cpu_desc_ptr(olse) + (size_t)(h * j->T + t) * bp_dtype_size(olse->dtype),
                            1, &lse, 1, olse->dtype);
    }
  }
  free(buf);
}

static bp_status_t exec_merge_attn_states(const bp_op_call_t* call) {
  const bp_tensor_desc_t* po = call->inputs[0];
  merge_job_t j = {0};
  j.call = call;
  j.T = po->sizes[0], j.H = po->sizes[1], j.D = po->sizes[2];
  size_t n = (size_t)(j.T * j.H);
  if (n == 0) return BP_OK;
  double* l = malloc(sizeof(double) * 2 * n);
  if (!l) return cpu_error(BP_RESOURCE_EXHAUSTED, "cpu: merge_attn_states: no memory");
  cpu_load[CPU_KT_F64](l, cpu_desc_ptr(call->inputs[1]), 1, (int64_t)n, call->inputs[1]->dtype);
  cpu_load[CPU_KT_F64](l + n, cpu_desc_ptr(call->inputs[3]), 1, (int64_t)n, call->inputs[3]->dtype);
  j.pl = l, j.sl = l + n;
  cpu_parallel_for(j.T, 8192 / (j.H * j.D + 1) + 1, merge_run, &j);
  free(l);
  if (atomic_load(&j.failed)) return cpu_error(BP_RESOURCE_EXHAUSTED, "cpu: merge_attn_states: no memory");
  return BP_OK;
}

/* ---- kv_cache_copy_blocks ---------------------------------------------------------- */

static bp_status_t exec_kv_cache_copy_blocks(const bp_op_call_t* call) {
  const bp_tensor_desc_t* const* in = call->inputs;
  const bp_tensor_desc_t* map = in[2];
  int64_t NB = in[0]->sizes[0], P = map->sizes[0];
  size_t blk = (size_t)(in[0]->sizes[1] * in[0]->sizes[2] * in[0]->sizes[3]) * bp_dtype_size(in[0]->dtype);
  /* role of each block: 1 source, 2 destination */
  unsigned char* role = calloc((size_t)(NB > 0 ? NB : 1), 1);
  if (!role) return cpu_error(BP_RESOURCE_EXHAUSTED, "cpu: kv_cache_copy_blocks: no memory");
  bp_status_t st = BP_OK;
  for (int64_t i = 0; i < 2 * P && st == BP_OK; i++) {
    int64_t b = cpu_index_at(map, i);
    if (b < 0 || b >= NB) {
      st = cpu_error(BP_OUT_OF_RANGE, "cpu: kv_cache_copy_blocks: block_mapping[%lld, %lld] = %lld "
                                      "is outside the cache's %lld blocks",
                     (long long)(i / 2), (long long)(i % 2), (long long)b, (long long)NB);
    } else if (i % 2 == 0) {
      role[b] |= 1;
    }
  }
  for (int64_t p = 0; p < P && st == BP_OK; p++) {
    int64_t d = cpu_index_at(map, 2 * p + 1);
    if (role[d]) {
      st = cpu_error(BP_INVALID_ARGUMENT, "cpu: kv_cache_copy_blocks: destination block %lld (pair "
                                          "%lld) is also a source or another pair's destination "
                                          "(the result would depend on the copy order)",
                     (long long)d, (long long)p);
    }
    role[d] |= 2;
  }
  free(role);
  if (st != BP_OK) return st;
  for (int c = 0; c < 2; c++) {
    unsigned char *dst = cpu_desc_ptr(call->outputs[c]), *src = cpu_desc_ptr(in[c]);
    if (dst != src) cpu_memcpy(dst, src, (uint64_t)NB * blk);
    for (int64_t p = 0; p < P; p++) {
      memcpy(dst + (size_t)cpu_index_at(map, 2 * p + 1) * blk,
             src + (size_t)cpu_index_at(map, 2 * p) * blk, blk);
    }
  }
  return BP_OK;
}

/* ---- paged_attention_prefill ------------------------------------------------------- */

#define PF_TILE 16

typedef struct pf_item {
  int64_t s, i0, n; /* sequence, first query row of the tile (in the sequence), rows */
} pf_item_t;

typedef struct pf_job {
  const bp_op_call_t* call;
  const pf_item_t* items;
  int64_t nitems, H, Hkv, G, D, BS, MB;
  int64_t tile_rows; /* query rows per item: PF_TILE, or ATT_TILE_Q / G on the tile */
  int tile;          /* f32 compute on the AVX-512 query tile (cpu_attention_tile.c) */
  int64_t window;
  double scale;
  _Atomic int failed;
} pf_job_t;

/* Row `row` of a cache as CT: in place when the cache holds CT (WIDE: its
 * dtype), else converted into buf. */
#define PF_ROW(CT, KT, WIDE, d, row, buf)                                                       \
  ((d)->dtype == (WIDE) ? (const CT*)(const void*)(cpu_desc_ptr(d) + (row) * bp_dtype_size(WIDE)) \
                        : (cpu_load[KT]((buf), cpu_desc_ptr(d) + (row) * bp_dtype_size((d)->dtype), 1, \
                                        j->D, (d)->dtype),                                      \
                           (const CT*)(buf)))

/* One item for query heads of kv head g in compute type CT (float or
 * double, kernel type KT, dtype WIDE): q [R, D] scaled, sc [R, n], acc
 * [R, D], kv [D] (a converted cache row). Dot products in 8-lane vectors. */
#define PF_ITEM(SFX, CT, KT, WIDE, EXP, ATTR)                                                     \
  ATTR static void pf_item_##SFX(const pf_job_t* j, const pf_item_t* it, int64_t g, CT* q, CT* sc,     \
                            CT* acc, CT* kv) {                                                    \
    typedef CT pf_vec __attribute__((vector_size(8 * sizeof(CT))));                               \
    const bp_op_call_t* call = j->call;                                                           \
    const bp_tensor_desc_t *qd = call->inputs[0], *kd = call->inputs[1], *vd = call->inputs[2];   \
    const int64_t D = j->D, G = j->G, R = it->n * G, D8 = D & ~(int64_t)7;                        \
    const int64_t q0 = cpu_index_at(call->inputs[4], it->s);                                      \
    const int64_t qn = cpu_index_at(call->inputs[4], it->s + 1) - q0;                             \
    const int64_t len = cpu_index_at(call->inputs[5], it->s);                                     \
    const int64_t p0 = len - qn + it->i0; /* position of the tile's first row */                  \
    const int64_t hi = p0 + it->n;        /* keys [lo, hi) cover every row */                     \
    const int64_t lo = j->window > 0 && p0 + 1 > j->window ? p0 + 1 - j->window : 0;              \
    const int64_t n = hi - lo;                                                                    \
    const size_t es = bp_dtype_size(qd->dtype);                                                   \
    for (int64_t i = 0; i < it->n; i++) {                                                         \
      cpu_load[KT](q + i * G * D, cpu_desc_ptr(qd) + (size_t)(((q0 + it->i0 + i) * j->H + g * G) * D) * es, \
                   1, G * D, qd->dtype);                                                          \
    }                                                                                             \
    for (int64_t r = 0; r < R * D; r++) q[r] *= (CT)j->scale;                                     \
    for (int64_t t = lo; t < hi; t++) {                                                           \
      int64_t blk = cpu_index_at(call->inputs[3], it->s * j->MB + t / j->BS);                     \
      size_t row = (size_t)(((blk * j->BS + t % j->BS) * j->Hkv + g) * D);                        \
      const CT* kr = PF_ROW(CT, KT, WIDE, kd, row, kv);                                           \
      for (int64_t r = 0; r < R; r++) {                                                           \
        int64_t pos = p0 + r / G;                                                                 \
        if (t > pos || (j->window > 0 && t <= pos - j->window)) {                                 \
          sc[r * n + (t - lo)] = -INFINITY;                                                       \
          continue;                                                                               \
        }                                                                                         \
        const CT* qi = q + r * D;                                                                 \
        pf_vec a8 = {0};                                                                          \
        for (int64_t d = 0; d < D8; d += 8) {                                                     \
          pf_vec x8, y8;                                                                          \
          memcpy(&x8, qi + d, sizeof x8);                                                         \
          memcpy(&y8, kr + d, sizeof y8);                                                         \
          a8 += x8 * y8;                                                                          \
        }                                                                                         \
        CT v = ((a8[0] + a8[4]) + (a8[1] + a8[5])) + ((a8[2] + a8[6]) + (a8[3] + a8[7]));         \
        for (int64_t d = D8; d < D; d++) v += qi[d] * kr[d];                                      \
        sc[r * n + (t - lo)] = v;                                                                 \
      }                                                                                           \
    }                                                                                             \
    for (int64_t r = 0; r < R; r++) {                                                             \
      CT* si = sc + r * n;                                                                        \
      CT m = -INFINITY, sum = 0;                                                                  \
      for (int64_t t = 0; t < n; t++) m = si[t] > m ? si[t] : m;                                  \
      for (int64_t t = 0; t < n; t++) sum += si[t] = EXP(si[t] - m);                              \
      CT inv = sum > 0 ? (CT)1 / sum : 0;                                                         \
      for (int64_t t = 0; t < n; t++) si[t] *= inv;                                               \
    }                                                                                             \
    memset(acc, 0, sizeof(CT) * (size_t)(R * D));                                                 \
    for (int64_t t = lo; t < hi; t++) {                                                           \
      int64_t blk = cpu_index_at(call->inputs[3], it->s * j->MB + t / j->BS);                     \
      size_t row = (size_t)(((blk * j->BS + t % j->BS) * j->Hkv + g) * D);                        \
      const CT* vr = PF_ROW(CT, KT, WIDE, vd, row, kv);                                           \
      for (int64_t r = 0; r < R; r++) {                                                           \
        CT p = sc[r * n + (t - lo)];                                                              \
        if (p == 0) continue;                                                                     \
        CT* ai = acc + r * D;                                                                     \
        for (int64_t d = 0; d < D; d++) ai[d] += p * vr[d];                                       \
      }                                                                                           \
    }                                                                                             \
  }

PF_ITEM(f32, float, CPU_KT_F32, BP_DTYPE_F32, expf, )
PF_ITEM(f64, double, CPU_KT_F64, BP_DTYPE_F64, exp, )
#if defined(__x86_64__) && defined(__GNUC__)
#define PF_HAVE_AVX2 1
PF_ITEM(f32_avx2, float, CPU_KT_F32, BP_DTYPE_F32, expf, __attribute__((target("avx2,fma"))))
#endif

/* One item on the AVX-512 query tile (f32 compute, G * rows <= ATT_TILE_Q):
 * the item's query rows (r = row * G + head of the group) are the tile's
 * lanes; keys go in chunks of up to PF_KEYS, each gathered from the
 * block table as row pointers (att_rows_f32: in place for f32 caches,
 * converted for f16 / bf16), with the online softmax between chunks.
 * Masked keys (past a row's position, or out of its window) take no part.
 * acc gets [rows * G, D]. */
#define PF_KEYS 64

static void pf_item_tile(const pf_job_t* j, const pf_item_t* it, int64_t g, float* mem, float* acc) {
  enum { Q = ATT_TILE_Q };
  const bp_op_call_t* call = j->call;
  const bp_tensor_desc_t *qd = call->inputs[0], *kd = call->inputs[1], *vd = call->inputs[2];
  const int64_t D = j->D, G = j->G, R = it->n * G, stride = j->Hkv * D;
  const int64_t q0 = cpu_index_at(call->inputs[4], it->s);
  const int64_t qn = cpu_index_at(call->inputs[4], it->s + 1) - q0;
  const int64_t len = cpu_index_at(call->inputs[5], it->s);
  const int64_t p0 = len - qn + it->i0, hi = p0 + it->n;
  const int64_t lo = j->window > 0 && p0 + 1 > j->window ? p0 + 1 - j->window : 0;
  float *qt = mem, *st = qt + Q * D, *acct = st + Q * PF_KEYS, *m = acct + Q * D, *l = m + Q;
  float *corr = l + Q, *tmp = corr + Q, *kt = tmp + D, *vt = kt + PF_KEYS * D;
  const float *krows[PF_KEYS], *vrows[PF_KEYS];
  const size_t es = bp_dtype_size(qd->dtype);
  for (int64_t r = 0; r < Q; r++) {
    if (r < R) /* row r / G of the item, query head g * G + r % G */
      cpu_load[CPU_KT_F32](tmp, cpu_desc_ptr(qd) + (size_t)(((q0 + it->i0 + r / G) * j->H + g * G + r % G) * D) * es,
                           1, D, qd->dtype);
    for (int64_t e = 0; e < D; e++) qt[e * Q + r] = r < R ? tmp[e] * (float)j->scale : 0.0f;
    m[r] = -INFINITY;
    l[r] = 0.0f;
  }
  memset(acct, 0, sizeof(float) * (size_t)(Q * D));
  for (int64_t c0 = lo; c0 < hi; c0 += PF_KEYS) {
    const int64_t w = hi - c0 < PF_KEYS ? hi - c0 : PF_KEYS;
    for (int64_t t = c0; t < c0 + w;) { /* runs of adjacent tokens, one block each */
      int64_t o = t % j->BS, run = j->BS - o < c0 + w - t ? j->BS - o : c0 + w - t;
      int64_t blk = cpu_index_at(call->inputs[3], it->s * j->MB + t / j->BS);
      int64_t row = ((blk * j->BS + o) * j->Hkv + g) * D;
      att_rows_f32(kd, cpu_desc_ptr(kd) + row * (int64_t)bp_dtype_size(kd->dtype), stride, run, D,
                   kt + (t - c0) * D, krows + (t - c0));
      att_rows_f32(vd, cpu_desc_ptr(vd) + row * (int64_t)bp_dtype_size(vd->dtype), stride, run, D,
                   vt + (t - c0) * D, vrows + (t - c0));
      t += run;
    }
    cpu_att_tile_scores(qt, D, krows, w, st);
    /* row r sees keys (pos - window, pos], pos = p0 + r / G: key c0 + c is
     * past the rows r < (key - p0) * G and out of the window of the rows
     * r >= (key + window - p0) * G */
    for (int64_t c = 0; c < w && (c0 + w - 1 > p0 || j->window > 0); c++) {
      int64_t key = c0 + c, past = (key - p0) * G, out = (key + j->window - p0) * G;
      for (int64_t r = 0; r < R && r < past; r++) st[c * Q + r] = -INFINITY;
      for (int64_t r = out < 0 ? 0 : out; j->window > 0 && r < R; r++) st[c * Q + r] = -INFINITY;
    }
    int guard = !cpu_att_tile_finite(vrows, w, D);
    cpu_att_tile_softmax(st, w, m, l, corr, guard);
    cpu_att_tile_pv(st, w, vrows, D, acct, corr, guard);
  }
  for (int64_t r = 0; r < R; r++) l[r] = l[r] > 0 ? 1.0f / l[r] : 0.0f;
  for (int64_t d = 0; d < D; d++)
    for (int64_t r = 0; r < R; r++) acc[r * D + d] = acct[d * Q + r] * l[r];
}

/* Floats of pf_item_tile's buffers. */
static size_t pf_tile_floats(int64_t D) {
  return (size_t)(ATT_TILE_Q * D * 2 + ATT_TILE_Q * PF_KEYS + 3 * ATT_TILE_Q + D + 2 * PF_KEYS * D);
}

typedef void (*pf_item_f32_fn)(const pf_job_t*, const pf_item_t*, int64_t, float*, float*, float*,
                               float*);

/* The f32 item for this CPU: AVX2 + FMA when it has them. */
static pf_item_f32_fn pf_pick(void) {
#ifdef PF_HAVE_AVX2
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) return pf_item_f32_avx2;
#endif
  return pf_item_f32;
}

static void pf_run(void* ctx, int64_t begin, int64_t end) {
  pf_job_t* j = ctx;
  const bp_op_call_t* call = j->call;
  const bp_tensor_desc_t* out = call->outputs[0];
  int wide = out->dtype == BP_DTYPE_F64;
  size_t cs = wide ? sizeof(double) : sizeof(float);
  int64_t maxn = j->tile ? 0 : j->MB * j->BS; /* the tile keeps no whole rows of scores */
  size_t R = (size_t)(j->tile_rows * j->G), D = (size_t)j->D;
  unsigned char* buf = malloc(cs * (2 * R * D + R * (size_t)(maxn > 0 ? maxn : 1) + D));
  float* tmem = j->tile ? aligned_alloc(64, (sizeof(float) * pf_tile_floats(j->D) + 63) / 64 * 64) : NULL;
  if (!buf || (j->tile && !tmem)) {
    free(buf);
    free(tmem);
    atomic_store(&j->failed, 1);
    return;
  }
  void *q = buf, *acc = buf + cs * R * D, *kv = buf + 2 * cs * R * D, *sc = buf + cs * (2 * R * D + D);
  pf_item_f32_fn item = pf_pick();
  size_t oes = bp_dtype_size(out->dtype);
  for (int64_t w = begin; w < end; w++) {
    /* kv head major: a sequence's tiles run back to back on its head's keys and values */
    const pf_item_t* it = &j->items[w % j->nitems];
    int64_t g = w / j->nitems;
    if (wide) pf_item_f64(j, it, g, q, sc, acc, kv);
    else if (j->tile) pf_item_tile(j, it, g, tmem, acc);
    else item(j, it, g, q, sc, acc, kv);
    int64_t q0 = cpu_index_at(call->inputs[4], it->s);
    for (int64_t i = 0; i < it->n; i++) {
      unsigned char* o = cpu_desc_ptr(out) + (size_t)(((q0 + it->i0 + i) * j->H + g * j->G) * j->D) * oes;
      cpu_store[wide ? CPU_KT_F64 : CPU_KT_F32](o, 1, (unsigned char*)acc + cs * (size_t)(i * j->G) * D,
                                                j->G * j->D, out->dtype);
    }
  }
  free(buf);
  free(tmem);
}

/* Offsets in order and within the query rows, lengths within the table,
 * read block ids within the cache; counts the tiles. */
static bp_status_t pf_check(const bp_op_call_t* call, int64_t S, int64_t T, int64_t NB,
                            const pf_job_t* j, int64_t* out_tiles) {
  const bp_tensor_desc_t *qsl = call->inputs[4], *sl = call->inputs[5];
  int64_t tiles = 0;
  if (cpu_index_at(qsl, 0) < 0 || cpu_index_at(qsl, S) > T) {
    return cpu_error(BP_OUT_OF_RANGE, "cpu: paged_attention_prefill: query_start_loc spans "
                                      "[%lld, %lld], outside the query's %lld rows",
                     (long long)cpu_index_at(qsl, 0), (long long)cpu_index_at(qsl, S), (long long)T);
  }
  for (int64_t s = 0; s < S; s++) {
    int64_t qn = cpu_index_at(qsl, s + 1) - cpu_index_at(qsl, s), len = cpu_index_at(sl, s);
    if (qn < 0) {
      return cpu_error(BP_INVALID_ARGUMENT, "cpu: paged_attention_prefill: query_start_loc[%lld] "
                                            "< query_start_loc[%lld] (offsets must not decrease)",
                       (long long)(s + 1), (long long)s);
    }
    if (len < qn || len > j->MB * j->BS) {
      return cpu_error(BP_OUT_OF_RANGE, "cpu: paged_attention_prefill: seq_lens[%lld] = %lld must "
                                        "hold the sequence's %lld new rows and fit the block "
                                        "table's %lld blocks of %lld tokens",
                       (long long)s, (long long)len, (long long)qn, (long long)j->MB, (long long)j->BS);
    }
    if (qn == 0) continue;
    int64_t p0 = len - qn, lo = j->window > 0 && p0 + 1 > j->window ? p0 + 1 - j->window : 0;
    for (int64_t b = lo / j->BS; b * j->BS < len; b++) {
      int64_t blk = cpu_index_at(call->inputs[3], s * j->MB + b);
      if (blk < 0 || blk >= NB) {
        return cpu_error(BP_OUT_OF_RANGE, "cpu: paged_attention_prefill: block_tables[%lld, %lld] "
                                          "= %lld is outside the cache's %lld blocks",
                         (long long)s, (long long)b, (long long)blk, (long long)NB);
      }
    }
    tiles += (qn + j->tile_rows - 1) / j->tile_rows;
  }
  *out_tiles = tiles;
  return BP_OK;
}

static bp_status_t exec_paged_prefill(const bp_op_call_t* call) {
  const bp_paged_attention_attrs_t* a = call->attrs;
  const bp_tensor_desc_t *q = call->inputs[0], *kc = call->inputs[1], *out = call->outputs[0];
  pf_job_t j = {0};
  j.call = call;
  j.H = q->sizes[1], j.D = q->sizes[2];
  j.BS = kc->sizes[1], j.Hkv = kc->sizes[2];
  j.MB = call->inputs[3]->sizes[1];
  j.G = j.H / j.Hkv;
  j.window = a ? a->sliding_window : 0;
  j.scale = a && a->scale > 0.0 ? a->scale : 1.0 / sqrt((double)j.D);
  /* f32 compute with query groups that fit the tile's lanes take it */
  j.tile = out->dtype != BP_DTYPE_F64 && j.G >= 1 && j.G <= ATT_TILE_Q && cpu_att_tile_available();
  j.tile_rows = j.tile ? ATT_TILE_Q / j.G : PF_TILE;
  int64_t S = call->inputs[3]->sizes[0], T = q->sizes[0], tiles = 0;
  bp_status_t st = pf_check(call, S, T, kc->sizes[0], &j, &tiles);
  if (st != BP_OK) return st;
  const bp_tensor_desc_t* qsl = call->inputs[4];
  size_t orow = (size_t)(j.H * j.D) * bp_dtype_size(out->dtype);
  int64_t first = cpu_index_at(qsl, 0), last = cpu_index_at(qsl, S);
  memset(cpu_desc_ptr(out), 0, (size_t)first * orow);
  memset(cpu_desc_ptr(out) + (size_t)last * orow, 0, (size_t)(T - last) * orow);
  if (tiles == 0 || j.D == 0) return BP_OK;
  pf_item_t* items = malloc(sizeof(pf_item_t) * (size_t)tiles);
  if (!items) return cpu_error(BP_RESOURCE_EXHAUSTED, "cpu: paged_attention_prefill: no memory");
  int64_t n = 0;
  for (int64_t s = 0; s < S; s++) {
    int64_t qn = cpu_index_at(qsl, s + 1) - cpu_index_at(qsl, s);
    for (int64_t i0 = 0; i0 < qn; i0 += j.tile_rows) {
      items[n++] = (pf_item_t){s, i0, qn - i0 < j.tile_rows ? qn - i0 : j.tile_rows};
    }
  }
  j.items = items;
  j.nitems = n;
  cpu_parallel_for(n * j.Hkv, 1, pf_run, &j);
  free(items);
  if (atomic_load(&j.failed)) {
    return cpu_error(BP_RESOURCE_EXHAUSTED, "cpu: paged_attention_prefill: no memory for %lld "
                                            "scores", (long long)(j.tile_rows * j.G * (j.tile ? PF_KEYS : j.MB * j.BS)));
  }
  return BP_OK;
}

/* ---- family -------------------------------------------------------------------- */

static bp_status_t exec_paged_ext(const bp_op_call_t* call) {
  bp_status_t st = cpu_call_require_dense(call);
  if (st != BP_OK) return st;
  switch (call->op_id) {
    case BP_OP_merge_attn_states: return exec_merge_attn_states(call);
    case BP_OP_kv_cache_copy_blocks: return exec_kv_cache_copy_blocks(call);
    default: return exec_paged_prefill(call);
  }
}

static int supported_paged_ext(const bp_op_call_t* call, char* msg, size_t cap) {
  (void)call, (void)msg, (void)cap;
  return BP_SUPPORT_OK;
}

const cpu_family_t cpu_family_paged_ext = {
    "paged_ext",
    CPU_FAMILY_OPS(BP_OP_merge_attn_states, BP_OP_kv_cache_copy_blocks,
                   BP_OP_paged_attention_prefill),
    exec_paged_ext, supported_paged_ext, 0,
};
