/* backplane plugin kit: a complete comm table for plugins whose buffers are
 * host memory and whose streams are the kit's queues (the CPU plugin, the
 * template): collectives of the in-process engine (bp_kit_comm.h), run on
 * the stream's worker as host functions.
 *
 * Groups: a thread-local list collects the calls between the outermost
 * group_begin and group_end; group_end gives each (communicator, stream)
 * one host function that runs its calls as one engine group, so one thread
 * can drive every rank and send/recv pairs complete.
 *
 * Ownership: a queued job owns copies of the calls and of all_to_allv's
 * arrays; the communicator counts its queued jobs and comm_destroy waits
 * for them.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "bp_kit_comm.h"
#include "bp_kit_host.h"
#include "bp_kit_plugin.h"
#include "bp_kit_stream.h"
#include "bp_plugin_common.h"

struct bpp_comm_s {
  bp_kit_comm_t* engine;
  bpp_device_t device;
  pthread_mutex_t mu;
  pthread_cond_t idle;
  uint64_t queued; /* jobs enqueued and not finished, under mu */
};

typedef struct job {
  bpp_comm_t comm;
  uint32_t n;
  bp_kit_coll_t* calls;
  uint64_t* arrays; /* all_to_allv counts and displacements of every call */
} job_t;

/* The calls of the calling thread's open group. */
typedef struct pending {
  bp_kit_group_key_t key; /* comm, stream */
  bp_kit_coll_t call;
} pending_t;
static _Thread_local struct {
  uint32_t depth;
  uint32_t n, cap;
  pending_t* items;
} t_group;

static bp_status_t engine_error(bp_status_t st, const bp_kit_comm_error_t* e) {
  return bp_kit_error(st, "%s", e->text);
}

static void job_free(job_t* j) {
  if (!j) return;
  free(j->calls);
  free(j->arrays);
  free(j);
}

static void comm_job_done(bpp_comm_t c) {
  pthread_mutex_lock(&c->mu);
  if (--c->queued == 0) pthread_cond_broadcast(&c->idle);
  pthread_mutex_unlock(&c->mu);
}

static bp_status_t run_job(void* user) {
  job_t* j = user;
  bp_kit_comm_error_t e;
  bp_status_t st = bp_kit_comm_run(j->comm->engine, j->calls, j->n, &e);
  bpp_comm_t c = j->comm;
  job_free(j);
  if (st != BP_OK) st = engine_error(st, &e);
  comm_job_done(c);
  return st;
}

/* A job of `n` calls, with all_to_allv's arrays copied. */
static job_t* job_new(bpp_comm_t comm, const bp_kit_coll_t* const* calls, uint32_t n) {
  job_t* j = calloc(1, sizeof(*j));
  if (!j) return NULL;
  j->comm = comm;
  j->n = n;
  j->calls = malloc(sizeof(bp_kit_coll_t) * n);
  const size_t nr = (size_t)bp_kit_comm_size(comm->engine);
  size_t arrays = 0;
  for (uint32_t i = 0; i < n; ++i) arrays += calls[i]->kind == BP_KIT_COLL_ALL_TO_ALLV ? 4 * nr : 0;
  j->arrays = arrays ? malloc(sizeof(uint64_t) * arrays) : NULL;
  if (!j->calls || (arrays && !j->arrays)) {
    job_free(j);
    return NULL;
  }
  uint64_t* a = j->arrays;
  for (uint32_t i = 0; i < n; ++i) {
    j->calls[i] = *calls[i];
    if (calls[i]->kind != BP_KIT_COLL_ALL_TO_ALLV) continue;
    const uint64_t* src[4] = {calls[i]->send_counts, calls[i]->send_displs,
                              calls[i]->recv_counts, calls[i]->recv_displs};
    const uint64_t** dst[4] = {&j->calls[i].send_counts, &j->calls[i].send_displs,
                               &j->calls[i].recv_counts, &j->calls[i].recv_displs};
    for (int k = 0; k < 4; ++k) {
      memcpy(a, src[k], sizeof(uint64_t) * nr);
      *dst[k] = a;
      a += nr;
    }
  }
  return j;
}

