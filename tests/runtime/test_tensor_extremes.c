/* Property test: views and tensor I/O with sizes, strides and offsets at the
 * int64 extremes. Seeded and bounded: a fixed number of random steps over a
 * small buffer whose contents the test models (a shadow copy), so every
 * call is checked two ways:
 *  - safety: any argument gives BP_OK or a clean error with a message, never
 *    a crash or an out-of-bounds access (run it under the asan preset);
 *  - truth: every tensor that exists keeps its invariants (numel * element
 *    size fits in int64, every element inside the buffer), a read returns
 *    exactly the elements the shadow says, a write changes exactly those.
 * The oracle computes in 128-bit integers, independently of the core's
 * checked helpers. */
#include "runtime_fixture.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>

#define SEED 0x13a11ce5eedULL
#define STEPS 20000
#define BUF_BYTES 384
#define MAX_LIVE 12
/* Host buffers up to this size are real allocations of exactly the claimed
 * size; larger claims get a 16-byte buffer or NULL. */
#define HOST_CAP (1u << 16)

typedef __int128 i128;

typedef struct model {
  fixture_t* f;
  uint64_t rng;
  bp_buffer_t* buffer; /* BUF_BYTES on a0 */
  unsigned char shadow[BUF_BYTES];
  bp_tensor_t* live[MAX_LIVE];
  uint32_t nlive;
  /* Counters for the report line, per kind (views, io, copies). */
  uint64_t calls, ok, refused;
  uint64_t kind_ok[3], kind_refused[3];
  int kind; /* of the step being run */
} model_t;

static uint64_t next(model_t* m) { /* splitmix64 */
  uint64_t z = (m->rng += 0x9e3779b97f4a7c15ULL);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}
static uint64_t below(model_t* m, uint64_t n) { return n ? next(m) % n : 0; }

/* An int64 from the edges: extremes, powers of two around them, values that
 * wrap when multiplied by an element size, small values, random ones. */
static int64_t pick(model_t* m) {
  static const int64_t edges[] = {0,
                                  1,
                                  2,
                                  3,
                                  -1,
                                  -2,
                                  INT64_MAX,
                                  INT64_MIN,
                                  INT64_MAX - 1,
                                  INT64_MIN + 1,
                                  INT64_MAX / 2,
                                  INT64_MAX / 4,
                                  INT64_MAX / 8 + 1,
                                  (int64_t)1 << 31,
                                  ((int64_t)1 << 31) - 1,
                                  (int64_t)1 << 32,
                                  (int64_t)1 << 60,
                                  (int64_t)1 << 61,
                                  (int64_t)1 << 62,
                                  -((int64_t)1 << 62),
                                  ((int64_t)1 << 62) + 1,
                                  (int64_t)1 << 63 >> 1,
                                  BUF_BYTES,
                                  BUF_BYTES / 4,
                                  BUF_BYTES + 1};
  switch (below(m, 4)) {
    case 0: return edges[below(m, sizeof(edges) / sizeof(edges[0]))];
    case 1: return (int64_t)next(m);
    default: return (int64_t)below(m, 9) - 1; /* -1..7 */
  }
}
static uint64_t pick_u(model_t* m) {
  return below(m, 3) == 0 ? (uint64_t)pick(m) : (uint64_t)below(m, BUF_BYTES + 8);
}

static const uint32_t dtypes[] = {BP_DTYPE_F32, BP_DTYPE_F64, BP_DTYPE_U8, BP_DTYPE_I16,
                                  BP_DTYPE_C64, BP_DTYPE_F16};

/* ---- the oracle (128-bit) ------------------------------------------------ */
static i128 oracle_numel(const bp_tensor_t* t) {
  i128 n = 1;
  for (uint32_t d = 0; d < bp_tensor_rank(t); ++d) {
    int64_t s = bp_tensor_sizes(t)[d];
    if (s == 0) return 0;
    if (n > ((i128)1 << 64)) n = (i128)1 << 64; /* saturate: past int64 anyway, no i128 overflow */
    n *= s;
  }
  return n;
}

