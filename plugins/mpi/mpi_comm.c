/* The MPI plugin's comm table: communicators over MPI, argument checks,
 * groups, and stream ordering (mpi_internal.h describes a call's life).
 *
 * Threading: comm_abort and comm_get_async_error are thread-safe; calls on
 * one communicator are externally synchronized (the ABI's rule); groups
 * are per calling thread (thread-local state).
 */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bp_kit.h"
#include "bp_kit_host.h"
#include "bp_kit_stream.h"
#include "bp_kit_comm.h"
#include "mpi_internal.h"

#define BP_MPI_TOKEN_MAGIC 0x4d504952u /* registration token */
#define BP_MPI_CREATE_TAG 0x6270

/* ---- communicators ---------------------------------------------------------- */
static uint64_t default_timeout_ns(const bp_comm_create_info_t* info, uint64_t inherited) {
  if (info && info->timeout_ns) return info->timeout_ns;
  if (inherited) return inherited;
  uint64_t ms = 300000;
  (void)bp_plugin_parse_uint(bp_kit_host(), "BACKPLANE_COMM_TIMEOUT_MS",
                             getenv("BACKPLANE_COMM_TIMEOUT_MS"), 1, UINT64_MAX / 1000000u, ms,
                             &ms);
  return ms * 1000000u;
}

/* Wraps a new MPI communicator (owned from here on). */
static bp_status_t comm_wrap(struct bpp_device_s* device, bp_mpi_h mc, uint64_t timeout_ns,
                             bpp_comm_t* out) {
  int rc, rank = 0, size = 0;
  BP_MPI(rc, MPI_Comm_set_errhandler, mc, bp_mpi.f.ompi_mpi_errors_return);
  if (rc == BP_MPI_SUCCESS) BP_MPI(rc, MPI_Comm_rank, mc, &rank);
  if (rc == BP_MPI_SUCCESS) BP_MPI(rc, MPI_Comm_size, mc, &size);
  struct bpp_comm_s* c = rc == BP_MPI_SUCCESS ? calloc(1, sizeof *c) : NULL;
  if (!c) {
    BP_MPI(rc, MPI_Comm_free, &mc);
    return rc == BP_MPI_SUCCESS ? bp_kit_error(BP_RESOURCE_EXHAUSTED, "mpi: out of host memory")
                                : bp_mpi_check(rc, "MPI_Comm_set_errhandler");
  }
  c->magic = BP_MPI_COMM_MAGIC;
  c->device = device;
  c->comm = mc;
  c->rank = rank;
  c->size = size;
  c->timeout_ns = timeout_ns;
  atomic_init(&c->calls, 0);
  atomic_init(&c->error, BP_OK);
  pthread_mutex_init(&c->lock, NULL);
  pthread_cond_init(&c->idle_cv, NULL);
  *out = c;
  return BP_OK;
}

static bp_status_t check_comm(bpp_comm_t c, const char* what) {
  if (!c || c->magic != BP_MPI_COMM_MAGIC)
    return bp_kit_error(BP_INVALID_ARGUMENT, "mpi: %s: not a communicator of this plugin", what);
  return BP_OK;
}

/* The launcher's world: a communicator over MPI_COMM_WORLD's group (every
 * process calls it), in world rank order. */
static bp_status_t world_comm(bpp_device_t device, const bp_comm_create_info_t* info,
                              bpp_comm_t* out) {
  bp_status_t st = bp_mpi_lib_ready();
  if (st != BP_OK) return st;
  int rc;
  bp_mpi_h wg = NULL, mc = NULL;
  BP_MPI(rc, MPI_Comm_group, bp_mpi.f.ompi_mpi_comm_world, &wg);
  if (rc == BP_MPI_SUCCESS)
    BP_MPI(rc, MPI_Comm_create_group, bp_mpi.f.ompi_mpi_comm_world, wg, BP_MPI_CREATE_TAG, &mc);
  st = bp_mpi_check(rc, "comm_create: the world (MPI_Comm_create_group)");
  if (wg) BP_MPI(rc, MPI_Group_free, &wg);
  if (st == BP_OK) st = comm_wrap(device, mc, default_timeout_ns(info, 0), out);
  return st;
}

