/* backplane core: host-staged collectives, for plugins without a comm
 * table (docs/collectives.md).
 *
 * For one (communicator, stream) and its calls, on that stream in order:
 *   1. copy every send tensor (and all_to_allv's recv, whose gaps must
 *      survive) into staging buffers of a host-visible memory space of the
 *      device, mapped for the host;
 *   2. a host function runs the calls on the engine over the mappings;
 *   3. copy the staging back into every recv tensor;
 *   4. a host function marks the job finished.
 * The staging is a device buffer, not plain host memory, because the
 * plugin reads a host source when the copy is enqueued (docs/ABI.md,
 * copies) and the results exist only after step 2; the copies in steps 1
 * and 3 are device-to-device, executed in stream order.
 * Staging buffers come from a pool per communicator and go back to it when
 * the job is collected (the next call, or bp_comm_destroy, which frees the
 * pool): nothing is released while a call may still wait for its peers,
 * because a release waits for the streams that used the buffer. As for
 * native calls, the operands are recorded as used by the stream (their
 * final release waits for it). Cost: two copies over the device's host
 * link plus the host engine, declared to the compiler as tier HOST_STAGED.
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "comm/comm_internal.h"

struct bp__staged_job {
  bp_comm_t* comm;
  bp_stream_t* stream;      /* retained: where errors are kept */
  uint32_t n;
  bp_kit_coll_t* kit;       /* n calls with host pointers */
  bp_tensor_t** tensors;    /* 2n: send, recv of each call (borrowed), or NULL */
  int32_t* slots;           /* 2n: index in the communicator's pool, or -1 */
  bp_buffer_t** buffers;    /* 2n staging buffers (the pool's), or NULL when empty */
  void** staging;           /* 2n mappings */
  uint64_t* arrays;         /* all_to_allv's counts and displacements */
  struct bp__staged_job* next; /* on the communicator's finished list */
};
typedef struct bp__staged_job staged_job_t;

/* Where an empty operand points (the engine never dereferences it). */
static unsigned char k_empty[1];

static uint64_t tensor_bytes(const bp_tensor_t* t) {
  return (uint64_t)bp_tensor_numel(t) * bp_dtype_size(t->dtype);
}

/* Returns the job's staging to the pool and frees the job; its stream
 * reference is dropped outside the lock (a last reference drains the
 * stream, whose finishing jobs take the lock). */
static void job_free(bp_comm_t* c, staged_job_t* j) {
  if (!j) return;
  pthread_mutex_lock(&c->mu);
  for (uint32_t i = 0; j->slots && i < 2 * j->n; ++i)
    if (j->slots[i] >= 0) c->pool[j->slots[i]].in_use = 0;
  pthread_mutex_unlock(&c->mu);
  if (j->stream) bp_stream_release(j->stream);
  free(j->kit);
  free(j->slots);
  free(j->tensors);
  free(j->buffers);
  free(j->staging);
  free(j->arrays);
  free(j);
}

/* Frees the jobs the stream finished (never from a host function). */
void bp__comm_staged_collect(bp_comm_t* c) {
  pthread_mutex_lock(&c->mu);
  staged_job_t* j = c->finished;
  c->finished = NULL;
  pthread_mutex_unlock(&c->mu);
  while (j) {
    staged_job_t* next = j->next;
    job_free(c, j);
    j = next;
  }
}

void bp__comm_staged_free_pool(bp_comm_t* c) {
  for (uint32_t i = 0; i < c->pool_count; ++i) {
    bp_buffer_unmap(c->pool[i].buffer);
    bp_buffer_release(c->pool[i].buffer);
  }
  free(c->pool);
  c->pool = NULL;
  c->pool_count = c->pool_cap = 0;
}

/* A free pool buffer of at least `bytes` (mapped), made when none fits;
 * -1 with the thread's message on failure. */
static int32_t pool_take(bp_comm_t* c, uint32_t space, uint64_t bytes) {
  pthread_mutex_lock(&c->mu);
  int32_t best = -1;
  for (uint32_t i = 0; i < c->pool_count; ++i)
    if (!c->pool[i].in_use && c->pool[i].size >= bytes &&
        (best < 0 || c->pool[i].size < c->pool[best].size))
      best = (int32_t)i;
  if (best >= 0) c->pool[best].in_use = 1;
  pthread_mutex_unlock(&c->mu);
  if (best >= 0) return best;
  bp_buffer_t* buf = NULL;
  void* map = NULL;
  bp_status_t st = bp_buffer_allocate(c->device, space, bytes, &buf);
  if (st == BP_OK) st = bp_buffer_map(buf, 0, bytes, &map);
  if (st != BP_OK) {
    bp_buffer_release(buf);
    return -1;
  }
  pthread_mutex_lock(&c->mu);
  if (c->pool_count == c->pool_cap) {
    uint32_t cap = c->pool_cap ? 2 * c->pool_cap : 8;
    bp__staging_t* grown = realloc(c->pool, sizeof(*grown) * cap);
    if (!grown) {
      pthread_mutex_unlock(&c->mu);
      bp_buffer_unmap(buf);
      bp_buffer_release(buf);
      bp__error(BP_RESOURCE_EXHAUSTED, "host-staged collective: out of memory");
      return -1;
    }
    c->pool = grown;
    c->pool_cap = cap;
  }
  const int32_t slot = (int32_t)c->pool_count++;
  c->pool[slot] = (bp__staging_t){buf, map, bytes, 1};
  pthread_mutex_unlock(&c->mu);
  return slot;
}

