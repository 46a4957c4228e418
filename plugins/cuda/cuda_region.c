/* The CUDA plugin's exec table: compiled regions that replay as one CUDA
 * graph (cuda_graph.c).
 *
 * Kinds compiled:
 *  - EW_PROGRAM: the program runs through the shared elementwise kernel
 *    (gpu_common's lowering), checked against the fusion declaration;
 *  - GRAPH, EPILOGUE, PATTERN: every node runs through the shared kernels
 *    exactly as its eager launch would (a node that eager dispatch sends to
 *    cuBLASLt, or that no kernel takes, refuses the region with the node's
 *    reason, and the compiler falls back to smaller regions). Temporaries
 *    live in the workspace at offsets fixed at compile time.
 * A launch lowers the region for its arguments into launch records, and
 * the replay enqueues them as one graph launch. region_claim groups runs
 * of consecutive nodes the kernels take (a run of a topological order is
 * convex). Serialization: cuda_region_serial.c.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuda_blas.h"
#include "cuda_region.h"

#define NONE_ID BP_REGION_VALUE_NONE

static void node_free(cuda_node_t* n) {
  free(n->ids);
  free(n->attrs);
}

void cuda_exe_free(struct bpp_executable_s* e) {
  if (!e) return;
  if (e->replay_ready) cuda_replay_fini(&e->replay);
  for (uint32_t i = 0; i < e->num_nodes; ++i) node_free(&e->nodes[i]);
  free(e->nodes);
  free(e->values);
  free(e->offsets);
  free(e->instrs);
  free(e->consts);
  free(e->aliases);
  free(e);
}

static bp_status_t refuse(bp_support_t* out, uint32_t reason, const char* fmt, ...)
    __attribute__((format(printf, 3, 4)));
static bp_status_t refuse(bp_support_t* out, uint32_t reason, const char* fmt, ...) {
  char msg[256];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  if (out) bp_kit_support_answer(out, reason, "cuda: %s", msg);
  return bp_kit_error(BP_UNIMPLEMENTED, "cuda: region_compile: %s", msg);
}

/* The node as an op call over `descs` (value id -> descriptor). */
static bp_op_call_t call_of(const cuda_node_t* n, const bp_tensor_desc_t* const* descs,
                            const bp_tensor_desc_t* absent, const bp_tensor_desc_t** ptrs) {
  for (uint32_t i = 0; i < n->num_inputs + n->num_outputs; ++i)
    ptrs[i] = n->ids[i] == NONE_ID ? absent : descs[n->ids[i]];
  return (bp_op_call_t){.struct_size = sizeof(bp_op_call_t), .op_id = n->op_id,
                        .num_inputs = n->num_inputs, .num_outputs = n->num_outputs,
                        .compute_dtype = n->compute_dtype, .list_begin = n->list_begin,
                        .list_count = n->list_count, .inputs = ptrs,
                        .outputs = ptrs + n->num_inputs, .attrs = n->attrs};
}

/* BP_SUPPORT_OK when the region's node runs on the kernels as its eager
 * launch does; else the reason in `why`. */
static uint32_t node_support(bpp_device_t d, const bp_region_desc_t* g, const bp_region_node_t* node,
                             char* why, size_t cap) {
  if (node->struct_size < BP_REGION_NODE_V1_SIZE ||
      node->num_inputs + node->num_outputs > CUDA_NODE_MAX_OPERANDS) {
    snprintf(why, cap, "cuda: a node of %u operands", node->num_inputs + node->num_outputs);
    return BP_SUPPORT_SIZE;
  }
  cuda_node_t n = {.op_id = node->op_id, .num_inputs = node->num_inputs,
                   .num_outputs = node->num_outputs, .compute_dtype = node->compute_dtype,
                   .list_begin = node->list_begin, .list_count = node->list_count,
                   .attrs = (void*)(uintptr_t)node->attrs};
  uint32_t ids[CUDA_NODE_MAX_OPERANDS];
  for (uint32_t i = 0; i < node->num_inputs; ++i) ids[i] = node->inputs[i];
  for (uint32_t k = 0; k < node->num_outputs; ++k) ids[node->num_inputs + k] = node->outputs[k];
  for (uint32_t i = 0; i < n.num_inputs + n.num_outputs; ++i)
    if (ids[i] != NONE_ID && ids[i] >= g->num_values) {
      snprintf(why, cap, "cuda: a node names value %u of %u", ids[i], g->num_values);
      return BP_SUPPORT_SIZE;
    }
  n.ids = ids;
  bp_tensor_desc_t absent = {.struct_size = sizeof absent};
  const bp_tensor_desc_t* ptrs[CUDA_NODE_MAX_OPERANDS];
  bp_op_call_t call = call_of(&n, g->values, &absent, ptrs);
  char gwhy[256];
  if (cuda_gemm_support(d, &call, gwhy, sizeof gwhy) == BP_SUPPORT_OK) {
    snprintf(why, cap, "cuda: %s runs through cuBLASLt, which compiled regions do not capture yet",
             bp_kit_op_name(node->op_id));
    return BP_SUPPORT_OP;
  }
  return cuda_kernels_support(d, &call, why, cap);
}

