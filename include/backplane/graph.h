/* backplane graph compiler (libbackplane_graph): graphs of ops, compiled
 * into executables placed across devices.
 *
 * A graph holds values (a dtype and a shape whose dims may be symbols bound
 * at run time) and nodes (an op id from ops.def, its attribute struct from
 * ops.h, input and output values, an optional name). Values are graph
 * inputs, constants (host data) or node outputs. Build a graph with the
 * builder calls below or parse the text format (.bpg, docs/graph.md).
 *
 * bp_graph_compile runs the passes (dead code, constant folding, common
 * subexpressions, placement, copies, memory planning; docs/graph.md) and
 * gives an executable that runs with input tensors and reruns without
 * recompiling. bp_graph_cache_t compiles once per guard key (input dtypes,
 * shapes up to symbolic dims, devices) and counts recompiles.
 *
 * Conventions are backplane.h's: every call returns a status, results in
 * out_ parameters, messages by bp_status_message(). Threading: a graph is
 * externally synchronized (one thread builds it); an executable may be run
 * by one thread at a time; distinct objects are independent.
 */
#ifndef BACKPLANE_GRAPH_H_
#define BACKPLANE_GRAPH_H_

#include "backplane/backplane.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct bp_graph bp_graph_t;
typedef struct bp_graph_exec bp_graph_exec_t;
typedef struct bp_graph_cache bp_graph_cache_t;

/* Value ids are dense from 0 in creation order. BP_GRAPH_NO_VALUE marks an
 * absent optional operand. */
#define BP_GRAPH_NO_VALUE UINT32_MAX
/* A symbolic dim in a shape: BP_GRAPH_SYM(k) for symbol k (from
 * bp_graph_add_symbol). Concrete dims are >= 0. */
#define BP_GRAPH_SYM(k) (-(int64_t)(k) - 1)
#define BP_GRAPH_IS_SYM(d) ((d) < 0)
#define BP_GRAPH_SYM_INDEX(d) ((uint32_t)(-(d) - 1))

enum bp_graph_value_kind {
  BP_GRAPH_VALUE_INPUT = 1,
  BP_GRAPH_VALUE_CONSTANT = 2,
  BP_GRAPH_VALUE_NODE = 3 /* an output of a node */
};

typedef struct bp_graph_value_info {
  uint32_t struct_size;
  uint32_t kind;  /* enum bp_graph_value_kind */
  uint32_t dtype; /* BP_DTYPE_INVALID until inferred */
  uint32_t rank;
  int64_t dims[BP_MAX_RANK]; /* >= 0, or BP_GRAPH_SYM(k) */
  const char* name;          /* never NULL ("%<id>" when unnamed); valid while the graph lives */
  uint32_t producer;         /* node index (NODE), input index (INPUT), else 0 */
  uint32_t output_index;     /* NODE: which output of the producer */
} bp_graph_value_info_t;
#define BP_GRAPH_VALUE_INFO_V1_SIZE (offsetof(bp_graph_value_info_t, output_index) + sizeof(uint32_t))

typedef struct bp_graph_node_info {
  uint32_t struct_size;
  uint32_t op_id;
  const char* name; /* "" when unnamed */
  uint32_t num_inputs;
  uint32_t num_outputs;
  const uint32_t* inputs;  /* value ids (BP_GRAPH_NO_VALUE: absent) */
  const uint32_t* outputs; /* value ids */
  const void* attrs;       /* NULL: the op's defaults */
} bp_graph_node_info_t;
#define BP_GRAPH_NODE_INFO_V1_SIZE (offsetof(bp_graph_node_info_t, attrs) + sizeof(const void*))

/* ---- building ------------------------------------------------------------ */
BP_API bp_status_t bp_graph_create(const char* name, bp_graph_t** out_graph); /* name may be NULL */
BP_API void bp_graph_release(bp_graph_t* graph);
/* A symbol for a dim bound at run time (a batch or sequence length). */
BP_API bp_status_t bp_graph_add_symbol(bp_graph_t* graph, const char* name, int64_t* out_dim);
/* A graph input; name required and unique among values. */
BP_API bp_status_t bp_graph_add_input(bp_graph_t* graph, const char* name, uint32_t dtype,
                                      uint32_t rank, const int64_t* dims, uint32_t* out_value);
