/* Pass: placement. Each live node goes to one device.
 *
 * 1. Claims (place_claims.c): each device is offered the whole graph
 *    (bp_device_claim_region, ONNX Runtime's GetCapability; the per-node
 *    support query where the claim fails). A device that does not take a
 *    node is out for it, with the claim's reason kept; the groups of two
 *    or more nodes a device claims are placed whole or not as groups.
 * 2. Rules: a pinned node goes to its pin (an error if that device refuses);
 *    with a preferred device every node it runs goes there; with
 *    BP_GRAPH_FORBID_FALLBACK the nodes it refuses are one compile error
 *    that lists them all with the reasons.
 * 3. Cost: otherwise the cheapest device for the node's own time (the
 *    roofline below) plus the copies its inputs would need from where they
 *    live, within each device's memory limit: the constants uploaded there
 *    (each once per device), the values placed there that are still alive
 *    at this node (read later, or graph outputs), this node's outputs and
 *    the copies of its inputs from other devices. Where a device claimed
 *    the node in a group that can still be placed whole (convex, none of
 *    its nodes placed, pinned or preferred elsewhere) and that fits its
 *    memory, that device's option is the whole group at the group's time
 *    (the plugin's estimate for the compiled region, else the sum of its
 *    nodes'), compared over the same nodes with the other devices.
 * 4. Islands: a node whose producers and consumers all sit on one other
 *    device that runs it is moved there when that saves the copies (nodes
 *    of a group placed whole stay with it).
 * Ties go to the earlier device in the user's order, so the result is
 * deterministic.
 *
 * A node's time is the plugin's estimate (bp_device_estimate_cost) where it
 * gives one, else the roofline: max(flops / peak, bytes / bandwidth) +
 * launch overhead, from bp_device_properties; a device reporting no figures is assumed to
 * do 1 GFLOP/s and 10 GB/s and the report says so.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../graph_exec.h"

static uint64_t bpg_node_io_bytes(const bp_graph_t* g, const bpg_node_t* node, double* out_flops) {
  uint64_t bytes = 0;
  double max_numel = 0;
  for (uint32_t i = 0; i < node->num_in; ++i) {
    if (node->in[i] == BP_GRAPH_NO_VALUE) continue;
    const bpg_value_t* v = &g->values[node->in[i]];
    uint64_t b = bpg_value_bytes(v);
    if (b != UINT64_MAX) bytes += b;
    double ne = (double)bpg_value_numel(v);
    if (ne > max_numel) max_numel = ne;
  }
  for (uint32_t k = 0; k < node->num_out; ++k) {
    const bpg_value_t* v = &g->values[node->out[k]];
    uint64_t b = bpg_value_bytes(v);
    if (b != UINT64_MAX) bytes += b;
    double ne = (double)bpg_value_numel(v);
    if (ne > max_numel) max_numel = ne;
  }
  double flops = max_numel;
  uint32_t fam = bp_op_family(node->op);
  const bpg_value_t* out0 = &g->values[node->out[0]];
  if (fam == BP_OP_FAMILY_MATMUL && node->num_in >= 1 && node->in[0] != BP_GRAPH_NO_VALUE) {
    const bpg_value_t* a = &g->values[node->in[0]];
    double k = a->rank > 0 ? (double)a->dims[a->rank - 1] : 1;
    flops = 2.0 * (double)bpg_value_numel(out0) * k;
  } else if (fam == BP_OP_FAMILY_CONV && node->num_in >= 2 && node->in[1] != BP_GRAPH_NO_VALUE) {
    const bpg_value_t* w = &g->values[node->in[1]];
    double per_out = w->rank > 0 && w->dims[0] > 0 ? (double)bpg_value_numel(w) / (double)w->dims[0] : 1;
    flops = 2.0 * (double)bpg_value_numel(out0) * per_out;
  } else if (fam == BP_OP_FAMILY_ATTENTION && node->num_in >= 2 && node->in[1] != BP_GRAPH_NO_VALUE) {
    const bpg_value_t* k = &g->values[node->in[1]];
    double s_kv = k->rank >= 2 ? (double)k->dims[k->rank - 2] : 1;
    flops = 4.0 * (double)bpg_value_numel(out0) * s_kv;
  }
  *out_flops = flops;
  return bytes;
}

double bpg_node_cost(const bp_graph_exec_t* x, uint32_t n, uint32_t d) {
  if (x->est_cost != NULL && n < x->est_nodes) {
    double e = x->est_cost[(size_t)n * x->num_devs + d];
    if (e > 0) return e; /* the plugin's estimate */
  }
  if (bpg_is_view(x->g->nodes[n].op)) return 0; /* a new descriptor, no work */
  const bpg_dev_t* dev = &x->devs[d];
  double flops;
  uint64_t bytes = bpg_node_io_bytes(x->g, &x->g->nodes[n], &flops);
  double t_compute = flops / dev->peak_flops_f32 * 1e9;
  double t_mem = (double)bytes / dev->bandwidth * 1e9;
  return (t_compute > t_mem ? t_compute : t_mem) + dev->launch_ns;
}

