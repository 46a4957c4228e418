/* Host functions on CUDA streams, with cuLaunchHostFunc's restriction
 * kept: the driver's callback makes no CUDA call. It only hands the job to
 * the stream's plugin thread, which runs the function; the function may
 * then call anything (the core's cross-plugin bridge waits on another
 * plugin's event, host-staged collectives copy), because it is not on the
 * driver's callback thread.
 *
 * Ordering ("later work on the stream waits until fn returns"):
 *  - wait-value mode (cuStreamWaitValue32 present): after the callback the
 *    stream waits, on the device, until a pinned, mapped flag reaches the
 *    job's sequence number; the plugin thread writes it once fn returned.
 *    The driver's callback returns at once, so a function that blocks
 *    (a bridge waiting on another stream's host function) never holds the
 *    driver's callback thread, which serves every stream.
 *  - blocking mode (BP_CUDA_HOSTFN_WAIT_VALUE=0, or no memory operations):
 *    the callback waits until the plugin thread ran fn.
 * The flag compares cyclically (CU_STREAM_WAIT_VALUE_GEQ), so sequence
 * numbers may wrap.
 */
#include <stdio.h>
#include <stdlib.h>

#include "cuda_internal.h"

static void* hostfn_thread(void* arg) {
  bpp_stream_t s = arg;
  bp_plugin_set_worker_thread(1);
  pthread_mutex_lock(&s->mu);
  for (;;) {
    while (!s->head && !s->stop) pthread_cond_wait(&s->cv, &s->mu);
    if (!s->head) break; /* stop and drained */
    cuda_hostfn_job_t* job = s->head;
    s->head = job->next;
    if (!s->head) s->tail = NULL;
    pthread_mutex_unlock(&s->mu);
    bp_status_t st = job->fn(job->user);
    pthread_mutex_lock(&s->mu);
    if (st != BP_OK && s->error == BP_OK) {
      s->error = st;
      snprintf(s->error_msg, sizeof s->error_msg, "cuda: a host function failed (status %d)%s%s",
               (int)st, bp_plugin_last_error()[0] ? ": " : "", bp_plugin_last_error());
    }
    if (s->flag) {
      __atomic_store_n(s->flag, job->seq, __ATOMIC_RELEASE); /* releases the stream */
      free(job);
    } else {
      job->done = 1;
      pthread_cond_broadcast(&s->done_cv);
    }
  }
  pthread_mutex_unlock(&s->mu);
  return NULL;
}

/* Runs on the driver's callback thread: no CUDA call here. */
static void CUDA_CB hostfn_callback(void* arg) {
  cuda_hostfn_job_t* job = arg;
  bpp_stream_t s = job->stream;
  pthread_mutex_lock(&s->mu);
  if (s->tail) s->tail->next = job;
  else s->head = job;
  s->tail = job;
  pthread_cond_signal(&s->cv);
  if (!s->flag) {
    while (!job->done) pthread_cond_wait(&s->done_cv, &s->mu);
    free(job);
  }
  pthread_mutex_unlock(&s->mu);
}

/* Starts the plugin thread, and in wait-value mode allocates the flag.
 * Context pushed; called with the stream externally synchronized. */
static bp_status_t hostfn_start(bpp_stream_t s) {
  bpp_device_t d = s->dev;
  if (d->inst->hostfn_wait_value) {
    void* flag = NULL;
    CUresult r = d->cu->cuMemHostAlloc(&flag, sizeof(uint32_t),
                                       CU_MEMHOSTALLOC_PORTABLE | CU_MEMHOSTALLOC_DEVICEMAP);
    if (r == CUDA_SUCCESS) {
      r = d->cu->cuMemHostGetDevicePointer_v2(&s->flag_dev, flag, 0);
      if (r != CUDA_SUCCESS) d->cu->cuMemFreeHost(flag);
    }
    if (r != CUDA_SUCCESS) return cuda_fail(d, r, "host function flag");
    *(uint32_t*)flag = 0;
    s->flag = flag;
  }
  if (pthread_create(&s->thread, NULL, hostfn_thread, s) != 0) {
    if (s->flag) d->cu->cuMemFreeHost(s->flag);
    s->flag = NULL;
    return bp_kit_error(BP_RESOURCE_EXHAUSTED, "cuda: cannot start a host-function thread");
  }
  s->thread_started = 1;
  return BP_OK;
}

bp_status_t cuda_hostfn_enqueue(bpp_stream_t s, bp_host_func_t fn, void* user) {
  if (!s || !fn) return bp_kit_error(BP_INVALID_ARGUMENT, "cuda: enqueue_host_func: NULL");
  bpp_device_t d = s->dev;
  bp_status_t st = cuda_device_check_alive(d);
  if (st != BP_OK || (st = cuda_ctx_push(d)) != BP_OK) return st;
  if (!s->thread_started && (st = hostfn_start(s)) != BP_OK) {
    cuda_ctx_pop(d);
    return st;
  }
  cuda_hostfn_job_t* job = calloc(1, sizeof *job);
  if (!job) {
    cuda_ctx_pop(d);
    return bp_kit_error(BP_RESOURCE_EXHAUSTED, "cuda: out of host memory");
  }
  job->stream = s;
  job->fn = fn;
  job->user = user;
  job->seq = ++s->next_seq;
  uint32_t seq = job->seq;
  CUresult r = d->cu->cuLaunchHostFunc(s->s, hostfn_callback, job);
  if (r != CUDA_SUCCESS) {
    free(job);
    cuda_ctx_pop(d);
    return cuda_fail(d, r, "cuLaunchHostFunc");
  }
  /* `job` belongs to the callback now. */
  if (s->flag) {
    r = d->cu->cuStreamWaitValue32_v2(s->s, s->flag_dev, seq, CU_STREAM_WAIT_VALUE_GEQ);
    if (r != CUDA_SUCCESS) {
      /* The function still runs; only later work may start before it
       * returned. Make that the stream's error rather than hide it. */
      cuda_ctx_pop(d);
      return cuda_fail(d, r, "cuStreamWaitValue32");
    }
  }
  cuda_ctx_pop(d);
  return BP_OK;
}

void cuda_hostfn_stop(bpp_stream_t s) {
  if (!s->thread_started) return;
  pthread_mutex_lock(&s->mu);
  s->stop = 1;
  pthread_cond_signal(&s->cv);
  pthread_mutex_unlock(&s->mu);
  pthread_join(s->thread, NULL);
  s->thread_started = 0;
  if (s->flag && cuda_ctx_push(s->dev) == BP_OK) {
    s->dev->cu->cuMemFreeHost(s->flag);
    cuda_ctx_pop(s->dev);
  }
  s->flag = NULL;
}

bp_status_t cuda_stream_take_error(bpp_stream_t s) {
  pthread_mutex_lock(&s->mu);
  bp_status_t st = s->error;
  char msg[BP_PLUGIN_MSG_CAP];
  snprintf(msg, sizeof msg, "%s", s->error_msg);
  s->error = BP_OK;
  pthread_mutex_unlock(&s->mu);
  return st == BP_OK ? BP_OK : bp_kit_error(st, "%s", msg);
}
