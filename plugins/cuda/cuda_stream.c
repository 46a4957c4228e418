/* Streams (CUstream, non-blocking, with priorities) and events (CUevent,
 * recycled through the device's event pools: cuda_event_pool.h).
 *
 * A stream's errors: the driver's (a sticky context error makes the device
 * lost: DEVICE_LOST from then on) and its host functions' (cuda_hostfn.c;
 * the first failure is kept and returned once by synchronize / query).
 */
#include <stdio.h>
#include <stdlib.h>

#include "cuda_blas.h"
#include "cuda_event_pool.h"
#include "cuda_kernels.h"

/* backplane priorities grow upward from 0; CUDA's grow downward from
 * `least` (usually 0) to `greatest` (e.g. -5). */
static int cuda_priority(bpp_device_t d, int32_t priority) {
  long p = -(long)priority;
  if (p < d->prio_greatest) p = d->prio_greatest;
  if (p > d->prio_least) p = d->prio_least;
  return (int)p;
}

bp_status_t cuda_stream_create(bpp_device_t d, const bp_stream_create_info_t* info,
                               bpp_stream_t* out) {
  if (!d || !out) return bp_kit_error(BP_INVALID_ARGUMENT, "cuda: stream_create: NULL");
  int32_t priority = 0;
  if (info) {
    if (info->struct_size < BP_STREAM_CREATE_INFO_V1_SIZE)
      return bp_kit_error(BP_INVALID_ARGUMENT, "cuda: stream_create: struct_size %u",
                          info->struct_size);
    if (info->queue != BP_QUEUE_COMPUTE && info->queue != BP_QUEUE_COPY)
      return bp_kit_error(BP_INVALID_ARGUMENT, "cuda: stream_create: unknown queue kind %u",
                          info->queue);
    if (info->flags)
      return bp_kit_error(BP_INVALID_ARGUMENT, "cuda: stream_create: unknown flags 0x%x",
                          info->flags);
    priority = info->priority;
  }
  bp_status_t st = cuda_device_check_alive(d);
  if (st != BP_OK) return st;
  bpp_stream_t s = calloc(1, sizeof *s);
  if (!s) return bp_kit_error(BP_RESOURCE_EXHAUSTED, "cuda: out of host memory");
  s->dev = d;
  if ((st = cuda_ctx_push(d)) != BP_OK) {
    free(s);
    return st;
  }
  CUresult r = d->cu->cuStreamCreateWithPriority(&s->s, CU_STREAM_NON_BLOCKING,
                                                 cuda_priority(d, priority));
  cuda_ctx_pop(d);
  if (r != CUDA_SUCCESS) {
    free(s);
    return cuda_fail(d, r, "cuStreamCreateWithPriority");
  }
  pthread_mutex_init(&s->mu, NULL);
  pthread_cond_init(&s->cv, NULL);
  pthread_cond_init(&s->done_cv, NULL);
  *out = s;
  return BP_OK;
}

void cuda_stream_destroy(bpp_stream_t s) {
  if (!s) return;
  bpp_device_t d = s->dev;
  if (cuda_ctx_push(d) == BP_OK) {
    /* Pending work (host functions included) finishes first. */
#if BP_CUDA_NCCL
    if (s->nccl.n) cuda_nccl_stream_sync(s); /* a hung collective is aborted */
#endif
    d->cu->cuStreamSynchronize(s->s);
    cuda_blas_stream_release(s);
    cuda_kernels_stream_release(s);
    d->cu->cuStreamDestroy_v2(s->s);
    cuda_ctx_pop(d);
  }
  cuda_hostfn_stop(s);
  pthread_mutex_destroy(&s->mu);
  pthread_cond_destroy(&s->cv);
  pthread_cond_destroy(&s->done_cv);
  free(s);
}

bp_status_t cuda_stream_synchronize(bpp_stream_t s) {
  if (!s) return bp_kit_error(BP_INVALID_ARGUMENT, "cuda: stream_synchronize: NULL");
  bp_status_t st = cuda_device_check_alive(s->dev);
  if (st != BP_OK || (st = cuda_ctx_push(s->dev)) != BP_OK) return st;
#if BP_CUDA_NCCL
  if (s->nccl.n) { /* NCCL work: poll, so errors and hangs come back */
    st = cuda_nccl_stream_sync(s);
    cuda_ctx_pop(s->dev);
    bp_status_t h = cuda_stream_take_error(s);
    return st != BP_OK ? st : h;
  }
#endif
  CUresult r = s->dev->cu->cuStreamSynchronize(s->s);
  cuda_ctx_pop(s->dev);
  if (r != CUDA_SUCCESS) return cuda_fail(s->dev, r, "cuStreamSynchronize");
  return cuda_stream_take_error(s);
}

bp_status_t cuda_stream_query(bpp_stream_t s) {
  if (!s) return bp_kit_error(BP_INVALID_ARGUMENT, "cuda: stream_query: NULL");
  bp_status_t st = cuda_device_check_alive(s->dev);
  if (st != BP_OK || (st = cuda_ctx_push(s->dev)) != BP_OK) return st;
  CUresult r = s->dev->cu->cuStreamQuery(s->s);
  cuda_ctx_pop(s->dev);
  if (r == CUDA_ERROR_NOT_READY) return BP_NOT_READY;
  if (r != CUDA_SUCCESS) return cuda_fail(s->dev, r, "cuStreamQuery");
#if BP_CUDA_NCCL
  if (s->nccl.n && (st = cuda_nccl_stream_check(s)) != BP_OK) return st;
#endif
  return cuda_stream_take_error(s);
}

