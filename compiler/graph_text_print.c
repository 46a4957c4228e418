/* libbackplane_graph: printing the text format (.bpg; docs/graph.md).
 *
 * Statements come out in value creation order, so parsing the text
 * rebuilds the same ids and printing that gives the same bytes.
 */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "graph_internal.h"

static void bpg_print_type(bpg_sbuf_t* s, const bp_graph_t* g, const bpg_value_t* v) {
  bpg_sbuf_printf(s, "%s[", bp_dtype_name(v->dtype));
  for (uint32_t i = 0; i < v->rank; ++i) {
    if (i) bpg_sbuf_printf(s, ", ");
    if (BP_GRAPH_IS_SYM(v->dims[i])) bpg_sbuf_printf(s, "%s", g->syms[BP_GRAPH_SYM_INDEX(v->dims[i])]);
    else bpg_sbuf_printf(s, "%" PRId64, v->dims[i]);
  }
  bpg_sbuf_printf(s, "]");
}

static void bpg_print_values(bpg_sbuf_t* s, const bpg_value_t* v) {
  const bpg_const_t* c = v->cst;
  int64_t n = bpg_value_numel(v);
  const char* p = c->data;
  if (!bpg_text_values_dtype(v->dtype)) {
    bpg_sbuf_printf(s, "bytes(");
    for (uint64_t i = 0; i < c->size; ++i) bpg_sbuf_printf(s, "%02x", (unsigned)(uint8_t)p[i]);
    bpg_sbuf_printf(s, ")");
    return;
  }
  bpg_sbuf_printf(s, "values(");
  for (int64_t i = 0; i < n; ++i) {
    if (i) bpg_sbuf_printf(s, ", ");
    switch (v->dtype) {
      case BP_DTYPE_F32: {
        float f;
        memcpy(&f, p + 4 * i, 4);
        bpg_sbuf_double(s, (double)f);
        break;
      }
      case BP_DTYPE_F64: {
        double d;
        memcpy(&d, p + 8 * i, 8);
        bpg_sbuf_double(s, d);
        break;
      }
      case BP_DTYPE_I8: bpg_sbuf_printf(s, "%d", (int)((const int8_t*)p)[i]); break;
      case BP_DTYPE_I16: {
        int16_t x;
        memcpy(&x, p + 2 * i, 2);
        bpg_sbuf_printf(s, "%d", (int)x);
        break;
      }
      case BP_DTYPE_I32: {
        int32_t x;
        memcpy(&x, p + 4 * i, 4);
        bpg_sbuf_printf(s, "%" PRId32, x);
        break;
      }
      case BP_DTYPE_I64: {
        int64_t x;
        memcpy(&x, p + 8 * i, 8);
        bpg_sbuf_printf(s, "%" PRId64, x);
        break;
      }
      default: bpg_sbuf_printf(s, "%u", (unsigned)((const uint8_t*)p)[i]); break;
    }
  }
  bpg_sbuf_printf(s, ")");
}

static void bpg_print_node(bpg_sbuf_t* s, const bp_graph_t* g, const bpg_node_t* n) {
  char buf[32];
  for (uint32_t k = 0; k < n->num_out; ++k) {
    bpg_sbuf_printf(s, "%s%s", k ? ", " : "", bpg_value_name(g, n->out[k], buf, sizeof(buf)));
  }
  bpg_sbuf_printf(s, " = %s(", bpg_node_op_name(n->op));
  for (uint32_t i = 0; i < n->num_in; ++i) {
    bpg_sbuf_printf(s, "%s%s", i ? ", " : "", bpg_value_name(g, n->in[i], buf, sizeof(buf)));
  }
  bpg_sbuf_printf(s, ")");
  bpg_attrs_print(s, n->op, n->attrs);
  if (n->name != NULL) bpg_sbuf_printf(s, " @%s", n->name);
  bpg_sbuf_printf(s, "\n");
}

bp_status_t bp_graph_print(const bp_graph_t* g, char** out_text, size_t* out_size) {
  if (g == NULL || out_text == NULL) {
    return bpg_error(BP_INVALID_ARGUMENT, "bp_graph_print: graph or out_text is NULL");
  }
  bpg_sbuf_t s = {0};
  char buf[32];
  if (g->name != NULL) bpg_sbuf_printf(&s, "graph %s\n", g->name);
  if (g->num_syms > 0) {
    bpg_sbuf_printf(&s, "sym ");
    for (uint32_t i = 0; i < g->num_syms; ++i) bpg_sbuf_printf(&s, "%s%s", i ? ", " : "", g->syms[i]);
    bpg_sbuf_printf(&s, "\n");
  }
  for (uint32_t v = 0; v < g->num_values; ++v) {
    bpg_value_t* val = &g->values[v];
    if (val->kind == BP_GRAPH_VALUE_INPUT) {
      bpg_sbuf_printf(&s, "input %s : ", bpg_value_name(g, v, buf, sizeof(buf)));
      bpg_print_type(&s, g, val);
      bpg_sbuf_printf(&s, "\n");
    } else if (val->kind == BP_GRAPH_VALUE_CONSTANT) {
      bpg_sbuf_printf(&s, "const %s : ", bpg_value_name(g, v, buf, sizeof(buf)));
      bpg_print_type(&s, g, val);
      if (val->cst->kind == BPG_CONST_UNIFORM) {
        bpg_sbuf_printf(&s, " = uniform(seed=%" PRIu64 ", lo=", val->cst->seed);
        bpg_sbuf_double(&s, val->cst->lo);
        bpg_sbuf_printf(&s, ", hi=");
        bpg_sbuf_double(&s, val->cst->hi);
        bpg_sbuf_printf(&s, ")\n");
      } else {
        bpg_sbuf_printf(&s, " = ");
        bpg_print_values(&s, val);
        bpg_sbuf_printf(&s, "\n");
      }
    } else if (val->out_index == 0 && val->producer < g->num_nodes &&
               !g->nodes[val->producer].dead) {
      bpg_print_node(&s, g, &g->nodes[val->producer]);
    }
  }
  if (g->num_outputs > 0) {
    bpg_sbuf_printf(&s, "output ");
    for (uint32_t i = 0; i < g->num_outputs; ++i) {
      bpg_sbuf_printf(&s, "%s%s", i ? ", " : "", bpg_value_name(g, g->outputs[i], buf, sizeof(buf)));
    }
    bpg_sbuf_printf(&s, "\n");
  }
  if (s.oom || s.p == NULL) {
    free(s.p);
    if (!s.oom && (s.p = calloc(1, 1)) != NULL) {
      *out_text = s.p;
      if (out_size) *out_size = 0;
      return BP_OK;
    }
    return bpg_error(BP_RESOURCE_EXHAUSTED, "bp_graph_print: out of memory");
  }
  *out_text = s.p;
  if (out_size) *out_size = s.len;
  return BP_OK;
}

void bp_graph_text_free(char* text) { free(text); }
