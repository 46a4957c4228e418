/* backplane CPU plugin: elementwise programs compiled to AVX-512 loops
 * (cpu_ewp_jit.h). A small x86-64 encoder for the handful of instructions
 * the loops use; the encodings follow the Intel SDM, volume 2 (EVEX:
 * section 2.7). */
#include "cpu_ewp_jit.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "cpu_internal.h"

#if defined(__x86_64__) && defined(__linux__)
#include <sys/mman.h>
#include <unistd.h>

/* Registers: logical register r is zmm r; these three are the loop's own. */
enum { ZMM_ONE = 29, ZMM_ZERO = 30, ZMM_TMP = 31 };
/* General registers (encoding numbers). */
enum { RAX = 0, RCX = 1, RDX = 2, RSI = 6, RDI = 7, R8 = 8, R9 = 9, R10 = 10, R11 = 11 };
/* Where operand k's pointer lives during the loop. */
static const int k_operand_gpr[CPU_EWP_JIT_MAX_OPERANDS] = {R8, R9, R10, R11, RCX, RDX};
/* The constant table at the start of the code: these, then the program's. */
enum { TBL_ABS = 0, TBL_SIGN = 4, TBL_ONE = 8, TBL_CONSTS = 12 };
/* Bytes ahead of the loads that a streaming loop prefetches: memory
 * latency at a few GB/s per core, and more than the hardware prefetchers
 * of some virtual machines reach. */
#define JIT_PREFETCH_BYTES 1024

typedef struct jit_asm {
  uint8_t* p;
  size_t len, cap;
} jit_asm_t;

static void b1(jit_asm_t* a, unsigned v) {
  if (a->len < a->cap) a->p[a->len] = (uint8_t)v;
  a->len++; /* past cap: counted, not written (the caller sizes, then emits) */
}
static void b4(jit_asm_t* a, uint32_t v) {
  for (int i = 0; i < 4; i++) b1(a, (v >> (8 * i)) & 0xFFu);
}

/* A memory operand: [base + index + disp] (index < 0: none), or
 * [rip + disp] addressing byte `disp` of the code when rip is set. */
typedef struct jit_mem {
  int base, index, rip;
  int32_t disp;
} jit_mem_t;

enum { MAP_0F = 1, MAP_0F38 = 2 };
enum { PP_NONE = 0, PP_66 = 1 };

/* One EVEX.512.W0 instruction: reg is ModRM.reg (a zmm or k register),
 * vvvv the first source (0 when unused), then either the zmm register rm
 * or the memory operand m; aaa the opmask (merging), bcast the {1to16}
 * broadcast of a 32-bit memory operand. */
static void evex(jit_asm_t* a, int map, int pp, unsigned opc, int reg, int vvvv, int rm, const jit_mem_t* m,
                 int aaa, int bcast) {
  int r = (reg >> 3) & 1, r2 = (reg >> 4) & 1, x, b;
  if (m) {
    x = m->index >= 0 ? (m->index >> 3) & 1 : 0;
    b = m->rip ? 0 : (m->base >> 3) & 1;
  } else {
    x = (rm >> 4) & 1;
    b = (rm >> 3) & 1;
  }
  b1(a, 0x62);
  b1(a, (unsigned)((!r) << 7 | (!x) << 6 | (!b) << 5 | (!r2) << 4 | map));
  b1(a, (unsigned)((~vvvv & 15) << 3 | 4 | pp));
  b1(a, (unsigned)(2 << 5 | bcast << 4 | (!((vvvv >> 4) & 1)) << 3 | aaa));
  b1(a, opc);
  if (!m) {
    b1(a, (unsigned)(0xC0 | (reg & 7) << 3 | (rm & 7)));
  } else if (m->rip) { /* mod 00, rm 101: disp32 from the next instruction */
    b1(a, (unsigned)((reg & 7) << 3 | 5));
    b4(a, (uint32_t)(m->disp - (int32_t)(a->len + 4)));
  } else { /* mod 10 with a SIB byte: [base + index*1 + disp32] */
    b1(a, (unsigned)(0x80 | (reg & 7) << 3 | 4));
    b1(a, (unsigned)(((m->index >= 0 ? m->index : 4) & 7) << 3 | (m->base & 7)));
    b4(a, (uint32_t)m->disp);
  }
}

static jit_mem_t mem_at(int base, int index) { return (jit_mem_t){base, index, 0, 0}; }
static jit_mem_t mem_rip(int32_t at) { return (jit_mem_t){0, -1, 1, at}; }

