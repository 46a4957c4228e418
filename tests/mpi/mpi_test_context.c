/* The application API side of the MPI tests, apart from the plugin kit's
 * headers (both declare bp_dtype_size): a context with the mpi plugin and
 * its tables through bp_plugin_vtable. */
#include <stdio.h>

#include "backplane/backplane.h"
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