static bp_status_t enqueue_job(bpp_comm_t comm, bpp_stream_t stream,
                               const bp_kit_coll_t* const* calls, uint32_t n) {
  job_t* j = job_new(comm, calls, n);
  if (!j) return BP_KIT_ERROR(BP_RESOURCE_EXHAUSTED, "collective: out of memory");
  pthread_mutex_lock(&comm->mu);
  comm->queued++;
  pthread_mutex_unlock(&comm->mu);
  bp_status_t st = bp_kit_stream_enqueue_host_func(stream, run_job, j);
  if (st != BP_OK) {
    job_free(j);
    comm_job_done(comm);
  }
  return st;
}

/* Runs `call` now (stream NULL), adds it to the open group, or enqueues. */
static bp_status_t issue(bpp_comm_t comm, bpp_stream_t stream, const bp_kit_coll_t* call) {
  if (!comm) return BP_KIT_ERROR(BP_INVALID_ARGUMENT, "collective: NULL communicator");
  bp_kit_comm_error_t e;
  const bp_status_t checked = bp_kit_coll_check(comm->engine, call, &e);
  if (checked != BP_OK) {
    /* A bad point-to-point call is this rank's alone. A bad collective is
     * still issued: the engine shows its error to every rank, which then
     * fails together instead of waiting for this one. */
    const bp_kit_comm_error_t mine = e;
    if (call->kind != BP_KIT_COLL_SEND && call->kind != BP_KIT_COLL_RECV && !t_group.depth) {
      if (stream)
        enqueue_job(comm, stream, &call, 1);
      else
        bp_kit_comm_run(comm->engine, call, 1, &e);
    }
    return engine_error(checked, &mine);
  }
  bp_status_t st;
  if (!stream && !t_group.depth) { /* BPP_COMM_HOST_POINTERS: now, on this thread */
    st = bp_kit_comm_run(comm->engine, call, 1, &e);
    return st == BP_OK ? st : engine_error(st, &e);
  }
  if (t_group.depth == 0) return enqueue_job(comm, stream, &call, 1);
  if (call->kind == BP_KIT_COLL_ALL_TO_ALLV)
    return BP_KIT_ERROR(BP_UNIMPLEMENTED, "collective: all_to_allv inside a group");
  if (t_group.n == t_group.cap) {
    uint32_t cap = t_group.cap ? t_group.cap * 2 : 16;
    pending_t* items = realloc(t_group.items, sizeof(pending_t) * cap);
    if (!items) return BP_KIT_ERROR(BP_RESOURCE_EXHAUSTED, "group: out of memory");
    t_group.items = items;
    t_group.cap = cap;
  }
  t_group.items[t_group.n++] = (pending_t){{comm, stream}, *call};
  return BP_OK;
}

/* Host address of a descriptor: a kit buffer, or (stream NULL) the
 * address itself. */
static void* desc_ptr(const bp_tensor_desc_t* d) {
  if (!d) return NULL;
  return d->buffer ? (void*)bp_kit_host_desc_ptr(d) : (void*)(uintptr_t)d->byte_offset;
}
static uint64_t desc_count(const bp_tensor_desc_t* d) {
  return d ? (uint64_t)bp_desc_numel(d) : 0;
}

static bp_kit_coll_t make_call(uint32_t kind, const bp_tensor_desc_t* send,
                               const bp_tensor_desc_t* recv, uint32_t op, int32_t root) {
  const bp_tensor_desc_t* any = send ? send : recv;
  bp_kit_coll_t c = {.kind = kind, .dtype = any ? any->dtype : 0, .op = op, .root = root};
  c.send = desc_ptr(send);
  c.recv = desc_ptr(recv);
  switch (kind) {
    case BP_KIT_COLL_ALL_GATHER: c.count = desc_count(send); break;
    case BP_KIT_COLL_REDUCE_SCATTER: c.count = desc_count(recv); break;
    case BP_KIT_COLL_ALL_TO_ALL: {
      const int64_t n = bp_desc_numel(send);
      c.count = (uint64_t)n; /* divided by the rank count by the caller */
      break;
    }
    default: c.count = desc_count(send ? send : recv); break;
  }
  return c;
}

static int32_t opt_root(const bp_collective_options_t* o) { return o ? o->root : 0; }
static int32_t opt_peer(const bp_collective_options_t* o) { return o ? o->peer : -1; }
/* The options' payload compression into the call (block 0: 256). */
static void set_compression(bp_kit_coll_t* c, const bp_collective_options_t* o) {
  if (!o || o->compression == BP_DTYPE_INVALID) return;
  c->compression = o->compression;
  c->block = o->compression_block ? o->compression_block : 256;
}