/* ---- events ---------------------------------------------------------------- */
bp_status_t cuda_event_create(bpp_device_t d, const bp_event_create_info_t* info,
                              bpp_event_t* out) {
  if (!d || !out) return bp_kit_error(BP_INVALID_ARGUMENT, "cuda: event_create: NULL");
  uint32_t flags = 0;
  if (info) {
    if (info->struct_size < BP_EVENT_CREATE_INFO_V1_SIZE)
      return bp_kit_error(BP_INVALID_ARGUMENT, "cuda: event_create: struct_size %u",
                          info->struct_size);
    flags = info->flags;
  }
  if (flags & ~(uint32_t)(BP_EVENT_TIMING | BP_EVENT_EXPORTABLE))
    return bp_kit_error(BP_INVALID_ARGUMENT, "cuda: event_create: unknown flags 0x%x", flags);
  if (flags & BP_EVENT_EXPORTABLE)
    return bp_kit_error(BP_UNIMPLEMENTED,
                        "cuda: exportable events are not implemented (a CUDA IPC event "
                        "handle is not a file descriptor)");
  bp_status_t st = cuda_device_check_alive(d);
  if (st != BP_OK) return st;
  bpp_event_t e = calloc(1, sizeof *e);
  if (!e) return bp_kit_error(BP_RESOURCE_EXHAUSTED, "cuda: out of host memory");
  e->dev = d;
  e->flags = flags;
  if ((st = cuda_ctx_push(d)) != BP_OK) {
    free(e);
    return st;
  }
  st = cuda_event_get(d, flags & BP_EVENT_TIMING, &e->e); /* recycled or created */
  cuda_ctx_pop(d);
  if (st != BP_OK) {
    free(e);
    return st;
  }
  *out = e;
  return BP_OK;
}

void cuda_event_destroy(bpp_event_t e) {
  if (!e) return;
  if (cuda_ctx_push(e->dev) == BP_OK) {
    cuda_event_put(e->dev, e->flags & BP_EVENT_TIMING, e->e); /* kept when complete */
    cuda_ctx_pop(e->dev);
  }
  free(e);
}

/* One driver call on `d`'s context, with the usual checks. */
#define CUDA_CALL_ON(d, call, what)                                   \
  do {                                                                \
    bp_status_t st_ = cuda_device_check_alive(d);                     \
    if (st_ != BP_OK || (st_ = cuda_ctx_push(d)) != BP_OK) return st_; \
    CUresult r_ = (call);                                             \
    cuda_ctx_pop(d);                                                  \
    if (r_ == CUDA_ERROR_NOT_READY) return BP_NOT_READY;              \
    return r_ == CUDA_SUCCESS ? BP_OK : cuda_fail((d), r_, (what));   \
  } while (0)

bp_status_t cuda_event_record(bpp_event_t e, bpp_stream_t s) {
  if (!e || !s) return bp_kit_error(BP_INVALID_ARGUMENT, "cuda: event_record: NULL");
  CUDA_CALL_ON(s->dev, s->dev->cu->cuEventRecord(e->e, s->s), "cuEventRecord");
}

bp_status_t cuda_stream_wait_event(bpp_stream_t s, bpp_event_t e) {
  if (!e || !s) return bp_kit_error(BP_INVALID_ARGUMENT, "cuda: stream_wait_event: NULL");
  CUDA_CALL_ON(s->dev, s->dev->cu->cuStreamWaitEvent(s->s, e->e, CU_EVENT_WAIT_DEFAULT),
               "cuStreamWaitEvent");
}

bp_status_t cuda_event_query(bpp_event_t e) {
  if (!e) return bp_kit_error(BP_INVALID_ARGUMENT, "cuda: event_query: NULL");
  CUDA_CALL_ON(e->dev, e->dev->cu->cuEventQuery(e->e), "cuEventQuery");
}

bp_status_t cuda_event_synchronize(bpp_event_t e) {
  if (!e) return bp_kit_error(BP_INVALID_ARGUMENT, "cuda: event_synchronize: NULL");
  CUDA_CALL_ON(e->dev, e->dev->cu->cuEventSynchronize(e->e), "cuEventSynchronize");
}

bp_status_t cuda_event_elapsed_ns(bpp_event_t a, bpp_event_t b, uint64_t* out_ns) {
  if (!a || !b || !out_ns) return bp_kit_error(BP_INVALID_ARGUMENT, "cuda: event_elapsed: NULL");
  if (!(a->flags & BP_EVENT_TIMING) || !(b->flags & BP_EVENT_TIMING))
    return bp_kit_error(BP_FAILED_PRECONDITION,
                        "cuda: event_elapsed_ns: both events need BP_EVENT_TIMING");
  bpp_device_t d = a->dev;
  bp_status_t st = cuda_device_check_alive(d);
  if (st != BP_OK || (st = cuda_ctx_push(d)) != BP_OK) return st;
  float ms = 0.0f;
  CUresult r = d->cu->cuEventElapsedTime_v2 ? d->cu->cuEventElapsedTime_v2(&ms, a->e, b->e)
                                            : d->cu->cuEventElapsedTime_v1(&ms, a->e, b->e);
  cuda_ctx_pop(d);
  if (r == CUDA_ERROR_NOT_READY)
    return bp_kit_error(BP_FAILED_PRECONDITION, "cuda: event_elapsed_ns: an event is pending");
  if (r != CUDA_SUCCESS) return cuda_fail(d, r, "cuEventElapsedTime");
  *out_ns = ms <= 0.0f ? 0 : (uint64_t)((double)ms * 1e6 + 0.5);
  return BP_OK;
}
