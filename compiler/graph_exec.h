/* libbackplane_graph: the executable and what placement, copies, memory
 * planning and running share. Internal.
 */
#ifndef BP_COMPILER_GRAPH_EXEC_H_
#define BP_COMPILER_GRAPH_EXEC_H_

#include "graph_internal.h"
#include "backplane/region.h"

#define BPG_MAX_DEVICES 16
#define BPG_ALIGN 256u
#define BPG_NO_OFFSET UINT64_MAX
#define BPG_MAX_STREAMS 4 /* per device: independent steps may run on up to this many */

typedef struct bpg_dev {
  bp_device_t* device;
  bp_stream_t* stream;    /* stream 0: copies, inputs, constants and every dependent chain */
  bp_stream_t* extra[BPG_MAX_STREAMS - 1]; /* streams 1..: independent steps (made on the first run) */
  bp_event_t* start_ev;   /* recorded on stream 0 once inputs and constants are staged; the others wait */
  uint32_t num_streams;   /* streams the steps use (>= 1) */
  uint32_t ws_streams;    /* streams that run a region with a workspace (one workspace each) */
  bp_buffer_t* arena;     /* planned intermediates; NULL until the first run */
  uint64_t arena_bytes;   /* planned peak */
  uint64_t ws_bytes;      /* regions' workspace: the largest one here (regions of a stream run one at a time) */
  bp_buffer_t* ws[BPG_MAX_STREAMS]; /* that workspace per stream; NULL until the first run */
  uint64_t const_bytes;   /* constants uploaded here */
  uint64_t limit_bytes;   /* capacity planning checks */
  uint64_t place_limit;   /* what placement assumes (lowered when the plan did not fit) */
  uint64_t placed_bytes;  /* placement: bytes of values placed here still alive at the node placed */
  uint32_t num_nodes;     /* nodes placed here */
  double peak_flops_f32, bandwidth, launch_ns, link_bandwidth; /* roofline figures */
  int default_figures;    /* the device reported none: the model assumed defaults */
} bpg_dev_t;

/* A buffer the run needs: value v on device dev. */
typedef struct bpg_slot {
  uint32_t value;
  uint32_t dev;
  uint32_t def_step;   /* step that writes it */
  uint32_t last_step;  /* last step that reads it */
  uint64_t bytes;
  uint64_t offset;     /* in the device's arena; BPG_NO_OFFSET: allocated per run */
  uint32_t inplace_of; /* slot whose memory it reuses (UINT32_MAX: none) */
  uint32_t alias_of;   /* a view node's output: the slot whose buffer it views (UINT32_MAX: none) */
  uint32_t is_output;  /* a graph output: a fresh tensor per run (the caller keeps it) */
  uint32_t whole_run;  /* a step on an extra stream touches it: planned alive for the whole run */
  bp_tensor_t* planned; /* view of the arena at offset (made on the first run) */
  bp_tensor_t* t;       /* this run's tensor (a reference) */
} bpg_slot_t;

/* One fusion the fuse pass made (for the report). */
#define BPG_MAX_FUSIONS 256
typedef struct bpg_fusion {
  uint32_t first, second; /* node indices: the earlier one died, the later one is the fused node */
  uint32_t ops[2];        /* their ops before fusion */
  char kind[16];          /* "epilogue", "pattern" */
  char as[48];            /* what the fused node is */
} bpg_fusion_t;

/* A region compiled by a device's plugin through its exec table: nodes of
 * one device, convex, run by one bp_region_launch. Arguments are graph
 * values: the inputs it reads from outside, then the outputs read outside
 * it (or graph outputs); values only its own nodes read have no buffer. */
typedef struct bpg_region {
  uint32_t dev;
  uint32_t kind;       /* enum bp_region_kind it was compiled as */
  uint32_t num_nodes;
  uint32_t* nodes;     /* ascending node indices (owned) */
  uint32_t num_inputs, num_outputs;
  uint32_t* args;      /* value ids, inputs then outputs (owned) */
  bp_region_t* region; /* one reference */
  uint64_t workspace_bytes;
  uint32_t num_aliases;
  uint32_t alias_out[8], alias_in[8]; /* donation pairs (argument indices) */
  uint32_t loaded;     /* AOT: 1 loaded from its bytes, 2 recompiled (stale or corrupt bytes) */
  double est_ns;       /* the plugin's estimate, else the nodes' model */
} bpg_region_t;

