/* The reference registry: one entry per op id, generated from ops.def; the
 * ops that have a reference are listed once below with their family
 * function, accuracy class and flags. Ops not listed have no reference yet:
 * they produce no cases and are reported separately.
 */
#include <stdlib.h>
#include <string.h>

#include "ref.h"

/* X(op, reference, accuracy, flags) */
#define BPC_REFERENCES(X)                                                  \
  X(abs, bpc_ref_unary, EXACT, SZ)                                         \
  X(acos, bpc_ref_unary, TRANS, 0)                                         \
  X(acosh, bpc_ref_unary, TRANS, 0)                                        \
  X(asin, bpc_ref_unary, TRANS, 0)                                         \
  X(asinh, bpc_ref_unary, TRANS, 0)                                        \
  X(atan, bpc_ref_unary, TRANS, 0)                                         \
  X(atanh, bpc_ref_unary, TRANS, 0)                                        \
  X(ceil, bpc_ref_unary, EXACT, 0)                                         \
  X(cos, bpc_ref_unary, TRANS, 0)                                          \
  X(cosh, bpc_ref_unary, TRANS, 0)                                         \
  X(erf, bpc_ref_unary, TRANS_HARD, 0)                                     \
  X(exp, bpc_ref_unary, TRANS, 0)                                          \
  X(expm1, bpc_ref_unary, TRANS, 0)                                        \
  X(floor, bpc_ref_unary, EXACT, 0)                                        \
  X(log, bpc_ref_unary, TRANS, 0)                                          \
  X(log10, bpc_ref_unary, TRANS, 0)                                        \
  X(log1p, bpc_ref_unary, TRANS, 0)                                        \
  X(log2, bpc_ref_unary, TRANS, 0)                                         \
  X(neg, bpc_ref_unary, EXACT, SZ)                                         \
  X(reciprocal, bpc_ref_unary, DIVSQRT, 0)                                 \
  X(relu, bpc_ref_unary, EXACT, 0)                                         \
  X(round, bpc_ref_unary, EXACT, 0)                                        \
  X(rsqrt, bpc_ref_unary, TRANS, 0)                                        \
  X(sigmoid, bpc_ref_unary, TRANS_HARD, 0)                                 \
  X(sign, bpc_ref_unary, EXACT, SZ)                                        \
  X(sin, bpc_ref_unary, TRANS, 0)                                          \
  X(sinh, bpc_ref_unary, TRANS, 0)                                         \
  X(sqrt, bpc_ref_unary, DIVSQRT, 0)                                       \
  X(tan, bpc_ref_unary, TRANS, 0)                                          \
  X(tanh, bpc_ref_unary, TRANS, 0)                                         \
  X(trunc, bpc_ref_unary, EXACT, 0)                                        \
  X(bitwise_not, bpc_ref_unary, EXACT, 0)                                  \
  X(logical_not, bpc_ref_unary, EXACT, 0)                                  \
  X(isinf, bpc_ref_unary, EXACT, 0)                                        \
  X(isnan, bpc_ref_unary, EXACT, 0)                                        \
  X(clamp, bpc_ref_unary, EXACT, 0)                                        \
  X(clamp_tensor, bpc_ref_clamp_tensor, EXACT, 0)                          \
  X(elu, bpc_ref_unary, TRANS_HARD, 0)                                     \
  X(gelu, bpc_ref_unary, TRANS_HARD, 0)                                    \
  X(hardtanh, bpc_ref_unary, EXACT, 0)                                     \
  X(leaky_relu, bpc_ref_unary, DIVSQRT, 0)                                 \
  X(silu, bpc_ref_unary, TRANS_HARD, 0)                                    \
  X(add, bpc_ref_binary, CR, 0)                                            \
  X(sub, bpc_ref_binary, CR, 0)                                            \
  X(mul, bpc_ref_binary, CR, 0)                                            \
  X(div, bpc_ref_binary, DIVSQRT, 0)                                       \
  X(atan2, bpc_ref_binary, TRANS, 0)                                       \
  X(fmod, bpc_ref_binary, EXACT, 0)                                        \
  X(remainder, bpc_ref_binary, DIVSQRT, 0)                                 \
  X(pow, bpc_ref_binary, TRANS_HARD, 0)                                    \
  X(maximum, bpc_ref_binary, EXACT, 0)                                     \
  X(minimum, bpc_ref_binary, EXACT, 0)                                     \
  X(bitwise_and, bpc_ref_binary, EXACT, 0)                                 \
  X(bitwise_or, bpc_ref_binary, EXACT, 0)                                  \
  X(bitwise_xor, bpc_ref_binary, EXACT, 0)                                 \
  X(logical_and, bpc_ref_binary, EXACT, 0)                                 \
  X(logical_or, bpc_ref_binary, EXACT, 0)                                  \
  X(logical_xor, bpc_ref_binary, EXACT, 0)                                 \
  X(eq, bpc_ref_binary, EXACT, 0)                                          \
  X(ne, bpc_ref_binary, EXACT, 0)                                          \
  X(lt, bpc_ref_binary, EXACT, 0)                                          \
  X(le, bpc_ref_binary, EXACT, 0)                                          \
  X(gt, bpc_ref_binary, EXACT, 0)                                          \
  X(ge, bpc_ref_binary, EXACT, 0)                                          \
  X(where, bpc_ref_where, EXACT, SZ)                                       \
  X(sum, bpc_ref_sum, REDUCE, 0)                                           \
  X(mean, bpc_ref_sum, REDUCE, 0)                                          \
  X(amax, bpc_ref_amax, EXACT, 0)                                          \
  X(amin, bpc_ref_amax, EXACT, 0)                                          \
  X(argmax, bpc_ref_argmax, EXACT, 0)                                      \
  X(mm, bpc_ref_matmul, REDUCE, 0)                                         \
  X(bmm, bpc_ref_matmul, REDUCE, 0)                                        \
  X(addmm, bpc_ref_matmul, REDUCE, 0)                                      \
  X(softmax, bpc_ref_softmax, REDUCE, 0)                                   \
  X(to_copy, bpc_ref_to_copy, EXACT, SZ)                                   \
  X(copy, bpc_ref_copy, EXACT, SZ)                                         \
  X(clone, bpc_ref_clone, EXACT, SZ)                                       \
  X(cat, bpc_ref_cat, EXACT, SZ)                                           \
  X(fill, bpc_ref_fill, EXACT, SZ)                                         \
  X(arange, bpc_ref_arange, DIVSQRT, 0)

