/* Replaying a compiled region's launches as one CUDA graph (see
 * cuda_graph.h).
 *
 * A launch plans the region's kernels for its arguments (host work, no
 * driver call), then:
 *  - the plan equals the last one (same buffers, offsets, strides): one
 *    cuGraphLaunch, nothing else;
 *  - else: the argument blocks go to the replay's device area in one
 *    cuMemcpyHtoDAsync, the kernels are captured on the stream
 *    (cuStreamBeginCapture .. cuStreamEndCapture; no copy, allocation or
 *    module load happens inside the capture), the graph replaces the
 *    instantiated one (cuGraphExecUpdate, or a new cuGraphInstantiate
 *    when the update is refused or absent) and is launched.
 * A fused program's launches (EW_PROGRAM regions) run its generated
 * kernel (cuda_ewgen.c), built before the capture like any module; where
 * NVRTC cannot build it they run the interpreter kernel, and the reason is
 * kept in the replay and logged.
 * Without the graph entry points, or after a capture the driver refused
 * (CUDA_ERROR_STREAM_CAPTURE_*), the same launches are enqueued one by one
 * (eager), with the reason logged once.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuda_event_pool.h"
#include "cuda_graph.h"

/* Bytes between two argument blocks in the device area. */
#define CUDA_ARGS_STRIDE ((CUDA_ARGS_MAX + 255u) & ~255u)

int cuda_graph_available(const cuda_symbols_t* cu) {
  return cu->cuStreamBeginCapture_v2 && cu->cuStreamEndCapture &&
         cu->cuGraphInstantiateWithFlags && cu->cuGraphLaunch && cu->cuGraphExecDestroy &&
         cu->cuGraphDestroy;
}

bp_status_t cuda_replay_init(bpp_device_t d, cuda_replay_t* r) {
  memset(r, 0, sizeof *r);
  pthread_mutex_init(&r->mu, NULL);
  r->dev = d;
  int off = 0;
  bp_plugin_parse_flag(bp_kit_host(), "BP_CUDA_NO_GRAPHS", getenv("BP_CUDA_NO_GRAPHS"), 0, &off);
  if (off) {
    r->eager = 1;
    snprintf(r->eager_reason, sizeof r->eager_reason, "BP_CUDA_NO_GRAPHS=1");
  } else if (!cuda_graph_available(d->cu)) {
    r->eager = 1;
    snprintf(r->eager_reason, sizeof r->eager_reason,
             "the driver lacks the graph entry points (cuStreamBeginCapture_v2, "
             "cuStreamEndCapture, cuGraphInstantiateWithFlags, cuGraphLaunch, ...)");
  }
  if (r->eager) bp_kit_log(BP_LOG_INFO, "cuda: compiled regions replay eagerly: %s", r->eager_reason);
  bp_status_t st = cuda_ctx_push(d);
  if (st != BP_OK) return st;
  st = cuda_event_get(d, 0, &r->done);
  cuda_ctx_pop(d);
  if (st != BP_OK) {
    r->done = NULL;
    pthread_mutex_destroy(&r->mu);
  }
  return st;
}

void cuda_replay_fini(cuda_replay_t* r) {
  bpp_device_t d = r->dev;
  if (!d) return;
  if (cuda_ctx_push(d) == BP_OK) {
    /* Pending launches read the area and run the graph: wait for them. */
    if (r->pending) d->cu->cuEventSynchronize(r->done);
    if (r->exec) d->cu->cuGraphExecDestroy(r->exec);
    if (r->area) d->cu->cuMemFree_v2(r->area);
    cuda_event_put(d, 0, r->done); /* complete when synchronized: kept for the next */
    cuda_ctx_pop(d);
  }
  cuda_plan_clear(&r->last);
  pthread_mutex_destroy(&r->mu);
  memset(r, 0, sizeof *r);
}