/* A region a plugin refused (it was split), for the report. */
#define BPG_MAX_REFUSALS 64
typedef struct bpg_refusal {
  uint32_t dev;
  uint32_t first, num_nodes; /* first node and size of the refused region */
  uint32_t reason;           /* enum bp_support_reason */
  char message[160];
} bpg_refusal_t;

/* Placement's claims (passes/place_claims.c): each device's answer to the
 * whole graph (bp_device_claim_region), kept for the report. */
typedef struct bpg_cgroup {
  uint32_t dev;        /* the device that claimed it */
  uint32_t num_nodes;
  uint32_t* nodes;     /* ascending node indices (owned) */
  double cost_ns;      /* the group's time on dev; < 0 until asked */
  uint32_t cost_src;   /* enum bpg_cost_src */
  uint32_t convex;     /* 0: not convex, offered node by node */
  uint32_t placed;     /* 1: placed whole on dev */
} bpg_cgroup_t;

enum bpg_cost_src { BPG_COST_REGION = 1, BPG_COST_NODE_ESTIMATES = 2, BPG_COST_ROOFLINE = 3 };

typedef struct bpg_claims {
  uint32_t num_nodes, num_devs;
  uint8_t* ok;          /* [n * num_devs + d]: d takes node n (claimed, and runs it alone) */
  char (*why)[128];     /* [n * num_devs + d]: why d does not ("" when it does) */
  uint32_t* grp;        /* [n * num_devs + d]: n's group on d of two or more nodes (UINT32_MAX: none) */
  uint32_t* node_group; /* per node: the group it was placed in whole (UINT32_MAX: none) */
  uint8_t* queried;     /* per node: 1 when not offered in claims (a view, or it reads a strided view): the support query answered */
  bpg_cgroup_t* groups;
  uint32_t num_groups;
  uint8_t by_query[BPG_MAX_DEVICES]; /* 1: the device's claim failed; its per-node support answers were used */
  char query_why[BPG_MAX_DEVICES][128]; /* why its claim failed */
} bpg_claims_t;

enum bpg_step_kind { BPG_STEP_NODE = 1, BPG_STEP_COPY = 2, BPG_STEP_REGION = 3 };

typedef struct bpg_step {
  uint32_t kind;
  uint32_t node;      /* NODE; REGION: the region's index */
  uint32_t dev;       /* NODE: where it runs; COPY: the destination */
  uint32_t src_slot;  /* COPY */
  uint32_t dst_slot;  /* COPY */
  uint32_t* in_slots; /* NODE: per input (UINT32_MAX absent); REGION: per argument; points into exec->slot_refs */
  uint32_t* out_slots;
  double est_ns;      /* the cost model's time */
  double measured_ns; /* last profiled run */
  uint32_t stream;    /* NODE, REGION: stream index on its device (passes/streams.c); COPY: 0 */
  uint32_t signals;   /* a step on another stream of the device reads its outputs: ev_done is recorded */
  bp_event_t* ev_done; /* recorded after the step on its stream when `signals` */
  bp_event_t* ev_src; /* COPY: recorded on the source stream after the copy */
  bp_event_t* ev_dst; /* COPY: recorded on the destination stream before it */
} bpg_step_t;