/* ------------------------------------------------------------------------ */
/* Slots                                                                     */
/* ------------------------------------------------------------------------ */
static bp_status_t comm_wrap(bpp_device_t device, bp_kit_comm_t* engine, bpp_comm_t* out) {
  bpp_comm_t c = calloc(1, sizeof(*c));
  if (!c || pthread_mutex_init(&c->mu, NULL) != 0) {
    free(c);
    bp_kit_comm_destroy(engine);
    return BP_KIT_ERROR(BP_RESOURCE_EXHAUSTED, "comm_create: out of memory");
  }
  pthread_cond_init(&c->idle, NULL);
  c->engine = engine;
  c->device = device;
  *out = c;
  return BP_OK;
}

static bp_status_t comm_create(bpp_device_t device, const bp_comm_create_info_t* info,
                               bpp_comm_t* out) {
  if (!out || !info || info->struct_size < BP_COMM_CREATE_INFO_V1_SIZE)
    return BP_KIT_ERROR(BP_INVALID_ARGUMENT, "comm_create: NULL or short argument");
  *out = NULL;
  bp_kit_comm_t* engine = NULL;
  bp_kit_comm_error_t e;
  bp_status_t st = bp_kit_comm_create(info->bootstrap, info->timeout_ns, &engine, &e);
  if (st != BP_OK) return engine_error(st, &e);
  return comm_wrap(device, engine, out);
}

static bp_status_t comm_split(bpp_comm_t comm, int32_t color, int32_t key,
                              const bp_comm_create_info_t* info, bpp_comm_t* out) {
  if (!comm || !out) return BP_KIT_ERROR(BP_INVALID_ARGUMENT, "comm_split: NULL argument");
  *out = NULL;
  bp_kit_comm_t* engine = NULL;
  bp_kit_comm_error_t e;
  bp_status_t st = bp_kit_comm_split(comm->engine, color, key, info ? info->timeout_ns : 0,
                                     &engine, &e);
  if (st != BP_OK) return engine_error(st, &e);
  return engine ? comm_wrap(comm->device, engine, out) : BP_OK;
}

static void comm_destroy(bpp_comm_t comm) {
  if (!comm) return;
  pthread_mutex_lock(&comm->mu);
  while (comm->queued) pthread_cond_wait(&comm->idle, &comm->mu);
  pthread_mutex_unlock(&comm->mu);
  bp_kit_comm_destroy(comm->engine);
  pthread_cond_destroy(&comm->idle);
  pthread_mutex_destroy(&comm->mu);
  free(comm);
}

static bp_status_t comm_abort(bpp_comm_t comm) {
  if (!comm) return BP_KIT_ERROR(BP_INVALID_ARGUMENT, "comm_abort: NULL communicator");
  bp_kit_comm_abort(comm->engine);
  return BP_OK;
}

static bp_status_t comm_get_async_error(bpp_comm_t comm) {
  if (!comm) return BP_KIT_ERROR(BP_INVALID_ARGUMENT, "comm_get_async_error: NULL communicator");
  bp_kit_comm_error_t e;
  bp_status_t st = bp_kit_comm_status(comm->engine, &e);
  return st == BP_OK ? st : engine_error(st, &e);
}

/* Host memory needs no registration; the token records the pair so that
 * deregister can refuse a foreign handle. */
typedef struct reg_token {
  bpp_comm_t comm;
  bpp_buffer_t buffer;
} reg_token_t;
static bp_status_t comm_register(bpp_comm_t comm, bpp_buffer_t buffer, void** out_handle) {
  if (!comm || !buffer || !out_handle)
    return BP_KIT_ERROR(BP_INVALID_ARGUMENT, "comm_register: NULL argument");
  reg_token_t* t = malloc(sizeof(*t));
  if (!t) return BP_KIT_ERROR(BP_RESOURCE_EXHAUSTED, "comm_register: out of memory");
  *t = (reg_token_t){comm, buffer};
  *out_handle = t;
  return BP_OK;
}
static bp_status_t comm_deregister(bpp_comm_t comm, void* handle) {
  reg_token_t* t = handle;
  if (!comm || !t) return BP_KIT_ERROR(BP_INVALID_ARGUMENT, "comm_deregister: NULL argument");
  if (t->comm != comm)
    return BP_KIT_ERROR(BP_INVALID_ARGUMENT, "comm_deregister: the handle belongs to another "
                        "communicator");
  free(t);
  return BP_OK;
}

