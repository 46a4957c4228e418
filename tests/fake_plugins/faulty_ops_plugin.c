/* A backend that misbehaves in `add` on purpose, for the conformance
 * suite's self-test (tests/conformance_selftest): it wraps the real
 * template plugin (TEMPLATE_PLUGIN_PATH, dlopen'd at negotiation), answers
 * as FAULTY_NAME, and keeps every slot of the template except add's launch,
 * which, while query_support still claims add:
 *   FAULTY_OPS = 1  runs the real add, then adds 1 to the first output
 *                   element in stream order (a wrong result: FAIL);
 *   FAULTY_OPS = 2  crashes (SIGSEGV: CRASH);
 *   FAULTY_OPS = 3  never returns (TIMEOUT).
 * Test-only; the template itself carries no fault injection.
 */
#include <dlfcn.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "backplane/plugin.h"

#ifndef FAULTY_NAME
#define FAULTY_NAME "faulty"
#endif

static bp_plugin_vtable_t g_vtable;
static bpp_op_table_t g_ops;
static bpp_op_launch_fn g_launch[BP_OP_COUNT];
static const bpp_core_table_t* g_core; /* the template's */
static bpp_op_launch_fn g_real_add;

typedef struct corrupt_job {
  bpp_buffer_t buffer;
  uint64_t offset;
} corrupt_job_t;

/* Runs on the template's stream worker after the real add completed. */
static bp_status_t corrupt_first(void* user) {
  corrupt_job_t* job = user;
  void* p = NULL;
  if (g_core->buffer_map(job->buffer, job->offset, sizeof(float), &p) == BP_OK) {
    *(float*)p += 1.0f;
    g_core->buffer_unmap(job->buffer);
  }
  free(job);
  return BP_OK;
}

static bp_status_t faulty_add(bpp_stream_t s, const bp_op_call_t* call) {
  if (FAULTY_OPS == 2) raise(SIGSEGV);
  if (FAULTY_OPS == 3)
    for (;;) pause();
  bp_status_t st = g_real_add(s, call);
  if (st != BP_OK || call->num_outputs != 1) return st;
  const bp_tensor_desc_t* out = call->outputs[0];
  for (uint32_t d = 0; d < out->rank; ++d)
    if (out->sizes[d] == 0) return BP_OK; /* nothing to corrupt */
  corrupt_job_t* job = malloc(sizeof *job);
  if (!job) return BP_RESOURCE_EXHAUSTED;
  *job = (corrupt_job_t){out->buffer, out->byte_offset};
  return g_core->stream_enqueue_host_func(s, corrupt_first, job);
}

BP_PLUGIN_EXPORT bp_status_t bp_plugin_negotiate(const bp_negotiate_request_t* request,
                                                 bp_negotiate_reply_t* reply) {
  void* lib = dlopen(TEMPLATE_PLUGIN_PATH, RTLD_NOW | RTLD_LOCAL);
  bp_plugin_negotiate_fn real = lib ? (bp_plugin_negotiate_fn)dlsym(lib, "bp_plugin_negotiate") : NULL;
  if (!real) return BP_UNAVAILABLE;
  bp_status_t st = real(request, reply);
  if (st != BP_OK) return st;
  const bp_plugin_vtable_t* vt = reply->vtable;
  g_core = vt->core;
  g_real_add = vt->ops->launch[BP_OP_add];
  uint32_t n = vt->ops->launch_count < BP_OP_COUNT ? vt->ops->launch_count : BP_OP_COUNT;
  memcpy(g_launch, vt->ops->launch, sizeof(bpp_op_launch_fn) * n);
  g_launch[BP_OP_add] = faulty_add;
  g_ops = *vt->ops;
  g_ops.launch = g_launch;
  g_vtable = *vt;
  g_vtable.ops = &g_ops;
  reply->vtable = &g_vtable;
  reply->name = FAULTY_NAME;
  return BP_OK;
}
