/* Generated elementwise kernels of the OpenCL plugin on a real driver
 * (PoCL in CI): a zoo of fused programs (unary and binary chains, casts,
 * broadcasting, strided operands, integer programs, several outputs) run
 * as generated kernels and as the interpreter, both checked against a host
 * reference; the per-device cache's hit and build counts; the on-disk
 * cache loaded by a later instance, and a corrupt cache file rejected,
 * rebuilt and rewritten. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ocl_internal.h"

typedef struct env {
  const bp_plugin_vtable_t* vt;
  bpp_instance_t inst;
  bpp_device_t dev;
  bpp_stream_t s;
} env_t;

static void env_open(env_t* e) {
  memset(e, 0, sizeof *e);
  e->vt = ocl_vtable();
  bpp_instance_create_info_t info = {.struct_size = sizeof info};
  assert_int_equal(e->vt->core->instance_create(&info, &e->inst), BP_OK);
  assert_int_equal(e->vt->core->device_open(e->inst, 0, &e->dev), BP_OK);
  assert_int_equal(e->vt->core->stream_create(e->dev, NULL, &e->s), BP_OK);
}

static void env_close(env_t* e) {
  e->vt->core->stream_destroy(e->s);
  e->vt->core->instance_destroy(e->inst);
}

/* ---- host reference --------------------------------------------------- */

static float bf16_round(float f) {
  uint32_t u;
  memcpy(&u, &f, 4);
  u = (u + 0x7fffu + ((u >> 16) & 1u)) & 0xffff0000u;
  memcpy(&f, &u, 4);
  return f;
}

static double load_host(const void* base, uint32_t dt, int64_t idx) {
  switch (dt) {
    case BP_DTYPE_F32: return ((const float*)base)[idx];
    case BP_DTYPE_F64: return ((const double*)base)[idx];
    case BP_DTYPE_I32: return ((const int32_t*)base)[idx];
    case BP_DTYPE_I64: return (double)((const int64_t*)base)[idx];
    case BP_DTYPE_U8: return ((const uint8_t*)base)[idx];
    case BP_DTYPE_BF16: {
      uint32_t u = (uint32_t)((const uint16_t*)base)[idx] << 16;
      float f;
      memcpy(&f, &u, 4);
      return f;
    }
  }
  fail_msg("load_host: dtype %u", dt);
  return 0;
}

/* One instruction on double registers (integer programs: values stay
 * small, so doubles hold them exactly). */
static double apply_host(uint32_t op, double x, double y, double z, uint32_t aux, int fl) {
  switch (op) {
    case BP_OP_add: return x + y;
    case BP_OP_sub: return x - y;
    case BP_OP_mul: return fl ? (double)((float)x * (float)y) : x * y;
    case BP_OP_relu: return x < 0 ? 0 : x;
    case BP_OP_abs: return fabs(x);
    case BP_OP_neg: return -x;
    case BP_OP_maximum: return x > y ? x : y;
    case BP_OP_minimum: return x < y ? x : y;
    case BP_OP_exp: return exp(x);
    case BP_OP_tanh: return tanh(x);
    case BP_OP_lt: return x < y;
    case BP_OP_where: return x != 0 ? y : z;
    case BP_OP_bitwise_xor: return (double)((int64_t)x ^ (int64_t)y);
    case BP_OP_div: return aux == 2 ? floor(x / y) : x / y;
  }
  fail_msg("apply_host: op %u", op);
  return 0;
}

typedef struct zoo_case {
  const char* name;
  uint32_t cdt;
  uint32_t nin, nout;
  /* Operand shapes (inputs then outputs), row-major unless `transposed`
   * names an input read through a transposed view of its buffer. */
  uint32_t dtypes[4];
  uint32_t rank[4];
  int64_t sizes[4][3];
  int transposed; /* input index + 1, 0: none */
  uint32_t ninstr, nregs, nconst;
  bp_ew_instr_t code[16];
  double consts[2];
  double tol; /* relative, against the host reference */
} zoo_case_t;

#define IN(d, a) {BP_EW_LOAD_INPUT, (d), (a), 0, 0, 0}
#define K(d, a) {BP_EW_LOAD_CONST, (d), (a), 0, 0, 0}
#define OP(o, d, a, b, c, aux) {(o), (d), (a), (b), (c), (aux)}
#define ST(o, r) {BP_EW_STORE, 0, (o), (r), 0, 0}

