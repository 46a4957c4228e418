/* Random family on cpu:0: the generator against Random123's known-answer
 * vectors, the documented mapping from elements to stream words, and bit
 * determinism: the same (seed, offset) gives the same bits whatever the
 * call's size, layout or thread split; `offset` moves the stream by 4 words;
 * another seed gives other bits. */
#include <math.h>
#include <stdlib.h>

#include "bp_philox.h"
#include "ops_fixture.h"

static bp_stream_t* g_stream;

static bp_tensor_t* cpu_tensor(uint32_t dtype, uint32_t rank, const int64_t* sizes) {
  return ops_tensor(g_cpu, dtype, rank, sizes);
}

static void read_back(const bp_tensor_t* t, void* dst, size_t bytes) {
  assert_ok(bp_stream_synchronize(g_stream));
  assert_ok(bp_tensor_read(g_stream, t, dst, bytes));
}

static bp_random_attrs_t attrs(uint64_t seed, uint64_t offset) {
  bp_random_attrs_t a = {.struct_size = sizeof a, .train = 1, .seed = seed, .offset = offset, .p = 0.5};
  return a;
}

/* Runs a creation op into a new dense tensor and reads it back. */
static void run_creation(uint32_t op, uint32_t dtype, int64_t n, uint64_t seed, uint64_t offset,
                         void* dst) {
  bp_tensor_t* out = cpu_tensor(dtype, 1, &n);
  bp_random_attrs_t a = attrs(seed, offset);
  bp_tensor_t* o = out;
  assert_ok(bp_op_run(g_stream, op, NULL, 0, &a, &o, 1));
  read_back(out, dst, (size_t)n * bp_dtype_size(dtype));
}

static void test_philox_known_answers(void** state) {
  (void)state;
  /* Random123 kat_vectors, philox4x32_10. */
  static const uint32_t ctr[3][4] = {{0, 0, 0, 0},
                                     {0xffffffffu, 0xffffffffu, 0xffffffffu, 0xffffffffu},
                                     {0x243f6a88u, 0x85a308d3u, 0x13198a2eu, 0x03707344u}};
  static const uint32_t key[3][2] = {{0, 0}, {0xffffffffu, 0xffffffffu}, {0xa4093822u, 0x299f31d0u}};
  static const uint32_t want[3][4] = {{0x6627e8d5u, 0xe169c58du, 0xbc57ac4cu, 0x9b00dbd8u},
                                      {0x408f276du, 0x41c83b0eu, 0xa20bc7c6u, 0x6d5451fdu},
                                      {0xd16cfe09u, 0x94fdccebu, 0x5001e420u, 0x24126ea1u}};
  for (int k = 0; k < 3; k++) {
    uint32_t out[4];
    bp_philox4x32_10(ctr[k], key[k], out);
    for (int w = 0; w < 4; w++) assert_int_equal(out[w], want[k][w]);
  }
  /* The word stream: word n is word n % 4 of counter offset + n / 4. */
  uint32_t words[9];
  bp_philox_words(UINT64_C(0x299f31d0a4093822), 5, 3, 9, words);
  for (int n = 3; n < 12; n++) {
    uint64_t c = 5 + (uint64_t)n / 4;
    const uint32_t cc[4] = {(uint32_t)c, (uint32_t)(c >> 32), 0, 0};
    uint32_t b[4];
    bp_philox4x32_10(cc, key[2], b);
    assert_int_equal(words[n - 3], b[n % 4]);
  }
}

