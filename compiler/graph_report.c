/* libbackplane_graph: the placement report (JSON and a text table; the
 * format is in docs/graph.md). Measured times come from the last run made
 * with profiling (bp-run --report does one); 0 before.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "graph_exec.h"

/* A requested device that runs under this share of the nodes is warned about. */
#define BPG_FEW_NODES_SHARE 0.10

static const char* bpg_op_name(uint32_t op) { return bpg_node_op_name(op); }

static const char* bpg_region_kind_name(const bp_graph_exec_t* x, const bpg_region_t* r) {
  if (bpg_region_is_prologue(x->g, r)) return "reduction_prologue";
  switch (r->kind) {
    case BP_REGION_EW_PROGRAM: return "ew_program";
    case BP_REGION_EPILOGUE: return "epilogue";
    case BP_REGION_PATTERN: return "pattern";
    default: return "graph";
  }
}

static void bpg_json_str(bpg_sbuf_t* s, const char* t) {
  for (const char* c = t; *c; ++c) {
    if (*c == '"' || *c == '\\') bpg_sbuf_printf(s, "\\%c", *c);
    else if ((unsigned char)*c >= 0x20) bpg_sbuf_printf(s, "%c", *c);
  }
}

static uint32_t bpg_live_nodes(const bp_graph_exec_t* x) {
  uint32_t n = 0;
  for (uint32_t i = 0; i < x->g->num_nodes; ++i) n += !x->g->nodes[i].dead;
  return n;
}

/* Warning lines (one per device that got few nodes), into s with prefix/suffix. */
static uint32_t bpg_warnings(const bp_graph_exec_t* x, bpg_sbuf_t* s, int json) {
  uint32_t live = bpg_live_nodes(x), count = 0;
  if (x->num_devs < 2 || live == 0) return 0;
  for (uint32_t d = 0; d < x->num_devs; ++d) {
    if ((double)x->devs[d].num_nodes >= BPG_FEW_NODES_SHARE * live) continue;
    const char* fmt = json ? "%s\"%s was requested but runs %u of %u nodes\"" :
                             "%swarning: %s was requested but runs %u of %u nodes (see the reasons above)\n";
    bpg_sbuf_printf(s, fmt, json && count ? ", " : "", bp_device_name(x->devs[d].device), x->devs[d].num_nodes, live);
    count++;
  }
  return count;
}

/* Node idx on device dev: where its claim came from and the devices that
 * refused it, with the reasons (nothing when placement asked no claims). */
static void bpg_report_claim_json(const bp_graph_exec_t* x, uint32_t idx, uint32_t dev, bpg_sbuf_t* s) {
  const bpg_claims_t* c = x->claims;
  if (c == NULL || idx >= c->num_nodes) return;
  if (c->node_group[idx] != UINT32_MAX) bpg_sbuf_printf(s, ", \"claim\": \"group\", \"group\": %u", c->node_group[idx]);
  else bpg_sbuf_printf(s, ", \"claim\": \"%s\"", c->by_query[dev] || c->queried[idx] ? "query" : "node");
  int first = 1;
  for (uint32_t d = 0; d < c->num_devs; ++d) {
    const char* why = c->why[(size_t)idx * c->num_devs + d];
    if (c->ok[(size_t)idx * c->num_devs + d] || why[0] == '\0') continue;
    bpg_sbuf_printf(s, "%s{\"device\": \"%s\", \"reason\": \"", first ? ", \"refused_by\": [" : ", ",
                    bp_device_name(x->devs[d].device));
    bpg_json_str(s, why);
    bpg_sbuf_printf(s, "\"}");
    first = 0;
  }
  if (!first) bpg_sbuf_printf(s, "]");
}

