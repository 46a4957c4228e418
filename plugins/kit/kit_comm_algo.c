/* backplane plugin kit: the link tier in the all_reduce algorithm choice.
 *
 * Per rank, for S bytes over n ranks, with a the cost of one barrier over
 * the link and B the bytes per second a rank moves through memory:
 *   one-shot (every rank reduces the whole vector from every input):
 *     2 barriers, reads n S and writes S:        2a + (n + 1) S / B
 *   reduce-scatter + all-gather (rank r reduces chunk r, then copies the
 *     other chunks from their owners): 3 barriers, reads S + (n-1) S / n,
 *     writes S / n + (n-1) S / n:                3a + (3n - 1) S / (n B)
 * One-shot wins while S < a B n / (n - 1)^2: the slower the barrier of a
 * tier, the larger the messages that run one-shot. The latencies are the
 * ones the core's cost model uses per tier (core/comm/comm_cost.c); B is
 * a conservative per-rank copy bandwidth of a shared memory system.
 */
#include <stdint.h>

#include "kit_comm_shm.h"

/* Per-barrier latency by tier (ns) and a rank's memory bandwidth (B/s). */
static const double k_barrier_ns[] = {1000.0, 2000.0, 5000.0, 20000.0};
#define RANK_BYTES_PER_S 8e9

uint64_t bp_kit_comm_one_shot_max(uint32_t link, int32_t nranks) {
  if (nranks < 2) return UINT64_MAX; /* one rank: a copy either way */
  const double a = k_barrier_ns[link < 4 ? link : 3] * 1e-9;
  const double n = (double)nranks, m = n - 1.0;
  return (uint64_t)(a * RANK_BYTES_PER_S * n / (m * m));
}