/* A constant: dense row-major host bytes of the given dtype and concrete
 * shape, copied (the caller keeps `data`). name may be NULL. */
BP_API bp_status_t bp_graph_add_constant(bp_graph_t* graph, const char* name, uint32_t dtype,
                                         uint32_t rank, const int64_t* dims, const void* data,
                                         uint64_t size, uint32_t* out_value);
/* A constant filled from a seeded uniform distribution on [lo, hi) (float
 * dtypes) -- weights for tests and demos, stored as the recipe, not the
 * bytes, so the text format stays small. */
BP_API bp_status_t bp_graph_add_constant_uniform(bp_graph_t* graph, const char* name,
                                                 uint32_t dtype, uint32_t rank,
                                                 const int64_t* dims, uint64_t seed, double lo,
                                                 double hi, uint32_t* out_value);
/* A node. inputs: the flat operand list as for bp_op_run (a list operand
 * expanded in place; BP_GRAPH_NO_VALUE for an absent optional). attrs: the
 * op's attribute struct (copied; NULL = defaults). The node's outputs get
 * new values, written to out_values (num_outputs entries, the op's count);
 * their dtypes and shapes come from bp_graph_infer. name may be NULL. */
BP_API bp_status_t bp_graph_add_node(bp_graph_t* graph, uint32_t op_id, const uint32_t* inputs,
                                     uint32_t num_inputs, const void* attrs, const char* name,
                                     uint32_t* out_values, uint32_t num_outputs);
/* View nodes: a node whose output shares its input's buffer (no copy, no
 * allocation), as the tensor functions bp_tensor_view, permute, expand,
 * slice, select, squeeze and unsqueeze give it; `contiguous` materializes
 * (a dense copy, or the value itself when it is dense). A view node's op
 * id (bp_graph_node_info) is BP_GRAPH_VIEW_OP(view) and its attrs a
 * bp_graph_view_params_t. */
#define BP_GRAPH_VIEW_CONTIGUOUS 0xFFFFu
#define BP_GRAPH_VIEW_OP(view) (0x40000000u + (uint32_t)(view))
typedef struct bp_graph_view_params {
  uint32_t struct_size;
  uint32_t rank;               /* entries of sizes (view, expand) or dims (permute) */
  int64_t sizes[BP_MAX_RANK];  /* view, expand: the shape (one -1 inferred for view, -1 keeps a
                                  size for expand); permute: the input dim of each output dim */
  int64_t dim;                 /* slice, select, squeeze, unsqueeze (negative wraps) */
  int64_t start, end, step;    /* slice (Python rules); select: start is the index */
} bp_graph_view_params_t;
#define BP_GRAPH_VIEW_PARAMS_V1_SIZE (offsetof(bp_graph_view_params_t, step) + sizeof(int64_t))
/* A view node over `input`. view: BP_VIEW_view, BP_VIEW_permute,
 * BP_VIEW_expand, BP_VIEW_slice, BP_VIEW_select, BP_VIEW_squeeze,
 * BP_VIEW_unsqueeze (backplane.h's view table) or BP_GRAPH_VIEW_CONTIGUOUS
 * (params may be NULL). params is copied. Its shape comes from
 * bp_graph_infer, by the tensor function's rules. */
BP_API bp_status_t bp_graph_add_view(bp_graph_t* graph, uint32_t view, uint32_t input,
                                     const bp_graph_view_params_t* params, const char* name,
                                     uint32_t* out_value);
/* Runs view `view` (as for bp_graph_add_view) on a tensor, as a view node
 * runs: a new tensor over input's buffer (contiguous: input itself when
 * it is dense, else a dense copy enqueued on `stream`). For applications
 * that run a graph's nodes themselves. */
BP_API bp_status_t bp_graph_view_run(bp_stream_t* stream, uint32_t view, const bp_graph_view_params_t* params,
                                     const bp_tensor_t* input, bp_tensor_t** out);
/* Marks a value as a graph output (in call order). */
BP_API bp_status_t bp_graph_add_output(bp_graph_t* graph, uint32_t value);
/* Names a value (unique among values). */
BP_API bp_status_t bp_graph_set_value_name(bp_graph_t* graph, uint32_t value, const char* name);

