/* Pass: constant folding. A node whose inputs are all constants (creation
 * ops with no inputs included) is run once at compile time on the
 * context's CPU device with the eager op, and its outputs become constants
 * in place (same value ids, so the graph's order and text stay valid).
 * Outputs over BPG_FOLD_MAX_BYTES are left to run time (folding would only
 * move the work and cost the memory twice). Without a CPU device nothing
 * is folded.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../graph_internal.h"

#define BPG_FOLD_MAX_BYTES ((uint64_t)16 << 20)

static bp_status_t bpg_fold_node(bp_graph_t* g, bpg_node_t* node, bp_stream_t* stream, int* out_folded) {
  enum { MAXI = 16 };
  bp_tensor_t* in[MAXI] = {0};
  bp_tensor_t* out[4] = {0};
  bp_device_t* dev = bp_stream_device(stream);
  bp_status_t st = BP_OK;
  *out_folded = 0;
  if (node->num_in > MAXI || node->num_out > 4) return BP_OK;
  for (uint32_t k = 0; k < node->num_out; ++k) {
    uint64_t b = bpg_value_bytes(&g->values[node->out[k]]);
    if (b == UINT64_MAX || b > BPG_FOLD_MAX_BYTES) return BP_OK;
  }
  for (uint32_t i = 0; i < node->num_in && st == BP_OK; ++i) {
    if (node->in[i] == BP_GRAPH_NO_VALUE) continue;
    bpg_value_t* v = &g->values[node->in[i]];
    st = bpg_const_materialize(v);
    if (st == BP_OK) st = bp_tensor_create(dev, v->dtype, v->rank, v->dims, &in[i]);
    if (st == BP_OK && v->cst->size > 0) st = bp_tensor_write(stream, in[i], v->cst->data, v->cst->size);
  }
  if (st == BP_OK) {
    st = bp_op_run(stream, node->op, (const bp_tensor_t* const*)in, node->num_in, node->attrs, out,
                   node->num_out);
  }
  void* data[4] = {0};
  for (uint32_t k = 0; k < node->num_out && st == BP_OK; ++k) {
    uint64_t b = bpg_value_bytes(&g->values[node->out[k]]);
    data[k] = malloc(b ? b : 1);
    if (data[k] == NULL) st = bpg_error(BP_RESOURCE_EXHAUSTED, "const_fold: out of memory");
    else if (b > 0) st = bp_tensor_read(stream, out[k], data[k], b);
  }
  if (st == BP_OK) st = bp_stream_synchronize(stream);
  if (st == BP_OK) {
    for (uint32_t k = 0; k < node->num_out && st == BP_OK; ++k) {
      bpg_value_t* v = &g->values[node->out[k]];
      v->cst = calloc(1, sizeof(bpg_const_t));
      if (v->cst == NULL) {
        st = bpg_error(BP_RESOURCE_EXHAUSTED, "const_fold: out of memory");
        break;
      }
      v->cst->kind = BPG_CONST_VALUES;
      v->cst->data = data[k];
      v->cst->size = bpg_value_bytes(v);
      data[k] = NULL;
      v->kind = BP_GRAPH_VALUE_CONSTANT;
    }
    if (st == BP_OK) {
      node->dead = 1;
      *out_folded = 1;
    }
  }
  for (uint32_t k = 0; k < 4; ++k) {
    free(data[k]);
    bp_tensor_release(out[k]);
  }
  for (uint32_t i = 0; i < MAXI; ++i) bp_tensor_release(in[i]);
  return st;
}

bp_status_t bpg_pass_const_fold(bp_graph_t* g, bp_context_t* ctx, uint32_t* out_folded) {
  uint32_t folded = 0;
  bp_device_t* cpu = NULL;
  bp_stream_t* stream = NULL;
  if (out_folded) *out_folded = 0;
  for (uint32_t n = 0; n < g->num_nodes; ++n) {
    bpg_node_t* node = &g->nodes[n];
    if (node->dead) continue;
    int all_const = 1;
    for (uint32_t i = 0; i < node->num_in; ++i) {
      uint32_t v = node->in[i];
      if (v != BP_GRAPH_NO_VALUE && g->values[v].kind != BP_GRAPH_VALUE_CONSTANT) all_const = 0;
    }
    /* A view of a constant stays a view (it costs nothing at run time). */
    if (!all_const || bpg_is_view(node->op)) continue;
    if (stream == NULL) {
      if (ctx == NULL || bp_context_find_device(ctx, "cpu", &cpu) != BP_OK ||
          bp_stream_create(cpu, NULL, &stream) != BP_OK) {
        return BP_OK; /* no CPU device: nothing is folded */
      }
    }
    int done = 0;
    bp_status_t st = bpg_fold_node(g, node, stream, &done);
    if (st != BP_OK) {
      /* The op refused these constants: it would fail at run time too; say which node. */
      char label[200], msg[600];
      snprintf(msg, sizeof(msg), "%s", bp_status_message());
      bpg_node_label(g, n, label, sizeof(label));
      bp_stream_release(stream);
      return bpg_error(st, "const_fold: %s: %s", label, msg);
    }
    folded += (uint32_t)done;
  }
  bp_stream_release(stream);
  if (out_folded) *out_folded = folded;
  return BP_OK;
}