/* Equivalent to ncclCommInitRank. The communicator holds the MPI
 * processes of the bootstrap's ranks, ordered by bootstrap rank: each rank
 * shares its MPI_COMM_WORLD rank through the bootstrap, and
 * MPI_Comm_create_group (collective over those processes only) builds it.
 * When the bootstrap is MPI_COMM_WORLD itself this is a copy of the world;
 * any other order or a subset of the world works alike. A NULL bootstrap
 * asks for the launcher's world (every process of the mpirun) in world
 * rank order (docs/ABI.md section 13). */
static bp_status_t comm_create(bpp_device_t device, const bp_comm_create_info_t* info,
                               bpp_comm_t* out) {
  if (!out) return bp_kit_error(BP_INVALID_ARGUMENT, "mpi: comm_create: out_comm is NULL");
  *out = NULL;
  if (!device || !info || info->struct_size < BP_COMM_CREATE_INFO_V1_SIZE)
    return bp_kit_error(BP_INVALID_ARGUMENT, "mpi: comm_create: NULL device or short create info");
  const bp_bootstrap_t* b = info->bootstrap;
  if (!b) return world_comm(device, info, out);
  if (b->struct_size < BP_BOOTSTRAP_V1_SIZE || !b->allgather || b->nranks < 1 ||
      b->rank < 0 || b->rank >= b->nranks)
    return bp_kit_error(BP_INVALID_ARGUMENT,
                        "mpi: comm_create: a bootstrap with allgather, nranks >= 1 and 0 <= rank "
                        "< nranks is required");
  bp_status_t st = bp_mpi_lib_ready();
  if (st != BP_OK) return st;
  int rc, wrank = 0, wsize = 0;
  BP_MPI(rc, MPI_Comm_rank, bp_mpi.f.ompi_mpi_comm_world, &wrank);
  if (rc == BP_MPI_SUCCESS) BP_MPI(rc, MPI_Comm_size, bp_mpi.f.ompi_mpi_comm_world, &wsize);
  if (rc != BP_MPI_SUCCESS) return bp_mpi_check(rc, "MPI_Comm_rank (MPI_COMM_WORLD)");
  int* world = calloc((size_t)b->nranks, sizeof *world);
  if (!world) return bp_kit_error(BP_RESOURCE_EXHAUSTED, "mpi: out of host memory");
  int32_t mine = wrank;
  st = b->allgather(b->ctx, &mine, world, sizeof mine);
  if (st != BP_OK) {
    free(world);
    return bp_kit_error(st, "mpi: comm_create: the bootstrap's allgather failed");
  }
  /* Every rank checks the same array: all fail alike. */
  for (int r = 0; r < b->nranks && st == BP_OK; r++) {
    if (world[r] < 0 || world[r] >= wsize)
      st = bp_kit_error(BP_INVALID_ARGUMENT,
                        "mpi: comm_create: bootstrap rank %d is MPI world rank %d, outside a "
                        "world of %d",
                        r, world[r], wsize);
    for (int q = 0; q < r && st == BP_OK; q++)
      if (world[q] == world[r])
        /* Not a bad argument but a capability this plugin lacks: the core
         * then takes an in-process engine (docs/collectives.md). */
        st = bp_kit_error(BP_UNIMPLEMENTED,
                          "mpi: comm_create: bootstrap ranks %d and %d are the same MPI process "
                          "(world rank %d): one rank per process",
                          q, r, world[r]);
  }
  bp_mpi_h wg = NULL, g = NULL, mc = NULL;
  if (st == BP_OK) {
    BP_MPI(rc, MPI_Comm_group, bp_mpi.f.ompi_mpi_comm_world, &wg);
    if (rc == BP_MPI_SUCCESS) BP_MPI(rc, MPI_Group_incl, wg, b->nranks, world, &g);
    if (rc == BP_MPI_SUCCESS)
      BP_MPI(rc, MPI_Comm_create_group, bp_mpi.f.ompi_mpi_comm_world, g, BP_MPI_CREATE_TAG, &mc);
    st = bp_mpi_check(rc, "comm_create: MPI_Comm_create_group");
    if (g) BP_MPI(rc, MPI_Group_free, &g);
    if (wg) BP_MPI(rc, MPI_Group_free, &wg);
  }
  free(world);
  if (st == BP_OK) st = comm_wrap(device, mc, default_timeout_ns(info, 0), out);
  return st;
}

