/* backplane CPU plugin: running a compiled region's steps (cpu_region.h)
 * on a stream worker. The GEMM step multiplies by row blocks sized for L2
 * and runs the epilogue program on each block right after its product, so
 * the bias, activation and residual add read the product from cache.
 */
#include <stdlib.h>
#include <string.h>

#include "cpu_gemm_dnnl.h"
#include "cpu_region.h"

#define NONE_ID UINT32_MAX
/* Bytes of product per row block (about half of a typical L2). */
#define CPU_GEMM_BLOCK_BYTES (2u << 20)
#define CPU_GEMM_MIN_ROWS 256

typedef struct run_ctx {
  const struct bpp_executable_s* exe;
  const bp_tensor_desc_t* const* args;
  const bp_tensor_desc_t* ws;
} run_ctx_t;

/* Descriptor of value v: the launch's argument, or its workspace slot. */
static void value_desc(const run_ctx_t* c, uint32_t v, bp_tensor_desc_t* out) {
  if (v == NONE_ID) {
    memset(out, 0, sizeof *out);
    out->struct_size = sizeof *out;
    return;
  }
  if (v < c->exe->num_args) {
    const bp_tensor_desc_t* a = c->args[v];
    memcpy(out, a, a->struct_size < sizeof *out ? a->struct_size : sizeof *out);
    out->struct_size = sizeof *out;
    return;
  }
  *out = c->exe->values[v];
  out->buffer = c->ws->buffer;
  out->byte_offset = c->ws->byte_offset + c->exe->offsets[v];
}

static bp_status_t run_program(const run_ctx_t* c, const cpu_step_t* s) {
  bp_tensor_desc_t d[CPU_EWP_MAX_INPUTS + CPU_EWP_MAX_OUTPUTS];
  const bp_tensor_desc_t* p[CPU_EWP_MAX_INPUTS + CPU_EWP_MAX_OUTPUTS];
  for (uint32_t k = 0; k < s->prog_nin; k++) value_desc(c, s->prog_in[k], &d[k]);
  for (uint32_t k = 0; k < s->prog_nout; k++) value_desc(c, s->prog_out[k], &d[s->prog_nin + k]);
  for (uint32_t k = 0; k < s->prog_nin + s->prog_nout; k++) p[k] = &d[k];
  return cpu_ewp_run(s->prog, p, p + s->prog_nin);
}

/* A reduction prologue: the program's inputs, its result's dense shape
 * (the slot is never written), the reduction's output. */
static bp_status_t run_reduce(const run_ctx_t* c, const cpu_step_t* s) {
  bp_tensor_desc_t d[CPU_EWP_MAX_INPUTS], out;
  const bp_tensor_desc_t* p[CPU_EWP_MAX_INPUTS];
  for (uint32_t k = 0; k < s->prog_nin; k++) {
    value_desc(c, s->prog_in[k], &d[k]);
    p[k] = &d[k];
  }
  value_desc(c, s->outputs[0], &out);
  return cpu_region_reduce_run(s, p, &c->exe->values[s->inputs[0]], &out);
}

/* Runs op `op` of step s with its operands (attrs overridable). */
static bp_status_t run_op(const run_ctx_t* c, const cpu_step_t* s, uint32_t op,
                          const uint32_t* ins, uint32_t nin, const void* attrs) {
  bp_tensor_desc_t small[16];
  const bp_tensor_desc_t* small_p[16];
  uint32_t n = nin + s->num_outputs;
  bp_tensor_desc_t* d = n <= 16 ? small : calloc(n, sizeof *d);
  const bp_tensor_desc_t** p = n <= 16 ? small_p : calloc(n, sizeof *p);
  bp_status_t st = BP_OK;
  if (!d || !p) {
    st = cpu_error(BP_RESOURCE_EXHAUSTED, "cpu: region: out of memory for %u operands", n);
    goto done;
  }
  for (uint32_t i = 0; i < nin; i++) value_desc(c, ins[i], &d[i]);
  for (uint32_t k = 0; k < s->num_outputs; k++) value_desc(c, s->outputs[k], &d[nin + k]);
  for (uint32_t i = 0; i < n; i++) p[i] = &d[i];
  bp_op_call_t call = {.struct_size = sizeof call, .op_id = op, .num_inputs = nin,
                       .num_outputs = s->num_outputs, .compute_dtype = s->compute_dtype,
                       .list_begin = op == s->op_id ? s->list_begin : 0,
                       .list_count = op == s->op_id ? s->list_count : 0,
                       .inputs = p, .outputs = p + nin, .attrs = attrs};
  st = cpu_exec_op(&call);
done:
  if (d != small) free(d);
  if (p != small_p) free(p);
  return st;
}

