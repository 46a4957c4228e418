/* The CUDA plugin's comm table: communicators and collectives through
 * NCCL (cuda_nccl.h).
 *
 * Tensors are dense (the core checked): a collective passes the buffer's
 * device address plus the byte offset. Reductions need NCCL's own type
 * (f32, f16, bf16, f64, i8, u8, i32, u32, i64, u64, fp8 e4m3/e5m2); data
 * movement (broadcast, all_gather, all_to_all(v), send/recv) moves bytes,
 * so every dtype goes. all_to_all(v) are grouped ncclSend/ncclRecv, barrier
 * an all_reduce of one int32. Compression (int8/fp8 blocks) is not NCCL's:
 * UNIMPLEMENTED. Each collective marks the stream for the watchdog
 * (cuda_nccl.c), which turns NCCL's asynchronous errors and hangs into the
 * stream's synchronize status.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bp_kit_comm.h"
#include "cuda_nccl_internal.h"

/* ---- helpers ----------------------------------------------------------------- */
static int red_type(uint32_t dtype, ncclDataType_t* out) {
  switch (dtype) {
    case BP_DTYPE_F32: *out = ncclFloat32; return 1;
    case BP_DTYPE_F16: *out = ncclFloat16; return 1;
    case BP_DTYPE_BF16: *out = ncclBfloat16; return 1;
    case BP_DTYPE_F64: *out = ncclFloat64; return 1;
    case BP_DTYPE_I8: *out = ncclInt8; return 1;
    case BP_DTYPE_U8: *out = ncclUint8; return 1;
    case BP_DTYPE_I32: *out = ncclInt32; return 1;
    case BP_DTYPE_U32: *out = ncclUint32; return 1;
    case BP_DTYPE_I64: *out = ncclInt64; return 1;
    case BP_DTYPE_U64: *out = ncclUint64; return 1;
    case BP_DTYPE_F8E4M3FN: *out = ncclFloat8e4m3; return 1;
    case BP_DTYPE_F8E5M2: *out = ncclFloat8e5m2; return 1;
    default: return 0;
  }
}

static int red_op(uint32_t op, ncclRedOp_t* out) {
  switch (op) {
    case BP_REDUCE_SUM: *out = ncclSum; return 1;
    case BP_REDUCE_PROD: *out = ncclProd; return 1;
    case BP_REDUCE_MIN: *out = ncclMin; return 1;
    case BP_REDUCE_MAX: *out = ncclMax; return 1;
    case BP_REDUCE_AVG: *out = ncclAvg; return 1;
    default: return 0;
  }
}

static uint64_t numel(const bp_tensor_desc_t* d) {
  uint64_t n = 1;
  for (uint32_t k = 0; k < d->rank; ++k) n *= (uint64_t)(d->sizes[k] > 0 ? d->sizes[k] : 0);
  return n;
}
static uint64_t nbytes(const bp_tensor_desc_t* d) { return numel(d) * bp_dtype_size(d->dtype); }
static void* dptr(const bp_tensor_desc_t* d) {
  return d && d->buffer ? (void*)(uintptr_t)(d->buffer->ptr + d->byte_offset) : NULL;
}

/* Locks `c`, checks it is usable on `stream` and makes its device current.
 * On BP_OK the caller ends with leave(). */
static bp_status_t enter(struct bpp_comm_s* c, bpp_stream_t s, const char* what) {
  if (!c || !s) return bp_kit_error(BP_INVALID_ARGUMENT, "cuda: %s: NULL communicator or stream", what);
  if (s->dev != c->dev)
    return bp_kit_error(BP_INVALID_ARGUMENT, "cuda: %s: the stream is not of the communicator's device", what);
  pthread_mutex_lock(&c->mu);
  bp_status_t st = c->broken;
  if (st) {
    char msg[256];
    snprintf(msg, sizeof msg, "%s", c->broken_msg);
    pthread_mutex_unlock(&c->mu);
    return bp_kit_error(st, "%s", msg);
  }
  if ((st = cuda_ctx_push(c->dev)) != BP_OK) pthread_mutex_unlock(&c->mu);
  return st;
}

