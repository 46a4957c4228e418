/* libbackplane_graph: ahead-of-time executables (save and load).
 *
 * File layout (little-endian; docs/graph.md):
 *   header, 40 bytes: magic "BPGRAPHX", u32 format version, u32 ABI major,
 *     u32 ABI minor, u32 reserved (0), u64 payload bytes, u64 XXH3-64
 *     checksum of the payload (xxHash, seed 0; format 3 had FNV-1a-64,
 *     which took a third of a load at 3 cycles a byte);
 *   payload: the devices (per device: str name "cpu:0", str plugin name,
 *     str plugin version, 16 bytes uuid, str model); the options (u32
 *     flags, u64 memory limit, the symbol values); the compiled graph in
 *     binary (symbols, values with dtype, shape, name and constant data or
 *     recipe, nodes with op, operands, attribute bytes and name, inputs,
 *     outputs); the plan (device per node and why, per device the arena
 *     size and node count, buffers with value, device, offset and lifetime,
 *     compiled regions (device, kind, nodes, arguments and the plugin's
 *     bytes of bp_region_serialize, or none), steps with their stream and buffers,
 *     (format 5: view nodes, op BP_GRAPH_VIEW_OP, and per buffer the
 *     buffer a view's output views),
 *     fusions, counters).
 *   (str: u32 length and the bytes.)
 * Loading checks everything before trusting anything: magic and size
 * (DATA_LOSS), format and ABI version (FAILED_PRECONDITION), checksum
 * (DATA_LOSS), every device present with the same plugin name and version,
 * uuid and model (FAILED_PRECONDITION naming the difference), then every
 * id, count, op, attribute size, shape and offset of the graph and the plan
 * against each other (DATA_LOSS naming what is wrong). A loaded executable
 * runs the plan as it is: no pass, no support query, no cost model, no
 * memory planning (the devices are touched at the first run, as after a
 * compile). A region is loaded from its bytes (bp_region_deserialize
 * checks them: plugin, version, device, checksum); bytes that are stale,
 * corrupt or absent are not trusted: the region is compiled again from its
 * nodes, and must come out with the same arguments and the donations the
 * plan relies on.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define XXH_INLINE_ALL /* xxHash header only: nothing to link */
#include <xxhash.h>

#include "graph_exec.h"

#define BPG_AOT_MAGIC "BPGRAPHX"
#define BPG_AOT_VERSION 5u /* 5: view nodes, buffers that view another */
#define BPG_AOT_HEADER 40u
#define BPG_AOT_MAX_FILE ((uint64_t)1 << 31)

static uint64_t bpg_checksum(const uint8_t* p, uint64_t n) { return (uint64_t)XXH3_64bits(p, (size_t)n); }

/* ---- writing ---- */
typedef struct bpg_wbuf {
  uint8_t* p;
  size_t len, cap;
  int oom;
} bpg_wbuf_t;

static void bpg_put(bpg_wbuf_t* w, const void* src, size_t n) {
  if (w->oom) return;
  if (w->len + n > w->cap) {
    size_t cap = w->cap ? w->cap * 2 : 4096;
    while (cap < w->len + n) cap *= 2;
    uint8_t* p = realloc(w->p, cap);
    if (p == NULL) {
      w->oom = 1;
      return;
    }
    w->p = p;
    w->cap = cap;
  }
  memcpy(w->p + w->len, src, n);
  w->len += n;
}
static void bpg_put32(bpg_wbuf_t* w, uint32_t v) { bpg_put(w, &v, 4); }
static void bpg_put64(bpg_wbuf_t* w, uint64_t v) { bpg_put(w, &v, 8); }
static void bpg_putstr(bpg_wbuf_t* w, const char* s, size_t n) {
  bpg_put32(w, (uint32_t)n);
  bpg_put(w, s, n);
}

static const char* bpg_plugin_field(const bp_device_t* d, int version) {
  bp_plugin_info_t info = {.struct_size = sizeof(info)};
  if (bp_plugin_get_info(bp_device_plugin(d), &info) != BP_OK) return "";
  return version ? (info.version ? info.version : "") : (info.name ? info.name : "");
}

