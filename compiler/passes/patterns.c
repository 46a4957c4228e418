/* Pass: named patterns. Decomposed forms of the normalizations and
 * activations that models write out by hand (or that an exporter
 * decomposed) become the one op that says what they compute, so a plugin
 * runs one kernel over the rows instead of five to nine passes over memory:
 *
 *   softmax:    e = exp(x - amax(x, d, keepdim)); e / sum(e, d, keepdim)
 *               -> softmax(x) {dim = d}
 *   rms_norm:   x * rsqrt(mean(x * x, -1, keepdim) + eps) [* w]
 *               (x^2 as pow(x, 2) too; rsqrt(s) as x / sqrt(s); w of
 *               shape [D] on either side) -> rms_norm(x, w) {eps}
 *   layer_norm: d = x - mean(x, -1, keepdim);
 *               d * rsqrt(mean(d * d, -1, keepdim) + eps) [* w] [+ b]
 *               (the variance as var(x, -1, correction = 0) too)
 *               -> layer_norm(x, w, b) {normalized_shape = [D], eps}
 *   silu:       x * sigmoid(x) -> silu(x)
 *
 * A match needs every intermediate value read only inside the pattern
 * (else the rewrite would compute it twice), one floating dtype
 * throughout, reductions over exactly the matched dim with keepdim and
 * no dtype override, and eps > 0 (rms_norm's 0 means machine epsilon).
 * The pattern's last node becomes the fused op in place (so node order
 * stays topological); the rest lose their readers and die. A rewrite that
 * none of the compile's devices runs is undone (the graph is cloned first
 * and the pass runs again without it). Each rewrite is recorded as a
 * fusion of kind "pattern" (first node of the pattern, last node, the
 * fused op) for the report. Runs before decomposition and placement, on
 * the executable's bound graph. BP_GRAPH_NO_FUSE turns it off.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../graph_exec.h"

enum { BPG_PM_MAX = 12 };

/* One match in progress: the nodes it took (the root last). */
typedef struct bpg_pm {
  const bp_graph_t* g;
  const uint32_t* uses;
  uint32_t nodes[BPG_PM_MAX];
  uint32_t count;
  uint32_t dtype; /* x's */
} bpg_pm_t;

/* The live node of `op` producing v, taken into the match; NULL otherwise. */
static const bpg_node_t* bpg_pm_take(bpg_pm_t* m, uint32_t v, uint32_t op) {
  if (v == BP_GRAPH_NO_VALUE || v >= m->g->num_values) return NULL;
  const bpg_value_t* val = &m->g->values[v];
  if (val->kind != BP_GRAPH_VALUE_NODE || val->producer >= m->g->num_nodes || val->dtype != m->dtype) return NULL;
  const bpg_node_t* n = &m->g->nodes[val->producer];
  if (n->dead || n->op != op || n->num_out != 1 || m->count >= BPG_PM_MAX) return NULL;
  m->nodes[m->count++] = val->producer;
  return n;
}

/* Every value that a matched node other than the root writes is read
 * only by matched nodes (as often as it is read at all). */
static int bpg_pm_closed(const bpg_pm_t* m, uint32_t root) {
  for (uint32_t i = 0; i < m->count; ++i) {
    if (m->nodes[i] == root) continue;
    uint32_t v = m->g->nodes[m->nodes[i]].out[0], inside = 0;
    for (uint32_t j = 0; j < m->count; ++j) {
      const bpg_node_t* r = &m->g->nodes[m->nodes[j]];
      for (uint32_t k = 0; k < r->num_in; ++k) inside += r->in[k] == v;
    }
    if (inside != m->uses[v]) return 0;
  }
  return 1;
}

static int bpg_alpha_is_one(const bp_scalar_t* a) {
  return a->kind == BP_SCALAR_NONE || (a->kind == BP_SCALAR_INT && a->v.i == 1) ||
         (a->kind == BP_SCALAR_FLOAT && a->v.f == 1.0);
}

