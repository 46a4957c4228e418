/* Tests of plugins/gpu_common: ops lowered to launches of the one kernel
 * source (host side only; no GPU API). A recording launch callback keeps
 * every launch, so programs, NDRanges and argument blocks are checked
 * exactly. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "bp_gpu_ops.h"

#define MAX_LAUNCHES 8
typedef struct rec {
  uint32_t n;
  bp_gpu_launch_t l[MAX_LAUNCHES];
} rec_t;

static bp_status_t record(void* ctx, const bp_gpu_launch_t* l) {
  rec_t* r = ctx;
  if (r->n >= MAX_LAUNCHES) return BP_INTERNAL;
  r->l[r->n++] = *l;
  return BP_OK;
}

static const bp_gpu_device_caps_t k_caps = {
    .dtype_mask = BP_DTYPE_BIT(BP_DTYPE_F32) | BP_DTYPE_BIT(BP_DTYPE_F16) | BP_DTYPE_BIT(BP_DTYPE_BF16) |
                  BP_DTYPE_BIT(BP_DTYPE_F64) | BP_DTYPE_BIT(BP_DTYPE_I32) | BP_DTYPE_BIT(BP_DTYPE_I64) |
                  BP_DTYPE_BIT(BP_DTYPE_BOOL) | BP_DTYPE_BIT(BP_DTYPE_U8),
    .max_group_size = 1024,
    .max_groups = 65536};

/* A dense descriptor; buffer NULL (the lowering never dereferences it). */
static bp_tensor_desc_t desc(uint32_t dt, uint32_t rank, const int64_t* sizes) {
  bp_tensor_desc_t d;
  memset(&d, 0, sizeof d);
  d.struct_size = sizeof d;
  d.dtype = dt;
  d.rank = rank;
  int64_t st = 1;
  for (uint32_t k = rank; k-- > 0;) {
    d.sizes[k] = sizes[k];
    d.strides[k] = st;
    st *= sizes[k];
  }
  return d;
}

static bp_op_call_t call_of(uint32_t op, uint32_t nin, const bp_tensor_desc_t** ins, uint32_t nout,
                            const bp_tensor_desc_t** outs, const void* attrs, uint32_t cdt) {
  bp_op_call_t c;
  memset(&c, 0, sizeof c);
  c.struct_size = sizeof c;
  c.op_id = op;
  c.num_inputs = nin;
  c.num_outputs = nout;
  c.inputs = ins;
  c.outputs = outs;
  c.attrs = attrs;
  c.compute_dtype = cdt;
  return c;
}

/* add of [2,3] and a broadcast [3]: one ew_f32 launch, the broadcast
 * input's leading stride 0, the dense operands merged nowhere (the
 * broadcast input breaks contiguity), alpha 1 adds no multiply. */
static void test_add_broadcast(void** state) {
  (void)state;
  int64_t s23[2] = {2, 3}, s3[1] = {3};
  bp_tensor_desc_t a = desc(BP_DTYPE_F32, 2, s23), b = desc(BP_DTYPE_F32, 1, s3), o = desc(BP_DTYPE_F32, 2, s23);
  const bp_tensor_desc_t* ins[2] = {&a, &b};
  const bp_tensor_desc_t* outs[1] = {&o};
  bp_binary_attrs_t at;
  memset(&at, 0, sizeof at);
  at.struct_size = sizeof at;
  bp_op_call_t c = call_of(BP_OP_add, 2, ins, 1, outs, &at, BP_DTYPE_F32);
  rec_t r = {0};
  assert_int_equal(bp_gpu_op_run(&k_caps, &c, record, &r), BP_OK);
  assert_int_equal(r.n, 1);
  const bp_gpu_ew_args_t* e = &r.l[0].args.ew;
  assert_int_equal(r.l[0].program, BP_GPU_PROGRAM_ew_f32);
  assert_int_equal(e->numel, 6);
  assert_int_equal(e->rank, 2);
  assert_int_equal(e->nin, 2);
  assert_int_equal(e->nout, 1);
  assert_int_equal(e->contiguous, 0);
  assert_int_equal(e->strides[1][0], 0);
  assert_int_equal(e->strides[1][1], 1);
  assert_int_equal(e->strides[0][0], 3);
  assert_int_equal(e->ninstr, 4); /* load, load, add, store */
  assert_int_equal(e->instrs[2][0], BP_OP_add);
  assert_int_equal(e->instrs[3][0], BP_EW_STORE);
  assert_ptr_equal(r.l[0].operands[1], &b);
  assert_ptr_equal(r.l[0].operands[2], &o);
  assert_true(r.l[0].global[0] % r.l[0].local[0] == 0);
  assert_true(r.l[0].global[0] >= 6);
}

