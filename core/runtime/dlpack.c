/* DLPack hand-over: tensors in and out as DLManagedTensor (dlpack.h, the
 * unversioned struct of DLPack 0.6 to 0.8), without a copy.
 *
 * Import: the core reads the DLTensor (dtype, shape, strides, byte_offset),
 * checks that a backplane tensor can represent it, and asks the plugin to
 * wrap the bytes [data + byte_offset, + extent) as a buffer that owns the
 * DLManagedTensor (the plugin calls its deleter on buffer_release).
 *
 * Export: the plugin hands out a DLManagedTensor that borrows the buffer
 * (1-D uint8 over all of it); the core wraps it in one of its own with the
 * tensor's view and a buffer reference. The application's deleter runs the
 * plugin's deleter first, then drops the reference, so the plugin library
 * and its context outlive every exported tensor.
 *
 * Thread-safe: no shared state; the deleter may run on any thread. */
#include <dlpack/dlpack.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"
#include "runtime/tensor_internal.h"

/* Type codes newer than the dlpack.h this builds against (0.6): kDLBool of
 * DLPack 0.8 and the float8 codes of DLPack 1.1. The DLTensor layout is the
 * same in all of them. */
enum {
  BP__DL_BOOL = 6,
  BP__DL_F8E4M3FN = 10,
  BP__DL_F8E4M3FNUZ = 11,
  BP__DL_F8E5M2 = 12,
  BP__DL_F8E5M2FNUZ = 13,
  BP__DL_F8E8M0FNU = 14
};

/* One table maps both ways. Sub-byte dtypes have no unpacked DLPack form
 * before DLPack 1.1, so they are absent (refused with a message). */
static const struct {
  uint32_t dtype;
  uint8_t code;
  uint8_t bits;
} k_dl_types[] = {
    {BP_DTYPE_F32, kDLFloat, 32},          {BP_DTYPE_F16, kDLFloat, 16},
    {BP_DTYPE_BF16, kDLBfloat, 16},        {BP_DTYPE_F64, kDLFloat, 64},
    {BP_DTYPE_I8, kDLInt, 8},              {BP_DTYPE_I16, kDLInt, 16},
    {BP_DTYPE_I32, kDLInt, 32},            {BP_DTYPE_I64, kDLInt, 64},
    {BP_DTYPE_U8, kDLUInt, 8},             {BP_DTYPE_U16, kDLUInt, 16},
    {BP_DTYPE_U32, kDLUInt, 32},           {BP_DTYPE_U64, kDLUInt, 64},
    {BP_DTYPE_BOOL, BP__DL_BOOL, 8},       {BP_DTYPE_C64, kDLComplex, 64},
    {BP_DTYPE_C128, kDLComplex, 128},      {BP_DTYPE_F8E4M3FN, BP__DL_F8E4M3FN, 8},
    {BP_DTYPE_F8E4M3FNUZ, BP__DL_F8E4M3FNUZ, 8}, {BP_DTYPE_F8E5M2, BP__DL_F8E5M2, 8},
    {BP_DTYPE_F8E5M2FNUZ, BP__DL_F8E5M2FNUZ, 8}, {BP_DTYPE_F8E8M0FNU, BP__DL_F8E8M0FNU, 8},
};
#define BP__DL_TYPES (sizeof k_dl_types / sizeof k_dl_types[0])

/* A DLTensor read into backplane terms. */
typedef struct dl_view {
  uint32_t dtype;
  uint32_t rank;
  int64_t sizes[BP_MAX_RANK];
  int64_t strides[BP_MAX_RANK];
  uint64_t extent; /* bytes from data + byte_offset to one past the last element */
} dl_view_t;

/* Validates `t` and fills `v`; INVALID_ARGUMENT naming the field that a
 * backplane tensor cannot represent. */
