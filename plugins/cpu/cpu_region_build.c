/* backplane CPU plugin: regions into steps (cpu_region.h).
 *
 *  EW_PROGRAM  one PROGRAM step over the arguments.
 *  EPILOGUE    mm / addmm / linear with an elementwise epilogue: one GEMM
 *              step (row blocks, epilogue per block); bmm and convolution
 *              anchors: a NODE step, then a PROGRAM step.
 *  PATTERN     one NODE step for a fused op the plugin has a kernel for.
 *  GRAPH       one REDUCE step for a reduction prologue (elementwise
 *              nodes, then a sum / mean / amax / amin of their result;
 *              refused with the reason when the step cannot run it); one
 *              PROGRAM step when every node is elementwise; else one
 *              NODE step per node the plugin supports (temporaries in the
 *              workspace); refused when a node is unsupported.
 * Elementwise nodes become program instructions with registers reused
 * after a value's last use.
 */
#include <stdlib.h>
#include <string.h>

#include "cpu_region.h"

#define NONE_ID UINT32_MAX
#define WS_ALIGN 64u

static int refuse(char* msg, size_t cap, int reason, const char* fmt, const char* a, unsigned b) {
  bp_plugin_format(msg, cap, 0, fmt, a, b);
  return reason;
}

int cpu_region_is_pattern(uint32_t op) {
  switch (op) {
    case BP_OP_softmax: case BP_OP_log_softmax: case BP_OP_layer_norm: case BP_OP_rms_norm:
    case BP_OP_scaled_dot_product_attention: case BP_OP_add_rms_norm: case BP_OP_add_layer_norm:
    case BP_OP_swiglu: case BP_OP_geglu: case BP_OP_linear:
      return 1;
    default:
      return 0;
  }
}

/* Ops whose attributes (bounds, slopes) have no place in a program. */
static int ew_attrs_unfusable(uint32_t op) {
  switch (op) {
    case BP_OP_clamp: case BP_OP_elu: case BP_OP_hardtanh: case BP_OP_leaky_relu:
    case BP_OP_softplus: case BP_OP_lerp:
      return 1;
    default:
      return 0;
  }
}

int cpu_region_node_fusable(const bp_region_node_t* node) {
  const bp_kit_op_info_t* info = bp_kit_op_info(node->op_id);
  if (!info || !bp_op_is_elementwise(node->op_id) || info->num_inputs < 1 ||
      ew_attrs_unfusable(node->op_id) || node->num_outputs != 1)
    return 0;
  if (info->attrs_size && node->attrs && node->op_id != BP_OP_gelu) {
    const bp_binary_attrs_t* ba = node->attrs;
    double alpha = bp_kit_scalar_f64(&ba->alpha, 1.0);
    if (alpha != 1.0) return 0;
    if (ba->rounding_mode != 0 && node->op_id != BP_OP_div) return 0;
  }
  return 1;
}

/* ---- program builder ------------------------------------------------------ */
typedef struct ewb {
  const bp_region_desc_t* r;
  cpu_step_t* step;
  bp_ew_instr_t ins[CPU_EWP_MAX_INSTRS];
  bp_scalar_t consts[CPU_EWP_MAX_INSTRS];
  uint32_t ni, nc;
  int16_t* reg_of;    /* per value */
  uint32_t* last_use; /* per value: last node (index) reading it */
  uint8_t busy[CPU_EWP_MAX_REGISTERS];
  uint32_t num_registers;
  int full; /* a limit was hit */
} ewb_t;

static int new_reg(ewb_t* b) {
  for (uint32_t r = 0; r < CPU_EWP_MAX_REGISTERS; r++)
    if (!b->busy[r]) {
      b->busy[r] = 1;
      if (r + 1 > b->num_registers) b->num_registers = r + 1;
      return (int)r;
    }
  b->full = 1;
  return 0;
}

