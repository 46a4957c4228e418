/* libbackplane_graph: running an executable.
 *
 * Each step is dispatched on its device's stream: a node with bp_op_run
 * (outputs written into the planned arena views, graph outputs allocated
 * fresh for the caller), a compiled region with bp_region_launch (the
 * same for its output arguments, the device's workspace buffer), a copy with bp_copy_buffer between events that
 * order it after the destination's earlier readers and before its
 * readers. The run ends by synchronizing every stream (blocking call).
 * Tensors of one run are released at its end; planned views and uploaded
 * constants live as long as the executable.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "graph_exec.h"

static double bpg_now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

/* Streams, constants, arenas and their views, on the first run (a compile
 * or a load does not touch the devices). */
static bp_status_t bpg_prepare_memory(bp_graph_exec_t* x) {
  for (uint32_t d = 0; d < x->num_devs; ++d) {
    bpg_dev_t* dev = &x->devs[d];
    bp_status_t st = BP_OK;
    if (dev->stream == NULL) st = bp_stream_create(dev->device, NULL, &dev->stream);
    for (uint32_t k = 1; k < dev->num_streams && st == BP_OK; ++k) {
      if (dev->extra[k - 1] == NULL) st = bp_stream_create(dev->device, NULL, &dev->extra[k - 1]);
    }
    if (st == BP_OK && dev->num_streams > 1 && dev->start_ev == NULL) st = bp_event_create(dev->device, NULL, &dev->start_ev);
    if (st != BP_OK) return st;
  }
  for (uint32_t i = 0; i < x->num_steps; ++i) {
    bpg_step_t* step = &x->steps[i];
    if (step->signals && step->ev_done == NULL) {
      bp_status_t st = bp_event_create(x->devs[step->dev].device, NULL, &step->ev_done);
      if (st != BP_OK) return st;
    }
    if (step->kind == BPG_STEP_REGION && x->regions[step->node].workspace_bytes > 0 &&
        x->devs[step->dev].ws[step->stream] == NULL) {
      bpg_dev_t* dev = &x->devs[step->dev];
      bp_status_t st = bp_buffer_allocate(dev->device, 0, dev->ws_bytes, &dev->ws[step->stream]);
      if (st != BP_OK) return st;
    }
  }
  bp_status_t cst = bpg_exec_upload_constants(x);
  if (cst != BP_OK) return cst;
  for (uint32_t d = 0; d < x->num_devs; ++d) {
    bpg_dev_t* dev = &x->devs[d];
    if (dev->arena != NULL || dev->arena_bytes == 0) continue;
    bp_status_t st = bp_buffer_allocate(dev->device, 0, dev->arena_bytes, &dev->arena);
    if (st != BP_OK) return st;
  }
  for (uint32_t s = 0; s < x->num_slots; ++s) {
    bpg_slot_t* sl = &x->slots[s];
    if (sl->offset == BPG_NO_OFFSET || sl->planned != NULL) continue;
    const bpg_value_t* v = &x->g->values[sl->value];
    bp_status_t st = bp_tensor_from_buffer(x->devs[sl->dev].arena, v->dtype, v->rank, v->dims, NULL,
                                           sl->offset, &sl->planned);
    if (st != BP_OK) return st;
  }
  return BP_OK;
}

