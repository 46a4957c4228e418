/* Tests of the Vulkan plugin on a real Vulkan implementation (Mesa lavapipe
 * in CI), through the public API, with the Khronos validation layer on:
 * ctest sets BP_VULKAN_VALIDATION=1 and BP_VULKAN_VALIDATION_ABORT=1, so any
 * validation message ends the process with status 86 and fails the test.
 * The same executable runs a second time with BP_VULKAN_FORCE_STAGING=1.
 * Results are checked against plain host loops.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backplane/backplane.h"
#include "backplane/plugin.h"

typedef struct env {
  bp_context_t* ctx;
  bp_device_t* dev;
  bp_stream_t* s;
} env_t;

static int setup(void** state) {
  env_t* e = calloc(1, sizeof *e);
  bp_context_options_t o;
  memset(&o, 0, sizeof o);
  o.struct_size = sizeof o;
  o.select = "vulkan";
  if (bp_context_create(&o, &e->ctx) != BP_OK) {
    fprintf(stderr, "no vulkan plugin/device: %s\n", bp_status_message());
    free(e);
    return -1;
  }
  if (bp_context_find_device(e->ctx, "vulkan:0", &e->dev) != BP_OK || bp_stream_create(e->dev, NULL, &e->s) != BP_OK) {
    bp_context_release(e->ctx);
    free(e);
    return -1;
  }
  *state = e;
  return 0;
}

static int teardown(void** state) {
  env_t* e = *state;
  bp_stream_release(e->s);
  bp_context_release(e->ctx);
  free(e);
  return 0;
}

static bp_tensor_t* tensor_f32(env_t* e, uint32_t rank, const int64_t* sizes, const float* data) {
  bp_tensor_t* t = NULL;
  assert_int_equal(bp_tensor_create(e->dev, BP_DTYPE_F32, rank, sizes, &t), BP_OK);
  if (data) assert_int_equal(bp_tensor_write(e->s, t, data, (uint64_t)bp_tensor_numel(t) * 4), BP_OK);
  return t;
}

static void read_f32(env_t* e, bp_tensor_t* t, float* out) {
  assert_int_equal(bp_tensor_read(e->s, t, out, (uint64_t)bp_tensor_numel(t) * 4), BP_OK);
}

static void fill(float* p, int n, unsigned seed) {
  for (int i = 0; i < n; i++) {
    seed = seed * 1103515245u + 12345u;
    p[i] = (float)((seed >> 8) % 2001) / 1000.0f - 1.0f;
  }
}

static void expect_close(const float* got, const double* want, int n, double tol) {
  for (int i = 0; i < n; i++)
    if (fabs(got[i] - want[i]) > tol * (1 + fabs(want[i]))) {
      fprintf(stderr, "element %d: got %.9g, want %.9g\n", i, got[i], want[i]);
      fail();
    }
}

/* ---- device and memory ------------------------------------------------- */
static void test_device_properties(void** state) {
  env_t* e = *state;
  const bp_device_properties_t* p = bp_device_properties(e->dev);
  assert_non_null(p);
  assert_true(p->dtype_mask & BP_DTYPE_BIT(BP_DTYPE_F32));
  assert_true(p->memory_bytes > 0);
  assert_true(p->subgroup_size >= 1);
  bp_memory_space_info_t spaces[4];
  memset(spaces, 0, sizeof spaces);
  uint32_t n = 0;
  assert_int_equal(bp_device_memory_spaces(e->dev, 4, sizeof(spaces[0]), spaces, &n), BP_OK);
  assert_true(n == 2 || n == 3); /* 3: the exportable space (VK_KHR_external_memory_fd) */
  assert_int_equal(spaces[0].kind, BP_MEMORY_DEVICE);
  assert_false(spaces[0].flags & BP_MEMORY_FLAG_EXPORTABLE);
  if (n == 3) {
    assert_int_equal(spaces[2].kind, BP_MEMORY_DEVICE);
    assert_true(spaces[2].flags & BP_MEMORY_FLAG_EXPORTABLE);
  }
  const char* staged = getenv("BP_VULKAN_FORCE_STAGING");
  if (staged && *staged == '1') assert_false(spaces[0].flags & BP_MEMORY_FLAG_HOST_VISIBLE);
  /* More than the budget: RESOURCE_EXHAUSTED naming the sizes. */
  bp_buffer_t* b = NULL;
  assert_int_equal(bp_buffer_allocate(e->dev, 0, spaces[0].capacity_bytes + 1, &b), BP_RESOURCE_EXHAUSTED);
  assert_non_null(strstr(bp_status_message(), "requested"));
}

static void test_copies_and_fill(void** state) {
  env_t* e = *state;
  enum { N = 300000 };
  unsigned char* src = malloc(N);
  unsigned char* dst = malloc(N);
  for (int i = 0; i < N; i++) src[i] = (unsigned char)(i * 13 + 5);
  bp_buffer_t *a = NULL, *b = NULL;
  assert_int_equal(bp_buffer_allocate(e->dev, 0, N, &a), BP_OK);
  assert_int_equal(bp_buffer_allocate(e->dev, 0, N, &b), BP_OK);
  assert_int_equal(bp_copy_host_to_buffer(e->s, src, a, 0, N), BP_OK);
  assert_int_equal(bp_copy_buffer(e->s, a, 1, b, 3, N - 7), BP_OK); /* unaligned offsets */
  memset(dst, 0, N);
  assert_int_equal(bp_copy_buffer_to_host(e->s, b, 3, dst, N - 7), BP_OK);
  assert_int_equal(bp_stream_synchronize(e->s), BP_OK);
  assert_memory_equal(dst, src + 1, N - 7);
  bp_buffer_release(a);
  bp_buffer_release(b);
  free(src);
  free(dst);
}

/* ---- elementwise and a dependent chain ------------------------------------ */
static void test_add_chain(void** state) {
  env_t* e = *state;
  enum { N = 1000 };
  int64_t sz[1] = {N};
  float x[N], y[N], got[N];
  double want[N];
  fill(x, N, 1);
  fill(y, N, 2);
  bp_tensor_t* a = tensor_f32(e, 1, sz, x);
  bp_tensor_t* b = tensor_f32(e, 1, sz, y);
  bp_tensor_t* c = NULL;
  assert_int_equal(bp_op_add(e->s, a, b, NULL, &c), BP_OK);
  /* c = (x + y) + y + y: each add depends on the previous one. */
  for (int k = 0; k < 2; k++) assert_int_equal(bp_op_add(e->s, c, b, NULL, &c), BP_OK);
  read_f32(e, c, got);
  for (int i = 0; i < N; i++) want[i] = (double)(((x[i] + y[i]) + y[i]) + y[i]);
  expect_close(got, want, N, 0);
  bp_tensor_release(a);
  bp_tensor_release(b);
  bp_tensor_release(c);
}

/* ---- the texel-view kernels ------------------------------------------------ */
/* C = a @ b (bmm when batch > 1) against the double-precision product of
 * the host values x [batch,m,k] and y [batch,k,n]. */
