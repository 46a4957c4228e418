/* A bp_bootstrap_t over MPI_COMM_WORLD, and host-pointer descriptors, for programs that link MPI
 * themselves (tests, bp-bench's comm suite, applications started with
 * mpirun): rank and nranks are the world's, and every function is the MPI
 * call of the same name on a private duplicate of MPI_COMM_WORLD.
 *
 * The caller initialises MPI first (MPI_Init_thread with
 * MPI_THREAD_MULTIPLE, so the plugin's streams may call MPI too) and
 * destroys the bootstrap before MPI_Finalize. Thread-compatible, like
 * every bootstrap.
 */
#ifndef BACKPLANE_MPI_BOOTSTRAP_H_
#define BACKPLANE_MPI_BOOTSTRAP_H_

#include <stdint.h>
#include <string.h>

#include "backplane/plugin.h"

#ifdef __cplusplus
extern "C" {
#endif

/* A dense rank-1 descriptor of `n` elements of host memory at `p`, as
 * communicators with BPP_COMM_HOST_POINTERS take it (buffer NULL,
 * byte_offset = the address; stream NULL). */
static inline bp_tensor_desc_t bp_mpi_host_desc(const void* p, uint32_t dtype, int64_t n) {
  bp_tensor_desc_t d;
  memset(&d, 0, sizeof d);
  d.struct_size = sizeof d;
  d.dtype = dtype;
  d.rank = 1;
  d.sizes[0] = n;
  d.strides[0] = 1;
  d.byte_offset = (uint64_t)(uintptr_t)p;
  return d;
}

/* Fills *out (caller-owned storage). INTERNAL when an MPI call fails. */
bp_status_t bp_mpi_bootstrap_create(bp_bootstrap_t* out);
void bp_mpi_bootstrap_destroy(bp_bootstrap_t* bootstrap);

#ifdef __cplusplus
}
#endif
#endif /* BACKPLANE_MPI_BOOTSTRAP_H_ */