double bpg_copy_cost(const bp_graph_exec_t* x, uint64_t bytes, uint32_t from, uint32_t to) {
  if (from == to) return 0;
  double bw = x->devs[from].link_bandwidth < x->devs[to].link_bandwidth ? x->devs[from].link_bandwidth
                                                                        : x->devs[to].link_bandwidth;
  return (double)bytes / bw * 1e9 + 10000.0; /* 10 us per copy: an event wait and a submission */
}

/* Node n as an op call at its concrete shapes, asked of device d: the
 * support answer (out) or the plugin's cost estimate (est). */
static bp_status_t bpg_ask(const bp_graph_exec_t* x, uint32_t n, uint32_t d, bp_support_t* out,
                           bp_cost_estimate_t* est) {
  const bpg_node_t* node = &x->g->nodes[n];
  enum { MAXI = 64 };
  bp_tensor_desc_t in_store[MAXI], out_store[4];
  const bp_tensor_desc_t* in[MAXI];
  const bp_tensor_desc_t* outs[4];
  if (node->num_in > MAXI || node->num_out > 4) return bpg_error(BP_INVALID_ARGUMENT, "too many operands");
  if (bpg_is_view(node->op)) { /* views run in the core, on any device */
    if (est != NULL) return bpg_error(BP_UNIMPLEMENTED, "a view has no cost");
    memset(out, 0, sizeof(*out));
    out->struct_size = sizeof(*out);
    out->supported = 1;
    return BP_OK;
  }
  for (uint32_t i = 0; i < node->num_in; ++i) {
    if (node->in[i] == BP_GRAPH_NO_VALUE) {
      memset(&in_store[i], 0, sizeof(in_store[i]));
      in_store[i].struct_size = sizeof(in_store[i]);
    } else {
      bpg_value_desc(x->g, &x->g->values[node->in[i]], x->syms, &in_store[i]);
    }
    in[i] = &in_store[i];
  }
  for (uint32_t k = 0; k < node->num_out; ++k) {
    bpg_value_desc(x->g, &x->g->values[node->out[k]], x->syms, &out_store[k]);
    outs[k] = &out_store[k];
  }
  bp_op_call_t call;
  memset(&call, 0, sizeof(call));
  call.struct_size = sizeof(call);
  call.op_id = node->op;
  call.num_inputs = node->num_in;
  call.num_outputs = node->num_out;
  call.inputs = in;
  call.outputs = outs;
  call.attrs = node->attrs;
  /* The math dtype: the first input's for comparisons and casts, else the output's. */
  call.compute_dtype = out_store[0].dtype;
  if (node->num_in > 0 && in_store[0].dtype != BP_DTYPE_INVALID &&
      (out_store[0].dtype == BP_DTYPE_BOOL || node->op == BP_OP_to_copy)) {
    call.compute_dtype = in_store[0].dtype;
  }
  if (est != NULL) {
    memset(est, 0, sizeof(*est));
    est->struct_size = sizeof(*est);
    return bp_device_estimate_cost(x->devs[d].device, &call, est);
  }
  memset(out, 0, sizeof(*out));
  out->struct_size = sizeof(*out);
  return bp_device_query_support(x->devs[d].device, &call, out);
}

bp_status_t bpg_claim(const bp_graph_exec_t* x, uint32_t n, uint32_t d, bp_support_t* out) {
  return bpg_ask(x, n, d, out, NULL);
}

/* The plugin's time for node n on device d in ns, or 0 when it gives none
 * (the roofline is used then). Nodes with default attributes are not asked:
 * the core hands estimate_cost the caller's attributes as they are. */