static bp_status_t all_reduce(bpp_comm_t comm, bpp_stream_t stream, const bp_tensor_desc_t* send,
                              const bp_tensor_desc_t* recv, uint32_t op,
                              const bp_collective_options_t* o) {
  bp_kit_coll_t c = make_call(BP_KIT_COLL_ALL_REDUCE, send, recv, op, 0);
  set_compression(&c, o);
  return issue(comm, stream, &c);
}
static bp_status_t broadcast(bpp_comm_t comm, bpp_stream_t stream, const bp_tensor_desc_t* send,
                             const bp_tensor_desc_t* recv, const bp_collective_options_t* o) {
  bp_kit_coll_t c = make_call(BP_KIT_COLL_BROADCAST, send, recv, 0, opt_root(o));
  c.count = desc_count(recv);
  set_compression(&c, o); /* refused by the engine's check */
  return issue(comm, stream, &c);
}
static bp_status_t reduce(bpp_comm_t comm, bpp_stream_t stream, const bp_tensor_desc_t* send,
                          const bp_tensor_desc_t* recv, uint32_t op,
                          const bp_collective_options_t* o) {
  bp_kit_coll_t c = make_call(BP_KIT_COLL_REDUCE, send, recv, op, opt_root(o));
  set_compression(&c, o); /* refused by the engine's check */
  return issue(comm, stream, &c);
}
static bp_status_t all_gather(bpp_comm_t comm, bpp_stream_t stream, const bp_tensor_desc_t* send,
                              const bp_tensor_desc_t* recv, const bp_collective_options_t* o) {
  bp_kit_coll_t c = make_call(BP_KIT_COLL_ALL_GATHER, send, recv, 0, 0);
  set_compression(&c, o);
  return issue(comm, stream, &c);
}
static bp_status_t reduce_scatter(bpp_comm_t comm, bpp_stream_t stream,
                                  const bp_tensor_desc_t* send, const bp_tensor_desc_t* recv,
                                  uint32_t op, const bp_collective_options_t* o) {
  bp_kit_coll_t c = make_call(BP_KIT_COLL_REDUCE_SCATTER, send, recv, op, 0);
  set_compression(&c, o);
  return issue(comm, stream, &c);
}
static bp_status_t all_to_all(bpp_comm_t comm, bpp_stream_t stream, const bp_tensor_desc_t* send,
                              const bp_tensor_desc_t* recv, const bp_collective_options_t* o) {
  if (!comm) return BP_KIT_ERROR(BP_INVALID_ARGUMENT, "all_to_all: NULL communicator");
  bp_kit_coll_t c = make_call(BP_KIT_COLL_ALL_TO_ALL, send, recv, 0, 0);
  set_compression(&c, o); /* refused by the engine's check */
  const uint64_t n = (uint64_t)bp_kit_comm_size(comm->engine);
  if (c.count % n != 0)
    return BP_KIT_ERROR(BP_INVALID_ARGUMENT, "all_to_all: %llu elements do not split into %llu "
                        "blocks", (unsigned long long)c.count, (unsigned long long)n);
  c.count /= n;
  return issue(comm, stream, &c);
}
static bp_status_t all_to_allv(bpp_comm_t comm, bpp_stream_t stream, const bp_tensor_desc_t* send,
                               const uint64_t* send_counts, const uint64_t* send_displs,
                               const bp_tensor_desc_t* recv, const uint64_t* recv_counts,
                               const uint64_t* recv_displs, const bp_collective_options_t* o) {
  bp_kit_coll_t c = make_call(BP_KIT_COLL_ALL_TO_ALLV, send, recv, 0, 0);
  set_compression(&c, o); /* refused by the engine's check */
  c.send_counts = send_counts;
  c.send_displs = send_displs;
  c.recv_counts = recv_counts;
  c.recv_displs = recv_displs;
  if (comm && send_counts && send_displs && recv_counts && recv_displs) {
    const uint64_t sn = desc_count(send), rn = desc_count(recv);
    for (int32_t q = 0; q < bp_kit_comm_size(comm->engine); ++q)
      if (send_displs[q] > sn || send_counts[q] > sn - send_displs[q] || recv_displs[q] > rn ||
          recv_counts[q] > rn - recv_displs[q])
        return BP_KIT_ERROR(BP_OUT_OF_RANGE, "all_to_allv: block of rank %d lies outside the "
                            "send (%llu) or recv (%llu) elements", q, (unsigned long long)sn,
                            (unsigned long long)rn);
  }
  return issue(comm, stream, &c);
}
static bp_status_t send(bpp_comm_t comm, bpp_stream_t stream, const bp_tensor_desc_t* data,
                        const bp_collective_options_t* o) {
  bp_kit_coll_t c = make_call(BP_KIT_COLL_SEND, data, NULL, 0, opt_peer(o));
  set_compression(&c, o); /* refused by the engine's check */
  return issue(comm, stream, &c);
}
static bp_status_t recv(bpp_comm_t comm, bpp_stream_t stream, const bp_tensor_desc_t* data,
                        const bp_collective_options_t* o) {
  bp_kit_coll_t c = make_call(BP_KIT_COLL_RECV, NULL, data, 0, opt_peer(o));
  set_compression(&c, o); /* refused by the engine's check */
  return issue(comm, stream, &c);
}
static bp_status_t barrier(bpp_comm_t comm, bpp_stream_t stream) {
  bp_kit_coll_t c = {.kind = BP_KIT_COLL_BARRIER};
  return issue(comm, stream, &c);
}

