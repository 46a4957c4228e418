/* Pass: memory planning. Per device, the intermediates (node outputs and
 * copies that are not graph outputs) share one arena: each gets an offset
 * such that no two buffers alive at the same step overlap (greedy by size,
 * first fit, as TFLite's and XLA's planners do). An elementwise node may
 * write its output over an input that dies at that node with the same
 * shape and element size (the core accepts exact in-place aliases for
 * these ops). The arena's size is the planned peak; with the constants
 * uploaded to the device it must fit the device's limit. A compiled region
 * may write an output over an input in the same way where it declared the
 * pair (donation, bp_region_info_t.aliases); its workspace (the largest of
 * the device's regions, one per stream that runs regions) counts in the
 * device's peak. Buffers that steps on an extra stream touch (streams.c)
 * are alive for the whole run and never in place. Without planning (BP_GRAPH_NO_MEMPLAN) every buffer gets
 * its own range; that sum is reported as the unplanned figure either way.
 */
#include <stdlib.h>
#include <string.h>

#include "../graph_exec.h"

static uint64_t bpg_align(uint64_t b) { return (b + BPG_ALIGN - 1) / BPG_ALIGN * BPG_ALIGN; }

static int bpg_planned(const bp_graph_exec_t* x, const bpg_slot_t* s) {
  return x->g->values[s->value].kind == BP_GRAPH_VALUE_NODE && !s->is_output && s->alias_of == UINT32_MAX;
}

/* A view's buffer is its input's: the input lives until the view's last
 * reader, is a fresh buffer per run when the view is a graph output, and
 * lives for the whole run when the view is touched on an extra stream.
 * Slots are made in step order, so walking them backwards carries a chain
 * of views to its root. */
static void bpg_alias_lifetimes(bp_graph_exec_t* x) {
  for (uint32_t s = x->num_slots; s-- > 0;) {
    const bpg_slot_t* v = &x->slots[s];
    if (v->alias_of == UINT32_MAX) continue;
    bpg_slot_t* in = &x->slots[v->alias_of];
    if (in->last_step < v->last_step) in->last_step = v->last_step;
    in->is_output |= v->is_output;
    in->whole_run |= v->whole_run;
  }
}

/* A buffer's planned lifetime (steps): whole-run buffers overlap everything. */
static uint32_t bpg_lo(const bpg_slot_t* s) { return s->whole_run ? 0 : s->def_step; }
static uint32_t bpg_hi(const bpg_slot_t* s) { return s->whole_run ? UINT32_MAX : s->last_step; }

static uint32_t bpg_root(const bp_graph_exec_t* x, uint32_t s) {
  while (x->slots[s].inplace_of != UINT32_MAX) s = x->slots[s].inplace_of;
  return s;
}

