/* Tensors: creation, from_buffer, accessors, every view, read/write. */
#include "runtime_fixture.h"

#include <stdlib.h>

#include "internal.h"

/* A dense f32 tensor on a0 holding 0, 1, 2, ... */
static bp_tensor_t* iota_f32(fixture_t* f, uint32_t rank, const int64_t* sizes) {
  bp_tensor_t* t = NULL;
  assert_ok(bp_tensor_create(f->a0, BP_DTYPE_F32, rank, sizes, &t));
  int64_t n = bp_tensor_numel(t);
  float* data = malloc((size_t)(n ? n : 1) * sizeof(float));
  assert_non_null(data);
  for (int64_t i = 0; i < n; ++i) data[i] = (float)i;
  assert_ok(bp_tensor_write(f->sa0, t, data, (uint64_t)n * sizeof(float)));
  free(data);
  return t;
}

static void assert_layout(const bp_tensor_t* t, uint32_t rank, const int64_t* sizes,
                          const int64_t* strides, uint64_t byte_offset) {
  assert_int_equal(bp_tensor_rank(t), rank);
  for (uint32_t d = 0; d < rank; ++d) {
    assert_int_equal(bp_tensor_sizes(t)[d], sizes[d]);
    assert_int_equal(bp_tensor_strides(t)[d], strides[d]);
  }
  assert_int_equal(bp_tensor_byte_offset(t), byte_offset);
}

/* Reads a float tensor and compares with `expected` (numel entries). */
static void assert_values(fixture_t* f, const bp_tensor_t* t, const float* expected, size_t n) {
  float* out = malloc((n ? n : 1) * sizeof(float));
  assert_non_null(out);
  assert_int_equal(bp_tensor_numel(t), (int64_t)n);
  assert_ok(bp_tensor_read(f->sa0, t, out, n * sizeof(float)));
  for (size_t i = 0; i < n; ++i) {
    if (out[i] != expected[i]) print_error("element %zu: %g != %g\n", i, out[i], expected[i]);
    assert_true(out[i] == expected[i]);
  }
  free(out);
}

/* ---- creation ------------------------------------------------------------ */
static void test_tensor_create(void** state) {
  fixture_t* f = *state;
  bp_tensor_t* t = NULL;
  const int64_t sizes[3] = {2, 3, 4};
  const int64_t strides[3] = {12, 4, 1};
  assert_ok(bp_tensor_create(f->a0, BP_DTYPE_F16, 3, sizes, &t));
  assert_int_equal(bp_tensor_dtype(t), BP_DTYPE_F16);
  assert_layout(t, 3, sizes, strides, 0);
  assert_int_equal(bp_tensor_numel(t), 24);
  assert_int_equal(bp_buffer_size(bp_tensor_buffer(t)), 48);
  assert_ptr_equal(bp_tensor_device(t), f->a0);
  assert_true(bp_tensor_is_contiguous(t));
  bp_tensor_desc_t desc;
  memset(&desc, 0xff, sizeof(desc));
  /* An uninitialized struct_size is refused; the caller's size is used. */
  assert_int_equal(bp_tensor_get_desc(t, &desc), BP_INVALID_ARGUMENT);
  desc.struct_size = sizeof(desc);
  assert_int_equal(bp_tensor_get_desc(t, &desc), BP_OK);
  assert_int_equal(desc.struct_size, sizeof(desc));
  assert_int_equal(desc.dtype, BP_DTYPE_F16);
  assert_int_equal(desc.rank, 3);
  assert_int_equal(desc.flags, 0);
  assert_ptr_equal(desc.buffer, bp_tensor_buffer(t)->handle);
  assert_int_equal(desc.sizes[2], 4);
  assert_int_equal(desc.strides[0], 12);
  assert_int_equal(desc.sizes[3], 0); /* unused entries are zero */
  bp_tensor_release(t);

  /* A 0-d tensor has one element; an empty one gets a zero-size buffer. */
  assert_ok(bp_tensor_create(f->a0, BP_DTYPE_I64, 0, NULL, &t));
  assert_int_equal(bp_tensor_numel(t), 1);
  assert_int_equal(bp_buffer_size(bp_tensor_buffer(t)), 8);
  bp_tensor_release(t);
  const int64_t empty[2] = {0, 5};
  assert_ok(bp_tensor_create(f->a0, BP_DTYPE_F32, 2, empty, &t));
  assert_int_equal(bp_tensor_numel(t), 0);
  assert_int_equal(bp_buffer_size(bp_tensor_buffer(t)), 0);
  assert_int_equal(bp_tensor_strides(t)[0], 5);
  assert_true(bp_tensor_is_contiguous(t));
  assert_ok(bp_tensor_read(f->sa0, t, NULL, 0));
  bp_tensor_release(t);
  assert_int_equal(fake_used_bytes(f->a0, BP_MEMORY_DEVICE), 0);
}

