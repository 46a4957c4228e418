/* The reference registry: one entry per op id, generated from ops.def; the
 * ops that have a reference are listed once below, grouped by family
 * function, accuracy class and flags. Ops not listed have no reference yet:
 * they produce no cases and are reported separately.
 */
#include <stdlib.h>
#include <string.h>

#include "ref.h"

#define OPS BPC_OPS
#define SZ BPC_OPF_SIGNED_ZERO

/* The families whose cases come from cases.c's built-in generators. */
static const bpc_ref_group_t k_core_groups[] = {
    {bpc_ref_unary, BPC_ACC_EXACT, SZ, OPS(BP_OP_abs, BP_OP_neg, BP_OP_sign), NULL, NULL},
    {bpc_ref_unary, BPC_ACC_EXACT, 0,
     OPS(BP_OP_ceil, BP_OP_floor, BP_OP_relu, BP_OP_round, BP_OP_trunc, BP_OP_bitwise_not,
         BP_OP_logical_not, BP_OP_isinf, BP_OP_isnan, BP_OP_clamp, BP_OP_hardtanh), NULL, NULL},
    {bpc_ref_unary, BPC_ACC_TRANS, 0,
     OPS(BP_OP_acos, BP_OP_acosh, BP_OP_asin, BP_OP_asinh, BP_OP_atan, BP_OP_atanh, BP_OP_cos,
         BP_OP_cosh, BP_OP_exp, BP_OP_expm1, BP_OP_log, BP_OP_log10, BP_OP_log1p, BP_OP_log2,
         BP_OP_rsqrt, BP_OP_sin, BP_OP_sinh, BP_OP_tan, BP_OP_tanh), NULL, NULL},
    {bpc_ref_unary, BPC_ACC_TRANS_HARD, 0,
     OPS(BP_OP_erf, BP_OP_sigmoid, BP_OP_elu, BP_OP_gelu, BP_OP_silu), NULL, NULL},
    {bpc_ref_unary, BPC_ACC_DIVSQRT, 0, OPS(BP_OP_reciprocal, BP_OP_sqrt, BP_OP_leaky_relu), NULL, NULL},
    {bpc_ref_clamp_tensor, BPC_ACC_EXACT, 0, OPS(BP_OP_clamp_tensor), NULL, NULL},
    {bpc_ref_binary, BPC_ACC_CR, 0, OPS(BP_OP_add, BP_OP_sub, BP_OP_mul), NULL, NULL},
    {bpc_ref_binary, BPC_ACC_DIVSQRT, 0, OPS(BP_OP_div, BP_OP_remainder), NULL, NULL},
    {bpc_ref_binary, BPC_ACC_TRANS, 0, OPS(BP_OP_atan2), NULL, NULL},
    {bpc_ref_binary, BPC_ACC_TRANS_HARD, 0, OPS(BP_OP_pow), NULL, NULL},
    {bpc_ref_binary, BPC_ACC_EXACT, 0,
     OPS(BP_OP_fmod, BP_OP_maximum, BP_OP_minimum, BP_OP_bitwise_and, BP_OP_bitwise_or,
         BP_OP_bitwise_xor, BP_OP_logical_and, BP_OP_logical_or, BP_OP_logical_xor, BP_OP_eq,
         BP_OP_ne, BP_OP_lt, BP_OP_le, BP_OP_gt, BP_OP_ge), NULL, NULL},
    {bpc_ref_where, BPC_ACC_EXACT, SZ, OPS(BP_OP_where), NULL, NULL},
    {bpc_ref_sum, BPC_ACC_REDUCE, 0, OPS(BP_OP_sum, BP_OP_mean, BP_OP_prod), NULL, NULL},
    {bpc_ref_sum, BPC_ACC_EXACT, 0, OPS(BP_OP_any), NULL, NULL},
    {bpc_ref_amax, BPC_ACC_EXACT, 0, OPS(BP_OP_amax, BP_OP_amin), NULL, NULL},
    {bpc_ref_argmax, BPC_ACC_EXACT, 0, OPS(BP_OP_argmax, BP_OP_argmin), NULL, NULL},
    {bpc_ref_matmul, BPC_ACC_REDUCE, 0, OPS(BP_OP_mm, BP_OP_bmm, BP_OP_addmm), NULL, NULL},
    {bpc_ref_softmax, BPC_ACC_REDUCE, 0, OPS(BP_OP_softmax, BP_OP_log_softmax), NULL, NULL},
    {bpc_ref_to_copy, BPC_ACC_EXACT, SZ, OPS(BP_OP_to_copy), NULL, NULL},
    {bpc_ref_copy, BPC_ACC_EXACT, SZ, OPS(BP_OP_copy), NULL, NULL},
    {bpc_ref_clone, BPC_ACC_EXACT, SZ, OPS(BP_OP_clone), NULL, NULL},
    {bpc_ref_cat, BPC_ACC_EXACT, SZ, OPS(BP_OP_cat), NULL, NULL},
    {bpc_ref_fill, BPC_ACC_EXACT, SZ, OPS(BP_OP_fill), NULL, NULL},
    {bpc_ref_arange, BPC_ACC_DIVSQRT, 0, OPS(BP_OP_arange), NULL, NULL},
};
#undef SZ
#undef OPS