/* Ends a call: on success the stream watches the communicator. */
static bp_status_t leave(struct bpp_comm_s* c, bpp_stream_t s, ncclResult_t r, const char* what) {
  cuda_ctx_pop(c->dev);
  bp_status_t st = BP_OK;
  if (r != ncclSuccess && r != ncclInProgress) {
    st = cuda_nccl_fail(c, r, what);
  } else {
    c->last_ns = cuda_nccl_now_ns();
    c->in_flight = 1;
    cuda_nccl_watch_add(s, c);
  }
  pthread_mutex_unlock(&c->mu);
  return st;
}

static bp_status_t no_compression(const bp_collective_options_t* o, const char* what) {
  if (o && o->compression)
    return bp_kit_error(BP_UNIMPLEMENTED, "cuda: %s: NCCL has no compressed collectives", what);
  return BP_OK;
}

static bp_status_t reduction(const bp_tensor_desc_t* t, uint32_t op, ncclDataType_t* type,
                             ncclRedOp_t* rop, const char* what) {
  if (!red_type(t->dtype, type))
    return bp_kit_error(BP_UNIMPLEMENTED, "cuda: %s: NCCL cannot reduce %s", what,
                        bp_dtype_name(t->dtype));
  if (!red_op(op, rop)) return bp_kit_error(BP_INVALID_ARGUMENT, "cuda: %s: unknown reduction %u", what, op);
  return BP_OK;
}

/* ---- collectives ---------------------------------------------------------------- */
static bp_status_t all_reduce(bpp_comm_t c, bpp_stream_t s, const bp_tensor_desc_t* send,
                              const bp_tensor_desc_t* recv, uint32_t op,
                              const bp_collective_options_t* o) {
  ncclDataType_t t;
  ncclRedOp_t rop;
  bp_status_t st = no_compression(o, "all_reduce");
  if (st || (st = reduction(send, op, &t, &rop, "all_reduce")) || (st = enter(c, s, "all_reduce"))) return st;
  ncclResult_t r = c->nc->ncclAllReduce(dptr(send), dptr(recv), numel(send), t, rop, c->comm,
                                        (cudaStream_t)s->s);
  return leave(c, s, r, "ncclAllReduce");
}

static bp_status_t broadcast(bpp_comm_t c, bpp_stream_t s, const bp_tensor_desc_t* send,
                             const bp_tensor_desc_t* recv, const bp_collective_options_t* o) {
  bp_status_t st = no_compression(o, "broadcast");
  if (st || (st = enter(c, s, "broadcast"))) return st;
  int root = o ? o->root : 0;
  const void* src = c->rank == root ? dptr(send) : dptr(recv);
  ncclResult_t r = c->nc->ncclBroadcast(src, dptr(recv), nbytes(recv), ncclInt8, root, c->comm,
                                        (cudaStream_t)s->s);
  return leave(c, s, r, "ncclBroadcast");
}

static bp_status_t reduce(bpp_comm_t c, bpp_stream_t s, const bp_tensor_desc_t* send,
                          const bp_tensor_desc_t* recv, uint32_t op, const bp_collective_options_t* o) {
  ncclDataType_t t;
  ncclRedOp_t rop;
  bp_status_t st = no_compression(o, "reduce");
  if (st || (st = reduction(send, op, &t, &rop, "reduce")) || (st = enter(c, s, "reduce"))) return st;
  int root = o ? o->root : 0;
  ncclResult_t r = c->nc->ncclReduce(dptr(send), c->rank == root ? dptr(recv) : NULL, numel(send),
                                     t, rop, root, c->comm, (cudaStream_t)s->s);
  return leave(c, s, r, "ncclReduce");
}