static void mm_and_check(env_t* e, int64_t batch, int64_t m, int64_t k, int64_t n, bp_tensor_t* a, bp_tensor_t* b,
                         const float* x, const float* y, double tol) {
  int64_t nc = batch * m * n;
  float* got = malloc((size_t)nc * 4);
  double* want = malloc((size_t)nc * 8);
  bp_tensor_t* c = NULL;
  if (batch > 1)
    assert_int_equal(bp_op_bmm(e->s, a, b, NULL, &c), BP_OK);
  else
    assert_int_equal(bp_op_mm(e->s, a, b, NULL, &c), BP_OK);
  read_f32(e, c, got);
  for (int64_t z = 0; z < batch; z++)
    for (int64_t i = 0; i < m; i++)
      for (int64_t j = 0; j < n; j++) {
        double acc = 0;
        for (int64_t q = 0; q < k; q++) acc += (double)x[(z * m + i) * k + q] * y[(z * k + q) * n + j];
        want[(z * m + i) * n + j] = acc;
      }
  expect_close(got, want, (int)nc, tol);
  bp_tensor_release(c);
  free(got);
  free(want);
}

/* The dense f32 matmul reads A and B through texel views in 32 x 16 blocks
 * of C: shapes that end mid-block in M and N, batches, and a view at an
 * offset into a shared buffer, against a double-precision host product. */
static void check_matmul(env_t* e, int64_t batch, int64_t m, int64_t k, int64_t n, uint64_t a_offset) {
  int64_t na = batch * m * k, nb = batch * k * n;
  float* x = malloc((size_t)na * 4);
  float* y = malloc((size_t)nb * 4);
  fill(x, (int)na, 11);
  fill(y, (int)nb, 12);
  bp_buffer_t* abuf = NULL;
  assert_int_equal(bp_buffer_allocate(e->dev, 0, a_offset + (uint64_t)na * 4, &abuf), BP_OK);
  int64_t asz[3] = {batch, m, k}, bsz[3] = {batch, k, n};
  uint32_t rank = batch > 1 ? 3 : 2;
  bp_tensor_t* a = NULL;
  assert_int_equal(bp_tensor_from_buffer(abuf, BP_DTYPE_F32, rank, batch > 1 ? asz : asz + 1, NULL, a_offset, &a), BP_OK);
  assert_int_equal(bp_tensor_write(e->s, a, x, (uint64_t)na * 4), BP_OK);
  bp_tensor_t* b = tensor_f32(e, rank, batch > 1 ? bsz : bsz + 1, y);
  mm_and_check(e, batch, m, k, n, a, b, x, y, 1e-5 * (double)k);
  bp_tensor_release(a);
  bp_tensor_release(b);
  bp_buffer_release(abuf);
  free(x);
  free(y);
}

static void test_matmul_blocks(void** state) {
  env_t* e = *state;
  check_matmul(e, 1, 64, 64, 64, 0);  /* whole blocks */
  check_matmul(e, 1, 37, 20, 12, 0);  /* M and N end mid-block */
  check_matmul(e, 1, 1, 4, 4, 48);    /* one row, A at an offset */
  check_matmul(e, 3, 33, 8, 36, 16);  /* batches, partial blocks, offset */
  check_matmul(e, 2, 5, 6, 7, 0);     /* K and N not multiples of 4: both packed first */
}

/* A [batch, m, k] dense and B [batch, k, n] (a transposed view of dense
 * [batch, n, k] storage when b_transposed) with values that are multiples
 * of 1/8 in [-1, 1]; x and y hold them row-major on the host. */
typedef struct mm_inputs {
  float *x, *y;
  bp_tensor_t *a, *b;
  bp_buffer_t* bbuf;
} mm_inputs_t;

static void mm_inputs_make(env_t* e, int64_t batch, int64_t m, int64_t k, int64_t n, int b_transposed,
                           mm_inputs_t* in) {
  int64_t na = batch * m * k, nb = batch * k * n;
  in->x = malloc((size_t)na * 4);
  in->y = malloc((size_t)nb * 4);     /* B[z][q][j] */
  float* yt = malloc((size_t)nb * 4); /* as stored: [z][j][q] when transposed */
  for (int64_t i = 0; i < na; i++) in->x[i] = (float)((i * 7) % 17 - 8) / 8.0f;
  for (int64_t i = 0; i < nb; i++) in->y[i] = (float)((i * 5) % 13 - 6) / 8.0f;
  for (int64_t z = 0; z < batch; z++)
    for (int64_t q = 0; q < k; q++)
      for (int64_t j = 0; j < n; j++)
        yt[b_transposed ? (z * n + j) * k + q : (z * k + q) * n + j] = in->y[(z * k + q) * n + j];
  uint32_t rank = batch > 1 ? 3 : 2;
  int64_t asz[3] = {batch, m, k}, bsz[3] = {batch, k, n};
  int64_t bst[3] = {k * n, b_transposed ? 1 : n, b_transposed ? k : 1};
  in->a = tensor_f32(e, rank, batch > 1 ? asz : asz + 1, in->x);
  in->b = NULL;
  in->bbuf = NULL;
  assert_int_equal(bp_buffer_allocate(e->dev, 0, (uint64_t)nb * 4, &in->bbuf), BP_OK);
  assert_int_equal(bp_tensor_from_buffer(in->bbuf, BP_DTYPE_F32, rank, batch > 1 ? bsz : bsz + 1,
                                         batch > 1 ? bst : bst + 1, 0, &in->b),
                   BP_OK);
  assert_int_equal(bp_copy_host_to_buffer(e->s, yt, in->bbuf, 0, (uint64_t)nb * 4), BP_OK);
  free(yt);
}

static void mm_inputs_free(mm_inputs_t* in) {
  bp_tensor_release(in->a);
  bp_tensor_release(in->b);
  bp_buffer_release(in->bbuf);
  free(in->x);
  free(in->y);
}

/* Operands the register-blocked kernel cannot read in place are packed
 * first (dense, K and N padded to multiples of 4): a transposed view of B,
 * K and N that are not multiples of 4, several workgroups of blocks. The
 * values are multiples of 1/8 in [-1, 1], against a double-precision host
 * product. */
static void check_matmul_packed(env_t* e, int64_t batch, int64_t m, int64_t k, int64_t n, int b_transposed) {
  mm_inputs_t in;
  mm_inputs_make(e, batch, m, k, n, b_transposed, &in);
  mm_and_check(e, batch, m, k, n, in.a, in.b, in.x, in.y, 1e-6);
  mm_inputs_free(&in);
}

static void test_matmul_packed(void** state) {
  env_t* e = *state;
  check_matmul_packed(e, 1, 70, 132, 150, 1); /* x @ W^T: B packed by 4 x 4 blocks, N % 4 == 2 */
  check_matmul_packed(e, 3, 40, 12, 36, 1);   /* the same, batches */
  check_matmul_packed(e, 1, 9, 10, 11, 1);    /* transposed B with K % 4 == 2: element by element */
  check_matmul_packed(e, 2, 33, 9, 20, 0);    /* K % 4 == 1: both packed, batches */
  check_matmul_packed(e, 1, 5, 7, 260, 0);    /* both packed, 17 column blocks */
}

