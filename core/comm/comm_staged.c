/* backplane core: host-staged collectives, for plugins without a comm
 * table (docs/collectives.md).
 *
 * For one (communicator, stream) and its calls, on that stream in order:
 *   1. download every send tensor (and all_to_allv's recv, whose gaps must
 *      survive) into host staging;
 *   2. a host function runs the calls on the core's host engine;
 *   3. upload every recv tensor;
 *   4. a host function frees the staging and the job.
 * The job retains the tensors it stages, so the application may release
 * them after the call. Cost: two copies over the device's host link plus
 * the host engine, declared to the compiler as tier HOST_STAGED.
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "comm/comm_internal.h"

typedef struct staged_job {
  bp_comm_t* comm;
  bp_stream_t* stream;      /* retained: where errors are kept */
  uint32_t n;
  bp_kit_coll_t* kit;       /* n calls with host pointers */
  bp_tensor_t** tensors;    /* 2n: send, recv of each call (retained, or NULL) */
  void** staging;           /* 2n host blocks (send, recv) */
  uint64_t* arrays;         /* all_to_allv's counts and displacements */
} staged_job_t;

static uint64_t tensor_bytes(const bp_tensor_t* t) {
  int64_t n = 1;
  for (uint32_t i = 0; i < t->rank; ++i) n *= t->sizes[i];
  return (uint64_t)n * bp_dtype_size(t->dtype);
}

static void job_free(staged_job_t* j) {
  if (!j) return;
  for (uint32_t i = 0; i < 2 * j->n; ++i) {
    free(j->staging ? j->staging[i] : NULL);
    if (j->tensors && j->tensors[i]) bp_tensor_release(j->tensors[i]);
  }
  if (j->stream) bp_stream_release(j->stream);
  free(j->kit);
  free(j->tensors);
  free(j->staging);
  free(j->arrays);
  free(j);
}

static void job_done(bp_comm_t* c) {
  pthread_mutex_lock(&c->mu);
  if (--c->queued == 0) pthread_cond_broadcast(&c->idle);
  pthread_mutex_unlock(&c->mu);
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
  bp_collective_options_t o = {.struct_size = sizeof(o), .root = k->root, .peer = k->root};
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
  job_free(j);
  job_done(c);
  return BP_OK;
}

static staged_job_t* job_new(bp_comm_t* comm, const bp__comm_call_t* calls, uint32_t n) {
  staged_job_t* j = calloc(1, sizeof(*j));
  if (!j) return NULL;
  j->comm = comm;
  j->n = n;
  j->kit = calloc(n, sizeof(*j->kit));
  j->tensors = calloc(2 * (size_t)n, sizeof(*j->tensors));
  j->staging = calloc(2 * (size_t)n, sizeof(*j->staging));
  size_t arrays = 0;
  for (uint32_t i = 0; i < n; ++i)
    if (calls[i].kit.kind == BP_KIT_COLL_ALL_TO_ALLV) arrays += 4 * (size_t)comm->size;
  j->arrays = arrays ? malloc(sizeof(uint64_t) * arrays) : NULL;
  if (!j->kit || !j->tensors || !j->staging || (arrays && !j->arrays)) {
    job_free(j);
    return NULL;
  }
  uint64_t* a = j->arrays;
  for (uint32_t i = 0; i < n; ++i) {
    j->kit[i] = calls[i].kit;
    bp_tensor_t* t[2] = {calls[i].send, calls[i].recv};
    for (int k = 0; k < 2; ++k) {
      if (!t[k]) continue;
      bp_tensor_retain(t[k]);
      j->tensors[2 * i + (uint32_t)k] = t[k];
      const uint64_t bytes = tensor_bytes(t[k]);
      j->staging[2 * i + (uint32_t)k] = malloc(bytes ? (size_t)bytes : 1);
      if (!j->staging[2 * i + (uint32_t)k]) {
        job_free(j);
        return NULL;
      }
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

static bp_status_t copy_down(bp_stream_t* stream, bp_tensor_t* t, void* host) {
  return bp_copy_buffer_to_host(stream, t->buffer, t->byte_offset, host, tensor_bytes(t));
}

bp_status_t bp__comm_staged_enqueue(bp_comm_t* comm, bp_stream_t* stream,
                                    const bp__comm_call_t* calls, uint32_t n) {
  staged_job_t* j = job_new(comm, calls, n);
  if (!j) return bp__error(BP_RESOURCE_EXHAUSTED, "host-staged collective: out of memory");
  bp_stream_retain(stream);
  j->stream = stream;
  bp_status_t st = BP_OK;
  for (uint32_t i = 0; st == BP_OK && i < n; ++i) {
    if (j->tensors[2 * i]) st = copy_down(stream, j->tensors[2 * i], j->staging[2 * i]);
    if (st == BP_OK && j->tensors[2 * i + 1] && j->kit[i].kind == BP_KIT_COLL_ALL_TO_ALLV)
      st = copy_down(stream, j->tensors[2 * i + 1], j->staging[2 * i + 1]);
  }
  if (st == BP_OK) st = enqueue_host(stream, run_engine, j);
  if (st != BP_OK) {
    /* Copies already queued read into the staging: let them finish. */
    char kept[512];
    snprintf(kept, sizeof(kept), "%s", bp_status_message());
    bp__stream_drain(stream);
    job_free(j);
    return bp__error(st, "%s", kept);
  }
  pthread_mutex_lock(&comm->mu);
  comm->queued++;
  pthread_mutex_unlock(&comm->mu);
  for (uint32_t i = 0; st == BP_OK && i < n; ++i) {
    bp_tensor_t* r = j->tensors[2 * i + 1];
    if (r) st = bp_copy_host_to_buffer(stream, j->staging[2 * i + 1], r->buffer, r->byte_offset,
                                       tensor_bytes(r));
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
