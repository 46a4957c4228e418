/* Collectives through NCCL (libnccl.so.2, or BP_NCCL_PATH), opened with
 * dlopen at negotiation: with it the plugin's vtable has the comm table
 * (tier NATIVE); without it the vtable has none and the core stages
 * collectives through host memory (the reason is logged).
 *
 * Ownership: a communicator owns its ncclComm_t (gone after an abort) and
 * a 4-byte device word for barriers; streams hold references on the
 * communicators used on them until their next synchronize (the watchdog).
 * Threading: the comm table is thread-safe as the ABI says; a
 * communicator's mutex serializes NCCL calls on it against abort.
 */
#ifndef BP_CUDA_NCCL_H_
#define BP_CUDA_NCCL_H_

#include <nccl.h>

#include "cuda_internal.h"

#define NCCL_SYMBOLS(REQ, OPT) \
  REQ(ncclGetVersion)          \
  REQ(ncclGetUniqueId)         \
  REQ(ncclCommInitRank)        \
  REQ(ncclCommDestroy)         \
  REQ(ncclCommAbort)           \
  REQ(ncclCommGetAsyncError)   \
  REQ(ncclGetErrorString)      \
  REQ(ncclCommCount)           \
  REQ(ncclCommUserRank)        \
  REQ(ncclAllReduce)           \
  REQ(ncclBroadcast)           \
  REQ(ncclReduce)              \
  REQ(ncclAllGather)           \
  REQ(ncclReduceScatter)       \
  REQ(ncclSend)                \
  REQ(ncclRecv)                \
  REQ(ncclGroupStart)          \
  REQ(ncclGroupEnd)            \
  OPT(ncclGetLastError)        \
  OPT(ncclCommSplit)           \
  OPT(ncclCommRegister)        \
  OPT(ncclCommDeregister)

#define BP_NCCL_SYMBOL_FIELD(name) __typeof__(&name) name;
typedef struct nccl_symbols {
  NCCL_SYMBOLS(BP_NCCL_SYMBOL_FIELD, BP_NCCL_SYMBOL_FIELD)
} nccl_symbols_t;

/* The symbols once NCCL is loaded (process-wide, never unloaded: NCCL's
 * threads outlive any one communicator), else NULL with the reason. */
const nccl_symbols_t* cuda_nccl(const char** out_reason);

/* The comm table (cuda_nccl_coll.c). */
extern const bpp_comm_table_t cuda_comm_table;

/* The streams' watchdog (cuda_nccl_stream_sync, ...) is declared in
 * cuda_internal.h, where streams are. */

#endif /* BP_CUDA_NCCL_H_ */
