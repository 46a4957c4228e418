/* backplane CPU plugin: compiled regions as bytes.
 *
 * A CPU executable is cheap to rebuild, so its bytes are the region
 * itself and loading rebuilds it through the same path as region_compile:
 *
 *   0   magic "BPCPUX01"
 *   8   format version (2), u32; reserved u32
 *   16  plugin version, 16 bytes NUL-padded (CPU_PLUGIN_VERSION)
 *   32  payload bytes, u64
 *   40  checksum of the payload (bp_kit_checksum64, seed 0), u64
 *   48  payload: kind, values, arguments, inputs, nodes, has program (u32
 *       each); per value dtype, rank (u32), sizes (i64 x rank); per node
 *       op, compute dtype, inputs, outputs, list begin, list count,
 *       attribute bytes (u32 each), the ids, the attribute bytes; the
 *       program's counts and compute dtype (u32 x 6), instructions (12
 *       bytes each), constants (16 bytes each).
 *
 * Loading checks every count, id, op, attribute size and program operand
 * before anything is built, and answers DATA_LOSS (corrupt, truncated) or
 * FAILED_PRECONDITION (another plugin version or format) with the reason.
 * Thread-safe.
 */
#include <stdlib.h>
#include <string.h>

#include "bp_kit_cache.h"
#include "cpu_region.h"

#define HDR 48u
#define FORMAT_VERSION 2u /* 1 had an FNV-1a checksum */
#define MAX_VALUES (1u << 20)
#define MAX_NODES (1u << 18)
static const char k_magic[8] = {'B', 'P', 'C', 'P', 'U', 'X', '0', '1'};


/* ---- writing -------------------------------------------------------------- */
typedef struct wbuf {
  unsigned char* p;
  uint64_t n, cap;
  int oom;
} wbuf_t;

static void put(wbuf_t* w, const void* src, uint64_t n) {
  if (w->oom || n == 0) return;
  if (w->n + n > w->cap) {
    uint64_t cap = w->cap ? w->cap * 2 : 1024;
    while (cap < w->n + n) cap *= 2;
    unsigned char* q = realloc(w->p, cap);
    if (!q) {
      w->oom = 1;
      return;
    }
    w->p = q;
    w->cap = cap;
  }
  memcpy(w->p + w->n, src, n);
  w->n += n;
}
static void put32(wbuf_t* w, uint32_t v) { put(w, &v, 4); }

bp_status_t cpu_region_encode(const bp_region_desc_t* g, unsigned char** out, uint64_t* out_size) {
  wbuf_t w = {0};
  unsigned char hdr[HDR] = {0};
  put(&w, hdr, HDR);
  uint32_t head[6] = {g->kind, g->num_values, g->num_args, g->num_inputs, g->num_nodes,
                      g->program != NULL};
  put(&w, head, sizeof head);
  for (uint32_t v = 0; v < g->num_values; v++) {
    put32(&w, g->values[v]->dtype);
    put32(&w, g->values[v]->rank);
    put(&w, g->values[v]->sizes, sizeof(int64_t) * g->values[v]->rank);
  }
  for (uint32_t n = 0; n < g->num_nodes; n++) {
    const bp_region_node_t* node = g->nodes[n];
    const bp_kit_op_info_t* info = bp_kit_op_info(node->op_id);
    uint32_t asz = info && node->attrs ? info->attrs_size : 0;
    uint32_t h[7] = {node->op_id, node->compute_dtype, node->num_inputs, node->num_outputs,
                     node->list_begin, node->list_count, asz};
    put(&w, h, sizeof h);
    put(&w, node->inputs, sizeof(uint32_t) * node->num_inputs);
    put(&w, node->outputs, sizeof(uint32_t) * node->num_outputs);
    if (asz) put(&w, node->attrs, asz);
  }
  if (g->program) {
    const bp_ew_program_t* p = g->program;
    uint32_t h[6] = {p->num_instrs, p->num_registers, p->num_inputs, p->num_outputs,
                     p->num_constants, p->compute_dtype};
    put(&w, h, sizeof h);
    for (uint32_t i = 0; i < p->num_instrs; i++) put(&w, BP_EW_INSTR_AT(p, i), BP_EW_INSTR_V1_SIZE);
    put(&w, p->constants, sizeof(bp_scalar_t) * p->num_constants);
  }
  if (w.oom) {
    free(w.p);
    return cpu_error(BP_RESOURCE_EXHAUSTED, "cpu: region bytes: out of memory");
  }
  uint64_t payload = w.n - HDR;
  uint32_t version = FORMAT_VERSION;
  memcpy(w.p, k_magic, 8);
  memcpy(w.p + 8, &version, 4);
  memset(w.p + 12, 0, 20);
  memcpy(w.p + 16, CPU_PLUGIN_VERSION, strlen(CPU_PLUGIN_VERSION));
  memcpy(w.p + 32, &payload, 8);
  uint64_t sum = bp_kit_checksum64(w.p + HDR, payload, 0);
  memcpy(w.p + 40, &sum, 8);
  *out = w.p;
  *out_size = w.n;
  return BP_OK;
}