/* addmm = beta bias + alpha A @ B: a dense bias row with N % 4 == 0 is
 * applied in the register-blocked kernel's stores, other biases ([M, N],
 * N % 4 != 0) by an elementwise pass after it. */
static void check_addmm(env_t* e, int64_t m, int64_t k, int64_t n, int full_bias, double alpha, double beta) {
  int64_t nbias = full_bias ? m * n : n;
  float* x = malloc((size_t)(m * k) * 4);
  float* y = malloc((size_t)(k * n) * 4);
  float* bv = malloc((size_t)nbias * 4);
  float* got = malloc((size_t)(m * n) * 4);
  double* want = malloc((size_t)(m * n) * 8);
  fill(x, (int)(m * k), 31);
  fill(y, (int)(k * n), 32);
  fill(bv, (int)nbias, 33);
  int64_t asz[2] = {m, k}, bsz[2] = {k, n}, csz[2] = {m, n};
  bp_tensor_t *a = tensor_f32(e, 2, asz, x), *b = tensor_f32(e, 2, bsz, y), *c = NULL;
  bp_tensor_t* bias = tensor_f32(e, full_bias ? 2 : 1, full_bias ? csz : csz + 1, bv);
  bp_addmm_attrs_t at;
  memset(&at, 0, sizeof at);
  at.struct_size = sizeof at;
  at.alpha = (bp_scalar_t){.kind = BP_SCALAR_FLOAT, .v.f = alpha};
  at.beta = (bp_scalar_t){.kind = BP_SCALAR_FLOAT, .v.f = beta};
  assert_int_equal(bp_op_addmm(e->s, bias, a, b, &at, &c), BP_OK);
  read_f32(e, c, got);
  for (int64_t i = 0; i < m; i++)
    for (int64_t j = 0; j < n; j++) {
      double acc = 0;
      for (int64_t q = 0; q < k; q++) acc += (double)x[i * k + q] * y[q * n + j];
      want[i * n + j] = alpha * acc + beta * bv[full_bias ? i * n + j : j];
    }
  expect_close(got, want, (int)(m * n), 1e-5 * (double)k);
  bp_tensor_release(a);
  bp_tensor_release(b);
  bp_tensor_release(bias);
  bp_tensor_release(c);
  free(x);
  free(y);
  free(bv);
  free(got);
  free(want);
}

static void test_addmm_epilogue(void** state) {
  env_t* e = *state;
  check_addmm(e, 37, 20, 40, 0, 0.5, 2.0);  /* bias row, N % 4 == 0: in the kernel's stores */
  check_addmm(e, 37, 20, 40, 0, 1.0, 1.0);  /* the same, alpha = beta = 1 */
  check_addmm(e, 9, 12, 10, 0, 1.5, -1.0);  /* bias row, N % 4 == 2: elementwise pass */
  check_addmm(e, 33, 8, 16, 1, 0.25, 3.0);  /* [M, N] bias: elementwise pass */
  check_addmm(e, 5, 4, 8, 0, 2.0, 0.0);     /* beta 0: the bias is ignored */
}

/* Large f32 products take the panel kernel (M >= 1024, N >= 256, K >=
 * 1024): k in chunks of 512 per dispatch, each adding to the C the
 * previous one stored, A packed with rows interleaved by 8. Values are
 * multiples of 1/8 in [-1, 1], so every partial sum is exact in f32 and
 * the result must match a double-precision product exactly; rows sampled
 * (the first and last 8, every 7th). */
static void check_panel(env_t* e, int64_t batch, int64_t m, int64_t k, int64_t n, int b_transposed, int addmm) {
  mm_inputs_t in;
  mm_inputs_make(e, batch, m, k, n, b_transposed, &in);
  const float *x = in.x, *y = in.y;
  float* bv = malloc((size_t)n * 4);
  float* got = malloc((size_t)(batch * m * n) * 4);
  for (int64_t j = 0; j < n; j++) bv[j] = (float)(j % 9 - 4) / 8.0f;
  bp_tensor_t *c = NULL, *bias = NULL;
  double alpha = addmm ? 0.5 : 1.0, beta = addmm ? 2.0 : 0.0;
  if (addmm) {
    bp_addmm_attrs_t at;
    memset(&at, 0, sizeof at);
    at.struct_size = sizeof at;
    at.alpha = (bp_scalar_t){.kind = BP_SCALAR_FLOAT, .v.f = alpha};
    at.beta = (bp_scalar_t){.kind = BP_SCALAR_FLOAT, .v.f = beta};
    bias = tensor_f32(e, 1, &n, bv);
    assert_int_equal(bp_op_addmm(e->s, bias, in.a, in.b, &at, &c), BP_OK);
  } else if (batch > 1) {
    assert_int_equal(bp_op_bmm(e->s, in.a, in.b, NULL, &c), BP_OK);
  } else {
    assert_int_equal(bp_op_mm(e->s, in.a, in.b, NULL, &c), BP_OK);
  }
  read_f32(e, c, got);
  double* want = malloc((size_t)n * 8);
  for (int64_t z = 0; z < batch; z++)
    for (int64_t i = 0; i < m; i++) {
      if (i >= 8 && i < m - 8 && i % 7) continue;
      for (int64_t j = 0; j < n; j++) {
        double acc = 0;
        for (int64_t q = 0; q < k; q++) acc += (double)x[(z * m + i) * k + q] * y[(z * k + q) * n + j];
        want[j] = alpha * acc + beta * bv[j];
      }
      expect_close(got + (z * m + i) * n, want, (int)n, 1e-7);
    }
  bp_tensor_release(c);
  bp_tensor_release(bias);
  mm_inputs_free(&in);
  free(bv);
  free(got);
  free(want);
}

static void test_matmul_panel(void** state) {
  env_t* e = *state;
  check_panel(e, 1, 2045, 1028, 256, 0, 0); /* A read as texels then interleaved; rows end mid-group; 512 + 512 + 4 */
  check_panel(e, 2, 1024, 1030, 258, 1, 0); /* batches, x @ W^T, K % 4 == 2: both packed element by element; N % 4 == 2 */
  check_panel(e, 1, 1024, 1024, 256, 0, 1); /* addmm: alpha and the bias row in the last chunk's stores */
}

/* Contiguous elementwise programs read inputs of 2, 4 and 8 bytes through
 * texel views (8-element chunks) and the tail one by one. */
