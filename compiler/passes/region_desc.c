/* Regions: a descriptor (bp_region_desc_t) from a set of graph nodes.
 *
 * Arguments: the values the nodes read from outside the set (graph inputs,
 * constants, other nodes' outputs), then the values they write that are
 * read outside the set or are graph outputs; every other value the nodes
 * write is a temporary of the region. Kinds:
 *  - EW_PROGRAM: every node an elementwise op a program holds (no
 *    attributes but gelu's approximation, div's rounding mode and binary
 *    scalars; one dtype throughout): the program is built here, inputs
 *    loaded first, registers reused after a value's last read, one STORE
 *    per output argument (a multi-output program where several values
 *    escape);
 *  - EPILOGUE: an mm / addmm / linear first, elementwise nodes after it;
 *  - GRAPH: anything else (the plugin decides).
 * Descriptors are dense (strides ignored by compile); everything is owned
 * by the bpg_rdesc_t.
 */
#include <stdlib.h>
#include <string.h>

#include "../graph_exec.h"

#define BPG_EWP_MAX_REGS 255u

struct bpg_rdesc {
  bp_region_desc_t desc;
  bp_tensor_desc_t* vdesc;
  const bp_tensor_desc_t** vptr;
  bp_region_node_t* nodes;
  const bp_region_node_t** nptr;
  uint32_t* ids;
  bp_ew_program_t program;
  bp_ew_instr_t* instrs;
  bp_scalar_t* consts;
};

const bp_region_desc_t* bpg_region_desc(const bpg_rdesc_t* d) { return &d->desc; }

void bpg_region_desc_free(bpg_rdesc_t* d) {
  if (d == NULL) return;
  free(d->vdesc);
  free(d->vptr);
  free(d->nodes);
  free(d->nptr);
  free(d->ids);
  free(d->instrs);
  free(d->consts);
  free(d);
}

/* Attributes a program carries: none, gelu's approximation, div's
 * rounding mode, a binary op's scalar operand; alpha must be 1. */
static int bpg_ew_attrs_ok(const bpg_node_t* n) {
  if (n->attrs == NULL || n->op == BP_OP_gelu) return 1;
  if (n->op != BP_OP_add && n->op != BP_OP_sub && n->op != BP_OP_mul && n->op != BP_OP_div) return 0;
  const bp_binary_attrs_t* a = n->attrs;
  if (a->flags & BP_BINARY_SELF_IS_SCALAR) return 0;
  if (a->alpha.kind == BP_SCALAR_INT && a->alpha.v.i != 1) return 0;
  if (a->alpha.kind == BP_SCALAR_FLOAT && a->alpha.v.f != 1.0) return 0;
  if (a->alpha.kind != BP_SCALAR_NONE && a->alpha.kind != BP_SCALAR_INT && a->alpha.kind != BP_SCALAR_FLOAT) return 0;
  return n->op == BP_OP_div || a->rounding_mode == 0;
}

static int bpg_is_float(uint32_t dt) {
  return dt == BP_DTYPE_F32 || dt == BP_DTYPE_F64 || dt == BP_DTYPE_F16 || dt == BP_DTYPE_BF16;
}

/* 1 when node n fits a program of compute dtype *dt (set by the first node). */
int bpg_region_ew_node(const bp_graph_t* g, uint32_t n, uint32_t* dt) {
  const bpg_node_t* node = &g->nodes[n];
  if (!bp_op_is_elementwise(node->op) || node->num_out != 1 || node->num_in < 1 || node->num_in > 3) return 0;
  if (!bpg_ew_attrs_ok(node)) return 0;
  bp_op_info_t info = {.struct_size = sizeof(info)};
  if (bp_op_get_info(node->op, &info) != BP_OK) return 0;
  uint32_t want = *dt ? *dt : g->values[node->out[0]].dtype;
  if (!bpg_is_float(want)) return 0;
  for (uint32_t i = 0; i < node->num_in; ++i) {
    uint32_t v = node->in[i];
    if (v == BP_GRAPH_NO_VALUE) {
      const bp_binary_attrs_t* a = node->attrs;
      if (i != 1 || a == NULL || !(a->flags & BP_BINARY_OTHER_IS_SCALAR)) return 0;
      continue;
    }
    if (g->values[v].dtype != want) return 0;
  }
  if (g->values[node->out[0]].dtype != want) return 0;
  *dt = want;
  return 1;
}

