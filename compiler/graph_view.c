/* libbackplane_graph: view nodes.
 *
 * A view node is a node whose op is BP_GRAPH_VIEW_OP(kind) (kind: a
 * BP_VIEW_* index of ops.def's view table, or BP_GRAPH_VIEW_CONTIGUOUS) and
 * whose attributes are a bp_graph_view_params_t. Its output shares its
 * input's buffer: inference gives the view's strides by the core's own
 * rules (bp_view_infer_desc), eager and compiled runs call the tensor
 * function (bp_tensor_permute, ...) on the input tensor. `contiguous`
 * materializes: a dense copy (BP_OP_clone) of a strided value.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "graph_internal.h"

enum bpg_view_form {
  BPG_VF_NONE = 0,   /* contiguous */
  BPG_VF_SIZES = 1,  /* view, expand: sizes=[..] */
  BPG_VF_DIMS = 2,   /* permute: dims=[..] */
  BPG_VF_SLICE = 3,  /* dim, start, end, step */
  BPG_VF_SELECT = 4, /* dim, index */
  BPG_VF_DIM = 5     /* squeeze, unsqueeze: dim */
};

typedef struct bpg_view_kind {
  uint32_t kind;
  const char* name;
  uint32_t form;
} bpg_view_kind_t;

static const bpg_view_kind_t bpg_views[] = {
    {BP_VIEW_view, "view", BPG_VF_SIZES},         {BP_VIEW_permute, "permute", BPG_VF_DIMS},
    {BP_VIEW_expand, "expand", BPG_VF_SIZES},     {BP_VIEW_slice, "slice", BPG_VF_SLICE},
    {BP_VIEW_select, "select", BPG_VF_SELECT},    {BP_VIEW_squeeze, "squeeze", BPG_VF_DIM},
    {BP_VIEW_unsqueeze, "unsqueeze", BPG_VF_DIM}, {BP_GRAPH_VIEW_CONTIGUOUS, "contiguous", BPG_VF_NONE},
};
#define BPG_NUM_VIEWS (sizeof(bpg_views) / sizeof(bpg_views[0]))

static const bpg_view_kind_t* bpg_view_find(uint32_t op) {
  if (op < BP_GRAPH_VIEW_OP(0)) return NULL;
  for (size_t i = 0; i < BPG_NUM_VIEWS; ++i) {
    if (BP_GRAPH_VIEW_OP(bpg_views[i].kind) == op) return &bpg_views[i];
  }
  return NULL;
}

int bpg_is_view(uint32_t op) { return bpg_view_find(op) != NULL; }

int bpg_is_alias_view(uint32_t op) {
  return bpg_is_view(op) && op != BP_GRAPH_VIEW_OP(BP_GRAPH_VIEW_CONTIGUOUS);
}

uint32_t bpg_view_from_name(const char* name) {
  for (size_t i = 0; i < BPG_NUM_VIEWS; ++i) {
    if (strcmp(bpg_views[i].name, name) == 0) return BP_GRAPH_VIEW_OP(bpg_views[i].kind);
  }
  return BP_OP_INVALID;
}

const char* bpg_node_op_name(uint32_t op) {
  const bpg_view_kind_t* k = bpg_view_find(op);
  if (k != NULL) return k->name;
  const bp_op_info_t* info = bpg_op_info(op);
  return info != NULL ? info->name : "?";
}

/* The core's argument list for the view (see bp_view_infer_desc). */
static uint32_t bpg_view_args(const bpg_view_kind_t* k, const bp_graph_view_params_t* p, int64_t* args) {
  switch (k->form) {
    case BPG_VF_SIZES:
    case BPG_VF_DIMS:
      memcpy(args, p->sizes, sizeof(int64_t) * p->rank);
      return p->rank;
    case BPG_VF_SLICE:
      args[0] = p->dim;
      args[1] = p->start;
      args[2] = p->end;
      args[3] = p->step;
      return 4;
    case BPG_VF_SELECT:
      args[0] = p->dim;
      args[1] = p->start;
      return 2;
    case BPG_VF_DIM:
      args[0] = p->dim;
      return 1;
    default:
      return 0;
  }
}

static int bpg_desc_dense(const bp_tensor_desc_t* d) {
  int64_t want = 1;
  for (uint32_t i = d->rank; i-- > 0;) {
    if (d->sizes[i] != 1 && d->strides[i] != want) return 0;
    want *= d->sizes[i];
  }
  return 1;
}