static void test_texel_elementwise(void** state) {
  env_t* e = *state;
  static const uint32_t dts[3] = {BP_DTYPE_F16, BP_DTYPE_F32, BP_DTYPE_F64};
  enum { N = 1003 };
  int64_t sz[1] = {N};
  float x[N], y[N], got[N];
  double want[N];
  fill(x, N, 21);
  fill(y, N, 22);
  for (int d = 0; d < 3; d++) {
    bp_tensor_t *xf = tensor_f32(e, 1, sz, x), *yf = tensor_f32(e, 1, sz, y);
    bp_tensor_t *xa = NULL, *ya = NULL, *sum = NULL, *back = NULL;
    bp_cast_attrs_t to = {sizeof to, dts[d]}, to_f32 = {sizeof to_f32, BP_DTYPE_F32};
    assert_int_equal(bp_op_to_copy(e->s, xf, &to, &xa), BP_OK);
    assert_int_equal(bp_op_to_copy(e->s, yf, &to, &ya), BP_OK);
    assert_int_equal(bp_op_add(e->s, xa, ya, NULL, &sum), BP_OK);
    assert_int_equal(bp_op_to_copy(e->s, sum, &to_f32, &back), BP_OK);
    read_f32(e, back, got);
    for (int i = 0; i < N; i++) want[i] = (double)x[i] + (double)y[i];
    expect_close(got, want, N, dts[d] == BP_DTYPE_F16 ? 2e-3 : 1e-6);
    bp_tensor_release(xf);
    bp_tensor_release(yf);
    bp_tensor_release(xa);
    bp_tensor_release(ya);
    bp_tensor_release(sum);
    bp_tensor_release(back);
  }
}

/* ---- norms ------------------------------------------------------------------ */
static void test_layer_norm_and_rms_norm(void** state) {
  env_t* e = *state;
  enum { R = 7, D = 129 };
  int64_t sz[2] = {R, D}, wsz[1] = {D};
  float x[R * D], w[D], bias[D], got[R * D], gm[R], gr[R];
  double want[R * D], wm[R], wr[R];
  fill(x, R * D, 3);
  fill(w, D, 4);
  fill(bias, D, 5);
  bp_tensor_t* tx = tensor_f32(e, 2, sz, x);
  bp_tensor_t* tw = tensor_f32(e, 1, wsz, w);
  bp_tensor_t* tb = tensor_f32(e, 1, wsz, bias);
  bp_layer_norm_attrs_t la;
  memset(&la, 0, sizeof la);
  la.struct_size = sizeof la;
  la.normalized_rank = 1;
  la.normalized_shape[0] = D;
  la.eps = 1e-5;
  bp_tensor_t *out = NULL, *mean = NULL, *rstd = NULL;
  assert_int_equal(bp_op_layer_norm(e->s, tx, tw, tb, &la, &out, &mean, &rstd), BP_OK);
  read_f32(e, out, got);
  read_f32(e, mean, gm);
  read_f32(e, rstd, gr);
  for (int r = 0; r < R; r++) {
    double m = 0, v = 0;
    for (int j = 0; j < D; j++) m += x[r * D + j];
    m /= D;
    for (int j = 0; j < D; j++) v += (x[r * D + j] - m) * (x[r * D + j] - m);
    v /= D;
    wm[r] = m;
    wr[r] = 1 / sqrt(v + 1e-5);
    for (int j = 0; j < D; j++) want[r * D + j] = (x[r * D + j] - m) * wr[r] * w[j] + bias[j];
  }
  expect_close(got, want, R * D, 1e-5);
  expect_close(gm, wm, R, 1e-5);
  expect_close(gr, wr, R, 1e-5);
  bp_tensor_release(out);
  out = NULL;
  bp_rms_norm_attrs_t ra = {.struct_size = sizeof ra, .normalized_rank = 1, .eps = 1e-6};
  assert_int_equal(bp_op_rms_norm(e->s, tx, tw, &ra, &out), BP_OK);
  read_f32(e, out, got);
  for (int r = 0; r < R; r++) {
    double q = 0;
    for (int j = 0; j < D; j++) q += (double)x[r * D + j] * x[r * D + j];
    double inv = 1 / sqrt(q / D + 1e-6);
    for (int j = 0; j < D; j++) want[r * D + j] = x[r * D + j] * inv * w[j];
  }
  expect_close(got, want, R * D, 1e-5);
  bp_tensor_release(out);
  bp_tensor_release(mean);
  bp_tensor_release(rstd);
  bp_tensor_release(tx);
  bp_tensor_release(tw);
  bp_tensor_release(tb);
}

/* ---- fused and group quantization ----------------------------------------- */
/* float8_e4m3fn code -> value (no NaN among the codes checked here). */
static double e4m3_value(uint8_t c) {
  int e = (c >> 3) & 15, m = c & 7;
  double v = e ? ldexp(8 + m, e - 10) : ldexp(m, -9);
  return c & 0x80 ? -v : v;
}

/* per_token_group_quant to e4m3fn and rms_norm_quant to i8 against host
 * loops: each scale is amax / qmax, each code a nearest one to x / scale
 * (within half a step of the code's format at that magnitude). */
static void test_fused_and_group_quant(void** state) {
  env_t* e = *state;
  enum { R = 3, D = 256, G = 128 };
  int64_t sz[2] = {R, D};
  float x[R * D], sc[R * (D / G)], rs[R];
  uint8_t codes[R * D];
  fill(x, R * D, 11);
  bp_tensor_t* tx = tensor_f32(e, 2, sz, x);
  bp_group_quant_attrs_t ga = {.struct_size = sizeof ga, .qdtype = BP_DTYPE_F8E4M3FN, .group_size = G};
  bp_tensor_t *out = NULL, *scale = NULL;
  assert_int_equal(bp_op_per_token_group_quant(e->s, tx, &ga, &out, &scale), BP_OK);
  assert_int_equal(bp_tensor_read(e->s, out, codes, sizeof codes), BP_OK);
  read_f32(e, scale, sc);
  for (int g = 0; g < R * (D / G); g++) {
    double amax = 0;
    for (int j = 0; j < G; j++) amax = fmax(amax, fabs(x[g * G + j]));
    assert_float_equal(sc[g], (float)(amax / 448.0), 0.0);
    for (int j = 0; j < G; j++) {
      double t = x[g * G + j] / (double)sc[g], a = fabs(t);
      double step = a < 0x1p-6 ? 0x1p-9 : ldexp(1.0, (int)floor(log2(a)) - 3);
      if (fabs(e4m3_value(codes[g * G + j]) - t) > 0.5 * step * (1 + 1e-9)) {
        fprintf(stderr, "group %d element %d: code 0x%02x for %.9g\n", g, j, codes[g * G + j], t);
        fail();
      }
    }
  }
  bp_tensor_release(out);
  bp_tensor_release(scale);
  out = scale = NULL;
  bp_fused_quant_attrs_t fa = {.struct_size = sizeof fa, .qdtype = BP_DTYPE_I8, .eps = 1e-6};
  assert_int_equal(bp_op_rms_norm_quant(e->s, tx, NULL, NULL, &fa, &out, &scale), BP_OK);
  assert_int_equal(bp_tensor_read(e->s, out, codes, sizeof codes), BP_OK);
  read_f32(e, scale, rs);
  for (int r = 0; r < R; r++) {
    double q = 0, amax = 0;
    for (int j = 0; j < D; j++) q += (double)x[r * D + j] * x[r * D + j];
    double inv = 1 / sqrt(q / D + 1e-6);
    for (int j = 0; j < D; j++) amax = fmax(amax, fabs(x[r * D + j] * inv));
    assert_true(fabs(rs[r] - amax / 127) <= 1e-6 * amax / 127);
    for (int j = 0; j < D; j++) {
      double t = x[r * D + j] * inv / rs[r];
      assert_true(fabs((int8_t)codes[r * D + j] - t) <= 0.5 + 1e-6);
    }
  }
  bp_tensor_release(out);
  bp_tensor_release(scale);
  bp_tensor_release(tx);
}

