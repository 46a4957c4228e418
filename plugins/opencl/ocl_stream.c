/* backplane OpenCL plugin: streams, events and host functions.
 *
 * A stream is an in-order command queue with profiling enabled. Events are
 * markers (clEnqueueMarkerWithWaitList): recording replaces the event's
 * marker; waiting enqueues a barrier on it; elapsed time is the difference
 * of the markers' CL_PROFILING_COMMAND_END. A host function is a marker
 * followed by a barrier on a user event: the stream's helper thread waits
 * for the marker, calls the function, then completes the user event, so
 * later work starts only after the function returned. Functions run on
 * that thread, never on a driver callback thread (they may block). A
 * failed function or enqueue poisons the stream: its status and message
 * are the sticky error the next synchronize or query returns.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ocl_internal.h"

void ocl_stream_track(bpp_stream_t s, cl_event ev) {
  if (!ev) return;
  pthread_mutex_lock(&s->mu);
  cl_event old = s->last;
  s->last = ev;
  pthread_mutex_unlock(&s->mu);
  if (old) s->dev->cl->clReleaseEvent(old);
}

void ocl_stream_poison(bpp_stream_t s, bp_status_t st) {
  pthread_mutex_lock(&s->mu);
  if (s->err == BP_OK) {
    s->err = st;
    snprintf(s->err_msg, sizeof s->err_msg, "%s", bp_plugin_last_error());
  }
  pthread_mutex_unlock(&s->mu);
}

static void* host_thread(void* arg) {
  struct bpp_stream_s* s = arg;
  const ocl_symbols_t* cl = s->dev->cl;
  bp_plugin_set_worker_thread(1);
  pthread_mutex_lock(&s->mu);
  for (;;) {
    while (!s->head && !s->stop) pthread_cond_wait(&s->cv, &s->mu);
    ocl_host_job_t* j = s->head;
    if (!j) break; /* stop requested and drained */
    pthread_mutex_unlock(&s->mu);
    cl_int err = cl->clWaitForEvents(1, &j->marker);
    bp_status_t st;
    if (err != CL_SUCCESS) {
      st = ocl_fail("clWaitForEvents (before a host function)", err);
    } else {
      bp_plugin_clear_error();
      st = j->fn(j->user);
      if (st != BP_OK && !bp_plugin_last_error()[0])
        BP_KIT_ERROR(st, "host function failed with status %d", (int)st);
    }
    if (st != BP_OK) ocl_stream_poison(s, st);
    cl->clSetUserEventStatus(j->release, CL_COMPLETE);
    cl->clReleaseEvent(j->marker);
    cl->clReleaseEvent(j->release);
    pthread_mutex_lock(&s->mu);
    s->head = j->next;
    if (!s->head) s->tail = NULL;
    free(j);
    pthread_cond_broadcast(&s->cv);
  }
  pthread_mutex_unlock(&s->mu);
  return NULL;
}

bp_status_t ocl_stream_create(bpp_device_t d, const bp_stream_create_info_t* info, bpp_stream_t* out) {
  if (!d || !out) return BP_KIT_ERROR(BP_INVALID_ARGUMENT, "stream_create: NULL argument");
  *out = NULL;
  if (info && info->struct_size >= BP_STREAM_CREATE_INFO_V1_SIZE) {
    if (info->queue > BP_QUEUE_COPY)
      return BP_KIT_ERROR(BP_INVALID_ARGUMENT, "stream_create: unknown queue kind %u", info->queue);
    if (info->flags) return BP_KIT_ERROR(BP_INVALID_ARGUMENT, "stream_create: unknown flags 0x%x", info->flags);
  }
  bp_status_t st = ocl_runtime_ready(d);
  if (st) return st;
  struct bpp_stream_s* s = calloc(1, sizeof *s);
  if (!s) return BP_KIT_ERROR(BP_RESOURCE_EXHAUSTED, "stream_create: out of host memory");
  cl_int err = CL_SUCCESS;
  s->q = d->cl->clCreateCommandQueue(d->ctx, d->id, CL_QUEUE_PROFILING_ENABLE, &err);
  if (!s->q || err != CL_SUCCESS) {
    free(s);
    return ocl_fail("clCreateCommandQueue", err);
  }
  s->dev = d;
  pthread_mutex_init(&s->mu, NULL);
  pthread_cond_init(&s->cv, NULL);
  *out = s;
  return BP_OK;
}

