/* backplane CPU plugin: shared pieces of the attention kernel family
 * (cpu_attention.c: the family, scaled_dot_product_attention;
 * cpu_attention_linear.c: linear, rotary_embedding, cdist, pdist). */
#ifndef BP_CPU_ATTENTION_H_
#define BP_CPU_ATTENTION_H_

#include "cpu_kernels.h"

/* Batch dims: an output's leading dims (all but its last `tail`), over
 * which operands broadcast. */
typedef struct att_batch {
  uint32_t rank;
  int64_t sizes[BP_MAX_RANK];
  int64_t count; /* product of sizes */
} att_batch_t;

static inline void att_batch_of(const bp_tensor_desc_t* out, uint32_t tail, att_batch_t* b) {
  b->rank = out->rank >= tail ? out->rank - tail : 0;
  b->count = 1;
  for (uint32_t d = 0; d < b->rank; d++) {
    b->sizes[d] = out->sizes[d];
    b->count *= out->sizes[d];
  }
}

/* Nonzero when the leading rank - tail dims of t broadcast (right-aligned;
 * size 1 expands) to the batch dims; at batch dim `gdim` (-1: none) t's size
 * may also divide the batch size (grouped-query heads). */
static inline int att_batch_fits(const bp_tensor_desc_t* t, uint32_t tail, const att_batch_t* b,
                                 int gdim) {
  if (t->rank < tail) return 0;
  uint32_t tb = t->rank - tail;
  if (tb > b->rank) return 0;
  for (uint32_t d = 0; d < tb; d++) {
    uint32_t bd = d + b->rank - tb;
    int64_t s = t->sizes[d], want = b->sizes[bd];
    int ok = s == want || s == 1 || ((int)bd == gdim && s > 0 && want % s == 0);
    if (!ok) return 0;
  }
  return 1;
}

/* Element offset of batch index `i` (row-major over b) in t, whose leading
 * rank - tail dims align right with b's (see att_batch_fits). */
static inline int64_t att_batch_offset(const bp_tensor_desc_t* t, uint32_t tail,
                                       const att_batch_t* b, int64_t i, int gdim) {
  uint32_t tb = t->rank > tail ? t->rank - tail : 0;
  int64_t off = 0;
  for (uint32_t d = b->rank; d-- > 0;) {
    int64_t k = i % b->sizes[d];
    i /= b->sizes[d];
    if (d + tb < b->rank) continue;
    uint32_t td = d + tb - b->rank;
    int64_t s = t->sizes[td];
    if (s == 1) continue;
    if ((int)d == gdim && s != b->sizes[d]) k /= b->sizes[d] / s;
    off += k * t->strides[td];
  }
  return off;
}

/* Bytes from the start of t's data to element offset `off`. */
static inline unsigned char* att_at(const bp_tensor_desc_t* t, int64_t off) {
  return cpu_desc_ptr(t) + off * (int64_t)bp_dtype_size(t->dtype);
}

/* The f32 query-block tile of scaled_dot_product_attention in AVX-512
 * (cpu_attention_tile.c): ATT_TILE_Q queries per item, buffers 64-byte
 * aligned, laid out query-minor (qt[e * ATT_TILE_Q + r], st[c * ATT_TILE_Q
 * + r], acct[d * ATT_TILE_Q + r]); keys and values given as one row
 * pointer per key (k[c], v[c]: unit column stride, anywhere: a paged cache's
 * blocks too). Available: this build has the kernels and the CPU runs
 * AVX-512 under the BP_CPU_ISA cap. */
#define ATT_TILE_Q 64
CPU_HIDDEN int cpu_att_tile_available(void);
/* st rows 0..w: the scores of keys k[0..w) against qt (E long). */
CPU_HIDDEN void cpu_att_tile_scores(const float* qt, int64_t E, const float* const* k, int64_t w, float* st);
/* The online-softmax step over st rows 0..w (m, l, corr: ATT_TILE_Q each);
 * with `mark`, the weights of masked (-inf) scores become -0.0. */
CPU_HIDDEN void cpu_att_tile_softmax(float* st, int64_t w, float* m, float* l, float* corr, int mark);
/* Nonzero when the rows v[0..w) (n wide) hold no inf or NaN. */
CPU_HIDDEN int cpu_att_tile_finite(const float* const* v, int64_t w, int64_t n);
/* acct (Ev rows) = acct * corr + the weights p (rows 0..w) times the rows
 * v[0..w); `guarded`: weights of -0.0 take no part (v holds an inf or NaN). */
CPU_HIDDEN void cpu_att_tile_pv(const float* p, int64_t w, const float* const* v, int64_t Ev, float* acct,
                                const float* corr, int guarded);

/* rows[x] (x < w): the tile's key or value rows, base + x * rs elements of t
 * (n long, t's last stride between elements) as f32: in place when t is f32
 * with unit column stride, else converted into `tile` (n apart). */
static inline void att_rows_f32(const bp_tensor_desc_t* t, const unsigned char* base, int64_t rs, int64_t w,
                                int64_t n, float* tile, const float** rows) {
  const int64_t es = (int64_t)bp_dtype_size(t->dtype), cs = t->strides[t->rank - 1];
  for (int64_t x = 0; x < w; x++) {
    if (t->dtype == BP_DTYPE_F32 && cs == 1) {
      rows[x] = (const float*)(const void*)(base + x * rs * es);
    } else {
      cpu_load[CPU_KT_F32](tile + x * n, base + x * rs * es, cs, n, t->dtype);
      rows[x] = tile + x * n;
    }
  }
}

/* Kernels of the family; calls validated by cpu_launch_op. */
CPU_HIDDEN bp_status_t cpu_att_linear(const bp_op_call_t* call);
CPU_HIDDEN bp_status_t cpu_att_rotary(const bp_op_call_t* call);
CPU_HIDDEN bp_status_t cpu_att_cdist(const bp_op_call_t* call);
CPU_HIDDEN bp_status_t cpu_att_pdist(const bp_op_call_t* call);

#endif /* BP_CPU_ATTENTION_H_ */