/* A host descriptor (BPP_COMM_HOST_POINTERS): buffer NULL, the address in
 * byte_offset, one dimension. */
static const bp_tensor_desc_t* host_desc(bp_tensor_desc_t* d, const void* p, uint32_t dtype,
                                         uint64_t count) {
  if (!p) return NULL;
  memset(d, 0, sizeof(*d));
  d->struct_size = sizeof(*d);
  d->dtype = dtype;
  d->rank = 1;
  d->sizes[0] = (int64_t)count;
  d->strides[0] = 1;
  d->byte_offset = (uint64_t)(uintptr_t)p;
  return d;
}

/* One call through the bridge plugin's communicator, now, on this thread. */
static bp_status_t bridge_call(bp_comm_t* c, const bp_kit_coll_t* k) {
  const bpp_comm_table_t* t = &c->bridge_plugin->comm;
  const uint64_t n = (uint64_t)c->size;
  uint64_t sc = k->count, rc = k->count;
  switch (k->kind) {
    case BP_KIT_COLL_ALL_GATHER: rc = k->count * n; break;
    case BP_KIT_COLL_REDUCE_SCATTER: sc = k->count * n; break;
    case BP_KIT_COLL_ALL_TO_ALL: sc = rc = k->count * n; break;
    case BP_KIT_COLL_ALL_TO_ALLV:
      sc = rc = 0;
      for (uint64_t q = 0; q < n; ++q) {
        if (k->send_displs[q] + k->send_counts[q] > sc) sc = k->send_displs[q] + k->send_counts[q];
        if (k->recv_displs[q] + k->recv_counts[q] > rc) rc = k->recv_displs[q] + k->recv_counts[q];
      }
      break;
    default: break;
  }
  bp_tensor_desc_t sd, rd;
  const bp_tensor_desc_t* s = host_desc(&sd, k->send, k->dtype, sc);
  const bp_tensor_desc_t* r = host_desc(&rd, k->recv, k->dtype, rc);
  bp_collective_options_t o = {.struct_size = sizeof(o), .root = k->root, .peer = k->root,
                               .compression = k->compression, .compression_block = k->block};
  bpp_comm_t pc = c->bridge;
#define CALL(slot_, ...) (t->slot_ ? t->slot_(__VA_ARGS__) : BP_UNIMPLEMENTED)
  switch (k->kind) {
    case BP_KIT_COLL_ALL_REDUCE: return CALL(all_reduce, pc, NULL, s, r, k->op, &o);
    case BP_KIT_COLL_BROADCAST: return CALL(broadcast, pc, NULL, s, r, &o);
    case BP_KIT_COLL_REDUCE: return CALL(reduce, pc, NULL, s, r, k->op, &o);
    case BP_KIT_COLL_ALL_GATHER: return CALL(all_gather, pc, NULL, s, r, &o);
    case BP_KIT_COLL_REDUCE_SCATTER: return CALL(reduce_scatter, pc, NULL, s, r, k->op, &o);
    case BP_KIT_COLL_ALL_TO_ALL: return CALL(all_to_all, pc, NULL, s, r, &o);
    case BP_KIT_COLL_ALL_TO_ALLV:
      return CALL(all_to_allv, pc, NULL, s, k->send_counts, k->send_displs, r, k->recv_counts,
                  k->recv_displs, &o);
    case BP_KIT_COLL_SEND: return CALL(send, pc, NULL, s, &o);
    case BP_KIT_COLL_RECV: return CALL(recv, pc, NULL, r, &o);
    default: return CALL(barrier, pc, NULL);
  }
#undef CALL
}

/* Runs the job's calls on the engine; an error is kept on the stream for
 * its next synchronize (with the message, which the device plugin's own
 * sticky error could not carry) and on the communicator. */
