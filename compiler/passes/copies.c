/* Pass: steps, buffers and copies between devices.
 *
 * Walks the placed nodes in order and gives every value a slot (a buffer)
 * on each device that reads it: a node's outputs get slots on its device;
 * an input read on another device than the one that produced it gets a
 * slot there and a COPY step before its first reader. A copy waits for the
 * destination stream (its buffer may be reused memory still being read)
 * and the destination waits for the copy (events recorded at run time), so
 * each device keeps one in-order stream and devices overlap otherwise.
 * Nodes are visited in the run order of passes/regions.c; a compiled
 * region is one REGION step over its arguments (values internal to it get
 * no buffer).
 */
#include <stdlib.h>
#include <string.h>

#include "../graph_exec.h"

/* The slot of value v on device d: made on first use, with a COPY step
 * from its home slot when another device produced it. */
static bp_status_t bpg_slot_on(bp_graph_exec_t* x, uint32_t* vslot, uint32_t v, uint32_t d, uint32_t* out) {
  uint32_t nd = x->num_devs;
  uint32_t* here = &vslot[(size_t)v * nd + d];
  if (*here == UINT32_MAX) {
    const bpg_value_t* val = &x->g->values[v];
    bp_status_t st = bpg_exec_new_slot(x, v, d, here);
    if (st != BP_OK) return st;
    if (val->kind == BP_GRAPH_VALUE_NODE) {
      /* Produced elsewhere: a copy from its home slot. */
      uint32_t src = x->home_slot[v];
      uint32_t s;
      st = bpg_exec_new_step(x, &s);
      if (st != BP_OK) return st;
      bpg_step_t* step = &x->steps[s];
      step->kind = BPG_STEP_COPY;
      step->dev = d;
      step->src_slot = src;
      step->dst_slot = *here;
      x->slots[src].last_step = s;
      x->slots[*here].def_step = s;
      step->est_ns = bpg_copy_cost(x, x->slots[*here].bytes, x->slots[src].dev, d);
      x->num_copies++;
      x->copy_bytes += x->slots[*here].bytes;
    }
  }
  *out = *here;
  return BP_OK;
}

/* A NODE step (one node) or a REGION step (region r: its arguments). */
static bp_status_t bpg_unit_step(bp_graph_exec_t* x, uint32_t* vslot, uint32_t n, uint32_t r) {
  const bp_graph_t* g = x->g;
  const bpg_node_t* node = &g->nodes[n];
  const bpg_region_t* reg = r == UINT32_MAX ? NULL : &x->regions[r];
  uint32_t d = reg ? reg->dev : x->node_dev[n];
  uint32_t nin = reg ? reg->num_inputs : node->num_in;
  uint32_t nout = reg ? reg->num_outputs : node->num_out;
  uint32_t* in_slots = x->slot_refs + x->num_refs;
  uint32_t* out_slots = in_slots + nin;
  x->num_refs += nin + nout;
  bp_status_t st = BP_OK;
  for (uint32_t i = 0; i < nin && st == BP_OK; ++i) {
    uint32_t v = reg ? reg->args[i] : node->in[i];
    in_slots[i] = UINT32_MAX;
    if (v != BP_GRAPH_NO_VALUE) st = bpg_slot_on(x, vslot, v, d, &in_slots[i]);
  }
  if (st != BP_OK) return st;
  uint32_t s;
  st = bpg_exec_new_step(x, &s);
  if (st != BP_OK) return st;
  bpg_step_t* step = &x->steps[s];
  step->kind = reg ? BPG_STEP_REGION : BPG_STEP_NODE;
  step->node = reg ? r : n;
  step->dev = d;
  step->in_slots = in_slots;
  step->out_slots = out_slots;
  step->est_ns = reg ? reg->est_ns : bpg_node_cost(x, n, d);
  for (uint32_t i = 0; i < nin; ++i) {
    if (in_slots[i] != UINT32_MAX) x->slots[in_slots[i]].last_step = s;
  }
  for (uint32_t k = 0; k < nout && st == BP_OK; ++k) {
    uint32_t v = reg ? reg->args[nin + k] : node->out[k];
    st = bpg_exec_new_slot(x, v, d, &out_slots[k]);
    if (st != BP_OK) break;
    vslot[(size_t)v * x->num_devs + d] = out_slots[k];
    x->home_slot[v] = out_slots[k];
    x->slots[out_slots[k]].def_step = s;
    x->slots[out_slots[k]].last_step = s;
    if (reg == NULL && bpg_is_alias_view(node->op)) {
      /* A view: no memory of its own; memplan keeps its input alive. */
      x->slots[out_slots[k]].alias_of = in_slots[0];
      x->slots[out_slots[k]].bytes = 0;
    }
  }
  return st;
}

bp_status_t bpg_pass_copies(bp_graph_exec_t* x) {
  bp_graph_t* g = x->g;
  uint32_t nd = x->num_devs;
  uint32_t* vslot = malloc(sizeof(uint32_t) * ((size_t)g->num_values * nd + 1));
  size_t refs = 0;
  for (uint32_t n = 0; n < g->num_nodes; ++n) {
    if (!g->nodes[n].dead) refs += g->nodes[n].num_in + g->nodes[n].num_out;
  }
  x->slot_refs = malloc(sizeof(uint32_t) * (refs + 1));
  if (vslot == NULL || x->slot_refs == NULL) {
    free(vslot);
    return bpg_error(BP_RESOURCE_EXHAUSTED, "copies: out of memory");
  }
  memset(vslot, 0xFF, sizeof(uint32_t) * ((size_t)g->num_values * nd + 1));
  bp_status_t st = BP_OK;
  uint32_t count = x->order ? x->num_order : g->num_nodes;
  for (uint32_t i = 0; i < count && st == BP_OK; ++i) {
    uint32_t n = x->order ? x->order[i] : i;
    if (g->nodes[n].dead) continue;
    uint32_t r = x->node_region ? x->node_region[n] : UINT32_MAX;
    if (r != UINT32_MAX && x->regions[r].nodes[0] != n) continue; /* the region's step is made at its first node */
    st = bpg_unit_step(x, vslot, n, r);
  }
  if (st == BP_OK) {
    for (uint32_t i = 0; i < g->num_outputs; ++i) {
      uint32_t h = x->home_slot[g->outputs[i]];
      if (h != UINT32_MAX) x->slots[h].is_output = 1;
    }
  }
  free(vslot);
  return st;
}
