/* The device's CUevents, recycled (see cuda_event_pool.h). */
#include "cuda_event_pool.h"

#include "bp_gpu_heap.h"

static bp_status_t create(bpp_device_t d, unsigned flags, void** out) {
  CUevent e = NULL;
  CUresult r = d->cu->cuEventCreate(&e, flags);
  if (r != CUDA_SUCCESS) return cuda_fail(d, r, "cuEventCreate");
  *out = e;
  return BP_OK;
}
static bp_status_t create_plain(void* ctx, void** out) { return create(ctx, CU_EVENT_DISABLE_TIMING, out); }
static bp_status_t create_timing(void* ctx, void** out) { return create(ctx, CU_EVENT_DEFAULT, out); }
static void destroy(void* ctx, void* e) {
  bpp_device_t d = ctx;
  d->cu->cuEventDestroy_v2((CUevent)e);
}
static const bp_gpu_event_ops_t k_ops[2] = {{create_plain, destroy}, {create_timing, destroy}};

bp_status_t cuda_event_pools_open(bpp_device_t d) {
  for (int k = 0; k < 2; ++k) {
    bp_status_t st = bp_gpu_event_pool_create(&k_ops[k], d, CUDA_EVENT_POOL_MAX, &d->events[k]);
    if (st != BP_OK) {
      cuda_event_pools_close(d);
      return st;
    }
  }
  return BP_OK;
}

void cuda_event_pools_close(bpp_device_t d) {
  for (int k = 0; k < 2; ++k) {
    bp_gpu_event_pool_destroy(d->events[k]);
    d->events[k] = NULL;
  }
}

bp_status_t cuda_event_get(bpp_device_t d, int timing, CUevent* out) {
  void* e = NULL;
  bp_status_t st = bp_gpu_event_get(d->events[timing ? 1 : 0], &e);
  if (st == BP_OK) *out = e;
  return st;
}

void cuda_event_put(bpp_device_t d, int timing, CUevent e) {
  if (!e) return;
  if (d->cu->cuEventQuery(e) != CUDA_SUCCESS) {
    d->cu->cuEventDestroy_v2(e); /* pending (or failed): the driver frees it when done */
    return;
  }
  /* Kept, or destroyed by the pool when full; refused only when the pool
   * holds it already (a second put), which leaves it there. */
  (void)bp_gpu_event_put(d->events[timing ? 1 : 0], e);
}
