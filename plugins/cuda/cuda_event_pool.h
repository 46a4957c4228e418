/* The device's CUevents, recycled (internal): cuda_event_pool.c.
 *
 * Events come from gpu_common's event pool (bp_gpu_heap.h), one pool per
 * kind (with timing, without), so creating and destroying events in a
 * loop costs no driver call after the first. An event goes back to its
 * pool only when it has completed (cuEventQuery): a reused event is then
 * indistinguishable from a new one; a pending event is destroyed (the
 * driver frees it once it completes). Up to CUDA_EVENT_POOL_MAX are kept
 * per kind; device close destroys them.
 * Threading: thread-safe (the pools' locks). Context pushed by callers.
 */
#ifndef BP_CUDA_EVENT_POOL_H_
#define BP_CUDA_EVENT_POOL_H_

#include "cuda_internal.h"

#define CUDA_EVENT_POOL_MAX 64u

bp_status_t cuda_event_pools_open(bpp_device_t dev);
void cuda_event_pools_close(bpp_device_t dev);
/* An event (timing: CU_EVENT_DEFAULT, else CU_EVENT_DISABLE_TIMING), kept
 * or created (cuEventCreate's failure reported as cuda_fail does). */
bp_status_t cuda_event_get(bpp_device_t dev, int timing, CUevent* out);
/* Gives `event` back (kept when complete, else destroyed). */
void cuda_event_put(bpp_device_t dev, int timing, CUevent event);

#endif /* BP_CUDA_EVENT_POOL_H_ */