static bp_status_t dl_read(const char* fn, const DLTensor* t, dl_view_t* v) {
  if (t->dtype.lanes != 1)
    return bp__error(BP_INVALID_ARGUMENT,
                     "%s: dtype.lanes = %u: vector lanes have no backplane dtype (need 1)", fn,
                     (unsigned)t->dtype.lanes);
  v->dtype = BP_DTYPE_INVALID;
  for (size_t i = 0; i < BP__DL_TYPES; ++i)
    if (k_dl_types[i].code == t->dtype.code && k_dl_types[i].bits == t->dtype.bits)
      v->dtype = k_dl_types[i].dtype;
  if (v->dtype == BP_DTYPE_INVALID)
    return bp__error(BP_INVALID_ARGUMENT,
                     "%s: DLPack dtype (code %u, bits %u) has no backplane dtype", fn,
                     (unsigned)t->dtype.code, (unsigned)t->dtype.bits);
  if (t->ndim < 0 || t->ndim > BP_MAX_RANK)
    return bp__error(BP_INVALID_ARGUMENT, "%s: ndim %d is outside 0..%d", fn, t->ndim,
                     BP_MAX_RANK);
  v->rank = (uint32_t)t->ndim;
  if (v->rank > 0 && !t->shape)
    return bp__error(BP_INVALID_ARGUMENT, "%s: shape is NULL for ndim %d", fn, t->ndim);
  for (uint32_t d = 0; d < v->rank; ++d) {
    v->sizes[d] = t->shape[d];
    if (t->strides && t->strides[d] < 0)
      return bp__error(BP_INVALID_ARGUMENT,
                       "%s: strides[%u] = %lld: negative strides are not supported", fn, d,
                       (long long)t->strides[d]);
  }
  bp_status_t status = bp__tensor_check_shape(fn, v->dtype, v->rank, v->sizes, t->strides);
  if (status != BP_OK) return status;
  if (t->strides) {
    memcpy(v->strides, t->strides, v->rank * sizeof(int64_t));
  } else if (bp__dense_strides(v->rank, v->sizes, v->strides)) { /* NULL: compact row-major */
    return bp__error(BP_INVALID_ARGUMENT, "%s: the dense strides overflow 64 bits", fn);
  }
  uint64_t lo = 0;
  if (bp__tensor_span(v->dtype, v->rank, v->sizes, v->strides, 0, &lo, &v->extent) ||
      t->byte_offset > (uint64_t)INT64_MAX || v->extent > (uint64_t)INT64_MAX - t->byte_offset)
    return bp__error(BP_INVALID_ARGUMENT,
                     "%s: shape and strides reach past 2^63 bytes (the strides escape any "
                     "allocation)",
                     fn);
  if (v->extent > 0) {
    uintptr_t start = (uintptr_t)t->data + (uintptr_t)t->byte_offset;
    size_t esize = bp_dtype_size(v->dtype);
    if (!t->data)
      return bp__error(BP_INVALID_ARGUMENT, "%s: data is NULL for a non-empty tensor", fn);
    if (start % esize != 0)
      return bp__error(BP_INVALID_ARGUMENT,
                       "%s: data + byte_offset (%p + %llu) is not aligned to the %zu-byte element "
                       "of %s",
                       fn, t->data, (unsigned long long)t->byte_offset, esize,
                       bp_dtype_name(v->dtype));
  }
  return BP_OK;
}

/* Imports m's bytes as a buffer of `device` (space `memory_space`). An empty
 * tensor gets a zero-size buffer and its deleter runs at once (nothing is
 * shared). On failure before the plugin takes m, the caller still owns it. */
static bp_status_t dl_import_buffer(const char* fn, bp_device_t* device, DLManagedTensor* m,
                                    uint32_t memory_space, dl_view_t* v, bp_buffer_t** out) {
  bp_status_t status = dl_read(fn, &m->dl_tensor, v);
  if (status != BP_OK) return status;
  if (v->extent == 0) {
    status = bp_buffer_allocate(device, memory_space, 0, out);
    if (status == BP_OK && m->deleter) m->deleter(m);
    return status;
  }
  bp_external_buffer_desc_t desc = {.struct_size = sizeof(desc),
                                    .kind = BP_EXTERNAL_DLPACK,
                                    .size_bytes = v->extent,
                                    .offset_bytes = m->dl_tensor.byte_offset,
                                    .dlpack = m,
                                    .fd = -1,
                                    .memory_space = memory_space};
  return bp__buffer_import_checked(device, &desc, fn, out);
}

bp_status_t bp__buffer_import_dlpack(bp_device_t* device, const bp_external_buffer_desc_t* desc,
                                     bp_buffer_t** out_buffer) {
  static const char fn[] = "bp_buffer_import";
  dl_view_t v;
  BP__REQUIRE_ARG(fn, desc->dlpack);
  if (desc->size_bytes != 0 || desc->offset_bytes != 0)
    return bp__error(BP_INVALID_ARGUMENT,
                     "%s: size_bytes and offset_bytes must be 0 for DLPACK (the tensor's shape, "
                     "strides and byte_offset give them)",
                     fn);
  return dl_import_buffer(fn, device, desc->dlpack, desc->memory_space, &v, out_buffer);
}

bp_status_t bp_tensor_from_dlpack(bp_device_t* device, void* dl_managed_tensor,
                                  bp_tensor_t** out_tensor) {
  static const char fn[] = "bp_tensor_from_dlpack";
  bp_buffer_t* buffer = NULL;
  dl_view_t v;
  bp__clear_error();
  BP__REQUIRE_ARG(fn, device);
  BP__REQUIRE_ARG(fn, dl_managed_tensor);
  BP__REQUIRE_ARG(fn, out_tensor);
  bp_status_t status = dl_import_buffer(fn, device, dl_managed_tensor, 0, &v, &buffer);
  if (status != BP_OK) return status;
  /* The buffer starts at element [0, ..., 0] (strides are >= 0). */
  status = bp__tensor_wrap(buffer, v.dtype, v.rank, v.sizes, v.strides, 0, out_tensor);
  bp_buffer_release(buffer); /* the tensor holds its own reference */
  return status;
}