static void test_rand_follows_the_documented_mapping(void** state) {
  (void)state;
  enum { N = 37 };
  const uint64_t seed = 1234567, offset = 99;
  float f[N];
  run_creation(BP_OP_rand, BP_DTYPE_F32, N, seed, offset, f);
  uint32_t w[2 * N];
  bp_philox_words(seed, offset, 0, N, w);
  for (int i = 0; i < N; i++) assert_true(f[i] == (float)((w[i] >> 8) * 0x1p-24));
  double d[N];
  run_creation(BP_OP_rand, BP_DTYPE_F64, N, seed, offset, d);
  bp_philox_words(seed, offset, 0, 2 * N, w);
  for (int i = 0; i < N; i++) {
    uint64_t v = (uint64_t)w[2 * i] | (uint64_t)w[2 * i + 1] << 32;
    assert_true(d[i] == (double)(v >> 11) * 0x1p-53);
  }
  /* randn: Box-Muller on the pair of 24-bit uniforms of (2m, 2m + 1). */
  run_creation(BP_OP_randn, BP_DTYPE_F32, N, seed, offset, f);
  bp_philox_words(seed, offset, 0, N + 1, w);
  for (int i = 0; i < N; i++) {
    int m = i & ~1;
    double u = (w[m] >> 8) * 0x1p-24, v = (w[m + 1] >> 8) * 0x1p-24;
    double r = sqrt(-2.0 * log(1.0 - u)), t = 6.283185307179586 * v;
    double z = (i & 1) ? r * sin(t) : r * cos(t);
    assert_float_equal(f[i], z, 1e-6 * (1.0 + fabs(z)));
  }
}

/* Large calls (split over threads), a strided output and small pieces all
 * give the same bits at the same element index. */
static void test_rand_bits_independent_of_size_and_layout(void** state) {
  (void)state;
  enum { R = 300, C = 401, N = R * C };
  float* a = malloc(sizeof(float) * N);
  float* b = malloc(sizeof(float) * N);
  float* t = malloc(sizeof(float) * N);
  assert_non_null(a);
  assert_non_null(b);
  assert_non_null(t);
  for (int op = 0; op < 2; op++) {
    uint32_t id = op ? BP_OP_randn : BP_OP_rand;
    run_creation(id, BP_DTYPE_F32, N, 42, 7, a);
    run_creation(id, BP_DTYPE_F32, N, 42, 7, b);
    assert_memory_equal(a, b, sizeof(float) * N);
    /* A tail piece: element i of (seed, offset + k) is element i + 4k of (seed, offset). */
    run_creation(id, BP_DTYPE_F32, N - 4 * 1000, 42, 7 + 1000, b);
    assert_memory_equal(a + 4 * 1000, b, sizeof(float) * (N - 4 * 1000));
    /* Another seed: (almost) every element differs. */
    run_creation(id, BP_DTYPE_F32, N, 43, 7, b);
    int same = 0;
    for (int i = 0; i < N; i++) same += a[i] == b[i];
    assert_true(same < N / 1000);
    /* A transposed output: element [r, c] holds the same bits as the dense one. */
    bp_tensor_t* base = cpu_tensor(BP_DTYPE_F32, 2, (int64_t[]){C, R});
    bp_tensor_t* view = NULL;
    assert_ok(bp_tensor_permute(base, (int64_t[]){1, 0}, &view));
    ops_track(view);
    bp_random_attrs_t at = attrs(42, 7);
    bp_tensor_t* o = view;
    assert_ok(bp_op_run(g_stream, id, NULL, 0, &at, &o, 1));
    read_back(base, t, sizeof(float) * N);
    for (int r = 0; r < R; r++)
      for (int c = 0; c < C; c++) assert_true(t[c * R + r] == a[r * C + c] || (isnan(a[r * C + c]) && isnan(t[c * R + r])));
  }
  free(a);
  free(b);
  free(t);
}

static void test_randperm_is_deterministic_permutation(void** state) {
  (void)state;
  enum { N = 3000 };
  int64_t* a = malloc(sizeof(int64_t) * N);
  int64_t* b = malloc(sizeof(int64_t) * N);
  char* seen = calloc(N, 1);
  assert_non_null(a);
  assert_non_null(b);
  assert_non_null(seen);
  run_creation(BP_OP_randperm, BP_DTYPE_I64, N, 5, 0, a);
  run_creation(BP_OP_randperm, BP_DTYPE_I64, N, 5, 0, b);
  assert_memory_equal(a, b, sizeof(int64_t) * N);
  for (int i = 0; i < N; i++) {
    assert_true(a[i] >= 0 && a[i] < N && !seen[a[i]]);
    seen[a[i]] = 1;
  }
  run_creation(BP_OP_randperm, BP_DTYPE_I64, N, 6, 0, b);
  assert_true(memcmp(a, b, sizeof(int64_t) * N) != 0);
  /* A dtype that cannot hold n values is refused (PyTorch's check). */
  int64_t n = 300;
  bp_tensor_t* out = cpu_tensor(BP_DTYPE_I8, 1, &n);
  bp_random_attrs_t at = attrs(1, 0);
  bp_tensor_t* o = out;
  bp_status_t st = bp_op_run(g_stream, BP_OP_randperm, NULL, 0, &at, &o, 1);
  if (st == BP_OK) st = bp_stream_synchronize(g_stream);
  assert_int_equal(st, BP_INVALID_ARGUMENT);
  assert_non_null(strstr(bp_status_message(), "too large"));
  bp_stream_release(g_stream);
  assert_ok(bp_stream_create(g_cpu, NULL, &g_stream));
  free(a);
  free(b);
  free(seen);
}

