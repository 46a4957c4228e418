/* Helpers of the serving tests (include after ops_fixture.h): a seeded
 * xorshift draw, dense cpu tensors written from host data, synchronous
 * read-back, a stream error check. */
#ifndef BP_TESTS_SERVING_UTIL_H_
#define BP_TESTS_SERVING_UTIL_H_

/* Uniform in [lo, hi) from the xorshift64 state *s. */
static inline float srv_frand(uint64_t* s, float lo, float hi) {
  *s ^= *s << 13, *s ^= *s >> 7, *s ^= *s << 17;
  return lo + (hi - lo) * (float)((*s >> 11) * 0x1.0p-53);
}

/* A dense tensor on cpu:0 (released by ops_release_all), written from
 * `data` on `st` when data is not NULL. */
static inline bp_tensor_t* srv_tensor(bp_stream_t* st, uint32_t dtype, uint32_t rank,
                                      const int64_t* sizes, const void* data) {
  bp_tensor_t* t = ops_tensor(g_cpu, dtype, rank, sizes);
  int64_t n = 1;
  for (uint32_t d = 0; d < rank; d++) n *= sizes[d];
  if (data) assert_ok(bp_tensor_write(st, t, data, (uint64_t)n * bp_dtype_size(dtype)));
  return t;
}

/* bytes of t into out, after everything queued on st. */
static inline void srv_read(bp_stream_t* st, const bp_tensor_t* t, void* out, uint64_t bytes) {
  assert_ok(bp_tensor_read(st, t, out, bytes));
  assert_ok(bp_stream_synchronize(st));
}

/* `call_with_s` (which names the stream `s`) is queued on a stream of its
 * own and fails it with `code` and a message holding `needle`. */
#define assert_stream_error(call_with_s, code, needle)     \
  do {                                                     \
    bp_stream_t* s = NULL;                                 \
    assert_ok(bp_stream_create(g_cpu, NULL, &s));          \
    assert_ok(call_with_s);                                \
    assert_status(bp_stream_synchronize(s), code, needle); \
    bp_stream_release(s);                                  \
  } while (0)

#endif /* BP_TESTS_SERVING_UTIL_H_ */