/* The application's DLManagedTensor: the plugin's (borrowing the buffer),
 * a buffer reference and the view's arrays. */
typedef struct dl_export {
  DLManagedTensor managed; /* handed out; manager_ctx points here */
  DLManagedTensor* inner;  /* the plugin's */
  bp_buffer_t* buffer;     /* one reference, dropped by the deleter */
  int64_t shape[BP_MAX_RANK];
  int64_t strides[BP_MAX_RANK];
} dl_export_t;

static void dl_export_delete(DLManagedTensor* self) {
  dl_export_t* e = self ? self->manager_ctx : NULL;
  if (!e) return;
  /* The plugin's borrow ends before its buffer can be released. */
  if (e->inner->deleter) e->inner->deleter(e->inner);
  bp_buffer_release(e->buffer);
  free(e);
}

/* A DLManagedTensor viewing `buffer` as dtype/rank/sizes/strides at
 * byte_offset (already checked against the buffer). */
static bp_status_t dl_export(const char* fn, bp_buffer_t* buffer, uint32_t dtype, uint32_t rank,
                             const int64_t* sizes, const int64_t* strides, uint64_t byte_offset,
                             DLManagedTensor** out) {
  size_t t = 0;
  while (t < BP__DL_TYPES && k_dl_types[t].dtype != dtype) ++t;
  if (t == BP__DL_TYPES)
    return bp__error(BP_INVALID_ARGUMENT, "%s: dtype %s has no DLPack form", fn,
                     bp_dtype_name(dtype));
  const bp_plugin_t* plugin = buffer->device->plugin;
  if (!plugin->core.buffer_export)
    return bp__error(BP_UNIMPLEMENTED, "%s: backend '%s' cannot export memory", fn, plugin->name);
  bp_external_buffer_desc_t desc = {
      .struct_size = sizeof(desc), .kind = BP_EXTERNAL_DLPACK, .fd = -1};
  bp_status_t status = BP__CORE_CALL(plugin, buffer_export, buffer->handle, &desc);
  if (status != BP_OK) return bp__plugin_error(plugin, status, "buffer_export");
  DLManagedTensor* inner = desc.dlpack;
  if (!inner)
    return bp__error(BP_INTERNAL, "%s: backend '%s' exported no DLManagedTensor", fn,
                     plugin->name);
  dl_export_t* e = calloc(1, sizeof(*e));
  if (!e) {
    if (inner->deleter) inner->deleter(inner);
    return bp__error(BP_RESOURCE_EXHAUSTED, "%s: out of host memory", fn);
  }
  memcpy(e->shape, sizes, rank * sizeof(int64_t));
  memcpy(e->strides, strides, rank * sizeof(int64_t));
  e->inner = inner;
  e->buffer = buffer;
  bp_buffer_retain(buffer);
  e->managed.dl_tensor = (DLTensor){
      .data = inner->dl_tensor.data,
      .device = inner->dl_tensor.device,
      .ndim = (int)rank,
      .dtype = {.code = k_dl_types[t].code, .bits = k_dl_types[t].bits, .lanes = 1},
      .shape = e->shape,
      .strides = e->strides,
      .byte_offset = inner->dl_tensor.byte_offset + byte_offset};
  e->managed.manager_ctx = e;
  e->managed.deleter = dl_export_delete;
  *out = &e->managed;
  return BP_OK;
}

bp_status_t bp__buffer_export_dlpack(bp_buffer_t* buffer, bp_external_buffer_desc_t* out) {
  const int64_t size = (int64_t)buffer->size, stride = 1;
  DLManagedTensor* m = NULL;
  bp_status_t status =
      dl_export("bp_buffer_export", buffer, BP_DTYPE_U8, 1, &size, &stride, 0, &m);
  if (status != BP_OK) return status;
  out->dlpack = m;
  out->size_bytes = buffer->size;
  out->offset_bytes = 0;
  return BP_OK;
}

bp_status_t bp_tensor_to_dlpack(bp_tensor_t* t, void** out_dl_managed_tensor) {
  static const char fn[] = "bp_tensor_to_dlpack";
  DLManagedTensor* m = NULL;
  bp__clear_error();
  BP__REQUIRE_ARG(fn, t);
  BP__REQUIRE_ARG(fn, out_dl_managed_tensor);
  *out_dl_managed_tensor = NULL;
  if (bp_dtype_bits(t->dtype) % 8 != 0)
    return bp__error(BP_INVALID_ARGUMENT,
                     "%s: %s is a packed sub-byte dtype, which DLPack 0.8 cannot describe", fn,
                     bp_dtype_name(t->dtype));
  bp_status_t status = dl_export(fn, t->buffer, t->dtype, t->rank, t->sizes, t->strides,
                                 t->byte_offset, &m);
  if (status == BP_OK) *out_dl_managed_tensor = m;
  return status;
}
