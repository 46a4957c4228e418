/* bp-bench suite "comm_mpi" (the cross-process part of the comm figures):
 * all_reduce through the mpi plugin's comm table against MPI_Allreduce
 * called directly on the same buffers, in the same run, interleaved.
 * Run it under mpirun, one process per rank:
 *
 *   mpirun --allow-run-as-root --oversubscribe -np 4 build/bin/bp-bench --suite comm_mpi
 *
 * Figures (rank 0 reports; every time is the slowest rank's):
 *  - all_reduce of 64 MiB f32: bus bandwidth (NCCL's definition,
 *    2 (n - 1) / n * bytes / time), median; target ratio >= 1.0;
 *  - all_reduce of 8 bytes: latency per call, median of bursts; target
 *    ratio <= 2.0 (the plugin's header exchange is part of it; an
 *    all_reduce of at most 64 bytes travels inside it);
 *  - barrier, which is the header exchange alone, against MPI_Barrier;
 *    no target;
 *  - the cpu plugin's communicator made with the same bootstrap (the
 *    kit's shared-memory engine between the processes): all_reduce of
 *    64 MiB (bus bandwidth) and of 8 bytes (latency) against
 *    MPI_Allreduce direct, targets 1.0 and 2.0;
 *  - compressed all_gather and reduce_scatter (int8 blocks of 256, 64 MiB
 *    of f32 gathered or scattered) against the same calls uncompressed,
 *    target 1.5.
 * Run it once more with `--mca btl self,tcp` for the figures over TCP.
 * Without MPI at build time, or without the mpi plugin, the suite says so
 * and records nothing. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"

#ifndef BP_BENCH_HAVE_MPI
void bpb_suite_comm_mpi(bpb_ctx_t* ctx) {
  (void)ctx;
  printf("suite comm_mpi skipped: bp-bench was built without MPI (libopenmpi-dev)\n");
}
#else
#include <mpi.h>

#include "backplane/plugin.h"
#include "bp_mpi_bootstrap.h"

typedef struct comm_env {
  const bp_plugin_vtable_t* vt;
  bpp_instance_t inst;
  bpp_device_t dev;
  bpp_comm_t comm;
  /* The cpu plugin's communicator over the same bootstrap, or NULL. */
  const bp_plugin_vtable_t* cpu_vt;
  bpp_instance_t cpu_inst;
  bpp_device_t cpu_dev;
  bpp_comm_t cpu_comm;
  bp_bootstrap_t boot;
  int rank, size;
} comm_env_t;