static int bpg_is_anchor(uint32_t op) { return op == BP_OP_mm || op == BP_OP_addmm || op == BP_OP_linear; }

/* ---- the program ---- */
typedef struct bpg_ewb {
  bpg_rdesc_t* d;
  uint32_t* reg_of;   /* per local value: register + 1 (0: none) */
  uint32_t* last;     /* per local value: last node (position) that reads it */
  uint8_t busy[256];
  uint32_t nregs, ni, nc;
  int full;
} bpg_ewb_t;

static uint32_t bpg_ewb_reg(bpg_ewb_t* b) {
  for (uint32_t r = 0; r < BPG_EWP_MAX_REGS; ++r) {
    if (!b->busy[r]) {
      b->busy[r] = 1;
      if (r + 1 > b->nregs) b->nregs = r + 1;
      return r;
    }
  }
  b->full = 1;
  return 0;
}

static void bpg_ewb_emit(bpg_ewb_t* b, uint32_t opc, uint32_t dst, uint32_t a, uint32_t bb, uint32_t c, uint32_t aux) {
  bp_ew_instr_t* in = &b->d->instrs[b->ni++];
  memset(in, 0, sizeof(*in));
  in->opcode = opc;
  in->dst = (uint8_t)dst;
  in->a = (uint8_t)a;
  in->b = (uint8_t)bb;
  in->c = (uint8_t)c;
  in->aux = aux;
}

static bp_status_t bpg_build_program(bpg_rdesc_t* d, uint32_t dt) {
  const bp_region_desc_t* r = &d->desc;
  uint32_t nv = r->num_values, nn = r->num_nodes;
  if (r->num_inputs > 255 || r->num_args - r->num_inputs > 255) {
    return bpg_error(BP_INVALID_ARGUMENT, "regions: %u inputs and %u outputs are too many for a program", r->num_inputs,
                     r->num_args - r->num_inputs);
  }
  size_t cap = (size_t)nn + r->num_args + 1; /* a load per input, an op per node, a store per output */
  d->instrs = calloc(cap + nn, sizeof(bp_ew_instr_t));
  d->consts = calloc(nn + 1, sizeof(bp_scalar_t));
  bpg_ewb_t b = {.d = d};
  b.reg_of = calloc(nv + 1, sizeof(uint32_t));
  b.last = calloc(nv + 1, sizeof(uint32_t));
  if (d->instrs == NULL || d->consts == NULL || b.reg_of == NULL || b.last == NULL) {
    free(b.reg_of);
    free(b.last);
    return bpg_error(BP_RESOURCE_EXHAUSTED, "regions: out of memory");
  }
  for (uint32_t n = 0; n < nn; ++n) {
    for (uint32_t i = 0; i < r->nodes[n]->num_inputs; ++i) {
      uint32_t v = r->nodes[n]->inputs[i];
      if (v != BP_REGION_VALUE_NONE) b.last[v] = n + 1;
    }
  }
  /* Every input is loaded before anything is stored: a plugin may let an
   * output take an input's memory (donation), which holds only when each
   * element of the input is read before the output's element is written. */
  for (uint32_t v = 0; v < r->num_inputs && !b.full; ++v) {
    if (b.last[v] == 0) continue;
    uint32_t reg = bpg_ewb_reg(&b);
    bpg_ewb_emit(&b, BP_EW_LOAD_INPUT, reg, v, 0, 0, 0);
    b.reg_of[v] = reg + 1;
  }
  for (uint32_t n = 0; n < nn && !b.full; ++n) {
    const bp_region_node_t* node = r->nodes[n];
    uint32_t regs[3] = {0, 0, 0};
    uint8_t is_const[3] = {0, 0, 0};
    uint32_t aux = 0;
    const bp_binary_attrs_t* ba = node->op_id == BP_OP_gelu ? NULL : node->attrs;
    if (node->op_id == BP_OP_gelu && node->attrs) aux = ((const bp_gelu_attrs_t*)node->attrs)->approximate;
    if (node->op_id == BP_OP_div && ba) aux = ba->rounding_mode;
    for (uint32_t i = 0; i < node->num_inputs && i < 3; ++i) {
      uint32_t v = node->inputs[i];
      if (v == BP_REGION_VALUE_NONE) { /* the binary op's scalar operand */
        d->consts[b.nc] = ba->scalar;
        regs[i] = bpg_ewb_reg(&b);
        bpg_ewb_emit(&b, BP_EW_LOAD_CONST, regs[i], b.nc++, 0, 0, 0);
        is_const[i] = 1;
      } else {
        regs[i] = b.reg_of[v] - 1;
      }
    }
    /* Registers of values read for the last time are free for the result. */
    for (uint32_t i = 0; i < node->num_inputs && i < 3; ++i) {
      uint32_t v = node->inputs[i];
      if (is_const[i]) b.busy[regs[i]] = 0;
      else if (b.last[v] == n + 1) b.busy[regs[i]] = 0;
    }
    uint32_t out = node->outputs[0];
    uint32_t dst = bpg_ewb_reg(&b);
    bpg_ewb_emit(&b, node->op_id, dst, regs[0], regs[1], regs[2], aux);
    b.reg_of[out] = dst + 1;
    if (out >= r->num_inputs && out < r->num_args) {
      bpg_ewb_emit(&b, BP_EW_STORE, 0, out - r->num_inputs, dst, 0, 0);
    }
    if (b.last[out] == 0) b.busy[dst] = 0; /* never read inside */
  }
  free(b.reg_of);
  free(b.last);
  if (b.full) return bpg_error(BP_UNIMPLEMENTED, "regions: the program needs more than %u registers", BPG_EWP_MAX_REGS);
  bp_ew_program_t* p = &d->program;
  memset(p, 0, sizeof(*p));
  p->struct_size = sizeof(*p);
  p->num_instrs = b.ni;
  p->num_registers = b.nregs ? b.nregs : 1;
  p->num_inputs = r->num_inputs;
  p->num_outputs = r->num_args - r->num_inputs;
  p->num_constants = b.nc;
  p->compute_dtype = dt;
  p->instr_stride = sizeof(bp_ew_instr_t);
  p->instrs = d->instrs;
  p->constants = d->consts;
  d->desc.program = p;
  return BP_OK;
}