double bpg_node_estimate(const bp_graph_exec_t* x, uint32_t n, uint32_t d) {
  const bpg_node_t* node = &x->g->nodes[n];
  if (node->attrs == NULL && bpg_op_attrs_size(node->op) > 0) return 0;
  bp_cost_estimate_t est;
  if (bpg_ask(x, n, d, NULL, &est) != BP_OK || !(est.time_ns > 0) || est.time_ns > 1e15) return 0;
  return est.time_ns;
}

/* Bytes of a value as memory planning lays it out (aligned). */
static uint64_t bpg_abytes(const bpg_value_t* v) {
  uint64_t b = bpg_value_bytes(v);
  return b == UINT64_MAX ? 0 : (b + BPG_ALIGN - 1) / BPG_ALIGN * BPG_ALIGN;
}

static uint64_t bpg_node_out_bytes(const bp_graph_t* g, const bpg_node_t* node) {
  uint64_t b = 0;
  for (uint32_t k = 0; k < node->num_out; ++k) b += bpg_abytes(&g->values[node->out[k]]);
  return b;
}

/* Where value v lives before node placement reaches it: graph inputs and
 * constants on the first device (inputs are expected there; constants are
 * uploaded to each device that uses them, so they cost nothing). */
static uint32_t bpg_home(const bp_graph_exec_t* x, uint32_t v) {
  const bpg_value_t* val = &x->g->values[v];
  if (val->kind == BP_GRAPH_VALUE_NODE) return x->node_dev[val->producer];
  return UINT32_MAX;
}

static double bpg_input_copy_cost(const bp_graph_exec_t* x, uint32_t n, uint32_t d) {
  const bpg_node_t* node = &x->g->nodes[n];
  double c = 0;
  for (uint32_t i = 0; i < node->num_in; ++i) {
    uint32_t v = node->in[i];
    if (v == BP_GRAPH_NO_VALUE) continue;
    uint32_t h = bpg_home(x, v);
    if (x->g->values[v].kind == BP_GRAPH_VALUE_INPUT) h = 0;
    if (h != UINT32_MAX && h != d) c += bpg_copy_cost(x, bpg_value_bytes(&x->g->values[v]), h, d);
  }
  return c;
}

/* Bytes node n adds on device d while it runs: its outputs, constants not
 * yet there, copies of inputs that live elsewhere. */
static uint64_t bpg_need(const bp_graph_exec_t* x, uint32_t n, uint32_t d, const uint8_t* const_on) {
  const bp_graph_t* g = x->g;
  const bpg_node_t* node = &g->nodes[n];
  uint64_t b = bpg_node_out_bytes(g, node);
  for (uint32_t i = 0; i < node->num_in; ++i) {
    uint32_t v = node->in[i];
    if (v == BP_GRAPH_NO_VALUE) continue;
    const bpg_value_t* val = &g->values[v];
    uint64_t vb = bpg_abytes(val);
    if (val->kind == BP_GRAPH_VALUE_CONSTANT && !const_on[(size_t)v * x->num_devs + d]) b += vb;
    if (val->kind == BP_GRAPH_VALUE_NODE && x->node_dev[val->producer] != d) b += vb;
  }
  return b;
}

static int bpg_fits(const bp_graph_exec_t* x, uint32_t n, uint32_t d, const uint8_t* const_on, const uint64_t* const_bytes) {
  uint64_t used = x->devs[d].placed_bytes + const_bytes[d];
  uint64_t need = bpg_need(x, n, d, const_on);
  return used <= x->devs[d].place_limit && need <= x->devs[d].place_limit - used;
}

static const bp_graph_pin_t* bpg_find_pin(const bpg_node_t* node, const bp_graph_compile_options_t* o) {
  if (node->name == NULL || o == NULL) return NULL;
  for (uint32_t i = 0; i < o->num_pins; ++i) {
    if (o->pins[i].node_name != NULL && strcmp(o->pins[i].node_name, node->name) == 0) return &o->pins[i];
  }
  return NULL;
}

/* Islands: move a node to the device all its neighbours use when that is
 * cheaper counting copies. One sweep, in node order. */