static void bpg_inplace(bp_graph_exec_t* x) {
  uint8_t* taken = calloc(x->num_slots + 1, 1);
  if (taken == NULL) return; /* no in-place reuse: still correct */
  for (uint32_t si = 0; si < x->num_steps; ++si) {
    const bpg_step_t* st = &x->steps[si];
    const bpg_region_t* reg = st->kind == BPG_STEP_REGION ? &x->regions[st->node] : NULL;
    if (reg == NULL && (st->kind != BPG_STEP_NODE || !bp_op_is_elementwise(x->g->nodes[st->node].op))) continue;
    uint32_t nin = reg ? reg->num_inputs : x->g->nodes[st->node].num_in;
    uint32_t nout = reg ? reg->num_outputs : x->g->nodes[st->node].num_out;
    for (uint32_t k = 0; k < nout; ++k) {
      bpg_slot_t* o = &x->slots[st->out_slots[k]];
      if (!bpg_planned(x, o) || o->whole_run) continue;
      const bpg_value_t* ov = &x->g->values[o->value];
      for (uint32_t i = 0; i < nin; ++i) {
        uint32_t is = st->in_slots[i];
        if (is == UINT32_MAX || taken[is]) continue;
        if (reg != NULL) {
          /* A region: only the donation pairs it declared, and only in
           * programs built here (every input loaded before any store; a
           * program a plugin builds from nodes may load an input after
           * storing over it). */
          if (reg->kind != BP_REGION_EW_PROGRAM) continue;
          int declared = 0;
          for (uint32_t a = 0; a < reg->num_aliases; ++a) {
            declared |= reg->alias_out[a] == nin + k && reg->alias_in[a] == i;
          }
          if (!declared) continue;
        }
        bpg_slot_t* in = &x->slots[is];
        const bpg_value_t* iv = &x->g->values[in->value];
        if (!bpg_planned(x, in) || in->whole_run || in->last_step != si || in->dev != o->dev || in->bytes != o->bytes ||
            bp_dtype_size(iv->dtype) != bp_dtype_size(ov->dtype) || iv->rank != ov->rank ||
            (reg != NULL && iv->dtype != ov->dtype) ||
            memcmp(iv->dims, ov->dims, sizeof(int64_t) * iv->rank) != 0) {
          continue;
        }
        /* The same input may feed two operands (x * x), also through a
         * view (x + permute(x)): alias only once, never under a view. */
        int twice = 0;
        for (uint32_t j = 0; j < nin; ++j) {
          uint32_t r = st->in_slots[j];
          twice += r != UINT32_MAX && (r == is || bpg_slot_root(x, r) == is);
        }
        if (twice > 1) continue;
        taken[is] = 1;
        o->inplace_of = is;
        uint32_t r = bpg_root(x, is);
        if (x->slots[r].last_step < o->last_step) x->slots[r].last_step = o->last_step;
        break;
      }
    }
  }
  free(taken);
}

typedef struct bpg_item {
  uint32_t slot;
  uint64_t bytes;
} bpg_item_t;

static int bpg_item_cmp(const void* a, const void* b) {
  const bpg_item_t* x = a;
  const bpg_item_t* y = b;
  if (x->bytes != y->bytes) return x->bytes > y->bytes ? -1 : 1;
  return x->slot < y->slot ? -1 : 1; /* deterministic */
}

/* Ascending offset (kept in `bytes`). */
static int bpg_off_cmp(const void* a, const void* b) {
  const bpg_item_t* x = a;
  const bpg_item_t* y = b;
  if (x->bytes != y->bytes) return x->bytes < y->bytes ? -1 : 1;
  return 0;
}

