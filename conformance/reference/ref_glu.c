/* References of the gated activations (family GLU): swiglu and geglu. The
 * last dim of `self` holds [gate | up]; out[.., i] = act(gate[i]) * up[i],
 * computed in fp64 from the exact inputs (the checker rounds):
 *
 *   swiglu: act = silu(g) = g / (1 + exp(-g))            (vLLM silu_and_mul)
 *   geglu:  act = gelu(g), erf form or tanh form by attrs (vLLM gelu_and_mul,
 *           gelu_tanh_and_mul)
 *
 * Accuracy class TRANS_HARD (that of silu and gelu). The error scale is
 * |g * up| for geglu: 0.5 * g * (1 + erf) cancels for negative g, so its
 * natural error is absolute in g, as gelu's reference says. Where act(g)
 * itself lies below the compute dtype's normal range (f32 for f32, f16 and
 * bf16; f64 for f64), or where silu's exp(-g) overflows it (g below about
 * -88.7 in f32: act becomes -0, as in PyTorch's composite and vLLM), the
 * intermediate underflows: there the error scale admits anything from 0 to
 * twice the exact product.
 */
#include <float.h>
#include <math.h>
#include <string.h>

#include "../cases_internal.h"
#include "ref.h"

void bpc_gen_glu(struct bpc_gen* g);

static double glu_act(const bpc_case_t* c, double x) {
  if (c->op_id == BP_OP_swiglu) return x / (1.0 + exp(-x));
  if (c->attrs.gelu.approximate == BP_GELU_TANH) {
    return 0.5 * x * (1.0 + tanh(sqrt(2.0 / M_PI) * (x + 0.044715 * x * x * x)));
  }
  return x * 0.5 * (1.0 + erf(x * M_SQRT1_2));
}

static bp_status_t ref_glu(const bpc_case_t* c, const bpc_host_tensor_t* in, bpc_ref_result_t* res) {
  const bpc_host_tensor_t* x = &in[0];
  uint32_t d = x->dtype;
  if (d != BP_DTYPE_F32 && d != BP_DTYPE_F64 && d != BP_DTYPE_F16 && d != BP_DTYPE_BF16) {
    return bpc_ref_reject(res, "%s needs a floating input", c->op_id == BP_OP_swiglu ? "swiglu" : "geglu");
  }
  if (x->rank == 0 || x->sizes[x->rank - 1] % 2 != 0) {
    return bpc_ref_reject(res, "the last dim must hold two halves");
  }
  int64_t sizes[BP_MAX_RANK];
  memcpy(sizes, x->sizes, sizeof sizes);
  int64_t h = sizes[x->rank - 1] / 2;
  sizes[x->rank - 1] = h;
  bp_status_t st = bpc_ref_single_output(res, d, x->rank, sizes, 0, d);
  if (st != BP_OK) return st;
  bpc_expected_t* e = &res->out[0];
  /* the compute dtype's smallest normal, and where exp overflows it */
  double tiny = d == BP_DTYPE_F64 ? DBL_MIN : FLT_MIN;
  double log_huge = log(d == BP_DTYPE_F64 ? DBL_MAX : FLT_MAX);
  for (int64_t k = 0; k < e->numel; k++) {
    int64_t row = h > 0 ? k / h : 0, i = h > 0 ? k % h : 0;
    double g = bpc_load(d, x->data, row * 2 * h + i).f;
    double u = bpc_load(d, x->data, row * 2 * h + h + i).f;
    double a = glu_act(c, g);
    e->f[k] = a * u;
    e->mag[k] = c->op_id == BP_OP_geglu ? fabs(g * u) : 0.0;
    int underflows = fabs(a) < tiny || (c->op_id == BP_OP_swiglu && -g > log_huge);
    if (a != 0.0 && underflows) e->mag[k] = fabs(e->f[k]) * 0x1p53; /* >= 2|f| / u */
  }
  return BP_OK;
}

static const bpc_ref_group_t k_groups[] = {
    {ref_glu, BPC_ACC_TRANS_HARD, 0, BPC_OPS(BP_OP_swiglu, BP_OP_geglu), bpc_gen_glu, NULL},
};

const bpc_ref_family_t bpc_ref_family_glu = BPC_FAMILY(glu, k_groups);
