/* Horizontal fusion: linears that share their input (the q, k and v
 * projections of attention) with constant weights (and constant biases, or
 * none) and the same activation become one linear over the weights
 * concatenated along the output features, at compile time (the new
 * constants are the executable's), followed by one slice view per former
 * linear: one GEMM reads the input once instead of three times.
 *
 * It runs in the back before placement, inside decompose's rebuild of the
 * graph (passes/decompose.c): the fused linear and its slices are emitted
 * where the first linear of the group was, the others are dropped (their
 * readers all come after the first one, so the order stays topological).
 * BP_GRAPH_NO_FUSE turns it off. The report lists each group as a
 * "horizontal" fusion.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../graph_exec.h"

static uint32_t bpg_activation(const bpg_node_t* n) {
  const bp_linear_attrs_t* a = n->attrs;
  return a != NULL ? a->activation : BP_ACTIVATION_NONE;
}

/* 1 when linear node m can join a group led by linear node n. */
static int bpg_joins(const bp_graph_t* g, const bpg_node_t* n, const bpg_node_t* m) {
  if (m->dead || m->op != BP_OP_linear || m->num_in != 3 || m->in[0] != n->in[0]) return 0;
  const bpg_value_t* x = &g->values[n->in[0]];
  const bpg_value_t* wn = &g->values[n->in[1]];
  const bpg_value_t* wm = &g->values[m->in[1]];
  if (wm->kind != BP_GRAPH_VALUE_CONSTANT || wm->rank != 2 || wm->dtype != x->dtype || wm->dtype != wn->dtype ||
      wm->dims[1] != wn->dims[1] || bpg_activation(m) != bpg_activation(n)) {
    return 0;
  }
  if ((n->in[2] == BP_GRAPH_NO_VALUE) != (m->in[2] == BP_GRAPH_NO_VALUE)) return 0;
  if (m->in[2] == BP_GRAPH_NO_VALUE) return 1;
  const bpg_value_t* b = &g->values[m->in[2]];
  return b->kind == BP_GRAPH_VALUE_CONSTANT && b->rank == 1 && b->dtype == wm->dtype && b->dims[0] == wm->dims[0];
}

uint32_t bpg_qkv_pick(const bp_graph_exec_t* x, uint32_t* leader) {
  const bp_graph_t* g = x->g;
  uint32_t groups = 0;
  for (uint32_t n = 0; n < g->num_nodes; ++n) leader[n] = UINT32_MAX;
  if (x->flags & BP_GRAPH_NO_FUSE) return 0;
  for (uint32_t n = 0; n < g->num_nodes; ++n) {
    const bpg_node_t* node = &g->nodes[n];
    if (leader[n] != UINT32_MAX || !bpg_joins(g, node, node)) continue;
    uint32_t count = 1;
    for (uint32_t m = n + 1; m < g->num_nodes; ++m) {
      if (leader[m] == UINT32_MAX && bpg_joins(g, node, &g->nodes[m])) count++;
    }
    if (count < 2) continue;
    leader[n] = n;
    for (uint32_t m = n + 1; m < g->num_nodes; ++m) {
      if (leader[m] == UINT32_MAX && bpg_joins(g, node, &g->nodes[m])) leader[m] = n;
    }
    groups++;
  }
  return groups;
}

/* The members' constants (operand `k` of each) concatenated along dim 0
 * into a new constant of the rebuilt graph. */
static bp_status_t bpg_concat(bpg_rebuild_t* rb, bp_graph_t* old, const uint32_t* members, uint32_t nm, uint32_t k,
                              uint32_t* out) {
  uint64_t total = 0;
  int64_t rows = 0;
  for (uint32_t i = 0; i < nm; ++i) {
    bpg_value_t* c = &old->values[old->nodes[members[i]].in[k]];
    bp_status_t st = bpg_const_materialize(c);
    if (st != BP_OK) return st;
    total += c->cst->size;
    rows += c->dims[0];
  }
  uint8_t* data = malloc(total ? total : 1);
  if (data == NULL) return bpg_error(BP_RESOURCE_EXHAUSTED, "fuse: out of memory");
  uint64_t at = 0;
  for (uint32_t i = 0; i < nm; ++i) {
    const bpg_value_t* c = &old->values[old->nodes[members[i]].in[k]];
    memcpy(data + at, c->cst->data, c->cst->size);
    at += c->cst->size;
  }
  const bpg_value_t* first = &old->values[old->nodes[members[0]].in[k]];
  int64_t dims[2] = {rows, first->rank == 2 ? first->dims[1] : 0};
  bp_status_t st = bp_graph_add_constant(rb->g, NULL, first->dtype, first->rank, dims, data, total, out);
  free(data);
  return st;
}

bp_status_t bpg_qkv_emit(bp_graph_exec_t* x, bpg_rebuild_t* rb, bp_graph_t* old, const uint32_t* leader, uint32_t n) {
  uint32_t* members = malloc(sizeof(uint32_t) * (old->num_nodes + 1));
  if (members == NULL) return bpg_error(BP_RESOURCE_EXHAUSTED, "fuse: out of memory");
  uint32_t nm = 0;
  for (uint32_t m = n; m < old->num_nodes; ++m) {
    if (leader[m] == n) members[nm++] = m;
  }
  const bpg_node_t* lead = &old->nodes[n];
  uint32_t in[3] = {rb->map[lead->in[0]], BP_GRAPH_NO_VALUE, BP_GRAPH_NO_VALUE};
  bp_status_t st = bpg_concat(rb, old, members, nm, 1, &in[1]);
  if (st == BP_OK && lead->in[2] != BP_GRAPH_NO_VALUE) st = bpg_concat(rb, old, members, nm, 2, &in[2]);
  char name[BP_MAX_NAME];
  snprintf(name, sizeof(name), "%.100s.fused", lead->name ? lead->name : "linear");
  uint32_t y = 0;
  if (st == BP_OK) st = bpg_add_node(rb->g, BP_OP_linear, in, 3, lead->attrs, lead->name ? name : NULL, &y, 1, "fuse");
  uint32_t fused = rb->g->num_nodes - 1;
  char as[48];
  size_t len = (size_t)snprintf(as, sizeof(as), "linear over %u linears:", nm);
  int64_t start = 0;
  for (uint32_t i = 0; st == BP_OK && i < nm; ++i) {
    const bpg_node_t* m = &old->nodes[members[i]];
    const bpg_value_t* w = &old->values[m->in[1]];
    bp_graph_view_params_t p;
    memset(&p, 0, sizeof(p));
    p.struct_size = sizeof(p);
    p.dim = -1;
    p.start = start;
    p.end = start + w->dims[0];
    p.step = 1;
    start = p.end;
    st = bpg_add_node(rb->g, BP_GRAPH_VIEW_OP(BP_VIEW_slice), &y, 1, &p, m->name, &rb->map[m->out[0]], 1, "fuse");
    const char* vn = old->values[m->out[0]].name;
    if (st == BP_OK && vn != NULL) st = bp_graph_set_value_name(rb->g, rb->map[m->out[0]], vn);
    char vb[32];
    const char* who = m->name ? m->name : bpg_value_name(old, m->out[0], vb, sizeof(vb));
    if (len < sizeof(as)) len += (size_t)snprintf(as + len, sizeof(as) - len, " %s", who);
  }
  if (st == BP_OK) bpg_fuse_note(x, "horizontal", fused, BP_OP_linear, fused, BP_OP_linear, as);
  free(members);
  return st;
}