/* Dense operands of one shape collapse to one contiguous dim. */
static void test_dense_collapses(void** state) {
  (void)state;
  int64_t s[3] = {4, 5, 6};
  bp_tensor_desc_t a = desc(BP_DTYPE_I32, 3, s), o = desc(BP_DTYPE_I32, 3, s);
  const bp_tensor_desc_t* ins[1] = {&a};
  const bp_tensor_desc_t* outs[1] = {&o};
  bp_op_call_t c = call_of(BP_OP_neg, 1, ins, 1, outs, NULL, BP_DTYPE_I32);
  rec_t r = {0};
  assert_int_equal(bp_gpu_op_run(&k_caps, &c, record, &r), BP_OK);
  assert_int_equal(r.n, 1);
  assert_int_equal(r.l[0].program, BP_GPU_PROGRAM_ew_i64);
  assert_int_equal(r.l[0].args.ew.rank, 1);
  assert_int_equal(r.l[0].args.ew.contiguous, 1);
  assert_int_equal(r.l[0].args.ew.sizes[0], 120);
  assert_int_equal(r.l[0].args.ew.cdt, BP_DTYPE_I32);
}

/* An empty output launches nothing; a program past the kernel's limits is
 * INTERNAL, not a truncated launch. */
static void test_empty_and_overflow(void** state) {
  (void)state;
  int64_t s0[1] = {0}, s1[1] = {4};
  bp_tensor_desc_t a = desc(BP_DTYPE_F32, 1, s0), o = desc(BP_DTYPE_F32, 1, s0);
  const bp_tensor_desc_t* ins[1] = {&a};
  const bp_tensor_desc_t* outs[1] = {&o};
  bp_op_call_t c = call_of(BP_OP_exp, 1, ins, 1, outs, NULL, BP_DTYPE_F32);
  rec_t r = {0};
  assert_int_equal(bp_gpu_op_run(&k_caps, &c, record, &r), BP_OK);
  assert_int_equal(r.n, 0);
  bp_tensor_desc_t x = desc(BP_DTYPE_F32, 1, s1);
  bp_gpu_ew_t p;
  bp_gpu_ew_init(&p, BP_DTYPE_F32);
  uint8_t v = bp_gpu_ew_load_input(&p, bp_gpu_ew_input(&p, &x));
  for (int i = 0; i < BP_GPU_EW_MAX_INSTR + 1; i++) v = bp_gpu_ew_op(&p, BP_OP_neg, v, 0, 0, 0);
  bp_gpu_ew_store(&p, bp_gpu_ew_output(&p, &x), v);
  assert_true(p.overflow);
  assert_int_equal(bp_gpu_ew_launch(&k_caps, &p, record, &r), BP_INTERNAL);
  assert_int_equal(r.n, 0);
}

/* sum over dim 1 of [4,5] (no keepdim): 4 rows of 5 cols, one group per
 * row, the output indexed by the kept dim. */
static void test_sum_rows(void** state) {
  (void)state;
  int64_t s45[2] = {4, 5}, s4[1] = {4};
  bp_tensor_desc_t a = desc(BP_DTYPE_F32, 2, s45), o = desc(BP_DTYPE_F32, 1, s4);
  const bp_tensor_desc_t* ins[1] = {&a};
  const bp_tensor_desc_t* outs[1] = {&o};
  bp_reduce_attrs_t at;
  memset(&at, 0, sizeof at);
  at.struct_size = sizeof at;
  at.num_dims = 1;
  at.dims[0] = -1;
  bp_op_call_t c = call_of(BP_OP_sum, 1, ins, 1, outs, &at, BP_DTYPE_F32);
  rec_t r = {0};
  assert_int_equal(bp_gpu_op_run(&k_caps, &c, record, &r), BP_OK);
  assert_int_equal(r.n, 1);
  const bp_gpu_row_args_t* g = &r.l[0].args.row;
  assert_int_equal(r.l[0].program, BP_GPU_PROGRAM_rows_reduce_f);
  assert_int_equal(g->nrows, 4);
  assert_int_equal(g->ncols, 5);
  assert_int_equal(g->row_strides[0][0], 5);
  assert_int_equal(g->col_strides[0][0], 1);
  assert_int_equal(g->row_strides[1][0], 1);
  assert_int_equal(r.l[0].global[0], 4 * BP_GPU_ROW_WG);
  assert_int_equal(r.l[0].local[0], BP_GPU_ROW_WG);
  /* A dim out of range is refused by support, and so by the launch. */
  at.dims[0] = 7;
  char msg[128];
  assert_int_equal(bp_gpu_op_supported(&k_caps, &c, msg, sizeof msg), BP_SUPPORT_ATTRIBUTE);
  assert_int_equal(bp_gpu_op_run(&k_caps, &c, record, &r), BP_UNIMPLEMENTED);
}

/* mm of [2,3] x [3,4]: tile-aligned NDRange and the operands' strides;
 * addmm's [4] bias broadcasts over rows (row stride 0). */