static bp_status_t all_gather(bpp_comm_t c, bpp_stream_t s, const bp_tensor_desc_t* send,
                              const bp_tensor_desc_t* recv, const bp_collective_options_t* o) {
  bp_status_t st = no_compression(o, "all_gather");
  if (st || (st = enter(c, s, "all_gather"))) return st;
  ncclResult_t r = c->nc->ncclAllGather(dptr(send), dptr(recv), nbytes(send), ncclInt8, c->comm,
                                        (cudaStream_t)s->s);
  return leave(c, s, r, "ncclAllGather");
}

static bp_status_t reduce_scatter(bpp_comm_t c, bpp_stream_t s, const bp_tensor_desc_t* send,
                                  const bp_tensor_desc_t* recv, uint32_t op,
                                  const bp_collective_options_t* o) {
  ncclDataType_t t;
  ncclRedOp_t rop;
  bp_status_t st = no_compression(o, "reduce_scatter");
  if (st || (st = reduction(recv, op, &t, &rop, "reduce_scatter")) ||
      (st = enter(c, s, "reduce_scatter")))
    return st;
  ncclResult_t r = c->nc->ncclReduceScatter(dptr(send), dptr(recv), numel(recv), t, rop, c->comm,
                                            (cudaStream_t)s->s);
  return leave(c, s, r, "ncclReduceScatter");
}

/* Grouped sends and receives: peer p gets `scount[p]` bytes from
 * send + sdispl[p], and this rank receives rcount[p] bytes at recv +
 * rdispl[p]. Its own block is a device copy on the stream. */
static ncclResult_t exchange(struct bpp_comm_s* c, bpp_stream_t s, const char* send, char* recv,
                             const uint64_t* scount, const uint64_t* sdispl,
                             const uint64_t* rcount, const uint64_t* rdispl) {
  const nccl_symbols_t* nc = c->nc;
  const int me = c->rank;
  if (scount[me] != rcount[me]) return ncclInvalidArgument;
  if (scount[me] &&
      c->dev->cu->cuMemcpyDtoDAsync_v2((CUdeviceptr)(uintptr_t)(recv + rdispl[me]),
                                       (CUdeviceptr)(uintptr_t)(send + sdispl[me]), scount[me],
                                       s->s) != CUDA_SUCCESS)
    return ncclUnhandledCudaError;
  ncclResult_t r = nc->ncclGroupStart();
  for (int p = 0; r == ncclSuccess && p < c->size; ++p) {
    if (p == me) continue;
    if (scount[p])
      r = nc->ncclSend(send + sdispl[p], scount[p], ncclInt8, p, c->comm, (cudaStream_t)s->s);
    if (r == ncclSuccess && rcount[p])
      r = nc->ncclRecv(recv + rdispl[p], rcount[p], ncclInt8, p, c->comm, (cudaStream_t)s->s);
  }
  ncclResult_t e = nc->ncclGroupEnd();
  return r != ncclSuccess ? r : e;
}

static bp_status_t all_to_allv(bpp_comm_t c, bpp_stream_t s, const bp_tensor_desc_t* send,
                               const uint64_t* sc, const uint64_t* sd, const bp_tensor_desc_t* recv,
                               const uint64_t* rc, const uint64_t* rd,
                               const bp_collective_options_t* o) {
  bp_status_t st = no_compression(o, "all_to_allv");
  if (st) return st;
  if (!c || !sc || !sd || !rc || !rd)
    return bp_kit_error(BP_INVALID_ARGUMENT, "cuda: all_to_allv: NULL argument");
  uint64_t* b = calloc(4 * (size_t)c->size + 1, sizeof *b);
  if (!b) return bp_kit_error(BP_RESOURCE_EXHAUSTED, "cuda: out of host memory");
  uint64_t esz = bp_dtype_size(send->dtype);
  for (int p = 0; p < c->size; ++p) {
    b[p] = sc[p] * esz, b[c->size + p] = sd[p] * esz;
    b[2 * c->size + p] = rc[p] * esz, b[3 * c->size + p] = rd[p] * esz;
  }
  if ((st = enter(c, s, "all_to_allv")) == BP_OK) {
    ncclResult_t r = exchange(c, s, dptr(send), dptr(recv), b, b + c->size, b + 2 * c->size,
                              b + 3 * c->size);
    st = leave(c, s, r, "all_to_allv (grouped ncclSend/ncclRecv)");
  }
  free(b);
  return st;
}