/* ---- inspecting ------------------------------------------------------------ */
BP_API uint32_t bp_graph_value_count(const bp_graph_t* graph);
BP_API uint32_t bp_graph_node_count(const bp_graph_t* graph);
BP_API uint32_t bp_graph_input_count(const bp_graph_t* graph);
BP_API uint32_t bp_graph_output_count(const bp_graph_t* graph);
BP_API bp_status_t bp_graph_input(const bp_graph_t* graph, uint32_t index, uint32_t* out_value);
BP_API bp_status_t bp_graph_output(const bp_graph_t* graph, uint32_t index, uint32_t* out_value);
BP_API bp_status_t bp_graph_value_info(const bp_graph_t* graph, uint32_t value,
                                       bp_graph_value_info_t* out_info);
BP_API bp_status_t bp_graph_node_info(const bp_graph_t* graph, uint32_t node,
                                      bp_graph_node_info_t* out_info);
BP_API uint32_t bp_graph_symbol_count(const bp_graph_t* graph);
/* The name of symbol `index` (valid while the graph lives). */
BP_API bp_status_t bp_graph_symbol_name(const bp_graph_t* graph, uint32_t index, const char** out_name);
/* NOT_FOUND when no value has that name. */
BP_API bp_status_t bp_graph_find_value(const bp_graph_t* graph, const char* name,
                                       uint32_t* out_value);

/* Shape and dtype inference of every node (the eager ops' rules:
 * bp_op_infer_desc), then verification: every node's operands exist and
 * are defined before use, outputs exist, dtypes and shapes are accepted by
 * the op. Errors name the node (its name, or "#<index>") and the operand:
 * "node 'fc1' (#3, matmul): input 'other': ...". Symbolic dims are carried
 * through (an inferred dim that follows from a symbol stays that symbol). */
BP_API bp_status_t bp_graph_infer(bp_graph_t* graph);

/* ---- text format (.bpg; grammar in docs/graph.md) ------------------------- */
/* Parses `size` bytes of text. Errors: INVALID_ARGUMENT with
 * "<line>:<column>: <what>" (and the node and operand for semantic errors).
 * The graph is inferred and verified. */
BP_API bp_status_t bp_graph_parse(const char* text, size_t size, bp_graph_t** out_graph);
/* Reads and parses a file (the message starts with the path). */
BP_API bp_status_t bp_graph_load_file(const char* path, bp_graph_t** out_graph);
/* Prints the graph. Exact round trip: parsing the text and printing the
 * result gives the same bytes. *out_text is malloc'd and NUL-terminated;
 * free it with bp_graph_text_free. */
BP_API bp_status_t bp_graph_print(const bp_graph_t* graph, char** out_text, size_t* out_size);
BP_API void bp_graph_text_free(char* text);

/* Runs the graph node by node with bp_op_run on `stream`'s device, with no
 * pass at all: the reference that compiled results are checked against.
 * inputs/outputs as for bp_graph_exec_run. Blocking. */
BP_API bp_status_t bp_graph_run_eager(bp_stream_t* stream, const bp_graph_t* graph,
                                      const bp_tensor_t* const* inputs, uint32_t num_inputs,
                                      bp_tensor_t** outputs, uint32_t num_outputs);

/* ---- compiling -------------------------------------------------------------- */
enum bp_graph_policy_flags {
  /* With prefer_device set: a node the preferred device cannot run is a
   * compile error that lists every such node and why, instead of running
   * on another device. */
  BP_GRAPH_FORBID_FALLBACK = 1u << 0,
  /* Passes that can be turned off (for tests and measurements). */
  BP_GRAPH_NO_MEMPLAN = 1u << 1, /* every intermediate gets its own buffer */
  BP_GRAPH_NO_FOLD = 1u << 2,    /* no constant folding */
  BP_GRAPH_NO_CSE = 1u << 3,
  BP_GRAPH_NO_DCE = 1u << 4,
  BP_GRAPH_NO_FUSE = 1u << 5,
  BP_GRAPH_NO_ISLANDS = 1u << 6, /* keep small islands where the costs put them */
  /* Decompose every node that has a decomposition, not only those no
   * device runs (to compare both forms). */
  BP_GRAPH_DECOMPOSE_ALL = 1u << 7,
  /* No regions compiled through the plugins' exec tables: every node runs
   * as its own op (fused-op rewrites still apply unless NO_FUSE). */
  BP_GRAPH_NO_REGIONS = 1u << 8,
  /* One stream per device: independent steps are not spread over more. */
  BP_GRAPH_ONE_STREAM = 1u << 9,
  BP_GRAPH_NO_CANONICALIZE = 1u << 10 /* no canonicalization (identity copies, operand order) */
};

