/* Test plugins for placement: the template plugin (add and relu on f32,
 * real results in host memory) compiled in, answering as COST_NAME and
 * declaring COST_PEAK FLOP/s and COST_BANDWIDTH bytes/s, so two copies
 * with different figures give the cost model two devices to choose from.
 * With COST_ESTIMATE_NS it also answers estimate_cost with that time for
 * every call (the compiler must prefer it to its roofline). With
 * COST_CLAIM_ALL it has an exec table whose region_claim puts every node
 * it is offered in one group, convex or not, and no region_compile (every
 * region refused): the compiler's own convexity check is what stands
 * between such a claim and a broken run order.
 * With COST_GROUP_NS it claims every node it runs in one group and
 * compiles elementwise programs of add and relu (run on the stream's
 * worker, dense f32 of one size), whose estimate (region info time_ns) is
 * COST_GROUP_NS for the whole region: a group cost under the sum of its
 * nodes' roofline times. With COST_REFUSE_OP the claim (only) refuses
 * nodes of that op with the reason COST_NAME ": refuses <op> in a claim",
 * although query_support takes them. With COST_MUL_SIGMOID it also runs
 * mul and sigmoid (dense f32 operands of one shape): the decomposed
 * x * sigmoid(x) but not silu, for the named patterns' undo path.
 * Test-only.
 */
#define bp_plugin_negotiate bp__template_negotiate
#include "../../plugins/template/template_plugin.c"
#undef bp_plugin_negotiate

static bp_plugin_vtable_t g_cost_vtable;
static bpp_core_table_t g_cost_core;
static bpp_caps_table_t g_cost_caps;

#ifdef COST_ESTIMATE_NS
static bp_status_t cost_estimate(bpp_device_t device, const bp_op_call_t* call, bp_cost_estimate_t* out) {
  (void)device;
  (void)call;
  out->confidence = 50;
  out->time_ns = COST_ESTIMATE_NS;
  out->flops = 0;
  out->bytes = 0;
  return BP_OK;
}
#endif

#ifdef COST_CLAIM_ALL
static bpp_exec_table_t g_cost_exec;
static bp_status_t claim_all(bpp_device_t device, const bp_region_desc_t* graph, uint32_t* out_groups,
                             bp_support_t* const* out_reasons) {
  (void)device;
  (void)out_reasons;
  for (uint32_t n = 0; n < graph->num_nodes; ++n) out_groups[n] = 1;
  return BP_OK;
}
#endif

#ifdef COST_GROUP_NS
static bpp_exec_table_t g_cost_exec;

/* One compiled program: its instructions and constants (owned). */
struct bpp_executable_s {
  bp_ew_instr_t* instrs;
  float* consts;
  uint32_t num_instrs, num_inputs, num_outputs, num_regs, num_consts;
  int64_t numel;
};

static int group_node_taken(const bp_region_desc_t* g, const bp_region_node_t* node, bp_support_t* why) {
  const bp_tensor_desc_t* ins[4];
  const bp_tensor_desc_t* outs[1];
  bp_tensor_desc_t none = {.struct_size = sizeof none};
  if (node->num_inputs > 4 || node->num_outputs != 1) {
    bp_kit_support_answer(why, BP_SUPPORT_OP, "%s: one output and at most 4 inputs", COST_NAME);
    return 0;
  }
  for (uint32_t i = 0; i < node->num_inputs; ++i)
    ins[i] = node->inputs[i] == BP_REGION_VALUE_NONE ? &none : g->values[node->inputs[i]];
  outs[0] = g->values[node->outputs[0]];
  bp_op_call_t call = {.struct_size = sizeof call, .op_id = node->op_id, .num_inputs = node->num_inputs,
                       .num_outputs = 1, .inputs = ins, .outputs = outs, .attrs = node->attrs,
                       .compute_dtype = node->compute_dtype};
  const char* reason;
  uint32_t r = support_reason(&call, &reason);
  if (r != BP_SUPPORT_OK) {
    bp_kit_support_answer(why, r, "%s: %s", COST_NAME, reason);
    return 0;
  }
#ifdef COST_REFUSE_OP
  if (node->op_id == COST_REFUSE_OP) {
    bp_kit_support_answer(why, BP_SUPPORT_OP, "%s: refuses %s in a claim", COST_NAME, bp_kit_op_name(node->op_id));
    return 0;
  }
#endif
  return 1;
}

