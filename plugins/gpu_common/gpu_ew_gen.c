/* backplane gpu_common: generated elementwise kernels.
 *
 * Turns a packed elementwise program (bp_gpu_ew_args_t, exactly what the
 * interpreter kernel in kernels/ew.cl takes) into the source of one
 * straight-line kernel, bp_ew_gen: the instructions become one statement
 * each over named registers, with the operand dtypes, the layout
 * (contiguous or strided, and the rank) and the op ids written in as
 * literals, so the compiler folds every dispatch away. The op semantics
 * are not written again here: each statement calls the interpreter's own
 * helpers (ct_load, apply, round_through, ct_store) of the same ew.cl
 * variant, which the plugin places before this text (BP_EW_GENERATED
 * leaves the interpreter kernel out). Sizes, strides, byte offsets and
 * constants stay in the argument block, so one generated kernel serves
 * every shape and constant value of a program and layout.
 *
 * Host C only; pure and thread-safe.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bp_gpu_ops.h"
#include "bp_kit.h"

typedef struct gen_buf {
  char* out;
  size_t cap, len;
} gen_buf_t;

static void put(gen_buf_t* b, const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  size_t room = b->len < b->cap ? b->cap - b->len : 0;
  int n = vsnprintf(room ? b->out + b->len : NULL, room, fmt, ap);
  va_end(ap);
  if (n > 0) b->len += (size_t)n;
}

/* The ew.cl variant (kernels.def program) of compute dtype `cdt`, or -1:
 * the interpreter the lowering launches, and the helpers a generated
 * kernel calls. */
int bp_gpu_ew_variant(uint32_t cdt) {
  switch (cdt) {
    case BP_DTYPE_F32: case BP_DTYPE_F16: case BP_DTYPE_BF16: return BP_GPU_PROGRAM_ew_f32;
    case BP_DTYPE_F64: return BP_GPU_PROGRAM_ew_f64;
    case BP_DTYPE_I8: case BP_DTYPE_U8: case BP_DTYPE_I16: case BP_DTYPE_I32: case BP_DTYPE_I64:
    case BP_DTYPE_BOOL:
      return BP_GPU_PROGRAM_ew_i64;
    default: return -1;
  }
}

const char* bp_gpu_ew_gen_kernel(uint32_t cdt) {
  switch (bp_gpu_ew_variant(cdt)) {
    case BP_GPU_PROGRAM_ew_f32: return "bp_ew_gen_f32";
    case BP_GPU_PROGRAM_ew_f64: return "bp_ew_gen_f64";
    case BP_GPU_PROGRAM_ew_i64: return "bp_ew_gen_i64";
    default: return NULL;
  }
}

/* The checks the interpreter does not need (it never indexes past its
 * arrays for a packed program): the generated text must not name a
 * register, operand or constant that does not exist. */
