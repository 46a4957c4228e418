/* backplane plugin kit: the blocking primitives the in-process collectives
 * and bootstrap share: a generation barrier with a deadline, monotonic
 * deadlines, and the default timeout. Internal to the kit.
 */
#ifndef BACKPLANE_KIT_COMM_SYNC_H_
#define BACKPLANE_KIT_COMM_SYNC_H_

#include <pthread.h>
#include <stdint.h>

#include "backplane/plugin.h"

/* A mutex and a condition variable on CLOCK_MONOTONIC. */
typedef struct bp_kit_sync {
  pthread_mutex_t mu;
  pthread_cond_t cv;
} bp_kit_sync_t;

int bp_kit_sync_init(bp_kit_sync_t* s);
void bp_kit_sync_destroy(bp_kit_sync_t* s);
/* Absolute CLOCK_MONOTONIC time `timeout_ns` from now. */
struct timespec bp_kit_deadline(uint64_t timeout_ns);
/* Waits on s->cv (s->mu held) until signalled or the deadline: 0, or
 * nonzero once the deadline has passed. */
int bp_kit_sync_wait(bp_kit_sync_t* s, const struct timespec* deadline);

/* A reusable barrier for `n` parties (s->mu held around every call).
 * `arrived[r]` marks who is in the current round, so a timeout can name
 * the missing ranks. */
typedef struct bp_kit_barrier {
  int32_t n;
  int32_t count;
  uint64_t generation;
  uint8_t* arrived; /* n entries */
} bp_kit_barrier_t;

/* Arrives as `rank` and waits (s->mu held) until all n have arrived, the
 * deadline passes, or *broken becomes nonzero. BP_OK when the round
 * completed; DEADLINE_EXCEEDED with "ranks 1, 3 did not arrive" in msg;
 * or *broken's status. */
bp_status_t bp_kit_barrier_wait(bp_kit_sync_t* s, bp_kit_barrier_t* b, int32_t rank,
                                const struct timespec* deadline, const bp_status_t* broken,
                                char* msg, size_t cap);


#endif /* BACKPLANE_KIT_COMM_SYNC_H_ */
