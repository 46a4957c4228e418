/* The application API side of the MPI tests, apart from the plugin kit's
 * headers (both declare bp_dtype_size): a context with the mpi plugin and
 * its tables through bp_plugin_vtable. */
#include <stdio.h>

#include "backplane/backplane.h"
#include "backplane/comm.h"
#include "backplane/plugin.h"
#include "mpi_test_context.h"

const bp_plugin_vtable_t* mpi_test_open(void** out_context) {
  bp_context_options_t o = {.struct_size = sizeof o, .select = "mpi"};
  bp_context_t* ctx = NULL;
  bp_plugin_t* p = NULL;
  *out_context = NULL;
  if (bp_context_create(&o, &ctx) != BP_OK || bp_context_find_plugin(ctx, "mpi", &p) != BP_OK) {
    fprintf(stderr, "no mpi plugin: %s\n", bp_status_message());
    if (ctx) bp_context_release(ctx);
    return NULL;
  }
  *out_context = ctx;
  return bp_plugin_vtable(p);
}

void mpi_test_close(void* context) { bp_context_release(context); }

/* The application API end to end: bp_comm_create on mpi:0 with the
 * bootstrap (NULL: the launcher's world), tensors in mpi:0's memory, a stream of it, bp_comm_all_reduce
 * (SUM of `n` floats, rank r holding r + i at i), then bp_comm_barrier.
 * Writes the rank and size the core reports, and the result. */
bp_status_t mpi_test_app_all_reduce(void* context, const bp_bootstrap_t* bootstrap, int64_t n,
                                    float* out, int32_t* out_rank, int32_t* out_size,
                                    uint32_t* out_tier) {
  bp_device_t* dev = NULL;
  bp_stream_t* s = NULL;
  bp_comm_t* comm = NULL;
  bp_tensor_t* t = NULL;
  bp_status_t st = bp_context_find_device(context, "mpi:0", &dev);
  if (st == BP_OK) st = bp_stream_create(dev, NULL, &s);
  if (st == BP_OK) st = bp_comm_create(dev, bootstrap, NULL, &comm);
  if (st == BP_OK) {
    *out_rank = bp_comm_rank(comm);
    *out_size = bp_comm_size(comm);
    *out_tier = bp_comm_tier(comm);
    st = bp_tensor_create(dev, BP_DTYPE_F32, 1, &n, &t);
  }
  for (int64_t i = 0; i < n; i++) out[i] = (float)(*out_rank + i);
  if (st == BP_OK) st = bp_tensor_write(s, t, out, (uint64_t)n * sizeof(float));
  if (st == BP_OK) st = bp_comm_all_reduce(comm, s, t, t, BP_REDUCE_SUM, NULL);
  if (st == BP_OK) st = bp_comm_barrier(comm, s);
  if (st == BP_OK) st = bp_tensor_read(s, t, out, (uint64_t)n * sizeof(float));
  if (t) bp_tensor_release(t);
  if (comm) bp_comm_destroy(comm);
  if (s) bp_stream_release(s);
  return st;
}
