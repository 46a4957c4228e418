/* backplane CPU plugin: external memory (buffer_import / buffer_export).
 *
 * HOST_POINTER import wraps the caller's memory in place: no copy, not
 * counted in the memory budget, never freed here. The caller owns it and
 * keeps it valid until the buffer is released. Its start must be aligned to
 * CPU_EXTERNAL_ALIGNMENT, so a view of any dtype at an element-aligned
 * offset is aligned.
 *
 * DLPACK import takes the DLManagedTensor (the core has checked its shape,
 * strides and dtype and computed the extent) and calls its deleter when the
 * buffer is released. Only kDLCPU memory is host memory here.
 *
 * Export: HOST_POINTER returns the buffer's address (valid while the buffer
 * lives); DLPACK returns a DLManagedTensor of the whole buffer as 1-D uint8
 * that borrows the buffer (the host calls its deleter before releasing the
 * buffer; the deleter only frees the struct).
 *
 * Events: none to share. Work runs on host threads, not behind a kernel
 * object, so there is no semaphore or sync fd to export, and an imported
 * one could only be waited on by blocking a worker, which the core's
 * cross-plugin wait already does. The event slots stay NULL
 * (UNIMPLEMENTED).
 *
 * Thread-safe: no shared state. */
#include <dlpack/dlpack.h>
#include <stdlib.h>

#include "cpu_internal.h"

#define CPU_EXTERNAL_ALIGNMENT 16u /* the largest element (c128) */

static const char* kind_name(uint32_t kind) {
  switch (kind) {
    case BP_EXTERNAL_HOST_POINTER: return "HOST_POINTER";
    case BP_EXTERNAL_DLPACK: return "DLPACK";
    case BP_EXTERNAL_OPAQUE_FD: return "OPAQUE_FD";
    case BP_EXTERNAL_DMA_BUF_FD: return "DMA_BUF_FD";
    default: return "unknown";
  }
}

/* The deleter of an imported DLManagedTensor, run by the buffer's release. */
static void dlpack_release(void* external) {
  DLManagedTensor* m = external;
  if (m->deleter) m->deleter(m);
}

static bp_status_t import_host_pointer(bpp_device_t dev, const bp_external_buffer_desc_t* desc,
                                       bpp_buffer_t* out) {
  if (!desc->host_pointer)
    return cpu_error(BP_INVALID_ARGUMENT, "cpu: buffer_import: host_pointer is NULL");
  unsigned char* start = (unsigned char*)desc->host_pointer + desc->offset_bytes;
  if ((uintptr_t)start % CPU_EXTERNAL_ALIGNMENT != 0)
    return cpu_error(BP_INVALID_ARGUMENT,
                     "cpu: buffer_import: host memory at %p (host_pointer + offset_bytes) is not "
                     "aligned to %u bytes",
                     (void*)start, CPU_EXTERNAL_ALIGNMENT);
  return bp_kit_host_buffer_wrap(dev, start, desc->size_bytes, desc->memory_space, NULL, NULL, out);
}

static bp_status_t import_dlpack(bpp_device_t dev, const bp_external_buffer_desc_t* desc,
                                 bpp_buffer_t* out) {
  DLManagedTensor* m = desc->dlpack;
  if (!m) return cpu_error(BP_INVALID_ARGUMENT, "cpu: buffer_import: dlpack is NULL");
  const DLDevice where = m->dl_tensor.device;
  if (where.device_type != kDLCPU)
    return cpu_error(BP_INVALID_ARGUMENT,
                     "cpu: buffer_import: DLPack device_type %d is not host memory (the CPU "
                     "backend takes kDLCPU = %d)",
                     (int)where.device_type, (int)kDLCPU);
  if (!m->dl_tensor.data)
    return cpu_error(BP_INVALID_ARGUMENT, "cpu: buffer_import: DLPack data is NULL");
  unsigned char* start = (unsigned char*)m->dl_tensor.data + desc->offset_bytes;
  return bp_kit_host_buffer_wrap(dev, start, desc->size_bytes, desc->memory_space, dlpack_release,
                                 m, out);
}

