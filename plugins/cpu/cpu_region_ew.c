/* backplane CPU plugin: compiled elementwise programs.
 *
 * A bp_ew_program_t is resolved once into a list of kernel calls: each
 * op instruction is the dense elementwise kernel of cpu_ew.c for the
 * program's kernel type, called on a tile of CPU_EWP_TILE elements held in
 * register buffers that stay in L1. A run walks the outputs' iteration
 * space (collapsed over every operand) row by row and tile by tile, split
 * over the pool: each input element is read once and each output element
 * written once however long the program, and no instruction dispatches per
 * element. Contiguous inputs of the kernel type are read in place (the
 * register is a pointer into the input); others are converted into the
 * register buffer.
 *
 * f32 programs of plain arithmetic run as one machine-code loop instead
 * (cpu_ewp_jit.h) wherever their operands are contiguous or broadcast
 * along the rows, compiled on the first run for each broadcast pattern.
 */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "cpu_ewp_jit.h"
#include "cpu_region_ew.h"
#include "cpu_stream_store.h"

/* Elements per tile: a register of f32 is 4 KiB, so a chain's live
 * registers stay in L1 while each instruction is one vectorized loop long
 * enough to amortize its call. */
#define CPU_EWP_TILE 1024
/* Tile of the fallback when the scratch cannot be allocated (on the stack). */
#define CPU_EWP_SMALL_TILE 64
#define CPU_EWP_GRAIN 32768
#define CPU_EWP_MAX_OPS (CPU_EWP_MAX_INPUTS + CPU_EWP_MAX_OUTPUTS)

enum { EWP_LOAD, EWP_CONST, EWP_STORE, EWP_CAST, EWP_OP };

typedef struct ewp_instr {
  uint8_t kind;
  uint8_t dst;      /* physical buffer written (LOAD, CAST, OP) */
  uint8_t reg;      /* logical register written (LOAD, CONST, CAST, OP) */
  uint8_t src[3];   /* logical registers read */
  uint8_t index;    /* LOAD: input, CONST: constant, STORE: output */
  uint8_t result_bool;
  uint8_t direct_out; /* OP: 1 + the output it may write in place (its only STORE), or 0 */
  uint32_t dtype;   /* CAST: the dtype rounded through */
  cpu_ew_fn fn;
  cpu_kparams_t params;
} ewp_instr_t;

/* Compiled loops kept per program: one per broadcast pattern met. */
#define CPU_EWP_JIT_VARIANTS 4
/* Elements from which a program launched once (launch_ew_program) is
 * compiled to machine code: below, the interpreter finishes sooner than
 * the mapping is made. Regions keep their loops and compile at any size. */
#define CPU_EWP_JIT_ONE_SHOT_MIN (INT64_C(1) << 20)

struct cpu_ewp {
  int kt;
  uint32_t esize;
  uint32_t nin, nout, nbuf, ninstr, nconst;
  uint32_t nops; /* EWP_OP instructions */
  ewp_instr_t ins[CPU_EWP_MAX_INSTRS];
  unsigned char* consts; /* constant k at consts + k * TILE * esize */
  /* The machine-code loops (cpu_ewp_jit.h): jit_ok when every instruction
   * has one; variants compiled on first use under jit_mu (a NULL loop
   * records a pattern that could not be compiled). */
  int jit_ok;
  cpu_ewp_jit_instr_t jins[CPU_EWP_MAX_INSTRS];
  pthread_mutex_t jit_mu;
  uint32_t njit, jit_mask[CPU_EWP_JIT_VARIANTS];
  cpu_ewp_jit_t* jit[CPU_EWP_JIT_VARIANTS];
};

void cpu_ewp_free(cpu_ewp_t* p) {
  if (!p) return;
  for (uint32_t v = 0; v < p->njit; v++) cpu_ewp_jit_free(p->jit[v]);
  pthread_mutex_destroy(&p->jit_mu);
  free(p->consts);
  free(p);
}

static int fail(char* msg, size_t cap, int reason, const char* fmt, unsigned a, unsigned b) {
  bp_plugin_format(msg, cap, 0, fmt, a, b);
  return reason;
}