static bp_status_t bpg_check_inputs(const bp_graph_exec_t* x, const bp_tensor_t* const* inputs,
                                    uint32_t n) {
  const bp_graph_t* g = x->g;
  if (n != g->num_inputs || (n > 0 && inputs == NULL)) {
    return bpg_error(BP_INVALID_ARGUMENT, "bp_graph_exec_run: the graph has %u inputs, got %u", g->num_inputs, n);
  }
  for (uint32_t i = 0; i < n; ++i) {
    const bpg_value_t* v = &g->values[g->inputs[i]];
    const bp_tensor_t* t = inputs[i];
    char vb[32];
    const char* name = bpg_value_name(g, g->inputs[i], vb, sizeof(vb));
    if (t == NULL) return bpg_error(BP_INVALID_ARGUMENT, "bp_graph_exec_run: input '%s' is NULL", name);
    int same = bp_tensor_dtype(t) == v->dtype && bp_tensor_rank(t) == v->rank &&
               (v->rank == 0 || memcmp(bp_tensor_sizes(t), v->dims, sizeof(int64_t) * v->rank) == 0);
    if (!same) {
      char want[160] = "", got[160] = "";
      size_t a = 0, b = 0;
      for (uint32_t k = 0; k < v->rank && a < sizeof(want) - 24; ++k) {
        a += (size_t)snprintf(want + a, sizeof(want) - a, "%s%lld", k ? "," : "", (long long)v->dims[k]);
      }
      for (uint32_t k = 0; k < bp_tensor_rank(t) && b < sizeof(got) - 24; ++k) {
        b += (size_t)snprintf(got + b, sizeof(got) - b, "%s%lld", k ? "," : "", (long long)bp_tensor_sizes(t)[k]);
      }
      return bpg_error(BP_FAILED_PRECONDITION, "bp_graph_exec_run: input '%s' is %s[%s], compiled for %s[%s]",
                       name, bp_dtype_name(bp_tensor_dtype(t)), got, bp_dtype_name(v->dtype), want);
    }
  }
  return BP_OK;
}

/* A tensor of `src` on device d (src itself when it is there already). */
static bp_status_t bpg_input_on(bpg_dev_t* d, const bp_tensor_t* src, bp_tensor_t** out) {
  if (bp_tensor_device(src) == d->device) {
    bp_tensor_retain((bp_tensor_t*)src);
    *out = (bp_tensor_t*)src;
    return BP_OK;
  }
  if (!bp_tensor_is_contiguous(src)) {
    return bpg_error(BP_FAILED_PRECONDITION, "bp_graph_exec_run: an input on %s is not contiguous; the graph needs it on %s",
                     bp_device_name(bp_tensor_device(src)), bp_device_name(d->device));
  }
  bp_tensor_t* t = NULL;
  bp_status_t st = bp_tensor_create(d->device, bp_tensor_dtype(src), bp_tensor_rank(src), bp_tensor_sizes(src), &t);
  uint64_t bytes = (uint64_t)bp_tensor_numel(src) * bp_dtype_size(bp_tensor_dtype(src));
  if (st == BP_OK && bytes > 0) {
    st = bp_copy_buffer(d->stream, bp_tensor_buffer(src), bp_tensor_byte_offset(src), bp_tensor_buffer(t),
                        bp_tensor_byte_offset(t), bytes);
  }
  if (st != BP_OK) {
    bp_tensor_release(t);
    return st;
  }
  *out = t;
  return BP_OK;
}

static bp_status_t bpg_run_copy(bp_graph_exec_t* x, bpg_step_t* step) {
  bpg_slot_t* src = &x->slots[step->src_slot];
  bpg_slot_t* dst = &x->slots[step->dst_slot];
  bpg_dev_t* sd = &x->devs[src->dev];
  bpg_dev_t* dd = &x->devs[dst->dev];
  bp_status_t st = BP_OK;
  if (step->ev_src == NULL) st = bp_event_create(sd->device, NULL, &step->ev_src);
  if (st == BP_OK && step->ev_dst == NULL) st = bp_event_create(dd->device, NULL, &step->ev_dst);
  if (st != BP_OK) return st;
  if (dst->planned != NULL) {
    bp_tensor_retain(dst->planned);
    dst->t = dst->planned;
  } else {
    const bpg_value_t* v = &x->g->values[dst->value];
    st = bp_tensor_create(dd->device, v->dtype, v->rank, v->dims, &dst->t);
    if (st != BP_OK) return st;
  }
  /* The destination's earlier readers of this memory first. */
  st = bp_event_record(step->ev_dst, dd->stream);
  if (st == BP_OK) st = bp_stream_wait_event(sd->stream, step->ev_dst);
  /* A strided view is made dense on its own device first. */
  bp_tensor_t* dense = NULL;
  const bp_tensor_t* from = src->t;
  if (st == BP_OK && !bp_tensor_is_contiguous(from)) {
    st = bp_op_run(sd->stream, BP_OP_clone, &from, 1, NULL, &dense, 1);
    from = dense;
  }
  if (st == BP_OK && dst->bytes > 0) {
    st = bp_copy_buffer(sd->stream, bp_tensor_buffer(from), bp_tensor_byte_offset(from), bp_tensor_buffer(dst->t),
                        bp_tensor_byte_offset(dst->t), dst->bytes);
  }
  if (dense != NULL) {
    if (st == BP_OK) st = bp_stream_synchronize(sd->stream); /* the copy read it */
    bp_tensor_release(dense);
  }
  if (st == BP_OK) st = bp_event_record(step->ev_src, sd->stream);
  if (st == BP_OK) st = bp_stream_wait_event(dd->stream, step->ev_src);
  return st;
}