struct bp_graph_exec {
  bp_context_t* ctx;
  bp_graph_t* g;       /* the compiled graph (passes applied, dims concrete) */
  bp_graph_t* g_sym;   /* the same before the symbols were bound (rebinding, saving) */
  int64_t* syms;       /* bound symbol values */
  uint32_t flags;
  uint64_t limit_option; /* options.memory_limit_bytes (0: the devices') */
  uint32_t over_dev;      /* memplan: the device over its limit (UINT32_MAX: none) */
  uint64_t over_bytes;    /* memplan: by how much */
  bpg_dev_t devs[BPG_MAX_DEVICES];
  uint32_t num_devs;
  uint32_t* node_dev;      /* per node */
  char (*node_reason)[160]; /* per node: why it runs where it does */
  uint32_t* value_home;    /* per value: device of its home slot (UINT32_MAX: none) */
  double* est_cost;        /* placement: per node and device, the plugin's estimate in ns (0: none) */
  bpg_claims_t* claims;    /* placement's claims (NULL: none asked, e.g. a rebind or a loaded file) */
  uint32_t est_nodes;      /* nodes est_cost covers */
  bpg_slot_t* slots;
  uint32_t num_slots, cap_slots;
  uint32_t* home_slot;     /* per value: slot on its home device (UINT32_MAX: none) */
  bpg_step_t* steps;
  uint32_t num_steps, cap_steps;
  uint32_t* slot_refs;     /* in_slots/out_slots storage */
  uint32_t num_refs;
  bp_tensor_t** const_tensors; /* per slot of a constant: uploaded once */
  uint32_t num_copies;
  uint64_t copy_bytes;
  uint64_t unplanned_bytes;
  uint32_t num_regions;
  bpg_region_t* regions;   /* compiled regions (passes/regions.c) */
  uint32_t num_cregions;
  uint32_t* node_region;   /* per node: its region (UINT32_MAX: runs alone) */
  uint32_t* order;         /* live nodes in run order, each region's nodes together (NULL: index order) */
  uint32_t num_order;
  bpg_refusal_t refusals[BPG_MAX_REFUSALS];
  uint32_t num_refusals;
  bpg_fusion_t fusions[BPG_MAX_FUSIONS];
  uint32_t num_fusions;
  double est_ns;
  double measured_ns;
  uint32_t passes_removed, passes_merged, passes_folded, islands_moved, decomposed;
  uint32_t passes_canonical; /* canonicalize's rewrites (not kept in executable files) */
  double compile_ms;
  int profile; /* synchronize after each step and time it */
};

/* Placement (passes/place.c): fills node_dev and node_reason. */
BPG_HIDDEN bp_status_t bpg_pass_place(bp_graph_exec_t* x, const bp_graph_compile_options_t* o);
/* Cost model (passes/place.c): the node's time on device d, in ns. */
BPG_HIDDEN double bpg_node_cost(const bp_graph_exec_t* x, uint32_t n, uint32_t d);
BPG_HIDDEN double bpg_copy_cost(const bp_graph_exec_t* x, uint64_t bytes, uint32_t from, uint32_t to);
/* The support answer of node n's device d at its concrete shapes (passes/place.c). */
BPG_HIDDEN bp_status_t bpg_claim(const bp_graph_exec_t* x, uint32_t n, uint32_t d, bp_support_t* out);
/* The plugin's time for node n on device d in ns, 0 when it gives none (passes/place.c). */
BPG_HIDDEN double bpg_node_estimate(const bp_graph_exec_t* x, uint32_t n, uint32_t d);
/* Claims (passes/place_claims.c): every device is offered the whole graph
 * (bp_device_claim_region; the per-node support query where the claim
 * fails); fills x->claims and the plugins' per-node estimates. */
BPG_HIDDEN bp_status_t bpg_claims_gather(bp_graph_exec_t* x);
/* The time of claimed group `gi` on its device in ns: the plugin's estimate
 * for the compiled region, else the sum of its nodes' costs (cached). */
BPG_HIDDEN double bpg_claims_group_cost(bp_graph_exec_t* x, uint32_t gi);
BPG_HIDDEN void bpg_claims_free(bpg_claims_t* c);
/* A deep copy (a rebind keeps the placement and its claims); NULL when out of memory. */
BPG_HIDDEN bpg_claims_t* bpg_claims_clone(const bpg_claims_t* c);
/* 1 when the ascending node set is convex in g (passes/regions.c); mark:
 * num_nodes zeroed bytes, zeroed again on return. */
BPG_HIDDEN int bpg_nodes_convex(const bp_graph_t* g, const uint32_t* nodes, uint32_t n, uint8_t* mark);
/* 1 when live node n can be in a region (passes/regions.c): an op (not a
 * view) reading dense values only. */
BPG_HIDDEN int bpg_region_candidate(const bp_graph_t* g, uint32_t n);
/* Offers nodes[0..n) (ascending, live, of device dev) to dev's plugin as
 * one GRAPH region (bp_device_claim_region): a group per node in groups,
 * reasons as that call takes them (may be NULL) (passes/regions.c). */