static const zoo_case_t k_zoo[] = {
    {"8-op chain f32 (contiguous)", BP_DTYPE_F32, 2, 1, {BP_DTYPE_F32, BP_DTYPE_F32, BP_DTYPE_F32},
     {1, 1, 1}, {{1000}, {1000}, {1000}}, 0, 13, 5, 2,
     {IN(0, 0), IN(1, 1), K(2, 0), K(3, 1), OP(BP_OP_mul, 4, 0, 1, 0, 0), OP(BP_OP_add, 4, 4, 2, 0, 0),
      OP(BP_OP_relu, 4, 4, 0, 0, 0), OP(BP_OP_sub, 4, 4, 1, 0, 0), OP(BP_OP_mul, 4, 4, 0, 0, 0),
      OP(BP_OP_abs, 4, 4, 0, 0, 0), OP(BP_OP_maximum, 4, 4, 0, 0, 0), OP(BP_OP_minimum, 4, 4, 3, 0, 0), ST(0, 4)},
     {0.5, 2.0}, 1e-6},
    {"broadcast [4,1,5] * [3,1] then exp", BP_DTYPE_F32, 2, 1, {BP_DTYPE_F32, BP_DTYPE_F32, BP_DTYPE_F32},
     {3, 2, 3}, {{4, 1, 5}, {3, 1}, {4, 3, 5}}, 0, 5, 3, 0,
     {IN(0, 0), IN(1, 1), OP(BP_OP_mul, 2, 0, 1, 0, 0), OP(BP_OP_exp, 2, 2, 0, 0, 0), ST(0, 2)}, {0}, 1e-6},
    {"casts: bf16 and i32 in, through bf16, bf16 and f32 out", BP_DTYPE_F32, 2, 2,
     {BP_DTYPE_BF16, BP_DTYPE_I32, BP_DTYPE_BF16, BP_DTYPE_F32}, {2, 2, 2, 2}, {{7, 9}, {7, 9}, {7, 9}, {7, 9}},
     0, 7, 3, 0,
     {IN(0, 0), IN(1, 1), OP(BP_OP_tanh, 2, 0, 0, 0, 0), OP(BP_OP_add, 2, 2, 1, 0, 0),
      OP(BP_EW_CAST, 2, 2, 0, 0, BP_DTYPE_BF16), ST(0, 2), ST(1, 2)},
     {0}, 1e-2},
    {"transposed input, where(a < b, a, -b), two outputs", BP_DTYPE_F32, 2, 2,
     {BP_DTYPE_F32, BP_DTYPE_F32, BP_DTYPE_F32, BP_DTYPE_F64}, {2, 2, 2, 2}, {{6, 11}, {6, 11}, {6, 11}, {6, 11}},
     1, 7, 4, 0,
     {IN(0, 0), IN(1, 1), OP(BP_OP_lt, 2, 0, 1, 0, 0), OP(BP_OP_neg, 3, 1, 0, 0, 0), OP(BP_OP_where, 3, 2, 0, 3, 0),
      ST(0, 3), ST(1, 2)},
     {0}, 0},
    {"integer: floor div, xor, broadcast row", BP_DTYPE_I32, 2, 1, {BP_DTYPE_I32, BP_DTYPE_I32, BP_DTYPE_I64},
     {2, 1, 2}, {{5, 8}, {8}, {5, 8}}, 0, 6, 4, 1,
     {IN(0, 0), IN(1, 1), K(2, 0), OP(BP_OP_div, 3, 0, 1, 0, 2), OP(BP_OP_bitwise_xor, 3, 3, 2, 0, 0), ST(0, 3)},
     {5}, 0},
};

static int64_t numel_of(const zoo_case_t* z, uint32_t k) {
  int64_t n = 1;
  for (uint32_t d = 0; d < z->rank[k]; d++) n *= z->sizes[k][d];
  return n;
}

/* Host values of input k (element j of its buffer). */
static void fill_input(const zoo_case_t* z, uint32_t k, void* h, int64_t n) {
  for (int64_t j = 0; j < n; j++) {
    double v = (double)((j * 37 + k * 11) % 23) / 4.0 - 2.5;
    switch (z->dtypes[k]) {
      case BP_DTYPE_F32: ((float*)h)[j] = (float)v; break;
      case BP_DTYPE_I32: ((int32_t*)h)[j] = (int32_t)((j * 7 + k * 3) % 19) - 9 + (k == 1 && ((j * 7 + 3) % 19) == 9); break;
      case BP_DTYPE_BF16: {
        float f = bf16_round((float)v);
        uint32_t u;
        memcpy(&u, &f, 4);
        ((uint16_t*)h)[j] = (uint16_t)(u >> 16);
        break;
      }
      default: fail_msg("fill_input: dtype %u", z->dtypes[k]);
    }
  }
}