/* A binary node of two tensors (no scalar, alpha 1, no rounding mode). */
static int bpg_pm_plain2(const bpg_node_t* n) {
  if (n->num_in != 2 || n->in[0] == BP_GRAPH_NO_VALUE || n->in[1] == BP_GRAPH_NO_VALUE) return 0;
  const bp_binary_attrs_t* a = n->attrs;
  return a == NULL || (a->flags == 0 && bpg_alpha_is_one(&a->alpha) && a->rounding_mode == 0);
}

/* A binary node of a tensor and a scalar: the scalar's value in *out. */
static int bpg_pm_scalar(const bpg_node_t* n, double* out) {
  const bp_binary_attrs_t* a = n->attrs;
  if (n->num_in != 2 || n->in[1] != BP_GRAPH_NO_VALUE || a == NULL || a->flags != BP_BINARY_OTHER_IS_SCALAR ||
      !bpg_alpha_is_one(&a->alpha)) {
    return 0;
  }
  if (a->scalar.kind == BP_SCALAR_FLOAT) *out = a->scalar.v.f;
  else if (a->scalar.kind == BP_SCALAR_INT) *out = (double)a->scalar.v.i;
  else return 0;
  return 1;
}

/* A reduction over exactly dim `dim` of a rank-`rank` value, keepdim, no
 * dtype override (and correction 0 for var). */
static int bpg_pm_reduce(const bpg_node_t* n, uint32_t rank, int32_t dim) {
  const bp_reduce_attrs_t* a = n->attrs;
  if (a == NULL || a->flags != BP_REDUCE_KEEPDIM || a->num_dims != 1 || a->dtype != BP_DTYPE_INVALID) return 0;
  if (n->op == BP_OP_var && a->correction != 0.0) return 0;
  int32_t d = a->dims[0] < 0 ? a->dims[0] + (int32_t)rank : a->dims[0];
  return d == dim;
}

/* s = add(v, eps) with v = mean(d * d | pow(d, 2)) over the last dim (or
 * var(x) over it when x is given); *eps out. */
static int bpg_pm_variance(bpg_pm_t* m, uint32_t s, uint32_t d, uint32_t x, uint32_t rank, double* eps) {
  const bpg_node_t* add = bpg_pm_take(m, s, BP_OP_add);
  if (add == NULL || !bpg_pm_scalar(add, eps) || !(*eps > 0)) return 0;
  int32_t last = (int32_t)rank - 1;
  uint32_t before = m->count;
  const bpg_node_t* var = x != BP_GRAPH_NO_VALUE ? bpg_pm_take(m, add->in[0], BP_OP_var) : NULL;
  if (var != NULL) return var->in[0] == x && bpg_pm_reduce(var, rank, last);
  m->count = before;
  const bpg_node_t* mean = bpg_pm_take(m, add->in[0], BP_OP_mean);
  if (mean == NULL || !bpg_pm_reduce(mean, rank, last)) return 0;
  const bpg_node_t* sq = bpg_pm_take(m, mean->in[0], BP_OP_mul);
  if (sq != NULL) return bpg_pm_plain2(sq) && sq->in[0] == d && sq->in[1] == d;
  m->count = before + 1;
  const bpg_node_t* pw = bpg_pm_take(m, mean->in[0], BP_OP_pow);
  double two;
  return pw != NULL && pw->in[0] == d && bpg_pm_scalar(pw, &two) && two == 2.0;
}

/* y = d * rsqrt(s) (either order) or d / sqrt(s), with s the variance of
 * d (see bpg_pm_variance), and d = x - mean(x) when `centered` (else d is
 * x); *out_x is x. */