/* Packed-single arithmetic (0F map, no prefix): d = a OP b. */
enum { OP_SQRT = 0x51, OP_ADD = 0x58, OP_MUL = 0x59, OP_SUB = 0x5C, OP_MIN = 0x5D, OP_DIV = 0x5E, OP_MAX = 0x5F };
static void ps_rrr(jit_asm_t* a, unsigned opc, int d, int x, int y) { evex(a, MAP_0F, PP_NONE, opc, d, x, y, NULL, 0, 0); }
static void movaps(jit_asm_t* a, int d, int s, int mask) { evex(a, MAP_0F, PP_NONE, 0x28, d, 0, s, NULL, mask, 0); }
static void broadcastss(jit_asm_t* a, int d, jit_mem_t m) { evex(a, MAP_0F38, PP_66, 0x18, d, 0, 0, &m, 0, 0); }

/* NaN-propagating maximum/minimum as cpu_ew.c defines them:
 * isnan(x) ? x : (isnan(y) ? y : max(x, y)). vmaxps returns its second
 * source when either is NaN (y), so only a NaN x needs the masked move. */
static void max_min(jit_asm_t* a, unsigned opc, int d, int x, int y) {
  ps_rrr(a, opc, ZMM_TMP, x, y);
  evex(a, MAP_0F, PP_NONE, 0xC2, 1, x, x, NULL, 0, 0); /* vcmpps k1, x, x, UNORD_Q */
  b1(a, 3);
  movaps(a, ZMM_TMP, x, 1);
  movaps(a, d, ZMM_TMP, 0);
}

static void rex_w_mov_load(jit_asm_t* a, int reg, int k) { /* mov reg, [rdi + 8k] */
  b1(a, (unsigned)(0x48 | ((reg >> 3) & 1) << 2));
  b1(a, 0x8B);
  b1(a, (unsigned)(0x40 | (reg & 7) << 3 | RDI));
  b1(a, (unsigned)(8 * k));
}

static void prefetch_t0(jit_asm_t* a, int base, int32_t disp) { /* prefetcht0 [base + rax + disp] */
  if (base >= 8) b1(a, 0x41);
  b1(a, 0x0F), b1(a, 0x18);
  b1(a, (unsigned)(0x80 | 1 << 3 | 4));
  b1(a, (unsigned)(RAX << 3 | (base & 7)));
  b4(a, (uint32_t)disp);
}

/* The loop over one variant: returns 0 when an instruction has no
 * encoding here (the caller interprets). */
