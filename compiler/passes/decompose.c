/* Pass: decomposition. A node that none of the compile's devices runs is
 * replaced by ops that do the same math, from the registry below (each
 * entry is checked against the undecomposed op in tests/graph); placement
 * then places those ops. With BP_GRAPH_DECOMPOSE_ALL every node that has a
 * decomposition is replaced (how the tests compare both forms).
 *
 * The graph is rebuilt in node order through the builder, so the order
 * stays topological; a decomposed node named N gives nodes N.1, N.2, ...
 * The same rebuild does the horizontal fusion of linears sharing their
 * input (passes/fuse_qkv.c).
 * Registry (PyTorch's decompositions):
 *   silu(x)        = x * sigmoid(x)
 *   mish(x)        = x * tanh(softplus(x))
 *   hardsigmoid(x) = clamp(x + 3, 0, 6) / 6
 *   hardswish(x)   = x * hardsigmoid(x)
 *   addcmul(s, a, b; alpha) = s + alpha * (a * b)
 *   log_softmax(x; dim)     = x - logsumexp(x, dim, keepdim)
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../graph_exec.h"


static bp_status_t bpg_emit(bpg_rebuild_t* rb, uint32_t op, const uint32_t* in, uint32_t n, const void* attrs,
                            uint32_t* out) {
  char name[BP_MAX_NAME];
  const char* nm = NULL;
  if (rb->base != NULL) {
    snprintf(name, sizeof(name), "%.100s.%u", rb->base, ++rb->part);
    nm = name;
  }
  return bp_graph_add_node(rb->g, op, in, n, attrs, nm, out, 1);
}

static bp_status_t bpg_scalar_op(bpg_rebuild_t* rb, uint32_t op, uint32_t x, double c, uint32_t* out) {
  bp_binary_attrs_t a;
  memset(&a, 0, sizeof(a));
  a.struct_size = sizeof(a);
  a.flags = BP_BINARY_OTHER_IS_SCALAR;
  a.scalar.kind = BP_SCALAR_FLOAT;
  a.scalar.v.f = c;
  uint32_t in[2] = {x, BP_GRAPH_NO_VALUE};
  return bpg_emit(rb, op, in, 2, &a, out);
}

static bp_status_t bpg_hardsigmoid(bpg_rebuild_t* rb, uint32_t x, uint32_t* out) {
  uint32_t t, c;
  bp_status_t st = bpg_scalar_op(rb, BP_OP_add, x, 3.0, &t);
  bp_clamp_attrs_t ca;
  memset(&ca, 0, sizeof(ca));
  ca.struct_size = sizeof(ca);
  ca.min.kind = ca.max.kind = BP_SCALAR_FLOAT;
  ca.min.v.f = 0.0;
  ca.max.v.f = 6.0;
  if (st == BP_OK) st = bpg_emit(rb, BP_OP_clamp, &t, 1, &ca, &c);
  if (st == BP_OK) st = bpg_scalar_op(rb, BP_OP_div, c, 6.0, out);
  return st;
}

/* x * f(x) for a unary f given by the callback's op chain. */
static bp_status_t bpg_times(bpg_rebuild_t* rb, uint32_t x, uint32_t fx, uint32_t* out) {
  uint32_t in[2] = {x, fx};
  return bpg_emit(rb, BP_OP_mul, in, 2, NULL, out);
}

/* 1 when op has an entry in the registry. */
static int bpg_decomposable(const bpg_node_t* node) {
  switch (node->op) {
    case BP_OP_silu: case BP_OP_mish: case BP_OP_hardsigmoid: case BP_OP_hardswish: case BP_OP_log_softmax:
      return 1;
    case BP_OP_addcmul: {
      const bp_binary_attrs_t* a = node->attrs;
      return a == NULL || a->flags == 0;
    }
    default:
      return 0;
  }
}

