/* bp-bench figure "compiled region dispatch" (run by the vs_raw suite): an
 * 8-op elementwise chain on a small tensor (4096 f32, where launches, not
 * bytes, cost) as one compiled GRAPH region of eight nodes, against the
 * same eight ops launched eagerly, in the same run. On the CUDA plugin the
 * region replays as one CUDA graph (one cuGraphLaunch per run) and the
 * eager ops cost one launch each (plus their argument upload). Runs per
 * second, medians of ctx->reps bursts of BURST runs each closed by one
 * synchronize; reported, no target. Skipped with the reason on a device
 * that refuses the region.
 */
#include <stdio.h>
#include <string.h>

#include "bench.h"

#define NONE BP_REGION_VALUE_NONE
enum { NODES = 8, VALUES = 10, BURST = 50 };

/* min(max(|(relu(x*y + 0.5) - y) * x|, x), 2): values 0 x, 1 y, 2 out,
 * 3..9 the intermediates; scalar: 0 none, 1 the 0.5, 2 the 2. */
typedef struct node {
  uint32_t op, a, b, out;
  int scalar;
} node_t;
static const node_t k_chain[NODES] = {
    {BP_OP_mul, 0, 1, 3, 0},     {BP_OP_add, 3, NONE, 4, 1}, {BP_OP_relu, 4, NONE, 5, 0},
    {BP_OP_sub, 5, 1, 6, 0},     {BP_OP_mul, 6, 0, 7, 0},    {BP_OP_abs, 7, NONE, 8, 0},
    {BP_OP_maximum, 8, 0, 9, 0}, {BP_OP_minimum, 9, NONE, 2, 2}};

static int is_unary(uint32_t op) { return op == BP_OP_relu || op == BP_OP_abs; }

typedef struct chain {
  bp_tensor_t* v[VALUES];
  bp_binary_attrs_t scalars[3];
  bp_region_t* region;
  bp_buffer_t* workspace;
} chain_t;

static const void* attrs_of(chain_t* c, const node_t* n) {
  return n->scalar ? (const void*)&c->scalars[n->scalar] : NULL;
}

static bp_status_t run_eager(bpb_ctx_t* ctx, void* user) {
  chain_t* c = user;
  for (int i = 0; i < NODES; ++i) {
    const node_t* n = &k_chain[i];
    const bp_tensor_t* in[2] = {c->v[n->a], n->b == NONE ? NULL : c->v[n->b]};
    bp_tensor_t* out[1] = {c->v[n->out]};
    bp_status_t st = bp_op_run(ctx->stream, n->op, in, is_unary(n->op) ? 1 : 2, attrs_of(c, n), out, 1);
    if (st != BP_OK) return st;
  }
  return BP_OK;
}

static bp_status_t run_region(bpb_ctx_t* ctx, void* user) {
  chain_t* c = user;
  const bp_tensor_t* args[3] = {c->v[0], c->v[1], c->v[2]};
  return bp_region_launch(ctx->stream, c->region, args, 3, c->workspace);
}

/* Seconds per run: bursts of BURST runs, one synchronize each. */
static double per_run(bpb_ctx_t* ctx, bpb_run_fn fn, void* user) {
  double t[BPB_MAX_REPS];
  BPB_CHECK(fn(ctx, user));
  BPB_CHECK(bp_stream_synchronize(ctx->stream));
  for (int r = 0; r < ctx->reps; ++r) {
    double t0 = bpb_now();
    for (int k = 0; k < BURST; ++k) BPB_CHECK(fn(ctx, user));
    BPB_CHECK(bp_stream_synchronize(ctx->stream));
    t[r] = (bpb_now() - t0) / BURST;
  }
  return bpb_median(t, ctx->reps);
}

void bpb_region_dispatch(bpb_ctx_t* ctx) {
  const int64_t n = 4096;
  char name[192];
  snprintf(name, sizeof name, "8-op chain on %lld f32 as one compiled GRAPH region vs the 8 ops eagerly: %s",
           (long long)n, bp_device_name(ctx->device));
  chain_t c;
  memset(&c, 0, sizeof c);
  c.scalars[1] = (bp_binary_attrs_t){.struct_size = sizeof c.scalars[1], .flags = BP_BINARY_OTHER_IS_SCALAR,
                                     .scalar = {.kind = BP_SCALAR_FLOAT, .v.f = 0.5}};
  c.scalars[2] = (bp_binary_attrs_t){.struct_size = sizeof c.scalars[2], .flags = BP_BINARY_OTHER_IS_SCALAR,
                                     .scalar = {.kind = BP_SCALAR_FLOAT, .v.f = 2.0}};
  c.v[0] = bpb_tensor_random(ctx, 1, &n, 51);
  c.v[1] = bpb_tensor_random(ctx, 1, &n, 52);
  for (int i = 2; i < VALUES; ++i) c.v[i] = bpb_tensor(ctx, BP_DTYPE_F32, 1, &n);
  /* The region: the same nodes over value ids. */
  bp_tensor_desc_t d = {.struct_size = sizeof d, .dtype = BP_DTYPE_F32, .rank = 1, .sizes = {n}, .strides = {1}};
  const bp_tensor_desc_t* vals[VALUES];
  for (int i = 0; i < VALUES; ++i) vals[i] = &d;
  uint32_t ids[NODES][3];
  bp_region_node_t nodes[NODES];
  const bp_region_node_t* np[NODES];
  for (int i = 0; i < NODES; ++i) {
    const node_t* k = &k_chain[i];
    uint32_t nin = is_unary(k->op) ? 1 : 2;
    ids[i][0] = k->a, ids[i][1] = k->b, ids[i][nin] = k->out;
    nodes[i] = (bp_region_node_t){.struct_size = sizeof nodes[i], .op_id = k->op, .num_inputs = nin,
                                  .num_outputs = 1, .compute_dtype = BP_DTYPE_F32, .inputs = ids[i],
                                  .outputs = ids[i] + nin, .attrs = attrs_of(&c, k)};
    np[i] = &nodes[i];
  }
  bp_region_desc_t r = {.struct_size = sizeof r, .kind = BP_REGION_GRAPH, .num_values = VALUES,
                        .num_args = 3, .num_inputs = 2, .num_nodes = NODES, .values = vals, .nodes = np};
  bp_support_t why = {.struct_size = sizeof why};
  if (bpb_unsupported(bp_region_compile(ctx->device, &r, &why, &c.region), name)) goto done;
  bp_region_info_t info = {.struct_size = sizeof info};
  BPB_CHECK(bp_region_get_info(c.region, &info));
  if (info.workspace_bytes)
    BPB_CHECK(bp_buffer_allocate(ctx->device, 0, info.workspace_bytes, &c.workspace));
  double t_eager[BPB_MAX_REPS], t_region[BPB_MAX_REPS];
  const int reps = ctx->reps;
  ctx->reps = 1; /* interleaved: one burst of each per repetition */
  for (int i = 0; i < reps; ++i) {
    t_eager[i] = per_run(ctx, run_eager, &c);
    t_region[i] = per_run(ctx, run_region, &c);
  }
  ctx->reps = reps;
  double te = bpb_median(t_eager, reps), tr = bpb_median(t_region, reps);
  bpb_add_figure(&(bpb_figure_t){name, "runs/s", 1.0 / tr, 1.0 / te, "the 8 ops eagerly, same run", 0, 0});
done:
  if (c.workspace) bp_buffer_release(c.workspace);
  bp_region_release(c.region);
  for (int i = 0; i < VALUES; ++i) bp_tensor_release(c.v[i]);
}
