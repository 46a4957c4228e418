/* Placement's claims: what each device takes, asked before placement.
 *
 * Every device is offered the whole graph (its live nodes at their
 * concrete shapes) as one GRAPH region through bp_device_claim_region, the
 * graph-level question of ONNX Runtime's GetCapability: the plugin answers
 * a group per node (0: not taken, with a reason). A plugin without
 * region_claim gets the core's answer (each node its support query accepts
 * is its own group). Where the claim itself fails (the region cannot be
 * described or the plugin errs) the device is asked node by node
 * (bp_device_query_support) and the report says so.
 *
 * A node is a candidate on a device when the claim takes it and the
 * per-node support query accepts it too: a claimed group whose region the
 * plugin later refuses is split down to single nodes, which must then run
 * as ops. Groups of two or more nodes are kept (x->claims->groups) for
 * placement to place whole; a group that is not convex is kept but marked,
 * and placement offers its nodes one by one.
 *
 * A group's time is the plugin's estimate for the compiled region
 * (bp_region_compile, then bp_region_get_info's time_ns; the region is
 * released: the regions pass compiles again after fusion), else the sum
 * of its nodes' times (their plugin estimates, else the roofline).
 * Asked lazily, only when placement has a choice to make.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../graph_exec.h"

void bpg_claims_free(bpg_claims_t* c) {
  if (c == NULL) return;
  for (uint32_t i = 0; i < c->num_groups; ++i) free(c->groups[i].nodes);
  free(c->groups);
  free(c->ok);
  free(c->why);
  free(c->grp);
  free(c->node_group);
  free(c->queried);
  free(c);
}

bpg_claims_t* bpg_claims_clone(const bpg_claims_t* c) {
  bpg_claims_t* k = calloc(1, sizeof(*k));
  if (k == NULL) return NULL;
  *k = *c;
  size_t cells = (size_t)c->num_nodes * c->num_devs + 1;
  k->ok = malloc(cells);
  k->why = malloc(cells * sizeof(*k->why));
  k->grp = malloc(cells * sizeof(uint32_t));
  k->node_group = malloc(sizeof(uint32_t) * (c->num_nodes + 1));
  k->queried = malloc(c->num_nodes + 1);
  k->groups = calloc(c->num_groups + 1, sizeof(*k->groups));
  if (k->ok == NULL || k->why == NULL || k->grp == NULL || k->node_group == NULL || k->queried == NULL ||
      k->groups == NULL) {
    k->num_groups = 0;
    bpg_claims_free(k);
    return NULL;
  }
  memcpy(k->ok, c->ok, cells);
  memcpy(k->why, c->why, cells * sizeof(*k->why));
  memcpy(k->grp, c->grp, cells * sizeof(uint32_t));
  memcpy(k->node_group, c->node_group, sizeof(uint32_t) * (c->num_nodes + 1));
  memcpy(k->queried, c->queried, c->num_nodes + 1);
  for (uint32_t i = 0; i < c->num_groups; ++i) {
    k->groups[i] = c->groups[i];
    k->groups[i].nodes = malloc(sizeof(uint32_t) * c->groups[i].num_nodes);
    if (k->groups[i].nodes == NULL) {
      k->num_groups = i;
      bpg_claims_free(k);
      return NULL;
    }
    memcpy(k->groups[i].nodes, c->groups[i].nodes, sizeof(uint32_t) * c->groups[i].num_nodes);
  }
  return k;
}

static void bpg_why_set(bpg_claims_t* c, uint32_t n, uint32_t d, const bp_support_t* s) {
  snprintf(c->why[(size_t)n * c->num_devs + d], sizeof(c->why[0]), "%s: %.110s", bp_support_reason_name(s->reason),
           s->message[0] ? s->message : "not supported");
}

/* Device d node by node: the support query for nodes[0..nn). */
static bp_status_t bpg_claims_by_query(bp_graph_exec_t* x, uint32_t d, const uint32_t* nodes, uint32_t nn) {
  bpg_claims_t* c = x->claims;
  for (uint32_t k = 0; k < nn; ++k) {
    uint32_t n = nodes[k];
    bp_support_t s;
    bp_status_t st = bpg_claim(x, n, d, &s);
    if (st != BP_OK) return st;
    c->ok[(size_t)n * c->num_devs + d] = (uint8_t)(s.supported != 0);
    if (!s.supported) bpg_why_set(c, n, d, &s);
  }
  return BP_OK;
}