/* Every node it runs in group 1 (the compiler checks convexity). */
static bp_status_t claim_group(bpp_device_t device, const bp_region_desc_t* graph, uint32_t* out_groups,
                               bp_support_t* const* out_reasons) {
  (void)device;
  for (uint32_t n = 0; n < graph->num_nodes; ++n)
    out_groups[n] = group_node_taken(graph, graph->nodes[n], out_reasons[n]) ? 1 : 0;
  return BP_OK;
}

static bp_status_t group_compile(bpp_device_t device, const bp_region_desc_t* region, bp_support_t* out_refusal,
                                 bpp_executable_t* out) {
  (void)device;
  const bp_ew_program_t* p = region->program;
  if (region->kind != BP_REGION_EW_PROGRAM || p == NULL) {
    bp_kit_support_answer(out_refusal, BP_SUPPORT_OP, "%s: compiles elementwise programs only", COST_NAME);
    return bp_kit_error(BP_UNIMPLEMENTED, "%s: compiles elementwise programs only", COST_NAME);
  }
  int64_t numel = bp_desc_numel(region->values[0]);
  for (uint32_t a = 0; a < region->num_args; ++a) {
    if (region->values[a]->dtype != BP_DTYPE_F32 || bp_desc_numel(region->values[a]) != numel) {
      bp_kit_support_answer(out_refusal, BP_SUPPORT_SIZE, "%s: f32 arguments of one size only", COST_NAME);
      return bp_kit_error(BP_UNIMPLEMENTED, "%s: f32 arguments of one size only", COST_NAME);
    }
  }
  for (uint32_t i = 0; i < p->num_instrs; ++i) {
    const bp_ew_instr_t* in = (const bp_ew_instr_t*)(const void*)((const char*)p->instrs + (size_t)i * p->instr_stride);
    if (in->opcode != BP_EW_LOAD_INPUT && in->opcode != BP_EW_LOAD_CONST && in->opcode != BP_EW_STORE &&
        in->opcode != BP_OP_add && in->opcode != BP_OP_relu) {
      bp_kit_support_answer(out_refusal, BP_SUPPORT_OP, "%s: opcode %u is not add or relu", COST_NAME, in->opcode);
      return bp_kit_error(BP_UNIMPLEMENTED, "%s: opcode %u is not add or relu", COST_NAME, in->opcode);
    }
  }
  struct bpp_executable_s* e = calloc(1, sizeof *e);
  if (e) e->instrs = calloc(p->num_instrs + 1, sizeof *e->instrs);
  if (e) e->consts = calloc(p->num_constants + 1, sizeof *e->consts);
  if (!e || !e->instrs || !e->consts) {
    if (e) free(e->instrs);
    free(e);
    return bp_kit_error(BP_RESOURCE_EXHAUSTED, "%s: out of memory", COST_NAME);
  }
  for (uint32_t i = 0; i < p->num_instrs; ++i)
    memcpy(&e->instrs[i], (const char*)p->instrs + (size_t)i * p->instr_stride, sizeof e->instrs[i]);
  for (uint32_t k = 0; k < p->num_constants; ++k) e->consts[k] = (float)bp_kit_scalar_f64(&p->constants[k], 0.0);
  e->num_instrs = p->num_instrs;
  e->num_inputs = p->num_inputs;
  e->num_outputs = p->num_outputs;
  e->num_regs = p->num_registers;
  e->num_consts = p->num_constants;
  e->numel = numel;
  *out = e;
  return BP_OK;
}

static bp_status_t group_info(bpp_executable_t e, bp_region_info_t* out) {
  (void)e;
  bp_region_info_t info = {.struct_size = sizeof info, .time_ns = COST_GROUP_NS, .cost_confidence = 50};
  bp_kit_copy_out(out, &info, sizeof info);
  return BP_OK;
}

static void group_release(bpp_executable_t e) {
  if (!e) return;
  free(e->instrs);
  free(e->consts);
  free(e);
}

static int group_dense(const bp_tensor_desc_t* d) {
  int64_t want = 1;
  for (uint32_t k = d->rank; k-- > 0;) {
    if (d->sizes[k] != 1 && d->strides[k] != want) return 0;
    want *= d->sizes[k];
  }
  return 1;
}

/* One launch, run in stream order on the worker: its own copy of the
 * program and the argument pointers. */
typedef struct group_job {
  struct bpp_executable_s e;
  float* args[16];
} group_job_t;

