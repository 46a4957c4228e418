/* backplane plugin kit: barrier and deadlines of the in-process engine. */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bp_kit_comm.h"
#include "kit_comm_sync.h"

#define DEFAULT_TIMEOUT_NS (300ull * 1000000000ull)

int bp_kit_sync_init(bp_kit_sync_t* s) {
  pthread_condattr_t attr;
  if (pthread_condattr_init(&attr) != 0) return -1;
  pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
  int rc = pthread_mutex_init(&s->mu, NULL);
  if (rc == 0) {
    rc = pthread_cond_init(&s->cv, &attr);
    if (rc != 0) pthread_mutex_destroy(&s->mu);
  }
  pthread_condattr_destroy(&attr);
  return rc;
}

void bp_kit_sync_destroy(bp_kit_sync_t* s) {
  pthread_cond_destroy(&s->cv);
  pthread_mutex_destroy(&s->mu);
}

struct timespec bp_kit_deadline(uint64_t timeout_ns) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  const uint64_t max_ns = (uint64_t)INT32_MAX * 1000000000ull; /* ~68 years */
  if (timeout_ns > max_ns) timeout_ns = max_ns;
  t.tv_sec += (time_t)(timeout_ns / 1000000000ull);
  t.tv_nsec += (long)(timeout_ns % 1000000000ull);
  if (t.tv_nsec >= 1000000000L) {
    t.tv_sec += 1;
    t.tv_nsec -= 1000000000L;
  }
  return t;
}

int bp_kit_sync_wait(bp_kit_sync_t* s, const struct timespec* deadline) {
  return pthread_cond_timedwait(&s->cv, &s->mu, deadline) == ETIMEDOUT;
}

bp_status_t bp_kit_barrier_wait(bp_kit_sync_t* s, bp_kit_barrier_t* b, int32_t rank,
                                const struct timespec* deadline, const bp_status_t* broken,
                                char* msg, size_t cap) {
  if (*broken != BP_OK) return *broken;
  const uint64_t gen = b->generation;
  b->arrived[rank] = 1;
  if (++b->count == b->n) {
    b->count = 0;
    memset(b->arrived, 0, (size_t)b->n);
    b->generation++;
    pthread_cond_broadcast(&s->cv);
    return BP_OK;
  }
  while (b->generation == gen && *broken == BP_OK) {
    if (!bp_kit_sync_wait(s, deadline) || b->generation != gen) continue;
    size_t len = (size_t)snprintf(msg, cap, "timed out waiting for rank(s)");
    for (int32_t r = 0; r < b->n && len < cap; ++r)
      if (!b->arrived[r]) len += (size_t)snprintf(msg + len, cap - len, " %d", r);
    return BP_DEADLINE_EXCEEDED;
  }
  return b->generation != gen ? BP_OK : *broken;
}

uint64_t bp_kit_comm_timeout(uint64_t timeout_ns) {
  if (timeout_ns) return timeout_ns;
  const char* env = getenv("BACKPLANE_COMM_TIMEOUT_MS");
  if (env && *env) {
    char* end = NULL;
    errno = 0;
    unsigned long long ms = strtoull(env, &end, 10);
    if (errno == 0 && end && *end == '\0' && ms > 0 && ms < UINT64_MAX / 1000000ull)
      return (uint64_t)ms * 1000000ull;
  }
  return DEFAULT_TIMEOUT_NS;
}