static i128 oracle_bytes(const bp_tensor_t* t) {
  return oracle_numel(t) * (i128)bp_dtype_size(bp_tensor_dtype(t));
}

/* Byte position of element number `linear` (row-major order). */
static i128 oracle_pos(const bp_tensor_t* t, i128 linear) {
  i128 pos = (i128)bp_tensor_byte_offset(t);
  const uint32_t esize = (uint32_t)bp_dtype_size(bp_tensor_dtype(t));
  for (uint32_t d = bp_tensor_rank(t); d-- > 0;) {
    int64_t s = bp_tensor_sizes(t)[d];
    pos += (linear % s) * (i128)bp_tensor_strides(t)[d] * esize;
    linear /= s;
  }
  return pos;
}

/* Every tensor that exists satisfies these. */
static void check_invariants(const bp_tensor_t* t) {
  const uint32_t esize = (uint32_t)bp_dtype_size(bp_tensor_dtype(t));
  assert_true(esize > 0);
  assert_true(bp_tensor_rank(t) <= BP_MAX_RANK);
  for (uint32_t d = 0; d < bp_tensor_rank(t); ++d) {
    assert_true(bp_tensor_sizes(t)[d] >= 0);
    assert_true(bp_tensor_strides(t)[d] >= 0);
  }
  const i128 bytes = oracle_bytes(t);
  if (bytes > INT64_MAX)
    print_error("tensor of %" PRId64 " elements x %u bytes exists\n", bp_tensor_numel(t), esize);
  assert_true(bytes <= INT64_MAX);
  assert_true(oracle_numel(t) == bp_tensor_numel(t));
  if (bytes == 0) return;
  /* Strides are >= 0: the first and last elements bound the span. */
  i128 last = (i128)bp_tensor_byte_offset(t);
  for (uint32_t d = 0; d < bp_tensor_rank(t); ++d)
    last += (i128)(bp_tensor_sizes(t)[d] - 1) * bp_tensor_strides(t)[d] * esize;
  assert_true(last + esize <= (i128)bp_buffer_size(bp_tensor_buffer(t)));
}

/* A failed call: a documented status and a message saying why. */
static void check_refusal(model_t* m, bp_status_t st, const char* what) {
  if (st != BP_INVALID_ARGUMENT && st != BP_OUT_OF_RANGE)
    print_error("%s: unexpected status %s: %s\n", what, bp_status_name(st), bp_status_message());
  assert_true(st == BP_INVALID_ARGUMENT || st == BP_OUT_OF_RANGE);
  assert_true(bp_status_message()[0] != '\0');
  m->refused++;
  m->kind_refused[m->kind]++;
}

static void adopt(model_t* m, bp_status_t st, bp_tensor_t* out, const char* what) {
  m->calls++;
  if (st != BP_OK) {
    check_refusal(m, st, what);
    return;
  }
  m->ok++;
  m->kind_ok[m->kind]++;
  check_invariants(out);
  if (m->nlive < MAX_LIVE) {
    m->live[m->nlive++] = out;
  } else {
    uint32_t k = 1 + (uint32_t)below(m, MAX_LIVE - 1); /* keep live[0], the base */
    bp_tensor_release(m->live[k]);
    m->live[k] = out;
  }
}

/* ---- steps --------------------------------------------------------------- */
static void step_from_buffer(model_t* m) {
  int64_t sizes[BP_MAX_RANK], strides[BP_MAX_RANK];
  uint32_t rank = (uint32_t)below(m, 5);
  for (uint32_t d = 0; d < rank; ++d) {
    sizes[d] = pick(m);
    strides[d] = pick(m);
  }
  bp_tensor_t* out = NULL;
  bp_status_t st = bp_tensor_from_buffer(m->buffer, dtypes[below(m, 6)], rank, sizes,
                                         below(m, 4) ? strides : NULL, pick_u(m), &out);
  adopt(m, st, out, "from_buffer");
}

