/* backplane CPU plugin: the ops it runs, dispatch to the kernel families,
 * support answers and cost estimates. Op metadata (names, operand counts,
 * attribute sizes) is the plugin kit's table generated from ops.def. */
#include <string.h>

#include "cpu_internal.h"
#include "cpu_kernels.h"

/* The families run by the kernels of this file's dispatch (cpu_exec_op);
 * the others' ops are listed by their family files (CPU_FAMILIES). */
static int cpu_core_family(uint32_t op) {
  switch (bp_op_family(op)) {
    case BP_OP_FAMILY_UNARY_EW: case BP_OP_FAMILY_BINARY_EW: case BP_OP_FAMILY_COMPARE:
    case BP_OP_FAMILY_TERNARY_EW: case BP_OP_FAMILY_REDUCE: case BP_OP_FAMILY_MATMUL:
    case BP_OP_FAMILY_SOFTMAX: case BP_OP_FAMILY_COPY: case BP_OP_FAMILY_CREATION:
      return 1;
    default:
      return 0;
  }
}

/* Families of kernel files; each lists its ops (cpu_internal.h). */
#define CPU_FAMILIES(X) X(reduce_ext) X(conv) X(pooling) X(norm) X(attention) X(fft) X(index) \
  X(scatter) X(shape) X(random) X(fused_ew) X(glu) X(quant) X(sample) X(paged) X(qkv) X(moe) \
  X(fused_quant) X(moe_dispatch) X(paged_ext) X(group_quant) X(moe_route) X(paged_cache) X(logprobs) \
  X(glu_oai)
#define CPU__FAMILY_DECL(f) CPU_HIDDEN extern const cpu_family_t cpu_family_##f;
CPU_FAMILIES(CPU__FAMILY_DECL)
#undef CPU__FAMILY_DECL
static const cpu_family_t* const k_families[] = {
#define CPU__FAMILY_PTR(f) &cpu_family_##f,
    CPU_FAMILIES(CPU__FAMILY_PTR)
#undef CPU__FAMILY_PTR
};

/* Families whose kernels take dense operands only (the core packs strided
 * ones) and storage dtypes the elementwise kernels lack (fp8 codes, e8m0
 * scales, packed 4-bit bytes). */
static int family_dense(const cpu_family_t* f) {
  return f == &cpu_family_quant || f == &cpu_family_fused_quant || f == &cpu_family_group_quant ||
         f == &cpu_family_glu_oai;
}

const cpu_family_t* cpu_op_family(uint32_t op) {
  for (size_t f = 0; f < sizeof k_families / sizeof k_families[0]; f++)
    for (uint32_t i = 0; i < k_families[f]->num_ops; i++)
      if (k_families[f]->ops[i] == op) return k_families[f];
  return NULL;
}

int cpu_op_implemented(uint32_t op) {
  /* A family file's ops first: it may take ops of a core family (linear,
   * hardswish, addcmul). */
  return cpu_op_family(op) != NULL || cpu_core_family(op);
}

/* ---- dispatch -------------------------------------------------------- */
bp_status_t cpu_exec_op(const bp_op_call_t* call) {
  uint32_t op = call->op_id;
  const cpu_family_t* fam = cpu_op_family(op);
  if (fam) return fam->exec(call);
  if (bp_op_is_elementwise(op)) return cpu_exec_elementwise(call);
  switch (bp_op_family(op)) {
    case BP_OP_FAMILY_REDUCE: return cpu_exec_reduce(call);
    case BP_OP_FAMILY_MATMUL: return cpu_exec_matmul(call);
    case BP_OP_FAMILY_SOFTMAX: return cpu_exec_softmax(call);
    case BP_OP_FAMILY_COPY: case BP_OP_FAMILY_CREATION: return cpu_exec_copy_like(call);
    default: break;
  }
  return cpu_error(BP_UNIMPLEMENTED, "cpu: op %s (id %u) has no CPU kernel", cpu_op_name(op), op);
}

/* ---- support --------------------------------------------------------- */
#define answer bp_kit_support_answer

/* The serving families take dense operands only too (the core packs
 * strided ones; cpu_call_require_dense checks at exec). */
static int serving_dense(uint32_t family, uint32_t op) {
  return family == BP_OP_FAMILY_SAMPLE || family == BP_OP_FAMILY_PAGED_ATTENTION ||
         family == BP_OP_FAMILY_MOE || op == BP_OP_qkv_rotary || op == BP_OP_rotary_embedding_pos;
}

static int desc_dense(const bp_tensor_desc_t* d) {
  if (bp_desc_numel(d) == 0) return 1; /* nothing is read or written */
  int64_t expect = 1;
  for (uint32_t k = d->rank; k-- > 0;) {
    if (d->sizes[k] != 1 && d->strides[k] != expect) return 0;
    expect *= d->sizes[k];
  }
  return 1;
}