static bp_status_t run_engine(void* user) {
  staged_job_t* j = user;
  bp_comm_t* c = j->comm;
  bp_status_t st;
  char msg[600];
  if (c->engine) {
    bp_kit_comm_error_t e;
    st = bp_kit_comm_run(c->engine, j->kit, j->n, &e);
    if (st != BP_OK) snprintf(msg, sizeof(msg), "host-staged collective: %s", e.text);
  } else {
    bp_plugin_t* p = c->bridge_plugin;
    bp__clear_error();
    const int group = j->n > 1 && p->comm.group_begin && p->comm.group_end;
    st = group ? p->comm.group_begin() : BP_OK;
    for (uint32_t i = 0; st == BP_OK && i < j->n; ++i) st = bridge_call(c, &j->kit[i]);
    if (group) {
      bp_status_t end = p->comm.group_end();
      if (st == BP_OK) st = end;
    }
    if (st != BP_OK) {
      bp__plugin_error(p, st, "collective");
      snprintf(msg, sizeof(msg), "host-staged collective through %s", bp_status_message());
    }
  }
  if (st != BP_OK) bp__stream_keep_error(j->stream, st, msg);
  return BP_OK;
}

static bp_status_t finish(void* user) {
  staged_job_t* j = user;
  bp_comm_t* c = j->comm;
  pthread_mutex_lock(&c->mu);
  j->next = c->finished;
  c->finished = j;
  if (--c->queued == 0) pthread_cond_broadcast(&c->idle);
  pthread_mutex_unlock(&c->mu);
  return BP_OK;
}

/* The device's host-visible memory space for staging (host pinned first),
 * found once per communicator. */
static bp_status_t staging_space(bp_comm_t* c, uint32_t* out) {
  if (c->staging_space_known) {
    *out = c->staging_space;
    return BP_OK;
  }
  bp_memory_space_info_t spaces[16];
  uint32_t count = 0;
  bp_status_t st = bp_device_memory_spaces(c->device, 16, sizeof(spaces[0]), spaces, &count);
  if (st != BP_OK) return st;
  int best = -1;
  for (uint32_t i = 0; i < count && i < 16; ++i) {
    if (!(spaces[i].flags & BP_MEMORY_FLAG_HOST_VISIBLE)) continue;
    if (best < 0 || (spaces[i].kind == BP_MEMORY_HOST_PINNED &&
                     spaces[best].kind != BP_MEMORY_HOST_PINNED))
      best = (int)i;
  }
  if (best < 0)
    return bp__error(BP_UNIMPLEMENTED, "host-staged collective: %s has no host-visible memory "
                     "space to stage through", c->device->name);
  c->staging_space = (uint32_t)best;
  c->staging_space_known = 1;
  *out = c->staging_space;
  return BP_OK;
}

static staged_job_t* job_new(bp_comm_t* comm, const bp__comm_call_t* calls, uint32_t n,
                             uint32_t space, bp_status_t* st) {
  *st = BP_RESOURCE_EXHAUSTED;
  staged_job_t* j = calloc(1, sizeof(*j));
  if (!j) return NULL;
  j->comm = comm;
  j->n = n;
  j->kit = calloc(n, sizeof(*j->kit));
  j->tensors = calloc(2 * (size_t)n, sizeof(*j->tensors));
  j->staging = calloc(2 * (size_t)n, sizeof(*j->staging));
  j->buffers = calloc(2 * (size_t)n, sizeof(*j->buffers));
  j->slots = malloc(sizeof(int32_t) * 2 * (size_t)n);
  if (j->slots)
    for (uint32_t i = 0; i < 2 * n; ++i) j->slots[i] = -1;
  size_t arrays = 0;
  for (uint32_t i = 0; i < n; ++i)
    if (calls[i].kit.kind == BP_KIT_COLL_ALL_TO_ALLV) arrays += 4 * (size_t)comm->size;
  j->arrays = arrays ? malloc(sizeof(uint64_t) * arrays) : NULL;
  if (!j->kit || !j->tensors || !j->staging || !j->buffers || !j->slots ||
      (arrays && !j->arrays)) {
    job_free(comm, j);
    return NULL;
  }
  uint64_t* a = j->arrays;
  for (uint32_t i = 0; i < n; ++i) {
    j->kit[i] = calls[i].kit;
    bp_tensor_t* t[2] = {calls[i].send, calls[i].recv};
    for (int k = 0; k < 2; ++k) {
      if (!t[k]) continue;
      j->tensors[2 * i + (uint32_t)k] = t[k];
      const uint64_t bytes = tensor_bytes(t[k]);
      const uint32_t slot = 2 * i + (uint32_t)k;
      j->staging[slot] = k_empty;
      if (bytes == 0) continue;
      j->slots[slot] = pool_take(comm, space, bytes);
      if (j->slots[slot] < 0) {
        *st = BP_RESOURCE_EXHAUSTED;
        job_free(comm, j);
        return NULL;
      }
      j->buffers[slot] = comm->pool[j->slots[slot]].buffer;
      j->staging[slot] = comm->pool[j->slots[slot]].map;
    }
    j->kit[i].send = j->staging[2 * i];
    j->kit[i].recv = j->staging[2 * i + 1];
    if (calls[i].kit.kind == BP_KIT_COLL_ALL_TO_ALLV) {
      const uint64_t* src[4] = {calls[i].kit.send_counts, calls[i].kit.send_displs,
                                calls[i].kit.recv_counts, calls[i].kit.recv_displs};
      const uint64_t** dst[4] = {&j->kit[i].send_counts, &j->kit[i].send_displs,
                                 &j->kit[i].recv_counts, &j->kit[i].recv_displs};
      for (int k = 0; k < 4; ++k) {
        memcpy(a, src[k], sizeof(uint64_t) * (size_t)comm->size);
        *dst[k] = a;
        a += comm->size;
      }
    }
  }
  *st = BP_OK;
  return j;
}