BPG_HIDDEN bp_status_t bpg_claim_nodes(const bp_graph_exec_t* x, uint32_t dev, const uint32_t* nodes, uint32_t n,
                                       uint32_t* groups, bp_support_t* const* reasons);
/* Fusion into the op set's fused forms after placement (passes/fuse.c). */
BPG_HIDDEN bp_status_t bpg_pass_fuse(bp_graph_exec_t* x);
/* fuse.c's helpers for its pattern files: the node's fused form asked of
 * its device (*out_ok), a fusion recorded for the report, the only live
 * reader of v from node `from` on (UINT32_MAX: none, several, or a graph output). */
BPG_HIDDEN bp_status_t bpg_fuse_supported(bp_graph_exec_t* x, uint32_t n, int* out_ok);
BPG_HIDDEN void bpg_fuse_note(bp_graph_exec_t* x, const char* kind, uint32_t a, uint32_t op_a, uint32_t b,
                              uint32_t op_b, const char* as);
BPG_HIDDEN uint32_t bpg_fuse_sole_reader(const bp_graph_t* g, const uint32_t* uses, uint32_t v, uint32_t from);
/* The decomposed attention pattern ending at bmm node n (passes/fuse_attention.c). */
BPG_HIDDEN bp_status_t bpg_fuse_attention(bp_graph_exec_t* x, uint32_t n, const uint32_t* uses, int* done);
/* A rebuild of x->g through the builder (passes/decompose.c): the new
 * graph and the old -> new value map. */
typedef struct bpg_rebuild {
  bp_graph_t* g;
  uint32_t* map;
  const char* base; /* the decomposed node's name (NULL: unnamed) */
  uint32_t part;
} bpg_rebuild_t;
/* Horizontal fusion (passes/fuse_qkv.c): leader[n] is the first linear of
 * n's group (UINT32_MAX: none); returns the number of groups. */
BPG_HIDDEN uint32_t bpg_qkv_pick(const bp_graph_exec_t* x, uint32_t* leader);
/* Emits group n's fused linear and one slice per member into rb (member
 * outputs mapped), and notes the fusion. */
BPG_HIDDEN bp_status_t bpg_qkv_emit(bp_graph_exec_t* x, bpg_rebuild_t* rb, bp_graph_t* old, const uint32_t* leader,
                                    uint32_t n);
/* Decomposition of nodes no device runs (passes/decompose.c): rebuilds x->g. */
BPG_HIDDEN bp_status_t bpg_pass_decompose(bp_graph_exec_t* x, uint32_t* out_count);
/* Named patterns (decomposed softmax, rms_norm, layer_norm, silu) into
 * their ops, where a device runs them (passes/patterns.c). */
BPG_HIDDEN bp_status_t bpg_pass_patterns(bp_graph_exec_t* x, uint32_t* out_count);
/* Regions through the plugins' exec tables (passes/regions.c): claims,
 * convex groups, compiles (a refusal splits), run order. */
BPG_HIDDEN bp_status_t bpg_pass_regions(bp_graph_exec_t* x);
BPG_HIDDEN void bpg_regions_free(bp_graph_exec_t* x);
/* The region's descriptor from its nodes (passes/region_desc.c): kind
 * EW_PROGRAM when every node fits an elementwise program, EPILOGUE for a
 * matmul anchor and elementwise nodes, else GRAPH; `want_kind` 0 chooses.
 * Fills r->kind, r->args, num_inputs, num_outputs. *out is freed with
 * bpg_region_desc_free. */
typedef struct bpg_rdesc bpg_rdesc_t;
BPG_HIDDEN bp_status_t bpg_region_desc_build(const bp_graph_exec_t* x, bpg_region_t* r, uint32_t want_kind,
                                             bpg_rdesc_t** out);
BPG_HIDDEN const bp_region_desc_t* bpg_region_desc(const bpg_rdesc_t* d);
/* 1 when node n fits an elementwise program of compute dtype *dt (0: set
 * from the node). */
BPG_HIDDEN int bpg_region_ew_node(const bp_graph_t* g, uint32_t n, uint32_t* dt);
BPG_HIDDEN void bpg_region_desc_free(bpg_rdesc_t* d);
/* Compiles r (nodes and dev set) into r->region; BP_UNIMPLEMENTED with the
 * reason in *refusal when the plugin refuses it. */
