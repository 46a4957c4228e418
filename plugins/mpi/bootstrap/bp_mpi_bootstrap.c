/* bp_mpi_bootstrap.h: a bootstrap whose functions are MPI calls. */
#include "bp_mpi_bootstrap.h"

#include <limits.h>
#include <mpi.h>
#include <stdlib.h>
#include <string.h>

static bp_status_t ok(int rc) { return rc == MPI_SUCCESS ? BP_OK : BP_INTERNAL; }

static MPI_Comm comm_of(void* ctx) { return *(MPI_Comm*)ctx; }

static bp_status_t bs_allgather(void* ctx, const void* send, void* recv, uint64_t bytes) {
  if (bytes > INT_MAX) return BP_OUT_OF_RANGE;
  return ok(MPI_Allgather(send, (int)bytes, MPI_BYTE, recv, (int)bytes, MPI_BYTE, comm_of(ctx)));
}
static bp_status_t bs_broadcast(void* ctx, void* data, uint64_t bytes, int32_t root) {
  if (bytes > INT_MAX) return BP_OUT_OF_RANGE;
  return ok(MPI_Bcast(data, (int)bytes, MPI_BYTE, root, comm_of(ctx)));
}
static bp_status_t bs_barrier(void* ctx) { return ok(MPI_Barrier(comm_of(ctx))); }
static bp_status_t bs_send(void* ctx, int32_t peer, const void* data, uint64_t bytes, int32_t tag) {
  if (bytes > INT_MAX) return BP_OUT_OF_RANGE;
  return ok(MPI_Send(data, (int)bytes, MPI_BYTE, peer, tag, comm_of(ctx)));
}
static bp_status_t bs_recv(void* ctx, int32_t peer, void* data, uint64_t bytes, int32_t tag) {
  if (bytes > INT_MAX) return BP_OUT_OF_RANGE;
  return ok(MPI_Recv(data, (int)bytes, MPI_BYTE, peer, tag, comm_of(ctx), MPI_STATUS_IGNORE));
}

bp_status_t bp_mpi_bootstrap_create(bp_bootstrap_t* out) {
  if (!out) return BP_INVALID_ARGUMENT;
  memset(out, 0, sizeof *out);
  MPI_Comm* c = malloc(sizeof *c);
  if (!c) return BP_RESOURCE_EXHAUSTED;
  int rank = 0, size = 0;
  if (MPI_Comm_dup(MPI_COMM_WORLD, c) != MPI_SUCCESS) {
    free(c);
    return BP_INTERNAL;
  }
  MPI_Comm_rank(*c, &rank);
  MPI_Comm_size(*c, &size);
  out->struct_size = sizeof *out;
  out->rank = rank;
  out->nranks = size;
  out->ctx = c;
  out->allgather = bs_allgather;
  out->broadcast = bs_broadcast;
  out->barrier = bs_barrier;
  out->send = bs_send;
  out->recv = bs_recv;
  return BP_OK;
}

void bp_mpi_bootstrap_destroy(bp_bootstrap_t* b) {
  if (!b || !b->ctx) return;
  MPI_Comm_free((MPI_Comm*)b->ctx);
  free(b->ctx);
  b->ctx = NULL;
}
