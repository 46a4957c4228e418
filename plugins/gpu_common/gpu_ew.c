/* backplane gpu_common: elementwise programs (build, pack, launch).
 *
 * A program (bp_gpu_ew_t) is packed into the interpreter kernel's argument
 * block (kernels/ew.cl, bp_gpu_ew_args_t) over its first output's shape:
 * inputs broadcast with stride 0, size-1 dims dropped and dims that are
 * contiguous for every operand merged, so dense operands become one dim
 * (the kernel's contiguous path). Compute dtypes pick the kernel variant:
 * f32/f16/bf16 run in f32 registers, f64 in f64, every integer dtype and
 * bool in int64 registers wrapped to the compute dtype.
 */
#include <math.h>
#include <string.h>

#include "bp_gpu_ops.h"
#include "bp_kit.h"

void bp_gpu_ew_init(bp_gpu_ew_t* p, uint32_t cdt) {
  memset(p, 0, sizeof *p);
  p->cdt = cdt;
}

uint32_t bp_gpu_ew_input(bp_gpu_ew_t* p, const bp_tensor_desc_t* d) {
  if (p->nin + p->nout >= BP_GPU_EW_MAX_OPERANDS) {
    p->overflow = 1;
    return 0;
  }
  p->in[p->nin] = d;
  return p->nin++;
}

uint32_t bp_gpu_ew_output(bp_gpu_ew_t* p, const bp_tensor_desc_t* d) {
  if (p->nin + p->nout >= BP_GPU_EW_MAX_OPERANDS) {
    p->overflow = 1;
    return 0;
  }
  p->out[p->nout] = d;
  return p->nout++;
}

static uint8_t ew_reg(bp_gpu_ew_t* p) {
  if (p->nregs >= BP_GPU_EW_MAX_REGS) {
    p->overflow = 1;
    return 0;
  }
  return (uint8_t)p->nregs++;
}

void bp_gpu_ew_emit(bp_gpu_ew_t* p, uint32_t opc, uint8_t dst, uint8_t a, uint8_t b, uint8_t c,
                    uint32_t aux) {
  if (p->ninstr >= BP_GPU_EW_MAX_INSTR) {
    p->overflow = 1;
    return;
  }
  bp_ew_instr_t* i = &p->ins[p->ninstr++];
  i->opcode = opc;
  i->dst = dst;
  i->a = a;
  i->b = b;
  i->c = c;
  i->aux = aux;
}

/* Wraps an integer constant to the compute dtype's width. */
static int64_t wrap_int(int64_t v, uint32_t cdt) {
  switch (cdt) {
    case BP_DTYPE_U8: return (int64_t)(uint8_t)v;
    case BP_DTYPE_I8: return (int64_t)(int8_t)v;
    case BP_DTYPE_I16: return (int64_t)(int16_t)v;
    case BP_DTYPE_I32: return (int64_t)(int32_t)v;
    case BP_DTYPE_BOOL: return v != 0;
    default: return v;
  }
}

static uint32_t new_const(bp_gpu_ew_t* p) {
  if (p->nconst >= BP_GPU_EW_MAX_CONST) {
    p->overflow = 1;
    return 0;
  }
  return p->nconst++;
}

uint8_t bp_gpu_ew_const_f(bp_gpu_ew_t* p, double f) {
  uint32_t j = new_const(p);
  if (bp_dtype_is_float(p->cdt)) p->consts[j].f = f;
  else p->consts[j].i = wrap_int(isnan(f) ? 0 : (int64_t)f, p->cdt);
  return (uint8_t)j;
}

uint8_t bp_gpu_ew_const_i(bp_gpu_ew_t* p, int64_t i) {
  uint32_t j = new_const(p);
  if (bp_dtype_is_float(p->cdt)) p->consts[j].f = (double)i;
  else p->consts[j].i = wrap_int(i, p->cdt);
  return (uint8_t)j;
}

uint8_t bp_gpu_ew_const_scalar(bp_gpu_ew_t* p, const bp_scalar_t* s, double dflt) {
  if (!s || s->kind == BP_SCALAR_NONE) return bp_gpu_ew_const_f(p, dflt);
  if (s->kind == BP_SCALAR_FLOAT) return bp_gpu_ew_const_f(p, s->v.f);
  if (s->kind == BP_SCALAR_BOOL) return bp_gpu_ew_const_i(p, s->v.b != 0);
  return bp_gpu_ew_const_i(p, s->v.i);
}