/* ---- calls: checks ------------------------------------------------------------ */
/* The host address of a dense descriptor, or a message in op->local_msg. */
static bp_status_t desc_addr(bp_mpi_op_t* op, const bp_tensor_desc_t* d, const char* what,
                             unsigned char** out_addr, uint64_t* out_numel) {
  char* msg = op->local_msg;
  size_t cap = sizeof op->local_msg;
  if (!d) return bp_plugin_format(msg, cap, BP_INVALID_ARGUMENT, "%s is NULL", what);
  uint64_t bytes = d->buffer ? bp_kit_host_buffer_size(d->buffer) : UINT64_MAX;
  if (d->buffer && !bp_mpi_is_our_buffer(d->buffer))
    return bp_plugin_format(msg, cap, BP_INVALID_ARGUMENT,
                            "%s: the buffer is not one of this plugin's (host memory of another "
                            "plugin goes by address: buffer NULL, byte_offset = the address)",
                            what);
  bp_status_t st = bp_plugin_check_desc(d, bytes, what, msg, cap);
  if (st != BP_OK) return st;
  if (d->layout != BP_LAYOUT_STRIDED || d->quant || d->bit_offset)
    return bp_plugin_format(msg, cap, BP_INVALID_ARGUMENT, "%s: only plain layouts", what);
  int64_t want = 1;
  for (uint32_t i = d->rank; i-- > 0;) {
    if (d->sizes[i] != 1 && d->strides[i] != want)
      return bp_plugin_format(msg, cap, BP_INVALID_ARGUMENT,
                              "%s: not dense (stride %lld in dim %u, %lld expected)", what,
                              (long long)d->strides[i], i, (long long)want);
    want *= d->sizes[i];
  }
  if (op->dtype && d->dtype != op->dtype)
    return bp_plugin_format(msg, cap, BP_INVALID_ARGUMENT, "%s is %s, not %s like the others",
                            what, bp_dtype_name(d->dtype), bp_dtype_name(op->dtype));
  op->dtype = d->dtype;
  *out_numel = (uint64_t)bp_desc_numel(d);
  *out_addr = (d->buffer ? d->buffer->ptr : NULL) + d->byte_offset;
  return BP_OK;
}

/* MPI counts are int: larger calls are refused (docs/backends/mpi.md). */
static bp_status_t fits_int(bp_mpi_op_t* op, uint64_t elements) {
  uint64_t mult = bp_dtype_size(op->dtype) == 16 ? 2 : 1;
  if (elements > (uint64_t)INT_MAX / mult)
    return bp_plugin_format(op->local_msg, sizeof op->local_msg, BP_OUT_OF_RANGE,
                            "%llu elements: MPI counts are int (at most %d per call)",
                            (unsigned long long)elements, INT_MAX);
  return BP_OK;
}

static bp_status_t need_equal(bp_mpi_op_t* op, uint64_t have, uint64_t want, const char* what) {
  if (have == want) return BP_OK;
  return bp_plugin_format(op->local_msg, sizeof op->local_msg, BP_INVALID_ARGUMENT,
                          "%s has %llu elements, %llu expected", what, (unsigned long long)have,
                          (unsigned long long)want);
}

typedef struct call_args {
  const bp_tensor_desc_t *send, *recv;
  const uint64_t* v[4]; /* all_to_allv */
  const bp_collective_options_t* options;
} call_args_t;

/* Fills op from the call; op->local says whether the arguments are valid
 * (an invalid call still takes part in the header exchange). */