static void test_dropout_deterministic_and_eval_identity(void** state) {
  (void)state;
  enum { N = 20000 };
  float* x = malloc(sizeof(float) * N);
  float* o1 = malloc(sizeof(float) * N);
  float* o2 = malloc(sizeof(float) * N);
  uint8_t* m1 = malloc(N);
  uint8_t* m2 = malloc(N);
  assert_non_null(x);
  assert_non_null(o1);
  assert_non_null(o2);
  assert_non_null(m1);
  assert_non_null(m2);
  for (int i = 0; i < N; i++) x[i] = (float)(i % 97) - 40.0f;
  int64_t n = N;
  bp_tensor_t* in = cpu_tensor(BP_DTYPE_F32, 1, &n);
  assert_ok(bp_tensor_write(g_stream, in, x, sizeof(float) * N));
  for (int run = 0; run < 3; run++) {
    bp_random_attrs_t a = attrs(run == 2 ? 10 : 9, 3);
    a.p = 0.25;
    bp_tensor_t *out = NULL, *mask = NULL;
    assert_ok(bp_op_dropout(g_stream, in, &a, &out, &mask));
    ops_track(out);
    ops_track(mask);
    read_back(out, run ? o2 : o1, sizeof(float) * N);
    read_back(mask, run ? m2 : m1, N);
    if (run == 1) {
      assert_memory_equal(o1, o2, sizeof(float) * N);
      assert_memory_equal(m1, m2, N);
    }
  }
  assert_true(memcmp(m1, m2, N) != 0); /* another seed, another mask */
  /* The mask is the uniform of the documented mapping compared with p. */
  uint32_t* w = malloc(sizeof(uint32_t) * N);
  assert_non_null(w);
  bp_philox_words(9, 3, 0, N, w);
  for (int i = 0; i < N; i++) {
    int keep = (w[i] >> 8) * 0x1p-24 >= 0.25;
    assert_int_equal(m1[i], keep);
    assert_true(o1[i] == (keep ? x[i] * (float)(1.0 / 0.75) : x[i] * 0.0f));
  }
  free(w);
  /* Evaluation mode: identity, every element kept. */
  bp_random_attrs_t e = attrs(9, 3);
  e.train = 0;
  bp_tensor_t *out = NULL, *mask = NULL;
  assert_ok(bp_op_dropout(g_stream, in, &e, &out, &mask));
  ops_track(out);
  ops_track(mask);
  read_back(out, o1, sizeof(float) * N);
  read_back(mask, m1, N);
  assert_memory_equal(o1, x, sizeof(float) * N);
  for (int i = 0; i < N; i++) assert_int_equal(m1[i], 1);
  free(x);
  free(o1);
  free(o2);
  free(m1);
  free(m2);
}

int main(void) {
  if (ops_fixture_setup() != 0 || g_cpu == NULL) return 1;
  if (bp_stream_create(g_cpu, NULL, &g_stream) != BP_OK) return 1;
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_philox_known_answers),
      cmocka_unit_test_teardown(test_rand_follows_the_documented_mapping, ops_release_all),
      cmocka_unit_test_teardown(test_rand_bits_independent_of_size_and_layout, ops_release_all),
      cmocka_unit_test_teardown(test_randperm_is_deterministic_permutation, ops_release_all),
      cmocka_unit_test_teardown(test_dropout_deterministic_and_eval_identity, ops_release_all),
  };
  int failed = cmocka_run_group_tests_name("random", tests, NULL, NULL);
  bp_stream_release(g_stream);
  bp_context_release(g_ctx);
  return failed;
}
