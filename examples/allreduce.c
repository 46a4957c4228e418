/* allreduce: data-parallel SGD with backplane collectives.
 *
 * Linear regression y = X w fitted by full-batch gradient descent. One
 * rank on the whole data set is the reference; then 4 ranks each hold a
 * quarter of the rows, compute their part of the gradient with backplane
 * ops, sum the parts with bp_comm_all_reduce, and take the same step. The
 * weights must match the single rank's (the sums are only reassociated).
 *
 *   allreduce [BACKEND]     4 ranks in this process (default backend cpu;
 *                           set BP_CPU_DEVICES=4 for one device per rank)
 *   mpirun -np 4 allreduce  one rank per process (the mpi plugin)
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <backplane/comm.h>

#define RANKS 4
#define ROWS 4096 /* samples, split evenly over the ranks */
#define DIM 64
#define STEPS 30
#define LR 0.05

#define TRY(expr)                                                                       \
  do {                                                                                  \
    bp_status_t st_ = (expr);                                                           \
    if (st_ != BP_OK) {                                                                 \
      fprintf(stderr, "%s: %s: %s\n", #expr, bp_status_name(st_), bp_status_message()); \
      exit(1);                                                                          \
    }                                                                                   \
  } while (0)

/* The data set (deterministic): x in [-1, 1), y = x . w_true + noise. */
static void make_data(float* x, float* y) {
  uint32_t s = 12345;
  float w_true[DIM];
  for (int j = 0; j < DIM; ++j) w_true[j] = (float)(j % 7) * 0.25f - 0.75f;
  for (int i = 0; i < ROWS; ++i) {
    double dot = 0;
    for (int j = 0; j < DIM; ++j) {
      s = s * 1664525u + 1013904223u;
      x[i * DIM + j] = (float)((s >> 8) * (1.0 / 8388608.0)) - 1.0f;
      dot += x[i * DIM + j] * w_true[j];
    }
    s = s * 1664525u + 1013904223u;
    y[i] = (float)dot + 0.01f * ((float)((s >> 8) * (1.0 / 8388608.0)) - 1.0f);
  }
}

/* One model replica: its rows of the data, the weights, a stream. */
typedef struct replica {
  bp_device_t* device;
  bp_stream_t* stream;
  bp_tensor_t *x, *y, *w;
} replica_t;

static bp_tensor_t* upload(replica_t* r, const float* host, int64_t rows, int64_t cols) {
  int64_t shape[2] = {rows, cols};
  bp_tensor_t* t = NULL;
  TRY(bp_tensor_create(r->device, BP_DTYPE_F32, 2, shape, &t));
  TRY(bp_tensor_write(r->stream, t, host, (uint64_t)(rows * cols) * sizeof(float)));
  return t;
}

static void replica_open(replica_t* r, bp_device_t* device, const float* x, const float* y,
                         int64_t first_row, int64_t rows) {
  memset(r, 0, sizeof *r);
  r->device = device;
  TRY(bp_stream_create(device, NULL, &r->stream));
  r->x = upload(r, x + first_row * DIM, rows, DIM);
  r->y = upload(r, y + first_row, rows, 1);
  float zeros[DIM] = {0};
  r->w = upload(r, zeros, DIM, 1);
}

static void replica_close(replica_t* r) {
  bp_tensor_release(r->x);
  bp_tensor_release(r->y);
  bp_tensor_release(r->w);
  bp_stream_release(r->stream);
}

/* grad = X^T (X w - y): this replica's part of the full-batch gradient
 * (the 1 / ROWS goes into the step). */
static bp_tensor_t* gradient(replica_t* r) {
  bp_tensor_t *pred = NULL, *err = NULL, *xt = NULL, *grad = NULL;
  const int64_t perm[2] = {1, 0};
  TRY(bp_op_mm(r->stream, r->x, r->w, NULL, &pred));
  TRY(bp_op_sub(r->stream, pred, r->y, NULL, &err));
  TRY(bp_tensor_permute(r->x, perm, &xt));
  TRY(bp_op_mm(r->stream, xt, err, NULL, &grad));
  bp_tensor_release(pred);
  bp_tensor_release(err);
  bp_tensor_release(xt);
  return grad;
}

/* w -= LR / ROWS * grad */
static void step(replica_t* r, bp_tensor_t* grad) {
  bp_binary_attrs_t a = {.struct_size = sizeof a,
                         .alpha = {.kind = BP_SCALAR_FLOAT, .v = {.f = LR / ROWS}}};
  bp_tensor_t* w = NULL;
  TRY(bp_op_sub(r->stream, r->w, grad, &a, &w));
  bp_tensor_release(r->w);
  r->w = w;
}

static void read_w(replica_t* r, float* w) {
  TRY(bp_tensor_read(r->stream, r->w, w, DIM * sizeof(float)));
}

/* The single-rank reference on `device`. */
static void train_one(bp_device_t* device, const float* x, const float* y, float* w) {
  replica_t r;
  replica_open(&r, device, x, y, 0, ROWS);
  for (int s = 0; s < STEPS; ++s) {
    bp_tensor_t* g = gradient(&r);
    step(&r, g);
    bp_tensor_release(g);
  }
  read_w(&r, w);
  replica_close(&r);
}

/* The ranks this process owns (all of them, or one under a launcher). */
static void train_ranks(bp_comm_t** comms, replica_t* reps, int own) {
  for (int s = 0; s < STEPS; ++s) {
    bp_tensor_t* g[RANKS];
    for (int k = 0; k < own; ++k) g[k] = gradient(&reps[k]);
    for (int k = 0; k < own; ++k)
      TRY(bp_comm_all_reduce(comms[k], reps[k].stream, g[k], g[k], BP_REDUCE_SUM, NULL));
    for (int k = 0; k < own; ++k) {
      step(&reps[k], g[k]);
      bp_tensor_release(g[k]);
    }
  }
}

static double max_rel_diff(const float* a, const float* b) {
  double scale = 0, diff = 0;
  for (int j = 0; j < DIM; ++j) {
    scale = fmax(scale, fabs(a[j]));
    diff = fmax(diff, fabs((double)a[j] - b[j]));
  }
  return diff / (scale > 0 ? scale : 1);
}

int main(int argc, char** argv) {
  const char* backend = argc > 1 ? argv[1] : "cpu";
  const char* world_env = getenv("OMPI_COMM_WORLD_SIZE");
  const int world = world_env && atoi(world_env) > 1;
  float* x = malloc(sizeof(float) * ROWS * DIM);
  float* y = malloc(sizeof(float) * ROWS);
  float w_one[DIM], w_dp[RANKS][DIM];
  if (!x || !y) return 1;
  make_data(x, y);

  bp_context_t* ctx = NULL;
  TRY(bp_context_create(NULL, &ctx));
  bp_plugin_t* plugin = NULL;
  TRY(bp_context_find_plugin(ctx, backend, &plugin));
  bp_plugin_info_t info = {.struct_size = sizeof info};
  TRY(bp_plugin_get_info(plugin, &info));
  bp_device_t* devices[RANKS];
  for (int r = 0; r < RANKS; ++r)
    TRY(bp_plugin_device(plugin, (uint32_t)r % info.device_count, &devices[r]));

  train_one(devices[0], x, y, w_one);

  bp_comm_t* comms[RANKS] = {NULL};
  replica_t reps[RANKS];
  int own = RANKS, first = 0;
  if (world) {
    TRY(bp_comm_create(devices[0], NULL, NULL, &comms[0])); /* the launcher's world */
    if (bp_comm_size(comms[0]) != RANKS) {
      fprintf(stderr, "allreduce: run it with %d processes\n", RANKS);
      return 1;
    }
    own = 1;
    first = bp_comm_rank(comms[0]);
  } else {
    TRY(bp_comm_init_all(devices, RANKS, NULL, comms));
  }
  for (int k = 0; k < own; ++k)
    replica_open(&reps[k], devices[world ? 0 : k], x, y, (int64_t)(first + k) * (ROWS / RANKS),
                 ROWS / RANKS);
  train_ranks(comms, reps, own);

  int ok = 1;
  for (int k = 0; k < own; ++k) {
    read_w(&reps[k], w_dp[k]);
    const double d = max_rel_diff(w_one, w_dp[k]);
    /* The four partial sums are reassociated: a few f32 ulps per step. */
    ok &= d < 1e-4;
    printf("rank %d of %d (%s, %s): w[0..3] = %.5f %.5f %.5f %.5f, max relative difference "
           "to one rank %.2e%s\n",
           first + k, RANKS, bp_device_name(reps[k].device),
           bp_comm_tier(comms[k]) == BP_COMM_TIER_NATIVE ? "native" : "host-staged",
           w_dp[k][0], w_dp[k][1], w_dp[k][2], w_dp[k][3], d, d < 1e-4 ? "" : "  MISMATCH");
  }
  for (int k = 0; k < own; ++k) {
    replica_close(&reps[k]);
    bp_comm_destroy(comms[k]);
  }
  bp_context_release(ctx);
  free(x);
  free(y);
  printf("%s\n", ok ? "same weights as one rank" : "the weights differ");
  return ok ? 0 : 1;
}