static int emit_loop(jit_asm_t* a, const cpu_ewp_jit_instr_t* ins, uint32_t ninstr, uint32_t nout, uint32_t nin,
                     uint32_t bcast_mask, int streaming) {
  uint32_t nops = nout + nin;
  for (uint32_t k = 0; k < nops; k++) rex_w_mov_load(a, k_operand_gpr[k], (int)k);
  evex(a, MAP_0F, PP_66, 0xEF, ZMM_ZERO, ZMM_ZERO, ZMM_ZERO, NULL, 0, 0); /* vpxord: 0 */
  broadcastss(a, ZMM_ONE, mem_rip(TBL_ONE));
  b1(a, 0x48), b1(a, 0x85), b1(a, 0xF6); /* test rsi, rsi */
  b1(a, 0x0F), b1(a, 0x84);              /* jz done */
  size_t jz_at = a->len;
  b4(a, 0);
  b1(a, 0x31), b1(a, 0xC0); /* xor eax, eax */
  size_t top = a->len;
  if (streaming)
    for (uint32_t i = 0; i < nin; i++)
      if (!(bcast_mask >> i & 1)) prefetch_t0(a, k_operand_gpr[nout + i], JIT_PREFETCH_BYTES);
  for (uint32_t i = 0; i < ninstr; i++) {
    const cpu_ewp_jit_instr_t* e = &ins[i];
    int d = e->dst, x = e->src[0], y = e->src[1];
    switch (e->opcode) {
      case BP_EW_LOAD_INPUT: {
        int g = k_operand_gpr[nout + e->index];
        if (bcast_mask >> e->index & 1) broadcastss(a, d, mem_at(g, -1));
        else {
          jit_mem_t m = mem_at(g, RAX);
          evex(a, MAP_0F, PP_NONE, 0x10, d, 0, 0, &m, 0, 0); /* vmovups */
        }
        break;
      }
      case BP_EW_LOAD_CONST: broadcastss(a, d, mem_rip(TBL_CONSTS + 4 * e->index)); break;
      case BP_EW_STORE: {
        jit_mem_t m = mem_at(k_operand_gpr[e->index], RAX);
        evex(a, MAP_0F, PP_NONE, streaming ? 0x2B : 0x11, y, 0, 0, &m, 0, 0); /* vmovntps / vmovups */
        break;
      }
      case BP_OP_add: ps_rrr(a, OP_ADD, d, x, y); break;
      case BP_OP_sub: ps_rrr(a, OP_SUB, d, x, y); break;
      case BP_OP_mul: ps_rrr(a, OP_MUL, d, x, y); break;
      case BP_OP_div: ps_rrr(a, OP_DIV, d, x, y); break;
      case BP_OP_sqrt: ps_rrr(a, OP_SQRT, d, 0, x); break;
      case BP_OP_reciprocal: ps_rrr(a, OP_DIV, d, ZMM_ONE, x); break;
      /* x < 0 ? 0 : x; vmaxps(0, x) gives x for NaN and -0 too */
      case BP_OP_relu: ps_rrr(a, OP_MAX, d, ZMM_ZERO, x); break;
      case BP_OP_maximum: max_min(a, OP_MAX, d, x, y); break;
      case BP_OP_minimum: max_min(a, OP_MIN, d, x, y); break;
      case BP_OP_abs: { /* vpandd d, x, [abs mask]{1to16} */
        jit_mem_t m = mem_rip(TBL_ABS);
        evex(a, MAP_0F, PP_66, 0xDB, d, x, 0, &m, 0, 1);
        break;
      }
      case BP_OP_neg: { /* vpxord d, x, [sign bit]{1to16} */
        jit_mem_t m = mem_rip(TBL_SIGN);
        evex(a, MAP_0F, PP_66, 0xEF, d, x, 0, &m, 0, 1);
        break;
      }
      default: return 0;
    }
  }
  b1(a, 0x48), b1(a, 0x05), b4(a, 64);   /* add rax, 64 */
  b1(a, 0x48), b1(a, 0x39), b1(a, 0xF0); /* cmp rax, rsi */
  b1(a, 0x0F), b1(a, 0x82);              /* jb top */
  b4(a, (uint32_t)((int64_t)top - (int64_t)(a->len + 4)));
  size_t done = a->len;
  if (jz_at + 4 <= a->cap) {
    uint32_t rel = (uint32_t)(done - (jz_at + 4));
    memcpy(a->p + jz_at, &rel, 4);
  }
  b1(a, 0xC5), b1(a, 0xF8), b1(a, 0x77); /* vzeroupper */
  b1(a, 0xC3);                           /* ret */
  return 1;
}

struct cpu_ewp_jit {
  uint8_t* code;
  size_t bytes;
  size_t entry[2]; /* offsets: ordinary stores, streaming stores */
};

/* The table, then both loops, each 64-byte aligned; returns 0 when an
 * instruction cannot be encoded. a->len is the size needed. */
static int emit_all(jit_asm_t* a, const cpu_ewp_jit_instr_t* ins, uint32_t ninstr, uint32_t nout, uint32_t nin,
                    const float* consts, uint32_t nconst, uint32_t bcast_mask, size_t entry[2]) {
  const uint32_t words[3] = {0x7FFFFFFFu, 0x80000000u, 0x3F800000u};
  for (int i = 0; i < 3; i++) b4(a, words[i]);
  for (uint32_t c = 0; c < nconst; c++) {
    uint32_t u;
    memcpy(&u, &consts[c], 4);
    b4(a, u);
  }
  for (int s = 0; s < 2; s++) {
    while (a->len % 64) b1(a, 0xCC);
    entry[s] = a->len;
    if (!emit_loop(a, ins, ninstr, nout, nin, bcast_mask, s)) return 0;
  }
  return 1;
}

int cpu_ewp_jit_op_ok(uint32_t opcode, uint32_t aux) {
  switch (opcode) {
    case BP_EW_LOAD_INPUT: case BP_EW_LOAD_CONST: case BP_EW_STORE:
      return 1;
    case BP_OP_add: case BP_OP_sub: case BP_OP_mul: case BP_OP_div: case BP_OP_sqrt:
    case BP_OP_reciprocal: case BP_OP_relu: case BP_OP_maximum: case BP_OP_minimum:
    case BP_OP_abs: case BP_OP_neg:
      return aux == 0;
    default:
      return 0;
  }
}

