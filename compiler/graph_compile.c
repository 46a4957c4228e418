/* libbackplane_graph: bp_graph_compile -- the pass pipeline -- and the
 * executable's lifetime.
 *
 * Order: const_fold, canonicalize, cse, dce on a copy of the graph; inference with the
 * symbols bound; placement; fused-op rewrites; regions compiled by the
 * plugins; steps and copies; streams; memory planning; constants
 * uploaded to each device that reads them.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "graph_exec.h"

static double bpg_now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

int bpg_device_index(const bp_graph_exec_t* x, const bp_device_t* d) {
  for (uint32_t i = 0; i < x->num_devs; ++i) {
    if (x->devs[i].device == d) return (int)i;
  }
  return -1;
}

bp_status_t bpg_exec_new_slot(bp_graph_exec_t* x, uint32_t value, uint32_t dev, uint32_t* out) {
  if (x->num_slots == x->cap_slots) {
    uint32_t cap = x->cap_slots ? x->cap_slots * 2 : 64;
    bpg_slot_t* p = realloc(x->slots, sizeof(bpg_slot_t) * cap);
    if (p == NULL) return bpg_error(BP_RESOURCE_EXHAUSTED, "compile: out of memory for buffers");
    x->slots = p;
    x->cap_slots = cap;
  }
  bpg_slot_t* s = &x->slots[x->num_slots];
  memset(s, 0, sizeof(*s));
  s->value = value;
  s->dev = dev;
  s->bytes = bpg_value_bytes(&x->g->values[value]);
  s->offset = BPG_NO_OFFSET;
  s->inplace_of = UINT32_MAX;
  s->alias_of = UINT32_MAX;
  *out = x->num_slots++;
  return BP_OK;
}

uint32_t bpg_slot_root(const bp_graph_exec_t* x, uint32_t s) {
  while (x->slots[s].alias_of != UINT32_MAX) s = x->slots[s].alias_of;
  return s;
}

bp_status_t bpg_exec_new_step(bp_graph_exec_t* x, uint32_t* out) {
  if (x->num_steps == x->cap_steps) {
    uint32_t cap = x->cap_steps ? x->cap_steps * 2 : 64;
    bpg_step_t* p = realloc(x->steps, sizeof(bpg_step_t) * cap);
    if (p == NULL) return bpg_error(BP_RESOURCE_EXHAUSTED, "compile: out of memory for steps");
    x->steps = p;
    x->cap_steps = cap;
  }
  memset(&x->steps[x->num_steps], 0, sizeof(bpg_step_t));
  *out = x->num_steps++;
  return BP_OK;
}

bp_status_t bpg_exec_init_devices(bp_graph_exec_t* x, bp_device_t* const* devices, uint32_t n,
                                  uint64_t limit) {
  if (n == 0) return bpg_error(BP_NOT_FOUND, "compile: no devices to compile for");
  if (n > BPG_MAX_DEVICES) return bpg_error(BP_INVALID_ARGUMENT, "compile: more than %d devices", BPG_MAX_DEVICES);
  for (uint32_t i = 0; i < n; ++i) {
    bpg_dev_t* d = &x->devs[i];
    if (devices[i] == NULL) return bpg_error(BP_INVALID_ARGUMENT, "compile: device %u is NULL", i);
    for (uint32_t j = 0; j < i; ++j) {
      if (devices[j] == devices[i]) {
        return bpg_error(BP_INVALID_ARGUMENT, "compile: device %s is listed twice", bp_device_name(devices[i]));
      }
    }
    d->device = devices[i];
    d->num_streams = 1;
    x->num_devs = i + 1;
    const bp_device_properties_t* p = bp_device_properties(d->device);
    d->peak_flops_f32 = p ? p->peak_ops_per_s[BP_DTYPE_F32] : 0;
    d->bandwidth = p ? p->memory_bandwidth_bytes_per_s : 0;
    d->launch_ns = p ? p->launch_overhead_ns : 0;
    d->link_bandwidth = p ? p->host_link_bandwidth_bytes_per_s : 0;
    if (d->peak_flops_f32 <= 0 || d->bandwidth <= 0) {
      d->default_figures = 1;
      if (d->peak_flops_f32 <= 0) d->peak_flops_f32 = 1e9;
      if (d->bandwidth <= 0) d->bandwidth = 1e10;
    }
    if (d->launch_ns <= 0) d->launch_ns = 5000;
    if (d->link_bandwidth <= 0) d->link_bandwidth = 1e10;
    d->limit_bytes = limit ? limit : (p && p->memory_bytes ? p->memory_bytes : UINT64_MAX);
    if (limit == 0 && p != NULL && p->memory_bytes == 0) d->limit_bytes = UINT64_MAX;
    d->place_limit = d->limit_bytes;
  }
  return BP_OK;
}

bp_status_t bpg_exec_upload_constants(bp_graph_exec_t* x) {
  if (x->const_tensors != NULL) return BP_OK;
  x->const_tensors = calloc(x->num_slots + 1, sizeof(bp_tensor_t*));
  if (x->const_tensors == NULL) return bpg_error(BP_RESOURCE_EXHAUSTED, "compile: out of memory");
  for (uint32_t s = 0; s < x->num_slots; ++s) {
    bpg_slot_t* sl = &x->slots[s];
    bpg_value_t* v = &x->g->values[sl->value];
    if (v->kind != BP_GRAPH_VALUE_CONSTANT) continue;
    bpg_dev_t* d = &x->devs[sl->dev];
    bp_status_t st = bpg_const_materialize(v);
    if (st == BP_OK) st = bp_tensor_create(d->device, v->dtype, v->rank, v->dims, &x->const_tensors[s]);
    if (st == BP_OK && v->cst->size > 0) {
      st = bp_tensor_write(d->stream, x->const_tensors[s], v->cst->data, v->cst->size);
    }
    if (st != BP_OK) return st;
  }
  return BP_OK;
}

void bp_graph_exec_release(bp_graph_exec_t* x) {
  if (x == NULL) return;
  for (uint32_t s = 0; s < x->num_slots; ++s) {
    bp_tensor_release(x->slots[s].planned);
    bp_tensor_release(x->slots[s].t);
    if (x->const_tensors) bp_tensor_release(x->const_tensors[s]);
  }
  for (uint32_t i = 0; i < x->num_steps; ++i) {
    bp_event_release(x->steps[i].ev_src);
    bp_event_release(x->steps[i].ev_dst);
    bp_event_release(x->steps[i].ev_done);
  }
  for (uint32_t d = 0; d < x->num_devs; ++d) {
    bpg_dev_t* dev = &x->devs[d];
    for (uint32_t k = 0; k < BPG_MAX_STREAMS; ++k) {
      bp_stream_t* sk = k == 0 ? dev->stream : dev->extra[k - 1];
      if (sk) bp_stream_synchronize(sk);
    }
    bp_buffer_release(dev->arena);
    for (uint32_t k = 0; k < BPG_MAX_STREAMS; ++k) bp_buffer_release(dev->ws[k]);
    for (uint32_t k = 0; k + 1 < BPG_MAX_STREAMS; ++k) bp_stream_release(dev->extra[k]);
    bp_event_release(dev->start_ev);
    bp_stream_release(dev->stream);
  }
  bpg_regions_free(x);
  free(x->const_tensors);
  free(x->slots);
  free(x->steps);
  free(x->slot_refs);
  free(x->node_dev);
  free(x->node_reason);
  free(x->home_slot);
  free(x->syms);
  free(x->est_cost);
  bpg_claims_free(x->claims);
  bp_graph_release(x->g);
  bp_graph_release(x->g_sym);
  if (x->ctx) bp_context_release(x->ctx);
  free(x);
}

/* Allocates the per-node and per-value tables once the graph is final. */
static bp_status_t bpg_exec_tables(bp_graph_exec_t* x) {
  free(x->node_dev);
  free(x->node_reason);
  free(x->home_slot);
  x->node_dev = calloc(x->g->num_nodes + 1, sizeof(uint32_t));
  x->node_reason = calloc(x->g->num_nodes + 1, sizeof(*x->node_reason));
  x->home_slot = malloc(sizeof(uint32_t) * (x->g->num_values + 1));
  if (x->node_dev == NULL || x->node_reason == NULL || x->home_slot == NULL) {
    return bpg_error(BP_RESOURCE_EXHAUSTED, "compile: out of memory");
  }
  memset(x->home_slot, 0xFF, sizeof(uint32_t) * (x->g->num_values + 1));
  return BP_OK;
}