/* The claimed groups placed whole. */
static void bpg_report_groups_json(const bp_graph_exec_t* x, bpg_sbuf_t* s) {
  const bpg_claims_t* c = x->claims;
  int first = 1;
  for (uint32_t i = 0; c != NULL && i < c->num_groups; ++i) {
    const bpg_cgroup_t* gr = &c->groups[i];
    if (!gr->placed) continue;
    bpg_sbuf_printf(s, "%s\n    {\"group\": %u, \"device\": \"%s\", \"nodes\": [", first ? "" : ",", i,
                    bp_device_name(x->devs[gr->dev].device));
    for (uint32_t k = 0; k < gr->num_nodes; ++k) {
      const bpg_node_t* n = &x->g->nodes[gr->nodes[k]];
      bpg_sbuf_printf(s, "%s\"%s\"", k ? ", " : "", n->name ? n->name : "");
    }
    bpg_sbuf_printf(s, "], \"estimated_ns\": %.0f, \"cost\": \"%s\"}", gr->cost_ns < 0 ? 0 : gr->cost_ns,
                    gr->cost_ns < 0 ? "not asked" : gr->cost_src == BPG_COST_REGION ? "region estimate"
                    : gr->cost_src == BPG_COST_NODE_ESTIMATES ? "plugin estimates" : "roofline");
    first = 0;
  }
}

/* Text: the groups placed whole, the devices answered node by node, and
 * each refusal of a node by a device, with the claim's reason. */
static void bpg_report_claims_text(const bp_graph_exec_t* x, bpg_sbuf_t* s) {
  const bpg_claims_t* c = x->claims;
  if (c == NULL) return;
  for (uint32_t i = 0; i < c->num_groups; ++i) {
    const bpg_cgroup_t* gr = &c->groups[i];
    if (!gr->placed) continue;
    bpg_sbuf_printf(s, "claimed group %u on %s, placed whole:", i, bp_device_name(x->devs[gr->dev].device));
    for (uint32_t k = 0; k < gr->num_nodes; ++k) bpg_sbuf_printf(s, " #%u", gr->nodes[k]);
    if (gr->cost_ns >= 0) bpg_sbuf_printf(s, " (%.1f us)", gr->cost_ns / 1e3);
    bpg_sbuf_printf(s, "\n");
  }
  for (uint32_t d = 0; d < c->num_devs; ++d) {
    if (c->by_query[d]) bpg_sbuf_printf(s, "claim of %s failed (%s): asked node by node\n", bp_device_name(x->devs[d].device),
                                        c->query_why[d]);
  }
  for (uint32_t n = 0; n < c->num_nodes && n < x->g->num_nodes; ++n) {
    if (x->g->nodes[n].dead) continue;
    for (uint32_t d = 0; d < c->num_devs; ++d) {
      const char* why = c->why[(size_t)n * c->num_devs + d];
      if (c->ok[(size_t)n * c->num_devs + d] || why[0] == '\0') continue;
      const char* name = x->g->nodes[n].name;
      bpg_sbuf_printf(s, "refused: #%u %s by %s: %s\n", n, name ? name : "-", bp_device_name(x->devs[d].device), why);
    }
  }
}