static void test_tensor_create_errors(void** state) {
  fixture_t* f = *state;
  bp_tensor_t* t = NULL;
  const int64_t nine[9] = {1, 1, 1, 1, 1, 1, 1, 1, 1};
  const int64_t negative[2] = {3, -1};
  const int64_t huge[2] = {INT64_C(1) << 32, INT64_C(1) << 32};
  const int64_t huge_bytes[1] = {INT64_C(1) << 62};
  const int64_t too_big[1] = {INT64_C(1) << 40};
  assert_status_msg(bp_tensor_create(f->a0, BP_DTYPE_F32, 9, nine, &t), BP_INVALID_ARGUMENT,
                    "rank 9 exceeds the maximum 8");
  assert_status_msg(bp_tensor_create(f->a0, BP_DTYPE_F32, 2, negative, &t), BP_INVALID_ARGUMENT,
                    "size -1 of dim 1 is negative");
  assert_status_msg(bp_tensor_create(f->a0, BP_DTYPE_F32, 2, huge, &t), BP_INVALID_ARGUMENT,
                    "overflows");
  assert_status_msg(bp_tensor_create(f->a0, BP_DTYPE_F32, 1, huge_bytes, &t), BP_INVALID_ARGUMENT,
                    "overflows");
  assert_status_msg(bp_tensor_create(f->a0, 99, 1, negative, &t), BP_INVALID_ARGUMENT,
                    "invalid dtype 99");
  assert_status_msg(bp_tensor_create(f->a0, BP_DTYPE_F32, 2, NULL, &t), BP_INVALID_ARGUMENT,
                    "bp_tensor_create: argument 'sizes' is NULL");
  assert_status_msg(bp_tensor_create(f->a0, BP_DTYPE_F32, 1, too_big, &t), BP_RESOURCE_EXHAUSTED,
                    "requested");
  assert_null(t);
}

static void test_tensor_create_strided(void** state) {
  fixture_t* f = *state;
  bp_tensor_t* t = NULL;
  const int64_t sizes[2] = {2, 3};
  const int64_t strides[2] = {1, 2};
  const int64_t bad[2] = {1, -2};
  assert_ok(bp_tensor_create_strided(f->a0, BP_DTYPE_F32, 2, sizes, strides, &t));
  /* Last element at 1*1 + 2*2 = 5: six elements' worth. */
  assert_int_equal(bp_buffer_size(bp_tensor_buffer(t)), 24);
  assert_false(bp_tensor_is_contiguous(t));
  const float in[6] = {0, 1, 2, 3, 4, 5};
  assert_ok(bp_tensor_write(f->sa0, t, in, sizeof(in)));
  assert_values(f, t, in, 6);
  bp_tensor_release(t);
  assert_status_msg(bp_tensor_create_strided(f->a0, BP_DTYPE_F32, 2, sizes, bad, &t),
                    BP_INVALID_ARGUMENT, "stride -2 of dim 1 is negative");
}