/* The slowest rank's seconds. */
static double slowest(double s) {
  double m = 0;
  MPI_Allreduce(&s, &m, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
  return m;
}

/* Seconds per call of `calls` back-to-back all_reduces, both ways, through
 * the comm table `cm` / `comm`. */
static void time_pair_on(const bpp_comm_table_t* cm, bpp_comm_t comm, const float* src,
                         float* dst, int64_t n, int calls, double* out_plugin, double* out_mpi) {
  bp_tensor_desc_t sd = bp_mpi_host_desc(src, BP_DTYPE_F32, n),
                   rd = bp_mpi_host_desc(dst, BP_DTYPE_F32, n);
  MPI_Barrier(MPI_COMM_WORLD);
  double t0 = bpb_now();
  for (int i = 0; i < calls; i++)
    MPI_Allreduce(src, dst, (int)n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
  *out_mpi = slowest((bpb_now() - t0) / calls);
  MPI_Barrier(MPI_COMM_WORLD);
  t0 = bpb_now();
  for (int i = 0; i < calls; i++)
    BPB_CHECK(cm->all_reduce(comm, NULL, &sd, &rd, BP_REDUCE_SUM, NULL));
  *out_plugin = slowest((bpb_now() - t0) / calls);
}
static void time_pair(comm_env_t* e, const float* src, float* dst, int64_t n, int calls,
                      double* out_plugin, double* out_mpi) {
  time_pair_on(e->vt->comm, e->comm, src, dst, n, calls, out_plugin, out_mpi);
}

/* After main: the context (and its plugin instance) is released first. */
static void finalize_at_exit(void) {
  int done = 0;
  MPI_Finalized(&done);
  if (!done) MPI_Finalize();
}

static int env_open(bpb_ctx_t* ctx, comm_env_t* e) {
  int inited = 0, provided = 0;
  MPI_Initialized(&inited);
  if (!inited) {
    MPI_Init_thread(NULL, NULL, MPI_THREAD_MULTIPLE, &provided);
    atexit(finalize_at_exit);
  }
  MPI_Comm_rank(MPI_COMM_WORLD, &e->rank);
  MPI_Comm_size(MPI_COMM_WORLD, &e->size);
  bp_plugin_t* p = NULL;
  if (bp_context_find_plugin(ctx->context, "mpi", &p) != BP_OK) {
    printf("suite comm_mpi skipped: no mpi plugin (%s)\n", bp_status_message());
    return 0;
  }
  e->vt = bp_plugin_vtable(p);
  bpp_instance_create_info_t ii = {.struct_size = sizeof ii};
  BPB_CHECK(e->vt->core->instance_create(&ii, &e->inst));
  BPB_CHECK(e->vt->core->device_open(e->inst, 0, &e->dev));
  BPB_CHECK(bp_mpi_bootstrap_create(&e->boot));
  bp_comm_create_info_t ci = {.struct_size = sizeof ci, .bootstrap = &e->boot};
  BPB_CHECK(e->vt->comm->comm_create(e->dev, &ci, &e->comm));
  if (e->size < 2 && e->rank == 0)
    printf("comm_mpi: one rank (not under mpirun): the figures measure no communication\n");
  /* The cpu plugin across these processes: its shared-memory engine. */
  bp_plugin_t* cpu = NULL;
  if (bp_context_find_plugin(ctx->context, "cpu", &cpu) == BP_OK) {
    e->cpu_vt = bp_plugin_vtable(cpu);
    BPB_CHECK(e->cpu_vt->core->instance_create(&ii, &e->cpu_inst));
    BPB_CHECK(e->cpu_vt->core->device_open(e->cpu_inst, 0, &e->cpu_dev));
    BPB_CHECK(e->cpu_vt->comm->comm_create(e->cpu_dev, &ci, &e->cpu_comm));
  }
  return 1;
}

static void env_close(comm_env_t* e) {
  if (e->cpu_comm) {
    e->cpu_vt->comm->comm_destroy(e->cpu_comm);
    e->cpu_vt->core->device_close(e->cpu_dev);
    e->cpu_vt->core->instance_destroy(e->cpu_inst);
  }
  e->vt->comm->comm_destroy(e->comm);
  e->vt->core->device_close(e->dev);
  e->vt->core->instance_destroy(e->inst);
  bp_mpi_bootstrap_destroy(&e->boot);
  /* MPI_Finalize runs at exit (finalize_at_exit), after the context. */
}

/* Compressed all_gather and reduce_scatter (int8 blocks of 256) against
 * the same calls uncompressed, interleaved: `total` f32 gathered or
 * scattered (total / size per rank in all_gather's send and in
 * reduce_scatter's recv). */
static void compressed_moves(bpb_ctx_t* ctx, comm_env_t* e, float* src, float* dst,
                             int64_t total) {
  const int64_t part = total / e->size;
  const double bus = (double)(e->size - 1) / e->size * (double)(part * e->size) * sizeof(float);
  bp_collective_options_t i8 = {.struct_size = sizeof i8, .compression = BP_DTYPE_I8,
                                .compression_block = 256};
  for (int kind = 0; kind < 2; ++kind) {
    const int gather = kind == 0;
    bp_tensor_desc_t sd = bp_mpi_host_desc(src, BP_DTYPE_F32, gather ? part : part * e->size);
    bp_tensor_desc_t rd = bp_mpi_host_desc(dst, BP_DTYPE_F32, gather ? part * e->size : part);
    double vp[BPB_MAX_REPS], vm[BPB_MAX_REPS];
    const int64_t out = gather ? part * e->size : part;
    float* exact = bpb_alloc((size_t)out * sizeof(float));
    for (int r = -1; r < ctx->reps; r++) { /* r = -1: a warm-up */
      const int k = r < 0 ? 0 : r;
      for (int c = 0; c < 2; ++c) {
        const bp_collective_options_t* o = c ? &i8 : NULL;
        MPI_Barrier(MPI_COMM_WORLD);
        const double t0 = bpb_now();
        if (gather)
          BPB_CHECK(e->vt->comm->all_gather(e->comm, NULL, &sd, &rd, o));
        else
          BPB_CHECK(e->vt->comm->reduce_scatter(e->comm, NULL, &sd, &rd, BP_REDUCE_SUM, o));
        (c ? vp : vm)[k] = slowest(bpb_now() - t0);
        if (r < 0 && c == 0) memcpy(exact, dst, (size_t)out * sizeof(float));
      }
    }
    /* Rank 0's error of the last compressed call against the uncompressed. */
    double err = 0, top = 0;
    for (int64_t i = 0; i < out; i++) {
      const double d = (double)dst[i] - exact[i], a = exact[i] < 0 ? -exact[i] : exact[i];
      if (d > err || -d > err) err = d < 0 ? -d : d;
      if (a > top) top = a;
    }
    free(exact);
    char name[128];
    snprintf(name, sizeof name, "%s f32 %lld MiB, %d processes, int8 blocks of 256 (bus "
             "bandwidth)", gather ? "all_gather" : "reduce_scatter",
             (long long)(total * 4 >> 20), e->size);
    if (e->rank == 0)
      bpb_add_figure(&(bpb_figure_t){.name = name, .unit = "GB/s",
                                     .value = bus / bpb_median(vp, ctx->reps) / 1e9,
                                     .baseline = bus / bpb_median(vm, ctx->reps) / 1e9,
                                     .baseline_name = "the plugin's call uncompressed",
                                     .target = 1.5});
    if (e->rank == 0)
      printf("  int8-compressed %s across processes: max abs error %.3g (%.2e of the largest "
             "|value|)\n", gather ? "all_gather" : "reduce_scatter", err, top > 0 ? err / top : 0.0);
  }
}

/* The cpu plugin's shared-memory engine across the same processes against
 * MPI_Allreduce direct: 64 MiB bus bandwidth and 8-byte latency. */
static void shm_figures(bpb_ctx_t* ctx, comm_env_t* e, const float* src, float* dst, int64_t n,
                        double bus) {
  double vp[BPB_MAX_REPS], vm[BPB_MAX_REPS];
  const bpp_comm_table_t* cm = e->cpu_vt->comm;
  time_pair_on(cm, e->cpu_comm, src, dst, n, 1, vp, vm); /* warm-up */
  for (int r = 0; r < ctx->reps; r++)
    time_pair_on(cm, e->cpu_comm, src, dst, n, 1, &vp[r], &vm[r]);
  char name[128];
  snprintf(name, sizeof name, "all_reduce f32 %lld MiB, %d processes, cpu plugin over shared "
           "memory (bus bandwidth)", (long long)(n * 4 >> 20), e->size);
  if (e->rank == 0)
    bpb_add_figure(&(bpb_figure_t){.name = name, .unit = "GB/s",
                                   .value = bus / bpb_median(vp, ctx->reps) / 1e9,
                                   .baseline = bus / bpb_median(vm, ctx->reps) / 1e9,
                                   .baseline_name = "MPI_Allreduce direct", .target = 1.0});
  const int calls = ctx->quick ? 50 : 500;
  time_pair_on(cm, e->cpu_comm, src, dst, 2, calls, vp, vm);
  for (int r = 0; r < ctx->reps; r++)
    time_pair_on(cm, e->cpu_comm, src, dst, 2, calls, &vp[r], &vm[r]);
  const double tp = bpb_median(vp, ctx->reps), tm = bpb_median(vm, ctx->reps);
  snprintf(name, sizeof name, "all_reduce 8 bytes, %d processes, cpu plugin over shared memory "
           "(latency)", e->size);
  if (e->rank == 0)
    bpb_add_figure(&(bpb_figure_t){.name = name, .unit = "us", .value = tp * 1e6,
                                   .baseline = tm * 1e6, .baseline_name = "MPI_Allreduce direct",
                                   .target = 2.0 * tm * 1e6, .lower_is_better = 1});
}

void bpb_suite_comm_mpi(bpb_ctx_t* ctx) {
  comm_env_t e;
  memset(&e, 0, sizeof e);
  if (!env_open(ctx, &e)) return;
  if (e.rank != 0) bpb_quiet = 1; /* rank 0 reports */
  static char title[160];
  const bp_device_properties_t* props = NULL;
  bp_device_t* mpi_dev = NULL;
  if (bp_context_find_device(ctx->context, "mpi:0", &mpi_dev) == BP_OK)
    props = bp_device_properties(mpi_dev);
  snprintf(title, sizeof title, "mpi:0, %d processes under mpirun (%s)", e.size,
           props ? props->driver_version : "MPI");
  bpb_title = title;
  int64_t n = ctx->quick ? (int64_t)1 << 20 : (int64_t)16 << 20; /* 64 MiB of f32 */
  float* src = bpb_alloc((size_t)n * sizeof(float));
  float* dst = bpb_alloc((size_t)n * sizeof(float));
  bpb_fill_random(src, (size_t)n, 7u + (unsigned)e.rank);
  memset(dst, 0, (size_t)n * sizeof(float));
  double bus = 2.0 * (e.size - 1) / (e.size > 1 ? e.size : 1) * (double)n * sizeof(float);
  double vp[BPB_MAX_REPS], vm[BPB_MAX_REPS];
  time_pair(&e, src, dst, n, 1, vp, vm); /* warm-up: pages, connections */
  for (int r = 0; r < ctx->reps; r++) time_pair(&e, src, dst, n, 1, &vp[r], &vm[r]);
  double tp = bpb_median(vp, ctx->reps), tm = bpb_median(vm, ctx->reps);
  char name[96];
  snprintf(name, sizeof name, "all_reduce f32 %lld MiB, %d processes (bus bandwidth)",
           (long long)(n * 4 >> 20), e.size);
  if (e.rank == 0)
    bpb_add_figure(&(bpb_figure_t){.name = name, .unit = "GB/s", .value = bus / tp / 1e9,
                                   .baseline = bus / tm / 1e9,
                                   .baseline_name = "MPI_Allreduce direct", .target = 1.0});
  /* int8 blocks of 256 against the same call uncompressed (interleaved),
   * with rank 0's error against the uncompressed sum. */
  {
    bp_tensor_desc_t sd = bp_mpi_host_desc(src, BP_DTYPE_F32, n),
                     rd = bp_mpi_host_desc(dst, BP_DTYPE_F32, n);
    bp_collective_options_t i8 = {.struct_size = sizeof i8, .compression = BP_DTYPE_I8,
                                  .compression_block = 256};
    float* exact = bpb_alloc((size_t)n * sizeof(float));
    BPB_CHECK(e.vt->comm->all_reduce(e.comm, NULL, &sd, &rd, BP_REDUCE_SUM, NULL));
    memcpy(exact, dst, (size_t)n * sizeof(float));
    BPB_CHECK(e.vt->comm->all_reduce(e.comm, NULL, &sd, &rd, BP_REDUCE_SUM, &i8)); /* warm-up */
    for (int r = 0; r < ctx->reps; r++) {
      MPI_Barrier(MPI_COMM_WORLD);
      double t0 = bpb_now();
      BPB_CHECK(e.vt->comm->all_reduce(e.comm, NULL, &sd, &rd, BP_REDUCE_SUM, NULL));
      vm[r] = slowest(bpb_now() - t0);
      MPI_Barrier(MPI_COMM_WORLD);
      t0 = bpb_now();
      BPB_CHECK(e.vt->comm->all_reduce(e.comm, NULL, &sd, &rd, BP_REDUCE_SUM, &i8));
      vp[r] = slowest(bpb_now() - t0);
    }
    double err = 0, top = 0;
    for (int64_t i = 0; i < n; i++) {
      const double d = (double)dst[i] - exact[i], a = exact[i] < 0 ? -exact[i] : exact[i];
      if (d > err || -d > err) err = d < 0 ? -d : d;
      if (a > top) top = a;
    }
    tp = bpb_median(vp, ctx->reps);
    tm = bpb_median(vm, ctx->reps);
    snprintf(name, sizeof name, "all_reduce f32 %lld MiB, %d processes, int8 blocks of 256 "
             "(bus bandwidth)", (long long)(n * 4 >> 20), e.size);
    if (e.rank == 0) {
      bpb_add_figure(&(bpb_figure_t){.name = name, .unit = "GB/s", .value = bus / tp / 1e9,
                                     .baseline = bus / tm / 1e9,
                                     .baseline_name = "the plugin's all_reduce uncompressed",
                                     .target = 1.5});
      printf("  int8-compressed all_reduce across processes: max abs error %.3g (%.2e of the "
             "largest |sum|)\n", err, top > 0 ? err / top : 0.0);
    }
    free(exact);
  }
  compressed_moves(ctx, &e, src, dst, n);
  if (e.cpu_comm) shm_figures(ctx, &e, src, dst, n, bus);
  /* 8 bytes: latency per call over bursts of calls. */
  int calls = ctx->quick ? 50 : 500;
  time_pair(&e, src, dst, 2, calls, vp, vm);
  for (int r = 0; r < ctx->reps; r++) time_pair(&e, src, dst, 2, calls, &vp[r], &vm[r]);
  tp = bpb_median(vp, ctx->reps);
  tm = bpb_median(vm, ctx->reps);
  snprintf(name, sizeof name, "all_reduce 8 bytes, %d processes (latency)", e.size);
  if (e.rank == 0)
    bpb_add_figure(&(bpb_figure_t){.name = name, .unit = "us", .value = tp * 1e6,
                                   .baseline = tm * 1e6, .baseline_name = "MPI_Allreduce direct",
                                   .target = 2.0 * tm * 1e6, .lower_is_better = 1});
  /* The header exchange alone, for the latency's breakdown: the plugin's
   * barrier is that exchange. */
  for (int r = 0; r <= ctx->reps; r++) { /* r = 0: a warm-up, overwritten */
    int k = r > 0 ? r - 1 : 0;
    MPI_Barrier(MPI_COMM_WORLD);
    double t0 = bpb_now();
    for (int i = 0; i < calls; i++) MPI_Barrier(MPI_COMM_WORLD);
    vm[k] = slowest((bpb_now() - t0) / calls);
    MPI_Barrier(MPI_COMM_WORLD);
    t0 = bpb_now();
    for (int i = 0; i < calls; i++) BPB_CHECK(e.vt->comm->barrier(e.comm, NULL));
    vp[k] = slowest((bpb_now() - t0) / calls);
  }
  snprintf(name, sizeof name, "barrier = header exchange alone, %d processes (latency)", e.size);
  if (e.rank == 0)
    bpb_add_figure(&(bpb_figure_t){.name = name, .unit = "us",
                                   .value = bpb_median(vp, ctx->reps) * 1e6,
                                   .baseline = bpb_median(vm, ctx->reps) * 1e6,
                                   .baseline_name = "MPI_Barrier direct"});
  free(src);
  free(dst);
  env_close(&e);
}
#endif