/* ---- reading -------------------------------------------------------------- */
typedef struct rbuf {
  const unsigned char* p;
  uint64_t n, at;
  int short_read;
} rbuf_t;

static const void* take(rbuf_t* r, uint64_t n) {
  if (r->short_read || n > r->n - r->at) {
    r->short_read = 1;
    return NULL;
  }
  const void* q = r->p + r->at;
  r->at += n;
  return q;
}
static uint32_t get32(rbuf_t* r) {
  uint32_t v = 0;
  const void* q = take(r, 4);
  if (q) memcpy(&v, q, 4);
  return v;
}

/* What decoding allocates; freed together. */
typedef struct decoded {
  bp_region_desc_t desc;
  bp_tensor_desc_t* values;
  const bp_tensor_desc_t** value_ptrs;
  bp_region_node_t* nodes;
  const bp_region_node_t** node_ptrs;
  bp_ew_program_t program;
  bp_ew_instr_t* instrs;
  bp_scalar_t* consts;
  void** store; /* per node: its ids and attribute bytes, aligned copies */
} decoded_t;

static void decoded_free(decoded_t* d) {
  free(d->values);
  free(d->value_ptrs);
  free(d->nodes);
  free(d->node_ptrs);
  free(d->instrs);
  free(d->consts);
  for (uint32_t n = 0; d->store && n < d->desc.num_nodes; n++) free(d->store[n]);
  free(d->store);
}

#define CORRUPT(...) cpu_error(BP_DATA_LOSS, "cpu: region bytes: " __VA_ARGS__)

static bp_status_t decode_nodes(rbuf_t* r, decoded_t* d) {
  bp_region_desc_t* g = &d->desc;
  for (uint32_t n = 0; n < g->num_nodes; n++) {
    uint32_t h[7];
    for (int k = 0; k < 7; k++) h[k] = get32(r);
    if (r->short_read) return CORRUPT("truncated in node %u", n);
    const bp_kit_op_info_t* info = bp_kit_op_info(h[0]);
    if (!info) return CORRUPT("node %u has unknown op %u", n, h[0]);
    int list = info->num_inputs < 0;
    if ((list ? h[2] < 1 : h[2] != (uint32_t)info->num_inputs) || h[3] != (uint32_t)info->num_outputs ||
        h[2] > 4096 || (h[6] != 0 && h[6] != info->attrs_size) ||
        (h[1] != 0 && !bp_dtype_is_valid(h[1])) || h[4] + (uint64_t)h[5] > h[2])
      return CORRUPT("node %u (%s) has inconsistent counts", n, info->name);
    bp_region_node_t* node = &d->nodes[n];
    node->struct_size = sizeof *node;
    node->op_id = h[0];
    node->compute_dtype = h[1];
    node->num_inputs = h[2];
    node->num_outputs = h[3];
    node->list_begin = h[4];
    node->list_count = h[5];
    const void* ids = take(r, 4ull * (h[2] + h[3]));
    const void* attrs = h[6] ? take(r, h[6]) : NULL;
    if (r->short_read) return CORRUPT("truncated in node %u", n);
    /* Aligned copies: the attributes hold doubles and 64-bit integers. */
    size_t ids_bytes = (4u * (h[2] + h[3]) + 15u) / 16u * 16u;
    unsigned char* mem = d->store[n] = aligned_alloc(16, ids_bytes + (h[6] + 15u) / 16u * 16u + 16u);
    if (!mem) return cpu_error(BP_RESOURCE_EXHAUSTED, "cpu: region bytes: out of memory");
    memcpy(mem, ids, 4u * (h[2] + h[3]));
    if (attrs) memcpy(mem + ids_bytes, attrs, h[6]);
    node->inputs = (const uint32_t*)(const void*)mem;
    node->outputs = node->inputs + h[2];
    node->attrs = attrs ? mem + ids_bytes : NULL;
    for (uint32_t i = 0; i < h[2]; i++) {
      uint32_t id = node->inputs[i];
      if (id != UINT32_MAX && id >= g->num_values) return CORRUPT("node %u reads value %u", n, id);
    }
    for (uint32_t k = 0; k < h[3]; k++) {
      uint32_t id = node->outputs[k];
      if (id >= g->num_values || id < g->num_inputs) return CORRUPT("node %u writes value %u", n, id);
    }
    d->node_ptrs[n] = node;
  }
  return BP_OK;
}