static bp_status_t region_claim(bpp_device_t d, const bp_region_desc_t* g, uint32_t* groups,
                                bp_support_t* const* reasons) {
  if (!d || !g || !groups || g->struct_size < BP_REGION_DESC_V1_SIZE || g->kind != BP_REGION_GRAPH ||
      (g->num_nodes && !g->nodes))
    return bp_kit_error(BP_INVALID_ARGUMENT, "cuda: region_claim: NULL, short or non-GRAPH region");
  uint32_t group = 0;
  int in_run = 0;
  for (uint32_t i = 0; i < g->num_nodes; ++i) {
    char why[256];
    uint32_t reason = node_support(d, g, g->nodes[i], why, sizeof why);
    if (reason == BP_SUPPORT_OK) {
      if (!in_run) group++;
      in_run = 1;
      groups[i] = group;
    } else {
      in_run = 0;
      groups[i] = 0;
      if (reasons && reasons[i]) bp_kit_support_answer(reasons[i], reason, "%s", why);
    }
  }
  return BP_OK;
}

static int copy_node(cuda_node_t* n, const bp_region_node_t* src) {
  n->op_id = src->op_id;
  n->num_inputs = src->num_inputs;
  n->num_outputs = src->num_outputs;
  n->compute_dtype = src->compute_dtype;
  n->list_begin = src->list_begin;
  n->list_count = src->list_count;
  n->ids = malloc(sizeof(uint32_t) * (src->num_inputs + src->num_outputs + 1));
  if (!n->ids) return -1;
  memcpy(n->ids, src->inputs, sizeof(uint32_t) * src->num_inputs);
  memcpy(n->ids + src->num_inputs, src->outputs, sizeof(uint32_t) * src->num_outputs);
  const bp_kit_op_info_t* info = bp_kit_op_info(src->op_id);
  if (info && info->attrs_size && src->attrs) {
    n->attrs = malloc(info->attrs_size);
    if (!n->attrs) return -1;
    memcpy(n->attrs, src->attrs, info->attrs_size);
  }
  return 0;
}

/* Dense copies of the values; temporaries get 256-byte aligned workspace
 * offsets. -1: out of memory. */
static int copy_values(struct bpp_executable_s* e, const bp_region_desc_t* r) {
  e->num_values = r->num_values;
  e->values = calloc(r->num_values + 1u, sizeof *e->values);
  e->offsets = calloc(r->num_values + 1u, sizeof *e->offsets);
  if (!e->values || !e->offsets) return -1;
  for (uint32_t v = 0; v < r->num_values; ++v) {
    const bp_tensor_desc_t* s = r->values[v];
    bp_tensor_desc_t* t = &e->values[v];
    memset(t, 0, sizeof *t);
    t->struct_size = sizeof *t;
    t->dtype = s->dtype;
    t->rank = s->rank;
    int64_t stride = 1;
    for (int k = (int)s->rank - 1; k >= 0; --k) {
      t->sizes[k] = s->sizes[k];
      t->strides[k] = stride;
      stride *= s->sizes[k] > 0 ? s->sizes[k] : 1;
    }
    if (v >= r->num_args) {
      uint64_t numel = 1;
      for (uint32_t k = 0; k < s->rank; ++k) numel *= (uint64_t)(s->sizes[k] > 0 ? s->sizes[k] : 0);
      e->offsets[v] = e->workspace;
      e->workspace += (numel * bp_dtype_size(s->dtype) + 255u) & ~(uint64_t)255u;
    }
  }
  return 0;
}

