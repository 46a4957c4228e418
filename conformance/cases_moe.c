/* Case generators of the mixture-of-experts dispatch ops.
 *
 * moe_permute: top-1, top-2 and top-8 of 64 experts, ids not local to this
 *   rank (-1 and E, expert parallelism), an expert with no token (more
 *   experts than slots), one token and none, i32 and i64 ids, special
 *   hidden values (signed zeros, NaN and inf move unchanged).
 * moe_unpermute: with and without routing weights, weights of another
 *   dtype (f32 for half rows), skipped slots (inverse -1), one token.
 * grouped_mm: empty experts, rows outside every expert (zero), one expert,
 *   odd K and N tails, with and without bias, i32 and i64 offsets; the
 *   weight-only forms: int4 in groups of 32, uint4 with u8 zero points and a
 *   tail group, int8 per channel, uint8 with zero points in groups of 16.
 */
#include <string.h>

#include "cases_internal.h"

void bpc_gen_moe_permute(bpc_gen_t* g);
void bpc_gen_moe_unpermute(bpc_gen_t* g);
void bpc_gen_grouped_mm(bpc_gen_t* g);

/* ---- moe_permute ----------------------------------------------------------------- */

typedef struct perm_row {
  bpc_row_t row;
  int64_t T, H, k, E, id_lo, id_hi;
  uint32_t ids, values;
} perm_row_t;

static void perm_fill(bpc_case_t* c, const void* row, const bpc_table_at_t* at) {
  const perm_row_t* r = row;
  bpc_operand_set(&c->in[0], at->dtype, S2(r->T, r->H), 0, r->values, 0, 0);
  bpc_operand_set(&c->in[1], r->ids, S2(r->T, r->k), 0, BPC_V_RANDOM, (double)r->id_lo, (double)r->id_hi + 0.5);
  BPC_CASE_ATTRS(c, moe_permute)->num_experts = (uint32_t)r->E;
}

void bpc_gen_moe_permute(bpc_gen_t* g) {
  static const perm_row_t rows[] = {
      {{"top2", 1}, 33, 24, 2, 8, 0, 7, BP_DTYPE_I64, BPC_V_RANDOM},
      {{"top1_i32", 0}, 17, 9, 1, 4, 0, 3, BP_DTYPE_I32, BPC_V_RANDOM},
      {{"top8_of_64", 1}, 9, 16, 8, 64, 0, 63, BP_DTYPE_I64, BPC_V_RANDOM},
      {{"not_local", 1}, 20, 7, 2, 6, -1, 6, BP_DTYPE_I32, BPC_V_RANDOM},
      {{"one_token", 0}, 1, 31, 4, 8, 0, 7, BP_DTYPE_I64, BPC_V_RANDOM},
      {{"no_tokens", 0}, 0, 8, 2, 4, 0, 3, BP_DTYPE_I64, BPC_V_RANDOM},
      {{"special", 0}, 12, 22, 2, 5, 0, 4, BP_DTYPE_I64, BPC_V_SPECIAL | BPC_V_NONFINITE},
  };
  bpc_gen_table(g, &(bpc_table_t){BPC_ROWS(rows), BPC_FLOAT_DTYPES, .num_inputs = 2, .num_outputs = 3,
                                  .fill = perm_fill});
}

/* ---- moe_unpermute --------------------------------------------------------------- */

typedef struct unperm_row {
  bpc_row_t row;
  int64_t T, k, H;
  int weights, f32_weights, skipped;
} unperm_row_t;

/* f32 weights are the case's own dtype for f32 rows: no case. */
static int unperm_skip(const void* row, uint32_t dtype) {
  return ((const unperm_row_t*)row)->f32_weights && dtype == BP_DTYPE_F32;
}

static void unperm_fill(bpc_case_t* c, const void* row, const bpc_table_at_t* at) {
  const unperm_row_t* r = row;
  int64_t T = r->T, K = r->k, N = T * K;
  bpc_operand_set(&c->in[0], at->dtype, S2(N, r->H), 0, BPC_V_RANDOM, -4, 4);
  /* a permutation of the N rows; "skipped": up to 3 rows of -1 (not local) */
  bpc_operand_set(&c->in[1], BP_DTYPE_I64, S2(T, K), 0, BPC_V_DISTINCT, r->skipped ? -3 : 0, (double)(N - 1));
  if (r->weights)
    bpc_operand_set(&c->in[2], r->f32_weights ? BP_DTYPE_F32 : at->dtype, S2(T, K), 0, BPC_V_RANDOM, 0, 1);
  else
    bpc_operand_set(&c->in[2], BP_DTYPE_INVALID, S0(), 0, 0, 0, 0);
}

void bpc_gen_moe_unpermute(bpc_gen_t* g) {
  static const unperm_row_t rows[] = {
      {{"weighted", 1}, 21, 2, 24, 1, 0, 0},
      {{"sum", 0}, 13, 4, 17, 0, 0, 0},
      {{"f32_weights", 1}, 9, 8, 33, 1, 1, 0},
      {{"skipped", 1}, 16, 2, 8, 1, 0, 1},
      {{"one_token", 0}, 1, 6, 40, 1, 0, 0},
  };
  bpc_gen_table(g, &(bpc_table_t){BPC_ROWS(rows), BPC_FLOAT_DTYPES, .row_skip = unperm_skip, .num_inputs = 3,
                                  .num_outputs = 1, .fill = unperm_fill});
}