bp_status_t bpg_view_infer(uint32_t op, const void* params, const bp_tensor_desc_t* in, bp_tensor_desc_t* out) {
  const bpg_view_kind_t* k = bpg_view_find(op);
  const bp_graph_view_params_t* p = params;
  if (k == NULL || p == NULL) return bpg_error(BP_INVALID_ARGUMENT, "not a view node");
  if (k->form == BPG_VF_NONE) {
    *out = *in;
    out->byte_offset = 0;
    int64_t stride = 1;
    for (uint32_t i = in->rank; i-- > 0;) {
      out->strides[i] = stride;
      stride *= in->sizes[i] > 0 ? in->sizes[i] : 1;
    }
    return BP_OK;
  }
  if ((k->form == BPG_VF_SIZES || k->form == BPG_VF_DIMS) && p->rank > BP_MAX_RANK) {
    return bpg_error(BP_INVALID_ARGUMENT, "%s: %u %s given, at most %d", k->name, p->rank,
                     k->form == BPG_VF_DIMS ? "dims" : "sizes", BP_MAX_RANK);
  }
  if (k->form == BPG_VF_DIMS && p->rank != in->rank) {
    return bpg_error(BP_INVALID_ARGUMENT, "permute: %u dims given for input 'self' of rank %u", p->rank, in->rank);
  }
  int64_t args[BP_MAX_RANK + 4];
  uint32_t n = bpg_view_args(k, p, args);
  return bp_view_infer_desc(k->kind, in, args, n, out);
}

int bpg_view_desc_dense(const bp_tensor_desc_t* d) { return bpg_desc_dense(d); }

bp_status_t bpg_view_apply(bp_stream_t* stream, uint32_t op, const void* params, const bp_tensor_t* in,
                           bp_tensor_t** out) {
  const bpg_view_kind_t* k = bpg_view_find(op);
  const bp_graph_view_params_t* p = params;
  bp_tensor_t* t = (bp_tensor_t*)in; /* views read the tensor; it is not modified */
  if (k == NULL || p == NULL || in == NULL) return bpg_error(BP_INVALID_ARGUMENT, "view: bad node");
  switch (k->kind) {
    case BP_VIEW_view: return bp_tensor_view(t, p->rank, p->sizes, out);
    case BP_VIEW_permute: return bp_tensor_permute(t, p->sizes, out);
    case BP_VIEW_expand: return bp_tensor_expand(t, p->rank, p->sizes, out);
    case BP_VIEW_slice: return bp_tensor_slice(t, p->dim, p->start, p->end, p->step, out);
    case BP_VIEW_select: return bp_tensor_select(t, p->dim, p->start, out);
    case BP_VIEW_squeeze: return bp_tensor_squeeze(t, p->dim, out);
    case BP_VIEW_unsqueeze: return bp_tensor_unsqueeze(t, p->dim, out);
    default:
      if (bp_tensor_is_contiguous(in)) {
        bp_tensor_retain(t);
        *out = t;
        return BP_OK;
      }
      return bp_op_run(stream, BP_OP_clone, &in, 1, NULL, out, 1);
  }
}

/* ---- text ------------------------------------------------------------------ */
static void bpg_print_list(bpg_sbuf_t* s, const char* key, const int64_t* v, uint32_t n) {
  bpg_sbuf_printf(s, "%s=[", key);
  for (uint32_t i = 0; i < n; ++i) bpg_sbuf_printf(s, "%s%" PRId64, i ? ", " : "", v[i]);
  bpg_sbuf_printf(s, "]");
}

void bpg_view_params_print(bpg_sbuf_t* s, uint32_t op, const void* params) {
  const bpg_view_kind_t* k = bpg_view_find(op);
  const bp_graph_view_params_t* p = params;
  if (k == NULL || p == NULL || k->form == BPG_VF_NONE) return;
  bpg_sbuf_printf(s, " {");
  switch (k->form) {
    case BPG_VF_SIZES: bpg_print_list(s, "sizes", p->sizes, p->rank); break;
    case BPG_VF_DIMS: bpg_print_list(s, "dims", p->sizes, p->rank); break;
    case BPG_VF_SLICE:
      bpg_sbuf_printf(s, "dim=%" PRId64 ", start=%" PRId64 ", end=%" PRId64 ", step=%" PRId64, p->dim, p->start,
                      p->end, p->step);
      break;
    case BPG_VF_SELECT: bpg_sbuf_printf(s, "dim=%" PRId64 ", index=%" PRId64, p->dim, p->start); break;
    default: bpg_sbuf_printf(s, "dim=%" PRId64, p->dim); break;
  }
  bpg_sbuf_printf(s, "}");
}