static bp_status_t group_begin(void) {
  t_group.depth++;
  return BP_OK;
}

static bp_status_t issue_bucket(void* user, const uint32_t* idx, uint32_t k) {
  const pending_t* items = user;
  const pending_t* head = &items[idx[0]];
  if (head->key.stream) {
    const bp_kit_coll_t** calls = malloc(sizeof(*calls) * k);
    if (!calls) return BP_KIT_ERROR(BP_RESOURCE_EXHAUSTED, "group_end: out of memory");
    for (uint32_t i = 0; i < k; ++i) calls[i] = &items[idx[i]].call;
    bp_status_t st =
        enqueue_job((bpp_comm_t)head->key.comm, (bpp_stream_t)head->key.stream, calls, k);
    free(calls);
    return st;
  }
  /* Host-pointer calls of the group: now, on this thread, as one group. */
  bp_kit_coll_t* batch = malloc(sizeof(*batch) * k);
  if (!batch) return BP_KIT_ERROR(BP_RESOURCE_EXHAUSTED, "group_end: out of memory");
  for (uint32_t i = 0; i < k; ++i) batch[i] = items[idx[i]].call;
  bp_kit_comm_error_t e;
  bp_status_t st = bp_kit_comm_run(((bpp_comm_t)head->key.comm)->engine, batch, k, &e);
  free(batch);
  return st == BP_OK ? st : engine_error(st, &e);
}

/* Issues the group: one job per (communicator, stream), calls in order. */
static bp_status_t group_end(void) {
  if (t_group.depth == 0)
    return BP_KIT_ERROR(BP_FAILED_PRECONDITION, "group_end without group_begin");
  if (--t_group.depth) return BP_OK;
  bp_status_t st = bp_kit_group_for_each(t_group.items, t_group.n, sizeof(pending_t),
                                         issue_bucket, t_group.items);
  if (st == BP_RESOURCE_EXHAUSTED) st = BP_KIT_ERROR(st, "group_end: out of memory");
  free(t_group.items);
  t_group.items = NULL;
  t_group.n = t_group.cap = 0;
  return st;
}

static bp_status_t comm_info(bpp_comm_t comm, int32_t* out_rank, int32_t* out_size) {
  if (!comm || !out_rank || !out_size)
    return BP_KIT_ERROR(BP_INVALID_ARGUMENT, "comm_info: NULL argument");
  *out_rank = bp_kit_comm_rank(comm->engine);
  *out_size = bp_kit_comm_size(comm->engine);
  return BP_OK;
}

const bpp_comm_table_t bp_kit_host_comm_table = {
    .struct_size = sizeof(bpp_comm_table_t),
    .tier = BP_COMM_TIER_NATIVE,
    .flags = BPP_COMM_HOST_POINTERS,
    .comm_create = comm_create,
    .comm_split = comm_split,
    .comm_destroy = comm_destroy,
    .comm_abort = comm_abort,
    .comm_get_async_error = comm_get_async_error,
    .comm_register = comm_register,
    .comm_deregister = comm_deregister,
    .all_reduce = all_reduce,
    .broadcast = broadcast,
    .reduce = reduce,
    .all_gather = all_gather,
    .reduce_scatter = reduce_scatter,
    .all_to_all = all_to_all,
    .all_to_allv = all_to_allv,
    .send = send,
    .recv = recv,
    .barrier = barrier,
    .group_begin = group_begin,
    .group_end = group_end,
    .comm_info = comm_info,
};