static bp_status_t group_run(void* user) {
  group_job_t* j = user;
  float r[256];
  bp_status_t st = BP_OK;
  for (int64_t x = 0; x < j->e.numel && st == BP_OK; ++x) {
    for (uint32_t i = 0; i < j->e.num_instrs; ++i) {
      const bp_ew_instr_t* in = &j->e.instrs[i];
      switch (in->opcode) {
        case BP_EW_LOAD_INPUT: r[in->dst] = j->args[in->a][x]; break;
        case BP_EW_LOAD_CONST: r[in->dst] = j->e.consts[in->a]; break;
        case BP_EW_STORE: j->args[j->e.num_inputs + in->a][x] = r[in->b]; break;
        case BP_OP_add: r[in->dst] = r[in->a] + r[in->b]; break;
        default: r[in->dst] = r[in->a] > 0.0f || r[in->a] != r[in->a] ? r[in->a] : 0.0f; break; /* relu */
      }
    }
  }
  free(j->e.instrs);
  free(j->e.consts);
  free(j);
  return st;
}

static bp_status_t group_launch(bpp_stream_t stream, bpp_executable_t e, uint32_t num_args,
                                const bp_tensor_desc_t* const* args, const bp_tensor_desc_t* workspace) {
  (void)workspace;
  if (num_args != e->num_inputs + e->num_outputs || num_args > 16 || e->num_regs > 256)
    return bp_kit_error(BP_INVALID_ARGUMENT, "%s: %u arguments", COST_NAME, num_args);
  group_job_t* j = calloc(1, sizeof *j);
  if (!j) return bp_kit_error(BP_RESOURCE_EXHAUSTED, "%s: out of memory", COST_NAME);
  j->e = *e;
  j->e.instrs = malloc(sizeof *e->instrs * (e->num_instrs + 1));
  j->e.consts = malloc(sizeof *e->consts * (e->num_consts + 1));
  if (!j->e.instrs || !j->e.consts) {
    free(j->e.instrs);
    free(j->e.consts);
    free(j);
    return bp_kit_error(BP_RESOURCE_EXHAUSTED, "%s: out of memory", COST_NAME);
  }
  memcpy(j->e.instrs, e->instrs, sizeof *e->instrs * e->num_instrs);
  memcpy(j->e.consts, e->consts, sizeof *e->consts * e->num_consts);
  for (uint32_t a = 0; a < num_args; ++a) {
    if (!group_dense(args[a])) {
      free(j->e.instrs);
      free(j->e.consts);
      free(j);
      return bp_kit_error(BP_UNIMPLEMENTED, "%s: argument %u is not contiguous", COST_NAME, a);
    }
    j->args[a] = (float*)bp_kit_host_desc_ptr(args[a]);
  }
  bp_status_t st = bp_kit_stream_enqueue_host_func(stream, group_run, j);
  if (st != BP_OK) {
    free(j->e.instrs);
    free(j->e.consts);
    free(j);
  }
  return st;
}
#endif

#ifdef COST_MUL_SIGMOID
#include <math.h>

/* mul of two tensors or sigmoid, every operand dense f32 of one shape. */
static int mul_sigmoid_call(const bp_op_call_t* call) {
  if ((call->op_id != BP_OP_mul || call->num_inputs != 2) && (call->op_id != BP_OP_sigmoid || call->num_inputs != 1))
    return 0;
  const bp_binary_attrs_t* a = call->op_id == BP_OP_mul ? call->attrs : NULL;
  if (a && (a->flags || a->rounding_mode)) return 0;
  const bp_tensor_desc_t* o = call->outputs[0];
  for (uint32_t i = 0; i < call->num_inputs; ++i) {
    const bp_tensor_desc_t* d = call->inputs[i];
    if (d->dtype != BP_DTYPE_F32 || d->rank != o->rank || memcmp(d->sizes, o->sizes, sizeof(int64_t) * o->rank) != 0)
      return 0;
  }
  return o->dtype == BP_DTYPE_F32 && call->num_outputs == 1;
}

static bp_status_t ms_query_support(bpp_device_t device, const bp_op_call_t* call, bp_support_t* out) {
  if (call && out && mul_sigmoid_call(call)) {
    bp_status_t st = bp_kit_support_answer(out, BP_SUPPORT_OK, "%s", "supported");
    out->requires_contiguous = 1; /* exec reads and writes flat */
    return st;
  }
  return query_support(device, call, out);
}

static int ms_dense(const bp_tensor_desc_t* d) {
  int64_t step = 1;
  for (uint32_t r = d->rank; r-- > 0;) {
    if (d->sizes[r] != 1 && d->strides[r] != step) return 0;
    step *= d->sizes[r];
  }
  return 1;
}