static bp_status_t all_to_all(bpp_comm_t c, bpp_stream_t s, const bp_tensor_desc_t* send,
                              const bp_tensor_desc_t* recv, const bp_collective_options_t* o) {
  if (!c || !send) return bp_kit_error(BP_INVALID_ARGUMENT, "cuda: all_to_all: NULL argument");
  uint64_t* b = calloc(2 * (size_t)c->size + 1, sizeof *b);
  if (!b) return bp_kit_error(BP_RESOURCE_EXHAUSTED, "cuda: out of host memory");
  uint64_t block = numel(send) / (uint64_t)c->size; /* elements */
  for (int p = 0; p < c->size; ++p) b[p] = block, b[c->size + p] = (uint64_t)p * block;
  bp_status_t st = all_to_allv(c, s, send, b, b + c->size, recv, b, b + c->size, o);
  free(b);
  return st;
}

static bp_status_t send_(bpp_comm_t c, bpp_stream_t s, const bp_tensor_desc_t* d,
                         const bp_collective_options_t* o) {
  bp_status_t st = enter(c, s, "send");
  if (st) return st;
  ncclResult_t r = c->nc->ncclSend(dptr(d), nbytes(d), ncclInt8, o ? o->peer : 0, c->comm,
                                   (cudaStream_t)s->s);
  return leave(c, s, r, "ncclSend");
}

static bp_status_t recv_(bpp_comm_t c, bpp_stream_t s, const bp_tensor_desc_t* d,
                         const bp_collective_options_t* o) {
  bp_status_t st = enter(c, s, "recv");
  if (st) return st;
  ncclResult_t r = c->nc->ncclRecv(dptr(d), nbytes(d), ncclInt8, o ? o->peer : 0, c->comm,
                                   (cudaStream_t)s->s);
  return leave(c, s, r, "ncclRecv");
}

static bp_status_t barrier(bpp_comm_t c, bpp_stream_t s) {
  bp_status_t st = enter(c, s, "barrier");
  if (st) return st;
  void* w = (void*)(uintptr_t)c->scratch;
  CUresult z = c->dev->cu->cuMemsetD32Async(c->scratch, 0, 1, s->s);
  ncclResult_t r = z == CUDA_SUCCESS
                       ? c->nc->ncclAllReduce(w, w, 1, ncclInt32, ncclSum, c->comm, (cudaStream_t)s->s)
                       : ncclUnhandledCudaError;
  return leave(c, s, r, "barrier (ncclAllReduce of one int32)");
}

static bp_status_t group_begin(void) {
  const nccl_symbols_t* nc = cuda_nccl(NULL);
  if (!nc) return bp_kit_error(BP_UNAVAILABLE, "cuda: group_begin: no NCCL");
  ncclResult_t r = nc->ncclGroupStart();
  return r == ncclSuccess ? BP_OK
                          : bp_kit_error(cuda_nccl_status_of(r), "cuda: ncclGroupStart: %s",
                                         nc->ncclGetErrorString(r));
}

static bp_status_t group_end(void) {
  const nccl_symbols_t* nc = cuda_nccl(NULL);
  if (!nc) return bp_kit_error(BP_UNAVAILABLE, "cuda: group_end: no NCCL");
  ncclResult_t r = nc->ncclGroupEnd();
  return r == ncclSuccess || r == ncclInProgress
             ? BP_OK
             : bp_kit_error(cuda_nccl_status_of(r), "cuda: ncclGroupEnd: %s", nc->ncclGetErrorString(r));
}