/* The product alone (no bias, no activation) into the GEMM target, as one
 * op: the path for layouts the row blocks do not cover. */
static bp_status_t product_op(const run_ctx_t* c, const cpu_step_t* s, uint32_t target) {
  cpu_step_t t = *s;
  uint32_t outs[1] = {target};
  t.outputs = outs;
  t.num_outputs = 1;
  if (s->op_id == BP_OP_linear) {
    uint32_t ins[3] = {s->inputs[0], s->inputs[1], NONE_ID};
    bp_linear_attrs_t la = {.struct_size = sizeof la, .activation = BP_ACTIVATION_NONE};
    return run_op(c, &t, BP_OP_linear, ins, 3, &la);
  }
  uint32_t off = s->op_id == BP_OP_addmm ? 1 : 0;
  uint32_t ins[2] = {s->inputs[off], s->inputs[off + 1]};
  return run_op(c, &t, BP_OP_mm, ins, 2, NULL);
}

/* Rows of a descriptor whose leading dims (all but the last) collapse into
 * one: 1 with rows and the row stride, else 0. */
static int as_rows(const bp_tensor_desc_t* d, int64_t* rows, int64_t* rs) {
  if (d->rank == 0) return 0;
  int64_t r = 1, stride = 0;
  int have = 0;
  for (uint32_t i = d->rank - 1; i-- > 0;) {
    if (d->sizes[i] == 1) continue;
    if (!have) {
      stride = d->strides[i];
      have = 1;
    } else if (d->strides[i] != stride * r) {
      return 0;
    }
    r *= d->sizes[i];
  }
  *rows = r;
  *rs = have ? stride : d->sizes[d->rank - 1] * d->strides[d->rank - 1];
  return 1;
}

/* How a program operand follows the output's row blocks. */
enum { ROWS_ALL = 0, ROWS_SLICE = 1, ROWS_NONE = 2 };
static int row_mode(const bp_tensor_desc_t* d, const bp_tensor_desc_t* out) {
  int lead_one = 1;
  for (uint32_t i = 0; i + 1 < d->rank; i++) lead_one &= d->sizes[i] == 1;
  if (lead_one) return ROWS_ALL;
  if (d->rank != out->rank) return ROWS_NONE;
  for (uint32_t i = 0; i + 1 < d->rank; i++)
    if (d->sizes[i] != out->sizes[i]) return ROWS_NONE;
  int64_t r, rs;
  return as_rows(d, &r, &rs) ? ROWS_SLICE : ROWS_NONE;
}

/* A [rows, last] view of rows [r0, r0 + n) (ROWS_SLICE) or the row-shared
 * operand as [1, last] (ROWS_ALL). */
static void row_view(const bp_tensor_desc_t* d, int mode, int64_t r0, int64_t n, bp_tensor_desc_t* v) {
  *v = *d;
  int64_t last = d->rank ? d->sizes[d->rank - 1] : 1, cs = d->rank ? d->strides[d->rank - 1] : 0;
  v->rank = 2;
  v->sizes[1] = last;
  v->strides[1] = cs;
  if (mode == ROWS_SLICE) {
    int64_t rows = 0, rs = 0;
    as_rows(d, &rows, &rs);
    v->sizes[0] = n;
    v->strides[0] = rs;
    v->byte_offset = d->byte_offset + (uint64_t)(r0 * rs * (int64_t)bp_dtype_size(d->dtype));
  } else {
    v->sizes[0] = 1;
    v->strides[0] = 0;
  }
}

