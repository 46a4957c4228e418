/* backplane core: communicators (include/backplane/comm.h). */
#ifndef BACKPLANE_CORE_COMM_INTERNAL_H_
#define BACKPLANE_CORE_COMM_INTERNAL_H_

#include <pthread.h>

#include "backplane/comm.h"
#include "bp_kit_comm.h"
#include "internal.h"

/* A staging buffer of the host-staged path, mapped for the host. */
typedef struct bp__staging {
  bp_buffer_t* buffer;
  void* map;
  uint64_t size;
  int in_use; /* under the communicator's mu */
} bp__staging_t;

struct bp_comm {
  bp_device_t* device; /* not retained: devices live as long as the context */
  int32_t rank, size;
  uint32_t tier;       /* enum bp_comm_tier */
  uint32_t link;       /* enum bp_link_tier: the slowest link among the ranks */
  bpp_comm_t native;   /* tier NATIVE: the plugin's communicator */
  bp_kit_comm_t* engine; /* tier HOST_STAGED: the core's host engine, or */
  bp_plugin_t* bridge_plugin; /* another plugin's communicator (BPP_COMM_HOST_POINTERS) */
  bpp_comm_t bridge;          /* called with stream NULL from host functions */
  /* Host-staged jobs queued on streams and not finished, and those
   * finished but not freed yet (under mu; comm_staged.c). */
  pthread_mutex_t mu;
  pthread_cond_t idle;
  uint64_t queued;
  struct bp__staged_job* finished;
  uint32_t staging_space; /* host-visible memory space, once known */
  int staging_space_known;
  bp__staging_t* pool; /* staging buffers, reused; freed by bp_comm_destroy */
  uint32_t pool_count, pool_cap;
};

/* One collective as the front end checked it; tensors are dense and on the
 * communicator's device (recv may be NULL where the call allows it). */
typedef struct bp__comm_call {
  bp_kit_coll_t kit; /* kind, dtype, op, root/peer, count; pointers unset */
  bp_tensor_t* send;
  bp_tensor_t* recv;
  const bp_collective_options_t* options;
} bp__comm_call_t;

/* Runs or queues `call` through the host-staged path (comm_staged.c). */
BP__HIDDEN bp_status_t bp__comm_staged_issue(bp_comm_t* comm, bp_stream_t* stream,
                                             const bp__comm_call_t* call);
/* Thread-local group state (comm_group.c). */
BP__HIDDEN int bp__comm_group_open(void);
/* Calls the plugin's group_begin once per group for `plugin`. */
BP__HIDDEN bp_status_t bp__comm_group_join_plugin(bp_plugin_t* plugin);
/* Adds a host-staged call to the open group (copied). */
BP__HIDDEN bp_status_t bp__comm_group_add_staged(bp_comm_t* comm, bp_stream_t* stream,
                                                 const bp__comm_call_t* call);
/* Frees the host-staged jobs the streams finished (their staging goes back
 * to the pool); frees the pool (bp_comm_destroy, after every job). */
BP__HIDDEN void bp__comm_staged_collect(bp_comm_t* comm);
BP__HIDDEN void bp__comm_staged_free_pool(bp_comm_t* comm);
/* Queues host-staged calls of one (comm, stream) as one engine group. */
BP__HIDDEN bp_status_t bp__comm_staged_enqueue(bp_comm_t* comm, bp_stream_t* stream,
                                               const bp__comm_call_t* calls, uint32_t n);

#endif /* BACKPLANE_CORE_COMM_INTERNAL_H_ */