bp_status_t cpu_buffer_import(bpp_device_t dev, const bp_external_buffer_desc_t* desc,
                              bpp_buffer_t* out) {
  if (out) *out = NULL;
  if (!dev || !desc || !out)
    return cpu_error(BP_INVALID_ARGUMENT, "cpu: buffer_import: NULL argument");
  if (desc->struct_size < BP_EXTERNAL_BUFFER_DESC_V1_SIZE)
    return cpu_error(BP_INVALID_ARGUMENT, "cpu: buffer_import: desc struct_size %u too small",
                     desc->struct_size);
  if (desc->memory_space >= CPU_MEMORY_SPACES)
    return cpu_error(BP_INVALID_ARGUMENT, "cpu: buffer_import: no memory space %u",
                     desc->memory_space);
  if (desc->size_bytes == 0)
    return cpu_error(BP_INVALID_ARGUMENT, "cpu: buffer_import: size_bytes is 0");
  switch (desc->kind) {
    case BP_EXTERNAL_HOST_POINTER: return import_host_pointer(dev, desc, out);
    case BP_EXTERNAL_DLPACK: return import_dlpack(dev, desc, out);
    default:
      return cpu_error(BP_UNIMPLEMENTED,
                       "cpu: buffer_import: kind %u (%s): the CPU backend imports host memory "
                       "only (map a file descriptor and import the HOST_POINTER)",
                       desc->kind, kind_name(desc->kind));
  }
}

/* A DLManagedTensor over a whole buffer as 1-D uint8; the struct holds its
 * own shape and stride. */
typedef struct cpu_dl_export {
  DLManagedTensor managed;
  int64_t shape;
  int64_t stride;
} cpu_dl_export_t;

static void dlpack_export_delete(DLManagedTensor* self) { free(self->manager_ctx); }

static bp_status_t export_dlpack(bpp_buffer_t b, bp_external_buffer_desc_t* out) {
  cpu_dl_export_t* e = calloc(1, sizeof *e);
  if (!e) return cpu_error(BP_RESOURCE_EXHAUSTED, "cpu: buffer_export: out of host memory");
  e->shape = (int64_t)b->size;
  e->stride = 1;
  e->managed.dl_tensor = (DLTensor){
      .data = b->ptr,
      .device = {.device_type = kDLCPU, .device_id = (int32_t)b->device->index},
      .ndim = 1,
      .dtype = {.code = kDLUInt, .bits = 8, .lanes = 1},
      .shape = &e->shape,
      .strides = &e->stride,
      .byte_offset = 0};
  e->managed.manager_ctx = e;
  e->managed.deleter = dlpack_export_delete;
  out->dlpack = &e->managed;
  return BP_OK;
}

bp_status_t cpu_buffer_export(bpp_buffer_t b, bp_external_buffer_desc_t* out) {
  if (!b || !out) return cpu_error(BP_INVALID_ARGUMENT, "cpu: buffer_export: NULL argument");
  if (out->struct_size < BP_EXTERNAL_BUFFER_DESC_V1_SIZE)
    return cpu_error(BP_INVALID_ARGUMENT, "cpu: buffer_export: out struct_size %u too small",
                     out->struct_size);
  bp_status_t status = BP_OK;
  switch (out->kind) {
    case BP_EXTERNAL_HOST_POINTER: out->host_pointer = b->ptr; break;
    case BP_EXTERNAL_DLPACK: status = export_dlpack(b, out); break;
    default:
      return cpu_error(BP_UNIMPLEMENTED,
                       "cpu: buffer_export: kind %u (%s): the CPU backend exports host memory "
                       "only (HOST_POINTER, DLPACK)",
                       out->kind, kind_name(out->kind));
  }
  if (status != BP_OK) return status;
  out->size_bytes = b->size;
  out->offset_bytes = 0;
  return BP_OK;
}
