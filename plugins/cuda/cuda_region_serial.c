/* Compiled regions as bytes (executable_serialize / _deserialize).
 *
 * Layout (little-endian as the host writes it; a region is reloaded on
 * the machine kind that saved it):
 *   "BPCUDARG", u32 format, char plugin_version[16], u32 kind,
 *   u32 num_values, num_args, num_inputs, num_nodes,
 *   per value: u32 dtype, u32 rank, i64 sizes[rank],
 *   EW_PROGRAM: u32 num_instrs, num_registers, num_inputs, num_outputs,
 *               num_constants, compute_dtype; 12-byte instructions;
 *               bp_scalar_t constants,
 *   per node:   u32 op_id, num_inputs, num_outputs, compute_dtype,
 *               list_begin, list_count, ids[num_inputs + num_outputs],
 *               u32 attrs_size, attrs (attribute structs hold no pointers),
 *   u64 FNV-1a of everything before it.
 * Loading rebuilds the region desc and compiles it on the device again,
 * so the device's own checks (kernel limits, node support) apply.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuda_region.h"

#define MAGIC "BPCUDARG"
#define FORMAT 1u
#define PLUGIN_VERSION CUDA_PLUGIN_VERSION

typedef struct wbuf {
  unsigned char* p; /* NULL: only count */
  uint64_t n;
} wbuf_t;

static void put(wbuf_t* w, const void* src, uint64_t n) {
  if (w->p && n) memcpy(w->p + w->n, src, n);
  w->n += n;
}
static void put32(wbuf_t* w, uint32_t v) { put(w, &v, 4); }

static uint64_t fnv1a(const unsigned char* p, uint64_t n) {
  uint64_t h = 1469598103934665603ull;
  for (uint64_t i = 0; i < n; ++i) h = (h ^ p[i]) * 1099511628211ull;
  return h;
}

static void encode(const struct bpp_executable_s* e, wbuf_t* w) {
  char version[16] = PLUGIN_VERSION;
  put(w, MAGIC, 8);
  put32(w, FORMAT);
  put(w, version, sizeof version);
  put32(w, e->kind);
  put32(w, e->num_values);
  put32(w, e->num_args);
  put32(w, e->num_inputs);
  put32(w, e->num_nodes);
  for (uint32_t v = 0; v < e->num_values; ++v) {
    put32(w, e->values[v].dtype);
    put32(w, e->values[v].rank);
    put(w, e->values[v].sizes, sizeof(int64_t) * e->values[v].rank);
  }
  if (e->kind == BP_REGION_EW_PROGRAM) {
    const bp_ew_program_t* p = &e->prog;
    uint32_t head[6] = {p->num_instrs, p->num_registers, p->num_inputs, p->num_outputs,
                        p->num_constants, p->compute_dtype};
    put(w, head, sizeof head);
    for (uint32_t i = 0; i < p->num_instrs; ++i) put(w, &e->instrs[i], BP_EW_INSTR_V1_SIZE);
    put(w, e->consts, sizeof *e->consts * p->num_constants);
  }
  for (uint32_t i = 0; i < e->num_nodes; ++i) {
    const cuda_node_t* n = &e->nodes[i];
    uint32_t head[6] = {n->op_id, n->num_inputs, n->num_outputs, n->compute_dtype,
                        n->list_begin, n->list_count};
    put(w, head, sizeof head);
    put(w, n->ids, sizeof(uint32_t) * (n->num_inputs + n->num_outputs));
    const bp_kit_op_info_t* info = bp_kit_op_info(n->op_id);
    uint32_t asz = n->attrs && info ? info->attrs_size : 0;
    put32(w, asz);
    put(w, n->attrs, asz);
  }
}