/* Binds the symbols: every symbolic dim of an input becomes concrete. */
static bp_status_t bpg_bind(bp_graph_exec_t* x, const int64_t* syms, uint32_t num_syms) {
  bp_graph_t* g = x->g;
  if (g->num_syms == 0) return BP_OK;
  if (syms == NULL || num_syms != g->num_syms) {
    return bpg_error(BP_INVALID_ARGUMENT, "compile: the graph has %u symbol%s; give their values (symbol_values)",
                     g->num_syms, g->num_syms == 1 ? "" : "s");
  }
  x->syms = malloc(sizeof(int64_t) * g->num_syms);
  if (x->syms == NULL) return bpg_error(BP_RESOURCE_EXHAUSTED, "compile: out of memory");
  for (uint32_t i = 0; i < g->num_syms; ++i) {
    if (syms[i] < 0) {
      return bpg_error(BP_INVALID_ARGUMENT, "compile: symbol '%s' = %lld (must be >= 0)", g->syms[i],
                       (long long)syms[i]);
    }
    x->syms[i] = syms[i];
  }
  for (uint32_t v = 0; v < g->num_values; ++v) {
    bpg_value_t* val = &g->values[v];
    if (val->kind != BP_GRAPH_VALUE_INPUT) continue;
    for (uint32_t i = 0; i < val->rank; ++i) {
      if (BP_GRAPH_IS_SYM(val->dims[i])) val->dims[i] = x->syms[BP_GRAPH_SYM_INDEX(val->dims[i])];
    }
    if (bpg_value_bytes(val) > (uint64_t)INT64_MAX) {
      char vb[32];
      return bpg_error(BP_INVALID_ARGUMENT, "compile: input '%s' holds more than 2^63 bytes with the symbols' values",
                       bpg_value_name(g, v, vb, sizeof(vb)));
    }
  }
  return bpg_infer(g, x->syms);
}

