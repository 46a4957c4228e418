/* The MPI plugin's internals: device, communicators and collective calls.
 *
 * A call (one collective or point-to-point op) is validated on the calling
 * thread and copied into a bp_mpi_op_t. Calls run in batches: a call
 * outside a group is a batch of one; a group's calls are one batch issued
 * at the outermost group_end. A batch runs now on the calling thread
 * (stream == NULL, BPP_COMM_HOST_POINTERS) or in a host function on the
 * kit stream it was given. Running a batch (mpi_exec.c):
 *   1. alltoallv calls exchange their send counts (MPI_Ialltoall) and
 *      check them against their receive counts;
 *   2. every collective exchanges a header (kind, dtype, count, op, root,
 *      local verdict) with MPI_Iallgather: every rank sees every rank's
 *      header, so a mismatch or a rank's invalid arguments fail the call
 *      with INVALID_ARGUMENT on every rank alike, before any data moves;
 *   3. the nonblocking MPI calls are posted (MPI_Iallreduce, ...);
 *   4. MPI_Testall is polled until done, the communicator's deadline or an
 *      abort (steps 1 and 2 are polled the same way);
 *   5. post-processing: AVG divides, copies out of temporaries.
 */
#ifndef BACKPLANE_MPI_INTERNAL_H_
#define BACKPLANE_MPI_INTERNAL_H_

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

#include "backplane/plugin.h"
#include "mpi_lib.h"

struct bpp_device_s;

/* Requests a failed call left pending, and the buffers MPI may still use. */
typedef struct bp_mpi_parked {
  bp_mpi_h req[2];
  bp_mpi_h* hreq; /* owned; the requests when not NULL */
  int nreq;
  void* buf[5];
} bp_mpi_parked_t;

#define BP_MPI_COMM_MAGIC 0x4d504943u /* "MPIC" */

struct bpp_comm_s {
  uint32_t magic;
  struct bpp_device_s* device;
  bp_mpi_h comm; /* this communicator's MPI communicator (owned) */
  int rank, size;
  uint64_t timeout_ns;
  atomic_uint_fast64_t calls; /* collective calls issued, for messages */
  atomic_int error;           /* bp_status_t that broke it; BP_OK while none */
  pthread_mutex_t lock;       /* guards error_msg, inflight waits */
  pthread_cond_t idle_cv;
  int inflight; /* batches enqueued on streams and not yet run */
  char error_msg[320];
  bp_mpi_parked_t* parked; /* under lock */
  uint32_t nparked, capparked;
  /* Compressed calls' buffer, kept between calls (under lock; owned). */
  void* scratch;
  size_t scratch_cap;
};

enum bp_mpi_kind {
  BP_MPI_ALL_REDUCE = 1,
  BP_MPI_BROADCAST,
  BP_MPI_REDUCE,
  BP_MPI_ALL_GATHER,
  BP_MPI_REDUCE_SCATTER,
  BP_MPI_ALL_TO_ALL,
  BP_MPI_ALL_TO_ALLV,
  BP_MPI_SEND,
  BP_MPI_RECV,
  BP_MPI_BARRIER,
  BP_MPI_SPLIT
};
const char* bp_mpi_kind_name(uint32_t kind);

/* One call, copied out of the caller's descriptors. */
typedef struct bp_mpi_op {
  uint32_t kind;
  uint32_t dtype, rop;
  int32_t root; /* broadcast, reduce: root; send, recv: peer */
  uint64_t count; /* elements: see bp_mpi_op_count in mpi_comm.c */
  /* Compressed all_reduce: BP_DTYPE_I8 or BP_DTYPE_F8E4M3FN codes with an
   * f32 scale per `block` elements (the kit's encoding), or 0. */
  uint32_t comp, block;
  uint32_t piece_log2; /* compressed: pipeline pieces of 2^this elements (0: default) */
  struct bpp_comm_s* comm;
  bpp_stream_t stream;
  const unsigned char* send;
  unsigned char* recv;
  /* all_to_allv: counts and displacements (elements), 4 * size entries:
   * send counts, send displs, recv counts, recv displs. Owned. */
  uint64_t* v;
  bp_status_t local; /* BP_OK, or the arguments were invalid here */
  char local_msg[200];
  /* Filled while running. */
  uint64_t seq;
  uint64_t start_ns; /* the batch's start: its deadline's origin */
  int64_t* hdr;     /* this rank's header record (inside hdr_all's block) */
  int64_t* hdr_all; /* every rank's record, then this rank's */
  int64_t* counts_in; /* all_to_allv: what every rank sends here */
  int* iv;            /* all_to_allv: int counts and displs */
  void* tmp;          /* temporary receive buffer (overlapping in place) */
  size_t tmp_cap;     /* compressed calls: tmp is the comm's scratch, this big */
  bp_mpi_h req[2];
  bp_mpi_h* hreq; /* header exchange by point to point: 2 (size - 1), owned */
  int nreq;       /* requests pending in hreq, or else in req */
  int abandoned; /* a request may still be pending: buffers are parked */
} bp_mpi_op_t;