static void test_tensor_from_buffer(void** state) {
  fixture_t* f = *state;
  bp_buffer_t* buf = NULL;
  bp_tensor_t* t = NULL;
  const int64_t sizes[2] = {4, 4};
  const int64_t overflow_strides[2] = {INT64_MAX, 1};
  const int64_t neg_strides[2] = {-4, 1};
  const int64_t empty[2] = {0, 4};
  assert_ok(bp_buffer_allocate(f->a0, 0, 64, &buf));
  assert_ok(bp_tensor_from_buffer(buf, BP_DTYPE_F32, 2, sizes, NULL, 0, &t)); /* exact fit */
  assert_ptr_equal(bp_tensor_buffer(t), buf);
  assert_int_equal(atomic_load(&buf->refcount), 2);
  bp_tensor_release(t);
  t = NULL;
  assert_int_equal(atomic_load(&buf->refcount), 1);
  assert_status_msg(bp_tensor_from_buffer(buf, BP_DTYPE_F32, 2, sizes, NULL, 4, &t),
                    BP_OUT_OF_RANGE, "elements span bytes [4, 68) but the buffer has 64 bytes");
  assert_status_msg(bp_tensor_from_buffer(buf, BP_DTYPE_F32, 2, sizes, NULL, 2, &t),
                    BP_INVALID_ARGUMENT, "not a multiple of the element size 4");
  assert_status_msg(bp_tensor_from_buffer(buf, BP_DTYPE_F32, 2, sizes, overflow_strides, 0, &t),
                    BP_OUT_OF_RANGE, "overflows");
  assert_status_msg(bp_tensor_from_buffer(buf, BP_DTYPE_F32, 2, sizes, neg_strides, 48, &t),
                    BP_INVALID_ARGUMENT, "negative strides are not supported");
  assert_null(t);
  /* An empty tensor touches nothing, wherever it starts, whatever its
   * strides; views of it still check their arithmetic. */
  assert_ok(bp_tensor_from_buffer(buf, BP_DTYPE_F32, 2, empty, NULL, 4096, &t));
  bp_tensor_release(t);
  const int64_t empty2[2] = {0, 2};
  const int64_t wild[2] = {1, INT64_MAX};
  bp_tensor_t* u = NULL;
  assert_ok(bp_tensor_from_buffer(buf, BP_DTYPE_F32, 2, empty2, wild, 0, &t));
  assert_status_msg(bp_tensor_unsqueeze(t, 1, &u), BP_OUT_OF_RANGE, "overflows");
  assert_status_msg(bp_tensor_diagonal(t, 0, 0, 1, &u), BP_OUT_OF_RANGE, "overflows");
  assert_null(u);
  bp_tensor_release(t);
  t = NULL;
  /* Sizes of 1 ignore strides for contiguity (PyTorch). */
  const int64_t s3[3] = {2, 1, 3};
  const int64_t st3[3] = {3, 99, 1};
  assert_ok(bp_tensor_from_buffer(buf, BP_DTYPE_F32, 3, s3, st3, 0, &t));
  assert_true(bp_tensor_is_contiguous(t));
  bp_tensor_release(t);
  const int64_t s2[2] = {3, 2};
  const int64_t st2[2] = {1, 3};
  assert_ok(bp_tensor_from_buffer(buf, BP_DTYPE_F32, 2, s2, st2, 0, &t));
  assert_false(bp_tensor_is_contiguous(t));
  bp_tensor_release(t);
  bp_buffer_release(buf);
}

/* ---- views ------------------------------------------------------------- */
static void test_view_alias_permute(void** state) {
  fixture_t* f = *state;
  const int64_t sizes[3] = {2, 3, 4};
  bp_tensor_t* t = iota_f32(f, 3, sizes);
  bp_tensor_t* v = NULL;
  assert_ok(bp_tensor_alias(t, &v));
  assert_ptr_equal(bp_tensor_buffer(v), bp_tensor_buffer(t));
  assert_int_equal(atomic_load(&bp_tensor_buffer(t)->refcount), 2);
  bp_tensor_release(v);

  const int64_t dims[3] = {2, 0, -2};
  const int64_t psizes[3] = {4, 2, 3}, pstrides[3] = {1, 12, 4};
  assert_ok(bp_tensor_permute(t, dims, &v));
  assert_layout(v, 3, psizes, pstrides, 0);
  assert_false(bp_tensor_is_contiguous(v));
  float expected[24];
  for (int a = 0, k = 0; a < 4; ++a)
    for (int b = 0; b < 2; ++b)
      for (int c = 0; c < 3; ++c) expected[k++] = (float)(b * 12 + c * 4 + a);
  assert_values(f, v, expected, 24);
  bp_tensor_release(v);
  v = NULL;
  const int64_t repeat[3] = {0, 0, 1};
  const int64_t outside[3] = {0, 1, 3};
  assert_status_msg(bp_tensor_permute(t, repeat, &v), BP_INVALID_ARGUMENT, "dim 0 repeats");
  assert_status_msg(bp_tensor_permute(t, outside, &v), BP_INVALID_ARGUMENT,
                    "dim 3 out of range for 3 dims");
  assert_null(v);
  bp_tensor_release(t);
}

static void test_view_slice(void** state) {
  fixture_t* f = *state;
  const int64_t sizes[1] = {10};
  bp_tensor_t* t = iota_f32(f, 1, sizes);
  bp_tensor_t* v = NULL;
  /* t[1:8:3] = 1, 4, 7 */
  assert_ok(bp_tensor_slice(t, 0, 1, 8, 3, &v));
  const int64_t s1[1] = {3}, st1[1] = {3};
  assert_layout(v, 1, s1, st1, 4);
  const float e1[3] = {1, 4, 7};
  assert_values(f, v, e1, 3);
  bp_tensor_release(v);
  /* t[-3:] = 7, 8, 9 (end past the size clamps) */
  assert_ok(bp_tensor_slice(t, -1, -3, INT64_MAX, 1, &v));
  const float e2[3] = {7, 8, 9};
  assert_values(f, v, e2, 3);
  bp_tensor_release(v);
  /* t[-100:2] = 0, 1 */
  assert_ok(bp_tensor_slice(t, 0, -100, 2, 1, &v));
  const float e3[2] = {0, 1};
  assert_values(f, v, e3, 2);
  bp_tensor_release(v);
  /* t[6:3] and t[20:30] are empty */
  assert_ok(bp_tensor_slice(t, 0, 6, 3, 1, &v));
  assert_int_equal(bp_tensor_numel(v), 0);
  bp_tensor_release(v);
  assert_ok(bp_tensor_slice(t, 0, 20, 30, 2, &v));
  assert_int_equal(bp_tensor_numel(v), 0);
  bp_tensor_release(v);
  /* t[1::huge] = [1]; the size computation must not overflow. */
  assert_ok(bp_tensor_slice(t, 0, 1, INT64_MAX, INT64_MAX, &v));
  const float e4[1] = {1};
  assert_values(f, v, e4, 1);
  bp_tensor_release(v);
  v = NULL;
  assert_status_msg(bp_tensor_slice(t, 0, 0, 5, 0, &v), BP_INVALID_ARGUMENT,
                    "step 0 must be positive");
  assert_status_msg(bp_tensor_slice(t, 0, 0, 5, -1, &v), BP_INVALID_ARGUMENT, "positive");
  assert_status_msg(bp_tensor_slice(t, 1, 0, 5, 1, &v), BP_INVALID_ARGUMENT, "dim 1 out of range");
  assert_null(v);
  bp_tensor_release(t);
}

