/* libbackplane_graph: the IR and what the passes share. Internal. */
#ifndef BP_COMPILER_GRAPH_INTERNAL_H_
#define BP_COMPILER_GRAPH_INTERNAL_H_

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include "backplane/graph.h"

#define BPG_HIDDEN __attribute__((visibility("hidden")))

/* How a constant's bytes are given. */
enum bpg_const_kind {
  BPG_CONST_VALUES = 1,  /* explicit bytes */
  BPG_CONST_UNIFORM = 2  /* seeded uniform on [lo, hi) */
};

typedef struct bpg_const {
  uint32_t kind;
  uint64_t seed;
  double lo, hi;
  void* data;      /* dense host bytes (VALUES: always; UNIFORM: made on first use) */
  uint64_t size;   /* bytes of data */
} bpg_const_t;

typedef struct bpg_value {
  char* name; /* NULL: printed "%<id>" */
  uint32_t kind;  /* enum bp_graph_value_kind */
  uint32_t dtype;
  uint32_t rank;
  int64_t dims[BP_MAX_RANK];
  uint32_t producer;
  uint32_t out_index;
  bpg_const_t* cst; /* CONSTANT */
  /* A view node's output: its strides in elements (set by inference; the
   * probe sizes' strides while symbols are unbound). Else dense. */
  uint32_t strided;
  int64_t strides[BP_MAX_RANK];
} bpg_value_t;

typedef struct bpg_node {
  uint32_t op;
  char* name; /* NULL when unnamed */
  uint32_t num_in, num_out;
  uint32_t* in;
  uint32_t* out;
  void* attrs; /* NULL = defaults; else attrs_size bytes */
  uint32_t attrs_size;
  uint32_t dead; /* removed by a pass (kept so indices stay stable) */
  uint32_t line; /* text line it came from; 0 when built */
} bpg_node_t;

struct bp_graph {
  char* name;
  bpg_value_t* values;
  uint32_t num_values, cap_values;
  bpg_node_t* nodes;
  uint32_t num_nodes, cap_nodes;
  uint32_t* inputs;
  uint32_t num_inputs, cap_inputs;
  uint32_t* outputs;
  uint32_t num_outputs, cap_outputs;
  char** syms;
  uint32_t num_syms, cap_syms;
  char scratch[32]; /* "%<id>" names handed out by value_info */
  /* Name -> value id, open addressing (UINT32_MAX: empty); rebuilt when
   * stale. A cache inside the graph, so lookups are externally
   * synchronized like every other use of the graph. */
  uint32_t* name_index;
  uint32_t name_cap, name_used;
  int name_stale;
};