uint8_t bp_gpu_ew_load_const(bp_gpu_ew_t* p, uint8_t konst) {
  uint8_t r = ew_reg(p);
  bp_gpu_ew_emit(p, BP_EW_LOAD_CONST, r, konst, 0, 0, 0);
  return r;
}

uint8_t bp_gpu_ew_load_input(bp_gpu_ew_t* p, uint32_t input) {
  uint8_t r = ew_reg(p);
  bp_gpu_ew_emit(p, BP_EW_LOAD_INPUT, r, (uint8_t)input, 0, 0, 0);
  return r;
}

uint8_t bp_gpu_ew_op(bp_gpu_ew_t* p, uint32_t opc, uint8_t a, uint8_t b, uint8_t c, uint32_t aux) {
  uint8_t r = ew_reg(p);
  bp_gpu_ew_emit(p, opc, r, a, b, c, aux);
  return r;
}

void bp_gpu_ew_store(bp_gpu_ew_t* p, uint32_t output, uint8_t reg) {
  bp_gpu_ew_emit(p, BP_EW_STORE, 0, (uint8_t)output, reg, 0, 0);
}

void bp__gpu_grid_1d(const bp_gpu_device_caps_t* caps, uint64_t groups, uint32_t local, bp_gpu_launch_t* l) {
  uint64_t maxg = caps && caps->max_groups ? caps->max_groups : 65535;
  if (groups > maxg) groups = maxg;
  if (groups == 0) groups = 1;
  l->global[0] = groups * local;
  l->global[1] = l->global[2] = 1;
  l->local[0] = local;
  l->local[1] = l->local[2] = 1;
}

bp_status_t bp_gpu_ew_space(const bp_gpu_ew_t* p, bp_gpu_ew_space_t* sp) {
  memset(sp, 0, sizeof *sp);
  if (p->overflow) return BP_KIT_ERROR(BP_INTERNAL, "elementwise program exceeds the kernel's limits");
  uint32_t nops = p->nin + p->nout;
  if (p->nout == 0 || nops > BP_GPU_EW_MAX_OPERANDS)
    return BP_KIT_ERROR(BP_INVALID_ARGUMENT, "elementwise program with %u inputs, %u outputs", p->nin, p->nout);
  sp->nops = nops;
  for (uint32_t k = 0; k < p->nin; k++) sp->operands[k] = p->in[k];
  for (uint32_t k = 0; k < p->nout; k++) sp->operands[p->nin + k] = p->out[k];
  const bp_tensor_desc_t* o = p->out[0];
  if (o->rank > BP_MAX_RANK) return BP_KIT_ERROR(BP_INVALID_ARGUMENT, "output rank %u > %d", o->rank, BP_MAX_RANK);
  int64_t numel = 1;
  for (uint32_t d = 0; d < o->rank; d++) numel *= o->sizes[d];
  sp->numel = numel;
  if (numel == 0) return BP_OK;
  int ndim = (int)o->rank;
  int64_t* sizes = sp->sizes;
  for (int d = 0; d < ndim; d++) sizes[d] = o->sizes[d];
  for (uint32_t k = 0; k < nops; k++) {
    const bp_tensor_desc_t* t = sp->operands[k];
    if (t->rank > o->rank)
      return BP_KIT_ERROR(BP_INVALID_ARGUMENT, "elementwise operand of rank %u > output rank %u", t->rank, o->rank);
    int lead = ndim - (int)t->rank;
    for (int d = 0; d < ndim; d++) {
      if (d < lead) {
        sp->strides[k][d] = 0;
        continue;
      }
      int64_t sz = t->sizes[d - lead];
      if (sz == sizes[d]) sp->strides[k][d] = sizes[d] == 1 ? 0 : t->strides[d - lead];
      else if (sz == 1) sp->strides[k][d] = 0;
      else
        return BP_KIT_ERROR(BP_INVALID_ARGUMENT, "operand size %lld does not broadcast to %lld in dim %d",
                            (long long)sz, (long long)sizes[d], d);
    }
  }
  /* Drop size-1 dims; merge dims contiguous for every operand. */
  int nd = 0;
  for (int d = 0; d < ndim; d++) {
    if (sizes[d] == 1) continue;
    if (nd > 0) {
      int merge = 1;
      for (uint32_t k = 0; k < nops && merge; k++) merge = sp->strides[k][nd - 1] == sp->strides[k][d] * sizes[d];
      if (merge) {
        sizes[nd - 1] *= sizes[d];
        for (uint32_t k = 0; k < nops; k++) sp->strides[k][nd - 1] = sp->strides[k][d];
        continue;
      }
    }
    sizes[nd] = sizes[d];
    for (uint32_t k = 0; k < nops; k++) sp->strides[k][nd] = sp->strides[k][d];
    nd++;
  }
  if (nd == 0) {
    nd = 1;
    sizes[0] = 1;
    for (uint32_t k = 0; k < nops; k++) sp->strides[k][0] = 0;
  }
  int contig = nd == 1;
  for (uint32_t k = 0; k < nops && contig; k++) contig = sp->strides[k][0] == 1;
  sp->rank = nd;
  sp->contiguous = contig;
  return BP_OK;
}