static bp_status_t bpg_serialize(const bp_graph_exec_t* x, bpg_wbuf_t* w) {
  uint8_t header[BPG_AOT_HEADER] = {0};
  bpg_put(w, header, sizeof(header)); /* filled below */
  bpg_put32(w, x->num_devs);
  for (uint32_t d = 0; d < x->num_devs; ++d) {
    const bp_device_t* dev = x->devs[d].device;
    const bp_device_properties_t* p = bp_device_properties(dev);
    const char* name = bp_device_name(dev);
    bpg_putstr(w, name, strlen(name));
    const char* pn = bpg_plugin_field(dev, 0);
    const char* pv = bpg_plugin_field(dev, 1);
    bpg_putstr(w, pn, strlen(pn));
    bpg_putstr(w, pv, strlen(pv));
    uint8_t uuid[16] = {0};
    if (p) memcpy(uuid, p->uuid, 16);
    bpg_put(w, uuid, 16);
    const char* model = p ? p->name : "";
    bpg_putstr(w, model, strnlen(model, BP_MAX_NAME));
  }
  bpg_put32(w, x->flags);
  bpg_put64(w, x->limit_option);
  const bp_graph_t* g = x->g;
  bpg_put32(w, g->num_syms);
  for (uint32_t i = 0; i < g->num_syms; ++i) {
    bpg_putstr(w, g->syms[i], strlen(g->syms[i]));
    bpg_put64(w, (uint64_t)x->syms[i]);
  }
  bpg_putstr(w, g->name ? g->name : "", g->name ? strlen(g->name) : 0);
  bpg_put32(w, g->num_values);
  for (uint32_t v = 0; v < g->num_values; ++v) {
    const bpg_value_t* val = &g->values[v];
    bpg_put32(w, val->kind);
    bpg_put32(w, val->dtype);
    bpg_put32(w, val->rank);
    for (uint32_t i = 0; i < val->rank; ++i) bpg_put64(w, (uint64_t)val->dims[i]);
    bpg_putstr(w, val->name ? val->name : "", val->name ? strlen(val->name) : 0);
    bpg_put32(w, val->producer);
    bpg_put32(w, val->out_index);
    if (val->kind == BP_GRAPH_VALUE_CONSTANT) {
      const bpg_const_t* c = val->cst;
      bpg_put32(w, c->kind);
      bpg_put64(w, c->seed);
      bpg_put(w, &c->lo, 8);
      bpg_put(w, &c->hi, 8);
      uint64_t n = c->kind == BPG_CONST_VALUES ? c->size : 0;
      bpg_put64(w, n);
      if (n > 0) bpg_put(w, c->data, (size_t)n);
    }
  }
  bpg_put32(w, g->num_nodes);
  for (uint32_t n = 0; n < g->num_nodes; ++n) {
    const bpg_node_t* node = &g->nodes[n];
    bpg_put32(w, node->op);
    bpg_putstr(w, node->name ? node->name : "", node->name ? strlen(node->name) : 0);
    bpg_put32(w, node->dead);
    bpg_put32(w, node->num_in);
    bpg_put32(w, node->num_out);
    for (uint32_t i = 0; i < node->num_in + node->num_out; ++i) bpg_put32(w, node->in[i]);
    bpg_put32(w, node->attrs ? node->attrs_size : 0);
    if (node->attrs) bpg_put(w, node->attrs, node->attrs_size);
    bpg_put32(w, x->node_dev[n]);
    bpg_putstr(w, x->node_reason[n], strnlen(x->node_reason[n], sizeof(x->node_reason[n])));
  }
  bpg_put32(w, g->num_inputs);
  for (uint32_t i = 0; i < g->num_inputs; ++i) bpg_put32(w, g->inputs[i]);
  bpg_put32(w, g->num_outputs);
  for (uint32_t i = 0; i < g->num_outputs; ++i) bpg_put32(w, g->outputs[i]);
  for (uint32_t d = 0; d < x->num_devs; ++d) {
    bpg_put64(w, x->devs[d].arena_bytes);
    bpg_put32(w, x->devs[d].num_nodes);
  }
  bpg_put32(w, x->num_slots);
  for (uint32_t i = 0; i < x->num_slots; ++i) {
    const bpg_slot_t* sl = &x->slots[i];
    bpg_put32(w, sl->value);
    bpg_put32(w, sl->dev);
    bpg_put32(w, sl->def_step);
    bpg_put32(w, sl->last_step);
    bpg_put64(w, sl->bytes);
    bpg_put64(w, sl->offset);
    bpg_put32(w, sl->inplace_of);
    bpg_put32(w, sl->is_output | sl->whole_run << 1);
    bpg_put32(w, sl->alias_of);
  }
  bpg_put32(w, x->num_refs);
  for (uint32_t i = 0; i < x->num_refs; ++i) bpg_put32(w, x->slot_refs[i]);
  bpg_put32(w, x->num_cregions);
  for (uint32_t i = 0; i < x->num_cregions; ++i) {
    const bpg_region_t* rg = &x->regions[i];
    bpg_put32(w, rg->dev);
    bpg_put32(w, rg->kind);
    bpg_put32(w, rg->num_nodes);
    for (uint32_t k = 0; k < rg->num_nodes; ++k) bpg_put32(w, rg->nodes[k]);
    bpg_put32(w, rg->num_inputs);
    bpg_put32(w, rg->num_outputs);
    for (uint32_t k = 0; k < rg->num_inputs + rg->num_outputs; ++k) bpg_put32(w, rg->args[k]);
    uint64_t bytes = 0;
    void* blob = NULL;
    if (bp_region_serialize(rg->region, NULL, 0, &bytes) != BP_OK || bytes > BPG_AOT_MAX_FILE ||
        (blob = malloc(bytes ? bytes : 1)) == NULL || bp_region_serialize(rg->region, blob, bytes, &bytes) != BP_OK) {
      bytes = 0; /* no bytes: the load compiles it again */
    }
    bpg_put64(w, bytes);
    if (bytes > 0) bpg_put(w, blob, bytes);
    free(blob);
  }
  bpg_put32(w, x->num_steps);
  for (uint32_t i = 0; i < x->num_steps; ++i) {
    const bpg_step_t* st = &x->steps[i];
    bpg_put32(w, st->kind);
    bpg_put32(w, st->node);
    bpg_put32(w, st->dev);
    bpg_put32(w, st->src_slot);
    bpg_put32(w, st->dst_slot);
    bpg_put32(w, st->stream | st->signals << 8);
    bpg_put32(w, st->in_slots ? (uint32_t)(st->in_slots - x->slot_refs) : UINT32_MAX);
    bpg_put(w, &st->est_ns, 8);
  }
  bpg_put32(w, x->num_fusions);
  for (uint32_t i = 0; i < x->num_fusions; ++i) {
    const bpg_fusion_t* f = &x->fusions[i];
    bpg_put32(w, f->first);
    bpg_put32(w, f->second);
    bpg_put32(w, f->ops[0]);
    bpg_put32(w, f->ops[1]);
    bpg_putstr(w, f->kind, strnlen(f->kind, sizeof(f->kind)));
    bpg_putstr(w, f->as, strnlen(f->as, sizeof(f->as)));
  }
  uint32_t counters[5] = {x->passes_folded, x->passes_merged, x->passes_removed, x->islands_moved, x->num_copies};
  for (int i = 0; i < 5; ++i) bpg_put32(w, counters[i]);
  bpg_put64(w, x->copy_bytes);
  bpg_put64(w, x->unplanned_bytes);
  if (w->oom) return bpg_error(BP_RESOURCE_EXHAUSTED, "bp_graph_exec_save: out of memory");
  uint32_t abi_major = 0, abi_minor = 0;
  bp_abi_version(&abi_major, &abi_minor);
  uint64_t payload = w->len - BPG_AOT_HEADER;
  uint64_t sum = bpg_checksum(w->p + BPG_AOT_HEADER, payload);
  uint32_t version = BPG_AOT_VERSION, reserved = 0;
  memcpy(w->p, BPG_AOT_MAGIC, 8);
  memcpy(w->p + 8, &version, 4);
  memcpy(w->p + 12, &abi_major, 4);
  memcpy(w->p + 16, &abi_minor, 4);
  memcpy(w->p + 20, &reserved, 4);
  memcpy(w->p + 24, &payload, 8);
  memcpy(w->p + 32, &sum, 8);
  return BP_OK;
}

bp_status_t bp_graph_exec_save(const bp_graph_exec_t* x, const char* path) {
  if (x == NULL || path == NULL) return bpg_error(BP_INVALID_ARGUMENT, "bp_graph_exec_save: exec or path is NULL");
  bpg_wbuf_t w = {0};
  bp_status_t st = bpg_serialize(x, &w);
  if (st != BP_OK) {
    free(w.p);
    return st;
  }
  /* Written to a temporary name and renamed: a reader never sees half a file. */
  char tmp[4096];
  if (snprintf(tmp, sizeof(tmp), "%s.tmp", path) >= (int)sizeof(tmp)) {
    free(w.p);
    return bpg_error(BP_INVALID_ARGUMENT, "bp_graph_exec_save: path too long");
  }
  FILE* f = fopen(tmp, "wb");
  if (f == NULL) {
    free(w.p);
    return bpg_error(BP_PERMISSION_DENIED, "bp_graph_exec_save: %s: %s", tmp, strerror(errno));
  }
  int ok = fwrite(w.p, 1, w.len, f) == w.len;
  ok &= fclose(f) == 0;
  free(w.p);
  if (!ok || rename(tmp, path) != 0) {
    remove(tmp);
    return bpg_error(BP_DATA_LOSS, "bp_graph_exec_save: writing %s failed", path);
  }
  return BP_OK;
}