static void step_view(model_t* m, bp_tensor_t* t) {
  int64_t a[BP_MAX_RANK], b[BP_MAX_RANK];
  uint32_t rank = (uint32_t)below(m, BP_MAX_RANK + 2); /* one past the maximum too */
  for (uint32_t d = 0; d < BP_MAX_RANK; ++d) {
    a[d] = pick(m);
    b[d] = pick(m);
  }
  bp_tensor_t* out = NULL;
  bp_status_t st = BP_OK;
  const char* what = "";
  switch (below(m, 9)) {
    case 0:
      what = "expand";
      /* Keep the existing dims often, so the new leading ones are tried. */
      for (uint32_t d = 0; d < bp_tensor_rank(t) && below(m, 2); ++d) {
        uint32_t lead = rank > bp_tensor_rank(t) ? rank - bp_tensor_rank(t) : 0;
        if (lead + d < BP_MAX_RANK) a[lead + d] = -1;
      }
      st = bp_tensor_expand(t, rank, a, &out);
      break;
    case 1:
      what = "as_strided";
      {
        const int64_t offset = pick(m); /* in elements; NULL keeps the tensor's */
        st = bp_tensor_as_strided(t, rank, a, b, below(m, 2) ? NULL : &offset, &out);
      }
      break;
    case 2:
      what = "slice";
      st = bp_tensor_slice(t, pick(m), pick(m), pick(m), pick(m), &out);
      break;
    case 3:
      what = "view";
      st = bp_tensor_view(t, rank, a, &out);
      break;
    case 4: {
      what = "permute";
      int64_t dims[BP_MAX_RANK];
      for (uint32_t d = 0; d < bp_tensor_rank(t); ++d) dims[d] = d;
      for (uint32_t d = bp_tensor_rank(t); d-- > 1;) {
        uint32_t k = (uint32_t)below(m, d + 1);
        int64_t tmp = dims[d];
        dims[d] = dims[k];
        dims[k] = tmp;
      }
      if (bp_tensor_rank(t) && below(m, 4) == 0) dims[below(m, bp_tensor_rank(t))] = pick(m);
      st = bp_tensor_permute(t, dims, &out);
      break;
    }
    case 5:
      what = "diagonal";
      st = bp_tensor_diagonal(t, pick(m), pick(m), pick(m), &out);
      break;
    case 6:
      what = "select";
      st = bp_tensor_select(t, pick(m), pick(m), &out);
      break;
    case 7:
      what = "unsqueeze";
      st = bp_tensor_unsqueeze(t, pick(m), &out);
      break;
    default:
      what = "squeeze";
      st = bp_tensor_squeeze(t, pick(m), &out);
      break;
  }
  adopt(m, st, out, what);
}

/* The size a caller might claim: the true one, its 64-bit wrap (the attack),
 * or anything. */
static uint64_t claim(model_t* m, const bp_tensor_t* t) {
  const i128 bytes = oracle_bytes(t);
  switch (below(m, 4)) {
    case 0: return (uint64_t)bytes; /* wraps when bytes >= 2^64 */
    case 1: return bytes <= UINT64_MAX ? (uint64_t)bytes : 0;
    case 2: return (uint64_t)bytes + (uint64_t)pick(m);
    default: return pick_u(m);
  }
}

