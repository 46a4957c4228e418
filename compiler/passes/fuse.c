/* Pass: fusion into the op set's fused forms, after placement.
 *
 * Patterns (both nodes on one device, and that device's support query says
 * yes to the fused node at its shapes; otherwise nothing changes):
 *  - epilogue: linear(x, w, b) whose only reader is an activation (relu,
 *    gelu erf or tanh, silu, sigmoid, tanh) becomes one linear with that
 *    activation (bp_linear_attrs_t.activation): the activation runs on the
 *    GEMM output while it is in cache and one buffer disappears;
 *  - residual + norm: add(a, b) read by layer_norm as its input (whose mean
 *    and rstd nobody reads) becomes add_layer_norm(a, b, w, bias), whose
 *    second output replaces the sum for its other readers (all after the
 *    norm, so the order stays topological);
 *  - attention (fuse_attention.c): bmm(softmax(bmm(q, k^T) * scale [+ mask]), v)
 *    becomes scaled_dot_product_attention.
 * The fused node takes the place of the later node, the earlier one dies,
 * and every fusion is recorded for the report. Regions compiled by the
 * plugins (elementwise programs and the exec table) come on top of this.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../graph_exec.h"

bp_status_t bpg_fuse_supported(bp_graph_exec_t* x, uint32_t n, int* out_ok) {
  bp_support_t s;
  bp_status_t st = bpg_claim(x, n, x->node_dev[n], &s);
  *out_ok = st == BP_OK && s.supported;
  return st == BP_INVALID_ARGUMENT ? BP_OK : st; /* a fused form the op's rules refuse: not fused */
}

static uint32_t bpg_activation_of(const bpg_node_t* act) {
  switch (act->op) {
    case BP_OP_relu: return BP_ACTIVATION_RELU;
    case BP_OP_silu: return BP_ACTIVATION_SILU;
    case BP_OP_sigmoid: return BP_ACTIVATION_SIGMOID;
    case BP_OP_tanh: return BP_ACTIVATION_TANH;
    case BP_OP_gelu: {
      const bp_gelu_attrs_t* a = act->attrs;
      return a != NULL && a->approximate == BP_GELU_TANH ? BP_ACTIVATION_GELU_TANH : BP_ACTIVATION_GELU_ERF;
    }
    default: return BP_ACTIVATION_NONE;
  }
}

void bpg_fuse_note(bp_graph_exec_t* x, const char* kind, uint32_t a, uint32_t op_a, uint32_t b, uint32_t op_b,
                     const char* as) {
  if (x->num_fusions >= BPG_MAX_FUSIONS) return;
  bpg_fusion_t* f = &x->fusions[x->num_fusions++];
  f->first = a;
  f->second = b;
  f->ops[0] = op_a;
  f->ops[1] = op_b;
  snprintf(f->kind, sizeof(f->kind), "%s", kind);
  snprintf(f->as, sizeof(f->as), "%.47s", as);
}

/* The only live reader of value v (UINT32_MAX: none or several, or a graph output). */
uint32_t bpg_fuse_sole_reader(const bp_graph_t* g, const uint32_t* uses, uint32_t v, uint32_t from) {
  if (uses[v] != 1) return UINT32_MAX;
  for (uint32_t m = from; m < g->num_nodes; ++m) {
    if (g->nodes[m].dead) continue;
    for (uint32_t i = 0; i < g->nodes[m].num_in; ++i) {
      if (g->nodes[m].in[i] == v) return m;
    }
  }
  return UINT32_MAX; /* the one use is a graph output */
}

static bp_status_t bpg_fuse_epilogue(bp_graph_exec_t* x, uint32_t n, const uint32_t* uses, int* done) {
  bp_graph_t* g = x->g;
  bpg_node_t* lin = &g->nodes[n];
  const bp_linear_attrs_t* la = lin->attrs;
  *done = 0;
  if (la != NULL && la->activation != BP_ACTIVATION_NONE) return BP_OK;
  uint32_t m = bpg_fuse_sole_reader(g, uses, lin->out[0], n + 1);
  if (m == UINT32_MAX || x->node_dev[m] != x->node_dev[n]) return BP_OK;
  bpg_node_t* act = &g->nodes[m];
  uint32_t kind = bpg_activation_of(act);
  if (kind == BP_ACTIVATION_NONE || act->num_in != 1) return BP_OK;
  /* Try it: set the activation, ask the device, undo when it says no. */
  void* old = lin->attrs;
  uint32_t old_size = lin->attrs_size;
  bp_linear_attrs_t* na = calloc(1, sizeof(*na));
  if (na == NULL) return bpg_error(BP_RESOURCE_EXHAUSTED, "fuse: out of memory");
  na->struct_size = sizeof(*na);
  na->activation = kind;
  lin->attrs = na;
  lin->attrs_size = sizeof(*na);
  int ok = 0;
  bp_status_t st = bpg_fuse_supported(x, n, &ok);
  if (st != BP_OK || !ok) {
    free(na);
    lin->attrs = old;
    lin->attrs_size = old_size;
    return st;
  }
  free(old);
  /* The linear now writes the activation's value. */
  uint32_t lin_out = lin->out[0];
  uint32_t act_out = act->out[0];
  act->dead = 1;
  lin->out[0] = act_out;
  g->values[act_out].producer = n;
  g->values[act_out].out_index = 0;
  g->values[lin_out].producer = UINT32_MAX; /* orphaned: no node writes it now */
  g->values[lin_out].dtype = BP_DTYPE_INVALID;
  char as[64];
  snprintf(as, sizeof(as), "linear {activation=%u}", kind);
  bpg_fuse_note(x, "epilogue", n, BP_OP_linear, m, act->op, as);
  *done = 1;
  return BP_OK;
}