static bp_status_t check_call(bp_mpi_op_t* op, const call_args_t* a) {
  struct bpp_comm_s* c = op->comm;
  int n = c->size, me = c->rank;
  uint64_t ns = 0, nr = 0;
  const char* why;
  if (a->options && a->options->struct_size >= BP_COLLECTIVE_OPTIONS_V1_SIZE &&
      a->options->compression) {
    if (op->kind != BP_MPI_ALL_REDUCE && op->kind != BP_MPI_ALL_GATHER &&
        op->kind != BP_MPI_REDUCE_SCATTER)
      return bp_plugin_format(op->local_msg, sizeof op->local_msg, BP_INVALID_ARGUMENT,
                              "compression applies to all_reduce, all_gather and "
                              "reduce_scatter only");
    op->comp = a->options->compression;
    op->block = a->options->compression_block ? a->options->compression_block : 256;
  }
  int rooted = op->kind == BP_MPI_BROADCAST || op->kind == BP_MPI_REDUCE ||
               op->kind == BP_MPI_SEND || op->kind == BP_MPI_RECV;
  if (rooted && (op->root < 0 || op->root >= n))
    return bp_plugin_format(op->local_msg, sizeof op->local_msg, BP_INVALID_ARGUMENT,
                            "%s %d is outside the communicator's %d ranks",
                            op->kind >= BP_MPI_SEND ? "peer" : "root", op->root, n);
  bp_status_t st = BP_OK;
  switch (op->kind) {
    case BP_MPI_ALL_REDUCE:
      if ((st = desc_addr(op, a->send, "send", (unsigned char**)&op->send, &ns)) ||
          (st = desc_addr(op, a->recv, "recv", &op->recv, &nr)) ||
          (st = need_equal(op, nr, ns, "recv")))
        return st;
      op->count = ns;
      break;
    case BP_MPI_BROADCAST:
      if ((st = desc_addr(op, a->recv, "recv", &op->recv, &nr))) return st;
      if (me == op->root &&
          ((st = desc_addr(op, a->send, "send", (unsigned char**)&op->send, &ns)) ||
           (st = need_equal(op, ns, nr, "send"))))
        return st;
      op->count = nr;
      break;
    case BP_MPI_REDUCE:
      if ((st = desc_addr(op, a->send, "send", (unsigned char**)&op->send, &ns))) return st;
      if (me == op->root && ((st = desc_addr(op, a->recv, "recv", &op->recv, &nr)) ||
                             (st = need_equal(op, nr, ns, "recv"))))
        return st;
      op->count = ns;
      break;
    case BP_MPI_ALL_GATHER:
    case BP_MPI_REDUCE_SCATTER:
    case BP_MPI_ALL_TO_ALL:
    case BP_MPI_ALL_TO_ALLV:
      if ((st = desc_addr(op, a->send, "send", (unsigned char**)&op->send, &ns)) ||
          (st = desc_addr(op, a->recv, "recv", &op->recv, &nr)))
        return st;
      if (op->kind == BP_MPI_ALL_GATHER) {
        op->count = ns;
        st = need_equal(op, nr, ns * (uint64_t)n, "recv (nranks * numel(send))");
      } else if (op->kind == BP_MPI_REDUCE_SCATTER) {
        op->count = nr;
        st = need_equal(op, ns, nr * (uint64_t)n, "send (nranks * numel(recv))");
      } else if (op->kind == BP_MPI_ALL_TO_ALL) {
        op->count = ns / (uint64_t)n;
        if ((st = need_equal(op, nr, ns, "recv")) == BP_OK && ns % (uint64_t)n)
          st = bp_plugin_format(op->local_msg, sizeof op->local_msg, BP_INVALID_ARGUMENT,
                                "send has %llu elements, not a multiple of %d ranks",
                                (unsigned long long)ns, n);
      } else {
        op->count = nr; /* the receive extent; the counts travel apart */
        for (int k = 0; k < 4 && st == BP_OK; k++) {
          if (!a->v[k])
            st = bp_plugin_format(op->local_msg, sizeof op->local_msg, BP_INVALID_ARGUMENT,
                                  "all_to_allv: a count or displacement array is NULL");
          for (int p = 0; p < n && st == BP_OK; p++) st = fits_int(op, a->v[k][p]);
        }
        for (int p = 0; p < n && st == BP_OK; p++)
          if (a->v[0][p] + a->v[1][p] > ns || a->v[2][p] + a->v[3][p] > nr)
            st = bp_plugin_format(op->local_msg, sizeof op->local_msg, BP_OUT_OF_RANGE,
                                  "all_to_allv: the block of rank %d lies past the end of send "
                                  "or recv",
                                  p);
        if (st == BP_OK)
          for (int k = 0; k < 4; k++) memcpy(op->v + (size_t)k * n, a->v[k], n * sizeof(uint64_t));
      }
      if (st) return st;
      break;
    case BP_MPI_SEND:
      if ((st = desc_addr(op, a->send, "data", (unsigned char**)&op->send, &ns))) return st;
      op->count = ns;
      break;
    case BP_MPI_RECV:
      if ((st = desc_addr(op, a->recv, "data", &op->recv, &nr))) return st;
      op->count = nr;
      break;
    default: break;
  }
  if (op->kind != BP_MPI_ALL_TO_ALLV && (st = fits_int(op, op->count))) return st;
  int reduces = op->kind == BP_MPI_ALL_REDUCE || op->kind == BP_MPI_REDUCE ||
                op->kind == BP_MPI_REDUCE_SCATTER;
  bp_status_t refusal = BP_OK;
  if (op->kind != BP_MPI_BARRIER &&
      (why = bp_mpi_reduce_support(op->dtype, reduces ? (int)op->rop : -1, &refusal)) != NULL)
    return bp_plugin_format(op->local_msg, sizeof op->local_msg, refusal, "%s %s: %s",
                            bp_mpi_kind_name(op->kind), bp_dtype_name(op->dtype), why);
  if (op->comp) {
    if (!bp_kit_comm_can_compress(op->dtype, op->comp))
      return bp_plugin_format(op->local_msg, sizeof op->local_msg, BP_UNIMPLEMENTED,
                              "cannot compress %s to dtype %u (i8 or float8_e4m3fn blocks of "
                              "f32, f16, bf16, f64)", bp_dtype_name(op->dtype), op->comp);
    if (reduces && op->rop != BP_REDUCE_SUM && op->rop != BP_REDUCE_AVG)
      return bp_plugin_format(op->local_msg, sizeof op->local_msg, BP_UNIMPLEMENTED,
                              "compressed reductions are SUM and AVG");
    if (op->block == 0 || op->block > (1u << 24) ||
        fits_int(op, bp_mpi_compressed_record_bytes(op)))
      return bp_plugin_format(op->local_msg, sizeof op->local_msg, BP_OUT_OF_RANGE,
                              "compressed %s: block %u (1 to 2^24), or a record exceeds an int "
                              "count", bp_mpi_kind_name(op->kind), op->block);
  }
  return BP_OK;
}