/* ---- paged cache ------------------------------------------------------------ */
static bp_tensor_t* tensor_i64(env_t* e, uint32_t rank, const int64_t* sizes, const int64_t* data) {
  bp_tensor_t* t = NULL;
  assert_int_equal(bp_tensor_create(e->dev, BP_DTYPE_I64, rank, sizes, &t), BP_OK);
  assert_int_equal(bp_tensor_write(e->s, t, data, (uint64_t)bp_tensor_numel(t) * 8), BP_OK);
  return t;
}

/* compute_slot_mapping -> concat_and_cache_mla in place -> gather_cache:
 * the slots of one sequence over blocks {4, 1, 5}, the cache rows they
 * name, and the same rows gathered back (padding rows zero). */
static void test_paged_cache_round_trip(void** state) {
  env_t* e = *state;
  enum { NB = 6, BS = 4, L = 5, R = 3, W = L + R, T = 7, N = 9 };
  int64_t table[3] = {4, 1, 5}, qsl[2] = {0, T}, pos[T], slot_want[T], slot_got[T];
  for (int t = 0; t < T; t++) pos[t] = t, slot_want[t] = table[t / BS] * BS + t % BS;
  float kv[T * L], pe[T * R], zeros[NB * BS * W], dst[N * W];
  fill(kv, T * L, 21);
  fill(pe, T * R, 22);
  memset(zeros, 0, sizeof zeros);
  int64_t bts[2] = {1, 3}, qs[1] = {2}, ts[1] = {T}, kvs[2] = {T, L}, pes[2] = {T, R}, cs[3] = {NB, BS, W};
  bp_tensor_t *tb = tensor_i64(e, 2, bts, table), *tq = tensor_i64(e, 1, qs, qsl), *tp = tensor_i64(e, 1, ts, pos);
  bp_tensor_t *tkv = tensor_f32(e, 2, kvs, kv), *tpe = tensor_f32(e, 2, pes, pe), *cache = tensor_f32(e, 3, cs, zeros);
  bp_slot_mapping_attrs_t sa = {.struct_size = sizeof sa, .block_size = BS};
  bp_tensor_t *slots = NULL, *out = cache, *gathered = NULL;
  assert_int_equal(bp_op_compute_slot_mapping(e->s, tb, tq, tp, &sa, &slots), BP_OK);
  assert_int_equal(bp_op_concat_and_cache_mla(e->s, tkv, tpe, cache, slots, NULL, &out), BP_OK);
  assert_ptr_equal(out, cache);
  bp_gather_cache_attrs_t ga = {.struct_size = sizeof ga, .num_tokens = N};
  assert_int_equal(bp_op_gather_cache(e->s, cache, tb, tq, NULL, &ga, &gathered), BP_OK);
  assert_int_equal(bp_tensor_read(e->s, slots, slot_got, sizeof slot_got), BP_OK);
  read_f32(e, gathered, dst);
  for (int t = 0; t < T; t++) assert_int_equal(slot_got[t], slot_want[t]);
  for (int n = 0; n < N; n++)
    for (int c = 0; c < W; c++) {
      float want = n >= T ? 0.0f : c < L ? kv[n * L + c] : pe[n * R + c - L];
      assert_float_equal(dst[n * W + c], want, 0.0);
    }
  bp_tensor_t* all[] = {tb, tq, tp, tkv, tpe, cache, slots, gathered};
  for (size_t k = 0; k < sizeof all / sizeof all[0]; k++) bp_tensor_release(all[k]);
}

/* ---- indexing ------------------------------------------------------------- */
static void test_gather_index_select_embedding(void** state) {
  env_t* e = *state;
  enum { V = 10, D = 6, K = 4 };
  int64_t wsz[2] = {V, D}, isz[1] = {K}, gsz[2] = {V, 3};
  float w[V * D], got[V * D];
  double want[V * D];
  fill(w, V * D, 6);
  bp_tensor_t* tw = tensor_f32(e, 2, wsz, w);
  int64_t idx[K] = {3, 0, 9, 3};
  bp_tensor_t* ti = NULL;
  assert_int_equal(bp_tensor_create(e->dev, BP_DTYPE_I64, 1, isz, &ti), BP_OK);
  assert_int_equal(bp_tensor_write(e->s, ti, idx, sizeof idx), BP_OK);
  /* embedding: rows of w */
  bp_embedding_attrs_t ea;
  memset(&ea, 0, sizeof ea);
  ea.struct_size = sizeof ea;
  ea.padding_idx = -1;
  bp_tensor_t* out = NULL;
  assert_int_equal(bp_op_embedding(e->s, tw, ti, &ea, &out), BP_OK);
  read_f32(e, out, got);
  for (int k = 0; k < K; k++)
    for (int j = 0; j < D; j++) want[k * D + j] = w[idx[k] * D + j];
  expect_close(got, want, K * D, 0);
  bp_tensor_release(out);
  out = NULL;
  /* index_select along dim 1: columns 3, 0, 5, 3 */
  int64_t cidx[K] = {3, 0, 5, 3};
  assert_int_equal(bp_tensor_write(e->s, ti, cidx, sizeof cidx), BP_OK);
  bp_dim_attrs_t da = {.struct_size = sizeof da, .dim = 1};
  assert_int_equal(bp_op_index_select(e->s, tw, ti, &da, &out), BP_OK);
  read_f32(e, out, got);
  for (int r = 0; r < V; r++)
    for (int k = 0; k < K; k++) want[r * K + k] = w[r * D + cidx[k]];
  expect_close(got, want, V * K, 0);
  bp_tensor_release(out);
  out = NULL;
  /* gather along dim 1 with a [V, 3] index */
  int64_t g[V * 3];
  for (int i = 0; i < V * 3; i++) g[i] = (i * 5) % D;
  bp_tensor_t* tg = NULL;
  assert_int_equal(bp_tensor_create(e->dev, BP_DTYPE_I64, 2, gsz, &tg), BP_OK);
  assert_int_equal(bp_tensor_write(e->s, tg, g, sizeof g), BP_OK);
  assert_int_equal(bp_op_gather(e->s, tw, tg, &da, &out), BP_OK);
  read_f32(e, out, got);
  for (int r = 0; r < V; r++)
    for (int k = 0; k < 3; k++) want[r * 3 + k] = w[r * D + g[r * 3 + k]];
  expect_close(got, want, V * 3, 0);
  bp_tensor_release(out);
  bp_tensor_release(tg);
  bp_tensor_release(ti);
  bp_tensor_release(tw);
}