static void test_matmul(void** state) {
  (void)state;
  int64_t s23[2] = {2, 3}, s34[2] = {3, 4}, s24[2] = {2, 4}, s4[1] = {4};
  bp_tensor_desc_t a = desc(BP_DTYPE_F32, 2, s23), b = desc(BP_DTYPE_F32, 2, s34), o = desc(BP_DTYPE_F32, 2, s24);
  bp_tensor_desc_t bias = desc(BP_DTYPE_F32, 1, s4);
  const bp_tensor_desc_t* ins[3] = {&bias, &a, &b};
  const bp_tensor_desc_t* outs[1] = {&o};
  bp_addmm_attrs_t at;
  memset(&at, 0, sizeof at);
  at.struct_size = sizeof at;
  at.beta.kind = BP_SCALAR_FLOAT;
  at.beta.v.f = 0.5;
  bp_op_call_t c = call_of(BP_OP_addmm, 3, ins, 1, outs, &at, BP_DTYPE_F32);
  rec_t r = {0};
  assert_int_equal(bp_gpu_op_run(&k_caps, &c, record, &r), BP_OK);
  assert_int_equal(r.n, 1);
  const bp_gpu_mm_args_t* m = &r.l[0].args.mm;
  assert_int_equal(r.l[0].program, BP_GPU_PROGRAM_matmul_f32);
  assert_int_equal(m->m, 2);
  assert_int_equal(m->n, 4);
  assert_int_equal(m->k, 3);
  assert_int_equal(m->stride_row[3], 0);
  assert_int_equal(m->stride_col[3], 1);
  assert_true(m->has_bias);
  assert_true(m->beta == 0.5 && m->alpha == 1.0);
  assert_int_equal(r.l[0].global[0], BP_GPU_MM_TILE);
  assert_int_equal(r.l[0].global[1], BP_GPU_MM_TILE);
  assert_int_equal(r.l[0].global[2], 1);
  /* Integer matmul has no kernel: refused with the dtype reason. */
  bp_tensor_desc_t ai = desc(BP_DTYPE_I32, 2, s23), bi = desc(BP_DTYPE_I32, 2, s34), oi = desc(BP_DTYPE_I32, 2, s24);
  const bp_tensor_desc_t* ins2[2] = {&ai, &bi};
  const bp_tensor_desc_t* outs2[1] = {&oi};
  bp_op_call_t c2 = call_of(BP_OP_mm, 2, ins2, 1, outs2, NULL, BP_DTYPE_I32);
  char msg[128];
  assert_int_equal(bp_gpu_op_supported(&k_caps, &c2, msg, sizeof msg), BP_SUPPORT_DTYPE);
}

/* Support answers: float-only math on integers, bitwise ops on floats, a
 * dtype the device lacks, an op without a kernel. */
static void test_support(void** state) {
  (void)state;
  int64_t s[1] = {8};
  bp_tensor_desc_t i32 = desc(BP_DTYPE_I32, 1, s), f32 = desc(BP_DTYPE_F32, 1, s), i8 = desc(BP_DTYPE_I8, 1, s);
  char msg[128];
  const bp_tensor_desc_t* in_i[1] = {&i32};
  const bp_tensor_desc_t* in_f[2] = {&f32, &f32};
  const bp_tensor_desc_t* in_8[1] = {&i8};
  const bp_tensor_desc_t* out_i[1] = {&i32};
  const bp_tensor_desc_t* out_f[1] = {&f32};
  bp_op_call_t c = call_of(BP_OP_exp, 1, in_i, 1, out_f, NULL, BP_DTYPE_I32);
  assert_int_equal(bp_gpu_op_supported(&k_caps, &c, msg, sizeof msg), BP_SUPPORT_DTYPE);
  bp_binary_attrs_t at;
  memset(&at, 0, sizeof at);
  at.struct_size = sizeof at;
  c = call_of(BP_OP_bitwise_and, 2, in_f, 1, out_f, &at, BP_DTYPE_F32);
  assert_int_equal(bp_gpu_op_supported(&k_caps, &c, msg, sizeof msg), BP_SUPPORT_DTYPE);
  c = call_of(BP_OP_neg, 1, in_8, 1, out_i, NULL, BP_DTYPE_I8);
  assert_int_equal(bp_gpu_op_supported(&k_caps, &c, msg, sizeof msg), BP_SUPPORT_DTYPE);
  assert_non_null(strstr(msg, "i8"));
  c = call_of(BP_OP_fft_r2c, 1, in_i, 1, out_i, NULL, BP_DTYPE_I32);
  assert_int_equal(bp_gpu_op_supported(&k_caps, &c, msg, sizeof msg), BP_SUPPORT_OP);
  assert_false(bp_gpu_op_implemented(BP_OP_fft_r2c));
  assert_true(bp_gpu_op_implemented(BP_OP_sort));
  assert_true(bp_gpu_op_implemented(BP_OP_softmax));
  c = call_of(BP_OP_exp, 1, (const bp_tensor_desc_t**)in_f, 1, out_f, NULL, BP_DTYPE_F32);
  assert_int_equal(bp_gpu_op_supported(&k_caps, &c, msg, sizeof msg), 0);
}