/* Direct stores: when output k is stored exactly once, from a register
 * whose last writer before the STORE is an op with a result of the kernel
 * type, that op writes output k's memory itself (when the run finds it
 * contiguous in the kernel dtype and no input shares memory with an
 * output), and the STORE's copy disappears. Later instructions that read
 * the register read it back from the output, still in cache. */
static void mark_direct_outputs(cpu_ewp_t* p) {
  uint32_t stores[CPU_EWP_MAX_OUTPUTS] = {0};
  for (uint32_t i = 0; i < p->ninstr; i++)
    if (p->ins[i].kind == EWP_STORE && p->ins[i].index < CPU_EWP_MAX_OUTPUTS) stores[p->ins[i].index]++;
  for (uint32_t i = 0; i < p->ninstr; i++) {
    const ewp_instr_t* s = &p->ins[i];
    if (s->kind != EWP_STORE || s->index >= CPU_EWP_MAX_OUTPUTS || stores[s->index] != 1) continue;
    for (uint32_t w = i; w-- > 0;) {
      ewp_instr_t* e = &p->ins[w];
      if (e->kind == EWP_STORE || e->reg != s->src[0]) continue;
      if (e->kind == EWP_OP && !e->result_bool && !e->direct_out) e->direct_out = (uint8_t)(s->index + 1);
      break;
    }
  }
}

int cpu_ewp_compile(const bp_ew_program_t* prog, cpu_ewp_t** out, char* msg, size_t cap) {
  *out = NULL;
  if (prog->num_inputs > CPU_EWP_MAX_INPUTS || prog->num_outputs > CPU_EWP_MAX_OUTPUTS)
    return fail(msg, cap, BP_SUPPORT_SIZE, "%u inputs or %u outputs over the CPU's limits (16, 8)",
                prog->num_inputs, prog->num_outputs);
  if (prog->num_registers > CPU_EWP_MAX_REGISTERS || prog->num_instrs > CPU_EWP_MAX_INSTRS)
    return fail(msg, cap, BP_SUPPORT_SIZE, "%u registers or %u instructions over the CPU's limits (32, 128)",
                prog->num_registers, prog->num_instrs);
  if (!(cpu_ewp_dtype_mask() & BP_DTYPE_BIT(prog->compute_dtype)))
    return fail(msg, cap, BP_SUPPORT_DTYPE, "no programs in compute dtype %u (instructions: %u)",
                prog->compute_dtype, prog->num_instrs);
  cpu_ewp_t* p = calloc(1, sizeof *p);
  if (!p) return -1;
  pthread_mutex_init(&p->jit_mu, NULL);
  p->kt = cpu_kt_natural(prog->compute_dtype);
  p->nconst = prog->num_constants;
  p->esize = cpu_kt_size[p->kt];
  p->nin = prog->num_inputs;
  p->nout = prog->num_outputs;
  p->ninstr = prog->num_instrs;
  if (prog->num_constants) {
    p->consts = malloc((size_t)prog->num_constants * CPU_EWP_TILE * p->esize);
    if (!p->consts) {
      free(p);
      return -1;
    }
    for (uint32_t k = 0; k < prog->num_constants; k++) {
      unsigned char* c = p->consts + (size_t)k * CPU_EWP_TILE * p->esize;
      cpu_scalar_to_kt(&prog->constants[k], p->kt, c);
      for (uint32_t i = 1; i < CPU_EWP_TILE; i++) memcpy(c + i * p->esize, c, p->esize);
    }
  }
  /* Physical buffers: two per logical register, so an instruction that
   * overwrites a register it reads writes the other one (the kernels take
   * restrict pointers). */
  uint8_t phys[CPU_EWP_MAX_REGISTERS];
  for (uint32_t r = 0; r < CPU_EWP_MAX_REGISTERS; r++) phys[r] = (uint8_t)(2 * r);
  p->nbuf = 2 * (prog->num_registers ? prog->num_registers : 1);
  p->jit_ok = p->kt == CPU_KT_F32 && cpu_ewp_jit_enabled() &&
              prog->num_registers <= CPU_EWP_JIT_MAX_REGISTERS &&
              prog->num_inputs + prog->num_outputs <= CPU_EWP_JIT_MAX_OPERANDS &&
              prog->num_constants <= CPU_EWP_MAX_INSTRS;
  for (uint32_t i = 0; i < prog->num_instrs; i++) {
    const bp_ew_instr_t* in = BP_EW_INSTR_AT(prog, i);
    ewp_instr_t* e = &p->ins[i];
    p->jins[i] = (cpu_ewp_jit_instr_t){in->opcode, in->dst, {in->a, in->b, in->c}, in->a};
    p->jit_ok = p->jit_ok && cpu_ewp_jit_op_ok(in->opcode, in->aux);
    e->reg = in->dst;
    e->src[0] = in->a;
    e->src[1] = in->b;
    e->src[2] = in->c;
    int reads_dst = 0;
    switch (in->opcode) {
      case BP_EW_LOAD_INPUT: e->kind = EWP_LOAD; e->index = in->a; break;
      case BP_EW_LOAD_CONST: e->kind = EWP_CONST; e->index = in->a; break;
      case BP_EW_STORE: e->kind = EWP_STORE; e->index = in->a; e->src[0] = in->b; break;
      case BP_EW_CAST:
        e->kind = EWP_CAST;
        e->dtype = in->aux;
        if (!cpu_dtype_has_kernels(in->aux)) {
          cpu_ewp_free(p);
          return fail(msg, cap, BP_SUPPORT_DTYPE, "instruction %u casts through dtype %u", i, in->aux);
        }
        reads_dst = in->a == in->dst;
        break;
      default: {
        e->kind = EWP_OP;
        p->nops++;
        int rb = 0;
        int reason = cpu_ew_program_kernel(in->opcode, in->aux, p->kt, &e->fn, &e->params, &rb);
        if (reason) {
          cpu_ewp_free(p);
          return fail(msg, cap, reason, "instruction %u: op %u has no CPU program kernel for this "
                      "compute dtype and aux", i, in->opcode);
        }
        e->result_bool = (uint8_t)(rb && p->kt != CPU_KT_BOOL);
        reads_dst = in->a == in->dst || in->b == in->dst || in->c == in->dst;
        break;
      }
    }
    if (e->kind != EWP_STORE) {
      if (reads_dst) phys[in->dst] ^= 1u;
      e->dst = phys[in->dst];
    }
  }
  mark_direct_outputs(p);
  *out = p;
  return 0;
}