/* ---- batches: groups and streams ------------------------------------------------ */
static _Thread_local struct {
  int depth;
  bp_mpi_op_t* ops;
  uint32_t n, cap;
} g_group;

typedef struct batch {
  uint32_t n;
  bp_mpi_op_t ops[];
} batch_t;

static void batch_done(bp_mpi_op_t* ops, uint32_t n, int inflight) {
  for (uint32_t i = 0; i < n; i++) {
    if (inflight) {
      pthread_mutex_lock(&ops[i].comm->lock);
      if (--ops[i].comm->inflight == 0) pthread_cond_broadcast(&ops[i].comm->idle_cv);
      pthread_mutex_unlock(&ops[i].comm->lock);
    }
    bp_mpi_op_free(&ops[i]);
  }
}

/* Host function on a kit stream: runs the batch in stream order. */
static bp_status_t batch_host_fn(void* user) {
  batch_t* b = user;
  bp_status_t st = bp_mpi_batch_run(b->ops, b->n);
  batch_done(b->ops, b->n, 1);
  free(b);
  return st;
}

/* Runs ops now (stream NULL) or enqueues them on their stream. Takes
 * ownership of the ops' arrays either way. */
static bp_status_t submit(bp_mpi_op_t* ops, uint32_t n) {
  bpp_stream_t stream = n ? ops[0].stream : NULL;
  for (uint32_t i = 1; i < n; i++)
    if (ops[i].stream != stream) {
      batch_done(ops, n, 0);
      return bp_kit_error(BP_UNIMPLEMENTED,
                          "mpi: group_end: the group's calls use different streams; one stream "
                          "(or none) per group");
    }
  if (!stream) {
    bp_status_t st = bp_mpi_batch_run(ops, n);
    batch_done(ops, n, 0);
    return st;
  }
  batch_t* b = malloc(sizeof *b + n * sizeof(bp_mpi_op_t));
  if (!b) {
    batch_done(ops, n, 0);
    return bp_kit_error(BP_RESOURCE_EXHAUSTED, "mpi: out of host memory");
  }
  b->n = n;
  memcpy(b->ops, ops, n * sizeof *ops);
  for (uint32_t i = 0; i < n; i++) {
    pthread_mutex_lock(&ops[i].comm->lock);
    ops[i].comm->inflight++;
    pthread_mutex_unlock(&ops[i].comm->lock);
  }
  bp_status_t st = bp_kit_stream_enqueue_host_func(stream, batch_host_fn, b);
  if (st != BP_OK) {
    batch_done(b->ops, n, 1);
    free(b);
  }
  return st;
}