static void test_view_select(void** state) {
  fixture_t* f = *state;
  const int64_t sizes[2] = {3, 4};
  bp_tensor_t* t = iota_f32(f, 2, sizes);
  bp_tensor_t* v = NULL;
  assert_ok(bp_tensor_select(t, 0, -1, &v)); /* last row */
  const int64_t s1[1] = {4}, st1[1] = {1};
  assert_layout(v, 1, s1, st1, 32);
  const float e1[4] = {8, 9, 10, 11};
  assert_values(f, v, e1, 4);
  bp_tensor_release(v);
  assert_ok(bp_tensor_select(t, 1, 2, &v)); /* column 2 */
  const float e2[3] = {2, 6, 10};
  assert_values(f, v, e2, 3);
  bp_tensor_t* scalar = NULL;
  assert_ok(bp_tensor_select(v, 0, 1, &scalar)); /* 0-d */
  assert_int_equal(bp_tensor_rank(scalar), 0);
  const float e3[1] = {6};
  assert_values(f, scalar, e3, 1);
  v = (bp_tensor_release(v), NULL);
  assert_status_msg(bp_tensor_select(scalar, 0, 0, &v), BP_INVALID_ARGUMENT,
                    "out of range for 0 dims");
  bp_tensor_release(scalar);
  assert_status_msg(bp_tensor_select(t, 1, 4, &v), BP_OUT_OF_RANGE,
                    "index 4 out of range for dim 1 of size 4");
  assert_status_msg(bp_tensor_select(t, 0, -4, &v), BP_OUT_OF_RANGE, "index -4");
  assert_null(v);
  bp_tensor_release(t);
}

static void test_view_expand(void** state) {
  fixture_t* f = *state;
  const int64_t sizes[2] = {3, 1};
  bp_tensor_t* t = iota_f32(f, 2, sizes);
  bp_tensor_t* v = NULL;
  const int64_t to[3] = {2, -1, 4};
  assert_ok(bp_tensor_expand(t, 3, to, &v));
  const int64_t es[3] = {2, 3, 4}, est[3] = {0, 1, 0};
  assert_layout(v, 3, es, est, 0);
  float expected[24];
  for (int i = 0; i < 24; ++i) expected[i] = (float)((i / 4) % 3);
  assert_values(f, v, expected, 24);
  /* Writing an expanded view is refused (elements share memory). */
  assert_status_msg(bp_tensor_write(f->sa0, v, expected, sizeof(expected)), BP_INVALID_ARGUMENT,
                    "stride 0");
  bp_tensor_release(v);
  v = NULL;
  const int64_t bad[2] = {4, 4};
  const int64_t fewer[1] = {3};
  const int64_t lead_neg[3] = {-1, 3, 1};
  assert_status_msg(bp_tensor_expand(t, 2, bad, &v), BP_INVALID_ARGUMENT,
                    "size 4 of dim 0 must match the existing size 3");
  assert_status_msg(bp_tensor_expand(t, 1, fewer, &v), BP_INVALID_ARGUMENT, "cannot remove dims");
  assert_status_msg(bp_tensor_expand(t, 3, lead_neg, &v), BP_INVALID_ARGUMENT, "new leading dim 0");
  assert_null(v);
  /* Size 1 to 0 is allowed (PyTorch). */
  const int64_t zero[2] = {3, 0};
  assert_ok(bp_tensor_expand(t, 2, zero, &v));
  assert_int_equal(bp_tensor_numel(v), 0);
  bp_tensor_release(v);
  bp_tensor_release(t);
}