static uint32_t bpg_islands(bp_graph_exec_t* x, const uint8_t* ok, const uint8_t* fixed) {
  bp_graph_t* g = x->g;
  uint32_t moved = 0;
  /* The live nodes reading each value, as compressed lists. */
  uint32_t* rd_start = calloc(g->num_values + 2, sizeof(uint32_t));
  size_t edges = 0;
  for (uint32_t n = 0; n < g->num_nodes; ++n) {
    if (!g->nodes[n].dead) edges += g->nodes[n].num_in;
  }
  uint32_t* rd = malloc(sizeof(uint32_t) * (edges + 1));
  uint32_t* fill = calloc(g->num_values + 1, sizeof(uint32_t));
  if (rd_start == NULL || rd == NULL || fill == NULL) {
    free(rd_start);
    free(rd);
    free(fill);
    return 0; /* no island moves: still a valid placement */
  }
  for (uint32_t n = 0; n < g->num_nodes; ++n) {
    if (g->nodes[n].dead) continue;
    for (uint32_t i = 0; i < g->nodes[n].num_in; ++i) {
      if (g->nodes[n].in[i] != BP_GRAPH_NO_VALUE) rd_start[g->nodes[n].in[i] + 1]++;
    }
  }
  for (uint32_t v = 0; v < g->num_values; ++v) rd_start[v + 1] += rd_start[v];
  for (uint32_t n = 0; n < g->num_nodes; ++n) {
    if (g->nodes[n].dead) continue;
    for (uint32_t i = 0; i < g->nodes[n].num_in; ++i) {
      uint32_t v = g->nodes[n].in[i];
      if (v != BP_GRAPH_NO_VALUE) rd[rd_start[v] + fill[v]++] = n;
    }
  }
  for (uint32_t n = 0; n < g->num_nodes; ++n) {
    bpg_node_t* node = &g->nodes[n];
    if (node->dead || fixed[n]) continue;
    uint32_t other = UINT32_MAX;
    int uniform = 1, any = 0;
    for (uint32_t i = 0; i < node->num_in && uniform; ++i) {
      uint32_t h = node->in[i] == BP_GRAPH_NO_VALUE ? UINT32_MAX : bpg_home(x, node->in[i]);
      if (h == UINT32_MAX) continue;
      if (other == UINT32_MAX) other = h;
      uniform = h == other;
      any = 1;
    }
    /* Readers of n's outputs (CSR lists built once). */
    for (uint32_t k = 0; k < node->num_out && uniform; ++k) {
      uint32_t v = node->out[k];
      for (uint32_t r = rd_start[v]; r < rd_start[v + 1] && uniform; ++r) {
        uint32_t h = x->node_dev[rd[r]];
        if (other == UINT32_MAX) other = h;
        uniform &= h == other;
        any = 1;
      }
    }
    uint32_t cur = x->node_dev[n];
    if (!any || !uniform || other == cur || other == UINT32_MAX || !ok[(size_t)n * x->num_devs + other]) continue;
    /* Cost here with copies in and out vs there with none. */
    uint64_t out_b = bpg_node_out_bytes(g, node);
    double here = bpg_node_cost(x, n, cur) + bpg_input_copy_cost(x, n, cur) + bpg_copy_cost(x, out_b, cur, other);
    double there = bpg_node_cost(x, n, other) + bpg_input_copy_cost(x, n, other);
    if (there < here) {
      x->node_dev[n] = other;
      snprintf(x->node_reason[n], sizeof(x->node_reason[n]),
               "island moved to its neighbours' device (%.1f us there vs %.1f us with copies)",
               there / 1e3, here / 1e3);
      moved++;
    }
  }
  free(rd_start);
  free(rd);
  free(fill);
  return moved;
}

/* The claimed group of n on d that can still be placed whole: convex, no
 * node of it placed yet, pinned, or taken by the preferred device
 * (UINT32_MAX: none; n is then offered to d alone). */
static uint32_t bpg_open_group(const bp_graph_exec_t* x, uint32_t n, uint32_t d, const uint8_t* decided,
                               const bp_graph_compile_options_t* o, int prefer) {
  const bpg_claims_t* c = x->claims;
  uint32_t gi = c->grp[(size_t)n * c->num_devs + d];
  if (gi == UINT32_MAX || !c->groups[gi].convex) return UINT32_MAX;
  const bpg_cgroup_t* gr = &c->groups[gi];
  for (uint32_t k = 0; k < gr->num_nodes; ++k) {
    uint32_t m = gr->nodes[k];
    if (decided[m] || bpg_find_pin(&x->g->nodes[m], o)) return UINT32_MAX;
    if (prefer >= 0 && (uint32_t)prefer != d && c->ok[(size_t)m * c->num_devs + (uint32_t)prefer]) return UINT32_MAX;
  }
  return gi;
}

