/* A context holding the mpi plugin (mpi_test_context.c). */
#ifndef BP_TESTS_MPI_TEST_CONTEXT_H_
#define BP_TESTS_MPI_TEST_CONTEXT_H_
#include "backplane/plugin.h"
/* The plugin's tables (the context's copies), or NULL with the reason on
 * stderr; *out_context is released with mpi_test_close. */
const bp_plugin_vtable_t* mpi_test_open(void** out_context);
void mpi_test_close(void* context);
#endif