static void emit(ewb_t* b, uint32_t opc, int dst, int x, int y, int z, uint32_t aux) {
  if (b->ni >= CPU_EWP_MAX_INSTRS) {
    b->full = 1;
    return;
  }
  bp_ew_instr_t* in = &b->ins[b->ni++];
  in->opcode = opc;
  in->dst = (uint8_t)dst;
  in->a = (uint8_t)x;
  in->b = (uint8_t)y;
  in->c = (uint8_t)z;
  in->aux = aux;
}

/* Register holding value v, loading it as a program input when it is not
 * produced inside the program. */
static int value_reg(ewb_t* b, uint32_t v) {
  if (b->reg_of[v] >= 0) return b->reg_of[v];
  cpu_step_t* s = b->step;
  uint32_t k = 0;
  while (k < s->prog_nin && s->prog_in[k] != v) k++;
  if (k == s->prog_nin) {
    if (s->prog_nin >= CPU_EWP_MAX_INPUTS) {
      b->full = 1;
      return 0;
    }
    s->prog_in[s->prog_nin++] = v;
  }
  int r = new_reg(b);
  emit(b, BP_EW_LOAD_INPUT, r, (int)k, 0, 0, 0);
  b->reg_of[v] = (int16_t)r;
  return r;
}

static int const_reg(ewb_t* b, const bp_scalar_t* s) {
  if (b->nc >= CPU_EWP_MAX_INSTRS) {
    b->full = 1;
    return 0;
  }
  b->consts[b->nc] = *s;
  int r = new_reg(b);
  emit(b, BP_EW_LOAD_CONST, r, (int)b->nc++, 0, 0, 0);
  return r;
}

/* Writes value v from register r: a STORE when v is an output argument. */
static void define_value(ewb_t* b, uint32_t v, int r) {
  b->reg_of[v] = (int16_t)r;
  const bp_region_desc_t* g = b->r;
  cpu_step_t* s = b->step;
  if ((v >= g->num_inputs && v < g->num_args) || (s->kind == CPU_STEP_REDUCE && v == s->inputs[0])) {
    if (s->prog_nout >= CPU_EWP_MAX_OUTPUTS) {
      b->full = 1;
      return;
    }
    s->prog_out[s->prog_nout] = v;
    emit(b, BP_EW_STORE, 0, (int)s->prog_nout++, r, 0, 0);
  }
}

static void release_value(ewb_t* b, uint32_t v, uint32_t n) {
  if (v != NONE_ID && b->reg_of[v] >= 0 && b->last_use[v] <= n) b->busy[b->reg_of[v]] = 0;
}

static uint32_t activation_op(uint32_t act, uint32_t* aux) {
  *aux = 0;
  switch (act) {
    case BP_ACTIVATION_RELU: return BP_OP_relu;
    case BP_ACTIVATION_GELU_ERF: return BP_OP_gelu;
    case BP_ACTIVATION_GELU_TANH: *aux = BP_GELU_TANH; return BP_OP_gelu;
    case BP_ACTIVATION_SILU: return BP_OP_silu;
    case BP_ACTIVATION_SIGMOID: return BP_OP_sigmoid;
    case BP_ACTIVATION_TANH: return BP_OP_tanh;
    default: return 0;
  }
}

/* The GEMM anchor's own additions: linear's bias and activation, addmm's
 * self (beta 1). Returns the register of the anchor's result. */
static int anchor_prologue(ewb_t* b, const cpu_step_t* s, char* msg, size_t cap, int* reason) {
  int r = new_reg(b);
  emit(b, BP_EW_LOAD_INPUT, r, 0, 0, 0, 0);
  b->step->prog_in[0] = NONE_ID; /* the product */
  b->step->prog_nin = 1;
  uint32_t bias = NONE_ID, act = 0;
  if (s->op_id == BP_OP_linear) {
    bias = s->inputs[2];
    act = s->attrs ? ((const bp_linear_attrs_t*)s->attrs)->activation : 0;
  } else if (s->op_id == BP_OP_addmm) {
    bias = s->inputs[0];
  }
  if (bias != NONE_ID) {
    int rb = value_reg(b, bias);
    int ro = new_reg(b);
    emit(b, BP_OP_add, ro, r, rb, 0, 0);
    b->busy[r] = 0;
    if (b->last_use[bias] == UINT32_MAX || b->reg_of[bias] < 0) b->busy[rb] = 0;
    r = ro;
  }
  if (act) {
    uint32_t aux;
    uint32_t op = activation_op(act, &aux);
    if (!op) {
      *reason = refuse(msg, cap, BP_SUPPORT_ATTRIBUTE, "linear: activation %s%u is not fused", "", act);
      return r;
    }
    int ro = new_reg(b);
    emit(b, op, ro, r, 0, 0, aux);
    b->busy[r] = 0;
    r = ro;
  }
  return r;
}