bp_status_t bpg_pass_memplan(bp_graph_exec_t* x) {
  int plan = !(x->flags & BP_GRAPH_NO_MEMPLAN);
  /* Lifetimes: a chain of in-place slots lives until its last reader. */
  for (uint32_t s = 0; s < x->num_slots; ++s) x->slots[s].inplace_of = UINT32_MAX;
  bpg_alias_lifetimes(x);
  if (plan) bpg_inplace(x);
  for (uint32_t s = 0; s < x->num_slots; ++s) {
    if (bpg_planned(x, &x->slots[s])) x->unplanned_bytes += bpg_align(x->slots[s].bytes);
  }
  bpg_item_t* items = malloc(sizeof(bpg_item_t) * (x->num_slots + 1));
  uint32_t* placed = malloc(sizeof(uint32_t) * (x->num_slots + 1));
  bpg_item_t* live = malloc(sizeof(bpg_item_t) * (x->num_slots + 1));
  if (items == NULL || placed == NULL || live == NULL) {
    free(live);
    free(items);
    free(placed);
    return bpg_error(BP_RESOURCE_EXHAUSTED, "memplan: out of memory");
  }
  bp_status_t st = BP_OK;
  for (uint32_t d = 0; d < x->num_devs && st == BP_OK; ++d) {
    uint32_t ni = 0, np = 0;
    for (uint32_t s = 0; s < x->num_slots; ++s) {
      bpg_slot_t* sl = &x->slots[s];
      if (sl->dev != d || !bpg_planned(x, sl) || sl->inplace_of != UINT32_MAX) continue;
      items[ni].slot = s;
      items[ni].bytes = bpg_align(sl->bytes ? sl->bytes : 1);
      ni++;
    }
    if (plan) qsort(items, ni, sizeof(bpg_item_t), bpg_item_cmp);
    uint64_t peak = 0;
    for (uint32_t i = 0; i < ni; ++i) {
      bpg_slot_t* sl = &x->slots[items[i].slot];
      uint64_t off = 0;
      if (!plan) {
        off = peak;
      } else {
        /* First fit among the placed buffers whose lifetimes overlap,
         * swept in offset order. */
        uint32_t nl = 0;
        for (uint32_t j = 0; j < np; ++j) {
          const bpg_slot_t* o = &x->slots[placed[j]];
          if (bpg_hi(o) < bpg_lo(sl) || bpg_hi(sl) < bpg_lo(o)) continue;
          live[nl].slot = placed[j];
          live[nl].bytes = o->offset;
          nl++;
        }
        qsort(live, nl, sizeof(bpg_item_t), bpg_off_cmp);
        for (uint32_t j = 0; j < nl; ++j) {
          const bpg_slot_t* o = &x->slots[live[j].slot];
          uint64_t end = o->offset + bpg_align(o->bytes ? o->bytes : 1);
          if (off + items[i].bytes <= o->offset) break;
          if (end > off) off = end;
        }
      }
      sl->offset = off;
      placed[np++] = items[i].slot;
      if (off + items[i].bytes > peak) peak = off + items[i].bytes;
    }
    /* The regions' workspace after the planned buffers (a separate buffer
     * at run time, counted in the peak). */
    uint64_t ws = 0;
    uint32_t ws_on = 0; /* bit per stream that runs a region needing one */
    for (uint32_t si = 0; si < x->num_steps; ++si) {
      const bpg_step_t* stp = &x->steps[si];
      if (stp->kind != BPG_STEP_REGION || stp->dev != d || x->regions[stp->node].workspace_bytes == 0) continue;
      if (x->regions[stp->node].workspace_bytes > ws) ws = x->regions[stp->node].workspace_bytes;
      ws_on |= 1u << stp->stream;
    }
    x->devs[d].ws_bytes = ws;
    x->devs[d].ws_streams = (uint32_t)__builtin_popcount(ws_on);
    x->devs[d].arena_bytes = peak;
    peak += bpg_align(ws) * x->devs[d].ws_streams;
    /* Constants stay for the executable's life beside the arena. */
    uint64_t consts = 0;
    for (uint32_t s = 0; s < x->num_slots; ++s) {
      const bpg_slot_t* sl = &x->slots[s];
      if (sl->dev == d && x->g->values[sl->value].kind == BP_GRAPH_VALUE_CONSTANT) consts += bpg_align(sl->bytes);
    }
    x->devs[d].const_bytes = consts;
    if (peak > x->devs[d].limit_bytes || consts > x->devs[d].limit_bytes - peak) {
      if (st == BP_OK) {
        x->over_dev = d;
        x->over_bytes = peak + consts - x->devs[d].limit_bytes;
      }
      st = bpg_error(BP_RESOURCE_EXHAUSTED,
                     "memplan: %s needs %llu bytes of intermediates at peak and %llu of constants, over its limit of %llu bytes",
                     bp_device_name(x->devs[d].device), (unsigned long long)peak, (unsigned long long)consts,
                     (unsigned long long)x->devs[d].limit_bytes);
    }
  }
  /* In-place slots take their root's offset. */
  for (uint32_t s = 0; s < x->num_slots; ++s) {
    bpg_slot_t* sl = &x->slots[s];
    if (!bpg_planned(x, sl)) sl->offset = BPG_NO_OFFSET;
    else if (sl->inplace_of != UINT32_MAX) sl->offset = x->slots[bpg_root(x, s)].offset;
  }
  free(live);
  free(items);
  free(placed);
  return st;
}