/* ---- communicators ------------------------------------------------------------- */
/* A new communicator object around `comm` (rank and size asked). */
static bp_status_t wrap(bpp_device_t d, const nccl_symbols_t* nc, ncclComm_t comm,
                        cuda_nccl_world_t* w, uint64_t timeout_ns, CUdeviceptr scratch,
                        bpp_comm_t* out) {
  struct bpp_comm_s* c = calloc(1, sizeof *c);
  if (!c) return bp_kit_error(BP_RESOURCE_EXHAUSTED, "cuda: out of host memory");
  atomic_init(&c->refs, 1);
  c->dev = d;
  c->nc = nc;
  pthread_mutex_init(&c->mu, NULL);
  c->comm = comm;
  c->world = w;
  c->timeout_ns = timeout_ns;
  c->scratch = scratch;
  nc->ncclCommUserRank(comm, &c->rank);
  nc->ncclCommCount(comm, &c->size);
  *out = c;
  return BP_OK;
}

static bp_status_t scratch_new(bpp_device_t d, CUdeviceptr* out) {
  CUresult r = d->cu->cuMemAlloc_v2(out, 256);
  if (r != CUDA_SUCCESS) return cuda_fail(d, r, "barrier word");
  return BP_OK;
}

/* NCCL runs one rank per GPU in a process (ncclCommInitRank fails with
 * ncclInvalidUsage otherwise): every rank learns every rank's (process,
 * device) through the bootstrap and all answer UNIMPLEMENTED alike when
 * two share one. */
static bp_status_t one_rank_per_gpu(bpp_device_t d, const bp_bootstrap_t* bs) {
  int64_t mine[2] = {(int64_t)getpid(), (int64_t)d->index};
  int64_t* all = calloc(2 * (size_t)bs->nranks + 2, sizeof *all);
  if (!all) return bp_kit_error(BP_RESOURCE_EXHAUSTED, "cuda: out of host memory");
  bp_status_t st = bs->allgather(bs->ctx, mine, all, sizeof mine);
  if (st != BP_OK) st = bp_kit_error(st, "cuda: comm_create: the bootstrap's allgather failed");
  for (int32_t a = 0; st == BP_OK && a < bs->nranks; ++a)
    for (int32_t b = a + 1; st == BP_OK && b < bs->nranks; ++b)
      if (all[2 * a] == all[2 * b] && all[2 * a + 1] == all[2 * b + 1])
        st = bp_kit_error(BP_UNIMPLEMENTED, "cuda: NCCL runs one rank per GPU in a process: ranks "
                          "%d and %d are both on cuda:%lld", a, b, (long long)all[2 * a + 1]);
  free(all);
  return st;
}

typedef struct id_msg {
  int32_t ok;
  char text[128];
  ncclUniqueId id;
} id_msg_t;