/* A node pinned to a device by name. */
typedef struct bp_graph_pin {
  const char* node_name;
  bp_device_t* device;
} bp_graph_pin_t;

typedef struct bp_graph_compile_options {
  uint32_t struct_size;
  uint32_t flags;           /* enum bp_graph_policy_flags */
  bp_device_t* const* devices; /* candidate devices, in the user's order (ties) */
  uint32_t num_devices;     /* 0: every device of `context` */
  uint32_t num_pins;
  const bp_graph_pin_t* pins;
  bp_device_t* prefer_device; /* NULL: none */
  /* Per-device memory limit in bytes for placement and planning (0: the
   * device's reported memory). Lower it to force a graph across devices. */
  uint64_t memory_limit_bytes;
  /* Concrete sizes of the graph's symbols for compiling, in symbol order
   * (NULL: taken from the first run's inputs; bp_graph_cache does that). */
  const int64_t* symbol_values;
  uint32_t num_symbol_values;
  uint32_t reserved0;
} bp_graph_compile_options_t;
#define BP_GRAPH_COMPILE_OPTIONS_V1_SIZE \
  (offsetof(bp_graph_compile_options_t, reserved0) + sizeof(uint32_t))

/* Compiles `graph` (it is not modified; the executable keeps its own copy)
 * for devices of `context`. The graph's symbols must be bound by
 * options->symbol_values. Fails with the pass's message: placement errors
 * name the nodes, memory planning names the device, its limit and the peak. */
BP_API bp_status_t bp_graph_compile(bp_context_t* context, const bp_graph_t* graph,
                                    const bp_graph_compile_options_t* options,
                                    bp_graph_exec_t** out_exec);
BP_API void bp_graph_exec_release(bp_graph_exec_t* exec);

/* Runs the executable. inputs: one tensor per graph input, on any device
 * (copied to where the graph needs them), dtypes and shapes matching the
 * compiled ones (FAILED_PRECONDITION naming the input otherwise).
 * outputs: one slot per graph output; each receives a new reference to a
 * tensor on the device that computed it. Blocking: returns when the results
 * are ready (or with the first error of the run). */
BP_API bp_status_t bp_graph_exec_run(bp_graph_exec_t* exec, const bp_tensor_t* const* inputs,
                                     uint32_t num_inputs, bp_tensor_t** outputs,
                                     uint32_t num_outputs);

typedef struct bp_graph_exec_stats {
  uint32_t struct_size;
  uint32_t num_steps;     /* ops, fused regions and copies run per call */
  uint32_t num_nodes;     /* nodes left after the passes */
  uint32_t num_regions;   /* fused regions */
  uint32_t num_copies;    /* copies between devices per run */
  uint32_t num_devices;   /* devices that run at least one node */
  uint64_t copy_bytes;    /* bytes copied between devices per run */
  uint64_t peak_bytes;    /* planned peak of intermediates, all devices */
  uint64_t unplanned_bytes; /* the same intermediates, one buffer each */
  double estimated_ns;    /* the cost model's time for one run */
  double measured_ns;     /* wall time of the last run (0 before any) */
} bp_graph_exec_stats_t;
#define BP_GRAPH_EXEC_STATS_V1_SIZE (offsetof(bp_graph_exec_stats_t, measured_ns) + sizeof(double))
BP_API bp_status_t bp_graph_exec_get_stats(const bp_graph_exec_t* exec,
                                           bp_graph_exec_stats_t* out_stats);

enum bp_graph_report_format { BP_GRAPH_REPORT_JSON = 1, BP_GRAPH_REPORT_TEXT = 2 };
/* The placement report (docs/graph.md): nodes per device with the reason
 * for each choice, fused regions, copies and bytes, estimated and measured
 * time, peak memory, and a warning line when a requested device got few
 * nodes. *out_text: free with bp_graph_text_free. */