int cpu_region_nodes_program(const bp_region_desc_t* g, uint32_t first, cpu_step_t* s, char* msg,
                             size_t cap) {
  ewb_t b;
  memset(&b, 0, sizeof b);
  b.r = g;
  b.step = s;
  b.reg_of = malloc(sizeof(*b.reg_of) * g->num_values);
  b.last_use = malloc(sizeof(*b.last_use) * g->num_values);
  int reason = 0;
  if (!b.reg_of || !b.last_use) {
    reason = -1;
    goto done;
  }
  for (uint32_t v = 0; v < g->num_values; v++) {
    b.reg_of[v] = -1;
    b.last_use[v] = UINT32_MAX; /* never read inside: free once written */
  }
  uint32_t end = s->kind == CPU_STEP_REDUCE ? g->num_nodes - 1 : g->num_nodes;
  for (uint32_t n = first; n < end; n++)
    for (uint32_t i = 0; i < g->nodes[n]->num_inputs; i++)
      if (g->nodes[n]->inputs[i] != NONE_ID) b.last_use[g->nodes[n]->inputs[i]] = n;
  uint32_t cdt = first < g->num_nodes ? g->nodes[first]->compute_dtype : BP_DTYPE_INVALID;
  if (s->kind == CPU_STEP_GEMM) {
    cdt = g->values[s->outputs[0]]->dtype;
    int r = anchor_prologue(&b, s, msg, cap, &reason);
    if (reason) goto done;
    define_value(&b, s->outputs[0], r);
    uint32_t v = s->outputs[0];
    if (b.last_use[v] == UINT32_MAX) b.busy[r] = 0;
  }
  for (uint32_t n = first; n < end && !reason; n++) {
    const bp_region_node_t* node = g->nodes[n];
    if (!cpu_region_node_fusable(node)) {
      reason = refuse(msg, cap, BP_SUPPORT_OP, "node %s%u is not an elementwise op a program can hold "
                      "(op, attributes or outputs)", "", n);
      break;
    }
    if (node->compute_dtype != cdt && cdt != BP_DTYPE_INVALID) {
      reason = refuse(msg, cap, BP_SUPPORT_DTYPE, "node %s%u computes in another dtype than the "
                      "program", "", n);
      break;
    }
    if (cdt == BP_DTYPE_INVALID) cdt = node->compute_dtype;
    const bp_binary_attrs_t* ba =
        (node->attrs && node->op_id != BP_OP_gelu) ? (const bp_binary_attrs_t*)node->attrs : NULL;
    uint32_t aux = 0;
    if (node->op_id == BP_OP_gelu && node->attrs) aux = ((const bp_gelu_attrs_t*)node->attrs)->approximate;
    if (node->op_id == BP_OP_div && ba) aux = ba->rounding_mode;
    int regs[3] = {0, 0, 0};
    int is_const[3] = {0, 0, 0};
    for (uint32_t i = 0; i < node->num_inputs && i < 3; i++) {
      int scalar = ba && ((i == 0 && (ba->flags & BP_BINARY_SELF_IS_SCALAR)) ||
                          (i == 1 && (ba->flags & BP_BINARY_OTHER_IS_SCALAR)));
      if (scalar) {
        regs[i] = const_reg(&b, &ba->scalar);
        is_const[i] = 1;
      } else if (node->inputs[i] == NONE_ID) {
        reason = refuse(msg, cap, BP_SUPPORT_ATTRIBUTE, "node %s%u has an absent operand", "", n);
        break;
      } else {
        regs[i] = value_reg(&b, node->inputs[i]);
      }
    }
    if (reason) break;
    for (uint32_t i = 0; i < node->num_inputs && i < 3; i++) {
      if (is_const[i]) b.busy[regs[i]] = 0;
      else release_value(&b, node->inputs[i], n);
    }
    int r = new_reg(&b);
    emit(&b, node->op_id, r, regs[0], regs[1], regs[2], aux);
    define_value(&b, node->outputs[0], r);
    if (b.last_use[node->outputs[0]] == UINT32_MAX) b.busy[r] = 0;
  }
  if (reason) goto done;
  if (b.full) {
    reason = refuse(msg, cap, BP_SUPPORT_SIZE, "the %sprogram exceeds the CPU's limits (%u "
                    "instructions, 32 registers, 16 inputs, 8 outputs)", "", CPU_EWP_MAX_INSTRS);
    goto done;
  }
  if (s->prog_nout == 0) {
    reason = refuse(msg, cap, BP_SUPPORT_OP, "the %sprogram writes no output argument%u", "", 0);
    goto done;
  }
  bp_ew_program_t prog = {
      .struct_size = sizeof prog, .num_instrs = b.ni, .num_registers = b.num_registers ? b.num_registers : 1,
      .num_inputs = s->prog_nin, .num_outputs = s->prog_nout, .num_constants = b.nc,
      .compute_dtype = cdt, .instr_stride = sizeof(bp_ew_instr_t), .instrs = b.ins,
      .constants = b.consts};
  reason = cpu_ewp_compile(&prog, &s->prog, msg, cap);
done:
  free(b.reg_of);
  free(b.last_use);
  return reason;
}