static void bpg_report_json(const bp_graph_exec_t* x, bpg_sbuf_t* s) {
  char vb[32];
  bpg_sbuf_printf(s, "{\n  \"graph\": \"%s\",\n  \"compile_ms\": %.3f,\n  \"devices\": [", x->g->name ? x->g->name : "",
                  x->compile_ms);
  for (uint32_t d = 0; d < x->num_devs; ++d) {
    const bpg_dev_t* dev = &x->devs[d];
    bpg_sbuf_printf(s, "%s\n    {\"name\": \"%s\", \"nodes\": %u, \"streams\": %u, \"peak_bytes\": %llu, \"constant_bytes\": %llu, "
                    "\"limit_bytes\": %llu, \"default_figures\": %s}", d ? "," : "", bp_device_name(dev->device), dev->num_nodes,
                    dev->num_streams,
                    (unsigned long long)dev->arena_bytes, (unsigned long long)dev->const_bytes,
                    (unsigned long long)(dev->limit_bytes == UINT64_MAX ? 0 : dev->limit_bytes),
                    dev->default_figures ? "true" : "false");
  }
  bpg_sbuf_printf(s, "\n  ],\n  \"nodes\": [");
  int first = 1;
  for (uint32_t i = 0; i < x->num_steps; ++i) {
    const bpg_step_t* st = &x->steps[i];
    if (st->kind == BPG_STEP_COPY) continue;
    const bpg_region_t* r = st->kind == BPG_STEP_REGION ? &x->regions[st->node] : NULL;
    uint32_t cnt = r ? r->num_nodes : 1;
    for (uint32_t k = 0; k < cnt; ++k) {
      uint32_t idx = r ? r->nodes[k] : st->node;
      const bpg_node_t* n = &x->g->nodes[idx];
      bpg_sbuf_printf(s, "%s\n    {\"index\": %u, \"name\": \"%s\", \"op\": \"%s\", \"device\": \"%s\", \"reason\": \"",
                      first ? "" : ",", idx, n->name ? n->name : "", bpg_op_name(n->op),
                      bp_device_name(x->devs[st->dev].device));
      bpg_json_str(s, x->node_reason[idx]);
      if (r) bpg_sbuf_printf(s, "\", \"region\": %u, \"stream\": %u", st->node, st->stream);
      else bpg_sbuf_printf(s, "\", \"stream\": %u, \"estimated_ns\": %.0f, \"measured_ns\": %.0f", st->stream, st->est_ns, st->measured_ns);
      bpg_report_claim_json(x, idx, st->dev, s);
      bpg_sbuf_printf(s, "}");
      first = 0;
    }
  }
  bpg_sbuf_printf(s, "\n  ],\n  \"regions\": [");
  for (uint32_t i = 0; i < x->num_fusions; ++i) {
    const bpg_fusion_t* f = &x->fusions[i];
    const bpg_node_t* a = &x->g->nodes[f->first];
    const bpg_node_t* b = &x->g->nodes[f->second];
    bpg_sbuf_printf(s, "%s\n    {\"kind\": \"%s\", \"nodes\": [\"%s\", \"%s\"], \"ops\": [\"%s\", \"%s\"], \"as\": \"%s\", "
                    "\"device\": \"%s\"}", i ? "," : "", f->kind, a->name ? a->name : "", b->name ? b->name : "",
                    bpg_op_name(f->ops[0]), bpg_op_name(f->ops[1]), f->as,
                    bp_device_name(x->devs[x->node_dev[f->second]].device));
  }
  for (uint32_t i = 0; i < x->num_steps; ++i) {
    const bpg_step_t* st = &x->steps[i];
    if (st->kind != BPG_STEP_REGION) continue;
    const bpg_region_t* r = &x->regions[st->node];
    bpg_sbuf_printf(s, "%s\n    {\"kind\": \"%s\", \"region\": %u, \"nodes\": [", x->num_fusions || st->node ? "," : "",
                    bpg_region_kind_name(x, r), st->node);
    for (uint32_t k = 0; k < r->num_nodes; ++k) {
      const bpg_node_t* n = &x->g->nodes[r->nodes[k]];
      bpg_sbuf_printf(s, "%s\"%s\"", k ? ", " : "", n->name ? n->name : "");
    }
    bpg_sbuf_printf(s, "], \"ops\": [");
    for (uint32_t k = 0; k < r->num_nodes; ++k) {
      bpg_sbuf_printf(s, "%s\"%s\"", k ? ", " : "", bpg_op_name(x->g->nodes[r->nodes[k]].op));
    }
    bpg_sbuf_printf(s, "], \"as\": \"compiled region\", \"device\": \"%s\", \"inputs\": %u, \"outputs\": %u, "
                    "\"workspace_bytes\": %llu, \"donations\": %u, \"source\": \"%s\", \"estimated_ns\": %.0f, \"measured_ns\": %.0f}",
                    bp_device_name(x->devs[r->dev].device), r->num_inputs, r->num_outputs,
                    (unsigned long long)r->workspace_bytes, r->num_aliases,
                    r->loaded == 1 ? "loaded" : r->loaded == 2 ? "recompiled" : "compiled", st->est_ns, st->measured_ns);
  }
  bpg_sbuf_printf(s, "\n  ],\n  \"groups\": [");
  bpg_report_groups_json(x, s);
  bpg_sbuf_printf(s, "\n  ],\n  \"refused\": [");
  for (uint32_t i = 0; i < x->num_refusals; ++i) {
    const bpg_refusal_t* f = &x->refusals[i];
    bpg_sbuf_printf(s, "%s\n    {\"device\": \"%s\", \"first_node\": %u, \"nodes\": %u, \"reason\": %u, \"message\": \"",
                    i ? "," : "", bp_device_name(x->devs[f->dev].device), f->first, f->num_nodes, f->reason);
    bpg_json_str(s, f->message);
    bpg_sbuf_printf(s, "\"}");
  }
  bpg_sbuf_printf(s, "\n  ],\n  \"copies\": [");
  first = 1;
  for (uint32_t i = 0; i < x->num_steps; ++i) {
    const bpg_step_t* st = &x->steps[i];
    if (st->kind != BPG_STEP_COPY) continue;
    const bpg_slot_t* src = &x->slots[st->src_slot];
    bpg_sbuf_printf(s, "%s\n    {\"value\": \"%s\", \"from\": \"%s\", \"to\": \"%s\", \"bytes\": %llu, "
                    "\"estimated_ns\": %.0f, \"measured_ns\": %.0f}", first ? "" : ",",
                    bpg_value_name(x->g, src->value, vb, sizeof(vb)), bp_device_name(x->devs[src->dev].device),
                    bp_device_name(x->devs[st->dev].device), (unsigned long long)src->bytes, st->est_ns,
                    st->measured_ns);
    first = 0;
  }
  uint64_t peak = 0;
  for (uint32_t d = 0; d < x->num_devs; ++d) peak += x->devs[d].arena_bytes + x->devs[d].ws_bytes * x->devs[d].ws_streams;
  bpg_sbuf_printf(s, "\n  ],\n  \"copy_bytes\": %llu,\n  \"peak_bytes\": %llu,\n  \"unplanned_bytes\": %llu,\n"
                  "  \"estimated_ns\": %.0f,\n  \"measured_ns\": %.0f,\n  \"passes\": {\"folded\": %u, \"merged\": %u, "
                  "\"removed\": %u, \"decomposed\": %u, \"islands_moved\": %u, \"canonicalized\": %u},\n  \"warnings\": [",
                  (unsigned long long)x->copy_bytes, (unsigned long long)peak, (unsigned long long)x->unplanned_bytes,
                  x->est_ns, x->measured_ns, x->passes_folded, x->passes_merged, x->passes_removed, x->decomposed, x->islands_moved,
                  x->passes_canonical);
  bpg_warnings(x, s, 1);
  bpg_sbuf_printf(s, "]\n}\n");
}

