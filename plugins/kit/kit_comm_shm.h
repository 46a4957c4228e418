/* backplane plugin kit: the cross-process shared-memory engine behind
 * bp_kit_comm_t (internal to the kit; bp_kit_comm.h is the interface).
 *
 * When the ranks of a bootstrap span processes of one machine,
 * bp_kit_comm_create makes this engine instead of the in-process one:
 * rank 0 creates a POSIX shared-memory segment and hands its name out
 * through the bootstrap; every rank maps it. The segment holds one data
 * slot per rank (each collective moves its payload in rounds of at most a
 * slot), each rank's call header, a barrier word per rank, and one
 * byte-stream channel per ordered pair of ranks for send/recv.
 * Synchronization is atomics plus one futex word ("bell") with deadlines;
 * a peer whose process exits is detected while waiting (every 20 ms), and
 * breaks the communicator with ABORTED instead of a hang.
 *
 * Threading: as bp_kit_comm.h (one rank's calls are externally
 * synchronized; abort and status from any thread).
 */
#ifndef BACKPLANE_KIT_COMM_SHM_H_
#define BACKPLANE_KIT_COMM_SHM_H_

#include <stdint.h>

#include "bp_kit_comm.h"

typedef struct bp_kit_shm bp_kit_shm_t;

/* Collective over `bs` (every rank calls it): rank 0 creates the segment,
 * the others map it. UNIMPLEMENTED on every rank when some rank cannot
 * map it (another machine). */
bp_status_t bp_kit_shm_create(const bp_bootstrap_t* bs, uint64_t timeout_ns,
                              bp_kit_shm_t** out_shm, bp_kit_comm_error_t* err);
void bp_kit_shm_destroy(bp_kit_shm_t* s);
int32_t bp_kit_shm_rank(const bp_kit_shm_t* s);
int32_t bp_kit_shm_size(const bp_kit_shm_t* s);
void bp_kit_shm_abort(bp_kit_shm_t* s);
bp_status_t bp_kit_shm_status(bp_kit_shm_t* s, bp_kit_comm_error_t* err);
/* A group of this rank's calls (as bp_kit_comm_run); `c` is the comm that
 * owns `s` (for the per-rank argument check). */
bp_status_t bp_kit_shm_run(bp_kit_shm_t* s, const bp_kit_comm_t* c, const bp_kit_coll_t* calls,
                           uint32_t n, bp_kit_comm_error_t* err);
/* Collective: ranks with the same color get a new segment of their own. */
bp_status_t bp_kit_shm_split(bp_kit_shm_t* s, const bp_kit_comm_t* c, int32_t color, int32_t key,
                             uint64_t timeout_ns, bp_kit_shm_t** out_shm,
                             bp_kit_comm_error_t* err);

/* Every rank's call agrees with rank 0's (shared with the in-process
 * engine): `get(user, r, &status, &msg)` gives rank r's call and the
 * verdict of its own check. The same verdict on every rank. */
bp_status_t bp_kit_coll_agree(int32_t n, const bp_kit_coll_t* (*get)(const void* user, int32_t r,
                                                                      bp_status_t* status,
                                                                      const char** msg),
                              const void* user, const char* what, bp_kit_comm_error_t* err);
const char* bp_kit_coll_kind_name(uint32_t kind);
/* The engines' shared helpers (kit_comm.c): an error into `err` (may be
 * NULL), returning `status`; chunk r of n of `count` elements (the first
 * count % n chunks one longer); the elements an all_to_all(v) side spans. */
bp_status_t bp_kit_comm_fail(bp_kit_comm_error_t* err, bp_status_t status, const char* fmt, ...)
    __attribute__((format(printf, 3, 4)));
void bp_kit_comm_chunk(uint64_t count, int32_t n, int32_t r, uint64_t* begin, uint64_t* len);
uint64_t bp_kit_coll_extent(const bp_kit_coll_t* call, int32_t n, const uint64_t* counts,
                            const uint64_t* displs);
/* Chunk r of n of `count` elements in whole blocks of `block`: [*b, *e)
 * (empty at count for a rank past the last block). */
void bp_kit_comm_block_chunk(uint64_t count, uint32_t block, int32_t n, int32_t r, uint64_t* b,
                             uint64_t* e);

/* Compressed rounds (kit_comm_shm_quant.c): a round's codes and scales in
 * a slot of slot_bytes, `seg` elements per segment and round. */
typedef struct bp_kit_qplan {
  uint64_t seg;        /* elements per round and segment */
  uint64_t scales_at;  /* bytes from a part's codes to its scales */
  uint64_t part_bytes; /* bytes from one part to the next */
} bp_kit_qplan_t;
bp_kit_qplan_t bp_kit_qplan(const bp_kit_coll_t* c, int32_t n, uint64_t slot_bytes);
/* One compressed call of rank `rank` of n. The pointer arrays (n entries)
 * and acc (plan.seg floats) are this rank's scratch; slot(user, r) is rank
 * r's slot. */
typedef struct bp_kit_qround {
  const bp_kit_coll_t* call;
  int32_t n, rank;
  bp_kit_qplan_t plan;
  unsigned char* (*slot)(void* user, int32_t r);
  void* user;
  const int8_t** peer_codes;
  const float** peer_scales;
  float* acc;
} bp_kit_qround_t;
/* The steps of the round at `off`, between the engine's barriers: this
 * rank's codes into its slot; reading every slot (returns whether a third
 * step follows: all_reduce); all_reduce's encoded chunks into the output. */
void bp_kit_qround_publish(const bp_kit_qround_t* q, const void* input, uint64_t off);
int bp_kit_qround_consume(const bp_kit_qround_t* q, uint64_t off);
void bp_kit_qround_gather(const bp_kit_qround_t* q, uint64_t off);

/* Link tiers as backplane/comm.h numbers them (enum bp_link_tier; the
 * core pins the values). */
enum bp_kit_link {
  BP_KIT_LINK_SAME_DEVICE = 0,
  BP_KIT_LINK_PEER = 1,
  BP_KIT_LINK_HOST = 2,
  BP_KIT_LINK_NETWORK = 3
};
/* The largest all_reduce (bytes) that runs one-shot (every rank reduces
 * the whole vector) rather than reduce-scatter + all-gather, over a link
 * of tier `link` (enum bp_kit_link) between `nranks` ranks: the crossover
 * of the two algorithms' alpha-beta costs (kit_comm_algo.c). */
uint64_t bp_kit_comm_one_shot_max(uint32_t link, int32_t nranks);
/* The all_reduce bytes that `c` runs one-shot: its engine's link (PEER in
 * one process, HOST across processes through shared memory). */
uint64_t bp_kit_comm_one_shot_bytes(const bp_kit_comm_t* c);

#endif /* BACKPLANE_KIT_COMM_SHM_H_ */
