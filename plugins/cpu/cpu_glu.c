/* backplane CPU plugin: the gated activations (family GLU) -- swiglu and
 * geglu. The last dim of `self` holds [gate | up] (2H elements); out[.., i]
 * = act(gate[i]) * up[i] over H, equivalent to vLLM's silu_and_mul,
 * gelu_and_mul and gelu_tanh_and_mul. One pass: each input element is read
 * once and each output written once, where act then mul read the gate
 * twice and write an intermediate.
 *
 * Computes in f32 (f64 for f64) and rounds once into the output dtype
 * (PyTorch's composite rounds act(gate) to a half dtype first). Rows dense
 * in the compute type are read and written in place; others are staged
 * through a converting buffer. On CPUs with AVX2 and FMA (BP_CPU_ISA not
 * "base") the f32 rows, and so the f16 / bf16 ones staged through f32, run
 * vectorized: the same formulas with cpu_vmath.h's exp, erf and tanh in
 * place of libm's, compiled for AVX2 and for AVX-512. Threading: runs on a
 * stream worker; rows are spread over the pool.
 */
#include <stdlib.h>

#include "cpu_kernels.h"
#include "cpu_vmath.h"

#include <tgmath.h> /* exp(x) is expf for float x */

/* Rows per parallel task: about this many output elements. */
#define GLU_GRAIN 8192

enum { GLU_SILU, GLU_GELU, GLU_GELU_TANH, GLU_ACTS };

typedef void (*glu_row_fn)(void* restrict y, const void* g, const void* u, int64_t h);

/* One row kernel per activation and compute type (ATTR: its attributes). */
#define CPU__GLU_ROW(T, SFX, ACT, NAME, ATTR)                                      \
  ATTR static void NAME##_##SFX(void* restrict yv, const void* gv, const void* uv, \
                                int64_t h) {                                       \
    T* restrict y = yv;                                                       \
    const T *g = gv, *u = uv;                                                 \
    for (int64_t i = 0; i < h; i++) {                                         \
      T x = g[i];                                                             \
      y[i] = ACT(T, x) * u[i];                                                \
    }                                                                         \
  }
#define CPU__GLU_ROWS(T, SFX, ATTR)                        \
  CPU__GLU_ROW(T, SFX, CPU_ACT_SILU, glu_silu, ATTR)       \
  CPU__GLU_ROW(T, SFX, CPU_ACT_GELU, glu_gelu, ATTR)       \
  CPU__GLU_ROW(T, SFX, CPU_ACT_GELU_TANH, glu_gelu_tanh, ATTR)
CPU__GLU_ROWS(float, f32, )
CPU__GLU_ROWS(double, f64, )

static const glu_row_fn k_rows[GLU_ACTS][2] = {
    {glu_silu_f32, glu_silu_f64},
    {glu_gelu_f32, glu_gelu_f64},
    {glu_gelu_tanh_f32, glu_gelu_tanh_f64},
};

#if CPU_VM_X86
/* The f32 rows again per CPU_VM_ISAS, with exp, erf and tanh (the
 * activations' <tgmath.h> calls, all on floats here) as cpu_vmath.h's
 * straight-line forms so that the loops vectorize; cpu_vm_erff and
 * cpu_vm_tanhf are within 4 ulps, the activation's other roundings as in
 * the scalar rows (contraction off). No trapping math: no kernel reads the
 * FP exception flags, and it lets AVX2 code compute both sides of the
 * selects in erf and tanh rather than branch per element. */
#undef exp
#undef erf
#undef tanh
#define exp(x) cpu_vm_expf(x)
#define erf(x) cpu_vm_erff(x)
#define tanh(x) cpu_vm_tanhf(x)
#pragma GCC push_options
#pragma GCC optimize("fp-contract=off", "no-trapping-math")
#define CPU__GLU_VM_ROWS(ISA, LEVEL, TARGET) CPU__GLU_ROWS(float, ISA, __attribute__((target(TARGET))))
CPU_VM_ISAS(CPU__GLU_VM_ROWS)
#pragma GCC pop_options

#define CPU__GLU_VM_TAB(ISA, LEVEL, TARGET) [LEVEL - 1] = {glu_silu_##ISA, glu_gelu_##ISA, glu_gelu_tanh_##ISA},
static const glu_row_fn k_rows_vm[][GLU_ACTS] = {CPU_VM_ISAS(CPU__GLU_VM_TAB)};
#endif

/* The f32 row kernel of activation act for this CPU under BP_CPU_ISA. */
static glu_row_fn glu_row_f32(int act) {
#if CPU_VM_X86
  int isa = cpu_vm_isa(cpu_isa_cap());
  if (isa > 0) return k_rows_vm[isa - 1][act];
#endif
  return k_rows[act][0];
}