/* ---- running ------------------------------------------------------------ */
typedef struct ewp_job {
  const cpu_ewp_t* p;
  int ndim, nops; /* operands: outputs 0..nout-1, then inputs */
  int64_t sizes[BP_MAX_RANK];
  int64_t strides[CPU_EWP_MAX_OPS][BP_MAX_RANK];
  unsigned char* base[CPU_EWP_MAX_OPS];
  uint32_t dtype[CPU_EWP_MAX_OPS];
  uint32_t es[CPU_EWP_MAX_OPS];
  uint8_t direct[CPU_EWP_MAX_OPS]; /* inputs: readable in place (kernel dtype, no output overlap) */
  uint8_t staged[CPU_EWP_MAX_OPS]; /* inputs sharing memory with an output: read at each tile's start */
  uint8_t stream[CPU_EWP_MAX_OUTPUTS]; /* outputs written with streaming stores (cpu_stream_store.h) */
  uint8_t any_stream;
  /* Inputs read in place and too large for this core's share of the cache:
   * each op instruction of a tile prefetches its slice of their next tile,
   * so their lines are requested while the tile computes, a few at a time
   * (prefetching a whole tile at once stalls on the fill buffers). */
  uint8_t prefetch[CPU_EWP_MAX_OPS];
  uint8_t any_prefetch;
  /* The machine-code loop for this run's operands, or NULL; jit_stream:
   * its streaming entry (every output streams). */
  cpu_ewp_jit_fn jit, jit_stream_fn;
  int jit_stream;
} ewp_job_t;

/* Requests lines [lo, hi) of the next tile of each prefetched input. */
static void ewp_prefetch(const ewp_job_t* j, unsigned char* const* ptr, size_t tile_bytes, size_t lo,
                         size_t hi) {
  for (int k = (int)j->p->nout; k < j->nops; k++) {
    if (!j->prefetch[k]) continue;
    const unsigned char* next = ptr[k] + tile_bytes;
    for (size_t l = lo; l < hi; l++) __builtin_prefetch(next + l * 64, 0, 3);
  }
}