/* Fused programs: the opcode mask has what the interpreter runs; a program
 * naming an op with attributes, or registers out of range, is refused. */
static void test_ew_programs(void** state) {
  (void)state;
  bp_fusion_caps_t caps;
  memset(&caps, 0, sizeof caps);
  caps.struct_size = sizeof caps;
  assert_int_equal(bp_gpu_fusion_caps(&k_caps, &caps), BP_OK);
  assert_true(caps.ew_opcode_mask[BP_OP_add / 64] & (1ull << (BP_OP_add % 64)));
  assert_false(caps.ew_opcode_mask[BP_OP_elu / 64] & (1ull << (BP_OP_elu % 64)));
  assert_int_equal(caps.ew_max_instrs, BP_GPU_EW_MAX_INSTR);
  int64_t s[1] = {16};
  bp_tensor_desc_t x = desc(BP_DTYPE_F32, 1, s), y = desc(BP_DTYPE_F32, 1, s);
  const bp_tensor_desc_t* ins[1] = {&x};
  const bp_tensor_desc_t* outs[1] = {&y};
  bp_ew_instr_t code[3] = {{BP_EW_LOAD_INPUT, 0, 0, 0, 0, 0}, {BP_OP_exp, 1, 0, 0, 0, 0}, {BP_EW_STORE, 0, 0, 1, 0, 0}};
  bp_ew_program_t p;
  memset(&p, 0, sizeof p);
  p.struct_size = sizeof p;
  p.num_instrs = 3;
  p.num_registers = 2;
  p.num_inputs = 1;
  p.num_outputs = 1;
  p.compute_dtype = BP_DTYPE_F32;
  p.instr_stride = sizeof(bp_ew_instr_t);
  p.instrs = code;
  rec_t r = {0};
  assert_int_equal(bp_gpu_ew_program_run(&k_caps, &p, 1, ins, 1, outs, record, &r), BP_OK);
  assert_int_equal(r.n, 1);
  assert_int_equal(r.l[0].args.ew.instrs[1][0], BP_OP_exp);
  code[1].a = 5; /* register out of range */
  assert_int_equal(bp_gpu_ew_program_run(&k_caps, &p, 1, ins, 1, outs, record, &r), BP_INVALID_ARGUMENT);
  code[1].a = 0;
  code[1].opcode = BP_OP_elu;
  assert_int_equal(bp_gpu_ew_program_run(&k_caps, &p, 1, ins, 1, outs, record, &r), BP_UNIMPLEMENTED);
  assert_int_equal(r.n, 1);
}

/* The generated kernel of a packed program: one statement per instruction
 * with the op ids, operand dtypes and layout written in (no dispatch left),
 * the same text for the same program, a different one for another layout;
 * programs naming what does not exist are refused; a short buffer gets
 * OUT_OF_RANGE and the length needed. */