static int bpg_pm_normalized(bpg_pm_t* m, uint32_t y, int centered, uint32_t* out_x, double* eps) {
  uint32_t before = m->count;
  const bpg_node_t* n = bpg_pm_take(m, y, BP_OP_mul);
  uint32_t d = BP_GRAPH_NO_VALUE, s = BP_GRAPH_NO_VALUE;
  if (n != NULL && bpg_pm_plain2(n)) {
    for (int side = 0; side < 2 && s == BP_GRAPH_NO_VALUE; ++side) {
      uint32_t mark = m->count;
      const bpg_node_t* r = bpg_pm_take(m, n->in[side], BP_OP_rsqrt);
      if (r != NULL) {
        d = n->in[1 - side];
        s = r->in[0];
      } else {
        m->count = mark;
      }
    }
  }
  if (s == BP_GRAPH_NO_VALUE) {
    m->count = before;
    n = bpg_pm_take(m, y, BP_OP_div);
    const bpg_node_t* q = n != NULL && bpg_pm_plain2(n) ? bpg_pm_take(m, n->in[1], BP_OP_sqrt) : NULL;
    if (q != NULL) {
      d = n->in[0];
      s = q->in[0];
    }
  }
  if (s == BP_GRAPH_NO_VALUE) return 0;
  const bpg_value_t* dv = &m->g->values[d];
  if (dv->rank < 1) return 0;
  uint32_t x = d;
  if (centered) { /* d = x - mean(x) over the last dim */
    const bpg_node_t* sub = bpg_pm_take(m, d, BP_OP_sub);
    if (sub == NULL || !bpg_pm_plain2(sub)) return 0;
    x = sub->in[0];
    const bpg_node_t* mean = bpg_pm_take(m, sub->in[1], BP_OP_mean);
    if (mean == NULL || mean->in[0] != x || !bpg_pm_reduce(mean, dv->rank, (int32_t)dv->rank - 1)) return 0;
  }
  if (m->g->values[x].dtype != m->dtype || m->g->values[x].rank != dv->rank) return 0;
  if (!bpg_pm_variance(m, s, d, centered ? x : BP_GRAPH_NO_VALUE, dv->rank, eps)) return 0;
  *out_x = x;
  return 1;
}

/* v is a [D] vector of the match's dtype, D the last dim of x, computed
 * outside the match. */
static int bpg_pm_vector(const bpg_pm_t* m, uint32_t v, uint32_t x) {
  if (v == BP_GRAPH_NO_VALUE) return 0;
  const bpg_value_t *vv = &m->g->values[v], *xv = &m->g->values[x];
  if (vv->dtype != m->dtype || vv->rank != 1 || xv->rank < 1 || vv->dims[0] != xv->dims[xv->rank - 1]) return 0;
  for (uint32_t i = 0; i < m->count; ++i) {
    if (m->g->nodes[m->nodes[i]].out[0] == v) return 0;
  }
  return 1;
}

/* What a match becomes. */
typedef struct bpg_pm_fused {
  uint32_t op;
  uint32_t in[3], num_in, num_out;
  union {
    bp_softmax_attrs_t softmax;
    bp_rms_norm_attrs_t rms;
    bp_layer_norm_attrs_t ln;
  } attrs;
  uint32_t attrs_size;
} bpg_pm_fused_t;