/* One tile of n elements; ptr/st per operand (st in elements). `more`: the
 * row holds another tile after this one (for prefetching). */
static void ewp_tile(const ewp_job_t* j, unsigned char* const* ptr, const int64_t* st, int64_t n, int more,
                     unsigned char* bufs, size_t bsz, unsigned char* tmp) {
  const cpu_ewp_t* p = j->p;
  /* Inputs over an output are read into their staging buffers (after the
   * registers) before any instruction, so no store of this tile, direct or
   * not, reaches them before a later LOAD does. */
  unsigned char* stage = bufs + bsz * p->nbuf;
  for (uint32_t i = 0; i < p->nin; i++) {
    int k = (int)p->nout + (int)i;
    if (j->staged[k]) cpu_load[p->kt](stage + bsz * i, ptr[k], st[k], n, j->dtype[k]);
  }
  const void* rp[CPU_EWP_MAX_REGISTERS];
  const uint32_t kdt = cpu_kt_dtype[p->kt];
  const int prefetch = more && j->any_prefetch;
  const size_t tile_bytes = (size_t)n * p->esize, lines = (tile_bytes + 63) / 64;
  uint32_t op_no = 0;
  for (uint32_t i = 0; i < p->ninstr; i++) {
    const ewp_instr_t* e = &p->ins[i];
    if (prefetch && e->kind == EWP_OP) {
      ewp_prefetch(j, ptr, tile_bytes, lines * op_no / p->nops, lines * (op_no + 1) / p->nops);
      op_no++;
    }
    unsigned char* dst = bufs + e->dst * bsz;
    switch (e->kind) {
      case EWP_LOAD: {
        int k = (int)p->nout + e->index;
        if (j->staged[k]) {
          rp[e->reg] = stage + bsz * e->index;
        } else if (j->direct[k] && st[k] == 1) {
          rp[e->reg] = ptr[k];
        } else {
          cpu_load[p->kt](dst, ptr[k], st[k], n, j->dtype[k]);
          rp[e->reg] = dst;
        }
        break;
      }
      case EWP_CONST: rp[e->reg] = p->consts + (size_t)e->index * CPU_EWP_TILE * p->esize; break;
      case EWP_STORE: {
        int k = e->index;
        if (rp[e->src[0]] == ptr[k]) break; /* written in place by its op */
        if (j->stream[k]) cpu_stream_copy(ptr[k], rp[e->src[0]], (size_t)n * p->esize);
        else if (st[k] == 1 && j->dtype[k] == kdt) memcpy(ptr[k], rp[e->src[0]], (size_t)n * p->esize);
        else cpu_store[p->kt](ptr[k], st[k], rp[e->src[0]], n, j->dtype[k]);
        break;
      }
      case EWP_CAST:
        cpu_store[p->kt](tmp, 1, rp[e->src[0]], n, e->dtype);
        cpu_load[p->kt](dst, tmp, 1, n, e->dtype);
        rp[e->reg] = dst;
        break;
      default: {
        const void* in[3] = {rp[e->src[0]], rp[e->src[1]], rp[e->src[2]]};
        if (e->direct_out) {
          int k = e->direct_out - 1;
          if (st[k] == 1 && j->dtype[k] == kdt && !j->stream[k]) dst = ptr[k];
        }
        if (e->result_bool) {
          e->fn(tmp, in, n, &e->params);
          cpu_load[p->kt](dst, tmp, 1, n, BP_DTYPE_BOOL);
        } else {
          e->fn(dst, in, n, &e->params);
        }
        rp[e->reg] = dst;
        break;
      }
    }
  }
}

/* Moves every operand's pointer `count` elements along the row. */
static void ewp_advance(const ewp_job_t* j, unsigned char** ptr, const int64_t* st, int64_t count) {
  for (int k = 0; k < j->nops; k++) ptr[k] += count * st[k] * (int64_t)j->es[k];
}