/* The dtype's MPI datatype and reduction for `rop` (enum bp_reduce_op;
 * AVG gives SUM): predefined ones, or an MPI_Op_create'd op converting
 * f16, bf16 and fp8 to f64 and rounding back once per step. For moves
 * (rop < 0) a type of the element's size. *out_mult: MPI elements per
 * element. UNIMPLEMENTED with a message otherwise. */
bp_status_t bp_mpi_types(uint32_t dtype, int rop, bp_mpi_h* out_type, bp_mpi_h* out_op,
                         uint32_t* out_mult);
/* NULL when `dtype` can be reduced with `rop` (rop < 0: moved), else why
 * not (static text) and the status to fail with (INVALID_ARGUMENT for an
 * undefined reduction, UNIMPLEMENTED for one MPI lacks). */
const char* bp_mpi_reduce_support(uint32_t dtype, int rop, bp_status_t* out_status);
/* Divides n elements at p by `by` (AVG): integers toward zero, floats with
 * one rounding. */
void bp_mpi_divide(uint32_t dtype, void* p, uint64_t n, int by);

/* Compressed all_reduce, all_gather, reduce_scatter (mpi_compress.c):
 * step 3 takes the buffers; step 5 runs the pipeline (encode, exchange,
 * decode piece by piece, waiting between its steps). */
bp_status_t bp_mpi_post_compressed(bp_mpi_op_t* op);
bp_status_t bp_mpi_finish_compressed(bp_mpi_op_t* op);
/* The bytes of one record of a compressed call (what one rank sends one
 * peer per exchange). */
uint64_t bp_mpi_compressed_record_bytes(const bp_mpi_op_t* op);
/* log2 of the pipeline's piece (BACKPLANE_MPI_COMPRESS_PIECE, else 18). */
uint32_t bp_mpi_piece_log2(void);
/* Gives a compressed call's buffer back to the communicator's scratch
 * (the larger one is kept, the other freed). */
void bp_mpi_scratch_give(struct bpp_comm_s* comm, void* buf, size_t cap);

/* Runs a batch of `n` ops (validated; op->local may carry an argument
 * error). Returns the first failure. Frees nothing. */
bp_status_t bp_mpi_batch_run(bp_mpi_op_t* ops, uint32_t n);
/* Frees an op's owned arrays; an abandoned op's are parked until MPI is
 * finalized (bp_mpi_parked_release). */
void bp_mpi_op_free(bp_mpi_op_t* op);
/* At comm_destroy: frees what completed requests left; the rest stays
 * (reachable) until bp_mpi_parked_release, after MPI_Finalize. */
void bp_mpi_comm_reap(struct bpp_comm_s* comm);
void bp_mpi_parked_release(void);

/* Marks `comm` broken with `status` (first one wins) and the message. */
void bp_mpi_comm_break(struct bpp_comm_s* comm, bp_status_t status, const char* msg);

/* Polls `n` requests until done, the communicator's deadline (`start_ns`
 * + timeout) or an abort. The what/seq name the call in messages. */
bp_status_t bp_mpi_wait(struct bpp_comm_s* comm, bp_mpi_h* reqs, int n, bp_mpi_status_t* statuses,
                        uint64_t start_ns, const char* what, uint64_t seq);
uint64_t bp_mpi_now_ns(void);

/* The comm table and the device's stream (mpi_comm.c, mpi_plugin.c). */
extern const bpp_comm_table_t bp_mpi_comm_table;
int bp_mpi_is_our_buffer(bpp_buffer_t buffer);
/* The plugin's root table (mpi_plugin.c). */
const bp_plugin_vtable_t* bp_mpi_plugin_vtable(void);

#endif /* BACKPLANE_MPI_INTERNAL_H_ */