static int bpg_member(const bpg_cgroup_t* gr, uint32_t n) {
  uint32_t lo = 0, hi = gr->num_nodes;
  while (lo < hi) {
    uint32_t mid = (lo + hi) / 2;
    if (gr->nodes[mid] == n) return 1;
    if (gr->nodes[mid] < n) lo = mid + 1;
    else hi = mid;
  }
  return 0;
}

/* The copies group gi's inputs from outside it need to reach d, in ns
 * (producers not placed yet are not counted). */
static double bpg_group_copy_cost(const bp_graph_exec_t* x, uint32_t gi, uint32_t d, const uint8_t* decided) {
  const bpg_cgroup_t* gr = &x->claims->groups[gi];
  double c = 0;
  for (uint32_t k = 0; k < gr->num_nodes; ++k) {
    const bpg_node_t* node = &x->g->nodes[gr->nodes[k]];
    for (uint32_t i = 0; i < node->num_in; ++i) {
      uint32_t v = node->in[i];
      if (v == BP_GRAPH_NO_VALUE) continue;
      const bpg_value_t* val = &x->g->values[v];
      uint32_t h = UINT32_MAX;
      if (val->kind == BP_GRAPH_VALUE_INPUT) h = 0;
      else if (val->kind == BP_GRAPH_VALUE_NODE && !bpg_member(gr, val->producer) && decided[val->producer])
        h = x->node_dev[val->producer];
      if (h != UINT32_MAX && h != d) c += bpg_copy_cost(x, bpg_value_bytes(val), h, d);
    }
  }
  return c;
}

/* 1 when group gi fits its device's limit: every output of its nodes, the
 * constants not there yet and the values copied in, on top of what is
 * alive there. */
static int bpg_group_fits(const bp_graph_exec_t* x, uint32_t gi, const uint8_t* const_on, const uint64_t* const_bytes,
                          const uint8_t* decided) {
  const bpg_cgroup_t* gr = &x->claims->groups[gi];
  uint32_t d = gr->dev;
  uint64_t need = 0;
  for (uint32_t k = 0; k < gr->num_nodes; ++k) {
    const bpg_node_t* node = &x->g->nodes[gr->nodes[k]];
    need += bpg_node_out_bytes(x->g, node);
    for (uint32_t i = 0; i < node->num_in; ++i) {
      uint32_t v = node->in[i];
      if (v == BP_GRAPH_NO_VALUE) continue;
      const bpg_value_t* val = &x->g->values[v];
      if (val->kind == BP_GRAPH_VALUE_CONSTANT && !const_on[(size_t)v * x->num_devs + d]) need += bpg_abytes(val);
      if (val->kind == BP_GRAPH_VALUE_NODE && !bpg_member(gr, val->producer) && decided[val->producer] &&
          x->node_dev[val->producer] != d)
        need += bpg_abytes(val);
    }
  }
  uint64_t used = x->devs[d].placed_bytes + const_bytes[d];
  return used <= x->devs[d].place_limit && need <= x->devs[d].place_limit - used;
}

/* The cheapest device for node n among those that run it and have memory
 * for it (cand). Where a device claimed n in a group that can still be
 * placed whole (grp[d]), the choice covers the union S of n and those
 * groups: on a device with its group, the group's time (the plugin's
 * region estimate) plus the copies into it; on another, n's time and
 * copies there; the rest of S at each node's cheapest time anywhere. */