/* Records the groups of two or more nodes that device d answered. */
static bp_status_t bpg_claims_groups(bp_graph_exec_t* x, uint32_t d, const uint32_t* nodes, uint32_t nn,
                                     uint32_t* groups, uint8_t* mark) {
  bpg_claims_t* c = x->claims;
  uint32_t* members = malloc(sizeof(uint32_t) * (nn + 1));
  if (members == NULL) return bpg_error(BP_RESOURCE_EXHAUSTED, "place: out of memory");
  bp_status_t st = BP_OK;
  for (uint32_t i = 0; i < nn && st == BP_OK; ++i) {
    uint32_t id = groups[i];
    if (id == 0) continue;
    uint32_t m = 0;
    for (uint32_t j = i; j < nn; ++j) {
      if (groups[j] != id) continue;
      groups[j] = 0; /* taken */
      if (c->ok[(size_t)nodes[j] * c->num_devs + d]) members[m++] = nodes[j];
    }
    if (m < 2) continue;
    bpg_cgroup_t* p = realloc(c->groups, sizeof(*p) * (c->num_groups + 1));
    if (p == NULL) {
      st = bpg_error(BP_RESOURCE_EXHAUSTED, "place: out of memory");
      break;
    }
    c->groups = p;
    bpg_cgroup_t* gr = &c->groups[c->num_groups];
    memset(gr, 0, sizeof(*gr));
    gr->dev = d;
    gr->num_nodes = m;
    gr->cost_ns = -1;
    gr->nodes = malloc(sizeof(uint32_t) * m);
    if (gr->nodes == NULL) {
      st = bpg_error(BP_RESOURCE_EXHAUSTED, "place: out of memory");
      break;
    }
    memcpy(gr->nodes, members, sizeof(uint32_t) * m);
    gr->convex = (uint32_t)bpg_nodes_convex(x->g, members, m, mark);
    for (uint32_t k = 0; k < m; ++k) c->grp[(size_t)members[k] * c->num_devs + d] = c->num_groups;
    c->num_groups++;
  }
  free(members);
  return st;
}

/* Device d's claim of the whole graph; 1 in *out_claimed when it answered. */
static bp_status_t bpg_claims_device(bp_graph_exec_t* x, uint32_t d, const uint32_t* nodes, uint32_t nn,
                                     uint32_t* groups, bp_support_t* reasons, bp_support_t** rptr, int* out_claimed) {
  bpg_claims_t* c = x->claims;
  *out_claimed = 0;
  for (uint32_t k = 0; k < nn; ++k) {
    memset(&reasons[k], 0, sizeof(reasons[k]));
    reasons[k].struct_size = sizeof(reasons[k]);
    rptr[k] = &reasons[k];
  }
  bp_status_t st = bpg_claim_nodes(x, d, nodes, nn, groups, rptr);
  if (st == BP_RESOURCE_EXHAUSTED) return st;
  if (st != BP_OK) { /* the claim cannot be asked or answered: node by node, saying why */
    snprintf(c->query_why[d], sizeof(c->query_why[d]), "%.120s", bp_status_message());
    return BP_OK;
  }
  for (uint32_t k = 0; k < nn; ++k) {
    uint32_t n = nodes[k];
    if (groups[k] == 0) {
      bpg_why_set(c, n, d, &reasons[k]);
      continue;
    }
    /* Claimed: it must also run alone (a refused region splits down to ops). */
    bp_support_t s;
    st = bpg_claim(x, n, d, &s);
    if (st != BP_OK) return st;
    if (s.supported) {
      c->ok[(size_t)n * c->num_devs + d] = 1;
    } else {
      s.message[sizeof(s.message) - 1] = '\0';
      char m[sizeof(s.message)];
      snprintf(m, sizeof(m), "claimed, but its support query refuses it alone: %.150s", s.message);
      snprintf(s.message, sizeof(s.message), "%s", m);
      bpg_why_set(c, n, d, &s);
    }
  }
  *out_claimed = 1;
  return BP_OK;
}