static bp_status_t check(const bp_gpu_ew_args_t* a) {
  if (bp_gpu_ew_variant(a->cdt) < 0)
    return BP_KIT_ERROR(BP_UNIMPLEMENTED, "no generated elementwise kernel for compute dtype %s",
                        bp_dtype_name(a->cdt));
  if (a->nout == 0 || a->nin + a->nout > BP_GPU_EW_MAX_OPERANDS || a->ninstr > BP_GPU_EW_MAX_INSTR ||
      a->rank == 0 || a->rank > BP_GPU_MAX_RANK)
    return BP_KIT_ERROR(BP_INVALID_ARGUMENT,
                        "elementwise program with %u inputs, %u outputs, %u instructions, rank %u", a->nin,
                        a->nout, a->ninstr, a->rank);
  for (uint32_t k = 0; k < a->nin + a->nout; k++)
    if (!bp_dtype_is_valid(a->dtypes[k]) || bp_dtype_size(a->dtypes[k]) == 0)
      return BP_KIT_ERROR(BP_INVALID_ARGUMENT, "elementwise operand %u has dtype %u", k, a->dtypes[k]);
  for (uint32_t j = 0; j < a->ninstr; j++) {
    const uint32_t opc = a->instrs[j][0], args = a->instrs[j][1];
    const uint32_t dst = args & 255u, x = (args >> 8) & 255u, y = (args >> 16) & 255u, z = args >> 24;
    int bad;
    switch (opc) {
      case BP_EW_LOAD_INPUT: bad = dst >= BP_GPU_EW_MAX_REGS || x >= a->nin; break;
      case BP_EW_LOAD_CONST: bad = dst >= BP_GPU_EW_MAX_REGS || x >= BP_GPU_EW_MAX_CONST; break;
      case BP_EW_STORE: bad = x >= a->nout || y >= BP_GPU_EW_MAX_REGS; break;
      case BP_EW_CAST: bad = dst >= BP_GPU_EW_MAX_REGS || x >= BP_GPU_EW_MAX_REGS; break;
      case BP_GPU_EW_INDEX: bad = dst >= BP_GPU_EW_MAX_REGS; break;
      default:
        bad = dst >= BP_GPU_EW_MAX_REGS || x >= BP_GPU_EW_MAX_REGS || y >= BP_GPU_EW_MAX_REGS ||
              z >= BP_GPU_EW_MAX_REGS;
        if (opc >= BP_OP_COUNT && (opc < BP_GPU_EW_ELU || opc > BP_GPU_EW_LERP))
          return BP_KIT_ERROR(BP_INVALID_ARGUMENT, "elementwise instruction %u: opcode 0x%x", j, opc);
        break;
    }
    if (bad) return BP_KIT_ERROR(BP_INVALID_ARGUMENT, "elementwise instruction %u has an operand out of range", j);
  }
  return BP_OK;
}

/* Byte offsets f0.. of element i in every operand. */
static void gen_offsets(gen_buf_t* b, const bp_gpu_ew_args_t* a) {
  const uint32_t nops = a->nin + a->nout;
  if (a->contiguous) {
    for (uint32_t k = 0; k < nops; k++)
      put(b, "    const bp_i64 f%u = A->byte_offset[%u] + i * %u;\n", k, k, bp_dtype_size(a->dtypes[k]));
    return;
  }
  put(b, "    bp_i64 rem = i, c;\n");
  for (uint32_t k = 0; k < nops; k++) put(b, "    bp_i64 f%u = 0;\n", k);
  for (int d = (int)a->rank - 1; d >= 0; d--) {
    if (d > 0) put(b, "    c = rem %% A->sizes[%d];\n    rem /= A->sizes[%d];\n", d, d);
    else put(b, "    c = rem;\n");
    for (uint32_t k = 0; k < nops; k++) put(b, "    f%u += c * A->strides[%u][%d];\n", k, k, d);
  }
  for (uint32_t k = 0; k < nops; k++)
    put(b, "    f%u = A->byte_offset[%u] + f%u * %u;\n", k, k, k, bp_dtype_size(a->dtypes[k]));
}

