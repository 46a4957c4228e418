/* libbackplane_graph: the guarded cache.
 *
 * Guards, as torch.compile's: each graph input's dtype, its concrete dims
 * and the device it lives on. A run whose guards match an entry reuses its
 * executable (a hit). Symbolic dims are not guarded: they bind the graph's
 * symbols, and a new binding of an already compiled graph is a rebind --
 * the compiled graph and its placement are kept, only shapes, copies and
 * the memory plan are redone -- not a recompile. A failed guard on a dtype,
 * a concrete dim or a device compiles again (a recompile, counted) from the
 * graph with the inputs' actual dtypes and dims.
 *
 * Threading: externally synchronized (one thread at a time per cache).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "graph_exec.h"

typedef struct bpg_entry {
  uint32_t* dtypes;      /* per input */
  int64_t* dims;         /* per input, BP_MAX_RANK each (concrete, from the run) */
  bp_device_t** devices; /* per input */
  int64_t* syms;         /* the binding */
  uint32_t family;       /* entries with the same family share the front graph */
  bp_graph_exec_t* exec;
} bpg_entry_t;

typedef struct bpg_family {
  bp_graph_t* g_sym;        /* the front's graph for these dtypes and concrete dims */
  bp_graph_exec_t* placed;  /* its first executable: the placement rebinds reuse */
} bpg_family_t;

struct bp_graph_cache {
  bp_context_t* ctx;
  bp_graph_t* g;
  bp_graph_compile_options_t o;
  bp_device_t* devices[BPG_MAX_DEVICES];
  bp_graph_pin_t* pins;
  char** pin_names;
  bpg_entry_t* entries;
  uint32_t num_entries, cap_entries;
  bpg_family_t* families;
  uint32_t num_families, cap_families;
  bp_graph_cache_stats_t stats;
};

bp_status_t bp_graph_cache_create(bp_context_t* ctx, const bp_graph_t* graph, const bp_graph_compile_options_t* o,
                                  bp_graph_cache_t** out) {
  if (ctx == NULL || graph == NULL || out == NULL) {
    return bpg_error(BP_INVALID_ARGUMENT, "bp_graph_cache_create: context, graph or out_cache is NULL");
  }
  if (o != NULL && (o->struct_size < BP_GRAPH_COMPILE_OPTIONS_V1_SIZE || o->num_devices > BPG_MAX_DEVICES ||
                    (o->num_devices > 0 && o->devices == NULL) || (o->num_pins > 0 && o->pins == NULL))) {
    return bpg_error(BP_INVALID_ARGUMENT, "bp_graph_cache_create: bad options");
  }
  bp_graph_cache_t* c = calloc(1, sizeof(*c));
  if (c == NULL) return bpg_error(BP_RESOURCE_EXHAUSTED, "bp_graph_cache_create: out of memory");
  bp_status_t st = bpg_clone(graph, &c->g);
  if (st == BP_OK) st = bpg_infer(c->g, NULL);
  if (st != BP_OK) {
    char msg[1024];
    snprintf(msg, sizeof(msg), "%s", bp_status_message());
    bp_graph_release(c->g);
    free(c);
    return bp_status_set_message(st, msg);
  }
  memset(&c->o, 0, sizeof(c->o));
  if (o != NULL) memcpy(&c->o, o, o->struct_size < sizeof(c->o) ? o->struct_size : sizeof(c->o));
  c->o.struct_size = sizeof(c->o);
  c->o.symbol_values = NULL;
  c->o.num_symbol_values = 0;
  if (c->o.num_devices > 0) {
    memcpy(c->devices, o->devices, sizeof(bp_device_t*) * c->o.num_devices);
    c->o.devices = c->devices;
  }
  if (c->o.num_pins > 0) {
    c->pins = calloc(c->o.num_pins, sizeof(bp_graph_pin_t));
    c->pin_names = calloc(c->o.num_pins, sizeof(char*));
    int oom = c->pins == NULL || c->pin_names == NULL;
    for (uint32_t i = 0; i < c->o.num_pins && !oom; ++i) {
      const char* nm = o->pins[i].node_name ? o->pins[i].node_name : "";
      c->pin_names[i] = malloc(strlen(nm) + 1);
      if (c->pin_names[i] == NULL) oom = 1;
      else strcpy(c->pin_names[i], nm);
      c->pins[i].node_name = c->pin_names[i];
      c->pins[i].device = o->pins[i].device;
    }
    c->o.pins = c->pins;
    if (oom) {
      c->ctx = NULL;
      bp_graph_cache_release(c);
      return bpg_error(BP_RESOURCE_EXHAUSTED, "bp_graph_cache_create: out of memory");
    }
  }
  bp_context_retain(ctx);
  c->ctx = ctx;
  c->stats.struct_size = sizeof(c->stats);
  *out = c;
  return BP_OK;
}

static void bpg_entry_free(bpg_entry_t* e) {
  free(e->dtypes);
  free(e->dims);
  free(e->devices);
  free(e->syms);
  bp_graph_exec_release(e->exec);
}