/* Emits the decomposition of `node` (inputs already mapped in `in`); *out is its value. */
static bp_status_t bpg_expand(bpg_rebuild_t* rb, const bpg_node_t* node, const uint32_t* in, uint32_t* out) {
  uint32_t x = in[0], t, u;
  bp_status_t st;
  switch (node->op) {
    case BP_OP_silu:
      st = bpg_emit(rb, BP_OP_sigmoid, &x, 1, NULL, &t);
      return st == BP_OK ? bpg_times(rb, x, t, out) : st;
    case BP_OP_mish:
      st = bpg_emit(rb, BP_OP_softplus, &x, 1, NULL, &t);
      if (st == BP_OK) st = bpg_emit(rb, BP_OP_tanh, &t, 1, NULL, &u);
      return st == BP_OK ? bpg_times(rb, x, u, out) : st;
    case BP_OP_hardsigmoid:
      return bpg_hardsigmoid(rb, x, out);
    case BP_OP_hardswish:
      st = bpg_hardsigmoid(rb, x, &t);
      return st == BP_OK ? bpg_times(rb, x, t, out) : st;
    case BP_OP_addcmul: {
      uint32_t ab[2] = {in[1], in[2]};
      st = bpg_emit(rb, BP_OP_mul, ab, 2, NULL, &t);
      bp_binary_attrs_t a;
      memset(&a, 0, sizeof(a));
      a.struct_size = sizeof(a);
      if (node->attrs != NULL) a.alpha = ((const bp_binary_attrs_t*)node->attrs)->alpha;
      uint32_t sa[2] = {in[0], t};
      return st == BP_OK ? bpg_emit(rb, BP_OP_add, sa, 2, &a, out) : st;
    }
    default: { /* log_softmax */
      const bp_softmax_attrs_t* sa = node->attrs;
      bp_reduce_attrs_t r;
      memset(&r, 0, sizeof(r));
      r.struct_size = sizeof(r);
      r.flags = BP_REDUCE_KEEPDIM;
      r.num_dims = 1;
      r.dims[0] = sa != NULL ? sa->dim : -1;
      r.correction = 1.0;
      st = bpg_emit(rb, BP_OP_logsumexp, &x, 1, &r, &t);
      uint32_t xs[2] = {x, t};
      return st == BP_OK ? bpg_emit(rb, BP_OP_sub, xs, 2, NULL, out) : st;
    }
  }
}

/* 1 when some device of the compile runs node n. */
static int bpg_someone_runs(const bp_graph_exec_t* x, uint32_t n) {
  for (uint32_t d = 0; d < x->num_devs; ++d) {
    bp_support_t s;
    if (bpg_claim(x, n, d, &s) == BP_OK && s.supported) return 1;
  }
  return 0;
}

static bp_status_t bpg_copy_value(bpg_rebuild_t* rb, const bp_graph_t* old, uint32_t v) {
  const bpg_value_t* val = &old->values[v];
  bp_status_t st;
  if (val->kind == BP_GRAPH_VALUE_INPUT) {
    st = bp_graph_add_input(rb->g, val->name, val->dtype, val->rank, val->dims, &rb->map[v]);
  } else {
    st = bpg_new_value(rb->g, val->name, BP_GRAPH_VALUE_CONSTANT, &rb->map[v]);
    if (st != BP_OK) return st;
    bpg_value_t* nv = &rb->g->values[rb->map[v]];
    nv->dtype = val->dtype;
    nv->rank = val->rank;
    memcpy(nv->dims, val->dims, sizeof(nv->dims));
    nv->cst = calloc(1, sizeof(bpg_const_t));
    if (nv->cst == NULL) return bpg_error(BP_RESOURCE_EXHAUSTED, "decompose: out of memory");
    *nv->cst = *val->cst;
    nv->cst->data = NULL;
    if (val->cst->data != NULL) {
      nv->cst->data = malloc(val->cst->size ? val->cst->size : 1);
      if (nv->cst->data == NULL) return bpg_error(BP_RESOURCE_EXHAUSTED, "decompose: out of memory");
      memcpy(nv->cst->data, val->cst->data, val->cst->size);
    }
  }
  return st;
}

