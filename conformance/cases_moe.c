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

#define COUNT(a) (sizeof(a) / sizeof((a)[0]))

void bpc_gen_moe_permute(bpc_gen_t* g);
void bpc_gen_moe_unpermute(bpc_gen_t* g);
void bpc_gen_grouped_mm(bpc_gen_t* g);

static const uint32_t kFloats[] = {BP_DTYPE_F32, BP_DTYPE_F64, BP_DTYPE_F16, BP_DTYPE_BF16};

/* ---- moe_permute ----------------------------------------------------------------- */

void bpc_gen_moe_permute(bpc_gen_t* g) {
  static const struct {
    const char* axis;
    int64_t T, H, k, E, id_lo, id_hi;
    uint32_t ids, values;
    int quick;
  } specs[] = {
      {"top2", 33, 24, 2, 8, 0, 7, BP_DTYPE_I64, BPC_V_RANDOM, 1},
      {"top1_i32", 17, 9, 1, 4, 0, 3, BP_DTYPE_I32, BPC_V_RANDOM, 0},
      {"top8_of_64", 9, 16, 8, 64, 0, 63, BP_DTYPE_I64, BPC_V_RANDOM, 1},
      {"not_local", 20, 7, 2, 6, -1, 6, BP_DTYPE_I32, BPC_V_RANDOM, 1},
      {"one_token", 1, 31, 4, 8, 0, 7, BP_DTYPE_I64, BPC_V_RANDOM, 0},
      {"no_tokens", 0, 8, 2, 4, 0, 3, BP_DTYPE_I64, BPC_V_RANDOM, 0},
      {"special", 12, 22, 2, 5, 0, 4, BP_DTYPE_I64, BPC_V_SPECIAL | BPC_V_NONFINITE, 0},
  };
  for (size_t t = 0; t < COUNT(kFloats); t++) {
    for (size_t k = 0; k < COUNT(specs); k++) {
      if (g->quick && !specs[k].quick) continue;
      bpc_case_t* c = bpc_gen_new(g, bpc_dtype_name(kFloats[t]), specs[k].axis, 0);
      if (!c) return;
      c->num_inputs = 2;
      c->num_outputs = 3;
      bpc_operand_set(&c->in[0], kFloats[t], S2(specs[k].T, specs[k].H), 0, specs[k].values, 0, 0);
      bpc_operand_set(&c->in[1], specs[k].ids, S2(specs[k].T, specs[k].k), 0, BPC_V_RANDOM,
                      (double)specs[k].id_lo, (double)specs[k].id_hi + 0.5);
      for (int o = 0; o < 3; o++) bpc_operand_set(&c->out[o], BP_DTYPE_INVALID, S0(), 0, 0, 0, 0);
      c->has_attrs = 1;
      bp_moe_permute_attrs_t* a = &c->attrs.moe_permute;
      memset(a, 0, sizeof *a);
      a->struct_size = sizeof *a;
      a->num_experts = (uint32_t)specs[k].E;
    }
  }
}

/* ---- moe_unpermute --------------------------------------------------------------- */

void bpc_gen_moe_unpermute(bpc_gen_t* g) {
  static const struct {
    const char* axis;
    int64_t T, k, H;
    int weights, f32_weights, skipped, quick;
  } specs[] = {
      {"weighted", 21, 2, 24, 1, 0, 0, 1},
      {"sum", 13, 4, 17, 0, 0, 0, 0},
      {"f32_weights", 9, 8, 33, 1, 1, 0, 1},
      {"skipped", 16, 2, 8, 1, 0, 1, 1},
      {"one_token", 1, 6, 40, 1, 0, 0, 0},
  };
  for (size_t t = 0; t < COUNT(kFloats); t++) {
    for (size_t k = 0; k < COUNT(specs); k++) {
      if (g->quick && !specs[k].quick) continue;
      if (specs[k].f32_weights && kFloats[t] == BP_DTYPE_F32) continue;
      bpc_case_t* c = bpc_gen_new(g, bpc_dtype_name(kFloats[t]), specs[k].axis, 0);
      if (!c) return;
      int64_t T = specs[k].T, K = specs[k].k, N = T * K;
      c->num_inputs = 3;
      c->num_outputs = 1;
      bpc_operand_set(&c->in[0], kFloats[t], S2(N, specs[k].H), 0, BPC_V_RANDOM, -4, 4);
      /* a permutation of the N rows; "skipped": up to 3 rows of -1 (not local) */
      bpc_operand_set(&c->in[1], BP_DTYPE_I64, S2(T, K), 0, BPC_V_DISTINCT,
                      specs[k].skipped ? -3 : 0, (double)(N - 1));
      if (specs[k].weights) {
        bpc_operand_set(&c->in[2], specs[k].f32_weights ? BP_DTYPE_F32 : kFloats[t], S2(T, K), 0,
                        BPC_V_RANDOM, 0, 1);
      } else {
        bpc_operand_set(&c->in[2], BP_DTYPE_INVALID, S0(), 0, 0, 0, 0);
      }
      bpc_operand_set(&c->out[0], BP_DTYPE_INVALID, S0(), 0, 0, 0, 0);
    }
  }
}

/* ---- grouped_mm ------------------------------------------------------------------ */