/* ---- reading ---- */
typedef struct bpg_rbuf {
  const uint8_t* p;
  uint64_t len, at;
  int bad;
} bpg_rbuf_t;

static int bpg_get(bpg_rbuf_t* r, void* dst, uint64_t n) {
  if (r->bad || n > r->len - r->at) {
    r->bad = 1;
    memset(dst, 0, (size_t)(n < 64 ? n : 0));
    return -1;
  }
  memcpy(dst, r->p + r->at, (size_t)n);
  r->at += n;
  return 0;
}
/* The fixed-size reads: a constant-size memcpy is one load, not a call
 * (they are most of a load's reads: a 1,000-node file has ~10,000). */
static inline uint32_t bpg_get32(bpg_rbuf_t* r) {
  uint32_t v = 0;
  if (!r->bad && r->len - r->at >= 4) {
    memcpy(&v, r->p + r->at, 4);
    r->at += 4;
  } else {
    r->bad = 1;
  }
  return v;
}
static inline uint64_t bpg_get64(bpg_rbuf_t* r) {
  uint64_t v = 0;
  if (!r->bad && r->len - r->at >= 8) {
    memcpy(&v, r->p + r->at, 8);
    r->at += 8;
  } else {
    r->bad = 1;
  }
  return v;
}
/* A string as a pointer into the buffer and a length (not NUL-terminated). */
static const char* bpg_getstr(bpg_rbuf_t* r, uint32_t* out_len) {
  uint32_t n = bpg_get32(r);
  if (r->bad || n > r->len - r->at) {
    r->bad = 1;
    *out_len = 0;
    return "";
  }
  const char* s = (const char*)r->p + r->at;
  r->at += n;
  *out_len = n;
  return s;
}
static int bpg_str_eq(const char* s, uint32_t n, const char* z) { return strlen(z) == n && memcmp(s, z, n) == 0; }

#define BPG_TRUNC(r, what) \
  ((r)->bad ? bpg_error(BP_DATA_LOSS, "graph executable: truncated or corrupt (%s)", what) : BP_OK)


#define BPG_BAD(...) bpg_error(BP_DATA_LOSS, "graph executable: " __VA_ARGS__)

/* A string into a malloc'd NUL-terminated copy (NULL for ""); -1 when bad. */
static int bpg_getname(bpg_rbuf_t* r, char** out) {
  uint32_t n;
  const char* s = bpg_getstr(r, &n);
  *out = NULL;
  if (r->bad || n == 0) return r->bad ? -1 : 0;
  if (n >= BP_MAX_NAME || memchr(s, '\0', n) != NULL) return -1;
  *out = malloc(n + 1);
  if (*out == NULL) return -1;
  memcpy(*out, s, n);
  (*out)[n] = '\0';
  return 0;
}