/* ---- errors: the core's thread-local message through a failing call ---- */
/* Sets the calling thread's message (via the core) and returns status. */
BPG_HIDDEN bp_status_t bpg_error(bp_status_t status, const char* fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* ---- IR helpers (graph_ir.c) ---- */
BPG_HIDDEN bp_status_t bpg_clone(const bp_graph_t* g, bp_graph_t** out);
BPG_HIDDEN const char* bpg_value_name(const bp_graph_t* g, uint32_t v, char* buf, size_t cap);
BPG_HIDDEN const char* bpg_node_label(const bp_graph_t* g, uint32_t n, char* buf, size_t cap);
BPG_HIDDEN bp_status_t bpg_new_value(bp_graph_t* g, const char* name, uint32_t kind,
                                     uint32_t* out);
BPG_HIDDEN bp_status_t bpg_const_materialize(bpg_value_t* v);
BPG_HIDDEN int64_t bpg_value_numel(const bpg_value_t* v); /* concrete dims only; -1 if symbolic */
BPG_HIDDEN uint64_t bpg_value_bytes(const bpg_value_t* v);
/* 1 for the dtypes a constant's text form writes as values(...) (f32 f64 i8
 * i16 i32 i64 u8 bool); the others are bytes(...). */
BPG_HIDDEN int bpg_text_values_dtype(uint32_t dtype);
BPG_HIDDEN int bpg_attrs_equal(const bpg_node_t* a, const bpg_node_t* b);
/* Size of op's attribute struct (0: bp_no_attrs_t / none). */
BPG_HIDDEN uint32_t bpg_op_attrs_size(uint32_t op);
/* The core's info of an op (bp_op_get_info), cached for the process; NULL
 * for an unknown id. The pointer stays valid; never written after. */
BPG_HIDDEN const bp_op_info_t* bpg_op_info(uint32_t op);
/* Replaces every use of `from` (node inputs, graph outputs) by `to`. */
BPG_HIDDEN void bpg_replace_uses(bp_graph_t* g, uint32_t from, uint32_t to);
/* Use counts per value (nodes that are not dead, plus graph outputs). */
BPG_HIDDEN bp_status_t bpg_use_counts(const bp_graph_t* g, uint32_t** out_counts);
/* Fills a descriptor (dense strides) from a value with symbols bound by
 * `syms` (NULL: probe sizes, see graph_infer.c). */
BPG_HIDDEN void bpg_value_desc(const bp_graph_t* g, const bpg_value_t* v, const int64_t* syms,
                               bp_tensor_desc_t* d);

/* bp_graph_add_node without the check that op_id is not a view (views
 * come through bp_graph_add_view); `api` prefixes messages. */
BPG_HIDDEN bp_status_t bpg_add_node(bp_graph_t* g, uint32_t op_id, const uint32_t* inputs, uint32_t num_inputs,
                                    const void* attrs, const char* name, uint32_t* out_values,
                                    uint32_t num_outputs, const char* api);

/* ---- attributes (graph_attrs.c) ---- */
typedef struct bpg_sbuf {
  char* p;
  size_t len, cap;
  int oom;
} bpg_sbuf_t;
BPG_HIDDEN void bpg_sbuf_printf(bpg_sbuf_t* s, const char* fmt, ...)
    __attribute__((format(printf, 2, 3)));
BPG_HIDDEN void bpg_sbuf_double(bpg_sbuf_t* s, double v); /* shortest exact form */
/* Appends " {a=1, b=[2, 3]}" for a node's attrs (nothing when NULL). */
BPG_HIDDEN void bpg_attrs_print(bpg_sbuf_t* s, uint32_t op, const void* attrs);
/* Sets field `key` of `attrs` (the op's struct, zeroed by the caller) from
 * the text value `val` (one token or a [..] list). Returns 0, -1 (a bad
 * value) or -2 (no such attribute) with a message in err. */
BPG_HIDDEN int bpg_attrs_set(uint32_t op, void* attrs, const char* key, const char* val,
                             char* err, size_t err_cap);

/* ---- view nodes (graph_view.c) ---- */
/* 1 for BP_GRAPH_VIEW_OP of a graph view (contiguous included). */
BPG_HIDDEN int bpg_is_view(uint32_t op);
/* 1 for a view whose output aliases its input (every view but contiguous). */
BPG_HIDDEN int bpg_is_alias_view(uint32_t op);
/* BP_GRAPH_VIEW_OP(kind) of a text name ("permute"), else BP_OP_INVALID. */
BPG_HIDDEN uint32_t bpg_view_from_name(const char* name);
/* The text name of a node's op (an op or a view); "?" when unknown. Static. */
BPG_HIDDEN const char* bpg_node_op_name(uint32_t op);
/* The view's output descriptor from its input's (the core's rules). */
BPG_HIDDEN bp_status_t bpg_view_infer(uint32_t op, const void* params, const bp_tensor_desc_t* in,
                                      bp_tensor_desc_t* out);
/* 1 when the descriptor is row-major dense. */
BPG_HIDDEN int bpg_view_desc_dense(const bp_tensor_desc_t* d);
/* Runs the view on a tensor: a new tensor over in's buffer (contiguous: in
 * itself when dense, else a dense clone on `stream`). */
BPG_HIDDEN bp_status_t bpg_view_apply(bp_stream_t* stream, uint32_t op, const void* params, const bp_tensor_t* in,
                                      bp_tensor_t** out);
BPG_HIDDEN void bpg_view_params_print(bpg_sbuf_t* s, uint32_t op, const void* params);
BPG_HIDDEN int bpg_view_params_set(uint32_t op, void* params, const char* key, const char* val, char* err,
                                   size_t cap);
/* Loading: every live view node's params checked against its input (the
 * stored shapes must be what inference gives; strides set). 0, or -1 with
 * the reason in why. */
BPG_HIDDEN int bpg_views_check(bp_graph_t* g, const int64_t* syms, char* why, size_t cap);
/* `contiguous` nodes become clone (a strided input) or go (a dense one). */
BPG_HIDDEN void bpg_lower_contiguous(bp_graph_t* g);
/* 1 when value v is laid out dense (not a strided view). */
BPG_HIDDEN int bpg_value_dense(const bpg_value_t* v);

/* ---- inference (graph_infer.c) ---- */
/* Infers node outputs with symbols bound to `syms` (NULL: symbolic). */
BPG_HIDDEN bp_status_t bpg_infer(bp_graph_t* g, const int64_t* syms);

/* ---- passes (passes/) ---- */
BPG_HIDDEN bp_status_t bpg_pass_dce(bp_graph_t* g, uint32_t* out_removed);
BPG_HIDDEN bp_status_t bpg_pass_cse(bp_graph_t* g, uint32_t* out_merged);
BPG_HIDDEN bp_status_t bpg_pass_const_fold(bp_graph_t* g, bp_context_t* ctx, uint32_t* out_folded);
BPG_HIDDEN bp_status_t bpg_pass_canonicalize(bp_graph_t* g, uint32_t* out_changed);
/* The view and layout rewrites of canonicalize (passes/canonicalize_views.c); adds to *changed. */
BPG_HIDDEN bp_status_t bpg_canon_views(bp_graph_t* g, uint32_t* changed);

#endif /* BP_COMPILER_GRAPH_INTERNAL_H_ */