static void test_view_view(void** state) {
  fixture_t* f = *state;
  const int64_t sizes[3] = {2, 3, 4};
  bp_tensor_t* t = iota_f32(f, 3, sizes);
  bp_tensor_t* v = NULL;
  const int64_t shape[2] = {4, -1};
  assert_ok(bp_tensor_view(t, 2, shape, &v));
  const int64_t vs[2] = {4, 6}, vst[2] = {6, 1};
  assert_layout(v, 2, vs, vst, 0);
  bp_tensor_release(v);
  v = NULL;
  const int64_t two_infer[2] = {-1, -1};
  const int64_t wrong[2] = {5, 5};
  const int64_t indivisible[2] = {5, -1};
  assert_status_msg(bp_tensor_view(t, 2, two_infer, &v), BP_INVALID_ARGUMENT,
                    "only one size may be -1");
  assert_status_msg(bp_tensor_view(t, 2, wrong, &v), BP_INVALID_ARGUMENT,
                    "shape has 25 elements but the tensor has 24");
  assert_status_msg(bp_tensor_view(t, 2, indivisible, &v), BP_INVALID_ARGUMENT,
                    "invalid for 24 elements");

  /* A permuted tensor: sizes [3, 2, 4], strides [4, 12, 1]. Splitting dims
   * works; merging dims 0 and 1 (not adjacent in memory) does not. */
  const int64_t perm[3] = {1, 0, 2};
  bp_tensor_t* p = NULL;
  assert_ok(bp_tensor_permute(t, perm, &p));
  const int64_t split[4] = {3, 2, 2, 2};
  assert_ok(bp_tensor_view(p, 4, split, &v));
  const int64_t ss[4] = {3, 2, 2, 2}, sst[4] = {4, 12, 2, 1};
  assert_layout(v, 4, ss, sst, 0);
  bp_tensor_release(v);
  v = NULL;
  const int64_t merge[2] = {6, 4};
  const int64_t flat[1] = {-1};
  assert_status_msg(bp_tensor_view(p, 2, merge, &v), BP_INVALID_ARGUMENT, "incompatible");
  assert_status_msg(bp_tensor_view(p, 1, flat, &v), BP_INVALID_ARGUMENT, "incompatible");
  assert_null(v);
  /* Merging the two dims that are adjacent in memory (1 and 2 of the
   * original, i.e. after a slice that keeps them dense) works. */
  bp_tensor_t* s = NULL;
  assert_ok(bp_tensor_slice(t, 0, 1, 2, 1, &s)); /* [1, 3, 4] at offset 12 */
  const int64_t twelve[1] = {12};
  assert_ok(bp_tensor_view(s, 1, twelve, &v));
  const int64_t ts[1] = {12}, tst[1] = {1};
  assert_layout(v, 1, ts, tst, 48);
  float e[12];
  for (int i = 0; i < 12; ++i) e[i] = (float)(12 + i);
  assert_values(f, v, e, 12);
  bp_tensor_release(v);
  bp_tensor_release(s);
  bp_tensor_release(p);

  /* [1, 1] -> 0-d, and 0-d -> [1, 1, 1]. */
  const int64_t ones[2] = {1, 1};
  bp_tensor_t* o = NULL;
  bp_tensor_t* scalar = NULL;
  assert_ok(bp_tensor_create(f->a0, BP_DTYPE_F32, 2, ones, &o));
  assert_ok(bp_tensor_view(o, 0, NULL, &scalar));
  assert_int_equal(bp_tensor_rank(scalar), 0);
  const int64_t three_ones[3] = {1, 1, 1};
  assert_ok(bp_tensor_view(scalar, 3, three_ones, &v));
  const int64_t one_strides[3] = {1, 1, 1};
  assert_layout(v, 3, three_ones, one_strides, 0);
  bp_tensor_release(v);
  bp_tensor_release(scalar);
  bp_tensor_release(o);

  /* Empty tensors: -1 cannot be inferred next to a 0. */
  const int64_t empty[2] = {0, 3};
  const int64_t empty_view[2] = {3, 0};
  const int64_t empty_infer[2] = {0, -1};
  bp_tensor_t* z = NULL;
  assert_ok(bp_tensor_create(f->a0, BP_DTYPE_F32, 2, empty, &z));
  assert_ok(bp_tensor_view(z, 2, empty_view, &v));
  const int64_t ezst[2] = {1, 1};
  assert_layout(v, 2, empty_view, ezst, 0);
  bp_tensor_release(v);
  v = NULL;
  assert_status_msg(bp_tensor_view(z, 2, empty_infer, &v), BP_INVALID_ARGUMENT, "cannot infer");
  bp_tensor_release(z);
  bp_tensor_release(t);
}