void ocl_stream_destroy(bpp_stream_t s) {
  if (!s) return;
  s->dev->cl->clFinish(s->q);
  pthread_mutex_lock(&s->mu);
  s->stop = 1;
  pthread_cond_broadcast(&s->cv);
  pthread_mutex_unlock(&s->mu);
  if (s->thread_started) pthread_join(s->thread, NULL);
  if (s->last) s->dev->cl->clReleaseEvent(s->last);
  s->dev->cl->clReleaseCommandQueue(s->q);
  pthread_cond_destroy(&s->cv);
  pthread_mutex_destroy(&s->mu);
  free(s);
}

/* Takes and clears the sticky error, reporting its message. */
static bp_status_t take_error(bpp_stream_t s) {
  pthread_mutex_lock(&s->mu);
  bp_status_t st = s->err;
  char msg[BP_PLUGIN_MSG_CAP];
  memcpy(msg, s->err_msg, sizeof msg);
  s->err = BP_OK;
  s->err_msg[0] = 0;
  pthread_mutex_unlock(&s->mu);
  if (st == BP_OK) return BP_OK;
  return bp_kit_error(st, "%s", msg[0] ? msg : "stream work failed");
}

bp_status_t ocl_stream_synchronize(bpp_stream_t s) {
  if (!s) return BP_KIT_ERROR(BP_INVALID_ARGUMENT, "stream_synchronize: NULL stream");
  cl_int err = s->dev->cl->clFinish(s->q);
  if (err != CL_SUCCESS) ocl_stream_poison(s, ocl_fail("clFinish", err));
  return take_error(s);
}

bp_status_t ocl_stream_query(bpp_stream_t s) {
  if (!s) return BP_KIT_ERROR(BP_INVALID_ARGUMENT, "stream_query: NULL stream");
  const ocl_symbols_t* cl = s->dev->cl;
  pthread_mutex_lock(&s->mu);
  cl_event last = s->last;
  if (last) cl->clRetainEvent(last);
  pthread_mutex_unlock(&s->mu);
  cl_int status = CL_COMPLETE;
  if (last) {
    cl->clFlush(s->q);
    cl_int err = cl->clGetEventInfo(last, CL_EVENT_COMMAND_EXECUTION_STATUS, sizeof status, &status, NULL);
    cl->clReleaseEvent(last);
    if (err != CL_SUCCESS) return ocl_fail("clGetEventInfo", err);
  }
  if (status < 0)
    ocl_stream_poison(s, BP_KIT_ERROR(BP_INTERNAL, "stream work failed: %s (%d)", ocl_error_name(status), (int)status));
  if (status != CL_COMPLETE && status >= 0) {
    pthread_mutex_lock(&s->mu);
    bp_status_t pending = s->err;
    pthread_mutex_unlock(&s->mu);
    if (pending == BP_OK) return BP_NOT_READY;
  }
  return take_error(s);
}

bp_status_t ocl_stream_enqueue_host_func(bpp_stream_t s, bp_host_func_t fn, void* user) {
  if (!s || !fn) return BP_KIT_ERROR(BP_INVALID_ARGUMENT, "stream_enqueue_host_func: NULL argument");
  const ocl_symbols_t* cl = s->dev->cl;
  ocl_host_job_t* j = calloc(1, sizeof *j);
  if (!j) return BP_KIT_ERROR(BP_RESOURCE_EXHAUSTED, "stream_enqueue_host_func: out of host memory");
  j->fn = fn;
  j->user = user;
  cl_int err = CL_SUCCESS;
  j->release = cl->clCreateUserEvent(s->dev->ctx, &err);
  if (!j->release) {
    free(j);
    return ocl_fail("clCreateUserEvent", err);
  }
  err = cl->clEnqueueMarkerWithWaitList(s->q, 0, NULL, &j->marker);
  cl_event barrier = NULL;
  if (err == CL_SUCCESS) err = cl->clEnqueueBarrierWithWaitList(s->q, 1, &j->release, &barrier);
  ocl_stream_track(s, barrier);
  if (err != CL_SUCCESS) {
    cl->clSetUserEventStatus(j->release, CL_COMPLETE);
    if (j->marker) cl->clReleaseEvent(j->marker);
    cl->clReleaseEvent(j->release);
    free(j);
    return ocl_fail("clEnqueueBarrierWithWaitList", err);
  }
  cl->clFlush(s->q);
  pthread_mutex_lock(&s->mu);
  if (!s->thread_started) {
    if (pthread_create(&s->thread, NULL, host_thread, s) != 0) {
      pthread_mutex_unlock(&s->mu);
      cl->clSetUserEventStatus(j->release, CL_COMPLETE);
      cl->clReleaseEvent(j->marker);
      cl->clReleaseEvent(j->release);
      free(j);
      return BP_KIT_ERROR(BP_RESOURCE_EXHAUSTED, "stream_enqueue_host_func: cannot start the helper thread");
    }
    s->thread_started = 1;
  }
  if (s->tail) s->tail->next = j;
  else s->head = j;
  s->tail = j;
  pthread_cond_broadcast(&s->cv);
  pthread_mutex_unlock(&s->mu);
  return BP_OK;
}