static int bpg_match_softmax(bpg_pm_t* m, uint32_t y, bpg_pm_fused_t* f) {
  const bpg_node_t* div = bpg_pm_take(m, y, BP_OP_div);
  if (div == NULL || !bpg_pm_plain2(div)) return 0;
  const bpg_node_t* e = bpg_pm_take(m, div->in[0], BP_OP_exp);
  const bpg_node_t* sum = e ? bpg_pm_take(m, div->in[1], BP_OP_sum) : NULL;
  const bpg_node_t* sub = sum && sum->in[0] == div->in[0] ? bpg_pm_take(m, e->in[0], BP_OP_sub) : NULL;
  if (sub == NULL || !bpg_pm_plain2(sub)) return 0;
  uint32_t x = sub->in[0];
  const bpg_node_t* mx = bpg_pm_take(m, sub->in[1], BP_OP_amax);
  const bpg_value_t* xv = &m->g->values[x];
  if (mx == NULL || mx->in[0] != x || xv->dtype != m->dtype || xv->rank < 1) return 0;
  const bp_reduce_attrs_t* ra = mx->attrs;
  if (ra == NULL || ra->num_dims != 1) return 0;
  int32_t dim = ra->dims[0] < 0 ? ra->dims[0] + (int32_t)xv->rank : ra->dims[0];
  if (!bpg_pm_reduce(mx, xv->rank, dim) || !bpg_pm_reduce(sum, xv->rank, dim)) return 0;
  f->op = BP_OP_softmax;
  f->in[0] = x;
  f->num_in = 1;
  f->num_out = 1;
  f->attrs.softmax = (bp_softmax_attrs_t){.struct_size = sizeof(bp_softmax_attrs_t), .dim = dim};
  f->attrs_size = sizeof(bp_softmax_attrs_t);
  return 1;
}

static int bpg_match_silu(bpg_pm_t* m, uint32_t y, bpg_pm_fused_t* f) {
  const bpg_node_t* mul = bpg_pm_take(m, y, BP_OP_mul);
  if (mul == NULL || !bpg_pm_plain2(mul)) return 0;
  for (int side = 0; side < 2; ++side) {
    uint32_t mark = m->count;
    const bpg_node_t* sg = bpg_pm_take(m, mul->in[side], BP_OP_sigmoid);
    if (sg != NULL && sg->in[0] == mul->in[1 - side] && m->g->values[sg->in[0]].dtype == m->dtype) {
      f->op = BP_OP_silu;
      f->in[0] = sg->in[0];
      f->num_in = 1;
      f->num_out = 1;
      f->attrs_size = 0;
      return 1;
    }
    m->count = mark;
  }
  return 0;
}

/* rms_norm (centered 0) or layer_norm (1): [add(., b)] of [mul(., w)] of
 * the normalized value. */
static int bpg_match_norm(bpg_pm_t* m, uint32_t y, int centered, bpg_pm_fused_t* f) {
  uint32_t base = m->count, w = BP_GRAPH_NO_VALUE, b = BP_GRAPH_NO_VALUE, x = BP_GRAPH_NO_VALUE;
  double eps = 0;
  /* Which of the root's operands are bias and weight is known only once x
   * is: try each reading (bias side, weight side), the plainest last. */
  for (int form = 0; form < 9; ++form) {
    m->count = base;
    int bias_side = form / 3 - 1, weight_side = form % 3 - 1; /* -1: none */
    if (bias_side >= 0 && !centered) continue;
    uint32_t v = y, bv = BP_GRAPH_NO_VALUE, wv = BP_GRAPH_NO_VALUE;
    if (bias_side >= 0) {
      const bpg_node_t* add = bpg_pm_take(m, v, BP_OP_add);
      if (add == NULL || !bpg_pm_plain2(add)) continue;
      bv = add->in[bias_side];
      v = add->in[1 - bias_side];
    }
    if (weight_side >= 0) {
      const bpg_node_t* mul = bpg_pm_take(m, v, BP_OP_mul);
      if (mul == NULL || !bpg_pm_plain2(mul)) continue;
      wv = mul->in[weight_side];
      v = mul->in[1 - weight_side];
    }
    if (!bpg_pm_normalized(m, v, centered, &x, &eps)) continue;
    if ((bv != BP_GRAPH_NO_VALUE && !bpg_pm_vector(m, bv, x)) || (wv != BP_GRAPH_NO_VALUE && !bpg_pm_vector(m, wv, x))) {
      continue;
    }
    w = wv;
    b = bv;
    break;
  }
  if (x == BP_GRAPH_NO_VALUE || m->count == base) {
    m->count = base;
    return 0;
  }
  const bpg_value_t* xv = &m->g->values[x];
  f->in[0] = x;
  f->in[1] = w;
  if (centered) {
    f->op = BP_OP_layer_norm;
    f->in[2] = b;
    f->num_in = 3;
    f->num_out = 3;
    memset(&f->attrs.ln, 0, sizeof(f->attrs.ln));
    f->attrs.ln.struct_size = sizeof(bp_layer_norm_attrs_t);
    f->attrs.ln.normalized_rank = 1;
    f->attrs.ln.normalized_shape[0] = xv->dims[xv->rank - 1];
    f->attrs.ln.eps = eps;
    f->attrs.ln.output_mask = 7;
    f->attrs_size = sizeof(bp_layer_norm_attrs_t);
  } else {
    f->op = BP_OP_rms_norm;
    f->num_in = 2;
    f->num_out = 1;
    f->attrs.rms = (bp_rms_norm_attrs_t){.struct_size = sizeof(bp_rms_norm_attrs_t), .normalized_rank = 1, .eps = eps};
    f->attrs_size = sizeof(bp_rms_norm_attrs_t);
  }
  return 1;
}