static void test_view_squeeze_unsqueeze(void** state) {
  fixture_t* f = *state;
  const int64_t sizes[3] = {3, 1, 2};
  bp_tensor_t* t = iota_f32(f, 3, sizes);
  bp_tensor_t* v = NULL;
  assert_ok(bp_tensor_squeeze(t, -2, &v));
  const int64_t s1[2] = {3, 2}, st1[2] = {2, 1};
  assert_layout(v, 2, s1, st1, 0);
  bp_tensor_release(v);
  assert_ok(bp_tensor_squeeze(t, 0, &v)); /* size 3: no-op */
  assert_layout(v, 3, sizes, bp_tensor_strides(t), 0);
  bp_tensor_release(v);
  v = NULL;
  assert_status_msg(bp_tensor_squeeze(t, 3, &v), BP_INVALID_ARGUMENT, "dim 3 out of range");

  const int64_t two[2] = {3, 4};
  bp_tensor_t* m = iota_f32(f, 2, two);
  assert_ok(bp_tensor_unsqueeze(m, 0, &v));
  const int64_t u0[3] = {1, 3, 4}, u0s[3] = {12, 4, 1};
  assert_layout(v, 3, u0, u0s, 0);
  bp_tensor_release(v);
  assert_ok(bp_tensor_unsqueeze(m, 1, &v));
  const int64_t u1[3] = {3, 1, 4}, u1s[3] = {4, 4, 1};
  assert_layout(v, 3, u1, u1s, 0);
  bp_tensor_release(v);
  assert_ok(bp_tensor_unsqueeze(m, -1, &v));
  const int64_t u2[3] = {3, 4, 1}, u2s[3] = {4, 1, 1};
  assert_layout(v, 3, u2, u2s, 0);
  bp_tensor_release(v);
  v = NULL;
  assert_status_msg(bp_tensor_unsqueeze(m, 3, &v), BP_INVALID_ARGUMENT, "dim 3 out of range for 3");
  assert_status_msg(bp_tensor_unsqueeze(m, -4, &v), BP_INVALID_ARGUMENT, "dim -4");

  /* 0-d: squeeze(0) keeps it; unsqueeze(0) gives [1]. */
  bp_tensor_t* scalar = NULL;
  assert_ok(bp_tensor_create(f->a0, BP_DTYPE_F32, 0, NULL, &scalar));
  assert_ok(bp_tensor_squeeze(scalar, -1, &v));
  assert_int_equal(bp_tensor_rank(v), 0);
  bp_tensor_release(v);
  v = NULL;
  assert_status_msg(bp_tensor_squeeze(scalar, 1, &v), BP_INVALID_ARGUMENT, "0-d");
  assert_ok(bp_tensor_unsqueeze(scalar, 0, &v));
  assert_int_equal(bp_tensor_rank(v), 1);
  bp_tensor_release(v);
  bp_tensor_release(scalar);

  /* Rank 8 cannot grow. */
  const int64_t eight[8] = {1, 1, 1, 1, 1, 1, 1, 1};
  bp_tensor_t* big = NULL;
  v = NULL;
  assert_ok(bp_tensor_create(f->a0, BP_DTYPE_U8, 8, eight, &big));
  assert_status_msg(bp_tensor_unsqueeze(big, 0, &v), BP_INVALID_ARGUMENT, "maximum rank 8");
  assert_null(v);
  bp_tensor_release(big);
  bp_tensor_release(m);
  bp_tensor_release(t);
}

