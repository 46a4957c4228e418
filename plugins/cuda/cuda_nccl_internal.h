/* The CUDA plugin's NCCL communicators (internal to cuda_nccl*.c). */
#ifndef BP_CUDA_NCCL_INTERNAL_H_
#define BP_CUDA_NCCL_INTERNAL_H_

#include <stdatomic.h>

#include "cuda_nccl.h"

/* The ranks of one NCCL communicator that live in this process, keyed by
 * its unique id: they share the watchdog's verdict. */
typedef struct cuda_nccl_world {
  struct cuda_nccl_world* next;
  ncclUniqueId id;
  int refs;          /* communicators of this process */
  bp_status_t status; /* BP_OK until a rank's watchdog or abort decides */
  char msg[256];
} cuda_nccl_world_t;

struct bpp_comm_s {
  atomic_int refs; /* the handle, plus one per stream watching it */
  bpp_device_t dev;
  const nccl_symbols_t* nc;
  pthread_mutex_t mu;  /* comm, broken, last_ns, in_flight */
  ncclComm_t comm;     /* NULL once aborted */
  int rank, size;
  uint64_t timeout_ns;
  uint64_t last_ns;    /* when the last collective was enqueued */
  int in_flight;       /* collectives enqueued since the streams' last synchronize */
  bp_status_t broken;  /* sticky once set */
  char broken_msg[256];
  cuda_nccl_world_t* world;
  uint32_t splits;     /* comm_split calls so far (the same on every rank) */
  CUdeviceptr scratch; /* barrier: one int32 all-reduced */
};

bp_status_t cuda_nccl_status_of(ncclResult_t r);
void cuda_nccl_text(struct bpp_comm_s* c, ncclResult_t r, const char* what, char* buf, size_t cap);
/* Reports "cuda: <what>: <NCCL text> (n): <last error>" and maps r. */
bp_status_t cuda_nccl_fail(struct bpp_comm_s* c, ncclResult_t r, const char* what);
uint64_t cuda_nccl_now_ns(void);
cuda_nccl_world_t* cuda_nccl_world_get(const ncclUniqueId* id);
void cuda_nccl_world_put(cuda_nccl_world_t* w);
void cuda_nccl_world_set(cuda_nccl_world_t* w, bp_status_t st, const char* msg);
void cuda_nccl_comm_unref(struct bpp_comm_s* c);
void cuda_nccl_break_locked(struct bpp_comm_s* c, bp_status_t st, const char* msg);
void cuda_nccl_watch_add(bpp_stream_t s, struct bpp_comm_s* c);
/* The communicator's error now (BP_OK while none; reported), breaking it
 * on a new one. `now_ns` 0: no deadline check. */
bp_status_t cuda_nccl_comm_poll(struct bpp_comm_s* c, uint64_t now_ns);

#endif /* BP_CUDA_NCCL_INTERNAL_H_ */