/* ---- steps ------------------------------------------------------------------ */
static void step_clear(cpu_step_t* s) {
  free(s->inputs);
  free(s->attrs);
  cpu_ewp_free(s->prog);
  memset(s, 0, sizeof *s);
}

void cpu_region_clear(struct bpp_executable_s* exe) {
  for (uint32_t i = 0; i < exe->num_steps; i++) step_clear(&exe->steps[i]);
  free(exe->steps);
  free(exe->values);
  free(exe->offsets);
  free(exe->aliases);
  free(exe->blob);
  exe->steps = NULL;
  exe->values = NULL;
  exe->offsets = NULL;
  exe->aliases = NULL;
  exe->blob = NULL;
  exe->num_steps = exe->num_aliases = 0;
}

/* A NODE-shaped step (kind set by the caller) copying the node. */
static int step_from_node(cpu_step_t* s, const bp_region_node_t* node, uint32_t kind) {
  memset(s, 0, sizeof *s);
  s->kind = kind;
  s->op_id = node->op_id;
  s->compute_dtype = node->compute_dtype;
  s->list_begin = node->list_begin;
  s->list_count = node->list_count;
  s->num_inputs = node->num_inputs;
  s->num_outputs = node->num_outputs;
  s->inputs = malloc(sizeof(uint32_t) * (node->num_inputs + node->num_outputs + 1));
  if (!s->inputs) return -1;
  s->outputs = s->inputs + node->num_inputs;
  memcpy(s->inputs, node->inputs, sizeof(uint32_t) * node->num_inputs);
  memcpy(s->outputs, node->outputs, sizeof(uint32_t) * node->num_outputs);
  const bp_kit_op_info_t* info = bp_kit_op_info(node->op_id);
  if (info && info->attrs_size && node->attrs) {
    s->attrs = malloc(info->attrs_size);
    if (!s->attrs) return -1;
    memcpy(s->attrs, node->attrs, info->attrs_size);
  }
  return 0;
}