static bp_status_t decode_program(rbuf_t* r, decoded_t* d) {
  bp_region_desc_t* g = &d->desc;
  uint32_t h[6];
  for (int k = 0; k < 6; k++) h[k] = get32(r);
  if (r->short_read) return CORRUPT("truncated in the program");
  if (h[0] == 0 || h[0] > CPU_EWP_MAX_INSTRS || h[1] == 0 || h[1] > CPU_EWP_MAX_REGISTERS ||
      h[2] != g->num_inputs || h[3] != g->num_args - g->num_inputs || h[4] > 256 ||
      !bp_dtype_is_valid(h[5]))
    return CORRUPT("program counts %u/%u/%u/%u/%u are inconsistent", h[0], h[1], h[2], h[3], h[4]);
  d->instrs = calloc(h[0], sizeof *d->instrs);
  d->consts = calloc(h[4] ? h[4] : 1, sizeof *d->consts);
  if (!d->instrs || !d->consts) return cpu_error(BP_RESOURCE_EXHAUSTED, "cpu: region bytes: out of memory");
  uint8_t written[CPU_EWP_MAX_REGISTERS] = {0};
  for (uint32_t i = 0; i < h[0]; i++) {
    const void* q = take(r, BP_EW_INSTR_V1_SIZE);
    if (!q) return CORRUPT("truncated in instruction %u", i);
    bp_ew_instr_t* in = &d->instrs[i];
    memcpy(in, q, BP_EW_INSTR_V1_SIZE);
    int ok = 1, reads[3] = {-1, -1, -1};
    switch (in->opcode) {
      case BP_EW_LOAD_INPUT: ok = in->a < h[2]; break;
      case BP_EW_LOAD_CONST: ok = in->a < h[4]; break;
      case BP_EW_STORE: ok = in->a < h[3]; reads[0] = in->b; break;
      case BP_EW_CAST: ok = bp_dtype_is_valid(in->aux); reads[0] = in->a; break;
      default: {
        const bp_kit_op_info_t* info = bp_kit_op_info(in->opcode);
        ok = info && bp_op_is_elementwise(in->opcode) && info->num_inputs >= 1 && info->num_inputs <= 3;
        if (ok) {
          reads[0] = in->a;
          if (info->num_inputs > 1) reads[1] = in->b;
          if (info->num_inputs > 2) reads[2] = in->c;
        }
      }
    }
    for (int k = 0; k < 3 && ok; k++) ok = reads[k] < 0 || (reads[k] < (int)h[1] && written[reads[k]]);
    if (ok && in->opcode != BP_EW_STORE) {
      ok = in->dst < h[1];
      if (ok) written[in->dst] = 1;
    }
    if (!ok) return CORRUPT("instruction %u (opcode 0x%x) has a bad operand", i, in->opcode);
  }
  for (uint32_t k = 0; k < h[4]; k++) {
    const void* q = take(r, sizeof(bp_scalar_t));
    if (!q) return CORRUPT("truncated in constant %u", k);
    memcpy(&d->consts[k], q, sizeof(bp_scalar_t));
    uint32_t kind = d->consts[k].kind;
    if (kind != BP_SCALAR_FLOAT && kind != BP_SCALAR_INT && kind != BP_SCALAR_BOOL)
      return CORRUPT("constant %u has kind %u", k, kind);
  }
  d->program = (bp_ew_program_t){.struct_size = sizeof d->program, .num_instrs = h[0],
                                 .num_registers = h[1], .num_inputs = h[2], .num_outputs = h[3],
                                 .num_constants = h[4], .compute_dtype = h[5],
                                 .instr_stride = sizeof(bp_ew_instr_t), .instrs = d->instrs,
                                 .constants = d->consts};
  g->program = &d->program;
  return BP_OK;
}