BPG_HIDDEN bp_status_t bpg_region_compile(bp_graph_exec_t* x, bpg_region_t* r, bp_support_t* refusal);
/* Adds the compiled r to x's regions (its nodes marked; r's memory moves
 * there, or is freed when out of memory) (passes/regions.c). */
BPG_HIDDEN bp_status_t bpg_region_keep(bp_graph_exec_t* x, bpg_region_t* r);
/* Records a refused region (nodes[0..n) on dev) for the report. */
BPG_HIDDEN void bpg_region_refused(bp_graph_exec_t* x, uint32_t dev, const uint32_t* nodes, uint32_t n,
                                   bp_status_t st, const bp_support_t* why);
/* Reduction prologues on device dev (passes/reduce_prologue.c): each
 * reduction whose input comes from an elementwise chain nothing else
 * reads, compiled with the chain as one region where the device declares
 * them (bp_fusion_caps_t.reduction_prologues); a refusal leaves the nodes
 * to the claims. mark: as bpg_nodes_convex. */
BPG_HIDDEN bp_status_t bpg_reduction_prologues(bp_graph_exec_t* x, uint32_t dev, uint8_t* mark);
/* 1 when a GRAPH region's nodes are an elementwise chain and a last
 * reduction of its result (the report's "reduction_prologue"). */
BPG_HIDDEN int bpg_region_is_prologue(const bp_graph_t* g, const bpg_region_t* r);
/* Copies and steps (passes/copies.c): slots, steps, copies between devices. */
BPG_HIDDEN bp_status_t bpg_pass_copies(bp_graph_exec_t* x);
/* Streams (passes/streams.c): a stream per independent chain of steps on a
 * device (BP_GRAPH_ONE_STREAM: stream 0 only); buffers such steps touch
 * live for the whole run. */
BPG_HIDDEN bp_status_t bpg_pass_streams(bp_graph_exec_t* x);
BPG_HIDDEN bp_stream_t* bpg_stream(const bp_graph_exec_t* x, uint32_t dev, uint32_t k);
/* Memory planning (passes/memplan.c): offsets, in-place reuse, peak per device. */
BPG_HIDDEN bp_status_t bpg_pass_memplan(bp_graph_exec_t* x);

BPG_HIDDEN bp_status_t bpg_exec_new_slot(bp_graph_exec_t* x, uint32_t value, uint32_t dev,
                                         uint32_t* out);
BPG_HIDDEN bp_status_t bpg_exec_new_step(bp_graph_exec_t* x, uint32_t* out);
/* The slot whose buffer slot s views (s itself when it is not a view's). */
BPG_HIDDEN uint32_t bpg_slot_root(const bp_graph_exec_t* x, uint32_t s);
BPG_HIDDEN int bpg_device_index(const bp_graph_exec_t* x, const bp_device_t* d);
/* Fills device figures and limits for devices[0..n) (streams come with the first run). */
BPG_HIDDEN bp_status_t bpg_exec_init_devices(bp_graph_exec_t* x, bp_device_t* const* devices,
                                             uint32_t n, uint64_t limit);
/* The front of a compile: a verified copy of `graph` with const_fold,
 * canonicalize, cse and dce applied (counters: folded, merged, removed,
 * canonicalized). */
BPG_HIDDEN bp_status_t bpg_compile_front(bp_context_t* ctx, const bp_graph_t* graph, uint32_t flags,
                                         bp_graph_t** out_g, uint32_t counters[4]);
/* The back of a compile for the front's graph with its symbols bound:
 * placement (or `placed`'s node placement when given: a rebind for new
 * symbol values, or a loaded file), copies, memory planning, constants. */
BPG_HIDDEN bp_status_t bpg_exec_build(bp_context_t* ctx, const bp_graph_t* g_sym, const int64_t* syms,
                                      uint32_t num_syms, const bp_graph_compile_options_t* o,
                                      const bp_graph_exec_t* placed, bp_graph_exec_t** out);
/* Uploads constants used on each device (once; the first run calls it). */
BPG_HIDDEN bp_status_t bpg_exec_upload_constants(bp_graph_exec_t* x);

#endif /* BP_COMPILER_GRAPH_EXEC_H_ */