/* The devices of a compile: the options' list, else every device of ctx. */
static bp_status_t bpg_devices(bp_context_t* ctx, const bp_graph_compile_options_t* o, bp_device_t** out,
                               uint32_t* out_n) {
  uint32_t n = o ? o->num_devices : 0;
  if (n > BPG_MAX_DEVICES) return bpg_error(BP_INVALID_ARGUMENT, "compile: more than %d devices", BPG_MAX_DEVICES);
  if (n > 0) {
    if (o->devices == NULL) return bpg_error(BP_INVALID_ARGUMENT, "compile: num_devices %u but devices is NULL", n);
    memcpy(out, o->devices, sizeof(bp_device_t*) * n);
  } else {
    uint32_t c = bp_context_device_count(ctx);
    for (uint32_t i = 0; i < c && n < BPG_MAX_DEVICES; ++i) {
      if (bp_context_device(ctx, i, &out[n]) == BP_OK) n++;
    }
  }
  *out_n = n;
  return BP_OK;
}

/* Back to the state before placement, for another attempt. */
static bp_status_t bpg_exec_reset(bp_graph_exec_t* x, const int64_t* syms, uint32_t num_syms) {
  bp_graph_release(x->g);
  x->g = NULL;
  free(x->syms);
  x->syms = NULL;
  free(x->slots);
  free(x->steps);
  free(x->slot_refs);
  x->slots = NULL;
  x->steps = NULL;
  x->slot_refs = NULL;
  x->num_slots = x->cap_slots = x->num_steps = x->cap_steps = x->num_refs = 0;
  x->num_fusions = x->num_copies = 0;
  bpg_regions_free(x);
  x->copy_bytes = x->unplanned_bytes = 0;
  x->islands_moved = 0;
  x->over_dev = UINT32_MAX;
  free(x->est_cost);
  x->est_cost = NULL;
  x->est_nodes = 0;
  bpg_claims_free(x->claims);
  x->claims = NULL;
  for (uint32_t d = 0; d < x->num_devs; ++d) {
    x->devs[d].placed_bytes = x->devs[d].arena_bytes = x->devs[d].const_bytes = 0;
    x->devs[d].num_nodes = 0;
  }
  bp_status_t st = bpg_clone(x->g_sym, &x->g);
  if (st == BP_OK) st = bpg_bind(x, syms, num_syms);
  if (st == BP_OK) memset(x->home_slot, 0xFF, sizeof(uint32_t) * (x->g->num_values + 1));
  return st;
}