static int bpg_parse_i64(const char* tok, int64_t* out) {
  char* end = NULL;
  errno = 0;
  long long v = strtoll(tok, &end, 10);
  if (errno != 0 || end == tok || *end != '\0') return -1;
  *out = (int64_t)v;
  return 0;
}

/* "[a, b, ...]" into v (at most BP_MAX_RANK entries). */
static int bpg_parse_list(const char* val, int64_t* v, uint32_t* n, char* err, size_t cap, const char* key) {
  if (val[0] != '[') {
    snprintf(err, cap, "attribute '%s' takes a list [..]", key);
    return -1;
  }
  const char* p = val + 1;
  *n = 0;
  while (*p == ' ') ++p;
  if (*p == ']') return p[1] == '\0' ? 0 : (snprintf(err, cap, "attribute '%s': malformed list", key), -1);
  for (;;) {
    char tok[32];
    size_t len = 0;
    while (*p && *p != ',' && *p != ']' && *p != ' ' && len + 1 < sizeof(tok)) tok[len++] = *p++;
    tok[len] = '\0';
    while (*p == ' ') ++p;
    if (*n >= BP_MAX_RANK) {
      snprintf(err, cap, "attribute '%s' takes at most %d values", key, BP_MAX_RANK);
      return -1;
    }
    if (bpg_parse_i64(tok, &v[*n]) != 0) {
      snprintf(err, cap, "'%s' is not an integer (attribute '%s')", tok, key);
      return -1;
    }
    ++*n;
    if (*p == ',') {
      ++p;
      while (*p == ' ') ++p;
      continue;
    }
    if (*p == ']' && p[1] == '\0') return 0;
    snprintf(err, cap, "attribute '%s': malformed list", key);
    return -1;
  }
}

int bpg_view_params_set(uint32_t op, void* params, const char* key, const char* val, char* err, size_t cap) {
  const bpg_view_kind_t* k = bpg_view_find(op);
  bp_graph_view_params_t* p = params;
  if (k == NULL) return -2;
  const char* list_key = k->form == BPG_VF_SIZES ? "sizes" : k->form == BPG_VF_DIMS ? "dims" : NULL;
  if (list_key != NULL && strcmp(key, list_key) == 0) return bpg_parse_list(val, p->sizes, &p->rank, err, cap, key);
  int64_t* dst = NULL;
  if (k->form >= BPG_VF_SLICE && strcmp(key, "dim") == 0) dst = &p->dim;
  if (k->form == BPG_VF_SLICE && strcmp(key, "start") == 0) dst = &p->start;
  if (k->form == BPG_VF_SLICE && strcmp(key, "end") == 0) dst = &p->end;
  if (k->form == BPG_VF_SLICE && strcmp(key, "step") == 0) dst = &p->step;
  if (k->form == BPG_VF_SELECT && strcmp(key, "index") == 0) dst = &p->start;
  if (dst == NULL) {
    snprintf(err, cap, "view '%s' has no attribute '%s'", k->name, key);
    return -2;
  }
  if (bpg_parse_i64(val, dst) != 0) {
    snprintf(err, cap, "'%s' is not an integer (attribute '%s')", val, key);
    return -1;
  }
  return 0;
}

/* ---- building ---------------------------------------------------------------- */
bp_status_t bp_graph_add_view(bp_graph_t* g, uint32_t view, uint32_t input, const bp_graph_view_params_t* params,
                              const char* name, uint32_t* out_value) {
  const char* api = "bp_graph_add_view";
  const bpg_view_kind_t* k = bpg_view_find(BP_GRAPH_VIEW_OP(view));
  if (g == NULL || out_value == NULL) return bpg_error(BP_INVALID_ARGUMENT, "%s: NULL argument", api);
  if (k == NULL) {
    return bpg_error(BP_INVALID_ARGUMENT,
                     "%s: view %u is not a graph view (view, permute, expand, slice, select, squeeze, unsqueeze, "
                     "contiguous)",
                     api, view);
  }
  if (k->form != BPG_VF_NONE && params == NULL) {
    return bpg_error(BP_INVALID_ARGUMENT, "%s: view '%s' needs params", api, k->name);
  }
  if (params != NULL && params->struct_size < BP_GRAPH_VIEW_PARAMS_V1_SIZE) {
    return bpg_error(BP_INVALID_ARGUMENT, "%s: params->struct_size %u is below %u", api, params->struct_size,
                     (unsigned)BP_GRAPH_VIEW_PARAMS_V1_SIZE);
  }
  if (params != NULL && params->rank > BP_MAX_RANK) {
    return bpg_error(BP_INVALID_ARGUMENT, "%s: params->rank %u exceeds %d", api, params->rank, BP_MAX_RANK);
  }
  bp_graph_view_params_t def;
  memset(&def, 0, sizeof(def));
  def.struct_size = sizeof(def);
  return bpg_add_node(g, BP_GRAPH_VIEW_OP(view), &input, 1, params != NULL ? (const void*)params : &def, name,
                      out_value, 1, api);
}

