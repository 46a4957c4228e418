/* A plugin's instance_create, bounded in time when the context asks.
 *
 * With a bound, the call runs on a helper thread and the loader waits on a
 * condition variable until it returns or the bound passes. A call still
 * running then is abandoned: the helper thread stays blocked in the plugin
 * (nothing can stop it safely), the plugin is recorded as skipped with
 * BP_DEADLINE_EXCEEDED, and its library is never unloaded (the thread's
 * code must stay mapped). If the call returns later, the helper destroys
 * the instance it made and frees the shared state.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "internal.h"
#include "loader/loader.h"

/* Shared by the loader and the helper thread; the last one out frees it. */
typedef struct create_call {
  pthread_mutex_t mu;
  pthread_cond_t cv;
  int refs;      /* 2 while both sides hold it */
  int done;      /* the plugin returned */
  int abandoned; /* the loader stopped waiting */
  char* name;    /* the plugin's name, for the call note (owned) */
  bp_plugin_t* plugin; /* valid only while not abandoned (read under mu) */
  bp_status_t (*create)(const bpp_instance_create_info_t*, bpp_instance_t*);
  void (*destroy)(bpp_instance_t);
  bpp_instance_create_info_t info;
  char* options; /* owned copy of info.options */
  bp_status_t status;
  bpp_instance_t instance;
  char message[1024]; /* the failure's message, made on the helper thread */
} create_call_t;

static void call_unref(create_call_t* call) {
  pthread_mutex_lock(&call->mu);
  int last = --call->refs == 0;
  pthread_mutex_unlock(&call->mu);
  if (!last) return;
  pthread_mutex_destroy(&call->mu);
  pthread_cond_destroy(&call->cv);
  free(call->name);
  free(call->options);
  free(call);
}

static void* create_main(void* arg) {
  create_call_t* call = arg;
  bp__clear_error();
  bpp_instance_t instance = NULL;
  bp_status_t status =
      BP__NOTE_CALL(call, "instance_create", NULL, call->create(&call->info, &instance));
  pthread_mutex_lock(&call->mu);
  call->done = 1;
  if (call->abandoned) {
    pthread_mutex_unlock(&call->mu);
    /* Too late: nobody will use the instance. The library stays loaded. */
    if (status == BP_OK && instance && call->destroy) call->destroy(instance);
  } else {
    call->status = status;
    call->instance = instance;
    /* The plugin's report went to this thread's message slot. */
    if (status != BP_OK) bp__plugin_error(call->plugin, status, "instance_create");
    strncpy(call->message, bp_status_message(), sizeof(call->message) - 1);
    pthread_cond_signal(&call->cv);
    pthread_mutex_unlock(&call->mu);
  }
  call_unref(call);
  return NULL;
}

static bp_status_t create_bounded(bp_plugin_t* plugin, const bpp_instance_create_info_t* info,
                                  uint32_t timeout_ms, bpp_instance_t* out_instance) {
  create_call_t* call = calloc(1, sizeof(*call));
  if (!call) return bp__error(BP_RESOURCE_EXHAUSTED, "out of memory starting instance_create");
  call->refs = 2;
  call->name = strdup(plugin->name);
  call->options = info->options ? strdup(info->options) : NULL;
  call->plugin = plugin;
  call->create = plugin->core.instance_create;
  call->destroy = plugin->core.instance_destroy;
  call->info = *info;
  call->info.options = call->options;
  pthread_condattr_t attr;
  pthread_condattr_init(&attr);
  pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
  pthread_mutex_init(&call->mu, NULL);
  pthread_cond_init(&call->cv, &attr);
  pthread_condattr_destroy(&attr);
  pthread_t thread;
  if (!call->name || (info->options && !call->options) ||
      pthread_create(&thread, NULL, create_main, call) != 0) {
    call->refs = 1;
    call_unref(call);
    return bp__error(BP_RESOURCE_EXHAUSTED, "cannot start a thread for instance_create");
  }
  pthread_detach(thread);

  struct timespec deadline;
  clock_gettime(CLOCK_MONOTONIC, &deadline);
  deadline.tv_sec += timeout_ms / 1000;
  deadline.tv_nsec += (long)(timeout_ms % 1000) * 1000000L;
  if (deadline.tv_nsec >= 1000000000L) {
    deadline.tv_sec++;
    deadline.tv_nsec -= 1000000000L;
  }
  pthread_mutex_lock(&call->mu);
  while (!call->done) {
    if (pthread_cond_timedwait(&call->cv, &call->mu, &deadline) == ETIMEDOUT && !call->done) break;
  }
  bp_status_t status;
  if (!call->done) {
    call->abandoned = 1;
    call->plugin = NULL;
    plugin->abandoned = 1;
    status = bp__error(BP_DEADLINE_EXCEEDED,
                       "%s: instance_create did not return within %u ms (its thread is abandoned "
                       "and the library stays loaded)",
                       plugin->name, timeout_ms);
  } else {
    status = call->status;
    *out_instance = call->instance;
    if (status != BP_OK) bp__error(status, "%s", call->message);
  }
  pthread_mutex_unlock(&call->mu);
  call_unref(call);
  return status;
}

bp_status_t bp__loader_instance_create(bp_plugin_t* plugin, const bpp_instance_create_info_t* info,
                                       uint32_t timeout_ms, bpp_instance_t* out_instance) {
  *out_instance = NULL;
  bp__clear_error();
  if (timeout_ms == 0) {
    bp_status_t status = BP__CORE_CALL(plugin, instance_create, info, out_instance);
    return status == BP_OK ? BP_OK : bp__plugin_error(plugin, status, "instance_create");
  }
  return create_bounded(plugin, info, timeout_ms, out_instance);
}