static int bpg_choose(bp_graph_exec_t* x, uint32_t n, const uint8_t* cand, const uint32_t* grp, const uint8_t* decided,
                      uint8_t* mark, double* out_best, double* out_second) {
  const bp_graph_t* g = x->g;
  uint32_t nd = x->num_devs;
  const bpg_claims_t* c = x->claims;
  int any_group = 0;
  for (uint32_t d = 0; d < nd; ++d) any_group |= cand[d] && grp[d] != UINT32_MAX;
  /* rest[d]: the cheapest time of S's nodes outside d's group (n excluded). */
  double rest[BPG_MAX_DEVICES] = {0};
  if (any_group) {
    mark[n] = 1;
    for (uint32_t d = 0; d < nd; ++d) {
      if (!cand[d] || grp[d] == UINT32_MAX) continue;
      const bpg_cgroup_t* gr = &c->groups[grp[d]];
      for (uint32_t k = 0; k < gr->num_nodes; ++k) mark[gr->nodes[k]] = 1;
    }
    for (uint32_t m = n + 1; m < g->num_nodes; ++m) {
      if (!mark[m]) continue;
      double cheapest = 0;
      int found = 0;
      for (uint32_t f = 0; f < nd; ++f) {
        if (!c->ok[(size_t)m * nd + f]) continue;
        double t = bpg_node_cost(x, m, f);
        if (!found || t < cheapest) cheapest = t;
        found = 1;
      }
      for (uint32_t d = 0; d < nd; ++d) {
        if (cand[d] && (grp[d] == UINT32_MAX || !bpg_member(&c->groups[grp[d]], m))) rest[d] += cheapest;
      }
      mark[m] = 0;
    }
    mark[n] = 0;
  }
  double best = INFINITY, second = INFINITY;
  int bd = -1;
  for (uint32_t d = 0; d < nd; ++d) {
    if (!cand[d]) continue;
    double t = grp[d] != UINT32_MAX ? bpg_claims_group_cost(x, grp[d]) + bpg_group_copy_cost(x, grp[d], d, decided)
                                    : bpg_node_cost(x, n, d) + bpg_input_copy_cost(x, n, d);
    t += rest[d];
    if (t < best) {
      second = best;
      best = t;
      bd = (int)d;
    } else if (t < second) {
      second = t;
    }
  }
  *out_best = best;
  *out_second = second;
  return bd;
}

static const char* bpg_cost_src_name(uint32_t src) {
  return src == BPG_COST_REGION ? "region estimate" : src == BPG_COST_NODE_ESTIMATES ? "plugin estimates" : "roofline";
}