/* The common path of every call: check, then run, enqueue or join the
 * calling thread's group. */
static bp_status_t issue(bpp_comm_t comm, bpp_stream_t stream, uint32_t kind, uint32_t rop,
                         const call_args_t* a) {
  const char* what = bp_mpi_kind_name(kind);
  bp_status_t st = check_comm(comm, what);
  if (st != BP_OK) return st;
  if (stream && bp_kit_stream_device(stream) != comm->device)
    return bp_kit_error(BP_INVALID_ARGUMENT, "mpi: %s: the stream is not of this device", what);
  bp_mpi_op_t op;
  memset(&op, 0, sizeof op);
  op.kind = kind;
  op.rop = rop;
  op.comm = comm;
  op.stream = stream;
  if (a->options && a->options->struct_size >= BP_COLLECTIVE_OPTIONS_V1_SIZE)
    op.root = kind >= BP_MPI_SEND ? a->options->peer : a->options->root;
  else if (kind == BP_MPI_SEND || kind == BP_MPI_RECV)
    return bp_kit_error(BP_INVALID_ARGUMENT, "mpi: %s: options (the peer) are required", what);
  if (kind == BP_MPI_ALL_TO_ALLV && !(op.v = calloc(4u * (size_t)comm->size, sizeof *op.v)))
    return bp_kit_error(BP_RESOURCE_EXHAUSTED, "mpi: out of host memory");
  op.local = check_call(&op, a);
  /* Point to point has no header: bad arguments fail here, at once. */
  if (op.local != BP_OK && (kind == BP_MPI_SEND || kind == BP_MPI_RECV)) {
    bp_mpi_op_free(&op);
    return bp_kit_error(op.local, "mpi: %s: %s", what, op.local_msg);
  }
  if (g_group.depth > 0) {
    if (g_group.n == g_group.cap) {
      uint32_t cap = g_group.cap ? 2 * g_group.cap : 8;
      bp_mpi_op_t* grown = realloc(g_group.ops, cap * sizeof *grown);
      if (!grown) {
        bp_mpi_op_free(&op);
        return bp_kit_error(BP_RESOURCE_EXHAUSTED, "mpi: out of host memory");
      }
      g_group.ops = grown;
      g_group.cap = cap;
    }
    g_group.ops[g_group.n++] = op;
    return BP_OK;
  }
  return submit(&op, 1);
}

static bp_status_t group_begin(void) {
  g_group.depth++;
  return BP_OK;
}

static bp_status_t group_end(void) {
  if (g_group.depth == 0)
    return bp_kit_error(BP_FAILED_PRECONDITION, "mpi: group_end without group_begin");
  if (--g_group.depth > 0) return BP_OK;
  uint32_t n = g_group.n;
  g_group.n = 0;
  bp_status_t st = submit(g_group.ops, n);
  free(g_group.ops);
  g_group.ops = NULL;
  g_group.cap = 0;
  return st;
}