/* The compiled graph: read into a fresh graph, every id checked. */
static bp_status_t bpg_read_graph(bpg_rbuf_t* r, bp_graph_exec_t* x) {
  bp_status_t st = bp_graph_create(NULL, &x->g);
  if (st != BP_OK) return st;
  bp_graph_t* g = x->g;
  uint32_t nsyms = bpg_get32(r);
  if (r->bad || nsyms > 1024) return BPG_BAD("%u symbols", nsyms);
  x->syms = calloc(nsyms + 1, sizeof(int64_t));
  if (x->syms == NULL) return bpg_error(BP_RESOURCE_EXHAUSTED, "graph executable: out of memory");
  for (uint32_t i = 0; i < nsyms; ++i) {
    char* name = NULL;
    int64_t d;
    if (bpg_getname(r, &name) != 0 || name == NULL) {
      free(name);
      return BPG_BAD("symbol %u has no valid name", i);
    }
    st = bp_graph_add_symbol(g, name, &d);
    free(name);
    if (st != BP_OK) return BPG_BAD("symbol %u: %s", i, bp_status_message());
    x->syms[i] = (int64_t)bpg_get64(r);
  }
  if (bpg_getname(r, &g->name) != 0) return BPG_BAD("bad graph name");
  uint32_t nv = bpg_get32(r);
  if (r->bad || nv > r->len) return BPG_BAD("%u values", nv);
  g->values = calloc(nv + 1, sizeof(bpg_value_t));
  if (g->values == NULL) return bpg_error(BP_RESOURCE_EXHAUSTED, "graph executable: out of memory");
  g->cap_values = nv + 1;
  for (uint32_t v = 0; v < nv; ++v) {
    bpg_value_t* val = &g->values[v];
    g->num_values = v + 1;
    val->kind = bpg_get32(r);
    val->dtype = bpg_get32(r);
    val->rank = bpg_get32(r);
    if (r->bad || val->kind < BP_GRAPH_VALUE_INPUT || val->kind > BP_GRAPH_VALUE_NODE || val->rank > BP_MAX_RANK ||
        (val->dtype != BP_DTYPE_INVALID && bp_dtype_size(val->dtype) == 0)) {
      return BPG_BAD("value %u: kind %u, dtype %u, rank %u", v, val->kind, val->dtype, val->rank);
    }
    for (uint32_t i = 0; i < val->rank; ++i) {
      val->dims[i] = (int64_t)bpg_get64(r);
      if (val->dims[i] < 0) return BPG_BAD("value %u: dim %u is %lld", v, i, (long long)val->dims[i]);
    }
    if (bpg_getname(r, &val->name) != 0) return BPG_BAD("value %u: bad name", v);
    val->producer = bpg_get32(r);
    val->out_index = bpg_get32(r);
    if (val->kind != BP_GRAPH_VALUE_NODE && val->dtype == BP_DTYPE_INVALID) return BPG_BAD("value %u has no dtype", v);
    if (val->dtype != BP_DTYPE_INVALID && bpg_value_bytes(val) == UINT64_MAX) return BPG_BAD("value %u is too large", v);
    if (val->kind != BP_GRAPH_VALUE_CONSTANT) continue;
    val->cst = calloc(1, sizeof(bpg_const_t));
    if (val->cst == NULL) return bpg_error(BP_RESOURCE_EXHAUSTED, "graph executable: out of memory");
    bpg_const_t* c = val->cst;
    c->kind = bpg_get32(r);
    c->seed = bpg_get64(r);
    bpg_get(r, &c->lo, 8);
    bpg_get(r, &c->hi, 8);
    uint64_t n = bpg_get64(r);
    uint64_t want = bpg_value_bytes(val);
    if (r->bad) return BPG_BAD("value %u: truncated constant", v);
    if (c->kind == BPG_CONST_VALUES) {
      if (n != want || n > r->len - r->at) return BPG_BAD("constant %u has %llu bytes, its shape %llu", v, (unsigned long long)n, (unsigned long long)want);
      c->data = malloc(n ? n : 1);
      if (c->data == NULL) return bpg_error(BP_RESOURCE_EXHAUSTED, "graph executable: out of memory");
      bpg_get(r, c->data, n);
      c->size = n;
    } else if (c->kind != BPG_CONST_UNIFORM || n != 0 || bp_dtype_category(val->dtype) != BP_DTYPE_CATEGORY_FLOAT ||
               !(c->lo < c->hi)) {
      return BPG_BAD("constant %u: bad recipe", v);
    }
  }
  uint32_t nn = bpg_get32(r);
  if (r->bad || nn > r->len) return BPG_BAD("%u nodes", nn);
  g->nodes = calloc(nn + 1, sizeof(bpg_node_t));
  x->node_dev = calloc(nn + 1, sizeof(uint32_t));
  x->node_reason = calloc(nn + 1, sizeof(*x->node_reason));
  if (g->nodes == NULL || x->node_dev == NULL || x->node_reason == NULL) return bpg_error(BP_RESOURCE_EXHAUSTED, "graph executable: out of memory");
  g->cap_nodes = nn + 1;
  for (uint32_t n = 0; n < nn; ++n) {
    bpg_node_t* node = &g->nodes[n];
    g->num_nodes = n + 1;
    node->op = bpg_get32(r);
    if (bpg_getname(r, &node->name) != 0) return BPG_BAD("node %u: bad name", n);
    node->dead = bpg_get32(r) != 0;
    node->num_in = bpg_get32(r);
    node->num_out = bpg_get32(r);
    const bp_op_info_t* info = bpg_op_info(node->op);
    int view = bpg_is_view(node->op);
    if (r->bad || (info == NULL && !view) || node->num_out != (view ? 1 : info->num_outputs) ||
        node->num_in > (view ? 1 : 64) || node->num_out > 4) {
      return BPG_BAD("node %u: op %u with %u inputs and %u outputs", n, node->op, node->num_in, node->num_out);
    }
    node->in = malloc(sizeof(uint32_t) * (node->num_in + node->num_out + 1));
    if (node->in == NULL) return bpg_error(BP_RESOURCE_EXHAUSTED, "graph executable: out of memory");
    node->out = node->in + node->num_in;
    for (uint32_t i = 0; i < node->num_in + node->num_out; ++i) {
      node->in[i] = bpg_get32(r);
      int absent_ok = i < node->num_in;
      if (node->in[i] >= nv && !(absent_ok && node->in[i] == BP_GRAPH_NO_VALUE)) return BPG_BAD("node %u: operand %u is value %u of %u", n, i, node->in[i], nv);
    }
    /* The live graph is in SSA form and in topological order: each output
     * is this node's own (the producer check below holds the other side),
     * and a node reads only what an earlier node wrote. Every pass after the
     * load (regions, the plan's steps) relies on both. Dead nodes are kept
     * as the compiler left them (their outputs may be orphans) and never run. */
    for (uint32_t j = 0; j < node->num_out && !node->dead; ++j) {
      const bpg_value_t* val = &g->values[node->out[j]];
      if (val->kind != BP_GRAPH_VALUE_NODE || val->producer != n || val->out_index != j) {
        return BPG_BAD("node %u: output %u is value %u, which it does not produce", n, j, node->out[j]);
      }
    }
    for (uint32_t i = 0; i < node->num_in && !node->dead; ++i) {
      if (node->in[i] == BP_GRAPH_NO_VALUE) continue;
      const bpg_value_t* val = &g->values[node->in[i]];
      if (val->kind == BP_GRAPH_VALUE_NODE && !(val->producer < n && !g->nodes[val->producer].dead)) {
        return BPG_BAD("node %u: operand %u is value %u, which no earlier live node writes", n, i, node->in[i]);
      }
    }
    uint32_t asz = bpg_get32(r);
    if (asz != 0) {
      if (asz != bpg_op_attrs_size(node->op) || asz > r->len - r->at) return BPG_BAD("node %u: %u attribute bytes", n, asz);
      node->attrs = malloc(asz);
      if (node->attrs == NULL) return bpg_error(BP_RESOURCE_EXHAUSTED, "graph executable: out of memory");
      bpg_get(r, node->attrs, asz);
      node->attrs_size = asz;
      if (*(uint32_t*)node->attrs != asz) return BPG_BAD("node %u: attribute struct_size", n);
    }
    x->node_dev[n] = bpg_get32(r);
    if (x->node_dev[n] >= x->num_devs) return BPG_BAD("node %u on device %u of %u", n, x->node_dev[n], x->num_devs);
    uint32_t rl;
    const char* reason = bpg_getstr(r, &rl);
    size_t keep = rl < sizeof(x->node_reason[n]) - 1 ? rl : sizeof(x->node_reason[n]) - 1;
    memcpy(x->node_reason[n], reason, keep);
    if (r->bad) return BPG_BAD("node %u: truncated", n);
  }
  /* Producers point at live nodes that list the value at that position. */
  for (uint32_t v = 0; v < nv; ++v) {
    const bpg_value_t* val = &g->values[v];
    if (val->kind != BP_GRAPH_VALUE_NODE || val->producer == UINT32_MAX) continue;
    if (val->producer >= nn || val->out_index >= g->nodes[val->producer].num_out ||
        g->nodes[val->producer].out[val->out_index] != v || val->dtype == BP_DTYPE_INVALID) {
      return BPG_BAD("value %u: producer %u output %u does not match", v, val->producer, val->out_index);
    }
  }
  uint32_t ni = bpg_get32(r);
  if (r->bad || ni > nv) return BPG_BAD("%u inputs", ni);
  g->inputs = calloc(ni + 1, sizeof(uint32_t));
  if (g->inputs == NULL) return bpg_error(BP_RESOURCE_EXHAUSTED, "graph executable: out of memory");
  g->num_inputs = g->cap_inputs = ni;
  for (uint32_t i = 0; i < ni; ++i) {
    g->inputs[i] = bpg_get32(r);
    if (g->inputs[i] >= nv || g->values[g->inputs[i]].kind != BP_GRAPH_VALUE_INPUT || g->values[g->inputs[i]].producer != i) {
      return BPG_BAD("input %u is value %u", i, g->inputs[i]);
    }
  }
  for (uint32_t v = 0; v < nv; ++v) {
    if (g->values[v].kind == BP_GRAPH_VALUE_INPUT && (g->values[v].producer >= ni || g->inputs[g->values[v].producer] != v)) {
      return BPG_BAD("value %u is an input that is not listed", v);
    }
  }
  uint32_t no = bpg_get32(r);
  if (r->bad || no == 0 || no > nv) return BPG_BAD("%u outputs", no);
  g->outputs = calloc(no + 1, sizeof(uint32_t));
  if (g->outputs == NULL) return bpg_error(BP_RESOURCE_EXHAUSTED, "graph executable: out of memory");
  g->num_outputs = g->cap_outputs = no;
  for (uint32_t i = 0; i < no; ++i) {
    g->outputs[i] = bpg_get32(r);
    if (g->outputs[i] >= nv || g->values[g->outputs[i]].dtype == BP_DTYPE_INVALID) return BPG_BAD("output %u is value %u", i, g->outputs[i]);
  }
  g->name_stale = 1;
  if (r->bad) return BPG_TRUNC(r, "graph");
  char why[400];
  if (bpg_views_check(g, x->syms, why, sizeof(why)) != 0) return BPG_BAD("%s", why);
  return BP_OK;
}