static int plans_equal(const cuda_plan_t* a, const cuda_plan_t* b) {
  return a->n == b->n && (a->n == 0 || memcmp(a->recs, b->recs, sizeof *a->recs * a->n) == 0);
}

/* The plan's argument blocks in the area (grown as needed), in stream
 * order on `s`. Context pushed, r->mu held. */
static bp_status_t upload_args(bpp_stream_t s, cuda_replay_t* r, const cuda_plan_t* plan) {
  bpp_device_t d = r->dev;
  const cuda_symbols_t* cu = d->cu;
  size_t need = (size_t)plan->n * CUDA_ARGS_STRIDE;
  if (need > r->area_size) {
    if (r->area) {
      if (r->pending) {
        CUresult w = cu->cuEventSynchronize(r->done);
        if (w != CUDA_SUCCESS) return cuda_fail(d, w, "cuEventSynchronize (region)");
      }
      cu->cuMemFree_v2(r->area);
      r->area = 0;
      r->area_size = 0;
    }
    CUresult a = cu->cuMemAlloc_v2(&r->area, need);
    if (a != CUDA_SUCCESS) {
      r->area = 0;
      return cuda_fail(d, a, "region argument blocks");
    }
    r->area_size = need;
  } else if (r->pending && r->last_stream != s) {
    /* The last launch, on another stream, may still read the blocks. */
    CUresult w = cu->cuStreamWaitEvent(s->s, r->done, 0);
    if (w != CUDA_SUCCESS) return cuda_fail(d, w, "cuStreamWaitEvent (region)");
  }
  unsigned char* host = malloc(need ? need : 1);
  if (!host) return bp_kit_error(BP_RESOURCE_EXHAUSTED, "cuda: out of host memory");
  memset(host, 0, need);
  for (uint32_t i = 0; i < plan->n; ++i)
    memcpy(host + (size_t)i * CUDA_ARGS_STRIDE, plan->recs[i].args, plan->recs[i].args_size);
  CUresult c = need ? cu->cuMemcpyHtoDAsync_v2(r->area, host, need, s->s) : CUDA_SUCCESS;
  free(host); /* the driver stages pageable memory before returning */
  return c == CUDA_SUCCESS ? BP_OK : cuda_fail(d, c, "region arguments");
}

static bp_status_t enqueue_all(bpp_stream_t s, const cuda_replay_t* r, const cuda_plan_t* plan) {
  for (uint32_t i = 0; i < plan->n; ++i) {
    bp_status_t st = cuda_kernels_enqueue(s, plan, i, r->area + (CUdeviceptr)i * CUDA_ARGS_STRIDE);
    if (st != BP_OK) return st;
  }
  return BP_OK;
}

static int is_capture_error(CUresult e) {
  return (e >= CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED && e <= CUDA_ERROR_STREAM_CAPTURE_WRONG_THREAD);
}

/* Captures the plan into a graph and makes r->exec run it. BP_OK, or
 * *out_fallback = 1 when the driver refused the capture itself (the
 * caller replays eagerly), or the error. Context pushed, r->mu held. */