/* ---- convolution and pooling ---------------------------------------------- */
static void test_conv2d_and_pooling(void** state) {
  env_t* e = *state;
  enum { N = 2, C = 4, H = 9, W = 8, O = 6, G = 2, KH = 3, KW = 2 };
  int64_t xs[4] = {N, C, H, W}, ws[4] = {O, C / G, KH, KW}, bs[1] = {O};
  float x[N * C * H * W], w[O * (C / G) * KH * KW], b[O];
  fill(x, N * C * H * W, 7);
  fill(w, O * (C / G) * KH * KW, 8);
  fill(b, O, 9);
  bp_tensor_t* tx = tensor_f32(e, 4, xs, x);
  bp_tensor_t* tw = tensor_f32(e, 4, ws, w);
  bp_tensor_t* tb = tensor_f32(e, 1, bs, b);
  bp_conv_attrs_t ca;
  memset(&ca, 0, sizeof ca);
  ca.struct_size = sizeof ca;
  ca.spatial_dims = 2;
  ca.stride[0] = 2; ca.stride[1] = 1;
  ca.padding[0] = 1; ca.padding[1] = 1;
  ca.dilation[0] = 1; ca.dilation[1] = 2;
  ca.groups = G;
  ca.output_mask = 7;
  bp_tensor_t* out = NULL;
  assert_int_equal(bp_op_convolution(e->s, tx, tw, tb, &ca, &out), BP_OK);
  const int64_t* os = bp_tensor_sizes(out);
  int OH = (int)os[2], OW = (int)os[3];
  assert_int_equal(OH, (H + 2 - (KH - 1) - 1) / 2 + 1);
  assert_int_equal(OW, (W + 2 - 2 * (KW - 1) - 1) / 1 + 1);
  float* got = malloc(sizeof(float) * N * O * OH * OW);
  double* want = malloc(sizeof(double) * N * O * OH * OW);
  read_f32(e, out, got);
  for (int n = 0; n < N; n++)
    for (int o = 0; o < O; o++)
      for (int oh = 0; oh < OH; oh++)
        for (int ow = 0; ow < OW; ow++) {
          double acc = b[o];
          int g = o / (O / G);
          for (int ci = 0; ci < C / G; ci++)
            for (int kh = 0; kh < KH; kh++)
              for (int kw = 0; kw < KW; kw++) {
                int h = oh * 2 - 1 + kh, ww = ow - 1 + kw * 2;
                if (h < 0 || h >= H || ww < 0 || ww >= W) continue;
                acc += (double)x[((n * C + g * (C / G) + ci) * H + h) * W + ww] * w[((o * (C / G) + ci) * KH + kh) * KW + kw];
              }
          want[((n * O + o) * OH + oh) * OW + ow] = acc;
        }
  expect_close(got, want, N * O * OH * OW, 1e-5);
  bp_tensor_release(out);
  free(got);
  free(want);
  /* 2x2 max pool, stride 2, with indices; 3x3 average pool with padding */
  bp_pool_attrs_t pa;
  memset(&pa, 0, sizeof pa);
  pa.struct_size = sizeof pa;
  pa.spatial_dims = 2;
  pa.kernel[0] = pa.kernel[1] = 2;
  pa.stride[0] = pa.stride[1] = 2;
  pa.has_stride = 1;
  pa.dilation[0] = pa.dilation[1] = 1;
  pa.count_include_pad = 1;
  bp_tensor_t *pm = NULL, *pi = NULL;
  assert_int_equal(bp_op_max_pool_with_indices(e->s, tx, &pa, &pm, &pi), BP_OK);
  int PH = H / 2, PW = W / 2;
  float* pg = malloc(sizeof(float) * N * C * PH * PW);
  int64_t* ig = malloc(sizeof(int64_t) * N * C * PH * PW);
  read_f32(e, pm, pg);
  assert_int_equal(bp_tensor_read(e->s, pi, ig, sizeof(int64_t) * N * C * PH * PW), BP_OK);
  for (int nc = 0; nc < N * C; nc++)
    for (int ph = 0; ph < PH; ph++)
      for (int pw = 0; pw < PW; pw++) {
        float best = -INFINITY;
        int64_t bi = 0;
        for (int kh = 0; kh < 2; kh++)
          for (int kw = 0; kw < 2; kw++) {
            int h = ph * 2 + kh, ww = pw * 2 + kw;
            float v = x[(nc * H + h) * W + ww];
            if (v > best) { best = v; bi = h * W + ww; }
          }
        assert_true(pg[(nc * PH + ph) * PW + pw] == best);
        assert_int_equal(ig[(nc * PH + ph) * PW + pw], bi);
      }
  free(pg);
  free(ig);
  pa.kernel[0] = pa.kernel[1] = 3;
  pa.stride[0] = pa.stride[1] = 1;
  pa.padding[0] = pa.padding[1] = 1;
  pa.count_include_pad = 0;
  bp_tensor_t* pavg = NULL;
  assert_int_equal(bp_op_avg_pool(e->s, tx, &pa, &pavg), BP_OK);
  float* ag = malloc(sizeof(float) * N * C * H * W);
  double* aw = malloc(sizeof(double) * N * C * H * W);
  read_f32(e, pavg, ag);
  for (int nc = 0; nc < N * C; nc++)
    for (int h0 = 0; h0 < H; h0++)
      for (int w0 = 0; w0 < W; w0++) {
        double s = 0;
        int cnt = 0;
        for (int h = h0 - 1; h <= h0 + 1; h++)
          for (int ww = w0 - 1; ww <= w0 + 1; ww++)
            if (h >= 0 && h < H && ww >= 0 && ww < W) { s += x[(nc * H + h) * W + ww]; cnt++; }
        aw[(nc * H + h0) * W + w0] = s / cnt;
      }
  expect_close(ag, aw, N * C * H * W, 1e-6);
  free(ag);
  free(aw);
  bp_tensor_release(pavg);
  bp_tensor_release(pm);
  bp_tensor_release(pi);
  bp_tensor_release(tx);
  bp_tensor_release(tw);
  bp_tensor_release(tb);
}