static void test_ew_generated_source(void** state) {
  (void)state;
  int64_t s[2] = {3, 5}, s1[1] = {5};
  bp_tensor_desc_t x = desc(BP_DTYPE_F16, 2, s), y = desc(BP_DTYPE_F32, 1, s1), o = desc(BP_DTYPE_I32, 2, s);
  bp_gpu_ew_t p;
  bp_gpu_ew_init(&p, BP_DTYPE_F32);
  uint32_t ix = bp_gpu_ew_input(&p, &x), iy = bp_gpu_ew_input(&p, &y), io = bp_gpu_ew_output(&p, &o);
  uint8_t r0 = bp_gpu_ew_load_input(&p, ix), r1 = bp_gpu_ew_load_input(&p, iy);
  uint8_t r2 = bp_gpu_ew_op(&p, BP_OP_mul, r0, r1, 0, 0);
  uint8_t r3 = bp_gpu_ew_op(&p, BP_OP_exp, r2, 0, 0, 0);
  bp_gpu_ew_emit(&p, BP_EW_CAST, r3, r3, 0, 0, BP_DTYPE_BF16);
  bp_gpu_ew_store(&p, io, r3);
  bp_gpu_launch_t l;
  int empty;
  assert_int_equal(bp_gpu_ew_pack(&k_caps, &p, &l, &empty), BP_OK);
  assert_int_equal(l.args.ew.contiguous, 0); /* y broadcasts over dim 0 */
  char text[8192], again[8192];
  size_t n = 0, n2 = 0;
  assert_int_equal(bp_gpu_ew_gen_source(&l.args.ew, text, sizeof text, &n), BP_OK);
  assert_int_equal(strlen(text), n);
  assert_int_equal(bp_gpu_ew_variant(BP_DTYPE_F32), BP_GPU_PROGRAM_ew_f32);
  char want[160];
  assert_string_equal(bp_gpu_ew_gen_kernel(BP_DTYPE_F16), "bp_ew_gen_f32");
  assert_null(bp_gpu_ew_gen_kernel(BP_DTYPE_C64));
  assert_non_null(strstr(text, "BP_KERNEL void bp_ew_gen_f32("));
  snprintf(want, sizeof want, "r0 = ct_load(o0, f0, %uu);", BP_DTYPE_F16);
  assert_non_null(strstr(text, want));
  snprintf(want, sizeof want, "r2 = wrapc(apply(%uu, r0, r1, r0, 0u, A), %uu);", BP_OP_mul, BP_DTYPE_F32);
  assert_non_null(strstr(text, want));
  snprintf(want, sizeof want, "r3 = wrapc(apply(%uu, r2, r0, r0, 0u, A), %uu);", BP_OP_exp, BP_DTYPE_F32);
  assert_non_null(strstr(text, want));
  snprintf(want, sizeof want, "r3 = round_through(r3, %uu);", BP_DTYPE_BF16);
  assert_non_null(strstr(text, want));
  snprintf(want, sizeof want, "ct_store(o2, f2, %uu, r3);", BP_DTYPE_I32);
  assert_non_null(strstr(text, want));
  assert_non_null(strstr(text, "c = rem % A->sizes[1];")); /* strided, rank 2 */
  assert_null(strstr(text, "switch"));
  assert_null(strstr(text, "instrs"));
  assert_int_equal(bp_gpu_ew_gen_source(&l.args.ew, again, sizeof again, &n2), BP_OK);
  assert_string_equal(text, again);
  /* A short buffer: OUT_OF_RANGE and the length needed. */
  assert_int_equal(bp_gpu_ew_gen_source(&l.args.ew, again, 16, &n2), BP_OUT_OF_RANGE);
  assert_int_equal(n2, n);
  /* Dense operands: the contiguous path, another text. */
  bp_gpu_ew_args_t a = l.args.ew;
  a.contiguous = 1;
  a.rank = 1;
  assert_int_equal(bp_gpu_ew_gen_source(&a, again, sizeof again, &n2), BP_OK);
  assert_non_null(strstr(again, "const bp_i64 f1 = A->byte_offset[1] + i * 4;"));
  assert_string_not_equal(text, again);
  /* Registers, operands and opcodes that do not exist. */
  a = l.args.ew;
  a.instrs[2][1] = 2u | (40u << 8);
  assert_int_equal(bp_gpu_ew_gen_source(&a, again, sizeof again, &n2), BP_INVALID_ARGUMENT);
  a = l.args.ew;
  a.instrs[0][1] = 0u | (7u << 8); /* input 7 of 2 */
  assert_int_equal(bp_gpu_ew_gen_source(&a, again, sizeof again, &n2), BP_INVALID_ARGUMENT);
  a = l.args.ew;
  a.instrs[2][0] = 0x3000u;
  assert_int_equal(bp_gpu_ew_gen_source(&a, again, sizeof again, &n2), BP_INVALID_ARGUMENT);
  a = l.args.ew;
  a.cdt = BP_DTYPE_C64;
  assert_int_equal(bp_gpu_ew_gen_source(&a, again, sizeof again, &n2), BP_UNIMPLEMENTED);
  assert_int_equal(bp_gpu_ew_gen_source(NULL, again, sizeof again, &n2), BP_INVALID_ARGUMENT);
}

/* cat: one copy per non-empty piece, each at its offset in the output. */
static void test_cat_pieces(void** state) {
  (void)state;
  int64_t s21[2] = {2, 1}, s23[2] = {2, 3}, s20[2] = {2, 0}, s22[2] = {2, 2};
  bp_tensor_desc_t a = desc(BP_DTYPE_F32, 2, s21), e = desc(BP_DTYPE_F32, 2, s20), b = desc(BP_DTYPE_F32, 2, s22);
  bp_tensor_desc_t o = desc(BP_DTYPE_F32, 2, s23);
  const bp_tensor_desc_t* ins[3] = {&a, &e, &b};
  const bp_tensor_desc_t* outs[1] = {&o};
  bp_dim_attrs_t at = {.struct_size = sizeof at, .dim = 1};
  bp_op_call_t c = call_of(BP_OP_cat, 3, ins, 1, outs, &at, BP_DTYPE_F32);
  c.list_begin = 0;
  c.list_count = 3;
  rec_t r = {0};
  assert_int_equal(bp_gpu_op_run(&k_caps, &c, record, &r), BP_OK);
  assert_int_equal(r.n, 2);
  assert_int_equal(r.l[0].args.ew.byte_offset[1], 0);
  assert_int_equal(r.l[1].args.ew.byte_offset[1], 4); /* column 1 of the output */
}