static bp_status_t capture(bpp_stream_t s, cuda_replay_t* r, const cuda_plan_t* plan,
                           int* out_fallback) {
  bpp_device_t d = r->dev;
  const cuda_symbols_t* cu = d->cu;
  *out_fallback = 0;
  CUresult e = cu->cuStreamBeginCapture_v2(s->s, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL);
  const char* what = "cuStreamBeginCapture";
  bp_status_t st = BP_OK;
  CUgraph g = NULL;
  if (e == CUDA_SUCCESS) {
    st = enqueue_all(s, r, plan);
    /* The capture always ends, whatever the launches said. */
    e = cu->cuStreamEndCapture(s->s, &g);
    what = "cuStreamEndCapture";
  }
  if (e == CUDA_SUCCESS && st != BP_OK) {
    cu->cuGraphDestroy(g);
    return st;
  }
  if (e != CUDA_SUCCESS) {
    if (g) cu->cuGraphDestroy(g);
    if (is_capture_error(e) && !cuda_error_is_sticky(e)) {
      char text[200];
      cuda_error_text(cu, e, text, sizeof text);
      snprintf(r->eager_reason, sizeof r->eager_reason, "%s: %s", what, text);
      *out_fallback = 1;
      return BP_OK;
    }
    return cuda_fail(d, e, what);
  }
  if (r->exec && cu->cuGraphExecUpdate_v2) {
    CUgraphExecUpdateResultInfo info;
    memset(&info, 0, sizeof info);
    if (cu->cuGraphExecUpdate_v2(r->exec, g, &info) == CUDA_SUCCESS) {
      r->updates++;
      cu->cuGraphDestroy(g);
      return BP_OK;
    }
    /* Refused (another topology): instantiate the new graph instead. */
  }
  CUgraphExec x = NULL;
  e = cu->cuGraphInstantiateWithFlags(&x, g, 0);
  cu->cuGraphDestroy(g);
  if (e != CUDA_SUCCESS) return cuda_fail(d, e, "cuGraphInstantiate");
  if (r->exec) cu->cuGraphExecDestroy(r->exec);
  r->exec = x;
  r->instantiations++;
  return BP_OK;
}

bp_status_t cuda_replay_launch(bpp_stream_t s, cuda_replay_t* r, cuda_plan_t* plan) {
  bpp_device_t d = r->dev;
  const cuda_symbols_t* cu = d->cu;
  bp_status_t st = cuda_device_check_alive(d);
  if (st != BP_OK) return st;
  pthread_mutex_lock(&r->mu);
  if ((st = cuda_ctx_push(d)) != BP_OK) {
    pthread_mutex_unlock(&r->mu);
    return st;
  }
  int same = r->valid && plans_equal(plan, &r->last);
  if (!same) {
    r->valid = 0;
    char why[256];
    st = cuda_kernels_load(d, plan, why, sizeof why); /* never inside a capture */
    if (st == BP_OK && why[0] && strcmp(why, r->interpreter_reason) != 0)
      bp_kit_log(BP_LOG_INFO, "cuda: a compiled elementwise region runs on the interpreter kernel: %s", why);
    if (st == BP_OK) snprintf(r->interpreter_reason, sizeof r->interpreter_reason, "%s", why);
    if (st == BP_OK) st = upload_args(s, r, plan);
  }
  /* The loaded plan: the last one when this one equals it. */
  const cuda_plan_t* run = same ? &r->last : plan;
  int fallback = 0;
  if (st == BP_OK && !r->eager && (!same || !r->exec)) {
    st = capture(s, r, run, &fallback);
    if (st == BP_OK && fallback) {
      r->eager = 1;
      if (r->exec) cu->cuGraphExecDestroy(r->exec);
      r->exec = NULL;
      bp_kit_log(BP_LOG_WARN, "cuda: a region's graph capture failed (%s); it replays eagerly",
                 r->eager_reason);
    }
  }
  if (st == BP_OK) {
    if (!r->eager) {
      CUresult e = cu->cuGraphLaunch(r->exec, s->s);
      if (e != CUDA_SUCCESS) st = cuda_fail(d, e, "cuGraphLaunch");
      else r->graph_launches++;
    } else {
      st = enqueue_all(s, r, run);
    }
  }
  if (st == BP_OK) {
    CUresult e = cu->cuEventRecord(r->done, s->s);
    if (e != CUDA_SUCCESS) st = cuda_fail(d, e, "cuEventRecord (region)");
    r->pending = 1;
    r->last_stream = s;
  }
  if (st == BP_OK && !same) {
    cuda_plan_clear(&r->last);
    r->last = *plan; /* taken */
    memset(plan, 0, sizeof *plan);
    r->valid = 1;
  }
  cuda_ctx_pop(d);
  pthread_mutex_unlock(&r->mu);
  return st;
}