/* A view runs where its input is (it is a new descriptor of that buffer). */
static void bpg_views_follow_inputs(bp_graph_exec_t* x) {
  const bp_graph_t* g = x->g;
  for (uint32_t n = 0; n < g->num_nodes; ++n) {
    const bpg_node_t* node = &g->nodes[n];
    if (node->dead || !bpg_is_alias_view(node->op)) continue;
    const bpg_value_t* in = &g->values[node->in[0]];
    if (in->kind != BP_GRAPH_VALUE_NODE || g->nodes[in->producer].dead) continue;
    uint32_t d = x->node_dev[in->producer];
    if (d == x->node_dev[n]) continue;
    x->devs[x->node_dev[n]].num_nodes--;
    x->devs[d].num_nodes++;
    x->node_dev[n] = d;
    snprintf(x->node_reason[n], sizeof(x->node_reason[n]), "a view: on its input's device");
  }
}

bp_status_t bpg_exec_build(bp_context_t* ctx, const bp_graph_t* g_sym, const int64_t* syms, uint32_t num_syms,
                           const bp_graph_compile_options_t* o, const bp_graph_exec_t* placed,
                           bp_graph_exec_t** out) {
  double t0 = bpg_now_ms();
  bp_graph_exec_t* x = calloc(1, sizeof(*x));
  if (x == NULL) return bpg_error(BP_RESOURCE_EXHAUSTED, "compile: out of memory");
  bp_context_retain(ctx);
  x->ctx = ctx;
  x->flags = o ? o->flags : 0;
  x->limit_option = o ? o->memory_limit_bytes : 0;
  x->over_dev = UINT32_MAX;
  bp_status_t st = bpg_clone(g_sym, &x->g_sym);
  if (st == BP_OK) st = bpg_clone(g_sym, &x->g);
  if (st == BP_OK) st = bpg_bind(x, syms, num_syms);
  if (st == BP_OK) st = bpg_exec_tables(x);
  bp_device_t* devs[BPG_MAX_DEVICES];
  uint32_t n = 0;
  if (st == BP_OK && placed != NULL) {
    n = placed->num_devs;
    for (uint32_t d = 0; d < n; ++d) devs[d] = placed->devs[d].device;
  } else if (st == BP_OK) {
    st = bpg_devices(ctx, o, devs, &n);
  }
  if (st == BP_OK) st = bpg_exec_init_devices(x, devs, n, o ? o->memory_limit_bytes : 0);
  /* Placement estimates memory; planning knows it. When the plan does not
   * fit a device, place again with that device's limit lowered by the
   * excess (a few times at most). */
  for (int attempt = 0; st == BP_OK; ++attempt) {
    uint32_t patterns = 0;
    if (!(x->flags & BP_GRAPH_NO_FUSE)) st = bpg_pass_patterns(x, &patterns);
    uint32_t fusions = x->num_fusions;
    if (st == BP_OK) st = bpg_pass_decompose(x, &x->decomposed); /* and the horizontal fusions (noted): both rebuild x->g */
    if (st == BP_OK && (x->decomposed > 0 || patterns > 0 || x->num_fusions > fusions)) st = bpg_exec_tables(x);
    if (st != BP_OK) break;
    if (placed != NULL && placed->g->num_nodes != x->g->num_nodes) placed = NULL; /* another graph: place it */
    if (placed != NULL) {
      /* The same graph: the same nodes on the same devices. */
      memcpy(x->node_dev, placed->node_dev, sizeof(uint32_t) * x->g->num_nodes);
      memcpy(x->node_reason, placed->node_reason, sizeof(*x->node_reason) * x->g->num_nodes);
      if (placed->claims != NULL && (x->claims = bpg_claims_clone(placed->claims)) == NULL) {
        st = bpg_error(BP_RESOURCE_EXHAUSTED, "compile: out of memory");
        break;
      }
      for (uint32_t d = 0; d < n; ++d) x->devs[d].num_nodes = placed->devs[d].num_nodes;
      x->passes_folded = placed->passes_folded;
      x->passes_merged = placed->passes_merged;
      x->passes_removed = placed->passes_removed;
      x->islands_moved = placed->islands_moved;
    } else {
      st = bpg_pass_place(x, o);
      if (st == BP_OK) bpg_views_follow_inputs(x);
    }
    if (st == BP_OK && !(x->flags & BP_GRAPH_NO_FUSE)) st = bpg_pass_fuse(x);
    if (st == BP_OK && !(x->flags & BP_GRAPH_NO_REGIONS)) st = bpg_pass_regions(x);
    if (st == BP_OK) st = bpg_pass_copies(x);
    if (st == BP_OK) st = bpg_pass_streams(x);
    if (st == BP_OK) st = bpg_pass_memplan(x);
    if (st != BP_RESOURCE_EXHAUSTED || placed != NULL || x->over_dev == UINT32_MAX || attempt >= 8) break;
    bpg_dev_t* over = &x->devs[x->over_dev];
    uint64_t cut = x->over_bytes > BPG_ALIGN ? x->over_bytes : BPG_ALIGN;
    over->place_limit = over->place_limit > cut ? over->place_limit - cut : 0;
    st = bpg_exec_reset(x, syms, num_syms);
  }
  if (st == BP_OK) {
    for (uint32_t i = 0; i < x->num_steps; ++i) x->est_ns += x->steps[i].est_ns;
    x->num_regions = x->num_fusions + x->num_cregions;
    x->compile_ms = bpg_now_ms() - t0;
    *out = x;
    return BP_OK;
  }
  /* Keep the failing pass's message across the cleanup. */
  char msg[1024];
  snprintf(msg, sizeof(msg), "%s", bp_status_message());
  bp_graph_exec_release(x);
  return bp_status_set_message(st, msg);
}