/* Runs the machine-code loop over the row at ptr (n elements), advancing
 * ptr past what it did; returns the elements done (the tail of fewer than
 * 16 is the tiles'). Streaming stores need aligned outputs: the head up to
 * the outputs' first 64-byte boundary runs as a tile, or, where the
 * outputs are not aligned alike, ordinary stores do the row. */
static int64_t ewp_jit_row(const ewp_job_t* j, unsigned char** ptr, const int64_t* st, int64_t n,
                           unsigned char* bufs, size_t bsz, unsigned char* tmp) {
  int64_t head = 0;
  int streaming = j->jit_stream;
  if (streaming) {
    uintptr_t mis = (uintptr_t)ptr[0] & 63u;
    for (uint32_t o = 1; o < j->p->nout; o++) streaming &= ((uintptr_t)ptr[o] & 63u) == mis;
    streaming &= mis % 4u == 0;
    if (streaming && mis) {
      head = (int64_t)(64u - mis) / 4 < n ? (int64_t)(64u - mis) / 4 : n;
      ewp_tile(j, ptr, st, head, 1, bufs, bsz, tmp);
      ewp_advance(j, ptr, st, head);
    }
  }
  int64_t body = (n - head) & ~(int64_t)15;
  if (body == 0) return head;
  cpu_ewp_jit_fn fn = streaming ? j->jit_stream_fn : j->jit;
  fn(ptr, body * 4);
  ewp_advance(j, ptr, st, body);
  return head + body;
}

static void ewp_range(void* ctx, int64_t begin, int64_t end) {
  const ewp_job_t* j = ctx;
  /* Buffers of this range, a tile each in the kernel type: nbuf registers,
   * one staging buffer per input, then one tile of the widest dtype for
   * casts. From the heap (up to 650 KiB), or a small tile on the stack
   * when that fails. */
  int64_t tile = end - begin < CPU_EWP_TILE ? end - begin : CPU_EWP_TILE;
  size_t bsz = ((size_t)tile * j->p->esize + 63) & ~(size_t)63;
  size_t tmp_bytes = ((size_t)tile * CPU_KT_MAX_BYTES + 63) & ~(size_t)63;
  unsigned char* heap = aligned_alloc(64, bsz * (j->p->nbuf + j->p->nin) + tmp_bytes);
  _Alignas(64) unsigned char
      small[(2 * CPU_EWP_MAX_REGISTERS + CPU_EWP_MAX_INPUTS + 1) * CPU_EWP_SMALL_TILE * CPU_KT_MAX_BYTES];
  unsigned char* bufs = heap;
  if (!heap) {
    tile = CPU_EWP_SMALL_TILE;
    bsz = (size_t)CPU_EWP_SMALL_TILE * CPU_KT_MAX_BYTES;
    bufs = small;
  }
  unsigned char* tmp = bufs + bsz * (j->p->nbuf + j->p->nin);
  const int last = j->ndim - 1;
  const int64_t inner = j->sizes[last];
  unsigned char* ptr[CPU_EWP_MAX_OPS];
  int64_t st[CPU_EWP_MAX_OPS];
  for (int k = 0; k < j->nops; k++) st[k] = j->strides[k][last];
  for (int64_t pos = begin; pos < end;) {
    int64_t row = pos / inner, col = pos % inner;
    int64_t n = inner - col < end - pos ? inner - col : end - pos;
    /* Offsets of this row's first element. */
    int64_t off[CPU_EWP_MAX_OPS];
    for (int k = 0; k < j->nops; k++) off[k] = col * st[k];
    int64_t rem = row;
    for (int d = last - 1; d >= 0; d--) {
      int64_t idx = rem % j->sizes[d];
      rem /= j->sizes[d];
      for (int k = 0; k < j->nops; k++) off[k] += idx * j->strides[k][d];
    }
    for (int k = 0; k < j->nops; k++) ptr[k] = j->base[k] + off[k] * (int64_t)j->es[k];
    int64_t t = j->jit ? ewp_jit_row(j, ptr, st, n, bufs, bsz, tmp) : 0;
    for (; t < n; t += tile) {
      int64_t cnt = n - t < tile ? n - t : tile;
      ewp_tile(j, ptr, st, cnt, t + cnt < n, bufs, bsz, tmp);
      ewp_advance(j, ptr, st, cnt);
    }
    pos += n;
  }
  if (j->any_stream) cpu_stream_fence(); /* before the pool reports this range done */
  free(heap);
}

