/* libbackplane_graph: ahead-of-time executables (save and load).
 *
 * File layout (little-endian; docs/graph.md):
 *   header, 40 bytes: magic "BPGRAPHX", u32 format version, u32 ABI major,
 *     u32 ABI minor, u32 reserved (0), u64 payload bytes, u64 FNV-1a-64
 *     checksum of the payload;
 *   payload: u32 device count, per device: str device name ("cpu:0"), str
 *     plugin name, str plugin version, 16 bytes uuid, str device model;
 *     u32 flags, u64 memory limit; u32 symbol count, i64 values; str the
 *     compiled graph in the text format (after the front passes, before the
 *     symbols are bound); u32 node count, u32 device index per node, str
 *     reason per node; u32 folded, merged, removed, islands moved.
 *   (str: u32 length and the bytes, no NUL.)
 * Loading checks everything before trusting anything: magic and size
 * (DATA_LOSS), format and ABI version (FAILED_PRECONDITION), checksum
 * (DATA_LOSS), every device present with the same plugin name and version,
 * uuid and model (FAILED_PRECONDITION naming the difference), the graph
 * through the parser and verifier, node count and device indices. It then
 * skips the front passes, the support claims and the cost model: the
 * placement is the file's; copies, the memory plan and constants are made
 * as in a compile.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "graph_exec.h"

#define BPG_AOT_MAGIC "BPGRAPHX"
#define BPG_AOT_VERSION 1u
#define BPG_AOT_HEADER 40u
#define BPG_AOT_MAX_FILE ((uint64_t)1 << 31)

static uint64_t bpg_fnv(const uint8_t* p, uint64_t n) {
  uint64_t h = 1469598103934665603ull;
  for (uint64_t i = 0; i < n; ++i) h = (h ^ p[i]) * 1099511628211ull;
  return h;
}

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
  char* text = NULL;
  size_t tlen = 0;
  bp_status_t st = bp_graph_print(x->g_sym, &text, &tlen);
  if (st != BP_OK) return st;
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
  bpg_put32(w, x->g->num_syms);
  for (uint32_t s = 0; s < x->g->num_syms; ++s) bpg_put64(w, (uint64_t)x->syms[s]);
  bpg_putstr(w, text, tlen);
  bp_graph_text_free(text);
  uint32_t live = 0;
  for (uint32_t n = 0; n < x->g->num_nodes; ++n) live += !x->g->nodes[n].dead;
  bpg_put32(w, live);
  for (uint32_t n = 0; n < x->g->num_nodes; ++n) {
    if (!x->g->nodes[n].dead) bpg_put32(w, x->node_dev[n]);
  }
  for (uint32_t n = 0; n < x->g->num_nodes; ++n) {
    if (!x->g->nodes[n].dead) bpg_putstr(w, x->node_reason[n], strnlen(x->node_reason[n], sizeof(x->node_reason[n])));
  }
  bpg_put32(w, x->passes_folded);
  bpg_put32(w, x->passes_merged);
  bpg_put32(w, x->passes_removed);
  bpg_put32(w, x->islands_moved);
  if (w->oom) return bpg_error(BP_RESOURCE_EXHAUSTED, "bp_graph_exec_save: out of memory");
  uint32_t abi_major = 0, abi_minor = 0;
  bp_abi_version(&abi_major, &abi_minor);
  uint64_t payload = w->len - BPG_AOT_HEADER;
  uint64_t sum = bpg_fnv(w->p + BPG_AOT_HEADER, payload);
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
static uint32_t bpg_get32(bpg_rbuf_t* r) {
  uint32_t v = 0;
  bpg_get(r, &v, 4);
  return v;
}
static uint64_t bpg_get64(bpg_rbuf_t* r) {
  uint64_t v = 0;
  bpg_get(r, &v, 8);
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
  if (bpg_fnv(b + BPG_AOT_HEADER, payload) != sum) {
    return bpg_error(BP_DATA_LOSS, "graph executable: checksum mismatch (corrupt)");
  }
  bpg_rbuf_t r = {b + BPG_AOT_HEADER, payload, 0, 0};
  bp_graph_exec_t* placed = calloc(1, sizeof(*placed));
  bp_graph_t* g = NULL;
  bp_status_t st = placed ? BP_OK : bpg_error(BP_RESOURCE_EXHAUSTED, "graph executable: out of memory");
  uint32_t ndev = st == BP_OK ? bpg_get32(&r) : 0;
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
      if (placed->devs[e].device == dev) st = bpg_error(BP_DATA_LOSS, "graph executable: device %s listed twice", spec);
    }
    placed->devs[d].device = dev;
    placed->num_devs = d + 1;
  }
  bp_graph_compile_options_t o;
  memset(&o, 0, sizeof(o));
  o.struct_size = sizeof(o);
  int64_t* syms = NULL;
  uint32_t nsyms = 0;
  if (st == BP_OK) {
    o.flags = bpg_get32(&r);
    o.memory_limit_bytes = bpg_get64(&r);
    nsyms = bpg_get32(&r);
    st = BPG_TRUNC(&r, "options");
    if (st == BP_OK && nsyms > 1024) st = bpg_error(BP_DATA_LOSS, "graph executable: %u symbols", nsyms);
  }
  if (st == BP_OK) {
    syms = calloc(nsyms + 1, sizeof(int64_t));
    if (syms == NULL) st = bpg_error(BP_RESOURCE_EXHAUSTED, "graph executable: out of memory");
    for (uint32_t s = 0; s < nsyms && st == BP_OK; ++s) syms[s] = (int64_t)bpg_get64(&r);
  }
  uint32_t tl = 0;
  const char* text = st == BP_OK ? bpg_getstr(&r, &tl) : "";
  if (st == BP_OK && (st = BPG_TRUNC(&r, "graph")) == BP_OK) {
    st = bp_graph_parse(text, tl, &g);
    if (st != BP_OK) st = bpg_error(BP_DATA_LOSS, "graph executable: its graph does not parse: %s", bp_status_message());
  }
  if (st == BP_OK && g->num_syms != nsyms) {
    st = bpg_error(BP_DATA_LOSS, "graph executable: %u symbol values for a graph with %u", nsyms, g->num_syms);
  }
  if (st == BP_OK) {
    uint32_t nn = bpg_get32(&r);
    if ((st = BPG_TRUNC(&r, "placement")) == BP_OK && nn != g->num_nodes) {
      st = bpg_error(BP_DATA_LOSS, "graph executable: %u placed nodes for a graph of %u", nn, g->num_nodes);
    }
  }
  if (st == BP_OK) {
    placed->node_dev = calloc(g->num_nodes + 1, sizeof(uint32_t));
    placed->node_reason = calloc(g->num_nodes + 1, sizeof(*placed->node_reason));
    if (placed->node_dev == NULL || placed->node_reason == NULL) st = bpg_error(BP_RESOURCE_EXHAUSTED, "graph executable: out of memory");
  }
  for (uint32_t n = 0; st == BP_OK && n < g->num_nodes; ++n) {
    placed->node_dev[n] = bpg_get32(&r);
    if (placed->node_dev[n] >= ndev) st = bpg_error(BP_DATA_LOSS, "graph executable: node %u on device %u of %u", n, placed->node_dev[n], ndev);
    else placed->devs[placed->node_dev[n]].num_nodes++;
  }
  for (uint32_t n = 0; st == BP_OK && n < g->num_nodes; ++n) {
    uint32_t rl;
    const char* reason = bpg_getstr(&r, &rl);
    size_t keep = rl < sizeof(placed->node_reason[n]) - 1 ? rl : sizeof(placed->node_reason[n]) - 1;
    memcpy(placed->node_reason[n], reason, keep);
    placed->node_reason[n][keep] = '\0';
  }
  if (st == BP_OK) {
    placed->passes_folded = bpg_get32(&r);
    placed->passes_merged = bpg_get32(&r);
    placed->passes_removed = bpg_get32(&r);
    placed->islands_moved = bpg_get32(&r);
    st = BPG_TRUNC(&r, "counters");
    if (st == BP_OK && r.at != r.len) st = bpg_error(BP_DATA_LOSS, "graph executable: %llu bytes after the end", (unsigned long long)(r.len - r.at));
  }
  if (st == BP_OK) st = bpg_exec_build(ctx, g, syms, nsyms, &o, placed, out);
  if (placed) {
    free(placed->node_dev);
    free(placed->node_reason);
    free(placed);
  }
  free(syms);
  bp_graph_release(g);
  return st;
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