/* topk over dim 0 of a [5, 3] tensor: one sort launch, rows are the 3
 * columns (strides per operand), k and largest carried; k = 0 launches
 * nothing; f32 values with i32 indices are refused with a reason. */
static void test_sort_topk(void** state) {
  (void)state;
  int64_t s53[2] = {5, 3}, s23[2] = {2, 3};
  bp_tensor_desc_t x = desc(BP_DTYPE_F32, 2, s53), v = desc(BP_DTYPE_F32, 2, s23), i = desc(BP_DTYPE_I64, 2, s23);
  const bp_tensor_desc_t* ins[1] = {&x};
  const bp_tensor_desc_t* outs[2] = {&v, &i};
  bp_topk_attrs_t at = {.struct_size = sizeof at, .dim = 0, .k = 2, .largest = 1, .sorted = 1};
  bp_op_call_t c = call_of(BP_OP_topk, 1, ins, 2, outs, &at, BP_DTYPE_F32);
  rec_t r = {0};
  assert_int_equal(bp_gpu_op_run(&k_caps, &c, record, &r), BP_OK);
  assert_int_equal(r.n, 1);
  const bp_gpu_sort_args_t* a = &r.l[0].args.sort;
  assert_int_equal(r.l[0].program, BP_GPU_PROGRAM_sort);
  assert_int_equal(a->nrows, 3);
  assert_int_equal(a->ncols, 5);
  assert_int_equal(a->k, 2);
  assert_int_equal(a->descending, 1);
  assert_int_equal(a->col_stride[0], 3);
  assert_int_equal(a->col_stride[1], 3);
  assert_int_equal(a->row_strides[0][0], 1);
  assert_true(r.l[0].global[0] >= 15);
  at.k = 0;
  assert_int_equal(bp_gpu_op_run(&k_caps, &c, record, &r), BP_OK);
  assert_int_equal(r.n, 1);
  bp_tensor_desc_t i32 = desc(BP_DTYPE_I32, 2, s23);
  outs[1] = &i32;
  char msg[128];
  assert_int_equal(bp_gpu_op_supported(&k_caps, &c, msg, sizeof msg), BP_SUPPORT_DTYPE);
}

/* scatter_reduce(mean, include_self = 0) over dim 1: a copy of self into
 * out, then one line per index row with the reduction carried;
 * slice_scatter of an empty slice copies self only. */
static void test_scatter(void** state) {
  (void)state;
  int64_t s34[2] = {3, 4}, s32[2] = {3, 2}, s30[2] = {3, 0};
  bp_tensor_desc_t self = desc(BP_DTYPE_F32, 2, s34), out = desc(BP_DTYPE_F32, 2, s34);
  bp_tensor_desc_t idx = desc(BP_DTYPE_I64, 2, s32), src = desc(BP_DTYPE_F32, 2, s32);
  const bp_tensor_desc_t* ins[3] = {&self, &idx, &src};
  const bp_tensor_desc_t* outs[1] = {&out};
  bp_scatter_attrs_t at = {.struct_size = sizeof at, .dim = 1, .reduce = BP_SCATTER_MEAN, .include_self = 0};
  bp_op_call_t c = call_of(BP_OP_scatter_reduce, 3, ins, 1, outs, &at, BP_DTYPE_F32);
  rec_t r = {0};
  assert_int_equal(bp_gpu_op_run(&k_caps, &c, record, &r), BP_OK);
  assert_int_equal(r.n, 2);
  const bp_gpu_scatter_args_t* a = &r.l[1].args.scatter;
  assert_int_equal(r.l[1].program, BP_GPU_PROGRAM_scatter);
  assert_int_equal(a->lines, 3);
  assert_int_equal(a->along, 2);
  assert_int_equal(a->target_size, 4);
  assert_int_equal(a->reduce, BP_SCATTER_MEAN);
  assert_int_equal(a->include_self, 0);
  assert_int_equal(a->strides[2][0], 4);
  bp_tensor_desc_t i32 = desc(BP_DTYPE_I32, 2, s32);
  ins[1] = &i32;
  char msg[128];
  assert_int_equal(bp_gpu_op_supported(&k_caps, &c, msg, sizeof msg), BP_SUPPORT_DTYPE);
  bp_tensor_desc_t empty = desc(BP_DTYPE_F32, 2, s30);
  const bp_tensor_desc_t* sins[2] = {&self, &empty};
  bp_slice_attrs_t sl = {.struct_size = sizeof sl, .dim = 1, .start = 2, .end = 2, .step = 1};
  c = call_of(BP_OP_slice_scatter, 2, sins, 1, outs, &sl, BP_DTYPE_F32);
  r.n = 0;
  assert_int_equal(bp_gpu_op_run(&k_caps, &c, record, &r), BP_OK);
  assert_int_equal(r.n, 1);
}