/* The compiled loop of this run, from the program's variants (compiled
 * here on a pattern's first run): every operand f32, the inputs read in
 * place contiguous or broadcast along the (collapsed) rows, the outputs
 * contiguous. */
static void ewp_choose_jit(ewp_job_t* j) {
  cpu_ewp_t* p = (cpu_ewp_t*)j->p; /* only its variant cache changes, under jit_mu */
  if (!p->jit_ok) return;
  const int last = j->ndim - 1;
  uint32_t mask = 0;
  int all_stream = 1;
  for (int k = 0; k < j->nops; k++) {
    int64_t s = j->strides[k][last];
    if (j->dtype[k] != BP_DTYPE_F32) return;
    if (k < (int)p->nout) {
      if (s != 1) return;
      all_stream &= j->stream[k];
    } else {
      if (!j->direct[k] || (s != 0 && s != 1)) return;
      if (s == 0) mask |= 1u << (k - (int)p->nout);
    }
  }
  cpu_ewp_jit_t* code = NULL;
  pthread_mutex_lock(&p->jit_mu);
  uint32_t v = 0;
  while (v < p->njit && p->jit_mask[v] != mask) v++;
  if (v < p->njit) code = p->jit[v];
  else if (v < CPU_EWP_JIT_VARIANTS) {
    float consts[CPU_EWP_MAX_INSTRS];
    for (uint32_t c = 0; c < p->nconst; c++)
      memcpy(&consts[c], p->consts + (size_t)c * CPU_EWP_TILE * p->esize, sizeof(float));
    code = cpu_ewp_jit_compile(p->jins, p->ninstr, p->nout, p->nin, consts, p->nconst, mask);
    p->jit_mask[v] = mask;
    p->jit[v] = code;
    p->njit++;
  }
  pthread_mutex_unlock(&p->jit_mu);
  if (!code) return;
  j->jit = cpu_ewp_jit_entry(code, 0);
  j->jit_stream_fn = cpu_ewp_jit_entry(code, 1);
  j->jit_stream = all_stream;
}

/* Byte range [lo, hi) of a host descriptor. */
static void desc_range(const bp_tensor_desc_t* d, uintptr_t* lo, uintptr_t* hi) {
  int64_t mn = 0, mx = 0;
  for (uint32_t i = 0; i < d->rank; i++) {
    if (d->sizes[i] == 0) {
      *lo = *hi = 0;
      return;
    }
    int64_t e = (d->sizes[i] - 1) * d->strides[i];
    if (e < 0) mn += e;
    else mx += e;
  }
  uintptr_t b = (uintptr_t)cpu_desc_ptr(d);
  uint32_t es = (uint32_t)bp_dtype_size(d->dtype);
  *lo = b + (uintptr_t)(mn * (int64_t)es);
  *hi = b + (uintptr_t)((mx + 1) * (int64_t)es);
}