/* A step waits for the steps on other streams of its device that wrote its inputs. */
static bp_status_t bpg_wait_producers(bp_graph_exec_t* x, const bpg_step_t* step) {
  uint32_t nin = step->kind == BPG_STEP_REGION ? x->regions[step->node].num_inputs : x->g->nodes[step->node].num_in;
  for (uint32_t i = 0; i < nin; ++i) {
    uint32_t sl = step->in_slots[i];
    if (sl == UINT32_MAX || x->g->values[x->slots[sl].value].kind != BP_GRAPH_VALUE_NODE) continue;
    const bpg_step_t* p = &x->steps[x->slots[sl].def_step];
    if (p->dev != step->dev || p->stream == step->stream || p->ev_done == NULL) continue;
    bp_status_t st = bp_stream_wait_event(bpg_stream(x, step->dev, step->stream), p->ev_done);
    if (st != BP_OK) return st;
  }
  return BP_OK;
}

static bp_status_t bpg_run_node(bp_graph_exec_t* x, bpg_step_t* step) {
  const bpg_node_t* node = &x->g->nodes[step->node];
  enum { MAXI = 64 };
  const bp_tensor_t* in[MAXI];
  bp_tensor_t* out[4] = {0};
  for (uint32_t i = 0; i < node->num_in; ++i) {
    in[i] = step->in_slots[i] == UINT32_MAX ? NULL : x->slots[step->in_slots[i]].t;
  }
  for (uint32_t k = 0; k < node->num_out; ++k) out[k] = x->slots[step->out_slots[k]].planned;
  /* A view: a new tensor over its input's (no stream work, no memory). */
  bp_status_t st = bpg_is_view(node->op)
                       ? bpg_view_apply(bpg_stream(x, step->dev, step->stream), node->op, node->attrs, in[0], &out[0])
                       : bp_op_run(bpg_stream(x, step->dev, step->stream), node->op, in, node->num_in, node->attrs,
                                   out, node->num_out);
  if (st != BP_OK) {
    char label[200], msg[800];
    snprintf(msg, sizeof(msg), "%s", bp_status_message());
    bpg_node_label(x->g, step->node, label, sizeof(label));
    return bpg_error(st, "%s on %s: %s", label, bp_device_name(x->devs[step->dev].device), msg);
  }
  for (uint32_t k = 0; k < node->num_out; ++k) {
    bpg_slot_t* sl = &x->slots[step->out_slots[k]];
    if (sl->planned != NULL) bp_tensor_retain(sl->planned); /* out[k] is the planned view */
    sl->t = out[k];
  }
  return BP_OK;
}

/* A compiled region: one launch over its arguments (outputs into their
 * planned views, graph outputs into fresh tensors). */
static bp_status_t bpg_run_region(bp_graph_exec_t* x, bpg_step_t* step) {
  bpg_region_t* r = &x->regions[step->node];
  enum { MAXA = 64 };
  const bp_tensor_t* small[MAXA];
  uint32_t na = r->num_inputs + r->num_outputs;
  const bp_tensor_t** args = na <= MAXA ? small : malloc(sizeof(*args) * na);
  if (args == NULL) return bpg_error(BP_RESOURCE_EXHAUSTED, "run: out of memory");
  bp_status_t st = BP_OK;
  for (uint32_t i = 0; i < r->num_inputs; ++i) args[i] = x->slots[step->in_slots[i]].t;
  for (uint32_t k = 0; k < r->num_outputs && st == BP_OK; ++k) {
    bpg_slot_t* sl = &x->slots[step->out_slots[k]];
    if (sl->planned != NULL) {
      bp_tensor_retain(sl->planned);
      sl->t = sl->planned;
    } else {
      const bpg_value_t* v = &x->g->values[sl->value];
      st = bp_tensor_create(x->devs[r->dev].device, v->dtype, v->rank, v->dims, &sl->t);
    }
    args[r->num_inputs + k] = sl->t;
  }
  if (st == BP_OK) {
    st = bp_region_launch(bpg_stream(x, step->dev, step->stream), r->region, args, na, x->devs[r->dev].ws[step->stream]);
  }
  if (args != small) free(args);
  if (st != BP_OK) {
    char label[200], msg[800];
    snprintf(msg, sizeof(msg), "%s", bp_status_message());
    bpg_node_label(x->g, r->nodes[0], label, sizeof(label));
    return bpg_error(st, "region of %u nodes from %s on %s: %s", r->num_nodes, label,
                     bp_device_name(x->devs[step->dev].device), msg);
  }
  return BP_OK;
}