/* ---- the descriptor ---- */
bp_status_t bpg_region_desc_build(const bp_graph_exec_t* x, bpg_region_t* r, uint32_t want_kind, bpg_rdesc_t** out) {
  const bp_graph_t* g = x->g;
  uint32_t nv = g->num_values;
  bpg_rdesc_t* d = calloc(1, sizeof(*d));
  uint32_t* local = malloc(sizeof(uint32_t) * (nv + 1));
  uint8_t* member = calloc(g->num_nodes + 1, 1);
  uint8_t* read_out = calloc(nv + 1, 1); /* read by a live node outside, or a graph output */
  uint32_t* order = malloc(sizeof(uint32_t) * (nv + 1));
  bp_status_t st = BP_OK;
  if (d == NULL || local == NULL || member == NULL || read_out == NULL || order == NULL) {
    st = bpg_error(BP_RESOURCE_EXHAUSTED, "regions: out of memory");
    goto done;
  }
  memset(local, 0xFF, sizeof(uint32_t) * (nv + 1));
  for (uint32_t k = 0; k < r->num_nodes; ++k) member[r->nodes[k]] = 1;
  for (uint32_t n = 0; n < g->num_nodes; ++n) {
    if (g->nodes[n].dead || member[n]) continue;
    for (uint32_t i = 0; i < g->nodes[n].num_in; ++i) {
      if (g->nodes[n].in[i] != BP_GRAPH_NO_VALUE) read_out[g->nodes[n].in[i]] = 1;
    }
  }
  for (uint32_t i = 0; i < g->num_outputs; ++i) read_out[g->outputs[i]] = 1;
  /* Inputs in first-read order, then escaping outputs, then temporaries. */
  uint32_t no = 0, ni = 0, nops = 0;
  for (uint32_t k = 0; k < r->num_nodes; ++k) {
    const bpg_node_t* node = &g->nodes[r->nodes[k]];
    nops += node->num_in + node->num_out;
    for (uint32_t i = 0; i < node->num_in; ++i) {
      uint32_t v = node->in[i];
      if (v == BP_GRAPH_NO_VALUE || local[v] != UINT32_MAX) continue;
      const bpg_value_t* val = &g->values[v];
      if (val->kind == BP_GRAPH_VALUE_NODE && val->producer < g->num_nodes && member[val->producer]) continue;
      local[v] = ni;
      order[ni++] = v;
    }
  }
  for (uint32_t k = 0; k < r->num_nodes; ++k) {
    const bpg_node_t* node = &g->nodes[r->nodes[k]];
    for (uint32_t j = 0; j < node->num_out; ++j) {
      if (read_out[node->out[j]]) {
        local[node->out[j]] = ni + no;
        order[ni + no++] = node->out[j];
      }
    }
  }
  if (no == 0) {
    st = bpg_error(BP_INVALID_ARGUMENT, "regions: the region's values are read by nobody outside it");
    goto done;
  }
  uint32_t nvals = ni + no;
  for (uint32_t k = 0; k < r->num_nodes; ++k) {
    const bpg_node_t* node = &g->nodes[r->nodes[k]];
    for (uint32_t j = 0; j < node->num_out; ++j) {
      if (local[node->out[j]] == UINT32_MAX) {
        local[node->out[j]] = nvals;
        order[nvals++] = node->out[j];
      }
    }
  }
  d->vdesc = calloc(nvals + 1, sizeof(bp_tensor_desc_t));
  d->vptr = calloc(nvals + 1, sizeof(*d->vptr));
  d->nodes = calloc(r->num_nodes + 1, sizeof(bp_region_node_t));
  d->nptr = calloc(r->num_nodes + 1, sizeof(*d->nptr));
  d->ids = malloc(sizeof(uint32_t) * (nops + 1));
  free(r->args);
  r->args = malloc(sizeof(uint32_t) * (ni + no + 1));
  if (d->vdesc == NULL || d->vptr == NULL || d->nodes == NULL || d->nptr == NULL || d->ids == NULL || r->args == NULL) {
    st = bpg_error(BP_RESOURCE_EXHAUSTED, "regions: out of memory");
    goto done;
  }
  for (uint32_t i = 0; i < nvals; ++i) {
    bpg_value_desc(g, &g->values[order[i]], x->syms, &d->vdesc[i]);
    d->vptr[i] = &d->vdesc[i];
  }
  memcpy(r->args, order, sizeof(uint32_t) * (ni + no));
  r->num_inputs = ni;
  r->num_outputs = no;
  uint32_t* ids = d->ids;
  uint32_t dt = 0;
  int ew = 1;
  for (uint32_t k = 0; k < r->num_nodes; ++k) {
    const bpg_node_t* node = &g->nodes[r->nodes[k]];
    bp_region_node_t* rn = &d->nodes[k];
    rn->struct_size = sizeof(*rn);
    rn->op_id = node->op;
    rn->num_inputs = node->num_in;
    rn->num_outputs = node->num_out;
    rn->attrs = node->attrs;
    for (uint32_t i = 0; i < node->num_in; ++i) {
      ids[i] = node->in[i] == BP_GRAPH_NO_VALUE ? BP_REGION_VALUE_NONE : local[node->in[i]];
    }
    for (uint32_t j = 0; j < node->num_out; ++j) ids[node->num_in + j] = local[node->out[j]];
    rn->inputs = ids;
    rn->outputs = ids + node->num_in;
    ids += node->num_in + node->num_out;
    d->nptr[k] = rn;
    if (ew) ew = bpg_region_ew_node(g, r->nodes[k], &dt);
  }
  int epi = bpg_is_anchor(g->nodes[r->nodes[0]].op);
  for (uint32_t k = 1; k < r->num_nodes && epi; ++k) {
    uint32_t t = 0;
    epi = bpg_region_ew_node(g, r->nodes[k], &t);
  }
  uint32_t kind = want_kind ? want_kind : ew ? BP_REGION_EW_PROGRAM : epi && r->num_nodes > 1 ? BP_REGION_EPILOGUE : BP_REGION_GRAPH;
  bp_region_desc_t* rd = &d->desc;
  rd->struct_size = sizeof(*rd);
  rd->kind = kind;
  rd->num_values = nvals;
  rd->num_args = ni + no;
  rd->num_inputs = ni;
  rd->num_nodes = r->num_nodes;
  rd->values = d->vptr;
  rd->nodes = d->nptr;
  r->kind = kind;
  if (kind == BP_REGION_EW_PROGRAM) {
    if (!ew) {
      st = bpg_error(BP_INVALID_ARGUMENT, "regions: a node does not fit an elementwise program");
      goto done;
    }
    st = bpg_build_program(d, dt);
    /* A program region has no nodes: the program is the region. */
    rd->num_nodes = 0;
    rd->nodes = NULL;
    rd->num_values = ni + no;
  }
done:
  free(local);
  free(member);
  free(read_out);
  free(order);
  if (st != BP_OK) {
    bpg_region_desc_free(d);
    return st;
  }
  *out = d;
  return BP_OK;
}
