/* bp-bench suite "ew": memory-bound elementwise ops, casts and copies over
 * 16M elements, as bandwidth (bytes read + written per second) against the
 * C copy loop on all cores measured in the same repetitions. Target: 0.85
 * of the copy loop (issue "full operator set"). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"

typedef enum ew_kind {
  EW_ADD, EW_MUL, EW_RELU, EW_NEG, EW_MAXIMUM, EW_WHERE, EW_ADDCMUL, EW_CLONE, EW_CAST_F16,
  EW_CAST_F32, EW_CAST_I32, EW_COPY_TRANSPOSED
} ew_kind_t;

typedef struct ew_bench {
  const char* name;
  ew_kind_t kind;
  int reads, writes;       /* operands of 4 bytes read/written per element */
  int half_reads, half_writes; /* operands of 2 bytes */
} ew_bench_t;

typedef struct ew_state {
  ew_kind_t kind;
  bp_tensor_t *a, *b, *c, *cond, *h, *out, *out_h, *out_i, *at, *out2d;
} ew_state_t;

static bp_status_t run_one(bpb_ctx_t* ctx, void* user) {
  ew_state_t* s = user;
  bp_stream_t* st = ctx->stream;
  switch (s->kind) {
    case EW_ADD: return bp_op_add(st, s->a, s->b, NULL, &s->out);
    case EW_MUL: return bp_op_mul(st, s->a, s->b, NULL, &s->out);
    case EW_RELU: return bp_op_relu(st, s->a, NULL, &s->out);
    case EW_NEG: return bp_op_neg(st, s->a, NULL, &s->out);
    case EW_MAXIMUM: return bp_op_maximum(st, s->a, s->b, NULL, &s->out);
    case EW_WHERE: return bp_op_where(st, s->cond, s->a, s->b, NULL, &s->out);
    case EW_ADDCMUL: return bp_op_addcmul(st, s->a, s->b, s->c, NULL, &s->out);
    case EW_CLONE: return bp_op_clone(st, s->a, NULL, &s->out);
    case EW_CAST_F16: {
      bp_cast_attrs_t at = {.struct_size = sizeof at, .dtype = BP_DTYPE_F16};
      return bp_op_to_copy(st, s->a, &at, &s->out_h);
    }
    case EW_CAST_F32: {
      bp_cast_attrs_t at = {.struct_size = sizeof at, .dtype = BP_DTYPE_F32};
      return bp_op_to_copy(st, s->h, &at, &s->out);
    }
    case EW_CAST_I32: {
      bp_cast_attrs_t at = {.struct_size = sizeof at, .dtype = BP_DTYPE_I32};
      return bp_op_to_copy(st, s->a, &at, &s->out_i);
    }
    case EW_COPY_TRANSPOSED: return bp_op_copy(st, s->out2d, s->at, NULL, &s->out2d);
  }
  return BP_INVALID_ARGUMENT;
}

void bpb_suite_ew(bpb_ctx_t* ctx) {
  const int64_t n = ctx->quick ? (int64_t)1 << 20 : (int64_t)16 << 20;
  const int64_t side = ctx->quick ? 1024 : 4096; /* side * side == n */
  int64_t sz[1] = {n}, sz2[2] = {side, side};
  ew_state_t s;
  memset(&s, 0, sizeof s);
  s.a = bpb_tensor_random(ctx, 1, sz, 1);
  s.b = bpb_tensor_random(ctx, 1, sz, 2);
  s.c = bpb_tensor_random(ctx, 1, sz, 3);
  s.out = bpb_tensor(ctx, BP_DTYPE_F32, 1, sz);
  s.out_h = bpb_tensor(ctx, BP_DTYPE_F16, 1, sz);
  s.out_i = bpb_tensor(ctx, BP_DTYPE_I32, 1, sz);
  BPB_CHECK(bp_op_gt(ctx->stream, s.a, s.b, NULL, &s.cond));
  bp_cast_attrs_t to_h = {.struct_size = sizeof to_h, .dtype = BP_DTYPE_F16};
  BPB_CHECK(bp_op_to_copy(ctx->stream, s.a, &to_h, &s.h));
  bp_tensor_t* sq = bpb_tensor_random(ctx, 2, sz2, 4);
  int64_t perm[2] = {1, 0};
  BPB_CHECK(bp_tensor_permute(sq, perm, &s.at));
  s.out2d = bpb_tensor(ctx, BP_DTYPE_F32, 2, sz2);
  BPB_CHECK(bp_stream_synchronize(ctx->stream));

  static const ew_bench_t k_benches[] = {
      {"f32 add", EW_ADD, 3, 0, 0, 0},
      {"f32 mul", EW_MUL, 3, 0, 0, 0},
      {"f32 relu", EW_RELU, 2, 0, 0, 0},
      {"f32 neg", EW_NEG, 2, 0, 0, 0},
      {"f32 maximum", EW_MAXIMUM, 3, 0, 0, 0},
      {"f32 where (bool condition)", EW_WHERE, 3, 0, 0, 0},
      {"f32 addcmul (fused)", EW_ADDCMUL, 4, 0, 0, 0},
      {"f32 clone (copy)", EW_CLONE, 2, 0, 0, 0},
      {"cast f32 -> f16", EW_CAST_F16, 1, 0, 1, 0},
      {"cast f16 -> f32", EW_CAST_F32, 1, 0, 1, 0},
      {"cast f32 -> i32", EW_CAST_I32, 2, 0, 0, 0},
      {"copy of a transposed 4096x4096 f32 view", EW_COPY_TRANSPOSED, 2, 0, 0, 0},
  };
  float* ha = bpb_alloc((size_t)n * sizeof(float));
  float* hd = bpb_alloc((size_t)n * sizeof(float));
  bpb_fill_random(ha, (size_t)n, 5);
  memset(hd, 0, (size_t)n * sizeof(float));
  for (size_t k = 0; k < sizeof k_benches / sizeof k_benches[0]; k++) {
    const ew_bench_t* b = &k_benches[k];
    s.kind = b->kind;
    char name[128];
    snprintf(name, sizeof name, "%s, %lldM elements: bandwidth vs copy loop", b->name,
             (long long)(n >> 20));
    double t_op, t_copy;
    if (!bpb_time_vs_copy(ctx, run_one, &s, ha, hd, (size_t)n, name, &t_op, &t_copy)) continue;
    /* where reads a 1-byte condition: counted as a quarter operand. */
    double bytes = (double)n * (4.0 * b->reads + 2.0 * b->half_reads);
    if (b->kind == EW_WHERE) bytes = (double)n * (4.0 * 3 + 1.0);
    if (b->kind == EW_CAST_F16) bytes = (double)n * (4.0 + 2.0);
    if (b->kind == EW_CAST_F32) bytes = (double)n * (2.0 + 4.0);
    double bw = bytes / t_op / 1e9;
    double base = 2.0 * (double)n * 4.0 / t_copy / 1e9;
    /* The streaming ops carry the 0.85 target; a transposed copy is
     * reported beside them (a gather of strided lines, not a stream). */
    double target = b->kind == EW_COPY_TRANSPOSED ? 0.0 : 0.85;
    bpb_add_figure(&(bpb_figure_t){name, "GB/s", bw, base, "C copy loop, all cores", target, 0});
  }
  free(ha);
  free(hd);
  bp_tensor_t* all[] = {s.a, s.b, s.c, s.cond, s.h, s.out, s.out_h, s.out_i, s.at, s.out2d, sq};
  for (size_t k = 0; k < sizeof all / sizeof all[0]; k++) bp_tensor_release(all[k]);
}