typedef struct glu_job {
  const bp_op_call_t* call;
  glu_row_fn row;
  int kt;
  int direct;          /* last dims dense in the compute type */
  int64_t h;           /* output elements per row */
  int64_t in_stride;   /* last-dim strides, in elements */
  int64_t out_stride;
  bp_nd_layout_t R;    /* leading dims: 0 out, 1 in */
  _Atomic int failed;
} glu_job_t;

static void glu_run(void* ctx, int64_t begin, int64_t end) {
  glu_job_t* j = ctx;
  const bp_tensor_desc_t *in = j->call->inputs[0], *out = j->call->outputs[0];
  size_t ks = cpu_kt_size[j->kt];
  size_t ies = bp_dtype_size(in->dtype), oes = bp_dtype_size(out->dtype);
  void* buf = NULL;
  if (!j->direct && !(buf = malloc((size_t)j->h * 3 * ks))) {
    atomic_store(&j->failed, 1);
    return;
  }
  bp_nd_cursor_t c;
  bp_nd_cursor_init(&c, &j->R, begin);
  for (int64_t r = begin; r < end; r++) {
    unsigned char* y = cpu_desc_ptr(out) + c.off[0] * (int64_t)oes;
    const unsigned char* x = cpu_desc_ptr(in) + c.off[1] * (int64_t)ies;
    if (j->direct) {
      j->row(y, x, x + (size_t)j->h * ks, j->h);
    } else {
      /* [gate | up] into buf, the result after them */
      unsigned char* res = (unsigned char*)buf + (size_t)j->h * 2 * ks;
      cpu_load[j->kt](buf, x, j->in_stride, 2 * j->h, in->dtype);
      j->row(res, buf, (unsigned char*)buf + (size_t)j->h * ks, j->h);
      cpu_store[j->kt](y, j->out_stride, res, j->h, out->dtype);
    }
    bp_nd_cursor_advance(&c, &j->R, 1);
  }
  free(buf);
}

static bp_status_t exec_glu(const bp_op_call_t* call) {
  const bp_tensor_desc_t *in = call->inputs[0], *out = call->outputs[0];
  if (in->rank == 0 || in->sizes[in->rank - 1] != 2 * out->sizes[out->rank - 1]) {
    return cpu_error(BP_INVALID_ARGUMENT, "cpu: %s: the input's last dim is not twice the output's",
                     cpu_op_name(call->op_id));
  }
  int act = GLU_SILU;
  if (call->op_id == BP_OP_geglu) {
    const bp_gelu_attrs_t* a = call->attrs;
    act = a && a->approximate == BP_GELU_TANH ? GLU_GELU_TANH : GLU_GELU;
  }
  glu_job_t j = {0};
  j.call = call;
  j.kt = in->dtype == BP_DTYPE_F64 ? CPU_KT_F64 : CPU_KT_F32;
  j.row = j.kt == CPU_KT_F64 ? k_rows[act][1] : glu_row_f32(act);
  j.h = out->sizes[out->rank - 1];
  j.in_stride = in->strides[in->rank - 1];
  j.out_stride = out->strides[out->rank - 1];
  j.direct = in->dtype == cpu_kt_dtype[j.kt] && out->dtype == cpu_kt_dtype[j.kt] &&
             j.in_stride == 1 && j.out_stride == 1;
  int64_t rows = 1;
  for (uint32_t d = 0; d + 1 < in->rank; d++) rows *= in->sizes[d];
  if (rows == 0 || j.h == 0) return BP_OK;
  const bp_tensor_desc_t* rd[2] = {out, in};
  cpu_sub_layout(&j.R, rd, 2, in->sizes, 0, in->rank - 1);
  int64_t grain = GLU_GRAIN / j.h;
  cpu_parallel_for(rows, grain < 1 ? 1 : grain, glu_run, &j);
  if (atomic_load(&j.failed)) {
    return cpu_error(BP_RESOURCE_EXHAUSTED, "cpu: %s: no memory for a row of %lld elements",
                     cpu_op_name(call->op_id), (long long)(2 * j.h));
  }
  return BP_OK;
}

static int supported_glu(const bp_op_call_t* call, char* msg, size_t cap) {
  (void)call, (void)msg, (void)cap;
  return BP_SUPPORT_OK;
}

const cpu_family_t cpu_family_glu = {
    "glu", CPU_FAMILY_OPS(BP_OP_swiglu, BP_OP_geglu), exec_glu, supported_glu, 0,
};