/* Runs case z once on the device; outputs read back into outs[]. */
static void run_case(env_t* e, const zoo_case_t* z, void* const* hin, void** outs) {
  const uint32_t nops = z->nin + z->nout;
  bpp_buffer_t buf[4];
  bp_tensor_desc_t d[4];
  const bp_tensor_desc_t* ptr[4];
  for (uint32_t k = 0; k < nops; k++) {
    int64_t n = numel_of(z, k);
    uint64_t bytes = (uint64_t)n * bp_dtype_size(z->dtypes[k]);
    bp_buffer_alloc_info_t a = {.struct_size = sizeof a, .size_bytes = bytes};
    assert_int_equal(e->vt->core->buffer_allocate(e->dev, &a, &buf[k]), BP_OK);
    if (k < z->nin) assert_int_equal(e->vt->core->copy_host_to_device(e->s, hin[k], buf[k], 0, bytes), BP_OK);
    memset(&d[k], 0, sizeof d[k]);
    d[k].struct_size = sizeof d[k];
    d[k].dtype = z->dtypes[k];
    d[k].rank = z->rank[k];
    d[k].buffer = buf[k];
    int64_t st = 1;
    for (uint32_t r = z->rank[k]; r-- > 0;) {
      d[k].sizes[r] = z->sizes[k][r];
      d[k].strides[r] = st;
      st *= z->sizes[k][r];
    }
    if (z->transposed == (int)k + 1) { /* a [R, C] view of a [C, R] buffer */
      d[k].strides[0] = 1;
      d[k].strides[1] = z->sizes[k][0];
    }
    ptr[k] = &d[k];
  }
  bp_scalar_t consts[2];
  for (uint32_t j = 0; j < z->nconst; j++)
    consts[j] = z->cdt == BP_DTYPE_F32 ? (bp_scalar_t){.kind = BP_SCALAR_FLOAT, .v.f = z->consts[j]}
                                       : (bp_scalar_t){.kind = BP_SCALAR_INT, .v.i = (int64_t)z->consts[j]};
  bp_ew_program_t p = {.struct_size = sizeof p, .num_instrs = z->ninstr, .num_registers = z->nregs,
                       .num_inputs = z->nin, .num_outputs = z->nout, .num_constants = z->nconst,
                       .compute_dtype = z->cdt, .instr_stride = sizeof(bp_ew_instr_t), .instrs = z->code,
                       .constants = consts};
  assert_int_equal(e->vt->caps->launch_ew_program(e->s, &p, z->nin, ptr, z->nout, ptr + z->nin), BP_OK);
  for (uint32_t k = z->nin; k < nops; k++)
    assert_int_equal(e->vt->core->copy_device_to_host(e->s, buf[k], 0, outs[k - z->nin],
                                                      (uint64_t)numel_of(z, k) * bp_dtype_size(z->dtypes[k])),
                     BP_OK);
  assert_int_equal(e->vt->core->stream_synchronize(e->s), BP_OK);
  for (uint32_t k = 0; k < nops; k++) e->vt->core->buffer_release(buf[k]);
}

/* The host reference of output element i of case z. */
static double reference(const zoo_case_t* z, void* const* hin, uint32_t out, int64_t i) {
  const uint32_t o = z->nin; /* outputs share the first output's shape */
  double r[16] = {0}, res = 0;
  int fl = z->cdt == BP_DTYPE_F32;
  int64_t coord[3], rem = i;
  for (int dd = (int)z->rank[o] - 1; dd >= 0; dd--) {
    coord[dd] = rem % z->sizes[o][dd];
    rem /= z->sizes[o][dd];
  }
  for (uint32_t j = 0; j < z->ninstr; j++) {
    const bp_ew_instr_t* in = &z->code[j];
    switch (in->opcode) {
      case BP_EW_LOAD_INPUT: {
        uint32_t k = in->a, lead = z->rank[o] - z->rank[k];
        int64_t idx = 0, st = 1;
        for (int dd = (int)z->rank[k] - 1; dd >= 0; dd--) {
          int64_t c = z->sizes[k][dd] == 1 ? 0 : coord[dd + lead];
          int64_t stride = z->transposed == (int)k + 1 ? (dd == 0 ? 1 : z->sizes[k][0]) : st;
          idx += c * stride;
          st *= z->sizes[k][dd];
        }
        r[in->dst] = load_host(hin[k], z->dtypes[k], idx);
        break;
      }
      case BP_EW_LOAD_CONST: r[in->dst] = z->consts[in->a]; break;
      case BP_EW_CAST: r[in->dst] = bf16_round((float)r[in->a]); break;
      case BP_EW_STORE:
        if (in->a == out) res = r[in->b];
        break;
      default: r[in->dst] = apply_host(in->opcode, r[in->a], r[in->b], r[in->c], in->aux, fl); break;
    }
    if (fl && in->opcode != BP_EW_STORE) r[in->dst] = (float)r[in->dst];
  }
  return res;
}