/* The plan: buffers and steps, checked against the graph and each other. */
/* One region: its record checked against the graph, then its bytes
 * loaded, or the region compiled again when they are absent, stale or
 * corrupt. */
/* mark: num_nodes + 1 zeroed bytes, shared by the regions (left zeroed). */
static bp_status_t bpg_read_region(bpg_rbuf_t* r, bp_graph_exec_t* x, bpg_region_t* rg, uint32_t i, uint8_t* mark) {
  const bp_graph_t* g = x->g;
  rg->dev = bpg_get32(r);
  rg->kind = bpg_get32(r);
  rg->num_nodes = bpg_get32(r);
  if (r->bad || rg->dev >= x->num_devs || rg->num_nodes < 2 || rg->num_nodes > g->num_nodes) {
    return BPG_BAD("region %u: device %u, %u nodes", i, rg->dev, rg->num_nodes);
  }
  rg->nodes = malloc(sizeof(uint32_t) * rg->num_nodes);
  if (rg->nodes == NULL) return bpg_error(BP_RESOURCE_EXHAUSTED, "graph executable: out of memory");
  for (uint32_t k = 0; k < rg->num_nodes; ++k) {
    uint32_t n = bpg_get32(r);
    if (r->bad || n >= g->num_nodes || g->nodes[n].dead || x->node_dev[n] != rg->dev || x->node_region[n] != UINT32_MAX ||
        (k > 0 && n <= rg->nodes[k - 1])) {
      return BPG_BAD("region %u: node %u", i, n);
    }
    rg->nodes[k] = n;
    x->node_region[n] = i;
  }
  /* Convex, as the compiler makes regions: a region that an outside node
   * both reads and feeds could not run as one step. */
  if (!bpg_nodes_convex(g, rg->nodes, rg->num_nodes, mark)) return BPG_BAD("region %u: an outside node both reads it and feeds it", i);
  uint32_t ni = bpg_get32(r), no = bpg_get32(r);
  if (r->bad || ni > g->num_values || no == 0 || no > g->num_values) return BPG_BAD("region %u: %u inputs, %u outputs", i, ni, no);
  uint32_t* saved = malloc(sizeof(uint32_t) * (ni + no));
  if (saved == NULL) return bpg_error(BP_RESOURCE_EXHAUSTED, "graph executable: out of memory");
  for (uint32_t k = 0; k < ni + no; ++k) saved[k] = bpg_get32(r);
  uint64_t bytes = bpg_get64(r);
  const uint8_t* blob = r->p + r->at;
  if (r->bad || bytes > r->len - r->at) {
    free(saved);
    return BPG_BAD("region %u: %llu bytes", i, (unsigned long long)bytes);
  }
  r->at += bytes;
  rg->num_inputs = ni;
  rg->num_outputs = no;
  bp_region_t* loaded = NULL;
  if (bytes > 0 && bp_region_deserialize(x->devs[rg->dev].device, blob, bytes, &loaded) == BP_OK &&
      bp_region_num_args(loaded) == ni + no && bp_region_num_inputs(loaded) == ni) {
    rg->region = loaded;
    rg->args = saved;
    rg->loaded = 1;
    bp_region_info_t info = {.struct_size = sizeof(info)};
    bp_status_t st = bp_region_get_info(loaded, &info);
    if (st != BP_OK) return st;
    rg->workspace_bytes = info.workspace_bytes;
    for (uint32_t a = 0; a < info.num_aliases && rg->num_aliases < 8; ++a) {
      const bp_region_alias_t* al =
          (const bp_region_alias_t*)(const void*)((const char*)info.aliases + (size_t)a * info.alias_stride);
      rg->alias_out[rg->num_aliases] = al->output;
      rg->alias_in[rg->num_aliases++] = al->input;
    }
  } else {
    bp_region_release(loaded);
    /* Not trusted: compiled again from the nodes; the arguments must be the saved ones. */
    bp_support_t why;
    bp_status_t st = bpg_region_compile(x, rg, &why);
    if (st != BP_OK) {
      free(saved);
      return bpg_error(st, "graph executable: region %u on %s: its bytes did not load and it does not compile: %s", i,
                       bp_device_name(x->devs[rg->dev].device), st == BP_UNIMPLEMENTED ? why.message : bp_status_message());
    }
    rg->loaded = 2;
    int same = rg->num_inputs == ni && rg->num_outputs == no && memcmp(rg->args, saved, sizeof(uint32_t) * (ni + no)) == 0;
    free(saved);
    if (!same) return BPG_BAD("region %u: compiled again, its arguments differ from the plan's", i);
    return BP_OK;
  }
  for (uint32_t k = 0; k < ni + no; ++k) {
    if (saved[k] >= g->num_values || g->values[saved[k]].dtype == BP_DTYPE_INVALID) return BPG_BAD("region %u: argument %u", i, k);
  }
  return BP_OK;
}

