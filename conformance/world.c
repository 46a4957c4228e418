/* bp-conform's world mode: the collectives across processes started by a
 * launcher, one rank per process (see conform.h): under mpirun (or another
 * PMI launcher) the launcher's world through a plugin that has one (the
 * mpi plugin); under bp-launch (BACKPLANE_WORLD_SIZE alone) a TCP env://
 * bootstrap and the backend's own engine (the cpu plugin's shared memory
 * across processes, or the core's host staging through it). Every process
 * generates the same cases in the same order and runs them in turn; a case
 * that fails on one rank fails on all, so the processes stay in step. */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backplane/comm.h"
#include "conform.h"

int bpc_world_size_from_env(void) {
  static const char* const vars[] = {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "BACKPLANE_WORLD_SIZE"};
  for (size_t k = 0; k < sizeof vars / sizeof vars[0]; ++k) {
    const char* v = getenv(vars[k]);
    if (v && *v) return atoi(v);
  }
  return 0;
}

/* Whether an MPI-style launcher started this process. */
static int launched_by_mpi(void) {
  const char* a = getenv("OMPI_COMM_WORLD_SIZE");
  const char* b = getenv("PMI_SIZE");
  return (a && *a) || (b && *b);
}

int bpc_run_world(const char* backend, int quick, int verbose) {
  bp_context_t* ctx = NULL;
  bp_bootstrap_t* bootstrap = NULL;
  bp_device_t* dev = NULL;
  bp_stream_t* stream = NULL;
  bp_comm_t* world = NULL;
  bpc_case_list_t list;
  memset(&list, 0, sizeof list);
  int code = 2;
  bp_status_t st = bp_context_create(NULL, &ctx);
  if (st == BP_OK) st = bp_context_find_device(ctx, backend, &dev);
  if (st == BP_OK) st = bp_stream_create(dev, NULL, &stream);
  /* Bootstrap NULL: the launcher's world, through a plugin that has one. */
  bp_comm_options_t o = {.struct_size = sizeof o, .timeout_ns = 120ull * 1000000000ull};
  if (st == BP_OK && !launched_by_mpi()) st = bp_bootstrap_create_env(&o, &bootstrap);
  if (st == BP_OK) st = bp_comm_create(dev, bootstrap, &o, &world);
  if (st != BP_OK) {
    fprintf(stderr, "bp-conform: world mode on %s: %s: %s\n", backend, bp_status_name(st),
            bp_status_message());
    printf("collectives: 0 passed, 1 failed, 0 skipped\n");
    goto done;
  }
  const int rank = bp_comm_rank(world), size = bp_comm_size(world);
  if (bpc_collective_cases_generate(quick, size, &list) != BP_OK) goto done;
  bpc_collectives_set_world(world);
  uint64_t passed = 0, failed = 0, skipped = 0;
  for (size_t k = 0; k < list.count; ++k) {
    bpc_result_t r;
    memset(&r, 0, sizeof r);
    bpc_collective_execute(dev, stream, &list.items[k], &r);
    if (r.status == BPC_PASS) {
      ++passed;
    } else if (r.status == BPC_SKIPPED || r.status == BPC_NOT_SUPPORTED) {
      ++skipped;
    } else {
      ++failed;
      fprintf(stderr, "rank %d: %s: %s: %s\n", rank, list.items[k].id,
              bpc_status_name(r.status), r.message);
    }
    if (verbose) printf("rank %d: %s: %s\n", rank, list.items[k].id, bpc_status_name(r.status));
  }
  bpc_collectives_set_world(NULL);
  printf("collectives: %llu passed, %llu failed, %llu skipped (rank %d of %d, %s)\n",
         (unsigned long long)passed, (unsigned long long)failed, (unsigned long long)skipped, rank,
         size, backend);
  code = failed || passed == 0 ? 1 : 0;
done:
  bpc_case_list_free(&list);
  if (world) bp_comm_destroy(world);
  if (bootstrap) bp_bootstrap_destroy(bootstrap);
  if (stream) bp_stream_release(stream);
  if (ctx) bp_context_release(ctx);
  return code;
}
