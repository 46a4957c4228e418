/* bp-bench suite "reduce": f32 reductions (sum, mean, amax) over 16M
 * elements along the rows and along the columns of a 4096 x 4096 matrix,
 * softmax and log_softmax over rows of 4096, and cumsum and sort (figures
 * without a target). Each figure is a bandwidth (input + output bytes per
 * second) against the C copy loop on all cores, measured in the same
 * repetitions. Targets (issue "full operator set"): reductions 0.85,
 * softmax 0.7. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"

typedef enum red_kind {
  RK_SUM, RK_MEAN, RK_AMAX, RK_SOFTMAX, RK_LOG_SOFTMAX, RK_CUMSUM, RK_SORT
} red_kind_t;

typedef struct red_bench {
  const char* name;
  red_kind_t kind;
  int dim;       /* reduced / scanned dim; -1 = all dims (16M -> 1) */
  double target; /* ratio; 0 = figure only */
} red_bench_t;

typedef struct red_state {
  const red_bench_t* b;
  bp_tensor_t *x, *rows_out, *cols_out, *all_out, *full_out, *idx_out;
} red_state_t;

static bp_status_t run_one(bpb_ctx_t* ctx, void* user) {
  red_state_t* s = user;
  bp_stream_t* st = ctx->stream;
  const red_bench_t* b = s->b;
  bp_reduce_attrs_t ra = {.struct_size = sizeof ra, .num_dims = 1, .dims = {b->dim}};
  if (b->dim < 0) {
    ra.flags = BP_REDUCE_ALL_DIMS;
    ra.num_dims = 0;
  }
  bp_tensor_t** out = b->dim < 0 ? &s->all_out : b->dim == 0 ? &s->cols_out : &s->rows_out;
  switch (b->kind) {
    case RK_SUM: return bp_op_sum(st, s->x, &ra, out);
    case RK_MEAN: return bp_op_mean(st, s->x, &ra, out);
    case RK_AMAX: return bp_op_amax(st, s->x, &ra, out);
    case RK_SOFTMAX:
    case RK_LOG_SOFTMAX: {
      bp_softmax_attrs_t sa = {.struct_size = sizeof sa, .dim = b->dim};
      if (b->kind == RK_SOFTMAX) return bp_op_softmax(st, s->x, &sa, &s->full_out);
      return bp_op_log_softmax(st, s->x, &sa, &s->full_out);
    }
    case RK_CUMSUM: {
      bp_dim_attrs_t da = {.struct_size = sizeof da, .dim = b->dim};
      return bp_op_cumsum(st, s->x, &da, &s->full_out);
    }
    case RK_SORT: {
      bp_sort_attrs_t sa = {.struct_size = sizeof sa, .dim = b->dim};
      return bp_op_sort(st, s->x, &sa, &s->full_out, &s->idx_out);
    }
  }
  return BP_INVALID_ARGUMENT;
}

/* Bytes moved by one run: the input once plus every output element. */
static double bytes_moved(const red_bench_t* b, int64_t side) {
  double in = (double)side * (double)side * 4.0;
  switch (b->kind) {
    case RK_SOFTMAX: case RK_LOG_SOFTMAX: case RK_CUMSUM: return 2.0 * in;
    case RK_SORT: return in + in + 2.0 * in; /* values f32 + indices i64 */
    default: return in + (b->dim < 0 ? 4.0 : (double)side * 4.0);
  }
}

void bpb_suite_reduce(bpb_ctx_t* ctx) {
  const int64_t side = ctx->quick ? 1024 : 4096;
  const int64_t n = side * side;
  int64_t sq[2] = {side, side}, vec[1] = {side}, one[1] = {1};
  red_state_t s;
  memset(&s, 0, sizeof s);
  s.x = bpb_tensor_random(ctx, 2, sq, 11);
  s.rows_out = bpb_tensor(ctx, BP_DTYPE_F32, 1, vec);
  s.cols_out = bpb_tensor(ctx, BP_DTYPE_F32, 1, vec);
  s.all_out = bpb_tensor(ctx, BP_DTYPE_F32, 0, one);
  s.full_out = bpb_tensor(ctx, BP_DTYPE_F32, 2, sq);
  s.idx_out = bpb_tensor(ctx, BP_DTYPE_I64, 2, sq);
  BPB_CHECK(bp_stream_synchronize(ctx->stream));

  static const red_bench_t k_benches[] = {
      {"f32 sum over rows (dim 1)", RK_SUM, 1, 0.85},
      {"f32 sum over columns (dim 0)", RK_SUM, 0, 0.85},
      {"f32 sum over all elements", RK_SUM, -1, 0.85},
      {"f32 mean over rows (dim 1)", RK_MEAN, 1, 0.85},
      {"f32 mean over columns (dim 0)", RK_MEAN, 0, 0.85},
      {"f32 amax over rows (dim 1)", RK_AMAX, 1, 0.85},
      {"f32 amax over columns (dim 0)", RK_AMAX, 0, 0.85},
      {"f32 softmax over rows", RK_SOFTMAX, 1, 0.7},
      {"f32 log_softmax over rows", RK_LOG_SOFTMAX, 1, 0.7},
      {"f32 cumsum over rows", RK_CUMSUM, 1, 0.0},
      {"f32 sort over rows", RK_SORT, 1, 0.0},
  };
  float* ha = bpb_alloc((size_t)n * sizeof(float));
  float* hd = bpb_alloc((size_t)n * sizeof(float));
  bpb_fill_random(ha, (size_t)n, 12);
  memset(hd, 0, (size_t)n * sizeof(float));
  for (size_t k = 0; k < sizeof k_benches / sizeof k_benches[0]; k++) {
    const red_bench_t* b = &k_benches[k];
    s.b = b;
    char name[128];
    snprintf(name, sizeof name, "%s, %lldx%lld: bandwidth vs copy loop", b->name,
             (long long)side, (long long)side);
    double t_op, t_copy;
    if (!bpb_time_vs_copy(ctx, run_one, &s, ha, hd, (size_t)n, name, &t_op, &t_copy)) continue;
    double bw = bytes_moved(b, side) / t_op / 1e9;
    double base = 2.0 * (double)n * 4.0 / t_copy / 1e9;
    bpb_add_figure(&(bpb_figure_t){name, "GB/s", bw, base, "C copy loop, all cores", b->target, 0});
  }
  free(ha);
  free(hd);
  bp_tensor_release(s.x);
  bp_tensor_release(s.rows_out);
  bp_tensor_release(s.cols_out);
  bp_tensor_release(s.all_out);
  bp_tensor_release(s.full_out);
  bp_tensor_release(s.idx_out);
}