static int keep_program(struct bpp_executable_s* e, const bp_ew_program_t* p) {
  e->instrs = calloc(p->num_instrs + 1u, sizeof *e->instrs);
  e->consts = calloc(p->num_constants + 1u, sizeof *e->consts);
  if (!e->instrs || !e->consts) return -1;
  for (uint32_t i = 0; i < p->num_instrs; i++) memcpy(&e->instrs[i], BP_EW_INSTR_AT(p, i), sizeof *e->instrs);
  if (p->num_constants) memcpy(e->consts, p->constants, sizeof *e->consts * p->num_constants);
  e->prog = *p;
  e->prog.struct_size = sizeof e->prog;
  e->prog.instrs = e->instrs;
  e->prog.instr_stride = sizeof *e->instrs;
  e->prog.constants = e->consts;
  e->prog.next = NULL;
  return 0;
}

static int program_aliases(struct bpp_executable_s* e, const bp_region_desc_t* r) {
  e->aliases = calloc((size_t)r->num_args * r->num_args + 1, sizeof *e->aliases);
  if (!e->aliases) return -1;
  if (r->kind == BP_REGION_EW_PROGRAM) e->num_aliases = cuda_kernels_ew_aliases(r, e->aliases);
  return 0;
}

static bp_status_t check_program(bpp_device_t d, const bp_ew_program_t* p, bp_support_t* why) {
  if (p->struct_size < BP_EW_PROGRAM_V1_SIZE || p->instr_stride < BP_EW_INSTR_V1_SIZE ||
      (p->num_instrs && !p->instrs) || (p->num_constants && !p->constants))
    return bp_kit_error(BP_INVALID_ARGUMENT, "cuda: region_compile: a malformed program");
  char msg[256];
  uint32_t reason = cuda_kernels_ew_fits(d, p, msg, sizeof msg);
  return reason == BP_SUPPORT_OK ? BP_OK : refuse(why, reason, "%s", msg);
}

bp_status_t cuda_region_compile(bpp_device_t d, const bp_region_desc_t* r, bp_support_t* why,
                                bpp_executable_t* out) {
  if (!d || !r || !out || r->struct_size < BP_REGION_DESC_V1_SIZE)
    return bp_kit_error(BP_INVALID_ARGUMENT, "cuda: region_compile: NULL or short argument");
  *out = NULL;
  if (r->num_args > r->num_values || r->num_inputs > r->num_args || (r->num_values && !r->values))
    return bp_kit_error(BP_INVALID_ARGUMENT, "cuda: region_compile: %u values, %u arguments, %u inputs",
                        r->num_values, r->num_args, r->num_inputs);
  if (r->kind == BP_REGION_EW_PROGRAM) {
    if (!r->program) return bp_kit_error(BP_INVALID_ARGUMENT, "cuda: region_compile: no program");
    bp_status_t st = check_program(d, r->program, why);
    if (st != BP_OK) return st;
    if (r->program->num_inputs != r->num_inputs ||
        r->program->num_inputs + r->program->num_outputs != r->num_args)
      return bp_kit_error(BP_INVALID_ARGUMENT, "cuda: region_compile: the program's operands are "
                                               "not the region's arguments");
  } else if (r->kind == BP_REGION_GRAPH || r->kind == BP_REGION_EPILOGUE ||
             r->kind == BP_REGION_PATTERN) {
    if (!r->num_nodes || !r->nodes)
      return bp_kit_error(BP_INVALID_ARGUMENT, "cuda: region_compile: a region without nodes");
    for (uint32_t i = 0; i < r->num_nodes; ++i) {
      char msg[256];
      uint32_t reason = node_support(d, r, r->nodes[i], msg, sizeof msg);
      if (reason != BP_SUPPORT_OK)
        return refuse(why, reason, "node %u (%s): %s", i, bp_kit_op_name(r->nodes[i]->op_id), msg);
    }
  } else {
    return refuse(why, BP_SUPPORT_OP, "region kind %u is not one this plugin compiles", r->kind);
  }
  struct bpp_executable_s* e = calloc(1, sizeof *e);
  int bad = !e;
  if (e) {
    e->dev = d;
    e->kind = r->kind;
    e->num_args = r->num_args;
    e->num_inputs = r->num_inputs;
    bad = copy_values(e, r) || program_aliases(e, r) ||
          (r->kind == BP_REGION_EW_PROGRAM && keep_program(e, r->program));
    if (!bad && r->kind != BP_REGION_EW_PROGRAM) {
      e->nodes = calloc(r->num_nodes, sizeof *e->nodes);
      bad = !e->nodes;
      for (uint32_t i = 0; !bad && i < r->num_nodes; ++i) {
        bad = copy_node(&e->nodes[i], r->nodes[i]);
        e->num_nodes = i + 1;
      }
    }
  }
  if (bad) {
    cuda_exe_free(e);
    return bp_kit_error(BP_RESOURCE_EXHAUSTED, "cuda: region_compile: out of host memory");
  }
  bp_status_t st = cuda_replay_init(d, &e->replay);
  if (st != BP_OK) {
    cuda_exe_free(e);
    return st;
  }
  e->replay_ready = 1;
  *out = e;
  return BP_OK;
}

