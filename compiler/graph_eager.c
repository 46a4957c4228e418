/* libbackplane_graph: the eager reference -- every node through bp_op_run
 * on one stream, in order, no passes. Tensors die after their last use.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "graph_internal.h"

bp_status_t bp_graph_run_eager(bp_stream_t* stream, const bp_graph_t* g, const bp_tensor_t* const* inputs,
                               uint32_t num_inputs, bp_tensor_t** outputs, uint32_t num_outputs) {
  if (stream == NULL || g == NULL || (outputs == NULL && num_outputs > 0) || (inputs == NULL && num_inputs > 0)) {
    return bpg_error(BP_INVALID_ARGUMENT, "bp_graph_run_eager: NULL argument");
  }
  if (num_inputs != g->num_inputs || num_outputs != g->num_outputs) {
    return bpg_error(BP_INVALID_ARGUMENT, "bp_graph_run_eager: the graph has %u inputs and %u outputs, got %u and %u",
                     g->num_inputs, g->num_outputs, num_inputs, num_outputs);
  }
  bp_device_t* dev = bp_stream_device(stream);
  bp_tensor_t** t = calloc(g->num_values + 1, sizeof(bp_tensor_t*));
  uint32_t* uses = NULL;
  bp_status_t st = t == NULL ? bpg_error(BP_RESOURCE_EXHAUSTED, "bp_graph_run_eager: out of memory") : bpg_use_counts(g, &uses);
  for (uint32_t i = 0; i < num_inputs && st == BP_OK; ++i) {
    if (inputs[i] == NULL) st = bpg_error(BP_INVALID_ARGUMENT, "bp_graph_run_eager: input %u is NULL", i);
    else if (bp_tensor_device(inputs[i]) != dev) st = bpg_error(BP_INVALID_ARGUMENT, "bp_graph_run_eager: input %u is not on %s", i, bp_device_name(dev));
    else {
      bp_tensor_retain((bp_tensor_t*)inputs[i]);
      t[g->inputs[i]] = (bp_tensor_t*)inputs[i];
    }
  }
  for (uint32_t v = 0; v < g->num_values && st == BP_OK; ++v) {
    bpg_value_t* val = &g->values[v];
    if (val->kind != BP_GRAPH_VALUE_CONSTANT || uses[v] == 0) continue;
    st = bpg_const_materialize(val);
    if (st == BP_OK) st = bp_tensor_create(dev, val->dtype, val->rank, val->dims, &t[v]);
    if (st == BP_OK && val->cst->size > 0) st = bp_tensor_write(stream, t[v], val->cst->data, val->cst->size);
  }
  for (uint32_t n = 0; n < g->num_nodes && st == BP_OK; ++n) {
    const bpg_node_t* node = &g->nodes[n];
    if (node->dead) continue;
    enum { MAXI = 64 };
    const bp_tensor_t* in[MAXI];
    bp_tensor_t* out[4] = {0};
    if (node->num_in > MAXI || node->num_out > 4) {
      st = bpg_error(BP_INVALID_ARGUMENT, "bp_graph_run_eager: node #%u has too many operands", n);
      break;
    }
    for (uint32_t i = 0; i < node->num_in; ++i) in[i] = node->in[i] == BP_GRAPH_NO_VALUE ? NULL : t[node->in[i]];
    st = bpg_is_view(node->op) ? bpg_view_apply(stream, node->op, node->attrs, in[0], &out[0])
                               : bp_op_run(stream, node->op, in, node->num_in, node->attrs, out, node->num_out);
    if (st != BP_OK) {
      char label[200], msg[800];
      snprintf(msg, sizeof(msg), "%s", bp_status_message());
      bpg_node_label(g, n, label, sizeof(label));
      st = bpg_error(st, "%s: %s", label, msg);
      break;
    }
    for (uint32_t k = 0; k < node->num_out; ++k) t[node->out[k]] = out[k];
    for (uint32_t i = 0; i < node->num_in; ++i) {
      uint32_t v = node->in[i];
      if (v == BP_GRAPH_NO_VALUE || --uses[v] > 0) continue;
      bp_tensor_release(t[v]);
      t[v] = NULL;
    }
  }
  uint32_t k = 0;
  for (; k < num_outputs && st == BP_OK; ++k) {
    outputs[k] = t[g->outputs[k]];
    bp_tensor_retain(outputs[k]);
  }
  if (st == BP_OK) st = bp_stream_synchronize(stream);
  if (st != BP_OK) {
    for (uint32_t j = 0; j < k; ++j) {
      bp_tensor_release(outputs[j]);
      outputs[j] = NULL;
    }
  }
  for (uint32_t v = 0; t != NULL && v < g->num_values; ++v) bp_tensor_release(t[v]);
  free(t);
  free(uses);
  return st;
}