static bp_status_t run_gemm(const run_ctx_t* c, const cpu_step_t* s) {
  uint32_t off = s->op_id == BP_OP_addmm ? 1 : 0;
  bp_tensor_desc_t A, B, T;
  value_desc(c, s->inputs[off], &A);
  value_desc(c, s->inputs[off + 1], &B);
  value_desc(c, s->gemm_target, &T);
  int64_t M, a_rs, K = A.sizes[A.rank - 1], a_cs = A.strides[A.rank - 1];
  int64_t tM, t_rs, N = T.sizes[T.rank - 1], t_cs = T.strides[T.rank - 1];
  int64_t b_rs, b_cs;
  if (s->op_id == BP_OP_linear) { /* weight [N, K]: B[k][n] = W[n][k] */
    b_rs = B.strides[1];
    b_cs = B.strides[0];
  } else {
    b_rs = B.strides[0];
    b_cs = B.strides[1];
  }
  /* Row blocks need every operand to follow the output's rows. */
  bp_tensor_desc_t pd[CPU_EWP_MAX_INPUTS + CPU_EWP_MAX_OUTPUTS];
  int mode[CPU_EWP_MAX_INPUTS + CPU_EWP_MAX_OUTPUTS];
  uint32_t np = s->prog_nin + s->prog_nout;
  int blocked = as_rows(&A, &M, &a_rs) && as_rows(&T, &tM, &t_rs) && M == tM;
  for (uint32_t k = 1; k < np && blocked; k++) {
    value_desc(c, k < s->prog_nin ? s->prog_in[k] : s->prog_out[k - s->prog_nin], &pd[k]);
    mode[k] = row_mode(&pd[k], &T);
    blocked = mode[k] != ROWS_NONE && (k < s->prog_nin || mode[k] == ROWS_SLICE);
  }
  /* oneDNN's sgemm packs op(B) on every call: row blocks would pack the
   * weights once per block, which costs more than reading the product
   * back from memory once. */
  if (blocked && T.dtype == BP_DTYPE_F32 && cpu_sgemm_dnnl_takes(M, N, K)) blocked = 0;
  if (!blocked) { /* whole product, then the program over whole tensors */
    bp_status_t st = product_op(c, s, s->gemm_target);
    if (st) return st;
    value_desc(c, s->gemm_target, &pd[0]);
    for (uint32_t k = 1; k < np; k++)
      value_desc(c, k < s->prog_nin ? s->prog_in[k] : s->prog_out[k - s->prog_nin], &pd[k]);
    const bp_tensor_desc_t* p[CPU_EWP_MAX_INPUTS + CPU_EWP_MAX_OUTPUTS];
    for (uint32_t k = 0; k < np; k++) p[k] = &pd[k];
    return cpu_ewp_run(s->prog, p, p + s->prog_nin);
  }
  uint32_t es = (uint32_t)bp_dtype_size(T.dtype);
  int64_t rb = (int64_t)CPU_GEMM_BLOCK_BYTES / (N > 0 ? N * (int64_t)es : 1);
  if (rb < CPU_GEMM_MIN_ROWS) rb = CPU_GEMM_MIN_ROWS;
  unsigned char* a0 = cpu_desc_ptr(&A);
  unsigned char* t0 = cpu_desc_ptr(&T);
  const unsigned char* b0 = cpu_desc_ptr(&B);
  for (int64_t r0 = 0; r0 < M; r0 += rb) {
    int64_t n = M - r0 < rb ? M - r0 : rb;
    bp_status_t st = cpu_gemm(T.dtype, n, N, K, 1.0, a0 + r0 * a_rs * (int64_t)es, a_rs, a_cs, b0,
                              b_rs, b_cs, 0, t0 + r0 * t_rs * (int64_t)es, t_rs, t_cs);
    if (st) return st;
    bp_tensor_desc_t v[CPU_EWP_MAX_INPUTS + CPU_EWP_MAX_OUTPUTS];
    const bp_tensor_desc_t* p[CPU_EWP_MAX_INPUTS + CPU_EWP_MAX_OUTPUTS];
    row_view(&T, ROWS_SLICE, r0, n, &v[0]);
    for (uint32_t k = 1; k < np; k++) row_view(&pd[k], mode[k], r0, n, &v[k]);
    for (uint32_t k = 0; k < np; k++) p[k] = &v[k];
    if ((st = cpu_ewp_run(s->prog, p, p + s->prog_nin))) return st;
  }
  return BP_OK;
}

bp_status_t cpu_region_run(const struct bpp_executable_s* exe, const bp_tensor_desc_t* const* args,
                           const bp_tensor_desc_t* ws) {
  run_ctx_t c = {exe, args, ws};
  for (uint32_t i = 0; i < exe->num_steps; i++) {
    const cpu_step_t* s = &exe->steps[i];
    bp_status_t st;
    switch (s->kind) {
      case CPU_STEP_PROGRAM: st = run_program(&c, s); break;
      case CPU_STEP_GEMM: st = run_gemm(&c, s); break;
      case CPU_STEP_REDUCE: st = run_reduce(&c, s); break;
      default: st = run_op(&c, s, s->op_id, s->inputs, s->num_inputs, s->attrs); break;
    }
    if (st) return st;
  }
  return BP_OK;
}