void bpg_lower_contiguous(bp_graph_t* g) {
  for (uint32_t n = 0; n < g->num_nodes; ++n) {
    bpg_node_t* node = &g->nodes[n];
    if (node->dead || node->op != BP_GRAPH_VIEW_OP(BP_GRAPH_VIEW_CONTIGUOUS)) continue;
    if (bpg_value_dense(&g->values[node->in[0]])) {
      bpg_replace_uses(g, node->out[0], node->in[0]);
      node->dead = 1;
      continue;
    }
    node->op = BP_OP_clone;
    free(node->attrs);
    node->attrs = NULL;
    node->attrs_size = 0;
  }
}

int bpg_views_check(bp_graph_t* g, const int64_t* syms, char* why, size_t cap) {
  for (uint32_t n = 0; n < g->num_nodes; ++n) {
    const bpg_node_t* node = &g->nodes[n];
    if (node->dead || !bpg_is_view(node->op)) continue;
    char label[200];
    bpg_node_label(g, n, label, sizeof(label));
    if (node->attrs == NULL || node->in[0] == BP_GRAPH_NO_VALUE) {
      snprintf(why, cap, "%s: a view without params or input", label);
      return -1;
    }
    bp_tensor_desc_t in, out;
    bpg_value_desc(g, &g->values[node->in[0]], syms, &in);
    memset(&out, 0, sizeof(out));
    out.struct_size = sizeof(out);
    if (bpg_view_infer(node->op, node->attrs, &in, &out) != BP_OK) {
      snprintf(why, cap, "%s: its params do not fit its input: %s", label, bp_status_message());
      return -1;
    }
    bpg_value_t* v = &g->values[node->out[0]];
    int same = v->dtype == out.dtype && v->rank == out.rank;
    for (uint32_t d = 0; same && d < v->rank; ++d) {
      int64_t dim = v->dims[d];
      if (BP_GRAPH_IS_SYM(dim) && syms != NULL) dim = syms[BP_GRAPH_SYM_INDEX(dim)];
      same = dim == out.sizes[d];
    }
    if (!same) {
      snprintf(why, cap, "%s: its output's shape is not what its params give over its input", label);
      return -1;
    }
    v->strided = bpg_is_alias_view(node->op) && !bpg_view_desc_dense(&out);
    memset(v->strides, 0, sizeof(v->strides));
    if (v->strided) memcpy(v->strides, out.strides, sizeof(int64_t) * out.rank);
  }
  return 0;
}

bp_status_t bp_graph_view_run(bp_stream_t* stream, uint32_t view, const bp_graph_view_params_t* params,
                              const bp_tensor_t* input, bp_tensor_t** out) {
  if (stream == NULL || input == NULL || out == NULL) return bpg_error(BP_INVALID_ARGUMENT, "bp_graph_view_run: NULL argument");
  if (!bpg_is_view(BP_GRAPH_VIEW_OP(view))) return bpg_error(BP_INVALID_ARGUMENT, "bp_graph_view_run: view %u is not a graph view", view);
  bp_graph_view_params_t def;
  memset(&def, 0, sizeof(def));
  def.struct_size = sizeof(def);
  if (params != NULL && params->struct_size < BP_GRAPH_VIEW_PARAMS_V1_SIZE) {
    return bpg_error(BP_INVALID_ARGUMENT, "bp_graph_view_run: params->struct_size %u is below %u", params->struct_size,
                     (unsigned)BP_GRAPH_VIEW_PARAMS_V1_SIZE);
  }
  return bpg_view_apply(stream, BP_GRAPH_VIEW_OP(view), params != NULL ? (const void*)params : &def, input, out);
}