bp_status_t bpg_compile_front(bp_context_t* ctx, const bp_graph_t* graph, uint32_t flags, bp_graph_t** out_g,
                              uint32_t counters[4]) {
  bp_graph_t* g = NULL;
  bp_status_t st = bpg_clone(graph, &g);
  if (st == BP_OK) st = bpg_infer(g, NULL); /* verify before anything runs */
  if (st == BP_OK && !(flags & BP_GRAPH_NO_FOLD)) st = bpg_pass_const_fold(g, ctx, &counters[0]);
  if (st == BP_OK && !(flags & BP_GRAPH_NO_CANONICALIZE)) st = bpg_pass_canonicalize(g, &counters[3]);
  if (st == BP_OK) bpg_lower_contiguous(g);
  if (st == BP_OK && !(flags & BP_GRAPH_NO_CSE)) st = bpg_pass_cse(g, &counters[1]);
  if (st == BP_OK && !(flags & BP_GRAPH_NO_DCE)) st = bpg_pass_dce(g, &counters[2]);
  if (st != BP_OK) {
    char msg[1024];
    snprintf(msg, sizeof(msg), "%s", bp_status_message());
    bp_graph_release(g);
    return bp_status_set_message(st, msg);
  }
  *out_g = g;
  return BP_OK;
}

bp_status_t bp_graph_compile(bp_context_t* ctx, const bp_graph_t* graph,
                             const bp_graph_compile_options_t* o, bp_graph_exec_t** out_exec) {
  if (ctx == NULL || graph == NULL || out_exec == NULL) {
    return bpg_error(BP_INVALID_ARGUMENT, "bp_graph_compile: context, graph or out_exec is NULL");
  }
  if (o != NULL && o->struct_size < BP_GRAPH_COMPILE_OPTIONS_V1_SIZE) {
    return bpg_error(BP_INVALID_ARGUMENT, "bp_graph_compile: options->struct_size %u is too small", o->struct_size);
  }
  if (graph->num_outputs == 0) return bpg_error(BP_INVALID_ARGUMENT, "bp_graph_compile: the graph has no outputs");
  double t0 = bpg_now_ms();
  uint32_t counters[4] = {0, 0, 0, 0};
  bp_graph_t* g_sym = NULL;
  bp_status_t st = bpg_compile_front(ctx, graph, o ? o->flags : 0, &g_sym, counters);
  if (st != BP_OK) return st;
  st = bpg_exec_build(ctx, g_sym, o ? o->symbol_values : NULL, o ? o->num_symbol_values : 0, o, NULL, out_exec);
  bp_graph_release(g_sym);
  if (st != BP_OK) return st;
  (*out_exec)->passes_folded = counters[0];
  (*out_exec)->passes_merged = counters[1];
  (*out_exec)->passes_removed = counters[2];
  (*out_exec)->passes_canonical = counters[3];
  (*out_exec)->compile_ms = bpg_now_ms() - t0;
  return BP_OK;
}

const bp_graph_t* bp_graph_exec_graph(const bp_graph_exec_t* x) { return x ? x->g : NULL; }