bp_status_t cpu_ewp_run(const cpu_ewp_t* p, const bp_tensor_desc_t* const* inputs,
                        const bp_tensor_desc_t* const* outputs) {
  ewp_job_t j;
  memset(&j, 0, sizeof j);
  j.p = p;
  const bp_tensor_desc_t* o0 = outputs[0];
  j.nops = (int)(p->nout + p->nin);
  int rank = (int)o0->rank;
  int64_t numel = 1;
  for (int d = 0; d < rank; d++) {
    j.sizes[d] = o0->sizes[d];
    numel *= o0->sizes[d];
  }
  if (numel == 0) return BP_OK;
  for (int k = 0; k < j.nops; k++) {
    const bp_tensor_desc_t* d = k < (int)p->nout ? outputs[k] : inputs[k - (int)p->nout];
    if (d->rank > (uint32_t)rank)
      return cpu_error(BP_INVALID_ARGUMENT, "cpu: program operand %d has rank %u over the output's %d", k,
                       d->rank, rank);
    for (int dd = 0; dd < rank; dd++) {
      int di = dd - (rank - (int)d->rank);
      int64_t s = di < 0 ? 1 : d->sizes[di];
      if (s != 1 && s != o0->sizes[dd])
        return cpu_error(BP_INVALID_ARGUMENT, "cpu: program operand %d does not broadcast to the output", k);
      j.strides[k][dd] = (di < 0 || s == 1) ? 0 : d->strides[di];
    }
    j.base[k] = cpu_desc_ptr(d);
    j.dtype[k] = d->dtype;
    j.es[k] = (uint32_t)bp_dtype_size(d->dtype);
  }
  /* An input that shares memory with an output is staged (read at the
   * start of each tile, never in place): a store of the tile may overwrite
   * it before a later load. */
  for (uint32_t i = 0; i < p->nin; i++) {
    int k = (int)(p->nout + i);
    j.direct[k] = j.dtype[k] == cpu_kt_dtype[p->kt];
    uintptr_t lo, hi;
    desc_range(inputs[i], &lo, &hi);
    for (uint32_t o = 0; o < p->nout; o++) {
      uintptr_t olo, ohi;
      desc_range(outputs[o], &olo, &ohi);
      if (lo < ohi && olo < hi) j.direct[k] = 0, j.staged[k] = 1;
    }
  }
  /* Collapse: drop size-1 dims, merge neighbours contiguous for all. */
  int nd = 0;
  for (int d = 0; d < rank; d++) {
    if (j.sizes[d] == 1) continue;
    if (nd > 0) {
      int merge = 1;
      for (int k = 0; k < j.nops && merge; k++)
        merge = j.strides[k][nd - 1] == j.strides[k][d] * j.sizes[d];
      if (merge) {
        j.sizes[nd - 1] *= j.sizes[d];
        for (int k = 0; k < j.nops; k++) j.strides[k][nd - 1] = j.strides[k][d];
        continue;
      }
    }
    j.sizes[nd] = j.sizes[d];
    for (int k = 0; k < j.nops; k++) j.strides[k][nd] = j.strides[k][d];
    nd++;
  }
  if (nd == 0) {
    nd = 1;
    j.sizes[0] = 1;
    for (int k = 0; k < j.nops; k++) j.strides[k][0] = 0;
  }
  j.ndim = nd;
  /* Outputs over this core's share of the cache, dense in the kernel
   * dtype after collapsing, are streamed: nothing re-reads them soon
   * enough to profit from the read for ownership. */
  size_t stream_min = cpu_stream_threshold();
  for (uint32_t o = 0; o < p->nout; o++) {
    uint64_t bytes = (uint64_t)numel * j.es[o];
    int dense = j.dtype[o] == cpu_kt_dtype[p->kt] && j.strides[o][nd - 1] == 1;
    for (int d = nd - 1; dense && d > 0; d--) dense = j.strides[o][d - 1] == j.strides[o][d] * j.sizes[d];
    j.stream[o] = (uint8_t)(dense && bytes >= stream_min);
    j.any_stream |= j.stream[o];
  }
  for (int k = (int)p->nout; k < j.nops; k++) {
    j.prefetch[k] = (uint8_t)(j.direct[k] && !j.staged[k] && j.strides[k][nd - 1] == 1 &&
                              (uint64_t)numel * j.es[k] >= stream_min);
    j.any_prefetch |= j.prefetch[k];
  }
  ewp_choose_jit(&j);
  if (numel < CPU_EWP_GRAIN) ewp_range(&j, 0, numel);
  else cpu_parallel_for(numel, CPU_EWP_GRAIN, ewp_range, &j);
  return BP_OK;
}

/* ---- declarations ------------------------------------------------------- */
#define CPU_EWP_OPCODE_WORDS ((BP_OP_COUNT + 63) / 64)
static uint64_t k_opcode_mask[CPU_EWP_OPCODE_WORDS];
static pthread_once_t k_mask_once = PTHREAD_ONCE_INIT;
static void init_mask(void) {
  static const int kts[] = {CPU_KT_F32, CPU_KT_I64, CPU_KT_BOOL};
  for (uint32_t op = 1; op < BP_OP_COUNT; op++) {
    for (size_t t = 0; t < sizeof kts / sizeof kts[0]; t++) {
      cpu_ew_fn fn;
      cpu_kparams_t prm;
      int rb;
      if (cpu_ew_program_kernel(op, 0, kts[t], &fn, &prm, &rb) == 0) {
        k_opcode_mask[op / 64] |= UINT64_C(1) << (op % 64);
        break;
      }
    }
  }
}