void bp_graph_cache_release(bp_graph_cache_t* c) {
  if (c == NULL) return;
  for (uint32_t i = 0; i < c->num_entries; ++i) bpg_entry_free(&c->entries[i]);
  for (uint32_t i = 0; i < c->num_families; ++i) bp_graph_release(c->families[i].g_sym);
  for (uint32_t i = 0; c->pin_names && i < c->o.num_pins; ++i) free(c->pin_names[i]);
  free(c->pin_names);
  free(c->pins);
  free(c->entries);
  free(c->families);
  bp_graph_release(c->g);
  if (c->ctx) bp_context_release(c->ctx);
  free(c);
}

/* The guard key of these inputs: dtypes, dims, devices and the symbols
 * they bind. Fails when the inputs cannot be this graph's at all. */
static bp_status_t bpg_key(const bp_graph_cache_t* c, const bp_tensor_t* const* in, uint32_t n, bpg_entry_t* k) {
  const bp_graph_t* g = c->g;
  if (n != g->num_inputs || (n > 0 && in == NULL)) {
    return bpg_error(BP_INVALID_ARGUMENT, "bp_graph_cache: the graph has %u inputs, got %u", g->num_inputs, n);
  }
  k->dtypes = calloc(n + 1, sizeof(uint32_t));
  k->dims = calloc((size_t)n * BP_MAX_RANK + 1, sizeof(int64_t));
  k->devices = calloc(n + 1, sizeof(bp_device_t*));
  k->syms = calloc(g->num_syms + 1, sizeof(int64_t));
  if (!k->dtypes || !k->dims || !k->devices || !k->syms) return bpg_error(BP_RESOURCE_EXHAUSTED, "bp_graph_cache: out of memory");
  for (uint32_t s = 0; s < g->num_syms; ++s) k->syms[s] = -1;
  for (uint32_t i = 0; i < n; ++i) {
    const bpg_value_t* v = &g->values[g->inputs[i]];
    char vb[32];
    const char* name = bpg_value_name(g, g->inputs[i], vb, sizeof(vb));
    if (in[i] == NULL) return bpg_error(BP_INVALID_ARGUMENT, "bp_graph_cache: input '%s' is NULL", name);
    if (bp_tensor_rank(in[i]) != v->rank) {
      return bpg_error(BP_FAILED_PRECONDITION, "bp_graph_cache: input '%s' has rank %u, the graph's has %u", name,
                       bp_tensor_rank(in[i]), v->rank);
    }
    k->dtypes[i] = bp_tensor_dtype(in[i]);
    k->devices[i] = bp_tensor_device(in[i]);
    const int64_t* sz = bp_tensor_sizes(in[i]);
    for (uint32_t d = 0; d < v->rank; ++d) {
      k->dims[(size_t)i * BP_MAX_RANK + d] = sz[d];
      if (!BP_GRAPH_IS_SYM(v->dims[d])) continue;
      uint32_t s = BP_GRAPH_SYM_INDEX(v->dims[d]);
      if (k->syms[s] >= 0 && k->syms[s] != sz[d]) {
        return bpg_error(BP_FAILED_PRECONDITION, "bp_graph_cache: symbol '%s' is %lld in one input and %lld in '%s'",
                         g->syms[s], (long long)k->syms[s], (long long)sz[d], name);
      }
      k->syms[s] = sz[d];
    }
  }
  for (uint32_t s = 0; s < g->num_syms; ++s) {
    if (k->syms[s] < 0) k->syms[s] = 1; /* a symbol no input names: any size does */
  }
  return BP_OK;
}

/* Same guards except symbolic dims (0: differ, 1: same family, 2: same). */
static int bpg_match(const bp_graph_cache_t* c, const bpg_entry_t* a, const bpg_entry_t* b) {
  const bp_graph_t* g = c->g;
  uint32_t n = g->num_inputs;
  if (memcmp(a->dtypes, b->dtypes, sizeof(uint32_t) * n) != 0 ||
      memcmp(a->devices, b->devices, sizeof(bp_device_t*) * n) != 0) {
    return 0;
  }
  for (uint32_t i = 0; i < n; ++i) {
    const bpg_value_t* v = &g->values[g->inputs[i]];
    for (uint32_t d = 0; d < v->rank; ++d) {
      size_t at = (size_t)i * BP_MAX_RANK + d;
      if (!BP_GRAPH_IS_SYM(v->dims[d]) && a->dims[at] != b->dims[at]) return 0;
    }
  }
  return memcmp(a->syms, b->syms, sizeof(int64_t) * g->num_syms) == 0 ? 2 : 1;
}

