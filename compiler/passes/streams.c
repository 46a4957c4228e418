/* Pass: streams, after copies and before memory planning.
 *
 * Per device, steps are given streams in step order, deterministically: a
 * step continues the lowest stream whose last step produced one of its
 * inputs; a step that reads nothing a stream's last step produced (an
 * independent branch) starts the next unused stream when it is small
 * (BPG_STREAM_SMALL), up to BPG_MAX_STREAMS (else stream 0). Copies, steps that read a copy's result and steps whose
 * outputs a copy reads stay on stream 0 (copies are ordered against stream
 * 0 by their events). A step that reads a value produced on another stream
 * of its device waits for that step's event (recorded when `signals`);
 * A view step runs on the stream that wrote the buffer it views, and its
 * readers count as readers of that buffer's writer.
 * every extra stream waits at the start of a run for stream 0 (inputs and
 * constants staged). Memory planning then gives every buffer a step on an
 * extra stream touches a range of its own for the whole run (no reuse
 * across streams that run concurrently; no in-place there).
 */
#include <stdlib.h>
#include <string.h>

#include "../graph_exec.h"

/* A step opens a stream only when the cost model puts it within this many
 * launch overheads of its device: work that small leaves the device idle
 * part of the time, and overlapping it hides the fixed costs; a larger
 * step fills the device alone (a GEMM uses every core), so running another
 * beside it gains nothing and its buffers would be held for the whole run. */
#define BPG_STREAM_SMALL 8.0

bp_stream_t* bpg_stream(const bp_graph_exec_t* x, uint32_t dev, uint32_t k) {
  return k == 0 ? x->devs[dev].stream : x->devs[dev].extra[k - 1];
}

static uint32_t bpg_step_nin(const bp_graph_exec_t* x, const bpg_step_t* s) {
  return s->kind == BPG_STEP_REGION ? x->regions[s->node].num_inputs : x->g->nodes[s->node].num_in;
}

static uint32_t bpg_step_nout(const bp_graph_exec_t* x, const bpg_step_t* s) {
  return s->kind == BPG_STEP_REGION ? x->regions[s->node].num_outputs : x->g->nodes[s->node].num_out;
}

bp_status_t bpg_pass_streams(bp_graph_exec_t* x) {
  for (uint32_t d = 0; d < x->num_devs; ++d) x->devs[d].num_streams = 1;
  for (uint32_t i = 0; i < x->num_steps; ++i) {
    x->steps[i].stream = 0;
    x->steps[i].signals = 0;
  }
  if (x->flags & BP_GRAPH_ONE_STREAM) return BP_OK;
  uint8_t* copied = calloc(x->num_slots + 1, 1); /* 1: a copy reads it; 2: a copy wrote it */
  if (copied == NULL) return bpg_error(BP_RESOURCE_EXHAUSTED, "streams: out of memory");
  for (uint32_t i = 0; i < x->num_steps; ++i) {
    const bpg_step_t* s = &x->steps[i];
    if (s->kind != BPG_STEP_COPY) continue;
    copied[s->src_slot] |= 1;
    copied[s->dst_slot] |= 2;
  }
  uint32_t tail[BPG_MAX_DEVICES][BPG_MAX_STREAMS];
  memset(tail, 0xFF, sizeof(tail));
  for (uint32_t i = 0; i < x->num_steps; ++i) {
    bpg_step_t* s = &x->steps[i];
    uint32_t d = s->dev;
    if (s->kind == BPG_STEP_COPY) {
      tail[d][0] = i;
      continue;
    }
    uint32_t nin = bpg_step_nin(x, s), nout = bpg_step_nout(x, s);
    if (s->kind == BPG_STEP_NODE && bpg_is_alias_view(x->g->nodes[s->node].op)) {
      /* A view does no work: it stays on its buffer's writer's stream and
       * leaves the streams' tails alone (its readers follow that writer). */
      uint32_t root = bpg_slot_root(x, s->in_slots[0]);
      const bpg_slot_t* r = &x->slots[root];
      s->stream = r->dev == d && x->g->values[r->value].kind == BP_GRAPH_VALUE_NODE ? x->steps[r->def_step].stream : 0;
      continue;
    }
    int pinned = 0;
    for (uint32_t k = 0; k < nin; ++k) {
      if (s->in_slots[k] != UINT32_MAX && (copied[s->in_slots[k]] & 2)) pinned = 1;
    }
    for (uint32_t k = 0; k < nout; ++k) {
      if (copied[s->out_slots[k]] & 1) pinned = 1;
    }
    uint32_t chosen = UINT32_MAX;
    int any_tail = 0;
    for (uint32_t q = 0; q < x->devs[d].num_streams && chosen == UINT32_MAX; ++q) {
      if (tail[d][q] == UINT32_MAX) continue;
      any_tail = 1;
      for (uint32_t k = 0; k < nin; ++k) {
        uint32_t sl = s->in_slots[k] == UINT32_MAX ? UINT32_MAX : bpg_slot_root(x, s->in_slots[k]);
        if (sl != UINT32_MAX && x->slots[sl].def_step == tail[d][q] && x->slots[sl].dev == d &&
            x->g->values[x->slots[sl].value].kind == BP_GRAPH_VALUE_NODE) {
          chosen = q;
          break;
        }
      }
    }
    if (pinned) chosen = 0;
    if (chosen == UINT32_MAX) {
      int small = s->est_ns <= BPG_STREAM_SMALL * x->devs[d].launch_ns;
      chosen = !any_tail || !small || x->devs[d].num_streams >= BPG_MAX_STREAMS ? 0 : x->devs[d].num_streams++;
    }
    s->stream = chosen;
    tail[d][chosen] = i;
    /* Producers on other streams of this device signal this step. */
    for (uint32_t k = 0; k < nin; ++k) {
      uint32_t sl = s->in_slots[k];
      if (sl == UINT32_MAX || x->slots[sl].dev != d) continue;
      if (x->g->values[x->slots[sl].value].kind != BP_GRAPH_VALUE_NODE) continue;
      bpg_step_t* p = &x->steps[x->slots[sl].def_step];
      if (p->stream != chosen) p->signals = 1;
    }
  }
  free(copied);
  /* Buffers an extra stream touches: their own range for the whole run. */
  for (uint32_t i = 0; i < x->num_steps; ++i) {
    const bpg_step_t* s = &x->steps[i];
    if (s->kind == BPG_STEP_COPY || s->stream == 0) continue;
    uint32_t n = bpg_step_nin(x, s) + bpg_step_nout(x, s);
    for (uint32_t k = 0; k < n; ++k) {
      if (s->in_slots[k] != UINT32_MAX) x->slots[s->in_slots[k]].whole_run = 1;
    }
  }
  return BP_OK;
}