bp_status_t bp_gpu_ew_gen_source(const bp_gpu_ew_args_t* a, char* out, size_t cap, size_t* out_len) {
  if (!a || !out_len || (cap && !out)) return BP_KIT_ERROR(BP_INVALID_ARGUMENT, "ew_gen_source: NULL argument");
  *out_len = 0;
  bp_status_t st = check(a);
  if (st) return st;
  gen_buf_t b = {out, cap, 0};
  const uint32_t nin = a->nin;
  put(&b, "\n/* generated: %u inputs, %u outputs, %u instructions, %s, rank %u */\n", a->nin, a->nout,
      a->ninstr, a->contiguous ? "contiguous" : "strided", a->rank);
  put(&b, "BP_KERNEL void %s(", bp_gpu_ew_gen_kernel(a->cdt));
  for (uint32_t k = 0; k < BP_GPU_EW_MAX_OPERANDS; k++) put(&b, "BP_GLOBAL bp_u8* o%u, ", k);
  put(&b, "BP_GLOBAL const bp_gpu_ew_args_t* A) {\n");
  put(&b, "  const bp_i64 numel = A->numel;\n");
  put(&b, "  for (bp_i64 i = BP_GLOBAL_ID(0); i < numel; i += BP_GLOBAL_SIZE(0)) {\n");
  gen_offsets(&b, a);
  /* The registers the program names start at 0 in every element, as in
   * the interpreter. */
  uint32_t used = 0;
  for (uint32_t j = 0; j < a->ninstr; j++) {
    const uint32_t opc = a->instrs[j][0], args = a->instrs[j][1];
    if (opc == BP_EW_STORE) used |= 1u << ((args >> 16) & 255u);
    else if (opc == BP_EW_LOAD_INPUT || opc == BP_EW_LOAD_CONST || opc == BP_GPU_EW_INDEX) used |= 1u << (args & 255u);
    else if (opc == BP_EW_CAST) used |= 1u << (args & 255u) | 1u << ((args >> 8) & 255u);
    else used |= 1u << (args & 255u) | 1u << ((args >> 8) & 255u) | 1u << ((args >> 16) & 255u) | 1u << (args >> 24);
  }
  for (uint32_t r = 0; r < BP_GPU_EW_MAX_REGS; r++)
    if (used & (1u << r)) put(&b, "    CT r%u = (CT)0;\n", r);
  for (uint32_t j = 0; j < a->ninstr; j++) {
    const uint32_t opc = a->instrs[j][0], args = a->instrs[j][1], aux = a->instrs[j][2];
    const uint32_t dst = args & 255u, x = (args >> 8) & 255u, y = (args >> 16) & 255u, z = args >> 24;
    switch (opc) {
      case BP_EW_LOAD_INPUT: put(&b, "    r%u = ct_load(o%u, f%u, %uu);\n", dst, x, x, a->dtypes[x]); break;
      case BP_EW_LOAD_CONST: put(&b, "    r%u = konst(A, %uu);\n", dst, x); break;
      case BP_EW_STORE:
        put(&b, "    ct_store(o%u, f%u, %uu, r%u);\n", nin + x, nin + x, a->dtypes[nin + x], y);
        break;
      case BP_EW_CAST: put(&b, "    r%u = round_through(r%u, %uu);\n", dst, x, aux); break;
      case BP_GPU_EW_INDEX: put(&b, "    r%u = (CT)i;\n", dst); break;
      default:
        put(&b, "    r%u = wrapc(apply(%uu, r%u, r%u, r%u, %uu, A), %uu);\n", dst, opc, x, y, z, aux, a->cdt);
        break;
    }
  }
  put(&b, "  }\n}\n");
  *out_len = b.len;
  if (b.len >= cap)
    return BP_KIT_ERROR(BP_OUT_OF_RANGE, "generated elementwise kernel needs %zu bytes, %zu given", b.len + 1, cap);
  return BP_OK;
}

uint64_t bp_gpu_text_hash(uint64_t h, const void* data, size_t n) {
  const unsigned char* p = data;
  if (!h) h = 1469598103934665603ull;
  for (size_t i = 0; i < n; i++) h = (h ^ p[i]) * 1099511628211ull;
  return h;
}

char* bp_gpu_ew_gen_program(const bp_gpu_ew_args_t* a, const char* variant_source, size_t* out_size) {
  size_t need = 0;
  bp_status_t st = bp_gpu_ew_gen_source(a, NULL, 0, &need);
  if (st && st != BP_OUT_OF_RANGE) return NULL;
  const size_t pre = strlen(BP_GPU_EW_GEN_PREFIX), blen = strlen(variant_source);
  char* text = malloc(pre + blen + need + 1);
  if (!text) {
    BP_KIT_ERROR(BP_RESOURCE_EXHAUSTED, "out of host memory for a generated kernel");
    return NULL;
  }
  memcpy(text, BP_GPU_EW_GEN_PREFIX, pre);
  memcpy(text + pre, variant_source, blen);
  size_t len = 0;
  if (bp_gpu_ew_gen_source(a, text + pre + blen, need + 1, &len)) {
    free(text);
    return NULL;
  }
  *out_size = pre + blen + len + 1;
  return text;
}
