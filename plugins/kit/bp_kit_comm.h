/* backplane plugin kit: collectives over host memory between ranks of one
 * process (the in-process engine).
 *
 * Used by the CPU plugin's comm table (native) and by the core's
 * host-staged collectives for plugins without one. Ranks are threads of
 * one process (each rank's calls come from its stream's worker thread);
 * they meet in a shared "world" found through the bootstrap. Every call is
 * blocking: it returns when this rank's part is complete and no peer reads
 * this rank's buffers any more.
 *
 * Algorithms work directly on the peers' buffers (one address space):
 * all_reduce is a reduce-scatter (rank r reduces chunk r of every rank's
 * input, in rank order, so every rank gets bitwise the same result) then
 * an all-gather of the chunks; the others are direct copies. Each call
 * costs two or three barriers of the world.
 *
 * Errors: a call whose peers do not all arrive within the timeout fails
 * with DEADLINE_EXCEEDED and breaks the world (later calls fail the same
 * way); bp_kit_comm_abort breaks it with ABORTED and wakes every waiter.
 * Calls that disagree across ranks (kind, dtype, count, op, root) fail with
 * INVALID_ARGUMENT on every rank and leave the world usable. Messages go
 * into the caller's bp_kit_comm_error_t, so the engine also serves the
 * core, which has its own error channel.
 *
 * Threading: one rank's calls are externally synchronized; abort and
 * status are thread-safe.
 */
#ifndef BACKPLANE_KIT_COMM_H_
#define BACKPLANE_KIT_COMM_H_

#include <stdint.h>

#include "backplane/plugin.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct bp_kit_comm bp_kit_comm_t;

typedef struct bp_kit_comm_error {
  char text[256];
} bp_kit_comm_error_t;

enum bp_kit_coll_kind {
  BP_KIT_COLL_ALL_REDUCE = 1,
  BP_KIT_COLL_BROADCAST,
  BP_KIT_COLL_REDUCE,
  BP_KIT_COLL_ALL_GATHER,
  BP_KIT_COLL_REDUCE_SCATTER,
  BP_KIT_COLL_ALL_TO_ALL,
  BP_KIT_COLL_ALL_TO_ALLV,
  BP_KIT_COLL_SEND,
  BP_KIT_COLL_RECV,
  BP_KIT_COLL_BARRIER
};

/* One call of one rank. `count` is in elements: all_reduce, broadcast,
 * reduce, send, recv: the tensor; all_gather: this rank's send (recv has
 * nranks * count); reduce_scatter: this rank's recv (send has nranks *
 * count); all_to_all: one block (each side has nranks blocks). The
 * all_to_allv arrays have nranks entries in elements and must stay valid
 * for the call. */
typedef struct bp_kit_coll {
  uint32_t kind;  /* enum bp_kit_coll_kind */
  uint32_t dtype; /* enum bp_dtype */
  uint32_t op;    /* enum bp_reduce_op */
  int32_t root;   /* broadcast, reduce: root rank; send, recv: peer rank */
  uint64_t count;
  /* Payload compression of all_reduce (SUM, AVG), all_gather and
   * reduce_scatter (SUM, AVG) over float dtypes: BP_DTYPE_I8 or
   * BP_DTYPE_F8E4M3FN codes with one f32 scale per `block` elements
   * (kit_comm_quant.c), or 0. */
  uint32_t compression;
  uint32_t block;
  const void* send;
  void* recv;
  const uint64_t* send_counts;
  const uint64_t* send_displs;
  const uint64_t* recv_counts;
  const uint64_t* recv_displs;
} bp_kit_coll_t;

/* Joins the world of `bootstrap` (all ranks call it; blocks until all
 * have). Rank 0 creates the world and broadcasts its address with this
 * process's id: ranks in another process get UNIMPLEMENTED (they need a
 * cross-process engine, the mpi plugin). timeout_ns 0 picks the default
 * (BACKPLANE_COMM_TIMEOUT_MS, else 300 s). */
bp_status_t bp_kit_comm_create(const bp_bootstrap_t* bootstrap, uint64_t timeout_ns,
                               bp_kit_comm_t** out_comm, bp_kit_comm_error_t* err);
/* Collective over `comm`: ranks with the same color form a new world,
 * ordered by (key, old rank). BP_COMM_SPLIT_NO_COLOR gives NULL. */
bp_status_t bp_kit_comm_split(bp_kit_comm_t* comm, int32_t color, int32_t key,
                              uint64_t timeout_ns, bp_kit_comm_t** out_comm,
                              bp_kit_comm_error_t* err);