static void bpg_report_text(const bp_graph_exec_t* x, bpg_sbuf_t* s) {
  char vb[32];
  bpg_sbuf_printf(s, "graph %s: %u nodes on %u device%s, compiled in %.2f ms\n", x->g->name ? x->g->name : "(unnamed)",
                  bpg_live_nodes(x), x->num_devs, x->num_devs == 1 ? "" : "s", x->compile_ms);
  for (uint32_t d = 0; d < x->num_devs; ++d) {
    const bpg_dev_t* dev = &x->devs[d];
    bpg_sbuf_printf(s, "  %-10s %4u nodes  peak %10llu bytes  constants %10llu bytes%s\n", bp_device_name(dev->device),
                    dev->num_nodes, (unsigned long long)dev->arena_bytes, (unsigned long long)dev->const_bytes,
                    dev->default_figures ? "  (no throughput figures: assumed 1 GFLOP/s, 10 GB/s)" : "");
  }
  bpg_sbuf_printf(s, "%-5s %-16s %-14s %-10s %10s %10s  %s\n", "#", "node", "op", "device", "est us", "meas us", "reason");
  for (uint32_t i = 0; i < x->num_steps; ++i) {
    const bpg_step_t* st = &x->steps[i];
    char streamed[24] = "";
    if (st->stream) snprintf(streamed, sizeof(streamed), " (stream %u)", st->stream);
    if (st->kind == BPG_STEP_REGION) {
      const bpg_region_t* r = &x->regions[st->node];
      char what[200];
      size_t w = 0;
      what[0] = '\0';
      for (uint32_t k = 0; k < r->num_nodes && w < sizeof(what) - 40; ++k) {
        w += (size_t)snprintf(what + w, sizeof(what) - w, "%s#%u %s", k ? ", " : "", r->nodes[k],
                              bpg_op_name(x->g->nodes[r->nodes[k]].op));
      }
      bpg_sbuf_printf(s, "%-5s %-16u %-14s %-10s %10.1f %10.1f  %u nodes: %s%s\n", "reg", st->node,
                      bpg_region_kind_name(x, r), bp_device_name(x->devs[st->dev].device), st->est_ns / 1e3,
                      st->measured_ns / 1e3, r->num_nodes, what, streamed);
    } else if (st->kind == BPG_STEP_NODE) {
      const bpg_node_t* n = &x->g->nodes[st->node];
      bpg_sbuf_printf(s, "%-5u %-16.16s %-14.14s %-10s %10.1f %10.1f  %s%s\n", st->node, n->name ? n->name : "-",
                      bpg_op_name(n->op), bp_device_name(x->devs[st->dev].device), st->est_ns / 1e3,
                      st->measured_ns / 1e3, x->node_reason[st->node], streamed);
    } else {
      const bpg_slot_t* src = &x->slots[st->src_slot];
      bpg_sbuf_printf(s, "%-5s %-16.16s %-14s %-10s %10.1f %10.1f  %llu bytes from %s\n", "copy",
                      bpg_value_name(x->g, src->value, vb, sizeof(vb)), "(copy)", bp_device_name(x->devs[st->dev].device),
                      st->est_ns / 1e3, st->measured_ns / 1e3, (unsigned long long)src->bytes,
                      bp_device_name(x->devs[src->dev].device));
    }
  }
  uint64_t peak = 0;
  for (uint32_t d = 0; d < x->num_devs; ++d) peak += x->devs[d].arena_bytes + x->devs[d].ws_bytes * x->devs[d].ws_streams;
  for (uint32_t i = 0; i < x->num_fusions; ++i) {
    const bpg_fusion_t* f = &x->fusions[i];
    bpg_sbuf_printf(s, "fused (%s): #%u %s + #%u %s -> %s on %s\n", f->kind, f->first, bpg_op_name(f->ops[0]),
                    f->second, bpg_op_name(f->ops[1]), f->as, bp_device_name(x->devs[x->node_dev[f->second]].device));
  }
  for (uint32_t i = 0; i < x->num_refusals; ++i) {
    const bpg_refusal_t* f = &x->refusals[i];
    bpg_sbuf_printf(s, "refused region of %u nodes from #%u on %s (split): %s\n", f->num_nodes, f->first,
                    bp_device_name(x->devs[f->dev].device), f->message);
  }
  bpg_report_claims_text(x, s);
  bpg_sbuf_printf(s, "regions: %u fused; copies: %u (%llu bytes); peak memory %llu bytes (unplanned %llu)\n",
                  x->num_regions, x->num_copies, (unsigned long long)x->copy_bytes, (unsigned long long)peak,
                  (unsigned long long)x->unplanned_bytes);
  bpg_sbuf_printf(s, "estimated %.1f us per run, measured %.1f us (last run)\n", x->est_ns / 1e3, x->measured_ns / 1e3);
  bpg_warnings(x, s, 0);
}

bp_status_t bp_graph_exec_report(const bp_graph_exec_t* x, uint32_t format, char** out_text) {
  if (x == NULL || out_text == NULL) return bpg_error(BP_INVALID_ARGUMENT, "bp_graph_exec_report: NULL argument");
  if (format != BP_GRAPH_REPORT_JSON && format != BP_GRAPH_REPORT_TEXT) {
    return bpg_error(BP_INVALID_ARGUMENT, "bp_graph_exec_report: unknown format %u", format);
  }
  bpg_sbuf_t s = {0};
  if (format == BP_GRAPH_REPORT_JSON) bpg_report_json(x, &s);
  else bpg_report_text(x, &s);
  if (s.oom || s.p == NULL) {
    free(s.p);
    return bpg_error(BP_RESOURCE_EXHAUSTED, "bp_graph_exec_report: out of memory");
  }
  *out_text = s.p;
  return BP_OK;
}

bp_status_t bp_graph_exec_set_profiling(bp_graph_exec_t* x, int on) {
  if (x == NULL) return bpg_error(BP_INVALID_ARGUMENT, "bp_graph_exec_set_profiling: exec is NULL");
  x->profile = on != 0;
  return BP_OK;
}