static bp_status_t enqueue_host(bp_stream_t* stream, bp_host_func_t fn, void* user) {
  bp_plugin_t* plugin = stream->device->plugin;
  if (!plugin->core.stream_enqueue_host_func)
    return bp__error(BP_UNIMPLEMENTED, "host-staged collective: plugin %s cannot run host "
                     "functions on its streams", plugin->name);
  bp_status_t st = BP__NOTE_CALL(plugin, "stream_enqueue_host_func", NULL,
                                 plugin->core.stream_enqueue_host_func(stream->handle, fn, user));
  return st == BP_OK ? st : bp__plugin_error(plugin, st, "stream_enqueue_host_func");
}

/* Tensor -> its staging buffer (down) or back (up), in stream order. */
static bp_status_t copy_stage(bp_stream_t* stream, bp_tensor_t* t, bp_buffer_t* staging, int up) {
  if (!staging) return BP_OK; /* empty */
  return up ? bp_copy_buffer(stream, staging, 0, t->buffer, t->byte_offset, tensor_bytes(t))
            : bp_copy_buffer(stream, t->buffer, t->byte_offset, staging, 0, tensor_bytes(t));
}

bp_status_t bp__comm_staged_enqueue(bp_comm_t* comm, bp_stream_t* stream,
                                    const bp__comm_call_t* calls, uint32_t n) {
  bp__comm_staged_collect(comm);
  uint32_t space = 0;
  bp_status_t made = staging_space(comm, &space);
  if (made != BP_OK) return made;
  staged_job_t* j = job_new(comm, calls, n, space, &made);
  if (!j)
    return made == BP_RESOURCE_EXHAUSTED
               ? bp__error(made, "host-staged collective: out of memory for the staging")
               : made;
  bp_stream_retain(stream);
  j->stream = stream;
  for (uint32_t i = 0; i < 2 * n; ++i)
    if (j->tensors[i]) bp__buffer_note_use(j->tensors[i]->buffer, stream);
  bp_status_t st = BP_OK;
  for (uint32_t i = 0; st == BP_OK && i < n; ++i) {
    if (j->tensors[2 * i]) st = copy_stage(stream, j->tensors[2 * i], j->buffers[2 * i], 0);
    if (st == BP_OK && j->tensors[2 * i + 1] && j->kit[i].kind == BP_KIT_COLL_ALL_TO_ALLV)
      st = copy_stage(stream, j->tensors[2 * i + 1], j->buffers[2 * i + 1], 0);
  }
  if (st == BP_OK) st = enqueue_host(stream, run_engine, j);
  if (st != BP_OK) {
    /* Copies already queued read into the staging: let them finish. */
    char kept[512];
    snprintf(kept, sizeof(kept), "%s", bp_status_message());
    bp__stream_drain(stream);
    job_free(comm, j);
    return bp__error(st, "%s", kept);
  }
  pthread_mutex_lock(&comm->mu);
  comm->queued++;
  pthread_mutex_unlock(&comm->mu);
  for (uint32_t i = 0; st == BP_OK && i < n; ++i) {
    bp_tensor_t* r = j->tensors[2 * i + 1];
    if (r) st = copy_stage(stream, r, j->buffers[2 * i + 1], 1);
  }
  bp_status_t fin = enqueue_host(stream, finish, j);
  if (fin != BP_OK) {
    /* The engine step is queued and reads the job: wait for the stream,
     * then free it here. */
    char kept[512];
    snprintf(kept, sizeof(kept), "%s", bp_status_message());
    bp__stream_drain(stream);
    finish(j);
    return bp__error(fin, "%s", kept);
  }
  return st;
}