/* A graph output that is an input or a constant: a fresh copy for the caller. */
static bp_status_t bpg_output_copy(bp_graph_exec_t* x, uint32_t v, const bp_tensor_t* const* inputs,
                                   bp_tensor_t** out) {
  const bp_graph_t* g = x->g;
  const bpg_value_t* val = &g->values[v];
  bpg_dev_t* d = &x->devs[0];
  const bp_tensor_t* src = NULL;
  bp_tensor_t* tmp = NULL;
  bp_status_t st = BP_OK;
  if (val->kind == BP_GRAPH_VALUE_INPUT) {
    src = inputs[val->producer];
    d = &x->devs[0];
    for (uint32_t i = 0; i < x->num_devs; ++i) {
      if (x->devs[i].device == bp_tensor_device(src)) d = &x->devs[i];
    }
  } else {
    st = bp_tensor_create(d->device, val->dtype, val->rank, val->dims, &tmp);
    if (st == BP_OK && val->cst->size > 0) st = bp_tensor_write(d->stream, tmp, val->cst->data, val->cst->size);
    if (st == BP_OK) {
      *out = tmp;
      return BP_OK;
    }
    bp_tensor_release(tmp);
    return st;
  }
  st = bp_op_run(d->stream, BP_OP_clone, &src, 1, NULL, out, 1);
  return st;
}

