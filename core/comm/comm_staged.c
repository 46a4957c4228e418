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

static bp_status_t run_engine(void* user) {
  staged_job_t* j = user;
  bp_kit_comm_error_t e;
  bp_status_t st = bp_kit_comm_run(j->comm->engine, j->kit, j->n, &e);
  if (st != BP_OK) {
    /* A host function's error poisons the stream; its message reaches the
     * application through the plugin's report, which is the core here. */
    const bp_host_services_t* host = bp__host_services();
    char msg[320];
    snprintf(msg, sizeof(msg), "host-staged collective: %s", e.text);
    if (host && host->report) host->report(host->host_ctx, st, msg);
  }
  return st;
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