BP_API bp_status_t bp_graph_exec_report(const bp_graph_exec_t* exec, uint32_t format,
                                        char** out_text);

/* Profiling runs synchronize after every step and record its time (the
 * report's measured column). Off by default. */
BP_API bp_status_t bp_graph_exec_set_profiling(bp_graph_exec_t* exec, int on);

/* ---- guarded cache --------------------------------------------------------- */
/* Executables keyed by guards, as torch.compile's: each input's dtype, its
 * concrete dims and its device. A run whose guards match reuses its
 * executable (a hit, no compile). Symbolic dims are not guarded: a new
 * binding of the graph's symbols is a rebind -- the compiled graph and its
 * placement are kept, shapes, copies and the memory plan are redone -- not
 * a recompile. A failed guard (dtype, concrete dim, device) compiles again
 * from the graph with the inputs' dtypes and dims (counted). `options` is
 * copied (symbol_values ignored). Externally synchronized. */
BP_API bp_status_t bp_graph_cache_create(bp_context_t* context, const bp_graph_t* graph,
                                         const bp_graph_compile_options_t* options,
                                         bp_graph_cache_t** out_cache);
BP_API void bp_graph_cache_release(bp_graph_cache_t* cache);
/* bp_graph_exec_run with the executable the guards select. */
BP_API bp_status_t bp_graph_cache_run(bp_graph_cache_t* cache, const bp_tensor_t* const* inputs,
                                      uint32_t num_inputs, bp_tensor_t** outputs,
                                      uint32_t num_outputs);
/* The executable the guards select for these inputs (compiling or
 * rebinding on a miss); borrowed: lives as long as the cache. Fails when
 * the inputs cannot be the graph's (count, rank, a symbol bound to two
 * sizes) or when the compile fails. */
BP_API bp_status_t bp_graph_cache_lookup(bp_graph_cache_t* cache, const bp_tensor_t* const* inputs,
                                         uint32_t num_inputs, bp_graph_exec_t** out_exec);
typedef struct bp_graph_cache_stats {
  uint32_t struct_size;
  uint32_t entries;  /* executables held */
  uint64_t compiles; /* full compiles: the first, and every failed guard */
  uint64_t rebinds;  /* new symbol values of a compiled graph */
  uint64_t hits;     /* runs whose guards matched */
} bp_graph_cache_stats_t;
#define BP_GRAPH_CACHE_STATS_V1_SIZE (offsetof(bp_graph_cache_stats_t, hits) + sizeof(uint64_t))
BP_API bp_status_t bp_graph_cache_get_stats(const bp_graph_cache_t* cache,
                                            bp_graph_cache_stats_t* out_stats);

/* ---- ahead of time ----------------------------------------------------------- */
/* Writes the executable to `path` (written to "<path>.tmp" and renamed).
 * The file (docs/graph.md) carries a magic, the format version, the ABI
 * version, the devices (name, plugin name and version, uuid, model), the
 * options, the compiled graph in the text format, the placement and a
 * checksum. */
BP_API bp_status_t bp_graph_exec_save(const bp_graph_exec_t* exec, const char* path);
/* Loads an executable without compiling: the passes, support claims and
 * cost model are skipped (the file's placement is used); copies, the
 * memory plan and constants are made as in a compile. Rejected with a
 * reason, never trusted: not such a file, truncated or corrupt
 * (DATA_LOSS); another format or ABI version, a device missing, another
 * plugin version or another physical device (FAILED_PRECONDITION). The
 * caller then compiles. */
BP_API bp_status_t bp_graph_exec_load(bp_context_t* context, const char* path,
                                      bp_graph_exec_t** out_exec);
/* The same from memory (the fuzzer's entry). */
BP_API bp_status_t bp_graph_exec_load_bytes(bp_context_t* context, const void* data,
                                            uint64_t size, bp_graph_exec_t** out_exec);

/* The graph an executable runs (after its passes; borrowed). */
BP_API const bp_graph_t* bp_graph_exec_graph(const bp_graph_exec_t* exec);

#ifdef __cplusplus
}
#endif
#endif /* BACKPLANE_GRAPH_H_ */