/* A new family: the graph with the inputs' dtypes and concrete dims, through the front. */
static bp_status_t bpg_new_family(bp_graph_cache_t* c, const bpg_entry_t* k, uint32_t* out) {
  bp_graph_t* g = NULL;
  bp_status_t st = bpg_clone(c->g, &g);
  for (uint32_t i = 0; st == BP_OK && i < g->num_inputs; ++i) {
    bpg_value_t* v = &g->values[g->inputs[i]];
    v->dtype = k->dtypes[i];
    for (uint32_t d = 0; d < v->rank; ++d) {
      if (!BP_GRAPH_IS_SYM(v->dims[d])) v->dims[d] = k->dims[(size_t)i * BP_MAX_RANK + d];
    }
  }
  uint32_t counters[4] = {0, 0, 0, 0};
  bp_graph_t* front = NULL;
  if (st == BP_OK) st = bpg_compile_front(c->ctx, g, c->o.flags, &front, counters);
  bp_graph_release(g);
  if (st != BP_OK) return st;
  if (c->num_families == c->cap_families) {
    uint32_t cap = c->cap_families ? c->cap_families * 2 : 4;
    bpg_family_t* p = realloc(c->families, sizeof(bpg_family_t) * cap);
    if (p == NULL) {
      bp_graph_release(front);
      return bpg_error(BP_RESOURCE_EXHAUSTED, "bp_graph_cache: out of memory");
    }
    c->families = p;
    c->cap_families = cap;
  }
  c->families[c->num_families].g_sym = front;
  c->families[c->num_families].placed = NULL;
  *out = c->num_families++;
  return BP_OK;
}

bp_status_t bp_graph_cache_lookup(bp_graph_cache_t* c, const bp_tensor_t* const* inputs, uint32_t num_inputs,
                                  bp_graph_exec_t** out_exec) {
  if (c == NULL || out_exec == NULL) return bpg_error(BP_INVALID_ARGUMENT, "bp_graph_cache_lookup: NULL argument");
  bpg_entry_t k;
  memset(&k, 0, sizeof(k));
  bp_status_t st = bpg_key(c, inputs, num_inputs, &k);
  if (st != BP_OK) {
    char msg[1024];
    snprintf(msg, sizeof(msg), "%s", bp_status_message());
    bpg_entry_free(&k);
    return bp_status_set_message(st, msg);
  }
  int family = -1;
  for (uint32_t i = 0; i < c->num_entries; ++i) {
    int m = bpg_match(c, &c->entries[i], &k);
    if (m == 2) {
      c->stats.hits++;
      *out_exec = c->entries[i].exec;
      bpg_entry_free(&k);
      return BP_OK;
    }
    if (m == 1 && family < 0) family = (int)c->entries[i].family;
  }
  /* A miss: a rebind within the family, or a new compile. */
  uint32_t fam = 0;
  if (family >= 0) {
    fam = (uint32_t)family;
  } else {
    st = bpg_new_family(c, &k, &fam);
  }
  bp_graph_exec_t* x = NULL;
  if (st == BP_OK) {
    st = bpg_exec_build(c->ctx, c->families[fam].g_sym, k.syms, c->g->num_syms, &c->o, c->families[fam].placed, &x);
  }
  if (st == BP_OK && c->num_entries == c->cap_entries) {
    uint32_t cap = c->cap_entries ? c->cap_entries * 2 : 8;
    bpg_entry_t* p = realloc(c->entries, sizeof(bpg_entry_t) * cap);
    if (p == NULL) st = bpg_error(BP_RESOURCE_EXHAUSTED, "bp_graph_cache: out of memory");
    else {
      c->entries = p;
      c->cap_entries = cap;
    }
  }
  if (st != BP_OK) {
    char msg[1024];
    snprintf(msg, sizeof(msg), "%s", bp_status_message());
    bp_graph_exec_release(x);
    bpg_entry_free(&k);
    return bp_status_set_message(st, msg);
  }
  if (family >= 0) c->stats.rebinds++;
  else c->stats.compiles++;
  if (c->families[fam].placed == NULL) c->families[fam].placed = x;
  k.family = fam;
  k.exec = x;
  c->entries[c->num_entries++] = k;
  *out_exec = x;
  return BP_OK;
}

bp_status_t bp_graph_cache_run(bp_graph_cache_t* c, const bp_tensor_t* const* inputs, uint32_t num_inputs,
                               bp_tensor_t** outputs, uint32_t num_outputs) {
  bp_graph_exec_t* x = NULL;
  bp_status_t st = bp_graph_cache_lookup(c, inputs, num_inputs, &x);
  if (st != BP_OK) return st;
  return bp_graph_exec_run(x, inputs, num_inputs, outputs, num_outputs);
}

bp_status_t bp_graph_cache_get_stats(const bp_graph_cache_t* c, bp_graph_cache_stats_t* out) {
  if (c == NULL || out == NULL || out->struct_size < BP_GRAPH_CACHE_STATS_V1_SIZE) {
    return bpg_error(BP_INVALID_ARGUMENT, "bp_graph_cache_get_stats: bad argument");
  }
  uint32_t size = out->struct_size;
  memset(out, 0, size);
  memcpy(out, &c->stats, size < sizeof(c->stats) ? size : sizeof(c->stats));
  out->struct_size = size;
  out->entries = c->num_entries;
  return BP_OK;
}