/* ---- fusion: an elementwise program through the plugin's caps table ------- */
static void test_fused_program(void** state) {
  env_t* e = *state;
  bp_fusion_caps_t caps;
  memset(&caps, 0, sizeof caps);
  caps.struct_size = sizeof caps;
  assert_int_equal(bp_device_query_fusion(e->dev, &caps), BP_OK);
  assert_true(caps.ew_max_instrs >= 8);
  assert_true(caps.ew_opcode_mask[BP_OP_mul / 64] & (1ull << (BP_OP_mul % 64)));
  assert_false(caps.ew_opcode_mask[BP_OP_elu / 64] & (1ull << (BP_OP_elu % 64)));
  /* Run relu(a * b + 1.5) -> out0 and (a * b < 0) -> out1 directly on a
   * plugin instance (the graph compiler's path). */
  bp_plugin_t* plugin = NULL;
  assert_int_equal(bp_context_find_plugin(e->ctx, "vulkan", &plugin), BP_OK);
  const bp_plugin_vtable_t* vt = bp_plugin_vtable(plugin);
  assert_non_null(vt->caps->launch_ew_program);
  bpp_instance_create_info_t ci = {.struct_size = sizeof ci};
  bpp_instance_t inst = NULL;
  bpp_device_t dev = NULL;
  bpp_stream_t s = NULL;
  assert_int_equal(vt->core->instance_create(&ci, &inst), BP_OK);
  assert_int_equal(vt->core->device_open(inst, 0, &dev), BP_OK);
  assert_int_equal(vt->core->stream_create(dev, &(bp_stream_create_info_t){.struct_size = sizeof(bp_stream_create_info_t)}, &s), BP_OK);
  enum { N = 777 };
  float a[N], b[N], o0[N];
  uint8_t o1[N];
  fill(a, N, 10);
  fill(b, N, 11);
  bpp_buffer_t buf[4];
  uint64_t bytes[4] = {N * 4, N * 4, N * 4, N};
  for (int k = 0; k < 4; k++) {
    bp_buffer_alloc_info_t ai = {.struct_size = sizeof ai, .memory_space = 0, .size_bytes = bytes[k]};
    assert_int_equal(vt->core->buffer_allocate(dev, &ai, &buf[k]), BP_OK);
  }
  assert_int_equal(vt->core->copy_host_to_device(s, a, buf[0], 0, N * 4), BP_OK);
  assert_int_equal(vt->core->copy_host_to_device(s, b, buf[1], 0, N * 4), BP_OK);
  bp_tensor_desc_t d[4];
  memset(d, 0, sizeof d);
  for (int k = 0; k < 4; k++) {
    d[k].struct_size = sizeof d[k];
    d[k].dtype = k == 3 ? BP_DTYPE_BOOL : BP_DTYPE_F32;
    d[k].rank = 1;
    d[k].sizes[0] = N;
    d[k].strides[0] = 1;
    d[k].buffer = buf[k];
  }
  bp_ew_instr_t ins[] = {
      {BP_EW_LOAD_INPUT, 0, 0, 0, 0, 0}, {BP_EW_LOAD_INPUT, 1, 1, 0, 0, 0}, {BP_OP_mul, 2, 0, 1, 0, 0},
      {BP_EW_LOAD_CONST, 3, 0, 0, 0, 0}, {BP_OP_add, 4, 2, 3, 0, 0},       {BP_OP_relu, 5, 4, 0, 0, 0},
      {BP_EW_STORE, 0, 0, 5, 0, 0},      {BP_EW_LOAD_CONST, 6, 1, 0, 0, 0}, {BP_OP_lt, 7, 2, 6, 0, 0},
      {BP_EW_STORE, 0, 1, 7, 0, 0},
  };
  bp_scalar_t consts[2] = {{.kind = BP_SCALAR_FLOAT, .v.f = 1.5}, {.kind = BP_SCALAR_FLOAT, .v.f = 0.0}};
  bp_ew_program_t prog = {.struct_size = sizeof prog, .num_instrs = 10, .num_registers = 8, .num_inputs = 2,
                          .num_outputs = 2, .num_constants = 2, .compute_dtype = BP_DTYPE_F32,
                          .instr_stride = sizeof ins[0], .instrs = ins, .constants = consts};
  const bp_tensor_desc_t* dp[4] = {&d[0], &d[1], &d[2], &d[3]};
  assert_int_equal(vt->caps->launch_ew_program(s, &prog, 2, dp, 2, dp + 2), BP_OK);
  assert_int_equal(vt->core->copy_device_to_host(s, buf[2], 0, o0, N * 4), BP_OK);
  assert_int_equal(vt->core->copy_device_to_host(s, buf[3], 0, o1, N), BP_OK);
  assert_int_equal(vt->core->stream_synchronize(s), BP_OK);
  for (int i = 0; i < N; i++) {
    float p = a[i] * b[i];
    float r = p + 1.5f;
    assert_true(o0[i] == (r < 0 ? 0.0f : r));
    assert_int_equal(o1[i], p < 0.0f);
  }
  /* A bad program is refused with a reason, nothing launched. */
  ins[2].a = 9; /* register out of range */
  assert_int_equal(vt->caps->launch_ew_program(s, &prog, 2, dp, 2, dp + 2), BP_INVALID_ARGUMENT);
  for (int k = 0; k < 4; k++) vt->core->buffer_release(buf[k]);
  vt->core->stream_destroy(s);
  vt->core->device_close(dev);
  vt->core->instance_destroy(inst);
}

/* Compiled regions through the public API (region.h): an EW_PROGRAM region
 * runs on the elementwise kernel, other kinds are refused with a reason,
 * and the claim comes from the core (no region_claim slot). */
