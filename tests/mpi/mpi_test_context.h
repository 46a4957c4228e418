/* A context holding the mpi plugin (mpi_test_context.c). */
#ifndef BP_TESTS_MPI_TEST_CONTEXT_H_
#define BP_TESTS_MPI_TEST_CONTEXT_H_
#include "backplane/plugin.h"
/* The plugin's tables (the context's copies), or NULL with the reason on
 * stderr; *out_context is released with mpi_test_close. */
const bp_plugin_vtable_t* mpi_test_open(void** out_context);
void mpi_test_close(void* context);
/* bp_comm_create and bp_comm_all_reduce (comm.h) on mpi:0: see the .c. */
bp_status_t mpi_test_app_all_reduce(void* context, const bp_bootstrap_t* bootstrap, int64_t n,
                                    float* out, int32_t* out_rank, int32_t* out_size,
                                    uint32_t* out_tier);
#endif