bp_status_t bp_graph_exec_run(bp_graph_exec_t* x, const bp_tensor_t* const* inputs, uint32_t num_inputs,
                              bp_tensor_t** outputs, uint32_t num_outputs) {
  if (x == NULL || (outputs == NULL && num_outputs > 0)) {
    return bpg_error(BP_INVALID_ARGUMENT, "bp_graph_exec_run: exec or outputs is NULL");
  }
  if (num_outputs != x->g->num_outputs) {
    return bpg_error(BP_INVALID_ARGUMENT, "bp_graph_exec_run: the graph has %u outputs, got %u", x->g->num_outputs,
                     num_outputs);
  }
  bp_status_t st = bpg_check_inputs(x, inputs, num_inputs);
  if (st == BP_OK) st = bpg_prepare_memory(x);
  if (st != BP_OK) return st;
  double t0 = bpg_now_ns();
  /* Inputs and constants where they are read. */
  for (uint32_t s = 0; s < x->num_slots && st == BP_OK; ++s) {
    bpg_slot_t* sl = &x->slots[s];
    const bpg_value_t* v = &x->g->values[sl->value];
    if (v->kind == BP_GRAPH_VALUE_INPUT) {
      st = bpg_input_on(&x->devs[sl->dev], inputs[v->producer], &sl->t);
    } else if (v->kind == BP_GRAPH_VALUE_CONSTANT) {
      bp_tensor_retain(x->const_tensors[s]);
      sl->t = x->const_tensors[s];
    }
  }
  /* Extra streams start once stream 0 has the inputs and constants. */
  for (uint32_t d = 0; d < x->num_devs && st == BP_OK; ++d) {
    bpg_dev_t* dev = &x->devs[d];
    if (dev->num_streams < 2) continue;
    st = bp_event_record(dev->start_ev, dev->stream);
    for (uint32_t k = 1; k < dev->num_streams && st == BP_OK; ++k) st = bp_stream_wait_event(dev->extra[k - 1], dev->start_ev);
  }
  for (uint32_t i = 0; i < x->num_steps && st == BP_OK; ++i) {
    bpg_step_t* step = &x->steps[i];
    double ts = x->profile ? bpg_now_ns() : 0;
    if (step->kind != BPG_STEP_COPY) st = bpg_wait_producers(x, step);
    if (st != BP_OK) break;
    st = step->kind == BPG_STEP_COPY     ? bpg_run_copy(x, step)
         : step->kind == BPG_STEP_REGION ? bpg_run_region(x, step)
                                         : bpg_run_node(x, step);
    if (st == BP_OK && step->signals) st = bp_event_record(step->ev_done, bpg_stream(x, step->dev, step->stream));
    if (st == BP_OK && x->profile) {
      st = bp_stream_synchronize(bpg_stream(x, step->dev, step->stream));
      if (step->kind == BPG_STEP_COPY && st == BP_OK) st = bp_stream_synchronize(x->devs[x->slots[step->src_slot].dev].stream);
      step->measured_ns = bpg_now_ns() - ts;
    }
  }
  /* Outputs. */
  uint32_t done = 0;
  for (; done < num_outputs && st == BP_OK; ++done) {
    uint32_t v = x->g->outputs[done];
    uint32_t h = x->home_slot[v];
    outputs[done] = NULL;
    if (h != UINT32_MAX && x->g->values[v].kind == BP_GRAPH_VALUE_NODE &&
        x->g->values[x->slots[bpg_slot_root(x, h)].value].kind == BP_GRAPH_VALUE_CONSTANT) {
      /* A view of a constant: the caller gets a copy, never the executable's constant. */
      const bp_tensor_t* src = x->slots[h].t;
      st = bp_op_run(x->devs[x->slots[h].dev].stream, BP_OP_clone, &src, 1, NULL, &outputs[done], 1);
    } else if (h != UINT32_MAX && x->g->values[v].kind == BP_GRAPH_VALUE_NODE) {
      bp_tensor_retain(x->slots[h].t);
      outputs[done] = x->slots[h].t;
    } else {
      st = bpg_output_copy(x, v, inputs, &outputs[done]);
    }
  }
  for (uint32_t d = 0; d < x->num_devs; ++d) {
    for (uint32_t k = 0; k < x->devs[d].num_streams; ++k) {
      bp_stream_t* sk = bpg_stream(x, d, k);
      bp_status_t s2 = sk ? bp_stream_synchronize(sk) : BP_OK;
      if (st == BP_OK && s2 != BP_OK) st = s2;
    }
  }
  x->measured_ns = bpg_now_ns() - t0;
  for (uint32_t s = 0; s < x->num_slots; ++s) {
    bp_tensor_release(x->slots[s].t);
    x->slots[s].t = NULL;
  }
  if (st != BP_OK) {
    char msg[1024];
    snprintf(msg, sizeof(msg), "%s", bp_status_message());
    for (uint32_t k = 0; k < done && k < num_outputs; ++k) {
      bp_tensor_release(outputs[k]);
      outputs[k] = NULL;
    }
    return bp_status_set_message(st, msg);
  }
  return BP_OK;
}

bp_status_t bp_graph_exec_get_stats(const bp_graph_exec_t* x, bp_graph_exec_stats_t* out) {
  if (x == NULL || out == NULL || out->struct_size < BP_GRAPH_EXEC_STATS_V1_SIZE) {
    return bpg_error(BP_INVALID_ARGUMENT, "bp_graph_exec_get_stats: bad argument");
  }
  uint32_t size = out->struct_size;
  memset(out, 0, size);
  out->struct_size = size;
  out->num_steps = x->num_steps;
  for (uint32_t n = 0; n < x->g->num_nodes; ++n) out->num_nodes += !x->g->nodes[n].dead;
  out->num_regions = x->num_regions;
  out->num_copies = x->num_copies;
  for (uint32_t d = 0; d < x->num_devs; ++d) {
    out->num_devices += x->devs[d].num_nodes > 0;
    out->peak_bytes += x->devs[d].arena_bytes + x->devs[d].ws_bytes * x->devs[d].ws_streams;
  }
  out->copy_bytes = x->copy_bytes;
  out->unplanned_bytes = x->unplanned_bytes;
  out->estimated_ns = x->est_ns;
  out->measured_ns = x->measured_ns;
  return BP_OK;
}