static bp_status_t bpg_read_regions(bpg_rbuf_t* r, bp_graph_exec_t* x) {
  uint32_t n = bpg_get32(r);
  if (r->bad || n > x->g->num_nodes) return BPG_BAD("%u regions", n);
  if (n == 0) return BP_OK;
  x->regions = calloc(n, sizeof(bpg_region_t));
  x->node_region = malloc(sizeof(uint32_t) * (x->g->num_nodes + 1));
  uint8_t* mark = calloc(x->g->num_nodes + 1, 1);
  if (x->regions == NULL || x->node_region == NULL || mark == NULL) {
    free(mark);
    return bpg_error(BP_RESOURCE_EXHAUSTED, "graph executable: out of memory");
  }
  memset(x->node_region, 0xFF, sizeof(uint32_t) * (x->g->num_nodes + 1));
  bp_status_t st = BP_OK;
  for (uint32_t i = 0; i < n; ++i) {
    x->num_cregions = i + 1; /* freed with the executable from here on */
    st = bpg_read_region(r, x, &x->regions[i], i, mark);
    if (st != BP_OK) break;
    bpg_dev_t* d = &x->devs[x->regions[i].dev];
    if (x->regions[i].workspace_bytes > d->ws_bytes) d->ws_bytes = x->regions[i].workspace_bytes;
  }
  free(mark);
  return st;
}

/* A REGION step: its buffers are the region's arguments on its device; an
 * output planned over an input must be a donation the region declares. */
static bp_status_t bpg_check_region_step(bp_graph_exec_t* x, bpg_step_t* st, uint32_t i, uint32_t ref, uint32_t nr) {
  if (st->node >= x->num_cregions || x->regions[st->node].dev != st->dev) return BPG_BAD("step %u: region %u", i, st->node);
  const bpg_region_t* rg = &x->regions[st->node];
  uint32_t na = rg->num_inputs + rg->num_outputs;
  if (ref == UINT32_MAX || ref > nr || na > nr - ref) return BPG_BAD("step %u: buffers", i);
  st->in_slots = x->slot_refs + ref;
  st->out_slots = st->in_slots + rg->num_inputs;
  for (uint32_t k = 0; k < na; ++k) {
    uint32_t s = st->in_slots[k];
    if (s == UINT32_MAX || x->slots[s].value != rg->args[k] || x->slots[s].dev != st->dev) {
      return BPG_BAD("step %u: argument %u's buffer", i, k);
    }
  }
  for (uint32_t k = 0; k < rg->num_outputs; ++k) {
    const bpg_slot_t* o = &x->slots[st->out_slots[k]];
    if (o->offset == BPG_NO_OFFSET) continue;
    for (uint32_t j = 0; j < rg->num_inputs; ++j) {
      const bpg_slot_t* in = &x->slots[st->in_slots[j]];
      if (in->offset == BPG_NO_OFFSET || in->offset + in->bytes <= o->offset || o->offset + o->bytes <= in->offset) continue;
      int declared = 0;
      for (uint32_t a = 0; a < rg->num_aliases; ++a) declared |= rg->alias_out[a] == rg->num_inputs + k && rg->alias_in[a] == j;
      if (!declared || in->offset != o->offset) return BPG_BAD("step %u: output %u shares memory with input %u undeclared", i, k, j);
    }
  }
  for (uint32_t k = 0; k < rg->num_outputs; ++k) x->home_slot[rg->args[rg->num_inputs + k]] = st->out_slots[k];
  return BP_OK;
}