bp_status_t bpg_pass_decompose(bp_graph_exec_t* x, uint32_t* out_count) {
  bp_graph_t* old = x->g;
  int all = (x->flags & BP_GRAPH_DECOMPOSE_ALL) != 0;
  *out_count = 0;
  /* Which nodes: decide first, rebuild only when there is one. */
  uint8_t* pick = calloc(old->num_nodes + 1, 1);
  uint32_t* leader = malloc(sizeof(uint32_t) * (old->num_nodes + 1));
  if (pick == NULL || leader == NULL) {
    free(pick);
    free(leader);
    return bpg_error(BP_RESOURCE_EXHAUSTED, "decompose: out of memory");
  }
  uint32_t groups = bpg_qkv_pick(x, leader);
  uint32_t count = 0;
  for (uint32_t n = 0; n < old->num_nodes; ++n) {
    const bpg_node_t* node = &old->nodes[n];
    if (node->dead || !bpg_decomposable(node) || node->num_out != 1 || leader[n] != UINT32_MAX) continue;
    if (all || !bpg_someone_runs(x, n)) {
      pick[n] = 1;
      count++;
    }
  }
  if (count == 0 && groups == 0) {
    free(pick);
    free(leader);
    return BP_OK;
  }
  bpg_rebuild_t rb = {0};
  rb.map = malloc(sizeof(uint32_t) * (old->num_values + 1));
  bp_status_t st = rb.map ? bp_graph_create(old->name, &rb.g) : bpg_error(BP_RESOURCE_EXHAUSTED, "decompose: out of memory");
  if (rb.map) memset(rb.map, 0xFF, sizeof(uint32_t) * (old->num_values + 1));
  for (uint32_t i = 0; st == BP_OK && i < old->num_syms; ++i) {
    int64_t d;
    st = bp_graph_add_symbol(rb.g, old->syms[i], &d);
  }
  /* Values in creation order: inputs and constants as they come, nodes when their first output does. */
  for (uint32_t v = 0; st == BP_OK && v < old->num_values; ++v) {
    const bpg_value_t* val = &old->values[v];
    if (val->kind != BP_GRAPH_VALUE_NODE) {
      st = bpg_copy_value(&rb, old, v);
      continue;
    }
    if (val->out_index != 0 || val->producer >= old->num_nodes || old->nodes[val->producer].dead) continue;
    const bpg_node_t* node = &old->nodes[val->producer];
    if (leader[val->producer] != UINT32_MAX) {
      /* A group of linears: emitted (with the others' slices) at its first one. */
      if (leader[val->producer] == val->producer) st = bpg_qkv_emit(x, &rb, old, leader, val->producer);
      continue;
    }
    uint32_t in[64];
    for (uint32_t i = 0; i < node->num_in && i < 64; ++i) {
      in[i] = node->in[i] == BP_GRAPH_NO_VALUE ? BP_GRAPH_NO_VALUE : rb.map[node->in[i]];
    }
    if (pick[val->producer]) {
      rb.base = node->name;
      rb.part = 0;
      st = bpg_expand(&rb, node, in, &rb.map[node->out[0]]);
    } else {
      uint32_t outs[4];
      st = bpg_add_node(rb.g, node->op, in, node->num_in, node->attrs, node->name, outs, node->num_out,
                        "decompose");
      for (uint32_t k = 0; st == BP_OK && k < node->num_out; ++k) rb.map[node->out[k]] = outs[k];
    }
    /* Keep the values' names (the graph's outputs are named, readers too). */
    for (uint32_t k = 0; st == BP_OK && k < node->num_out; ++k) {
      const char* nm = old->values[node->out[k]].name;
      if (nm != NULL) st = bp_graph_set_value_name(rb.g, rb.map[node->out[k]], nm);
    }
  }
  for (uint32_t i = 0; st == BP_OK && i < old->num_outputs; ++i) st = bp_graph_add_output(rb.g, rb.map[old->outputs[i]]);
  if (st == BP_OK) st = bpg_infer(rb.g, x->syms);
  free(pick);
  free(leader);
  free(rb.map);
  if (st != BP_OK) {
    char msg[1024];
    snprintf(msg, sizeof(msg), "%s", bp_status_message());
    bp_graph_release(rb.g);
    return bpg_error(st, "decompose: %s", msg);
  }
  bp_graph_release(old);
  x->g = rb.g;
  *out_count = count;
  return BP_OK;
}