static void check_against(const zoo_case_t* z, void* const* hin, void** gen, void** interp) {
  for (uint32_t out = 0; out < z->nout; out++) {
    uint32_t k = z->nin + out, dt = z->dtypes[k];
    int64_t n = numel_of(z, k);
    for (int64_t i = 0; i < n; i++) {
      double g = load_host(gen[out], dt, i), t = load_host(interp[out], dt, i), want = reference(z, hin, out, i);
      if (dt == BP_DTYPE_BF16) want = bf16_round((float)want);
      else if (dt == BP_DTYPE_F32) want = (float)want;
      if (fabs(g - want) > z->tol * fmax(1.0, fabs(want)) || fabs(t - want) > z->tol * fmax(1.0, fabs(want)))
        fail_msg("%s: output %u element %lld: generated %.9g, interpreter %.9g, reference %.9g", z->name, out,
                 (long long)i, g, t, want);
    }
  }
}

/* Every zoo program: generated kernel and interpreter agree with the host
 * reference; each program is built once and then found in the cache. */
static void test_zoo(void** state) {
  (void)state;
  setenv("BP_OPENCL_PROGRAM_CACHE", "0", 1); /* builds counted, not disk loads */
  env_t e;
  env_open(&e);
  struct bpp_device_s* d = e.dev;
  const size_t nz = sizeof k_zoo / sizeof k_zoo[0];
  for (size_t c = 0; c < nz; c++) {
    const zoo_case_t* z = &k_zoo[c];
    void *hin[2], *gen[2], *interp[2];
    for (uint32_t k = 0; k < z->nin; k++) {
      int64_t n = numel_of(z, k);
      hin[k] = malloc((size_t)n * 8);
      fill_input(z, k, hin[k], n);
    }
    for (uint32_t o = 0; o < z->nout; o++) {
      size_t bytes = (size_t)numel_of(z, z->nin + o) * 8;
      gen[o] = calloc(1, bytes);
      interp[o] = calloc(1, bytes);
    }
    ocl_ewgen_stats_t before, after;
    ocl_ewgen_stats(d, &before);
    run_case(&e, z, hin, gen);
    ocl_ewgen_stats(d, &after);
    if (after.builds != before.builds + 1 || after.failures != before.failures)
      fail_msg("%s: %llu builds, %llu failures (want one build)", z->name,
               (unsigned long long)(after.builds - before.builds),
               (unsigned long long)(after.failures - before.failures));
    setenv("BP_OPENCL_EW_GENERATE", "0", 1);
    run_case(&e, z, hin, interp);
    unsetenv("BP_OPENCL_EW_GENERATE");
    ocl_ewgen_stats(d, &before);
    assert_int_equal(before.builds, after.builds); /* the interpreter ran */
    assert_int_equal(before.hits, after.hits);
    check_against(z, hin, gen, interp);
    /* Again: a hit, no build. */
    run_case(&e, z, hin, gen);
    ocl_ewgen_stats(d, &after);
    assert_int_equal(after.hits, before.hits + 1);
    assert_int_equal(after.builds, before.builds);
    check_against(z, hin, gen, interp);
    for (uint32_t k = 0; k < z->nin; k++) free(hin[k]);
    for (uint32_t o = 0; o < z->nout; o++) {
      free(gen[o]);
      free(interp[o]);
    }
  }
  env_close(&e);
  unsetenv("BP_OPENCL_PROGRAM_CACHE");
}

/* Runs the chain of k_zoo[0] on a fresh instance over n elements; returns
 * the instance's generated-kernel counts. */