bp_status_t cpu_region_node_support(bpp_device_t device, const bp_region_desc_t* g,
                                    const bp_region_node_t* node, bp_support_t* out) {
  const bp_tensor_desc_t* ptrs[64];
  bp_tensor_desc_t absent = {.struct_size = sizeof absent};
  uint32_t n = node->num_inputs + node->num_outputs;
  if (n > 64) return bp_kit_support_answer(out, BP_SUPPORT_SIZE, "cpu: a node of %u operands", n);
  for (uint32_t i = 0; i < node->num_inputs; i++)
    ptrs[i] = node->inputs[i] == NONE_ID ? &absent : g->values[node->inputs[i]];
  for (uint32_t k = 0; k < node->num_outputs; k++) ptrs[node->num_inputs + k] = g->values[node->outputs[k]];
  bp_op_call_t call = {.struct_size = sizeof call, .op_id = node->op_id, .num_inputs = node->num_inputs,
                       .num_outputs = node->num_outputs, .compute_dtype = node->compute_dtype,
                       .list_begin = node->list_begin, .list_count = node->list_count,
                       .inputs = ptrs, .outputs = ptrs + node->num_inputs, .attrs = node->attrs};
  return cpu_query_support(device, &call, out);
}

/* 0 when the plugin's kernel runs `node` as it stands, else the reason. */
static int node_supported(bpp_device_t device, const bp_region_desc_t* g, const bp_region_node_t* node,
                          char* msg, size_t cap) {
  bp_support_t sup = {.struct_size = sizeof sup};
  if (cpu_region_node_support(device, g, node, &sup) != BP_OK)
    return refuse(msg, cap, BP_SUPPORT_OP, "%s: support query failed%u", cpu_op_name(node->op_id), 0);
  if (!sup.supported) {
    bp_plugin_format(msg, cap, 0, "%s", sup.message);
    return sup.reason ? (int)sup.reason : BP_SUPPORT_OP;
  }
  if (sup.requires_contiguous)
    return refuse(msg, cap, BP_SUPPORT_LAYOUT, "%s needs dense operands (%u)", cpu_op_name(node->op_id), 0);
  return 0;
}

/* GEMM step for nodes[0] when it is a row-blockable product: mm, linear
 * with a rank-2 weight, addmm with alpha = beta = 1; f32 or f64. */
static int gemm_anchor(const bp_region_desc_t* g) {
  const bp_region_node_t* a = g->nodes[0];
  uint32_t dt = g->values[a->outputs[0]]->dtype;
  if (dt != BP_DTYPE_F32 && dt != BP_DTYPE_F64) return 0;
  if (a->op_id == BP_OP_mm) return 1;
  if (a->op_id == BP_OP_linear) return g->values[a->inputs[1]]->rank == 2 && g->values[a->inputs[0]]->rank >= 1;
  if (a->op_id == BP_OP_addmm) {
    const bp_addmm_attrs_t* at = a->attrs;
    return !at || (bp_kit_scalar_f64(&at->alpha, 1) == 1 && bp_kit_scalar_f64(&at->beta, 1) == 1);
  }
  return 0;
}

static int add_step(struct bpp_executable_s* exe, cpu_step_t** out) {
  cpu_step_t* s = realloc(exe->steps, sizeof *s * (exe->num_steps + 1));
  if (!s) return -1;
  exe->steps = s;
  *out = &s[exe->num_steps++];
  memset(*out, 0, sizeof **out);
  return 0;
}