/* ---- events ---------------------------------------------------------- */
bp_status_t ocl_event_create(bpp_device_t d, const bp_event_create_info_t* info, bpp_event_t* out) {
  if (!d || !out) return BP_KIT_ERROR(BP_INVALID_ARGUMENT, "event_create: NULL argument");
  *out = NULL;
  uint32_t flags = info && info->struct_size >= BP_EVENT_CREATE_INFO_V1_SIZE ? info->flags : 0;
  if (flags & BP_EVENT_EXPORTABLE)
    return BP_KIT_ERROR(BP_UNIMPLEMENTED, "event_create: exportable events are not implemented");
  if (flags & ~(uint32_t)BP_EVENT_TIMING)
    return BP_KIT_ERROR(BP_INVALID_ARGUMENT, "event_create: unknown flags 0x%x", flags);
  struct bpp_event_s* e = calloc(1, sizeof *e);
  if (!e) return BP_KIT_ERROR(BP_RESOURCE_EXHAUSTED, "event_create: out of host memory");
  e->dev = d;
  e->flags = flags;
  pthread_mutex_init(&e->mu, NULL);
  *out = e;
  return BP_OK;
}

void ocl_event_destroy(bpp_event_t e) {
  if (!e) return;
  if (e->ev) e->dev->cl->clReleaseEvent(e->ev);
  pthread_mutex_destroy(&e->mu);
  free(e);
}

/* The event's current marker, retained (NULL: never recorded). */
static cl_event marker_of(bpp_event_t e) {
  pthread_mutex_lock(&e->mu);
  cl_event m = e->ev;
  if (m) e->dev->cl->clRetainEvent(m);
  pthread_mutex_unlock(&e->mu);
  return m;
}

bp_status_t ocl_event_record(bpp_event_t e, bpp_stream_t s) {
  if (!e || !s) return BP_KIT_ERROR(BP_INVALID_ARGUMENT, "event_record: NULL argument");
  if (s->dev->ctx != e->dev->ctx)
    return BP_KIT_ERROR(BP_INVALID_ARGUMENT, "event_record: the event belongs to a device of another platform");
  const ocl_symbols_t* cl = s->dev->cl;
  cl_event m = NULL;
  cl_int err = cl->clEnqueueMarkerWithWaitList(s->q, 0, NULL, &m);
  if (err != CL_SUCCESS) return ocl_fail("clEnqueueMarkerWithWaitList", err);
  cl->clFlush(s->q);
  cl->clRetainEvent(m);
  ocl_stream_track(s, m);
  pthread_mutex_lock(&e->mu);
  cl_event old = e->ev;
  e->ev = m;
  pthread_mutex_unlock(&e->mu);
  if (old) cl->clReleaseEvent(old);
  return BP_OK;
}