/* Leaves the world (the last rank frees it). No call may be running. */
void bp_kit_comm_destroy(bp_kit_comm_t* comm);
int32_t bp_kit_comm_rank(const bp_kit_comm_t* comm);
int32_t bp_kit_comm_size(const bp_kit_comm_t* comm);
/* Breaks the world with ABORTED; waiting ranks return at once. */
void bp_kit_comm_abort(bp_kit_comm_t* comm);
/* BP_OK, or the error that broke the world, with its message. */
bp_status_t bp_kit_comm_status(bp_kit_comm_t* comm, bp_kit_comm_error_t* err);

/* Checks one call's arguments on this rank alone (kind, dtype, op, root
 * or peer range, all_to_allv arrays): INVALID_ARGUMENT or UNIMPLEMENTED
 * (a reduction of a dtype it cannot reduce) with a message. */
bp_status_t bp_kit_coll_check(const bp_kit_comm_t* comm, const bp_kit_coll_t* call,
                              bp_kit_comm_error_t* err);
/* Runs `n` calls of this rank as one group (NCCL group semantics): sends
 * are posted first and completed last, so send/recv pairs between the same
 * ranks in any order cannot deadlock; the other calls run in order. */
bp_status_t bp_kit_comm_run(bp_kit_comm_t* comm, const bp_kit_coll_t* calls, uint32_t n,
                            bp_kit_comm_error_t* err);

/* The head of a pending group item: what it is issued on. */
typedef struct bp_kit_group_key {
  const void* comm;
  const void* stream;
} bp_kit_group_key_t;
/* Issues the items of a closed group (`n` items of `stride` bytes, each
 * starting with a bp_kit_group_key_t): one issue() per (comm, stream) in
 * first-seen order with the indices of its items in call order. Returns
 * the first error; every pair is still issued. */
bp_status_t bp_kit_group_for_each(const void* items, uint32_t n, size_t stride,
                                  bp_status_t (*issue)(void* user, const uint32_t* idx,
                                                       uint32_t k),
                                  void* user);

/* timeout_ns when nonzero, else BACKPLANE_COMM_TIMEOUT_MS, else 300 s. */
uint64_t bp_kit_comm_timeout(uint64_t timeout_ns);

/* Block quantization of payloads (kit_comm_quant.c). */
int bp_kit_comm_can_compress(uint32_t dtype, uint32_t compression);
uint64_t bp_kit_comm_scale_count(uint64_t count, uint32_t block);
/* Codes and scales of elements [first, first + count) of src, in blocks
 * counted from `first` (the engines encode each segment that one rank
 * receives, a round's piece of it across processes, from its start). */
void bp_kit_comm_encode(uint32_t dtype, uint32_t compression, uint32_t block, const void* src,
                        uint64_t first, uint64_t count, int8_t* codes, float* scales);
/* acc[i] = sum over q of decode(codes[q][first + i]) in f32, in q order. */
void bp_kit_comm_decode_sum(uint32_t compression, uint32_t block, const int8_t* const* codes,
                            const float* const* scales, uint32_t n, uint64_t first,
                            uint64_t count, float* acc);
/* dst[dst_first + i] = decode(codes[first + i]) as dtype. */
void bp_kit_comm_decode(uint32_t dtype, uint32_t compression, uint32_t block,
                        const int8_t* codes, const float* scales, uint64_t first, uint64_t count,
                        void* dst, uint64_t dst_first);
void bp_kit_comm_store_floats(uint32_t dtype, const float* src, uint64_t count, void* dst,
                              uint64_t dst_first);

/* Bytes of `count` elements of `dtype` (0 for unknown dtypes). */
uint64_t bp_kit_coll_bytes(uint32_t dtype, uint64_t count);
/* Nonzero when the engine can reduce `dtype` (every float, fp8, integer
 * and unsigned dtype; not bool, complex or sub-byte). */
int bp_kit_comm_can_reduce(uint32_t dtype);
/* dst[i] = src[0][i] op src[1][i] op ... op src[n-1][i] for i in
 * [0, count), in that order; AVG divides the sum by n. dst may be one of
 * the sources. */
void bp_kit_comm_reduce(uint32_t dtype, uint32_t op, void* dst, const void* const* src,
                        uint32_t n, uint64_t count);

/* A complete comm table (tier NATIVE, BPP_COMM_HOST_POINTERS) for plugins
 * whose buffers are kit host buffers and whose streams are kit queues. */
extern const bpp_comm_table_t bp_kit_host_comm_table;

/* An in-process bootstrap for `nranks` threads: bootstraps[r] is rank r's
 * (each used by one thread). Free with bp_kit_local_bootstrap_destroy
 * after every rank is done with it. */
bp_status_t bp_kit_local_bootstrap_create(int32_t nranks, bp_bootstrap_t* bootstraps,
                                          void** out_shared);
void bp_kit_local_bootstrap_destroy(void* shared);

#ifdef __cplusplus
}
#endif
#endif /* BACKPLANE_KIT_COMM_H_ */