static int build_steps(const bp_region_desc_t* g, struct bpp_executable_s* exe, char* msg, size_t cap) {
  cpu_step_t* s;
  int rc;
  switch (g->kind) {
    case BP_REGION_EW_PROGRAM:
      if (add_step(exe, &s)) return -1;
      s->kind = CPU_STEP_PROGRAM;
      s->prog_nin = g->num_inputs;
      s->prog_nout = g->num_args - g->num_inputs;
      if (s->prog_nin > CPU_EWP_MAX_INPUTS || s->prog_nout > CPU_EWP_MAX_OUTPUTS)
        return refuse(msg, cap, BP_SUPPORT_SIZE, "%sprogram with %u operands over the CPU's limits", "",
                      s->prog_nin + s->prog_nout);
      for (uint32_t k = 0; k < s->prog_nin; k++) s->prog_in[k] = k;
      for (uint32_t k = 0; k < s->prog_nout; k++) s->prog_out[k] = g->num_inputs + k;
      return cpu_ewp_compile(g->program, &s->prog, msg, cap);
    case BP_REGION_EPILOGUE: {
      const bp_region_node_t* a = g->nodes[0];
      if ((rc = node_supported(exe->device, g, a, msg, cap))) return rc;
      if (gemm_anchor(g)) {
        if (add_step(exe, &s) || step_from_node(s, a, CPU_STEP_GEMM)) return -1;
        return cpu_region_nodes_program(g, 1, s, msg, cap);
      }
      if (add_step(exe, &s) || step_from_node(s, a, CPU_STEP_NODE)) return -1;
      if (g->num_nodes == 1) return 0;
      if (add_step(exe, &s)) return -1;
      s->kind = CPU_STEP_PROGRAM;
      return cpu_region_nodes_program(g, 1, s, msg, cap);
    }
    case BP_REGION_PATTERN:
      if (!cpu_region_is_pattern(g->nodes[0]->op_id))
        return refuse(msg, cap, BP_SUPPORT_OP, "%s is not a fused pattern of the CPU plugin (softmax, "
                      "log_softmax, layer_norm, rms_norm, attention, add_*_norm, swiglu, geglu, linear; op %u)",
                      cpu_op_name(g->nodes[0]->op_id), g->nodes[0]->op_id);
      if ((rc = node_supported(exe->device, g, g->nodes[0], msg, cap))) return rc;
      if (add_step(exe, &s) || step_from_node(s, g->nodes[0], CPU_STEP_NODE)) return -1;
      return 0;
    default: { /* GRAPH */
      if (cpu_region_reduce_shape(g)) {
        const bp_region_node_t* red = g->nodes[g->num_nodes - 1];
        if ((rc = node_supported(exe->device, g, red, msg, cap)) || (rc = cpu_region_reduce_check(g, msg, cap)))
          return rc;
        if (add_step(exe, &s) || step_from_node(s, red, CPU_STEP_REDUCE)) return -1;
        return cpu_region_nodes_program(g, 0, s, msg, cap);
      }
      int all_ew = 1;
      for (uint32_t n = 0; n < g->num_nodes && all_ew; n++) all_ew = cpu_region_node_fusable(g->nodes[n]);
      if (all_ew) {
        if (add_step(exe, &s)) return -1;
        s->kind = CPU_STEP_PROGRAM;
        rc = cpu_region_nodes_program(g, 0, s, msg, cap);
        if (rc <= 0) return rc;
        /* Too large or mixed for one program: run node by node instead. */
        step_clear(s);
        exe->num_steps--;
      }
      for (uint32_t n = 0; n < g->num_nodes; n++) {
        if ((rc = node_supported(exe->device, g, g->nodes[n], msg, cap))) return rc;
        if (add_step(exe, &s) || step_from_node(s, g->nodes[n], CPU_STEP_NODE)) return -1;
      }
      return 0;
    }
  }
}

/* Output arguments that may share memory with an input argument: in
 * programs, any pair of one shape and element size (each element is read
 * before it is written). */
static int build_aliases(const bp_region_desc_t* g, struct bpp_executable_s* exe) {
  if (exe->num_steps != 1 || exe->steps[0].kind != CPU_STEP_PROGRAM) return 0;
  exe->aliases = calloc((size_t)g->num_args * g->num_args + 1, sizeof *exe->aliases);
  if (!exe->aliases) return -1;
  for (uint32_t o = g->num_inputs; o < g->num_args; o++)
    for (uint32_t i = 0; i < g->num_inputs; i++) {
      const bp_tensor_desc_t *a = g->values[o], *b = g->values[i];
      if (a->rank != b->rank || bp_dtype_size(a->dtype) != bp_dtype_size(b->dtype) ||
          memcmp(a->sizes, b->sizes, sizeof(int64_t) * a->rank) != 0)
        continue;
      exe->aliases[exe->num_aliases++] = (bp_region_alias_t){o, i};
    }
  return 0;
}