bp_status_t cuda_region_serialize(bpp_executable_t e, void* data, uint64_t cap, uint64_t* out_size) {
  if (!e || !out_size) return bp_kit_error(BP_INVALID_ARGUMENT, "cuda: executable_serialize: NULL");
  wbuf_t w = {NULL, 0};
  encode(e, &w);
  uint64_t total = w.n + 8;
  *out_size = total;
  if (!data) return BP_OK;
  if (cap < total)
    return bp_kit_error(BP_OUT_OF_RANGE, "cuda: executable_serialize: %llu bytes needed, %llu given",
                        (unsigned long long)total, (unsigned long long)cap);
  w = (wbuf_t){data, 0};
  encode(e, &w);
  uint64_t h = fnv1a(data, w.n);
  memcpy((unsigned char*)data + w.n, &h, 8);
  return BP_OK;
}

/* ---- loading ------------------------------------------------------------- */
typedef struct rbuf {
  const unsigned char* p;
  uint64_t n, at;
  int bad;
} rbuf_t;

static const void* take(rbuf_t* r, uint64_t n) {
  if (r->bad || n > r->n - r->at) {
    r->bad = 1;
    return NULL;
  }
  const void* p = r->p + r->at;
  r->at += n;
  return p;
}
static uint32_t take32(rbuf_t* r) {
  const void* p = take(r, 4);
  uint32_t v = 0;
  if (p) memcpy(&v, p, 4);
  return v;
}

#define CUDA_SERIAL_MAX_VALUES 65536u
#define CUDA_SERIAL_MAX_NODES 65536u

/* What decoding builds: the region desc and the storage it points to. */
typedef struct loaded {
  bp_region_desc_t desc;
  bp_tensor_desc_t* values;
  const bp_tensor_desc_t** value_ptrs;
  bp_region_node_t* nodes;
  const bp_region_node_t** node_ptrs;
  bp_ew_program_t prog;
} loaded_t;

static void loaded_free(loaded_t* l) {
  free(l->values);
  free(l->value_ptrs);
  free(l->nodes);
  free(l->node_ptrs);
}