const uint64_t* cpu_ewp_opcode_mask(uint32_t* out_words) {
  pthread_once(&k_mask_once, init_mask);
  *out_words = CPU_EWP_OPCODE_WORDS;
  return k_opcode_mask;
}

uint64_t cpu_ewp_dtype_mask(void) {
  static const uint32_t d[] = {BP_DTYPE_F32, BP_DTYPE_F64, BP_DTYPE_F16, BP_DTYPE_BF16,
                               BP_DTYPE_I8,  BP_DTYPE_U8,  BP_DTYPE_I16, BP_DTYPE_I32,
                               BP_DTYPE_I64, BP_DTYPE_BOOL};
  uint64_t m = 0;
  for (size_t i = 0; i < sizeof d / sizeof d[0]; i++) m |= BP_DTYPE_BIT(d[i]);
  return m;
}

/* ---- launch_ew_program --------------------------------------------------- */
typedef struct ewp_launch {
  cpu_ewp_t* prog;
  uint32_t nin, nout;
  bp_tensor_desc_t descs[CPU_EWP_MAX_OPS];
  const bp_tensor_desc_t* ptrs[CPU_EWP_MAX_OPS];
} ewp_launch_t;

static bp_status_t ewp_launch_run(void* user) {
  ewp_launch_t* l = user;
  bp_status_t st = cpu_ewp_run(l->prog, l->ptrs, l->ptrs + l->nin);
  cpu_ewp_free(l->prog);
  free(l);
  return st;
}

bp_status_t cpu_launch_ew_program(bpp_stream_t stream, const bp_ew_program_t* program,
                                  uint32_t num_inputs, const bp_tensor_desc_t* const* inputs,
                                  uint32_t num_outputs, const bp_tensor_desc_t* const* outputs) {
  if (!stream || !program || (num_inputs && !inputs) || !outputs || num_outputs == 0)
    return cpu_error(BP_INVALID_ARGUMENT, "cpu: launch_ew_program: NULL argument");
  if (program->num_inputs != num_inputs || program->num_outputs != num_outputs)
    return cpu_error(BP_INVALID_ARGUMENT, "cpu: launch_ew_program: operand counts disagree with the program");
  char msg[200];
  cpu_ewp_t* prog = NULL;
  int reason = cpu_ewp_compile(program, &prog, msg, sizeof msg);
  if (reason < 0) return cpu_error(BP_RESOURCE_EXHAUSTED, "cpu: launch_ew_program: out of memory");
  if (reason) return cpu_error(BP_UNIMPLEMENTED, "cpu: launch_ew_program: %s", msg);
  /* A one-shot program: compiling its machine-code loop (a mapping made
   * executable, then unmapped: tens of microseconds) pays only over a
   * large output. */
  int64_t numel = 1;
  for (uint32_t d = 0; d < outputs[0]->rank; d++) numel *= outputs[0]->sizes[d];
  if (numel < CPU_EWP_JIT_ONE_SHOT_MIN && !cpu_ewp_jit_always()) prog->jit_ok = 0;
  ewp_launch_t* l = calloc(1, sizeof *l);
  if (!l) {
    cpu_ewp_free(prog);
    return cpu_error(BP_RESOURCE_EXHAUSTED, "cpu: launch_ew_program: out of memory");
  }
  l->prog = prog;
  l->nin = num_inputs;
  l->nout = num_outputs;
  for (uint32_t k = 0; k < num_inputs + num_outputs; k++) {
    const bp_tensor_desc_t* d = k < num_inputs ? inputs[k] : outputs[k - num_inputs];
    memcpy(&l->descs[k], d, sizeof l->descs[k] < d->struct_size ? sizeof l->descs[k] : d->struct_size);
    l->descs[k].struct_size = sizeof l->descs[k];
    l->ptrs[k] = &l->descs[k];
  }
  bp_status_t st = bp_kit_stream_enqueue_host_func(stream, ewp_launch_run, l);
  if (st != BP_OK) {
    cpu_ewp_free(prog);
    free(l);
  }
  return st;
}
