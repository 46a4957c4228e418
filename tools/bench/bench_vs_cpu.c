/* bp-bench suite "vs_cpu": a non-CPU device against the CPU plugin, both
 * measured in the same run: f32 add over 16M elements (throughput ratio,
 * target 0.5), sgemm 1024^3 (target 0.3), the same with B a transposed
 * view (x @ W^T, a linear layer's weights) and as addmm with a bias row,
 * and the submission overhead per
 * tiny op (enqueue + completion of 1-element adds, in microseconds). On a
 * CPU device the suite says it does not apply.
 */
#include <stdio.h>
#include <string.h>

#include "bench.h"

typedef struct vs_state {
  bp_tensor_t *a, *b, *bt, *bias, *out;
  int kind; /* 0 add, 1 mm, 2 tiny adds, 3 mm with B transposed, 4 addmm with a bias row */
  int tiny_ops;
} vs_state_t;

static bp_status_t run_vs(bpb_ctx_t* ctx, void* user) {
  vs_state_t* s = user;
  switch (s->kind) {
    case 0: return bp_op_add(ctx->stream, s->a, s->b, NULL, &s->out);
    case 1: return bp_op_mm(ctx->stream, s->a, s->b, NULL, &s->out);
    case 3: return bp_op_mm(ctx->stream, s->a, s->bt, NULL, &s->out);
    case 4: return bp_op_addmm(ctx->stream, s->bias, s->a, s->b, NULL, &s->out);
    default:
      for (int i = 0; i < s->tiny_ops; i++) BPB_CHECK(bp_op_add(ctx->stream, s->a, s->b, NULL, &s->out));
      return BP_OK;
  }
}

static void release(vs_state_t* s) {
  bp_tensor_release(s->a);
  bp_tensor_release(s->b);
  bp_tensor_release(s->bt);
  bp_tensor_release(s->bias);
  bp_tensor_release(s->out);
  memset(s, 0, sizeof *s);
}

/* Times `kind` on ctx (device) and on cpu (the CPU plugin); returns seconds. */
static void measure(bpb_ctx_t* ctx, bpb_ctx_t* cpu, int kind, uint32_t rank, const int64_t* asz,
                    const int64_t* bsz, double* t_dev, double* t_cpu, int tiny_ops) {
  bpb_ctx_t* cs[2] = {ctx, cpu};
  double* out[2] = {t_dev, t_cpu};
  for (int k = 0; k < 2; k++) {
    vs_state_t s;
    memset(&s, 0, sizeof s);
    s.kind = kind;
    s.tiny_ops = tiny_ops;
    s.a = bpb_tensor_random(cs[k], rank, asz, 1);
    s.b = bpb_tensor_random(cs[k], rank, bsz, 2);
    if (kind == 3) {
      static const int64_t swap[2] = {1, 0};
      BPB_CHECK(bp_tensor_permute(s.b, swap, &s.bt));
    }
    if (kind == 4) s.bias = bpb_tensor_random(cs[k], 1, bsz + 1, 3); /* [N] */
    BPB_CHECK(bp_stream_synchronize(cs[k]->stream));
    *out[k] = bpb_time(cs[k], run_vs, &s);
    release(&s);
  }
}

void bpb_suite_vs_cpu(bpb_ctx_t* ctx) {
  if (ctx->is_cpu) {
    printf("suite vs_cpu: does not apply to a CPU-plugin device (run it with --device <other>:0)\n");
    return;
  }
  bpb_ctx_t cpu = *ctx;
  BPB_CHECK(bp_context_find_device(ctx->context, "cpu:0", &cpu.device));
  BPB_CHECK(bp_stream_create(cpu.device, NULL, &cpu.stream));
  cpu.is_cpu = 1;
  const char* dev = bp_device_name(ctx->device);

  /* f32 add: bytes read + written per second. */
  int64_t n = ctx->quick ? (int64_t)1 << 20 : (int64_t)16 << 20;
  int64_t sz[1] = {n};
  double td, tc;
  measure(ctx, &cpu, 0, 1, sz, sz, &td, &tc, 0);
  double bytes = 12.0 * (double)n;
  char name[160];
  snprintf(name, sizeof name, "f32 add, %lldM elements: %s vs the CPU plugin", (long long)(n >> 20), dev);
  bpb_add_figure(&(bpb_figure_t){name, "GB/s", bytes / td / 1e9, bytes / tc / 1e9, "cpu plugin, same run", 0.5, 0});

  /* sgemm m = n = k. */
  int64_t m = ctx->quick ? 256 : 1024;
  int64_t msz[2] = {m, m};
  measure(ctx, &cpu, 1, 2, msz, msz, &td, &tc, 0);
  double flops = 2.0 * (double)m * (double)m * (double)m;
  snprintf(name, sizeof name, "sgemm %lld^3: %s vs the CPU plugin", (long long)m, dev);
  bpb_add_figure(&(bpb_figure_t){name, "GFLOP/s", flops / td / 1e9, flops / tc / 1e9, "cpu plugin, same run", 0.3, 0});

  /* The same with B a transposed view. */
  measure(ctx, &cpu, 3, 2, msz, msz, &td, &tc, 0);
  snprintf(name, sizeof name, "sgemm %lld^3, B transposed (x @ W^T): %s vs the CPU plugin", (long long)m, dev);
  bpb_add_figure(&(bpb_figure_t){name, "GFLOP/s", flops / td / 1e9, flops / tc / 1e9, "cpu plugin, same run", 0, 0});

  /* As addmm with a bias row (a linear layer's bias). */
  measure(ctx, &cpu, 4, 2, msz, msz, &td, &tc, 0);
  snprintf(name, sizeof name, "addmm %lld^3 with a bias row: %s vs the CPU plugin", (long long)m, dev);
  bpb_add_figure(&(bpb_figure_t){name, "GFLOP/s", flops / td / 1e9, flops / tc / 1e9, "cpu plugin, same run", 0, 0});

  /* Submission overhead: 200 one-element adds, then one synchronize. */
  int64_t one[1] = {1};
  const int ops = 200;
  measure(ctx, &cpu, 2, 1, one, one, &td, &tc, ops);
  snprintf(name, sizeof name, "submission overhead per tiny op (%d adds + sync): %s vs the CPU plugin", ops, dev);
  bpb_add_figure(&(bpb_figure_t){name, "us", td / ops * 1e6, tc / ops * 1e6, "cpu plugin, same run", 0, 1});

  bp_stream_release(cpu.stream);
}