static bp_status_t comm_create(bpp_device_t d, const bp_comm_create_info_t* info, bpp_comm_t* out) {
  if (!d || !info || !out || info->struct_size < BP_COMM_CREATE_INFO_V1_SIZE)
    return bp_kit_error(BP_INVALID_ARGUMENT, "cuda: comm_create: NULL or short argument");
  const bp_bootstrap_t* bs = info->bootstrap;
  if (!bs)
    return bp_kit_error(BP_INVALID_ARGUMENT, "cuda: comm_create: NCCL needs a bootstrap (this "
                                             "plugin has no launcher world)");
  const char* why = NULL;
  const nccl_symbols_t* nc = cuda_nccl(&why);
  if (!nc) return bp_kit_error(BP_UNAVAILABLE, "cuda: %s", why);
  /* Rank 0's unique id to every rank, or its failure (no rank waits in
   * ncclCommInitRank for a rank that will not come). */
  id_msg_t m;
  memset(&m, 0, sizeof m);
  if (bs->rank == 0) {
    ncclResult_t r = nc->ncclGetUniqueId(&m.id);
    m.ok = r == ncclSuccess;
    if (!m.ok) snprintf(m.text, sizeof m.text, "ncclGetUniqueId: %s", nc->ncclGetErrorString(r));
  }
  bp_status_t st = bs->broadcast(bs->ctx, &m, sizeof m, 0);
  if (st != BP_OK) return bp_kit_error(st, "cuda: comm_create: the bootstrap's broadcast failed");
  if (!m.ok) return bp_kit_error(BP_INTERNAL, "cuda: comm_create: rank 0: %s", m.text);
  if ((st = one_rank_per_gpu(d, bs)) != BP_OK) return st;
  if ((st = cuda_ctx_push(d)) != BP_OK) return st;
  CUdeviceptr scratch = 0;
  st = scratch_new(d, &scratch);
  ncclComm_t comm = NULL;
  ncclResult_t r = st == BP_OK ? nc->ncclCommInitRank(&comm, bs->nranks, m.id, bs->rank) : ncclSuccess;
  cuda_ctx_pop(d);
  cuda_nccl_world_t* w = st == BP_OK && r == ncclSuccess ? cuda_nccl_world_get(&m.id) : NULL;
  if (st == BP_OK && r != ncclSuccess)
    st = bp_kit_error(cuda_nccl_status_of(r), "cuda: ncclCommInitRank (rank %d of %d): %s (%d)",
                      bs->rank, bs->nranks, nc->ncclGetErrorString(r), (int)r);
  else if (st == BP_OK && !w)
    st = bp_kit_error(BP_RESOURCE_EXHAUSTED, "cuda: out of host memory");
  if (st == BP_OK) st = wrap(d, nc, comm, w, bp_kit_comm_timeout(info->timeout_ns), scratch, out);
  if (st != BP_OK) {
    if (comm) nc->ncclCommDestroy(comm);
    cuda_nccl_world_put(w);
    if (scratch && cuda_ctx_push(d) == BP_OK) {
      d->cu->cuMemFree_v2(scratch);
      cuda_ctx_pop(d);
    }
  }
  return st;
}

static bp_status_t comm_split(bpp_comm_t c, int32_t color, int32_t key,
                              const bp_comm_create_info_t* info, bpp_comm_t* out) {
  if (!c || !out) return bp_kit_error(BP_INVALID_ARGUMENT, "cuda: comm_split: NULL");
  *out = NULL;
  if (!c->nc->ncclCommSplit)
    return bp_kit_error(BP_UNIMPLEMENTED, "cuda: comm_split: this NCCL lacks ncclCommSplit");
  pthread_mutex_lock(&c->mu);
  bp_status_t st = c->broken ? c->broken : cuda_ctx_push(c->dev);
  if (st != BP_OK) {
    pthread_mutex_unlock(&c->mu);
    return bp_kit_error(st, "cuda: comm_split: the communicator is broken or lost");
  }
  /* The new world's key: the parent's id, this split's number and the color. */
  ncclUniqueId id = c->world->id;
  uint32_t n = ++c->splits;
  memcpy(id.internal + NCCL_UNIQUE_ID_BYTES - 8, &n, 4);
  memcpy(id.internal + NCCL_UNIQUE_ID_BYTES - 4, &color, 4);
  CUdeviceptr scratch = 0;
  ncclComm_t nc_new = NULL;
  st = color == BP_COMM_SPLIT_NO_COLOR ? BP_OK : scratch_new(c->dev, &scratch);
  ncclResult_t r = c->nc->ncclCommSplit(c->comm, color == BP_COMM_SPLIT_NO_COLOR ? NCCL_SPLIT_NOCOLOR : color,
                                        key, &nc_new, NULL);
  cuda_ctx_pop(c->dev);
  pthread_mutex_unlock(&c->mu);
  if (r != ncclSuccess) st = cuda_nccl_fail(c, r, "ncclCommSplit");
  if (st == BP_OK && nc_new) {
    cuda_nccl_world_t* w = cuda_nccl_world_get(&id);
    uint64_t t = info && info->struct_size >= BP_COMM_CREATE_INFO_V1_SIZE ? info->timeout_ns : 0;
    st = w ? wrap(c->dev, c->nc, nc_new, w, t ? bp_kit_comm_timeout(t) : c->timeout_ns, scratch, out)
           : bp_kit_error(BP_RESOURCE_EXHAUSTED, "cuda: out of host memory");
    if (st == BP_OK) return st;
    cuda_nccl_world_put(w);
    c->nc->ncclCommDestroy(nc_new);
  }
  if (scratch && cuda_ctx_push(c->dev) == BP_OK) {
    c->dev->cu->cuMemFree_v2(scratch);
    cuda_ctx_pop(c->dev);
  }
  return st;
}