/* ---- the table's call slots ---------------------------------------------------- */
static bp_status_t all_reduce(bpp_comm_t c, bpp_stream_t s, const bp_tensor_desc_t* send,
                              const bp_tensor_desc_t* recv, uint32_t op,
                              const bp_collective_options_t* o) {
  call_args_t a = {.send = send, .recv = recv, .options = o};
  return issue(c, s, BP_MPI_ALL_REDUCE, op, &a);
}
static bp_status_t broadcast(bpp_comm_t c, bpp_stream_t s, const bp_tensor_desc_t* send,
                             const bp_tensor_desc_t* recv, const bp_collective_options_t* o) {
  call_args_t a = {.send = send, .recv = recv, .options = o};
  return issue(c, s, BP_MPI_BROADCAST, 0, &a);
}
static bp_status_t reduce(bpp_comm_t c, bpp_stream_t s, const bp_tensor_desc_t* send,
                          const bp_tensor_desc_t* recv, uint32_t op,
                          const bp_collective_options_t* o) {
  call_args_t a = {.send = send, .recv = recv, .options = o};
  return issue(c, s, BP_MPI_REDUCE, op, &a);
}
static bp_status_t all_gather(bpp_comm_t c, bpp_stream_t s, const bp_tensor_desc_t* send,
                              const bp_tensor_desc_t* recv, const bp_collective_options_t* o) {
  call_args_t a = {.send = send, .recv = recv, .options = o};
  return issue(c, s, BP_MPI_ALL_GATHER, 0, &a);
}
static bp_status_t reduce_scatter(bpp_comm_t c, bpp_stream_t s, const bp_tensor_desc_t* send,
                                  const bp_tensor_desc_t* recv, uint32_t op,
                                  const bp_collective_options_t* o) {
  call_args_t a = {.send = send, .recv = recv, .options = o};
  return issue(c, s, BP_MPI_REDUCE_SCATTER, op, &a);
}
static bp_status_t all_to_all(bpp_comm_t c, bpp_stream_t s, const bp_tensor_desc_t* send,
                              const bp_tensor_desc_t* recv, const bp_collective_options_t* o) {
  call_args_t a = {.send = send, .recv = recv, .options = o};
  return issue(c, s, BP_MPI_ALL_TO_ALL, 0, &a);
}
static bp_status_t all_to_allv(bpp_comm_t c, bpp_stream_t s, const bp_tensor_desc_t* send,
                               const uint64_t* sc, const uint64_t* sd, const bp_tensor_desc_t* recv,
                               const uint64_t* rc, const uint64_t* rd,
                               const bp_collective_options_t* o) {
  call_args_t a = {.send = send, .recv = recv, .v = {sc, sd, rc, rd}, .options = o};
  return issue(c, s, BP_MPI_ALL_TO_ALLV, 0, &a);
}
static bp_status_t send(bpp_comm_t c, bpp_stream_t s, const bp_tensor_desc_t* data,
                        const bp_collective_options_t* o) {
  call_args_t a = {.send = data, .options = o};
  return issue(c, s, BP_MPI_SEND, 0, &a);
}
static bp_status_t recv(bpp_comm_t c, bpp_stream_t s, const bp_tensor_desc_t* data,
                        const bp_collective_options_t* o) {
  call_args_t a = {.recv = data, .options = o};
  return issue(c, s, BP_MPI_RECV, 0, &a);
}
static bp_status_t barrier(bpp_comm_t c, bpp_stream_t s) {
  call_args_t a = {0};
  return issue(c, s, BP_MPI_BARRIER, 0, &a);
}

/* ---- split, destroy, abort, errors, registration ---------------------------------- */
/* MPI_Comm_split; the header exchange first makes sure every rank arrived
 * (within the deadline) before the blocking split. */
static bp_status_t comm_split(bpp_comm_t comm, int32_t color, int32_t key,
                              const bp_comm_create_info_t* info, bpp_comm_t* out) {
  if (!out) return bp_kit_error(BP_INVALID_ARGUMENT, "mpi: comm_split: out_comm is NULL");
  *out = NULL;
  bp_status_t st = check_comm(comm, "comm_split");
  if (st != BP_OK) return st;
  bp_mpi_op_t op;
  memset(&op, 0, sizeof op);
  op.kind = BP_MPI_SPLIT;
  op.comm = comm;
  if (color < BP_COMM_SPLIT_NO_COLOR || (info && info->struct_size < BP_COMM_CREATE_INFO_V1_SIZE))
    op.local = bp_plugin_format(op.local_msg, sizeof op.local_msg, BP_INVALID_ARGUMENT,
                                "color %d (>= 0 or BP_COMM_SPLIT_NO_COLOR), or a short info",
                                color);
  st = bp_mpi_batch_run(&op, 1);
  bp_mpi_op_free(&op);
  if (st != BP_OK) return st;
  int rc;
  bp_mpi_h mc = NULL;
  BP_MPI(rc, MPI_Comm_split, comm->comm, color == BP_COMM_SPLIT_NO_COLOR ? BP_MPI_UNDEFINED : color,
         key, &mc);
  if ((st = bp_mpi_check(rc, "comm_split: MPI_Comm_split")) != BP_OK) return st;
  if (mc == bp_mpi.f.ompi_mpi_comm_null) return BP_OK;
  return comm_wrap(comm->device, mc, default_timeout_ns(info, comm->timeout_ns), out);
}