/* 0: off, 1: on, 2: on for one-shot programs of any size too. */
static int g_jit_mode = -1;
static pthread_once_t g_jit_once = PTHREAD_ONCE_INIT;
static void jit_init(void) {
  const char* env = getenv("BP_CPU_JIT");
  __builtin_cpu_init();
  int want = env && strcmp(env, "0") == 0 ? 0 : env && strcmp(env, "always") == 0 ? 2 : 1;
  g_jit_mode = cpu_isa_cap() >= 2 && __builtin_cpu_supports("avx512f") ? want : 0;
}

int cpu_ewp_jit_enabled(void) {
  pthread_once(&g_jit_once, jit_init);
  return g_jit_mode > 0;
}

int cpu_ewp_jit_always(void) {
  pthread_once(&g_jit_once, jit_init);
  return g_jit_mode == 2;
}

cpu_ewp_jit_t* cpu_ewp_jit_compile(const cpu_ewp_jit_instr_t* ins, uint32_t ninstr, uint32_t nout, uint32_t nin,
                                   const float* consts, uint32_t nconst, uint32_t bcast_mask) {
  if (!cpu_ewp_jit_enabled() || nout + nin > CPU_EWP_JIT_MAX_OPERANDS) return NULL;
  for (uint32_t i = 0; i < ninstr; i++) {
    const cpu_ewp_jit_instr_t* e = &ins[i];
    if (!cpu_ewp_jit_op_ok(e->opcode, 0)) return NULL;
    int regs_ok = e->dst < CPU_EWP_JIT_MAX_REGISTERS && e->src[0] < CPU_EWP_JIT_MAX_REGISTERS &&
                  e->src[1] < CPU_EWP_JIT_MAX_REGISTERS;
    if (!regs_ok) return NULL;
    if ((e->opcode == BP_EW_LOAD_INPUT && e->index >= nin) || (e->opcode == BP_EW_STORE && e->index >= nout) ||
        (e->opcode == BP_EW_LOAD_CONST && e->index >= nconst))
      return NULL;
  }
  size_t entry[2];
  jit_asm_t sizing = {NULL, 0, 0};
  if (!emit_all(&sizing, ins, ninstr, nout, nin, consts, nconst, bcast_mask, entry)) return NULL;
  long page = sysconf(_SC_PAGESIZE);
  size_t bytes = (sizing.len + (size_t)page - 1) / (size_t)page * (size_t)page;
  cpu_ewp_jit_t* j = calloc(1, sizeof *j);
  if (!j) return NULL;
  void* mem = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (mem == MAP_FAILED) {
    free(j);
    return NULL;
  }
  jit_asm_t a = {mem, 0, bytes};
  emit_all(&a, ins, ninstr, nout, nin, consts, nconst, bcast_mask, j->entry);
  if (mprotect(mem, bytes, PROT_READ | PROT_EXEC) != 0) { /* no executable memory here */
    munmap(mem, bytes);
    free(j);
    return NULL;
  }
  j->code = mem;
  j->bytes = bytes;
  return j;
}

cpu_ewp_jit_fn cpu_ewp_jit_entry(const cpu_ewp_jit_t* jit, int streaming) {
  cpu_ewp_jit_fn fn;
  void* at = jit->code + jit->entry[streaming ? 1 : 0];
  memcpy(&fn, &at, sizeof fn); /* object to function pointer, as dlsym's users do */
  return fn;
}

void cpu_ewp_jit_free(cpu_ewp_jit_t* jit) {
  if (!jit) return;
  munmap(jit->code, jit->bytes);
  free(jit);
}

#else /* not x86-64 Linux: the interpreter runs every program */

int cpu_ewp_jit_op_ok(uint32_t opcode, uint32_t aux) {
  (void)opcode, (void)aux;
  return 0;
}
int cpu_ewp_jit_enabled(void) { return 0; }
int cpu_ewp_jit_always(void) { return 0; }
cpu_ewp_jit_t* cpu_ewp_jit_compile(const cpu_ewp_jit_instr_t* ins, uint32_t ninstr, uint32_t nout, uint32_t nin,
                                   const float* consts, uint32_t nconst, uint32_t bcast_mask) {
  (void)ins, (void)ninstr, (void)nout, (void)nin, (void)consts, (void)nconst, (void)bcast_mask;
  return NULL;
}
cpu_ewp_jit_fn cpu_ewp_jit_entry(const cpu_ewp_jit_t* jit, int streaming) {
  (void)jit, (void)streaming;
  return NULL;
}
void cpu_ewp_jit_free(cpu_ewp_jit_t* jit) { (void)jit; }

#endif