static bp_status_t get_info(bpp_executable_t e, bp_region_info_t* out) {
  if (!e || !out || out->struct_size < BP_REGION_INFO_V1_SIZE)
    return bp_kit_error(BP_INVALID_ARGUMENT, "cuda: executable_get_info: NULL or short argument");
  bp_region_info_t info = {.struct_size = sizeof info};
  info.num_aliases = e->num_aliases;
  info.alias_stride = sizeof(bp_region_alias_t);
  info.aliases = e->aliases;
  info.workspace_bytes = e->workspace;
  info.workspace_alignment = e->workspace ? 256 : 0;
  bp_kit_copy_out(out, &info, sizeof info);
  return BP_OK;
}

/* The launches of one run, for these arguments. */
static bp_status_t plan_of(bpp_executable_t e, const bp_tensor_desc_t* const* args,
                           const bp_tensor_desc_t* ws, cuda_plan_t* plan) {
  if (e->kind == BP_REGION_EW_PROGRAM)
    return cuda_kernels_plan_ew(&e->prog, e->num_inputs, args, e->num_args - e->num_inputs,
                                args + e->num_inputs, plan);
  const bp_tensor_desc_t** descs = calloc(e->num_values + 1u, sizeof *descs);
  bp_tensor_desc_t* temps = calloc(e->num_values + 1u, sizeof *temps);
  bp_status_t st = BP_OK;
  if (!descs || !temps) st = bp_kit_error(BP_RESOURCE_EXHAUSTED, "cuda: out of host memory");
  for (uint32_t v = 0; st == BP_OK && v < e->num_values; ++v) {
    if (v < e->num_args) {
      descs[v] = args[v];
      continue;
    }
    temps[v] = e->values[v];
    temps[v].buffer = ws->buffer;
    temps[v].byte_offset = ws->byte_offset + e->offsets[v];
    descs[v] = &temps[v];
  }
  bp_tensor_desc_t absent = {.struct_size = sizeof absent};
  for (uint32_t i = 0; st == BP_OK && i < e->num_nodes; ++i) {
    const bp_tensor_desc_t* ptrs[CUDA_NODE_MAX_OPERANDS];
    bp_op_call_t call = call_of(&e->nodes[i], descs, &absent, ptrs);
    st = cuda_kernels_plan_op(&call, plan);
  }
  free(descs);
  free(temps);
  return st;
}

static bp_status_t launch(bpp_stream_t s, bpp_executable_t e, uint32_t num_args,
                          const bp_tensor_desc_t* const* args, const bp_tensor_desc_t* ws) {
  if (!s || !e || (num_args && !args) || num_args != e->num_args)
    return bp_kit_error(BP_INVALID_ARGUMENT, "cuda: executable_launch: NULL argument or %u arguments "
                                             "(compiled with %u)", num_args, e ? e->num_args : 0);
  if (s->dev != e->dev)
    return bp_kit_error(BP_INVALID_ARGUMENT, "cuda: executable_launch: a stream of another device");
  if (e->workspace && (!ws || !ws->buffer))
    return bp_kit_error(BP_INVALID_ARGUMENT, "cuda: executable_launch: the region needs %llu bytes "
                        "of workspace", (unsigned long long)e->workspace);
  for (uint32_t i = 0; i < num_args; ++i)
    if (!args[i] || !args[i]->buffer)
      return bp_kit_error(BP_INVALID_ARGUMENT, "cuda: executable_launch: argument %u has no buffer", i);
  cuda_plan_t plan = {0};
  bp_status_t st = plan_of(e, args, ws, &plan);
  if (st == BP_OK) st = cuda_replay_launch(s, &e->replay, &plan);
  cuda_plan_clear(&plan);
  return st;
}

/* Waits for the executable's pending launches (cuda_replay_fini). */
static void release(bpp_executable_t e) { cuda_exe_free(e); }

const bpp_exec_table_t cuda_exec_table = {
    .struct_size = sizeof(bpp_exec_table_t),
    .region_claim = region_claim,
    .region_compile = cuda_region_compile,
    .executable_get_info = get_info,
    .executable_launch = launch,
    .executable_release = release,
    .executable_serialize = cuda_region_serialize,
    .executable_deserialize = cuda_region_deserialize,
};