static ocl_ewgen_stats_t chain_on_fresh_instance(int64_t n) {
  zoo_case_t z = k_zoo[0];
  for (uint32_t k = 0; k < 3; k++) z.sizes[k][0] = n;
  env_t e;
  env_open(&e);
  void *hin[2], *gen[1], *interp[1];
  for (uint32_t k = 0; k < 2; k++) {
    hin[k] = malloc((size_t)n * 4);
    fill_input(&z, k, hin[k], n);
  }
  gen[0] = calloc((size_t)n, 4);
  interp[0] = calloc((size_t)n, 4);
  run_case(&e, &z, hin, gen);
  memcpy(interp[0], gen[0], (size_t)n * 4);
  check_against(&z, hin, gen, interp);
  ocl_ewgen_stats_t s;
  ocl_ewgen_stats(e.dev, &s);
  env_close(&e);
  free(hin[0]);
  free(hin[1]);
  free(gen[0]);
  free(interp[0]);
  return s;
}

/* The on-disk cache: the first instance builds and writes the binary, a
 * second loads it (no build; another size is the same kernel), a corrupt
 * file (a header field, a binary byte, garbage) is rejected, rebuilt and
 * rewritten; BP_OPENCL_PROGRAM_CACHE=DIR relocates it. */
static void test_disk_cache(void** state) {
  (void)state;
  char dir[] = "/tmp/bp_ocl_ewgenXXXXXX";
  assert_non_null(mkdtemp(dir));
  setenv("XDG_CACHE_HOME", dir, 1);
  ocl_ewgen_stats_t s = chain_on_fresh_instance(1000);
  assert_int_equal(s.builds, 1);
  assert_int_equal(s.disk_loads, 0);
  char cmd[1400], path[700] = "";
  snprintf(cmd, sizeof cmd, "ls %s/backplane/opencl-*-ewgen-*.bin 2>/dev/null", dir);
  FILE* ls = popen(cmd, "r");
  assert_non_null(ls);
  if (!fgets(path, sizeof path, ls)) path[0] = 0;
  pclose(ls);
  path[strcspn(path, "\n")] = 0;
  assert_true(path[0] != 0);
  s = chain_on_fresh_instance(333);
  assert_int_equal(s.builds, 0);
  assert_int_equal(s.disk_loads, 1);
  /* Corrupt: same magic, another key. */
  FILE* f = fopen(path, "r+b");
  assert_non_null(f);
  assert_int_equal(fseek(f, 8, SEEK_SET), 0);
  fputc(0x5a, f);
  fclose(f);
  s = chain_on_fresh_instance(1000);
  assert_int_equal(s.builds, 1);
  assert_int_equal(s.disk_loads, 0);
  s = chain_on_fresh_instance(1000); /* rewritten: loads again */
  assert_int_equal(s.builds, 0);
  assert_int_equal(s.disk_loads, 1);
  /* One byte of the binary flipped (sizes intact): the checksum rejects
   * it before the driver sees it; rebuilt and rewritten. */
  f = fopen(path, "r+b");
  assert_non_null(f);
  assert_int_equal(fseek(f, -16, SEEK_END), 0);
  int c = fgetc(f);
  assert_int_equal(fseek(f, -16, SEEK_END), 0);
  fputc(c ^ 0x01, f);
  fclose(f);
  s = chain_on_fresh_instance(1000);
  assert_int_equal(s.builds, 1);
  assert_int_equal(s.disk_loads, 0);
  s = chain_on_fresh_instance(1000);
  assert_int_equal(s.disk_loads, 1);
  /* Truncated to garbage: rejected, rebuilt. */
  f = fopen(path, "wb");
  fputs("garbage", f);
  fclose(f);
  s = chain_on_fresh_instance(64);
  assert_int_equal(s.builds, 1);
  /* BP_OPENCL_PROGRAM_CACHE relocates the folder (created when missing). */
  char moved[600];
  snprintf(moved, sizeof moved, "%s/elsewhere/programs", dir);
  setenv("BP_OPENCL_PROGRAM_CACHE", moved, 1);
  s = chain_on_fresh_instance(1000);
  assert_int_equal(s.builds, 1);
  s = chain_on_fresh_instance(1000);
  assert_int_equal(s.disk_loads, 1);
  unsetenv("BP_OPENCL_PROGRAM_CACHE");
  snprintf(cmd, sizeof cmd, "ls %s/opencl-*-ewgen-*.bin >/dev/null 2>&1 && rm -rf %s", moved, dir);
  assert_int_equal(system(cmd), 0);
  unsetenv("XDG_CACHE_HOME");
}

int main(void) {
  const struct CMUnitTest tests[] = {cmocka_unit_test(test_zoo), cmocka_unit_test(test_disk_cache)};
  return cmocka_run_group_tests(tests, NULL, NULL);
}