/* The first pattern that node n ends, into *m (nodes) and *f. */
static int bpg_match_at(const bp_graph_t* g, const uint32_t* uses, uint32_t n, bpg_pm_t* m, bpg_pm_fused_t* f) {
  const bpg_node_t* node = &g->nodes[n];
  if (node->dead || node->num_out != 1) return 0;
  uint32_t y = node->out[0];
  uint32_t dt = g->values[y].dtype;
  if (bp_dtype_category(dt) != BP_DTYPE_CATEGORY_FLOAT) return 0;
  static const int kinds[] = {0, 1, 2, 3}; /* layer_norm, rms_norm, softmax, silu */
  for (size_t k = 0; k < sizeof(kinds) / sizeof(kinds[0]); ++k) {
    *m = (bpg_pm_t){.g = g, .uses = uses, .dtype = dt};
    memset(f, 0, sizeof(*f));
    int ok = kinds[k] == 0   ? bpg_match_norm(m, y, 1, f)
             : kinds[k] == 1 ? bpg_match_norm(m, y, 0, f)
             : kinds[k] == 2 ? bpg_match_softmax(m, y, f)
                             : bpg_match_silu(m, y, f);
    if (ok && m->nodes[0] == n && bpg_pm_closed(m, n)) return 1;
  }
  return 0;
}

/* Node n becomes the fused op (its output is the fused op's first; more
 * outputs are new values). */
static bp_status_t bpg_rewrite(bp_graph_t* g, uint32_t n, const bpg_pm_fused_t* f) {
  uint32_t* ops = malloc(sizeof(uint32_t) * (f->num_in + f->num_out));
  void* attrs = f->attrs_size ? malloc(f->attrs_size) : NULL;
  if (ops == NULL || (f->attrs_size && attrs == NULL)) {
    free(ops);
    free(attrs);
    return bpg_error(BP_RESOURCE_EXHAUSTED, "patterns: out of memory");
  }
  memcpy(ops, f->in, sizeof(uint32_t) * f->num_in);
  ops[f->num_in] = g->nodes[n].out[0];
  for (uint32_t k = 1; k < f->num_out; ++k) {
    uint32_t v;
    bp_status_t st = bpg_new_value(g, NULL, BP_GRAPH_VALUE_NODE, &v);
    if (st != BP_OK) {
      free(ops);
      free(attrs);
      return st;
    }
    g->values[v].producer = n;
    g->values[v].out_index = k;
    ops[f->num_in + k] = v;
  }
  if (attrs) memcpy(attrs, &f->attrs, f->attrs_size);
  bpg_node_t* node = &g->nodes[n];
  free(node->in);
  free(node->attrs);
  node->op = f->op;
  node->in = ops;
  node->out = ops + f->num_in;
  node->num_in = f->num_in;
  node->num_out = f->num_out;
  node->attrs = attrs;
  node->attrs_size = f->attrs_size;
  return BP_OK;
}