int cpu_region_build(const bp_region_desc_t* g, struct bpp_executable_s* exe, char* msg, size_t cap) {
  exe->kind = g->kind;
  exe->num_values = g->num_values;
  exe->num_args = g->num_args;
  exe->num_inputs = g->num_inputs;
  exe->values = calloc(g->num_values ? g->num_values : 1, sizeof *exe->values);
  exe->offsets = calloc(g->num_values ? g->num_values : 1, sizeof *exe->offsets);
  if (!exe->values || !exe->offsets) return -1;
  uint64_t ws = 0;
  for (uint32_t v = 0; v < g->num_values; v++) {
    const bp_tensor_desc_t* d = g->values[v];
    bp_tensor_desc_t* e = &exe->values[v];
    memset(e, 0, sizeof *e);
    e->struct_size = sizeof *e;
    e->dtype = d->dtype;
    e->rank = d->rank;
    int64_t s = 1;
    for (uint32_t i = d->rank; i-- > 0;) {
      e->sizes[i] = d->sizes[i];
      e->strides[i] = s;
      s *= d->sizes[i];
    }
    if (v >= g->num_args) { /* a temporary in the workspace */
      exe->offsets[v] = ws;
      uint64_t bytes = (uint64_t)s * bp_dtype_size(d->dtype);
      ws += (bytes + WS_ALIGN - 1) / WS_ALIGN * WS_ALIGN;
    }
    exe->bytes += v < g->num_args ? (double)s * (double)bp_dtype_size(d->dtype) : 0.0;
  }
  int rc = build_steps(g, exe, msg, cap);
  if (rc) return rc;
  /* Temporaries a program keeps in registers need no workspace, but the
   * layout stays simple: every temporary has its slot. A GEMM whose product
   * is a temporary writes it to the first output of the product's shape
   * and dtype when there is one (then its slot is unused). */
  for (uint32_t i = 0; i < exe->num_steps; i++) {
    cpu_step_t* s = &exe->steps[i];
    if (s->kind != CPU_STEP_GEMM) continue;
    uint32_t prod = s->outputs[0];
    s->gemm_target = prod;
    if (prod < g->num_args) continue;
    for (uint32_t k = 0; k < s->prog_nout; k++) {
      const bp_tensor_desc_t *o = g->values[s->prog_out[k]], *p = g->values[prod];
      if (o->dtype == p->dtype && o->rank == p->rank &&
          memcmp(o->sizes, p->sizes, sizeof(int64_t) * o->rank) == 0) {
        s->gemm_target = s->prog_out[k];
        break;
      }
    }
  }
  int needs_ws = 0;
  for (uint32_t i = 0; i < exe->num_steps; i++) {
    const cpu_step_t* s = &exe->steps[i];
    if (s->kind == CPU_STEP_NODE) needs_ws |= 1;
    if (s->kind == CPU_STEP_GEMM && s->gemm_target >= g->num_args) needs_ws |= 1;
  }
  exe->workspace = needs_ws ? ws : 0;
  for (uint32_t i = 0; i < exe->num_steps; i++) {
    const cpu_step_t* s = &exe->steps[i];
    if (s->kind == CPU_STEP_GEMM || (s->kind == CPU_STEP_NODE && bp_op_family(s->op_id) == BP_OP_FAMILY_MATMUL)) {
      const bp_tensor_desc_t* o = g->values[s->outputs[0]];
      double mn = 1;
      for (uint32_t d = 0; d < o->rank; d++) mn *= (double)o->sizes[d];
      const bp_tensor_desc_t* a = g->values[s->inputs[s->op_id == BP_OP_addmm ? 1 : 0]];
      exe->flops += 2.0 * mn * (double)(a->rank ? a->sizes[a->rank - 1] : 1);
    }
  }
  return build_aliases(g, exe);
}