bp_status_t bp_gpu_ew_pack(const bp_gpu_device_caps_t* caps, const bp_gpu_ew_t* p,
                           bp_gpu_launch_t* l, int* out_empty) {
  *out_empty = 0;
  int prog = bp_gpu_ew_variant(p->cdt);
  if (prog < 0 && !p->overflow)
    return BP_KIT_ERROR(BP_UNIMPLEMENTED, "no elementwise kernel for compute dtype %s", bp_dtype_name(p->cdt));
  bp_gpu_ew_space_t sp;
  bp_status_t st = bp_gpu_ew_space(p, &sp);
  if (st) return st;
  if (sp.numel == 0) {
    *out_empty = 1;
    return BP_OK;
  }
  memset(l, 0, sizeof *l);
  bp_gpu_ew_args_t* a = &l->args.ew;
  l->program = (uint32_t)prog;
  l->num_operands = BP_GPU_EW_MAX_OPERANDS;
  a->numel = sp.numel;
  a->rank = (uint32_t)sp.rank;
  a->nin = p->nin;
  a->nout = p->nout;
  a->ninstr = p->ninstr;
  a->contiguous = (uint32_t)sp.contiguous;
  a->cdt = p->cdt;
  for (int d = 0; d < sp.rank; d++) a->sizes[d] = sp.sizes[d];
  for (uint32_t k = 0; k < sp.nops; k++) {
    l->operands[k] = sp.operands[k];
    a->byte_offset[k] = (int64_t)sp.operands[k]->byte_offset;
    a->dtypes[k] = sp.operands[k]->dtype;
    for (int d = 0; d < sp.rank; d++) a->strides[k][d] = sp.strides[k][d];
  }
  for (uint32_t i = 0; i < p->ninstr; i++) {
    a->instrs[i][0] = p->ins[i].opcode;
    a->instrs[i][1] = p->ins[i].dst | ((uint32_t)p->ins[i].a << 8) | ((uint32_t)p->ins[i].b << 16) |
                      ((uint32_t)p->ins[i].c << 24);
    a->instrs[i][2] = p->ins[i].aux;
  }
  for (uint32_t j = 0; j < p->nconst; j++) memcpy(&a->consts[j], &p->consts[j], 8);
  l->args_size = sizeof *a;
  bp__gpu_grid_1d(caps, ((uint64_t)sp.numel + 255) / 256, 256, l);
  return BP_OK;
}

bp_status_t bp_gpu_ew_launch(const bp_gpu_device_caps_t* caps, const bp_gpu_ew_t* p,
                             bp_gpu_launch_fn launch, void* ctx) {
  if (caps && caps->ew_launch) return caps->ew_launch(ctx, p);
  bp_gpu_launch_t l;
  int empty;
  bp_status_t st = bp_gpu_ew_pack(caps, p, &l, &empty);
  if (st || empty) return st;
  return launch(ctx, &l);
}

bp_status_t bp_gpu_ew_copy(const bp_gpu_device_caps_t* caps, const bp_tensor_desc_t* dst,
                           const bp_tensor_desc_t* src, bp_gpu_launch_fn launch, void* ctx) {
  bp_gpu_ew_t p;
  /* Registers hold the source exactly: f16/bf16 in f32, integers in int64. */
  bp_gpu_ew_init(&p, src->dtype);
  uint32_t i = bp_gpu_ew_input(&p, src);
  uint32_t o = bp_gpu_ew_output(&p, dst);
  bp_gpu_ew_store(&p, o, bp_gpu_ew_load_input(&p, i));
  return bp_gpu_ew_launch(caps, &p, launch, ctx);
}
