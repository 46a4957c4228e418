/* External memory through the public API on cpu:0: host pointers used in
 * place, DLPack import and export (ownership, deleters, dtype/shape/stride
 * mapping) and the errors for what cannot be handed over. */
#include <dlpack/dlpack.h>
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "backplane/backplane.h"

static bp_context_t* g_ctx;
static bp_device_t* g_dev;
static bp_stream_t* g_stream;

#define assert_status(call, want)                                              \
  do {                                                                         \
    bp_status_t st_ = (call);                                                  \
    if (st_ != (want)) fail_msg("%s -> %d (%s)", #call, st_, bp_status_message()); \
  } while (0)
#define assert_ok(call) assert_status(call, BP_OK)
/* The call fails with `want` and its message names `needle`. */
#define assert_fails(call, want, needle)                                           \
  do {                                                                             \
    assert_status(call, want);                                                     \
    if (!strstr(bp_status_message(), needle))                                      \
      fail_msg("%s: message '%s' lacks '%s'", #call, bp_status_message(), needle); \
  } while (0)

static int setup(void** state) {
  (void)state;
  bp_context_options_t opts = {.struct_size = sizeof(opts), .flags = BP_CONTEXT_NO_DISCOVERY};
  char path[4096];
  const char* dir = getenv("BACKPLANE_TEST_PLUGIN_DIR");
  snprintf(path, sizeof(path), "%s/libbp_plugin_cpu.so", dir ? dir : ".");
  if (bp_context_create(&opts, &g_ctx) != BP_OK ||
      bp_context_register_plugin(g_ctx, path, NULL) != BP_OK ||
      bp_context_find_device(g_ctx, "cpu:0", &g_dev) != BP_OK ||
      bp_stream_create(g_dev, NULL, &g_stream) != BP_OK) {
    fprintf(stderr, "setup: %s\n", bp_status_message());
    return -1;
  }
  return 0;
}

static int teardown(void** state) {
  (void)state;
  bp_stream_release(g_stream);
  bp_context_release(g_ctx);
  return 0;
}

static bp_external_buffer_desc_t host_desc(void* ptr, uint64_t offset, uint64_t size) {
  return (bp_external_buffer_desc_t){.struct_size = sizeof(bp_external_buffer_desc_t),
                                     .kind = BP_EXTERNAL_HOST_POINTER,
                                     .size_bytes = size,
                                     .offset_bytes = offset,
                                     .host_pointer = ptr,
                                     .fd = -1};
}

static bp_tensor_t* host_tensor(float* data, int64_t n) {
  bp_external_buffer_desc_t d = host_desc(data, 0, (uint64_t)n * sizeof(float));
  bp_buffer_t* buffer = NULL;
  bp_tensor_t* t = NULL;
  assert_ok(bp_buffer_import(g_dev, &d, &buffer));
  assert_ok(bp_tensor_from_buffer(buffer, BP_DTYPE_F32, 1, &n, NULL, 0, &t));
  bp_buffer_release(buffer);
  return t;
}

/* An op reads and writes the application's arrays in place: results appear
 * in the host array with no copy, and later host writes are seen. */
static void test_host_pointer_in_place(void** state) {
  (void)state;
  enum { N = 37 };
  float* a = aligned_alloc(64, 64 * sizeof(float));
  float* out = aligned_alloc(64, 64 * sizeof(float));
  for (int i = 0; i < N; ++i) a[i] = (float)i - 3.5f;
  memset(out, 0, 64 * sizeof(float));
  bp_tensor_t* ta = host_tensor(a, N);
  bp_tensor_t* tout = host_tensor(out, N);
  assert_ok(bp_op_add(g_stream, ta, ta, NULL, &tout));
  assert_ok(bp_stream_synchronize(g_stream));
  for (int i = 0; i < N; ++i) assert_true(out[i] == 2.0f * ((float)i - 3.5f));
  a[5] = 100.0f; /* the buffer is the array: no import-time copy */
  assert_ok(bp_op_add(g_stream, ta, ta, NULL, &tout));
  assert_ok(bp_stream_synchronize(g_stream));
  assert_true(out[5] == 200.0f);
  /* Export gives the same address back. */
  bp_external_buffer_desc_t e = {.struct_size = sizeof(e), .kind = BP_EXTERNAL_HOST_POINTER};
  assert_ok(bp_buffer_export(bp_tensor_buffer(tout), &e));
  assert_ptr_equal(e.host_pointer, out);
  assert_int_equal(e.size_bytes, N * sizeof(float));
  bp_tensor_release(ta);
  bp_tensor_release(tout);
  free(a);
  free(out);
}

static void test_host_pointer_bad_input(void** state) {
  (void)state;
  float* mem = aligned_alloc(64, 256);
  bp_buffer_t* b = NULL;
  bp_external_buffer_desc_t d = host_desc(mem, 0, 256);
  assert_fails(bp_buffer_import(g_dev, NULL, &b), BP_INVALID_ARGUMENT, "desc");
  assert_fails(bp_buffer_import(g_dev, &d, NULL), BP_INVALID_ARGUMENT, "out_buffer");
  d = host_desc(NULL, 0, 256);
  assert_fails(bp_buffer_import(g_dev, &d, &b), BP_INVALID_ARGUMENT, "host_pointer");
  d = host_desc(mem, 4, 128);
  assert_fails(bp_buffer_import(g_dev, &d, &b), BP_INVALID_ARGUMENT, "aligned");
  d = host_desc(mem, 0, 0);
  assert_fails(bp_buffer_import(g_dev, &d, &b), BP_INVALID_ARGUMENT, "size_bytes");
  d = host_desc(mem, 0, UINT64_MAX - 8);
  assert_fails(bp_buffer_import(g_dev, &d, &b), BP_INVALID_ARGUMENT, "overflows");
  d = host_desc(mem, UINT64_MAX, 1);
  assert_fails(bp_buffer_import(g_dev, &d, &b), BP_INVALID_ARGUMENT, "overflows");
  d = host_desc(mem, 0, 256);
  d.struct_size = 8;
  assert_fails(bp_buffer_import(g_dev, &d, &b), BP_INVALID_ARGUMENT, "struct_size");
  d = host_desc(mem, 0, 256);
  d.memory_space = 99;
  assert_fails(bp_buffer_import(g_dev, &d, &b), BP_INVALID_ARGUMENT, "memory space");
  d = host_desc(mem, 0, 256);
  d.kind = BP_EXTERNAL_OPAQUE_FD;
  assert_fails(bp_buffer_import(g_dev, &d, &b), BP_UNIMPLEMENTED, "HOST_POINTER");
  assert_null(b);
  /* A view whose strides leave the imported range is refused. */
  d = host_desc(mem, 64, 128);
  assert_ok(bp_buffer_import(g_dev, &d, &b));
  assert_int_equal(bp_buffer_size(b), 128);
  bp_tensor_t* t = NULL;
  const int64_t sizes[2] = {4, 8}, escaping[2] = {16, 1};
  assert_fails(bp_tensor_from_buffer(b, BP_DTYPE_F32, 2, sizes, escaping, 0, &t), BP_OUT_OF_RANGE,
               "buffer has 128 bytes");
  bp_buffer_release(b);
  free(mem);
}

/* ---- DLPack ----------------------------------------------------------- */

/* A producer's tensor: the deleter counts its calls. */
typedef struct producer {
  DLManagedTensor managed;
  int64_t shape[BP_MAX_RANK + 1];
  int64_t strides[BP_MAX_RANK + 1];
  void* memory;
  int deleted;
} producer_t;

static void producer_delete(DLManagedTensor* self) {
  producer_t* p = self->manager_ctx;
  p->deleted++;
}

/* f32 [rows, cols] over fresh memory filled with i, strides NULL (dense). */
static void producer_init(producer_t* p, int64_t rows, int64_t cols, uint64_t byte_offset) {
  memset(p, 0, sizeof(*p));
  p->memory = aligned_alloc(64, 1024);
  memset(p->memory, 0, 1024);
  float* f = (float*)((char*)p->memory + byte_offset);
  for (int64_t i = 0; i < rows * cols; ++i) f[i] = (float)i;
  p->shape[0] = rows;
  p->shape[1] = cols;
  p->managed.dl_tensor = (DLTensor){.data = p->memory,
                                    .device = {kDLCPU, 0},
                                    .ndim = 2,
                                    .dtype = {kDLFloat, 32, 1},
                                    .shape = p->shape,
                                    .strides = NULL,
                                    .byte_offset = byte_offset};
  p->managed.manager_ctx = p;
  p->managed.deleter = producer_delete;
}

static void read_f32(const bp_tensor_t* t, float* out, int64_t n) {
  assert_ok(bp_tensor_read(g_stream, t, out, (uint64_t)n * sizeof(float)));
}

/* Import keeps the producer's memory in place (an op's result lands in
 * it), maps shape/strides/byte_offset, and calls the deleter once, at the
 * release of the last reference. */
static void test_dlpack_import(void** state) {
  (void)state;
  producer_t p;
  producer_init(&p, 2, 3, 16);
  bp_tensor_t* t = NULL;
  assert_ok(bp_tensor_from_dlpack(g_dev, &p.managed, &t));
  assert_int_equal(bp_tensor_dtype(t), BP_DTYPE_F32);
  assert_int_equal(bp_tensor_rank(t), 2);
  assert_int_equal(bp_tensor_sizes(t)[0], 2);
  assert_int_equal(bp_tensor_sizes(t)[1], 3);
  assert_int_equal(bp_tensor_strides(t)[0], 3);
  assert_int_equal(bp_tensor_strides(t)[1], 1);
  assert_int_equal(bp_buffer_size(bp_tensor_buffer(t)), 6 * sizeof(float));
  bp_tensor_t* out = t; /* written in place: out = t + t */
  bp_tensor_retain(out);
  assert_ok(bp_op_add(g_stream, t, t, NULL, &out));
  assert_ok(bp_stream_synchronize(g_stream));
  const float* f = (const float*)((char*)p.memory + 16);
  for (int i = 0; i < 6; ++i) assert_true(f[i] == 2.0f * (float)i);
  bp_tensor_release(out);
  assert_int_equal(p.deleted, 0);
  bp_tensor_release(t);
  assert_int_equal(p.deleted, 1);
  free(p.memory);

  /* Explicit strides: a transposed view of a [3, 2] array. */
  producer_init(&p, 2, 3, 0);
  p.strides[0] = 1;
  p.strides[1] = 2;
  p.managed.dl_tensor.strides = p.strides;
  assert_ok(bp_tensor_from_dlpack(g_dev, &p.managed, &t));
  float got[6];
  read_f32(t, got, 6);
  const float want[6] = {0, 2, 4, 1, 3, 5};
  assert_memory_equal(got, want, sizeof(want));
  bp_tensor_release(t);
  assert_int_equal(p.deleted, 1);
  free(p.memory);
}

/* What a backplane tensor cannot represent is refused, and the caller keeps
 * ownership (the deleter is not called). */
static void test_dlpack_import_bad_input(void** state) {
  (void)state;
  producer_t p;
  bp_tensor_t* t = NULL;
  assert_fails(bp_tensor_from_dlpack(g_dev, NULL, &t), BP_INVALID_ARGUMENT, "dl_managed_tensor");
  /* Each bad field, one at a time. */
  producer_init(&p, 2, 3, 0);
  p.managed.dl_tensor.dtype.lanes = 4;
  assert_fails(bp_tensor_from_dlpack(g_dev, &p.managed, &t), BP_INVALID_ARGUMENT, "lanes");
  p.managed.dl_tensor.dtype = (DLDataType){kDLFloat, 24, 1};
  assert_fails(bp_tensor_from_dlpack(g_dev, &p.managed, &t), BP_INVALID_ARGUMENT, "bits 24");
  p.managed.dl_tensor.dtype = (DLDataType){kDLOpaqueHandle, 64, 1};
  assert_fails(bp_tensor_from_dlpack(g_dev, &p.managed, &t), BP_INVALID_ARGUMENT, "no backplane dtype");
  p.managed.dl_tensor.dtype = (DLDataType){kDLFloat, 32, 1};
  p.managed.dl_tensor.device.device_type = kDLCUDA;
  assert_fails(bp_tensor_from_dlpack(g_dev, &p.managed, &t), BP_INVALID_ARGUMENT, "kDLCPU");
  p.managed.dl_tensor.device.device_type = kDLCPU;
  p.managed.dl_tensor.ndim = BP_MAX_RANK + 1;
  assert_fails(bp_tensor_from_dlpack(g_dev, &p.managed, &t), BP_INVALID_ARGUMENT, "ndim");
  p.managed.dl_tensor.ndim = 2;
  p.strides[0] = -3;
  p.strides[1] = 1;
  p.managed.dl_tensor.strides = p.strides;
  assert_fails(bp_tensor_from_dlpack(g_dev, &p.managed, &t), BP_INVALID_ARGUMENT, "negative");
  p.strides[0] = INT64_MAX / 2; /* the extent escapes any allocation */
  assert_fails(bp_tensor_from_dlpack(g_dev, &p.managed, &t), BP_INVALID_ARGUMENT, "escape");
  p.managed.dl_tensor.strides = NULL;
  p.managed.dl_tensor.byte_offset = 2; /* f32 elements at a 2-byte boundary */
  assert_fails(bp_tensor_from_dlpack(g_dev, &p.managed, &t), BP_INVALID_ARGUMENT, "aligned");
  p.managed.dl_tensor.byte_offset = 0;
  p.managed.dl_tensor.data = NULL;
  assert_fails(bp_tensor_from_dlpack(g_dev, &p.managed, &t), BP_INVALID_ARGUMENT, "data is NULL");
  p.managed.dl_tensor.data = p.memory;
  p.managed.dl_tensor.shape = NULL;
  assert_fails(bp_tensor_from_dlpack(g_dev, &p.managed, &t), BP_INVALID_ARGUMENT, "shape");
  assert_null(t);
  assert_int_equal(p.deleted, 0);
  /* Buffer-level DLPack: the tensor gives the size. */
  p.managed.dl_tensor.shape = p.shape;
  bp_external_buffer_desc_t d = {.struct_size = sizeof(d), .kind = BP_EXTERNAL_DLPACK,
                                 .size_bytes = 24, .dlpack = &p.managed, .fd = -1};
  bp_buffer_t* b = NULL;
  assert_fails(bp_buffer_import(g_dev, &d, &b), BP_INVALID_ARGUMENT, "must be 0");
  d.size_bytes = 0;
  assert_ok(bp_buffer_import(g_dev, &d, &b));
  assert_int_equal(bp_buffer_size(b), 24);
  bp_buffer_release(b);
  assert_int_equal(p.deleted, 1);
  free(p.memory);
  /* An empty tensor shares nothing: its deleter runs at once. */
  producer_init(&p, 0, 3, 0);
  assert_ok(bp_tensor_from_dlpack(g_dev, &p.managed, &t));
  assert_int_equal(p.deleted, 1);
  assert_int_equal(bp_tensor_numel(t), 0);
  bp_tensor_release(t);
  assert_int_equal(p.deleted, 1);
  free(p.memory);
}

static int g_export_deletes;
static void (*g_export_deleter)(DLManagedTensor*);
static void counting_deleter(DLManagedTensor* self) {
  g_export_deletes++;
  g_export_deleter(self);
}

/* Export -> import into the same context: the new tensor shares the
 * memory, the exported one keeps the buffer alive after its creator is
 * released, and the deleter runs exactly once. */
static void test_dlpack_round_trip(void** state) {
  (void)state;
  const int64_t sizes[2] = {3, 4};
  float data[12];
  for (int i = 0; i < 12; ++i) data[i] = (float)(i * i);
  bp_tensor_t* src = NULL;
  assert_ok(bp_tensor_create(g_dev, BP_DTYPE_F32, 2, sizes, &src));
  assert_ok(bp_tensor_write(g_stream, src, data, sizeof(data)));
  /* A non-contiguous view with an offset: columns 1..3 transposed. */
  bp_tensor_t *cols = NULL, *view = NULL;
  assert_ok(bp_tensor_slice(src, 1, 1, 4, 1, &cols));
  const int64_t perm[2] = {1, 0};
  assert_ok(bp_tensor_permute(cols, perm, &view));
  bp_tensor_release(cols);

  void* exported = NULL;
  assert_ok(bp_tensor_to_dlpack(view, &exported));
  DLManagedTensor* m = exported;
  assert_int_equal(m->dl_tensor.device.device_type, kDLCPU);
  assert_int_equal(m->dl_tensor.ndim, 2);
  assert_int_equal(m->dl_tensor.dtype.code, kDLFloat);
  assert_int_equal(m->dl_tensor.dtype.bits, 32);
  assert_int_equal(m->dl_tensor.dtype.lanes, 1);
  assert_int_equal(m->dl_tensor.shape[0], 3);
  assert_int_equal(m->dl_tensor.shape[1], 3);
  assert_int_equal(m->dl_tensor.strides[0], 1);
  assert_int_equal(m->dl_tensor.strides[1], 4);
  assert_int_equal(m->dl_tensor.byte_offset, sizeof(float));
  /* The exported view reads the right elements through its own fields. */
  const float* base = (const float*)((const char*)m->dl_tensor.data + m->dl_tensor.byte_offset);
  assert_true(base[2 * m->dl_tensor.strides[0] + 1 * m->dl_tensor.strides[1]] == data[1 * 4 + 3]);
  g_export_deletes = 0;
  g_export_deleter = m->deleter;
  m->deleter = counting_deleter;
  bp_tensor_release(view);
  bp_tensor_release(src); /* the exported tensor still holds the buffer */

  bp_tensor_t* back = NULL;
  assert_ok(bp_tensor_from_dlpack(g_dev, m, &back));
  assert_int_equal(bp_tensor_strides(back)[0], 1);
  assert_int_equal(bp_tensor_strides(back)[1], 4);
  float got[9];
  read_f32(back, got, 9);
  for (int i = 0; i < 3; ++i)
    for (int j = 0; j < 3; ++j) assert_true(got[i * 3 + j] == data[j * 4 + (i + 1)]);
  /* Writes through the imported tensor land in the exported memory. */
  bp_tensor_t* out = back;
  bp_tensor_retain(out);
  assert_ok(bp_op_neg(g_stream, back, NULL, &out));
  assert_ok(bp_stream_synchronize(g_stream));
  assert_true(base[0] == -data[1]);
  bp_tensor_release(out);
  assert_int_equal(g_export_deletes, 0);
  bp_tensor_release(back);
  assert_int_equal(g_export_deletes, 1);
}

/* Buffer-level export: 1-D uint8 over the whole buffer, released by its
 * deleter alone. Sub-byte tensors have no DLPack form. */
static void test_dlpack_buffer_export(void** state) {
  (void)state;
  bp_buffer_t* b = NULL;
  assert_ok(bp_buffer_allocate(g_dev, 0, 40, &b));
  bp_external_buffer_desc_t e = {.struct_size = sizeof(e), .kind = BP_EXTERNAL_DLPACK};
  assert_ok(bp_buffer_export(b, &e));
  bp_buffer_release(b);
  DLManagedTensor* m = e.dlpack;
  assert_int_equal(e.size_bytes, 40);
  assert_int_equal(m->dl_tensor.ndim, 1);
  assert_int_equal(m->dl_tensor.shape[0], 40);
  assert_int_equal(m->dl_tensor.dtype.code, kDLUInt);
  assert_int_equal(m->dl_tensor.dtype.bits, 8);
  memset(m->dl_tensor.data, 0x5a, 40); /* still alive: valgrind/ASan check */
  m->deleter(m);

  const int64_t n = 8;
  bp_tensor_t* t = NULL;
  void* out = (void*)1;
  assert_ok(bp_tensor_create(g_dev, BP_DTYPE_I4, 1, &n, &t));
  assert_fails(bp_tensor_to_dlpack(t, &out), BP_INVALID_ARGUMENT, "sub-byte");
  assert_null(out);
  assert_fails(bp_tensor_to_dlpack(t, NULL), BP_INVALID_ARGUMENT, "out_dl_managed_tensor");
  bp_tensor_release(t);
}

/* CPU events have nothing to share: import and exportable events are
 * refused cleanly. */
static void test_cpu_events_unimplemented(void** state) {
  (void)state;
  bp_event_t* ev = NULL;
  bp_external_event_desc_t d = {.struct_size = sizeof(d), .kind = BP_EXTERNAL_SYNC_FD, .fd = -1};
  assert_fails(bp_event_import(g_dev, &d, &ev), BP_UNIMPLEMENTED, "cpu");
  bp_event_create_info_t info = {.struct_size = sizeof(info), .flags = BP_EVENT_EXPORTABLE};
  assert_status(bp_event_create(g_dev, &info, &ev), BP_UNIMPLEMENTED);
  assert_null(ev);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_host_pointer_in_place),
      cmocka_unit_test(test_host_pointer_bad_input),
      cmocka_unit_test(test_dlpack_import),
      cmocka_unit_test(test_dlpack_import_bad_input),
      cmocka_unit_test(test_dlpack_round_trip),
      cmocka_unit_test(test_dlpack_buffer_export),
      cmocka_unit_test(test_cpu_events_unimplemented),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