/* DATA_LOSS (with the reason) for anything out of bounds. */
static bp_status_t decode(rbuf_t* r, loaded_t* l) {
  uint32_t kind = take32(r), nv = take32(r), na = take32(r), ni = take32(r), nn = take32(r);
  if (r->bad || nv > CUDA_SERIAL_MAX_VALUES || nn > CUDA_SERIAL_MAX_NODES || na > nv || ni > na)
    return bp_kit_error(BP_DATA_LOSS, "cuda: executable_deserialize: a corrupt header");
  l->values = calloc(nv + 1u, sizeof *l->values);
  l->value_ptrs = calloc(nv + 1u, sizeof *l->value_ptrs);
  l->nodes = calloc(nn + 1u, sizeof *l->nodes);
  l->node_ptrs = calloc(nn + 1u, sizeof *l->node_ptrs);
  if (!l->values || !l->value_ptrs || !l->nodes || !l->node_ptrs)
    return bp_kit_error(BP_RESOURCE_EXHAUSTED, "cuda: executable_deserialize: out of host memory");
  for (uint32_t v = 0; v < nv && !r->bad; ++v) {
    bp_tensor_desc_t* t = &l->values[v];
    t->struct_size = sizeof *t;
    t->dtype = take32(r);
    t->rank = take32(r);
    if (t->rank > BP_MAX_RANK) r->bad = 1;
    const void* s = r->bad ? NULL : take(r, sizeof(int64_t) * t->rank);
    if (s) memcpy(t->sizes, s, sizeof(int64_t) * t->rank);
    l->value_ptrs[v] = t;
  }
  l->desc = (bp_region_desc_t){.struct_size = sizeof l->desc, .kind = kind, .num_values = nv,
                               .num_args = na, .num_inputs = ni, .num_nodes = nn,
                               .values = l->value_ptrs, .nodes = l->node_ptrs};
  if (kind == BP_REGION_EW_PROGRAM) {
    uint32_t h[6];
    for (int k = 0; k < 6; ++k) h[k] = take32(r);
    if (h[0] > 4096 || h[4] > 4096) r->bad = 1;
    const void* ins = r->bad ? NULL : take(r, (uint64_t)BP_EW_INSTR_V1_SIZE * h[0]);
    const void* con = r->bad ? NULL : take(r, sizeof(bp_scalar_t) * h[4]);
    l->prog = (bp_ew_program_t){.struct_size = sizeof l->prog, .num_instrs = h[0],
                                .num_registers = h[1], .num_inputs = h[2], .num_outputs = h[3],
                                .num_constants = h[4], .compute_dtype = h[5],
                                .instr_stride = BP_EW_INSTR_V1_SIZE, .instrs = ins, .constants = con};
    l->desc.program = &l->prog;
  }
  for (uint32_t i = 0; i < nn && !r->bad; ++i) {
    bp_region_node_t* n = &l->nodes[i];
    n->struct_size = sizeof *n;
    n->op_id = take32(r);
    n->num_inputs = take32(r);
    n->num_outputs = take32(r);
    n->compute_dtype = take32(r);
    n->list_begin = take32(r);
    n->list_count = take32(r);
    if (n->num_inputs + (uint64_t)n->num_outputs > CUDA_NODE_MAX_OPERANDS) r->bad = 1;
    const uint32_t* ids = r->bad ? NULL : take(r, 4ull * (n->num_inputs + n->num_outputs));
    uint32_t asz = take32(r);
    const bp_kit_op_info_t* info = bp_kit_op_info(n->op_id);
    if (asz && (!info || asz != info->attrs_size)) r->bad = 1;
    n->attrs = asz && !r->bad ? take(r, asz) : NULL;
    if (ids) {
      n->inputs = ids;
      n->outputs = ids + n->num_inputs;
      for (uint32_t k = 0; k < n->num_inputs + n->num_outputs; ++k)
        if (ids[k] != BP_REGION_VALUE_NONE && ids[k] >= nv) r->bad = 1;
    }
    l->node_ptrs[i] = n;
  }
  if (r->bad || r->at != r->n)
    return bp_kit_error(BP_DATA_LOSS, "cuda: executable_deserialize: truncated or corrupt data");
  return BP_OK;
}

bp_status_t cuda_region_deserialize(bpp_device_t d, const void* data, uint64_t size,
                                    bpp_executable_t* out) {
  if (!d || !data || !out) return bp_kit_error(BP_INVALID_ARGUMENT, "cuda: executable_deserialize: NULL");
  *out = NULL;
  const unsigned char* p = data;
  if (size < 8 + 4 + 16 + 8)
    return bp_kit_error(BP_DATA_LOSS, "cuda: executable_deserialize: %llu bytes is too short",
                        (unsigned long long)size);
  if (memcmp(p, MAGIC, 8) != 0)
    return bp_kit_error(BP_FAILED_PRECONDITION, "cuda: executable_deserialize: not a region of "
                                                "the CUDA plugin");
  uint64_t h;
  memcpy(&h, p + size - 8, 8);
  if (fnv1a(p, size - 8) != h)
    return bp_kit_error(BP_DATA_LOSS, "cuda: executable_deserialize: checksum mismatch");
  rbuf_t r = {p, size - 8, 8, 0};
  uint32_t format = take32(&r);
  const char* version = take(&r, 16);
  if (format != FORMAT || strncmp(version, PLUGIN_VERSION, 16) != 0)
    return bp_kit_error(BP_FAILED_PRECONDITION, "cuda: executable_deserialize: saved by format %u of "
                        "plugin %.16s (this is format %u of %s)", format, version, FORMAT,
                        PLUGIN_VERSION);
  loaded_t l;
  memset(&l, 0, sizeof l);
  bp_status_t st = decode(&r, &l);
  if (st == BP_OK) {
    bp_support_t why = {.struct_size = sizeof why};
    st = cuda_region_compile(d, &l.desc, &why, out);
  }
  loaded_free(&l);
  return st;
}
