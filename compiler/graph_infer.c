/* libbackplane_graph: shape and dtype inference and verification.
 *
 * Every node goes through the core's own rules (bp_op_infer_desc), so a
 * graph accepts exactly what eager ops accept. Symbolic dims are inferred
 * by probing: each symbol is given a large distinct size, and an output
 * dim equal to a probe is that symbol again (a dim computed from a symbol,
 * such as B*S after a reshape, becomes concrete at compile time).
 */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "graph_internal.h"

/* Probe size of symbol k: large, distinct, unlikely to arise otherwise. */
static int64_t bpg_probe(uint32_t k) { return 1000003 + 7919 * (int64_t)k; }

void bpg_value_desc(const bp_graph_t* g, const bpg_value_t* v, const int64_t* syms,
                    bp_tensor_desc_t* d) {
  (void)g;
  memset(d, 0, sizeof(*d));
  d->struct_size = sizeof(*d);
  d->dtype = v->dtype;
  d->rank = v->rank;
  int64_t stride = 1;
  for (uint32_t i = v->rank; i-- > 0;) {
    int64_t dim = v->dims[i];
    if (BP_GRAPH_IS_SYM(dim)) {
      uint32_t k = BP_GRAPH_SYM_INDEX(dim);
      dim = syms != NULL ? syms[k] : bpg_probe(k);
    }
    d->sizes[i] = dim;
    d->strides[i] = v->strided ? v->strides[i] : stride;
    /* Saturates: sizes whose product overflows are refused by the shape
     * checks (declaration, binding), never by a wrapped stride. */
    if (__builtin_mul_overflow(stride, dim > 0 ? dim : 1, &stride)) stride = INT64_MAX;
  }
}

int bpg_value_dense(const bpg_value_t* v) {
  if (!v->strided) return 1;
  int64_t want = 1;
  for (uint32_t i = v->rank; i-- > 0;) {
    if (v->dims[i] != 1 && v->strides[i] != want) return 0;
    want *= v->dims[i] > 0 ? v->dims[i] : 1;
  }
  return 1;
}

static bp_status_t bpg_node_error(const bp_graph_t* g, uint32_t n, bp_status_t st, const char* what) {
  char label[200];
  bpg_node_label(g, n, label, sizeof(label));
  if (g->nodes[n].line > 0) return bpg_error(st, "%u:1: %s: %s", g->nodes[n].line, label, what);
  return bpg_error(st, "%s: %s", label, what);
}

bp_status_t bpg_infer(bp_graph_t* g, const int64_t* syms) {
  for (uint32_t i = 0; i < g->num_outputs; ++i) {
    if (g->outputs[i] >= g->num_values) return bpg_error(BP_INVALID_ARGUMENT, "graph output %u: no value %u", i, g->outputs[i]);
  }
  for (uint32_t n = 0; n < g->num_nodes; ++n) {
    bpg_node_t* node = &g->nodes[n];
    if (node->dead) continue;
    enum { MAXI = 64 };
    bp_tensor_desc_t in_store[MAXI];
    const bp_tensor_desc_t* in[MAXI];
    bp_tensor_desc_t out_store[4];
    bp_tensor_desc_t* out[4];
    char msg[300];
    bp_op_info_t info = {.struct_size = sizeof(info)};
    if (bpg_is_view(node->op)) {
      static const char* const self_name[] = {"self"};
      info.num_fixed_inputs_before = 1;
      info.input_names = self_name;
    } else {
      bp_op_get_info(node->op, &info);
    }
    if (node->num_in > MAXI || node->num_out > 4) {
      return bpg_node_error(g, n, BP_INVALID_ARGUMENT, "too many operands (at most 64 inputs, 4 outputs)");
    }
    for (uint32_t i = 0; i < node->num_in; ++i) {
      uint32_t v = node->in[i];
      in[i] = NULL;
      if (v == BP_GRAPH_NO_VALUE) continue;
      const bpg_value_t* val = &g->values[v];
      int undefined = v >= node->out[0] ||
                      (val->kind == BP_GRAPH_VALUE_NODE && g->nodes[val->producer].dead) ||
                      val->dtype == BP_DTYPE_INVALID;
      if (undefined) {
        char vb[32];
        const char* iname = (info.input_names != NULL && i < info.num_fixed_inputs_before) ? info.input_names[i] : "";
        snprintf(msg, sizeof(msg), "input %u%s%s%s is value '%s', which is not defined before the node", i,
                 iname[0] ? " ('" : "", iname, iname[0] ? "')" : "", bpg_value_name(g, v, vb, sizeof(vb)));
        return bpg_node_error(g, n, BP_INVALID_ARGUMENT, msg);
      }
      bpg_value_desc(g, val, syms, &in_store[i]);
      in[i] = &in_store[i];
    }
    for (uint32_t k = 0; k < node->num_out; ++k) {
      memset(&out_store[k], 0, sizeof(out_store[k]));
      out_store[k].struct_size = sizeof(out_store[k]);
      out[k] = &out_store[k];
    }
    int view = bpg_is_view(node->op);
    bp_status_t st = view ? (node->num_in == 1 && node->num_out == 1 && in[0] != NULL
                                 ? bpg_view_infer(node->op, node->attrs, in[0], out[0])
                                 : bpg_error(BP_INVALID_ARGUMENT, "a view takes one input and has one output"))
                          : bp_op_infer_desc(node->op, in, node->num_in, node->attrs, out, node->num_out);
    if (st != BP_OK) {
      snprintf(msg, sizeof(msg), "%s", bp_status_message());
      return bpg_node_error(g, n, st, msg);
    }
    for (uint32_t k = 0; k < node->num_out; ++k) {
      bpg_value_t* v = &g->values[node->out[k]];
      v->dtype = out_store[k].dtype;
      v->rank = out_store[k].rank;
      v->strided = view && !bpg_view_desc_dense(&out_store[k]);
      memset(v->strides, 0, sizeof(v->strides));
      if (v->strided) memcpy(v->strides, out_store[k].strides, sizeof(int64_t) * v->rank);
      for (uint32_t d = 0; d < v->rank; ++d) {
        int64_t dim = out_store[k].sizes[d];
        if (syms == NULL) {
          for (uint32_t s = 0; s < g->num_syms; ++s) {
            if (dim == bpg_probe(s)) dim = BP_GRAPH_SYM(s);
          }
        }
        v->dims[d] = dim;
      }
    }
  }
  return BP_OK;
}

bp_status_t bp_graph_infer(bp_graph_t* g) {
  if (g == NULL) return bpg_error(BP_INVALID_ARGUMENT, "bp_graph_infer: graph is NULL");
  return bpg_infer(g, NULL);
}