static bp_status_t decode(rbuf_t* r, decoded_t* d) {
  bp_region_desc_t* g = &d->desc;
  uint32_t h[6];
  for (int k = 0; k < 6; k++) h[k] = get32(r);
  if (r->short_read) return CORRUPT("truncated in the region header");
  if (h[0] == 0 || h[0] >= BP_REGION_KIND_COUNT_ || h[1] > MAX_VALUES || h[2] > h[1] || h[3] > h[2] ||
      h[4] > MAX_NODES || h[5] > 1 || (h[0] == BP_REGION_EW_PROGRAM) != (h[5] == 1) ||
      (h[0] != BP_REGION_EW_PROGRAM && h[4] == 0))
    return CORRUPT("region header %u/%u/%u/%u/%u is inconsistent", h[0], h[1], h[2], h[3], h[4]);
  *g = (bp_region_desc_t){.struct_size = sizeof *g, .kind = h[0], .num_values = h[1], .num_args = h[2],
                          .num_inputs = h[3], .num_nodes = h[4]};
  d->values = calloc(h[1] ? h[1] : 1, sizeof *d->values);
  d->value_ptrs = calloc(h[1] ? h[1] : 1, sizeof *d->value_ptrs);
  d->nodes = calloc(h[4] ? h[4] : 1, sizeof *d->nodes);
  d->node_ptrs = calloc(h[4] ? h[4] : 1, sizeof *d->node_ptrs);
  d->store = calloc(h[4] ? h[4] : 1, sizeof *d->store);
  if (!d->values || !d->value_ptrs || !d->nodes || !d->node_ptrs || !d->store)
    return cpu_error(BP_RESOURCE_EXHAUSTED, "cpu: region bytes: out of memory");
  for (uint32_t v = 0; v < g->num_values; v++) {
    bp_tensor_desc_t* e = &d->values[v];
    e->struct_size = sizeof *e;
    e->dtype = get32(r);
    e->rank = get32(r);
    if (r->short_read || !bp_dtype_is_valid(e->dtype) || e->rank > BP_MAX_RANK)
      return CORRUPT("value %u is malformed", v);
    const void* q = take(r, 8ull * e->rank);
    if (!q) return CORRUPT("truncated in value %u", v);
    memcpy(e->sizes, q, 8ull * e->rank);
    int64_t s = 1;
    for (uint32_t i = e->rank; i-- > 0;) {
      if (e->sizes[i] < 0 || (e->sizes[i] > 0 && s > INT64_MAX / 16 / e->sizes[i]))
        return CORRUPT("value %u has a bad size", v);
      e->strides[i] = s;
      s *= e->sizes[i];
    }
    d->value_ptrs[v] = e;
  }
  g->values = d->value_ptrs;
  g->nodes = d->node_ptrs;
  bp_status_t st = decode_nodes(r, d);
  if (st == BP_OK && h[5]) st = decode_program(r, d);
  if (st == BP_OK && r->at != r->n) st = CORRUPT("%llu bytes after the region", (unsigned long long)(r->n - r->at));
  return st;
}

bp_status_t cpu_region_decode(const unsigned char* data, uint64_t size, struct bpp_executable_s* exe) {
  if (size < HDR) return CORRUPT("%llu bytes, shorter than the header", (unsigned long long)size);
  if (memcmp(data, k_magic, 8) != 0) return CORRUPT("not CPU region bytes (bad magic)");
  uint32_t version;
  memcpy(&version, data + 8, 4);
  if (version != FORMAT_VERSION)
    return cpu_error(BP_FAILED_PRECONDITION, "cpu: region bytes: format version %u (this plugin reads %u)", version,
                     FORMAT_VERSION);
  char ver[17] = {0};
  memcpy(ver, data + 16, 16);
  if (strcmp(ver, CPU_PLUGIN_VERSION) != 0)
    return cpu_error(BP_FAILED_PRECONDITION, "cpu: region bytes: written by plugin version '%.16s', this is %s",
                     ver, CPU_PLUGIN_VERSION);
  uint64_t payload, sum;
  memcpy(&payload, data + 32, 8);
  memcpy(&sum, data + 40, 8);
  if (payload != size - HDR)
    return CORRUPT("%llu payload bytes, the header says %llu (truncated)", (unsigned long long)(size - HDR),
                   (unsigned long long)payload);
  if (bp_kit_checksum64(data + HDR, payload, 0) != sum) return CORRUPT("checksum mismatch");
  decoded_t d;
  memset(&d, 0, sizeof d);
  rbuf_t r = {data + HDR, payload, 0, 0};
  bp_status_t st = decode(&r, &d);
  if (st == BP_OK) {
    char msg[256];
    int reason = cpu_region_build(&d.desc, exe, msg, sizeof msg);
    if (reason < 0) st = cpu_error(BP_RESOURCE_EXHAUSTED, "cpu: region bytes: out of memory");
    else if (reason > 0) st = CORRUPT("the saved region does not build: %s", msg);
  }
  if (st == BP_OK) {
    exe->blob = malloc(size);
    if (!exe->blob) st = cpu_error(BP_RESOURCE_EXHAUSTED, "cpu: region bytes: out of memory");
    else {
      memcpy(exe->blob, data, size);
      exe->blob_size = size;
    }
  }
  decoded_free(&d);
  return st;
}