/* max_pool2d over [2, 3, 6, 5] (kernel 3, stride 2, padding 1, dilation
 * 1): planes 2 x 3 with their strides, spatial dims right-aligned in
 * [D, H, W]; bool is refused. */
static void test_pool(void** state) {
  (void)state;
  int64_t sx[4] = {2, 3, 6, 5}, sy[4] = {2, 3, 3, 3};
  bp_tensor_desc_t x = desc(BP_DTYPE_F16, 4, sx), y = desc(BP_DTYPE_F16, 4, sy), i = desc(BP_DTYPE_I64, 4, sy);
  const bp_tensor_desc_t* ins[1] = {&x};
  const bp_tensor_desc_t* outs[2] = {&y, &i};
  bp_pool_attrs_t at;
  memset(&at, 0, sizeof at);
  at.struct_size = sizeof at;
  at.spatial_dims = 2;
  at.kernel[0] = at.kernel[1] = 3;
  at.stride[0] = at.stride[1] = 2;
  at.padding[0] = at.padding[1] = 1;
  at.dilation[0] = at.dilation[1] = 1;
  at.has_stride = 1;
  bp_op_call_t c = call_of(BP_OP_max_pool_with_indices, 1, ins, 2, outs, &at, BP_DTYPE_F16);
  rec_t r = {0};
  assert_int_equal(bp_gpu_op_run(&k_caps, &c, record, &r), BP_OK);
  assert_int_equal(r.n, 1);
  const bp_gpu_pool_args_t* a = &r.l[0].args.pool;
  assert_int_equal(r.l[0].program, BP_GPU_PROGRAM_pool_f32);
  assert_int_equal(a->total, 2 * 3 * 9);
  assert_int_equal(a->plane_rank, 2);
  assert_int_equal(a->plane_strides[0][0], 90);
  assert_int_equal(a->in[0], 1);
  assert_int_equal(a->in[1], 6);
  assert_int_equal(a->out[2], 3);
  assert_int_equal(a->sp_strides[0][1], 5);
  assert_int_equal(a->sp_strides[0][0], 0);
  assert_int_equal(a->pad[2], 1);
  bp_tensor_desc_t bx = desc(BP_DTYPE_BOOL, 4, sx), by = desc(BP_DTYPE_BOOL, 4, sy);
  ins[0] = &bx;
  outs[0] = &by;
  char msg[128];
  assert_int_equal(bp_gpu_op_supported(&k_caps, &c, msg, sizeof msg), BP_SUPPORT_DTYPE);
}

/* rotary_embedding, GPT-J pairs with a D/2 table: one program reading x
 * as even and odd views (stride 2, offset one element) and writing both
 * output views; the table is read once per pair. */
static void test_rotary(void** state) {
  (void)state;
  int64_t sx[2] = {3, 8}, st[2] = {3, 4};
  bp_tensor_desc_t x = desc(BP_DTYPE_F32, 2, sx), o = desc(BP_DTYPE_F32, 2, sx);
  bp_tensor_desc_t cs = desc(BP_DTYPE_F32, 2, st), sn = desc(BP_DTYPE_F32, 2, st);
  const bp_tensor_desc_t* ins[3] = {&x, &cs, &sn};
  const bp_tensor_desc_t* outs[1] = {&o};
  bp_rotary_attrs_t at = {.struct_size = sizeof at, .interleaved = 1};
  bp_op_call_t c = call_of(BP_OP_rotary_embedding, 3, ins, 1, outs, &at, BP_DTYPE_F32);
  rec_t r = {0};
  assert_int_equal(bp_gpu_op_run(&k_caps, &c, record, &r), BP_OK);
  assert_int_equal(r.n, 1);
  const bp_gpu_ew_args_t* a = &r.l[0].args.ew;
  assert_int_equal(a->nin, 4);
  assert_int_equal(a->nout, 2);
  assert_int_equal(a->byte_offset[1], 4); /* x's odd elements */
  assert_int_equal(a->byte_offset[5], 4); /* out's odd elements */
  assert_int_equal(a->strides[0][a->rank - 1], 2);
  cs.sizes[1] = 3; /* neither D nor D/2 */
  char msg[128];
  assert_int_equal(bp_gpu_op_supported(&k_caps, &c, msg, sizeof msg), BP_SUPPORT_ATTRIBUTE);
}

/* dropout in evaluation mode keeps everything (p 0, scale 1) whatever p
 * says; in training p 1 gives scale 0 (no division by zero); rand carries
 * the dtype's random bits; a device without f64 is refused with a reason. */
