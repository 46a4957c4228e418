/* Bounded waits: bp_stream_synchronize_timeout and bp_event_wait_timeout.
 *
 * The plugin ABI has no timed wait, so these poll the plugin's query slot
 * (stream_query / event_query), sleeping between polls: 1 us at first,
 * doubling up to 1 ms, so a short wait costs little and a long one wakes
 * about once a millisecond. Nothing is cancelled on timeout: the work stays
 * enqueued, and a later query, wait or synchronize sees it.
 */
#include <time.h>

#include "internal.h"

#define BP__POLL_MAX_NS 1000000u

static uint64_t now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* What to poll: a stream (stream_query) or an event (event_query). */
typedef struct wait_target {
  const bp_plugin_t* plugin;
  bpp_stream_t stream; /* NULL when waiting for the event */
  bpp_event_t event;
} wait_target_t;

static bp_status_t query(const wait_target_t* t) {
  return t->stream ? BP__CORE_CALL(t->plugin, stream_query, t->stream)
                   : BP__CORE_CALL(t->plugin, event_query, t->event);
}

/* Polls the target until it answers something other than BP_NOT_READY or
 * `timeout_ns` passed. */
static bp_status_t poll_until(const wait_target_t* t, uint64_t timeout_ns, const char* fn,
                              const char* what) {
  const char* slot = t->stream ? "stream_query" : "event_query";
  uint64_t start = now_ns(), pause = 1000;
  for (;;) {
    bp__clear_error();
    bp_status_t status = query(t);
    if (status == BP_OK) return BP_OK;
    if (status != BP_NOT_READY) return bp__plugin_error(t->plugin, status, slot);
    uint64_t elapsed = now_ns() - start;
    if (elapsed >= timeout_ns)
      return bp__error(BP_DEADLINE_EXCEEDED,
                       "%s: %s not done after %llu ns (the work stays pending)", fn, what,
                       (unsigned long long)timeout_ns);
    uint64_t left = timeout_ns - elapsed;
    struct timespec ts = {0, (long)(pause < left ? pause : left)};
    nanosleep(&ts, NULL);
    if (pause < BP__POLL_MAX_NS) pause *= 2;
  }
}

bp_status_t bp_stream_synchronize_timeout(bp_stream_t* stream, uint64_t timeout_ns) {
  static const char fn[] = "bp_stream_synchronize_timeout";
  bp__clear_error();
  BP__REQUIRE_ARG(fn, stream);
  const bp_plugin_t* plugin = stream->device->plugin;
  if (!plugin->core.stream_query)
    return bp__error(BP_UNIMPLEMENTED, "%s: plugin %s lacks stream_query", fn, plugin->name);
  wait_target_t target = {plugin, stream->handle, NULL};
  bp_status_t status = poll_until(&target, timeout_ns, fn, "the stream's work");
  return status == BP_DEADLINE_EXCEEDED ? status : bp__stream_take_kept(stream, status);
}

bp_status_t bp_event_wait_timeout(bp_event_t* event, uint64_t timeout_ns) {
  static const char fn[] = "bp_event_wait_timeout";
  bp__clear_error();
  BP__REQUIRE_ARG(fn, event);
  if (!atomic_load(&event->recorded)) return BP_OK; /* never recorded: complete */
  const bp_plugin_t* plugin = event->device->plugin;
  if (!plugin->core.event_query)
    return bp__error(BP_UNIMPLEMENTED, "%s: plugin %s lacks event_query", fn, plugin->name);
  wait_target_t target = {plugin, NULL, event->handle};
  return poll_until(&target, timeout_ns, fn, "the event");
}