static bp_status_t bpg_read_plan(bpg_rbuf_t* r, bp_graph_exec_t* x) {
  const bp_graph_t* g = x->g;
  for (uint32_t d = 0; d < x->num_devs; ++d) {
    x->devs[d].arena_bytes = bpg_get64(r);
    x->devs[d].num_nodes = bpg_get32(r);
    if (x->devs[d].arena_bytes > ((uint64_t)1 << 48)) return BPG_BAD("device %u: arena of %llu bytes", d, (unsigned long long)x->devs[d].arena_bytes);
  }
  uint32_t ns = bpg_get32(r);
  if (r->bad || ns > r->len) return BPG_BAD("%u buffers", ns);
  x->slots = calloc(ns + 1, sizeof(bpg_slot_t));
  x->home_slot = malloc(sizeof(uint32_t) * (g->num_values + 1));
  if (x->slots == NULL || x->home_slot == NULL) return bpg_error(BP_RESOURCE_EXHAUSTED, "graph executable: out of memory");
  memset(x->home_slot, 0xFF, sizeof(uint32_t) * (g->num_values + 1));
  x->num_slots = x->cap_slots = ns;
  for (uint32_t i = 0; i < ns; ++i) {
    bpg_slot_t* sl = &x->slots[i];
    sl->value = bpg_get32(r);
    sl->dev = bpg_get32(r);
    sl->def_step = bpg_get32(r);
    sl->last_step = bpg_get32(r);
    sl->bytes = bpg_get64(r);
    sl->offset = bpg_get64(r);
    sl->inplace_of = bpg_get32(r);
    uint32_t flags = bpg_get32(r);
    sl->is_output = flags & 1;
    sl->whole_run = (flags >> 1) & 1;
    sl->alias_of = bpg_get32(r);
    int alias = sl->alias_of != UINT32_MAX;
    if (alias && (sl->alias_of >= i || sl->offset != BPG_NO_OFFSET)) return BPG_BAD("buffer %u views buffer %u", i, sl->alias_of);
    if (r->bad || sl->value >= g->num_values || sl->dev >= x->num_devs || g->values[sl->value].dtype == BP_DTYPE_INVALID ||
        sl->bytes != (alias ? 0 : bpg_value_bytes(&g->values[sl->value])) ||
        (sl->offset != BPG_NO_OFFSET && (sl->offset > x->devs[sl->dev].arena_bytes ||
                                         sl->bytes > x->devs[sl->dev].arena_bytes - sl->offset)) ||
        (sl->inplace_of != UINT32_MAX && sl->inplace_of >= ns)) {
      return BPG_BAD("buffer %u does not fit the graph or its arena", i);
    }
  }
  uint32_t nr = bpg_get32(r);
  if (r->bad || nr > r->len) return BPG_BAD("%u buffer references", nr);
  x->slot_refs = malloc(sizeof(uint32_t) * (nr + 1));
  if (x->slot_refs == NULL) return bpg_error(BP_RESOURCE_EXHAUSTED, "graph executable: out of memory");
  x->num_refs = nr;
  for (uint32_t i = 0; i < nr; ++i) {
    x->slot_refs[i] = bpg_get32(r);
    if (x->slot_refs[i] >= ns && x->slot_refs[i] != UINT32_MAX) return BPG_BAD("reference %u to buffer %u", i, x->slot_refs[i]);
  }
  bp_status_t rst = bpg_read_regions(r, x);
  if (rst != BP_OK) return rst;
  uint32_t nst = bpg_get32(r);
  if (r->bad || nst > r->len) return BPG_BAD("%u steps", nst);
  x->steps = calloc(nst + 1, sizeof(bpg_step_t));
  if (x->steps == NULL) return bpg_error(BP_RESOURCE_EXHAUSTED, "graph executable: out of memory");
  x->num_steps = x->cap_steps = nst;
  for (uint32_t i = 0; i < nst; ++i) {
    bpg_step_t* st = &x->steps[i];
    st->kind = bpg_get32(r);
    st->node = bpg_get32(r);
    st->dev = bpg_get32(r);
    st->src_slot = bpg_get32(r);
    st->dst_slot = bpg_get32(r);
    uint32_t sflags = bpg_get32(r);
    st->stream = sflags & 0xFF;
    st->signals = (sflags >> 8) & 1;
    uint32_t ref = bpg_get32(r);
    if (st->stream >= BPG_MAX_STREAMS || (st->kind == BPG_STEP_COPY && st->stream != 0) || (sflags >> 9) != 0) {
      return BPG_BAD("step %u: stream %u", i, st->stream);
    }
    if (st->dev < x->num_devs && st->stream >= x->devs[st->dev].num_streams) x->devs[st->dev].num_streams = st->stream + 1;
    bpg_get(r, &st->est_ns, 8);
    if (r->bad || st->dev >= x->num_devs) return BPG_BAD("step %u", i);
    if (st->kind == BPG_STEP_COPY) {
      if (st->src_slot >= ns || st->dst_slot >= ns || x->slots[st->dst_slot].dev != st->dev ||
          x->slots[st->src_slot].value != x->slots[st->dst_slot].value) {
        return BPG_BAD("copy step %u", i);
      }
      continue;
    }
    if (st->kind == BPG_STEP_REGION) {
      bp_status_t rs = bpg_check_region_step(x, st, i, ref, nr);
      if (rs != BP_OK) return rs;
      continue;
    }
    if (st->kind != BPG_STEP_NODE || st->node >= g->num_nodes || g->nodes[st->node].dead ||
        x->node_dev[st->node] != st->dev) {
      return BPG_BAD("step %u: kind %u node %u", i, st->kind, st->node);
    }
    const bpg_node_t* node = &g->nodes[st->node];
    if (ref == UINT32_MAX || ref > nr || node->num_in + node->num_out > nr - ref) return BPG_BAD("step %u: buffers", i);
    st->in_slots = x->slot_refs + ref;
    st->out_slots = st->in_slots + node->num_in;
    for (uint32_t k = 0; k < node->num_in + node->num_out; ++k) {
      uint32_t s = st->in_slots[k];
      uint32_t v = node->in[k];
      int absent = k < node->num_in && v == BP_GRAPH_NO_VALUE;
      if (absent ? s != UINT32_MAX : (s == UINT32_MAX || x->slots[s].value != v || x->slots[s].dev != st->dev)) {
        return BPG_BAD("step %u: operand %u's buffer", i, k);
      }
    }
    /* A view's output views its input's buffer; nothing else views one. */
    uint32_t want = bpg_is_alias_view(node->op) ? st->in_slots[0] : UINT32_MAX;
    if (x->slots[st->out_slots[0]].alias_of != want) return BPG_BAD("step %u: output buffer's view", i);
    for (uint32_t k = 0; k < node->num_out; ++k) x->home_slot[node->out[k]] = st->out_slots[k];
  }
  for (uint32_t i = 0; i < g->num_outputs; ++i) {
    const bpg_value_t* v = &g->values[g->outputs[i]];
    if (v->kind == BP_GRAPH_VALUE_NODE && x->home_slot[g->outputs[i]] == UINT32_MAX) return BPG_BAD("output %u has no step", i);
  }
  uint32_t ws_on[BPG_MAX_DEVICES] = {0};
  for (uint32_t i = 0; i < nst; ++i) {
    const bpg_step_t* st = &x->steps[i];
    if (st->kind == BPG_STEP_REGION && x->regions[st->node].workspace_bytes > 0) ws_on[st->dev] |= 1u << st->stream;
  }
  for (uint32_t d = 0; d < x->num_devs; ++d) x->devs[d].ws_streams = (uint32_t)__builtin_popcount(ws_on[d]);
  x->num_fusions = bpg_get32(r);
  if (r->bad || x->num_fusions > BPG_MAX_FUSIONS) return BPG_BAD("%u fusions", x->num_fusions);
  for (uint32_t i = 0; i < x->num_fusions; ++i) {
    bpg_fusion_t* f = &x->fusions[i];
    f->first = bpg_get32(r);
    f->second = bpg_get32(r);
    f->ops[0] = bpg_get32(r);
    f->ops[1] = bpg_get32(r);
    uint32_t kl, al;
    const char* k = bpg_getstr(r, &kl);
    const char* a = bpg_getstr(r, &al);
    if (r->bad || f->first >= g->num_nodes || f->second >= g->num_nodes || kl >= sizeof(f->kind) || al >= sizeof(f->as)) {
      return BPG_BAD("fusion %u", i);
    }
    memcpy(f->kind, k, kl);
    memcpy(f->as, a, al);
  }
  x->num_regions = x->num_fusions;
  x->passes_folded = bpg_get32(r);
  x->passes_merged = bpg_get32(r);
  x->passes_removed = bpg_get32(r);
  x->islands_moved = bpg_get32(r);
  x->num_copies = bpg_get32(r);
  x->copy_bytes = bpg_get64(r);
  x->unplanned_bytes = bpg_get64(r);
  for (uint32_t i = 0; i < nst; ++i) x->est_ns += x->steps[i].est_ns;
  return BPG_TRUNC(r, "plan");
}