/* Every family; an op belongs to at most one group. */
#define BPC_REF_FAMILIES(X) X(reduce_ext) X(conv) X(pool) X(norm) X(attention) X(fft) X(index) \
  X(scatter) X(shape) X(random) X(fused_ew) X(glu) X(quant) X(serving) \
  X(fused_quant) X(logits) X(moe) X(paged) X(serving_ext) X(group_quant)
#define BPC__FAMILY_DECL(f) extern const bpc_ref_family_t bpc_ref_family_##f;
BPC_REF_FAMILIES(BPC__FAMILY_DECL)
#undef BPC__FAMILY_DECL

static const bpc_ref_family_t k_core_family = BPC_FAMILY(core, k_core_groups);
static const bpc_ref_family_t* const k_families[] = {
    &k_core_family,
#define BPC__FAMILY_PTR(f) &bpc_ref_family_##f,
    BPC_REF_FAMILIES(BPC__FAMILY_PTR)
#undef BPC__FAMILY_PTR
};

static bpc_op_entry_t g_table[BP_OP_COUNT];
static int g_ready;

/* Filled on first use; plain data, so two racing initialisations write the
 * same bytes (the suite itself is single-threaded). */
static void registry_init(void) {
  if (g_ready) return;
  memset(g_table, 0, sizeof g_table);
#define BP_OP(id, name_, cat, fam, ins, outs, attrs, rule_, aten) \
  g_table[id].op_id = id;                                    \
  g_table[id].name = #name_;                                 \
  g_table[id].category = #cat;                               \
  g_table[id].rule = #rule_;
#include "backplane/ops.def"
#undef BP_OP
  for (size_t f = 0; f < sizeof k_families / sizeof k_families[0]; f++) {
    for (uint32_t g = 0; g < k_families[f]->count; g++) {
      const bpc_ref_group_t* grp = &k_families[f]->groups[g];
      for (uint32_t i = 0; i < grp->count; i++) {
        if (bp_op_family(grp->ops[i]) == BP_OP_FAMILY_INVALID) continue;
        bpc_op_entry_t* e = &g_table[grp->ops[i]];
        e->reference = grp->reference;
        e->accuracy = grp->accuracy;
        e->flags = grp->flags;
        e->generate = grp->generate;
        e->check = grp->check;
      }
    }
  }
  g_ready = 1;
}

const bpc_op_entry_t* bpc_op_entry(uint32_t op_id) {
  registry_init();
  if (bp_op_family(op_id) == BP_OP_FAMILY_INVALID) return NULL;
  return &g_table[op_id];
}

uint32_t bpc_op_count(void) { return BP_OP_COUNT; }

uint32_t bpc_op_find(const char* name) {
  registry_init();
  for (uint32_t id = 1; id < BP_OP_COUNT; id++) {
    if (g_table[id].name && strcmp(g_table[id].name, name) == 0) return id;
  }
  return BP_OP_INVALID;
}

bp_status_t bpc_reference_run(const bpc_case_t* c, const bpc_host_tensor_t* in,
                              bpc_ref_result_t* res) {
  memset(res, 0, sizeof *res);
  const bpc_op_entry_t* e = bpc_op_entry(c->op_id);
  if (!e || !e->reference) return bpc_ref_reject(res, "no reference for op %u", c->op_id);
  bp_status_t st = e->reference(c, in, res);
  if (st != BP_OK) {
    bpc_ref_result_free(res);
    if (res->message[0] == '\0') bpc_ref_reject(res, "reference failed (%d)", (int)st);
  }
  return st;
}

void bpc_ref_result_free(bpc_ref_result_t* res) {
  for (uint32_t k = 0; k < BPC_MAX_OUTPUTS; k++) bpc_expected_free(&res->out[k]);
  res->num_outputs = 0;
}