static void step_io(model_t* m, bp_tensor_t* t, int write) {
  const uint64_t size = claim(m, t);
  const i128 bytes = oracle_bytes(t);
  const uint32_t esize = (uint32_t)bp_dtype_size(bp_tensor_dtype(t));
  unsigned char small[16];
  unsigned char* host = NULL;
  if (size > 0 && size <= HOST_CAP) {
    host = malloc((size_t)size);
    assert_non_null(host);
    for (uint64_t i = 0; i < size; ++i) host[i] = (unsigned char)next(m);
  } else if ((i128)size != bytes && below(m, 2)) {
    /* A short buffer behind a false claim. (Behind the true size it would
     * be the caller's overflow, which no API can detect.) */
    host = small;
    memset(small, 0x5a, sizeof(small));
  }
  unsigned char before[BUF_BYTES];
  memcpy(before, m->shadow, sizeof(before));
  bp_status_t st = write ? bp_tensor_write(m->f->sa0, t, host, size)
                         : bp_tensor_read(m->f->sa0, t, host, size);
  m->calls++;
  if (st != BP_OK) {
    check_refusal(m, st, write ? "write" : "read");
    if ((i128)size == bytes && (host || size == 0)) {
      /* Only a write through an expanded (stride 0) dim may refuse the
       * true size. */
      assert_true(write);
    }
  } else {
    m->ok++;
    m->kind_ok[m->kind]++;
    /* Success only for exactly the tensor's bytes, so the host buffer held
     * them (it was allocated at the claimed size). */
    assert_true((i128)size == bytes);
    const i128 numel = oracle_numel(t);
    for (i128 e = 0; e < numel; ++e) {
      const i128 pos = oracle_pos(t, e);
      assert_true(pos >= 0 && pos + esize <= BUF_BYTES);
      if (write)
        memcpy(m->shadow + (size_t)pos, host + (size_t)(e * esize), esize);
      else
        assert_memory_equal(host + (size_t)(e * esize), m->shadow + (size_t)pos, esize);
    }
    if (write) {
      /* Nothing else changed: compare the whole buffer with the model. */
      unsigned char now[BUF_BYTES];
      assert_ok(bp_copy_buffer_to_host(m->f->sa0, m->buffer, 0, now, BUF_BYTES));
      assert_ok(bp_stream_synchronize(m->f->sa0));
      assert_memory_equal(now, m->shadow, BUF_BYTES);
    }
  }
  if (st != BP_OK) assert_memory_equal(before, m->shadow, BUF_BYTES);
  if (host != small) free(host);
}

/* Raw copies between the buffer, a second buffer and the host. A copy
 * succeeds exactly when its ranges lie inside the buffers and the host
 * pointer is given. */
static void step_copy(model_t* m, bp_buffer_t* other) {
  const uint64_t off = pick_u(m), off2 = pick_u(m), size = pick_u(m);
  const int fits = (i128)off + size <= BUF_BYTES;
  const int fits2 = (i128)off2 + size <= BUF_BYTES;
  unsigned char host[BUF_BYTES];
  unsigned char* given = size <= BUF_BYTES ? host : NULL;
  bp_status_t st = BP_OK;
  int expect_ok = 0;
  m->calls++;
  switch (below(m, 3)) {
    case 0:
      for (size_t i = 0; i < sizeof(host); ++i) host[i] = (unsigned char)next(m);
      expect_ok = fits && (given || size == 0);
      st = bp_copy_host_to_buffer(m->f->sa0, given, m->buffer, off, size);
      if (st == BP_OK) memcpy(m->shadow + off, host, (size_t)size);
      break;
    case 1:
      expect_ok = fits && (given || size == 0);
      st = bp_copy_buffer_to_host(m->f->sa0, m->buffer, off, given, size);
      if (st == BP_OK) {
        assert_ok(bp_stream_synchronize(m->f->sa0));
        assert_memory_equal(host, m->shadow + off, (size_t)size);
      }
      break;
    default:
      /* A round trip through a second buffer of the same size. */
      expect_ok = fits && fits2;
      st = bp_copy_buffer(m->f->sa0, m->buffer, off, other, off2, size);
      if (st == BP_OK) assert_ok(bp_copy_buffer(m->f->sa0, other, off2, m->buffer, off, size));
      break;
  }
  if (st != BP_OK) {
    check_refusal(m, st, "copy");
  } else {
    m->ok++;
    m->kind_ok[m->kind]++;
  }
  if ((st == BP_OK) != expect_ok)
    print_error("copy off %llu off2 %llu size %llu: %s: %s\n", (unsigned long long)off,
                (unsigned long long)off2, (unsigned long long)size, bp_status_name(st),
                bp_status_message());
  assert_int_equal(st == BP_OK, expect_ok);
  assert_ok(bp_stream_synchronize(m->f->sa0));
}

/* The instance that was found: a 1-element f32 tensor expanded to 2^62
 * elements (2^64 bytes, which wraps to 0) and read into NULL with size 0. */
