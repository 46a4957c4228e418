/* backplane: collectives for applications.
 *
 * A communicator (bp_comm_t) is one rank on one device. Ranks of one
 * process are made together with bp_comm_init_all (one rank per listed
 * device; a device may be listed more than once, each rank then uses its
 * own streams). Ranks in several processes each call bp_comm_create with a
 * bootstrap that connects them.
 *
 * Every collective is stream-ordered on a stream of the communicator's
 * device and is matched across ranks by call order; tensors are dense
 * (contiguous) and live on that device. Calls that disagree across ranks
 * (kind, dtype, count, reduction, root) fail on every rank with
 * INVALID_ARGUMENT; a rank that never arrives makes the others fail with
 * DEADLINE_EXCEEDED after the communicator's timeout (bp_comm_options_t,
 * BACKPLANE_COMM_TIMEOUT_MS, else 300 s), which breaks the communicator.
 * Errors found while the stream runs come back from the stream's next
 * synchronize, and from bp_comm_get_async_error.
 *
 * Who runs them: the device's plugin when it has a comm table (tier
 * NATIVE, e.g. cpu); otherwise the core stages through host memory
 * (tier HOST_STAGED, e.g. vulkan): a download on the stream, the host
 * engine, an upload. docs/collectives.md has the NCCL, oneCCL and MPI
 * equivalent of every call.
 *
 * Threading: one rank's calls are externally synchronized; one thread may
 * drive several ranks, using a group (bp_comm_group_begin/end) around
 * calls that would otherwise wait for each other (send/recv pairs).
 * bp_comm_abort and bp_comm_get_async_error are thread-safe.
 */
#ifndef BACKPLANE_COMM_H_
#define BACKPLANE_COMM_H_

#include "backplane/backplane.h"
#include "backplane/plugin.h" /* bp_bootstrap_t, bp_collective_options_t */