static int bpg_add_plain(const bpg_node_t* add) {
  const bp_binary_attrs_t* a = add->attrs;
  if (add->op != BP_OP_add || add->num_in != 2) return 0;
  return a == NULL || (a->flags == 0 && (a->alpha.kind == BP_SCALAR_NONE ||
                                         (a->alpha.kind == BP_SCALAR_INT && a->alpha.v.i == 1) ||
                                         (a->alpha.kind == BP_SCALAR_FLOAT && a->alpha.v.f == 1.0)));
}

static bp_status_t bpg_fuse_add_norm(bp_graph_exec_t* x, uint32_t n, const uint32_t* uses, int* done) {
  bp_graph_t* g = x->g;
  bpg_node_t* add = &g->nodes[n];
  *done = 0;
  if (!bpg_add_plain(add)) return BP_OK;
  uint32_t s = add->out[0];
  /* The first reader of the sum must be a layer_norm on it; every other reader comes later. */
  uint32_t m = UINT32_MAX;
  for (uint32_t k = n + 1; k < g->num_nodes && m == UINT32_MAX; ++k) {
    if (g->nodes[k].dead) continue;
    for (uint32_t i = 0; i < g->nodes[k].num_in; ++i) {
      if (g->nodes[k].in[i] == s) {
        m = k;
        break;
      }
    }
  }
  if (m == UINT32_MAX || x->node_dev[m] != x->node_dev[n]) return BP_OK;
  bpg_node_t* ln = &g->nodes[m];
  if (ln->op != BP_OP_layer_norm || ln->num_in != 3 || ln->in[0] != s || ln->in[1] == s || ln->in[2] == s) return BP_OK;
  if (uses[ln->out[1]] != 0 || uses[ln->out[2]] != 0) return BP_OK;
  uint32_t* blk = malloc(sizeof(uint32_t) * 6);
  if (blk == NULL) return bpg_error(BP_RESOURCE_EXHAUSTED, "fuse: out of memory");
  uint32_t* old_in = ln->in;
  uint32_t old_nin = ln->num_in, old_nout = ln->num_out, old_op = ln->op;
  uint32_t* old_out = ln->out;
  blk[0] = add->in[0];
  blk[1] = add->in[1];
  blk[2] = old_in[1];
  blk[3] = old_in[2];
  blk[4] = old_out[0];
  blk[5] = s;
  ln->op = BP_OP_add_layer_norm;
  ln->in = blk;
  ln->num_in = 4;
  ln->out = blk + 4;
  ln->num_out = 2;
  int ok = 0;
  bp_status_t st = bpg_fuse_supported(x, m, &ok);
  if (st != BP_OK || !ok) {
    ln->op = old_op;
    ln->in = old_in;
    ln->num_in = old_nin;
    ln->out = old_out;
    ln->num_out = old_nout;
    free(blk);
    return st;
  }
  g->values[old_out[1]].producer = UINT32_MAX;
  g->values[old_out[2]].producer = UINT32_MAX;
  g->values[old_out[1]].dtype = BP_DTYPE_INVALID;
  g->values[old_out[2]].dtype = BP_DTYPE_INVALID;
  free(old_in);
  add->dead = 1;
  g->values[s].producer = m;
  g->values[s].out_index = 1;
  bpg_fuse_note(x, "pattern", n, BP_OP_add, m, BP_OP_layer_norm, "add_layer_norm");
  *done = 1;
  return BP_OK;
}

bp_status_t bpg_pass_fuse(bp_graph_exec_t* x) {
  bp_graph_t* g = x->g;
  uint32_t* uses = NULL;
  bp_status_t st = bpg_use_counts(g, &uses);
  for (uint32_t n = 0; n < g->num_nodes && st == BP_OK; ++n) {
    bpg_node_t* node = &g->nodes[n];
    if (node->dead || (node->op != BP_OP_linear && node->op != BP_OP_add && node->op != BP_OP_bmm)) continue;
    int done = 0;
    st = node->op == BP_OP_linear ? bpg_fuse_epilogue(x, n, uses, &done)
         : node->op == BP_OP_bmm  ? bpg_fuse_attention(x, n, uses, &done)
                                  : bpg_fuse_add_norm(x, n, uses, &done);
    if (st == BP_OK && done) {
      /* Uses changed: count again (fusions are few). */
      free(uses);
      uses = NULL;
      st = bpg_use_counts(g, &uses);
    }
  }
  free(uses);
  if (st != BP_OK) return st;
  /* Nodes per device after fusion. */
  for (uint32_t d = 0; d < x->num_devs; ++d) x->devs[d].num_nodes = 0;
  for (uint32_t n = 0; n < g->num_nodes; ++n) {
    if (!g->nodes[n].dead) x->devs[x->node_dev[n]].num_nodes++;
  }
  return BP_OK;
}