bp_status_t bpg_claims_gather(bp_graph_exec_t* x) {
  const bp_graph_t* g = x->g;
  uint32_t nn = g->num_nodes, nd = x->num_devs;
  bpg_claims_free(x->claims);
  x->claims = calloc(1, sizeof(*x->claims));
  bpg_claims_t* c = x->claims;
  uint32_t* nodes = malloc(sizeof(uint32_t) * (nn + 1));
  uint32_t* groups = malloc(sizeof(uint32_t) * (nn + 1));
  bp_support_t* reasons = malloc(sizeof(bp_support_t) * (nn + 1));
  bp_support_t** rptr = malloc(sizeof(bp_support_t*) * (nn + 1));
  uint8_t* mark = calloc(nn + 1, 1);
  bp_status_t st = BP_OK;
  if (c == NULL || nodes == NULL || groups == NULL || reasons == NULL || rptr == NULL || mark == NULL) {
    st = bpg_error(BP_RESOURCE_EXHAUSTED, "place: out of memory");
    goto done;
  }
  c->num_nodes = nn;
  c->num_devs = nd;
  c->ok = calloc((size_t)nn * nd + 1, 1);
  c->why = calloc((size_t)nn * nd + 1, sizeof(*c->why));
  c->grp = malloc(sizeof(uint32_t) * ((size_t)nn * nd + 1));
  c->node_group = malloc(sizeof(uint32_t) * (nn + 1));
  c->queried = calloc(nn + 1, 1);
  free(x->est_cost);
  x->est_cost = calloc((size_t)nn * nd + 1, sizeof(double));
  x->est_nodes = nn;
  if (c->ok == NULL || c->why == NULL || c->grp == NULL || c->node_group == NULL || c->queried == NULL ||
      x->est_cost == NULL) {
    st = bpg_error(BP_RESOURCE_EXHAUSTED, "place: out of memory");
    goto done;
  }
  memset(c->grp, 0xFF, sizeof(uint32_t) * ((size_t)nn * nd + 1));
  memset(c->node_group, 0xFF, sizeof(uint32_t) * (nn + 1));
  /* Offered: the nodes a region can hold; the rest (views, readers of
   * strided views) are asked node by node. live: offered first, then the rest. */
  uint32_t live = 0, offered = 0;
  for (uint32_t n = 0; n < nn; ++n) {
    if (bpg_region_candidate(g, n)) nodes[offered++] = n;
  }
  live = offered;
  for (uint32_t n = 0; n < nn; ++n) {
    if (g->nodes[n].dead || bpg_region_candidate(g, n)) continue;
    nodes[live++] = n;
    c->queried[n] = 1;
  }
  for (uint32_t d = 0; d < nd && st == BP_OK; ++d) {
    int claimed = 0;
    st = offered > 0 ? bpg_claims_device(x, d, nodes, offered, groups, reasons, rptr, &claimed) : BP_OK;
    if (st != BP_OK) break;
    if (claimed) {
      st = bpg_claims_groups(x, d, nodes, offered, groups, mark);
    } else if (offered > 0) {
      c->by_query[d] = 1;
      st = bpg_claims_by_query(x, d, nodes, offered);
    }
    if (st == BP_OK) st = bpg_claims_by_query(x, d, nodes + offered, live - offered);
    for (uint32_t k = 0; k < live && st == BP_OK; ++k) {
      uint32_t n = nodes[k];
      if (c->ok[(size_t)n * nd + d]) x->est_cost[(size_t)n * nd + d] = bpg_node_estimate(x, n, d);
    }
  }
done:
  free(nodes);
  free(groups);
  free(reasons);
  free(rptr);
  free(mark);
  return st;
}

double bpg_claims_group_cost(bp_graph_exec_t* x, uint32_t gi) {
  bpg_cgroup_t* gr = &x->claims->groups[gi];
  if (gr->cost_ns >= 0) return gr->cost_ns;
  double sum = 0;
  int all_est = 1;
  for (uint32_t k = 0; k < gr->num_nodes; ++k) {
    sum += bpg_node_cost(x, gr->nodes[k], gr->dev);
    all_est &= x->est_cost[(size_t)gr->nodes[k] * x->num_devs + gr->dev] > 0;
  }
  gr->cost_ns = sum;
  gr->cost_src = all_est ? BPG_COST_NODE_ESTIMATES : BPG_COST_ROOFLINE;
  if (!gr->convex) return sum;
  bpg_region_t r;
  memset(&r, 0, sizeof(r));
  r.dev = gr->dev;
  r.num_nodes = gr->num_nodes;
  r.nodes = gr->nodes;
  bp_support_t why;
  bp_status_t st = bpg_region_compile(x, &r, &why);
  if (st == BP_OK && r.est_ns > 0) {
    bp_region_info_t info;
    memset(&info, 0, sizeof(info));
    info.struct_size = sizeof(info);
    if (bp_region_get_info(r.region, &info) == BP_OK && info.time_ns > 0 && info.time_ns < 1e15) {
      gr->cost_ns = info.time_ns;
      gr->cost_src = BPG_COST_REGION;
    }
  }
  bp_region_release(r.region);
  free(r.args);
  return gr->cost_ns;
}
