/* libbackplane_graph: the IR and its builder API.
 *
 * Values and nodes live in growing arrays; ids are indices and never change
 * (a pass that removes a node marks it dead). Ownership: the graph owns
 * every string, attribute copy and constant's bytes.
 */
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "graph_internal.h"

bp_status_t bpg_error(bp_status_t status, const char* fmt, ...) {
  char buf[1024];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(buf, sizeof(buf), fmt, ap);
  va_end(ap);
  return bp_status_set_message(status, buf);
}

static char* bpg_strdup(const char* s) {
  if (s == NULL) return NULL;
  size_t n = strlen(s) + 1;
  char* p = malloc(n);
  if (p != NULL) memcpy(p, s, n);
  return p;
}

/* Grows *arr (elements of `elem` bytes) to hold one more; 0 or -1. */
static int bpg_grow(void** arr, uint32_t* cap, uint32_t count, size_t elem) {
  if (count < *cap) return 0;
  uint32_t ncap = *cap ? *cap * 2 : 16;
  void* p = realloc(*arr, (size_t)ncap * elem);
  if (p == NULL) return -1;
  *arr = p;
  *cap = ncap;
  return 0;
}

static int bpg_name_ok(const char* name) {
  if (name == NULL || name[0] == '\0' || strlen(name) >= BP_MAX_NAME) return 0;
  for (const char* c = name; *c; ++c) {
    int ok = (*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') || *c == '_' || *c == '.' ||
             (*c >= '0' && *c <= '9' && c != name) || (*c == '%' && c == name);
    if (!ok) return 0;
  }
  return 1;
}

static uint32_t bpg_hash(const char* s) {
  uint32_t h = 2166136261u;
  for (; *s; ++s) h = (h ^ (uint8_t)*s) * 16777619u;
  return h;
}

static void bpg_index_put(bp_graph_t* g, uint32_t v) {
  uint32_t mask = g->name_cap - 1;
  for (uint32_t i = bpg_hash(g->values[v].name) & mask;; i = (i + 1) & mask) {
    if (g->name_index[i] == UINT32_MAX) {
      g->name_index[i] = v;
      g->name_used++;
      return;
    }
  }
}

/* (Re)builds the index with room for every named value twice over. */
static int bpg_index_rebuild(bp_graph_t* g) {
  uint32_t cap = 64;
  while (cap < 2 * (g->num_values + 1)) cap *= 2;
  uint32_t* idx = malloc(sizeof(uint32_t) * cap);
  if (idx == NULL) return -1;
  free(g->name_index);
  g->name_index = idx;
  g->name_cap = cap;
  g->name_used = 0;
  memset(idx, 0xFF, sizeof(uint32_t) * cap);
  for (uint32_t v = 0; v < g->num_values; ++v) {
    if (g->values[v].name != NULL) bpg_index_put(g, v);
  }
  g->name_stale = 0;
  return 0;
}

/* Records that value v got its name (rebuilds when the table fills). */
static void bpg_index_add(bp_graph_t* g, uint32_t v) {
  if (g->name_stale || g->name_index == NULL || 2 * (g->name_used + 1) > g->name_cap) {
    g->name_stale = 1; /* the next lookup rebuilds */
    return;
  }
  bpg_index_put(g, v);
}

/* Value named `name`, or UINT32_MAX (-1 on out of memory: a linear scan). */
static uint32_t bpg_index_find(const bp_graph_t* cg, const char* name) {
  bp_graph_t* g = (bp_graph_t*)cg; /* the index is a cache */
  if ((g->name_stale || g->name_index == NULL) && bpg_index_rebuild(g) != 0) {
    for (uint32_t v = 0; v < g->num_values; ++v) {
      if (g->values[v].name != NULL && strcmp(g->values[v].name, name) == 0) return v;
    }
    return UINT32_MAX;
  }
  uint32_t mask = g->name_cap - 1;
  for (uint32_t i = bpg_hash(name) & mask;; i = (i + 1) & mask) {
    uint32_t v = g->name_index[i];
    if (v == UINT32_MAX) return UINT32_MAX;
    if (v < g->num_values && g->values[v].name != NULL && strcmp(g->values[v].name, name) == 0) return v;
  }
}

const char* bpg_value_name(const bp_graph_t* g, uint32_t v, char* buf, size_t cap) {
  if (v == BP_GRAPH_NO_VALUE) return "_";
  if (v < g->num_values && g->values[v].name != NULL) return g->values[v].name;
  snprintf(buf, cap, "%%%u", v);
  return buf;
}

const char* bpg_node_label(const bp_graph_t* g, uint32_t n, char* buf, size_t cap) {
  const bpg_node_t* node = &g->nodes[n];
  const char* op = bpg_node_op_name(node->op);
  if (node->name != NULL) {
    snprintf(buf, cap, "node '%s' (#%u, %s)", node->name, n, op);
  } else {
    snprintf(buf, cap, "node #%u (%s)", n, op);
  }
  return buf;
}

bp_status_t bp_graph_create(const char* name, bp_graph_t** out_graph) {
  if (out_graph == NULL) return bpg_error(BP_INVALID_ARGUMENT, "bp_graph_create: out_graph is NULL");
  if (name != NULL && !bpg_name_ok(name)) {
    return bpg_error(BP_INVALID_ARGUMENT, "bp_graph_create: '%s' is not a valid name", name);
  }
  bp_graph_t* g = calloc(1, sizeof(*g));
  if (g == NULL) return bpg_error(BP_RESOURCE_EXHAUSTED, "bp_graph_create: out of memory");
  if (name != NULL && (g->name = bpg_strdup(name)) == NULL) {
    free(g);
    return bpg_error(BP_RESOURCE_EXHAUSTED, "bp_graph_create: out of memory");
  }
  *out_graph = g;
  return BP_OK;
}

static void bpg_const_free(bpg_const_t* c) {
  if (c == NULL) return;
  free(c->data);
  free(c);
}

void bp_graph_release(bp_graph_t* g) {
  if (g == NULL) return;
  for (uint32_t i = 0; i < g->num_values; ++i) {
    free(g->values[i].name);
    bpg_const_free(g->values[i].cst);
  }
  for (uint32_t i = 0; i < g->num_nodes; ++i) {
    free(g->nodes[i].name);
    free(g->nodes[i].in);
    free(g->nodes[i].attrs);
  }
  for (uint32_t i = 0; i < g->num_syms; ++i) free(g->syms[i]);
  free(g->syms);
  free(g->name_index);
  free(g->values);
  free(g->nodes);
  free(g->inputs);
  free(g->outputs);
  free(g->name);
  free(g);
}

static bp_status_t bpg_check_unique(const bp_graph_t* g, const char* api, const char* name) {
  if (!bpg_name_ok(name)) {
    return bpg_error(BP_INVALID_ARGUMENT, "%s: '%s' is not a valid name (letters, digits, '_', '.')",
                     api, name ? name : "(null)");
  }
  uint32_t found;
  if (bp_graph_find_value(g, name, &found) == BP_OK) {
    return bpg_error(BP_ALREADY_EXISTS, "%s: a value named '%s' exists", api, name);
  }
  for (uint32_t i = 0; i < g->num_syms; ++i) {
    if (strcmp(g->syms[i], name) == 0) {
      return bpg_error(BP_ALREADY_EXISTS, "%s: '%s' names a symbol", api, name);
    }
  }
  return BP_OK;
}

bp_status_t bpg_new_value(bp_graph_t* g, const char* name, uint32_t kind, uint32_t* out) {
  if (bpg_grow((void**)&g->values, &g->cap_values, g->num_values, sizeof(bpg_value_t)) != 0) {
    return bpg_error(BP_RESOURCE_EXHAUSTED, "graph: out of memory for values");
  }
  bpg_value_t* v = &g->values[g->num_values];
  memset(v, 0, sizeof(*v));
  v->kind = kind;
  if (name != NULL && (v->name = bpg_strdup(name)) == NULL) {
    return bpg_error(BP_RESOURCE_EXHAUSTED, "graph: out of memory for names");
  }
  *out = g->num_values++;
  if (name != NULL) bpg_index_add(g, *out);
  return BP_OK;
}

bp_status_t bp_graph_add_symbol(bp_graph_t* g, const char* name, int64_t* out_dim) {
  if (g == NULL || out_dim == NULL) {
    return bpg_error(BP_INVALID_ARGUMENT, "bp_graph_add_symbol: graph or out_dim is NULL");
  }
  bp_status_t st = bpg_check_unique(g, "bp_graph_add_symbol", name);
  if (st != BP_OK) return st;
  if (bpg_grow((void**)&g->syms, &g->cap_syms, g->num_syms, sizeof(char*)) != 0 ||
      (g->syms[g->num_syms] = bpg_strdup(name)) == NULL) {
    return bpg_error(BP_RESOURCE_EXHAUSTED, "bp_graph_add_symbol: out of memory");
  }
  *out_dim = BP_GRAPH_SYM(g->num_syms);
  g->num_syms++;
  return BP_OK;
}

static bp_status_t bpg_check_shape(const bp_graph_t* g, const char* api, uint32_t dtype,
                                   uint32_t rank, const int64_t* dims, int allow_sym) {
  if (bp_dtype_size(dtype) == 0) {
    return bpg_error(BP_INVALID_ARGUMENT, "%s: dtype %u is not valid", api, dtype);
  }
  if (rank > BP_MAX_RANK || (rank > 0 && dims == NULL)) {
    return bpg_error(BP_INVALID_ARGUMENT, "%s: rank %u (max %u) or dims NULL", api, rank,
                     BP_MAX_RANK);
  }
  /* The concrete dims alone (a symbol counts as 1) must give a byte size
   * that fits in int64; the bound symbols are checked at compile time. */
  int64_t bytes = (int64_t)bp_dtype_size(dtype);
  for (uint32_t i = 0; i < rank; ++i) {
    if (BP_GRAPH_IS_SYM(dims[i])) {
      if (!allow_sym || BP_GRAPH_SYM_INDEX(dims[i]) >= g->num_syms) {
        return bpg_error(BP_INVALID_ARGUMENT, "%s: dim %u is %s", api, i,
                         allow_sym ? "an unknown symbol" : "symbolic (constants are concrete)");
      }
    } else if (__builtin_mul_overflow(bytes, dims[i], &bytes)) {
      return bpg_error(BP_INVALID_ARGUMENT, "%s: dim %u (%lld): the shape holds more than 2^63 bytes", api, i,
                       (long long)dims[i]);
    }
  }
  return BP_OK;
}

static bp_status_t bpg_list_add(uint32_t** arr, uint32_t* n, uint32_t* cap, uint32_t v) {
  if (bpg_grow((void**)arr, cap, *n, sizeof(uint32_t)) != 0) {
    return bpg_error(BP_RESOURCE_EXHAUSTED, "graph: out of memory");
  }
  (*arr)[(*n)++] = v;
  return BP_OK;
}

bp_status_t bp_graph_add_input(bp_graph_t* g, const char* name, uint32_t dtype, uint32_t rank,
                               const int64_t* dims, uint32_t* out_value) {
  const char* api = "bp_graph_add_input";
  if (g == NULL || out_value == NULL) return bpg_error(BP_INVALID_ARGUMENT, "%s: NULL argument", api);
  bp_status_t st = bpg_check_unique(g, api, name);
  if (st == BP_OK) st = bpg_check_shape(g, api, dtype, rank, dims, 1);
  uint32_t v = 0;
  if (st == BP_OK) st = bpg_new_value(g, name, BP_GRAPH_VALUE_INPUT, &v);
  if (st != BP_OK) return st;
  bpg_value_t* val = &g->values[v];
  val->dtype = dtype;
  val->rank = rank;
  if (rank > 0) memcpy(val->dims, dims, sizeof(int64_t) * rank);
  val->producer = g->num_inputs;
  st = bpg_list_add(&g->inputs, &g->num_inputs, &g->cap_inputs, v);
  if (st != BP_OK) {
    g->num_values--;
    free(val->name);
    return st;
  }
  *out_value = v;
  return BP_OK;
}

static bp_status_t bpg_add_const(bp_graph_t* g, const char* api, const char* name, uint32_t dtype,
                                 uint32_t rank, const int64_t* dims, bpg_const_t* c,
                                 uint32_t* out_value) {
  bp_status_t st = name != NULL ? bpg_check_unique(g, api, name) : BP_OK;
  if (st == BP_OK) st = bpg_check_shape(g, api, dtype, rank, dims, 0);
  uint32_t v = 0;
  if (st == BP_OK) st = bpg_new_value(g, name, BP_GRAPH_VALUE_CONSTANT, &v);
  if (st != BP_OK) {
    bpg_const_free(c);
    return st;
  }
  bpg_value_t* val = &g->values[v];
  val->dtype = dtype;
  val->rank = rank;
  if (rank > 0) memcpy(val->dims, dims, sizeof(int64_t) * rank);
  val->cst = c;
  *out_value = v;
  return BP_OK;
}

bp_status_t bp_graph_add_constant(bp_graph_t* g, const char* name, uint32_t dtype, uint32_t rank,
                                  const int64_t* dims, const void* data, uint64_t size,
                                  uint32_t* out_value) {
  const char* api = "bp_graph_add_constant";
  if (g == NULL || out_value == NULL || (data == NULL && size > 0)) {
    return bpg_error(BP_INVALID_ARGUMENT, "%s: NULL argument", api);
  }
  bp_status_t st = bpg_check_shape(g, api, dtype, rank, dims, 0);
  if (st != BP_OK) return st;
  bpg_value_t probe = {.dtype = dtype, .rank = rank};
  if (rank > 0) memcpy(probe.dims, dims, sizeof(int64_t) * rank);
  uint64_t want = bpg_value_bytes(&probe);
  if (want == UINT64_MAX || want != size) {
    return bpg_error(BP_INVALID_ARGUMENT, "%s: %" PRIu64 " bytes of data for a %s tensor of %" PRIu64
                     " bytes", api, size, bp_dtype_name(dtype), want);
  }
  bpg_const_t* c = calloc(1, sizeof(*c));
  if (c == NULL || (size > 0 && (c->data = malloc(size)) == NULL)) {
    free(c);
    return bpg_error(BP_RESOURCE_EXHAUSTED, "%s: out of memory", api);
  }
  c->kind = BPG_CONST_VALUES;
  c->size = size;
  if (size > 0) memcpy(c->data, data, size);
  return bpg_add_const(g, api, name, dtype, rank, dims, c, out_value);
}

bp_status_t bp_graph_add_constant_uniform(bp_graph_t* g, const char* name, uint32_t dtype,
                                          uint32_t rank, const int64_t* dims, uint64_t seed,
                                          double lo, double hi, uint32_t* out_value) {
  const char* api = "bp_graph_add_constant_uniform";
  if (g == NULL || out_value == NULL) return bpg_error(BP_INVALID_ARGUMENT, "%s: NULL argument", api);
  uint32_t cat = bp_dtype_category(dtype);
  if (cat != BP_DTYPE_CATEGORY_FLOAT) {
    return bpg_error(BP_INVALID_ARGUMENT, "%s: dtype %s is not f16, bf16, f32 or f64", api,
                     bp_dtype_name(dtype));
  }
  if (!(lo < hi) || lo != lo || hi != hi) {
    return bpg_error(BP_INVALID_ARGUMENT, "%s: need lo < hi (got %g, %g)", api, lo, hi);
  }
  bpg_const_t* c = calloc(1, sizeof(*c));
  if (c == NULL) return bpg_error(BP_RESOURCE_EXHAUSTED, "%s: out of memory", api);
  c->kind = BPG_CONST_UNIFORM;
  c->seed = seed;
  c->lo = lo;
  c->hi = hi;
  return bpg_add_const(g, api, name, dtype, rank, dims, c, out_value);
}

/* Every op's info, asked of the core once per process (the table is
 * immutable after; read by any thread). */
static bp_op_info_t g_op_info[BP_OP_COUNT];
static unsigned char g_op_known[BP_OP_COUNT];
static pthread_once_t g_op_info_once = PTHREAD_ONCE_INIT;
static void bpg_op_info_fill(void) {
  for (uint32_t op = 0; op < BP_OP_COUNT; ++op) {
    g_op_info[op].struct_size = sizeof(g_op_info[op]);
    g_op_known[op] = bp_op_get_info(op, &g_op_info[op]) == BP_OK;
  }
}
const bp_op_info_t* bpg_op_info(uint32_t op) {
  if (op >= BP_OP_COUNT) return NULL;
  pthread_once(&g_op_info_once, bpg_op_info_fill);
  return g_op_known[op] ? &g_op_info[op] : NULL;
}

uint32_t bpg_op_attrs_size(uint32_t op) {
  if (bpg_is_view(op)) return sizeof(bp_graph_view_params_t);
  const bp_op_info_t* info = bpg_op_info(op);
  if (info == NULL) return 0;
  return info->attrs_size > sizeof(bp_no_attrs_t) ? info->attrs_size : 0;
}

bp_status_t bp_graph_add_node(bp_graph_t* g, uint32_t op_id, const uint32_t* inputs,
                              uint32_t num_inputs, const void* attrs, const char* name,
                              uint32_t* out_values, uint32_t num_outputs) {
  if (bpg_is_view(op_id)) {
    return bpg_error(BP_INVALID_ARGUMENT, "bp_graph_add_node: op id %u is a view; use bp_graph_add_view", op_id);
  }
  return bpg_add_node(g, op_id, inputs, num_inputs, attrs, name, out_values, num_outputs, "bp_graph_add_node");
}

bp_status_t bpg_add_node(bp_graph_t* g, uint32_t op_id, const uint32_t* inputs, uint32_t num_inputs,
                         const void* attrs, const char* name, uint32_t* out_values, uint32_t num_outputs,
                         const char* api) {
  if (g == NULL || (inputs == NULL && num_inputs > 0) || out_values == NULL) {
    return bpg_error(BP_INVALID_ARGUMENT, "%s: NULL argument", api);
  }
  bp_op_info_t info = {.struct_size = sizeof(info)};
  if (bpg_is_view(op_id)) {
    info.name = bpg_node_op_name(op_id);
    info.num_outputs = 1;
    if (num_inputs != 1) return bpg_error(BP_INVALID_ARGUMENT, "%s: view '%s' takes one input, got %u", api, info.name, num_inputs);
  } else if (bp_op_get_info(op_id, &info) != BP_OK) {
    return bpg_error(BP_INVALID_ARGUMENT, "%s: unknown op id %u", api, op_id);
  }
  if (num_outputs != info.num_outputs) {
    return bpg_error(BP_INVALID_ARGUMENT, "%s: op '%s' has %u outputs, got %u", api, info.name,
                     info.num_outputs, num_outputs);
  }
  for (uint32_t i = 0; i < num_inputs; ++i) {
    if (inputs[i] != BP_GRAPH_NO_VALUE && inputs[i] >= g->num_values) {
      return bpg_error(BP_INVALID_ARGUMENT, "%s: op '%s' input %u is value %u, which does not exist",
                       api, info.name, i, inputs[i]);
    }
  }
  if (name != NULL && !bpg_name_ok(name)) {
    return bpg_error(BP_INVALID_ARGUMENT, "%s: '%s' is not a valid node name", api, name);
  }
  if (bpg_grow((void**)&g->nodes, &g->cap_nodes, g->num_nodes, sizeof(bpg_node_t)) != 0) {
    return bpg_error(BP_RESOURCE_EXHAUSTED, "%s: out of memory", api);
  }
  bpg_node_t n;
  memset(&n, 0, sizeof(n));
  n.op = op_id;
  n.num_in = num_inputs;
  n.num_out = num_outputs;
  /* One block: inputs then outputs. */
  n.in = malloc(sizeof(uint32_t) * (num_inputs + num_outputs + 1));
  n.attrs_size = attrs != NULL ? bpg_op_attrs_size(op_id) : 0;
  if (n.attrs_size > 0) n.attrs = malloc(n.attrs_size);
  if (name != NULL) n.name = bpg_strdup(name);
  if (n.in == NULL || (n.attrs_size > 0 && n.attrs == NULL) || (name != NULL && n.name == NULL)) {
    free(n.in);
    free(n.attrs);
    free(n.name);
    return bpg_error(BP_RESOURCE_EXHAUSTED, "%s: out of memory", api);
  }
  n.out = n.in + num_inputs;
  if (num_inputs > 0) memcpy(n.in, inputs, sizeof(uint32_t) * num_inputs);
  if (n.attrs_size > 0) {
    /* The caller's struct may be older (smaller): copy what it has. */
    uint32_t given = *(const uint32_t*)attrs;
    memset(n.attrs, 0, n.attrs_size);
    memcpy(n.attrs, attrs, given < n.attrs_size ? given : n.attrs_size);
    *(uint32_t*)n.attrs = n.attrs_size;
  }
  uint32_t first = g->num_values;
  for (uint32_t k = 0; k < num_outputs; ++k) {
    uint32_t v;
    bp_status_t st = bpg_new_value(g, NULL, BP_GRAPH_VALUE_NODE, &v);
    if (st != BP_OK) {
      for (uint32_t j = first; j < g->num_values; ++j) free(g->values[j].name);
      g->num_values = first;
      free(n.in);
      free(n.attrs);
      free(n.name);
      return st;
    }
    g->values[v].producer = g->num_nodes;
    g->values[v].out_index = k;
    n.out[k] = v;
    out_values[k] = v;
  }
  g->nodes[g->num_nodes++] = n;
  return BP_OK;
}

bp_status_t bp_graph_add_output(bp_graph_t* g, uint32_t value) {
  if (g == NULL || value >= g->num_values) {
    return bpg_error(BP_INVALID_ARGUMENT, "bp_graph_add_output: no value %u", value);
  }
  return bpg_list_add(&g->outputs, &g->num_outputs, &g->cap_outputs, value);
}

bp_status_t bp_graph_set_value_name(bp_graph_t* g, uint32_t value, const char* name) {
  if (g == NULL || value >= g->num_values) {
    return bpg_error(BP_INVALID_ARGUMENT, "bp_graph_set_value_name: no value %u", value);
  }
  bp_status_t st = bpg_check_unique(g, "bp_graph_set_value_name", name);
  if (st != BP_OK) return st;
  char* p = bpg_strdup(name);
  if (p == NULL) return bpg_error(BP_RESOURCE_EXHAUSTED, "bp_graph_set_value_name: out of memory");
  int renamed = g->values[value].name != NULL;
  free(g->values[value].name);
  g->values[value].name = p;
  if (renamed) g->name_stale = 1; /* the old name's entry must go */
  else bpg_index_add(g, value);
  return BP_OK;
}

uint32_t bp_graph_value_count(const bp_graph_t* g) { return g ? g->num_values : 0; }
uint32_t bp_graph_node_count(const bp_graph_t* g) { return g ? g->num_nodes : 0; }
uint32_t bp_graph_input_count(const bp_graph_t* g) { return g ? g->num_inputs : 0; }
uint32_t bp_graph_output_count(const bp_graph_t* g) { return g ? g->num_outputs : 0; }

uint32_t bp_graph_symbol_count(const bp_graph_t* g) { return g ? g->num_syms : 0; }

bp_status_t bp_graph_symbol_name(const bp_graph_t* g, uint32_t index, const char** out_name) {
  if (g == NULL || out_name == NULL || index >= g->num_syms) {
    return bpg_error(BP_OUT_OF_RANGE, "bp_graph_symbol_name: no symbol %u", index);
  }
  *out_name = g->syms[index];
  return BP_OK;
}

bp_status_t bp_graph_input(const bp_graph_t* g, uint32_t index, uint32_t* out_value) {
  if (g == NULL || out_value == NULL || index >= g->num_inputs) {
    return bpg_error(BP_OUT_OF_RANGE, "bp_graph_input: no input %u", index);
  }
  *out_value = g->inputs[index];
  return BP_OK;
}

bp_status_t bp_graph_output(const bp_graph_t* g, uint32_t index, uint32_t* out_value) {
  if (g == NULL || out_value == NULL || index >= g->num_outputs) {
    return bpg_error(BP_OUT_OF_RANGE, "bp_graph_output: no output %u", index);
  }
  *out_value = g->outputs[index];
  return BP_OK;
}

bp_status_t bp_graph_value_info(const bp_graph_t* g, uint32_t value, bp_graph_value_info_t* out) {
  if (g == NULL || out == NULL || out->struct_size < BP_GRAPH_VALUE_INFO_V1_SIZE ||
      value >= g->num_values) {
    return bpg_error(BP_INVALID_ARGUMENT, "bp_graph_value_info: bad argument (value %u)", value);
  }
  const bpg_value_t* v = &g->values[value];
  uint32_t size = out->struct_size;
  memset(out, 0, size);
  out->struct_size = size;
  out->kind = v->kind;
  out->dtype = v->dtype;
  out->rank = v->rank;
  memcpy(out->dims, v->dims, sizeof(out->dims));
  /* Unnamed values: a per-graph scratch name, valid until the next call. */
  out->name = v->name != NULL ? v->name
                              : bpg_value_name(g, value, ((bp_graph_t*)g)->scratch, sizeof(g->scratch));
  out->producer = v->producer;
  out->output_index = v->out_index;
  return BP_OK;
}

bp_status_t bp_graph_node_info(const bp_graph_t* g, uint32_t node, bp_graph_node_info_t* out) {
  if (g == NULL || out == NULL || out->struct_size < BP_GRAPH_NODE_INFO_V1_SIZE ||
      node >= g->num_nodes) {
    return bpg_error(BP_INVALID_ARGUMENT, "bp_graph_node_info: bad argument (node %u)", node);
  }
  const bpg_node_t* n = &g->nodes[node];
  uint32_t size = out->struct_size;
  memset(out, 0, size);
  out->struct_size = size;
  out->op_id = n->op;
  out->name = n->name != NULL ? n->name : "";
  out->num_inputs = n->num_in;
  out->num_outputs = n->num_out;
  out->inputs = n->in;
  out->outputs = n->out;
  out->attrs = n->attrs;
  return BP_OK;
}

bp_status_t bp_graph_find_value(const bp_graph_t* g, const char* name, uint32_t* out_value) {
  if (g == NULL || name == NULL || out_value == NULL) {
    return bpg_error(BP_INVALID_ARGUMENT, "bp_graph_find_value: NULL argument");
  }
  uint32_t found = bpg_index_find(g, name);
  if (found != UINT32_MAX) {
    *out_value = found;
    return BP_OK;
  }
  /* "%<id>" reaches an unnamed value. */
  if (name[0] == '%') {
    char* end = NULL;
    unsigned long id = strtoul(name + 1, &end, 10);
    if (end != name + 1 && *end == '\0' && id < g->num_values && g->values[id].name == NULL) {
      *out_value = (uint32_t)id;
      return BP_OK;
    }
  }
  return bpg_error(BP_NOT_FOUND, "graph has no value named '%s'", name);
}

int64_t bpg_value_numel(const bpg_value_t* v) {
  int64_t n = 1;
  for (uint32_t i = 0; i < v->rank; ++i) {
    if (v->dims[i] < 0) return -1;
    if (v->dims[i] != 0 && n > INT64_MAX / v->dims[i]) return -1;
    n *= v->dims[i];
  }
  return n;
}

uint64_t bpg_value_bytes(const bpg_value_t* v) {
  int64_t n = bpg_value_numel(v);
  size_t es = bp_dtype_size(v->dtype);
  if (n < 0 || es == 0 || (uint64_t)n > UINT64_MAX / es) return UINT64_MAX;
  return (uint64_t)n * es;
}

int bpg_text_values_dtype(uint32_t dtype) {
  switch (dtype) {
    case BP_DTYPE_F32: case BP_DTYPE_F64: case BP_DTYPE_I8: case BP_DTYPE_I16:
    case BP_DTYPE_I32: case BP_DTYPE_I64: case BP_DTYPE_U8: case BP_DTYPE_BOOL: return 1;
    default: return 0;
  }
}

/* splitmix64: the constant generator (stable across platforms). */
static uint64_t bpg_mix(uint64_t* s) {
  uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

static uint16_t bpg_f32_to_half(float f, int bf16) {
  uint32_t x;
  memcpy(&x, &f, 4);
  if (bf16) return (uint16_t)((x + 0x7FFFu + ((x >> 16) & 1u)) >> 16);
  uint32_t sign = (x >> 16) & 0x8000u;
  int32_t e = (int32_t)((x >> 23) & 0xFF) - 127 + 15;
  uint32_t m = x & 0x7FFFFFu;
  if (e <= 0) return (uint16_t)sign; /* the generator's values are never this small */
  if (e >= 31) return (uint16_t)(sign | 0x7C00u);
  uint32_t h = sign | ((uint32_t)e << 10) | (m >> 13);
  if ((m & 0x1FFFu) > 0x1000u || ((m & 0x1FFFu) == 0x1000u && (h & 1u))) h++;
  return (uint16_t)h;
}

bp_status_t bpg_const_materialize(bpg_value_t* v) {
  bpg_const_t* c = v->cst;
  if (c == NULL || c->data != NULL || c->kind != BPG_CONST_UNIFORM) return BP_OK;
  uint64_t bytes = bpg_value_bytes(v);
  if (bytes == UINT64_MAX) return bpg_error(BP_INVALID_ARGUMENT, "constant too large");
  c->data = malloc(bytes ? bytes : 1);
  if (c->data == NULL) return bpg_error(BP_RESOURCE_EXHAUSTED, "constant: out of memory");
  c->size = bytes;
  uint64_t s = c->seed;
  int64_t n = bpg_value_numel(v);
  for (int64_t i = 0; i < n; ++i) {
    double u = (double)(bpg_mix(&s) >> 11) * (1.0 / 9007199254740992.0);
    double x = c->lo + (c->hi - c->lo) * u;
    switch (v->dtype) {
      case BP_DTYPE_F64: ((double*)c->data)[i] = x; break;
      case BP_DTYPE_F32: ((float*)c->data)[i] = (float)x; break;
      case BP_DTYPE_F16: ((uint16_t*)c->data)[i] = bpg_f32_to_half((float)x, 0); break;
      default: ((uint16_t*)c->data)[i] = bpg_f32_to_half((float)x, 1); break; /* bf16 */
    }
  }
  return BP_OK;
}

int bpg_attrs_equal(const bpg_node_t* a, const bpg_node_t* b) {
  if (a->attrs == NULL || b->attrs == NULL) return a->attrs == b->attrs;
  return a->attrs_size == b->attrs_size && memcmp(a->attrs, b->attrs, a->attrs_size) == 0;
}

void bpg_replace_uses(bp_graph_t* g, uint32_t from, uint32_t to) {
  for (uint32_t n = 0; n < g->num_nodes; ++n) {
    if (g->nodes[n].dead) continue;
    for (uint32_t i = 0; i < g->nodes[n].num_in; ++i) {
      if (g->nodes[n].in[i] == from) g->nodes[n].in[i] = to;
    }
  }
  for (uint32_t i = 0; i < g->num_outputs; ++i) {
    if (g->outputs[i] == from) g->outputs[i] = to;
  }
}

bp_status_t bpg_use_counts(const bp_graph_t* g, uint32_t** out_counts) {
  uint32_t* c = calloc(g->num_values ? g->num_values : 1, sizeof(uint32_t));
  if (c == NULL) return bpg_error(BP_RESOURCE_EXHAUSTED, "graph: out of memory");
  for (uint32_t n = 0; n < g->num_nodes; ++n) {
    if (g->nodes[n].dead) continue;
    for (uint32_t i = 0; i < g->nodes[n].num_in; ++i) {
      if (g->nodes[n].in[i] != BP_GRAPH_NO_VALUE) c[g->nodes[n].in[i]]++;
    }
  }
  for (uint32_t i = 0; i < g->num_outputs; ++i) c[g->outputs[i]]++;
  *out_counts = c;
  return BP_OK;
}

bp_status_t bpg_clone(const bp_graph_t* src, bp_graph_t** out) {
  bp_graph_t* g = NULL;
  bp_status_t st = bp_graph_create(src->name, &g);
  if (st != BP_OK) return st;
  for (uint32_t i = 0; i < src->num_syms && st == BP_OK; ++i) {
    int64_t d;
    st = bp_graph_add_symbol(g, src->syms[i], &d);
  }
  g->values = calloc(src->num_values ? src->num_values : 1, sizeof(bpg_value_t));
  g->nodes = calloc(src->num_nodes ? src->num_nodes : 1, sizeof(bpg_node_t));
  if (st == BP_OK && (g->values == NULL || g->nodes == NULL)) {
    st = bpg_error(BP_RESOURCE_EXHAUSTED, "graph: out of memory");
  }
  if (st != BP_OK) {
    bp_graph_release(g);
    return st;
  }
  g->cap_values = src->num_values ? src->num_values : 1;
  g->cap_nodes = src->num_nodes ? src->num_nodes : 1;
  int oom = 0;
  for (uint32_t i = 0; i < src->num_values; ++i) {
    bpg_value_t* v = &g->values[i];
    *v = src->values[i];
    v->name = NULL;
    v->cst = NULL;
    g->num_values++;
    if (src->values[i].name != NULL && (v->name = bpg_strdup(src->values[i].name)) == NULL) oom = 1;
    const bpg_const_t* c = src->values[i].cst;
    if (c != NULL) {
      v->cst = calloc(1, sizeof(bpg_const_t));
      if (v->cst == NULL) {
        oom = 1;
        continue;
      }
      *v->cst = *c;
      v->cst->data = NULL;
      if (c->data != NULL) {
        v->cst->data = malloc(c->size ? c->size : 1);
        if (v->cst->data == NULL) oom = 1;
        else if (c->size) memcpy(v->cst->data, c->data, c->size);
      }
    }
  }
  for (uint32_t i = 0; i < src->num_nodes; ++i) {
    const bpg_node_t* s = &src->nodes[i];
    bpg_node_t* n = &g->nodes[i];
    *n = *s;
    n->name = NULL;
    n->attrs = NULL;
    n->in = malloc(sizeof(uint32_t) * (s->num_in + s->num_out + 1));
    g->num_nodes++;
    if (n->in == NULL) {
      oom = 1;
      n->out = NULL;
      continue;
    }
    n->out = n->in + s->num_in;
    memcpy(n->in, s->in, sizeof(uint32_t) * (s->num_in + s->num_out));
    if (s->name != NULL && (n->name = bpg_strdup(s->name)) == NULL) oom = 1;
    if (s->attrs != NULL) {
      n->attrs = malloc(s->attrs_size);
      if (n->attrs == NULL) oom = 1;
      else memcpy(n->attrs, s->attrs, s->attrs_size);
    }
  }
  for (uint32_t i = 0; i < src->num_inputs && !oom; ++i) {
    if (bpg_list_add(&g->inputs, &g->num_inputs, &g->cap_inputs, src->inputs[i]) != BP_OK) oom = 1;
  }
  for (uint32_t i = 0; i < src->num_outputs && !oom; ++i) {
    if (bpg_list_add(&g->outputs, &g->num_outputs, &g->cap_outputs, src->outputs[i]) != BP_OK) oom = 1;
  }
  if (oom) {
    bp_graph_release(g);
    return bpg_error(BP_RESOURCE_EXHAUSTED, "graph: out of memory while copying");
  }
  g->name_stale = 1; /* names were copied around the index */
  *out = g;
  return BP_OK;
}