bp_status_t cpu_call_require_dense(const bp_op_call_t* call) {
  for (uint32_t k = 0; k < call->num_inputs + call->num_outputs; k++) {
    const bp_tensor_desc_t* d = k < call->num_inputs ? call->inputs[k]
                                                     : call->outputs[k - call->num_inputs];
    if (d->dtype != BP_DTYPE_INVALID && !desc_dense(d)) {
      return cpu_error(BP_INVALID_ARGUMENT, "cpu: %s: operand %u is not dense (the support "
                                            "answer asks the core to pack it)",
                       cpu_op_name(call->op_id), k);
    }
  }
  return BP_OK;
}

static int same_dtype_all(const bp_op_call_t* c, uint32_t dt) {
  for (uint32_t i = 0; i < c->num_inputs; i++)
    if (c->inputs[i]->dtype != BP_DTYPE_INVALID && c->inputs[i]->dtype != dt) return 0;
  return c->outputs[0]->dtype == dt;
}

bp_status_t cpu_query_support(bpp_device_t dev, const bp_op_call_t* call, bp_support_t* out) {
  if (!dev || !call || !out)
    return cpu_error(BP_INVALID_ARGUMENT, "cpu: query_support: NULL argument");
  if (call->struct_size < BP_OP_CALL_V1_SIZE)
    return cpu_error(BP_INVALID_ARGUMENT, "cpu: query_support: op call struct_size %u < %u",
                     call->struct_size, BP_OP_CALL_V1_SIZE);
  uint32_t op = call->op_id;
  if (!bp_kit_op_info(op)) return answer(out, BP_SUPPORT_OP, "op id %u is unknown", op);
  const char* name = cpu_op_name(op);
  if (!cpu_op_implemented(op)) return answer(out, BP_SUPPORT_OP, "%s has no CPU kernel", name);
  if (call->num_outputs < 1 || !call->outputs || (call->num_inputs && !call->inputs))
    return cpu_error(BP_INVALID_ARGUMENT, "cpu: query_support: %s: missing operands", name);
  const cpu_family_t* fam = cpu_op_family(op);
  uint32_t n = call->num_inputs + call->num_outputs;
  for (uint32_t k = 0; k < n; k++) {
    const bp_tensor_desc_t* d = k < call->num_inputs ? call->inputs[k] : call->outputs[k - call->num_inputs];
    if (d->dtype == BP_DTYPE_INVALID) continue;
    if (!bp_dtype_is_valid(d->dtype))
      return cpu_error(BP_INVALID_ARGUMENT, "cpu: query_support: %s: unknown dtype %u", name, d->dtype);
    if (!cpu_dtype_has_kernels(d->dtype) && !(fam && family_dense(fam)))
      return answer(out, BP_SUPPORT_DTYPE, "%s: %s is a storage dtype without CPU kernels", name,
                    bp_dtype_name(d->dtype));
    if (d->dtype == BP_DTYPE_C64 && !(fam && fam->allow_c64)) return answer(out, BP_SUPPORT_DTYPE, "%s: c64 is not supported on cpu", name);
    if (d->rank > BP_MAX_RANK) return answer(out, BP_SUPPORT_RANK, "%s: rank %u > %d", name, d->rank, BP_MAX_RANK);
  }
  uint32_t in0 = call->num_inputs ? call->inputs[0]->dtype : BP_DTYPE_INVALID;
  uint32_t o0 = call->outputs[0]->dtype;
  uint32_t family = bp_op_family(op);
  char msg[200];
  if (fam) {
    msg[0] = '\0';
    int reason = fam->supported(call, msg, sizeof msg);
    if (reason) return answer(out, (uint32_t)reason, "%s: %s", name, msg);
    if (family_dense(fam) || serving_dense(family, op)) {
      bp_status_t st = answer(out, BP_SUPPORT_OK, "%s", "");
      out->requires_contiguous = 1;
      return st;
    }
  } else if (bp_op_is_elementwise(op)) {
    int reason = cpu_ew_supported(call, msg, sizeof msg);
    if (reason) return answer(out, (uint32_t)reason, "%s: %s", name, msg);
  } else if (family == BP_OP_FAMILY_REDUCE) {
    if (bp_dtype_is_fp8(in0) || bp_dtype_is_fp8(o0))
      return answer(out, BP_SUPPORT_DTYPE, "%s: fp8 is a storage type", name);
    if (op == BP_OP_mean && !bp_dtype_is_float(o0))
      return answer(out, BP_SUPPORT_DTYPE, "mean: output %s is not floating", bp_dtype_name(o0));
  } else if (family == BP_OP_FAMILY_MATMUL) {
    if (!same_dtype_all(call, o0))
      return answer(out, BP_SUPPORT_DTYPE, "%s: operands must share one dtype", name);
    if (o0 == BP_DTYPE_BOOL || bp_dtype_is_fp8(o0))
      return answer(out, BP_SUPPORT_DTYPE, "%s: %s matmul is not supported", name, bp_dtype_name(o0));
  } else if (family == BP_OP_FAMILY_SOFTMAX) {
    if (!bp_dtype_is_float(in0) || !bp_dtype_is_float(o0))
      return answer(out, BP_SUPPORT_DTYPE, "%s: %s -> %s: floating dtypes only", name,
                    bp_dtype_name(in0), bp_dtype_name(o0));
  } else if (op == BP_OP_arange) {
    if (o0 == BP_DTYPE_BOOL || bp_dtype_is_fp8(o0))
      return answer(out, BP_SUPPORT_DTYPE, "arange: %s output is not supported", bp_dtype_name(o0));
  }
  /* to_copy, copy, clone, cat, fill: every dtype but c64 (checked above). */
  return answer(out, BP_SUPPORT_OK, "%s", "");
}