static bpc_case_t* gmm_case(bpc_gen_t* g, uint32_t dt, const char* axis, int64_t M, int64_t K, int64_t N,
                     int64_t E, int64_t first, int64_t last, uint32_t offs, int bias) {
  bpc_case_t* c = bpc_gen_new(g, bpc_dtype_name(dt), axis, 0);
  if (!c) return NULL;
  c->num_inputs = 6;
  c->num_outputs = 1;
  bpc_operand_set(&c->in[0], dt, S2(M, K), 0, BPC_V_RANDOM, -2, 2);
  bpc_operand_set(&c->in[1], dt, S3(E, N, K), 0, BPC_V_RANDOM, -1, 1);
  bpc_operand_set(&c->in[2], offs, S1(E + 1), 0, BPC_V_OFFSETS, (double)first, (double)last);
  if (bias) bpc_operand_set(&c->in[3], dt, S2(E, N), 0, BPC_V_RANDOM, -1, 1);
  else bpc_operand_set(&c->in[3], BP_DTYPE_INVALID, S0(), 0, 0, 0, 0);
  for (int i = 4; i < 6; i++) bpc_operand_set(&c->in[i], BP_DTYPE_INVALID, S0(), 0, 0, 0, 0);
  bpc_operand_set(&c->out[0], BP_DTYPE_INVALID, S0(), 0, 0, 0, 0);
  c->has_attrs = 1;
  memset(&c->attrs.quantize, 0, sizeof c->attrs.quantize);
  c->attrs.quantize.struct_size = sizeof c->attrs.quantize;
  c->attrs.quantize.axis = -1;
  return c;
}

void bpc_gen_grouped_mm(bpc_gen_t* g) {
  static const struct {
    const char* axis;
    int64_t M, K, N, E, first, last;
    uint32_t offs;
    int bias, quick;
  } specs[] = {
      {"experts8", 70, 32, 24, 8, 0, 70, BP_DTYPE_I64, 1, 1},
      {"no_bias_i32", 45, 17, 13, 4, 0, 45, BP_DTYPE_I32, 0, 1},
      {"rows_outside", 40, 16, 9, 3, 5, 31, BP_DTYPE_I64, 1, 1},
      {"one_expert", 19, 33, 7, 1, 0, 19, BP_DTYPE_I32, 1, 0},
      {"many_empty", 6, 8, 5, 16, 0, 6, BP_DTYPE_I64, 0, 0},
      {"long_k", 12, 300, 5, 3, 0, 12, BP_DTYPE_I64, 1, 0},
      {"no_rows", 0, 8, 4, 2, 0, 0, BP_DTYPE_I64, 1, 0},
  };
  /* weight-only: qdtype, groups (0: per channel), zero point dtype */
  static const struct {
    const char* axis;
    int64_t M, K, N, E, first, last;
    uint32_t qdtype;
    int64_t block;
    uint32_t zp;
    int bias, quick;
  } qspecs[] = {
      {"int4_g32", 30, 64, 12, 4, 0, 30, BP_DTYPE_I4, 32, BP_DTYPE_INVALID, 1, 1},
      {"uint4_zp_tail", 17, 40, 9, 3, 2, 15, BP_DTYPE_U4, 32, BP_DTYPE_U8, 0, 1},
      {"int8_channel", 20, 24, 7, 5, 0, 20, BP_DTYPE_I8, 0, BP_DTYPE_INVALID, 1, 0},
      {"uint8_zp_g16", 11, 48, 6, 2, 0, 11, BP_DTYPE_U8, 16, BP_DTYPE_U8, 1, 0},
  };
  for (size_t t = 0; t < COUNT(kFloats); t++) {
    for (size_t k = 0; k < COUNT(specs); k++) {
      if (g->quick && !specs[k].quick) continue;
      if (!gmm_case(g, kFloats[t], specs[k].axis, specs[k].M, specs[k].K, specs[k].N, specs[k].E,
                    specs[k].first, specs[k].last, specs[k].offs, specs[k].bias)) {
        return;
      }
    }
    if (kFloats[t] == BP_DTYPE_F64) continue; /* weight-only takes f32, f16, bf16 */
    for (size_t k = 0; k < COUNT(qspecs); k++) {
      if (g->quick && !qspecs[k].quick) continue;
      bpc_case_t* c = gmm_case(g, kFloats[t], qspecs[k].axis, qspecs[k].M, qspecs[k].K, qspecs[k].N,
                               qspecs[k].E, qspecs[k].first, qspecs[k].last, BP_DTYPE_I64,
                               qspecs[k].bias);
      if (!c) return;
      int four = qspecs[k].qdtype == BP_DTYPE_I4 || qspecs[k].qdtype == BP_DTYPE_U4;
      int64_t E = qspecs[k].E, N = qspecs[k].N, K = qspecs[k].K;
      int64_t G = qspecs[k].block > 0 ? (K + qspecs[k].block - 1) / qspecs[k].block : 1;
      uint32_t stored = four ? BP_DTYPE_U8 : qspecs[k].qdtype;
      bpc_operand_set(&c->in[1], stored, S3(E, N, four ? K / 2 : K), 0, BPC_V_RANDOM, 0, 0);
      bpc_operand_set(&c->in[4], BP_DTYPE_F32, S3(E, N, G), 0, BPC_V_RANDOM, 0.01, 0.1);
      if (qspecs[k].zp != BP_DTYPE_INVALID) {
        bpc_operand_set(&c->in[5], qspecs[k].zp, S3(E, N, G), 0, BPC_V_RANDOM, 0, four ? 15.5 : 255.5);
      }
      c->attrs.quantize.qdtype = qspecs[k].qdtype;
      c->attrs.quantize.block_size = qspecs[k].block;
    }
  }
}