static void test_compiled_region(void** state) {
  env_t* e = *state;
  enum { M = 33, N = 29 };
  float a[M * N], b[N], got[M * N];
  fill(a, M * N, 12);
  fill(b, N, 13);
  bp_tensor_t* ta = tensor_f32(e, 2, (int64_t[]){M, N}, a);
  bp_tensor_t* tb = tensor_f32(e, 1, (int64_t[]){N}, b);
  bp_tensor_t* to = tensor_f32(e, 2, (int64_t[]){M, N}, NULL);
  bp_ew_instr_t ins[] = {{BP_EW_LOAD_INPUT, 0, 0, 0, 0, 0}, {BP_EW_LOAD_INPUT, 1, 1, 0, 0, 0},
                         {BP_OP_mul, 2, 0, 1, 0, 0},        {BP_EW_LOAD_CONST, 3, 0, 0, 0, 0},
                         {BP_OP_add, 2, 2, 3, 0, 0},        {BP_OP_relu, 2, 2, 0, 0, 0},
                         {BP_EW_STORE, 0, 0, 2, 0, 0}};
  bp_scalar_t c = {.kind = BP_SCALAR_FLOAT, .v.f = 0.25};
  bp_ew_program_t prog = {.struct_size = sizeof prog, .num_instrs = 7, .num_registers = 4, .num_inputs = 2,
                          .num_outputs = 1, .num_constants = 1, .compute_dtype = BP_DTYPE_F32,
                          .instr_stride = sizeof ins[0], .instrs = ins, .constants = &c};
  bp_tensor_desc_t v2 = {.struct_size = sizeof v2, .dtype = BP_DTYPE_F32, .rank = 2, .sizes = {M, N}, .strides = {N, 1}};
  bp_tensor_desc_t v1 = {.struct_size = sizeof v1, .dtype = BP_DTYPE_F32, .rank = 1, .sizes = {N}, .strides = {1}};
  const bp_tensor_desc_t* vals[3] = {&v2, &v1, &v2};
  bp_region_desc_t d = {.struct_size = sizeof d, .kind = BP_REGION_EW_PROGRAM, .num_values = 3, .num_args = 3,
                        .num_inputs = 2, .values = vals, .program = &prog};
  bp_region_t* r = NULL;
  bp_support_t why = {.struct_size = sizeof why};
  assert_int_equal(bp_region_compile(e->dev, &d, &why, &r), BP_OK);
  const bp_tensor_t* args[3] = {ta, tb, to};
  assert_int_equal(bp_region_launch(e->s, r, args, 3, NULL), BP_OK);
  read_f32(e, to, got);
  assert_int_equal(bp_stream_synchronize(e->s), BP_OK);
  for (int i = 0; i < M * N; i++) {
    float x = a[i] * b[i % N] + 0.25f;
    assert_true(got[i] == (x < 0 ? 0.0f : x));
  }
  /* Saved bytes are not something this plugin makes. */
  uint64_t size = 0;
  assert_int_equal(bp_region_serialize(r, NULL, 0, &size), BP_UNIMPLEMENTED);
  bp_region_release(r);
  /* An EPILOGUE region: refused with a reason. */
  uint32_t ids0[3] = {0, 1, 3}, ids1[2] = {3, 2};
  bp_tensor_desc_t sq = {.struct_size = sizeof sq, .dtype = BP_DTYPE_F32, .rank = 2, .sizes = {4, 4}, .strides = {4, 1}};
  const bp_tensor_desc_t* sqv[4] = {&sq, &sq, &sq, &sq};
  bp_region_node_t n0 = {.struct_size = sizeof n0, .op_id = BP_OP_mm, .num_inputs = 2, .num_outputs = 1,
                         .inputs = ids0, .outputs = ids0 + 2};
  bp_region_node_t n1 = {.struct_size = sizeof n1, .op_id = BP_OP_relu, .num_inputs = 1, .num_outputs = 1,
                         .inputs = ids1, .outputs = ids1 + 1};
  const bp_region_node_t* nodes[2] = {&n0, &n1};
  bp_region_desc_t ep = {.struct_size = sizeof ep, .kind = BP_REGION_EPILOGUE, .num_values = 4, .num_args = 3,
                         .num_inputs = 2, .num_nodes = 2, .values = sqv, .nodes = nodes};
  r = NULL;
  assert_int_equal(bp_region_compile(e->dev, &ep, &why, &r), BP_UNIMPLEMENTED);
  assert_null(r);
  assert_int_equal(why.supported, 0);
  assert_non_null(strstr(why.message, "EW_PROGRAM"));
  /* The claim of the same nodes as a graph: each supported node its own group. */
  ep.kind = BP_REGION_GRAPH;
  uint32_t groups[2];
  assert_int_equal(bp_device_claim_region(e->dev, &ep, groups, NULL), BP_OK);
  assert_int_equal(groups[0], 1);
  assert_int_equal(groups[1], 2);
  bp_tensor_release(ta);
  bp_tensor_release(tb);
  bp_tensor_release(to);
}

/* ---- support answers ------------------------------------------------------- */
static void test_support_answers(void** state) {
  env_t* e = *state;
  bp_tensor_desc_t d[2];
  memset(d, 0, sizeof d);
  for (int k = 0; k < 2; k++) {
    d[k].struct_size = sizeof d[k];
    d[k].dtype = BP_DTYPE_F32;
    d[k].rank = 1;
    d[k].sizes[0] = 4;
    d[k].strides[0] = 1;
  }
  bp_op_call_t call = {.struct_size = sizeof call, .op_id = BP_OP_sin, .num_inputs = 1, .num_outputs = 1,
                       .compute_dtype = BP_DTYPE_F32, .inputs = (const bp_tensor_desc_t* const[]){&d[0]},
                       .outputs = (const bp_tensor_desc_t* const[]){&d[1]}};
  bp_support_t sup = {.struct_size = sizeof sup};
  assert_int_equal(bp_device_query_support(e->dev, &call, &sup), BP_OK);
  assert_int_equal(sup.supported, 0); /* f32 sin: argument range not covered */
  assert_int_equal(sup.reason, BP_SUPPORT_DTYPE);
  d[0].dtype = d[1].dtype = BP_DTYPE_F16;
  call.compute_dtype = BP_DTYPE_F16;
  assert_int_equal(bp_device_query_support(e->dev, &call, &sup), BP_OK);
  assert_int_equal(sup.supported, 1);
  call.op_id = BP_OP_sort;
  assert_int_equal(bp_device_query_support(e->dev, &call, &sup), BP_OK);
  assert_int_equal(sup.supported, 0);
  assert_int_equal(sup.reason, BP_SUPPORT_OP);
  /* group quantization: fp8 e4m3fn codes are written as bytes (supported,
   * dense); e4m3fnuz codes are not run */
  bp_group_quant_attrs_t ga = {.struct_size = sizeof ga, .qdtype = BP_DTYPE_F8E4M3FN, .group_size = 2};
  bp_tensor_desc_t scale = d[0];
  d[0].dtype = BP_DTYPE_F32;
  d[1].dtype = BP_DTYPE_F8E4M3FN;
  scale.dtype = BP_DTYPE_F32;
  scale.sizes[0] = 2;
  call.op_id = BP_OP_per_token_group_quant;
  call.attrs = &ga;
  call.num_outputs = 2;
  call.outputs = (const bp_tensor_desc_t* const[]){&d[1], &scale};
  assert_int_equal(bp_device_query_support(e->dev, &call, &sup), BP_OK);
  assert_int_equal(sup.supported, 1);
  assert_int_equal(sup.requires_contiguous, 1);
  ga.qdtype = d[1].dtype = BP_DTYPE_F8E4M3FNUZ;
  assert_int_equal(bp_device_query_support(e->dev, &call, &sup), BP_OK);
  assert_int_equal(sup.supported, 0);
  assert_int_equal(sup.reason, BP_SUPPORT_DTYPE);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_device_properties),
      cmocka_unit_test(test_copies_and_fill),
      cmocka_unit_test(test_add_chain),
      cmocka_unit_test(test_matmul_blocks),
      cmocka_unit_test(test_matmul_packed),
      cmocka_unit_test(test_addmm_epilogue),
      cmocka_unit_test(test_matmul_panel),
      cmocka_unit_test(test_texel_elementwise),
      cmocka_unit_test(test_layer_norm_and_rms_norm),
      cmocka_unit_test(test_fused_and_group_quant),
      cmocka_unit_test(test_paged_cache_round_trip),
      cmocka_unit_test(test_gather_index_select_embedding),
      cmocka_unit_test(test_conv2d_and_pooling),
      cmocka_unit_test(test_fused_program),
      cmocka_unit_test(test_compiled_region),
      cmocka_unit_test(test_support_answers),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