static void test_random(void** state) {
  (void)state;
  int64_t s[2] = {4, 5};
  bp_tensor_desc_t x = desc(BP_DTYPE_F16, 2, s), o = desc(BP_DTYPE_F16, 2, s), m = desc(BP_DTYPE_BOOL, 2, s);
  const bp_tensor_desc_t* ins[1] = {&x};
  const bp_tensor_desc_t* outs[2] = {&o, &m};
  bp_random_attrs_t at;
  memset(&at, 0, sizeof at);
  at.struct_size = sizeof at;
  at.train = 0;
  at.p = 0.5;
  at.seed = 7;
  bp_op_call_t c = call_of(BP_OP_dropout, 1, ins, 2, outs, &at, BP_DTYPE_F16);
  rec_t r = {0};
  assert_int_equal(bp_gpu_op_run(&k_caps, &c, record, &r), BP_OK);
  assert_int_equal(r.n, 1);
  assert_true(r.l[0].args.random.p == 0.0);
  assert_true(r.l[0].args.random.scale == 1.0);
  assert_int_equal(r.l[0].args.random.seed, 7);
  at.train = 1;
  at.p = 1.0;
  assert_int_equal(bp_gpu_op_run(&k_caps, &c, record, &r), BP_OK);
  assert_true(r.l[1].args.random.scale == 0.0);
  c = call_of(BP_OP_rand, 0, NULL, 1, outs, &at, BP_DTYPE_F16);
  assert_int_equal(bp_gpu_op_run(&k_caps, &c, record, &r), BP_OK);
  assert_int_equal(r.l[2].args.random.bits, 11);
  bp_gpu_device_caps_t no64 = k_caps;
  no64.dtype_mask &= ~BP_DTYPE_BIT(BP_DTYPE_F64);
  char msg[128];
  assert_int_equal(bp_gpu_op_supported(&no64, &c, msg, sizeof msg), BP_SUPPORT_DTYPE);
  assert_non_null(strstr(msg, "f64"));
}

/* kv_cache_append: per cache a copy, then a scatter over the slots: the
 * cache [4, 8, 2, 3] seen as 32 slots of [2, 3], slot_mapping broadcast
 * over (head, dim) through stride 0, one line per (head, dim). A cache
 * whose block dims do not merge is refused. */
static void test_kv_cache_append(void** state) {
  (void)state;
  int64_t sc[4] = {4, 8, 2, 3}, sx[3] = {5, 2, 3}, ss[1] = {5};
  bp_tensor_desc_t kc = desc(BP_DTYPE_F16, 4, sc), vc = desc(BP_DTYPE_F16, 4, sc);
  bp_tensor_desc_t ko = desc(BP_DTYPE_F16, 4, sc), vo = desc(BP_DTYPE_F16, 4, sc);
  bp_tensor_desc_t k = desc(BP_DTYPE_F16, 3, sx), v = desc(BP_DTYPE_F16, 3, sx), sl = desc(BP_DTYPE_I32, 1, ss);
  const bp_tensor_desc_t* ins[5] = {&kc, &vc, &k, &v, &sl};
  const bp_tensor_desc_t* outs[2] = {&ko, &vo};
  bp_op_call_t c = call_of(BP_OP_kv_cache_append, 5, ins, 2, outs, NULL, BP_DTYPE_F16);
  rec_t r = {0};
  assert_int_equal(bp_gpu_op_run(&k_caps, &c, record, &r), BP_OK);
  assert_int_equal(r.n, 4);
  const bp_gpu_scatter_args_t* a = &r.l[1].args.scatter;
  assert_int_equal(r.l[1].program, BP_GPU_PROGRAM_scatter);
  assert_int_equal(a->target_size, 32);
  assert_int_equal(a->lines, 6);
  assert_int_equal(a->along, 5);
  assert_int_equal(a->strides[0][0], 1);
  assert_int_equal(a->strides[0][1], 0);
  assert_int_equal(a->strides[2][0], 6);
  assert_int_equal(a->dtypes[0], BP_DTYPE_I32);
  assert_int_equal(a->reduce, BP_SCATTER_NONE);
  ko.strides[0] = 1000; /* blocks apart: no slot view */
  char msg[160];
  assert_int_equal(bp_gpu_op_supported(&k_caps, &c, msg, sizeof msg), BP_SUPPORT_LAYOUT);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_add_broadcast), cmocka_unit_test(test_dense_collapses),
      cmocka_unit_test(test_empty_and_overflow), cmocka_unit_test(test_sum_rows),
      cmocka_unit_test(test_matmul), cmocka_unit_test(test_support),
      cmocka_unit_test(test_ew_programs), cmocka_unit_test(test_ew_generated_source), cmocka_unit_test(test_cat_pieces),
      cmocka_unit_test(test_sort_topk), cmocka_unit_test(test_scatter),
      cmocka_unit_test(test_pool), cmocka_unit_test(test_rotary),
      cmocka_unit_test(test_random), cmocka_unit_test(test_kv_cache_append),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