bp_status_t bpg_pass_place(bp_graph_exec_t* x, const bp_graph_compile_options_t* o) {
  bp_graph_t* g = x->g;
  uint32_t nd = x->num_devs;
  uint32_t *last = NULL, *dies = NULL, *head = NULL;
  uint8_t* const_on = calloc((size_t)g->num_values * nd + 1, 1); /* constant v uploaded to d */
  uint64_t const_bytes[BPG_MAX_DEVICES] = {0};
  uint8_t* fixed = calloc((size_t)g->num_nodes + 1, 1);   /* pinned, preferred or in a placed group: islands leave it */
  uint8_t* decided = calloc((size_t)g->num_nodes + 1, 1); /* placed (a group places nodes ahead) */
  uint8_t* mark = calloc((size_t)g->num_nodes + 1, 1);
  bp_status_t st = BP_OK;
  if (fixed == NULL || decided == NULL || mark == NULL || const_on == NULL) {
    st = bpg_error(BP_RESOURCE_EXHAUSTED, "place: out of memory");
    goto done;
  }
  int prefer = -1;
  if (o != NULL && o->prefer_device != NULL) {
    prefer = bpg_device_index(x, o->prefer_device);
    if (prefer < 0) {
      st = bpg_error(BP_INVALID_ARGUMENT, "place: the preferred device %s is not among the compile's devices",
                     bp_device_name(o->prefer_device));
      goto done;
    }
  }
  int forbid = o != NULL && (o->flags & BP_GRAPH_FORBID_FALLBACK);
  if (forbid && prefer < 0) {
    st = bpg_error(BP_INVALID_ARGUMENT, "place: forbid-fallback needs a preferred device");
    goto done;
  }
  /* Claims (the whole graph offered to each device), and the plugins' cost
   * estimates where they give them. */
  st = bpg_claims_gather(x);
  if (st != BP_OK) goto done;
  bpg_claims_t* c = x->claims;
  const uint8_t* ok = c->ok;
  char(*why)[128] = c->why;
  /* Liveness for the memory limits: the last node reading each value. */
  last = malloc(sizeof(uint32_t) * (g->num_values + 1));
  dies = malloc(sizeof(uint32_t) * (g->num_values + 1));
  head = malloc(sizeof(uint32_t) * (g->num_nodes + 1));
  if (last == NULL || dies == NULL || head == NULL) {
    st = bpg_error(BP_RESOURCE_EXHAUSTED, "place: out of memory");
    goto done;
  }
  for (uint32_t v = 0; v < g->num_values; ++v) {
    const bpg_value_t* val = &g->values[v];
    last[v] = val->kind == BP_GRAPH_VALUE_NODE ? val->producer : UINT32_MAX;
  }
  for (uint32_t n = 0; n < g->num_nodes; ++n) {
    if (g->nodes[n].dead) continue;
    for (uint32_t i = 0; i < g->nodes[n].num_in; ++i) {
      if (g->nodes[n].in[i] != BP_GRAPH_NO_VALUE) last[g->nodes[n].in[i]] = n;
    }
  }
  for (uint32_t i = 0; i < g->num_outputs; ++i) last[g->outputs[i]] = UINT32_MAX;
  memset(head, 0xFF, sizeof(uint32_t) * (g->num_nodes + 1));
  for (uint32_t v = 0; v < g->num_values; ++v) {
    if (g->values[v].kind != BP_GRAPH_VALUE_NODE || last[v] >= g->num_nodes) continue;
    dies[v] = head[last[v]];
    head[last[v]] = v;
  }
  /* Forbid-fallback: every node the preferred device refuses, at once. */
  if (forbid) {
    bpg_sbuf_t s = {0};
    uint32_t bad = 0;
    for (uint32_t n = 0; n < g->num_nodes; ++n) {
      if (g->nodes[n].dead || ok[(size_t)n * nd + (uint32_t)prefer] || bpg_find_pin(&g->nodes[n], o)) continue;
      char label[200];
      bpg_node_label(g, n, label, sizeof(label));
      bpg_sbuf_printf(&s, "%s%s: %s", bad ? "; " : "", label, why[(size_t)n * nd + (uint32_t)prefer]);
      bad++;
    }
    if (bad > 0) {
      st = bpg_error(BP_UNSUPPORTED, "place: forbid-fallback: %u node%s cannot run on %s: %s", bad,
                     bad == 1 ? "" : "s", bp_device_name(x->devs[prefer].device), s.p ? s.p : "");
      free(s.p);
      goto done;
    }
    free(s.p);
  }
  for (uint32_t n = 0; n < g->num_nodes; ++n) {
    bpg_node_t* node = &g->nodes[n];
    /* Values last read by the node before this one are free again. */
    for (uint32_t v = n > 0 ? head[n - 1] : UINT32_MAX; v != UINT32_MAX; v = dies[v]) {
      uint32_t p = g->values[v].producer;
      if (!g->nodes[p].dead) x->devs[x->node_dev[p]].placed_bytes -= bpg_abytes(&g->values[v]);
    }
    if (node->dead) continue;
    char label[200];
    const bp_graph_pin_t* pin = bpg_find_pin(node, o);
    uint64_t out_b = bpg_node_out_bytes(g, node);
    if (decided[n]) {
      /* placed with its claimed group */
    } else if (pin != NULL) {
      int d = bpg_device_index(x, pin->device);
      if (d < 0 || !ok[(size_t)n * nd + (uint32_t)d]) {
        bpg_node_label(g, n, label, sizeof(label));
        st = bpg_error(BP_UNSUPPORTED, "place: %s is pinned to %s, which %s", label,
                       pin->device ? bp_device_name(pin->device) : "(null)",
                       d < 0 ? "is not among the compile's devices" : why[(size_t)n * nd + (uint32_t)d]);
        goto done;
      }
      x->node_dev[n] = (uint32_t)d;
      fixed[n] = 1;
      snprintf(x->node_reason[n], sizeof(x->node_reason[n]), "pinned");
    } else if (prefer >= 0 && ok[(size_t)n * nd + (uint32_t)prefer] &&
               bpg_fits(x, n, (uint32_t)prefer, const_on, const_bytes)) {
      x->node_dev[n] = (uint32_t)prefer;
      fixed[n] = 1;
      snprintf(x->node_reason[n], sizeof(x->node_reason[n]), "preferred device");
    } else {
      /* Candidates: devices that take n, with memory for its claimed group
       * placed whole (or for n alone where no group of it is open). */
      uint8_t cand[BPG_MAX_DEVICES] = {0};
      uint32_t grp[BPG_MAX_DEVICES];
      int nsup = 0, nfit = 0;
      for (uint32_t d = 0; d < nd; ++d) {
        grp[d] = UINT32_MAX;
        if (!ok[(size_t)n * nd + d]) continue;
        nsup++;
        uint32_t gi = bpg_open_group(x, n, d, decided, o, prefer);
        if (gi != UINT32_MAX && bpg_group_fits(x, gi, const_on, const_bytes, decided)) grp[d] = gi;
        else if (!bpg_fits(x, n, d, const_on, const_bytes)) continue;
        cand[d] = 1;
        nfit++;
      }
      if (nfit == 0) {
        bpg_node_label(g, n, label, sizeof(label));
        bpg_sbuf_t s = {0};
        for (uint32_t d = 0; d < nd; ++d) {
          bpg_sbuf_printf(&s, "%s%s: %s", d ? "; " : "", bp_device_name(x->devs[d].device),
                          ok[(size_t)n * nd + d] ? "over its memory limit" : why[(size_t)n * nd + d]);
        }
        st = bpg_error(nsup ? BP_RESOURCE_EXHAUSTED : BP_UNSUPPORTED, "place: no device can run %s (%s)",
                       label, s.p ? s.p : "no devices");
        free(s.p);
        goto done;
      }
      double best = 0, second = INFINITY;
      int bd = -1;
      if (nfit == 1) {
        for (uint32_t d = 0; d < nd && bd < 0; ++d) bd = cand[d] ? (int)d : -1;
      } else {
        bd = bpg_choose(x, n, cand, grp, decided, mark, &best, &second);
      }
      uint32_t gi = grp[bd];
      if (nd == 1) {
        snprintf(x->node_reason[n], sizeof(x->node_reason[n]), "the only device compiled for");
      } else if (nsup == 1) {
        snprintf(x->node_reason[n], sizeof(x->node_reason[n]), "the only device that runs it");
      } else if (nfit == 1) {
        snprintf(x->node_reason[n], sizeof(x->node_reason[n]), "the only device with memory left");
      } else if (prefer >= 0) {
        snprintf(x->node_reason[n], sizeof(x->node_reason[n]), "fallback (preferred device: %.120s)",
                 why[(size_t)n * nd + (uint32_t)prefer][0] ? why[(size_t)n * nd + (uint32_t)prefer] : "memory limit");
      } else if (gi != UINT32_MAX) {
        snprintf(x->node_reason[n], sizeof(x->node_reason[n]), "claimed group of %u nodes: %.1f us (next %.1f us), %s",
                 c->groups[gi].num_nodes, best / 1e3, second / 1e3, bpg_cost_src_name(c->groups[gi].cost_src));
      } else {
        snprintf(x->node_reason[n], sizeof(x->node_reason[n]), "cheapest: %.1f us (next %.1f us)%s",
                 best / 1e3, second / 1e3,
                 x->est_cost[(size_t)n * nd + (uint32_t)bd] > 0 ? ", plugin estimate" : ", roofline");
      }
      x->node_dev[n] = (uint32_t)bd;
      if (gi != UINT32_MAX) { /* the whole group goes there, for the same reason */
        bpg_cgroup_t* gr = &c->groups[gi];
        gr->placed = 1;
        for (uint32_t k = 0; k < gr->num_nodes; ++k) {
          uint32_t m = gr->nodes[k];
          x->node_dev[m] = (uint32_t)bd;
          decided[m] = fixed[m] = 1;
          c->node_group[m] = gi;
          if (m != n) memcpy(x->node_reason[m], x->node_reason[n], sizeof(x->node_reason[n]));
        }
      }
    }
    decided[n] = 1;
    uint32_t here = x->node_dev[n];
    x->devs[here].placed_bytes += out_b;
    for (uint32_t i = 0; i < node->num_in; ++i) {
      uint32_t v = node->in[i];
      if (v == BP_GRAPH_NO_VALUE || g->values[v].kind != BP_GRAPH_VALUE_CONSTANT || const_on[(size_t)v * nd + here]) continue;
      const_on[(size_t)v * nd + here] = 1;
      const_bytes[here] += bpg_abytes(&g->values[v]);
    }
  }
  if (o == NULL || !(o->flags & BP_GRAPH_NO_ISLANDS)) x->islands_moved = bpg_islands(x, ok, fixed);
  for (uint32_t n = 0; n < g->num_nodes; ++n) {
    if (!g->nodes[n].dead) x->devs[x->node_dev[n]].num_nodes++;
  }
done:
  free(const_on);
  free(last);
  free(dies);
  free(head);
  free(fixed);
  free(decided);
  free(mark);
  return st;
}