/* ---- grouped_mm ------------------------------------------------------------------ */

typedef struct gmm_row {
  bpc_row_t row;
  int64_t M, K, N, E, first, last;
  uint32_t offs;
  int bias;
} gmm_row_t;

/* weight-only: qdtype, groups of `block` (0: per channel), zero point dtype */
typedef struct qgmm_row {
  gmm_row_t mm;
  uint32_t qdtype;
  int64_t block;
  uint32_t zp;
} qgmm_row_t;

static void gmm_fill(bpc_case_t* c, const void* row, const bpc_table_at_t* at) {
  const gmm_row_t* r = row;
  uint32_t dt = at->dtype;
  bpc_operand_set(&c->in[0], dt, S2(r->M, r->K), 0, BPC_V_RANDOM, -2, 2);
  bpc_operand_set(&c->in[1], dt, S3(r->E, r->N, r->K), 0, BPC_V_RANDOM, -1, 1);
  bpc_operand_set(&c->in[2], r->offs, S1(r->E + 1), 0, BPC_V_OFFSETS, (double)r->first, (double)r->last);
  if (r->bias) bpc_operand_set(&c->in[3], dt, S2(r->E, r->N), 0, BPC_V_RANDOM, -1, 1);
  else bpc_operand_set(&c->in[3], BP_DTYPE_INVALID, S0(), 0, 0, 0, 0);
  for (int i = 4; i < 6; i++) bpc_operand_set(&c->in[i], BP_DTYPE_INVALID, S0(), 0, 0, 0, 0);
  BPC_CASE_ATTRS(c, quantize)->axis = -1;
}

static void qgmm_fill(bpc_case_t* c, const void* row, const bpc_table_at_t* at) {
  const qgmm_row_t* r = row;
  gmm_fill(c, &r->mm, at);
  int four = r->qdtype == BP_DTYPE_I4 || r->qdtype == BP_DTYPE_U4;
  int64_t E = r->mm.E, N = r->mm.N, K = r->mm.K;
  int64_t G = r->block > 0 ? (K + r->block - 1) / r->block : 1;
  uint32_t stored = four ? BP_DTYPE_U8 : r->qdtype;
  bpc_operand_set(&c->in[1], stored, S3(E, N, four ? K / 2 : K), 0, BPC_V_RANDOM, 0, 0);
  bpc_operand_set(&c->in[4], BP_DTYPE_F32, S3(E, N, G), 0, BPC_V_RANDOM, 0.01, 0.1);
  if (r->zp != BP_DTYPE_INVALID) bpc_operand_set(&c->in[5], r->zp, S3(E, N, G), 0, BPC_V_RANDOM, 0, four ? 15.5 : 255.5);
  c->attrs.quantize.qdtype = r->qdtype;
  c->attrs.quantize.block_size = r->block;
}

void bpc_gen_grouped_mm(bpc_gen_t* g) {
  static const gmm_row_t rows[] = {
      {{"experts8", 1}, 70, 32, 24, 8, 0, 70, BP_DTYPE_I64, 1},
      {{"no_bias_i32", 1}, 45, 17, 13, 4, 0, 45, BP_DTYPE_I32, 0},
      {{"rows_outside", 1}, 40, 16, 9, 3, 5, 31, BP_DTYPE_I64, 1},
      {{"one_expert", 0}, 19, 33, 7, 1, 0, 19, BP_DTYPE_I32, 1},
      {{"many_empty", 0}, 6, 8, 5, 16, 0, 6, BP_DTYPE_I64, 0},
      {{"long_k", 0}, 12, 300, 5, 3, 0, 12, BP_DTYPE_I64, 1},
      {{"no_rows", 0}, 0, 8, 4, 2, 0, 0, BP_DTYPE_I64, 1},
  };
  static const qgmm_row_t qrows[] = {
      {{{"int4_g32", 1}, 30, 64, 12, 4, 0, 30, BP_DTYPE_I64, 1}, BP_DTYPE_I4, 32, BP_DTYPE_INVALID},
      {{{"uint4_zp_tail", 1}, 17, 40, 9, 3, 2, 15, BP_DTYPE_I64, 0}, BP_DTYPE_U4, 32, BP_DTYPE_U8},
      {{{"int8_channel", 0}, 20, 24, 7, 5, 0, 20, BP_DTYPE_I64, 1}, BP_DTYPE_I8, 0, BP_DTYPE_INVALID},
      {{{"uint8_zp_g16", 0}, 11, 48, 6, 2, 0, 11, BP_DTYPE_I64, 1}, BP_DTYPE_U8, 16, BP_DTYPE_U8},
  };
  /* per dtype: the dense cases, then the weight-only ones (f32, f16, bf16) */
  for (size_t t = 0; t < BPC_NUM_FLOAT_DTYPES; t++) {
    const uint32_t* dt = &bpc_float_dtypes[t];
    bpc_gen_table(g, &(bpc_table_t){BPC_ROWS(rows), .dtypes = dt, .num_dtypes = 1, .num_inputs = 6,
                                    .num_outputs = 1, .fill = gmm_fill});
    if (*dt == BP_DTYPE_F64) continue;
    bpc_gen_table(g, &(bpc_table_t){BPC_ROWS(qrows), .dtypes = dt, .num_dtypes = 1, .num_inputs = 6,
                                    .num_outputs = 1, .fill = qgmm_fill});
  }
}