static void comm_destroy(bpp_comm_t c) {
  if (!c) return;
  pthread_mutex_lock(&c->mu);
  if (c->comm) c->nc->ncclCommDestroy(c->comm); /* waits for its enqueued work */
  c->comm = NULL;
  pthread_mutex_unlock(&c->mu);
  if (c->scratch && cuda_ctx_push(c->dev) == BP_OK) {
    c->dev->cu->cuMemFree_v2(c->scratch);
    cuda_ctx_pop(c->dev);
  }
  cuda_nccl_comm_unref(c);
}

static bp_status_t comm_abort(bpp_comm_t c) {
  if (!c) return bp_kit_error(BP_INVALID_ARGUMENT, "cuda: comm_abort: NULL");
  static const char msg[] = "cuda: the communicator was aborted (ncclCommAbort)";
  cuda_nccl_world_set(c->world, BP_ABORTED, msg);
  pthread_mutex_lock(&c->mu);
  cuda_nccl_break_locked(c, BP_ABORTED, msg);
  pthread_mutex_unlock(&c->mu);
  return BP_OK;
}

static bp_status_t comm_get_async_error(bpp_comm_t c) {
  if (!c) return bp_kit_error(BP_INVALID_ARGUMENT, "cuda: comm_get_async_error: NULL");
  return cuda_nccl_comm_poll(c, 0);
}

static bp_status_t comm_register(bpp_comm_t c, bpp_buffer_t b, void** out) {
  if (!c || !b || !out) return bp_kit_error(BP_INVALID_ARGUMENT, "cuda: comm_register: NULL");
  if (!c->nc->ncclCommRegister)
    return bp_kit_error(BP_UNIMPLEMENTED, "cuda: comm_register: this NCCL lacks ncclCommRegister");
  pthread_mutex_lock(&c->mu);
  ncclResult_t r = c->comm ? c->nc->ncclCommRegister(c->comm, (void*)(uintptr_t)b->ptr, b->size, out)
                           : ncclInvalidUsage;
  pthread_mutex_unlock(&c->mu);
  return r == ncclSuccess ? BP_OK : cuda_nccl_fail(c, r, "ncclCommRegister");
}

static bp_status_t comm_deregister(bpp_comm_t c, void* handle) {
  if (!c || !handle) return bp_kit_error(BP_INVALID_ARGUMENT, "cuda: comm_deregister: NULL");
  if (!c->nc->ncclCommDeregister)
    return bp_kit_error(BP_UNIMPLEMENTED, "cuda: comm_deregister: this NCCL lacks ncclCommDeregister");
  pthread_mutex_lock(&c->mu);
  ncclResult_t r = c->comm ? c->nc->ncclCommDeregister(c->comm, handle) : ncclInvalidUsage;
  pthread_mutex_unlock(&c->mu);
  return r == ncclSuccess ? BP_OK : cuda_nccl_fail(c, r, "ncclCommDeregister");
}

static bp_status_t comm_info(bpp_comm_t c, int32_t* rank, int32_t* size) {
  if (!c || !rank || !size) return bp_kit_error(BP_INVALID_ARGUMENT, "cuda: comm_info: NULL");
  *rank = c->rank;
  *size = c->size;
  return BP_OK;
}

const bpp_comm_table_t cuda_comm_table = {
    .struct_size = sizeof(bpp_comm_table_t),
    .tier = BP_COMM_TIER_NATIVE,
    .flags = 0,
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
    .send = send_,
    .recv = recv_,
    .barrier = barrier,
    .group_begin = group_begin,
    .group_end = group_end,
    .comm_info = comm_info,
};