#define BPC_FLAG_0 0u
#define BPC_FLAG_SZ BPC_OPF_SIGNED_ZERO

static bpc_op_entry_t g_table[BP_OP_COUNT];
static int g_ready;

/* Filled on first use; plain data, so two racing initialisations write the
 * same bytes (the suite itself is single-threaded). */
static void registry_init(void) {
  if (g_ready) return;
  memset(g_table, 0, sizeof g_table);
#define BP_OP(id, name_, cat, ins, outs, attrs, rule_, aten) \
  g_table[id].op_id = id;                                    \
  g_table[id].name = #name_;                                 \
  g_table[id].category = #cat;                               \
  g_table[id].rule = #rule_;
#include "backplane/ops.def"
#undef BP_OP
#define X(name_, fn, acc, fl)                           \
  g_table[BP_OP_##name_].reference = fn;                \
  g_table[BP_OP_##name_].accuracy = BPC_ACC_##acc;      \
  g_table[BP_OP_##name_].flags = BPC_FLAG_##fl;
  BPC_REFERENCES(X)
#undef X
  g_ready = 1;
}

const bpc_op_entry_t* bpc_op_entry(uint32_t op_id) {
  registry_init();
  if (op_id == BP_OP_INVALID || op_id >= BP_OP_COUNT) return NULL;
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