/* Waits for the batches enqueued on streams, then frees the MPI
 * communicator (MPI frees it once operations an abort or a timeout left
 * pending complete). */
static void comm_destroy(bpp_comm_t comm) {
  if (check_comm(comm, "comm_destroy") != BP_OK) return;
  pthread_mutex_lock(&comm->lock);
  while (comm->inflight > 0) pthread_cond_wait(&comm->idle_cv, &comm->lock);
  pthread_mutex_unlock(&comm->lock);
  bp_mpi_comm_reap(comm);
  int rc;
  BP_MPI(rc, MPI_Comm_free, &comm->comm);
  (void)rc;
  free(comm->scratch);
  comm->magic = 0;
  pthread_mutex_destroy(&comm->lock);
  pthread_cond_destroy(&comm->idle_cv);
  free(comm);
}

/* ncclCommAbort: local. A rank of this process waiting in a call on `comm`
 * returns ABORTED at its next poll; other processes' ranks see their
 * deadline pass (MPI cannot cancel a posted collective). */
static bp_status_t comm_abort(bpp_comm_t comm) {
  bp_status_t st = check_comm(comm, "comm_abort");
  if (st == BP_OK) bp_mpi_comm_break(comm, BP_ABORTED, "comm_abort was called");
  return st;
}

static bp_status_t comm_get_async_error(bpp_comm_t comm) {
  bp_status_t st = check_comm(comm, "comm_get_async_error");
  if (st != BP_OK) return st;
  st = (bp_status_t)atomic_load(&comm->error);
  if (st == BP_OK) return BP_OK;
  pthread_mutex_lock(&comm->lock);
  st = bp_kit_error(st, "mpi: the communicator is broken: %s", comm->error_msg);
  pthread_mutex_unlock(&comm->lock);
  return st;
}

/* ncclCommUserRank / ncclCommCount: MPI_Comm_rank and MPI_Comm_size,
 * read once when the communicator was made. */
static bp_status_t comm_info(bpp_comm_t comm, int32_t* out_rank, int32_t* out_size) {
  bp_status_t st = check_comm(comm, "comm_info");
  if (st != BP_OK) return st;
  if (!out_rank || !out_size)
    return bp_kit_error(BP_INVALID_ARGUMENT, "mpi: comm_info: NULL out");
  *out_rank = comm->rank;
  *out_size = comm->size;
  return BP_OK;
}

/* Host memory needs no registration with MPI: the handle is a token that
 * deregister checks. */
typedef struct token {
  uint32_t magic;
  bpp_comm_t comm;
  bpp_buffer_t buffer;
} token_t;

static bp_status_t comm_register(bpp_comm_t comm, bpp_buffer_t buffer, void** out) {
  bp_status_t st = check_comm(comm, "comm_register");
  if (st != BP_OK) return st;
  if (!out || !buffer || !bp_mpi_is_our_buffer(buffer))
    return bp_kit_error(BP_INVALID_ARGUMENT,
                        "mpi: comm_register: NULL out, or not a buffer of this plugin");
  token_t* t = malloc(sizeof *t);
  if (!t) return bp_kit_error(BP_RESOURCE_EXHAUSTED, "mpi: out of host memory");
  *t = (token_t){BP_MPI_TOKEN_MAGIC, comm, buffer};
  *out = t;
  return BP_OK;
}

static bp_status_t comm_deregister(bpp_comm_t comm, void* handle) {
  token_t* t = handle;
  bp_status_t st = check_comm(comm, "comm_deregister");
  if (st != BP_OK) return st;
  if (!t || t->magic != BP_MPI_TOKEN_MAGIC || t->comm != comm)
    return bp_kit_error(BP_INVALID_ARGUMENT,
                        "mpi: comm_deregister: not a registration of this communicator");
  t->magic = 0;
  free(t);
  return BP_OK;
}

const bpp_comm_table_t bp_mpi_comm_table = {
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
