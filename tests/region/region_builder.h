/* Tests' helper: builds a bp_region_desc_t in one struct (values, nodes,
 * ids) without heap memory. Header-only. */
#ifndef BP_TESTS_REGION_BUILDER_H_
#define BP_TESTS_REGION_BUILDER_H_

#include <stdarg.h>
#include <string.h>

#include "backplane/backplane.h"

enum { RB_MAX_VALUES = 32, RB_MAX_NODES = 16, RB_MAX_IDS = 8 };

typedef struct rb {
  bp_tensor_desc_t vals[RB_MAX_VALUES];
  const bp_tensor_desc_t* vp[RB_MAX_VALUES];
  uint32_t nv;
  bp_region_node_t nodes[RB_MAX_NODES];
  const bp_region_node_t* np[RB_MAX_NODES];
  uint32_t ids[RB_MAX_NODES][RB_MAX_IDS];
  uint32_t nn;
  bp_region_desc_t desc;
} rb_t;

static inline void rb_init(rb_t* b) { memset(b, 0, sizeof *b); }

/* A value of dtype and shape (dense strides); returns its id. */
static inline uint32_t rb_value(rb_t* b, uint32_t dtype, uint32_t rank, const int64_t* sizes) {
  bp_tensor_desc_t* d = &b->vals[b->nv];
  memset(d, 0, sizeof *d);
  d->struct_size = sizeof *d;
  d->dtype = dtype;
  d->rank = rank;
  int64_t s = 1;
  for (uint32_t i = rank; i-- > 0;) {
    d->sizes[i] = sizes[i];
    d->strides[i] = s;
    s *= sizes[i];
  }
  b->vp[b->nv] = d;
  return b->nv++;
}
#define RB_V(b, dt, ...) \
  rb_value((b), BP_DTYPE_##dt, (uint32_t)(sizeof((int64_t[]){__VA_ARGS__}) / sizeof(int64_t)), (int64_t[]){__VA_ARGS__})

/* A node: nin input ids then nout output ids. */
static inline void rb_node(rb_t* b, uint32_t op, const void* attrs, uint32_t nin, uint32_t nout, ...) {
  bp_region_node_t* n = &b->nodes[b->nn];
  memset(n, 0, sizeof *n);
  n->struct_size = sizeof *n;
  n->op_id = op;
  n->num_inputs = nin;
  n->num_outputs = nout;
  va_list ap;
  va_start(ap, nout);
  for (uint32_t i = 0; i < nin + nout; i++) b->ids[b->nn][i] = va_arg(ap, uint32_t);
  va_end(ap);
  n->inputs = b->ids[b->nn];
  n->outputs = b->ids[b->nn] + nin;
  n->attrs = attrs;
  b->np[b->nn] = n;
  b->nn++;
}

static inline const bp_region_desc_t* rb_desc(rb_t* b, uint32_t kind, uint32_t num_args,
                                              uint32_t num_inputs, const bp_ew_program_t* prog) {
  bp_region_desc_t* d = &b->desc;
  memset(d, 0, sizeof *d);
  d->struct_size = sizeof *d;
  d->kind = kind;
  d->num_values = b->nv;
  d->num_args = num_args;
  d->num_inputs = num_inputs;
  d->num_nodes = b->nn;
  d->values = b->vp;
  d->nodes = b->nn ? b->np : NULL;
  d->program = prog;
  return d;
}

/* An instruction of an elementwise program. */
static inline bp_ew_instr_t rb_ins(uint32_t opcode, uint8_t dst, uint8_t a, uint8_t bb, uint8_t c,
                                   uint32_t aux) {
  bp_ew_instr_t i = {opcode, dst, a, bb, c, aux};
  return i;
}

static inline bp_ew_program_t rb_program(const bp_ew_instr_t* ins, uint32_t n, uint32_t regs,
                                         uint32_t nin, uint32_t nout, const bp_scalar_t* consts,
                                         uint32_t nconst, uint32_t cdt) {
  bp_ew_program_t p;
  memset(&p, 0, sizeof p);
  p.struct_size = sizeof p;
  p.num_instrs = n;
  p.num_registers = regs;
  p.num_inputs = nin;
  p.num_outputs = nout;
  p.num_constants = nconst;
  p.compute_dtype = cdt;
  p.instr_stride = sizeof(bp_ew_instr_t);
  p.instrs = ins;
  p.constants = consts;
  return p;
}

/* The EPILOGUE region out = act(linear(x, w, bias)) + residual in f32:
 * values x [M, K], w [N, K], bias [N], residual [M, N], out [M, N] (the
 * five arguments, four inputs), then the two temporaries. */
static inline const bp_region_desc_t* rb_linear_act_residual(rb_t* b, int64_t M, int64_t K, int64_t N,
                                                             uint32_t act, const void* act_attrs) {
  rb_init(b);
  uint32_t vx = RB_V(b, F32, M, K), vw = RB_V(b, F32, N, K), vb = RB_V(b, F32, N),
           vr = RB_V(b, F32, M, N), vo = RB_V(b, F32, M, N), t0 = RB_V(b, F32, M, N),
           t1 = RB_V(b, F32, M, N);
  rb_node(b, BP_OP_linear, NULL, 3, 1, vx, vw, vb, t0);
  rb_node(b, act, act_attrs, 1, 1, t0, t1);
  rb_node(b, BP_OP_add, NULL, 2, 1, t1, vr, vo);
  return rb_desc(b, BP_REGION_EPILOGUE, 5, 4, NULL);
}

#endif /* BP_TESTS_REGION_BUILDER_H_ */