#ifdef __cplusplus
extern "C" {
#endif

typedef struct bp_comm bp_comm_t;

/* bp_comm_options_t.flags */
enum bp_comm_option_flags {
  /* For a device whose plugin has no collectives, use another plugin's
   * communicator that reaches host memory (BPP_COMM_HOST_POINTERS: cpu,
   * mpi) instead of the core's host engine, also within one process. */
  BP_COMM_PREFER_PLUGIN_ENGINE = 1u << 0
};

typedef struct bp_comm_options {
  uint32_t struct_size;
  uint32_t flags;      /* enum bp_comm_option_flags */
  uint64_t timeout_ns; /* 0: BACKPLANE_COMM_TIMEOUT_MS, else 300 s */
  const void* next;
} bp_comm_options_t;
#define BP_COMM_OPTIONS_V1_SIZE 24u

/* One rank per device, ranks in list order, all in this process
 * (ncclCommInitAll). The devices must all be of one plugin; `options` may
 * be NULL. out_comms has `count` entries. */
BP_API bp_status_t bp_comm_init_all(bp_device_t* const* devices, uint32_t count,
                                    const bp_comm_options_t* options, bp_comm_t** out_comms);
/* This process's rank on `device`, connected by `bootstrap`; blocks until
 * every rank called it (ncclCommInitRank). The device's plugin (or the
 * core's host engine) makes the rank when the ranks share this process;
 * across processes a plugin that can reach host memory of others (comm
 * table flag BPP_COMM_HOST_POINTERS, the mpi plugin) does, staged through
 * host memory. bootstrap NULL: the launcher's world (`mpirun`), through
 * such a plugin. */
BP_API bp_status_t bp_comm_create(bp_device_t* device, const bp_bootstrap_t* bootstrap,
                                  const bp_comm_options_t* options, bp_comm_t** out_comm);
/* A bootstrap over TCP from the environment, as torch.distributed's env://:
 * BACKPLANE_RANK and BACKPLANE_WORLD_SIZE (else OMPI_COMM_WORLD_RANK/SIZE
 * or PMI_RANK/SIZE), BACKPLANE_MASTER_ADDR (default 127.0.0.1) and
 * BACKPLANE_MASTER_PORT (default 29500), where rank 0 listens. Blocks until
 * every rank connected or the timeout passed. */
BP_API bp_status_t bp_bootstrap_create_env(const bp_comm_options_t* options,
                                           bp_bootstrap_t** out_bootstrap);
BP_API void bp_bootstrap_destroy(bp_bootstrap_t* bootstrap);

/* Ranks with the same color form a new communicator ordered by key, then
 * by rank; BP_COMM_SPLIT_NO_COLOR gives NULL. Collective: every rank of
 * `comm` calls it (from its own thread, for ranks of one process). */
BP_API bp_status_t bp_comm_split(bp_comm_t* comm, int32_t color, int32_t key,
                                 bp_comm_t** out_comm);
/* Waits for the communicator's queued work, then frees it. */
BP_API void bp_comm_destroy(bp_comm_t* comm);
BP_API bp_status_t bp_comm_abort(bp_comm_t* comm);
BP_API bp_status_t bp_comm_get_async_error(bp_comm_t* comm);

BP_API int32_t bp_comm_rank(const bp_comm_t* comm);
BP_API int32_t bp_comm_size(const bp_comm_t* comm);
BP_API bp_device_t* bp_comm_device(const bp_comm_t* comm);
BP_API uint32_t bp_comm_tier(const bp_comm_t* comm); /* enum bp_comm_tier */

/* `options` may be NULL (no compression, root 0). In place: send == recv
 * (all_reduce, broadcast, reduce); for all_gather the send is recv's block
 * of this rank, for reduce_scatter the recv is send's block of this rank. */
BP_API bp_status_t bp_comm_all_reduce(bp_comm_t* comm, bp_stream_t* stream, bp_tensor_t* send,
                                      bp_tensor_t* recv, uint32_t op,
                                      const bp_collective_options_t* options);
BP_API bp_status_t bp_comm_broadcast(bp_comm_t* comm, bp_stream_t* stream, bp_tensor_t* send,
                                     bp_tensor_t* recv, const bp_collective_options_t* options);
/* recv is written on the root only (it may be NULL elsewhere). */
BP_API bp_status_t bp_comm_reduce(bp_comm_t* comm, bp_stream_t* stream, bp_tensor_t* send,
                                  bp_tensor_t* recv, uint32_t op,
                                  const bp_collective_options_t* options);
BP_API bp_status_t bp_comm_all_gather(bp_comm_t* comm, bp_stream_t* stream, bp_tensor_t* send,
                                      bp_tensor_t* recv, const bp_collective_options_t* options);
BP_API bp_status_t bp_comm_reduce_scatter(bp_comm_t* comm, bp_stream_t* stream,
                                          bp_tensor_t* send, bp_tensor_t* recv, uint32_t op,
                                          const bp_collective_options_t* options);
BP_API bp_status_t bp_comm_all_to_all(bp_comm_t* comm, bp_stream_t* stream, bp_tensor_t* send,
                                      bp_tensor_t* recv, const bp_collective_options_t* options);
/* Counts and displacements: comm size entries each, in elements. */
BP_API bp_status_t bp_comm_all_to_allv(bp_comm_t* comm, bp_stream_t* stream, bp_tensor_t* send,
                                       const uint64_t* send_counts, const uint64_t* send_displs,
                                       bp_tensor_t* recv, const uint64_t* recv_counts,
                                       const uint64_t* recv_displs,
                                       const bp_collective_options_t* options);
BP_API bp_status_t bp_comm_send(bp_comm_t* comm, bp_stream_t* stream, bp_tensor_t* data,
                                int32_t peer);
BP_API bp_status_t bp_comm_recv(bp_comm_t* comm, bp_stream_t* stream, bp_tensor_t* data,
                                int32_t peer);
BP_API bp_status_t bp_comm_barrier(bp_comm_t* comm, bp_stream_t* stream);

/* How two ranks' devices are connected, slowest last. */
enum bp_link_tier {
  BP_LINK_SAME_DEVICE = 0, /* one device: its own memory */
  BP_LINK_PEER = 1,        /* devices of one plugin that copy to each other directly
                              (BP_DEVICE_FLAG_PEER_COPY), or share host memory */
  BP_LINK_HOST = 2,        /* through host memory (another plugin, host staging) */
  BP_LINK_NETWORK = 3      /* another process, possibly another machine */
};
/* The tier between two devices of this process (host staging between
 * plugins; a plugin's devices with PEER_COPY or UNIFIED_MEMORY are peers). */
BP_API uint32_t bp_device_link_tier(const bp_device_t* a, const bp_device_t* b);
/* The slowest link of the communicator: the largest tier between any two of
 * its ranks (bp_comm_init_all knows them all; a bp_comm_create rank in this
 * process counts as HOST, across processes as NETWORK). */
BP_API uint32_t bp_comm_link_tier(const bp_comm_t* comm);

/* Collective kinds of bp_comm_estimate_ns. */
enum bp_collective_kind {
  BP_COLLECTIVE_ALL_REDUCE = 0, BP_COLLECTIVE_BROADCAST = 1, BP_COLLECTIVE_REDUCE = 2,
  BP_COLLECTIVE_ALL_GATHER = 3, BP_COLLECTIVE_REDUCE_SCATTER = 4, BP_COLLECTIVE_ALL_TO_ALL = 5,
  BP_COLLECTIVE_SEND_RECV = 6, BP_COLLECTIVE_BARRIER = 7
};
/* Estimated time of one collective moving `bytes` (the recv size of
 * all_gather, the send size of reduce_scatter, the tensor otherwise): the
 * bus bytes of the kind (2(n-1)/n of the size for all_reduce, as NCCL
 * counts) over the link tier's bandwidth (the devices' memory bandwidth on
 * one device or between peers, their host link for HOST, plus the two
 * staging copies of a HOST_STAGED tier, BACKPLANE_NETWORK_GBPS (default
 * 10) for NETWORK), plus a latency per step. What the graph compiler asks;
 * a model, not a measurement (docs/collectives.md). */
BP_API bp_status_t bp_comm_estimate_ns(const bp_comm_t* comm, uint32_t kind, uint64_t bytes,
                                       double* out_ns);
/* The same for a compressed call (bp_collective_options_t.compression:
 * BP_DTYPE_I8 or BP_DTYPE_F8E4M3FN codes of a float `dtype`, one f32 scale
 * per `block` elements, 0 for 256): the bus bytes of the codes over the
 * link, and the codec's passes at BACKPLANE_COMM_CODEC_GBPS (f32 bytes per
 * second on one core, default 4), overlapped with the link's time over a
 * network (NETWORK tier), added to it otherwise (shared memory copies run
 * on the same cores). Compression pays when this is below
 * bp_comm_estimate_ns of the same bytes. all_reduce, all_gather and
 * reduce_scatter only (INVALID_ARGUMENT otherwise; UNIMPLEMENTED for a
 * pair of dtypes without a compressed form). */
BP_API bp_status_t bp_comm_estimate_compressed_ns(const bp_comm_t* comm, uint32_t kind,
                                                  uint32_t dtype, uint64_t bytes,
                                                  uint32_t compression, uint32_t block,
                                                  double* out_ns);

/* Groups of the calling thread (ncclGroupStart/End); they nest and span
 * communicators of every plugin. */
BP_API bp_status_t bp_comm_group_begin(void);
BP_API bp_status_t bp_comm_group_end(void);

#ifdef __cplusplus
}
#endif
#endif /* BACKPLANE_COMM_H_ */