bp_status_t ocl_stream_wait_event(bpp_stream_t s, bpp_event_t e) {
  if (!e || !s) return BP_KIT_ERROR(BP_INVALID_ARGUMENT, "stream_wait_event: NULL argument");
  cl_event m = marker_of(e);
  if (!m) return BP_OK; /* never recorded: nothing to wait for */
  const ocl_symbols_t* cl = s->dev->cl;
  cl_int err;
  if (s->dev->ctx == e->dev->ctx) {
    cl_event barrier = NULL;
    err = cl->clEnqueueBarrierWithWaitList(s->q, 1, &m, &barrier);
    ocl_stream_track(s, barrier);
  } else {
    /* Another platform's event cannot be waited on by this queue: wait on
     * the host (the marker was flushed when recorded). */
    err = cl->clWaitForEvents(1, &m);
  }
  cl->clReleaseEvent(m);
  return err == CL_SUCCESS ? BP_OK : ocl_fail("stream_wait_event", err);
}

bp_status_t ocl_event_query(bpp_event_t e) {
  if (!e) return BP_KIT_ERROR(BP_INVALID_ARGUMENT, "event_query: NULL event");
  cl_event m = marker_of(e);
  if (!m) return BP_OK;
  cl_int status = CL_QUEUED;
  cl_int err = e->dev->cl->clGetEventInfo(m, CL_EVENT_COMMAND_EXECUTION_STATUS, sizeof status, &status, NULL);
  e->dev->cl->clReleaseEvent(m);
  if (err != CL_SUCCESS) return ocl_fail("clGetEventInfo", err);
  if (status < 0) return BP_KIT_ERROR(BP_INTERNAL, "the work before the event failed: %s (%d)",
                                      ocl_error_name(status), (int)status);
  return status == CL_COMPLETE ? BP_OK : BP_NOT_READY;
}

bp_status_t ocl_event_synchronize(bpp_event_t e) {
  if (!e) return BP_KIT_ERROR(BP_INVALID_ARGUMENT, "event_synchronize: NULL event");
  cl_event m = marker_of(e);
  if (!m) return BP_OK;
  cl_int err = e->dev->cl->clWaitForEvents(1, &m);
  e->dev->cl->clReleaseEvent(m);
  return err == CL_SUCCESS ? BP_OK : ocl_fail("clWaitForEvents", err);
}

bp_status_t ocl_event_elapsed_ns(bpp_event_t start, bpp_event_t end, uint64_t* out_ns) {
  if (!start || !end || !out_ns) return BP_KIT_ERROR(BP_INVALID_ARGUMENT, "event_elapsed_ns: NULL argument");
  if (!(start->flags & BP_EVENT_TIMING) || !(end->flags & BP_EVENT_TIMING))
    return BP_KIT_ERROR(BP_FAILED_PRECONDITION, "event_elapsed_ns: both events need BP_EVENT_TIMING");
  cl_event a = marker_of(start), b = marker_of(end);
  bp_status_t st = BP_OK;
  cl_ulong ta = 0, tb = 0;
  if (!a || !b) {
    st = BP_KIT_ERROR(BP_FAILED_PRECONDITION, "event_elapsed_ns: an event was never recorded");
  } else {
    cl_int sa = CL_QUEUED, sb = CL_QUEUED;
    start->dev->cl->clGetEventInfo(a, CL_EVENT_COMMAND_EXECUTION_STATUS, sizeof sa, &sa, NULL);
    end->dev->cl->clGetEventInfo(b, CL_EVENT_COMMAND_EXECUTION_STATUS, sizeof sb, &sb, NULL);
    if (sa != CL_COMPLETE || sb != CL_COMPLETE) {
      st = BP_KIT_ERROR(BP_NOT_READY, "event_elapsed_ns: an event has not completed");
    } else {
      cl_int e1 = start->dev->cl->clGetEventProfilingInfo(a, CL_PROFILING_COMMAND_END, sizeof ta, &ta, NULL);
      cl_int e2 = end->dev->cl->clGetEventProfilingInfo(b, CL_PROFILING_COMMAND_END, sizeof tb, &tb, NULL);
      if (e1 != CL_SUCCESS || e2 != CL_SUCCESS) st = ocl_fail("clGetEventProfilingInfo", e1 != CL_SUCCESS ? e1 : e2);
    }
  }
  if (a) start->dev->cl->clReleaseEvent(a);
  if (b) end->dev->cl->clReleaseEvent(b);
  if (st) return st;
  *out_ns = tb > ta ? (uint64_t)(tb - ta) : 0;
  return BP_OK;
}