/* One sweep: every match rewritten, except the nodes in `skip`; the
 * rewritten roots in `done` (1 each). */
static bp_status_t bpg_patterns_sweep(bp_graph_exec_t* x, const uint8_t* skip, uint8_t* done, uint32_t* out_count) {
  bp_graph_t* g = x->g;
  uint32_t* uses = NULL;
  bp_status_t st = bpg_use_counts(g, &uses);
  *out_count = 0;
  /* From the last node back, so the widest match (with weight and bias)
   * is found before the normalization inside it. */
  for (uint32_t n = g->num_nodes; st == BP_OK && n-- > 0;) {
    bpg_pm_t m;
    bpg_pm_fused_t f;
    if (skip[n] || !bpg_match_at(g, uses, n, &m, &f)) continue;
    uint32_t first = n;
    for (uint32_t i = 0; i < m.count; ++i) {
      if (m.nodes[i] < first) first = m.nodes[i];
    }
    uint32_t first_op = g->nodes[first].op;
    uint32_t last_op = g->nodes[n].op;
    st = bpg_rewrite(g, n, &f);
    if (st != BP_OK) break;
    /* The pattern's other nodes lose their readers: dead now. */
    for (uint32_t i = 0; i < m.count; ++i) {
      if (m.nodes[i] != n) g->nodes[m.nodes[i]].dead = 1;
    }
    free(uses);
    uses = NULL;
    st = bpg_use_counts(g, &uses);
    done[n] = 1;
    (*out_count)++;
    if (x->num_fusions < BPG_MAX_FUSIONS) {
      bpg_fusion_t* fu = &x->fusions[x->num_fusions++];
      fu->first = first;
      fu->second = n;
      fu->ops[0] = first_op;
      fu->ops[1] = last_op;
      snprintf(fu->kind, sizeof(fu->kind), "pattern");
      snprintf(fu->as, sizeof(fu->as), "%s (%u nodes)", bpg_op_info(f.op)->name, m.count);
    }
  }
  free(uses);
  if (st == BP_OK && *out_count > 0) st = bpg_infer(g, x->syms);
  return st;
}

static int bpg_pm_someone_runs(const bp_graph_exec_t* x, uint32_t n) {
  for (uint32_t d = 0; d < x->num_devs; ++d) {
    bp_support_t s;
    if (bpg_claim(x, n, d, &s) == BP_OK && s.supported) return 1;
  }
  return 0;
}

bp_status_t bpg_pass_patterns(bp_graph_exec_t* x, uint32_t* out_count) {
  *out_count = 0;
  uint32_t nn = x->g->num_nodes, fusions0 = x->num_fusions;
  uint8_t* skip = calloc(2 * (size_t)nn + 2, 1);
  bp_graph_t* orig = NULL;
  if (skip == NULL) return bpg_error(BP_RESOURCE_EXHAUSTED, "patterns: out of memory");
  uint8_t* done = skip + nn + 1;
  bp_status_t st = bpg_clone(x->g, &orig);
  /* Rewrite; when a rewrite is run by no device, start again from the
   * original without it (at most once per rewrite). */
  for (uint32_t round = 0; st == BP_OK && round <= nn; ++round) {
    uint32_t count = 0;
    memset(done, 0, nn + 1);
    st = bpg_patterns_sweep(x, skip, done, &count);
    if (st != BP_OK || count == 0) break;
    uint32_t refused = 0;
    for (uint32_t n = 0; n < nn; ++n) {
      if (done[n] && !bpg_pm_someone_runs(x, n)) {
        skip[n] = 1;
        refused++;
      }
    }
    if (refused == 0) {
      *out_count = count;
      break;
    }
    bp_graph_t* again = NULL;
    st = bpg_clone(orig, &again);
    if (st != BP_OK) break;
    bp_graph_release(x->g);
    x->g = again;
    x->num_fusions = fusions0;
  }
  bp_graph_release(orig);
  free(skip);
  return st;
}