static void test_expand_wrap_found(void** state) {
  fixture_t* f = *state;
  bp_tensor_t *t = NULL, *e = NULL;
  const int64_t one = 1, big = (int64_t)1 << 62;
  assert_ok(bp_tensor_create(f->a0, BP_DTYPE_F32, 1, &one, &t));
  bp_status_t st = bp_tensor_expand(t, 1, &big, &e);
  if (st == BP_OK) {
    /* Had the view been made, the read must still refuse it. */
    st = bp_tensor_read(f->sa0, e, NULL, 0);
    bp_tensor_release(e);
    assert_int_not_equal(st, BP_OK);
  }
  assert_status_msg(st, BP_INVALID_ARGUMENT, "overflows");
  /* 2^61 f32 elements are 2^63 bytes: one past int64. */
  const int64_t half = (int64_t)1 << 61;
  assert_status_msg(bp_tensor_expand(t, 1, &half, &e), BP_INVALID_ARGUMENT, "overflows");
  /* 2^60 are 2^62 bytes: a valid view; reading it claims its true size. */
  const int64_t quarter = (int64_t)1 << 60;
  assert_ok(bp_tensor_expand(t, 1, &quarter, &e));
  assert_status_msg(bp_tensor_read(f->sa0, e, NULL, 0), BP_INVALID_ARGUMENT, "size is 0 bytes");
  bp_tensor_release(e);
  bp_tensor_release(t);
}

static void test_views_and_io_at_extremes(void** state) {
  fixture_t* f = *state;
  model_t m;
  memset(&m, 0, sizeof(m));
  m.f = f;
  m.rng = SEED;
  bp_buffer_t* other = NULL;
  assert_ok(bp_buffer_allocate(f->a0, 0 /* space 0: device-local */, BUF_BYTES, &m.buffer));
  assert_ok(bp_buffer_allocate(f->a0, 0 /* space 0: device-local */, BUF_BYTES, &other));
  for (size_t i = 0; i < BUF_BYTES; ++i) m.shadow[i] = (unsigned char)(i * 37 + 11);
  assert_ok(bp_copy_host_to_buffer(f->sa0, m.shadow, m.buffer, 0, BUF_BYTES));
  assert_ok(bp_stream_synchronize(f->sa0));
  /* The base: the whole buffer as 96 f32, always live. */
  const int64_t base_sizes[2] = {8, 12};
  bp_tensor_t* base = NULL;
  assert_ok(bp_tensor_from_buffer(m.buffer, BP_DTYPE_F32, 2, base_sizes, NULL, 0, &base));
  m.live[m.nlive++] = base;

  for (int step = 0; step < STEPS; ++step) {
    bp_tensor_t* t = m.live[below(&m, m.nlive)];
    const uint64_t r = below(&m, 8);
    m.kind = r < 4 ? 0 : r < 7 ? 1 : 2;
    switch (r) {
      case 0: step_from_buffer(&m); break;
      case 1: case 2: case 3: step_view(&m, t); break;
      case 4: case 5: step_io(&m, t, 0); break;
      case 6: step_io(&m, t, 1); break;
      default: step_copy(&m, other); break;
    }
  }
  print_message("seed 0x%llx: %d steps, %llu calls, %llu succeeded, %llu refused cleanly\n",
                (unsigned long long)SEED, STEPS, (unsigned long long)m.calls,
                (unsigned long long)m.ok, (unsigned long long)m.refused);
  static const char* const kinds[3] = {"views", "io", "copies"};
  for (int k = 0; k < 3; ++k) {
    print_message("  %s: %llu succeeded, %llu refused\n", kinds[k],
                  (unsigned long long)m.kind_ok[k], (unsigned long long)m.kind_refused[k]);
    /* The walk must exercise both outcomes of every kind in quantity, or it
     * proves little. */
    assert_true(m.kind_ok[k] > STEPS / 100);
    assert_true(m.kind_refused[k] > STEPS / 100);
  }
  for (uint32_t i = 0; i < m.nlive; ++i) bp_tensor_release(m.live[i]);
  bp_buffer_release(other);
  bp_buffer_release(m.buffer);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      FIXTURE_TEST(test_expand_wrap_found),
      FIXTURE_TEST(test_views_and_io_at_extremes),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