/* ---- cost ------------------------------------------------------------ */
/* Elementwise ops that evaluate exp, log or a trigonometric function. */
static int transcendental(uint32_t op) {
  switch (op) {
    case BP_OP_acos: case BP_OP_acosh: case BP_OP_asin: case BP_OP_asinh: case BP_OP_atan:
    case BP_OP_atanh: case BP_OP_cos: case BP_OP_cosh: case BP_OP_erf: case BP_OP_exp:
    case BP_OP_expm1: case BP_OP_log: case BP_OP_log10: case BP_OP_log1p: case BP_OP_log2:
    case BP_OP_sigmoid: case BP_OP_sin: case BP_OP_sinh: case BP_OP_tan: case BP_OP_tanh:
    case BP_OP_elu: case BP_OP_gelu: case BP_OP_silu: case BP_OP_pow: case BP_OP_atan2:
    case BP_OP_softplus: case BP_OP_mish:
      return 1;
    default:
      return 0;
  }
}

bp_status_t cpu_estimate_cost(bpp_device_t dev, const bp_op_call_t* call, bp_cost_estimate_t* out) {
  if (!dev || !call || !out || call->struct_size < BP_OP_CALL_V1_SIZE || !call->outputs ||
      (call->num_inputs && !call->inputs))
    return cpu_error(BP_INVALID_ARGUMENT, "cpu: estimate_cost: NULL or short argument");
  double bytes = 0, flops = 0;
  for (uint32_t k = 0; k < call->num_inputs + call->num_outputs; k++) {
    const bp_tensor_desc_t* d = k < call->num_inputs ? call->inputs[k] : call->outputs[k - call->num_inputs];
    if (d->dtype == BP_DTYPE_INVALID || d->rank > BP_MAX_RANK) continue;
    bytes += (double)bp_desc_numel(d) * bp_dtype_size(d->dtype);
  }
  uint32_t op = call->op_id;
  const bp_tensor_desc_t* o = call->outputs[0];
  double nout = o->rank <= BP_MAX_RANK ? (double)bp_desc_numel(o) : 0;
  uint32_t dt = o->dtype;
  uint32_t family = bp_op_family(op);
  if (family == BP_OP_FAMILY_MATMUL && call->num_inputs >= 2) {
    const bp_tensor_desc_t* a = call->inputs[op == BP_OP_addmm ? 1 : 0];
    double k = a->rank >= 1 && a->rank <= BP_MAX_RANK ? (double)a->sizes[a->rank - 1] : 0;
    flops = 2.0 * nout * k;
    dt = a->dtype;
  } else if (family == BP_OP_FAMILY_REDUCE && call->num_inputs) {
    flops = call->inputs[0]->rank <= BP_MAX_RANK ? (double)bp_desc_numel(call->inputs[0]) : 0;
    dt = call->inputs[0]->dtype;
  } else if (family == BP_OP_FAMILY_SOFTMAX) {
    flops = 20.0 * nout; /* exp dominates */
  } else if (bp_op_is_elementwise(op)) {
    /* transcendental ops cost ~20 flops per element, the rest ~1 */
    flops = nout * (transcendental(op) ? 20.0 : 1.0);
  }
  double peak = dt < BP_DTYPE_SLOTS ? dev->props.peak_ops_per_s[dt] : 0;
  if (peak <= 0) peak = dev->props.peak_ops_per_s[BP_DTYPE_F32];
  double t_compute = peak > 0 ? flops / peak * 1e9 : 0;
  double t_mem = bytes / dev->props.memory_bandwidth_bytes_per_s * 1e9;
  bp_cost_estimate_t e = {
      .struct_size = sizeof e,
      .confidence = 20, /* roofline from estimated peaks */
      .time_ns = (t_compute > t_mem ? t_compute : t_mem) + dev->props.launch_overhead_ns,
      .flops = flops,
      .bytes = bytes,
  };
  bp_kit_copy_out(out, &e, sizeof e);
  return BP_OK;
}