static void test_view_diagonal(void** state) {
  fixture_t* f = *state;
  const int64_t sizes[2] = {3, 4};
  bp_tensor_t* t = iota_f32(f, 2, sizes);
  bp_tensor_t* v = NULL;
  assert_ok(bp_tensor_diagonal(t, 0, 0, 1, &v));
  const int64_t d0[1] = {3}, d0s[1] = {5};
  assert_layout(v, 1, d0, d0s, 0);
  const float e0[3] = {0, 5, 10};
  assert_values(f, v, e0, 3);
  bp_tensor_release(v);
  assert_ok(bp_tensor_diagonal(t, 1, 0, 1, &v));
  const float e1[3] = {1, 6, 11};
  assert_values(f, v, e1, 3);
  bp_tensor_release(v);
  assert_ok(bp_tensor_diagonal(t, -1, 0, 1, &v));
  const float e2[2] = {4, 9};
  assert_values(f, v, e2, 2);
  bp_tensor_release(v);
  assert_ok(bp_tensor_diagonal(t, 0, 1, 0, &v)); /* dims swapped: same diagonal */
  assert_values(f, v, e0, 3);
  /* Write through the diagonal. */
  const float w[3] = {-1, -2, -3};
  assert_ok(bp_tensor_write(f->sa0, v, w, sizeof(w)));
  bp_tensor_release(v);
  float full[12];
  for (int i = 0; i < 12; ++i) full[i] = (float)i;
  full[0] = -1;
  full[5] = -2;
  full[10] = -3;
  assert_values(f, t, full, 12);
  assert_ok(bp_tensor_diagonal(t, 10, 0, 1, &v));
  assert_int_equal(bp_tensor_numel(v), 0);
  bp_tensor_release(v);
  assert_ok(bp_tensor_diagonal(t, INT64_MIN, 0, 1, &v));
  assert_int_equal(bp_tensor_numel(v), 0);
  bp_tensor_release(v);
  v = NULL;
  assert_status_msg(bp_tensor_diagonal(t, 0, 1, -1, &v), BP_INVALID_ARGUMENT, "must differ");
  bp_tensor_t* row = NULL;
  assert_ok(bp_tensor_select(t, 0, 0, &row));
  assert_status_msg(bp_tensor_diagonal(row, 0, 0, 1, &v), BP_INVALID_ARGUMENT, "at least 2");
  assert_null(v);
  bp_tensor_release(row);
  /* Rank 3: the diagonal dim goes last. */
  const int64_t s3[3] = {2, 3, 2};
  bp_tensor_t* c = iota_f32(f, 3, s3);
  assert_ok(bp_tensor_diagonal(c, 0, 0, 2, &v));
  const int64_t dsz[2] = {3, 2}, dst[2] = {2, 7};
  assert_layout(v, 2, dsz, dst, 0);
  const float e3[6] = {0, 7, 2, 9, 4, 11};
  assert_values(f, v, e3, 6);
  bp_tensor_release(v);
  bp_tensor_release(c);
  bp_tensor_release(t);
}

static void test_view_as_strided(void** state) {
  fixture_t* f = *state;
  const int64_t sizes[1] = {12};
  bp_tensor_t* t = iota_f32(f, 1, sizes);
  bp_tensor_t* v = NULL;
  const int64_t s[2] = {2, 2}, st[2] = {1, 2};
  assert_ok(bp_tensor_as_strided(t, 2, s, st, &(int64_t){1}, &v));
  assert_layout(v, 2, s, st, 4);
  const float e[4] = {1, 3, 2, 4};
  assert_values(f, v, e, 4);
  bp_tensor_t* v2 = NULL;
  assert_ok(bp_tensor_as_strided(v, 2, s, st, NULL, &v2)); /* NULL keeps the offset */
  assert_int_equal(bp_tensor_byte_offset(v2), 4);
  bp_tensor_release(v2);
  bp_tensor_release(v);
  v = NULL;
  const int64_t far[2] = {2, 6};
  const int64_t neg[2] = {1, -1};
  assert_status_msg(bp_tensor_as_strided(t, 2, s, far, &(int64_t){6}, &v), BP_OUT_OF_RANGE,
                    "but the buffer has 48 bytes");
  assert_status_msg(bp_tensor_as_strided(t, 2, s, st, &(int64_t){11}, &v), BP_OUT_OF_RANGE, "[44, 60)");
  assert_status_msg(bp_tensor_as_strided(t, 2, s, neg, &(int64_t){4}, &v), BP_INVALID_ARGUMENT, "negative");
  assert_status_msg(bp_tensor_as_strided(t, 2, s, st, &(int64_t){-2}, &v), BP_INVALID_ARGUMENT,
                    "storage_offset_elems -2");
  assert_status_msg(bp_tensor_as_strided(t, 2, s, st, &(int64_t){INT64_MAX}, &v), BP_OUT_OF_RANGE, "offset");
  assert_null(v);
  bp_tensor_release(t);
}

/* ---- read/write through views -------------------------------------------- */
static void test_io_permuted_write(void** state) {
  fixture_t* f = *state;
  const int64_t sizes[2] = {2, 3};
  bp_tensor_t* t = iota_f32(f, 2, sizes);
  bp_tensor_t* p = NULL;
  const int64_t dims[2] = {1, 0};
  assert_ok(bp_tensor_permute(t, dims, &p)); /* [3, 2] */
  const float in[6] = {10, 11, 12, 13, 14, 15};
  assert_ok(bp_tensor_write(f->sa0, p, in, sizeof(in)));
  /* t[j][i] = p[i][j] = in[i * 2 + j] */
  const float expected[6] = {10, 12, 14, 11, 13, 15};
  assert_values(f, t, expected, 6);
  assert_values(f, p, in, 6);
  bp_tensor_release(p);
  bp_tensor_release(t);
}