bp_status_t bp_graph_exec_load_bytes(bp_context_t* ctx, const void* data, uint64_t size, bp_graph_exec_t** out) {
  if (ctx == NULL || (data == NULL && size > 0) || out == NULL) {
    return bpg_error(BP_INVALID_ARGUMENT, "bp_graph_exec_load: context, data or out_exec is NULL");
  }
  const uint8_t* b = data;
  if (size < BPG_AOT_HEADER || memcmp(b, BPG_AOT_MAGIC, 8) != 0) {
    return bpg_error(BP_DATA_LOSS, "graph executable: not a backplane graph executable (bad magic or shorter than the header)");
  }
  uint32_t version, abi_major, abi_minor, my_major = 0, my_minor = 0;
  uint64_t payload, sum;
  memcpy(&version, b + 8, 4);
  memcpy(&abi_major, b + 12, 4);
  memcpy(&abi_minor, b + 16, 4);
  memcpy(&payload, b + 24, 8);
  memcpy(&sum, b + 32, 8);
  if (version != BPG_AOT_VERSION) {
    return bpg_error(BP_FAILED_PRECONDITION, "graph executable: format version %u, this library reads %u", version,
                     BPG_AOT_VERSION);
  }
  bp_abi_version(&my_major, &my_minor);
  if (abi_major != my_major || abi_minor != my_minor) {
    return bpg_error(BP_FAILED_PRECONDITION, "graph executable: made with ABI %u.%u, this library speaks %u.%u (stale)",
                     abi_major, abi_minor, my_major, my_minor);
  }
  if (payload != size - BPG_AOT_HEADER) {
    return bpg_error(BP_DATA_LOSS, "graph executable: the header says %llu payload bytes, the file has %llu (truncated?)",
                     (unsigned long long)payload, (unsigned long long)(size - BPG_AOT_HEADER));
  }
  if (bpg_checksum(b + BPG_AOT_HEADER, payload) != sum) {
    return bpg_error(BP_DATA_LOSS, "graph executable: checksum mismatch (corrupt)");
  }
  bpg_rbuf_t r = {b + BPG_AOT_HEADER, payload, 0, 0};
  bp_device_t* devs[BPG_MAX_DEVICES] = {0};
  bp_status_t st = BP_OK;
  uint32_t ndev = bpg_get32(&r);
  if (st == BP_OK && (ndev == 0 || ndev > BPG_MAX_DEVICES)) {
    st = bpg_error(BP_DATA_LOSS, "graph executable: %u devices (1..%d)", ndev, BPG_MAX_DEVICES);
  }
  for (uint32_t d = 0; d < ndev && st == BP_OK; ++d) {
    uint32_t nl, pl, vl, ml;
    const char* name = bpg_getstr(&r, &nl);
    const char* pname = bpg_getstr(&r, &pl);
    const char* pver = bpg_getstr(&r, &vl);
    uint8_t uuid[16];
    bpg_get(&r, uuid, 16);
    const char* model = bpg_getstr(&r, &ml);
    if ((st = BPG_TRUNC(&r, "devices")) != BP_OK) break;
    char spec[BP_MAX_NAME];
    if (nl >= sizeof(spec)) {
      st = bpg_error(BP_DATA_LOSS, "graph executable: a device name of %u bytes", nl);
      break;
    }
    memcpy(spec, name, nl);
    spec[nl] = '\0';
    bp_device_t* dev = NULL;
    if (memchr(spec, '\0', nl) != NULL || bp_context_find_device(ctx, spec, &dev) != BP_OK) {
      st = bpg_error(BP_FAILED_PRECONDITION, "graph executable: compiled for device %s, which this context lacks", spec);
      break;
    }
    const bp_device_properties_t* p = bp_device_properties(dev);
    if (!bpg_str_eq(pname, pl, bpg_plugin_field(dev, 0)) || !bpg_str_eq(pver, vl, bpg_plugin_field(dev, 1))) {
      st = bpg_error(BP_FAILED_PRECONDITION, "graph executable: %s: compiled with plugin %.*s %.*s, here %s %s", spec,
                     (int)pl, pname, (int)vl, pver, bpg_plugin_field(dev, 0), bpg_plugin_field(dev, 1));
      break;
    }
    if (p == NULL || memcmp(p->uuid, uuid, 16) != 0 || !bpg_str_eq(model, ml, p->name)) {
      st = bpg_error(BP_FAILED_PRECONDITION, "graph executable: %s is another device than the one it was compiled for (%.*s)",
                     spec, (int)ml, model);
      break;
    }
    for (uint32_t e = 0; e < d; ++e) {
      if (devs[e] == dev) st = bpg_error(BP_DATA_LOSS, "graph executable: device %s listed twice", spec);
    }
    devs[d] = dev;
  }
  bp_graph_exec_t* x = NULL;
  if (st == BP_OK) {
    x = calloc(1, sizeof(*x));
    if (x == NULL) st = bpg_error(BP_RESOURCE_EXHAUSTED, "graph executable: out of memory");
  }
  if (st == BP_OK) {
    bp_context_retain(ctx);
    x->ctx = ctx;
    x->flags = bpg_get32(&r);
    x->limit_option = bpg_get64(&r);
    st = BPG_TRUNC(&r, "options");
    if (st == BP_OK) st = bpg_exec_init_devices(x, devs, ndev, x->limit_option);
  }
  if (st == BP_OK) st = bpg_read_graph(&r, x);
  if (st == BP_OK) st = bpg_read_plan(&r, x);
  if (st == BP_OK && r.at != r.len) {
    st = bpg_error(BP_DATA_LOSS, "graph executable: %llu bytes after the end", (unsigned long long)(r.len - r.at));
  }
  if (st != BP_OK) {
    char msg[1024];
    snprintf(msg, sizeof(msg), "%s", bp_status_message());
    bp_graph_exec_release(x);
    return bp_status_set_message(st, msg);
  }
  *out = x;
  return BP_OK;
}

bp_status_t bp_graph_exec_load(bp_context_t* ctx, const char* path, bp_graph_exec_t** out) {
  if (path == NULL) return bpg_error(BP_INVALID_ARGUMENT, "bp_graph_exec_load: path is NULL");
  FILE* f = fopen(path, "rb");
  if (f == NULL) return bpg_error(BP_NOT_FOUND, "bp_graph_exec_load: %s: %s", path, strerror(errno));
  uint8_t* buf = NULL;
  size_t len = 0, cap = 0;
  bp_status_t st = BP_OK;
  for (;;) {
    if (len == cap) {
      cap = cap ? cap * 2 : 65536;
      if (cap > BPG_AOT_MAX_FILE) {
        st = bpg_error(BP_DATA_LOSS, "bp_graph_exec_load: %s is larger than 2 GiB", path);
        break;
      }
      uint8_t* p = realloc(buf, cap);
      if (p == NULL) {
        st = bpg_error(BP_RESOURCE_EXHAUSTED, "bp_graph_exec_load: out of memory");
        break;
      }
      buf = p;
    }
    size_t n = fread(buf + len, 1, cap - len, f);
    len += n;
    if (n == 0) break;
  }
  if (st == BP_OK && ferror(f)) st = bpg_error(BP_DATA_LOSS, "bp_graph_exec_load: %s: read error", path);
  fclose(f);
  if (st == BP_OK) {
    st = bp_graph_exec_load_bytes(ctx, buf, len, out);
    if (st != BP_OK) st = bpg_error(st, "%s: %s", path, bp_status_message());
  }
  free(buf);
  return st;
}