static bp_status_t ms_exec(bpp_device_t device, const bp_op_call_t* call) {
  if (!mul_sigmoid_call(call)) return exec(device, call);
  const bp_tensor_desc_t* o = call->outputs[0];
  for (uint32_t i = 0; i < call->num_inputs; ++i) {
    if (!ms_dense(call->inputs[i])) return bp_kit_error(BP_UNIMPLEMENTED, "%s: a strided operand", COST_NAME);
  }
  if (!ms_dense(o)) return bp_kit_error(BP_UNIMPLEMENTED, "%s: a strided output", COST_NAME);
  int64_t n = bp_desc_numel(o);
  float* y = at(o, 0);
  const float* x = at(call->inputs[0], 0);
  const float* w = call->op_id == BP_OP_mul ? at(call->inputs[1], 0) : NULL;
  for (int64_t i = 0; i < n; ++i) y[i] = w ? x[i] * w[i] : 1.0f / (1.0f + expf(-x[i]));
  return BP_OK;
}

static const bp_kit_queue_t k_ms_queue = {.exec = ms_exec};
static bp_status_t ms_stream_create(bpp_device_t device, const bp_stream_create_info_t* info, bpp_stream_t* out) {
  return bp_kit_stream_create(&k_ms_queue, device, info, out);
}
static bp_status_t ms_launch(bpp_stream_t s, const bp_op_call_t* call) {
  return mul_sigmoid_call(call) ? bp_kit_stream_enqueue_op(s, call) : launch(s, call);
}
static bpp_op_launch_fn g_ms_launch[BP_OP_COUNT];
static bpp_op_table_t g_ms_ops;
#endif

static bp_status_t cost_properties(bpp_device_t device, bp_device_properties_t* props) {
  bp_status_t st = device_get_properties(device, props);
  if (st != BP_OK) return st;
  props->peak_ops_per_s[BP_DTYPE_F32] = COST_PEAK;
  props->memory_bandwidth_bytes_per_s = COST_BANDWIDTH;
  snprintf(props->name, sizeof props->name, "%s (template with declared figures)", COST_NAME);
  return BP_OK;
}

BP_PLUGIN_EXPORT bp_status_t bp_plugin_negotiate(const bp_negotiate_request_t* req,
                                                 bp_negotiate_reply_t* reply);
bp_status_t bp_plugin_negotiate(const bp_negotiate_request_t* req, bp_negotiate_reply_t* reply) {
  bp_status_t st = bp__template_negotiate(req, reply);
  if (st != BP_OK) return st;
  g_cost_vtable = *reply->vtable;
  g_cost_core = *g_cost_vtable.core;
  g_cost_core.device_get_properties = cost_properties;
  g_cost_vtable.core = &g_cost_core;
  g_cost_caps = *g_cost_vtable.caps;
#ifdef COST_ESTIMATE_NS
  g_cost_caps.estimate_cost = cost_estimate;
#endif
#ifdef COST_MUL_SIGMOID
  g_cost_core.stream_create = ms_stream_create;
  g_cost_caps.query_support = ms_query_support;
  memcpy(g_ms_launch, k_launch, sizeof g_ms_launch);
  g_ms_launch[BP_OP_mul] = ms_launch;
  g_ms_launch[BP_OP_sigmoid] = ms_launch;
  g_ms_ops = k_ops;
  g_ms_ops.launch = g_ms_launch;
  g_cost_vtable.ops = &g_ms_ops;
#endif
  g_cost_vtable.caps = &g_cost_caps;
#ifdef COST_CLAIM_ALL
  memset(&g_cost_exec, 0, sizeof g_cost_exec);
  g_cost_exec.struct_size = sizeof g_cost_exec;
  g_cost_exec.region_claim = claim_all;
  g_cost_vtable.exec = &g_cost_exec;
#endif
#ifdef COST_GROUP_NS
  memset(&g_cost_exec, 0, sizeof g_cost_exec);
  g_cost_exec.struct_size = sizeof g_cost_exec;
  g_cost_exec.region_claim = claim_group;
  g_cost_exec.region_compile = group_compile;
  g_cost_exec.executable_get_info = group_info;
  g_cost_exec.executable_launch = group_launch;
  g_cost_exec.executable_release = group_release;
  g_cost_vtable.exec = &g_cost_exec;
#endif
  reply->vtable = &g_cost_vtable;
  reply->name = COST_NAME;
  return BP_OK;
}