static void test_io_slices(void** state) {
  fixture_t* f = *state;
  const int64_t sizes[1] = {10};
  bp_tensor_t* t = iota_f32(f, 1, sizes);
  bp_tensor_t* odd = NULL;
  assert_ok(bp_tensor_slice(t, 0, 1, 10, 2, &odd));
  const float e[5] = {1, 3, 5, 7, 9};
  assert_values(f, odd, e, 5);
  /* Writing the odd elements keeps the even ones (read-modify-write). */
  const float w[5] = {-1, -3, -5, -7, -9};
  assert_ok(bp_tensor_write(f->sa0, odd, w, sizeof(w)));
  const float all[10] = {0, -1, 2, -3, 4, -5, 6, -7, 8, -9};
  assert_values(f, t, all, 10);
  bp_tensor_release(odd);

  /* 2-D: a column block of a row-major matrix with an offset. */
  const int64_t msz[2] = {4, 5};
  bp_tensor_t* m = iota_f32(f, 2, msz);
  bp_tensor_t* rows = NULL;
  bp_tensor_t* block = NULL;
  assert_ok(bp_tensor_slice(m, 0, 1, 3, 1, &rows));
  assert_ok(bp_tensor_slice(rows, 1, 2, 4, 1, &block)); /* m[1:3, 2:4] */
  const float be[4] = {7, 8, 12, 13};
  assert_values(f, block, be, 4);
  const float bw[4] = {70, 80, 120, 130};
  assert_ok(bp_tensor_write(f->sa0, block, bw, sizeof(bw)));
  float me[20];
  for (int i = 0; i < 20; ++i) me[i] = (float)i;
  me[7] = 70;
  me[8] = 80;
  me[12] = 120;
  me[13] = 130;
  assert_values(f, m, me, 20);
  bp_tensor_release(block);
  bp_tensor_release(rows);
  bp_tensor_release(m);
  bp_tensor_release(t);
}

static void test_io_other_dtypes_and_devices(void** state) {
  fixture_t* f = *state;
  /* A permuted i16 tensor on a device of the other plugin. */
  const int64_t sizes[3] = {2, 2, 3};
  const int64_t dims[3] = {2, 1, 0};
  bp_tensor_t* t = NULL;
  bp_tensor_t* p = NULL;
  int16_t in[12], out[12];
  for (int i = 0; i < 12; ++i) in[i] = (int16_t)(1000 - 37 * i);
  assert_ok(bp_tensor_create(f->b0, BP_DTYPE_I16, 3, sizes, &t));
  assert_ok(bp_tensor_permute(t, dims, &p)); /* [3, 2, 2] strides [1, 3, 6] */
  assert_ok(bp_tensor_write(f->sb0, p, in, sizeof(in)));
  assert_ok(bp_tensor_read(f->sb0, t, out, sizeof(out)));
  for (int a = 0; a < 3; ++a)
    for (int b = 0; b < 2; ++b)
      for (int c = 0; c < 2; ++c) assert_int_equal(out[c * 6 + b * 3 + a], in[a * 4 + b * 2 + c]);
  /* Wrong stream, wrong size, NULL data. */
  assert_status_msg(bp_tensor_read(f->sa0, t, out, sizeof(out)), BP_INVALID_ARGUMENT,
                    "cannot access a tensor on fake_host_b:0");
  assert_status_msg(bp_tensor_read(f->sb0, t, out, sizeof(out) - 2), BP_INVALID_ARGUMENT,
                    "size is 22 bytes but the tensor holds 24 (12 elements of i16)");
  assert_status_msg(bp_tensor_write(f->sb0, p, NULL, sizeof(in)), BP_INVALID_ARGUMENT,
                    "bp_tensor_write: argument 'src' is NULL");
  assert_status_msg(bp_tensor_read(f->sb0, p, NULL, sizeof(in)), BP_INVALID_ARGUMENT,
                    "bp_tensor_read: argument 'dst' is NULL");
  bp_tensor_release(p);
  bp_tensor_release(t);
}

int run_tensor_tests(void) {
  const struct CMUnitTest tests[] = {
      FIXTURE_TEST(test_tensor_create),
      FIXTURE_TEST(test_tensor_create_errors),
      FIXTURE_TEST(test_tensor_create_strided),
      FIXTURE_TEST(test_tensor_from_buffer),
      FIXTURE_TEST(test_view_alias_permute),
      FIXTURE_TEST(test_view_slice),
      FIXTURE_TEST(test_view_select),
      FIXTURE_TEST(test_view_expand),
      FIXTURE_TEST(test_view_view),
      FIXTURE_TEST(test_view_squeeze_unsqueeze),
      FIXTURE_TEST(test_view_diagonal),
      FIXTURE_TEST(test_view_as_strided),
      FIXTURE_TEST(test_io_permuted_write),
      FIXTURE_TEST(test_io_slices),
      FIXTURE_TEST(test_io_other_dtypes_and_devices),
  };
  return cmocka_run_group_tests_name("tensor", tests, NULL, NULL);
}
